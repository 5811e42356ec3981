"""Reading JSON exactly, and walking it with a cursor that knows its JSON path.

Number literals are kept as their text (``JsonNumber``) so that 0.1 reads as 1/10; the bare
constants NaN, Infinity and -Infinity, which Python's json module would accept, are kept as
``JsonConstant`` so that the reader can refuse them with the path where they stand.
"""

from __future__ import annotations

import io
import json
import os
import re

from ..kernel.affine import Matrix, Row, SparseVector, row_of
from ..kernel.rational import Q
from .errors import InputError
from .nesting import collection_paused
from .numbers import EXPECTED, NumberSyntaxError, parse_rational, quote


class JsonNumber(str):
    """The text of a JSON number literal with a fraction or exponent part."""


class JsonConstant(str):
    """NaN, Infinity or -Infinity written bare in a JSON file (not valid JSON)."""


class JsonLongInteger(str):
    """An integer literal too long for Python's int() (4300 digits): kept as its text, read
    as a number by FLINT where a number is expected (up to MAX_DIGITS digits)."""


class JsonObject(dict):
    """A JSON object that remembers the first key it saw twice (refused with its path)."""

    duplicate: str | None = None


_NUMBERS: dict[str, Q] = {}
"""The numbers of the document read last by their text (a convolution repeats its weights)."""


def _numbers(values: list) -> list[Q] | None:
    """The exact values of a list of number strings and JSON integers (as ``Cursor.number``
    reads them, equal texts one object), or None if any is anything else or malformed (the
    caller then reads it cursor by cursor, for the error message)."""
    out = []
    for v in values:
        q = _NUMBERS.get(v) if type(v) is str else Q(v) if type(v) is int else None
        if q is None:
            if type(v) is not str:
                return None
            if len(_NUMBERS) > 1 << 22:
                _NUMBERS.clear()
            try:
                q = _NUMBERS[v] = parse_rational(v)
            except NumberSyntaxError:
                return None
        out.append(q)
    return out


def _object(pairs):
    obj = JsonObject()
    for k, v in pairs:
        if k in obj and obj.duplicate is None:
            obj.duplicate = k
        obj[k] = v
    return obj


def _integer(text: str):
    return int(text) if len(text.lstrip("-")) <= 4000 else JsonLongInteger(text)


def parse_json_text(text: str, source: str) -> object:
    """Parse JSON text exactly; errors name ``source`` and the line and column."""
    try:
        with collection_paused():
            value = json.loads(
                text,
                parse_float=JsonNumber,
                parse_int=_integer,
                parse_constant=JsonConstant,
                object_pairs_hook=_object,
            )
    except json.JSONDecodeError as e:
        if not text[e.pos :].strip():
            raise InputError(
                source, "", "invalid JSON: the file ends early (is it truncated?)"
            ) from None
        raise InputError(
            source, "", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}"
        ) from None
    except RecursionError:
        raise InputError(source, "", "JSON nested too deeply") from None
    return value


def read_json_file(path: str, shape=None) -> object:
    """Read and parse a JSON file (``.gz`` files are decompressed).

    ``shape``, if given, checks the top level first: it is called with a Cursor on a shallow
    copy of the root object (``shallow_root``: its keys, the values of at most
    ``SHALLOW_VALUE_CHARS`` characters parsed, larger ones stood for by ``Unread``) and
    raises the InputError of a wrong format, version, missing or unknown key before the
    whole document is parsed into Python objects (which takes several times the file's
    size)."""
    text = read_text_file(path, "a JSON file")
    _document_chars[0] = len(text)  # the budget of the sparse forms of this document
    _NUMBERS.clear()
    if shape is not None:
        root = shallow_root(text, path)
        if root is not None:
            shape(Cursor(path, "", root))
    return parse_json_text(text, path)


class Unread:
    """A top-level value too large for the shallow pass (``shallow_root``): its kind and
    size only."""

    __slots__ = ("kind", "chars")

    def __init__(self, kind: str, chars: int):
        self.kind, self.chars = kind, chars

    def __repr__(self) -> str:
        return f"{self.kind} of {self.chars} characters"


SHALLOW_VALUE_CHARS = 1 << 16
"""Top-level values up to this many characters are parsed by the shallow pass."""

_WS = re.compile(r"[ \t\n\r]*")
# a run of characters that are neither brackets nor quotes, and of complete strings
_STRING = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_PLAIN = rf'(?:[^\[\]{{}}"]++|{_STRING})*+'  # no brackets, strings whole
# a run of _PLAIN and of innermost lists and objects ([...] or {...} with no brackets inside)
_FLAT = re.compile(rf"(?:[^\[\]{{}}\"]++|{_STRING}|\[{_PLAIN}\]|\{{{_PLAIN}\}})*+", re.S)
_SCALAR = re.compile(r"[^\s,\]}]*")
_KINDS = {"[": "a list", "{": "an object", '"': "a string"}


def _end(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """Where ``pattern``'s match at ``pos`` ends; the patterns above (``_WS``, ``_FLAT``,
    ``_SCALAR``) all match the empty string, so there is always a match."""
    m = pattern.match(text, pos)
    assert m is not None
    return m.end()


def shallow_root(text: str, source: str) -> JsonObject | None:
    """The root object's keys with their values, parsed when small and ``Unread`` when
    large, found by a pass over the text in time proportional to its length and with no
    Python object per element (regular expressions skip the large values); None when the
    root is not an object or the text is not well-formed enough for this pass (the full
    parse then says what is wrong)."""
    # json.decoder.scanstring is public (the C scanner or its Python fallback), but typeshed
    # declares it only in the private _json module
    from json.decoder import scanstring  # type: ignore[attr-defined]

    n = len(text)
    pos = _end(_WS, text, 0)
    if pos >= n or text[pos] != "{":
        return None
    pairs: list[tuple[str, object]] = []
    pos = _end(_WS, text, pos + 1)
    if text.startswith("}", pos):
        return _object(pairs)
    while True:
        if not text.startswith('"', pos):
            return None
        try:
            key, pos = scanstring(text, pos + 1)
        except ValueError:
            return None
        pos = _end(_WS, text, pos)
        if not text.startswith(":", pos):
            return None
        start = _end(_WS, text, pos + 1)
        if start >= n:
            return None
        c = text[start]
        if c in "[{":
            end, depth = start + 1, 1  # inside the value: _FLAT skips its innermost groups
            while True:
                end = _end(_FLAT, text, end)
                if end >= n or text[end] == '"':
                    return None  # ends early, or an unterminated string
                depth += 1 if text[end] in "[{" else -1
                end += 1
                if depth == 0:
                    break
        elif c == '"':
            try:
                end = scanstring(text, start + 1)[1]
            except ValueError:
                return None
        else:
            end = _end(_SCALAR, text, start)
        if end - start <= SHALLOW_VALUE_CHARS:
            try:
                value = parse_json_text(text[start:end], source)
            except InputError:
                return None
        else:
            value = Unread(_KINDS.get(c, "a number"), end - start)
        pairs.append((key, value))
        pos = _end(_WS, text, end)
        if text.startswith("}", pos):
            return _object(pairs)
        if not text.startswith(",", pos):
            return None
        pos = _end(_WS, text, pos + 1)


def read_text_file(path: str, expected: str = "a text file") -> str:
    """The UTF-8 text of a file (``.gz`` files are decompressed), or an InputError naming
    ``path`` and, for a directory or binary data, the ``expected`` kind of file.

    Memory: the file's bytes are read into one buffer of the exact size, which is freed once
    decoded (peak about twice the decompressed size).  A gzip file is decompressed twice,
    in chunks: the first pass only counts, so that data beyond ``MAX_FILE_BYTES`` (a gzip
    bomb) is refused after at most that many bytes and without holding them."""
    source = path
    import gzip
    import zlib

    too_large = f"larger than {MAX_FILE_BYTES >> 20} MiB (decompressed); exactmax refuses it"
    f: io.BufferedIOBase
    try:
        if path.endswith(".gz"):
            size = 0
            with gzip.open(path, "rb") as g:
                while True:
                    chunk = g.read(1 << 20)
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > MAX_FILE_BYTES:
                        raise InputError(source, "", too_large)
                    del chunk
            f = gzip.open(path, "rb")
        else:
            f = open(path, "rb")
            size = os.fstat(f.fileno()).st_size
            if size > MAX_FILE_BYTES:
                f.close()
                raise InputError(source, "", too_large)
        with f:
            data = bytearray(size + 1)  # one spare byte: a file that grew is refused
            view = memoryview(data)
            got = 0
            while got <= size:
                k = f.readinto(view[got:])
                if not k:
                    break
                got += k
            view.release()
            if got > size and not path.endswith(".gz"):
                extra = f.read(MAX_FILE_BYTES)  # a special file or a growing one
                if got + len(extra) > MAX_FILE_BYTES:
                    raise InputError(source, "", too_large)
                data += extra
                got += len(extra)
            del data[got:]
        text = data.decode("utf-8")
        del data
        return text
    except EOFError:
        raise InputError(source, "", "the gzip data ends early (is the file truncated?)") from None
    except (zlib.error, gzip.BadGzipFile) as e:
        raise InputError(source, "", f"not valid gzip data ({e})") from None
    except FileNotFoundError:
        raise InputError(source, "", "no such file") from None
    except IsADirectoryError:
        raise InputError(source, "", f"is a directory, expected {expected}") from None
    except UnicodeDecodeError:
        raise InputError(source, "", f"not UTF-8 text, expected {expected}") from None
    except OSError as e:
        raise InputError(source, "", f"cannot read: {e.strerror or e}") from None


def describe(value: object) -> str:
    """A short description of a JSON value for messages: a list, an object, "abc", NaN, 3."""
    if isinstance(value, (JsonConstant, JsonNumber)):
        return str(value)
    if isinstance(value, JsonLongInteger):
        return f"an integer of {len(value.lstrip('-'))} digits"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        s = str(value)
        return s if len(s) < 40 else s[:36] + "..."
    if isinstance(value, Unread):
        return repr(value)
    if isinstance(value, list):
        return f"a list of length {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return repr(value)


def plain(c: Cursor) -> object:
    """The free-form ``meta`` value with its number literals as Python numbers.  Meta never
    reaches a computation, but it must still be valid JSON: NaN, Infinity, huge exponents and
    repeated keys are refused with their path."""
    v = c.value
    if isinstance(v, (JsonConstant, JsonLongInteger)):
        raise c.error(f"{EXPECTED}, got {describe(v)}")
    if isinstance(v, JsonNumber):
        c.number()  # refuses exponents beyond the bound
        f = float(v)
        if f in (float("inf"), float("-inf")):
            raise c.error(f"{v} is too large for a number in meta; write it as a string")
        return f
    if isinstance(v, list):
        return [plain(c.child(i)) for i in range(len(v))]
    if isinstance(v, dict):
        c._check_duplicates()
        return {k: plain(c.child(k)) for k in v}
    return v


class Cursor:
    """A JSON value together with its file and JSON path, for precise error messages."""

    __slots__ = ("source", "path", "value", "budget")

    def __init__(self, source: str, path: str, value: object, budget: list | None = None):
        self.source, self.path, self.value = source, path, value
        # entries that sparse matrices may still expand to, shared by the whole file
        self.budget = budget if budget is not None else entry_budget(_document_chars[0])

    def error(self, message: str) -> InputError:
        return InputError(self.source, self.path, message)

    def child(self, key: str | int) -> Cursor:
        """The cursor on ``value[key]``: an index of a list or a key of an object, which the
        caller has checked the value to be."""
        value = self.value
        if isinstance(key, int):
            assert isinstance(value, list)
            return Cursor(self.source, f"{self.path}[{key}]", value[key], self.budget)
        assert isinstance(value, dict)
        path = f"{self.path}.{key}" if self.path else key
        return Cursor(self.source, path, value[key], self.budget)

    # --- structure -------------------------------------------------------------------------

    def fields(
        self, required: tuple[str, ...], optional: tuple[str, ...] = (), what: str = "an object"
    ) -> dict[str, Cursor]:
        """The object's fields as cursors; missing required or unknown keys are errors."""
        if not isinstance(self.value, dict):
            raise self.error(f"expected {what}, got {describe(self.value)}")
        self._check_duplicates()
        allowed = required + optional
        for k in self.value:
            if k not in allowed:
                names = ", ".join(f'"{a}"' for a in allowed)
                raise self.error(f"unknown key {quote(k)} (expected one of {names})")
        for k in required:
            if k not in self.value:
                raise self.error(f'missing key "{k}"')
        return {k: self.child(k) for k in self.value}

    def _check_duplicates(self) -> None:
        dup = getattr(self.value, "duplicate", None)
        if dup is not None:
            raise self.error(f"duplicate key {quote(dup)}")

    def one_of(self, keys: tuple[str, ...]) -> tuple[str, Cursor]:
        """An object with exactly one key among ``keys``: (key, cursor of its value)."""
        names = " or ".join(f'"{k}"' for k in keys)
        if not isinstance(self.value, dict):
            raise self.error(f"expected an object with key {names}, got {describe(self.value)}")
        self._check_duplicates()
        present = [k for k in self.value if k in keys]
        unknown = [k for k in self.value if k not in keys]
        if unknown:
            raise self.error(f"unknown key {quote(unknown[0])} (expected {names})")
        if len(present) != 1:
            raise self.error(f"expected exactly one key of {names}")
        return present[0], self.child(present[0])

    def items(
        self, length: int | None = None, min_length: int = 0, what: str = "items", why: str = ""
    ) -> list[Cursor]:
        """The list's elements as cursors, with a length check (``why`` explains ``length``)."""
        if not isinstance(self.value, list):
            raise self.error(f"expected a list of {what}, got {describe(self.value)}")
        n = len(self.value)
        because = f" ({why})" if why else ""
        if length is not None and n != length:
            raise self.error(f"expected {plural(length, what)}{because}, got {n}")
        if n < min_length:
            raise self.error(f"expected at least {plural(min_length, what)}, got {n}")
        return [self.child(i) for i in range(n)]

    # --- scalars ---------------------------------------------------------------------------

    def number(self) -> Q:
        """An exact rational: a JSON integer, a JSON number literal, or a number string."""
        v = self.value
        if isinstance(v, bool) or isinstance(v, JsonConstant) or not isinstance(v, (int, str)):
            raise self.error(f"{EXPECTED}, got {describe(v)}")
        if isinstance(v, int):
            return Q(v)
        try:
            return parse_rational(v)
        except NumberSyntaxError as e:
            msg = str(e)
            if isinstance(v, JsonNumber) and msg.startswith(EXPECTED):
                msg = f"{EXPECTED}, got {v}"
            raise self.error(msg) from None

    def integer(self, minimum: int | None = None, what: str = "an integer") -> int:
        v = self.value
        if isinstance(v, bool) or not isinstance(v, int) or isinstance(v, str):
            raise self.error(f"expected {what}, got {describe(v)}")
        if minimum is not None and v < minimum:
            raise self.error(f"expected an integer >= {minimum}, got {v}")
        return v

    def string(self, choices: tuple[str, ...] | None = None) -> str:
        v = self.value
        if not isinstance(v, str) or isinstance(v, (JsonNumber, JsonConstant, JsonLongInteger)):
            raise self.error(f"expected a string, got {describe(v)}")
        if choices is not None and v not in choices:
            names = ", ".join(f'"{c}"' for c in choices)
            raise self.error(f"expected one of {names}, got {quote(v)}")
        return v

    def vector(self, length: int | None, what: str = "number", why: str = "") -> tuple[Q, ...]:
        v = self.value
        if isinstance(v, list) and (length is None or len(v) == length):
            fast = _numbers(v)
            if fast is not None:
                return tuple(fast)
        return tuple(c.number() for c in self.items(length, what=what, why=why))

    def weights(self, length: int, what: str = "weight", why: str = "") -> Row:
        """A vector of ``length`` numbers: dense (a list) or sparse ``{"size": n, "entries":
        [[j, v], ...]}`` with 0-based indices, no repeated j, absent entries 0 (the form
        exactmax writes for mostly-zero weights, such as a convolution's)."""
        if not isinstance(self.value, dict):
            return self.vector(length, what, why)
        f = self.fields(("size", "entries"), what='a vector (a list, or {"size", "entries"})')
        n = f["size"].integer(0)
        if n != length:
            because = f" ({why})" if why else ""
            raise f["size"].error(f"expected {plural(length, what)}{because}, got {n}")
        if n > self.budget[1]:
            raise f["size"].error(
                f"the sparse vectors of one file may declare at most {MAX_SPARSE_WEIGHTS} "
                f"entries in total, or {ENTRIES_PER_CHAR} per character of the file "
                f"({self.budget[1]} left)"
            )
        self.budget[1] -= n
        raw = f["entries"].value
        if isinstance(raw, list) and all(
            type(e) is list and len(e) == 2 and type(e[0]) is int for e in raw
        ):
            ix = [e[0] for e in raw]
            vs = _numbers([e[1] for e in raw])
            if vs is not None and all(a < b for a, b in zip([-1] + ix, ix + [n])):
                return row_of(n, zip(ix, vs))
        entries: dict[int, Q] = {}  # one cursor per entry: the error of a malformed one
        for e in f["entries"].items(what="entries"):
            jc, vc = e.items(2, what="fields [index, value]")
            j = jc.integer(0)
            if j >= n:
                raise e.error(f"index {j} outside the size {n}")
            if j in entries:
                raise e.error(f"entry {j} given twice")
            entries[j] = vc.number()
        return row_of(n, entries.items())

    def matrix(
        self,
        rows: int | None,
        cols: int | None,
        rows_why: str = "",
        cols_why: str = "",
        sparse_rows: bool = False,
    ) -> Matrix:
        """A matrix: dense (a list of rows) or sparse ``{"shape": [r, c], "entries":
        [[i, j, v], ...]}`` with 0-based indices and no repeated (i, j).  ``rows_why`` and
        ``cols_why`` say where the expected sizes come from.  With ``sparse_rows``, a sparse
        one of 16 rows or more, at most a quarter of them not empty, is kept as its rows that
        are not empty (a ``SparseVector`` of rows: an attention head's W_O)."""
        if isinstance(self.value, dict):
            f = self.fields(
                ("shape", "entries"), what='a matrix (a list of rows, or {"shape", "entries"})'
            )
            r, c = (s.integer(0) for s in f["shape"].items(2, what="size"))
            for want, got, name, why in ((rows, r, "row", rows_why), (cols, c, "column", cols_why)):
                if want is not None and got != want:
                    because = f" ({why})" if why else ""
                    raise f["shape"].error(f"expected {plural(want, name)}{because}, got {got}")
            if r * c > self.budget[0]:
                raise f["shape"].error(
                    f"a {r} x {c} matrix is beyond the limit of the entries the sparse "
                    f"matrices of one file may declare ({MAX_MATRIX_ENTRIES}, or "
                    f"{ENTRIES_PER_CHAR} per character of the file; {self.budget[0]} left)"
                )
            self.budget[0] -= r * c
            rows_e: dict[int, dict[int, Q]] = {}
            for e in f["entries"].items(what="entries"):
                ic, jc, vc = e.items(3, what="fields [row, column, value]")
                i, j = ic.integer(0), jc.integer(0)
                if i >= r or j >= c:
                    raise e.error(f"index ({i}, {j}) outside the shape ({r}, {c})")
                if j in rows_e.setdefault(i, {}):
                    raise e.error(f"entry ({i}, {j}) given twice")
                rows_e[i][j] = vc.number()
            empty = row_of(c, ())  # one object for every empty row
            if sparse_rows and r >= 16 and 4 * len(rows_e) <= r:
                given = sorted(rows_e)
                return SparseVector(
                    r, tuple(given), tuple(row_of(c, rows_e[i].items()) for i in given), empty
                )
            return tuple(row_of(c, rows_e[i].items()) if i in rows_e else empty for i in range(r))
        rows_c = self.items(rows, what="row", why=rows_why)
        out = []
        for rc in rows_c:
            out.append(rc.vector(cols, why=cols_why))
            if cols is None:
                cols, cols_why = len(out[-1]), "as in row 0"
        return tuple(out)


def entry_budget(chars: int) -> list[int]:
    """The entries the sparse matrices and the sparse weight vectors of a document of
    ``chars`` characters may declare: at least ``MAX_MATRIX_ENTRIES`` and
    ``MAX_SPARSE_WEIGHTS``, and ``ENTRIES_PER_CHAR`` per character.  Reading keeps a sparse
    row sparse (memory grows with the rows and the non-zero entries), but a dense evaluation
    of the model (the vectorized one) does not: the compiled Transformer of a 1-D CNN of
    5,500 units declares 2.6 G entries in 24 MB, 108 per character."""
    return [
        max(MAX_MATRIX_ENTRIES, ENTRIES_PER_CHAR * chars),
        max(MAX_SPARSE_WEIGHTS, ENTRIES_PER_CHAR * chars),
    ]


_document_chars = [0]
"""The size of the JSON document read last (``read_json_file``): its root Cursor's budget."""

ENTRIES_PER_CHAR = 256

MAX_MATRIX_ENTRIES = 4 * 10**6
"""Most entries the sparse matrices of a small file may declare together, so that it cannot
ask a dense evaluation for gigabytes."""

MAX_SPARSE_WEIGHTS = 2 * 10**8
"""Most entries the sparse weight vectors of a small file may declare together."""

MAX_FILE_BYTES = 2**30
"""Largest (decompressed) input file."""


def plural(n: int, word: str) -> str:
    """'1 row', '3 rows', '1 entry', '2 entries'."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word[:-1]}ies" if word.endswith("y") else f"{n} {word}s"
