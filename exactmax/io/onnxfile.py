"""ONNX graphs read as Maxout networks with exact rational weights.

Every float weight (float16/32/64) is the dyadic rational m / 2^e it denotes, read through
``float.as_integer_ratio()``: nothing is rounded but BatchNormalization's square root (below).
The graph is run once symbolically on affine tensors (``affine_tensors``: arrays of sparse rows,
each an exact affine function of one level's units; level 0 is the input):

- linear operators act on the rows exactly, so consecutive affine maps are composed exactly:
  Gemm, MatMul, Add, Sub, Sum, Mul/Div by constants, Neg, Conv and ConvTranspose (sparse maps:
  a row holds its window), AveragePool, GlobalAveragePool, ReduceSum, ReduceMean, Pad, Slice,
  Gather, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Identity;
  BatchNormalization (inference) is the affine map y = s (x - mean) + B with s = scale /
  sqrt(var + epsilon): exact when that square root is rational, otherwise s is the double
  nearest to it (counted in the import report);
- max-like operators turn every element into one Maxout unit of the next layer, its pieces the
  arguments of the max: Relu = max(z, 0), Max, ReduceMax, MaxPool, GlobalMaxPool (the window),
  Abs = max(z, -z), LeakyRelu and PRelu = max(z, a z) (min(z, a z) for a slope a > 1), and
  through min(u, v) = -max(-u, -v): Min, ReduceMin, Clip (two layers when both bounds are
  given);
- tensors of different depths meet (residual connections, Concat of branches): the shallower
  one is carried to the deeper level through rank-1 units, each equal to its one piece.

The result is h^l = max(pieces of h^(l-1)), y = A h^D + c: exactly ``kernel.maxout.
MaxoutNetwork``, with mixed ranks.  Mathematical semantics over the reals are imported, not
float32 arithmetic.  Operators that are not piecewise linear (Sigmoid, Tanh, Exp, ...) are
refused, as is anything whose value depends on the input in a non-affine way.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..interruption import phase
from ..kernel.affine import Affine, Row, row_of
from ..kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from ..kernel.rational import ONE, ZERO, Q
from . import onnx_spatial as spatial
from .affine_tensors import (
    CONST,
    Aff,
    Layers,
    add_rows,
    combination,
    contract,
    lift,
    negate,
    scale_rows,
)
from .errors import InputError
from .onnx_spatial import Refuse as _Refuse

SUPPORTED = (
    "Gemm",
    "MatMul",
    "Add",
    "Sub",
    "Sum",
    "Mul",
    "Div",
    "Neg",
    "Relu",
    "LeakyRelu",
    "PRelu",
    "Abs",
    "Clip",
    "Max",
    "Min",
    "ReduceMax",
    "ReduceMin",
    "ReduceSum",
    "ReduceMean",
    "MaxPool",
    "GlobalMaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "Conv",
    "ConvTranspose",
    "BatchNormalization",
    "Pad",
    "Slice",
    "Gather",
    "Shape",
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
NOT_PIECEWISE_LINEAR = frozenset(
    "Sigmoid HardSigmoid Tanh Softplus Softsign Exp Log Elu Selu Celu Gelu Mish Erf Sqrt Pow "
    "Reciprocal Sin Cos Tan Atan Asin Acos Sinh Cosh Asinh Acosh Atanh LogSoftmax HardSwish "
    "Floor Ceil Round Sign ThresholdedRelu".split()
)
"""Operators refused with the reason "not piecewise linear (continuous)": smooth
nonlinearities, and steps, which are piecewise constant but not continuous."""
OPSETS = (7, 21)
MAX_INPUTS = 20_000
"""Most input numbers read."""
_MANY = 2**31
_ARITY = {
    "Gemm": (2, 3),
    "MatMul": (2, 2),
    "Add": (2, 2),
    "Sub": (2, 2),
    "Sum": (1, _MANY),
    "Mul": (2, 2),
    "Div": (2, 2),
    "Neg": (1, 1),
    "Relu": (1, 1),
    "LeakyRelu": (1, 1),
    "PRelu": (2, 2),
    "Abs": (1, 1),
    "Clip": (1, 3),
    "Max": (1, _MANY),
    "Min": (1, _MANY),
    "ReduceMax": (1, 2),
    "ReduceMin": (1, 2),
    "ReduceSum": (1, 2),
    "ReduceMean": (1, 2),
    "MaxPool": (1, 1),
    "GlobalMaxPool": (1, 1),
    "AveragePool": (1, 1),
    "GlobalAveragePool": (1, 1),
    "Conv": (2, 3),
    "ConvTranspose": (2, 3),
    "BatchNormalization": (5, 5),
    "Pad": (2, 4),
    "Slice": (3, 5),
    "Gather": (2, 2),
    "Shape": (1, 1),
    "Reshape": (1, 2),
    "Flatten": (1, 1),
    "Squeeze": (1, 2),
    "Unsqueeze": (1, 2),
    "Transpose": (1, 1),
    "Identity": (1, 1),
    "Dropout": (1, 3),
    "Constant": (0, 0),
    "Concat": (1, _MANY),
    "Softmax": (1, 1),
}
"""(least, most) inputs of each operator; the first ``least`` are required."""
_REDUCE = ("axes", "keepdims", "noop_with_empty_axes")
_POOL = ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides")
_ATTRIBUTES = {
    "Gemm": ("alpha", "beta", "transA", "transB"),
    "LeakyRelu": ("alpha",),
    "Clip": ("min", "max"),
    "ReduceMax": _REDUCE,
    "ReduceMin": _REDUCE,
    "ReduceSum": _REDUCE,
    "ReduceMean": _REDUCE,
    "MaxPool": _POOL + ("storage_order",),
    "AveragePool": _POOL + ("count_include_pad",),
    "Conv": ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"),
    "ConvTranspose": (
        "auto_pad",
        "dilations",
        "group",
        "kernel_shape",
        "output_padding",
        "output_shape",
        "pads",
        "strides",
    ),
    "BatchNormalization": ("epsilon", "momentum", "training_mode", "spatial"),
    "Pad": ("mode", "pads", "value"),
    "Slice": ("starts", "ends", "axes"),
    "Gather": ("axis",),
    "Shape": ("start", "end"),
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
_FLOAT, _INT, _STRING, _TENSOR, _FLOATS, _INTS = (
    (1, "a float"),
    (2, "an integer"),
    (3, "a string"),
    (4, "a tensor"),
    (6, "a list of floats"),
    (7, "a list of integers"),
)
_ATTRIBUTE_TYPES: dict[object, tuple[int, str]] = {
    **dict.fromkeys(("alpha", "beta", "ratio", "value_float", "epsilon", "momentum"), _FLOAT),
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
            "group",
            "count_include_pad",
            "training_mode",
            "spatial",
            "start",
            "end",
        ),
        _INT,
    ),
    **dict.fromkeys(("auto_pad", "mode"), _STRING),
    "value_floats": _FLOATS,
    "value": _TENSOR,
    **dict.fromkeys(
        (
            "axes",
            "kernel_shape",
            "pads",
            "strides",
            "dilations",
            "perm",
            "value_ints",
            "shape",
            "output_padding",
            "output_shape",
            "starts",
            "ends",
        ),
        _INTS,
    ),
    ("Pad", "value"): _FLOAT,
    ("Clip", "min"): _FLOAT,
    ("Clip", "max"): _FLOAT,
}
"""Each attribute's AttributeProto type (FLOAT 1, INT 2, STRING 3, TENSOR 4, FLOATS 6,
INTS 7); (operator, name) where one name has two types."""
_FLOAT_TYPES = (1, 10, 11)  # FLOAT, FLOAT16, DOUBLE
_F32_EPSILON = float(np.float32(1e-5))
_F32_ALPHA = float(np.float32(0.01))
_F32_MAX = float(np.finfo(np.float32).max)
"""Float attributes' defaults are float32 numbers (as onnxruntime reads them): BatchNormalization's
epsilon 1e-5 and LeakyRelu's alpha 0.01, rounded to float32; Clip-6's bounds -+FLT_MAX."""
_INT_TYPES = (2, 3, 4, 5, 6, 7, 12, 13)


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
    rounded_square_roots: int = 0
    carried_units: int = 0

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
            "rounded_square_roots": self.rounded_square_roots,
            "carried_units": self.carried_units,
        }


_to_q = np.frompyfunc(lambda v: Q(*float(v).as_integer_ratio()), 1, 1)
_int_to_q = np.frompyfunc(lambda v: Q(int(v)), 1, 1)


def _qs(arr: np.ndarray) -> np.ndarray:
    """The exact rationals of a float array (0-d arrays included), as an object array."""
    return np.asarray(_to_q(arr), dtype=object)


def _q(v: float) -> Q:
    """The exact value of a float attribute; infinity and NaN are refused."""
    if not math.isfinite(v):
        raise _Refuse(f"a float attribute is {v}, not a finite number")
    return Q(*float(v).as_integer_ratio())


def _den_bits(v: Q) -> int:
    return int(v.q).bit_length() - 1


class _Graph(Layers):
    def __init__(self, path: str, report: ImportReport):
        super().__init__(0)
        self.path, self.report = path, report

    def exact(self, a) -> np.ndarray:
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

    def common(self, values):
        """``Layers.common`` with the constants made exact first."""
        return super().common([v if isinstance(v, Aff) else self.exact(v) for v in values])


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
    return x.shape if isinstance(x, Aff) else np.shape(x)


def _structural(x, f):
    """Apply a shape operation f (reshape, transpose, indexing) to a value."""
    return Aff(f(x.E), x.level) if isinstance(x, Aff) else f(x)


def _int_values(v, what: str) -> list[int]:
    if isinstance(v, Aff) or v.dtype.kind not in "iu":
        raise _Refuse(f"{what} must be a constant integer tensor")
    return [int(t) for t in v.reshape(-1)]


def _constant_of(g: _Graph, v, what: str) -> np.ndarray:
    if isinstance(v, Aff):
        raise _Refuse(f"{what} must be a constant, not a tensor that depends on the input")
    return g.exact(v)


def _matmul(g: _Graph, a, b):
    if isinstance(a, Aff) and isinstance(b, Aff):
        raise _Refuse("a product of two tensors that depend on the input (bilinear)")
    if not isinstance(a, Aff) and not isinstance(b, Aff):
        return np.matmul(g.exact(a), g.exact(b))
    if isinstance(a, Aff):
        M = g.exact(b)
        if M.ndim > 2 or len(a.shape) == 0:
            raise _Refuse("MatMul of an input-dependent tensor by a constant of rank > 2")
        M2 = M.reshape(-1, 1) if M.ndim == 1 else M
        if a.shape[-1] != M2.shape[0]:
            raise _Refuse(f"MatMul of shapes {list(a.shape)} and {list(M.shape)}")
        E = a.E
        Y = contract(E.reshape(-1, E.shape[-1]), M2).reshape(E.shape[:-1] + M2.shape[1:])
        return Aff(Y.reshape(E.shape[:-1]) if M.ndim == 1 else Y, a.level)
    M = g.exact(a)
    if M.ndim > 2 or len(b.shape) == 0:
        raise _Refuse("MatMul of a constant of rank > 2 by an input-dependent tensor")
    rows = M.reshape(1, -1) if M.ndim == 1 else M
    k = b.shape[0] if len(b.shape) == 1 else b.shape[-2]
    if rows.shape[1] != k:
        raise _Refuse(f"MatMul of shapes {list(M.shape)} and {list(b.shape)}")
    if len(b.shape) == 1:
        Y = contract(b.E.reshape(1, -1), rows.T).reshape(rows.shape[:1])
        return Aff(Y[0] if M.ndim == 1 else Y, b.level)
    X = np.moveaxis(b.E, -2, -1)  # (..., q, k)
    Y = contract(X.reshape(-1, k), rows.T).reshape(X.shape[:-1] + rows.shape[:1])
    Y = np.moveaxis(Y, -1, -2)  # (..., p, q)
    return Aff(Y[..., 0, :] if M.ndim == 1 else Y, b.level)


def _add(g: _Graph, a, b, sign: int = 1):
    level, (x, y) = g.common([a, b])
    if level is None:
        return x + y if sign > 0 else x - y
    _broadcastable(x, y)
    return Aff(add_rows(x, y if sign > 0 else negate(y)), level)


def _broadcastable(*arrays) -> tuple:
    try:
        return np.broadcast_shapes(*(np.shape(a) for a in arrays))
    except ValueError:
        raise _Refuse(
            "shapes " + ", ".join(str(list(np.shape(a))) for a in arrays) + " do not broadcast"
        ) from None


def _scale(g: _Graph, a, c, divide: bool = False):
    if isinstance(c, Aff):
        raise _Refuse(
            "a product or quotient of two input-dependent tensors"
            if isinstance(a, Aff)
            else "division by an input-dependent tensor"
            if divide
            else ""
        )
    c = g.exact(c)
    if divide:
        if any(v == 0 for v in c.reshape(-1)):
            raise _Refuse("division by zero")
        c = np.asarray(np.frompyfunc(lambda v: ONE / v, 1, 1)(c), dtype=object)
    if not isinstance(a, Aff):
        return g.exact(a) * c
    _broadcastable(a.E, c)
    return Aff(scale_rows(a.E, c), a.level)


def _max_units(g: _Graph, values, minimum: bool = False):
    """Elementwise max (min) of broadcast values: one unit per element."""
    if len(values) == 1:
        return values[0]
    level, arrays = g.common(values)
    if level is None:
        reduce = np.minimum.reduce if minimum else np.maximum.reduce
        return np.asarray(reduce(np.broadcast_arrays(*arrays)), dtype=object)
    shape = _broadcastable(*arrays)
    if minimum:
        arrays = [negate(np.asarray(a)) for a in arrays]
    stacked = np.stack([np.broadcast_to(a, shape) for a in arrays], axis=-1)
    u = g.units_of(level, stacked)
    return Aff(negate(u.E), u.level) if minimum else u


def _reduce(g: _Graph, x, axes, keepdims: bool, kind: str):
    S = _shape_of(x)
    axes = sorted(set(_norm_axes(axes, len(S)))) if axes else list(range(len(S)))
    out_shape = (
        tuple(1 if i in axes else d for i, d in enumerate(S))
        if keepdims
        else tuple(d for i, d in enumerate(S) if i not in axes)
    )
    k = math.prod(S[i] for i in axes)
    if not isinstance(x, Aff):
        v = g.exact(x)
        if kind in ("max", "min") and not v.size:
            return v
        if kind == "max":
            r = v.max(axis=tuple(axes), keepdims=keepdims)
        elif kind == "min":
            r = v.min(axis=tuple(axes), keepdims=keepdims)
        else:
            r = v.sum(axis=tuple(axes), keepdims=keepdims)
            if kind == "mean":
                r = r / Q(k)
        return np.asarray(r, dtype=object)
    if k == 0:
        raise _Refuse(f"a reduction ({kind}) over an empty axis")
    keep = [i for i in range(len(S)) if i not in axes]
    moved = np.transpose(x.E, keep + axes)
    P = moved.reshape(moved.shape[: len(keep)] + (k,))
    if kind in ("max", "min"):
        u = _pieces_units(g, x.level, P, kind == "min")
        return Aff(u.E.reshape(out_shape), u.level)
    c: Q = ONE if kind == "sum" else ONE / Q(k)
    flat = P.reshape(-1, k)
    out = np.empty(flat.shape[0], dtype=object)
    for i in range(flat.shape[0]):
        out[i] = combination((c, row) for row in flat[i])
    return Aff(out.reshape(out_shape), x.level)


def _pieces_units(g: _Graph, level: int, P: np.ndarray, minimum: bool) -> Aff:
    """One unit per element of P (rows of ``level``, shape S + (k,)): the max of its k pieces,
    or their min as -max(-p)."""
    if not minimum:
        return g.units_of(level, P)
    u = g.units_of(level, negate(P))
    return Aff(negate(u.E), u.level)


def _slope_units(g: _Graph, x, slope: np.ndarray):
    """max(z, a z) elementwise for slopes a <= 1 (LeakyRelu, PRelu), min(z, a z) for a > 1:
    z for z >= 0 and a z below, in both cases."""
    try:
        shape = np.broadcast_shapes(_shape_of(x), slope.shape)
    except ValueError:
        shape = None
    if shape is None or tuple(shape) != tuple(_shape_of(x)):
        raise _Refuse(
            f"a slope of shape {list(slope.shape)} does not broadcast to the input's "
            f"{list(_shape_of(x))}"
        )
    a = np.broadcast_to(slope, shape)
    if not isinstance(x, Aff):
        c = g.exact(x)
        return np.where(np.asarray(c >= 0, dtype=bool), c, a * c).astype(object)
    low = np.asarray(np.frompyfunc(lambda v: v <= 1, 1, 1)(a), dtype=bool).reshape(shape)
    E, aE = x.E, scale_rows(x.E, a)
    P = np.stack([np.where(low, E, negate(E)), np.where(low, aE, negate(aE))], axis=-1)
    u = g.units_of(x.level, P)
    return Aff(np.where(low, u.E, negate(u.E)), u.level)


def _sqrt_rounded(t: Q) -> tuple[Q, bool]:
    """sqrt(t) for a rational t > 0: exact when it is rational, else the double nearest to it
    (from a 256-bit integer square root); and whether it is exact."""
    p, q = int(t.p), int(t.q)
    rp, rq = math.isqrt(p), math.isqrt(q)
    if rp * rp == p and rq * rq == q:
        return Q(rp, rq), True
    K = 256 + max(0, q.bit_length() - p.bit_length())
    m = math.isqrt((p << (2 * K)) // q)
    return _q(float(Fraction(m, 1 << K))), False


def _batch_norm(g: _Graph, node, inputs, a: dict):
    """BatchNormalization in inference: y = s (x - mean) + B per channel (axis 1), s = scale /
    sqrt(var + epsilon) (see ``_sqrt_rounded``)."""
    if int(a.get("training_mode", 0)):
        raise _Refuse("BatchNormalization in training mode (batch statistics); only inference")
    if not int(a.get("spatial", 1)):
        raise _Refuse("BatchNormalization with spatial 0 (per-activation statistics)")
    if any(node.output[1:]):
        raise _Refuse("BatchNormalization's running mean and variance outputs (training only)")
    x = inputs[0]
    S = _shape_of(x)
    if len(S) < 2:
        raise _Refuse(f"BatchNormalization of a tensor of shape {list(S)}: no channel axis")
    C = S[1]
    scale, B, mean, var = (
        _constant_of(g, v, f"BatchNormalization's {w}")
        for v, w in zip(inputs[1:], ("scale", "B", "mean", "var"))
    )
    if not all(v.shape == (C,) for v in (scale, B, mean, var)):
        raise _Refuse(
            f"BatchNormalization's scale, B, mean and var must each have shape [{C}] (the channels)"
        )
    eps = _q(a.get("epsilon", _F32_EPSILON))
    s, shift = np.empty(C, dtype=object), np.empty(C, dtype=object)
    for c in range(C):
        d = var[c] + eps
        if d <= 0:
            raise _Refuse(f"BatchNormalization's var + epsilon is {d} <= 0 at channel {c}")
        if scale[c] == 0:
            s[c] = ZERO
        else:
            r, exact = _sqrt_rounded(scale[c] * scale[c] / d)
            s[c] = r if scale[c] > 0 else -r
            g.report.rounded_square_roots += not exact
        shift[c] = B[c] - s[c] * mean[c]
    tail = (1,) * (len(S) - 2)
    return _add(g, _scale(g, x, s.reshape((C,) + tail)), shift.reshape((C,) + tail))


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
    level, arrays = g.common(values)
    try:
        out = np.concatenate(arrays, axis=ax)
    except ValueError:
        raise _Refuse(
            f"Concat on axis {axis} of shapes " + ", ".join(str(list(_shape_of(v))) for v in values)
        ) from None
    return out if level is None else Aff(out, level)


def _gather(g: _Graph, x, indices, axis: int):
    S = _shape_of(x)
    ax = _norm_axes([axis], len(S))[0]
    idx = np.asarray(indices)
    if isinstance(indices, Aff) or idx.dtype.kind not in "iu":
        raise _Refuse("Gather's indices must be a constant integer tensor")
    if idx.size and (idx.min() < -S[ax] or idx.max() >= S[ax]):
        raise _Refuse(f"Gather's indices leave the axis of size {S[ax]}")
    idx = np.where(idx < 0, idx + S[ax], idx)
    return _structural(x, lambda a: np.take(a, idx, axis=ax))


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
        Y = _scale(g, Y, _qs(np.array(alpha, dtype=np.float32)))
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
            C = _scale(g, C, _qs(np.array(beta, dtype=np.float32)))
        Y = _add(g, Y, C)
    return Y


def _constant(g: _Graph, a: dict):
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
    raise _Refuse("a Constant without a value, value_float(s) or value_int(s)")


_INPUT_SINCE = {
    "ReduceMax": (("axes",), 18),
    "ReduceMin": (("axes",), 18),
    "ReduceMean": (("axes",), 18),
    "ReduceSum": (("axes",), 13),
    "Squeeze": (("axes",), 13),
    "Unsqueeze": (("axes",), 13),
    "Pad": (("pads", "value"), 11),
    "Slice": (("starts", "ends", "axes"), 10),
    "Clip": (("min", "max"), 11),
}
"""Operators whose attributes moved to inputs at that opset: before it a second input, from
it the attribute, would be ignored, so either is refused."""


def _check_node(node, opset: int) -> None:
    """The operator's number of inputs and outputs, its required inputs present, and no
    attribute it does not have (at this opset)."""
    op = node.op_type
    if op in NOT_PIECEWISE_LINEAR:
        raise _Refuse(f"{op} is not piecewise linear, so no Maxout network computes it exactly")
    if op not in _ARITY:
        raise _Refuse(f"unsupported operator {op}")
    least, most = _ARITY[op]
    if op in _INPUT_SINCE:
        names, since = _INPUT_SINCE[op]
        if opset < since:
            least, most = 1, 1
        elif any(a.name in names for a in node.attribute):
            raise _Refuse(
                f"{op}'s {' and '.join(names)} "
                + ("is an input" if len(names) == 1 else "are inputs")
                + f" from opset {since} on, not "
                + ("an attribute" if len(names) == 1 else "attributes")
                + f" (opset {opset})"
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
        op in ("Max", "Min", "Sum", "Concat") and "" in node.input
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
        code, kind = _ATTRIBUTE_TYPES.get((op, a.name)) or _ATTRIBUTE_TYPES[a.name]
        if a.type != code:
            raise _Refuse(f"{op}'s attribute {a.name} must be {kind} (type {a.type})")


def _axes_of(a: dict, inputs, opset: int, since: int):
    if opset >= since:
        return _int_values(inputs[1], "axes") if len(inputs) > 1 and inputs[1] is not None else None
    return a.get("axes")


def _optional_scalar(g: _Graph, v, what: str):
    if v is None:
        return None
    c = _constant_of(g, v, what)
    if c.size != 1:
        raise _Refuse(f"{what} must be a scalar, got shape {list(c.shape)}")
    return c.reshape(-1)[0]


def _op(g: _Graph, node, inputs, opset: int, final: bool, drop_softmax: bool):
    op, a = node.op_type, _attrs(node)
    x = inputs[0] if inputs else None
    if op == "Dropout" and len(inputs) > 2 and inputs[2] is not None:
        mode = inputs[2]
        if isinstance(mode, Aff) or np.size(mode) != 1 or bool(np.asarray(mode).reshape(-1)[0]):
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
    if op == "Sum":
        out = inputs[0]
        for v in inputs[1:]:
            out = _add(g, out, v)
        return out
    if op == "Mul":
        if isinstance(inputs[0], Aff):
            return _scale(g, inputs[0], inputs[1])
        return _scale(g, inputs[1], inputs[0])
    if op == "Div":
        return _scale(g, inputs[0], inputs[1], True)
    if op == "Neg":
        return _scale(g, x, np.array(Q(-1), dtype=object))
    if op == "Relu":
        return _max_units(g, [x, np.array(ZERO, dtype=object)])
    if op == "LeakyRelu":
        return _slope_units(g, x, np.array(_q(a.get("alpha", _F32_ALPHA)), dtype=object))
    if op == "PRelu":
        return _slope_units(g, x, _constant_of(g, inputs[1], "PRelu's slope"))
    if op == "Abs":
        if not isinstance(x, Aff):
            return np.asarray(abs(g.exact(x)), dtype=object)
        return g.units_of(x.level, np.stack([x.E, negate(x.E)], axis=-1))
    if op == "Clip":
        if opset < 11:  # attributes, whose defaults are float32's extremes
            lo, hi = _q(a.get("min", -_F32_MAX)), _q(a.get("max", _F32_MAX))
        else:
            lo = _optional_scalar(g, inputs[1] if len(inputs) > 1 else None, "Clip's min")
            hi = _optional_scalar(g, inputs[2] if len(inputs) > 2 else None, "Clip's max")
        y = x
        if lo is not None:
            y = _max_units(g, [y, np.array(lo, dtype=object)])
        if hi is not None:
            y = _max_units(g, [y, np.array(hi, dtype=object)], minimum=True)
        return y
    if op in ("Max", "Min"):
        return _max_units(g, [v for v in inputs if v is not None], op == "Min")
    if op in ("ReduceMax", "ReduceMin", "ReduceSum", "ReduceMean"):
        since = 13 if op == "ReduceSum" else 18
        axes = _axes_of(a, inputs, opset, since)
        if opset >= since and not axes and int(a.get("noop_with_empty_axes", 0)):
            return x
        kind = op[len("Reduce") :].lower()
        return _reduce(g, x, axes, bool(int(a.get("keepdims", 1))), kind)
    if op in ("GlobalAveragePool", "GlobalMaxPool"):
        S = _shape_of(x)
        if len(S) < 3:
            raise _Refuse(f"{op} of a tensor of shape {list(S)}: no spatial axes")
        kind = "mean" if op == "GlobalAveragePool" else "max"
        return _reduce(g, x, list(range(2, len(S))), True, kind)
    if op == "MaxPool":
        if len(node.output) > 1 and node.output[1]:
            raise _Refuse("MaxPool's Indices output")
        if not isinstance(x, Aff):
            raise _Refuse("MaxPool of a constant")
        P = spatial.max_pool_pieces(x, a)
        return g.units_of(x.level, P)
    if op == "AveragePool":
        return spatial.average_pool(x, a)
    if op in ("Conv", "ConvTranspose"):
        W = _constant_of(g, inputs[1], f"{op}'s weights")
        B = (
            _constant_of(g, inputs[2], f"{op}'s bias")
            if len(inputs) > 2 and inputs[2] is not None
            else None
        )
        if not isinstance(x, Aff):
            raise _Refuse(f"{op} of a constant (fold it before exporting)")
        return (spatial.conv if op == "Conv" else spatial.conv_transpose)(x, W, B, a)
    if op == "BatchNormalization":
        return _batch_norm(g, node, inputs, a)
    if op == "Pad":
        mode = a.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        if opset < 11:
            pads, value, axes = [int(v) for v in a.get("pads", [])], _q(a.get("value", 0.0)), None
        else:
            pads = _int_values(inputs[1], "Pad's pads")
            value = _optional_scalar(g, inputs[2] if len(inputs) > 2 else None, "Pad's value")
            value = ZERO if value is None else value
            axes = (
                _norm_axes(_int_values(inputs[3], "Pad's axes"), len(_shape_of(x)))
                if len(inputs) > 3 and inputs[3] is not None
                else None
            )
        if not isinstance(x, Aff):
            x = g.exact(x)
        return spatial.pad(x, pads, mode, value, axes)
    if op == "Slice":
        if opset < 10:
            starts, ends = [int(v) for v in a["starts"]], [int(v) for v in a["ends"]]
            axes, steps = ([int(v) for v in a["axes"]] if "axes" in a else None), None
        else:
            starts = _int_values(inputs[1], "Slice's starts")
            ends = _int_values(inputs[2], "Slice's ends")
            axes = (
                _int_values(inputs[3], "Slice's axes")
                if len(inputs) > 3 and inputs[3] is not None
                else None
            )
            steps = (
                _int_values(inputs[4], "Slice's steps")
                if len(inputs) > 4 and inputs[4] is not None
                else None
            )
        return spatial.slice_(x, starts, ends, axes, steps)
    if op == "Gather":
        return _gather(g, x, inputs[1], int(a.get("axis", 0)))
    if op == "Shape":
        dims = list(_shape_of(x))
        start, end = int(a.get("start", 0)), a.get("end")
        return np.array(dims[start : (None if end is None else int(end))], dtype=np.int64)
    if op == "Reshape":
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
        axes = _axes_of(a, inputs, opset, 13)
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
    if not arr.size:
        return np.empty(arr.shape, dtype=object)
    # each distinct non-zero value made exact once (a sparse matrix is mostly zeros)
    out = np.full(arr.shape, ZERO, dtype=object)
    at = np.flatnonzero(arr)
    values, where = np.unique(arr.reshape(-1)[at], return_inverse=True)
    exact = _qs(values)
    out.reshape(-1)[at] = exact[where.reshape(-1)]
    g.report.weights += arr.size
    g.report.max_weight_denominator_bits = max(
        g.report.max_weight_denominator_bits, max(map(_den_bits, exact), default=0)
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
    g.input_dim = n0
    E = np.empty(n0, dtype=object)
    for i in range(n0):
        E[i] = {i: ONE}
    values[real_inputs[0].name] = Aff(E.reshape(S), 0)
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
    report.max_network_denominator_bits = max(  # over the non-zero entries (a zero has 2^0)
        (_den_bits(v) for layer in g.layers for unit in layer for r in unit for v in r.values()),
        default=0,
    )
    if net.output is not None:
        report.max_network_denominator_bits = max(
            report.max_network_denominator_bits,
            max((_den_bits(v) for row in net.output.W for v in row if v), default=0),
            max((_den_bits(v) for v in net.output.b if v), default=0),
        )
    return net, report


def _network(g: _Graph, out, path: str) -> MaxoutNetwork:
    if not isinstance(out, Aff):
        out = Aff(lift(g.exact(np.asarray(out))), g.depth)
    if not g.depth:  # an affine network: one layer of rank-1 units, the identity
        g.layers.append([[{i: ONE}] for i in range(g.input_dim)])
        out = Aff(out.E, 1)
    out = g.carry(out, g.depth)
    g.report.carried_units = g.carried_units
    layers, width = [], g.input_dim
    for units in g.layers:
        layers.append(
            Layer(tuple(Unit(tuple(Piece(*_piece_of(p, width)) for p in ps)) for ps in units))
        )
        width = len(units)
    rows = out.E.reshape(-1)
    W, b = zip(*(_piece_of(r, width) for r in rows)) if len(rows) else ((), ())
    identity = (
        len(W) == width
        and not any(b)
        and all(len(r) == 1 and r.get(i) == ONE for i, r in enumerate(rows))
    )
    output = None if identity else Affine(tuple(W), tuple(b), width)
    return MaxoutNetwork(
        g.input_dim, tuple(layers), output, None, {"imported_from": os.path.basename(path)}
    )


def _piece_of(r: dict, width: int) -> tuple[Row, Q]:
    """(w, b) of the row r = b + w . h, w with one entry per unit of the level (sparse when
    mostly zero, as a convolution's window is)."""
    return row_of(width, ((k, v) for k, v in r.items() if k != CONST)), r.get(CONST, ZERO)


def load_onnx(path: str, drop_final_softmax: bool = False) -> MaxoutNetwork:
    return import_onnx(path, drop_final_softmax)[0]
