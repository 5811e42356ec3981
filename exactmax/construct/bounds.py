"""Sound exact bounds on the pre-activations of a Maxout network over its domain.

The gate constant C_l of the construction must satisfy C_l >= |z^l_{i,j}(x)| for every x in
the domain.  Two producers, both exact over Q:

- ``interval``: interval arithmetic from the domain's bounding box; on a box the first layer's
  ranges are exact (an affine function attains its extremes at vertices);
- ``lp``: exact linear programs (z3 over Q) for the first layer's pre-activations over the
  polyhedron itself, which is tighter when the domain is not a box; interval arithmetic after.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..kernel.affine import nonzero
from ..kernel.maxout import MaxoutNetwork
from ..kernel.polyhedron import Box, Domain
from ..kernel.rational import Q


class DomainError(ValueError):
    """The domain is empty or unbounded, so no gate constants exist."""


@dataclass(frozen=True, slots=True)
class LayerBounds:
    """z_lo[i][j] <= z^l_{i,j} <= z_hi[i][j] over the domain; h_lo, h_hi bound h^l."""

    z_lo: tuple[tuple[Q, ...], ...]
    z_hi: tuple[tuple[Q, ...], ...]
    h_lo: tuple[Q, ...]
    h_hi: tuple[Q, ...]

    @property
    def gate(self) -> Q:
        """max |z| over all pieces: the smallest sound C_l."""
        return max(
            max(max(-lo, hi) for lo, hi in zip(los, his)) for los, his in zip(self.z_lo, self.z_hi)
        )


def _affine_range(w, b, lo, hi) -> tuple[Q, Q]:
    """The exact range of w . h + b over the box lo <= h <= hi."""
    low = high = b
    for j, c in nonzero(w):
        l, u = lo[j], hi[j]
        if c > 0:
            low += c * l
            high += c * u
        else:
            low += c * u
            high += c * l
    return low, high


def bounding_box(domain: Domain, method: str) -> tuple[tuple[Q, ...], tuple[Q, ...]]:
    """The domain's bounding box; DomainError if the domain is empty or unbounded."""
    return certified_bounding_box(domain)[:2]


def certified_bounding_box(domain: Domain):
    """(lower, upper, multipliers): the bounding box and, for a polyhedron, per coordinate
    the Farkas multipliers (y_upper, y_lower) of its two bounds (None for a box);
    DomainError if the domain is empty or unbounded."""
    if isinstance(domain, Box):
        if domain.is_empty():
            raise DomainError("the domain box is empty (some lower bound exceeds its upper bound)")
        return domain.lower, domain.upper, None
    from ..engine.lp import analyze_domain

    r = analyze_domain(domain)
    if r.empty:
        raise DomainError(
            "the domain polyhedron is empty (z3 found Farkas multipliers, checked by the kernel)"
        )
    if not r.bounded:
        assert r.unbounded_direction is not None  # an unbounded domain's report has its ray
        ray = ", ".join(str(v) for v in r.unbounded_direction)
        raise DomainError(f"the domain polyhedron is unbounded along ({ray})")
    return r.lower, r.upper, r.multipliers


GRID = 2**16
"""Boxes are rounded outward to multiples of 1/GRID: still sound (larger), and the numbers
stay small however deep the network (exact interval images grow a denominator per layer)."""


def round_outward(lo, hi) -> tuple[tuple[Q, ...], tuple[Q, ...]]:
    """The smallest box with corners on the 1/GRID grid that contains [lo, hi]."""
    return (
        tuple(Q((v * GRID).floor(), GRID) for v in lo),
        tuple(Q((v * GRID).ceil(), GRID) for v in hi),
    )


def layer_bounds(net: MaxoutNetwork, domain: Domain, method: str = "auto") -> list[LayerBounds]:
    """Sound bounds for every layer.  ``method``: "interval", "lp" or "auto" (LP when the
    domain is a polyhedron that is not a box, interval otherwise)."""
    if method == "auto":
        method = "interval" if isinstance(domain, Box) else "lp"
    lo, hi = bounding_box(domain, method)
    out = []
    for index, layer in enumerate(net.layers):
        z_lo, z_hi = [], []
        if index == 0 and method == "lp":
            from ..engine.lp import affine_ranges_over

            first = iter(
                affine_ranges_over(
                    domain.as_polyhedron(),
                    [(p.w, p.b) for unit in layer.units for p in unit.pieces],
                )
            )
        for unit in layer.units:
            if index == 0 and method == "lp":
                ranges = [next(first) for _ in unit.pieces]
            else:
                ranges = [_affine_range(p.w, p.b, lo, hi) for p in unit.pieces]
            z_lo.append(tuple(r[0] for r in ranges))
            z_hi.append(tuple(r[1] for r in ranges))
        # max is monotone: max_j lo_j <= h <= max_j hi_j; then rounded outward
        lo, hi = round_outward(tuple(max(l) for l in z_lo), tuple(max(h) for h in z_hi))
        out.append(LayerBounds(tuple(z_lo), tuple(z_hi), lo, hi))
    return out
