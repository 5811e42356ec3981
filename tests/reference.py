"""Independent reference semantics in plain ``fractions.Fraction`` (no flint, no scaling), used
by the tests to check the kernel's evaluators.  Deliberately naive: loops straight from the
formulas of docs/notes/construction.md §1."""

from __future__ import annotations

from fractions import Fraction

from exactmax.io.numbers import to_fraction


def F(v) -> Fraction:
    return to_fraction(v)


def maxout_reference(net, x):
    """y = A h^D + c with h^l_i = max_j (w . h^{l-1} + b), all in Fraction."""
    h = [Fraction(v) for v in x]
    for layer in net.layers:
        h = [max(sum((F(w) * hv for w, hv in zip(p.w, h)), Fraction(0)) + F(p.b)
                 for p in u.pieces) for u in layer.units]
    if net.output is None:
        return h
    return [sum((F(w) * hv for w, hv in zip(row, h)), Fraction(0)) + F(c)
            for row, c in zip(net.output.W, net.output.b)]


def _matvec(M, v):
    return [sum((F(a) * b for a, b in zip(row, v)), Fraction(0)) for row in M]


def transformer_reference(tf, x):
    """Hardmax Transformer semantics, token by token, in Fraction."""
    x = [Fraction(v) for v in x]
    n = len(tf.positions)
    Ex = _matvec(tf.embedding, x)
    X = [[e + F(p) for e, p in zip(Ex, tf.positions[t])] for t in range(n)]
    for sub in tf.sublayers:
        if hasattr(sub, "inner"):
            new = []
            for xt in X:
                hid = [max(v + F(c), Fraction(0)) for v, c in zip(_matvec(sub.inner.W, xt),
                                                                  sub.inner.b)]
                out = [v + F(c) for v, c in zip(_matvec(sub.outer.W, hid), sub.outer.b)]
                new.append([a + b for a, b in zip(xt, out)])
            X = new
        else:
            delta = [[Fraction(0)] * len(X[0]) for _ in range(n)]
            for h in sub.heads:
                keys = [_matvec(h.key, xt) for xt in X]
                queries = [_matvec(h.query, xt) for xt in X]
                values = [_matvec(h.value, xt) for xt in X]
                for t in range(n):
                    scores = [F(h.scale) * sum((a * b for a, b in zip(keys[k], queries[t])),
                                               Fraction(0)) for k in range(n)]
                    top = max(scores)
                    win = [k for k in range(n) if scores[k] == top]
                    avg = [sum((values[k][i] for k in win), Fraction(0)) / len(win)
                           for i in range(len(h.value))]
                    o = _matvec(h.out, avg)
                    delta[t] = [a + b for a, b in zip(delta[t], o)]
            X = [[a + b for a, b in zip(xt, dt)] for xt, dt in zip(X, delta)]
    r = tf.readout
    if r.token is None:
        z = [sum((X[t][i] for t in range(n)), Fraction(0)) / n for i in range(len(X[0]))]
    else:
        z = X[r.token]
    return [v + F(c) for v, c in zip(_matvec(r.map.W, z), r.map.b)]


def pre_activations(net, x):
    """z[l][i][j] = w^l_{i,j} . h^{l-1} + b^l_{i,j} at x (plain exact loops)."""
    from exactmax.kernel.affine import dot
    from exactmax.kernel.rational import rational
    h = tuple(rational(v) for v in x)
    out = []
    for layer in net.layers:
        z = [[dot(p.w, h) + p.b for p in u.pieces] for u in layer.units]
        out.append(z)
        h = tuple(max(zi) for zi in z)
    return out
