"""The kernel's property check in pieces (#32): ``cert.cut`` opens the splits that state no
choices, and checking every piece from its cell's rows is checking the tree: the same leaves,
accepted or rejected alike, in this process, on a process pool or in processes forked from this
one (``check_map``)."""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses

import pytest
from test_property import NET, _deep_relu_net, _leaves, _replace, _tamperings, vnn

from exactmax.io.vnnlib import read_vnnlib
from exactmax.kernel import certificate as cert
from exactmax.kernel.certificate import Split
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.program import program_of_maxout
from exactmax.kernel.property import PIECES, Relaxed, check_case, check_property, cut
from exactmax.engine.parallel import check_map, fork_map
from exactmax.kernel.rational import Q
from exactmax.prove.property import decide_property


@pytest.fixture(scope="module")
def relaxed(tmp_path_factory):
    """A certificate of relaxed leaves with many splits: a 3-layer ReLU network, its output
    bounded on the box."""
    d = tmp_path_factory.mktemp("pieces")
    net = _deep_relu_net(7)
    head = "".join(
        f"(declare-const X_{i} Real)\n(assert (>= X_{i} -1)) (assert (<= X_{i} 1))\n"
        for i in range(3)
    )
    p = d / "p.vnnlib"
    p.write_text(head + "(declare-const Y_0 Real)\n(assert (>= Y_0 8.2))\n")
    prop = read_vnnlib(str(p))
    a = decide_property(net, prop, timeout_s=120, search=False)
    assert a.result == "unsat", a.reason
    tree = a.trees[0]
    assert sum(1 for _ in _leaves(tree)) >= 4, "want a tree with several splits"
    return net, prop, tree


@pytest.fixture(scope="module")
def chosen(tmp_path_factory):
    """A certificate whose splits state choices (the Max-choice builder)."""
    prop = read_vnnlib(vnn(tmp_path_factory.mktemp("chosen"), "(assert (> Y_0 2))"))
    a = decide_property(NET, prop, timeout_s=30, search=False, relaxed=False)
    assert a.result == "unsat", a.reason
    return NET, prop, a.trees[0]


def test_the_pieces_cover_the_leaves_once(relaxed):
    net, prop, tree = relaxed
    case = prop.cases[0]
    for parts in (1, 2, 3, 8, PIECES, 10_000):
        pieces = cut(tree, case.inputs, parts, "root")
        assert len(pieces) <= max(parts, 1) or all(not isinstance(t, Split) for t, _, _ in pieces)
        wheres = [w for _, _, w in pieces]
        assert len(set(wheres)) == len(wheres)
        leaves = sorted(
            at
            for t, rows, w in pieces
            for _, _, _, _, at in cert.walk(t, case.inputs, (), (), where=w, rows=rows)
        )
        whole = sorted(at for _, _, _, _, at in cert.walk(tree, case.inputs, (), (), where="root"))
        assert leaves == whole


def test_in_pieces_the_kernel_accepts_what_it_accepts_whole(relaxed, chosen):
    for net, prop, tree in (relaxed, chosen):
        whole = check_property(net, prop.cases, (tree,))
        assert check_property(net, prop.cases, (tree,), map) == whole
        with cf.ProcessPoolExecutor(2) as pool:
            assert check_property(net, prop.cases, (tree,), pool.map) == whole
            run = check_map(pool)  # on Linux: processes forked from this one
            assert check_property(net, prop.cases, (tree,), run) == whole


def test_the_forked_map_is_map_in_order_and_raises_what_fn_raises():
    assert fork_map(2, pow, range(7), [2] * 7) == [k * k for k in range(7)]
    assert fork_map(3, abs, []) == []
    with pytest.raises(CheckFailed, match="piece 3"):
        fork_map(2, _fails_at_3, range(6))


def _fails_at_3(k):
    if k == 3:
        raise CheckFailed(f"piece {k}")
    return k


def test_a_time_limit_ends_the_forked_map_and_its_processes():
    """A check in forked processes that would take a minute ends at the time limit, within a
    second, and leaves no process behind."""
    import multiprocessing as mp
    import time

    from exactmax import interruption

    t0 = time.monotonic()
    with pytest.raises(interruption.TimeLimit):
        with interruption.time_limit(time.monotonic() + 0.5, grace=0.1):
            fork_map(2, time.sleep, [60] * 4)
    assert time.monotonic() - t0 < 2.0
    time.sleep(0.2)
    assert mp.active_children() == []


def test_a_split_with_choices_is_not_opened(chosen):
    net, prop, tree = chosen
    pieces = cut(tree, prop.cases[0].inputs, 10_000, "root")
    assert all(not isinstance(t, Split) or t.choices for t, _, _ in pieces)
    assert any(isinstance(t, Split) and t.choices for t, _, _ in pieces)


def _relaxed_tamperings(tree):
    """The tree wrong by one number in its deepest relaxed leaf: a multiplier of the output
    proof doubled, a multiplier of an upper function's proof doubled, an output proof's
    multiplier moved to another row."""
    path, leaf = max(
        ((p, lf) for p, lf in _leaves(tree) if isinstance(lf, Relaxed)), key=lambda t: len(t[0])
    )
    (i, y), *rest = leaf.proofs[0]
    out = [
        _replace(tree, path, dataclasses.replace(leaf, proofs=(((i, y * 2), *rest),))),
        _replace(tree, path, dataclasses.replace(leaf, proofs=(((i + 1, y), *rest),))),
    ]
    k, j = next((k, j) for k, u in enumerate(leaf.uppers) for j, pr in enumerate(u.proofs) if pr)
    u = leaf.uppers[k]
    (r, w), *more = u.proofs[j]
    proofs = u.proofs[:j] + (((r, w * 2), *more),) + u.proofs[j + 1 :]
    bad = dataclasses.replace(u, proofs=proofs)
    uppers = leaf.uppers[:k] + (bad,) + leaf.uppers[k + 1 :]
    out.append(_replace(tree, path, dataclasses.replace(leaf, uppers=uppers)))
    return out


def _verdict(net, prop, tree, run):
    try:
        return check_property(net, prop.cases, (tree,), run)
    except CheckFailed:
        return "rejected"


def test_in_pieces_the_kernel_rejects_what_it_rejects_whole(relaxed, chosen):
    """Trees wrong by one number: in pieces, on a process pool, the same verdict as whole
    (rejected, but for one of the Max-choice tree's that a one-conjunction case accepts)."""
    wrong = [(relaxed, t) for t in _relaxed_tamperings(relaxed[2])]
    wrong += [(chosen, t) for t in _tamperings(chosen[2])]
    verdicts = []
    with cf.ProcessPoolExecutor(2) as pool:
        for (net, prop, _), t in wrong:
            whole = _verdict(net, prop, t, None)
            assert _verdict(net, prop, t, map) == whole == _verdict(net, prop, t, pool.map)
            assert _verdict(net, prop, t, check_map(pool)) == whole  # forked processes
            verdicts.append(whole)
    assert verdicts.count("rejected") >= len(wrong) - 1 and verdicts[:3] == ["rejected"] * 3


def test_a_split_of_the_wrong_dimension_is_refused_when_cut(relaxed):
    net, prop, tree = relaxed
    assert isinstance(tree, Split)
    bad = dataclasses.replace(tree, a=tree.a + (Q(1),))
    with pytest.raises(CheckFailed, match="wrong dimension"):
        cut(bad, prop.cases[0].inputs, 4, "root")
    p = program_of_maxout(net)
    with pytest.raises(CheckFailed, match="wrong dimension"):
        check_case(p, prop.cases[0], bad, run=map)
