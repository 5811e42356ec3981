"""Lattice normal forms: Maxout networks A and B (a ReLU unit is max(z, 0)) equal on all of Q^d
because both rewrite, by identities only, into one expression; nothing but the rule is given.

Terms.  A term is sum_K c_K K + a(x): rational coefficients on atoms K plus an affine map a of
x in Q^d; an atom is max(N), N a set of at least two distinct terms.  Units become terms layer
by layer (h^0 = x; a piece w . h + b is a linear combination of terms).  A unit whose pieces
give the set S of distinct terms is its one term if |S| = 1, else max(S) = m + k max(N) with m
the mean of S, N = (S - m) / k and k > 0 the largest |number| in S - m (max(S) = m + max(S - m)
and max(S) = k max(S / k) for k > 0); equal sets N are one atom.  N does not change when S is
translated by a term or scaled by a factor > 0: so max(z, 0) and max(-z, 0) are one atom (their
difference z comes out by linear arithmetic), as are duplicated, rescaled or permuted units and
pieces, a + max(0, b - a) against max(a, b); a one-piece unit passes its term through.  A max of
maxima is merged first: where each piece L + c K has one deepest atom K, c > 0, the pieces are
the terms L + c f, f in K's set (L + c max(F) = max(L + c F)); a ReLU's {z, 0} is never merged.

Reading.  depth(K) = 1 + the largest depth of an atom in K's set (0 if none).  A term with
atoms, K_1..K_r its deepest ones with coefficients c_i all > 0 (all < 0) and L the rest, reads as
the max (min) of the terms L + sum_i c_i t_i, one t_i from each K_i's set (c max(T) = max(cT) for
c > 0, min(cT) for c < 0, L + max(T) = max(L + T), a sum of maxima is the max over one choice per
summand), each read in turn; an affine map is a leaf; a max among a max's arguments is merged
into it (a min into a min), repeats count once, a max of one argument is it.  Mixed signs among
the deepest atoms, more than COMBINATIONS choices or READS reads in one check: no reading.

Check: for every output, A's and B's terms are equal, or both read as the same expression
(arguments compared as sets).  Every step is an identity of functions on Q^d: A = B on Q^d."""

from dataclasses import dataclass
from itertools import product
from math import prod

from .affine import nonzero
from .errors import CheckFailed
from .maxout import MaxoutNetwork, check_maxout_pair
from .rational import ONE, ZERO

COMBINATIONS = 1 << 14  # the most terms a reading of one term builds
READS = 1 << 20  # the most terms read in one check


class Term(tuple):
    """((atom, c) ... by atom, c != 0), (a_1, ..., a_d, a_0)); hashed by numerators and
    denominators (python-flint hashes an fmpq through ``Fraction``: 50 times slower)."""

    __slots__ = ()

    def __hash__(self):
        return hash((tuple((k, v.p, v.q) for k, v in self[0]), tuple((v.p, v.q) for v in self[1])))


@dataclass(frozen=True, slots=True)
class LatticeForms:
    """The certificate of this rule: it names the rule; the kernel computes the rest."""


class Forms:
    """The atoms of one check (shared by both networks): their sets and depths."""

    def __init__(self, dim: int):
        self.sets, self.depth, self.index = list[frozenset](), list[int](), dict[frozenset, int]()
        self.dim, self.memo, self.reads = dim, dict[Term, object](), 0

    def lin(self, parts, const=ZERO) -> Term:
        """sum c t over the (c, t) in parts, plus const."""
        atoms: dict = {}
        aff = [ZERO] * self.dim + [ZERO + const]
        for c, (ts, a) in parts:
            for k, v in ts:
                atoms[k] = atoms.get(k, ZERO) + c * v
            for j, v in enumerate(a):
                aff[j] += c * v
        return Term((tuple(sorted((k, v) for k, v in atoms.items() if v)), tuple(aff)))

    def unit(self, pieces: set) -> Term:
        """The term of max(pieces): m + k [N] (module docstring)."""
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

    def outputs(self, net: MaxoutNetwork) -> list[Term]:
        """The terms of net's outputs (h^0 = x; a piece or an output row: w . h + b)."""
        e = (ZERO,) * (self.dim + 1)
        row = lambda h, w, b: self.lin(((v, h[j]) for j, v in nonzero(w)), b)  # noqa: E731
        h = [Term(((), e[:j] + (ONE,) + e[j + 1 :])) for j in range(self.dim)]
        for layer in net.layers:
            h = [self.unit({row(h, p.w, p.b) for p in u.pieces}) for u in layer.units]
        return h if (out := net.output) is None else [row(h, w, c) for w, c in zip(out.W, out.b)]

    def read(self, t: Term):
        """t read (module docstring): ("affine", a), ("max" | "min", frozenset), or None."""
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
    """Accept iff A and B have equal lattice normal forms (module docstring): then A = B on all of
    Q^d.  Returns the atoms built."""
    check_maxout_pair(a, b, "lattice")
    if a.input_dim != b.input_dim or a.out_dim != b.out_dim:
        raise CheckFailed("lattice: the networks differ in inputs or outputs")
    F = Forms(a.input_dim)
    for o, (ta, tb) in enumerate(zip(F.outputs(a), F.outputs(b))):
        if ta != tb and (F.read(ta) is None or F.read(ta) != F.read(tb)):
            raise CheckFailed(f"lattice: output {o}: the normal forms of A and B differ")
    return len(F.sets)
