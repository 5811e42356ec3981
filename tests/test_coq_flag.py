"""``--coq`` on verify, equiv and check (#35): an answer the kernel proved is printed as
"proved (kernel and Coq)" only after coqc proved the exported certificate too; when coqc does
not (it rejects the file, or the certificate has no Coq export) the answer is unknown, exit 3,
with the reason; without coqc, one line and exit 2 before any work."""

from __future__ import annotations

import contextlib
import glob
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from conftest import skip_without_coqc

from exactmax.cli import main
from exactmax.export import recheck

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")

skip_without_coqc()

# y >= 5 never holds for the tent (its values lie in [0, 1] on the box)
UNSAT = """(declare-const X_0 Real)
(declare-const X_1 Real)
(declare-const Y_0 Real)
(assert (>= X_0 -1))
(assert (<= X_0 1))
(assert (>= X_1 -1))
(assert (<= X_1 1))
(assert (>= Y_0 5))
"""
SAT = UNSAT.replace("(>= Y_0 5)", "(>= Y_0 1/2)").replace("1/2", "0.5")


def run(*args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()) as err:
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def ex(name: str) -> str:
    return os.path.join(EXAMPLES, name)


@pytest.fixture(scope="module", autouse=True)
def library(coq_library):
    return coq_library


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A temporary folder of the test's own as tempfile's (xdist workers run side by side)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _scratch(folder) -> set:
    return set(glob.glob(os.path.join(folder, "exactmax-c*")))


def test_verify_proved_by_kernel_and_coq(scratch):
    code, out, _ = run("verify", ex("tent.json"), "--coq")
    assert code == 0, out
    assert out.startswith("proved (kernel and Coq): ")
    assert "proved by coqc in" in out
    assert _scratch(scratch) == set()  # the temporary certificate and Coq file are removed


def test_verify_json_says_kernel_and_coq(tmp_path):
    cert = tmp_path / "c.json"
    code, out, _ = run("verify", ex("tent.json"), "--coq", "--json", "--cert", cert)
    doc = json.loads(out)
    assert code == 0 and doc["verdict"] == "proved"
    assert doc["trust"] == "kernel-and-coq-checked"
    assert doc["coq"]["proved"] is True and doc["coq"]["bytes"] > 0 and doc["coq"]["reason"] is None
    assert doc["certificate"] == str(cert) and cert.exists()  # --cert's file is kept


def test_without_coq_nothing_changes():
    code, out, _ = run("verify", ex("tent.json"), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["trust"] == "kernel-checked" and "coq" not in doc


def test_equiv_correspondence_and_lattice_pairs():
    # the default certificate of a rewrite is a layer correspondence (proofs/Correspondence.v)
    code, out, _ = run("equiv", ex("tent.json"), ex("tent_reordered.json"), "--coq")
    assert code == 0 and out.startswith("proved (kernel and Coq)") and "correspondence" in out


def test_equiv_avoids_lattice_forms_under_coq(tmp_path):
    lifted = tmp_path / "L.json"
    assert run("lift", ex("lattice_relu.json"), "-o", lifted)[0] == 0
    code, out, _ = run("equiv", ex("lattice_relu.json"), lifted, "--json")
    assert json.loads(out)["certificate_kind"] == "lattice"  # without --coq
    code, out, _ = run("equiv", ex("lattice_relu.json"), lifted, "--json", "--coq")
    doc = json.loads(out)
    assert code == 0 and doc["trust"] == "kernel-and-coq-checked"
    assert doc["certificate_kind"] != "lattice"


def test_equiv_epsilon(tmp_path):
    code, out, _ = run(
        "equiv", ex("tent.json"), ex("relu_triangle.json"), "--epsilon", "4", "--coq"
    )
    assert code == 0 and out.startswith("proved (kernel and Coq): |")


def test_check_unsat_and_sat(tmp_path):
    prop = tmp_path / "p.vnnlib"
    prop.write_text(UNSAT)
    code, out, _ = run("check", ex("tent.json"), prop, "--coq")
    assert code == 0 and out.startswith("unsat (kernel and Coq): ")
    prop.write_text(SAT)  # sat: the point is the evidence, nothing for Coq
    code, out, _ = run("check", ex("tent.json"), prop, "--coq", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["verdict"] == "sat" and doc["trust"] is None and doc["coq"] is None


def test_no_coq_export_is_unknown(monkeypatch, tmp_path):
    # a certificate with no Coq export (every kind --coq makes exports today: the refusal
    # is made here): the kernel's proof stands in the reason, the answer is unknown
    from exactmax.export import coq_pair
    from exactmax.io import InputError

    def refuse(*a, **k):
        raise InputError("c.json", "tree", "this kind has no Coq export yet")

    monkeypatch.setattr(coq_pair, "export_coq_pair", refuse)
    code, out, _ = run("equiv", ex("tent.json"), ex("relu_triangle.json"), "--box",
                       "-1,1;1/2,1/2", "--epsilon", "4", "--coq", "--json")
    doc = json.loads(out)
    assert code == 3 and doc["verdict"] == "unknown" and doc["trust"] is None, out
    assert doc["reason"].startswith("the kernel proved it; coqc did not prove the certificate")
    assert "no Coq export" in doc["reason"] and doc["coq"]["proved"] is False


def test_pairs_with_a_transformer_or_a_fixed_input_are_proved_by_kernel_and_coq(tmp_path):
    code, out, _ = run("equiv", ex("tent.json"), ex("relu_triangle.json"), "--box",
                       "-1,1;1/2,1/2", "--epsilon", "4", "--coq", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["verdict"] == "proved" and doc["trust"] == recheck.TRUST, out
    tf = tmp_path / "tf.json"
    assert run("compile", ex("tent.json"), "-o", tf)[0] == 0
    code, out, _ = run("equiv", ex("tent.json"), tf, "--epsilon", "1", "--coq", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["verdict"] == "proved" and doc["trust"] == recheck.TRUST, out
    assert doc["coq"]["proved"] is True


def test_coqc_rejecting_makes_unknown(monkeypatch, tmp_path):
    # had coqc rejected what the kernel accepted, the answer would not be "proved"
    rejected = recheck.CoqCheck(False, 0.5, 100, "Error: the term has type false")
    monkeypatch.setattr(recheck, "coq_check", lambda *a, **k: rejected)
    prop = tmp_path / "p.vnnlib"
    prop.write_text(UNSAT)
    for args in (
        ("verify", ex("tent.json")),
        ("equiv", ex("tent.json"), ex("tent_reordered.json")),
        ("equiv", ex("tent.json"), ex("relu_triangle.json"), "--epsilon", "4"),
        ("check", ex("tent.json"), prop),
    ):
        code, out, _ = run(*args, "--coq")
        assert code == 3, (args, out)
        assert out.startswith("unknown: the kernel proved it; coqc did not prove the certificate: "
                              "Error: the term has type false"), out
        code, out, _ = run(*args, "--coq", "--json")
        doc = json.loads(out)
        assert (code, doc["verdict"], doc["trust"]) == (3, "unknown", None)
        assert doc["coq"] == rejected.json()


def test_without_coqc_one_line_exit_2(tmp_path):
    empty = tmp_path / "bin"  # a PATH without coqc
    empty.mkdir()
    env = {"HOME": str(tmp_path), "PATH": str(empty), "PYTHONPATH": ROOT}
    r = subprocess.run([sys.executable, "-m", "exactmax", "verify", ex("tent.json"), "--coq"],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stdout == "" and r.stderr.count("\n") == 1
    assert "--coq: coqc is not installed" in r.stderr


def test_help_names_the_flag():
    for command in ("verify", "equiv", "check"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            main([command, "--help"])
        assert "--coq" in out.getvalue() and "kernel and" in out.getvalue()


def test_scratch_removed_when_coq_fails(monkeypatch, scratch):
    monkeypatch.setattr(recheck, "coq_check", lambda *a, **k: recheck.CoqCheck(False, 0, 0, "x"))
    assert run("verify", ex("tent.json"), "--coq")[0] == 3
    assert _scratch(scratch) == set()
    assert shutil.which("coqc")


def test_python_api_check_in_coq(tmp_path):
    import exactmax as xm

    r = xm.verify(ex("tent.json"))
    c = r.check_in_coq()
    assert r.verdict == "proved" and c.proved and c.bytes > 0 and c.reason is None
    prop = tmp_path / "p.vnnlib"
    prop.write_text(UNSAT)
    assert xm.check(ex("tent.json"), str(prop)).check_in_coq().proved
    prop.write_text(SAT)
    with pytest.raises(xm.ArgumentError, match="no certificate"):
        xm.check(ex("tent.json"), str(prop)).check_in_coq()  # sat: a point, no certificate


def test_a_large_property_certificate_goes_to_coq_in_parts(monkeypatch, tmp_path):
    """--coq exports a property certificate of PARTS_FROM_BYTES or more in one part per core
    (here: every certificate, on 2 cores), and proves it the same."""
    from exactmax.export import recheck
    monkeypatch.setattr(recheck, "PARTS_FROM_BYTES", 0)
    monkeypatch.setattr(recheck.os, "cpu_count", lambda: 2)
    prop = tmp_path / "p.vnnlib"
    prop.write_text(UNSAT)
    code, out, _ = run("check", ex("tent.json"), prop, "--coq", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["verdict"] == "unsat" and doc["trust"] == recheck.TRUST, out
    assert doc["coq"]["proved"] and doc["coq"]["parts"] == 2    # 20 leaves: two groups
    code, out, _ = run("check", ex("tent.json"), prop, "--coq")
    assert code == 0 and out.startswith("unsat (kernel and Coq): ")
    assert "bytes of Coq in 2 parts side by side), proved by coqc" in out, out
    cert = tmp_path / "c.json"
    assert run("check", ex("tent.json"), prop, "--cert", cert)[0] == 0
    assert recheck.parts_for(str(cert)) == 2
    monkeypatch.setattr(recheck, "PARTS_FROM_BYTES", 10**9)
    assert recheck.parts_for(str(cert)) == 1
    tent = tmp_path / "tent.cert.json"
    assert run("verify", ex("tent.json"), "--cert", tent, "--no-search")[0] == 0
    monkeypatch.setattr(recheck, "PARTS_FROM_BYTES", 0)
    assert recheck.parts_for(str(tent)) == 1          # not a property certificate
