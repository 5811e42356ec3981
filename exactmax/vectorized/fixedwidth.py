"""Exact evaluation on fixed-width integer words (the C extension ``_fixedwidth``), the fast path
for single inputs and small batches.

The same integer scaling as the integer-scaled evaluators (``scaled.py``): the state is a matrix
of integer numerators over one common denominator E, one column per input (or per token),
with a last row of E's, so that an affine
map with rows D [W | b] is one integer product and max, ReLU and argmax are taken on the
numerators (D E > 0).  Here the numerators live in ``Words``: each entry is a fixed number of
64-bit limbs in two's complement, and every operation first bounds its result (|W X| <=
max_i ||W_i||_1 max |X|, |X + Y| <= 2 max, |X^T Y| <= rows max |X| max |Y|) and then computes
it modulo 2^(64 L) for an L that holds the bound.  Modular arithmetic cannot get a residue
wrong, and a value inside the signed range is determined by its residue: the results are
exact.  A result beyond ``MAX_LIMBS`` limbs, or a scaled weight beyond 64 bits, raises
``OverflowError``, and :class:`~exactmax.vectorized.BatchEvaluator` then uses ``scaled.py``.

Untrusted, like the rest of this package: nothing that says "proved" or "refuted" uses it, and
the tests compare it with the kernel's and the integer-scaled evaluators and with a ``Fraction``
reference.  When the
extension could not be compiled at install time, ``AVAILABLE`` is False and nothing here is
used.
"""

from __future__ import annotations

from typing import Any

from ..kernel.affine import Vector
from ..kernel.maxout import MaxoutNetwork, check_maxout_shapes
from ..kernel.rational import Q, RatMatrix, Z, rational
from ..kernel.transformer import Transformer
from .scaled import scaled_layers

try:
    from ._fixedwidth import Weights, Words

    AVAILABLE = True
except ImportError:  # no C compiler at install time: the integer-scaled evaluators are used
    Weights = Words = None
    AVAILABLE = False

_SMALL = 1 << 62  # |v| < 2^62: FLINT's small integers, converted directly
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
        try:
            return Words.from_rationals(values, dim, len(xs), Q)
        except TypeError:  # Fractions become Q; floats are refused here, as by the kernel
            values = [rational(v) for v in values]
            return Words.from_rationals(values, dim, len(xs), Q)
    except OverflowError:  # E beyond 64 bits: the backend finds it
        U, E = RatMatrix(dim, len(xs), [rational(v) for v in values]).numer_denom()
        return Words(dim + 1, len(xs), U.entries() + [E] * len(xs))


def _fractions(X) -> list[Q]:
    """The entries of X over its last row (one positive denominator per column), as reduced
    rationals of the backend, row-major."""
    ps, qs, small = X.fractions()
    if small:  # python-flint converts ints below 2^62 directly
        return list(map(Q, ps, qs))
    return [Q(_backend_int(p), _backend_int(q)) for p, q in zip(ps, qs)]


class FixedWidthMaxoutEvaluator:
    """Exact evaluation of one Maxout network on fixed-width words, prepared once.

    Layer l is one ``Weights`` matrix with rows D_l [w | b] for every piece, piece-major (row
    j N + i is piece j of unit i; a unit with fewer pieces repeats its first one), and a last
    row (0, ..., 0, D_l) that carries the homogeneous coordinate E -> D_l E; its max is
    ``max_blocks(k, N)``.  The output map, if any, is a last layer of rank 1.
    """

    __slots__ = ("input_dim", "_layers", "macs")

    def __init__(self, net: MaxoutNetwork):
        check_maxout_shapes(net)
        self.input_dim = net.input_dim
        self._layers = [
            (_homogeneous(rows, D, width), k, N)
            for (D, rows, k, N), width in zip(scaled_layers(net), net.widths)
        ]
        self.macs = sum(W.nnz for W, _, _ in self._layers)
        """Integer multiply-adds per input: the cost that decides between this evaluator and
        the vectorized one in ``BatchEvaluator``."""

    def evaluate_batch(self, xs) -> list[Vector]:
        """[N(x) for x in xs], exactly.  Raises OverflowError beyond the word limit."""
        xs = list(xs)
        if not xs:
            return []
        B = len(xs)
        X = _numerators(xs, self.input_dim)
        for W, k, N in self._layers:
            X = W.apply(X).max_blocks(k, N)
        y = _fractions(X)  # the last row is the homogeneous one: the denominators
        return [tuple(y[c::B]) for c in range(B)]

    def evaluate(self, x) -> Vector:
        """N(x), exactly."""
        return self.evaluate_batch([x])[0]


def _homogeneous(rows: list[list[int]], D: int, width: int):
    """The Weights [[rows]; [0 ... 0 D]] of an affine map on homogeneous columns [h; E]."""
    return Weights(len(rows) + 1, width + 1, [v for r in rows for v in r] + [0] * width + [D])


def _weights(M) -> Weights:
    """The backend's integer matrix M as Weights."""
    return Weights(M.nrows(), M.ncols(), [int(v) for v in M.entries()])


class FixedWidthTransformerEvaluator:
    """Exact hardmax evaluation of one Transformer on fixed-width words, prepared once from the
    integer-scaled sub-layers of ``scaled.TransformerEvaluator`` (: the same matrices, the same
    merged ReLU pairs).

    The state is (d_m + 1) x (n B) as in ``scaled.py``: column b n + t is token t of input b over
    the common denominator in the last row.  The embedding applies, for each token t, the map
    [u; E] -> [D_P E_m u + D_E p_t E; D_E D_P E] to the input's numerators, stacked over t and
    unstacked into columns.  An attention sub-layer is one ``hardmax_attention`` call on the
    key, query and value rows: the scores of each query against the keys of its input
    (positive scale factors do not change an argmax), the winner sets, and L times each hardmax
    mean, L the lcm of the winner-set sizes; then x <- D L x + O (L means).  At most 64 tokens
    (a winner set is a 64-bit mask): longer Transformers raise OverflowError here and are left
    to the other evaluators.
    """

    __slots__ = ("input_dim", "n_tokens", "_embed", "_steps", "_read", "_token", "macs")

    def __init__(self, tf: Transformer):
        from .scaled import TransformerEvaluator

        scaled = TransformerEvaluator(tf)  # checks the shapes, refuses softmax
        d, n, din = tf.d_model, tf.n_tokens, tf.input_dim
        if n > 64:
            raise OverflowError(f"{n} tokens: the fixed-width evaluator takes at most 64")
        self.input_dim, self.n_tokens = din, n
        _, M = scaled._embed
        rows = [
            [int(v) for v in M.entries()[r * (din + n) : (r + 1) * (din + n)]] for r in range(d + 1)
        ]
        self._embed = Weights(
            n * (d + 1),
            din + 1,
            [v for t in range(n) for r in rows for v in r[:din] + [r[din + t]]],
        )
        self._steps: list[tuple[Any, ...]] = []
        for step in scaled._steps:
            if step[0] == "ff":
                _, D, L1, L2, N1, N2 = step
                self._steps.append(
                    (
                        "ff",
                        int(D),
                        None if L1 is None else _weights(L1),
                        _weights(L2),
                        None if N1 is None else _weights(N1),
                        None if N2 is None else _weights(N2),
                    )
                )
            elif step[0] == "attn":
                _, S, spans, nv, D, O = step
                self._steps.append(("attn", _weights(S), spans, int(D), _weights(O)))
        D, R, m = scaled._read
        # the read-out on homogeneous columns, with a last row (0, ..., 0, D): the denominator
        self._read = Weights(
            m + 1,
            d + 1,
            ([int(v) for v in R.entries()] if R is not None else []) + [0] * d + [int(D)],
        )
        # the read-out token, or -1: the sum of the tokens (its denominator row sums to
        # n D E, so the quotient is the mean)
        self._token = -1 if tf.readout.token is None else tf.readout.token
        # integer multiply-adds per input: the maps on every token, and the n^2 scores and
        # means of every key and value row
        maps = [w for step in self._steps for w in step[1:] if isinstance(w, Weights)] + [
            self._read
        ]
        self.macs = (
            self._embed.nnz
            + n * sum(w.nnz for w in maps)
            + n
            * n
            * sum(
                len(keys) + len(values)
                for step in self._steps
                if step[0] == "attn"
                for keys, _, values, _ in step[2]
            )
        )

    def evaluate_batch(self, xs) -> list[Vector]:
        """[T(x) for x in xs], exactly (hardmax ties averaged).  Raises OverflowError beyond
        the word limit."""
        xs = list(xs)
        if not xs:
            return []
        B, n = len(xs), self.n_tokens
        X = self._embed.apply(_numerators(xs, self.input_dim)).unstack(n)
        for step in self._steps:
            if step[0] == "ff":
                _, D, L1, L2, N1, N2 = step
                Y = L2.apply(X) if L1 is None else X.scale(D).add(L2.apply(L1.apply(X)))
                X = Y if N1 is None else Y.add(N2.apply(N1.apply(X).relu()))
            else:
                X = _attention(step, X, n)
        y = _fractions(self._read.apply(X).block_columns(n, self._token))
        return [tuple(y[c::B]) for c in range(B)]

    def evaluate(self, x) -> Vector:
        """T(x), exactly."""
        return self.evaluate_batch([x])[0]


def _attention(step, X, n):
    """x_t + sum_h W_O W_V mean_{t' in S_h(t)} x_t' on every column, over D L E (L the lcm of
    the tie sizes, returned by ``hardmax_attention``)."""
    _, S, spans, D, O = step
    avg, L = S.apply(X).hardmax_attention(spans, n)
    return X.scale(D).scale(L).add(O.apply(avg))  # D and L < 2^63, D L maybe not
