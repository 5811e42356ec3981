"""A certificate is bound to the files it names (issue #36): `check-cert CERT --model NET
--property PROP` recomputes the sha256 that `check --cert` recorded (the model file's bytes,
ONNX or JSON; the property's text, VNN-LIB 1.0 or 2.0) and refuses another network or
property (exit 1, one line naming the file, the expected and the actual hash); the right files
are accepted; without them the answer says that the files were not compared.  Equivalence and
pair-property certificates (`--models A B --domain D`) say the same."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil

import pytest

from exactmax.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
ONNX = os.path.join(EXAMPLES, "small_relu.onnx")
UNSAT = os.path.join(EXAMPLES, "small_relu_unsat.vnnlib")
TENT = os.path.join(EXAMPLES, "tent.json")
REORDERED = os.path.join(EXAMPLES, "tent_reordered.json")


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def sha256_of(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


VNNLIB2_UNSAT = """(vnnlib-version <2.0>)
(declare-network N
  (declare-input X Real [2])
  (declare-output Y Real [1]))
(assert (and (>= X[0] -1) (<= X[0] 1) (>= X[1] -1) (<= X[1] 1)))
(assert (>= Y[0] 4))
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """small_relu as ONNX and as JSON, a network with one weight changed, two properties (the
    example's 1.0 file and a 2.0 one), and property certificates of both."""
    d = tmp_path_factory.mktemp("binding")
    net_json = d / "net.json"
    assert run("import", ONNX, "-o", net_json)[0] == 0
    other = d / "other.json"
    m = json.loads(net_json.read_text())
    piece = m["layers"][0]["units"][0]["pieces"][0]
    piece["b"] = "1/7" if piece["b"] != "1/7" else "2/7"
    other.write_text(json.dumps(m))
    prop1 = d / "p1.vnnlib"
    shutil.copy(UNSAT, prop1)
    prop2 = d / "p2.vnnlib"
    prop2.write_text(VNNLIB2_UNSAT)
    other_prop = d / "other.vnnlib"
    other_prop.write_text(prop1.read_text().replace("(assert", "; a comment\n(assert", 1))
    certs = {}
    for name, net, prop in (("onnx1", ONNX, prop1), ("json2", net_json, prop2)):
        certs[name] = d / f"{name}.cert.json"
        code, out, err = run("check", net, prop, "--cert", certs[name], "--no-search")
        assert code == 0, out + err
    return dict(d=d, net_json=net_json, other=other, prop1=prop1, prop2=prop2,
                other_prop=other_prop, **certs)


def test_the_right_files_are_accepted_onnx_and_vnnlib_1(files):
    code, out, err = run("check-cert", files["onnx1"], "--model", ONNX, "--property", files["prop1"])
    assert code == 0, out + err
    assert out.startswith("valid:")
    assert "not compared" not in out
    assert f"{ONNX} and {files['prop1']} are the files the certificate names" in out


def test_the_right_files_are_accepted_json_and_vnnlib_2(files):
    code, out, err = run("check-cert", files["json2"], "--models", files["net_json"],
                         "--property", files["prop2"])
    assert code == 0, out + err
    assert "are the files the certificate names" in out


def test_another_network_is_refused_naming_file_and_both_hashes(files):
    cert = json.loads(files["json2"].read_text())
    code, out, err = run("check-cert", files["json2"], "--model", files["other"],
                         "--property", files["prop2"])
    assert code == 1, out + err
    lines = out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rejected: ")
    assert str(files["other"]) in lines[0]
    assert cert["model"]["file_sha256"] in lines[0]
    assert sha256_of(files["other"]) in lines[0]
    assert "valid" not in out


def test_another_file_of_the_same_network_is_accepted_and_said_so(files):
    # the ONNX file is not the file json2 was made from (net.json, imported from it), but it
    # holds the same network: its canonical hash decides, and the answer says which matched
    code, out, _ = run("check-cert", files["json2"], "--model", ONNX, "--property", files["prop2"])
    assert code == 0 and "not the file the certificate names but holds the same network" in out
    assert f"{files['prop2']} is a file the certificate names" in out
    code, out, _ = run("check-cert", files["json2"], "--model", ONNX, "--json")
    assert json.loads(out)["files"]["same_network"] == ["model"]
    # a certificate about small_relu does not speak about `other`, by either hash
    code, out, _ = run("check-cert", files["onnx1"], "--model", files["other"],
                       "--property", files["prop1"])
    assert code == 1 and out.startswith("rejected: ")


def test_another_property_is_refused_naming_file_and_both_hashes(files):
    cert = json.loads(files["onnx1"].read_text())
    code, out, err = run("check-cert", files["onnx1"], "--model", ONNX,
                         "--property", files["other_prop"])
    assert code == 1, out + err
    assert out.count("\n") == 1 and out.startswith("rejected: ")
    assert str(files["other_prop"]) in out
    assert cert["property"]["sha256"] in out
    assert sha256_of(files["other_prop"]) in out
    code, out, _ = run("check-cert", files["onnx1"], "--model", ONNX, "--property", files["prop2"])
    assert code == 1 and str(files["prop2"]) in out


def test_one_file_alone_is_compared_and_the_other_said_not_compared(files):
    code, out, _ = run("check-cert", files["onnx1"], "--model", ONNX)
    assert code == 0
    assert "property file not compared" in out
    code, out, _ = run("check-cert", files["onnx1"], "--property", files["prop2"])
    assert code == 1 and "rejected" in out


def test_without_files_the_answer_says_they_were_not_compared(files):
    code, out, _ = run("check-cert", files["onnx1"])
    assert code == 0
    assert "model and property files not compared" in out
    assert "--model NET --property PROP" in out
    code, out, _ = run("check-cert", files["onnx1"], "--json")
    doc = json.loads(out)
    assert code == 0 and doc["verdict"] == "valid"
    assert doc["files"] == {"compared": {}, "not_compared": ["model", "property"]}


def test_json_names_the_files_compared_and_a_mismatch(files):
    code, out, _ = run("check-cert", files["onnx1"], "--model", ONNX, "--property",
                       files["prop1"], "--json")
    doc = json.loads(out)
    assert code == 0 and doc["verdict"] == "valid"
    assert doc["files"] == {"compared": {"model": ONNX, "property": str(files["prop1"])},
                            "not_compared": []}
    code, out, _ = run("check-cert", files["onnx1"], "--model", files["other"], "--json")
    doc = json.loads(out)
    assert code == 1 and doc["verdict"] == "rejected"
    assert doc["mismatch"]["file"] == str(files["other"])
    assert doc["mismatch"]["actual"] == sha256_of(files["other"])
    assert doc["mismatch"]["expected"] == json.loads(files["onnx1"].read_text())["model"][
        "file_sha256"]


def test_options_of_the_other_kind_of_certificate_are_usage_errors(files, tmp_path):
    code, _, err = run("check-cert", files["onnx1"], "--models", ONNX, ONNX)
    assert code == 2 and "--model NET" in err
    code, _, err = run("check-cert", files["onnx1"], "--domain", TENT)
    assert code == 2 and "--property" in err
    cert = tmp_path / "eq.json"
    assert run("equiv", TENT, REORDERED, "--cert", cert)[0] == 0
    code, _, err = run("check-cert", cert, "--model", TENT)
    assert code == 2 and "--models A B" in err
    code, _, err = run("check-cert", cert, "--property", files["prop1"])
    assert code == 2 and "--models A B" in err


def test_equivalence_certificates_say_the_same(files, tmp_path):
    cert = tmp_path / "eq.json"
    assert run("equiv", TENT, REORDERED, "--cert", cert)[0] == 0
    code, out, _ = run("check-cert", cert)
    assert code == 0 and "models and domain files not compared" in out
    code, out, _ = run("check-cert", cert, "--models", TENT, REORDERED)
    assert code == 0 and "domain file not compared" in out
    code, out, _ = run("check-cert", cert, "--models", TENT, TENT)
    assert code == 1 and out.count("\n") == 1
    expected = json.loads(cert.read_text())["models"]["b"]["sha256"]
    assert TENT in out and expected in out


def test_a_gzipped_property_is_compared_by_its_text_as_check_hashed_it(files, tmp_path):
    import gzip
    gz = tmp_path / "p1.vnnlib.gz"
    gz.write_bytes(gzip.compress(files["prop1"].read_bytes()))
    code, out, _ = run("check-cert", files["onnx1"], "--model", ONNX, "--property", gz)
    assert code == 0 and "are the files the certificate names" in out
    # the same text with CRLF line ends is another text, as check would hash it
    crlf = tmp_path / "crlf.vnnlib"
    crlf.write_bytes(files["prop1"].read_bytes().replace(b"\n", b"\r\n"))
    code, out, _ = run("check-cert", files["onnx1"], "--property", crlf)
    assert code == 1 and sha256_of(crlf) in out
