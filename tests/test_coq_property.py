"""export-coq for property certificates (exactmax/export/coq_property.py, proofs/Property.v):
a certificate of ``exactmax check --cert`` exported and accepted by coqc, with the read-back and
the allowed axioms; a certificate wrong by one Farkas multiplier and a file whose property was
made false are rejected by coqc; a file whose data differ from the certificate is caught by the
read-back, with one line naming the difference."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
from types import SimpleNamespace

import pytest

from exactmax.cli import main
from exactmax.export import coqlib
from exactmax.export.coqcheck import ALLOWED, run_coqc
from exactmax.io.models import model_to_json
from exactmax.kernel.affine import Affine
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from exactmax.kernel.rational import Q

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROOFS = os.path.join(ROOT, "proofs")

_why = coqlib.missing()
if _why is not None:
    if os.environ.get("EXACTMAX_REQUIRE_COQ"):
        raise RuntimeError(f"Coq is required (EXACTMAX_REQUIRE_COQ is set): {_why}")
    pytest.skip(_why, allow_module_level=True)


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def relu_net(W, b, V, c):
    """y = V relu(W x + b) + c."""
    zero = Piece((Q(0),) * len(W[0]), Q(0))
    units = tuple(Unit((Piece(tuple(map(Q, w)), Q(bi)), zero)) for w, bi in zip(W, b))
    return MaxoutNetwork(len(W[0]), (Layer(units),),
                         Affine(tuple(tuple(map(Q, r)) for r in V), tuple(map(Q, c)), len(W)))


# (y0, y1) = (|x0| + |x1|, x0 - x1 + 1/4), written with ReLUs
NET = relu_net([[1, 0], [-1, 0], [0, 1], [0, -1]], [0, 0, 0, 0],
               [[1, 1, 1, 1], [1, -1, -1, 1]], [0, Q(1, 4)])
DECL = "".join(f"(declare-const {v} Real)\n" for v in ("X_0", "X_1", "Y_0", "Y_1"))
# two input boxes (two cases); on each, two forbidden conjunctions, strict and not; y0 reaches
# 13/4 on the second box (at x = (3, 1/4)), and only y0 > 13/4 is forbidden
PROP = DECL + """
(assert (or (and (>= X_0 -1) (<= X_0 1) (>= X_1 -0.5) (<= X_1 1))
            (and (>= X_0 2) (<= X_0 3) (>= X_1 0) (<= X_1 0.25))))
(assert (or (and (> Y_0 3.25))
            (and (< Y_0 -0.1) (>= Y_1 0))))
"""


@pytest.fixture(scope="module")
def library():
    r = subprocess.run(["make", "-C", PROOFS], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return PROOFS


@pytest.fixture(scope="module")
def exported(library, tmp_path_factory):
    """(folder, certificate, the exported file, export-coq's --json answer)."""
    d = tmp_path_factory.mktemp("coqprop")
    (d / "net.json").write_text(json.dumps(model_to_json(NET)))
    (d / "p.vnnlib").write_text(PROP)
    r = run("check", d / "net.json", d / "p.vnnlib", "--cert", d / "c.json", "--json",
            "--no-relax")
    assert r.returncode == 0 and json.loads(r.stdout)["verdict"] == "unsat", r.stdout + r.stderr
    r = run("export-coq", d / "c.json", "-o", d / "NetProperty.v", "--check", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    return d, d / "c.json", d / "NetProperty.v", json.loads(r.stdout)


def test_a_property_certificate_is_proved_in_coq(exported):
    d, cert, v, out = exported
    assert out["verdict"] == "proved" and out["checked"] is True
    assert out["about"]["cases"] == 2 and out["about"]["conjunctions"] == 4
    assert out["about"]["leaves"] > 2                  # splits, choices at splits and leaves
    assert out["axioms"] and set(out["axioms"]) <= ALLOWED
    assert out["sentences_compared"] > 20
    text = v.read_text()
    # the statement as Coq reads it, over the network and the property defined in the file
    assert re.search(r"Theorem net_property : forall c, In c cases ->\s+forall x : list R, "
                     r"length x = 2%nat -> in_poly \(pc_A c\) \(pc_b c\) x ->\s+forall O, "
                     r"In O \(pc_outs c\) -> ~ satR O \(x \+\+ maxoutR net x\)\.", text)
    assert "row [0; 0; 1; 0] (-13#4) true" in text      # Y_0 > 3.25: y0 - 13/4 > 0
    assert len(re.findall(r"Definition case\d+ : pcase", text)) == 2
    sha = json.loads(cert.read_text())["property"]["sha256"]
    assert f'Definition property : string := "{sha}".' in text
    # the human form: the same file checked again, nothing rewritten
    r = run("export-coq", cert, "-o", v, "--existing", "--check")
    assert r.returncode == 0 and "theorem net_property proved in Coq" in r.stdout, r.stdout


def _tamper_multiplier(c: dict) -> dict:
    """The certificate with the last multiplier of the first excluded leaf's first proof
    doubled."""
    stack = list(c["cases"])
    while stack:
        t = stack.pop()
        if "split" in t:
            stack += [t["lt"], t["ge"]]
        elif "excluded" in t:
            pairs = t["excluded"]["proofs"][0]
            pairs[-1][1] = str(2 * Q(pairs[-1][1]))
            return c
    raise AssertionError("no excluded leaf")


def test_a_changed_farkas_multiplier_is_rejected_by_the_kernel_and_by_coq(exported, tmp_path):
    _, cert, _, _ = exported
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_tamper_multiplier(json.loads(cert.read_text()))))
    r = run("check-cert", bad)
    assert r.returncode == 1 and r.stdout.startswith("rejected:"), r.stdout
    # the exporter writes what it is given; Coq decides
    r = run("export-coq", bad, "-o", tmp_path / "Bad.v", "--check")
    assert r.returncode == 1, r.stdout
    lines = r.stdout.splitlines()
    assert lines[1].startswith("coqc rejected") and len(lines) == 2, r.stdout
    assert "property_ok net cases certificate = true" in lines[1]
    # that file, checked against the certificate it was not exported from: the read-back
    r = run("export-coq", cert, "-o", tmp_path / "Bad.v", "--existing", "--check")
    assert r.returncode == 1 and len(r.stdout.splitlines()) == 1
    assert re.match(r"rejected: .*Bad\.v: Definition packed \(the certificate's tree\): "
                    r"number \d+ is \d+, but .*c\.json has \d+$", r.stdout.strip()), r.stdout


@pytest.mark.parametrize("old, new", [
    ("(-13#4) true", "(-3) true"),       # y0 > 3: reached on the second box
    ("(-13#4) true", "(-13#4) false"),   # y0 >= 13/4: reached at x = (3, 1/4)
])
def test_a_false_property_does_not_compile(exported, tmp_path, old, new):
    _, cert, v, _ = exported
    text = v.read_text()
    head, case1 = text.split("Definition case1", 1)
    assert old in case1
    bad = tmp_path / "NetProperty.v"
    bad.write_text(head + "Definition case1" + case1.replace(old, new, 1))
    r = run_coqc(str(bad), PROOFS)
    assert not r.ok and "property_ok net cases certificate = true" in r.message, r.message
    r = run("export-coq", cert, "-o", bad, "--existing", "--check")
    assert r.returncode == 1 and len(r.stdout.splitlines()) == 1, r.stdout
    assert "Definition case1 (the property): " in r.stdout, r.stdout


def test_the_read_back_catches_every_difference(exported, tmp_path):
    _, cert, v, _ = exported
    text = v.read_text()
    for old, new, what in [
        ("pb := 0 |}", "pb := 1 |}", "Definition net (the network)"),
        ("Definition cases : list pcase := [case0; case1].",
         "Definition cases : list pcase := [case1].", "Definition cases (the property)"),
        ("maxoutR net x).", "maxoutR net x) \\/ True.", "Theorem net_property"),
    ]:
        assert old in text, old
        f = tmp_path / "NetProperty.v"
        f.write_text(text.replace(old, new, 1))
        r = run("export-coq", cert, "-o", f, "--existing", "--check")
        assert r.returncode == 1 and r.stdout.startswith(f"rejected: {f}: {what}"), r.stdout
    # the hashes of the opening comment
    h = json.loads(cert.read_text())["model"]["sha256"]
    f = tmp_path / "NetProperty.v"
    f.write_text(text.replace(f"     model      {h}", f"     model      {'0' * 64}", 1))
    r = run("export-coq", cert, "-o", f, "--existing", "--check")
    assert r.returncode == 1 and "the opening comment gives model sha256 0000" in r.stdout


def test_an_axiom_in_the_file_is_refused(exported, tmp_path):
    _, _, v, _ = exported
    f = tmp_path / "NetProperty.v"
    f.write_text(v.read_text().replace(
        "Lemma certificate_checks : property_ok net cases certificate = true.\n"
        "Proof. vm_cast_no_check (eq_refl true). Qed.",
        "Axiom certificate_checks : property_ok net cases certificate = true."))
    r = run_coqc(str(f), PROOFS)
    assert not r.ok and "depends on the axiom certificate_checks, which" in r.message, r


def test_a_malformed_property_certificate_is_a_one_line_error_and_nothing_is_written(
        exported, tmp_path):
    _, cert, _, _ = exported
    c = json.loads(cert.read_text())
    c["property"]["vnnlib"] = c["property"]["vnnlib"].replace("3.25", "3.5")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(c))
    r = run("export-coq", bad, "-o", tmp_path / "X.v", "--check")
    assert r.returncode == 2 and not (tmp_path / "X.v").exists()
    assert r.stderr.strip() == f"exactmax: error: {bad}: property.sha256: does not match the " \
                               "embedded property", r.stderr
