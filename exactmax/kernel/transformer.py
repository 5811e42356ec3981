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

from .affine import Affine, Matrix, Vector
from .polyhedron import Domain
from .rational import ONE, Q, RatMatrix, rational

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


def _mat(rows: Matrix, ncols: int) -> RatMatrix:
    return RatMatrix(len(rows), ncols, [v for row in rows for v in row])


def _augmented(a: Affine) -> RatMatrix:
    """[W | b], which maps the column [x; 1] to W x + b."""
    return RatMatrix(a.out_dim, a.in_dim + 1, [v for row, c in zip(a.W, a.b) for v in (*row, c)])


def hardmax_weights(scores: list[list[Q]]) -> list[list[Q]]:
    """a[t'][t] = 1/|S_t| if t' in S_t = argmax_{t'} scores[t'][t], else 0 (ties averaged)."""
    n_keys, n_queries = len(scores), len(scores[0])
    a = [[Q(0)] * n_queries for _ in range(n_keys)]
    for t in range(n_queries):
        column = [scores[k][t] for k in range(n_keys)]
        top = max(column)
        winners = [k for k in range(n_keys) if column[k] == top]
        w = ONE / len(winners)
        for k in winners:
            a[k][t] = w
    return a


class TransformerEvaluator:
    """Exact hardmax evaluation of one Transformer, with its matrices prepared once."""

    __slots__ = ("tf", "_steps", "_embed", "_pos", "_read")

    def __init__(self, tf: Transformer):
        self.tf = tf
        d, n = tf.d_model, tf.n_tokens
        self._embed = _mat(tf.embedding, tf.input_dim)
        self._pos = RatMatrix(d, n, [tf.positions[t][i] for i in range(d) for t in range(n)])
        self._steps = []
        for index, sub in enumerate(tf.sublayers):
            if isinstance(sub, FeedForward):
                self._steps.append(("ff", _augmented(sub.inner), _augmented(sub.outer)))
            elif sub.kind != HARDMAX:
                raise ValueError(f"sublayers[{index}] uses {sub.kind} attention, which has no "
                                 "exact rational value; only hardmax is evaluated exactly")
            else:
                heads = [(_mat(h.query, d), _mat(h.key, d), _mat(h.value, d),
                          _mat(h.out, len(h.value)), h.scale) for h in sub.heads]
                for h in heads:
                    if not h[4] > 0:
                        raise ValueError(f"sublayers[{index}]: head scale must be positive")
                self._steps.append(("attn", heads))
        self._read = _augmented(tf.readout.map)

    def tokens(self, x) -> list[RatMatrix]:
        """The token matrix (d_m x n, column t = token t) after the embedding and after each
        sub-layer: element 0 is E x + p_t, element s is the state after sub-layer s."""
        x = [rational(v) for v in x]
        if len(x) != self.tf.input_dim:
            raise ValueError(f"input of length {len(x)}, expected {self.tf.input_dim}")
        n = self.tf.n_tokens
        X = self._embed * RatMatrix(len(x), 1, x) * RatMatrix(1, n, [ONE] * n) + self._pos
        states = [X]
        for step in self._steps:
            if step[0] == "ff":
                _, inner, outer = step
                H = inner * _with_ones(X)
                H = RatMatrix(H.nrows(), n, [v if v > 0 else Q(0) for v in H.entries()])
                X = X + outer * _with_ones(H)
            else:
                update = None
                for Wq, Wk, Wv, Wo, scale in step[1]:
                    S = (Wk * X).transpose() * (Wq * X)  # S[t', t] = <K x_t', Q x_t>
                    scores = [[scale * S[k, t] for t in range(n)] for k in range(n)]
                    A = hardmax_weights(scores)
                    head = Wo * (Wv * X) * RatMatrix(n, n, [v for row in A for v in row])
                    update = head if update is None else update + head
                if update is not None:
                    X = X + update
            states.append(X)
        return states

    def evaluate(self, x) -> Vector:
        """T(x), exactly (hardmax ties averaged)."""
        X = self.tokens(x)[-1]
        n = self.tf.n_tokens
        t = self.tf.readout.token
        if t is None:
            z = X * RatMatrix(n, 1, [ONE / n] * n)
        else:
            z = RatMatrix(X.nrows(), 1, [X[i, t] for i in range(X.nrows())])
        y = self._read * _with_ones(z)
        return tuple(y[i, 0] for i in range(y.nrows()))


def _with_ones(X: RatMatrix) -> RatMatrix:
    """X with a row of ones appended."""
    n = X.ncols()
    return RatMatrix(X.nrows() + 1, n, X.entries() + [ONE] * n)


def evaluate_transformer(tf: Transformer, x) -> Vector:
    """The exact output T(x) of a hardmax Transformer at the rational point x."""
    return TransformerEvaluator(tf).evaluate(x)
