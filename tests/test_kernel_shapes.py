"""The kernel checks every shape it relies on itself (#18, finding 3).

The readers in ``io/`` refuse malformed files, but the kernel is meant to be the only gate to
"proved": a model, a domain or a certificate built in Python with mismatched lengths must be
rejected by the kernel's own checks (``CheckFailed``), never truncated by a ``zip`` and never
accepted.  Each case below starts from a certificate the kernel accepts and changes one shape.
"""

import dataclasses
from fractions import Fraction

import pytest
from flint import fmpz

from exactmax.construct.transformer import compile_transformer
from exactmax.kernel.certificate import Leaf
from exactmax.kernel.equivalence import check_equivalence
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.layerwise import check_layerwise
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit, check_maxout_shapes
from exactmax.kernel.polyhedron import Box, Polyhedron
from exactmax.kernel.rational import Q
from exactmax.kernel.softmax import check_softmax_bound
from exactmax.kernel.transformer import check_transformer_shapes
from exactmax.prove.verify import VerifyOptions, verify_equal
from exactmax.softmax.bound import setting_of


def _net3():
    """max(x0 + x1, x2, 0) then max(h, 1 - h) on three inputs."""
    one, zero = Q(1), Q(0)
    l1 = Layer((Unit((Piece((one, one, zero), zero), Piece((zero, zero, one), zero),
                      Piece((zero, zero, zero), zero))),))
    l2 = Layer((Unit((Piece((one,), zero), Piece((-one,), one))),))
    return MaxoutNetwork(3, (l1, l2))


BOX3 = Box((Q(-1),) * 3, (Q(1),) * 3)


def _proved(net, dom, strategy):
    tf = compile_transformer(net, dom).transformer
    v = verify_equal(net, tf, dom, VerifyOptions(strategy=strategy, timeout_s=60))
    assert v.verdict == "proved" and v.trust == "kernel-checked", v.reason
    return tf, v.certificate


@pytest.mark.parametrize("strategy", ["layerwise", "monolithic"])
def test_the_untouched_certificate_is_accepted(strategy):
    net = _net3()
    tf, cert = _proved(net, BOX3, strategy)
    assert check_equivalence(net, tf, BOX3, cert) >= 1


@pytest.mark.parametrize("strategy", ["layerwise", "monolithic"])
@pytest.mark.parametrize("domain", [
    Box((Q(-1),), (Q(1),)),                                   # a 1-D box for 3 inputs
    Box((Q(-1),) * 3, (Q(1),)),                               # 3 lower bounds, 1 upper
    Box((Q(-1),), (Q(1),) * 3),                               # 1 lower bound, 3 upper
    Box((Q(-1),) * 3, (Q(1), Q(1), 1.0)),                     # a float bound
    Polyhedron(((Q(1),),) * 2, (Q(1), Q(1)), 3),              # rows of length 1
    Polyhedron(((Q(1), Q(0), Q(0)),), (Q(1), Q(1)), 3),       # two right-hand sides, one row
], ids=["1-D box", "short upper", "short lower", "float bound", "short rows", "extra rhs"])
def test_a_domain_of_the_wrong_shape_is_rejected_not_truncated(strategy, domain):
    net = _net3()
    tf, cert = _proved(net, BOX3, strategy)
    with pytest.raises(CheckFailed):
        check_equivalence(net, tf, domain, cert)
    if strategy == "layerwise":
        with pytest.raises(CheckFailed):
            check_layerwise(net, tf, domain, cert)


def _with_piece(net, layer, unit, piece, p):
    layers = list(net.layers)
    units = list(layers[layer].units)
    pieces = list(units[unit].pieces)
    pieces[piece] = p
    units[unit] = Unit(tuple(pieces))
    layers[layer] = Layer(tuple(units))
    return dataclasses.replace(net, layers=tuple(layers))


@pytest.mark.parametrize("strategy", ["layerwise", "monolithic"])
def test_a_model_of_the_wrong_shape_is_rejected(strategy):
    """A piece with two weights where the layer before has three inputs: zip would read it
    as (1, 1, 0) and the certificate would still fit; the kernel refuses it."""
    net = _net3()
    tf, cert = _proved(net, BOX3, strategy)
    short = _with_piece(net, 0, 0, 0, Piece((Q(1), Q(1)), Q(0)))
    with pytest.raises(CheckFailed):
        check_equivalence(short, tf, BOX3, cert)
    bad_tf = dataclasses.replace(tf, embedding=tf.embedding[:-1])
    with pytest.raises(CheckFailed):
        check_equivalence(net, bad_tf, BOX3, cert)


def test_the_softmax_checker_checks_its_shapes_too():
    net = _net3()
    s = setting_of(net, BOX3)
    lo, hi = s.root
    with pytest.raises(CheckFailed):   # a root box of one coordinate for three inputs
        check_softmax_bound(net, s.gates, s.n, Q(10), Box(lo[:1], hi[:1]), lo[:1], hi[:1],
                            ("leaf",))
    with pytest.raises(CheckFailed):   # a domain whose upper bounds are too short
        check_softmax_bound(net, s.gates, s.n, Q(10), Box(lo, hi[:1]), lo, hi, ("leaf",))
    short = _with_piece(net, 0, 0, 0, Piece((Q(1), Q(1)), Q(0)))
    with pytest.raises(CheckFailed):
        check_softmax_bound(short, s.gates, s.n, Q(10), BOX3, lo, hi, ("leaf",))


@pytest.mark.parametrize("strategy", ["layerwise", "monolithic"])
def test_a_model_with_a_fraction_entry_is_rejected_not_a_type_error(strategy):
    """rational() accepts a Fraction, but a Fraction does not mix with fmpq inside a checker:
    the shape checks accept only fmpq, fmpz and int entries, so the checker says CheckFailed."""
    net = _net3()
    tf, cert = _proved(net, BOX3, strategy)
    frac = _with_piece(net, 0, 0, 0, Piece((Fraction(1), Q(1), Q(0)), Q(0)))
    with pytest.raises(CheckFailed, match="expected an exact rational, got Fraction"):
        check_equivalence(frac, tf, BOX3, cert)
    E = ((Fraction(1),) + tf.embedding[0][1:],) + tf.embedding[1:]
    with pytest.raises(CheckFailed, match="expected an exact rational, got Fraction"):
        check_equivalence(net, dataclasses.replace(tf, embedding=E), BOX3, cert)
    with pytest.raises(TypeError):
        check_maxout_shapes(frac)
    with pytest.raises(TypeError):
        check_transformer_shapes(dataclasses.replace(tf, embedding=E))


@pytest.mark.parametrize("bias", [0, 1, fmpz(0), Q(0)])
def test_integer_entries_are_exact_rationals_too(bias):
    """The shape checks accept int and fmpz entries, so the checkers must compute with them: a
    piece with zero weights and an int (or fmpz) bias is a constant node of the program (it
    crashed the translation's hash key before), and a network equals itself on a box."""
    net = MaxoutNetwork(1, (Layer((Unit((Piece((0,), bias),)), Unit((Piece((1,), 0),)))),))
    assert check_equivalence(net, net, Box((Q(-1),), (Q(1),)), Leaf()) == 1
    other = MaxoutNetwork(1, (Layer((Unit((Piece((0,), bias + 1),)), Unit((Piece((1,), 0),)))),))
    with pytest.raises(CheckFailed, match="outputs differ"):
        check_equivalence(net, other, Box((Q(-1),), (Q(1),)), Leaf())
