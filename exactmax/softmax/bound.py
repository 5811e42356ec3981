"""Certified error of the softmax Transformer of the construction (docs/notes/construction.md §3).

Untrusted producer.  For a Maxout network N and its compiled Transformer T (gate constants C_l),
T_lam is T with softmax attention at scale lam (times each head's scale, 1 in the
construction).  While every perturbed pre-activation stays within its gate (|z~^l| <= C_l), T_lam
computes the recursion of ``kernel/softmax.py`` (tokens stay equal: queries are constant and
value = key), so sup_x |T_lam(x) - N(x)|_inf is bounded cell by cell there.

- ``search_bound``: bisection of the domain's bounding box, the worst cell first, each cell
  bounded by ``cell_bound`` in python-flint ``arb`` ball arithmetic (outward rounding), until
  the bound stops improving or a budget ends; cells outside one domain constraint are dropped.
- the final tree is re-checked by ``kernel.softmax.check_softmax_bound`` in exact rational
  arithmetic (e^{-a} by Taylor sums with remainder); only that value is reported as certified.
- ``observed_error``: a lower bound W, the exact N(x) against T_lam(x) evaluated in balls at
  points chosen in float64 (numpy): vertices, the worst cells, random points, points next to
  tie sets, then a batched climb continued from lam/64 up to lam (floats only choose the
  points).
- ``closed_form``: the bound of §3, E_l = Lambda_l E_{l-1} + delta, |y~ - y| <= ||A||_inf E_D.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field, replace
from fractions import Fraction

from flint import arb

from ..construct.bounds import certified_bounding_box, layer_bounds
from ..construct.transformer import CompileOptions, compile_transformer
from ..kernel.errors import CheckFailed
from ..kernel.maxout import MaxoutNetwork
from ..kernel.polyhedron import Box, Domain
from ..kernel.rational import ONE, ZERO, Q
from ..kernel.softmax import (
    _excluded,
    _tokens,
    cell_bound,
    check_first_layer,
    check_softmax_bound,
    deviation_peak,
)
from ..kernel.transformer import HARDMAX, Attention, FeedForward, Transformer
from ..vectorized.scaled import MaxoutEvaluator
from .evaluate import evaluate_softmax, precision


class NotConstruction(ValueError):
    """The Transformer is not the construction of the network (message says where)."""


class ArbArithmetic:
    """Intervals as ``arb`` balls: ball arithmetic encloses every value (outward rounding)."""

    def __init__(self):
        self.zero = arb(0)
        self._cache = {}

    def _a(self, q):
        v = self._cache.get(q)
        if v is None:
            v = self._cache[q] = arb(q)
        return v

    def box(self, lo, hi):
        lo = lo if isinstance(lo, arb) else self._a(lo)
        hi = hi if isinstance(hi, arb) else self._a(hi)
        return lo.union(hi)

    def dot(self, w, xs, b):
        s = b if isinstance(b, arb) else self._a(b)
        for c, x in zip(w, xs):
            if c:
                s = s + self._a(c) * x
        return s

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def meet(self, a, b):
        lo, hi = max(a.lower(), b.lower()), min(a.upper(), b.upper())
        return lo.union(hi) if lo <= hi else a

    def lo(self, a):
        return a.lower()

    def hi(self, a):
        return a.upper()

    def abs_max(self, a):
        return a.abs_upper()

    def deviation(self, gl, gh, lam):
        n = len(gl)
        lam = self._a(lam)
        peak = (1 / (arb.const_e() * lam)).upper()
        num_hi = num_lo = den_lo = den_hi = arb(0)
        for l, h in zip(gl, gh):
            el, eh = (-lam * l).exp(), (-lam * h).exp()
            if lam * h <= 1:
                num_hi += (h * eh).upper()
            elif lam * l >= 1:
                num_hi += (l * el).upper()
            else:
                num_hi += peak
            num_lo += min((l * el).lower(), (h * eh).lower())
            den_lo += eh.lower()
            den_hi += el.upper()
        psi = arb(0)
        for l, h in zip(gl, gh):
            psi += self._psi_upper(lam * l, lam * h)
        d_hi = min(
            (num_hi / max(arb(1), den_lo)).upper(),
            ((n - 1) * peak).upper(),
            (psi / lam).upper(),
            (self._a(deviation_peak(n - 1)) / lam).upper(),
        )
        d_lo = max(arb(0), (num_lo / den_hi).lower())
        return d_lo, d_hi

    def _psi_upper(self, xl, xh):
        """An upper bound of psi(x) = x / (e^x + 1) on [xl, xh] (as in the kernel's
        ``deviation``): increasing up to 1, decreasing from 8/5, below 0.2785 in between."""
        if xh <= 1:
            return (xh / (xh.exp() + 1)).upper()
        if xl >= self._a(Q(8, 5)):
            return (xl / (xl.exp() + 1)).upper()
        return self._a(Q(2785, 10000))


# ------------------------------------------------------------------------- the construction


@dataclass(frozen=True, slots=True)
class Setting:
    """What the bound is about: the network, its construction's gates, tokens, domain."""

    net: MaxoutNetwork
    tf: Transformer
    gates: tuple[Q, ...]
    n: int
    domain: Domain
    root: tuple[tuple[Q, ...], tuple[Q, ...]]
    gate_bounds: tuple[Q, ...]  # the exact pre-activation bounds C_l was made from
    first_multipliers: tuple | None = None  # polyhedron: Farkas multipliers for layer 1
    first_ranges: tuple | None = None  # ... and the ranges they give (kernel-checked)
    root_multipliers: tuple | None = None  # polyhedron: Farkas bounds of the root box


def kernel_check(s: Setting, lam: Q, tree):
    """The kernel's exact re-check (``check_softmax_bound``) of a search tree for ``s``."""
    return check_softmax_bound(
        s.net,
        s.gates,
        s.n,
        lam,
        s.domain,
        s.root[0],
        s.root[1],
        tree,
        s.first_multipliers,
        s.root_multipliers,
    )


def _strip(tf: Transformer) -> Transformer:
    subs = tuple(replace(s, kind=HARDMAX) if isinstance(s, Attention) else s for s in tf.sublayers)
    return replace(tf, sublayers=subs, domain=None)


def _gates_of(net, tf, merged) -> list[Q]:
    """C_l read off the gate feed-forward layers (b2 = -C_l on the row Z_0)."""
    gates, W = [], max(max(net.widths), net.out_dim)
    ffs = [s for s in tf.sublayers if isinstance(s, FeedForward)]
    order = [0] + list(range(1, len(ffs))) if merged else list(range(0, len(ffs), 2))
    for l in range(len(net.layers)):
        if l >= len(order):
            break
        gates.append(-ffs[order[l]].outer.b[W])
    return gates


def first_layer_multipliers(net: MaxoutNetwork, domain: Domain):
    """For a polyhedron (not a box): per unit of layer 1 and piece j, Farkas multipliers
    (y_max, y_min) with y^T A = +-w_j (LP optima from z3, checked later by the kernel), so
    that the layer-1 ranges are bounded over the polyhedron itself, not its bounding box."""
    if isinstance(domain, Box):
        return None
    from ..engine.lp import bound_multipliers

    P = domain.as_polyhedron()
    out = []
    for unit in net.layers[0].units:
        ys = []
        for p in unit.pieces:
            y_max = bound_multipliers(P, tuple(p.w))
            y_min = bound_multipliers(P, tuple(-c for c in p.w))
            if y_max is None or y_min is None:
                return None
            ys.append((y_max, y_min))
        out.append(tuple(ys))
    return tuple(out)


def _with_first(s: Setting) -> Setting:
    ys = first_layer_multipliers(s.net, s.domain)
    if ys is None:
        return s
    try:
        ranges = check_first_layer(s.net, s.gates, s.domain, ys)
    except CheckFailed:
        return s  # the gates of layer 1 fail on the polyhedron: the cells will say where
    return replace(s, first_multipliers=ys, first_ranges=tuple(tuple(r) for r in ranges))


def setting_of(net: MaxoutNetwork, domain: Domain, tf: Transformer | None = None) -> Setting:
    """The construction of ``net`` on ``domain``, or ``tf`` after checking that it *is* that
    construction (same matrices, exactly) with its own gate constants."""
    lo, hi, mults = certified_bounding_box(domain)
    root = (lo, hi)
    gate_bounds = tuple(b.gate for b in layer_bounds(net, domain))
    if tf is None:
        c = compile_transformer(net, domain)
        return _with_first(
            Setting(
                net,
                c.transformer,
                c.gates,
                c.transformer.n_tokens,
                domain,
                root,
                gate_bounds,
                root_multipliers=mults,
            )
        )
    meta = tf.meta if isinstance(tf.meta, dict) else {}
    variant = meta.get("variant") if isinstance(meta.get("variant"), dict) else {}
    merged = bool(variant.get("merged", False))
    if variant.get("positional", "onehot") != "onehot":
        raise NotConstruction(
            "scalar positions make the attention queries differ between "
            "tokens; softmax-bound supports the one-hot construction only"
        )
    try:
        gates = (
            [Q(g) for g in meta["gate_constants"]]
            if "gate_constants" in meta
            else _gates_of(net, tf, merged)
        )
        c = compile_transformer(net, domain, CompileOptions(merged=merged, gates=tuple(gates)))
    except (IndexError, ValueError, TypeError, KeyError):
        raise NotConstruction(
            "it does not have the layout of exactmax compile's construction of this network"
        ) from None
    if _strip(c.transformer) != _strip(tf):
        raise NotConstruction(
            "it is not the construction of this network (docs/notes/construction.md "
            "§2, as exactmax compile builds it) with its gate constants "
            + ", ".join(str(g) for g in gates)
        )
    return _with_first(
        Setting(
            net, tf, tuple(gates), tf.n_tokens, domain, root, gate_bounds, root_multipliers=mults
        )
    )


# ---------------------------------------------------------------------------------- search


@dataclass(slots=True)
class Search:
    tree: tuple
    bound: object  # arb upper bound (max over leaves), None if gates fail
    leaves: int
    excluded: int
    worst: list  # [(bound, lo, hi)] of the worst leaves
    gate_fail: dict | None  # {"layer", "cell", "x" (a point where it fails) or None}
    zmax: list  # per layer, arb upper bound of |z~| over the leaves
    time_s: float
    stop: str


def _key(r) -> float:
    return math.inf if r.bound is None else _fl(r.bound)


def search_bound(
    s: Setting,
    lam: Q,
    max_cells: int = 4000,
    timeout_s: float = 20.0,
    progress=None,
    bits: int = 128,
    converge: bool = True,
) -> Search:
    """Refine a bisection tree of the bounding box, splitting the worst cell first."""
    A = ArbArithmetic()
    t0 = time.monotonic()
    net, gates, n = s.net, s.gates, s.n
    lo0, hi0 = s.root
    width0 = [hi - lo for lo, hi in zip(lo0, hi0)]
    poly = None if isinstance(s.domain, Box) else s.domain.as_polyhedron()
    heap, count = [], 0
    root = ["leaf"]
    history, stop, last = [], "budget", t0
    fail_point, tries = None, 0

    slopes = [
        max(abs(c) for u in net.layers[0].units for p in u.pieces for c in (p.w[i],))
        for i in range(net.input_dim)
    ]

    def resolved(lo, hi):
        # a plateau of the worst bound means convergence only once the cell is small on the
        # scale 1/lam of the softmax in layer 1 (before that, bounds plateau at their peaks)
        return lam * sum((h - l) * a for l, h, a in zip(lo, hi, slopes)) <= Q(1, 2)

    def place(node, lo, hi):
        nonlocal count
        if poly is not None:
            for row in range(len(poly.b)):
                if _excluded(poly, row, lo, hi):
                    node[:] = ["out", row]
                    return
        r = cell_bound(net, gates, n, lam, lo, hi, A, s.first_ranges)
        count += 1
        heapq.heappush(heap, (-_key(r), count, node, lo, hi, r))

    with precision(bits):
        place(root, lo0, hi0)
        splits = 0
        while heap:
            neg, _, node, lo, hi, r = heap[0]
            now = time.monotonic()
            if len(heap) >= max_cells:
                stop = "cells"
                break
            if now - t0 > timeout_s:
                stop = "time"
                break
            if r.bound is None and (
                tries < 200 or all(h - l <= w / 2**14 for l, h, w in zip(lo, hi, width0) if w)
            ):
                tries += 1  # a failing cell: is the failure real at its centre or a corner?
                fail_point = _gate_failure_point(s, lam, lo, hi)
                if fail_point is not None:
                    stop = "gates"
                    break
            if r.bound is not None:
                history.append(_fl(r.bound))
                k = len(history)
                if (
                    converge
                    and k > 64 * max(1, net.input_dim)
                    and history[k // 2] * (1 - 1e-3) <= history[-1]
                    and resolved(lo, hi)
                ):
                    stop = "converged"
                    break
            heapq.heappop(heap)
            dims = [i for i, w in enumerate(width0) if w]
            if not dims:  # a single point
                heapq.heappush(heap, (neg, _, node, lo, hi, r))
                stop = "point"
                break
            i = max(dims, key=lambda j: (hi[j] - lo[j]) / width0[j])
            mid = (lo[i] + hi[i]) / 2
            left, right = ["leaf"], ["leaf"]
            node[:] = ["split", i, left, right]
            place(left, lo, hi[:i] + (mid,) + hi[i + 1 :])
            place(right, lo[:i] + (mid,) + lo[i + 1 :], hi)
            splits += 1
            if progress is not None and now - last > 2:
                last = now
                top = heap[0][5].bound if heap else None
                progress(len(heap), top)
        if not heap:
            stop = "empty"
    leaves = sorted(heap, key=lambda e: e[0])
    failing = [e for e in leaves if e[5].bound is None]
    zmax = [
        max((e[5].zmax[l] for e in leaves if len(e[5].zmax) > l), default=arb(0))
        for l in range(len(net.layers))
    ]
    gate_fail = None
    if failing:
        e = failing[0]
        gate_fail = {"layer": e[5].gate_layer, "cell": (e[3], e[4]), "x": fail_point}
    bound = None if failing else max((e[5].bound for e in leaves), default=arb(0))
    return Search(
        _freeze(root),
        bound,
        len(leaves),
        _count_out(root),
        [(e[5].bound, e[3], e[4]) for e in leaves[:24] if e[5].bound is not None],
        gate_fail,
        zmax,
        time.monotonic() - t0,
        stop,
    )


def _freeze(node):
    if node[0] == "split":
        return ("split", node[1], _freeze(node[2]), _freeze(node[3]))
    return tuple(node)


def _count_out(node) -> int:
    if node[0] == "split":
        return _count_out(node[2]) + _count_out(node[3])
    return 1 if node[0] == "out" else 0


def perturbed_preactivations(s: Setting, lam: Q, x) -> list[list[arb]]:
    """z~^l_{i,t}(x) of the recursion, as balls, layer by layer."""
    out, h = [], [arb(v) for v in x]
    lam_a = arb(lam)
    for layer in s.net.layers:
        zs, nh = [], []
        for unit in layer.units:
            z = [
                sum((arb(c) * v for c, v in zip(p.w, h)), arb(p.b))
                for p in _tokens(unit.pieces, s.n)
            ]
            m = max(z, key=lambda v: v.mid()).mid()
            e = [(lam_a * (v - m)).exp() for v in z]
            total = sum(e[1:], e[0])
            nh.append(sum((v * w for v, w in zip(z, e)), arb(0)) / total)
            zs.extend(z)
        out.append(zs)
        h = nh
    return out


def _gate_failure_point(s: Setting, lam, lo, hi):
    """A corner or the centre of the cell, in the domain, where some z~ is surely beyond its
    gate (earlier layers surely within theirs), as (x, layer, value) or None."""
    import itertools

    pts = [tuple((a + b) / 2 for a, b in zip(lo, hi))]
    if len(lo) <= 4:
        pts += [tuple(c) for c in itertools.product(*zip(lo, hi))]
    for x in pts:
        if not s.domain.contains(x):
            continue
        for l, zs in enumerate(perturbed_preactivations(s, lam, x)):
            C = arb(s.gates[l])
            if any(z.abs_lower() > C for z in zs):
                worst = max(zs, key=lambda z: float(z.abs_lower()))
                return (x, l, worst)
            if not all(z.abs_upper() <= C for z in zs):
                break
    return None


# -------------------------------------------------------------------------- observed error


def _fl(v) -> float:
    """v as a float for the screening only, saturated at +-1e300 (a weight of thousands of
    digits has no float; the floats only guide the search, the exact check decides)."""
    try:
        return max(-1e300, min(1e300, float(v)))
    except OverflowError:
        return 1e300 if v > 0 else -1e300


def _float_net(net: MaxoutNetwork, n: int):
    """The network's pieces as float arrays (per layer: W (units, n, in), b (units, n)),
    tokens padded as the Transformer pads them, and the output matrix (or None)."""
    import numpy as np

    layers = []
    for layer in net.layers:
        ps = [_tokens(unit.pieces, n) for unit in layer.units]
        W = np.array([[[_fl(c) for c in p.w] for p in row] for row in ps], dtype=float)
        b = np.array([[_fl(p.b) for p in row] for row in ps], dtype=float)
        layers.append((W, b))
    out = (
        None
        if net.output is None
        else np.array([[_fl(c) for c in row] for row in net.output.W], dtype=float)
    )
    return layers, out


def _float_errors(fnet, lam: float, X, patterns: bool = False):
    """|y~ - y|_inf for every row of X (m x d) in floating point: only to guide the search
    for bad points (y exact hardmax, y~ softmax at scale lam, both run in float64).  With
    ``patterns``, also the hardmax argmax of every unit (m x units), the activation pattern."""
    import numpy as np

    layers, out = fnet
    H = Hs = X
    pat = []
    for W, b in layers:
        Z = np.einsum("unj,mj->mun", W, H) + b
        Zt = np.einsum("unj,mj->mun", W, Hs) + b
        E = np.exp(lam * (Zt - Zt.max(axis=2, keepdims=True)))
        if patterns:
            pat.append(Z.argmax(axis=2))
        H, Hs = Z.max(axis=2), (Zt * E).sum(axis=2) / E.sum(axis=2)
    diff = Hs - H if out is None else (Hs - H) @ out.T
    err = np.abs(diff).max(axis=1) if diff.shape[1] else np.zeros(len(X))
    return (err, np.concatenate(pat, axis=1)) if patterns else err


def _tie_points(fnet, A, B, rounds: int = 45):
    """For the rows of A and B (m x d) whose hardmax activation patterns differ, a point of
    the segment between them within 2^-rounds of its length of a change of pattern, i.e. of
    a tie set (bisection in float64)."""
    import numpy as np

    pa = _float_errors(fnet, 1.0, A, patterns=True)[1]
    keep = (pa != _float_errors(fnet, 1.0, B, patterns=True)[1]).any(axis=1)
    A, B, pa = A[keep], B[keep], pa[keep]
    for _ in range(rounds if len(A) else 0):
        M = (A + B) / 2
        same = (_float_errors(fnet, 1.0, M, patterns=True)[1] == pa).all(axis=1)
        A, B = np.where(same[:, None], M, A), np.where(same[:, None], B, M)
    return A


def _float_error(net: MaxoutNetwork, n: int, lam: float, x) -> float:
    """|y~ - y|_inf at one point, in floating point (see ``_float_errors``)."""
    import numpy as np

    return float(
        _float_errors(_float_net(net, n), lam, np.array([[_fl(v) for v in x]], dtype=float))[0]
    )


def _to_q(v: float) -> Q:
    f = Fraction(float(v))
    return Q(f.numerator, f.denominator)


@dataclass(frozen=True, slots=True)
class Observed:
    error: arb  # a lower bound of |T_lam(x) - N(x)|_inf at x
    x: tuple[Q, ...]
    points: int


def observed_error(
    s: Setting,
    lam: Q,
    worst_cells,
    seed: int = 0,
    bits: int = 128,
    climbs: int = 16,
    steps: int = 400,
    samples: int = 200_000,
    budget_s: float = 3.0,
) -> Observed:
    """The largest error found at points of the domain: exact N(x) against T_lam(x) in balls
    (lower end of |ball - N(x)|).  Floats choose the points, never the value.

    Candidates, screened in float64 (numpy, in batches): box vertices, the worst cells'
    centres, up to ``samples`` uniform points of the bounding box, and points next to tie
    sets (segments between points of different activation patterns bisected to the switch,
    then probed at distances 0.3/lam .. 30/lam, where the per-unit deviation
    sum g e^{-lam g} / sum e^{-lam g} peaks).  Then a continuation in lambda: at
    lam/64, lam/16, lam/4 and lam, the best ``climbs`` points (those carried from the
    previous scale and the best of the candidates at this scale) climb the float error by a
    batched evolution strategy (32 Gaussian steps per point and round; a step grows by 1.5 on
    success and shrinks by 0.7 otherwise); the smoother error at a smaller scale leads to the
    ridges that are too thin to find at lam itself.  The ends, converted exactly to rationals
    and inside the domain, are evaluated exactly.  About ``budget_s`` seconds of float work
    (``steps`` rounds per scale at most)."""
    import itertools

    import numpy as np

    rng = np.random.default_rng(seed)
    t0 = time.monotonic()
    lo0, hi0 = s.root
    d = len(lo0)
    lo_f = np.array([_fl(v) for v in lo0])
    hi_f = np.array([_fl(v) for v in hi0])
    widths = np.where(hi_f > lo_f, hi_f - lo_f, 1.0)
    P = s.domain.as_polyhedron()
    Af = np.array([[_fl(c) for c in row] for row in P.A], dtype=float).reshape(-1, d)
    bf = np.array([_fl(c) for c in P.b], dtype=float)
    fnet = _float_net(s.net, s.n)
    lamf = max(float(min(lam, Q(10) ** 300)), 1e-300)  # floats only guide: capped scale

    def inside(X):  # float screen of the domain (the exact check comes at the end)
        return (X @ Af.T <= bf + 1e-12 * (1 + np.abs(bf))).all(axis=1)

    def errors(X, lf):
        e = _float_errors(fnet, lf, X)
        return np.where(inside(X) & np.isfinite(e), e, -1.0)

    def box_points(m):
        return lo_f + rng.random((m, d)) * (hi_f - lo_f)

    def diverse(X, E, m, sep=0.02):
        """Indices of up to m best rows of X, pairwise at least sep apart (box-relative)."""
        chosen = []
        for i in np.argsort(-E, kind="stable")[: 50 * m]:
            y = X[i] / widths
            if all(np.abs(y - X[j] / widths).max() >= sep for j in chosen):
                chosen.append(i)
                if len(chosen) == m:
                    break
        return np.array(chosen, dtype=int)

    pts, st = [], []  # candidates and their starting steps (relative to the box widths)
    if d <= 8:
        pts += [c for c in itertools.product(*zip(lo_f, hi_f))]
        st += [0.5 / max(lamf, 1.0)] * len(pts)
    for _, lo, hi in worst_cells:
        pts.append([_fl((a + b) / 2) for a, b in zip(lo, hi)])
        st.append(max(max((_fl(b - a) / w for a, b, w in zip(lo, hi, widths)), default=0.0), 1e-9))
    pool = [(np.array(pts, dtype=float).reshape(-1, d), np.array(st, dtype=float))]
    tried = len(pts)
    batch = max(1, min(samples, 20_000))
    while tried < samples + len(pts) and time.monotonic() - t0 < budget_s / 6:
        pool.append((box_points(batch), np.full(batch, 0.05)))
        tried += batch
    for _, lo, hi in worst_cells:  # where the certified bound is largest, densely
        cl = np.array([_fl(v) for v in lo])
        ch = np.array([_fl(v) for v in hi])
        m = max(1, samples // (8 * max(1, len(worst_cells))))
        pool.append(
            (
                cl + rng.random((m, d)) * (ch - cl),
                np.full(m, max(float(((ch - cl) / widths).max()) / 4, 1e-9)),
            )
        )
        tried += m
    pairs = max(1, min(2000, samples // 50))
    A = _tie_points(fnet, box_points(pairs), box_points(pairs))
    tried += 47 * pairs
    if len(A):
        r = np.repeat(np.array([0.3, 1.0, 3.0, 10.0, 30.0]) / lamf, 3)
        U = rng.standard_normal((len(A), len(r), d))
        U /= np.maximum(np.linalg.norm(U, axis=2, keepdims=True), 1e-300)
        T = np.clip(A[:, None, :] + U * r[None, :, None] * widths, lo_f, hi_f)
        pool.append((T.reshape(-1, d), np.tile(r, len(A))))
        tried += T.shape[0] * T.shape[1]
    X = np.concatenate([p[0] for p in pool])
    S = np.concatenate([p[1] for p in pool])
    scales = [lamf / 64, lamf / 16, lamf / 4, lamf]
    share = [1 / 6, 2 / 6, 3 / 6, 1.0]  # of the climbing time, cumulative: half at lam
    t1 = time.monotonic()
    cur, step = X[:0], S[:0]
    tries = 32
    for k, lf in enumerate(scales):
        E = errors(X, lf)
        top = diverse(X, E, climbs)
        cur, step = np.concatenate([cur, X[top]]), np.concatenate([step, S[top]])
        best = errors(cur, lf)
        end = t1 + max(0.0, t0 + budget_s - t1) * share[k]
        for r in range(steps):
            if r >= 10 and time.monotonic() > end:
                break
            Y = cur[:, None, :] + rng.standard_normal((len(cur), tries, d)) * (
                step[:, None, None] * widths
            )
            Y = np.clip(Y, lo_f, hi_f)
            e = errors(Y.reshape(-1, d), lf).reshape(len(cur), tries)
            tried += len(cur) * tries
            j = e.argmax(axis=1)
            ej = e[np.arange(len(cur)), j]
            better = ej > best
            cur[better], best[better] = Y[better, j[better]], ej[better]
            step = np.where(better, step * 1.5, np.maximum(step * 0.7, 1e-15))
        keep = np.argsort(-best, kind="stable")[:climbs]
        if k < len(scales) - 1:  # carried to the next scale, with room to move there
            cur, step = cur[keep], np.clip(step[keep], 0.3 / scales[k + 1], 0.5)

    def exact(x):  # the float point as rationals, inside the root box, fixed coordinates kept
        return tuple(a if a == b else min(max(_to_q(v), a), b) for v, a, b in zip(x, lo0, hi0))

    finals = [exact(x) for x in cur]
    finals += [tuple((a + b) / 2 for a, b in zip(lo, hi)) for _, lo, hi in worst_cells[:8]]
    finals.append(tuple((a + b) / 2 for a, b in zip(lo0, hi0)))
    finals = [x for x in dict.fromkeys(finals) if s.domain.contains(x)] or [tuple(lo0)]
    ev = MaxoutEvaluator(s.net)
    best_x = (arb(0), finals[0])
    for x in finals:
        exact = ev.evaluate(x)
        soft, used = _tight_softmax(s.tf, x, lam, bits)
        with precision(used):
            err = max(((v - arb(q)).abs_lower() for v, q in zip(soft, exact)), default=arb(0))
        if err > best_x[0]:
            best_x = (err, x)
    return Observed(best_x[0], best_x[1], tried)


def _tight_softmax(tf, x, lam: Q, bits: int, max_bits: int = 8192):
    """T_lam(x) in balls, the precision doubled until every ball is finite and narrow
    (radius <= 2^-30 (1 + |midpoint|)), up to ``max_bits``: a deep network loses many bits
    in the exponentials, and a wide ball would make the observed error's lower end 0."""
    while True:
        soft = evaluate_softmax(tf, x, lam, bits)
        with precision(bits):
            narrow = all(
                v.is_finite() and v.rad() <= (1 + abs(v.mid())) * arb(2) ** -30 for v in soft
            )
        if narrow or 2 * bits > max_bits:
            return soft, bits
        bits *= 2


# ----------------------------------------------------------------------------- closed form


def closed_form(net: MaxoutNetwork, n: int, lam) -> arb:
    """||A||_inf E_D with E_l = Lambda_l E_{l-1} + min(ln n, (n - 1)/e) / lam (§3)."""
    delta = (min(arb(n).log(), arb(n - 1) / arb.const_e()) / arb(lam)) if n > 1 else arb(0)
    E = arb(0)
    for layer in net.layers:
        Lam = max(sum(abs(c) for c in p.w) for u in layer.units for p in u.pieces)
        E = arb(Lam) * E + delta
    A = (
        max((sum(abs(c) for c in row) for row in net.output.W), default=ZERO)
        if net.output is not None
        else ONE
    )
    return (arb(A) * E).upper()


# --------------------------------------------------------------------------------- certify


@dataclass(slots=True)
class Certified:
    lam: Q
    verdict: str  # "certified", "gates-fail", "unknown"
    bound: Q | None  # kernel-checked
    arb_bound: object
    search: Search
    check_time_s: float = 0.0
    reason: str | None = None
    zmax: tuple = ()
    extra: dict = field(default_factory=dict)


def certify(
    s: Setting,
    lam: Q,
    max_cells: int = 4000,
    timeout_s: float = 20.0,
    progress=None,
    bits: int = 128,
    check: bool = True,
    on_check=None,
) -> Certified:
    """Search, then (if ``check``) re-check the tree in the kernel's exact arithmetic
    (``on_check(leaves)`` is called before the re-check)."""
    r = search_bound(s, lam, max_cells, timeout_s, progress, bits)
    return check_search(s, lam, r, check, on_check)


def check_search(s: Setting, lam: Q, r: Search, check: bool = True, on_check=None) -> Certified:
    """``certify``'s second half: the verdict of the search ``r`` and (if ``check``) the
    kernel's exact re-check of its tree."""
    if r.gate_fail is not None:
        g = r.gate_fail
        if g["x"] is not None:
            x, l, z = g["x"]
            over = (abs(z) - arb(s.gates[l])).mid()
            why = (
                f"a gate of layer {l + 1} is not exact: at x = ({', '.join(map(str, x))}) "
                f"a perturbed pre-activation is {z.mid().str(8, radius=False)}, beyond "
                f"C_{l + 1} = {s.gates[l]} "
                + (
                    f"(by about {over.str(3, radius=False)})"
                    if over > 0
                    else "(by less than the balls resolve)"
                )
            )
            return Certified(lam, "gates-fail", None, None, r, reason=why)
        why = (
            f"the gates of layer {g['layer'] + 1} could not be shown exact within the "
            f"budget ({r.leaves} cells, stopped by {r.stop})"
        )
        return Certified(lam, "unknown", None, None, r, reason=why)
    if not check:
        return Certified(lam, "certified-arb", None, r.bound, r)
    t0 = time.monotonic()
    if on_check is not None:
        on_check(r.leaves)
    try:
        claim = kernel_check(s, lam, r.tree)
    except CheckFailed as e:  # the exact re-check is stricter than the balls: say so
        return Certified(
            lam,
            "unknown",
            None,
            r.bound,
            r,
            time.monotonic() - t0,
            reason=f"the kernel's exact re-check rejected the cells: {e}",
        )
    return Certified(
        lam, "certified", claim.bound, r.bound, r, time.monotonic() - t0, zmax=claim.zmax
    )


def closed_form_slack(s: Setting, lam: Q) -> Q:
    """A slack S for ``exactmax compile --slack S`` under which every gate is exact at scale
    lam by the closed form of §3: |z~^l - z^l| <= Lambda_l E_{l-1}, so C_l >= R_l (1 + S)
    with S >= Lambda_l E_{l-1} / R_l covers the perturbed pre-activations (rounded up to two
    significant digits)."""
    n = s.n
    delta = (min(arb(n).log(), arb(n - 1) / arb.const_e()) / arb(lam)) if n > 1 else arb(0)
    E, need = arb(0), ZERO
    for layer, R in zip(s.net.layers, s.gate_bounds):
        Lam = max(sum(abs(c) for c in p.w) for u in layer.units for p in u.pieces)
        if R > 0:
            need = max(need, _arb_q((arb(Lam) * E / arb(R)).upper()))
        E = arb(Lam) * E + delta
    return dec_round(need, up=True, digits=2) if need > 0 else ZERO


def _arb_q(x: arb) -> Q:
    m, e = x.mid().man_exp()
    return Q(int(m)) * Q(2) ** int(e) if int(e) >= 0 else Q(int(m), 2 ** (-int(e)))


def dec_round(q: Q, up: bool, digits: int = 4) -> Q:
    """q rounded up (or down) to ``digits`` significant decimal digits."""
    if q == 0:
        return q
    sign = 1 if q > 0 else -1
    a = q if q > 0 else -q
    e = 0
    while a * Q(10) ** e >= 10**digits:
        e -= 1
    while a * Q(10) ** e < 10 ** (digits - 1):
        e += 1
    v = a * Q(10) ** e
    k = v.ceil() if (up == (sign > 0)) else v.floor()
    return sign * Q(int(k)) / Q(10) ** e


def dec_str(q: Q) -> str:
    """A finite decimal rational as a decimal string."""
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    s = format(Decimal(int(q.p)) / Decimal(int(q.q)), "f")
    return s.rstrip("0").rstrip(".") if "." in s else s


def smallest_lambda(
    s: Setting, eps: Q, tol: Q, max_cells: int, timeout_s: float, progress=None, bits: int = 128
):
    """Bisection on a geometric grid for the smallest lam with certified U <= eps: returns
    (lam_hi, result at lam_hi or None, lam_lo, probes), lam_hi passing and lam_lo failing (or
    lam_lo = None when even the first probe below fails to exist), hi / lo <= 1 + tol."""
    K = closed_form(s.net, s.n, 1)  # closed form = K / lam
    lam_cf = _arb_q(K) / eps
    probes = []

    def ok(lam):
        r = certify(s, lam, max_cells, timeout_s, None, bits, check=False)
        good = r.verdict == "certified-arb" and r.arb_bound <= arb(eps)
        probes.append((lam, r))
        if progress is not None:
            progress(lam, r)
        return good, r

    hi = dec_round(lam_cf, up=True, digits=3)
    good, r = ok(hi)
    tries = 0
    while not good and tries < 4:
        if r.verdict != "certified-arb":
            return None, r, None, probes
        hi = hi * 2
        good, r = ok(hi)
        tries += 1
    if not good:
        return None, r, None, probes
    lo = None
    cand = hi / 2
    for _ in range(40):
        g, rr = ok(dec_round(cand, up=False, digits=3))
        if not g:
            lo = dec_round(cand, up=False, digits=3)
            break
        hi, r = dec_round(cand, up=False, digits=3), rr
        cand = hi / 2
    if lo is None:
        return hi, r, None, probes
    while hi > lo * (1 + tol):
        mid = dec_round(_arb_q((arb(lo) * arb(hi)).sqrt()), up=True, digits=4)
        if not lo < mid < hi:
            break
        g, rr = ok(mid)
        if g:
            hi, r = mid, rr
        else:
            lo = mid
    return hi, r, lo, probes
