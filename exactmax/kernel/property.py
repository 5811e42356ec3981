"""Properties: no input of a set has a forbidden output (VNN-LIB's "unsat").  A case (P, O_1 ...
O_m) holds for f when no x in P = {x : A x <= b} has (x, f(x)) meeting all rows of some O_j (a . (x,
y) + c >= 0, > 0 if strict).  Certificate: a split tree over P (rows, choices: ``certificate.py``),
leaves ``Empty`` (Farkas: 0 > 0), ``Excluded`` (choices fix the Max nodes the outputs
read, y = M x + d; per O_j a proof the cell and O_j are disjoint) or ``Relaxed`` (``relax``): each
Max node i the outputs read that no choice fixes becomes, in node order, a variable v_i of z = (x,
v ...) with rows v_i - A_j >= 0 (all j) and u_i - v_i >= 0, u_i = sum_j lam_j A_j + beta + sum_k c_k
M_k (M_k: earlier maps) proved >= every A_j on the rows so far (u_i = A_j: v_i = A_j, no variable;
None: no row u_i - v_i); then ``extra`` rows (``Tighten``) and a proof per O_j, y affine in z.
Sound: the true z meets every row (u affine in z).  A proof: Farkas (0 > 0); a ``Phase``, a split on
the argument k of Max node i attaining v_i (rows A_k - A_j >= 0, j != k, and A_k - v_i >= 0), a
proof per branch; or a ``Tighten``: for Max nodes i in turn, u - v_i >= 0 (u >= each A_j so far)."""

from dataclasses import dataclass

from . import certificate as cert
from .certificate import Choices, Empty, Farkas, Row, Split, Tree, _sub, check_entails
from .errors import CheckFailed
from .maxout import MaxoutNetwork, check_maxout_pair
from .polyhedron import Polyhedron, check_domain
from .program import Lin, Max, Program, program_of_maxout
from .rational import ONE, ZERO, Q, rational

PIECES = 32  # pieces of a tree ``check_case`` hands to ``run`` (several per worker)


@dataclass(frozen=True, slots=True)
class Case:
    inputs: Polyhedron
    outputs: tuple[tuple[Row, ...], ...]  # the forbidden conjunctions O_1 ... O_m


@dataclass(frozen=True, slots=True)
class Upper:
    lam: tuple[Q, ...]  # u = sum_j lam_j A_j + beta + sum c_k M_k, one lam_j per argument,
    beta: Q
    proofs: tuple[Farkas, ...]  # u - A_j >= 0, one per argument
    terms: tuple[tuple[int, Q], ...] = ()  # (k, c_k): M_k the map of node k (known by then)


@dataclass(frozen=True, slots=True)
class Phase:
    node: int  # a Max node of the cone
    branches: tuple  # one per argument k: a Farkas proof or a Phase, for the rows of "A_k wins"


@dataclass(frozen=True, slots=True)
class Tighten:
    nodes: tuple[int, ...]  # Max nodes of the cone, in order: for each, the row u - v_i >= 0
    uppers: tuple[Upper, ...]  # is added, u proved >= every A_j on the rows so far
    then: object  # the proof (Farkas, Phase or Tighten) of the cell with those rows


@dataclass(frozen=True, slots=True)
class Excluded:
    choices: Choices  # (program 0, node, choice)
    proofs: tuple[Farkas | Phase, ...]  # one per conjunction O_j of the case


@dataclass(frozen=True, slots=True)
class Relaxed:
    choices: Choices
    uppers: tuple[Upper | None, ...]  # one per Max node of the cone without a map, in index order
    proofs: tuple[Farkas | Phase, ...]  # one per conjunction O_j of the case
    extra: tuple[tuple[int, Upper], ...] = ()  # then rows u - v_i >= 0, as Tighten adds them


def relax(p: Program, need, vals: list, rows: list[Row], uppers, at: str, extra=()):
    """The maps over z = (x, v ...) and the rows of a ``Relaxed`` leaf (see above)."""
    free = [i for i in need if vals[i] is None and isinstance(p.nodes[i], Max)]
    if len(uppers) != len(free):
        raise CheckFailed(f"{at}: {len(uppers)} upper functions for {len(free)} unfixed Max nodes")
    up = dict(zip(free, uppers))
    var = {i: p.dim + n for n, i in enumerate(i for i in free if _argument(up[i]) is None)}
    pad, D = (ZERO,) * len(var), p.dim + len(var)
    vals = [v and (v[0] + pad, v[1]) for v in vals]
    rows = [Row(tuple(r.a) + pad, r.c, r.strict) for r in rows]
    for n, i in enumerate(need):  # in node order: a node reads only earlier ones
        node = p.nodes[i]
        if vals[i] is None and isinstance(node, Lin) and all(vals[j] for j, _ in node.terms):
            cert.fill_lin_maps(p, need, n, vals, D)
        if i not in up:
            continue
        u, args = up[i], [vals[j] for j in node.args]
        uf = None if u is None else upper_map(u, args, vals, rows, D, f"{at}, node {i}")
        if (k := _argument(u)) is not None:
            vals[i] = args[k]
        else:
            vals[i] = (tuple(ONE if t == var[i] else ZERO for t in range(D)), ZERO)
            rows += [Row(*_sub(vals[i], A)) for A in args]
            rows += [Row(*_sub(uf, vals[i]))] if uf else []
    return vals, tighten(p, need, vals, rows, [i for i, _ in extra], [u for _, u in extra], D, at)


def upper_map(u: Upper, args: list, vals: list, rows: list[Row], D: int, at: str):
    """u as a map over z, after checking u - A_j >= 0 on the rows (so u >= v_i where they hold)."""
    ms = args + [vals[k] if type(k) is int and 0 <= k < len(vals) else None for k, _ in u.terms]
    if None in ms or len(u.lam) != len(args) or len(u.proofs) != len(args):
        raise CheckFailed(f"{at}: an upper function of the wrong shape or of a node without a map")
    lam, k = u.lam + tuple(c for _, c in u.terms), _argument(u)
    uf = args[k] if k is not None else cert.lin_map(Lin((), u.beta, tuple(enumerate(lam))), ms, D)
    for j, (A, pr) in enumerate(zip(args, u.proofs)):
        check_entails(rows, _sub(uf, A), False, pr, f"{at}, upper >= argument {j}")
    return uf


def _argument(u: Upper | None) -> int | None:  # j if u = A_j (lam = e_j, beta = 0): v = A_j
    nz = [] if u is None or u.terms or u.beta else [j for j, w in enumerate(u.lam) if w]
    return nz[0] if len(nz) == 1 and u and u.lam[nz[0]] == 1 else None


def compose(row: Row, ys: list, d: int) -> Row:  # a . (x, y) + c >= 0 over z, y_o = m_o . z + e_o
    x, y = [(t, v) for t, v in row.nz if t < d], [(t - d, v) for t, v in row.nz if t >= d]
    m = cert.lin_map(Lin(tuple(x), row.c, tuple(y)), ys, len(ys[0][0]) if ys else d)
    return Row(*m, row.strict)


def check_case(p: Program, case: Case, tree: Tree, where: str = "case", run=None) -> int:
    """Accept iff ``tree`` proves the case for p (returns its leaves); ``run``: a pool's map."""
    check_domain(case.inputs, p.dim)
    for row in (r for conj in case.outputs for r in conj):
        if len(row.a) != p.dim + len(p.outputs) or None in [*map(rational, (*row.a, row.c))]:
            raise CheckFailed(f"{where}: output row of {len(row.a)} entries, not d + n_out")
    pieces = cut(tree, case.inputs, PIECES if run else 1, where)
    go = run if run and len(pieces) > 1 else map
    return sum(go(check_piece, [p] * len(pieces), [case] * len(pieces), pieces))


def cut(tree: Tree, P: Polyhedron, parts: int, where: str):
    """[(subtree, cell rows, where)]: choice-free splits opened, breadth first, to ``parts``."""
    pieces: list = [(tree, cert.domain_rows(P), where)]
    while len(pieces) < parts:
        opened = [k for k, (t, _, _) in enumerate(pieces) if isinstance(t, Split) and not t.choices]
        if not opened:
            break
        split, rows, at = pieces.pop(opened[0])
        if len(split.a) != P.dim:  # as walk (with zero_split, as check_piece walks)
            raise CheckFailed(f"{at}: split of the wrong dimension or with a = 0")
        ge, lt = Row(tuple(split.a), split.c), Row(tuple(-v for v in split.a), -split.c, True)
        pieces += [(split.ge, rows + [ge], at + ".ge"), (split.lt, rows + [lt], at + ".lt")]
    return pieces


def check_piece(p: Program, case: Case, piece: tuple) -> int:
    """Accept iff ``piece`` = (subtree, its cell's rows, where) proves the case (its leaves)."""
    tree, rows, where = piece
    need, leaves = sorted(cert.cone(p, p.outputs)), 0
    walk = cert.walk(tree, case.inputs, (p,), (need,), where=where, rows=rows)
    for node, rows, _, (vals,), at in walk:
        leaves += 1
        if isinstance(node, Empty):
            continue
        if not isinstance(node, Excluded | Relaxed) or len(node.proofs) != len(case.outputs):
            raise CheckFailed(f"{at}: not Empty, Excluded or Relaxed with a proof per conjunction")
        if isinstance(node, Relaxed):
            vals, rows = relax(p, need, vals, rows, node.uppers, at, node.extra)
        cert.check_known(p, need, vals, at)
        ys = [vals[o] for o in p.outputs]
        zero = ((ZERO,) * (len(ys[0][0]) if ys else p.dim), ZERO)
        for j, (conj, proof) in enumerate(zip(case.outputs, node.proofs)):
            cell = rows + [compose(r, ys, p.dim) for r in conj]
            refute(p, need, vals, cell, proof, zero, f"{at}, output constraint {j}")
    return leaves


def refute(p: Program, need, vals: list, rows: list[Row], proof, zero, at: str) -> None:
    """Accept iff ``proof`` (Farkas, ``Phase`` or ``Tighten``) shows no z has rows."""
    todo = [(rows, proof, at)]
    while todo:
        rows, proof, at = todo.pop()
        if not isinstance(proof, Phase | Tighten):
            check_entails(rows, zero, True, proof, at)
            continue
        if isinstance(proof, Tighten):
            rows = tighten(p, need, vals, rows, proof.nodes, proof.uppers, len(zero[0]), at)
            todo.append((rows, proof.then, f"{at}, tightened"))
            continue
        args, i = [vals[j] for j in _max_node(p, need, proof.node, at).args], proof.node
        if len(proof.branches) != len(args):
            raise CheckFailed(f"{at}: a phase split needs a branch per argument")
        for k, branch in enumerate(proof.branches):
            todo.append((rows + phase_rows(args, vals[i], k), branch, f"{at}, {i}={k}"))


def _max_node(p: Program, need, i, at: str) -> Max:
    if not (type(i) is int and i in need and isinstance(n := p.nodes[i], Max) and n.args):
        raise CheckFailed(f"{at}: a phase split or a tightening needs Max nodes")
    return n


def tighten(p: Program, need, vals: list, rows: list[Row], ids, uppers, D: int, at: str):
    """The rows plus, for Max nodes i in turn, u - v_i >= 0 (u proved >= every A_j so far)."""
    if len(uppers) != len(ids) or not all(isinstance(u, Upper) for u in uppers):
        raise CheckFailed(f"{at}: not one upper function per tightened node")
    for i, u in zip(ids, uppers):
        args = [vals[j] for j in _max_node(p, need, i, at).args]
        rows = rows + [Row(*_sub(upper_map(u, args, vals, rows, D, f"{at}, {i}"), vals[i]))]
    return rows


def phase_rows(args: list, v, k: int) -> list[Row]:
    """The rows of branch k of a phase split: A_k - A_j >= 0 (j != k, in order), A_k - v >= 0."""
    return [Row(*_sub(args[k], A)) for j, A in enumerate(args) if j != k] + [Row(*_sub(args[k], v))]


def check_property(net: MaxoutNetwork, cases: tuple, trees: tuple, run=None) -> int:
    """Accept iff every case holds by its tree; returns the leaves; ``run`` as in ``check_case``."""
    if len(cases) != len(trees):
        raise CheckFailed(f"{len(trees)} trees for {len(cases)} cases")
    check_maxout_pair(net, net, "property")
    p = program_of_maxout(net)
    return sum(check_case(p, c, t, f"case {n}", run) for n, (c, t) in enumerate(zip(cases, trees)))
