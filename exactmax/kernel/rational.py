"""The one exact rational backend of exactmax, chosen here and imported everywhere.

Choice: python-flint's ``fmpq`` (rationals in lowest terms, FLINT/GMP underneath) for scalars,
``fmpq_mat`` for the kernel's matrix products and ``fmpz_mat`` for the integer-scaled evaluators
outside it (``vectorized/scaled.py``).

Why (measured in ``benchmarks/eval.py``, see README): scaling every layer to one common
denominator and multiplying integer matrices with ``fmpz_mat`` beats ``fractions.Fraction`` by
two orders of magnitude, where gmpy2's ``mpq`` only gains a small constant factor.  And
``fmpq`` *raises* ``TypeError`` when a float is mixed in (``fmpq(1, 2) + 0.5``), where both
``Fraction`` and ``gmpy2.mpq`` silently return a float: exactness is a type property here.

Every number enters the kernel through :func:`rational`, which refuses floats, bools and
anything else that is not already an exact integer or rational.
"""

from __future__ import annotations

from fractions import Fraction

from flint import fmpq, fmpq_mat, fmpz, fmpz_mat

Q = fmpq
"""The rational scalar type."""

Z = fmpz
"""The integer scalar type of the backend."""

IntMatrix = fmpz_mat
"""Dense integer matrices with products computed in C."""

RatMatrix = fmpq_mat
"""Dense rational matrices (FLINT scales rows to common denominators internally)."""

ZERO = Q(0)
ONE = Q(1)


def rational(value: object) -> Q:
    """Return ``value`` as an exact rational, or raise ``TypeError``.

    Accepted: ``fmpq``, ``fmpz``, ``int`` (not ``bool``) and ``fractions.Fraction``.
    Refused: ``float`` (and every other type), so no rounded number can reach the kernel.
    """
    if isinstance(value, fmpq):
        return value
    if isinstance(value, bool):
        raise TypeError("exactmax: a bool is not a rational number")
    if isinstance(value, (int, fmpz)):
        return fmpq(value)
    if isinstance(value, Fraction):
        return fmpq(value.numerator, value.denominator)
    raise TypeError(f"exactmax: expected an exact rational, got {type(value).__name__} {value!r}")


def to_fraction(value: Q) -> Fraction:
    """The same rational as a ``fractions.Fraction`` (for tests and foreign code)."""
    return Fraction(int(value.p), int(value.q))


def q_str(value: Q) -> str:
    """Canonical text of a rational: ``"-3"`` or ``"p/q"`` in lowest terms, q > 0."""
    return str(rational(value))
