"""Decide f = g on a polyhedron: proved (kernel-checked certificate), refuted (a point the
kernel evaluated), or unknown (with the reason).  Only the kernel's checks make a verdict.

Order of work: (0) where it applies, the layerwise certificate (one small certificate per
layer); (0') for two Maxout networks of the same depth, with ``certificate_kind`` and strategy
"auto", a layer correspondence (``prove/correspondence.py``: h^A_l = M_l h^B_l + m_l, found by
exact interpolation in milliseconds and checked by ``kernel/correspondence`` on all of Q^d;
kind "correspondence"); (1) translate both models to programs with the kernel's translation
(bilinear scores give Unknown); (2) build a split-tree certificate, which on the way finds a
point where the outputs differ if there is one: by default (``certificate_kind`` "auto" with
strategy "auto") the pair route first, a tree for the property "no x with a_o - b_o > 0 or
b_o - a_o > 0" of the pair program x -> (A(x), B(x)) (kind "pair-property", checked by
``kernel/pair.check_pair_property``), then, if that cannot be built (not on a timeout), or
always with ``certificate_kind`` "equivalence" or strategy "monolithic", a tree for A - B = 0
on every cell (kind "equivalence", checked by ``kernel/certificate.check_equal_on_domain``;
export-coq reads this kind); (3) if no certificate can be built, ask z3 for a difference over
the whole domain with the exact hardmax tie semantics; an unsat answer then gives "proved by
z3, no certificate" (trust: solver-only), never "certified".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import interruption
from ..engine.certify import CounterexampleFound, Limits, NoCertificate, build_certificate
from ..engine.smt import find_difference
from ..kernel.certificate import Tree, check_equal_on_domain
from ..kernel.correspondence import Correspondence
from ..kernel.errors import CheckFailed
from ..kernel.lattice import LatticeForms
from ..kernel.layerwise import LayerwiseCertificate, check_layerwise
from ..kernel.maxout import MaxoutNetwork, evaluate_maxout
from ..kernel.polyhedron import Box, Domain
from ..kernel.program import Program, Unsupported, program_of_maxout, program_of_transformer
from ..kernel.rational import Q
from ..kernel.transformer import Transformer, evaluate_transformer
from .layerwise import LayerDiffers, build_layerwise
from .pullback import layer_difference_points

if TYPE_CHECKING:
    from ..search.counterexample import SearchOptions


@dataclass(frozen=True, slots=True)
class VerifyOptions:
    timeout_s: float = 60.0
    max_leaves: int = 20000
    strategy: str = "auto"  # "auto", "layerwise" or "monolithic"
    certificate_kind: str = "auto"  # "auto", "equivalence" or "pair-property" (see _verify)
    correspondence: bool = True  # try a layer correspondence first (kind and strategy auto)
    lattice: bool = True  # and lattice normal forms (not with --coq: they have no Coq export)
    progress: Callable[[int], object] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Verdict:
    verdict: str  # "proved", "refuted" or "unknown"
    trust: str | None = None  # "kernel-checked" or "solver-only" (proved only)
    x: tuple[Q, ...] | None = None  # the counterexample (refuted only)
    outputs: tuple | None = None  # (A(x), B(x)) evaluated by the kernel
    reason: str | None = None
    certificate: Tree | LayerwiseCertificate | Correspondence | LatticeForms | None = None
    stats: dict = field(default_factory=dict)


def program_of(model) -> Program:
    return (
        program_of_maxout(model)
        if isinstance(model, MaxoutNetwork)
        else program_of_transformer(model)
    )


def evaluate(model, x):
    """The kernel's exact, definitional evaluation of either kind of model."""
    return (
        evaluate_maxout(model, x)
        if isinstance(model, MaxoutNetwork)
        else evaluate_transformer(model, x)
    )


def refute(a, b, domain: Domain, x) -> Verdict | None:
    """Refuted(x) if the kernel confirms x is in the domain and A(x) != B(x), else None."""
    if not domain.contains(x):
        return None
    ya, yb = evaluate(a, x), evaluate(b, x)
    if ya == yb:
        return None
    return Verdict("refuted", x=tuple(x), outputs=(ya, yb))


def refute_by_search(a, b, domain: Domain, options: SearchOptions):
    """(verdict, result): a Refuted verdict when the search (``search.find_counterexample``)
    finds a point and the kernel (``refute``: domain membership, both models evaluated again)
    confirms it, else None; ``result`` is the search's own record."""
    from ..search import find_counterexample

    r = find_counterexample(a, b, domain, options)
    if not r.found:
        return None, r
    return refute(a, b, domain, r.x), r


def verify_equal(a, b, domain: Domain, options: VerifyOptions = VerifyOptions()) -> Verdict:
    """Is A(x) = B(x) for every x in the domain?"""
    start = time.monotonic()
    if a.input_dim != b.input_dim or a.input_dim != domain.dim:
        raise ValueError("the two models and the domain must have the same input dimension")
    if a.out_dim != b.out_dim:
        return Verdict("unknown", reason=f"the models have {a.out_dim} and {b.out_dim} outputs")
    v = _verify(a, b, domain, options, start)
    v.stats["time_s"] = time.monotonic() - start
    return v


def verify_by_correspondence(
    a, b, stats: dict | None = None, lattice: bool = True
) -> Verdict | None:
    """Proved, with a layer correspondence the kernel accepted (A = B on all of Q^d, so on
    every domain), or where the widths differ lattice normal forms (with ``lattice``), or None
    (the reason in ``stats["correspondence_failed"]``)."""
    from .correspondence import NoCorrespondence, find_correspondence

    stats = {} if stats is None else stats
    t0 = time.monotonic()
    try:
        cert = find_correspondence(a, b)
    except NoCorrespondence as e:  # normal forms where the widths differ (of one shape: the
        stats["correspondence_failed"] = str(e)  # layerwise route is next, in full time)
        return verify_by_lattice(a, b, stats) if lattice and a.widths != b.widths else None
    finally:
        stats["correspondence_s"] = round(time.monotonic() - t0, 4)
    stats.update(
        strategy="correspondence",
        certificate_kind="correspondence",
        leaves_checked=sum(l.width for l in a.layers),
    )
    return Verdict("proved", "kernel-checked", certificate=cert, stats=dict(stats))


LATTICE_WORK = 20_000_000
"""The most (non-zero weights of both networks) x (input dimension + 1) for which
``verify_by_lattice`` computes the normal forms (about a second per million)."""


def verify_by_lattice(a, b, stats: dict) -> Verdict | None:
    """Proved, where A and B rewrite to one lattice normal form (``kernel/lattice.py``: A = B on
    all of Q^d, whatever their depths: duplicated, rescaled, permuted and pass-through units,
    ReLU pairs, max and min trees that make up a whole output), or None (the reason in
    ``stats["lattice_failed"]``)."""
    from ..kernel.affine import nonzero
    from ..kernel.lattice import LatticeForms, check_lattice

    if not (isinstance(a, MaxoutNetwork) and isinstance(b, MaxoutNetwork)):
        return None
    nnz = sum(
        len(list(nonzero(p.w))) for n in (a, b) for l in n.layers for u in l.units for p in u.pieces
    )
    if nnz * (a.input_dim + 1) > LATTICE_WORK:
        stats["lattice_failed"] = "too large for the normal forms"
        return None
    t0 = time.monotonic()
    try:
        atoms = check_lattice(a, b)
    except CheckFailed as e:
        stats["lattice_failed"] = str(e)
        return None
    finally:
        stats["lattice_s"] = round(time.monotonic() - t0, 4)
    stats.update(strategy="lattice", certificate_kind="lattice", leaves_checked=atoms)
    return Verdict("proved", "kernel-checked", certificate=LatticeForms(), stats=dict(stats))


def correspondence_first(a, b, certificate_kind: str = "auto", strategy: str = "auto") -> bool:
    """Should a layer correspondence (then lattice normal forms) be tried before anything else
    (before the search, in equiv)?  For two Maxout networks, kind and strategy auto: it takes
    milliseconds, a proof holds on all of Q^d, and there is then no counterexample to search
    for (a rescaled unit in a network of depth 8: 0.05 s, against 1.5-3 s when the layerwise
    route went first and failed)."""
    return certificate_kind == strategy == "auto" and all(
        isinstance(m, MaxoutNetwork) for m in (a, b)
    )


def _pair_first(a, b, options: VerifyOptions) -> bool:
    """Two one-layer Maxout networks, certificate kind auto: the layerwise certificate would
    be one split tree over the whole domain, on the same cells as the pair route's but built
    with exact LPs (measured 3-5x slower on issue #21's suite), so the pair route goes
    first."""
    return options.certificate_kind == "auto" and all(
        isinstance(m, MaxoutNetwork) and len(m.layers) == 1 for m in (a, b)
    )


def _verify_pair(
    a, b, domain: Domain, options: VerifyOptions, deadline: float, stats: dict
) -> Verdict | None:
    """A = B on the domain as the property of the pair program x -> (A(x), B(x)) with the
    forbidden outputs a_o - b_o > 0 or b_o - a_o > 0 (``tolerance.decide_tolerance`` with
    epsilon 0, checked by ``kernel/pair.check_pair_property``): proved with that tree as the
    certificate (kind "pair-property"), or refuted at a point the kernel evaluated; None
    (the reason in ``stats["pair_failed"]``) when it is undecided, for the caller to go on.

    It needs no alignment of the two models' layers: its cells split the input domain and
    the arguments both programs' max nodes select, like the equivalence route, but each
    cell's LP is solved in floats and made exact (measured 2-4x faster on issue #21's
    suite, with the same cells)."""
    from .tolerance import decide_tolerance

    left = deadline - time.monotonic()
    if left <= 0:
        stats["pair_failed"] = "no time left"
        return None
    try:
        ans = decide_tolerance(
            a,
            b,
            domain,
            Q(0),
            timeout_s=left,
            max_leaves=options.max_leaves,
            run_search=False,
            progress=options.progress,
        )
    except interruption.TimeLimit:  # the command's limit, reached inside the pair route:
        stats["pair_failed"] = "the time limit was reached"  # answer with what is known
        return None
    s = {
        "strategy": "pair",
        **{
            k: v
            for k, v in ans.stats.items()
            if k in ("leaves", "splits", "leaves_checked", "kernel_check_s", "program_nodes")
        },
    }
    if ans.verdict == "proved":
        return Verdict(
            "proved",
            "kernel-checked",
            certificate=ans.tree,
            stats=stats | s | {"certificate_kind": "pair-property"},
        )
    if ans.verdict == "refuted":
        v = refute(a, b, domain, ans.x)
        if v is not None:
            return Verdict(v.verdict, x=v.x, outputs=v.outputs, stats=stats | s)
        stats["pair_failed"] = "the point found was not confirmed by the kernel"
        return None
    stats["pair_failed"] = ans.reason
    return None


def _verify(a, b, domain: Domain, options: VerifyOptions, start: float) -> Verdict:
    deadline = start + options.timeout_s
    stats: dict = {}
    why = None
    limits = Limits(deadline, options.max_leaves, options.progress)
    if (
        (
            options.strategy == "layerwise"
            or options.strategy == "auto"
            and not _pair_first(a, b, options)
        )
        and options.certificate_kind != "pair-property"
        and isinstance(a, MaxoutNetwork)
        and isinstance(b, (Transformer, MaxoutNetwork))
    ):
        s: dict = {}
        try:
            cert, s = build_layerwise(a, b, domain, limits, s)
            stats.update(s)
            t0 = time.monotonic()
            stats["leaves_checked"] = check_layerwise(a, b, domain, cert)
            stats["kernel_check_s"] = time.monotonic() - t0
            stats["strategy"] = "layerwise"
            return Verdict("proved", "kernel-checked", certificate=cert, stats=stats)
        except Unsupported as e:
            return Verdict("unknown", reason=str(e), stats=stats)
        except LayerDiffers as e:
            why = f"layerwise: {e}"
            for x in layer_difference_points(a, b, domain, e, deadline):
                v = refute(a, b, domain, x)
                if v is not None:
                    return Verdict(
                        v.verdict,
                        x=v.x,
                        outputs=v.outputs,
                        stats={"strategy": "layerwise", "differs_in_layer": e.layer + 1},
                    )
            why += " (no point of the domain where the models differ was found from it)"
        except NoCertificate as e:
            why = f"layerwise: {e}"
        except CheckFailed as e:  # a producer bug: never trusted, reported
            why = f"layerwise: the kernel rejected the certificate ({e})"
        stats = {"layerwise_failed": why, "layers": s.get("layers", [])}
    if options.strategy == "layerwise" and why is None:
        why = "layerwise needs a Maxout network first"
    if (
        options.correspondence
        and options.strategy == "auto"
        and options.certificate_kind == "auto"
        and isinstance(a, MaxoutNetwork)
        and isinstance(b, MaxoutNetwork)
    ):
        v = verify_by_correspondence(a, b, stats, options.lattice)
        if v is not None:
            return v
    if options.strategy != "layerwise" and (
        options.certificate_kind == "pair-property"
        or (options.certificate_kind == "auto" and options.strategy == "auto")
    ):
        v = _verify_pair(a, b, domain, options, deadline, stats)
        if v is not None:
            return v
        why = (why + "; " if why else "") + f"pair: {stats.pop('pair_failed')}"
        if deadline - time.monotonic() <= 0:
            return Verdict(
                "unknown", reason=f"timeout: the time limit was reached ({why})", stats=stats
            )
        if options.certificate_kind == "pair-property":  # no other kind was asked for
            return Verdict("unknown", reason=why, stats=stats)
    try:
        pa, pb = program_of(a), program_of(b)
    except Unsupported as e:
        return Verdict("unknown", reason=str(e))
    P = domain.as_polyhedron()
    box = domain if isinstance(domain, Box) else None
    stats["program_nodes"] = [len(pa.nodes), len(pb.nodes)]
    stats["strategy"] = "monolithic"
    try:
        tree, s = build_certificate(pa, pb, P, box, limits)
        stats.update(s)
        t0 = time.monotonic()
        stats["leaves_checked"] = check_equal_on_domain(pa, pb, P, tree)
        stats["kernel_check_s"] = time.monotonic() - t0
        return Verdict("proved", "kernel-checked", certificate=tree, stats=stats)
    except CounterexampleFound as e:
        v = refute(a, b, domain, e.x)
        if v is not None:
            return Verdict(v.verdict, x=v.x, outputs=v.outputs, stats=stats)
        why = "a cell's outputs differ but the kernel did not confirm the point"
    except NoCertificate as e:
        why = (why + "; " if why else "") + f"monolithic: {e}"
    except CheckFailed as e:  # a producer bug: never trusted, reported
        why = (why + "; " if why else "") + f"the kernel rejected the certificate ({e})"
    left = deadline - time.monotonic()
    if left <= 0:
        return Verdict(
            "unknown", reason=f"timeout: the time limit was reached ({why})", stats=stats
        )
    status, x = find_difference(pa, pb, P, left)
    if status == "sat":
        v = refute(a, b, domain, x)
        if v is not None:
            return Verdict(v.verdict, x=v.x, outputs=v.outputs, stats=stats)
        return Verdict("unknown", reason="z3's model was not confirmed by the kernel", stats=stats)
    if status == "unsat":
        return Verdict(
            "proved", "solver-only", reason=f"proved by z3, no certificate: {why}", stats=stats
        )
    return Verdict(
        "unknown", reason=f"z3: {x} (within the time limit); no certificate: {why}", stats=stats
    )
