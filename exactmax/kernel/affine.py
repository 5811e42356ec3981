"""Affine maps x -> W x + b over Q."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain

from .rational import Q, ZERO, common_denominator

Vector = tuple[Q, ...]
Matrix = tuple[Vector, ...]


@dataclass(frozen=True, slots=True)
class Affine:
    """The affine map x -> W x + b, W in Q^{m x n}, b in Q^m (``in_dim`` = n, kept for m = 0)."""

    W: Matrix
    b: Vector
    in_dim: int

    @property
    def out_dim(self) -> int:
        return len(self.b)


def dot(u: Vector, v: Vector) -> Q:
    """The exact inner product sum_i u_i v_i (skipping zero coefficients)."""
    s = ZERO
    for a, c in zip(u, v):
        if a:
            s += a * c
    return s


def scaled_rows(W: Matrix, b: Vector) -> tuple[int, list[list[int]]]:
    """(D, rows) with rows[r] = D * [W_r | b_r] integral, D the least common denominator.

    This is the scaling behind the fast exact evaluator: for h = u / E (u integral),
    W h + b = (rows . [u; E]) / (D E), so one integer matrix product evaluates a whole layer.
    """
    D = common_denominator(chain((v for row in W for v in row), b))
    rows = [[int(v * D) for v in row] + [int(c * D)] for row, c in zip(W, b)]
    return D, rows


def scaled_matrix(W: Matrix, ncols: int) -> tuple[int, list[list[int]]]:
    """(D, rows) with rows = D * W integral, D the least common denominator (W has ncols
    columns, kept for W with no rows)."""
    D = common_denominator(v for row in W for v in row)
    return D, [[int(v * D) for v in row] for row in W]
