"""Lattice normal forms (kernel/lattice.py), lifting (cpwl/lift.py) and the interval builder
(engine/intervals.py): a lattice network written in ReLUs equals its two-layer Maxout form on
all of Q^d, the kernel says so only when it is so, and properties of the lifted form are
decided with certificates the kernel checks."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
from test_phase_splits import _prop_file, _z3_says_sat

from exactmax.cpwl.lift import NotLattice, lift, lift_checked, worth_lifting
from exactmax.engine.casetree import violation
from exactmax.io.models import model_to_json
from exactmax.kernel.affine import Affine
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.lattice import check_lattice
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit, evaluate_maxout
from exactmax.kernel.property import Relaxed, Upper, check_property
from exactmax.kernel.rational import ONE, ZERO, Q
from exactmax.prove.property import decide_property

# ------------------------------------------------------------ lattice networks in ReLUs


def _f(terms=(), c=0):
    """A linear form {index: coefficient} + c over the current layer (or x)."""
    return ({j: Q(v) for j, v in dict(terms).items() if v}, Q(c))


def _comb(*parts):
    """sum s f over the (s, f) in parts."""
    out, c = {}, ZERO
    for s, (w, k) in parts:
        for j, v in w.items():
            out[j] = out.get(j, ZERO) + Q(s) * v
        c += Q(s) * k
    return ({j: v for j, v in out.items() if v}, c)


class _Relu:
    """A ReLU network built layer by layer; values are linear forms over the last layer."""

    def __init__(self, d: int):
        self.d, self.width, self.layers = d, d, []

    def layer(self, pre: list) -> list:
        """Units ReLU(f) for f in pre; the new values u_k as forms over them."""
        n = self.width
        units = tuple(
            Unit((Piece(tuple(w.get(j, ZERO) for j in range(n)), c), Piece((ZERO,) * n, ZERO)))
            for w, c in pre
        )
        self.layers.append(Layer(units))
        self.width = len(pre)
        return [_f({k: 1}) for k in range(len(pre))]

    def network(self, out) -> MaxoutNetwork:
        w, c = out
        row = tuple(w.get(j, ZERO) for j in range(self.width))
        return MaxoutNetwork(self.d, tuple(self.layers), Affine((row,), (c,), self.width))


def _reduce(net: _Relu, groups: list, op: str, style: int) -> list:
    """One layer that halves every group of values by op (min or max), pairwise: style 2 as
    a - ReLU(a - b) / b + ReLU(a - b) with a carried by ReLU(a) - ReLU(-a); style 4 as
    (a + b)/2 -+ |a - b|/2; a value left over is carried by a pass-through pair."""
    pre, plan = [], []
    for g in groups:
        out = []
        for k in range(0, len(g) - 1, 2):
            a, b = g[k], g[k + 1]
            i = len(pre)
            if style == 2:
                keep = a if op == "min" else b
                pre += [keep, _comb((-1, keep)), _comb((1, a), (-1, b))]
                s = -1 if op == "min" else 1
                out.append([(1, i), (-1, i + 1), (s, i + 2)])
            else:
                pre += [_comb((1, a), (1, b)), _comb((-1, a), (-1, b))]
                pre += [_comb((1, a), (-1, b)), _comb((1, b), (-1, a))]
                s = Q(-1, 2) if op == "min" else Q(1, 2)
                out.append([(Q(1, 2), i), (Q(-1, 2), i + 1), (s, i + 2), (s, i + 3)])
        if len(g) % 2:
            i = len(pre)
            pre += [g[-1], _comb((-1, g[-1]))]
            out.append([(1, i), (-1, i + 1)])
        plan.append(out)
    units = net.layer(pre)
    return [[_comb(*((s, units[i]) for s, i in v)) for v in g] for g in plan]


def lattice_relu(leaves: list[list], d: int, style: int = 2, outer: str = "max") -> MaxoutNetwork:
    """max_i min_j l_ij (outer "max"; "min": min_i max_j) as a ReLU network of trees; leaves[i][j]
    = (weights, bias) of l_ij over x."""
    inner = "min" if outer == "max" else "max"
    net = _Relu(d)
    groups = [[_f(enumerate(w), b) for w, b in g] for g in leaves]
    while any(len(g) > 1 for g in groups):
        groups = _reduce(net, groups, inner, style)
    top = [[g[0] for g in groups]]
    while len(top[0]) > 1:
        top = _reduce(net, top, outer, style)
    if not net.layers:
        top = _reduce(net, top, outer, style)
    return net.network(top[0][0])


def _leaves(rng: random.Random, d: int, groups: int, per: int) -> list:
    return [
        [([Q(rng.randint(-8, 8), 4) for _ in range(d)], Q(rng.randint(-8, 8), 4)) for _ in range(per)]
        for _ in range(groups)
    ]


def _max_min(leaves, x):
    return max(min(sum((w * v for w, v in zip(ws, x)), b) for ws, b in g) for g in leaves)


def _points(rng, d, n=30):
    return [tuple(Q(rng.randint(-40, 40), 8) for _ in range(d)) for _ in range(n)]


@pytest.mark.parametrize("style", [2, 4])
@pytest.mark.parametrize("d,groups,per", [(2, 3, 4), (3, 4, 3), (2, 5, 5)])
def test_a_lattice_network_in_relus_lifts_to_two_maxout_layers_that_the_kernel_proves_equal(
    style, d, groups, per
):
    rng = random.Random(style * 100 + d * 10 + groups)
    leaves = _leaves(rng, d, groups, per)
    net = lattice_relu(leaves, d, style)
    assert len(net.layers) > 2 and all(l.rank == 2 for l in net.layers)
    for x in _points(rng, d):  # the builder computes what it says
        assert evaluate_maxout(net, x) == (_max_min(leaves, x),)
    assert worth_lifting(net)
    lifted, report = lift_checked(net)
    assert lifted is not None, report
    assert len(lifted.layers) == 2 and lifted.layers[1].width == 1
    assert lifted.layers[0].width <= groups and lifted.layers[1].rank <= groups
    assert check_lattice(lifted, net) > 0 and check_lattice(net, lifted) > 0
    for x in _points(rng, d):
        assert evaluate_maxout(lifted, x) == evaluate_maxout(net, x)


def test_a_min_of_maxima_lifts_too():
    rng = random.Random(7)
    leaves = _leaves(rng, 2, 3, 3)
    net = lattice_relu(leaves, 2, 2, outer="min")
    lifted = lift(net)
    assert len(lifted.layers) == 2
    check_lattice(lifted, net)
    for x in _points(rng, 2):
        want = min(max(sum((w * v for w, v in zip(ws, x)), b) for ws, b in g) for g in leaves)
        assert evaluate_maxout(lifted, x) == (want,)


def _tamper(net: MaxoutNetwork, layer: int, unit: int, piece: int, delta) -> MaxoutNetwork:
    L = net.layers[layer]
    u = L.units[unit]
    p = u.pieces[piece]
    new = Piece(p.w, p.b + delta)
    units = list(L.units)
    units[unit] = Unit(u.pieces[:piece] + (new,) + u.pieces[piece + 1 :])
    layers = list(net.layers)
    layers[layer] = Layer(tuple(units))
    return MaxoutNetwork(net.input_dim, tuple(layers), net.output)


def test_the_kernel_rejects_a_lifted_network_that_is_not_equal():
    rng = random.Random(3)
    leaves = _leaves(rng, 2, 3, 4)
    net = lattice_relu(leaves, 2, 4)
    lifted = lift(net)
    check_lattice(lifted, net)
    # one leaf moved by 1/7, a piece dropped, the output shifted: each rejected
    bad = [_tamper(lifted, 0, 1, 2, Q(1, 7)), _tamper(net, 1, 0, 0, Q(1, 3))]
    u = lifted.layers[0].units[0]
    layers = (Layer((Unit(u.pieces[1:]),) + lifted.layers[0].units[1:]), lifted.layers[1])
    bad.append(MaxoutNetwork(2, layers, lifted.output))
    out = lifted.output
    bad.append(MaxoutNetwork(2, lifted.layers, Affine(out.W, (out.b[0] + ONE,), out.in_dim)))
    for other in bad:
        with pytest.raises(CheckFailed, match="normal forms of A and B differ"):
            check_lattice(other, net)
    x = next(x for x in _points(rng, 2, 400) if evaluate_maxout(bad[0], x) != evaluate_maxout(net, x))
    assert x  # the first tampering changes the function somewhere
    with pytest.raises(CheckFailed, match="inputs or outputs"):
        check_lattice(MaxoutNetwork(3, (Layer((Unit((Piece((ONE, ZERO, ZERO), ZERO),)),)),)), net)
    with pytest.raises(CheckFailed, match="malformed"):
        check_lattice(MaxoutNetwork(2, (Layer((Unit((Piece((ONE,), ZERO),)),)),)), net)


# ------------------------------------------------------------ rewrites the forms relate


def _net(d, layers, out=None):
    return MaxoutNetwork(d, tuple(Layer(tuple(Unit(tuple(Piece(tuple(map(Q, w)), Q(b)) for w, b in u))
                                              for u in l)) for l in layers), out)


def _out(rows, width):
    return Affine(tuple(tuple(map(Q, r)) for r in rows), (ZERO,) * len(rows), width)


def test_rewrites_that_keep_the_function_have_one_normal_form():
    relu = lambda w, b=0: [(w, b), ([0] * len(w), 0)]  # noqa: E731
    a = _net(2, [[relu([1, -1]), relu([2, 1], 1)], [relu([1, -1])]])
    # units permuted, one rescaled by 3 (its outgoing weight by 1/3), a unit split in two
    # copies with outgoing weights 1/4 and 3/4, pieces permuted
    b = _net(
        2,
        [
            [relu([6, 3], 3), [([0, 0], 0), ([1, -1], 0)], [([0, 0], 0), ([1, -1], 0)]],
            [relu([Q(-1, 3), Q(1, 4), Q(3, 4)])],
        ],
    )
    assert check_lattice(a, b) > 0
    # a layer of pass-throughs inserted: rank-1 units, and ReLU(z) - ReLU(-z) pairs
    c = _net(2, [[relu([1, -1]), relu([2, 1], 1)], [[([1, 0], 0)], relu([0, 1]), relu([0, -1])],
                 [relu([1, -1, 1])]])
    assert check_lattice(a, c) > 0
    # 2 ReLU(x) = max(2x, 0) = ReLU(x) + ReLU(x)
    d1 = _net(1, [[relu([2])]])
    d2 = _net(1, [[relu([1]), relu([1])]], _out([[1, 1]], 2))
    assert check_lattice(d1, d2) > 0
    # a max tree through an inserted layer: max(max(p0, p1), max(p2, p3)) = max(p0..p3)
    p = [([1, 0], 0), ([0, 1], 1), ([-1, 0], 2), ([1, 1], -1)]
    flat = _net(2, [[p]])
    tree = _net(2, [[p[:2], p[2:]], [[([1, 0], 0), ([0, 1], 0)]]])
    assert check_lattice(flat, tree) > 0
    # ... inside a hidden layer of a network whose output is a sum of maxima of both signs
    head = [[relu([1, -2]), relu([-1, 1], 1)]]
    out = _out([[1, -1]], 2)
    flat_h = _net(2, [[p, relu([1, 1])]] + head, out)
    tree_h = _net(2, [[p[:2], p[2:], relu([1, 1])], [[([1, 0, 0], 0), ([0, 1, 0], 0)],
                                                     [([0, 0, 1], 0)]]] + head, out)
    assert check_lattice(flat_h, tree_h) > 0
    # a max tree that leaves a piece out is another function: rejected
    short = _net(2, [[p[:2], p[2:3], relu([1, 1])], [[([1, 0, 0], 0), ([0, 1, 0], 0)],
                                                     [([0, 0, 1], 0)]]] + head, out)
    with pytest.raises(CheckFailed):
        check_lattice(flat_h, short)
    # and one that is not equal: a bias changed
    e = _net(2, [[relu([1, -1]), relu([2, 1], 1)], [relu([1, -1], Q(1, 8))]])
    with pytest.raises(CheckFailed):
        check_lattice(a, e)


def test_lift_declines_a_network_whose_output_is_a_sum_of_maxima_of_mixed_signs():
    relu = lambda w: [(w, 0), ([0] * len(w), 0)]  # noqa: E731
    net = _net(2, [[relu([1, 0]), relu([0, 1])]], _out([[1, -1]], 2))
    with pytest.raises(NotLattice, match="output 0"):
        lift(net)
    assert not worth_lifting(net)  # no pass-through pair: check does not try


# ------------------------------------------------------------ deciding the lifted form


def test_properties_of_lifted_networks_agree_with_z3_and_the_certificates_check(tmp_path):
    """The interval builder (relaxed leaves, most Max nodes without an upper function) against
    z3's exact answer on lifted lattice networks with thresholds around their range."""
    seen = {"sat": 0, "unsat": 0, "none": 0}
    for seed in range(10):
        rng = random.Random(seed)
        leaves = _leaves(rng, 2, 4, 4)
        lifted = lift(lattice_relu(leaves, 2, 2 + 2 * (seed % 2)))
        ys = [_max_min(leaves, x) for x in _points(rng, 2, 200)]
        lo, hi = float(min(ys)), float(max(ys))
        t = rng.choice([lo - 0.5, hi + 0.5, (lo + hi) / 2])
        sign = rng.choice([1, -1])
        _, prop = _prop_file(tmp_path, 2, -5, 5, [[([sign], sign * t)]])
        a = decide_property(lifted, prop, timeout_s=60, search=False)
        assert a.result in ("sat", "unsat"), a.reason
        assert (a.result == "sat") == _z3_says_sat(lifted, prop.cases[0]), seed
        if a.result == "unsat":
            assert check_property(lifted, prop.cases, a.trees) >= 1
            leaves_ = _relaxed_leaves(a.trees[0])
            assert leaves_ and all(isinstance(t, Relaxed) for t in leaves_)
            seen["none"] += any(u is None for t in leaves_ for u in t.uppers)
        else:
            assert violation(lifted, prop.cases, a.x)[0] is not None
        seen[a.result] += 1
    assert seen["sat"] >= 2 and seen["unsat"] >= 2 and seen["none"] >= 1, seen


def _relaxed_leaves(tree):
    from exactmax.kernel.certificate import Split

    if isinstance(tree, Split):
        return _relaxed_leaves(tree.ge) + _relaxed_leaves(tree.lt)
    return [tree]


def test_a_relaxed_leaf_without_upper_functions_is_checked_and_tampering_is_rejected(tmp_path):
    rng = random.Random(11)
    leaves = _leaves(rng, 2, 3, 3)
    lifted = lift(lattice_relu(leaves, 2))
    ys = [_max_min(leaves, x) for x in _points(rng, 2, 300)]
    # y >= max + 1 never holds: proved by upper bounds (the output node's upper function)
    _, prop = _prop_file(tmp_path, 2, -5, 5, [[([1], float(max(ys)) + 40)]])
    a = decide_property(lifted, prop, timeout_s=60, search=False)
    assert a.result == "unsat", a.reason
    (leaf,) = _relaxed_leaves(a.trees[0])  # one cell: the whole box
    assert any(u is None for u in leaf.uppers) and any(u is not None for u in leaf.uppers)
    assert check_property(lifted, prop.cases, (leaf,)) == 1
    k = next(i for i, u in enumerate(leaf.uppers) if u is not None)
    u = leaf.uppers[k]
    tampered = [
        # an upper function below its arguments
        Relaxed((), leaf.uppers[:k] + (Upper(u.lam, u.beta - 100, u.proofs),) + leaf.uppers[k + 1:],
                leaf.proofs),
        # its upper function dropped: the proof reads a row that is not there
        Relaxed((), leaf.uppers[:k] + (None,) + leaf.uppers[k + 1:], leaf.proofs),
        # a multiplier of the conjunction's proof halved
        Relaxed((), leaf.uppers, ((leaf.proofs[0][:1] + tuple((i, y / 2) for i, y in
                                                                leaf.proofs[0][1:])),)),
        # one upper function too few
        Relaxed((), leaf.uppers[1:], leaf.proofs),
    ]
    for t in tampered:
        with pytest.raises(CheckFailed):
            check_property(lifted, prop.cases, (t,))


# ------------------------------------------------------------ the commands


def _run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "exactmax", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd)


def test_lift_writes_the_lifted_network_and_a_certificate_check_cert_accepts(tmp_path):
    rng = random.Random(5)
    leaves = _leaves(rng, 2, 4, 5)
    net = lattice_relu(leaves, 2, 4)
    path = tmp_path / "net.json"
    path.write_text(json.dumps(model_to_json(net)))
    r = _run("lift", path, "-o", tmp_path / "lifted.json", "--cert", tmp_path / "c.json")
    assert r.returncode == 0, r.stderr
    assert "-> 2 (widths" in r.stdout and "lattice normal form" in r.stdout
    r = _run("check-cert", tmp_path / "c.json", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["certificate_kind"] == "lattice", r.stdout
    # the lifted model in the certificate changed: its hash no longer matches, then, with the
    # hash recomputed, the kernel rejects it
    doc = json.loads((tmp_path / "c.json").read_text())
    piece = doc["models"]["a"]["model"]["layers"][0]["units"][0]["pieces"][0]
    piece["b"] = str(Q(piece["b"]) + Q(1, 3)) if "b" in piece else piece
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    r = _run("check-cert", tmp_path / "bad.json")
    assert r.returncode in (1, 2) and r.stdout.count("\n") + r.stderr.count("\n") <= 3
    from exactmax.io.certificates import content_hash

    doc["models"]["a"]["sha256"] = content_hash(doc["models"]["a"]["model"])
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    r = _run("check-cert", tmp_path / "bad.json")
    assert r.returncode == 1 and "normal forms of A and B differ" in r.stdout + r.stderr
    # a network that is no lattice expression: unknown, exit 3, nothing written
    plain = _net(2, [[[([1, 0], 0), ([0, 0], 0)], [([0, 1], 0), ([0, 0], 0)]]], _out([[1, -1]], 2))
    (tmp_path / "plain.json").write_text(json.dumps(model_to_json(plain)))
    r = _run("lift", tmp_path / "plain.json", "-o", tmp_path / "none.json")
    assert r.returncode == 3 and "not lifted" in r.stdout and not (tmp_path / "none.json").exists()


def test_check_lifts_a_lattice_network_and_its_certificate_is_checked(tmp_path):
    rng = random.Random(9)
    leaves = _leaves(rng, 2, 4, 4)
    net = lattice_relu(leaves, 2, 2)
    path = tmp_path / "net.json"
    path.write_text(json.dumps(model_to_json(net)))
    ys = [_max_min(leaves, x) for x in _points(rng, 2, 300)]
    prop, _ = _prop_file(tmp_path, 2, -5, 5, [[([1], float(max(ys)) + 40)]])
    r = _run("check", path, prop, "--cert", tmp_path / "c.json", "--workers", 1)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("lifted: ") and "unsat" in r.stdout
    r = _run("check-cert", tmp_path / "c.json", "--model", path, "--property", prop)
    assert r.returncode == 0 and "lifted form" in r.stdout, r.stdout + r.stderr
    r = _run("check", path, prop, "--no-lift", "--json", "--workers", 1)
    assert json.loads(r.stdout)["verdict"] == "unsat" and "lifted" not in json.loads(r.stdout)
    # the certificate's lifted network tampered (hash-free part): the kernel's lattice check fails
    doc = json.loads((tmp_path / "c.json").read_text())
    units = doc["lifted"]["model"]["layers"][0]["units"]
    units[0]["pieces"] = units[0]["pieces"][1:]
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    r = _run("check-cert", tmp_path / "bad.json")
    assert r.returncode == 1 and "normal forms" in r.stdout + r.stderr, r.stdout + r.stderr


def _onnx_relu(path, W1, b1, W2, b2):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.array(a, dtype=np.float32), n)
             for a, n in ((W1, "W1"), (b1, "b1"), (W2, "W2"), (b2, "b2"))]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h0"]), helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h2"]), helper.make_node("MatMul", ["h2", "W2"], ["y0"]),
             helper.make_node("Add", ["y0", "b2"], ["y"])]
    g = helper.make_graph(nodes, "n", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def test_import_lift_writes_the_maxout_form_or_nothing(tmp_path):
    # min(x0, x1) = x0 - ReLU(x0 - x1), x0 carried by ReLU(x0) - ReLU(-x0)
    _onnx_relu(tmp_path / "min.onnx", [[1, -1, 1], [0, 0, -1]], [0, 0, 0], [[1], [-1], [-1]], [0])
    r = _run("import", tmp_path / "min.onnx", "-o", tmp_path / "min.json", "--lift")
    assert r.returncode == 0 and "lifted before writing: 1 Maxout layers" in r.stdout, r.stdout
    from exactmax.io.models import load_model

    lifted = load_model(str(tmp_path / "min.json"))
    for x in _points(random.Random(1), 2):
        assert evaluate_maxout(lifted, x) == (min(x),)
    # ReLU(x0) - ReLU(x1): a difference of maxima, no lattice reading: exit 3, nothing written
    _onnx_relu(tmp_path / "diff.onnx", [[1, 0], [0, 1]], [0, 0], [[1], [-1]], [0])
    r = _run("import", tmp_path / "diff.onnx", "-o", tmp_path / "diff.json", "--lift")
    assert r.returncode == 3 and "not lifted" in r.stdout and not (tmp_path / "diff.json").exists()
