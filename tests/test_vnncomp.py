"""``exactmax vnncomp``: a VNN-COMP benchmark run in the competition's formats.

Every instance of an ``instances.csv`` runs as ``exactmax check`` in a child process; the
results CSV has one line ``category,onnx,vnnlib,prepare_time,result,run_time`` per instance;
each result file starts with the result and, for sat, holds a counterexample that ``replay``
accepts; each unsat leaves a certificate that ``check-cert`` accepts.  A malformed
``instances.csv`` is refused in one line naming the line, before anything runs."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from exactmax.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
SCRIPTS = os.path.join(EXAMPLES, "vnncomp")


@pytest.fixture()
def bench(tmp_path):
    """A benchmark folder: the small ReLU network with a sat and an unsat property."""
    (tmp_path / "onnx").mkdir()
    (tmp_path / "vnnlib").mkdir()
    shutil.copy(os.path.join(EXAMPLES, "small_relu.onnx"), tmp_path / "onnx" / "net.onnx")
    for p in ("small_relu_sat", "small_relu_unsat"):
        shutil.copy(os.path.join(EXAMPLES, p + ".vnnlib"), tmp_path / "vnnlib" / (p + ".vnnlib"))
    (tmp_path / "instances.csv").write_text(
        "onnx/net.onnx,vnnlib/small_relu_sat.vnnlib,30\n"
        "onnx/net.onnx,vnnlib/small_relu_unsat.vnnlib,30\n"
    )
    return tmp_path


def exactmax(*argv, cwd=None):
    r = subprocess.run(
        [sys.executable, "-m", "exactmax", *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )
    return r.returncode, r.stdout, r.stderr


def test_a_benchmark_gives_vnncomp_results_backed_by_the_kernel(bench):
    out, res, certs = bench / "results.csv", bench / "res", bench / "certs"
    code, stdout, stderr = exactmax(
        "vnncomp", bench / "instances.csv", "--out", out, "--result-dir", res,
        "--cert-dir", certs, "--workers", "1", "--category", "small",
    )
    assert code == 0, stderr
    rows = list(csv.reader(out.open()))
    assert [r[:5] for r in rows] == [
        ["small", "onnx/net.onnx", "vnnlib/small_relu_sat.vnnlib", "0", "sat"],
        ["small", "onnx/net.onnx", "vnnlib/small_relu_unsat.vnnlib", "0", "unsat"],
    ]
    assert all(float(r[5]) > 0 for r in rows)
    assert "[2/2]" in stderr and "1 sat, 1 unsat" in stdout
    sat = res / "net__small_relu_sat.txt"
    assert sat.read_text().startswith("sat\n((X_0 ")
    # the counterexample is a real one: replay, in a second process, re-checks it exactly
    code, stdout, _ = exactmax(
        "replay", bench / "onnx/net.onnx", bench / "vnnlib/small_relu_sat.vnnlib", sat
    )
    assert code == 0, stdout
    assert (res / "net__small_relu_unsat.txt").read_text() == "unsat\n"
    cert = certs / "net__small_relu_unsat.json.gz"
    code, stdout, _ = exactmax(
        "check-cert", cert, "--model", bench / "onnx/net.onnx",
        "--property", bench / "vnnlib/small_relu_unsat.vnnlib",
    )
    assert code == 0 and stdout.startswith("valid"), stdout
    assert not (certs / "net__small_relu_sat.json.gz").exists()


def test_resume_keeps_the_lines_already_written(bench):
    out = bench / "results.csv"
    out.write_text("earlier,onnx/net.onnx,vnnlib/small_relu_sat.vnnlib,0,sat,1.5\n")
    code, _, stderr = exactmax(
        "vnncomp", bench / "instances.csv", "--out", out, "--resume", "--workers", "1"
    )
    assert code == 0, stderr
    rows = list(csv.reader(out.open()))
    assert rows[0] == ["earlier", "onnx/net.onnx", "vnnlib/small_relu_sat.vnnlib", "0", "sat",
                       "1.5"]
    assert rows[1][4] == "unsat" and "[1/2]" not in stderr and "[2/2]" in stderr


def test_an_answer_after_the_limit_is_a_timeout(bench):
    """VNN-COMP's rule: whatever the answer, it counts only within the limit.  No child
    process starts Python and exactmax within 0.05 s, so the answer always comes late (or
    the child's own limit, at least 0.5 s, stops it first)."""
    (bench / "instances.csv").write_text("onnx/net.onnx,vnnlib/small_relu_unsat.vnnlib,30\n")
    code, stdout, stderr = exactmax(
        "vnncomp", bench / "instances.csv", "--timeout", "0.05", "--result-dir", bench / "res",
        "--out", bench / "r.csv", "--json", "--quiet",
    )
    doc = json.loads(stdout)
    assert code == 0 and doc["counts"]["timeout"] == 1, (stdout, stderr)
    run = doc["runs"][0]
    # late (the parent's "timeout: answered ... after") or stopped by the child's own limit,
    # wherever it was (its reason names the time limit)
    assert run["result"] == "timeout" and ("time limit" in run["reason"]
                                           or run["reason"].startswith("timeout"))
    assert run["certificate"] is None
    assert list(csv.reader((bench / "r.csv").open()))[0][4] == "timeout"
    assert (bench / "res" / "net__small_relu_unsat.txt").read_text() == "timeout\n"


def test_run_instance_script_writes_the_result_file(bench, tmp_path):
    result = tmp_path / "out.txt"
    r = subprocess.run(
        ["bash", os.path.join(SCRIPTS, "run_instance.sh"), "v1", "small",
         str(bench / "onnx/net.onnx"), str(bench / "vnnlib/small_relu_sat.vnnlib"), str(result),
         "30"],
        capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert result.read_text().startswith("sat\n((X_0 ")
    r = subprocess.run(
        ["bash", os.path.join(SCRIPTS, "prepare_instance.sh"), "v1", "small",
         str(bench / "onnx/net.onnx"), str(bench / "vnnlib/small_relu_sat.vnnlib")],
        capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        ["bash", os.path.join(SCRIPTS, "run_instance.sh"), "v2", "small", "a", "b", "c", "1"],
        capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 1 and "v1" in r.stderr


@pytest.mark.parametrize(
    "text, message",
    [
        ("onnx/net.onnx,vnnlib/small_relu_sat.vnnlib\n", "instances.csv:1: expected "
         "onnx,vnnlib,timeout_seconds, got 2 fields"),
        ("\nonnx/net.onnx,vnnlib/small_relu_sat.vnnlib,soon\n", "instances.csv:2: the timeout "
         "'soon' is not a positive number"),
        ("onnx/net.onnx,vnnlib/small_relu_sat.vnnlib,-5\n", "the timeout '-5'"),
        ("onnx/net.onnx,vnnlib/small_relu_sat.vnnlib,inf\n", "the timeout 'inf'"),
        ("onnx/net.onnx,vnnlib/small_relu_sat.vnnlib,30\nonnx/other.onnx,vnnlib/x.vnnlib,30\n",
         "instances.csv:2: the onnx file onnx/other.onnx does not exist"),
        ("onnx/net.onnx,vnnlib/prop.vnnlib.gz,30\n", "gunzip them first"),
        ("\n\n", "no instances"),
    ],
)
def test_a_malformed_instances_csv_is_refused_before_anything_runs(bench, capsys, text,
                                                                   message):
    (bench / "instances.csv").write_text(text)
    out = bench / "results.csv"
    assert main(["vnncomp", str(bench / "instances.csv"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "expected INSTANCES.csv, or --instance ONNX VNNLIB"),
        (["--instance", "a.onnx", "b.vnnlib"], "--instance ONNX VNNLIB takes --timeout S"),
        (["{csv}", "--timeout", "0"], "--timeout: expected a positive number"),
        (["{csv}", "--sample", "0"], "--sample: expected a positive count"),
        (["{csv}", "--margin", "-1"], "--margin: expected a number of seconds >= 0"),
    ],
)
def test_a_bad_command_line_is_one_line(bench, capsys, argv, message):
    argv = [a.format(csv=bench / "instances.csv") for a in argv]
    assert main(["vnncomp", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_a_late_unsat_is_reported_as_a_timeout(monkeypatch, tmp_path):
    """The rule itself, without timing luck: a child that answers unsat after the limit."""
    from exactmax import vnncomp_command

    def late_unsat(argv, **kw):
        time.sleep(0.2)
        return subprocess.CompletedProcess(argv, 0, '{"verdict": "unsat", "reason": null}\n', "")

    monkeypatch.setattr(vnncomp_command.subprocess, "run", late_unsat)
    out = tmp_path / "result.txt"
    r = vnncomp_command.run_one("n.onnx", "p.vnnlib", 0.1, 0.0, str(out), "c.json", 1)
    assert r["result"] == "timeout" and r["certificate"] is None
    assert r["reason"].startswith("timeout: answered unsat after ")
    assert r["reason"].endswith(" s, past the limit of 0.1 s")
    assert out.read_text() == "timeout\n"
    r = vnncomp_command.run_one("n.onnx", "p.vnnlib", 10.0, 0.0, str(out), "c.json", 1)
    assert r["result"] == "unsat" and r["certificate"] == "c.json"
