"""Split-tree certificates: two programs agree on a polyhedron P (certificates.md).
Rows: a . x + c >= 0 (> 0 if strict), P's b_i - A_i x >= 0 in order, then one per split on the path.
``Split`` on h = a . x + c: h >= 0 to ``ge``, -h > 0 to ``lt`` (the leaves partition P); ``Empty``:
Farkas for 0 > 0; ``Leaf``: both programs affine on the cell, outputs equal.  A choice (a Max node's
argument, a Hardmax node's key) at a split or leaf holds on all cells below, checked where its
node's inputs first have maps (rows only grow).  Farkas (``check_entails``): y_i > 0 on rows i, e -
sum y_i row_i = r constant: e >= r on the cell, so e >= 0 if r >= 0, e > 0 if r > 0 or a strict row
has y_i > 0.  Hardmax (ties averaged), key k against j: s_k - s_j > 0, or s_k - s_j >= 0, v_j = v_k
on the cell plus s_j - s_k >= 0 (tie set); so all maximal keys, and their mean, have value v_k."""

from dataclasses import dataclass, field
from itertools import compress
from operator import sub

from .affine import SparseVector, nonzero, row_of
from .errors import CheckFailed
from .polyhedron import Polyhedron
from .program import Hardmax, Lin, Max, Program
from .rational import ZERO, IntMatrix, Q, RatMatrix, Z, rational

DENSE = 16  # a row with this many non-zero entries or more is summed as a FLINT integer vector

Farkas = tuple[tuple[int, Q], ...]  # (row index, multiplier > 0)
Affine = tuple[tuple[Q, ...], Q]
Choices = tuple[tuple[int, int, "Choice"], ...]  # (program 0 or 1, node index, choice)
_sub = lambda u, v: (tuple(map(sub, u[0], v[0])), u[1] - v[1])  # u - v, maps


@dataclass(frozen=True, slots=True)
class Row:
    a: tuple[Q, ...] | SparseVector
    c: Q
    strict: bool = False
    nz: tuple = field(init=False, repr=False, compare=False)  # the (t, a_t) with a_t != 0
    _scaled: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "nz", tuple(nonzero(self.a)))

    def scaled(self) -> tuple:  # (L, ((t, L a_t) for a_t != 0), L c, L (a, c) as a FLINT vector
        if (s := self._scaled) is None:  # if DENSE a_t != 0 else None), L = lcm(denominators)
            nz, c, L = [(t, rational(v)) for t, v in self.nz], rational(self.c), Z(1)
            for v in (*(v for _, v in nz), c):
                L = L.lcm(v.q)
            ints, Lc = tuple((t, v.p * (L // v.q)) for t, v in nz), c.p * (L // c.q)
            vec = [Z(0)] * len(self.a) + [Lc] if len(ints) >= DENSE else []
            for t, n in ints if vec else ():
                vec[t] = n
            s = (L, ints, Lc, IntMatrix(1, len(vec), vec) if vec else None)
            object.__setattr__(self, "_scaled", s)
        return s


@dataclass(frozen=True, slots=True)
class TieProof:
    dominance: Farkas  # s_k - s_j >= 0 on the cell
    upper: Farkas  # v_j - v_k >= 0 on the cell and the tie set of j
    lower: Farkas  # v_k - v_j >= 0 there


@dataclass(frozen=True, slots=True)
class Choice:  # argument k of a Max node or key k of a Hardmax node (``Checker.max_ok``)
    k: int  # proofs[j], every j (k too): A_k - A_j >= 0 (Max), s_k - s_j > 0 or a TieProof
    proofs: tuple[Farkas | TieProof | None, ...]  # None: equal maps, checked


@dataclass(frozen=True, slots=True)
class Leaf:
    choices: Choices = ()
    same_max: bool = False  # only records that the producer used the same-max rule


@dataclass(frozen=True, slots=True)
class Empty:
    proof: Farkas


@dataclass(frozen=True, slots=True)
class Split:
    a: tuple[Q, ...]
    c: Q
    ge: "Tree"
    lt: "Tree"
    choices: Choices = ()


Tree = Split | Leaf | Empty


def domain_rows(P: Polyhedron) -> list[Row]:  # b_i - A_i x >= 0 per row of P, in order; checked
    if len(P.A) != len(P.b) or any(len(a) != P.dim for a in P.A):
        raise CheckFailed(f"the domain's rows do not all have {P.dim} entries, one b each")
    return [Row(row_of(P.dim, [(t, -v) for t, v in nonzero(a)]), c) for a, c in zip(P.A, P.b)]


def check_entails(rows: list[Row], e: Affine, strict: bool, proof: Farkas, where: str) -> None:
    """Accept iff ``proof`` shows e >= 0 (> 0 if strict) on the rows.  In integers: row_i = N_i/L_i,
    y_i = p_i/q_i, sum y_i row_i = sum s_i N_i/D, D = lcm(q_i L_i), s_i = p_i D/(q_i L_i); the
    rows with many non-zero entries summed as FLINT vectors, the others entry by entry."""
    terms, D, used_strict = [], Z(1), False
    if not isinstance(proof, tuple | list):
        raise CheckFailed(f"{where}: the Farkas proof is not a list of pairs (row, multiplier)")
    for entry in proof:
        try:
            i, y = entry
            y = rational(y)
        except (TypeError, ValueError):
            raise CheckFailed(f"{where}: {entry!r:.60} is not a pair (row, multiplier)") from None
        if not (isinstance(i, int) and 0 <= i < len(rows)):
            raise CheckFailed(f"{where}: row {i!r:.20} does not exist ({len(rows)} rows here)")
        if not y > 0:
            raise CheckFailed(f"{where}: multiplier {y} of row {i} is not positive")
        L, ints, c, vec = rows[i].scaled()
        terms.append((y, L, ints, c, vec))
        D, used_strict = D.lcm(y.q * L), used_strict or rows[i].strict
    a, r, dense = dict[int, Z](), Z(0), None  # D sum y_i row_i: coefficients, constant, FLINT part
    for y, L, ints, c, vec in terms:
        s = y.p * (D // (y.q * L))
        if vec is not None:
            dense = vec * s if dense is None else dense + vec * s
            continue
        for t, v in ints:
            a[t] = a.get(t, 0) + s * v
        r += s * c
    if dense is not None:  # added to a at its non-zero entries (found in C)
        *lin, k = dense.entries()
        r += k
        for t in compress(range(len(lin)), lin):
            a[t] = a.get(t, 0) + lin[t]
    if any(v * D != a.pop(t, 0) for t, v in nonzero(e[0])) or any(a.values()):
        raise CheckFailed(f"{where}: the combination leaves a linear part")
    k = e[1] - Q(r, D)
    if k < 0 or (strict and k == 0 and not used_strict):
        raise CheckFailed(f"{where}: the combination gives {k}, not {'> 0' if strict else '>= 0'}")


def walk(tree: Tree, P: Polyhedron, programs, needs, zero_split=True, where="root", rows=None):
    """(leaf, cell rows, choices, maps, where) per leaf over P (or cell ``rows``), depth first, ge
    before lt, Empty leaves checked, a = 0 splits iff ``zero_split``; choices[s]: node of program s
    -> choice in force (restated: replaced, later maps redone); maps[s][i]: node i's map or None."""
    maps: list[list[Affine | None]] = [[None] * len(p.nodes) for p in programs]
    stack: list[tuple] = [(tree, list(rows or domain_rows(P)), [{} for _ in programs], maps, where)]
    while stack:
        node, rows, choices, vals, where = stack.pop()
        if isinstance(node, Empty):
            check_entails(rows, ((ZERO,) * P.dim, ZERO), True, node.proof, f"{where}: empty cell")
            yield node, rows, choices, vals, where
            continue
        choices, vals = [dict(c) for c in choices], [list(v) for v in vals]
        for side, index, ch in getattr(node, "choices", ()):
            if not (isinstance(side, int) and 0 <= side < len(programs)):
                raise CheckFailed(f"{where}: program {side!r:.20} does not exist")
            choices[side][index] = ch
            if 0 <= index < len(vals[side]) and vals[side][index] is not None:
                vals[side][index:] = [None] * (len(vals[side]) - index)
        for p, need, chosen, v in zip(programs, needs, choices, vals):
            for n, i in enumerate(need):
                if v[i] is None and None not in [v[j] for j in _reads(p.nodes[i])]:
                    if isinstance(p.nodes[i], Lin):
                        fill_lin_maps(p, need, n, v, p.dim)
                    elif i in chosen:
                        v[i] = _chosen(p.nodes[i], chosen[i], v, rows, f"{where}, node {i}")
        if not isinstance(node, Split):
            yield node, rows, choices, vals, where
            continue
        if len(node.a) != P.dim or not (zero_split or any(node.a)):
            raise CheckFailed(f"{where}: split of the wrong dimension or with a = 0")
        lt = Row(tuple(-v for v in node.a), -node.c, True)
        stack.append((node.lt, rows + [lt], choices, vals, where + ".lt"))
        stack.append((node.ge, rows + [Row(tuple(node.a), node.c)], choices, vals, where + ".ge"))


def check_known(p: Program, need, vals: list, where: str) -> None:  # each node of need has its map
    if (i := next((i for i in need if vals[i] is None), None)) is not None:
        kind = type(p.nodes[i]).__name__
        raise CheckFailed(f"{where}, node {i}: no valid choice for this {kind} node")


def _reads(node) -> list[int]:
    if isinstance(node, Lin):
        return [j for j, _ in node.terms]
    return list(node.args) if isinstance(node, Max) else [j for pr in node.pairs for j in pr]


def lin_maps(nodes: list[Lin], vals: list, d: int) -> list[Affine]:
    """The maps x . a + c + sum_j c_j M_j of Lin nodes (every M_j = (m_j, e_j) known), at once: the
    matrix of their c_j times that of the (m_j, e_j) they read, in FLINT; then a and c added."""
    reads = sorted({j for n in nodes for j, _ in n.terms})
    col, w, C = {j: k for k, j in enumerate(reads)}, len(reads), [ZERO] * (len(nodes) * len(reads))
    for r, n in enumerate(nodes):
        for j, c in n.terms:
            C[r * w + col[j]] += c
    M = RatMatrix(w, d + 1, [v for j in reads for v in (*vals[j][0], vals[j][1])])
    out = (RatMatrix(len(nodes), w, C) * M).tolist()
    for a, n in zip(out, nodes):
        for i, v in n.x:
            a[i] += v
        a[d] += n.c
    return [(tuple(a[:d]), a[d]) for a in out]


lin_map = lambda n, vals, d: lin_maps([n], vals, d)[0]  # one Lin node's map


def fill_lin_maps(p: Program, need: list[int], at: int, vals: list, d: int) -> None:
    """The maps of the Lin nodes need[at:] without one, in one product, in order up to one that
    reads a node without a map (the walks meet layer after layer of Lin nodes all mappable)."""
    ready: list[tuple[int, Lin]] = []
    for i in (need[k] for k in range(at, len(need))):
        if isinstance(node := p.nodes[i], Lin) and vals[i] is None:
            if None in [vals[j] for j, _ in node.terms]:
                break
            ready.append((i, node))
    for (i, _), m in zip(ready, lin_maps([n for _, n in ready], vals, d)):
        vals[i] = m


def cone(p: Program, roots) -> set[int]:  # the nodes ``roots`` depend on, themselves included
    seen, todo = set(), list(roots)
    while todo:
        i = todo.pop()
        if i not in seen:
            seen.add(i)
            todo += _reads(p.nodes[i])
    return seen


def _chosen(node: Max | Hardmax, ch: Choice | None, vals: list, rows: list[Row], at: str) -> Affine:
    """The map ``ch`` selects, every proof checked (a Max node: keys (A_j, A_j), scores >= only)."""
    hard = isinstance(node, Hardmax)
    pairs = node.pairs if isinstance(node, Hardmax) else tuple((a, a) for a in node.args)
    if ch is None or not 0 <= ch.k < len(pairs) or len(ch.proofs) != len(pairs):
        raise CheckFailed(f"{at}: no valid choice for this {type(node).__name__} node")
    sk, vk = pairs[ch.k]
    for j, pr in enumerate(ch.proofs):
        (sj, vj), what = pairs[j], f"{at}, {'key' if hard else 'argument'} {ch.k} against {j}"
        if pr is None:
            if vals[sk] != vals[sj] or vals[vk] != vals[vj]:
                raise CheckFailed(f"{what}: no proof, and the two differ")
        elif hard and isinstance(pr, TieProof):
            tie, w = rows + [Row(*_sub(vals[sj], vals[sk]))], f"{what}, value"
            check_entails(rows, _sub(vals[sk], vals[sj]), False, pr.dominance, f"{what}, score")
            check_entails(tie, _sub(vals[vj], vals[vk]), False, pr.upper, f"{w} <= on the tie set")
            check_entails(tie, _sub(vals[vk], vals[vj]), False, pr.lower, f"{w} >= on the tie set")
        elif isinstance(pr, tuple):
            check_entails(rows, _sub(vals[sk], vals[sj]), hard, pr, what)
        else:
            raise CheckFailed(f"{what}: no valid proof")
    return vals[vk]


def check_equal_on_domain(
    f: Program, g: Program, P: Polyhedron, tree: Tree, outputs: tuple | None = None, rows=None
) -> int:
    """Accept iff ``tree`` proves f(x)_o = g(x)_o for x in P (``rows``: domain_rows(P), if known),
    o in ``outputs`` (default: all; only the nodes these read are evaluated); returns the leaves."""
    if not f.dim == g.dim == P.dim or len(f.outputs) != len(g.outputs):
        raise CheckFailed("the programs differ in input or output size, or from the domain")
    outputs = tuple(range(len(f.outputs))) if outputs is None else outputs
    if not all(0 <= o < len(f.outputs) for o in outputs):
        raise CheckFailed("an output index out of range")
    need, leaves = [sorted(cone(p, [p.outputs[o] for o in outputs])) for p in (f, g)], 0
    for node, _, _, (vf, vg), where in walk(tree, P, (f, g), need, rows=rows):
        leaves += 1
        if not isinstance(node, Leaf | Empty):
            raise CheckFailed(f"{where}: not a split, a leaf or an empty leaf")
        for o in outputs if isinstance(node, Leaf) else ():
            if not outputs_agree(f, g, vf, vg, f.outputs[o], g.outputs[o]):
                raise CheckFailed(f"{where}: outputs differ in y[{o}] on this cell")
    return leaves


def outputs_agree(f: Program, g: Program, vf: list, vg: list, i: int, j: int) -> bool:
    """Node i of f = node j of g on the cell (``Checker.agree_out``): they ``_agree``, or are Lin
    nodes of equal x-part and constant whose terms pair off (equal weights, nodes that agree)."""
    if _agree(f, g, vf, vg, i, j):
        return True
    fi, gj = f.nodes[i], g.nodes[j]
    if not (isinstance(fi, Lin) and isinstance(gj, Lin)) or (fi.x, fi.c) != (gj.x, gj.c):
        return False
    left = list(gj.terms)
    for a, w in fi.terms:
        k = next((k for k, (b, v) in enumerate(left) if v == w and _agree(f, g, vf, vg, a, b)), -1)
        if k < 0:
            return False
        del left[k]
    return not left


def _agree(f, g, vf, vg, i, j) -> bool:
    """Equal maps on the cell, or (same-max rule, ``Checker.mvals``) both the max of one set of
    maps: a max-like node of its arguments' (a mean of tied maxima: that max), others their own."""
    if vf[i] is not None and vf[i] == vg[j]:
        return True
    mf = [vf[a] for a in _max_args(f.nodes[i])] or [vf[i]]
    mg = [vg[a] for a in _max_args(g.nodes[j])] or [vg[j]]
    return None not in mf + mg and all(m in mg for m in mf) and all(m in mf for m in mg)


def _max_args(node) -> tuple[int, ...]:
    """``node`` = max of: a Max's arguments; a Hardmax's values if each is its score; else ()."""
    if isinstance(node, Max):
        return node.args
    if isinstance(node, Hardmax) and node.pairs and all(s == v for s, v in node.pairs):
        return tuple(v for _, v in node.pairs)
    return ()
