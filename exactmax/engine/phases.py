"""Phase splits in a relaxed leaf: branch and bound on which argument of a Max node wins.

Untrusted producer of ``kernel.property.Phase`` proofs.  A ``Relaxed`` leaf turns the cell's
unfixed Max nodes into variables v of z = (x, v ...) with the rows v - A_j >= 0 and u - v >= 0
(``kernel.property.relax``); when no Farkas combination of those rows and a forbidden
conjunction's rows is contradictory (the relaxation is too loose), the conjunction is split on
the phase of one node: branch k adds A_k - A_j >= 0 and A_k - v >= 0 (so v = A_k there; for a
ReLU v = max(a, 0): "active", v = a and a >= 0, or "inactive", v = 0 and a <= 0), and each
branch is closed in turn, splitting again where needed.  A branch and bound on ReLU phases, as
in BaBSR and beta-CROWN, but over the fixed upper functions of the leaf: what a split buys is
exactly the rows it adds.

Each branch is an LP in floats (HiGHS): maximise t subject to the leaf's relaxation rows >= 0
and the conjunction's rows, the phase rows and the cell's rows other than its box >= t, x in
the box.  Feasible and bounded whatever the phases (the relaxation rows hold at z's true value
for every x of the box; t absorbs the rest), so its optimal duals always exist: when t* < 0
they are Farkas multipliers up to rounding.  They are made exact as the safe bound of
``floatlp`` does, with one more step: the multipliers are rounded to dyadics, the residual
linear part is computed exactly and removed variable by variable, last first (a positive
coefficient of v by the row u - v >= 0, which leaves terms on earlier variables and x, a
negative one by v - 0 >= 0), then on x by the box rows; the proof is kept only if the constant
is then negative.  The kernel checks it again.  The split chosen is the unfixed node with the
largest (relaxed value - true value) at the LP optimum times the dual of its row u - v >= 0
(``BRANCH_BY_DUAL``; the gap alone needed twice the leaves on MNIST); a branch whose LP optimum
makes every node exact and violates the conjunction gives a candidate point, checked exactly by
the caller (``violated``).
"""

from __future__ import annotations

import os
import time

import numpy as np

from .. import interruption
from ..kernel.certificate import Row, lin_map
from ..kernel.program import Lin, Max
from ..kernel.property import Phase, Tighten, Upper, _argument, compose, phase_rows, relax
from ..kernel.rational import ONE, ZERO, Q
from .certify import NoCertificate
from .floatlp import dyadic, new_solver

MARGIN = 1e-7
"""An LP optimum t* must be below -MARGIN (relative) before its duals are made exact."""
SIMPLEX_ITERATIONS = 5000
"""Dual simplex iterations a branch's LP may take before it is solved by IPM instead."""
BRANCH_BY_DUAL = os.environ.get("EXACTMAX_PHASE_BRANCH", "dual") == "dual"
"""The node split: the largest (relaxed - true value) at the LP optimum times the dual of its
upper row u - v >= 0 (how much that row holds the bound up), else the largest gap alone."""
MAX_DEPTH = 100
"""Phase splits on one path (each on another node) before the cell is given up: the certificate
stays within what JSON, pickle (the kernel's check on worker processes) and the reader
(``io/property_certificate.MAX_PHASE_DEPTH``, 200) take."""
BITS = 40
"""Significant bits the float multipliers keep (any rounding is sound; the kernel checks)."""
_T = os.environ.get("EXACTMAX_PHASE_TIGHTEN", "16").strip()
TIGHTEN = int(_T) if _T.isdigit() else 16
"""In a branch left open, this many ReLU nodes after the split (the largest gap between their
relaxed and true values at the LP optimum, weighted by the dual of their upper row) get upper
functions of their own from their bounds on the branch (two LPs each;
``kernel.property.Tighten``); 0: the leaf's upper functions only (not a number: 16)."""
GRID = 2**16
"""Bounds and slopes of upper functions (the leaf's, ``relaxation``, and a branch's) are rounded
outward to 1/GRID: every number stays dyadic, which keeps the exact arithmetic short."""


class Unclosed(Exception):
    """The phase tree could not be completed (leaf budget, or no node left to split)."""


def relaxed_rows(p, need, rows: list[Row], uppers, at: str = "cell", extra=()):
    """(vals, rows, variables) of a ``Relaxed`` leaf with these upper functions on the cell of
    ``rows``, computed by the kernel's own ``relax`` (so the producer's row numbers are the
    kernel's, for a leaf that, like the splits above it, states no choices: the relaxed
    builder's); variables: the Max nodes that became variables, in order (z_{d + m} is the
    m-th); ``extra``: the leaf's extra rows (``Relaxed.extra``), after the variables' rows."""
    vals: list = [None] * len(p.nodes)
    for i in need:
        node = p.nodes[i]
        if isinstance(node, Lin) and all(vals[j] for j, _ in node.terms):
            vals[i] = lin_map(node, vals, p.dim)
    free = [i for i in need if vals[i] is None and isinstance(p.nodes[i], Max)]
    variables = [i for i, u in zip(free, uppers) if _argument(u) is None]
    vals, rows = relax(p, need, vals, list(rows), uppers, at, extra)
    return vals, rows, variables


class PhaseProblem:
    """The relaxed leaf of one cell: its z-space rows (``relaxed_rows``), its variables and
    their rows.  ``box[t]``: ((row, coefficient, bound) below, (...) above) of x_t."""

    def __init__(self, p, vals: list, rows: list[Row], variables, n_cell: int, box):
        self.p, self.vals, self.rows, self.box = p, vals, rows, box
        d = p.dim
        self.d, self.D = d, d + len(variables)
        self.var: list[tuple[int, int, int, int]] = []  # (node, coordinate, row v - 0, row u - v)
        at = n_cell  # relax adds, per variable in node order, v - A_j (each j), then u - v
        for m, i in enumerate(variables):
            args = p.nodes[i].args
            zero = [j for j, a in enumerate(args) if not any(vals[a][0]) and not vals[a][1]]
            self.var.append((i, d + m, at + zero[0] if zero else -1, at + len(args)))
            at += len(args) + 1
        self.n_cell = n_cell
        self.lo = np.array([float(b[0][2]) for b in box])
        self.hi = np.array([float(b[1][2]) for b in box])
        self.fl: dict = {}  # node -> float maps of its arguments over (z, 1)

    def _float(self, m) -> np.ndarray:
        return np.array([float(w) for w in m[0]] + [float(m[1])])

    def node_maps(self, i):
        if i not in self.fl:
            node = self.p.nodes[i]
            self.fl[i] = ([self._float(self.vals[a]) for a in node.args], self._float(self.vals[i]))
        return self.fl[i]


def prove_conjunction(
    prob: PhaseProblem, conj, deadline: float, max_leaves: int, violated, stats: dict
):
    """A proof (Farkas multipliers or a ``Phase``) that no z of the relaxed leaf satisfies
    the conjunction ``conj`` (its rows over (x, y)), or raise ``Unclosed``."""
    import highspy

    p, d, D = prob.p, prob.d, prob.D
    ys = [prob.vals[o] for o in p.outputs]
    rows = prob.rows + [compose(r, ys, d) for r in conj]
    n0 = len(rows)
    # LP columns: z (D), then t; rows: every kernel row that is not one of the box's
    boxrows = {b[s][0] for b in prob.box for s in (0, 1)}
    lp_rows = [i for i in range(n0) if i not in boxrows]
    relax_rows = set(range(prob.n_cell, len(prob.rows)))
    h = new_solver()
    inf = highspy.kHighsInf
    xlo = np.full(D + 1, -inf)
    xhi = np.full(D + 1, inf)
    xlo[:d], xhi[:d] = prob.lo, prob.hi
    h.addVars(D + 1, xlo, xhi)
    h.changeColsCost(1, np.array([D], dtype=np.int32), np.array([-1.0]))

    def add(rs, with_t):
        starts: list[int] = []
        idx: list[int] = []
        val: list[float] = []
        lo: list[float] = []
        for r, wt in zip(rs, with_t):
            starts.append(len(idx))
            for t, w in r.nz:
                idx.append(t)
                val.append(float(w))
            if wt:
                idx.append(D)
                val.append(-1.0)
            lo.append(-float(r.c))
        h.addRows(
            len(rs),
            np.array(lo),
            np.full(len(rs), inf),
            len(idx),
            np.array(starts, dtype=np.int32),
            np.array(idx, dtype=np.int32),
            np.array(val),
        )

    add([rows[i] for i in lp_rows], [i not in relax_rows for i in lp_rows])
    lp_of = list(lp_rows)  # LP row -> kernel row
    lp_pos = {k: r for r, k in enumerate(lp_rows)}  # kernel row -> LP row, for the base rows

    def solve():
        # the dual simplex from the last basis first (a branch adds two rows: a few
        # iterations), with a limit: on some of these LPs it stalls for minutes; then IPM
        h.setOptionValue("solver", "simplex")
        h.setOptionValue("simplex_iteration_limit", SIMPLEX_ITERATIONS)
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            h.setOptionValue("solver", "ipm")
            h.setOptionValue("simplex_iteration_limit", 2**31 - 1)
            h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None, None, None
        sol = h.getSolution()
        t_star = -h.getInfo().objective_function_value
        return t_star, np.array(sol.col_value), np.array(sol.row_dual)

    def exact(cell: list[Row], y, target=None) -> tuple | None:
        """The duals y made exact: Farkas multipliers of 0 > 0 (proof or None); with a map
        ``target`` e, (multipliers, B) such that e >= B on the cell by them."""
        lam: dict = {}
        top = float(np.abs(y).max()) if len(y) else 0.0
        for r in np.flatnonzero(y > 1e-12 * top).tolist():
            q = dyadic(float(y[r]), BITS)
            if q:
                lam[lp_of[r]] = q
        res = [ZERO] * D if target is None else [-w for w in target[0]]
        K = ZERO
        for i, q in lam.items():
            for t, w in cell[i].nz:
                res[t] += q * w
            K += q * cell[i].c

        def use(i, mu):
            lam[i] = lam.get(i, ZERO) + mu
            for t, w in cell[i].nz:
                res[t] += mu * w
            return mu * cell[i].c

        for _, t, r_ge0, r_up in reversed(prob.var):
            g = res[t]
            if g > 0:
                K += use(r_up, g)
            elif g < 0:
                if r_ge0 < 0:
                    return None
                K += use(r_ge0, -g)
        for t in range(d):
            g = res[t]
            if g:
                i, k, _ = prob.box[t][1 if g > 0 else 0]
                K += use(i, -g / k)
        if any(res):
            return None
        if target is not None:  # sum lam row = e's linear part + K >= 0: e >= e_c - K
            return {i: q for i, q in lam.items() if q}, target[1] - K
        return tuple(sorted(lam.items())) if K < 0 else None

    def bound_lp(cost: np.ndarray):
        """min cost . z over the branch with t = 0 (every row >= 0): (optimum, row duals)."""
        h.changeColBounds(D, 0.0, 0.0)
        h.changeColsCost(D + 1, np.arange(D + 1, dtype=np.int32), np.append(cost, 0.0))
        try:
            h.setOptionValue("solver", "simplex")
            h.setOptionValue("simplex_iteration_limit", SIMPLEX_ITERATIONS)
            h.run()
            if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
                return None
            return np.array(h.getSolution().row_dual)
        finally:
            h.changeColBounds(D, -inf, inf)
            cost0 = np.zeros(D + 1)
            cost0[D] = -1.0
            h.changeColsCost(D + 1, np.arange(D + 1, dtype=np.int32), cost0)

    def tighten(cell: list[Row], pick: int, fixed: frozenset, z, y):
        """New upper functions, proved on the cell, for the TIGHTEN ReLU nodes after ``pick``
        that hold the bound up most: [(node, Upper, row u - v >= 0)]."""
        zt = np.append(z[:D], 1.0)
        scored = []
        for i, t, r_ge0, r_up in prob.var:
            args = p.nodes[i].args
            if i <= pick or i in fixed or r_ge0 < 0 or len(args) != 2:
                continue
            amaps, _ = prob.node_maps(i)
            gap = z[t] - max(float(a @ zt) for a in amaps)
            score = gap * (max(float(y[lp_pos[r_up]]), 0.0) + 1e-3)
            if score > 1e-12:
                scored.append((score, i, t))
        out: list = []
        cell = list(cell)
        for _, i, t in sorted(sorted(scored, reverse=True)[:TIGHTEN], key=lambda c: c[1]):
            interruption.check()
            if time.monotonic() > deadline:  # the nodes tightened so far are kept
                break
            node = p.nodes[i]
            k0 = 0 if not any(prob.vals[node.args[0]][0]) and not prob.vals[node.args[0]][1] else 1
            ka = 1 - k0  # the argument a (the other is 0)
            a = prob.vals[node.args[ka]]
            fa = np.array([float(w) for w in a[0]])
            neg_a = (tuple(-w for w in a[0]), -a[1])
            lo_y, hi_y = bound_lp(fa), bound_lp(-fa)
            if lo_y is None or hi_y is None:
                continue
            lo, hi = exact(cell, lo_y, a), exact(cell, hi_y, neg_a)
            if lo is None or hi is None:
                continue
            (ml, Lx), (mu, nUx) = lo, hi
            Ux = -nUx
            lam = [ZERO, ZERO]
            proofs: list = [(), ()]
            if Lx >= 0:  # v = a on the branch
                lam[ka] = ONE
                proofs[k0] = _proof(ml, ONE)
                beta = ZERO
            elif Ux <= 0:  # v = 0
                proofs[ka] = _proof(mu, ONE)
                beta = ZERO
            else:
                L, U = _down(Lx), _up(Ux)
                su = _down(U / (U - L))
                beta = max(-su * L, U - su * U)
                lam[ka] = su
                proofs[ka], proofs[k0] = _proof(mu, ONE - su), _proof(ml, su)
            u = Upper(tuple(lam), beta, tuple(proofs))
            uf = lin_map(Lin((), beta, tuple(enumerate(lam))), [prob.vals[j] for j in node.args], D)
            row = Row(tuple(w - (ONE if c == t else ZERO) for c, w in enumerate(uf[0])), uf[1])
            out.append((i, u, row))
            add([row], [False])  # in the LP at once: the next nodes' bounds use it
            lp_of.append(len(cell))
            cell.append(row)
        return out

    count, noted = [0], [time.monotonic()]

    def branch(path_rows: list[Row], fixed: frozenset, depth: int, pick_parent: int = -1):
        interruption.check()
        if depth > MAX_DEPTH:
            raise Unclosed(f"a phase path deeper than {MAX_DEPTH}")
        if time.monotonic() > deadline:
            raise NoCertificate("time limit reached while building the certificate")
        t_star, z, y = solve()
        if t_star is None:
            raise Unclosed("an LP of a phase branch failed")
        cell = rows + path_rows
        if t_star < -MARGIN * (1 + abs(t_star)):
            proof = exact(cell, y)
            if proof is not None:
                return closed(proof)
        if TIGHTEN and pick_parent >= 0:
            n_before = h.getNumRow()
            new = tighten(cell, pick_parent, fixed, z, y)  # their rows added to the LP
            if new:
                key = "tightened"
                stats["proofs"][key] = stats["proofs"].get(key, 0) + len(new)
                try:
                    then = branch(path_rows + [r for _, _, r in new], fixed, depth, -1)
                finally:
                    h.deleteRows(len(new), np.arange(n_before, n_before + len(new), dtype=np.int32))
                    del lp_of[n_before:]
                return Tighten(tuple(i for i, _, _ in new), tuple(u for _, u, _ in new), then)
        best, pick = 0.0, None
        zt = np.append(z[:D], 1.0)
        for i, t, _, r_up in prob.var:
            if i in fixed:
                continue
            args, _ = prob.node_maps(i)
            gap = z[t] - max(float(a @ zt) for a in args)
            if gap <= 1e-9:
                continue
            score = gap * (max(float(y[lp_pos[r_up]]), 0.0) + 1e-6) if BRANCH_BY_DUAL else gap
            if score > best:
                best, pick = score, i
        if pick is None:  # the LP's point is the network's own (in floats): a candidate
            violated(tuple(_inside(v, b) for v, b in zip(z[:d].tolist(), prob.box)))
            raise Unclosed("no node left to split")
        node = p.nodes[pick]
        args = [prob.vals[a] for a in node.args]
        branches = []
        for k in range(len(args)):
            own = phase_rows(args, prob.vals[pick], k)
            n_before = h.getNumRow()
            add(own, [True] * len(own))
            lp_of.extend(range(len(cell), len(cell) + len(own)))
            try:
                branches.append(branch(path_rows + own, fixed | {pick}, depth + 1, pick))
            finally:
                h.deleteRows(len(own), np.arange(n_before, n_before + len(own), dtype=np.int32))
                del lp_of[n_before:]
        stats["proofs"]["phase_splits"] = stats["proofs"].get("phase_splits", 0) + 1
        return Phase(pick, tuple(branches))

    def closed(proof):
        count[0] += 1
        stats["proofs"]["phase_leaves"] = stats["proofs"].get("phase_leaves", 0) + 1
        if time.monotonic() - noted[0] > 2:  # how far it got, for an answer at the time limit
            noted[0] = time.monotonic()
            interruption.note_stats(phase_leaves=stats["proofs"]["phase_leaves"])
        if count[0] > max_leaves:
            raise Unclosed(f"more than {max_leaves} phase leaves")
        return proof

    return branch([], frozenset(), 0)


def _proof(m: dict, scale: Q) -> tuple:
    """The multipliers m scaled, in row order; none when scale is 0 (the kernel wants positive
    ones)."""
    return tuple((i, scale * y) for i, y in sorted(m.items()) if y) if scale else ()


def _down(v: Q) -> Q:
    return Q((v * GRID).floor(), GRID)


def _up(v: Q) -> Q:
    return Q((v * GRID).ceil(), GRID)


def _inside(v: float, bounds) -> Q:
    """The float v as an exact rational, moved into [lower, upper] of the box."""
    q = Q(*v.as_integer_ratio())
    return min(max(q, bounds[0][2]), bounds[1][2])
