"""The pair program x -> (A(x), B(x)) as the tree builders see it (``kernel/pair.py`` states
the forbidden output conjunctions the kernel checks it against).

The tree builders speak of Max nodes; a hardmax head whose every score is its value (the
compiled Transformer's max) is the max of its values, so it is handed over as a Max node and
its choice restated for the kernel as a Hardmax choice: key k over key j by the Max proof of
v_k - v_j >= 0 as the dominance, and, on their tie set {v_j - v_k >= 0} (the cell's rows plus
that row), v_j - v_k >= 0 by that row alone and v_k - v_j >= 0 by the same Max proof.

Untrusted producer: the kernel checks the restated tree against the pair program itself.
"""

from __future__ import annotations

import dataclasses

from ..kernel.certificate import Choice, Empty, Split, TieProof
from ..kernel.maxout import MaxoutNetwork
from ..kernel.pair import program_of_pair
from ..kernel.program import Hardmax, Max, Program, program_of_maxout, program_of_transformer
from ..kernel.rational import ONE
from .certify import NoCertificate


def programs(a, b) -> tuple[Program, Program]:
    """(the pair program x -> (A(x), B(x)) the kernel checks against, the same with every
    hardmax node whose scores are its values written as a Max node, for the tree builder).
    Raises NoCertificate for any other hardmax node."""
    f, g = (
        program_of_maxout(m) if isinstance(m, MaxoutNetwork) else program_of_transformer(m)
        for m in (a, b)
    )
    p = program_of_pair(f, g)
    nodes = []
    for i, n in enumerate(p.nodes):
        if isinstance(n, Hardmax):
            if not all(s == v for s, v in n.pairs):
                raise NoCertificate(
                    f"node {i}: an attention head whose scores are not its "
                    "values (only the max-like heads of compiled Transformers "
                    "are supported here)"
                )
            n = Max(tuple(v for _, v in n.pairs))
        nodes.append(n)
    return p, Program(p.dim, tuple(nodes), p.outputs)


def restate(p: Program, tree, first_rows: int):
    """The tree with every choice of a hardmax node of p restated as a Hardmax choice (see
    the module's docstring); ``first_rows``: the domain's rows (a node at depth t has
    first_rows + t rows)."""

    def choice(side, index, ch: Choice, rows: int):
        if not isinstance(p.nodes[index], Hardmax):
            return side, index, ch
        # a Max choice's proofs, restated: Farkas tuples (TieProofs come from Hardmax choices)
        proofs = tuple(
            None if pr is None else TieProof(pr, ((rows, ONE),), pr)  # type: ignore[arg-type]
            for pr in ch.proofs
        )
        return side, index, Choice(ch.k, proofs)

    def walk(t, rows):
        if isinstance(t, Empty):
            return t
        chs = tuple(choice(side, index, ch, rows) for side, index, ch in t.choices)
        if isinstance(t, Split):
            return Split(t.a, t.c, walk(t.ge, rows + 1), walk(t.lt, rows + 1), chs)
        return dataclasses.replace(t, choices=chs)  # a leaf: Excluded (or any with choices)

    if not any(isinstance(n, Hardmax) for n in p.nodes):
        return tree
    return walk(tree, first_rows)
