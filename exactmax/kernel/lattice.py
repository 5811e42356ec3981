"""Lattice normal forms: Maxout networks A and B (a ReLU unit is max(z, 0)) equal on Q^d as both
rewrite, by identities only, to one expression.  A term is sum_K c_K K + a(x) (c_K in Q, a affine);
an atom K is max(N), N a set of two or more distinct terms.  Layer by layer (h^0 = x; a piece
w . h + b is linear in the terms), a unit whose pieces give the set S of distinct terms is its term
if |S| = 1, else m + k max(N), m the mean of S, k > 0 the largest |number| in S - m, N = (S - m)/k
(max(S) = m + k max((S - m)/k)); equal sets N are one atom, so translating S by a term or scaling
it by c > 0 keeps the atom (max(z, 0), max(-z, 0); duplicated, rescaled, permuted units, pieces).
Maxima of maxima merge first: pieces L + c K, K the one deepest atom of each, c > 0, become the
terms L + c f, f in K's set (L + c max(F) = max(L + c F)); a ReLU's {z, 0} never does.  Reading:
depth(K) = 1 + the largest depth of an atom in K's set (0 if none); a term with atoms, deepest
K_1..K_r with c_i all > 0 (< 0), L the rest, reads as the max (min) of the terms L + sum_i c_i t_i,
t_i in K_i's set, each read in turn (c max(T) = max(cT) if c > 0, min(cT) if c < 0; a sum of maxima
is the max over one choice per summand); an affine map is a leaf; a max (min) among a max's (min's)
arguments merges into it, repeats count once, a max of one argument is it.  No reading: mixed signs
among the deepest atoms, over COMBINATIONS choices or READS reads.  Check: per output, A's and B's
terms are equal or read alike (arguments as sets); all steps are identities: A = B on Q^d."""

from dataclasses import dataclass
from itertools import product
from math import prod

from .affine import nonzero
from .errors import CheckFailed
from .maxout import MaxoutNetwork, check_maxout_pair
from .rational import ONE, ZERO

COMBINATIONS = 1 << 14  # the most terms a reading of one term builds
READS = 1 << 20  # the most terms read in one check


class Term(tuple):  # ((atom, c) ... by atom, c != 0), (a_1, ..., a_d, a_0))
    __slots__ = ()

    def __hash__(self):  # by numerators, denominators (flint hashes fmpq via Fraction: 50x slower)
        return hash((tuple((k, v.p, v.q) for k, v in self[0]), tuple((v.p, v.q) for v in self[1])))


@dataclass(frozen=True, slots=True)
class LatticeForms: ...  # this rule's certificate: it names the rule, the kernel computes the rest


class Forms:  # the atoms of one check (shared by both networks): their sets and depths
    def __init__(self, dim: int):
        self.sets, self.depth, self.index = list[frozenset](), list[int](), dict[frozenset, int]()
        self.dim, self.memo, self.reads = dim, dict[Term, object](), 0

    def lin(self, parts, const=ZERO) -> Term:  # sum c t over the (c, t) in parts, plus const
        atoms: dict = {}
        aff = [ZERO] * self.dim + [ZERO + const]
        for c, (ts, a) in parts:
            for k, v in ts:
                atoms[k] = atoms.get(k, ZERO) + c * v
            for j, v in enumerate(a):
                aff[j] += c * v
        return Term((tuple(sorted((k, v) for k, v in atoms.items() if v)), tuple(aff)))

    def unit(self, pieces: set) -> Term:  # the term of max(pieces): m + k [N] (module docstring)
        if len(pieces) == 1:
            return next(iter(pieces))
        D = max((self.depth[K] for ts, _ in pieces for K, _ in ts), default=0)
        deep = {e: [(K, c) for K, c in e[0] if self.depth[K] == D] for e in pieces}
        if D and all(len(d) == 1 and d[0][1] > 0 for d in deep.values()):  # a max of maxima
            S = set[Term]()
            for e, [(K, c)] in deep.items():
                rest = (ONE, (tuple(x for x in e[0] if x[0] != K), e[1]))
                S.update(self.lin((rest, (c, f))) for f in self.sets[K])
            return self.unit(S)
        m = self.lin((ONE / len(pieces), t) for t in pieces)
        T = [self.lin(((ONE, t), (-ONE, m))) for t in pieces]
        k = max(abs(v) for ts, a in T for v in (*(v for _, v in ts), *a))
        N = frozenset(self.lin(((ONE / k, t),)) for t in T)
        if self.index.setdefault(N, len(self.sets)) == len(self.sets):  # a new atom
            self.sets.append(N)
            self.depth.append(1 + max((self.depth[a] for ts, _ in N for a, _ in ts), default=0))
        return self.lin(((ONE, m), (k, (((self.index[N], ONE),), (ZERO,) * (self.dim + 1)))))

    def outputs(self, net: MaxoutNetwork) -> list[Term]:  # net's output terms, from h^0 = x
        e = (ZERO,) * (self.dim + 1)
        row = lambda h, w, b: self.lin(((v, h[j]) for j, v in nonzero(w)), b)  # noqa: E731
        h = [Term(((), e[:j] + (ONE,) + e[j + 1 :])) for j in range(self.dim)]
        for layer in net.layers:
            h = [self.unit({row(h, p.w, p.b) for p in u.pieces}) for u in layer.units]
        return h if (out := net.output) is None else [row(h, w, c) for w, c in zip(out.W, out.b)]

    def read(self, t: Term):  # t read: ("affine", a), ("max" | "min", frozenset), or None
        if t in self.memo or not t[0]:
            return self.memo.get(t, ("affine", t[1]))
        top = max(self.depth[k] for k, _ in t[0])
        deep = [(k, c) for k, c in t[0] if self.depth[k] == top]
        op = ("min", "max")[deep[0][1] > 0] if len({c > 0 for _, c in deep}) == 1 else None
        out, self.reads = None, self.reads + (n := prod(len(self.sets[k]) for k, _ in deep))
        if op and n <= COMBINATIONS and self.reads <= READS:
            rest = (ONE, (tuple(kc for kc in t[0] if self.depth[kc[0]] != top), t[1]))
            cs, sets = [c for _, c in deep], product(*(self.sets[k] for k, _ in deep))
            rs = [self.read(self.lin((rest, *zip(cs, ch)))) for ch in sets]
            if None not in rs:
                args = set().union(*(r[1] if r[0] == op else {r} for r in rs))
                out = args.pop() if len(args) == 1 else (op, frozenset(args))
        self.memo[t] = out
        return out


def check_lattice(a: MaxoutNetwork, b: MaxoutNetwork) -> int:
    """Accept iff A and B have equal lattice normal forms (so A = B on Q^d); returns the atoms."""
    check_maxout_pair(a, b, "lattice")
    if a.input_dim != b.input_dim or a.out_dim != b.out_dim:
        raise CheckFailed("lattice: the networks differ in inputs or outputs")
    F = Forms(a.input_dim)
    for o, (ta, tb) in enumerate(zip(F.outputs(a), F.outputs(b))):
        if ta != tb and (F.read(ta) is None or F.read(ta) != F.read(tb)):
            raise CheckFailed(f"lattice: output {o}: the normal forms of A and B differ")
    return len(F.sets)
