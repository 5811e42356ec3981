"""export-coq for pair certificates (proofs/Pair.v, exactmax/export/coq_pair.py): what
``exactmax equiv A B --epsilon E`` and ``--top1`` prove about two Maxout networks becomes a Coq
theorem (|A(x) - B(x)|_inf <= E, or equal arg max sets, at every real x of the domain); a
certificate with a changed multiplier, a smaller epsilon or a model changed under its hash is
rejected by the kernel and by coqc alike; what has no Coq export yet is refused in one line."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
from fractions import Fraction

import pytest
from conftest import skip_without_coqc

from exactmax.cli import main
from exactmax.export.coqcheck import ALLOWED, run_coqc
from exactmax.io.certificates import content_hash

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROOFS = os.path.join(ROOT, "proofs")

skip_without_coqc()


def relu(w, b="0"):
    return {"pieces": [{"w": w, "b": b}, {"w": ["0"] * len(w), "b": "0"}]}


# y = (relu(x0) + relu(x1), relu(x1) + relu(x0 - x1)); B: one weight moved by 1/100
A = {"format": "exactmax/maxout", "version": 1, "input_dim": 2,
     "layers": [{"units": [relu(["1", "0"]), relu(["0", "1"]), relu(["1", "-1"])]}],
     "output": {"W": [["1", "1", "0"], ["0", "1", "1"]], "b": ["0", "0"]}}
B = copy.deepcopy(A)
B["layers"][0]["units"][0]["pieces"][0]["w"] = ["1", "1/100"]
# C = 2 A + 1/3, with a unit of rank 3 (its third piece never wins): the same arg max sets
C = copy.deepcopy(A)
C["output"] = {"W": [["2", "2", "0"], ["0", "2", "2"]], "b": ["1/3", "1/3"]}
C["layers"][0]["units"][1]["pieces"].append({"w": ["0", "1/2"], "b": "-1"})


def run(*args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()) as err:
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def library(coq_library):
    return coq_library


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("pair")
    for name, net in (("a", A), ("b", B), ("c", C)):
        (d / f"{name}.json").write_text(json.dumps(net))
    code, out, _ = run("equiv", d / "a.json", d / "b.json", "--box", "-1,1;-1,1", "--epsilon",
                       "1/10", "--cert", d / "eps.json")
    assert code == 0, out
    code, out, _ = run("equiv", d / "a.json", d / "c.json", "--box", "-1,1;0,1", "--top1",
                       "--cert", d / "top1.json")
    assert code == 0, out
    return d


def coq(folder, cert, library, name="P.v"):
    code, out, _ = run("export-coq", cert, "-o", folder / name, "--check", "--json",
                       "--coq-lib", library)
    return code, json.loads(out)


@pytest.mark.parametrize("cert, statement", [
    ("eps.json", r"forall o, \(o < 2\)%nat ->\s+Rabs \(nth o \(maxoutR net_a x\) 0 - nth o "
                 r"\(maxoutR net_b x\) 0\) <= Q2R epsilon\."),
    ("top1.json", r"forall i, \(i < 2\)%nat ->\s+\(\(forall j, \(j < 2\)%nat -> nth j \(maxoutR "
                  r"net_a x\) 0 <= nth i \(maxoutR net_a x\) 0\) <->"),
])
def test_an_epsilon_and_a_top1_certificate_are_proved_in_coq(certs, library, cert, statement):
    code, out = coq(certs, certs / cert, library)
    assert code == 0 and out["verdict"] == "proved" and out["trust"] == "coq-checked", out
    assert set(out["axioms"]) <= ALLOWED and out["about"]["kind"] == "pair"
    text = (certs / "P.v").read_text()
    assert re.search(r"Theorem net_pair :\s+forall x : list R, length x = 2%nat -> in_poly A b "
                     r"x ->", text)
    assert re.search(statement, text), text[-1500:]
    if cert == "eps.json":
        assert "Definition epsilon : Q := (1#10)." in text
    # the human form
    code, stdout, _ = run("export-coq", certs / cert, "-o", certs / "P.v", "--existing", "--check")
    assert code == 0 and "theorem net_pair proved in Coq" in stdout, stdout


def _first_farkas(tree):
    todo = [tree]
    while todo:
        t = todo.pop()
        if "split" in t:
            todo += [t["ge"], t["lt"]]
            continue
        leaf = t.get("relaxed") or t.get("excluded")
        if leaf:
            for p in leaf["proofs"]:
                if isinstance(p, list) and p:
                    return p
    raise AssertionError("no Farkas proof in the tree")


def test_tampered_pair_certificates_are_rejected_by_the_kernel_and_by_coq(certs, library,
                                                                           tmp_path):
    doc = json.loads((certs / "eps.json").read_text())
    multiplier = copy.deepcopy(doc)
    pair = _first_farkas(multiplier["tree"])[-1]
    pair[1] = str(Fraction(pair[1]) * 2)
    smaller = copy.deepcopy(doc)   # the true gap is 1/100: 1/1000 is false
    smaller["property"]["epsilon"] = "1/1000"
    smaller["claim"] = doc["claim"].replace("1/10", "1/1000")
    weight = copy.deepcopy(doc)    # B moved further, its hash recomputed: the tree is wrong
    weight["models"]["b"]["model"]["layers"][0]["units"][0]["pieces"][0]["w"] = ["1", "1/2"]
    weight["models"]["b"]["sha256"] = content_hash(weight["models"]["b"]["model"])
    for name, bad in (("multiplier", multiplier), ("smaller", smaller), ("weight", weight)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(bad))
        code, out, _ = run("check-cert", path)
        assert code == 1 and out.startswith("rejected"), (name, out)
        code, answer = coq(tmp_path, path, library, f"Bad_{name}.v")
        assert code == 1 and answer["verdict"] == "rejected", (name, answer)
        assert "certificate_checks" in answer["coqc_message"] or "maxout_pair_ok" in \
            answer["coqc_message"], (name, answer["coqc_message"][:300])


def test_a_tree_over_the_free_inputs_of_a_box_is_proved_in_coq(certs, library, tmp_path):
    """A box with a fixed input: the kernel's tree is over the free inputs; Coq builds the
    networks of the free inputs itself (Pair.free_pair_ok) and proves the statement over the
    box.  A negative multiplier is rejected by both checkers; an edited bound is named by the
    read-back, and coqc refuses it (the tree no longer fits)."""
    code, out, _ = run("equiv", certs / "a.json", certs / "b.json", "--box", "-1,1;1/2,1/2",
                       "--epsilon", "1/10", "--cert", tmp_path / "free.json")
    assert code == 0, out
    doc = json.loads((tmp_path / "free.json").read_text())
    assert doc.get("inputs") == "free"
    code, out = coq(tmp_path, tmp_path / "free.json", library, "F.v")
    assert code == 0 and out["verdict"] == "proved" and set(out["axioms"]) <= ALLOWED, out
    text = (tmp_path / "F.v").read_text()
    assert "Definition lower : list Q := [-1; (1#2)]." in text
    assert re.search(r"length x = 2%nat -> in_box lower upper x ->\s+forall o, \(o < 2\)%nat",
                     text), text[-1200:]
    assert "free_eps_sound net_a net_b 2%nat lower upper epsilon" in text
    bad = copy.deepcopy(doc)
    pair = _first_farkas(bad["tree"])[-1]
    pair[1] = str(-Fraction(pair[1]))
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    assert run("check-cert", tmp_path / "bad.json")[0] == 1
    code, answer = coq(tmp_path, tmp_path / "bad.json", library, "BadF.v")
    assert code == 1 and "free_pair_ok" in answer["coqc_message"], answer
    f = tmp_path / "F.v"
    f.write_text(text.replace("Definition upper : list Q := [1; (1#2)].",
                              "Definition upper : list Q := [1; (3#4)]."))
    code, stdout, _ = run("export-coq", tmp_path / "free.json", "-o", f, "--existing", "--check")
    assert code == 1 and stdout.startswith(f"rejected: {f}: Definition upper (the domain)"), stdout
    r = run_coqc(str(f), library)
    assert not r.ok and "free_pair_ok" in r.message, r.message


# --- a hardmax Transformer on either side (Pair.model_eps_sound / model_top1_sound) ----------


@pytest.fixture(scope="module")
def tf_certs(certs):
    """examples/tent.json and its compiled Transformer: --epsilon (Maxout, Transformer) and
    --top1 (Transformer, Maxout)."""
    tent = os.path.join(ROOT, "examples", "tent.json")
    tf = certs / "tent.tf.json"
    assert run("compile", tent, "-o", tf)[0] == 0
    code, out, _ = run("equiv", tent, tf, "--epsilon", "1/2", "--cert", certs / "tf_eps.json",
                       "--no-search")
    assert code == 0, out
    code, out, _ = run("equiv", tf, tent, "--top1", "--cert", certs / "tf_top1.json",
                       "--no-search")
    assert code == 0, out
    return certs


@pytest.mark.parametrize("cert, statement, proof", [
    ("tf_eps.json", r"Rabs \(nth o \(maxoutR net_a x\) 0 - nth o \(transformerR net_b x\) 0\) "
                    r"<= Q2R epsilon\.", "model_eps_sound (MMaxout net_a) (MTransformer net_b)"),
    ("tf_top1.json", r"\(\(forall j, \(j < 1\)%nat -> nth j \(transformerR net_a x\) 0 <= nth i "
                     r"\(transformerR net_a x\) 0\) <->\s+\(forall j, \(j < 1\)%nat -> nth j "
                     r"\(maxoutR net_b x\) 0",
     "model_top1_sound (MTransformer net_a) (MMaxout net_b)"),
])
def test_a_pair_with_a_transformer_is_proved_in_coq(tf_certs, library, cert, statement, proof):
    code, out = coq(tf_certs, tf_certs / cert, library, "T.v")
    assert code == 0 and out["verdict"] == "proved" and out["trust"] == "coq-checked", out
    assert set(out["axioms"]) <= ALLOWED
    text = (tf_certs / "T.v").read_text()
    assert re.search(statement, text), text[-1500:]
    assert proof in text and "Definition net_" in text and ": transformer :=" in text


def test_a_tampered_pair_with_a_transformer_is_rejected_by_the_kernel_and_by_coq(
        tf_certs, library, tmp_path):
    doc = json.loads((tf_certs / "tf_eps.json").read_text())
    pair = _first_farkas(doc["tree"])[-1]
    pair[1] = str(-Fraction(pair[1]))     # a negative multiplier: never a proof
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    code, out, _ = run("check-cert", path)
    assert code == 1 and out.startswith("rejected"), out
    code, answer = coq(tmp_path, path, library, "BadT.v")
    assert code == 1 and answer["verdict"] == "rejected", answer
    assert "model_pair_ok" in answer["coqc_message"], answer["coqc_message"][:300]
    # the read-back names an edited Transformer part as model b
    code, out = coq(tmp_path, tf_certs / "tf_eps.json", library, "GoodT.v")
    assert code == 0, out
    f = tmp_path / "GoodT.v"
    text = f.read_text()
    m = re.search(r"Definition (net_b_\w+) : .*? :=\n  ([^\n]*?)(\d+)", text)
    assert m, text[:2000]
    f.write_text(text[:m.start(3)] + str(int(m.group(3)) + 1) + text[m.end(3):])
    code, stdout, _ = run("export-coq", tf_certs / "tf_eps.json", "-o", f, "--existing",
                          "--check")
    assert code == 1 and stdout.startswith(f"rejected: {f}: Definition {m.group(1)} (model b)"), \
        stdout
