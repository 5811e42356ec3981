"""Exact evaluation agrees with a direct Fraction computation of the formulas."""

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from reference import maxout_reference, pre_activations, transformer_reference
from strategies_local import maxout_networks, rationals, transformers, vectors

from exactmax.io.jsonfile import Cursor, parse_json_text
from exactmax.io.models import model_to_json, read_maxout, read_transformer
from exactmax.io.numbers import to_fraction
from exactmax.kernel.maxout import evaluate_maxout
from exactmax.kernel.rational import Q, rational
from exactmax.kernel.transformer import evaluate_transformer
from exactmax.vectorized.scaled import MaxoutEvaluator


def fractions(v):
    return [to_fraction(a) for a in v]


@given(st.data())
def test_maxout_evaluation_equals_the_fraction_formula(data):
    net = data.draw(maxout_networks())
    x = data.draw(vectors(net.input_dim))
    assert fractions(evaluate_maxout(net, x)) == maxout_reference(net, fractions(x))


@given(st.data())
def test_batch_evaluation_equals_pointwise_evaluation(data):
    net = data.draw(maxout_networks())
    xs = data.draw(st.lists(vectors(net.input_dim), min_size=1, max_size=6))
    ev = MaxoutEvaluator(net)
    assert ev.evaluate_batch(xs) == [ev.evaluate(x) for x in xs]


@given(st.data())
def test_evaluation_at_a_tie_point(data):
    """Inputs where two pieces of a first-layer unit are equal (x on a tie set)."""
    net = data.draw(maxout_networks(dims=(2, 3)))
    p, r = net.layers[0].units[0].pieces[0], net.layers[0].units[0].pieces[-1]
    diff = [a - b for a, b in zip(p.w, r.w)]
    x = list(data.draw(vectors(net.input_dim)))
    nz = [i for i, a in enumerate(diff) if a]
    if nz:  # solve diff . x + (p.b - r.b) = 0 for one coordinate
        i = nz[0]
        rest = sum((diff[j] * x[j] for j in range(len(x)) if j != i), Q(0))
        x[i] = -(rest + p.b - r.b) / diff[i]
        z = pre_activations(net, x)[0][0]
        assert z[0] == z[-1]
    assert fractions(evaluate_maxout(net, x)) == maxout_reference(net, fractions(x))


@given(st.data())
def test_transformer_evaluation_equals_the_fraction_formula(data):
    tf = data.draw(transformers())
    x = data.draw(vectors(tf.input_dim, max_num=2, max_den=2, large=False))
    assert fractions(evaluate_transformer(tf, x)) == transformer_reference(tf, fractions(x))


@given(st.data())
def test_json_round_trip_preserves_the_model(data):
    net = data.draw(st.one_of(maxout_networks(), transformers()))
    import json
    text = json.dumps(model_to_json(net))
    root = Cursor("t.json", "", parse_json_text(text, "t.json"))
    reread = read_maxout(root) if "layers" in root.value else read_transformer(root)
    assert reread == net


@pytest.mark.parametrize("bad", [0.5, True, "1/2", None, 1e300])
def test_the_kernel_refuses_inexact_numbers(bad):
    with pytest.raises(TypeError):
        rational(bad)


def test_a_float_cannot_be_mixed_into_a_rational():
    with pytest.raises(TypeError):
        Q(1, 2) + 0.5


@given(rationals())
def test_rational_accepts_the_exact_types(q):
    assert rational(q) == q
    assert rational(to_fraction(q)) == q
    assert rational(Fraction(int(q.p), int(q.q))) == q


@given(st.data())
def test_transformer_batch_evaluation_equals_pointwise_evaluation(data):
    from exactmax.vectorized.scaled import TransformerEvaluator
    tf = data.draw(transformers())
    xs = data.draw(st.lists(vectors(tf.input_dim, max_num=2, max_den=2, large=False),
                            min_size=1, max_size=4))
    ev = TransformerEvaluator(tf)
    assert ev.evaluate_batch(xs) == [ev.evaluate(x) for x in xs]
    assert [fractions(y) for y in ev.evaluate_batch(xs)] == [
        transformer_reference(tf, fractions(x)) for x in xs]


@given(st.data())
def test_the_scaled_evaluators_equal_the_kernels_definitional_ones(data):
    """The fast evaluators producers use (untrusted) give exactly the kernel's values, at
    random points and at points where hardmax and max ties occur (small integers)."""
    from exactmax.vectorized.scaled import TransformerEvaluator
    net = data.draw(maxout_networks())
    xs = data.draw(st.lists(vectors(net.input_dim, max_num=2, max_den=1, large=False),
                            min_size=1, max_size=4))
    assert MaxoutEvaluator(net).evaluate_batch(xs) == [evaluate_maxout(net, x) for x in xs]
    tf = data.draw(transformers())
    xs = data.draw(st.lists(vectors(tf.input_dim, max_num=2, max_den=1, large=False),
                            min_size=1, max_size=4))
    assert TransformerEvaluator(tf).evaluate_batch(xs) == [evaluate_transformer(tf, x)
                                                           for x in xs]


def test_the_kernel_evaluators_refuse_what_has_no_exact_value():
    """A wrong input length, a float and softmax attention are refused, not guessed."""
    from dataclasses import replace

    from exactmax.construct.transformer import compile_transformer
    from exactmax.kernel.affine import Affine
    from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
    from exactmax.kernel.polyhedron import Box
    from exactmax.kernel.transformer import SOFTMAX, Attention
    net = MaxoutNetwork(1, (Layer((Unit((Piece((Q(1),), Q(0)), Piece((Q(-1),), Q(0)))),)),))
    tf = compile_transformer(net, Box((Q(-4),), (Q(4),))).transformer
    assert evaluate_maxout(net, (Q(-3),)) == (Q(3),) == evaluate_transformer(tf, (Q(-3),))
    for bad in [(Q(1), Q(2)), ()]:
        with pytest.raises(ValueError):
            evaluate_maxout(net, bad)
        with pytest.raises(ValueError):
            evaluate_transformer(tf, bad)
    with pytest.raises(TypeError):
        evaluate_maxout(net, (0.5,))
    with pytest.raises(TypeError):
        evaluate_transformer(tf, (0.5,))
    i = next(i for i, s in enumerate(tf.sublayers) if isinstance(s, Attention))
    soft = replace(tf, sublayers=tf.sublayers[:i] + (replace(tf.sublayers[i], kind=SOFTMAX),)
                   + tf.sublayers[i + 1:])
    with pytest.raises(ValueError, match="softmax"):
        evaluate_transformer(soft, (Q(1),))
