"""ONNX import: every supported operator and opset form, built here with onnx.helper; the
imported network evaluated exactly must equal an independent exact interpreter of the ONNX
graph (tests/onnx_semantics.py) and agree with onnxruntime's float output."""

from __future__ import annotations

import json
import os
from fractions import Fraction

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_semantics import run_exact

from exactmax.io import InputError, load_model
from exactmax.io.numbers import to_fraction
from exactmax.io.onnxfile import import_onnx
from exactmax.kernel.maxout import evaluate_maxout
from exactmax.kernel.rational import Q

RNG = np.random.default_rng(7)


def weights(*shape, dtype=np.float32):
    return RNG.normal(size=shape).astype(dtype)


def build(path, nodes, inits, in_shape, out_shape, opset=13, ir=None, inits_as_inputs=False,
          dtype=TensorProto.FLOAT):
    inputs = [helper.make_tensor_value_info("x", dtype, in_shape)]
    tensors = [numpy_helper.from_array(v, k) for k, v in inits.items()]
    if inits_as_inputs:
        inputs = [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                  for t in tensors] + inputs
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", dtype, out_shape)], tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir if ir is not None else min(model.ir_version, 8)
    onnx.save(model, str(path))
    return str(path)


def check_against_runtimes(path, dim, points=8, scale=1.0):
    net = load_model(path)
    assert net.input_dim == dim
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    inp = [i for i in sess.get_inputs() if i.name == "x"][0]
    shape = [d if isinstance(d, int) and d > 0 else 1 for d in inp.shape]
    for _ in range(points):
        x = (scale * RNG.normal(size=shape)).astype(np.float32)
        xq = [Q(*float(v).as_integer_ratio()) for v in x.reshape(-1)]
        exact = [to_fraction(v) for v in evaluate_maxout(net, xq)]
        assert exact == run_exact(onnx.load(path), [Fraction(float(v)) for v in x.reshape(-1)])
        rt = sess.run(None, {"x": x.astype(np.float32 if inp.type == "tensor(float)"
                                           else np.float64)})[0].reshape(-1)
        assert np.allclose([float(v) for v in exact], rt, rtol=1e-4, atol=1e-4)
    return net


def test_gemm_alpha_beta_transposes_and_relu(tmp_path):
    n = [helper.make_node("Gemm", ["x", "W0", "b0"], ["h"], alpha=0.5, beta=2.0, transB=1),
         helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Gemm", ["W1", "r"], ["y0"], transA=1, transB=1),
         helper.make_node("Transpose", ["y0"], ["y"], perm=[1, 0])]
    p = build(tmp_path / "g.onnx", n, {"W0": weights(4, 3), "b0": weights(4),
                                        "W1": weights(4, 2)}, [1, 3], [1, 2])
    net = check_against_runtimes(p, 3)
    assert [l.rank for l in net.layers] == [2]


def test_matmul_add_sub_mul_div_neg_and_composition(tmp_path):
    n = [helper.make_node("Sub", ["x", "mean"], ["a"]),
         helper.make_node("Div", ["a", "range"], ["b"]),
         helper.make_node("MatMul", ["b", "W0"], ["c"]),
         helper.make_node("Add", ["c", "b0"], ["d"]),
         helper.make_node("Mul", ["two", "d"], ["e"]),
         helper.make_node("Relu", ["e"], ["f"]),
         helper.make_node("Neg", ["f"], ["g"]),
         helper.make_node("MatMul", ["g", "W1"], ["h"]),
         helper.make_node("Sub", ["b1", "h"], ["y"])]
    p = build(tmp_path / "m.onnx", n, {
        "mean": weights(3), "range": np.array([2.0, 0.5, 4.0], np.float32),
        "W0": weights(3, 5), "b0": weights(5), "two": np.array(2.0, np.float32),
        "W1": weights(5, 2), "b1": weights(2)}, [3], [2], opset=14)
    net = check_against_runtimes(p, 3)
    assert len(net.layers) == 1   # the affine maps before and after the ReLU are composed


def test_variadic_max_is_a_maxout_layer(tmp_path):
    n = [helper.make_node("MatMul", ["x", f"W{j}"], [f"z{j}"]) for j in range(3)] + \
        [helper.make_node("Add", ["z0", "b0"], ["a0"]),
         helper.make_node("Max", ["a0", "z1", "z2"], ["m"]),
         helper.make_node("MatMul", ["m", "W3"], ["y"])]
    p = build(tmp_path / "max.onnx", n, {"W0": weights(2, 4), "W1": weights(2, 4),
                                          "W2": weights(2, 4), "b0": weights(4),
                                          "W3": weights(4, 1)}, [2], [1], opset=12)
    net = check_against_runtimes(p, 2)
    assert [l.rank for l in net.layers] == [3]


@pytest.mark.parametrize("opset", [11, 13, 18, 21])
def test_reducemax_over_a_reshaped_axis(tmp_path, opset):
    inits = {"W0": weights(3, 8), "b0": weights(8), "shape": np.array([1, 4, 2], np.int64),
             "W1": weights(4, 2)}
    if opset >= 18:
        inits["axes"] = np.array([-1], np.int64)
        red = helper.make_node("ReduceMax", ["r", "axes"], ["m"], keepdims=0)
    else:
        red = helper.make_node("ReduceMax", ["r"], ["m"], axes=[2], keepdims=0)
    n = [helper.make_node("Gemm", ["x", "W0", "b0"], ["h"]),
         helper.make_node("Reshape", ["h", "shape"], ["r"]), red,
         helper.make_node("Squeeze", ["m"], ["s"], axes=[0]) if opset < 13 else
         helper.make_node("Flatten", ["m"], ["s"], axis=1),
         helper.make_node("MatMul", ["s", "W1"], ["y"])]
    out = [2] if opset < 13 else [1, 2]
    p = build(tmp_path / f"rm{opset}.onnx", n, inits, [1, 3], out, opset=opset)
    net = check_against_runtimes(p, 3)
    assert [(l.width, l.rank) for l in net.layers] == [(4, 2)]


def test_maxpool_forms_maxout_units(tmp_path):
    n = [helper.make_node("Gemm", ["x", "W0", "b0"], ["h"]),
         helper.make_node("Reshape", ["h", "shape"], ["r"]),
         helper.make_node("MaxPool", ["r"], ["m"], kernel_shape=[3], strides=[3]),
         helper.make_node("Flatten", ["m"], ["f"]),
         helper.make_node("Gemm", ["f", "W1", "b1"], ["y"])]
    p = build(tmp_path / "pool.onnx", n, {"W0": weights(2, 9), "b0": weights(9),
                                           "shape": np.array([1, 1, 9], np.int64),
                                           "W1": weights(3, 2), "b1": weights(2)},
              [1, 2], [1, 2], opset=12)
    net = check_against_runtimes(p, 2)
    assert [(l.width, l.rank) for l in net.layers] == [(3, 3)]


def test_maxpool_2d_with_padding(tmp_path):
    n = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
         helper.make_node("MaxPool", ["r"], ["m"], kernel_shape=[2, 2], strides=[2, 2],
                          pads=[1, 1, 1, 1]),
         helper.make_node("Flatten", ["m"], ["y"])]
    p = build(tmp_path / "pool2.onnx", n, {"shape": np.array([1, 1, 2, 3], np.int64)},
              [1, 6], [1, 6], opset=10)
    check_against_runtimes(p, 6)


@pytest.mark.parametrize("opset", [9, 13])
def test_unsqueeze_squeeze_concat_constant_identity(tmp_path, opset):
    inits = {"W0": weights(2, 3), "W1": weights(2, 3), "W2": weights(7, 1)}
    if opset >= 13:
        inits["ax"] = np.array([0], np.int64)
        unsq = helper.make_node("Unsqueeze", ["c", "ax"], ["u"])
        sq = helper.make_node("Squeeze", ["u", "ax"], ["s"])
    else:
        unsq = helper.make_node("Unsqueeze", ["c"], ["u"], axes=[0])
        sq = helper.make_node("Squeeze", ["u"], ["s"], axes=[0])
    const = helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(
        np.array([0.25], np.float32)))
    n = [helper.make_node("MatMul", ["x", "W0"], ["a"]),
         helper.make_node("MatMul", ["x", "W1"], ["b"]), const,
         helper.make_node("Concat", ["a", "b", "k"], ["c"], axis=0), unsq, sq,
         helper.make_node("Identity", ["s"], ["i"]),
         helper.make_node("Relu", ["i"], ["r"]),
         helper.make_node("MatMul", ["r", "W2"], ["y"])]
    p = build(tmp_path / f"cat{opset}.onnx", n, inits, [2], [1], opset=opset)
    check_against_runtimes(p, 2)


def test_ir3_initializers_as_inputs_float64(tmp_path):
    n = [helper.make_node("Sub", ["x", "avg"], ["a"]),
         helper.make_node("Flatten", ["a"], ["f"], axis=1),
         helper.make_node("MatMul", ["f", "W0"], ["m"]),
         helper.make_node("Add", ["m", "b0"], ["h"]),
         helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "W1"], ["y"])]
    d = np.float64
    p = build(tmp_path / "ir3.onnx", n, {"avg": weights(1, 1, 1, 3, dtype=d),
                                          "W0": weights(3, 6, dtype=d), "b0": weights(6, dtype=d),
                                          "W1": weights(6, 2, dtype=d)},
              [1, 1, 1, 3], [1, 2], opset=8, ir=3, inits_as_inputs=True,
              dtype=TensorProto.DOUBLE)
    net = check_against_runtimes(p, 3)
    _, rep = import_onnx(p)
    assert rep.ir_version == 3 and rep.max_weight_denominator_bits > 30


def test_weights_are_the_exact_dyadic_rationals(tmp_path):
    w = np.array([[0.1]], np.float32)   # 0.1 in float32 is 13421773 / 2^27
    p = build(tmp_path / "w.onnx", [helper.make_node("MatMul", ["x", "W"], ["y"])], {"W": w},
              [1], [1])
    net, rep = import_onnx(p)
    assert evaluate_maxout(net, [Q(1)]) == (Q(13421773, 2 ** 27),)
    assert rep.max_weight_denominator_bits == 27


def _run(*args):
    """The command run in-process (stdout, stderr and exit status, as a subprocess gives)."""
    import contextlib
    import io
    from types import SimpleNamespace

    from exactmax.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def _relu_net(tmp_path, W0, name="n.onnx", last=None):
    n = [helper.make_node("MatMul", ["x", "W0"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    if last:
        n[-1] = helper.make_node("Relu", ["h"], ["r"])
        n.append(helper.make_node(last, ["r"], ["y"]))
    return build(tmp_path / name, n, {"W0": W0}, [1, 2], [1, 2])


def test_import_command_writes_an_equal_json_model(tmp_path):
    p = _relu_net(tmp_path, weights(2, 2))
    out = tmp_path / "n.json"
    r = _run("import", p, "-o", str(out), "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["input_dim"] == 2 and rep["layers"] == [{"width": 2, "rank": 2}]
    assert load_model(str(out)) == load_model(p)
    r = _run("import", p, "-o", p)
    assert r.returncode == 2 and "names the same file" in r.stderr


@pytest.mark.parametrize("case", ["sigmoid", "corrupt", "nan", "inf", "softmax", "unknown",
                                  "bilinear", "empty"])
def test_refused_files_exit_2_with_one_line(tmp_path, case):
    if case == "sigmoid":
        p = _relu_net(tmp_path, weights(2, 2), last="Sigmoid")
        expect = "Sigmoid"
    elif case == "corrupt":
        p = _relu_net(tmp_path, weights(2, 2))
        data = open(p, "rb").read()
        open(p, "wb").write(data[: len(data) // 2] + b"\xff\xff\xff")
        expect = "not a readable ONNX file"
    elif case == "nan":
        p = _relu_net(tmp_path, np.array([[1.0, np.nan], [0.0, 1.0]], np.float32))
        expect = "not a finite number"
    elif case == "inf":
        p = _relu_net(tmp_path, np.array([[1.0, 0.0], [-np.inf, 1.0]], np.float64).astype(
            np.float32))
        expect = "not a finite number"
    elif case == "empty":
        p = str(tmp_path / "empty.onnx")
        open(p, "wb").close()
        expect = "not an ONNX model"
    elif case == "softmax":
        p = _relu_net(tmp_path, weights(2, 2), last="Softmax")
        expect = "--drop-final-softmax"
    elif case == "unknown":  # an operator exactmax does not read (skip connections it does)
        n = [helper.make_node("MatMul", ["x", "W0"], ["h"]),
             helper.make_node("Relu", ["h"], ["r"]), helper.make_node("Resize", ["r"], ["y"])]
        p = build(tmp_path / "resize.onnx", n, {"W0": weights(2, 2)}, [1, 2], [1, 2])
        expect = "unsupported operator Resize"
    else:
        n = [helper.make_node("MatMul", ["x", "W0"], ["h"]), helper.make_node("Mul", ["h", "x"],
                                                                               ["y"])]
        p = build(tmp_path / "bil.onnx", n, {"W0": weights(2, 2)}, [1, 2], [1, 2])
        expect = "input-dependent"
    r = _run("info", p)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("exactmax: error: ") and expect in lines[0]
    assert "Traceback" not in r.stderr
    if case in ("sigmoid", "softmax", "unknown"):
        assert "supported: Gemm, MatMul" in lines[0] and "node " in lines[0]


def test_drop_final_softmax(tmp_path):
    p = _relu_net(tmp_path, weights(2, 2), last="Softmax")
    with pytest.raises(InputError):
        import_onnx(p)
    net, rep = import_onnx(p, drop_final_softmax=True)
    assert rep.dropped_softmax and len(net.layers) == 1
    r = _run("import", p, "-o", str(tmp_path / "s.json"), "--drop-final-softmax")
    assert r.returncode == 0 and "Softmax dropped" in r.stdout


@pytest.mark.parametrize("tail", [["Identity"], ["Identity", "Identity"], ["Dropout", "Identity"]])
def test_a_final_softmax_followed_by_no_op_nodes_is_still_final(tmp_path, tail):
    W = weights(2, 2)
    n = [helper.make_node("MatMul", ["x", "W0"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Softmax", ["r"], ["s0"])]
    for i, op in enumerate(tail):
        n.append(helper.make_node(op, [f"s{i}"], ["y" if i == len(tail) - 1 else f"s{i + 1}"]))
    p = build(tmp_path / "softmax_identity.onnx", n, {"W0": W}, [1, 2], [1, 2])
    r = _run("info", p)
    assert r.returncode == 2 and "--drop-final-softmax" in r.stderr
    assert "inside the network" not in r.stderr
    net, rep = import_onnx(p, drop_final_softmax=True)
    assert rep.dropped_softmax
    assert net == import_onnx(_relu_net(tmp_path, W, name="plain.onnx"))[0]


def test_a_softmax_whose_value_is_used_further_is_inside_the_network(tmp_path):
    # Softmax -> Identity -> Add: the Add, not the Softmax, makes the output
    n = [helper.make_node("MatMul", ["x", "W0"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Softmax", ["r"], ["s"]), helper.make_node("Identity", ["s"], ["t"]),
         helper.make_node("Add", ["t", "t"], ["y"])]
    p = build(tmp_path / "softmax_inside.onnx", n, {"W0": weights(2, 2)}, [1, 2], [1, 2])
    with pytest.raises(InputError, match="Softmax inside the network"):
        import_onnx(p, drop_final_softmax=True)


def test_large_products_go_through_flint_and_agree(tmp_path):
    # products above the size threshold of io/onnxfile._product: both orientations
    n = [helper.make_node("Gemm", ["x", "W0", "b0"], ["h"]),
         helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Transpose", ["r"], ["c"], perm=[1, 0]),
         helper.make_node("MatMul", ["W1", "c"], ["m"]),
         helper.make_node("Relu", ["m"], ["s"]),
         helper.make_node("Flatten", ["s"], ["f"], axis=0),
         helper.make_node("MatMul", ["f", "W2"], ["y"])]
    p = build(tmp_path / "big.onnx", n, {"W0": weights(30, 64) / 5, "b0": weights(64),
                                          "W1": weights(64, 64) / 8, "W2": weights(64, 3)},
              [1, 30], [1, 3])
    net = check_against_runtimes(p, 30, points=2)
    assert [l.width for l in net.layers] == [64, 64]
