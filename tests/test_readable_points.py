"""Points people can read (#33): an exact point whose text is long is printed again to six
significant digits (``x ~ (...)``), and ``--json`` always carries both, the decimals agreeing
with the exact values to six digits."""

import json
import os

from exactmax.cli import main
from exactmax.io.numbers import LONG_EXACT, approx_point, parse_rational, point_lines, q_str
from exactmax.kernel.rational import Q

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TENT = os.path.join(ROOT, "examples", "tent.json")


def test_short_exact_points_print_one_line_long_ones_two():
    assert point_lines("x", [Q(1), Q(1, 6)]) == "  x = (1, 1/6)"
    long = Q(2552039788843281, 9007199254740992)
    assert len(q_str(long)) > LONG_EXACT
    assert point_lines("B.json", [long], ": ") == (
        "  B.json: (2552039788843281/9007199254740992)\n  B.json ~ (0.283333)"
    )


def test_decimals_of_any_size_are_six_significant_digits():
    vals = [Q(-1, 3), Q(1, 10**7), Q(10) ** 400 * Q(13, 10), Q(0), Q(5)]
    assert approx_point(vals) == ["-0.333333", "1e-07", "1.3e+400", "0", "5"]


def test_eval_prints_and_returns_both(capsys):
    assert main(["eval", TENT, "--input", "1/3000000000001,2/7"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["y = (-8999999999975/42000000000014)", "y ~ (-0.214286)"]
    assert main(["eval", TENT, "--input", "1/3000000000001,2/7", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    exact, about = parse_rational(out["output"][0]), float(out["output_approx"][0])
    assert abs(float(exact) - about) <= 5e-6 * abs(float(exact))  # half a unit of the 6th digit


def test_a_refutation_carries_the_decimals_of_its_point(capsys, tmp_path):
    """verify of the tent against a copy with one weight moved by 2^-40: the counterexample's
    outputs differ in the 13th digit, so their exact texts are long and decimals follow."""
    net = json.loads(open(TENT).read())
    w = net["layers"][0]["units"][0]["pieces"][0]["w"]
    w[0] = q_str(parse_rational(w[0]) + Q(1, 2**40))
    other = tmp_path / "moved.json"
    other.write_text(json.dumps(net))
    assert main(["equiv", TENT, str(other), "--json"]) == 1
    ce = json.loads(capsys.readouterr().out)["counterexample"]
    assert len(ce["x_approx"]) == len(ce["x"])
    for name, ys in ce["outputs"].items():
        assert ce["outputs_approx"][name] == [f"{float(parse_rational(y)):.6g}" for y in ys]
    assert main(["equiv", TENT, str(other)]) == 1
    text = capsys.readouterr().out
    assert f"  {other} ~ (" in text or f"  {other.name} ~ (" in text, text
