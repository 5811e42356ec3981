"""The exactmax/certificate format: a split tree bound to both models and the domain.

    {"format": "exactmax/certificate", "version": 1,
     "claim": "A(x) = B(x) for every x in the domain",
     "models": {"a": {"sha256": "...", "model": {...}}, "b": {...}},
     "domain": {"sha256": "...", "domain": {"box": ...} or {"polyhedron": ...}},
     "tree": T, "stats": {...}}

or, instead of "tree", "layerwise": {...} (one claim list per Maxout layer) or
"correspondence": [{"W": M_1, "b": m_1}, ...] (h^A_l = M_l h^B_l + m_l for l = 1..D: A = B on
all of Q^d, ``kernel/correspondence.py``) or "lattice": {} (both models rewrite to one lattice
normal form: A = B on all of Q^d, ``kernel/lattice.py``; the kernel computes the forms).

    T = {"split": {"a": [...], "c": "p/q"}, "choices": [C...], "ge": T, "lt": T}
      | {"leaf": {"choices": [C...], "same_max": true (optional)}}
      | {"empty": F}
    C = {"program": 0 | 1, "node": i, "k": k, "proofs": [null | F | {"tie": {"dominance": F,
         "upper": F, "lower": F}}, ...]}
    F = [[row, "y"], ...]   (Farkas multipliers, rows numbered from the domain's first)

The models and the domain are embedded, so a certificate is checked on its own; each is bound
by the SHA-256 of its canonical JSON (sorted keys, no spaces, "meta" left out), so a user can
confirm that a certificate speaks about *their* files.
"""

from __future__ import annotations

import hashlib
import json

from .. import __version__
from ..kernel.affine import Affine
from ..kernel.certificate import Choice, Empty, Farkas, Leaf, Split, TieProof, Tree
from ..kernel.correspondence import Correspondence
from ..kernel.lattice import LatticeForms
from ..kernel.layerwise import Claim, LayerwiseCertificate, UnitImage
from ..kernel.polyhedron import Box
from ..kernel.transformer import Transformer
from .jsonfile import Cursor, read_json_file
from .models import TRANSFORMER, VERSION, domain_to_json, model_to_json, read_domain, read_model
from .numbers import q_str

CERTIFICATE = "exactmax/certificate"
CLAIM = "A(x) = B(x) for every x in the domain"


def content_hash(obj: dict) -> str:
    """SHA-256 of the canonical JSON of a model or domain object (sorted keys, no spaces),
    "meta" left out, a Maxout piece's weights dense (as every exactmax before sparse weights
    wrote them, so hashes in older certificates still match).  The text is hashed in pieces,
    a sparse piece's dense text made from its entries, never the whole at once (a CIFAR
    network's dense text is over a gigabyte)."""
    h = hashlib.sha256()
    for chunk in _canonical_text({k: v for k, v in obj.items() if k != "meta"}):
        h.update(chunk.encode())
    return h.hexdigest()


def _dump(v: object) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


def _canonical_text(obj: dict):
    """``_dump(obj)`` in chunks, the sparse weights of pieces (``layers[l].units[i].pieces[k].w``
    of the form ``{"size", "entries"}``) written as the dense list of their texts."""
    if not any("units" in l for l in obj.get("layers", ()) if isinstance(l, dict)):
        yield _dump(obj)
        return
    for n, k in enumerate(sorted(obj)):
        yield ("{" if n == 0 else ",") + _dump(k) + ":"
        if k != "layers":
            yield _dump(obj[k])
            continue
        for i, layer in enumerate(obj["layers"]):
            yield "[" if i == 0 else ","
            if not isinstance(layer, dict) or set(layer) != {"units"}:
                yield _dump(layer)
                continue
            yield '{"units":['
            for u, unit in enumerate(layer["units"]):
                yield "," if u else ""
                if not isinstance(unit, dict) or set(unit) != {"pieces"}:
                    yield _dump(unit)
                    continue
                yield '{"pieces":['
                for q, piece in enumerate(unit["pieces"]):
                    yield ("," if q else "") + _piece_text(piece)
                yield "]}"
            yield "]}"
        yield "]" if obj["layers"] else "[]"
    yield "}"


def _piece_text(p) -> str:
    w = p.get("w") if isinstance(p, dict) else None
    if not isinstance(w, dict):
        return _dump(p)
    given = dict(w["entries"])  # as ``out[j] = v`` in order: a later j wins
    dense, last = [], 0
    for j in sorted(given):
        dense.append('"0",' * (j - last) + _dump(given[j]) + ",")
        last = j + 1
    text = "[" + ("".join(dense) + '"0",' * (w["size"] - last))[:-1] + "]"
    return (
        "{"
        + ",".join(_dump(k) + ":" + (text if k == "w" else _dump(p[k])) for k in sorted(p))
        + "}"
    )


def _farkas(F) -> list:
    return [[i, q_str(y)] for i, y in F]


def _choice(side, index, ch: Choice) -> dict:
    proofs: list[object] = []
    for pr in ch.proofs:
        if pr is None:
            proofs.append(None)
        elif isinstance(pr, TieProof):
            proofs.append(
                {
                    "tie": {
                        "dominance": _farkas(pr.dominance),
                        "upper": _farkas(pr.upper),
                        "lower": _farkas(pr.lower),
                    }
                }
            )
        else:
            proofs.append(_farkas(pr))
    return {"program": side, "node": index, "k": ch.k, "proofs": proofs}


def tree_to_json(tree: Tree) -> dict:
    if isinstance(tree, Empty):
        return {"empty": _farkas(tree.proof)}
    if isinstance(tree, Leaf):
        leaf: dict[str, object] = {"choices": [_choice(*c) for c in tree.choices]}
        if tree.same_max:
            leaf["same_max"] = True
        return {"leaf": leaf}
    return {
        "split": {"a": [q_str(v) for v in tree.a], "c": q_str(tree.c)},
        "choices": [_choice(*c) for c in tree.choices],
        "ge": tree_to_json(tree.ge),
        "lt": tree_to_json(tree.lt),
    }


def layerwise_to_json(c: LayerwiseCertificate) -> dict:
    return (
        {
            "boxes": [
                {"lower": [q_str(v) for v in b.lower], "upper": [q_str(v) for v in b.upper]}
                for b in c.boxes
            ],
            "box_proofs": None
            if c.box_proofs is None
            else [[_farkas(up), _farkas(low)] for up, low in c.box_proofs],
            "layers": [
                [{"outputs": list(cl.outputs), "tree": tree_to_json(cl.tree)} for cl in claims]
                for claims in c.layers
            ],
        }
        | (
            {}
            if c.image is None
            else {
                "image": [
                    {
                        "lower_piece": im.lower_piece,
                        "lower": _farkas(im.lower),
                        "upper": [_farkas(u) for u in im.upper],
                    }
                    for im in c.image
                ]
            }
        )
        | ({} if c.unmerged is None else {"unmerged": model_to_json(c.unmerged)})
    )


def certificate_to_json(a, b, domain, cert, stats: dict, witness: dict | None = None) -> dict:
    """The certificate file; ``witness`` (``prove/domain.py``) shows the domain non-empty
    (and full- or lower-dimensional) or empty, for check-cert to check without a solver."""
    ja, jb, jd = model_to_json(a), model_to_json(b), domain_to_json(domain)
    dom: dict[str, object] = {"sha256": content_hash(jd), "domain": jd}
    if witness is not None:
        dom["witness"] = {k: [q_str(v) for v in vec] for k, vec in witness.items()}
    out: dict[str, object] = {
        "format": CERTIFICATE,
        "version": VERSION,
        "exactmax_version": __version__,
        "claim": CLAIM,
        "models": {
            "a": {"sha256": content_hash(ja), "model": ja},
            "b": {"sha256": content_hash(jb), "model": jb},
        },
        "domain": dom,
    }
    if isinstance(cert, LayerwiseCertificate):
        out["layerwise"] = layerwise_to_json(cert)
    elif isinstance(cert, LatticeForms):
        out["lattice"] = {}
    elif isinstance(cert, Correspondence):
        out["correspondence"] = [
            {"W": [[q_str(v) for v in row] for row in R.W], "b": [q_str(v) for v in R.b]}
            for R in cert.maps
        ]
    else:
        out["tree"] = tree_to_json(cert)
    out["stats"] = stats
    return out


# ----------------------------------------------------------------------------- reading


def _read_farkas(c: Cursor):
    out = []
    for e in c.items(what="multiplier"):
        i, y = e.items(2, what="field", why="[row, multiplier]")
        out.append((i.integer(0), y.number()))
    return tuple(out)


def _read_choice(c: Cursor):
    f = c.fields(("program", "node", "k", "proofs"))
    proofs: list[Farkas | TieProof | None] = []
    for p in f["proofs"].items(what="proof"):
        if p.value is None:
            proofs.append(None)
        elif isinstance(p.value, dict):
            t = p.fields(("tie",))["tie"].fields(("dominance", "upper", "lower"))
            proofs.append(
                TieProof(
                    _read_farkas(t["dominance"]), _read_farkas(t["upper"]), _read_farkas(t["lower"])
                )
            )
        else:
            proofs.append(_read_farkas(p))
    return (f["program"].integer(0), f["node"].integer(0), Choice(f["k"].integer(0), tuple(proofs)))


def _read_empty(cur: Cursor) -> Tree:
    return Empty(_read_farkas(cur.fields(("empty",))["empty"]))


def _read_leaf(cur: Cursor) -> Tree:
    leaf = cur.fields(("leaf",))["leaf"].fields(("choices",), ("same_max",))
    same = "same_max" in leaf and leaf["same_max"].value is True
    if "same_max" in leaf and leaf["same_max"].value not in (True, False):
        raise leaf["same_max"].error("expected true or false")
    return Leaf(tuple(_read_choice(x) for x in leaf["choices"].items(what="choice")), same)


def read_tree(c: Cursor, dim: int, leaves=None) -> Tree:
    """The tree, read without recursion (deep trees do not hit Python's recursion limit).
    ``leaves`` maps the key of each kind of leaf to its reader (default: "empty" and "leaf",
    the leaves of exactmax/certificate); every other node is a split."""
    leaves = leaves or {"empty": _read_empty, "leaf": _read_leaf}
    kinds = ", ".join(f'"{k}"' for k in ("split", *leaves))
    done: list[Tree] = []
    todo = [(c, False)]
    while todo:
        cur, children_read = todo.pop()
        if not isinstance(cur.value, dict) or not any(k in cur.value for k in ("split", *leaves)):
            raise cur.error(f"expected a tree node: an object with one of {kinds}")
        kind = next((k for k in leaves if k in cur.value), None)
        if kind is not None:
            done.append(leaves[kind](cur))
            continue
        f = cur.fields(("split", "choices", "ge", "lt"))
        if not children_read:
            todo += [(cur, True), (f["lt"], False), (f["ge"], False)]
            continue
        h = f["split"].fields(("a", "c"))
        lt, ge = done.pop(), done.pop()
        done.append(
            Split(
                h["a"].vector(dim, why="the input dimension"),
                h["c"].number(),
                ge,
                lt,
                tuple(_read_choice(x) for x in f["choices"].items(what="choice")),
            )
        )
    return done[0]


def certificate_shape(root: Cursor) -> dict:
    """The top level of a certificate (format, version, claim, keys): its fields."""
    if isinstance(root.value, dict) and root.value.get("format") == "exactmax/region-certificate":
        raise root.child("format").error(
            "a region certificate (of exactmax regions --cert), "
            "not an equivalence certificate; check it with "
            f"exactmax regions --check-cert {root.source}"
        )
    f = root.fields(
        ("format", "version", "claim", "models", "domain"),
        ("tree", "layerwise", "correspondence", "lattice", "stats", "exactmax_version", "meta"),
    )
    if sum(k in f for k in ("tree", "layerwise", "correspondence", "lattice")) != 1:
        raise root.error(
            'expected exactly one of "tree", "layerwise", "correspondence" or "lattice"'
        )
    f["format"].string((CERTIFICATE,))
    if "exactmax_version" in f:
        f["exactmax_version"].string()
    if f["version"].integer() != VERSION:
        raise f["version"].error(f"version {f['version'].value} is not supported")
    if f["claim"].string() != CLAIM:
        raise f["claim"].error(f'expected "{CLAIM}"')
    return f


def load_certificate(path: str):
    """(model a, model b, domain, tree, {"a": hash, "b": hash, "domain": hash}, domain
    witness or None); the embedded hashes are recomputed and must match."""
    root = Cursor(path, "", read_json_file(path, certificate_shape))
    f = certificate_shape(root)
    models, hashes = {}, {}
    mf = f["models"].fields(("a", "b"))
    for name in ("a", "b"):
        e = mf[name].fields(("sha256", "model"))
        models[name] = read_model(e["model"])
        hashes[name] = e["sha256"].string()
        if content_hash(model_to_json(models[name])) != hashes[name]:
            raise e["sha256"].error("does not match the embedded model")
    df = f["domain"].fields(("sha256", "domain"), ("witness",))
    dim = models["a"].input_dim
    domain = read_domain(df["domain"], dim)
    hashes["domain"] = df["sha256"].string()
    if content_hash(domain_to_json(domain)) != hashes["domain"]:
        raise df["sha256"].error("does not match the embedded domain")
    witness = None
    if "witness" in df:
        wf = df["witness"].fields((), ("interior", "member", "flat", "empty"))
        witness = {k: c.vector(dim if k in ("interior", "member") else None) for k, c in wf.items()}
    tree: Tree | LayerwiseCertificate | Correspondence | LatticeForms
    if "tree" in f:
        tree = read_tree(f["tree"], dim)
    elif "layerwise" in f:
        tree = read_layerwise(f["layerwise"], models["a"])
    elif "lattice" in f:
        f["lattice"].fields(())
        tree = LatticeForms()
    else:
        tree = read_correspondence(f["correspondence"], models["a"], models["b"])
    return models["a"], models["b"], domain, tree, hashes, witness


def read_layerwise(c: Cursor, net) -> LayerwiseCertificate:
    from ..kernel.maxout import MaxoutNetwork

    if not isinstance(net, MaxoutNetwork):
        raise c.error("a layerwise certificate needs a Maxout network as model a")
    f = c.fields(("boxes", "box_proofs", "layers"), ("image", "unmerged"))
    boxes = []
    for bc, width in zip(
        f["boxes"].items(len(net.layers), what="box", why="one per layer"), net.widths
    ):
        bf = bc.fields(("lower", "upper"))
        lower = bf["lower"].vector(width, why="the width of the layer's input")
        boxes.append(Box(lower, bf["upper"].vector(len(lower), why="as many as lower")))
    proofs = None
    if f["box_proofs"].value is not None:
        proofs = tuple(
            tuple(_read_farkas(x) for x in pair.items(2, what="proof", why="upper, lower"))
            for pair in f["box_proofs"].items(net.input_dim, what="pair")
        )
    layers = []
    for lc, width in zip(f["layers"].items(len(net.layers), what="layer"), net.widths):
        claims = []
        for cc in lc.items(what="claim"):
            cf = cc.fields(("outputs", "tree"))
            claims.append(
                Claim(
                    tuple(o.integer(0) for o in cf["outputs"].items(what="output")),
                    read_tree(cf["tree"], width),
                )
            )
        layers.append(tuple(claims))
    image: tuple[UnitImage, ...] | None = None
    if "image" in f:
        n = net.layers[0].width if len(net.layers) > 1 else 0
        images = []
        for ic in f["image"].items(
            n,
            what="unit image",
            why="one per unit of the first layer (none for a network of one layer)",
        ):
            jf = ic.fields(("lower_piece", "lower", "upper"))
            images.append(
                UnitImage(
                    jf["lower_piece"].integer(0),
                    _read_farkas(jf["lower"]),
                    tuple(_read_farkas(u) for u in jf["upper"].items(what="proof")),
                )
            )
        image = tuple(images)
    unmerged: Transformer | None = None
    if "unmerged" in f:
        model = read_model(f["unmerged"], (TRANSFORMER,))
        assert isinstance(model, Transformer)  # the only format read_model accepted
        unmerged = model
    return LayerwiseCertificate(tuple(boxes), proofs, tuple(layers), image, unmerged)


def read_correspondence(c: Cursor, a, b) -> Correspondence:
    """One map (W = M_l of N^A_l rows and N^B_l columns, b = m_l) per layer of two Maxout
    networks of the same depth."""
    from ..kernel.maxout import MaxoutNetwork

    if not (isinstance(a, MaxoutNetwork) and isinstance(b, MaxoutNetwork)):
        raise c.error("a correspondence certificate needs two Maxout networks")
    if len(a.layers) != len(b.layers):
        raise c.error(f"the networks have {len(a.layers)} and {len(b.layers)} layers")
    maps = []
    for mc, la, lb in zip(
        c.items(len(a.layers), what="map", why="one per layer"), a.layers, b.layers
    ):
        f = mc.fields(("W", "b"))
        m = f["b"].vector(la.width, why="the width of the layer of A")
        M = f["W"].matrix(la.width, lb.width, "the width of the layer of A", "that of B")
        maps.append(Affine(M, m, lb.width))
    return Correspondence(tuple(maps))
