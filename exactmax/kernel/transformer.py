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

from .affine import Affine, Matrix, Vector, scaled_matrix, scaled_rows
from .polyhedron import Domain
from .rational import IntMatrix, Q, RatMatrix, rational

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


def check_transformer_shapes(tf: Transformer) -> None:
    """Raise ValueError (TypeError for an inexact number) unless every matrix has the shape
    construction.md §1 needs; the readers guarantee this for files, this guards Transformers
    built in Python."""
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
    for i, s in enumerate(tf.sublayers):
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
    denominator E (column b n + t is token t of input b), as in ``maxout.py``: a linear map
    with rows scaled by their least common denominator D is one integer matrix product, and
    ReLU, argmax and comparisons are taken on the numerators since D E > 0.  Hardmax averages
    over a tie set S are kept integral by the factor lcm(1..n) / |S| (n = number of tokens).
    """

    __slots__ = ("tf", "_embed", "_pos", "_steps", "_read")

    def __init__(self, tf: Transformer):
        check_transformer_shapes(tf)
        self.tf = tf
        d = tf.d_model
        self._embed = scaled_matrix(tf.embedding, tf.input_dim)
        self._pos = scaled_matrix(tuple(tuple(p[i] for p in tf.positions) for i in range(d)),
                                  tf.n_tokens)
        self._steps = []
        for index, sub in enumerate(tf.sublayers):
            if isinstance(sub, FeedForward):
                D1, A1 = scaled_rows(sub.inner.W, sub.inner.b)
                D2, A2 = scaled_rows(sub.outer.W, sub.outer.b)
                W1 = IntMatrix([r[:-1] for r in A1]) if A1 else None
                b1 = IntMatrix([r[-1:] for r in A1]) if A1 else None
                W2 = IntMatrix([r[:-1] for r in A2]) if A1 else None
                self._steps.append(("ff", D1, W1, b1, D2, W2, IntMatrix([r[-1:] for r in A2])))
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
            DO, O = scaled_matrix(tuple(tuple(v for h in heads for v in h.out[i])
                                        for i in range(d)), sum(len(h.value) for h in heads))
            spans, ks, vs = [], 0, 0
            for h in heads:
                spans.append((ks, ks + len(h.key), vs, vs + len(h.value)))
                ks, vs = ks + len(h.key), vs + len(h.value)
            self._steps.append(("attn", _int_matrix(K, d), _int_matrix(Qm, d), DV,
                                IntMatrix(V), DO, IntMatrix(O), spans))
        D, R = scaled_rows(tf.readout.map.W, tf.readout.map.b)
        self._read = (D, IntMatrix(R) if R else None, len(R))

    def states(self, xs) -> list[tuple[IntMatrix, int]]:
        """(X, E) after the embedding and after each sub-layer: token t of input b is column
        b n + t of X / E."""
        tf, n = self.tf, self.tf.n_tokens
        xs = [tuple(rational(v) for v in x) for x in xs]
        for x in xs:
            if len(x) != tf.input_dim:
                raise ValueError(f"input of length {len(x)}, expected {tf.input_dim}")
        B, d = len(xs), tf.d_model
        U, Ein = RatMatrix(B, tf.input_dim, [v for x in xs for v in x]).transpose().numer_denom()
        DE, Em = self._embed
        DP, Pm = self._pos
        ex = (IntMatrix(Em) * U * DP).entries()          # d x B, over DE Ein DP
        ps = (IntMatrix(Pm) * (DE * Ein)).entries()      # d x n
        X = IntMatrix(d, n * B, [ex[i * B + b] + ps[i * n + t] for i in range(d)
                                 for b in range(B) for t in range(n)])
        E = DE * Ein * DP
        out = [(X, E)]
        for step in self._steps:
            if step[0] == "ff":
                X, E = self._feedforward(step, X, E)
            elif step[0] == "attn":
                X, E = self._attention(step, X, E, B)
            out.append((X, E))
        return out

    @staticmethod
    def _feedforward(step, X, E):
        """x + W2 ReLU(W1 x + b1) + b2 on every column, over the new denominator D2 D1 E."""
        _, D1, W1, b1, D2, W2, b2 = step
        cols = X.ncols()
        ones = IntMatrix(1, cols, [1] * cols)
        if W1 is None:
            Y = b2 * (D1 * E) * ones
        else:
            G = (W1 * X + b1 * E * ones).entries()
            G = IntMatrix(W1.nrows(), cols, [v if v > 0 else 0 for v in G])
            Y = W2 * G + b2 * (D1 * E) * ones
        return X * (D2 * D1) + Y, D2 * D1 * E

    @staticmethod
    def _attention(step, X, E, B):
        """x_t + sum_h W_O W_V mean_{t' in S_h(t)} x_t', with S_h(t) the hardmax argmax set."""
        _, K, Qm, DV, V, DO, O, spans = step
        n = X.ncols() // B
        k, q, v = (K * X).entries(), (Qm * X).entries(), (V * X).entries()
        ncol = n * B
        everyone = list(range(n))
        winners = []   # (head span, input, winner sets per query)
        for k0, k1, v0, v1 in spans:
            for b in range(B):
                c0 = b * n
                if k1 - k0 == 1:  # one key row: score(t', t) = k_t' q_t, decided by sign q_t
                    keys = k[k0 * ncol + c0:k0 * ncol + c0 + n]
                    top, low = max(keys), min(keys)
                    up = [u for u in everyone if keys[u] == top]
                    down = [u for u in everyone if keys[u] == low]
                    wins = [up if c > 0 else down if c < 0 else everyone
                            for c in q[k0 * ncol + c0:k0 * ncol + c0 + n]]
                else:
                    keys = [[k[r * ncol + c0 + t] for r in range(k0, k1)] for t in range(n)]
                    wins = []
                    for t in range(n):
                        query = [q[r * ncol + c0 + t] for r in range(k0, k1)]
                        wins.append(hardmax_winners(
                            [sum(a * c for a, c in zip(key, query)) for key in keys]))
                winners.append((v0, v1, c0, wins))
        # L = lcm of the tie-set sizes that occur (1 when there are no ties): the means
        # L * mean = (L / |S|) * sum_S v stay integral without growing every denominator
        L = lcm(*{len(w) for _, _, _, wins in winners for w in wins}) if winners else 1
        avg = [0] * (V.nrows() * ncol)
        for v0, v1, c0, wins in winners:
            for r in range(v0, v1):
                row = r * ncol + c0
                vals = v[row:row + n]
                for t, win in enumerate(wins):
                    avg[row + t] = (L // len(win)) * sum(vals[u] for u in win)
        A = IntMatrix(V.nrows(), ncol, avg)
        return X * (DO * DV * L) + O * A, DO * DV * L * E

    def evaluate_batch(self, xs) -> list[Vector]:
        """[T(x) for x in xs], exactly (hardmax ties averaged)."""
        xs = list(xs)
        if not xs:
            return []
        X, E = self.states(xs)[-1]
        B, n = len(xs), self.tf.n_tokens
        D, R, m = self._read
        if m == 0:
            return [()] * B
        Y = (R * _with_row(X, E)).entries()             # m x nB over D E
        t = self.tf.readout.token
        if t is None:   # token mean: sum over the n columns of each input, over n D E
            nums = [sum(Y[i * n * B + b * n + s] for s in range(n)) for i in range(m)
                    for b in range(B)]
            den = n * D * E
        else:
            nums = [Y[i * n * B + b * n + t] for i in range(m) for b in range(B)]
            den = D * E
        y = (RatMatrix(IntMatrix(m, B, nums).transpose()) / den).entries()
        return [tuple(y[b * m:(b + 1) * m]) for b in range(B)]

    def evaluate(self, x) -> Vector:
        """T(x), exactly."""
        return self.evaluate_batch([x])[0]

    def tokens(self, x) -> list[RatMatrix]:
        """The d_m x n token matrix of one input after the embedding and each sub-layer."""
        return [RatMatrix(X) / E for X, E in self.states([x])]


def _int_matrix(rows: list[list[int]], ncols: int) -> IntMatrix:
    return IntMatrix(rows) if rows else IntMatrix(0, ncols)


def _with_row(X: IntMatrix, value) -> IntMatrix:
    """X with a constant row appended (the homogeneous coordinate of [W | b])."""
    cols = X.ncols()
    return IntMatrix(X.nrows() + 1, cols, X.entries() + [value] * cols)


def evaluate_transformer(tf: Transformer, x) -> Vector:
    """The exact output T(x) of a hardmax Transformer at the rational point x."""
    return TransformerEvaluator(tf).evaluate(x)
