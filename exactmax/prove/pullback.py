"""From a layer that differs to a point of the domain where the whole models differ.

When the layerwise producer finds that layer l of the two models differs somewhere on its
input cell, that cell is a box (or the domain) around h^{l-1}(P), not h^{l-1}(P) itself, and
a later layer may hide the difference.  So the point is pulled back: the first layer's
point is a point of the domain already; for a later layer z3 looks for x in the domain
whose image h^{l-1}(x) lies in the cell where the layer's two affine maps differ (a query on
l - 1 layers of one Maxout network, not on both whole models), after a short search of the
whole models.  Every candidate becomes an answer only after the kernel has evaluated both
whole models at it.

Untrusted producer.
"""

from __future__ import annotations

import time

import z3

from ..engine.smt import domain_constraints, encode_program, from_z3, rat
from ..kernel.maxout import MaxoutNetwork
from ..kernel.polyhedron import Domain
from ..kernel.program import Hardmax, Lin, Max, Program, program_of_maxout
from ..kernel.rational import ZERO, Q


def compose(prefix: Program, seg: Program) -> Program:
    """The program x -> seg(prefix(x)): seg's inputs are read from prefix's outputs."""
    if seg.dim != len(prefix.outputs):
        raise ValueError("compose: the segment reads as many inputs as the prefix outputs")
    off = len(prefix.nodes)
    nodes = list(prefix.nodes)
    for node in seg.nodes:
        if isinstance(node, Lin):
            terms: dict[int, Q] = {}
            for i, a in node.x:
                j = prefix.outputs[i]
                terms[j] = terms.get(j, ZERO) + a
            for j, a in node.terms:
                terms[j + off] = terms.get(j + off, ZERO) + a
            nodes.append(Lin((), node.c, tuple(sorted((j, a) for j, a in terms.items() if a))))
        elif isinstance(node, Max):
            nodes.append(Max(tuple(j + off for j in node.args)))
        else:
            nodes.append(Hardmax(tuple((s + off, v + off) for s, v in node.pairs)))
    return Program(prefix.dim, tuple(nodes), tuple(o + off for o in seg.outputs))


def layer_difference_points(net: MaxoutNetwork, other, domain: Domain, differs, deadline: float):
    """Candidate points x of the domain from ``differs`` (a LayerDiffers: layer l differs
    wherever diff != 0 on the polyhedron ``rows`` of its input space): the cell's own point
    for the first layer; then a short search of the whole models; then z3's x in the domain
    with h^{l-1}(x) in the cell and diff(h^{l-1}(x)) != 0 when the cell is known (the Maxout
    prefix's program: l - 1 layers of one network), until ``deadline``."""
    l = differs.layer
    if l == 0 and domain.contains(differs.h):
        yield tuple(differs.h)
    left = deadline - time.monotonic()
    if left > 0:
        from ..search import SearchOptions, find_counterexample

        r = find_counterexample(
            net,
            other,
            domain,
            SearchOptions(max_examples=200, max_explicit=200, time_budget_s=min(1.0, left / 4)),
        )
        if r.found:
            yield r.x
    if l > 0 and differs.rows is not None and deadline > time.monotonic():
        prefix = program_of_maxout(MaxoutNetwork(net.input_dim, net.layers[:l]))
        until = time.monotonic() + (deadline - time.monotonic()) / 3  # leave monolithic time
        x = _point_reaching(prefix, domain, differs.rows, differs.diff, until)
        if x is not None:
            yield x


def _point_reaching(prefix: Program, domain: Domain, rows, diff, deadline: float):
    """z3: x in the domain whose image under the prefix lies in the cell ``rows`` (rows
    a . h + c >= 0, or > 0 when strict) and has diff(h) != 0; None if there is none or the
    time runs out.  A candidate only: the caller has the kernel evaluate it."""
    xs = [z3.Real(f"x{i}") for i in range(domain.dim)]
    s = z3.Solver()
    s.set("timeout", max(1, int((deadline - time.monotonic()) * 1000)))
    cons, hs = encode_program(prefix, xs, "p")
    s.add(domain_constraints(domain.as_polyhedron(), xs) + cons)

    def value(a, c):
        return z3.Sum([rat(v) * h for v, h in zip(a, hs) if v] + [rat(c)])

    for r in rows:
        s.add(value(r.a, r.c) > 0 if r.strict else value(r.a, r.c) >= 0)
    s.add(value(*diff) != 0)
    if s.check() != z3.sat:
        return None
    m = s.model()
    return tuple(from_z3(m.eval(x, model_completion=True)) for x in xs)
