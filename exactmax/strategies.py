"""Hypothesis strategies for exact property tests of Maxout networks and Transformers.

Everything drawn is exact (``fmpq`` rationals, the kernel's frozen dataclasses), so a property
such as ``evaluate(compile(net), x) == evaluate(net, x)`` is checked with no rounding.  The
strategies shrink towards simple values: small integers, small denominators, fewer layers,
units and pieces.

Numbers and points
    ``rationals``            p/q with small |p| and q, and sometimes huge numerators and
                             denominators (10^30 / 10^25) that stress exact arithmetic
    ``rationals_in(lo, hi)`` rationals of [lo, hi], small denominators first
    ``vectors``, ``matrices``
    ``domains(dim)``         boxes, and bounded polyhedra A x <= b (a box cut by half-spaces
                             through no more than part of it, so never empty)
    ``domain_points(dom, kind)``  exact points of a domain: ``"vertex"``, ``"face"`` (on a
                             facet: a positive combination of the vertices where one
                             constraint is tight), ``"interior"`` (a positive combination of
                             all vertices: in the relative interior), or ``"any"``
    ``tie_points(model, dom)``  points of the domain on a tie set of the model: two pieces of a
                             Maxout unit (or a ReLU's argument and 0, or two attention scores
                             of a hardmax head) equal and maximal; see ``exactmax.search.ties``

Models
    ``maxout_networks``      depth, widths, ranks, duplicate pieces (forced ties), an output
                             map; with ``domain=True`` a domain is attached
    ``transformers``         small random hardmax Transformers (small integer weights: ties)
    ``compiled_transformers``  (net, T) with T = compile_transformer(net) on net's domain
    ``mutated_transformers``   (net, T, T', what): T' is T with one change (a weight or a bias
                             moved by a small rational, a sub-layer dropped, two heads' outputs
                             exchanged, the read-out moved to another token).  A mutation need
                             not change the function (a weight an inactive gate multiplies
                             changes nothing), so properties should say "if verify proves
                             T' = net then T'(x) = net(x) for every x", not "T' differs"

Example (pytest)::

    from hypothesis import given
    from exactmax import strategies as xs
    from exactmax.kernel.maxout import evaluate_maxout

    @given(xs.maxout_networks(domain=True).flatmap(
        lambda net: xs.domain_points(net.domain).map(lambda x: (net, x))))
    def test_my_construction(case):
        net, x = case
        assert evaluate_mine(my_construction(net), x) == evaluate_maxout(net, x)
"""

from __future__ import annotations

from dataclasses import replace
from math import ceil, floor

from hypothesis import strategies as st

from .kernel.affine import Affine
from .kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from .kernel.polyhedron import Box, Domain, Polyhedron
from .kernel.rational import Q
from .kernel.transformer import Attention, FeedForward, Head, Readout, Transformer
from .search.vertices import simplest_between, vertices

__all__ = [
    "rationals",
    "rationals_in",
    "vectors",
    "matrices",
    "domains",
    "boxes",
    "polyhedra",
    "domain_points",
    "tie_points",
    "maxout_networks",
    "transformers",
    "compiled_transformers",
    "mutated_transformers",
]


# ------------------------------------------------------------------------- numbers


@st.composite
def rationals(draw, max_num: int = 20, max_den: int = 12, large: bool = True):
    """p/q with |p| <= max_num, 1 <= q <= max_den; with ``large``, one draw in ten has a
    numerator up to 10^30 and a denominator up to 10^25."""
    if large and draw(st.integers(0, 9)) == 0:
        return Q(draw(st.integers(-(10**30), 10**30)), draw(st.integers(1, 10**25)))
    return Q(draw(st.integers(-max_num, max_num)), draw(st.integers(1, max_den)))


def _strictly_between(lo, hi):
    """The test lo < v < hi, for filtering a strategy."""
    return lambda v: lo < v < hi


@st.composite
def rationals_in(draw, lo, hi, max_den: int = 64, large_den: int = 10**12):
    """A rational of [lo, hi]: n/q with q <= max_den (shrinking towards q = 1, then towards
    the numerator closest to 0), and one draw in eight with q <= large_den (points of thin
    slabs).  If [lo, hi] holds no n/q, its simplest rational."""
    lo, hi = Q(lo), Q(hi)
    if lo == hi:
        return lo
    q = draw(st.integers(1, large_den if draw(st.integers(0, 7)) == 7 else max_den))
    n_lo, n_hi = ceil(lo * q), floor(hi * q)
    if n_lo > n_hi:
        return simplest_between(lo, hi)
    return Q(draw(st.integers(int(n_lo), int(n_hi))), q)


def vectors(n: int, **kw):
    """Tuples of n ``rationals(**kw)``."""
    return st.lists(rationals(**kw), min_size=n, max_size=n).map(tuple)


def matrices(r: int, c: int, **kw):
    """r x c matrices (tuples of rows) of ``rationals(**kw)``."""
    return st.lists(vectors(c, **kw), min_size=r, max_size=r).map(tuple)


# ------------------------------------------------------------------------- domains


@st.composite
def boxes(draw, dim: int, max_num: int = 4, max_den: int = 4):
    """Non-degenerate boxes lower < upper with small rational bounds."""
    lower, upper = [], []
    for _ in range(dim):
        a = Q(draw(st.integers(-max_num, max_num)), draw(st.integers(1, max_den)))
        w = Q(draw(st.integers(1, 2 * max_num)), draw(st.integers(1, max_den)))
        lower.append(a)
        upper.append(a + w)
    return Box(tuple(lower), tuple(upper))


@st.composite
def polyhedra(draw, dim: int, max_cuts: int = 3):
    """A box cut by up to ``max_cuts`` half-spaces a . x <= a . c + s (s > 0, c the box's
    centre): bounded, with the centre in its interior."""
    box = draw(boxes(dim))
    P = box.as_polyhedron()
    c = tuple((lo + hi) / 2 for lo, hi in zip(box.lower, box.upper))
    rows, rhs = list(P.A), list(P.b)
    for _ in range(draw(st.integers(1, max_cuts))):
        a = draw(vectors(dim, max_num=3, max_den=2, large=False))
        if not any(a):
            continue
        s = Q(draw(st.integers(1, 4)), draw(st.integers(1, 4)))
        rows.append(a)
        rhs.append(sum((u * v for u, v in zip(a, c)), Q(0)) + s)
    return Polyhedron(tuple(rows), tuple(rhs), dim)


def domains(dim: int):
    """Boxes or bounded polyhedra of dimension ``dim`` with non-empty interior."""
    return st.one_of(boxes(dim), polyhedra(dim))


def _bounds(points):
    return (tuple(min(col) for col in zip(*points)), tuple(max(col) for col in zip(*points)))


@st.composite
def _combination(draw, points):
    """sum_v w_v v / sum_v w_v with integer weights w_v >= 1 (shrinking towards equal)."""
    w = [draw(st.integers(1, 8)) for _ in points]
    total = sum(w)
    return tuple(
        sum((Q(wi) * p[i] for wi, p in zip(w, points)), Q(0)) / total for i in range(len(points[0]))
    )


def domain_points(dom: Domain, kind: str = "any", max_den: int = 64):
    """Exact points of a domain.

    ``kind``: ``"vertex"``, ``"face"``, ``"interior"`` or ``"any"`` (a box point with
    coordinates drawn by ``rationals_in``, or one of the others).  A polyhedron must be bounded
    with its vertices among the first 5000 sets of ``dim`` constraints (the case of the
    small domains this is meant for); raises ValueError otherwise.
    """
    if kind not in ("vertex", "face", "interior", "any"):
        raise ValueError(f"kind must be vertex, face, interior or any, not {kind!r}")
    if isinstance(dom, Box):
        if dom.is_empty():
            raise ValueError("the box is empty")
        corners = st.tuples(
            *(
                st.sampled_from((lo, hi)) if lo != hi else st.just(lo)
                for lo, hi in zip(dom.lower, dom.upper)
            )
        )
        if kind == "vertex":
            return corners
        inside = st.tuples(*(rationals_in(lo, hi, max_den) for lo, hi in zip(dom.lower, dom.upper)))
        if kind == "interior":
            return st.tuples(
                *(
                    rationals_in(lo, hi, max_den).filter(_strictly_between(lo, hi))
                    if lo < hi
                    else st.just(lo)
                    for lo, hi in zip(dom.lower, dom.upper)
                )
            )
        if kind == "face":
            box = dom

            def on_face(i: int):  # coordinate i at its lower or upper bound
                def put(t):
                    return t[0][:i] + (t[1],) + t[0][i + 1 :]

                return st.tuples(inside, st.sampled_from((box.lower[i], box.upper[i]))).map(put)

            return st.integers(0, dom.dim - 1).flatmap(on_face)
        return st.one_of(inside, corners)
    V = vertices(dom)
    if not V:
        raise ValueError("no vertices found: the polyhedron is empty, unbounded or too large")
    if kind == "vertex":
        return st.sampled_from(V)
    if kind == "interior":
        return _combination(V)
    faces = []
    for row, b in zip(dom.A, dom.b):
        on = [v for v in V if sum((a * x for a, x in zip(row, v)), Q(0)) == b]
        if on:
            faces.append(on)
    face = st.sampled_from(faces).flatmap(_combination)
    if kind == "face":
        return face
    lower, upper = _bounds(V)
    boxed = st.tuples(*(rationals_in(lo, hi, max_den) for lo, hi in zip(lower, upper)))
    return st.one_of(boxed.filter(dom.contains), _combination(V), face, st.sampled_from(V))


def tie_points(model, dom: Domain, base=None):
    """Points of the domain on a tie set of the model (a Maxout network or a hardmax
    Transformer with constant queries), each checked exactly: two arguments of a max (or
    scores of a hardmax head) are equal and maximal there.  Found by projecting points of
    ``base`` (default ``domain_points(dom)``) onto a drawn tie along a coordinate axis;
    draws whose projection leaves the domain are rejected.  A model without any max (or
    whose maxima are over one distinct piece) has no tie set: the strategy is then
    ``nothing()``.  Raises ``Unsupported`` for bilinear attention scores."""
    from .kernel.program import program_of
    from .search.ties import project_to_tie, ties_of

    p = program_of(model)
    ties = ties_of(p)
    if not ties:
        return st.nothing()
    pts = domain_points(dom) if base is None else base
    bounds = (dom.lower, dom.upper) if isinstance(dom, Box) else None

    def project(case):
        x, tie = case
        return project_to_tie(p, x, tie, dom.contains, bounds)

    return st.tuples(pts, st.sampled_from(ties)).map(project).filter(lambda y: y is not None)


# -------------------------------------------------------------------------- models


@st.composite
def maxout_networks(
    draw,
    max_depth=3,
    max_width=4,
    max_rank=4,
    dims=(1, 4),
    domain: bool = False,
    large: bool = True,
):
    """Maxout networks with input dimension in ``dims``, 1..max_depth layers, 1..max_width
    units of 1..max_rank pieces (sometimes a duplicate piece, which forces a tie), and
    sometimes an output map; ``domain=True`` attaches one of ``domains(d)``; ``large=False``
    keeps every weight p/q with |p| <= 20, q <= 12 (``rationals(large=False)``)."""
    d = draw(st.integers(*dims))
    width, layers = d, []
    for _ in range(draw(st.integers(1, max_depth))):
        units = []
        for _ in range(draw(st.integers(1, max_width))):
            pieces = [
                Piece(draw(vectors(width, large=large)), draw(rationals(large=large)))
                for _ in range(draw(st.integers(1, max_rank)))
            ]
            if len(pieces) > 1 and draw(st.booleans()):  # a duplicate piece forces ties
                pieces.append(pieces[0])
            units.append(Unit(tuple(pieces)))
        layers.append(Layer(tuple(units)))
        width = len(units)
    output = None
    if draw(st.booleans()):
        m = draw(st.integers(1, 3))
        output = Affine(draw(matrices(m, width, large=large)), draw(vectors(m, large=large)), width)
    dom = draw(domains(d)) if domain else None
    return MaxoutNetwork(d, tuple(layers), output, dom)


@st.composite
def transformers(draw, max_tokens=4, max_dm=4, max_sub=3):
    """Random small hardmax Transformers; small integer weights make ties frequent."""
    small = dict(max_num=2, max_den=2, large=False)
    d = draw(st.integers(1, 3))
    dm = draw(st.integers(1, max_dm))
    n = draw(st.integers(1, max_tokens))
    subs: list[Attention | FeedForward] = []
    for _ in range(draw(st.integers(0, max_sub))):
        if draw(st.booleans()):
            h = draw(st.integers(1, 4))
            subs.append(
                FeedForward(
                    Affine(draw(matrices(h, dm, **small)), draw(vectors(h, **small)), dm),
                    Affine(draw(matrices(dm, h, **small)), draw(vectors(dm, **small)), h),
                )
            )
        else:
            heads = []
            for _ in range(draw(st.integers(0, 2))):
                s = draw(st.integers(0, 2))  # key/query size (0: every score is 0, all tie)
                v = draw(st.integers(0, 2))  # value size
                heads.append(
                    Head(
                        draw(matrices(s, dm, **small)),
                        draw(matrices(s, dm, **small)),
                        draw(matrices(v, dm, **small)),
                        draw(matrices(dm, v, **small)),
                        Q(draw(st.integers(1, 5)), draw(st.integers(1, 3))),
                    )
                )
            subs.append(Attention(tuple(heads)))
    m = draw(st.integers(1, 2))
    token = draw(st.one_of(st.none(), st.integers(0, n - 1)))
    readout = Readout(Affine(draw(matrices(m, dm, **small)), draw(vectors(m, **small)), dm), token)
    return Transformer(
        d,
        dm,
        draw(matrices(dm, d, **small)),
        tuple(draw(vectors(dm, **small)) for _ in range(n)),
        tuple(subs),
        readout,
    )


def compiled_transformers(nets=None):
    """(net, T): T the hardmax Transformer compiled from net on its domain
    (docs/notes/construction.md §2).  ``nets`` defaults to small networks with a domain attached."""
    from .construct.transformer import compile_transformer

    nets = (
        nets
        if nets is not None
        else maxout_networks(max_depth=2, max_width=3, max_rank=3, dims=(1, 3), domain=True)
    )
    return nets.map(lambda net: (net, compile_transformer(net).transformer))


def _set(M, i, j, v):
    rows = [list(r) for r in M]
    rows[i][j] = v
    return tuple(tuple(r) for r in rows)


def _replace_sublayer(tf, index, new):
    subs = list(tf.sublayers)
    subs[index] = new
    return replace(tf, sublayers=tuple(subs))


@st.composite
def _mutation(draw, tf: Transformer):
    """(T', description) for one drawn change of T."""
    delta = Q(draw(st.sampled_from((1, -1))), draw(st.sampled_from((1000, 7, 2, 1))))
    kinds = ["ff weight", "ff bias", "readout weight"]
    if len(tf.sublayers) > 1:
        kinds.append("drop sublayer")
    atts = [i for i, s in enumerate(tf.sublayers) if isinstance(s, Attention) and len(s.heads) > 1]
    if atts:
        kinds.append("swap head outputs")
    if tf.n_tokens > 1 and tf.readout.token is not None:
        kinds.append("readout token")
    kind = draw(st.sampled_from(kinds))
    ffs = [i for i, s in enumerate(tf.sublayers) if isinstance(s, FeedForward) and s.inner.b]
    if kind in ("ff weight", "ff bias") and ffs:
        i = draw(st.sampled_from(ffs))
        ff = tf.sublayers[i]
        r = draw(st.integers(0, len(ff.inner.b) - 1))
        if kind == "ff weight":
            c = draw(st.integers(0, tf.d_model - 1))
            W1 = _set(ff.inner.W, r, c, ff.inner.W[r][c] + delta)
            inner = Affine(W1, ff.inner.b, ff.inner.in_dim)
        else:
            b1 = list(ff.inner.b)
            b1[r] += delta
            inner = Affine(ff.inner.W, tuple(b1), ff.inner.in_dim)
        return (
            _replace_sublayer(tf, i, FeedForward(inner, ff.outer)),
            f"{kind}: sub-layer {i}, hidden unit {r}, + {delta}",
        )
    if kind == "drop sublayer":
        i = draw(st.integers(0, len(tf.sublayers) - 1))
        return (
            replace(tf, sublayers=tf.sublayers[:i] + tf.sublayers[i + 1 :]),
            f"sub-layer {i} dropped",
        )
    if kind == "swap head outputs":
        i = draw(st.sampled_from(atts))
        att = tf.sublayers[i]
        h0, h1 = att.heads[0], att.heads[1]
        heads = (replace(h0, out=h1.out), replace(h1, out=h0.out)) + att.heads[2:]
        return (
            _replace_sublayer(tf, i, Attention(heads, att.kind)),
            f"sub-layer {i}: outputs of heads 0 and 1 exchanged",
        )
    if kind == "readout token":
        t = draw(st.integers(0, tf.n_tokens - 1).filter(lambda t: t != tf.readout.token))
        return replace(tf, readout=replace(tf.readout, token=t)), f"read-out from token {t}"
    R = tf.readout.map
    r = draw(st.integers(0, len(R.b) - 1))
    c = draw(st.integers(0, tf.d_model - 1))
    return (
        replace(
            tf,
            readout=replace(
                tf.readout, map=Affine(_set(R.W, r, c, R.W[r][c] + delta), R.b, R.in_dim)
            ),
        ),
        f"read-out weight ({r}, {c}) + {delta}",
    )


def mutated_transformers(compiled=None):
    """(net, T, T', what): a compiled pair and T with one drawn change ``what`` (which may or
    may not change the function; see the module docstring)."""
    compiled = compiled if compiled is not None else compiled_transformers()
    return compiled.flatmap(lambda c: _mutation(c[1]).map(lambda m: (c[0], c[1], m[0], m[1])))
