"""The certificate checker: two programs agree on a polyhedron (certificates.md).

Constraints are a . x + c >= 0 (or > 0 when strict).  The domain A x <= b gives the first
rows, b_i - A_i x >= 0, in order; each split on the way down appends one row, so a constraint
keeps its index in the whole subtree below the node that added it.

- A ``Split`` on h = a . x + c sends h >= 0 to ``ge`` and h < 0 (-h > 0, strict) to ``lt``:
  the leaves partition the domain, with no covering argument needed.
- An ``Empty`` leaf proves its cell empty: Farkas multipliers for 0 > 0.
- A ``Leaf`` fixes, for every Max and Hardmax node of both programs, the argument that is
  selected on the cell, with Farkas proofs that it is selected; both programs are then affine
  on the cell, and the leaf is accepted when their output maps are equal exactly.
- Choices given at a ``Split`` are inherited by every leaf below (rows are only ever added
  going down, so an entailment proved higher up stays valid).

Farkas rule (``check_entails``): multipliers y_i > 0 on rows i with e - sum y_i row_i = r, a
constant.  Then e(x) = sum y_i row_i(x) + r >= r on the cell, so e >= 0 if r >= 0, and e > 0 if
r > 0 or some strict row has y_i > 0.

Hardmax (ties averaged): for chosen key k and every other j, either s_k - s_j > 0 on the cell,
or s_k - s_j >= 0 on the cell and, on the cell with the extra row s_j - s_k >= 0 (the tie set
of j), v_j - v_k >= 0 and v_k - v_j >= 0.  Then every key of maximal score has value v_k, and
so has their mean.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import CheckFailed
from .polyhedron import Polyhedron
from .program import Hardmax, Lin, Max, Program
from .rational import Q, ZERO

Farkas = tuple[tuple[int, Q], ...]   # (row index, multiplier > 0)


@dataclass(frozen=True, slots=True)
class Row:
    """a . x + c >= 0, or > 0 if strict."""

    a: tuple[Q, ...]
    c: Q
    strict: bool = False


@dataclass(frozen=True, slots=True)
class TieProof:
    dominance: Farkas   # s_k - s_j >= 0 on the cell
    upper: Farkas       # v_j - v_k >= 0 on the cell and the tie set of j
    lower: Farkas       # v_k - v_j >= 0 there


@dataclass(frozen=True, slots=True)
class Choice:
    """Argument k of a Max node (proofs[j]: A_k - A_j >= 0) or key k of a Hardmax node
    (proofs[j]: a Farkas proof of s_k - s_j > 0, or a TieProof).  Every j is checked, k
    included, exactly as the Coq checker does (``Checker.max_ok``, ``sel_ok``): None stands
    for "the two maps are equal" (always so at j = k), and is refused where they differ."""

    k: int
    proofs: tuple[Farkas | TieProof | None, ...]


Choices = tuple[tuple[int, int, Choice], ...]   # (program 0 or 1, node index, choice)


@dataclass(frozen=True, slots=True)
class Leaf:
    """The choices that fix, on the cell, the argument of the Max and Hardmax nodes the
    outputs need.  A node without a choice is unknown, which is no failure by itself: an
    output is accepted when its two nodes have equal maps, or are the max of the same set of
    maps (the same-max rule), or are the same combination of such nodes (see
    ``outputs_agree``).  ``same_max`` only records that the producer used that rule (the
    checker needs no flag, as the Coq checker has none)."""

    choices: Choices = ()
    same_max: bool = False


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
Affine = tuple[tuple[Q, ...], Q]


def domain_rows(P: Polyhedron) -> list[Row]:
    """b_i - A_i x >= 0 for every row of the domain, in order.  The kernel checks the shape
    itself (one entry of b per row, every row of length P.dim): nothing is truncated."""
    if len(P.A) != len(P.b) or any(len(a) != P.dim for a in P.A):
        raise CheckFailed(f"the domain's rows do not all have {P.dim} entries, one b each")
    return [Row(tuple(-v for v in a), c) for a, c in zip(P.A, P.b)]


def check_entails(rows: list[Row], e: Affine, strict: bool, proof: Farkas, where: str) -> None:
    """Accept iff ``proof`` shows e >= 0 (e > 0 if strict) on {x : rows}."""
    a, r = list(e[0]), e[1]
    used_strict = False
    for i, y in proof:
        if not 0 <= i < len(rows):
            raise CheckFailed(f"{where}: row {i} does not exist ({len(rows)} rows here)")
        if not y > 0:
            raise CheckFailed(f"{where}: multiplier {y} of row {i} is not positive")
        row = rows[i]
        for t, v in enumerate(row.a):
            if v:
                a[t] -= y * v
        r -= y * row.c
        used_strict = used_strict or row.strict
    if any(a):
        raise CheckFailed(f"{where}: the combination leaves a linear part")
    if r < 0 or (strict and r == 0 and not used_strict):
        raise CheckFailed(f"{where}: the combination gives {r}, which does not show "
                          f"{'> 0' if strict else '>= 0'}")


def _sub(u: Affine, v: Affine) -> Affine:
    return tuple(p - q for p, q in zip(u[0], v[0])), u[1] - v[1]


def lin_affine(node: Lin, vals: list, d: int) -> Affine:
    """The affine map of a Lin node, given the affine maps of the nodes it reads."""
    a = [ZERO] * d
    for i, v in node.x:
        a[i] += v
    c = node.c
    for j, w in node.terms:
        aj, cj = vals[j]
        for t in range(d):
            if aj[t]:
                a[t] += w * aj[t]
        c += w * cj
    return tuple(a), c


def cone(p: Program, roots) -> set[int]:
    """The nodes that the nodes ``roots`` depend on (themselves included)."""
    seen, todo = set(), list(roots)
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        node = p.nodes[i]
        if isinstance(node, Lin):
            todo += [j for j, _ in node.terms]
        elif isinstance(node, Max):
            todo += list(node.args)
        else:
            todo += [j for pair in node.pairs for j in pair]
    return seen


def affine_values(p: Program, rows: list[Row], choices: dict, where: str,
                  needed: set[int] | None = None, partial: bool = False) -> list[Affine | None]:
    """The affine map on the cell of every node of p in ``needed`` (default: all), after
    checking the choices there; other nodes get None.  With ``partial`` (as the Coq checker
    evaluates), a Max or Hardmax node without a choice, or a node reading an unknown one, is
    unknown (None) and its choice, if any, is not checked; a choice that is checked and
    wrong rejects either way."""
    d = p.dim
    vals: list[Affine | None] = []
    for index, node in enumerate(p.nodes):
        if needed is not None and index not in needed:
            vals.append(None)
            continue
        at = f"{where}, node {index}"
        reads = [j for j, _ in node.terms] if isinstance(node, Lin) else \
            list(node.args) if isinstance(node, Max) else [j for pr in node.pairs for j in pr]
        ch = choices.get(index)
        if partial and (any(vals[j] is None for j in reads) or
                        (ch is None and not isinstance(node, Lin))):
            vals.append(None)
            continue
        if isinstance(node, Lin):
            vals.append(lin_affine(node, vals, d))
            continue
        args = node.args if isinstance(node, Max) else tuple(s for s, _ in node.pairs)
        if ch is None or not 0 <= ch.k < len(args) or len(ch.proofs) != len(args):
            raise CheckFailed(f"{at}: no valid choice for this {type(node).__name__} node")
        if isinstance(node, Max):
            ak = vals[args[ch.k]]
            for j, pr in enumerate(ch.proofs):   # j = k included, as in the Coq checker
                aj, what = vals[args[j]], f"{at}, argument {ch.k} >= {j}"
                if pr is None:
                    if ak != aj:
                        raise CheckFailed(f"{what}: no proof, and the two maps differ")
                elif isinstance(pr, tuple):
                    check_entails(rows, _sub(ak, aj), False, pr, what)
                else:
                    raise CheckFailed(f"{what}: a tie proof for a Max node")
            vals.append(ak)
            continue
        sk, vk = node.pairs[ch.k]
        for j, pr in enumerate(ch.proofs):       # j = k included, as in the Coq checker
            sj, vj = node.pairs[j]
            gap = _sub(vals[sk], vals[sj])
            if pr is None:
                if vals[sk] != vals[sj] or vals[vk] != vals[vj]:
                    raise CheckFailed(f"{at}: key {j} has no proof, and its score or value "
                                      f"differs from key {ch.k}'s")
            elif isinstance(pr, TieProof):
                check_entails(rows, gap, False, pr.dominance, f"{at}, score {ch.k} >= {j}")
                tie = rows + [Row(*_sub(vals[sj], vals[sk]))]
                check_entails(tie, _sub(vals[vj], vals[vk]), False, pr.upper,
                              f"{at}, value {j} >= {ch.k} on their tie set")
                check_entails(tie, _sub(vals[vk], vals[vj]), False, pr.lower,
                              f"{at}, value {ch.k} >= {j} on their tie set")
            elif isinstance(pr, tuple):
                check_entails(rows, gap, True, pr, f"{at}, score {ch.k} > {j}")
            else:
                raise CheckFailed(f"{at}: key {j} has no valid proof")
        vals.append(vals[vk])
    return vals


def check_equal_on_domain(f: Program, g: Program, P: Polyhedron, tree: Tree,
                         outputs: tuple[int, ...] | None = None) -> int:
    """Accept iff ``tree`` proves f(x)_o = g(x)_o for every x in P and every output o in
    ``outputs`` (default: all); returns the number of leaves.  Only the nodes these outputs
    depend on are evaluated.  Raises CheckFailed naming the leaf and the reason otherwise."""
    if not f.dim == g.dim == P.dim:
        raise CheckFailed(f"dimensions differ: {f.dim}, {g.dim} and the domain's {P.dim}")
    if len(f.outputs) != len(g.outputs):
        raise CheckFailed(f"output sizes differ: {len(f.outputs)} and {len(g.outputs)}")
    outputs = tuple(range(len(f.outputs))) if outputs is None else outputs
    if not all(0 <= o < len(f.outputs) for o in outputs):
        raise CheckFailed("an output index out of range")
    need_f = cone(f, [f.outputs[o] for o in outputs])
    need_g = cone(g, [g.outputs[o] for o in outputs])
    leaves = 0
    stack = [(tree, domain_rows(P), {}, "root")]
    while stack:
        node, rows, inherited, where = stack.pop()
        choices = dict(inherited)
        for side, index, ch in getattr(node, "choices", ()):
            if side not in (0, 1):
                raise CheckFailed(f"{where}: program {side} does not exist")
            choices[side, index] = ch
        if isinstance(node, Split):
            if len(node.a) != P.dim:
                raise CheckFailed(f"{where}: split of the wrong dimension")
            h = Row(tuple(node.a), node.c)
            neg = Row(tuple(-v for v in node.a), -node.c, True)
            stack.append((node.lt, rows + [neg], choices, where + ".lt"))
            stack.append((node.ge, rows + [h], choices, where + ".ge"))
            continue
        leaves += 1
        if isinstance(node, Empty):
            check_entails(rows, ((ZERO,) * P.dim, ZERO), True, node.proof,
                          f"{where}: empty cell")
            continue
        if not isinstance(node, Leaf):
            raise CheckFailed(f"{where}: not a split, a leaf or an empty leaf")
        vf = affine_values(f, rows, {i: c for (s, i), c in choices.items() if s == 0},
                           f"{where}, first program", need_f, partial=True)
        vg = affine_values(g, rows, {i: c for (s, i), c in choices.items() if s == 1},
                           f"{where}, second program", need_g, partial=True)
        for o in outputs:
            if not outputs_agree(f, g, vf, vg, f.outputs[o], g.outputs[o]):
                raise CheckFailed(f"{where}: outputs differ in y[{o}] on this cell")
    return leaves


def outputs_agree(f: Program, g: Program, vf: list, vg: list, i: int, j: int) -> bool:
    """Node i of f and node j of g have the same value on the cell (``Checker.agree_out``):
    by ``_agree``, or both are Lin nodes with the same input coefficients and constant and
    a one-to-one matching of their terms, with equal weights, on nodes that agree by
    ``_agree`` (the composite rule: an output map over units)."""
    if _agree(f, g, vf, vg, i, j):
        return True
    fi, gj = f.nodes[i], g.nodes[j]
    if not (isinstance(fi, Lin) and isinstance(gj, Lin)) or fi.x != gj.x or fi.c != gj.c \
            or len(fi.terms) != len(gj.terms):
        return False
    left = list(gj.terms)
    for a, w in fi.terms:
        k = next((k for k, (b, w2) in enumerate(left)
                  if w2 == w and _agree(f, g, vf, vg, a, b)), None)
        if k is None:
            return False
        del left[k]
    return True


def _agree(f, g, vf, vg, i, j) -> bool:
    """Equal affine maps on the cell; or (the same-max rule) both nodes the max of the same
    set of affine maps, a max-like node of its arguments', any other node of its own (max{a}
    = a): then both equal that max (the mean over tied maximal values is that max)."""
    if vf[i] is not None and vg[j] is not None and vf[i] == vg[j]:
        return True
    mf, mg = _max_set(f, vf, i), _max_set(g, vg, j)
    return mf is not None and mg is not None and \
        all(m in mg for m in mf) and all(m in mf for m in mg)


def _max_set(p: Program, vals: list, i: int):
    """The affine maps whose max node i is on the cell (``Checker.mvals``), None if one is
    unknown."""
    maps = [vals[a] for a in _max_args(p.nodes[i])] or [vals[i]]
    return None if any(m is None for m in maps) else maps


def _max_args(node) -> tuple[int, ...]:
    """The nodes whose max ``node`` is: the arguments of a Max node, or the values of a
    hardmax head whose every score is its value (its mean over tied maxima is that max);
    () for any other node."""
    if isinstance(node, Max):
        return node.args
    if isinstance(node, Hardmax) and node.pairs and all(s == v for s, v in node.pairs):
        return tuple(v for _, v in node.pairs)
    return ()
