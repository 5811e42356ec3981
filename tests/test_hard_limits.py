"""``--timeout`` is a hard limit in every phase of ``check`` (reading the files, the work units,
the kernel's check, writing), and SIGINT / SIGTERM end any phase within a second, even one
long C call that holds the GIL (``onnx.load``, FLINT's product of the weight matrices while a
large ONNX network is imported): the answer is "unknown", exit 3, naming the phase, or
"exactmax: interrupted", exit 130 / 143; no output file, no temporary file is left behind."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from exactmax.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NET = os.path.join(ROOT, "examples", "small_relu.onnx")
UNSAT = os.path.join(ROOT, "examples", "small_relu_unsat.vnnlib")


def wide_network(folder, n_in=1000, width=1500):
    """A one-hidden-layer ReLU network in ONNX (MatMul, Add, Relu, MatMul) whose import takes
    seconds (1,500,000 weights turned into exact rationals and multiplied out), and a property
    over its whole input box (Y_0 >= 10^6, far beyond any output)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(size=s).astype(np.float32), n)
             for n, s in (("W0", (n_in, width)), ("b0", (width,)), ("W1", (width, 2)))]
    nodes = [helper.make_node("MatMul", ["x", "W0"], ["h"]),
             helper.make_node("Add", ["h", "b0"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("MatMul", ["r", "W1"], ["y"])]
    graph = helper.make_graph(
        nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n_in])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    net = os.path.join(folder, "wide.onnx")
    onnx.save(model, net)
    prop = os.path.join(folder, "wide.vnnlib")
    with open(prop, "w") as f:
        f.writelines(f"(declare-const X_{i} Real)\n" for i in range(n_in))
        f.write("(declare-const Y_0 Real)\n(declare-const Y_1 Real)\n")
        f.writelines(f"(assert (>= X_{i} -1))\n(assert (<= X_{i} 1))\n" for i in range(n_in))
        f.write("(assert (>= Y_0 1000000))\n")
    return net, prop


def start_up_time():
    """Twice the time the interpreter takes to start exactmax on this (possibly loaded)
    machine: a signal sent later lands inside the command."""
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "exactmax", "--help"], capture_output=True)
    return 2 * (time.monotonic() - t0)


def exactmax(args, folder, patch=""):
    """``exactmax ARGS`` in a new process, after the Python lines ``patch`` (which may slow
    a phase down) have run in it."""
    script = os.path.join(folder, "run_exactmax.py")
    with open(script, "w") as f:
        f.write("import sys\n" + patch + "\nfrom exactmax.__main__ import run\n"
                "raise SystemExit(run())\n")
    return subprocess.Popen([sys.executable, script, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=folder)


# one C call that holds the GIL for minutes: no Python signal handler, no timer thread, no
# exception raised asynchronously gets to run until it returns
STUCK_IN_C = "sum(range(10 ** 11))"

SLOW_KERNEL = f"""
import exactmax.prove.property as _p
def _slow(*a, **k):
    sys.stderr.write("the kernel's check starts\\n"); sys.stderr.flush()
    {STUCK_IN_C}
    return _real(*a, **k)
_real, _p.check_property = _p.check_property, _slow
"""

SLOW_ONNX_LOAD = f"""
import onnx
def _slow(*a, **k):
    sys.stderr.write("onnx.load starts\\n"); sys.stderr.flush()
    {STUCK_IN_C}
onnx.load = _slow
"""

# exactmax.io.models sees an os module whose files, once half written, stall in C
SLOW_WRITE = f"""
import os, types, exactmax.io.models as _m
class _Stalling:
    def __init__(self, f): self.f = f
    def __enter__(self): return self
    def __exit__(self, *e): return self.f.__exit__(*e)
    def write(self, data):
        self.f.write(data[: len(data) // 2]); self.f.flush()
        sys.stderr.write("half written\\n"); sys.stderr.flush()
        {STUCK_IN_C}
_os = types.ModuleType("os"); _os.__dict__.update(os.__dict__)
_os.fdopen = lambda *a, **k: _Stalling(os.fdopen(*a, **k))
_m.os = _os
"""


def wait_for(p, line, limit=60):
    """Read the process's standard error up to ``line`` (the patched phase has started)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        got = p.stderr.readline()
        if got == line + "\n":
            return
        assert got, "the process ended before the phase: " + p.stderr.read()
    raise AssertionError(f"no {line!r} within {limit} s")


def files(folder):
    return sorted(n for n in os.listdir(folder) if n != "__pycache__")


def test_a_one_second_timeout_stops_a_long_import_within_two_seconds(tmp_path):
    net, prop = wide_network(tmp_path)
    before = files(tmp_path)
    start = start_up_time() / 2
    t0 = time.monotonic()
    p = exactmax(["check", net, prop, "--timeout", "1", "--json", "--cert", "c.json"],
                 tmp_path)
    out, err = p.communicate(timeout=120)
    took = time.monotonic() - t0 - start
    assert p.returncode == 3, err
    assert took < 2.5, f"answered {took:.1f} s after the start (limit 1 s)"
    answer = json.loads(out)
    assert answer["verdict"] == "unknown" and answer["trust"] is None
    assert answer["phase"].startswith("reading the model")
    assert answer["reason"].startswith("timeout in reading the model")
    assert files(tmp_path) == sorted(before + ["run_exactmax.py"])


@pytest.mark.parametrize("signum, status", [(2, 130), (15, 143)])
def test_a_signal_ends_the_parsing_of_an_onnx_file_within_a_second(tmp_path, signum, status):
    """onnx.load of a file of hundreds of MB is one C call of seconds; here it never ends."""
    p = exactmax(["check", NET, UNSAT, "--cert", "c.json"], tmp_path, SLOW_ONNX_LOAD)
    wait_for(p, "onnx.load starts")
    time.sleep(0.2)
    t0 = time.monotonic()
    p.send_signal(signum)
    try:
        out, err = p.communicate(timeout=20)
    finally:
        p.kill()
    assert p.returncode == status and time.monotonic() - t0 < 1.0, err
    assert out == "" and err.splitlines()[-1].startswith("exactmax: interrupted")
    assert files(tmp_path) == ["run_exactmax.py"]


@pytest.mark.slow
@pytest.mark.parametrize("signum, status", [(2, 130), (15, 143)])
def test_a_signal_ends_a_long_import_within_a_second(tmp_path, signum, status):
    net, prop = wide_network(tmp_path)
    delay = start_up_time() + 0.5
    p = exactmax(["check", net, prop, "--timeout", "300", "--cert", "c.json"], tmp_path)
    time.sleep(delay)
    assert p.poll() is None, "the import ended before the signal: make the network wider"
    t0 = time.monotonic()
    p.send_signal(signum)
    out, err = p.communicate(timeout=60)
    assert p.returncode == status and time.monotonic() - t0 < 1.0, err
    assert out == "" and err.splitlines()[-1].startswith("exactmax: interrupted")
    assert "c.json" not in files(tmp_path)


@pytest.mark.parametrize("signum, status", [(2, 130), (15, 143)])
def test_a_signal_ends_the_kernels_check_within_a_second(tmp_path, signum, status):
    p = exactmax(["check", NET, UNSAT, "--cert", "c.json"], tmp_path, SLOW_KERNEL)
    wait_for(p, "the kernel's check starts")
    time.sleep(0.2)
    t0 = time.monotonic()
    p.send_signal(signum)
    try:
        out, err = p.communicate(timeout=20)
    finally:
        p.kill()
    assert p.returncode == status and time.monotonic() - t0 < 1.0, err
    assert out == "" and err.splitlines()[-1].startswith("exactmax: interrupted")
    assert files(tmp_path) == ["run_exactmax.py"]


def test_the_timeout_holds_in_the_kernels_check_and_the_answer_names_it(tmp_path):
    p = exactmax(["check", NET, UNSAT, "--cert", "c.json", "--timeout", "4"], tmp_path,
                 SLOW_KERNEL)
    wait_for(p, "the kernel's check starts")
    try:
        out, err = p.communicate(timeout=20)
    finally:
        p.kill()
    assert p.returncode == 3, err
    assert out.startswith("unknown: timeout in the kernel's check of the certificate: ")
    assert files(tmp_path) == ["run_exactmax.py"]


@pytest.mark.parametrize("signum, status", [(2, 130), (15, 143)])
def test_a_signal_while_the_certificate_is_written_leaves_no_file(tmp_path, signum, status):
    p = exactmax(["check", NET, UNSAT, "--cert", "c.json"], tmp_path, SLOW_WRITE)
    wait_for(p, "half written")
    assert [n for n in files(tmp_path) if n.startswith(".exactmax-")], "no temporary file"
    t0 = time.monotonic()
    p.send_signal(signum)
    try:
        out, err = p.communicate(timeout=20)
    finally:
        p.kill()
    assert p.returncode == status and time.monotonic() - t0 < 1.0, err
    assert out == ""
    assert files(tmp_path) == ["run_exactmax.py"]


@pytest.mark.slow
def test_the_timeout_holds_while_the_certificate_is_written(tmp_path):
    p = exactmax(["check", NET, UNSAT, "--cert", "c.json", "--timeout", "4", "--json"],
                 tmp_path, SLOW_WRITE)
    wait_for(p, "half written")
    try:
        out, err = p.communicate(timeout=20)
    finally:
        p.kill()
    assert p.returncode == 3, err
    answer = json.loads(out)
    assert answer["verdict"] == "unknown" and answer["phase"] == "writing c.json"
    assert files(tmp_path) == ["run_exactmax.py"]


def test_in_process_a_time_limit_in_a_phase_is_answered_unknown_naming_it(monkeypatch,
                                                                           capsys):
    """Without the supervisor (``main`` called in this process), a phase that runs Python
    code is stopped by the time limit too, and the answer names it."""
    import exactmax.io.vnnlib2 as vnnlib2

    def slow_reader(path):
        t0 = time.monotonic()
        while time.monotonic() - t0 < 10:
            time.sleep(0.01)
        raise AssertionError("the time limit did not stop the reading of the property")

    monkeypatch.setattr(vnnlib2, "read_property", slow_reader)
    t0 = time.monotonic()
    assert main(["check", NET, UNSAT, "--timeout", "1"]) == 3
    assert time.monotonic() - t0 < 2.5
    out = capsys.readouterr().out
    assert out.startswith(f"unknown: timeout in reading the property {UNSAT}: "), out


def test_vnnlib_verify_answers_timed_out_in_any_phase(tmp_path):
    """The solver interface's --timeout is a hard limit too, answered in its own words."""
    query = tmp_path / "q.vnnlib"
    query.write_text("(vnnlib-version <2.0>)\n(declare-network f\n  (declare-input X real [1,2])"
                     "\n  (declare-output Y real [1]))\n(assert (and (<= -1.0 X[0,0]) "
                     "(<= X[0,0] 1.0) (<= -1.0 X[0,1]) (<= X[0,1] 1.0)))\n"
                     "(assert (>= Y[0] 100.0))\n")
    p = exactmax(["vnnlib", "verify", str(query), "--network", f"f={NET}", "--timeout", "2"],
                 tmp_path, SLOW_ONNX_LOAD)
    wait_for(p, "onnx.load starts")
    try:
        out, err = p.communicate(timeout=20)
    finally:
        p.kill()
    assert p.returncode == 0 and out == "timed-out\n", err
    assert err.startswith(f"exactmax: timed-out: timeout in parsing the ONNX file {NET}"), err


def processes_marked(mark):
    """The processes whose environment holds ``mark`` (Linux /proc)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark.encode() in f.read():
                    found.append(int(pid))
        except OSError:  # ended meanwhile, or not ours to read
            pass
    return found


# every process of the run, the pool's workers included, imports this first (PYTHONPATH)
STUCK_UNITS = f"""
import sys
import exactmax.engine.parallel as _par
def _stuck(text, progress=None):
    sys.stderr.write("a unit starts\\n"); sys.stderr.flush()
    {STUCK_IN_C}
_par.solve_unit = _stuck
"""


def in_workers_too(folder, patch):
    """The environment of a run whose every process (a process pool's workers included) runs
    ``patch`` first, and is marked (``processes_marked``)."""
    (folder / "sitecustomize.py").write_text(patch)
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    path = os.pathsep.join([str(folder)] + ([os.environ["PYTHONPATH"]]
                                            if os.environ.get("PYTHONPATH") else []))
    return mark, {**os.environ, "PYTHONPATH": path, "EXACTMAX_TEST_MARK": mark}


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs Linux's /proc")
@pytest.mark.parametrize("signum, status", [(2, 130), (15, 143), (None, 3)])
def test_a_signal_or_the_timeout_during_the_work_units_ends_every_worker(tmp_path, signum,
                                                                         status):
    """Units stuck in C in a pool of 2 workers: a signal, or --timeout 4, ends the run within
    a second, and no worker process is left."""
    work = tmp_path / "work"
    work.mkdir()
    mark, env = in_workers_too(tmp_path, STUCK_UNITS)
    # --no-search: no quick proof either, which answers this small query before any unit
    p = subprocess.Popen([sys.executable, "-m", "exactmax", "check", NET, UNSAT, "--workers",
                          "2", "--split-depth", "2", "--timeout", "4", "--cert", "c.json",
                          "--no-search"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=work,
                         env=env)
    try:
        wait_for(p, "a unit starts")
        assert len(processes_marked(mark)) >= 3, "no worker processes"
        t0 = time.monotonic()
        if signum is not None:
            p.send_signal(signum)
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == status, err
    if signum is not None:
        assert time.monotonic() - t0 < 1.0 and out == ""
    else:
        assert out.startswith("unknown: timeout in the work units"), out
    time.sleep(0.2)  # the kernel reaps the killed processes
    assert processes_marked(mark) == []
    assert os.listdir(work) == []


def test_an_answer_at_the_time_limit_says_how_far_the_search_got(capsys):
    """The child reports its progress (``interruption.note_stats``) to the supervisor, which
    ends it at the deadline whatever it is doing and answers unknown with those stats."""
    from types import SimpleNamespace

    from exactmax import interruption, supervisor

    if not supervisor.available():
        pytest.skip("no supervisor on this platform")

    def body():
        interruption.note_stats(units=3, cells_certified=41)
        interruption.note_stats(cells_certified=42)
        while True:  # a step that never returns: only the supervisor can end it
            time.sleep(0.05)

    seen = {}

    def timed_out(phase, stats):
        seen.update(stats)
        return supervisor.time_limit_answer(SimpleNamespace(json=True), "the limit", 0.0, stats)

    code = supervisor.run(body, time.monotonic() + 0.5, timed_out, lambda data, c: c)
    assert code == 3 and seen == {"units": 3, "cells_certified": 42}
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "unknown" and out["stats"] == seen
    supervisor.time_limit_answer(SimpleNamespace(json=False), "the limit", 0.0, seen)
    assert "so far: units 3, cells certified 42" in capsys.readouterr().out


def test_running_out_of_memory_is_an_unknown_answer_not_a_bug(monkeypatch, capsys, tmp_path):
    import exactmax.construct.command as command

    def too_big(*args):
        raise MemoryError

    monkeypatch.setattr(command, "compile_checked", too_big)
    tent = os.path.join(ROOT, "examples", "tent.json")
    assert main(["compile", tent, "-o", str(tmp_path / "t.json"), "--json"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "unknown" and out["reason"].startswith("out of memory in ")
    assert not (tmp_path / "t.json").exists()
