"""The float LP (HiGHS) only proposes: every Farkas proof it returns is exact and passes the
kernel's ``check_entails``, every point it returns lies strictly inside the cell (checked
exactly), and where floats cannot speak (huge numbers) it says nothing."""

import random

import pytest
from hypothesis import given, settings, strategies as st

from exactmax.engine import floatlp
from exactmax.engine.certify import _Oracle, _solve
from exactmax.kernel.certificate import Row, check_entails
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.rational import Q

pytestmark = pytest.mark.skipif(not floatlp.available(), reason="highspy is not installed")

BOX = [Row((Q(-1), Q(0)), Q(1)), Row((Q(0), Q(-1)), Q(1)),     # x <= 1, y <= 1
       Row((Q(1), Q(0)), Q(1)), Row((Q(0), Q(1)), Q(1))]       # x >= -1, y >= -1


def test_a_proof_is_exact_and_accepted_by_the_kernel():
    rows = BOX + [Row((Q(1), Q(-1)), Q(0))]                    # x - y >= 0
    e = ((Q(2), Q(-1)), Q(3))                                   # 2x - y + 3 >= 0 on the cell
    proof, decided = floatlp.farkas(rows, e, False, _solve)
    assert decided and proof is not None
    check_entails(rows, e, False, proof, "test")


def test_no_proof_where_the_claim_fails_and_the_kernel_agrees():
    e = ((Q(1), Q(0)), Q(-1, 2))                                # x >= 1/2 fails at x = 0
    proof, decided = floatlp.farkas(BOX, e, False, _solve)
    assert proof is None and decided


def test_a_strict_claim_at_its_boundary_is_not_proved_by_a_non_strict_row():
    e = ((Q(-1), Q(0)), Q(1))                                   # 1 - x > 0 fails at x = 1
    proof, _ = floatlp.farkas(BOX, e, True, _solve)
    assert proof is None
    proof, decided = floatlp.farkas(BOX, e, False, _solve)      # but 1 - x >= 0 holds
    assert decided and proof is not None
    check_entails(BOX, e, False, proof, "test")
    with pytest.raises(CheckFailed):
        check_entails(BOX, e, True, proof, "test")


def test_huge_numbers_are_left_to_the_exact_solver():
    big = Q(10) ** 40
    rows = BOX + [Row((big, Q(1)), Q(0))]
    assert floatlp.farkas(rows, ((Q(1), Q(0)), Q(1)), False, _solve) == (None, False)
    assert floatlp.interior_point(rows, 2) is None


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10 ** 6))
def test_random_claims_every_returned_proof_checks_and_every_point_is_inside(seed):
    rng = random.Random(seed)
    d = rng.randint(1, 4)
    rows = []
    for t in range(d):
        for s in (-1, 1):
            rows.append(Row(tuple(Q(s) if u == t else Q(0) for u in range(d)), Q(1)))
    for _ in range(rng.randint(0, 4)):
        rows.append(Row(tuple(Q(rng.randint(-5, 5), rng.randint(1, 3)) for _ in range(d)),
                        Q(rng.randint(-2, 3), rng.randint(1, 3)), rng.random() < 0.5))
    e = (tuple(Q(rng.randint(-5, 5), rng.randint(1, 4)) for _ in range(d)),
         Q(rng.randint(-6, 6), rng.randint(1, 4)))
    strict = rng.random() < 0.5
    proof, decided = floatlp.farkas(rows, e, strict, _solve)
    if proof is not None:
        check_entails(rows, e, strict, proof, "random")
    elif decided:   # "no proof" by a margin: the exact solver (z3) finds none either
        exact = _Oracle(d, None)
        exact.float_lp = False
        assert exact.farkas(rows, e, strict) is None
    x = floatlp.interior_point(rows, d)
    if x is not None:
        assert all(sum((a * v for a, v in zip(r.a, x)), r.c) > 0 for r in rows)


def test_the_json_output_stays_clean_when_highs_is_used(tmp_path):
    """HiGHS prints a banner on its first construction, at the C level: the verdict's JSON on
    standard output must still parse, and the float LP must have been asked."""
    import json
    import os
    import subprocess
    import sys
    tent = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "examples", "tent.json")
    r = subprocess.run([sys.executable, "-m", "exactmax", "verify", tent, "--strategy",
                        "monolithic", "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["verdict"] == "proved" and out["stats"]["float_lp_calls"] > 0
