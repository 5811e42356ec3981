"""`exactmax softmax-bound` from the command line."""

import json
import os

import pytest

from exactmax.cli import main
from exactmax.io.numbers import parse_rational
from exactmax.kernel.rational import Q

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TENT = os.path.join(ROOT, "examples", "tent.json")
# layer 2's piece h - 999/1000 ranges over [-999/1000, 1/1000]: C_2 = 1 leaves 1/1000 of margin
TIGHT = {"format": "exactmax/maxout", "version": 1, "input_dim": 1,
         "layers": [{"units": [{"pieces": [{"w": [0], "b": 0}, {"w": [1], "b": 0}]}]},
                    {"units": [{"pieces": [{"w": [1], "b": "-999/1000"}]}]}],
         "domain": {"box": {"lower": [-1], "upper": [1]}}}


def _run(capsys, argv):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_good_run_prints_the_three_numbers_and_exits_0(capsys):
    code, out, _ = _run(capsys, ["softmax-bound", TENT, "--lambda", "100", "--max-cells",
                                 "150"])
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("certified: |T_lambda(x) - N(x)|_inf <= ")
    # the verdict names what the kernel checked and what it takes from outside (#18.6)
    assert lines[1].startswith("  the kernel checked: in exact rationals")
    assert lines[2].startswith("  outside the kernel: that the Transformer is the construction")
    assert "on paper" in lines[2]
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
    assert "softmax recursion" in rep["kernel_checked"] and len(rep["outside_kernel"]) == 2
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


def _file(tmp_path, name, data):
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(p)


def test_gates_made_for_a_smaller_domain_are_named_and_no_closed_form_is_printed(
        capsys, tmp_path):
    """Layer 1 is not perturbed by softmax: a gate C_1 too small means the Transformer was
    compiled for a smaller domain; the advice is a compile on this domain (with --domain),
    and the JSON carries no bound, not even the closed form (it assumes exact gates too)."""
    tf = str(tmp_path / "tf.json")
    assert main(["compile", TENT, "-o", tf]) == 0
    big = _file(tmp_path, "big.json", {"format": "exactmax/domain", "version": 1,
                                       "box": {"lower": [-3, -3], "upper": [3, 3]}})
    capsys.readouterr()
    argv = ["softmax-bound", TENT, "--transformer", tf, "--domain", big, "--lambda", "100",
            "--max-cells", "100"]
    code, out, _ = _run(capsys, argv)
    assert code == 3 and "layer 1 is not perturbed" in out
    assert f"exactmax compile {TENT} --domain {big} -o TF.json" in out
    code, out, _ = _run(capsys, argv + ["--json"])
    rep = json.loads(out)
    assert code == 3 and rep["certified_bound"] is None and rep["closed_form_bound"] is None


def test_epsilon_mode_offers_the_slack_when_the_gates_fail(capsys, tmp_path):
    net = _file(tmp_path, "tight.json", TIGHT)
    code, out, _ = _run(capsys, ["softmax-bound", net, "--epsilon", "0.01", "--max-cells",
                                 "100", "--json"])
    rep = json.loads(out)
    assert code == 3 and rep["epsilon"]["certified_lambda"] is None
    assert rep["epsilon"]["suggested_slack"] is not None
    assert any("--slack" in a for a in rep["epsilon"]["advice"])


def test_a_huge_lambda_and_a_point_domain_coordinate_still_give_a_report(capsys, tmp_path):
    code, out, err = _run(capsys, ["softmax-bound", TENT, "--lambda", "1e400", "--max-cells",
                                   "30", "--json"])
    assert code == 0 and "Traceback" not in err
    assert json.loads(out)["verdict"] == "certified"
    seg = _file(tmp_path, "seg.json", {"format": "exactmax/domain", "version": 1,
                                       "box": {"lower": ["1/3", -1], "upper": ["1/3", 1]}})
    code, out, _ = _run(capsys, ["softmax-bound", TENT, "--domain", seg, "--lambda", "100",
                                 "--max-cells", "200", "--json"])
    rep = json.loads(out)
    assert code == 0 and parse_rational(rep["observed_x"][0]) == Q(1, 3)
    U, W = parse_rational(rep["certified_bound"]), parse_rational(rep["observed_error"])
    assert 0 < W <= U <= 2 * W          # W found on the segment x0 = 1/3, not at a fallback


@pytest.mark.parametrize("make, needle", [
    (lambda t: _file(t, "bad.json", '{"format": "exactmax/maxout", "version": 1,'), "JSON"),
    (lambda t: _file(t, "nodom.json", {k: v for k, v in TIGHT.items() if k != "domain"}),
     "domain"),
    (lambda t: _file(t, "unb.json", {**TIGHT, "domain": {"polyhedron": {"A": [[1]],
                                                                        "b": [1]}}}),
     "unbounded"),
])
def test_bad_network_files_give_one_line_and_exit_2(capsys, tmp_path, make, needle):
    code, out, err = _run(capsys, ["softmax-bound", make(tmp_path), "--lambda", "10"])
    assert code == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err
