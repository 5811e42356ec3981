"""Maxout networks over Q and their exact evaluation.

    h^0 = x,   h^l_i = max_j ( w^l_{i,j} . h^{l-1} + b^l_{i,j} ),   y = A h^D + c.

The evaluator keeps each layer's values as integers over one common denominator: if
h = u / E with u integral and a layer's pieces are scaled by their least common denominator
D_l, then every pre-activation is (D_l [w | b] . [u; E]) / (D_l E), and since D_l E > 0 the
max over pieces can be taken on the integer numerators.  One integer matrix product per layer
(``IntMatrix``, computed in C) and one k-ary integer max; the only division is at the very end.
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

    def piece_major(self) -> list[Piece]:
        """Piece j of unit i at j N + i, j < rank; a unit with fewer pieces repeats its first
        one (max(a, a, b) = max(a, b)), so the layer's max is one k-ary max of k blocks."""
        return [u.pieces[j] if j < len(u.pieces) else u.pieces[0]
                for j in range(self.rank) for u in self.units]


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


def scaled_layers(net: MaxoutNetwork) -> list[tuple[int, list[list[int]], int, int]]:
    """(D_l, rows, k, N) per layer, rows = D_l [w | b] of its pieces in ``piece_major``
    order with D_l their least common denominator, and the output map last as a layer of
    rank 1 when there is one."""
    out = []
    for layer in net.layers:
        pieces = layer.piece_major()
        out.append(scaled_rows([p.w for p in pieces], [p.b for p in pieces])
                   + (layer.rank, layer.width))
    if net.output is not None:
        D, rows = scaled_rows(net.output.W, net.output.b)
        out.append((D, rows, 1, len(rows)))
    return out


class MaxoutEvaluator:
    """Exact evaluation of one network, prepared once (integer-scaled layers).

    A layer of N units of rank k is stored piece-major: row j N + i of its matrix is piece j
    of unit i, and a unit with fewer than k pieces repeats its first piece (max(a, a, b) =
    max(a, b)).  For a batch of B inputs, block j of the product (entries j N B to
    (j + 1) N B) then holds piece j of every unit at every input, so the layer's max is one
    elementwise max of k blocks.
    """

    __slots__ = ("_layers", "input_dim")

    def __init__(self, net: MaxoutNetwork):
        check_maxout_shapes(net)
        self.input_dim = net.input_dim
        # the output map is one more product, of rank 1 (no max)
        self._layers = [(D, IntMatrix(rows) if rows else None, N, k)
                        for D, rows, k, N in scaled_layers(net)]

    def evaluate_batch(self, xs) -> list[Vector]:
        """[N(x) for x in xs], exactly.  Every coordinate must be an exact rational."""
        xs = [tuple(x) for x in xs]
        B, n = len(xs), self.input_dim
        if B == 0:
            return []
        for x in xs:
            if len(x) != n:
                raise ValueError(f"input of length {len(x)}, expected {n}")
        # H = [u; E] ((n + 1) x B, column c = input c) with x_c = u_c / E: the numerators of
        # [x; 1] over their least common denominator E, computed in C.
        H, E = RatMatrix(n + 1, B, [rational(x[i]) for i in range(n) for x in xs]
                         + [1] * B).numer_denom()
        for l, (D, M, n, k) in enumerate(self._layers):
            if l:  # H = [u; E] for the layer before
                H = IntMatrix(len(u) // B + 1, B, u + [E] * B)
            Z = (M * H).entries() if n else []
            E *= D
            u = Z if k == 1 else list(map(max, *[Z[j * n * B:(j + 1) * n * B]
                                                 for j in range(k)]))
        if not u:
            return [()] * B
        # u is n x B row-major: output c is column c, u[c::B] / E (fmpq reduces each).
        return [tuple([Q(v, E) for v in u[c::B]]) for c in range(B)]

    def evaluate(self, x) -> Vector:
        """N(x), exactly."""
        return self.evaluate_batch([x])[0]


def evaluate_maxout(net: MaxoutNetwork, x) -> Vector:
    """The exact output N(x) of the Maxout network at the rational point x."""
    return MaxoutEvaluator(net).evaluate(x)
