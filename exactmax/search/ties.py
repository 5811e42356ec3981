"""Tie sets of a program: where two arguments of a ``Max`` node, or two scores of a
``Hardmax`` node, are equal and maximal.

A Maxout network or a hardmax Transformer, translated by the kernel into a program
(``exactmax/kernel/program.py``), is affine on each cell of a polyhedral partition of its input
space; the cells meet on the tie sets

    T_n = { x : f_a(x) = f_b(x) = max_c f_c(x) }    for a Max node n with arguments f_c

(and the same with the scores of a Hardmax node, where the average jumps).  Two models that
differ only on a lower-dimensional set differ on such a set of one of them, so the search
tries points of these sets on purpose.

At a point x0 every node value is an affine form v_n(x) = g_n . x + c_n valid on the cell of
x0 (the active argument's form for Max, the mean of the winners' value forms for Hardmax).
The tie T_n of arguments a (the maximum at x0) and b is then locally the hyperplane
(g_a - g_b) . x + (c_a - c_b) = 0; the projection along the coordinate e_k with the largest
|g_a,k - g_b,k| that stays in the domain (one step of Newton's method on a piecewise linear
function) gives a point on it.  The step is repeated from the new point, whose cell may
differ, a few times; a point is kept only if the exact values there show a tie.

Untrusted guidance: the counterexamples found near these points are re-evaluated by the
kernel's evaluators before they are reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..kernel.program import Hardmax, Lin, Max, Program
from ..kernel.rational import ZERO, Q, rational
from ..vectorized.program import evaluate_nodes

Form = list  # [g_0, ..., g_{d-1}, c]: the affine form g . x + c


@dataclass(frozen=True, slots=True)
class Tie:
    """A pair of arguments (Max) or scores (Hardmax) of node ``node`` that can tie."""

    node: int
    a: int  # program node of the first argument / score
    b: int  # program node of the second argument / score


def local_forms(p: Program, x) -> tuple[list[Q], list[Form]]:
    """(values, forms): every node's value at x and its affine form on the cell of x."""
    d = p.dim
    val: list[Q] = []
    forms: list[Form] = []
    for node in p.nodes:
        if isinstance(node, Lin):
            f = [ZERO] * d + [node.c]
            v = node.c
            for i, a in node.x:
                f[i] += a
                v += a * x[i]
            for j, a in node.terms:
                v += a * val[j]
                g = forms[j]
                for k in range(d + 1):
                    if g[k]:
                        f[k] += a * g[k]
        elif isinstance(node, Max):
            j = max(node.args, key=lambda u: val[u])
            v, f = val[j], forms[j]
        else:
            top = max(val[s] for s, _ in node.pairs)
            win = [u for s, u in node.pairs if val[s] == top]
            v = sum((val[u] for u in win), ZERO) / len(win)
            f = [sum((forms[u][k] for u in win), ZERO) / len(win) for k in range(d + 1)]
        val.append(v)
        forms.append(f)
    return val, forms


def ties_of(p: Program) -> list[Tie]:
    """Every pair of arguments of a Max node and of scores of a Hardmax node."""
    out: list[Tie] = []
    for n, node in enumerate(p.nodes):
        if isinstance(node, Max):
            args = sorted(set(node.args))
        elif isinstance(node, Hardmax):
            args = sorted({s for s, _ in node.pairs})
        else:
            continue
        out.extend(Tie(n, a, b) for i, a in enumerate(args) for b in args[i + 1 :])
    return out


def _competitors(node) -> list[int]:
    return sorted(set(node.args)) if isinstance(node, Max) else sorted({s for s, _ in node.pairs})


def tie_gap(p: Program, val: list[Q]) -> Q | None:
    """min over Max/Hardmax nodes of (largest - second largest argument), at the values
    ``val`` of ``evaluate_nodes``; 0 exactly on a tie set, None without such nodes."""
    best = None
    for node in p.nodes:
        if isinstance(node, (Max, Hardmax)):
            vs = sorted((val[j] for j in _competitors(node)), reverse=True)
            if len(vs) > 1:
                g = vs[0] - vs[1]
                if best is None or g < best:
                    best = g
    return best


def is_on_tie(p: Program, val: list[Q], n: int) -> bool:
    """Do two arguments (scores) of node n share the maximum at these values?"""
    vs = [val[j] for j in _competitors(p.nodes[n])]
    top = max(vs)
    return sum(1 for v in vs if v == top) > 1


def _axis_step(x, g: Form, gap: Q, contains, lower=None, upper=None):
    """x moved along one coordinate e_k so that the form g (with g(x) = gap) vanishes:
    the k with the largest |g_k| whose point is in the domain, or None."""
    order = sorted((k for k in range(len(x)) if g[k]), key=lambda k: -abs(g[k]))
    for k in order:
        y = list(x)
        y[k] = x[k] - gap / g[k]
        if lower is not None and not lower[k] <= y[k] <= upper[k]:
            continue
        point = tuple(y)
        if contains(point):
            return point
    return None


def project_to_tie(p: Program, x, tie: Tie, contains, bounds=None, steps: int = 3, start=None):
    """A point on the tie set of ``tie.node`` near x in the domain, or None.

    Newton steps on the gap f_a - f_b of the pair (first step) and then on the gap of the
    node's two largest arguments, each along the best coordinate axis; ``contains`` decides
    domain membership exactly; ``bounds`` (lower, upper) is the domain's bounding box if known;
    ``start`` is ``local_forms(p, x)`` when the caller has it already.
    """
    lower, upper = bounds if bounds is not None else (None, None)
    a, b = tie.a, tie.b
    y = tuple(rational(v) for v in x)
    state = start
    for step in range(steps):
        val, forms = state if state is not None else local_forms(p, y)
        state = None
        if step > 0:
            if is_on_tie(p, val, tie.node):
                return y
            comp = sorted(_competitors(p.nodes[tie.node]), key=lambda j: -val[j])
            a, b = comp[0], comp[1]
        g = [u - v for u, v in zip(forms[a], forms[b])]
        if not any(g[:-1]):
            return None  # the pair differs by a constant on this cell
        y = _axis_step(y, g, val[a] - val[b], contains, lower, upper)
        if y is None:
            return None
    return y if is_on_tie(p, evaluate_nodes(p, y), tie.node) else None
