"""JSON Schemas (draft 2020-12) of exactmax's file formats, shipped as package data, and the
``exactmax schema`` command that prints or writes them.

One schema per format (``NAME.schema.json`` in this folder); the numbers, vectors, matrices,
affine maps and domains they share are defined once in ``common.schema.json`` and referenced
by ``$ref``.  Every ``$id`` is under ``BASE``; the schemas refer to each other by relative
references, resolved against those ids, so a validator needs them all: ``registry()`` gives
them as a ``referencing.Registry`` (no network access) and ``validator(name)`` a
``jsonschema`` validator that uses it.  ``jsonschema`` and ``referencing`` are imported only
by those two functions; the command itself needs neither.

A schema checks structure: keys, types, number syntax, required and unknown keys, non-empty
lists.  The readers (``exactmax/io``) check more: lengths that depend on other values (a
weight vector of the layer's input width, a sparse index inside its shape), digit and
exponent limits of number literals, hashes, and everything a certificate proves.
"""

from __future__ import annotations

import json
from functools import cache

from .. import jsonout
from ..exits import EXIT_OK, UsageError

BASE = "https://exactmax.dev/schemas/v1/"
NAMES = (
    "maxout",
    "transformer",
    "model",
    "domain",
    "certificate",
    "region-certificate",
    "property-certificate",
    "pair-property-certificate",
    "cpwl",
    "output",
    "common",
)
"""The schemas: one per format, ``model`` (either kind of model), ``output`` (what a command
prints with --json) and the shared definitions."""


def text(name: str) -> str:
    """The schema file ``NAME.schema.json`` as shipped."""
    if name not in NAMES:
        raise KeyError(name)
    from importlib import resources  # here: the command line starts without it

    return (resources.files(__name__) / f"{name}.schema.json").read_text(encoding="utf-8")


@cache
def _load(name: str) -> str:
    return json.loads(text(name))


def load(name: str) -> dict:
    """The schema ``name`` as a JSON object (a fresh copy)."""
    return json.loads(json.dumps(_load(name)))


def registry():
    """Every schema, by its ``$id``, as a ``referencing.Registry`` (needs ``referencing``)."""
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    return Registry().with_resources(
        (_load(n)["$id"], DRAFT202012.create_resource(load(n))) for n in NAMES
    )


def validator(name: str):
    """A ``jsonschema.Draft202012Validator`` of schema ``name`` whose references resolve
    locally (needs ``jsonschema``)."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(load(name), registry=registry())


def format_of(name: str) -> str | None:
    """The ``"format"`` string of the files a schema describes (None for model and common)."""
    return _load(name).get("properties", {}).get("format", {}).get("const")


def _resolve(given: str) -> str:
    """A schema name from NAME, NAME.schema.json or a format string ("exactmax/maxout")."""
    name = given.removesuffix(".schema.json")
    if name in NAMES:
        return name
    for n in NAMES:
        if format_of(n) == given:
            return n
    raise UsageError(
        f"no schema {given!r}; the schemas are "
        + ", ".join(NAMES)
        + " (or a format such as exactmax/maxout); see exactmax schema --list"
    )


# ------------------------------------------------------------------------------ the command


def add_parser(sub) -> None:
    s = sub.add_parser(
        "schema",
        help="print or write the JSON Schema of a file format",
        description="Print the JSON Schema (draft 2020-12) of one of exactmax's file formats, "
        "or write it with -o. The schemas refer to the shared definitions of 'common' by "
        f"their $id (under {BASE}), so validate with all of them loaded. A schema checks "
        "structure (keys, types, number syntax); the readers check more (lengths, limits, "
        "hashes, proofs).",
    )
    s.add_argument(
        "name",
        nargs="?",
        metavar="NAME",
        help="one of " + ", ".join(NAMES) + ", or a format such as exactmax/maxout",
    )
    s.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the schema here (atomically) instead of printing it",
    )
    s.add_argument(
        "--list",
        action="store_true",
        help="list the schemas: name, $id and title (with --json, the format too)",
    )
    s.add_argument("--json", action="store_true", help="with --list: print one JSON object")
    s.set_defaults(run=run)


def run(args) -> int:
    if args.list:
        if args.name is not None or args.output is not None:
            raise UsageError("--list takes no NAME and no -o")
        rows = [
            {"name": n, "format": format_of(n), "id": _load(n)["$id"], "title": _load(n)["title"]}
            for n in NAMES
        ]
        if args.json:
            print(jsonout.dumps({"schemas": rows}))
        else:
            width = max(len(n) for n in NAMES)
            for r in rows:
                print(f"{r['name']:<{width}}  {r['id']}\n{'':<{width}}  {r['title']}")
        return EXIT_OK
    if args.name is None:
        raise UsageError("expected a schema NAME (one of " + ", ".join(NAMES) + ") or --list")
    if args.json:
        raise UsageError("--json goes with --list (a schema is printed as JSON already)")
    name = _resolve(args.name)
    data = text(name)
    if args.output is None:
        print(data, end="")
        return EXIT_OK
    from ..io.models import check_outputs, write_bytes_atomic

    check_outputs([("-o", args.output)])
    write_bytes_atomic(args.output, data.encode("utf-8"))
    return EXIT_OK
