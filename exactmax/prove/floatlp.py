"""Floating-point LPs (HiGHS) that guide the search for exact Farkas proofs and cell points.

Untrusted, and never trusted by what it returns: a float LP only proposes.

- ``farkas``: maximise r = c_e - sum_i y_i c_i over y >= 0 with sum_i y_i a_i = a_e (the
  Farkas system of ``kernel/certificate.py``: e - sum y_i row_i = r).  The rows the float
  optimum uses (its support S) are then solved *exactly*, sum_{i in S} y_i a_i = a_e by Gaussian
  elimination over Q, and the exact y is returned only if it is >= 0 and its exact r shows the
  claim.  This is the usual exact reconstruction from an optimal float basis; where the float
  basis is wrong or degenerate, nothing is returned and the caller asks the exact solver (z3).
- ``interior_point``: maximise t subject to row(x) >= t; the float x is made exact (each
  float is a dyadic rational) and returned only if it satisfies every row strictly, checked
  exactly.

An answer "no proof" from the float LP is only reported when it is clear by a margin (the
LP's optimum r is below -``MARGIN`` or the system is infeasible by HiGHS's own tolerance and
the caller accepts that risk: a missed proof costs a split, never soundness).
"""

from __future__ import annotations

import os
import sys

import numpy as np

from ..kernel.rational import Q, ZERO

MARGIN = 1e-7
"""Float optima within this of the decision boundary are left to the exact solver."""

_HIGHS = None


def available() -> bool:
    """Is HiGHS importable (``highspy``)?"""
    try:
        import highspy  # noqa: F401
    except ImportError:
        return False
    return True


def _solver():
    """One HiGHS instance per process, silent (HiGHS prints a banner on its first
    construction, to the C-level standard output, which must stay clean for --json)."""
    global _HIGHS
    if _HIGHS is None:
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
        _HIGHS = h
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
    if st in (highspy.HighsModelStatus.kUnbounded,
              highspy.HighsModelStatus.kUnboundedOrInfeasible):
        return "unbounded", None, None
    return "other", None, None


def _finite(rows, e) -> bool:
    """Every number of the rows (and of e) is a finite float of moderate size: otherwise the
    float LP says nothing and the exact solver is asked."""
    nums = [v for r in rows for v in r.a] + [r.c for r in rows]
    if e is not None:
        nums += list(e[0]) + [e[1]]
    try:
        return all(abs(float(v)) < 1e12 for v in nums)
    except OverflowError:
        return False


def farkas(rows, e, strict: bool, solve_exact):
    """(proof or None, decided): an exact Farkas proof that e >= 0 (> 0 if strict) on the cell
    of ``rows``, reconstructed from the float optimum's support by ``solve_exact(vectors,
    target)`` (exact Gaussian elimination); decided is True when the float LP shows by a
    margin that there is none, False when the exact solver should be asked."""
    d = len(e[0])
    n = len(rows)
    if n == 0 or not _finite(rows, e):
        return None, False
    inf = float("inf")
    # maximise r = c_e - sum y_i c_i  <=>  minimise sum y_i c_i; strict rows get a tiny
    # bonus so that, between equal r, a proof using one is preferred
    cost = [float(r.c) - (1e-9 if r.strict else 0.0) for r in rows]
    cols = []
    for r in rows:
        idx = [t for t in range(d) if r.a[t]]
        cols.append((idx, [float(r.a[t]) for t in idx]))
    target = [float(v) for v in e[0]]
    status, y, obj = _solve_lp(cost, cols, target, target, [0.0] * n, [inf] * n)
    if status == "infeasible":
        return None, False      # let the exact solver confirm: infeasibility is a tolerance
    if status != "optimal":
        return None, False
    r_float = float(e[1]) - obj
    if r_float < -MARGIN * (1 + abs(float(e[1]))):
        return None, True
    support = [i for i in range(n) if y[i] > 1e-12]
    lam = solve_exact([rows[i].a for i in support], e[0])
    if lam is None or any(v < 0 for v in lam):
        return None, False
    r = e[1] - sum((v * rows[i].c for v, i in zip(lam, support) if v), ZERO)
    used_strict = any(v > 0 and rows[i].strict for v, i in zip(lam, support))
    if r > 0 or (r == 0 and (not strict or used_strict)):
        return tuple((i, v) for v, i in zip(lam, support) if v > 0), True
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
    cols = []
    for t in range(d):
        idx = [k for k in range(n) if rows[k].a[t]]
        cols.append((idx, [float(rows[k].a[t]) for k in idx]))
    cols.append((list(range(n)), [-1.0] * n))
    cost = [0.0] * d + [-1.0]
    status, v, _ = _solve_lp(cost, cols, [-float(r.c) for r in rows], [inf] * n,
                             [-inf] * d + [-inf], [inf] * d + [1.0])
    if status != "optimal" or v[d] <= MARGIN:
        return None
    x = tuple(Q(*float(c).as_integer_ratio()) for c in v[:d])
    for r in rows:
        if not sum((a * xi for a, xi in zip(r.a, x) if a), r.c) > 0:
            return None
    return x


BEYOND_FLOATS = ("a number of the problem is beyond the range of floats, which guide the "
                 "search and the cells (no exact route was tried in its place)")


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
