"""A catalogue of deliberately broken (and of equivalent) variants of a compiled Transformer.

Each mutant is a function (net, compiled) -> Transformer.  ``BROKEN`` must never be proved
equal to the network (refuted, or unknown where the scores become bilinear); ``EQUIVALENT``
changes the Transformer without changing its function, so a sound and complete verifier
proves them (they keep the catalogue honest: a verifier that refutes everything fails)."""

from __future__ import annotations

from dataclasses import replace

from exactmax.construct.transformer import compile_transformer
from exactmax.kernel.affine import Affine
from exactmax.kernel.polyhedron import Box
from exactmax.kernel.rational import Q
from exactmax.kernel.transformer import Attention, FeedForward


def _set(M, i, j, v):
    rows = [list(r) for r in M]
    rows[i][j] = v
    return tuple(tuple(r) for r in rows)


def _sub(tf, index, new):
    subs = list(tf.sublayers)
    subs[index] = new
    return replace(tf, sublayers=tuple(subs))


def _layout(c):
    tf = c.transformer
    k = tf.n_tokens
    W = (tf.d_model - k) // 3
    return W, k


def gate_too_small(net, c):
    """Compiled for a domain 100 times smaller: C_1 no longer bounds the pre-activations."""
    d = net.domain
    small = Box(tuple(v / 100 for v in d.lower), tuple(v / 100 for v in d.upper))
    tf = compile_transformer(net, small).transformer
    return replace(tf, domain=d)


def dropped_residual(net, c):
    """The first clean-up FF returns f(x) instead of x + f(x)."""
    tf = c.transformer
    ff = tf.sublayers[2]
    dm = tf.d_model
    W1 = list(ff.inner.W) + [tuple(Q(1) if j == i else Q(0) for j in range(dm)) for i in range(dm)] \
        + [tuple(Q(-1) if j == i else Q(0) for j in range(dm)) for i in range(dm)]
    b1 = tuple(ff.inner.b) + (Q(0),) * (2 * dm)
    h = len(ff.inner.b)
    W2 = tuple(tuple(row) + tuple(Q(-1) if j == i else Q(0) for j in range(dm))
               + tuple(Q(1) if j == i else Q(0) for j in range(dm)) for i, row in enumerate(ff.outer.W))
    return _sub(tf, 2, FeedForward(Affine(tuple(W1), b1, dm), Affine(W2, ff.outer.b, h + 2 * dm)))


def dropped_sublayer(net, c):
    """The last clean-up FF is missing."""
    tf = c.transformer
    return replace(tf, sublayers=tf.sublayers[:-1])


def heads_swapped(net, c):
    """Heads 0 and 1 of the first attention write to each other's output rows."""
    tf = c.transformer
    att = tf.sublayers[1]
    h0, h1 = att.heads[0], att.heads[1]
    heads = (replace(h0, out=h1.out), replace(h1, out=h0.out)) + att.heads[2:]
    return _sub(tf, 1, Attention(heads, att.kind))


def weight_off(net, c):
    """One weight of the first FF (piece 0 of unit 0, on x_0) off by 1/1000."""
    tf = c.transformer
    ff = tf.sublayers[0]
    W1 = _set(ff.inner.W, 0, 0, ff.inner.W[0][0] + Q(1, 1000))
    return _sub(tf, 0, FeedForward(Affine(W1, ff.inner.b, ff.inner.in_dim), ff.outer))


def bias_one_token(net, c):
    """The gate bias of piece 1 of unit 0, active on token 1 only, off by 1/7."""
    tf = c.transformer
    ff = tf.sublayers[0]
    N = net.layers[0].width
    b1 = list(ff.inner.b)
    b1[N] += Q(1, 7)   # hidden unit (s = 1, i = 0)
    return _sub(tf, 0, FeedForward(Affine(ff.inner.W, tuple(b1), ff.inner.in_dim), ff.outer))


def value_differs_on_one_token(net, c):
    """Head 0's value reads Z_0 + 1/2 P_1: on token 1 the value is not the key."""
    tf = c.transformer
    W, k = _layout(c)
    att = tf.sublayers[1]
    h0 = att.heads[0]
    value = _set(h0.value, 0, 3 * W + 1, Q(1, 2))
    return _sub(tf, 1, Attention((replace(h0, value=value),) + att.heads[1:], att.kind))


def query_depends_on_x(net, c):
    """Head 0's query also reads H_0 = x_0: the scores become bilinear."""
    tf = c.transformer
    att = tf.sublayers[1]
    h0 = att.heads[0]
    query = _set(h0.query, 0, 0, Q(1))
    return _sub(tf, 1, Attention((replace(h0, query=query),) + att.heads[1:], att.kind))


def readout_wrong_block(net, c):
    """The read-out reads the M block (zero at the end) instead of H."""
    tf = c.transformer
    W, _ = _layout(c)
    R = tf.readout.map
    rows = tuple(tuple(row[j - 2 * W] if 2 * W <= j < 3 * W else Q(0) for j in range(len(row)))
                 for row in R.W)
    return replace(tf, readout=replace(tf.readout, map=Affine(rows, R.b, R.in_dim)))


def z_not_cleared(net, c):
    """The first clean-up leaves Z as it is (its Z <- 0 units removed)."""
    tf = c.transformer
    W, _ = _layout(c)
    ff = tf.sublayers[2]
    W2 = tuple(row if not (W <= i < 2 * W) else tuple(Q(0) for _ in row)
               for i, row in enumerate(ff.outer.W))
    return _sub(tf, 2, FeedForward(ff.inner, Affine(W2, ff.outer.b, ff.outer.in_dim)))


def output_weight_off(net, c):
    """The output map folded into the last clean-up is off by 1/1000 in one weight."""
    tf = c.transformer
    W, _ = _layout(c)
    ff = tf.sublayers[-1]
    h = next(i for i, row in enumerate(ff.inner.W) if row[2 * W])  # a unit reading M_0
    W1 = _set(ff.inner.W, h, 2 * W, ff.inner.W[h][2 * W] + Q(1, 1000))
    return _sub(tf, len(tf.sublayers) - 1,
                FeedForward(Affine(W1, ff.inner.b, ff.inner.in_dim), ff.outer))


def positions_swapped(net, c):
    """EQUIVALENT: tokens 0 and 1 exchange positions (the max over tokens is symmetric)."""
    tf = c.transformer
    p = list(tf.positions)
    p[0], p[1] = p[1], p[0]
    return replace(tf, positions=tuple(p))


def readout_other_token(net, c):
    """EQUIVALENT: every token holds the output at the end, so token 1 will do."""
    tf = c.transformer
    return replace(tf, readout=replace(tf.readout, token=1))


def head_scale_changed(net, c):
    """EQUIVALENT: hardmax ignores a positive scale."""
    tf = c.transformer
    att = tf.sublayers[1]
    return _sub(tf, 1, Attention(tuple(replace(h, scale=Q(7, 3)) for h in att.heads), att.kind))


BROKEN = [gate_too_small, dropped_residual, dropped_sublayer, heads_swapped, weight_off,
          bias_one_token, value_differs_on_one_token, query_depends_on_x, readout_wrong_block,
          z_not_cleared, output_weight_off]
EQUIVALENT = [positions_swapped, readout_other_token, head_scale_changed]
