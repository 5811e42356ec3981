"""exactmax check / replay and the kernel's property rule (kernel/property.py): answers on
small networks, certificates accepted, and certificates wrong by one number rejected."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from types import SimpleNamespace

import numpy as np
import pytest
from onnx import helper

from exactmax.cli import main
from exactmax.io.property_certificate import decimal_text, read_counterexample
from exactmax.io.vnnlib import read_vnnlib
from exactmax.kernel.certificate import Choice, Empty, Split, domain_rows
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit, evaluate_maxout
from exactmax.kernel.affine import Affine
from exactmax.kernel.property import Excluded, check_property
from exactmax.kernel.rational import Q
from exactmax.prove.property import decide_property, violation
from test_onnx import build


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def relu_net(W, b, V, c):
    """y = V relu(W x + b) + c."""
    zero = Piece((Q(0),) * len(W[0]), Q(0))
    units = tuple(Unit((Piece(tuple(map(Q, w)), Q(bi)), zero)) for w, bi in zip(W, b))
    return MaxoutNetwork(len(W[0]), (Layer(units),),
                         Affine(tuple(tuple(map(Q, r)) for r in V), tuple(map(Q, c)), len(W)))


# |x0| + |x1| - 1/2 written with ReLUs: outputs (y0, y1) = (|x0| + |x1|, x0 - x1)
NET = relu_net([[1, 0], [-1, 0], [0, 1], [0, -1]], [0, 0, 0, 0],
               [[1, 1, 1, 1], [1, -1, -1, 1]], [0, 0])
HEAD = "(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n" \
       "(declare-const Y_1 Real)\n(assert (>= X_0 -1)) (assert (<= X_0 1))\n" \
       "(assert (>= X_1 -1/2)) (assert (<= X_1 1))\n".replace("-1/2", "-0.5")


def vnn(tmp_path, outputs, name="p.vnnlib"):
    p = tmp_path / name
    p.write_text(HEAD + outputs)
    return str(p)


def test_unsat_certificate_is_checked_and_tampering_rejected(tmp_path):
    # |x0| + |x1| <= 2 on the box, and never > 2: unsat; the or-branch y0 < -0.1 too
    prop = read_vnnlib(vnn(tmp_path, "(assert (or (and (> Y_0 2)) (and (< Y_0 -0.1))))"))
    a = decide_property(NET, prop, timeout_s=30)
    assert a.result == "unsat", a.reason
    assert check_property(NET, prop.cases, a.trees) == a.stats["leaves_checked"] >= 4
    for tampered in _tamperings(a.trees[0]):
        with pytest.raises(CheckFailed):
            check_property(NET, prop.cases, (tampered,))
    with pytest.raises(CheckFailed):   # a certificate for another network
        other = relu_net([[1, 0], [-1, 0], [0, 1], [0, -1]], [0, 0, 0, 0],
                         [[1, 1, 1, 1], [1, -1, -1, 1]], [Q(1, 1000), 0])
        check_property(other, prop.cases, a.trees)


def _leaves(t, path=()):
    if isinstance(t, Split):
        yield from _leaves(t.ge, path + ("ge",))
        yield from _leaves(t.lt, path + ("lt",))
    else:
        yield path, t


def _replace(t, path, new):
    if not path:
        return new
    return dataclasses.replace(t, **{path[0]: _replace(getattr(t, path[0]), path[1:], new)})


def _tamperings(tree):
    """Copies of the tree wrong by one number: a multiplier, a split's constant, a choice."""
    out = []
    path, leaf = next((p, l) for p, l in _leaves(tree) if isinstance(l, Excluded))
    (i, y), *rest = leaf.proofs[0]
    out.append(_replace(tree, path, dataclasses.replace(
        leaf, proofs=(((i, y + 1), *rest),) + leaf.proofs[1:])))
    out.append(_replace(tree, path, dataclasses.replace(
        leaf, proofs=(((i + 1, y), *rest),) + leaf.proofs[1:])))
    out.append(_replace(tree, path, dataclasses.replace(leaf, proofs=leaf.proofs[:1])))
    out.append(_replace(tree, path, Excluded((), leaf.proofs)))
    if isinstance(tree, Split):
        out.append(dataclasses.replace(tree, c=tree.c + Q(1, 2)))
        out.append(dataclasses.replace(tree, a=(tree.a[0] + 1,) + tree.a[1:]))
    return out


def test_choices_are_checked_where_stated_and_restatements_below_replace_them(tmp_path):
    """The kernel walks the tree once, carrying the maps known on each cell (kernel/property.py
    check_case): a choice is checked on the rows of the cell where it is stated, and a choice
    stated again lower down replaces it there (and is checked)."""
    prop = read_vnnlib(vnn(tmp_path, "(assert (> Y_0 2))"))
    a = decide_property(NET, prop, timeout_s=30, search=False)
    tree = a.trees[0]
    inner = next(t for t in (tree, tree.ge, tree.lt)
                 if isinstance(t, Split) and t.choices and isinstance(t.ge, Excluded)
                 and isinstance(t.lt, Excluded))
    path = ("ge",) if inner is tree.ge else ("lt",) if inner is tree.lt else ()
    assert check_property(NET, prop.cases, (tree,)) == a.stats["leaves_checked"]

    def with_inner(new):
        return (_replace(tree, path, new),)

    # restating a choice of the split at a leaf below it: accepted as it is, and checked
    same = dataclasses.replace(inner, ge=dataclasses.replace(
        inner.ge, choices=inner.ge.choices + inner.choices[:1]))
    assert check_property(NET, prop.cases, with_inner(same)) == a.stats["leaves_checked"]
    _, index, ch = inner.choices[0]
    wrong = Choice(1 - ch.k, tuple(None if pr is not None else ((0, Q(1)),) for pr in ch.proofs))
    restated = dataclasses.replace(inner, ge=dataclasses.replace(
        inner.ge, choices=inner.ge.choices + ((0, index, wrong),)))
    with pytest.raises(CheckFailed, match=f"node {index}"):
        check_property(NET, prop.cases, with_inner(restated))
    # a leaf's choices moved up to the split above: their proofs use the split's own row,
    # which the split's cell does not have, so they are refused there (the leaf on the other
    # side states its own, which would replace them)
    up = dataclasses.replace(inner, choices=inner.choices + inner.ge.choices,
                             ge=dataclasses.replace(inner.ge, choices=()))
    assert any(i >= len(domain_rows(prop.cases[0].inputs)) + len(path) for _, _, c in
               inner.ge.choices for pr in c.proofs if pr for i, _ in pr)
    with pytest.raises(CheckFailed, match="does not exist"):
        check_property(NET, prop.cases, with_inner(up))
    # a proof of the split's choice one number off, and a choice for a program 1
    (i, y), *rest = next(pr for pr in ch.proofs if pr)
    off = Choice(ch.k, tuple(pr if pr is None else ((i, y + 1), *rest) for pr in ch.proofs))
    with pytest.raises(CheckFailed, match=f"node {index}"):
        check_property(NET, prop.cases, with_inner(dataclasses.replace(
            inner, choices=((0, index, off),) + inner.choices[1:])))
    with pytest.raises(CheckFailed, match="program 1 does not exist"):
        check_property(NET, prop.cases, with_inner(dataclasses.replace(
            inner, choices=((1, index, ch),) + inner.choices[1:])))
    # a leaf without the choice of a Max node the outputs read
    bare = dataclasses.replace(inner, ge=dataclasses.replace(inner.ge, choices=()))
    with pytest.raises(CheckFailed, match="choice for this Max node"):
        check_property(NET, prop.cases, with_inner(bare))


def test_strictness_decides_on_the_boundary(tmp_path):
    # y0 = |x0| + |x1| >= 0 is reached exactly at 0 (sat), > 0 never fails... its negation
    sat = read_vnnlib(vnn(tmp_path, "(assert (<= Y_0 0))"))
    a = decide_property(NET, sat, timeout_s=30)
    assert a.result == "sat" and a.x == (0, 0) and a.margin == 0
    unsat = read_vnnlib(vnn(tmp_path, "(assert (< Y_0 0))", "q.vnnlib"))
    b = decide_property(NET, unsat, timeout_s=30, search=False)
    assert b.result == "unsat"
    assert check_property(NET, unsat.cases, b.trees) >= 1
    # the tree of the non-strict property cannot prove the strict one's negation false
    with pytest.raises(CheckFailed):
        check_property(NET, sat.cases, b.trees)


def test_counterexample_from_the_certificate_search(tmp_path):
    # y1 = x0 - x1 >= 1.4 only near the corner (1, -0.5): found with or without the search
    prop = read_vnnlib(vnn(tmp_path, "(assert (>= Y_1 1.4))"))
    for search in (True, False):
        a = decide_property(NET, prop, timeout_s=30, search=search)
        assert a.result == "sat"
        n, j, y, margin = violation(NET, prop.cases, a.x)
        assert n == 0 and y == evaluate_maxout(NET, a.x) and y[1] >= Q(14, 10)


def test_check_and_replay_commands(tmp_path):
    W = np.array([[1.0, -1.0], [0.5, 2.0]], np.float32)
    onnx_path = build(tmp_path / "n.onnx", [helper.make_node("MatMul", ["x", "W"], ["h"]),
                                            helper.make_node("Relu", ["h"], ["y"])],
                      {"W": W}, [2], [2])
    p = vnn(tmp_path, "(assert (or (and (>= Y_0 1.45)) (and (>= Y_1 5))))")
    cex, cert = tmp_path / "cex.txt", tmp_path / "c.json"
    r = run("check", onnx_path, p, "--counterexample", cex, "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["verdict"] == "sat" and out["sha256"]["property"]
    x, y = read_counterexample(str(cex), 2, 2)
    assert [str(v) for v in x] == out["x"] and y is not None
    r = run("replay", onnx_path, p, cex)
    assert r.returncode == 0 and r.stdout.startswith("valid")
    # a point outside the box, and one inside that does not violate
    bad = tmp_path / "bad.txt"
    bad.write_text("sat\n((X_0 1.000001) (X_1 -0.5) (Y_0 0) (Y_1 0))\n")
    r = run("replay", onnx_path, p, bad, "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["outside_by"] == "1/1000000"
    bad.write_text("((X_0 0) (X_1 0))")
    r = run("replay", onnx_path, p, bad)
    assert r.returncode == 1 and "satisfies no output constraint" in r.stdout
    bad.write_text("((X_0 0) (X_1 0)")
    r = run("replay", onnx_path, p, bad)
    assert r.returncode == 2 and "bad.txt:1:1:" in r.stderr
    # unsat with a certificate, re-checked by check-cert; a tampered one is rejected
    q = vnn(tmp_path, "(assert (>= Y_0 1.501))", "q.vnnlib")
    r = run("check", onnx_path, q, "--cert", cert)
    assert r.returncode == 0 and r.stdout.startswith("unsat (certificate checked by the kernel)")
    assert run("check-cert", cert).returncode == 0
    doc = json.loads(cert.read_text())
    leaf = doc["cases"][0]
    while "split" in leaf:
        leaf = leaf["ge"]
    kind = next(k for k in ("excluded", "relaxed", "empty") if k in leaf)   # relaxed: ReLU outputs
    proof = leaf[kind] if kind == "empty" else leaf[kind]["proofs"][0]
    proof[0][1] = str(Q(proof[0][1]) + 1)
    cert.write_text(json.dumps(doc))
    r = run("check-cert", cert)
    assert r.returncode == 1 and r.stdout.startswith("rejected")
    r = run("check", onnx_path, q, "--cert", q)
    assert r.returncode == 2 and "names the same file" in r.stderr


def test_dimension_mismatch_and_unknown(tmp_path):
    p = tmp_path / "one.vnnlib"
    p.write_text("(declare-const X_0 Real)\n(declare-const Y_0 Real)\n(assert (<= Y_0 0))")
    net = tmp_path / "n.json"
    from exactmax.io import model_to_json, write_json_atomic
    write_json_atomic(str(net), model_to_json(NET))
    r = run("check", net, p)
    assert r.returncode == 2 and "declares 1 inputs" in r.stderr
    q = vnn(tmp_path, "(assert (> Y_0 2))")
    r = run("check", net, q, "--max-leaves", "1", "--no-search", "--json")
    assert r.returncode == 3 and json.loads(r.stdout)["verdict"] == "unknown"


def test_decimal_text_is_exact():
    from exactmax.io.numbers import parse_rational
    for v in (Q(-3, 10), Q(1, 2 ** 40), Q(7), Q(-1, 8), Q(0), Q(-12345, 1024)):
        assert parse_rational(decimal_text(v)) == v
    assert decimal_text(Q(1, 3)) == "(/ 1 3)"


def _maxout_onnx(tmp_path):
    """A rank-3 Maxout layer (variadic Max) then a rank-2 one (ReduceMax over a reshaped
    axis), from weights with short binary expansions."""
    rng = np.random.default_rng(3)
    W = {f"W{j}": (rng.integers(-8, 9, size=(2, 4)) / 4).astype(np.float32) for j in range(3)}
    W["V"] = (rng.integers(-8, 9, size=(4, 4)) / 4).astype(np.float32)
    W["U"] = (rng.integers(-8, 9, size=(2, 1)) / 4).astype(np.float32)
    W["shape"] = np.array([2, 2], np.int64)
    n = [helper.make_node("MatMul", ["x", f"W{j}"], [f"z{j}"]) for j in range(3)] + [
        helper.make_node("Max", ["z0", "z1", "z2"], ["m"]),
        helper.make_node("MatMul", ["m", "V"], ["v"]),
        helper.make_node("Reshape", ["v", "shape"], ["r"]),
        helper.make_node("ReduceMax", ["r"], ["q"], axes=[1], keepdims=0),
        helper.make_node("MatMul", ["q", "U"], ["y"])]
    return build(tmp_path / "maxout.onnx", n, W, [2], [1])


def test_check_on_a_maxout_network_sat_and_unsat(tmp_path):
    from exactmax.io import load_model
    path = _maxout_onnx(tmp_path)
    net = load_model(path)
    assert [l.rank for l in net.layers] == [3, 2]
    # a sound upper bound of y on the box by interval arithmetic: unsat above it
    lo, hi = [Q(-1), Q(-1, 2)], [Q(1), Q(1)]
    for layer in net.layers:
        lo, hi = ([max(p.b + sum(min(w * l, w * h) for w, l, h in zip(p.w, lo, hi))
                       for p in u.pieces) for u in layer.units],
                  [max(p.b + sum(max(w * l, w * h) for w, l, h in zip(p.w, lo, hi))
                       for p in u.pieces) for u in layer.units])
    (row,), c = net.output.W, net.output.b[0]
    top = c + sum(max(w * l, w * h) for w, l, h in zip(row, lo, hi))
    q = vnn(tmp_path, "", "x.vnnlib")
    text = open(q).read().replace("(declare-const Y_1 Real)\n", "")
    for bound, expect in ((top + 1, 0), (evaluate_maxout(net, (0, 0))[0] - Q(1, 8), 1)):
        p = tmp_path / f"b{expect}.vnnlib"
        p.write_text(text + f"(assert (>= Y_0 {decimal_text(bound)}))\n")
        r = run("check", path, p, "--json", "--no-search")
        assert r.returncode == expect, r.stdout + r.stderr
        out = json.loads(r.stdout)
        if expect == 1:
            from exactmax.io.numbers import parse_rational
            x = tuple(parse_rational(v) for v in out["x"])
            assert evaluate_maxout(net, x)[0] == parse_rational(out["y"][0]) >= bound


def test_every_model_command_reads_onnx(tmp_path):
    from exactmax.io import model_to_json, write_json_atomic, load_model
    path = _maxout_onnx(tmp_path)
    js = tmp_path / "m.json"
    assert run("import", path, "-o", js).returncode == 0
    dom = tmp_path / "d.json"
    dom.write_text(json.dumps({"format": "exactmax/domain", "version": 1,
                               "box": {"lower": ["-1", "-1"], "upper": ["1", "1"]}}))
    r = run("eval", path, "--input", "1/3,-1/2")
    assert r.returncode == 0 and r.stdout.strip() == \
        "y = (" + str(evaluate_maxout(load_model(str(js)), (Q(1, 3), Q(-1, 2)))[0]) + ")"
    r = run("equiv", path, js, "--domain", dom, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["verdict"] == "proved", r.stdout
    assert run("info", path).returncode == 0


def test_check_refuses_bad_vnnlib_in_one_line(tmp_path):
    from exactmax.io import model_to_json, write_json_atomic
    net = tmp_path / "n.json"
    write_json_atomic(str(net), model_to_json(NET))
    p = vnn(tmp_path, "(assert (>= Y_0 (+ 1 Y_2)))")
    r = run("check", net, p)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1
    assert lines[0].startswith("exactmax: error: ") and "p.vnnlib:7:" in lines[0]
    assert "Y_2 is used before its declare-const" in lines[0]


def _deep_relu_net(seed, d=3, widths=(6, 6, 6)):
    """A ReLU network with small dyadic weights (y = the last layer's sum, one output)."""
    rng = np.random.default_rng(seed)
    layers, n = [], d
    for w in widths:
        units = tuple(Unit((Piece(tuple(Q(int(v), 4) for v in rng.integers(-4, 5, n)),
                                  Q(int(rng.integers(-2, 3)), 4)),
                            Piece((Q(0),) * n, Q(0)))) for _ in range(w))
        layers.append(Layer(units))
        n = w
    out = Affine(((Q(1),) * n,), (Q(0),), n)
    return MaxoutNetwork(d, tuple(layers), out)


@pytest.mark.parametrize("polyhedral", [False, True])
def test_the_tree_builder_on_a_deeper_network_box_and_polyhedron(tmp_path, polyhedral):
    """The producer (prove/property.py: levels, box screen, one float LP per cell made exact,
    float points) on a 3-layer ReLU network: the largest output over sample points is reached
    (sat, checked by exact evaluation), and 100, above the maximum, is not (unsat, by a tree
    the kernel accepts, its Max choices proved by the box rule and by the cell LPs).  With a
    polyhedral input set (a diagonal row) there is no box rule: every choice is an LP's."""
    from exactmax.io.vnnlib import read_vnnlib
    net = _deep_relu_net(7)
    head = "".join(f"(declare-const X_{i} Real)\n(assert (>= X_{i} -1)) (assert (<= X_{i} 1))\n"
                   for i in range(3)) + "(declare-const Y_0 Real)\n"
    if polyhedral:
        head += "(assert (<= (+ X_0 X_1) 1))\n"
    grid = [tuple(Q(int(v), 8) for v in x)
            for x in np.random.default_rng(1).integers(-8, 9, (300, 3))]
    best = max(evaluate_maxout(net, x)[0] for x in grid if not polyhedral or x[0] + x[1] <= 1)
    for y, expect in ((best, "sat"), (Q(100), "unsat")):
        p = tmp_path / f"{expect}.vnnlib"
        p.write_text(head + f"(assert (>= Y_0 {decimal_text(y)}))\n")
        prop = read_vnnlib(str(p))
        a = decide_property(net, prop, timeout_s=60, search=False, relaxed=False)
        assert a.result == expect, a.reason
        if expect == "sat":
            assert evaluate_maxout(net, a.x)[0] >= y and prop.cases[0].inputs.contains(a.x)
            continue
        assert check_property(net, prop.cases, a.trees) == a.stats["leaves_checked"] > 50
        how = a.stats["proofs"]
        assert how["lp"] > 0 and (how["box"] > 0) == (not polyhedral)


def test_float_guides_made_exact():
    """The producer's float helpers: the exact support solve (square and not, singular), and
    the float nudge across a new row (a point strictly inside both, or None)."""
    from exactmax.engine.casetree import _float_nudge, _support_solve
    vs = [(Q(1), Q(0)), (Q(1), Q(1))]
    assert _support_solve(vs, (Q(3), Q(2))) == [Q(1), Q(2)]
    assert _support_solve([(Q(1), Q(1)), (Q(2), Q(2))], (Q(3), Q(3))) is not None   # singular
    assert _support_solve([(Q(1), Q(1)), (Q(2), Q(2))], (Q(1), Q(0))) is None
    assert _support_solve([(Q(1), Q(0))], (Q(2), Q(0))) == [Q(2)]
    G = np.array([[1.0, 0], [-1, 0], [0, 1], [0, -1]])   # |x|, |y| < 1
    h = np.ones(4)
    q = _float_nudge(G, h, np.array([0.5, 0.0]), np.array([-1.0, 0.0]), -0.2)  # x < -0.2
    assert q is not None and (G @ q + h > 0).all() and q[0] < -0.2
    assert _float_nudge(G, h, np.array([0.5, 0.0]), np.array([-1.0, 0.0]), -1.5) is None
    assert _float_nudge(G, h, np.array([0.5, 0.0]), np.array([0.0, 0.0]), 1.0) is None
