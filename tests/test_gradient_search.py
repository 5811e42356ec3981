"""The gradient search (search/gradient.py) proposes; the exact check decides.

- the pull-back is the Jacobian: at points off the tie sets, G J computed through the active
  pieces equals the finite differences of the float network, on mixed ranks;
- the leak moves points off a plateau where the network is constant;
- on a property whose forbidden set is a thin corner of a 20-dimensional box (no vertex tried,
  random points miss it), the gradient runs find a point that the kernel's evaluation confirms,
  inside the case's polyhedral input set; on a property with no counterexample they return
  nothing."""

from __future__ import annotations

import time

import numpy as np

from exactmax.engine.casetree import violation
from exactmax.io.vnnlib import read_vnnlib
from exactmax.kernel.affine import Affine
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit, evaluate_maxout
from exactmax.kernel.rational import Q
from exactmax.prove.property import _box_around, _gradient_search, search_counterexample
from exactmax.search.gradient import FloatNetwork


def _mixed_rank_net(seed, d=4, widths=(5, 4), ranks=(1, 2, 3)):
    rng = np.random.default_rng(seed)
    layers, n = [], d
    for w in widths:
        units = []
        for u in range(w):
            k = ranks[u % len(ranks)]
            units.append(Unit(tuple(
                Piece(tuple(Q(int(v), 8) for v in rng.integers(-8, 9, n)),
                      Q(int(rng.integers(-4, 5)), 8))
                for _ in range(k))))
        layers.append(Layer(tuple(units)))
        n = w
    out = Affine(tuple(tuple(Q(int(v), 4) for v in rng.integers(-4, 5, n)) for _ in range(3)),
                 (Q(0),) * 3, n)
    return MaxoutNetwork(d, tuple(layers), out)


def test_the_pullback_is_the_jacobian_through_the_active_pieces():
    rng = np.random.default_rng(1)
    for seed in range(5):
        net = _mixed_rank_net(seed)
        f = FloatNetwork(net)
        X = rng.uniform(-1, 1, (20, 4))
        G = rng.normal(size=(20, 3))
        Y, active = f.forward(X)
        exact_y = [evaluate_maxout(net, tuple(Q(*v.as_integer_ratio()) for v in x)) for x in X[:3]]
        assert np.allclose(Y[:3], np.array(exact_y, dtype=float))
        J = f.pullback(G, active, 0.0)
        h = 1e-7
        for i in range(4):
            E = np.zeros_like(X)
            E[:, i] = h
            fd = ((f(X + E) - f(X - E)) * G).sum(axis=1) / (2 * h)
            # compare where the step crossed no tie (the same pieces active on both sides)
            plus, minus = f.forward(X + E)[1], f.forward(X - E)[1]
            same = np.all([(p == a).all(axis=1) & (m == a).all(axis=1)
                           for p, m, a in zip(plus, minus, active)], axis=0)
            assert same.sum() >= 15
            assert np.allclose(fd[same], J[same, i], rtol=1e-6, atol=1e-6)


NINE_TENTHS = Q(9, 10)


def _plateau_net(d=20, t=NINE_TENTHS):
    """y0 = ReLU(s - 1/2), s = sum_i ReLU(x_i - t): 0 on almost all of [-1, 1]^d (s <= 2)."""
    zero = Piece((Q(0),) * d, Q(0))
    inner = tuple(Unit((Piece(tuple(Q(int(i == j)) for j in range(d)), -t), zero))
                  for i in range(d))
    outer = (Unit((Piece((Q(1),) * d, Q(-1, 2)), zero)),)
    return MaxoutNetwork(d, (Layer(inner), Layer(outer)), Affine(((Q(1),),), (Q(0),), 1))


def test_the_leak_moves_points_off_a_plateau():
    f = FloatNetwork(_plateau_net())
    X = np.zeros((3, 20))  # every ReLU inactive: f is constant near X
    Y, active = f.forward(X)
    G = np.ones((3, 1))
    assert not f.pullback(G, active, 0.0).any()
    assert (f.pullback(G, active, 0.1) > 0).all()  # uphill: towards the corner


def _property(tmp_path, d, output, inputs=""):
    text = "".join(f"(declare-const X_{i} Real)\n" for i in range(d))
    text += "(declare-const Y_0 Real)\n"
    text += "".join(f"(assert (>= X_{i} -1))\n(assert (<= X_{i} 1))\n" for i in range(d))
    text += inputs + output
    p = tmp_path / "p.vnnlib"
    p.write_text(text)
    return read_vnnlib(str(p))


def test_a_thin_corner_is_found_and_confirmed_exactly(tmp_path):
    net = _plateau_net()
    # forbidden: y0 >= 1/2, i.e. s >= 1: only near the corner (1, ..., 1), where the random
    # points never are (elsewhere y0 = 0: no margin to follow); input set: x_0 - x_1 <= 0
    prop = _property(tmp_path, 20, "(assert (>= Y_0 0.5))\n", "(assert (<= (- X_0 X_1) 0))\n")
    boxes = [_box_around(case.inputs) for case in prop.cases]  # the box its bounds state
    stats = {"exact_checks": 0}
    found = _gradient_search(net, FloatNetwork(net), prop.cases, boxes, time.monotonic() + 60, 0,
                             stats)
    assert found is not None, stats
    x, case, conj, y, margin = found
    assert prop.cases[case].inputs.contains(x) and violation(net, prop.cases, x)[0] == case
    assert y == evaluate_maxout(net, x) and y[0] >= Q(1, 2)
    # the whole search finds it too (given no box, it derives the same one from the input
    # set's rows), mostly through the gradient: its random phase rarely lands in the corner,
    # but can (its trajectory follows ties among equal float margins, whose order the
    # floating-point library's threading may change), so which phase found it is not asserted
    full, s = search_counterexample(net, prop.cases, prop.boxes or (None,) * len(prop.cases),
                                    time.monotonic() + 60)
    assert full is not None, s
    x, case, _, y, _ = full
    assert prop.cases[case].inputs.contains(x) and y == evaluate_maxout(net, x)
    assert y[0] >= Q(1, 2)


def test_no_counterexample_no_answer(tmp_path):
    net = _plateau_net()
    # the largest value of y0 on the box is 20 * 0.1 - 1/2 = 3/2: y0 > 3/2 is impossible
    prop = _property(tmp_path, 20, "(assert (> Y_0 1.5))\n")
    stats = {"exact_checks": 0}
    found = _gradient_search(net, FloatNetwork(net), prop.cases, prop.boxes or (None,),
                             time.monotonic() + 60, 0, stats)
    assert found is None and stats["gradient_runs"] == 10


def test_the_margin_of_a_case_is_its_best_conjunction_cut_by_its_input_rows():
    from exactmax.search.gradient import Target, margins

    # d = 1, one output y: conjunctions {y - 1 >= 0} and {x >= 0, -y >= 0}; input row 2 - x >= 0
    t = Target((np.array([[0.0, 1.0]]), np.array([[1.0, 0.0], [0.0, -1.0]])),
               (np.array([-1.0]), np.array([0.0, 0.0])),
               np.array([[1.0]]), np.array([2.0]), np.array([-3.0]), np.array([3.0]))
    X = np.array([[0.5], [-1.0], [2.5], [1.0]])
    Y = np.array([[3.0], [-2.0], [5.0], [0.5]])
    m, G = margins(t, X, Y)
    # by hand: max(min(y - 1), min(x, -y)) cut by 2 - x
    assert m.tolist() == [min(max(2.0, -3.0), 1.5), min(max(-3.0, -1.0), 3.0),
                          min(max(4.0, -5.0), -0.5), min(max(-0.5, -0.5), 1.0)]
    assert G[3].tolist() == [0.0, 1.0]  # y - 1 (a tie with -y: the first conjunction)
    assert G[1].tolist() == [1.0, 0.0]  # x, the least row of the better conjunction
    assert G[0].tolist() == G[2].tolist() == [-1.0, 0.0]  # the input row 2 - x attains it


def test_runs_made_in_two_calls_propose_what_one_call_does():
    """Run r is seeded by (seed, r): runs 0-1 and then 2-9 propose the points runs 0-9 do (the
    quick proof of ``decide_property`` sits between the two calls)."""
    from exactmax.search.gradient import CYCLES, LEAKS, Target, attack

    net = _mixed_rank_net(3)
    f = FloatNetwork(net)
    R = (np.array([[0.0] * 4 + [1.0, -1.0, 0.0]]),)
    t = Target(R, (np.array([-0.01]),), np.zeros((0, 4)), np.zeros(0), -np.ones(4), np.ones(4))
    far = time.monotonic() + 60
    whole = [(n, tuple(x)) for n, x in attack(f, [t], far, 5)]
    parts = [(n, tuple(x)) for n, x in attack(f, [t], far, 5, runs=range(2))]
    parts += [(n, tuple(x)) for n, x in attack(f, [t], far, 5, runs=range(2, len(LEAKS) * CYCLES))]
    assert whole == parts and whole
    stats: dict = {}
    assert list(attack(f, [t], far, 5, stats, runs=range(10**6, 10**6 + 1))) == []
    assert stats == {}
