"""verify stays layerwise on every shape the construction compiles: units of any mixture of
ranks (rank 1 included), repeated pieces, ties, output maps, box and polyhedral domains.

Theorem under test: verify(N, compile(N, P), P) is proved, kernel-checked, by the layerwise
strategy with one leaf per claim and no split; and a Transformer compiled from a network that
differs is refuted at a point the kernel evaluated, without the pre-search.
"""

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from exactmax.construct.transformer import CompileOptions, compile_transformer
from exactmax.kernel.certificate import Leaf
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.layerwise import UnitImage, check_layerwise
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit, evaluate_maxout
from exactmax.kernel.polyhedron import Box, Polyhedron
from exactmax.kernel.rational import Q
from exactmax.kernel.transformer import FeedForward, evaluate_transformer
from exactmax.prove.verify import VerifyOptions, verify_equal
from exactmax.strategies import domains, maxout_networks

def networks():
    """Maxout networks whose units have 1 to 4 pieces, some of them repeated (ties), some
    with an output map, some with numbers of 30 digits (``exactmax.strategies``)."""
    return maxout_networks(max_depth=3, max_width=4, max_rank=4, dims=(1, 3))


def _leaves_are_single(cert) -> bool:
    return all(isinstance(claim.tree, Leaf) for claims in cert.layers for claim in claims)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_construction_of_any_network_is_proved_layerwise_one_leaf_per_claim(data):
    net = data.draw(networks())
    dom = data.draw(domains(net.input_dim))
    merged = data.draw(st.booleans())
    tf = compile_transformer(net, dom, CompileOptions(merged=merged)).transformer
    v = verify_equal(net, tf, dom, VerifyOptions(timeout_s=60))
    assert (v.verdict, v.trust) == ("proved", "kernel-checked"), v.reason
    assert v.stats["strategy"] == "layerwise"
    assert v.stats["splits"] == 0 and _leaves_are_single(v.certificate)
    assert v.stats["leaves_checked"] == v.stats["claims"]
    assert (v.certificate.image is not None) == isinstance(dom, Polyhedron)
    assert (v.certificate.unmerged is not None) == (merged and len(net.layers) > 1)


def _shift_unit(net, layer, unit, delta):
    """Add delta to every piece of one unit: that unit's value moves by delta everywhere."""
    layers = list(net.layers)
    units = list(layers[layer].units)
    units[unit] = Unit(tuple(Piece(p.w, p.b + delta) for p in units[unit].pieces))
    layers[layer] = Layer(tuple(units))
    return dataclasses.replace(net, layers=tuple(layers))


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_transformer_compiled_from_a_shifted_network_is_refuted_without_search(data):
    net = data.draw(networks())
    last = len(net.layers) - 1
    i = data.draw(st.integers(0, net.layers[last].width - 1))
    if net.output is not None and not any(row[i] for row in net.output.W):
        net = dataclasses.replace(net, output=None)   # the shift must reach the output
    dom = data.draw(domains(net.input_dim))
    options = CompileOptions(merged=data.draw(st.booleans()))
    if data.draw(st.booleans()):   # the network's last layer moved, then compiled
        tf = compile_transformer(_shift_unit(net, last, i, Q(1, 1000)), dom, options).transformer
    else:                          # the compiled Transformer's last bias moved (output 0)
        tf = compile_transformer(net, dom, options).transformer
        ff = tf.sublayers[-1]
        b2 = list(ff.outer.b)
        b2[0] += Q(1, 1000)        # row H_0, which the read-out returns as y_0
        subs = tf.sublayers[:-1] + (FeedForward(ff.inner, dataclasses.replace(
            ff.outer, b=tuple(b2))),)
        tf = dataclasses.replace(tf, sublayers=subs)
    v = verify_equal(net, tf, dom, VerifyOptions(timeout_s=60))
    assert v.verdict == "refuted", v.reason
    assert dom.contains(v.x) and evaluate_maxout(net, v.x) != evaluate_transformer(tf, v.x)
    assert v.stats["strategy"] == "layerwise" and v.stats["differs_in_layer"] == last + 1


def test_a_difference_in_a_middle_layer_is_pulled_back_to_the_domain():
    """Layer 2 of 3 moves by 1/1000 and layer 3 passes it on (rank-1 identity units): the
    layer found to differ on its box yields a point of the domain, checked by the kernel."""
    e = [Q(1), Q(0)], [Q(0), Q(1)]
    first = Layer((Unit((Piece((Q(1), Q(-1)), Q(0)), Piece((Q(-1), Q(2)), Q(1, 2)))),
                   Unit((Piece((Q(2), Q(1)), Q(0)),))))
    middle = Layer((Unit((Piece(tuple(e[0]), Q(0)), Piece(tuple(e[1]), Q(-1)))),
                    Unit((Piece(tuple(e[1]), Q(0)),))))
    identity = Layer((Unit((Piece(tuple(e[0]), Q(0)),)), Unit((Piece(tuple(e[1]), Q(0)),))))
    net = MaxoutNetwork(2, (first, middle, identity))
    dom = Box((Q(-1), Q(-1)), (Q(1), Q(1)))
    tf = compile_transformer(_shift_unit(net, 1, 0, Q(1, 1000)), dom).transformer
    v = verify_equal(net, tf, dom, VerifyOptions(timeout_s=60))
    assert v.verdict == "refuted" and v.stats["differs_in_layer"] == 2
    assert evaluate_maxout(net, v.x) != evaluate_transformer(tf, v.x)


# ------------------------------------------------------------------ the kernel's rule (B')

def _polyhedral_case():
    net = MaxoutNetwork(2, (
        Layer((Unit((Piece((Q(1), Q(1)), Q(0)), Piece((Q(-1), Q(0)), Q(1, 2)))),
               Unit((Piece((Q(0), Q(1)), Q(0)),)))),
        Layer((Unit((Piece((Q(1), Q(-1)), Q(0)), Piece((Q(1, 2), Q(1)), Q(0)))),))))
    dom = Polyhedron(((Q(1), Q(0)), (Q(-1), Q(0)), (Q(0), Q(1)), (Q(0), Q(-1)),
                      (Q(1), Q(1))), (Q(1), Q(1), Q(1), Q(1), Q(1, 2)), 2)
    tf = compile_transformer(net, dom).transformer
    v = verify_equal(net, tf, dom)
    assert v.stats["strategy"] == "layerwise" and v.certificate.image is not None
    return net, tf, dom, v.certificate


def test_the_kernel_accepts_the_first_layer_over_the_polyhedron_and_rejects_tampering():
    net, tf, dom, cert = _polyhedral_case()
    assert check_layerwise(net, tf, dom, cert) > 0
    B1 = cert.boxes[1]
    # B_1 tighter than its Farkas proofs show: rejected, on either end
    for lower, upper in (((B1.lower[0] + Q(1, 2 ** 20),) + B1.lower[1:], B1.upper),
                         (B1.lower, (B1.upper[0] - Q(1, 2 ** 20),) + B1.upper[1:])):
        bad = dataclasses.replace(cert, boxes=(cert.boxes[0], Box(lower, upper)))
        with pytest.raises(CheckFailed, match="B_1"):
            check_layerwise(net, tf, dom, bad)
    im = cert.image[0]
    for tampered in (UnitImage(im.lower_piece, im.lower, im.upper[:-1]),
                     UnitImage(len(net.layers[0].units[0].pieces), im.lower, im.upper),
                     UnitImage(im.lower_piece, tuple((i, 2 * y) for i, y in im.lower),
                               im.upper)):
        bad = dataclasses.replace(cert, image=(tampered,) + cert.image[1:])
        with pytest.raises(CheckFailed):
            check_layerwise(net, tf, dom, bad)
    # without (B'), the first layer's claims are over B_0, where the LP gates do not hold
    with pytest.raises(CheckFailed):
        check_layerwise(net, tf, dom, dataclasses.replace(cert, image=None))
    # image proofs say nothing about two Maxout networks
    with pytest.raises(CheckFailed, match="Transformer"):
        check_layerwise(net, net, dom, cert)


def test_the_kernel_checks_the_shapes_of_boxes_and_domain_itself():
    net, tf, dom, cert = _polyhedral_case()
    one_d = Box((Q(-1),), (Q(1),))
    with pytest.raises(CheckFailed, match="dimension"):
        check_layerwise(net, tf, one_d, cert)
    short = Box(cert.boxes[0].lower, cert.boxes[0].upper[:1])
    with pytest.raises(CheckFailed, match="B_0"):
        check_layerwise(net, tf, dom, dataclasses.replace(cert, boxes=(short,) +
                                                          cert.boxes[1:]))


# ------------------------------------------------------------------ the kernel's rule (M)

def test_a_merged_transformer_is_checked_through_its_unmerged_form_and_tampering_fails():
    net, _, dom, _ = _polyhedral_case()
    tf = compile_transformer(net, dom, CompileOptions(merged=True)).transformer
    v = verify_equal(net, tf, dom)
    assert v.stats["strategy"] == "layerwise" and v.certificate.unmerged is not None
    cert = v.certificate
    assert check_layerwise(net, tf, dom, cert) > 0
    u = cert.unmerged

    def with_sublayer(model, i, new):
        subs = list(model.sublayers)
        subs[i] = new
        return dataclasses.replace(model, sublayers=tuple(subs))

    gate = u.sublayers[3]                     # F_1, the gate of the second layer
    b1 = list(gate.inner.b)
    b1[0] += 1
    moved = FeedForward(dataclasses.replace(gate.inner, b=tuple(b1)), gate.outer)
    for bad in (with_sublayer(u, 3, moved),   # the unmerged gate is not the merged one's
                with_sublayer(u, 3, u.sublayers[4]),   # an attention where a gate should be
                dataclasses.replace(u, sublayers=u.sublayers[:3])):   # a pair missing
        with pytest.raises(CheckFailed):
            check_layerwise(net, tf, dom, dataclasses.replace(cert, unmerged=bad))
    # only the pairs are read (the rest is the merged Transformer's own, as in Coq)
    other = with_sublayer(u, 1, u.sublayers[4])
    assert check_layerwise(net, tf, dom, dataclasses.replace(cert, unmerged=other)) > 0
    # the merged Transformer itself broken in its merged sub-layer: no unmerged form fits
    merged = tf.sublayers[2]
    b1 = list(merged.inner.b)
    b1[-1] += Q(1, 1000)
    broken = with_sublayer(tf, 2, FeedForward(dataclasses.replace(merged.inner, b=tuple(b1)),
                                              merged.outer))
    with pytest.raises(CheckFailed, match="not the unmerged"):
        check_layerwise(net, broken, dom, cert)
    with pytest.raises(CheckFailed, match="for a Transformer"):
        check_layerwise(net, net, dom, cert)


# ------------------------------------------------------------------ answers and time limits

def _permuted_pair(seed=5, d=4, N=16, D=8):
    """A deep network and the same function with two units of its first layer swapped (and
    the next layer's weights with them) and, in a unit of its last layer, a piece that is
    its first piece minus 1 (never the max): equal, but not layer by layer, and no layer
    correspondence matches the pieces."""
    import random
    rng = random.Random(seed)
    layers, width = [], d
    for _ in range(D):
        layers.append(Layer(tuple(Unit(tuple(
            Piece(tuple(Q(rng.randint(-8, 8), rng.randint(1, 16)) for _ in range(width)),
                  Q(rng.randint(-8, 8), rng.randint(1, 16))) for _ in range(3)))
            for _ in range(N))))
        width = N
    a = MaxoutNetwork(d, tuple(layers))
    perm = list(range(N))
    perm[0], perm[1] = 1, 0
    first = Layer(tuple(a.layers[0].units[perm[i]] for i in range(N)))
    second = Layer(tuple(Unit(tuple(Piece(tuple(p.w[perm[i]] for i in range(N)), p.b)
                                    for p in u.pieces)) for u in a.layers[1].units))
    u = a.layers[-1].units[0]
    last = Layer((Unit(u.pieces + (Piece(u.pieces[0].w, u.pieces[0].b - 1),)),)
                 + a.layers[-1].units[1:])
    return a, dataclasses.replace(a, layers=(first, second) + a.layers[2:-1] + (last,))


def test_an_unknown_answer_comes_within_the_time_limit_and_reports_its_real_time(tmp_path,
                                                                                  capsys):
    import json
    import time
    from exactmax.cli import main
    from exactmax.io.models import model_to_json
    a, b = _permuted_pair()
    box = Box((Q(-1),) * 4, (Q(1),) * 4)
    paths = []
    for name, net in (("a", a), ("b", b)):
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(model_to_json(dataclasses.replace(net, domain=box))))
        paths.append(str(p))
    t0 = time.monotonic()
    assert main(["equiv", *paths, "--timeout", "3", "--no-search", "--json"]) == 3
    wall = time.monotonic() - t0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "unknown" and wall <= 3 + 1
    assert 2.5 <= out["time_s"] <= wall
    assert "layerwise: layerwise" not in out["reason"]
    assert out["stats"]["layerwise_failed"].startswith("layerwise: layer 1 differs")
    assert out["stats"]["layers"][0]["result"].startswith("layer 1 differs")


def test_the_kernel_refuses_a_domain_whose_rows_do_not_fit_it():
    from exactmax.kernel.certificate import domain_rows
    net, tf, dom, cert = _polyhedral_case()
    short = Polyhedron(dom.A[:-1] + ((Q(1),),), dom.b, 2)   # the last row lost an entry
    with pytest.raises(CheckFailed, match="rows"):
        domain_rows(short)
    with pytest.raises(CheckFailed):
        check_layerwise(net, tf, short, cert)
    with pytest.raises(CheckFailed, match="rows"):             # a b entry missing
        domain_rows(Polyhedron(dom.A, dom.b[:-1], 2))
