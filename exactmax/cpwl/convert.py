"""CPWL specifications -> Maxout networks (Theorem 4.2 of the paper, docs/notes/construction.md §4).

One ``compile_*`` per route, each an exact identity of functions on all of R^d (not only on
the domain), and one ``reference_*`` per kind: a second, literal encoding of the
specification's own semantics, written so that it can be read off the specification, and built
differently from the conversion, so that ``exactmax equiv NET REF`` proves something.

Max-affine form of a convex 1-D hinge sum (used for the DC split and the fold network):
for hinges h_1 < ... < h_r with jumps J_t > 0,

    a s + c + sum_t J_t (s - h_t)_+
        =  max_{t=0..r} [ (a + J_1 + ... + J_t) s + c - J_1 h_1 - ... - J_t h_t ]

because consecutive pieces differ by J_t (s - h_t), which is >= 0 exactly when s >= h_t, so
the pieces that win on s in [h_t, h_{t+1}] are the t-th; the right side is their max.
"""

from __future__ import annotations

from itertools import product

from ..kernel.affine import Affine
from ..kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from ..kernel.rational import ONE, ZERO, Q
from .spec import BreakpointSpec, DCSpec, LatticeSpec, ReluSpec, Spec

DEFAULT_MAX_PIECES = 20000
"""Most pieces the DC route of a lattice spec may write (the expansion is a product)."""


class TooLarge(ValueError):
    """A route would write more pieces than allowed; the message says how many."""


def _zero(d: int) -> tuple[Q, ...]:
    return (ZERO,) * d


def _unit_vector(i: int, n: int, scale: Q = ONE) -> tuple[Q, ...]:
    return tuple(scale if j == i else ZERO for j in range(n))


def _dedupe(pieces) -> tuple[Piece, ...]:
    """The pieces without repeats, first occurrence kept (a repeated piece never changes a max)."""
    seen, out = set(), []
    for p in pieces:
        key = (tuple(p.w), p.b)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return tuple(out)


def hinge_pieces(a: Q, c: Q, hinges) -> tuple[Piece, ...]:
    """The pieces of a s + c + sum_t J_t (s - h_t)_+ (1-D, ``hinges`` = [(h_t, J_t)] with
    increasing h_t and J_t > 0) in the max-affine form of the module docstring."""
    slope, icpt, out = a, c, [Piece((a,), c)]
    for h, J in hinges:
        if not J > 0:
            raise ValueError(f"hinge at {h} has jump {J}, expected > 0")
        slope, icpt = slope + J, icpt - J * h
        out.append(Piece((slope,), icpt))
    return tuple(out)


# ------------------------------------------------------------------------------ (a) ReLU


def compile_relu(spec: ReluSpec) -> MaxoutNetwork:
    """Each ReLU unit max(w . h + b, 0) becomes the rank-2 Maxout unit with pieces (w, b) and
    (0, 0); the read-out is kept.  Same function on all of R^d."""
    layers, width = [], spec.input_dim
    for A in spec.layers:
        layers.append(
            Layer(
                tuple(
                    Unit((Piece(tuple(w), b), Piece(_zero(width), ZERO))) for w, b in zip(A.W, A.b)
                )
            )
        )
        width = A.out_dim
    if not layers:  # an affine spec: one rank-1 unit per output of the read-out
        out = spec.output or Affine(
            tuple(_unit_vector(i, width) for i in range(width)), _zero(width), width
        )
        return MaxoutNetwork(
            spec.input_dim,
            (Layer(tuple(Unit((Piece(tuple(w), b),)) for w, b in zip(out.W, out.b))),),
            None,
            spec.domain,
        )
    return MaxoutNetwork(spec.input_dim, tuple(layers), spec.output, spec.domain)


def reference_relu(spec: ReluSpec) -> dict:
    """The specification itself as an exactmax/maxout file with ``relu`` layers (the format's
    own ReLU layers, read by ``load_model``)."""
    from ..io.models import _vec, domain_to_json

    obj = {
        "format": "exactmax/maxout",
        "version": 1,
        "input_dim": spec.input_dim,
        "layers": [{"relu": {"W": [_vec(r) for r in A.W], "b": _vec(A.b)}} for A in spec.layers],
    }
    if not spec.layers:
        return _model_json(compile_relu(spec))
    if spec.output is not None:
        obj["output"] = {"W": [_vec(r) for r in spec.output.W], "b": _vec(spec.output.b)}
    if spec.domain is not None:
        obj["domain"] = domain_to_json(spec.domain)
    return obj


# ------------------------------------------------------------------------- (b) breakpoints


def dc_split(spec: BreakpointSpec) -> tuple[tuple[Piece, ...], tuple[Piece, ...]]:
    """(pieces of g, pieces of h) with f = g - h, both convex max-affine (Theorem 4.2, 1-D).

    With slopes s_1..s_n and slope changes D_i = s_{i+1} - s_i at x_i (i = 1..n-1),
    f(x) = y_0 + s_1 (x - x_0) + sum_i D_i (x - x_i)_+; the hinges with D_i > 0 go to
    g = y_0 + s_1 (x - x_0) + sum_{D_i > 0} D_i (x - x_i)_+, those with D_i < 0 to
    h = sum_{D_i < 0} |D_i| (x - x_i)_+ (so -h is the concave part); D_i = 0 is no hinge."""
    s = spec.slopes
    x0, y0 = spec.x[0], spec.y[0]
    up = [(spec.x[i], s[i] - s[i - 1]) for i in range(1, len(s)) if s[i] > s[i - 1]]
    down = [(spec.x[i], s[i - 1] - s[i]) for i in range(1, len(s)) if s[i] < s[i - 1]]
    return hinge_pieces(s[0], y0 - s[0] * x0, up), hinge_pieces(ZERO, ZERO, down)


def compile_breakpoints(spec: BreakpointSpec) -> MaxoutNetwork:
    """One Maxout layer with the 2 units g, h of ``dc_split`` and output g - h."""
    g, h = dc_split(spec)
    return _two_unit_dc(1, g, h, spec.domain)


def reference_breakpoints(spec: BreakpointSpec) -> dict:
    """f(x) = y_0 + s_1 (x - x_0) + sum_{i=1}^{n-1} D_i (x - x_i)_+ written as one ReLU layer
    (relu(x) - relu(-x) = x exactly), read off the breakpoints without any DC split."""
    from ..io.models import _vec, domain_to_json

    s = spec.slopes
    interior = spec.x[1:-1]
    W = [[ONE], [-ONE]] + [[ONE] for _ in interior]
    b = [ZERO, ZERO] + [-t for t in interior]
    out_w = [s[0], -s[0]] + [s[i] - s[i - 1] for i in range(1, len(s))]
    return {
        "format": "exactmax/maxout",
        "version": 1,
        "input_dim": 1,
        "layers": [{"relu": {"W": [_vec(r) for r in W], "b": _vec(b)}}],
        "output": {"W": [_vec(out_w)], "b": _vec([spec.y[0] - s[0] * spec.x[0]])},
        "domain": domain_to_json(spec.domain),
    }


# ----------------------------------------------------------------------------- (c) lattice


def compile_lattice(spec: LatticeSpec) -> MaxoutNetwork:
    """Two Maxout layers: u_i = max_{j in S_i} (-l_j) = -min_{j in S_i} l_j, then
    f = max_i (-u_i)."""
    d, n = spec.input_dim, len(spec.sets)
    first = Layer(
        tuple(
            Unit(_dedupe(Piece(tuple(-v for v in spec.maps[j].w), -spec.maps[j].b) for j in S))
            for S in spec.sets
        )
    )
    second = Layer((Unit(tuple(Piece(_unit_vector(i, n, -ONE), ZERO) for i in range(n))),))
    return MaxoutNetwork(d, (first, second), None, spec.domain)


def count_lattice_dc_pieces(spec: LatticeSpec) -> tuple[int, int]:
    """(pieces of the plus unit, of the minus unit) of ``compile_lattice_dc`` before removing
    repeats: sum_i prod_{i' != i} |S_i'| and prod_i |S_i|."""
    sizes = [len(S) for S in spec.sets]
    total = 1
    for k in sizes:
        total *= k
    return sum(total // k for k in sizes), total


def compile_lattice_dc(spec: LatticeSpec, max_pieces: int = DEFAULT_MAX_PIECES) -> MaxoutNetwork:
    """The difference-of-convex route of Theorem 4.2 for the lattice form: one Maxout layer,
    2 units, output [1, -1].

    For a set S, min_{j in S} l_j = A_S - B_S with A_S = sum_{j in S} l_j (affine) and
    B_S = max_{j in S} sum_{k in S, k != j} l_k (convex max-affine), since
    B_S = A_S - min_j l_j.  Hence, with B = sum_i B_{S_i},
    f = max_i (A_{S_i} - B_{S_i}) = max_i (A_{S_i} + B - B_{S_i}) - B, and both terms are
    max-affine: a sum of maxes is the max over one choice per summand (a product).
    Raises TooLarge if either unit would have more than ``max_pieces`` pieces."""
    plus_n, minus_n = count_lattice_dc_pieces(spec)
    if max(plus_n, minus_n) > max_pieces:
        raise TooLarge(
            f"the DC route needs {plus_n} + {minus_n} pieces (a product over the "
            f"sets), more than the limit {max_pieces}"
        )
    d = spec.input_dim

    def add(*maps):
        w = [ZERO] * d
        c = ZERO
        for m in maps:
            for t in range(d):
                w[t] += m.w[t]
            c += m.b
        return tuple(w), c

    A = [add(*(spec.maps[j] for j in S)) for S in spec.sets]
    # B_S's pieces: A_S - l_j for j in S
    Bp = [
        [
            (tuple(a - v for a, v in zip(A[i][0], spec.maps[j].w)), A[i][1] - spec.maps[j].b)
            for j in S
        ]
        for i, S in enumerate(spec.sets)
    ]

    def sum_choice(choice):
        w = [ZERO] * d
        c = ZERO
        for pw, pc in choice:
            for t in range(d):
                w[t] += pw[t]
            c += pc
        return w, c

    minus = _dedupe(Piece(tuple(w), c) for w, c in (sum_choice(ch) for ch in product(*Bp)))
    plus = []
    for i in range(len(spec.sets)):
        others = [Bp[k] for k in range(len(spec.sets)) if k != i]
        for ch in product(*others):
            w, c = sum_choice(ch)
            plus.append(Piece(tuple(a + v for a, v in zip(A[i][0], w)), A[i][1] + c))
    return _two_unit_dc(d, _dedupe(plus), minus, spec.domain)


def reference_lattice(spec: LatticeSpec) -> MaxoutNetwork:
    """The lattice form literally, in three layers: z_j = l_j (one-piece units), then
    w_i = max_{j in S_i} (-z_j) = -min_{j in S_i} l_j, then max_i (-w_i)."""
    d, M, n = spec.input_dim, len(spec.maps), len(spec.sets)
    affine = Layer(tuple(Unit((Piece(tuple(m.w), m.b),)) for m in spec.maps))
    mins = Layer(
        tuple(Unit(tuple(Piece(_unit_vector(j, M, -ONE), ZERO) for j in S)) for S in spec.sets)
    )
    top = Layer((Unit(tuple(Piece(_unit_vector(i, n, -ONE), ZERO) for i in range(n))),))
    return MaxoutNetwork(d, (affine, mins, top), None, spec.domain)


# --------------------------------------------------------------------------------- (d) DC


def compile_dc(spec: DCSpec) -> MaxoutNetwork:
    """One Maxout layer, units max_i plus_i and max_j minus_j, output [1, -1]."""
    return _two_unit_dc(
        spec.input_dim,
        _dedupe(Piece(tuple(m.w), m.b) for m in spec.plus),
        _dedupe(Piece(tuple(m.w), m.b) for m in spec.minus),
        spec.domain,
    )


def reference_dc(spec: DCSpec) -> MaxoutNetwork:
    """Literally: every affine map as a one-piece unit, then the max of the plus
    coordinates and the max of the minus coordinates, output [1, -1]."""
    d, P, M = spec.input_dim, len(spec.plus), len(spec.minus)
    affine = Layer(tuple(Unit((Piece(tuple(m.w), m.b),)) for m in spec.plus + spec.minus))
    n = P + M
    top = Layer(
        (
            Unit(tuple(Piece(_unit_vector(i, n), ZERO) for i in range(P))),
            Unit(tuple(Piece(_unit_vector(P + j, n), ZERO) for j in range(M))),
        )
    )
    return MaxoutNetwork(d, (affine, top), Affine(((ONE, -ONE),), (ZERO,), 2), spec.domain)


# ---------------------------------------------------------------------------------- shared


def _two_unit_dc(d: int, g, h, domain) -> MaxoutNetwork:
    return MaxoutNetwork(
        d, (Layer((Unit(tuple(g)), Unit(tuple(h)))),), Affine(((ONE, -ONE),), (ZERO,), 2), domain
    )


def _model_json(net: MaxoutNetwork) -> dict:
    from ..io.models import model_to_json

    return model_to_json(net)


ROUTES = {"relu": ("relu",), "breakpoints": ("dc",), "lattice": ("lattice", "dc"), "dc": ("dc",)}
"""The routes of each kind; the first is the default."""


def kind_of(spec: Spec) -> str:
    return {ReluSpec: "relu", BreakpointSpec: "breakpoints", LatticeSpec: "lattice", DCSpec: "dc"}[
        type(spec)
    ]


def compile_cpwl(
    spec: Spec, route: str | None = None, max_pieces: int = DEFAULT_MAX_PIECES
) -> MaxoutNetwork:
    """The Maxout network of ``spec`` by ``route`` (default: the kind's first route)."""
    kind = kind_of(spec)
    route = route or ROUTES[kind][0]
    if route not in ROUTES[kind]:
        raise ValueError(f"route {route!r} does not apply to kind {kind!r}")
    if kind == "relu":
        return compile_relu(spec)
    if kind == "breakpoints":
        return compile_breakpoints(spec)
    if kind == "lattice":
        return compile_lattice(spec) if route == "lattice" else compile_lattice_dc(spec, max_pieces)
    return compile_dc(spec)


def reference_json(spec: Spec) -> dict:
    """The JSON (exactmax/maxout) of the literal encoding of ``spec``."""
    kind = kind_of(spec)
    if kind == "relu":
        return reference_relu(spec)
    if kind == "breakpoints":
        return reference_breakpoints(spec)
    return _model_json(reference_lattice(spec) if kind == "lattice" else reference_dc(spec))
