"""Straight-line programs over Q and the trusted translation of both networks into them.  Nodes
on x in Q^d (j: earlier nodes): ``Lin`` v = sum_i a_i x_i + c + sum_j c_j v_j; ``Max`` v = max_j
v_j; ``Hardmax`` on pairs (s_j, v_j): v the mean of the v_j of maximal s_j.  ReLU pairs stay linear
(c ReLU(u) - c ReLU(-u) = c u: opposite rows and columns); an x-dependent query: ``Unsupported``."""

from dataclasses import dataclass

from .affine import Matrix, nonzero, row_of
from .errors import CheckFailed
from .maxout import MaxoutNetwork, check_maxout_shapes
from .polyhedron import Domain, check_domain
from .rational import ONE, ZERO, Q
from .transformer import FeedForward, Transformer, check_transformer_shapes


@dataclass(frozen=True, slots=True)
class Lin:
    x: tuple[tuple[int, Q], ...]  # sparse coefficients of the inputs
    c: Q
    terms: tuple[tuple[int, Q], ...]  # sparse coefficients of earlier nodes


@dataclass(frozen=True, slots=True)
class Max:
    args: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Hardmax:
    pairs: tuple[tuple[int, int], ...]  # (score node, value node)


Node = Lin | Max | Hardmax
_expr = lambda xs=None, c=ZERO, terms=None: (dict(xs or {}), ZERO + c, dict(terms or {}))  # c: fmpq


@dataclass(frozen=True, slots=True)
class Program:
    dim: int
    nodes: tuple[Node, ...]
    outputs: tuple[int, ...]


class Unsupported(ValueError): ...  # a feature no certificate speaks about (e.g. bilinear scores)


def check_shapes(models, domain: Domain) -> None:
    """Accept iff each model has the shapes it needs, the models and domain one input dimension."""
    try:
        for m in models:
            (check_maxout_shapes if isinstance(m, MaxoutNetwork) else check_transformer_shapes)(m)
    except (ValueError, TypeError) as e:
        raise CheckFailed(f"a model is malformed: {e}") from None
    if len({m.input_dim for m in models}) != 1:
        raise CheckFailed("the models have different input dimensions")
    check_domain(domain, models[0].input_dim)


class _Builder:  # nodes with hash-consing; expressions: (x: dict, c, terms: dict) linear forms
    def __init__(self):
        self.nodes, self.index = list[Node](), dict[object, int]()

    def add(self, node: Node) -> int:  # its index, added if new (Lin: keyed by ints p, q, not fmpq)
        key: object = node
        if isinstance(node, Lin):
            x, t = (tuple((i, int(v.p), int(v.q)) for i, v in n) for n in (node.x, node.terms))
            key = x, int(node.c.p), int(node.c.q), t
        if key not in self.index:
            self.index[key] = len(self.nodes)
            self.nodes.append(node)
        return self.index[key]

    def node_of(self, e) -> int:  # the node holding e's value (e itself if it is one node)
        xs, c, terms = e
        if not xs and not c and len(terms) == 1 and ONE in terms.values():
            return next(iter(terms))
        return self.add(Lin(tuple(sorted(xs.items())), c, tuple(sorted(terms.items()))))


def _axpy(acc, a: Q, e) -> None:  # acc += a * e in place (zero coefficients dropped, never stored)
    xs, c, terms = e
    for target, items in ((acc[0], xs), (acc[2], terms)):
        for k, v in items.items():
            if s := target.get(k, ZERO) + a * v:
                target[k] = s
            else:
                target.pop(k, None)
    acc[1] += a * c


def _combine(row, vec, const) -> list:  # sum_k row[k] vec[k] + const, a mutable [xs, c, terms]
    acc = [{}, ZERO + const, {}]  # an int or fmpz constant as an fmpq
    for k, a in nonzero(row):
        _axpy(acc, a, vec[k])
    return acc


def _maxout_layer(b: _Builder, layer, h: list) -> list:
    """The expressions max_j (w_j . h + b_j) of the layer's units (no Max node for one piece)."""
    out = []
    for unit in layer.units:
        args = tuple(b.node_of(_combine(p.w, h, p.b)) for p in unit.pieces)
        out.append(_expr(terms={args[0] if len(args) == 1 else b.add(Max(args)): ONE}))
    return out


def program_of_maxout(net: MaxoutNetwork) -> Program:  # h^l = max_j(w . h^{l-1} + b), y = A h^D + c
    check_maxout_shapes(net)
    b = _Builder()
    h: list = [_expr({i: ONE}) for i in range(net.input_dim)]
    for layer in net.layers:
        h = _maxout_layer(b, layer, h)
    if net.output is not None:
        h = [_combine(row, h, c) for row, c in zip(net.output.W, net.output.b)]
    outs = tuple(b.node_of(e) for e in h)
    return Program(net.input_dim, tuple(b.nodes), outs)


def _opposite_pairs(ff: FeedForward) -> dict[int, int]:
    """Adjacent units {h: h + 1} of opposite W1 rows, b1 entries and W2 columns, left to right."""
    W1, b1 = ff.inner.W, ff.inner.b
    cols: list[dict] = [{} for _ in b1]  # the columns of W2, by their non-zero entries
    for i, row in enumerate(ff.outer.W):
        for h, a in nonzero(row):
            cols[h][i] = a
    pairs, h = {}, 0
    while h + 1 < len(b1):
        u, v = W1[h], W1[h + 1]
        opposite = b1[h + 1] == -b1[h] and cols[h + 1] == {i: -a for i, a in cols[h].items()}
        if opposite and len(u) == len(v) and [(j, -a) for j, a in nonzero(u)] == list(nonzero(v)):
            pairs[h] = h + 1
        h += 2 if h in pairs else 1
    return pairs


def _run_sublayers(b: _Builder, tf: Transformer, X: list, sublayers) -> list:
    """Token expressions after the given sub-layers, from token expressions X."""
    for index, sub in sublayers:
        if isinstance(sub, FeedForward):
            pairs = _opposite_pairs(sub)
            partner = set(pairs.values())  # read through h: column -W_2[:, h], value ReLU(-u)
            for t, xt in enumerate(X):
                hidden: list = [_expr() for _ in sub.inner.b]  # a partner's stays 0
                for h, (row, c) in enumerate(zip(sub.inner.W, sub.inner.b)):
                    if h in partner:
                        continue
                    u = _combine(row, xt, c)
                    if h in pairs:  # ReLU(u) - ReLU(-u) = u
                        hidden[h] = u
                    elif not u[0] and not u[2]:
                        hidden[h] = _expr(c=max(u[1], ZERO))
                    else:  # the node 0 is added once, before its first use
                        zero = b.add(Lin((), ZERO, ()))
                        hidden[h] = _expr(terms={b.add(Max((b.node_of(u), zero))): ONE})
                X[t] = [_combine(row, hidden, c) for row, c in zip(sub.outer.W, sub.outer.b)]
                for e, x in zip(X[t], xt):  # the residual x_t + W_2 ReLU(...) + b_2
                    _axpy(e, ONE, x)
            continue
        if sub.kind != "hardmax":
            raise Unsupported(f"sublayers[{index}]: {sub.kind} attention has no exact value")
        new = [[_combine([ONE], [e], ZERO) for e in xt] for xt in X]  # x_t + the heads' sums
        for hi, head in enumerate(sub.heads):
            at = f"sublayers[{index}].heads[{hi}]"
            keys = [[_combine(r, xt, ZERO) for r in head.key] for xt in X]
            values = [[b.node_of(_combine(r, xt, ZERO)) for r in head.value] for xt in X]
            out = [(i, r) for i, r in nonzero(head.out) if any(r)]  # W_O's rows that are not 0
            for t, xt in enumerate(X):
                query = [_combine(r, xt, ZERO) for r in head.query]
                if any(q[0] or q[2] for q in query):
                    raise Unsupported(f"{at}: the query depends on x (bilinear scores)")
                sq = [head.scale * q[1] for q in query]
                scores = [b.node_of(_combine(sq, k, ZERO)) for k in keys]
                for r in range(len(head.value)):
                    node = b.add(Hardmax(tuple((scores[u], values[u][r]) for u in range(len(X)))))
                    for i, row in out:
                        if row[r]:
                            _axpy(new[t][i], row[r], _expr(terms={node: ONE}))
        X = new
    return X


def _embedded(tf: Transformer, E, dim: int) -> list:  # tokens E h + p_t for h in Q^dim
    h = [_expr({i: ONE}) for i in range(dim)]
    return [[_combine(row, h, p[k]) for k, row in enumerate(E)] for p in tf.positions]


def program_of_transformer(tf: Transformer) -> Program:  # construction.md §1's, with read-out
    check_transformer_shapes(tf)
    b = _Builder()
    X = _run_sublayers(b, tf, _embedded(tf, tf.embedding, tf.input_dim), enumerate(tf.sublayers))
    r, n = tf.readout, tf.n_tokens
    mean = [_combine([Q(1, n)] * n, [X[t][i] for t in range(n)], ZERO) for i in range(tf.d_model)]
    z = mean if r.token is None else X[r.token]
    outs = [b.node_of(_combine(row, z, c)) for row, c in zip(r.map.W, r.map.b)]
    return Program(tf.input_dim, tuple(b.nodes), tuple(outs))


def program_of(model: MaxoutNetwork | Transformer) -> Program:  # of a Maxout net or Transformer
    if isinstance(model, MaxoutNetwork):
        return program_of_maxout(model)
    return program_of_transformer(model)


def place(n: int, d_model: int) -> Matrix:  # d_model x n: h in Q^n to a token's coordinates < n
    return tuple(row_of(n, [(i, ONE)] if i < n else ()) for i in range(d_model))


def program_of_segment(tf: Transformer, first: int, last: int, dim: int) -> Program:
    """Sub-layers first..last-1 applied to the tokens encode(h)_t = place(h) + p_t, h in
    Q^dim; outputs every coordinate of every token (token t, coordinate i at t d_m + i)."""
    if not 0 <= first <= last <= len(tf.sublayers):
        raise ValueError(f"sub-layers {first}..{last - 1} do not exist")
    check_transformer_shapes(tf, range(first, last))
    b, subs = _Builder(), [(i, tf.sublayers[i]) for i in range(first, last)]
    X = _run_sublayers(b, tf, _embedded(tf, place(dim, tf.d_model), dim), subs)
    outs = [b.node_of(e) for xt in X for e in xt]
    return Program(dim, tuple(b.nodes), tuple(outs))


def program_of_encoded_layer(net: MaxoutNetwork, layer: int, positions, d_model: int) -> Program:
    """encode(Phi_l(h))_t = place(Phi_l(h)) + p_t for h in Q^{N_{l-1}}, Phi_l Maxout layer
    ``layer`` (with the output map after the last), outputs as in ``program_of_segment``."""
    check_maxout_shapes(net)
    dim, b = net.widths[layer], _Builder()
    units = _maxout_layer(b, net.layers[layer], [_expr({i: ONE}) for i in range(dim)])
    if layer == len(net.layers) - 1 and net.output is not None:
        units = [_combine(row, units, c) for row, c in zip(net.output.W, net.output.b)]
    units = (units + [_expr()] * d_model)[:d_model]  # place: coordinates past them are 0
    outs = [b.node_of(_combine([ONE], [e], p[i])) for p in positions for i, e in enumerate(units)]
    return Program(dim, tuple(b.nodes), tuple(outs))


def same_feedforward(
    tf: Transformer, merged: FeedForward, first: FeedForward, second: FeedForward
) -> bool:
    """merged(s) = second(first(s)) for every token state s in Q^{d_m}: on one symbolic token
    (hash-consed ReLU nodes) both give the same expressions (sound; complete for the merging)."""
    b, state = _Builder(), [_expr({i: ONE}) for i in range(tf.d_model)]
    one = _run_sublayers(b, tf, [list(state)], [(0, merged)])[0]
    return one == _run_sublayers(b, tf, [list(state)], [(0, first), (1, second)])[0]
