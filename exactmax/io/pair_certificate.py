"""The exactmax/pair-property-certificate format (``exactmax equiv --epsilon E / --top1 --cert``):
two models equal up to a tolerance on a domain (``kernel/pair.py``).

    {"format": "exactmax/pair-property-certificate", "version": 1, "claim": CLAIM,
     "property": {"kind": "epsilon", "epsilon": "p/q", "norm": "inf"} | {"kind": "top1"},
     "models": {"a": {"sha256": "...", "model": {...}}, "b": {...}},
     "domain": {"sha256": "...", "domain": {...}},
     "tree": T, "inputs": "free", "stats": {...}}

T is a tree of exactmax/property-certificate (split / empty / excluded, read and written by
``property_certificate.py``) for the pair program x -> (A(x), B(x)); the claim is the sentence
``claim(epsilon)`` and must match the property.  With "inputs": "free" (optional; "all" is the
default) the domain is a box and T is over its free inputs (lower_i < upper_i, in order), the
others fixed (``kernel.pair.FreeInputs``).  Models and domain are embedded and bound by
the SHA-256 of their canonical JSON, as in exactmax/certificate.
"""

from __future__ import annotations

from .. import __version__
from ..kernel.pair import FreeInputs
from ..kernel.polyhedron import Box
from ..kernel.rational import Q
from .certificates import _read_empty, content_hash, read_tree
from .jsonfile import Cursor, read_json_file
from .models import VERSION, domain_to_json, model_to_json, read_domain, read_model
from .numbers import q_str
from .property_certificate import _read_excluded, _read_relaxed, _tree

PAIR_CERTIFICATE = "exactmax/pair-property-certificate"


def claim(epsilon: Q | None) -> str:
    """The sentence a certificate proves."""
    if epsilon is None:
        return "argmax A(x) = argmax B(x) (as sets, ties included) for every x in the domain"
    return f"|A(x) - B(x)|_inf <= {q_str(epsilon)} for every x in the domain"


def pair_certificate_to_json(a, b, domain, epsilon: Q | None, tree, stats: dict) -> dict:
    ja, jb, jd = model_to_json(a), model_to_json(b), domain_to_json(domain)
    free = isinstance(tree, FreeInputs)
    return {
        "format": PAIR_CERTIFICATE,
        "version": VERSION,
        "exactmax_version": __version__,
        "claim": claim(epsilon),
        "property": {"kind": "top1"}
        if epsilon is None
        else {"kind": "epsilon", "epsilon": q_str(epsilon), "norm": "inf"},
        "models": {
            "a": {"sha256": content_hash(ja), "model": ja},
            "b": {"sha256": content_hash(jb), "model": jb},
        },
        "domain": {"sha256": content_hash(jd), "domain": jd},
        "tree": _tree(tree.tree if free else tree),
        **({"inputs": "free"} if free else {}),
        "stats": stats,
    }


def certificate_format(path: str) -> str | None:
    """The "format" of a JSON certificate file, read from its top level alone (the shallow
    pass of ``read_json_file``), so the file is parsed in full only by its own reader."""

    class _Format(Exception):
        pass

    def shape(root):
        raise _Format(root.value.get("format") if isinstance(root.value, dict) else None)

    try:
        value = read_json_file(path, shape)
    except _Format as f:
        return f.args[0]
    return value.get("format") if isinstance(value, dict) else None


def read_pair_certificate(root: Cursor):
    """(model a, model b, domain, epsilon or None, tree, {"a", "b", "domain": sha256}); the
    embedded hashes are recomputed and must match, and the claim must be the property's."""
    f = root.fields(
        ("format", "version", "claim", "property", "models", "domain", "tree"),
        ("stats", "exactmax_version", "meta", "inputs"),
    )
    f["format"].string((PAIR_CERTIFICATE,))
    if "exactmax_version" in f:
        f["exactmax_version"].string()
    if f["version"].integer() != VERSION:
        raise f["version"].error(f"version {f['version'].value} is not supported")
    kind = f["property"].fields(("kind",), ("epsilon", "norm"))
    if kind["kind"].string(("epsilon", "top1")) == "top1":
        f["property"].fields(("kind",))
        epsilon = None
    else:
        pf = f["property"].fields(("kind", "epsilon", "norm"))
        pf["norm"].string(("inf",))
        epsilon = pf["epsilon"].number()
        if epsilon < 0:
            raise pf["epsilon"].error(f"expected a number >= 0, got {q_str(epsilon)}")
    if f["claim"].string() != claim(epsilon):
        raise f["claim"].error(f'expected "{claim(epsilon)}" (the property\'s)')
    models, hashes = {}, {}
    mf = f["models"].fields(("a", "b"))
    for name in ("a", "b"):
        e = mf[name].fields(("sha256", "model"))
        models[name] = read_model(e["model"])
        hashes[name] = e["sha256"].string()
        if content_hash(model_to_json(models[name])) != hashes[name]:
            raise e["sha256"].error("does not match the embedded model")
    df = f["domain"].fields(("sha256", "domain"))
    dim = models["a"].input_dim
    domain = read_domain(df["domain"], dim)
    hashes["domain"] = df["sha256"].string()
    if content_hash(domain_to_json(domain)) != hashes["domain"]:
        raise df["sha256"].error("does not match the embedded domain")
    leaves = {"empty": _read_empty, "excluded": _read_excluded, "relaxed": _read_relaxed}
    free = "inputs" in f and f["inputs"].string(("all", "free")) == "free"
    if free:
        if not isinstance(domain, Box):
            raise f["inputs"].error('"free" inputs are those of a box; the domain is a polyhedron')
        dim = sum(lo != hi for lo, hi in zip(domain.lower, domain.upper))
    tree = read_tree(f["tree"], dim, leaves)
    return models["a"], models["b"], domain, epsilon, FreeInputs(tree) if free else tree, hashes


def load_pair_certificate(path: str):
    """``read_pair_certificate`` of the file at ``path``."""
    return read_pair_certificate(Cursor(path, "", read_json_file(path)))
