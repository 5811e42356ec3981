"""``exactmax softmax-bound``: the certified error of the softmax Transformer
(docs/notes/construction.md §3).

What is checked where: the cell search runs in python-flint ``arb`` balls (untrusted, it only
chooses the bisection tree); the final tree is re-checked cell by cell by
``kernel.softmax.check_softmax_bound`` in exact rational arithmetic (e^{-a} by Taylor sums with
remainder, e > 2718281828/10^9, W((n-1)/e) checked by c e^{c+1} >= n - 1), including the gate
condition |z~^l| <= C_l on every cell (and, over a polyhedron, Farkas multipliers for layer 1).
Only that value is printed as certified.  The observed error W is a lower bound found by search
(exact N(x) against T_lam(x) in balls); the closed form is §3's formula in balls.
"""

from __future__ import annotations

import sys
import time

from .. import jsonout
from ..exits import EXIT_OK, EXIT_UNKNOWN, UsageError
from ..io.models import domain_arguments
from ..io.numbers import q_str
from ..kernel.rational import Q


def add_parser(sub) -> None:
    p = sub.add_parser(
        "softmax-bound",
        help="certified error of the softmax Transformer at a scale lambda",
        description="Bound sup over the domain of |T_lambda(x) - N(x)|_inf, where N is the "
        "Maxout network and T_lambda its construction (exactmax compile) with softmax "
        "attention at scale lambda. A bisection of the domain is searched in ball arithmetic "
        "(untrusted); the final cells are re-checked by the kernel in exact rationals, "
        "including that every gate stays exact under the perturbation. Printed side by side: "
        "the closed-form bound of docs/notes/construction.md §3, the certified bound U, the "
        "worst error W found at points of the domain (a lower bound) and U / W. Exit 0 when "
        "certified, 3 when unknown (budget, or gates not exact: then a compile with --slack "
        "is suggested), 2 on bad input.",
    )
    p.add_argument("model", metavar="NET.json", help="an exactmax/maxout network")
    p.add_argument(
        "--lambda",
        dest="lam",
        metavar="L",
        help="softmax scale (an exact positive number); needed unless --epsilon",
    )
    p.add_argument(
        "--transformer",
        metavar="TF.json",
        help="the Transformer (default: compile NET); it must be exactmax "
        "compile's construction of NET, e.g. compiled with --slack",
    )
    domain_arguments(p, "the network's")
    p.add_argument(
        "--epsilon",
        metavar="E",
        help="also find the smallest lambda (within --tolerance) whose certified "
        "U <= E, next to the closed-form lambda",
    )
    p.add_argument(
        "--tolerance",
        default="0.05",
        metavar="T",
        help="relative tolerance of the lambda search: the reported lambda is at "
        "most (1 + T) times one whose ball bound exceeds E (default 0.05)",
    )
    p.add_argument(
        "--max-cells",
        type=int,
        default=4000,
        metavar="N",
        help="largest bisection tree (default 4000 cells)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds for the bounds over the domain and the cell search of one "
        "lambda, counted from the command's start (default 30; each further lambda "
        "of --epsilon gets S more); the kernel re-check comes on top",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


# ------------------------------------------------------------------------------- helpers


def _number(text: str, option: str, positive: bool = True) -> Q:
    from ..io.numbers import NumberSyntaxError, parse_rational

    try:
        v = parse_rational(text)
    except NumberSyntaxError as e:
        raise UsageError(f"{option}: {e}") from None
    if positive and not v > 0:
        raise UsageError(f"{option}: expected a positive number, got {q_str(v)}")
    return v


def _up(q: Q, digits: int = 6) -> str:
    from .bound import dec_round, dec_str

    return dec_str(dec_round(q, up=True, digits=digits))


def _down(q: Q, digits: int = 6) -> str:
    from .bound import dec_round, dec_str

    return dec_str(dec_round(q, up=False, digits=digits))


def _arb_up(x) -> Q:
    from .bound import _arb_q

    return _arb_q(x.upper())


def _arb_down(x) -> Q:
    from .bound import _arb_q

    return _arb_q(x.lower())


class _Progress:
    """Progress lines on stderr for runs longer than about two seconds (only when they are
    shown: a terminal, no --json)."""

    def __init__(self, quiet: bool):
        self.quiet, self.t0 = quiet, time.monotonic()

    def cells(self, n, top):
        if not self.quiet:
            top_s = "gates unresolved" if top is None else f"worst cell <= {float(top):.6g}"
            print(
                f"softmax-bound: {n} cells, {top_s}, {time.monotonic() - self.t0:.0f} s",
                file=sys.stderr,
            )

    def check(self, leaves):
        if not self.quiet and (leaves > 300 or time.monotonic() - self.t0 > 2):
            print(
                f"softmax-bound: the kernel re-checks {leaves} cells in exact arithmetic",
                file=sys.stderr,
            )

    def probe(self, lam, r):
        if not self.quiet:
            b = "none" if r.arb_bound is None else f"{float(r.arb_bound):.6g}"
            print(
                f"softmax-bound: lambda = {q_str(lam)}: ball bound {b} ({r.search.leaves} "
                f"cells), {time.monotonic() - self.t0:.0f} s",
                file=sys.stderr,
            )


def _setting(args):
    from ..construct.bounds import DomainError
    from ..io import InputError, load_domain, load_model
    from ..kernel.maxout import MaxoutNetwork
    from ..kernel.transformer import Transformer
    from .bound import NotConstruction, setting_of

    net = load_model(args.model)
    if not isinstance(net, MaxoutNetwork):
        raise InputError(
            args.model,
            "format",
            'expected an "exactmax/maxout" network, got a Transformer (give it with --transformer)',
        )
    dom = load_domain(args.domain, net.input_dim) if args.domain else net.domain
    if dom is None:
        raise InputError(
            args.model,
            "",
            "the bound needs a bounded, non-empty domain and the "
            'network has none; add a "domain" entry or pass --domain FILE',
        )
    tf = None
    if args.transformer:
        tf = load_model(args.transformer)
        if not isinstance(tf, Transformer):
            raise InputError(
                args.transformer,
                "format",
                'expected an "exactmax/transformer" file, got a Maxout network',
            )
        if tf.input_dim != net.input_dim:
            raise InputError(
                args.transformer,
                "input_dim",
                f"expected {net.input_dim} (the network's input dimension), got {tf.input_dim}",
            )
    try:
        return setting_of(net, dom, tf)
    except NotConstruction as e:
        raise InputError(
            args.transformer,
            "",
            f"not the construction of {args.model}: {e}; "
            f"compile it with exactmax compile {args.model} -o TF.json",
        ) from None
    except DomainError as e:
        where, path = (args.domain, "") if args.domain else (args.model, "domain")
        raise InputError(
            where, path, f"the bound needs a bounded, non-empty domain, but {e}"
        ) from None


def _slack_advice(args, s, r, lam) -> tuple[str, Q | None]:
    from .bound import closed_form_slack

    slack = closed_form_slack(s, lam)  # enough by §3's closed form (the cells then check it)
    if slack == 0:
        slack = Q(1, 2)
    from .bound import dec_str

    dom = f" --domain {args.domain}" if args.domain else ""
    cmd = (
        f"exactmax compile {args.model}{dom} --slack {dec_str(slack)} -o TF.json, then "
        f"exactmax softmax-bound {args.model}{dom} --transformer TF.json ..."
    )
    return cmd, slack


def _gate_advice(args, s, r, lam) -> tuple[list[str], Q | None]:
    """What to say when a gate fails, and the suggested slack (None if no slack helps)."""
    g = r.search.gate_fail if r.search is not None else None
    layer = None if g is None else (g["x"][1] if g["x"] is not None else g["layer"])
    if layer == 0:
        # layer 1 is not perturbed by softmax: its gates are simply too small for this domain
        dom = f" --domain {args.domain}" if args.domain else ""
        return [
            "  layer 1 is not perturbed by softmax: the Transformer's gate C_1 is too "
            "small for this domain (compiled for a smaller one?); no bound is printed.",
            f"  compile it on this domain: exactmax compile {args.model}{dom} -o TF.json"
            + (" (with --slack for the later layers if needed)" if len(s.gates) > 1 else ""),
        ], None
    cmd, slack = _slack_advice(args, s, r, lam)
    return [
        "  the softmax perturbation may push a pre-activation past its gate C_l, where "
        "the gates stop being exact and the recursion bounded here no longer describes "
        "the Transformer; so no bound is printed.",
        f"  try a compile with room in the gates: {cmd}",
    ], slack


def _not_certified(args, s, r, lam, out) -> int:
    gates = r.verdict == "gates-fail" or r.search.gate_fail is not None
    advice, slack = _gate_advice(args, s, r, lam) if gates else ([], None)
    # the closed form of §3 assumes exact gates too: no bound is printed when they fail
    out.update(
        verdict="unknown",
        reason=r.reason,
        certified_bound=None,
        closed_form_bound=None if gates else out.get("closed_form_bound"),
        suggested_slack=_up(slack) if slack is not None else None,
    )
    if args.json:
        print(jsonout.dumps(out))
    else:
        print(f"unknown: no bound for lambda = {q_str(lam)}: {r.reason}")
        for line in advice:
            print(line)
    return EXIT_UNKNOWN


KERNEL_CHECKED = (
    "in exact rationals, on every cell of the domain, the bound of the softmax "
    "recursion of docs/notes/construction.md §3 for NET with gates C, and |z~^l| <= C_l"
)
OUTSIDE_KERNEL = (
    "that the Transformer is the construction of NET with gates C (built, or "
    "rebuilt and compared with --transformer, by untrusted code)",
    "that T_lambda follows that recursion when the gates hold (the argument of "
    "docs/notes/construction.md §3, on paper)",
)
"""What a "certified" bound rests on: the verdict line and --json name both parts."""


# ----------------------------------------------------------------------------------- run


def run(args) -> int:
    from ..kernel.errors import CheckFailed
    from .bound import (
        certify,
        check_search,
        closed_form,
        kernel_check,
        observed_error,
        search_bound,
        smallest_lambda,
    )

    if args.lam is None and args.epsilon is None:
        raise UsageError("softmax-bound: give --lambda L, --epsilon E, or both")
    lam = _number(args.lam, "--lambda") if args.lam is not None else None
    eps = _number(args.epsilon, "--epsilon") if args.epsilon is not None else None
    tol = _number(args.tolerance, "--tolerance")
    if args.max_cells < 1:
        raise UsageError(f"--max-cells: expected a positive integer, got {args.max_cells}")
    if not args.timeout > 0:
        raise UsageError(f"--timeout: expected a positive number of seconds, got {args.timeout}")
    from ..interruption import time_limit

    started = time.monotonic()
    deadline = started + args.timeout
    # the limit holds inside one long exact step too (an LP over a polyhedron of huge
    # numbers): the bounds over the domain and the first lambda's search share it
    with time_limit(deadline, args.timeout):
        s = _setting(args)
    from ..progress import shown

    prog = _Progress(quiet=not shown(args))
    out: dict = {
        "model": args.model,
        "transformer": args.transformer,
        "tokens": s.n,
        "gate_constants": [q_str(g) for g in s.gates],
    }
    code = EXIT_OK
    lines: list[str] = []
    if lam is not None:
        t0 = time.monotonic()
        with time_limit(deadline, args.timeout):
            found = search_bound(s, lam, args.max_cells, max(0.0, deadline - t0), prog.cells)
        r = check_search(s, lam, found, on_check=prog.check)
        out.update(
            {
                "lambda": q_str(lam),
                "cells": r.search.leaves,
                "cells_outside": r.search.excluded,
                "search_stop": r.search.stop,
                "closed_form_bound": _up(_arb_up(closed_form(s.net, s.n, lam))),
            }
        )
        if r.verdict != "certified":
            return _not_certified(args, s, r, lam, out)
        t_check = r.check_time_s
        obs = observed_error(s, lam, r.search.worst)
        W = _arb_down(obs.error)
        total = time.monotonic() - t0
        cf = _arb_up(closed_form(s.net, s.n, lam))
        ratio = None if W == 0 else r.bound / W
        out.update(
            verdict="certified",
            trust="kernel-checked",
            kernel_checked=KERNEL_CHECKED,
            outside_kernel=list(OUTSIDE_KERNEL),
            certified_bound=_up(r.bound),
            certified_bound_exact=q_str(r.bound),
            observed_error=_down(W),
            observed_x=[q_str(v) for v in obs.x],
            observed_points=obs.points,
            ratio_U_W=None if ratio is None else _up(ratio, 4),
            ratio_closed_form_U=_up(cf / r.bound, 4) if r.bound > 0 else None,
            search_time_s=round(r.search.time_s, 3),
            check_time_s=round(t_check, 3),
            time_s=round(total, 3),
        )
        lines += [
            f"certified: |T_lambda(x) - N(x)|_inf <= {out['certified_bound']} for every x in "
            f"the domain, lambda = {q_str(lam)}",
            f"  the kernel checked: {KERNEL_CHECKED}",
            f"  outside the kernel: {OUTSIDE_KERNEL[0]}; {OUTSIDE_KERNEL[1]}",
            f"  closed-form bound (docs/notes/construction.md §3)  {out['closed_form_bound']}",
            f"  certified bound U                       {out['certified_bound']}   "
            f"({r.search.leaves} cells; ball search {r.search.time_s:.2f} s, untrusted; "
            f"kernel re-check {t_check:.2f} s)",
            f"  observed worst error W (lower bound)    {out['observed_error']}   at x = ("
            + ", ".join(_down(v, 6) for v in obs.x)
            + ")",
            "  U / W                                   "
            + ("-" if ratio is None else out["ratio_U_W"])
            + f"   (closed form / U = {out['ratio_closed_form_U']}); {total:.2f} s in all",
            "  gates: |z~^l| <= C_l on every cell, C = ("
            + ", ".join(out["gate_constants"])
            + ") (checked by the kernel)",
        ]
    if eps is not None:
        eo = _epsilon(s, eps, tol, args, prog, kernel_check, CheckFailed, certify, smallest_lambda)
        out["epsilon"] = eo
        if eo["certified_lambda"] is None:
            code = EXIT_UNKNOWN
        lines += [
            f"epsilon = {eo['epsilon']}: smallest certified lambda "
            + (
                f"{eo['certified_lambda']} (certified U = {eo['certified_bound']}; "
                f"lambda = {eo['lambda_fails']} not certified in balls within the "
                f"budget, tolerance {eo['tolerance']})"
                if eo["certified_lambda"] is not None
                else f"not found ({eo['reason']})"
            )
            + f"; closed-form lambda {eo['closed_form_lambda']}"
            + ("" if eo["ratio"] is None else f" ({eo['ratio']} x the certified one)")
        ]
        lines += ["  " + a for a in eo.get("advice", [])]
    if lam is None:
        out["verdict"] = "certified" if code == EXIT_OK else "unknown"
        out["trust"] = "kernel-checked" if code == EXIT_OK else None
    if args.json:
        print(jsonout.dumps(out))
    else:
        print("\n".join(lines))
    return code


def _epsilon(s, eps, tol, args, prog, kernel_check, CheckFailed, certify, smallest_lambda) -> dict:
    """The inverse problem: bisection in balls (untrusted), then the kernel re-checks the tree
    of the lambda found (stepping lambda up by 1 + tol while the exact bound is above eps)."""
    from .bound import _arb_q, closed_form, dec_round, dec_str

    lam_cf = dec_round(_arb_q(closed_form(s.net, s.n, 1).upper()) / eps, up=True, digits=4)
    res = {
        "epsilon": q_str(eps),
        "tolerance": q_str(tol),
        "closed_form_lambda": _up(lam_cf, 4),
        "certified_lambda": None,
        "certified_bound": None,
        "lambda_fails": None,
        "ratio": None,
        "reason": None,
        "probes": 0,
    }
    hi, r, lo, probes = smallest_lambda(s, eps, tol, args.max_cells, args.timeout, prog.probe)
    res["probes"] = len(probes)
    if hi is None:
        res["reason"] = (
            "no lambda up to 16 x the closed-form one was certified in the budget"
            if r is None or r.verdict == "certified-arb"
            else r.reason
        )
        if r is not None and (
            r.verdict == "gates-fail" or (r.search is not None and r.search.gate_fail is not None)
        ):
            advice, slack = _gate_advice(args, s, r, r.lam)
            res["advice"] = [a.strip() for a in advice]
            res["suggested_slack"] = _up(slack) if slack is not None else None
        return res
    for _ in range(4):
        try:
            claim = kernel_check(s, hi, r.search.tree)
        except CheckFailed as e:
            res["reason"] = f"the kernel's exact re-check rejected the cells: {e}"
            return res
        if claim.bound <= eps:
            res.update(
                certified_lambda=dec_str(hi),
                certified_bound=_up(claim.bound),
                lambda_fails=None if lo is None else dec_str(lo),
                ratio=_up(lam_cf / hi, 3),
                reason=None,
            )
            return res
        hi = dec_round(hi * (1 + tol), up=True, digits=4)  # exact bound a hair above: step up
        r = certify(s, hi, args.max_cells, args.timeout, None, check=False)
        if r.verdict != "certified-arb":
            break
    res["reason"] = "the kernel's exact bound stayed above epsilon near the ball bisection's lambda"
    return res
