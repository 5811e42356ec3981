"""Affine maps x -> W x + b over Q; a vector or a mostly-zero matrix: a tuple or a SparseVector."""

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .rational import ZERO, Q, Z


@dataclass(frozen=True, slots=True, eq=False)
class SparseVector(Sequence):  # read as the dense tuple (len, [], iter, ==, hash); see nonzero
    size: int  # the sequence of length size that is values at indices, zero elsewhere
    indices: tuple[int, ...]  # increasing
    values: tuple[Any, ...]
    zero: Any = ZERO  # a vector of Q^size, or (zero a zero row) a matrix whose other rows are 0

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        dense = [self.zero] * self.size
        for j, v in zip(self.indices, self.values):
            dense[j] = v
        return iter(dense)

    def __getitem__(self, j):  # type: ignore[override]
        if isinstance(j, slice):
            return tuple(self)[j]
        j = range(self.size)[j]  # a negative j counts from the end; IndexError outside
        t = bisect_left(self.indices, j)
        return self.values[t] if self.indices[t : t + 1] == (j,) else self.zero

    def __eq__(self, other) -> bool:
        if isinstance(other, SparseVector):
            s, o = self, other
            return (s.size, s.indices, s.values, s.zero) == (o.size, o.indices, o.values, o.zero)
        return isinstance(other, (tuple, list)) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))


Vector = tuple[Q, ...]
Row = Vector | SparseVector
Matrix = tuple[Row, ...] | SparseVector


def nonzero(v: Sequence) -> Iterable[tuple[int, Any]]:
    """The pairs (j, v_j) with v_j != 0, in increasing j (a sparse vector's, read directly; of a
    matrix, its rows that are not empty, zero rows included unless the matrix is sparse)."""
    if isinstance(v, SparseVector):
        return zip(v.indices, v.values)
    return ((j, a) for j, a in enumerate(v) if a)


def row_of(size: int, entries: Iterable[tuple[int, Q]]) -> Row:
    """The vector of Q^size with these entries (distinct indices in range; others 0): sparse
    when it has 16 coordinates or more and at most a quarter of them are non-zero."""
    e = sorted((j, v) for j, v in entries if v)
    if any(not 0 <= j < size for j, _ in e):
        raise ValueError(f"an index outside a vector of size {size}")
    s = SparseVector(size, tuple(j for j, _ in e), tuple(v for _, v in e))
    return tuple(s) if size < 16 or 4 * len(e) > size else s


@dataclass(frozen=True, slots=True)
class Affine:
    W: Matrix  # m x n
    b: Vector  # m entries
    in_dim: int  # n, kept for m = 0

    @property
    def out_dim(self) -> int:
        return len(self.b)


def dot(u: Sequence, v: Sequence) -> Q:  # the exact sum_i u_i v_i (zero coefficients skipped)
    if isinstance(v, SparseVector):
        u, v = v, u
    if isinstance(u, SparseVector):
        return sum((a * v[j] for j, a in zip(u.indices, u.values)), ZERO)
    return sum((a * c for a, c in zip(u, v) if a), ZERO)


def check_matrix(W, rows: int, cols: int, what: str, b=None) -> None:
    """Raise ValueError unless W is rows x cols (and b, if given, of length rows), TypeError unless
    every entry is an fmpq, fmpz or int: no bool, float or Fraction (none mixes with fmpq)."""
    listed = (W.zero, *W.values) if isinstance(W, SparseVector) else W  # the rows it holds
    if len(W) != rows or set(map(len, listed)) - {cols} or (b is not None and len(b) != rows):
        raise ValueError(f"{what} is not {rows} x {cols}")
    sparse_msg = f"{what}: a sparse row's indices are not increasing in range, or the rest is not 0"
    for r in (W, *dict(zip(map(id, listed), listed)).values(), b or ()):  # a shared row: once
        ix, vs = (r.indices, r.values) if isinstance(r, SparseVector) else (None, r)
        bad = ix is not None and (len(ix) != len(vs) or list(ix) != sorted(set(ix)))
        bad = bad or ix is not None and any(not 0 <= j < len(r) for j in ix[:1] + ix[-1:])
        if bad or ix is not None and any(r.zero if r is W else (r.zero,)):
            raise ValueError(sparse_msg)
        for v in vs if r is not W else ():
            if type(v) is not Q and (isinstance(v, bool) or not isinstance(v, (Z, int))):
                raise TypeError(f"{what}: expected an exact rational, got {type(v).__name__} {v!r}")
