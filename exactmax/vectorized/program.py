"""The value of a straight-line program (``kernel/program.py``) at a point, node by node.

The reference semantics of programs, used by producers (``prove/layerwise.py``) and by the
tests of the translations ``program_of_maxout`` and ``program_of_transformer`` (against the
kernel's definitional evaluators).  No check of the kernel needs it: a certificate fixes each
node's affine map on a cell, and those maps are what the kernel compares.
"""

from __future__ import annotations

from ..kernel.program import Lin, Max, Program
from ..kernel.rational import ZERO, Q, rational


def evaluate_nodes(p: Program, x) -> list[Q]:
    """The exact value of every node of p at x: Lin nodes their affine form, Max nodes the
    max of their arguments, Hardmax nodes the mean of the values whose score is maximal."""
    x = [rational(v) for v in x]
    val: list[Q] = []
    for node in p.nodes:
        if isinstance(node, Lin):
            v = node.c
            for i, a in node.x:
                v += a * x[i]
            for j, a in node.terms:
                v += a * val[j]
        elif isinstance(node, Max):
            v = max(val[j] for j in node.args)
        else:
            top = max(val[s] for s, _ in node.pairs)
            win = [val[v_] for s, v_ in node.pairs if val[s] == top]
            v = sum(win, ZERO) / len(win)
        val.append(v)
    return val


def evaluate_program(p: Program, x) -> tuple[Q, ...]:
    """The outputs of p at x, exactly."""
    val = evaluate_nodes(p, x)
    return tuple(val[o] for o in p.outputs)
