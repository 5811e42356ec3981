"""Straight-line programs over Q, and the translation of both kinds of network into them.

A program on inputs x in Q^d is a list of nodes, each defining one rational value:

- ``Lin``:     v = sum_i a_i x_i + c + sum_j c_j v_j  (earlier nodes j);
- ``Max``:     v = max of earlier nodes;
- ``Hardmax``: pairs (s_j, v_j) of earlier nodes; v = the mean of the v_j whose s_j is maximal.

Certificates (``certificate.py``) speak about programs; this module is the trusted bridge from
the networks a user wrote to the programs a certificate is checked against.  The translation
uses one algebraic identity, applied where a feed-forward layer has the shape:
    c ReLU(u) - c ReLU(-u) = c u           (two hidden units with opposite pre-activations and
                                            opposite output columns),
so that exact linear maps written with ReLU pairs (the construction's clean-up) stay linear.
Attention scores must be linear in the tokens: every query must be a constant (independent of
x); otherwise the scores are bilinear and ``Unsupported`` is raised.
"""

from __future__ import annotations

from dataclasses import dataclass

from .maxout import MaxoutNetwork
from .rational import ONE, Q, ZERO, rational
from .transformer import Attention, FeedForward, Transformer


@dataclass(frozen=True, slots=True)
class Lin:
    x: tuple[tuple[int, Q], ...]       # sparse coefficients of the inputs
    c: Q
    terms: tuple[tuple[int, Q], ...]   # sparse coefficients of earlier nodes


@dataclass(frozen=True, slots=True)
class Max:
    args: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Hardmax:
    pairs: tuple[tuple[int, int], ...]  # (score node, value node)


Node = Lin | Max | Hardmax


@dataclass(frozen=True, slots=True)
class Program:
    dim: int
    nodes: tuple[Node, ...]
    outputs: tuple[int, ...]


class Unsupported(ValueError):
    """The network has a feature no certificate can speak about (e.g. bilinear scores)."""


def evaluate_program(p: Program, x) -> tuple[Q, ...]:
    """The outputs of p at x, exactly."""
    x = [rational(v) for v in x]
    val: list[Q] = []
    for node in p.nodes:
        if isinstance(node, Lin):
            v = node.c
            for i, a in node.x:
                v += a * x[i]
            for j, a in node.terms:
                v += a * val[j]
        elif isinstance(node, Max):
            v = max(val[j] for j in node.args)
        else:
            top = max(val[s] for s, _ in node.pairs)
            win = [val[v_] for s, v_ in node.pairs if val[s] == top]
            v = sum(win, ZERO) / len(win)
        val.append(v)
    return tuple(val[o] for o in p.outputs)


# ------------------------------------------------------------------- building programs

class _Builder:
    """Nodes with hash-consing; expressions are (x: dict, c, terms: dict) linear forms."""

    def __init__(self, dim: int):
        self.dim, self.nodes, self.index = dim, [], {}

    def add(self, node: Node) -> int:
        if node in self.index:
            return self.index[node]
        self.nodes.append(node)
        self.index[node] = len(self.nodes) - 1
        return len(self.nodes) - 1

    def node_of(self, e) -> int:
        """The node holding the value of expression e (e itself if it is one node)."""
        xs, c, terms = e
        if not xs and not c and len(terms) == 1:
            (j, a), = terms.items()
            if a == 1:
                return j
        return self.add(Lin(tuple(sorted(xs.items())), c, tuple(sorted(terms.items()))))


def _expr(xs=None, c=ZERO, terms=None):
    return (dict(xs or {}), c, dict(terms or {}))


def _axpy(acc, a: Q, e) -> None:
    """acc += a * e (in place)."""
    if not a:
        return
    xs, c, terms = e
    for i, v in xs.items():
        s = acc[0].get(i, ZERO) + a * v
        if s:
            acc[0][i] = s
        else:
            acc[0].pop(i, None)
    for j, v in terms.items():
        s = acc[2].get(j, ZERO) + a * v
        if s:
            acc[2][j] = s
        else:
            acc[2].pop(j, None)
    acc_c = acc[1] + a * c
    acc[:] = [acc[0], acc_c, acc[2]]


def _combine(row, vec, const) -> list:
    """sum_k row[k] vec[k] + const as a mutable expression [xs, c, terms]."""
    acc = [{}, const, {}]
    for a, e in zip(row, vec):
        if a:
            _axpy(acc, a, e)
    return acc


def _is_constant(e) -> bool:
    return not e[0] and not e[2]


def program_of_maxout(net: MaxoutNetwork) -> Program:
    """The program of h^l_i = max_j (w . h^{l-1} + b), y = A h^D + c."""
    b = _Builder(net.input_dim)
    h = [_expr({i: ONE}) for i in range(net.input_dim)]
    for layer in net.layers:
        new = []
        for unit in layer.units:
            args = tuple(b.node_of(_combine(p.w, h, p.b)) for p in unit.pieces)
            new.append(_expr(terms={args[0]: ONE}) if len(args) == 1 else
                       _expr(terms={b.add(Max(args)): ONE}))
        h = new
    if net.output is not None:
        outs = [b.node_of(_combine(row, h, c)) for row, c in zip(net.output.W, net.output.b)]
    else:
        outs = [b.node_of(e) for e in h]
    return Program(net.input_dim, tuple(b.nodes), tuple(outs))


def _opposite_pairs(ff: FeedForward) -> dict[int, int]:
    """Hidden units h1 < h2 with W1[h2] = -W1[h1], b1[h2] = -b1[h1], W2[:, h2] = -W2[:, h1]."""
    W1, b1, W2 = ff.inner.W, ff.inner.b, ff.outer.W
    seen, pairs = {}, {}
    for h in range(len(b1)):
        key = (W1[h], b1[h], tuple(row[h] for row in W2))
        neg = (tuple(-v for v in W1[h]), -b1[h], tuple(-row[h] for row in W2))
        if neg in seen and seen[neg] not in pairs and seen[neg] not in pairs.values():
            pairs[seen[neg]] = h
        else:
            seen.setdefault(key, h)
    return pairs


def program_of_transformer(tf: Transformer) -> Program:
    """The program of the hardmax Transformer of construction.md §1 (read-out included)."""
    b = _Builder(tf.input_dim)
    zero = None
    X = []
    for t in range(tf.n_tokens):
        X.append([_combine(row, [_expr({i: ONE}) for i in range(tf.input_dim)], tf.positions[t][k])
                  for k, row in enumerate(tf.embedding)])
    for index, sub in enumerate(tf.sublayers):
        if isinstance(sub, FeedForward):
            pairs = _opposite_pairs(sub)
            partner = set(pairs.values())
            for t, xt in enumerate(X):
                hidden = {}
                for h, (row, c) in enumerate(zip(sub.inner.W, sub.inner.b)):
                    if h in partner:
                        continue
                    u = _combine(row, xt, c)
                    if h in pairs:  # ReLU(u) - ReLU(-u) = u
                        hidden[h] = (u, True)
                    elif _is_constant(u):
                        hidden[h] = (_expr(c=max(u[1], ZERO)), False)
                    else:
                        if zero is None:
                            zero = b.add(Lin((), ZERO, ()))
                        hidden[h] = (_expr(terms={b.add(Max((b.node_of(u), zero))): ONE}), False)
                new = []
                for i, (row, c) in enumerate(zip(sub.outer.W, sub.outer.b)):
                    acc = [dict(xt[i][0]), xt[i][1] + c, dict(xt[i][2])]
                    for h, (e, _) in hidden.items():
                        _axpy(acc, row[h], e)
                    new.append(acc)
                X[t] = new
            continue
        if sub.kind != "hardmax":
            raise Unsupported(f"sublayers[{index}]: {sub.kind} attention has no exact value")
        updates = [[[{}, ZERO, {}] for _ in range(tf.d_model)] for _ in X]
        for hi, head in enumerate(sub.heads):
            keys = [[_combine(r, xt, ZERO) for r in head.key] for xt in X]
            values = [[b.node_of(_combine(r, xt, ZERO)) for r in head.value] for xt in X]
            for t, xt in enumerate(X):
                query = [_combine(r, xt, ZERO) for r in head.query]
                if not all(_is_constant(q) for q in query):
                    raise Unsupported(f"sublayers[{index}].heads[{hi}]: the query depends on "
                                      "the input, so the attention scores are bilinear")
                scores = [b.node_of(_combine([head.scale * q[1] for q in query], k, ZERO))
                          for k in keys]
                for r in range(len(head.value)):
                    node = b.add(Hardmax(tuple((scores[u], values[u][r])
                                               for u in range(len(X)))))
                    for i in range(tf.d_model):
                        if head.out[i][r]:
                            _axpy(updates[t][i], head.out[i][r], _expr(terms={node: ONE}))
        for t in range(len(X)):
            for i in range(tf.d_model):
                _axpy(X[t][i], ONE, updates[t][i])
    r = tf.readout
    if r.token is None:
        z = [_combine([Q(1, tf.n_tokens)] * tf.n_tokens, [X[t][i] for t in range(tf.n_tokens)],
                      ZERO) for i in range(tf.d_model)]
    else:
        z = X[r.token]
    outs = [b.node_of(_combine(row, z, c)) for row, c in zip(r.map.W, r.map.b)]
    return Program(tf.input_dim, tuple(b.nodes), tuple(outs))
