"""The exactmax/property-certificate format (``exactmax check --cert``), and VNN-COMP's
counterexample files.

    {"format": "exactmax/property-certificate", "version": 1, "claim": CLAIM,
     "model": {"sha256": "...", "file_sha256": "...", "model": {...}},
     "property": {"sha256": "...", "file": "prop.vnnlib", "vnnlib": "(declare-const ...)"},
     "cases": [T, ...], "stats": {...}}

    T = {"split": ..., "choices": [...], "ge": T, "lt": T} | {"empty": F}
      | {"excluded": {"choices": [C...], "proofs": [P, ...]}}
      | {"relaxed": {"choices": [C...], "uppers": [U, ...], "proofs": [P, ...]}}
      (optional in "relaxed": "extra": [{"node": i, "upper": U}, ...], rows added in order)
    U = {"lambda": [q, ...], "beta": q, "proofs": [F, ...]}   (kernel.property.Relaxed)
      (optional in U: "terms": [[k, q], ...], c_k times the map of node k added to u)
    P = F | {"phase": {"node": i, "branches": [P, ...]}}       (kernel.property.Phase)

as in exactmax/certificate (``io/certificates.py``); one tree per case of the property, in
the order the reader gives them.  The model (exactmax/maxout JSON) and the VNN-LIB text are
embedded and bound by their SHA-256 (the model's of its canonical JSON, as for equivalence
certificates; ``file_sha256`` is that of the file it was read from, an .onnx file included;
the property's of its text).
"""

from __future__ import annotations

import hashlib
import json

from .. import __version__
from ..kernel.certificate import Empty, Split
from ..kernel.property import Excluded, Phase, Relaxed, Tighten, Upper
from ..kernel.rational import Q
from .certificates import (
    _choice,
    _farkas,
    _read_choice,
    _read_empty,
    _read_farkas,
    content_hash,
    read_tree,
)
from .errors import InputError
from .jsonfile import Cursor
from .models import GZIP_LEVEL, MAXOUT, model_to_json, read_model, write_bytes_atomic
from .nesting import collection_paused
from .numbers import q_str

PROPERTY_CERTIFICATE = "exactmax/property-certificate"
CLAIM = (
    "no input in the property's input set has an output satisfying its output "
    "constraints (VNN-LIB: unsat)"
)


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _proof(p) -> list | dict:
    """A conjunction's proof: Farkas multipliers, a phase split of them, or tightened upper
    functions then a proof."""
    if isinstance(p, Phase):
        return {"phase": {"node": p.node, "branches": [_proof(b) for b in p.branches]}}
    if isinstance(p, Tighten):
        uppers = [_upper(u) for u in p.uppers]
        return {"tighten": {"nodes": list(p.nodes), "uppers": uppers, "then": _proof(p.then)}}
    return _farkas(p)


def _upper(u: Upper) -> dict:
    out = {
        "lambda": [q_str(v) for v in u.lam],
        "beta": q_str(u.beta),
        "proofs": [_farkas(p) for p in u.proofs],
    }
    return out | ({"terms": [[k, q_str(c)] for k, c in u.terms]} if u.terms else {})


def _tree(t) -> dict:
    if isinstance(t, Empty):
        return {"empty": _farkas(t.proof)}
    if isinstance(t, Excluded):
        return {
            "excluded": {
                "choices": [_choice(*c) for c in t.choices],
                "proofs": [_proof(p) for p in t.proofs],
            }
        }
    if isinstance(t, Relaxed):
        r = {
            "choices": [_choice(*c) for c in t.choices],
            "uppers": [None if u is None else _upper(u) for u in t.uppers],
            "proofs": [_proof(p) for p in t.proofs],
        }
        if t.extra:
            r["extra"] = [{"node": i, "upper": _upper(u)} for i, u in t.extra]
        return {"relaxed": r}
    assert isinstance(t, Split)
    return {
        "split": {"a": [q_str(v) for v in t.a], "c": q_str(t.c)},
        "choices": [_choice(*c) for c in t.choices],
        "ge": _tree(t.ge),
        "lt": _tree(t.lt),
    }


def property_certificate_to_json(
    net, model_path: str, prop_path: str, prop_text: str, trees, stats: dict, lifted=None
) -> dict:
    """The certificate; ``lifted``: the trees are about this network, which the kernel proves
    equal to ``net`` on all of Q^d by lattice normal forms (``kernel/lattice.py``)."""
    jm = model_to_json(net)
    jm.pop("meta", None)
    extra = {}
    if lifted is not None:
        jl = model_to_json(lifted)
        jl.pop("meta", None)
        extra = {"lifted": {"model": jl}}
    return extra | {
        "format": PROPERTY_CERTIFICATE,
        "version": 1,
        "exactmax_version": __version__,
        "claim": CLAIM,
        "model": {"sha256": content_hash(jm), "file_sha256": file_sha256(model_path), "model": jm},
        "property": {
            "sha256": hashlib.sha256(prop_text.encode()).hexdigest(),
            "file": prop_path.rsplit("/", 1)[-1],
            "vnnlib": prop_text,
        },
        "cases": [_tree(t) for t in trees],
        "stats": stats,
    }


def write_property_certificate(path: str, doc: dict) -> None:
    """Write the certificate as compact JSON, all at once (``write_bytes_atomic``): a split
    tree 20 to 40 levels deep, indented, is mostly spaces (ACAS Xu 1-6 property 3: 118 MB
    indented), and Python's json module only uses its C encoder without indentation.  A
    ``.gz`` path is gzip-compressed, as by ``write_json_atomic``."""
    data = (json.dumps(doc, separators=(",", ":")) + "\n").encode()
    if path.endswith(".gz"):
        import gzip

        data = gzip.compress(data, GZIP_LEVEL, mtime=0)
    write_bytes_atomic(path, data)


def _read_excluded(cur: Cursor):
    f = cur.fields(("excluded",))["excluded"].fields(("choices", "proofs"))
    return Excluded(
        tuple(_read_choice(x) for x in f["choices"].items(what="choice")),
        tuple(_read_proof(p) for p in f["proofs"].items(what="proof")),
    )


def _read_extra(cur: Cursor) -> tuple:
    f = cur.fields(("node", "upper"))
    return f["node"].integer(0), _read_upper(f["upper"])


def _read_proof(cur: Cursor, depth: int = 0):
    """Farkas multipliers, {"phase": {"node": i, "branches": [P, ...]}} or {"tighten":
    {"nodes": [i, ...], "uppers": [U, ...], "then": P}}, nested at most MAX_PHASE_DEPTH deep
    (read recursively: refused in one line before Python's recursion limit, whatever the JSON
    parser allows)."""
    if not isinstance(cur.value, dict):
        return _read_farkas(cur)
    if depth >= MAX_PHASE_DEPTH:
        raise cur.error(f"phase splits nested more than {MAX_PHASE_DEPTH} deep")
    kind, body = cur.one_of(("phase", "tighten"))
    if kind == "tighten":
        f = body.fields(("nodes", "uppers", "then"))
        nodes = tuple(n.integer(0) for n in f["nodes"].items(min_length=1, what="node"))
        uppers = f["uppers"].items(len(nodes), what="upper function", why="one per node")
        return Tighten(nodes, tuple(map(_read_upper, uppers)), _read_proof(f["then"], depth + 1))
    f = body.fields(("node", "branches"))
    branches = f["branches"].items(min_length=1, what="branch")
    return Phase(f["node"].integer(0), tuple(_read_proof(b, depth + 1) for b in branches))


MAX_PHASE_DEPTH = 200
"""Nested phase splits a certificate may hold on one path (the producer stops at 100)."""


def _read_upper(cur: Cursor) -> Upper:
    f = cur.fields(("lambda", "beta", "proofs"), ("terms",))
    terms = f["terms"].items(what="term") if "terms" in f else []
    return Upper(
        tuple(v.number() for v in f["lambda"].items(what="coefficient")),
        f["beta"].number(),
        tuple(_read_farkas(p) for p in f["proofs"].items(what="proof")),
        tuple(_read_term(t) for t in terms),
    )


def _read_term(cur: Cursor) -> tuple:
    k, c = cur.items(2, what="entry", why="a term is [node, coefficient]")
    return k.integer(0), c.number()


def _read_relaxed(cur: Cursor):
    f = cur.fields(("relaxed",))["relaxed"].fields(("choices", "uppers", "proofs"), ("extra",))
    extra = f["extra"].items(what="extra row") if "extra" in f else []
    return Relaxed(
        tuple(_read_choice(x) for x in f["choices"].items(what="choice")),
        tuple(
            None if u.value is None else _read_upper(u)
            for u in f["uppers"].items(what="upper function")
        ),
        tuple(_read_proof(p) for p in f["proofs"].items(what="proof")),
        tuple(_read_extra(e) for e in extra),
    )


def is_property_certificate(value) -> bool:
    return isinstance(value, dict) and value.get("format") == PROPERTY_CERTIFICATE


class _Format(Exception):
    def __init__(self, value):
        self.value = value


def peek_property_certificate(path: str) -> bool:
    """Is the file a property certificate?  Decided from the top level alone (the shallow
    pass of ``read_json_file``), so an equivalence certificate is not parsed twice."""
    from .jsonfile import read_json_file

    def shape(root):
        raise _Format(root.value.get("format") if isinstance(root.value, dict) else None)

    try:
        return is_property_certificate(read_json_file(path, shape))
    except _Format as f:
        return f.value == PROPERTY_CERTIFICATE


def read_property_certificate(root: Cursor):
    """(network, property, trees, {"model": sha, "model_file": sha, "property": sha}, the lifted
    network the trees are about or None); the embedded hashes are recomputed and must match."""
    from .vnnlib import _read, _Syntax
    from .vnnlib2 import QueryError, is_vnnlib2, parse_query, single_property

    f = root.fields(
        ("format", "version", "claim", "model", "property", "cases"),
        ("stats", "exactmax_version", "meta", "lifted"),
    )
    f["format"].string((PROPERTY_CERTIFICATE,))
    if "exactmax_version" in f:
        f["exactmax_version"].string()
    if f["version"].integer() != 1:
        raise f["version"].error(f"version {f['version'].value} is not supported")
    if f["claim"].string() != CLAIM:
        raise f["claim"].error(f'expected "{CLAIM}"')
    mf = f["model"].fields(("sha256", "file_sha256", "model"))
    net = read_model(mf["model"], (MAXOUT,))
    if content_hash(model_to_json(net)) != mf["sha256"].string():
        raise mf["sha256"].error("does not match the embedded model")
    pf = f["property"].fields(("sha256", "file", "vnnlib"))
    text = pf["vnnlib"].string()
    sha = hashlib.sha256(text.encode()).hexdigest()
    if sha != pf["sha256"].string():
        raise pf["sha256"].error("does not match the embedded property")
    try:
        with collection_paused():
            v2 = is_vnnlib2(text)
            prop = single_property(parse_query(text, sha)) if v2 else _read(text, sha)
    except (_Syntax, QueryError) as e:
        raise pf["vnnlib"].error(f"line {e.line}, column {e.col}: {e}") from None
    except RecursionError:
        raise pf["vnnlib"].error("formulas nested too deeply") from None
    lifted = None
    if "lifted" in f:  # the trees are about this network, proved equal to net (lattice forms)
        lifted = read_model(f["lifted"].fields(("model",))["model"], (MAXOUT,))
        if lifted.input_dim != net.input_dim or lifted.out_dim != net.out_dim:
            raise f["lifted"].error("the lifted network's inputs or outputs are not the network's")
    leaves = {"empty": _read_empty, "excluded": _read_excluded, "relaxed": _read_relaxed}
    trees = tuple(
        read_tree(c, net.input_dim, leaves)
        for c in f["cases"].items(len(prop.cases), what="tree", why="one per case")
    )
    return (
        net,
        prop,
        trees,
        {"model": mf["sha256"].value, "model_file": mf["file_sha256"].string(), "property": sha},
        lifted,
    )


# ------------------------------------------------------------- VNN-COMP counterexamples


def decimal_text(v: Q) -> str:
    """The exact decimal text of v when its denominator has no prime but 2 and 5 (every
    dyadic rational), else the SMT-LIB term (/ p q)."""
    p, q = int(v.p), int(v.q)
    a = (q & -q).bit_length() - 1
    rest, b = q >> a, 0
    while rest % 5 == 0:
        rest //= 5
        b += 1
    if rest != 1:
        return f"(/ {p} {q})" if p >= 0 else f"(- (/ {-p} {q}))"
    k = max(a, b)
    digits = str(abs(p) * (10**k // q)).rjust(k + 1, "0")
    text = digits if k == 0 else f"{digits[:-k]}.{digits[-k:]}".rstrip("0").rstrip(".")
    return ("-" if p < 0 else "") + text


def counterexample_text(x, y) -> str:
    """VNN-COMP's counterexample file: ``sat`` then ((X_0 v) ... (Y_0 v) ...)."""
    items = [f"(X_{i} {decimal_text(v)})" for i, v in enumerate(x)] + [
        f"(Y_{j} {decimal_text(v)})" for j, v in enumerate(y)
    ]
    return "sat\n(" + "\n ".join(items) + ")\n"


def read_counterexample(path: str, n_x: int, n_y: int):
    """(x, y or None) from a VNN-COMP counterexample file, every value read exactly from its
    text; InputError "file:line:column: ..." otherwise."""
    from .jsonfile import read_text_file
    from .numbers import NumberSyntaxError, parse_rational
    from .vnnlib import _VAR, Atom, SList, _Syntax, parse_sexprs

    text = read_text_file(path, "a VNN-COMP counterexample text file")

    def value(t):
        if isinstance(t, Atom):
            try:
                return parse_rational(t.text)
            except NumberSyntaxError:
                raise _Syntax(t, f"expected a number, got {t.text!r}") from None
        head = t.items[0].text if t.items and isinstance(t.items[0], Atom) else None
        args = [value(a) for a in t.items[1:]]
        if head == "-" and len(args) == 1:
            return -args[0]
        if head == "/" and len(args) == 2 and args[1] != 0:
            return args[0] / args[1]
        raise _Syntax(t, "expected a number, (- v) or (/ p q)")

    try:
        with collection_paused():
            forms = parse_sexprs(text)
            if forms and isinstance(forms[0], Atom):
                if forms[0].text != "sat":
                    got = forms[0].text
                    raise _Syntax(forms[0], f"expected 'sat' or the assignment, got {got!r}")
                forms = forms[1:]
            if len(forms) != 1 or not isinstance(forms[0], SList):
                raise _Syntax(forms[0] if forms else None, "expected one list ((X_0 v) ...)")
            vals: dict[str, Q] = {}
            for pair in forms[0].items:
                if (
                    not isinstance(pair, SList)
                    or len(pair.items) != 2
                    or not isinstance(pair.items[0], Atom)
                    or not _VAR.fullmatch(pair.items[0].text)
                ):
                    raise _Syntax(pair, "expected (X_i value) or (Y_j value)")
                if pair.items[0].text in vals:
                    raise _Syntax(pair.items[0], f"{pair.items[0].text} has a second value")
                vals[pair.items[0].text] = value(pair.items[1])
    except _Syntax as e:
        raise InputError(f"{path}:{e.line}:{e.col}" if e.line else path, "", str(e)) from None
    except RecursionError:
        raise InputError(path, "", "values nested too deeply") from None
    missing = [f"X_{i}" for i in range(n_x) if f"X_{i}" not in vals]
    if missing:
        raise InputError(path, "", f"no value for {missing[0]} (the network has {n_x} inputs)")
    extra = [k for k in vals if int(k[2:]) >= (n_x if k[0] == "X" else n_y)]
    if extra:
        raise InputError(
            path, "", f"{extra[0]} does not exist (the network has {n_x} inputs and {n_y} outputs)"
        )
    x = tuple(vals[f"X_{i}"] for i in range(n_x))
    y = (
        tuple(vals[f"Y_{j}"] for j in range(n_y))
        if all(f"Y_{j}" in vals for j in range(n_y))
        else None
    )
    return x, y
