"""z3 encodings of programs over exact rationals (QF_LRA with Boolean structure).

- ``Lin`` nodes are equalities;
- ``Max`` nodes: v >= a_j for every j, and v = a_j for some j (an auxiliary variable with a
  disjunction; faster than nested If-terms on hard queries);
- ``Hardmax`` nodes with the exact tie semantics: m is the max of the scores, b_j says
  s_j = m, and for every possible size n of the argmax set, n v = sum_{b_j} v_j when exactly
  n of the b_j hold; so tied keys with *different* values are averaged, as the kernel does.

Untrusted: a model is only a candidate; the caller re-evaluates it with the kernel.
"""

from __future__ import annotations

import z3

from .. import interruption
from ..kernel.polyhedron import Polyhedron
from ..kernel.program import Lin, Max, Program
from ..kernel.rational import Q, Z

Z3_NUMERAL_S_PER_DIGIT2 = 2e-9
"""z3 reads a numeral's decimal text in quadratic time: about 1 s for 5 x 10^4 digits, 5.5 s
for 10^5 (measured on an idle core), in one C call that cannot be interrupted; times 3 for a
loaded machine (the long fuzz run overran a 3 s limit by 5 s with a third of this)."""
Z3_CHECK_S_PER_DIGIT2 = 1e-8
"""A z3 check (an LP) on numbers of D digits: seconds at D = 5 x 10^4, and z3 answers an
interruption only between its operations on such numbers; 3e-9 D^2 s on an idle core, times 3
for a loaded one."""


def max_bits(*groups) -> int:
    """The largest bit length of a numerator or denominator among the rationals of
    ``groups`` (iterables of Q, or of rows of Q)."""
    top = 0
    for g in groups:
        for v in g:
            for q in v if isinstance(v, (tuple, list)) else (v,):
                top = max(top, q.p.bit_length(), q.q.bit_length())
    return top


def affordable_check(bits: int) -> None:
    """Before a z3 check on numbers of up to ``bits`` bits: z3's arithmetic on numbers of
    10^4-10^5 digits answers its interruption only after seconds, so under a time limit such
    a check is not started when it would end past the limit."""
    if bits > 10000:
        digits = 0.30103 * bits
        interruption.affordable(
            Z3_CHECK_S_PER_DIGIT2 * digits**2, f"a z3 check on numbers of {digits:,.0f} digits"
        )


def rat(v: Q) -> z3.ArithRef:
    """v as a z3 rational, through FLINT's text (no digit limit, unlike Python's int/str).
    Under a time limit, a numeral z3 would take longer to read than the time left is not
    started (``interruption.affordable``)."""
    bits = max(v.p.bit_length(), v.q.bit_length())
    if bits > 10000:
        digits = 0.30103 * bits
        interruption.affordable(
            Z3_NUMERAL_S_PER_DIGIT2 * digits**2, f"z3 reading a number of {digits:,.0f} digits"
        )
    return z3.RealVal(f"{v.p}/{v.q}")


def from_z3(v) -> Q:
    """A z3 rational value as Q, through z3's and FLINT's texts (no digit limit)."""
    return Q(Z(v.numerator().as_string()), Z(v.denominator().as_string()))


def encode_program(p: Program, xs: list, tag: str) -> tuple[list, list]:
    """(constraints, output terms) defining program p on the z3 input variables xs."""
    cons: list = []
    val: list = []
    for i, node in enumerate(p.nodes):
        v = z3.Real(f"{tag}{i}")
        if isinstance(node, Lin):
            terms = [rat(a) * xs[j] for j, a in node.x] + [rat(a) * val[j] for j, a in node.terms]
            cons.append(v == z3.Sum(terms + [rat(node.c)]))
        elif isinstance(node, Max):
            args = [val[j] for j in node.args]
            cons += [v >= a for a in args]
            cons.append(z3.Or([v == a for a in args]))
        else:
            scores = [val[s] for s, _ in node.pairs]
            values = [val[w] for _, w in node.pairs]
            m = z3.Real(f"{tag}{i}_max")
            cons += [m >= s for s in scores]
            cons.append(z3.Or([m == s for s in scores]))
            top = [s == m for s in scores]
            count = z3.Sum([z3.If(b, 1, 0) for b in top])
            total = z3.Sum([z3.If(b, w, 0) for b, w in zip(top, values)])
            for n in range(1, len(scores) + 1):
                cons.append(z3.Implies(count == n, n * v == total))
        val.append(v)
    return cons, [val[o] for o in p.outputs]


def domain_constraints(P: Polyhedron, xs: list) -> list:
    return [
        z3.Sum([rat(a) * x for a, x in zip(row, xs)] + [z3.RealVal(0)]) <= rat(c)
        for row, c in zip(P.A, P.b)
    ]


def find_difference(f: Program, g: Program, P: Polyhedron, timeout_s: float):
    """('sat', x) with f(x) != g(x) in P (a candidate), ('unsat', None), or ('unknown', why)."""
    interruption.check()
    xs = [z3.Real(f"x{i}") for i in range(P.dim)]
    s = z3.Solver()
    s.set("timeout", max(1, int(timeout_s * 1000)))
    cf, of = encode_program(f, xs, "f")
    cg, og = encode_program(g, xs, "g")
    s.add(domain_constraints(P, xs) + cf + cg)
    s.add(z3.Or([a != b for a, b in zip(of, og)]))
    r = s.check()
    if r == z3.sat:
        m = s.model()
        return "sat", tuple(from_z3(m.eval(x, model_completion=True)) for x in xs)
    if r == z3.unsat:
        return "unsat", None
    return "unknown", s.reason_unknown()
