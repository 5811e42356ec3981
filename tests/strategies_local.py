"""Hypothesis strategies for the tests of the foundation (exact rationals, small networks)."""

from __future__ import annotations

from hypothesis import strategies as st

from exactmax.kernel.affine import Affine
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from exactmax.kernel.rational import Q
from exactmax.kernel.transformer import Attention, FeedForward, Head, Readout, Transformer


@st.composite
def rationals(draw, max_num: int = 20, max_den: int = 12, large: bool = True):
    """Rationals with small denominators, and sometimes huge numerators and denominators."""
    if large and draw(st.integers(0, 9)) == 0:
        return Q(draw(st.integers(-10**30, 10**30)), draw(st.integers(1, 10**25)))
    return Q(draw(st.integers(-max_num, max_num)), draw(st.integers(1, max_den)))


def vectors(n: int, **kw):
    return st.lists(rationals(**kw), min_size=n, max_size=n).map(tuple)


def matrices(r: int, c: int, **kw):
    return st.lists(vectors(c, **kw), min_size=r, max_size=r).map(tuple)


@st.composite
def maxout_networks(draw, max_depth=3, max_width=4, max_rank=4, dims=(1, 4)):
    d = draw(st.integers(*dims))
    width, layers = d, []
    for _ in range(draw(st.integers(1, max_depth))):
        units = []
        for _ in range(draw(st.integers(1, max_width))):
            pieces = [Piece(draw(vectors(width)), draw(rationals()))
                      for _ in range(draw(st.integers(1, max_rank)))]
            if len(pieces) > 1 and draw(st.booleans()):  # a duplicate piece forces ties
                pieces.append(pieces[0])
            units.append(Unit(tuple(pieces)))
        layers.append(Layer(tuple(units)))
        width = len(units)
    output = None
    if draw(st.booleans()):
        m = draw(st.integers(1, 3))
        output = Affine(draw(matrices(m, width)), draw(vectors(m)), width)
    return MaxoutNetwork(d, tuple(layers), output)


@st.composite
def transformers(draw, max_tokens=4, max_dm=4, max_sub=3):
    """Random small hardmax Transformers; small integer weights make ties frequent."""
    small = dict(max_num=2, max_den=2, large=False)
    d = draw(st.integers(1, 3))
    dm = draw(st.integers(1, max_dm))
    n = draw(st.integers(1, max_tokens))
    subs = []
    for _ in range(draw(st.integers(0, max_sub))):
        if draw(st.booleans()):
            h = draw(st.integers(1, 4))
            subs.append(FeedForward(Affine(draw(matrices(h, dm, **small)),
                                           draw(vectors(h, **small)), dm),
                                    Affine(draw(matrices(dm, h, **small)),
                                           draw(vectors(dm, **small)), h)))
        else:
            heads = []
            for _ in range(draw(st.integers(0, 2))):
                s = draw(st.integers(0, 2))   # key/query size (0: every score is 0, all tie)
                v = draw(st.integers(0, 2))   # value size
                heads.append(Head(draw(matrices(s, dm, **small)), draw(matrices(s, dm, **small)),
                                  draw(matrices(v, dm, **small)), draw(matrices(dm, v, **small)),
                                  Q(draw(st.integers(1, 5)), draw(st.integers(1, 3)))))
            subs.append(Attention(tuple(heads)))
    m = draw(st.integers(1, 2))
    token = draw(st.one_of(st.none(), st.integers(0, n - 1)))
    readout = Readout(Affine(draw(matrices(m, dm, **small)), draw(vectors(m, **small)), dm),
                      token)
    return Transformer(d, dm, draw(matrices(dm, d, **small)),
                       tuple(draw(vectors(dm, **small)) for _ in range(n)), tuple(subs), readout)
