"""The one exact rational: python-flint's ``fmpq`` (100x ``Fraction``'s speed); mixed with a float
it raises ``TypeError`` (``Fraction`` gives a float).  All numbers enter via ``rational``."""

from fractions import Fraction

from flint import fmpq, fmpq_mat, fmpz, fmpz_mat

Q = fmpq
Z = fmpz
RatMatrix = fmpq_mat
IntMatrix = fmpz_mat
ZERO, ONE = Q(0), Q(1)


def rational(value: object) -> Q:
    """``value`` (fmpq, fmpz, int, Fraction) as an fmpq; any other type (float, bool): TypeError."""
    if isinstance(value, fmpq):
        return value
    if isinstance(value, bool):
        raise TypeError("exactmax: a bool is not a rational number")
    if isinstance(value, (int, fmpz)):
        return fmpq(value)
    if isinstance(value, Fraction):
        return fmpq(value.numerator, value.denominator)
    raise TypeError(f"exactmax: expected an exact rational, got {type(value).__name__} {value!r}")
