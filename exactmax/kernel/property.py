"""The property checker: no input of a set maps to a forbidden output (VNN-LIB's "unsat").

A case (P, O_1 ... O_m) holds for the network f when no x in P = {x : A x <= b} has (x, f(x))
satisfying every row of some O_j, a row being a . (x, y) + c >= 0 (> 0 if strict).  Its
certificate is a split tree over P (rows: the domain's, then h >= 0 or -h > 0 per split;
choices stated at a split hold below it) whose leaves are

- ``Empty``: Farkas multipliers for 0 > 0 on the cell;
- ``Excluded``: choices fixing every Max node the outputs read, checked as in ``certificate``,
  so y = M x + d on the cell; and for each O_j, Farkas multipliers for 0 > 0 on the cell's
  rows followed by O_j's rows with y replaced by M x + d: no point of the cell satisfies O_j.
The leaves partition P, so no x in P satisfies any O_j: the case holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from .certificate import (
    Choice,
    Empty,
    Farkas,
    Row,
    Tree,
    check_entails,
    check_known,
    cone,
    walk,
)
from .errors import CheckFailed
from .maxout import MaxoutNetwork
from .polyhedron import Polyhedron, check_domain
from .program import Program, program_of_maxout
from .rational import ZERO, rational


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


def check_case(p: Program, case: Case, tree: Tree, where: str = "case") -> int:
    """Accept iff ``tree`` proves the case for the program p; returns its number of leaves.
    The maps are carried down the tree by ``certificate.walk``."""
    check_domain(case.inputs, p.dim)
    for row in (r for conj in case.outputs for r in conj):
        if len(row.a) != p.dim + len(p.outputs):
            raise CheckFailed(
                f"{where}: an output row of length {len(row.a)}, not the inputs' and the outputs'"
            )
        [rational(v) for v in row.a + (row.c,)]
    need = sorted(cone(p, p.outputs))
    zero = ((ZERO,) * p.dim, ZERO)
    leaves = 0
    for node, rows, _, (vals,), at in walk(tree, case.inputs, (p,), (need,), where=where):
        leaves += 1
        if isinstance(node, Empty):
            continue
        if not isinstance(node, Excluded) or len(node.proofs) != len(case.outputs):
            raise CheckFailed(
                f"{at}: expected an empty cell, or an excluded cell with one "
                f"proof per output constraint ({len(case.outputs)})"
            )
        check_known(p, need, vals, at)
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
