"""Work units (#21, engine/parallel.py): tree builders with a cell budget hand back their open
cells, which are solved as units on an Executor (this process, a process pool, a Dask
cluster) and put in place; the certificate is the same byte for byte whatever the workers
(and the same as one uninterrupted walk's); a placeholder left in or a subtree in the wrong
place is rejected by the kernel; a counterexample found in a worker, an unknown unit, a bad
scheduler, and an interrupted run that leaves no worker behind."""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest
from test_epsilon import pruned, random_relu, relu_net, write
from test_property import _deep_relu_net

from exactmax.cli import main
from exactmax.engine import parallel
from exactmax.engine.casetree import OpenCell, build_case_tree
from exactmax.engine.certify import Limits
from exactmax.engine.relaxation import OpenBox, build_relaxed_tree
from exactmax.io.models import model_to_json
from exactmax.io.vnnlib import read_vnnlib
from exactmax.kernel.certificate import Split
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.maxout import evaluate_maxout
from exactmax.kernel.program import program_of_maxout
from exactmax.kernel.property import check_case
from exactmax.kernel.rational import Q
from exactmax.prove.property import decide_property_split

HEAD = "".join(f"(declare-const X_{i} Real)\n(assert (>= X_{i} -1)) (assert (<= X_{i} 1))\n"
               for i in range(3)) + "(declare-const Y_0 Real)\n"


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A 3-layer ReLU network (3 inputs, widths 6) and properties Y_0 >= 9 (unsat: 5
    relaxed leaves, 134 cells of the Max-choice builder) and Y_0 >= 7.3 (sat, found only
    inside units)."""
    d = tmp_path_factory.mktemp("parallel")
    net = _deep_relu_net(7)
    (d / "net.json").write_text(json.dumps(model_to_json(net)))
    (d / "unsat.vnnlib").write_text(HEAD + "(assert (>= Y_0 9))\n")
    (d / "sat.vnnlib").write_text(HEAD + "(assert (>= Y_0 7.3))\n")
    return d


def check(files, *flags, prop="unsat.vnnlib", cells="2"):
    r = run("check", files / "net.json", files / prop, "--no-search", "--unit-cells", cells,
            "--json", *flags)
    return r, json.loads(r.stdout) if r.stdout else None


def _case(files):
    prop = read_vnnlib(str(files / "unsat.vnnlib"))
    return program_of_maxout(_deep_relu_net(7)), prop.cases[0], prop.boxes[0]


def _holes(tree, out):
    """The placeholders of a builder's tree, depth first (ge before lt)."""
    if isinstance(tree, OpenCell | OpenBox):
        out.append(tree)
    elif isinstance(tree, Split):
        _holes(tree.ge, out)
        _holes(tree.lt, out)
    return out


def _put(tree, subtrees):
    """The tree with its placeholders replaced, in order, by ``subtrees`` (an iterator)."""
    if isinstance(tree, OpenCell | OpenBox):
        return next(subtrees)
    if isinstance(tree, Split):
        return Split(tree.a, tree.c, _put(tree.ge, subtrees), _put(tree.lt, subtrees),
                     tree.choices)
    return tree


@pytest.mark.parametrize("relaxed", [False, True])
def test_hand_back_and_resume_give_the_tree_of_one_walk(files, relaxed):
    """A builder with a cell budget hands back the finished part of its tree with a
    placeholder per open cell; resuming at each open cell (itself with the budget) and putting
    the subtrees in place gives the tree of the uninterrupted walk, which the kernel accepts;
    a placeholder left in, or two subtrees swapped, is rejected."""
    p, case, box = _case(files)
    limits = Limits(time.monotonic() + 120)
    budget = 1 if relaxed else 16

    def build(start=None, budget=budget):
        if relaxed:
            return build_relaxed_tree(p, case, limits, lambda x: None, budget, start)
        return build_case_tree(p, case, box, limits, budget=budget, start=start)

    units = []

    def by_units(start=None):
        tree, s = build(start)
        assert s["leaves"] <= budget and s["open"] == len(_holes(tree, []))
        units.append(s["open"])
        # through JSON, as units travel
        opens = [parallel.open_of(json.loads(json.dumps(parallel.open_json(o))))
                 for o in _holes(tree, [])]
        assert opens == _holes(tree, [])
        return _put(tree, iter([by_units(o) for o in opens]))

    whole, s = build(budget=None)
    assembled = by_units()
    assert len(units) >= 4 and units[0] >= 2
    assert assembled == whole
    assert check_case(p, case, assembled) == s["leaves"]
    first, _ = build()
    with pytest.raises(CheckFailed, match="not Empty, Excluded or Relaxed"):
        check_case(p, case, first)
    subs = [by_units(o) for o in _holes(first, [])]
    assert check_case(p, case, _put(first, iter(subs))) == s["leaves"]
    with pytest.raises(CheckFailed):
        check_case(p, case, _put(first, iter([subs[1], subs[0]] + subs[2:])))


def test_an_open_box_too_deep_for_the_relaxation_is_solved_by_the_max_choice_builder(
        files, monkeypatch):
    """A unit at an open box that the relaxed builder gives up on (deeper than its
    MAX_DEPTH) is solved, through JSON as on a worker, by the Max-choice builder from that
    box with no maps known (the relaxed tree states no choices above it): the subtrees put
    in place give a tree the kernel accepts."""
    from exactmax.engine import relaxation
    p, case, box = _case(files)
    first, _ = build_relaxed_tree(p, case, Limits(time.monotonic() + 120), lambda x: None, 1)
    holes = _holes(first, [])
    assert holes and all(o.depth >= 1 for o in holes)
    monkeypatch.setattr(relaxation, "MAX_DEPTH", 0)
    models = [model_to_json(_deep_relu_net(7))]
    subs = []
    for o in holes:
        text = parallel.unit_text("maxout", models, case, parallel.Cell(0, ()), box,
                                  time.time() + 120, 20000, True, (10**6, 10**6),
                                  parallel.open_json(o))
        what, tree, (stats, opens) = parallel.read_answer(parallel.solve_unit(text))
        assert what == "tree" and opens == [] and "relaxed" not in stats["proofs"]
        subs.append(parallel.tree_of(tree))
        # solved in this process: the same tree as objects, no JSON round trip
        assert parallel.solve_unit(text, None, True)[:2] == ("tree", subs[-1])
    assert check_case(p, case, _put(first, iter(subs))) > len(holes)


def test_the_certificate_is_the_same_for_1_and_2_workers(files, tmp_path):
    """The same bytes for one unit (a budget above the cells needed), and for units of 2
    cells on 1 and 2 workers."""
    certs = []
    for w, cells in ((1, "100000"), (1, "2"), (2, "2")):
        cert = tmp_path / f"c{w}-{cells}.json"
        r, out = check(files, "--workers", w, "--cert", cert, cells=cells)
        assert r.returncode == 0 and out["verdict"] == "unsat", r.stdout + r.stderr
        if cells == "2":
            assert out["stats"]["units"] >= 3 and out["stats"]["units_handed_back"] >= 1
        else:
            assert out["stats"]["units"] == 1
        certs.append(cert.read_bytes())
    assert certs[0] == certs[1] == certs[2]
    assert run("check-cert", tmp_path / "c2-2.json").returncode == 0
    # the assembled tree is checked as a whole: its first split moved is rejected
    doc = json.loads(certs[2])
    top = doc["cases"][0]
    assert "split" in top and not top["choices"]
    top["split"]["c"] = str(Q(top["split"]["c"]) + Q(1, 2))
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    r = run("check-cert", tmp_path / "bad.json")
    assert r.returncode == 1 and r.stdout.startswith("rejected"), r.stdout


def test_the_max_choice_builder_by_units_on_2_workers(files, tmp_path):
    """check --no-relax: units of the Max-choice builder (maps and choices carried to the
    open cells), the same certificate as one unit."""
    certs = []
    for w, cells in ((1, "100000"), (2, "16")):
        cert = tmp_path / f"n{w}.json"
        r, out = check(files, "--workers", w, "--cert", cert, "--no-relax", cells=cells)
        assert r.returncode == 0 and out["verdict"] == "unsat", r.stdout + r.stderr
        certs.append(cert.read_bytes())
    assert out["stats"]["units"] >= 8 and out["stats"]["leaves"] == 134
    assert certs[0] == certs[1]


def _with_rank3(doc: dict, weight: str) -> dict:
    """The network with one more hidden unit, max(x_0, -x_0, x_last) (a Maxout unit of rank 3,
    not a ReLU), read by every output with ``weight``: no delta rows
    (``engine/differential.py``: ReLU networks only) relate it to a ReLU network."""
    d = doc["input_dim"]
    e = lambda j, v: [v if t == j else "0" for t in range(d)]   # noqa: E731
    doc["layers"][0]["units"].append({"pieces": [{"w": e(0, "1"), "b": "0"},
                                                 {"w": e(0, "-1"), "b": "0"},
                                                 {"w": e(d - 1, "1"), "b": "0"}]})
    doc["output"]["W"] = [r + [weight] for r in doc["output"]["W"]]
    return doc


def _epsilon_certificates(tmp_path, B: str, epsilon: str, cells: str) -> list[tuple]:
    """(the --json answer, the certificate's bytes) of equiv --epsilon of a.json and B with one
    unit for the whole tree, then ``cells`` cells a unit on 1 and on 2 workers."""
    out = []
    for w, c in ((1, "100000"), (1, cells), (2, cells)):
        cert = tmp_path / f"{w}-{c}.json"
        r = run("equiv", tmp_path / "a.json", B, "--epsilon", epsilon, "--unit-cells", c,
                "--no-search", "--workers", w, "--json", "--cert", cert)
        answer = json.loads(r.stdout)
        assert r.returncode == 0 and answer["verdict"] == "proved", r.stdout
        out.append((answer, cert.read_bytes()))
    return out


def test_epsilon_certificates_are_the_same_for_1_and_2_workers(tmp_path):
    """equiv --epsilon: units solved by the Max-choice tree builder (no relaxed leaves)."""
    pa = random_relu(3)
    write(tmp_path, "a.json", relu_net(*pa, [-2], [2]))
    B = write(tmp_path, "b.json", _with_rank3(relu_net(*pruned(pa, 4), [-2], [2]), "1/8"))
    runs = _epsilon_certificates(tmp_path, B, "1000", "2")
    assert [out["stats"]["units"] >= n for (out, _), n in zip(runs, (1, 3, 3))] == [True] * 3
    assert runs[0][1] == runs[1][1] == runs[2][1]


def test_differential_certificates_are_the_same_for_1_and_2_workers(tmp_path):
    """equiv --epsilon of a pruned twin: units of relaxed leaves with delta rows, one leaf a
    unit; the assembled certificate is the same whatever the workers."""
    pa = random_relu(3)
    write(tmp_path, "a.json", relu_net(*pa, [-2], [2]))
    B = write(tmp_path, "b.json", relu_net(*pruned(pa, 4), [-2], [2]))
    runs = _epsilon_certificates(tmp_path, B, "17/2", "1")
    for (out, _), units in zip(runs, (1, 2, 2)):
        assert out["stats"]["proofs"] == {"relaxed": out["stats"]["leaves"]} != {"relaxed": 1}
        assert out["stats"]["units"] == units
    assert runs[0][1] == runs[1][1] == runs[2][1]


def test_a_counterexample_found_in_a_worker(files, tmp_path):
    cex = tmp_path / "cex.txt"
    r, out = check(files, "--workers", "2", "--counterexample", cex, prop="sat.vnnlib",
                   cells="1")
    assert r.returncode == 1 and out["verdict"] == "sat", r.stdout + r.stderr
    assert out["stats"]["found_by"] == "certificate" and out["stats"]["units"] > 1
    x = tuple(Q(v) for v in out["x"])
    prop = read_vnnlib(str(files / "sat.vnnlib"))
    assert prop.cases[0].inputs.contains(x)
    assert evaluate_maxout(_deep_relu_net(7), x)[0] >= Q(73, 10)
    assert run("replay", files / "net.json", files / "sat.vnnlib", cex).returncode == 0


class _OneUnitUnknown(cf.Executor):
    """Runs units here, but answers "unknown" for the cell ``path`` (as a worker whose z3
    gave up would)."""

    def __init__(self, path: str):
        self.path, self.seen = path, []

    def submit(self, fn, text):
        f: cf.Future = cf.Future()
        cell = json.loads(text)["cell"]
        self.seen.append(cell)
        f.set_result(json.dumps({"unknown": "z3 could not decide a cell"})
                     if cell == self.path else fn(text))
        return f


def test_an_unknown_unit_makes_the_answer_unknown(files):
    net = _deep_relu_net(7)
    prop = read_vnnlib(str(files / "unsat.vnnlib"))
    ex = _OneUnitUnknown("case 0, cell root, open cell 1")
    a = decide_property_split(net, prop, 60, 20000, False, ex, 0, 2)
    assert a.result == "unknown" and a.trees is None
    assert a.reason == "case 0, cell root, open cell 1: z3 could not decide a cell"
    assert "case 0, cell root, open cell 0" in ex.seen   # the other open cell was solved
    # the same query without the tampering is unsat: the unknown came from that unit
    a = decide_property_split(net, prop, 60, 20000, False, parallel.InlineExecutor(), 0, 2)
    assert a.result == "unsat"
    # the cell budget across units
    r, out = check(files, "--workers", "2", "--max-leaves", "3")
    assert r.returncode == 3 and out["reason"] == "more than 3 cells in all"


def test_usage_errors_are_one_line(files):
    for flags in (["--scheduler", "tcp://127.0.0.1:9"], ["--workers", "0"],
                  ["--workers", "2", "--scheduler", "tcp://127.0.0.1:9"],
                  ["--unit-cells", "0"], ["--split-depth", "13"]):
        r = run("check", files / "net.json", files / "unsat.vnnlib", *flags)
        assert r.returncode == 2, (flags, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("exactmax: error: "), lines
    net = files / "net.json"       # plain equality runs in this process: the options are refused
    for flags in (["--workers", "2"], ["--split-depth", "1"], ["--scheduler", "tcp://h:1"]):
        r = run("equiv", net, net, *flags)
        assert r.returncode == 2 and "go with --epsilon or --top1" in r.stderr, (flags, r.stderr)
    if parallel_dask_installed():
        assert "cannot reach a Dask scheduler at tcp://127.0.0.1:9" in run(
            "check", files / "net.json", files / "unsat.vnnlib", "--scheduler",
            "tcp://127.0.0.1:9").stderr


def parallel_dask_installed() -> bool:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


def test_a_dask_local_cluster_gives_the_same_certificate(files, tmp_path):
    if not parallel_dask_installed():
        pytest.skip("dask.distributed is not installed (pip install '.[dask]')")
    from dask.distributed import LocalCluster
    r, _ = check(files, "--workers", "1", "--cert", tmp_path / "one.json")
    assert r.returncode == 0
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        r, out = check(files, "--scheduler", cluster.scheduler_address,
                       "--cert", tmp_path / "dask.json")
    assert r.returncode == 0 and out["verdict"] == "unsat", r.stdout + r.stderr
    assert out["stats"]["units"] >= 3 and out["stats"]["units_handed_back"] >= 1
    assert (tmp_path / "dask.json").read_bytes() == (tmp_path / "one.json").read_bytes()


def _children(pid: int) -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(p))
            except (OSError, IndexError, ValueError):
                pass
    return out


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_coordinator_and_its_workers(tmp_path, sig):
    """A run with units on 2 workers (a network too large for its units to finish soon) is
    stopped by SIGINT / SIGTERM within a few seconds, and no worker process is left."""
    rng = np.random.default_rng(0)
    d, w = 5, 40
    W1 = rng.integers(-8, 9, (w, d)) / 8
    b1 = rng.integers(-8, 9, w) / 8
    W2 = rng.integers(-8, 9, (1, w)) / 8
    A = write(tmp_path, "a.json", relu_net(W1.tolist(), b1.tolist(), W2.tolist(), [0],
                                           [-1] * d, [1] * d))
    W1b = W1.copy()
    W1b[0, 0] += 1 / 8   # and a unit of rank 3: no delta rows, the Max-choice builder
    B = write(tmp_path, "b.json", _with_rank3(relu_net(W1b.tolist(), b1.tolist(), W2.tolist(),
                                                       [0], [-1] * d, [1] * d), "1/64"))
    p = subprocess.Popen([sys.executable, "-m", "exactmax", "equiv", A, B, "--epsilon", "1/2",
                          "--no-search", "--unit-cells", "1", "--workers", "2",
                          "--timeout", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and p.poll() is None:
            # the forkserver (a child) and a worker at least (the workers are its children)
            if len({k for c in _children(p.pid) for k in [c, *_children(c)]}) >= 2:
                break
            time.sleep(0.2)
        assert p.poll() is None, p.communicate()
        time.sleep(1.0)
        workers = {k for c in _children(p.pid) for k in [c, *_children(c)]}
        assert len(workers) >= 2, workers   # the signal reaches a run with workers
        t0 = time.monotonic()
        p.send_signal(sig)
        p.wait(timeout=10)
        assert time.monotonic() - t0 < 5
        assert p.returncode == (130 if sig == signal.SIGINT else 143)
        time.sleep(0.5)
        alive = [k for k in workers if os.path.exists(f"/proc/{k}") and
                 open(f"/proc/{k}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"]
        assert not alive, alive
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_units_of_a_process_pool_name_the_models_written_once(files, tmp_path, monkeypatch):
    """The models go to a file once (SharedModels); a unit names them by hash and carries
    none; its answer is the one the unit with the models inline gives; a file whose content
    is not the named one makes the unit's answer unknown, never another model's tree."""
    p, case, box = _case(files)
    models = [model_to_json(_deep_relu_net(7))]
    shared = parallel.SharedModels.of("maxout", models, str(tmp_path))
    args = ("maxout", models, case, parallel.Cell(0, ()), box, time.time() + 120, 20000, True,
            (10**6, 10**6), None, None)
    inline = parallel.unit_text(*args)
    named = parallel.unit_text(*args, shared, False)
    u = json.loads(named)
    assert "models" not in u and u["models_sha256"] == shared.sha256
    assert len(named) < len(inline) / 3
    monkeypatch.setattr(parallel, "_programs", {})
    def answer(text):  # the tree and open cells, not the timings
        what, tree, (stats, opens) = parallel.read_answer(parallel.solve_unit(text))
        return what, tree, opens, stats["leaves"]

    expect = answer(inline)
    assert expect[0] == "tree"
    monkeypatch.setattr(parallel, "_programs", {})
    assert answer(named) == expect
    assert shared.sha256 in parallel._programs  # the worker's cache: later units read nothing
    os.remove(shared.path)
    assert answer(named) == expect
    monkeypatch.setattr(parallel, "_programs", {})
    other = [model_to_json(_deep_relu_net(8))]
    with open(shared.path, "w") as f:
        f.write(json.dumps(["maxout", other], separators=(",", ":")))
    what, reason, _ = parallel.read_answer(parallel.solve_unit(named))
    assert what == "unknown" and "hash" in reason
    os.remove(shared.path)
    what, reason, _ = parallel.read_answer(parallel.solve_unit(named))
    assert what == "unknown" and "cannot be read" in reason
