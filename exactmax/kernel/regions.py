"""Region certificates (regions.md): a split tree of cells, each leaf with the output map and a
point strictly inside.  ``check_regions``: the leaves partition the domain P; at each, the choices
in force are proved (``certificate.py``; the outputs' cone is affine there), W x + b is their map,
the point strictly inside.  A leaf's activation pattern: per Max / Hardmax node, the arguments whose
map is the chosen one's (the argmax set at generic points); one pattern's points are convex, so
distinct patterns count the activation regions of non-empty interior.  ``check_region_count`` also
checks merges (i, j, q): leaves i, j have one map, q is on the hyperplane h = 0 of the split between
them, and every row of both cells not a multiple of h is positive at q, so both closures contain
a (d-1)-ball of {h = 0} around q (a shared facet).  The linear regions number between the distinct
maps and the merge graph's components (that no other same-map pair shares a facet is unchecked)."""

from dataclasses import dataclass

from .affine import Matrix, Vector, dot
from .certificate import Choices, Row, check_known, cone, walk
from .errors import CheckFailed
from .polyhedron import Polyhedron
from .program import Hardmax, Max, Program


@dataclass(frozen=True, slots=True)
class Region:  # a leaf: choices, the output map x -> W x + b on the cell, a point inside
    choices: Choices
    W: Matrix
    b: Vector
    point: Vector


def check_regions(p: Program, P: Polyhedron, tree, all_units: bool = False) -> list[tuple]:
    """(cell rows, leaf, activation pattern) per leaf, depth first, all checked; the pattern is
    over the Max / Hardmax nodes the outputs read (over every one with ``all_units``)."""
    if p.dim != P.dim:
        raise CheckFailed(f"the program has dimension {p.dim}, the domain {P.dim}")
    need, out = sorted(range(len(p.nodes)) if all_units else cone(p, p.outputs)), []
    for node, rows, (choices,), (vals,), where in walk(tree, P, (p,), (need,), zero_split=False):
        if not isinstance(node, Region):
            raise CheckFailed(f"{where}: not a split or a region leaf")
        if len(node.point) != P.dim or not all(dot(r.a, node.point) + r.c > 0 for r in rows):
            raise CheckFailed(f"{where}: the point is not strictly inside the cell")
        check_known(p, need, vals, where)
        stated = [(tuple(w), c) for w, c in zip(node.W, node.b)]
        if len(node.W) != len(node.b) or [vals[o] for o in p.outputs] != stated:
            raise CheckFailed(f"{where}: the stated affine map is not the program's on the cell")
        pattern = []
        for i, nd in ((i, p.nodes[i]) for i in need):
            if isinstance(nd, (Max, Hardmax)):
                args = nd.args if isinstance(nd, Max) else tuple(s for s, _ in nd.pairs)
                top = vals[args[choices[i].k]]
                pattern.append((i, frozenset(j for j, a in enumerate(args) if vals[a] == top)))
        out.append((rows, node, tuple(pattern)))
    return out


def check_adjacent(rows_i: list[Row], rows_j: list[Row], q, where: str = "merge") -> None:
    """Accept iff q witnesses a shared facet of the two cells (module docstring)."""
    m = next((t for t, (u, v) in enumerate(zip(rows_i, rows_j)) if u != v), None)
    if m is None:
        raise CheckFailed(f"{where}: the cells are not separated by a split")
    h, g = rows_i[m], rows_j[m]
    if g.a != tuple(-v for v in h.a) or g.c != -h.c or not any(h.a):
        raise CheckFailed(f"{where}: the first differing rows are not the two sides of a split")
    if len(q) != len(h.a) or dot(h.a, q) + h.c != 0:
        raise CheckFailed(f"{where}: the point is not on the separating hyperplane")
    k = next(t for t, v in enumerate(h.a) if v)
    for r in rows_i + rows_j:
        lam = r.a[k] / h.a[k]  # r vanishes on the whole hyperplane h = 0 iff r = lam h
        vanishes = all(u == lam * v for u, v in zip(r.a, h.a)) and r.c == lam * h.c
        if not vanishes and not dot(r.a, q) + r.c > 0:
            raise CheckFailed(f"{where}: a row of a cell is not positive at the point")


def check_merges(leaves: list, merges) -> tuple[int, int]:
    """(distinct maps, merge-graph components) of ``check_regions``'s leaves, merges checked."""
    parent = list(range(len(leaves)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for n, (i, j, q) in enumerate(merges):
        if not (0 <= i < len(leaves) and 0 <= j < len(leaves)) or i == j:
            raise CheckFailed(f"merges[{n}]: no such pair of leaves ({i}, {j})")
        (ri, li, _), (rj, lj, _) = leaves[i], leaves[j]
        if (li.W, li.b) != (lj.W, lj.b):
            raise CheckFailed(f"merges[{n}]: leaves {i} and {j} have different maps")
        check_adjacent(ri, rj, q, f"merges[{n}] ({i}, {j})")
        parent[find(i)] = find(j)
    maps = {(tuple(map(tuple, leaf.W)), tuple(leaf.b)) for _, leaf, _ in leaves}
    return len(maps), sum(1 for i in range(len(leaves)) if find(i) == i)


def check_region_count(p: Program, P: Polyhedron, tree, merges, all_units: bool = False) -> tuple:
    """(activation regions, distinct maps, components of the merge graph), all checked."""
    leaves = check_regions(p, P, tree, all_units)
    return (len({pat for _, _, pat in leaves}),) + check_merges(leaves, merges)
