"""Maxout network -> hardmax Transformer, the construction of docs/notes/construction.md §2.

Tokens are pieces (n = k, the largest rank), heads are units.  With W = max(d, N_1..N_D, m)
the model width is d_m = 3W + k in four row blocks: H (the hidden vector), Z (pre-activations),
M (attention output), P (one-hot position).  Invariant after layer l: every token t is
(h^l padded, 0, 0, e_t).  One Maxout layer is three sub-layers:

1. FF (token-wise affine map): hidden unit (s, i) = ReLU(w_{i,s} . H + 2 C_l P_s + b_{i,s} - C_l);
   on token t only s = t is active and gives z_{t,i} + C_l, so Z_i <- z_{t,i} (needs
   |z| <= C_l on the domain: the gate constant);
2. attention: head i has constant query (the sum of P, = 1), key = value = Z_i, output to M_i;
   hardmax over keys averages tied maxima of equal values, so M_i <- max_t z_{t,i} = h^l_i;
3. FF (clean-up, exact linear map via u = ReLU(u) - ReLU(-u)): H <- M (last layer: A M + c),
   Z <- 0, M <- 0.

Variants (``CompileOptions``): ``merged`` fuses step 3 of layer l with step 1 of layer l+1
(2D + 1 sub-layers); ``positional="scalar"`` replaces the one-hot P block by one coordinate
pi_t = t + 1 and selects piece t by telescoping:
z_t = z_0 + sum_{s>=1} [pi - 1 >= s](z_s - z_{s-1}), each step
gated by ReLU(d + 2K(pi - 1 - s) + K) - ReLU(2K(pi - 1 - s) + K) with K = 2 C_l.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..kernel.affine import Affine, SparseVector, nonzero, row_of
from ..kernel.maxout import MaxoutNetwork
from ..kernel.polyhedron import Domain
from ..kernel.rational import ONE, ZERO, Q
from ..kernel.transformer import Attention, FeedForward, Head, Readout, Transformer
from .bounds import DomainError, LayerBounds, layer_bounds


@dataclass(frozen=True, slots=True)
class CompileOptions:
    merged: bool = False  # 2D + 1 sub-layers instead of 3D
    positional: str = "onehot"  # "onehot" (k rows) or "scalar" (one coordinate t + 1)
    bounds: str = "auto"  # "auto", "interval" or "lp"
    slack: Q = ZERO  # C_l = (1 + slack) * bound, for softmax perturbations
    gates: tuple[Q, ...] | None = None  # explicit C_l (re-building a given file's construction)


@dataclass(frozen=True, slots=True)
class Layout:
    """Row indices of the blocks H, Z, M, P in a token of width d_m."""

    W: int
    k: int
    positional: str

    def H(self, j):
        return j

    def Z(self, i):
        return self.W + i

    def M(self, i):
        return 2 * self.W + i

    def P(self, s):
        return 3 * self.W + (s if self.positional == "onehot" else 0)

    @property
    def d_model(self) -> int:
        return 3 * self.W + (self.k if self.positional == "onehot" else 1)


@dataclass(frozen=True, slots=True)
class Compiled:
    transformer: Transformer
    gates: tuple[Q, ...]  # C_l per layer
    bounds: tuple[LayerBounds, ...]
    bounds_method: str  # "interval" or "lp"
    options: CompileOptions


class _Sparse:
    """A matrix under construction: rows x cols, entries set by (i, j)."""

    def __init__(self, rows: int, cols: int):
        self.rows, self.cols = rows, cols
        self.e: dict[tuple[int, int], Q] = {}

    def add(self, i, j, v):
        if v:
            self.e[i, j] = self.e.get((i, j), ZERO) + v

    def matrix(self):
        """The rows, each sparse where at most a quarter of it is non-zero (``row_of``)."""
        rows: list[list] = [[] for _ in range(self.rows)]
        for (i, j), v in self.e.items():
            rows[i].append((j, v))
        return tuple(row_of(self.cols, r) for r in rows)


def _piece(unit, s):
    """Piece s of a unit, padded by repeating its last piece (the max is unchanged)."""
    return unit.pieces[min(s, len(unit.pieces) - 1)]


def _gate_units(
    layer, C: Q, L: Layout, reads, W1: _Sparse, b1: list, W2: _Sparse, b2: list, offset: int
) -> int:
    """Append the hidden units of step 1 (Z_i <- z_{t,i} on token t) reading h^{l-1} from the
    rows ``reads(j)``; returns the number of units added.  Adds -C_l to b2 on Z_i."""
    k, h = L.k, offset
    for i in range(len(layer.units)):
        b2[L.Z(i)] -= C
    if L.positional == "onehot":
        for s in range(k):
            for i, unit in enumerate(layer.units):
                p = _piece(unit, s)
                for j, w in nonzero(p.w):
                    W1.add(h, reads(j), w)
                W1.add(h, L.P(s), 2 * C)
                b1.append(p.b - C)
                W2.add(L.Z(i), h, ONE)
                h += 1
        return h - offset
    K = 2 * C
    shared = {}
    for s in range(1, k):  # c_s = ReLU(2K(pi - 1 - s) + K), shared by all units
        W1.add(h, L.P(0), 2 * K)
        b1.append(-2 * K * (1 + s) + K)
        shared[s] = h
        h += 1
    for i, unit in enumerate(layer.units):
        p0 = _piece(unit, 0)  # ReLU(z_0 + C) = z_0 + C
        for j, w in nonzero(p0.w):
            W1.add(h, reads(j), w)
        b1.append(p0.b + C)
        W2.add(L.Z(i), h, ONE)
        h += 1
        for s in range(1, k):
            p, q = _piece(unit, s), _piece(unit, s - 1)
            for j, w in nonzero(p.w):
                W1.add(h, reads(j), w)
            for j, v in nonzero(q.w):
                W1.add(h, reads(j), -v)
            W1.add(h, L.P(0), 2 * K)
            b1.append(p.b - q.b - 2 * K * (1 + s) + K)
            W2.add(L.Z(i), h, ONE)
            W2.add(L.Z(i), shared[s], -ONE)
            h += 1
    return h - offset


def _cleanup_units(
    prev_width: int,
    width: int,
    target,
    L: Layout,
    W1: _Sparse,
    b1: list,
    W2: _Sparse,
    offset: int,
    zero_z: int,
) -> int:
    """Hidden units of step 3: H_j <- target_j (an affine map of M, given as (row, const)),
    Z_i <- 0 for i < zero_z, M_i <- 0 for i < width.  u = ReLU(u) - ReLU(-u) each time."""
    h = offset

    def copy(row: dict, const: Q, out_row: int):
        nonlocal h
        for sign in (ONE, -ONE):
            for col, v in row.items():
                W1.add(h, col, sign * v)
            b1.append(sign * const)
            W2.add(out_row, h, sign)
            h += 1

    for j in range(max(prev_width, len(target))):
        row, const = target[j] if j < len(target) else ({}, ZERO)
        row = dict(row)
        row[L.H(j)] = row.get(L.H(j), ZERO) - ONE  # u_j = target_j - H_j
        copy(row, const, L.H(j))
    for i in range(zero_z):
        copy({L.Z(i): -ONE}, ZERO, L.Z(i))
    for i in range(width):
        copy({L.M(i): -ONE}, ZERO, L.M(i))
    return h - offset


def _feedforward(d_m: int, build) -> FeedForward:
    """A FF sub-layer from a builder that fills (W1, b1, W2, b2) and returns the hidden size."""
    W1, W2 = _Sparse(0, d_m), _Sparse(d_m, 0)
    b1: list[Q] = []
    b2 = [ZERO] * d_m
    n = build(W1, b1, W2, b2)
    W1.rows = n
    W2.cols = n
    return FeedForward(Affine(W1.matrix(), tuple(b1), d_m), Affine(W2.matrix(), tuple(b2), n))


def _targets(net: MaxoutNetwork, l: int, L: Layout):
    """The affine maps of M that H must hold after layer l: M_i, or A M + c after the last."""
    layer = net.layers[l]
    if l == len(net.layers) - 1 and net.output is not None:
        A = net.output
        return [({L.M(i): v for i, v in enumerate(row) if v}, c) for row, c in zip(A.W, A.b)]
    return [({L.M(i): ONE}, ZERO) for i in range(layer.width)]


def compile_transformer(
    net: MaxoutNetwork, domain: Domain | None = None, options: CompileOptions = CompileOptions()
) -> Compiled:
    """The hardmax Transformer of docs/notes/construction.md §2 for ``net`` on ``domain`` (default:
    the network's own).  It equals ``net`` on the domain exactly (Theorems T1, T2), as long as the
    gate constants bound the pre-activations there, which ``layer_bounds`` guarantees.

    Raises DomainError if there is no domain, or it is empty or unbounded."""
    domain = domain if domain is not None else net.domain
    if domain is None:
        raise DomainError("the network has no domain")
    if domain.dim != net.input_dim:
        raise DomainError(
            f"the domain has dimension {domain.dim}, the network's input {net.input_dim}"
        )
    bounds = layer_bounds(net, domain, options.bounds)
    method = (
        options.bounds
        if options.bounds != "auto"
        else ("interval" if hasattr(domain, "lower") else "lp")
    )
    # C_l: the least integer strictly above the bound (with slack), so >= 1.  Any C_l >= the
    # bound is sound; an integer keeps the bound's large denominators out of every later
    # number, and a strict margin leaves no gate tied anywhere on the domain (every gate's
    # ReLU is strictly on or off there, even on a degenerate box: a constant unit).
    gates = [Q((b.gate * (1 + options.slack)).floor() + 1) for b in bounds]
    if options.gates is not None:
        gates = list(options.gates)
    k = max(layer.rank for layer in net.layers)
    widths = net.widths
    m = net.out_dim
    L = Layout(max(max(widths), m), k, options.positional)
    d_m, D = L.d_model, len(net.layers)

    embedding = [row_of(net.input_dim, ()) for _ in range(d_m)]
    for j in range(net.input_dim):
        embedding[L.H(j)] = row_of(net.input_dim, [(j, ONE)])
    positions = []
    for t in range(k):
        p = [ZERO] * d_m
        p[L.P(t)] = ONE if options.positional == "onehot" else Q(t + 1)
        positions.append(tuple(p))

    def attention(l: int) -> Attention:
        # the heads share one query; W_O, d_model x 1, has one row that is not zero, kept as a
        # sparse matrix (a wide network has thousands of heads of d_model rows)
        q = [(L.P(s), ONE) for s in range(k if options.positional == "onehot" else 1)]
        query, zero_row, one_row = (row_of(d_m, q),), (ZERO,), (ONE,)
        heads = []
        for i in range(net.layers[l].width):
            read = (row_of(d_m, [(L.Z(i), ONE)]),)
            out = SparseVector(d_m, (L.M(i),), (one_row,), zero_row)
            heads.append(Head(query, read, read, out, ONE))
        return Attention(tuple(heads))

    def gate_ff(l: int, reads) -> FeedForward:
        return _feedforward(
            d_m,
            lambda W1, b1, W2, b2: _gate_units(
                net.layers[l], gates[l], L, reads, W1, b1, W2, b2, 0
            ),
        )

    def cleanup_ff(l: int) -> FeedForward:
        return _feedforward(
            d_m,
            lambda W1, b1, W2, b2: _cleanup_units(
                widths[l], widths[l + 1], _targets(net, l, L), L, W1, b1, W2, 0, widths[l + 1]
            ),
        )

    def merged_ff(l: int) -> FeedForward:  # clean-up of layer l and step 1 of layer l + 1
        def build(W1, b1, W2, b2):
            n = _cleanup_units(
                widths[l], widths[l + 1], _targets(net, l, L), L, W1, b1, W2, 0, widths[l + 1]
            )
            return n + _gate_units(net.layers[l + 1], gates[l + 1], L, L.M, W1, b1, W2, b2, n)

        return _feedforward(d_m, build)

    subs: list[Attention | FeedForward] = []
    for l in range(D):
        if not options.merged:
            subs += [gate_ff(l, L.H), attention(l), cleanup_ff(l)]
        else:
            if l == 0:
                subs.append(gate_ff(0, L.H))
            subs.append(attention(l))
            subs.append(merged_ff(l) if l < D - 1 else cleanup_ff(l))
    R = tuple(tuple(ONE if c == L.H(j) else ZERO for c in range(d_m)) for j in range(m))
    readout = Readout(Affine(R, (ZERO,) * m, d_m), 0)
    meta = {
        "compiled_by": "exactmax compile",
        "construction": "docs/notes/construction.md §2",
        "variant": {"merged": options.merged, "positional": options.positional},
        "gate_constants": [str(c) for c in gates],
        "bounds": method,
    }
    tf = Transformer(
        net.input_dim,
        d_m,
        tuple(embedding),
        tuple(positions),
        tuple(subs),
        readout,
        domain,
        meta,
    )
    return Compiled(tf, tuple(gates), tuple(bounds), method, options)
