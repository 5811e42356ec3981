"""``exactmax check`` on small convolutional networks, against z3's exact answer.

Tiny ONNX CNNs built with onnx.helper (Conv with 2 channels and 2x2 kernels, strides 2,
padding, BatchNormalization, MaxPool, a residual Add, Relu, Flatten, Gemm to 2 or 3 outputs;
weights k/8, BatchNormalization with var + epsilon a square, so every number is exact) and
VNN-LIB properties (an input box, output constraints with and/or), some sat and some unsat.

The exact answer comes from z3 alone: the network encoded from its ONNX graph as real
arithmetic with If for each max (the reference interpreter of tests/fuzz_io.py over z3
terms), the property read by z3's own SMT-LIB parser.  Then ``python -m exactmax check NET
PROP --json --counterexample FILE`` must agree:

- sat (exit 1) exactly when z3 says sat, with a counterexample x inside the input set whose
  outputs, computed exactly by tests/onnx_semantics.run_exact, are the y exactmax reports and
  satisfy z3's reading of the property (substituted and simplified to true), and which z3
  confirms with the network's encoding (f(x) = y, the property holds);
- unsat (exit 0, kernel-checked) exactly when z3 says unsat;
- unknown is not accepted on these small cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from fractions import Fraction

import fuzz_io
import numpy as np
import onnx
import pytest
import z3
from onnx import TensorProto, helper, numpy_helper
from onnx_semantics import run_exact

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
node = helper.make_node


def _k8(rng, *shape, k=8):
    """Weights k/8 with |k| <= 8."""
    return (rng.integers(-k, k + 1, size=shape) / 8).astype(np.float32)


def _model(name, nodes, inits, in_shape, out_dim) -> onnx.ModelProto:
    tensors = [
        numpy_helper.from_array(
            np.asarray(v, dtype=np.float32) if np.asarray(v).dtype.kind == "f" else np.asarray(v),
            k,
        )
        for k, v in inits.items()
    ]
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(in_shape))],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, out_dim])],
        tensors,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m, full_check=True)
    return m


def _networks() -> dict[str, onnx.ModelProto]:
    rng = np.random.default_rng(36)
    N = {}
    # 1x1x4x4 -> Conv 2x2 stride 2 (2 channels) -> Relu -> Flatten (8) -> Gemm 2
    N["conv_stride2"] = _model(
        "conv_stride2",
        [
            node("Conv", ["X", "K", "kb"], ["c"], kernel_shape=[2, 2], strides=[2, 2]),
            node("Relu", ["c"], ["r"]),
            node("Flatten", ["r"], ["f"]),
            node("Gemm", ["f", "G", "gb"], ["Y"], transB=1),
        ],
        {"K": _k8(rng, 2, 1, 2, 2), "kb": _k8(rng, 2), "G": _k8(rng, 2, 8), "gb": _k8(rng, 2)},
        (1, 1, 4, 4),
        2,
    )
    # 1x2x3x3 -> Conv 2x2 pads 1 (2 channels, 1x2x4x4) -> BatchNormalization -> Relu ->
    # MaxPool 2x2 stride 2 (1x2x2x2) -> Flatten (8) -> Gemm 3
    N["conv_pad_bn_maxpool"] = _model(
        "conv_pad_bn_maxpool",
        [
            node("Conv", ["X", "K", "kb"], ["c"], kernel_shape=[2, 2], pads=[1, 1, 1, 1]),
            node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"], epsilon=0.25),
            node("Relu", ["n"], ["r"]),
            node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
            node("Flatten", ["p"], ["f"]),
            node("Gemm", ["f", "G", "gb"], ["Y"], transB=1),
        ],
        {
            "K": _k8(rng, 2, 2, 2, 2),
            "kb": _k8(rng, 2),
            # scale / sqrt(var + 1/4): 1 / sqrt(4) and -3/4 / sqrt(1), exact
            "s": [1.0, -0.75],
            "b": [0.125, -0.25],
            "m": [0.25, -0.5],
            "v": [3.75, 0.75],
            "G": _k8(rng, 3, 8),
            "gb": _k8(rng, 3),
        },
        (1, 2, 3, 3),
        3,
    )
    # 1x1x4x4 -> Conv 2x2 with pads [0, 0, 1, 1] (same size) -> Relu -> + X (residual) ->
    # Conv 2x2 stride 2 (2 channels) -> Relu -> Flatten (8) -> Gemm 2
    N["conv_residual"] = _model(
        "conv_residual",
        [
            node("Conv", ["X", "K1", "b1"], ["c1"], kernel_shape=[2, 2], pads=[0, 0, 1, 1]),
            node("Relu", ["c1"], ["r1"]),
            node("Add", ["r1", "X"], ["s"]),
            node("Conv", ["s", "K2", "b2"], ["c2"], kernel_shape=[2, 2], strides=[2, 2]),
            node("Relu", ["c2"], ["r2"]),
            node("Flatten", ["r2"], ["f"]),
            node("Gemm", ["f", "G", "gb"], ["Y"], transB=1),
        ],
        {
            "K1": _k8(rng, 1, 1, 2, 2),
            "b1": _k8(rng, 1),
            "K2": _k8(rng, 2, 1, 2, 2),
            "b2": _k8(rng, 2),
            "G": _k8(rng, 2, 8),
            "gb": _k8(rng, 2),
        },
        (1, 1, 4, 4),
        2,
    )
    # 1x1x3x3 -> Conv 2x2 (2 channels, 1x2x2x2) -> Relu -> MaxPool 2x2 stride 1 (1x2x1x1) ->
    # Flatten (2) -> Gemm 3
    N["conv_maxpool"] = _model(
        "conv_maxpool",
        [
            node("Conv", ["X", "K", "kb"], ["c"], kernel_shape=[2, 2]),
            node("Relu", ["c"], ["r"]),
            node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2]),
            node("Flatten", ["p"], ["f"]),
            node("Gemm", ["f", "G", "gb"], ["Y"], transB=1),
        ],
        {"K": _k8(rng, 2, 1, 2, 2), "kb": _k8(rng, 2), "G": _k8(rng, 3, 2), "gb": _k8(rng, 3)},
        (1, 1, 3, 3),
        3,
    )
    return N


NETS = _networks()


def _decl(nx: int, ny: int) -> str:
    return "".join(f"(declare-const X_{i} Real)\n" for i in range(nx)) + "".join(
        f"(declare-const Y_{j} Real)\n" for j in range(ny)
    )


def _dec(v: Fraction) -> str:
    """A dyadic rational as an exact decimal."""
    text = repr(float(v))
    assert Fraction(text) == v, v
    return text


def _box(center, radius) -> str:
    return "".join(
        f"(assert (>= X_{i} {_dec(c - radius)}))\n(assert (<= X_{i} {_dec(c + radius)}))\n"
        for i, c in enumerate(center)
    )


def _dim(m) -> tuple[int, int]:
    nx = int(np.prod([d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]))
    return nx, m.graph.output[0].type.tensor_type.shape.dim[1].dim_value


def _prop(net: str, center, radius, outputs: str) -> str:
    nx, ny = _dim(NETS[net])
    center = [Fraction(c) for c in center]
    return _decl(nx, ny) + _box(center, Fraction(radius)) + outputs


def _center(n, seed, den=4):
    r = np.random.default_rng(seed)
    return [Fraction(int(v), den) for v in r.integers(-den, den + 1, size=n)]


@dataclass
class Case:
    net: str
    prop: str
    expected: str  # z3's answer when the case was written; asserted, so no case turns trivial
    slow: bool = False


def _cases() -> dict[str, Case]:
    """Thresholds a little on either side of the optimum over the box (found with z3's
    Optimize when the cases were written), and two exactly at it (a tie: sat only at points
    where the bound is attained)."""
    C = {}
    c16, c18, c9 = _center(16, 1), _center(18, 2), _center(9, 3)
    # max (Y_1 - Y_0) over the box of radius 1/2 is -373/448 = -0.8326...
    C["stride2_margin_sat"] = Case(
        "conv_stride2",
        _prop("conv_stride2", c16, "1/2", "(assert (>= (- Y_1 Y_0) -0.875))\n"),
        "sat",
    )
    C["stride2_margin_unsat"] = Case(
        "conv_stride2",
        _prop("conv_stride2", c16, "1/2", "(assert (>= (- Y_1 Y_0) -0.8125))\n"),
        "unsat",
    )
    # max Y_0 over radius 1/4: 3321/896 = 3.706...
    C["stride2_threshold_unsat"] = Case(
        "conv_stride2", _prop("conv_stride2", c16, "1/4", "(assert (>= Y_0 3.75))\n"), "unsat"
    )
    # max (max(Y_1, Y_2) - Y_0): 4933/53760 = 0.09... (radius 1/2), -0.969... (radius 1/8)
    C["bn_disjunction_sat"] = Case(
        "conv_pad_bn_maxpool",
        _prop("conv_pad_bn_maxpool", c18, "1/2", "(assert (or (>= Y_1 Y_0) (>= Y_2 Y_0)))\n"),
        "sat",
    )
    C["bn_disjunction_unsat"] = Case(
        "conv_pad_bn_maxpool",
        _prop(
            "conv_pad_bn_maxpool",
            c18,
            "1/8",
            "(assert (or (>= Y_1 (- Y_0 0.9375)) (>= Y_2 (- Y_0 0.9375))))\n",
        ),
        "unsat",
        slow=True,  # about 30 s
    )
    # max (Y_0 - Y_1): 137/256 (radius 1/4), -1/64 (radius 1/16)
    C["residual_sat"] = Case(
        "conv_residual",
        _prop("conv_residual", c16, "1/4", "(assert (>= (- Y_0 Y_1) 0.5))\n"),
        "sat",
    )
    C["residual_unsat_by_1_64"] = Case(
        "conv_residual", _prop("conv_residual", c16, "1/16", "(assert (>= Y_0 Y_1))\n"), "unsat"
    )
    # max (Y_0 - max(Y_1, Y_2)) is -1/8 exactly; max (Y_0 - Y_1) 49/32, max -Y_2 55/256
    C["maxpool_tie_sat"] = Case(
        "conv_maxpool",
        _prop(
            "conv_maxpool",
            c9,
            "1/4",
            "(assert (and (>= Y_0 (- Y_1 0.125)) (>= Y_0 (- Y_2 0.125))))\n",
        ),
        "sat",
    )
    C["maxpool_or_unsat"] = Case(
        "conv_maxpool",
        _prop("conv_maxpool", c9, "1/4", "(assert (or (>= (- Y_0 Y_1) 1.5625) (<= Y_2 -0.25)))\n"),
        "unsat",
    )
    # max (Y_0 + Y_2 - 2 Y_1) over [-1, 1]^9 is 101/16 exactly
    C["maxpool_all_inputs_tie_sat"] = Case(
        "conv_maxpool",
        _prop("conv_maxpool", [0] * 9, "1", "(assert (>= (+ Y_0 Y_2) (+ (* 2 Y_1) 6.3125)))\n"),
        "sat",
    )
    return C


CASES = _cases()


def _z3_val(v: Fraction):
    return z3.Q(v.numerator, v.denominator)


def z3_answer(model, text: str):
    """z3's answer on the property with y = f(x): (solver result, the encoding's solver)."""
    nx, ny = _dim(model)
    X = [z3.Real(f"X_{i}") for i in range(nx)]
    Y = [z3.Real(f"Y_{j}") for j in range(ny)]
    f = fuzz_io.onnx_eval(model, X, fuzz_io.Arith(True))
    s = z3.Solver()
    s.add([y == (_z3_val(v) if isinstance(v, Fraction) else v) for y, v in zip(Y, f)])
    s.add(list(z3.parse_smt2_string(text)))
    return s.check(), s, X, Y


def _check(tmp_path, name):
    case = CASES[name]
    model = NETS[case.net]
    net, prop, cex = tmp_path / "net.onnx", tmp_path / "p.vnnlib", tmp_path / "cex.txt"
    onnx.save(model, str(net))
    prop.write_text(case.prop)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "exactmax",
            "check",
            str(net),
            str(prop),
            "--json",
            "--counterexample",
            str(cex),
            "--timeout",
            "60",
            "--workers",
            "1",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode in (0, 1), (r.returncode, r.stdout[-500:], r.stderr[-500:])
    out = json.loads(r.stdout)
    answer, solver, X, Y = z3_answer(model, case.prop)
    assert answer in (z3.sat, z3.unsat), answer
    assert str(answer) == case.expected, f"z3 now says {answer}: the case changed"
    assert out["verdict"] == str(answer), (out["verdict"], str(answer), out.get("reason"))
    if answer == z3.unsat:
        assert r.returncode == 0 and out["trust"] == "kernel-checked", out
        return
    assert r.returncode == 1
    x = [Fraction(v) for v in out["x"]]
    y = run_exact(model, x)
    assert [Fraction(v) for v in out["y"]] == y
    # the counterexample file holds the same point, read independently
    assert fuzz_io.read_cex(cex.read_text(), len(x)) == x
    # z3's reading of the property holds at (x, f(x)) ...
    sub = [(v, _z3_val(c)) for v, c in zip(X + Y, x + y)]
    for a in z3.parse_smt2_string(case.prop):
        assert z3.is_true(z3.simplify(z3.substitute(a, *sub))), a
    # ... and z3 confirms it with the network's encoding
    solver.add([v == _z3_val(c) for v, c in zip(X, x)])
    assert solver.check() == z3.sat


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if c.slow else n for n, c in CASES.items()],
)
def test_check_agrees_with_z3(name, tmp_path):
    _check(tmp_path, name)


def test_the_cases_are_both_sat_and_unsat():
    answers = {c.expected for c in CASES.values()}
    assert answers == {"sat", "unsat"} and 8 <= len(CASES) <= 12
    # every network has a sat and an unsat case
    for net in NETS:
        assert {c.expected for c in CASES.values() if c.net == net} == {"sat", "unsat"}, net


def test_the_networks_are_read_as_onnxruntime_reads_them():
    """The z3 encoding's source (tests/fuzz_io.py's reference) and onnx_semantics agree with
    each other exactly, and with onnxruntime's float32 evaluation."""
    import onnxruntime as ort

    for name, m in NETS.items():
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        nx, _ = _dim(m)
        shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
        for seed in range(3):
            x = _center(nx, 100 + seed, den=8)
            exact = run_exact(m, x)
            assert fuzz_io.onnx_eval(m, x) == exact, name
            got = sess.run(None, {"X": np.array([float(v) for v in x], np.float32).reshape(shape)})
            assert np.allclose(got[0].reshape(-1), [float(v) for v in exact], atol=1e-5), name
