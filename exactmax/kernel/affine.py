"""Affine maps x -> W x + b over Q."""

from __future__ import annotations

from dataclasses import dataclass

from .rational import ZERO, Q

Vector = tuple[Q, ...]
Matrix = tuple[Vector, ...]


@dataclass(frozen=True, slots=True)
class Affine:
    W: Matrix  # m x n
    b: Vector  # m entries
    in_dim: int  # n, kept for m = 0

    @property
    def out_dim(self) -> int:
        return len(self.b)


def dot(u: Vector, v: Vector) -> Q:
    """The exact inner product sum_i u_i v_i (zero coefficients skipped)."""
    return sum((a * c for a, c in zip(u, v) if a), ZERO)
