"""One --json vocabulary for every command (issue #36): every command that has --json prints
one object that the shipped schema `output` accepts (command, verdict, trust, reason, time_s,
sha256 first, the command's own keys, exactmax_version), on small inputs built here and in
every outcome a command has: proved, refuted, unknown (a time limit), vacuous, sat, unsat,
valid, rejected, a file that is not the certificate's.  The schema is no rubber stamp: the
dialects of earlier releases (result, valid, about with the hashes) and wrong verdicts are
refused by it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil

import pytest

from exactmax import schemas
from exactmax.cli import build_parser, main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")

EMPTY_DOMAIN = {"format": "exactmax/domain", "version": 1,
                "polyhedron": {"A": [[1, 0], [-1, 0]], "b": [-1, -1]}}


def tight(bias: str) -> dict:
    """h = max(x, 0), then h + bias, on [-1, 1]: the gate C_2 = 2 leaves room 2 - |bias| for
    the softmax perturbation (docs/softmax.md)."""
    return {"format": "exactmax/maxout", "version": 1, "input_dim": 1,
            "layers": [{"units": [{"pieces": [{"w": [1], "b": 0}, {"w": [0], "b": 0}]}]},
                       {"units": [{"pieces": [{"w": [1], "b": bias}]}]}],
            "domain": {"box": {"lower": [-1], "upper": [1]}}}


def commands_with_json() -> set[str]:
    """Every command (and sub-command) whose parser has a --json option."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return {name for name, p in sub.choices.items()
            if any("--json" in a.option_strings for a in p._actions)}


@pytest.fixture(scope="module")
def validator():
    return schemas.validator("output")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("json")
    for f in os.listdir(EXAMPLES):
        if f.endswith((".json", ".onnx", ".vnnlib")):
            shutil.copy(os.path.join(EXAMPLES, f), d / f)
    (d / "empty.json").write_text(json.dumps(EMPTY_DOMAIN))
    (d / "loose.json").write_text(json.dumps(tight("-1/2")))
    (d / "tight.json").write_text(json.dumps(tight("-199/100")))
    (d / "points.txt").write_text("1,1\n0,1/2\n")
    (d / "bench.csv").write_text("small_relu.onnx,small_relu_sat.vnnlib,30\n")
    return d


def run_json(work, *argv):
    """(exit status, the one JSON object printed) of `exactmax ARGV --json` run in WORK."""
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(work)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([*map(str, argv), "--json"])
    finally:
        os.chdir(old)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, (argv, out.getvalue(), err.getvalue())
    return code, json.loads(lines[0])


CASES = [
    # (name, argv, exit status, verdict)
    ("eval", ["eval", "tent.json", "--input", "1,1"], 0, "done"),
    ("eval batch", ["eval", "tent.json", "--inputs", "points.txt"], 0, "done"),
    ("compile", ["compile", "tent.json", "-o", "tent.tf.json"], 0, "done"),
    ("verify proved", ["verify", "tent.json", "--cert", "tent.cert.json"], 0, "proved"),
    ("verify refuted", ["verify", "tent.json", "--transformer", "tent_broken.transformer.json"],
     1, "refuted"),
    ("verify timed out", ["verify", "tent.json", "--timeout", "0.001"], 3, "unknown"),
    ("verify monolithic", ["verify", "tent.json", "--strategy", "monolithic", "--no-search"],
     0, "proved"),
    ("equiv correspondence", ["equiv", "tent.json", "tent_rewritten.json", "--cert",
                              "corr.cert.json"], 0, "proved"),
    ("equiv vacuous", ["equiv", "tent.json", "tent_reordered.json", "--domain", "empty.json"],
     5, "vacuous"),
    ("equiv epsilon proved", ["equiv", "tent.json", "tent_broken.transformer.json", "--epsilon",
                              "1/100", "--cert", "eps.cert.json", "--workers", "1"], 0, "proved"),
    ("equiv epsilon refuted", ["equiv", "tent.json", "tent_broken.transformer.json",
                               "--epsilon", "1/10000", "--workers", "1"], 1, "refuted"),
    ("equiv top1", ["equiv", "tent.json", "tent_reordered.json", "--top1", "--workers", "1"],
     0, "proved"),
    ("search found", ["search", "tent.json", "tent_broken.transformer.json"], 1, "refuted"),
    ("search none", ["search", "tent.json", "tent_reordered.json", "--max-examples", "5"],
     3, "unknown"),
    ("check-cert valid", ["check-cert", "tent.cert.json"], 0, "valid"),
    ("check-cert bound", ["check-cert", "tent.cert.json", "--models", "tent.json",
                          "tent.tf.json"], 0, "valid"),
    ("check-cert other model", ["check-cert", "tent.cert.json", "--models", "tent.json",
                                "tent.json"], 1, "rejected"),
    ("check-cert correspondence", ["check-cert", "corr.cert.json"], 0, "valid"),
    ("check-cert pair", ["check-cert", "eps.cert.json"], 0, "valid"),
    ("check-cert lowered epsilon", ["check-cert", "lowered.cert.json"], 1, "rejected"),
    ("check unsat", ["check", "small_relu.onnx", "small_relu_unsat.vnnlib", "--cert",
                     "p.cert.json", "--no-relax", "--workers", "1"], 0, "unsat"),
    ("check sat", ["check", "small_relu.onnx", "small_relu_sat.vnnlib", "--counterexample",
                   "cex.txt", "--workers", "1"], 1, "sat"),
    ("check out of cells", ["check", "small_relu.onnx", "small_relu_unsat.vnnlib", "--max-leaves",
                            "0", "--no-search", "--workers", "1"], 3, "unknown"),
    ("check-cert property", ["check-cert", "p.cert.json", "--model", "small_relu.onnx",
                             "--property", "small_relu_unsat.vnnlib"], 0, "valid"),
    ("check-cert property elsewhere", ["check-cert", "p.cert.json", "--property",
                                       "small_relu_sat.vnnlib"], 1, "rejected"),
    ("replay valid", ["replay", "small_relu.onnx", "small_relu_sat.vnnlib", "cex.txt"],
     0, "valid"),
    ("replay rejected", ["replay", "small_relu.onnx", "small_relu_unsat.vnnlib", "cex.txt"],
     1, "rejected"),
    ("export-coq", ["export-coq", "tent.cert.json", "-o", "TentEquiv.v"], 0, "written"),
    ("export-coq property", ["export-coq", "p.cert.json", "-o", "SmallProperty.v"], 0,
     "written"),
    ("export-coq construction", ["export-coq", "--construction", "tent.json", "-o",
                                 "TentC.v"], 0, "written"),
    ("coq-lib", ["coq-lib", "--coq-lib", "."], 2, "not-current"),
    ("import", ["import", "small_relu.onnx", "-o", "small_relu.json"], 0, "done"),
    ("lift", ["lift", "lattice_relu.json", "-o", "lattice.lifted.json", "--cert",
              "lift.cert.json"], 0, "proved"),
    ("lift none", ["lift", "tent.json"], 3, "unknown"),
    ("check-cert lattice", ["check-cert", "lift.cert.json"], 0, "valid"),
    ("export-onnx", ["export-onnx", "tent.json", "-o", "tent.onnx"], 0, "done"),
    ("info", ["info", "tent.json"], 0, "done"),
    ("cpwl", ["cpwl", "cpwl_relu.json", "-o", "relu.net.json", "--check"], 0, "proved"),
    ("approx-convex", ["approx-convex", "x^2", "--box=-1,1", "--h", "1/2", "-o", "sq.json"],
     0, "done"),
    ("theorem44", ["theorem44", "--m", "1", "--T", "2", "--q", "1", "--D", "6"], 0, "reached"),
    ("theorem44 outside", ["theorem44", "--m", "1", "--T", "2", "--q", "3", "--D", "6"], 3,
     "not-reached"),
    ("regions", ["regions", "tent.json", "--cert", "tent.regions.json"], 0, "counted"),
    ("regions unknown", ["regions", "maxout_d3_w4_r3.json", "--max-cells", "2"], 3, "unknown"),
    ("regions check-cert", ["regions", "--check-cert", "tent.regions.json"], 0, "valid"),
    ("softmax-bound", ["softmax-bound", "loose.json", "--lambda", "10"], 0, "certified"),
    ("softmax-bound gates", ["softmax-bound", "tight.json", "--lambda", "10"], 3, "unknown"),
    ("schema", ["schema", "--list"], 0, "done"),
    ("vnncomp", ["vnncomp", "bench.csv", "--workers", "1", "--quiet"], 0, "done"),
    ("vnncomp instance", ["vnncomp", "--instance", "small_relu.onnx", "small_relu_unsat.vnnlib",
                          "--timeout", "30", "--result-file", "r.txt", "--workers", "1"], 0,
     "unsat"),
]


def lower_epsilon(work):
    """eps.cert.json with its epsilon (and claim) lowered to 1/10^6: well-formed, but its
    leaves no longer prove the property, so the kernel rejects it."""
    c = json.loads((work / "eps.cert.json").read_text())
    c["property"]["epsilon"] = "1/1000000"
    c["claim"] = c["claim"].replace("1/100 ", "1/1000000 ")
    (work / "lowered.cert.json").write_text(json.dumps(c))


BEFORE = {"check-cert lowered epsilon": lower_epsilon}


@pytest.fixture(scope="module")
def outputs(work):
    """Every case run once, in order (later cases read what earlier ones wrote)."""
    out = {}
    for name, argv, code, verdict in CASES:
        if name in BEFORE:
            BEFORE[name](work)
        out[name] = (argv, *run_json(work, *argv), code, verdict)
    return out


def test_every_command_with_json_is_run_here():
    assert commands_with_json() == {argv[0] for _, argv, _, _ in CASES}


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_the_output_of_every_command_fits_the_schema(outputs, validator, name):
    argv, code, doc, expected_code, expected_verdict = outputs[name]
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}"
              for e in validator.iter_errors(doc)]
    assert errors == [], (argv, doc)
    assert (code, doc["verdict"]) == (expected_code, expected_verdict), (argv, doc)
    assert doc["command"] == argv[0]
    assert list(doc)[:6] == ["command", "verdict", "trust", "reason", "time_s", "sha256"]


def test_the_hashes_are_named_alike_everywhere(outputs):
    pair = outputs["verify proved"][2]["sha256"]
    assert set(pair) == {"a", "b", "domain"}
    assert outputs["check-cert valid"][2]["sha256"] == pair
    prop = outputs["check unsat"][2]["sha256"]
    assert set(prop) == {"model", "model_file", "property"}
    assert outputs["check-cert property"][2]["sha256"] == prop
    assert set(outputs["replay valid"][2]["sha256"]) == {"model", "model_file", "property"}
    assert "sha256" not in outputs["verify proved"][2]["about"]["domain"]


def test_a_layerwise_proof_reports_its_certificate_kind(outputs):
    doc = outputs["verify proved"][2]
    assert doc["stats"]["strategy"] == "layerwise" and doc["certificate_kind"] == "layerwise"
    assert outputs["check-cert valid"][2]["certificate_kind"] == "layerwise"
    assert outputs["verify monolithic"][2]["certificate_kind"] == "equivalence"
    assert outputs["equiv correspondence"][2]["certificate_kind"] == "correspondence"
    assert outputs["equiv epsilon proved"][2]["certificate_kind"] == "pair-property"


def test_unknown_gives_a_reason_and_no_trust(outputs):
    for name in ("verify timed out", "search none", "regions unknown", "check out of cells",
                 "softmax-bound gates"):
        doc = outputs[name][2]
        assert doc["trust"] is None and doc["reason"], name


def test_a_refusal_of_the_files_names_them(outputs):
    doc = outputs["check-cert other model"][2]
    assert doc["mismatch"]["file"] == "tent.json" and doc["trust"] is None
    assert doc["mismatch"]["expected"] == outputs["verify proved"][2]["sha256"]["b"]


def test_the_schema_refuses_the_old_dialects_and_wrong_words(outputs, validator):
    def bad(doc):
        return not validator.is_valid(doc)

    check = outputs["check unsat"][2]
    old_check = {k: v for k, v in check.items() if k != "verdict"} | {"result": "unsat"}
    assert bad(old_check)
    cert = outputs["check-cert valid"][2]
    assert bad(cert | {"valid": True})
    assert bad(cert | {"verdict": "proved"})             # check-cert says valid, not proved
    assert bad(check | {"verdict": "proved"})            # check says unsat
    assert bad(check | {"trust": None})                  # an unsat answer rests on something
    assert bad(outputs["verify timed out"][2] | {"reason": None})
    assert bad(cert | {"sha256": {"a_sha256": cert["sha256"]["a"]}})
    assert bad(cert | {"sha256": {"a": "not a hash"}})
    assert bad({k: v for k, v in cert.items() if k != "trust"})
    assert bad(outputs["verify proved"][2] | {"certificate_kind": "monolithic"})


def test_a_rejection_and_a_refutation_give_their_evidence_and_no_trust(outputs):
    doc = outputs["check-cert lowered epsilon"][2]
    assert doc["trust"] is None and doc["reason"] and doc["files"]["not_compared"]
    for name in ("verify refuted", "equiv epsilon refuted", "search found"):
        doc = outputs[name][2]
        assert doc["trust"] is None and doc["x" if name == "search found" else
                                            "counterexample"], name
    sat = outputs["check sat"][2]
    assert sat["trust"] is None and sat["x"] and sat["margin"]
    assert outputs["check unsat"][2]["trust"] == "kernel-checked"
