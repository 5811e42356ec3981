"""Theorem 3.2 as the paper states it (proofs/Theorem32.v): for every well-shaped Maxout
network and every box, the Transformer built with the gate constants ``gates_box`` (computed
in Coq from the interval images) equals the network on the box, with no per-instance check.
The theorem is applied, in files coqc compiles, to networks of the examples (mixed ranks, an
output map); its axioms are the Reals' only; a box of the wrong dimension does not apply."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
from conftest import skip_without_coqc

from exactmax.export.coq import _maxout_term, _qlist
from exactmax.export.coqcheck import parse_assumptions
from exactmax.io.jsonfile import Cursor
from exactmax.io.models import read_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROOFS = os.path.join(ROOT, "proofs")
EX = os.path.join(ROOT, "examples")

skip_without_coqc()


@pytest.fixture(scope="module")
def library(coq_library):
    return coq_library


def coqc(folder, name: str, text: str):
    (folder / f"{name}.v").write_text(text)
    return subprocess.run(["coqc", "-Q", PROOFS, "ExactMax", "-no-glob", f"{name}.v"],
                          cwd=folder, capture_output=True, text=True)


def instance(example: str, lo=None, hi=None) -> str:
    with open(os.path.join(EX, example)) as f:
        net = read_model(Cursor(example, "", json.load(f)))
    box = net.domain
    lo = box.lower if lo is None else lo
    hi = box.upper if hi is None else hi
    return f"""From Coq Require Import QArith Reals List.
From ExactMax Require Import Sound Maxout Transformer Construction Theorem32.
Import ListNotations.
Open Scope Q_scope.

Definition net : maxout :=
{_maxout_term(net, words=False)}.

Definition lo : list Q := {_qlist(lo)}.
Definition hi : list Q := {_qlist(hi)}.

Lemma net_shaped : shaped net = true.
Proof. vm_compute. reflexivity. Qed.

Local Open Scope R_scope.

Theorem net_is_its_transformer : forall x : list R, length x = {net.input_dim}%nat ->
  in_box lo hi x -> transformerR (construct net (gates_box net lo hi)) x = maxoutR net x.
Proof. exact (theorem_3_2 net lo hi net_shaped eq_refl eq_refl). Qed.

Print Assumptions net_is_its_transformer.
"""


@pytest.mark.parametrize("example", ["tent.json", "maxout_d3_w4_r3.json"])
def test_theorem_3_2_applies_to_every_network_and_box_without_a_check(tmp_path, library,
                                                                      example):
    r = coqc(tmp_path, "T32", instance(example))
    assert r.returncode == 0, r.stdout + r.stderr
    axioms = parse_assumptions(r.stdout)
    assert set(axioms.get("Axioms", [])) == {
        "ClassicalDedekindReals.sig_forall_dec",
        "FunctionalExtensionality.functional_extensionality_dep"}, r.stdout


def test_a_box_of_the_wrong_dimension_does_not_apply(tmp_path, library):
    from exactmax.kernel.rational import Q

    r = coqc(tmp_path, "T32bad", instance("tent.json", (Q(-1),) * 3, (Q(1),) * 3))
    assert r.returncode != 0 and "eq_refl" in r.stderr, r.stderr


def test_the_theorems_rest_on_the_reals_axioms_only(library):
    r = subprocess.run(["coqc", "-Q", ".", "ExactMax", "-no-glob", "ConstructionAssumptions.v"],
                       cwd=PROOFS, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    text = open(os.path.join(PROOFS, "ConstructionAssumptions.v")).read()
    assert "Print Assumptions theorem_3_2." in text and "Print Assumptions gates_box_ok." in text
    closed = r.stdout.count("Closed under the global context")  # gates_box_ok: Q alone
    printed = len(re.findall(r"^Print Assumptions ", text, re.M))
    assert r.stdout.count("Axioms:") + closed == printed and closed
    listed = r.stdout.replace("Closed under the global context\n", "")
    assert set(parse_assumptions(listed)["Axioms"]) == {
        "ClassicalDedekindReals.sig_forall_dec",
        "FunctionalExtensionality.functional_extensionality_dep"}
