"""The exactmax/region-certificate format (written by ``exactmax regions --cert``).

    {"format": "exactmax/region-certificate", "version": 1, "claim": CLAIM,
     "model": {"sha256": "...", "model": {...}}, "domain": {"sha256": "...", "domain": {...}},
     "tree": T, "merges": [[i, j, [q...]], ...], "counts": {...}, "units": "all"}

    T = {"split": {"a": [...], "c": "p/q"}, "choices": [C...], "ge": T, "lt": T}
      | {"region": {"choices": [C...], "W": [[...]], "b": [...], "point": [...]}}

C as in exactmax/certificate (``io/certificates.py``, program 0 only).  Leaves are numbered
depth first, ge before lt; merges name two leaves and a point of their shared facet.
"counts" is what the producer reported (all five keys of ``COUNTS``, integers);
``regions --check-cert`` recomputes them with the kernel and rejects a certificate whose
counts differ from what the kernel finds.  "units" (optional): "outputs" (the default) or
"all", the units whose activation patterns are counted.
"""

from __future__ import annotations

from .. import __version__
from ..io.certificates import _choice, _read_choice, content_hash
from ..io.certificates import read_tree as read_certificate_tree
from ..io.jsonfile import Cursor, read_json_file
from ..io.models import VERSION, domain_to_json, model_to_json, read_domain, read_model
from ..io.numbers import q_str
from ..kernel.certificate import Split
from ..kernel.regions import Region

FORMAT = "exactmax/region-certificate"
COUNTS = ("activation_regions", "linear_regions", "cells", "distinct_maps", "merge_components")
CLAIM = (
    "the leaves partition the domain into cells with non-empty interior, on each of "
    "which the model is affine with the stated map"
)


def _vec(v) -> list[str]:
    return [q_str(x) for x in v]


def tree_to_json(tree) -> dict:
    """Iterative (deep trees do not hit the recursion limit)."""

    def node(t):
        if isinstance(t, Region):
            return {
                "region": {
                    "choices": [_choice(*c) for c in t.choices],
                    "W": [_vec(r) for r in t.W],
                    "b": _vec(t.b),
                    "point": _vec(t.point),
                }
            }
        return {
            "split": {"a": _vec(t.a), "c": q_str(t.c)},
            "choices": [_choice(*c) for c in t.choices],
        }

    root = node(tree)
    todo = [(tree, root)]
    while todo:
        t, j = todo.pop()
        if isinstance(t, Split):
            j["ge"], j["lt"] = node(t.ge), node(t.lt)
            todo += [(t.ge, j["ge"]), (t.lt, j["lt"])]
    return root


def certificate_to_json(model, domain, cert, counts: dict, all_units: bool = False) -> dict:
    jm, jd = model_to_json(model), domain_to_json(domain)
    out = {
        "format": FORMAT,
        "version": VERSION,
        "exactmax_version": __version__,
        "claim": CLAIM,
        "model": {"sha256": content_hash(jm), "model": jm},
        "domain": {"sha256": content_hash(jd), "domain": jd},
        "tree": tree_to_json(cert.tree),
        "merges": [[i, j, _vec(q)] for i, j, q in cert.merges],
        "counts": counts,
    }
    if all_units:
        out["units"] = "all"
    return out


def read_tree(c: Cursor, dim: int, out_dim: int):
    def region(cur: Cursor) -> Region:
        r = cur.fields(("region",))["region"].fields(("choices", "W", "b", "point"))
        return Region(
            tuple(_read_choice(x) for x in r["choices"].items(what="choice")),
            r["W"].matrix(out_dim, dim, "one per output", "the input dimension"),
            r["b"].vector(out_dim, why="the output dimension"),
            r["point"].vector(dim, why="the input dimension"),
        )

    return read_certificate_tree(c, dim, {"region": region})


def _shape(root: Cursor) -> dict:
    """The top level (format, version, claim, keys): its fields."""
    f = root.fields(
        ("format", "version", "claim", "model", "domain", "tree", "merges"),
        ("counts", "units", "exactmax_version", "meta"),
    )
    f["format"].string((FORMAT,))
    if "exactmax_version" in f:
        f["exactmax_version"].string()
    if f["version"].integer() != VERSION:
        raise f["version"].error(f"version {f['version'].value} is not supported")
    if f["claim"].string() != CLAIM:
        raise f["claim"].error(f'expected "{CLAIM}"')
    return f


def load_region_certificate(path: str):
    """(model, domain, tree, merges, {"model": hash, "domain": hash}, counts, all_units); the
    embedded hashes are recomputed and must match.  ``"units": "all"`` says the activation
    patterns are over every unit (``regions --all-units``), "outputs" (the default) over the
    units the outputs depend on."""
    root = Cursor(path, "", read_json_file(path, _shape))
    f = _shape(root)
    e = f["model"].fields(("sha256", "model"))
    model = read_model(e["model"])  # checked as a model file is: format, version, body
    hashes = {"model": e["sha256"].string()}
    if content_hash(model_to_json(model)) != hashes["model"]:
        raise e["sha256"].error("does not match the embedded model")
    df = f["domain"].fields(("sha256", "domain"))
    domain = read_domain(df["domain"], model.input_dim)
    hashes["domain"] = df["sha256"].string()
    if content_hash(domain_to_json(domain)) != hashes["domain"]:
        raise df["sha256"].error("does not match the embedded domain")
    tree = read_tree(f["tree"], model.input_dim, model.out_dim)
    merges = []
    for mc in f["merges"].items(what="merge"):
        i, j, q = mc.items(3, what="field", why="[leaf, leaf, point]")
        merges.append(
            (i.integer(0), j.integer(0), q.vector(model.input_dim, why="the input dimension"))
        )
    counts = None
    if "counts" in f:
        cf = f["counts"].fields(COUNTS)
        counts = {k: cf[k].integer(0) for k in COUNTS}
    all_units = "units" in f and f["units"].string(("outputs", "all")) == "all"
    return model, domain, tree, tuple(merges), hashes, counts, all_units
