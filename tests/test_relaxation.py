"""The relaxed leaf of property certificates (kernel/property.py ``Relaxed``, ``relax``) and
its producer (engine/relaxation.py): certificates accepted, every kind of wrong number
rejected, the JSON round trip, and export-coq's writing it."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from exactmax.io.jsonfile import Cursor
from exactmax.io.property_certificate import property_certificate_to_json, read_property_certificate
from exactmax.io.vnnlib import read_vnnlib
from exactmax.kernel.certificate import Row, Split, domain_rows
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.maxout import evaluate_maxout
from exactmax.kernel.program import program_of_maxout
from exactmax.kernel.property import Case, Relaxed, Upper, check_case, check_property
from exactmax.kernel.polyhedron import Polyhedron
from exactmax.kernel.rational import Q
from exactmax.prove.property import decide_property
from test_property import _deep_relu_net, relu_net, run

ONE, ZERO = Q(1), Q(0)


def _relaxed_leaves(t):
    if isinstance(t, Split):
        return _relaxed_leaves(t.ge) + _relaxed_leaves(t.lt)
    return [t] if isinstance(t, Relaxed) else []


def _prop(tmp_path, net, threshold):
    d = net.input_dim
    text = "".join(f"(declare-const X_{i} Real)\n(assert (>= X_{i} -1)) (assert (<= X_{i} 1))\n"
                   for i in range(d)) + "(declare-const Y_0 Real)\n"
    text += f"(assert (>= Y_0 {threshold}))\n"
    p = tmp_path / "p.vnnlib"
    p.write_text(text)
    return str(p), read_vnnlib(str(p))


def test_a_relaxed_certificate_of_a_deep_network_is_accepted_and_round_trips(tmp_path):
    net = _deep_relu_net(7)
    grid = [tuple(Q(int(v), 8) for v in x)
            for x in np.random.default_rng(1).integers(-8, 9, (300, 3))]
    best = max(evaluate_maxout(net, x)[0] for x in grid)
    path, prop = _prop(tmp_path, net, int(best) + 3)
    a = decide_property(net, prop, timeout_s=60, search=False)
    assert a.result == "unsat", a.reason
    leaves = [leaf for t in a.trees for leaf in _relaxed_leaves(t)]
    assert leaves and a.stats["proofs"].get("relaxed") == len(leaves)
    assert check_property(net, prop.cases, a.trees) == a.stats["leaves_checked"]
    onnx = tmp_path / "net.json"
    onnx.write_text("{}")
    doc = property_certificate_to_json(net, str(onnx), path, open(path).read(), a.trees, {})
    doc = json.loads(json.dumps(doc))
    net2, prop2, trees2, _, _ = read_property_certificate(Cursor("c.json", "", doc))
    assert trees2 == a.trees
    assert check_property(net2, prop2.cases, trees2) == a.stats["leaves_checked"]


def _one_relu_case():
    """y = relu(x) on x in [-1, 1]; the forbidden set y - x/2 >= 3/4 (relu(x) - x/2 = |x|/2
    <= 1/2 there: empty), a row over (x, y)."""
    net = relu_net([[1]], [0], [[1]], [0])
    p = program_of_maxout(net)
    P = Polyhedron(((Q(1),), (Q(-1),)), (Q(1), Q(1)), 1)
    case = Case(P, ((Row((Q(-1, 2), ONE), Q(-3, 4)),),))
    return net, p, case


def _hand_leaf():
    """The triangle on a in [-1, 1]: u = (a + 1) / 2, proved >= a by (1/2) x (1 - x >= 0) and
    >= 0 by (1/2) x (x + 1 >= 0).  Rows: 0: 1 - x >= 0, 1: 1 + x >= 0, 2: v - x >= 0,
    3: v >= 0, 4: u - v >= 0, 5 (the output row): v - x/2 - 3/4 >= 0.  Then
    rows 4 + 5 + (1/2) row 1 ... : (x + 1)/2 - v + v - x/2 - 3/4 = -1/4 < 0."""
    up = Upper((Q(1, 2), ZERO), Q(1, 2), (((0, Q(1, 2)),), ((1, Q(1, 2)),)))
    return Relaxed((), (up,), (((4, ONE), (5, ONE)),))


def test_the_triangle_by_hand_is_accepted_and_each_wrong_number_rejected():
    net, p, case = _one_relu_case()
    good = _hand_leaf()
    assert check_case(p, case, good) == 1
    up = good.uppers[0]
    bad = [
        dataclasses.replace(good, uppers=()),                                   # node left out
        dataclasses.replace(good, uppers=(up, up)),                             # one too many
        dataclasses.replace(good, uppers=(dataclasses.replace(up, beta=Q(1, 4)),)),  # u too low
        dataclasses.replace(good, uppers=(dataclasses.replace(up, lam=(Q(1, 4), ZERO)),)),
        dataclasses.replace(good, uppers=(dataclasses.replace(up, lam=(Q(1, 2),)),)),  # shape
        dataclasses.replace(good, uppers=(dataclasses.replace(
            up, proofs=(((0, Q(1, 3)),), ((1, Q(1, 2)),))),)),                  # wrong multiplier
        dataclasses.replace(good, uppers=(dataclasses.replace(
            up, proofs=(((0, Q(-1, 2)),), ((1, Q(1, 2)),))),)),                 # negative one
        dataclasses.replace(good, uppers=(dataclasses.replace(
            up, proofs=(((9, Q(1, 2)),), ((1, Q(1, 2)),))),)),                  # no such row
        dataclasses.replace(good, proofs=(((4, ONE),),)),                       # output row unused
        dataclasses.replace(good, proofs=()),                                   # no proof
    ]
    for leaf in bad:
        with pytest.raises(CheckFailed):
            check_case(p, case, leaf)
    # a relaxation that is unsound were the proofs not checked: u = a (v <= a) is false at a < 0
    # and v = 0 (u = the argument 0, which would fix the node to that map) is false at a > 0
    for unsound in (Upper((ONE, ZERO), ZERO, ((), ((1, ONE),))),
                    Upper((ZERO, ONE), ZERO, (((0, ONE),), ()))):
        with pytest.raises(CheckFailed):
            check_case(p, case, dataclasses.replace(good, uppers=(unsound,)))
    # the property is false for y >= 1/4 + x/2 at x = 1 (y = 1 - 1/2 = 1/2): no proof exists;
    # the hand proof must fail there
    case2 = Case(case.inputs, ((Row((Q(-1, 2), ONE), Q(-1, 4)),),))
    with pytest.raises(CheckFailed):
        check_case(p, case2, good)


def test_export_coq_writes_a_relaxed_certificate(tmp_path):
    """Relaxed leaves export (proofs/Relaxed.v; coqc's verdict: tests/test_coq_relaxed.py)."""
    net = _deep_relu_net(7)
    path, prop = _prop(tmp_path, net, 100)
    onnx_like = tmp_path / "net.json"
    from exactmax.io.models import model_to_json
    onnx_like.write_text(json.dumps(model_to_json(net)))
    cert = tmp_path / "c.json"
    a = decide_property(net, prop, timeout_s=60, search=False)
    assert a.result == "unsat", a.reason
    doc = property_certificate_to_json(net, str(onnx_like), path, open(path).read(), a.trees, {})
    assert "relaxed" in json.dumps(doc["cases"])
    cert.write_text(json.dumps(doc))
    r = run("check-cert", cert)
    assert r.returncode == 0, r.stderr
    r = run("export-coq", cert, "-o", tmp_path / "P.v")
    assert r.returncode == 0, r.stderr
    assert "Theorem net_property" in (tmp_path / "P.v").read_text()


def _threshold_prop(tmp_path, net, lo, hi, threshold, op=">="):
    d = net.input_dim
    text = "".join(f"(declare-const X_{i} Real)\n(assert (>= X_{i} {lo}))\n"
                   f"(assert (<= X_{i} {hi}))\n" for i in range(d)) + "(declare-const Y_0 Real)\n"
    text += f"(assert ({op} Y_0 {threshold}))\n"
    p = tmp_path / "p.vnnlib"
    p.write_text(text)
    return read_vnnlib(str(p))


def _one_leaf(net, prop):
    a = decide_property(net, prop, timeout_s=60, search=False)
    assert a.result == "unsat", a.reason
    assert len(a.trees) == 1 and isinstance(a.trees[0], Relaxed)     # the root cell, no split
    assert a.stats["proofs"].get("relaxed") == 1
    assert check_property(net, prop.cases, a.trees) == a.stats["leaves_checked"] == 1
    return a.trees[0]


def test_an_optimised_output_slope_closes_the_root_cell(tmp_path):
    """y = 2 relu(x) on [-1, 2], the forbidden set y <= -1/4.  The fixed slope (U = 2 > -L = 1:
    alpha = 1, y >= 2x >= -2) needs a split; alpha = 0 (y >= 0) closes the root: one leaf."""
    net = relu_net([[1]], [0], [[2]], [0])
    prop = _threshold_prop(tmp_path, net, -1, 2, "-0.25", "<=")
    leaf = _one_leaf(net, prop)
    assert len(leaf.uppers) == 1 and len(leaf.proofs) == 1


def test_optimised_slopes_of_the_hidden_layers_close_the_root_cell(tmp_path):
    """A 3 x 6 x 6 x 6 ReLU network on [-1, 1]^3 where y <= 11.9 with the slopes chosen per
    bound (alpha-CROWN's intermediate bounds) but only y <= 17.6 with the fixed hidden slopes
    and the output's optimised (y reaches about 7.5): the forbidden set y >= 13 is closed on
    the root cell, one relaxed leaf that the kernel checks."""
    net = _deep_relu_net(7)
    leaf = _one_leaf(net, _threshold_prop(tmp_path, net, -1, 1, 13))
    # rows: the root's 6 box rows, then per unstable node v - a >= 0, v >= 0, u - v >= 0; a
    # slope strictly between 0 and 1 uses both lower rows of its node
    base = 6

    def fractional(proof):
        ids = {i for i, _ in proof}
        return sum(1 for i in ids if i >= base and (i - base) % 3 == 0 and i + 1 in ids)

    assert sum(fractional(pr) for up in leaf.uppers for pr in up.proofs) > 0


def test_a_zero_slope_gives_an_empty_proof_not_zero_multipliers():
    from exactmax.engine.relaxation import _proof
    assert _proof({3: Q(1, 2), 5: Q(1)}, Q(0)) == ()
    assert _proof({3: Q(1, 2), 5: Q(0)}, Q(2)) == ((3, Q(1)),)


def test_an_input_whose_halves_gain_nothing_is_not_split_forever():
    """The lookahead splits the input whose halves' worse bound is best, but only where that
    beats the cell's own bound: when every split leaves the cell as it was or worse (the
    narrow inputs' halves are the cell again; the wide ones' relaxations got worse), the smear
    decides, which sends the split to the wide input."""
    from exactmax.engine.relaxation import LOOKAHEAD_GAIN, split_scores

    smear = np.array([1e-5, 30.0, 20.0, 1e-5, 1e-5])
    own = -49.03
    stuck = np.array([-49.0299, -88.68, -67.23, -49.0307, -49.0303])
    assert np.argmax(split_scores(stuck, own, smear)) == 1
    gaining = np.array([-40.0, -88.68, -67.23, -49.0307, -49.0303])
    assert np.argmax(split_scores(gaining, own, smear)) == 0
    # the gain needed is LOOKAHEAD_GAIN of the cell's bound
    just = np.array([own + LOOKAHEAD_GAIN * (1 + abs(own)) * 1.01, -60.0, -60.0, -60.0, -60.0])
    assert np.argmax(split_scores(just, own, smear)) == 0
    short = np.array([own + LOOKAHEAD_GAIN * (1 + abs(own)) * 0.99, -60.0, -60.0, -60.0, -60.0])
    assert np.argmax(split_scores(short, own, smear)) == 1
    # a cell whose halves all close (0) against a cell bound below: split by the halves
    assert np.argmax(split_scores(np.array([0.0, -1.0, -2.0]), -3.0, np.array([0, 0, 1.0]))) == 0


def test_the_quick_proof_answers_a_one_cell_instance_before_the_later_gradient_runs(tmp_path):
    """With the search on: an unsat property whose relaxed tree has at most QUICK_SPLITS splits
    is answered by the quick proof (kernel-checked) after QUICK_RUNS gradient runs; one whose
    tree needs more is answered by the full build after every run, with the same certificate
    the search-free route writes; a sat property is still found by the search."""
    import exactmax.prove.property as pp

    net = _deep_relu_net(7)
    grid = [tuple(Q(int(v), 8) for v in x)
            for x in np.random.default_rng(1).integers(-8, 9, (300, 3))]
    best = max(evaluate_maxout(net, x)[0] for x in grid)
    _, loose = _prop(tmp_path, net, int(best) + 3)
    a = decide_property(net, loose, timeout_s=60)
    assert a.result == "unsat" and a.stats["quick_proof"]["result"] == "trees"
    assert a.stats["search"]["gradient_runs"] == pp.QUICK_RUNS
    assert check_property(net, loose.cases, a.trees) == a.stats["leaves_checked"]
    b = decide_property(net, loose, timeout_s=60, search=False)
    assert b.result == "unsat" and "quick_proof" not in b.stats and b.trees == a.trees
    # a tree that needs splits: the quick proof gives up, every run is made, then the full build
    old = pp.QUICK_SPLITS
    try:
        pp.QUICK_SPLITS = 0
        _, prop = _prop(tmp_path, net, best + 2)  # unsat, and its tree has 4 splits
        c = decide_property(net, prop, timeout_s=60)
        assert c.result == "unsat" and c.stats["splits"] > 0
        assert c.stats["quick_proof"]["result"] == "unknown"
        assert c.stats["search"]["gradient_runs"] == len(pp.LEAKS) * pp.CYCLES
        assert check_property(net, prop.cases, c.trees) == c.stats["leaves_checked"]
    finally:
        pp.QUICK_SPLITS = old
    _, reach = _prop(tmp_path, net, best)
    s = decide_property(net, reach, timeout_s=60)
    assert s.result == "sat" and "quick_proof" not in s.stats
    assert evaluate_maxout(net, s.x)[0] >= best
