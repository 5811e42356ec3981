"""A layer correspondence between two Maxout networks, found by exact interpolation (an
untrusted producer: the kernel's ``check_correspondence`` decides).

The networks a rewrite leaves equal (units rescaled by positive factors, units and pieces
permuted, a unit split as max(a, b, ...) = a + max(0, b - a, ...), a ReLU network written
with another hidden order) are related layer by layer: h^A_l = M_l h^B_l + m_l.  With
(M_{l-1}, m_{l-1}) found, row i of (M_l, m_l) satisfies, as functions of h = h^B_{l-1},

    sum_u M_l[i, u] B_u(h) + m_l[i] = A_i(M_{l-1} h + m_{l-1})

(A_i, B_u the units of layer l).  At n + 7 random integer points h_k (n = N^B_l) these are
linear equations with the matrix X = [1, B(h_k)]; its independent columns (an exact row
reduction; a constant unit, or affine units that combine others, get weight 0) have full
rank, and the exact solution of the normal equations over Q, if it solves every equation,
is the candidate.  Floats guide (an untrusted producer may use them): a float least-squares
solution rounded to short fractions is tried first and kept if it solves the equations
exactly, and a large float residual ends the search at once (unrelated networks cost
milliseconds).  The kernel then checks the candidate on all of Q^d, piece by piece; a pair
that is not related this way (a pruned twin, a network trained apart) is rejected there, and
the caller goes on with the other routes.  Cost: a few exact matrix products per layer.
"""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
from flint import fmpq_mat

from ..kernel.affine import Affine
from ..kernel.correspondence import Correspondence, check_correspondence
from ..kernel.errors import CheckFailed
from ..kernel.maxout import MaxoutNetwork
from ..kernel.rational import Q

POINT_RANGE = 64
"""Interpolation points are integer vectors in [-POINT_RANGE, POINT_RANGE]^n."""
TRIES = 2
"""Point sets tried per layer before giving up."""
EXTRA = 6
"""Points beyond the n + 1 that a map of n units and a constant needs."""
RESIDUAL = 1e-6
"""A float least-squares residual above this (relative) means: no map."""
DENOMINATOR = 10**6
"""The float solution is rounded to fractions with denominators up to this."""
EXACT_UP_TO = 120
"""Systems of at most this many unknowns are also solved exactly when rounding fails."""


class NoCorrespondence(Exception):
    """The networks are not related layer by layer (the reason in the message)."""


def _values(pieces: fmpq_mat, consts: list, sizes: list, H: fmpq_mat) -> list[list]:
    """Per unit (``sizes[u]`` consecutive rows of ``pieces``, the pieces' weights, and
    ``consts`` their biases) and per point (a column of H): the max of the pieces' values."""
    V = pieces * H
    out, r = [], 0
    for s in sizes:
        out.append([max(V[r + j, k] + consts[r + j] for j in range(s)) for k in range(H.ncols())])
        r += s
    return out


def _floats(A: fmpq_mat) -> np.ndarray | None:
    """A in floats, or None where an entry has no finite float (beyond about 1.8e308)."""
    try:
        return np.array([[int(v.p) / int(v.q) for v in A.table()[i]] for i in range(A.nrows())])
    except OverflowError:
        return None


def _fraction(v: float) -> Q:
    """v as the nearest fraction of denominator at most DENOMINATOR (0 below 1/DENOMINATOR)."""
    if abs(v) <= 1 / DENOMINATOR:
        return Q(0)
    f = Fraction(v).limit_denominator(DENOMINATOR)
    return Q(f.numerator, f.denominator)


def _float_guess(X: fmpq_mat, Y: fmpq_mat) -> tuple[fmpq_mat | None, bool]:
    """(Z, unsolvable): Z the float least-squares solution of X Z = Y rounded to fractions of
    denominators up to ``DENOMINATOR``, if it solves the system exactly; unsolvable True when
    the float residual is above ``RESIDUAL`` (relative).  (None, False) where floats cannot
    tell (numbers beyond floats, no convergence)."""
    Xf, Yf = _floats(X), _floats(Y)
    if Xf is None or Yf is None:
        return None, False
    with np.errstate(all="ignore"):
        try:
            Zf = np.linalg.lstsq(Xf, Yf, rcond=None)[0]
        except np.linalg.LinAlgError:
            return None, False
        residual = np.abs(Xf @ Zf - Yf).max(initial=0.0)
    if not (np.isfinite(Zf).all() and np.isfinite(residual)):
        return None, False
    if residual > RESIDUAL * (1 + np.abs(Yf).max(initial=0.0)):
        return None, True
    Z = fmpq_mat(Zf.shape[0], Zf.shape[1], [_fraction(float(v)) for v in Zf.flat])
    return (Z if X * Z == Y else None), False


def _least_squares(X: fmpq_mat, Y: fmpq_mat) -> fmpq_mat | None:
    """Z with X Z = Y exactly, or None if there is none: the float guess, else (small systems
    only) the exact solution over the independent columns of X (a constant unit, or affine
    units that combine others, get weight 0)."""
    Z, unsolvable = _float_guess(X, Y)
    if Z is not None or unsolvable or X.ncols() > EXACT_UP_TO:
        return Z
    R, rank = X.rref()
    pivots = [next(j for j in range(X.ncols()) if R[i, j]) for i in range(rank)]
    Xp = fmpq_mat(X.nrows(), rank, [X[k, j] for k in range(X.nrows()) for j in pivots])
    Zp = (Xp.transpose() * Xp).solve(Xp.transpose() * Y)
    Z = fmpq_mat(X.ncols(), Y.ncols())
    for r, j in enumerate(pivots):
        for i in range(Y.ncols()):
            Z[j, i] = Zp[r, i]
    return Z if X * Z == Y else None


def _stack(units) -> tuple[list, list, list]:
    """(piece weight rows, biases, pieces per unit) of a layer."""
    rows = [list(p.w) for u in units for p in u.pieces]
    return rows, [p.b for u in units for p in u.pieces], [len(u.pieces) for u in units]


def _matrix(rows: list, cols: int) -> fmpq_mat:
    return fmpq_mat(len(rows), cols, [v for r in rows for v in r])


def find_correspondence(a, b, seed: int = 0) -> Correspondence:
    """A correspondence the kernel accepted, or NoCorrespondence with the reason."""
    if not (isinstance(a, MaxoutNetwork) and isinstance(b, MaxoutNetwork)):
        raise NoCorrespondence("both models must be Maxout networks")
    if len(a.layers) != len(b.layers) or a.input_dim != b.input_dim or a.out_dim != b.out_dim:
        raise NoCorrespondence("the networks differ in depth, inputs or outputs")
    rng = random.Random(seed)
    d = a.input_dim
    M = fmpq_mat(d, d, [int(i == j) for i in range(d) for j in range(d)])
    m = fmpq_mat(d, 1)
    maps = []
    for l, (la, lb) in enumerate(zip(a.layers, b.layers)):
        n_prev, n = M.ncols(), lb.width
        wa, ca, sa = _stack(la.units)
        WA = _matrix(wa, M.nrows())
        pulled = WA * M  # the pieces of A as maps of h = h^B_{l-1}
        shift = WA * m
        ca = [c + shift[r, 0] for r, c in enumerate(ca)]
        wb, cb, sb = _stack(lb.units)
        WB = _matrix(wb, n_prev)
        Z = None
        for _ in range(TRIES):
            H = fmpq_mat(
                n_prev,
                n + EXTRA,
                [rng.randint(-POINT_RANGE, POINT_RANGE) for _ in range(n_prev * (n + EXTRA))],
            )
            B = _values(WB, cb, sb, H)  # B[u][k] = B_u(h_k)
            Y = _matrix([list(r) for r in zip(*_values(pulled, ca, sa, H))], la.width)
            Z = _least_squares(
                _matrix([[1] + [B[u][k] for u in range(n)] for k in range(n + EXTRA)], n + 1), Y
            )
            if Z is not None:
                break
        if Z is None:
            raise NoCorrespondence(
                f"layer {l + 1}: no map of B's units gives A's at the points tried"
            )
        M = fmpq_mat(la.width, n, [Z[u + 1, i] for i in range(la.width) for u in range(n)])
        m = fmpq_mat(la.width, 1, [Z[0, i] for i in range(la.width)])
        maps.append(
            Affine(
                tuple(tuple(Q(M[i, u]) for u in range(n)) for i in range(la.width)),
                tuple(Q(m[i, 0]) for i in range(la.width)),
                n,
            )
        )
    cert = Correspondence(tuple(maps))
    try:
        check_correspondence(a, b, cert)
    except CheckFailed as e:
        raise NoCorrespondence(str(e)) from None
    return cert
