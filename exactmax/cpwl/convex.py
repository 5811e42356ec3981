"""The convex Lipschitz corollary of Theorem 4.2 (construction.md §4), exactly.

For a convex f on a box B in R^d and grid points p (spacing at most h in every coordinate,
both ends of every side included), the tangent planes t_p(x) = f(p) + grad f(p) . (x - p)
give the max-affine g = max_p t_p, one Maxout unit of rank #grid points, with

    0 <= f - g <= L sqrt(d) h   on B,   L = max_B |grad f|_2,

since every x has a grid point p with |x - p| <= sqrt(d) h / 2 and
f(x) - t_p(x) <= |f(x) - f(p)| + |grad f(p)| |x - p| <= 2 L |x - p|.

Exactness: f must be a polynomial with rational coefficients (so f(p) and grad f(p) are
rational at rational p), and its convexity on B is *checked*, not assumed: a quadratic by the
exact LDL^T of its constant Hessian (any d); a 1-D polynomial by the exact sign of f'' on the
interval (real roots isolated by sympy, signs evaluated in Q).  Anything else is refused.
Then L is exact too: L^2 = max over the corners of |H x + c|^2 for a quadratic (|grad f|^2 is
convex), max(|f'(lo)|, |f'(hi)|) in 1-D (f' is monotone); the bound L sqrt(d) h is exact when
d L^2 is a rational square and otherwise rounded *up* to a rational (said so).

The true maximum error (d <= 2): on the cell where t_p is the max, f - t_p is convex, so its
maximum over the cell (a polytope, computed exactly by clipping) is at a vertex; the largest
vertex value over all cells is max_B (f - g), exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from math import isqrt

from ..kernel.affine import Vector
from ..kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from ..kernel.polyhedron import Box
from ..kernel.rational import Q, ZERO


class NotExact(ValueError):
    """The expression is outside what exactmax approximates exactly; the message says why."""


Term = tuple[tuple[int, ...], Q]


@dataclass(frozen=True, slots=True)
class Polynomial:
    """sum_terms c * prod_i x_i^e_i over Q, in the variables ``names``."""

    names: tuple[str, ...]
    terms: tuple[Term, ...]

    @property
    def degree(self) -> int:
        return max((sum(e) for e, _ in self.terms), default=0)

    def evaluate(self, x: Vector) -> Q:
        s = ZERO
        for e, c in self.terms:
            v = c
            for xi, k in zip(x, e):
                if k:
                    v *= xi ** k
            s += v
        return s

    def derivative(self, i: int) -> "Polynomial":
        out = {}
        for e, c in self.terms:
            if e[i]:
                f = list(e)
                f[i] -= 1
                out[tuple(f)] = out.get(tuple(f), ZERO) + c * e[i]
        return Polynomial(self.names, tuple((e, c) for e, c in out.items() if c))

    def gradient(self) -> tuple["Polynomial", ...]:
        return tuple(self.derivative(i) for i in range(len(self.names)))


def parse_polynomial(text: str, names: tuple[str, ...] | None = None) -> Polynomial:
    """The polynomial written by ``text`` (sympy syntax, ^ as power, decimals read exactly:
    0.1 is 1/10).  Variables: ``names``, else the expression's symbols sorted by name.
    Raises NotExact for anything that is not a polynomial with rational coefficients."""
    import sympy
    from sympy.parsing.sympy_parser import (convert_xor, parse_expr, rationalize,
                                            standard_transformations)
    try:
        local = {n: sympy.Symbol(n) for n in (names or ())}
        expr = parse_expr(text, local_dict=local,
                          transformations=standard_transformations + (rationalize, convert_xor))
    except Exception as e:  # sympy raises many kinds on bad text
        raise NotExact(f"cannot read the expression {text!r}: {type(e).__name__}: {e}") \
            from None
    if not isinstance(expr, sympy.Expr):
        raise NotExact(f"{text!r} is not an expression of real numbers")
    syms = sorted(expr.free_symbols, key=lambda s: s.name)
    if names is None:
        names = tuple(s.name for s in syms)
    else:
        extra = [s.name for s in syms if s.name not in names]
        if extra:
            raise NotExact(f"the expression uses {', '.join(extra)}, not among the variables "
                           f"{', '.join(names)}")
    if not names:
        raise NotExact(f"{text!r} has no variables; give --vars")
    gens = [sympy.Symbol(n) for n in names]
    if not expr.is_polynomial(*gens):
        raise NotExact(f"{text!r} is not a polynomial in {', '.join(names)}: exactmax needs "
                       "exact rational values and gradients at rational grid points, and a "
                       "checkable convexity (transcendental or rational functions are refused)")
    poly = sympy.Poly(expr, *gens)
    if poly.domain not in (sympy.ZZ, sympy.QQ):
        raise NotExact(f"{text!r} has coefficients in {poly.domain}, not rationals (an "
                       "irrational coefficient such as sqrt(2) or pi has no exact value here)")
    terms = tuple((tuple(int(k) for k in e), Q(int(sympy.fraction(c)[0]),
                                               int(sympy.fraction(c)[1])))
                  for e, c in poly.terms() if c != 0)
    return Polynomial(tuple(names), terms)


def hessian(f: Polynomial) -> tuple[tuple[Q, ...], ...]:
    """The constant Hessian of a polynomial of degree <= 2."""
    g = f.gradient()
    zero = (ZERO,) * len(f.names)
    return tuple(tuple(gi.derivative(j).evaluate(zero) for j in range(len(f.names)))
                 for gi in g)


def is_psd(H) -> bool:
    """Exact: H (symmetric, rational) is positive semidefinite, by symmetric Gaussian
    elimination (a zero pivot needs a zero row; a negative pivot refutes)."""
    M = [list(r) for r in H]
    n = len(M)
    for i in range(n):
        if M[i][i] < 0:
            return False
        if M[i][i] == 0:
            if any(M[i][j] != 0 for j in range(i + 1, n)):
                return False
            continue
        for r in range(i + 1, n):
            f = M[r][i] / M[i][i]
            for c in range(i, n):
                M[r][c] -= f * M[i][c]
    return True


def check_convex(f: Polynomial, box: Box) -> str:
    """Return how convexity on the box was established, or raise NotExact."""
    d = len(f.names)
    if f.degree <= 2:
        if not is_psd(hessian(f)):
            raise NotExact("not convex: the Hessian (constant) is not positive semidefinite")
        return "quadratic: constant Hessian positive semidefinite (exact)"
    if d == 1:
        return _check_convex_1d(f, box.lower[0], box.upper[0])
    raise NotExact(f"convexity of a degree-{f.degree} polynomial in {d} variables cannot be "
                   "checked exactly here (quadratics in any dimension, or 1-D polynomials)")


def _check_convex_1d(f: Polynomial, lo: Q, hi: Q) -> str:
    """f'' >= 0 on [lo, hi], exactly.  Write f'' = c prod_i g_i^{m_i} (square-free
    factorisation); the even powers are >= 0, so f'' >= 0 on [lo, hi] iff
    h = c prod_{m_i odd} g_i is >= 0 on (lo, hi).  h is square-free, so it keeps its sign on
    (lo, hi) iff it has no root strictly inside (Sturm count, sympy's count_roots), and then
    its sign is that of h((lo + hi) / 2) != 0."""
    import sympy
    x = sympy.Symbol("x")
    f2 = f.derivative(0).derivative(0)
    g = sympy.Poly(sum((sympy.Rational(int(c.p), int(c.q)) * x ** e[0] for e, c in f2.terms),
                       sympy.Integer(0)), x, domain="QQ")
    coeff, factors = g.sqf_list()
    h = sympy.Poly(coeff, x, domain="QQ")
    for fac, mult in factors:
        if mult % 2:
            h = h * fac
    a, b = sympy.Rational(int(lo.p), int(lo.q)), sympy.Rational(int(hi.p), int(hi.q))
    inside = h.count_roots(a, b) - (h.eval(a) == 0) - (h.eval(b) == 0)
    mid = h.eval((a + b) / 2)
    if inside > 0 or mid < 0:
        raise NotExact("not convex on the interval: f'' changes sign or is negative inside it")
    return "1-D: f'' >= 0 on the interval (exact square-free factorisation and Sturm count)"


# ------------------------------------------------------------------------ the approximation

def grid_axis(lo: Q, hi: Q, h: Q) -> list[Q]:
    """lo, lo + h, lo + 2h, ... below hi, then hi: spacing at most h, both ends included."""
    pts, t = [], lo
    while t < hi:
        pts.append(t)
        t += h
    pts.append(hi)
    return pts


def grid_size(box: Box, h: Q) -> int:
    """The number of grid points, without building them."""
    n = 1
    for lo, hi in zip(box.lower, box.upper):
        steps = (hi - lo) / h
        k = int(steps.p // steps.q)
        n *= k + (1 if k * h == hi - lo else 2)
    return n


def tangent_pieces(f: Polynomial, points) -> tuple[Piece, ...]:
    """t_p(x) = grad f(p) . x + (f(p) - grad f(p) . p) for every grid point p (repeats
    removed: a repeated affine map does not change the max)."""
    grad = f.gradient()
    seen, out = set(), []
    for p in points:
        w = tuple(g.evaluate(p) for g in grad)
        b = f.evaluate(p) - sum((wi * pi for wi, pi in zip(w, p)), ZERO)
        if (w, b) not in seen:
            seen.add((w, b))
            out.append(Piece(w, b))
    return tuple(out)


def lipschitz_squared(f: Polynomial, box: Box) -> Q:
    """L^2 = max_B |grad f|^2, exactly, for the convex f that ``check_convex`` accepts: for a
    quadratic |grad f|^2 = |H x + c|^2 is convex in x, so its max is at a corner; in 1-D f'
    is monotone, so |f'| is largest at an end."""
    grad = f.gradient()
    corners = product(*zip(box.lower, box.upper))
    return max(sum((g.evaluate(c) ** 2 for g in grad), ZERO) for c in corners)


def sqrt_upper(r: Q, digits: int = 6) -> tuple[Q, bool]:
    """(s, exact): s = sqrt(r) when r is the square of a rational, else a rational s with
    sqrt(r) < s <= sqrt(r) + 10^-digits * (1 + sqrt(r)) (rounded up, never down)."""
    p, q = int(r.p), int(r.q)
    if r < 0:
        raise ValueError("square root of a negative number")
    sp, sq = isqrt(p), isqrt(q)
    if sp * sp == p and sq * sq == q:
        return Q(sp, sq), True
    scale = 10 ** digits
    # sqrt(p/q) = sqrt(p q) / q; round sqrt(p q scale^2) up
    n = p * q * scale * scale
    s = isqrt(n)
    if s * s < n:
        s += 1
    return Q(s, q * scale), False


def max_error(f: Polynomial, pieces, box: Box) -> tuple[Q, Vector] | None:
    """(max_B (f - g), a point where it is attained), exactly, for d <= 2 (None beyond):
    f - t_p is convex on the cell where t_p is the max, so the maximum is at a vertex of a
    cell; cells are clipped exactly from the box."""
    d = len(f.names)
    best = None
    if d == 1:
        lo, hi = box.lower[0], box.upper[0]
        for p in pieces:
            a, b = lo, hi
            for o in pieces:   # t_p >= t_o:  (w_p - w_o) x >= b_o - b_p
                dw, db = p.w[0] - o.w[0], o.b - p.b
                if dw > 0:
                    a = max(a, db / dw)
                elif dw < 0:
                    b = min(b, db / dw)
                elif db > 0:
                    a, b = hi, lo   # o lies above p everywhere: empty cell
            if a > b:
                continue
            for v in (a, b):
                e = f.evaluate((v,)) - (p.w[0] * v + p.b)
                if best is None or e > best[0]:
                    best = (e, (v,))
        return best
    if d == 2:
        from ..kernel.certificate import Row
        from ..regions.geometry import polygon
        for p in pieces:
            rows = [Row(tuple(a - c for a, c in zip(p.w, o.w)), p.b - o.b)
                    for o in pieces if o is not p]
            for v in polygon(rows, box):
                e = f.evaluate(v) - (p.w[0] * v[0] + p.w[1] * v[1] + p.b)
                if best is None or e > best[0]:
                    best = (e, v)
        return best
    return None


@dataclass(frozen=True, slots=True)
class ConvexApproximation:
    net: MaxoutNetwork
    grid_points: int
    pieces: int
    convexity: str
    lipschitz_squared: Q
    bound: Q                      # >= L sqrt(d) h
    bound_exact: bool             # bound == L sqrt(d) h
    max_error: tuple[Q, Vector] | None


def approximate_convex(f: Polynomial, box: Box, h: Q, max_points: int = 10000) \
        -> ConvexApproximation:
    """The tangent-plane network of f on the box with spacing h, its bound and (d <= 2) its
    exact maximum error.  Raises NotExact (not convex, or not checkable) or ValueError (too
    many grid points)."""
    d = len(f.names)
    if box.dim != d:
        raise ValueError(f"the box has {box.dim} sides, the expression {d} variables "
                         f"({', '.join(f.names)})")
    if not h > 0:
        raise ValueError(f"the spacing h must be positive, got {h}")
    n = grid_size(box, h)
    if n > max_points:
        raise ValueError(f"spacing {h} gives {n} grid points, more than the limit {max_points}")
    convexity = check_convex(f, box)
    points = list(product(*(grid_axis(lo, hi, h) for lo, hi in zip(box.lower, box.upper))))
    pieces = tangent_pieces(f, points)
    net = MaxoutNetwork(d, (Layer((Unit(pieces),)),), None, box,
                        {"description": f"tangent planes of a convex polynomial at "
                                        f"{len(points)} grid points, spacing {h}"})
    L2 = lipschitz_squared(f, box)
    root, exact = sqrt_upper(L2 * d)
    return ConvexApproximation(net, len(points), len(pieces), convexity, L2, root * h, exact,
                               max_error(f, pieces, box))
