"""The command line: exit codes, JSON output, notes, help."""

import json
import os
import subprocess
import sys

import pytest

import exactmax
from exactmax.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "tent.json")


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "exactmax", *args], capture_output=True,
                          text=True, cwd=cwd)


def test_eval_prints_the_exact_output(capsys):
    assert main(["eval", EXAMPLE, "--input", "1/2,-1/3", "--json"]) == 0
    # by hand: h = (2/3, 1/3, 1), then (5/6, 2/3), y = 5/6 - 2/3
    out = json.loads(capsys.readouterr().out)
    assert out["output"] == ["1/6"] and out["exactmax_version"] == exactmax.__version__
    assert (out["command"], out["verdict"], out["trust"]) == ("eval", "done", None)


def test_every_json_output_names_the_exactmax_version(tmp_path, capsys):
    """Each command's --json object ends with the version of exactmax that produced it."""
    cert = str(tmp_path / "c.json")
    for argv in (["eval", EXAMPLE, "--input", "1/2,-1/3", "--json"],
                 ["info", EXAMPLE, "--json"], ["verify", EXAMPLE, "--json", "--cert", cert],
                 ["check-cert", cert, "--json"], ["regions", EXAMPLE, "--json"],
                 ["schema", "--list", "--json"]):
        main(argv)
        out = json.loads(capsys.readouterr().out)
        assert list(out)[-1] == "exactmax_version" and out["exactmax_version"] == \
            exactmax.__version__, argv


def test_eval_reads_decimals_exactly(capsys):
    assert main(["eval", EXAMPLE, "--input", "0.5,-0.25"]) == 0
    out = capsys.readouterr().out
    # h1 = (max(5/8, 0, -1/2), max(-13/12, 1/4), 1) = (5/8, 1/4, 1); h2 = (max(7/8, -1/24), 5/8)
    assert out.strip() == "y = (1/4)"


def test_a_point_outside_the_domain_is_evaluated_with_a_note(capsys):
    assert main(["eval", EXAMPLE, "--input", "2,0"]) == 0
    captured = capsys.readouterr()
    assert "outside the domain" in captured.err and "x[0] = 2" in captured.err
    assert captured.out.startswith("y = (")


def test_version_and_help():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith("exactmax ")
    for cmd in ("eval", "info"):
        r = run(cmd, "--help")
        assert r.returncode == 0 and "usage: exactmax " + cmd in r.stdout


def test_usage_errors_exit_2():
    assert run().returncode == 2
    assert run("eval", EXAMPLE).returncode == 2  # --input missing
    r = run("eval", "missing.json", "--input", "0,0")
    assert r.returncode == 2
    assert r.stderr.strip() == "exactmax: error: missing.json: no such file"


def test_info_reports_domain_status(tmp_path, capsys):
    net = json.load(open(EXAMPLE))
    for dom, state in (({"polyhedron": {"A": [[1, 0], [-1, 0]], "b": [0, -1]}}, "empty"),
                       ({"polyhedron": {"A": [[-1, 0], [0, -1]], "b": [0, 0]}}, "unbounded"),
                       ({"polyhedron": {"A": [[-1, 0], [0, -1], [1, 1]], "b": [0, 0, 1]}},
                        "bounded")):
        net["domain"] = dom
        p = tmp_path / "n.json"
        p.write_text(json.dumps(net))
        assert main(["info", str(p), "--json"]) == 0
        d = json.loads(capsys.readouterr().out)["domain"]
        assert d["empty"] == (state == "empty")
        assert d["bounded"] == (state != "unbounded")
        if state == "bounded":
            assert d["lower"] == ["0", "0"] and d["upper"] == ["1", "1"]


def test_domain_file_overrides_the_model_domain(tmp_path, capsys):
    p = tmp_path / "d.json"
    p.write_text(json.dumps({"format": "exactmax/domain", "version": 1,
                             "box": {"lower": [0, 0], "upper": [3, 3]}}))
    assert main(["eval", EXAMPLE, "--input", "2,0", "--domain", str(p)]) == 0
    assert "outside" not in capsys.readouterr().err


def test_a_box_whose_first_end_is_negative_needs_no_equals_sign(tmp_path):
    out = tmp_path / "g.json"
    assert main(["approx-convex", "x^2", "--box", "-1,1", "--h", "1/2", "-o", str(out)]) == 0
    assert out.exists()


def test_every_certificate_names_the_exactmax_version_and_a_bad_one_is_refused(tmp_path,
                                                                               capsys):
    """Equivalence and region certificates record the release that wrote them; the field is
    no part of the claim, but a value that is not a string is a malformed file (exit 2)."""
    cert, rc = tmp_path / "c.json", tmp_path / "r.json"
    assert main(["verify", EXAMPLE, "--cert", str(cert)]) == 0
    assert main(["regions", EXAMPLE, "--cert", str(rc)]) == 0
    capsys.readouterr()
    for path, check in ((cert, ["check-cert", str(cert)]),
                        (rc, ["regions", "--check-cert", str(rc)])):
        c = json.loads(path.read_text())
        assert c["exactmax_version"] == exactmax.__version__
        c["exactmax_version"] = 7
        path.write_text(json.dumps(c))
        assert main(check) == 2
        assert "exactmax_version" in capsys.readouterr().err
