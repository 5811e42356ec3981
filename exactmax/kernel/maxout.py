"""Maxout networks over Q: h^0 = x, h^l_i = max_j (w^l_{i,j} . h^{l-1} + b^l_{i,j}), y = A h^D + c.
``evaluate_maxout``: this in exact rationals, the reference that confirms every refutation."""

from dataclasses import dataclass, field, replace

from .affine import Affine, Row, Vector, check_matrix, dot
from .errors import CheckFailed
from .polyhedron import Box, Domain
from .rational import ZERO, Q, rational


@dataclass(frozen=True, slots=True)
class Piece:  # w . h + b
    w: Row
    b: Q


@dataclass(frozen=True, slots=True)
class Unit:  # the max of its pieces (at least one)
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
class MaxoutNetwork:  # R^input_dim -> R^out_dim; ``output`` None means the identity
    input_dim: int
    layers: tuple[Layer, ...]
    output: Affine | None = None
    domain: Domain | None = None
    meta: object = field(default=None, compare=False, hash=False)

    @property
    def widths(self) -> tuple[int, ...]:  # (N_0 = input_dim, N_1, ..., N_D)
        return (self.input_dim,) + tuple(l.width for l in self.layers)

    @property
    def out_dim(self) -> int:
        return self.output.out_dim if self.output is not None else self.widths[-1]


def check_maxout_shapes(net: MaxoutNetwork) -> None:
    """Raise ValueError (TypeError for an inexact number) unless every piece has one weight
    per unit of the layer before and the output map fits."""
    width = net.input_dim
    if not net.layers:
        raise ValueError("a Maxout network needs at least one layer")
    for l, layer in enumerate(net.layers):
        if not layer.units:
            raise ValueError(f"layer {l} has no units")
        for i, unit in enumerate(layer.units):
            if not unit.pieces:
                raise ValueError(f"layer {l}, unit {i} has no pieces")
            w, b = [p.w for p in unit.pieces], [p.b for p in unit.pieces]
            check_matrix(w, len(w), width, f"layer {l}, unit {i}: the pieces", b)
        width = len(layer.units)
    if (A := net.output) is not None:
        if A.in_dim != width:
            raise ValueError("the output map does not fit the last layer")
        check_matrix(A.W, len(A.b), width, "the output map", A.b)


def check_maxout_pair(a, b, rule: str) -> None:  # CheckFailed unless both are well-shaped Maxouts
    if not (isinstance(a, MaxoutNetwork) and isinstance(b, MaxoutNetwork)):
        raise CheckFailed(f"{rule}: both models must be Maxout networks")
    try:
        list(map(check_maxout_shapes, (a, b)))
    except (ValueError, TypeError) as e:
        raise CheckFailed(f"a model is malformed: {e}") from None


def evaluate_maxout(net: MaxoutNetwork, x) -> Vector:  # the exact N(x) at the rational point x
    check_maxout_shapes(net)
    h = tuple(rational(v) for v in x)
    if len(h) != net.input_dim:
        raise ValueError(f"input of length {len(h)}, expected {net.input_dim}")
    for layer in net.layers:
        h = tuple(max(dot(p.w, h) + p.b for p in unit.pieces) for unit in layer.units)
    if net.output is not None:
        h = tuple(dot(row, h) + c for row, c in zip(net.output.W, net.output.b))
    return h


def on_free_inputs(net: MaxoutNetwork, box: Box) -> tuple[MaxoutNetwork, Box]:
    """(N', box'): x_i = lower_i on the box where lower_i = upper_i, so with F the other inputs a
    first-layer piece w . x + b = w_F . x_F + b + sum_{i not in F} w_i lower_i: N'(x_F) = N(x)."""
    F, lo = [i for i, (l, u) in enumerate(zip(box.lower, box.upper)) if l != u], box.lower
    c = lambda w: dot(w, lo) - sum((w[i] * lo[i] for i in F), ZERO)  # sum_{i not in F} w_i lo_i
    fix = lambda p: Piece(tuple(p.w[i] for i in F), p.b + c(p.w))
    first = Layer(tuple(Unit(tuple(map(fix, u.pieces))) for u in net.layers[0].units))
    net = replace(net, input_dim=len(F), layers=(first, *net.layers[1:]), domain=None)
    return net, Box(tuple(lo[i] for i in F), tuple(box.upper[i] for i in F))
