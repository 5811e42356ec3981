"""Transformers over Q (construction.md §1) and their exact hardmax evaluation.

n tokens in Q^{d_m}.  Token t starts as E x + p_t.  Sub-layers, each with a residual:

- attention: x_t <- x_t + sum_h W_O^h W_V^h sum_{t'} a_h(t', t) x_{t'}, where the scores are
  s_h(t', t) = lambda_h <W_K^h x_{t'}, W_Q^h x_t> and a_h(., t) is *hardmax*: uniform over
  the set of keys t' with maximal score (ties averaged);
- feed-forward: x_t <- x_t + W_2 ReLU(W_1 x_t + b_1) + b_2, the same map for every token.

Read-out y = R x_{t*} + r for one token t*, or for the mean of the tokens.  No layer norm.
Softmax attention has no exact rational value; the kernel refuses to evaluate it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from math import lcm
from operator import mul

from .affine import Affine, Matrix, Vector, scaled_matrix, scaled_rows
from .polyhedron import Domain
from .rational import IntMatrix, Q, RatMatrix, Z, rational

_ZERO = Z(0)   # comparisons and ReLU with an integer zero of the backend are faster

HARDMAX = "hardmax"
SOFTMAX = "softmax"


@dataclass(frozen=True, slots=True)
class Head:
    """One attention head: W_Q, W_K, W_V in Q^{s x d_m}, W_O in Q^{d_m x s}, scale > 0."""

    query: Matrix
    key: Matrix
    value: Matrix
    out: Matrix
    scale: Q


@dataclass(frozen=True, slots=True)
class Attention:
    heads: tuple[Head, ...]
    kind: str = HARDMAX  # HARDMAX or SOFTMAX


@dataclass(frozen=True, slots=True)
class FeedForward:
    """x -> x + W_2 ReLU(W_1 x + b_1) + b_2 (``inner`` = W_1, b_1; ``outer`` = W_2, b_2)."""

    inner: Affine
    outer: Affine


Sublayer = Attention | FeedForward


@dataclass(frozen=True, slots=True)
class Readout:
    """y = R z + r where z is token ``token`` (0-based), or the token mean if token is None."""

    map: Affine
    token: int | None = 0


@dataclass(frozen=True, slots=True)
class Transformer:
    input_dim: int
    d_model: int
    embedding: Matrix          # E in Q^{d_m x input_dim}
    positions: tuple[Vector, ...]  # p_t in Q^{d_m}, one per token
    sublayers: tuple[Sublayer, ...]
    readout: Readout
    domain: Domain | None = None
    meta: object = field(default=None, compare=False, hash=False)

    @property
    def n_tokens(self) -> int:
        return len(self.positions)

    @property
    def out_dim(self) -> int:
        return self.readout.map.out_dim


def check_transformer_shapes(tf: Transformer, sublayers: range | None = None) -> None:
    """Raise ValueError (TypeError for an inexact number) unless every matrix has the shape
    construction.md §1 needs (of the given sub-layers only, when ``sublayers`` is given);
    the readers guarantee this for files, this guards Transformers built in Python."""
    d, dm = tf.input_dim, tf.d_model

    def mat(M, rows, cols, what):
        if (rows is not None and len(M) != rows) or any(len(r) != cols for r in M):
            raise ValueError(f"{what} does not have shape {rows} x {cols}")
        for r in M:
            for v in r:
                rational(v)

    mat(tf.embedding, dm, d, "the embedding")
    if not tf.positions:
        raise ValueError("a Transformer needs at least one token")
    mat(tf.positions, None, dm, "the positions")
    for i in range(len(tf.sublayers)) if sublayers is None else sublayers:
        s = tf.sublayers[i]
        if isinstance(s, FeedForward):
            h = len(s.inner.b)
            mat(s.inner.W, h, dm, f"sub-layer {i}: W1")
            mat(s.outer.W, dm, h, f"sub-layer {i}: W2")
            if len(s.outer.b) != dm:
                raise ValueError(f"sub-layer {i}: b2 has the wrong length")
            for v in s.inner.b + s.outer.b:
                rational(v)
        else:
            for j, h in enumerate(s.heads):
                mat(h.key, None, dm, f"sub-layer {i}, head {j}: key")
                mat(h.query, len(h.key), dm, f"sub-layer {i}, head {j}: query")
                mat(h.value, None, dm, f"sub-layer {i}, head {j}: value")
                mat(h.out, dm, len(h.value), f"sub-layer {i}, head {j}: out")
                if not rational(h.scale) > 0:
                    raise ValueError(f"sub-layer {i}, head {j}: the scale must be positive")
    r = tf.readout
    mat(r.map.W, len(r.map.b), dm, "the read-out")
    if r.token is not None and not 0 <= r.token < len(tf.positions):
        raise ValueError(f"read-out token {r.token} does not exist")


def hardmax_winners(scores: list) -> list[int]:
    """The argmax set {t' : scores[t'] = max scores}: the keys a hardmax query averages over."""
    top = max(scores)
    return [k for k, v in enumerate(scores) if v == top]


class TransformerEvaluator:
    """Exact hardmax evaluation of one Transformer, prepared once, for one input or a batch.

    All tokens of all inputs are the columns of one integer matrix X over one common
    denominator E (column b n + t is token t of input b), as in ``maxout.py``, with a last row
    of E's (the homogeneous coordinate): an affine map with rows [W | b] scaled by their least
    common denominator D is one integer matrix product, and ReLU, argmax and comparisons are
    taken on the numerators since D E > 0.  Hardmax means over a tie set S are kept integral
    by the factor L / |S|, L the lcm of the tie-set sizes that occur.
    """

    __slots__ = ("tf", "_embed", "_steps", "_read")

    def __init__(self, tf: Transformer):
        check_transformer_shapes(tf)
        self.tf = tf
        d, n, din = tf.d_model, tf.n_tokens, tf.input_dim
        # [E x + p_t; 1] = [[E | P]; [0 | 1 ... 1]] [x; e_t], e_t the one-hot of token t
        DE, Em = scaled_matrix(tf.embedding, din)
        DP, Pm = scaled_matrix(tuple(tuple(p[i] for p in tf.positions) for i in range(d)), n)
        self._embed = (DE * DP, IntMatrix([[DP * a for a in e] + [DE * c for c in p]
                                           for e, p in zip(Em, Pm)]
                                          + [[0] * din + [DE * DP] * n]))
        self._steps = []
        for index, sub in enumerate(tf.sublayers):
            if isinstance(sub, FeedForward):
                self._steps.append(_feedforward_step(sub, d))
                continue
            if sub.kind != HARDMAX:
                raise ValueError(f"sublayers[{index}] uses {sub.kind} attention, which has no "
                                 "exact rational value; only hardmax is evaluated exactly")
            for h in sub.heads:
                if not h.scale > 0:
                    raise ValueError(f"sublayers[{index}]: head scale must be positive")
            heads = [h for h in sub.heads if h.value]  # a head without values adds nothing
            if not heads:
                self._steps.append(("none",))
                continue
            # Keys and queries: the positive factors scale_h / (D_K D_Q E^2) do not change
            # the argmax, so they are compared as integers; one common scaling per matrix.
            K = scaled_matrix(tuple(r for h in heads for r in h.key), d)[1]
            Qm = scaled_matrix(tuple(r for h in heads for r in h.query), d)[1]
            DV, V = scaled_matrix(tuple(r for h in heads for r in h.value), d)
            nv = len(V)
            DO, O = scaled_matrix(tuple(tuple(v for h in heads for v in h.out[i])
                                        for i in range(d)), nv)
            # One product S X gives all keys, queries and values; equal rows (a key that is
            # also a value, one query shared by the heads) are rows of S once.
            rows = {}   # row of S -> its index

            def at(block):
                return [rows.setdefault(tuple(r) + (0,), len(rows)) for r in block]

            spans, kq, v0 = [], 0, 0   # per head: S rows of its keys, queries, values; 1st value
            for h in heads:
                k1, v1 = kq + len(h.key), v0 + len(h.value)
                spans.append((at(K[kq:k1]), at(Qm[kq:k1]), at(V[v0:v1]), v0))
                kq, v0 = k1, v1
            self._steps.append(("attn", IntMatrix([list(r) for r in rows]), spans, nv,
                                DO * DV, IntMatrix(O + [[0] * nv])))
        D, R = scaled_rows(tf.readout.map.W, tf.readout.map.b)
        self._read = (D, IntMatrix(R) if R else None, len(R))

    def _run(self, xs, trace=None) -> tuple[IntMatrix, int]:
        """(X, E) after the last sub-layer (appended to ``trace`` after every sub-layer)."""
        tf, n = self.tf, self.tf.n_tokens
        xs = [tuple(map(rational, x)) for x in xs]
        for x in xs:
            if len(x) != tf.input_dim:
                raise ValueError(f"input of length {len(x)}, expected {tf.input_dim}")
        # H = [x_b; e_t] in column b n + t, as numerators over their least common denominator
        onehot = [[int(s == t) for t in range(n)] * len(xs) for s in range(n)]
        H, E = RatMatrix(tf.input_dim + n, n * len(xs),
                         [x[i] for i in range(tf.input_dim) for x in xs for _ in range(n)]
                         + [v for row in onehot for v in row]).numer_denom()
        D, M = self._embed
        X, E = M * H, D * E
        if trace is not None:
            trace.append((X, E))
        for step in self._steps:
            if step[0] == "ff":
                X, E = _feedforward(step, X, E)
            elif step[0] == "attn":
                X, E = _attention(step, X, E, n)
            if trace is not None:
                trace.append((X, E))
        return X, E

    def states(self, xs) -> list[tuple[IntMatrix, int]]:
        """(X, E) after the embedding and after each sub-layer: token t of input b is column
        b n + t of X / E."""
        trace = []
        self._run(xs, trace)
        d = self.tf.d_model
        return [(IntMatrix(d, X.ncols(), X.entries()[:d * X.ncols()]), E) for X, E in trace]

    def evaluate_batch(self, xs) -> list[Vector]:
        """[T(x) for x in xs], exactly (hardmax ties averaged)."""
        xs = list(xs)
        if not xs:
            return []
        X, E = self._run(xs)
        B, n = len(xs), self.tf.n_tokens
        D, R, m = self._read
        if m == 0:
            return [()] * B
        Y = (R * X).entries()             # m x nB over D E
        t = self.tf.readout.token
        if t is None:   # token mean: sum over the n columns of each input, over n D E
            den = n * D * E
            Y = [sum(Y[c:c + n]) for c in range(0, m * n * B, n)]
        else:
            den = D * E
            Y = Y[t::n]
        # Y is m x B row-major: output b is column b, Y[b::B] / den (fmpq reduces each)
        return [tuple([Q(v, den) for v in Y[b::B]]) for b in range(B)]

    def evaluate(self, x) -> Vector:
        """T(x), exactly."""
        return self.evaluate_batch([x])[0]

    def tokens(self, x) -> list[RatMatrix]:
        """The d_m x n token matrix of one input after the embedding and each sub-layer."""
        return [RatMatrix(X) / E for X, E in self.states([x])]


def _feedforward_step(ff: FeedForward, d: int) -> tuple:
    """The feed-forward x -> x + W2 ReLU(W1 x + b1) + b2 as ("ff", D, L1, L2, N1, N2) with
    X -> D X + L2 L1 X + N2 ReLU(N1 X) on homogeneous columns over D E (D = D1 D2).

    Two hidden units computing ReLU(z) and ReLU(-z) with opposite output columns w and -w
    add w ReLU(z) - w ReLU(-z) = w z: such a pair is one linear unit, in L1 and L2 with the
    bias (a linear unit equal to D1 E, output column D2 b2).  The other units are N1, N2.
    When one (d + 1)-square product is cheaper than two, L1 is None and L2 = D I + L2 L1."""
    D1, A1 = scaled_rows(ff.inner.W, ff.inner.b)    # rows D1 [W1_r | b1_r]
    D2, A2 = scaled_rows(ff.outer.W, ff.outer.b)    # rows D2 [W2_i | b2_i]
    linear, free = [], {}   # free: (row, column) -> the unpaired units with them
    for r, row in enumerate(A1):
        col = tuple(a[r] for a in A2)
        mates = free.get((tuple(-v for v in row), tuple(-c for c in col)))
        if mates:
            linear.append(mates.pop())
        else:
            free.setdefault((tuple(row), col), []).append(r)
    relu = sorted(r for units in free.values() for r in units)
    D = D1 * D2
    L1 = IntMatrix([A1[r] for r in linear] + [[0] * d + [D1]])
    L2 = IntMatrix([[a[r] for r in linear] + [a[-1]] for a in A2] + [[0] * (len(linear) + 1)])
    if 2 * L1.nrows() > d + 1:
        L1, L2 = None, L2 * L1 + IntMatrix(d + 1, d + 1, [D * (i == j) for i in range(d + 1)
                                                           for j in range(d + 1)])
    if not relu:
        return ("ff", D, L1, L2, None, None)
    return ("ff", D, L1, L2, IntMatrix([A1[r] for r in relu]),
            IntMatrix([[a[r] for r in relu] for a in A2] + [[0] * len(relu)]))


def _feedforward(step, X, E):
    """x + W2 ReLU(W1 x + b1) + b2 on every column, over the new denominator D1 D2 E."""
    _, D, L1, L2, N1, N2 = step
    Y = L2 * X if L1 is None else X * D + L2 * (L1 * X)
    if N1 is not None:
        G = [v if v > _ZERO else _ZERO for v in (N1 * X).entries()]
        Y += N2 * IntMatrix(N1.nrows(), X.ncols(), G)
    return Y, D * E


def _attention(step, X, E, n):
    """x_t + sum_h W_O W_V mean_{t' in S_h(t)} x_t', with S_h(t) the hardmax argmax set."""
    _, S, spans, nv, D, O = step
    ncol = X.ncols()
    P = (S * X).entries()   # row r of S X: P[r ncol:(r + 1) ncol]
    winners = []   # (head, first column of the input, winner sets, the set of each query)
    for head in spans:
        keys_at, queries_at = head[0], head[1]
        for c0 in range(0, ncol, n):
            if len(keys_at) == 1:  # score(t', t) = k_t' q_t: the argmax of sign(q_t) k_t'
                a, b = keys_at[0] * ncol + c0, queries_at[0] * ncol + c0
                keys = P[a:a + n]
                which = [(c > _ZERO) - (c < _ZERO) for c in P[b:b + n]]
                sets = {s: hardmax_winners(keys if s > 0 else [s * k for k in keys])
                        for s in set(which)}
            else:
                keys = [[P[r * ncol + c0 + t] for r in keys_at] for t in range(n)]
                queries = [[P[r * ncol + c0 + t] for r in queries_at] for t in range(n)]
                which = range(n)
                sets = {t: hardmax_winners([sum(map(mul, key, query)) for key in keys])
                        for t, query in enumerate(queries)}
            winners.append((head, c0, sets, which))
    # L = lcm of the tie-set sizes that occur (1 when there are no ties): the means
    # L * mean = (L / |S|) * sum_S v stay integral without growing every denominator
    L = lcm(*{len(w) for _, _, sets, _ in winners for w in sets.values()})
    avg = [0] * (nv * ncol)
    for (_, _, values_at, v0), c0, sets, which in winners:
        for i, r in enumerate(values_at):
            vals = P[r * ncol + c0:r * ncol + c0 + n]
            means = {s: (L // len(w)) * sum([vals[u] for u in w]) for s, w in sets.items()}
            row = (v0 + i) * ncol + c0
            avg[row:row + n] = [means[s] for s in which]
    return X * (D * L) + O * IntMatrix(nv, ncol, avg), D * L * E


def evaluate_transformer(tf: Transformer, x) -> Vector:
    """The exact output T(x) of a hardmax Transformer at the rational point x."""
    return TransformerEvaluator(tf).evaluate(x)
