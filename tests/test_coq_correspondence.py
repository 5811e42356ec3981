"""export-coq for layer correspondences (proofs/Correspondence.v,
exactmax/export/coq_correspondence.py): what ``exactmax equiv A B --cert C.json`` writes by
default for two Maxout networks related layer by layer becomes the Coq theorem
A(x) = B(x) at every real x; a certificate with a changed map entry, a negative weight on a
unit of several pieces, or a model changed under a recomputed hash is rejected by the kernel
and by coqc alike, and coqc's complaint is shown in one line."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import random
import re
from fractions import Fraction

import pytest
from conftest import skip_without_coqc

from exactmax.cli import main
from exactmax.export.coqcheck import ALLOWED
from exactmax.io.certificates import content_hash
from exactmax.io.models import model_to_json

skip_without_coqc()


def P(w, b="0"):
    return {"w": w, "b": b}


# A: a ReLU max(x0 - x1, 0), a unit of rank 3, a negated affine unit, a copy of the rank-3
# unit (its pieces permuted, one repeated); y = max(u0 + u1, -u2) - 2 (u0 + u2 + u3 - u1) + 1
A = {"format": "exactmax/maxout", "version": 1, "input_dim": 2,
     "layers": [{"units": [{"pieces": [P(["1", "-1"]), P(["0", "0"])]},
                           {"pieces": [P(["1", "0"]), P(["0", "1"]), P(["1", "1"])]},
                           {"pieces": [P(["-1", "0"], "-1/2")]},
                           {"pieces": [P(["1", "1"]), P(["0", "1"]), P(["1", "0"]),
                                       P(["0", "1"])]}]},
                {"units": [{"pieces": [P(["1", "1", "0", "0"]), P(["0", "0", "-1", "0"])]},
                           {"pieces": [P(["1", "-1", "1", "1"])]}]}],
     "output": {"W": [["1", "-2"]], "b": ["1"]}}
# B: the same function with units permuted and rescaled (c > 0, and -1/3 on a unit of one
# distinct piece written twice), the ReLU doubled, the copy dropped, layer 2 rescaled
B = {"format": "exactmax/maxout", "version": 1, "input_dim": 2,
     "layers": [{"units": [{"pieces": [P(["3", "0"], "3/2"), P(["3", "0"], "3/2")]},
                           {"pieces": [P(["0", "0"]), P(["2", "-2"])]},
                           {"pieces": [P(["0", "1"]), P(["1", "1"]), P(["1", "0"]),
                                       P(["0", "1"])]}]},
                {"units": [{"pieces": [P(["0", "1", "2"]), P(["2/3", "0", "0"])]},
                           {"pieces": [P(["-1/6", "1/4", "0"])]}]}],
     "output": {"W": [["1/2", "-4"]], "b": ["1"]}}


def run(*args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()) as err:
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def random_pair(seed: int):
    """A random 3-layer network of mixed ranks and its rewrite (units rescaled and permuted,
    pieces permuted, a unit split as a + max(0, b - a)), as JSON."""
    from test_correspondence import network, rewrite

    rng = random.Random(seed)
    a = network(rng, 3, [4, 3, 2], 3, outputs=2)
    return model_to_json(a), model_to_json(rewrite(rng, a))


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("corr")
    pairs = {"hand": (A, B), "random": random_pair(3)}
    for name, (a, b) in pairs.items():
        (d / f"{name}_a.json").write_text(json.dumps(a))
        (d / f"{name}_b.json").write_text(json.dumps(b))
        box = ";".join(["-1,1"] * a["input_dim"])
        code, out, _ = run("equiv", d / f"{name}_a.json", d / f"{name}_b.json", "--box", box,
                           "--cert", d / f"{name}.json")
        assert code == 0 and "a layer correspondence" in out, out
        assert "correspondence" in json.loads((d / f"{name}.json").read_text())
    return d


def coq(folder, cert, library, name="C.v"):
    code, out, _ = run("export-coq", cert, "-o", folder / name, "--check", "--json",
                       "--coq-lib", library)
    return code, json.loads(out)


@pytest.mark.parametrize("name, d", [("hand", 2), ("random", 3)])
def test_a_correspondence_is_proved_in_coq(certs, coq_library, name, d):
    code, out = coq(certs, certs / f"{name}.json", coq_library)
    assert code == 0 and out["verdict"] == "proved" and out["trust"] == "coq-checked", out
    assert set(out["axioms"]) <= ALLOWED and out["about"]["kind"] == "correspondence"
    text = (certs / "C.v").read_text()
    assert re.search(r"Theorem net_corr :\s+forall x : list R, length x = "
                     rf"{d}%nat -> maxoutR net_a x = maxoutR net_b x\.", text)
    assert "Lemma certificate_checks : corr_ok net_a net_b maps = true." in text
    # the human form, on the file as written
    code, stdout, _ = run("export-coq", certs / f"{name}.json", "-o", certs / "C.v",
                          "--existing", "--check", "--coq-lib", coq_library)
    assert code == 0 and "theorem net_corr proved in Coq" in stdout, stdout


def tamperings(doc):
    """(name, a copy of the correspondence certificate ``doc`` (of A and B) with one thing
    changed): a map entry, a negative weight on a unit of B of several distinct pieces (in
    layer 2, and in layer 1), a weight of B with its hash recomputed."""
    entry = copy.deepcopy(doc)
    entry["correspondence"][0]["W"][0][1] = str(Fraction(entry["correspondence"][0]["W"][0][1])
                                                + Fraction(1, 7))
    negative = copy.deepcopy(doc)   # v0 = 1/2 c0: now -1/2 c0, c0 of two pieces
    negative["correspondence"][1]["W"][0][0] = "-1/2"
    negative1 = copy.deepcopy(doc)  # u1 = b2: now -b2, b2 of three distinct pieces
    negative1["correspondence"][0]["W"][1][2] = "-1"
    weight = copy.deepcopy(doc)
    weight["models"]["b"]["model"]["layers"][1]["units"][0]["pieces"][1]["b"] = "1/9"
    weight["models"]["b"]["sha256"] = content_hash(weight["models"]["b"]["model"])
    return [("entry", entry), ("negative", negative), ("negative1", negative1),
            ("weight", weight)]


def test_tampered_correspondences_are_rejected_by_the_kernel_and_by_coq(certs, coq_library,
                                                                         tmp_path):
    doc = json.loads((certs / "hand.json").read_text())
    assert doc["correspondence"][0]["W"][1] == ["0", "0", "1"]
    assert doc["correspondence"][1]["W"][0] == ["1/2", "0"]
    for name, bad in tamperings(doc):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(bad))
        code, out, _ = run("check-cert", path)
        assert code == 1 and out.startswith("rejected"), (name, out)
        if name.startswith("negative"):
            assert "< 0" in out, out
        code, answer = coq(tmp_path, path, coq_library, f"Bad_{name}.v")
        assert code == 1 and answer["verdict"] == "rejected", (name, answer)
        assert "certificate_checks" in answer["coqc_message"] or "corr_ok" in \
            answer["coqc_message"], (name, answer["coqc_message"][:300])
    # the human form: coqc's complaint on one line
    code, out, _ = run("export-coq", tmp_path / "entry.json", "-o", tmp_path / "Bad.v",
                       "--check", "--coq-lib", coq_library)
    lines = out.strip().splitlines()
    assert code == 1 and len(lines) == 2 and lines[1].startswith("coqc rejected "), out


def test_a_changed_file_is_caught_before_coqc(certs, coq_library, tmp_path):
    """--existing: a file whose maps differ from the certificate's is rejected by the
    binding check, naming the sentence."""
    code, _, _ = run("export-coq", certs / "hand.json", "-o", tmp_path / "H.v")
    assert code == 0
    text = (tmp_path / "H.v").read_text()
    (tmp_path / "H.v").write_text(text.replace("[[0; (1#2); 0];", "[[0; 1; 0];", 1))
    code, out, _ = run("export-coq", certs / "hand.json", "-o", tmp_path / "H.v", "--existing",
                       "--check", "--coq-lib", coq_library)
    assert code == 1 and out.startswith("rejected: ") and "maps" in out, out
