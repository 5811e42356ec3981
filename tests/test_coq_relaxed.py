"""export-coq for relaxed leaves (proofs/Relaxed.v, ``Property.PRelaxed``): the certificates
``exactmax check`` writes by default (Max nodes as variables under proved upper functions,
phase splits, tightened rows) are proved in Coq, and the Coq checker accepts exactly the relaxed
leaves the kernel accepts: the hand-made leaves of test_phase_splits.py with each wrong part,
and a real certificate tampered one field at a time."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
import os
from fractions import Fraction

import pytest
from conftest import skip_without_coqc
from test_phase_splits import _hand_leaf, _prop_file, _random_net, _relu_case

from exactmax.cli import main
from exactmax.engine import relaxation
from exactmax.export.coqcheck import ALLOWED
from exactmax.io.models import model_to_json
from exactmax.io.property_certificate import property_certificate_to_json
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.property import Phase, Relaxed, Tighten, Upper, check_property
from exactmax.kernel.rational import Q
from exactmax.prove.property import decide_property

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROOFS = os.path.join(ROOT, "proofs")
ONE, ZERO = Q(1), Q(0)

skip_without_coqc()


@pytest.fixture(scope="module")
def library(coq_library):
    return coq_library


def run(*args) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main([str(a) for a in args])
    return code, out.getvalue()


def verdicts(folder, doc: dict, library: str) -> tuple[bool, bool, dict]:
    """(check-cert accepts, coqc accepts the export, export-coq's --json answer)."""
    path = folder / "c.json"
    path.write_text(json.dumps(doc))
    kernel, _ = run("check-cert", path)
    code, out = run("export-coq", path, "-o", folder / "Relaxed_cert.v", "--check", "--json",
                    "--coq-lib", library)
    answer = json.loads(out) if out.strip().startswith("{") else {}
    return kernel == 0, code == 0 and answer.get("verdict") == "proved", answer


def hand_doc(tmp_path, leaf) -> dict:
    """The certificate file of one hand-made leaf for the case of ``_relu_case`` (y = relu(x)
    on [-1, 1]; forbidden: y >= 1/4 and y - x >= 1/4)."""
    net, _, _, _ = _relu_case()
    path, _ = _prop_file(tmp_path, 1, -1, 1, [[([1], 0.25), ([1], "(+ X_0 0.25)")]])
    model = tmp_path / "net.json"
    model.write_text(json.dumps(model_to_json(net)))
    doc = property_certificate_to_json(net, str(model), path, open(path).read(), (leaf,), {})
    return json.loads(json.dumps(doc))


def _kernel(net_case, leaf) -> bool:
    _, p, case, _ = net_case
    from exactmax.kernel.property import check_case

    try:
        check_case(p, case, leaf)
        return True
    except CheckFailed:
        return False


def test_hand_made_relaxed_leaves_are_judged_alike_by_the_kernel_and_by_coq(tmp_path, library):
    """A relaxed leaf with a phase split, a branch that tightens an upper function, nested
    phases; and each wrong part of them (test_phase_splits.py): swapped, missing and extra
    branches, a phase on a Lin node or on no node, a wrong weight or row, a tightening without
    its proof, on a Lin node, with lists of different lengths, at the root, an upper function
    dropped or of the wrong length."""
    case = _relu_case()
    _, p, _, node = case
    good = _hand_leaf(node)
    phase, up = good.proofs[0], good.uppers[0]
    lin = p.nodes[node].args[0]
    own = Upper((ONE, ZERO), ZERO, ((), ((7, ONE),)))

    def tight(t):
        return Relaxed((), (up,), (Phase(node, (t, ((5, ONE), (8, ONE)))),))

    inner = Phase(node, (((5, ONE), (8, ONE)), ((5, ONE), (8, ONE))))
    leaves = {
        "phase": good,
        "nested phase": dataclasses.replace(
            good, proofs=(Phase(node, (phase.branches[0], inner)),)),
        "tighten": tight(Tighten((node,), (own,), ((6, ONE), (9, ONE)))),
        "no phase": dataclasses.replace(good, proofs=(((5, ONE), (6, ONE)),)),
        "swapped": dataclasses.replace(good, proofs=(Phase(node, phase.branches[::-1]),)),
        "one branch": dataclasses.replace(good, proofs=(Phase(node, phase.branches[:1]),)),
        "four branches": dataclasses.replace(good, proofs=(Phase(node, phase.branches * 2),)),
        "lin node": dataclasses.replace(good, proofs=(Phase(lin, phase.branches),)),
        "no node": dataclasses.replace(good, proofs=(Phase(len(p.nodes) + 3, phase.branches),)),
        "weight": dataclasses.replace(good, proofs=(Phase(node, (((6, ONE), (8, Q(1, 2))),
                                                                 phase.branches[1])),)),
        "no row 9": dataclasses.replace(good, proofs=(Phase(node, (((6, ONE), (9, ONE)),
                                                                   phase.branches[1])),)),
        "inner not refuted": dataclasses.replace(
            good, proofs=(Phase(node, (phase.branches[0], Phase(node, ((), ()))),),)),
        "tighten unproved": tight(Tighten((node,), (Upper((ONE, ZERO), ZERO, ((), ())),),
                                          ((6, ONE), (9, ONE)))),
        "tighten lin": tight(Tighten((lin,), (own,), ((6, ONE), (9, ONE)))),
        "tighten lengths": tight(Tighten((node, node), (own,), ((6, ONE), (9, ONE)))),
        "tighten short upper": tight(Tighten((node,), (Upper((ONE,), ZERO, ((),)),),
                                             ((6, ONE), (9, ONE)))),
        "tighten at the root": Relaxed((), (up,), (Tighten(
            (node,), (Upper((ONE, ZERO), ZERO, ((), ((1, ONE),))),), ((6, ONE), (7, ONE))),)),
        "no upper": dataclasses.replace(good, uppers=()),
        "two uppers": dataclasses.replace(good, uppers=(up, up)),
        "upper of one lambda": dataclasses.replace(
            good, uppers=(Upper((Q(1, 2),), Q(1, 2), (((0, Q(1, 2)),),)),)),
        "upper too low": dataclasses.replace(
            good, uppers=(Upper((Q(1, 2), ZERO), Q(1, 4), (((0, Q(1, 2)),), ((1, Q(1, 2)),))),)),
        "no upper row": dataclasses.replace(good, uppers=(None,)),
    }
    seen = {}
    for name, leaf in leaves.items():
        k, c, answer = verdicts(tmp_path, hand_doc(tmp_path, leaf), library)
        assert k == _kernel(case, leaf), name
        assert k == c, (name, k, c, answer.get("coqc_message", "")[:300])
        seen[name] = k
    assert seen["phase"] and seen["nested phase"] and seen["tighten"]
    assert sum(not v for v in seen.values()) == len(leaves) - 3


@pytest.fixture(scope="module")
def relaxed_cert(tmp_path_factory):
    """A default certificate of ``exactmax check`` (relaxed leaves) for test_coq_property's
    network and property (two cases, four forbidden conjunctions)."""
    from test_coq_property import NET, PROP

    d = tmp_path_factory.mktemp("relaxed")
    (d / "net.json").write_text(json.dumps(model_to_json(NET)))
    (d / "p.vnnlib").write_text(PROP)
    code, out = run("check", d / "net.json", d / "p.vnnlib", "--cert", d / "c.json", "--json",
                    "--workers", "1")
    assert code == 0 and json.loads(out)["verdict"] == "unsat", out
    doc = json.loads((d / "c.json").read_text())
    assert '"relaxed"' in json.dumps(doc["cases"])
    return d, doc


def test_checks_default_certificate_is_proved_in_coq(relaxed_cert, library):
    d, doc = relaxed_cert
    k, c, answer = verdicts(d, doc, library)
    assert k and c, answer
    assert answer["axioms"] and set(answer["axioms"]) <= ALLOWED
    assert "PRelaxed" not in (d / "Relaxed_cert.v").read_text()  # packed, not written out


def _relaxed_leaves(doc):
    todo = list(doc["cases"])
    while todo:
        t = todo.pop()
        if "split" in t:
            todo += [t["ge"], t["lt"]]
        elif "relaxed" in t:
            yield t["relaxed"]


def _bump(v: str) -> str:
    return str(Fraction(v) + Fraction(1, 7))


def _tampered(doc):
    """(what, a copy of doc with one field of a relaxed leaf edited)."""
    leaf = next(_relaxed_leaves(doc))
    ups = [i for i, u in enumerate(leaf["uppers"]) if u is not None]
    i = ups[0]
    def lam(L):
        L["uppers"][i]["lambda"][0] = _bump(L["uppers"][i]["lambda"][0])

    def beta(L):
        L["uppers"][i]["beta"] = str(-abs(Fraction(L["uppers"][i]["beta"])) - 1)

    def upper_proof(L):
        pair = next(p for p in L["uppers"][i]["proofs"] if p)[0]
        pair[1] = _bump(pair[1])

    def multiplier(L):
        L["proofs"][0][-1][1] = _bump(L["proofs"][0][-1][1])

    def row(L):
        L["proofs"][0][-1][0] += 1

    edits = {
        "lambda": lam,
        "beta": beta,
        "upper proof": upper_proof,
        "upper dropped": lambda L: L["uppers"].pop(i),
        "no upper row": lambda L: L["uppers"].__setitem__(i, None),
        "proof multiplier": multiplier,
        "proof row": row,
        "proof dropped": lambda L: L["proofs"].pop(),
    }
    for what, edit in edits.items():
        c = copy.deepcopy(doc)
        edit(next(_relaxed_leaves(c)))
        yield what, c


def test_a_tampered_relaxed_certificate_is_judged_alike_by_the_kernel_and_by_coq(
    relaxed_cert, library, tmp_path
):
    _, doc = relaxed_cert
    rejected = 0
    for what, bad in _tampered(doc):
        k, c, answer = verdicts(tmp_path, bad, library)
        assert k == c, (what, k, c, answer.get("coqc_message", "")[:300])
        rejected += not k
    assert rejected >= 6   # a change may leave a proof valid (an upper row no proof uses)


def test_phase_splits_and_tightened_rows_of_the_producer_are_proved_in_coq(
    tmp_path, monkeypatch, library
):
    """Random networks of test_phase_splits.py with phase splits at every cell: the producer's
    certificates with phase splits and with tightened upper functions go through coqc."""
    monkeypatch.setattr(relaxation, "PHASES_ABOVE", 0)
    seen = {"phases": 0, "tightened": 0}
    for seed in range(16):
        if seen["phases"] and seen["tightened"]:
            break
        net = _random_net(seed, 3, (5, 5))
        disjuncts = [[([1, 0], 0.5)], [([-1, 1], 0.5), ([0, 1], 0)]]
        path, prop = _prop_file(tmp_path, 3, -1, 1, disjuncts)
        a = decide_property(net, prop, timeout_s=60, search=False)
        if a.result != "unsat":
            continue
        phases = a.stats["proofs"].get("phase_leaves", 0) > 0
        tightened = a.stats["proofs"].get("tightened", 0) > 0
        if not (phases or tightened):
            continue
        assert check_property(net, prop.cases, a.trees) >= 1
        model = tmp_path / "net.json"
        model.write_text(json.dumps(model_to_json(net)))
        doc = json.loads(json.dumps(property_certificate_to_json(
            net, str(model), path, open(path).read(), a.trees, {})))
        k, c, answer = verdicts(tmp_path, doc, library)
        assert k and c, (seed, answer.get("coqc_message", "")[:300])
        seen["phases"] += phases
        seen["tightened"] += tightened
    assert seen["phases"] and seen["tightened"], seen
