"""Evaluation of a Transformer with *softmax* attention in rigorous ball arithmetic.

Softmax weights exp(lambda s) / sum exp(lambda s) are not rational, so this is not exact: every
number is an ``arb`` ball (python-flint, outward rounding) at ``precision`` bits, and the true
value lies in the ball returned.  Untrusted for "proved"; it shows the approximation.
"""

from __future__ import annotations

from contextlib import contextmanager

from flint import arb, arb_mat, ctx

from ..kernel.rational import Q
from ..kernel.transformer import FeedForward, Transformer


@contextmanager
def precision(bits: int):
    """Run with python-flint's working precision set to ``bits`` (restored afterwards)."""
    old = ctx.prec
    ctx.prec = bits
    try:
        yield
    finally:
        ctx.prec = old


def _mat(rows, ncols) -> arb_mat:
    return arb_mat(len(rows), ncols, [arb(v) for row in rows for v in row])


def _relu(x: arb) -> arb:
    """The ball hull of ReLU over the ball x."""
    if x > 0:
        return x
    if x <= 0:
        return arb(0)
    return arb(0).union(x.upper())


def _softmax_column(scores: list[arb]) -> list[arb]:
    m = max(scores, key=lambda s: s.mid()).mid()
    e = [(s - m).exp() for s in scores]
    total = sum(e[1:], e[0])
    return [v / total for v in e]


def evaluate_softmax(tf: Transformer, x, lam: Q | None = None, bits: int = 256) -> list[arb]:
    """T(x) with every attention sub-layer using softmax at scale ``lam * scale_h`` (or the
    file's own ``scale_h`` when ``lam`` is None), as balls at ``bits`` bits of precision."""
    with precision(bits):
        n, d = tf.n_tokens, tf.d_model
        xin = arb_mat(len(x), 1, [arb(v) for v in x])
        ones = arb_mat(1, n, [arb(1)] * n)
        X = _mat(tf.embedding, tf.input_dim) * xin * ones + arb_mat(
            d, n, [arb(tf.positions[t][i]) for i in range(d) for t in range(n)]
        )
        for sub in tf.sublayers:
            if isinstance(sub, FeedForward):
                H = _mat(sub.inner.W, d) * X + _mat([[c] * n for c in sub.inner.b], n)
                H = arb_mat(
                    H.nrows(), n, [_relu(H[i, t]) for i in range(H.nrows()) for t in range(n)]
                )
                X = (
                    X
                    + _mat(sub.outer.W, sub.outer.in_dim) * H
                    + _mat([[c] * n for c in sub.outer.b], n)
                )
            else:
                update = arb_mat(d, n)
                for h in sub.heads:
                    scale = arb(h.scale) * (arb(lam) if lam is not None else arb(1))
                    S = (_mat(h.key, d) * X).transpose() * (_mat(h.query, d) * X)
                    A = arb_mat(n, n)
                    for t in range(n):
                        w = _softmax_column([scale * S[k, t] for k in range(n)])
                        for k in range(n):
                            A[k, t] = w[k]
                    update = update + _mat(h.out, len(h.value)) * (_mat(h.value, d) * X) * A
                X = X + update
        r = tf.readout
        if r.token is None:
            z = X * arb_mat(n, 1, [arb(1) / n] * n)
        else:
            z = arb_mat(d, 1, [X[i, r.token] for i in range(d)])
        y = _mat(r.map.W, d) * z + arb_mat(r.map.out_dim, 1, [arb(c) for c in r.map.b])
        return [y[i, 0] for i in range(y.nrows())]


def ball_strings(b: arb, bits: int) -> tuple[str, str]:
    """(midpoint, radius) of a ball as decimal strings (midpoint to about bits * 0.30 digits)."""
    digits = max(10, int(bits * 0.30103) - 2)
    return b.mid().str(digits, radius=False), b.rad().str(3, radius=False)
