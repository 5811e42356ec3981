"""Batched exact evaluation of Maxout networks on radix-2^21 integer arrays.

The same integer scaling as the integer-scaled evaluator (``scaled.py``): with h = u / E and
a layer's pieces scaled by their least common denominator D_l, every pre-activation is
(D_l [w | b] . [u; E]) / (D_l E), so the max over pieces is taken on integer numerators.  Here
the numerators of a whole batch live in one :class:`IntArray` and the layer is one exact
product followed by k - 1 entrywise maxima, with no per-entry Python work.  Rows are stored
piece-major (row j N + i is piece j of unit i; a unit with fewer pieces repeats its first one,
which leaves the max unchanged).
"""

from __future__ import annotations

from ..kernel.affine import Vector
from ..kernel.maxout import MaxoutNetwork, check_maxout_shapes
from ..kernel.rational import RatMatrix, rational
from .integers import IntArray, IntMatrixDigits, matmul, maximum, one_blas_thread
from .scaled import scaled_layers


def _affine(rows: list[list[int]], width: int) -> IntMatrixDigits:
    """The map h -> W h + b e of the scaled rows [W | b]."""
    return IntMatrixDigits.from_rows([r[:-1] for r in rows], width, [r[-1] for r in rows])


class VectorizedMaxoutEvaluator:
    """Exact batch evaluation of one Maxout network, prepared once."""

    __slots__ = ("input_dim", "_layers", "_output")

    def __init__(self, net: MaxoutNetwork):
        check_maxout_shapes(net)
        self.input_dim = net.input_dim
        layers = scaled_layers(net)
        self._output: tuple[int, IntMatrixDigits | None] | None = None
        if net.output is not None:  # the last of the scaled layers
            D, rows, _, m = layers.pop()
            self._output = (D, _affine(rows, net.widths[-1])) if m else (1, None)
        self._layers = [
            (D, _affine(rows, width), k, N) for (D, rows, k, N), width in zip(layers, net.widths)
        ]

    def evaluate_batch(self, xs) -> list[Vector]:
        with one_blas_thread():
            return self._evaluate_batch(xs)

    def _evaluate_batch(self, xs) -> list[Vector]:
        """[N(x) for x in xs], exactly.  Every coordinate must be an exact rational."""
        xs = [tuple(rational(v) for v in x) for x in xs]
        B = len(xs)
        if B == 0:
            return []
        for x in xs:
            if len(x) != self.input_dim:
                raise ValueError(f"input of length {len(x)}, expected {self.input_dim}")
        U, den = RatMatrix(B, self.input_dim, [v for x in xs for v in x]).transpose().numer_denom()
        E = int(den)
        h = IntArray.from_ints(map(int, U.entries()), (self.input_dim, B))
        for D, M, k, N in self._layers:
            z = matmul(M, h, E).reshape(k, N, B)
            h = z[0]
            for j in range(1, k):
                h = maximum(h, z[j])
            E *= D
        if self._output is not None:
            D, out = self._output
            if out is None:
                return [()] * B
            h = matmul(out, h, E)
            E *= D
        n = h.shape[0]
        y = (RatMatrix(h.to_int_matrix().transpose()) / E).entries()
        return [tuple(y[c * n : (c + 1) * n]) for c in range(B)]

    def evaluate(self, x) -> Vector:
        """N(x), exactly."""
        return self.evaluate_batch([x])[0]
