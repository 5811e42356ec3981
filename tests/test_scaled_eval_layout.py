"""The integer-scaled evaluators (``vectorized/scaled.py``, untrusted) against the plain
Fraction semantics of ``reference.py`` and the kernel's definitional evaluators, on the
shapes their layouts treat specially: Maxout layers stored piece-major (units of different
ranks padded with their first piece, rank-1 layers without a max, empty output maps), and
Transformer feed-forwards whose ReLU(z), ReLU(-z) pairs are folded into linear units,
attention rows shared between keys, queries and values, and queries of every sign."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st
from reference import maxout_reference, transformer_reference
from strategies_local import maxout_networks, transformers, vectors

from exactmax.io.numbers import to_fraction
from exactmax.kernel.affine import Affine
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from exactmax.kernel.rational import Q
from exactmax.kernel.transformer import Attention, FeedForward, Head, Readout, Transformer
from exactmax.vectorized.scaled import MaxoutEvaluator, TransformerEvaluator


def fractions(v):
    return [to_fraction(a) for a in v]


def check(evaluator, reference, model, xs):
    """The batch equals the reference point by point, as exact Q values, and equals
    single-input evaluation."""
    ev = evaluator(model)
    ys = ev.evaluate_batch(xs)
    assert len(ys) == len(xs)
    for x, y in zip(xs, ys):
        assert all(type(v) is Q for v in y)
        assert fractions(y) == reference(model, fractions(x))
    assert [ev.evaluate(x) for x in xs[:3]] == ys[:3]


def check_maxout(net, xs):
    check(MaxoutEvaluator, maxout_reference, net, xs)


def check_transformer(tf, xs):
    check(TransformerEvaluator, transformer_reference, tf, xs)


def rand_q(rng, num=6, den=5):
    return Q(rng.randint(-num, num), rng.randint(1, den))


def rand_vec(rng, n, num=6, den=5):
    return tuple(rand_q(rng, num, den) for _ in range(n))


# ------------------------------------------------------------------------------- Maxout

def mixed_rank_network(rng, d, widths, ranks, output=True):
    layers, width = [], d
    for N in widths:
        units = tuple(Unit(tuple(Piece(rand_vec(rng, width), rand_q(rng))
                                 for _ in range(rng.choice(ranks))))
                      for _ in range(N))
        layers.append(Layer(units))
        width = N
    out = None
    if output:
        m = rng.randint(1, 3)
        out = Affine(tuple(rand_vec(rng, width) for _ in range(m)), rand_vec(rng, m), width)
    return MaxoutNetwork(d, tuple(layers), out)


def test_units_of_different_ranks_and_rank_one_layers():
    rng = random.Random(1)
    for case in range(40):
        d = rng.randint(1, 4)
        widths = [rng.randint(1, 5) for _ in range(rng.randint(1, 4))]
        ranks = rng.choice([(1,), (1, 3), (2, 5), (1, 2, 3, 4), (4,)])
        net = mixed_rank_network(rng, d, widths, ranks, output=case % 2 == 0)
        for B in (1, 2, 7):
            check_maxout(net, [rand_vec(rng, d, num=9, den=7) for _ in range(B)])


def test_a_padded_unit_whose_first_piece_is_not_its_max():
    # unit 0 has one piece, unit 1 three: unit 0 is padded with its only piece, unit 1's max
    # is its last piece; in layer 2 a rank-1 unit sits next to a rank-2 unit
    u0 = Unit((Piece((Q(1), Q(0)), Q(-5)),))
    u1 = Unit((Piece((Q(0), Q(1)), Q(-3)), Piece((Q(1), Q(1)), Q(0)), Piece((Q(2), Q(0)), Q(7))))
    v0 = Unit((Piece((Q(1), Q(-1)), Q(0)),))
    v1 = Unit((Piece((Q(-1), Q(0)), Q(1, 3)), Piece((Q(0), Q(1)), Q(-1, 2))))
    net = MaxoutNetwork(2, (Layer((u0, u1)), Layer((v0, v1))))
    ev = MaxoutEvaluator(net)
    assert ev.evaluate((Q(1), Q(2))) == (Q(-13), Q(17, 2))
    check_maxout(net, [(Q(1), Q(2)), (Q(-3, 2), Q(5)), (Q(0), Q(0))])


def test_an_empty_output_map_and_a_constant_network():
    rng = random.Random(2)
    net = mixed_rank_network(rng, 3, [4, 2], (1, 3), output=False)
    empty = MaxoutNetwork(3, net.layers, Affine((), (), 2))
    assert MaxoutEvaluator(empty).evaluate_batch([rand_vec(rng, 3)] * 4) == [()] * 4
    assert MaxoutEvaluator(empty).evaluate_batch([]) == []
    const = MaxoutNetwork(0, (Layer((Unit((Piece((), Q(1, 2)), Piece((), Q(-3)))),)),))
    assert MaxoutEvaluator(const).evaluate_batch([(), ()]) == [(Q(1, 2),), (Q(1, 2),)]


def test_ties_between_pieces_and_large_batches():
    rng = random.Random(3)
    # every unit has a duplicated piece and integer weights, inputs on a coarse grid: many
    # exact ties between different pieces as well
    layers, width = [], 2
    for N in (3, 3, 2):
        units = []
        for _ in range(N):
            ps = [Piece(tuple(Q(rng.randint(-1, 1)) for _ in range(width)), Q(rng.randint(-1, 1)))
                  for _ in range(rng.randint(1, 3))]
            units.append(Unit(tuple(ps + [ps[0]])))
        layers.append(Layer(tuple(units)))
        width = N
    net = MaxoutNetwork(2, tuple(layers))
    grid = [(Q(a, 2), Q(b, 2)) for a in range(-3, 4) for b in range(-3, 4)]
    check_maxout(net, grid)


@given(st.data())
def test_maxout_batches_equal_the_reference(data):
    net = data.draw(maxout_networks())
    xs = data.draw(st.lists(vectors(net.input_dim), min_size=1, max_size=9))
    check_maxout(net, xs)


# -------------------------------------------------------------------------- Transformer

def paired_feedforward(rng, dm, pairs, other, opposite=True):
    """A feed-forward with ``pairs`` units ReLU(z), ReLU(-z) (output columns w, -w when
    ``opposite``, else w, w) and ``other`` unpaired units (sometimes two equal units with
    opposite columns, sometimes a duplicated unit), in a shuffled order."""
    units = []   # (inner row, bias, outer column)
    for _ in range(pairs):
        a, c, w = rand_vec(rng, dm, num=2, den=2), rand_q(rng, 2, 2), rand_vec(rng, dm, 2, 2)
        units.append((a, c, w))
        units.append((tuple(-v for v in a), -c, tuple(-v for v in w) if opposite else w))
    for _ in range(other):
        units.append((rand_vec(rng, dm, num=2, den=2), rand_q(rng, 2, 2),
                      rand_vec(rng, dm, num=2, den=2)))
    if rng.random() < 0.3:   # w ReLU(z) - w ReLU(z) = 0: equal rows are no pair
        a, c, w = rand_vec(rng, dm, num=2, den=2), rand_q(rng, 2, 2), rand_vec(rng, dm, 2, 2)
        units += [(a, c, w), (a, c, tuple(-v for v in w))]
    if units and rng.random() < 0.5:
        units.append(units[0])   # a duplicated unit
    rng.shuffle(units)
    h = len(units)
    W1 = tuple(u[0] for u in units)
    b1 = tuple(u[1] for u in units)
    W2 = tuple(tuple(units[r][2][i] for r in range(h)) for i in range(dm))
    return FeedForward(Affine(W1, b1, dm), Affine(W2, rand_vec(rng, dm, num=2, den=2), h))


def random_attention(rng, dm, shared):
    """Heads with 0..3 key rows (one key row most often), 0..2 value rows; with ``shared``,
    some value rows equal a key row and the one-key heads share one query row."""
    q = rand_vec(rng, dm, num=2, den=2)
    heads = []
    for _ in range(rng.randint(1, 4)):
        s = rng.choice([0, 1, 1, 1, 2, 3])
        keys = tuple(rand_vec(rng, dm, num=2, den=1) for _ in range(s))
        queries = tuple(q if shared and s == 1 else rand_vec(rng, dm, num=2, den=2)
                        for _ in range(s))
        values = tuple(keys[0] if shared and keys and rng.random() < 0.7
                       else rand_vec(rng, dm, num=2, den=2) for _ in range(rng.randint(0, 2)))
        out = tuple(rand_vec(rng, len(values), num=2, den=2) for _ in range(dm))
        heads.append(Head(queries, keys, values, out, Q(rng.randint(1, 3), rng.randint(1, 2))))
    return Attention(tuple(heads))


def random_transformer(rng, shared=True):
    d, dm, n = rng.randint(1, 3), rng.randint(1, 6), rng.randint(1, 4)
    subs = []
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.5:
            subs.append(paired_feedforward(rng, dm, rng.randint(0, 5), rng.randint(0, 3),
                                           opposite=rng.random() < 0.8))
        else:
            subs.append(random_attention(rng, dm, shared))
    m = rng.choice([0, 1, 2])
    token = rng.choice([None] + list(range(n)))
    readout = Readout(Affine(tuple(rand_vec(rng, dm, 2, 2) for _ in range(m)),
                             rand_vec(rng, m, 2, 2), dm), token)
    # integer positions and embedding with small entries: equal keys (ties) are frequent
    return Transformer(d, dm, tuple(tuple(Q(rng.randint(-1, 1)) for _ in range(d))
                                    for _ in range(dm)),
                       tuple(tuple(Q(rng.randint(-1, 1)) for _ in range(dm)) for _ in range(n)),
                       tuple(subs), readout)


def test_transformers_with_folded_pairs_shared_rows_and_signed_queries():
    rng = random.Random(4)
    for _ in range(150):
        tf = random_transformer(rng, shared=rng.random() < 0.7)
        for B in (1, 3):
            check_transformer(tf, [tuple(Q(rng.randint(-2, 2), rng.randint(1, 2))
                                         for _ in range(tf.input_dim)) for _ in range(B)])


def test_feedforward_pairs_are_folded_only_with_opposite_columns():
    # one coordinate, hidden ReLU(x) and ReLU(-x): with columns 1, -1 the residual adds x,
    # with columns 1, 1 it adds |x|; the folded and the unfolded evaluation must differ
    def tf_with(cols):
        ff = FeedForward(Affine(((Q(1),), (Q(-1),)), (Q(0), Q(0)), 1),
                         Affine((cols,), (Q(0),), 2))
        return Transformer(1, 1, ((Q(1),),), ((Q(0),),), (ff,),
                           Readout(Affine(((Q(1),),), (Q(0),), 1), 0))
    for x in (Q(-3, 2), Q(0), Q(5, 7)):
        assert TransformerEvaluator(tf_with((Q(1), Q(-1)))).evaluate((x,)) == (2 * x,)
        assert TransformerEvaluator(tf_with((Q(1), Q(1)))).evaluate((x,)) == (x + abs(x),)


def test_a_wide_feedforward_of_pairs_only_and_a_single_key_head_of_each_sign():
    rng = random.Random(5)
    dm, n = 5, 3
    ff = paired_feedforward(rng, dm, 6, 0)   # 6 pairs: one square product replaces two
    # queries q_t = t - 1: negative, zero and positive at tokens 0, 1, 2
    pos = tuple(tuple(Q(int(i == t)) for i in range(dm - 1)) + (Q(t - 1),) for t in range(n))
    key = (tuple(Q(rng.randint(-2, 2)) for _ in range(dm - 1)) + (Q(0),),)
    head = Head(((Q(0),) * (dm - 1) + (Q(1),),), key, key,
                tuple((Q(1),) if i == 0 else (Q(0),) for i in range(dm)), Q(1))
    embed = tuple((Q(1),) if i == 0 else (Q(0),) for i in range(dm))
    for token in (None, 0, 1, 2):
        tf = Transformer(1, dm, embed, pos, (ff, Attention((head,)), ff),
                         Readout(Affine(tuple(rand_vec(rng, dm, 2, 2) for _ in range(2)),
                                        (Q(0), Q(1)), dm), token))
        check_transformer(tf, [(Q(a, 3),) for a in range(-4, 5)])


def test_states_and_tokens_have_one_row_per_model_coordinate():
    rng = random.Random(6)
    tf = random_transformer(rng)
    ev = TransformerEvaluator(tf)
    states = ev.states([(Q(1, 2),) * tf.input_dim, (Q(-1),) * tf.input_dim])
    assert len(states) == len(tf.sublayers) + 1
    for X, E in states:
        assert (X.nrows(), X.ncols()) == (tf.d_model, 2 * tf.n_tokens)
    for T in ev.tokens((Q(1, 2),) * tf.input_dim):
        assert (T.nrows(), T.ncols()) == (tf.d_model, tf.n_tokens)


@given(st.data())
def test_transformer_batches_equal_the_reference(data):
    tf = data.draw(transformers())
    xs = data.draw(st.lists(vectors(tf.input_dim, max_num=2, max_den=2, large=False),
                            min_size=1, max_size=7))
    check_transformer(tf, xs)
