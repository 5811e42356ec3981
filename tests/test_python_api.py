"""The Python API (``import exactmax as xm``, exactmax/api.py, docs/python-api.md; issue #33):
on the bundled examples, every function answers what its command answers with ``--json``
(verdict, trust, reason, stats, sha256), counterexamples are exact Fractions at which the
kernel's evaluators confirm the answer, certificates are the very files ``--cert`` writes, bad
inputs raise the one-line error the command prints, and ``import exactmax`` (so the command
line) does not load the API.  The examples of docs/python-api.md are run by
tests/test_docs_examples.py, as every example of the guide."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from fractions import Fraction

import pytest

import exactmax as xm
from exactmax.cli import main
from exactmax.kernel.maxout import evaluate_maxout
from exactmax.kernel.polyhedron import Box, Polyhedron
from exactmax.kernel.rational import rational
from exactmax.kernel.transformer import evaluate_transformer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
TENT = os.path.join(EXAMPLES, "tent.json")
REORDERED = os.path.join(EXAMPLES, "tent_reordered.json")
BROKEN = os.path.join(EXAMPLES, "tent_broken.transformer.json")
RELU = os.path.join(EXAMPLES, "small_relu.onnx")
SAT = os.path.join(EXAMPLES, "small_relu_sat.vnnlib")
UNSAT = os.path.join(EXAMPLES, "small_relu_unsat.vnnlib")
D3 = os.path.join(EXAMPLES, "maxout_d3_w4_r3.json")
NEVER = os.path.join(tempfile.gettempdir(), "exactmax-api-test-never-written.json")


def run(*argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``exactmax ARGV`` in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def cli_json(*argv: str) -> dict:
    code, out, err = run(*argv, "--json")
    assert code in (0, 1, 3, 4, 5), err
    return json.loads(out)


def cli_error(*argv: str) -> str:
    """The one line after ``exactmax: error:`` of a command that fails (exit 2)."""
    code, _, err = run(*argv)
    assert code == 2, err
    assert err.startswith("exactmax: error: ") and err.count("\n") == 1, err
    return err.removeprefix("exactmax: error: ").rstrip("\n")


def same_answer(r, j: dict) -> None:
    """The API's result says what the command's --json object says: verdict, trust, reason,
    what it is about, and its statistics but for what varies from run to run."""
    assert (r.verdict, r.trust, r.reason) == (j["verdict"], j["trust"], j["reason"])
    assert r.sha256 == j["sha256"]
    assert _steady(json.loads(json.dumps(r.stats))) == _steady(j["stats"])


def _steady(stats):
    """Statistics without what varies from run to run (times; the search's record)."""
    if isinstance(stats, dict):
        return {
            k: _steady(v)
            for k, v in stats.items()
            if not k.endswith("_s") and k not in ("s", "search")
        }
    if isinstance(stats, list):
        return [_steady(v) for v in stats]
    return stats


def exact(values) -> list[str]:
    return [str(v) for v in values]


def fractions(values) -> tuple[Fraction, ...]:
    """The kernel's exact rationals (FLINT's fmpq) as Fractions, to compare with the API's."""
    return tuple(Fraction(int(v.p), int(v.q)) for v in values)


# ------------------------------------------------------------------------ what is loaded


def test_import_exactmax_does_not_load_the_api():
    """``import exactmax`` and the command line's start load none of the API (PEP 562):
    the start-up of ``exactmax`` is what it was."""
    code = (
        "import sys, exactmax; print('exactmax.api' in sys.modules, "
        "'exactmax.io' in sys.modules); exactmax.verify; print('exactmax.api' in sys.modules)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert p.stdout.split() == ["False", "False", "True"]
    code = (
        "import sys; from exactmax.cli import build_parser; build_parser(); "
        "print('exactmax.api' in sys.modules)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert p.stdout.split() == ["False"]


def test_the_names_of_the_api():
    for name in xm.API:
        assert getattr(xm, name) is not None, name
        assert name in dir(xm)
    assert xm.verify is xm.api.verify and xm.InputError is xm.io.InputError
    assert issubclass(xm.ArgumentError, xm.InputError) and issubclass(xm.ArgumentError, ValueError)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        xm.nothing  # noqa: B018


def test_regions_is_the_function_in_any_import_order():
    """``exactmax.regions`` is both the package of the region enumeration and the API's
    function: the package is callable, whichever was imported first."""
    assert xm.regions is sys.modules["exactmax.regions"]
    code = (
        "import exactmax.regions.enumerate, exactmax as xm; "
        f"print(xm.regions({TENT!r}).linear_regions); "
        "import exactmax as xm2; print(callable(xm2.regions), xm2.regions.enumerate.__name__)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert p.stdout.split() == ["15", "True", "exactmax.regions.enumerate"]


# ------------------------------------------------------------------------ verify, equiv


def test_verify_proves_as_the_command_does(tmp_path):
    r = xm.verify(TENT)
    same_answer(r, cli_json("verify", TENT))
    assert (r.verdict, r.trust, r.certificate_kind) == ("proved", "kernel-checked", "layerwise")
    assert r.counterexample is None and r.certificate is not None
    assert repr(r).startswith("<verify: proved (kernel-checked), 8 cells, ")
    assert "\n" not in repr(r)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.verdict = "refuted"  # type: ignore[misc]
    # the certificate is the file --cert writes, byte for byte
    run("verify", TENT, "--cert", str(tmp_path / "cli.json"))
    r.write_certificate(tmp_path / "api.json")
    assert (tmp_path / "api.json").read_bytes() == (tmp_path / "cli.json").read_bytes()
    code, out, _ = run("check-cert", str(tmp_path / "api.json"))
    assert code == 0 and out.startswith("valid: the kernel checked 8 cells")


def test_a_loaded_network_and_a_compiled_transformer():
    net = xm.load(TENT)
    c = xm.compile(net)
    r = xm.verify(net, c.transformer)
    assert (r.verdict, r.trust) == ("proved", "kernel-checked")
    assert r.sha256 == xm.verify(TENT).sha256  # the same models, the same domain


def test_verify_refutes_with_an_exact_point_the_kernel_confirms():
    r = xm.verify(TENT, BROKEN)
    j = cli_json("verify", TENT, "--transformer", BROKEN)
    same_answer(r, j)
    cex = r.counterexample
    assert r.verdict == "refuted" and r.trust is None and r.certificate is None
    assert all(isinstance(v, Fraction) for v in cex.x)
    assert exact(cex.x) == j["counterexample"]["x"]
    assert cex.x_approx == j["counterexample"]["x_approx"]
    assert {n: exact(y) for n, y in cex.outputs.items()} == j["counterexample"]["outputs"]
    net, tf = xm.load(TENT), xm.load(BROKEN)
    assert fractions(evaluate_maxout(net, cex.x)) == cex.outputs[TENT]
    assert fractions(evaluate_transformer(tf, cex.x)) == cex.outputs[BROKEN]
    assert cex.outputs[TENT] != cex.outputs[BROKEN]
    assert net.domain.contains(tuple(rational(v) for v in cex.x))
    assert repr(r).startswith("<verify: refuted at x = (1, 1), ")
    with pytest.raises(xm.ArgumentError, match="^write_certificate: no certificate: the verdict "
                       "is refuted$"):
        r.write_certificate("never.json")


def test_verify_without_the_search_finds_the_layer_that_differs():
    r = xm.verify(TENT, BROKEN, search=False)
    same_answer(r, cli_json("verify", TENT, "--transformer", BROKEN, "--no-search"))
    assert "where layer 1 differs" in repr(r)


@pytest.mark.parametrize("other", [REORDERED, os.path.join(EXAMPLES, "tent_rewritten.json")])
def test_equiv_proves_as_the_command_does(other):
    r = xm.equiv(TENT, other)
    same_answer(r, cli_json("equiv", TENT, other))
    assert (r.verdict, r.trust) == ("proved", "kernel-checked")


@pytest.mark.parametrize(
    "epsilon, verdict", [("1/1000", "proved"), (Fraction(1, 2000), "refuted"), (0, "refuted")]
)
def test_equiv_within_epsilon(epsilon, verdict, tmp_path):
    r = xm.equiv(TENT, BROKEN, epsilon=epsilon)
    j = cli_json("equiv", TENT, BROKEN, "--epsilon", str(epsilon), "--workers", "1")
    same_answer(r, j)
    assert r.verdict == verdict
    if verdict == "refuted":
        cex = r.counterexample
        gap = max(
            abs(a - b)
            for a, b in zip(
                evaluate_maxout(xm.load(TENT), cex.x), evaluate_transformer(xm.load(BROKEN), cex.x)
            )
        )
        assert cex.details["gap"] == fractions([gap])[0] > Fraction(epsilon)
        assert str(cex.details["gap"]) == j["counterexample"]["gap"]
    else:
        run("equiv", TENT, BROKEN, "--epsilon", str(epsilon), "--workers", "1",
            "--cert", str(tmp_path / "cli.json"))
        r.write_certificate(str(tmp_path / "api.json"))
        assert (tmp_path / "api.json").read_bytes() == (tmp_path / "cli.json").read_bytes()


def test_equiv_in_top1():
    r = xm.equiv(TENT, BROKEN, top1=True)
    same_answer(r, cli_json("equiv", TENT, BROKEN, "--top1", "--workers", "1"))
    assert r.verdict == "proved"


def test_unknown_at_the_cell_limit():
    r = xm.equiv(TENT, BROKEN, epsilon="1/1000", max_leaves=1, search=False)
    j = cli_json("equiv", TENT, BROKEN, "--epsilon", "1/1000", "--max-leaves", "1",
                 "--no-search", "--workers", "1")
    assert (r.verdict, r.trust, r.reason) == ("unknown", None, j["reason"])
    assert j["verdict"] == "unknown" and r.reason
    assert repr(r).startswith("<equiv: unknown: ")


def test_vacuous_on_an_empty_domain(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"format": "exactmax/domain", "version": 1,
                                 "polyhedron": {"A": [[1, 0], [-1, 0]], "b": [-1, -1]}}))
    j = cli_json("equiv", TENT, REORDERED, "--domain", str(empty))
    for r in (xm.equiv(TENT, REORDERED, domain=empty),
              xm.equiv(TENT, REORDERED, domain=Polyhedron(((1, 0), (-1, 0)), (-1, -1), 2))):
        assert (r.verdict, r.trust) == ("vacuous", "kernel-checked")
        assert r.reason == "the domain is empty"
        assert r.verdict == j["verdict"] and r.sha256 == j["sha256"]


def test_a_time_limit_is_an_unknown_answer():
    r = xm.verify(TENT, timeout=0.001, search=False)
    assert (r.verdict, r.trust, r.counterexample) == ("unknown", None, None)
    assert "0.001 s" in r.reason
    assert xm.verify(TENT).verdict == "proved"  # no limit left behind


def test_every_form_of_a_domain_is_the_same_domain(tmp_path):
    """A domain file, a VNN-LIB property's input set, a Box object and box= text: the same
    box [-1, 1]^2 (tent's own), the same domain hash as the command's."""
    f = tmp_path / "d.json"
    f.write_text(json.dumps({"format": "exactmax/domain", "version": 1,
                             "box": {"lower": [-1, -1], "upper": [1, 1]}}))
    p = tmp_path / "d.vnnlib"
    p.write_text("(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n"
                 "(assert (>= X_0 -1))\n(assert (<= X_0 1))\n(assert (>= X_1 -1))\n"
                 "(assert (<= X_1 1))\n(assert (>= Y_0 0))\n")
    own = xm.verify(TENT).sha256["domain"]
    forms = [dict(domain=f), dict(domain=str(p)), dict(box="-1,1"), dict(box="-1,1;-1,1"),
             dict(domain=Box((-1, -1), (1, 1))), dict(domain=Box((Fraction(-1), -1), (1, 1)))]
    for form in forms:
        assert xm.verify(TENT, **form).sha256["domain"] == own, form
    j = cli_json("verify", TENT, "--box", "0,1/2;0,1")
    same_answer(xm.verify(TENT, box="0,1/2;0,1"), j)


# --------------------------------------------------------------------------------- check


def test_check_sat_with_a_counterexample_the_kernel_confirms():
    from exactmax.io.vnnlib2 import read_property

    r = xm.check(RELU, SAT)
    j = cli_json("check", RELU, SAT, "--workers", "1")
    same_answer(r, j)
    cex = r.counterexample
    assert exact(cex.x) == j["x"] and exact(cex.outputs["y"]) == j["y"]
    net, prop = xm.load(RELU), read_property(SAT)
    assert fractions(evaluate_maxout(net, cex.x)) == cex.outputs["y"]
    case = prop.cases[cex.details["case"]]
    assert case.inputs.contains(tuple(rational(v) for v in cex.x))
    assert str(cex.details["margin"]) == j["margin"] and cex.details["margin"] >= 0
    # the property given as read, the network as loaded: the same answer
    assert xm.check(net, prop).counterexample == cex


def test_check_unsat_with_the_certificate_check_writes(tmp_path):
    r = xm.check(RELU, UNSAT)
    same_answer(r, cli_json("check", RELU, UNSAT, "--workers", "1"))
    assert (r.verdict, r.trust) == ("unsat", "kernel-checked") and r.certificate
    run("check", RELU, UNSAT, "--workers", "1", "--cert", str(tmp_path / "cli.json"))
    r.write_certificate(tmp_path / "api.json")
    assert (tmp_path / "api.json").read_bytes() == (tmp_path / "cli.json").read_bytes()
    loaded = xm.check(xm.load(RELU), UNSAT)
    assert loaded.verdict == "unsat" and loaded.sha256["model_file"] is None
    with pytest.raises(xm.ArgumentError, match="give check\\(\\) the network and the property"):
        loaded.write_certificate(tmp_path / "never.json")
    assert not (tmp_path / "never.json").exists()


# ------------------------------------------------------------------------ compile, regions


def test_compile_as_the_command_does(tmp_path):
    c = xm.compile(TENT)
    j = cli_json("compile", TENT, "-o", str(tmp_path / "cli.json"))
    assert c.verdict == j["verdict"] == "done"
    for key in ("sublayers", "tokens", "heads", "d_model", "maxout_params", "transformer_params",
                "transformer_nonzero", "layers", "bounds", "variant"):
        assert c.size[key] == j[key], key
    assert exact(c.gate_constants) == j["gate_constants"] and c.bounds == j["bounds"]
    c.write(tmp_path / "api.json")
    assert (tmp_path / "api.json").read_bytes() == (tmp_path / "cli.json").read_bytes()
    assert repr(c) == ("<compile: 6 sub-layers, 3 tokens, 5 heads, d_model 12; gate constants "
                       "from interval bounds: 3, 5>")
    merged = xm.compile(xm.load(TENT), merged=True, slack="1/2")
    j = cli_json("compile", TENT, "-o", str(tmp_path / "m.json"), "--merged", "--slack", "1/2")
    assert merged.size["sublayers"] == j["sublayers"] and exact(merged.gate_constants) == \
        j["gate_constants"]


def test_compile_past_its_timeout_raises_timeout_error(monkeypatch):
    import exactmax.construct.command as command

    real = command.compile_checked

    def slow(*args):  # a construction that takes long (Python steps, so the limit can stop it)
        while True:
            pass

    monkeypatch.setattr(command, "compile_checked", slow)
    with pytest.raises(TimeoutError, match="compile: .*0.2 s"):
        xm.compile(TENT, timeout=0.2)
    monkeypatch.setattr(command, "compile_checked", real)
    assert xm.compile(TENT, timeout=60).verdict == "done"  # no limit left behind
    with pytest.raises(xm.ArgumentError, match="timeout"):
        xm.compile(TENT, timeout=-1)


def test_regions_as_the_command_does(tmp_path):
    rc = xm.regions(TENT)
    j = cli_json("regions", TENT)
    assert (rc.verdict, rc.trust) == (j["verdict"], j["trust"]) == ("counted", "kernel-checked")
    assert (rc.activation_regions, rc.linear_regions, rc.cells, rc.distinct_maps,
            rc.merge_components, rc.linear_certified) == (
        j["activation_regions"], j["linear_regions"], j["cells"], j["distinct_maps"],
        j["merge_components"], j["linear_certified"])
    assert rc.sha256 == j["sha256"] and len(rc.count.cells) == rc.cells
    run("regions", TENT, "--cert", str(tmp_path / "cli.json"))
    rc.write_certificate(tmp_path / "api.json")
    assert (tmp_path / "api.json").read_bytes() == (tmp_path / "cli.json").read_bytes()
    few = xm.regions(TENT, max_cells=2)
    assert few.verdict == cli_json("regions", TENT, "--max-cells", "2")["verdict"] == "unknown"
    assert few.reason and few.linear_regions is None
    assert xm.regions(TENT, box="0,1").cells == cli_json("regions", TENT, "--box", "0,1")["cells"]


def test_import_onnx_records_a_domain(tmp_path):
    net = xm.import_onnx(RELU, box="0,1")
    assert net.domain == Box((0, 0), (1, 1)) and net.input_dim == 2
    assert xm.import_onnx(RELU).domain is None
    assert xm.load(RELU).layers == net.layers
    same, report = xm.import_onnx(RELU, box="0,1", report=True)
    assert same == net
    assert report["input_dim"] == 2 and report["operators"] == {"Add": 2, "MatMul": 2, "Relu": 1}
    assert report["layers"] == [{"width": 3, "rank": 2}] and report["carried_units"] == 0
    out = tmp_path / "relu.json"
    cli = cli_json("import", RELU, "-o", str(out))
    assert {k: cli[k] for k in report} == report  # the command's --json, the same keys


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "call, argv",
    [
        (lambda: xm.load("nope.json"), ("eval", "nope.json", "--input", "0")),
        (lambda: xm.verify(BROKEN), ("verify", BROKEN)),
        (lambda: xm.compile(BROKEN), ("compile", BROKEN, "-o", NEVER)),
        (lambda: xm.check(TENT, os.path.join(EXAMPLES, "missing.vnnlib")),
         ("check", TENT, os.path.join(EXAMPLES, "missing.vnnlib"))),
        (lambda: xm.check(BROKEN, SAT), ("check", BROKEN, SAT)),
        (lambda: xm.verify(TENT, domain=os.path.join(EXAMPLES, "tent.json")),
         ("verify", TENT, "--domain", os.path.join(EXAMPLES, "tent.json"))),
        (lambda: xm.import_onnx(TENT), ("import", TENT, "-o", NEVER)),
    ],
)
def test_bad_input_is_the_commands_one_line(call, argv):
    with pytest.raises(xm.InputError) as e:
        call()
    assert "\n" not in str(e.value) and str(e.value) == cli_error(*argv)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: xm.verify(TENT, timeout=-1), "timeout: expected a positive number of seconds"),
        (lambda: xm.verify(TENT, timeout="60"), "timeout: expected a positive number"),
        (lambda: xm.verify(TENT, box="0,1;0,1;0,1"), 'box: 3 sides "lo,hi" separated by ";" '
         "for a model of 2 inputs"),
        (lambda: xm.verify(TENT, box="1,0"), "box: side 0: lo = 1 is above hi = 0"),
        (lambda: xm.verify(TENT, domain="--box 0,1"), "domain: expected a path"),
        (lambda: xm.verify(TENT, domain=Box((0.0, 0), (1, 1))), "domain: lower: expected an "
         "exact rational, got float 0.0"),
        (lambda: xm.verify(TENT, domain=Box((0, 0), (1, 1)), box="0,1"), "box: give domain= or"),
        (lambda: xm.verify(42), "net: expected a path or a loaded model"),
        (lambda: xm.verify(TENT, strategy="fast"), "strategy: expected one of 'auto'"),
        (lambda: xm.equiv(TENT, BROKEN, epsilon=0.01), "epsilon: expected an exact number"),
        (lambda: xm.equiv(TENT, BROKEN, epsilon="-1"), "epsilon: expected a number >= 0"),
        (lambda: xm.equiv(TENT, BROKEN, epsilon="x"), "epsilon: "),
        (lambda: xm.equiv(TENT, BROKEN, epsilon=1, top1=True), "epsilon: epsilon and top1"),
        (lambda: xm.equiv(TENT, BROKEN, workers=2), "workers: workers, scheduler"),
        (lambda: xm.equiv(TENT, D3), "equiv: .*tent.json has input dimension 2 but .*has 3$"),
        (lambda: xm.check(RELU, SAT, workers=0), "workers: expected an integer >= 1"),
        (lambda: xm.compile(TENT, slack=-1), "slack: expected a number >= 0"),
        (lambda: xm.compile(TENT, bounds="exact"), "bounds: expected one of"),
        (lambda: xm.regions(TENT, max_cells=0), "max_cells: expected an integer >= 1"),
        (lambda: xm.regions(TENT, box="0,1;0,0"), "box: domain: the domain has an empty "
         "interior"),
    ],
)
def test_bad_arguments_raise_one_line(call, message):
    with pytest.raises(xm.InputError) as e:
        call()
    assert "\n" not in str(e.value)
    assert re.match(message, str(e.value)), str(e.value)


def test_a_domain_of_another_dimension():
    with pytest.raises(xm.ArgumentError, match="^verify: the domain has dimension 3, the "
                       "models 2$"):
        xm.verify(TENT, BROKEN, domain=Box((0, 0, 0), (1, 1, 1)))
