"""The ONNX reference of the fuzzing campaign (tests/fuzz_io.py's ``onnx_eval``) reads every
operator exactmax imports: on each graph of tests/test_onnx_lowering.py it computes exactly what
the exact interpreter tests/onnx_semantics.py computes (itself checked against onnxruntime),
over Fractions and, encoded as z3 terms, at a point; and it refuses what the operator
definitions make invalid, so that the campaign flags an import of such a graph."""

from __future__ import annotations

import random
from fractions import Fraction

import fuzz_io
import numpy as np
import pytest
import test_onnx_lowering as lowering
import z3
from onnx import TensorProto, helper, numpy_helper
from onnx_semantics import run_exact

node = helper.make_node


def _points(name, case):
    rng = random.Random(name)
    pts = [[Fraction(rng.randint(-256, 256), 64) for _ in range(case.dim)] for _ in range(2)]
    return pts + [[Fraction(v) for v in t] for t in case.ties][:2]


@pytest.mark.parametrize("name", sorted(lowering.CASES))
def test_the_reference_computes_what_the_exact_interpreter_computes(name):
    case = lowering.CASES[name]
    pts = _points(name, case)
    for x in pts:
        assert fuzz_io.onnx_eval(case.model, x) == run_exact(case.model, x), x
    if case.dim > 64:
        return
    X = [z3.Real(f"x{i}") for i in range(case.dim)]
    f = fuzz_io.onnx_eval(case.model, X, fuzz_io.Arith(True))
    sub = [(v, z3.RealVal(str(c))) for v, c in zip(X, pts[0])]
    got = []
    for t in f:
        v = z3.simplify(z3.substitute(z3.RealVal(0) + t, *sub)).as_fraction()
        got.append(Fraction(v.numerator, v.denominator))
    assert got == run_exact(case.model, pts[0])


def _model(nodes, inits, opset, shape=(1, 1, 2)):
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


W = np.array([[[1.0, -0.5]]], dtype=np.float32)
INVALID = {
    # attributes that moved to inputs, or that the operator does not have at that opset
    "clip-attributes-at-13": ([node("Clip", ["X"], ["Y"], min=0.0)], {}, 13),
    "pad-wrap-before-19": (
        [node("Pad", ["X", "p"], ["Y"], mode="wrap")],
        {"p": np.array([0, 0, 1, 0, 0, 1])},
        18,
    ),
    "slice-attributes-at-13": ([node("Slice", ["X"], ["Y"], starts=[0], ends=[1])], {}, 13),
    "shape-start-before-15": ([node("Shape", ["X"], ["Y"], start=1)], {}, 13),
    "batchnorm-spatial-at-13": (
        [node("BatchNormalization", ["X", "s", "s", "z", "s"], ["Y"], spatial=1)],
        {"s": np.ones(1, np.float32), "z": np.zeros(1, np.float32)},
        13,
    ),
    "batchnorm-training-outputs": (
        [node("BatchNormalization", ["X", "s", "s", "z", "s"], ["Y", "mean", "var"])],
        {"s": np.ones(1, np.float32), "z": np.zeros(1, np.float32)},
        15,
    ),
    # shapes and values the definitions exclude
    "conv-kernel-shape": ([node("Conv", ["X", "W"], ["Y"], kernel_shape=[1])], {"W": W}, 13),
    "conv-window-beyond-the-input": (
        [node("Conv", ["X", "W"], ["Y"], strides=[1])],
        {"W": np.ones((1, 1, 3), np.float32)},
        13,
    ),
    "conv-same-with-pads": (
        [node("Conv", ["X", "W"], ["Y"], auto_pad="SAME_UPPER", pads=[1, 0])],
        {"W": W},
        13,
    ),
    "slice-step-zero": (
        [node("Slice", ["X", "a", "b", "c", "d"], ["Y"])],
        {k: np.array([v]) for k, v in zip("abcd", (0, 2, -1, 0))},
        13,
    ),
    "gather-out-of-range": ([node("Gather", ["X", "i"], ["Y"], axis=2)], {"i": np.array([2])}, 13),
    "pad-reflect-beyond-the-edge": (
        [node("Pad", ["X", "p"], ["Y"], mode="reflect")],
        {"p": np.array([0, 0, 2, 0, 0, 0])},
        13,
    ),
    "maxpool-window-in-the-padding": (
        [node("MaxPool", ["X"], ["Y"], kernel_shape=[1], pads=[1, 0])],
        {},
        13,
    ),
}


@pytest.mark.parametrize("name", sorted(INVALID))
def test_the_reference_refuses_what_the_operators_exclude(name):
    nodes, inits, opset = INVALID[name]
    with pytest.raises(fuzz_io.Invalid):
        fuzz_io.onnx_eval(_model(nodes, inits, opset), [Fraction(1), Fraction(-1)])


def test_clip_6_bounds_default_to_the_float32_extremes():
    """Clip before opset 11 without min / max clips at -+FLT_MAX (the operator's defaults, as
    onnxruntime does); beyond the float32 range that is not the identity."""
    m = _model(
        [node("MatMul", ["X", "W"], ["h"]), node("Clip", ["h"], ["Y"])],
        {"W": np.array([[3e38, 0], [3e38, 1]], dtype=np.float32)},
        8,
        shape=(1, 2),
    )
    y = fuzz_io.onnx_eval(m, [Fraction(1), Fraction(1)])
    assert y == [fuzz_io.FLT_MAX, Fraction(1)]
