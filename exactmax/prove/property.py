"""Decide a VNN-LIB property of a Maxout network: sat (an exact counterexample the kernel
evaluated), unsat (a certificate ``kernel/property.py`` accepted) or unknown (the reason).

Untrusted producer.  First a counterexample search: the centre, the vertices (up to 2^12)
and random points of each case's input box, then a local search around the best points, all
in floats; every candidate is made exact (a float is the dyadic rational it denotes), kept in
the input set exactly, and evaluated by the kernel's ``evaluate_maxout``.  Then, case by case,
a split tree in the manner of ``certify.build_certificate`` (same oracle, same walk over the
program): on each cell the Max choices are proved or the cell is split, and once the outputs
are affine, every forbidden conjunction gets Farkas multipliers showing it empty on the cell;
a conjunction that is not empty there gives a candidate point (z3), checked exactly.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import z3

from .. import interruption
from ..kernel.certificate import Empty, Row, Split, domain_rows
from ..kernel.errors import CheckFailed
from ..kernel.maxout import MaxoutNetwork, evaluate_maxout
from ..kernel.polyhedron import Box
from ..kernel.program import program_of_maxout
from ..kernel.property import Case, Excluded, check_property, compose
from ..kernel.rational import ONE, Q, RatMatrix, ZERO
from ..kernel.certificate import Choice, check_entails
from ..kernel.program import Lin
from .certify import Limits, NoCertificate, _inside, _nudge, _Oracle, choose_max
from .smt import from_z3


@dataclass
class Answer:
    result: str                           # "sat", "unsat" or "unknown"
    x: tuple | None = None                # sat: the exact counterexample
    y: tuple | None = None                # sat: f(x), evaluated by the kernel
    where: tuple | None = None            # sat: (case, conjunction)
    margin: Q | None = None               # sat: min over the conjunction's rows
    trees: tuple | None = None            # unsat: one tree per case, checked by the kernel
    reason: str | None = None
    stats: dict = field(default_factory=dict)


# ----------------------------------------------------------------------- exact facts

def row_value(row: Row, x, y) -> Q:
    v = row.c
    for a, t in zip(row.a, tuple(x) + tuple(y)):
        if a:
            v += a * t
    return v


def row_holds(row: Row, x, y) -> bool:
    v = row_value(row, x, y)
    return v > 0 or (v == 0 and not row.strict)


def violation(net: MaxoutNetwork, cases, x):
    """(case, conjunction, y, margin) when x is in a case's input set and (x, f(x)) satisfies
    every row of one of its conjunctions (f evaluated by the kernel), else (None, ..., y,
    None).  The margin is the least row value (>= 0; > 0 on a strict row)."""
    y = evaluate_maxout(net, x)
    for n, case in enumerate(cases):
        if not case.inputs.contains(tuple(x)):
            continue
        for j, conj in enumerate(case.outputs):
            if all(row_holds(r, x, y) for r in conj):
                margin = min((row_value(r, x, y) for r in conj), default=ZERO)
                return n, j, y, margin
    return None, None, y, None


# ----------------------------------------------------------------------- the search

class _FloatNet:
    """The network in float64 (for the search only: every answer is re-checked exactly)."""

    def __init__(self, net: MaxoutNetwork):
        self.layers = []
        for layer in net.layers:
            k = layer.rank
            W = np.array([[[float(v) for v in u.pieces[min(j, len(u.pieces) - 1)].w]
                           for j in range(k)] for u in layer.units])
            b = np.array([[float(u.pieces[min(j, len(u.pieces) - 1)].b) for j in range(k)]
                          for u in layer.units])
            self.layers.append((W, b))
        o = net.output
        self.out = None if o is None else (np.array([[float(v) for v in r] for r in o.W]),
                                           np.array([float(v) for v in o.b]))

    def __call__(self, X: np.ndarray) -> np.ndarray:
        h = X
        for W, b in self.layers:
            h = (np.einsum("uki,ni->nuk", W, h) + b).max(axis=2)
        return h if self.out is None else h @ self.out[0].T + self.out[1]


def _margins(conj, X, Y) -> np.ndarray:
    """min over the rows of a . (x, y) + c, per point (float)."""
    if not conj:
        return np.zeros(len(X))
    A = np.array([[float(v) for v in r.a] for r in conj])
    c = np.array([float(r.c) for r in conj])
    return (np.hstack([X, Y]) @ A.T + c).min(axis=1)


def _exact_point(x, box: Box):
    return tuple(min(max(Q(*float(v).as_integer_ratio()), lo), hi)
                 for v, lo, hi in zip(x, box.lower, box.upper))


def search_counterexample(net: MaxoutNetwork, cases, boxes, deadline: float, seed: int = 0,
                          samples: int = 2000, rounds: int = 60):
    """An exact counterexample (x, case, conj, y, margin) or None; tries counted in stats."""
    f = _FloatNet(net)
    rng = np.random.default_rng(seed)
    stats = {"points": 0, "exact_checks": 0}
    for n, (case, box) in enumerate(zip(cases, boxes)):
        if box is None:
            continue
        lo = np.array([float(v) for v in box.lower])
        hi = np.array([float(v) for v in box.upper])
        d = len(lo)
        pts = [(lo + hi) / 2]
        if d <= 12:
            corners = ((np.arange(2 ** d)[:, None] >> np.arange(d)) & 1).astype(float)
            pts += list(lo + corners * (hi - lo))
        X = np.vstack(pts + [lo + rng.random((samples, d)) * (hi - lo)])
        for conj in case.outputs:
            best = X
            for r in range(rounds):
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
    return None, stats


# ----------------------------------------------------------------------- the certificate

class Violated(Exception):
    def __init__(self, x):
        super().__init__("a forbidden output is reached on a cell")
        self.x = x


def _point_in(oracle: _Oracle, rows):
    s = oracle._limit(z3.Solver())
    s.add([oracle._row(r) > 0 if r.strict else oracle._row(r) >= 0 for r in rows])
    if s.check() == z3.sat:
        m = s.model()
        return tuple(from_z3(m.eval(x, model_completion=True)) for x in oracle.xs)
    return None


class _Split(Exception):
    """The choice of Max node ``index`` is not settled on the cell: split on ``gap``; the
    affine maps ``vals`` of the nodes before it hold on both halves."""

    def __init__(self, gap, index: int, vals: list):
        super().__init__("split")
        self.gap, self.index, self.vals = gap, index, vals


class _Lins:
    """The Lin nodes of a program evaluated a batch at a time: from Lin node i on, every Lin
    node up to the first one that reads a node at or after i (a layer's pre-activations)
    is one exact rational matrix product (FLINT), W V + [X | c], with V the affine maps of
    the nodes they read."""

    def __init__(self, p):
        self.p, self.cache = p, {}
        self.last = [max((j for j, _ in n.terms), default=-1) if isinstance(n, Lin) else None
                     for n in p.nodes]

    def batch(self, i: int):
        if i not in self.cache:
            nodes, members = self.p.nodes, []
            for j in range(i, len(nodes)):
                if self.last[j] is None:
                    continue
                if self.last[j] >= i:
                    break
                members.append(j)
            reads = sorted({r for j in members for r, _ in nodes[j].terms})
            col = {r: t for t, r in enumerate(reads)}
            d = self.p.dim
            W = [ZERO] * (len(members) * len(reads))
            XC = []
            for m, j in enumerate(members):
                for r, w in nodes[j].terms:
                    W[m * len(reads) + col[r]] += w
                x = [ZERO] * d
                for t, v in nodes[j].x:
                    x[t] += v
                XC.append(x + [nodes[j].c])
            Wm = RatMatrix(len(members), len(reads), W) if reads else None
            self.cache[i] = (members, reads, Wm, XC)
        return self.cache[i]

    def fill(self, vals: list, i: int) -> None:
        members, reads, W, XC = self.batch(i)
        d = self.p.dim
        if reads:
            V = RatMatrix(len(reads), d + 1, [v for r in reads for v in vals[r][0] + (
                vals[r][1],)])
            P = (W * V).entries()
        for m, j in enumerate(members):
            row = [a + b for a, b in zip(P[m * (d + 1):(m + 1) * (d + 1)], XC[m])] \
                if reads else XC[m]
            vals[j] = (tuple(row[:d]), row[d])


def _walk_from(p, lins: _Lins, rows, point, oracle: _Oracle, vals: list, start: int,
               choices: list) -> list:
    """The affine maps on the cell of p's nodes from ``start`` on (``vals``, one entry per
    node, holds those before it and possibly Lin nodes after it that read only nodes before
    it, all valid on the cell), proving the choice of every Max node (appended to
    ``choices``); _Split at the first one that is not settled.  As certify's walk, for the
    Lin and Max nodes of a Maxout program, resumed where the parent cell stopped instead of
    recomputed from the first node."""
    vals = [v if i < start or (v is not None and lins.last[i] is not None and
                               lins.last[i] < start) else None for i, v in enumerate(vals)]
    for index in range(start, len(p.nodes)):
        node = p.nodes[index]
        if isinstance(node, Lin):
            if vals[index] is None:
                lins.fill(vals, index)
            continue
        args = [vals[j] for j in node.args]
        k, proofs, gap = choose_max(args, rows, oracle, point)
        if gap is not None:
            raise _Split(gap, index, vals)
        choices.append((0, index, Choice(k, proofs)))
        vals[index] = args[k]
    return vals


def build_case_tree(p, case: Case, box: Box | None, limits: Limits):
    """A tree for the case (``kernel.property.check_case``), or NoCertificate / Violated."""
    P = case.inputs
    oracle = _Oracle(P.dim, box, None if box is not None else P, limits.deadline)
    stats = {"leaves": 0, "splits": 0}
    zero = ((ZERO,) * P.dim, ZERO)
    last = [time.monotonic()]
    lins = _Lins(p)

    def cell(rows, vals, hint=None, start=0):
        interruption.check()
        if time.monotonic() > limits.deadline:
            raise NoCertificate(_late(limits))
        if stats["leaves"] >= limits.max_leaves:
            raise NoCertificate(f"more than {limits.max_leaves} cells")
        pt = hint if hint is not None and _inside(rows, hint, box) \
            else oracle.interior_point(rows)
        if pt is None:
            pr = oracle.farkas(rows, zero, True)
            if pr is None:
                raise NoCertificate("an empty cell without a Farkas proof")
            stats["leaves"] += 1
            return Empty(pr)
        ch = []
        try:
            vals = _walk_from(p, lins, rows, pt, oracle, vals, start, ch)
        except _Split as s:
            stats["splits"] += 1
            (a, c), nxt = s.gap, s.index
            ge_row, lt_row = Row(a, c), Row(tuple(-v for v in a), -c, True)
            ge = cell(rows + [ge_row], s.vals, _nudge(rows, pt, ge_row, box), nxt)
            lt = cell(rows + [lt_row], s.vals, _nudge(rows, pt, lt_row, box), nxt)
            return Split(a, c, ge, lt, tuple(ch))
        ys = [vals[o] for o in p.outputs]
        proofs = []
        for conj in case.outputs:
            extended = rows + [compose(r, ys, P.dim) for r in conj]
            pr = _empty_proof(oracle, extended, len(rows))
            if pr is None:
                x = _point_in(oracle, extended)
                if x is None:
                    raise NoCertificate(_late(limits) or "z3 could not decide a cell")
                raise Violated(x)
            proofs.append(pr)
        stats["leaves"] += 1
        if limits.progress is not None and time.monotonic() - last[0] > 2:
            last[0] = time.monotonic()
            limits.progress(stats["leaves"])
        return Excluded(tuple(ch), tuple(proofs))

    try:
        tree = cell(domain_rows(P), [None] * len(p.nodes))
    except NoCertificate as e:
        raise NoCertificate(f"{e} ({stats['leaves']} cells certified, {stats['splits']} "
                            "splits)") from None
    stats["lp_calls"] = oracle.calls
    return tree, stats


def _empty_proof(oracle: _Oracle, rows: list, first: int):
    """Farkas multipliers for 0 > 0 on ``rows`` (the cell's, then from ``first`` on a forbidden
    conjunction's), or None.  Asked directly, an LP for emptiness is unbounded when the rows
    are infeasible (scale the multipliers), so the oracle's float LP cannot settle it and z3
    is asked every time.  Asked instead, for one conjunction row R at a time, whether the other
    rows entail R < 0 (R <= 0 if R is strict), the LP has an optimum; with multiplier 1 on R
    that proof is one of 0 > 0.  z3 decides only when no row gives one."""
    for j in range(first, len(rows)):
        r = rows[j]
        others = rows[:j] + rows[j + 1:]
        pr = oracle.farkas(others, (tuple(-v for v in r.a), -r.c), not r.strict)
        if pr is None:
            continue
        proof = tuple((i if i < j else i + 1, y) for i, y in pr) + ((j, ONE),)
        try:
            check_entails(rows, ((ZERO,) * len(r.a), ZERO), True, proof, "")
            return proof
        except CheckFailed:
            continue
    return oracle.farkas(rows, ((ZERO,) * oracle.d, ZERO), True)


def _late(limits: Limits) -> str | None:
    if time.monotonic() > limits.deadline:
        return "time limit reached while building the certificate"
    return None


def decide_property(net: MaxoutNetwork, prop, timeout_s: float = 60.0,
                    max_leaves: int = 20000, search: bool = True,
                    progress=None) -> Answer:
    """sat / unsat / unknown for the property ``prop`` (``io.vnnlib.VnnProperty``)."""
    start = time.monotonic()
    deadline = start + timeout_s
    stats: dict = {}
    boxes = prop.boxes or (None,) * len(prop.cases)
    if search:
        found, s = search_counterexample(net, prop.cases, boxes,
                                         min(deadline, start + max(1.0, timeout_s / 4)))
        stats["search"] = s
        if found is not None:
            x, n, j, y, margin = found
            stats["found_by"] = "search"
            return Answer("sat", x, y, (n, j), margin, stats=stats)
    p = program_of_maxout(net)
    trees, leaves = [], 0
    for n, (case, box) in enumerate(zip(prop.cases, boxes)):
        try:
            tree, s = build_case_tree(p, case, box, Limits(deadline, max_leaves, progress))
        except Violated as e:
            cn, cj, y, margin = violation(net, prop.cases, e.x)
            if cn is not None:
                stats["found_by"] = "certificate"
                return Answer("sat", e.x, y, (cn, cj), margin, stats=stats)
            return Answer("unknown", reason="a cell reaches a forbidden output, but the point "
                          "z3 gave was not confirmed by the kernel", stats=stats)
        except NoCertificate as e:
            return Answer("unknown", reason=f"case {n}: {e}", stats=stats)
        trees.append(tree)
        leaves += s["leaves"]
        stats["splits"] = stats.get("splits", 0) + s["splits"]
    try:
        t0 = time.monotonic()
        stats["leaves_checked"] = check_property(net, prop.cases, tuple(trees))
        stats["kernel_check_s"] = round(time.monotonic() - t0, 3)
    except CheckFailed as e:   # a producer bug: never trusted, reported
        return Answer("unknown", reason=f"the kernel rejected the certificate ({e})",
                      stats=stats)
    stats["leaves"] = leaves
    return Answer("unsat", trees=tuple(trees), stats=stats)
