"""Domains: boxes and polyhedra P = {x in Q^d : A x <= b}, and exact checks of producers' claims
about them (LP solver, z3) from a witness: a point, or Farkas y >= 0 (y^T A x <= y^T b on P)."""

from dataclasses import dataclass

from .affine import Matrix, Row, Vector, check_matrix, dot, row_of
from .errors import CheckFailed
from .rational import ZERO, Q


@dataclass(frozen=True, slots=True)
class Polyhedron:  # P = {x in Q^dim : A x <= b}, one row of A and one entry of b per constraint
    A: Matrix
    b: Vector
    dim: int

    def contains(self, x: Vector) -> bool:
        if len(x) != self.dim:
            raise ValueError(f"a point of length {len(x)} in a domain of dimension {self.dim}")
        return all(dot(row, x) <= c for row, c in zip(self.A, self.b))

    def as_polyhedron(self) -> "Polyhedron":
        return self


@dataclass(frozen=True, slots=True)
class Box:  # {x : lower <= x <= upper}
    lower: Vector
    upper: Vector

    @property
    def dim(self) -> int:
        return len(self.lower)

    def contains(self, x: Vector) -> bool:
        if len(x) != self.dim or len(self.upper) != self.dim:
            raise ValueError(f"a point of length {len(x)} in a box of dimension {self.dim}")
        return all(lo <= v <= hi for lo, v, hi in zip(self.lower, x, self.upper))

    def is_empty(self) -> bool:
        return any(lo > hi for lo, hi in zip(self.lower, self.upper))

    def as_polyhedron(self) -> Polyhedron:  # rows x_i <= upper_i, then -x_i <= -lower_i, i < dim
        d = self.dim
        if len(self.upper) != d:
            raise ValueError(f"a box with {d} lower and {len(self.upper)} upper bounds")
        rows = [row_of(d, [(i, Q(s))]) for s in (1, -1) for i in range(d)]  # sparse, d >= 16
        return Polyhedron(tuple(rows), tuple(self.upper) + tuple(-v for v in self.lower), d)


Domain = Box | Polyhedron


def check_domain(domain: Domain, dim: int) -> None:
    """Accept iff the domain is a box or polyhedron of dimension ``dim``, every bound and row of
    that length, one right-hand side per row, every entry an exact rational."""
    if isinstance(domain, Polyhedron) and domain.dim == dim:
        W, b = domain.A, domain.b
    elif isinstance(domain, Box):
        W, b = (domain.lower, domain.upper), None
    else:
        raise CheckFailed(f"the domain is not a box or polyhedron of dimension {dim}")
    try:
        check_matrix(W, len(W), dim, "its rows", b)
    except (TypeError, ValueError) as e:
        raise CheckFailed(f"the domain of dimension {dim}: {e}") from None


def _combination(P: Polyhedron, y: Vector, what: str) -> tuple[Vector, Q]:
    """(y^T A, y^T b) after checking y >= 0 has one entry per constraint."""
    if len(y) != len(P.b) or any(v < 0 for v in y):
        raise CheckFailed(f"{what}: not one multiplier y_i >= 0 per constraint ({len(P.b)})")
    lin = tuple(sum((y[i] * P.A[i][j] for i in range(len(y)) if y[i]), ZERO) for j in range(P.dim))
    return lin, dot(y, P.b)


def check_member(P: Polyhedron, x: Vector) -> None:  # accept iff x is in P (so P is non-empty)
    if len(x) != P.dim or not P.contains(x):
        raise CheckFailed(f"member: the point is not in the domain of dimension {P.dim}")


def check_interior(P: Polyhedron, x: Vector) -> None:
    """Accept iff x in P and A_i x < b_i on each row A_i != 0: x is interior, P full-dimensional."""
    check_member(P, x)
    if any(any(row) and dot(row, x) == c for row, c in zip(P.A, P.b)):
        raise CheckFailed("interior: the point lies on a constraint")


def check_flat(P: Polyhedron, y: Vector) -> None:
    """Accept iff y >= 0, y^T A = 0, y^T b = 0 and y_i > 0 on a row A_i != 0: then sum_i y_i
    (b_i - A_i x) = 0, every term >= 0 on P, so A_i x = b_i on P, and P has no interior point."""
    lin, const = _combination(P, y, "flat")
    if any(lin) or const != 0 or not any(v and any(row) for v, row in zip(y, P.A)):
        raise CheckFailed("flat: y^T A or y^T b is not zero, or y has no weight on a non-zero row")


def check_empty(P: Polyhedron, y: Vector) -> None:
    """Accept iff y >= 0, y^T A = 0 and y^T b < 0: P is empty (0 = y^T A x <= y^T b < 0)."""
    lin, const = _combination(P, y, "empty")
    if any(lin) or not const < 0:
        raise CheckFailed(f"empty: y^T A is not zero, or y^T b = {const} is not negative")


def check_upper_bound(P: Polyhedron, c: Row, y: Vector) -> Q:
    """Return beta = y^T b after checking y >= 0 and y^T A = c: c . x <= beta on P."""
    lin, const = _combination(P, y, "bound")
    if tuple(lin) != tuple(c):
        raise CheckFailed("bound: y^T A differs from the bounded direction")
    return const


def check_box_contains(P: Polyhedron, lower: Vector, upper: Vector, proofs, what: str) -> None:
    """Accept iff proofs[i] = (y_up, y_low) show lower_i <= x_i <= upper_i on P: box contains P."""
    if not len(proofs) == len(lower) == len(upper) == P.dim:
        raise CheckFailed(f"{what}: one pair of Farkas bounds per coordinate is needed")
    for i, (y_up, y_low) in enumerate(proofs):
        e = tuple(Q(int(j == i)) for j in range(P.dim))
        up = check_upper_bound(P, e, y_up)
        if up > upper[i] or check_upper_bound(P, tuple(-v for v in e), y_low) > -lower[i]:
            raise CheckFailed(f"{what}: the box does not contain the domain in coordinate {i}")
