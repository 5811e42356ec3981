"""The VNN-LIB 1.0 reader: exact constants, disjunctions grouped into cases, errors with
file:line:column."""

from __future__ import annotations

import pytest

from exactmax.io import InputError
from exactmax.io.vnnlib import read_vnnlib
from exactmax.kernel.certificate import Row
from exactmax.kernel.polyhedron import Box
from exactmax.kernel.rational import Q

HEAD = "(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n" \
       "(declare-const Y_1 Real)\n"


def prop(tmp_path, body, name="p.vnnlib"):
    p = tmp_path / name
    p.write_text(HEAD + body)
    return read_vnnlib(str(p))


def test_constants_are_read_exactly_from_their_text(tmp_path):
    p = prop(tmp_path, "; a comment\n(assert (>= X_0 -0.3))\n(assert (<= X_0 1e-3))\n"
             "(assert (<= X_1 0.1)) (assert (>= X_1 (- 7)))\n(assert (>= Y_0 -2.5E-1))")
    assert p.n_x == 2 and p.n_y == 2 and p.disjuncts == 1
    (case,), (box,) = p.cases, p.boxes
    assert box == Box((Q(-3, 10), Q(-7)), (Q(1, 1000), Q(1, 10)))
    assert case.outputs == ((Row((0, 0, 1, 0), Q(1, 4)),),)


def test_output_disjunction_is_one_case(tmp_path):
    p = prop(tmp_path, "(assert (>= X_0 0)) (assert (<= X_0 1)) (assert (>= X_1 0)) "
             "(assert (<= X_1 1))\n(assert (or (and (>= Y_0 Y_1)) (and (< (+ (* 2 Y_0) "
             "(- Y_1)) 3) (> Y_1 0))))")
    assert len(p.cases) == 1 and p.disjuncts == 2
    outs = p.cases[0].outputs
    assert outs[0] == (Row((0, 0, 1, -1), Q(0)),)
    assert outs[1] == (Row((0, 0, -2, 1), Q(3), True), Row((0, 0, 0, 1), Q(0), True))


def test_input_disjunction_gives_cases(tmp_path):
    p = prop(tmp_path, "(assert (or (and (>= X_0 0) (<= X_0 1) (>= X_1 0) (<= X_1 1)) "
             "(and (>= X_0 2) (<= X_0 3) (>= X_1 0) (<= X_1 1))))\n(assert (<= Y_0 Y_1))")
    assert len(p.cases) == 2 and p.boxes[1] == Box((Q(2), Q(0)), (Q(3), Q(1)))
    assert p.cases[0].inputs == p.boxes[0].as_polyhedron()


def test_a_general_polyhedron_and_equalities(tmp_path):
    p = prop(tmp_path, "(assert (<= (+ X_0 X_1) 1)) (assert (>= X_0 0)) (assert (>= X_1 0))"
             "(assert (= Y_0 0.5))")
    assert p.boxes == (None,)
    assert p.cases[0].inputs.contains((Q(1, 2), Q(1, 2)))
    assert not p.cases[0].inputs.contains((Q(1), Q(1, 2)))
    assert len(p.cases[0].outputs[0]) == 2


@pytest.mark.parametrize("body,where,expect", [
    ("(assert (<= X_0 1)", "5:1", "never closed"),
    ("(assert (<= X_0 1)))", "5:20", "unbalanced"),
    ("(assert (<== X_0 1))", "5:10", "expected a formula"),
    ("(assert (<= X_0 1 2))", "5:9", "two terms"),
    ("(assert (<= X_2 1))", "5:13", "before its declare-const"),
    ("(assert (<= X_0 0.1.2))", "5:17", "expected a declared variable or a number"),
    ("(assert (<= (* X_0 Y_0) 1))", "5:13", "linear"),
    ("(declare-fun f Real)", "5:2", "expected declare-const or assert"),
    ("(assert (<= X_0 NaN))", "5:17", "a number"),
])
def test_bad_syntax_names_line_and_column(tmp_path, body, where, expect):
    with pytest.raises(InputError) as e:
        prop(tmp_path, body)
    msg = str(e.value)
    assert f"p.vnnlib:{where}: " in msg and expect in msg, msg


def test_declarations_must_be_contiguous(tmp_path):
    p = tmp_path / "q.vnnlib"
    p.write_text("(declare-const X_0 Real)\n(declare-const X_2 Real)\n(declare-const Y_0 Real)\n"
                 "(assert (<= Y_0 0))")
    with pytest.raises(InputError, match="X_1 is missing"):
        read_vnnlib(str(p))


def test_deep_nesting_is_an_input_error(tmp_path):
    p = tmp_path / "deep.vnnlib"
    p.write_text("(declare-const X_0 Real)\n(declare-const Y_0 Real)\n(assert " +
                 "(and " * 5000 + "(<= X_0 1)" + ")" * 5000 + ")")
    with pytest.raises(InputError, match="nested too deeply"):
        read_vnnlib(str(p))
