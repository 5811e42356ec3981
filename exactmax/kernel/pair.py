"""Two models up to a tolerance on a domain P, as a property (``property.py``) of the pair program x
-> (A(x), B(x)), outputs y = (a, b) in Q^2n.  Epsilon E: |A(x) - B(x)|_inf <= E on P; forbidden per
o: a_o - b_o - E > 0, b_o - a_o - E > 0.  Top-1 (E = None): argmax A(x) = argmax B(x) as sets (ties
included) on P; an index i maximal in a but not in b has some k with b_k > b_i, so forbidden, for
each i != k, {a_i - a_j >= 0 for all j != i, b_k - b_i > 0}, and with a, b swapped."""

from dataclasses import dataclass

from .certificate import Row, Tree
from .errors import CheckFailed
from .maxout import MaxoutNetwork, on_free_inputs
from .polyhedron import Box, Domain, Polyhedron
from .program import Hardmax, Lin, Max, Program, check_shapes, program_of
from .property import Case, check_case
from .rational import ONE, ZERO, Q, rational


def program_of_pair(f: Program, g: Program) -> Program:
    """x -> (f(x), g(x)): f's nodes and outputs, then g's, node j renumbered j + len(f.nodes)."""
    if f.dim != g.dim:
        raise CheckFailed(f"the programs have input dimensions {f.dim} and {g.dim}")
    s = len(f.nodes)
    lin = lambda n: Lin(n.x, n.c, tuple((j + s, a) for j, a in n.terms))
    hard = lambda n: Hardmax(tuple((i + s, j + s) for i, j in n.pairs))
    mx = lambda n: Max(tuple(j + s for j in n.args)) if isinstance(n, Max) else hard(n)
    moved = tuple(lin(n) if isinstance(n, Lin) else mx(n) for n in g.nodes)
    return Program(f.dim, f.nodes + moved, f.outputs + tuple(o + s for o in g.outputs))


def pair_case(P: Polyhedron, n: int, epsilon: Q | None) -> Case:  # the case above (None: top-1)
    d, m = P.dim, P.dim + 2 * n
    row = lambda coef, c=ZERO, s=False: Row(tuple(coef.get(t, ZERO) for t in range(m)), c, s)
    if epsilon is not None:
        E = rational(epsilon)
        eps = [(row({d + o: s, d + n + o: -s}, -E, True),) for o in range(n) for s in (ONE, -ONE)]
        return Case(P, tuple(eps))
    conj: list[tuple[Row, ...]] = []
    for u, v in ((d, d + n), (d + n, d)):
        for i in range(n):
            ge = tuple(row({u + i: ONE, u + j: -ONE}) for j in range(n) if j != i)
            conj += [ge + (row({v + k: ONE, v + i: -ONE}, ZERO, True),) for k in range(n) if k != i]
    return Case(P, tuple(conj))


@dataclass(frozen=True, slots=True)
class FreeInputs:  # a tree for the networks ``maxout.on_free_inputs`` of the domain box
    tree: Tree


def check_pair_property(a, b, domain: Domain, epsilon: Q | None, tree: Tree, run=None) -> int:
    """Accept iff ``tree`` proves |A(x) - B(x)|_inf <= epsilon (None: the same arg max sets) on
    the domain (Unsupported: a model unexpressed); returns the leaves; ``run`` as check_case's."""
    check_shapes((a, b), domain)
    if isinstance(tree, FreeInputs):
        if not (isinstance(domain, Box) and {type(a), type(b)} == {MaxoutNetwork}):
            raise CheckFailed("pair: a tree over free inputs is for Maxout networks on a box")
        (a, _), (b, domain), tree = on_free_inputs(a, domain), on_free_inputs(b, domain), tree.tree
    f, g = program_of(a), program_of(b)
    if len(f.outputs) != len(g.outputs):
        raise CheckFailed(f"output sizes differ: {len(f.outputs)} and {len(g.outputs)}")
    case = pair_case(domain.as_polyhedron(), len(f.outputs), epsilon)
    return check_case(program_of_pair(f, g), case, tree, "pair", run)
