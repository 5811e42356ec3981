"""benchmarks/vnncomp.py, the side-by-side harness: its sample is ``exactmax vnncomp``'s, and
an answer counts as wrong only against exact evidence (a kernel-checked unsat, an exactly
replayed sat), never against another tool's unchecked word."""

from __future__ import annotations

import importlib.util
import os
import random
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(os.path.dirname(HERE), "benchmarks")


@pytest.fixture(scope="module")
def harness():
    sys.path.insert(0, BENCH)
    try:
        spec = importlib.util.spec_from_file_location("vnncomp_harness",
                                                      os.path.join(BENCH, "vnncomp.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.path.remove(BENCH)


def test_the_sample_is_exactmax_vnncomps(harness, tmp_path, capsys):
    path = tmp_path / "instances.csv"
    path.write_text("".join(f"n{i}.onnx,p{i}.vnnlib,{10 + i}\n" for i in range(30)) + "# note\n")
    rows = harness.read_instances(str(path))
    assert len(rows) == 30 and rows[3] == ("n3.onnx", "p3.vnnlib", 13.0, "?")
    keep = sorted(random.Random(32).sample(range(30), 8))  # as exactmax vnncomp --sample
    assert harness.sample(rows, 8, 32) == [rows[i] for i in keep]
    assert harness.sample(rows, None, 32) == rows
    bad = tmp_path / "bad.csv"
    bad.write_text("a.onnx,b.vnnlib,soon\n")
    with pytest.raises(SystemExit) as e:
        harness.read_instances(str(bad))
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "bad.csv:1: expected onnx,vnnlib,timeout" in err and len(err.splitlines()) == 1


def test_wrong_is_decided_by_exact_evidence_only(harness):
    rows = [("a.onnx", "p.vnnlib", 116.0, "?"), ("b.onnx", "p.vnnlib", 116.0, "?"),
            ("c.onnx", "p.vnnlib", 116.0, "?")]
    runs = {
        # a: exactmax's replayed counterexample against the peer's unchecked unsat
        ("exactmax", "a.onnx", "p.vnnlib"): {"result": "sat", "wall": 1.0, "backed": True},
        ("marabou", "a.onnx", "p.vnnlib"): {"result": "unsat", "wall": 2.0},
        # b: only the peer's word: nobody is counted wrong
        ("exactmax", "b.onnx", "p.vnnlib"): {"result": "unknown", "wall": 116.0},
        ("marabou", "b.onnx", "p.vnnlib"): {"result": "unsat", "wall": 3.0},
        # c: a kernel-checked unsat against a peer's counterexample that does not replay
        ("exactmax", "c.onnx", "p.vnnlib"): {"result": "unsat", "wall": 5.0, "backed": True,
                                             "kernel_s": 1.0, "time_s": 4.0},
        ("marabou", "c.onnx", "p.vnnlib"): {"result": "sat", "wall": 1.0, "backed": False},
    }
    out = harness.summarise(rows, ["exactmax", "marabou"], runs)
    lines = {line.split(" | ")[0].strip("| "): line for line in out.splitlines()}
    assert lines["exactmax"].split(" | ")[5] == "0"  # wrong
    assert lines["marabou"].split(" | ")[5] == "2"
    assert lines["exactmax"].split(" | ")[6] == "122.0"  # total time, the unknown included
    assert "a.onnx p.vnnlib: exactmax sat, marabou unsat (exact: sat)" in out
    assert "c.onnx p.vnnlib: exactmax unsat, marabou sat (exact: unsat)" in out
    assert "b.onnx" not in out.split("Disagreements")[1]
    assert "the kernel's check 1.0 s of 4.0 s (25%)" in out
