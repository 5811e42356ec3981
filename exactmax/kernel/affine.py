"""Affine maps x -> W x + b over Q."""

from __future__ import annotations

from dataclasses import dataclass

from .rational import ZERO, Q

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
