"""The integer-scaled exact evaluators: the fast path every producer uses for single inputs and
batches (and the base of the fixed-width evaluators in ``fixedwidth.py``).

Untrusted.  The kernel keeps one plain, definitional evaluator per model kind
(``kernel/maxout.py`` ``evaluate_maxout``, ``kernel/transformer.py`` ``evaluate_transformer``,
the formulas of docs/notes/construction.md with ties averaged); every refutation is confirmed
there, and the tests compare these evaluators with the kernel's and with a ``Fraction`` reference.

The scaling: if h = u / E with u integral and an affine map's rows [W | b] are scaled by their
least common denominator D, then W h + b = (D [W | b] . [u; E]) / (D E), and since D E > 0 a
max, a ReLU or an argmax can be taken on the integer numerators.  One integer matrix product
(``IntMatrix``, computed in C) per layer or sub-layer; the only division is at the very end.
"""

from __future__ import annotations

from itertools import chain
from math import lcm
from operator import mul

from flint import fmpz

from ..kernel.affine import Matrix, Vector
from ..kernel.maxout import MaxoutNetwork, check_maxout_shapes
from ..kernel.rational import IntMatrix, Q, RatMatrix, Z, rational
from ..kernel.transformer import (
    HARDMAX,
    FeedForward,
    Transformer,
    check_transformer_shapes,
    hardmax_winners,
)

_ZERO = Z(0)  # comparisons and ReLU with an integer zero of the backend are faster


def common_denominator(values) -> int:
    """The least common multiple of the denominators of ``values`` (1 for no values)."""
    den = fmpz(1)
    for v in values:
        q = v.q
        if q != 1:
            den = den.lcm(q)
    return int(den)


def scaled_rows(W: Matrix, b: Vector) -> tuple[int, list[list[int]]]:
    """(D, rows) with rows[r] = D * [W_r | b_r] integral, D the least common denominator.

    This is the scaling behind the fast exact evaluator: for h = u / E (u integral),
    W h + b = (rows . [u; E]) / (D E), so one integer matrix product evaluates a whole layer.
    """
    D = common_denominator(chain((v for row in W for v in row), b))
    rows = [[int(v * D) for v in row] + [int(c * D)] for row, c in zip(W, b)]
    return D, rows


def scaled_matrix(W: Matrix, ncols: int) -> tuple[int, list[list[int]]]:
    """(D, rows) with rows = D * W integral, D the least common denominator (W has ncols
    columns, kept for W with no rows)."""
    D = common_denominator(v for row in W for v in row)
    return D, [[int(v * D) for v in row] for row in W]


def piece_major(layer) -> list:
    """Piece j of unit i at j N + i, j < rank; a unit with fewer pieces repeats its first
    one (max(a, a, b) = max(a, b)), so the layer's max is one k-ary max of k blocks."""
    return [
        u.pieces[j] if j < len(u.pieces) else u.pieces[0]
        for j in range(layer.rank)
        for u in layer.units
    ]


def scaled_layers(net: MaxoutNetwork) -> list[tuple[int, list[list[int]], int, int]]:
    """(D_l, rows, k, N) per layer, rows = D_l [w | b] of its pieces in ``piece_major``
    order with D_l their least common denominator, and the output map last as a layer of
    rank 1 when there is one."""
    out = []
    for layer in net.layers:
        pieces = piece_major(layer)
        out.append(
            scaled_rows(tuple(p.w for p in pieces), tuple(p.b for p in pieces))
            + (layer.rank, layer.width)
        )
    if net.output is not None:
        D, rows = scaled_rows(net.output.W, net.output.b)
        out.append((D, rows, 1, len(rows)))
    return out


class MaxoutEvaluator:
    """Exact evaluation of one network, prepared once (integer-scaled layers).

    A layer of N units of rank k is stored piece-major: row j N + i of its matrix is piece j
    of unit i, and a unit with fewer than k pieces repeats its first piece (max(a, a, b) =
    max(a, b)).  For a batch of B inputs, block j of the product (entries j N B to
    (j + 1) N B) then holds piece j of every unit at every input, so the layer's max is one
    elementwise max of k blocks.
    """

    __slots__ = ("_layers", "input_dim")

    def __init__(self, net: MaxoutNetwork):
        check_maxout_shapes(net)
        self.input_dim = net.input_dim
        # the output map is one more product, of rank 1 (no max)
        self._layers = [
            (D, IntMatrix(rows) if rows else None, N, k) for D, rows, k, N in scaled_layers(net)
        ]

    def evaluate_batch(self, xs) -> list[Vector]:
        """[N(x) for x in xs], exactly.  Every coordinate must be an exact rational."""
        xs = [tuple(x) for x in xs]
        B, n = len(xs), self.input_dim
        if B == 0:
            return []
        for x in xs:
            if len(x) != n:
                raise ValueError(f"input of length {len(x)}, expected {n}")
        # H = [u; E] ((n + 1) x B, column c = input c) with x_c = u_c / E: the numerators of
        # [x; 1] over their least common denominator E, computed in C.
        H, E = RatMatrix(
            n + 1, B, [rational(x[i]) for i in range(n) for x in xs] + [1] * B
        ).numer_denom()
        u: list = []  # the layer before's outputs
        for l, (D, M, n, k) in enumerate(self._layers):
            if l:  # H = [u; E] for the layer before
                H = IntMatrix(len(u) // B + 1, B, u + [E] * B)
            Z = (M * H).entries() if M is not None else []  # M is None when n = 0
            E *= D
            u = Z if k == 1 else list(map(max, *[Z[j * n * B : (j + 1) * n * B] for j in range(k)]))
        if not u:
            return [()] * B
        # u is n x B row-major: output c is column c, u[c::B] / E (fmpq reduces each).
        return [tuple([Q(v, E) for v in u[c::B]]) for c in range(B)]

    def evaluate(self, x) -> Vector:
        """N(x), exactly."""
        return self.evaluate_batch([x])[0]


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
        self._embed = (
            DE * DP,
            IntMatrix(
                [[DP * a for a in e] + [DE * c for c in p] for e, p in zip(Em, Pm)]
                + [[0] * din + [DE * DP] * n]
            ),
        )
        self._steps = []
        for index, sub in enumerate(tf.sublayers):
            if isinstance(sub, FeedForward):
                self._steps.append(_feedforward_step(sub, d))
                continue
            if sub.kind != HARDMAX:
                raise ValueError(
                    f"sublayers[{index}] uses {sub.kind} attention, which has no "
                    "exact rational value; only hardmax is evaluated exactly"
                )
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
            DO, O = scaled_matrix(
                tuple(tuple(v for h in heads for v in h.out[i]) for i in range(d)), nv
            )
            # One product S X gives all keys, queries and values; equal rows (a key that is
            # also a value, one query shared by the heads) are rows of S once.
            rows: dict = {}  # row of S -> its index

            def at(block):
                return [rows.setdefault(tuple(r) + (0,), len(rows)) for r in block]  # noqa: B023

            spans, kq, v0 = [], 0, 0  # per head: S rows of its keys, queries, values; 1st value
            for h in heads:
                k1, v1 = kq + len(h.key), v0 + len(h.value)
                spans.append((at(K[kq:k1]), at(Qm[kq:k1]), at(V[v0:v1]), v0))
                kq, v0 = k1, v1
            self._steps.append(
                (
                    "attn",
                    IntMatrix([list(r) for r in rows]),
                    spans,
                    nv,
                    DO * DV,
                    IntMatrix(O + [[0] * nv]),
                )
            )
        D, R = scaled_rows(tf.readout.map.W, tf.readout.map.b)
        self._read = (D, IntMatrix(R) if R else None, len(R))

    def _run(self, xs, trace=None) -> tuple[IntMatrix, fmpz]:
        """(X, E) after the last sub-layer (appended to ``trace`` after every sub-layer)."""
        tf, n = self.tf, self.tf.n_tokens
        xs = [tuple(map(rational, x)) for x in xs]
        for x in xs:
            if len(x) != tf.input_dim:
                raise ValueError(f"input of length {len(x)}, expected {tf.input_dim}")
        # H = [x_b; e_t] in column b n + t, as numerators over their least common denominator
        onehot = [[int(s == t) for t in range(n)] * len(xs) for s in range(n)]
        H, E = RatMatrix(
            tf.input_dim + n,
            n * len(xs),
            [x[i] for i in range(tf.input_dim) for x in xs for _ in range(n)]
            + [v for row in onehot for v in row],
        ).numer_denom()
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

    def states(self, xs) -> list[tuple[IntMatrix, fmpz]]:
        """(X, E) after the embedding and after each sub-layer: token t of input b is column
        b n + t of X / E."""
        trace: list = []
        self._run(xs, trace)
        d = self.tf.d_model
        return [(IntMatrix(d, X.ncols(), X.entries()[: d * X.ncols()]), E) for X, E in trace]

    def evaluate_batch(self, xs) -> list[Vector]:
        """[T(x) for x in xs], exactly (hardmax ties averaged)."""
        xs = list(xs)
        if not xs:
            return []
        X, E = self._run(xs)
        B, n = len(xs), self.tf.n_tokens
        D, R, m = self._read
        if m == 0 or R is None:  # R is None when m = 0
            return [()] * B
        Y: list = (R * X).entries()  # m x nB over D E
        t = self.tf.readout.token
        if t is None:  # token mean: sum over the n columns of each input, over n D E
            den = n * D * E
            Y = [sum(Y[c : c + n]) for c in range(0, m * n * B, n)]
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
    D1, A1 = scaled_rows(ff.inner.W, ff.inner.b)  # rows D1 [W1_r | b1_r]
    D2, A2 = scaled_rows(ff.outer.W, ff.outer.b)  # rows D2 [W2_i | b2_i]
    linear: list[int] = []
    free: dict = {}  # (row, column) -> the unpaired units with them
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
    first: IntMatrix | None = L1
    if 2 * L1.nrows() > d + 1:
        first, L2 = (
            None,
            L2 * L1
            + IntMatrix(d + 1, d + 1, [D * (i == j) for i in range(d + 1) for j in range(d + 1)]),
        )
    if not relu:
        return ("ff", D, first, L2, None, None)
    return (
        "ff",
        D,
        first,
        L2,
        IntMatrix([A1[r] for r in relu]),
        IntMatrix([[a[r] for r in relu] for a in A2] + [[0] * len(relu)]),
    )


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
    P = (S * X).entries()  # row r of S X: P[r ncol:(r + 1) ncol]
    winners = []  # (head, first column of the input, winner sets, the set of each query)
    for head in spans:
        keys_at, queries_at = head[0], head[1]
        for c0 in range(0, ncol, n):
            if len(keys_at) == 1:  # score(t', t) = k_t' q_t: the argmax of sign(q_t) k_t'
                a, b = keys_at[0] * ncol + c0, queries_at[0] * ncol + c0
                keys = P[a : a + n]
                which: list[int] | range = [(c > _ZERO) - (c < _ZERO) for c in P[b : b + n]]
                sets = {
                    s: hardmax_winners(keys if s > 0 else [s * k for k in keys]) for s in set(which)
                }
            else:
                keys = [[P[r * ncol + c0 + t] for r in keys_at] for t in range(n)]
                queries = [[P[r * ncol + c0 + t] for r in queries_at] for t in range(n)]
                which = range(n)
                sets = {
                    t: hardmax_winners([sum(map(mul, key, query)) for key in keys])
                    for t, query in enumerate(queries)
                }
            winners.append((head, c0, sets, which))
    # L = lcm of the tie-set sizes that occur (1 when there are no ties): the means
    # L * mean = (L / |S|) * sum_S v stay integral without growing every denominator
    L = lcm(*{len(w) for _, _, sets, _ in winners for w in sets.values()})
    avg = [0] * (nv * ncol)
    for (_, _, values_at, v0), c0, sets, which in winners:
        for i, r in enumerate(values_at):
            vals = P[r * ncol + c0 : r * ncol + c0 + n]
            means = {s: (L // len(w)) * sum([vals[u] for u in w]) for s, w in sets.items()}
            row = (v0 + i) * ncol + c0
            avg[row : row + n] = [means[s] for s in which]
    return X * (D * L) + O * IntMatrix(nv, ncol, avg), D * L * E
