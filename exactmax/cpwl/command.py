"""``exactmax cpwl``: a CPWL specification -> a Maxout network (and its literal reference)."""

from __future__ import annotations

import json
import time

from .. import jsonout
from ..construct.size import parameter_count
from ..exits import UsageError
from ..io.numbers import LONG_EXACT, approx_point, q_str
from ..kernel.maxout import MaxoutNetwork
from ..kernel.polyhedron import Box

DESCRIPTION = """\
Convert a continuous piecewise linear function (an exactmax/cpwl file) into an exact Maxout
network (Theorem 4.2). Kinds and routes: relu (a ReLU network of any depth -> rank-2 Maxout
layers); breakpoints (1-D values at breakpoints -> the difference-of-convex split: hinges where
the slope increases go to the convex unit g, the others to h; one layer, 2 units, output g - h);
lattice (max_i min_{j in S_i} l_j -> two Maxout layers, or with --route dc one layer of 2 units
through min_S l = sum_S l - max_j sum_{k != j} l_k); dc (max_i a_i - max_j b_j -> one layer, 2
units, output [1, -1]). --reference writes the specification's own semantics as a second,
literally built model (the ReLU layers themselves; the hinge sum of the breakpoints as a ReLU
layer; the lattice or DC form evaluated map by map), so that `exactmax equiv NET REF` proves
the conversion, and `exactmax verify NET` its Transformer. --check runs both proofs here.
--cert C.json writes the certificate of NET = the specification's literal encoding: where both
rewrite to one lattice normal form (relu, lattice and dc kinds) it holds on all of Q^d and
needs no domain; otherwise (breakpoints) it is a proof on the domain. `exactmax check-cert C`
re-checks it."""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "cpwl", help="convert a CPWL specification into a Maxout network", description=DESCRIPTION
    )
    p.add_argument("spec", metavar="SPEC.json", help="an exactmax/cpwl file")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="NET.json",
        help="where to write the exactmax/maxout network",
    )
    p.add_argument(
        "--reference",
        metavar="REF.json",
        help="also write the specification's literal encoding (an exactmax/maxout "
        "file built differently from NET) for exactmax equiv",
    )
    p.add_argument(
        "--route",
        choices=("relu", "dc", "lattice"),
        help="conversion route (default: relu for kind relu, dc for breakpoints "
        "and dc, lattice for lattice)",
    )
    p.add_argument(
        "--max-pieces",
        type=int,
        default=20000,
        metavar="N",
        help="refuse a DC expansion of a lattice spec with more than N pieces in a "
        "unit (default 20000)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="prove NET = reference and NET = its compiled Transformer on the "
        "domain (kernel-checked certificates; needs a domain in the spec)",
    )
    p.add_argument(
        "--cert",
        metavar="C.json",
        help="write the kernel-checked certificate of NET = the specification's literal "
        "encoding (on all of Q^d where lattice normal forms prove it, else on the domain)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="time limit of each --check or --cert proof (default 60)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def network_summary(net: MaxoutNetwork) -> dict:
    """Widths, ranks and piece counts of a Maxout network."""
    return {
        "layers": len(net.layers),
        "widths": [l.width for l in net.layers],
        "ranks": [l.rank for l in net.layers],
        "pieces": [[len(u.pieces) for u in l.units] for l in net.layers],
        "parameters": parameter_count(net),
    }


def run(args) -> int:
    from ..io import model_to_json, write_json_atomic
    from ..io.models import check_outputs
    from .convert import ROUTES, TooLarge, compile_cpwl, kind_of, reference_json
    from .spec import load_spec

    check_outputs(
        [("-o", args.output), ("--reference", args.reference), ("--cert", args.cert)],
        [("SPEC.json", args.spec)],
    )
    spec = load_spec(args.spec)
    kind = kind_of(spec)
    route = args.route or ROUTES[kind][0]
    if route not in ROUTES[kind]:
        raise UsageError(f"--route {route}: kind {kind!r} has route(s) " + ", ".join(ROUTES[kind]))
    if args.max_pieces < 1:
        raise UsageError(f"--max-pieces: expected a positive integer, got {args.max_pieces}")
    try:
        net = compile_cpwl(spec, route, args.max_pieces)
    except TooLarge as e:
        raise UsageError(f"{args.spec}: {e}; use --route lattice or raise --max-pieces") from None
    if args.check:  # before anything is written
        _check_preconditions(args, net)
    elif args.cert and args.timeout <= 0:
        raise UsageError(f"--timeout: expected a positive number of seconds, got {args.timeout}")
    spec_proof, cert = None, None
    if args.check or args.cert:
        spec_proof, cert = prove_spec(net, _reference_model(spec), args.timeout)
    obj = model_to_json(net)
    obj["meta"] = {"cpwl": {"spec": args.spec, "kind": kind, "route": route}}
    write_json_atomic(args.output, obj)
    out = {
        "spec": args.spec,
        "kind": kind,
        "route": route,
        "output": args.output,
        "network": network_summary(net),
        "reference": None,
        "cert": None,
        "check": None,
    }
    if args.reference:
        ref = reference_json(spec)
        ref["meta"] = {"cpwl": {"spec": args.spec, "kind": kind, "reference": True}}
        write_json_atomic(args.reference, ref)
        out["reference"] = args.reference
    if cert is not None and args.cert:
        write_json_atomic(args.cert, cert)
        out["cert"] = args.cert
    if args.check:
        out["check"] = {"spec": spec_proof} | check_transformer(net, args.timeout)
    elif args.cert:
        out["check"] = {"spec": spec_proof}
    code = 0
    if out["check"] is not None:
        verdicts = [c["verdict"] for c in out["check"].values()]
        code = 1 if "refuted" in verdicts else (0 if all(v == "proved" for v in verdicts) else 3)
        out["verdict"] = {0: "proved", 1: "refuted", 3: "unknown"}[code]
        out["trust"] = "kernel-checked" if code == 0 else None  # a refutation: the point
        out["reason"] = next(
            (c.get("reason") for c in out["check"].values() if c["verdict"] == "unknown"), None
        )
    if args.json:
        print(jsonout.dumps(out))
        return code
    s = out["network"]
    print(
        f"wrote {args.output}: {kind} by the {route} route, {s['layers']} Maxout layer(s), "
        f"widths {s['widths']}, ranks {s['ranks']}, {s['parameters']} parameters"
    )
    if args.reference:
        print(f"wrote {args.reference}: the specification's literal encoding")
    for name, c in (out["check"] or {}).items():
        what = (
            "the specification (its literal encoding)"
            if name == "spec"
            else "its compiled Transformer"
        )
        line = f"{c['verdict']}"
        if c["verdict"] == "proved":
            line += f" ({c['trust']})"
        line += f": {args.output} = {what}"
        if c.get("everywhere"):
            line += f" on all of Q^{net.input_dim}"
        if c.get("reason"):
            line += f"; {c['reason']}"
        if c.get("certificate_kind") == "lattice":
            line += f"; one lattice normal form ({c['cells']} atoms), {c['time_s']:.2f} s"
        elif c.get("certificate_kind") == "correspondence":
            line += f"; a layer correspondence ({c['cells']} units), {c['time_s']:.2f} s"
        elif c.get("cells") is not None:
            line += f"; {c['cells']} cells, {c['time_s']:.2f} s"
        print(line)
        if c["verdict"] == "refuted":
            print("  x = (" + ", ".join(c["x"]) + ")")
            if max(map(len, c["x"])) > LONG_EXACT:
                print("  x ~ (" + ", ".join(c["x_approx"]) + ")")
    if out["cert"]:
        print(f"certificate: {args.cert} (exactmax check-cert {args.cert} re-checks it)")
    elif args.cert:
        print(
            f"no certificate written to {args.cert}: the proof of NET = the specification "
            "did not succeed"
        )
    return code


def _check_preconditions(args, net: MaxoutNetwork) -> None:
    """What --check needs, refused as input errors before NET is written: a positive
    --timeout and a bounded, non-empty domain."""
    from ..construct.bounds import DomainError, bounding_box
    from ..io import InputError

    if args.timeout <= 0:
        raise UsageError(f"--timeout: expected a positive number of seconds, got {args.timeout}")
    if net.domain is None:
        raise UsageError(
            f'--check: {args.spec} has no domain; add a "domain" entry '
            "(kinds relu, lattice, dc) or check later with exactmax equiv "
            "--domain"
        )
    try:
        bounding_box(net.domain, "auto")
    except DomainError as e:
        raise InputError(
            args.spec, "domain", f"--check needs a bounded, non-empty domain: {e}"
        ) from None


def _reference_model(spec) -> MaxoutNetwork:
    from ..io.jsonfile import Cursor
    from ..io.models import read_maxout
    from .convert import reference_json

    return read_maxout(Cursor("<reference>", "", json.loads(json.dumps(reference_json(spec)))))


def _proof_json(v, started: float) -> dict:
    return {
        "verdict": v.verdict,
        "trust": v.trust,
        "reason": v.reason,
        "cells": v.stats.get("leaves_checked"),
        "certificate_kind": v.stats.get("certificate_kind"),
        "time_s": round(time.monotonic() - started, 3),
        "x": [q_str(t) for t in v.x] if v.x is not None else None,
        "x_approx": approx_point(v.x) if v.x is not None else None,
    }


def prove_spec(
    net: MaxoutNetwork, ref: MaxoutNetwork, timeout_s: float
) -> tuple[dict, dict | None]:
    """Prove NET = REF (the specification's literal encoding): ({"verdict", "trust", "reason",
    "cells", "certificate_kind", "everywhere", "time_s", "x", "x_approx"}, the certificate
    file's object or None).  First a layer correspondence or one lattice normal form (A = B on
    all of Q^d, no domain needed: the relu, lattice and dc kinds), else the proof on NET's
    domain (breakpoints).  Only the kernel's checks make "proved" or "refuted"."""
    from ..io.certificates import certificate_to_json
    from ..kernel.polyhedron import Polyhedron
    from ..prove.command import decide_equal, equality_certificate
    from ..prove.verify import Verdict, verify_by_correspondence, verify_by_lattice

    started = time.monotonic()
    stats: dict = {}
    v = verify_by_correspondence(net, ref, stats)
    if v is None and "lattice_failed" not in stats:
        v = verify_by_lattice(net, ref, stats)
    if v is not None:
        everywhere = Polyhedron((), (), net.input_dim)
        kept = {"strategy": v.stats.get("strategy")}
        cert = certificate_to_json(net, ref, everywhere, v.certificate, kept)
        return _proof_json(v, started) | {"everywhere": True}, cert
    if net.domain is None:
        why = stats.get("lattice_failed", "no lattice normal form")
        v = Verdict(
            "unknown",
            reason=f"{why}, and the specification has no domain to prove "
            'it on (add a "domain" entry)',
        )
        return _proof_json(v, started) | {"everywhere": False}, None
    v, _, facts = decide_equal(
        net, ref, net.domain, ("NET", "REF"), timeout=timeout_s, search=False
    )
    if v is None:  # an empty domain: refused before (_check_preconditions) or vacuous
        v = Verdict("unknown", reason="the domain is empty")
    proved = v.verdict == "proved"
    on_domain = equality_certificate(net, ref, net.domain, v, facts) if proved else None
    return _proof_json(v, started) | {"everywhere": False}, on_domain


def check_transformer(net: MaxoutNetwork, timeout_s: float) -> dict:
    """Prove NET = compile(NET) on NET's domain: {"transformer": {..., "tokens", "sublayers"}}
    (prove.verify; only the kernel's checks make "proved" or "refuted")."""
    from ..construct.transformer import compile_transformer
    from ..prove.verify import VerifyOptions, verify_equal

    started = time.monotonic()
    assert net.domain is not None  # refused before (_check_preconditions)
    tf = compile_transformer(net, net.domain).transformer
    v = verify_equal(net, tf, net.domain, VerifyOptions(timeout_s=timeout_s))
    out = _proof_json(v, started) | {"tokens": tf.n_tokens, "sublayers": len(tf.sublayers)}
    return {"transformer": out}


# ------------------------------------------------------------------------- approx-convex

APPROX_DESCRIPTION = """\
The convex Lipschitz corollary: tangent planes of a convex polynomial f at a grid of spacing
<= h on a box (both ends of every side included) give a max-affine network g (one Maxout unit,
rank = number of distinct tangent planes) with 0 <= f - g <= L sqrt(d) h, L = max |grad f|.
Everything is exact: f must be a polynomial with rational coefficients (decimals read exactly;
exp, sqrt(2), 1/x and the like are refused), its convexity on the box is checked exactly
(quadratics in any dimension by the Hessian, 1-D polynomials by f''), L is exact, the bound
is exact or rounded up to a rational (said which), and for d <= 2 the true maximum of f - g
is computed exactly (at a vertex of a cell). A box side with a negative lower end is written
with '=' and quoted: --box="-1,1;-1,1". EXPR is read by a whitelist parser (numbers, the
variables, + - * / ^ ** ( ), sqrt of a constant; total degree <= 64, <= 10000 characters);
an EXPR starting with '-' may be given as is ("-x + x^2") unless it starts with -o or -h;
in every case it can go last, after '--': approx-convex --box 0,1 --h 1/4 -o g.json -- -x+x^2."""


def add_approx_parser(sub) -> None:
    p = sub.add_parser(
        "approx-convex",
        help="max-affine network of a convex polynomial "
        "(tangent planes on a grid), with its error bound",
        description=APPROX_DESCRIPTION,
    )
    p.add_argument(
        "expr",
        metavar="EXPR",
        help="a polynomial: numbers, the variables, + - * / "
        '^ ** ( ) and sqrt of a constant, e.g. "x^2 + x*y/2 + y^2" (total degree '
        "<= 64, at most 10000 characters)",
    )
    p.add_argument(
        "--box",
        required=True,
        metavar="LO,HI;LO,HI",
        help="one interval per variable, separated by ';' (exact numbers)",
    )
    p.add_argument("--h", required=True, metavar="H", help="grid spacing (an exact number > 0)")
    p.add_argument(
        "--vars",
        metavar="X,Y",
        help="the variables in order (default: the expression's, sorted by name)",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="NET.json",
        help="where to write the exactmax/maxout network (domain: the box)",
    )
    p.add_argument(
        "--max-points",
        type=int,
        default=10000,
        metavar="N",
        help="refuse grids of more than N points (default 10000)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run_approx)


def parse_box(text: str) -> Box:
    """ "lo,hi;lo,hi" -> Box; UsageError naming the side and the problem."""
    from ..io.numbers import NumberSyntaxError, parse_intervals
    from ..kernel.polyhedron import Box

    try:
        sides = parse_intervals(text)
    except NumberSyntaxError as e:
        raise UsageError(f"--box: {e}") from None
    for i, (lo, hi) in enumerate(sides):
        if not lo < hi:
            raise UsageError(f"--box: side {i}: expected lo < hi, got {lo}, {hi}")
    return Box(tuple(lo for lo, _ in sides), tuple(hi for _, hi in sides))


def run_approx(args) -> int:
    from ..io import model_to_json, write_json_atomic
    from ..io.numbers import NumberSyntaxError, parse_rational
    from .convex import NotExact, approximate_convex, parse_polynomial

    box = parse_box(args.box)
    try:
        h = parse_rational(args.h)
    except NumberSyntaxError as e:
        raise UsageError(f"--h: {e}") from None
    if not h > 0:
        raise UsageError(f"--h: expected a positive spacing, got {h}")
    names = None
    if args.vars:
        names = tuple(v.strip() for v in args.vars.split(","))
        if not all(n.isidentifier() for n in names) or len(set(names)) != len(names):
            raise UsageError(
                f"--vars: expected distinct names separated by commas, got {args.vars!r}"
            )
    expr = args.expr.strip()
    try:
        f = parse_polynomial(expr, names)
    except NotExact as e:
        raise UsageError(f"EXPR: {e}") from None
    if box.dim != len(f.names):
        src = "--vars" if names else "EXPR"
        raise UsageError(
            f"--box: expected {len(f.names)} side(s) \"lo,hi\" separated by ';', "
            f"one per variable ({', '.join(f.names)}, from {src}), got {box.dim}"
        )
    try:
        a = approximate_convex(f, box, h, args.max_points)
    except NotExact as e:
        raise UsageError(f"EXPR: {e}") from None
    except ValueError as e:
        raise UsageError(f"--h: {e}; raise --h or --max-points") from None
    obj = model_to_json(a.net)
    obj["meta"] = {"approx_convex": {"expr": expr, "vars": list(f.names), "h": q_str(h)}}
    write_json_atomic(args.output, obj)
    err = a.max_error
    out = {
        "expr": expr,
        "vars": list(f.names),
        "dim": len(f.names),
        "box": [[q_str(lo), q_str(hi)] for lo, hi in zip(box.lower, box.upper)],
        "h": q_str(h),
        "grid_points": a.grid_points,
        "rank": a.pieces,
        "output": args.output,
        "convexity": a.convexity,
        "lipschitz_squared": q_str(a.lipschitz_squared),
        "bound": q_str(a.bound),
        "bound_is": "exact" if a.bound_exact else "upper bound",
        "max_error": q_str(err[0]) if err else None,
        "max_error_at": [q_str(v) for v in err[1]] if err else None,
        "max_error_at_approx": approx_point(err[1]) if err else None,
    }
    if args.json:
        print(jsonout.dumps(out))
        return 0
    print(
        f"wrote {args.output}: one Maxout unit of rank {a.pieces} ({a.grid_points} grid "
        f"points, spacing {q_str(h)}) on " + " x ".join(f"[{lo}, {hi}]" for lo, hi in out["box"])
    )
    print(f"convexity: {a.convexity}")
    rel = "=" if a.bound_exact else "<="
    print(
        f"bound: 0 <= f - g <= L sqrt(d) h {rel} {out['bound']} (L^2 = "
        f"{out['lipschitz_squared']}, exact; "
        + ("the bound is exact)" if a.bound_exact else "sqrt rounded up to a rational)")
    )
    if err:
        print(
            f"true maximum error: max (f - g) = {out['max_error']} (exact), at x = ("
            + ", ".join(out["max_error_at"])
            + ")"
            + (
                f" ~ ({', '.join(out['max_error_at_approx'])})"
                if max(map(len, out["max_error_at"])) > LONG_EXACT
                else ""
            )
        )
    else:
        print("true maximum error: not computed (d > 2)")
    return 0
