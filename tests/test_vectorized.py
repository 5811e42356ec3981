"""The vectorized evaluators equal the kernel's, and their radix-2^21 integer arrays equal
Python's integers: every operation is compared with plain int arithmetic, on values that
cross digit boundaries, carry through the sign and exceed 2^62."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import maxout_reference, transformer_reference

from exactmax.io.numbers import to_fraction
from exactmax.kernel.affine import Affine
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from exactmax.kernel.rational import Q
from exactmax.kernel.transformer import (
    HARDMAX,
    SOFTMAX,
    Attention,
    FeedForward,
    Head,
    Readout,
    Transformer,
)
from exactmax.strategies import (
    compiled_transformers,
    domain_points,
    maxout_networks,
    transformers,
    vectors,
)
from exactmax.vectorized import batch_evaluator
from exactmax.vectorized.integers import (
    CHUNK,
    IntArray,
    IntMatrixDigits,
    R,
    add,
    carry,
    equal,
    inner_products,
    matmul,
    maximum,
    minimum,
    relu,
    scale,
    signs,
)
from exactmax.vectorized.maxout import VectorizedMaxoutEvaluator
from exactmax.vectorized.scaled import MaxoutEvaluator, TransformerEvaluator
from exactmax.vectorized.transformer import FEW, VectorizedTransformerEvaluator, supports

# integers around the digit and word boundaries, and some far beyond 2^62
edges = st.sampled_from([0, 1, -1, R - 1, R, -R, R + 1, -(R - 1), 2**62 - 1, -2**62, 2**63,
                         -2**63 - 1, R**3, -R**3 + 1])
ints = st.one_of(edges, st.integers(-2**30, 2**30), st.integers(-2**200, 2**200))


def arrays(n):
    return st.lists(ints, min_size=n, max_size=n)


def canonical(a: IntArray) -> IntArray:
    """a, after checking the digit invariant every exact float64 product relies on: lower
    digits in [0, R), |top digit| <= R, and the bound holds."""
    d = a.digits
    assert ((d[:-1] >= 0) & (d[:-1] < R)).all() and (abs(d[-1]) <= R).all()
    assert all(abs(v) <= a.bound for v in a.to_ints())
    return a


@given(arrays(6))
def test_digits_round_trip(values):
    a = canonical(IntArray.from_ints(values, (2, 3)))
    assert a.to_ints() == values
    assert list(map(int, a.to_int_matrix().entries())) == values


@given(arrays(5), arrays(5), ints)
def test_entrywise_operations_equal_python(xs, ys, c):
    x, y = IntArray.from_ints(xs, (5,)), IntArray.from_ints(ys, (5,))
    assert canonical(add(x, y)).to_ints() == [a + b for a, b in zip(xs, ys)]
    assert canonical(scale(x, c)).to_ints() == [c * a for a in xs]
    assert canonical(maximum(x, y)).to_ints() == [max(a, b) for a, b in zip(xs, ys)]
    assert canonical(minimum(x, y)).to_ints() == [min(a, b) for a, b in zip(xs, ys)]
    assert canonical(relu(x)).to_ints() == [max(a, 0) for a in xs]
    assert equal(x, y).tolist() == [a == b for a, b in zip(xs, ys)]
    assert equal(x, x).all()
    assert signs(x).tolist() == [(a > 0) - (a < 0) for a in xs]


def test_a_difference_of_one_in_the_lowest_digit_decides_the_max():
    big = 5 * R**4
    x, y = IntArray.from_ints([big, -big, big], (3,)), IntArray.from_ints([big + 1, -big - 1,
                                                                           big], (3,))
    assert maximum(x, y).to_ints() == [big + 1, -big, big]
    assert equal(x, y).tolist() == [False, False, True]


sparse_ints = st.one_of(st.just(0), st.just(0), ints)


@pytest.mark.parametrize("form", ["dense", "sparse"])
@given(rows=st.integers(1, 4), cols=st.integers(1, 5), B=st.integers(1, 3), data=st.data())
def test_affine_products_equal_python(form, rows, cols, B, data):
    W = [data.draw(st.lists(sparse_ints, min_size=cols, max_size=cols)) for _ in range(rows)]
    bias = data.draw(st.lists(sparse_ints, min_size=rows, max_size=rows))
    e = data.draw(ints)
    xs = data.draw(arrays(cols * B))
    M = IntMatrixDigits.from_rows(W, cols, bias, drop_zero_rows=data.draw(st.booleans()), form=form)
    if any(map(any, W)):
        assert (M.coef is not None) == (form == "sparse") and (not M.blocks) == (form == "sparse")
    got = canonical(matmul(M, IntArray.from_ints(xs, (cols, B)), e)).to_ints()
    kept = range(rows) if M.row_index is None else M.row_index
    assert got == [sum(W[i][j] * xs[j * B + b] for j in range(cols)) + bias[i] * e
                   for i in kept for b in range(B)]


def test_a_product_longer_than_one_exact_chunk():
    """CHUNK + 3 columns of (R - 1)^2 products: one float64 sum would exceed 2^53."""
    n = CHUNK + 3
    W = [[R - 1] * n, [-(R - 1)] * (n - 1) + [R**5]]
    x = IntArray.from_ints([R - 1] * n, (n, 1))
    assert matmul(IntMatrixDigits.from_rows(W, n), x).to_ints() == [
        n * (R - 1) ** 2, -(n - 1) * (R - 1) ** 2 + R**5 * (R - 1)]


@pytest.mark.parametrize("n", [1, 100, 127, 128, CHUNK - 1, CHUNK])
def test_unsplit_columns_at_their_limit(n):
    """Entries just below 2^(53 - 21 - bits(n)) stay unsplit; against digits R - 1 (x = R^3 - 1)
    every float64 sum stays below 2^53, and one more bit splits them."""
    limit = 1 << (53 - 21 - n.bit_length())
    x = IntArray.from_ints([R**3 - 1] * n, (n, 1))
    for top in (limit - 1, limit):
        M = IntMatrixDigits.from_rows([[top] * n, [-top] * (n - 1) + [3]], n, form="dense")
        assert len(M.blocks) == (1 if top < max(limit, R) else 2)
        assert canonical(matmul(M, x)).to_ints() == [n * top * (R**3 - 1),
                                                     (3 - (n - 1) * top) * (R**3 - 1)]


def test_zero_columns_and_rows_are_skipped_but_counted():
    W = [[0, 3, 0], [0, 0, 0], [0, -2, 5 * 2**100], [0, 0, 0]]
    x = IntArray.from_ints([7, 1, 2**100], (3, 1))
    dense = IntMatrixDigits.from_rows(W, 3, [0, 0, 0, 4], drop_zero_rows=True, form="dense")
    assert dense.used.tolist() == [1, 2] and dense.row_index.tolist() == [0, 2, 3]
    # 3 and -2 need no split; 5 * 2^100 = (5 * 2^16) R^4 has only digit 4 (sign and magnitude)
    assert [(a, c.tolist()) for a, c, _ in dense.blocks] == [(0, [0]), (4, [1])]
    sparse = IntMatrixDigits.from_rows(W, 3, [0, 0, 0, 4], drop_zero_rows=True, form="sparse")
    assert sparse.coef is not None and sparse.idx.tolist() == [[1, 0], [1, 2], [0, 0]]
    for M in dense, sparse:
        assert matmul(M, x, -3).to_ints() == [3, -2 + 5 * 2**200, -12]


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.data())
def test_inner_products_equal_python(r, B, n, data):
    qs, ks = data.draw(arrays(r * B * n)), data.draw(arrays(r * B * n))
    q, k = IntArray.from_ints(qs, (r, B, n)), IntArray.from_ints(ks, (r, B, n))
    got = canonical(inner_products(q, k)).to_ints()
    at = lambda v, i, b, t: v[(i * B + b) * n + t]  # noqa: E731
    assert got == [sum(at(qs, i, b, t) * at(ks, i, b, u) for i in range(r))
                   for b in range(B) for t in range(n) for u in range(n)]


@given(st.lists(st.integers(-2**61, 2**61), min_size=2, max_size=6).map(lambda v: v + v[::-1]))
def test_carry_of_any_accumulator_is_canonical(acc):
    """Digit sums as the products leave them: any int64 below 2^61 in every digit."""
    d = np.array(acc, dtype=np.int64).reshape(-1, 2)
    value = [sum(int(d[t, i]) * R**t for t in range(d.shape[0])) for i in range(2)]
    assert canonical(carry(d, max(map(abs, value)))).to_ints() == value


def test_carry_drops_unneeded_digits_and_keeps_the_value():
    acc = IntArray.from_ints([-5, 3, 0, -1], (4,)).digits
    loose = canonical(carry(acc, 2**300))
    assert loose.to_ints() == [-5, 3, 0, -1] and loose.digits.shape[0] == 1
    assert loose.bound < 2**300


# ------------------------------------------------------------------ evaluators

@settings(max_examples=60, deadline=None)
@given(st.data())
def test_vectorized_maxout_evaluation_equals_the_kernel(data):
    net = data.draw(maxout_networks())
    xs = data.draw(st.lists(vectors(net.input_dim), min_size=1, max_size=5))
    assert VectorizedMaxoutEvaluator(net).evaluate_batch(xs) == \
        MaxoutEvaluator(net).evaluate_batch(xs)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_vectorized_transformer_evaluation_equals_the_kernel(data):
    tf = data.draw(transformers())
    xs = data.draw(st.lists(vectors(tf.input_dim), min_size=1, max_size=4))
    ev = VectorizedTransformerEvaluator(tf)
    ours = ev.evaluate_batch(xs)
    assert ours == TransformerEvaluator(tf).evaluate_batch(xs)
    many = xs * 3 + [xs[0]] * FEW                   # more than FEW inputs: the other argmax path
    assert ev.evaluate_batch(many) == [ours[xs.index(x)] for x in many]
    assert [list(y) for y in ours] == [
        [Q(f.numerator, f.denominator) for f in transformer_reference(tf, map(to_fraction, x))]
        for x in xs]


@settings(max_examples=30, deadline=None)
@given(compiled_transformers(), st.data())
def test_vectorized_compiled_transformer_equals_the_network(pair, data):
    net, tf = pair
    xs = data.draw(st.lists(domain_points(net.domain), min_size=1, max_size=4))
    xs = xs * (1 + FEW // len(xs) if data.draw(st.booleans()) else 1)
    want = [tuple(Q(f.numerator, f.denominator) for f in maxout_reference(net, map(to_fraction, x)))
            for x in xs]
    assert VectorizedTransformerEvaluator(tf).evaluate_batch(xs) == want


def test_huge_weights_and_inputs():
    """Weights and inputs far beyond 2^62 go through the digit path end to end."""
    big = Q(3**60, 7**20)
    net = MaxoutNetwork(2, (Layer((Unit((Piece((big, -big), Q(1, 3**40)),
                                         Piece((Q(-1), Q(2)), Q(0)))),)),))
    xs = [(Q(2**70 + 1, 5), Q(-3)), (Q(1, 2**90), Q(1, 3**50))]
    assert VectorizedMaxoutEvaluator(net).evaluate_batch(xs) == \
        MaxoutEvaluator(net).evaluate_batch(xs)


def test_batch_evaluator_takes_the_scaled_one_for_small_batches_and_refuses_floats(monkeypatch):
    """Without the fixed-width evaluator (no C compiler at install time), small batches go to
    the integer-scaled evaluator and large ones are vectorized."""
    net = MaxoutNetwork(1, (Layer((Unit((Piece((Q(1),), Q(0)), Piece((Q(-1),), Q(0)))),)),))
    ev = batch_evaluator(net)
    monkeypatch.setattr(ev, "fixed", None)
    used = []

    class Spy:
        def __init__(self, name):
            self.name, self.inner = name, getattr(ev, name)

        def evaluate_batch(self, xs):
            used.append(self.name)
            return self.inner.evaluate_batch(xs)

    for name in ("scaled", "vectorized"):
        monkeypatch.setattr(ev, name, Spy(name))
    assert ev.evaluate((Q(-2),)) == (Q(2),)
    small, large = [(Q(v, 3),) for v in range(-40, 40)], [(Q(v, 7),) for v in range(-1100, 1100)]
    assert ev.evaluate_batch(small) == [(abs(x[0]),) for x in small]
    assert ev.evaluate_batch(large) == [(abs(x[0]),) for x in large]
    assert used == ["scaled", "scaled", "vectorized"]
    monkeypatch.setattr("exactmax.vectorized.CHUNK_WORK", 1000)   # 500 inputs per chunk
    assert ev.evaluate_batch(large) == [(abs(x[0]),) for x in large]
    assert used[3:] == ["vectorized"] * 5
    for xs in [(0.5,)] * 40, [(0.5,)] * 3000:
        with pytest.raises(TypeError):
            ev.evaluate_batch(xs)


def _one_head(kind, tokens):
    one = ((Q(1),),)
    return Transformer(1, 1, one, tuple((Q(t),) for t in range(tokens)),
                       (Attention((Head(one, one, one, one, Q(1)),), kind),),
                       Readout(Affine(one, (Q(0),), 1), 0))


def test_softmax_and_long_transformers_are_left_to_the_kernel():
    assert supports(_one_head(HARDMAX, 24))
    assert not supports(_one_head(HARDMAX, 25)) and not supports(_one_head(SOFTMAX, 2))
    with pytest.raises(ValueError, match="kernel"):
        VectorizedTransformerEvaluator(_one_head(SOFTMAX, 2))
    ev = batch_evaluator(_one_head(HARDMAX, 25))      # fixed-width words or the kernel
    assert ev.vectorized is None
    # token 0 is 1 + 0, it attends to the largest key 1 + 24 and adds it: 26
    assert ev.evaluate_batch([(Q(1),)] * 100) == [(Q(26),)] * 100


def _with_mirrored_units(tf, flips):
    """tf with, in each feed-forward, a mirror unit (-W1_i, -b1_i) added for hidden unit i,
    its W2 column -W2 e_i (a linear pair: ReLU(u) - ReLU(-u) = u) or +W2 e_i when ``flips``
    says so (ReLU(u) + ReLU(-u) = |u|, which must stay a ReLU)."""
    subs = []
    for s in tf.sublayers:
        if not hasattr(s, "inner") or not s.inner.b:
            subs.append(s)
            continue
        W1, b1, W2 = list(s.inner.W), list(s.inner.b), [list(r) for r in s.outer.W]
        for i in range(len(s.inner.b)):
            W1.append(tuple(-v for v in s.inner.W[i]))
            b1.append(-s.inner.b[i])
            sign = 1 if flips[i % len(flips)] else -1
            for r in W2:
                r.append(sign * r[i])
        subs.append(FeedForward(Affine(tuple(W1), tuple(b1), s.inner.in_dim),
                                Affine(tuple(map(tuple, W2)), s.outer.b, len(b1))))
    return Transformer(tf.input_dim, tf.d_model, tf.embedding, tf.positions, tuple(subs),
                       tf.readout)


@settings(max_examples=40, deadline=None)
@given(transformers(), st.lists(st.booleans(), min_size=1, max_size=4), st.data())
def test_linear_relu_pairs_are_merged_and_absolute_values_are_not(tf, flips, data):
    tf = _with_mirrored_units(tf, flips)
    xs = data.draw(st.lists(vectors(tf.input_dim), min_size=1, max_size=3))
    assert VectorizedTransformerEvaluator(tf).evaluate_batch(xs) == \
        TransformerEvaluator(tf).evaluate_batch(xs)


def test_a_clean_up_sub_layer_needs_no_relu():
    from exactmax.construct.transformer import compile_transformer
    from exactmax.kernel.polyhedron import Box
    net = MaxoutNetwork(1, (Layer((Unit((Piece((Q(1),), Q(0)), Piece((Q(-1),), Q(0)))),)),))
    tf = compile_transformer(net, Box((Q(-1),), (Q(1),))).transformer
    steps = VectorizedTransformerEvaluator(tf)._steps
    assert [s[0] for s in steps] == ["ff", "attn", "ff"]
    assert steps[0][3] is not None and steps[2][3] is None    # gate FF keeps ReLUs, clean-up not


@pytest.mark.parametrize("batch", [1, FEW, FEW + 1, 40])
def test_single_key_heads_take_argmax_or_argmin_by_the_query_sign(batch):
    """Token t is (x + t, t), its key x + 2t and its query s (x + t): a positive query takes
    the largest key, a negative one the smallest, a zero one (x = -t) all of them; both argmax
    paths, at most FEW inputs and more."""
    for s in (Q(1), Q(-1)):
        tf = Transformer(1, 2, ((Q(1),), (Q(0),)), ((Q(0), Q(0)), (Q(1), Q(1)), (Q(2), Q(2))),
                         (Attention((Head(((s, Q(0)),), ((Q(1), Q(1)),), ((Q(1), Q(0)),),
                                          ((Q(1),), (Q(0),)), Q(1)),)),),
                         Readout(Affine(((Q(1), Q(0)),), (Q(0),), 2), 1))
        xs = [(Q(v, 3),) for v in range(-batch // 2, batch - batch // 2)]
        want = [(Q(f.numerator, f.denominator),)
                for f in (transformer_reference(tf, [to_fraction(x[0])])[0] for x in xs)]
        assert VectorizedTransformerEvaluator(tf).evaluate_batch(xs) == want


def test_inner_products_of_numbers_of_a_thousand_digits():
    """r = CHUNK coordinates of 1026-digit numbers with every digit R - 1: a middle digit sum
    takes 1025 exact float64 products of about 2^53 each, more than an int64 holds unless the
    sums are settled on the way."""
    v = R**1025 - 1
    q = IntArray.from_ints([v] * CHUNK, (CHUNK, 1, 1))
    assert canonical(inner_products(q, q)).to_ints() == [CHUNK * v * v]


def test_a_head_of_chunk_key_rows_on_huge_inputs_attends_to_the_right_token():
    """A head with CHUNK key rows (all 1) on tokens a and a - delta, a of 1026 digits: token 0
    must attend to itself (a^2 > a (a - delta)).  Digit 1023 of a puts digit 1024 of the
    score 2^11 a^2 just above 2^63 and that of 2^11 a (a - delta) just below, so an int64 digit
    sum that wraps sends token 0 to token 1 (2 a - delta instead of 2 a)."""
    one, keys = ((Q(1),),), ((Q(1),),) * CHUNK
    a = R**1025 - 1 - (R - 1 - 1049088) * R**1023
    delta = R - 1 + 2**10 * R
    tf = Transformer(1, 1, one, ((Q(0),), (Q(-delta),)), (Attention((Head(keys, keys, one, one,
                                                                          Q(1)),)),),
                     Readout(Affine(one, (Q(0),), 1), 0))
    xs = [(Q(a),)]
    assert VectorizedTransformerEvaluator(tf).evaluate_batch(xs) == \
        TransformerEvaluator(tf).evaluate_batch(xs) == [(Q(2 * a),)]


def test_dense_weights_of_hundreds_of_digits():
    """Weights of 300 digits make 300 dense digit blocks, more than one int64 digit sum may
    take by the count alone: the sums are settled on the way (no assertion, no wrap)."""
    big = [Q(R**300 - 1 + 7 * i, 3**i) for i in range(4)]
    units = tuple(Unit((Piece(tuple(big[(i + j) % 4] * (-1) ** j for j in range(4)), big[i]),
                        Piece(tuple(Q(j - i) for j in range(4)), Q(0)))) for i in range(4))
    net = MaxoutNetwork(4, (Layer(units),))
    xs = [tuple(Q(R**310 - 1 - b - j, 1 + j) for j in range(4)) for b in range(3)]
    assert VectorizedMaxoutEvaluator(net).evaluate_batch(xs) == \
        MaxoutEvaluator(net).evaluate_batch(xs)
    W = [[R**300 - 1 + i * j for j in range(4)] for i in range(4)]
    M = IntMatrixDigits.from_rows(W, 4, form="dense")
    assert len(M.blocks) > 256
    for v in (R**3 - 1, R**400 - 1, -R**400):
        x = IntArray.from_ints([v] * 4, (4, 1))
        assert canonical(matmul(M, x)).to_ints() == [sum(r) * v for r in W]
