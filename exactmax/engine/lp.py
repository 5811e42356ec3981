"""Exact linear programming with z3 over the rationals (QF_LRA, never through floats).

Untrusted: every answer carries a witness (a point, Farkas multipliers, a ray) and the caller
gets it only after the kernel (``kernel/polyhedron.py``) has checked it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import z3

from .. import interruption
from ..kernel.affine import dot
from ..kernel.errors import CheckFailed
from ..kernel.polyhedron import (
    Domain,
    Polyhedron,
    check_empty,
    check_flat,
    check_interior,
    check_member,
    check_upper_bound,
)
from ..kernel.rational import ZERO, Q
from .smt import affordable_check, from_z3, max_bits, rat


def _q(value: Q) -> z3.ArithRef:
    return rat(value)


def _from_model(model: z3.ModelRef, var: z3.ArithRef) -> Q:
    return from_z3(model.eval(var, model_completion=True))


def _lin(coeffs, xs):
    terms = [_q(c) * x for c, x in zip(coeffs, xs) if c]
    return z3.Sum(terms) if terms else z3.RealVal(0)


def find_point(P: Polyhedron) -> tuple[Q, ...] | None:
    """A point of P (kernel-checked), or None if P is empty (then ``find_emptiness`` proves it)."""
    xs = [z3.Real(f"x{i}") for i in range(P.dim)]
    s = z3.SolverFor("QF_LRA")
    for row, c in zip(P.A, P.b):
        s.add(_lin(row, xs) <= _q(c))
    affordable_check(max_bits(P.A, P.b))
    if s.check() != z3.sat:
        return None
    m = s.model()
    x = tuple(_from_model(m, v) for v in xs)
    check_member(P, x)
    return x


def bound_multipliers(
    P: Polyhedron, c: tuple[Q, ...], deadline: float | None = None
) -> tuple[Q, ...] | None:
    """Farkas multipliers y >= 0 with y^T A = c minimising y^T b, so that c.x <= y^T b is the
    tightest bound on P (LP duality); None if c.x is unbounded above on P (or z3 did not
    finish before ``deadline``, a time.monotonic() value)."""
    return DualLP(P).multipliers(c, deadline)


class DualLP:
    """The dual LP of bounds over one polyhedron, its z3 terms built once for many c."""

    def __init__(self, P: Polyhedron):
        self.P = P
        self.ys = [z3.Real(f"y{i}") for i in range(len(P.b))]
        self.columns = [
            _lin([P.A[i][j] for i in range(len(self.ys))], self.ys) for j in range(P.dim)
        ]
        self.objective = _lin(P.b, self.ys)
        self.signs = [y >= 0 for y in self.ys]
        self.bits = max_bits(P.A, P.b)

    def multipliers(self, c: tuple[Q, ...], deadline: float | None = None):
        """As ``bound_multipliers(P, c, deadline)``."""
        interruption.check()
        s = z3.Optimize()
        if deadline is not None:
            s.set("timeout", max(1, int((deadline - time.monotonic()) * 1000)))
        s.add(self.signs)
        s.add([col == _q(v) for col, v in zip(self.columns, c)])
        s.minimize(self.objective)
        affordable_check(max(self.bits, max_bits(c)))
        if s.check() != z3.sat:
            return None
        m = s.model()
        return tuple(_from_model(m, y) for y in self.ys)


def find_emptiness(P: Polyhedron) -> tuple[Q, ...] | None:
    """Farkas multipliers proving P empty (kernel-checked), or None."""
    ys = [z3.Real(f"y{i}") for i in range(len(P.b))]
    s = z3.SolverFor("QF_LRA")
    for y in ys:
        s.add(y >= 0)
    for j in range(P.dim):
        s.add(_lin([P.A[i][j] for i in range(len(ys))], ys) == 0)
    s.add(_lin(P.b, ys) == -1)
    affordable_check(max_bits(P.A, P.b))
    if s.check() != z3.sat:
        return None
    m = s.model()
    y = tuple(_from_model(m, v) for v in ys)
    check_empty(P, y)
    return y


@dataclass(frozen=True, slots=True)
class DomainReport:
    """What is known, with checked witnesses, about a domain."""

    empty: bool
    bounded: bool
    point: tuple[Q, ...] | None  # a point of the domain (when non-empty)
    lower: tuple[Q, ...] | None  # the tightest box around it (when bounded)
    upper: tuple[Q, ...] | None
    unbounded_direction: tuple[Q, ...] | None = None
    multipliers: tuple | None = None  # per coordinate (y_upper, y_lower) of the box bounds


def analyze_domain(dom: Domain) -> DomainReport:
    """Decide exactly whether ``dom`` is empty and whether it is bounded; when it is bounded,
    give its tightest enclosing box, each bound carried by Farkas multipliers checked in the
    kernel (so the box is sound, and tight because the LP optimum is attained)."""
    P = dom.as_polyhedron()
    x = find_point(P)
    if x is None:
        y = find_emptiness(P)
        if y is None:  # pragma: no cover - z3 contradicting itself
            raise RuntimeError("z3 found neither a point nor a proof of emptiness")
        return DomainReport(True, True, None, None, None)
    lower: list = []
    upper: list = []
    ys: list = []
    for i in range(P.dim):
        pair = []
        for sign, out in ((1, upper), (-1, lower)):
            c = tuple(Q(sign) if j == i else ZERO for j in range(P.dim))
            y = bound_multipliers(P, c)
            if y is None:
                r = _ray(P, c)
                check_unbounded(P, x, r)
                return DomainReport(False, False, x, None, None, r)
            out.append(sign * check_upper_bound(P, c, y))
            pair.append(y)
        ys.append(tuple(pair))
    return DomainReport(False, True, x, tuple(lower), tuple(upper), None, tuple(ys))


def _ray(P: Polyhedron, c: tuple[Q, ...]) -> tuple[Q, ...]:
    """r with A r <= 0 and c.r = 1 (exists when no Farkas bound in direction c exists)."""
    rs = [z3.Real(f"r{i}") for i in range(P.dim)]
    s = z3.SolverFor("QF_LRA")
    for row in P.A:
        s.add(_lin(row, rs) <= 0)
    s.add(_lin(c, rs) == 1)
    affordable_check(max_bits(P.A, c))
    if s.check() != z3.sat:  # pragma: no cover - would contradict Farkas' lemma
        raise RuntimeError("z3 found neither a bound nor a ray")
    m = s.model()
    return tuple(_from_model(m, v) for v in rs)


def affine_range_over(P: Polyhedron, w, b) -> tuple[Q, Q]:
    """The exact range [min, max] of w . x + b over the bounded non-empty polyhedron P, each end
    carried by Farkas multipliers that the kernel checks (so the range is sound) and attained
    by LP optimality (so it is tight)."""
    return affine_ranges_over(P, [(w, b)])[0]


def affine_ranges_over(P: Polyhedron, maps) -> list[tuple[Q, Q]]:
    """``affine_range_over`` for every (w, b) in ``maps``, with one dual LP."""
    lp = DualLP(P)
    return [_range(P, lp, w, b) for w, b in maps]


def _range(P: Polyhedron, lp: DualLP, w, b) -> tuple[Q, Q]:
    ends = []
    for sign in (1, -1):
        c = tuple(sign * v for v in w)
        y = lp.multipliers(c)
        if y is None:
            raise ValueError("affine_range_over: the polyhedron is unbounded in this direction")
        ends.append(sign * check_upper_bound(P, c, y) + b)
    return ends[1], ends[0]


def interior_point(P: Polyhedron) -> tuple[Q, ...] | None:
    """A point strictly inside every constraint of P (kernel-checked), or None when P has
    none (P is empty or lower-dimensional)."""
    xs = [z3.Real(f"x{i}") for i in range(P.dim)]
    t = z3.Real("t")
    o = z3.Optimize()
    for row, c in zip(P.A, P.b):
        o.add(_lin(row, xs) + t <= _q(c) if any(row) else z3.RealVal(0) <= _q(c))
    o.add(t <= 1)
    o.maximize(t)
    affordable_check(max_bits(P.A, P.b))
    if o.check() != z3.sat or _from_model(o.model(), t) <= 0:
        return None
    x = tuple(_from_model(o.model(), v) for v in xs)
    check_interior(P, x)
    return x


def flat_multipliers(P: Polyhedron) -> tuple[Q, ...] | None:
    """y >= 0 with weight 1 on the non-zero rows, y^T A = 0, y^T b = 0 (kernel-checked): a
    proof that P has no interior point; None if there is none (P is full-dimensional)."""
    ys = [z3.Real(f"y{i}") for i in range(len(P.b))]
    s = z3.SolverFor("QF_LRA")
    s.add([y >= 0 for y in ys])
    s.add(z3.Sum([y for y, row in zip(ys, P.A) if any(row)] + [z3.RealVal(0)]) == 1)
    for j in range(P.dim):
        s.add(_lin([P.A[i][j] for i in range(len(ys))], ys) == 0)
    s.add(_lin(P.b, ys) == 0)
    affordable_check(max_bits(P.A, P.b))
    if s.check() != z3.sat:
        return None
    y = tuple(_from_model(s.model(), v) for v in ys)
    check_flat(P, y)
    return y


def check_unbounded(P: Polyhedron, x0, r) -> None:
    """Accept iff x0 is in P, r != 0 and A r <= 0: P contains the half-line x0 + t r, t >= 0.
    (Outside the kernel: an unbounded domain is only ever a reason to refuse or to say
    "unknown", never part of a proof.)"""
    check_member(P, x0)
    if len(r) != P.dim or not any(r):
        raise CheckFailed("unbounded: the ray is zero or has the wrong length")
    for i, row in enumerate(P.A):
        if dot(row, r) > 0:
            raise CheckFailed(f"unbounded: the ray leaves constraint {i}")
