"""Branch and bound over the input box with relaxed leaves (``kernel.property.Relaxed``).

Untrusted producer for ReLU programs in layers (every Max node max(a, 0) with a an affine
map of the previous layer's Max nodes, or of x for the first layer; outputs affine maps of
the last layer).  A cell is a box [lo, hi]: the case's box, halved along input coordinates.

On a cell, DeepPoly (back-substitution) in floats decides: pre-activation bounds L <= a <= U
layer by layer with the relaxation of the layers before (v >= alpha a, alpha = 1 if U > -L
else 0, and v <= s a + t: s = 1, t = 0 if L >= 0; s = t = 0 if U <= 0; else the triangle
s = U / (U - L), t = -s L), then for each forbidden conjunction O_j an upper bound of each of
its rows r: if some row is below zero by a margin, O_j is empty on the cell.  When every O_j
is, the same back-substitution is redone in exact rationals, and its coefficients *are* the
Farkas multipliers: eliminating v with coefficient c > 0 uses the row v - A >= 0 (A = a or 0,
as alpha says) with multiplier c, with c < 0 the row u - v >= 0 with multiplier -c; the Lin
nodes are substituted by their maps (no row); what is left on x is bounded by the cell's box
rows, and the constant is the proved bound.  The exact bounds are rounded outward to a grid
of 1/GRID (``phases.GRID``), and so is the slope s <= U / (U - L), with
t = max(-s L, (1 - s) U): then u = s a + t >= 0 and >= a at a = L and at a = U, so on [L, U];
every number stays dyadic, which keeps the exact arithmetic short.  u is proved >= a by
(1 - s) times the proof of a <= U (residual t - (1 - s) U >= 0) and >= 0 by s times the proof
of a >= L (residual s L + t >= 0) (``Upper``).

Where the fixed slopes leave a conjunction open, the slopes are optimised in floats
(alpha-CROWN; untrusted, they only choose): first the output's, per unstable node (with the
conjunction's row weights), by projected Adam steps on the bound; if that is not enough, also
the slopes used for each bound of each layer (one set per bound row), which tightens L and U
and so the triangles of the layers after.  Any slope alpha in [0, 1] is a combination of the
kernel's two lower rows, v >= alpha a as alpha (v - a >= 0) + (1 - alpha) (v >= 0), so the
exact pass takes the chosen slopes (rounded to 1/ALPHA_GRID) and still produces the
multipliers; floats never decide, the exact bound and the kernel do.  Otherwise the cell is
halved along the input whose halves' fixed-slope bounds are best (``LOOKAHEAD``; else the
largest |coefficient| x width in the failing row's back-substitution, the smear), until a
leaf limit or the deadline; a cell whose centre violates a conjunction (in floats) gives a
candidate point, checked exactly by the caller.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..kernel.certificate import cone, domain_rows
from ..kernel.program import Lin, Max
from ..kernel.property import Case, Relaxed, Upper
from ..kernel.rational import ONE, ZERO, Q, RatMatrix
from . import intervals, phases
from .certify import Limits
from .phases import _down, _proof, _up

MARGIN = 1e-7
MAX_DEPTH = 40  # deeper: a bound that no relaxation with a margin closes; give up
OPT_STEPS = 30  # projected Adam steps on the lower slopes of a cell the fixed slopes leave open
OPT_PATIENCE = 5  # ... stopped early when the last steps' gain, extrapolated, cannot close it
OPT_LR, OPT_LR_W = 0.1, 0.05
LOOKAHEAD = True  # split the input whose halves' fixed-slope bounds are best (else: the smear)
LOOKAHEAD_GAIN = 0.05  # ... unless the best halves gain less than this share of the cell's bound
INTER_STEPS = 20  # ... and, where that does not close it, on the slopes of each layer's bounds
ALPHA_GRID = 256  # optimised slopes are rounded to multiples of 1/ALPHA_GRID, and
W_GRID = 1024  # row weights to 1/W_GRID: dyadic, so the exact arithmetic stays short
PHASES_ABOVE = 12
"""In more input dimensions than this a cell that no slope closes is split on ReLU phases
(``phases.py``) before it is halved along an input."""
PHASE_LEAVES = 5000  # phase leaves per conjunction and cell before it is halved instead
_QA = [Q(i, ALPHA_GRID) for i in range(ALPHA_GRID + 1)]


class Layers:
    """The program as ReLU layers: W[k], b[k] exact (fmpq_mat, list) and float; unit u of layer
    k is Max node ids[k][u], the z-variable of position pos[k][u] among the relaxed nodes."""

    def __init__(self, p, case: Case):
        need = cone(p, p.outputs)
        maxes = sorted(i for i in need if isinstance(p.nodes[i], Max))
        rank = {i: r for r, i in enumerate(maxes)}
        self.dim, self.n_relaxed = p.dim, len(maxes)
        layer_of: dict[int, int] = {}
        self.ids: list[list[int]] = []
        pre: list[list[Lin]] = []
        for i in maxes:
            args = p.nodes[i].args
            zero = [j for j in args if _is_zero(p.nodes[j])]
            a = [j for j in args if not _is_zero(p.nodes[j])]
            if len(args) == 2 == len(zero):  # max(0, 0): a unit whose weights and bias are 0
                a, zero = zero[:1], zero[1:]
            if (
                len(args) != 2
                or len(zero) != 1
                or len(a) != 1
                or not isinstance(p.nodes[a[0]], Lin)
            ):
                raise _Unsupported
            node = p.nodes[a[0]]
            reads = {layer_of.get(j, -2) for j, _ in node.terms}
            k = 0 if not node.terms else (reads.pop() + 1 if len(reads) == 1 else -1)
            if not node.terms and not node.x and self.ids:  # a constant: the layer being built
                k = len(self.ids) - 1  # (a layer's first unit lands in the one before; what
                # reads it then reads two layers, which is refused below)
            if k < 0 or (k > 0 and node.x) or (k == 0 and node.terms):
                raise _Unsupported
            if k == len(self.ids):
                self.ids.append([])
                pre.append([])
            if k != len(self.ids) - 1:
                raise _Unsupported
            layer_of[i] = k
            self.ids[k].append(i)
            pre[k].append(node)
        self.pos = [[rank[i] for i in ids] for ids in self.ids]
        self.W: list[RatMatrix] = []
        self.b: list[list[Q]] = []
        self.Wf: list[np.ndarray] = []
        self.bf: list[np.ndarray] = []
        self.bcol: list[RatMatrix] = []
        for k, nodes in enumerate(pre):
            cols = {i: u for u, i in enumerate(self.ids[k - 1])} if k else {}
            rows = []
            for node in nodes:
                r = [ZERO] * (len(self.ids[k - 1]) if k else p.dim)
                for j, w in node.terms if k else node.x:
                    r[cols[j] if k else j] += w
                rows.append(r)
            self._add(rows, [n.c for n in nodes])
        # an output is affine in the last layer's units, or one of them (a ReLU on the output
        # layer: the program's output is that Max node, read through the identity row)
        last = {i: u for u, i in enumerate(self.ids[-1])} if self.ids else {}
        outs = [p.nodes[o] if o not in last else Lin((), ZERO, ((o, ONE),)) for o in p.outputs]
        if not self.ids or any(
            not isinstance(n, Lin) or n.x or any(j not in last for j, _ in n.terms) for n in outs
        ):
            raise _Unsupported
        rows = []
        for n in outs:
            r = [ZERO] * len(last)
            for j, w in n.terms:
                r[last[j]] += w
            rows.append(r)
        self._add(rows, [n.c for n in outs])

    def _add(self, rows, consts):
        m, n = len(rows), len(rows[0])
        self.W.append(RatMatrix(m, n, [v for r in rows for v in r]))
        self.b.append(list(consts))
        self.bcol.append(RatMatrix(m, 1, list(consts)))
        self.Wf.append(np.array([[float(v) for v in r] for r in rows]))
        self.bf.append(np.array([float(v) for v in consts]))


class _Unsupported(Exception):
    pass


def _is_zero(node) -> bool:
    return isinstance(node, Lin) and not node.x and not node.terms and node.c == 0


# ------------------------------------------------------------------ floats (to choose)


def _float_backsub(net: Layers, C, c, k, relax, lo, hi):
    """Lower bounds of C v_{k-1} + c (C over x when k == 0) on the box, and the coefficients
    left on x (for the smear)."""
    C, c = C.copy(), c.copy()
    for j in range(k - 1, -1, -1):
        al, s, t = relax[j]
        P, N = np.maximum(C, 0), np.minimum(C, 0)
        c = c + N @ t
        C = P * al + N * s
        c = c + C @ net.bf[j]
        C = C @ net.Wf[j]
    return c + np.maximum(C, 0) @ lo + np.minimum(C, 0) @ hi, C


def _float_bounds(net: Layers, lo, hi):
    relax: list = []
    bounds: list = []
    for k in range(len(net.ids)):
        W, b = net.Wf[k], net.bf[k]
        both, _ = _float_backsub(net, np.vstack([W, -W]), np.concatenate([b, -b]), k, relax, lo, hi)
        n = len(b)
        L, U = both[:n], -both[n:]
        bounds.append((L, U))
        unst = (L < 0) & (U > 0)
        s = np.where(U <= 0, 0.0, np.where(L >= 0, 1.0, U / np.where(unst, U - L, 1.0)))
        t = np.where(unst, -s * L, 0.0)
        al = np.where(L >= 0, 1.0, np.where(U <= 0, 0.0, (U > -L).astype(float)))
        relax.append((al, s, t))
    return relax, bounds


def _bound_grad(net: Layers, C, c, xc, relax, als, lo, hi):
    """The float lower bounds B_i of row i of C v_{K-1} + c + xc . x (K = len(relax)) on the
    box with lower slopes als[j] (per layer; a row per row of C, or one for all), and the
    (sub)gradients of each B_i: dB/dals[j], dB/dC, dB/dxc (row i of each for B_i), and the
    coefficients left on x."""
    K, lams = len(relax), []
    for j in range(K - 1, -1, -1):
        _, s, t = relax[j]
        lams.append(C)
        P, N = np.maximum(C, 0), np.minimum(C, 0)
        A = P * als[j] + N * s
        c = c + N @ t + A @ net.bf[j]
        C = A @ net.Wf[j]
    C = C + xc
    B = c + np.maximum(C, 0) @ lo + np.minimum(C, 0) @ hi
    g = np.where(C > 0, lo, hi)
    gx, gal = g, [None] * K
    for j in range(K):
        lam, (_, s, t) = lams[K - 1 - j], relax[j]
        h = g @ net.Wf[j].T + net.bf[j]  # dB / d(coefficient of layer j's a)
        gal[j] = np.maximum(lam, 0) * h
        g = np.where(lam > 0, als[j] * h, np.where(lam < 0, s * h + t, 0.0))
    return B, gal, g, gx, C


def _simplex(w):
    u = np.sort(w)[::-1]
    css = np.cumsum(u) - 1
    k = np.nonzero(u - css / np.arange(1, len(w) + 1) > 0)[0][-1]
    return np.maximum(w - css[k] / (k + 1), 0)


def _round_alphas(free, als):
    return [np.where(f, np.round(a * ALPHA_GRID) / ALPHA_GRID, a) for f, a in zip(free, als)]


class _Adam:
    """Projected Adam ascent steps on a list of arrays."""

    def __init__(self, xs):
        self.m = [np.zeros_like(x) for x in xs]
        self.v = [np.zeros_like(x) for x in xs]
        self.n = 0

    def steps(self, grads, lrs):
        self.n += 1
        out = []
        for m, v, g, lr in zip(self.m, self.v, grads, lrs):
            m *= 0.9
            m += 0.1 * g
            v *= 0.999
            v += 0.001 * g * g
            mh, vh = m / (1 - 0.9**self.n), v / (1 - 0.999**self.n)
            out.append(lr * mh / (np.sqrt(vh) + 1e-12))
        return out


def _optimise(net: Layers, conj, w0, relax, bounds, lo, hi):
    """Lower slopes (alpha-CROWN, floats, untrusted) and row weights w >= 0 that raise the
    lower bound of -(sum_q w_q r_q) on the cell, by projected Adam from the fixed slopes and
    the weights w0; stops when the bound (with the slopes and weights rounded as the exact
    pass uses them) clears the margin, or when it stops paying.  Returns (bound, w, slopes,
    smear), rounded: the slopes as one row per layer, as ``_Exact.lower`` takes them; w and
    the slopes None when the bound is not above the margin."""
    Cs = np.array([r[0] for r in conj])
    cs = np.array([r[1] for r in conj])
    xs = np.array([r[2] for r in conj])
    free = [(L < 0) & (U > 0) for L, U in bounds]  # the unstable nodes' slopes move
    als = [al.astype(float)[None, :] for al, _, _ in relax]
    w = w0 / w0.sum()
    opt_w = len(conj) > 1
    adam = _Adam(als + [w])
    hist, best = [], None

    def evaluate(w, als):
        B, gal, gC, gx, X = _bound_grad(
            net, -(w @ Cs)[None, :], -(w @ cs)[None], -(w @ xs)[None, :], relax, als, lo, hi
        )
        return B[0], gal, gC[0], gx[0], X[0]

    for it in range(OPT_STEPS):
        B, gal, gC, gx, X = evaluate(w, als)
        if B > MARGIN * (1 + abs(B)):
            wr, ar = np.round(w * W_GRID) / W_GRID, _round_alphas(free, als)
            Br = evaluate(wr, ar)[0] if wr.any() else -1.0
            if Br > MARGIN * (1 + abs(Br)):
                return Br / wr.sum(), wr, ar, np.abs(X) * (hi - lo)
        best = (B, None, None, np.abs(X) * (hi - lo))
        hist.append(B)
        if it >= 2 * OPT_PATIENCE and B < 0:
            gain = hist[-1] - hist[-1 - OPT_PATIENCE]
            if gain * (OPT_STEPS - it) / OPT_PATIENCE < -B:
                break  # at this pace the bound will not reach zero: split instead
        grads = [g * f for g, f in zip(gal, free)]
        grads.append(-(Cs @ gC + cs + xs @ gx) if opt_w else np.zeros_like(w))
        steps = adam.steps(grads, [OPT_LR] * len(als) + [OPT_LR_W])
        als = [np.clip(a + st, 0.0, 1.0) for a, st in zip(als, steps)]
        w = _simplex(w + steps[-1])
    return best


def _optimised_bounds(net: Layers, lo, hi):
    """Like ``_float_bounds``, with the lower slopes of the layers before k chosen for each
    bound of layer k (one set per bound row, as alpha-CROWN's intermediate bounds) by
    INTER_STEPS projected Adam steps from the fixed slopes.  Also returns, per layer k, the
    chosen slopes (rounded) for each layer j < k as arrays of 2 n_k rows (lower bounds, then
    upper bounds)."""
    relax: list = []
    bounds: list = []
    chosen: list = []
    d = len(lo)
    for k in range(len(net.ids)):
        W, b = net.Wf[k], net.bf[k]
        n = len(b)
        C, c, xc = np.vstack([W, -W]), np.concatenate([b, -b]), np.zeros((2 * n, d))
        free = [(L < 0) & (U > 0) for L, U in bounds]
        als = [np.tile(al.astype(float), (2 * n, 1)) for al, _, _ in relax]
        adam = _Adam(als)
        best, keep = None, [a.copy() for a in als]
        for it in range(INTER_STEPS if k else 1):
            B, gal, _, _, _ = _bound_grad(net, C, c, xc, relax, als, lo, hi)
            if best is None:
                best = B
            else:
                better = B > best
                best = np.where(better, B, best)
                for a, kp in zip(als, keep):
                    kp[better] = a[better]
            if k == 0 or it == INTER_STEPS - 1:
                break
            steps = adam.steps([g * f for g, f in zip(gal, free)], [OPT_LR] * len(als))
            als = [np.clip(a + st, 0.0, 1.0) for a, st in zip(als, steps)]
        keep = _round_alphas(free, keep)
        B = _bound_grad(net, C, c, xc, relax, keep, lo, hi)[0]
        L, U = B[:n], -B[n:]
        bounds.append((L, U))
        chosen.append(keep)
        unst = (L < 0) & (U > 0)
        s = np.where(U <= 0, 0.0, np.where(L >= 0, 1.0, U / np.where(unst, U - L, 1.0)))
        t = np.where(unst, -s * L, 0.0)
        al = np.where(L >= 0, 1.0, np.where(U <= 0, 0.0, (U > -L).astype(float)))
        relax.append((al, s, t))
    return relax, bounds, chosen


def _out_rows(net: Layers, case: Case, d: int):
    """For each conjunction, its rows as (C over the last layer, constant, x part, strict),
    exact and float."""
    Wo, bo = net.W[-1], net.b[-1]
    n_last = Wo.ncols()
    out = []
    for conj in case.outputs:
        rows = []
        for r in conj:
            w = r.a[d:]
            C = [sum((w[o] * Wo[o, u] for o in range(len(w)) if w[o]), ZERO) for u in range(n_last)]
            c = r.c + sum((w[o] * bo[o] for o in range(len(w)) if w[o]), ZERO)
            rows.append((C, c, list(r.a[:d]), r.strict))
        out.append(rows)
    return out


# ------------------------------------------------------------------ exact (the proofs)


class _Exact:
    """Exact back-substitution on one cell: rows are the kernel's (cell rows, then 3 per
    unstable node: v - a >= 0, v - 0 >= 0, u - v >= 0, in node order); a stable node is
    v = a or v = 0 exactly (its upper function is that argument) and is substituted."""

    def __init__(self, net: Layers, base: int, box_rows):
        """box_rows[t]: (row index, coefficient of x_t, bound) of x_t's lower and upper row."""
        self.net, self.base, self.box_rows = net, base, box_rows
        self.relax: list = []  # per layer: (alpha, s, t, variable number or None) lists
        self.n_vars = 0  # the unstable nodes so far: the kernel's variables
        self.free: list[list[int]] = []  # per layer: its variables' units
        self.step: list = []  # per layer: its step of ``lower`` (``_split_rows``)

    def lower(self, C: RatMatrix, c: list, k: int, xc=None, alphas=None):
        """For each row i of C v_{k-1} + c (+ xc[i] . x): (K_i, multipliers) with
        e_i - sum mult rows = K_i.  alphas[j][i][u] (optional; floats on the grid of
        1/ALPHA_GRID, one row for all or one per row of C): the lower slope of unstable node
        u of layer j in place of the fixed one, v >= alpha a as alpha (v - a >= 0) +
        (1 - alpha) (v >= 0).  The rows are kept as (C | c), so that a layer is one product
        with ``step[j]``: a variable's column first becomes its coefficient on a."""
        net, m, n = self.net, C.nrows(), C.ncols()
        mults: list[dict[int, Q]] = [dict() for _ in range(m)]
        E = C.entries()
        A = RatMatrix(m, n + 1, [v for i in range(m) for v in E[i * n : (i + 1) * n] + [c[i]]])
        for j in range(k - 1, -1, -1):
            al, s, t, pos = self.relax[j]
            grid = None if alphas is None else np.rint(alphas[j] * ALPHA_GRID).astype(int).tolist()
            shift = [ZERO] * m  # the constants the upper rows add
            for u in self.free[j]:
                for i in range(m):
                    v = A[i, u]
                    if not v:
                        continue
                    mi, r = mults[i], self.base + 3 * pos[u]
                    if v > 0:
                        ga: list = al if grid is None else grid[i % len(grid)]
                        g = ga[u] if grid is not None else (ALPHA_GRID if ga[u] else 0)
                        if g == ALPHA_GRID:  # v >= a: the coefficient stays on a
                            mi[r] = v
                        elif g == 0:  # v >= 0
                            mi[r + 1] = v
                            A[i, u] = ZERO
                        else:
                            a = _QA[g]
                            mi[r], mi[r + 1] = v * a, v * (ONE - a)
                            A[i, u] = v * a
                    else:  # u - v >= 0, u = s a + t
                        mi[r + 2] = -v
                        A[i, u] = v * s[u]
                        if t[u]:
                            shift[i] += v * t[u]
            for i in range(m):
                if shift[i]:
                    A[i, A.ncols() - 1] += shift[i]
            A = A * self.step[j]
        E, d = A.entries(), net.dim
        out = []
        for i in range(m):
            K, mi = E[i * (d + 1) + d], mults[i]
            for x in range(d):
                v = E[i * (d + 1) + x] + (xc[i][x] if xc else ZERO)
                if v:
                    idx, coef, bound = self.box_rows[x][0 if v > 0 else 1]
                    mi[idx] = mi.get(idx, ZERO) + v / coef
                    K += v * bound
            out.append((K, mi))
        return out

    def layer(self, k: int, alphas=None, signs=None) -> list[Upper]:
        """Prove the bounds of layer k's pre-activations (with the lower slopes alphas, as
        ``lower`` takes them, if given), fix its relaxation, and return its upper functions.
        ``signs`` (without alphas; floats, a hint): per unit +1 where a >= 0 is expected, -1
        where a <= 0, 0 where unknown: only the bound that proves it is computed first."""
        W, b = self.net.W[k], self.net.b[k]
        n = W.nrows()
        if signs is None or alphas is not None:
            signs = [0] * n
        res: list = [None] * (2 * n)  # (K, multipliers) of a's lower bound, then of -a's
        want = [u for u in range(n) if signs[u] >= 0] + [n + u for u in range(n) if signs[u] <= 0]
        while want:
            E, cols = W.entries(), W.ncols()
            rows = [v if r < n else -v for r in want for v in E[r % n * cols : (r % n + 1) * cols]]
            out = self.lower(
                RatMatrix(len(want), cols, rows),
                [b[r] if r < n else -b[r - n] for r in want],
                k,
                None,
                alphas,
            )
            for r, x in zip(want, out):
                res[r] = x
            # a sign the exact bound did not prove (a >= 0, or -a >= 0): the other bound too
            want = [(r + n) % (2 * n) for r in want if res[r][0] < 0]
            want = [r for r in want if res[r] is None]
        res = [x if x is not None else (-ONE, {}) for x in res]  # never read: the sign holds
        al: list[int] = []
        s: list[Q] = []
        t: list[Q] = []
        ups: list[Upper] = []
        pos: list[int | None] = []
        for u in range(n):
            (Lx, ml), (nU, mu) = res[u], res[n + u]
            Ux = -nU
            if Lx >= 0:  # v = a: u = A_0, no variable (kernel.property._argument)
                al.append(1)
                s.append(ONE)
                t.append(ZERO)
                pos.append(None)
                ups.append(Upper((ONE, ZERO), ZERO, ((), _proof(ml, ONE))))
            elif Ux <= 0:  # v = 0: u = A_1
                al.append(0)
                s.append(ZERO)
                t.append(ZERO)
                pos.append(None)
                ups.append(Upper((ZERO, ONE), ZERO, (_proof(mu, ONE), ())))
            else:
                pos.append(self.n_vars)
                self.n_vars += 1
                L, U = _down(Lx), _up(Ux)
                su = _down(U / (U - L))  # any s in [0, 1] with t below is sound
                tu = max(-su * L, U - su * U)
                al.append(1 if U > -L else 0)
                s.append(su)
                t.append(tu)
                ups.append(Upper((su, ZERO), tu, (_proof(mu, ONE - su), _proof(ml, su))))
        self.relax.append((al, s, t, pos))
        self._split_rows(k)
        return ups

    def _split_rows(self, k: int) -> None:
        """Layer k as one step of ``lower``: (C | c) -> (C | c) step, step = [[W', b'], [0,
        1]] with W', b' the rows of W, b of the units fixed to v = a and of the variables (a
        unit fixed to v = 0 contributes nothing)."""
        al, _, _, pos = self.relax[k]
        W, b = self.net.W[k], self.net.b[k]
        n, cols = W.nrows(), W.ncols()
        E, zero = W.entries(), [ZERO] * (cols + 1)
        rows: list = []
        for u in range(n):
            rows += E[u * cols : (u + 1) * cols] + [b[u]] if pos[u] is not None or al[u] else zero
        self.step.append(RatMatrix(n + 1, cols + 1, rows + [ZERO] * cols + [ONE]))
        self.free.append([u for u in range(n) if pos[u] is not None])


def _combos(n: int) -> list:
    """Weightings (row, weight) of a conjunction's rows to try, single rows first: if every
    row holds, so does sum w_q r_q >= 0 for w >= 0, so a bound sum w_q (-r_q) > 0 on the cell
    excludes the conjunction where no single row's does (near points where several rows are
    almost tight together)."""
    out: list[tuple[tuple[int, Q], ...]] = [((q, ONE),) for q in range(n)]
    for q in range(n):
        for r in range(q + 1, n):
            for w in (Q(1, 2), Q(1, 4), Q(3, 4)):
                out.append(((q, w), (r, ONE - w)))
    if n > 2:
        out.append(tuple((q, Q(1, n)) for q in range(n)))
    return out


def _arg_order(p, i) -> tuple[int, int]:
    """(position of a, position of 0) among the Max node's arguments."""
    args = p.nodes[i].args
    return (0, 1) if _is_zero(p.nodes[args[1]]) else (1, 0)


# ------------------------------------------------------------------ the tree


def split_scores(halves, own: float, smear):
    """Per input, the score of halving it (the largest is split): ``halves[t]``, the worse of
    the two halves' bounds, where it beats the cell's own bound ``own`` by LOOKAHEAD_GAIN of
    it for some input; else ``smear``.  These bounds are not monotone in the box (the slopes
    follow each half's bounds), so halving an input may leave both halves worse than the
    cell, and then the best halves are those of the narrowest inputs, which are the cell
    again: ACAS Xu 1-1 property 1 went 40 splits deep halving inputs 10^-5 wide while inputs
    0.5 wide were left (20,000 cells, unknown; with this rule 12 cells)."""
    if halves.max() - own < LOOKAHEAD_GAIN * (1 + abs(own)):
        return smear
    return halves - halves.min() + 1e-12


@dataclass(frozen=True, slots=True)
class OpenBox:
    """A cell ``build_relaxed_tree`` handed back unsolved, its budget spent: a placeholder in
    the tree it returns.  ``rows``: the cell's rows as the kernel's walk gives them (the
    domain's, then the input splits on the path); ``box``: per input x_t, the rows bounding it
    below and above as (row index, coefficient of x_t, bound); ``depth``: the splits above
    it.  The relaxed tree states no choices, so the subtree for the cell depends on these
    alone; ``build_relaxed_tree(..., start=cell)`` resumes there."""

    rows: tuple
    box: tuple
    depth: int


def build_relaxed_tree(
    p, case: Case, limits: Limits, violated, budget: int | None = None, start: OpenBox | None = None
):
    """A tree of ``Relaxed`` leaves and input splits for the case, or None when the program is
    not a layered ReLU network, the input set is not a box, or a path needs more than
    MAX_DEPTH splits (the caller falls back to ``build_case_tree``).  ``violated(x)`` is
    raised with an exact candidate point.  ``budget``: once that many leaves are certified,
    every cell not yet begun is left as an ``OpenBox`` placeholder (depth first); ``start``:
    build the subtree of such an open cell alone."""
    try:
        net = _layers_of(p, case)
    except _Unsupported:  # Max nodes of any arity in few dimensions: interval bounds
        if start is None and intervals.applies(p, case):
            return intervals.build_interval_tree(p, case, limits, violated)
        return None
    d, rows0 = p.dim, domain_rows(case.inputs)
    box = intervals.box_rows(rows0, d)  # (row index, coefficient, bound) lower, upper
    if box is None:
        return None
    depth0 = 0
    if start is not None:
        rows0, box, depth0 = list(start.rows), [list(b) for b in start.box], start.depth
    swap = [_arg_order(p, i) for ids in net.ids for i in ids]
    if any(o != (0, 1) for o in swap):
        return None  # the rows' order assumes max(a, 0); other orders: not produced here
    outs = _out_rows(net, case, d)
    if any(not conj for conj in outs):
        return None  # a conjunction without output rows: no bound closes it, the cell LP does
    outs_f = [
        [
            (np.array([float(v) for v in C]), float(c), np.array([float(v) for v in xc]), st)
            for C, c, xc, st in conj
        ]
        for conj in outs
    ]
    stats: dict[str, Any] = {"leaves": 0, "splits": 0, "open": 0, "proofs": {"relaxed": 0}}
    need = sorted(cone(p, p.outputs))
    last = [time.monotonic()]

    def choose(relax, bounds, lo, hi, optimise):
        """Per conjunction (its rows' weights, its output slopes or None for the fixed ones),
        and (bound, ..., smear) of the worst one left open, or None."""
        K = len(net.ids)
        pick: list = []
        worst: Any = None
        for conj in outs_f:
            best: Any = None
            for combo in _combos(len(conj)):
                if best is not None and best[0] > MARGIN * (1 + abs(best[0])) and len(combo) > 1:
                    break  # a single row closes it: no combination needed
                C = sum(float(w) * conj[q][0] for q, w in combo)
                c = sum(float(w) * conj[q][1] for q, w in combo)
                xc = sum(float(w) * conj[q][2] for q, w in combo)
                lb, X = _float_backsub(net, -C[None, :], np.array([-c]), K, relax, lo, hi)
                val = lb[0] - (np.maximum(xc, 0) @ hi + np.minimum(xc, 0) @ lo)
                if best is None or val > best[0]:
                    best = (val, combo, np.abs(X[0] - xc) * (hi - lo))
            if best[0] > MARGIN * (1 + abs(best[0])):
                pick.append((best[1], None))
                continue
            if optimise:  # the fixed slopes leave it open: optimise them (and the weights)
                w0 = np.zeros(len(conj))
                for q, w in best[1]:
                    w0[q] = float(w)
                best = _optimise(net, conj, w0, relax, bounds, lo, hi)
                val, wr, ar, _ = best
                if wr is not None:
                    pick.append(
                        (
                            tuple(
                                (q, Q(int(round(wq * W_GRID)), W_GRID))
                                for q, wq in enumerate(wr)
                                if wq > 0
                            ),
                            ar,
                        )
                    )
                    continue
            pick.append(None)  # open: a phase split may close it (``close``)
            if worst is None or best[0] < worst[0]:
                worst = best
        return pick, worst

    def lookahead(lo, hi, worst):
        """Per input, a score to split on (``split_scores``): the worse of the two halves'
        fixed-slope bounds, a half that closes counting as 0.  Measured on ACAS Xu, it needs
        fewer leaves than the smear of the fixed, the output-optimised or the fully optimised
        bound (1-7 property 2: 68 leaves against 282, 158 and 502)."""
        halves = np.zeros(d)
        for t in range(d):
            mid = (lo[t] + hi[t]) / 2
            vals = []
            at = np.arange(d) == t
            for a, b in ((lo, np.where(at, mid, hi)), (np.where(at, mid, lo), hi)):
                r, bd = _float_bounds(net, a, b)
                w = choose(r, bd, a, b, False)[1]
                vals.append(0.0 if w is None else min(w[0], 0.0))
            halves[t] = min(vals)
        r, bd = _float_bounds(net, lo, hi)
        own = choose(r, bd, lo, hi, False)[1]
        return split_scores(halves, 0.0 if own is None else min(own[0], 0.0), worst[-1])

    def close(rows, bx):
        lo = np.array([float(b[0][2]) for b in bx])
        hi = np.array([float(b[1][2]) for b in bx])
        K = len(net.ids)
        relax, bounds = _float_bounds(net, lo, hi)
        inter = [None] * K
        pick, worst = choose(relax, bounds, lo, hi, False)  # the fast path: fixed slopes
        if worst is not None:  # the output's slopes
            pick, worst = choose(relax, bounds, lo, hi, True)
            if worst is not None:  # and every layer's
                relax, bounds, inter = _optimised_bounds(net, lo, hi)
                pick, worst = choose(relax, bounds, lo, hi, True)
            if worst is not None and d <= PHASES_ABOVE:
                return None, lookahead(lo, hi, worst) if LOOKAHEAD else worst[-1], lo, hi
        ex = _Exact(net, len(rows), [(bx[t][0], bx[t][1]) for t in range(d)])
        uppers = []
        for k in range(K):
            uppers += ex.layer(k, inter[k])
        n_rows = len(rows) + 3 * ex.n_vars
        proofs: list = []
        phase = None
        for j, (conj, chosen) in enumerate(zip(outs, pick)):
            if chosen is None:  # open after every slope: split on phases (``phases.py``)
                if phase is None:
                    vals, zrows, variables = phases.relaxed_rows(p, need, rows, uppers)
                    phase = phases.PhaseProblem(p, vals, zrows, variables, len(rows), bx)
                try:
                    proofs.append(
                        phases.prove_conjunction(
                            phase, case.outputs[j], limits.deadline, PHASE_LEAVES, violated, stats
                        )
                    )
                except phases.Unclosed:
                    return None, lookahead(lo, hi, worst) if LOOKAHEAD else worst[-1], lo, hi
                continue
            combo, alphas = chosen
            n = len(conj[0][0])
            C = [sum((w * conj[q][0][u] for q, w in combo), ZERO) for u in range(n)]
            c = sum((w * conj[q][1] for q, w in combo), ZERO)
            xc = [sum((w * conj[q][2][t] for q, w in combo), ZERO) for t in range(d)]
            ((val, m),) = ex.lower(
                RatMatrix(1, n, [-v for v in C]), [-c], K, [[-v for v in xc]], alphas
            )
            if val < 0 or (val == 0 and not any(conj[q][3] for q, _ in combo)):
                return None, None, lo, hi  # floats were too optimistic: split
            for q, w in combo:
                m[n_rows + q] = w
            proofs.append(_proof(m, ONE))
        return Relaxed((), tuple(uppers), tuple(proofs)), None, lo, hi

    def cell(rows, bx, depth=0):
        if budget is not None and stats["leaves"] >= budget:
            stats["open"] += 1
            return OpenBox(tuple(rows), tuple(tuple(b) for b in bx), depth)
        if not intervals.enter(stats, limits, depth, MAX_DEPTH):
            raise _Unsupported
        leaf, smear, lo, hi = close(rows, bx)
        if leaf is not None:
            return intervals.closed(stats, limits, last, leaf)
        centre = [(bx[t][0][2] + bx[t][1][2]) / 2 for t in range(d)]
        violated(tuple(centre))  # raises when the centre is a counterexample
        if smear is None or not smear.any():
            smear = hi - lo
        return intervals.split(rows, bx, int(np.argmax(smear)), stats, limits, cell, depth)

    try:
        return cell(list(rows0), box, depth0), stats
    except _Unsupported:
        return None


def layers_violate(p, case: Case, x) -> bool:
    """Does the program, in floats, send x into a forbidden conjunction (up to 1e-9)?  Only
    a hint: the caller evaluates the point exactly."""
    try:
        net = _layers_of(p, case)
    except _Unsupported:
        return False
    X = np.array([float(v) for v in x])
    h = X
    for W, b in zip(net.Wf[:-1], net.bf[:-1]):
        h = np.maximum(W @ h + b, 0)
    y = net.Wf[-1] @ h + net.bf[-1]
    z = np.concatenate([X, y])
    return any(
        all(float(r.c) + sum(float(a) * v for a, v in zip(r.a, z)) > -1e-9 for r in conj)
        for conj in case.outputs
    )


_cache: dict = {}


def _layers_of(p, case):
    key = id(p)
    if key not in _cache or _cache[key][0] is not p:
        _cache.clear()
        _cache[key] = (p, Layers(p, case))
    return _cache[key][1]
