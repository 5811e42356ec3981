"""Domains: the kernel's checks of points, Farkas certificates and rays accept exactly the
right witnesses, and the z3 producer's answers are sound and exact."""

import pytest
from hypothesis import given, strategies as st

from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.polyhedron import (Box, Polyhedron, check_empty, check_member,
                                        check_upper_bound)
from exactmax.kernel.rational import Q
from exactmax.engine.lp import analyze_domain, check_unbounded
from strategies_local import vectors


def poly(rows, rhs):
    A = tuple(tuple(Q(v) for v in r) for r in rows)
    return Polyhedron(A, tuple(Q(v) for v in rhs), len(rows[0]))


# The triangle x >= 0, y >= 0, x + y <= 1.
TRIANGLE = poly([[-1, 0], [0, -1], [1, 1]], [0, 0, 1])
# x <= 0 and x >= 1: empty.
EMPTY = poly([[1], [-1]], [0, -1])
# The quadrant x >= 0, y >= 0: unbounded.
QUADRANT = poly([[-1, 0], [0, -1]], [0, 0])


def q(*vs):
    return tuple(Q(v) for v in vs)


def test_member_accepts_points_inside_and_rejects_points_outside():
    check_member(TRIANGLE, q(0, 0))
    check_member(TRIANGLE, (Q(1, 2), Q(1, 2)))  # on the face x + y = 1
    with pytest.raises(CheckFailed):
        check_member(TRIANGLE, (Q(1, 2), Q(501, 1000)))


def test_farkas_emptiness_certificate_and_its_tampered_versions():
    check_empty(EMPTY, q(1, 1))  # x - x <= 0 - 1
    for bad in (q(1, 2), q(0, 1), q(-1, 1), q(1)):
        with pytest.raises(CheckFailed):
            check_empty(EMPTY, bad)
    with pytest.raises(CheckFailed):  # a non-empty polyhedron has no certificate
        check_empty(TRIANGLE, q(1, 1, 1))


def test_upper_bound_certificate():
    # x <= 1 on the triangle: y = (0, 1, 1) gives x = (x + y) - y <= 1.
    assert check_upper_bound(TRIANGLE, q(1, 0), q(0, 1, 1)) == 1
    with pytest.raises(CheckFailed):
        check_upper_bound(TRIANGLE, q(1, 0), q(0, 2, 1))


def test_ray_certificate():
    check_unbounded(QUADRANT, q(0, 0), q(1, 3))
    with pytest.raises(CheckFailed):
        check_unbounded(QUADRANT, q(0, 0), q(1, -1))
    with pytest.raises(CheckFailed):
        check_unbounded(QUADRANT, q(0, 0), q(0, 0))


def test_analyze_triangle_gives_its_exact_bounding_box():
    r = analyze_domain(TRIANGLE)
    assert (r.empty, r.bounded) == (False, True)
    assert r.lower == q(0, 0) and r.upper == q(1, 1)


def test_analyze_detects_empty_and_unbounded():
    assert analyze_domain(EMPTY).empty
    r = analyze_domain(QUADRANT)
    assert not r.empty and not r.bounded
    check_unbounded(QUADRANT, r.point, r.unbounded_direction)


def test_a_box_as_polyhedron_has_the_same_points():
    b = Box(q(-1, 0), q(1, Q(1, 2)))
    P = b.as_polyhedron()
    for x in (q(-1, 0), q(1, 0), q(0, Q(1, 2)), q(2, 0), q(0, -1)):
        assert b.contains(x) == P.contains(x)
    assert Box(q(1), q(0)).is_empty()


@given(st.data())
def test_analyze_random_boxes_as_polyhedra(data):
    lo = data.draw(vectors(2, large=False))
    width = data.draw(vectors(2, large=False))
    up = tuple(a + abs(w) for a, w in zip(lo, width))
    r = analyze_domain(Box(lo, up).as_polyhedron())
    assert not r.empty and r.bounded
    assert r.lower == lo and r.upper == up
