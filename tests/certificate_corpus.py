"""A corpus of valid and tampered certificates, for running both checkers (the kernel's
check-cert and Coq through export-coq) on the same files: they must accept exactly the same
ones.  Used by tests/test_checkers_agree.py (a sample, in CI) and benchmarks/checkers.py (all).

Sources are certificates exactmax writes for the bundled examples and for small networks of
the shapes the construction compiles (monolithic and layerwise, box and polyhedral domains,
mixed ranks, the merged construction), a property certificate of ``check`` (relaxed leaves)
pair certificates of ``equiv --epsilon`` and ``--top1``, and a layer correspondence (``equiv``'s
default for networks related layer by layer).  Tampering edits one thing at a time: a
choice's argument, the proof at the chosen index or at another one, a choice's program, a
multiplier, a box bound, a first-layer image proof, the unmerged Transformer of a merged one,
the domain's witness, a weight of a model (hash recomputed), a bound of the domain (grown or
shrunk, its hash recomputed or not); in property and pair certificates an upper function's
lambda or beta, a leaf's multiplier, a dropped upper function, a halved epsilon; in a
correspondence an entry of a map, a negative weight on a unit of several distinct pieces, a
weight of a model (hash recomputed).
"""

from __future__ import annotations

import copy
import json
import os
import random
from fractions import Fraction

from exactmax.cli import main
from exactmax.io.certificates import content_hash

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")

MIXED = {"format": "exactmax/maxout", "version": 1, "input_dim": 2,
         "layers": [{"units": [{"pieces": [{"w": ["1", "-1/2"], "b": "0"}]},
                               {"pieces": [{"w": ["1/3", "1"], "b": "1/4"},
                                           {"w": ["-1", "2/3"], "b": "0"},
                                           {"w": ["1/3", "1"], "b": "1/4"}]},
                               {"pieces": [{"w": ["2", "0"], "b": "-1/3"},
                                           {"w": ["0", "-1"], "b": "1/5"}]}]},
                    {"units": [{"pieces": [{"w": ["1", "1", "-1"], "b": "0"}]},
                               {"pieces": [{"w": ["1/2", "0", "1"], "b": "0"},
                                           {"w": ["0", "-1", "1/2"], "b": "1"}]}]}],
         "output": {"W": [["1", "-2"], ["1/3", "1"]], "b": ["0", "1/7"]}}
CUT = {"polyhedron": {"A": [[1, 0], [-1, 0], [0, 1], [0, -1], [1, 1], ["-1/2", 1]],
                      "b": [1, 1, 1, 1, "1/2", "3/4"]}}
BOX = {"box": {"lower": [-1, -1], "upper": [1, 1]}}


def sources(tmp) -> dict[str, dict]:
    """name -> a valid certificate (JSON), written by exactmax into the folder ``tmp``."""
    import contextlib
    import io
    out = {}

    def run(name, args):
        cert = os.path.join(tmp, f"{name}.cert.json")
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(args + ["--cert", cert, "--no-search", "--json"]) == 0, name
        with open(cert) as f:
            out[name] = json.load(f)

    tent = os.path.join(EX, "tent.json")
    run("tent-layerwise", ["verify", tent])
    run("tent-monolithic", ["verify", tent, "--strategy", "monolithic"])
    run("triangle-layerwise", ["verify", os.path.join(EX, "relu_triangle.json")])
    for name, dom in (("mixed-box", BOX), ("mixed-poly", CUT)):
        net = os.path.join(tmp, f"{name}.json")
        with open(net, "w") as f:
            json.dump(dict(MIXED, domain=dom), f)
        run(name, ["verify", net])
        tf = os.path.join(tmp, f"{name}.merged.json")
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["compile", net, "-o", tf, "--merged"]) == 0
        run(f"{name}-merged", ["verify", net, "--transformer", tf])
    # a property certificate (check's default: relaxed leaves) and pair certificates
    net, prop = os.path.join(tmp, "relu.json"), os.path.join(tmp, "relu.vnnlib")
    with open(net, "w") as f:
        json.dump(RELU, f)
    with open(prop, "w") as f:
        f.write(RELU_PROP)
    run("relu-property", ["check", net, prop, "--workers", "1"])
    twin = os.path.join(tmp, "relu_twin.json")
    with open(twin, "w") as f:
        json.dump(_moved(RELU), f)
    run("relu-epsilon", ["equiv", net, twin, "--box", "-1,1;-1,1", "--epsilon", "1/10"])
    run("relu-top1", ["equiv", net, twin, "--box", "-1,1;1/2,1", "--top1"])
    # a layer correspondence (equiv's default for networks related layer by layer)
    a, b = os.path.join(tmp, "mixed.json"), os.path.join(tmp, "mixed_twin.json")
    for path, model in ((a, MIXED), (b, _rescaled(MIXED))):
        with open(path, "w") as f:
            json.dump(model, f)
    run("mixed-correspondence", ["equiv", a, b, "--box", "-1,1;-1,1"])
    assert "correspondence" in out["mixed-correspondence"]
    return out


def _relu(w):
    return {"pieces": [{"w": w, "b": "0"}, {"w": ["0"] * len(w), "b": "0"}]}


# y = (|x0| + |x1|, x0 - x1 + 1/4) in ReLUs (tests/test_coq_property.py's network)
RELU = {"format": "exactmax/maxout", "version": 1, "input_dim": 2,
        "layers": [{"units": [_relu(["1", "0"]), _relu(["-1", "0"]), _relu(["0", "1"]),
                              _relu(["0", "-1"])]}],
        "output": {"W": [["1", "1", "1", "1"], ["1", "-1", "-1", "1"]], "b": ["0", "1/4"]}}
RELU_PROP = "".join(f"(declare-const {v} Real)\n" for v in ("X_0", "X_1", "Y_0", "Y_1")) + """
(assert (or (and (>= X_0 -1) (<= X_0 1) (>= X_1 -0.5) (<= X_1 1))
            (and (>= X_0 2) (<= X_0 3) (>= X_1 0) (<= X_1 0.25))))
(assert (or (and (> Y_0 3.25)) (and (< Y_0 -0.1) (>= Y_1 0))))
"""


def _rescaled(net):
    """``net`` (JSON) with every layer's units in reverse order, unit i scaled by (i + 2)/2 and
    the next layer's weights divided back: the same function, related layer by layer."""
    net = copy.deepcopy(net)
    before, flip = [Fraction(1)] * net["input_dim"], False  # the layer below, in B's order
    for layer in net["layers"]:
        units = layer["units"][::-1]
        scales = [Fraction(len(units) - 1 - k + 2, 2) for k in range(len(units))]
        for unit, c in zip(units, scales):
            for p in unit["pieces"]:
                w = p["w"][::-1] if flip else p["w"]
                p["w"] = [str(Fraction(v) / s * c) for v, s in zip(w, before)]
                p["b"] = str(Fraction(p["b"]) * c)
        layer["units"], before, flip = units, scales, True
    out = net["output"]
    out["W"] = [[str(Fraction(v) / s) for v, s in zip(row[::-1], before)] for row in out["W"]]
    return net


def _moved(net):  # a first-layer weight moved by 1/100
    net = copy.deepcopy(net)
    net["layers"][0]["units"][0]["pieces"][0]["w"] = ["1", "1/100"]
    return net


def _trees(cert):
    if "tree" in cert:
        yield cert["tree"]
        return
    for layer in cert["layerwise"]["layers"]:
        for claim in layer:
            yield claim["tree"]


def walk(tree):
    """Every node of a certificate tree (JSON), depth first."""
    todo = [tree]
    while todo:
        t = todo.pop()
        yield t
        if "split" in t:
            todo += [t["ge"], t["lt"]]


def _choices(cert):
    return [ch for t in _trees(cert) for n in walk(t)
            for ch in n.get("leaf", n).get("choices", ())]


def _bump(v: str) -> str:
    return str(Fraction(v) + Fraction(1, 7))


def _leaves(c):
    """The leaves of a property or pair certificate's trees (JSON), depth first."""
    for t in c.get("cases", []) + ([c["tree"]] if "property" in c and "tree" in c else []):
        for n in walk(t):
            if "split" not in n:
                yield n


def _farkas_lists(leaf):
    body = leaf.get("relaxed") or leaf.get("excluded") or {}
    lists = [p for p in body.get("proofs", []) if isinstance(p, list) and p]
    lists += [p for u in body.get("uppers", []) if u for p in u["proofs"] if p]
    return lists


def tamper_property(cert: dict, rng: random.Random):
    """(kind, a copy) for property and pair certificates: an upper function's lambda or
    beta, a multiplier of a leaf, an upper function dropped, the pair's epsilon halved (the
    claim restated)."""
    kind = rng.choice(["lambda", "beta", "leaf-multiplier", "drop-upper", "epsilon"])
    c = copy.deepcopy(cert)
    relaxed = [n["relaxed"] for n in _leaves(c) if "relaxed" in n
               and any(u is not None for u in n["relaxed"]["uppers"])]
    if kind in ("lambda", "beta", "drop-upper") and relaxed:
        leaf = rng.choice(relaxed)
        i = rng.choice([i for i, u in enumerate(leaf["uppers"]) if u is not None])
        if kind == "lambda":
            leaf["uppers"][i]["lambda"][0] = _bump(leaf["uppers"][i]["lambda"][0])
        elif kind == "beta":
            leaf["uppers"][i]["beta"] = str(Fraction(leaf["uppers"][i]["beta"]) - 1)
        else:
            del leaf["uppers"][i]
    elif kind == "leaf-multiplier":
        lists = [p for n in _leaves(c) for p in _farkas_lists(n)]
        if not lists:
            return None
        pair = rng.choice(rng.choice(lists))
        pair[1] = _bump(pair[1])
    elif kind == "epsilon" and c.get("property", {}).get("kind") == "epsilon":
        old = c["property"]["epsilon"]
        c["property"]["epsilon"] = str(Fraction(old) / 2)
        c["claim"] = c["claim"].replace(old, c["property"]["epsilon"])
    else:
        return None
    return kind, c


def tamper_correspondence(cert: dict, rng: random.Random):
    """(kind, a copy) for layer correspondences: an entry of a map M_l or m_l moved, a
    weight made negative on a unit of B of several distinct pieces, a weight of a model
    moved (its hash recomputed)."""
    kind = rng.choice(["map-entry", "map-bias", "negative", "weight"])
    c = copy.deepcopy(cert)
    maps = c["correspondence"]
    if kind == "map-entry":
        M = rng.choice(maps)["W"]
        row = rng.choice(M)
        j = rng.randrange(len(row))
        row[j] = _bump(row[j])
    elif kind == "map-bias":
        m = rng.choice(maps)["b"]
        i = rng.randrange(len(m))
        m[i] = _bump(m[i])
    elif kind == "negative":
        layers = c["models"]["b"]["model"]["layers"]
        spots = [(M["W"], i, j) for M, layer in zip(maps, layers) for i, row in enumerate(M["W"])
                 for j, v in enumerate(row) if Fraction(v) > 0
                 and len({json.dumps(p, sort_keys=True) for p in layer["units"][j]["pieces"]}) > 1]
        if not spots:
            return None
        M, i, j = rng.choice(spots)
        M[i][j] = str(-Fraction(M[i][j]))
    else:
        side = rng.choice(["a", "b"])
        model = c["models"][side]["model"]
        piece = rng.choice([p for layer in model["layers"] for u in layer["units"]
                            for p in u["pieces"]])
        piece["b"] = _bump(str(piece["b"]))
        c["models"][side]["sha256"] = content_hash(model)
    return kind, c


def tamper(cert: dict, rng: random.Random):
    """(kind, a copy of cert with one thing edited), or None when cert has nothing of that
    kind; the kinds cycle through the list below."""
    if "cases" in cert or "property" in cert:
        return tamper_property(cert, rng)
    if "correspondence" in cert:
        return tamper_correspondence(cert, rng)
    kinds = ["choice", "proof-at-k", "proof-to-none", "program", "multiplier", "drop-choice",
             "box", "image", "weight", "unmerged", "witness", "domain"]
    kind = rng.choice(kinds)
    c = copy.deepcopy(cert)
    chs = _choices(c)
    multi = [ch for ch in chs if len(ch["proofs"]) > 1]
    if kind == "choice" and multi:
        ch = rng.choice(multi)
        ch["k"] = (ch["k"] + rng.randrange(1, len(ch["proofs"]))) % len(ch["proofs"])
    elif kind == "proof-at-k" and multi:
        ch = rng.choice(multi)
        other = next((p for p in ch["proofs"] if p is not None), None)
        if other is None:
            return None
        ch["proofs"][ch["k"]] = copy.deepcopy(other)
    elif kind == "proof-to-none" and multi:
        ch = rng.choice(multi)
        js = [j for j, p in enumerate(ch["proofs"]) if p is not None]
        if not js:
            return None
        ch["proofs"][rng.choice(js)] = None
    elif kind == "program" and chs:
        ch = rng.choice(chs)
        ch["program"] = 1 - ch["program"]
    elif kind == "multiplier":
        lists = [p for ch in chs for p in ch["proofs"] if isinstance(p, list) and p]
        if not lists:
            return None
        pair = rng.choice(rng.choice(lists))
        pair[1] = _bump(pair[1])
    elif kind == "drop-choice":
        holders = [n.get("leaf", n) for t in _trees(c) for n in walk(t)
                   if n.get("leaf", n).get("choices")]
        if not holders:
            return None
        h = rng.choice(holders)
        del h["choices"][rng.randrange(len(h["choices"]))]
    elif kind == "box" and "layerwise" in c and len(c["layerwise"]["boxes"]) > 1:
        box = rng.choice(c["layerwise"]["boxes"][1:])
        side = rng.choice(["lower", "upper"])
        i = rng.randrange(len(box[side]))
        sign = 1 if side == "lower" else -1
        box[side][i] = str(Fraction(box[side][i]) + sign * Fraction(1, 3))
    elif kind == "image" and "layerwise" in c and c["layerwise"].get("image"):
        im = rng.choice(c["layerwise"]["image"])
        proofs = [im["lower"]] + im["upper"]
        nonempty = [p for p in proofs if p]
        if not nonempty:
            return None
        pair = rng.choice(rng.choice(nonempty))
        pair[1] = _bump(pair[1])
    elif kind == "unmerged" and "layerwise" in c and "unmerged" in c["layerwise"]:
        u = c["layerwise"]["unmerged"]
        what = rng.choice(["readout", "position", "pair", "attention"])
        if what == "readout":
            u["readout"]["b"][0] = _bump(str(u["readout"]["b"][0]))
        elif what == "position":
            u["positions"][0][-1] = _bump(str(u["positions"][0][-1]))
        elif what == "pair":
            ff = u["sublayers"][3]["feedforward"]
            ff["b1"][0] = _bump(str(ff["b1"][0]))
        else:
            u["sublayers"][1] = copy.deepcopy(u["sublayers"][-2])
    elif kind == "witness" and c["domain"].get("witness", {}).get("interior"):
        w = c["domain"]["witness"]
        w["interior"] = [str(Fraction(v) * 0) for v in w["interior"]]
    elif kind == "domain":
        tamper_domain(c, rng.choice([1, -1]) * Fraction(1, 3), rng.random() < 0.5, rng)
    elif kind == "weight":
        model = c["models"]["a"]["model"]
        piece = rng.choice([p for layer in model["layers"] for u in layer["units"]
                            for p in u["pieces"]])
        piece["b"] = _bump(str(piece["b"]))
        c["models"]["a"]["sha256"] = content_hash(model)
    else:
        return None
    return kind, c


def tamper_domain(c: dict, delta: Fraction, rehash: bool, rng=None) -> None:
    """Move one bound of the certificate's domain outward by delta (> 0 grows the domain,
    < 0 shrinks it): an upper bound or right-hand side up, a lower bound down; recompute the
    domain's hash when ``rehash`` (else the file no longer matches its own hash)."""
    rng = rng or random.Random(0)
    dom = c["domain"]["domain"]
    if "box" in dom:
        side = rng.choice(["lower", "upper"])
        vec, sign = dom["box"][side], 1 if side == "upper" else -1
    else:
        vec, sign = dom["polyhedron"]["b"], 1
    i = rng.randrange(len(vec))
    vec[i] = str(Fraction(vec[i]) + sign * delta)
    c["domain"].pop("witness", None)    # a witness of the old domain is no part of the claim
    if rehash:
        c["domain"]["sha256"] = content_hash(dom)


def corpus(sources: dict, per_source: int, seed: int = 0):
    """(name, certificate) pairs: every source, then ``per_source`` tamperings of each."""
    rng = random.Random(seed)
    for name, cert in sources.items():
        yield name, cert
        made = 0
        for _ in range(20 * per_source):
            if made == per_source:
                break
            t = tamper(cert, rng)
            if t is not None:
                made += 1
                yield f"{name}/{t[0]}#{made}", t[1]


def verdicts(tmp, name: str, cert: dict, library: str) -> tuple[bool, bool]:
    """(the kernel accepts, Coq accepts) the certificate."""
    import contextlib
    import io
    path = os.path.join(tmp, "corpus.json")
    with open(path, "w") as f:
        json.dump(cert, f)
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        kernel = main(["check-cert", path]) == 0
        coq = main(["export-coq", path, "-o", os.path.join(tmp, "Corpus.v"), "--check",
                    "--coq-lib", library]) == 0
    return kernel, coq
