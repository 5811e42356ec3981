"""``exactmax check`` and ``exactmax replay``: a VNN-LIB property of a Maxout network decided
(sat with an exact counterexample, unsat with a certificate the kernel checks, or unknown),
another tool's counterexample checked exactly, and a property certificate re-checked."""

from __future__ import annotations

import shutil
import time
from typing import Any

from .. import interruption, jsonout
from ..exits import EXIT_OK, EXIT_REFUTED, EXIT_UNKNOWN, UsageError
from ..interruption import phase
from ..io import InputError, load_model
from ..io.numbers import approx, approx_point, point_lines, q_str
from ..kernel.maxout import MaxoutNetwork
from ..kernel.rational import Q
from ..progress import shown


def check_property_cert(args, root) -> int:
    """``check-cert`` of a property certificate: the kernel's check that the property's
    query is unsat, cell by cell (``check_property``)."""
    from ..io.property_certificate import read_property_certificate
    from ..kernel.errors import CheckFailed
    from ..kernel.property import check_property
    from .about import cert_rejected
    from .binding import PROPERTY_OPTIONS, compare_property_files, refuse_binding

    net, prop, trees, hashes, lifted = read_property_certificate(root)
    binding = compare_property_files(args, hashes)
    sha = {k: hashes[k] for k in ("model", "model_file", "property")}
    if binding.mismatch is not None:
        return refuse_binding(args, binding, sha)
    t0 = time.monotonic()
    try:
        if lifted is not None:  # the trees are about the lifted network: first lifted = net
            from ..kernel.lattice import check_lattice

            check_lattice(lifted, net)
        leaves = check_property(lifted or net, prop.cases, trees)
    except CheckFailed as e:
        return cert_rejected(args, str(e), sha, binding)
    if args.json:
        print(
            jsonout.dumps(
                {
                    "verdict": "valid",
                    "trust": "kernel-checked",
                    "sha256": sha,
                    "certificate_format": "exactmax/property-certificate",
                    "leaves": leaves,
                    "lifted": lifted is not None,
                    "kernel_check_s": round(time.monotonic() - t0, 3),
                    "files": binding.as_json(),
                }
            )
        )
    else:
        print(f"valid: the kernel checked {leaves} cells; the property's query is unsat")
        if lifted is not None:
            print(
                "  the cells are the lifted form's, which the kernel proved equal to the network "
                "on all of Q^d (lattice normal forms)"
            )
        print(
            f"  about: model sha256 {hashes['model'][:16]}... (file "
            f"{hashes['model_file'][:16]}...), property sha256 {hashes['property'][:16]}..."
        )
        print("  " + binding.line(PROPERTY_OPTIONS))
    return EXIT_OK


def _network_and_property(args):
    """The Maxout network and the VNN-LIB property of check / replay, dimensions matched."""
    from ..io.vnnlib2 import read_property as read_vnnlib  # VNN-LIB 1.0 or 2.0

    net = load_model(args.model)
    network_of_property(net, args.model)
    with phase(f"reading the property {args.property}"):
        prop = read_vnnlib(args.property)
    property_matched(net, prop, args.property)
    return net, prop


def network_of_property(net, name: str) -> MaxoutNetwork:
    """The network of check / replay (``name``: where it was read): a Maxout network, else an
    InputError."""
    if not isinstance(net, MaxoutNetwork):
        raise InputError(
            name,
            "format",
            "expected a Maxout network (an .onnx file or "
            'an "exactmax/maxout" one), got a Transformer',
        )
    return net


def property_matched(net, prop, name: str):
    """The property (``name``: where it was read), if its inputs and outputs are the
    network's; else an InputError."""
    if (prop.n_x, prop.n_y) != (net.input_dim, net.out_dim):
        raise InputError(
            name,
            "",
            f"declares {prop.n_x} inputs X_i and {prop.n_y} "
            f"outputs Y_j, but the network has {net.input_dim} inputs and "
            f"{net.out_dim} outputs",
        )
    return prop


def _hashes(args, net, prop) -> dict:
    return property_hashes(net, args.model, prop)


def property_hashes(net, model_path: str | None, prop) -> dict:
    """The ``sha256`` of a check answer: the network's canonical JSON, its file (None when it
    was not read from one) and the property's text."""
    from ..io.certificates import content_hash
    from ..io.models import model_to_json
    from ..io.property_certificate import file_sha256

    with phase("hashing the network and the property"):
        return {
            "model": content_hash(model_to_json(net)),
            "model_file": file_sha256(model_path) if model_path is not None else None,
            "property": prop.sha256,
        }


def decide_check(
    net,
    prop,
    *,
    timeout: float,
    parallel,
    max_leaves: int = 20000,
    search: bool = True,
    relaxed: bool = True,
    progress_shown: bool = False,
    started: float | None = None,
):
    """What ``check`` decides about the property ``prop`` of ``net`` (dimensions matched),
    before anything is printed or written: the ``property.Answer`` (sat, unsat or unknown) of
    the work units of ``parallel`` (``workers_of``: workers, scheduler, split_depth,
    unit_cells) with what is left of ``timeout`` seconds from ``started``, and whether the
    time limit ended it (then its reason says so)."""
    from ..engine.parallel import workers_of
    from .property import decide_property_split

    started = time.monotonic() if started is None else started
    with phase("the work units"), workers_of(parallel) as executor:  # relaxed False: no Relaxed
        left = timeout - (time.monotonic() - started)
        a = decide_property_split(
            net,
            prop,
            max(left, 0.1),
            max_leaves,
            search,
            executor,
            parallel.split_depth,
            parallel.unit_cells,
            progress_shown,
            relaxed=relaxed,
        )
    timed_out = a.result == "unknown" and (
        time.monotonic() >= started + timeout or "time limit" in (a.reason or "")
    )
    if timed_out:  # the units answered by themselves at the limit: say where it passed
        a.reason = f"timeout in the work units: {a.reason}"
    return a, timed_out


def check_json(a, sha: dict, time_s: float, timed_out: bool) -> dict:
    """The ``--json`` object of check (``jsonout.dumps`` adds the common keys), before any
    file is written (``certificate`` and ``counterexample_file`` are null): ``decide_check``'s
    answer ``a``, the ``sha256`` of what it is about, the seconds since the command's start."""
    out = {
        "verdict": a.result,
        # unsat rests on a certificate the kernel checked; sat's evidence is its point
        "trust": "kernel-checked" if a.result == "unsat" else None,
        "reason": a.reason,
        "time_s": time_s,
        "sha256": sha,
        "stats": a.stats or (dict(interruption.current_stats) if timed_out else a.stats),
        "certificate": None,
        "counterexample_file": None,
    }
    if timed_out:
        out["phase"] = "the work units"
    if a.result == "sat":
        out.update(
            x=[q_str(v) for v in a.x],
            x_approx=approx_point(a.x),
            y=[q_str(v) for v in a.y],
            y_approx=approx_point(a.y),
            case=a.where[0],
            conjunction=a.where[1],
            margin=q_str(a.margin),
        )
    return out


def property_certificate(net, model_path: str, prop_path: str, a, lifted=None) -> dict:
    """The JSON object ``check --cert`` writes for ``decide_check``'s unsat answer ``a``: the
    network and the property's text embedded (read again from ``prop_path``), bound by their
    sha256."""
    from ..io.jsonfile import read_text_file
    from ..io.property_certificate import property_certificate_to_json

    text = read_text_file(prop_path, "a VNN-LIB text file")
    return property_certificate_to_json(
        net,
        model_path,
        prop_path,
        text,
        a.trees,
        {k: a.stats[k] for k in ("leaves", "splits") if k in a.stats},
        lifted,
    )


def run_check(args) -> int:
    """``check NET PROP.vnnlib``: sat (exit 1) with an exact counterexample, unsat (exit 0)
    with a kernel-checked certificate, unknown (exit 3) with the reason."""
    from ..io.models import check_outputs, write_bytes_atomic
    from ..io.property_certificate import counterexample_text

    started = time.monotonic()
    check_outputs(
        [("--cert", args.cert), ("--counterexample", args.counterexample)],
        [("NET", args.model), ("PROP.vnnlib", args.property)],
    )
    if not args.timeout > 0:
        raise UsageError(f"--timeout: expected a positive number of seconds, got {args.timeout}")
    from ..export.recheck import require_coq

    require_coq(args)
    net, prop = _network_and_property(args)
    sha = _hashes(args, net, prop)  # before the units: the limit leaves them what remains
    lifted, lift_report = None, None
    no_lift = getattr(args, "no_lift", False) or getattr(args, "no_relax", False)
    if not (no_lift or getattr(args, "coq", False)):  # --coq: lattice forms have no Coq export
        from ..cpwl.lift import lift_checked, worth_lifting

        if worth_lifting(net):
            with phase("lifting the network"):
                lifted, lift_report = lift_checked(net)
            if lifted is not None and len(lifted.layers) >= len(net.layers):
                lifted, lift_report = None, "no shallower than the network"
            if lifted is None:
                lift_report = {"not_lifted": lift_report}
    a, timed_out = decide_check(
        lifted or net,
        prop,
        timeout=args.timeout,
        parallel=args,
        max_leaves=args.max_leaves,
        search=not args.no_search,
        relaxed=not getattr(args, "no_relax", False),
        progress_shown=shown(args),
        started=started,
    )
    if lifted is not None and a.result == "sat":  # the point, on the network itself
        from ..kernel.maxout import evaluate_maxout

        if evaluate_maxout(net, a.x) != a.y:  # cannot be: the kernel proved them equal
            raise RuntimeError("the lifted network and the network differ at a point")
    out = check_json(a, sha, round(time.monotonic() - started, 3), timed_out)
    if lift_report is not None:
        out["lifted"] = lift_report
    if a.result == "sat" and args.counterexample:
        write_bytes_atomic(args.counterexample, counterexample_text(a.x, a.y).encode())
        out["counterexample_file"] = args.counterexample
    from ..export.recheck import certificate_path, checked_by, coq_answer, record

    coq, why, (path, scratch) = None, None, certificate_path(args)
    try:
        if a.result == "unsat" and path:
            from ..io.property_certificate import write_property_certificate

            with phase(f"writing the certificate {path}"):
                doc = property_certificate(net, args.model, args.property, a, lifted)
                write_property_certificate(path, doc)
            out["certificate"] = args.cert
        if a.result == "unsat":  # --coq (#35): coqc proves the certificate too
            coq, why = coq_answer(args, path, bool(path))
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    record(args, out, coq, why)
    if why is not None:  # the kernel proved it, coqc did not: unknown
        print(jsonout.dumps(out) if args.json else f"unknown: {why}")
        return EXIT_UNKNOWN
    if args.json:
        print(jsonout.dumps(out))
        return {"sat": EXIT_REFUTED, "unsat": EXIT_OK}.get(a.result, EXIT_UNKNOWN)
    if lifted is not None and isinstance(r := lift_report, dict):
        print(
            f"lifted: the network computes a max/min expression; decided on its Maxout form of "
            f"{r['layers'][1]} layers (widths {', '.join(map(str, r['widths']))}; from "
            f"{r['layers'][0]}), proved equal by the kernel (lattice normal forms, "
            f"{r['lift_s']:.2f} s)"
        )
    if a.result == "sat":
        print(
            f"sat: a counterexample, exact and evaluated by the kernel (found by the "
            f"{a.stats.get('found_by')}): x is in the input set and f(x) satisfies "
            f"output constraint {a.where[1]} of case {a.where[0]} (least row value "
            f"{q_str(a.margin)}, about {approx(a.margin)})"
        )
        print(point_lines("x", a.x))
        print(point_lines("y", a.y))
        if args.counterexample:
            print(f"  written in VNN-COMP's format to {args.counterexample}")
    elif a.result == "unsat":
        print(
            f"unsat ({checked_by(coq)})"
            ": no input in the set reaches the "
            f"output constraints; {a.stats.get('leaves_checked')} cells, "
            f"{out['time_s']:.2f} s (the kernel's check {a.stats.get('kernel_check_s')} s)"
            + (f"; certificate written to {args.cert}" if args.cert else "")
        )
        if coq is not None:
            print(f"  {coq.line()}")
    else:
        print(f"unknown: {a.reason}")
        if out["stats"] and not a.stats:  # stopped at the time limit: how far it got
            print(
                "  so far: "
                + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in out["stats"].items())
            )
    if not args.json:
        h = out["sha256"]
        print(
            f"  about: model sha256 {h['model'][:16]}... (file "
            f"{h['model_file'][:16]}...), property sha256 "
            f"{h['property'][:16]}..."
        )
    return {"sat": EXIT_REFUTED, "unsat": EXIT_OK}.get(a.result, EXIT_UNKNOWN)


def run_replay(args) -> int:
    """``replay NET PROP CEX``: is another tool's counterexample one, exactly?"""
    from ..engine.casetree import row_value, violation
    from ..io.property_certificate import read_counterexample

    net, prop = _network_and_property(args)
    x, y_file = read_counterexample(args.counterexample, net.input_dim, net.out_dim)
    n, j, y, margin = violation(net, prop.cases, x)
    out: dict[str, Any] = {
        "verdict": "valid" if n is not None else "rejected",
        "trust": None,  # the point is the evidence (decided exactly, f(x) by the kernel)
        "sha256": _hashes(args, net, prop),
        "x": [q_str(v) for v in x],
        "x_approx": approx_point(x),
        "y": [q_str(v) for v in y],
        "y_approx": approx_point(y),
    }
    if y_file is not None:
        out["y_file_max_error"] = q_str(max(abs(a - b) for a, b in zip(y, y_file)))
    if n is not None:
        out.update(case=n, conjunction=j, margin=q_str(margin))
        verdict = (
            f"valid: x is in the input set and f(x), evaluated exactly by the kernel, "
            f"satisfies output constraint {j} of case {n}; least row value "
            f"{q_str(margin)} (about {approx(margin)})"
        )
    else:
        inside = [c for c in prop.cases if c.inputs.contains(x)]
        if not inside:
            # how far outside: the least, over the cases, of the largest row excess
            excess = min(
                max(
                    sum((a * t for a, t in zip(row, x)), Q(0)) - b
                    for row, b in zip(c.inputs.A, c.inputs.b)
                )
                for c in prop.cases
            )
            out.update(reason="outside the input set", outside_by=q_str(excess))
            verdict = (
                f"rejected: x is outside the input set (by {q_str(excess)}, about "
                f"{approx(excess)}, in the least violated case's worst constraint)"
            )
        else:
            best = max(
                min((row_value(r, x, y) for r in conj), default=Q(0))
                for c in inside
                for conj in c.outputs
            )
            out.update(reason="the output constraints do not hold", missed_by=q_str(-best))
            verdict = (
                "rejected: x is in the input set, but f(x), evaluated exactly, "
                f"satisfies no output constraint (the closest misses by {q_str(-best)}, "
                f"about {approx(-best)})"
            )
    if args.json:
        print(jsonout.dumps(out))
    else:
        print(verdict)
        print(point_lines("x", x))
        print(point_lines("f(x)", y))
        if y_file is not None:
            print(f"  the file's Y values differ from f(x) by at most {out['y_file_max_error']}")
    return EXIT_OK if n is not None else EXIT_REFUTED
