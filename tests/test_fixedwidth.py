"""The fixed-width evaluators equal the kernel's, and every operation on fixed-width words
equals Python's integers: values at and across the 64-bit limb boundaries, where a width bound
one limb too small would wrap, and far beyond.  Operations refuse what they cannot do exactly
(entries beyond 64 bits in Weights, results beyond the word limit, non-positive denominators,
sets that L does not divide), and the batch evaluator then falls back to the kernel."""

from __future__ import annotations

import math
import os
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import maxout_reference

from exactmax.io.numbers import to_fraction
from exactmax.kernel.affine import Affine
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from exactmax.kernel.rational import Q
from exactmax.kernel.transformer import Attention, Head, Readout, Transformer
from exactmax.strategies import (
    compiled_transformers,
    domain_points,
    maxout_networks,
    transformers,
    vectors,
)
from exactmax.vectorized import batch_evaluator, fixedwidth
from exactmax.vectorized.scaled import MaxoutEvaluator, TransformerEvaluator

if not fixedwidth.AVAILABLE:
    if os.environ.get("EXACTMAX_REQUIRE_NATIVE"):
        raise RuntimeError("the C extension exactmax.vectorized._fixedwidth is required "
                           "(EXACTMAX_REQUIRE_NATIVE is set) but was not built")
    pytest.skip("the C extension _fixedwidth was not built (no C compiler at install time)",
                allow_module_level=True)

from exactmax.vectorized._fixedwidth import MAX_LIMBS, Weights, Words  # noqa: E402
from exactmax.vectorized.fixedwidth import (  # noqa: E402
    FixedWidthMaxoutEvaluator,
    FixedWidthTransformerEvaluator,
)

# integers at the limb boundaries (a result one limb too narrow wraps there), and beyond
edges = st.sampled_from([0, 1, -1, 2**62, -2**62, 2**63 - 1, -2**63, 2**63, -2**63 - 1,
                         2**64 - 1, 2**64, -2**64, 2**127 - 1, -2**127, 2**127, 2**128,
                         -2**128 - 1, 3**100, -7**90])
ints = st.one_of(edges, st.integers(-2**30, 2**30), st.integers(-2**300, 2**300))
int64 = st.one_of(st.sampled_from([0, 1, -1, 2**63 - 1, -2**63, 2**62, -2**62 - 1]),
                  st.integers(-2**63, 2**63 - 1), st.integers(-9, 9))


@st.composite
def words(draw, rows=None, cols=None, values=ints):
    r = draw(st.integers(0, 4)) if rows is None else rows
    c = draw(st.integers(0, 4)) if cols is None else cols
    v = draw(st.lists(values, min_size=r * c, max_size=r * c))
    return r, c, v


def column(v, c, j):
    return v[j::c] if c else []


# ------------------------------------------------------------------ operations

@given(words())
def test_words_round_trip_and_bound_their_bits(m):
    r, c, v = m
    X = Words(r, c, v)
    assert X.tolist() == v and X.shape == (r, c)
    assert all(abs(x).bit_length() <= X.bits() for x in v)
    assert X.bits() <= max([abs(x).bit_length() + 1 for x in v], default=0)


@given(words(), st.integers(0, 4), st.data())
def test_products_with_int64_weights_equal_python(m, p, data):
    r, c, v = m
    w = data.draw(st.lists(int64, min_size=p * r, max_size=p * r))
    X, W = Words(r, c, v), Weights(p, r, w)
    assert W.nnz == sum(1 for e in w if e)
    assert W.apply(X).tolist() == [sum(w[i * r + j] * v[j * c + k] for j in range(r))
                                   for i in range(p) for k in range(c)]


@given(words(), words(), int64)
def test_entrywise_operations_equal_python(m, m2, s):
    r, c, v = m
    X = Words(r, c, v)
    assert X.scale(s).tolist() == [s * x for x in v]
    assert X.relu().tolist() == [max(x, 0) for x in v]
    _, _, v2 = m2
    v2 = (v2 * (r * c))[:r * c] if v2 else [0] * (r * c)
    assert X.add(Words(r, c, v2)).tolist() == [x + y for x, y in zip(v, v2)]


@given(words(), st.data())
def test_max_blocks_and_rearrangements_equal_python(m, data):
    r, c, v = m
    X = Words(r, c, v)
    k = data.draw(st.integers(1, 3))
    n = data.draw(st.integers(0, r // k))
    assert X.max_blocks(k, n).tolist() == [
        max(v[(j * n + i) * c + t] for j in range(k)) for i in range(n) for t in range(c)
    ] + v[k * n * c:]
    if r and c:
        n = data.draw(st.sampled_from([d for d in range(1, r + 1) if r % d == 0]))
        R = r // n
        assert X.unstack(n).tolist() == [v[(t * R + i) * c + j]
                                         for i in range(R) for j in range(c) for t in range(n)]
        n = data.draw(st.sampled_from([d for d in range(1, c + 1) if c % d == 0]))
        t = data.draw(st.integers(-1, n - 1))
        assert X.block_columns(n, t).tolist() == [
            v[i * c + b * n + t] if t >= 0 else sum(v[i * c + b * n:i * c + b * n + n])
            for i in range(r) for b in range(c // n)]


@given(st.integers(0, 3), st.integers(1, 4), st.integers(1, 3), st.data())
def test_hardmax_attention_equals_python(r, n, B, data):
    """Scores per block of n tokens, the winner sets (ties kept), and L times the means, for
    two heads that share rows (L is the lcm of the winner-set sizes of both)."""
    c = n * B
    v = data.draw(st.lists(st.one_of(st.integers(-2, 2), ints), min_size=3 * r * c,
                           max_size=3 * r * c))
    P = Words(3 * r, c, v)
    at = lambda i, col: v[i * c + col]  # noqa: E731
    a, b, d = list(range(r)), list(range(r, 2 * r)), list(range(2 * r, 3 * r))
    heads = [(a, b, d), (b, a[::-1], a + d)]

    def winners(keys, queries):
        scores = [[sum(at(keys[k], col - col % n + u) * at(queries[k], col)
                       for k in range(len(keys))) for u in range(n)] for col in range(c)]
        return [tuple(u for u in range(n) if s[u] == max(s)) for s in scores]

    sets = [winners(keys, queries) for keys, queries, _ in heads]
    L = math.lcm(*[len(w) for ws in sets for w in ws])
    A, got = P.hardmax_attention(heads, n)
    assert got == L
    assert A.tolist() == [(L // len(ws[col])) * sum(at(i, col - col % n + u) for u in ws[col])
                          for (_, _, values), ws in zip(heads, sets)
                          for i in values for col in range(c)]


@given(st.lists(st.tuples(ints, st.one_of(st.integers(1, 2**64), st.sampled_from(
    [1, 2**63, 2**64 - 1, 2**127 - 1, 2**127, 3**90])), st.booleans()), min_size=1, max_size=6))
def test_fractions_are_in_lowest_terms(entries):
    c = len(entries)
    nums = [p * (q if scaled else 1) for p, q, scaled in entries]
    dens = [q for _, q, _ in entries]
    ps, qs, small = Words(2, c, nums + dens).fractions()
    want = [Fraction(p, q) for p, q in zip(nums, dens)]
    assert list(zip(ps, qs)) == [(f.numerator, f.denominator) for f in want]
    assert not small or all(abs(p) < 2**62 and q < 2**62 for p, q in zip(ps, qs))


@given(st.lists(st.one_of(vectors(1).map(lambda v: v[0]), st.integers(-2**70, 2**70),
                          st.builds(Q, ints, st.integers(1, 2**40))), min_size=0, max_size=6))
def test_rationals_become_numerators_over_their_least_common_denominator(values):
    fr = [to_fraction(Q(v)) for v in values]
    E = math.lcm(*[f.denominator for f in fr])
    if E >= 2**64:
        with pytest.raises(OverflowError):
            Words.from_rationals(values, 1, len(values), Q)
        return
    out = Words.from_rationals(values, 1, len(values), Q).tolist()
    assert out[len(values):] == [E] * len(values)
    assert [Fraction(u, E) for u in out[:len(values)]] == fr


# ------------------------------------------------------------------ refusals

def test_what_cannot_be_done_exactly_is_refused():
    with pytest.raises(OverflowError):
        Weights(1, 1, [2**63])                     # beyond int64
    with pytest.raises(TypeError):
        Weights(1, 1, [0.5])
    with pytest.raises(TypeError):
        Words(1, 1, [0.5])                         # floats have no __index__
    with pytest.raises(TypeError):
        Words.from_rationals([0.5], 1, 1, Q)
    with pytest.raises(OverflowError):             # a common denominator beyond 64 bits
        Words.from_rationals([Q(1, 2**40 + 1), Q(1, 2**40 - 1)], 1, 2, Q)
    with pytest.raises(OverflowError):
        Words(1, 1, [1]).scale(2**64)
    huge = Words(1, 1, [2**(64 * MAX_LIMBS - 2)])
    with pytest.raises(OverflowError):             # the product needs more than MAX_LIMBS
        huge.scale(2**40)
    with pytest.raises(OverflowError):
        Weights(1, 1, [2**40]).apply(huge)
    for dens in ([0], [-3]):
        with pytest.raises(ValueError, match="positive"):
            Words(2, 1, [1] + dens).fractions()
    P = Words(2, 2, [1, 1, 1, 1])
    with pytest.raises(IndexError):
        P.hardmax_attention([([0], [1], [2])], 2)  # no row 2
    with pytest.raises(ValueError):
        P.hardmax_attention([([0], [1], [1])], 3)  # 3 tokens do not divide 2 columns
    with pytest.raises(OverflowError):
        Words(1, 65, [0] * 65).hardmax_attention([([0], [0], [0])], 65)   # a 64-bit mask
    with pytest.raises(ValueError):
        P.hardmax_attention([([0], [0, 1], [1])], 2)  # as many keys as queries
    with pytest.raises(ValueError):
        P.block_columns(2, 2)                      # no token 2 in blocks of 2
    with pytest.raises(ValueError):
        P.block_columns(3, 0)                      # 3 does not divide 2 columns
    with pytest.raises(ValueError):
        Words(2, 3, [0] * 5)
    with pytest.raises(ValueError):
        Weights(2, 2, [1, 2, 3]).apply(Words(2, 1, [1, 2]))
    with pytest.raises(ValueError):
        Weights(2, 3, [1] * 6).apply(Words(2, 1, [1, 2]))


# ------------------------------------------------------------------ evaluators

def fixed_width_or_kernel(cls, model, xs):
    """cls(model)'s outputs at xs, or, where weights (2^63 and beyond after scaling) or values
    (beyond the word limit) do not fit, a check that it refused with OverflowError and that
    batch_evaluator answers through the kernel instead."""
    try:
        ev = cls(model)
        return ev.evaluate_batch(xs), ev
    except OverflowError:
        ev = batch_evaluator(model)
        return ev.evaluate_batch(xs), None

@pytest.mark.parametrize("models, cls, kernel, fits", [
    (maxout_networks(), FixedWidthMaxoutEvaluator, MaxoutEvaluator, False),
    (maxout_networks(large=False), FixedWidthMaxoutEvaluator, MaxoutEvaluator, True),
    (transformers(), FixedWidthTransformerEvaluator, TransformerEvaluator, True),
], ids=["maxout", "maxout-small-weights", "transformer"])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_fixed_width_evaluation_equals_the_kernel(models, cls, kernel, fits, data):
    """``fits``: the weights are small enough that the fixed-width evaluator must take every
    model and input (small inputs), so the comparison is never the kernel with itself."""
    model = data.draw(models)
    xs = data.draw(st.lists(vectors(model.input_dim, large=not fits), min_size=1, max_size=5))
    ours, ev = fixed_width_or_kernel(cls, model, xs)
    assert ours == kernel(model).evaluate_batch(xs)
    assert ev is not None or not fits
    if ev is not None:
        assert [ev.evaluate(x) for x in xs] == ours


@settings(max_examples=30, deadline=None)
@given(compiled_transformers(), st.data())
def test_fixed_width_compiled_transformer_equals_the_network(pair, data):
    net, tf = pair
    xs = data.draw(st.lists(domain_points(net.domain), min_size=1, max_size=3))
    want = [tuple(Q(f.numerator, f.denominator) for f in maxout_reference(net, map(to_fraction, x)))
            for x in xs]
    assert fixed_width_or_kernel(FixedWidthMaxoutEvaluator, net, xs)[0] == want
    assert fixed_width_or_kernel(FixedWidthTransformerEvaluator, tf, xs)[0] == want


def _abs_net(weight=Q(1)):
    """x -> max(w x, -w x) = |w x|."""
    return MaxoutNetwork(1, (Layer((Unit((Piece((weight,), Q(0)),
                                          Piece((-weight,), Q(0)))),)),))


def test_shapes_beyond_memory_and_sequences_changed_midway_are_safe():
    """Shape products that would wrap are refused before any allocation, and a sequence that
    Python code empties while C walks it cannot be read past its end."""
    with pytest.raises(ValueError):
        Words(2**62, 4, [])                        # 2^64 entries: no wrap to 0 values
    with pytest.raises(MemoryError):               # a 2^20 x 2^44 result
        Weights(2**20, 0, []).apply(Words(0, 2**44, []))
    with pytest.raises((ValueError, MemoryError)):
        Words(1, 1, [0]).max_blocks(2**62, 4)
    with pytest.raises((ValueError, MemoryError)):
        Weights(2**62, 4, [])
    P, heads = Words(3, 2, [1, 2, 3, 4, 5, 6]), []

    def emptying():
        heads.clear()
        yield 0

    heads += [(emptying(), [1], [2]), ([0], [1], [2])]
    A, L = P.hardmax_attention(heads, 1)           # one token: each attends to itself
    assert (A.tolist(), L) == ([5, 6, 5, 6], 1)


def test_inputs_and_weights_beyond_the_words_go_to_the_kernel():
    """An input of 40,000 bits outgrows the word limit, and weights beyond 2^63 never fit:
    batch_evaluator still returns the exact value, through the kernel."""
    ev = batch_evaluator(_abs_net())
    x = (Q(-3**25000, 7),)
    with pytest.raises(OverflowError):
        ev.fixed.evaluate(x)
    assert ev.evaluate(x) == (Q(3**25000, 7),)
    big = batch_evaluator(_abs_net(Q(3**50, 7)))
    assert big.fixed is None
    assert big.evaluate((Q(-1, 2),)) == (Q(3**50, 14),)


def _attend_to_the_largest(tokens):
    """Token t = x + t attends to the largest key x + tokens - 1 and adds it: read-out of
    token 0 is 2 x + tokens - 1."""
    one = ((Q(1),),)
    return Transformer(1, 1, one, tuple((Q(t),) for t in range(tokens)),
                       (Attention((Head(one, one, one, one, Q(1)),)),),
                       Readout(Affine(one, (Q(0),), 1), 0))


def test_transformers_of_more_than_64_tokens_are_left_to_the_other_evaluators():
    assert batch_evaluator(_attend_to_the_largest(64)).fixed is not None
    ev = batch_evaluator(_attend_to_the_largest(65))
    assert ev.fixed is None
    assert ev.evaluate((Q(1, 2),)) == (Q(65),)
    assert batch_evaluator(_attend_to_the_largest(64)).evaluate((Q(1, 2),)) == (Q(64),)


def test_inputs_are_exact_rationals_of_the_right_length():
    ev = FixedWidthMaxoutEvaluator(_abs_net())
    assert ev.evaluate((Fraction(-1, 3),)) == (Q(1, 3),) == ev.evaluate((Q(1, 3),))
    assert ev.evaluate((-4,)) == (Q(4),)
    with pytest.raises(TypeError):
        ev.evaluate((0.5,))
    with pytest.raises(TypeError):
        ev.evaluate((True,))
    with pytest.raises(ValueError, match="length"):
        ev.evaluate((Q(1), Q(2)))
    assert ev.evaluate_batch([]) == []


def test_batch_evaluator_takes_fixed_width_words_for_small_batches(monkeypatch):
    ev = batch_evaluator(_abs_net())
    used = []

    class Spy:
        def __init__(self, name):
            self.name, self.inner = name, getattr(ev, name)
            self.macs = getattr(self.inner, "macs", None)

        def evaluate_batch(self, xs):
            used.append(self.name)
            return self.inner.evaluate_batch(xs)

    for name in ("scaled", "fixed", "vectorized"):
        monkeypatch.setattr(ev, name, Spy(name))
    monkeypatch.setattr(ev, "fixed_until", 30)     # 3 multiply-adds per input: 10 inputs
    for B in (1, 9, 10, 3000):
        xs = [(Q(v - B // 2, 7),) for v in range(B)]
        assert ev.evaluate_batch(xs) == [(abs(x[0]),) for x in xs]
    assert used == ["fixed", "fixed", "scaled", "vectorized"]
