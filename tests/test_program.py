"""Programs: the kernel's translation of both kinds of network, and the z3 encodings, agree
with the kernel's evaluators (ties included)."""

import pytest
import z3
from hypothesis import given, settings, strategies as st

from exactmax.construct.transformer import CompileOptions, compile_transformer
from exactmax.engine.smt import encode_program, from_z3, rat
from exactmax.kernel.maxout import evaluate_maxout
from exactmax.kernel.program import Unsupported, program_of_maxout, program_of_transformer
from exactmax.kernel.rational import Q
from exactmax.kernel.transformer import Attention, Head, evaluate_transformer
from exactmax.vectorized.program import evaluate_program
from strategies_local import maxout_networks, transformers, vectors
from test_construction import boxes, points_in, with_ties_at


def z3_outputs(p, x):
    """The outputs z3 derives from the encoding with the input fixed to x (must be unique)."""
    xs = [z3.Real(f"x{i}") for i in range(p.dim)]
    cons, outs = encode_program(p, xs, "p")
    s = z3.Solver()
    s.add(cons + [xv == rat(v) for xv, v in zip(xs, x)])
    assert s.check() == z3.sat
    m = s.model()
    y = tuple(from_z3(m.eval(o, model_completion=True)) for o in outs)
    s.add(z3.Or([o != rat(v) for o, v in zip(outs, y)]))
    assert s.check() == z3.unsat  # the encoding determines the outputs
    return y


@settings(max_examples=40)
@given(st.data())
def test_maxout_program_and_encoding_equal_the_evaluator(data):
    net = data.draw(maxout_networks())
    box = data.draw(boxes(net.input_dim))
    x = data.draw(points_in(box))
    if data.draw(st.booleans()):
        net = with_ties_at(net, x, data)
    p = program_of_maxout(net)
    y = evaluate_maxout(net, x)
    assert evaluate_program(p, x) == y
    assert z3_outputs(p, x) == y


def constant_queries(tf):
    """The Transformer with every query made constant (W_Q = 0): scores stay linear."""
    from dataclasses import replace
    subs = []
    for s in tf.sublayers:
        if isinstance(s, Attention):
            s = Attention(tuple(replace(h, query=tuple(tuple(Q(0) for _ in r) for r in h.query))
                                for h in s.heads), s.kind)
        subs.append(s)
    return replace(tf, sublayers=tuple(subs))


@settings(max_examples=40)
@given(st.data())
def test_transformer_program_and_encoding_equal_the_evaluator(data):
    """Random Transformers with constant queries: every score is 0, so every head averages
    all its values (the tie semantics with different values), plus ReLU layers."""
    tf = constant_queries(data.draw(transformers()))
    x = data.draw(vectors(tf.input_dim, max_num=2, max_den=2, large=False))
    p = program_of_transformer(tf)
    y = evaluate_transformer(tf, x)
    assert evaluate_program(p, x) == y
    assert z3_outputs(p, x) == y


@settings(max_examples=25)
@given(st.data(), st.sampled_from([CompileOptions(), CompileOptions(merged=True),
                                   CompileOptions(positional="scalar")]))
def test_compiled_transformer_programs_with_ties(data, options):
    net = data.draw(maxout_networks(max_depth=2, max_width=3, max_rank=3, dims=(1, 2)))
    box = data.draw(boxes(net.input_dim))
    x = data.draw(points_in(box))
    net = with_ties_at(net, x, data)
    tf = compile_transformer(net, box, options).transformer
    p = program_of_transformer(tf)
    assert evaluate_program(p, x) == evaluate_transformer(tf, x) == evaluate_maxout(net, x)
    assert z3_outputs(p, x) == evaluate_maxout(net, x)


def test_a_query_that_depends_on_the_input_is_unsupported():
    d = 2
    one = (Q(1), Q(0))
    head = Head(query=(one,), key=(one,), value=(one,), out=((Q(1),), (Q(0),)), scale=Q(1))
    from exactmax.kernel.affine import Affine
    from exactmax.kernel.transformer import Readout, Transformer
    tf = Transformer(1, d, ((Q(1),), (Q(0),)), ((Q(0), Q(1)), (Q(0), Q(2))),
                     (Attention((head,)),), Readout(Affine((one,), (Q(0),), d)))
    with pytest.raises(Unsupported, match="bilinear"):
        program_of_transformer(tf)
