"""The construction theorem in Coq (#19): construct (proofs/Construction.v) is entry for entry
the default Python construction, and a file written by export_construction proves a compiled
Transformer equal to its network through construct_sound alone; a Transformer one weight away
from the construction, a gate constant too small for the domain and a domain wider than the
gates allow are each rejected by coqc."""

from dataclasses import replace
import os
import random
import shutil
import subprocess

import pytest

from exactmax.construct.transformer import CompileOptions, compile_transformer
from exactmax.export.coq import ExportUnsupported
from exactmax.export.coq_construction import construction_of, export_construction, gates_of
from exactmax.kernel.affine import Affine
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from exactmax.kernel.polyhedron import Box, Polyhedron
from exactmax.kernel.rational import Q
from exactmax.kernel.transformer import FeedForward

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROOFS = os.path.join(ROOT, "proofs")


def network(seed, widths, ranks, out=0, domain=None):
    """A random network of the given widths (d, N_1, ..)  and largest ranks, units of mixed
    ranks, an output map of ``out`` rows (none for 0)."""
    r = random.Random(seed)

    def q():
        return Q(r.randint(-5, 5), r.choice([1, 1, 2, 3]))
    layers = []
    for l in range(1, len(widths)):
        layers.append(Layer(tuple(
            Unit(tuple(Piece(tuple(q() for _ in range(widths[l - 1])), q())
                       for _ in range(r.randint(1, ranks[l - 1]))))
            for _ in range(widths[l]))))
    output = None
    if out:
        output = Affine(tuple(tuple(q() for _ in range(widths[-1])) for _ in range(out)),
                        tuple(q() for _ in range(out)), widths[-1])
    d = widths[0]
    if domain is None:
        domain = Box(tuple(Q(-1) for _ in range(d)), tuple(Q(r.randint(1, 2), 2) for _ in range(d)))
    return MaxoutNetwork(d, tuple(layers), output, domain)


TRIANGLE = Polyhedron(((Q(1), Q(1)), (Q(-1), Q(0)), (Q(0), Q(-1)), (Q(1), Q(-2))),
                      (Q(1), Q(1), Q(1), Q(2)), 2)

NETS = {
    "deep_out": network(3, [2, 4, 2, 3], [2, 3, 1], out=1),
    "shrinking": network(2, [3, 1, 2], [1, 4], out=2),
    "one_layer": network(4, [4, 2], [3], out=5),
    "poly": network(5, [2, 3, 2], [3, 2], domain=TRIANGLE),
    "poly_one_layer": network(6, [2, 3], [3], out=2, domain=TRIANGLE),
}


def test_the_gates_are_read_back_and_the_construction_recognised():
    for net in NETS.values():
        c = compile_transformer(net)
        assert gates_of(net, c.transformer) == c.gates
        assert construction_of(net, c.transformer, net.domain) == c.gates
        merged = compile_transformer(net, options=CompileOptions(merged=True)).transformer
        assert (construction_of(net, merged, net.domain) is None) == (len(net.layers) > 1)


def _one_weight_off(tf):
    """The Transformer with one entry of the first gate feed-forward's W1 changed by 1/7."""
    ff = tf.sublayers[0]
    W = [list(r) for r in ff.inner.W]
    W[0][0] += Q(1, 7)
    inner = replace(ff.inner, W=tuple(tuple(r) for r in W))
    return replace(tf, sublayers=(FeedForward(inner, ff.outer),) + tf.sublayers[1:])


def test_python_refuses_what_is_not_the_construction():
    net = NETS["deep_out"]
    tf = _one_weight_off(compile_transformer(net).transformer)
    assert construction_of(net, tf, net.domain) is None
    with pytest.raises(ExportUnsupported):
        export_construction(net, tf)


needs_coq = pytest.mark.skipif(shutil.which("coqc") is None, reason="coqc is not installed")


@pytest.fixture(scope="module")
def library():
    r = subprocess.run(["make", "-C", PROOFS], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def coqc(tmp_path, name, text):
    path = tmp_path / f"{name}.v"
    path.write_text(text)
    return subprocess.run(["coqc", "-Q", PROOFS, "ExactMax", "-no-glob", path.name],
                          cwd=tmp_path, capture_output=True, text=True)


@needs_coq
@pytest.mark.parametrize("name,packed", [(n, False) for n in sorted(NETS)]
                         + [("deep_out", True), ("poly", True)])
def test_coq_accepts_the_construction(tmp_path, library, name, packed):
    net = NETS[name]
    r = coqc(tmp_path, "NetEquiv", export_construction(net, packed=packed) +
             "\nPrint Assumptions net_equiv.\n")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ClassicalDedekindReals.sig_forall_dec" in r.stdout
    # the Reals' two axioms, and the primitive integers the sparse matrices' columns are
    axioms = [l.split()[0] for l in r.stdout.split("Axioms:")[1].splitlines()
              if l and not l[0].isspace()]
    primitive = {n for p in ("int", "eqb", "add", "sub", "land", "lsr", "ltb", "lsl", "lor", "lxor",
                             "mul")
                 for n in (p, f"PrimInt63.{p}")} | {"PArray.array", "PArray.get", "PArray.length",
                                                     "array", "get", "length"}
    assert set(axioms) <= {"ClassicalDedekindReals.sig_forall_dec",
                           "FunctionalExtensionality.functional_extensionality_dep"} | primitive, r.stdout


@needs_coq
@pytest.mark.parametrize("packed", [False, True])
def test_coq_rejects_one_weight_off(tmp_path, library, packed):
    net = NETS["deep_out"]
    tf = _one_weight_off(compile_transformer(net).transformer)
    r = coqc(tmp_path, "Tampered", export_construction(net, tf, decide=False, packed=packed))
    assert r.returncode != 0 and "net_b = construct net_a gates" in r.stderr + r.stdout


@needs_coq
@pytest.mark.parametrize("name", ["deep_out", "poly"])
def test_coq_rejects_a_gate_too_small(tmp_path, library, name):
    net = NETS[name]
    c = compile_transformer(net)
    # the smallest sound C_1 is the bound; below it by 1/2^10 the gates do not hold
    bound = c.bounds[0].gate
    gates = (bound - Q(1, 1024),) + c.gates[1:]
    tf = compile_transformer(net, options=CompileOptions(gates=gates)).transformer
    assert construction_of(net, tf, net.domain) == gates
    r = coqc(tmp_path, "SmallGate", export_construction(net, tf))
    assert r.returncode != 0 and "gates_ok" in r.stderr + r.stdout


@needs_coq
def test_coq_rejects_a_wider_domain(tmp_path, library):
    net = NETS["deep_out"]
    tf = compile_transformer(net).transformer
    wide = Box(tuple(v - 2 for v in net.domain.lower), tuple(v + 2 for v in net.domain.upper))
    r = coqc(tmp_path, "Wide", export_construction(net, tf, domain=wide))
    assert r.returncode != 0 and "gates_ok" in r.stderr + r.stdout


EXAMPLES = os.path.join(ROOT, "examples")


@needs_coq
def test_the_command_line(tmp_path, library, capsys):
    """exactmax.export.coq_construction.main: accepted (0), a domain wider than the gates allow
    rejected by coqc with its error in one line (1), a Transformer one weight away from the
    construction refused in Python (2)."""
    import json
    from exactmax.cli import main as cli
    from exactmax.export.coq_construction import main
    net = os.path.join(EXAMPLES, "maxout_d3_w4_r3.json")
    tf = tmp_path / "m.tf.json"
    assert cli(["compile", net, "-o", str(tf)]) == 0
    capsys.readouterr()
    out = tmp_path / "M.v"
    assert main([net, "--transformer", str(tf), "-o", str(out), "--check", "--json",
                 "--coq-lib", PROOFS]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["coq"] == "accepted" and r["v_bytes"] == out.stat().st_size
    wide = tmp_path / "wide.json"
    wide.write_text(json.dumps({"format": "exactmax/domain", "version": 1,
                                "box": {"lower": ["-3", "-1", "-1"], "upper": ["1", "1", "1"]}}))
    assert main([net, "--transformer", str(tf), "--domain", str(wide), "-o",
                 str(tmp_path / "W.v"), "--check", "--coq-lib", PROOFS]) == 1
    line = capsys.readouterr().out.strip()
    assert "\n" not in line and "gates_ok" in line and line.startswith("coqc rejected")
    d = json.loads(tf.read_text())
    W1 = d["sublayers"][0]["feedforward"]["W1"]
    W1[0][0] = "1/7" if W1[0][0] != "1/7" else "2/7"
    bad = tmp_path / "bad.tf.json"
    bad.write_text(json.dumps(d))
    assert main([net, "--transformer", str(bad), "-o", str(tmp_path / "B.v")]) == 2
    assert "not the default construction" in capsys.readouterr().err


@needs_coq
def test_export_coq_construction_on_the_command_line(tmp_path, library, capsys):
    """exactmax export-coq --construction NET -o X.v --check: the library located and checked
    current as for certificates, Print Assumptions net_equiv checked against the allow-list;
    a certificate and --construction together, or neither, are a usage error."""
    import json
    from exactmax.cli import main
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tent = os.path.join(root, "examples", "tent.json")
    out = str(tmp_path / "TentC.v")
    assert main(["export-coq", "--construction", tent, "-o", out, "--check", "--json",
                 "--coq-lib", PROOFS]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["coq"] == "accepted"
    assert open(out).read().rstrip().endswith("Print Assumptions net_equiv.")
    # --existing --check: the file as written is accepted, a shrunk domain named
    existing = ["export-coq", "--construction", tent, "-o", out, "--existing", "--check",
                "--coq-lib", PROOFS]
    assert main(existing) == 0
    written = open(out).read()
    assert "Definition upper : list Q := [1; 1]." in written
    with open(out, "w") as f:
        f.write(written.replace("Definition upper : list Q := [1; 1].",
                                "Definition upper : list Q := [(1#2); 1]."))
    capsys.readouterr()
    assert main(existing) == 1
    line = capsys.readouterr().out.strip()
    assert line.startswith("rejected: ") and "Definition upper (the domain)" in line, line
    with open(out, "w") as f:
        f.write(written)
    # the same theorem proved from an axiom: coqc accepts the file, the allow-list does not
    from exactmax.export.coq_construction import run_coqc
    text = open(out).read()
    head, tail = text.split("Theorem net_equiv", 1)
    statement, rest = tail.split("Proof.", 1)
    cheat = (head + "Axiom cheat : False.\n\nTheorem net_equiv" + statement +
             "Proof. destruct cheat. Qed.\n\nPrint Assumptions net_equiv.\n")
    bad = tmp_path / "Cheat.v"
    bad.write_text(cheat)
    ok, _, message = run_coqc(str(bad), PROOFS)
    assert not ok and "cheat" in message
    assert main(["export-coq", "-o", out]) == 2
    assert main(["export-coq", str(tmp_path / "c.json"), "--construction", tent, "-o", out]) == 2
    capsys.readouterr()


def test_the_file_names_the_sha256_of_its_inputs():
    """The opening comment and Module Sha256 give the sha256 of the network, the Transformer
    and the domain (their canonical JSON, as certificates name them)."""
    from exactmax.export.coq import content_hashes
    net = NETS["deep_out"]
    tf = compile_transformer(net).transformer
    for packed in (False, True):
        text = export_construction(net, tf, packed=packed)
        for key, h in content_hashes(net, tf, net.domain).items():
            assert f"\n     {key:<7} {h}\n" in text
            assert f'Definition {key} : string := "{h}".' in text


def _tampered_weight(net):
    """The network with the first weight of its first piece changed by 1/7."""
    from exactmax.kernel.maxout import Layer
    layer = net.layers[0]
    unit = layer.units[0]
    p = unit.pieces[0]
    p2 = Piece((p.w[0] + Q(1, 7),) + p.w[1:], p.b)
    unit2 = Unit((p2,) + unit.pieces[1:])
    return replace(net, layers=(Layer((unit2,) + layer.units[1:]),) + net.layers[1:])


@needs_coq
@pytest.mark.parametrize("packed", [False, True])
def test_check_names_the_first_difference_of_a_tampered_file_that_compiles(tmp_path, library,
                                                                          capsys, packed):
    """--existing --check compares the file with the export of the JSON inputs before coqc:
    a file as written is accepted; a domain shrunk in the text, or the data of a network one
    weight away (with the sha256 of the original kept), still compile (a true theorem about
    other data), and are rejected with the first difference named in one line; so is an
    edited sha256."""
    import json
    import re
    from exactmax.export.coq import _qlist, content_hashes
    from exactmax.export.coq_construction import main, run_coqc
    from exactmax.io.models import load_model
    net_path = os.path.join(EXAMPLES, "maxout_d3_w4_r3.json")
    net = load_model(net_path)
    out = tmp_path / "T.v"
    flags = ["--packed"] if packed else []
    check = [net_path, "-o", str(out), "--existing", "--check", "--coq-lib", PROOFS]
    assert main([net_path, "-o", str(out)] + flags) == 0
    good = out.read_text()
    capsys.readouterr()
    assert main(check + ["--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["verdict"] == "proved" and r["coq"] == "accepted" and r["sentences_compared"] > 10
    assert r["sha256"] == content_hashes(net, compile_transformer(net).transformer, net.domain)

    def rejected(text, *words):
        out.write_text(text)
        capsys.readouterr()
        assert main(check) == 1
        line = capsys.readouterr().out.strip()
        assert "\n" not in line and line.startswith("rejected: ") and "coqc" not in line, line
        for w in words:
            assert w in line, line
        return line

    # a shrunk domain: the upper corner moved to the middle of the box
    m = re.search(r"Definition upper : list Q := \[[^\]]*\]\.", good)
    mid = tuple((lo + hi) / 2 for lo, hi in zip(net.domain.lower, net.domain.upper))
    shrunk = good.replace(m.group(0), f"Definition upper : list Q := {_qlist(mid)}.")
    (tmp_path / "S.v").write_text(shrunk.replace("T.v", "S.v"))
    assert run_coqc(str(tmp_path / "S.v"), PROOFS)[0]
    rejected(shrunk, "Definition upper (the domain): number 0 is", f"but {net_path} gives")
    # one weight of the network changed, the Transformer its construction, the sha256 kept
    net2 = _tampered_weight(net)
    other = export_construction(net2, module="T", packed=packed)
    for key, h in content_hashes(net2, compile_transformer(net2).transformer,
                                 net.domain).items():
        other = other.replace(h, content_hashes(net, compile_transformer(net).transformer,
                                                net.domain)[key])
    (tmp_path / "O.v").write_text(other.replace("T.v", "O.v"))
    assert run_coqc(str(tmp_path / "O.v"), PROOFS)[0]
    rejected(other, "(the network)", "packed_net" if packed else "Definition net_a")
    # the sha256 edited, in Module Sha256 and in the opening comment
    h = content_hashes(net, compile_transformer(net).transformer, net.domain)["domain"]
    fake = h[:-1] + ("0" if h[-1] != "0" else "1")
    rejected(good.replace(f'"{h}"', f'"{fake}"'), "Sha256.domain", "the sha256 the file is bound to")
    rejected(good.replace(f" {h}\n", f" {fake}\n"), "the opening comment gives domain sha256")
    out.write_text(good)
    assert main(check) == 0
