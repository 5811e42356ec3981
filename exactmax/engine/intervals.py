"""Branch and bound over the input box with relaxed leaves proved by interval arithmetic
(``kernel.property.Relaxed``), for programs with Max nodes of any arity in few input
dimensions: lattice networks lifted to Maxout form (``cpwl/lift.py``), max of mins of affine
maps, where the ReLU relaxation of ``relaxation.py`` does not apply.  Untrusted producer.

On a cell [lo, hi] every node gets an interval, in node order: an input its bounds, a Lin node
sum a_t x_t + c + sum c_j v_j the interval sum, a Max node v = max_j A_j the interval
[max_j L_j, max_j U_j].  A forbidden conjunction is empty on the cell when one of its rows,
r(x, y) >= 0 (> 0 if strict), has an upper bound below 0.  Exactly, each bound is a Farkas
combination of the leaf's rows, built along the same recursion:

    x_t <= hi_t, x_t >= lo_t             the cell's box rows (scaled)
    v_i >= A_j  (any j: the best)        v_i's row v_i - A_j >= 0, plus A_j's lower proof
    v_i <= beta_i = max_j U_j            v_i's row u_i - v_i >= 0 with the upper function
                                         u_i = beta_i (lambda = 0), whose proofs are the
                                         arguments' upper proofs
    Lin nodes                            the sum of its terms' proofs (|coefficient| times
                                         the upper or lower proof, as the sign says)

and the conjunction's proof is its row (multiplier 1) plus the row's upper proof: the constant
U < 0 that is left is the contradiction.  Only the Max nodes whose upper bound a proof reads get
an upper function; the others have none (no row u_i - v_i).  A cell left open is halved along
the input whose halves' worst bound is best (on ties, the widest); a cell whose centre reaches
a forbidden output (floats) gives a candidate point, checked exactly by the caller."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .. import interruption
from ..kernel.certificate import Row, Split, cone, domain_rows
from ..kernel.program import Lin, Max
from ..kernel.property import Case, Relaxed, Upper
from ..kernel.rational import ONE, ZERO, Q
from .certify import Limits, NoCertificate

MAX_DEPTH = 40  # splits on one path before the builder gives up (the caller falls back)
MARGIN = 1e-9


class _Unsupported(Exception):
    pass


class _Program:
    """The cone of the outputs in node order, with float copies of the Lin nodes."""

    def __init__(self, p, case: Case):
        self.p, self.d = p, p.dim
        self.need = sorted(cone(p, p.outputs))
        self.maxes = [i for i in self.need if isinstance(p.nodes[i], Max)]
        for i in self.need:
            if not isinstance(p.nodes[i], Lin | Max):
                raise _Unsupported
        self.fl = {
            i: (
                [(t, float(v)) for t, v in n.x],
                float(n.c),
                [(j, float(v)) for j, v in n.terms],
            )
            for i in self.need
            if isinstance(n := p.nodes[i], Lin)
        }
        n_out = len(p.outputs)
        self.conj = []  # per conjunction: rows as (a over x, w over outputs, c, strict)
        for conj in case.outputs:
            rows = []
            for r in conj:
                a = tuple(r.a)
                rows.append((a[: self.d], a[self.d : self.d + n_out], r.c, r.strict))
            self.conj.append(rows)

    def intervals(self, lo, hi) -> dict:
        """Float (L, U) of every node on the box [lo, hi]."""
        iv: dict = {}
        nodes = self.p.nodes
        for i in self.need:
            if i in self.fl:
                xs, c, terms = self.fl[i]
                L = U = c
                for t, v in xs:
                    if v > 0:
                        L, U = L + v * lo[t], U + v * hi[t]
                    else:
                        L, U = L + v * hi[t], U + v * lo[t]
                for j, v in terms:
                    a, b = iv[j]
                    if v > 0:
                        L, U = L + v * a, U + v * b
                    else:
                        L, U = L + v * b, U + v * a
                iv[i] = (L, U)
            else:
                args = [iv[j] for j in nodes[i].args]
                iv[i] = (max(a for a, _ in args), max(b for _, b in args))
        return iv

    def row_upper(self, row, lo, hi, iv) -> float:
        a, w, c, _ = row
        U = float(c)
        for t, v in enumerate(a):
            if v:
                U += float(v) * (hi[t] if v > 0 else lo[t])
        for o, v in enumerate(w):
            if v:
                L_o, U_o = iv[self.p.outputs[o]]
                U += float(v) * (U_o if v > 0 else L_o)
        return U

    def worst(self, lo, hi) -> float:
        """The largest, over conjunctions, of the best row's upper bound (< 0: all closed)."""
        iv = self.intervals(lo, hi)
        return max(min(self.row_upper(r, lo, hi, iv) for r in conj) for conj in self.conj)


class _Leaf:
    """Exact bounds with Farkas proofs on one cell; row keys ("cell", i), ("low", node, j),
    ("up", node), ("conj", q) until the leaf's row order is known."""

    def __init__(self, prog: _Program, box, iv: dict):
        self.prog, self.box, self.iv = prog, box, iv
        self.memo: dict = {}
        self.uppers: dict = {}  # Max node -> (beta, proofs per argument, as dicts)

    def _x(self, t: int, upper: bool):
        idx, k, bound = self.box[t][1 if upper else 0]
        return bound, {("cell", idx): ONE / abs(k)}

    def bound(self, i: int, upper: bool):
        """(value, proof): upper: value - v_i >= 0; lower: v_i - value >= 0."""
        key = (i, upper)
        if key in self.memo:
            return self.memo[key]
        node = self.prog.p.nodes[i]
        if isinstance(node, Lin):
            val, proof = node.c, dict[tuple, Q]()
            for coef, get in [(v, lambda s, t=t: self._x(t, s)) for t, v in node.x] + [
                (v, lambda s, j=j: self.bound(j, s)) for j, v in node.terms
            ]:
                b, pr = get(upper == (coef > 0))
                val += coef * b
                _add(proof, pr, abs(coef))
        elif upper:
            if i not in self.uppers:
                ups = [self.bound(j, True) for j in node.args]
                beta = max(b for b, _ in ups)
                self.uppers[i] = (beta, [pr for _, pr in ups])
            val, proof = self.uppers[i][0], dict[tuple, Q]({("up", i): ONE})
        else:
            j = max(range(len(node.args)), key=lambda k: self.iv[node.args[k]][0])
            b, pr = self.bound(node.args[j], False)
            val, proof = b, dict[tuple, Q]({("low", i, j): ONE})
            _add(proof, pr, ONE)
        self.memo[key] = (val, proof)
        return val, proof

    def refute(self, q: int, conj) -> dict | None:
        """The proof that conjunction ``conj`` (index q) is empty on the cell, or None."""
        best = None
        for r, (a, w, c, strict) in enumerate(conj):
            val, proof = c, {("conj", r): ONE}
            for t, v in enumerate(a):
                if v:
                    b, pr = self._x(t, v > 0)
                    val += v * b
                    _add(proof, pr, abs(v))
            for o, v in enumerate(w):
                if v:
                    b, pr = self.bound(self.prog.p.outputs[o], v > 0)
                    val += v * b
                    _add(proof, pr, abs(v))
            if val < 0 or (val == 0 and strict):
                return proof
            if best is None:
                best = val
        return None

    def relaxed(self, proofs: list[dict], n_rows: int) -> Relaxed:
        """The leaf, its row keys numbered: the cell's rows, then per Max node (node order)
        its argument rows and, with an upper function, its upper row; then the conjunction's."""
        index: dict = {}
        at = n_rows
        for i in self.prog.maxes:
            for j in range(len(self.prog.p.nodes[i].args)):
                index[("low", i, j)] = at
                at += 1
            if i in self.uppers:
                index[("up", i)] = at
                at += 1

        def number(proof: dict, base: int) -> tuple:
            out = []
            for k, y in proof.items():
                if not y:
                    continue
                if k[0] == "cell":
                    out.append((k[1], y))
                elif k[0] == "conj":
                    out.append((base + k[1], y))
                else:
                    out.append((index[k], y))
            return tuple(sorted(out))

        uppers: list[Upper | None] = []
        for i in self.prog.maxes:
            if i in self.uppers:
                beta, prs = self.uppers[i]
                lam = (ZERO,) * len(prs)
                uppers.append(Upper(lam, beta, tuple(number(pr, at) for pr in prs)))
            else:
                uppers.append(None)
        return Relaxed((), tuple(uppers), tuple(number(pr, at) for pr in proofs))


def _add(into: dict, proof: dict, scale: Q) -> None:
    for k, y in proof.items():
        into[k] = into.get(k, ZERO) + scale * y


def box_rows(rows: list, d: int):
    """Per input x_t, its tightest lower and upper bound among the one-variable rows, each as
    (row index, coefficient of x_t, bound); None when an input is unbounded on a side."""
    box: list[list[Any]] = [[None, None] for _ in range(d)]
    for idx, r in enumerate(rows):
        nz = [t for t, v in enumerate(r.a) if v]
        if len(nz) == 1:
            t, k = nz[0], r.a[nz[0]]
            bound, side = -r.c / k, 0 if k > 0 else 1
            cur = box[t][side]
            if cur is None or (bound > cur[2] if side == 0 else bound < cur[2]):
                box[t][side] = (idx, k, bound)
    return None if any(None in bx for bx in box) else box


def halves(rows: list, bx, t: int, mid):
    """The split x_t >= mid / x_t < mid of a box cell: (a, (rows, box) of the ge half, of the lt
    half), the new row appended as the kernel's walk appends it."""
    d = len(bx)
    a = tuple(ONE if s == t else ZERO for s in range(d))
    ge_bx, lt_bx = [list(b) for b in bx], [list(b) for b in bx]
    ge_bx[t][0], lt_bx[t][1] = (len(rows), ONE, mid), (len(rows), -ONE, mid)
    ge = rows + [Row(a, -mid)]
    lt = rows + [Row(tuple(-v for v in a), mid, True)]
    return a, (ge, ge_bx), (lt, lt_bx)


def enter(stats: dict, limits: Limits, depth: int, max_depth: int = MAX_DEPTH) -> bool:
    """Before a box builder closes a cell: the interruption check, the deadline and the cell
    limit (NoCertificate); False when the cell is deeper than ``max_depth`` (the builder gives
    up, its caller falls back)."""
    interruption.check()
    if depth > max_depth:
        return False
    if time.monotonic() > limits.deadline:
        raise NoCertificate("time limit reached while building the certificate")
    if stats["leaves"] >= limits.max_leaves:
        raise NoCertificate(f"more than {limits.max_leaves} cells")
    return True


def closed(stats: dict, limits: Limits, last: list, leaf):
    """``leaf``, counted as a relaxed leaf (progress reported every 2 s, ``last``: when)."""
    stats["leaves"] += 1
    stats["proofs"]["relaxed"] += 1
    if limits.progress is not None and time.monotonic() - last[0] > 2:
        last[0] = time.monotonic()
        limits.progress(stats["leaves"])
    return leaf


def split(rows: list, bx, t: int, stats: dict, limits: Limits, cell, depth: int) -> Split:
    """The box cell halved along x_t at its exact midpoint, each half built by ``cell(rows,
    box, depth + 1)``; NoCertificate when the cell is too narrow or past the split limit."""
    mid = (bx[t][0][2] + bx[t][1][2]) / 2
    if not bx[t][0][2] < mid < bx[t][1][2]:
        raise NoCertificate("a cell too small to split")
    if limits.max_splits is not None and stats["splits"] >= limits.max_splits:
        raise NoCertificate(f"more than {limits.max_splits} splits")
    stats["splits"] += 1
    a, (ge_rows, ge_bx), (lt_rows, lt_bx) = halves(rows, bx, t, mid)
    return Split(a, -mid, cell(ge_rows, ge_bx, depth + 1), cell(lt_rows, lt_bx, depth + 1))


def applies(p, case: Case, dims: int = 8) -> bool:
    """Is this builder worth trying: few input dimensions, and the shape of a lattice network
    (``cpwl/lift.py``): Max nodes of arity above 2 somewhere (a ReLU network goes to
    ``relaxation.py``), every argument of a Max node affine in x plus at most one earlier
    node (max and min of affine maps, nested; interval bounds lose nothing on such a sum).
    Other Maxout networks go to the Max-choice builder, which keeps their correlations."""
    if p.dim > dims:
        return False
    need = cone(p, p.outputs)
    maxes = [n for i in need if isinstance(n := p.nodes[i], Max)]
    return any(len(n.args) > 2 for n in maxes) and all(
        isinstance(a := p.nodes[j], Lin) and len(a.terms) <= 1 for n in maxes for j in n.args
    )


def build_interval_tree(p, case: Case, limits: Limits, violated, box0=None):
    """A tree of input splits and ``Relaxed`` leaves for the case, or None (not a box, a node
    kind it does not read, or deeper than MAX_DEPTH); ``violated(x)`` raises with a candidate."""
    try:
        prog = _Program(p, case)
    except _Unsupported:
        return None
    d, rows0 = p.dim, domain_rows(case.inputs)
    box = box_rows(rows0, d)
    if box is None or any(bx[0][2] > bx[1][2] for bx in box):
        return None
    stats: dict[str, Any] = {"leaves": 0, "splits": 0, "proofs": {"relaxed": 0}}
    last = [time.monotonic()]

    def close(rows, bx, lo, hi):
        iv = prog.intervals(lo, hi)
        if any(min(prog.row_upper(r, lo, hi, iv) for r in conj) >= -MARGIN for conj in prog.conj):
            return None
        leaf = _Leaf(prog, bx, iv)
        proofs = []
        for q, conj in enumerate(prog.conj):
            pr = leaf.refute(q, conj)
            if pr is None:
                return None  # floats too optimistic: split
            proofs.append(pr)
        return leaf.relaxed(proofs, len(rows))

    def cell(rows, bx, depth=0):
        if not enter(stats, limits, depth):
            raise _Unsupported
        lo = np.array([float(b[0][2]) for b in bx])
        hi = np.array([float(b[1][2]) for b in bx])
        leaf = close(rows, bx, lo, hi)
        if leaf is not None:
            return closed(stats, limits, last, leaf)
        centre = [(bx[t][0][2] + bx[t][1][2]) / 2 for t in range(d)]
        violated(tuple(centre))  # raises when the centre is a counterexample
        scores = []
        for t in range(d):  # the worse half's bound, per input; the widest on ties
            mid = (lo[t] + hi[t]) / 2
            at = np.arange(d) == t
            both = (prog.worst(lo, np.where(at, mid, hi)), prog.worst(np.where(at, mid, lo), hi))
            scores.append((max(both), -(hi[t] - lo[t])))
        t = min(range(d), key=lambda s: scores[s])
        return split(rows, bx, t, stats, limits, cell, depth)

    try:
        return cell(list(rows0), box), stats
    except _Unsupported:
        return None
