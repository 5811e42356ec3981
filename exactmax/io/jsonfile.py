"""Reading JSON exactly, and walking it with a cursor that knows its JSON path.

Number literals are kept as their text (``JsonNumber``) so that 0.1 reads as 1/10; the bare
constants NaN, Infinity and -Infinity, which Python's json module would accept, are kept as
``JsonConstant`` so that the reader can refuse them with the path where they stand.
"""

from __future__ import annotations

import json
import os

from ..kernel.rational import Q
from .errors import InputError
from .numbers import EXPECTED, NumberSyntaxError, parse_rational, quote


class JsonNumber(str):
    """The text of a JSON number literal with a fraction or exponent part."""


class JsonConstant(str):
    """NaN, Infinity or -Infinity written bare in a JSON file (not valid JSON)."""


def _pairs(source: str):
    def hook(pairs):
        obj = {}
        for k, v in pairs:
            if k in obj:
                raise InputError(source, "", f'duplicate key "{k}" in one object')
            obj[k] = v
        return obj
    return hook


def parse_json_text(text: str, source: str) -> object:
    """Parse JSON text exactly; errors name ``source`` and the line and column."""
    try:
        return json.loads(text, parse_float=JsonNumber, parse_constant=JsonConstant,
                          object_pairs_hook=_pairs(source))
    except json.JSONDecodeError as e:
        raise InputError(source, "", f"invalid JSON at line {e.lineno} column {e.colno}: "
                         f"{e.msg}") from None
    except RecursionError:
        raise InputError(source, "", "JSON nested too deeply") from None
    except ValueError as e:  # e.g. an integer literal with too many digits
        raise InputError(source, "", f"invalid JSON: {e}") from None


def read_json_file(path: str) -> object:
    """Read and parse a JSON file (``.gz`` files are decompressed)."""
    source = path
    try:
        if path.endswith(".gz"):
            import gzip
            with gzip.open(path, "rt", encoding="utf-8") as f:
                text = f.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except FileNotFoundError:
        raise InputError(source, "", "no such file") from None
    except IsADirectoryError:
        raise InputError(source, "", "is a directory, expected a JSON file") from None
    except UnicodeDecodeError:
        raise InputError(source, "", "not UTF-8 text, expected a JSON file") from None
    except OSError as e:
        raise InputError(source, "", f"cannot read: {e.strerror or e}") from None
    return parse_json_text(text, source)


def describe(value: object) -> str:
    """A short description of a JSON value for messages: a list, an object, "abc", NaN, 3."""
    if isinstance(value, JsonConstant):
        return str(value)
    if isinstance(value, JsonNumber):
        return str(value)
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        s = str(value)
        return s if len(s) < 40 else s[:36] + "..."
    if isinstance(value, list):
        return f"a list of length {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return repr(value)


def plain(value: object) -> object:
    """The JSON value with number literals as Python numbers (for free-form ``meta``)."""
    if isinstance(value, JsonConstant):
        return str(value)
    if isinstance(value, JsonNumber):
        return float(value)  # meta is opaque: it never reaches a computation
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


class Cursor:
    """A JSON value together with its file and JSON path, for precise error messages."""

    __slots__ = ("source", "path", "value")

    def __init__(self, source: str, path: str, value: object):
        self.source, self.path, self.value = source, path, value

    def error(self, message: str) -> InputError:
        return InputError(self.source, self.path, message)

    def child(self, key: str | int) -> "Cursor":
        if isinstance(key, int):
            path = f"{self.path}[{key}]"
        else:
            path = f"{self.path}.{key}" if self.path else key
        return Cursor(self.source, path, self.value[key])

    # --- structure -------------------------------------------------------------------------

    def fields(self, required: tuple[str, ...], optional: tuple[str, ...] = (),
               what: str = "an object") -> dict[str, "Cursor"]:
        """The object's fields as cursors; missing required or unknown keys are errors."""
        if not isinstance(self.value, dict):
            raise self.error(f"expected {what}, got {describe(self.value)}")
        for k in required:
            if k not in self.value:
                raise self.error(f'missing key "{k}"')
        allowed = required + optional
        for k in self.value:
            if k not in allowed:
                names = ", ".join(f'"{a}"' for a in allowed)
                raise self.error(f'unknown key "{k}" (expected one of {names})')
        return {k: self.child(k) for k in self.value}

    def one_of(self, keys: tuple[str, ...]) -> tuple[str, "Cursor"]:
        """An object with exactly one key among ``keys``: (key, cursor of its value)."""
        names = " or ".join(f'"{k}"' for k in keys)
        if not isinstance(self.value, dict):
            raise self.error(f"expected an object with key {names}, got {describe(self.value)}")
        present = [k for k in self.value if k in keys]
        unknown = [k for k in self.value if k not in keys]
        if unknown:
            raise self.error(f'unknown key "{unknown[0]}" (expected {names})')
        if len(present) != 1:
            raise self.error(f"expected exactly one key of {names}")
        return present[0], self.child(present[0])

    def items(self, length: int | None = None, min_length: int = 0,
              what: str = "items") -> list["Cursor"]:
        """The list's elements as cursors, with a length check."""
        if not isinstance(self.value, list):
            raise self.error(f"expected a list of {what}, got {describe(self.value)}")
        n = len(self.value)
        if length is not None and n != length:
            raise self.error(f"expected {length} {what}, got {n}")
        if n < min_length:
            raise self.error(f"expected at least {min_length} {what}, got {n}")
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

    def integer(self, minimum: int | None = None) -> int:
        v = self.value
        if isinstance(v, bool) or not isinstance(v, int) or isinstance(v, str):
            raise self.error(f"expected an integer, got {describe(v)}")
        if minimum is not None and v < minimum:
            raise self.error(f"expected an integer >= {minimum}, got {v}")
        return v

    def string(self, choices: tuple[str, ...] | None = None) -> str:
        v = self.value
        if not isinstance(v, str) or isinstance(v, (JsonNumber, JsonConstant)):
            raise self.error(f"expected a string, got {describe(v)}")
        if choices is not None and v not in choices:
            names = ", ".join(f'"{c}"' for c in choices)
            raise self.error(f"expected one of {names}, got {quote(v)}")
        return v

    def vector(self, length: int | None, what: str = "numbers") -> tuple[Q, ...]:
        return tuple(c.number() for c in self.items(length, what=what))

    def matrix(self, rows: int | None, cols: int | None, what: str = "matrix") -> tuple:
        """A matrix: dense (a list of rows) or sparse ``{"shape": [r, c], "entries":
        [[i, j, v], ...]}`` with 0-based indices and no repeated (i, j)."""
        if isinstance(self.value, dict):
            f = self.fields(("shape", "entries"), what=f"a {what}")
            r, c = (s.integer(0) for s in f["shape"].items(2, what="sizes"))
            for want, got, name in ((rows, r, "rows"), (cols, c, "columns")):
                if want is not None and got != want:
                    raise f["shape"].error(f"expected {want} {name}, got {got}")
            dense = [[Q(0)] * c for _ in range(r)]
            seen = set()
            for e in f["entries"].items(what="entries"):
                ic, jc, vc = e.items(3, what="fields [row, column, value]")
                i, j = ic.integer(0), jc.integer(0)
                if i >= r or j >= c:
                    raise e.error(f"index ({i}, {j}) outside the shape ({r}, {c})")
                if (i, j) in seen:
                    raise e.error(f"entry ({i}, {j}) given twice")
                seen.add((i, j))
                dense[i][j] = vc.number()
            return tuple(tuple(row) for row in dense)
        rows_c = self.items(rows, what="rows")
        out = []
        for rc in rows_c:
            out.append(rc.vector(cols))
            if cols is None:
                cols = len(out[-1])
        return tuple(out)
