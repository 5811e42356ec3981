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


# --- Names (#36): one table from the declarations; a name is its index's canonical decimal.
# The reader used to turn the digits after X_ into an index but look coefficients up by the
# canonical name, so a variable declared as X_01 (or with non-ASCII digits) lost every
# coefficient: an unsatisfiable row was then "proved", and a bound was dropped.


@pytest.mark.parametrize("name", ["X_01", "X_00", "X_\u0661", "X_+1", "X_1.0", "Y_01"])
def test_a_declared_name_must_be_its_index_written_canonically(tmp_path, name):
    p = tmp_path / "n.vnnlib"
    p.write_text(f"(declare-const X_0 Real)\n(declare-const {name} Real)\n"
                 "(declare-const Y_0 Real)\n(assert (<= Y_0 0))")
    with pytest.raises(InputError) as e:
        read_vnnlib(str(p))
    msg = str(e.value)
    assert "n.vnnlib:2:16: " in msg and repr(name) in msg and "leading zeros" in msg, msg


def test_the_refusal_says_what_to_write():
    with pytest.raises(InputError, match=r"\(write X_1\)"):
        read_vnnlib_text("(declare-const X_0 Real)(declare-const X_01 Real)"
                         "(declare-const Y_0 Real)(assert (<= Y_0 0))")


def read_vnnlib_text(text, tmp=None):
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = f"{d}/t.vnnlib"
        with open(p, "w") as f:
            f.write(text)
        return read_vnnlib(p)


def test_names_resolve_through_the_declarations_in_any_order():
    # Y before X, X_1 before X_0: each coefficient lands at the coordinate its name says.
    p = read_vnnlib_text("(declare-const Y_0 Real)(declare-const X_1 Real)"
                         "(declare-const X_0 Real)\n(assert (<= (+ X_1 (* 2 X_0)) 1))"
                         "(assert (>= (- Y_0 (* 3 X_1)) 0))")
    assert (p.n_x, p.n_y) == (2, 1)
    (case,) = p.cases
    assert case.inputs.A == ((Q(2), Q(1)),) and case.inputs.b == (Q(1),)
    assert case.outputs == ((Row((Q(0), Q(-3), Q(1)), Q(0)),),)


@pytest.mark.parametrize("use", ["X_01", "X_1 ", "Y_1"])
def test_a_name_used_but_not_declared_is_refused(use):
    with pytest.raises(InputError, match="used before its declare-const"):
        read_vnnlib_text("(declare-const X_0 Real)(declare-const Y_0 Real)"
                         f"(assert (<= {use.strip()} 1))")


def test_a_name_declared_twice_is_refused():
    with pytest.raises(InputError, match="X_0 is declared twice"):
        read_vnnlib_text("(declare-const X_0 Real)(declare-const X_0 Real)"
                         "(declare-const Y_0 Real)(assert (<= Y_0 0))")


def test_check_never_proves_a_satisfiable_property_spelled_with_X_01(tmp_path):
    """The wrong answer of #36, end to end: x_1 >= 1/2 written on X_01 was read as the
    constant row 0 >= 1/2, an empty input set, so a satisfiable property could be "proved"
    (the review saw "unsat", exit 0; here the old reader answered "unknown").  Now: refused."""
    from test_property import NET, run

    from exactmax.io import model_to_json, write_json_atomic

    net = tmp_path / "n.json"
    write_json_atomic(str(net), model_to_json(NET))  # y0 = |x0| + |x1|, y1 = x0 - x1
    p = tmp_path / "p.vnnlib"
    p.write_text("(declare-const X_0 Real)\n(declare-const X_01 Real)\n"
                 "(declare-const Y_0 Real)\n(declare-const Y_1 Real)\n"
                 "(assert (>= X_0 -1)) (assert (<= X_0 1))\n"
                 "(assert (>= X_01 0.5)) (assert (<= X_01 1))\n(assert (>= Y_0 1.5))\n")
    r = run("check", net, p)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and r.stdout == "", (r.returncode, r.stdout)
    assert lines[0].startswith("exactmax: error: ") and "p.vnnlib:2:16: " in lines[0]
    # the same property with its canonical name is satisfiable (x = (1, 1): y0 = 2)
    p.write_text(p.read_text().replace("X_01", "X_1"))
    assert run("check", net, p).returncode == 1


@pytest.mark.parametrize("text,where", [
    # a quoted symbol may hold ';' and parentheses: read as a comment it would hide the assert
    ("(set-info :source |a ; b|)\n(assert (<= X_0 1))", "5:19"),
    ("(assert (<= |X_0| 1))", "5:13"),
    ('(set-info :notes "x ; y")', "5:18"),
])
def test_quoted_symbols_and_strings_are_refused(tmp_path, text, where):
    with pytest.raises(InputError, match="quoted symbols") as e:
        prop(tmp_path, text)
    assert f"p.vnnlib:{where}: " in str(e.value)


def test_only_ascii_whitespace_separates(tmp_path):
    # "X_0<no-break space>1" is one word (undeclared), not the term X_0 followed by 1
    with pytest.raises(InputError, match="expected a declared variable or a number"):
        prop(tmp_path, "(assert (<= (- X_0\u00a01) 0))")


def test_a_counterexample_value_given_twice_is_refused(tmp_path):
    from exactmax.io.property_certificate import read_counterexample
    p = tmp_path / "cex.txt"
    p.write_text("sat\n((X_0 1) (X_1 0) (X_0 -1))\n")
    with pytest.raises(InputError, match="X_0 has a second value"):
        read_counterexample(str(p), 2, 1)
    p.write_text("sat\n((X_0 1) (X_01 0))\n")
    with pytest.raises(InputError, match=r"expected \(X_i value\)"):
        read_counterexample(str(p), 2, 1)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from exactmax.io.vnnlib import _text_order  # noqa: E402

_COEF = st.sampled_from([Q(0)] * 4 + [Q(1), Q(-1), Q(2), Q(-1, 2), Q(10), Q(-3, 7)])


def _dense_text(a, c):
    return tuple(map(str, a)), str(c)


def _sparse_text(a, c):
    return tuple((j, str(v)) for j, v in enumerate(a) if v), str(c)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.lists(_COEF, min_size=5, max_size=5), _COEF), min_size=2, max_size=8))
def test_input_rows_are_ordered_as_their_dense_texts_from_their_entries(rows):
    """The cases' input rows are sorted by the text of the dense row (so a property's hash does
    not change with how the rows are stored); the order computed from the entries that are
    not zero is that order."""
    rows = list({_dense_text(a, c): (a, c) for a, c in rows}.values())  # distinct, as read
    by_dense = sorted(rows, key=lambda r: _dense_text(*r))
    by_sparse = sorted(rows, key=lambda r: _text_order(_sparse_text(*r)))
    assert by_sparse == by_dense


def test_a_wide_box_is_read_as_sparse_rows_equal_to_the_dense_ones(tmp_path):
    n = 40
    text = "".join(f"(declare-const X_{i} Real)\n" for i in range(n)) + "(declare-const Y_0 Real)\n"
    text += "".join(f"(assert (<= X_{i} {i + 1}))\n(assert (>= X_{i} -{i}))\n" for i in range(n))
    text += "(assert (>= Y_0 0))\n"
    path = tmp_path / "wide.vnnlib"
    path.write_text(text)
    prop = read_vnnlib(str(path))
    box = Box(tuple(Q(-i) for i in range(n)), tuple(Q(i + 1) for i in range(n)))
    assert prop.boxes == (box,) and prop.cases[0].inputs == box.as_polyhedron()
    assert prop.cases[0].inputs.A[3] == tuple(Q(int(j == 3)) for j in range(n))
