"""The convex Lipschitz corollary of Theorem 4.2 (docs/notes/construction.md §4), exactly.

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

import re
from dataclasses import dataclass
from itertools import product
from math import isqrt

from ..io.nesting import collection_paused
from ..kernel.affine import Vector
from ..kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from ..kernel.polyhedron import Box
from ..kernel.rational import ONE, ZERO, Q


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
                    v *= xi**k
            s += v
        return s

    def derivative(self, i: int) -> Polynomial:
        out = {}
        for e, c in self.terms:
            if e[i]:
                f = list(e)
                f[i] -= 1
                out[tuple(f)] = out.get(tuple(f), ZERO) + c * e[i]
        return Polynomial(self.names, tuple((e, c) for e, c in out.items() if c))

    def gradient(self) -> tuple[Polynomial, ...]:
        return tuple(self.derivative(i) for i in range(len(self.names)))


MAX_TEXT = 10_000
"""Longest EXPR accepted, in characters."""

MAX_DEGREE = 64
"""Largest total degree of EXPR and of every part of it (x^100 / x^50 is refused too)."""

MAX_TERMS = 10_000
"""Most monomials EXPR or a part of it may expand to."""

MAX_WORK = 1_000_000
"""Most monomial products one multiplication of the expansion may take."""

MAX_BITS = 100_000
"""Largest size in bits of a constant made by a power (2^100000 is fine, 2^100001 is not)."""

MAX_NESTING = 100
"""Deepest nesting of parentheses, signs and powers."""

FUNCTIONS = ("sqrt",)
"""The only function EXPR may call, and only on a constant (sqrt(9/4) = 3/2)."""

CONSTANTS = {
    "pi": "pi is irrational",
    "E": "E (Euler's number) is irrational",
    "I": "I (the imaginary unit) is not real",
    "oo": "oo (infinity) is not a number",
    "zoo": "zoo (complex infinity) is not a number",
    "nan": "nan is not a number",
}
"""Names sympy gives a special value: refused (unless declared with --vars)."""

_TOKEN = re.compile(
    r"(?P<space>[ \t\r\n]+)"
    r"|(?P<number>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<name>[^\W\d]\w*)"
    r"|(?P<op>\*\*|[-+*/^()])"
)

ALLOWED = "numbers, the variables, + - * / ^ ** ( ) and sqrt of a constant"

Poly = dict  # {exponents: coefficient}, no zero coefficients


def _tokens(text: str) -> list[tuple[str, str, int]]:
    """(kind, text, column) for every token; NotExact naming the first character outside
    the whitelist.  Columns count from 1."""
    out, i = [], 0
    while i < len(text):
        m = _TOKEN.match(text, i)
        if m is None:
            raise NotExact(
                f"column {i + 1}: {text[i]!r} is not allowed (EXPR is a polynomial "
                f"written with {ALLOWED})"
            )
        if m.lastgroup != "space":
            out.append((m.lastgroup, m.group(), i + 1))
        i = m.end()
    out.append(("end", "", len(text) + 1))
    return out


class _Parser:
    """Recursive descent over the tokens, with Python's precedence (-x^2 = -(x^2), powers
    right-associative, 2^-1 = 1/2); values are exact polynomials, so nothing is evaluated
    but arithmetic on rationals, every step within the limits above."""

    def __init__(self, toks, names: tuple[str, ...]):
        self.toks, self.i, self.depth = toks, 0, 0
        self.names, self.index = names, {n: k for k, n in enumerate(names)}
        self.zero = (0,) * len(names)

    # --- tokens -------------------------------------------------------------------------
    def peek(self):
        return self.toks[self.i]

    def take(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def fail(self, tok, expected: str):
        got = "the end" if tok[0] == "end" else repr(tok[1])
        hint = (
            " (write *, e.g. 2*x, for a product)"
            if tok[0] in ("name", "number") or tok[1] == "("
            else ""
        )
        return NotExact(
            f"cannot read the expression at column {tok[2]}: expected {expected}, got {got}{hint}"
        )

    # --- polynomials ----------------------------------------------------------------------
    def const(self, c: Q) -> Poly:
        return {self.zero: c} if c else {}

    @staticmethod
    def degree(a: Poly) -> int:
        return max((sum(e) for e in a), default=0)

    def constant_value(self, a: Poly):
        if any(e != self.zero for e in a):
            return None
        return a.get(self.zero, ZERO)

    def add(self, a: Poly, b: Poly, sign: int) -> Poly:
        out = dict(a)
        for e, c in b.items():
            v = out.get(e, ZERO) + (c if sign > 0 else -c)
            if v:
                out[e] = v
            else:
                out.pop(e, None)
        return out

    def mul(self, a: Poly, b: Poly, col: int) -> Poly:
        d = self.degree(a) + self.degree(b) if a and b else 0
        if d > MAX_DEGREE:
            raise NotExact(
                f"column {col}: degree {d}, above the limit {MAX_DEGREE} (the total "
                "degree of EXPR and of every part of it)"
            )
        if len(a) * len(b) > MAX_WORK:
            raise NotExact(
                f"column {col}: the expansion needs {len(a) * len(b)} products of "
                f"monomials, more than the limit {MAX_WORK}"
            )
        out = {}
        for ea, ca in a.items():
            for eb, cb in b.items():
                e = tuple(x + y for x, y in zip(ea, eb))
                out[e] = out.get(e, ZERO) + ca * cb
        out = {e: c for e, c in out.items() if c}
        if len(out) > MAX_TERMS:
            raise NotExact(
                f"column {col}: the expansion has {len(out)} terms, more than the limit {MAX_TERMS}"
            )
        return out

    def power(self, a: Poly, r: Q, col: int, what: str) -> Poly:
        c = self.constant_value(a)
        if c is None:  # a has variables: r must be a small non-negative integer
            if r.q != 1 or r < 0:
                what = (
                    "sqrt of an expression with variables"
                    if what == "sqrt"
                    else f"a power with the exponent {r}"
                )
                raise NotExact(
                    f"column {col}: {what} is not a polynomial in "
                    f"{', '.join(self.names)} (a part with variables can only be "
                    "raised to a non-negative integer)"
                )
            n = int(r.p)
            if self.degree(a) * n > MAX_DEGREE:
                raise NotExact(
                    f"column {col}: degree {self.degree(a) * n}, above the limit "
                    f"{MAX_DEGREE} (the total degree of EXPR and of every part of it)"
                )
            out = self.const(ONE)
            for _ in range(n):
                out = self.mul(out, a, col)
            return out
        return self.const(
            _rational_power(c, r, col, f"sqrt({c})" if what == "sqrt" else f"({c})^({r})")
        )

    # --- grammar --------------------------------------------------------------------------
    def expr(self) -> Poly:
        acc = self.term()
        while self.peek()[1] in ("+", "-"):
            sign = 1 if self.take()[1] == "+" else -1
            acc = self.add(acc, self.term(), sign)
            if len(acc) > MAX_TERMS:
                raise NotExact(f"column {self.peek()[2]}: more than {MAX_TERMS} terms")
        return acc

    def term(self) -> Poly:
        acc = self.unary()
        while self.peek()[1] in ("*", "/"):
            op = self.take()
            rhs = self.unary()
            if op[1] == "*":
                acc = self.mul(acc, rhs, op[2])
                continue
            c = self.constant_value(rhs)
            if c is None:
                raise NotExact(
                    f"column {op[2]}: a division by an expression with variables: "
                    f"EXPR is not a polynomial in {', '.join(self.names)} "
                    "(rational functions such as 1/x are refused)"
                )
            if c == 0:
                raise NotExact(f"column {op[2]}: division by zero")
            acc = {e: v / c for e, v in acc.items()}
        return acc

    def unary(self) -> Poly:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise NotExact(
                f"column {self.peek()[2]}: nested deeper than {MAX_NESTING} "
                "(parentheses, signs and powers)"
            )
        if self.peek()[1] in ("+", "-"):
            sign = self.take()[1]
            v = self.unary()
            v = v if sign == "+" else {e: -c for e, c in v.items()}
        else:
            v = self.atom()
            if self.peek()[1] in ("^", "**"):
                op = self.take()
                ex = self.unary()
                r = self.constant_value(ex)
                if r is None:
                    raise NotExact(
                        f"column {op[2]}: an exponent with variables: EXPR is not "
                        f"a polynomial in {', '.join(self.names)}"
                    )
                v = self.power(v, r, op[2], "a power")
        self.depth -= 1
        return v

    def atom(self) -> Poly:
        from ..io.numbers import NumberSyntaxError, parse_rational

        tok = self.take()
        kind, text, col = tok
        if kind == "number":
            try:
                return self.const(parse_rational(text))
            except NumberSyntaxError as e:
                raise NotExact(f"column {col}: {e}") from None
        if text == "(":
            v = self.expr()
            if self.peek()[1] != ")":
                raise self.fail(self.peek(), f"')' (closing the '(' at column {col})")
            self.take()
            return v
        if kind == "name":
            if self.peek()[1] == "(":
                if text in FUNCTIONS:
                    self.take()
                    v = self.expr()
                    if self.peek()[1] != ")":
                        raise self.fail(self.peek(), f"')' (closing {text}( at column {col})")
                    self.take()
                    return self.power(v, Q(1, 2), col, "sqrt")
                if text in self.index:
                    raise self.fail(self.peek(), f"an operator after the variable {text!r}")
                raise NotExact(
                    f"column {col}: the function {text!r} is not allowed: EXPR must "
                    "be a polynomial with rational coefficients (exp, log, sin and "
                    f"the like have no exact rational values; allowed: {ALLOWED})"
                )
            if text in self.index:
                e = [0] * len(self.names)
                e[self.index[text]] = 1
                return {tuple(e): ONE}
            if text in CONSTANTS:
                raise NotExact(
                    f"column {col}: {CONSTANTS[text]}: the coefficients of EXPR must "
                    "be rationals (there is no exact value to compute with)"
                )
            raise NotExact(
                f"column {col}: {text!r} is not among the variables "
                f"{', '.join(self.names)} (--vars)"
            )
        raise self.fail(tok, "a number, a variable or '('")


def _rational_power(c: Q, r: Q, col: int, what: str) -> Q:
    """c^r exactly, or NotExact (not rational, division by zero, too large)."""
    if c == 0:
        if r < 0:
            raise NotExact(f"column {col}: division by zero (0 to a negative power)")
        return ZERO if r > 0 else ONE
    p, q = int(r.p), int(r.q)
    if q != 1:  # c^(p/q) = (c^(1/q))^p: rational iff c > 0 and both ends are q-th powers
        from sympy import integer_nthroot

        num, den = int(c.p), int(c.q)
        roots = None
        if c > 0 and q <= MAX_BITS:
            (a, ea), (b, eb) = integer_nthroot(num, q), integer_nthroot(den, q)
            roots = Q(a, b) if ea and eb else None
        if roots is None:
            raise NotExact(
                f"column {col}: {what} is not rational: "
                "the coefficients of EXPR must be rationals (an irrational such as "
                "sqrt(2) has no exact value here)"
            )
        c = roots
    if c not in (ONE, -ONE):
        bits = max(int(c.p).bit_length(), int(c.q).bit_length()) * abs(p)
        if bits > MAX_BITS:
            raise NotExact(
                f"column {col}: {what} gives a number of about {bits} bits, more "
                f"than the limit {MAX_BITS}"
            )
    return c**p


def parse_polynomial(text: str, names: tuple[str, ...] | None = None) -> Polynomial:
    """The polynomial written by ``text``: numbers (integers, decimals read exactly, 0.1 is
    1/10), the variables, + - * / ^ ** ( ) and sqrt of a constant, nothing else.  Variables:
    ``names``, else the expression's names sorted.  Nothing is evaluated by Python or sympy:
    a whitelist tokenizer and an exact recursive-descent parser, every step bounded (MAX_*).
    Raises NotExact naming the column for anything that is not a polynomial with rational
    coefficients or exceeds a limit."""
    if len(text) > MAX_TEXT:
        raise NotExact(f"{len(text)} characters, more than the limit {MAX_TEXT}")
    toks = _tokens(text)
    if names is None:
        found = {
            t
            for i, (k, t, _) in enumerate(toks)
            if k == "name" and t not in CONSTANTS and toks[i + 1][1] != "("
        }  # a name before '(' is a function
        names = tuple(sorted(found))
    parser = _Parser(toks, tuple(names))
    try:
        with collection_paused():
            poly = parser.expr()
    except RecursionError:
        raise NotExact(f"nested too deeply (limit {MAX_NESTING})") from None
    if parser.peek()[0] != "end":
        raise parser.fail(parser.peek(), "an operator (+ - * / ^ **) or the end")
    if not names:
        raise NotExact(f"{text!r} has no variables; give --vars")
    terms = tuple(sorted(poly.items(), reverse=True))
    return Polynomial(tuple(names), terms)


def hessian(f: Polynomial) -> tuple[tuple[Q, ...], ...]:
    """The constant Hessian of a polynomial of degree <= 2."""
    g = f.gradient()
    zero = (ZERO,) * len(f.names)
    return tuple(tuple(gi.derivative(j).evaluate(zero) for j in range(len(f.names))) for gi in g)


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
    raise NotExact(
        f"convexity of a degree-{f.degree} polynomial in {d} variables cannot be "
        "checked exactly here (quadratics in any dimension, or 1-D polynomials)"
    )


def _check_convex_1d(f: Polynomial, lo: Q, hi: Q) -> str:
    """f'' >= 0 on [lo, hi], exactly.  Write f'' = c prod_i g_i^{m_i} (square-free
    factorisation); the even powers are >= 0, so f'' >= 0 on [lo, hi] iff
    h = c prod_{m_i odd} g_i is >= 0 on (lo, hi).  h is square-free, so it keeps its sign on
    (lo, hi) iff it has no root strictly inside (Sturm count, sympy's count_roots), and then
    its sign is that of h((lo + hi) / 2) != 0."""
    import sympy

    x = sympy.Symbol("x")
    f2 = f.derivative(0).derivative(0)
    g = sympy.Poly(
        sum(
            (sympy.Rational(int(c.p), int(c.q)) * x ** e[0] for e, c in f2.terms), sympy.Integer(0)
        ),
        x,
        domain="QQ",
    )
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
    scale = 10**digits
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
            for o in pieces:  # t_p >= t_o:  (w_p - w_o) x >= b_o - b_p
                dw, db = p.w[0] - o.w[0], o.b - p.b
                if dw > 0:
                    a = max(a, db / dw)
                elif dw < 0:
                    b = min(b, db / dw)
                elif db > 0:
                    a, b = hi, lo  # o lies above p everywhere: empty cell
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
            rows = [
                Row(tuple(a - c for a, c in zip(p.w, o.w)), p.b - o.b) for o in pieces if o is not p
            ]
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
    bound: Q  # >= L sqrt(d) h
    bound_exact: bool  # bound == L sqrt(d) h
    max_error: tuple[Q, Vector] | None


def approximate_convex(
    f: Polynomial, box: Box, h: Q, max_points: int = 10000
) -> ConvexApproximation:
    """The tangent-plane network of f on the box with spacing h, its bound and (d <= 2) its
    exact maximum error.  Raises NotExact (not convex, or not checkable) or ValueError (too
    many grid points)."""
    d = len(f.names)
    if box.dim != d:
        raise ValueError(
            f"the box has {box.dim} sides, the expression {d} variables ({', '.join(f.names)})"
        )
    if not h > 0:
        raise ValueError(f"the spacing h must be positive, got {h}")
    n = grid_size(box, h)
    if n > max_points:
        raise ValueError(f"spacing {h} gives {n} grid points, more than the limit {max_points}")
    convexity = check_convex(f, box)
    points = list(product(*(grid_axis(lo, hi, h) for lo, hi in zip(box.lower, box.upper))))
    pieces = tangent_pieces(f, points)
    net = MaxoutNetwork(
        d,
        (Layer((Unit(pieces),)),),
        None,
        box,
        {
            "description": f"tangent planes of a convex polynomial at "
            f"{len(points)} grid points, spacing {h}"
        },
    )
    L2 = lipschitz_squared(f, box)
    root, exact = sqrt_upper(L2 * d)
    return ConvexApproximation(
        net, len(points), len(pieces), convexity, L2, root * h, exact, max_error(f, pieces, box)
    )
