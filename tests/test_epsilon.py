"""Epsilon- and top-1 equivalence (#21): ``exactmax equiv A B --epsilon E`` proves
|A(x) - B(x)|_inf <= E on the domain with a certificate the kernel checks, or refutes it at an
exact point with the exact gap; ``--top1`` proves argmax A(x) = argmax B(x) as sets (ties
included) or refutes it at a point.  The true largest gap of a pruned twin is computed here
independently (1-D: a one-hidden-layer ReLU network is affine between the kinks -b_h / w_h of
its units, so the gap is largest at a kink of A or B or at an end of the interval; evaluated
with fractions.Fraction, not by exactmax)."""

from __future__ import annotations

import copy
import json
import random
from fractions import Fraction as F

import pytest

from exactmax import schemas
from exactmax.cli import main
from exactmax.io import load_model
from exactmax.io.pair_certificate import load_pair_certificate
from exactmax.kernel.certificate import Split
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.pair import check_pair_property, pair_case, program_of_pair
from exactmax.kernel.polyhedron import Box
from exactmax.kernel.program import (
    Lin,
    program_of_maxout,
    program_of_transformer,
)
from exactmax.kernel.rational import Q
from exactmax.prove.tolerance import decide_tolerance
from exactmax.vectorized.program import evaluate_program

# ------------------------------------------------------------------------------ models

def relu_net(W1, b1, W2, b2, lo, hi) -> dict:
    """exactmax/maxout JSON of y = W2 ReLU(W1 x + b1) + b2 on the box [lo, hi]."""
    s = lambda v: str(F(v))   # noqa: E731
    d = len(W1[0])
    return {"format": "exactmax/maxout", "version": 1, "input_dim": d,
            "layers": [{"units": [{"pieces": [{"w": [s(v) for v in w], "b": s(b)},
                                              {"w": ["0"] * d, "b": "0"}]}
                                  for w, b in zip(W1, b1)]}],
            "output": {"W": [[s(v) for v in r] for r in W2], "b": [s(v) for v in b2]},
            "domain": {"box": {"lower": [s(v) for v in lo], "upper": [s(v) for v in hi]}}}


def maxout_net(units, W2, b2, lo, hi) -> dict:
    """One Maxout layer of 1-D units, each a list of pieces (w, b)."""
    s = lambda v: str(F(v))   # noqa: E731
    return {"format": "exactmax/maxout", "version": 1, "input_dim": 1,
            "layers": [{"units": [{"pieces": [{"w": [s(w)], "b": s(b)} for w, b in u]}
                                  for u in units]}],
            "output": {"W": [[s(v) for v in r] for r in W2], "b": [s(v) for v in b2]},
            "domain": {"box": {"lower": [s(lo)], "upper": [s(hi)]}}}


def random_relu(seed: int, width: int = 8, outs: int = 2):
    rnd = random.Random(seed)
    q = lambda: F(rnd.randint(-8, 8), 4)   # noqa: E731
    return ([[q()] for _ in range(width)], [q() for _ in range(width)],
            [[q() for _ in range(width)] for _ in range(outs)], [q() for _ in range(outs)])


def pruned(params, seed: int, count: int = 3):
    """The twin with ``count`` first-layer and output weights set to zero."""
    W1, b1, W2, b2 = copy.deepcopy(params)
    rnd = random.Random(seed)
    for h in rnd.sample(range(len(W1)), count):
        W1[h][0] = F(0)
    o, h = rnd.randrange(len(W2)), rnd.randrange(len(W2[0]))
    W2[o][h] = F(0)
    return W1, b1, W2, b2


def value(params, x: F) -> list[F]:
    """y = W2 ReLU(W1 x + b1) + b2, in fractions (independent of exactmax)."""
    W1, b1, W2, b2 = params
    h = [max(w[0] * x + b, F(0)) for w, b in zip(W1, b1)]
    return [sum((a * v for a, v in zip(r, h)), F(0)) + c for r, c in zip(W2, b2)]


def true_gap(pa, pb, lo: F, hi: F) -> F:
    """max over [lo, hi] of max_o |A_o(x) - B_o(x)|: both are affine between consecutive
    kinks, so the largest gap is at a kink or an end."""
    xs = {lo, hi} | {-b / w[0] for p in (pa, pb) for w, b in zip(p[0], p[1])
                     if w[0] and lo <= -b / w[0] <= hi}
    return max(abs(u - v) for x in xs for u, v in zip(value(pa, x), value(pb, x)))


def write(tmp_path, name: str, obj: dict) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return str(path)


def run(capsys, *argv) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


# ------------------------------------------------------------------------------ the kernel

def test_the_pair_program_computes_both_programs(tmp_path):
    pa = random_relu(1)
    a = load_model(write(tmp_path, "a.json", relu_net(*pa, [-2], [2])))
    b = load_model(write(tmp_path, "b.json", relu_net(*pruned(pa, 2), [-2], [2])))
    f, g = program_of_maxout(a), program_of_maxout(b)
    p = program_of_pair(f, g)
    assert len(p.nodes) == len(f.nodes) + len(g.nodes) and len(p.outputs) == 4
    for x in (Q(-2), Q(-1, 3), Q(0), Q(5, 7), Q(2)):
        assert evaluate_program(p, [x]) == evaluate_program(f, [x]) + evaluate_program(g, [x])
    assert all(j >= len(f.nodes) for n in p.nodes[len(f.nodes):] if isinstance(n, Lin)
               for j, _ in n.terms)


def test_the_forbidden_conjunctions_are_the_ones_stated():
    P = Box((Q(0),), (Q(1),)).as_polyhedron()
    case = pair_case(P, 2, Q(1, 10))
    # rows over (x, a0, a1, b0, b1): a0 - b0 - E > 0, b0 - a0 - E > 0, then output 1
    assert [(r.a, r.c, r.strict) for (r,) in case.outputs] == [
        ((0, 1, 0, -1, 0), Q(-1, 10), True), ((0, -1, 0, 1, 0), Q(-1, 10), True),
        ((0, 0, 1, 0, -1), Q(-1, 10), True), ((0, 0, -1, 0, 1), Q(-1, 10), True)]
    top = pair_case(P, 3, None)
    assert len(top.outputs) == 2 * 3 * 2
    first = top.outputs[0]   # i = 0 maximal in a (a0 - a1 >= 0, a0 - a2 >= 0), b1 > b0
    assert [(r.a, r.strict) for r in first] == [
        ((0, 1, -1, 0, 0, 0, 0), False), ((0, 1, 0, -1, 0, 0, 0), False),
        ((0, 0, 0, 0, -1, 1, 0), True)]


# ------------------------------------------------------------------------------ pruned twin

@pytest.mark.parametrize("seed", [3, 11])
def test_pruned_twin_epsilon_at_the_true_gap_is_proved_and_below_it_refuted(
        seed, tmp_path, capsys):
    pa = random_relu(seed)
    pb = pruned(pa, seed + 100)
    lo, hi = F(-2), F(2)
    g = true_gap(pa, pb, lo, hi)
    assert g > 0
    A = write(tmp_path, "a.json", relu_net(*pa, [lo], [hi]))
    B = write(tmp_path, "b.json", relu_net(*pb, [lo], [hi]))
    cert = str(tmp_path / "eps.json")
    for E, expect in ((g + F(1, 1000), 0), (g, 0), (g - F(1, 1000), 1)):
        code, out = run(capsys, "equiv", A, B, "--epsilon", str(E), "--cert", cert)
        assert code == expect, (E, g, out)
        assert out["property"] == {"kind": "epsilon", "epsilon": str(E), "norm": "inf"}
        if expect == 1:
            ce = out["counterexample"]
            x = F(ce["x"][0])
            assert lo <= x <= hi
            gap = F(ce["gap"])
            assert E < gap <= g   # more than E, and never more than the truth
            ya, yb = value(pa, x), value(pb, x)
            assert gap == max(abs(u - v) for u, v in zip(ya, yb))
            assert [F(v) for v in ce["outputs"][A]] == ya
            assert abs(ya[ce["output"]] - yb[ce["output"]]) == gap
        else:
            assert out["verdict"] == "proved" and out["trust"] == "kernel-checked"
            code, res = run(capsys, "check-cert", cert)
            assert code == 0 and res["verdict"] == "valid" and res["claim"] == \
                f"|A(x) - B(x)|_inf <= {E} for every x in the domain"


def test_the_search_alone_and_the_certificate_alone_refute(tmp_path):
    pa = random_relu(5)
    pb = pruned(pa, 6)
    g = true_gap(pa, pb, F(-2), F(2))
    a = load_model(write(tmp_path, "a.json", relu_net(*pa, [-2], [2])))
    b = load_model(write(tmp_path, "b.json", relu_net(*pb, [-2], [2])))
    E = Q((g - F(1, 100)).numerator, (g - F(1, 100)).denominator)
    for search in (True, False):
        ans = decide_tolerance(a, b, a.domain, E, 60, run_search=search)
        assert ans.verdict == "refuted"
        assert ans.stats["found_by"] == ("search" if search else "certificate")
        assert ans.gap > E and F(int(ans.gap.p), int(ans.gap.q)) <= g


@pytest.mark.parametrize("seed", [5, 7])
def test_the_float_ascent_climbs_to_the_true_largest_gap(seed, tmp_path):
    """``ascend`` (floats, a hint) from the box's centre ends where the gap is within 1e-6 of
    the true largest gap (computed here at the kinks); ``polish`` turns that point into a
    refutation whose exact gap is the kernel's and never above the truth."""
    from exactmax.engine.pair import programs
    from exactmax.prove.tolerance import FloatProgram, ascend, polish, search

    pa = random_relu(seed)
    pb = pruned(pa, seed + 100)
    g = true_gap(pa, pb, F(-2), F(2))
    a = load_model(write(tmp_path, "a.json", relu_net(*pa, [-2], [2])))
    b = load_model(write(tmp_path, "b.json", relu_net(*pb, [-2], [2])))
    fp, P, tiny = FloatProgram(programs(a, b)[1]), a.domain.as_polyhedron(), Q(1, 10**9)
    case = pair_case(P, 2, Q(0))
    x = ascend(fp, case.outputs, a.domain, [0.0], float("inf"))
    assert -2 <= x[0] <= 2
    assert abs(max(abs(u - v) for u, v in zip(value(pa, F(x[0])), value(pb, F(x[0])))) - g) < 1e-6
    found, _, _ = search(a, b, fp, pair_case(P, 2, tiny), a.domain, tiny, float("inf"))
    best = polish(a, b, fp, P, 2, a.domain, found, float("inf"))
    assert g - F(1, 10**6) < F(int(best.gap.p), int(best.gap.q)) <= g


# ------------------------------------------------------------------------------ Transformers

def test_maxout_against_its_compiled_transformer(tmp_path, capsys):
    net = maxout_net([[(1, 0), (-1, 0)], [(F(1, 2), -1), (-2, 1), (0, 0)]],
                     [[1, -1], [F(1, 3), 1]], [0, F(1, 5)], -1, 2)
    A = write(tmp_path, "a.json", net)
    TF = str(tmp_path / "tf.json")
    assert main(["compile", A, "-o", TF]) == 0
    capsys.readouterr()
    tf = load_model(TF)
    assert any(type(n).__name__ == "Hardmax" for n in program_of_transformer(tf).nodes)
    cert = str(tmp_path / "c.json")
    for flags in (["--epsilon", "0"], ["--top1"]):
        code, out = run(capsys, "equiv", A, TF, *flags, "--cert", cert)
        assert code == 0, out
        code, res = run(capsys, "check-cert", cert)
        assert code == 0 and res["verdict"] == "valid"
    # the Transformer's read-out moved by 1/10 in output 1: the gap is 1/10 everywhere
    moved = json.loads(open(TF).read())
    moved["readout"]["b"][1] = str(F(moved["readout"]["b"][1]) + F(1, 10))
    TF2 = write(tmp_path, "tf2.json", moved)
    code, out = run(capsys, "equiv", A, TF2, "--epsilon", "1/10", "--cert", cert)
    assert code == 0, out
    code, out = run(capsys, "equiv", A, TF2, "--epsilon", "99/1000")
    assert code == 1 and out["counterexample"]["gap"] == "1/10"
    assert out["counterexample"]["output"] == 1
    # the tie proofs of the hardmax choices are checked: a tampered one is rejected
    a, b, dom, eps, tree, _ = load_pair_certificate(cert)
    assert check_pair_property(a, b, dom, eps, tree) > 0
    doc = json.loads(open(cert).read())
    tie = _first(doc["tree"], lambda c: any(isinstance(p, dict) for p in c["proofs"]))
    proof = next(p for p in tie["proofs"] if isinstance(p, dict))
    proof["tie"]["upper"][0][1] = "2"
    bad = write(tmp_path, "bad.json", doc)
    code, res = run(capsys, "check-cert", bad)
    assert code == 1 and not res["verdict"] == "valid" and "tie set" in res["reason"]


def _first(tree, pred):
    """The first choice (depth first) of a JSON tree that satisfies ``pred``."""
    todo = [tree]
    while todo:
        t = todo.pop()
        holder = t.get("excluded", t)
        for c in holder.get("choices", ()):
            if pred(c):
                return c
        if "split" in t:
            todo += [t["lt"], t["ge"]]
    raise AssertionError("no such choice")


# ------------------------------------------------------------------------------ top-1

def test_top1_same_argmax_up_to_positive_scaling_is_proved(tmp_path, capsys):
    pa = random_relu(7, outs=3)
    W1, b1, W2, b2 = pa
    twice = (W1, b1, [[2 * v for v in r] for r in W2], [2 * v for v in b2])
    A = write(tmp_path, "a.json", relu_net(*pa, [-2], [2]))
    B = write(tmp_path, "b.json", relu_net(*twice, [-2], [2]))
    code, out = run(capsys, "equiv", A, B, "--top1")
    assert code == 0 and out["verdict"] == "proved", out
    assert out["property"] == {"kind": "top1"}
    code, out = run(capsys, "equiv", A, B, "--epsilon", "0")   # but not equal
    assert code == 1


def test_top1_moved_boundary_is_refuted_with_both_argmax_sets(tmp_path, capsys):
    # A = (x, 0), B = (x - 1/2, 0) on [-1, 1]: for 0 < x < 1/2 argmax A = {0}, argmax B = {1}
    A = write(tmp_path, "a.json", maxout_net([[(1, 0)]], [[1], [0]], [0, 0], -1, 1))
    B = write(tmp_path, "b.json", maxout_net([[(1, 0)]], [[1], [0]], [F(-1, 2), 0], -1, 1))
    for flags in ([], ["--no-search"]):
        code, out = run(capsys, "equiv", A, B, "--top1", *flags)
        assert code == 1, out
        ce = out["counterexample"]
        x = F(ce["x"][0])
        sets = {0: [0] if x > 0 else [1] if x < 0 else [0, 1],
                1: [0] if x > F(1, 2) else [1] if x < F(1, 2) else [0, 1]}
        assert ce["argmax"] == {A: sets[0], B: sets[1]} and sets[0] != sets[1]


def test_top1_ties_in_the_same_place_agree(tmp_path, capsys):
    # A = (x, 0), B = (x, x / 2): both tie at x = 0 only, with the same sets everywhere
    A = write(tmp_path, "a.json", maxout_net([[(1, 0)]], [[1], [0]], [0, 0], -1, 1))
    B = write(tmp_path, "b.json", maxout_net([[(1, 0)]], [[1], [F(1, 2)]], [0, 0], -1, 1))
    code, out = run(capsys, "equiv", A, B, "--top1", "--no-search")
    assert code == 0, out


def test_top1_a_tie_in_one_model_only_is_reported_as_a_tie(tmp_path, capsys):
    # A = (|x|, 0) ties at x = 0 only; B = (|x| + 1, 0) never does: they differ at x = 0
    # alone (the search's centre 1/2 misses it; the cells find it exactly)
    A = write(tmp_path, "a.json", maxout_net([[(1, 0), (-1, 0)]], [[1], [0]], [0, 0], -1, 2))
    B = write(tmp_path, "b.json", maxout_net([[(1, 0), (-1, 0)]], [[1], [0]], [1, 0], -1, 2))
    code, out = run(capsys, "equiv", A, B, "--top1")
    assert code == 1, out
    ce = out["counterexample"]
    assert ce["x"] == ["0"] and ce["ties"] is True
    assert ce["argmax"] == {A: [0, 1], B: [0]}
    # and (x^+, 0) against (x, 0): A ties on all of [-1, 0], B only at 0
    A2 = write(tmp_path, "a2.json", maxout_net([[(1, 0), (0, 0)]], [[1], [0]], [0, 0], -1, 2))
    B2 = write(tmp_path, "b2.json", maxout_net([[(1, 0)]], [[1], [0]], [0, 0], -1, 2))
    code, out = run(capsys, "equiv", A2, B2, "--top1")
    assert code == 1 and out["counterexample"]["ties"] is True
    assert F(out["counterexample"]["x"][0]) <= 0


# ------------------------------------------------------------------------------ certificates

@pytest.fixture
def eps_cert(tmp_path, capsys):
    """(path, true gap) of a certificate for the pruned twin at E = gap + 1/1000."""
    pa = random_relu(3)
    pb = pruned(pa, 103)
    g = true_gap(pa, pb, F(-2), F(2))
    A = write(tmp_path, "a.json", relu_net(*pa, [-2], [2]))
    B = write(tmp_path, "b.json", relu_net(*pb, [-2], [2]))
    cert = str(tmp_path / "eps.json")
    code, _ = run(capsys, "equiv", A, B, "--epsilon", str(g + F(1, 1000)), "--cert", cert)
    assert code == 0
    return cert, g, A, B


def test_the_certificate_validates_against_its_schema(eps_cert):
    doc = json.loads(open(eps_cert[0]).read())
    assert doc["format"] == "exactmax/pair-property-certificate"
    v = schemas.validator("pair-property-certificate")
    assert list(v.iter_errors(doc)) == []
    for broken in ({**doc, "property": {"kind": "epsilon", "epsilon": "1"}},
                   {**doc, "property": {"kind": "top2"}}, {**doc, "extra": 1}):
        assert list(v.iter_errors(broken)) != []


def _tampered(path: str, tmp_path, edit) -> str:
    doc = json.loads(open(path).read())
    edit(doc)
    out = tmp_path / "tampered.json"
    out.write_text(json.dumps(doc))
    return str(out)


def test_epsilon_lowered_below_the_truth_is_rejected(eps_cert, tmp_path, capsys):
    cert, g, _, _ = eps_cert
    low = str(g - F(1, 1000))

    def lower(doc):
        doc["property"]["epsilon"] = low
        doc["claim"] = f"|A(x) - B(x)|_inf <= {low} for every x in the domain"
    code, res = run(capsys, "check-cert", _tampered(cert, tmp_path, lower))
    assert code == 1 and res["verdict"] == "rejected", res


def test_a_changed_multiplier_is_rejected(eps_cert, tmp_path, capsys):
    def change(doc):
        t = doc["tree"]
        while "split" in t:
            t = t["ge"]
        leaf = t.get("excluded") or t.get("relaxed")
        proof = leaf["proofs"][0] if leaf else t["empty"]
        proof[-1][1] = str(F(proof[-1][1]) * 2)
    code, res = run(capsys, "check-cert", _tampered(eps_cert[0], tmp_path, change))
    assert code == 1 and res["verdict"] == "rejected", res


def test_a_claim_that_is_not_the_property_is_unreadable(eps_cert, tmp_path, capsys):
    def claim(doc):
        doc["property"]["epsilon"] = "0"
    assert main(["check-cert", _tampered(eps_cert[0], tmp_path, claim)]) == 2
    assert "claim" in capsys.readouterr().err


def test_check_cert_names_the_models_it_speaks_about(eps_cert, capsys):
    cert, _, A, B = eps_cert
    assert main(["check-cert", cert, "--models", A, B]) == 0
    assert main(["check-cert", cert, "--models", B, A]) == 1
    assert "is not the model" in capsys.readouterr().out


def test_the_kernel_rejects_a_tree_for_another_property(eps_cert):
    a, b, dom, eps, tree, _ = load_pair_certificate(eps_cert[0])
    assert check_pair_property(a, b, dom, eps, tree) > 0
    with pytest.raises(CheckFailed):
        check_pair_property(a, b, dom, None, tree)   # the top-1 property has other rows
    with pytest.raises(CheckFailed):
        check_pair_property(a, a, dom, eps, tree)    # another pair
    assert isinstance(tree, Split)


# ------------------------------------------------------------------------------ the command

def test_usage_errors_and_unknown(tmp_path, capsys):
    pa = random_relu(3)
    A = write(tmp_path, "a.json", relu_net(*pa, [-2], [2]))
    B = write(tmp_path, "b.json", relu_net(*pruned(pa, 4), [-2], [2]))
    for flags in (["--epsilon", "-1"], ["--epsilon", "x"], ["--epsilon", "1", "--top1"],
                  ["--norm", "inf"], ["--top1", "--strategy", "layerwise"]):
        assert main(["equiv", A, B, *flags]) == 2, flags
        err = capsys.readouterr().err
        assert err.startswith("exactmax: error:") and len(err.strip().splitlines()) == 1
    three = write(tmp_path, "c.json", relu_net(*random_relu(3, outs=3), [-2], [2]))
    assert main(["equiv", A, three, "--top1"]) == 2
    capsys.readouterr()
    near = str(true_gap(pa, pruned(pa, 4), F(-2), F(2)) + F(1, 1000))  # needs several cells
    code, out = run(capsys, "equiv", A, B, "--epsilon", near, "--max-leaves", "1",
                    "--no-search")
    assert code == 3 and out["verdict"] == "unknown" and "cells" in out["reason"]
    assert main(["equiv", A, B, "--epsilon", "1000", "--norm", "inf"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("proved (certificate checked by the kernel): |") and "about:" in text


def test_a_polyhedral_domain(tmp_path, capsys):
    """examples/relu_triangle.json has a triangle as its domain (no box: no float search, the
    cells alone decide)."""
    A = "examples/relu_triangle.json"
    TF = str(tmp_path / "tf.json")
    assert main(["compile", A, "-o", TF]) == 0
    capsys.readouterr()
    cert = str(tmp_path / "c.json")
    code, out = run(capsys, "equiv", A, TF, "--epsilon", "0", "--cert", cert)
    assert code == 0 and "search" not in out["stats"], out
    code, res = run(capsys, "check-cert", cert)
    assert code == 0 and res["verdict"] == "valid"
    assert load_pair_certificate(cert)[2].__class__.__name__ == "Polyhedron"
