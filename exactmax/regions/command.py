"""``exactmax regions``: exact activation and linear region counts, with a certificate."""

from __future__ import annotations

import sys
import time

from .. import jsonout
from ..exits import EXIT_OK, EXIT_UNKNOWN, UsageError
from ..exits import EXIT_REFUTED as EXIT_REJECTED
from ..io.models import domain_arguments

DESCRIPTION = (
    "Count exactly the activation regions (argmax / ReLU / attention patterns with non-empty "
    "interior) and the linear regions (maximal connected unions of cells with one affine map, "
    "joined across shared facets) of a Maxout network or hardmax Transformer on a bounded, "
    "full-dimensional polyhedron. Cells come from recursive splitting with exact LP; the "
    "kernel checks the split tree (the cells partition the domain, every argmax choice has a "
    "Farkas proof, every cell's stated map is the model's, every cell has a point strictly "
    "inside), the activation-pattern count, and each merge of two cells (a point of their "
    "shared facet). That no other pair of same-map cells shares a facet is computed by the "
    "producer (exact 2-D geometry, z3 over Q beyond). Exit 0 counted, 2 bad input, 3 unknown "
    "(--max-cells or --timeout reached); with --check-cert: 0 valid, 1 rejected."
)


def add_parser(sub) -> None:
    r = sub.add_parser(
        "regions", help="exact activation and linear region counts", description=DESCRIPTION
    )
    r.add_argument(
        "model",
        nargs="?",
        metavar="MODEL.json",
        help="an exactmax/maxout network or exactmax/transformer (hardmax)",
    )
    domain_arguments(r, "the model's")
    r.add_argument(
        "--sawtooth",
        metavar="K,d,D",
        help="count the built-in sawtooth network sum_q S_K^D(x_q) on [0,1]^d "
        "(docs/notes/construction.md §5: exactly K^(d D) linear regions) instead of a file",
    )
    r.add_argument(
        "--compile",
        action="store_true",
        help="count the compiled hardmax Transformer of the Maxout network "
        "(exactmax compile's construction) instead of the network itself",
    )
    r.add_argument(
        "--save-model",
        metavar="OUT.json",
        help="write the model that was counted (e.g. the sawtooth network)",
    )
    r.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="give up (unknown, exit 3) when the enumeration passes S seconds, "
        "checked before each cell; S seconds after the command's start at the "
        "latest, even inside one long exact step (default: no limit)",
    )
    r.set_defaults(whole_timeout=True)
    r.add_argument(
        "--max-cells",
        type=int,
        default=200000,
        metavar="N",
        help="give up (unknown, exit 3) beyond N cells (default 200000)",
    )
    r.add_argument(
        "--all-units",
        action="store_true",
        help="count activation patterns over every unit of the model; by default "
        "over the units the outputs depend on (a unit with output weight zero "
        "is dead and not counted); linear regions are the outputs' either way",
    )
    r.add_argument(
        "--cert",
        metavar="C.json",
        help="write the region certificate (model and domain embedded, SHA-256)",
    )
    r.add_argument(
        "--check-cert",
        metavar="C.json",
        help="re-check a region certificate with the kernel alone (no z3) and "
        "print the counts it proves; with MODEL.json, also check that the "
        "certificate is about that model",
    )
    r.add_argument(
        "--plot",
        metavar="regions.png",
        help="draw the cells coloured by linear region (2-D inputs; matplotlib)",
    )
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.set_defaults(run=run)


def _sawtooth(text: str):
    from .sawtooth import sawtooth_network

    parts = text.split(",")
    try:
        k, d, D = (int(p) for p in parts)
    except ValueError:
        raise UsageError(
            f"--sawtooth: expected three integers K,d,D such as 3,2,2, got {text!r}"
        ) from None
    if k < 2 or d < 1 or D < 1:
        raise UsageError(f"--sawtooth: expected K >= 2, d >= 1, D >= 1, got {text!r}")
    return sawtooth_network(k, d, D), f"sawtooth K={k}, d={d}, D={D}", k ** (d * D)


def _progress(args=None):
    """Cells so far, on stderr, when progress is shown (``progress.shown``); else None."""
    from ..progress import shown

    if not shown(args):
        return None
    start = time.monotonic()

    def show(cells):
        print(
            f"exactmax: {cells} cells, {time.monotonic() - start:.0f} s",
            file=sys.stderr,
            flush=True,
        )

    return show


def run(args) -> int:
    if args.check_cert:
        if args.sawtooth or args.domain or args.compile:
            raise UsageError(
                "--check-cert: give the certificate, and optionally MODEL.json "
                "to check that it is about that model (it embeds model and "
                "domain)"
            )
        return _check(args)
    if (args.model is None) == (args.sawtooth is None):
        raise UsageError("give MODEL.json or --sawtooth K,d,D (one of them)")
    if args.max_cells < 1:
        raise UsageError(f"--max-cells: expected a positive integer, got {args.max_cells}")
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout: expected a positive number of seconds, got {args.timeout}")
    from ..io import InputError, load_domain, load_model, model_to_json, write_json_atomic
    from ..io.models import check_outputs
    from ..kernel.maxout import MaxoutNetwork
    from ..kernel.polyhedron import Box

    check_outputs(
        [("--cert", args.cert), ("--save-model", args.save_model), ("--plot", args.plot)],
        [("MODEL.json", args.model), ("--domain", args.domain)],
    )
    expected = None
    if args.sawtooth:
        model, name, expected = _sawtooth(args.sawtooth)
    else:
        model, name = load_model(args.model), args.model
    domain = load_domain(args.domain, model.input_dim) if args.domain else model.domain
    where = args.domain or name
    region_domain(model, domain, name, where)
    if args.compile:
        if not isinstance(model, MaxoutNetwork):
            raise UsageError("--compile: expected a Maxout network, got a Transformer")
        from ..construct.bounds import DomainError
        from ..construct.transformer import compile_transformer

        try:
            model = compile_transformer(model, domain).transformer
        except DomainError as e:
            raise InputError(where, "domain", str(e)) from None
        name += " (compiled Transformer)"
    if args.plot and model.input_dim != 2:
        raise UsageError(f"--plot: draws 2-D inputs only; the model has {model.input_dim}")
    if args.plot:
        from .plot import plot_problem

        problem = plot_problem(args.plot)
        if problem:
            raise UsageError(f"--plot: {problem}")
    if args.save_model:
        write_json_atomic(args.save_model, model_to_json(model))
    rc = count_checked(
        model,
        domain,
        name,
        where,
        max_cells=args.max_cells,
        timeout=args.timeout,
        all_units=args.all_units,
        progress=_progress(args),
    )
    if isinstance(rc, str):  # unknown, with the reason
        if args.json:
            print(jsonout.dumps(unknown_json(model, name, rc)))
        else:
            print(f"unknown: {name}: {rc}")
        return EXIT_UNKNOWN
    counts = region_counts(rc)
    if args.cert:
        from .certfile import certificate_to_json

        write_json_atomic(
            args.cert,
            certificate_to_json(model, domain, rc.certificate, counts, args.all_units),
            compact=True,
        )
    if args.plot:
        from ..engine.lp import analyze_domain

        rep = analyze_domain(domain)
        assert rep.lower is not None and rep.upper is not None  # counted: bounded, non-empty
        box = domain if isinstance(domain, Box) else Box(rep.lower, rep.upper)
        from .plot import plot_regions

        try:
            plot_regions(rc, box, args.plot, f"{name}: {rc.linear_regions} linear regions")
        except OSError as e:
            raise UsageError(f"--plot: cannot write {args.plot}: {e.strerror or e}") from None
    if args.json:
        out = counted_json(model, name, rc, args.all_units) | {
            "certificate": args.cert,
            "plot": args.plot,
        }
        if expected is not None:
            out["expected_linear_regions"] = expected
        print(jsonout.dumps(out))
        return EXIT_OK
    bound = (
        f"linear regions = {rc.linear_regions} distinct maps"
        if rc.distinct_maps == rc.merge_components
        else f"{rc.distinct_maps} distinct maps <= linear regions <= "
        f"{rc.merge_components} merge components"
    )
    print(
        f"{name}: {rc.activation_regions} activation regions (patterns of "
        f"{'all units' if args.all_units else 'the units the outputs depend on'}), "
        f"{rc.linear_regions} linear regions on the domain ({len(rc.cells)} cells, "
        f"{rc.stats['time_s']:.2f} s)"
    )
    print(
        f"  kernel-checked: the cell partition, every cell's map and interior point, the "
        f"activation patterns, {len(rc.certificate.merges)} merges; {bound}"
    )
    if expected is not None:
        print(
            f"  expected K^(d D) = {expected}: "
            f"{'equal' if expected == rc.linear_regions else 'DIFFERENT'}"
        )
    if args.cert:
        print(f"  certificate written to {args.cert}")
    if args.plot:
        print(f"  plot written to {args.plot}")
    return EXIT_OK


def region_domain(model, domain, name: str, where: str):
    """The domain regions counts on, if there is one of the model's input dimension (a usage
    error naming the model ``name``, else an InputError naming ``where`` it came from)."""
    from ..io import InputError

    if domain is None:
        raise UsageError(
            f"{name}: no domain; give one with --domain FILE (a bounded box or polyhedron)"
        )
    if domain.dim != model.input_dim:
        raise InputError(
            where, "", f"the domain has dimension {domain.dim}, the model's input {model.input_dim}"
        )
    return domain


def count_checked(
    model,
    domain,
    name: str,
    where: str,
    *,
    max_cells: int = 200000,
    timeout: float | None = None,
    all_units: bool = False,
    progress=None,
):
    """``count_regions`` of ``model`` (``name``) on ``domain`` (from ``where``) with the
    command's answers: the ``RegionCount``; the reason (a str) where it gives up (unknown: too
    many cells, the time limit, no certificate); an InputError for a domain it cannot count
    on or a model that is not piecewise linear."""
    from ..io import InputError
    from .enumerate import DomainProblem, NoCertificate, TooManyCells, Unsupported, count_regions

    try:
        return count_regions(
            model,
            domain,
            max_cells=max_cells,
            timeout_s=timeout,
            progress=progress,
            all_units=all_units,
        )
    except DomainProblem as e:
        raise InputError(where, "domain", str(e)) from None
    except Unsupported as e:
        raise InputError(
            name, "", f"{e}: its regions are not those of a piecewise linear function"
        ) from None
    except (TooManyCells, NoCertificate) as e:
        return str(e)


def region_counts(rc) -> dict:
    """The counts of a ``RegionCount`` (what the certificate states, and ``--json`` prints)."""
    return {
        "activation_regions": rc.activation_regions,
        "linear_regions": rc.linear_regions,
        "cells": len(rc.cells),
        "distinct_maps": rc.distinct_maps,
        "merge_components": rc.merge_components,
    }


def unknown_json(model, name: str, reason: str) -> dict:
    """The ``--json`` object of regions when it gives up (``count_checked``'s reason)."""
    return {
        "verdict": "unknown",
        "reason": reason,
        "sha256": {"model": _model_hash(model)},
        "model": name,
        "activation_regions": None,
        "linear_regions": None,
    }


def counted_json(model, name: str, rc, all_units: bool) -> dict:
    """The ``--json`` object of regions for the count ``rc`` of ``model`` (``name``), before
    the files it wrote (``certificate``, ``plot``)."""
    from ..kernel.maxout import MaxoutNetwork

    return {
        "verdict": "counted",
        "trust": "kernel-checked",  # the cells, maps and merges, by the kernel
        "time_s": round(rc.stats["time_s"], 3),
        "sha256": {"model": _model_hash(model)},
        "model": name,
        "kind": "maxout" if isinstance(model, MaxoutNetwork) else "transformer",
        **region_counts(rc),
        "units": "all" if all_units else "outputs",
        "linear_certified": rc.distinct_maps == rc.merge_components,
        "stats": {
            k: (round(v, 3) if isinstance(v, float) else v)
            for k, v in rc.stats.items()
            if k != "time_s"
        },
    }


def _check(args) -> int:
    """Kernel only: no z3, no producer."""
    from ..kernel.errors import CheckFailed
    from ..kernel.maxout import MaxoutNetwork
    from ..kernel.program import Unsupported, program_of_maxout, program_of_transformer
    from ..kernel.regions import check_region_count
    from .certfile import load_region_certificate

    model, domain, tree, merges, hashes, claimed, all_units = load_region_certificate(
        args.check_cert
    )
    t0 = time.monotonic()
    try:
        if args.model:
            from ..io import load_model, model_to_json
            from ..io.certificates import content_hash

            if content_hash(model_to_json(load_model(args.model))) != hashes["model"]:
                raise CheckFailed(
                    f"the certificate is about another model than {args.model} "
                    "(content hashes differ)"
                )
        prog = (
            program_of_maxout(model)
            if isinstance(model, MaxoutNetwork)
            else program_of_transformer(model)
        )
        act, lower, upper = check_region_count(
            prog, domain.as_polyhedron(), tree, merges, all_units
        )
        if claimed is not None:
            _check_claimed(claimed, act, lower, upper, _leaf_count(tree))
    except (CheckFailed, Unsupported) as e:
        if args.json:
            print(
                jsonout.dumps(
                    {
                        "verdict": "rejected",
                        "trust": None,
                        "reason": str(e),
                        "sha256": dict(hashes),
                    }
                )
            )
        else:
            print(f"rejected: {e}")
        return EXIT_REJECTED
    out = {
        "verdict": "valid",
        "trust": "kernel-checked",
        "activation_regions": act,
        "units": "all" if all_units else "outputs",
        "distinct_maps": lower,
        "merge_components": upper,
        "sha256": dict(hashes),
        "kernel_check_s": round(time.monotonic() - t0, 3),
    }
    if args.json:
        print(jsonout.dumps(out))
    else:
        lin = (
            f"exactly {lower}"
            if lower == upper
            else f"between {lower} and {upper}, not certified (the producer claimed "
            f"{(claimed or {}).get('linear_regions', '?')})"
        )
        print(
            f"valid: the kernel checked the cell partition; {act} activation regions "
            f"({'all units' if all_units else 'units the outputs depend on'}); "
            f"linear regions {lin} (model sha256 {hashes['model'][:16]}...)"
        )
    return EXIT_OK


def _leaf_count(tree) -> int:
    from ..kernel.certificate import Split

    n, todo = 0, [tree]
    while todo:
        t = todo.pop()
        if isinstance(t, Split):
            todo += [t.ge, t.lt]
        else:
            n += 1
    return n


def _check_claimed(claimed: dict, act: int, lower: int, upper: int, cells: int) -> None:
    """The certificate's stated counts must be what the kernel found (linear regions: within
    the certified range [distinct maps, merge components])."""
    from ..kernel.errors import CheckFailed

    found = {
        "activation_regions": act,
        "distinct_maps": lower,
        "merge_components": upper,
        "cells": cells,
    }
    for key, value in found.items():
        if claimed[key] != value:
            raise CheckFailed(
                f"counts.{key}: the certificate states {claimed[key]}, the kernel finds {value}"
            )
    if not lower <= claimed["linear_regions"] <= upper:
        raise CheckFailed(
            f"counts.linear_regions: the certificate states "
            f"{claimed['linear_regions']}, the kernel proves between {lower} "
            f"and {upper}"
        )


def _model_hash(model) -> str:
    """The SHA-256 of the model's canonical JSON (as in certificates)."""
    from ..io.certificates import content_hash
    from ..io.models import model_to_json

    return content_hash(model_to_json(model))
