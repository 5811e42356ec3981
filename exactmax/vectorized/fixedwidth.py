"""Exact evaluation on fixed-width integer words (the C extension ``_fixedwidth``), the fast path
for single inputs and small batches.

The same integer scaling as the kernel's evaluators (``kernel/maxout.py``,
``kernel/transformer.py``): the state is a matrix of integer numerators over one common
denominator E, one column per input (or per token), with a last row of E's, so that an affine
map with rows D [W | b] is one integer product and max, ReLU and argmax are taken on the
numerators (D E > 0).  Here the numerators live in ``Words``: each entry is a fixed number of
64-bit limbs in two's complement, and every operation first bounds its result (|W X| <=
max_i ||W_i||_1 max |X|, |X + Y| <= 2 max, |X^T Y| <= rows max |X| max |Y|) and then computes
it modulo 2^(64 L) for an L that holds the bound.  Modular arithmetic cannot get a residue
wrong, and a value inside the signed range is determined by its residue: the results are
exact.  A result beyond ``MAX_LIMBS`` limbs, or a scaled weight beyond 64 bits, raises
``OverflowError``, and :class:`~exactmax.vectorized.BatchEvaluator` then uses the kernel.

Untrusted, like the rest of this package: nothing that says "proved" or "refuted" uses it, and
the tests compare it with the kernel's evaluators and with a ``Fraction`` reference.  When the
extension could not be compiled at install time, ``AVAILABLE`` is False and nothing here is
used.
"""

from __future__ import annotations

from math import lcm

from ..kernel.affine import Vector, scaled_matrix, scaled_rows
from ..kernel.maxout import MaxoutNetwork, check_maxout_shapes
from ..kernel.rational import Q, RatMatrix, Z, rational
from ..kernel.transformer import HARDMAX, FeedForward, Transformer, check_transformer_shapes

try:
    from ._fixedwidth import Weights, Words
    AVAILABLE = True
except ImportError:  # no C compiler at install time: the kernel's evaluators are used
    Weights = Words = None
    AVAILABLE = False

_SMALL = 1 << 62          # |v| < 2^62: FLINT's small integers, converted directly
_Z62 = Z(_SMALL)


def _backend_int(v: int):
    """The Python int v as the backend's integer (python-flint converts large ints through a
    string; 62-bit chunks are several times faster)."""
    if -_SMALL < v < _SMALL:
        return Z(v)
    return _backend_int(v >> 62) * _Z62 + (v & (_SMALL - 1))


def _numerators(xs, dim: int):
    """The inputs as ``Words``: column c holds the numerators of input c over the least common
    denominator E of all inputs, and a last row of E's."""
    xs = [tuple(x) for x in xs]
    for x in xs:
        if len(x) != dim:
            raise ValueError(f"input of length {len(x)}, expected {dim}")
    values = [x[i] for i in range(dim) for x in xs]
    try:
        return Words.from_rationals(values, dim, len(xs), Q)
    except OverflowError:   # E beyond 64 bits: the backend finds it
        U, E = RatMatrix(dim, len(xs), [rational(v) for v in values]).numer_denom()
        return Words(dim + 1, len(xs), U.entries() + [E] * len(xs))


def _fractions(X) -> list[Q]:
    """The entries of X over its last row (one positive denominator per column), as reduced
    rationals of the backend, row-major."""
    ps, qs, small = X.fractions()
    if small:   # python-flint converts ints below 2^62 directly
        return list(map(Q, ps, qs))
    return [Q(_backend_int(p), _backend_int(q)) for p, q in zip(ps, qs)]


class FixedWidthMaxoutEvaluator:
    """Exact evaluation of one Maxout network on fixed-width words, prepared once.

    Layer l is one ``Weights`` matrix with rows D_l [w | b] for every piece, piece-major (row
    j N + i is piece j of unit i; a unit with fewer pieces repeats its first one), and a last
    row (0, ..., 0, D_l) that carries the homogeneous coordinate E -> D_l E; its max is
    ``max_blocks(k, N)``.  The output map, if any, is a last layer of rank 1.
    """

    __slots__ = ("input_dim", "_layers")

    def __init__(self, net: MaxoutNetwork):
        check_maxout_shapes(net)
        self.input_dim = net.input_dim
        self._layers = []
        width = net.input_dim
        for layer in net.layers:
            k, N = layer.rank, layer.width
            pieces = [u.pieces[j] if j < len(u.pieces) else u.pieces[0]
                      for j in range(k) for u in layer.units]
            D, rows = scaled_rows([p.w for p in pieces], [p.b for p in pieces])
            self._layers.append((_homogeneous(rows, D, width), k, N))
            width = N
        if net.output is not None:
            D, rows = scaled_rows(net.output.W, net.output.b)
            self._layers.append((_homogeneous(rows, D, width), 1, len(rows)))

    def evaluate_batch(self, xs) -> list[Vector]:
        """[N(x) for x in xs], exactly.  Raises OverflowError beyond the word limit."""
        xs = list(xs)
        if not xs:
            return []
        B = len(xs)
        X = _numerators(xs, self.input_dim)
        for W, k, N in self._layers:
            X = W.apply(X).max_blocks(k, N)
        y = _fractions(X)   # the last row is the homogeneous one: the denominators
        return [tuple(y[c::B]) for c in range(B)]

    def evaluate(self, x) -> Vector:
        """N(x), exactly."""
        return self.evaluate_batch([x])[0]


def _homogeneous(rows: list[list[int]], D: int, width: int):
    """The Weights [[rows]; [0 ... 0 D]] of an affine map on homogeneous columns [h; E]."""
    return Weights(len(rows) + 1, width + 1,
                   [v for r in rows for v in r] + [0] * width + [D])
