"""The VNN-LIB 1.0 reader against z3's own SMT-LIB parser (#36).

For every file exactmax accepts, its reading - cases of an input polyhedron {x : A x <= b}
and forbidden output conjunctions of rows a.(x, y) + c >= 0 (> 0 when strict) - and z3's
parse of the same text denote the same set of points (x, y):

    OR_k [ x in P_k  and  OR_j AND_{r in O_kj} r(x, y) ]   ==   AND (z3's assertions),

decided by z3 in exact real arithmetic (no floats: every number enters as a fraction).
exactmax may refuse a file z3 accepts (it reads a linear fragment, and refuses what could be
misread: names that are not X_i / Y_j with i canonical, (and) and (or) with no argument);
it must never accept a file with another meaning.

The files are every VNN-LIB 1.0 text the tests and examples ship, and thousands of generated
ones: names declared in any order and spelled canonically or not, terms nested with +, -, *,
numbers as integers, decimals, negative literals and (- c), comparisons of all five kinds,
and/or nested with disjunctions over inputs and outputs, comments with parentheses.
"""

from __future__ import annotations

import glob
import os
import random

import pytest
import z3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exactmax.io import InputError
from exactmax.io.vnnlib import read_vnnlib

HERE = os.path.dirname(__file__)
ROOT = os.path.dirname(HERE)


def q(v) -> z3.ArithRef:
    """An exact rational of exactmax (fmpq) as a z3 real constant."""
    return z3.Q(int(v.p), int(v.q))


def row_expr(a, c, strict, variables):
    lin = z3.Sum([q(k) * v for k, v in zip(a, variables) if k != 0] + [q(c)])
    return lin > 0 if strict else lin >= 0


def exactmax_set(prop, xs, ys):
    """exactmax's reading of a property as one z3 formula over the given variables."""
    cases = []
    for case in prop.cases:
        P = case.inputs
        inside = [row_expr(tuple(-k for k in r), c, False, xs) for r, c in zip(P.A, P.b)]
        outs = [z3.And([row_expr(r.a, r.c, r.strict, xs + ys) for r in conj])
                for conj in case.outputs]
        cases.append(z3.And(inside + [z3.Or(outs)]))
    return z3.Or(cases)


def same_set(path: str, text: str, x_names, y_names) -> str | None:
    """None when exactmax's reading of the file equals z3's parse (or exactmax refuses the
    file); else a description of a point in one and not the other."""
    try:
        prop = read_vnnlib(path)
    except InputError:
        return None
    assert (prop.n_x, prop.n_y) == (len(x_names), len(y_names)), path
    xs = [z3.Real(n) for n in x_names]
    ys = [z3.Real(n) for n in y_names]
    theirs = z3.And(list(z3.parse_smt2_string(text)))
    s = z3.Solver()
    s.add(exactmax_set(prop, xs, ys) != theirs)
    if s.check() == z3.unsat:
        return None
    return f"{path}: the readings differ at {s.model()}"


# --- every VNN-LIB 1.0 text the repository ships ---------------------------------------


def shipped_vnnlib_files():
    files = sorted(glob.glob(os.path.join(ROOT, "examples", "**", "*.vnnlib"), recursive=True))
    files += sorted(glob.glob(os.path.join(HERE, "data", "**", "*.vnnlib"), recursive=True))
    return [f for f in files if "declare-const" in open(f, encoding="utf-8").read()]


@pytest.mark.parametrize("path", shipped_vnnlib_files(), ids=os.path.basename)
def test_shipped_files_read_as_z3_reads_them(path):
    text = open(path, encoding="utf-8").read()
    try:
        prop = read_vnnlib(path)
    except InputError:
        pytest.skip("refused by exactmax (a must-refuse file)")
    names = ([f"X_{i}" for i in range(prop.n_x)], [f"Y_{j}" for j in range(prop.n_y)])
    assert same_set(path, text, *names) is None


# --- generated files ----------------------------------------------------------------------


class Gen:
    """A random VNN-LIB 1.0 text and what its names mean (coordinate -> declared name)."""

    def __init__(self, rnd: random.Random, odd_names: bool):
        self.r = rnd
        self.n_x, self.n_y = rnd.randint(1, 3), rnd.randint(1, 3)
        self.x_names = [self.spell("X", i, odd_names) for i in range(self.n_x)]
        self.y_names = [self.spell("Y", j, odd_names) for j in range(self.n_y)]

    def spell(self, letter, i, odd):
        if odd and self.r.random() < 0.3:
            return self.r.choice([f"{letter}_0{i}", f"{letter}_00{i}", f"|{letter}_{i}|",
                                  f"{letter}_{i}\u00a0", f"{letter}_{i}\u0660"])
        return f"{letter}_{i}"

    def number(self) -> str:
        r = self.r
        k = r.randint(0, 6)
        n = r.randint(0, 30)
        if k == 0:
            return str(n)
        if k == 1:
            return f"{n}.{r.randint(0, 999):03d}"
        if k == 2:
            return f"-{n}.{r.randint(0, 99)}"
        if k == 3:
            return f"(- {n})"
        if k == 4:
            return f"-{n}"
        if k == 5:
            return f"{n}.0"
        return f"0.{r.randint(0, 10**6)}"

    def var(self, outputs=True) -> str:
        pool = self.x_names + (self.y_names if outputs else [])
        return self.r.choice(pool)

    def term(self, depth, outputs=True) -> str:
        r = self.r
        if depth <= 0 or r.random() < 0.4:
            return self.var(outputs) if r.random() < 0.7 else self.number()
        k = r.randint(0, 4)
        args = lambda lo, hi: " ".join(self.term(depth - 1, outputs)  # noqa: E731
                                       for _ in range(r.randint(lo, hi)))
        if k == 0:
            return f"(+ {args(1, 3)})"
        if k == 1:
            return f"(- {args(1, 3)})"
        if k == 2:
            return f"(* {self.number()} {self.term(depth - 1, outputs)})"
        if k == 3:
            return f"(* {self.term(depth - 1, outputs)} {self.number()})"
        return f"(* {self.number()} {self.term(depth - 1, outputs)} {self.number()})"

    def comparison(self, outputs=True) -> str:
        op = self.r.choice(["<=", ">=", "<", ">", "=", "<=", ">="])
        return f"({op} {self.term(2, outputs)} {self.term(2, outputs)})"

    def formula(self, depth, outputs=True) -> str:
        r = self.r
        if depth <= 0 or r.random() < 0.35:
            return self.comparison(outputs)
        head = r.choice(["and", "or"])
        parts = " ".join(self.formula(depth - 1, outputs) for _ in range(r.randint(1, 3)))
        return f"({head} {parts})"

    def box(self) -> list[str]:
        out = []
        for n in self.x_names:
            lo = self.r.randint(-5, 4)
            out.append(f"(assert (>= {n} {lo}))")
            out.append(f"(assert (<= {n} {lo + self.r.randint(0, 3)}.{self.r.randint(0, 9)}))")
        return out

    def text(self) -> str:
        r = self.r
        decls = [f"(declare-const {n} Real)" for n in self.x_names + self.y_names]
        r.shuffle(decls)
        body = []
        if r.random() < 0.6:
            body += self.box()
        if r.random() < 0.4:  # a disjunction over input regions (VNN-COMP's ACAS Xu style)
            body.append(f"(assert {self.formula(2, outputs=False)})")
        for _ in range(r.randint(1, 3)):
            body.append(f"(assert {self.formula(3)})")
        forms = decls + body
        if r.random() < 0.3:
            forms.insert(r.randint(0, len(forms)), "; a comment (assert (<= X_0 -100)) )(\n")
        if r.random() < 0.2:
            forms.append("(check-sat)")
        sep = r.choice(["\n", " ", "\n\n", "\t"])
        return sep.join(forms) + ("\n" if r.random() < 0.5 else "")


def differential_run(tmp_path, seeds, odd_names):
    accepted = refused = 0
    for seed in seeds:
        g = Gen(random.Random(seed), odd_names)
        text = g.text()
        path = tmp_path / f"g{seed}.vnnlib"
        path.write_text(text)
        try:
            read_vnnlib(str(path))
            accepted += 1
        except InputError:
            refused += 1
            continue
        canonical = g.x_names == [f"X_{i}" for i in range(g.n_x)] and g.y_names == [
            f"Y_{j}" for j in range(g.n_y)]
        assert canonical, f"seed {seed}: a non-canonical name was accepted:\n{text}"
        problem = same_set(str(path), text, g.x_names, g.y_names)
        assert problem is None, f"seed {seed}:\n{text}\n{problem}"
    return accepted, refused


def test_generated_files_read_as_z3_reads_them(tmp_path):
    accepted, refused = differential_run(tmp_path, range(1000), odd_names=False)
    # canonical names, linear terms: all accepted but the few with a constant product term
    assert accepted >= 960, (accepted, refused)


def test_generated_files_with_odd_names_are_refused_or_read_as_z3_reads_them(tmp_path):
    accepted, refused = differential_run(tmp_path, range(10_000, 10_800), odd_names=True)
    assert accepted >= 150 and refused >= 150, (accepted, refused)


@pytest.mark.slow
def test_generated_files_many(tmp_path):
    accepted, refused = differential_run(tmp_path, range(100_000, 105_000), odd_names=True)
    assert accepted >= 1000 and refused >= 1000, (accepted, refused)


# The same property, shrinking: hypothesis drives the generator's seed and shape.
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), odd=st.booleans())
def test_any_generated_file(tmp_path, seed, odd):
    differential_run(tmp_path, [seed], odd_names=odd)


# --- numbers z3's tokenizer does not read: checked against their decimal meaning ----------


@pytest.mark.parametrize("text,value", [
    ("1e-3", "1/1000"), ("-2.5E-1", "-1/4"), ("1.5e2", "150"), ("+3", "3"), ("7/2", "7/2"),
    ("-0.", "0"), ("000.500", "1/2"),
])
def test_numbers_beyond_smtlib_keep_their_decimal_meaning(tmp_path, text, value):
    from fractions import Fraction

    p = tmp_path / "n.vnnlib"
    p.write_text(f"(declare-const X_0 Real)(declare-const Y_0 Real)(assert (<= X_0 {text}))"
                 "(assert (>= X_0 -1000))(assert (<= Y_0 0))")
    (box,) = read_vnnlib(str(p)).boxes
    assert Fraction(int(box.upper[0].p), int(box.upper[0].q)) == Fraction(value)


@pytest.mark.parametrize("formula", ["(and)", "(or)", "(or (and) (<= X_0 1))"])
def test_empty_and_or_are_refused(tmp_path, formula):
    p = tmp_path / "e.vnnlib"
    p.write_text(f"(declare-const X_0 Real)(declare-const Y_0 Real)(assert {formula})")
    with pytest.raises(InputError, match="at least one formula"):
        read_vnnlib(str(p))
