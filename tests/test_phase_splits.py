"""Phase splits in relaxed leaves (``kernel.property.Phase``, ``engine/phases.py``): a cell that
no relaxation closes is split on which argument of a Max node wins, each branch proved by its
own Farkas multipliers; the kernel accepts such proofs only when every branch is refuted."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import z3
from test_property import relu_net

from exactmax.engine import relaxation
from exactmax.engine.casetree import violation
from exactmax.engine.smt import domain_constraints, encode_program, rat
from exactmax.io.jsonfile import Cursor
from exactmax.io.property_certificate import property_certificate_to_json, read_property_certificate
from exactmax.io.vnnlib import read_vnnlib
from exactmax.kernel.certificate import Row
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.maxout import Affine, Layer, MaxoutNetwork, Piece, Unit
from exactmax.kernel.polyhedron import Polyhedron
from exactmax.kernel.program import Max, program_of_maxout
from exactmax.kernel.property import Case, Phase, Relaxed, Upper, check_case, check_property
from exactmax.kernel.rational import Q
from exactmax.prove.property import decide_property

ONE, ZERO = Q(1), Q(0)


def _relu_case():
    """y = relu(x) on x in [-1, 1], forbidden: y >= 1/4 and y - x >= 1/4.  Empty (y >= 1/4
    needs x >= 1/4, where y - x = 0), but the triangle v >= 0, v >= x, v <= (x + 1)/2 holds
    (x, v) = (0, 1/2), which satisfies both rows: no relaxed leaf alone proves it."""
    net = relu_net([[1]], [0], [[1]], [0])
    p = program_of_maxout(net)
    P = Polyhedron(((ONE,), (-ONE,)), (ONE, ONE), 1)
    case = Case(P, ((Row((ZERO, ONE), Q(-1, 4)), Row((-ONE, ONE), Q(-1, 4))),))
    node = next(i for i, n in enumerate(p.nodes) if isinstance(n, Max))
    return net, p, case, node


def _hand_leaf(node):
    """Rows 0: 1 - x, 1: 1 + x, 2: v - x, 3: v, 4: u - v (u = (x + 1)/2), 5: v - 1/4,
    6: v - x - 1/4.  Branch 0 (v = x wins) adds 7: x - 0, 8: x - v: rows 6 + 8 = -1/4.
    Branch 1 (0 wins) adds 7: 0 - x, 8: 0 - v: rows 5 + 8 = -1/4."""
    up = Upper((Q(1, 2), ZERO), Q(1, 2), (((0, Q(1, 2)),), ((1, Q(1, 2)),)))
    phase = Phase(node, (((6, ONE), (8, ONE)), ((5, ONE), (8, ONE))))
    return Relaxed((), (up,), (phase,))


def test_a_phase_split_proves_what_the_triangle_cannot_and_each_wrong_part_is_rejected():
    _, p, case, node = _relu_case()
    good = _hand_leaf(node)
    assert check_case(p, case, good) == 1
    phase = good.proofs[0]
    lin = p.nodes[node].args[0]  # the pre-activation: a Lin node, not a Max node
    bad = [
        dataclasses.replace(good, proofs=(((5, ONE), (6, ONE)),)),  # no phase: the triangle
        dataclasses.replace(good, proofs=(Phase(node, phase.branches[::-1]),)),  # swapped
        dataclasses.replace(good, proofs=(Phase(node, phase.branches[:1]),)),  # one branch
        dataclasses.replace(good, proofs=(Phase(node, phase.branches * 2),)),  # four
        dataclasses.replace(good, proofs=(Phase(lin, phase.branches),)),  # not a Max node
        dataclasses.replace(good, proofs=(Phase(len(p.nodes) + 3, phase.branches),)),
        dataclasses.replace(good, proofs=(Phase(node, (((6, ONE), (8, Q(1, 2))),
                                                       phase.branches[1])),)),  # weight
        dataclasses.replace(good, proofs=(Phase(node, (((6, ONE), (9, ONE)),
                                                       phase.branches[1])),)),  # no row 9
        dataclasses.replace(good, proofs=(Phase(node, (((6, ONE), (8, ONE)), ())),)),  # empty
    ]
    for leaf in bad:
        with pytest.raises(CheckFailed):
            check_case(p, case, leaf)
    # nested: branch 1 split again on the same node (pointless, but sound) is accepted; an
    # inner branch that is not refuted is not
    inner = Phase(node, (((5, ONE), (8, ONE)), ((5, ONE), (8, ONE))))
    assert check_case(p, case, dataclasses.replace(
        good, proofs=(Phase(node, (phase.branches[0], inner)),))) == 1
    with pytest.raises(CheckFailed):
        check_case(p, case, dataclasses.replace(
            good, proofs=(Phase(node, (phase.branches[0], Phase(node, ((), ()))),),)))
    # the same proof for a property that is false (y >= 1/4 and y - x >= -1/4: x = 1/2)
    false = Case(case.inputs, ((Row((ZERO, ONE), Q(-1, 4)), Row((-ONE, ONE), Q(1, 4))),))
    with pytest.raises(CheckFailed):
        check_case(p, false, good)


def _prop_file(tmp_path, d, lo, hi, disjuncts):
    """A VNN-LIB property on the box [lo, hi]^d whose output part is an "or" of "and"s of
    rows (sum_o w_o Y_o >= c)."""
    text = "".join(f"(declare-const X_{i} Real)\n" for i in range(d))
    n_out = max(len(w) for conj in disjuncts for w, _ in conj)
    text += "".join(f"(declare-const Y_{o} Real)\n" for o in range(n_out))
    text += "".join(f"(assert (>= X_{i} {lo}))\n(assert (<= X_{i} {hi}))\n" for i in range(d))
    ands = []
    for conj in disjuncts:
        rows = []
        for w, c in conj:
            s = " ".join(f"(* {v} Y_{o})" for o, v in enumerate(w) if v)
            rows.append(f"(>= (+ {s} 0.0) {c})")
        ands.append("(and " + " ".join(rows) + ")")
    text += "(assert (or " + " ".join(ands) + "))\n"
    path = tmp_path / "p.vnnlib"
    path.write_text(text)
    return str(path), read_vnnlib(str(path))


def test_the_producer_closes_the_hand_case_by_phases_and_the_certificate_round_trips(
    tmp_path, monkeypatch
):
    # the hand case, y = 2 relu(x) (the producer wants an output that is a sum, not the node)
    net = relu_net([[1]], [0], [[2]], [0])
    monkeypatch.setattr(relaxation, "PHASES_ABOVE", 0)  # phases even in 1 dimension
    path, prop = _prop_file(tmp_path, 1, -1, 1, [[([1], 0.5), ([1], "(+ (* 2 X_0) 0.5)")]])
    a = decide_property(net, prop, timeout_s=30, search=False)
    assert a.result == "unsat", a.reason
    assert a.stats["proofs"].get("phase_leaves", 0) >= 2 and a.stats["leaves"] == 1
    assert any(isinstance(pr, Phase) for t in a.trees for pr in getattr(t, "proofs", ()))
    model = tmp_path / "net.json"
    model.write_text("{}")
    doc = property_certificate_to_json(net, str(model), path, open(path).read(), a.trees, {})
    doc = json.loads(json.dumps(doc))
    assert "phase" in json.dumps(doc["cases"])
    from exactmax import schemas

    schemas.validator("property-certificate").validate(doc)  # the schema describes phases
    net2, prop2, trees2, _, _ = read_property_certificate(Cursor("c.json", "", doc))
    assert trees2 == a.trees and check_property(net2, prop2.cases, trees2) == 1
    # a phase whose node is not a number is refused by the reader, in one line
    text = json.dumps(doc).replace('"phase": {"node": ', '"phase": {"node": "x", "was": ', 1)
    with pytest.raises(Exception, match="node"):
        read_property_certificate(Cursor("c.json", "", json.loads(text)))


def _random_net(seed: int, d: int, widths) -> MaxoutNetwork:
    """A ReLU network with small dyadic weights and two outputs."""
    rng = np.random.default_rng(seed)
    layers, n = [], d
    for w in widths:
        units = tuple(Unit((Piece(tuple(Q(int(v), 4) for v in rng.integers(-4, 5, n)),
                                  Q(int(rng.integers(-2, 3)), 4)),
                            Piece((ZERO,) * n, ZERO))) for _ in range(w))
        layers.append(Layer(units))
        n = w
    rows = tuple(tuple(Q(int(v), 2) for v in rng.integers(-2, 3, n)) for _ in range(2))
    return MaxoutNetwork(d, tuple(layers), Affine(rows, (ZERO, ZERO), n))


def _z3_says_sat(net, case) -> bool:
    p = program_of_maxout(net)
    xs = [z3.Real(f"x{i}") for i in range(p.dim)]
    cons, ys = encode_program(p, xs, "n")
    s = z3.Solver()
    s.add(cons + domain_constraints(case.inputs, xs))
    zs = xs + ys

    def row(r):
        e = z3.Sum([rat(a) * z for a, z in zip(r.a, zs) if a] + [rat(r.c)])
        return e > 0 if r.strict else e >= 0

    s.add(z3.Or([z3.And([row(r) for r in conj]) for conj in case.outputs]))
    return s.check() == z3.sat


def test_phase_splits_agree_with_z3_on_random_networks(tmp_path, monkeypatch):
    """The engine with phase splits at every cell (no input splitting needed) against z3's
    exact answer, on random ReLU networks and properties with two disjuncts of one or two
    rows: unsat only with a kernel-checked certificate, sat only at a point the kernel's
    evaluation confirms, and the answer z3's; some of the unsat answers need phase splits, and
    some branches tighten upper functions (``Tighten``)."""
    from exactmax.kernel.maxout import evaluate_maxout

    monkeypatch.setattr(relaxation, "PHASES_ABOVE", 0)
    seen = {"sat": 0, "unsat": 0, "phases": 0, "tightened": 0}
    for seed in range(16):
        net = _random_net(seed, 3, (5, 5))
        rng = np.random.default_rng(100 + seed)
        grid = [tuple(Q(int(v), 4) for v in x) for x in rng.integers(-4, 5, (200, 3))]
        ys = [evaluate_maxout(net, x) for x in grid]
        # thresholds near the sampled maxima: some properties hold, some are false
        t0 = float(max(y[0] for y in ys)) + float(rng.choice([-0.25, 0.5, 1.0]))
        t1 = float(max(y[1] - y[0] for y in ys)) + float(rng.choice([-0.25, 0.5, 1.0]))
        disjuncts = [[([1, 0], t0)], [([-1, 1], t1), ([0, 1], float(rng.integers(-1, 2)))]]
        _, prop = _prop_file(tmp_path, 3, -1, 1, disjuncts)
        a = decide_property(net, prop, timeout_s=60, search=False)
        assert a.result in ("sat", "unsat"), a.reason
        assert (a.result == "sat") == _z3_says_sat(net, prop.cases[0]), seed
        if a.result == "unsat":
            assert check_property(net, prop.cases, a.trees) >= 1
            seen["phases"] += a.stats["proofs"].get("phase_leaves", 0) > 0
            seen["tightened"] += a.stats["proofs"].get("tightened", 0) > 0
        else:
            assert violation(net, prop.cases, a.x)[0] is not None
        seen[a.result] += 1
    assert seen["sat"] >= 2 and seen["phases"] >= 3 and seen["tightened"] >= 1, seen


def test_malformed_phases_are_refused_in_one_line_by_the_reader_and_the_kernel(tmp_path):
    _, p, case, node = _relu_case()
    good = _hand_leaf(node)
    for bad_node in (2.0, Q(node), str(node)):  # only an int names a node
        with pytest.raises(CheckFailed):
            check_case(p, case, dataclasses.replace(
                good, proofs=(Phase(bad_node, good.proofs[0].branches),)))
    from exactmax.io.errors import InputError
    from exactmax.io.property_certificate import MAX_PHASE_DEPTH, _read_proof

    def nested(n):
        proof = [[0, "1"]]
        for _ in range(n):
            proof = {"phase": {"node": 3, "branches": [proof, [[1, "1"]]]}}
        return proof

    assert isinstance(_read_proof(Cursor("c.json", "", nested(MAX_PHASE_DEPTH))), Phase)
    with pytest.raises(InputError, match="nested more than"):
        _read_proof(Cursor("c.json", "", nested(MAX_PHASE_DEPTH + 1)))
    with pytest.raises(InputError, match="at least 1 branch"):
        _read_proof(Cursor("c.json", "", {"phase": {"node": 3, "branches": []}}))


def test_a_branch_may_tighten_an_upper_function_and_each_wrong_part_is_rejected(tmp_path):
    """``Tighten`` (kernel.property): in branch 0 of the hand case (x >= 0 wins, row 7: x >= 0),
    u' = x is proved >= both arguments (u' - x = 0; u' - 0 = x by row 7), so row 9: x - v >= 0
    is added, and rows 6 + 9 give -1/4.  Rejected: u' = x without the proof of x >= 0, or at
    the root (x >= 0 does not hold there), on a Lin node, with a missing upper function, or
    followed by a proof that does not refute."""
    from exactmax.kernel.property import Tighten

    net, p, case, node = _relu_case()
    up, lin = _hand_leaf(node).uppers[0], p.nodes[node].args[0]
    own = Upper((ONE, ZERO), ZERO, ((), ((7, ONE),)))

    def leaf(branch0):
        return Relaxed((), (up,), (Phase(node, (branch0, ((5, ONE), (8, ONE)))),))

    good = leaf(Tighten((node,), (own,), ((6, ONE), (9, ONE))))
    assert check_case(p, case, good) == 1
    bad = [
        leaf(Tighten((node,), (Upper((ONE, ZERO), ZERO, ((), ())),), ((6, ONE), (9, ONE)))),
        leaf(Tighten((lin,), (own,), ((6, ONE), (9, ONE)))),
        leaf(Tighten((node, node), (own,), ((6, ONE), (9, ONE)))),
        leaf(Tighten((node,), (own,), ((6, ONE),))),
        leaf(Tighten((node,), (Upper((ONE,), ZERO, ((),)),), ((6, ONE), (9, ONE)))),
        Relaxed((), (up,), (Tighten((node,), (Upper((ONE, ZERO), ZERO, ((), ((1, ONE),))),),
                                    ((6, ONE), (7, ONE))),)),  # at the root: x >= 0 unproved
    ]
    for b in bad:
        with pytest.raises(CheckFailed):
            check_case(p, case, b)
    # the certificate file: written, schema-valid, read back equal; malformed ones refused
    path, prop = _prop_file(tmp_path, 1, -1, 1, [[([1], 0.25), ([1], "(+ X_0 0.25)")]])
    model = tmp_path / "net.json"
    model.write_text("{}")
    doc = json.loads(json.dumps(property_certificate_to_json(
        net, str(model), path, open(path).read(), (good,), {})))
    from exactmax import schemas

    schemas.validator("property-certificate").validate(doc)
    net2, prop2, trees2, _, _ = read_property_certificate(Cursor("c.json", "", doc))
    assert trees2 == (good,) and check_property(net2, prop2.cases, trees2) == 1
    # and through the work units' own reader (trees cross processes as this JSON)
    from exactmax.engine.parallel import _proof_of
    from exactmax.io.property_certificate import _proof

    assert _proof_of(json.loads(json.dumps(_proof(good.proofs[0])))) == good.proofs[0]
    text = json.dumps(doc)
    for old, new, says in (('"nodes": [', '"nodes": [0, ', "upper function"),
                           ('"then": ', '"than": ', "then")):
        with pytest.raises(Exception, match=says):
            read_property_certificate(Cursor("c.json", "", json.loads(text.replace(old, new, 1))))
