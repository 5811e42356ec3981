"""The safe bound (Neumaier-Shcherbina) in the kernel's one Farkas rule.

Theorem: on a cell whose rows include bounds l_t <= x_t <= u_t, any multipliers y >= 0 with
residual res = a_e - sum y_i a_i give e - sum y_i row_i - sum_{res_t > 0} res_t (x_t - l_t)
- sum_{res_t < 0} (-res_t) (u_t - x_t) = r, a constant, and r >= 0 proves e >= 0.  The bound
rows are rows of the cell, so that certificate is a plain Farkas combination: the kernel's
``check_entails`` accepts it when it is right and rejects it when it is wrong by one number.
The producer (``floatlp.safe_bound``) makes such certificates from float duals; where a bound
row it needs is missing, the support solve and then z3 take over."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exactmax.engine import certify, floatlp
from exactmax.engine.certify import _Oracle, _solve
from exactmax.kernel.certificate import Row, check_entails, domain_rows
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.polyhedron import Box, Polyhedron
from exactmax.kernel.rational import ZERO, Q

pytestmark = pytest.mark.skipif(not floatlp.available(), reason="highspy is not installed")


@pytest.fixture(autouse=True)
def safe_bound_first(monkeypatch):
    """These tests are about the safe bound: tried first in every dimension (by default only
    above ``SAFE_BOUND_FIRST_ABOVE``; ``test_the_dimension_decides_which_route_goes_first``)."""
    monkeypatch.setattr(floatlp, "SAFE_BOUND_FIRST_ABOVE", 0)

# [-1, 1]^2 as the kernel lays it out (rows 0, 1: 1 - x_t >= 0; rows 2, 3: x_t + 1 >= 0),
# then the split row x - y >= 0 (row 4)
BOX = domain_rows(Box((Q(-1), Q(-1)), (Q(1), Q(1))).as_polyhedron())
CELL = BOX + [Row((Q(1), Q(-1)), Q(0))]
UP_X, UP_Y, LO_X, LO_Y, SPLIT = range(5)


def _no_support_solve(vectors, target):
    raise AssertionError("the support solve was asked: the safe bound did not answer")


def _interval_r(rows, e, y, lower, upper):
    """c_e - sum y_i c_i + min over the box of res . x, computed apart from the producer."""
    res, r = list(e[0]), e[1]
    for i, v in y.items():
        res = [a - v * b for a, b in zip(res, rows[i].a)]
        r -= v * rows[i].c
    return r + sum((v * (lower[t] if v > 0 else upper[t]) for t, v in enumerate(res)), ZERO)


# ------------------------------------------------------------------ accepted by the kernel

def test_a_float_dual_off_by_rounding_becomes_an_exact_certificate():
    """2x - 2y + 1 >= 0 on the cell: the exact dual is 2 on the split row; the float dual
    2 - 2^-20 leaves the residual 2^-20 (x - y), absorbed by x's lower and y's upper row."""
    e = ((Q(2), Q(-2)), Q(1))
    y = [0.0, 0.0, 0.0, 0.0, 2 - 2 ** -20]
    proof = floatlp.safe_bound(CELL, e, False, y, None, ("dyadic", 24))
    eps = Q(1, 2 ** 20)
    assert dict(proof) == {SPLIT: 2 - eps, LO_X: eps, UP_Y: eps}
    check_entails(CELL, e, False, proof, "safe bound")
    check_entails(CELL, e, True, proof, "safe bound")        # r = 1 - 2^-19 > 0: strict too


def test_the_producer_closes_split_cells_by_the_safe_bound_alone():
    """From HiGHS's float dual, on cells with split rows whose coefficients are not dyadic
    (so the float dual is not exact): proofs by the safe bound only, checked by the kernel."""
    rows = CELL + [Row((Q(1, 3), Q(1, 7)), Q(1, 5)), Row((Q(-2, 3), Q(1, 9)), Q(2, 3))]
    before = floatlp.ROUTES["safe_bound"]
    claims = [((Q(1, 3), Q(1, 7)), Q(1, 4)),                   # row 5 + 1/20
              ((Q(-1, 3), Q(1, 3)), Q(1)),               # (y - x)/3 + 1 >= 1/3 on the box
              ((Q(1, 3) - Q(2, 3), Q(1, 7) + Q(1, 9)), Q(1))]  # rows 5 + 6, constant 1 > 13/15
    for e in claims:
        proof, decided = floatlp.farkas(rows, e, False, _no_support_solve)
        assert decided and proof is not None
        check_entails(rows, e, False, proof, "split cell")
    assert floatlp.ROUTES["safe_bound"] - before == len(claims)


def test_a_strict_claim_by_a_strict_split_row_with_r_zero():
    """x - y > 0 on the cell with the strict row x - y > 0: y = 1 on it, residual 0, r = 0,
    and the strict row is used: accepted as strict."""
    rows = BOX + [Row((Q(1), Q(-1)), Q(0), True)]
    e = ((Q(1), Q(-1)), Q(0))
    proof = floatlp.safe_bound(rows, e, True, [0.0, 0.0, 0.0, 0.0, 1.0])
    assert proof == ((SPLIT, Q(1)),)
    check_entails(rows, e, True, proof, "strict")
    proof, decided = floatlp.farkas(rows, e, True, _no_support_solve)
    assert decided and proof is not None
    check_entails(rows, e, True, proof, "strict")


def test_a_polyhedral_domain_with_scaled_bound_rows():
    """A polyhedron (not a Box) whose rows include 2 x <= 1, -3 x <= 2, y <= 1, -y <= 1 and
    x + y <= 1: the bound rows are found by their single coefficient, the tightest used."""
    P = Polyhedron(((Q(2), Q(0)), (Q(-3), Q(0)), (Q(0), Q(1)), (Q(0), Q(-1)), (Q(1), Q(1)),
                    (Q(1), Q(0))),                                    # also x <= 7 (looser)
                   (Q(1), Q(2), Q(1), Q(1), Q(1), Q(7)), 2)
    rows = domain_rows(P)
    lower, upper = floatlp.bound_rows(rows, 2)
    assert (lower, upper) == ([1, 3], [0, 2])                         # x <= 1/2, not x <= 7
    e = ((Q(-1, 3), Q(-1, 3)), Q(1, 3) + Q(1, 1000))    # (1 - x - y)/3 + 1/1000 >= 0 by row 4
    y = [0.0] * len(rows)
    y[4] = 1 / 3                                                       # not a dyadic
    proof = floatlp.safe_bound(rows, e, False, y, (lower, upper), ("dyadic", 24))
    check_entails(rows, e, False, proof, "polyhedron")
    used = dict(proof)
    assert set(used) in ({4, 1, 3}, {4, 0, 2})          # x's scaled bound row and y's absorbed
    proof, decided = floatlp.farkas(rows, e, False, _no_support_solve)
    assert decided and proof is not None
    check_entails(rows, e, False, proof, "polyhedron")


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10 ** 6))
def test_any_non_negative_multipliers_give_the_interval_bound(seed):
    """Random y >= 0 (not an LP's dual at all) on a random box cell: the producer's proof is
    returned exactly when the interval bound r, computed apart, shows the claim, and then the
    kernel accepts it."""
    rng = random.Random(seed)
    d = rng.randint(1, 4)
    lower = [Q(rng.randint(-4, 0), rng.randint(1, 3)) for _ in range(d)]
    upper = [lo + Q(rng.randint(1, 5), rng.randint(1, 3)) for lo in lower]
    rows = domain_rows(Box(tuple(lower), tuple(upper)).as_polyhedron())
    for _ in range(rng.randint(0, 3) if d > 1 else 0):   # split rows: two coordinates or more
        a = [Q(rng.randint(-5, 5), rng.randint(1, 3)) for _ in range(d)]
        for t in rng.sample(range(d), 2):
            a[t] = Q(rng.choice([-3, -2, -1, 1, 2, 3]), rng.randint(1, 3))
        rows.append(Row(tuple(a), Q(rng.randint(-2, 3), rng.randint(1, 3))))
    e = (tuple(Q(rng.randint(-5, 5), rng.randint(1, 4)) for _ in range(d)),
         Q(rng.randint(-3, 12), rng.randint(1, 4)))
    y = [rng.choice([0.0, rng.random() * 2, rng.randint(1, 40) / rng.randint(1, 30)])
         for _ in rows]                                # floats, some of them short fractions
    rounding = rng.choice(floatlp.SAFE_ROUNDINGS)
    proof = floatlp.safe_bound(rows, e, False, y, None, rounding)
    tiny = 1e-12 * max(y, default=0.0)
    yq = {i: floatlp.rounded(v, rounding) for i, v in enumerate(y) if v > tiny}
    if None in yq.values():         # no short fraction for some multiplier: not this rounding
        assert proof is None
        return
    r = _interval_r(rows, e, yq, lower, upper)
    assert (proof is not None) == (r >= 0)
    if proof is not None:
        check_entails(rows, e, False, proof, "random multipliers")


def test_dyadics_are_short():
    for v in (1 / 3, 2 / 7, 1e-9, 12345.678, 2.0 ** 60 / 3):
        for bits in (24, 53):
            q = floatlp.dyadic(v, bits)
            den = int(q.q)
            assert den & (den - 1) == 0                                  # a power of two
            assert int(q.p) < 2 ** (bits + 1) * max(1, int(q.p) // den + 1)
            assert abs(float(q) - v) <= v * 2.0 ** -bits
    assert floatlp.dyadic(-1.0, 24) == 0 and floatlp.dyadic(float("nan"), 24) == 0


# ------------------------------------------------------------------ rejected by the kernel

E_TIGHT = ((Q(2), Q(-2)), Q(1, 1000))        # 2x - 2y + 1/1000 >= 0 on CELL


def _safe(eps):
    """The certificate of 2x - 2y + c >= 0 from the dual 2 - eps on the split row."""
    return {SPLIT: 2 - eps, LO_X: eps, UP_Y: eps}


def test_the_kernel_accepts_the_untampered_certificate():
    check_entails(CELL, E_TIGHT, False, tuple(_safe(Q(1, 10 ** 4)).items()), "ok")


def test_rejected_a_residual_absorbed_with_too_small_a_multiplier():
    proof = _safe(Q(1, 10 ** 4))
    proof[LO_X] = Q(1, 2 * 10 ** 4)
    with pytest.raises(CheckFailed, match="leaves a linear part"):
        check_entails(CELL, E_TIGHT, False, tuple(proof.items()), "too small")


def test_rejected_a_residual_absorbed_by_the_wrong_direction_bound_row():
    eps = Q(1, 10 ** 4)
    proof = {SPLIT: 2 - eps, UP_X: eps, UP_Y: eps}     # x's upper row, where the lower is due
    with pytest.raises(CheckFailed, match="leaves a linear part"):
        check_entails(CELL, E_TIGHT, False, tuple(proof.items()), "wrong direction")


def test_rejected_a_dual_perturbed_until_the_constant_is_negative():
    """The dual 2 - 1/100: absorbing its residual costs 2/100 > 1/1000.  The producer gives
    no proof; the certificate made anyway (balanced linear part) is rejected for its r."""
    y = [0.0, 0.0, 0.0, 0.0, 2 - 1 / 100]
    assert floatlp.safe_bound(CELL, E_TIGHT, False, y) is None
    proof = tuple(_safe(Q(1, 100)).items())
    with pytest.raises(CheckFailed, match=r"gives -19/1000, not >= 0"):
        check_entails(CELL, E_TIGHT, False, proof, "perturbed")


def test_rejected_a_dual_with_a_negative_entry():
    """y - x + 3 >= 0 holds on the box, but not by -1 times the split row x - y >= 0."""
    e = ((Q(-1), Q(1)), Q(3))
    with pytest.raises(CheckFailed, match="not positive"):
        check_entails(CELL, e, False, ((SPLIT, Q(-1)),), "negative")
    proof = floatlp.safe_bound(CELL, e, False, [0.0, 0.0, 0.0, 0.0, -1.0])  # dropped: y' = 0
    assert all(v > 0 for _, v in proof) and SPLIT not in dict(proof)
    check_entails(CELL, e, False, proof, "negative entry dropped")


def test_rejected_a_strict_claim_with_no_strict_row_and_r_zero():
    e = ((Q(1), Q(-1)), Q(0))                                   # x - y > 0 by x - y >= 0?
    assert floatlp.safe_bound(CELL, e, True, [0.0, 0.0, 0.0, 0.0, 1.0]) is None
    with pytest.raises(CheckFailed, match="gives 0, not > 0"):
        check_entails(CELL, e, True, ((SPLIT, Q(1)),), "strict")
    check_entails(CELL, e, False, ((SPLIT, Q(1)),), "non-strict")   # >= 0 it does show


# ------------------------------------------------------------------ the fallbacks

# a cone with no bound rows: 3x - y >= 0, x + 2000y >= 0; x >= 0 there, by the dual
# (2000/6001, 1/6001): denominators beyond the short fractions, so the rounded float dual
# leaves a residual that no bound row can absorb
CONE = [Row((Q(3), Q(-1)), Q(0)), Row((Q(1), Q(2000)), Q(0))]
E_CONE = ((Q(1), Q(0)), Q(1, 100))


def test_short_fractions_recover_an_exact_dual_without_bound_rows():
    cone = [Row((Q(3), Q(-1)), Q(0)), Row((Q(1), Q(3)), Q(0))]     # the dual (3/10, 1/10)
    proof = floatlp.safe_bound(cone, E_CONE, False, [0.3, 0.1])
    assert dict(proof) == {0: Q(3, 10), 1: Q(1, 10)}
    check_entails(cone, E_CONE, False, proof, "short fractions")
    assert floatlp.safe_bound(cone, E_CONE, False, [0.3, 0.1], None, ("dyadic", 24)) is None


def test_no_bound_row_the_support_solve_answers():
    assert floatlp.bound_rows(CONE, 2) == ([None, None], [None, None])
    y = [2000 / 6001, 1 / 6001]                       # floats: the residual is not 0
    for rounding in floatlp.SAFE_ROUNDINGS:
        assert floatlp.safe_bound(CONE, E_CONE, False, y, None, rounding) is None
    before = dict(floatlp.ROUTES)
    proof, decided = floatlp.farkas(CONE, E_CONE, False, _solve)
    assert decided and dict(proof) == {0: Q(2000, 6001), 1: Q(1, 6001)}
    check_entails(CONE, E_CONE, False, proof, "cone")
    assert floatlp.ROUTES["support_solve"] == before.get("support_solve", 0) + 1
    assert floatlp.ROUTES["safe_bound"] == before.get("safe_bound", 0)


def test_no_bound_row_and_no_support_solve_z3_answers(monkeypatch):
    monkeypatch.setattr(certify, "_solve", lambda vectors, target: None)
    oracle = _Oracle(2, None)
    assert oracle.float_lp
    proof = oracle.farkas(CONE, E_CONE, False)
    assert oracle.calls == 1 and proof is not None                    # z3 was asked
    check_entails(CONE, E_CONE, False, proof, "cone by z3")


def test_the_switch_turns_the_safe_bound_off(monkeypatch):
    rows = CELL + [Row((Q(1, 3), Q(1, 7)), Q(1, 5))]
    e = ((Q(1, 3), Q(1, 7)), Q(1, 4))
    before = dict(floatlp.ROUTES)
    monkeypatch.setenv("EXACTMAX_SAFE_BOUND", "0")
    proof, _ = floatlp.farkas(rows, e, False, _solve)
    check_entails(rows, e, False, proof, "old route")
    assert floatlp.ROUTES["safe_bound"] == before.get("safe_bound", 0)
    assert floatlp.ROUTES["support_solve"] == before.get("support_solve", 0) + 1
    monkeypatch.setenv("EXACTMAX_SAFE_BOUND", "1")
    proof, _ = floatlp.farkas(rows, e, False, _no_support_solve)
    check_entails(rows, e, False, proof, "new route")
    assert floatlp.ROUTES["safe_bound"] == before.get("safe_bound", 0) + 1


def test_the_dimension_decides_which_route_goes_first(monkeypatch):
    """The support solve first up to SAFE_BOUND_FIRST_ABOVE input dimensions (cheaper there),
    the safe bound first beyond (measured in benchmarks/safe_bound.py); each is the other's
    fallback, and both give proofs the kernel accepts."""
    rows = CELL + [Row((Q(1, 3), Q(1, 7)), Q(1, 5))]
    e = ((Q(1, 3), Q(1, 7)), Q(1, 4))
    monkeypatch.setattr(floatlp, "SAFE_BOUND_FIRST_ABOVE", 8)
    before = dict(floatlp.ROUTES)
    proof, _ = floatlp.farkas(rows, e, False, _solve)        # d = 2: the support solve
    check_entails(rows, e, False, proof, "support first")
    assert floatlp.ROUTES["support_solve"] == before.get("support_solve", 0) + 1
    assert floatlp.ROUTES["safe_bound"] == before.get("safe_bound", 0)
    proof, _ = floatlp.farkas(rows, e, False, lambda v, t: None)   # no support: safe bound
    check_entails(rows, e, False, proof, "safe bound second")
    assert floatlp.ROUTES["safe_bound"] == before.get("safe_bound", 0) + 1
    monkeypatch.setattr(floatlp, "SAFE_BOUND_FIRST_ABOVE", 1)
    proof, _ = floatlp.farkas(rows, e, False, _no_support_solve)   # d = 2 > 1: safe first
    check_entails(rows, e, False, proof, "safe bound first")
