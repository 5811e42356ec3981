"""The commands about one model file: ``exactmax eval`` (its exact output), ``exactmax info``
(its shape and its domain's) and ``exactmax import`` (an ONNX file read as the exact Maxout
network it denotes)."""

from __future__ import annotations

import dataclasses
import sys
import time

from . import jsonout
from .construct.size import parameter_count
from .exits import EXIT_OK, EXIT_UNKNOWN, UsageError
from .io import load_model
from .io.models import model_domain
from .io.numbers import NumberSyntaxError, approx_point, parse_rational, point_lines, q_str, quote
from .kernel.affine import dot
from .kernel.maxout import MaxoutNetwork, evaluate_maxout
from .kernel.polyhedron import Box, Domain
from .kernel.rational import Q
from .kernel.transformer import HARDMAX, Attention, FeedForward, evaluate_transformer


def parse_point(text: str, dim: int, option: str = "--input") -> tuple[Q, ...]:
    """A comma-separated list of exact numbers of length ``dim``."""
    items = [t.strip() for t in text.split(",")]
    values = []
    for i, t in enumerate(items):
        try:
            values.append(parse_rational(t))
        except NumberSyntaxError as e:
            raise UsageError(f"{option}: item {i}: {e}") from None
    if len(values) != dim:
        raise UsageError(
            f"{option}: expected {dim} comma-separated numbers (the model's input "
            f"dimension), got {len(values)} in {quote(text)}"
        )
    return tuple(values)


def describe_outside(dom: Domain, x) -> str:
    """Why x is not in dom, for the note of ``eval``."""
    if isinstance(dom, Box):
        for i, (lo, v, hi) in enumerate(zip(dom.lower, x, dom.upper)):
            if v < lo:
                return f"x[{i}] = {v} is below the lower bound {lo}"
            if v > hi:
                return f"x[{i}] = {v} is above the upper bound {hi}"
    P = dom.as_polyhedron()
    bad = [i for i, (row, c) in enumerate(zip(P.A, P.b)) if dot(row, x) > c]
    return f"it violates constraint {bad[0]} (row {bad[0]} of A x <= b)" if bad else ""


def run_eval(args) -> int:
    """``eval MODEL --input X``: the model's exact output at x (the kernel's definitional
    evaluator); ``--inputs FILE``: every point of the file as one batch; softmax attention:
    rigorous balls, never exact."""
    model = load_model(args.model)
    if args.inputs is not None:
        return _eval_many(args, model)
    x = parse_point(args.input, model.input_dim)
    dom = model_domain(model, args.domain)
    if dom is not None and not dom.contains(x):
        print(
            f"exactmax: note: the input is outside the domain ({describe_outside(dom, x)}); "
            "evaluating anyway",
            file=sys.stderr,
        )
    if args.softmax_lambda is not None or _softmax_sublayers(model):
        return _eval_softmax(args, model, x)
    # one point: the kernel's definitional evaluator (the batches of --inputs go the fast way)
    y = (
        evaluate_maxout(model, x)
        if isinstance(model, MaxoutNetwork)
        else evaluate_transformer(model, x)
    )
    if args.json:
        print(jsonout.dumps({"output": [q_str(v) for v in y], "output_approx": approx_point(y)}))
    else:
        print(point_lines("y", y, indent=""))
    return EXIT_OK


def _output_line(y) -> str:
    return "y = (" + ", ".join(q_str(v) for v in y) + ")"


def _softmax_sublayers(model) -> list[int]:
    return [
        i
        for i, s in enumerate(getattr(model, "sublayers", ()))
        if isinstance(s, Attention) and s.kind != HARDMAX
    ]


def _eval_many(args, model) -> int:
    """``eval --inputs FILE``: every point of the file, as one batch (vectorized when large)."""
    from .io.points import read_points
    from .vectorized import batch_evaluator

    if args.softmax_lambda is not None or _softmax_sublayers(model):
        raise UsageError(
            "--inputs: batches are evaluated exactly, with hardmax attention; "
            "evaluate softmax attention one --input at a time"
        )
    xs, lines = read_points(args.inputs, model.input_dim)
    dom = model_domain(model, args.domain)
    if dom is not None:
        outside = [(n, x) for n, x in zip(lines, xs) if not dom.contains(x)]
        if outside:
            n, x = outside[0]
            print(
                f"exactmax: note: {len(outside)} of {len(xs)} inputs are outside the domain "
                f"(the first on line {n}: {describe_outside(dom, x)}); evaluating anyway",
                file=sys.stderr,
            )
    ys = batch_evaluator(model).evaluate_batch(xs)
    if args.json:
        print(jsonout.dumps({"outputs": [[q_str(v) for v in y] for y in ys]}))
    else:
        for y in ys:
            print(_output_line(y))
    return EXIT_OK


def _eval_softmax(args, model, x) -> int:
    """Softmax attention: rigorous balls at --precision bits (not exact, so never "proved")."""
    if isinstance(model, MaxoutNetwork):
        raise UsageError(
            "--softmax-lambda: a Maxout network has no attention; give a Transformer file"
        )
    lam = None
    if args.softmax_lambda is not None:
        try:
            lam = parse_rational(args.softmax_lambda)
        except NumberSyntaxError as e:
            raise UsageError(f"--softmax-lambda: {e}") from None
        if not lam > 0:
            raise UsageError(f"--softmax-lambda: expected a positive number, got {lam}")
    if args.precision < 16:
        raise UsageError(f"--precision: expected at least 16 bits, got {args.precision}")
    from .softmax.evaluate import ball_strings, evaluate_softmax

    y = evaluate_softmax(model, x, lam, args.precision)
    mids, rads = zip(*(ball_strings(v, args.precision) for v in y)) if y else ((), ())
    scale = f"lambda = {lam} x head scale" if lam is not None else "the file's head scales"
    if args.json:
        print(
            jsonout.dumps(
                {
                    "output": list(mids),
                    "radius": list(rads),
                    "attention": "softmax",
                    "softmax_lambda": None if lam is None else q_str(lam),
                    "precision_bits": args.precision,
                }
            )
        )
    else:
        print("y ~ (" + ", ".join(mids) + ")")
        print(
            f"  softmax attention at {scale}; ball arithmetic at {args.precision} bits, "
            f"radii <= {max(rads, key=float) if rads else 0}"
        )
    return EXIT_OK


def _domain_summary(dom: Domain | None) -> dict:
    if dom is None:
        return {"kind": None}
    if isinstance(dom, Box):
        empty = dom.is_empty()
        out = {"kind": "box", "constraints": 2 * dom.dim, "empty": empty, "bounded": True}
        if not empty:
            out.update(lower=[q_str(v) for v in dom.lower], upper=[q_str(v) for v in dom.upper])
        return out
    from .engine.lp import analyze_domain  # z3 is imported only when a polyhedron needs it

    r = analyze_domain(dom)
    out = {"kind": "polyhedron", "constraints": len(dom.b), "empty": r.empty, "bounded": r.bounded}
    if r.point is not None:
        out["point"] = [q_str(v) for v in r.point]
    if r.lower is not None and not r.empty:
        out.update(lower=[q_str(v) for v in r.lower], upper=[q_str(v) for v in r.upper])
    if r.unbounded_direction is not None:
        out["unbounded_direction"] = [q_str(v) for v in r.unbounded_direction]
    return out


def run_info(args) -> int:
    """``info MODEL``: the model's kind and shape, and whether its domain is empty, bounded
    (within which box) or unbounded (along which direction), decided exactly."""
    model = load_model(args.model)
    dom = model_domain(model, args.domain)
    if isinstance(model, MaxoutNetwork):
        info = {
            "kind": "maxout",
            "input_dim": model.input_dim,
            "output_dim": model.out_dim,
            "layers": [{"width": l.width, "rank": l.rank} for l in model.layers],
            "parameters": parameter_count(model),
        }
    else:
        subs = [
            {"type": "feedforward", "hidden": s.inner.out_dim}
            if isinstance(s, FeedForward)
            else {"type": "attention", "kind": s.kind, "heads": len(s.heads)}
            for s in model.sublayers
        ]
        info = {
            "kind": "transformer",
            "input_dim": model.input_dim,
            "output_dim": model.out_dim,
            "d_model": model.d_model,
            "tokens": model.n_tokens,
            "sublayers": subs,
            "readout_token": "mean" if model.readout.token is None else model.readout.token,
        }
    if not args.timeout > 0:
        raise UsageError(f"--timeout: expected a positive number of seconds, got {args.timeout}")
    from .interruption import TimeLimit, time_limit

    code = EXIT_OK
    try:
        with time_limit(time.monotonic() + args.timeout, args.timeout):
            info["domain"] = _domain_summary(dom)
    except TimeLimit as e:  # a polyhedron of huge numbers: say what is not known, and why
        info["domain"] = {
            "kind": "polyhedron",
            "constraints": len(dom.b),
            "empty": None,
            "bounded": None,
            "reason": e.reason(),
        }
        code = EXIT_UNKNOWN
    if args.json:
        if code == EXIT_UNKNOWN:
            info = {"verdict": "unknown", "reason": info["domain"]["reason"], **info}
        print(jsonout.dumps(info))
        return code
    print(
        f"{args.model}: {'Maxout network' if info['kind'] == 'maxout' else 'Transformer'}, "
        f"input dimension {info['input_dim']}, output dimension {info['output_dim']}"
    )
    if info["kind"] == "maxout":
        print(
            f"  layers: {len(info['layers'])} (widths "
            + ", ".join(str(l["width"]) for l in info["layers"])
            + "; ranks "
            + ", ".join(str(l["rank"]) for l in info["layers"])
            + f"), {info['parameters']} parameters"
        )
    else:
        kinds = ", ".join(
            "FF" if s["type"] == "feedforward" else f"attn({s['heads']})" for s in info["sublayers"]
        )
        print(
            f"  {info['tokens']} tokens, d_model {info['d_model']}, "
            f"{len(info['sublayers'])} sub-layers: {kinds}"
        )
    d = info["domain"]
    if d["kind"] is None:
        print('  domain: none given (use a "domain" entry or --domain FILE)')
    elif d["empty"] is None:
        print(
            f"  domain: {d['kind']} with {d['constraints']} constraints, not decided: {d['reason']}"
        )
    else:
        state = "empty" if d["empty"] else ("bounded" if d["bounded"] else "unbounded")
        line = f"  domain: {d['kind']} with {d['constraints']} constraints, {state}"
        if not d["empty"] and d["bounded"]:
            line += ", within " + " x ".join(
                f"[{lo}, {hi}]" for lo, hi in zip(d["lower"], d["upper"])
            )
        if d.get("unbounded_direction"):
            line += " along (" + ", ".join(d["unbounded_direction"]) + ")"
        print(line)
    return code


def run_import(args) -> int:
    """``import NET.onnx -o NET.json``: the exact Maxout network an ONNX file denotes."""
    from .io import model_to_json, write_json_atomic
    from .io.models import check_outputs, load_domain
    from .io.onnxfile import import_onnx

    check_outputs([("-o", args.output)], [("NET.onnx", args.model), ("--domain", args.domain)])
    net, rep = import_onnx(args.model, args.drop_final_softmax)
    if args.domain:  # recorded in the network: every later command's default domain
        net = dataclasses.replace(net, domain=load_domain(args.domain, net.input_dim))
    lifted = None
    if getattr(args, "lift", False):  # the lattice network's Maxout form, proved equal
        from .cpwl.lift import lift_checked

        lifted, report = lift_checked(net)
        if lifted is None:
            return _not_lifted(args, f"{report} (nothing written)", 0.0)
        lifted = dataclasses.replace(lifted, domain=net.domain)
    write_json_atomic(args.output, model_to_json(lifted or net))
    out = dict(rep.as_json(net), output=args.output, parameters=parameter_count(net))
    out["domain"] = args.domain
    if lifted is not None:
        out["lifted"] = report
    if args.json:
        print(jsonout.dumps(out))
        return EXIT_OK
    print(
        f"wrote {args.output}: Maxout network, input dimension {rep.input_dim}, output "
        f"dimension {rep.output_dim}, {len(net.layers)} layers (widths "
        + ", ".join(str(l.width) for l in net.layers)
        + "; ranks "
        + ", ".join(str(l.rank) for l in net.layers)
        + f"), {parameter_count(net)} parameters"
    )
    print(
        f"  {rep.weights} weights read exactly (dyadic rationals, no rounding): "
        f"denominators up to 2^{rep.max_weight_denominator_bits} in the file, up to "
        f"2^{rep.max_network_denominator_bits} after composing the affine maps; opset "
        f"{rep.opset}, IR {rep.ir_version}; operators "
        + ", ".join(f"{k} x{v}" for k, v in sorted(rep.operators.items()))
        + ("; the final Softmax dropped" if rep.dropped_softmax else "")
    )
    if rep.carried_units:
        print(
            f"  {rep.carried_units} pass-through units (rank 1) carry tensors to a later layer "
            "(residual connections, branches of different depths)"
        )
    if rep.rounded_square_roots:
        print(
            f"  {rep.rounded_square_roots} BatchNormalization scales scale/sqrt(var + epsilon) "
            "are irrational: each is the double nearest to it (the network imported differs "
            "from the file's real-number meaning by that rounding)"
        )
    if lifted is not None:
        print(
            f"  lifted before writing: {len(lifted.layers)} Maxout layers (widths "
            f"{_widths(lifted)}; ranks {', '.join(str(l.rank) for l in lifted.layers)}), proved "
            f"equal to the imported network on all of Q^{net.input_dim} by the kernel (lattice "
            "normal forms)"
        )
    if args.domain:
        said = args.domain.removeprefix("--domain-from ")
        if said.startswith("--box ") and len(said) > 100:  # hundreds of intervals
            said = f"{said[:60]}... ({said.count(';') + 1} intervals)"
        print(f"  domain recorded: {said}")
    return EXIT_OK


def run_lift(args) -> int:
    """``lift NET [-o LIFTED.json] [--cert C]``: the Maxout network of the fewest layers that
    computes the same max/min expression as NET, proved equal on all of Q^d by the kernel's
    lattice normal forms (``kernel/lattice.py``); exit 3 where NET has no lattice reading."""
    from .cpwl.lift import NotLattice, lift
    from .io import model_to_json, write_json_atomic
    from .io.certificates import certificate_to_json
    from .io.models import check_outputs
    from .kernel.errors import CheckFailed
    from .kernel.lattice import LatticeForms, check_lattice
    from .kernel.polyhedron import Polyhedron

    check_outputs([("-o", args.output), ("--cert", args.cert)], [("NET", args.model)])
    net = load_model(args.model)
    if not isinstance(net, MaxoutNetwork):
        raise UsageError(f"{args.model}: lift reads a Maxout or ReLU network, not a Transformer")
    t0 = time.monotonic()
    try:
        lifted = dataclasses.replace(lift(net), domain=net.domain)
    except NotLattice as e:
        return _not_lifted(args, str(e), time.monotonic() - t0)
    lift_s = time.monotonic() - t0
    t1 = time.monotonic()
    try:
        atoms = check_lattice(lifted, net)
    except CheckFailed as e:  # a producer's slip: say so, write nothing
        return _not_lifted(args, f"the kernel rejected the lifted network: {e}", lift_s)
    kernel_s = time.monotonic() - t1
    if args.output:
        write_json_atomic(args.output, model_to_json(lifted))
    if args.cert:
        everywhere = Polyhedron((), (), net.input_dim)
        stats = {"strategy": "lift", "atoms": atoms}
        write_json_atomic(
            args.cert, certificate_to_json(lifted, net, everywhere, LatticeForms(), stats)
        )
    out = {
        "verdict": "proved",
        "trust": "kernel-checked",
        "certificate_kind": "lattice",
        "input": _shape(net),
        "lifted": _shape(lifted),
        "atoms": atoms,
        "lift_s": round(lift_s, 3),
        "kernel_check_s": round(kernel_s, 3),
        "output": args.output,
        "cert": args.cert,
    }
    if args.json:
        print(jsonout.dumps(out))
        return EXIT_OK
    print(
        f"lifted: {len(net.layers)} layers (widths {_widths(net)}) -> {len(lifted.layers)} "
        f"(widths {_widths(lifted)}; ranks {', '.join(str(l.rank) for l in lifted.layers)}), "
        f"in {lift_s:.2f} s"
    )
    print(
        f"  proved equal on all of Q^{net.input_dim} by the kernel: both rewrite to one lattice "
        f"normal form ({atoms} atoms, {kernel_s:.2f} s)"
    )
    for what, path in (("wrote", args.output), ("certificate", args.cert)):
        if path:
            print(f"  {what}: {path}")
    return EXIT_OK


def _shape(net: MaxoutNetwork) -> dict:
    return {
        "layers": len(net.layers),
        "widths": [l.width for l in net.layers],
        "ranks": [l.rank for l in net.layers],
    }


def _widths(net: MaxoutNetwork) -> str:
    return ", ".join(str(l.width) for l in net.layers)


def _not_lifted(args, reason: str, seconds: float) -> int:
    if args.json:
        print(
            jsonout.dumps(
                {"verdict": "unknown", "trust": None, "reason": reason, "lift_s": round(seconds, 3)}
            )
        )
    else:
        print(f"not lifted: {reason}")
    return EXIT_UNKNOWN
