"""The Coq library builds without axioms beyond the standard Reals, exported certificates are
accepted by coqc, and certificates changed by one multiplier, one choice or one network weight
are rejected by coqc (the exporter writes what it is given; Coq decides)."""

import copy
import json
from fractions import Fraction
import os
import re
import shutil
import subprocess

import pytest

from certificate_corpus import CUT, MIXED, walk
from conftest import skip_without_coqc
from exactmax.cli import main
from exactmax.export.coqcheck import (ALLOWED, REALS_AXIOMS, AssumptionsRejected,
                                      parse_assumptions, run_coqc)
from exactmax.io.certificates import content_hash

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROOFS = os.path.join(ROOT, "proofs")
EX = os.path.join(ROOT, "examples")

skip_without_coqc()


@pytest.fixture(scope="module")
def library():
    r = subprocess.run(["make", "-C", PROOFS], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


# the theorems whose checks compute Farkas sums in machine words (proofs/Dyadic.v): they rest
# on Coq's primitive integers and the standard library's specification of them too
WORDS = {"relax_sound", "property_sound", "maxout_property_sound",
         "maxout_property_parts_sound", "maxout_eps_sound", "maxout_top1_sound",
         "model_eps_sound", "model_top1_sound", "free_eps_sound", "free_top1_sound"}


def test_the_library_has_no_admitted_proof_and_only_the_reals_axioms(library):
    for name in os.listdir(PROOFS):
        if name.endswith(".v"):
            text = open(os.path.join(PROOFS, name)).read()
            assert not re.search(r"\b(Admitted|admit|Axiom|Parameter)\b", text), name
    # Print Assumptions of every main theorem, read by the parser export-coq --check uses
    # (entries whose type fits on the name's line and ones whose type wraps), theorem by
    # theorem: the Reals axioms alone, except where the checker computes in machine words
    source = open(os.path.join(PROOFS, "Assumptions.v")).read()
    names = re.findall(r"Print Assumptions (\w+)\.", source)
    r = subprocess.run(["coqc", "-Q", ".", "ExactMax", "-no-glob", "Assumptions.v"],
                       cwd=PROOFS, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    blocks = r.stdout.split("Axioms:")[1:]
    assert len(names) >= 15 and len(blocks) == len(names)
    reals = {"ClassicalDedekindReals.sig_forall_dec",
             "FunctionalExtensionality.functional_extensionality_dep"}
    assert set(REALS_AXIOMS) == reals
    for name, block in zip(names, blocks):
        axioms = parse_assumptions("Axioms:" + block)
        assert set(axioms) == {"Axioms"}, name
        got = set(axioms["Axioms"])
        if name in WORDS:
            assert reals < got <= ALLOWED, (name, got - ALLOWED)
            assert any(a.startswith("Uint63.") for a in got), name
        else:
            assert got == reals, (name, got)
    assert WORDS <= set(names)


def certify(tmp_path, a, b, *extra):
    cert = tmp_path / "c.json"
    assert main(["equiv", a, b, "--strategy", "monolithic", "--cert", str(cert), "--json",
                 "--no-search", *extra]) == 0
    return json.loads(cert.read_text())


def export(tmp_path, cert: dict, name="NetEquiv") -> int:
    c = tmp_path / f"{name}.json"
    c.write_text(json.dumps(cert))
    return main(["export-coq", str(c), "-o", str(tmp_path / f"{name}.v"), "--check",
                 "--coq-lib", PROOFS])


def kernel(tmp_path, cert: dict) -> int:
    c = tmp_path / "k.json"
    c.write_text(json.dumps(cert))
    return main(["check-cert", str(c)])


@pytest.fixture(scope="module")
def tent(tmp_path_factory):
    return certify(tmp_path_factory.mktemp("tent"), os.path.join(EX, "tent.json"),
                   os.path.join(EX, "tent_reordered.json"))


def test_the_examples_export_and_coq_accepts_them(library, tent, tmp_path, capsys):
    assert export(tmp_path, tent) == 0
    assert "theorem net_equiv proved in Coq" in capsys.readouterr().out
    text = (tmp_path / "NetEquiv.v").read_text()
    assert "Theorem net_equiv : forall x : list R,\n  length x = 2%nat -> in_box lower upper x ->" \
        in text
    # a polyhedral domain (A x <= b), a network against itself
    tri = os.path.join(EX, "relu_triangle.json")
    assert export(tmp_path, certify(tmp_path, tri, tri), "Triangle") == 0
    assert "in_poly A b x" in (tmp_path / "Triangle.v").read_text()


def test_a_changed_multiplier_choice_or_weight_fails_coqc(library, tent, tmp_path, capsys):
    # one multiplier, in the first leaf choice that has a Farkas proof
    cert = copy.deepcopy(tent)
    leaf = next(n for n in walk(cert["tree"]) if "leaf" in n and any(
        isinstance(p, list) and p for ch in n["leaf"]["choices"] for p in ch["proofs"]))
    proof = next(p for ch in leaf["leaf"]["choices"] for p in ch["proofs"]
                 if isinstance(p, list) and p)
    proof[0][1] = proof[0][1] + "1" if "/" in proof[0][1] else str(int(proof[0][1]) + 1)
    assert kernel(tmp_path, cert) == 1
    assert export(tmp_path, cert, "Multiplier") == 1
    assert "coqc rejected" in capsys.readouterr().out
    # one choice: another argument of a Max node, with the old proofs
    cert = copy.deepcopy(tent)
    leaf = next(n for n in walk(cert["tree"]) if "leaf" in n and n["leaf"]["choices"])
    ch = leaf["leaf"]["choices"][0]
    ch["k"] = (ch["k"] + 1) % len(ch["proofs"])
    assert kernel(tmp_path, cert) == 1
    assert export(tmp_path, cert, "Choice") == 1
    # one weight of network B, its hash recomputed so that the certificate still loads
    cert = copy.deepcopy(tent)
    cert["models"]["b"]["model"]["layers"][0]["units"][0]["pieces"][0]["b"] = "1/1000"
    cert["models"]["b"]["sha256"] = content_hash(cert["models"]["b"]["model"])
    assert kernel(tmp_path, cert) == 1
    assert export(tmp_path, cert, "Weight") == 1


@pytest.fixture(scope="module")
def tent_transformer(tmp_path_factory):
    cert = tmp_path_factory.mktemp("tf") / "c.json"
    assert main(["verify", os.path.join(EX, "tent.json"), "--strategy", "monolithic", "--cert",
                 str(cert), "--json", "--no-search"]) == 0
    return json.loads(cert.read_text())


def test_a_transformer_certificate_proves_transformer_equals_maxout_in_coq(library, tmp_path,
                                                                            tent_transformer):
    assert export(tmp_path, tent_transformer, "TentTransformer") == 0
    text = (tmp_path / "TentTransformer.v").read_text()
    assert "transformerR net_b x = maxoutR net_a x" in text
    assert "Definition net_b_ff0_W1 : mat :=" in text      # the Transformer, readable


def test_a_changed_transformer_weight_fails_coqc(library, tmp_path, tent_transformer):
    changed = 0
    for index, edit in enumerate((("attention", "heads", 0, "value"), ("feedforward", "b1"))):
        cert = copy.deepcopy(tent_transformer)
        tf = cert["models"]["b"]["model"]
        sub = next(s for s in tf["sublayers"] if edit[0] in s)[edit[0]]
        if edit[0] == "attention":
            M = sub["heads"][0]["value"]
            rows = M["entries"] if isinstance(M, dict) else None
            if rows:
                rows[0][2] = "7/5"
            else:
                M[0][0] = "7/5"
        else:
            sub["b1"][0] = "1/7"
        cert["models"]["b"]["sha256"] = content_hash(tf)
        assert kernel(tmp_path, cert) == 1
        assert export(tmp_path, cert, f"Tampered{index}") == 1
        changed += 1
    assert changed == 2


def test_what_the_library_cannot_state_yet_is_refused_with_a_reason(tmp_path, capsys):
    # softmax attention has no exact value: a certificate's Transformer made softmax
    cert = tmp_path / "tf.json"
    assert main(["verify", os.path.join(EX, "tent.json"), "--cert", str(cert), "--json",
                 "--no-search"]) == 0
    c = json.loads(cert.read_text())
    tf = c["models"]["b"]["model"]
    next(s for s in tf["sublayers"] if "attention" in s)["attention"]["kind"] = "softmax"
    c["models"]["b"]["sha256"] = content_hash(tf)
    cert.write_text(json.dumps(c))
    capsys.readouterr()
    assert main(["export-coq", str(cert), "-o", str(tmp_path / "T.v")]) == 2
    err = capsys.readouterr().err
    assert "softmax" in err
    assert err.startswith("exactmax: error: ") and err.count("\n") == 1
    assert not (tmp_path / "T.v").exists()


def test_bad_output_names_are_refused(tent, tmp_path, capsys):
    c = tmp_path / "c.json"
    c.write_text(json.dumps(tent))
    for bad in ("1net.v", "net.txt", "my-net.v"):
        assert main(["export-coq", str(c), "-o", str(tmp_path / bad)]) == 2
    assert "expected a Coq file name" in capsys.readouterr().err


def test_the_readme_example_uses_an_exported_theorem_in_a_users_own_file(tmp_path, library):
    """examples/coq/UseTent.v (shown in docs/certificates.md) imports the export of tent.json's
    certificate and derives a corollary; coqc must accept it."""
    cert = tmp_path / "tent.cert.json"
    assert main(["verify", os.path.join(EX, "tent.json"), "--strategy", "monolithic",
                 "--cert", str(cert), "--no-search"]) == 0
    assert main(["export-coq", str(cert), "-o", str(tmp_path / "TentEquiv.v"), "--check",
                 "--coq-lib", PROOFS]) == 0
    shutil.copy(os.path.join(EX, "coq", "UseTent.v"), tmp_path)
    r = subprocess.run(["coqc", "-Q", PROOFS, "ExactMax", "-no-glob", "UseTent.v"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


# ------------------------------------------------------------------ layerwise certificates

LAYERWISE = ("tent.json", "relu_triangle.json", "maxout_d3_w4_r3.json")


@pytest.fixture(scope="module")
def layerwise(tmp_path_factory):
    """verify's default certificates (layerwise) of the examples against their Transformers."""
    d = tmp_path_factory.mktemp("lw")
    out = {}
    for name in LAYERWISE:
        cert = d / name
        assert main(["verify", os.path.join(EX, name), "--cert", str(cert), "--json",
                     "--no-search"]) == 0
        out[name] = json.loads(cert.read_text())
        assert "layerwise" in out[name]
    return out


def test_layerwise_certificates_of_the_examples_export_and_coq_accepts_them(library, layerwise,
                                                                           tmp_path, capsys):
    for i, name in enumerate(LAYERWISE):
        assert export(tmp_path, layerwise[name], f"Layerwise{i}") == 0, name
        assert "theorem net_equiv proved in Coq" in capsys.readouterr().out
        text = (tmp_path / f"Layerwise{i}.v").read_text()
        assert "transformerR net_b x = maxoutR net_a x" in text
        assert "exact (layerwise_sound net_a net_b" in text     # the composition theorem
        assert "Definition net_b_ff0_W1 : mat :=" in text      # the Transformer, readable
        dom = layerwise[name]["domain"]["domain"]
        assert ("in_box lower upper x" if "box" in dom else "in_poly A b x") in text


def _first_farkas(claims):
    """The first non-empty Farkas list of a choice in the claims' trees."""
    for claim in claims:
        for n in walk(claim["tree"]):
            for ch in n.get("leaf", n).get("choices", ()):
                for p in ch["proofs"]:
                    if isinstance(p, list) and p:
                        return p
    raise AssertionError("no Farkas proof")


def _bump(pair):
    pair[1] = pair[1] + "1" if "/" in pair[1] else str(int(pair[1]) + 1)


def test_a_tampered_layerwise_certificate_fails_coqc(library, layerwise, tmp_path, capsys):
    tent, tri = layerwise["tent.json"], layerwise["relu_triangle.json"]
    tampered = []
    # one box bound: B_1 no longer contains the image of B_0
    cert = copy.deepcopy(tent)
    cert["layerwise"]["boxes"][1]["upper"][0] = "0"
    tampered.append(("Box", cert))
    # one bound of B_0 over a polyhedral domain: a multiplier of its Farkas proof
    cert = copy.deepcopy(tri)
    _bump(cert["layerwise"]["box_proofs"][0][0][0])
    tampered.append(("BoxProof", cert))
    # one multiplier of a claim's tree
    cert = copy.deepcopy(tent)
    _bump(_first_farkas(cert["layerwise"]["layers"][1])[0])
    tampered.append(("Multiplier", cert))
    # one choice: another argument, with the old proofs
    cert = copy.deepcopy(tent)
    ch = next(ch for claim in cert["layerwise"]["layers"][0] for n in walk(claim["tree"])
              for ch in n.get("leaf", n).get("choices", ()) if len(ch["proofs"]) > 1)
    ch["k"] = (ch["k"] + 1) % len(ch["proofs"])
    tampered.append(("Choice", cert))
    # one weight of the Maxout network, its hash recomputed so that the certificate loads
    cert = copy.deepcopy(tent)
    net = cert["models"]["a"]["model"]
    net["layers"][1]["units"][0]["pieces"][0]["b"] = "1/1000"
    cert["models"]["a"]["sha256"] = content_hash(net)
    tampered.append(("Weight", cert))
    for name, cert in tampered:
        assert kernel(tmp_path, cert) == 1, name
        capsys.readouterr()
        assert export(tmp_path, cert, f"Tampered{name}") == 1, name
        out = capsys.readouterr().out      # rejected by the check, not by a typo of the writer
        assert "coqc rejected" in out and "layerwise_ok net_a net_b" in out, name


def test_a_layerwise_certificate_between_two_maxout_networks_exports(library, tmp_path, capsys):
    """equiv --strategy layerwise compares two Maxout networks of the same widths layer by
    layer; Coq proves maxoutR net_b = maxoutR net_a by mm_layerwise_sound, and rejects a
    changed weight."""
    cert = tmp_path / "mm.json"
    assert main(["equiv", os.path.join(EX, "tent.json"), os.path.join(EX, "tent_reordered.json"),
                 "--cert", str(cert), "--json", "--no-search", "--strategy", "layerwise"]) == 0
    c = json.loads(cert.read_text())
    assert "layerwise" in c
    assert export(tmp_path, c, "TwoMaxout") == 0
    text = (tmp_path / "TwoMaxout.v").read_text()
    assert "maxoutR net_b x = maxoutR net_a x" in text and "mm_layerwise_sound" in text
    net = c["models"]["b"]["model"]
    net["layers"][0]["units"][0]["pieces"][0]["b"] = "1/1000"
    c["models"]["b"]["sha256"] = content_hash(net)
    assert kernel(tmp_path, c) == 1
    capsys.readouterr()
    assert export(tmp_path, c, "TwoMaxoutWeight") == 1
    assert "mm_layerwise_ok net_a net_b" in capsys.readouterr().out


# ------------------------------------------------------- mixed ranks, polyhedra, merged


def _layerwise_cert(tmp_path, net, name, *extra):
    p, cert = tmp_path / f"{name}.json", tmp_path / f"{name}.cert.json"
    p.write_text(json.dumps(net))
    assert main(["verify", str(p), "--cert", str(cert), "--json", "--no-search", *extra]) == 0
    c = json.loads(cert.read_text())
    assert "layerwise" in c
    return c


def test_mixed_ranks_and_the_first_layer_over_a_polyhedron_are_proved_in_coq(library,
                                                                            tmp_path, capsys):
    """Units of rank 1 and repeated pieces under an output map (the same-max rule with a
    node that is not max-like), on a box and on a polyhedron (rule (B'): the first layer
    over the domain's rows, B_1 by Farkas proofs)."""
    box = _layerwise_cert(tmp_path, dict(MIXED, domain={"box": {"lower": [-1, -1],
                                                                "upper": [1, 1]}}), "box")
    poly = _layerwise_cert(tmp_path, dict(MIXED, domain=CUT), "poly")
    assert "image" not in box["layerwise"] and len(poly["layerwise"]["image"]) == 3
    for name, cert in (("MixedBox", box), ("MixedPoly", poly)):
        assert kernel(tmp_path, cert) == 0, name
        assert export(tmp_path, cert, name) == 0, name
        assert "theorem net_equiv proved in Coq" in capsys.readouterr().out


def test_a_tampered_first_layer_image_fails_both_checkers(library, tmp_path, capsys):
    poly = _layerwise_cert(tmp_path, dict(MIXED, domain=CUT), "poly")
    tampered = []
    cert = copy.deepcopy(poly)                    # B_1 tighter than its proofs show
    box = cert["layerwise"]["boxes"][1]
    box["lower"][1] = str((Fraction(box["lower"][1]) + Fraction(box["upper"][1])) / 2)
    tampered.append(("ImageBound", cert))
    cert = copy.deepcopy(poly)                    # one upper proof's multiplier
    _bump(next(u for im in cert["layerwise"]["image"] for u in im["upper"] if u)[0])
    tampered.append(("ImageProof", cert))
    cert = copy.deepcopy(poly)                    # the lower piece of a unit moved
    im = next(im for im in cert["layerwise"]["image"] if len(im["upper"]) > 1)
    im["lower_piece"] = (im["lower_piece"] + 1) % len(im["upper"])
    tampered.append(("ImagePiece", cert))
    cert = copy.deepcopy(poly)                    # (B') claimed, the first layer over B_0
    del cert["layerwise"]["image"]
    tampered.append(("NoImage", cert))
    for name, cert in tampered:
        assert kernel(tmp_path, cert) == 1, name
        capsys.readouterr()
        assert export(tmp_path, cert, f"Tampered{name}") == 1, name
        assert "coqc rejected" in capsys.readouterr().out, name


def test_a_merged_transformer_is_proved_in_coq_through_its_unmerged_form(library, tmp_path,
                                                                         capsys):
    """Rule (M): every merged feed-forward sub-layer is the unmerged pair, an identity of the
    translation on one symbolic token (Layerwise.same_ff), then the unmerged Transformer is
    checked layer by layer; a pair that is not the merged sub-layer fails both checkers."""
    cert = _layerwise_cert(tmp_path, dict(MIXED, domain=CUT), "merged", "--transformer",
                           str(_compile_merged(tmp_path)))
    assert "unmerged" in cert["layerwise"]
    assert export(tmp_path, cert, "Merged") == 0
    assert "theorem net_equiv proved in Coq" in capsys.readouterr().out
    assert "merged_layerwise_sound" in (tmp_path / "Merged.v").read_text()
    bad = copy.deepcopy(cert)
    gate = bad["layerwise"]["unmerged"]["sublayers"][3]["feedforward"]   # F_1, unmerged
    gate["b1"][0] = str(Fraction(gate["b1"][0]) + 1)
    assert kernel(tmp_path, bad) == 1
    capsys.readouterr()
    assert export(tmp_path, bad, "MergedTampered") == 1
    assert "coqc rejected" in capsys.readouterr().out


def _compile_merged(tmp_path):
    net, tf = tmp_path / "mnet.json", tmp_path / "mtf.json"
    net.write_text(json.dumps(dict(MIXED, domain=CUT)))
    assert main(["compile", str(net), "-o", str(tf), "--merged"]) == 0
    return tf


# ------------------------------------------- ranks 1 to 4, exact image bounds, same-max leaves


def _piece(w, b):
    return {"w": [str(v) for v in w], "b": str(b)}


# units of ranks 1, 2, 3, 4 then 4, 1, 2 (the compiled Transformer pads lower ranks by
# repeating a piece; a unit of rank 1 is the piece's own node on the Maxout side), under an
# output map: the same-max rule with a node that is not max-like, inside the composite rule
RANKS = {"format": "exactmax/maxout", "version": 1, "input_dim": 2,
         "layers": [{"units": [
             {"pieces": [_piece([1, "-1/2"], 0)]},
             {"pieces": [_piece(["1/3", 1], "1/4"), _piece([-1, "2/3"], 0)]},
             {"pieces": [_piece([2, 0], "-1/3"), _piece([0, -1], "1/5"),
                         _piece(["1/2", "1/2"], 0)]},
             {"pieces": [_piece([1, 0], 0), _piece([-1, 0], 0), _piece([0, 1], 0),
                         _piece([0, -1], 0)]}]},
             {"units": [
                 {"pieces": [_piece([1, 1, -1, "1/2"], 0), _piece(["1/2", 0, 1, 0], "-1/3"),
                             _piece([0, -1, "1/2", 1], 1), _piece([-1, 0, 0, 0], "1/7")]},
                 {"pieces": [_piece([1, -1, 0, "1/3"], "1/2")]},
                 {"pieces": [_piece([0, "1/2", -1, 0], 0), _piece([1, 0, 0, -1], "-1/4")]}]}],
         "output": {"W": [["1", "-2", "1/2"], ["1/3", "1", "0"]], "b": ["0", "1/7"]}}
STEP = Fraction(1, 2 ** 20)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """RANKS on a box and on the polyhedron CUT, layerwise (verify's default) and monolithic."""
    d = tmp_path_factory.mktemp("ranks")
    out = {}
    for dname, dom in (("box", {"box": {"lower": [-1, -1], "upper": [1, 1]}}), ("poly", CUT)):
        net = dict(RANKS, domain=dom)
        out[dname, "layerwise"] = _layerwise_cert(d, net, f"{dname}-layerwise")
        out[dname, "monolithic"] = _monolithic_cert(d, net, f"{dname}-monolithic")
    return out


def _monolithic_cert(tmp_path, net, name):
    p, cert = tmp_path / f"{name}.json", tmp_path / f"{name}.cert.json"
    p.write_text(json.dumps(net))
    assert main(["verify", str(p), "--cert", str(cert), "--json", "--no-search",
                 "--strategy", "monolithic"]) == 0
    c = json.loads(cert.read_text())
    assert "tree" in c
    return c


def _same_max_leaves(cert):
    return sum(1 for layer in cert["layerwise"]["layers"] for claim in layer
               for n in walk(claim["tree"]) if n.get("leaf", {}).get("same_max"))


def test_units_of_ranks_one_to_four_under_an_output_map_are_proved_in_coq(library, ranks,
                                                                         tmp_path, capsys):
    assert _same_max_leaves(ranks["box", "layerwise"]) > 0
    assert _same_max_leaves(ranks["poly", "layerwise"]) > 0
    assert "image" not in ranks["box", "layerwise"]["layerwise"]
    assert len(ranks["poly", "layerwise"]["layerwise"]["image"]) == 4   # (B')
    for (dname, strategy), cert in sorted(ranks.items()):
        name = f"Ranks{dname.capitalize()}{strategy.capitalize()}"
        assert kernel(tmp_path, cert) == 0, name
        capsys.readouterr()
        assert export(tmp_path, cert, name) == 0, name
        assert "theorem net_equiv proved in Coq" in capsys.readouterr().out, name


def _rows_b(cert):
    return [Fraction(str(v)) for v in cert["domain"]["domain"]["polyhedron"]["b"]]


def _proved(proof, b):
    """sum y_i b_i: a Farkas list over the domain's rows b_i - A_i x >= 0 shows
    e(x) >= 0 for e = sum y_i (b_i - A_i x) + r with r >= 0, the constant left over."""
    return sum((Fraction(y) * b[i] for i, y in proof), Fraction(0))


def _exact_image(cert):
    """The bounds of B_1 exactly as the image proofs show them: for unit i, lower piece p,
    p.b - lower_i >= sum y b over the rows, so lower_i <= p.b - sum y b; for piece j,
    upper_i - p_j.b >= sum y b, so upper_i >= p_j.b + sum y b."""
    b = _rows_b(cert)
    units = cert["models"]["a"]["model"]["layers"][0]["units"]
    lower, upper = [], []
    for unit, im in zip(units, cert["layerwise"]["image"]):
        pieces = unit["pieces"]
        lower.append(Fraction(pieces[im["lower_piece"]]["b"]) - _proved(im["lower"], b))
        upper.append(max(Fraction(p["b"]) + _proved(u, b) for p, u in zip(pieces, im["upper"])))
    return lower, upper


def test_image_bounds_exactly_as_proved_pass_and_one_step_beyond_fail_both_checkers(
        library, ranks, tmp_path, capsys):
    """B_1 moved to exactly the bounds the Farkas proofs of (B') show is accepted by both
    checkers; any one bound 1/2^20 beyond is rejected by both."""
    poly = ranks["poly", "layerwise"]
    lower, upper = _exact_image(poly)
    exact = copy.deepcopy(poly)
    exact["layerwise"]["boxes"][1] = {"lower": [str(v) for v in lower],
                                      "upper": [str(v) for v in upper]}
    assert exact["layerwise"]["boxes"][1] != poly["layerwise"]["boxes"][1]   # tighter
    assert kernel(tmp_path, exact) == 0
    capsys.readouterr()
    assert export(tmp_path, exact, "ImageExact") == 0
    assert "theorem net_equiv proved in Coq" in capsys.readouterr().out
    for i in range(len(lower)):
        for side, step in (("lower", STEP), ("upper", -STEP)):
            cert = copy.deepcopy(exact)
            box = cert["layerwise"]["boxes"][1]
            box[side][i] = str(Fraction(box[side][i]) + step)
            _both_reject(tmp_path, capsys, cert, f"Image{side.capitalize()}{i}")


def _both_reject(tmp_path, capsys, cert, name):
    """The kernel rejects the certificate, and coqc rejects it in the layerwise check."""
    assert kernel(tmp_path, cert) == 1, name
    capsys.readouterr()
    assert export(tmp_path, cert, name) == 1, name
    out = capsys.readouterr().out
    assert "coqc rejected" in out and "layerwise_ok net_a net_b" in out, name


def test_a_same_max_leaf_with_one_piece_changed_fails_both_checkers(library, ranks, tmp_path,
                                                                    capsys):
    """A piece of the last layer's unit of rank 1 (a node that is not max-like against a
    hardmax head over four copies) or of rank 2 (a head over a repeated piece) moved by
    1/2^20 in the Maxout network: the sets of maps of a same-max leaf differ."""
    for dname in ("box", "poly"):
        valid = ranks[dname, "layerwise"]
        for unit, piece in ((1, 0), (2, 1)):
            cert = copy.deepcopy(valid)
            net = cert["models"]["a"]["model"]
            p = net["layers"][1]["units"][unit]["pieces"][piece]
            p["b"] = str(Fraction(p["b"]) + STEP)
            cert["models"]["a"]["sha256"] = content_hash(net)
            _both_reject(tmp_path, capsys, cert, f"SameMax{dname.capitalize()}{unit}")


# ------------------------------------------- what a checked .v file is bound to (#18)


def _existing(tmp_path, cert: dict, name: str, *extra) -> int:
    """export-coq --existing: check the file already at tmp_path/name.v against the cert."""
    c = tmp_path / f"{name}.json"
    c.write_text(json.dumps(cert))
    return main(["export-coq", str(c), "-o", str(tmp_path / f"{name}.v"), "--existing",
                 "--coq-lib", PROOFS, *extra])


def test_a_shrunk_domain_in_the_v_file_is_caught_though_it_still_compiles(library, layerwise,
                                                                          tmp_path, capsys):
    cert = layerwise["tent.json"]
    assert export(tmp_path, cert, "Bound") == 0
    path = tmp_path / "Bound.v"
    text = path.read_text()
    # the file names the models' and the domain's sha256, in a comment and as definitions
    for key, h in (("a", cert["models"]["a"]["sha256"]), ("b", cert["models"]["b"]["sha256"]),
                   ("domain", cert["domain"]["sha256"])):
        name = {"a": "net_a", "b": "net_b"}.get(key, key)
        assert f'Definition {name} : string := "{h}".' in text and f"{name:<7} {h}" in text
    assert _existing(tmp_path, cert, "Bound") == 0          # the file as written passes
    capsys.readouterr()
    # the domain's upper bound 1 -> 1/2: a true theorem about a smaller domain
    shrunk = text.replace("Definition upper : list Q := [1; 1].",
                          "Definition upper : list Q := [1; (1#2)].")
    assert shrunk != text
    path.write_text(shrunk)
    r = subprocess.run(["coqc", "-Q", PROOFS, "ExactMax", "-no-glob", "Bound.v"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr                     # Coq alone cannot tell
    assert _existing(tmp_path, cert, "Bound") == 1
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("rejected: ")
    assert "Definition upper (the domain): number 1 is 1/2, but" in out and "has 1" in out
    # a hash, a weight of the Transformer, the statement: each named
    for old, new, named in (
            (f'"{cert["domain"]["sha256"]}"', '"' + "0" * 64 + '"',
             "Definition Sha256.domain"),
            (cert["models"]["b"]["sha256"], "1" * 64, "opening comment gives net_b sha256 111"),
            ("length x = 2%nat", "length x = 3%nat", "Theorem net_equiv"),
            ("Definition net_b_ff0_b1 : list Q :=\n  [", "Definition net_b_ff0_b1 : list Q :=\n  [7; ",
             "Definition net_b_ff0_b1 (model b)")):
        assert old in text, old
        path.write_text(text.replace(old, new, 1))
        assert _existing(tmp_path, cert, "Bound") == 1, named
        out = capsys.readouterr().out
        assert out.count("\n") == 1 and named in out, out
    # a missing file is bad input (exit 2, one line)
    path.unlink()
    assert _existing(tmp_path, cert, "Bound") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Bound.v" in err


def test_the_shapes_are_stated_and_proved_by_computation(library, tent, layerwise, tmp_path):
    assert export(tmp_path, tent, "ShapesMono") == 0
    text = (tmp_path / "ShapesMono.v").read_text()
    assert "Lemma shapes_ok :\n  well_shaped (MMaxout net_a) (MMaxout net_b) && box_shaped 2 " \
           "lower upper = true.\nProof. vm_compute. reflexivity. Qed." in text
    assert "exact (equiv_box_sound" in text
    assert export(tmp_path, layerwise["relu_triangle.json"], "ShapesLw") == 0
    text = (tmp_path / "ShapesLw.v").read_text()
    assert "Lemma shapes_ok : lw_shaped net_a net_b (DPoly A b) = true." in text
    # a piece of net_a's first layer with a third weight for a 2-D input: the list functions
    # truncate it away, so the (monolithic) certificate still checks, but Coq refuses shapes_ok
    text = (tmp_path / "ShapesMono.v").read_text()
    bad = re.sub(r"(pw := \[[^\]]*)\]", r"\1; 5]", text, count=1)
    assert bad != text
    (tmp_path / "IllShaped.v").write_text(bad)
    r = subprocess.run(["coqc", "-Q", PROOFS, "ExactMax", "-no-glob", "IllShaped.v"],
                       cwd=tmp_path, capture_output=True, text=True)
    at = bad.index("Proof. vm_compute. reflexivity.", bad.index("Lemma shapes_ok"))
    line = bad[:at].count("\n") + 1
    assert r.returncode != 0 and f'line {line},' in r.stderr, (line, r.stderr)
    assert 'Unable to unify "true" with "false"' in r.stderr


LONG = ("forall (A B C D : Prop) (f g : A -> B), (forall a : A, f a = g a) -> "
        "(C -> D) -> C -> D")


@pytest.mark.parametrize("axiom, statement", [
    ("foo", "False"),                                  # printed on one line: foo : False
    ("a_long_axiom_name_whose_type_wraps", LONG)])     # printed as name, then "  : type"
def test_a_theorem_resting_on_an_axiom_outside_the_allow_list_is_rejected(library, tmp_path,
                                                                         axiom, statement):
    """Print Assumptions prints a short axiom on its name's line and a long one wrapped onto
    the next lines; both are read, named and rejected."""
    v = tmp_path / "Ax.v"
    v.write_text(f"Axiom {axiom} : {statement}.\nTheorem net_equiv : {statement}.\n"
                 f"Proof. exact {axiom}. Qed.\nPrint Assumptions net_equiv.\n")
    r = subprocess.run(["coqc", v.name], cwd=tmp_path, capture_output=True, text=True)
    wrapped = f"\n{axiom}\n  : " in r.stdout
    assert wrapped == (axiom != "foo") and (f"\nfoo : False" in r.stdout) == (axiom == "foo")
    r = run_coqc(str(v), PROOFS)
    assert not r.ok and f"depends on the axiom {axiom}, which is not" in r.message, r
    # without it, the theorem is closed and accepted
    v.write_text("Theorem net_equiv : True.\nProof. exact I. Qed.\nPrint Assumptions net_equiv.\n")
    assert run_coqc(str(v), PROOFS).ok


def test_print_assumptions_is_read_completely():
    short = "Axioms:\nPrimInt63.sub : PrimInt63.int -> PrimInt63.int -> PrimInt63.int\n"
    wrapped = ("ClassicalDedekindReals.sig_forall_dec\n  : forall P : nat -> Prop,\n"
               "    (forall n : nat, {P n} + {~ P n}) ->\n")
    got = parse_assumptions(short + wrapped + "foo : False\n")
    assert got == {"Axioms": ["PrimInt63.sub", "ClassicalDedekindReals.sig_forall_dec", "foo"]}
    assert parse_assumptions("Closed under the global context\n") == {}
    from exactmax.export.coqcheck import check_assumptions
    assert check_assumptions(short + wrapped) == ["PrimInt63.sub",
                                                  "ClassicalDedekindReals.sig_forall_dec"]
    for bad, named in ((short + "foo : False\n", "foo"),
                       (short + "Constants/Inductives relying on type-in-type:\nbar\n",
                        "type-in-type"),
                       ("", "nothing"), ("  : False\n", "cannot read"),
                       ("Axioms:\nfoo bar baz\n", "cannot read")):
        with pytest.raises(AssumptionsRejected, match=named):
            check_assumptions(bad)
    assert {"PArray.make", "PrimInt63.add", "PrimFloat.add", "Uint63.mulc_spec"} <= ALLOWED
    assert not any(n.split(".")[0] not in ("PrimInt63", "PArray", "PrimFloat", "Uint63")
                   for n in ALLOWED if n not in REALS_AXIOMS)
    # of Uint63, only the standard library's axioms specifying the primitives
    uint63 = {n for n in ALLOWED if n.startswith("Uint63.")}
    assert len(uint63) == 26 and all(
        n.endswith("_spec") or n in ("Uint63.of_to_Z", "Uint63.eqb_correct", "Uint63.eqb_refl")
        for n in uint63)
    assert "Uint63.foo" not in ALLOWED and "Sint63.div_spec" not in ALLOWED


def _library_copy(tmp_path):
    """The built library (sources, .vo files, manifest) copied to tmp_path/lib."""
    lib = tmp_path / "lib"
    lib.mkdir()
    from exactmax.export.coqlib import MANIFEST, build_order
    for m in build_order(PROOFS):
        for ext in (".v", ".vo"):
            shutil.copy2(os.path.join(PROOFS, m + ext), lib)
    shutil.copy2(os.path.join(PROOFS, MANIFEST), lib)
    return lib


def test_a_stale_library_is_refused_with_the_command_that_rebuilds_it(library, tent, tmp_path,
                                                                     capsys):
    lib = _library_copy(tmp_path)
    c = tmp_path / "c.json"
    c.write_text(json.dumps(tent))

    def check():
        capsys.readouterr()
        return main(["export-coq", str(c), "-o", str(tmp_path / "Fresh.v"), "--check",
                     "--coq-lib", str(lib)])
    assert check() == 0
    capsys.readouterr()
    assert main(["coq-lib", "--coq-lib", str(lib), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["current"] is True
    export_v = lib / "Export.v"
    original = export_v.read_text()
    export_v.write_text(original + "\n(* edited after the build *)\n")
    for run in (check, lambda: main(["coq-lib", "--coq-lib", str(lib)])):
        capsys.readouterr()
        assert run() == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "stale: Export.v changed after it was built" in err
        assert f"make -C {lib}" in err
    export_v.write_text(original)
    assert check() == 0
    # built by another coqc, or not built at all
    manifest = lib / "exactmax-build.sha256"
    manifest.write_text(manifest.read_text().replace("# coqc ", "# coqc 8.15.0 "))
    assert check() == 2 and "was built by coqc 8.15.0" in capsys.readouterr().err
    manifest.unlink()
    assert check() == 2 and "is not built" in capsys.readouterr().err
    # a library that declares an axiom is not the exactmax library
    shutil.copy2(os.path.join(PROOFS, "exactmax-build.sha256"), lib)
    assert check() == 0
    export_v.write_text(original.replace("Definition model_shaped",
                                         "Axiom cheat : False.\nDefinition model_shaped"))
    import hashlib
    digest = hashlib.sha256(export_v.read_bytes()).hexdigest()
    manifest.write_text(re.sub(r"\S+(  Export\.v)", digest + r"\1", manifest.read_text()))
    assert check() == 2 and "Export.v declares an axiom" in capsys.readouterr().err


def test_the_library_is_found_in_the_cache_when_not_in_a_checkout(tmp_path, monkeypatch,
                                                                  capsys):
    from exactmax.export import coqlib
    monkeypatch.delenv("EXACTMAX_COQ_LIB", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(coqlib, "checkout_sources", lambda: None)     # as after pip install
    monkeypatch.setattr(coqlib, "shipped_sources", lambda: PROOFS)    # (exactmax/coq there)
    assert main(["coq-lib", "--path"]) == 0
    path = capsys.readouterr().out.strip()
    version = coqlib.coqc_version().split()[0]
    assert path.startswith(str(tmp_path / "cache" / "exactmax" / "coq") + os.sep)
    assert path.endswith(f"-coq{version}") and os.path.basename(path).startswith("0.")
    assert main(["coq-lib", "--json"]) == 2                  # not built yet
    rep = json.loads(capsys.readouterr().out)
    assert rep["from"] == "cache" and rep["current"] is False and "not" in rep["reason"]
    monkeypatch.setenv("EXACTMAX_COQ_LIB", str(tmp_path / "mine"))
    assert main(["coq-lib", "--path"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "mine")
    assert main(["coq-lib", "--path", "--coq-lib", str(tmp_path / "other")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "other")


def test_an_empty_domain_is_vacuous_in_coq_too(library, tmp_path, capsys):
    """tent.json against the broken Transformer over {x0 <= 0, x0 >= 1}, one Empty leaf: Coq
    accepts the file, and export-coq says vacuous (exit 5) as check-cert does."""
    from exactmax.io import load_domain, load_model
    from exactmax.io.certificates import certificate_to_json
    from exactmax.kernel.certificate import Empty
    dom = tmp_path / "empty.json"
    dom.write_text(json.dumps({"format": "exactmax/domain", "version": 1, "polyhedron": {
        "A": [[1, 0], [-1, 0]], "b": [0, -1]}}))
    broken = os.path.join(EX, "tent_broken.transformer.json")
    cert = certificate_to_json(load_model(os.path.join(EX, "tent.json")), load_model(broken),
                               load_domain(str(dom)), Empty(((0, 1), (1, 1))), {})
    c = tmp_path / "c.json"
    c.write_text(json.dumps(cert))
    assert main(["check-cert", str(c)]) == 5
    capsys.readouterr()
    assert main(["export-coq", str(c), "-o", str(tmp_path / "Vacuous.v"), "--check",
                 "--coq-lib", PROOFS]) == 5
    out = capsys.readouterr().out
    assert "coqc accepted" in out and "vacuous: the domain is empty" in out
    assert "proved in Coq" not in out and "(empty)" in out
    assert main(["export-coq", str(c), "-o", str(tmp_path / "Vacuous.v"), "--existing",
                 "--coq-lib", PROOFS, "--json"]) == 5
    rep = json.loads(capsys.readouterr().out)
    assert rep["verdict"] == "vacuous" and rep["checked"] is True
    assert rep["about"]["domain"]["empty"] is True
    assert main(["export-coq", str(c), "-o", str(tmp_path / "Vacuous.v")]) == 5
    assert "vacuous" in capsys.readouterr().out
