"""Vertices of a domain, and the simplest rationals of an interval.

A vertex of P = {x : A x <= b} in Q^d is a point of P where d linearly independent
constraints are tight: the solution of A_S x = b_S for a set S of d rows with A_S invertible.
They are found by enumerating the sets S (exactly, with FLINT's rational solver), which is
exponential in d, so it stops after ``limit`` sets; a box's 2^d corners are listed directly
(in the order of the binary numbers, so any prefix is spread over the box).

The simplest rational of an interval [lo, hi] (smallest denominator, then smallest
numerator in absolute value) comes from the Stern-Brocot tree: it is what a counterexample's
coordinates are shrunk to.
"""

from __future__ import annotations

from itertools import combinations
from math import floor

from ..kernel.polyhedron import Box, Domain, Polyhedron
from ..kernel.rational import Q, RatMatrix


def box_corners(box: Box, limit: int = 256) -> list[tuple[Q, ...]]:
    """Up to ``limit`` corners of the box (all of them when 2^d <= limit)."""
    d = box.dim
    count = min(1 << d, limit)
    out = []
    for n in range(count):
        bits = n if (1 << d) <= limit else _spread(n, d)
        out.append(tuple(box.upper[i] if bits >> i & 1 else box.lower[i] for i in range(d)))
    return list(dict.fromkeys(out))


def _spread(n: int, d: int) -> int:
    """A deterministic pseudo-random d-bit pattern for corner number n (a few corners of a
    high-dimensional box should not all share their first coordinates)."""
    h = (n * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & ((1 << 64) - 1)
    out = 0
    for i in range(d):
        h = (h * 6364136223846793005 + 1442695040888963407) & ((1 << 64) - 1)
        out |= (h >> 63) << i
    return out


def polyhedron_vertices(P: Polyhedron, limit: int = 5000) -> list[tuple[Q, ...]]:
    """The vertices of P found among the first ``limit`` sets of d constraints."""
    d, out, seen = P.dim, [], set()
    for n, rows in enumerate(combinations(range(len(P.b)), d)):
        if n >= limit:
            break
        M = RatMatrix([list(P.A[r]) for r in rows])
        try:
            sol = M.solve(RatMatrix([[P.b[r]] for r in rows]))
        except ZeroDivisionError:  # singular: not a vertex
            continue
        x = tuple(sol[i, 0] for i in range(d))
        if x not in seen and P.contains(x):
            seen.add(x)
            out.append(x)
    return out


def vertices(dom: Domain, limit: int = 256) -> list[tuple[Q, ...]]:
    """Vertices of a box or a polyhedron (at most ``limit`` box corners)."""
    if isinstance(dom, Box):
        return box_corners(dom, limit)
    return polyhedron_vertices(dom)


def centroid(points) -> tuple[Q, ...]:
    """The mean of the points (in the domain when they are, by convexity)."""
    pts = list(points)
    return tuple(sum(col, Q(0)) / len(pts) for col in zip(*pts))


def simplest_between(lo: Q, hi: Q) -> Q:
    """The rational in [lo, hi] with the smallest denominator (and then the smallest absolute
    value): the first one met descending the Stern-Brocot tree."""
    if lo > hi:
        raise ValueError("empty interval")
    if lo <= 0 <= hi:
        return Q(0)
    if hi < 0:
        return -simplest_between(-hi, -lo)
    # 0 < lo <= hi: continued fractions
    fl = Q(floor(lo))
    if fl == lo:
        return lo
    if fl + 1 <= hi:
        return fl + 1
    # lo and hi share the integer part; recurse on the reciprocals of the fractional parts
    return fl + 1 / simplest_between(1 / (hi - fl), 1 / (lo - fl))
