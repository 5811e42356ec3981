"""ONNX graphs read as Maxout networks with exact rational weights.

Every float weight (float16/32/64) is the dyadic rational m / 2^e it denotes, read through
``float.as_integer_ratio()``: nothing is rounded.  The graph is run once symbolically:

- a tensor is either a constant (an exact array) or *affine*: an array T of shape (n + 1,) + S
  with T[0] the constant part and T[1 + v] the coefficient of variable v, the variables being
  the units of one level (level 0: the network's input, level l: the units of layer l);
- linear operators (Gemm, MatMul, Add, Sub, Mul/Div by constants, Reshape, Flatten, Squeeze,
  Unsqueeze, Transpose, Concat, Identity) act on T exactly, so consecutive affine maps are
  composed exactly;
- max-like operators (Relu = max(z, 0), variadic Max, ReduceMax, MaxPool) turn every element
  of an affine tensor of level l into one Maxout unit of layer l + 1 (its pieces: the
  arguments of the max), and give back the affine tensor "that unit" of level l + 1.

Affine tensors of different levels never meet (a skip connection is refused), so the result is
h^l = max(pieces of h^(l-1)), y = A h^D + c: exactly ``kernel.maxout.MaxoutNetwork``.
Mathematical semantics over the reals are imported, not float32 arithmetic.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..interruption import phase
from ..kernel.affine import Affine
from ..kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from ..kernel.rational import ONE, ZERO, Q, RatMatrix
from .errors import InputError

SUPPORTED = (
    "Gemm",
    "MatMul",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Neg",
    "Relu",
    "Max",
    "ReduceMax",
    "MaxPool",
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Transpose",
    "Identity",
    "Dropout",
    "Constant",
    "Concat",
    "Softmax (final, with --drop-final-softmax)",
)
SUPPORTED_LINE = "supported: " + ", ".join(SUPPORTED)
OPSETS = (7, 21)
MAX_INPUTS = 20_000
"""Most input numbers read: the affine tensors have (n + 1) x n exact entries per element."""
_ARITY = {
    "Gemm": (2, 3),
    "MatMul": (2, 2),
    "Add": (2, 2),
    "Sub": (2, 2),
    "Mul": (2, 2),
    "Div": (2, 2),
    "Neg": (1, 1),
    "Relu": (1, 1),
    "Max": (1, 2**31),
    "ReduceMax": (1, 2),
    "MaxPool": (1, 1),
    "Reshape": (1, 2),
    "Flatten": (1, 1),
    "Squeeze": (1, 2),
    "Unsqueeze": (1, 2),
    "Transpose": (1, 1),
    "Identity": (1, 1),
    "Dropout": (1, 3),
    "Constant": (0, 0),
    "Concat": (1, 2**31),
    "Softmax": (1, 1),
}
"""(least, most) inputs of each operator; the first ``least`` are required."""
_ATTRIBUTES = {
    "Gemm": ("alpha", "beta", "transA", "transB"),
    "ReduceMax": ("axes", "keepdims", "noop_with_empty_axes"),
    "MaxPool": (
        "auto_pad",
        "ceil_mode",
        "dilations",
        "kernel_shape",
        "pads",
        "storage_order",
        "strides",
    ),
    "Reshape": ("allowzero", "shape"),
    "Flatten": ("axis",),
    "Squeeze": ("axes",),
    "Unsqueeze": ("axes",),
    "Transpose": ("perm",),
    "Dropout": ("is_test", "ratio", "seed"),
    "Constant": ("value", "value_float", "value_floats", "value_int", "value_ints"),
    "Concat": ("axis",),
    "Softmax": ("axis",),
}
"""The attributes each operator has (those not listed have none); any other name is refused
rather than ignored (a misspelt ``transb`` would change the meaning)."""
_ATTRIBUTE_TYPES = {
    **dict.fromkeys(("alpha", "beta", "ratio", "value_float"), (1, "a float")),
    **dict.fromkeys(
        (
            "transA",
            "transB",
            "keepdims",
            "noop_with_empty_axes",
            "ceil_mode",
            "storage_order",
            "allowzero",
            "axis",
            "seed",
            "is_test",
            "value_int",
        ),
        (2, "an integer"),
    ),
    "auto_pad": (3, "a string"),
    "value_floats": (6, "a list of floats"),
    "value": (4, "a tensor"),
    **dict.fromkeys(
        ("axes", "kernel_shape", "pads", "strides", "dilations", "perm", "value_ints", "shape"),
        (7, "a list of integers"),
    ),
}
"""Each attribute's AttributeProto type (FLOAT 1, INT 2, STRING 3, TENSOR 4, FLOATS 6,
INTS 7)."""
_FLOAT_TYPES = (1, 10, 11)  # FLOAT, FLOAT16, DOUBLE
_INT_TYPES = (2, 3, 4, 5, 6, 7, 12, 13)


class _Refuse(Exception):
    """An unsupported or malformed node; the message is completed with the node's name."""


@dataclass
class ImportReport:
    input_dim: int = 0
    output_dim: int = 0
    opset: int = 0
    ir_version: int = 0
    operators: Counter = field(default_factory=Counter)
    weights: int = 0
    max_weight_denominator_bits: int = 0
    max_network_denominator_bits: int = 0
    dropped_softmax: bool = False

    def as_json(self, net: MaxoutNetwork) -> dict:
        return {
            "input_dim": self.input_dim,
            "output_dim": self.output_dim,
            "layers": [{"width": l.width, "rank": l.rank} for l in net.layers],
            "opset": self.opset,
            "ir_version": self.ir_version,
            "operators": dict(sorted(self.operators.items())),
            "weights": self.weights,
            "max_weight_denominator_bits": self.max_weight_denominator_bits,
            "max_network_denominator_bits": self.max_network_denominator_bits,
            "dropped_final_softmax": self.dropped_softmax,
        }


@dataclass
class _Aff:
    """An affine tensor of shape T.shape[1:] in the variables of ``level``."""

    T: np.ndarray
    level: int

    @property
    def shape(self):
        return self.T.shape[1:]


def _zeros(shape) -> np.ndarray:
    return np.full(shape, ZERO, dtype=object)


_to_q = np.frompyfunc(lambda v: Q(*float(v).as_integer_ratio()), 1, 1)
_int_to_q = np.frompyfunc(lambda v: Q(int(v)), 1, 1)


def _qs(arr: np.ndarray) -> np.ndarray:
    """The exact rationals of a float array (0-d arrays included), as an object array."""
    return np.asarray(_to_q(arr), dtype=object)


def _den_bits(v: Q) -> int:
    return int(v.q).bit_length() - 1


_Unit = list[tuple[tuple[Q, ...], Q]]
"""A maxout unit as its pieces (w, b): the unit computes max over the pieces of w . x + b."""


class _Graph:
    def __init__(self, path: str, report: ImportReport):
        self.path, self.report = path, report
        self.layers: list[list[_Unit]] = []  # per layer, its units

    # ------------------------------------------------------------------ values
    def width(self, level: int) -> int:
        return self.report.input_dim if level == 0 else len(self.layers[level - 1])

    def exact(self, a: np.ndarray) -> np.ndarray:
        """An exact (object) array from a constant."""
        if not isinstance(a, np.ndarray):  # a scalar left by a reduction of a constant
            a = np.asarray(a, dtype=object)
        if a.dtype == object:
            return a
        if a.dtype.kind in "iub":
            return (
                np.asarray(_int_to_q(a), dtype=object)
                if a.size
                else np.empty(a.shape, dtype=object)
            )
        raise _Refuse(f"a constant of type {a.dtype}")

    def padded(self, x: _Aff) -> np.ndarray:
        """T with a coefficient row for every unit its level has now."""
        n = self.width(x.level)
        if x.T.shape[0] == n + 1:
            return x.T
        extra = _zeros((n + 1 - x.T.shape[0],) + x.shape)
        return np.concatenate([x.T, extra])

    def lift(self, c: np.ndarray, level: int) -> np.ndarray:
        T = _zeros((self.width(level) + 1,) + c.shape)
        T[0, ...] = self.exact(c)
        return T

    def common(self, values, what: str):
        """The level shared by the affine values (None if all are constant) and each value as
        an array (n + 1,) + S with its own shape, right-aligned for broadcasting."""
        levels = {v.level for v in values if isinstance(v, _Aff)}
        if len(levels) > 1:
            raise _Refuse(
                f"{what} combines tensors after {sorted(levels)} nonlinear layers "
                "(a skip connection); only chains of layers are supported"
            )
        if not levels:
            return None, [self.exact(v) for v in values]
        level = levels.pop()
        arrays = [self.padded(v) if isinstance(v, _Aff) else self.lift(v, level) for v in values]
        rank = max(a.ndim for a in arrays)
        return level, [
            a.reshape(a.shape[:1] + (1,) * (rank - a.ndim) + a.shape[1:]) for a in arrays
        ]

    # ------------------------------------------------------------------ layers
    def new_units(self, level: int, pieces_per_element: np.ndarray, shape) -> _Aff:
        """One unit per element (its pieces: ``pieces_per_element[..., j]`` of shape
        (n + 1,) + S + (k,)) in layer level + 1; the affine tensor of these units."""
        if level < len(self.layers) - 1:
            raise _Refuse(
                "a max of a tensor from before the last nonlinear layer (a skip "
                "connection); only chains of layers are supported"
            )
        if level == len(self.layers):
            self.layers.append([])
        units = self.layers[level]
        start = len(units)
        P = pieces_per_element.reshape(
            pieces_per_element.shape[0], -1, pieces_per_element.shape[-1]
        )
        count = P.shape[1]
        for e in range(count):
            units.append([(tuple(P[1:, e, j]), P[0, e, j]) for j in range(P.shape[2])])
        T = _zeros((start + count + 1, count))
        for e in range(count):
            T[1 + start + e, e] = ONE
        return _Aff(T.reshape((start + count + 1,) + tuple(shape)), level + 1)


def _attrs(node) -> dict:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _norm_axes(axes, rank: int) -> list[int]:
    out = []
    for a in axes:
        a = int(a)
        if not -rank <= a < rank:
            raise _Refuse(f"axis {a} out of range for a tensor of rank {rank}")
        out.append(a % rank)
    if len(set(out)) != len(out):
        raise _Refuse(f"axes {[int(a) for a in axes]} name an axis twice")
    return out


def _shape_of(x) -> tuple:
    return x.shape if isinstance(x, _Aff) else np.shape(x)


def _structural(x, f):
    """Apply a shape operation f (on arrays whose first axis is kept) to a value."""
    if isinstance(x, _Aff):
        n1 = x.T.shape[0]
        return _Aff(np.stack([f(x.T[i]) for i in range(n1)]) if n1 else x.T, x.level)
    return f(x)


def _int_values(v, what: str) -> list[int]:
    if isinstance(v, _Aff) or v.dtype.kind not in "iu":
        raise _Refuse(f"{what} must be a constant integer tensor")
    return [int(t) for t in v.reshape(-1)]


def _product(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """The exact product of two 2-D object arrays: FLINT's rational matrices (one common
    denominator, an integer product in C) for large ones, numpy's object loop for small."""
    if A.shape[0] * A.shape[1] * B.shape[1] < 50_000:
        return np.matmul(A, B)
    P = RatMatrix(A.shape[0], A.shape[1], list(A.reshape(-1))) * RatMatrix(
        B.shape[0], B.shape[1], list(B.reshape(-1))
    )
    return np.array(P.entries(), dtype=object).reshape(A.shape[0], B.shape[1])


def _right(T: np.ndarray, M: np.ndarray) -> np.ndarray:
    """np.matmul(T, M) for T of rank >= 2 (the product over its last axis) and M of rank 1
    or 2."""
    M2 = M.reshape(-1, 1) if M.ndim == 1 else M
    out = _product(T.reshape(-1, T.shape[-1]), M2).reshape(T.shape[:-1] + M2.shape[1:])
    return out.reshape(T.shape[:-1]) if M.ndim == 1 else out


def _matmul(g: _Graph, a, b):
    if isinstance(a, _Aff) and isinstance(b, _Aff):
        raise _Refuse("a product of two tensors that depend on the input (bilinear)")
    if not isinstance(a, _Aff) and not isinstance(b, _Aff):
        return np.matmul(g.exact(a), g.exact(b))
    if isinstance(a, _Aff):
        M = g.exact(b)
        if M.ndim > 2 or len(a.shape) == 0:
            raise _Refuse("MatMul of an input-dependent tensor by a constant of rank > 2")
        return _Aff(_right(g.padded(a), M), a.level)
    M, T = g.exact(a), g.padded(b)
    if M.ndim > 2 or len(b.shape) == 0:
        raise _Refuse("MatMul of a constant of rank > 2 by an input-dependent tensor")
    if len(b.shape) == 1:
        return _Aff(_right(T, M.T), b.level)
    # M @ T over T's second-to-last axis: bring it first, multiply, put it back
    moved = np.moveaxis(T, -2, 0)
    rows = M.reshape(1, -1) if M.ndim == 1 else M
    out = _product(rows, moved.reshape(moved.shape[0], -1)).reshape(
        rows.shape[:1] + moved.shape[1:]
    )
    return _Aff(out[0] if M.ndim == 1 else np.moveaxis(out, 0, -2), b.level)


def _add(g: _Graph, a, b, sign: int):
    level, (x, y) = g.common([a, b], "Add/Sub")
    if level is None:
        return x + y if sign > 0 else x - y
    return _Aff(x + y if sign > 0 else x - y, level)


def _scale(g: _Graph, a, c, divide: bool):
    if isinstance(c, _Aff):
        raise _Refuse(
            "a product or quotient of two input-dependent tensors"
            if isinstance(a, _Aff)
            else "division by an input-dependent tensor"
            if divide
            else ""
        )
    c = g.exact(c)
    if divide:
        if any(v == 0 for v in c.reshape(-1)):
            raise _Refuse("division by zero")
        c = np.asarray(np.frompyfunc(lambda v: ONE / v, 1, 1)(c), dtype=object)
    if not isinstance(a, _Aff):
        return g.exact(a) * c
    T = g.padded(a)
    rank = max(T.ndim - 1, c.ndim)
    T = T.reshape(T.shape[:1] + (1,) * (rank - (T.ndim - 1)) + T.shape[1:])
    return _Aff(T * c.reshape((1,) + (1,) * (rank - c.ndim) + c.shape), a.level)


def _max_units(g: _Graph, values):
    """Elementwise max of broadcast values: one unit per element."""
    if len(values) == 1:
        return values[0]
    level, arrays = g.common(values, "Max")
    if level is None:
        return np.maximum.reduce(np.broadcast_arrays(*arrays))
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    stacked = np.stack([np.broadcast_to(a, shape) for a in arrays], axis=-1)
    return g.new_units(level, stacked, shape[1:])


def _reduce_max(g: _Graph, x, axes, keepdims: bool):
    S = _shape_of(x)
    axes = sorted(set(_norm_axes(axes, len(S)))) if axes else list(range(len(S)))
    out_shape = (
        tuple(1 if i in axes else d for i, d in enumerate(S))
        if keepdims
        else tuple(d for i, d in enumerate(S) if i not in axes)
    )
    if not isinstance(x, _Aff):
        if not np.size(x):
            return x
        return np.asarray(g.exact(x).max(axis=tuple(axes), keepdims=keepdims), dtype=object)
    T = g.padded(x)
    keep = [i for i in range(len(S)) if i not in axes]
    k = math.prod(S[i] for i in axes)
    if k == 0:
        raise _Refuse("ReduceMax over an empty axis")
    moved = np.transpose(T, [0] + [1 + i for i in keep] + [1 + i for i in axes])
    P = moved.reshape(moved.shape[: 1 + len(keep)] + (k,))
    return g.new_units(x.level, P, out_shape)


def _max_pool(g: _Graph, x, a: dict):
    if not isinstance(x, _Aff):
        raise _Refuse("MaxPool of a constant")
    if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", b"VALID", "NOTSET", "VALID"):
        raise _Refuse("MaxPool with auto_pad SAME_*; write explicit pads")
    S = x.shape
    ks = [int(v) for v in a["kernel_shape"]]
    sp = len(ks)
    if len(S) != sp + 2:
        raise _Refuse(f"MaxPool with a {sp}-D kernel on a tensor of rank {len(S)}")
    st = [int(v) for v in a.get("strides", [1] * sp)]
    dl = [int(v) for v in a.get("dilations", [1] * sp)]
    pads = [int(v) for v in a.get("pads", [0] * (2 * sp))]
    ceil = int(a.get("ceil_mode", 0))
    if (
        len(st) != sp
        or len(dl) != sp
        or len(pads) != 2 * sp
        or min(ks + st + dl) < 1
        or min(pads, default=0) < 0
        or ceil not in (0, 1)
    ):
        raise _Refuse(
            f"MaxPool with kernel_shape {ks}, strides {st}, dilations {dl}, pads {pads}, "
            f"ceil_mode {ceil}: expected {sp} positive strides and dilations, a positive "
            f"kernel, {2 * sp} pads >= 0 and ceil_mode 0 or 1"
        )
    outs = []
    for i in range(sp):
        span = (ks[i] - 1) * dl[i] + 1
        num = S[2 + i] + pads[i] + pads[sp + i] - span
        if num < 0:
            raise _Refuse(f"MaxPool's window ({span}) is larger than the padded input")
        outs.append((-(-num // st[i]) if ceil else num // st[i]) + 1)
    T = g.padded(x)
    import itertools

    windows = []
    for o in itertools.product(*(range(n) for n in outs)):
        idx = []
        for off in itertools.product(*(range(k) for k in ks)):
            pos = tuple(o[i] * st[i] - pads[i] + off[i] * dl[i] for i in range(sp))
            if all(0 <= p < S[2 + i] for i, p in enumerate(pos)):
                idx.append(pos)
        if not idx:
            raise _Refuse("MaxPool with a window entirely in the padding")
        windows.append(idx)
    k = max(len(w) for w in windows)
    P = _zeros(T.shape[:3] + (len(windows), k))
    for wi, idx in enumerate(windows):
        for j in range(k):  # a short window repeats its last piece (max is unchanged)
            P[:, :, :, wi, j] = T[(slice(None),) * 3 + idx[min(j, len(idx) - 1)]]
    return g.new_units(x.level, P.reshape(T.shape[:3] + tuple(outs) + (k,)), S[:2] + tuple(outs))


def _reshape(x, shape: list[int], allowzero: bool):
    S = _shape_of(x)
    new = [S[i] if (d == 0 and not allowzero and i < len(S)) else d for i, d in enumerate(shape)]
    if new.count(-1) > 1 or any(d < -1 for d in shape):
        raise _Refuse(f"Reshape to {shape}: one -1 at most, and no other negative size")
    try:
        np.empty(S, dtype=np.int8).reshape(new)
    except ValueError:
        raise _Refuse(f"cannot reshape {list(S)} to {shape}") from None
    return _structural(x, lambda a: a.reshape(new))


def _unsqueeze(x, axes):
    S = _shape_of(x)
    rank = len(S) + len(axes)
    axes = sorted(_norm_axes(axes, rank))
    new = list(S)
    for ax in axes:
        new.insert(ax, 1)
    return _structural(x, lambda a: a.reshape(new))


def _squeeze(x, axes):
    S = _shape_of(x)
    axes = _norm_axes(axes, len(S)) if axes is not None else [i for i, d in enumerate(S) if d == 1]
    if any(S[i] != 1 for i in axes):
        raise _Refuse("Squeeze of an axis whose size is not 1")
    new = [d for i, d in enumerate(S) if i not in axes]
    return _structural(x, lambda a: a.reshape(new))


def _concat(g: _Graph, values, axis: int):
    rank = len(_shape_of(values[0]))
    ax = _norm_axes([axis], rank)[0]
    level, _ = g.common(values, "Concat")
    if level is None:
        return np.concatenate([g.exact(v) for v in values], axis=ax)
    arrays = [g.padded(v) if isinstance(v, _Aff) else g.lift(v, level) for v in values]
    return _Aff(np.concatenate(arrays, axis=ax + 1), level)


def _gemm(g: _Graph, inputs, a: dict):
    A, B = inputs[0], inputs[1]
    if len(_shape_of(A)) != 2 or len(_shape_of(B)) != 2:
        raise _Refuse(
            f"Gemm of tensors of shapes {list(_shape_of(A))} and {list(_shape_of(B))}; "
            "A and B must be matrices"
        )
    if int(a.get("transA", 0)):
        A = _structural(A, lambda t: t.T)
    if int(a.get("transB", 0)):
        B = _structural(B, lambda t: t.T)
    alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
    if not (math.isfinite(alpha) and math.isfinite(beta)):
        raise _Refuse(f"Gemm with alpha {alpha} and beta {beta}: not finite numbers")
    Y = _matmul(g, A, B)
    if alpha != 1.0:
        Y = _scale(g, Y, _qs(np.array(alpha, dtype=np.float32)), False)
    if len(inputs) > 2 and inputs[2] is not None:
        C = inputs[2]
        shape_y, shape_c = tuple(_shape_of(Y)), tuple(_shape_of(C))
        if len(shape_c) > 2 or any(
            c not in (1, y) for c, y in zip(reversed(shape_c), reversed(shape_y))
        ):
            raise _Refuse(
                f"Gemm's C of shape {list(shape_c)} does not broadcast to A B's shape "
                f"{list(shape_y)}"
            )
        if beta != 1.0:
            C = _scale(g, C, _qs(np.array(beta, dtype=np.float32)), False)
        Y = _add(g, Y, C, 1)
    return Y


def _constant(g: _Graph, a: dict):
    from onnx import numpy_helper

    if "value" in a:
        return _tensor(g, a["value"], "value")
    if "value_float" in a:
        return _floats(g, np.array(a["value_float"], dtype=np.float32), "value_float")
    if "value_floats" in a:
        return _floats(g, np.array(a["value_floats"], dtype=np.float32), "value_floats")
    if "value_int" in a:
        return np.array(a["value_int"], dtype=np.int64)
    if "value_ints" in a:
        return np.array(a["value_ints"], dtype=np.int64)
    del numpy_helper
    raise _Refuse("a Constant without a value, value_float(s) or value_int(s)")


_INPUT_SINCE = {"ReduceMax": ("axes", 18), "Squeeze": ("axes", 13), "Unsqueeze": ("axes", 13)}
"""Operators whose ``axes`` moved from an attribute to an input at that opset: before it a
second input, from it the attribute, would be ignored, so either is refused."""


def _check_node(node, opset: int) -> None:
    """The operator's number of inputs and outputs, its required inputs present, and no
    attribute it does not have (at this opset)."""
    op = node.op_type
    if op not in _ARITY:
        raise _Refuse(f"unsupported operator {op}")
    least, most = _ARITY[op]
    if op in _INPUT_SINCE:
        name, since = _INPUT_SINCE[op]
        if opset < since:
            most = 1
        elif any(a.name == name for a in node.attribute):
            raise _Refuse(
                f"{op}'s {name} is an input from opset {since} on, not an attribute (opset {opset})"
            )
    if op == "Reshape":
        least = 2  # the shape is an input from opset 5 on (exactmax reads opsets 7 to 21)
        if any(a.name == "shape" for a in node.attribute):
            raise _Refuse(f"Reshape's shape is an input from opset 5 on (opset {opset})")
    n = len(node.input)
    if not least <= n <= most:
        raise _Refuse(
            f"{op} takes {least if least == most else f'{least} to {min(most, 99)}'} "
            f"inputs, got {n}"
        )
    if any(not name for name in node.input[:least]) or (
        op in ("Max", "Concat") and "" in node.input
    ):
        raise _Refuse(f"{op} with a required input left empty")
    if not node.output or not node.output[0]:
        raise _Refuse(f"{op} without an output")
    known = _ATTRIBUTES.get(op, ())
    for a in node.attribute:
        if a.name not in known:
            raise _Refuse(
                f"{op} has no attribute {a.name!r}"
                + (f" (its attributes: {', '.join(known)})" if known else "")
            )
        code, kind = _ATTRIBUTE_TYPES[a.name]
        if a.type != code:
            raise _Refuse(f"{op}'s attribute {a.name} must be {kind} (type {a.type})")


def _op(g: _Graph, node, inputs, opset: int, final: bool, drop_softmax: bool):
    op, a = node.op_type, _attrs(node)
    x = inputs[0] if inputs else None
    if op == "Dropout" and len(inputs) > 2 and inputs[2] is not None:
        mode = inputs[2]
        if isinstance(mode, _Aff) or np.size(mode) != 1 or bool(np.asarray(mode).reshape(-1)[0]):
            raise _Refuse("Dropout in training mode (random); only inference (training_mode false)")
    if op in ("Identity", "Dropout"):
        return x
    if op == "Constant":
        return _constant(g, a)
    if op == "Gemm":
        return _gemm(g, inputs, a)
    if op == "MatMul":
        return _matmul(g, inputs[0], inputs[1])
    if op in ("Add", "Sub"):
        return _add(g, inputs[0], inputs[1], 1 if op == "Add" else -1)
    if op == "Mul":
        if isinstance(inputs[0], _Aff):
            return _scale(g, inputs[0], inputs[1], False)
        return _scale(g, inputs[1], inputs[0], False)
    if op == "Div":
        return _scale(g, inputs[0], inputs[1], True)
    if op == "Neg":
        return _scale(g, x, np.array(Q(-1), dtype=object), False)
    if op == "Relu":
        return _max_units(g, [x, np.array(ZERO, dtype=object)])
    if op == "Max":
        return _max_units(g, [v for v in inputs if v is not None])
    if op == "ReduceMax":
        axes = a.get("axes")
        if opset >= 18:
            axes = (
                _int_values(inputs[1], "axes")
                if len(inputs) > 1 and inputs[1] is not None
                else None
            )
            if not axes and int(a.get("noop_with_empty_axes", 0)):
                return x
        return _reduce_max(g, x, axes, bool(int(a.get("keepdims", 1))))
    if op == "MaxPool":
        if len(node.output) > 1 and node.output[1]:
            raise _Refuse("MaxPool's Indices output")
        return _max_pool(g, x, a)
    if op == "Reshape":
        if opset < 5:
            return _reshape(x, list(a["shape"]), False)
        return _reshape(x, _int_values(inputs[1], "the shape"), bool(int(a.get("allowzero", 0))))
    if op == "Flatten":
        S = _shape_of(x)
        ax = int(a.get("axis", 1))
        ax = ax + len(S) if ax < 0 else ax
        if not 0 <= ax <= len(S):
            raise _Refuse(f"Flatten axis {a.get('axis')} out of range")
        new = [math.prod(S[:ax]), math.prod(S[ax:])]
        return _structural(x, lambda t: t.reshape(new))
    if op in ("Squeeze", "Unsqueeze"):
        axes = a.get("axes")
        if opset >= 13:
            axes = (
                _int_values(inputs[1], "axes")
                if len(inputs) > 1 and inputs[1] is not None
                else None
            )
        if op == "Unsqueeze":
            if axes is None:
                raise _Refuse("Unsqueeze without axes")
            return _unsqueeze(x, axes)
        return _squeeze(x, axes)
    if op == "Transpose":
        S = _shape_of(x)
        perm = [int(p) for p in a.get("perm", reversed(range(len(S))))]
        if sorted(perm) != list(range(len(S))):
            raise _Refuse(f"Transpose's perm {perm} is not a permutation of the {len(S)} axes")
        return _structural(x, lambda t: np.transpose(t, perm))
    if op == "Concat":
        return _concat(g, [v for v in inputs if v is not None], int(a["axis"]))
    if op == "Softmax":
        if final and drop_softmax:
            g.report.dropped_softmax = True
            return x
        raise _Refuse(
            "Softmax has no exact value; a final Softmax is dropped with "
            "--drop-final-softmax (for properties about the argmax only)"
            if final
            else "Softmax inside the network has no exact value"
        )
    raise _Refuse(f"unsupported operator {op}")


def _tensor(g: _Graph, t, what: str) -> np.ndarray:
    from onnx import numpy_helper

    if t.data_location == 1:
        raise _Refuse(f"{what}: external tensor data is not supported")
    if t.data_type not in _FLOAT_TYPES + _INT_TYPES + (9,):
        raise _Refuse(f"{what}: tensor element type {t.data_type} is not supported")
    try:
        arr = numpy_helper.to_array(t)
    except Exception as e:  # noqa: BLE001 - a malformed tensor, reported as bad input
        raise _Refuse(f"{what}: unreadable tensor ({e})") from None
    if t.data_type in _FLOAT_TYPES:
        return _floats(g, arr, what)
    return arr.astype(np.int64)


def _floats(g: _Graph, arr: np.ndarray, what: str) -> np.ndarray:
    arr = np.asarray(arr, dtype=np.float64)  # float16/32 -> float64 is exact
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise _Refuse(
            f"{what}: weight {list(map(int, bad))} is {arr[tuple(bad)]}, not a finite number"
        )
    out = _qs(arr) if arr.size else np.empty(arr.shape, dtype=object)
    g.report.weights += arr.size
    if arr.size:
        g.report.max_weight_denominator_bits = max(
            g.report.max_weight_denominator_bits, max(_den_bits(v) for v in out.reshape(-1))
        )
    return out


def _dims(vi, path: str) -> tuple:
    t = vi.type.tensor_type
    if not vi.type.HasField("tensor_type") or t.elem_type not in _FLOAT_TYPES:
        raise InputError(path, f"input {vi.name}", "expected a float tensor input")
    if not t.HasField("shape"):
        raise InputError(
            path,
            f"input {vi.name}",
            "has no shape; give the input's dimensions "
            "in the graph (a batch dimension may stay symbolic)",
        )
    dims = []
    for k, d in enumerate(t.shape.dim):
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(d.dim_value)
        elif k == 0 and not d.HasField("dim_value"):
            dims.append(1)  # a symbolic or unknown batch dimension: one input at a time
        else:
            what = (
                f"is {d.dim_value}"
                if d.HasField("dim_value")
                else f"is symbolic ({d.dim_param!r})"
                if d.dim_param
                else "is unknown"
            )
            raise InputError(
                path,
                f"input {vi.name}",
                f"dimension {k} {what}; every dimension but the leading (batch) one must be "
                "a positive number",
            )
    return tuple(dims)


_NO_OPS = ("Identity", "Dropout")  # Dropout: the reader refuses its training mode


def _names_of_the_output(graph, out_name: str) -> set[str]:
    """The graph's output and the names it copies through trailing no-op nodes (Identity,
    Dropout in inference mode): a node computing one of them is final, so a Softmax followed
    only by Identity is still the final Softmax that --drop-final-softmax drops."""
    producer = {o: node for node in graph.node for o in node.output[:1] if o}
    names, name = {out_name}, out_name
    while name in producer and producer[name].op_type in _NO_OPS and producer[name].input:
        name = producer[name].input[0]
        if not name or name in names:  # a missing input or a cycle: refused by the reader
            break
        names.add(name)
    return names


def import_onnx(path: str, drop_final_softmax: bool = False) -> tuple[MaxoutNetwork, ImportReport]:
    """The Maxout network an ONNX file denotes (see the module docstring) and a report."""
    try:
        import onnx
    except ImportError:  # pragma: no cover - onnx is a dependency
        raise InputError(
            path, "", "reading ONNX needs the onnx package (pip install onnx)"
        ) from None
    if not os.path.isfile(path):
        raise InputError(path, "", "no such file" if not os.path.exists(path) else "not a file")
    try:
        with phase(f"parsing the ONNX file {path} (onnx.load)"):
            model = onnx.load(path, load_external_data=False)
    except Exception as e:  # noqa: BLE001 - protobuf's errors have no common base
        raise InputError(
            path,
            "",
            f"not a readable ONNX file ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else 'corrupt protobuf'})",
        ) from None
    graph = model.graph
    if not graph.node and not graph.output:
        raise InputError(path, "", "not an ONNX model (no graph); the file is empty or corrupt")
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if len(versions) > 1:
        raise InputError(
            path, "", f"the default operator set is imported {len(versions)} times ({versions})"
        )
    opset = versions[0] if versions else 0
    if not OPSETS[0] <= opset <= OPSETS[1]:
        raise InputError(
            path, "", f"opset {opset} is not supported (opsets {OPSETS[0]} to {OPSETS[1]})"
        )
    report = ImportReport(opset=opset, ir_version=model.ir_version)
    g = _Graph(path, report)
    values: dict[str, object] = {}
    for t in graph.initializer:
        if t.name in values:
            raise InputError(
                path, f"initializer {t.name}", "is defined twice (a graph defines each name once)"
            )
        try:
            values[t.name] = _tensor(g, t, f"initializer {t.name}")
        except _Refuse as e:
            raise InputError(path, f"initializer {t.name}", str(e)) from None
    real_inputs = [vi for vi in graph.input if vi.name not in values]
    if len(real_inputs) != 1 or len(graph.output) != 1:
        raise InputError(
            path,
            "",
            f"expected one input and one output (besides the "
            f"initializers), got {len(real_inputs)} and {len(graph.output)}",
        )
    S = _dims(real_inputs[0], path)
    n0 = math.prod(S)
    if n0 > MAX_INPUTS:
        raise InputError(
            path,
            f"input {real_inputs[0].name}",
            f"has {n0} numbers (shape {list(S)}); the reader handles at most {MAX_INPUTS}",
        )
    report.input_dim = n0
    T = _zeros((n0 + 1, n0))
    for i in range(n0):
        T[1 + i, i] = ONE
    values[real_inputs[0].name] = _Aff(T.reshape((n0 + 1,) + S), 0)
    out_name = graph.output[0].name
    final = _names_of_the_output(graph, out_name)
    for index, node in enumerate(graph.node):
        where = f"node {index} ({node.name or 'unnamed'}, {node.op_type})"
        if node.domain not in ("", "ai.onnx"):
            raise InputError(
                path, where, f"operator domain {node.domain!r} is not supported; {SUPPORTED_LINE}"
            )
        try:
            _check_node(node, opset)
            missing = [n for n in node.input if n and n not in values]
            if missing:
                raise _Refuse(f"input {missing[0]!r} is not defined before this node")
            if node.output[0] in values:
                raise _Refuse(
                    f"output {node.output[0]!r} is already defined (a graph defines each name once)"
                )
            inputs = [values[n] if n else None for n in node.input]
            report.operators[node.op_type] += 1
            out = _op(g, node, inputs, opset, node.output[0] in final, drop_final_softmax)
        except _Refuse as e:
            raise InputError(path, where, f"{e}; {SUPPORTED_LINE}") from None
        except (KeyError, ValueError, IndexError, TypeError) as e:
            raise InputError(
                path, where, f"malformed node ({type(e).__name__}: {e}); {SUPPORTED_LINE}"
            ) from None
        values[node.output[0]] = out
    if out_name not in values:
        raise InputError(path, f"output {out_name}", "is not computed by any node")
    net = _network(g, values[out_name], path)
    report.output_dim = net.out_dim
    report.max_network_denominator_bits = max(
        [_den_bits(v) for l in net.layers for u in l.units for p in u.pieces for v in p.w + (p.b,)]
        + (
            [_den_bits(v) for row in net.output.W for v in row]
            + [_den_bits(v) for v in net.output.b]
            if net.output is not None
            else []
        ),
        default=0,
    )
    return net, report


def _network(g: _Graph, out, path: str) -> MaxoutNetwork:
    if not isinstance(out, _Aff):
        out = _Aff(g.lift(np.asarray(out), len(g.layers)), len(g.layers))
    if out.level != len(g.layers):
        raise InputError(
            path,
            "",
            "the output does not depend on the last nonlinear layer "
            "(a skip connection); only chains of layers are supported",
        )
    if not g.layers:  # an affine network: one layer of rank-1 units, the identity
        g.layers.append(
            [
                [(tuple(ONE if j == i else ZERO for j in range(g.width(0))), ZERO)]
                for i in range(g.width(0))
            ]
        )
        T = g.padded(out)
        out = _Aff(np.concatenate([T[:1], T[1:]]), 1)
    layers, width = [], g.report.input_dim
    for units in g.layers:
        layers.append(
            Layer(
                tuple(
                    Unit(tuple(Piece(tuple(w) + (ZERO,) * (width - len(w)), b) for w, b in pieces))
                    for pieces in units
                )
            )
        )
        width = len(units)
    T = g.padded(out).reshape(width + 1, -1)
    W = tuple(tuple(T[1 + v, i] for v in range(width)) for i in range(T.shape[1]))
    b = tuple(T[0, i] for i in range(T.shape[1]))
    identity = (
        len(W) == width
        and not any(b)
        and all(W[i][j] == (ONE if i == j else ZERO) for i in range(width) for j in range(width))
    )
    output = None if identity else Affine(W, b, width)
    return MaxoutNetwork(
        g.report.input_dim, tuple(layers), output, None, {"imported_from": os.path.basename(path)}
    )


def load_onnx(path: str, drop_final_softmax: bool = False) -> MaxoutNetwork:
    return import_onnx(path, drop_final_softmax)[0]
