"""Exact 2-D geometry of cells (untrusted helpers for adjacency and plots).

A cell is {x : a . x + c >= 0 (> 0 if strict)}; its closure in the plane is a convex polygon,
obtained exactly by clipping its bounding box by every row (Sutherland-Hodgman over Q).
"""

from __future__ import annotations

from ..kernel.certificate import Row
from ..kernel.polyhedron import Box
from ..kernel.rational import Q


def _val(r: Row, x) -> Q:
    return r.a[0] * x[0] + r.a[1] * x[1] + r.c


def polygon(rows, box: Box) -> list[tuple[Q, Q]]:
    """The vertices (counter-clockwise, no repeats) of the closure of the cell inside ``box``."""
    (l0, l1), (u0, u1) = box.lower, box.upper
    poly = [(l0, l1), (u0, l1), (u0, u1), (l0, u1)]
    for r in rows:
        out = []
        for n, p in enumerate(poly):
            q = poly[(n + 1) % len(poly)]
            vp, vq = _val(r, p), _val(r, q)
            if vp >= 0:
                out.append(p)
            if (vp > 0 > vq) or (vp < 0 < vq):
                t = vp / (vp - vq)
                out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
        poly = [p for n, p in enumerate(out) if p != out[n - 1]] if len(out) > 1 else out
        if not poly:
            return []
    return poly


def segment_on_line(poly, h: Row):
    """The closure's intersection with the line h = 0 as ((t0, p0), (t1, p1)), t0 < t1, with
    t = (-a_1, a_0) . p the position along the line; None if it is empty or one point."""
    on = [p for p in poly if _val(h, p) == 0]
    if len(on) < 2:
        return None
    pos = sorted(((-h.a[1] * p[0] + h.a[0] * p[1], p) for p in on), key=lambda e: e[0])
    if pos[0][0] == pos[-1][0]:
        return None
    return pos[0], pos[-1]
