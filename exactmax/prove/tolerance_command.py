"""``exactmax equiv A B --epsilon E [--norm inf]`` and ``--top1``: two models equal up to a
tolerance on a domain (``tolerance.py``), proved with a certificate the kernel checks, refuted
by a point the kernel evaluated (with the exact gap, or both arg max sets), or unknown; and the
check of such a certificate by ``check-cert``."""

from __future__ import annotations

import shutil
import time

from .. import jsonout
from ..exits import EXIT_OK, EXIT_REFUTED, EXIT_UNKNOWN, UsageError
from ..io import InputError
from ..io.models import model_domain
from ..io.numbers import approx_point, difference_lines, q_str
from ..progress import shown
from .about import (
    about_json,
    about_line,
    answer_vacuous,
    cert_rejected,
    certificate_not_written,
    claim_about,
)


def tolerance_of(args):
    """epsilon (exact, >= 0) or None for --top1, from the command line."""
    return tolerance(args.epsilon, args.top1, args.norm, args.strategy)


def tolerance(epsilon: str | None, top1: bool, norm: str | None = None, strategy: str = "auto"):
    """epsilon (exact, >= 0, from its text) or None for top-1, checked against the other
    options of equiv."""
    from ..io.numbers import NumberSyntaxError, parse_rational

    if top1 and epsilon is not None:
        raise UsageError("--epsilon and --top1 ask different questions; give one")
    if norm is not None and epsilon is None:
        raise UsageError("--norm goes with --epsilon")
    if strategy != "auto":
        raise UsageError("--strategy is for equality (no --epsilon, no --top1)")
    if top1:
        return None
    assert epsilon is not None  # equiv asks with --epsilon or --top1
    try:
        e = parse_rational(epsilon)
    except NumberSyntaxError as err:
        raise UsageError(
            f'--epsilon: expected an exact number ("1/100", "0.01"), got {epsilon!r}: {err}'
        ) from None
    if e < 0:
        raise UsageError(f"--epsilon: expected a number >= 0, got {epsilon}")
    return e


def _statement(epsilon, names) -> str:
    if epsilon is None:
        return f"argmax {names[0]}(x) = argmax {names[1]}(x) (as sets, ties included)"
    return f"|{names[0]}(x) - {names[1]}(x)|_inf <= {q_str(epsilon)}"


def decide_tolerance(
    a,
    b,
    dom,
    epsilon,
    names,
    *,
    timeout: float,
    parallel,
    max_leaves: int = 20000,
    search: bool = True,
    progress_shown: bool = False,
    started: float | None = None,
    lattice: bool = True,
):
    """What ``equiv --epsilon`` / ``--top1`` decides about A and B on the domain ``dom`` (None:
    there is none, a usage error), before anything is printed or written: (the answer, what it
    is about, the kernel-checked domain facts).  The answer is None when the domain is empty
    (vacuous); a ``verify.Verdict`` (proved, everywhere) when the two are Maxout networks
    related layer by layer (``_by_correspondence``), else the ``tolerance.Answer`` of the
    branch and bound on the work units of ``parallel`` (``workers_of``: workers, scheduler,
    split_depth, unit_cells) with what is left of ``timeout`` seconds from ``started``."""
    from ..engine.parallel import workers_of
    from .tolerance import decide_tolerance_split

    started = time.monotonic() if started is None else started
    if dom is None:
        raise UsageError("no domain: give one with --domain FILE or in the first model")
    if a.input_dim != b.input_dim:
        raise UsageError(
            f"{names[0]} has input dimension {a.input_dim} but {names[1]} has {b.input_dim}"
        )
    if a.out_dim != b.out_dim:
        raise UsageError(f"{names[0]} has {a.out_dim} outputs but {names[1]} has {b.out_dim}")
    if dom.dim != a.input_dim:
        raise UsageError(f"the domain has dimension {dom.dim}, the models {a.input_dim}")
    if timeout <= 0:
        raise UsageError(f"--timeout: expected a positive number of seconds, got {timeout}")
    about, facts = claim_about(a, b, dom)
    if facts.empty:
        return None, about, facts
    proved = _by_correspondence(a, b, lattice)
    if proved is not None:
        return proved, about, facts
    with workers_of(parallel) as executor:
        left = max(timeout - (time.monotonic() - started), 0.1)
        v = decide_tolerance_split(
            a,
            b,
            dom,
            epsilon,
            left,
            max_leaves,
            search,
            executor,
            parallel.split_depth,
            parallel.unit_cells,
            progress_shown,
        )
    return v, about, facts


def tolerance_certificate(a, b, dom, epsilon, v) -> dict:
    """The JSON object ``--cert`` writes for ``decide_tolerance``'s proof ``v``: the layer
    correspondence (an exactmax/certificate, A = B everywhere), or the pair-property
    certificate of |A - B| <= epsilon (top-1: epsilon None)."""
    from .verify import Verdict

    if isinstance(v, Verdict):
        from ..io.certificates import certificate_to_json

        return certificate_to_json(a, b, dom, v.certificate, {"strategy": "correspondence"})
    from ..io.pair_certificate import pair_certificate_to_json

    return pair_certificate_to_json(
        a, b, dom, epsilon, v.tree, {k: v.stats[k] for k in ("leaves", "splits")}
    )


def _property_json(epsilon) -> dict:
    return (
        {"kind": "top1"}
        if epsilon is None
        else {"kind": "epsilon", "epsilon": q_str(epsilon), "norm": "inf"}
    )


def tolerance_json(
    v, about, epsilon, names, cert: str | None, cert_error: str | None, time_s: float
) -> dict:
    """The ``--json`` object of ``equiv --epsilon`` / ``--top1`` (``jsonout.dumps`` adds the
    common keys): ``decide_tolerance``'s answer ``v`` and ``about``, the models' ``names``,
    the certificate's path ``cert`` (None: not asked for) and the error that kept it from
    being written, the seconds since the command's start."""
    from .verify import Verdict

    if isinstance(v, Verdict):  # by a layer correspondence: A = B everywhere
        return {
            "verdict": "proved",
            "trust": "kernel-checked",
            "reason": None,
            "time_s": time_s,
            **about_json(about),
            "property": _property_json(epsilon),
            "counterexample": None,
            "stats": {"strategy": "correspondence", "units": v.stats.get("leaves_checked")},
            "certificate_kind": "correspondence",
            "everywhere": True,
            "certificate": cert if cert and cert_error is None else None,
        } | ({"certificate_error": cert_error} if cert_error else {})
    stats = {k: (q_str(val) if k == "largest_gap_seen" else val) for k, val in v.stats.items()}
    out = {
        "verdict": v.verdict,
        "trust": "kernel-checked" if v.verdict == "proved" else None,
        "reason": v.reason,
        "time_s": time_s,
        **about_json(about),
        "property": _property_json(epsilon),
        "counterexample": None,
        "stats": stats,
        "certificate": cert if cert and v.verdict == "proved" and cert_error is None else None,
        "certificate_kind": "pair-property" if v.verdict == "proved" else None,
    }
    if cert_error is not None:
        out["certificate_error"] = cert_error
    if v.verdict == "refuted":
        ce = {
            "x": [q_str(t) for t in v.x],
            "x_approx": approx_point(v.x),
            "outputs": {n: [q_str(t) for t in y] for n, y in zip(names, v.outputs)},
            "outputs_approx": {n: approx_point(y) for n, y in zip(names, v.outputs)},
            "found_by": v.stats.get("found_by"),
        }
        if epsilon is None:
            ce["argmax"] = {n: list(s) for n, s in zip(names, v.argmax)}
            ce["ties"] = any(len(s) > 1 for s in v.argmax)
        else:
            ce["gap"], ce["output"] = q_str(v.gap), v.output
        out["counterexample"] = ce
    return out


def run_tolerance(args, a, b, names, started: float) -> int:
    """``equiv A B --epsilon E`` / ``--top1`` of two loaded models (``decide_tolerance``),
    the certificate written (``tolerance_certificate``) and the answer printed."""
    from .verify import Verdict

    epsilon = tolerance_of(args)
    dom = model_domain(a, args.domain) if args.domain else (a.domain or b.domain)
    v, about, facts = decide_tolerance(
        a,
        b,
        dom,
        epsilon,
        names,
        timeout=args.timeout,
        parallel=args,
        max_leaves=args.max_leaves,
        search=not args.no_search,
        progress_shown=shown(args),
        started=started,
        lattice=not getattr(args, "coq", False),  # lattice normal forms have no Coq export
    )
    if v is None:
        return answer_vacuous(args, about)
    everywhere = isinstance(v, Verdict)  # a layer correspondence
    from ..export.recheck import certificate_path, checked_by, coq_answer, record

    cert_error, coq, why, (path, scratch) = None, None, None, certificate_path(args)
    try:
        written = False
        if path and (everywhere or v.verdict == "proved"):
            from ..io import write_json_atomic

            try:
                write_json_atomic(path, tolerance_certificate(a, b, dom, epsilon, v), compact=True)
                written = True
            except InputError as e:
                cert_error = str(e)
        if (everywhere or v.verdict == "proved") and cert_error is None:  # --coq (#35)
            coq, why = coq_answer(args, path, written)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    t = round(time.monotonic() - started, 3)
    out = tolerance_json(v, about, epsilon, names, args.cert, cert_error, t)
    record(args, out, coq, why)
    if why is not None:  # the kernel proved it, coqc did not: unknown
        print(jsonout.dumps(out) if args.json else f"unknown: {why}\n  {about_line(about)}")
        return EXIT_UNKNOWN
    head = f"proved ({checked_by(coq)})"
    if args.json:
        print(jsonout.dumps(out))
    elif everywhere:
        print(
            f"{head}: {_statement(epsilon, names)} on "
            f"the domain, since {names[0]} = {names[1]} on all of Q^{a.input_dim} (a layer "
            f"correspondence of {out['stats']['units']} units), {t:.2f} s"
            + (f"; certificate written to {args.cert}" if args.cert and cert_error is None else "")
        )
    elif v.verdict == "proved":
        print(
            f"{head}: {_statement(epsilon, names)} on "
            f"the domain; {v.stats.get('leaves_checked')} cells, {out['time_s']:.2f} s"
            + (f"; certificate written to {args.cert}" if out["certificate"] else "")
        )
    elif v.verdict == "refuted":
        ce = out["counterexample"]
        if epsilon is None:
            sets = ", ".join(
                f"argmax {n} = {{{', '.join(map(str, s))}}}" for n, s in zip(names, v.argmax)
            )
            print(
                f"refuted: the arg max sets differ at a point of the domain (evaluated by "
                f"the kernel{'; a tie' if ce['ties'] else ''}): {sets}"
            )
        else:
            print(
                f"refuted: |{names[0]}(x) - {names[1]}(x)|_inf = {ce['gap']} (about "
                f"{float(v.gap):.6g}) > {q_str(epsilon)} at a point of the domain, in "
                f"output {v.output} (evaluated by the kernel)"
            )
        print(difference_lines(v.x, names, v.outputs))
    else:
        print(f"unknown: {v.reason}")
    if not args.json:
        if coq is not None:
            print(f"  {coq.line()}")
        print("  " + about_line(about))
    if cert_error is not None:
        return certificate_not_written(cert_error)
    if everywhere:
        return EXIT_OK
    return {"proved": EXIT_OK, "refuted": EXIT_REFUTED}.get(v.verdict, EXIT_UNKNOWN)


def _by_correspondence(a, b, lattice: bool = True):
    """Two Maxout networks of one depth related layer by layer (a rewrite): A = B on all of
    Q^d by a correspondence the kernel checked, so |A - B| = 0 <= epsilon and the arg max sets
    agree everywhere; its verdict, or None where there is no correspondence (milliseconds for
    unrelated networks)."""
    from ..kernel.maxout import MaxoutNetwork
    from .verify import verify_by_correspondence

    if not (isinstance(a, MaxoutNetwork) and isinstance(b, MaxoutNetwork)) or len(a.layers) != len(
        b.layers
    ):
        return None
    return verify_by_correspondence(a, b, lattice=lattice)


def check_pair_cert(args) -> int:
    """``check-cert`` of a pair-property certificate: the kernel's check of the tree for the
    pair program (``check_pair_property``), and with --models / --domain, that it speaks
    about these files."""
    from ..io.pair_certificate import claim, load_pair_certificate
    from ..kernel.errors import CheckFailed
    from ..kernel.pair import check_pair_property
    from ..kernel.program import Unsupported
    from .binding import PAIR_OPTIONS, compare_pair_files, refuse_binding

    a, b, dom, epsilon, tree, hashes = load_pair_certificate(args.cert)
    binding = compare_pair_files(args, hashes, a.input_dim)
    sha = {k: hashes[k] for k in ("a", "b", "domain")}
    if binding.mismatch is not None:
        return refuse_binding(args, binding, sha)
    t0 = time.monotonic()
    try:
        leaves = check_pair_property(a, b, dom, epsilon, tree)
    except (CheckFailed, Unsupported) as e:
        return cert_rejected(args, str(e), sha, binding)
    kernel_s = round(time.monotonic() - t0, 3)
    about, facts = claim_about(a, b, dom)
    if facts.empty:
        return answer_vacuous(args, about, binding, PAIR_OPTIONS)
    if args.json:
        print(
            jsonout.dumps(
                {
                    "verdict": "valid",
                    "trust": "kernel-checked",
                    **about_json(about),
                    "certificate_format": "exactmax/pair-property-certificate",
                    "claim": claim(epsilon),
                    "leaves": leaves,
                    "kernel_check_s": kernel_s,
                    "files": binding.as_json(),
                }
            )
        )
    else:
        print(f"valid: the kernel checked {leaves} cells; {claim(epsilon)}")
        print("  " + about_line(about))
        print("  " + binding.line(PAIR_OPTIONS))
    return EXIT_OK
