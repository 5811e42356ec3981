"""Split trees for one case of a property (``kernel.property.check_case``): the Max-choice
builder ``build_case_tree``, and the facts of a case's output conjunctions at a point (exact:
``violation``) or at many points (floats: ``_margins``) that the builders and the searches share.

Untrusted producer.  Depth first over cells.  On each cell, level by level (the order in which
the kernel evaluates), every Max node whose arguments are known gets the argument largest at the
cell's point with Farkas proofs (the box's, when float bounds clear their rounding by far; else
one float LP per cell (HiGHS) made exact; else the exact oracle of ``certify``), or the cell is
split on the first gap not settled there; once the outputs are affine, every forbidden
conjunction gets Farkas multipliers showing it empty on the cell, or gives a candidate point
(z3), checked exactly.  Floats only guide: every number in the tree is exact, and the kernel
checks it.  With a budget of cells, the cells not begun are handed back as ``OpenCell``
placeholders (the work units of ``parallel``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import z3

from .. import interruption
from ..kernel.certificate import (
    Choice,
    Empty,
    Farkas,
    Row,
    Split,
    _reads,
    check_entails,
    cone,
    domain_rows,
)
from ..kernel.errors import CheckFailed
from ..kernel.maxout import MaxoutNetwork, evaluate_maxout
from ..kernel.polyhedron import Box
from ..kernel.program import Lin
from ..kernel.property import Case, Excluded, compose
from ..kernel.rational import ONE, ZERO, Q, RatMatrix
from . import floatlp
from .certify import Limits, NoCertificate, _Oracle, _solve, _sub
from .relaxation import build_relaxed_tree, layers_violate
from .smt import from_z3

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


def _margins(conj, X, Y) -> np.ndarray:
    """min over the rows of a . (x, y) + c, per point (float; a guide for the searches and
    the cell centres, whose candidates ``violation`` checks exactly)."""
    if not conj:
        return np.zeros(len(X))
    A = np.array([[float(v) for v in r.a] for r in conj])
    c = np.array([float(r.c) for r in conj])
    return (np.hstack([X, Y]) @ A.T + c).min(axis=1)


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


class _CellLP:
    """min a . x over one cell {x : row_i(x) >= 0} in floats (HiGHS), for the many gaps asked
    on that cell: one model, only its objective changed between questions (HiGHS starts
    from the last optimal basis).  At an optimum x*, the row duals y >= 0 have a = sum y_i
    g_i (g_i the rows' coefficients), so e = a . x + c satisfies e - sum y_i row_i = c - sum y_i
    c_i; the rows of the float support are then solved exactly (``certify._solve``) and a proof
    is returned only if its exact multipliers are >= 0 and its exact constant shows e >= 0; or
    y gives the safe bound (``floatlp.from_dual``), first in more than
    ``floatlp.SAFE_BOUND_FIRST_ABOVE`` dimensions, else as the fallback."""

    _highs = None
    _owner = None  # the _CellLP whose model the solver holds

    def __init__(self, rows: list[Row], G, h, d: int):
        self.rows, self.G, self.h, self.d, self.calls = rows, G, h, d, 0
        self.bounds = None  # floatlp.bound_rows of the cell, once the safe bound asks

    @classmethod
    def _solver(cls):
        if cls._highs is None:
            from .floatlp import new_solver

            h = new_solver()
            # tiny LPs, asked again with another objective: no presolve, and the primal
            # simplex from the last optimal basis (still primal feasible) is fastest
            h.setOptionValue("presolve", "off")
            h.setOptionValue("simplex_strategy", 4)
            cls._highs = h
        return cls._highs

    def _build(self) -> bool:
        import highspy

        rows, d, G = self.rows, self.d, self.G
        if G is None:
            return False
        lo = -self.h
        h = self._solver()
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = d, len(rows)
        lp.col_cost_ = np.zeros(d)
        lp.col_lower_ = np.full(d, -highspy.kHighsInf)
        lp.col_upper_ = np.full(d, highspy.kHighsInf)
        lp.row_lower_ = lo
        lp.row_upper_ = np.full(len(rows), highspy.kHighsInf)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.arange(0, d * len(rows) + 1, d, dtype=np.int32)
        lp.a_matrix_.index_ = np.tile(np.arange(d, dtype=np.int32), len(rows))
        lp.a_matrix_.value_ = G.ravel()
        h.clearModel()
        h.passModel(lp)
        self._cols = np.arange(d, dtype=np.int32)
        _CellLP._owner = self
        return True

    def farkas(self, e) -> tuple[Farkas | None, bool]:
        """(proof, decided) as ``floatlp.farkas``: an exact proof of e >= 0 on the cell, or
        None with decided True when the float optimum is below 0 by a margin (then there is
        none), False when the float LP could not tell (ask the exact oracle)."""
        import highspy

        if _CellLP._owner is not self and not self._build():
            return None, False
        h, a, c = self._solver(), e[0], e[1]
        self.calls += 1
        h.changeColsCost(self.d, self._cols, np.array([float(v) for v in a]))
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None, False
        value = h.getInfo().objective_function_value + float(c)
        if value < -1e-7 * (1 + abs(float(c))):
            return None, True
        y = h.getSolution().row_dual
        safe_first = self.d > floatlp.SAFE_BOUND_FIRST_ABOVE  # the order floatlp.farkas uses
        if safe_first and (proof := self._safe_bound(e, y)) is not None:
            return proof, True
        support = [i for i, v in enumerate(y) if v > 1e-12]
        lam = _support_solve([self.rows[i].a for i in support], a)
        if lam is not None and all(v >= 0 for v in lam):
            r = c - sum((v * self.rows[i].c for v, i in zip(lam, support) if v), ZERO)
            if r >= 0:
                return tuple((i, v) for v, i in zip(lam, support) if v > 0), True
        if not safe_first and (proof := self._safe_bound(e, y)) is not None:
            return proof, True
        return None, False

    def _safe_bound(self, e, y) -> Farkas | None:
        """``floatlp.from_dual``: y rounded, its exact residual absorbed by the cell's bound
        rows (the kernel's Farkas rule checks the result), or None."""
        if not floatlp.safe_bound_enabled():
            return None
        if self.bounds is None:
            self.bounds = floatlp.bound_rows(self.rows, self.d)
        return floatlp.from_dual(self.rows, e, False, y, self.bounds)


def _levels(p, need: set[int]) -> list[tuple[list, list]]:
    """The nodes of ``need`` by level (one more than the highest level of the nodes a node
    reads; nodes of the inputs alone are level 0), each level as (its Lin nodes, its other
    nodes), each node with the nodes it reads: no node reads one of its own level, so a level
    is evaluated at once after the levels below."""
    level: list[int] = []
    for node in p.nodes:
        level.append(1 + max((level[j] for j in _reads(node)), default=-1))
    out: list[tuple[list, list]] = [([], []) for _ in range(max(level, default=-1) + 1)]
    for i in sorted(need):
        out[level[i]][0 if isinstance(p.nodes[i], Lin) else 1].append((i, _reads(p.nodes[i])))
    return out


def lin_values(p, nodes: tuple[int, ...], vals: list, weights: dict) -> list:
    """The affine maps of the Lin nodes ``nodes`` (none reading another) from the maps
    ``vals`` of the nodes they read: one exact product W V (FLINT), W[m][r] the weight of node
    r in node m and V[r] = (node r's coefficients, its constant), plus each node's own input
    coefficients and constant.  ``weights`` caches (the nodes read, W) by ``nodes``."""
    d, lin = p.dim, [p.nodes[i] for i in nodes]
    if nodes not in weights:
        read = sorted({j for n in lin for j, _ in n.terms})
        col = {j: t for t, j in enumerate(read)}
        W = [ZERO] * (len(lin) * len(read))
        for m, n in enumerate(lin):
            for j, w in n.terms:
                W[m * len(read) + col[j]] += w
        weights[nodes] = read, RatMatrix(len(lin), len(read), W) if read else None
    read, Wm = weights[nodes]
    V = [v for j in read for v in vals[j][0] + (vals[j][1],)]
    P = (Wm * RatMatrix(len(read), d + 1, V)).entries() if read else [ZERO] * (len(lin) * (d + 1))
    out = []
    for m, n in enumerate(lin):
        a = list(P[m * (d + 1) : m * (d + 1) + d])
        for t, v in n.x:
            a[t] += v
        out.append((tuple(a), P[m * (d + 1) + d] + n.c))
    return out


def _support_solve(vectors, target):
    """lambda with sum_i lambda_i vectors[i] = target exactly, or None: one exact solve
    (FLINT) when the vectors are as many as the coordinates and independent, else
    ``certify._solve`` (Gaussian elimination, any consistent solution)."""
    d = len(target)
    if len(vectors) == d:
        M = RatMatrix(d, d, [v[t] for t in range(d) for v in vectors])
        try:
            return M.solve(RatMatrix(d, 1, list(target))).entries()
        except ZeroDivisionError:
            pass
    return _solve(vectors, target)


class _Cell:
    """The walk over a program on one cell: the exact affine maps of its nodes (``vals``)
    and, for guesses and screens only, their float copies with float bounds over the box
    (``floats``: (coefficients and constant, lower bound, upper bound, magnitude)), level
    by level (``vectorized.levels._levels``)."""

    def __init__(self, p, box: Box | None, oracle: _Oracle):
        self.p, self.box, self.oracle = p, box, oracle
        self.levels = _levels(p, cone(p, p.outputs))
        self.weights: dict = {}
        d = p.dim
        if box is not None:
            self.lo = np.array([float(v) for v in box.lower])
            self.hi = np.array([float(v) for v in box.upper])
        else:
            self.lo, self.hi = np.full(d, -np.inf), np.full(d, np.inf)
        self.mag = np.append(np.maximum(np.abs(self.lo), np.abs(self.hi)), 1.0)
        self.stats = {"box": 0, "lp": 0, "oracle": 0}

    def _floats(self, maps) -> list:
        """(F, low, up, magnitude) per map: F in floats, its bounds over the box in floats,
        and sum |F_t| max(|l_t|, |u_t|) + |constant|, which bounds the rounding of those."""
        d = self.p.dim
        F = np.array([[float(t) for t in a] + [float(c)] for a, c in maps])
        pos, neg = np.maximum(F[:, :d], 0), np.minimum(F[:, :d], 0)
        with np.errstate(invalid="ignore"):
            low = F[:, d] + pos @ self.lo + neg @ self.hi
            up = F[:, d] + pos @ self.hi + neg @ self.lo
            mag = np.abs(F) @ self.mag  # nan without a box: no comparison holds
        return list(zip(F.tolist(), low.tolist(), up.tolist(), mag.tolist()))

    def walk(self, rows, G, h, point, vals: list, floats: list):
        """(choices proved on the cell, None) once every node the outputs read is known (vals
        and floats filled in place), or (choices, gap) at the first level with a Max node
        whose choice is not settled on the cell: split there on gap >= 0 / gap < 0 (the
        choices hold on both halves, and are stated at the split)."""
        p = self.p
        pf = np.append(point, 1.0)
        lp = _CellLP(rows, G, h, p.dim)
        choices, gap = [], None
        for lins, others in self.levels:
            ready = tuple(
                i for i, r in lins if vals[i] is None and None not in [vals[j] for j in r]
            )
            if ready:
                maps = lin_values(p, ready, vals, self.weights)
                for i, v, f in zip(ready, maps, self._floats(maps)):
                    vals[i], floats[i] = v, f
            todo = [i for i, r in others if vals[i] is None and None not in [vals[j] for j in r]]
            if not todo:
                continue
            # every argument's value at the point, in floats, in one product: the guesses
            flat = [j for i in todo for j in p.nodes[i].args]
            at_all = (np.array([floats[j][0] for j in flat]) @ pf).tolist()
            start = 0
            for i in todo:
                args = p.nodes[i].args
                at = at_all[start : start + len(args)]
                start += len(args)
                k = at.index(max(at))
                proofs = []
                for j, arg in enumerate(args):
                    pr = None if j == k else self._prove(args[k], arg, vals, floats, rows, lp)
                    if j != k and pr is None:
                        break
                    proofs.append(pr)
                if len(proofs) < len(args):
                    if gap is None:
                        gap = _sub(vals[args[k]], vals[args[j]])
                    continue
                choices.append((0, i, Choice(k, tuple(proofs))))
                vals[i], floats[i] = vals[args[k]], floats[args[k]]
            if gap is not None:
                break
        self.oracle.float_calls += lp.calls
        return choices, gap

    def _prove(self, u, v, vals, floats, rows, lp):
        """Farkas multipliers for node u - node v >= 0 on the cell, or None: by the box when
        the float bounds give min u - max v > 0 by far more than their rounding (then the
        exact minimum of u - v over the box is positive: multipliers |a_t| on the box's
        rows), else the cell's float LP made exact, else the oracle."""
        fu, fv = floats[u], floats[v]
        if self.box is not None and fu[1] - fv[2] > 1e-9 * (fu[3] + fv[3]):
            self.stats["box"] += 1
            d, (a, _), (b, c) = self.p.dim, vals[u], vals[v]
            if c or any(b):  # not the constant 0 (a ReLU's other argument)
                a = [x - y for x, y in zip(a, b)]
            proof = []
            for t, x in enumerate(a):
                if x:
                    proof.append((t, -x) if x < 0 else (d + t, x))
            return tuple(proof)
        e = _sub(vals[u], vals[v])
        self.stats["lp"] += 1
        pr, decided = lp.farkas(e)
        if pr is not None or decided:
            return pr
        self.stats["oracle"] += 1
        return self.oracle.farkas(rows, e, False)


def _floats_of(row: Row):
    """(a, c) of the row in floats, or None when a number is too large for a float."""
    try:
        a, c = np.array([float(v) for v in row.a]), float(row.c)
    except OverflowError:
        return None
    return (a, c) if np.isfinite(a).all() and np.isfinite(c) else None


def _float_nudge(G, h, p, a, c):
    """A float point inside G x + h > 0 and a . x + c > 0 by a margin, found by moving p (a
    point of the first) along a, halfway between where the new row turns positive and where
    the first row it decreases reaches 0; None if there is no room.  A guess only: points
    guide the choices, and a wrong guess costs a split."""
    norm = float(a @ a)
    if norm == 0:
        return None
    need = max(-(float(a @ p) + c) / norm, 0.0)
    slope, value = G @ a, G @ p + h
    down = slope < 0
    limit = float(np.min(value[down] / -slope[down])) if down.any() else need + 2.0
    if not limit > need:
        return None
    q = p + (need + limit) / 2 * a
    scale = 1e-9 * (1 + np.abs(G) @ np.abs(q) + np.abs(h))
    if (G @ q + h > scale).all() and float(a @ q) + c > 1e-9 * (1 + np.abs(a) @ np.abs(q)):
        return q
    return None


@dataclass(frozen=True, slots=True)
class OpenCell:
    """A cell ``build_case_tree`` handed back unsolved, its cell budget spent: a placeholder
    in the tree it returns.  ``rows``: the cell's rows as the kernel's walk gives them (the
    domain's, then the split rows on the path, in order); ``vals`` / ``floats``: the exact
    affine map of every node known on the cell (None: not yet) and its float copy, as the
    choices stated above the cell give them (those choices hold on the cell, and the kernel
    applies them to whatever subtree replaces the placeholder); ``hint``: the float point
    guessed for the cell, or None.  ``build_case_tree(..., start=cell)`` resumes there and
    builds the subtree the uninterrupted walk would have built below it."""

    rows: tuple
    vals: tuple
    floats: tuple
    hint: tuple | None


def build_case_tree(
    p,
    case: Case,
    box: Box | None,
    limits: Limits,
    relaxed: bool = False,
    budget: int | None = None,
    start: OpenCell | None = None,
):
    """A tree for the case (``kernel.property.check_case``), or NoCertificate / Violated.

    ``budget``: once that many cells (leaves) are certified, every cell not yet begun is
    left as an ``OpenCell`` placeholder instead (depth first, so the finished part is a
    prefix of the walk); ``start``: resume at such an open cell (its rows, maps and point),
    building the subtree for it alone.  None / None: the whole case.

    With ``relaxed``, first ``relaxation.build_relaxed_tree`` (input splits and ``Relaxed``
    leaves; candidate points are cell centres where the float network violates a conjunction,
    raised as Violated for the caller to check exactly); below, when it does not apply.

    Depth first over cells.  On a cell, level by level (the order in which the kernel
    evaluates), every Max node whose arguments are known gets the argument largest at the
    cell's point, with Farkas proofs (``_Cell``); the choices proved on the cell are stated
    there, so that every cell below inherits them.  At the first level with a choice not
    settled on the cell, the cell is split on that choice's gap, and the two halves resume
    from the maps known here.  Once the outputs are affine, every forbidden conjunction
    gets Farkas multipliers showing it empty on the cell, or gives a candidate point (z3)."""
    if relaxed:

        def centre(x):
            if layers_violate(p, case, x):
                raise Violated(x)

        built = build_relaxed_tree(p, case, limits, centre)
        if built is not None:
            return built
    P = case.inputs
    oracle = _Oracle(P.dim, box, None if box is not None else P, limits.deadline)
    stats: dict[str, Any] = {"leaves": 0, "splits": 0, "open": 0}
    zero = ((ZERO,) * P.dim, ZERO)
    last = [time.monotonic()]
    walker = _Cell(p, box, oracle)

    def cell(rows, G, h, vals, floats, hint=None):
        interruption.check()
        if budget is not None and stats["leaves"] >= budget:
            stats["open"] += 1
            return OpenCell(
                tuple(rows),
                tuple(vals),
                tuple(floats),
                None if hint is None else tuple(float(v) for v in hint),
            )
        if time.monotonic() > limits.deadline:
            raise NoCertificate(_late(limits))
        if stats["leaves"] >= limits.max_leaves:
            raise NoCertificate(f"more than {limits.max_leaves} cells")
        pf = hint
        if pf is None:
            pt = oracle.interior_point(rows)
            if pt is None:
                pr = oracle.farkas(rows, zero, True)
                if pr is None and time.monotonic() > limits.deadline:  # the LP was cut short
                    raise NoCertificate(_late(limits))
                if pr is None:
                    raise NoCertificate("an empty cell without a Farkas proof")
                stats["leaves"] += 1
                return Empty(pr)
            pf = np.array([float(v) for v in pt])
        vals, floats = list(vals), list(floats)
        ch, gap = walker.walk(rows, G, h, pf, vals, floats)
        if gap is not None:
            stats["splits"] += 1
            a, c = gap
            ge_row, lt_row = Row(a, c), Row(tuple(-v for v in a), -c, True)
            halves = []
            for row in (ge_row, lt_row):
                f = _floats_of(row)
                if G is None or f is None:
                    halves.append(cell(rows + [row], None, None, vals, floats))
                    continue
                G2, h2 = np.vstack([G, f[0]]), np.append(h, f[1])
                halves.append(
                    cell(rows + [row], G2, h2, vals, floats, _float_nudge(G, h, pf, f[0], f[1]))
                )
            return Split(a, c, halves[0], halves[1], tuple(ch))
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
        n = len(p.nodes)
        rows = domain_rows(P) if start is None else list(start.rows)
        vals, floats = (
            ([None] * n, [None] * n) if start is None else (list(start.vals), list(start.floats))
        )
        hint = None if start is None or start.hint is None else np.array(start.hint)
        fs = [_floats_of(r) for r in rows]
        G, h = (
            (None, None)
            if None in fs or not rows
            else (np.array([f[0] for f in fs]), np.array([f[1] for f in fs]))
        )
        tree = cell(rows, G, h, vals, floats, hint)
    except NoCertificate as e:
        raise NoCertificate(
            f"{e} ({stats['leaves']} cells certified, {stats['splits']} splits)"
        ) from None
    stats["lp_calls"] = oracle.calls
    stats["float_lp_calls"] = oracle.float_calls
    stats["proofs"] = walker.stats
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
        others = rows[:j] + rows[j + 1 :]
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
