"""Decide a VNN-LIB property of a Maxout network: sat (an exact counterexample the kernel
evaluated), unsat (a certificate ``kernel/property.py`` accepted) or unknown (the reason).

Untrusted producer.  First a counterexample search: the centre, the vertices (up to 2^12)
and random points of each case's input box, then a local search around the best points, all
in floats; every candidate is made exact (a float is the dyadic rational it denotes), kept in
the input set exactly, and evaluated by the kernel's ``evaluate_maxout``.  The gradient runs
stop after QUICK_RUNS for a quick proof (a relaxed tree of at most QUICK_SPLITS splits, within
QUICK_SHARE of the limit): an unsat instance of one cell is answered there; otherwise the other
runs follow, then the full trees.  Then, case by case, a split tree built by the engine
(``engine/relaxation.py``'s relaxed leaves where they apply, else ``engine/casetree.py``'s
Max-choice builder; in this process, or from work units, ``engine/parallel.py``), and the
kernel's check of every tree.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import interruption
from ..engine.casetree import Violated, _margins, build_case_tree, violation
from ..engine.certify import Limits, NoCertificate
from ..engine.floatlp import unknown_beyond_floats
from ..engine.parallel import DEFAULT_SPLIT_DEPTH, check_map, split_case_trees
from ..engine.relaxation import build_relaxed_tree
from ..kernel.errors import CheckFailed
from ..kernel.maxout import MaxoutNetwork
from ..kernel.polyhedron import Box
from ..kernel.program import program_of_maxout
from ..kernel.property import check_property
from ..kernel.rational import Q
from ..search.gradient import CYCLES, LEAKS, FloatNetwork, Target, attack


@dataclass
class Answer:
    result: str  # "sat", "unsat" or "unknown"
    x: tuple | None = None  # sat: the exact counterexample
    y: tuple | None = None  # sat: f(x), evaluated by the kernel
    where: tuple | None = None  # sat: (case, conjunction)
    margin: Q | None = None  # sat: min over the conjunction's rows
    trees: tuple | None = None  # unsat: one tree per case, checked by the kernel
    reason: str | None = None
    stats: dict = field(default_factory=dict)


# ----------------------------------------------------------------------- the search


def _exact_point(x, box: Box):
    return tuple(
        min(max(Q(*float(v).as_integer_ratio()), lo), hi)
        for v, lo, hi in zip(x, box.lower, box.upper)
    )


GRADIENT_SHARE = 0.25  # of the search's remaining time, for the gradient runs
HIGH_DIMENSION = 12  # above: no vertices, and a sixth of the random search's rounds
SEED = 0  # of the search in decide_property
QUICK_RUNS = 1  # gradient runs before the quick proof, the others after it (MNIST: 3.5 s a run)
QUICK_SPLITS: int | None = 2  # the quick proof: a relaxed tree of at most this many splits
QUICK_SHARE = 0.03  # ... built within this share of the time limit


def _box_around(P) -> Box | None:
    """A box that contains P = {x : A x <= b}, from P's rows on one variable (VNN-LIB's
    polyhedral input sets state every variable's bounds so), or None if some variable has
    no such row on one side.  For the searches: their points are re-checked against P."""
    lower: list = [None] * P.dim
    upper: list = [None] * P.dim
    for a, c in zip(P.A, P.b):
        nz = [i for i, v in enumerate(a) if v]
        if len(nz) != 1:
            continue
        i = nz[0]
        bound = c / a[i]
        if a[i] > 0:
            upper[i] = bound if upper[i] is None else min(upper[i], bound)
        else:
            lower[i] = bound if lower[i] is None else max(lower[i], bound)
    if None in lower or None in upper or any(lo > hi for lo, hi in zip(lower, upper)):
        return None
    return Box(tuple(lower), tuple(upper))


def search_counterexample(
    net: MaxoutNetwork,
    cases,
    boxes,
    deadline: float,
    seed: int = 0,
    samples: int = 2000,
    rounds: int = 60,
    runs: range | None = None,
):
    """An exact counterexample (x, case, conj, y, margin) or None; tries counted in stats.
    ``runs``: the gradient runs to make (``search.gradient.attack``; default all)."""
    f = FloatNetwork(net)
    rng = np.random.default_rng(seed)
    stats = {"points": 0, "exact_checks": 0}
    boxes = [box or _box_around(case.inputs) for case, box in zip(cases, boxes)]
    for case, box in zip(cases, boxes):
        if box is None:
            continue
        lo = np.array([float(v) for v in box.lower])
        hi = np.array([float(v) for v in box.upper])
        d = len(lo)
        pts = [(lo + hi) / 2]
        if d <= HIGH_DIMENSION:
            corners = ((np.arange(2**d)[:, None] >> np.arange(d)) & 1).astype(float)
            pts += list(lo + corners * (hi - lo))
        X = np.vstack(pts + [lo + rng.random((samples, d)) * (hi - lo)])
        for conj in case.outputs:
            best = X
            # in many dimensions random kids rarely improve: the gradient runs do the work
            for r in range(rounds if d <= HIGH_DIMENSION else rounds // 6):
                if time.monotonic() > deadline:
                    return None, stats
                interruption.check()
                m = _margins(conj, best, f(best))
                stats["points"] += len(best)
                order = np.argsort(-m)[:20]
                for i in order[:3]:
                    if m[i] >= 0:
                        stats["exact_checks"] += 1
                        x = _exact_point(best[i], box)
                        cn, cj, y, margin = violation(net, cases, x)
                        if cn is not None:
                            return (x, cn, cj, y, margin), stats
                top = best[order]
                scale = (hi - lo) * (0.5 ** (r / 6 + 1))
                kids = top[rng.integers(0, len(top), 400)] + rng.normal(size=(400, d)) * scale
                best = np.vstack([top, np.clip(kids, lo, hi)])
    return _gradient_search(net, f, cases, boxes, _share(deadline), seed, stats, runs), stats


def _share(deadline: float) -> float:
    """The gradient runs' deadline: GRADIENT_SHARE of the search's remaining time."""
    now = time.monotonic()
    return min(deadline, now + GRADIENT_SHARE * max(deadline - now, 0.0))


def _gradient_search(net, f, cases, boxes, deadline, seed, stats, runs=None):
    """Projected gradient ascent on every case (all its conjunctions at once) until the deadline
    (``search.gradient``), in ``boxes`` (per case, a box around its input set, or None: not
    searched); each proposal is clipped into the case's box exactly and
    re-checked by ``violation``.  An exact counterexample (x, case, conj, y, margin) or None."""
    targets, where = [], []
    for case, box in zip(cases, boxes):
        if box is None:
            continue
        A = np.array([[float(v) for v in row] for row in case.inputs.A]).reshape(-1, len(box.lower))
        b = np.array([float(v) for v in case.inputs.b])
        conjs = [conj for conj in case.outputs if conj]
        if not conjs:
            continue
        R = tuple(np.array([[float(v) for v in r.a] for r in conj]) for conj in conjs)
        r = tuple(np.array([float(r.c) for r in conj]) for conj in conjs)
        lo = np.array([float(v) for v in box.lower])
        hi = np.array([float(v) for v in box.upper])
        targets.append(Target(R, r, A, b, lo, hi))
        where.append(box)
    stats.setdefault("gradient_runs", 0)
    for n, point in attack(f, targets, deadline, seed, stats, runs):
        interruption.check()
        stats["exact_checks"] += 1
        x = _exact_point(point, where[n])
        cn, cj, y, margin = violation(net, cases, x)
        if cn is not None:
            stats["found_by_gradient"] = True
            return x, cn, cj, y, margin
    return None


PARALLEL_CHECK_LEAVES = 16
"""Trees of fewer leaves are checked in this process: shipping them would cost more."""


@unknown_beyond_floats(Answer)
def decide_property(
    net: MaxoutNetwork,
    prop,
    timeout_s: float = 60.0,
    max_leaves: int = 20000,
    search: bool = True,
    progress=None,
    relaxed: bool = True,
    build=None,
    check_run=None,
) -> Answer:
    """sat / unsat / unknown for the property ``prop`` (``io.vnnlib.VnnProperty``): the search,
    then the trees of every case, then the kernel's check.  ``build`` makes the trees
    (default ``build_trees``, in this process; ``decide_property_split`` passes one that uses
    work units) with the same arguments and answers; ``check_run``: a ``map`` that runs the
    kernel's check of pieces of the trees (``kernel.property.check_case``), e.g. on the
    workers' processes."""
    start = time.monotonic()
    deadline = start + timeout_s
    search_until = min(deadline, start + max(1.0, timeout_s / 4))
    stats: dict = {}
    boxes = prop.boxes or (None,) * len(prop.cases)
    # the quick proof: after the random search and QUICK_RUNS gradient runs, a small relaxed
    # tree; most unsat instances need one cell (ACAS Xu properties 3 and 4), and their
    # remaining gradient runs (9 of 10: about 3 s) would be spent for nothing
    quick = search and relaxed and QUICK_SPLITS is not None

    def sat(found, how):
        x, n, j, y, margin = found
        stats["found_by"] = how
        return Answer("sat", x, y, (n, j), margin, stats=stats)

    if search:
        runs = range(QUICK_RUNS) if quick else None
        found, s = search_counterexample(net, prop.cases, boxes, search_until, SEED, runs=runs)
        stats["search"] = s
        if found is not None:
            return sat(found, "gradient search" if s.get("found_by_gradient") else "search")

    def confirm(x):
        cn, cj, y, margin = violation(net, prop.cases, x)
        return None if cn is None else Answer("sat", x, y, (cn, cj), margin)

    if quick:  # a small proof first: most unsat instances need one cell, so skip the rest
        t0 = time.monotonic()
        what, value, s = build_trees(
            net,
            prop,
            boxes,
            min(deadline, t0 + QUICK_SHARE * timeout_s),
            confirm,
            max_leaves,
            None,
            relaxed,
            max_splits=QUICK_SPLITS,
        )
        stats["quick_proof"] = {"s": round(time.monotonic() - t0, 3), "result": what}
        if what == "point":
            value.stats = stats | {"found_by": "certificate"}
            return value
        if what == "trees":
            stats.update(s)
            return _checked(net, prop, value, stats, check_run)
        f = FloatNetwork(net)
        found = _gradient_search(
            net,
            f,
            prop.cases,
            boxes,
            _share(search_until),
            SEED,  # the first runs' seed: runs 1-9 are those one call would make
            stats["search"],
            range(QUICK_RUNS, len(LEAKS) * CYCLES),
        )
        if found is not None:
            return sat(found, "gradient search")

    what, value, s = (build or build_trees)(
        net, prop, boxes, deadline, confirm, max_leaves, progress, relaxed
    )
    stats.update(s)
    if what == "point":
        value.stats = stats | {"found_by": "certificate"}
        return value
    if what == "unknown":
        return Answer("unknown", reason=value, stats=stats)
    return _checked(net, prop, value, stats, check_run)


def _checked(net, prop, trees, stats, check_run) -> Answer:
    """unsat if the kernel accepts the trees (``check_property``), else unknown (a producer
    bug: never trusted, reported)."""
    try:
        t0 = time.monotonic()
        # the kernel's check in pieces on check_run (a process pool's map) when the trees are big
        run = check_run if stats.get("leaves", 0) >= PARALLEL_CHECK_LEAVES else None
        with interruption.phase("the kernel's check of the certificate"):
            stats["leaves_checked"] = check_property(net, prop.cases, tuple(trees), run)
        stats["kernel_check_s"] = round(time.monotonic() - t0, 3)
        stats["kernel_check_in_pieces"] = run is not None
    except CheckFailed as e:
        return Answer("unknown", reason=f"the kernel rejected the certificate ({e})", stats=stats)
    return Answer("unsat", trees=tuple(trees), stats=stats)


def build_trees(
    net, prop, boxes, deadline, confirm, max_leaves, progress, relaxed, max_splits=None
):
    """("trees", one tree per case, stats), ("point", confirm's answer, stats) when a cell
    reaches a forbidden output at a point the kernel confirms, or ("unknown", reason, stats):
    in this process, each case by ``build_relaxed_tree`` (if ``relaxed``), else by
    ``build_case_tree``."""
    p = program_of_maxout(net)
    trees: list = []
    stats: dict[str, Any] = {"leaves": 0, "splits": 0, "proofs": {}}
    fnet = FloatNetwork(net)

    def centre(case):
        def check(x):
            X = np.array([[float(v) for v in x]])
            Y = fnet(X)
            if any(_margins(conj, X, Y)[0] > -1e-9 for conj in case.outputs):
                if violation(net, (case,), x)[0] is not None:
                    raise Violated(x)

        return check

    for n, (case, box) in enumerate(zip(prop.cases, boxes)):
        try:
            limits = Limits(deadline, max_leaves, progress, max_splits)
            built = build_relaxed_tree(p, case, limits, centre(case)) if relaxed else None
            if built is None and max_splits is not None:
                return "unknown", f"case {n}: no relaxed tree", stats
            tree, s = built or build_case_tree(p, case, box, limits)
        except Violated as e:
            found = confirm(e.x)
            if found is not None:
                return "point", found, stats
            return (
                "unknown",
                (
                    "a cell reaches a forbidden output, but the point z3 gave was "
                    "not confirmed by the kernel"
                ),
                stats,
            )
        except NoCertificate as e:
            return "unknown", f"case {n}: {e}", stats
        trees.append(tree)
        stats["leaves"] += s["leaves"]
        stats["splits"] += s["splits"]
        for k, v in s["proofs"].items():  # how the Max choices were proved
            stats["proofs"][k] = stats["proofs"].get(k, 0) + v
    return "trees", trees, stats


@unknown_beyond_floats(Answer)
def decide_property_split(
    net,
    prop,
    timeout_s: float,
    max_leaves: int,
    search: bool,
    executor: cf.Executor,
    depth: int = DEFAULT_SPLIT_DEPTH,
    unit_cells: int | None = None,
    progress_shown: bool = False,
    relaxed: bool = True,
):
    """``decide_property`` with the trees built from work units (``engine.parallel``'s
    ``split_case_trees`` for all cases at once): the same search, answers and kernel check.
    ``relaxed`` False: no relaxed leaves (a certificate export-coq takes)."""
    from ..io.models import model_to_json

    def build(net, prop, boxes, deadline, confirm, max_leaves, progress, relaxed):
        return split_case_trees(
            "maxout",
            [model_to_json(net)],
            list(prop.cases),
            list(boxes),
            net.input_dim,
            deadline,
            max_leaves,
            executor,
            depth,
            unit_cells,
            confirm,
            progress_shown,
            relaxed,
        )

    return decide_property(
        net,
        prop,
        timeout_s,
        max_leaves,
        search,
        relaxed=relaxed,
        build=build,
        check_run=check_map(executor),
    )
