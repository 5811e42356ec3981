"""Differential bounds (``engine/differential.py``) and the kernel rows they rest on: an upper
function may read earlier nodes' maps (``Upper.terms``), a relaxed leaf may add rows after its
upper functions (``Relaxed.extra``).  |A - B| <= E for a network and its pruned twin is proved
with few cells, every certificate is checked by the kernel, and tampered rows are rejected."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from exactmax import schemas
from exactmax.cli import main
from exactmax.engine import differential
from exactmax.io.models import domain_to_json, model_to_json
from exactmax.kernel.certificate import Split
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit, evaluate_maxout
from exactmax.kernel.affine import Affine
from exactmax.io.pair_certificate import load_pair_certificate as read_pair
from exactmax.kernel.pair import FreeInputs, check_pair_property
from exactmax.kernel.polyhedron import Box
from exactmax.kernel.program import Lin, Max, program_of_maxout
from exactmax.kernel.property import Case, Phase, Relaxed, Tighten, Upper, check_case
from exactmax.kernel.certificate import Row
from exactmax.kernel.rational import ONE, ZERO, Q
from exactmax.prove.tolerance import decide_tolerance


def relu(d: int, widths: list[int], outs: int, seed: int) -> MaxoutNetwork:
    """A seeded ReLU network with weights in multiples of 1/8."""
    rnd = random.Random(seed)
    q = lambda: Q(rnd.randint(-8, 8), 8)   # noqa: E731
    layers, prev = [], d
    for w in widths:
        layers.append(Layer(tuple(Unit((Piece(tuple(q() for _ in range(prev)), q() / 4),
                                        Piece((ZERO,) * prev, ZERO))) for _ in range(w))))
        prev = w
    out = Affine(tuple(tuple(q() for _ in range(prev)) for _ in range(outs)), (ZERO,) * outs, prev)
    return MaxoutNetwork(d, tuple(layers), out)


def pruned(net: MaxoutNetwork, k: int, seed: int) -> MaxoutNetwork:
    """The twin with k weights (of hidden layers and the output map) set to zero."""
    rnd = random.Random(seed)
    slots = [(l, u, j) for l, layer in enumerate(net.layers) for u, unit in enumerate(layer.units)
             for j in range(len(unit.pieces[0].w))]
    slots += [("out", o, j) for o, r in enumerate(net.output.W) for j in range(len(r))]
    zero = set(rnd.sample(slots, k))
    layers = tuple(Layer(tuple(
        Unit((Piece(tuple(ZERO if (l, u, j) in zero else v for j, v in enumerate(un.pieces[0].w)),
                    un.pieces[0].b), un.pieces[1]))
        for u, un in enumerate(layer.units))) for l, layer in enumerate(net.layers))
    W = tuple(tuple(ZERO if ("out", o, j) in zero else v for j, v in enumerate(r))
              for o, r in enumerate(net.output.W))
    return dataclasses.replace(net, layers=layers, output=dataclasses.replace(net.output, W=W))


BOX = Box((Q(-1, 2),) * 3, (Q(1, 2),) * 3)


def gap_on_grid(a, b, box: Box, n: int = 6) -> Q:
    """max_o |A_o(x) - B_o(x)| over a grid of the box (a lower bound of the largest gap)."""
    import itertools
    lo, hi = box.lower, box.upper
    best = ZERO
    for t in itertools.product(range(n + 1), repeat=len(lo)):
        x = tuple(l + (h - l) * Q(i, n) for l, h, i in zip(lo, hi, t))
        ya, yb = evaluate_maxout(a, x), evaluate_maxout(b, x)
        best = max(best, max(abs(u - v) for u, v in zip(ya, yb)))
    return best


def leaves(tree):
    todo = [tree]
    while todo:
        t = todo.pop()
        if isinstance(t, Split):
            todo += [t.ge, t.lt]
        else:
            yield t


@pytest.fixture(scope="module")
def twin():
    a = relu(3, [8, 8], 2, seed=5)
    b = pruned(a, 6, seed=6)
    g = gap_on_grid(a, b, BOX)
    E = g * Q(3, 2) + Q(1, 100)
    ans = decide_tolerance(a, b, BOX, E, run_search=False)
    assert ans.verdict == "proved", ans.reason
    return a, b, E, ans


def test_a_pruned_twin_is_proved_by_delta_rows(twin):
    a, b, E, ans = twin
    assert ans.stats["builder"] == "differential"
    rel = [t for t in leaves(ans.tree) if isinstance(t, Relaxed)]
    assert rel and any(t.extra for t in rel)   # delta rows were needed, and read terms
    assert any(u.terms for t in rel for _, u in t.extra)
    assert check_pair_property(a, b, BOX, E, ans.tree) == len(list(leaves(ans.tree)))


def test_an_epsilon_below_a_gap_the_grid_sees_is_refuted(twin):
    a, b, E, _ = twin
    g = gap_on_grid(a, b, BOX)
    ans = decide_tolerance(a, b, BOX, g - Q(1, 10**6))
    assert ans.verdict == "refuted" and ans.gap > g - Q(1, 10**6)


def _with_extra(tree, edit):
    """The tree with ``edit`` applied to the first relaxed leaf that has extra rows."""
    done = [False]

    def walk(t):
        if isinstance(t, Split):
            return dataclasses.replace(t, ge=walk(t.ge), lt=walk(t.lt))
        if isinstance(t, Relaxed) and t.extra and not done[0]:
            done[0] = True
            return edit(t)
        return t
    out = walk(tree)
    assert done[0]
    return out


def _upper(t: Relaxed, k: int, **kw) -> Relaxed:
    node, u = t.extra[k]
    extra = list(t.extra)
    extra[k] = (node, dataclasses.replace(u, **kw))
    return dataclasses.replace(t, extra=tuple(extra))


@pytest.mark.parametrize("what", ["beta", "term", "drop_term", "drop_rows", "bad_node",
                                  "lin_node", "unknown_term"])
def test_tampered_delta_rows_are_rejected(twin, what):
    a, b, E, ans = twin
    p = program_of_maxout(a)

    def edit(t: Relaxed) -> Relaxed:
        u = t.extra[0][1]
        if what == "beta":
            return _upper(t, 0, beta=u.beta - Q(1, 2**20))
        if what == "term":
            (k, c), *rest = u.terms
            return _upper(t, 0, terms=((k, c * 2), *rest))
        if what == "drop_term":
            return _upper(t, 0, terms=u.terms[1:])
        if what == "drop_rows":
            return dataclasses.replace(t, extra=())
        if what == "bad_node":
            return dataclasses.replace(t, extra=((10**6, u),) + t.extra[1:])
        if what == "lin_node":   # a Lin node has no upper function
            lin = next(i for i, n in enumerate(p.nodes) if isinstance(n, Lin))
            return dataclasses.replace(t, extra=((lin, u),) + t.extra[1:])
        (k, c), *rest = u.terms
        return _upper(t, 0, terms=((-1, c), *rest))
    with pytest.raises(CheckFailed):
        check_pair_property(a, b, BOX, E, _with_extra(ans.tree, edit))


def test_an_upper_function_with_terms_never_fixes_its_node():
    """w = max(x + 1, 0), v = max(x, 0) on [-1, 1] (w = x + 1 there); y = (v, w).  For v,
    u = x + (w - x) = w is >= x and >= 0 and is argument 0 (x) plus terms: were it read as
    "v = x", the false claim y_0 - x <= 0 would follow.  The kernel keeps v a variable."""
    net = MaxoutNetwork(1, (Layer((
        Unit((Piece((ONE,), ONE), Piece((ZERO,), ZERO))),
        Unit((Piece((ONE,), ZERO), Piece((ZERO,), ZERO))))),),
        Affine(((ZERO, ONE), (ONE, ZERO)), (ZERO, ZERO), 2))
    p = program_of_maxout(net)
    w, v = [i for i, n in enumerate(p.nodes) if isinstance(n, Max)]
    a_v = p.nodes[v].args[0]
    P = Box((-ONE,), (ONE,)).as_polyhedron()
    case = Case(P, ((Row((-ONE, ONE, ZERO), ZERO, True),),))   # forbidden: y_0 - x > 0
    # rows 0: 1 - x >= 0, 1: x + 1 >= 0.  w = x + 1 (argument 0: x + 1 >= 0 by row 1).
    up_w = Upper((ONE, ZERO), ZERO, ((), ((1, ONE),)))
    # u = x + w - x: u - x = w - x = 1 >= 0 (no row needed), u - 0 = x + 1 >= 0 by row 1
    up_v = Upper((ONE, ZERO), ZERO, ((), ((1, ONE),)), ((w, ONE), (a_v, -ONE)))
    # were v = x: y_0 - x = 0 > 0 is the row after the cell's, and (that row, 1) refutes it
    fixed = Relaxed((), (up_w, up_v), (((2, ONE),),))
    with pytest.raises(CheckFailed, match="combination leaves a linear part"):
        check_case(p, case, fixed)
    # as a variable v gets rows 2: v - x, 3: v, 4: u - v = x + 1 - v; y_0 - x > 0 is row 5,
    # and nothing refutes it (v = 1/2 at x = 0 meets them all): the true relaxation holds
    honest = Relaxed((), (up_w, up_v), (((5, ONE), (2, ONE)),))
    with pytest.raises(CheckFailed):
        check_case(p, case, honest)
    true = Case(P, ((Row((ONE, -ONE, ZERO), -ONE - ONE, True),),))   # y_0 - x < -2: impossible
    assert check_case(p, true, Relaxed((), (up_w, up_v), (((5, ONE), (2, ONE)),))) == 1


def test_units_only_one_network_reads_are_left_unpaired():
    """A pruned output column drops a unit from B's cone: the others still pair."""
    a = relu(2, [4], 1, seed=1)
    W = tuple(tuple(ZERO if j == 0 else v for j, v in enumerate(r)) for r in a.output.W)
    b = dataclasses.replace(a, output=dataclasses.replace(a.output, W=W))
    net = differential.PairLayers(a, b, None)
    assert len(net.A.ids[0]) == 4 and len(net.B.ids[0]) == 3
    assert [ua for ua, _ in net.pairs[0]] == [1, 2, 3]
    box = Box((-ONE, -ONE), (ONE, ONE))
    g = max(abs(a.output.W[0][0]) * 4, ONE)   # |A - B| = |w_0 ReLU(a_0)| <= |w_0| * 4ish
    ans = decide_tolerance(a, b, box, g * 3, run_search=False)
    assert ans.verdict == "proved" and ans.stats["builder"] == "differential"


def test_networks_of_other_depths_go_to_the_case_tree():
    a = relu(2, [4], 1, seed=1)
    assert not differential.applies(a, relu(2, [4, 2], 1, seed=1))
    assert differential.applies(a, relu(2, [5], 1, seed=1))   # widths may differ (pruned units)


def without_units(net: MaxoutNetwork, drop: dict, nudge: Q = ZERO) -> MaxoutNetwork:
    """Structured pruning: the hidden units ``drop[l]`` removed from layer l (their rows, and
    their columns in the next layer or the output map), every remaining weight times 1 + nudge
    (a retrained or quantised copy)."""
    f = lambda v: v * (1 + nudge)   # noqa: E731
    layers, keep_prev = [], None
    for l, layer in enumerate(net.layers):
        keep = [u for u in range(len(layer.units)) if u not in drop.get(l, ())]
        units = []
        for u in keep:
            w, bias = layer.units[u].pieces[0].w, layer.units[u].pieces[0].b
            w = tuple(f(w[j]) for j in (keep_prev if keep_prev is not None else range(len(w))))
            units.append(Unit((Piece(w, f(bias)), Piece((ZERO,) * len(w), ZERO))))
        layers.append(Layer(tuple(units)))
        keep_prev = keep
    W = tuple(tuple(f(r[j]) for j in keep_prev) for r in net.output.W)
    return MaxoutNetwork(net.input_dim, tuple(layers), Affine(W, net.output.b, len(keep_prev)))


def test_a_twin_with_units_removed_pairs_the_units_that_remain_and_is_proved():
    """Structured pruning (units removed, the rest nudged): the layers differ in width, so units
    pair by their nearest weight rows, and the delta rows prove |A - B| <= E as for weights."""
    a = relu(3, [8, 8], 2, seed=5)
    b = without_units(a, {0: {2}, 1: {0, 5}}, Q(1, 1000))
    net = differential.PairLayers(a, b, None)
    assert net.pairs[0] == [(0, 0), (1, 1)] + [(u, u - 1) for u in range(3, 8)]
    assert net.pairs[1] == [(u, u - 1) for u in range(1, 5)] + [(u, u - 2) for u in (6, 7)]
    E = gap_on_grid(a, b, BOX) * Q(3, 2) + Q(1, 100)
    ans = decide_tolerance(a, b, BOX, E, run_search=False)
    assert ans.verdict == "proved" and ans.stats["builder"] == "differential"
    assert any(t.extra for t in leaves(ans.tree) if isinstance(t, Relaxed))
    assert check_pair_property(a, b, BOX, E, ans.tree) == len(list(leaves(ans.tree)))


def test_networks_with_a_relu_on_their_outputs_are_relaxed_layer_by_layer():
    """A ReLU on the output layer (the program's outputs are Max nodes, as in VeryDiff's MNIST
    networks): read through identity rows, the pair still goes to the differential builder."""
    def with_output_relu(net):
        out = Layer(tuple(Unit((Piece(w, c), Piece((ZERO,) * len(w), ZERO)))
                          for w, c in zip(net.output.W, net.output.b)))
        return MaxoutNetwork(net.input_dim, net.layers + (out,), None)
    base = relu(3, [8, 8], 3, seed=5)
    base = dataclasses.replace(base, output=dataclasses.replace(base.output,
                                                                b=(Q(1, 20), ZERO, ZERO)))
    a, b = with_output_relu(base), with_output_relu(pruned(base, 4, seed=6))
    assert differential.applies(a, b)
    small = Box((Q(-1, 20),) * 3, (Q(1, 20),) * 3)
    ans = decide_tolerance(a, b, small, None, run_search=False)
    assert ans.verdict == "proved" and ans.stats["builder"] == "differential"
    assert check_pair_property(a, b, small, None, ans.tree) == len(list(leaves(ans.tree)))


def _files(tmp_path, a, b, box) -> list[str]:
    out = []
    for name, obj in (("a", model_to_json(a)), ("b", model_to_json(b)),
                      ("d", {"format": "exactmax/domain", "version": 1, **domain_to_json(box)})):
        (tmp_path / f"{name}.json").write_text(json.dumps(obj))
        out.append(str(tmp_path / f"{name}.json"))
    return out


def test_the_certificate_round_trips_and_validates(twin, tmp_path, capsys):
    a, b, E, _ = twin
    fa, fb, fd = _files(tmp_path, a, b, BOX)
    cert = str(tmp_path / "c.json")
    assert main(["equiv", fa, fb, "--domain", fd, "--epsilon", str(E),
                 "--cert", cert, "--no-search"]) == 0
    capsys.readouterr()
    doc = json.loads(open(cert).read())
    text = json.dumps(doc)
    assert '"extra"' in text and '"terms"' in text
    assert list(schemas.validator("pair-property-certificate").iter_errors(doc)) == []
    assert main(["check-cert", cert]) == 0
    capsys.readouterr()

    def first_extra(t):
        while "split" in t:
            t = t["ge"] if "extra" in json.dumps(t["ge"]) else t["lt"]
        return t["relaxed"]["extra"][0]["upper"]
    up = first_extra(doc["tree"])
    up["terms"][0][1] = str(Q(up["terms"][0][1]) + 1)
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    assert main(["check-cert", str(tmp_path / "bad.json")]) == 1


def test_top1_of_a_pruned_twin_by_delta_rows():
    """Top-1 (the same arg max sets): each forbidden conjunction "i maximal in A, k beats i in
    B" is excluded by a weighting of its rows (a_i - a_k + b_k - b_i: a difference of the two
    networks' margins); refuted where a class changes, at a point the kernel evaluates."""
    a = relu(3, [8, 8], 3, seed=5)
    a = dataclasses.replace(a, output=dataclasses.replace(a.output, b=(Q(1, 20), ZERO, ZERO)))
    b = pruned(a, 4, seed=6)
    small = Box((Q(-1, 20),) * 3, (Q(1, 20),) * 3)
    ans = decide_tolerance(a, b, small, None, run_search=False)
    assert ans.verdict == "proved" and ans.stats["builder"] == "differential"
    assert check_pair_property(a, b, small, None, ans.tree) == len(list(leaves(ans.tree)))
    large = Box((Q(-3, 8),) * 3, (Q(1, 8),) * 3)
    ans = decide_tolerance(a, b, large, None)
    assert ans.verdict == "refuted"
    ya, yb = evaluate_maxout(a, ans.x), evaluate_maxout(b, ans.x)
    top = lambda y: {i for i, v in enumerate(y) if v == max(y)}   # noqa: E731
    assert top(ya) != top(yb) and large.contains(ans.x)


def _phased(tree) -> list:
    """The relaxed leaves of the tree with a phase split (or a tightening) in a proof."""
    return [t for t in leaves(tree) if isinstance(t, Relaxed)
            and any(isinstance(p, Phase | Tighten) for p in t.proofs)]


def test_phase_splits_close_the_deep_cells_that_input_halving_would_need_hundreds_for(
        monkeypatch):
    """Epsilon 1% above a gap the search found: near the worst point a few units stay unstable
    however small the cell, so halving inputs alone needs hundreds of cells; a phase split on
    them (each branch exact for its unit) closes the cell in a few."""
    a = relu(3, [8, 8], 2, seed=5)
    b = pruned(a, 6, seed=6)
    low = decide_tolerance(a, b, BOX, Q(1, 10**9))
    assert low.verdict == "refuted"
    E = low.gap * Q(101, 100)
    ans = decide_tolerance(a, b, BOX, E, run_search=False)
    assert ans.verdict == "proved" and _phased(ans.tree)
    n = len(list(leaves(ans.tree)))
    assert check_pair_property(a, b, BOX, E, ans.tree) == n
    monkeypatch.setattr(differential, "PHASES", False)
    halved = decide_tolerance(a, b, BOX, E, run_search=False)
    assert halved.verdict == "proved" and not _phased(halved.tree)
    assert len(list(leaves(halved.tree))) > 10 * n


def test_an_image_sized_box_the_delta_rows_leave_open_is_closed_by_phase_splits():
    """More free inputs than INPUT_SPLITS: the box is not halved, so phase splits are tried on
    it at once (before them: unknown, "too many to halve")."""
    d = differential.INPUT_SPLITS + 4
    box = Box((-Q(1, 20),) * d, (Q(1, 20),) * d)
    a = relu(d, [8, 8], 2, seed=6)
    b = pruned(a, 10, seed=7)
    low = decide_tolerance(a, b, box, Q(1, 10**9))
    E = low.gap * Q(101, 100)
    ans = decide_tolerance(a, b, box, E, run_search=False)
    assert ans.verdict == "proved" and len(_phased(ans.tree)) == 1
    assert check_pair_property(a, b, box, E, ans.tree) == 1


def _first_phase(tree, edit):
    """The tree with ``edit`` applied to the first Phase found in a proof of a relaxed leaf."""
    done = [False]

    def proof(p):
        if isinstance(p, Tighten):
            return dataclasses.replace(p, then=proof(p.then))
        if isinstance(p, Phase) and not done[0]:
            done[0] = True
            return edit(p)
        return p

    def walk(t):
        if isinstance(t, Split):
            return dataclasses.replace(t, ge=walk(t.ge), lt=walk(t.lt))
        if isinstance(t, Relaxed):
            return dataclasses.replace(t, proofs=tuple(proof(p) for p in t.proofs))
        return t
    out = walk(tree)
    assert done[0]
    return out


def _scaled_first_farkas(p):
    if isinstance(p, Phase):
        return dataclasses.replace(p, branches=(_scaled_first_farkas(p.branches[0]),)
                                   + p.branches[1:])
    if isinstance(p, Tighten):
        return dataclasses.replace(p, then=_scaled_first_farkas(p.then))
    (i, y), *rest = p
    return ((i, y / 2), *rest)


@pytest.mark.parametrize("what", ["drop_branch", "other_node", "multiplier"])
def test_tampered_phase_splits_in_a_pair_certificate_are_rejected(what):
    d = differential.INPUT_SPLITS + 4
    box = Box((-Q(1, 20),) * d, (Q(1, 20),) * d)
    a = relu(d, [8, 8], 2, seed=6)
    b = pruned(a, 10, seed=7)
    E = decide_tolerance(a, b, box, Q(1, 10**9)).gap * Q(101, 100)
    tree = decide_tolerance(a, b, box, E, run_search=False).tree
    edit = {"drop_branch": lambda p: dataclasses.replace(p, branches=p.branches[:1]),
            "other_node": lambda p: dataclasses.replace(p, node=p.node + 1),
            "multiplier": _scaled_first_farkas}[what]
    with pytest.raises(CheckFailed):
        check_pair_property(a, b, box, E, _first_phase(tree, edit))


FIXED = Box((Q(-1, 2), Q(1, 4), Q(-1, 2), Q(-1, 8), Q(-1, 2)),
            (Q(1, 2), Q(1, 4), Q(1, 2), Q(-1, 8), Q(1, 2)))   # inputs 1 and 3 fixed


def test_a_box_with_fixed_inputs_is_decided_on_its_free_inputs(tmp_path, capsys):
    """Inputs with lower_i = upper_i are constants: the networks restricted to the free inputs
    (``kernel.pair.on_free_inputs``) equal them on the box, so the tree is over 3 inputs, not
    5; the certificate says so ("inputs": "free"), and the kernel checks it that way only."""
    a = relu(5, [8, 8], 2, seed=5)
    b = pruned(a, 6, seed=6)
    E = gap_on_grid(a, b, FIXED, 4) * Q(3, 2) + Q(1, 100)
    fa, fb, fd = _files(tmp_path, a, b, FIXED)
    cert = str(tmp_path / "c.json")
    assert main(["equiv", fa, fb, "--domain", fd, "--epsilon", str(E), "--cert", cert,
                 "--no-search", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "proved"
    doc = json.loads(open(cert).read())
    assert doc["inputs"] == "free"
    assert list(schemas.validator("pair-property-certificate").iter_errors(doc)) == []
    tree = read_pair(cert)[4]
    assert isinstance(tree, FreeInputs)
    assert check_pair_property(a, b, FIXED, E, tree) >= 1
    for t in leaves(tree.tree):   # every split is over the 3 free inputs
        assert not isinstance(t, Split) or len(t.a) == 3
    with pytest.raises(CheckFailed):   # the tree read over all 5 inputs
        check_pair_property(a, b, FIXED, E, tree.tree)
    with pytest.raises(CheckFailed):   # free inputs of a box only
        check_pair_property(a, b, FIXED.as_polyhedron(), E, tree)
    other = Box(FIXED.lower[:1] + (Q(1, 4) - 1,) + FIXED.lower[2:], FIXED.upper)   # 4 free
    with pytest.raises(CheckFailed):
        check_pair_property(a, b, other, E, tree)
    assert main(["check-cert", cert]) == 0
    capsys.readouterr()
    doc["inputs"] = "all"
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    assert main(["check-cert", str(tmp_path / "bad.json")]) != 0


def test_a_counterexample_on_the_free_inputs_is_a_point_of_the_whole_box(tmp_path, capsys):
    a = relu(5, [8, 8], 2, seed=5)
    b = pruned(a, 6, seed=6)
    g = gap_on_grid(a, b, FIXED, 4)
    fa, fb, fd = _files(tmp_path, a, b, FIXED)
    assert main(["equiv", fa, fb, "--domain", fd, "--epsilon", str(g - Q(1, 10**6)),
                 "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "refuted"
    x = tuple(Q(v) for v in out["counterexample"]["x"])
    assert FIXED.contains(x) and (x[1], x[3]) == (Q(1, 4), Q(-1, 8))
    ya, yb = evaluate_maxout(a, x), evaluate_maxout(b, x)
    assert max(abs(u - v) for u, v in zip(ya, yb)) > g - Q(1, 10**6)


def test_units_with_zero_or_constant_pre_activations_are_relaxed_like_the_others():
    """Degenerate weights: B's unit 3 of layer 1 has weights and bias 0 (max(0, 0): it is 0, though
    read on), unit 5 of layer 2 weights 0 and bias 1/4 (a constant): the pair still goes to the
    delta rows, and the kernel accepts the tree."""
    a = relu(3, [8, 8], 2, seed=5)
    b = pruned(a, 6, seed=6)

    def with_unit(net, l, u, w, bias):
        units = list(net.layers[l].units)
        units[u] = Unit((Piece(w, bias), units[u].pieces[1]))
        layers = list(net.layers)
        layers[l] = Layer(tuple(units))
        return dataclasses.replace(net, layers=tuple(layers))

    b = with_unit(b, 0, 3, (ZERO,) * 3, ZERO)
    b = with_unit(b, 1, 5, (ZERO,) * 8, Q(1, 4))
    assert differential.applies(a, b)
    E = gap_on_grid(a, b, BOX) * Q(3, 2) + Q(1, 100)
    ans = decide_tolerance(a, b, BOX, E, run_search=False)
    assert ans.verdict == "proved" and ans.stats["builder"] == "differential"
    assert check_pair_property(a, b, BOX, E, ans.tree) == len(list(leaves(ans.tree)))
