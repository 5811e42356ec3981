"""Differential bounds: relaxed leaves for the pair program of two ReLU networks of one depth.

Untrusted producer for ``equiv A B --epsilon E`` / ``--top1`` when A and B are ReLU networks
of the same depth (a network and its pruned, quantised or fine-tuned twin; units may have been
removed, see ``PairLayers``) on a box.  Unit u of
hidden layer k is v = max(a, 0) in A and w = max(b, 0) in B; Delta = a - b, delta = v - w.
Since ReLU is monotone and 1-Lipschitz, min(0, Delta) <= delta <= max(0, Delta): the two
networks' errors cancel where they agree, instead of adding up as two separate relaxations
do (a 5%-pruned ACAS Xu network differs from its original by 0.005 where each output ranges
over tens).

On a cell (a box, halved along inputs as in ``relaxation.py``) each network gets the kernel's
usual relaxed rows (``relaxation._Exact``: a stable unit fixed to a or 0, an unstable one a
variable with v >= a, v >= 0, v <= s a + t); then the leaf's ``extra`` rows, layer by layer,
bound delta where a unit is a variable in one network and not fixed to 0 in the other:

    v <= w + s Delta + t   (s Delta + t >= max(0, Delta) on [L, U], Delta's proved bounds)
    w <= v - s' Delta + t' (-s' Delta + t' >= max(0, -Delta))

each an upper function of the kernel's form: u = s a + t + 1 * [w's node] - s * [b's node],
proved >= a by w - b >= 0 and (1 - s) times Delta <= U, and >= 0 by w >= 0 and s times
Delta >= L.  Bounds of Delta and of the forbidden rows a_o - b_o - E come from back-substitution
over both networks at once: a coefficient pair (p, q) on (v, w) of opposite signs is split as
r (v - w) + (p - r) v + (q + r) w with r the smaller of |p|, |q| (signed), r (v - w) bounded by
a delta row in terms of Delta = a - b, the rest by each network's own rows.  Floats choose
(which cells close, where to split); the exact pass's coefficients are the Farkas multipliers,
and the kernel checks the leaf against the pair program itself.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..kernel.certificate import cone, domain_rows
from ..kernel.maxout import MaxoutNetwork, evaluate_maxout
from ..kernel.pair import program_of_pair
from ..kernel.program import Max, program_of_maxout
from ..kernel.property import Case, Relaxed, Upper
from ..kernel.rational import ONE, ZERO, Q, RatMatrix
from . import intervals, phases
from .casetree import Violated
from .certify import Limits, NoCertificate
from .phases import _down, _proof, _up
from .relaxation import (
    MARGIN,
    MAX_DEPTH,
    Layers,
    OpenBox,
    _arg_order,
    _Exact,
    _float_bounds,
    _Unsupported,
)

PHASES = True
"""A cell the delta rows leave open is tried with phase splits (``phases.py``) before it is
halved, once it is PHASE_DEPTH input splits deep (or as many as the box has inputs of non-zero
width, if fewer: above, cells are wide and have too many unstable units for phase splits to
pay); a box of more than INPUT_SPLITS inputs at once."""
PHASE_DEPTH = 5
"""ACAS Xu 1-6 against its 5%-pruned twin, epsilon 1% above the largest gap: 353 leaves without
phase splits, 32 with them from depth 5 (16 from depth 4, 60 from depth 6; from depth 0,
minutes before a leaf)."""
PHASE_LEAVES = 200
"""Phase leaves per conjunction and cell before the cell is halved instead (or given up)."""
INPUT_SPLITS = 16
"""A box with more inputs of non-zero width than this is not halved (an image-sized box closes
at once or not at all), and is built in the coordinating process, not in work units."""


class PairLayers:
    """A and B as ReLU layers (``relaxation.Layers``: the units the outputs read); B's node
    numbers shifted to the pair program's (``kernel.pair.program_of_pair``: A's nodes, then
    B's).  Unit u of A's layer k and unit u' of B's correspond (``pairs[k]``: (u, u') lists)
    where they are the same unit of the two networks (the same rank among the Max nodes: one
    per unit, layer by layer) if the networks have the same widths, else where ``_nearest``
    pairs them (units removed by structured pruning); a unit without a partner is bounded by
    its own network's rows alone."""

    def __init__(self, a, b, case: Case):
        if not (isinstance(a, MaxoutNetwork) and isinstance(b, MaxoutNetwork)):
            raise _Unsupported
        f, g = program_of_maxout(a), program_of_maxout(b)
        self.A, self.B = Layers(f, case), Layers(g, case)
        shift = len(f.nodes)
        if len(self.A.ids) != len(self.B.ids) or len(f.outputs) != len(g.outputs):
            raise _Unsupported
        if any(_arg_order(f, i) != (0, 1) for ids in self.A.ids for i in ids):
            raise _Unsupported
        if any(_arg_order(g, i) != (0, 1) for ids in self.B.ids for i in ids):
            raise _Unsupported
        self.dim, self.n_out, self.K = f.dim, len(f.outputs), len(self.A.ids)
        rank_f = {
            i: r for r, i in enumerate(i for i, n in enumerate(f.nodes) if isinstance(n, Max))
        }
        rank_g = {
            i: r for r, i in enumerate(i for i, n in enumerate(g.nodes) if isinstance(n, Max))
        }
        same = [len(x.units) for x in a.layers] == [len(x.units) for x in b.layers]
        self.pairs: list[list[tuple[int, int]]] = []
        for k, (ia, ib) in enumerate(zip(self.A.ids, self.B.ids)):
            if same:  # the same unit: the same rank among the Max nodes
                where = {rank_g[i]: u for u, i in enumerate(ib)}
                self.pairs.append(
                    [(u, where[rank_f[i]]) for u, i in enumerate(ia) if rank_f[i] in where]
                )
            else:  # units removed (structured pruning): the nearest rows correspond
                self.pairs.append(_nearest(self.A, self.B, k, self.pairs[-1] if k else None))
        # pair-program node numbers: (Max node, its pre-activation Lin node) per unit
        self.nodes_a = [[(i, _pre(f, i)) for i in ids] for ids in self.A.ids]
        self.nodes_b = [[(i + shift, _pre(g, i) + shift) for i in ids] for ids in self.B.ids]


def _nearest(A: Layers, B: Layers, k: int, prev) -> list[tuple[int, int]]:
    """(u, u') pairs of layer k's units of A and B, each unit in at most one: greedily the
    nearest (weights over x, or over the previous layer's paired units, and bias; Euclidean,
    in floats) first, none further apart than half the larger row's norm.  Any pairing is
    sound (delta rows are proved); a good one keeps Delta small."""
    Wa, Wb = A.Wf[k], B.Wf[k]
    if prev is not None:
        Wa, Wb = Wa[:, [u for u, _ in prev]], Wb[:, [v for _, v in prev]]
    Ra, Rb = np.hstack([Wa, A.bf[k][:, None]]), np.hstack([Wb, B.bf[k][:, None]])
    na, nb = (Ra * Ra).sum(1), (Rb * Rb).sum(1)
    dist = np.sqrt(np.maximum(na[:, None] + nb[None, :] - 2 * Ra @ Rb.T, 0))
    limit = 0.5 * np.sqrt(np.maximum(na[:, None], nb[None, :]))
    used_a, used_b, out = set(), set(), []
    for flat in np.argsort(dist, axis=None):
        u, v = divmod(int(flat), dist.shape[1])
        if dist[u, v] > limit[u, v]:
            break
        if u not in used_a and v not in used_b:
            used_a.add(u)
            used_b.add(v)
            out.append((u, v))
    return sorted(out)


def _pre(p, i: int) -> int:
    """The pre-activation a of the unit max(a, 0) at Max node i."""
    node = p.nodes[i]
    assert isinstance(node, Max)
    return node.args[0]


def applies(a, b) -> bool:
    """Are a and b ReLU networks of one depth (the builder's models)?"""
    try:
        PairLayers(a, b, None)  # type: ignore[arg-type]
    except _Unsupported:
        return False
    return True


def _signs(L, U) -> list[int]:
    """Per unit +1 / -1 where the float bounds say a >= 0 / a <= 0 with a margin, else 0: which
    exact bound to compute first (``relaxation._Exact.layer``'s hint)."""
    tol = 1e-7 * (1 + np.maximum(np.abs(L), np.abs(U)))
    return np.where(L > tol, 1, np.where(U < -tol, -1, 0)).tolist()


def _tri(L, U):
    """Float (s, t) with s D + t >= max(0, D) on [L, U] (the triangle; exact where stable)."""
    unst = (L < 0) & (U > 0)
    s = np.where(U <= 0, 0.0, np.where(L >= 0, 1.0, U / np.where(unst, U - L, 1.0)))
    return s, np.where(unst, -s * L, 0.0)


class _Floats:
    """The float pass on one cell: each network's DeepPoly bounds, then Delta's bounds and
    the delta relaxation layer by layer, then lower bounds of the forbidden rows."""

    def __init__(self, net: PairLayers, lo, hi):
        self.net, self.lo, self.hi = net, lo, hi
        self.rA, bA = _float_bounds(net.A, lo, hi)
        self.rB, bB = _float_bounds(net.B, lo, hi)
        self.signs = [[_signs(L, U) for L, U in bounds] for bounds in (bA, bB)]
        self.diff: list = []
        A, B = net.A, net.B
        for k in range(net.K):
            ia = np.array([u for u, _ in net.pairs[k]], dtype=int)
            ib = np.array([u for _, u in net.pairs[k]], dtype=int)
            act_a, var_a = bA[k][0][ia] >= 0, (bA[k][0][ia] < 0) & (bA[k][1][ia] > 0)
            act_b, var_b = bB[k][0][ib] >= 0, (bB[k][0][ib] < 0) & (bB[k][1][ib] > 0)
            if k == 0:
                X = A.Wf[0][ia] - B.Wf[0][ib]
                c = A.bf[0][ia] - B.bf[0][ib]
                L = c + np.minimum(X, 0) @ hi + np.maximum(X, 0) @ lo
                U = c + np.maximum(X, 0) @ hi + np.minimum(X, 0) @ lo
            else:
                W = np.vstack([A.Wf[k][ia], -A.Wf[k][ia]])
                V = np.vstack([-B.Wf[k][ib], B.Wf[k][ib]])
                c = A.bf[k][ia] - B.bf[k][ib]
                both, _ = self.lower(W, V, np.concatenate([c, -c]), k)
                L, U = both[: len(ia)], -both[len(ia) :]
            sv, tv = _tri(L, U)
            sw, tw = _tri(-U, -L)
            hv = var_a & (var_b | act_b)
            hw = var_b & (var_a | act_a)
            self.diff.append((ia, ib, hv, hw, sv, tv, sw, tw))

    def lower(self, P, Qm, c, k, xc=None):
        """Lower bounds of P v_{k-1} + Qm w_{k-1} + c (+ xc . x), and the x coefficients."""
        net, c = self.net, c.copy()
        A, B = net.A, net.B
        X = None
        for j in range(k - 1, -1, -1):
            alA, sA, tA = self.rA[j]
            alB, sB, tB = self.rB[j]
            ia, ib, hv, hw, sv, tv, sw, tw = self.diff[j]
            p, q = P[:, ia], Qm[:, ib]
            r = np.where(
                (p > 0) & (q < 0) & hw,
                np.minimum(p, -q),
                np.where((p < 0) & (q > 0) & hv, np.maximum(p, -q), 0.0),
            )
            P2, Q2 = P.copy(), Qm.copy()
            P2[:, ia] -= r
            Q2[:, ib] += r
            cD = np.where(r > 0, r * sw, r * sv)
            c = c + np.where(r > 0, -r * tw, r * tv).sum(1)
            ca = np.where(P2 > 0, P2 * alA, P2 * sA)
            cb = np.where(Q2 > 0, Q2 * alB, Q2 * sB)
            ca[:, ia] += cD
            cb[:, ib] -= cD
            c = c + np.minimum(P2, 0) @ tA + np.minimum(Q2, 0) @ tB
            c = c + ca @ A.bf[j] + cb @ B.bf[j]
            if j == 0:
                X = ca @ A.Wf[0] + cb @ B.Wf[0]
            else:
                P, Qm = ca @ A.Wf[j], cb @ B.Wf[j]
        if X is None:  # k == 0: P, Qm over x
            X = P + Qm
        if xc is not None:
            X = X + xc
        return c + np.maximum(X, 0) @ self.lo + np.minimum(X, 0) @ self.hi, X


def _out_rows(net: PairLayers, case: Case):
    """Per conjunction, per weighting of its rows to try (``_weightings``): (the weights, -sum
    w_q row_q as (its coefficients on A's outputs, on B's, constant, x part), exact, and
    whether a strict row has weight > 0).  If every row holds, so does the sum, so a positive
    lower bound of its negation excludes the conjunction (0 will do with a strict row)."""
    d, n = net.dim, net.n_out
    out = []
    for conj in case.outputs:
        tries = []
        nz = [[(t, v) for t, v in enumerate(r.a) if v] for r in conj]
        for weights in _weightings(conj):
            neg = [ZERO] * (d + 2 * n)
            for q, w in weights:
                for t, v in nz[q]:
                    neg[t] -= w * v
            c = -sum((w * conj[q].c for q, w in weights), ZERO)
            strict = any(conj[q].strict for q, _ in weights)
            tries.append((weights, neg[d : d + n], neg[d + n :], c, neg[:d], strict))
        out.append(tries)
    return out


def _through_outputs(net: PairLayers, ya, yb, c):
    """ya . A's outputs + yb . B's + c as (P over A's last layer, Q over B's, constant), exact."""
    n, WA, WB = net.n_out, net.A.W[-1], net.B.W[-1]
    P = (RatMatrix(1, n, list(ya)) * WA).entries()
    Qm = (RatMatrix(1, n, list(yb)) * WB).entries()
    bA, bB = net.A.b[-1], net.B.b[-1]
    return P, Qm, c + sum((ya[o] * bA[o] + yb[o] * bB[o] for o in range(n)), ZERO)


def _weightings(conj) -> list:
    """Weightings (row, weight) of a conjunction's rows: each row alone, and each non-strict
    row with each strict one at 1/2 + 1/2, 1/4 + 3/4 and 3/4 + 1/4 (top-1's "i is maximal in A,
    k beats i in B": a_i - a_k + b_k - b_i is a difference of the two networks' margins)."""
    out: list = [((q, ONE),) for q in range(len(conj))]
    for q, r in ((q, r) for q in range(len(conj)) for r in range(len(conj))):
        if not conj[q].strict and conj[r].strict:
            out += [((q, w), (r, ONE - w)) for w in (Q(1, 2), Q(1, 4), Q(3, 4))]
    return out


class _PairExact:
    """The exact pass on one cell: rows are the kernel's (the cell's, 3 per variable of A,
    3 per variable of B, in node order, then the extra rows in order)."""

    def __init__(self, net: PairLayers, rows, box, signs=None):
        """``signs``: per network and layer, the float pass's hints (``_signs``)."""
        self.net, self.box = net, box
        sA, sB = signs or ([None] * net.K, [None] * net.K)
        self.exA = _Exact(net.A, len(rows), box)
        self.uppers: list = []
        for k in range(net.K):
            self.uppers += self.exA.layer(k, None, sA[k])
        self.exB = _Exact(net.B, len(rows) + 3 * self.exA.n_vars, box)
        for k in range(net.K):
            self.uppers += self.exB.layer(k, None, sB[k])
        self.base_extra = len(rows) + 3 * (self.exA.n_vars + self.exB.n_vars)
        self.extra: list = []
        self.diff: list = []  # per layer: [(u, u', v's row or None, w's row or None)]
        upA = self.uppers[: sum(len(i) for i in net.A.ids)]
        upB = self.uppers[len(upA) :]
        oa = ob = 0
        for k in range(net.K):
            na, nb = len(net.A.ids[k]), len(net.B.ids[k])
            self.diff.append(self._layer(k, upA[oa : oa + na], upB[ob : ob + nb]))
            oa, ob = oa + na, ob + nb

    def _rows(self, ex: _Exact, k: int, u: int):
        """(row v - a, row v - 0) of unit u of layer k, or None when the unit is fixed."""
        pos = ex.relax[k][3][u]
        return None if pos is None else (ex.base + 3 * pos, ex.base + 3 * pos + 1)

    def _layer(self, k: int, upA, upB) -> list:
        """Prove Delta's bounds for the corresponding units of layer k where one is a variable
        and the other is not fixed to 0, and add their delta rows (see the module)."""
        net = self.net
        alA, alB = self.exA.relax[k][0], self.exB.relax[k][0]
        want = []
        for ua, ub in net.pairs[k]:
            ra, rb = self._rows(self.exA, k, ua), self._rows(self.exB, k, ub)
            if (ra and (rb or alB[ub])) or (rb and (ra or alA[ua])):
                want.append((ua, ub, ra, rb))
        if not want:
            return []
        A, B = net.A, net.B
        m, nc, ncb = len(want), A.W[k].ncols(), B.W[k].ncols()
        EA, EB = A.W[k].entries(), B.W[k].entries()
        rA = [EA[ua * nc : (ua + 1) * nc] for ua, _, _, _ in want]
        rB = [EB[ub * ncb : (ub + 1) * ncb] for _, ub, _, _ in want]
        c = [A.b[k][ua] - B.b[k][ub] for ua, ub, _, _ in want]
        P = RatMatrix(2 * m, nc, [v for r in rA for v in r] + [-v for r in rA for v in r])
        Qm = RatMatrix(2 * m, ncb, [-v for r in rB for v in r] + [v for r in rB for v in r])
        res = self.lower(P, Qm, c + [-v for v in c], k)
        out = []
        for i, (ua, ub, ra, rb) in enumerate(want):
            (Lx, ml), (nU, mu) = res[i], res[m + i]  # ml: Delta >= Lx, mu: -Delta >= nU
            L, U = _down(Lx), _up(-nU)
            row_v = row_w = None
            if ra and (rb or alB[ub]):  # v <= w + s Delta + t
                row_v = self._delta_row(
                    net.nodes_a[k][ua][0], L, U, mu, ml, rb, upB[ub], net.nodes_b[k][ub]
                )
            if rb and (ra or alA[ua]):  # w <= v + s' (-Delta) + t'
                row_w = self._delta_row(
                    net.nodes_b[k][ub][0], -U, -L, ml, mu, ra, upA[ua], net.nodes_a[k][ua]
                )
            out.append((ua, ub, row_v, row_w))
        return out

    def _delta_row(self, node: int, L, U, m_up: dict, m_down: dict, rows, fixed, other):
        """Add the extra row v <= w + s D + t of Max node ``node`` (v = max(a, 0)), w = max(b, 0)
        the other network's unit and D = a - b in [L, U] (m_up proves D <= U, m_down D >= L);
        ``rows``: w's rows (w - b, w - 0), or None when w = b (``fixed``, its upper function,
        proves b >= 0); ``other``: (w's node, b's node).  Returns (its row, s, t).  u = w +
        s D + t is >= a by w - b >= 0 and (1 - s) (U - D) >= 0, and >= 0 by w >= 0 and
        s (D - L) >= 0 (the residuals t - (1 - s) U and t + s L are >= 0 by ``_slope``)."""
        s, t = _slope(L, U)
        wa, w0 = ({rows[0]: ONE}, {rows[1]: ONE}) if rows else ({}, dict(fixed.proofs[1]))
        proofs = (_proof(_add(wa, m_up, ONE - s), ONE), _proof(_add(w0, m_down, s), ONE))
        wn, bn = other
        self.extra.append((node, Upper((s, ZERO), t, proofs, ((wn, ONE), (bn, -s)))))
        return self.base_extra + len(self.extra) - 1, s, t

    def lower(self, P: RatMatrix, Qm: RatMatrix, c: list, k: int, xc=None):
        """For each row i of P v_{k-1} + Qm w_{k-1} + c (+ xc[i] . x), over x when k == 0:
        (K_i, multipliers) with e_i - sum mult rows = K_i.  Kept as (P | c) and (Qm | 0), so
        that a layer is one product per network with ``_Exact.step``."""
        m, nA, nB = P.nrows(), P.ncols(), Qm.ncols()
        mults: list[dict[int, Q]] = [dict() for _ in range(m)]
        EP, EQ = P.entries(), Qm.entries()
        PA = RatMatrix(m, nA + 1, [v for i in range(m) for v in EP[i * nA : (i + 1) * nA] + [c[i]]])
        QB = RatMatrix(m, nB + 1, [v for i in range(m) for v in EQ[i * nB : (i + 1) * nB] + [ZERO]])
        for j in range(k - 1, -1, -1):
            shift = [ZERO] * m  # constants added by the rows used
            delta = []  # (row, u, u', r s): r s (a - b) from a delta row, kept on a and b
            for i in range(m):  # r (v - w) by a delta row, r the smaller of |p|, |q| (signed)
                mi = mults[i]
                for ua, ub, rv, rw in self.diff[j]:
                    p, q = PA[i, ua], QB[i, ub]
                    if p > 0 and q < 0 and rw is not None:
                        r = min(p, -q)
                        row, s, t = rw  # r (v - w) >= r s' (a - b) - r t'
                        mi[row] = mi.get(row, ZERO) + r
                        shift[i] -= r * t
                    elif p < 0 and q > 0 and rv is not None:
                        r = max(p, -q)
                        row, s, t = rv  # r (v - w) >= r s (a - b) + r t
                        mi[row] = mi.get(row, ZERO) - r
                        shift[i] += r * t
                    else:
                        continue
                    # the rest (p - r) v + (q + r) w by each network's rows
                    PA[i, ua], QB[i, ub] = p - r, q + r
                    delta.append((i, ua, ub, r * s))
            self._variables(PA, self.exA, j, mults, shift)
            self._variables(QB, self.exB, j, mults, shift)
            for i, ua, ub, cD in delta:  # both units a variable or v = a: their rows are kept
                PA[i, ua] += cD
                QB[i, ub] -= cD
            for i in range(m):
                if shift[i]:
                    PA[i, nA] += shift[i]
            PA, QB = PA * self.exA.step[j], QB * self.exB.step[j]
            nA, nB = PA.ncols() - 1, QB.ncols() - 1
        X, d = (PA + QB).entries(), self.net.dim
        out = []
        for i in range(m):
            K, mi = X[i * (d + 1) + d], mults[i]
            for x in range(d):
                v = X[i * (d + 1) + x] + (xc[i][x] if xc else ZERO)
                if v:
                    idx, coef, bound = self.box[x][0 if v > 0 else 1]
                    mi[idx] = mi.get(idx, ZERO) + v / coef
                    K += v * bound
            out.append((K, mi))
        return out

    @staticmethod
    def _variables(M: RatMatrix, ex: _Exact, j: int, mults: list, shift: list) -> None:
        """The coefficient p of each variable v of layer j (a column of M) moved onto its
        pre-activation a: p > 0 by v >= a (a kept) or v >= 0, p < 0 by u - v >= 0, u = s a +
        t (as ``_Exact.lower``); the fixed units are ``step``'s."""
        al, s, t, pos = ex.relax[j]
        for u in ex.free[j]:
            r = ex.base + 3 * pos[u]
            for i in range(M.nrows()):
                p = M[i, u]
                if not p:
                    continue
                mi = mults[i]
                if p > 0:
                    row = r if al[u] else r + 1
                    mi[row] = mi.get(row, ZERO) + p
                    if not al[u]:
                        M[i, u] = ZERO
                else:
                    mi[r + 2] = mi.get(r + 2, ZERO) - p
                    M[i, u] = p * s[u]
                    shift[i] += p * t[u]


def _slope(L: Q, U: Q) -> tuple[Q, Q]:
    """(s, t) on the grid: s D + t >= max(0, D) for D in [L, U] (as ``_Exact.layer``)."""
    if L >= 0:
        return ONE, ZERO
    if U <= 0:
        return ZERO, ZERO
    s = _down(U / (U - L))
    return s, max(-s * L, U - s * U)


def _add(m: dict, other: dict, scale: Q) -> dict:
    out = dict(m)
    if scale:
        for i, y in other.items():
            out[i] = out.get(i, ZERO) + scale * y
    return out


def _float_violates(net: PairLayers, case: Case, x) -> bool:
    """Does the pair, in floats, send x into a forbidden conjunction (up to 1e-9)?  A hint."""
    X = np.array([float(v) for v in x])
    ys = []
    for L in (net.A, net.B):
        h = X
        for W, c in zip(L.Wf[:-1], L.bf[:-1]):
            h = np.maximum(W @ h + c, 0)
        ys.append(L.Wf[-1] @ h + L.bf[-1])
    z = np.concatenate([X, *ys])
    return any(
        all(float(r.c) + sum(float(w) * v for w, v in zip(r.a, z) if w) > -1e-9 for r in conj)
        for conj in case.outputs
    )


def violates(a, b, case: Case, x) -> bool:
    """Does x (exact) meet every row of some forbidden conjunction of the pair case?"""
    z = tuple(x) + tuple(evaluate_maxout(a, x)) + tuple(evaluate_maxout(b, x))
    holds = lambda r: (
        (r.c + sum((c * v for c, v in zip(r.a, z) if c), ZERO)) > 0
        or (  # noqa: E731
            not r.strict and r.c + sum((c * v for c, v in zip(r.a, z) if c), ZERO) == 0
        )
    )
    return any(all(holds(r) for r in conj) for conj in case.outputs)


def build_differential_tree(
    a, b, case: Case, limits: Limits, violated, budget: int | None = None, start=None
):
    """A tree of relaxed leaves (with delta rows) and input splits for the pair case of
    ``kernel.pair.pair_case`` (epsilon or top-1), or None when the models are not ReLU networks
    of one depth, the domain is not a box, or a path needs more than MAX_DEPTH splits.
    ``violated(x)`` raises with an exact candidate point (None: ``casetree.Violated`` where
    ``violates``, checked in floats first).  ``budget`` and ``start`` (an
    ``relaxation.OpenBox``) as for ``relaxation.build_relaxed_tree``: work units."""
    try:
        net = PairLayers(a, b, case)
        outs = _out_rows(net, case)
    except _Unsupported:
        return None
    if violated is None:

        def violated(x):
            if _float_violates(net, case, x) and violates(a, b, case, x):
                raise Violated(x)

    d, rows0 = net.dim, domain_rows(case.inputs)
    box0 = intervals.box_rows(rows0, d)
    if box0 is None:
        return None
    depth0 = 0
    free = sum(1 for t in range(d) if box0[t][0][2] < box0[t][1][2])
    if start is not None:
        rows0, box0, depth0 = list(start.rows), [list(b) for b in start.box], start.depth
    WAf, WBf, bAf, bBf = net.A.Wf[-1], net.B.Wf[-1], net.A.bf[-1], net.B.bf[-1]
    tries_all = [t for tries in outs for t in tries]  # every conjunction's weightings, stacked
    ya = np.array([[float(v) for v in t[1]] for t in tries_all])
    yb = np.array([[float(v) for v in t[2]] for t in tries_all])
    outs_f = (
        ya @ WAf,
        yb @ WBf,
        np.array([float(t[3]) for t in tries_all]) + ya @ bAf + yb @ bBf,
        np.array([[float(v) for v in t[4]] for t in tries_all]),
    )
    ends = np.cumsum([len(tries) for tries in outs])  # conjunction j: rows ends[j-1]..ends[j]
    stats: dict[str, Any] = {"leaves": 0, "splits": 0, "open": 0, "proofs": {"relaxed": 0}}
    last = [time.monotonic()]

    def floats(lo, hi):
        """(per conjunction its best weighting, None where the floats leave it open; the
        smear of the worst one; the signs; per conjunction that weighting's float bound)."""
        fl = _Floats(net, lo, hi)
        val, X = fl.lower(*outs_f[:3], net.K, outs_f[3])
        best = [int(np.argmax(v)) for v in np.split(val, ends[:-1])]
        firsts = np.concatenate([[0], ends[:-1]]) + np.array(best)
        w = int(firsts[np.argmin(val[firsts])])
        smear = np.abs(X[w]) * (hi - lo)
        ok = val[firsts] > MARGIN * (1 + np.abs(val[firsts]))
        picks = [j if o else None for j, o in zip(best, ok.tolist())]
        return picks, smear, fl.signs, val[firsts].tolist()

    pair: list = []  # the pair program and its cone, made when phases are first needed

    def phase_proofs(rows, bx, ex, todo: list, proofs: list) -> bool:
        """Phase proofs (``phases.py``) of the conjunctions ``todo`` in the relaxed leaf of
        ``ex`` (its uppers and delta rows), into ``proofs``; False if one stays open."""
        if not pair:
            q = program_of_pair(program_of_maxout(a), program_of_maxout(b))
            pair.extend((q, sorted(cone(q, q.outputs))))
        q, need = pair
        vals, zrows, variables = phases.relaxed_rows(q, need, rows, ex.uppers, "cell", ex.extra)
        prob = phases.PhaseProblem(q, vals, zrows, variables, len(rows), bx)
        for j in todo:
            try:
                proofs[j] = phases.prove_conjunction(
                    prob, case.outputs[j], limits.deadline, PHASE_LEAVES, violated, stats
                )
            except phases.Unclosed:
                return False
        return True

    def close(rows, bx, depth):
        lo = np.array([float(b[0][2]) for b in bx])
        hi = np.array([float(b[1][2]) for b in bx])
        best, smear, signs, bounds = floats(lo, hi)
        phased = free > INPUT_SPLITS or (PHASES and depth >= min(free, PHASE_DEPTH))
        if None in best and not phased:
            return None, smear, lo, hi
        ex = _PairExact(net, rows, [(bx[t][0], bx[t][1]) for t in range(d)], signs)
        conj_row = ex.base_extra + len(ex.extra)  # the conjunction's rows come next
        idx = [j for j, i in enumerate(best) if i is not None]
        chosen = [outs[j][best[j]] for j in idx]
        proofs: list = [None] * len(outs)
        if chosen:
            through = [_through_outputs(net, t[1], t[2], t[3]) for t in chosen]
            nA, nB = len(through[0][0]), len(through[0][1])
            res = ex.lower(  # all conjunctions at once: one product per layer
                RatMatrix(len(chosen), nA, [v for P, _, _ in through for v in P]),
                RatMatrix(len(chosen), nB, [v for _, Qm, _ in through for v in Qm]),
                [c for _, _, c in through],
                net.K,
                [t[4] for t in chosen],
            )
            for j, (weights, _, _, _, _, strict), (val, m) in zip(idx, chosen, res):
                if val < 0 or (val == 0 and not strict):
                    if not phased:
                        return None, smear, lo, hi
                    continue
                for q, w in weights:
                    m[conj_row + q] = m.get(conj_row + q, ZERO) + w
                proofs[j] = _proof(m, ONE)
        # the worst bound first: a conjunction that stays open ends the attempt early
        todo = sorted((j for j, pr in enumerate(proofs) if pr is None), key=bounds.__getitem__)
        if todo and not phase_proofs(rows, bx, ex, todo, proofs):
            return None, smear, lo, hi
        leaf = Relaxed((), tuple(ex.uppers), tuple(proofs), tuple(ex.extra))
        return leaf, None, lo, hi

    def cell(rows, bx, depth=0):
        if budget is not None and stats["leaves"] >= budget:
            stats["open"] += 1
            return OpenBox(tuple(rows), tuple(tuple(b) for b in bx), depth)
        if not intervals.enter(stats, limits, depth, MAX_DEPTH):
            raise _Unsupported
        leaf, smear, lo, hi = close(rows, bx, depth)
        if leaf is not None:
            return intervals.closed(stats, limits, last, leaf)
        centre = [(bx[t][0][2] + bx[t][1][2]) / 2 for t in range(d)]
        violated(tuple(centre))
        if free > INPUT_SPLITS:
            raise NoCertificate(
                f"neither the delta rows nor phase splits close the box, and its {free} inputs "
                f"of non-zero width are too many to halve (more than {INPUT_SPLITS})"
            )
        if smear is None or not smear.any():
            smear = hi - lo
        return intervals.split(rows, bx, int(np.argmax(smear)), stats, limits, cell, depth)

    try:
        return cell(list(rows0), box0, depth0), stats
    except _Unsupported:
        return None
