"""Theorems T1-T3 of docs/notes/construction.md §2 on random instances, ties included:

    evaluate(compile(net), x) == evaluate(net, x)   for x in the domain,

in every token, with the per-layer invariant (h^l, 0, 0, e_t) after every third sub-layer,
for the default construction and for each allowed variant."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from exactmax.construct.bounds import DomainError, layer_bounds
from exactmax.construct.size import size_report
from exactmax.construct.transformer import CompileOptions, Layout, compile_transformer
from exactmax.io.jsonfile import Cursor, parse_json_text
from exactmax.io.models import model_to_json, read_transformer
from exactmax.kernel.affine import dot
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit, evaluate_maxout
from exactmax.kernel.polyhedron import Box, Polyhedron
from exactmax.kernel.rational import Q
from exactmax.vectorized.scaled import TransformerEvaluator
from strategies_local import maxout_networks, rationals, vectors

VARIANTS = [CompileOptions(), CompileOptions(merged=True), CompileOptions(positional="scalar"),
            CompileOptions(merged=True, positional="scalar")]


@st.composite
def boxes(draw, d):
    lo = draw(vectors(d, large=False))
    width = draw(st.lists(st.integers(0, 4), min_size=d, max_size=d))
    return Box(lo, tuple(a + w for a, w in zip(lo, width)))


@st.composite
def points_in(draw, box: Box):
    """Exact points of the box: vertices, face points and interior points."""
    x = []
    for lo, hi in zip(box.lower, box.upper):
        kind = draw(st.sampled_from(["lo", "hi", "in"]))
        if kind == "lo":
            x.append(lo)
        elif kind == "hi":
            x.append(hi)
        else:
            n = draw(st.integers(0, 10**6))
            x.append(lo + (hi - lo) * Q(n, 10**6))
    return tuple(x)


def with_ties_at(net: MaxoutNetwork, x, rng) -> MaxoutNetwork:
    """The network with, in some units of every layer, the bias of one piece moved so that
    this piece *ties* the unit's maximum at x: x then lies on a tie set of the network."""
    h, layers = tuple(x), []
    for layer in net.layers:
        units = []
        for unit in layer.units:
            z = [dot(p.w, h) + p.b for p in unit.pieces]
            if len(unit.pieces) > 1 and rng.draw(st.booleans()):
                j = rng.draw(st.integers(0, len(unit.pieces) - 1))
                p = unit.pieces[j]
                pieces = list(unit.pieces)
                pieces[j] = Piece(p.w, p.b + max(z) - z[j])
                unit = Unit(tuple(pieces))
            units.append(unit)
        layer = Layer(tuple(units))
        layers.append(layer)
        h = tuple(max(dot(p.w, h) + p.b for p in u.pieces) for u in layer.units)
    return MaxoutNetwork(net.input_dim, tuple(layers), net.output, net.domain)


def hidden_states(net, x):
    h, out = tuple(x), []
    for layer in net.layers:
        h = tuple(max(dot(p.w, h) + p.b for p in u.pieces) for u in layer.units)
        out.append(h)
    return out


def expected_token(L: Layout, d_m: int, h, t: int, z=()):
    col = [Q(0)] * d_m
    for j, v in enumerate(h):
        col[L.H(j)] = v
    for i, v in enumerate(z):
        col[L.Z(i)] = v
    col[L.P(t)] = Q(1) if L.positional == "onehot" else Q(t + 1)
    return col


networks = maxout_networks(max_depth=4, max_width=6, max_rank=5, dims=(1, 3))


@settings(max_examples=60)
@given(st.data(), st.sampled_from(VARIANTS))
def test_the_transformer_equals_the_network_in_every_token(data, options):
    net = data.draw(networks)
    box = data.draw(boxes(net.input_dim))
    x = data.draw(points_in(box))
    if data.draw(st.booleans()):
        net = with_ties_at(net, x, data)
    c = compile_transformer(net, box, options)
    tf = c.transformer
    L = Layout((tf.d_model - (tf.n_tokens if options.positional == "onehot" else 1)) // 3,
               tf.n_tokens, options.positional)
    states = TransformerEvaluator(tf).tokens(x)
    hs = hidden_states(net, x)
    y = evaluate_maxout(net, x)
    # every token holds the network output at the end
    final = states[-1]
    for t in range(tf.n_tokens):
        col = [final[i, t] for i in range(tf.d_model)]
        assert col == expected_token(L, tf.d_model, y, t)
    # the per-layer invariant
    D = len(net.layers)
    for l in range(D - 1):
        if not options.merged:
            X, z = states[3 * (l + 1)], ()
        else:  # after the merged FF: H = h^l, Z = the next layer's pre-activations of token t
            X = states[2 * l + 3]
        for t in range(tf.n_tokens):
            if options.merged:
                nxt = net.layers[l + 1]
                z = [dot(u.pieces[min(t, len(u.pieces) - 1)].w, hs[l]) +
                     u.pieces[min(t, len(u.pieces) - 1)].b for u in nxt.units]
            col = [X[i, t] for i in range(tf.d_model)]
            assert col == expected_token(L, tf.d_model, hs[l], t, z)
    assert tf.n_tokens == max(layer.rank for layer in net.layers)
    assert len(tf.sublayers) == (2 * D + 1 if options.merged else 3 * D)


@settings(max_examples=30)
@given(st.data())
def test_gate_constants_bound_every_pre_activation(data):
    net = data.draw(networks)
    box = data.draw(boxes(net.input_dim))
    bounds = layer_bounds(net, box)
    x = data.draw(points_in(box))
    h = tuple(x)
    for layer, b in zip(net.layers, bounds):
        for i, u in enumerate(layer.units):
            for j, p in enumerate(u.pieces):
                z = dot(p.w, h) + p.b
                assert b.z_lo[i][j] <= z <= b.z_hi[i][j] and abs(z) <= b.gate
        h = tuple(max(dot(p.w, h) + p.b for p in u.pieces) for u in layer.units)


@settings(max_examples=20)
@given(st.data())
def test_the_compiled_file_round_trips_through_the_loader(data):
    net = data.draw(maxout_networks(max_depth=2, max_width=3, max_rank=3))
    tf = compile_transformer(net, data.draw(boxes(net.input_dim)),
                             data.draw(st.sampled_from(VARIANTS))).transformer
    text = json.dumps(model_to_json(tf))
    again = read_transformer(Cursor("tf.json", "", parse_json_text(text, "tf.json")))
    assert again == tf
    assert json.dumps(model_to_json(again)) == text


def test_a_relu_network_compiles_to_two_tokens():
    zero = Piece((Q(0), Q(0)), Q(0))
    relu = Layer((Unit((Piece((Q(1), Q(-1)), Q(0)), zero)), Unit((Piece((Q(2), Q(1)), Q(-1)), zero))))
    net = MaxoutNetwork(2, (relu,))
    tf = compile_transformer(net, Box((Q(-1), Q(-1)), (Q(1), Q(1)))).transformer
    assert tf.n_tokens == 2
    for x in [(Q(1, 2), Q(-1, 3)), (Q(0), Q(0)), (Q(1), Q(-1))]:
        assert TransformerEvaluator(tf).evaluate(x) == evaluate_maxout(net, x)


def test_lp_bounds_over_a_polyhedron_are_tighter_and_sound():
    # the triangle x, y >= 0, x + y <= 1, and the piece x + y: LP gives 1, the box gives 2;
    # the gate constant is the least integer strictly above
    P = Polyhedron(((Q(-1), Q(0)), (Q(0), Q(-1)), (Q(1), Q(1))), (Q(0), Q(0), Q(1)), 2)
    net = MaxoutNetwork(2, (Layer((Unit((Piece((Q(1), Q(1)), Q(0)), Piece((Q(-1), Q(0)), Q(0)))),)),))
    lp = compile_transformer(net, P, CompileOptions(bounds="lp"))
    box = compile_transformer(net, P, CompileOptions(bounds="interval"))
    assert lp.gates == (Q(2),) and box.gates == (Q(3),)
    for x in [(Q(0), Q(0)), (Q(1), Q(0)), (Q(1, 3), Q(2, 3)), (Q(0), Q(1, 2))]:
        assert TransformerEvaluator(lp.transformer).evaluate(x) == evaluate_maxout(net, x)


def test_a_gate_constant_too_small_breaks_the_construction():
    """The hypothesis on C_l is needed: with C below the pre-activation range the compiled
    Transformer differs from the network (so the tests above can fail)."""
    net = MaxoutNetwork(1, (Layer((Unit((Piece((Q(1),), Q(0)), Piece((Q(1, 2),), Q(0)))),)),))
    small = Box((Q(-1, 10),), (Q(1, 10),))
    tf = compile_transformer(net, small).transformer  # C = 1 (1/10 rounded up)
    x = (Q(10),)  # outside the domain: z = (10, 5) > C = 1, token 0 gets 11 + 4 - 1
    assert TransformerEvaluator(tf).evaluate(x) != evaluate_maxout(net, x)


@pytest.mark.parametrize("domain,msg", [
    (Box((Q(1),), (Q(0),)), "empty"),
    (Polyhedron(((Q(-1),),), (Q(0),), 1), "unbounded"),
    (Polyhedron(((Q(1),), (Q(-1),)), (Q(0), Q(-1)), 1), "empty"),
])
def test_empty_or_unbounded_domains_are_refused(domain, msg):
    net = MaxoutNetwork(1, (Layer((Unit((Piece((Q(1),), Q(0)),)),)),))
    with pytest.raises(DomainError, match=msg):
        compile_transformer(net, domain)


def test_size_report_counts():
    net = MaxoutNetwork(2, (Layer((Unit((Piece((Q(1), Q(2)), Q(0)), Piece((Q(0), Q(1)), Q(1)))),
                                   Unit((Piece((Q(1), Q(0)), Q(3)),)))),))
    tf = compile_transformer(net, Box((Q(0), Q(0)), (Q(1), Q(1)))).transformer
    rep = size_report(net, tf, merged=False)
    assert rep["maxout_params"] == 2 * 3 + 1 * 3
    assert rep["tokens"] == 2 and rep["sublayers"] == 3 and rep["heads"] == 2
    assert rep["d_model"] == 3 * 2 + 2
    assert rep["transformer_nonzero"] <= rep["transformer_params"]
    assert sum(l["transformer_params"] for l in rep["layers"]) < rep["transformer_params"]
