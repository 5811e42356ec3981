"""Exact enumeration of the activation regions and linear regions of a model on a polytope.

Producer (untrusted), checked by the kernel (``kernel/regions.py``):

1. The model becomes the kernel's program (``program_of``: Max nodes for Maxout units and
   ReLUs, Hardmax nodes for attention heads).  Cells are explored depth first from the
   domain: at a point strictly inside the cell, each Max / Hardmax node of the outputs' cone
   picks its argmax k; a Farkas proof that A_k >= A_j on the closed cell is sought for every
   other argument j (``engine/certify.py``'s oracle: exact fast paths, then z3 over Q).  When
   one fails, A_k - A_j takes both signs inside the cell, so the split on A_k - A_j >= 0 /
   < 0 gives two cells with non-empty interior; choices proved before the failure are stated
   once at the split.  A leaf is a cell where every choice is proved: the program is affine
   there, with output map x -> W x + b.
2. The kernel checks the tree (partition, choices, maps, an interior point per leaf) and
   returns each leaf's activation pattern: activation regions = distinct patterns.
3. Linear regions = components of the graph on the leaves with an edge between two leaves
   that have the same map and share a facet (a (d-1)-dimensional piece of the closure of
   both).  A shared facet lies on the hyperplane of the split separating the two leaves
   (their closures lie on its two sides).  It is found exactly: in 1-D the hyperplane is a
   point; in 2-D from the exact vertices of both polygons; in higher dimension by z3 over Q
   (a point of the hyperplane maximising the slack of every other row).  Each merge carries
   the point, which the kernel checks; *non*-adjacency of the remaining same-map pairs is
   this producer's exact computation only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import z3

from ..engine.certify import NoCertificate, _nudge, _Oracle, _SplitOn, _walk
from ..engine.lp import analyze_domain
from ..engine.smt import from_z3, rat
from ..kernel.affine import Matrix, Vector
from ..kernel.certificate import Row, Split, TieProof, cone, domain_rows
from ..kernel.maxout import MaxoutNetwork
from ..kernel.polyhedron import Box, Domain, Polyhedron
from ..kernel.program import Program, Unsupported, program_of_maxout, program_of_transformer
from ..kernel.rational import Q
from ..kernel.regions import Region, check_merges, check_regions
from .geometry import polygon, segment_on_line


class DomainProblem(ValueError):
    """The domain is empty, unbounded or has an empty interior (one line: what and why)."""


class TooManyCells(RuntimeError):
    """The enumeration passed ``max_cells`` leaves."""


@dataclass(frozen=True, slots=True)
class Cell:
    """One leaf: {x : a . x + c >= 0 (> 0 if strict) for every row} (domain rows first), its
    activation pattern ((node, argmax set), ...), the output map W x + b and a point inside."""

    rows: tuple[Row, ...]
    pattern: tuple
    W: Matrix
    b: Vector
    point: Vector


@dataclass(frozen=True, slots=True)
class RegionCertificate:
    """What the kernel checks: the split tree (``Split`` / ``Region`` leaves) and the merges
    (leaf i, leaf j, a point of their shared facet)."""

    tree: object
    merges: tuple[tuple[int, int, Vector], ...]


@dataclass(frozen=True, slots=True)
class RegionCount:
    activation_regions: int  # distinct activation patterns with non-empty interior
    linear_regions: int  # components of the same-map facet-adjacency graph
    cells: tuple[Cell, ...]  # the leaves, depth first
    certificate: RegionCertificate
    region_of: tuple[int, ...]  # linear region (0..linear_regions-1) of every cell
    distinct_maps: int  # kernel-checked lower bound on linear_regions
    merge_components: int  # kernel-checked upper bound (= linear_regions)
    stats: dict = field(default_factory=dict, compare=False)


def program_of(model) -> Program:
    return (
        program_of_maxout(model)
        if isinstance(model, MaxoutNetwork)
        else program_of_transformer(model)
    )


def check_domain(domain: Domain) -> tuple[Polyhedron, Box]:
    """(the domain as rows A x <= b, its tightest bounding box), after deciding exactly that it
    is non-empty, bounded and full-dimensional; DomainProblem otherwise."""
    if isinstance(domain, Box) and domain.is_empty():
        raise DomainProblem("the domain is empty (a lower bound exceeds its upper bound)")
    P = domain.as_polyhedron()
    rep = analyze_domain(domain)
    if rep.empty:
        raise DomainProblem("the domain is empty (Farkas certificate checked)")
    if not rep.bounded:
        raise DomainProblem(
            "the domain is unbounded (ray "
            + ", ".join(str(v) for v in rep.unbounded_direction or ())
            + "); regions are counted on bounded "
            "polyhedra only: give a box or add constraints"
        )
    p = _Oracle(P.dim, None).interior_point(domain_rows(P))
    if p is None or not all(sum((a * x for a, x in zip(r.a, p)), r.c) > 0 for r in domain_rows(P)):
        raise DomainProblem(
            "the domain has an empty interior (it lies in a hyperplane), so "
            "no region has an interior; drop a dimension or widen it"
        )
    assert rep.lower is not None and rep.upper is not None  # bounded and non-empty
    return P, Box(rep.lower, rep.upper)


def _build_tree(
    prog: Program,
    P: Polyhedron,
    box: Box | None,
    max_cells,
    progress,
    stats,
    deadline: float | None = None,
    all_units: bool = False,
):
    need = set(range(len(prog.nodes))) if all_units else cone(prog, prog.outputs)
    oracle = _Oracle(P.dim, box)
    last = [time.monotonic()]

    def cell(rows: list[Row], known: dict, hint):
        if deadline is not None and time.monotonic() > deadline:
            raise TooManyCells(f"time limit reached after {stats['cells']} cells")
        p = (
            hint
            if hint is not None
            and all(sum((a * x for a, x in zip(r.a, hint)), r.c) > 0 for r in rows)
            else oracle.interior_point(rows)
        )
        if p is None or not all(sum((a * x for a, x in zip(r.a, p)), r.c) > 0 for r in rows):
            raise RuntimeError("a split produced a cell without interior (a bug)")
        try:
            vals, proved = _walk(prog, 0, rows, p, oracle, known, need)
        except _SplitOn as s:
            # A TieProof's Farkas rows number the tie row len(rows): valid on this cell, not
            # below it, where split rows come first.  Such choices are proved again below.
            kept = [c for c in s.proved if not any(isinstance(pr, TieProof) for pr in c[2].proofs)]
            below = dict(known)
            below.update({(side, i): ch for side, i, ch in kept})
            stats["splits"] += 1
            ge_row, lt_row = Row(s.a, s.c), Row(tuple(-v for v in s.a), -s.c, True)
            ge = cell(rows + [ge_row], below, _nudge(rows, p, ge_row, box))
            lt = cell(rows + [lt_row], below, _nudge(rows, p, lt_row, box))
            return Split(s.a, s.c, ge, lt, tuple(kept))
        stats["cells"] += 1
        if max_cells is not None and stats["cells"] > max_cells:
            raise TooManyCells(f"more than {max_cells} cells")
        if progress is not None and time.monotonic() - last[0] > 2:
            last[0] = time.monotonic()
            progress(stats["cells"])
        W = tuple(vals[o][0] for o in prog.outputs)
        b = tuple(vals[o][1] for o in prog.outputs)
        return Region(tuple(proved), W, b, p)

    tree = cell(domain_rows(P), {}, None)
    stats["lp_calls"] = oracle.calls
    return tree


def _separating(ri, rj):
    m = next(t for t, (u, v) in enumerate(zip(ri, rj)) if u != v)
    return m, ri[m]


def _vanishes_on(r: Row, h: Row) -> bool:
    i = next(t for t, v in enumerate(h.a) if v)
    lam = r.a[i] / h.a[i]
    return all(u == lam * v for u, v in zip(r.a, h.a)) and r.c == lam * h.c


def _val(r: Row, x) -> Q:
    return sum((a * v for a, v in zip(r.a, x) if a), r.c)


def facet_point(ri: list[Row], rj: list[Row], polys=None) -> Vector | None:
    """A point of the shared facet of two cells (on the hyperplane of the split separating
    them, every other row of both cells positive there), or None if they share no facet.
    ``polys``: the exact vertex lists of both closures (2-D only)."""
    _, h = _separating(ri, rj)
    others = [r for r in ri + rj if not _vanishes_on(r, h)]
    d = len(h.a)
    if d == 1:
        q = (-h.c / h.a[0],)
    elif polys is not None:
        seg_i, seg_j = segment_on_line(polys[0], h), segment_on_line(polys[1], h)
        if seg_i is None or seg_j is None:
            return None
        lo = max(seg_i[0], seg_j[0], key=lambda e: e[0])
        hi = min(seg_i[1], seg_j[1], key=lambda e: e[0])
        if not lo[0] < hi[0]:
            return None
        q = tuple((u + v) / 2 for u, v in zip(lo[1], hi[1]))
    else:
        q = _lp_facet_point(h, others)
        if q is None:
            return None
    return q if all(_val(r, q) > 0 for r in others) else None


def _lp_facet_point(h: Row, others: list[Row]):
    xs = [z3.Real(f"x{i}") for i in range(len(h.a))]
    t = z3.Real("t")

    def lin(r):
        return z3.Sum([rat(a) * x for a, x in zip(r.a, xs) if a] + [rat(r.c)])

    o = z3.Optimize()
    o.add(lin(h) == 0, t <= 1)
    o.add([lin(r) >= t for r in others])
    o.maximize(t)
    if o.check() != z3.sat:
        return None
    m = o.model()
    if from_z3(m.eval(t, model_completion=True)) <= 0:
        return None
    return tuple(from_z3(m.eval(x, model_completion=True)) for x in xs)


def find_merges(cells: list[Cell], box: Box, stats) -> tuple[list, list[int]]:
    """(merges (i, j, facet point), root of every cell): same-map pairs, closest in the tree
    first (so most pairs are already joined when their turn comes)."""
    parent = list(range(len(cells)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    groups: dict = {}
    for i, c in enumerate(cells):
        groups.setdefault((c.W, c.b), []).append(i)
    polys = {}
    merges, tested = [], 0
    for members in groups.values():
        if len(members) < 2:
            continue
        pairs = sorted(
            ((i, j) for n, i in enumerate(members) for j in members[n + 1 :]),
            key=lambda ij: -_separating(cells[ij[0]].rows, cells[ij[1]].rows)[0],
        )
        for i, j in pairs:
            if find(i) == find(j):
                continue
            tested += 1
            pp = None
            if box.dim == 2:
                for k in (i, j):
                    if k not in polys:
                        polys[k] = polygon(cells[k].rows, box)
                pp = (polys[i], polys[j])
            q = facet_point(list(cells[i].rows), list(cells[j].rows), pp)
            if q is not None:
                merges.append((i, j, q))
                parent[find(i)] = find(j)
    stats["pairs_tested"] = tested
    return merges, [find(i) for i in range(len(cells))]


def count_regions(
    model,
    domain: Domain,
    *,
    max_cells: int | None = None,
    progress=None,
    timeout_s: float | None = None,
    all_units: bool = False,
) -> RegionCount:
    """Activation regions and linear regions of ``model`` (a Maxout network or a hardmax
    Transformer) on the bounded, full-dimensional polyhedron ``domain``, exactly.  An
    activation pattern fixes the selected argument of every Max / Hardmax node the outputs
    depend on (a unit whose output weight is zero everywhere is not one of them), or of every
    such node of the model with ``all_units``; the linear regions are the outputs' either way.

    Raises DomainProblem (bad domain), Unsupported (softmax or bilinear attention),
    TooManyCells (also when the enumeration passes ``timeout_s`` seconds, checked before each
    cell), NoCertificate (a hardmax head whose tied keys carry different values: the
    model jumps there, so it is not piecewise linear), CheckFailed (a producer bug)."""
    start = time.monotonic()
    if domain.dim != model.input_dim:
        raise DomainProblem(
            f"the domain has dimension {domain.dim}, the model's input {model.input_dim}"
        )
    prog = program_of(model)
    P, bbox = check_domain(domain)
    box = domain if isinstance(domain, Box) else None
    stats: dict[str, float] = {"cells": 0, "splits": 0, "program_nodes": len(prog.nodes)}
    tree = _build_tree(
        prog,
        P,
        box,
        max_cells,
        progress,
        stats,
        None if timeout_s is None else start + timeout_s,
        all_units,
    )
    stats["enumerate_s"] = time.monotonic() - start
    t0 = time.monotonic()
    leaves = check_regions(prog, P, tree, all_units)
    stats["kernel_check_s"] = time.monotonic() - t0
    cells = [Cell(tuple(rows), pat, leaf.W, leaf.b, leaf.point) for rows, leaf, pat in leaves]
    t0 = time.monotonic()
    merges, roots = find_merges(cells, bbox, stats)
    stats["adjacency_s"] = time.monotonic() - t0
    t0 = time.monotonic()
    distinct, components = check_merges(leaves, merges)
    stats["kernel_check_s"] += time.monotonic() - t0
    index = {r: n for n, r in enumerate(dict.fromkeys(roots))}
    stats["time_s"] = time.monotonic() - start
    return RegionCount(
        len({c.pattern for c in cells}),
        len(index),
        tuple(cells),
        RegionCertificate(tree, tuple(merges)),
        tuple(index[r] for r in roots),
        distinct,
        components,
        stats,
    )


__all__ = [
    "Cell",
    "RegionCertificate",
    "RegionCount",
    "count_regions",
    "check_domain",
    "DomainProblem",
    "TooManyCells",
    "NoCertificate",
    "Unsupported",
    "program_of",
]
