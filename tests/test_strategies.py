"""The public strategies (exactmax.strategies): each draws what its docstring says, checked
independently (plain Fractions, brute force), and the search's helpers underneath."""

from fractions import Fraction
from itertools import combinations

from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from exactmax import strategies as xs
from exactmax.kernel.polyhedron import Box, Polyhedron
from exactmax.kernel.rational import Q, RatMatrix
from exactmax.prove.verify import VerifyOptions, verify_equal
from exactmax.search import SearchOptions, find_counterexample
from exactmax.search.vertices import polyhedron_vertices, simplest_between
from reference import F, maxout_reference


def _tight(dom, x):
    P = dom.as_polyhedron()
    return [i for i, (row, b) in enumerate(zip(P.A, P.b))
            if sum((a * v for a, v in zip(row, x)), Q(0)) == b]


def _rank(rows):
    return RatMatrix([list(r) for r in rows]).rank() if rows else 0


@given(xs.domains(2).flatmap(lambda d: st.tuples(st.just(d), xs.domain_points(d, "vertex"),
                                                 xs.domain_points(d, "face"),
                                                 xs.domain_points(d, "interior"),
                                                 xs.domain_points(d))))
def test_domain_points_are_vertices_faces_and_interior_points(case):
    dom, v, f, i, p = case
    P = dom.as_polyhedron()
    for x in (v, f, i, p):
        assert dom.contains(x)
    assert _rank([P.A[k] for k in _tight(dom, v)]) == 2       # a vertex: 2 independent
    assert _tight(dom, f)                                     # on a facet
    assert not _tight(dom, i)                                 # strictly inside


@given(st.integers(-30, 30), st.integers(1, 12), st.integers(0, 40), st.integers(1, 60))
def test_simplest_between_has_the_smallest_denominator(n, q, w, wq):
    lo = Fraction(n, q)
    hi = lo + Fraction(w, wq)
    s = simplest_between(Q(n, q), Q(n, q) + Q(w, wq))
    assert lo <= F(s) <= hi
    den = next(d for d in range(1, 10**4) if -(-lo * d // 1) <= hi * d // 1)  # brute force
    assert s.q == den
    nums = range(-(-lo * den // 1), hi * den // 1 + 1)
    assert abs(s.p) == min(abs(k) for k in nums)


@given(xs.polyhedra(2))
def test_polyhedron_vertices_are_exactly_the_tight_feasible_points(P):
    V = polyhedron_vertices(P)
    assert V and len(set(V)) == len(V)
    brute = set()
    for rows in combinations(range(len(P.b)), 2):
        (a, b), (c, d) = P.A[rows[0]], P.A[rows[1]]
        det = a * d - b * c
        if det == 0:
            continue
        e, f = P.b[rows[0]], P.b[rows[1]]
        x = ((e * d - b * f) / det, (a * f - e * c) / det)
        if P.contains(x):
            brute.add(x)
    assert set(V) == brute


@given(st.tuples(st.integers(-5, 5), st.integers(1, 5), st.integers(0, 9), st.integers(1, 9))
       .flatmap(lambda t: st.tuples(st.just(t), xs.rationals_in(Q(t[0], t[1]),
                                                                 Q(t[0], t[1]) + Q(t[2], t[3])))))
def test_rationals_in_stay_in_the_interval(case):
    (n, q, w, wq), v = case
    assert Q(n, q) <= v <= Q(n, q) + Q(w, wq)


def _on_tie_reference(net, x):
    """Some unit has two different pieces that are equal and maximal at x (Fractions)."""
    h = [F(v) for v in x]
    found = False
    for layer in net.layers:
        new = []
        for u in layer.units:
            vals = [sum((F(w) * hv for w, hv in zip(p.w, h)), Fraction(0)) + F(p.b)
                    for p in u.pieces]
            top = max(vals)
            winners = {(tuple(map(F, u.pieces[j].w)), F(u.pieces[j].b))
                       for j, v in enumerate(vals) if v == top}
            found = found or len(winners) > 1
            new.append(top)
        h = new
    return found


@settings(max_examples=40)
@given(xs.maxout_networks(max_depth=2, max_width=3, max_rank=3, dims=(1, 3), domain=True)
       .filter(lambda n: any(len(u.pieces) > 1 for l in n.layers for u in l.units))
       .flatmap(lambda n: st.tuples(st.just(n), xs.tie_points(n, n.domain))))
def test_tie_points_lie_on_a_tie_set_in_the_domain(case):
    net, x = case
    assert net.domain.contains(x)
    assert _on_tie_reference(net, x)


@settings(max_examples=10, suppress_health_check=[HealthCheck.nested_given])
@given(xs.mutated_transformers())
def test_search_and_verify_never_contradict_each_other_on_mutants(case):
    """A counterexample the search reports is a real one (the Fraction reference agrees),
    and verify never proves a pair the search has refuted."""
    from reference import transformer_reference
    net, tf, mutant, what = case
    r = find_counterexample(net, mutant, net.domain, SearchOptions(max_examples=20))
    if r.found:
        xf = [F(v) for v in r.x]
        assert maxout_reference(net, xf) != transformer_reference(mutant, xf), what
        v = verify_equal(net, mutant, net.domain, VerifyOptions(timeout_s=20))
        assert v.verdict != "proved", what


@settings(max_examples=15, suppress_health_check=[HealthCheck.nested_given])
@given(xs.compiled_transformers())
def test_compiled_transformers_equal_their_network_at_domain_points(case):
    net, tf = case
    assert find_counterexample(net, tf, net.domain, SearchOptions(max_examples=5)).found \
        is False


# The guide's example (docs/search.md; tests/test_docs_examples.py checks it is this code): a user
# property-tests their own construction.
from exactmax.construct.transformer import compile_transformer      # noqa: E402
from exactmax.kernel.maxout import evaluate_maxout                  # noqa: E402
from exactmax.kernel.transformer import evaluate_transformer        # noqa: E402


def my_construction(net):                 # yours; here exactmax's own, as a stand-in
    return compile_transformer(net).transformer


def points_of(net):                       # vertices, any points, points on tie sets
    return st.one_of(xs.domain_points(net.domain, "vertex"), xs.domain_points(net.domain),
                     xs.tie_points(net, net.domain))


@settings(max_examples=25)
@given(xs.maxout_networks(max_depth=2, domain=True)
       .flatmap(lambda net: st.tuples(st.just(net), points_of(net))))
def test_my_construction_is_exact(case):
    net, x = case
    assert evaluate_transformer(my_construction(net), x) == evaluate_maxout(net, x)


def test_the_readme_property_rejects_a_wrong_construction():
    """The same property fails for a construction with one weight off (it can fail)."""
    import pytest
    from mutants import weight_off

    # derandomized, and no shrinking: the test only needs the property to fail, and shrinking
    # a falsifying network (one compilation per step) can take minutes on a loaded machine
    @settings(max_examples=50, database=None, derandomize=True,
              phases=(Phase.explicit, Phase.reuse, Phase.generate))
    @given(xs.maxout_networks(max_depth=2, domain=True)
           .flatmap(lambda net: st.tuples(st.just(net), points_of(net))))
    def prop(case):
        net, x = case
        assert evaluate_transformer(weight_off(net, compile_transformer(net)), x) == \
            evaluate_maxout(net, x)
    with pytest.raises(AssertionError):
        prop()
