"""Floating-point LPs (HiGHS) that guide the search for exact Farkas proofs and cell points.

Untrusted, and never trusted by what it returns: a float LP only proposes.

- ``farkas``: maximise r = c_e - sum_i y_i c_i over y >= 0 with sum_i y_i a_i = a_e (the
  Farkas system of ``kernel/certificate.py``: e - sum y_i row_i = r).  The float optimum y is
  made exact in one of two ways, cheapest first:

  1. *the safe bound* (``safe_bound``; Neumaier and Shcherbina, "Safe bounds in linear and
     mixed-integer linear programming", Math. Program. 99 (2004)): round y to short
     rationals y' >= 0 (``SAFE_ROUNDINGS``) and compute exactly the residual
     res = a_e - sum_i y'_i a_i.  Any y' >= 0 gives e - sum_i y'_i row_i = res . x + r',
     r' = c_e - sum_i y'_i c_i, and on a cell with bounds l_t <= x_t <= u_t,
     res . x >= sum_{res_t > 0} res_t l_t + sum_{res_t < 0} res_t u_t (interval arithmetic).
     The bounds are rows of the cell (a box domain's rows x_t <= u_t, x_t >= l_t come first
     in every cell, and a split on one coordinate is another), so the interval bound *is* a
     Farkas combination: res_t times the row x_t - l_t >= 0 for res_t > 0, -res_t times
     u_t - x_t >= 0 for res_t < 0.  The multipliers y' plus these leave no linear part and
     the constant r = r' + sum_{res_t > 0} res_t l_t + sum_{res_t < 0} res_t u_t: a Farkas
     proof in the kernel's existing rule (``check_entails``), with no exact LP and no linear
     solve.  It shows the claim when the float optimum clears 0 by more than the rounding
     costs, or when the rounding recovers an exact dual (res = 0); it fails where the claim
     is tight and the dual is not recovered, or where a coordinate the residual touches has
     no bound row.
  2. *the support solve*: the rows the float optimum uses (its support S) are solved
     *exactly*, sum_{i in S} y_i a_i = a_e by Gaussian elimination over Q, and the exact y is
     returned only if it is >= 0 and its exact r shows the claim.  This is the usual exact
     reconstruction from an optimal float basis; where the float basis is wrong or
     degenerate, nothing is returned and the caller asks the exact solver (z3).

  ``EXACTMAX_SAFE_BOUND=0`` in the environment skips step 1 (to measure the two side by
  side, ``benchmarks/safe_bound.py``); ``ROUTES`` and ``SECONDS`` count what each step did.
- ``interior_point``: maximise t subject to row(x) >= t; the float x is made exact (each
  float is a dyadic rational) and returned only if it satisfies every row strictly, checked
  exactly.

An answer "no proof" from the float LP is only reported when it is clear by a margin (the
LP's optimum r is below -``MARGIN`` or the system is infeasible by HiGHS's own tolerance and
the caller accepts that risk: a missed proof costs a split, never soundness).
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections import Counter
from typing import Any

import numpy as np

from ..kernel.rational import ZERO, Q

MARGIN = 1e-7
"""Float optima within this of the decision boundary are left to the exact solver."""

SAFE_ROUNDINGS = (("short", 1 << 12), ("dyadic", 24), ("dyadic", 53))
"""How the safe bound rounds the float multipliers, tried in turn: each to a fraction with a
denominator up to 2^12 within 1e-9 of it (tried only when every multiplier has one: where the
float dual is an exact dual of small fractions up to the LP's error, this finds it, the
residual is 0, the certificate as short as the support solve's, and a claim tight at its
optimum is shown too), else to 24 significant bits (short dyadics), else to the float itself
(53 bits: the rounding costs nothing more than the LP's own error).  Any choice is sound: the
kernel checks the exact result."""

SAFE_BOUND_FIRST_ABOVE = 8
"""In cells of more input dimensions than this the safe bound is tried first, else second."""
ROUTES: Counter = Counter()
"""How ``farkas`` answered, for benchmarks: "safe_bound", "support_solve", "no_proof" (the
float optimum is below 0 by a margin), "declined" (the caller's exact route runs)."""
SECONDS: Any = Counter()  # of floats (typeshed's Counter holds ints only)
"""Time spent in each step of ``farkas`` ("lp", "safe_bound", "support_solve"), seconds."""

_HIGHS = None


def available() -> bool:
    """Is HiGHS importable (``highspy``)?"""
    try:
        import highspy  # noqa: F401
    except ImportError:
        return False
    return True


def new_solver():
    """A HiGHS instance, silent (HiGHS prints a banner on its first construction, to the
    C-level standard output, which must stay clean for --json)."""
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            h = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    h.setOptionValue("output_flag", False)
    return h


def _solver():
    """One HiGHS instance per process (``new_solver``)."""
    global _HIGHS
    if _HIGHS is None:
        _HIGHS = new_solver()
    return _HIGHS


def _solve_lp(cost, A_cols, row_lo, row_hi, col_lo, col_hi):
    """min cost . v subject to row_lo <= A v <= row_hi, col_lo <= v <= col_hi; A given by
    columns as (indices, values).  Returns (status, v, objective) with status "optimal",
    "infeasible", "unbounded" or "other"."""
    import highspy

    h = _solver()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = len(cost), len(row_lo)
    lp.col_cost_ = np.asarray(cost, dtype=float)
    lp.col_lower_ = np.asarray(col_lo, dtype=float)
    lp.col_upper_ = np.asarray(col_hi, dtype=float)
    lp.row_lower_ = np.asarray(row_lo, dtype=float)
    lp.row_upper_ = np.asarray(row_hi, dtype=float)
    start, index, value = [0], [], []
    for idx, val in A_cols:
        index += idx
        value += val
        start.append(len(index))
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.asarray(start, dtype=np.int32)
    lp.a_matrix_.index_ = np.asarray(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.asarray(value, dtype=float)
    h.clearModel()
    h.setOptionValue("output_flag", False)
    h.passModel(lp)
    h.run()
    st = h.getModelStatus()
    if st == highspy.HighsModelStatus.kOptimal:
        return "optimal", list(h.getSolution().col_value), h.getInfo().objective_function_value
    if st == highspy.HighsModelStatus.kInfeasible:
        return "infeasible", None, None
    if st in (highspy.HighsModelStatus.kUnbounded, highspy.HighsModelStatus.kUnboundedOrInfeasible):
        return "unbounded", None, None
    return "other", None, None


def _finite(rows, e) -> bool:
    """Every number of the rows (and of e) is a finite float of moderate size: otherwise the
    float LP says nothing and the exact solver is asked."""
    nums = [v for r in rows for _, v in r.nz] + [r.c for r in rows]
    if e is not None:
        nums += list(e[0]) + [e[1]]
    try:
        return all(abs(float(v)) < 1e12 for v in nums)
    except OverflowError:
        return False


def safe_bound_enabled() -> bool:
    """Is the safe bound tried (``EXACTMAX_SAFE_BOUND`` unset, or anything but "0")?"""
    return os.environ.get("EXACTMAX_SAFE_BOUND", "1") != "0"


def short_fraction(v: float, max_den: int):
    """A fraction p/q, q <= max_den, within 1e-9 |v| of the float v > 0 (the last convergent
    of v's continued fraction with such a q, computed in floats: a candidate only, any
    rational will do); None when there is none (or v <= 0, not finite)."""
    if not (v > 0 and math.isfinite(v)):
        return None
    p0, q0, p1, q1 = 0, 1, 1, 0
    x = v
    for _ in range(40):
        a = math.floor(x)
        p2, q2 = a * p1 + p0, a * q1 + q0
        if q2 > max_den:
            break
        p0, q0, p1, q1 = p1, q1, p2, q2
        frac = x - a
        if frac < 1e-12 or abs(p1 - v * q1) <= 1e-12 * v * q1:
            break
        x = 1 / frac
    if q1 == 0 or abs(p1 - v * q1) > 1e-9 * v * q1:
        return None
    return Q(p1, q1)


def rounded(v: float, rounding):
    """The float v > 0 rounded as ``rounding`` says (``SAFE_ROUNDINGS``): ("short", max_den)
    to ``short_fraction`` (None when there is none: that rounding is then not tried),
    ("dyadic", bits) to ``dyadic``."""
    how, n = rounding
    if how == "short":
        return short_fraction(v, n)
    return dyadic(v, n)


def dyadic(v: float, bits: int):
    """The float v >= 0 rounded to a dyadic rational with at most ``bits`` significant bits
    (exact: m 2^k with m <= 2^bits an integer); zero for v <= 0 or not finite."""
    if not (v > 0 and math.isfinite(v)):
        return ZERO
    m, k = math.frexp(v)  # v = m 2^k, 1/2 <= m < 1
    n = round(math.ldexp(m, bits))  # an integer of at most bits + 1 bits
    k -= bits
    return Q(n * (1 << k)) if k >= 0 else Q(n, 1 << -k)


def bound_rows(rows, d: int):
    """(lower, upper): for each coordinate t the index of the tightest row of the form
    k x_t + c >= 0 with k > 0 (x_t >= -c/k: the greatest such bound; a strict row between
    equal bounds) and with k < 0 (x_t <= c/-k: the least), None where there is none."""
    lower: list[int | None] = [None] * d
    upper: list[int | None] = [None] * d
    lo_val: list[Any] = [None] * d
    up_val: list[Any] = [None] * d
    for i, r in enumerate(rows):
        if len(r.nz) != 1:  # a bound row has one coefficient that is not 0
            continue
        ((t, k),) = r.nz
        b = -r.c / k
        if k > 0:
            if lo_val[t] is None or b > lo_val[t] or (b == lo_val[t] and r.strict):
                lower[t], lo_val[t] = i, b
        elif up_val[t] is None or b < up_val[t] or (b == up_val[t] and r.strict):
            upper[t], up_val[t] = i, b
    return lower, upper


def safe_bound(rows, e, strict: bool, y, bounds=None, rounding=SAFE_ROUNDINGS[0]):
    """An exact Farkas proof that e >= 0 (> 0 if strict) on {x : rows} from the float
    multipliers ``y`` (one per row, >= 0 up to rounding), or None: the Neumaier-Shcherbina
    safe bound.  y is rounded to rationals y' >= 0 as ``rounding`` says (``rounded``; entries
    below 1e-12 of the largest dropped: y' = 0 is as valid a choice as any); the exact
    residual res = a_e - sum y'_i a_i is absorbed by the cell's bound rows (``bounds``, as
    ``bound_rows`` gives them): res_t / k times the lower row k x_t + c >= 0 for res_t > 0,
    res_t / k times the upper row (k < 0) for res_t < 0.  Then e - sum of all = r exactly,
    r = c_e - sum y'_i c_i + (the interval minimum of res . x over the bounds), and the proof
    is returned only if r > 0, or r = 0 and the claim is not strict or a strict row is used:
    the kernel's rule, checked here first so that only a proof is returned."""
    d = len(e[0])
    lam: dict[int, object] = {}
    y = np.asarray(y, dtype=float)
    if len(y):  # below 1e-12 of the largest: the LP's noise, left to the residual
        for i in np.flatnonzero(y > 1e-12 * max(float(y.max()), 0.0)).tolist():
            q = rounded(float(y[i]), rounding)
            if q is None:
                return None  # not an exact dual of short fractions: the dyadics follow
            if q:
                lam[i] = q
    res = list(e[0])
    r = e[1]
    for i, q in lam.items():
        row = rows[i]
        for t, v in row.nz:
            res[t] -= q * v
        r -= q * row.c
    if any(res):
        lower, upper = bounds if bounds is not None else bound_rows(rows, d)
        for t, v in enumerate(res):
            if not v:
                continue
            i = lower[t] if v > 0 else upper[t]
            if i is None:
                return None
            row = rows[i]
            mu = v / row.a[t]  # > 0: v and the row's coefficient agree in sign
            lam[i] = lam.get(i, ZERO) + mu
            r -= mu * row.c
    if r > 0 or (r == 0 and (not strict or any(rows[i].strict for i in lam))):
        return tuple(sorted(lam.items()))
    return None


def from_dual(rows, e, strict: bool, y, bounds=None):
    """``safe_bound`` with ``SAFE_ROUNDINGS`` tried in turn (``bounds``: the rows' ``bound_rows``,
    computed here when not given; a caller asking many claims of one cell computes them
    once): the first exact proof, or None.  Counted in ``ROUTES["safe_bound"]``."""
    t0 = time.perf_counter()
    if bounds is None:
        bounds = bound_rows(rows, len(e[0]))
    proof = None
    for rounding in SAFE_ROUNDINGS:
        proof = safe_bound(rows, e, strict, y, bounds, rounding)
        if proof is not None:
            ROUTES["safe_bound"] += 1
            break
    SECONDS["safe_bound"] += time.perf_counter() - t0
    return proof


def farkas(rows, e, strict: bool, solve_exact):
    """(proof or None, decided): an exact Farkas proof that e >= 0 (> 0 if strict) on the cell
    of ``rows``, made from the float optimum y by solving its support exactly with
    ``solve_exact(vectors, target)`` (exact Gaussian elimination) and by the safe bound
    (``from_dual``, unless ``EXACTMAX_SAFE_BOUND=0``), the safe bound first in dimensions above
    ``SAFE_BOUND_FIRST_ABOVE``; decided is True when the float LP shows by a
    margin that there is none, False when the exact solver should be asked."""
    d = len(e[0])
    n = len(rows)
    if n == 0 or not _finite(rows, e):
        ROUTES["declined"] += 1
        return None, False
    inf = float("inf")
    t0 = time.perf_counter()
    # maximise r = c_e - sum y_i c_i  <=>  minimise sum y_i c_i; strict rows get a tiny
    # bonus so that, between equal r, a proof using one is preferred
    cost = [float(r.c) - (1e-9 if r.strict else 0.0) for r in rows]
    cols = []
    for r in rows:
        cols.append(([t for t, _ in r.nz], [float(v) for _, v in r.nz]))
    target = [float(v) for v in e[0]]
    status, y, obj = _solve_lp(cost, cols, target, target, [0.0] * n, [inf] * n)
    t1 = time.perf_counter()
    SECONDS["lp"] += t1 - t0
    if status != "optimal":  # infeasibility is a tolerance: let the exact solver confirm
        ROUTES["declined"] += 1
        return None, False
    r_float = float(e[1]) - obj
    if r_float < -MARGIN * (1 + abs(float(e[1]))):
        ROUTES["no_proof"] += 1
        return None, True

    def support_solve():
        support = [i for i in range(n) if y[i] > 1e-12]
        lam = solve_exact([rows[i].a for i in support], e[0])
        if lam is not None and all(v >= 0 for v in lam):
            r = e[1] - sum((v * rows[i].c for v, i in zip(lam, support) if v), ZERO)
            used_strict = any(v > 0 and rows[i].strict for v, i in zip(lam, support))
            if r > 0 or (r == 0 and (not strict or used_strict)):
                ROUTES["support_solve"] += 1
                return tuple((i, v) for v, i in zip(lam, support) if v > 0)
        return None

    def safe_bound():
        return from_dual(rows, e, strict, y) if safe_bound_enabled() else None

    # measured (benchmarks/safe_bound.py): the support solve is cheaper up to dimension
    # SAFE_BOUND_FIRST_ABOVE, the safe bound far cheaper beyond; each is the other's fallback
    steps = (
        (safe_bound, support_solve) if d > SAFE_BOUND_FIRST_ABOVE else (support_solve, safe_bound)
    )
    for step in steps:
        t = time.perf_counter()
        proof = step()
        if step is support_solve:  # from_dual counts its own time
            SECONDS["support_solve"] += time.perf_counter() - t
        if proof is not None:
            return proof, True
    ROUTES["declined"] += 1
    return None, False


def interior_point(rows, d: int):
    """An exact point strictly inside every row (a full-dimensional cell), from the float
    optimum of max t s.t. row(x) >= t, t <= 1; None when the float LP finds no such point by a
    margin or its point fails the exact check (the caller then asks the exact solver)."""
    inf = float("inf")
    n = len(rows)
    if n == 0 or not _finite(rows, None):
        return None
    # variables x_0..x_{d-1}, t; constraints a . x - t >= -c
    cols = columns(rows, d)
    cols.append((list(range(n)), [-1.0] * n))
    cost = [0.0] * d + [-1.0]
    status, v, _ = _solve_lp(
        cost, cols, [-float(r.c) for r in rows], [inf] * n, [-inf] * d + [-inf], [inf] * d + [1.0]
    )
    if status != "optimal" or v[d] <= MARGIN:
        return None
    x = tuple(Q(*float(c).as_integer_ratio()) for c in v[:d])
    for r in rows:
        if not sum((a * x[t] for t, a in r.nz), r.c) > 0:
            return None
    return x


BEYOND_FLOATS = (
    "a number of the problem is beyond the range of floats, which guide the "
    "search and the cells (no exact route was tried in its place)"
)


def unknown_beyond_floats(answer):
    """Decorator of a decide function whose answers are ``answer(verdict, ...)``: a number too
    large for a float (``OverflowError`` in the float guidance) makes the answer unknown, with
    that reason, never an internal error."""
    import functools

    def wrap(decide):
        @functools.wraps(decide)
        def run(*args, **kw):
            try:
                return decide(*args, **kw)
            except OverflowError:
                return answer("unknown", reason=BEYOND_FLOATS)

        return run

    return wrap


def columns(rows, d: int) -> list[tuple[list[int], list[float]]]:
    """The columns t < d of the rows' coefficient matrix: (row indices, float values), from the
    rows' entries that are not 0 (a box's rows are sparse)."""
    cols: list[tuple[list[int], list[float]]] = [([], []) for _ in range(d)]
    for k, r in enumerate(rows):
        for t, v in r.nz:
            cols[t][0].append(k)
            cols[t][1].append(float(v))
    return cols
