"""Maxout networks over Q and their exact evaluation.

    h^0 = x,   h^l_i = max_j ( w^l_{i,j} . h^{l-1} + b^l_{i,j} ),   y = A h^D + c.

The evaluator keeps each layer's values as integers over one common denominator: if
h = u / E with u integral and a layer's pieces are scaled by their least common denominator
D_l, then every pre-activation is (D_l [w | b] . [u; E]) / (D_l E), and since D_l E > 0 the
max over pieces can be taken on the integer numerators.  One integer matrix product per layer
(``IntMatrix``, computed in C) and an integer max; the only division is at the very end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .affine import Affine, Vector, scaled_rows
from .polyhedron import Domain
from .rational import IntMatrix, Q, RatMatrix, rational


@dataclass(frozen=True, slots=True)
class Piece:
    """One affine piece w . h + b of a unit."""

    w: Vector
    b: Q


@dataclass(frozen=True, slots=True)
class Unit:
    """A Maxout unit: the max of its pieces (at least one)."""

    pieces: tuple[Piece, ...]


@dataclass(frozen=True, slots=True)
class Layer:
    units: tuple[Unit, ...]

    @property
    def width(self) -> int:
        return len(self.units)

    @property
    def rank(self) -> int:
        return max(len(u.pieces) for u in self.units)


@dataclass(frozen=True, slots=True)
class MaxoutNetwork:
    """A Maxout network R^input_dim -> R^out_dim; ``output`` None means the identity."""

    input_dim: int
    layers: tuple[Layer, ...]
    output: Affine | None = None
    domain: Domain | None = None
    meta: object = field(default=None, compare=False, hash=False)

    @property
    def widths(self) -> tuple[int, ...]:
        """(N_0 = input_dim, N_1, ..., N_D)."""
        return (self.input_dim,) + tuple(l.width for l in self.layers)

    @property
    def out_dim(self) -> int:
        return self.output.out_dim if self.output is not None else self.widths[-1]

    @property
    def parameter_count(self) -> int:
        """sum_l sum_i k_{l,i} (N_{l-1} + 1) + m (N_D + 1) (the output counts when present)."""
        n = sum(len(u.pieces) * (prev + 1)
                for prev, layer in zip(self.widths, self.layers) for u in layer.units)
        if self.output is not None:
            n += self.output.out_dim * (self.output.in_dim + 1)
        return n


def check_maxout_shapes(net: MaxoutNetwork) -> None:
    """Raise ValueError (TypeError for an inexact number) unless every piece has one weight
    per unit of the layer before and the output map fits; the readers guarantee this for
    files, this guards networks built in Python."""
    width = net.input_dim
    if not net.layers:
        raise ValueError("a Maxout network needs at least one layer")
    for l, layer in enumerate(net.layers):
        if not layer.units:
            raise ValueError(f"layer {l} has no units")
        for i, unit in enumerate(layer.units):
            if not unit.pieces:
                raise ValueError(f"layer {l}, unit {i} has no pieces")
            for p in unit.pieces:
                if len(p.w) != width:
                    raise ValueError(f"layer {l}, unit {i}: {len(p.w)} weights, expected {width}")
                for v in p.w + (p.b,):
                    rational(v)
        width = len(layer.units)
    if net.output is not None:
        A = net.output
        if A.in_dim != width or len(A.W) != len(A.b) or any(len(r) != width for r in A.W):
            raise ValueError("the output map does not fit the last layer")
        for row in A.W:
            for v in row:
                rational(v)
        for v in A.b:
            rational(v)


class MaxoutEvaluator:
    """Exact evaluation of one network, prepared once (integer-scaled layers)."""

    __slots__ = ("_layers", "_output", "input_dim")

    def __init__(self, net: MaxoutNetwork):
        check_maxout_shapes(net)
        self.input_dim = net.input_dim
        self._layers = []
        for layer in net.layers:
            W = [p.w for u in layer.units for p in u.pieces]
            b = [p.b for u in layer.units for p in u.pieces]
            D, rows = scaled_rows(W, b)
            groups, start = [], 0
            for u in layer.units:
                groups.append((start, start + len(u.pieces)))
                start += len(u.pieces)
            self._layers.append((D, IntMatrix(rows), groups))
        if net.output is not None:
            D, rows = scaled_rows(net.output.W, net.output.b)
            self._output = (D, IntMatrix(rows) if rows else None, len(rows))
        else:
            self._output = None

    def evaluate_batch(self, xs) -> list[Vector]:
        """[N(x) for x in xs], exactly.  Every coordinate must be an exact rational."""
        xs = [tuple(rational(v) for v in x) for x in xs]
        B = len(xs)
        if B == 0:
            return []
        for x in xs:
            if len(x) != self.input_dim:
                raise ValueError(f"input of length {len(x)}, expected {self.input_dim}")
        # Numerators u (n x B, row-major) over one common denominator E, computed in C.
        U, E = RatMatrix(B, self.input_dim, [v for x in xs for v in x]).transpose().numer_denom()
        u = U.entries()
        n = self.input_dim
        for D, M, groups in self._layers:
            Z = (M * IntMatrix(n + 1, B, u + [E] * B)).entries()
            E *= D
            u = []
            for lo, hi in groups:
                if hi - lo == 1:
                    u.extend(Z[lo * B:(lo + 1) * B])
                else:
                    u.extend(map(max, *(Z[r * B:(r + 1) * B] for r in range(lo, hi))))
            n = len(groups)
        if self._output is not None:
            D, M, m = self._output
            u = (M * IntMatrix(n + 1, B, u + [E] * B)).entries() if m else []
            E *= D
            n = m
        if n == 0:
            return [()] * B
        # One division, canonicalised in C; column c of Y / E is N(x_c).
        y = (RatMatrix(IntMatrix(n, B, u).transpose()) / E).entries()
        return [tuple(y[c * n:(c + 1) * n]) for c in range(B)]

    def evaluate(self, x) -> Vector:
        """N(x), exactly."""
        return self.evaluate_batch([x])[0]


def evaluate_maxout(net: MaxoutNetwork, x) -> Vector:
    """The exact output N(x) of the Maxout network at the rational point x."""
    return MaxoutEvaluator(net).evaluate(x)
