"""``exactmax verify`` and ``exactmax equiv``: two models equal on a domain, proved with a
certificate the kernel checks, refuted by a point the kernel evaluated, unknown, or vacuous
(the domain empty), with what every such answer is about (``about.claim_about``, which
check-cert and export-coq print too); and ``check-cert``, which hands property and
pair-property certificates to their commands."""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import replace
from typing import Any

from .. import jsonout
from ..exits import (
    EXIT_OK,
    EXIT_REFUTED,
    EXIT_SOLVER_ONLY,
    EXIT_UNKNOWN,
    UsageError,
)
from ..io import InputError, load_model
from ..io.models import model_domain
from ..io.numbers import approx_point, difference_lines, q_str
from ..kernel.maxout import MaxoutNetwork
from ..progress import cells_certified
from .about import (
    about_json,
    about_line,
    answer_vacuous,
    cert_rejected,
    certificate_not_written,
    claim_about,
)


def _verify_models(args, a, b, names, started: float | None = None) -> int:
    """verify / equiv of two loaded models (``decide_equal``), the certificate written
    (``equality_certificate``) and the answer printed; ``--timeout`` counts from ``started``
    (the command's start: compiling and the pre-search are part of the limit)."""
    dom = model_domain(a, args.domain) if args.domain else (a.domain or b.domain)
    v, about, facts = decide_equal(
        a,
        b,
        dom,
        names,
        timeout=args.timeout,
        max_leaves=args.max_leaves,
        strategy=args.strategy,
        certificate_kind=getattr(args, "certificate_kind", None) or "auto",
        search=not args.no_search,
        progress=None if args.json else cells_certified(args),
        started=started,
        lattice=not getattr(args, "coq", False),  # lattice normal forms have no Coq export
    )
    if v is None:
        return answer_vacuous(args, about)
    from ..export.recheck import certificate_path, checked_by, coq_answer, record

    cert_error, coq, why, (path, scratch) = None, None, None, certificate_path(args)
    try:
        written = False
        if path and v.verdict == "proved" and v.trust == "kernel-checked":
            from ..io import write_json_atomic

            try:
                write_json_atomic(path, equality_certificate(a, b, dom, v, facts), compact=True)
                written = True
            except InputError as e:  # the verdict stands; say it, then the error, exit 2
                cert_error = str(e)
        if v.verdict == "proved" and cert_error is None:  # --coq (#35): coqc proves it too
            coq, why = coq_answer(args, path, written)
            if why is not None:
                v = replace(v, verdict="unknown", trust=None, reason=why)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    out = equality_json(v, about, names, args.cert, cert_error)
    record(args, out, coq, why)
    if coq is not None and not coq.proved and args.cert:
        out["certificate"] = args.cert  # written: the kernel accepted it
    if args.json:
        print(jsonout.dumps(out))
    elif v.verdict == "proved":
        head = f"proved ({checked_by(coq)})"
        if v.stats.get("certificate_kind") == "lattice":
            print(
                f"{head}: {names[0]} = {names[1]} on all "
                f"of Q^{a.input_dim}, hence on the domain; both rewrite to one lattice normal "
                f"form ({v.stats.get('leaves_checked')} atoms), {out['time_s']:.2f} s"
                + (f"; certificate written to {args.cert}" if out["certificate"] else "")
            )
        elif v.stats.get("certificate_kind") == "correspondence":
            print(
                f"{head}: {names[0]} = {names[1]} on all "
                f"of Q^{a.input_dim}, hence on the domain; a layer correspondence of "
                f"{v.stats.get('leaves_checked')} units, {out['time_s']:.2f} s"
                + (f"; certificate written to {args.cert}" if out["certificate"] else "")
            )
        elif v.trust == "kernel-checked":
            print(
                f"{head}: {names[0]} = {names[1]} on the "
                f"domain; {v.stats.get('leaves_checked')} cells, "
                f"{out['time_s']:.2f} s"
                + (f"; certificate written to {args.cert}" if out["certificate"] else "")
            )
        else:
            print(
                f"proved by z3, no certificate (trust: solver-only; exit status "
                f"{EXIT_SOLVER_ONLY}): {v.reason}"
            )
            if args.cert:
                print(f"exactmax: note: no certificate written to {args.cert}", file=sys.stderr)
    elif v.verdict == "refuted":
        by = (
            "; found by the search"
            if v.stats.get("strategy") == "search"
            else f"; found where layer {v.stats['differs_in_layer']} differs"
            if v.stats.get("differs_in_layer")
            else ""
        )
        print(
            f"refuted: {names[0]} and {names[1]} differ at a point of the domain "
            f"(evaluated by the kernel{by})"
        )
        assert v.x is not None and v.outputs is not None
        print(difference_lines(v.x, names, v.outputs))
    else:
        print(f"unknown: {v.reason}")
    if not args.json:
        if coq is not None and coq.proved:
            print(f"  {coq.line()}")
        print("  " + about_line(about))
    if cert_error is not None:
        return certificate_not_written(cert_error)
    if v.verdict == "proved" and v.trust != "kernel-checked":
        return EXIT_SOLVER_ONLY
    return {"proved": EXIT_OK, "refuted": EXIT_REFUTED}.get(v.verdict, EXIT_UNKNOWN)


def decide_equal(
    a,
    b,
    dom,
    names,
    *,
    timeout: float,
    max_leaves: int = 20000,
    strategy: str = "auto",
    certificate_kind: str = "auto",
    search: bool = True,
    progress=None,
    started: float | None = None,
    lattice: bool = True,
):
    """What verify and equiv decide about A = B on the domain ``dom`` (None: there is none,
    a usage error), before anything is printed or written: (the verdict, what it is about,
    the kernel-checked domain facts); the verdict is None when the domain is empty (the
    answer is "vacuous").  A layer correspondence first where one may exist (milliseconds),
    then the short search (``search``), then the proof (``verify_equal``) with what is left
    of ``timeout`` seconds counted from ``started``."""
    from .verify import Verdict, VerifyOptions, verify_equal

    started = time.monotonic() if started is None else started
    if dom is None:
        raise UsageError("no domain: give one with --domain FILE or in the first model")
    if a.input_dim != b.input_dim:
        raise UsageError(
            f"{names[0]} has input dimension {a.input_dim} but {names[1]} has {b.input_dim}"
        )
    if dom.dim != a.input_dim:
        raise UsageError(f"the domain has dimension {dom.dim}, the models {a.input_dim}")
    if timeout <= 0:
        raise UsageError(f"--timeout: expected a positive number of seconds, got {timeout}")
    kind = checked_certificate_kind(certificate_kind, strategy)
    about, facts = claim_about(a, b, dom)
    if facts.empty:
        return None, about, facts
    from .verify import correspondence_first, verify_by_correspondence

    v, found, tried = None, None, False
    pre: dict = {}
    if correspondence_first(a, b, kind, strategy):  # milliseconds, before the search
        tried = True
        v = verify_by_correspondence(a, b, pre, lattice)
        if v is not None:
            v.stats["time_s"] = time.monotonic() - started
    if v is None:
        v, found = _short_search(search, a, b, dom)
    if v is None:
        left = timeout - (time.monotonic() - started)
        if left > 0:
            v = verify_equal(
                a,
                b,
                dom,
                VerifyOptions(
                    timeout_s=left,
                    max_leaves=max_leaves,
                    strategy=strategy,
                    certificate_kind=kind,
                    correspondence=not tried,
                    lattice=lattice,
                    progress=progress,
                ),
            )
        else:
            v = Verdict(
                "unknown",
                reason=f"timeout after {timeout:g} s (spent before the proof began)",
                stats={"time_s": 0.0},
            )
    if found is not None:
        v.stats["search"] = found
    if "correspondence_failed" in pre:
        v.stats.setdefault("correspondence_failed", pre["correspondence_failed"])
    return v, about, facts


def equality_certificate(a, b, dom, v, facts) -> dict:
    """The JSON object ``--cert`` writes for a kernel-checked proof of A = B on ``dom``
    (``decide_equal``'s verdict ``v`` and domain facts): an exactmax/pair-property-certificate
    for A = B as |A - B| <= 0, else an exactmax/certificate."""
    from ..io.certificates import certificate_to_json

    if v.stats.get("certificate_kind") == "pair-property":  # A = B as |A - B| <= 0
        from ..io.pair_certificate import pair_certificate_to_json
        from ..kernel.rational import Q

        return pair_certificate_to_json(
            a,
            b,
            dom,
            Q(0),
            v.certificate,
            {k: v.stats[k] for k in ("leaves", "splits") if k in v.stats},
        )
    return certificate_to_json(
        a,
        b,
        dom,
        v.certificate,
        {k: val for k, val in v.stats.items() if k in ("leaves", "splits", "strategy")},
        facts.witness,
    )


EQUALITY_STATS = (
    "leaves",
    "splits",
    "lp_calls",
    "float_lp_calls",
    "program_nodes",
    "strategy",
    "layerwise_failed",
    "layers",
    "correspondence_failed",
    "same_max",
    "differs_in_layer",
    "search",
)
"""The statistics of a verify / equiv answer that ``--json`` prints (``stats``)."""


def equality_json(v, about, names, cert: str | None, cert_error: str | None) -> dict:
    """The ``--json`` object of verify / equiv (``jsonout.dumps`` adds the common keys):
    ``decide_equal``'s verdict ``v`` and ``about``, the models' ``names``, the certificate's
    path ``cert`` (None: not asked for) and the error that kept it from being written."""
    out = {
        "verdict": v.verdict,
        "trust": v.trust,  # null for a refutation: the point is the evidence
        "reason": v.reason,
        "time_s": round(v.stats.get("time_s", 0.0), 3),
        **about_json(about),
        "counterexample": None,
        "stats": {k: val for k, val in v.stats.items() if k in EQUALITY_STATS},
        "certificate": cert
        if cert and v.trust == "kernel-checked" and cert_error is None
        else None,
        "certificate_kind": (
            v.stats.get("certificate_kind") or certificate_kind_written(v.certificate)
            if v.verdict == "proved" and v.trust == "kernel-checked"
            else None
        ),
    }
    if cert_error is not None:
        out["certificate_error"] = cert_error
    if v.verdict == "refuted":
        assert v.x is not None and v.outputs is not None  # a refutation carries its point
        out["counterexample"] = {
            "x": [q_str(t) for t in v.x],
            "x_approx": approx_point(v.x),
            "outputs": {
                names[0]: [q_str(t) for t in v.outputs[0]],
                names[1]: [q_str(t) for t in v.outputs[1]],
            },
            "outputs_approx": {n: approx_point(y) for n, y in zip(names, v.outputs)},
        }
    return out


CERTIFICATE_KINDS = ("auto", "equivalence", "pair-property")
"""--certificate-kind: "equivalence" is an exactmax/certificate (layerwise or a split tree
for A - B = 0; export-coq reads it), "pair-property" an exactmax/pair-property-certificate
(a split tree for the pair program x -> (A(x), B(x)) with no output where a_o != b_o; faster
to build on models whose layers are not aligned), "auto" a layer correspondence (two Maxout
networks of the same depth related layer by layer, A = B on all of Q^d; an exactmax/certificate
that export-coq does not read) or the layerwise certificate where one applies, else the
pair-property one."""


def certificate_kind_of(args) -> str:
    """--certificate-kind, checked against --strategy."""
    return checked_certificate_kind(
        getattr(args, "certificate_kind", None) or "auto", args.strategy
    )


def checked_certificate_kind(kind: str, strategy: str) -> str:
    """A certificate kind (``CERTIFICATE_KINDS``), checked against the strategy."""
    if kind == "pair-property" and strategy != "auto":
        raise UsageError(
            f"--certificate-kind pair-property goes with --strategy auto (a "
            f"{strategy} certificate is an equivalence certificate)"
        )
    return kind


SHORT_SEARCH: dict[str, Any] = dict(max_examples=40, max_explicit=200, time_budget_s=0.5)
"""The budget of the search that verify and equiv run first (--no-search skips it)."""


SHORT_SEARCH_MAX_WEIGHTS = 20000
"""Larger models skip it (preparing their evaluators and tie sets alone takes seconds)."""


def _short_search(search: bool, a, b, dom):
    """(Refuted verdict or None, search record or None): the short search before a proof
    (none unless ``search``)."""
    if not search:
        return None, None
    from ..search import SearchOptions
    from ..search.counterexample import model_size
    from .verify import Verdict, refute_by_search

    size = model_size(a) + model_size(b)
    if size > SHORT_SEARCH_MAX_WEIGHTS:
        return None, {
            "skipped": f"{size} non-zero weights (more than "
            f"{SHORT_SEARCH_MAX_WEIGHTS}); exactmax search runs a longer "
            "search"
        }
    try:
        v, r = refute_by_search(a, b, dom, SearchOptions(**SHORT_SEARCH))
    except ValueError:  # e.g. softmax attention: no exact value to compare; verify decides
        return None, None
    record = {"found": r.found, "tried": r.tried, "time_s": round(r.time_s, 3)}
    if v is None:
        return None, record
    return Verdict(
        "refuted", x=v.x, outputs=v.outputs, stats={"strategy": "search", "time_s": r.time_s}
    ), record


def _check_cert_path(args, inputs) -> None:
    from ..io.models import check_outputs

    check_outputs([("--cert", args.cert)], inputs + [("--domain", args.domain)])
    from ..export.recheck import require_coq

    require_coq(args)


def run_verify(args) -> int:
    """``verify NET [--transformer TF]``: the Transformer (compiled from NET by default)
    equals NET on the domain: proved, refuted, unknown or vacuous (``_verify_models``)."""
    started = time.monotonic()
    _check_cert_path(args, [("NET.json", args.model), ("--transformer", args.transformer)])
    net = network_to_verify(load_model(args.model), args.model)
    if args.transformer:
        tf = load_model(args.transformer)
        names = (args.model, args.transformer)
    else:
        dom = model_domain(net, args.domain)
        tf = compiled_to_verify(net, dom, args.model, args.domain)
        names = (args.model, "its compiled Transformer")
    return _verify_models(args, net, tf, names, started)


def network_to_verify(net, name: str) -> MaxoutNetwork:
    """The network of verify (``name``: where it was read): a Maxout network, else an
    InputError."""
    if not isinstance(net, MaxoutNetwork):
        raise InputError(
            name,
            "format",
            'expected an "exactmax/maxout" network (use '
            "exactmax equiv to compare two arbitrary models)",
        )
    return net


def compiled_to_verify(net: MaxoutNetwork, dom, name: str, domain_name: str | None):
    """The Transformer verify checks by default: ``net`` compiled on ``dom`` (the domain
    read from ``domain_name``, None: the network's own), or an InputError naming where."""
    from ..construct.bounds import DomainError
    from ..construct.transformer import compile_transformer

    if dom is None:
        raise InputError(
            name,
            "",
            'no domain to compile and verify on; add a "domain" entry or pass --domain FILE',
        )
    try:
        return compile_transformer(net, dom).transformer
    except DomainError as e:
        raise InputError(
            domain_name or name,
            "" if domain_name else "domain",
            f"the construction needs a bounded, non-empty domain, but {e}",
        ) from None


def run_equiv(args) -> int:
    """``equiv A B``: two models equal on the domain (``_verify_models``)."""
    started = time.monotonic()
    _check_cert_path(args, [("A.json", args.a), ("B.json", args.b)])
    a, b = load_model(args.a), load_model(args.b)
    if getattr(args, "epsilon", None) is not None or getattr(args, "top1", False):
        from .tolerance_command import run_tolerance  # equal up to a tolerance (#21)

        return run_tolerance(args, a, b, (args.a, args.b), started)
    if getattr(args, "norm", None) is not None:
        raise UsageError("--norm goes with --epsilon")
    if (
        getattr(args, "workers", None) is not None
        or getattr(args, "scheduler", None)
        or getattr(args, "split_depth", 0)
        or getattr(args, "unit_cells", None) is not None
    ):
        raise UsageError(
            "--workers, --scheduler, --split-depth and --unit-cells go with "
            "--epsilon or --top1 (equality is decided in this process)"
        )
    return _verify_models(args, a, b, (args.a, args.b), started)


def run_check_cert(args) -> int:
    """``check-cert CERT``: an equivalence certificate re-checked by the kernel alone (valid,
    rejected, or vacuous), or a property certificate (``property_command``)."""
    from ..io.certificates import load_certificate
    from ..io.jsonfile import Cursor, read_json_file
    from ..io.property_certificate import peek_property_certificate
    from ..kernel.errors import CheckFailed
    from ..kernel.program import Unsupported

    if peek_property_certificate(args.cert):
        from .property_command import check_property_cert

        return check_property_cert(args, Cursor(args.cert, "", read_json_file(args.cert)))
    from ..io.pair_certificate import PAIR_CERTIFICATE, certificate_format

    if certificate_format(args.cert) == PAIR_CERTIFICATE:
        from .tolerance_command import check_pair_cert  # epsilon / top-1 (#21)

        return check_pair_cert(args)
    a, b, dom, tree, hashes, witness = load_certificate(args.cert)
    from .binding import PAIR_OPTIONS, compare_pair_files, refuse_binding

    binding = compare_pair_files(args, hashes, a.input_dim)
    sha = {"a": hashes["a"], "b": hashes["b"], "domain": hashes["domain"]}
    if binding.mismatch is not None:
        return refuse_binding(args, binding, sha)
    from ..kernel.equivalence import check_equivalence

    t0 = time.monotonic()
    try:
        leaves = check_equivalence(a, b, dom, tree)
    except (CheckFailed, Unsupported) as e:
        return cert_rejected(args, str(e), sha, binding)
    kernel_s = round(time.monotonic() - t0, 3)
    # what the certificate is about; its witness is no part of the claim (the Coq checker
    # does not read it): a wrong one is set aside and the facts found afresh
    try:
        about, facts = claim_about(a, b, dom, witness)
    except CheckFailed as e:
        about, facts = claim_about(a, b, dom)
        about["domain"]["witness_rejected"] = str(e)
    if facts.empty:
        return answer_vacuous(args, about, binding, PAIR_OPTIONS)
    from ..kernel.correspondence import Correspondence
    from ..kernel.lattice import LatticeForms

    everywhere = isinstance(tree, (Correspondence, LatticeForms))
    if args.json:
        print(
            jsonout.dumps(
                {
                    "verdict": "valid",
                    "trust": "kernel-checked",
                    **about_json(about),
                    "certificate_format": "exactmax/certificate",
                    "certificate_kind": certificate_kind_written(tree),
                    "leaves": leaves,
                    "kernel_check_s": kernel_s,
                    "files": binding.as_json(),
                }
                | ({"everywhere": True} if everywhere else {})
            )
        )
    else:
        if isinstance(tree, LatticeForms):
            print(
                f"valid: the kernel rewrote both models to one lattice normal form ({leaves} "
                f"atoms); A = B on all of Q^{a.input_dim}, hence on the domain"
            )
        elif isinstance(tree, Correspondence):
            print(
                f"valid: the kernel checked a layer correspondence of {leaves} units; A = B "
                f"on all of Q^{a.input_dim}, hence on the domain"
            )
        else:
            print(f"valid: the kernel checked {leaves} cells; A = B on the domain")
        print("  " + about_line(about))
        print("  " + binding.line(PAIR_OPTIONS))
    return EXIT_OK


def certificate_kind_written(cert) -> str:
    """The kind of an equivalence certificate (``--json``'s ``certificate_kind``): layerwise,
    correspondence, or equivalence (one split tree for A - B = 0 over the domain)."""
    from ..kernel.correspondence import Correspondence
    from ..kernel.lattice import LatticeForms
    from ..kernel.layerwise import LayerwiseCertificate

    if isinstance(cert, Correspondence):
        return "correspondence"
    if isinstance(cert, LatticeForms):
        return "lattice"
    if isinstance(cert, LayerwiseCertificate):
        return "layerwise"
    return "equivalence"
