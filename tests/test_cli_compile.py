"""`exactmax compile` and softmax evaluation from the command line."""

import json
import os

import pytest

from exactmax.cli import main
from exactmax.io import load_model
from exactmax.kernel.maxout import evaluate_maxout
from exactmax.kernel.rational import Q
from exactmax.kernel.transformer import evaluate_transformer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")


@pytest.mark.parametrize("name", ["tent.json", "relu_triangle.json", "maxout_d3_w4_r3.json"])
@pytest.mark.parametrize("flags", [[], ["--merged"], ["--positional", "scalar"]])
def test_compile_writes_a_transformer_equal_to_the_network(tmp_path, capsys, name, flags):
    out = tmp_path / "tf.json"
    assert main(["compile", os.path.join(EXAMPLES, name), "-o", str(out), "--json"] + flags) == 0
    rep = json.loads(capsys.readouterr().out)
    for key in ("maxout_params", "transformer_params", "transformer_nonzero", "tokens",
                "sublayers", "heads", "d_model", "layers", "bounds"):
        assert key in rep
    net, tf = load_model(os.path.join(EXAMPLES, name)), load_model(str(out))
    assert rep["tokens"] == tf.n_tokens == max(l.rank for l in net.layers)
    D = len(net.layers)
    assert rep["sublayers"] == (2 * D + 1 if "--merged" in flags else 3 * D)
    for x in [(Q(0),) * net.input_dim, tuple(Q(1, 3 + i) for i in range(net.input_dim))]:
        if net.domain.contains(x):
            assert evaluate_transformer(tf, x) == evaluate_maxout(net, x)


def test_report_table_and_bounds_method(tmp_path, capsys):
    out = tmp_path / "tf.json"
    assert main(["compile", os.path.join(EXAMPLES, "relu_triangle.json"), "-o", str(out),
                 "--report"]) == 0
    text = capsys.readouterr().out
    assert "from lp bounds" in text and "| total |" in text and "2 tokens" in text


def test_an_unbounded_domain_is_refused_and_nothing_is_written(tmp_path, capsys):
    net = json.load(open(os.path.join(EXAMPLES, "tent.json")))
    net["domain"] = {"polyhedron": {"A": [[-1, 0], [0, -1]], "b": [0, 0]}}
    src, out = tmp_path / "n.json", tmp_path / "tf.json"
    src.write_text(json.dumps(net))
    assert main(["compile", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "the construction needs a bounded, non-empty domain" in err
    assert "unbounded" in err and "--domain FILE" in err
    assert not out.exists()


def test_a_network_without_domain_is_refused(tmp_path, capsys):
    net = json.load(open(os.path.join(EXAMPLES, "tent.json")))
    del net["domain"]
    src = tmp_path / "n.json"
    src.write_text(json.dumps(net))
    assert main(["compile", str(src), "-o", str(tmp_path / "tf.json")]) == 2
    assert "needs a bounded, non-empty domain" in capsys.readouterr().err


def test_compiling_a_transformer_is_an_input_error(tmp_path, capsys):
    tf = tmp_path / "tf.json"
    assert main(["compile", os.path.join(EXAMPLES, "tent.json"), "-o", str(tf)]) == 0
    assert main(["compile", str(tf), "-o", str(tmp_path / "again.json")]) == 2
    assert 'expected an "exactmax/maxout" network' in capsys.readouterr().err


def test_softmax_evaluation_approaches_the_exact_value(tmp_path, capsys):
    tf = tmp_path / "tf.json"
    assert main(["compile", os.path.join(EXAMPLES, "tent.json"), "-o", str(tf)]) == 0
    capsys.readouterr()
    errors = []
    for lam in ("10", "100", "10000"):
        assert main(["eval", str(tf), "--input", "1/2,-1/3", "--softmax-lambda", lam,
                     "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["attention"] == "softmax" and out["precision_bits"] == 256
        from fractions import Fraction
        errors.append(abs(Fraction(out["output"][0]) - Fraction(1, 6)))
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < Fraction(1, 1000)


def test_softmax_lambda_needs_a_transformer_and_a_positive_value(tmp_path, capsys):
    net = os.path.join(EXAMPLES, "tent.json")
    assert main(["eval", net, "--input", "0,0", "--softmax-lambda", "10"]) == 2
    tf = tmp_path / "tf.json"
    main(["compile", net, "-o", str(tf)])
    assert main(["eval", str(tf), "--input", "0,0", "--softmax-lambda", "-1"]) == 2
    assert main(["eval", str(tf), "--input", "0,0", "--softmax-lambda", "abc"]) == 2
