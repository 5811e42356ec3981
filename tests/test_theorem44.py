"""exactmax theorem44: the bound, the corrected bound, and the fold networks of docs/notes/regions.md,
whose linear regions are counted exactly (part A's count_regions, kernel-checked).

The table of docs/notes/regions.md is reproduced row by row: B from the formula (computed here
independently with Fractions as well), the count of the network we build, and whether B is
reached.  A row that falls short must say so, never pass."""

from __future__ import annotations

import json
from fractions import Fraction as F
from math import comb

import pytest

from exactmax.cli import main
from exactmax.construct.transformer import compile_transformer
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from exactmax.kernel.polyhedron import Box
from exactmax.kernel.rational import Q
from exactmax.regions.enumerate import count_regions
from exactmax.regions.fold import (best_split, build_fold_network, build_zigzag_43,
                                   check_general_position, fold_pieces, last_layer_lines)
from exactmax.regions.theorem44 import Theorem44Options, evaluate_bound, evaluate_theorem44


def formula(q, m, T, D):
    """B written out with Fractions, independently of exactmax."""
    n, L = m * T, D // 3
    return (F(n, q) * (T - 1) + 1) ** (q * (L - 1)) * sum(comb(n, j) * (T - 1) ** j
                                                          for j in range(q + 1))


# docs/notes/regions.md's table: q, (m, T, L), B, count of the best network built here, B reached?
TABLE = [
    (1, (1, 2, 2), 9, 9, True),
    (1, (2, 2, 2), 25, 25, True),
    (1, (1, 2, 3), 27, 27, True),
    (1, (2, 3, 2), 169, 169, True),
    (2, (1, 2, 2), 16, 16, True),
    (2, (2, 2, 2), 99, 99, True),
    (2, (1, 2, 3), 64, 64, True),
    (1, (1, 3, 2), 49, 43, False),     # special zig-zag; 43 is the maximum of this shape
    (1, (1, 3, 3), 343, 252, False),   # fold; the maximum is at most 301
    (2, (1, 3, 2), 304, 190, False),   # outside the hypotheses; docs/notes/regions.md's local search: 245
]
SLOW = [(1, (2, 3, 3), 2197, 2197, True)]


@pytest.mark.parametrize("q,mTL,B,count,reached", TABLE + SLOW)
def test_bound_matches_the_formula_and_the_table(q, mTL, B, count, reached):
    m, T, L = mTL
    assert evaluate_bound(m, T, q, 3 * L) == Q(B) == Q(formula(q, m, T, 3 * L).numerator,
                                                      formula(q, m, T, 3 * L).denominator)


@pytest.mark.parametrize("q,mTL,B,count,reached",
                         TABLE + [pytest.param(*r, marks=pytest.mark.slow) for r in SLOW])
def test_table_row_is_reproduced(q, mTL, B, count, reached):
    m, T, L = mTL
    rep = evaluate_theorem44(m, T, q, 3 * L, Theorem44Options(transformer=False))
    assert rep["bound"] == B and rep["count"] == count and rep["reached"] is reached
    for net in rep["networks"]:
        c = net["maxout"]
        # what the construction is designed for is what the exact count finds
        assert c["linear_regions"] == c["activation_regions"] == net["designed_count"]
    if not reached:
        assert rep["status"] in ("formula unreachable", "outside hypotheses")
        assert rep["why"]


@pytest.mark.parametrize("q,m,T,L", [(1, 1, 2, 2), (2, 1, 2, 2), (1, 1, 3, 2)])
def test_transformer_has_the_same_count(q, m, T, L):
    rep = evaluate_theorem44(m, T, q, 3 * L)
    for net in rep["networks"]:
        assert net["transformer"]["linear_regions"] == net["maxout"]["linear_regions"]
        assert net["transformer"]["tokens"] == T and net["transformer"]["sublayers"] == 3 * L


def test_worked_example_of_regions_md():
    f = build_fold_network(1, 2, 2, 2)
    first, last = f.net.layers
    assert [[(p.w, p.b) for p in u.pieces] for u in first.units] == \
        [[((-3,), 0), ((3,), -2)], [((0,), 0), ((6,), -4)]]
    assert [u.pieces[1].b for u in last.units] == [Q(-23, 48), Q(-25, 48)]


def test_unit_box_holds_every_region():
    # enlarging [0, 1]^q to [-1, 2]^q changes no count (regions continue outward)
    for q, n, k, L in ((1, 2, 2, 2), (1, 3, 3, 2), (2, 2, 2, 2)):
        f = build_fold_network(q, n, k, L)
        big = Box((Q(-1),) * q, (Q(2),) * q)
        assert count_regions(f.net, big).linear_regions == f.expected
    z = build_zigzag_43()
    assert count_regions(z.net, Box((Q(-1),), (Q(2),))).linear_regions == 43


def test_a_slope_zero_last_layer_loses_regions():
    # docs/notes/regions.md: a slope-0 first piece makes mirrored fold cells share a map (8, not 9)
    f = build_fold_network(1, 2, 2, 2)
    first, last = f.net.layers
    flat = Layer(tuple(Unit((Piece(tuple(0 * v for v in u.pieces[0].w), Q(0)),
                             Piece(tuple(v / 2 for v in u.pieces[1].w), u.pieces[1].b)))
                       for u in last.units))
    net = MaxoutNetwork(1, (first, flat), None, f.domain)
    r = count_regions(net, f.domain)
    assert r.activation_regions == 9 and r.linear_regions == 8


def test_fold_pieces_and_best_split():
    assert [fold_pieces(p, 2) for p in (1, 2, 3)] == [2, 3, 4]
    assert [fold_pieces(p, 3) for p in (1, 2, 3, 4)] == [2, 5, 6, 9]
    assert best_split(4, 2, 2) == (2, 2)
    assert sorted(best_split(3, 2, 3)) == [1, 2]
    # exhaustive check of the dynamic programme on small cases
    from itertools import product
    for n in range(1, 8):
        for q in range(1, min(n, 3) + 1):
            for k in (2, 3, 4):
                best = max((s for s in product(range(1, n + 1), repeat=q) if sum(s) == n),
                           key=lambda s: _prod(fold_pieces(p, k) for p in s))
                got = best_split(n, q, k)
                assert sum(got) == n and _prod(fold_pieces(p, k) for p in got) == \
                    _prod(fold_pieces(p, k) for p in best)
    with pytest.raises(ValueError):
        best_split(1, 2, 2)


def _prod(xs):
    out = 1
    for x in xs:
        out *= x
    return out


def test_general_position_check_rejects_bad_arrangements():
    check_general_position(last_layer_lines(4, 2, 2))
    w = (Q(1), Q(1))
    with pytest.raises(ValueError, match="parallel"):
        check_general_position([(w, [Q(1, 2)]), (w, [Q(3, 4)])])
    with pytest.raises(ValueError, match="three lines"):
        check_general_position([((Q(1), Q(0)), [Q(1, 2)]), ((Q(0), Q(1)), [Q(1, 2)]),
                                ((Q(1), Q(1)), [Q(1)])])
    with pytest.raises(ValueError, match="outside"):
        check_general_position([((Q(1), Q(0)), [Q(1, 2)]), ((Q(0), Q(1)), [Q(2)])])
    with pytest.raises(ValueError, match="leave"):
        check_general_position([((Q(1),), [Q(1, 2), Q(1, 2)])])


# ---------------------------------------------------------------------------------- the CLI

def test_cli_reached_and_unreachable(capsys):
    assert main(["theorem44", "--m", "1", "--T", "2", "--q", "1", "--D", "6", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["bound"] == 9 and rep["count"] == 9 and rep["reached"] is True
    assert main(["theorem44", "--m", "1", "--T", "3", "--q", "1", "--D", "6"]) == 3
    out = capsys.readouterr().out
    assert "NOT REACHED: best count 43 < B = 49" in out and "cannot be reached" in out
    assert "REACHED:" not in out.replace("NOT REACHED:", "")


def test_cli_outside_hypotheses(capsys):
    assert main(["theorem44", "--m", "1", "--T", "2", "--q", "3", "--D", "6", "--json"]) == 3
    rep = json.loads(capsys.readouterr().out)
    assert rep["bound"] == "500/27" and rep["status"] == "outside hypotheses"
    assert rep["reached"] is None and "does not divide" in rep["why"]
    assert main(["theorem44", "--m", "1", "--T", "2", "--q", "1", "--D", "2", "--json"]) == 3
    rep = json.loads(capsys.readouterr().out)
    assert rep["status"] == "outside hypotheses" and "D < 3" in rep["why"]


def test_cli_bad_input_and_write(tmp_path, capsys):
    assert main(["theorem44", "--m", "1", "--T", "1", "--q", "1", "--D", "6"]) == 2
    assert "--T: expected an integer >= 2" in capsys.readouterr().err
    out = tmp_path / "fold.json"
    assert main(["theorem44", "--m", "1", "--T", "2", "--q", "2", "--D", "6", "--no-count",
                 "--write", str(out)]) == 3     # not counted: nothing is claimed reached
    assert "NOT COUNTED" in capsys.readouterr().out
    assert main(["regions", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["linear_regions"] == 16


@pytest.mark.parametrize("n, k", [(6, 3), (8, 4)])
def test_a_triple_point_of_the_recipe_is_shifted_away(n, k):
    """docs/notes/regions.md's q = 2 offsets put three lines through one point for n = 6, 8; the built
    last layer is in general position anyway, and one layer of it cuts [0, 1]^2 into exactly
    S(n, 2, k) regions."""
    from exactmax.regions.fold import binomial_sum, check_general_position, last_layer_lines
    with pytest.raises(ValueError, match="three lines meet"):
        check_general_position(last_layer_lines(n, 2, k))
    f = build_fold_network(2, n, k, 1)
    assert "shifted" in f.net.meta["description"]
    rc = count_regions(f.net, f.domain)
    assert rc.linear_regions == rc.activation_regions == binomial_sum(n, 2, k) == f.expected


def test_an_odd_share_per_coordinate_is_explained_when_b_is_not_reached():
    """q = 2, m = 2, T = 3: mT/q = 3 is odd, so the fold design gives the corrected bound
    3285 < B = 3577; the report says why instead of a bare "not reached"."""
    from dataclasses import replace
    from exactmax.regions.theorem44 import Theorem44Options, evaluate_theorem44
    r = evaluate_theorem44(2, 3, 2, 6, replace(Theorem44Options(), count=False))
    assert (r["bound"], r["corrected_bound"]) == (3577, 3285)
    assert "mT/q = 3 is odd" in r["why"] and "[4, 2]" in r["why"] and "9 * 5" in r["why"]
    assert r["networks"] and r["networks"][0]["designed_count"] == 3285


def test_parity_matters_for_unreachability():
    """q = 1, T = 3, L = 2: mT = 6 even reaches B = 169 with no 'cannot be reached' note;
    mT = 3 odd is unreachable."""
    from exactmax.regions.theorem44 import evaluate_theorem44
    even = evaluate_theorem44(2, 3, 1, 6)
    assert even["status"] == "reached" and even["count"] == 169
    assert not even["why"] or "cannot be reached" not in even["why"]
    odd = evaluate_theorem44(1, 3, 1, 6)
    assert odd["status"] == "formula unreachable" and "cannot be reached" in odd["why"]


def test_a_transformer_that_disagrees_is_reported_and_the_smaller_count_used(monkeypatch):
    """The Maxout network and its Transformer must have the same count; if a (broken)
    count said otherwise, the report says so and never claims the larger count."""
    from exactmax.kernel.maxout import MaxoutNetwork
    from exactmax.regions import theorem44 as t44
    real = t44.count_of

    def fake(model, domain, *progress):
        r = real(model, domain)
        if not isinstance(model, MaxoutNetwork):
            r["linear_regions"] -= 1
        return r
    monkeypatch.setattr(t44, "count_of", fake)
    r = t44.evaluate_theorem44(1, 2, 1, 6)
    assert r["count"] == 8 and r["status"] == "not reached"
    assert "should agree" in r["why"]


def test_small_networks_are_recounted_on_an_enlarged_box(monkeypatch):
    """Up to ENLARGED_UP_TO designed regions the Maxout network is counted on [-1, 2]^q as
    well; the same count is reported, a different one is a note saying the unit box does not
    hold every region."""
    from exactmax.regions import theorem44 as t44
    r = t44.evaluate_theorem44(2, 2, 2, 6)
    e = r["networks"][0]["maxout_enlarged"]
    assert e["domain"] == "[-1, 2]^2" and e["linear_regions"] == 99 and r["status"] == "reached"
    real = t44.count_of

    def fake(model, domain, *progress):
        c = real(model, domain)
        if domain.lower[0] < 0:
            c["linear_regions"] += 1
        return c
    monkeypatch.setattr(t44, "count_of", fake)
    r = t44.evaluate_theorem44(1, 2, 1, 6, t44.Theorem44Options(transformer=False))
    assert "does not hold every region" in r["why"]


@pytest.mark.parametrize("n, k", [(3, 2), (4, 2), (3, 3), (6, 2)])
def test_q3_last_layers_are_in_general_position_and_cut_s_regions(n, k):
    """Beyond docs/notes/regions.md: one generic layer on [0, 1]^3 has exactly S(n, 3, k) regions."""
    from exactmax.regions.fold import binomial_sum, check_general_position, last_layer_lines
    check_general_position(last_layer_lines(n, 3, k))
    f = build_fold_network(3, n, k, 1)
    rc = count_regions(f.net, f.domain)
    assert rc.linear_regions == rc.activation_regions == binomial_sum(n, 3, k) == f.expected


def test_q3_general_position_check_rejects_a_degenerate_arrangement():
    from exactmax.regions.fold import check_general_position
    half, one = Q(1, 2), Q(1)
    lines = [((one, Q(0), Q(0)), [half]), ((Q(0), one, Q(0)), [half]),
             ((Q(0), Q(0), one), [half]), ((one, one, one), [Q(3, 2)])]  # 4 through the centre
    with pytest.raises(ValueError, match="4 hyperplanes meet"):
        check_general_position(lines)
    with pytest.raises(ValueError, match="parallel"):
        check_general_position([((one, one, Q(0)), [half]), ((Q(2), Q(2), Q(0)), [one])])


def test_theorem44_for_q3_reaches_b():
    from exactmax.regions.theorem44 import Theorem44Options, evaluate_theorem44
    r = evaluate_theorem44(3, 2, 3, 6, Theorem44Options(transformer=False))
    assert (r["bound"], r["count"], r["status"]) == (1134, 1134, "reached")
