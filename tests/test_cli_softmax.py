"""`exactmax softmax-bound` from the command line."""

import json
import os

import pytest

from exactmax.cli import main
from exactmax.io.numbers import parse_rational
from exactmax.kernel.rational import Q

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TENT = os.path.join(ROOT, "examples", "tent.json")
TIGHT = {"format": "exactmax/maxout", "version": 1, "input_dim": 1,
         "layers": [{"units": [{"pieces": [{"w": [0], "b": 0}, {"w": [1], "b": 0}]}]},
                    {"units": [{"pieces": [{"w": [1], "b": -1}]}]}],
         "domain": {"box": {"lower": [-1], "upper": [1]}}}


def _run(capsys, argv):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_good_run_prints_the_three_numbers_and_exits_0(capsys):
    code, out, _ = _run(capsys, ["softmax-bound", TENT, "--lambda", "100", "--max-cells",
                                 "150"])
    assert code == 0
    assert out.startswith("certified (bound re-checked by the kernel in exact rationals)")
    for label in ("closed-form bound", "certified bound U", "observed worst error W", "U / W"):
        assert label in out


def test_json_keys_and_order_of_the_numbers(capsys):
    code, out, _ = _run(capsys, ["softmax-bound", TENT, "--lambda", "1000", "--max-cells",
                                 "150", "--json"])
    assert code == 0
    rep = json.loads(out)
    for key in ("certified_bound", "closed_form_bound", "observed_error", "verdict", "lambda",
                "cells", "certified_bound_exact", "ratio_U_W"):
        assert key in rep
    assert rep["verdict"] == "certified" and rep["lambda"] == "1000"
    U, W, C = (parse_rational(rep[k]) for k in ("certified_bound", "observed_error", "closed_form_bound"))
    assert 0 < W <= U <= C
    assert U >= parse_rational(rep["certified_bound_exact"])   # the printed decimal is rounded up


@pytest.mark.parametrize("argv, needle", [
    (["--lambda", "0"], "--lambda: expected a positive number"),
    (["--lambda", "ten"], "--lambda:"),
    ([], "give --lambda L, --epsilon E, or both"),
    (["--lambda", "10", "--epsilon=-1/2"], "--epsilon"),
    (["--lambda", "-1"], "--lambda: expected a positive number"),
    (["--lambda", "10", "--epsilon", "-0.5"], "--epsilon: expected a positive number"),
    (["--lambda", "10", "--max-cells", "0"], "--max-cells"),
])
def test_bad_options_give_one_line_and_exit_2(capsys, argv, needle):
    code, out, err = _run(capsys, ["softmax-bound", TENT] + argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("exactmax: error: ") and needle in err


def test_a_transformer_that_is_not_the_construction_is_refused(capsys):
    broken = os.path.join(ROOT, "examples", "tent_broken.transformer.json")
    code, _, err = _run(capsys, ["softmax-bound", TENT, "--lambda", "10", "--transformer",
                                 broken])
    assert code == 2 and err.count("\n") == 1
    assert "not the construction of" in err and "tent_broken" in err


def test_a_transformer_given_as_the_network_is_refused(capsys, tmp_path):
    tf = tmp_path / "tf.json"
    assert main(["compile", TENT, "-o", str(tf)]) == 0
    capsys.readouterr()
    code, _, err = _run(capsys, ["softmax-bound", str(tf), "--lambda", "10"])
    assert code == 2 and 'expected an "exactmax/maxout" network' in err


def test_gates_not_exact_exit_3_without_a_bound_then_the_suggested_slack_works(capsys,
                                                                               tmp_path):
    net = tmp_path / "tight.json"
    net.write_text(json.dumps(TIGHT))
    code, out, _ = _run(capsys, ["softmax-bound", str(net), "--lambda", "10", "--json"])
    rep = json.loads(out)
    assert code == 3 and rep["verdict"] == "unknown" and rep["certified_bound"] is None
    assert "not exact" in rep["reason"]
    slack = rep["suggested_slack"]
    code, out, _ = _run(capsys, ["softmax-bound", str(net), "--lambda", "10"])
    assert code == 3 and "--slack" in out and "<=" not in out   # no bound printed
    tf = tmp_path / "tf.json"
    assert main(["compile", str(net), "--slack", slack, "-o", str(tf)]) == 0
    capsys.readouterr()
    code, out, _ = _run(capsys, ["softmax-bound", str(net), "--lambda", "10", "--transformer",
                                 str(tf), "--json"])
    assert code == 0 and json.loads(out)["verdict"] == "certified"


def test_epsilon_finds_a_certified_lambda_below_the_closed_form_one(capsys):
    code, out, _ = _run(capsys, ["softmax-bound", TENT, "--epsilon", "1/100", "--max-cells",
                                 "100", "--tolerance", "0.2", "--json"])
    assert code == 0
    eo = json.loads(out)["epsilon"]
    lam, cf = parse_rational(eo["certified_lambda"]), parse_rational(eo["closed_form_lambda"])
    assert parse_rational(eo["certified_bound"]) <= Q(1, 100)
    assert lam < cf
    assert eo["lambda_fails"] is None or parse_rational(eo["lambda_fails"]) * Q(6, 5) >= lam
