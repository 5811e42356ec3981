"""The exit status carries the verdict whatever happens to standard output, output paths are
checked before any work, and a failed write is an input/output error (exit 2, one line),
never a bug, with the verdict still printed."""

import json
import os
import subprocess
import sys

import pytest

from exactmax.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
TENT = os.path.join(EXAMPLES, "tent.json")
BROKEN = os.path.join(EXAMPLES, "tent_broken.transformer.json")


def _exactmax(args, stdout):
    return subprocess.run([sys.executable, "-m", "exactmax", *args], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=120)


@pytest.mark.parametrize("args, status", [
    (["verify", TENT, "--transformer", BROKEN], 1),     # refuted
    (["verify", TENT], 0),                               # proved
    (["verify", TENT, "--transformer", BROKEN, "--json"], 1),
])
def test_a_reader_that_closes_early_does_not_change_the_verdicts_status(args, status):
    """`exactmax verify ... | true`: the reader is gone before exactmax prints."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = _exactmax(args, w)
    finally:
        os.close(w)
    assert p.returncode == status, p.stderr
    assert "Traceback" not in p.stderr


def test_a_full_standard_output_is_an_input_output_error():
    with open("/dev/full", "w") as full:
        p = _exactmax(["verify", TENT], full)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "No space left" in p.stderr


def test_an_unwritable_certificate_path_is_refused_before_any_work(tmp_path, capsys,
                                                                   monkeypatch):
    import exactmax.prove.verify as verify

    def no_work(*a, **k):
        raise AssertionError("the proof started before the output path was checked")
    monkeypatch.setattr(verify, "verify_equal", no_work)
    for bad in (str(tmp_path / "missing" / "c.json"), str(tmp_path)):
        assert main(["verify", TENT, "--cert", bad, "--no-search"]) == 2
        out = capsys.readouterr()
        assert out.out == "" and out.err.count("\n") == 1 and bad in out.err
    for cmd in (["compile", TENT, "-o", str(tmp_path / "missing" / "t.json")],
                ["equiv", TENT, TENT, "--cert", str(tmp_path / "missing" / "c.json")]):
        assert main(cmd) == 2
        assert "does not exist" in capsys.readouterr().err


def test_a_failed_certificate_write_still_prints_the_verdict(tmp_path, capsys, monkeypatch):
    """The folder is writable when checked and fails when written (a disk filling up in
    between): the verdict is printed, then one error line, exit 2, and no file."""
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fd, mode):
            self.f = real_fdopen(fd, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            raise OSError(28, "No space left on device")
    cert = tmp_path / "c.json"
    monkeypatch.setattr(os, "fdopen", Full)
    assert main(["verify", TENT, "--cert", str(cert), "--json"]) == 2
    out = capsys.readouterr()
    rep = json.loads(out.out)
    assert rep["verdict"] == "proved" and rep["certificate"] is None
    assert "No space left" in rep["certificate_error"]
    assert out.err.count("\n") == 1 and "not written" in out.err
    assert not cert.exists() and os.listdir(tmp_path) == []


def test_what_exactmax_writes_with_ten_thousand_digit_numbers_it_reads_back(tmp_path, capsys):
    """Numbers pass through FLINT's text, never Python's int(): no 4300-digit limit."""
    big = "7" * 10_000
    net = {"format": "exactmax/maxout", "version": 1, "input_dim": 1,
           "layers": [{"units": [{"pieces": [{"w": [f"{big}/3{big}"], "b": "1/2"},
                                             {"w": ["-1"], "b": "LITERAL"}]},
                                 {"pieces": [{"w": ["1"], "b": "0"}]}]}],
           "output": {"W": [["1", f"-{big}"]], "b": [big]},
           "domain": {"box": {"lower": ["-1"], "upper": ["1"]}}}
    path, tf, cert = tmp_path / "big.json", tmp_path / "big.tf.json", tmp_path / "c.json"
    path.write_text(json.dumps(net).replace('"LITERAL"', big))   # a JSON integer literal
    assert main(["compile", str(path), "-o", str(tf)]) == 0
    assert main(["info", str(tf), "--json"]) == 0
    assert main(["eval", str(tf), "--input", "1/3"]) == 0
    assert main(["verify", str(path), "--transformer", str(tf), "--cert", str(cert)]) == 0
    assert main(["check-cert", str(cert)]) == 0
    assert main(["equiv", str(path), str(tf), "--strategy", "monolithic", "--no-search"]) == 0
    out = capsys.readouterr()
    assert "error" not in out.err


@pytest.mark.parametrize("argv", [
    ["compile", "{net}", "-o", "{net}"],
    ["compile", "{net}", "-o", "{link}"],
    ["verify", "{net}", "--cert", "{net}"],
    ["verify", "{net}", "--transformer", "{tf}", "--cert", "{tf}"],
    ["equiv", "{net}", "{tf}", "--cert", "{tf}"],
    ["regions", "{tf}", "--cert", "{tf}"],
    ["regions", "{tf}", "--save-model", "{tf}"],
    ["regions", "{tf}", "--cert", "{c}", "--save-model", "{c}"],
])
def test_no_command_overwrites_its_own_input(tmp_path, capsys, argv):
    import shutil
    net, tf = tmp_path / "net.json", tmp_path / "tf.json"
    shutil.copy(TENT, net)
    assert main(["compile", str(net), "-o", str(tf)]) == 0
    os.symlink(net, tmp_path / "link.json")
    before = {p: p.read_bytes() for p in (net, tf)}
    capsys.readouterr()
    args = [a.format(net=net, tf=tf, link=tmp_path / "link.json", c=tmp_path / "c.json")
            for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "names the same file as" in err
    assert {p: p.read_bytes() for p in (net, tf)} == before
    assert not (tmp_path / "c.json").exists()


@pytest.mark.parametrize("signum, status", [(2, 130), (15, 143)])
def test_a_signal_stops_a_long_proof_within_a_second_wherever_it_lands(tmp_path, signum,
                                                                       status):
    """SIGINT / SIGTERM at several moments of a long monolithic proof (compile, search, cells,
    the final z3 query): exit 130 / 143 at once, "interrupted", no certificate, no temporary
    file.  (z3 would otherwise cancel only its running check and let the proof go on.)"""
    import random
    import signal
    import time
    rng = random.Random(1000 * signum)
    layers = [{"units": [{"pieces": [{"w": [f"{rng.randint(-8, 8)}/{rng.randint(1, 16)}"
                                            for _ in range(width)],
                                      "b": f"{rng.randint(-8, 8)}/{rng.randint(1, 16)}"}
                                     for _ in range(3)]} for _ in range(8)]}
              for width in (4, 8, 8)]
    net = tmp_path / "hard.json"
    net.write_text(json.dumps({"format": "exactmax/maxout", "version": 1, "input_dim": 4,
                               "layers": layers,
                               "domain": {"box": {"lower": [-1] * 4, "upper": [1] * 4}}}))
    cert = tmp_path / "c.json"
    # a signal before the interpreter has started kills it by the signal's default action (exit
    # -signum, nothing written yet); on a loaded machine start-up can take longer than 0.3 s
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "exactmax", "--help"], capture_output=True)
    start = 2 * (time.monotonic() - t0)
    for delay, extra in ((0.3, []), (1.5, []), (2.5, ["--max-leaves", "1"])):
        delay += start
        p = subprocess.Popen([sys.executable, "-m", "exactmax", "verify", str(net),
                              "--strategy", "monolithic", "--timeout", "60", "--cert",
                              str(cert)] + extra, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        assert p.poll() is None, "the proof ended before the signal: make it harder"
        t0 = time.monotonic()
        p.send_signal(signum)
        out, err = p.communicate(timeout=30)
        assert p.returncode == status and time.monotonic() - t0 < 1.5, err
        assert err.splitlines()[-1].startswith("exactmax: interrupted")
        assert "Traceback" not in err and out == ""
        assert os.listdir(tmp_path) == ["hard.json"]


@pytest.mark.parametrize("version", [-1, -2 ** 63, 10 ** 30, "1/2", "LONG"])
def test_models_embedded_in_certificates_are_checked_as_model_files_are(tmp_path, capsys,
                                                                         version):
    cert = tmp_path / "c.json"
    assert main(["verify", TENT, "--cert", str(cert)]) == 0
    c = json.loads(cert.read_text())
    c["models"]["a"]["model"]["version"] = version
    text = json.dumps(c).replace('"LONG"', '"1/' + "3" * 10 ** 6 + '"')   # 10^6 digits
    cert.write_text(text)
    capsys.readouterr()
    assert main(["check-cert", str(cert)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "models.a.model.version" in err


# ------------------------------------------------------------------ what a verdict is about

def _write(path, obj):
    path.write_text(json.dumps(obj))
    return str(path)


EMPTY = {"format": "exactmax/domain", "version": 1,
         "polyhedron": {"A": [[1, 0], [-1, 0]], "b": [0, -1]}}        # x0 <= 0 and x0 >= 1
POINT = {"format": "exactmax/domain", "version": 1,
         "box": {"lower": ["1/3", "1/5"], "upper": ["1/3", "1/5"]}}


def test_an_empty_domain_is_vacuous_never_proved_or_valid(tmp_path, capsys):
    from exactmax.io import load_domain, load_model
    from exactmax.io.certificates import certificate_to_json
    from exactmax.kernel.certificate import Empty
    empty = _write(tmp_path / "empty.json", EMPTY)
    assert main(["equiv", TENT, BROKEN, "--domain", empty]) == 5
    assert capsys.readouterr().out.startswith("vacuous: the domain is empty")
    # a certificate over it, one Empty leaf: 0 - x0 >= 0 plus -1 + x0 >= 0 gives -1 >= 0
    cert = certificate_to_json(load_model(TENT), load_model(BROKEN), load_domain(empty),
                               Empty(((0, 1), (1, 1))), {})
    c = _write(tmp_path / "c.json", cert)
    assert main(["check-cert", c, "--models", TENT, BROKEN]) == 5
    out = capsys.readouterr().out
    assert "vacuous" in out and "valid" not in out.replace("vacuous", "")
    assert main(["check-cert", c, "--json"]) == 5
    rep = json.loads(capsys.readouterr().out)
    assert rep["verdict"] == "vacuous" and rep["about"]["domain"]["empty"] is True


def test_a_one_point_domain_is_reported_as_lower_dimensional(tmp_path, capsys):
    point = _write(tmp_path / "point.json", POINT)
    assert main(["equiv", TENT, BROKEN, "--domain", point, "--no-search", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["about"]["domain"] == {"kind": "box", "dimension": 2, "empty": False,
                                      "full_dimensional": False}
    assert len(rep["sha256"]["domain"]) == 64
    assert main(["equiv", TENT, BROKEN, "--domain", point, "--no-search"]) == 0
    assert "lower-dimensional" in capsys.readouterr().out


def test_check_cert_names_and_binds_the_domain(tmp_path, capsys):
    cert, other = tmp_path / "c.json", _write(tmp_path / "d.json", POINT)
    assert main(["verify", TENT, "--cert", str(cert)]) == 0
    capsys.readouterr()
    assert main(["check-cert", str(cert), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["sha256"]["domain"] == json.loads(cert.read_text())["domain"]["sha256"]
    assert rep["about"]["domain"]["kind"] == "box" and rep["about"]["domain"]["dimension"] == 2
    assert main(["check-cert", str(cert), "--domain", other]) == 1
    assert "not the domain the certificate speaks about" in capsys.readouterr().out


def test_a_proof_by_z3_alone_has_its_own_exit_status(tmp_path, capsys):
    """Tied keys with different values (a head that jumps): no certificate can say it, z3
    proves the Transformer equal to itself; exit 4, not 0."""
    from mutants import value_differs_on_one_token
    from exactmax.construct.transformer import compile_transformer
    from exactmax.io import load_model
    from exactmax.io.models import model_to_json
    net = load_model(TENT)
    tf = _write(tmp_path / "tf.json", model_to_json(
        value_differs_on_one_token(net, compile_transformer(net))))
    assert main(["equiv", tf, tf, "--strategy", "monolithic", "--no-search", "--json"]) == 4
    assert json.loads(capsys.readouterr().out)["trust"] == "solver-only"


def test_a_flat_polyhedron_is_shown_lower_dimensional_by_checked_witnesses(tmp_path, capsys):
    """x0 + x1 = 0 inside [-1, 1]^2, written as two inequalities: the certificate carries a
    member point and multipliers showing the two rows are equalities; check-cert checks
    them with the kernel (no solver), and refuses them tampered."""
    flat = _write(tmp_path / "flat.json", {
        "format": "exactmax/domain", "version": 1,
        "polyhedron": {"A": [[1, 1], [-1, -1], [1, 0], [-1, 0], [0, 1], [0, -1]],
                       "b": [0, 0, 1, 1, 1, 1]}})
    cert = tmp_path / "c.json"
    assert main(["equiv", TENT, TENT, "--domain", flat, "--cert", str(cert), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["about"]["domain"]["full_dimensional"] is False
    c = json.loads(cert.read_text())
    assert set(c["domain"]["witness"]) == {"member", "flat"}
    assert main(["check-cert", str(cert), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["about"]["domain"]["full_dimensional"] is False
    for key, bad in (("member", ["1", "1"]), ("flat", ["1", "0", "0", "0", "0", "0"])):
        t = json.loads(json.dumps(c))
        t["domain"]["witness"][key] = bad
        # the witness is no part of the claim (as for the Coq checker): set aside, the
        # facts found afresh, and said
        assert main(["check-cert", _write(tmp_path / "t.json", t), "--json"]) == 0
        about = json.loads(capsys.readouterr().out)["about"]["domain"]
        assert about["full_dimensional"] is False and "witness_rejected" in about
    for keys in (["member"], ["flat"], ["member", "flat", "empty"]):   # incomplete or mixed
        t = json.loads(json.dumps(c))
        t["domain"]["witness"] = {k: c["domain"]["witness"].get(k, ["0"] * 6) for k in keys}
        assert main(["check-cert", _write(tmp_path / "t.json", t), "--json"]) == 0
        about = json.loads(capsys.readouterr().out)["about"]["domain"]
        assert about["full_dimensional"] is False and "witness_rejected" in about


def test_a_row_of_zeros_does_not_make_a_domain_flat(tmp_path, capsys):
    """0 . x <= 0 holds everywhere: multipliers on it show nothing, and a point strictly
    inside every other row is interior."""
    from exactmax.kernel.errors import CheckFailed
    from exactmax.kernel.polyhedron import Polyhedron, check_flat, check_interior
    from exactmax.kernel.rational import Q
    P = Polyhedron(((Q(-1), Q(0)), (Q(0), Q(-1)), (Q(1), Q(1)), (Q(0), Q(0))),
                   (Q(0), Q(0), Q(1), Q(0)), 2)
    with pytest.raises(CheckFailed):
        check_flat(P, (Q(0), Q(0), Q(0), Q(1)))
    check_interior(P, (Q(1, 4), Q(1, 4)))
    dom = _write(tmp_path / "d.json", {"format": "exactmax/domain", "version": 1,
                                       "polyhedron": {"A": [[-1, 0], [0, -1], [1, 1], [0, 0]],
                                                      "b": [0, 0, 1, 0]}})
    assert main(["equiv", TENT, TENT, "--domain", dom, "--json", "--no-search"]) == 0
    assert json.loads(capsys.readouterr().out)["about"]["domain"]["full_dimensional"] is True
