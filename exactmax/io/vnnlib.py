"""VNN-LIB 1.0 properties, read exactly (SMT-LIB s-expressions over Real constants).

    (declare-const X_0 Real) ... (declare-const Y_0 Real) ...
    (assert (<= X_0 0.5)) (assert (or (and (>= Y_0 Y_1) ...) ...))

A file states the *negation* of a safety property: "sat" means some input x satisfies every
assertion together with the output y = f(x).  Atoms are linear comparisons (<=, >=, <, >, =)
of terms built from the variables and constants with +, -, and * by a constant; formulas
combine them with ``and`` and ``or``.  Constants are read from their decimal text
("-0.3" is -3/10, "1e-3" is 1/1000), never through a float.

Names: every variable is resolved through one table built from the declarations, name ->
(X or Y, index).  A declared name must be X_i or Y_j with i, j written as canonical decimals
(``X_0``, ``X_12``; not ``X_01``, ``X_+1`` or other digits), so that a name and its index are
one and the same text; the indices of each letter must be 0, 1, ..., n-1 (declared in any
order); a name used but not declared, or declared twice, is an error.  Refusing other
spellings, rather than accepting them, keeps one name per coordinate: a file that writes
``X_01`` and ``X_1`` for the same input (or means X_1 by ``X_01``) is refused, not guessed.

The assertions are put in disjunctive normal form and each disjunct is split into its input
part (rows over x alone, non-strict: the polyhedron {x : A x <= b}) and the rest (rows over
(x, y)); disjuncts with the same input part share one ``kernel.property.Case``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cmp_to_key
from itertools import zip_longest

from ..kernel.affine import nonzero
from ..kernel.affine import row_of as sparse_row
from ..kernel.certificate import Row
from ..kernel.polyhedron import Box, Polyhedron
from ..kernel.property import Case
from ..kernel.rational import ONE, ZERO, Q
from .errors import InputError
from .jsonfile import read_text_file
from .nesting import collection_paused
from .numbers import NumberSyntaxError, parse_rational

MAX_DISJUNCTS = 100_000

Comparison = tuple[dict[str, Q], Q, bool]
"""(lin, c, strict): the comparison sum_v lin[v] v + c >= 0 (> 0 when strict), over the
variables X_i and Y_j by name."""
_VAR = re.compile(r"([XY])_(0|[1-9][0-9]*)")
_VARLIKE = re.compile(r"([XY])_(\S*)")
# SMT-LIB's whitespace is ASCII (space, tab, line feed, carriage return): any other character
# belongs to a word, so "X_0<no-break space>1" is one (undeclared) name, never X_0 and 1.
_TOKEN = re.compile(r"[ \t\r\n]+|;[^\n]*|\(|\)|[^ \t\r\n();]+")


@dataclass(frozen=True, slots=True)
class Atom:
    """A symbol or a number's text, with its place in the file."""

    text: str
    line: int
    col: int


@dataclass(frozen=True, slots=True)
class SList:
    items: tuple
    line: int
    col: int


@dataclass(frozen=True, slots=True)
class VnnProperty:
    """The cases of the property over n_x inputs and n_y outputs; ``sha256`` of the file."""

    n_x: int
    n_y: int
    cases: tuple[Case, ...]
    disjuncts: int
    sha256: str
    boxes: tuple = ()  # per case: its input set as a Box (rows in Box order), or None


class _Syntax(Exception):
    def __init__(self, at: Atom | SList | None, message: str):
        super().__init__(message)
        self.line: int = at.line if at is not None else 0
        self.col: int = at.col if at is not None else 0


def parse_sexprs(text: str) -> list:
    """The top-level s-expressions of ``text`` (SList / Atom, with lines and columns)."""
    stack: list[tuple[list, int, int]] = [([], 0, 0)]
    line, line_start = 1, 0
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        assert m is not None  # every character starts a token: space, ';', a paren or a word
        tok = m.group()
        col = pos - line_start + 1
        if tok == "(":
            stack.append(([], line, col))
        elif tok == ")":
            if len(stack) == 1:
                raise _Syntax(
                    Atom(")", line, col), "unbalanced ')': expected '(' or the end of the file"
                )
            items, l0, c0 = stack.pop()
            stack[-1][0].append(SList(tuple(items), l0, c0))
        elif tok[0] not in " \t\r\n;":
            if "|" in tok or '"' in tok:
                # |quoted symbols| and "strings" may hold ';' and parentheses: read by these
                # rules they would not mean what SMT-LIB says, so they are refused.
                raise _Syntax(
                    Atom(tok, line, col),
                    f"expected a name, a number or a parenthesis, got {tok!r}: quoted symbols "
                    "|...| and string literals are not read by exactmax (write X_i, Y_j)",
                )
            stack[-1][0].append(Atom(tok, line, col))
        newlines = tok.count("\n")
        if newlines:
            line += newlines
            line_start = pos + tok.rindex("\n") + 1
        pos = m.end()
    if len(stack) > 1:
        _, l0, c0 = stack[-1]
        raise _Syntax(
            Atom("(", l0, c0), "this '(' is never closed: expected ')' before the end of the file"
        )
    return stack[0][0]


class _Reader:
    def __init__(self):
        self.sorts: dict[str, Atom] = {}  # declared name -> its declaration (in order)
        self.table: dict[str, tuple[str, int]] = {}  # declared name -> (letter, index)

    def declare(self, form: SList) -> None:
        if (
            len(form.items) != 3
            or not isinstance(form.items[1], Atom)
            or not isinstance(form.items[2], Atom)
        ):
            raise _Syntax(form, "expected (declare-const X_i Real) or (declare-const Y_j Real)")
        name, sort = form.items[1], form.items[2]
        m = _VAR.fullmatch(name.text)
        if m is None:
            near = _VARLIKE.fullmatch(name.text)
            raise _Syntax(
                name,
                f"expected a variable named X_i or Y_j with i, j decimal numbers without "
                f"leading zeros (X_0, X_1, ...), got {name.text!r}"
                + (
                    f" (write {near.group(1)}_{int(near.group(2))})"
                    if near and near.group(2).isascii() and near.group(2).isdigit()
                    else ""
                ),
            )
        if sort.text != "Real":
            raise _Syntax(sort, f"expected the sort Real, got {sort.text!r}")
        if name.text in self.sorts:
            raise _Syntax(name, f"{name.text} is declared twice")
        self.sorts[name.text] = name
        self.table[name.text] = (m.group(1), int(m.group(2)))

    def term(self, t) -> tuple[dict, Q]:
        """A linear term: ({variable: coefficient}, constant)."""
        if isinstance(t, Atom):
            if t.text in self.table:
                return {t.text: ONE}, ZERO
            if _VARLIKE.fullmatch(t.text):
                raise _Syntax(t, f"{t.text} is used before its declare-const")
            try:
                return {}, parse_rational(t.text)
            except NumberSyntaxError:
                raise _Syntax(
                    t, f"expected a declared variable or a number, got {t.text!r}"
                ) from None
        head = self._head(
            t, ("+", "-", "*"), "a term: a variable, a number, or (+ ...), (- ...), (* c t)"
        )
        args = [self.term(a) for a in t.items[1:]]
        if not args:
            raise _Syntax(t, f"expected at least one argument of {head}")
        if head == "+" or (head == "-" and len(args) > 1):
            out, c = dict(args[0][0]), args[0][1]
            for xs, k in args[1:]:
                s = ONE if head == "+" else -ONE
                for v, a in xs.items():
                    out[v] = out.get(v, ZERO) + s * a
                c += s * k
            return out, c
        if head == "-":
            return {v: -a for v, a in args[0][0].items()}, -args[0][1]
        out, c = {}, ONE
        for xs, k in args:
            if xs and out:
                raise _Syntax(
                    t,
                    "expected a product with at most one non-constant factor "
                    "(the property must be linear)",
                )
            if xs:
                out = {v: a * c for v, a in xs.items()}
                c = k * c
            else:
                out = {v: a * k for v, a in out.items()}
                c = c * k
        return out, c

    def _head(self, t: SList, allowed, what: str) -> str:
        if not t.items or not isinstance(t.items[0], Atom) or t.items[0].text not in allowed:
            raise _Syntax(t.items[0] if t.items else t, f"expected {what}")
        return t.items[0].text

    def formula(self, f) -> list[list[Comparison]]:
        """The DNF of f: a list of conjunctions, each a list of rows (over named variables)."""
        if isinstance(f, Atom):
            raise _Syntax(
                f,
                "expected a formula: (and ...), (or ...) or a comparison "
                "(<= a b), (>= a b), (< a b), (> a b), (= a b)",
            )
        head = self._head(
            f,
            ("and", "or", "<=", ">=", "<", ">", "="),
            "a formula: (and ...), (or ...) or a comparison (<= a b), "
            "(>= a b), (< a b), (> a b), (= a b)",
        )
        args = f.items[1:]
        if head in ("and", "or") and not args:
            # SMT-LIB gives (and) and (or) no meaning (z3 refuses them); (or) as "false"
            # would make every property vacuously unsat.
            raise _Syntax(f, f"expected at least one formula in ({head} ...)")
        if head == "or":
            out = [c for a in args for c in self.formula(a)]
            if len(out) > MAX_DISJUNCTS:
                raise _Syntax(f, f"more than {MAX_DISJUNCTS} disjuncts")
            return out
        if head == "and":
            out = [[]]
            for a in args:
                out = _product(out, self.formula(a), f)
            return out
        if len(args) != 2:
            raise _Syntax(f, f"expected ({head} a b) with two terms, got {len(args)}")
        (xa, ca), (xb, cb) = self.term(args[0]), self.term(args[1])
        # a - b as one linear form
        diff = dict(xa)
        for v, k in xb.items():
            diff[v] = diff.get(v, ZERO) - k
        c = ca - cb
        if head in (">=", ">"):
            return [[(diff, c, head == ">")]]
        neg = {v: -k for v, k in diff.items()}
        if head in ("<=", "<"):
            return [[(neg, -c, head == "<")]]
        return [[(diff, c, False), (neg, -c, False)]]


def _product(a, b, at):
    if len(a) * len(b) > MAX_DISJUNCTS:
        raise _Syntax(
            at, f"the property has more than {MAX_DISJUNCTS} disjuncts in disjunctive normal form"
        )
    return [x + y for x in a for y in b]


def read_vnnlib(path: str) -> VnnProperty:
    """The property of a VNN-LIB 1.0 file; InputError "file:line:column: expected ..."."""
    text = read_text_file(path, "a VNN-LIB text file")
    try:
        with collection_paused():
            return _read(text, hashlib.sha256(text.encode()).hexdigest())
    except _Syntax as e:
        where = f"{path}:{e.line}:{e.col}" if e.line else path
        raise InputError(where, "", str(e)) from None
    except RecursionError:
        raise InputError(path, "", "formulas nested too deeply") from None


def _read(text: str, sha: str) -> VnnProperty:
    r = _Reader()
    dnf: list[list[Comparison]] = [[]]
    asserted = False
    for form in parse_sexprs(text):
        if not isinstance(form, SList) or not form.items or not isinstance(form.items[0], Atom):
            raise _Syntax(
                form.items[0] if isinstance(form, SList) and form.items else form,
                "expected (declare-const ...) or (assert ...)",
            )
        head = form.items[0].text
        if head == "declare-const":
            r.declare(form)
        elif head == "assert":
            if len(form.items) != 2:
                raise _Syntax(form, "expected (assert F) with one formula")
            dnf = _product(dnf, r.formula(form.items[1]), form)
            asserted = True
        elif head in ("set-logic", "check-sat", "get-model", "exit", "set-info"):
            continue
        else:
            raise _Syntax(form.items[0], f"expected declare-const or assert, got {head!r}")
    if not asserted:
        raise _Syntax(None, "expected at least one (assert ...)")
    n_x, n_y = _count(r, "X"), _count(r, "Y")
    # The one place a name becomes a coordinate: (x, y) position through the declarations.
    position = {name: i if letter == "X" else n_x + i for name, (letter, i) in r.table.items()}
    # A comparison shared by many disjuncts (the input box of every output disjunct) is made
    # dense once: its row, and for an input row its order key (the row's text) and number.
    rows: dict[int, tuple] = {}
    inputs_by_key: dict[tuple, int] = {}
    input_rows: list[tuple] = []

    def row_of(comparison: Comparison) -> tuple:
        lin, c, strict = comparison
        coeffs: dict[int, Q] = {}
        for name, k in lin.items():
            coeffs[position[name]] = coeffs.get(position[name], ZERO) + k
        if strict or any(v for p, v in coeffs.items() if p >= n_x):
            a = [ZERO] * (n_x + n_y)
            for p, v in coeffs.items():
                a[p] = v
            return False, Row(tuple(a), c, strict)
        neg = sorted((p, -v) for p, v in coeffs.items() if v)  # -a.x <= c
        key = (tuple((p, str(v)) for p, v in neg), str(c))
        if key not in inputs_by_key:
            inputs_by_key[key] = len(input_rows)
            input_rows.append((key, (sparse_row(n_x, neg), c)))
        return True, inputs_by_key[key]

    groups: dict = {}
    for conj in dnf:
        inputs, outputs = set(), []
        for comparison in conj:
            made = rows.get(id(comparison))
            if made is None:
                made = rows[id(comparison)] = row_of(comparison)
            if made[0]:
                inputs.add(made[1])
            else:
                outputs.append(made[1])
        ordered = tuple(sorted(inputs, key=lambda i: _text_order(input_rows[i][0])))
        groups.setdefault(ordered, []).append(tuple(outputs))
    cases, boxes = [], []
    for ordered, outs in groups.items():
        key = [input_rows[i][1] for i in ordered]
        box = _as_box(key, n_x)
        P = (
            _box_rows(box)
            if box is not None
            else Polyhedron(tuple(a for a, _ in key), tuple(b for _, b in key), n_x)
        )
        cases.append(Case(P, tuple(outs)))
        boxes.append(box)
    return VnnProperty(n_x, n_y, tuple(cases), len(dnf), sha, tuple(boxes))


def _as_box(rows, n: int) -> Box | None:
    """The box {x : rows} when every row bounds one coordinate and every coordinate has a
    lower and an upper bound (the tightest are kept: the same set), else None."""
    lower: list[Q | None] = [None] * n
    upper: list[Q | None] = [None] * n
    for a, b in rows:
        nz = list(nonzero(a))
        if len(nz) != 1:
            return None
        ((i, v),) = nz
        bound = b / v
        old = upper[i] if v > 0 else lower[i]
        if v > 0:
            upper[i] = bound if old is None else min(old, bound)
        else:
            lower[i] = bound if old is None else max(old, bound)
    lo = [v for v in lower if v is not None]
    hi = [v for v in upper if v is not None]
    if len(lo) < n or len(hi) < n:
        return None
    return Box(tuple(lo), tuple(hi))


def _box_rows(box: Box) -> Polyhedron:
    """``box.as_polyhedron()`` (x_i <= upper_i, then -x_i <= -lower_i), its rows sparse."""
    d = box.dim
    rows = [sparse_row(d, [(i, ONE)]) for i in range(d)] + [
        sparse_row(d, [(i, -ONE)]) for i in range(d)
    ]
    return Polyhedron(tuple(rows), tuple(box.upper) + tuple(-v for v in box.lower), d)


@cmp_to_key
def _text_order(a, b) -> int:
    """The order of two input rows' texts: the tuples (str(a_0), ..., str(a_{n-1}), str(c)), "0"
    where a_j = 0 (the order of the cases' input rows, on which their hashes depend), compared
    from the rows' entries that are not zero, ((j, str(a_j)), ...), str(c)."""
    end = (float("inf"), "")
    for (ja, sa), (jb, sb) in zip_longest(a[0], b[0], fillvalue=end):
        if (ja, sa) != (jb, sb):
            x, y = (sa, sb) if ja == jb else (sa, "0") if ja < jb else ("0", sb)
            return (x > y) - (x < y)
    return (a[1] > b[1]) - (a[1] < b[1])


def _count(r: _Reader, letter: str) -> int:
    """n when the declared indices of ``letter`` are exactly 0, ..., n-1 (n >= 1)."""
    found = sorted(i for lt, i in r.table.values() if lt == letter)
    if found != list(range(len(found))):
        missing = next(i for i in range(len(found) + 1) if i not in found)
        first = r.sorts[next(n for n, (lt, _) in r.table.items() if lt == letter)]
        raise _Syntax(
            first,
            f"expected {letter}_0 to {letter}_{len(found) - 1} declared, but "
            f"{letter}_{missing} is missing",
        )
    if not found:
        raise _Syntax(None, f"expected at least one {letter}_i variable declared")
    return len(found)
