"""Softmax error bound: the kernel's exact re-check (kernel/softmax.py) and the producer."""

import os

import pytest
from flint import arb

from exactmax.io import load_model
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from exactmax.kernel.polyhedron import Box
from exactmax.kernel.rational import Q
from exactmax.kernel.softmax import check_softmax_bound, exp_neg_bounds
from exactmax.softmax.bound import _float_error, certify, observed_error, setting_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TENT = os.path.join(ROOT, "examples", "tent.json")


@pytest.mark.parametrize("a", [Q(0), Q(1, 3), Q(5), Q(100), Q(300)])
def test_exp_bounds_bracket_the_ball_value(a):
    lo, hi = exp_neg_bounds(a)
    v = (-arb(a)).exp()
    assert lo <= hi
    assert arb(lo) <= v.upper() and v.lower() <= arb(hi)


def test_certified_bound_is_above_the_observed_error_and_shrinks_with_lambda():
    net = load_model(TENT)
    s = setting_of(net, net.domain)
    res = {}
    for lam in (Q(100), Q(1000)):
        c = certify(s, lam, max_cells=150, timeout_s=10)
        assert c.verdict == "certified" and c.bound is not None
        o = observed_error(s, lam, c.search.worst, climbs=2, steps=30)
        assert arb(c.bound) >= o.error
        for x in [(Q(0), Q(0)), (Q(1, 3), Q(-1, 7)), (Q(-1), Q(1))]:
            assert float(c.bound) >= _float_error(net, s.n, float(lam), x)
        res[lam] = c
    assert res[Q(1000)].bound < res[Q(100)].bound


def test_the_checker_rejects_a_wrong_tree_and_a_wrong_root():
    net = load_model(TENT)
    s = setting_of(net, net.domain)
    with pytest.raises(CheckFailed):  # the whole box is not outside constraint 0
        check_softmax_bound(net, s.gates, s.n, Q(10), s.domain, *s.root, ("out", 0))
    with pytest.raises(CheckFailed):
        check_softmax_bound(net, s.gates, s.n, Q(10), s.domain, (Q(0), Q(0)), s.root[1],
                            ("leaf",))
    with pytest.raises(CheckFailed):
        check_softmax_bound(net, s.gates, s.n, Q(0), s.domain, *s.root, ("leaf",))


def test_a_tight_gate_is_detected():
    # h = max(0, x) on [-1, 1]; layer 2 piece h - 1 has range [-1, 0], so C_2 = 1, but the
    # softmax value at x = -1 is slightly negative and h~ - 1 < -1.
    net = MaxoutNetwork(1, (Layer((Unit((Piece((Q(0),), Q(0)), Piece((Q(1),), Q(0)))),)),
                            Layer((Unit((Piece((Q(1),), Q(-1)),)),))),
                        None, Box((Q(-1),), (Q(1),)))
    s = setting_of(net, net.domain)
    assert s.gates[1] == 1
    c = certify(s, Q(10), max_cells=400, timeout_s=10)
    assert c.verdict in ("gates-fail", "unknown") and c.bound is None
    if c.verdict == "gates-fail":
        assert "not exact" in c.reason
