"""``exactmax cpwl``: a CPWL specification -> a Maxout network (and its literal reference)."""

from __future__ import annotations

import json

from ..kernel.maxout import MaxoutNetwork
from ..kernel.rational import q_str

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
the conversion, and `exactmax verify NET` its Transformer. --check runs both proofs here."""


def add_parser(sub) -> None:
    p = sub.add_parser("cpwl", help="convert a CPWL specification into a Maxout network",
                       description=DESCRIPTION)
    p.add_argument("spec", metavar="SPEC.json", help="an exactmax/cpwl file")
    p.add_argument("-o", "--output", required=True, metavar="NET.json",
                   help="where to write the exactmax/maxout network")
    p.add_argument("--reference", metavar="REF.json",
                   help="also write the specification's literal encoding (an exactmax/maxout "
                   "file built differently from NET) for exactmax equiv")
    p.add_argument("--route", choices=("relu", "dc", "lattice"),
                   help="conversion route (default: relu for kind relu, dc for breakpoints "
                   "and dc, lattice for lattice)")
    p.add_argument("--max-pieces", type=int, default=20000, metavar="N",
                   help="refuse a DC expansion of a lattice spec with more than N pieces in a "
                   "unit (default 20000)")
    p.add_argument("--check", action="store_true",
                   help="prove NET = reference and NET = its compiled Transformer on the "
                   "domain (kernel-checked certificates; needs a domain in the spec)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="time limit of each --check proof (default 60)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def network_summary(net: MaxoutNetwork) -> dict:
    """Widths, ranks and piece counts of a Maxout network."""
    return {"layers": len(net.layers), "widths": [l.width for l in net.layers],
            "ranks": [l.rank for l in net.layers],
            "pieces": [[len(u.pieces) for u in l.units] for l in net.layers],
            "parameters": net.parameter_count}


def run(args) -> int:
    from ..cli import UsageError
    from ..io import load_model, model_to_json, write_json_atomic
    from .convert import ROUTES, TooLarge, compile_cpwl, kind_of, reference_json
    from .spec import load_spec
    spec = load_spec(args.spec)
    kind = kind_of(spec)
    route = args.route or ROUTES[kind][0]
    if route not in ROUTES[kind]:
        raise UsageError(f"--route {route}: kind {kind!r} has route(s) " +
                         ", ".join(ROUTES[kind]))
    if args.max_pieces < 1:
        raise UsageError(f"--max-pieces: expected a positive integer, got {args.max_pieces}")
    try:
        net = compile_cpwl(spec, route, args.max_pieces)
    except TooLarge as e:
        raise UsageError(f"{args.spec}: {e}; use --route lattice or raise --max-pieces") \
            from None
    obj = model_to_json(net)
    obj["meta"] = {"cpwl": {"spec": args.spec, "kind": kind, "route": route}}
    write_json_atomic(args.output, obj)
    out = {"spec": args.spec, "kind": kind, "route": route, "output": args.output,
           "network": network_summary(net), "reference": None, "check": None}
    if args.reference:
        ref = reference_json(spec)
        ref["meta"] = {"cpwl": {"spec": args.spec, "kind": kind, "reference": True}}
        write_json_atomic(args.reference, ref)
        out["reference"] = args.reference
    if args.check:
        if args.timeout <= 0:
            raise UsageError(f"--timeout: expected a positive number of seconds, got "
                             f"{args.timeout}")
        if net.domain is None:
            raise UsageError(f"--check: {args.spec} has no domain; add a \"domain\" entry "
                             "(kinds relu, lattice, dc) or check later with exactmax equiv "
                             "--domain")
        ref_net = load_model(args.reference) if args.reference else _reference_model(spec)
        out["check"] = check_chain(net, ref_net, args.timeout)
    code = 0
    if out["check"] is not None:
        verdicts = [c["verdict"] for c in out["check"].values()]
        code = 1 if "refuted" in verdicts else (0 if all(v == "proved" for v in verdicts)
                                                else 3)
    if args.json:
        print(json.dumps(out))
        return code
    s = out["network"]
    print(f"wrote {args.output}: {kind} by the {route} route, {s['layers']} Maxout layer(s), "
          f"widths {s['widths']}, ranks {s['ranks']}, {s['parameters']} parameters")
    if args.reference:
        print(f"wrote {args.reference}: the specification's literal encoding")
    for name, c in (out["check"] or {}).items():
        what = "the specification (its literal encoding)" if name == "spec" else \
            "its compiled Transformer"
        line = f"{c['verdict']}"
        if c["verdict"] == "proved":
            line += f" ({c['trust']})"
        line += f": {args.output} = {what}"
        if c.get("reason"):
            line += f"; {c['reason']}"
        if c.get("cells") is not None:
            line += f"; {c['cells']} cells, {c['time_s']:.2f} s"
        print(line)
        if c["verdict"] == "refuted":
            print("  x = (" + ", ".join(c["x"]) + ")")
    return code


def _reference_model(spec) -> MaxoutNetwork:
    from ..io.jsonfile import Cursor
    from ..io.models import read_maxout
    from .convert import reference_json
    return read_maxout(Cursor("<reference>", "", json.loads(json.dumps(reference_json(spec)))))


def check_chain(net: MaxoutNetwork, ref: MaxoutNetwork, timeout_s: float) -> dict:
    """Prove NET = REF and NET = compile(NET) on NET's domain: {"spec": ..., "transformer":
    ...}, each {"verdict", "trust", "reason", "cells", "time_s", "x"}.  Only the kernel's
    checks make "proved" or "refuted" (prove.verify)."""
    from ..construct.transformer import compile_transformer
    from ..prove.verify import VerifyOptions, verify_equal
    opts = VerifyOptions(timeout_s=timeout_s)
    tf = compile_transformer(net, net.domain).transformer
    result = {}
    for name, other in (("spec", ref), ("transformer", tf)):
        v = verify_equal(net, other, net.domain, opts)
        result[name] = {"verdict": v.verdict, "trust": v.trust, "reason": v.reason,
                        "cells": v.stats.get("leaves_checked"),
                        "time_s": round(v.stats.get("time_s", 0.0), 3),
                        "x": [q_str(t) for t in v.x] if v.x is not None else None}
    result["transformer"]["tokens"] = tf.n_tokens
    result["transformer"]["sublayers"] = len(tf.sublayers)
    return result

