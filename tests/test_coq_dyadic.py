"""proofs/Dyadic.v: the Farkas test in machine words answers as the test over Q does.

H entails g >= 0 when D g - sum y_i h_i is a constant r >= 0 (D > 0, y_i >= 0).  On rows of
dyadic coefficients (n / 2^e) ``Dy.entails`` computes in Bignums' BigZ; ``entails_w`` falls
back to ``Checker.entails`` over Q when that test fails.  Each case below is evaluated by coqc
(``vm_compute``) with all three, on right proofs and on proofs it must reject."""

import subprocess

import pytest
from conftest import skip_without_coqc

skip_without_coqc()

# rows over x = (x0, x1): h0 = x0 - 1/4 >= 0, h1 = 3/8 - x0 >= 0, h2 = x1 + 1/2 > 0 (strict),
# h3 = 1/3 - x1 >= 0 (a constant that is not dyadic, as a box's decimal bounds are not)
ROWS = """[(([1; 0], (-1#4)), false); (([-1; 0], (3#8)), false);
           (([0; 1], (1#2)), true); (([0; -1], (1#3)), false)]"""

# (goal g, strict, Farkas (D, [(row, y)]), expected) -- expected: what entails over Q says
CASES = [
    # 1/8 >= 0 from h0 + h1 (x0 cancels): g = 1/8, D = 1
    ("([], (1#8))", "false", "(1, [(0%nat, 1); (1%nat, 1)])", True),
    # x0 <= 3/8 scaled: g = 3 - 8 x0 = 8 h1, D = 1, y = 8
    ("([-8; 0], 3)", "false", "(1, [(1%nat, 8)])", True),
    # the same with D = 1/2 (dyadic scale) and y = 4
    ("([-8; 0], 3)", "false", "((1#2), [(1%nat, 4)])", True),
    # a tampered multiplier: y = 7 leaves 1 x0 uncancelled
    ("([-8; 0], 3)", "false", "(1, [(1%nat, 7)])", False),
    # x0 <= 3/8 does not give x0 <= 1/4: the constant is short
    ("([-1; 0], (1#4))", "false", "(1, [(1%nat, 1)])", False),
    # a negative multiplier is refused
    ("([1; 0], (-1#4))", "false", "(1, [(1%nat, -1)])", False),
    # D = 0 is refused
    ("([], 0)", "false", "(0, [])", False),
    # strict: x1 + 1/2 > 0 from the strict row h2 with a positive weight
    ("([0; 2], 1)", "true", "(1, [(2%nat, 2)])", True),
    # strict asked of a non-strict row with a zero constant margin: refused
    ("([1; 0], (-1#4))", "true", "(1, [(0%nat, 1)])", False),
    # strict from a positive constant margin: x0 - 1/8 > 0 from x0 - 1/4 >= 0
    ("([1; 0], (-1#8))", "true", "(1, [(0%nat, 1)])", True),
    # the non-dyadic constant: x1 <= 1/3 (the constants are summed over Q)
    ("([0; -3], 1)", "false", "(1, [(3%nat, 3)])", True),
    ("([0; -3], (9#10))", "false", "(1, [(3%nat, 3)])", False),
]


def _coq_file(cases) -> str:
    lines = [
        "From Coq Require Import QArith List.",
        "From ExactMax Require Import Checker Sound Dyadic.",
        "Import ListNotations.",
        "Open Scope Q_scope.",
        f"Definition H : list con := {ROWS}.",
    ]
    for k, (g, strict, f, _) in enumerate(cases):
        lines.append(
            f"Eval vm_compute in ({k}%nat, entails H {g} {strict} {f}, "
            f"Dy.entails H {g} {strict} {f}, entails_w H {g} {strict} {f})."
        )
    return "\n".join(lines) + "\n"


def _answers(out: str) -> list[tuple[bool, bool, bool]]:
    flat = " ".join(out.split())
    got = []
    for part in flat.split("= (")[1:]:
        body = part.split(")")[0]  # "k%nat, b1, b2, b3"
        _, *bs = [t.strip() for t in body.split(",")]
        got.append(tuple(b == "true" for b in bs))
    return got


@pytest.fixture(scope="module")
def answers(coq_library, tmp_path_factory):
    d = tmp_path_factory.mktemp("dyadic")
    v = d / "DyadicCases.v"
    v.write_text(_coq_file(CASES))
    r = subprocess.run(
        ["coqc", "-Q", coq_library, "ExactMax", "-no-glob", v.name],
        cwd=d,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    got = _answers(r.stdout)
    assert len(got) == len(CASES), r.stdout
    return got


@pytest.mark.parametrize("k", range(len(CASES)))
def test_the_word_test_answers_as_the_test_over_q(answers, k):
    q, words, either = answers[k]
    expected = CASES[k][3]
    assert q == expected, CASES[k]
    # in words it accepts exactly what Q accepts (the data here are dyadic but for one
    # constant, summed over Q), and entails_w is their disjunction
    assert words == expected, CASES[k]
    assert either == expected, CASES[k]


def test_non_dyadic_coefficients_fall_back_to_q(coq_library, tmp_path):
    # a row with coefficient 1/3 on x0: the word test cannot hold it and answers false;
    # entails_w still accepts through the test over Q, and rejects what Q rejects
    rows = "[(([(1#3); 0], 0), false)]"
    cases = [("([1; 0], 0)", "false", "(1, [(0%nat, 3)])", True),
             ("([1; 0], 0)", "false", "(1, [(0%nat, 2)])", False)]
    v = tmp_path / "DyadicFallback.v"
    v.write_text(_coq_file(cases).replace(ROWS, rows))
    r = subprocess.run(
        ["coqc", "-Q", coq_library, "ExactMax", "-no-glob", v.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    (q1, w1, e1), (q2, w2, e2) = _answers(r.stdout)
    assert (q1, w1, e1) == (True, False, True)
    assert (q2, w2, e2) == (False, False, False)
