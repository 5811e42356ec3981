"""The property checker: no input of a set maps to a forbidden output (VNN-LIB's "unsat").

A case (P, O_1 ... O_m) holds for the network f when no x in P = {x : A x <= b} has (x, f(x))
satisfying every row of some O_j, a row being a . (x, y) + c >= 0 (> 0 if strict).  Its
certificate is a split tree over P (rows: the domain's, then h >= 0 or -h > 0 per split;
choices stated at a split hold below it) whose leaves are

- ``Empty``: Farkas multipliers for 0 > 0 on the cell;
- ``Excluded``: choices fixing every Max node the outputs read, checked by ``affine_values``,
  so y = M x + d on the cell; and for each O_j, Farkas multipliers for 0 > 0 on the cell's
  rows followed by O_j's rows with y replaced by M x + d: no point of the cell satisfies O_j.
The leaves partition P, so no x in P satisfies any O_j: the case holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from .certificate import (
    Affine,
    Choice,
    Empty,
    Farkas,
    Row,
    Split,
    Tree,
    _chosen,
    _reads,
    check_entails,
    cone,
    domain_rows,
)
from .errors import CheckFailed
from .maxout import MaxoutNetwork
from .polyhedron import Polyhedron, check_domain
from .program import Lin, Program, program_of_maxout
from .rational import ZERO, RatMatrix, rational


@dataclass(frozen=True, slots=True)
class Case:
    inputs: Polyhedron
    outputs: tuple[tuple[Row, ...], ...]  # the forbidden conjunctions O_1 ... O_m


@dataclass(frozen=True, slots=True)
class Excluded:
    choices: tuple[tuple[int, int, Choice], ...]  # (program 0, node, choice)
    proofs: tuple[Farkas, ...]  # one per conjunction O_j of the case


def compose(row: Row, ys: list, d: int) -> Row:
    """The row a . (x, y) + c >= 0 with y_o = m_o . x + e_o, as a row over x alone."""
    terms = [(w, ys[o]) for o, w in enumerate(row.a[d:]) if w]
    a = tuple(row.a[t] + sum((w * m[t] for w, (m, _) in terms if m[t]), ZERO) for t in range(d))
    return Row(a, row.c + sum((w * e for w, (_, e) in terms), ZERO), row.strict)


def _levels(p: Program, need: set[int]) -> list[tuple[list, list]]:
    """The nodes of ``need`` by level (a node's level is one more than the highest level of
    the nodes it reads; inputs-only nodes are level 0), each level as (its Lin nodes, its
    other nodes): no node reads one of its own level, so each level can be evaluated at once
    once the levels below are."""
    level: list[int] = []
    for node in p.nodes:
        level.append(1 + max((level[j] for j in _reads(node)), default=-1))
    out: list[tuple[list, list]] = [([], []) for _ in range(max(level, default=-1) + 1)]
    for i in sorted(need):
        out[level[i]][0 if isinstance(p.nodes[i], Lin) else 1].append((i, _reads(p.nodes[i])))
    return out


def lin_values(p: Program, nodes: tuple[int, ...], vals: list, weights: dict) -> list[Affine]:
    """The affine maps of the Lin nodes ``nodes`` (none reading another), given the maps
    ``vals`` of the nodes they read: one exact product W V, with W[m][r] the weight of node
    r in node m and V[r] = (the coefficients of node r's map, its constant), to which each
    node's own input coefficients and constant are added.  ``weights`` caches (the nodes
    read, W) by ``nodes``."""
    d, lin = p.dim, [n for n in (p.nodes[i] for i in nodes) if isinstance(n, Lin)]
    if nodes not in weights:
        read = sorted({j for n in lin for j, _ in n.terms})
        col = {j: t for t, j in enumerate(read)}
        W = [ZERO] * (len(lin) * len(read))
        for m, n in enumerate(lin):
            for j, w in n.terms:
                W[m * len(read) + col[j]] += w
        weights[nodes] = read, RatMatrix(len(lin), len(read), W) if read else None
    read, Wm = weights[nodes]
    V = [v for j in read for v in vals[j][0] + (vals[j][1],)]
    P = (Wm * RatMatrix(len(read), d + 1, V)).entries() if read else [ZERO] * (len(lin) * (d + 1))
    out = []
    for m, n in enumerate(lin):
        a = list(P[m * (d + 1) : m * (d + 1) + d])
        for t, v in n.x:
            a[t] += v
        out.append((tuple(a), P[m * (d + 1) + d] + n.c))
    return out


def _extend(
    p: Program, levels: list, weights: dict, vals: list, choices: dict, rows: list[Row], at: str
) -> None:
    """Fill in ``vals`` (the maps known on the cell ``rows``) level by level: a Lin node whose
    reads are known, and a Max node whose arguments are known and whose choice is stated,
    after checking that choice on the cell.  ``levels``: (Lin nodes, others), each node with
    the nodes it reads."""
    for lins, others in levels:
        ready = tuple(i for i, r in lins if vals[i] is None and None not in [vals[j] for j in r])
        for i, v in zip(ready, lin_values(p, ready, vals, weights) if ready else ()):
            vals[i] = v
        for i, r in others:
            node = p.nodes[i]
            if vals[i] is None and i in choices and all(vals[j] is not None for j in r):
                assert not isinstance(node, Lin)
                vals[i] = _chosen(node, choices[i], vals, rows, f"{at}, node {i}")


def check_case(p: Program, case: Case, tree: Tree, where: str = "case") -> int:
    """Accept iff ``tree`` proves the case for the program p; returns its number of leaves.

    The tree is walked once, top down, carrying the affine maps known on each cell: a node's
    map is computed (and a Max node's choice checked, on the cell's rows) on the first cell of
    the path where its choice is stated and its arguments are known.  Rows are only added
    going down, so a map proved on a cell holds on every cell below it; a choice stated again
    below replaces the one above, and the maps from that node on are computed afresh there
    (the choices in force at a leaf are those ``certificate.cells`` gives it)."""
    check_domain(case.inputs, p.dim)
    for row in (r for conj in case.outputs for r in conj):
        if len(row.a) != p.dim + len(p.outputs):
            raise CheckFailed(
                f"{where}: an output row of length {len(row.a)}, not the inputs' and the outputs'"
            )
        [rational(v) for v in row.a + (row.c,)]
    levels, weights = _levels(p, cone(p, p.outputs)), dict[tuple, tuple]()
    zero = ((ZERO,) * p.dim, ZERO)
    leaves = 0
    stack: list[tuple] = [(tree, domain_rows(case.inputs), {}, [None] * len(p.nodes), where)]
    while stack:
        node, rows, choices, vals, at = stack.pop()
        if isinstance(node, Empty):
            leaves += 1
            check_entails(rows, zero, True, node.proof, f"{at}: empty cell")
            continue
        if not isinstance(node, (Split, Excluded)):
            raise CheckFailed(f"{at}: not a split, an empty cell or an excluded cell")
        choices, vals = dict(choices), list(vals)
        for side, index, ch in node.choices:
            if side != 0:
                raise CheckFailed(f"{at}: program {side} does not exist (only program 0)")
            choices[index] = ch
            if 0 <= index < len(vals) and vals[index] is not None:  # stated again: recompute
                vals[index:] = [None] * (len(vals) - index)
        _extend(p, levels, weights, vals, choices, rows, at)
        if isinstance(node, Split):
            if len(node.a) != p.dim:
                raise CheckFailed(f"{at}: split of the wrong dimension")
            lt = Row(tuple(-v for v in node.a), -node.c, True)
            stack.append((node.lt, rows + [lt], choices, vals, at + ".lt"))
            stack.append((node.ge, rows + [Row(node.a, node.c)], choices, vals, at + ".ge"))
            continue
        leaves += 1
        if len(node.proofs) != len(case.outputs):
            raise CheckFailed(
                f"{at}: an excluded cell needs one proof per output constraint "
                f"({len(case.outputs)}), not {len(node.proofs)}"
            )
        # the first unknown node the outputs read, level by level, has its arguments known:
        # a Max node without a choice
        unknown = next((i for ls in levels for i, _ in ls[0] + ls[1] if vals[i] is None), None)
        if unknown is not None:
            raise CheckFailed(f"{at}, node {unknown}: no choice for this Max node")
        ys = [vals[o] for o in p.outputs]
        for j, (conj, proof) in enumerate(zip(case.outputs, node.proofs)):
            check_entails(
                rows + [compose(r, ys, p.dim) for r in conj],
                zero,
                True,
                proof,
                f"{at}, output constraint {j}",
            )
    return leaves


def check_property(net: MaxoutNetwork, cases: tuple[Case, ...], trees: tuple[Tree, ...]) -> int:
    """Accept iff every case holds for the network (translated by ``program_of_maxout``) by
    its tree; returns the number of leaves checked."""
    if len(cases) != len(trees):
        raise CheckFailed(f"{len(trees)} trees for {len(cases)} cases")
    try:
        p = program_of_maxout(net)
    except (ValueError, TypeError) as e:
        raise CheckFailed(f"the network is malformed: {e}") from None
    return sum(check_case(p, c, t, f"case {n}") for n, (c, t) in enumerate(zip(cases, trees)))
