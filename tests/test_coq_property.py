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


# --- certificates in parts (export-coq --parts N: Property.maxout_property_parts_sound) --------


def _parts(cert, tmp_path, name="NetParts", *extra):
    v = tmp_path / f"{name}.v"
    r = run("export-coq", cert, "-o", v, "--parts", "2", *extra)
    return r, v


def test_a_property_certificate_in_parts_is_proved_in_coq(exported, tmp_path):
    """--parts 2: the data, two parts and the theorem's file, compiled in that order (the
    parts side by side): the same theorem about the same network and property as the one
    file, resting on the same axioms."""
    _, cert, v, one = exported
    r, pv = _parts(cert, tmp_path, "NetParts", "--check", "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["verdict"] == "proved", r.stdout
    assert out["about"]["parts"] == 2 and out["trust"] == "coq-checked"
    assert [os.path.basename(f) for f in out["files"]] == [
        "NetParts_data.v", "NetParts_part1.v", "NetParts_part2.v", "NetParts.v"]
    assert set(out["axioms"]) == set(one["axioms"])
    text, data = pv.read_text(), (tmp_path / "NetParts_data.v").read_text()
    def between(t, a, b):
        return t[t.index(a): t.index(b)]
    assert between(text, "Theorem net_property", "Proof.") == \
        between(v.read_text(), "Theorem net_property", "Proof.")
    assert between(data, "Definition net :", "End Data.") == \
        between(v.read_text(), "Definition net :", "End Data.")
    assert "maxout_property_parts_sound net cases top" in text
    r = run("export-coq", cert, "-o", pv, "--parts", "2", "--existing", "--check")
    assert r.returncode == 0 and "theorem net_property proved in Coq" in r.stdout, r.stdout


def test_a_changed_multiplier_in_a_part_is_rejected_by_coq(exported, tmp_path):
    _, cert, _, _ = exported
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_tamper_multiplier(json.loads(cert.read_text()))))
    r, _ = _parts(bad, tmp_path, "BadParts", "--check")
    lines = r.stdout.splitlines()
    assert r.returncode == 1 and len(lines) == 2 and lines[1].startswith("coqc rejected"), r.stdout
    assert re.search(r"BadParts_part\d\.v: .*group_ok net cases top \d+ \d+ group = true",
                     lines[1]), lines[1]


def test_parts_that_do_not_cover_the_cuts_are_rejected_by_coq(exported, tmp_path):
    """The theorem's file must account for every cut cell: a part left out, a count of cells
    too small, a part used twice: coqc refuses each."""
    _, cert, _, _ = exported
    r, pv = _parts(cert, tmp_path)
    assert r.returncode == 0, r.stdout
    from exactmax.export.coqcheck import run_coqc_stages
    files = [tmp_path / f"NetParts_{s}.v" for s in ("data", "part1", "part2")]
    assert run_coqc_stages([[str(files[0])], [str(f) for f in files[1:]], [str(pv)]],
                           PROOFS).ok
    text = pv.read_text()
    (m1, m2), = re.findall(r"\[\((\d+)%nat, NetParts_part1\.group\); \((\d+)%nat, "
                           r"NetParts_part2\.group\)\]", text)
    n = int(m1) + int(m2)
    assert f"parts_top_ok net cases top {n} = true" in text
    one = f"[({m1}%nat, NetParts_part1.group)]"
    twice = f"[({m1}%nat, NetParts_part1.group); ({m2}%nat, NetParts_part1.group)]"
    both = f"[({m1}%nat, NetParts_part1.group); ({m2}%nat, NetParts_part2.group)]"
    proofs = "(conj NetParts_part1.group_checks (conj NetParts_part2.group_checks eq_refl))"
    for groups, count, conj, needle in [
        (one, n, "(conj NetParts_part1.group_checks eq_refl)", "eq_refl"),
        (one, int(m1), "(conj NetParts_part1.group_checks eq_refl)", "parts_top_ok"),
        (twice, n, "(conj NetParts_part1.group_checks "
                             "(conj NetParts_part1.group_checks eq_refl))", "group_checks"),
    ]:
        f = tmp_path / "NetParts.v"
        f.write_text(text.replace(both, groups).replace(proofs, conj)
                     .replace(f"top {n} ", f"top {count} "))
        r = run_coqc(str(f), PROOFS)
        assert not r.ok and needle in r.message, (groups, count, r.message)


def test_the_read_back_of_parts_names_the_file(exported, tmp_path):
    _, cert, _, _ = exported
    r, pv = _parts(cert, tmp_path)
    part = tmp_path / "NetParts_part2.v"
    text = part.read_text()
    word = re.search(r"\[\|\n  (\d+)", text).group(1)
    part.write_text(text.replace(word, str(int(word) ^ 2), 1))
    r = run("export-coq", cert, "-o", pv, "--parts", "2", "--existing", "--check")
    assert r.returncode == 1 and len(r.stdout.splitlines()) == 1, r.stdout
    assert r.stdout.startswith(f"rejected: {part}: Definition packed"), r.stdout


def test_parts_usage_errors_are_one_line(exported, tmp_path):
    _, cert, _, _ = exported
    r = run("export-coq", cert, "-o", tmp_path / "X.v", "--parts", "0")
    assert r.returncode == 2 and r.stderr.strip() == \
        "exactmax: error: --parts: expected a whole number >= 1, got 0", r.stderr
    tent = tmp_path / "tent.cert.json"
    assert run("verify", os.path.join(ROOT, "examples", "tent.json"), "--strategy",
               "monolithic", "--cert", tent, "--no-search").returncode == 0
    r = run("export-coq", tent, "-o", tmp_path / "X.v", "--parts", "2")
    assert r.returncode == 2 and "--parts goes with a property certificate" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "X.v").exists()


def test_the_parts_cover_every_leaf_once_left_to_right(exported):
    """The producer's plan: cuts in the order Property.all_cuts numbers them, groups that
    tile them, every leaf below exactly one cut."""
    from exactmax.export.coq_property import plan_parts
    from exactmax.io.jsonfile import Cursor, read_json_file
    from exactmax.io.property_certificate import read_property_certificate
    from exactmax.kernel.certificate import Split
    _, cert, _, _ = exported
    _, _, trees, _, _ = read_property_certificate(Cursor(str(cert), "", read_json_file(str(cert))))
    def leaves(node):
        out, stack = [], [node]
        while stack:
            n = stack.pop()
            if isinstance(n, Split):
                stack += [n.lt, n.ge]     # ge first, as Coq's cut_cells
            else:
                out.append(id(n))
        return out
    every = [leaf for t in trees for leaf in leaves(t)]
    for parts in (1, 2, 3, 8):
        cuts, groups = plan_parts(trees, parts)
        assert [leaf for _, n, _ in cuts for leaf in leaves(n)] == every
        assert 1 <= len(groups) <= parts and groups[0][0] == 0
        assert all(a + m == b for (a, m), (b, _) in zip(groups, groups[1:]))
        assert groups[-1][0] + groups[-1][1] == len(cuts)
        assert [i for i, _, _ in cuts] == sorted(i for i, _, _ in cuts)
