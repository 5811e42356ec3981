"""Exact region enumeration (exactmax/regions) and its kernel check (kernel/regions.py).

The counts are compared with an independent method: a dense exact grid of rational points,
each with its local affine map from a plain forward pass (written here, not the kernel's
program), and linear regions = connected components of grid points with equal maps.
"""

from __future__ import annotations

import dataclasses
import random
from fractions import Fraction as F

import pytest

from exactmax.construct.transformer import compile_transformer
from exactmax.io.numbers import to_fraction
from exactmax.kernel.affine import Affine
from exactmax.kernel.certificate import Row, Split
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from exactmax.kernel.polyhedron import Box, Polyhedron
from exactmax.kernel.rational import ONE, ZERO, Q
from exactmax.kernel.regions import Region, check_adjacent, check_region_count, check_regions
from exactmax.regions.enumerate import DomainProblem, TooManyCells, count_regions, program_of
from exactmax.regions.sawtooth import sawtooth_network, sawtooth_value
from exactmax.vectorized.scaled import MaxoutEvaluator

# ----------------------------------------------------------------- random networks

def random_network(seed: int, widths=(3, 2), rank=3, dim=2) -> MaxoutNetwork:
    rng = random.Random(seed)

    def num():  # non-zero, so every unit is in the outputs' cone (activation patterns
        # are taken over the nodes the outputs depend on)
        return Q(rng.choice([n for n in range(-6, 7) if n]), rng.choice((1, 2, 3, 4)))

    layers, prev = [], dim
    for w in widths:
        units = []
        for _ in range(w):
            k = rng.randint(2, rank)
            units.append(Unit(tuple(Piece(tuple(num() for _ in range(prev)), num())
                                    for _ in range(k))))
        layers.append(Layer(tuple(units)))
        prev = w
    out = Affine((tuple(num() for _ in range(prev)),), (num(),), prev)
    box = Box((-ONE,) * dim, (ONE,) * dim)
    return MaxoutNetwork(dim, tuple(layers), out, box)


def local_map(net: MaxoutNetwork, x):
    """(gradient, offset) of the network's output at x by a forward pass with argmax
    tracking, in Fractions; None when two maximal pieces with different maps tie at x."""
    d = net.input_dim
    h = [(tuple(F(int(i == j)) for j in range(d)), F(0)) for i in range(d)]
    vals = list(x)
    for layer in net.layers:
        new_h, new_v = [], []
        for unit in layer.units:
            cands = []
            for p in unit.pieces:
                w = [to_fraction(v) for v in p.w]
                g = tuple(sum(wi * hg[0][t] for wi, hg in zip(w, h)) for t in range(d))
                c = sum(wi * hg[1] for wi, hg in zip(w, h)) + to_fraction(p.b)
                cands.append((sum(wi * v for wi, v in zip(w, vals)) + to_fraction(p.b), g, c))
            top = max(v for v, _, _ in cands)
            winners = {(g, c) for v, g, c in cands if v == top}
            if len(winners) > 1:
                return None
            (g, c), = winners
            new_h.append((g, c))
            new_v.append(top)
        h, vals = new_h, new_v
    A = net.output
    row = [to_fraction(v) for v in A.W[0]]
    g = tuple(sum(r * hg[0][t] for r, hg in zip(row, h)) for t in range(d))
    c = sum(r * hg[1] for r, hg in zip(row, h)) + to_fraction(A.b[0])
    return g, c


def grid_regions(net: MaxoutNetwork, n: int):
    """(components of equal-map 8-neighbours, set of maps, the grid) on [-1, 1]^2."""
    pts = {}
    for i in range(n):
        for j in range(n):
            x = (F(2 * i + 1, n) - 1 + F(1, 7919 * n), F(2 * j + 1, n) - 1 - F(1, 6007 * n))
            pts[i, j] = (x, local_map(net, x))
    seen, comps = set(), 0
    for start, (_, m) in pts.items():
        if m is None or start in seen:
            continue
        comps += 1
        todo = [start]
        seen.add(start)
        while todo:
            i, j = todo.pop()
            for nb in ((i + a, j + b) for a in (-1, 0, 1) for b in (-1, 0, 1)):
                if nb in pts and nb not in seen and pts[nb][1] == m:
                    seen.add(nb)
                    todo.append(nb)
    return comps, {m for _, m in pts.values() if m is not None}, pts


def _clip(poly, a, c):
    """The part of the convex polygon ``poly`` where a . x + c >= 0 (Fractions)."""
    out = []
    for n, p in enumerate(poly):
        q = poly[(n + 1) % len(poly)]
        vp, vq = a[0] * p[0] + a[1] * p[1] + c, a[0] * q[0] + a[1] * q[1] + c
        if vp >= 0:
            out.append(p)
        if (vp > 0 > vq) or (vp < 0 < vq):
            t = vp / (vp - vq)
            out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
    return [p for n, p in enumerate(out) if p != out[n - 1]] if len(out) > 1 else out


def _area2(poly):
    return sum(p[0] * q[1] - q[0] * p[1] for p, q in zip(poly, poly[1:] + poly[:1]))


def polygon_regions(net: MaxoutNetwork):
    """(activation regions, linear regions) of a 2-D network on its box, by a second exact
    method: the box polygon is cut unit by unit into the polygons where each piece is the
    (first) maximal one, keeping those of positive area; then same-map polygons sharing an
    edge segment of positive length are joined."""
    lo, hi = [to_fraction(v) for v in net.domain.lower], [to_fraction(v) for v in net.domain.upper]
    box = [(lo[0], lo[1]), (hi[0], lo[1]), (hi[0], hi[1]), (lo[0], hi[1])]
    cells = [(box, [((F(1), F(0)), F(0)), ((F(0), F(1)), F(0))])]
    for layer in net.layers:
        outs = [(poly, h, []) for poly, h in cells]
        for unit in layer.units:
            new = []
            for poly, h, acc in outs:
                maps = []
                for p in unit.pieces:
                    w = [to_fraction(v) for v in p.w]
                    maps.append((tuple(sum(wi * g[0][t] for wi, g in zip(w, h)) for t in (0, 1)),
                                 sum(wi * g[1] for wi, g in zip(w, h)) + to_fraction(p.b)))
                for j, mj in enumerate(maps):
                    if mj in maps[:j]:
                        continue
                    part = poly
                    for mi in maps:
                        if mi != mj and part:
                            part = _clip(part, (mj[0][0] - mi[0][0], mj[0][1] - mi[0][1]),
                                         mj[1] - mi[1])
                    if len(part) >= 3 and _area2(part) != 0:
                        new.append((part, h, acc + [mj]))
            outs = new
        cells = [(poly, acc) for poly, _, acc in outs]
    row = [to_fraction(v) for v in net.output.W[0]]
    final = [(poly, (tuple(sum(r * g[0][t] for r, g in zip(row, h)) for t in (0, 1)),
                     sum(r * g[1] for r, g in zip(row, h)) + to_fraction(net.output.b[0])))
             for poly, h in cells]
    parent = list(range(len(final)))

    def find(i):
        while parent[i] != i:
            i = parent[i]
        return i

    def share_edge(P, R):
        for p1, p2 in zip(P, P[1:] + P[:1]):
            d = (p2[0] - p1[0], p2[1] - p1[1])
            for q1, q2 in zip(R, R[1:] + R[:1]):
                cross = [d[0] * (q[1] - p1[1]) - d[1] * (q[0] - p1[0]) for q in (q1, q2)]
                if any(cross):
                    continue
                t = sorted(d[0] * (q[0] - p1[0]) + d[1] * (q[1] - p1[1]) for q in (q1, q2))
                if min(t[1], d[0] ** 2 + d[1] ** 2) > max(t[0], 0):
                    return True
        return False

    for i in range(len(final)):
        for j in range(i):
            if final[i][1] == final[j][1] and find(i) != find(j) and \
                    share_edge(final[i][0], final[j][0]):
                parent[find(i)] = find(j)
    return len(final), sum(1 for i in range(len(final)) if find(i) == i)


def _cell_of(rc, x):
    """The cell whose closure... here: whose rows hold at x (exactly; x off every boundary)."""
    hits = [c for c in rc.cells
            if all(sum((a * v for a, v in zip(r.a, x)), r.c) > 0 for r in c.rows)]
    assert len(hits) <= 1
    return hits[0] if hits else None


def _fmap(cell):
    return tuple(to_fraction(v) for v in cell.W[0]), to_fraction(cell.b[0])


# ------------------------------------------------------------------ counts agree

def test_counts_agree_with_polygon_refinement():
    """Random 2-D Maxout networks (rank 2..3, widths 3, 2): activation and linear regions
    from the enumeration equal those of the independent exact polygon refinement."""
    for seed in range(30):
        net = random_network(seed)
        rc = count_regions(net, net.domain)
        assert (rc.activation_regions, rc.linear_regions) == polygon_regions(net), seed
        assert rc.distinct_maps <= rc.linear_regions == rc.merge_components <= len(rc.cells)


def test_relu_networks_agree_with_polygon_refinement():
    for seed in range(10):
        net = random_network(100 + seed, widths=(4,), rank=2)
        rc = count_regions(net, net.domain)
        assert (rc.activation_regions, rc.linear_regions) == polygon_regions(net), seed


def test_grid_sample_lies_in_cells_with_its_map():
    """A dense exact grid: every grid point's map (a plain forward pass) is the map of the
    exact cell containing it, and the grid sees no map the enumeration does not have."""
    for seed in range(4):
        net = random_network(seed)
        rc = count_regions(net, net.domain)
        _, maps, pts = grid_regions(net, 20)
        assert maps <= {_fmap(c) for c in rc.cells}
        for x, m in pts.values():
            cell = _cell_of(rc, tuple(Q(v.numerator, v.denominator) for v in x))
            if m is not None and cell is not None:
                assert _fmap(cell) == m


@pytest.mark.parametrize("k,D", [(2, 2), (3, 1), (3, 2)])
def test_grid_components_on_sawtooth(k, D):
    """The sawtooth's regions are squares of side k^-D: a grid with 2 points per side
    resolves them, and its equal-map components are the exact count k^(2D)."""
    net = sawtooth_network(k, 2, D)
    box = Box((-ONE, -ONE), (ONE, ONE))   # grid_regions samples [-1, 1]^2: shift the input
    shifted = MaxoutNetwork(2, (Layer(tuple(Unit(tuple(
        Piece(tuple(w / 2 for w in p.w), p.b + sum(p.w, ZERO) / 2) for p in u.pieces))
        for u in net.layers[0].units)),) + net.layers[1:], net.output, box)
    comps, maps, _ = grid_regions(shifted, 2 * k ** D)
    rc = count_regions(shifted, box)
    assert comps == rc.linear_regions == k ** (2 * D)
    assert maps == {_fmap(c) for c in rc.cells}


# ------------------------------------------------------------------ sawtooth

SAWTOOTH = [(k, d, D) for d in (1, 2) for k in (2, 3, 4) for D in (1, 2, 3)]
SLOW = {(3, 2, 3), (4, 2, 3), (4, 2, 2)}


@pytest.mark.parametrize("k,d,D", [pytest.param(*c, marks=pytest.mark.slow) if c in SLOW
                                   else c for c in SAWTOOTH])
def test_sawtooth_has_k_to_the_dD_regions(k, d, D):
    net = sawtooth_network(k, d, D)
    assert all(len(u.pieces) == k for layer in net.layers for u in layer.units)
    rc = count_regions(net, net.domain)
    assert rc.linear_regions == rc.activation_regions == len(rc.cells) == k ** (d * D)
    if d == 1:  # all maps distinct: the kernel's lower bound alone proves the count
        assert rc.distinct_maps == k ** D


@pytest.mark.parametrize("k,D", [(2, 3), (3, 2), (4, 2)])
def test_sawtooth_computes_iterated_teeth(k, D):
    net = sawtooth_network(k, 2, D)
    ev = MaxoutEvaluator(net)
    rng = random.Random(k * 10 + D)
    for _ in range(20):
        x = (Q(rng.randint(0, 97), 97), Q(rng.randint(0, 89), 89))
        assert ev.evaluate(x)[0] == sawtooth_value(k, D, x[0]) + sawtooth_value(k, D, x[1])


@pytest.mark.parametrize("k,d,D", [(2, 1, 3), (3, 2, 1), (3, 2, 2),
                                   pytest.param(4, 2, 2, marks=pytest.mark.slow),
                                   pytest.param(3, 2, 3, marks=pytest.mark.slow)])
def test_sawtooth_transformer_count(k, d, D):
    net = sawtooth_network(k, d, D)
    tf = compile_transformer(net).transformer
    assert tf.n_tokens == k
    rc = count_regions(tf, net.domain)
    assert rc.linear_regions == rc.activation_regions == k ** (d * D)


def test_transformer_count_equals_maxout_count():
    for seed in range(6):
        net = random_network(seed)
        a = count_regions(net, net.domain)
        b = count_regions(compile_transformer(net).transformer, net.domain)
        assert b.linear_regions == a.linear_regions, seed
        assert {(c.W, c.b) for c in b.cells} == {(c.W, c.b) for c in a.cells}


# ------------------------------------------------------------------ domains and limits

def test_bad_domains_are_refused():
    net = random_network(0)
    x0 = ((ONE, ZERO),)
    with pytest.raises(DomainProblem, match="unbounded"):
        count_regions(net, Polyhedron(x0, (ONE,), 2))
    with pytest.raises(DomainProblem, match="empty"):
        count_regions(net, Box((ONE, ZERO), (ZERO, ONE)))
    with pytest.raises(DomainProblem, match="empty"):
        count_regions(net, Polyhedron(((ONE, ZERO), (-ONE, ZERO)), (ZERO, -ONE), 2))
    flat = Polyhedron(((ONE, ZERO), (-ONE, ZERO), (ZERO, ONE), (ZERO, -ONE)),
                      (ZERO, ZERO, ONE, ONE), 2)
    with pytest.raises(DomainProblem, match="interior"):
        count_regions(net, flat)


def test_polyhedron_domain():
    """A triangle: counts agree with the box count restricted by hand (cells clipped)."""
    net = sawtooth_network(2, 2, 1)
    tri = Polyhedron(((-ONE, ZERO), (ZERO, -ONE), (ONE, ONE)), (ZERO, ZERO, ONE), 2)
    rc = count_regions(net, tri)
    # S_2(x) + S_2(y) on {x, y >= 0, x + y <= 1}: the squares meeting the open triangle
    assert rc.linear_regions == 3


def test_max_cells():
    net = sawtooth_network(3, 2, 2)
    with pytest.raises(TooManyCells):
        count_regions(net, net.domain, max_cells=10)


# ------------------------------------------------------------------ the kernel's checks

def _leaves(tree):
    out, todo = [], [tree]
    while todo:
        t = todo.pop()
        if isinstance(t, Split):
            todo += [t.lt, t.ge]
        else:
            out.append(t)
    return out


def _replace(tree, old, new):
    if tree is old:
        return new
    if isinstance(tree, Split):
        return dataclasses.replace(tree, ge=_replace(tree.ge, old, new),
                                   lt=_replace(tree.lt, old, new))
    return tree


def _setup():
    net = random_network(2)
    rc = count_regions(net, net.domain)
    return program_of(net), net.domain.as_polyhedron(), rc


def test_kernel_accepts_and_recounts():
    prog, P, rc = _setup()
    act, low, up = check_region_count(prog, P, rc.certificate.tree, rc.certificate.merges)
    assert (act, up) == (rc.activation_regions, rc.linear_regions)
    assert low == rc.distinct_maps


def test_kernel_rejects_a_wrong_map():
    prog, P, rc = _setup()
    leaf = _leaves(rc.certificate.tree)[3]
    bad = dataclasses.replace(leaf, b=(leaf.b[0] + Q(1, 1000),))
    with pytest.raises(CheckFailed, match="affine map"):
        check_regions(prog, P, _replace(rc.certificate.tree, leaf, bad))
    W = ((leaf.W[0][0], leaf.W[0][1] + 1),)
    with pytest.raises(CheckFailed, match="affine map"):
        check_regions(prog, P, _replace(rc.certificate.tree, leaf,
                                        dataclasses.replace(leaf, W=W)))


def test_kernel_rejects_a_wrong_choice():
    prog, P, rc = _setup()
    tree = rc.certificate.tree
    rejected = 0
    for leaf in _leaves(tree):
        for n, (side, node, ch) in enumerate(leaf.choices):
            other = next(j for j in range(len(ch.proofs)) if j != ch.k)
            proofs = list(ch.proofs)
            proofs[ch.k], proofs[other] = proofs[other], None   # claim `other` wins instead
            wrong = dataclasses.replace(ch, k=other, proofs=tuple(proofs))
            choices = leaf.choices[:n] + ((side, node, wrong),) + leaf.choices[n + 1:]
            with pytest.raises(CheckFailed):
                check_regions(prog, P, _replace(tree, leaf,
                                                dataclasses.replace(leaf, choices=choices)))
            rejected += 1
    assert rejected > 5


def test_kernel_rejects_a_dropped_leaf():
    """Replacing a split by one of its sides drops the other side's leaves: the kept leaf's
    cell is then the whole parent cell, where its choices or its map fail."""
    prog, P, rc = _setup()
    tree = rc.certificate.tree
    splits, todo = [], [tree]
    while todo:
        t = todo.pop()
        if isinstance(t, Split):
            splits.append(t)
            todo += [t.ge, t.lt]
    for s in splits:
        for kept in (s.ge, s.lt):
            with pytest.raises(CheckFailed):
                check_regions(prog, P, _replace(tree, s, kept))


def test_kernel_rejects_points_outside_and_flat_cells():
    prog, P, rc = _setup()
    tree = rc.certificate.tree
    a, b = _leaves(tree)[:2]
    with pytest.raises(CheckFailed, match="strictly inside"):
        check_regions(prog, P, _replace(tree, a, dataclasses.replace(a, point=b.point)))
    # a cell {h >= 0, -h >= 0} is a segment: no point is strictly inside
    split = Split(tree.a, tree.c, Split(tuple(-v for v in tree.a), -tree.c, tree.ge, tree.ge),
                  tree.lt, tree.choices)
    with pytest.raises(CheckFailed):
        check_regions(prog, P, split)
    with pytest.raises(CheckFailed, match="program 1 does not exist"):
        side1 = ((1,) + a.choices[0][1:],) + a.choices[1:] if a.choices else ((1, 0, None),)
        check_regions(prog, P, _replace(tree, a, dataclasses.replace(a, choices=side1)))


def test_kernel_rejects_bad_merges():
    prog, P, rc = _setup()
    tree, merges = rc.certificate.tree, rc.certificate.merges
    leaves = check_regions(prog, P, tree)
    n = len(leaves)
    # two leaves with different maps
    i, j = next((i, j) for i in range(n) for j in range(n)
                if (leaves[i][1].W, leaves[i][1].b) != (leaves[j][1].W, leaves[j][1].b))
    with pytest.raises(CheckFailed, match="different maps"):
        check_region_count(prog, P, tree, merges + ((i, j, leaves[i][1].point),))
    # a merge point moved off the separating hyperplane
    net3 = next(m for m in map(random_network, range(40))
                if count_regions(m, m.domain).certificate.merges)
    rc3 = count_regions(net3, net3.domain)
    prog3, P3 = program_of(net3), net3.domain.as_polyhedron()
    assert check_region_count(prog3, P3, rc3.certificate.tree, rc3.certificate.merges)
    i, j, q = rc3.certificate.merges[0]
    ri, rj = rc3.cells[i].rows, rc3.cells[j].rows
    h = next(u for u, v in zip(ri, rj) if u != v)          # the separating split
    for t in (Q(1, 10 ** 6), Q(-1, 10 ** 6)):
        moved = tuple(x + t * a for x, a in zip(q, h.a))
        with pytest.raises(CheckFailed, match="hyperplane"):
            check_region_count(prog3, P3, rc3.certificate.tree, ((i, j, moved),))
    # two same-map cells that share no facet: S_3(x) + S_3(y) has one map on the squares
    # [0, 1/3] x [2/3, 1] and [2/3, 1] x [0, 1/3]
    net = sawtooth_network(3, 2, 1)
    rc2 = count_regions(net, net.domain)
    leaves2 = check_regions(program_of(net), net.domain.as_polyhedron(), rc2.certificate.tree)
    same = [(i, j) for i in range(len(leaves2)) for j in range(i)
            if (leaves2[i][1].W, leaves2[i][1].b) == (leaves2[j][1].W, leaves2[j][1].b)]
    assert same
    for i, j in same:
        with pytest.raises(CheckFailed):
            check_region_count(program_of(net), net.domain.as_polyhedron(),
                               rc2.certificate.tree, ((i, j, leaves2[i][1].point),))


def _row(a, c, strict=False):
    return Row(tuple(Q(v) for v in a), Q(c), strict)


# The square [-1, 1]^2 (rows x + 1 >= 0, 1 - x >= 0, y + 1 >= 0, 1 - y >= 0), split at x = 0.
_SQUARE = [_row((1, 0), 1), _row((-1, 0), 1), _row((0, 1), 1), _row((0, -1), 1)]
_RIGHT, _LEFT = _row((1, 0), 0), _row((-1, 0), 0, True)


def test_a_shared_facet_is_accepted_at_any_point_inside_it():
    """x >= 0, y >= 0 and x < 0, y >= 0 share the facet {0} x (0, 1)."""
    up, up_lt = _row((0, 1), 0), _row((0, 1), 0)
    for y in (Q(1, 2), Q(1, 10 ** 6), Q(999, 1000)):
        check_adjacent(_SQUARE + [_RIGHT, up], _SQUARE + [_LEFT, up_lt], (Q(0), y))


def test_cells_touching_at_a_corner_or_across_the_split_are_not_merged():
    """x >= 0, y >= 0 and x < 0, y < 0 meet only at the origin: a point on x = 0 is either
    the corner (a row of both cells is 0 there, not positive) or outside one of the cells."""
    cell_i = _SQUARE + [_RIGHT, _row((0, 1), 0)]
    cell_j = _SQUARE + [_LEFT, _row((0, -1), 0, True)]
    for q in [(Q(0), Q(0)), (Q(0), Q(1, 2)), (Q(0), Q(-1, 2)), (Q(0), Q(1, 10 ** 9))]:
        with pytest.raises(CheckFailed, match="not positive"):
            check_adjacent(cell_i, cell_j, q)
    # the end of a facet, where the cells' other rows vanish, is no witness either
    with pytest.raises(CheckFailed, match="not positive"):
        check_adjacent(_SQUARE + [_RIGHT], _SQUARE + [_LEFT], (Q(0), Q(1)))



def test_an_activation_pattern_is_the_argmax_set_not_the_chosen_piece():
    """max(x, x, 0) on [-1, 1]: the tied pieces 0 and 1 both win on x > 0.  Cutting that cell
    at x = 1/2 and choosing piece 0 on one side and piece 1 on the other still gives two
    activation regions ({0, 1} and {2}), not three."""
    net = MaxoutNetwork(1, (Layer((Unit((Piece((ONE,), ZERO), Piece((ONE,), ZERO),
                                         Piece((ZERO,), ZERO))),)),),
                        domain=Box((Q(-1),), (ONE,)))
    prog, P = program_of(net), net.domain.as_polyhedron()
    rc = count_regions(net, net.domain)
    assert rc.activation_regions == 2
    tree = rc.certificate.tree
    pos = next(leaf for leaf in _leaves(tree) if leaf.point[0] > 0)
    (side, node, ch), = [c for c in pos.choices if c[2].k in (0, 1)]
    other = 1 - ch.k
    proofs = list(ch.proofs)
    proofs[ch.k], proofs[other] = (), None          # the tied piece: 0 >= 0, no rows needed
    swapped = dataclasses.replace(ch, k=other, proofs=tuple(proofs))
    rest = tuple(c for c in pos.choices if c[1] != node)
    hi = dataclasses.replace(pos, point=(Q(3, 4),))
    lo = dataclasses.replace(pos, point=(Q(1, 4),), choices=rest + ((side, node, swapped),))
    cut = _replace(tree, pos, Split((ONE,), Q(-1, 2), hi, lo))
    leaves = check_regions(prog, P, cut)
    assert len(leaves) == len(_leaves(tree)) + 1
    act, low, up = check_region_count(prog, P, cut, ())
    assert act == 2
