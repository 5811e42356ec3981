"""Batched exact hardmax evaluation of Transformers on radix-2^21 integer arrays.

The semantics of docs/notes/construction.md §1 and the integer scaling of the integer-scaled
evaluator (``scaled.py``): all tokens of all inputs are the columns c = b n + t of one
integer array X over one common denominator E; a linear map with rows scaled by their least
common denominator is one exact product; ReLU, argmax and comparisons are taken on numerators;
a hardmax mean over a tie set S is kept integral as (L / |S|) sum_S, L = lcm of the tie-set
sizes that occur.  Each step works on whole arrays: the argmax sets of all heads with one
key row at once (their score k_t' q_t is decided by max_t' k_t', min_t' k_t' and the sign of
q_t), and heads with several key rows through one exact batched inner product.
"""

from __future__ import annotations

from math import lcm

import numpy as np

from ..kernel.affine import Vector
from ..kernel.rational import ONE, ZERO, RatMatrix, rational
from ..kernel.transformer import HARDMAX, FeedForward, Transformer, check_transformer_shapes
from .integers import (
    CHUNK,
    IntArray,
    IntMatrixDigits,
    add,
    add_rows,
    at_least,
    carry,
    equal,
    inner_products,
    matmul,
    maximum,
    minimum,
    one_blas_thread,
    relu,
    scale,
    signs,
)
from .scaled import common_denominator, scaled_matrix, scaled_rows

FEW = 8
"""Batches of at most FEW inputs compare all pairs of keys at once (measured faster there)."""

MAX_TOKENS = 24
"""Tie weights L / |S| <= lcm(1..24) < 2^33 keep every weighted digit sum below 2^62."""


def supports(tf: Transformer) -> bool:
    """Whether this evaluator takes ``tf`` (hardmax only, at most MAX_TOKENS tokens, key
    dimensions at most CHUNK); the integer-scaled evaluator takes every hardmax Transformer."""
    for s in tf.sublayers:
        if not isinstance(s, FeedForward):
            if s.kind != HARDMAX or any(len(h.key) > CHUNK for h in s.heads):
                return False
    return 0 < tf.n_tokens <= MAX_TOKENS


def _affine(rows: list[list[int]], width: int, drop_zero_rows: bool = False) -> IntMatrixDigits:
    """The map x -> W x + b e of the scaled rows [W | b]."""
    return IntMatrixDigits.from_rows(
        [r[:-1] for r in rows], width, [r[-1] for r in rows], drop_zero_rows
    )


def _feedforward_step(sub: FeedForward, d: int) -> tuple:
    """A feed-forward sub-layer x + W2 ReLU(W1 x + b1) + b2 as S x + s + W2' ReLU(W1' x + b1').

    Hidden units i, j with (W1_j, b1_j) = -(W1_i, b1_i) and W2 e_j = -W2 e_i add
    W2 e_i (ReLU(u) - ReLU(-u)) = W2 e_i u, u = W1_i x + b1_i: a linear term, so they move into
    S = I + sum W2 e_i W1_i and s = b2 + sum W2 e_i b1_i (exact rationals) and need no ReLU.
    The clean-up sub-layers of docs/notes/construction.md §2 (u = ReLU(u) - ReLU(-u)) are all such
    pairs and become one sparse linear map.  Scaled: with D1 the denominator of (W1', b1'), D2 that
    of W2' and Dt = lcm(den(S, s), D1 D2), the new numerators over Dt E are
    Dt [S | s] [X; E] + (Dt / D1) W2' ReLU(D1 [W1' | b1'] [X; E])."""
    W1, b1, W2, b2 = sub.inner.W, sub.inner.b, sub.outer.W, sub.outer.b
    h = len(b1)
    col = [tuple(W2[r][j] for r in range(d)) for j in range(h)]
    unpaired: dict[tuple, list[int]] = {}
    pairs = []
    for j in range(h):
        key = (tuple(W1[j]), b1[j], col[j])
        neg = (tuple(-v for v in W1[j]), -b1[j], tuple(-v for v in col[j]))
        if key != neg and unpaired.get(neg):
            pairs.append((unpaired[neg].pop(), j))
        else:
            unpaired.setdefault(key, []).append(j)
    rest = sorted(j for js in unpaired.values() for j in js)
    S = [[ONE if r == c else ZERO for c in range(d)] for r in range(d)]
    sb = list(b2)
    for i, _ in pairs:
        for r in range(d):
            if col[i][r]:
                for c in range(d):
                    if W1[i][c]:
                        S[r][c] += col[i][r] * W1[i][c]
                sb[r] += col[i][r] * b1[i]
    D1 = common_denominator([v for j in rest for v in W1[j]] + [b1[j] for j in rest])
    D2 = common_denominator(col[j][r] for j in rest for r in range(d))
    Dt = lcm(common_denominator([v for row in S for v in row] + sb), D1 * D2)
    skip = IntMatrixDigits.from_rows(
        [[int(v * Dt) for v in row] for row in S], d, [int(v * Dt) for v in sb]
    )
    if not rest:
        return ("ff", Dt, skip, None, None)
    inner = IntMatrixDigits.from_rows(
        [[int(v * D1) for v in W1[j]] for j in rest], d, [int(b1[j] * D1) for j in rest]
    )
    outer = IntMatrixDigits.from_rows(
        [[int(col[j][r] * (Dt // D1)) for j in rest] for r in range(d)],
        len(rest),
        drop_zero_rows=True,
    )
    return ("ff", Dt, skip, inner, outer)


class VectorizedTransformerEvaluator:
    """Exact hardmax evaluation of one Transformer for a batch of inputs, prepared once."""

    __slots__ = ("tf", "_embed", "_pos", "_steps", "_read")

    def __init__(self, tf: Transformer):
        check_transformer_shapes(tf)
        if not supports(tf):
            raise ValueError(
                "this Transformer needs the kernel's evaluator (softmax attention, "
                f"more than {MAX_TOKENS} tokens or very wide keys)"
            )
        self.tf = tf
        d = tf.d_model
        DE, Em = scaled_matrix(tf.embedding, tf.input_dim)
        self._embed = (DE, IntMatrixDigits.from_rows(Em, tf.input_dim))
        DP, Pm = scaled_matrix(
            tuple(tuple(p[i] for p in tf.positions) for i in range(d)), tf.n_tokens
        )
        self._pos = (DP, Pm)
        self._steps = []
        for sub in tf.sublayers:
            if isinstance(sub, FeedForward):
                self._steps.append(_feedforward_step(sub, d))
                continue
            heads = [h for h in sub.heads if h.value]  # a head without values adds nothing
            if not heads:
                continue
            K = scaled_matrix(tuple(r for h in heads for r in h.key), d)[1]
            Qm = scaled_matrix(tuple(r for h in heads for r in h.query), d)[1]
            DV, V = scaled_matrix(tuple(r for h in heads for r in h.value), d)
            DO, O = scaled_matrix(
                tuple(tuple(v for h in heads for v in h.out[i]) for i in range(d)),
                sum(len(h.value) for h in heads),
            )
            single: list[tuple[int, int, int]] = []
            general: list[tuple[int, int, int]] = []
            value_head: list[int] = []
            ks = 0
            for index, h in enumerate(heads):
                (single if len(h.key) == 1 else general).append((index, ks, ks + len(h.key)))
                ks += len(h.key)
                value_head += [index] * len(h.value)
            # Equal rows are computed once: in compiled models all heads share one query row
            # and the keys are the values.
            unique_q = list(dict.fromkeys(map(tuple, Qm)))
            q_of = np.array([unique_q.index(tuple(r)) for r in Qm], dtype=np.intp)
            self._steps.append(
                (
                    "attn",
                    IntMatrixDigits.from_rows(K, d) if K else None,
                    (IntMatrixDigits.from_rows(unique_q, d), q_of) if Qm else None,
                    DV,
                    None if V == K else IntMatrixDigits.from_rows(V, d),
                    DO,
                    IntMatrixDigits.from_rows(O, len(V), drop_zero_rows=True),
                    len(heads),
                    single,
                    general,
                    np.array(value_head),
                )
            )
        D, Rm = scaled_rows(tf.readout.map.W, tf.readout.map.b)
        self._read = (D, _affine(Rm, d) if Rm else None, len(Rm))

    def _embedding(self, xs) -> tuple[IntArray, int]:
        """(X, E): column b n + t of X / E is token t of input b, E x_b + p_t."""
        tf, n, B = self.tf, self.tf.n_tokens, len(xs)
        U, den = RatMatrix(B, tf.input_dim, [v for x in xs for v in x]).transpose().numer_denom()
        Ein = int(den)
        (DE, Em), (DP, Pm) = self._embed, self._pos
        u = IntArray.from_ints(map(int, U.entries()), (tf.input_dim, B))
        ex = scale(matmul(Em, u), DP)  # over DE Ein DP
        ps = IntArray.from_ints([v * DE * Ein for row in Pm for v in row], (tf.d_model, n))
        X = add(ex.reshape(tf.d_model, B, 1), ps.reshape(tf.d_model, 1, n))
        return X.reshape(tf.d_model, B * n), DE * Ein * DP

    @staticmethod
    def _feedforward(step, X: IntArray, E: int) -> tuple[IntArray, int]:
        """S x + s + W2' ReLU(W1' x + b1') on every column (see ``_feedforward_step``), over
        Dt E."""
        _, Dt, skip, inner, outer = step
        Y = matmul(skip, X, E)
        if inner is not None:
            G = relu(matmul(inner, X, E), owned=True)
            Y = add_rows(Y, outer.row_index, matmul(outer, G), owned=True)
        return Y, Dt * E

    @staticmethod
    def _attention(step, X: IntArray, E: int, B: int) -> tuple[IntArray, int]:
        """x_t + sum_h W_O W_V mean_{t' in S_h(t)} x_t', S_h(t) the hardmax argmax set."""
        _, K, Qm, DV, V, DO, O, H, single, general, value_head = step
        n = X.shape[1] // B
        wins = np.ones((H, B, n, n), dtype=bool)  # wins[h, b, t, t']: t' in S_h(t)
        if K is not None:
            k = matmul(K, X).reshape(K.rows, B, n)
            q = matmul(Qm[0], X)[Qm[1]].reshape(K.rows, B, n)
        if single:
            heads = [h for h, _, _ in single]
            rows = [r for _, r, _ in single]
            keys = k[rows]  # (heads, B, n)
            up: np.ndarray
            down: np.ndarray
            if B <= FEW:  # all n^2 comparisons at once: fewer, larger steps
                ge = at_least(keys[:, :, :, None], keys[:, :, None, :])  # k_t' >= k_u
                # argmax, argmin sets (heads, B, t'); asarray: no copy, an array for mypy
                up, down = np.asarray(ge.all(axis=3)), np.asarray(ge.all(axis=2))
            else:  # n - 1 running maxima and minima: less work per input
                top, low = keys[:, :, 0], keys[:, :, 0]
                for t in range(1, n):
                    top, low = maximum(top, keys[:, :, t]), minimum(low, keys[:, :, t])
                up = equal(keys, top.reshape(len(rows), B, 1))
                down = equal(keys, low.reshape(len(rows), B, 1))
            sq = signs(q[rows])[..., None]  # (heads, B, t, 1)
            wins[heads] = np.where(
                sq > 0, up[:, :, None, :], np.where(sq < 0, down[:, :, None, :], True)
            )
        for h, r0, r1 in general:
            if r0 == r1:
                continue  # no key rows: every score is 0
            s = inner_products(q[r0:r1], k[r0:r1])  # s[b, t, t'] = <q_t, k_t'>
            wins[h] = at_least(s[:, :, :, None], s[:, :, None, :]).all(axis=3)
        size = wins.sum(axis=3)  # |S_h(t)|, all >= 1
        L = lcm(*np.flatnonzero(np.bincount(size.ravel(), minlength=2)).tolist())
        v = k if V is None else matmul(V, X).reshape(V.rows, B, n)
        if L == 1:  # no ties: the mean is the winner
            first = wins.argmax(axis=3)[value_head]  # (value rows, B, t)
            A = IntArray(np.take_along_axis(v.digits, first[None], axis=3), v.bound)
        else:
            weight = np.where(wins, (L // size)[..., None], 0)  # (H, B, t, t')
            w = weight[value_head]  # (value rows, B, t, t')
            acc = np.zeros((v.digits.shape[0],) + w.shape[:3], np.int64)
            for t in range(n):
                acc += w[None, :, :, :, t] * v.digits[:, :, :, t, None]
            A = carry(acc, L * v.bound, owned=True)
        A = A.reshape(A.shape[0], B * n)
        return add_rows(scale(X, DO * DV * L), O.row_index, matmul(O, A)), DO * DV * L * E

    def evaluate_batch(self, xs) -> list[Vector]:
        with one_blas_thread():
            return self._evaluate_batch(xs)

    def _evaluate_batch(self, xs) -> list[Vector]:
        """[T(x) for x in xs], exactly (hardmax ties averaged)."""
        tf = self.tf
        xs = [tuple(rational(v) for v in x) for x in xs]
        for x in xs:
            if len(x) != tf.input_dim:
                raise ValueError(f"input of length {len(x)}, expected {tf.input_dim}")
        B, n = len(xs), tf.n_tokens
        if B == 0:
            return []
        D, Rm, m = self._read
        if m == 0 or Rm is None:  # Rm is None when m = 0
            return [()] * B
        X, E = self._embedding(xs)
        for step in self._steps:
            if step[0] == "ff":
                X, E = self._feedforward(step, X, E)
            else:
                X, E = self._attention(step, X, E, B)
        Y = matmul(Rm, X, E).reshape(m, B, n)  # over D E
        if tf.readout.token is None:  # token mean: the sum over the n tokens, over n D E
            y, den = Y[:, :, 0], n * D * E
            for t in range(1, n):
                y = add(y, Y[:, :, t])
        else:
            y, den = Y[:, :, tf.readout.token], D * E
        out = (RatMatrix(y.to_int_matrix().transpose()) / den).entries()
        return [tuple(out[b * m : (b + 1) * m]) for b in range(B)]

    def evaluate(self, x) -> Vector:
        """T(x), exactly."""
        return self.evaluate_batch([x])[0]
