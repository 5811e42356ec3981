"""The fuzzing campaign over ONNX and VNN-LIB (issue #36): mutated ONNX networks, VNN-LIB 1.0
and 2.0 properties and counterexample files, run through every command that reads them
(import, info, eval, export-onnx, equiv, search, verify, compile, check, replay, vnnlib verify,
check-cert --model / --property), and every answer of ``check`` / ``replay`` / ``vnnlib
verify`` / ``import`` / ``eval`` / ``export-onnx`` / ``equiv`` / ``search`` / ``check-cert`` on
a mutated but still valid input confirmed by an independent exact check.

Library for ``tests/test_fuzz.py`` (a sample in CI) and ``benchmarks/fuzz.py --io`` (the long
run); the judge of exit statuses, error lines and output files is ``tests/fuzz.py``'s.

The independent side reuses none of exactmax's readers:

- ``onnx_eval``: the ONNX graph run node by node on numpy object arrays of ``Fraction`` (or of
  z3 terms), the weights read by ``onnx.numpy_helper``, following the operator definitions
  strictly (input counts, attributes by opset, Dropout's training mode, Reshape's allowzero,
  the pools' and convolutions' shapes, Clip-6's default bounds, Pad's modes ...); what it
  cannot evaluate raises ``Invalid``.  Every operator exactmax imports is read: the affine
  ones, Relu, Max / Min, Abs, LeakyRelu, PRelu, Clip, Sum, the reductions, MaxPool /
  AveragePool / GlobalMaxPool / GlobalAveragePool, Conv, ConvTranspose, BatchNormalization,
  Pad, Slice, Gather, Shape and the structure operators.  The linear spatial operators (Conv,
  ConvTranspose, BatchNormalization, Pad, Slice) and the pools' windows are those of
  ``tests/onnx_semantics.py`` (the exact interpreter checked against onnxruntime), after this
  module's own checks of their shapes and attributes; the max-like operators are computed
  here, so that they also encode to z3 (Abs, LeakyRelu and PRelu by their sign cases, not as
  a max).  A graph that ``onnx.checker.check_model(full_check=True)`` accepts and exactmax
  imports must evaluate here to exactly exactmax's numbers.
- ``PropRef``: a VNN-LIB 1.0 or 2.0 text read by this module's own s-expression reader (names
  X_i / Y_j, or 2.0 tensors X[i, j] flattened row-major), each constant by ``Fraction(text)``;
  a 1.0 text is also parsed by ``z3.parse_smt2_string`` when z3 reads it, and both readings
  are used.  A sat answer's point is checked exactly (x satisfies every assertion with
  y = onnx_eval(x)); an unsat answer is confirmed by z3 finding no (x, y) with y = f(x) (the
  network encoded from ``onnx_eval`` over z3 terms) satisfying the assertions.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import os
import re
from dataclasses import dataclass
from fractions import Fraction

import fuzz
import numpy as np

ROOT = fuzz.ROOT

FORMATS = ("onnx", "vnnlib", "vnnlib2", "counterexample")


class Invalid(Exception):
    """The independent reader cannot give the input a meaning."""


# ------------------------------------------------------------------------ ONNX seeds


def _f(vals, dtype=np.float32):
    return np.array(vals, dtype=dtype)


def onnx_seeds() -> dict:
    """Small valid ONNX networks, 2 inputs each (built with the onnx helper API), weights
    multiples of 1/4 so that every number is exact in every float type."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def init(name, arr):
        return numpy_helper.from_array(np.asarray(arr), name)

    def model(
        nodes,
        inits,
        out_dim,
        opset,
        name,
        elem=TensorProto.FLOAT,
        ir=None,
        inputs_also=False,
        in_shape=(1, 2),
        out_shape=None,
    ):
        x = helper.make_tensor_value_info("X", elem, list(in_shape))
        y = helper.make_tensor_value_info("Y", elem, list(out_shape or (1, out_dim)))
        ins = [x] + (
            [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits]
            if inputs_also
            else []
        )
        g = helper.make_graph(nodes, name, ins, [y], inits)
        m = helper.make_model(
            g, opset_imports=[helper.make_opsetid("", opset)], producer_name="exactmax fuzz"
        )
        if ir is not None:
            m.ir_version = ir
        onnx.checker.check_model(m, full_check=True)
        return m

    W1 = [[1, 1], [1, -1], [-1, 0.5]]
    B1 = [0.5, 0, 0.25]
    W2 = [[1, 0.5, 0.25], [-0.5, 1, 0]]
    B2 = [-0.5, 0.25]
    S = {}
    # Gemm (transB) + Relu + Gemm, opset 13, float32, two outputs
    S["gemm_relu"] = model(
        [
            helper.make_node("Gemm", ["X", "W1", "B1"], ["h"], transB=1),
            helper.make_node("Relu", ["h"], ["r"]),
            helper.make_node("Gemm", ["r", "W2", "B2"], ["Y"], transB=1, alpha=1.0, beta=1.0),
        ],
        [init("W1", _f(W1)), init("B1", _f(B1)), init("W2", _f(W2)), init("B2", _f(B2))],
        2,
        13,
        "gemm_relu",
    )
    # MatMul + Add + Relu, two hidden layers, opset 11, float64, one output
    S["matmul_add"] = model(
        [
            helper.make_node("MatMul", ["X", "A1"], ["m1"]),
            helper.make_node("Add", ["m1", "c1"], ["a1"]),
            helper.make_node("Relu", ["a1"], ["r1"]),
            helper.make_node("MatMul", ["r1", "A2"], ["m2"]),
            helper.make_node("Add", ["m2", "c2"], ["a2"]),
            helper.make_node("Relu", ["a2"], ["r2"]),
            helper.make_node("MatMul", ["r2", "A3"], ["m3"]),
            helper.make_node("Add", ["m3", "c3"], ["Y"]),
        ],
        [
            init("A1", _f(np.array(W1).T, np.float64)),
            init("c1", _f(B1, np.float64)),
            init("A2", _f([[1, -1], [0.5, 1], [-0.25, 0.75]], np.float64)),
            init("c2", _f([0, -0.25], np.float64)),
            init("A3", _f([[1], [-2]], np.float64)),
            init("c3", _f([0.125], np.float64)),
        ],
        1,
        11,
        "matmul_add",
        elem=TensorProto.DOUBLE,
    )
    # ACAS Xu's shape: IR 3, initializers also graph inputs, opset 8, Sub/Div normalisation
    S["acas_ir3"] = model(
        [
            helper.make_node("Sub", ["X", "mean"], ["s"]),
            helper.make_node("Div", ["s", "range"], ["d"]),
            helper.make_node("Flatten", ["d"], ["fl"]),
            helper.make_node("MatMul", ["fl", "A1"], ["m1"]),
            helper.make_node("Add", ["m1", "c1"], ["a1"]),
            helper.make_node("Relu", ["a1"], ["r1"]),
            helper.make_node("MatMul", ["r1", "A2"], ["m2"]),
            helper.make_node("Add", ["m2", "c2"], ["Y"]),
        ],
        [
            init("mean", _f([0.25, -0.5])),
            init("range", _f([2, 0.5])),
            init("A1", _f(np.array(W1).T)),
            init("c1", _f(B1)),
            init("A2", _f(np.array(W2).T)),
            init("c2", _f(B2)),
        ],
        2,
        8,
        "acas_ir3",
        ir=3,
        inputs_also=True,
    )
    # Maxout by Reshape + ReduceMax (axes as an input, opset 18), then variadic Max
    S["maxout_reducemax"] = model(
        [
            helper.make_node("MatMul", ["X", "A"], ["m"]),
            helper.make_node("Add", ["m", "c"], ["z"]),
            helper.make_node("Reshape", ["z", "shape"], ["zr"]),
            helper.make_node("ReduceMax", ["zr", "axes"], ["u"], keepdims=0),
            helper.make_node("MatMul", ["u", "B"], ["v1"]),
            helper.make_node("MatMul", ["u", "B2"], ["v2"]),
            helper.make_node("Max", ["v1", "v2", "floor"], ["w"]),
            helper.make_node("Neg", ["w"], ["nw"]),
            helper.make_node("Mul", ["nw", "k"], ["Y"]),
        ],
        [
            init("A", _f([[1, -1, 0.5, 0, 1, 0.25], [0, 1, -1, 1, 0.5, -0.75]])),
            init("c", _f([0, 0.5, -0.25, 0, 0.125, 0])),
            init("shape", np.array([1, 2, 3], dtype=np.int64)),
            init("axes", np.array([-1], dtype=np.int64)),
            init("B", _f([[1], [-1]])),
            init("B2", _f([[0.5], [0.5]])),
            init("floor", _f([-1])),
            init("k", _f([-2])),
        ],
        1,
        18,
        "maxout_reducemax",
    )
    # structure operators: Constant, Unsqueeze / Squeeze (attributes, opset 11), Transpose,
    # Concat, MaxPool, Identity, Dropout, float16 weights
    S["structure_ops"] = model(
        [
            helper.make_node("Constant", [], ["W"], value=init("Wc", _f(W1, np.float16).T)),
            helper.make_node("MatMul", ["X", "W"], ["m"]),
            helper.make_node("Unsqueeze", ["m"], ["m3"], axes=[1]),
            helper.make_node("MaxPool", ["m3"], ["p"], kernel_shape=[2], strides=[1], pads=[1, 0]),
            helper.make_node("Squeeze", ["p"], ["q"], axes=[1]),
            helper.make_node("Transpose", ["q"], ["qt"], perm=[1, 0]),
            helper.make_node("Transpose", ["qt"], ["q2"], perm=[1, 0]),
            helper.make_node("Neg", ["q2"], ["nq"]),
            helper.make_node("Concat", ["q2", "nq"], ["cat"], axis=1),
            helper.make_node("Identity", ["cat"], ["idt"]),
            helper.make_node("Dropout", ["idt"], ["dr"]),
            helper.make_node("Relu", ["dr"], ["r"]),
            helper.make_node("Gemm", ["r", "G"], ["Y"], alpha=0.5),
        ],
        [init("G", _f([[1], [-1], [0.5], [0.25], [1], [-0.5]], np.float16))],
        1,
        11,
        "structure_ops",
        elem=TensorProto.FLOAT16,
    )
    # a small CNN (opset 13): Reshape to an image, Pad (a constant), Conv, BatchNormalization
    # (var + epsilon squares), Relu, MaxPool, AveragePool, Flatten, Gemm
    S["conv_ops"] = model(
        [
            helper.make_node("Reshape", ["X", "img"], ["x4"]),
            helper.make_node("Pad", ["x4", "pads", "pv"], ["xp"]),
            helper.make_node("Conv", ["xp", "K", "kb"], ["cv"], kernel_shape=[2, 2]),
            helper.make_node(
                "BatchNormalization", ["cv", "bs", "bb", "bm", "bv"], ["bn"], epsilon=0.25
            ),
            helper.make_node("Relu", ["bn"], ["r"]),
            helper.make_node("MaxPool", ["r"], ["mp"], kernel_shape=[1, 2], strides=[1, 1]),
            helper.make_node("AveragePool", ["mp"], ["ap"], kernel_shape=[2, 1]),
            helper.make_node("Flatten", ["ap"], ["fl"]),
            helper.make_node("Gemm", ["fl", "G", "gc"], ["Y"], transB=1),
        ],
        [
            init("img", np.array([1, 1, 1, 2], dtype=np.int64)),
            init("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int64)),
            init("pv", _f(0.25)),
            init("K", _f([[[[1, -0.5], [0.25, 1]]], [[[-1, 0.5], [0.75, -0.25]]]])),
            init("kb", _f([0.125, -0.25])),
            init("bs", _f([1, -0.5])),
            init("bb", _f([0.25, 0])),
            init("bm", _f([0.5, -0.25])),
            init("bv", _f([3.75, 0.75])),
            init("G", _f([[1, -0.5, 0.25, 0], [0.5, 0.5, -1, 0.25]])),
            init("gc", _f([0, 0.5])),
        ],
        2,
        13,
        "conv_ops",
    )
    # the piecewise-linear operators and a residual connection (opset 18): LeakyRelu, Abs,
    # Sum, Clip, Min, PRelu, Slice, ConvTranspose, ReduceMean / ReduceMin / ReduceSum,
    # GlobalAveragePool, Gather, Shape, and X added to a depth-2 tensor
    S["residual_ops"] = model(
        [
            helper.make_node("Gemm", ["X", "W1", "B1"], ["h"], transB=1),
            helper.make_node("LeakyRelu", ["h"], ["lr"], alpha=0.125),
            helper.make_node("Abs", ["h"], ["ab"]),
            helper.make_node("Sum", ["lr", "ab", "h"], ["s"]),
            helper.make_node("Clip", ["s", "lo", "hi"], ["c"]),
            helper.make_node("Min", ["c", "ab"], ["m"]),
            helper.make_node("Gemm", ["m", "W2", "B2"], ["z"], transB=1),
            helper.make_node("Add", ["z", "X"], ["res"]),
            helper.make_node("PRelu", ["res", "slope"], ["p"]),
            helper.make_node("Slice", ["m", "st", "en", "ax"], ["q"]),
            helper.make_node("Unsqueeze", ["q", "ax"], ["u"]),
            helper.make_node("ConvTranspose", ["u", "T"], ["ct"], strides=[1]),
            helper.make_node("ReduceMean", ["ct", "ax2"], ["rm"], keepdims=0),
            helper.make_node("ReduceMin", ["q", "ax"], ["mn"]),
            helper.make_node("ReduceSum", ["q", "ax"], ["rs"]),
            helper.make_node("GlobalAveragePool", ["ct"], ["ga"]),
            helper.make_node("Flatten", ["ga"], ["gf"]),
            helper.make_node("Sum", ["p", "rm", "gf"], ["t1"]),
            helper.make_node("Sub", ["t1", "mn"], ["t2"]),
            helper.make_node("Add", ["t2", "rs"], ["t3"]),
            helper.make_node("Gather", ["t3", "perm"], ["gt"], axis=1),
            helper.make_node("Shape", ["X"], ["sh"]),
            helper.make_node("Reshape", ["gt", "sh"], ["Y"]),
        ],
        [
            init("W1", _f(W1)),
            init("B1", _f(B1)),
            init("lo", _f(-0.5)),
            init("hi", _f(2)),
            init("W2", _f(W2)),
            init("B2", _f(B2)),
            init("slope", _f([0.5, 2])),
            init("st", np.array([1], dtype=np.int64)),
            init("en", np.array([3], dtype=np.int64)),
            init("ax", np.array([1], dtype=np.int64)),
            init("ax2", np.array([2], dtype=np.int64)),
            init("T", _f([[[1, -0.5]]])),
            init("perm", np.array([1, 0], dtype=np.int64)),
        ],
        2,
        18,
        "residual_ops",
    )
    # a final Softmax (import --drop-final-softmax)
    S["softmax_final"] = model(
        [
            helper.make_node("Gemm", ["X", "W1", "B1"], ["h"], transB=1),
            helper.make_node("Relu", ["h"], ["r"]),
            helper.make_node("Gemm", ["r", "W2", "B2"], ["z"], transB=1),
            helper.make_node("Softmax", ["z"], ["Y"], axis=-1),
        ],
        [init("W1", _f(W1)), init("B1", _f(B1)), init("W2", _f(W2)), init("B2", _f(B2))],
        2,
        13,
        "softmax_final",
    )
    return S


def export_seed(tmp: str) -> bytes:
    """tent.json written by ``exactmax export-onnx`` (opset 18: Reshape, ReduceMax, Concat)."""
    out = os.path.join(tmp, "tent.export.onnx")
    assert fuzz._quiet_main(["export-onnx", os.path.join(fuzz.EX, "tent.json"), "-o", out]) == 0
    with open(out, "rb") as f:
        return f.read()


# ------------------------------------------------------------- the ONNX reference


def _as_exact(arr):
    arr = np.asarray(arr)
    if arr.dtype == object:
        return arr
    if arr.dtype.kind == "f":
        a64 = arr.astype(np.float64)
        if not np.all(np.isfinite(a64)):
            raise Invalid("a weight that is not finite")
        return np.asarray(
            np.frompyfunc(lambda v: Fraction(float(v)), 1, 1)(a64), dtype=object
        ).reshape(arr.shape)
    if arr.dtype.kind in "iub":
        return arr.astype(np.int64)
    raise Invalid(f"element type {arr.dtype}")


def _is_int(a) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.kind in "iu"


class Arith:
    """Number operations of the reference: Fractions (evaluation) or z3 terms (encoding)."""

    def __init__(self, z3mode: bool = False):
        self.z3 = z3mode
        if z3mode:
            import z3

            self._z3 = z3

    def const(self, v: Fraction):
        if not self.z3:
            return v
        return self._z3.RealVal(f"{v.numerator}/{v.denominator}")

    def _terms(self, *vs):
        return [self.const(v) if isinstance(v, Fraction) else v for v in vs]

    def max(self, a, b):
        if not self.z3:
            return a if a >= b else b
        a, b = self._terms(a, b)
        return self._z3.If(a >= b, a, b)

    def min(self, a, b):
        if not self.z3:
            return a if a <= b else b
        a, b = self._terms(a, b)
        return self._z3.If(a <= b, a, b)

    def sign_case(self, v, nonneg, neg):
        """``nonneg`` where v >= 0, ``neg`` where v < 0 (Abs, LeakyRelu, PRelu as the
        operator definitions state them, not as a max)."""
        if not self.z3:
            return nonneg if v >= 0 else neg
        v, nonneg, neg = self._terms(v, nonneg, neg)
        return self._z3.If(v >= 0, nonneg, neg)


def _vmax(ar: Arith, arrays, f=None):
    b = np.broadcast_arrays(*arrays)
    out = np.empty(b[0].shape, dtype=object)
    for idx in np.ndindex(out.shape):
        out[idx] = functools.reduce(f or ar.max, [a[idx] for a in b])
    return out


def _elementwise(f, *arrays):
    b = np.broadcast_arrays(*arrays)
    out = np.empty(b[0].shape, dtype=object)
    for idx in np.ndindex(out.shape):
        out[idx] = f(*(a[idx] for a in b))
    return out


def _norm_axis(a, rank, what="axis"):
    a = int(a)
    if not -rank <= a < rank:
        raise Invalid(f"{what} {a} out of range for rank {rank}")
    return a % rank


def _attrs(node):
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


_REDUCE = {"axes", "keepdims", "noop_with_empty_axes"}
_POOL = {"kernel_shape", "strides", "pads", "dilations", "ceil_mode", "auto_pad"}
_CONV = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}
_ALLOWED = {
    "Identity": set(),
    "Neg": set(),
    "Relu": set(),
    "Max": set(),
    "MatMul": set(),
    "Add": set(),
    "Sub": set(),
    "Mul": set(),
    "Div": set(),
    "Dropout": {"seed", "ratio", "is_test"},
    "Gemm": {"alpha", "beta", "transA", "transB"},
    "ReduceMax": _REDUCE,
    "ReduceMin": _REDUCE,
    "ReduceSum": _REDUCE,
    "ReduceMean": _REDUCE,
    "MaxPool": _POOL | {"storage_order"},
    "AveragePool": _POOL | {"count_include_pad"},
    "GlobalMaxPool": set(),
    "GlobalAveragePool": set(),
    "Conv": _CONV,
    "ConvTranspose": _CONV | {"output_padding", "output_shape"},
    "BatchNormalization": {"epsilon", "momentum", "spatial", "training_mode"},
    "Abs": set(),
    "Min": set(),
    "Sum": set(),
    "LeakyRelu": {"alpha"},
    "PRelu": set(),
    "Clip": {"min", "max"},
    "Pad": {"mode", "pads", "value"},
    "Slice": {"starts", "ends", "axes"},
    "Gather": {"axis"},
    "Shape": {"start", "end"},
    "Reshape": {"allowzero", "shape"},
    "Flatten": {"axis"},
    "Squeeze": {"axes"},
    "Unsqueeze": {"axes"},
    "Transpose": {"perm"},
    "Concat": {"axis"},
    "Constant": {"value", "value_float", "value_floats", "value_int", "value_ints"},
    "Softmax": {"axis"},
}
_SINCE = {
    ("Shape", "start"): 15,
    ("Shape", "end"): 15,
    ("BatchNormalization", "training_mode"): 14,
    ("AveragePool", "ceil_mode"): 10,
    ("AveragePool", "dilations"): 19,
    ("MaxPool", "ceil_mode"): 10,
    ("MaxPool", "dilations"): 10,
    ("MaxPool", "storage_order"): 8,
}
_UNTIL = {
    ("BatchNormalization", "spatial"): 9,
    ("Clip", "min"): 11,
    ("Clip", "max"): 11,
    ("Pad", "pads"): 11,
    ("Pad", "value"): 11,
    ("Slice", "starts"): 10,
    ("Slice", "ends"): 10,
    ("Slice", "axes"): 10,
}
"""Attributes an operator has from (``_SINCE``) or before (``_UNTIL``) an opset."""
_ARITY = {
    "Identity": (1, 1),
    "Neg": (1, 1),
    "Relu": (1, 1),
    "Max": (1, 99),
    "MatMul": (2, 2),
    "Add": (2, 2),
    "Sub": (2, 2),
    "Mul": (2, 2),
    "Div": (2, 2),
    "Dropout": (1, 3),
    "Gemm": (2, 3),
    "ReduceMax": (1, 2),
    "ReduceMin": (1, 2),
    "ReduceSum": (1, 2),
    "ReduceMean": (1, 2),
    "MaxPool": (1, 1),
    "AveragePool": (1, 1),
    "GlobalMaxPool": (1, 1),
    "GlobalAveragePool": (1, 1),
    "Conv": (2, 3),
    "ConvTranspose": (2, 3),
    "BatchNormalization": (5, 5),
    "Abs": (1, 1),
    "Min": (1, 99),
    "Sum": (1, 99),
    "LeakyRelu": (1, 1),
    "PRelu": (2, 2),
    "Clip": (1, 3),
    "Pad": (2, 4),
    "Slice": (3, 5),
    "Gather": (2, 2),
    "Shape": (1, 1),
    "Reshape": (1, 2),
    "Flatten": (1, 1),
    "Squeeze": (1, 2),
    "Unsqueeze": (1, 2),
    "Transpose": (1, 1),
    "Concat": (1, 99),
    "Constant": (0, 0),
    "Softmax": (1, 1),
}


def _arity(op, opset):
    """(least, most) inputs of ``op`` at ``opset``; the first ``least`` are required."""
    if op == "Clip" and opset < 11 or op == "Pad" and opset < 11 or op == "Slice" and opset < 10:
        return 1, 1
    if op == "Pad" and opset < 18:
        return 2, 3
    return _ARITY[op]


def onnx_eval(model, x, ar: Arith | None = None, drop_final_softmax: bool = False):
    """The outputs (flattened, row-major) of the ONNX ``model`` at the input point ``x``
    (a sequence of Fractions or z3 terms), exactly; ``Invalid`` for what it cannot read."""
    from onnx import numpy_helper

    ar = ar or Arith()
    g = model.graph
    opsets = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if len(opsets) != 1 or not 7 <= opsets[0] <= 21:
        raise Invalid(f"opsets {opsets}")
    opset = opsets[0]
    env = {}
    for t in g.initializer:
        if t.name in env:
            raise Invalid("initializer defined twice")
        if t.data_location == 1 or t.data_type not in (1, 10, 11, 6, 7):
            raise Invalid("initializer type")
        try:
            env[t.name] = _as_exact(numpy_helper.to_array(t))
        except Invalid:
            raise
        except Exception as e:  # noqa: BLE001
            raise Invalid(f"unreadable initializer: {e}") from None
    inputs = [i for i in g.input if i.name not in env]
    if len(inputs) != 1 or len(g.output) != 1:
        raise Invalid("not one input and one output")
    tt = inputs[0].type.tensor_type
    if (
        not inputs[0].type.HasField("tensor_type")
        or tt.elem_type not in (1, 10, 11)
        or not tt.HasField("shape")
    ):
        raise Invalid("input type")
    shape = []
    for k, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value") and d.dim_value > 0:
            shape.append(d.dim_value)
        elif k == 0 and not d.HasField("dim_value"):
            shape.append(1)  # a symbolic batch dimension
        else:
            raise Invalid("input dimension")
    n = int(np.prod(shape)) if shape else 1
    if n != len(x):
        raise Invalid(f"input of {n} numbers, not {len(x)}")
    xs = np.empty(len(x), dtype=object)
    for i, v in enumerate(x):
        xs[i] = v
    env[inputs[0].name] = xs.reshape(shape)
    out_name = g.output[0].name
    # the output and the values it copies unchanged (Identity, Dropout): a Softmax computing
    # one of them is the final one (dropped with --drop-final-softmax)
    copies = {
        node.output[0]: node.input[0]
        for node in g.node
        if node.op_type in ("Identity", "Dropout") and node.output and node.input
    }
    final_names, name = {out_name}, out_name
    while copies.get(name) and copies[name] not in final_names:
        name = copies[name]
        final_names.add(name)
    for node in g.node:
        if node.domain not in ("", "ai.onnx"):
            raise Invalid("domain")
        op = node.op_type
        if op not in _ARITY:
            raise Invalid(f"operator {op}")
        lo, hi = _arity(op, opset)
        if not lo <= len(node.input) <= hi or len(node.output) < 1:
            raise Invalid(f"{op} with {len(node.input)} inputs")
        if (
            any(not k for k in node.input[:lo])
            or op in ("Max", "Min", "Sum", "Concat")
            and "" in node.input
        ):
            raise Invalid(f"{op} with a required input left empty")
        a = _attrs(node)
        if set(a) - _ALLOWED[op]:
            raise Invalid(f"{op} attributes {sorted(a)}")
        for k in a:
            if not _SINCE.get((op, k), 0) <= opset < _UNTIL.get((op, k), 99):
                raise Invalid(f"{op}'s attribute {k} at opset {opset}")
        if op == "BatchNormalization" and any(node.output[1:]):
            raise Invalid("BatchNormalization's training outputs")
        for k in node.input:
            if k and k not in env:
                raise Invalid(f"input {k} undefined")
        ins = [env[k] if k else None for k in node.input]
        for o in node.output:
            if o and o in env:
                raise Invalid(f"{o} defined twice")
        try:
            out = _ref_op(
                op, ins, a, opset, ar, final=node.output[0] in final_names and drop_final_softmax
            )
        except Invalid:
            raise
        except (ValueError, IndexError, TypeError, KeyError, ZeroDivisionError, OverflowError) as e:
            raise Invalid(f"{op}: {type(e).__name__}: {e}") from None
        env[node.output[0]] = out
        if op == "MaxPool" and len(node.output) > 1 and node.output[1]:
            raise Invalid("MaxPool's Indices output")
        # Dropout's mask is left undefined: a node reading it is refused above
    if out_name not in env:
        raise Invalid("output not computed")
    y = np.asarray(env[out_name])
    if y.dtype != object:
        y = _as_exact(y).astype(object)
        y = np.asarray(
            np.frompyfunc(lambda v: Fraction(int(v)) if not isinstance(v, Fraction) else v, 1, 1)(
                y
            ),
            dtype=object,
        )
    return [ar.const(v) if isinstance(v, Fraction) else v for v in y.reshape(-1)]


def _ints(t, what, rank=None):
    if t is None or not _is_int(t) or rank is not None and t.ndim != rank:
        raise Invalid(f"{what}: not an integer tensor" + (f" of rank {rank}" if rank else ""))
    return [int(v) for v in t.reshape(-1)]


def _num(t):
    """A tensor for arithmetic: object arrays of exact numbers."""
    if _is_int(t):
        raise Invalid("integer arithmetic")
    return t


FLT_MAX = Fraction(float(np.finfo(np.float32).max))


def _sem():
    """tests/onnx_semantics.py, whose linear spatial operators (Conv, ConvTranspose,
    BatchNormalization, Pad, Slice) and windows the reference reuses."""
    import onnx_semantics

    return onnx_semantics


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def _scalar(t, what):
    t = _num(t)
    if t is None or t.size != 1:
        raise Invalid(f"{what}: not a scalar")
    return t.reshape(-1)[0]


def _reduce(ar: Arith, X, axes, keep, kind):
    axes = [_norm_axis(v, X.ndim) for v in axes] or list(range(X.ndim))
    if len(set(axes)) != len(axes):
        raise Invalid("repeated axes")
    if any(X.shape[k] == 0 for k in axes):
        raise Invalid("empty reduction")
    rest = [k for k in range(X.ndim) if k not in axes]
    moved = np.transpose(X, rest + axes)
    flat = moved.reshape(moved.shape[: len(rest)] + (-1,))
    f = {"max": ar.max, "min": ar.min}.get(kind, lambda u, v: u + v)
    out = np.empty(flat.shape[:-1], dtype=object)
    for idx in np.ndindex(out.shape):
        out[idx] = functools.reduce(f, list(flat[idx]))
        if kind == "mean":
            out[idx] = out[idx] * Fraction(1, flat.shape[-1])
    if keep:
        out = out.reshape([1 if k in axes else X.shape[k] for k in range(X.ndim)])
    return out


def _window_attrs(op, a, n, with_pads=True):
    """Strides, dilations, pads and auto_pad of a sliding window over n spatial axes, checked;
    the attributes with auto_pad as text (onnx_semantics' reading)."""
    auto = _text(a.get("auto_pad", "NOTSET"))
    if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise Invalid(f"{op}: auto_pad {auto!r}")
    s = [int(v) for v in a.get("strides", [1] * n)]
    d = [int(v) for v in a.get("dilations", [1] * n)]
    p = [int(v) for v in a.get("pads", [0] * 2 * n)]
    if len(s) != n or len(d) != n or len(p) != 2 * n or min(s + d) < 1 or min(p) < 0:
        raise Invalid(f"{op}: strides, dilations or pads")
    if with_pads and "pads" in a and auto != "NOTSET" and (auto != "VALID" or any(p)):
        raise Invalid(f"{op}: pads with auto_pad {auto}")
    return {**a, "auto_pad": auto, "strides": s, "dilations": d, "pads": p}, s, d, p, auto


def _outputs(op, sizes, k, s, d, p, auto, ceil=False):
    """The output sizes of a window sliding over ``sizes`` (none empty, the window no larger
    than the padded input)."""
    n = len(sizes)
    if auto in ("NOTSET", "VALID"):
        q = p if auto == "NOTSET" else [0] * 2 * n
        if any(sizes[t] + q[t] + q[n + t] < (k[t] - 1) * d[t] + 1 for t in range(n)):
            raise Invalid(f"{op} window larger than the padded input")
    outs = _sem()._window_geometry(sizes, k, s, d, p, auto, ceil)[2]
    if min(outs, default=1) < 1:
        raise Invalid(f"{op} with an empty output")
    return outs


def _pool_check(op, X, a):
    if "kernel_shape" not in a:
        raise Invalid(f"{op} without kernel_shape")
    k = [int(v) for v in a["kernel_shape"]]
    sp = len(k)
    if not sp or X.ndim != sp + 2 or any(v < 1 for v in k):
        raise Invalid(f"{op} shapes")
    b, s, d, p, auto = _window_attrs(op, a, sp)
    if int(a.get("storage_order", 0)) not in (0, 1):
        raise Invalid("storage_order")
    ceil = int(a.get("ceil_mode", 0))
    if ceil not in (0, 1):
        raise Invalid("ceil_mode")
    _outputs(op, X.shape[2:], k, s, d, p, auto, bool(ceil))
    return b, k, bool(ceil)


def _conv_check(op, X, W, B, a):
    """Conv's and ConvTranspose's shapes and attributes as the operators define them; the
    attributes for onnx_semantics."""
    if X.ndim < 3 or W.ndim != X.ndim:
        raise Invalid(f"{op} of ranks {X.ndim} and {W.ndim}")
    n, C = X.ndim - 2, X.shape[1]
    G = int(a.get("group", 1))
    ks = list(W.shape[2:])
    if G < 1 or min(ks) < 1 or "kernel_shape" in a and [int(v) for v in a["kernel_shape"]] != ks:
        raise Invalid(f"{op}: group or kernel_shape")
    if op == "Conv":
        M = W.shape[0]
        if W.shape[1] * G != C or M % G or not M:
            raise Invalid("Conv channels")
    else:
        M = W.shape[1] * G
        if W.shape[0] != C or C % G or not M:
            raise Invalid("ConvTranspose channels")
    if B is not None and B.shape != (M,):
        raise Invalid(f"{op}'s bias shape")
    b, s, d, p, auto = _window_attrs(op, a, n)
    if op == "Conv":
        _outputs(op, X.shape[2:], ks, s, d, p, auto)
        return b
    out_pad = [int(v) for v in a.get("output_padding", [0] * n)]
    if len(out_pad) != n or min(out_pad) < 0:
        raise Invalid("ConvTranspose's output_padding")
    full = [s[t] * (X.shape[2 + t] - 1) + out_pad[t] + (ks[t] - 1) * d[t] + 1 for t in range(n)]
    if "output_shape" in a or auto in ("SAME_UPPER", "SAME_LOWER"):
        if "output_shape" in a:
            shape = [int(v) for v in a["output_shape"]]
            if len(shape) not in (n, n + 2):
                raise Invalid("ConvTranspose's output_shape")
            outs = shape[-n:]
        else:
            outs = [X.shape[2 + t] * s[t] for t in range(n)]
        if any(f < o for f, o in zip(full, outs)):
            raise Invalid("ConvTranspose's output larger than its full size")
    else:
        q = p if auto == "NOTSET" else [0] * 2 * n
        outs = [full[t] - q[t] - q[n + t] for t in range(n)]
    if min(outs) < 1:
        raise Invalid("ConvTranspose with an empty output")
    return b


def _pad(X, i, a, opset):
    """Pad as the operator defines it: negative pads crop first, then the modes pad."""
    mode = _text(a.get("mode", "constant"))
    if mode not in ("constant", "reflect", "edge") + (("wrap",) if opset >= 19 else ()):
        raise Invalid(f"Pad mode {mode!r}")
    r = X.ndim
    if opset < 11:
        if "pads" not in a:
            raise Invalid("Pad without pads")
        pads, value, axes = [int(v) for v in a["pads"]], Fraction(a.get("value", 0.0)), None
    else:
        pads = _ints(i[1], "pads", 1)
        value = _scalar(i[2], "Pad's value") if len(i) > 2 and i[2] is not None else Fraction(0)
        axes = _ints(i[3], "Pad's axes", 1) if len(i) > 3 and i[3] is not None else None
    axes = list(range(r)) if axes is None else [_norm_axis(v, r) for v in axes]
    if len(set(axes)) != len(axes) or len(pads) != 2 * len(axes):
        raise Invalid("Pad's pads and axes")
    begin, end = [0] * r, [0] * r
    for j, ax in enumerate(axes):
        begin[ax], end[ax] = pads[j], pads[len(axes) + j]
    if any(X.shape[t] + begin[t] + end[t] < 0 for t in range(r)):
        raise Invalid("Pad crops more than the tensor")
    X = X[tuple(slice(max(0, -begin[t]), X.shape[t] - max(0, -end[t])) for t in range(r))]
    begin, end = [max(0, v) for v in begin], [max(0, v) for v in end]
    for t in range(r):
        if (
            mode != "constant"
            and (begin[t] or end[t])
            and (not X.shape[t] or mode == "reflect" and max(begin[t], end[t]) >= X.shape[t])
        ):
            raise Invalid(f"Pad {mode} by {max(begin[t], end[t])} of {X.shape[t]} elements")
    if mode != "wrap":
        return _sem()._pad(X, begin + end, mode, value, None)
    for t in range(r):
        X = np.take(X, [p % X.shape[t] for p in range(-begin[t], X.shape[t] + end[t])], axis=t)
    return X


def _ref_op(op, i, a, opset, ar: Arith, final: bool):
    x = i[0] if i else None
    if op == "Identity":
        return x
    if op == "Dropout":
        if len(i) > 2 and i[2] is not None:
            if i[2].dtype.kind != "b" or bool(i[2].reshape(-1)[0]):
                raise Invalid("Dropout in training mode")
        if "is_test" in a or ("seed" in a and opset < 12):
            raise Invalid("Dropout attributes")
        return x
    if op == "Constant":
        from onnx import numpy_helper

        if len(a) != 1:
            raise Invalid("Constant with several values")
        ((k, v),) = a.items()
        if k == "value":
            return _as_exact(numpy_helper.to_array(v))
        if opset < 12:
            raise Invalid("Constant attribute before opset 12")
        if k == "value_float":
            return _as_exact(np.array(v, dtype=np.float32))
        if k == "value_floats":
            return _as_exact(np.array(v, dtype=np.float32))
        return np.array(v, dtype=np.int64)
    if op == "Softmax":
        if final:
            return x
        raise Invalid("Softmax")
    if op == "Neg":
        return -_num(x)
    if op == "Relu":
        return _vmax(ar, [_num(x), np.array(Fraction(0), dtype=object)])
    if op == "Max":
        if opset < 8 and len({t.shape for t in i}) > 1:
            raise Invalid("Max broadcasting before opset 8")
        return _vmax(ar, [_num(t) for t in i])
    if op in ("Add", "Sub", "Mul", "Div"):
        A, B = _num(i[0]), _num(i[1])
        np.broadcast_shapes(A.shape, B.shape)
        if op == "Add":
            return A + B
        if op == "Sub":
            return A - B
        if op == "Mul":
            return A * B
        for v in np.asarray(B).reshape(-1):
            if not isinstance(v, Fraction):
                raise Invalid("division by a term")
            if v == 0:
                raise Invalid("division by zero")
        return A * np.asarray(np.frompyfunc(lambda v: 1 / v, 1, 1)(B), dtype=object)
    if op == "MatMul":
        A, B = _num(i[0]), _num(i[1])
        if A.ndim == 0 or B.ndim == 0:
            raise Invalid("MatMul of a scalar")
        return np.matmul(A, B)
    if op == "Gemm":
        A, B = _num(i[0]), _num(i[1])
        if A.ndim != 2 or B.ndim != 2:
            raise Invalid("Gemm of a tensor of rank other than 2")
        if int(a.get("transA", 0)):
            A = A.T
        if int(a.get("transB", 0)):
            B = B.T
        if A.shape[1] != B.shape[0]:
            raise Invalid("Gemm shapes")
        Y = np.matmul(A, B) * Fraction(a.get("alpha", 1.0))
        if len(i) > 2 and i[2] is not None:
            C = _num(i[2])
            if np.broadcast_shapes(C.shape, Y.shape) != Y.shape:
                raise Invalid("Gemm's C does not broadcast to Y")
            Y = Y + C * Fraction(a.get("beta", 1.0))
        elif opset < 11:
            raise Invalid("Gemm without C before opset 11")
        return Y
    if op in ("ReduceMax", "ReduceMin", "ReduceSum", "ReduceMean"):
        X = _num(x)
        since = 13 if op == "ReduceSum" else 18
        if opset >= since:
            if "axes" in a:
                raise Invalid(f"{op} axes attribute at opset >= {since}")
            axes = _ints(i[1], "axes") if len(i) > 1 and i[1] is not None else []
            if not axes and int(a.get("noop_with_empty_axes", 0)):
                return X
        else:
            if len(i) > 1 or "noop_with_empty_axes" in a:
                raise Invalid(f"{op} input axes before opset {since}")
            axes = list(a.get("axes", []))
        return _reduce(ar, X, axes, int(a.get("keepdims", 1)), op[len("Reduce") :].lower())
    if op in ("GlobalMaxPool", "GlobalAveragePool"):
        X = _num(x)
        if X.ndim < 3:
            raise Invalid(f"{op} of a tensor of rank {X.ndim}")
        return _reduce(ar, X, list(range(2, X.ndim)), 1, "max" if "Max" in op else "mean")
    if op in ("MaxPool", "AveragePool"):
        X = _num(x)
        b, k, ceil = _pool_check(op, X, a)
        Y = None
        cip = int(a.get("count_include_pad", 0))
        for o, outs, inside, padded in _sem()._windows(X, b, k, ceil):
            if Y is None:
                Y = np.empty(X.shape[:2] + tuple(outs), dtype=object)
            count = padded if cip else len(inside)
            if not inside and (op == "MaxPool" or not count):
                raise Invalid(f"{op}: a window in the padding")
            for nc in itertools.product(range(X.shape[0]), range(X.shape[1])):
                vals = [X[nc + p] for _, p in inside]
                if op == "MaxPool":
                    Y[nc + o] = functools.reduce(ar.max, vals)
                else:
                    Y[nc + o] = functools.reduce(lambda u, v: u + v, vals, Fraction(0)) / count
        if Y is None:
            raise Invalid(f"{op} with an empty output")
        return Y
    if op in ("Conv", "ConvTranspose"):
        X, W = _num(x), _num(i[1])
        B = _num(i[2]) if len(i) > 2 and i[2] is not None else None
        b = _conv_check(op, X, W, B, a)
        return (_sem()._conv if op == "Conv" else _sem()._conv_transpose)(X, W, B, b)
    if op == "BatchNormalization":
        X = _num(x)
        if X.ndim < 2:
            raise Invalid("BatchNormalization of a tensor without channels")
        if int(a.get("training_mode", 0)):
            raise Invalid("BatchNormalization in training mode")
        if int(a.get("spatial", 1)) != 1:
            raise Invalid("BatchNormalization with spatial 0")
        params = [_num(t) for t in i[1:5]]
        if any(t.shape != (X.shape[1],) for t in params):
            raise Invalid("BatchNormalization's parameters are not one per channel")
        if any(not isinstance(v, Fraction) for t in params for v in t.reshape(-1)):
            raise Invalid("BatchNormalization's parameters depend on the input")
        eps = Fraction(a.get("epsilon", float(np.float32(1e-5))))
        if any(v + eps <= 0 for v in params[3]):
            raise Invalid("BatchNormalization's var + epsilon <= 0")
        return _sem()._batch_norm(X, [X] + params, a, opset)
    if op == "Abs":
        return _elementwise(lambda v: ar.sign_case(v, v, -v), _num(x))
    if op == "LeakyRelu":
        alpha = Fraction(a.get("alpha", float(np.float32(0.01))))
        return _elementwise(lambda v: ar.sign_case(v, v, alpha * v), _num(x))
    if op == "PRelu":
        X, S = _num(x), _num(i[1])
        if np.broadcast_shapes(X.shape, S.shape) != X.shape:
            raise Invalid("PRelu's slope does not broadcast to X")
        return _elementwise(lambda v, s: ar.sign_case(v, v, s * v), X, S)
    if op == "Clip":
        X = _num(x)
        if opset < 11:  # Clip-6: absent bounds are the float32 extremes
            lo, hi = Fraction(a.get("min", -FLT_MAX)), Fraction(a.get("max", FLT_MAX))
        else:
            lo, hi = (
                _scalar(i[k], f"Clip's input {k}") if len(i) > k and i[k] is not None else None
                for k in (1, 2)
            )

        def clip(v):
            if lo is not None:
                v = ar.max(v, lo)
            return v if hi is None else ar.min(v, hi)

        return _elementwise(clip, X)
    if op in ("Min", "Sum"):
        if opset < 8 and len({t.shape for t in i}) > 1:
            raise Invalid(f"{op} broadcasting before opset 8")
        return _vmax(ar, [_num(t) for t in i], ar.min if op == "Min" else lambda u, v: u + v)
    if op == "Pad":
        return _pad(_num(x), i, a, opset)
    if op == "Slice":
        if opset < 10:
            if "starts" not in a or "ends" not in a:
                raise Invalid("Slice without starts or ends")
            starts, ends = list(a["starts"]), list(a["ends"])
            axes, steps = (list(a["axes"]) if "axes" in a else None), None
        else:
            starts, ends = _ints(i[1], "starts", 1), _ints(i[2], "ends", 1)
            axes, steps = (
                _ints(i[k], "Slice's input", 1) if len(i) > k and i[k] is not None else None
                for k in (3, 4)
            )
        n = len(starts)
        if len(ends) != n or any(v is not None and len(v) != n for v in (axes, steps)):
            raise Invalid("Slice's starts, ends, axes and steps differ in length")
        if x is None or x.ndim == 0:
            raise Invalid("Slice of a scalar")
        axes = [_norm_axis(v, x.ndim) for v in (axes if axes is not None else range(n))]
        if len(set(axes)) != n or (steps is not None and 0 in steps):
            raise Invalid("Slice's axes repeated or a step 0")
        return _sem()._slice(x, starts, ends, axes, steps)
    if op == "Gather":
        idx = i[1]
        if not _is_int(idx) or x is None:
            raise Invalid("Gather's indices")
        ax = _norm_axis(a.get("axis", 0), x.ndim)
        s = x.shape[ax]
        if idx.size and (idx.min() < -s or idx.max() >= s):
            raise Invalid("Gather's indices out of range")
        return np.take(x, np.where(idx < 0, idx + s, idx), axis=ax)
    if op == "Shape":
        end = a.get("end")
        return np.array(
            list(x.shape)[int(a.get("start", 0)) : None if end is None else int(end)],
            dtype=np.int64,
        )
    if op == "Reshape":
        if len(i) != 2 or "shape" in a:
            raise Invalid("Reshape takes its shape as an input")
        shape = _ints(i[1], "shape")
        allowzero = int(a.get("allowzero", 0))
        if allowzero and opset < 14:
            raise Invalid("allowzero before opset 14")
        if shape.count(-1) > 1 or any(v < -1 for v in shape):
            raise Invalid("Reshape shape")
        if allowzero and 0 in shape and -1 in shape:
            raise Invalid("allowzero with 0 and -1")
        new = []
        for j, v in enumerate(shape):
            if v == 0 and not allowzero:
                if j >= x.ndim:
                    raise Invalid("Reshape 0 beyond the rank")
                new.append(x.shape[j])
            else:
                new.append(v)
        return x.reshape(new)
    if op == "Flatten":
        ax = int(a.get("axis", 1))
        if not -x.ndim <= ax <= x.ndim:  # (negative axes: opset 11's reading, earlier too)
            raise Invalid("Flatten axis")
        ax = ax + x.ndim if ax < 0 else ax
        return x.reshape(int(np.prod(x.shape[:ax])), int(np.prod(x.shape[ax:])))
    if op in ("Squeeze", "Unsqueeze"):
        if opset >= 13:
            if "axes" in a:
                raise Invalid("axes attribute at opset >= 13")
            axes = _ints(i[1], "axes") if len(i) > 1 and i[1] is not None else None
        else:
            if len(i) > 1:
                raise Invalid("axes input before opset 13")
            axes = list(a["axes"]) if "axes" in a else None
        if op == "Squeeze":
            if axes is None:
                return x.reshape([v for v in x.shape if v != 1])
            axes = [_norm_axis(v, x.ndim) for v in axes]
            if len(set(axes)) != len(axes) or any(x.shape[v] != 1 for v in axes):
                raise Invalid("Squeeze axes")
            return x.reshape([v for j, v in enumerate(x.shape) if j not in axes])
        if axes is None:
            raise Invalid("Unsqueeze without axes")
        rank = x.ndim + len(axes)
        axes = [_norm_axis(v, rank) for v in axes]
        if len(set(axes)) != len(axes):
            raise Invalid("Unsqueeze axes")
        shape = list(x.shape)
        for ax in sorted(axes):
            shape.insert(ax, 1)
        return x.reshape(shape)
    if op == "Transpose":
        perm = [int(v) for v in a.get("perm", list(reversed(range(x.ndim))))]
        if sorted(perm) != list(range(x.ndim)):
            raise Invalid("perm")
        return np.transpose(x, perm)
    if op == "Concat":
        if "axis" not in a:
            raise Invalid("Concat without axis")
        if any(t is None for t in i):
            raise Invalid("Concat of a missing input")
        ax = int(a["axis"])
        if len({t.ndim for t in i}) != 1:
            raise Invalid("Concat ranks")
        ax = _norm_axis(ax, i[0].ndim)
        if any(t.dtype.kind in "iu" for t in i) and any(t.dtype == object for t in i):
            raise Invalid("Concat of mixed types")
        return np.concatenate(i, axis=ax)
    raise Invalid(f"operator {op}")


def onnx_valid(model) -> bool:
    """Whether onnx.checker (full check, with shape inference) accepts the model."""
    import onnx

    try:
        onnx.checker.check_model(model, full_check=True)
        return True
    except Exception:  # noqa: BLE001
        return False


# -------------------------------------------------------------------- ONNX mutations

OPS = (
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
    "Softmax",
    "Sigmoid",
    "Conv",
    "Abs",
    "Min",
    "ArgMax",
    "Cast",
    "Gather",
    "Pad",
    "Clip",
    "LeakyRelu",
    "Sum",
    "ReduceSum",
    "Tanh",
    "If",
    "Loop",
    "",
    "relu",
    "MatMulInteger",
    "ConvTranspose",
    "BatchNormalization",
    "AveragePool",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "Slice",
    "Shape",
    "PRelu",
    "ReduceMin",
    "ReduceMean",
    "Floor",
)


def _tensor_names(m):
    names = [i.name for i in m.graph.input] + [t.name for t in m.graph.initializer]
    for n in m.graph.node:
        names += list(n.output)
    return [x for x in names if x]


def _random_attr(rng):
    from onnx import helper

    name = rng.choice(
        [
            "transA",
            "transB",
            "alpha",
            "beta",
            "axis",
            "axes",
            "keepdims",
            "perm",
            "allowzero",
            "kernel_shape",
            "strides",
            "pads",
            "ceil_mode",
            "dilations",
            "noop_with_empty_axes",
            "auto_pad",
            "storage_order",
            "seed",
            "ratio",
            "value_float",
            "value_ints",
            "shape",
            "unknown",
            "group",
            "count_include_pad",
            "output_padding",
            "output_shape",
            "epsilon",
            "momentum",
            "training_mode",
            "spatial",
            "mode",
            "start",
            "end",
            "starts",
            "ends",
            "min",
            "max",
        ]
    )
    value = rng.choice(
        [
            0,
            1,
            -1,
            2,
            3,
            7,
            2**40,
            -(2**40),
            0.5,
            2.0,
            -1.0,
            1e30,
            float("nan"),
            float("inf"),
            [0],
            [1, 0],
            [2],
            [1, 1],
            [0, 1, 2],
            [-1],
            [3, 3],
            [],
            b"SAME_UPPER",
            b"VALID",
            b"NOTSET",
            "abc",
            b"SAME_LOWER",
            b"reflect",
            b"edge",
            b"wrap",
            b"constant",
        ]
    )
    if value == []:
        return helper.make_attribute(name, [], attr_type=rng.choice([6, 7]))
    return helper.make_attribute(name, value)


def _mutate_attr(node, rng):
    from onnx import helper

    if not node.attribute or rng.random() < 0.3:
        node.attribute.append(_random_attr(rng))
        return "attribute added"
    k = rng.randrange(len(node.attribute))
    at = node.attribute[k]
    r = rng.random()
    if r < 0.3:
        del node.attribute[k]
        return "attribute deleted"
    v = helper.get_attribute_value(at)
    if isinstance(v, int):
        new = rng.choice([v + 1, v - 1, 1 - v, 0, -v, 2**62, -1, 5])
    elif isinstance(v, float):
        new = rng.choice([v * 2, -v, 0.0, float("nan"), float("inf"), 1e-45, 3.4e38, 0.5])
    elif isinstance(v, list) and v and isinstance(v[0], int):
        new = list(v)
        j = rng.randrange(len(new))
        new[j] = rng.choice([new[j] + 1, new[j] - 1, -new[j], 0, 100, -100])
        if rng.random() < 0.3:
            new = new + [rng.choice([0, 1, -1])] if rng.random() < 0.5 else new[:-1]
    elif isinstance(v, bytes):
        new = rng.choice([b"SAME_UPPER", b"SAME_LOWER", b"VALID", b"NOTSET", b"", b"\xff"])
    else:
        new = rng.choice([1, 2.5, "x", [1, 2]])
    if r < 0.4:  # another attribute type for the same name
        new = rng.choice([1.5, "x", [1, 2], [1.5], 3])
    if isinstance(new, list) and not new:
        new = [0]
    node.attribute[k].CopyFrom(helper.make_attribute(at.name, new))
    return "attribute changed"


def _mutate_initializer(m, rng):
    from onnx import numpy_helper

    inits = m.graph.initializer
    if not inits:
        return "none"
    k = rng.randrange(len(inits))
    t = inits[k]
    r = rng.random()
    try:
        arr = numpy_helper.to_array(t)
    except Exception:  # noqa: BLE001
        arr = None
    if r < 0.35 and arr is not None and arr.size and arr.dtype.kind == "f":
        a = arr.copy().reshape(-1)
        j = rng.randrange(a.size)
        big = float(np.finfo(a.dtype).max)
        a[j] = rng.choice(
            [
                a[j] * 2,
                -a[j],
                0.0,
                -0.0,
                a[j] + 0.25,
                float("nan"),
                float("inf"),
                -float("inf"),
                big,
                -big,
                float(np.finfo(a.dtype).tiny) / 2,
                1 / 3,
                0.1,
                a[j] + 1,
            ]
        )
        t.CopyFrom(numpy_helper.from_array(a.reshape(arr.shape), t.name))
        return "weight changed"
    if r < 0.45 and arr is not None and arr.dtype.kind in "iu" and arr.size:
        a = arr.copy().reshape(-1)
        j = rng.randrange(a.size)
        a[j] = rng.choice([0, -1, 1, 2, 3, 6, -2, 2**40, a[j] + 1])
        t.CopyFrom(numpy_helper.from_array(a.reshape(arr.shape), t.name))
        return "integer tensor changed"
    if r < 0.55:
        dims = list(t.dims)
        choice = rng.random()
        if choice < 0.3 and dims:
            dims[rng.randrange(len(dims))] += rng.choice([-1, 1])
        elif choice < 0.5:
            dims = dims + [1]
        elif choice < 0.7 and dims:
            dims = dims[:-1]
        elif choice < 0.85 and arr is not None:
            dims = list(reversed(dims))
        else:
            dims = [rng.choice([0, -1, 2**40])] + dims[1:]
        del t.dims[:]
        t.dims.extend(dims)
        return "initializer dims"
    if r < 0.65:
        t.data_type = rng.choice([1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 16, 0, 99])
        return "initializer type"
    if r < 0.72:
        if arr is not None and not t.raw_data:
            t.CopyFrom(numpy_helper.from_array(arr, t.name))
        if t.raw_data:
            cut = rng.randrange(len(t.raw_data)) if len(t.raw_data) else 0
            t.raw_data = t.raw_data[:cut]
        return "raw data truncated"
    if r < 0.77:
        t.data_location = 1
        e = t.external_data.add()
        e.key, e.value = "location", rng.choice(["weights.bin", "/etc/passwd", "../x"])
        return "external data"
    if r < 0.85:
        c = copy.deepcopy(t)
        if arr is not None and arr.dtype.kind == "f":
            c.CopyFrom(numpy_helper.from_array((arr * 2).astype(arr.dtype), t.name))
        inits.append(c)
        return "initializer twice"
    if r < 0.92:
        del inits[k]
        return "initializer deleted"
    t.name = rng.choice(["X", "Y", "", t.name + "_", "h", "m", "r"])
    return "initializer renamed"


def _mutate_value_info(vi, rng):
    tt = vi.type.tensor_type
    r = rng.random()
    if r < 0.4 and tt.HasField("shape") and tt.shape.dim:
        d = tt.shape.dim[rng.randrange(len(tt.shape.dim))]
        c = rng.random()
        if c < 0.5:
            d.dim_value = rng.choice([0, 1, 2, 3, 4, 6, 2**40])
        elif c < 0.8:
            d.dim_param = rng.choice(["N", "batch", "K"])
        else:
            d.Clear()
        return "shape dim"
    if r < 0.55:
        tt.shape.dim.add().dim_value = rng.choice([1, 2])
        return "shape rank"
    if r < 0.65:
        tt.ClearField("shape")
        return "shape removed"
    if r < 0.85:
        tt.elem_type = rng.choice([1, 6, 7, 9, 10, 11, 16, 0])
        return "element type"
    vi.name = rng.choice(["X2", "", "Y", "h", vi.name + "_"])
    return "renamed"


def mutate_onnx_proto(m, rng) -> str:
    """One graph mutation of the ModelProto ``m`` in place; what was done."""
    from onnx import helper

    g = m.graph
    nodes = g.node
    kind = rng.choice(
        [
            "op",
            "op",
            "attr",
            "attr",
            "attr",
            "init",
            "init",
            "init",
            "input",
            "output",
            "opset",
            "opset",
            "ir",
            "delete-node",
            "dup-node",
            "swap-nodes",
            "node-input",
            "node-input",
            "node-output",
            "insert",
            "insert",
            "domain",
            "cycle",
        ]
    )
    if kind == "op" and nodes:
        n = rng.choice(nodes)
        n.op_type = rng.choice(OPS)
        return f"op -> {n.op_type!r}"
    if kind == "attr" and nodes:
        return _mutate_attr(rng.choice(nodes), rng)
    if kind == "init":
        return _mutate_initializer(m, rng)
    if kind == "input" and g.input:
        if rng.random() < 0.15:
            g.input.append(helper.make_tensor_value_info("X2", 1, [1, 2]))
            return "second input"
        return "input " + _mutate_value_info(g.input[rng.randrange(len(g.input))], rng)
    if kind == "output" and g.output:
        r = rng.random()
        if r < 0.15:
            del g.output[0]
            return "output deleted"
        if r < 0.3:
            g.output.append(helper.make_tensor_value_info(rng.choice(_tensor_names(m)), 1, None))
            return "second output"
        if r < 0.5:
            g.output[0].name = rng.choice(_tensor_names(m) + ["nowhere"])
            return "output renamed"
        return "output " + _mutate_value_info(g.output[0], rng)
    if kind == "opset":
        r = rng.random()
        if r < 0.7 and m.opset_import:
            m.opset_import[0].version = rng.choice(
                [1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 17, 18, 19, 21, 22, 25, 2**40]
            )
            return f"opset {m.opset_import[0].version}"
        if r < 0.8:
            del m.opset_import[:]
            return "no opset"
        o = m.opset_import.add()
        o.domain, o.version = rng.choice(
            [("ai.onnx.ml", 3), ("", 13), ("com.microsoft", 1), ("ai.onnx", 18)]
        )
        return "second opset"
    if kind == "ir":
        m.ir_version = rng.choice([0, 1, 3, 4, 7, 8, 9, 10, 11, 99])
        return "ir version"
    if kind == "delete-node" and nodes:
        del nodes[rng.randrange(len(nodes))]
        return "node deleted"
    if kind == "dup-node" and nodes:
        k = rng.randrange(len(nodes))
        nodes.insert(k + rng.randint(0, 2), copy.deepcopy(nodes[k]))
        return "node twice"
    if kind == "swap-nodes" and len(nodes) > 1:
        a, b = rng.sample(range(len(nodes)), 2)
        na, nb = copy.deepcopy(nodes[a]), copy.deepcopy(nodes[b])
        nodes[a].CopyFrom(nb)
        nodes[b].CopyFrom(na)
        return "nodes swapped"
    if kind == "node-input" and nodes:
        n = rng.choice(nodes)
        r = rng.random()
        names = _tensor_names(m)
        if r < 0.3 and n.input:
            n.input[rng.randrange(len(n.input))] = rng.choice(names + ["dangling", ""])
            return "node input renamed"
        if r < 0.5 and n.input:
            del n.input[rng.randrange(len(n.input))]
            return "node input dropped"
        if r < 0.75:
            n.input.append(rng.choice(names + [""]))
            return "node input added"
        if len(n.input) > 1:
            n.input[0], n.input[1] = n.input[1], n.input[0]
            return "node inputs swapped"
        return "none"
    if kind == "node-output" and nodes:
        n = rng.choice(nodes)
        r = rng.random()
        if r < 0.4 and n.output:
            n.output[0] = rng.choice(_tensor_names(m) + ["fresh", ""])
            return "node output renamed"
        if r < 0.7:
            n.output.append(rng.choice(["mask", "Y", "extra"]))
            return "node output added"
        if n.output:
            del n.output[0]
            return "node output dropped"
        return "none"
    if kind == "cycle" and nodes:
        n = rng.choice(nodes)
        if n.input and n.output and nodes[-1].output:
            n.input[0] = n.output[0] if rng.random() < 0.5 else nodes[-1].output[0]
            return "cycle"
        return "none"
    if kind == "domain" and nodes:
        rng.choice(nodes).domain = rng.choice(["com.microsoft", "ai.onnx.ml", "ai.onnx", "x"])
        return "node domain"
    if kind == "insert":
        return _insert_node(m, rng)
    return "none"


def _insert_node(m, rng) -> str:
    """A new node on a tensor t (its consumers then read the new node's output)."""
    from onnx import helper, numpy_helper

    g = m.graph
    names = [n for n in _tensor_names(m) if n not in {t.name for t in g.initializer}]
    if not names:
        return "none"
    t = rng.choice(names)
    new = t + "_fz"
    op = rng.choice(
        [
            "Relu",
            "Neg",
            "Identity",
            "Dropout",
            "Softmax",
            "Max",
            "Add",
            "Mul",
            "Sub",
            "Flatten",
            "Transpose",
            "Unsqueeze+Squeeze",
            "Div",
            "Mul-const",
            "Add-const",
            "Relu",
            "Reshape",
            "Concat",
            "MaxPool",
            "ReduceMax",
            "Abs",
            "LeakyRelu",
            "Min",
            "Sum",
            "PRelu-const",
            "Clip-const",
            "Shape+Reshape",
            "Slice-all",
            "Pad",
            "ReduceSum",
            "ReduceMean",
        ]
    )
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 13)
    made = []

    def const(suffix, arr):
        g.initializer.append(numpy_helper.from_array(np.asarray(arr), t + suffix))
        return t + suffix

    if op in ("Abs", "LeakyRelu"):
        attrs = (
            {"alpha": rng.choice([0.125, 2.0, -1.0])}
            if op == "LeakyRelu" and rng.random() < 0.5
            else {}
        )
        made.append(helper.make_node(op, [t], [new], **attrs))
    elif op in ("Min", "Sum"):
        made.append(helper.make_node(op, [t] * rng.choice([1, 2, 3]), [new]))
    elif op == "PRelu-const":
        made.append(
            helper.make_node(
                "PRelu",
                [t, const("_sl", np.array([rng.choice([0.25, 2.0, -1.0])], dtype=np.float32))],
                [new],
            )
        )
    elif op == "Clip-const":
        lo, hi = rng.choice([(-0.5, 1.0), (0.0, 0.0), (1.0, -1.0)])
        if opset >= 11:
            made.append(
                helper.make_node(
                    "Clip", [t, const("_lo", np.float32(lo)), const("_hi", np.float32(hi))], [new]
                )
            )
        else:
            made.append(helper.make_node("Clip", [t], [new], min=lo, max=hi))
    elif op == "Shape+Reshape":
        made += [
            helper.make_node("Shape", [t], [t + "_sh"]),
            helper.make_node("Reshape", [t, t + "_sh"], [new]),
        ]
    elif op == "Slice-all":
        ends = rng.choice([2**63 - 1, -1, 1])
        if opset >= 10:
            made.append(
                helper.make_node(
                    "Slice",
                    [
                        t,
                        const("_st", np.array([0])),
                        const("_en", np.array([ends])),
                        const("_ax", np.array([-1])),
                    ],
                    [new],
                )
            )
        else:
            made.append(helper.make_node("Slice", [t], [new], starts=[0], ends=[ends], axes=[1]))
    elif op == "Pad":
        pads = rng.choice([[0, 0, 0, 0], [0, 1, 0, 1], [0, -1, 0, 0], [0, 0, 0, 2]])
        mode = rng.choice(["constant", "edge", "reflect"])
        if opset >= 11:
            made.append(helper.make_node("Pad", [t, const("_p", np.array(pads))], [new], mode=mode))
        else:
            made.append(helper.make_node("Pad", [t], [new], pads=pads, mode=mode))
    elif op in ("ReduceSum", "ReduceMean"):
        axes = [rng.choice([-1, 0, 1])]
        if opset >= (13 if op == "ReduceSum" else 18):
            made.append(
                helper.make_node(
                    op, [t, const("_ax", np.array(axes))], [new], keepdims=rng.choice([0, 1])
                )
            )
        else:
            made.append(helper.make_node(op, [t], [new], axes=axes, keepdims=rng.choice([0, 1])))
    elif op in ("Max", "Add", "Mul", "Sub", "Concat"):
        made.append(helper.make_node(op, [t, t], [new], **({"axis": -1} if op == "Concat" else {})))
    elif op == "Div":
        made.append(helper.make_node("Div", [t, t], [new]))
    elif op in ("Mul-const", "Add-const"):
        c = t + "_c"
        val = rng.choice([0.5, -2.0, 0.0, 3.0, 1e-40])
        g.initializer.append(numpy_helper.from_array(np.array([val], dtype=np.float32), c))
        made.append(helper.make_node(op.split("-")[0], [t, c], [new]))
    elif op == "Unsqueeze+Squeeze":
        made += [
            helper.make_node("Unsqueeze", [t], [t + "_u"], axes=[0]),
            helper.make_node("Squeeze", [t + "_u"], [new], axes=[0]),
        ]
    elif op == "Reshape":
        c = t + "_s"
        g.initializer.append(
            numpy_helper.from_array(
                np.array(rng.choice([[1, -1], [-1], [0, -1], [2, -1], [1, 1, -1]]), dtype=np.int64),
                c,
            )
        )
        made.append(helper.make_node("Reshape", [t, c], [new]))
    elif op == "MaxPool":
        made.append(helper.make_node("MaxPool", [t], [new], kernel_shape=[rng.choice([1, 2])]))
    elif op == "ReduceMax":
        made.append(
            helper.make_node(
                "ReduceMax", [t], [new], axes=[rng.choice([-1, 0, 1])], keepdims=rng.choice([0, 1])
            )
        )
    else:
        made.append(helper.make_node(op, [t], [new]))
    for n in g.node:
        for k, name in enumerate(n.input):
            if name == t:
                n.input[k] = new
    for o in g.output:
        if o.name == t:
            o.name = new
    pos = 0
    for k, n in enumerate(g.node):
        if t in n.output:
            pos = k + 1
    for j, n in enumerate(made):
        g.node.insert(pos + j, n)
    return f"inserted {op}"


def mutate_onnx(data: bytes, rng) -> tuple[bytes, str]:
    """(bytes, what) of a mutated ONNX file: one to three graph mutations, or byte edits."""
    import onnx

    r = rng.random()
    if r < 0.12:
        n = len(data)
        k = rng.random()
        if k < 0.35:
            return data[: rng.randrange(n)], "truncated"
        if k < 0.7:
            b = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(n)] = rng.randrange(256)
            return bytes(b), "bytes flipped"
        if k < 0.8:
            return b"", "empty"
        if k < 0.9:
            return data + bytes(
                rng.randrange(256) for _ in range(rng.randint(1, 9))
            ), "garbage appended"
        return rng.choice([b"{}", b"\x00" * 64, b"ONNX", b"\x08\x03" * 3]), "not protobuf"
    m = onnx.load_from_string(data)
    what = [mutate_onnx_proto(m, rng) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
    return m.SerializeToString(), "+".join(what)


# ---------------------------------------------------------------- VNN-LIB seeds


def _box(n, lo="-1", hi="1", names="X"):
    return "".join(
        f"(assert (>= {names}_{i} {lo}))\n(assert (<= {names}_{i} {hi}))\n" for i in range(n)
    )


def _decl(nx, ny, order=None):
    names = [f"X_{i}" for i in range(nx)] + [f"Y_{j}" for j in range(ny)]
    if order == "reversed":
        names = names[::-1]
    return "".join(f"(declare-const {v} Real)\n" for v in names)


def vnnlib1_seeds() -> list[tuple[str, str, int]]:
    """(name, text, output dimension) of VNN-LIB 1.0 properties over 2 inputs (sat and
    unsat ones, VNN-COMP's shapes, every number form the reader documents)."""
    S = []
    S.append(
        ("box_y_ge", "; can y reach 1.5?\n" + _decl(2, 1) + _box(2) + "(assert (>= Y_0 1.5))\n", 1)
    )
    S.append(("box_y_ge_unsat", _decl(2, 1) + _box(2) + "(assert (>= Y_0 40))\n", 1))
    S.append(
        (
            "vnncomp_or",
            "(set-logic QF_LRA)\n"
            + _decl(2, 2, "reversed")
            + "(assert (and (>= X_0 -0.5) (<= X_0 0.5) (>= X_1 -1e-1) (<= X_1 1.0e0)))\n"
            "(assert (or (and (>= Y_0 Y_1)) (and (<= Y_1 -0.75) (>= Y_0 -2))))\n"
            "(check-sat)\n",
            2,
        )
    )
    S.append(
        (
            "input_disjunction",
            _decl(2, 2) + "(assert (or (and (>= X_0 -1) (<= X_0 0) (>= X_1 0) (<= X_1 1))\n"
            "            (and (>= X_0 0.25) (<= X_0 1) (>= X_1 -1) (<= X_1 -0.5))))\n"
            "(assert (> (- Y_1 Y_0) (* 2 (+ 1 0.5))))\n",
            2,
        )
    )
    S.append(
        (
            "polyhedron",
            _decl(2, 1)
            + _box(2, "(- 1)", "1")
            + "(assert (<= (+ X_0 X_1) 0.5))\n(assert (>= (- X_0 (* 0.5 X_1)) -0.25))\n"
            "(assert (< Y_0 (- 0.125)))\n",
            1,
        )
    )
    S.append(
        (
            "equalities",
            _decl(2, 2) + "(assert (= X_0 0.5))\n(assert (= X_1 -0.25))\n"
            "(assert (or (>= Y_0 100) (<= Y_1 10)))\n",
            2,
        )
    )
    S.append(("box_sum_unsat", _decl(2, 2) + _box(2) + "(assert (>= (+ Y_0 Y_1) 60))\n", 2))
    S.append(
        (
            "mixed_rows",
            _decl(2, 2)
            + _box(2, "-2", "2")
            + "(assert (>= (+ Y_0 X_0) (* -1 Y_1)))\n(assert (< X_1 0.75))\n",
            2,
        )
    )
    return S


def vnnlib2_seeds() -> list[tuple[str, str, int]]:
    V = "(vnnlib-version <2.0>)\n"
    S = []
    S.append(
        (
            "v2_box",
            V + "(declare-network f (declare-input X real [1,2]) "
            "(declare-output Y real [1]))\n"
            "(assert (and (<= -1.0 X[0,0]) (<= X[0,0] 1.0) (<= -1.0 X[0,1]) "
            "(<= X[0,1] 1.0)))\n(assert (>= Y[0] 1.5))\n",
            1,
        )
    )
    S.append(
        (
            "v2_or",
            V + "(declare-network f (declare-input X real [2]) "
            "(declare-output Y real [2]))\n"
            "(assert (and (<= -0.5 X[0]) (<= X[0] 0.5) (<= -1.0 X[1]) (<= X[1] 1.0)))\n"
            "(assert (or (> Y[0] Y[1]) (and (<= Y[1] -0.75) (!= Y[0] 0.0))))\n",
            2,
        )
    )
    S.append(
        (
            "v2_unsat",
            V + "(declare-network f (declare-input X real [2]) "
            "(declare-output Y real [1]))\n"
            "(assert (and (>= X[0] -1.0) (<= X[0] 1.0) (>= X[1] -1.0) (<= X[1] 1.0)))\n"
            "(assert (>= (- Y[0] (* 2.0 X[0])) 50.0))\n",
            1,
        )
    )
    return S


# ------------------------------------------------------------ s-expression mutations

_TOK = re.compile(r"\s+|;[^\n]*|\(|\)|[^\s();]+")
_NUM_SWAPS = (
    "0",
    "-0",
    "1e1000",
    "1e1001",
    "1e-1000",
    "-1.5E+2",
    ".5",
    "5.",
    "1/3",
    "+1",
    "0x10",
    "1_0",
    "NaN",
    "inf",
    "-inf",
    "١",
    "１",
    "1e",
    "--1",
    "1//2",
    "1/0",
    "9" * 400,
    "0." + "0" * 300 + "1",
    "3.0",
    "-3.0",
    "(- 1)",
    "(- (- 0.5))",
    "(/ 1 3)",
    "(* 2 0.5)",
    "(+ 0.25 0.25)",
    "0.30000000000000000000000001",
    "1e-3",
    "2.0e0",
    "1e+1",
)
_SYM_SWAPS = (
    "X_0",
    "X_1",
    "X_2",
    "Y_0",
    "Y_1",
    "Y_2",
    "X_01",
    "X_00",
    "X_+1",
    "x_0",
    "X0",
    "X_",
    "Y_-1",
    "X_1 ",
    "X[0]",
    "X[0,1]",
    "X[1]",
    "Y[0]",
    "Y[1]",
    "X[0,0]",
    "X[2]",
    "X[0,2]",
    "Y[0,0]",
    "X_١",
    "Z_0",
    "X_999999999999999999999",
)
_OP_SWAPS = (
    "<=",
    ">=",
    "<",
    ">",
    "=",
    "==",
    "!=",
    "and",
    "or",
    "not",
    "=>",
    "+",
    "-",
    "*",
    "/",
    "ite",
    "distinct",
    "let",
    "assert",
    "declare-const",
    "declare-fun",
    "set-logic",
    "check-sat",
    "Real",
    "Int",
    "real",
    "float32",
    "declare-network",
    "declare-input",
    "declare-output",
    "vnnlib-version",
    "<2.0>",
    "<1.0>",
    "equal-to",
    "isomorphic-to",
    "declare-hidden",
)


def mutate_sexpr(text: str, rng) -> tuple[str, str]:
    """One token or structure edit of an s-expression text; (text, what)."""
    toks = [m.group() for m in _TOK.finditer(text)]
    idx = [k for k, t in enumerate(toks) if not t[0].isspace() and t[0] != ";"]
    atoms = [k for k in idx if toks[k] not in "()"]
    kind = rng.choice(
        [
            "number",
            "number",
            "symbol",
            "op",
            "delete",
            "duplicate",
            "swap",
            "paren",
            "paren",
            "assert-drop",
            "assert-dup",
            "wrap",
            "nest",
            "negate",
            "comment",
            "unicode",
            "bound",
            "declare",
            # edits that keep a file valid more often: answers to confirm
            "value",
            "value",
            "value",
            "relation",
            "relation",
            "connective",
            "rename",
            "bound",
            "wrap",
            "assert-drop",
        ]
    )
    if kind == "value" and atoms:
        nums = [k for k in atoms if _NUMBER.fullmatch(toks[k])]
        if nums:
            k = rng.choice(nums)
            toks[k] = (
                _perturb(toks[k], rng)
                if rng.random() < 0.7
                else rng.choice(["0", "-1", "1", "0.5", "-0.25", "2.0", "1e-3", "-1.5E+1", "3.0"])
            )
            return "".join(toks), "value"
    if kind == "relation" and atoms:
        rel = [k for k in atoms if toks[k] in ("<=", ">=", "<", ">", "=", "==", "!=")]
        if rel:
            k = rng.choice(rel)
            v2 = toks[k] in ("==", "!=") or "vnnlib-version" in text
            toks[k] = rng.choice(["<=", ">=", "<", ">"] + (["==", "!="] if v2 else ["="]))
            return "".join(toks), "relation"
    if kind == "connective" and atoms:
        con = [k for k in atoms if toks[k] in ("and", "or")]
        if con:
            k = rng.choice(con)
            toks[k] = "or" if toks[k] == "and" else "and"
            return "".join(toks), "and/or"
    if kind == "rename" and atoms:
        v1 = [k for k in atoms if re.fullmatch(r"[XY]_\d+", toks[k])]
        v2 = [k for k in atoms if re.fullmatch(r"[XY]\[[\d,]+\]", toks[k])]
        if v1 or v2:
            k = rng.choice(v1 + v2)
            if k in v1:
                toks[k] = rng.choice(["X_0", "X_1", "Y_0", "Y_1"])
            else:
                toks[k] = rng.choice(["X[0]", "X[1]", "Y[0]", "Y[1]", "X[0,0]", "X[0,1]"])
            return "".join(toks), "variable renamed"
    if kind == "number" and atoms:
        nums = [
            k for k in atoms if re.fullmatch(r"[-+]?[\d.]+(e[-+]?\d+)?", toks[k], re.I)
        ] or atoms
        k = rng.choice(nums)
        toks[k] = rng.choice(_NUM_SWAPS + (_perturb(toks[k], rng),) * 4)
        return "".join(toks), "number"
    if kind == "symbol" and atoms:
        k = rng.choice([k for k in atoms if re.match(r"[XY]", toks[k])] or atoms)
        toks[k] = rng.choice(_SYM_SWAPS)
        return "".join(toks), "variable"
    if kind == "op" and atoms:
        k = rng.choice(atoms)
        toks[k] = rng.choice(_OP_SWAPS)
        return "".join(toks), "operator"
    if kind == "delete" and idx:
        k = rng.choice(idx)
        toks[k] = ""
        return "".join(toks), "token deleted"
    if kind == "duplicate" and idx:
        k = rng.choice(idx)
        toks[k] = toks[k] + " " + toks[k]
        return "".join(toks), "token twice"
    if kind == "swap" and len(atoms) > 1:
        a, b = rng.sample(atoms, 2)
        toks[a], toks[b] = toks[b], toks[a]
        return "".join(toks), "tokens swapped"
    if kind == "paren":
        k = rng.randrange(len(toks) + 1)
        toks.insert(k, rng.choice(["(", ")", "()", "(())", ")("]))
        return "".join(toks), "paren"
    forms = _top_forms(text)
    asserts = [f for f in forms if f.startswith("(assert")]
    if kind == "assert-drop" and asserts:
        f = rng.choice(asserts)
        return text.replace(f, "", 1), "assert dropped"
    if kind == "assert-dup" and asserts:
        f = rng.choice(asserts)
        return text + "\n" + f + "\n", "assert twice"
    if kind == "wrap" and asserts:
        f = rng.choice(asserts)
        inner = f[len("(assert") : -1].strip()
        other = rng.choice(asserts)[len("(assert") : -1].strip()
        new = rng.choice(
            [
                f"(assert (and {inner}))",
                f"(assert (or {inner}))",
                f"(assert (or {inner} {other}))",
                f"(assert (and {inner} {other}))",
                f"(assert (or (and {inner} {other}) {inner}))",
                "(assert (and))",
                "(assert (or))",
                f"(assert {inner} {other})",
                f"(assert (not {inner}))",
            ]
        )
        return text.replace(f, new, 1), "assert wrapped"
    if kind == "nest" and asserts:
        f = rng.choice(asserts)
        inner = f[len("(assert") : -1].strip()
        d = rng.choice([5, 200, 2000, 20000])
        op = rng.choice(["and", "or"])
        return text.replace(
            f, f"(assert {('(' + op + ' ') * d}{inner}{')' * d})", 1
        ), f"nesting {d}"
    if kind == "negate" and atoms:
        k = rng.choice(atoms)
        toks[k] = f"(- {toks[k]})"
        return "".join(toks), "negated"
    if kind == "comment":
        k = rng.randrange(len(toks) + 1)
        toks.insert(
            k,
            rng.choice(
                [
                    "; c\n",
                    ";",
                    "\n",
                    "\r\n",
                    "\t",
                    " ; (assert\n",
                    "|X_0|",
                    '"s"',
                    "#b01",
                    "\x00",
                    "\u00a0",
                ]
            ),
        )
        return "".join(toks), "comment/space"
    if kind == "unicode" and idx:
        k = rng.choice(idx)
        toks[k] = toks[k] + rng.choice(["\u200b", "é", "\U0001f600", "\ufeff", "\ud800"])
        return "".join(toks), "unicode"
    if kind == "bound" and asserts:
        var = rng.choice(["X_0", "X_1", "Y_0", "X[0]", "X[0,1]", "Y[0]"])
        rel = rng.choice(["<=", ">=", "<", ">", "="])
        val = rng.choice(["0", "1", "-1", "0.5", "-0.25", "3", "1e-9", "-100.0", "0.0"])
        return text + f"(assert ({rel} {var} {val}))\n", "bound added"
    if kind == "declare":
        r = rng.random()
        if r < 0.5:
            m = re.search(r"\(declare-const [^)]*\)\n?", text)
            if m:
                return text[: m.start()] + text[m.end() :], "declaration dropped"
        v = rng.choice(["X_0", "X_2", "Y_1", "Y_5", "X_01", "Z"])
        return f"(declare-const {v} Real)\n" + text, "declaration added"
    return text, "none"


def _perturb(tok: str, rng) -> str:
    try:
        v = Fraction(tok)
    except (ValueError, ZeroDivisionError):
        return tok
    w = rng.choice(
        [
            v + Fraction(1, 4),
            v - Fraction(1, 2),
            -v,
            v * 3,
            v / 2,
            Fraction(0),
            v + Fraction(1, 1000),
        ]
    )
    if w.denominator & (w.denominator - 1) == 0 and abs(w) < 10**300:
        return str(float(w))
    return f"{w.numerator}/{w.denominator}"


def _top_forms(text: str) -> list[str]:
    out, depth, start = [], 0, None
    in_comment = False
    for k, ch in enumerate(text):
        if in_comment:
            in_comment = ch != "\n"
            continue
        if ch == ";":
            in_comment = True
        elif ch == "(":
            if depth == 0:
                start = k
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
            if depth == 0:
                out.append(text[start : k + 1])
    return out


def mutate_text(text: str, rng) -> tuple[bytes, str]:
    """(bytes, what): one to three s-expression edits, sometimes byte edits on top."""
    what = []
    if rng.random() < 0.15:
        data, w = fuzz.mutate_text(text, rng)
        return data, w
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        text, w = mutate_sexpr(text, rng)
        what.append(w)
    data = text.encode("utf-8", "surrogatepass")
    if rng.random() < 0.05:
        data, w = fuzz.mutate_text(data.decode("utf-8", "surrogatepass"), rng)
        what.append(w)
    return data, "+".join(what)


# --------------------------------------------------- the independent property reader

_TOK2 = re.compile(r"\s+|;[^\n]*|\(|\)|<=|>=|==|!=|<|>|[^\s();<>=!]+")
"""2.0's words: its grammar's lexer splits comparison operators from what follows ((<=X[1] 1.0)
is (<= X[1] 1.0)), as the vnnlib package does."""


def _sexprs(text: str, tok=_TOK):
    """Nested lists of tokens; Invalid on unbalanced parentheses."""
    stack = [[]]
    for m in tok.finditer(text):
        t = m.group()
        if t[0].isspace() or t[0] == ";":
            continue
        if t == "(":
            stack.append([])
        elif t == ")":
            if len(stack) == 1:
                raise Invalid("unbalanced )")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(t)
    if len(stack) != 1:
        raise Invalid("unclosed (")
    return stack[0]


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?\d+/\d+", re.ASCII)


def _number(tok: str) -> Fraction:
    if not _NUMBER.fullmatch(tok):
        raise Invalid(f"not a number: {tok!r}")
    return Fraction(tok)


@dataclass
class PropRef:
    """A property read independently: ``version`` (1 or 2), the assertions (nested lists),
    the names of inputs and outputs (1.0: X_i, Y_j; 2.0: tensor name and shape)."""

    version: int
    asserts: list
    n_x: int
    n_y: int
    x_name: str = "X"
    y_name: str = "Y"
    x_shape: tuple = ()
    y_shape: tuple = ()
    text: str = ""

    def var(self, tok: str, X, Y):
        """The value of a variable token, or None when it is not one."""
        if self.version == 1:
            m = re.fullmatch(r"([XY])_(0|[1-9]\d*)", tok, re.ASCII)
            if not m:
                return None
            k = int(m.group(2))
            vec, n = (X, self.n_x) if m.group(1) == "X" else (Y, self.n_y)
            if k >= n:
                raise Invalid(f"{tok} beyond the declared")
            return vec[k]
        m = re.fullmatch(r"([A-Za-z_][\w]*)\[([-\d, ]*)\]", tok, re.ASCII)
        if not m or m.group(1) not in (self.x_name, self.y_name):
            return None
        vec, shape = (X, self.x_shape) if m.group(1) == self.x_name else (Y, self.y_shape)
        try:
            idx = [int(v) for v in m.group(2).split(",")] if m.group(2).strip() else []
        except ValueError:
            raise Invalid(f"index {tok}") from None
        if len(idx) != len(shape) or any(not 0 <= i < s for i, s in zip(idx, shape)):
            raise Invalid(f"index {tok}")
        flat = 0
        for i, s in zip(idx, shape):
            flat = flat * s + i
        return vec[flat]

    def term(self, t, X, Y):
        if isinstance(t, str):
            v = self.var(t, X, Y)
            if v is not None:
                return v, True
            return _number(t), False
        if not t or not isinstance(t[0], str):
            raise Invalid("term")
        head, args = t[0], [self.term(a, X, Y) for a in t[1:]]
        if not args:
            raise Invalid("no arguments")
        if head == "+":
            return sum((a for a, _ in args[1:]), args[0][0]), any(v for _, v in args)
        if head == "-":
            if len(args) == 1:
                return -args[0][0], args[0][1]
            out = args[0][0]
            for a, _ in args[1:]:
                out = out - a
            return out, any(v for _, v in args)
        if head == "*":
            if sum(1 for _, v in args if v) > 1:
                raise Invalid("nonlinear")
            out = args[0][0]
            for a, _ in args[1:]:
                out = out * a
            return out, any(v for _, v in args)
        raise Invalid(f"term head {head}")

    def formula(self, f, X, Y, AND, OR):
        if isinstance(f, str) or not f or not isinstance(f[0], str):
            raise Invalid("formula")
        head, args = f[0], f[1:]
        if head in ("and", "or"):
            if not args:
                raise Invalid(f"({head})")
            parts = [self.formula(a, X, Y, AND, OR) for a in args]
            return AND(*parts) if head == "and" else OR(*parts)
        ops = (
            ("<=", ">=", "<", ">", "=") if self.version == 1 else ("<=", ">=", "<", ">", "==", "!=")
        )
        if head not in ops or len(args) != 2:
            raise Invalid(f"comparison {head}")
        (a, _), (b, _) = self.term(args[0], X, Y), self.term(args[1], X, Y)
        if head == "<=":
            return a <= b
        if head == ">=":
            return a >= b
        if head == "<":
            return a < b
        if head == ">":
            return a > b
        if head in ("=", "=="):
            return a == b
        return OR(a < b, a > b)

    def holds(self, X, Y) -> bool:
        """Every assertion at the exact point (X, Y)."""

        def AND(*p):
            return all(p)

        def OR(*p):
            return any(p)

        return all(self.formula(f, X, Y, AND, OR) for f in self.asserts)

    def z3_formulas(self, X, Y):
        import z3

        return [self.formula(f, X, Y, z3.And, z3.Or) for f in self.asserts]


def read_prop_ref(text: str) -> PropRef:
    """The independent reading of a VNN-LIB 1.0 or 2.0 text; Invalid for what it refuses."""
    forms = _sexprs(text)
    if any(isinstance(f, str) or not f or not isinstance(f[0], str) for f in forms):
        raise Invalid("a top-level form")
    heads = [f[0] for f in forms]
    if "vnnlib-version" in heads or "declare-network" in heads:
        return _read_v2(_sexprs(_v2_text(text), _TOK2), text)
    declared = {}
    asserts = []
    for f in forms:
        if f[0] == "declare-const":
            if len(f) != 3 or f[2] != "Real" or not isinstance(f[1], str):
                raise Invalid("declaration")
            m = re.fullmatch(r"([XY])_(0|[1-9]\d*)", f[1], re.ASCII)
            if not m or f[1] in declared:
                raise Invalid(f"declared name {f[1]}")
            declared[f[1]] = (m.group(1), int(m.group(2)))
        elif f[0] == "assert":
            if len(f) != 2:
                raise Invalid("assert")
            asserts.append(f[1])
        elif f[0] not in ("set-logic", "check-sat", "get-model", "exit", "set-info"):
            raise Invalid(f"command {f[0]}")
    if not asserts:
        raise Invalid("no assertion")
    n = {}
    for letter in "XY":
        idx = sorted(i for lt, i in declared.values() if lt == letter)
        if not idx or idx != list(range(len(idx))):
            raise Invalid(f"{letter} declarations")
        n[letter] = len(idx)
    ref = PropRef(1, asserts, n["X"], n["Y"], text=text)
    _check_names(ref, asserts, set(declared))
    return ref


def _check_names(ref, asserts, declared):
    """Every symbol used is declared (1.0), or a tensor element (2.0), or a number."""

    def walk(t):
        if isinstance(t, list):
            for s in t[1:]:
                walk(s)
            return
        if ref.version == 1 and re.fullmatch(r"[XY]_.*", t) and t not in declared:
            raise Invalid(f"{t} not declared")

    for a in asserts:
        walk(a)
    zero = [Fraction(0)] * max(ref.n_x, 1), [Fraction(0)] * max(ref.n_y, 1)
    for a in asserts:  # every term and formula readable
        ref.formula(a, *zero, lambda *p: all(p), lambda *p: any(p))


def _v2_text(text: str) -> str:
    """A 2.0 text with the blanks in tensor indices removed (X[ 0, 1] and Y [1] are X[0,1]
    and Y[1], as the grammar's lexer reads them)."""
    text = re.sub(r";[^\n]*", "", text)  # comments first: they may hold words and [
    text = re.sub(
        r"\b(?!(?:real|Real|float\d*|int\d*|uint\d*|bool)\b)([A-Za-z_]\w*)\s+\[", r"\1[", text
    )
    return re.sub(r"\[([^\]\[()]*)\]", lambda m: "[" + re.sub(r"\s+", "", m.group(1)) + "]", text)


def _read_v2(forms, text):
    if forms[0][0] != "vnnlib-version" or forms[0][1:] != ["<", "2.0", ">"]:
        raise Invalid("version line")
    nets, asserts = [], []
    for f in forms[1:]:
        if f[0] == "declare-network":
            nets.append(f)
        elif f[0] == "assert" and len(f) == 2:
            asserts.append(f[1])
        else:
            raise Invalid(f"form {f[0]}")
    if len(nets) != 1 or not asserts:
        raise Invalid("one network with assertions")
    net = nets[0]
    if len(net) != 4 or not isinstance(net[1], str):
        raise Invalid("network declaration")
    shapes = {}
    for d in net[2:]:
        if (
            not isinstance(d, list)
            or len(d) != 4
            or d[0] not in ("declare-input", "declare-output")
        ):
            raise Invalid("input or output declaration")
        if d[2] not in ("real", "Real") or not isinstance(d[3], str):
            raise Invalid("element type")
        m = re.fullmatch(r"\[(\d+(?:,\d+)*)\]", d[3], re.ASCII)
        if not m or not re.fullmatch(r"[A-Za-z_]\w*", d[1], re.ASCII):
            raise Invalid("shape")
        shapes[d[0]] = (d[1], tuple(int(v) for v in m.group(1).split(",")))
    if len(shapes) != 2 or shapes["declare-input"][0] == shapes["declare-output"][0]:
        raise Invalid("input and output")
    (xn, xs), (yn, ys) = shapes["declare-input"], shapes["declare-output"]
    if 0 in xs or 0 in ys:
        raise Invalid("empty tensor")
    ref = PropRef(2, asserts, int(np.prod(xs)), int(np.prod(ys)), xn, yn, xs, ys, text)
    _check_names(ref, asserts, set())
    return ref


def z3_reading(text: str):
    """z3's own parse of a VNN-LIB 1.0 text (its assertions), or None when z3 refuses it."""
    import z3

    _Z3_USED.append(1)
    try:
        return list(z3.parse_smt2_string(text))
    except z3.Z3Exception:
        return None


# ---------------------------------------------------------------- the confirmations


def read_cex(text: str, n_x: int):
    """The X values of a VNN-COMP counterexample file, read independently."""
    forms = _sexprs(text)
    if forms and forms[0] == "sat":
        forms = forms[1:]
    if len(forms) != 1 or not isinstance(forms[0], list):
        raise Invalid("counterexample shape")
    vals = {}

    def value(t):
        if isinstance(t, str):
            return _number(t)
        if len(t) == 2 and t[0] == "-":
            return -value(t[1])
        if len(t) == 3 and t[0] == "/":
            d = value(t[2])
            if d == 0:
                raise Invalid("division by zero")
            return value(t[1]) / d
        raise Invalid("value")

    for item in forms[0]:
        if not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str):
            raise Invalid("item")
        m = re.fullmatch(r"([XY])_(0|[1-9]\d*)", item[0], re.ASCII)
        if not m or item[0] in vals:
            raise Invalid(f"name {item[0]}")
        vals[item[0]] = value(item[1])
    return [vals[f"X_{i}"] if f"X_{i}" in vals else _missing(i) for i in range(n_x)]


def _missing(i):
    raise Invalid(f"X_{i} missing")


def confirm_sat(model, ref: PropRef, x) -> str | None:
    """None when x is a counterexample by the independent readings, else why not."""
    y = onnx_eval(model, x)
    if len(y) != ref.n_y or len(x) != ref.n_x:
        return f"dimensions: x {len(x)}, y {len(y)}, property {ref.n_x}, {ref.n_y}"
    if not ref.holds(x, y):
        return (
            f"not a counterexample: the assertions fail at x = {[str(v) for v in x]}, "
            f"f(x) = {[str(v) for v in y]}"
        )
    if ref.version == 1:
        parsed = z3_reading(ref.text)
        if parsed is not None:
            import z3

            sub = [(z3.Real(f"X_{i}"), z3.RealVal(str(v))) for i, v in enumerate(x)] + [
                (z3.Real(f"Y_{j}"), z3.RealVal(str(v))) for j, v in enumerate(y)
            ]
            for a in parsed:
                if not z3.is_true(z3.simplify(z3.substitute(a, *sub))):
                    return f"z3's reading: {a} fails at the counterexample"
    return None


_Z3_USED: list = []
"""Not empty when a confirmation made z3 objects since the last case."""


def confirm_unsat(model, ref: PropRef, timeout_s: float = 30.0) -> str | None:
    """None when z3 finds no x with (x, f(x)) satisfying the property (both readings of a
    1.0 text), else why not (sat: the point, checked exactly; unknown)."""
    import z3

    _Z3_USED.append(1)
    X = [z3.Real(f"X_{i}") for i in range(ref.n_x)]
    Y = [z3.Real(f"Y_{j}") for j in range(ref.n_y)]
    f = onnx_eval(model, X, Arith(True))
    if len(f) != ref.n_y:
        return "output dimension"
    readings = [ref.z3_formulas(X, Y)]
    if ref.version == 1:
        parsed = z3_reading(ref.text)
        if parsed is not None:
            readings.append(parsed)
    for k, asserts in enumerate(readings):
        s = z3.Solver()
        s.set("timeout", int(timeout_s * 1000))
        s.add([a == b for a, b in zip(Y, f)])
        s.add(asserts)
        r = s.check()
        if r == z3.sat:
            mdl = s.model()
            x = [_z3_value(mdl.eval(v, model_completion=True)) for v in X]
            why = confirm_sat(model, ref, x)
            return (
                f"z3 ({'own' if k == 0 else 'z3'} reading) finds a counterexample "
                f"x = {[str(v) for v in x]}" + (f" (but: {why})" if why else "")
            )
        if r != z3.unsat:
            return f"z3 could not decide ({s.reason_unknown()})"
    return None


def confirm_equal(a, b, timeout_s: float = 30.0) -> str | None:
    """None when z3 finds no x in [-1, 1]^2 where the graphs ``a`` and ``b`` differ."""
    import z3

    _Z3_USED.append(1)
    X = [z3.Real(f"X_{i}") for i in range(2)]
    fa, fb = onnx_eval(a, X, Arith(True)), onnx_eval(b, X, Arith(True))
    if len(fa) != len(fb):
        return "the output dimensions differ"
    s = z3.Solver()
    s.set("timeout", int(timeout_s * 1000))
    s.add([v >= -1 for v in X] + [v <= 1 for v in X])
    s.add(z3.Or([p != q for p, q in zip(fa, fb)]))
    r = s.check()
    if r == z3.unsat:
        return None
    if r == z3.sat:
        mdl = s.model()
        x = [_z3_value(mdl.eval(v, model_completion=True)) for v in X]
        return (
            f"z3 finds x = {[str(v) for v in x]} where they differ "
            f"({onnx_eval(a, x) != onnx_eval(b, x)} exactly)"
        )
    return f"z3 could not decide ({s.reason_unknown()})"


def _z3_value(v) -> Fraction:
    import z3

    if z3.is_rational_value(v):
        return Fraction(v.numerator_as_long(), v.denominator_as_long())
    if z3.is_algebraic_value(v):
        raise Invalid("an algebraic value")
    return Fraction(str(v))


def exact_points(rng, n=2, k=4):
    pts = [
        tuple(Fraction(0) for _ in range(n)),
        tuple(Fraction(1) for _ in range(n)),
        tuple(Fraction(-1, 2) for _ in range(n)),
    ]
    for _ in range(k):
        pts.append(
            tuple(Fraction(rng.randint(-40, 40), rng.choice([1, 3, 8, 7, 16])) for _ in range(n))
        )
    return pts


def json_maxout_eval(obj: dict, x):
    """An exactmax/maxout JSON network evaluated from its text, exactly (dense or sparse piece
    weights, {"size": n, "entries": [[j, value], ...]})."""

    def num(v):
        return Fraction(v) if isinstance(v, (int, str)) else Fraction(str(v))

    def weights(w, n):
        if isinstance(w, list):
            out = [num(v) for v in w]
        else:
            out = [Fraction(0)] * w["size"]
            for j, v in w["entries"]:
                out[j] = num(v)
        if len(out) != n:  # every piece gives the weights of the whole layer below
            raise Invalid(f"a piece of {len(out)} weights on a layer of {n}")
        return out

    h = list(x)
    for layer in obj["layers"]:
        if "relu" in layer:
            raise Invalid("relu layer")
        h = [
            max(
                sum((w * hv for w, hv in zip(weights(p["w"], len(h)), h)), Fraction(0))
                + num(p["b"])
                for p in u["pieces"]
            )
            for u in layer["units"]
        ]
    out = obj.get("output")
    if out is None:
        return h
    W = out["W"]
    if isinstance(W, dict):  # the sparse form: shape and [i, j, value] entries
        dense = [[Fraction(0)] * W["shape"][1] for _ in range(W["shape"][0])]
        for i, j, v in W["entries"]:
            dense[i][j] = num(v)
        W = dense
    return [
        sum((num(w) * hv for w, hv in zip(row, h)), Fraction(0)) + num(c)
        for row, c in zip(W, out["b"])
    ]


# ----------------------------------------------------------------------- commands


@dataclass(frozen=True)
class IOCommand:
    """A command line reading a file of ``format``; placeholders: {f} the mutated file,
    {net} / {prop} the seed's companion network and property, {o} an output JSON path,
    {x} an output ONNX path, {cex} a counterexample file; ``check`` its kind of
    confirmation."""

    format: str
    name: str
    argv: tuple[str, ...]
    cost: float = 1
    limit_s: float = 20.0
    timeout_s: float | None = None
    check: str = ""


def io_commands() -> list[IOCommand]:
    W = ("--workers", "1")
    C = [
        IOCommand("onnx", "import", ("import", "{f}", "-o", "{o}"), 1, check="import"),
        IOCommand(
            "onnx",
            "import --drop-final-softmax",
            ("import", "{f}", "-o", "{o}", "--drop-final-softmax", "--json"),
            1,
            check="import-softmax",
        ),
        IOCommand("onnx", "info", ("info", "{f}"), 1),
        IOCommand(
            "onnx", "eval", ("eval", "{f}", "--input", "1/3,-1/2", "--json"), 1, check="eval"
        ),
        IOCommand("onnx", "export-onnx", ("export-onnx", "{f}", "-o", "{x}"), 1.5, check="export"),
        IOCommand(
            "onnx",
            "check",
            ("check", "{f}", "{prop}", "--counterexample", "{cex}", "--timeout", "5", *W),
            2,
            timeout_s=5,
            check="check",
        ),
        IOCommand(
            "onnx",
            "equiv",
            (
                "equiv",
                "{f}",
                "{orig}",
                "--domain",
                "{box}",
                "--timeout",
                "3",
                "--max-leaves",
                "300",
                "--json",
            ),
            2,
            timeout_s=3,
            check="equiv",
        ),
        IOCommand(
            "onnx",
            "search",
            (
                "search",
                "{orig}",
                "{f}",
                "--domain",
                "{box}",
                "--max-examples",
                "30",
                "--timeout",
                "3",
                "--json",
            ),
            1.5,
            timeout_s=3,
            check="equiv",
        ),
        IOCommand(
            "onnx",
            "verify",
            (
                "verify",
                "{f}",
                "--domain",
                "{box}",
                "--timeout",
                "3",
                "--max-leaves",
                "300",
                "--cert",
                "{o}",
            ),
            2,
            timeout_s=3,
        ),
        IOCommand(
            "onnx",
            "compile",
            ("compile", "{f}", "--domain", "{box}", "-o", "{o}", "--timeout", "5"),
            1.5,
            timeout_s=5,
        ),
        IOCommand(
            "onnx",
            "check-cert --model",
            ("check-cert", "{cert}", "--model", "{f}", "--property", "{uprop}"),
            1.5,
            check="binding",
        ),
        IOCommand(
            "vnnlib",
            "check-cert --property",
            ("check-cert", "{cert}", "--model", "{net}", "--property", "{f}"),
            1.5,
            check="binding",
        ),
        IOCommand(
            "vnnlib2",
            "check-cert --property",
            ("check-cert", "{cert}", "--model", "{net}", "--property", "{f}"),
            1.5,
            check="binding",
        ),
        IOCommand(
            "vnnlib",
            "check",
            ("check", "{net}", "{f}", "--counterexample", "{cex}", "--timeout", "5", *W),
            2,
            timeout_s=5,
            check="check",
        ),
        IOCommand(
            "vnnlib",
            "check --no-relax",
            (
                "check",
                "{net}",
                "{f}",
                "--no-relax",
                "--no-search",
                "--counterexample",
                "{cex}",
                "--timeout",
                "5",
                *W,
            ),
            2,
            timeout_s=5,
            check="check",
        ),
        IOCommand("vnnlib", "replay", ("replay", "{net}", "{f}", "{cexseed}"), 1, check="replay"),
        IOCommand(
            "vnnlib2",
            "check",
            ("check", "{net}", "{f}", "--counterexample", "{cex}", "--timeout", "5", *W),
            2,
            timeout_s=5,
            check="check",
        ),
        IOCommand(
            "vnnlib2",
            "vnnlib verify",
            ("vnnlib", "verify", "{f}", "--network", "f={net}", "--timeout", "5"),
            2,
            timeout_s=5,
            check="vnnlib-verify",
        ),
        IOCommand("vnnlib2", "replay", ("replay", "{net}", "{f}", "{cexseed}"), 1, check="replay"),
        IOCommand(
            "counterexample", "replay", ("replay", "{net}", "{prop}", "{f}"), 1, check="replay"
        ),
    ]
    return C


@dataclass
class IOSeed:
    format: str
    name: str
    data: bytes
    net: str = ""  # companion network (ONNX path) of a property / counterexample
    prop: str = ""  # companion property of a network / counterexample
    cexseed: str = ""  # a counterexample file for replay of a property
    orig: str = ""  # the unmutated file of this seed (for equiv, search, check-cert)
    uprop: str = ""  # an unsat property of a network seed
    cert: str = ""  # a property certificate about (network, property) of the seed


class IOSeeds:
    """Valid ONNX networks, VNN-LIB 1.0 / 2.0 properties and counterexample files, with the
    files they go with, in the folder ``tmp``."""

    def __init__(self, tmp: str):
        import onnx

        self.tmp = tmp
        self.models = {}
        s: list[IOSeed] = []
        nets = onnx_seeds()
        nets["tent_export"] = onnx.load_from_string(export_seed(tmp))
        self.paths = {}
        for name, m in nets.items():
            p = os.path.join(tmp, name + ".onnx")
            onnx.save(m, p)
            self.paths[name] = p
            self.models[p] = m
        props1 = vnnlib1_seeds()
        props2 = vnnlib2_seeds()
        self.box = os.path.join(tmp, "box.json")
        with open(self.box, "w") as f:
            json.dump(
                {
                    "format": "exactmax/domain",
                    "version": 1,
                    "box": {"lower": ["-1", "-1"], "upper": ["1", "1"]},
                },
                f,
            )
        unsat_of_dim = {1: "box_y_ge_unsat", 2: "box_sum_unsat"}

        def certify(net_path, prop_path, tag):
            cert = os.path.join(tmp, f"{tag}.cert.json")
            code = fuzz._quiet_main(
                ["check", net_path, prop_path, "--cert", cert, "--workers", "1"]
            )
            return cert if code == 0 else ""

        # a property of the right output dimension for each network
        prop_of = {}
        for name, m in nets.items():
            dim = len(onnx_eval(m, [Fraction(0)] * 2, drop_final_softmax=True))
            cands = [p for p in props1 if p[2] == dim]
            pname, text, _ = cands[len(prop_of) % len(cands)]
            pp = os.path.join(tmp, f"{name}.{pname}.vnnlib")
            with open(pp, "w") as f:
                f.write(text)
            prop_of[name] = pp
            if name != "softmax_final":
                up = os.path.join(tmp, f"{name}.unsat.vnnlib")
                with open(up, "w") as f:
                    f.write(dict((n, t) for n, t, _ in props1)[unsat_of_dim[dim]])
                cert = certify(self.paths[name], up, name)
                assert cert, name
                with open(self.paths[name], "rb") as f:
                    s.append(
                        IOSeed(
                            "onnx",
                            name,
                            f.read(),
                            prop=pp,
                            orig=self.paths[name],
                            uprop=up,
                            cert=cert,
                        )
                    )
        # properties: each with the networks of its output dimension
        by_dim = {}
        for name, m in nets.items():
            if name == "softmax_final":
                continue
            by_dim.setdefault(len(onnx_eval(m, [Fraction(0)] * 2)), []).append(name)
        for fmt, props in (("vnnlib", props1), ("vnnlib2", props2)):
            for pname, text, dim in props:
                for net in by_dim[dim]:
                    cex = os.path.join(tmp, f"{pname}.{net}.cex")
                    x = (Fraction(1, 2), Fraction(-1, 4))
                    y = onnx_eval(nets[net], list(x))
                    with open(cex, "w") as f:
                        f.write(_cex_text(x, y))
                    pp = os.path.join(tmp, f"{pname}.{net}.vnnlib")
                    with open(pp, "w") as f:
                        f.write(text)
                    s.append(
                        IOSeed(
                            fmt,
                            f"{pname}@{net}",
                            text.encode(),
                            net=self.paths[net],
                            cexseed=cex,
                            orig=pp,
                            cert=certify(self.paths[net], pp, f"{pname}.{net}"),
                        )
                    )
        # counterexample files: points inside and outside the input sets
        for k, (pname, text, dim) in enumerate(props1):
            net = by_dim[dim][k % len(by_dim[dim])]
            pp = os.path.join(tmp, f"cex.{pname}.vnnlib")
            with open(pp, "w") as f:
                f.write(text)
            for x in (
                (Fraction(1), Fraction(1)),
                (Fraction(1, 2), Fraction(-1, 4)),
                (Fraction(-3, 8), Fraction(1, 3)),
            ):
                y = onnx_eval(nets[net], list(x))
                s.append(
                    IOSeed(
                        "counterexample",
                        f"{pname}@{net}",
                        _cex_text(x, y).encode(),
                        net=self.paths[net],
                        prop=pp,
                    )
                )
        s.append(
            IOSeed(
                "onnx",
                "softmax_final",
                open(self.paths["softmax_final"], "rb").read(),
                prop=prop_of["softmax_final"],
            )
        )
        self.seeds = s

    def of(self, fmt: str, command: str = "") -> list[IOSeed]:
        out = [x for x in self.seeds if x.format == fmt]
        if command.startswith("check-cert"):
            out = [x for x in out if x.cert]
        if fmt == "onnx" and command != "import --drop-final-softmax":
            out = [x for x in out if x.name != "softmax_final"] or out
        return out


def _cex_text(x, y) -> str:
    def t(v):
        if v.denominator == 1:
            return str(v.numerator) if v >= 0 else f"(- {-v.numerator})"
        return (
            f"(/ {v.numerator} {v.denominator})"
            if v >= 0
            else f"(- (/ {-v.numerator} {v.denominator}))"
        )

    items = [f"(X_{i} {t(v)})" for i, v in enumerate(x)] + [
        f"(Y_{j} {t(v)})" for j, v in enumerate(y)
    ]
    return "sat\n(" + "\n ".join(items) + ")\n"


# --------------------------------------------------------------------------- cases


@dataclass
class IOCase:
    format: str
    seed: str
    command: str
    mutation: str
    status: int | None
    seconds: float
    failure: str | None
    confirmed: str = ""  # what the independent check established
    err: str = ""


def pick(rng, cmds):
    return fuzz.pick_command(rng, cmds)


def run_io_case(
    cmd: IOCommand, seed: IOSeed, rng, work: str, seeds: IOSeeds, mutation: tuple | None = None
) -> IOCase:
    """Mutate ``seed`` (or take ``mutation``: (data, what)), run ``cmd`` on it in-process,
    judge it with ``fuzz.judge`` and confirm its answer independently."""
    for name in os.listdir(work):
        os.unlink(os.path.join(work, name))
    if _Z3_USED:
        # z3 objects of the last confirmation freed now, not by a garbage collection that
        # happens deep in a reader's recursion (their __del__ then prints a RecursionError)
        import gc

        gc.collect()
        _Z3_USED.clear()
    if mutation is not None:
        data, what = mutation
    elif seed.format == "onnx":
        data, what = mutate_onnx(seed.data, rng)
    else:
        data, what = mutate_text(seed.data.decode("utf-8", "surrogatepass"), rng)
    ext = {"onnx": ".onnx", "vnnlib": ".vnnlib", "vnnlib2": ".vnnlib", "counterexample": ".txt"}[
        seed.format
    ]
    f = os.path.join(work, "input" + ext)
    with open(f, "wb") as fh:
        fh.write(data)
    outs = {
        "o": os.path.join(work, "out.json"),
        "x": os.path.join(work, "out.onnx"),
        "cex": os.path.join(work, "cex.txt"),
    }
    argv = [
        a.format(
            f=f,
            net=seed.net,
            prop=seed.prop,
            cexseed=seed.cexseed,
            orig=seed.orig,
            uprop=seed.uprop,
            cert=seed.cert,
            box=seeds.box,
            **outs,
        )
        for a in cmd.argv
    ]
    limit = cmd.timeout_s + fuzz.TIMEOUT_MARGIN_S if cmd.timeout_s else cmd.limit_s
    o = fuzz.run_inprocess(argv, limit)
    used = {p for k, p in outs.items() if "{" + k + "}" in " ".join(cmd.argv)}
    o.outputs = {p: fuzz._output_state(p) for p in used}
    o.leftovers = [n for n in os.listdir(work) if n.startswith(".exactmax-")]
    failure = fuzz.judge(o, limit)
    if failure is None and o.status == 2 and not _names_file(o.err, argv):
        failure = "the error line names no input file"
    confirmed = ""
    if failure is None:
        try:
            failure, confirmed = confirm(cmd, seed, f, data, o, outs, seeds)
        except Invalid as e:
            failure = f"the independent check cannot read an input exactmax accepted: {e}"
        except Exception as e:  # noqa: BLE001 - a harness error is reported, not hidden
            import traceback

            failure = (
                f"the harness's check failed: {type(e).__name__}: {e}; "
                + traceback.format_exc(limit=-2).replace("\n", " | ")[-400:]
            )
    return IOCase(
        cmd.format, seed.name, cmd.name, what, o.status, o.seconds, failure, confirmed, o.err[-600:]
    )


def _names_file(err: str, argv) -> bool:
    files = [a for a in argv if os.path.sep in a or a.endswith((".onnx", ".vnnlib", ".txt"))]
    files += [a.split("=", 1)[1] for a in argv if "=" in a and os.path.sep in a]
    return (
        any(p in err or os.path.basename(p) in err for p in files)
        or "--" in err.split(":", 2)[-1][:60]
    )


def _load_model(data: bytes):
    import onnx

    return onnx.load_from_string(data)


def confirm(cmd: IOCommand, seed: IOSeed, f: str, data: bytes, o, outs, seeds: IOSeeds):
    """(failure or None, what was confirmed) for a case that passed the judge."""
    st = o.status
    kind = cmd.check
    if seed.format == "onnx":
        model_path, model_data = f, data
    else:
        model_path = seed.net
        with open(model_path, "rb") as fh:
            model_data = fh.read()
    if kind in ("import", "import-softmax") and st == 0:
        with open(outs["o"]) as fh:
            net = json.load(fh)
        m = _load_model(model_data)
        drop = kind == "import-softmax"
        pts = exact_points(_rng_of(data), n=net["input_dim"])
        try:
            ref = [onnx_eval(m, list(x), drop_final_softmax=drop) for x in pts]
        except Invalid as e:
            if onnx_valid(m):
                return f"imported a valid graph the reference refuses: {e}", ""
            return None, f"accepted (checker refuses; reference refuses: {e})"
        got = [json_maxout_eval(net, x) for x in pts]
        if got != ref:
            k = next(i for i in range(len(pts)) if got[i] != ref[i])
            return (
                f"imported network differs from the graph at x = "
                f"{[str(v) for v in pts[k]]}: {[str(v) for v in got[k]]} vs "
                f"{[str(v) for v in ref[k]]}"
            ), ""
        return None, "import equal at points"
    if kind == "eval" and st == 0:
        got = [Fraction(v) for v in json.loads(o.out)["output"]]
        m = _load_model(model_data)
        try:
            ref = onnx_eval(m, [Fraction(1, 3), Fraction(-1, 2)])
        except Invalid as e:
            if onnx_valid(m):
                return f"evaluated a valid graph the reference refuses: {e}", ""
            return None, f"accepted (checker refuses; reference refuses: {e})"
        if got != ref:
            return f"eval gives {[str(v) for v in got]}, the graph {[str(v) for v in ref]}", ""
        return None, "eval equal"
    if kind == "export" and st == 0:
        import onnx

        m = _load_model(model_data)
        back = onnx.load(outs["x"])
        if not onnx_valid(back):
            return "the exported file fails onnx.checker", ""
        pts = exact_points(_rng_of(data), n=_input_size(m), k=2)
        try:
            ref = [onnx_eval(m, list(x)) for x in pts]
        except Invalid:
            return None, "exported (reference refuses the input)"
        got = [onnx_eval(back, list(x)) for x in pts]
        exact = "weights: exact" in o.out
        # rounded weights: the error scales with the weights' size (outputs may cancel)
        big = max(
            [
                abs(v)
                for t in m.graph.initializer
                if t.data_type in (1, 10, 11)
                for v in _as_exact(_to_array(t)).reshape(-1)
            ]
            + [Fraction(1)]
        )
        for a, b in zip(got, ref):
            if len(a) != len(b):
                return "export changed the output dimension", ""
            for u, v in zip(a, b):
                if exact and u != v or abs(u - v) > Fraction(1, 10**9) * max(1, abs(v)) * big**3:
                    return f"export computes {u} where the graph gives {v}", ""
        return None, "export equal" if exact else "export within rounding"
    if kind in ("check", "vnnlib-verify"):
        if kind == "check" and st not in (0, 1, 2, 3):
            return f"check exit {st}", ""
        if st == 2:
            return None, ""
        text = (data if seed.format != "onnx" else open(seed.prop, "rb").read()).decode(
            "utf-8", "surrogatepass"
        )
        m = _load_model(model_data)
        # (unknown, exit 3, may be a time limit reached while reading the graph: no answer)
        if seed.format == "onnx" and st != 3:
            try:
                onnx_eval(m, [Fraction(0)] * 2)
            except Invalid as e:
                if onnx_valid(m):
                    return f"answered on a valid graph the reference refuses: {e}", ""
                return None, f"accepted (checker refuses; reference refuses: {e})"
        try:
            ref = read_prop_ref(text)
        except Invalid as e:
            return f"exactmax answered on a property the reference refuses: {e}", ""
        if kind == "check":
            verdict = {0: "unsat", 1: "sat", 3: "unknown"}[st]
        else:
            first = o.out.splitlines()[0] if o.out else ""
            if st != 0 or first not in ("sat", "unsat", "unknown", "timed-out"):
                return f"vnnlib verify: exit {st}, first line {first!r}", ""
            verdict = first
        if verdict == "sat":
            if kind == "check":
                with open(outs["cex"]) as fh:
                    x = read_cex(fh.read(), ref.n_x)
            else:
                x = _assignment(o.out, ref)
            why = confirm_sat(m, ref, x)
            return (f"sat, but {why}", "") if why else (None, "sat confirmed")
        if verdict == "unsat":
            why = confirm_unsat(m, ref)
            return (f"unsat, but {why}", "") if why else (None, "unsat confirmed")
        return None, "unknown"
    if kind == "binding":
        import hashlib

        with open(seed.orig, "rb") as fh:
            same = hashlib.sha256(fh.read()).digest() == hashlib.sha256(data).digest()
        if st == 0 and not same and seed.format == "onnx":
            # by design another file holding the same network is accepted: confirm that
            # the graphs compute the same function (the reference, then z3)
            m = _load_model(data)
            try:
                onnx_eval(m, [Fraction(0)] * 2)
            except Invalid as e:
                if onnx_valid(m):
                    return f"accepted a valid graph the reference refuses: {e}", ""
                return None, f"accepted (checker refuses; reference refuses: {e})"
            why = confirm_equal(m, _load_model(open(seed.orig, "rb").read()))
            if why:
                return f"check-cert accepted the certificate with another network: {why}", ""
            return None, "binding confirmed (the same network)"
        if st == 0 and not same:
            return "check-cert accepted the certificate with a file it is not about", ""
        if st not in (0, 1, 2):
            return f"check-cert exit {st}", ""
        if st == 1 and same:
            return "check-cert rejected the certificate with its own files", ""
        return None, "binding confirmed" if st in (0, 1) else ""
    if kind == "equiv":
        if st in (2, 3):
            return None, ""
        m = _load_model(model_data)
        orig = _load_model(open(seed.orig, "rb").read())
        try:
            onnx_eval(m, [Fraction(0)] * 2)
        except Invalid as e:
            if onnx_valid(m):
                return f"answered on a valid graph the reference refuses: {e}", ""
            return None, f"accepted (checker refuses; reference refuses: {e})"
        out = json.loads(o.out)
        if st == 1:
            ce = out.get("counterexample") or out
            x = [Fraction(v) for v in ce["x"]]
            if not all(-1 <= v <= 1 for v in x):
                return f"a counterexample outside the domain: {ce['x']}", ""
            if onnx_eval(m, x) == onnx_eval(orig, x):
                return f"refuted, but the graphs agree at x = {ce['x']}", ""
            return None, "sat confirmed (a difference)"
        if st == 0 and cmd.argv[0] == "equiv":
            why = confirm_equal(m, orig)
            return (
                (f"proved equal, but {why}", "")
                if why
                else (None, "unsat confirmed (no difference)")
            )
        return f"{cmd.argv[0]} exit {st}", ""
    if kind == "replay":
        if st == 2:
            return None, ""
        if st not in (0, 1):
            return f"replay exit {st}", ""
        prop_text = open(seed.prop if seed.format == "counterexample" else f, "rb").read()
        cex_text = open(f if seed.format == "counterexample" else seed.cexseed, "rb").read()
        m = _load_model(model_data)
        try:
            ref = read_prop_ref(prop_text.decode("utf-8", "surrogatepass"))
        except Invalid as e:
            return f"replay answered on a property the reference refuses: {e}", ""
        try:
            x = read_cex(cex_text.decode("utf-8", "surrogatepass"), ref.n_x)
        except Invalid as e:
            return f"replay read a counterexample the reference refuses: {e}", ""
        why = confirm_sat(m, ref, x)
        if st == 0 and why:
            return f"replay says valid, but {why}", ""
        if st == 1 and not why:
            return "replay says not a counterexample, but it is one", ""
        return None, "replay confirmed"
    return None, ""


def _assignment(out: str, ref: PropRef):
    """x from ``vnnlib verify``'s sat output (the input tensor's values)."""
    lines = out.splitlines()[1:]
    for k, line in enumerate(lines):
        if line.split(" ")[0] == ref.x_name:
            return [Fraction(v) for v in lines[k + 1 : k + 1 + ref.n_x]]
    raise Invalid("no assignment of the input")


def _to_array(t):
    from onnx import numpy_helper

    return numpy_helper.to_array(t)


def _input_size(m) -> int:
    inits = {t.name for t in m.graph.initializer}
    for i in m.graph.input:
        if i.name not in inits:
            return max(
                1,
                int(
                    np.prod(
                        [
                            d.dim_value if d.dim_value > 0 else 1
                            for d in i.type.tensor_type.shape.dim
                        ]
                    )
                ),
            )
    return 2


def _rng_of(data: bytes):
    import random

    return random.Random(len(data))
