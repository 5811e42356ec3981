"""Build split-tree certificates (``kernel/certificate.py``) for f = g on a polyhedron.

Untrusted producer.  Cells are explored depth first.  On each cell an interior point guesses
which argument each Max / Hardmax node selects (the parent's point moved across the new split
by an exact ratio test, else z3 ``Optimize`` maximising the slack of every row).  Farkas
multipliers for each selection are found exactly, cheapest first: the box alone; a ray from
the point that leaves the claim (then there are none and no solver is asked); a non-negative
combination of at most three split rows; one split row plus the box; finally z3 solving the
linear system y >= 0, y^T A = a_e of docs/notes/certificates.md pitfall 4.  When a selection cannot
be proved on the whole cell, the cell is split on the hyperplane that separates the two
arguments, and the choices proved so far are stated once at the split and inherited below.
Every tree is checked by the kernel before anyone trusts it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import compress
from typing import TYPE_CHECKING

import z3

from .. import interruption
from ..kernel.certificate import (
    Choice,
    Empty,
    Farkas,
    Leaf,
    Row,
    Split,
    TieProof,
    Tree,
    _max_args,
    cone,
    domain_rows,
    lin_map,
    outputs_agree,
)
from ..kernel.polyhedron import Box, Polyhedron
from ..kernel.program import Lin, Max, Program
from ..kernel.rational import ZERO, Q
from . import floatlp
from .smt import from_z3, rat

if TYPE_CHECKING:
    from .lp import DualLP


class NoCertificate(Exception):
    """No certificate within the limits, or the claim needs more than the format can say."""


class CounterexampleFound(Exception):
    """The outputs differ at x, a point of the cell ``rows`` where ``diff`` (the difference
    of the two outputs' affine maps there) is not zero."""

    def __init__(self, x, rows=None, diff=None):
        super().__init__("the outputs differ on a cell")
        self.x, self.rows, self.diff = x, rows, diff


class _SplitOn(Exception):
    def __init__(self, a, c):
        self.a, self.c, self.proved = a, c, []


@dataclass
class Limits:
    deadline: float
    max_leaves: int = 20000
    progress: Callable[[int], object] | None = None  # called with the number of leaves
    max_splits: int | None = None  # the relaxed builder: splits before it gives up (None: any)


class _Oracle:
    """Exact LP questions about cells, answered by z3 (and a box fast path).  With ``poly``
    (a polyhedral domain), a question about the domain's own rows is answered from the LP
    optimum of its linear part, computed once per linear part.  z3 calls stop at
    ``deadline`` (time.monotonic()); an interrupted call answers "none found", which costs
    an answer, never soundness (the kernel checks what is built)."""

    def __init__(
        self,
        dim: int,
        box: Box | None,
        poly: Polyhedron | None = None,
        deadline: float | None = None,
    ):
        self.d, self.box, self.poly, self.deadline = dim, box, poly, deadline
        self.xs = [z3.Real(f"x{i}") for i in range(dim)]
        self.calls = 0
        self.float_lp, self.float_calls = floatlp.available(), 0
        self._optimum: dict = {}
        self._dual: DualLP | None = None
        self._centre: tuple = (None, ())

    def centre(self, box: Box) -> tuple:
        """The centre of ``box``, kept for the last box asked about (same-max leaves ask for
        their cell's centre once per unit)."""
        if self._centre[0] is not box:
            self._centre = (box, tuple((lo + hi) / 2 for lo, hi in zip(box.lower, box.upper)))
        return self._centre[1]

    def _limit(self, solver):
        """Bound a z3 solver by the time left before the deadline (and stop here if the
        command has been interrupted)."""
        interruption.check()
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            solver.set("timeout", max(1, int(left * 1000)))
        return solver

    def lp_min(self, a):
        """(y, m): m = min a . x over the domain polyhedron, y >= 0 the multipliers of its
        rows with y A = -a and m = -y . b (LP duality; z3, exact); None if unbounded below
        or out of time.  Computed once per linear part a."""
        key = tuple(a)
        poly = self.poly
        assert poly is not None  # asked only with a polyhedral domain
        if key not in self._optimum:
            if self._dual is None:
                from .lp import DualLP

                self._dual = DualLP(poly)
            self.calls += 1
            y = self._dual.multipliers(tuple(-v for v in a), self.deadline)
            self._optimum[key] = (
                None if y is None else (y, -sum((v * bi for v, bi in zip(y, poly.b) if v), ZERO))
            )
        return self._optimum[key]

    def _domain_farkas(self, rows, e, strict):
        """When ``rows`` are the domain's rows (else None): with (y, m) = lp_min(a),
        e - sum_i y_i row_i = c + m; the proof y if that shows the claim, else False."""
        if self.poly is None or len(rows) != len(self.poly.b):
            return None
        opt = self.lp_min(e[0])
        if opt is None:
            return False
        y, m = opt
        r = e[1] + m
        if r > 0 or (r == 0 and not strict):
            return tuple((i, v) for i, v in enumerate(y) if v)
        return False

    def _row(self, row: Row):
        return z3.Sum([rat(a) * self.xs[t] for t, a in row.nz] + [rat(row.c)])

    def interior_point(self, rows: list[Row]):
        """A point of the cell, as deep inside as possible; None if the cell is empty."""
        if self.float_lp:
            interruption.check()
            self.float_calls += 1
            x = floatlp.interior_point(rows, self.d)
            if x is not None:
                return x
        self.calls += 1
        t = z3.Real("t")
        o = self._limit(z3.Optimize())
        for row in rows:
            o.add(self._row(row) >= t)
        o.add(t <= 1)
        o.maximize(t)
        if o.check() == z3.sat:
            m = o.model()
            if from_z3(m.eval(t, model_completion=True)) > 0:
                return tuple(from_z3(m.eval(x, model_completion=True)) for x in self.xs)
        s = self._limit(z3.Solver())  # not full-dimensional: any point at all?
        s.add([self._row(r) > 0 if r.strict else self._row(r) >= 0 for r in rows])
        if s.check() == z3.sat:
            m = s.model()
            return tuple(from_z3(m.eval(x, model_completion=True)) for x in self.xs)
        return None

    def farkas(self, rows: list[Row], e, strict: bool, point=None) -> Farkas | None:
        """Multipliers proving e >= 0 (> 0) on the cell, or None if there are none.  With
        ``point`` (a point of the cell), a cheap search for a point of the cell where the
        claim fails comes first: it answers None without the solver."""
        fast = self._box_farkas(e, strict)
        if fast is not None:
            return fast
        fast = self._domain_farkas(rows, e, strict)
        if fast is not None:
            return fast if fast is not False else None
        if point is not None and _descends_below(rows, point, e, strict, self.box):
            return None
        if self.float_lp:  # a float LP proposes, the exact support solve decides
            interruption.check()
            self.float_calls += 1
            proof, decided = floatlp.farkas(rows, e, strict, _solve)
            if proof is not None or decided:
                return proof
        fast = self._span_farkas(rows, e, strict)
        if fast is None:
            fast = self._row_box_farkas(rows, e, strict)
        if fast is not None:
            return fast
        self.calls += 1
        ys = [z3.Real(f"y{i}") for i in range(len(rows))]
        s = self._limit(z3.SolverFor("QF_LRA"))
        s.add([y >= 0 for y in ys])
        sums: list[list] = [[z3.RealVal(0)] for _ in range(self.d)]
        for r, y in zip(rows, ys):
            for t, v in r.nz:
                sums[t].append(rat(v) * y)
        s.add([z3.Sum(sums[t]) == rat(e[0][t]) for t in range(self.d)])
        rest = rat(e[1]) - z3.Sum([rat(r.c) * y for r, y in zip(rows, ys) if r.c] + [z3.RealVal(0)])
        if strict:
            s.add(
                z3.Or(
                    rest > 0,
                    z3.And(
                        rest >= 0,
                        z3.Sum([y for r, y in zip(rows, ys) if r.strict] + [z3.RealVal(0)]) > 0,
                    ),
                )
            )
        else:
            s.add(rest >= 0)
        if s.check() != z3.sat:
            return None
        m = s.model()
        out = []
        for i, y in enumerate(ys):
            v = from_z3(m.eval(y, model_completion=True))
            if v > 0:
                out.append((i, v))
        return tuple(out)

    def _span_farkas(self, rows, e, strict):
        """e as a non-negative combination of at most three split rows (rows after the
        domain's), with a constant remainder: the chains of comparisons that splitting on
        differences of pieces produces.  Exact Gaussian elimination; None if no such luck."""
        first = 2 * self.d if self.box is not None else 0
        extra = list(range(first, len(rows)))[-6:]
        for size in (1, 2, 3):
            for subset in _subsets(extra, size):
                lam = _solve([rows[i].a for i in subset], e[0])
                if lam is None or any(v < 0 for v in lam):
                    continue
                r = e[1] - sum((v * rows[i].c for v, i in zip(lam, subset)), ZERO)
                used_strict = any(v > 0 and rows[i].strict for v, i in zip(lam, subset))
                if r > 0 or (r == 0 and (not strict or used_strict)):
                    return tuple((i, v) for v, i in zip(lam, subset) if v > 0)
        return None

    def _row_box_farkas(self, rows, e, strict):
        """e = lambda s + r with s one split row, lambda >= 0 and r entailed by the box alone;
        the best lambda is at 0 or where a coefficient of e - lambda s changes sign."""
        if self.box is None:
            return None
        for i in range(2 * self.d, len(rows)):
            s = rows[i]
            cands = sorted(v / w for v, w in zip(e[0], s.a) if w and v / w > 0)
            for n, lam in enumerate(cands):
                if n and lam == cands[n - 1]:
                    continue
                rem = (tuple(v - lam * w for v, w in zip(e[0], s.a)), e[1] - lam * s.c)
                pr = self._box_farkas(rem, strict and not s.strict)
                if pr is not None:
                    return pr + ((i, lam),)
        return None

    def _box_farkas(self, e, strict):
        """When the domain is a box (rows x_i <= u_i, then x_i >= l_i): e >= its minimum over
        the box, c + sum_{a_i > 0} a_i l_i + sum_{a_i < 0} a_i u_i, with multipliers |a_i|."""
        if self.box is None:
            return None
        a, c = e
        low = c
        proof = []
        for i in compress(range(len(a)), a):  # the non-zero entries, found in C
            v = a[i]
            if v > 0:
                low += v * self.box.lower[i]
                proof.append((self.d + i, v))
            elif v < 0:
                low += v * self.box.upper[i]
                proof.append((i, -v))
        if low > 0 or (low == 0 and not strict):
            return tuple(proof)
        return None


def _ray_limit(rows, p, a, box):
    """(t_max, binding row strict?) for the points p + t a, t >= 0, inside every row: rows
    whose value decreases along a bound t.  With ``box``, the first 2 d rows are the box's
    (x_i <= u_i, then x_i >= l_i) and are handled coordinate-wise."""
    limit, strict, first = None, False, 0
    if box is not None:
        first = 2 * len(p)
        for i, v in enumerate(a):
            if v > 0:
                t = (box.upper[i] - p[i]) / v
            elif v < 0:
                t = (p[i] - box.lower[i]) / -v
            else:
                continue
            if limit is None or t < limit:
                limit = t
    for r in rows[first:]:
        slope = sum((u * v for u, v in zip(r.a, a) if u and v), ZERO)
        if slope < 0:
            t = _at((r.a, r.c), p) / -slope
            if limit is None or t < limit:
                limit, strict = t, r.strict
            elif t == limit:
                strict = strict or r.strict
    return limit, strict


def _inside(rows, q, box) -> bool:
    first = 0
    if box is not None:
        first = 2 * len(q)
        if not all(lo < v < hi for lo, v, hi in zip(box.lower, q, box.upper)):
            return False
    return all(_at((r.a, r.c), q) > 0 for r in rows[first:])


def _descends_below(rows, p, e, strict, box=None) -> bool:
    """Does the cell contain a point where e < 0 (e <= 0 if strict) on the ray from p against
    the gradient of e?  (Exact ratio test; the ray may end on non-strict rows.)"""
    a = e[0]
    norm = sum((v * v for v in a if v), ZERO)
    if not norm:
        return e[1] < 0 or (strict and e[1] == 0)
    limit, binding_strict = _ray_limit(rows, p, tuple(-v for v in a), box)
    if limit is None:
        return True  # e decreases without bound in the cell
    if limit <= 0:
        return False
    t = limit * Q(999, 1000) if binding_strict else limit
    value = _at(e, p) - t * norm
    return value < 0 or (strict and value == 0)


def _nudge(rows, p, new: Row, box=None):
    """A point strictly inside ``rows`` and ``new``, found by moving p along the normal of
    ``new`` (a ratio test, exact); None when that line does not reach such a point."""
    a = new.a
    norm = sum((v * v for v in a if v), ZERO)
    if not norm:
        return None
    need = -_at((a, new.c), p) / norm  # beyond this step, new(p + t a) > 0
    limit, _ = _ray_limit(rows, p, a, box)
    if limit is None:
        t = max(need, ZERO) + 1
    elif limit > need and limit > 0:
        t = (max(need, ZERO) + limit) / 2
    else:
        return None
    q = tuple(x + t * v for x, v in zip(p, a))
    return q if _inside(rows + [new], q, box) else None


def _subsets(items, size):
    from itertools import combinations

    return combinations(items, size)


def _solve(vectors, target):
    """lambda with sum_i lambda_i vectors[i] = target exactly, or None (Gaussian elimination
    on the columns; any consistent solution will do)."""
    r = len(vectors)
    rows = [[vectors[i][t] for i in range(r)] + [target[t]] for t in range(len(target))]
    pivots, row = [], 0
    for col in range(r):
        piv = next((k for k in range(row, len(rows)) if rows[k][col]), None)
        if piv is None:
            continue
        rows[row], rows[piv] = rows[piv], rows[row]
        inv = 1 / rows[row][col]
        rows[row] = [v * inv for v in rows[row]]
        for k in range(len(rows)):
            if k != row and rows[k][col]:
                f = rows[k][col]
                rows[k] = [a - f * b for a, b in zip(rows[k], rows[row])]
        pivots.append(col)
        row += 1
    if any(rows[k][r] for k in range(row, len(rows))):
        return None
    lam = [ZERO] * r
    for k, col in enumerate(pivots):
        lam[col] = rows[k][r]
    return lam


def _sub(u, v):
    return tuple(p - q for p, q in zip(u[0], v[0])), u[1] - v[1]


def _at(aff, p) -> Q:
    return sum((a * x for a, x in zip(aff[0], p) if a), aff[1])


def choose_max(args, rows, oracle, point):
    """(k, proofs, None): argument k is the largest at ``point``, and proofs[j] shows A_k - A_j
    >= 0 on the cell (None at j = k); or (k, None, gap) with the first A_k - A_j the oracle
    could not prove, where the caller splits."""
    at = [_at(v, point) for v in args]
    k = at.index(max(at))
    proofs: list = []
    for j, v in enumerate(args):
        if j == k:
            proofs.append(None)
            continue
        gap = _sub(args[k], v)
        pr = oracle.farkas(rows, gap, False, point)
        if pr is None:
            return k, None, gap
        proofs.append(pr)
    return k, tuple(proofs), None


def _walk(prog: Program, side: int, rows, point, oracle: _Oracle, known: dict, needed):
    """Affine maps of every node on the cell and the choices proved on it, or _SplitOn
    (carrying the choices proved before the split).  Choices in ``known`` were proved on an
    ancestor cell, so they hold here too and are not proved again."""
    choices: list = []
    try:
        return _walk_nodes(prog, side, rows, point, oracle, known, choices, needed), choices
    except _SplitOn as e:
        e.proved = choices
        raise


def _walk_nodes(prog, side, rows, point, oracle, known, choices, needed):
    d = prog.dim
    vals: list = [None] * len(prog.nodes)
    for index in sorted(needed):  # in node order: a node reads earlier ones only
        node = prog.nodes[index]
        ch = known.get((side, index))
        if ch is not None:
            vals[index] = (
                vals[node.args[ch.k]] if isinstance(node, Max) else vals[node.pairs[ch.k][1]]
            )
            continue
        if isinstance(node, Lin):
            vals[index] = lin_map(node, vals, d)
            continue
        if isinstance(node, Max):
            args = [vals[j] for j in node.args]
            k, proofs, gap = choose_max(args, rows, oracle, point)
            if gap is not None:
                raise _SplitOn(*gap)
            choices.append((side, index, Choice(k, proofs)))
            vals[index] = args[k]
            continue
        scores = [vals[s] for s, _ in node.pairs]
        values = [vals[v] for _, v in node.pairs]
        at = [_at(v, point) for v in scores]
        k = at.index(max(at))
        proofs = []
        for j in range(len(scores)):
            if j == k:
                proofs.append(None)
                continue
            gap = _sub(scores[k], scores[j])
            pr = oracle.farkas(rows, gap, True, point)
            if pr is not None:
                proofs.append(pr)
                continue
            dom = oracle.farkas(rows, gap, False, point)
            if dom is None:
                raise _SplitOn(*gap)
            tie = rows + [Row(*_sub(scores[j], scores[k]))]
            up = oracle.farkas(tie, _sub(values[j], values[k]), False)
            low = oracle.farkas(tie, _sub(values[k], values[j]), False)
            if up is None or low is None:
                raise NoCertificate(
                    f"node {index}: tied attention keys carry different values "
                    "(the head jumps on that tie set); the certificate format "
                    "cannot express the average there"
                )
            proofs.append(TieProof(dom, up, low))
        choices.append((side, index, Choice(k, tuple(proofs))))
        vals[index] = values[k]
    return vals


def build_certificate(
    f: Program,
    g: Program,
    P: Polyhedron,
    box: Box | None,
    limits: Limits,
    outputs: tuple[int, ...] | None = None,
    oracle: _Oracle | None = None,
) -> tuple[Tree, dict]:
    """A tree for f_o = g_o on P for the outputs o in ``outputs`` (default: all), or
    NoCertificate / CounterexampleFound.  Only the nodes these outputs depend on are used."""
    outputs = tuple(range(len(f.outputs))) if outputs is None else outputs
    need_f = cone(f, [f.outputs[o] for o in outputs])
    need_g = cone(g, [g.outputs[o] for o in outputs])
    oracle = oracle or _Oracle(P.dim, box, deadline=limits.deadline)
    stats = {"leaves": 0, "splits": 0}
    last = [time.monotonic()]

    def cell(rows: list[Row], known: dict, hint=None) -> Tree:
        interruption.check()
        if time.monotonic() > limits.deadline:
            raise NoCertificate("time limit reached while building the certificate")
        if stats["leaves"] >= limits.max_leaves:
            raise NoCertificate(f"more than {limits.max_leaves} leaves")
        p = hint if hint is not None and _inside(rows, hint, box) else oracle.interior_point(rows)
        if p is None:
            pr = oracle.farkas(rows, ((ZERO,) * P.dim, ZERO), True)
            if pr is None and time.monotonic() > limits.deadline:  # the LP was cut short
                raise NoCertificate("time limit reached while building the certificate")
            if pr is None:  # pragma: no cover - z3 contradicting itself
                raise NoCertificate("an empty cell without a Farkas proof")
            stats["leaves"] += 1
            return Empty(pr)
        cf = []
        try:
            vf, cf = _walk(f, 0, rows, p, oracle, known, need_f)
            vg, cg = _walk(g, 1, rows, p, oracle, known, need_g)
        except _SplitOn as s:
            # choices proved on this cell hold on both halves: state them once, here; but
            # not those with a tie proof, whose extra row is numbered after this cell's
            # rows (the leaves below have more rows): they are proved again below
            proved = tuple(
                c
                for c in (cf if s.proved is not cf else []) + s.proved
                if not any(isinstance(pr, TieProof) for pr in c[2].proofs)
            )
            below = dict(known)
            below.update({(side, i): ch for side, i, ch in proved})
            stats["splits"] += 1
            ge_row, lt_row = Row(s.a, s.c), Row(tuple(-v for v in s.a), -s.c, True)
            ge = cell(rows + [ge_row], below, _nudge(rows, p, ge_row, box))
            lt = cell(rows + [lt_row], below, _nudge(rows, p, lt_row, box))
            return Split(s.a, s.c, ge, lt, proved)
        for o in outputs:
            i, j = f.outputs[o], g.outputs[o]
            if vf[i] != vg[j]:
                x = _differing_point(oracle, rows, _sub(vf[i], vg[j]))
                if x is not None:
                    raise CounterexampleFound(x, rows, _sub(vf[i], vg[j]))
                raise NoCertificate("the outputs agree on a lower-dimensional cell only")
        stats["leaves"] += 1
        if limits.progress is not None and time.monotonic() - last[0] > 2:
            last[0] = time.monotonic()
            limits.progress(stats["leaves"])
        return Leaf(tuple(cf + cg))

    tree = cell(domain_rows(P), {})
    stats["lp_calls"] = oracle.calls
    stats["float_lp_calls"] = oracle.float_calls
    return tree, stats


def same_max_leaf(
    f: Program,
    g: Program,
    P: Polyhedron,
    box: Box | None,
    outputs: tuple[int, ...],
    oracle: _Oracle,
    rows: list | None = None,
) -> Leaf | None:
    """One leaf over the whole domain by the kernel's same-max rule (a hardmax head whose
    values are a reordering of a Max node's arguments), when the other choices are settled
    on the whole domain; None otherwise.  For the construction every unit is such a case:
    no split and, on a box, no solver.  ``rows``: domain_rows(P), if known."""
    rows = rows or domain_rows(P)
    rf, rg, cf, cg, nf, ng = same_max_roots(f, g, outputs)
    if not rf and not rg:
        return None
    point = oracle.centre(box) if box is not None else oracle.interior_point(rows)
    if point is None:
        return None
    try:
        vf, choices_f = _walk(f, 0, rows, point, oracle, {}, nf)
        vg, choices_g = _walk(g, 1, rows, point, oracle, {}, ng)
    except (_SplitOn, NoCertificate):
        return None
    if not all(outputs_agree(f, g, vf, vg, f.outputs[o], g.outputs[o]) for o in outputs):
        return None
    return Leaf(tuple(choices_f + choices_g), same_max=True)


def same_max_roots(f: Program, g: Program, outputs):
    """For a same-max leaf: (rf, rg) the max-like nodes compared by their sets of arguments
    (outputs, and terms of composite outputs), (cf, cg) the composite outputs (Lin nodes with
    a max-like term on either side), and the nodes that must then be evaluated: the roots'
    arguments' cones and everything else the outputs read, without the roots and composites."""
    rf: set[int] = set()
    rg: set[int] = set()
    cf: set[int] = set()
    cg: set[int] = set()
    start_f: list[int] = []
    start_g: list[int] = []

    def root(p, node, roots, start):
        if _max_args(p.nodes[node]):
            roots.add(node)
            start.extend(_max_args(p.nodes[node]))
        else:
            start.append(node)

    for o in outputs:
        i, j = f.outputs[o], g.outputs[o]
        fi, gj = f.nodes[i], g.nodes[j]
        if _max_args(fi) or _max_args(gj):
            root(f, i, rf, start_f)
            root(g, j, rg, start_g)
        elif (
            isinstance(fi, Lin)
            and isinstance(gj, Lin)
            and (
                any(_max_args(f.nodes[a]) for a, _ in fi.terms)
                or any(_max_args(g.nodes[b]) for b, _ in gj.terms)
            )
        ):
            cf.add(i)
            cg.add(j)
            for a, _ in fi.terms:
                root(f, a, rf, start_f)
            for b, _ in gj.terms:
                root(g, b, rg, start_g)
        else:
            start_f.append(i)
            start_g.append(j)
    return rf, rg, cf, cg, cone(f, start_f), cone(g, start_g)


def _differing_point(oracle: _Oracle, rows, diff):
    s = oracle._limit(z3.Solver())
    s.add([oracle._row(r) > 0 if r.strict else oracle._row(r) >= 0 for r in rows])
    s.add(oracle._row(Row(diff[0], diff[1])) != 0)
    if s.check() == z3.sat:
        m = s.model()
        return tuple(from_z3(m.eval(x, model_completion=True)) for x in oracle.xs)
    return None
