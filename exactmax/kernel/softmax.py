"""Checked error bounds of softmax attention in the construction (§3): with exact gates (|z~^l|
<= C_l) its Transformer, softmax at scale lam, computes over n equal tokens t (short units repeat
their last piece) h~^0 = x, z~^l_{i,t} = w^l_{i,t} . h~^{l-1} + b^l_{i,t}, h~^l_i = S(z~^l_{i,.}),
S(v) = <v, softmax(lam v)>, y~ = A h~^D + c; hardmax (max_t z^l_{i,t}) gives the Maxout network N.
For gaps g_t = max v - v_t >= 0, D(v) = max v - S(v) = sum_t g_t e^{-lam g_t} / sum_t e^{-lam g_t};
on a box of gaps the numerator is <= sum_t max g e^{-lam g} (each <= 1/(e lam)), the denominator
>= max(1, sum_t e^{-lam gh_t}); D <= W((n - 1)/e)/lam (<= (n - 1)/(e lam)); D <= sum_t psi(lam
g_t)/lam, psi(x) = x/(e^x + 1) (denominator >= 1 + e^{-lam g_t}); the lower bound swaps the ends.
Per unit, e = h~ - h, d_t = w_t . e, hardmax gaps g: h~_i - h_i = (max z~ - max z) - D(z~), max
z~ - max z = max_a (d_a - g_a) in [min_{cand z} d, max_{cand z~} d] (cand v: the tokens that may be
an argmax of v on the cell).  ``cell_bound`` runs on ``EXACT`` here, and on balls in the search."""

from dataclasses import dataclass
from functools import cache
from math import ceil, factorial, floor
from typing import Any

from .errors import CheckFailed
from .maxout import MaxoutNetwork
from .polyhedron import Box, Domain, check_box_contains, check_upper_bound
from .program import check_shapes
from .rational import ONE, ZERO, Q

CAP = 256  # e^{-a} for a > CAP is bounded by [0, e^{-CAP}]
E_LOWER = Q(2718281828, 10**9)  # e > E_LOWER (e = 2.71828182845...)
# _grid(x, up, bits): x rounded down (up) to 2^-bits Z, bits in Z
_grid = lambda x, up, bits=64: (ceil if up else floor)(x * Q(2) ** bits) / Q(2) ** bits
# _series(f, m) = sum_{i<=m} (-f)^i/i!, 0 <= f <= 1: below e^{-f} if m is odd, above if even
_series = lambda f, m: sum(((-f) ** i / factorial(i) for i in range(m + 1)), ZERO)
# _round(x, up): x >= 0 rounded down (or up) to b significant bits
_round = lambda x, up, b=80: _grid(x, up, b - (int(x.p).bit_length() - int(x.q).bit_length()))
_E1 = (_round(_series(ONE, 27), False), _round(_series(ONE, 28), True))
_POWERS = [(ONE, ONE)]  # bounds of e^{-n}, each (e^{-1})^n rounded outward


def exp_neg_bounds(a: Q) -> tuple[Q, Q]:  # lo <= e^{-a} <= hi (a >= 0): e^{-a} = (e^{-1})^n e^{-f}
    if a < 0:
        raise CheckFailed("exp_neg_bounds: negative argument")
    n = min(int(a.floor()), CAP)
    while len(_POWERS) <= n:
        lo, hi = _POWERS[-1]
        _POWERS.append((_round(lo * _E1[0], False), _round(hi * _E1[1], True)))
    if a > CAP:
        return ZERO, _POWERS[CAP][1]
    (lo, hi), f = _POWERS[n], a - n
    lo *= max(ZERO, _series(_grid(f, True, 48), 21))
    return _round(lo, False), _round(hi * _series(_grid(f, False, 48), 22), True)


class ExactArithmetic:  # intervals (lo, hi) with rational ends, rounded outward to the 2^-64 grid
    zero, box = ZERO, staticmethod(lambda lo, hi: (lo, hi))
    add = staticmethod(lambda a, b: (a[0] + b[0], a[1] + b[1]))
    sub = staticmethod(lambda a, b: (a[0] - b[1], a[1] - b[0]))
    meet = staticmethod(lambda a, b: (max(a[0], b[0]), min(a[1], b[1])))
    lo, hi = staticmethod(lambda a: a[0]), staticmethod(lambda a: a[1])
    abs_max = staticmethod(lambda a: max(-a[0], a[1]))

    def dot(self, w, xs, b):
        lo = sum((c * (l if c > 0 else u) for c, (l, u) in zip(w, xs) if c), b)
        hi = sum((c * (u if c > 0 else l) for c, (l, u) in zip(w, xs) if c), b)
        return _grid(lo, False), _grid(hi, True)

    def deviation(self, gl, gh, lam):  # (D_lo, D_hi) over the gap box [gl, gh] (module docstring)
        peak, top = _grid(ONE / (E_LOWER * lam), True), deviation_peak(1) / lam
        ps = lambda g, e: g * e[1] / (1 + e[0])  # psi(lam g)/lam <= ps(g, bounds of e^{-lam g})
        num_hi = num_lo = den_lo = den_hi = psi = ZERO
        for l, h in zip(gl, gh):
            el, eh = exp_neg_bounds(lam * l), exp_neg_bounds(lam * h)
            # the maximum of g e^{-lam g} on [l, h] (rising up to g = 1/lam): at h, at l or the peak
            num_hi += h * eh[1] if lam * h <= 1 else l * el[1] if lam * l >= 1 else peak
            num_lo += min(l * el[0], h * eh[0])
            den_lo, den_hi = den_lo + eh[0], den_hi + el[1]
            # psi(lam g)/lam, psi(x) = x e^{-x}/(1 + e^{-x}) <= W(1/e): rises to 1, falls from 8/5
            psi += ps(h, eh) if lam * h <= 1 else ps(l, el) if lam * l >= Q(8, 5) else top
        d_hi = min(num_hi / max(ONE, den_lo), psi, deviation_peak(len(gl) - 1) / lam)
        return _grid(num_lo / den_hi, False), _grid(d_hi, True)


EXACT = ExactArithmetic()
_tokens = lambda xs, n: [xs[min(t, len(xs) - 1)] for t in range(n)]  # the last one repeated
_max_of = lambda A, vs: A.box(max(A.lo(v) for v in vs), max(A.hi(v) for v in vs))  # of max_t v_t


@cache
def deviation_peak(m: int) -> Q:
    """A rational c >= W(m/e) (Lambert W), so that D(v) <= c / lam for v with m + 1 entries: with
    x_t = lam g_t, lam D <= c iff sum_{t != argmax} (x_t - c) e^{-x_t} <= c, where each term is at
    most e^{-(c+1)} (at x = c + 1), so c >= m hi(e^{-(c+1)}) suffices; c found by bisection."""
    lo, hi = ZERO, Q(max(m, 1))
    while hi < m * exp_neg_bounds(hi + 1)[1]:
        hi *= 2
    for _ in range(24):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if mid >= m * exp_neg_bounds(mid + 1)[1] else (mid, hi)
    return hi


@dataclass(frozen=True, slots=True)
class CellResult:
    bound: Any  # upper bound of |y~ - y|_inf on the cell (None: gates fail), in A's numbers
    zmax: tuple  # per layer, upper bound of |z~| on the cell
    gate_layer: int | None  # first layer whose gate check failed


def _gaps(A, ps, X) -> tuple[list, ...]:
    """Per token t, the ends of an enclosure of the gap max_s z_s - z_t >= 0 over the box X of
    h, from z_s - z_t = (w_s - w_t) . h + (b_s - b_t) (a repeated piece differs by 0)."""
    diff = lambda p, q: A.dot([a - b for a, b in zip(p.w, q.w)], X, p.b - q.b)
    cols = [[diff(p, q) for p in ps if p is not q] for q in ps]
    return tuple([max([A.zero] + [end(v) for v in col]) for col in cols] for end in (A.lo, A.hi))


def cell_bound(net: MaxoutNetwork, gates, n: int, lam, lo, hi, A=EXACT, first=None) -> CellResult:
    """sup |y~(x) - N(x)|_inf <= bound on the box [lo, hi] (A's numbers) if every gate |z~^l| <= C_l
    holds there; ``first[i][j]``: a checked range of piece j of unit i of layer 1 (then z~^1 = z^1
    and the caller checked its gates).  H, Ht and E enclose h, h~ and e = h~ - h."""
    H = Ht = [A.box(l, u) for l, u in zip(lo, hi)]  # H, Ht, E enclose h, h~, e = h~ - h
    E, zmax = [A.box(A.zero, A.zero) for _ in lo], []
    for li, layer in enumerate(net.layers):
        new, zm = [], A.zero
        for ui, unit in enumerate(layer.units):
            ps = _tokens(unit.pieces, n)
            zt = [A.dot(p.w, Ht, p.b) for p in ps]
            if li == 0 and first is not None:
                zt = [A.meet(v, A.box(*r)) for v, r in zip(zt, _tokens(first[ui], n))]
            else:
                zm = max([zm] + [A.abs_max(v) for v in zt])
            z = zt if li == 0 else [A.dot(p.w, H, p.b) for p in ps]
            (gl, gh), (gtl, gth) = _gaps(A, ps, H), _gaps(A, ps, Ht)
            d = [A.dot(p.w, E, A.zero) for p in ps]
            dg = _max_of(A, [A.sub(v, A.box(l, u)) for v, l, u in zip(d, gl, gh)])
            d_lo = min(A.lo(v) for v, g in zip(d, gl) if g == 0)  # cand: gap may be 0
            d_hi = max(A.hi(v) for v, g in zip(d, gtl) if g == 0)
            D = A.box(*A.deviation(gtl, gth, lam))
            e, h = A.sub(A.meet(A.box(d_lo, d_hi), dg), D), _max_of(A, z)
            ht = A.meet(A.add(h, e), A.sub(_max_of(A, zt), D))
            new.append((h, A.meet(e, A.sub(ht, h)), ht))
        zmax.append(zm)
        if zm > gates[li]:
            return CellResult(None, tuple(zmax), li)
        H, E, Ht = map(list, zip(*new))
    if net.output is not None:
        E = [A.dot(row, E, A.zero) for row in net.output.W]
    return CellResult(max(A.abs_max(v) for v in E), tuple(zmax), None)


@dataclass(frozen=True, slots=True)
class SoftmaxClaim:  # sup over the domain of |y~ - N|_inf <= bound, from ``leaves`` checked cells
    bound: Q
    leaves: int
    excluded: int
    zmax: tuple[Q, ...]


def _excluded(domain: Domain, row: int, lo, hi) -> bool:  # A_row x <= b_row fails on all the cell
    P = domain.as_polyhedron()
    if not (isinstance(row, int) and 0 <= row < len(P.b)):
        return False
    return sum((c * (l if c > 0 else u) for c, l, u in zip(P.A[row], lo, hi)), ZERO) > P.b[row]


def check_first_layer(net: MaxoutNetwork, gates, domain: Domain, multipliers):
    """Layer-1 ranges over a polyhedron from Farkas multipliers ``multipliers[i][j] =
    (y_max, y_min)`` (y >= 0, y^T A = +-w_{i,j}), each checked, and the gate |z^1| <= C_1."""
    P, C, ranges = domain.as_polyhedron(), gates[0], list[list[tuple[Q, Q]]]()
    if len(multipliers) != net.layers[0].width:
        raise CheckFailed("softmax: one list of multipliers per unit of layer 1 needed")
    for unit, ys in zip(net.layers[0].units, multipliers):
        if len(ys) != len(unit.pieces):
            raise CheckFailed("softmax: one pair of multipliers per piece needed")
        ranges.append([])
        for p, (y_max, y_min) in zip(unit.pieces, ys):
            hi = check_upper_bound(P, p.w, y_max) + p.b
            lo = -check_upper_bound(P, tuple(-c for c in p.w), y_min) + p.b
            if lo < -C or hi > C:
                raise CheckFailed(f"softmax: layer-1 range [{lo}, {hi}] exceeds the gate C_1 = {C}")
            ranges[-1].append((lo, hi))
    return ranges


def check_softmax_bound(
    net, gates, n: int, lam: Q, domain: Domain, root_lo, root_hi, tree, first_ys=None, root_ys=None
) -> SoftmaxClaim:
    """Accept iff [root_lo, root_hi] is the Box domain or contains it (by ``root_ys``), the leaves
    of ``tree`` (>= 1) pass ``cell_bound``'s gates (layer 1 over the domain with ``first_ys``), each
    ("out", row) cell is outside row; ("split", i, l, r) halves x_i.  Returns the max bound."""
    check_shapes((net,), domain)
    if len(root_lo) != net.input_dim or len(root_hi) != net.input_dim:
        raise CheckFailed(f"softmax: the root box needs {net.input_dim} bounds on each side")
    if not lam > 0 or len(gates) != len(net.layers) or n < max(l.rank for l in net.layers):
        raise CheckFailed("softmax: lambda > 0, one gate per layer and n >= every rank needed")
    if not isinstance(domain, Box):
        check_box_contains(domain, root_lo, root_hi, root_ys or (), "softmax: root")
    elif (tuple(domain.lower), tuple(domain.upper)) != (tuple(root_lo), tuple(root_hi)):
        raise CheckFailed("softmax: the root cell is not the domain box")
    first = None if first_ys is None else check_first_layer(net, gates, domain, first_ys)
    best, leaves, excluded, zmax = ZERO, 0, 0, [ZERO] * len(net.layers)
    stack = [(tree, tuple(root_lo), tuple(root_hi))]
    while stack:
        node, lo, hi = stack.pop()
        kind = node[0] if isinstance(node, tuple | list) and node else None
        if kind == "split":
            if len(node) != 4 or not (isinstance(node[1], int) and 0 <= node[1] < len(lo)):
                raise CheckFailed(f"softmax: a split node names no coordinate: {node[:2]!r}")
            _, i, left, right = node
            mid = (lo[i] + hi[i]) / 2
            stack.append((left, lo, hi[:i] + (mid,) + hi[i + 1 :]))
            stack.append((right, lo[:i] + (mid,) + lo[i + 1 :], hi))
        elif kind == "out":
            if len(node) != 2 or not _excluded(domain, node[1], lo, hi):
                raise CheckFailed(f"softmax: a dropped cell is not outside constraint {node[1:]}")
            excluded += 1
        elif kind == "leaf":
            r = cell_bound(net, gates, n, lam, lo, hi, EXACT, first)
            if r.bound is None:
                raise CheckFailed(f"softmax: gate C_{(r.gate_layer or 0) + 1} fails on {lo}..{hi}")
            best, leaves = max(best, r.bound), leaves + 1
            zmax = [max(a, b) for a, b in zip(zmax, r.zmax)]
        else:
            raise CheckFailed(f"softmax: unknown tree node {node!r:.60}")
    if leaves == 0:
        raise CheckFailed("softmax: no cell of the tree meets the domain")
    return SoftmaxClaim(best, leaves, excluded, tuple(zmax))
