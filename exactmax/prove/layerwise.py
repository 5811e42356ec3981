"""Producer of layer-by-layer certificates (``kernel/layerwise.py``): for each Maxout layer,
the segment of three sub-layers is proved equal to the encoded layer over the box of its
inputs, one small certificate per group of outputs that share their pair of nodes (for the
construction: one per unit, by the same-max rule), so the work grows with width x depth, not
exponentially.

On a polyhedral domain the first layer is proved over the polyhedron itself and B_1 is the
box of its exact LP ranges, each bound carried by Farkas multipliers (rule (B') of the
kernel): this is the box the construction's LP gate constants were computed from, so the
gates hold on every later box.  A layer that differs on its cell yields a point there; its
pull-back to the domain is looked for by ``prove.pullback``.
"""

from __future__ import annotations

import dataclasses
import random
import time

from .. import interruption
from ..construct.bounds import round_outward
from ..engine.certify import (
    CounterexampleFound,
    Limits,
    NoCertificate,
    _Oracle,
    build_certificate,
    same_max_leaf,
)
from ..kernel.affine import Affine
from ..kernel.certificate import _max_args, domain_rows
from ..kernel.errors import CheckFailed
from ..kernel.layerwise import (
    Claim,
    LayerwiseCertificate,
    UnitImage,
    check_structure,
    check_unmerged,
    interval_image,
    layer_programs,
)
from ..kernel.maxout import MaxoutNetwork
from ..kernel.polyhedron import Box, Domain, Polyhedron
from ..kernel.program import Lin, _opposite_pairs
from ..kernel.rational import ONE, ZERO, Q
from ..kernel.transformer import FeedForward, Transformer


class LayerDiffers(NoCertificate):
    """Layer ``layer`` (0-based) of the two models differs at ``h``, a point of its input
    cell (B_{l-1}, or the domain for the first layer); more precisely at every point of the
    polyhedron ``rows`` where the affine map ``diff`` is not zero."""

    def __init__(self, layer: int, h, over_domain: bool, rows=None, diff=None):
        where = "the domain" if over_domain else f"its input box B_{layer}"
        super().__init__(f"layer {layer + 1} differs at a point of {where}")
        self.layer, self.over_domain = layer, over_domain
        self.h, self.rows, self.diff = h, rows, diff


def _sample_points(box: Box | None, inside, count: int = 24):
    """Points of the cell to try before building a tree: its centre, some corners and
    deterministic pseudo-random rationals (a box), or one interior point (a polyhedron)."""
    if box is None:
        yield inside
        return
    from ..search.vertices import box_corners

    yield tuple((lo + hi) / 2 for lo, hi in zip(box.lower, box.upper))
    yield from box_corners(box, count // 2)
    rng = random.Random(len(box.lower))
    for _ in range(count // 2):
        yield tuple(
            lo + (hi - lo) * Q(rng.randrange(1, 64), 64) for lo, hi in zip(box.lower, box.upper)
        )


def _has_max(p, i: int) -> bool:
    """Node i is max-like, or a linear combination with a max-like term."""
    node = p.nodes[i]
    return bool(_max_args(node)) or (
        isinstance(node, Lin) and any(_max_args(p.nodes[j]) for j, _ in node.terms)
    )


def _differs_at(f, g, outs, points):
    """A point where an output in ``outs`` differs between the programs f and g (exact
    evaluation), or None."""
    from ..vectorized.program import evaluate_program

    for h in points:
        if h is None:
            continue
        yf, yg = evaluate_program(f, h), evaluate_program(g, h)
        if any(yf[o] != yg[o] for o in outs):
            return h
    return None


def _bounding_box(P: Polyhedron, deadline: float):
    """The tightest box around P, with (upper, lower) Farkas multipliers per coordinate."""
    from ..engine.lp import bound_multipliers

    lo, hi, proofs = [], [], []
    for i in range(P.dim):
        e = tuple(ONE if j == i else ZERO for j in range(P.dim))
        up = bound_multipliers(P, e, deadline)
        low = bound_multipliers(P, tuple(-v for v in e), deadline)
        if up is None or low is None:
            raise NoCertificate("the domain is unbounded (or its box took too long)")
        hi.append(sum((y * c for y, c in zip(up, P.b)), ZERO))
        lo.append(-sum((y * c for y, c in zip(low, P.b)), ZERO))
        proofs.append(
            (
                tuple((j, y) for j, y in enumerate(up) if y),
                tuple((j, y) for j, y in enumerate(low) if y),
            )
        )
    return Box(tuple(lo), tuple(hi)), tuple(proofs)


def _first_image(net: MaxoutNetwork, oracle: _Oracle):
    """B_1 = the box of the exact LP ranges of the first layer's units over the domain
    (rounded outward as the construction rounds), and the Farkas proofs of its bounds (rule
    (B')): piece z = w . x + b lies in [b + min w . x, b - min (-w) . x]."""
    lo, hi, images = [], [], []
    for unit in net.layers[0].units:
        lows, ups = [], []
        for p in unit.pieces:
            bottom, top = oracle.lp_min(p.w), oracle.lp_min(tuple(-v for v in p.w))
            if top is None or bottom is None:
                raise NoCertificate("layer 1: no LP bound of a piece over the domain")
            lows.append((p.b + bottom[1], _sparse(bottom[0])))
            ups.append((p.b - top[1], _sparse(top[0])))
        j = max(range(len(lows)), key=lambda t: lows[t][0])
        lo.append(lows[j][0])
        hi.append(max(u for u, _ in ups))
        images.append(UnitImage(j, lows[j][1], tuple(pr for _, pr in ups)))
    rlo, rhi = round_outward(lo, hi)
    return Box(rlo, rhi), tuple(images)


def _sparse(y) -> tuple:
    return tuple((i, v) for i, v in enumerate(y) if v)


def build_layerwise(
    net: MaxoutNetwork, tf, domain: Domain, limits: Limits, stats: dict | None = None
) -> tuple[LayerwiseCertificate, dict]:
    """A layerwise certificate for net = tf, tf a Transformer or a Maxout network of the same
    layer widths; or NoCertificate (structure, limits), or LayerDiffers (a layer differs on
    its cell, which need not be reachable from the domain).  ``stats`` (filled in place, so
    a caller sees how far a failed run got) gets the counts, one record per layer."""
    unmerged = None
    try:
        if (
            isinstance(tf, Transformer)
            and len(net.layers) > 1
            and len(tf.sublayers) == 2 * len(net.layers) + 1
        ):
            unmerged = _unmerged(tf)
            tf = unmerged
        if isinstance(tf, Transformer):
            check_structure(net, tf)
        elif net.widths != tf.widths or net.out_dim != tf.out_dim:
            raise CheckFailed("layerwise: the two Maxout networks have different layer widths")
    except CheckFailed as e:
        raise NoCertificate(str(e).removeprefix("layerwise: ")) from None
    over_domain = isinstance(tf, Transformer) and not isinstance(domain, Box)
    proofs, P = None, domain.as_polyhedron()
    if isinstance(domain, Box):
        B = domain
    else:
        B, proofs = _bounding_box(P, limits.deadline)
    boxes, image = [], None
    stats = {} if stats is None else stats
    stats.update(
        {"leaves": 0, "splits": 0, "claims": 0, "lp_calls": 0, "same_max": 0, "layers": []}
    )
    layers = []
    shown = time.monotonic()
    for l in range(len(net.layers)):
        boxes.append(B)
        first = l == 0 and over_domain
        cell, cell_box = (P, None) if first else (B.as_polyhedron(), B)
        oracle = _Oracle(cell.dim, cell_box, P if first else None, limits.deadline)
        layer_stats = {
            "layer": l + 1,
            "claims": 0,
            "same_max": 0,
            "trees": 0,
            "over": "the domain" if first else f"B_{l}",
            "result": "proved",
        }
        stats["layers"].append(layer_stats)
        try:
            claims = _layer_claims(
                net, tf, l, cell, cell_box, oracle, limits, stats, layer_stats, first
            )
        except NoCertificate as e:
            layer_stats["result"] = str(e)
            raise
        layers.append(claims)
        if limits.progress is not None and time.monotonic() - shown > 2:
            shown = time.monotonic()
            limits.progress(stats["leaves"])
        if first:
            B, image = _first_image(net, oracle) if len(net.layers) > 1 else (B, ())
        else:
            new = interval_image(net, l, B)  # rounded outward as the construction does
            B = Box(*round_outward(new.lower, new.upper))
        stats["lp_calls"] += oracle.calls
    return LayerwiseCertificate(tuple(boxes), proofs, tuple(layers), image, unmerged), stats


def _unmerged(tf: Transformer) -> Transformer:
    """tf with each merged feed-forward sub-layer split in two (rule (M), checked by the
    kernel): the clean-up's ReLU pairs first, then the gate units reading the H block where
    the merged ones read M (the clean-up has just set H to M).  The blocks are the
    construction's (d_m = 3 W + k, or 3 W + 1 with a scalar position); CheckFailed when no
    such split gives tf back."""
    n, D = len(tf.sublayers), (len(tf.sublayers) - 1) // 2
    last: CheckFailed | None = None
    for W in sorted({(tf.d_model - tf.n_tokens) // 3, (tf.d_model - 1) // 3}):
        subs = [tf.sublayers[0]]
        for l in range(D - 1):
            subs.append(tf.sublayers[1 + 2 * l])
            subs += _split(tf.sublayers[2 + 2 * l], W)
        subs += tf.sublayers[n - 2 :]
        u = dataclasses.replace(tf, sublayers=tuple(subs), meta=None)
        try:
            return check_unmerged(tf, u)
        except CheckFailed as e:
            last = e
    assert last is not None  # the loop ran (one or two widths W)
    raise last


def _split(ff, W: int):
    """(clean-up, gate) of a merged feed-forward sub-layer, with the gate's columns M_j
    moved to H_j (j < W); a sub-layer that is not a feed-forward one is returned twice, for
    the kernel to refuse."""
    if not isinstance(ff, FeedForward):
        return [ff, ff]
    pairs = _opposite_pairs(ff)
    clean = sorted(set(pairs) | set(pairs.values()))
    gate = [h for h in range(len(ff.inner.b)) if h not in set(clean)]

    def part(units, moved, b2):
        W1 = []
        for h in units:
            row = list(ff.inner.W[h])
            if moved:
                for j in range(W):
                    row[j], row[2 * W + j] = row[2 * W + j], ZERO
            W1.append(tuple(row))
        W2 = tuple(tuple(r[h] for h in units) for r in ff.outer.W)
        return FeedForward(
            Affine(tuple(W1), tuple(ff.inner.b[h] for h in units), ff.inner.in_dim),
            Affine(W2, b2, len(units)),
        )

    zero = (ZERO,) * len(ff.outer.b)
    return [part(clean, False, zero), part(gate, True, ff.outer.b)]


def _layer_claims(net, tf, l, cell, cell_box, oracle, limits, stats, layer_stats, first):
    """The claims of layer l over ``cell``: one same-max leaf per group of segment outputs
    sharing their pair of nodes where the rule applies, a split tree otherwise; LayerDiffers
    as soon as a point of the cell shows the layer differs."""
    f, g = layer_programs(net, tf, l)
    groups: dict[tuple[int, int], list[int]] = {}
    for o, pair in enumerate(zip(f.outputs, g.outputs)):
        groups.setdefault(pair, []).append(o)
    claims, last, rows = [], time.monotonic(), domain_rows(cell)
    for outs in groups.values():
        interruption.check()
        if time.monotonic() > limits.deadline:
            raise NoCertificate(f"layer {l + 1}: time limit reached")
        leaf = same_max_leaf(f, g, cell, cell_box, tuple(outs), oracle, rows)
        if leaf is not None:
            stats["leaves"] += 1
            stats["same_max"] += 1
            layer_stats["same_max"] += 1
            claims.append(Claim(tuple(outs), leaf))
            continue
        if any(_has_max(f, f.outputs[o]) or _has_max(g, g.outputs[o]) for o in outs):
            # a unit the same-max rule did not take: try points before any tree
            h = _differs_at(
                f,
                g,
                outs,
                _sample_points(cell_box, None if cell_box else oracle.interior_point(rows)),
            )
            if h is not None:
                raise LayerDiffers(l, h, first)
        try:
            tree, s = build_certificate(f, g, cell, cell_box, limits, tuple(outs), oracle)
        except CounterexampleFound as e:
            raise LayerDiffers(l, e.x, first, e.rows, e.diff) from None
        except NoCertificate as e:
            raise NoCertificate(f"layer {l + 1}: {e}") from None
        layer_stats["trees"] += 1
        stats["leaves"] += s["leaves"]
        stats["splits"] += s["splits"]
        claims.append(Claim(tuple(outs), tree))
        if limits.progress is not None and time.monotonic() - last > 2:
            last = time.monotonic()
            limits.progress(stats["leaves"])
    layer_stats["claims"] = len(claims)
    stats["claims"] += len(claims)
    return tuple(claims)
