"""The short run of exactmax's fuzzing campaign (``tests/fuzz.py``; the long run is
``benchmarks/fuzz.py``): about 2,000 mutated files of every format through every command that
reads them, mostly in-process, a sample as subprocesses, gzip bombs, and tampered
certificates that check-cert may accept only when an independent exact check confirms their
claim.  Then the regression tests of what the campaign found, and the memory bounds of
reading large files (#23 item 5)."""

from __future__ import annotations

import gzip
import json
import os
import random
import tracemalloc
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuzz
from exactmax.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TENT = os.path.join(ROOT, "examples", "tent.json")

# cases per format (in-process): about 1,800, plus tampering and subprocesses below
CASES = {"maxout": 330, "transformer": 280, "domain-box": 180, "domain-polyhedron": 180,
         "certificate": 280, "region-certificate": 150, "cpwl": 180, "points": 120}


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return fuzz.Seeds(str(tmp_path_factory.mktemp("seeds")))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return str(tmp_path_factory.mktemp("work"))


def _report(case) -> str:
    return (f"{case.format} {case.seed!r} through {case.command!r} after {case.mutation}: "
            f"{case.failure}; exit {case.status}, stderr: {case.err!r}")


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_mutated_files_give_an_answer_or_one_line(fmt, seeds, work):
    cmds = [c for c in fuzz.commands(seeds) if c.format == fmt]
    assert cmds and seeds.of(fmt)

    @settings(max_examples=CASES[fmt], deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(rng=st.randoms(use_true_random=False))
    def run(rng):
        cmd = fuzz.pick_command(rng, cmds)
        case = fuzz.run_case(cmd, rng.choice(seeds.of(fmt)), rng, work)
        assert case.failure is None, _report(case)

    run()


def test_every_command_that_reads_a_file_is_fuzzed(seeds):
    names = {c.argv[0] for c in fuzz.commands(seeds)}
    assert names >= {"verify", "equiv", "check-cert", "eval", "info", "compile",
                     "softmax-bound", "regions", "cpwl", "export-coq", "search"}
    assert {c.format for c in fuzz.commands(seeds)} == set(fuzz.FORMATS)


def test_a_sample_as_subprocesses(seeds, work):
    """The same cases through ``python -m exactmax``, with their peak memory."""
    rng = random.Random(23)
    cmds = fuzz.commands(seeds)
    for _ in range(10):
        cmd = fuzz.pick_command(rng, cmds)
        case = fuzz.run_case(cmd, rng.choice(seeds.of(cmd.format)), rng, work,
                             subprocess_run=True)
        assert case.failure is None, _report(case)
        assert case.rss_kb < 1 << 20, _report(case)   # under 1 GiB


def test_gzip_bombs_are_refused_in_process(seeds, work, monkeypatch):
    """A bomb beyond the limit (lowered to 4 MiB here) is refused, exit 2, one line."""
    import exactmax.io.jsonfile as jsonfile
    monkeypatch.setattr(jsonfile, "MAX_FILE_BYTES", 4 << 20)
    for cmd in fuzz.commands(seeds):
        if cmd.format in ("maxout", "certificate", "cpwl", "domain-box"):
            case = fuzz.run_case(cmd, seeds.of(cmd.format)[0], random.Random(0), work,
                                 bomb=8 << 20)
            assert case.failure is None and case.status == 2, _report(case)
            assert "larger than 4 MiB" in case.err


def test_a_gzip_bomb_is_refused_without_holding_it(tmp_path):
    """1 GiB + 1 MiB of spaces in a gzip file of about 1 MB: refused by the 1 GiB limit
    after a streaming pass, with little memory (before: the whole GiB was read first)."""
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(fuzz.gzip_bomb((1 << 30) + (1 << 20)))
    from exactmax.io import InputError
    from exactmax.io.jsonfile import read_json_file
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="larger than 1024 MiB"):
            read_json_file(str(bomb))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, peak


@settings(max_examples=110, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(rng=st.randoms(use_true_random=False))
def test_tampered_certificates_are_accepted_only_when_their_claim_holds(rng, tmp_path_factory):
    s = _tamper_seeds(tmp_path_factory)
    name = rng.choice(sorted(s.certs))
    case = fuzz.run_tamper_case(name, s.certs[name], rng, _tamper_seeds.work)
    assert case.failure is None, (case.source, case.what, case.status, case.failure)


def _tamper_seeds(factory):
    if not hasattr(_tamper_seeds, "seeds"):
        _tamper_seeds.seeds = fuzz.Seeds(str(factory.mktemp("tamper")))
        _tamper_seeds.work = str(factory.mktemp("tamper-work"))
    return _tamper_seeds.seeds


def test_the_independent_check_can_refuse(seeds, tmp_path):
    """claim_holds is not a rubber stamp: a certificate whose model b is another Transformer
    (one weight off, hash recomputed) makes a false claim, and the check says so."""
    from exactmax.io import load_model, model_to_json
    from exactmax.io.certificates import content_hash
    cert = json.loads(json.dumps(seeds.certs["tent-monolithic"]))
    broken = model_to_json(load_model(os.path.join(ROOT, "examples",
                                                   "tent_broken.transformer.json")))
    cert["models"]["b"] = {"sha256": content_hash(broken), "model": broken}
    path = tmp_path / "false.json"
    path.write_text(json.dumps(cert))
    ok, why = fuzz.claim_holds(str(path), random.Random(0))
    assert not ok and "differ" in why
    ok, why = fuzz.claim_holds(os.path.join(seeds.tmp, "tent-monolithic.cert.json"),
                               random.Random(0))
    assert ok, why
    # two Maxout networks: the file's own z3 encoding
    cert = json.loads(json.dumps(seeds.certs["tent-monolithic"]))
    net = model_to_json(load_model(TENT))
    net.pop("meta", None)
    net.pop("domain", None)
    cert["models"]["b"] = {"sha256": content_hash(net), "model": net}
    path.write_text(json.dumps(cert))
    ok, why = fuzz.claim_holds(str(path), random.Random(0))
    assert ok and why == "own z3 encoding", why
    net["output"]["b"][0] = "1/1000"
    cert["models"]["b"] = {"sha256": content_hash(net), "model": net}
    path.write_text(json.dumps(cert))
    ok, why = fuzz.claim_holds(str(path), random.Random(0))
    assert not ok


def test_the_harness_flags_what_it_must():
    """judge() is not a rubber stamp either."""
    ok = fuzz.Outcome(2, "", "exactmax: error: f.json: bad\n", 0.1)
    assert fuzz.judge(ok, 10) is None
    assert "exit status 70" in fuzz.judge(fuzz.Outcome(70, "", "Traceback\n", 0.1), 10)
    assert "traceback" in fuzz.judge(fuzz.Outcome(1, "", "Traceback (most recent", 0.1), 10)
    assert "2 lines" in fuzz.judge(fuzz.Outcome(2, "", "exactmax: error: a\nb\n", 0.1), 10)
    assert "within" in fuzz.judge(fuzz.Outcome(None, "", "", 11), 10)
    assert "took" in fuzz.judge(fuzz.Outcome(0, "", "", 11), 10)
    written = fuzz.Outcome(2, "", "exactmax: error: x\n", 0.1, outputs={"/t/o.json": "complete"})
    assert "was written" in fuzz.judge(written, 10)


# ---------------------------------------------------------------- what the campaign found

def test_softmax_bound_with_weights_and_bounds_beyond_floats(tmp_path, capsys):
    """A 5,000-digit weight or domain bound has no float: the float screening of
    softmax-bound ended in an internal error (exit 70); it now saturates, and the exact
    check decides."""
    with open(TENT) as f:
        net = json.load(f)
    net["output"]["W"][0][0] = "9" * 5000
    p = tmp_path / "big.json"
    p.write_text(json.dumps(net))
    assert main(["softmax-bound", str(p), "--lambda", "50", "--max-cells", "40",
                 "--timeout", "2"]) in (0, 3)
    dom = {"format": "exactmax/domain", "version": 1,
           "polyhedron": {"A": [[1, 0], [-1, 0], [0, 1], [0, -1]], "b": ["9" * 5000, 1, 1, 1]}}
    d = tmp_path / "dom.json"
    d.write_text(json.dumps(dom))
    assert main(["softmax-bound", TENT, "--domain", str(d), "--lambda", "50",
                 "--max-cells", "40", "--timeout", "2"]) in (0, 3)
    assert "internal error" not in capsys.readouterr().err


@pytest.mark.parametrize("edit", ["version", "sparse-index", "cpwl-interval"])
def test_an_error_about_a_huge_number_stays_a_short_line(edit, tmp_path, capsys):
    """Messages quoted 4,000-digit numbers in full (lines of 4,100 characters)."""
    big = "9" * 4000
    if edit == "version":
        with open(TENT) as f:
            text = f.read().replace('"version": 1', f'"version": {big}')
        args = ["info"]
    elif edit == "sparse-index":
        text = json.dumps({"format": "exactmax/maxout", "version": 1, "input_dim": 1,
                           "layers": [{"units": [{"pieces": [{"w": [1], "b": 0}]}]}],
                           "output": {"W": {"shape": [1, 1], "entries": [[0, 7, 1]]},
                                      "b": [0]}}).replace("7", big)
        args = ["info"]
    else:
        text = json.dumps({"format": "exactmax/cpwl", "version": 1, "kind": "breakpoints",
                           "x": [0, 1], "y": [0, 1], "interval": [big, 1]})
        args = ["cpwl"]
    p = tmp_path / "f.json"
    p.write_text(text)
    argv = args + [str(p)] + (["-o", str(tmp_path / "o.json")] if args == ["cpwl"] else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 400 and "(4000 digits)" in err, err


# ------------------------------------------------------------------ large files (item 5)

def _shape_error_file(path, mb: float) -> int:
    row = ",".join(f'"{i % 97 - 48}/{i % 89 + 1}"' for i in range(1000))
    n = int(mb * 10 ** 6 / (len(row) + 1)) + 1
    text = ('{"format": "exactmax/maxout", "version": 1, "input_dim": 2, "output": '
            '{"W": [[' + ",".join([row] * n) + ']], "b": [0]}}')
    path.write_text(text)
    return len(text)


def test_a_large_file_with_a_wrong_top_level_is_refused_in_little_memory(tmp_path, capsys):
    """10 MB of "p/q" strings under "output", and no "layers": refused from the top level,
    peak traced memory within 3x the size (the full parse first took about 10x)."""
    path = tmp_path / "big.json"
    size = _shape_error_file(path, 10)
    tracemalloc.start()
    try:
        assert main(["info", str(path)]) == 2
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert capsys.readouterr().err.endswith('big.json: missing key "layers"\n')
    assert peak < 3 * size, (peak, size)


def test_the_top_level_pass_says_what_the_full_reader_says(tmp_path, capsys):
    """The same message from the shallow pass as from the reader: missing, unknown and
    duplicate keys, format, version, the wrong kind of file; and a large value is named by
    its kind and size."""
    from exactmax.io import InputError
    from exactmax.io.jsonfile import Cursor, parse_json_text, shallow_root
    from exactmax.io.models import model_shape
    with open(TENT) as f:
        good = f.read()
    cases = [good.replace('"layers"', '"layer"'), good.replace('"version": 1', '"version": 2'),
             good.replace('"exactmax/maxout"', '"exactmax/domain"'),
             good.replace('"input_dim": 2', '"input_dim": 2, "input_dim": 2'),
             good.replace('"format": "exactmax/maxout",', ''),
             good.replace('"exactmax/maxout"', "[" + "1," * 40000 + "1]")]
    for text in cases:
        full = shallow = None
        try:
            model_shape(Cursor("f", "", parse_json_text(text, "f")))
        except InputError as e:
            full = str(e)
        root = shallow_root(text, "f")
        assert root is not None
        try:
            model_shape(Cursor("f", "", root))
        except InputError as e:
            shallow = str(e)
        assert full is not None and shallow is not None
        if "40000" not in text and "1,1,1" not in text:
            assert shallow == full
        else:
            assert shallow == "f: format: expected a string, got a list of 80003 characters"
    assert shallow_root(good[:-5], "f") is None          # truncated: the full parse says so
    assert shallow_root("[1, 2]", "f") is None


@pytest.mark.parametrize("edit", ["unknown-key", "meta-key", "duplicate-key", "value"])
def test_a_key_or_value_with_a_line_break_stays_on_one_line(edit, tmp_path, capsys):
    """A key "attentio\\n" was printed as is: exit 2 with two lines on stderr."""
    with open(TENT) as f:
        net = json.load(f)
    if edit == "unknown-key":
        net["layers"][0]["units\n"] = net["layers"][0].pop("units")
    elif edit == "meta-key":
        net["meta"] = {"a\u2028b": float("nan")}
    elif edit == "duplicate-key":
        net["layers"][0]["units"][0]["pieces"][0]["\rb"] = "1"
    else:
        net["layers"][0]["units"][0]["pieces"][0]["b"] = "1\n2"
    text = json.dumps(net, ensure_ascii=False)
    if edit == "duplicate-key":
        text = text.replace('"\\rb"', '"b"', 1).replace('"b": "1"', '"\\rb": "1"', 1)
        text = text.replace('"\\rb": "1"', '"b": "1", "b\\r": 2, "b\\r": 3', 1)
    p = tmp_path / "n.json"
    p.write_text(text)
    assert main(["info", str(p)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.endswith("\n"), err


def test_regions_on_huge_numbers_stops_at_its_time_limit(tmp_path, capsys):
    """regions had no time limit: on 30,000-digit weights it ran for minutes (the fuzz run's
    cases stopped at 120 s).  --timeout ends the enumeration: unknown, exit 3."""
    import time
    with open(TENT) as f:
        net = json.load(f)
    for layer in net["layers"]:
        for unit in layer["units"]:
            for i, piece in enumerate(unit["pieces"]):
                piece["w"][0] = f"{i + 1}" + "7" * 30000 + "/" + "3" * 30000
    p = tmp_path / "big.json"
    p.write_text(json.dumps(net))
    t0 = time.monotonic()
    assert main(["regions", str(p), "--timeout", "1"]) == 3
    assert time.monotonic() - t0 < 60
    out = capsys.readouterr().out   # the enumeration's own check, or the backstop inside a step
    assert "time limit reached" in out or "time limit of 1 s (--timeout)" in out
    assert main(["regions", str(p), "--timeout", "0"]) == 2


# ------------------------------------------------------------------ time limits (#23, long run)
# The long run's last failures: on numbers of 2 x 10^4 - 10^5 digits, info and compile had no
# time limit, and verify / softmax-bound --timeout ran on inside one exact step (an LP, a
# Farkas solve) for minutes.  Files of 3 x 10^4-digit numbers are enough to show it: a z3
# check on them would take seconds, more than the limits given here.

BIG = "7" * 30000 + "/3"


def _big_polyhedron(tmp_path) -> str:
    p = tmp_path / "big-domain.json"
    p.write_text(json.dumps({"format": "exactmax/domain", "version": 1, "polyhedron": {
        "A": [[1, 0], [-1, 0], [0, 1], [0, -1], [1, 1], ["-1/2", 1]],
        "b": [1, 1, 1, 1, BIG, "3/4"]}}))
    return str(p)


def test_info_decides_a_huge_polyhedron_within_its_time_limit(tmp_path, capsys):
    dom = _big_polyhedron(tmp_path)
    assert main(["info", TENT, "--domain", dom, "--timeout", "0.5"]) == 3
    out = capsys.readouterr().out
    assert "domain: polyhedron with 6 constraints, not decided:" in out
    assert "time limit of 0.5 s (--timeout)" in out
    assert main(["info", TENT, "--domain", dom, "--timeout", "0.5", "--json"]) == 3
    d = json.loads(capsys.readouterr().out)["domain"]
    assert d["empty"] is None and d["bounded"] is None and "--timeout" in d["reason"]
    assert main(["info", TENT, "--domain", dom, "--timeout", "0"]) == 2
    # a small polyhedron is still decided (exit 0) under the default limit
    small = tmp_path / "small.json"
    small.write_text(json.dumps(fuzz.POLY))
    assert main(["info", TENT, "--domain", str(small)]) == 0
    assert "bounded, within [-1, 1] x [-1, 2/3]" in capsys.readouterr().out


def test_compile_on_a_huge_polyhedron_obeys_its_time_limit(tmp_path, capsys):
    dom, out = _big_polyhedron(tmp_path), tmp_path / "tf.json"
    assert main(["compile", TENT, "--domain", dom, "-o", str(out), "--timeout", "0.5"]) == 3
    assert capsys.readouterr().out.startswith("unknown: ")
    assert not out.exists() and not [n for n in os.listdir(tmp_path) if "exactmax" in n]


@pytest.mark.parametrize("command", ["verify", "equiv", "search", "regions", "softmax-bound"])
def test_commands_with_a_timeout_stop_inside_an_exact_step(command, tmp_path, capsys):
    """Before the fix: verify --timeout 1 answered after 20 s, softmax-bound --timeout 1
    certified after 19 s, search and regions had no limit here."""
    dom, net = _big_polyhedron(tmp_path), TENT
    cert = tmp_path / "c.json"
    argv = {"verify": ["verify", TENT, "--domain", dom, "--cert", str(cert)],
            "equiv": ["equiv", TENT, net, "--domain", dom, "--no-search"],
            "search": ["search", TENT, TENT, "--domain", dom],
            "regions": ["regions", TENT, "--domain", dom],
            "softmax-bound": ["softmax-bound", TENT, "--domain", dom, "--lambda", "50"]}[command]
    assert main(argv + ["--timeout", "1"]) == 3
    out = capsys.readouterr().out
    assert out.startswith("unknown: ") and "time limit of 1 s (--timeout)" in out, out
    assert not cert.exists()
    assert main(argv + ["--timeout", "1", "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["verdict"] == "unknown"


def test_the_limit_stops_a_step_that_never_checks_it(tmp_path, capsys, monkeypatch):
    """The backstop: an exact step that neither checks the deadline nor calls z3 (here a
    stand-in for the bounding box that loops) is stopped all the same, and so is a z3 check
    that z3 would not end by itself."""
    import time
    import z3
    from exactmax import interruption
    import exactmax.engine.lp as lp

    def endless(dom):
        while True:
            sum(range(1000))
    monkeypatch.setattr(lp, "analyze_domain", endless)
    small = tmp_path / "small.json"
    small.write_text(json.dumps(fuzz.POLY))
    t0 = time.monotonic()
    assert main(["verify", TENT, "--domain", str(small), "--timeout", "0.5",
                 "--no-search"]) == 3
    assert time.monotonic() - t0 < 30         # without the backstop: never
    assert "passed inside an exact step, which was stopped" in capsys.readouterr().out
    assert main(["info", TENT, "--domain", str(small), "--timeout", "0.5"]) == 3
    assert "not decided: no answer within the time limit of 0.5 s" in capsys.readouterr().out

    a, b, c = z3.Ints("a b c")
    s = z3.SolverFor("QF_NIA")
    s.add(a ** 3 + b ** 3 == c ** 3, a > 1, b > 1, c > 1)    # z3 does not end this alone
    with pytest.raises(interruption.TimeLimit):
        with interruption.time_limit(time.monotonic() + 0.3, 0.3):
            s.check()
    # nothing is left pending after a block, and z3 still answers
    with interruption.time_limit(time.monotonic() + 0.05, 0.05, grace=0.0):
        pass
    time.sleep(0.2)
    assert not interruption.expired()
    x = z3.Real("x")
    s2 = z3.Solver()
    s2.add(x > 1)
    assert s2.check() == z3.sat


# ------------------------------------------- found by the long run of 2026-12-04 (104,004 cases)

def test_an_exponent_of_thousands_of_digits_is_an_input_error_not_a_crash():
    """``1e999...9`` (17,589 digits) went through int() and hit Python's 4,300-digit limit
    (exit 70); leading zeros alone do not make an exponent large."""
    from exactmax.io.numbers import NumberSyntaxError, parse_rational
    with pytest.raises(NumberSyntaxError, match="17589 digits, beyond"):
        parse_rational("1e" + "9" * 17589)
    with pytest.raises(NumberSyntaxError, match="beyond"):
        parse_rational("-2.5E-" + "1" * 5000)
    assert parse_rational("1e" + "0" * 20000 + "3") == 1000


def test_numbers_beyond_floats_make_the_float_guided_routes_unknown_not_crash(tmp_path, capsys):
    """A weight of 10^400 (beyond float64) reached ``float()`` in the float-guided engine of
    equiv's pair route and of --epsilon (exit 70); now that route answers unknown with the
    reason, and equiv goes on to the exact route."""
    from exactmax.io.models import load_model
    from exactmax.kernel.rational import Q
    from exactmax.engine.floatlp import BEYOND_FLOATS
    from exactmax.prove.tolerance import decide_tolerance
    net = json.load(open(os.path.join(os.path.dirname(__file__), "..", "examples",
                                      "tent.json")))
    net["layers"][0]["units"][0]["pieces"][0]["b"] = str(10 ** 400)
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(net))
    a = load_model(str(path))
    ans = decide_tolerance(a, a, a.domain, Q(0), timeout_s=20)
    assert ans.verdict == "unknown" and ans.reason == BEYOND_FLOATS
    # the same network twice: a layer correspondence (exact, no float) proves it first
    code = main(["equiv", str(path), str(path), "--epsilon", "0", "--json", "--timeout", "20"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["certificate_kind"] == "correspondence"
    # a piece that never wins (the first one minus 1) breaks the correspondence: the engine
    other = json.loads(json.dumps(net))
    p0 = other["layers"][1]["units"][0]["pieces"][0]
    other["layers"][1]["units"][0]["pieces"].append(dict(p0, b=str(Fraction(p0["b"]) - 1)))
    path2 = tmp_path / "huge_more.json"
    path2.write_text(json.dumps(other))
    code = main(["equiv", str(path), str(path2), "--epsilon", "0", "--json", "--timeout", "20"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and out["reason"].endswith(BEYOND_FLOATS)


# ------------------------------------------------- ONNX and VNN-LIB (issue #36, fuzz_io.py)

import fuzz_io  # noqa: E402

# cases per format (in-process): about 500 in all, a few seconds
IO_CASES = {"onnx": 200, "vnnlib": 130, "vnnlib2": 100, "counterexample": 70}


@pytest.fixture(scope="module")
def io_seeds(tmp_path_factory):
    return fuzz_io.IOSeeds(str(tmp_path_factory.mktemp("io_seeds")))


def _io_report(case) -> str:
    return (f"{case.format} {case.seed!r} through {case.command!r} after {case.mutation}: "
            f"{case.failure}; exit {case.status}, stderr: {case.err!r}")


@pytest.mark.parametrize("fmt", sorted(IO_CASES))
def test_mutated_onnx_and_vnnlib_files_give_a_confirmed_answer_or_one_line(fmt, io_seeds,
                                                                           work):
    """Every case: an exit status in 0-3, no traceback, exit 2 with one line naming the file
    and nothing written; every sat / unsat / import / eval / export / replay answer on a
    still valid input confirmed by the independent readings of tests/fuzz_io.py."""
    cmds = [c for c in fuzz_io.io_commands() if c.format == fmt]
    assert cmds and io_seeds.of(fmt)

    @settings(max_examples=IO_CASES[fmt], deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(rng=st.randoms(use_true_random=False))
    def run(rng):
        cmd = fuzz_io.pick(rng, cmds)
        case = fuzz_io.run_io_case(cmd, rng.choice(io_seeds.of(fmt, cmd.name)), rng, work,
                                   io_seeds)
        assert case.failure is None, _io_report(case)

    run()


def test_every_command_that_reads_onnx_or_vnnlib_is_fuzzed():
    """The commands whose arguments name an ONNX network or a VNN-LIB file."""
    names = {(c.format, c.argv[0] if c.argv[0] != "vnnlib" else "vnnlib verify")
             for c in fuzz_io.io_commands()}
    for cmd in ("import", "info", "eval", "export-onnx", "check", "equiv", "search", "verify",
                "compile", "check-cert"):
        assert ("onnx", cmd) in names
    for fmt in ("vnnlib", "vnnlib2"):
        assert {(fmt, "check"), (fmt, "replay"), (fmt, "check-cert")} <= names
    assert ("vnnlib2", "vnnlib verify") in names and ("counterexample", "replay") in names


def test_the_seeds_are_valid_and_the_reference_agrees_with_onnxruntime(io_seeds):
    """The seed networks pass onnx.checker, and the exact reference interpreter agrees with
    onnxruntime's float evaluation (so the reference reads the operators as ONNX does)."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    for name, path in io_seeds.paths.items():
        m = onnx.load(path)
        assert fuzz_io.onnx_valid(m), name
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        inp = sess.get_inputs()[0]
        dtype = {"tensor(float)": np.float32, "tensor(double)": np.float64,
                 "tensor(float16)": np.float16}[inp.type]
        for x in fuzz_io.exact_points(random.Random(1)):
            x = tuple(Fraction(round(float(v) * 8), 8) for v in x)   # exact in float16
            got = sess.run(None, {inp.name: np.array([[float(v) for v in x]], dtype=dtype)})
            exact = fuzz_io.onnx_eval(m, list(x), drop_final_softmax=False) \
                if name != "softmax_final" else None
            if exact is None:
                continue
            for a, b in zip(np.asarray(got[0], dtype=np.float64).reshape(-1), exact):
                assert abs(a - float(b)) <= 1e-2 * max(1.0, abs(float(b))), (name, x)


def test_the_independent_checks_refuse_wrong_answers(io_seeds):
    """The confirmations can fail: a point outside the input set or missing the output
    constraint is not a counterexample, an unsat claim on a satisfiable property is refuted
    by z3, and a graph read with another weight differs from the reference."""
    import onnx
    m = onnx.load(io_seeds.paths["matmul_add"])
    sat = fuzz_io.read_prop_ref(dict((n, t) for n, t, _ in fuzz_io.vnnlib1_seeds())["box_y_ge"])
    unsat = fuzz_io.read_prop_ref(
        dict((n, t) for n, t, _ in fuzz_io.vnnlib1_seeds())["box_y_ge_unsat"])
    assert fuzz_io.confirm_unsat(m, unsat) is None
    assert "finds a counterexample" in fuzz_io.confirm_unsat(m, sat)
    assert "not a counterexample" in fuzz_io.confirm_sat(m, sat, [Fraction(2), Fraction(0)])
    assert "not a counterexample" in fuzz_io.confirm_sat(m, sat, [Fraction(0), Fraction(0)])
    # the X_01 of the naming bug: a name the reference does not give a coordinate
    with pytest.raises(fuzz_io.Invalid):
        fuzz_io.read_prop_ref("(declare-const X_0 Real)(declare-const X_01 Real)"
                              "(declare-const Y_0 Real)(assert (<= X_01 1))")
    # 2.0: an index outside the tensor
    with pytest.raises(fuzz_io.Invalid):
        fuzz_io.read_prop_ref("(vnnlib-version <2.0>)(declare-network f (declare-input X "
                              "real [2]) (declare-output Y real [1]))(assert (>= Y[1] 0.0))")


# regression tests of what the ONNX / VNN-LIB campaign found (each failed before its fix)

def _onnx_file(tmp_path, nodes, inits, opset=13, out_dim=1, name="net.onnx", opsets=None):
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                                                     [1, 2])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT,
                                                         [1, out_dim])], inits)
    m = helper.make_model(g, opset_imports=opsets or [helper.make_opsetid("", opset)])
    path = str(tmp_path / name)
    onnx.save(m, path)
    return path


def _w(name, vals):
    import numpy as np
    from onnx import numpy_helper
    return numpy_helper.from_array(np.array(vals, dtype=np.float32), name)


def _one_line_error(argv, capsys, *needles):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("exactmax: error: "), err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def _graph_cases():
    from onnx import helper
    W = _w("W", [[1, 0.5], [-1, 2]])
    b = _w("b", [0.25, 0])
    return {
        # a required input left empty (exit 70: 'NoneType' has no 'dtype')
        "missing-input": ([helper.make_node("MatMul", ["X", "W"], ["m"]),
                           helper.make_node("Add", ["m", ""], ["Y"])], [W],
                          "required input left empty"),
        # an attribute of the wrong type (exit 70: a list has no 'data_location')
        "attribute-type": ([helper.make_node("Constant", [], ["c"], value=1.5),
                            helper.make_node("MatMul", ["X", "W"], ["Y"])], [W],
                           "must be a tensor"),
        # Gemm's alpha infinite (exit 70: OverflowError in the exact conversion)
        "alpha-inf": ([helper.make_node("Gemm", ["X", "W", "b"], ["Y"],
                                        alpha=float("inf"))], [W, b], "not finite"),
        # an attribute the operator does not have was ignored (transb for transB)
        "unknown-attribute": ([helper.make_node("Gemm", ["X", "W", "b"], ["Y"], transb=1)],
                              [W, b], "no attribute 'transb'"),
        # a name defined twice: the second definition won silently
        "initializer-twice": ([helper.make_node("MatMul", ["X", "W"], ["Y"])],
                              [W, _w("W", [[2, 2], [2, 2]])], "defined twice"),
        "output-twice": ([helper.make_node("MatMul", ["X", "W"], ["m"]),
                          helper.make_node("Neg", ["m"], ["m"]),
                          helper.make_node("Identity", ["m"], ["Y"])], [W],
                         "already defined"),
        # Gemm's C of shape (2, 2) broadcast with A B of shape (1, 2): 4 outputs, not 2
        "gemm-c-shape": ([helper.make_node("Gemm", ["X", "W", "C"], ["Y"])],
                         [W, _w("C", [[0, 0], [1, 1]])], "does not broadcast"),
    }


@pytest.mark.parametrize("case", sorted(_graph_cases()))
def test_malformed_onnx_graphs_are_refused_in_one_line(case, tmp_path, capsys):
    nodes, inits, needle = _graph_cases()[case]
    path = _onnx_file(tmp_path, nodes, inits, out_dim=2)
    for argv in (["import", path, "-o", str(tmp_path / "o.json")], ["info", path]):
        _one_line_error(argv, capsys, "net.onnx", needle)
    assert not (tmp_path / "o.json").exists()


def test_the_default_opset_imported_twice_is_refused(tmp_path, capsys):
    from onnx import helper
    path = _onnx_file(tmp_path, [helper.make_node("MatMul", ["X", "W"], ["Y"])],
                      [_w("W", [[1, 0], [0, 1]])], out_dim=2,
                      opsets=[helper.make_opsetid("", 13), helper.make_opsetid("", 8)])
    _one_line_error(["info", path], capsys, "imported 2 times")


def test_a_huge_input_shape_is_refused_not_allocated(tmp_path, capsys):
    """An input of shape [1, 2^40] made the reader allocate (n + 1) x n entries (exit 70:
    'array is too big')."""
    import onnx
    from onnx import helper
    path = _onnx_file(tmp_path, [helper.make_node("Identity", ["X"], ["Y"])], [], out_dim=2)
    m = onnx.load(path)
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 2 ** 40
    onnx.save(m, path)
    _one_line_error(["info", path], capsys, "1099511627776 numbers")


def test_a_reduction_of_a_constant_is_read(tmp_path, capsys):
    """ReduceMax over every axis of a constant gave a bare scalar, which the next node could
    not use (exit 70: 'fmpq' has no 'shape'); it is the constant's maximum."""
    import numpy as np
    from onnx import helper, numpy_helper
    k = numpy_helper.from_array(np.array([[0.5, 3.0], [-1.0, 2.0]], dtype=np.float32), "k")
    path = _onnx_file(tmp_path, [helper.make_node("ReduceMax", ["k"], ["s"], keepdims=0),
                                 helper.make_node("Mul", ["X", "s"], ["Y"])], [k], opset=13,
                      out_dim=2)
    assert main(["eval", path, "--input", "1/3,-1/2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["output"] == ["1", "-3/2"]


def test_replay_of_a_margin_beyond_floats(tmp_path, capsys):
    """replay printed the margin's float (exit 70 beyond 1.8e308); now 'about 1e+400'."""
    import onnx
    io_dir = tmp_path / "seeds"
    io_dir.mkdir()
    net = str(io_dir / "m.onnx")
    onnx.save(fuzz_io.onnx_seeds()["matmul_add"], net)
    prop = tmp_path / "p.vnnlib"
    prop.write_text("(declare-const X_0 Real)(declare-const X_1 Real)(declare-const Y_0 Real)"
                    "(assert (<= X_0 1))(assert (>= X_0 -1))(assert (<= X_1 1))"
                    "(assert (>= X_1 -1))(assert (>= Y_0 -1" + "0" * 400 + "))")
    y = fuzz_io.onnx_eval(onnx.load(net), [Fraction(0), Fraction(0)])
    cex = tmp_path / "cex.txt"
    cex.write_text(fuzz_io._cex_text((Fraction(0), Fraction(0)), y))
    assert main(["replay", net, str(prop), str(cex)]) == 0
    assert "about 1e+400" in capsys.readouterr().out


@pytest.mark.parametrize("text,needle", [
    ("(assert (>= Y[0] 1.5\u00e9))", ":3:21: unexpected character '\u00e9'"),
    ("(assert (>= Y[0] 99999999999999999999999))",
     ":3:18: the number 99999999999999999999999 is beyond what the vnnlib package reads"),
    ("(assert (>= Y[0] 1" + "0" * 400 + ".0))", ":3:18: the number 100000000000...0000.0 "
     "(403 chars) is beyond"),
])
def test_vnnlib2_text_the_package_cannot_convert_is_one_line(text, needle, tmp_path, capsys):
    """The vnnlib package raised UnicodeDecodeError on a non-ASCII word, IndexError 'stoll'
    on an integer beyond 64 bits and 'stod' on a real beyond float64 (exit 70); now one line
    with line and column."""
    p = tmp_path / "q.vnnlib"
    p.write_text("(vnnlib-version <2.0>)\n(declare-network f (declare-input X real [2]) "
                 "(declare-output Y real [1]))\n" + text + "\n", encoding="utf-8")
    net = os.path.join(ROOT, "examples", "small_relu.onnx")
    _one_line_error(["check", net, str(p)], capsys, "q.vnnlib" + needle)
    _one_line_error(["vnnlib", "verify", str(p), "--network", f"f={net}"], capsys, needle)


def test_maxpool_with_a_zero_stride_is_refused(tmp_path, capsys):
    """strides [0] divided by zero (exit 70)."""
    from onnx import helper
    nodes = [helper.make_node("Unsqueeze", ["X"], ["u"], axes=[1]),
             helper.make_node("MaxPool", ["u"], ["p"], kernel_shape=[1], strides=[0]),
             helper.make_node("Squeeze", ["p"], ["Y"], axes=[1])]
    path = _onnx_file(tmp_path, nodes, [], opset=11, out_dim=2)
    _one_line_error(["info", path], capsys, "positive strides")


@pytest.mark.parametrize("dim", [0, "K", None])
def test_an_input_dimension_that_is_not_a_number_is_refused(dim, tmp_path, capsys):
    """A feature dimension of 0, symbolic or unknown was read as 1 (a graph onnx.checker
    accepts, e.g. Identity to an output of that shape, was imported as one input)."""
    import onnx
    from onnx import helper
    path = _onnx_file(tmp_path, [helper.make_node("Identity", ["X"], ["Y"])], [], out_dim=2)
    m = onnx.load(path)
    for vi in (m.graph.input[0], m.graph.output[0]):
        d = vi.type.tensor_type.shape.dim[1]
        if dim == 0:
            d.dim_value = 0
        elif dim == "K":
            d.dim_param = "K"
        else:
            d.Clear()
    onnx.save(m, path)
    _one_line_error(["info", path], capsys, "dimension 1 ")
    # the leading (batch) dimension may stay symbolic
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 2
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    onnx.save(m, path)
    assert main(["info", path]) == 0


def test_check_of_a_case_without_output_constraints(tmp_path, capsys):
    """A disjunct with no output row (here an input constraint outside the box) crashed the
    relaxed-leaf builder (exit 70: 'NoneType' object is not subscriptable); it is handed to
    the cell builder: unsat (the input set is empty), and sat where the set is not empty."""
    net = os.path.join(ROOT, "examples", "small_relu.onnx")
    box = ("(declare-const X_0 Real)(declare-const X_1 Real)(declare-const Y_0 Real)"
           "(assert (<= X_0 1))(assert (>= X_0 -1))(assert (<= X_1 1))(assert (>= X_1 -1))")
    p = tmp_path / "p.vnnlib"
    p.write_text(box + "(assert (or (>= X_1 1.5) (>= Y_0 100)))")
    assert main(["check", net, str(p), "--workers", "1"]) == 0
    p.write_text(box + "(assert (or (>= X_1 0.5) (>= Y_0 100)))")
    assert main(["check", net, str(p), "--workers", "1"]) == 1
    capsys.readouterr()


def test_serialised_assignments_beyond_float64_are_infinite_not_a_crash(tmp_path, capsys):
    """vnnlib verify --serialise-assignments wrote float(v) of each value: an output of about
    10^600 raised OverflowError (exit 70); it is written as inf and counted as rounded."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.array([[1e300], [0.0]]), "W")
    g = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["Y"])], "g",
                          [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [1, 2])],
                          [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, [1, 1])], [w])
    net = str(tmp_path / "big.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), net)
    big = "1" + "0" * 300 + ".0"
    q = tmp_path / "q.vnnlib"
    q.write_text("(vnnlib-version <2.0>)\n(declare-network f (declare-input X real [2]) "
                 "(declare-output Y real [1]))\n"
                 f"(assert (and (<= {big} X[0]) (<= X[0] {big}) (<= 0.0 X[1]) (<= X[1] 0.0)))\n"
                 "(assert (>= Y[0] 0.0))\n")
    out = tmp_path / "assign"
    code = main(["vnnlib", "verify", str(q), "--network", f"f={net}",
                 "--serialise-assignments", str(out)])
    cap = capsys.readouterr()
    assert code == 0 and cap.out.splitlines()[0] == "sat", cap.err
    y = numpy_helper.to_array(onnx.load_tensor(str(out / "Y.pb")))
    assert y.reshape(-1)[0] == np.inf


def test_a_nul_in_a_vnnlib2_query_is_refused_not_a_cut(tmp_path, capsys):
    """A wrong answer the campaign found: the vnnlib package reads the text as a C string,
    so a NUL ended the query there and every assertion after it vanished silently: `check`
    said sat (x = (0, 0), f(x) = 1) for a property whose output condition f(x) - 2 x_0 >= 50
    no input meets, and `replay` called a point valid.  Now the NUL is refused, in one line
    with its line and column, and the property without it is unsat."""
    net = os.path.join(ROOT, "examples", "small_relu.onnx")
    head = ("(vnnlib-version <2.0>)\n(declare-network f (declare-input X real [2]) "
            "(declare-output Y real [1]))\n(assert (and (>= X[0] -1.0) (<= X[0] 1.0) "
            "(>= X[1] -1.0) (<= X[1] 1.0)))\n")
    out = "(assert (>= (- Y[0] (* 2.0 X[0])) 50.0))\n"
    q = tmp_path / "q.vnnlib"
    q.write_text(head + "\x00" + out)
    _one_line_error(["check", net, str(q), "--workers", "1"], capsys,
                    "q.vnnlib:4:1: a NUL character")
    cex = tmp_path / "cex.txt"
    cex.write_text("sat\n((X_0 0)\n (X_1 0)\n (Y_0 0))\n")
    _one_line_error(["replay", net, str(q), str(cex)], capsys, "q.vnnlib:4:1: a NUL")
    q.write_text(head + out)
    assert main(["check", net, str(q), "--workers", "1"]) == 0
    assert main(["replay", net, str(q), str(cex)]) == 1
    capsys.readouterr()


def _silent_cases():
    import numpy as np
    from onnx import helper, numpy_helper
    W = _w("W", [[1, 0.5], [-1, 2]])
    axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
    return {
        # at opset 18 ReduceMax's axes is an input: the attribute was ignored (all axes)
        "reducemax-axes-attribute": (18, [
            helper.make_node("MatMul", ["X", "W"], ["m"]),
            helper.make_node("Unsqueeze", ["m", "axes"], ["u"]),
            helper.make_node("ReduceMax", ["u"], ["r"], axes=[1], keepdims=0),
            helper.make_node("Identity", ["r"], ["Y"])], [W, axes],
            "axes is an input from opset 18"),
        # before opset 13 Unsqueeze's axes is an attribute: the input was ignored
        "unsqueeze-axes-input": (11, [
            helper.make_node("Unsqueeze", ["X", "axes"], ["u"], axes=[0]),
            helper.make_node("Squeeze", ["u"], ["Y"], axes=[0])], [axes], "takes 1 input"),
        # Reshape to [-2, 2] was read as [-1, 2]
        "reshape-minus-two": (13, [
            helper.make_node("Reshape", ["X", "shape"], ["Y"])],
            [numpy_helper.from_array(np.array([-2, 2], dtype=np.int64), "shape")],
            "no other negative size"),
        # an axis named twice (ONNX: an error) was inserted twice / squeezed once
        "repeated-axes": (11, [
            helper.make_node("Unsqueeze", ["X"], ["u"], axes=[0, 0]),
            helper.make_node("Squeeze", ["u"], ["Y"], axes=[0, 1])], [], "an axis twice"),
        # Dropout in training mode (random) was read as the identity
        "dropout-training": (13, [
            helper.make_node("Dropout", ["X", "ratio", "training"], ["Y"])],
            [_w("ratio", 0.5), numpy_helper.from_array(np.array(True), "training")],
            "training mode"),
    }


@pytest.mark.parametrize("case", sorted(_silent_cases()))
def test_an_onnx_input_or_attribute_that_would_be_ignored_is_refused(case, tmp_path, capsys):
    """Graphs onnx.checker refuses, which the reader used to import by ignoring an input or
    an attribute (a different network than the file states, exit 0)."""
    opset, nodes, inits, needle = _silent_cases()[case]
    path = _onnx_file(tmp_path, nodes, inits, opset=opset, out_dim=2)
    _one_line_error(["import", path, "-o", str(tmp_path / "o.json")], capsys, needle)
    assert not (tmp_path / "o.json").exists()
