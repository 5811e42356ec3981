"""Exact reading of numbers: integers, "p/q", decimal strings, JSON number literals.

A JSON literal such as 0.1 is read from its decimal text (1/10), never through a float.
"""

from __future__ import annotations

import re
from fractions import Fraction

from ..kernel.rational import Q, Z, rational

MAX_EXPONENT = 1000
"""Largest |e| accepted in a decimal exponent (1e1000 is fine, 1e1001 is refused)."""

MAX_DIGITS = 1_000_000
"""Most digits accepted in one number.  Digits are read by FLINT (sub-quadratic, no limit of
its own; Python's int() stops at 4300 digits), so this only bounds absurd inputs: a number
of a million digits takes a few hundredths of a second, and everything exactmax writes
reads back."""

_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)
_FRACTION = re.compile(r"([+-]?\d+)/(\d+)", re.ASCII)
_DECIMAL = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?", re.ASCII)


def to_fraction(value: Q) -> Fraction:
    """The same rational as a ``fractions.Fraction`` (for tests and foreign code)."""
    return Fraction(int(value.p), int(value.q))


def q_str(value: Q) -> str:
    """Canonical text of a rational: ``"-3"`` or ``"p/q"`` in lowest terms, q > 0 (through
    Python's ints, a third faster than ``str`` of an fmpq, which certificates feel; FLINT's
    ``str`` past Python's limit of 4,300 digits for int to text)."""
    v = rational(value)
    try:
        return str(int(v.p)) if v.q == 1 else f"{int(v.p)}/{int(v.q)}"
    except ValueError:
        return str(v)


EXPECTED = 'expected an integer, a decimal or "p/q"'


class NumberSyntaxError(ValueError):
    """The text is not a number exactmax accepts; the message says why."""


def parse_rational(text: str) -> Q:
    """The exact rational written by ``text``: "-3", "7/2", "0.125", "1e-3", "-1.5E+2".

    Raises NumberSyntaxError for anything else (including "NaN", "Infinity", "1/0",
    exponents beyond MAX_EXPONENT and numbers longer than MAX_DIGITS digits).
    """
    if len(text) > MAX_DIGITS and sum(ch.isdigit() for ch in text) > MAX_DIGITS:
        raise NumberSyntaxError(f"number longer than {MAX_DIGITS} digits")
    if _INTEGER.fullmatch(text):
        return Q(_int(text))
    m = _FRACTION.fullmatch(text)
    if m:
        den = _int(m.group(2))
        if den == 0:
            raise NumberSyntaxError(f'zero denominator in "{text}"')
        return Q(_int(m.group(1)), den)
    m = _DECIMAL.fullmatch(text)
    if m and (m.group(2) or m.group(3)):
        sign, whole, frac, exp = m.group(1), m.group(2), m.group(3) or "", m.group(4)
        digits = (exp or "").lstrip("+-").lstrip("0")
        if len(digits) > len(str(MAX_EXPONENT)):  # never int() of a 10^4-digit exponent
            raise NumberSyntaxError(
                f"the exponent of {quote(text)} has {len(digits)} digits, beyond "
                f'+-{MAX_EXPONENT}; write the number as "p/q"'
            )
        e = (-1 if (exp or "").startswith("-") else 1) * int(digits or "0")
        if abs(e) > MAX_EXPONENT:
            raise NumberSyntaxError(
                f'exponent {e} in "{text}" is beyond +-{MAX_EXPONENT}; write the number as "p/q"'
            )
        mantissa = _int((whole or "0") + frac)
        e -= len(frac)
        value = Q(mantissa * Z(10) ** e) if e >= 0 else Q(mantissa, Z(10) ** -e)
        return -value if sign == "-" else value
    raise NumberSyntaxError(f"{EXPECTED}, got {quote(text)}")


def approx(value) -> str:
    """Six significant digits of a rational of any size ("1.5", "-2.3e+400"), for the
    "about ..." of a message (float() alone overflows beyond 1.8e308)."""
    try:
        return f"{float(value):.6g}"
    except OverflowError:
        p, q = int(value.p), int(value.q)
    k = int((abs(p).bit_length() - q.bit_length()) * 0.30102999566398120)
    m = Fraction(abs(p), q) / Fraction(10) ** k
    while m >= 10:
        m, k = m / 10, k + 1
    while m < 1:
        m, k = m * 10, k - 1
    return f"{'-' if p < 0 else ''}{float(m):.6g}e+{k}"


def parse_intervals(text: str) -> list[tuple[Q, Q]]:
    """``"lo,hi;lo,hi;..."`` (exact numbers) -> [(lo, hi), ...]; NumberSyntaxError naming the
    side: ``side 1: expected "lo,hi", got '2'``.  (``--box`` of approx-convex and of the
    commands that take a domain.)"""
    out = []
    for i, side in enumerate(text.split(";")):
        parts = [t.strip() for t in side.split(",")]
        if len(parts) != 2:
            raise NumberSyntaxError(f'side {i}: expected "lo,hi", got {side.strip()!r}')
        try:
            lo, hi = (parse_rational(t) for t in parts)
        except NumberSyntaxError as e:
            raise NumberSyntaxError(f"side {i}: {e}") from None
        out.append((lo, hi))
    return out


def approx_point(values) -> list[str]:
    """Each coordinate to six significant digits (``approx``): the point as people read it,
    given beside its exact text (``--json``: the ``..._approx`` keys)."""
    return [approx(v) for v in values]


def point_lines(name: str, values, sep: str = " = ", indent: str = "  ") -> str:
    """``x = (exact, ...)`` and, when some coordinate's exact text is longer than
    ``LONG_EXACT`` characters (a fraction of 40 digits, say; not 1/6), a second line
    ``x ~ (0.123457, ...)``."""
    exact = [q_str(v) for v in values]
    text = f"{indent}{name}{sep}({', '.join(exact)})"
    if max(map(len, exact), default=0) <= LONG_EXACT:
        return text
    return text + f"\n{indent}{name} ~ ({', '.join(approx_point(values))})"


LONG_EXACT = 12


def difference_lines(x, names, outputs) -> str:
    """A point where models differ: ``x = (...)``, then each model's outputs (``point_lines``)."""
    return "\n".join(
        [point_lines("x", x)] + [point_lines(n, y, ": ") for n, y in zip(names, outputs)]
    )


def _int(digits: str) -> Z:
    """An optionally signed run of ASCII digits, read by FLINT (no decimal digit limit)."""
    return Z(digits[1:] if digits.startswith("+") else digits)


def quote(text: str, limit: int = 40) -> str:
    """The text as a JSON string, shortened to about ``limit`` characters."""
    import json

    s = json.dumps(text, ensure_ascii=False)
    return s if len(s) <= limit else s[: limit - 4] + '..."'
