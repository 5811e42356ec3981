"""VNN-LIB 2.0 queries, read through the ``vnnlib`` package, every constant exact.

    (vnnlib-version <2.0>)
    (declare-network f (declare-input X real [1,2]) (declare-output Y real [2]))
    (assert (and (<= -0.5 X[0,0]) (<= X[0,0] 0.5) ...))
    (assert (or (> Y[0] Y[1]) (<= Y[1] -1.0)))

A query asks for an assignment of every declared tensor with y = f(x) for each network
that satisfies the conjunction of its assertions ("sat"), or says there is none ("unsat").
The ``vnnlib`` package parses and type-checks the text; this module reads its typed syntax
tree and takes each constant from its lexeme ("-0.3" is -3/10), never through a float.

Tensors are flattened in row-major order: X[i_0, ..., i_k] of shape [s_0, ..., s_k] is
coordinate sum_t i_t * prod_{u > t} s_u of the network's input (or output) vector.
Arithmetic is linear: +, -, negation and * with at most one non-constant factor; each
comparison a ~ b becomes rows over the variables, and the assertions are put in
disjunctive normal form (``!=`` is ``<`` or ``>``).

Two shapes of query are supported, each mapped to what exactmax decides exactly:

- **One network** (theories SNET, SIO, NH): the same ``VnnProperty`` as the VNN-LIB 1.0
  reader (``io/vnnlib.py``): disjuncts grouped into cases by their input part, a case's
  input set the polyhedron of its non-strict rows over x alone, its forbidden conjunctions
  the other rows over (x, y).
- **Two networks**, one declared ``equal-to`` or ``isomorphic-to`` the other (MENET,
  MINET): every disjunct must tie the second network's inputs to the first's
  ((== X2[i] X[i]) for every i), constrain the first's inputs by non-strict rows, and ask
  for one output coordinate to differ (one strict row c (Y[j] - Y2[j]) > 0), the
  disjuncts of one input set covering both signs of every j.  Such a query is
  "exists x in P with f(x) != g(x)", the negation of the equivalence f = g on P, which
  ``exactmax equiv`` decides (``Equivalence``: one input set per group of disjuncts).

Anything else is refused with its line and column: hidden nodes, several inputs or
outputs per network, element types other than ``real`` (exactmax's analysis is over the
reals, not float32 semantics), products of variables, multi-network queries of another
shape.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from ..kernel.certificate import Row
from ..kernel.polyhedron import Domain, Polyhedron
from ..kernel.property import Case
from ..kernel.rational import ONE, ZERO, Q
from .errors import InputError
from .jsonfile import read_text_file
from .nesting import collection_paused
from .numbers import NumberSyntaxError, parse_rational
from .vnnlib import MAX_DISJUNCTS, VnnProperty, _as_box

REAL_TYPES = ("real", "Real")
"""The element type exactmax supports; the ``vnnlib`` package knows "real" (and reads
"Real", the spelling of the standard's examples, as an unknown type)."""

_IS_V2 = re.compile(r"^[^;\n]*\(\s*(vnnlib-version|declare-network)\b", re.MULTILINE)
_IS_V1 = re.compile(r"^([^;\n]*)\(\s*declare-const\b", re.MULTILINE)

Key = tuple[int, str, int]  # (network, "x" or "y", flat coordinate)
Lin = tuple[dict[Key, Q], Q]  # sum of coefficient * variable, plus a constant
Comparison = tuple[dict[Key, Q], Q, bool, tuple[int, int]]
"""lin . v + c >= 0 (> 0 when strict), and the (line, column) of the comparison it is from."""


class QueryError(Exception):
    """A bad or unsupported query: ``line`` and ``col`` (1-based; 0 when unknown)."""

    def __init__(self, line: int, col: int, message: str):
        super().__init__(message)
        self.line, self.col = line, col


@dataclass(frozen=True, slots=True)
class Tensor:
    """A declared input or output: its name, element type as written, shape, and size."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True, slots=True)
class NetworkDecl:
    name: str
    input: Tensor
    output: Tensor
    equal_to: str | None  # the network this one is declared equal to (the same model)
    isomorphic_to: str | None  # the network this one has the interface of
    line: int


@dataclass(frozen=True, slots=True)
class Equivalence:
    """The query "exists x in one of ``domains`` with a(x) != b(x)"; ``a``, ``b`` index
    ``Query.networks`` (a declared first)."""

    a: int
    b: int
    domains: tuple[Domain, ...]
    disjuncts: int


@dataclass(frozen=True, slots=True)
class Query:
    networks: tuple[NetworkDecl, ...]
    sha256: str
    property: VnnProperty | None  # one network
    equivalence: Equivalence | None  # two networks


def is_vnnlib2(text: str) -> bool:
    """Does the text declare a VNN-LIB 2.0 query ((vnnlib-version ...) or
    (declare-network ...) outside a comment)?  1.0 files use declare-const."""
    return _IS_V2.search(text) is not None


def read_query(path: str) -> Query:
    """The query of a VNN-LIB 2.0 file; InputError "file:line:column: ..." otherwise."""
    text = read_text_file(path, "a VNN-LIB text file")
    try:
        return parse_query(text, hashlib.sha256(text.encode()).hexdigest())
    except QueryError as e:
        raise InputError(f"{path}:{e.line}:{e.col}" if e.line else path, "", str(e)) from None


def read_property(path: str) -> VnnProperty:
    """The single-network property of a VNN-LIB file of either version (1.0 read by
    ``io/vnnlib.py``); a 2.0 query of two networks is refused (``exactmax vnnlib verify``
    decides those)."""
    from .vnnlib import read_vnnlib

    text = read_text_file(path, "a VNN-LIB text file")
    if not is_vnnlib2(text):
        return read_vnnlib(path)
    try:
        return single_property(parse_query(text, hashlib.sha256(text.encode()).hexdigest()))
    except QueryError as e:
        raise InputError(f"{path}:{e.line}:{e.col}" if e.line else path, "", str(e)) from None


def single_property(q: Query) -> VnnProperty:
    if q.property is None:
        names = ", ".join(n.name for n in q.networks)
        raise QueryError(
            q.networks[1].line,
            1,
            f"the query declares {len(q.networks)} networks ({names}); a command for one "
            "network reads queries of one, use exactmax vnnlib verify QUERY --network "
            "NAME=FILE ... for this one",
        )
    return q.property


# ------------------------------------------------------------------------------ parsing


def parse_query(text: str, sha: str) -> Query:
    """The query of a VNN-LIB 2.0 text; QueryError with the line and column otherwise."""
    import vnnlib

    if "\x00" in text:
        # the package reads a C string: it stops at a NUL, and would silently drop every
        # assertion after it (a false "sat": the output condition gone)
        line = text.count("\n", 0, text.index("\x00")) + 1
        col = text.index("\x00") - (text.rfind("\n", 0, text.index("\x00")) + 1) + 1
        raise QueryError(
            line,
            col,
            "a NUL character: the vnnlib package would read the query only up to it "
            "(dropping what follows); remove it",
        )
    try:
        with collection_paused():
            ast = vnnlib.parse_query_string(text)
    except vnnlib.VNNLibException as e:
        raise _version_1(text) or _library_error(text, str(e)) from None
    except RecursionError:
        raise QueryError(0, 0, "formulas nested too deeply") from None
    except UnicodeDecodeError:
        # the package's error message cuts a non-ASCII token in the middle of its UTF-8
        raise _non_ascii(text) from None
    except (IndexError, ValueError, OverflowError) as e:
        # the package's own C++ conversions: std::stoll ("stoll", an integer beyond 64 bits)
        # and std::stod ("stod", a real beyond float64's range)
        raise _beyond_package(text, e) from None
    reader = _Reader(text)
    nets = tuple(reader.network(n) for n in ast.networks)
    try:
        dnf: list[list[Comparison]] = [[]]
        with collection_paused():
            for a in ast.assertions:
                dnf = _product(dnf, reader.formula(a.expr), reader.first_place(a.expr))
    except RecursionError:
        raise QueryError(0, 0, "formulas nested too deeply") from None
    if not ast.assertions:
        raise QueryError(0, 0, "expected at least one (assert ...)")
    if len(nets) == 1:
        return Query(nets, sha, _property(nets[0], dnf, sha), None)
    return Query(nets, sha, None, _equivalence(nets, dnf, reader))


_PARSE = re.compile(r"line (\d+), column (\d+): (.*)", re.DOTALL)


def _version_1(text: str) -> QueryError | None:
    """The error for a VNN-LIB 1.0 file (declare-const, no 2.0 declaration), with the command
    that reads it; None for any other text."""
    m = _IS_V1.search(text)
    if m is None or is_vnnlib2(text):
        return None
    line = text.count("\n", 0, m.start()) + 1
    return QueryError(
        line,
        len(m.group(1)) + 1,
        "expected a VNN-LIB 2.0 query, found a VNN-LIB 1.0 file ((declare-const X_0 Real) "
        "...): decide it with exactmax check NET.onnx FILE",
    )


def _library_error(text: str, message: str) -> QueryError:
    """The ``vnnlib`` package's error as one QueryError: a syntax error carries its line and
    column; a type error (JSON) its line and offending symbol, whose column is found."""
    m = _PARSE.search(message)
    if m:
        token = m.group(3).strip()
        what = f"at {token}" if token not in ("''", "") else "at the end of the input"
        return QueryError(
            int(m.group(1)),
            int(m.group(2)),
            f"syntax error {what}: expected a VNN-LIB 2.0 query ((vnnlib-version <2.0>), "
            "then (declare-network ...) declarations, then (assert ...) forms)",
        )
    try:
        report = json.loads(message)
        err = report["errors"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return QueryError(0, 0, f"the vnnlib package refused the query: {message.strip()}")
    line = int(err.get("line") or 0)
    symbol = str(err.get("offendingSymbol") or "")
    col = _column(text, line, symbol) if line and symbol else 0
    said = str(err.get("message") or err.get("errorCode") or "invalid query")
    hint = str(err.get("hint") or "")
    return QueryError(
        line,
        col,
        f"{said}" + (f" ({symbol})" if symbol else "") + (f": {hint}" if hint else ""),
    )


def _non_ascii(text: str) -> QueryError:
    """The error for a non-ASCII character outside a comment (the grammar is ASCII)."""
    for n, line in enumerate(text.split("\n"), 1):
        code = line.split(";", 1)[0]
        for c, ch in enumerate(code, 1):
            if not ch.isascii():
                return QueryError(
                    n,
                    c,
                    f"unexpected character {ch!r} (U+{ord(ch):04X}): a VNN-LIB 2.0 query is "
                    "ASCII text outside comments",
                )
    return QueryError(0, 0, "the vnnlib package refused the query (not ASCII text)")


def _beyond_package(text: str, e: Exception) -> QueryError:
    """The error for a number the ``vnnlib`` package cannot convert: it reads an integer as a
    64-bit one and a real as a float64 before exactmax takes its lexeme."""
    for n, line in enumerate(text.split("\n"), 1):
        code = line.split(";", 1)[0]
        for m in re.finditer(r"(?<![\w.\[])-?\d+(\.\d*)?(?![\w.])", code):
            tok = m.group()
            if abs(float(tok)) > 1.7976931348623157e308 or (
                m.group(1) is None
                and (len(tok.lstrip("-").lstrip("0")) > 19 or abs(int(tok)) >= 2**63)
            ):
                shown = tok if len(tok) <= 24 else f"{tok[:12]}...{tok[-6:]} ({len(tok)} chars)"
                return QueryError(
                    n,
                    m.start() + 1,
                    f"the number {shown} is beyond what the vnnlib package reads (integers "
                    "of 64 bits, reals within float64's range), though exactmax would read it "
                    "exactly; write it with a smaller magnitude",
                )
    return QueryError(
        0, 0, f"the vnnlib package could not read the query ({type(e).__name__}: {e})"
    )


def _column(text: str, line: int, token: str) -> int:
    """1-based column of the first ``token`` on the 1-based ``line`` (0 if not there)."""
    lines = text.split("\n")
    if not 0 < line <= len(lines):
        return 0
    at = lines[line - 1].find(token)
    return at + 1 if at >= 0 else 0


def _locate(text: str, pattern: str) -> tuple[int, int]:
    m = re.search(pattern, text)
    if m is None:
        return 0, 0
    line = text.count("\n", 0, m.start()) + 1
    return line, m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1


class _Reader:
    def __init__(self, text: str):
        self.text = text
        self.nets: dict[str, int] = {}
        self.vars: dict[str, tuple[int, str, Tensor]] = {}

    # declarations ------------------------------------------------------------------

    def network(self, n: Any) -> NetworkDecl:
        name = str(n.name)
        line, col = _locate(self.text, r"\(\s*declare-network\s+" + re.escape(name) + r"(?![\w])")
        if name in self.nets:
            line, col = self._nth(r"\(\s*declare-network\s+" + re.escape(name) + r"(?![\w])", 2)
            raise QueryError(line, col, f"network {name} is declared twice")
        if len(n.hidden):
            h = n.hidden[0]
            raise QueryError(
                *self._decl("hidden", str(h.name)),
                f"declare-hidden ({h.name}) is not supported: exactmax reads a network's "
                "input and output only (theory NH)",
            )
        for kind, items in (("input", n.inputs), ("output", n.outputs)):
            if len(items) != 1:
                where = self._decl(kind, str(items[1].name)) if len(items) > 1 else (line, col)
                raise QueryError(
                    *where,
                    f"network {name} declares {len(items)} {kind}s; exactmax supports one "
                    f"input and one output tensor per network (theory SIO)",
                )
        tensors = []
        for kind, d in (("input", n.inputs[0]), ("output", n.outputs[0])):
            tname = str(d.name)
            dline, dcol = self._decl(kind, tname)
            m = re.compile(
                r"\(\s*declare-" + kind + r"\s+" + re.escape(tname) + r"\s+([^\s\[\]()]+)"
            ).search(self.text)
            dtype = m.group(1) if m else str(d.dtype)
            if dtype not in REAL_TYPES:
                raise QueryError(
                    dline,
                    dcol,
                    f"{tname} has the element type {dtype}: exactmax supports the element type "
                    "real only (its analysis is exact over the reals, not float semantics); "
                    "declare it real to ask about the real-valued network",
                )
            shape = tuple(int(s) for s in d.shape)
            if any(s <= 0 for s in shape):
                raise QueryError(dline, dcol, f"{tname} has an empty shape {list(shape)}")
            t = Tensor(tname, dtype, shape)
            self.vars[tname] = (len(self.nets), "x" if kind == "input" else "y", t)
            tensors.append(t)
        self.nets[name] = len(self.nets)
        eq, iso = str(n.equal_to or ""), str(n.isometric_to or "")
        return NetworkDecl(name, tensors[0], tensors[1], eq or None, iso or None, line)

    def _decl(self, kind: str, name: str) -> tuple[int, int]:
        return _locate(self.text, r"\(\s*declare-" + kind + r"\s+" + re.escape(name) + r"(?![\w])")

    def _nth(self, pattern: str, k: int) -> tuple[int, int]:
        ms = list(re.finditer(pattern, self.text))
        if len(ms) < k:
            return 0, 0
        m = ms[k - 1]
        return (
            self.text.count("\n", 0, m.start()) + 1,
            m.start() - (self.text.rfind("\n", 0, m.start()) + 1) + 1,
        )

    # places ------------------------------------------------------------------------

    def first_place(self, node: Any) -> tuple[int, int]:
        """(line, column) of the first variable or constant under ``node``."""
        stack = [node]
        while stack:
            x = stack.pop(0)
            line = getattr(x, "line", None)
            if isinstance(line, int) and line > 0:
                token = getattr(x, "lexeme", None) or getattr(x, "name", None) or ""
                return line, _column(self.text, line, str(token))
            stack = list(x.children()) + stack
        return 0, 0

    # terms -------------------------------------------------------------------------

    def term(self, t: Any) -> Lin:
        import vnnlib

        if isinstance(t, vnnlib.Var):
            net, side, tensor = self.vars[str(t.name)]
            idx = [int(i) for i in t.indices]
            if len(idx) != len(tensor.shape) or not all(
                0 <= i < s for i, s in zip(idx, tensor.shape)
            ):
                # the library checks the rank and i < s but lets a negative index through,
                # which would name no element (the constraint on it was lost: #36)
                raise QueryError(
                    *self.first_place(t),
                    f"index {idx} of {t.name} is outside its shape {list(tensor.shape)}: "
                    f"expected {len(tensor.shape)} indices with 0 <= i < size",
                )
            flat = 0
            for i, s in zip(idx, tensor.shape):
                flat = flat * s + i
            return {(net, side, flat): ONE}, ZERO
        if isinstance(t, vnnlib.Literal):
            try:
                return {}, parse_rational(str(t.lexeme))
            except NumberSyntaxError as e:
                raise QueryError(*self.first_place(t), f"constant {t.lexeme}: {e}") from None
        if isinstance(t, vnnlib.Negate):
            lin, c = self.term(t.expr)
            return {v: -a for v, a in lin.items()}, -c
        if isinstance(t, (vnnlib.Plus, vnnlib.Minus)):
            args = (
                [t.head, *t.rest] if isinstance(t, vnnlib.Minus) else list(t.args)
            )  # subtraction associates to the left: a - b - c
            first, c = self.term(args[0])
            total = dict(first)
            sign = -ONE if isinstance(t, vnnlib.Minus) else ONE
            for a in args[1:]:
                lin, k = self.term(a)
                for v, w in lin.items():
                    total[v] = total.get(v, ZERO) + sign * w
                c += sign * k
            return total, c
        if isinstance(t, vnnlib.Multiply):
            out: dict[Key, Q] = {}
            c = ONE
            for a in t.args:
                lin, k = self.term(a)
                if lin and out:
                    line, col = self.first_place(t)
                    raise QueryError(
                        line,
                        self.text.split("\n")[line - 1].rfind("(*", 0, col) + 1 if line else 0,
                        "a product of two variables: exactmax supports linear queries only "
                        "(theory LIN: at most one non-constant factor in (* ...))",
                    )
                if lin:
                    out = {v: w * c for v, w in lin.items()}
                    c = k * c
                else:
                    out = {v: w * k for v, w in out.items()}
                    c = c * k
            return out, c
        raise QueryError(
            *self.first_place(t), f"unsupported arithmetic expression {type(t).__name__}"
        )

    # formulas ----------------------------------------------------------------------

    def formula(self, f: Any) -> list[list[Comparison]]:
        """The DNF of f: a list of conjunctions of comparisons lin . v + c >= 0 (> 0)."""
        import vnnlib

        if isinstance(f, vnnlib.Or):
            out = [c for a in f.args for c in self.formula(a)]
            if len(out) > MAX_DISJUNCTS:
                raise QueryError(*self.first_place(f), f"more than {MAX_DISJUNCTS} disjuncts")
            return out
        if isinstance(f, vnnlib.And):
            acc: list[list[Comparison]] = [[]]
            for a in f.args:
                acc = _product(acc, self.formula(a), self.first_place(f))
            return acc
        if not isinstance(f, vnnlib.Comparison):
            raise QueryError(*self.first_place(f), f"unsupported formula {type(f).__name__}")
        (la, ca), (lb, cb) = self.term(f.lhs), self.term(f.rhs)
        diff = dict(la)  # lhs - rhs
        for v, k in lb.items():
            diff[v] = diff.get(v, ZERO) - k
        diff = {v: k for v, k in diff.items() if k}
        c = ca - cb
        neg = {v: -k for v, k in diff.items()}
        at = self.first_place(f)
        if isinstance(f, (vnnlib.GreaterEqual, vnnlib.GreaterThan)):
            return [[(diff, c, isinstance(f, vnnlib.GreaterThan), at)]]
        if isinstance(f, (vnnlib.LessEqual, vnnlib.LessThan)):
            return [[(neg, -c, isinstance(f, vnnlib.LessThan), at)]]
        if isinstance(f, vnnlib.Equal):
            return [[(diff, c, False, at), (neg, -c, False, at)]]
        if isinstance(f, vnnlib.NotEqual):
            return [[(diff, c, True, at)], [(neg, -c, True, at)]]
        raise QueryError(*self.first_place(f), f"unsupported comparison {type(f).__name__}")


def _product(
    a: list[list[Comparison]], b: list[list[Comparison]], at: tuple[int, int]
) -> list[list[Comparison]]:
    if len(a) * len(b) > MAX_DISJUNCTS:
        raise QueryError(
            *at, f"the query has more than {MAX_DISJUNCTS} disjuncts in disjunctive normal form"
        )
    return [x + y for x in a for y in b]


# ----------------------------------------------------------------------- one network


def _property(net: NetworkDecl, dnf: list[list[Comparison]], sha: str) -> VnnProperty:
    """As ``io/vnnlib.py``: each disjunct split into its input part (non-strict rows over x
    alone, -a.x <= c) and the rest; disjuncts with the same input part share a case."""
    n_x, n_y = net.input.size, net.output.size
    groups: dict[tuple, list[tuple[Row, ...]]] = {}
    for conj in dnf:
        inputs, outputs = [], []
        for lin, c, strict, _ in conj:
            a = tuple(lin.get((0, "x", i), ZERO) for i in range(n_x)) + tuple(
                lin.get((0, "y", j), ZERO) for j in range(n_y)
            )
            if not any(a[n_x:]) and not strict:
                inputs.append((tuple(-v for v in a[:n_x]), c))
            else:
                outputs.append(Row(a, c, strict))
        key = tuple(sorted(set(inputs), key=lambda t: (tuple(map(str, t[0])), str(t[1]))))
        groups.setdefault(key, []).append(tuple(outputs))
    cases, boxes = [], []
    for key, outs in groups.items():
        box = _as_box(key, n_x)
        P = box.as_polyhedron() if box is not None else _polyhedron(key, n_x)
        cases.append(Case(P, tuple(outs)))
        boxes.append(box)
    return VnnProperty(n_x, n_y, tuple(cases), len(dnf), sha, tuple(boxes))


def _polyhedron(rows, n: int) -> Polyhedron:
    return Polyhedron(tuple(a for a, _ in rows), tuple(b for _, b in rows), n)


# ---------------------------------------------------------------------- two networks


def _equivalence(
    nets: tuple[NetworkDecl, ...], dnf: list[list[Comparison]], reader: _Reader
) -> Equivalence:
    if len(nets) != 2:
        raise QueryError(
            nets[2].line if len(nets) > 2 else 0,
            1,
            f"the query declares {len(nets)} networks; exactmax supports one network, or "
            "two of which one is declared equal-to or isomorphic-to the other (equivalence)",
        )
    a, b = nets
    if not ({b.equal_to, b.isomorphic_to} & {a.name} or {a.equal_to, a.isomorphic_to} & {b.name}):
        raise QueryError(
            b.line,
            1,
            f"networks {a.name} and {b.name}: a query of two networks must declare one "
            "(equal-to NAME) or (isomorphic-to NAME) the other (theories MENET, MINET); "
            "exactmax decides their equivalence",
        )
    if (a.input.size, a.output.size) != (b.input.size, b.output.size):
        raise QueryError(
            b.line,
            1,
            f"networks {a.name} and {b.name} have inputs of {a.input.size} and "
            f"{b.input.size} and outputs of {a.output.size} and {b.output.size} elements; "
            "equivalence needs the same",
        )
    n, m = a.input.size, a.output.size
    shape = (
        f"expected the shape of an equivalence query: every disjunct ties {b.input.name} to "
        f"{a.input.name} ((== {b.input.name}[i] {a.input.name}[i]) for every i), bounds "
        f"{a.input.name} by non-strict constraints, and asks one output to differ "
        f"((!= {a.output.name}[j] {b.output.name}[j]), or (< ...) / (> ...))"
    )
    groups: dict[tuple, set[tuple[int, int]]] = {}
    places: dict[tuple, tuple[int, int]] = {}
    for conj in dnf:
        ties: set[tuple[int, int]] = set()
        inputs: list[tuple[tuple[Q, ...], Q]] = []
        differs: list[tuple[int, int]] = []
        for lin, c, strict, at in conj:
            sides = {(v[0], v[1]) for v in lin}
            if sides <= {(0, "x")} and not strict:
                inputs.append((tuple(-lin.get((0, "x", i), ZERO) for i in range(n)), c))
            elif sides == {(0, "x"), (1, "x")} and not strict and not c and len(lin) == 2:
                (k1, w1), (k2, w2) = sorted(lin.items())
                if k1[2] != k2[2] or w1 != -w2:
                    raise QueryError(*at, shape)
                ties.add((k1[2], 1 if w1 > 0 else -1))
            elif sides == {(0, "y"), (1, "y")} and strict and not c and len(lin) == 2:
                (k1, w1), (k2, w2) = sorted(lin.items())
                if k1[2] != k2[2] or w1 != -w2:
                    raise QueryError(*at, shape)
                differs.append((k1[2], 1 if w1 > 0 else -1))
            else:
                raise QueryError(*at, shape)
        first = conj[0][3] if conj else (0, 0)
        if ties != {(i, s) for i in range(n) for s in (1, -1)}:
            i = min(i for i in range(n) if {(i, 1), (i, -1)} - ties)
            raise QueryError(
                *first, f"{shape}; a disjunct does not tie {b.input.name}[{i}] to {a.input.name}"
            )
        if len(differs) != 1:
            raise QueryError(
                *first, f"{shape}; a disjunct asks {len(differs)} outputs to differ, not one"
            )
        key = tuple(sorted(set(inputs), key=lambda t: (tuple(map(str, t[0])), str(t[1]))))
        groups.setdefault(key, set()).add(differs[0])
        places.setdefault(key, first)
    domains: list[Domain] = []
    for key, diffs in groups.items():
        if diffs != {(j, s) for j in range(m) for s in (1, -1)}:
            missing = sorted({(j, s) for j in range(m) for s in (1, -1)} - diffs)[0]
            op = ">" if missing[1] > 0 else "<"
            raise QueryError(
                *places[key],
                f"{shape}; for one input set the query never asks "
                f"({op} {a.output.name}[{missing[0]}] {b.output.name}[{missing[0]}]), so it "
                "is not the negation of an equivalence",
            )
        box = _as_box(key, n)
        domains.append(box if box is not None else _polyhedron(key, n))
    return Equivalence(0, 1, tuple(domains), len(dnf))
