"""Counterexample search: an exact point x of the domain with A(x) != B(x), found with
hypothesis and confirmed by the kernel's evaluators.

Order of work (each point is evaluated exactly by ``MaxoutEvaluator`` /
``TransformerEvaluator``):

1. explicit points, each tried as soon as it is built and before hypothesis generates any
   random one: the domain's vertices, its centre, and points on the tie sets of both models
   (``ties.py``: two pieces of a unit, a ReLU's argument and 0, or two attention scores
   equal and maximal), projected from the centre and from the vertices.  A difference
   confined to a lower-dimensional set (one vertex, a hyperplane where one network breaks)
   or to a thin neighbourhood of one lies on such a set.  Hypothesis does not shrink
   explicit examples, so a point found here goes to step 3 directly;
2. random points (``exactmax.strategies``: small denominators first, sometimes very large
   ones), points near the explicit ones, and each of them, on a drawn flag, snapped onto the
   nearest tie set.  ``hypothesis.target`` steers the generation towards the tie sets (the
   smallest gap between the two largest arguments of any max) and records |A(x) - B(x)|,
   which is 0 on every point that is not a counterexample (the property fails on the first
   difference, so that target ranks nothing before it: the tie target does the steering);
3. shrinking: hypothesis shrinks a random draw that failed, then every coordinate is replaced by
   the simplest rational (Stern-Brocot) of a shrinking interval around it that keeps the
   point in the domain and a counterexample.

Reproducible: hypothesis's database is off; without a seed the run is derandomized (the same
examples every time for one version of exactmax: hypothesis derives that seed from the source
text of the search function, so an edit of it changes the draws), with one it is
``hypothesis.seed(seed)``.  A search that finds nothing
proves nothing: the answer is "none found in N tries", never "equivalent".
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, Verbosity, given, settings, target
from hypothesis import seed as hseed
from hypothesis import strategies as st

from .. import interruption
from ..kernel.affine import nonzero
from ..kernel.maxout import MaxoutNetwork
from ..kernel.polyhedron import Box, Domain
from ..kernel.program import Program, Unsupported, program_of_maxout, program_of_transformer
from ..kernel.rational import Q
from ..vectorized.program import evaluate_nodes
from ..vectorized.scaled import MaxoutEvaluator, TransformerEvaluator
from .ties import local_forms, project_to_tie, tie_gap, ties_of
from .vertices import centroid, simplest_between, vertices


@dataclass(frozen=True, slots=True)
class SearchOptions:
    max_examples: int = 1000  # random examples (hypothesis's max_examples)
    seed: int | None = None  # None: derandomized
    max_explicit: int = 2000  # vertices and tie points tried first
    time_budget_s: float | None = None  # stop starting new work after this (None: no limit)
    simplify: bool = True  # shrink the coordinates to simple rationals
    targeted: bool = True  # False: random points only (no explicit examples, no
    # tie snapping or targets): the ablation of the benchmark


@dataclass(frozen=True, slots=True)
class SearchResult:
    found: bool
    x: tuple[Q, ...] | None = None  # the counterexample, in the domain
    outputs: tuple | None = None  # (A(x), B(x)), evaluated by the kernel
    tried: int = 0  # points evaluated before the first difference (or all)
    phase: str | None = None  # where the first difference was met
    time_s: float = 0.0
    stats: dict = field(default_factory=dict)


class _Found(Exception):
    def __init__(self, x):
        super().__init__("counterexample")
        self.x = x


def program_of(model) -> Program:
    return (
        program_of_maxout(model)
        if isinstance(model, MaxoutNetwork)
        else program_of_transformer(model)
    )


def evaluator_of(model):
    """The kernel's exact evaluator of either kind of model (in work proportional to the
    non-zero weights for a mostly sparse Maxout network)."""
    from ..vectorized import SparseMaxoutEvaluator, mostly_sparse

    if isinstance(model, MaxoutNetwork):
        return SparseMaxoutEvaluator(model) if mostly_sparse(model) else MaxoutEvaluator(model)
    return TransformerEvaluator(model)


def model_size(model) -> int:
    """The number of non-zero weights of a model (what evaluation and tie sets cost)."""

    def nz(M):  # read by the entries of sparse rows and matrices
        return sum(1 for _, row in nonzero(M) for _ in nonzero(row))

    if isinstance(model, MaxoutNetwork):
        n = sum(nz(p.w for p in u.pieces) + len(u.pieces) for l in model.layers for u in l.units)
        return n + (nz(model.output.W) + len(model.output.b) if model.output else 0)
    n = nz(model.embedding) + nz(model.positions) + nz(model.readout.map.W)
    for sub in model.sublayers:
        if hasattr(sub, "inner"):
            n += nz(sub.inner.W) + nz(sub.outer.W) + len(sub.inner.b) + len(sub.outer.b)
        else:
            n += sum(nz(h.query) + nz(h.key) + nz(h.value) + nz(h.out) for h in sub.heads)
    return n


def _float(v: Q) -> float:
    """A float for hypothesis's targets only (guidance, never an answer), clamped to 1e300."""
    try:
        return max(-1e300, min(1e300, int(v.p) / int(v.q)))
    except OverflowError:
        return 1e300 if v > 0 else -1e300


@dataclass(slots=True)
class _Geometry:
    """What the search knows of the domain: membership, vertices, a bounding box, a centre."""

    domain: Domain
    vertices: list
    lower: tuple
    upper: tuple
    centre: tuple

    @staticmethod
    def of(dom: Domain) -> _Geometry:
        V = vertices(dom)
        if isinstance(dom, Box):
            centre = tuple((lo + hi) / 2 for lo, hi in zip(dom.lower, dom.upper))
            return _Geometry(dom, V, dom.lower, dom.upper, centre)
        from ..engine.lp import analyze_domain  # z3 only for a polyhedron

        r = analyze_domain(dom)
        if r.empty:
            raise ValueError("the domain is empty")
        if V and r.bounded:
            centre = centroid(V)
            lower, upper = r.lower, r.upper
        else:  # unbounded: search a box of radius 16 around a point of the domain
            assert r.point is not None  # a non-empty domain's report has a point
            centre = tuple(r.point)
            lower = tuple(c - 16 for c in centre)
            upper = tuple(c + 16 for c in centre)
            if r.bounded:
                lower, upper = r.lower, r.upper
        assert lower is not None and upper is not None  # a bounded domain's report has its box
        return _Geometry(dom, V, tuple(lower), tuple(upper), centre)

    def contains(self, x) -> bool:
        return self.domain.contains(x)


class _Search:
    """One search: the two models, their kernel evaluators and programs, the counters."""

    def __init__(self, a, b, dom: Domain, opts: SearchOptions):
        self.start = time.monotonic()
        self.deadline = None if opts.time_budget_s is None else self.start + opts.time_budget_s
        self.a, self.b, self.opts = a, b, opts
        self.eva, self.evb = evaluator_of(a), evaluator_of(b)
        self.geo = _Geometry.of(dom)
        self.programs: list = []
        self.sides: list = []
        self.tried = 0
        self.seen: set = set()
        self.first: tuple | None = None  # (x, phase, tried) of the first difference
        self._built = False

    def build_programs(self) -> None:
        """The kernel's programs of both models, for their tie sets (once; skipped when the
        time budget is spent, and for bilinear scores, where no program exists)."""
        if self._built:
            return
        self._built = True
        for side, m in enumerate((self.a, self.b)):
            if self.out_of_time():
                return
            try:
                p = program_of(m)
            except Unsupported:  # bilinear scores: no tie sets to aim at, random search only
                continue
            if ties_of(p):
                self.programs.append(p)
                self.sides.append(side)

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def outputs(self, x):
        """(A(x), B(x)) by the kernel's evaluators; counts x as tried the first time."""
        if x not in self.seen:
            self.seen.add(x)
            self.tried += 1
        return self.eva.evaluate(x), self.evb.evaluate(x)

    def differs(self, x) -> bool:
        ya, yb = self.outputs(x)
        return ya != yb

    # ------------------------------------------------------------------ explicit examples

    def explicit(self):
        """(x, kind) for the vertices, the centre, then tie points projected from the centre
        and from each vertex, interleaved over the two programs, without repeats, at most
        ``max_explicit``; lazily, so that the first difference stops the work."""
        limit, geo = self.opts.max_explicit, self.geo
        seen = set()

        def fresh(x):
            if x is None or x in seen or not geo.contains(x):
                return False
            seen.add(x)
            return True

        for v in geo.vertices:
            if len(seen) >= limit or self.out_of_time():
                return
            if fresh(v):
                yield v, "vertex"
        if len(seen) < limit and fresh(geo.centre):
            yield geo.centre, "centre"
        self.build_programs()
        bounds = (geo.lower, geo.upper)
        for base in [geo.centre] + list(geo.vertices):
            for i, p in enumerate(self.programs):
                if len(seen) >= limit or self.out_of_time():
                    return
                start = local_forms(p, base)
                for tie in ties_of(p):
                    y = project_to_tie(p, base, tie, geo.contains, bounds, start=start)
                    if fresh(y):
                        yield y, f"tie of {'AB'[self.sides[i]]}"
                    if len(seen) >= limit or self.out_of_time():
                        return

    # -------------------------------------------------------------------- random examples

    def strategy(self, anchors):
        """(x, snap): a point of the domain, and an optional (program, seed) to snap x onto
        the nearest tie set of that program."""
        from ..strategies import rationals_in

        geo = self.geo
        boxed = st.tuples(*(rationals_in(lo, hi) for lo, hi in zip(geo.lower, geo.upper)))
        if not isinstance(geo.domain, Box):
            boxed = boxed.map(self._into_domain)
        options = [boxed]
        if anchors:
            options.append(
                st.tuples(
                    st.sampled_from(anchors),
                    st.lists(st.integers(-8, 8), min_size=len(geo.lower), max_size=len(geo.lower)),
                    st.integers(1, 40),
                ).map(self._near)
            )
        point = st.one_of(*options)
        snap = st.none()
        if self.programs:
            snap = st.one_of(st.none(), st.integers(0, len(self.programs) - 1))
        return st.tuples(point, snap)

    def _into_domain(self, x):
        """x, or the first of c + (x - c) / 2^k (k = 1, 2, ...; c the centre) in the domain:
        points of the bounding box pulled into a polyhedron along the segment to its centre."""
        c = self.geo.centre
        for _ in range(64):
            if self.geo.contains(x):
                return x
            x = tuple((u + v) / 2 for u, v in zip(x, c))
        return c

    def _near(self, t):
        """anchor + offset / 2^k, or the anchor itself when that leaves the domain."""
        x, offset, k = t
        y = tuple(v + Q(o, 1 << k) for v, o in zip(x, offset))
        return y if self.geo.contains(y) else x

    def snap(self, x, i: int):
        """x projected onto the tie set of program i's node with the smallest gap at x."""
        p = self.programs[i]
        start = local_forms(p, x)
        val = start[0]
        best, best_gap = None, None
        for tie in ties_of(p):
            g = abs(val[tie.a] - val[tie.b])
            if best_gap is None or g < best_gap:
                best, best_gap = tie, g
        if best is None or best_gap == 0:
            return None
        return project_to_tie(
            p, x, best, self.geo.contains, (self.geo.lower, self.geo.upper), start=start
        )


def _unwrap(err: BaseException):
    """The _Found inside an exception (or an exception group) from hypothesis, if any."""
    if isinstance(err, _Found):
        return err
    for inner in getattr(err, "exceptions", ()):
        f = _unwrap(inner)
        if f is not None:
            return f
    return None


def simplify_point(x, still_bad, lower, upper, rounds: int = 40):
    """Coordinate by coordinate, the simplest rational of [x_i - r, x_i + r] (r = (upper_i -
    lower_i) / 2^j, j = 0, 1, ...) for which ``still_bad`` holds: a point of the same kind
    with small denominators."""
    x = list(x)
    for i in range(len(x)):
        width = upper[i] - lower[i]
        for j in range(rounds):
            r = width / (1 << j) if width else Q(0)
            cand = simplest_between(max(lower[i], x[i] - r), min(upper[i], x[i] + r))
            if cand == x[i]:
                break
            y = x[:i] + [cand] + x[i + 1 :]
            if still_bad(tuple(y)):
                x = y
                break
            if not width:
                break
    return tuple(x)


def find_counterexample(
    a, b, domain: Domain, options: SearchOptions = SearchOptions()
) -> SearchResult:
    """An exact x in the domain with A(x) != B(x), or found=False after ``tried`` points."""
    if a.input_dim != b.input_dim or a.input_dim != domain.dim:
        raise ValueError("the two models and the domain must have the same input dimension")
    if a.out_dim != b.out_dim:
        raise ValueError(f"the models have {a.out_dim} and {b.out_dim} outputs")
    s = _Search(a, b, domain, options)
    anchors, found = [], None
    if options.targeted:  # 1. explicit points, before any random one
        for x, kind in s.explicit():
            anchors.append(x)
            if s.differs(x):
                found, s.first = x, (x, f"explicit ({kind})", s.tried)
                break
    n_explicit, t_explicit = len(anchors), time.monotonic() - s.start

    def prop(case):  # 2. random and targeted points; hypothesis shrinks a failing draw
        interruption.check()
        x, snap = case
        if s.first is None and s.out_of_time():
            return  # budget spent: no new work (a failure seen before is always replayed)
        points = [x]
        if snap is not None:
            y = s.snap(x, snap)
            if y is not None:
                points.append(y)
        for y in points:
            if not s.geo.contains(y):  # cannot happen for the strategy's points; a guard
                continue
            ya, yb = s.outputs(y)
            if ya != yb:
                if s.first is None:
                    s.first = (y, "random" if y is x else "random (snapped to a tie)", s.tried)
                raise _Found(y)
        if s.programs:
            gaps = [tie_gap(p, evaluate_nodes(p, x)) for p in s.programs]
            known = [g for g in gaps if g is not None]
            if known:
                target(-min(_float(g) for g in known), label="closeness to a tie set")
        ya, yb = s.outputs(x)
        target(
            max((abs(_float(u - v)) for u, v in zip(ya, yb)), default=0.0), label="|A(x) - B(x)|"
        )

    interruption.check()  # hypothesis may have swallowed the interruption's exception
    if found is None:
        if options.targeted:
            s.build_programs()
        cfg = settings(
            max_examples=max(1, options.max_examples),
            derandomize=options.seed is None,
            database=None,
            deadline=None,
            verbosity=Verbosity.quiet,
            phases=(Phase.generate, Phase.target, Phase.shrink),
            suppress_health_check=list(HealthCheck),
            report_multiple_bugs=False,
            print_blob=False,
        )
        test = cfg(given(case=s.strategy(anchors))(prop))
        if options.seed is not None:
            test = hseed(options.seed)(test)
        try:
            test()
        except Exception as e:  # hypothesis re-raises the shrunk example's _Found
            err = _unwrap(e)
            if err is None:
                raise
            found = err.x
    interruption.check()
    stats = {
        "explicit": n_explicit,
        "explicit_s": round(t_explicit, 4),
        "ties_programs": len(s.programs),
    }
    if found is None:
        return SearchResult(False, tried=s.tried, time_s=time.monotonic() - s.start, stats=stats)
    tried_first = s.first[2] if s.first else s.tried
    x = found
    if options.simplify:  # 3. the simplest rationals that keep the difference
        x = simplify_point(
            x, lambda y: s.geo.contains(y) and s.differs(y), s.geo.lower, s.geo.upper
        )
    ya, yb = s.eva.evaluate(x), s.evb.evaluate(x)
    if not s.geo.contains(x) or ya == yb:  # cannot happen: both were checked above
        raise AssertionError("the search lost its counterexample")
    stats["shrink_points"] = s.tried - tried_first
    stats["shrunk"] = x != found
    return SearchResult(
        True,
        x=x,
        outputs=(ya, yb),
        tried=tried_first,
        phase=s.first[1] if s.first else None,
        time_s=time.monotonic() - s.start,
        stats=stats,
    )
