"""Pairs of models with a planted difference, for the quality suite of the search
(tests/quality/test_quality.py) and benchmarks/search.py.

Every pair is (A, B, domain) on the tent network's box [-1, 1]^2:

- ``thin_slab``: B = A + max(0, eps - |a . x - t|), eps = 10^-6: B differs from A only on a
  slab of width about 2 eps / |a| through the middle of the box;
- ``facet_slab``: B = A + max(0, x_0 - 1 + eps): only on a slab of width eps along the facet
  x_0 = 1;
- ``one_vertex``: B = A + max(0, x_0 + x_1 - 2 + eps), eps = 10^-9: only on a triangle of legs
  eps at the vertex (1, 1).  (Two continuous piecewise linear functions that differ at a point
  differ on a neighbourhood of it in the domain, so "only at a vertex" means this.)
- ``deep_slab``: two networks equal except where a first-layer unit U is within 10^-7 of
  10^-4, a tie of a second-layer unit;
- ``polyhedron_vertex``: B = A + max(0, x_1 - 1 + eps) on a triangle whose only point with
  x_1 = 1 is the vertex (37/101, 1), so B differs only on a tiny corner there;
- ``tie_only``: two hardmax Transformers that differ *only on a tie set*, which continuous
  Maxout networks cannot: A is the compiled tent with head 0's value reading 1/2 P_1 (token 1's
  value is not its key), B is A with a fourth token that copies token 1 (same position, so
  the same state in every sub-layer).  Off the ties of head 0 the winning tokens of every head
  have equal values and the extra copy changes no average; where token 1 ties with another
  token in head 0, the average weighs token 1's value twice in B.

The difference is planted with extra units: a unit U of the first layer on x, carried through
the middle layers by one-piece (identity) units, a unit V = max_j (alpha_j U + beta_j) in the
last layer (or the carrier), and its value added to the output.
"""

from __future__ import annotations

import os
from dataclasses import replace

from exactmax.construct.transformer import compile_transformer
from exactmax.io import load_model
from exactmax.kernel.affine import Affine
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from exactmax.kernel.polyhedron import Polyhedron
from exactmax.kernel.rational import Q

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TENT = os.path.join(ROOT, "examples", "tent.json")


def _pad(unit: Unit, extra: int) -> Unit:
    return Unit(tuple(Piece(p.w + (Q(0),) * extra, p.b) for p in unit.pieces))


def plant(net: MaxoutNetwork, first: list, last: list | None, c: Q) -> MaxoutNetwork:
    """net + c V(x): U = max over ``first`` of (w . x + b) in layer 1, V = max over ``last`` of
    (alpha U + beta) in the last layer (U itself when None); needs two layers or more."""
    assert len(net.layers) >= 2 and net.output is not None
    layers = []
    for l, layer in enumerate(net.layers):
        units = [_pad(u, 0 if l == 0 else 1) for u in layer.units]
        n_prev = net.widths[l]   # width of the layer before (without the extra unit)
        if l == 0:
            extra = Unit(tuple(Piece(tuple(map(Q, w)), Q(b)) for w, b in first))
        elif l == len(net.layers) - 1 and last is not None:
            extra = Unit(tuple(Piece((Q(0),) * n_prev + (Q(a),), Q(b)) for a, b in last))
        else:
            extra = Unit((Piece((Q(0),) * n_prev + (Q(1),), Q(0)),))
        layers.append(Layer(tuple(units) + (extra,)))
    out = net.output
    W = tuple(row + (Q(c),) for row in out.W)
    return MaxoutNetwork(net.input_dim, tuple(layers), Affine(W, out.b, out.in_dim + 1),
                         net.domain)


def thin_slab():
    a = load_model(TENT)
    eps, t = Q(1, 10**6), Q(12345, 98767)   # t: no small-denominator point lies on a . x = t
    b = plant(a, [(("1", "7/13"), -t), (("-1", "-7/13"), t)], [(-1, eps), (0, 0)], Q(1))
    return a, b, a.domain


def facet_slab():
    a = load_model(TENT)
    eps = Q(1, 10**6)
    b = plant(a, [(("1", "0"), eps - 1), (("0", "0"), 0)], None, Q(1))
    return a, b, a.domain


def one_vertex():
    a = load_model(TENT)
    eps = Q(1, 10**9)
    b = plant(a, [(("1", "1"), eps - 2), (("0", "0"), 0)], None, Q(1))
    return a, b, a.domain


def deep_slab():
    """A = tent + |U - 10^-4|, B = tent + max(|U - 10^-4|, 10^-7) with U a first-layer unit:
    they differ only where |U - 10^-4| < 10^-7, around a tie of a second-layer unit."""
    a = load_model(TENT)
    first = [(("1", "3/5"), Q(-1, 9)), (("-1", "1/4"), Q(0))]
    v = [(1, Q(-1, 10**4)), (-1, Q(1, 10**4))]
    return plant(a, first, v, Q(1)), plant(a, first, v + [(0, Q(1, 10**7))], Q(1)), a.domain


TRIANGLE = ((Q(-1), Q(-1)), (Q(1), Q(-1, 2)), (Q(37, 101), Q(1)))


def triangle() -> Polyhedron:
    """The triangle with vertices TRIANGLE, as A x <= b (one row per edge)."""
    rows, rhs = [], []
    c = tuple(sum(v[i] for v in TRIANGLE) / 3 for i in range(2))
    for i in range(3):
        p, q = TRIANGLE[i], TRIANGLE[(i + 1) % 3]
        n = (q[1] - p[1], p[0] - q[0])          # normal of the edge p q
        b = n[0] * p[0] + n[1] * p[1]
        if n[0] * c[0] + n[1] * c[1] > b:       # orient it so that the centroid is inside
            n, b = (-n[0], -n[1]), -b
        rows.append(n)
        rhs.append(b)
    return Polyhedron(tuple(rows), tuple(rhs), 2)


def polyhedron_vertex():
    a = load_model(TENT)
    eps = Q(1, 10**9)
    b = plant(a, [(("0", "1"), eps - 1), (("0", "0"), 0)], None, Q(1))
    return a, b, triangle()


def tie_only():
    import sys
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from mutants import value_differs_on_one_token
    net = load_model(TENT)
    ta = value_differs_on_one_token(net, compile_transformer(net))
    tb = replace(ta, positions=ta.positions + (ta.positions[1],))
    return ta, tb, net.domain


PLANTED = {"thin slab (width 2e-6)": thin_slab, "slab around a layer-2 tie (2e-7)": deep_slab, "slab at a facet (width 1e-6)": facet_slab,
           "one box vertex (1e-9 corner)": one_vertex,
           "one polyhedron vertex (37/101, 1)": polyhedron_vertex,
           "tie set only (Transformers)": tie_only}
