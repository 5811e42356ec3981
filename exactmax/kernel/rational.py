"""The one exact rational backend: python-flint's ``fmpq``, 100x faster than ``fractions.Fraction``
(``benchmarks/eval.py``); it raises ``TypeError`` when a float is mixed in (``Fraction`` returns a
float): exactness is a type property.  Every number enters the kernel through ``rational``."""

from __future__ import annotations

from fractions import Fraction

from flint import fmpq, fmpq_mat, fmpz, fmpz_mat

Q = fmpq
Z = fmpz
RatMatrix = fmpq_mat
IntMatrix = fmpz_mat
ZERO = Q(0)
ONE = Q(1)


def rational(value: object) -> Q:
    """``value`` (an fmpq, fmpz, int or Fraction) as an exact rational; a float, a bool or any
    other type raises ``TypeError``, so no rounded number reaches the kernel."""
    if isinstance(value, fmpq):
        return value
    if isinstance(value, bool):
        raise TypeError("exactmax: a bool is not a rational number")
    if isinstance(value, (int, fmpz)):
        return fmpq(value)
    if isinstance(value, Fraction):
        return fmpq(value.numerator, value.denominator)
    raise TypeError(f"exactmax: expected an exact rational, got {type(value).__name__} {value!r}")
