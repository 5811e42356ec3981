"""Two models equal up to a tolerance on a domain: |A(x) - B(x)|_inf <= E (epsilon-equivalence)
or the same arg max set (top-1 equivalence), decided as a property of the pair program
x -> (A(x), B(x)) (``kernel/pair.py`` states the forbidden output conjunctions).

Untrusted producer.  First a counterexample search: the centre, the vertices (up to 2^12) and
random points of the domain's box, then a local search around the best points, in floats;
the score of a point is the largest over the conjunctions of the least row value (for epsilon,
max_o |A_o(x) - B_o(x)| - E).  Every candidate is made exact (a float is the dyadic rational it
denotes), clipped into the box, and re-evaluated by the kernel's evaluators
(``evaluate_maxout``, ``evaluate_transformer``).  Then ``engine.casetree.build_case_tree``
builds a split tree for the pair program (with every max-like hardmax head as a Max node, its
choices restated for the kernel: ``engine/pair.py``), and the kernel checks it
(``check_pair_property``); for two ReLU networks of one depth on a box, ``engine.differential``
first builds relaxed leaves that bound the difference of corresponding units (the case tree
where it cannot).
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import interruption
from ..engine import differential
from ..engine.casetree import Violated, build_case_tree
from ..engine.certify import Limits, NoCertificate
from ..engine.floatlp import unknown_beyond_floats
from ..engine.pair import programs, restate
from ..engine.parallel import DEFAULT_SPLIT_DEPTH, check_map, split_case_trees
from ..kernel.certificate import domain_rows
from ..kernel.errors import CheckFailed
from ..kernel.maxout import MaxoutNetwork, evaluate_maxout, on_free_inputs
from ..kernel.pair import FreeInputs, check_pair_property, pair_case
from ..kernel.polyhedron import Box
from ..kernel.program import Lin, Max, Program, Unsupported
from ..kernel.rational import Q
from ..kernel.transformer import evaluate_transformer


@dataclass
class Answer:
    verdict: str  # "proved", "refuted" or "unknown"
    x: tuple | None = None  # refuted: the exact point
    outputs: tuple | None = None  # refuted: (A(x), B(x)), evaluated by the kernel
    gap: Q | None = None  # epsilon: max_o |A_o(x) - B_o(x)| at x
    output: int | None = None  # epsilon: an o where that gap is reached
    argmax: tuple | None = None  # top-1: (argmax A(x), argmax B(x)) at x
    tree: object = None  # proved: the tree the kernel accepted
    reason: str | None = None
    stats: dict = field(default_factory=dict)


# ----------------------------------------------------------------------- exact facts


def evaluate(model, x) -> tuple:
    """The model's output at x, by the kernel's evaluator of its kind."""
    f = evaluate_maxout if isinstance(model, MaxoutNetwork) else evaluate_transformer
    return tuple(f(model, x))


def argmax_set(y) -> tuple[int, ...]:
    """The indices i with y_i = max y (every one of them, ties included)."""
    top = max(y)
    return tuple(i for i, v in enumerate(y) if v == top)


def gap_at(ya, yb) -> tuple[Q, int]:
    """(max_o |a_o - b_o|, the first o reaching it)."""
    gaps = [abs(u - v) for u, v in zip(ya, yb)]
    g = max(gaps)
    return g, gaps.index(g)


def refutes(a, b, x, epsilon: Q | None) -> Answer | None:
    """A refuted Answer when, evaluated exactly, the gap at x exceeds epsilon (or, epsilon
    None, the arg max sets differ); None otherwise."""
    ya, yb = evaluate(a, x), evaluate(b, x)
    g, o = gap_at(ya, yb)
    sets = (argmax_set(ya), argmax_set(yb))
    if (g > epsilon) if epsilon is not None else sets[0] != sets[1]:
        return Answer("refuted", tuple(x), (ya, yb), g, o, sets)
    return None


# ----------------------------------------------------------------------- the search


class FloatProgram:
    """A program of Lin and Max nodes in float64 over a batch of points (the search only:
    every answer is re-checked exactly).  The x parts of all Lin nodes are one product with
    the batch (an MNIST pair: 0.41 s -> 0.05 s for 420 points, where each node took its own
    columns of the batch)."""

    def __init__(self, p: Program):
        self.p = p
        self.code: list[tuple[Any, ...]] = []
        lins = [i for i, n in enumerate(p.nodes) if isinstance(n, Lin)]
        row = {i: r for r, i in enumerate(lins)}
        self.Wx = np.zeros((len(lins), p.dim))
        for i, n in enumerate(p.nodes):
            if isinstance(n, Lin):
                for t, v in n.x:
                    self.Wx[row[i], t] += float(v)
                ti = np.array([j for j, _ in n.terms], dtype=int)
                ta = np.array([float(v) for _, v in n.terms])
                self.code.append((0, float(n.c), row[i], ti, ta))
            else:
                assert isinstance(n, Max)  # programs() writes every Hardmax node as a Max
                self.code.append((1, np.array(n.args, dtype=int)))

    def __call__(self, X: np.ndarray) -> np.ndarray:
        V = np.empty((len(self.p.nodes), len(X)))
        XW = self.Wx @ X.T
        for i, c in enumerate(self.code):
            if c[0] == 0:
                _, const, r, ti, ta = c
                V[i] = const + XW[r] + (ta @ V[ti] if len(ti) else 0.0)
            else:
                V[i] = V[c[1]].max(axis=0)
        return V[list(self.p.outputs)].T


class _Scores:
    """max over the conjunctions of the least row value a . (x, y) + c, per point (float); the
    rows are made float once and stacked (a top-1 case has 180 conjunctions over 804 columns
    on MNIST): one product, then the least per conjunction."""

    def __init__(self, conjs):
        rows = [r for conj in conjs for r in conj]
        self.A = np.array([[float(v) for v in r.a] for r in rows])
        self.c = np.array([float(r.c) for r in rows])
        self.starts = np.cumsum([0] + [len(conj) for conj in conjs])[:-1]
        self.everywhere = any(not conj for conj in conjs)  # no rows: it holds at every point

    def __call__(self, X, Y) -> np.ndarray:
        if self.everywhere or not len(self.c):
            return np.full(len(X), np.inf if self.everywhere else -np.inf)
        V = np.hstack([X, Y]) @ self.A.T + self.c
        return np.minimum.reduceat(V, self.starts, axis=1).max(axis=1)


STALL_ROUNDS, STALL_GAIN = 12, 1e-6
"""The search stops when its best float score has not grown by STALL_GAIN (relative) for
STALL_ROUNDS rounds (its steps have shrunk to a quarter); ``polish`` climbs the last part."""


def search(
    a,
    b,
    fp: FloatProgram,
    case,
    box: Box,
    epsilon,
    deadline: float,
    seed: int = 0,
    samples: int = 2000,
    rounds: int = 60,
    starts=None,
    scale0: float = 0.5,
):
    """(a refuted Answer or None, stats, the largest exact gap seen and its point).  From the
    centre, the vertices and random points, or from ``starts`` and random points near them;
    the local search's steps start at ``scale0`` times the box's sides."""
    rng = np.random.default_rng(seed)
    lo = np.array([float(v) for v in box.lower])
    hi = np.array([float(v) for v in box.upper])
    d = len(lo)
    stats: dict[str, float] = {"points": 0, "exact_checks": 0}
    started = time.monotonic()
    best_gap: list = [None, None]
    if starts is None:
        pts = [(lo + hi) / 2]
        if d <= 12:
            corners = ((np.arange(2**d)[:, None] >> np.arange(d)) & 1).astype(float)
            pts += list(lo + corners * (hi - lo))
        X = np.vstack(pts + [lo + rng.random((samples, d)) * (hi - lo)])
    else:
        S = np.array(starts, dtype=float)
        near = (
            S[rng.integers(0, len(S), samples)] + rng.normal(size=(samples, d)) * (hi - lo) * scale0
        )
        X = np.vstack([S, np.clip(near, lo, hi)])
    exact = lambda v: tuple(  # noqa: E731
        min(max(Q(*float(t).as_integer_ratio()), lo_), hi_)
        for t, lo_, hi_ in zip(v, box.lower, box.upper)
    )
    best, best_x, stalled, scores = -np.inf, None, 0, _Scores(case.outputs)
    for r in range(rounds):
        if time.monotonic() > deadline or stalled >= STALL_ROUNDS:
            break
        interruption.check()
        m = scores(X, fp(X))
        stats["points"] += len(X)
        order = np.argsort(-m)[:20]
        gain = best + STALL_GAIN * (1 + abs(best)) if np.isfinite(best) else best
        if best_x is None or m[order[0]] > gain:
            stalled = 0
        else:
            stalled += 1
        if best_x is None or m[order[0]] > best:
            best, best_x = m[order[0]], X[order[0]]
        for i in order[:3]:
            if m[i] < -1e-9 * (1 + abs(m[i])):  # not near a violation, even in floats
                break
            stats["exact_checks"] += 1
            ans = refutes(a, b, exact(X[i]), epsilon)
            if ans is not None:
                stats["time_s"] = round(time.monotonic() - started, 3)
                return ans, stats, best_gap
        top = X[order]
        scale = (hi - lo) * scale0 * 0.5 ** (r / 6)
        kids = top[rng.integers(0, len(top), 400)] + rng.normal(size=(400, d)) * scale
        X = np.vstack([top, np.clip(kids, lo, hi)])
    if epsilon is not None and best_x is not None:  # the exact gap at the best point seen
        x = exact(best_x)
        stats["exact_checks"] += 1
        best_gap[:] = [gap_at(evaluate(a, x), evaluate(b, x))[0], x]
    stats["time_s"] = round(time.monotonic() - started, 3)
    return None, stats, best_gap


def ascend(fp: FloatProgram, conjs, box: Box, x0, deadline: float, starts: int = 4):
    """A point of the box where ``_Scores`` is at least its value at x0, in floats (a hint):
    a (1 + 100) evolution strategy, its step doubled after a gain and halved after none, down
    to 1e-9 of the box, from x0 and from the best starts - 1 of 1,000 random points; the best
    end point.  A piecewise linear gap climbs to a vertex of its pieces in some 70 rounds
    (ACAS Xu and its pruned twin: 16 starts of 16 reach the same largest gap), where the
    exact search checks points one by one."""
    rng = np.random.default_rng(0)
    lo = np.array([float(v) for v in box.lower])
    hi = np.array([float(v) for v in box.upper])
    R = lo + rng.random((1000, len(lo))) * (hi - lo)
    scores = _Scores(conjs)
    top = R[np.argsort(-scores(R, fp(R)))[: starts - 1]]
    best_x, best = None, -np.inf
    for x in [np.array(x0, dtype=float), *top]:
        m0, sigma = scores(x[None, :], fp(x[None, :]))[0], 1 / 4
        while sigma > 1e-9 and time.monotonic() < deadline:
            X = np.clip(x + rng.normal(size=(100, len(x))) * (hi - lo) * sigma, lo, hi)
            m = scores(X, fp(X))
            i = int(np.argmax(m))
            if m[i] > m0:
                x, m0, sigma = X[i], m[i], min(2 * sigma, 0.5)
            else:
                sigma /= 2
        if m0 > best:
            best_x, best = x, m0
    return best_x


def polish(a, b, fp: FloatProgram, P, n: int, box: Box, found: Answer, deadline: float):
    """A refutation of epsilon with a larger exact gap, from a short local search around
    ``found.x`` (repeated while it finds one): the largest gap is what a user bisecting on
    epsilon wants to learn.  ``found`` itself when none is found.  First ``ascend`` in
    floats; its point is taken where its exact gap is larger."""
    if found.x is not None:
        case = pair_case(P, n, found.gap)
        x = ascend(fp, case.outputs, box, [float(v) for v in found.x], deadline)
        at = tuple(
            min(max(Q(*float(v).as_integer_ratio()), l), h)
            for v, l, h in zip(x, box.lower, box.upper)
        )
        better = refutes(a, b, at, found.gap)
        if better is not None:
            found = better
    while time.monotonic() < deadline:
        if found.x is None:  # not a refutation: nothing to polish
            return found
        better, _, _ = search(
            a,
            b,
            fp,
            pair_case(P, n, found.gap),
            box,
            found.gap,
            deadline,
            samples=400,
            rounds=20,
            starts=[[float(v) for v in found.x]],
            scale0=1 / 64,
        )
        if better is None:
            break
        found = better
    return found


# ----------------------------------------------------------------------- deciding


@unknown_beyond_floats(Answer)
def decide_tolerance(
    a,
    b,
    dom,
    epsilon: Q | None,
    timeout_s: float = 60.0,
    max_leaves: int = 20000,
    run_search: bool = True,
    progress=None,
    build=None,
    check_run=None,
) -> Answer:
    """proved (a tree the kernel accepted) / refuted (an exact point, re-evaluated) / unknown
    for |A - B|_inf <= epsilon on dom, or (epsilon None) the same arg max sets.  ``build``
    makes the pair program's tree (default ``build_tree``, in this process;
    ``decide_tolerance_split`` passes one that uses work units) with the same arguments and
    answers; ``check_run`` a pool's map for the kernel's check in pieces."""
    start = time.monotonic()
    deadline = start + timeout_s
    stats: dict = {}
    try:
        p, q = programs(a, b)
    except NoCertificate as e:
        return Answer("unknown", reason=str(e), stats=stats)
    except Unsupported as e:
        return Answer("unknown", reason=f"unsupported: {e}", stats=stats)
    stats["program_nodes"] = len(p.nodes)
    P = dom.as_polyhedron()
    case = pair_case(P, len(p.outputs) // 2, epsilon)
    box = dom if isinstance(dom, Box) else None
    fp = FloatProgram(q) if box is not None else None
    better = (
        (lambda ans: ans)
        if epsilon is None or box is None or fp is None
        else (
            lambda ans: polish(
                a, b, fp, P, len(p.outputs) // 2, box, ans, min(deadline, time.monotonic() + 2.0)
            )
        )
    )
    if run_search and box is not None and fp is not None:
        found, s, best = search(
            a, b, fp, case, box, epsilon, min(deadline, start + max(1.0, timeout_s / 4))
        )
        stats["search"] = s
        if best[0] is not None:
            stats["largest_gap_seen"] = best[0]
        if found is not None:
            found = better(found)
            found.stats = stats | {"found_by": "search"}
            return found

    def confirm(x):
        return refutes(a, b, x, epsilon) if P.contains(tuple(x)) else None

    built = None  # in this process; work units (``build``) use it themselves, but in more
    # than INPUT_SPLITS dimensions the tree is one leaf or nothing: no units to share
    in_process = build is None or p.dim > differential.INPUT_SPLITS
    if in_process and box is not None:  # None where it does not apply
        built = build_differential(a, b, case, deadline, confirm, max_leaves, progress)
    what, tree, s = built or (build or build_tree)(
        q, case, box, deadline, confirm, max_leaves, progress
    )
    stats.update(s)
    if what == "point":
        found = better(tree)
        found.stats = stats | {"found_by": "certificate"}
        return found
    if what == "unknown":
        return Answer("unknown", reason=tree, stats=stats)
    tree = restate(p, tree, len(domain_rows(P)))
    try:
        t0 = time.monotonic()
        stats["leaves_checked"] = check_pair_property(a, b, dom, epsilon, tree, check_run)
        stats["kernel_check_s"] = round(time.monotonic() - t0, 3)
    except CheckFailed as e:  # a producer bug: never trusted, reported
        return Answer("unknown", reason=f"the kernel rejected the certificate ({e})", stats=stats)
    return Answer("proved", tree=tree, stats=stats)


def build_differential(a, b, case, deadline, confirm, max_leaves, progress):
    """As ``build_tree``, by ``engine.differential`` (relaxed leaves with delta rows, input
    splits), or None where it does not apply (then ``build_tree``)."""
    try:
        built = differential.build_differential_tree(
            a, b, case, Limits(deadline, max_leaves, progress), None
        )
    except Violated as e:
        found = confirm(e.x)
        if found is None:
            return "unknown", "a cell centre was not confirmed as a counterexample", {}
        return "point", found, {}
    except NoCertificate as e:
        return "unknown", str(e), {"builder": "differential"}
    if built is None:
        return None
    tree, s = built
    return "tree", tree, {"leaves": s["leaves"], "splits": s["splits"], "builder": "differential"}


def build_tree(q, case, box, deadline, confirm, max_leaves, progress):
    """("tree", the tree of the pair program q, stats), ("point", confirm's answer, stats)
    when a cell reaches a forbidden output at a point confirm accepts, or ("unknown", reason,
    stats): ``build_case_tree`` in this process."""
    try:
        tree, s = build_case_tree(q, case, box, Limits(deadline, max_leaves, progress))
    except Violated as e:
        found = confirm(e.x)
        if found is not None:
            return "point", found, {}
        return (
            "unknown",
            (
                "a cell reaches a forbidden output, but the point z3 gave was not "
                "confirmed by the kernel"
            ),
            {},
        )
    except NoCertificate as e:
        return "unknown", str(e), {}
    return "tree", tree, {"leaves": s["leaves"], "splits": s["splits"]}


@unknown_beyond_floats(Answer)
def decide_tolerance_split(
    a,
    b,
    dom,
    epsilon,
    timeout_s: float,
    max_leaves: int,
    run_search: bool,
    executor: cf.Executor,
    depth: int = DEFAULT_SPLIT_DEPTH,
    unit_cells: int | None = None,
    progress_shown: bool = False,
):
    """``decide_tolerance`` with the pair program's tree built from work units
    (``engine.parallel``'s ``split_case_trees``): the same search, answers and kernel check.
    Maxout networks on a box with some inputs fixed (lower_i = upper_i; an image with a few
    pixels free) are decided on the free inputs alone (``on_free_inputs_of_pair``)."""
    from ..io.models import model_to_json

    reduced = on_free_inputs_of_pair(a, b, dom)
    if reduced is not None:
        ra, rb, rbox, embed = reduced
        v = decide_tolerance_split(
            ra, rb, rbox, epsilon, timeout_s, max_leaves, run_search, executor, depth,
            unit_cells, progress_shown,
        )  # fmt: skip
        return lifted(a, b, epsilon, v, embed, rbox.dim)

    def build(q, case, box, deadline, confirm, max_leaves, progress):
        what, value, s = split_case_trees(
            "pair",
            [model_to_json(a), model_to_json(b)],
            [case],
            [box],
            case.inputs.dim,
            deadline,
            max_leaves,
            executor,
            depth,
            unit_cells,
            confirm,
            progress_shown,
        )
        return what, (value[0] if what not in ("point", "unknown") else value), s

    return decide_tolerance(
        a,
        b,
        dom,
        epsilon,
        timeout_s,
        max_leaves,
        run_search,
        build=build,
        check_run=check_map(executor),
    )


def on_free_inputs_of_pair(a, b, dom):
    """(A', B', box', embed) where A and B are Maxout networks and the domain a box with some
    inputs fixed (lower_i = upper_i) and some free: the kernel's ``maxout.on_free_inputs`` (A' and
    B' read the fixed inputs as constants: A'(y) = A(embed(y)) for y in box'), and embed, the
    point of the box with free inputs y; else None."""
    models = isinstance(a, MaxoutNetwork) and isinstance(b, MaxoutNetwork)
    if not (models and isinstance(dom, Box)):
        return None
    free = [i for i, (lo, hi) in enumerate(zip(dom.lower, dom.upper)) if lo != hi]
    if not free or len(free) == dom.dim:
        return None
    (ra, rbox), (rb, _) = on_free_inputs(a, dom), on_free_inputs(b, dom)

    def embed(y) -> tuple:
        x = list(dom.lower)
        for i, v in zip(free, y):
            x[i] = v
        return tuple(x)

    return ra, rb, rbox, embed


def lifted(a, b, epsilon, v: Answer, embed, free: int) -> Answer:
    """The answer for A and B on the box from ``v``, the answer on its free inputs: a proof's
    tree as ``FreeInputs`` (which the kernel checks as it checked v's), a counterexample
    embedded and evaluated again by the kernel's evaluators."""
    v.stats["free_inputs"] = free
    if v.verdict == "proved":
        v.tree = FreeInputs(v.tree)  # type: ignore[arg-type]
    elif v.verdict == "refuted":
        found = refutes(a, b, embed(v.x), epsilon)
        if found is None:  # A'(y) = A(embed(y)): a producer bug, never trusted
            return Answer(
                "unknown", reason="a point on the free inputs was not confirmed", stats=v.stats
            )
        found.stats = v.stats
        return found
    return v
