"""Domains without a domain file (#33): ``--box "lo,hi;..."`` and ``--domain-from
PROP.vnnlib`` on every command that takes ``--domain``, read exactly as the same domain written
in a file (the same canonical hash), refused in one line when malformed; ``import`` records
the domain it is given."""

import json
import os

import pytest

from exactmax.cli import main
from exactmax.io.models import load_domain
from exactmax.kernel.polyhedron import Box, Polyhedron
from exactmax.kernel.rational import Q

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")
TENT, REORDERED = os.path.join(EX, "tent.json"), os.path.join(EX, "tent_reordered.json")
HEADER = "(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n"


def domain_file(tmp_path, lower, upper):
    p = tmp_path / "d.json"
    p.write_text(json.dumps({"format": "exactmax/domain", "version": 1,
                             "box": {"lower": lower, "upper": upper}}))
    return str(p)


def test_a_box_option_is_the_box_of_a_domain_file(tmp_path, capsys):
    hashes = []
    for opts in (["--box", "0,1/2;-1/3,1"], ["--domain", domain_file(tmp_path, ["0", "-1/3"],
                                                                      ["1/2", "1"])]):
        assert main(["equiv", TENT, REORDERED, "--json", *opts]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["verdict"] == "proved"
        hashes.append(out["sha256"]["domain"])
    assert hashes[0] == hashes[1]
    assert load_domain("--box -1,1", 3) == Box((Q(-1),) * 3, (Q(1),) * 3)  # one side: all


def test_the_domain_from_a_property_is_its_input_set(tmp_path):
    box = tmp_path / "box.vnnlib"
    box.write_text(HEADER + "(assert (>= X_0 0))\n(assert (<= X_0 1/2))\n"
                   "(assert (>= X_1 -1))\n(assert (<= X_1 1))\n(assert (>= Y_0 1))\n")
    assert load_domain(f"--domain-from {box}", 2) == Box((Q(0), Q(-1)), (Q(1, 2), Q(1)))
    poly = tmp_path / "poly.vnnlib"
    poly.write_text(HEADER + "(assert (>= X_0 0))\n(assert (>= X_1 0))\n"
                    "(assert (<= (+ X_0 X_1) 1))\n(assert (>= Y_0 1))\n")
    P = load_domain(f"--domain-from {poly}", 2)
    assert isinstance(P, Polyhedron)
    assert P.contains((Q(1, 2), Q(1, 2))) and not P.contains((Q(2, 3), Q(1, 2)))


@pytest.mark.parametrize("opts, says", [
    (["--box", "0,1;0"], '--box 0,1;0: side 1: expected "lo,hi"'),
    (["--box", "0,1;1,0"], "side 1: lo = 1 is above hi = 0"),
    (["--box", "0,1;0,1;0,1"], "3 sides"),
    (["--box", "0,x;0,1"], "side 0: expected an integer"),
    (["--box", "0,1", "--domain-from", "p.vnnlib"], "at most one of --domain, --box"),
    (["--domain-from", "/no/such.vnnlib"], "/no/such.vnnlib: no such file"),
])
def test_a_bad_domain_option_is_one_line_and_exit_2(opts, says, capsys):
    assert main(["equiv", TENT, REORDERED, *opts]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


def test_a_property_whose_cases_differ_in_inputs_gives_no_domain(tmp_path, capsys):
    two = tmp_path / "two.vnnlib"
    two.write_text(HEADER + "(assert (or (and (>= X_0 0) (<= X_0 1) (>= X_1 0) (<= X_1 1))\n"
                   "            (and (>= X_0 2) (<= X_0 3) (>= X_1 0) (<= X_1 1))))\n"
                   "(assert (>= Y_0 1))\n")
    assert main(["equiv", TENT, REORDERED, "--domain-from", str(two)]) == 2
    assert "different input sets" in capsys.readouterr().err


def test_import_records_the_domain_it_is_given(tmp_path, capsys):
    out = tmp_path / "net.json"
    assert main(["import", os.path.join(EX, "small_relu.onnx"), "-o", str(out),
                 "--box", "0,1/2;-1,1"]) == 0
    assert json.loads(out.read_text())["domain"] == {"box": {"lower": ["0", "-1"],
                                                             "upper": ["1/2", "1"]}}
    assert "domain recorded: --box 0,1/2;-1,1" in capsys.readouterr().out
