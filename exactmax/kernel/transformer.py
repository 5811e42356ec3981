"""Transformers over Q (construction.md §1), hardmax attention: n tokens in Q^{d_m},
token t starting as E x + p_t, then sub-layers with residuals: attention x_t <- x_t + sum_h W_O^h
W_V^h sum_{t'} a_h(t', t) x_{t'}, scores s_h(t', t) = lambda_h <W_K^h x_{t'}, W_Q^h x_t>, a_h(.,
t) uniform over the keys t' of maximal score (*hardmax*); feed-forward x_t <- x_t + W_2 ReLU(W_1
x_t + b_1) + b_2.  Read-out y = R z + r, z a token or the token mean.  No layer norm; softmax has no
exact value.  ``evaluate_transformer`` computes these exactly (confirming every refutation)."""

from dataclasses import dataclass, field

from .affine import Affine, Matrix, SparseVector, Vector, nonzero
from .maxout import check_matrix
from .polyhedron import Domain
from .rational import ZERO, Q, RatMatrix, rational

HARDMAX, SOFTMAX = "hardmax", "softmax"


@dataclass(frozen=True, slots=True)
class Head:  # W_Q, W_K, W_V in Q^{s x d_m}, W_O in Q^{d_m x s}, scale > 0
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
class FeedForward:  # x -> x + W_2 ReLU(W_1 x + b_1) + b_2
    inner: Affine  # W_1, b_1
    outer: Affine  # W_2, b_2


Sublayer = Attention | FeedForward


@dataclass(frozen=True, slots=True)
class Readout:  # y = R z + r, z token ``token`` (0-based), or the token mean if None
    map: Affine
    token: int | None = 0


@dataclass(frozen=True, slots=True)
class Transformer:
    input_dim: int
    d_model: int
    embedding: Matrix  # E in Q^{d_m x input_dim}
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
    """Raise ValueError (TypeError for an inexact number) unless every matrix (of the given
    sub-layers only, if ``sublayers``) has the shape construction.md §1 needs."""
    d, dm = tf.input_dim, tf.d_model
    check_matrix(tf.embedding, dm, d, "the embedding")
    if not tf.positions:
        raise ValueError("a Transformer needs at least one token")
    check_matrix(tf.positions, len(tf.positions), dm, "the positions")
    for i in range(len(tf.sublayers)) if sublayers is None else sublayers:
        s = tf.sublayers[i]
        if isinstance(s, FeedForward):
            check_matrix(s.inner.W, len(s.inner.b), dm, f"sub-layer {i}: W1, b1", s.inner.b)
            check_matrix(s.outer.W, dm, len(s.inner.b), f"sub-layer {i}: W2, b2", s.outer.b)
            continue
        for j, h in enumerate(s.heads):
            where = f"sub-layer {i}, head {j}"
            check_matrix(h.key, len(h.key), dm, f"{where}: key")
            check_matrix(h.query, len(h.key), dm, f"{where}: query")
            check_matrix(h.value, len(h.value), dm, f"{where}: value")
            check_matrix(h.out, dm, len(h.value), f"{where}: out")
            check_matrix(((h.scale,),), 1, 1, f"{where}: the scale")
            if not h.scale > 0:
                raise ValueError(f"{where}: the scale must be positive")
    r = tf.readout
    check_matrix(r.map.W, len(r.map.b), dm, "the read-out", r.map.b)
    if r.token is not None and not 0 <= r.token < len(tf.positions):
        raise ValueError(f"read-out token {r.token} does not exist")


def hardmax_winners(scores: list) -> list[int]:  # the argmax set {t' : scores[t'] = max scores}
    top = max(scores)
    return [k for k, v in enumerate(scores) if v == top]


def _matrix(M, cols: int) -> RatMatrix:
    if not isinstance(M, SparseVector) and not any(isinstance(r, SparseVector) for r in M):
        return RatMatrix(len(M), cols, [v for row in M for v in row])
    out = RatMatrix(len(M), cols)
    for i, row in nonzero(M):
        for j, v in nonzero(row):
            out[i, j] = v
    return out


def evaluate_transformer(tf: Transformer, x) -> Vector:
    """The exact T(x) at a rational x (X: the d_m x n tokens; b 1^T: b added to each column)."""
    check_transformer_shapes(tf)
    x = tuple(rational(v) for v in x)
    if len(x) != tf.input_dim:
        raise ValueError(f"input of length {len(x)}, expected {tf.input_dim}")
    dm, n, ones = tf.d_model, tf.n_tokens, RatMatrix(1, tf.n_tokens, [1] * tf.n_tokens)
    X = _matrix(tf.embedding, tf.input_dim) * _matrix([[v] for v in x], 1) * ones
    X += _matrix(tf.positions, dm).transpose()
    for index, sub in enumerate(tf.sublayers):
        if isinstance(sub, FeedForward):
            H = _matrix(sub.inner.W, dm) * X + _matrix([[v] for v in sub.inner.b], 1) * ones
            H = RatMatrix(H.nrows(), n, [max(v, ZERO) for v in H.entries()])  # ReLU
            X += _matrix(sub.outer.W, len(sub.inner.b)) * H
            X += _matrix([[v] for v in sub.outer.b], 1) * ones
            continue
        if sub.kind != HARDMAX:
            raise ValueError(f"sublayers[{index}]: {sub.kind} attention has no exact value")
        update = RatMatrix(dm, n)
        for h in sub.heads:
            K, Qm, V = (_matrix(M, dm) * X for M in (h.key, h.query, h.value))
            S = K.transpose() * Qm * h.scale  # S[t', t] = s_h(t', t)
            A = RatMatrix(n, n)  # A[t', t] = 1/|W_t| on the argmax set W_t of S[., t], else 0
            for t in range(n):
                win = hardmax_winners([S[u, t] for u in range(n)])
                for u in win:
                    A[u, t] = Q(1, len(win))
            update += _matrix(h.out, len(h.value)) * V * A
        X += update
    r = tf.readout
    read = range(n) if r.token is None else (r.token,)  # z = the mean of the tokens read
    z = [sum((X[i, t] for t in read), ZERO) / len(read) for i in range(dm)]
    return tuple(sum((a * v for a, v in zip(row, z)), ZERO) + c for row, c in zip(r.map.W, r.map.b))
