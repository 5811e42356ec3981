"""Producer of layer-by-layer certificates (``kernel/layerwise.py``): for each Maxout layer,
the segment of three sub-layers is proved equal to the encoded layer over the interval box of
its inputs, one small certificate per group of outputs that share their pair of nodes (for
the construction: one per unit), so the work grows with width x depth, not exponentially."""

from __future__ import annotations

import time

from ..kernel.errors import CheckFailed
from ..kernel.layerwise import (Claim, LayerwiseCertificate, check_same_shape, check_structure,
                                interval_image, layer_programs)
from ..kernel.maxout import MaxoutNetwork
from ..kernel.polyhedron import Box, Domain
from ..kernel.rational import ONE, ZERO
from ..kernel.transformer import Transformer
from ..construct.bounds import round_outward
from .certify import Limits, NoCertificate, _Oracle, build_certificate, same_max_leaf


def build_layerwise(net: MaxoutNetwork, tf, domain: Domain,
                    limits: Limits) -> tuple[LayerwiseCertificate, dict]:
    """A layerwise certificate for net = tf, tf a Transformer or a Maxout network of the same
    layer widths; or NoCertificate (structure, limits, or a layer that differs on its box,
    which need not be reachable from the domain: then only the monolithic route can
    decide)."""
    try:
        if isinstance(tf, Transformer):
            check_structure(net, tf)
        else:
            check_same_shape(net, tf)
    except CheckFailed as e:
        raise NoCertificate(str(e)) from None
    proofs = None
    if isinstance(domain, Box):
        B = domain
    else:
        from .lp import bound_multipliers  # exact LP: tightest box, with Farkas multipliers
        P = domain.as_polyhedron()
        lo, hi, proofs = [], [], []
        for i in range(P.dim):
            e = tuple(ONE if j == i else ZERO for j in range(P.dim))
            up = bound_multipliers(P, e)
            low = bound_multipliers(P, tuple(-v for v in e))
            if up is None or low is None:
                raise NoCertificate("the domain is unbounded")
            hi.append(sum((y * c for y, c in zip(up, P.b)), ZERO))
            lo.append(-sum((y * c for y, c in zip(low, P.b)), ZERO))
            proofs.append((tuple((j, y) for j, y in enumerate(up) if y),
                           tuple((j, y) for j, y in enumerate(low) if y)))
        B = Box(tuple(lo), tuple(hi))
        proofs = tuple(proofs)
    boxes = []
    layers, stats = [], {"leaves": 0, "splits": 0, "claims": 0, "lp_calls": 0}
    last = time.monotonic()
    for l in range(len(net.layers)):
        boxes.append(B)
        f, g = layer_programs(net, tf, l)
        groups: dict[tuple[int, int], list[int]] = {}
        for o, pair in enumerate(zip(f.outputs, g.outputs)):
            groups.setdefault(pair, []).append(o)
        oracle = _Oracle(B.dim, B)
        claims = []
        for outs in groups.values():
            from .certify import CounterexampleFound
            leaf = same_max_leaf(f, g, B.as_polyhedron(), B, tuple(outs), oracle)
            if leaf is not None:
                stats["leaves"] += 1
                stats["same_max"] = stats.get("same_max", 0) + 1
                claims.append(Claim(tuple(outs), leaf))
                continue
            try:
                tree, s = build_certificate(f, g, B.as_polyhedron(), B, limits, tuple(outs),
                                            oracle)
            except CounterexampleFound:
                raise NoCertificate(f"layer {l + 1}: the two differ somewhere in the layer's "
                                    "input box") from None
            stats["leaves"] += s["leaves"]
            stats["splits"] += s["splits"]
            claims.append(Claim(tuple(outs), tree))
            if limits.progress is not None and time.monotonic() - last > 2:
                last = time.monotonic()
                limits.progress(stats["leaves"])
        stats["claims"] += len(claims)
        stats["lp_calls"] += oracle.calls
        layers.append(tuple(claims))
        image = interval_image(net, l, B)   # rounded outward as the construction does
        B = Box(*round_outward(image.lower, image.upper))
    return LayerwiseCertificate(tuple(boxes), proofs, tuple(layers)), stats
