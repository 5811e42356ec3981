"""Theorem 4.4 of the paper on instances: the bound, its reading, the corrected bound, and a
built network whose linear regions are counted exactly (docs/notes/regions.md).

    B(q, m, T, D) = [ (mT/q)(T-1) + 1 ]^( q (floor(D/3) - 1) ) * sum_{j=0}^{q} C(mT, j) (T-1)^j

Reading: input dimension n0 = q, L = floor(D/3) Maxout layers (three sub-layers each), width
n = mT, rank k = T; then B = ((n/n0)(k-1)+1)^(n0 (L-1)) S(n, n0, k), the classical deep
Maxout lower bound.  Corrected bound (always reached, docs/notes/regions.md): the best split
n = p_1 + ... + p_q of prod_i P(p_i, k)^(L-1) S(n, q, k).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from .. import jsonout
from ..exits import UsageError
from ..io.numbers import q_str
from ..kernel.polyhedron import Box
from ..kernel.rational import Q
from .fold import (
    FoldNetwork,
    best_split,
    binomial_sum,
    build_fold_network,
    build_zigzag_43,
    fold_pieces,
)


def evaluate_bound(m: int, T: int, q: int, D: int) -> Q:
    """B(q, m, T, D) exactly, as a rational (fractional when q does not divide mT; a negative
    exponent when D < 3 is evaluated as written)."""
    if min(m, T, q) < 1 or D < 0:
        raise ValueError("need m, T, q >= 1 and D >= 0")
    n, L = m * T, D // 3
    base = Q(n, q) * (T - 1) + 1
    e = q * (L - 1)
    power = base**e if e >= 0 else 1 / base ** (-e)
    return power * binomial_sum(n, q, T)


def evaluate_corrected(n: int, q: int, k: int, L: int) -> tuple[int, tuple[int, ...]] | None:
    """(prod_i P(p_i, k)^(L-1) S(n, q, k), the split) for the best split, or None when there is
    no split (L >= 2 and n < q); for L = 1 it is S(n, q, k) with no split."""
    if L < 1:
        return None
    if L == 1:
        return binomial_sum(n, q, k), ()
    if n < q:
        return None
    split = best_split(n, q, k)
    value = binomial_sum(n, q, k)
    for p in split:
        value *= fold_pieces(p, k) ** (L - 1)
    return value, split


def _num(v) -> object:
    """An exact number for JSON: an int when integral, else "p/q"."""
    v = Q(v)
    return int(v.p) if v.q == 1 else q_str(v)


UNREACHABLE_WHY = (
    "reaching B in 1-D forces every second-layer unit to switch k-1 times in each of the "
    "n(k-1)+1 first-layer intervals, so each difference of two of its pieces needs n(k-1)+1 "
    "sign changes; a difference c.u(x) + const of convex units changes slope direction at "
    "most 2(k-1)min(n+, n-) + 1 times, which for odd n gives at most (k-1)(n-1)+2 monotone "
    "runs, fewer than n(k-1)+1 when k > 2 (docs/notes/regions.md; a pencil-and-paper argument that "
    "exactmax does not check)"
)

KNOWN_MAXIMA = {
    (3, 3, 2): "the maximum of any Maxout network of this shape is 43 < 49 "
    "(docs/notes/regions.md, a finer count)",
    (3, 3, 3): "the maximum is at most 43 * 7 = 301 < 343 (docs/notes/regions.md)",
}
"""What docs/notes/regions.md knows about the maximum, by (n, k, L), for q = 1."""


ENLARGED_UP_TO = 200
"""Networks designed for at most this many regions are also counted on [-1, 2]^q."""


@dataclass(frozen=True, slots=True)
class Theorem44Options:
    count: bool = True  # count the built networks' regions
    transformer: bool = True  # also compile and count the Transformer
    max_regions: int = 5000  # skip counting beyond this many expected regions
    say: object = field(default=None, compare=False)  # progress lines, or None


def count_of(model, domain, say=None, what: str = "") -> dict:
    """{"activation_regions", "linear_regions", "time_s"} of part A's exact enumeration."""
    from .enumerate import count_regions

    t = time.monotonic()
    if say is not None:
        say(f"counting the regions of {what}")
    r = count_regions(
        model,
        domain,
        progress=None
        if say is None
        else (lambda cells: say(f"{what}: {cells} cells, {time.monotonic() - t:.0f} s")),
    )
    return {
        "activation_regions": r.activation_regions,
        "linear_regions": r.linear_regions,
        "time_s": round(time.monotonic() - t, 3),
    }


def evaluate_theorem44(
    m: int, T: int, q: int, D: int, options: Theorem44Options = Theorem44Options()
) -> dict:
    """The whole report as a JSON-able dict (see the README draft for the keys)."""
    n, k, L = m * T, T, D // 3
    B = evaluate_bound(m, T, q, D)
    out = {
        "m": m,
        "T": T,
        "q": q,
        "D": D,
        "reading": {
            "input_dim": q,
            "maxout_layers": L,
            "width": n,
            "rank": k,
            "tokens": T,
            "sublayers_used": 3 * L,
        },
        "bound": _num(B),
        "bound_parts": {
            "base": _num(Q(n, q) * (k - 1) + 1),
            "exponent": q * (L - 1),
            "S": binomial_sum(n, q, k),
        },
        "hypotheses": {"D_at_least_3": D >= 3, "q_divides_mT": n % q == 0},
        "corrected_bound": None,
        "split": None,
        "networks": [],
        "count": None,
        "reached": None,
        "corrected_reached": None,
        "status": None,
        "why": None,
    }
    corr = evaluate_corrected(n, q, k, L)
    if corr is not None:
        out["corrected_bound"], out["split"] = corr[0], list(corr[1])
    if D < 3:
        out["status"] = "outside hypotheses"
        out["why"] = (
            "D < 3: floor(D/3) = 0 Maxout layers, the exponent q(floor(D/3)-1) is "
            "negative and the formula is meaningless; no network built"
        )
        return out
    unreachable = q == 1 and n % 2 == 1 and k >= 3 and L >= 2
    notes = []
    if n % q:
        notes.append(
            f"q = {q} does not divide mT = {n}: the base (mT/q)(T-1)+1 is "
            "fractional and the formula is outside its hypotheses (the classical "
            "statements assume n0 | n)"
        )
    if unreachable:
        notes.append(
            "the formula cannot be reached by any Maxout network of this shape "
            "(q = 1, mT odd, T >= 3, floor(D/3) >= 2): " + UNREACHABLE_WHY
        )
        if (n, k, L) in KNOWN_MAXIMA:
            notes.append(KNOWN_MAXIMA[(n, k, L)])
    builds: list[FoldNetwork] = []
    why_not = None
    try:
        builds.append(build_fold_network(q, n, k, L))
    except ValueError as e:
        why_not = str(e)
    if (q, n, k, L) == (1, 3, 3, 2):
        builds.append(build_zigzag_43())
    for f in builds:
        rec = {
            "construction": f.construction,
            "widths": [l.width for l in f.net.layers],
            "ranks": [l.rank for l in f.net.layers],
            "split": list(f.split),
            "fold_pieces": list(f.pieces),
            "designed_count": f.expected,
            "domain": f"[0, 1]^{q}",
            "maxout": None,
            "transformer": None,
        }
        if options.count and f.expected <= options.max_regions:
            rec["maxout"] = count_of(f.net, f.domain, options.say, "the Maxout network")
            if f.expected <= ENLARGED_UP_TO:
                # evidence that [0, 1]^q holds every region of R^q (the argument of
                # docs/notes/regions.md): the same count on the box three times as wide
                big = Box(tuple(Q(-1) for _ in range(q)), tuple(Q(2) for _ in range(q)))
                rec["maxout_enlarged"] = dict(
                    count_of(f.net, big, options.say, "the network on the larger domain"),
                    domain=f"[-1, 2]^{q}",
                )
                if rec["maxout_enlarged"]["linear_regions"] != rec["maxout"]["linear_regions"]:
                    notes.append(
                        f"{f.construction}: {rec['maxout_enlarged']['linear_regions']}"
                        f" linear regions on [-1, 2]^{q}, "
                        f"{rec['maxout']['linear_regions']} on [0, 1]^{q}: the unit "
                        "box does not hold every region"
                    )
            if options.transformer:
                from ..construct.transformer import compile_transformer

                tf = compile_transformer(f.net, f.domain).transformer
                rec["transformer"] = count_of(tf, f.domain, options.say, "the compiled Transformer")
                rec["transformer"].update(tokens=tf.n_tokens, sublayers=len(tf.sublayers))
        elif options.count:
            rec["skipped"] = (
                f"designed for {f.expected} regions, more than --max-regions {options.max_regions}"
            )
        out["networks"].append(rec)
    # a network's count is its Maxout count, and its Transformer's when that was counted too
    # (the two must agree; a disagreement is reported and the smaller one is used)
    counts = []
    for r in out["networks"]:
        if r["maxout"]:
            c = r["maxout"]["linear_regions"]
            if r["transformer"] and r["transformer"]["linear_regions"] != c:
                notes.append(
                    f"{r['construction']}: the Transformer has "
                    f"{r['transformer']['linear_regions']} linear regions, the Maxout "
                    f"network {c} (they should agree)"
                )
                c = min(c, r["transformer"]["linear_regions"])
            counts.append(c)
    if counts:
        out["count"] = max(counts)
        out["reached"] = out["count"] >= B
        if out["corrected_bound"] is not None:
            out["corrected_reached"] = out["count"] >= out["corrected_bound"]
    if not builds:
        notes.append(f"no network built: {why_not}")
    if n % q == 0 and (n // q) % 2 and k >= 3 and L >= 2 and builds and not unreachable:
        f = builds[0]
        notes.append(
            f"mT/q = {n // q} is odd and T = {k} >= 3: a fold of p units gives "
            f"P(p, T) = (p-1)(T-1)+2 pieces for odd p, not p(T-1)+1; the best "
            f"split {list(f.split)} gives {' * '.join(map(str, f.pieces))} pieces "
            f"per fold layer, below ((mT/q)(T-1)+1)^q = "
            f"{(n // q * (k - 1) + 1) ** q}, so the fold network is designed for "
            f"the corrected bound {out['corrected_bound']}, not B. Whether any "
            "network of this shape reaches B is not decided here (docs/notes/regions.md "
            "proves it impossible for q = 1 only)"
        )
    if out["reached"]:
        out["status"] = "reached"
    elif unreachable:
        out["status"] = "formula unreachable"
    elif n % q:
        out["status"] = "outside hypotheses"
    elif out["count"] is None:
        out["status"] = "not counted"
    else:
        out["status"] = "not reached"
    out["why"] = "; ".join(notes) or None
    return out


# ---------------------------------------------------------------------------------- command

DESCRIPTION = """\
Theorem 4.4 on one instance. Evaluates exactly
B = [(mT/q)(T-1)+1]^(q(floor(D/3)-1)) * sum_{j=0..q} C(mT,j)(T-1)^j, read as the classical deep
Maxout bound with input dimension q, floor(D/3) Maxout layers (3 sub-layers each) of width mT
and rank T (= tokens); prints the corrected bound of docs/notes/regions.md (best split
n = p_1+...+p_q of prod P(p_i,T)^(L-1) S(mT,q,T), always reached); builds the fold network of
that architecture (docs/notes/regions.md's last layer for q = 1, 2; a generic one in checked
general position for q >= 3), compiles its Transformer, counts the linear regions of both
exactly on [0,1]^q (kernel-checked region certificates; by docs/notes/regions.md's argument
[0,1]^q holds every region of R^q; networks designed for at most 200 regions are recounted on
[-1,2]^q) and says whether B is reached. Exit 0 when the count reaches B, 3 otherwise (not
reached, unreachable, outside the hypotheses, or not counted), 2 on bad input."""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "theorem44",
        help="Theorem 4.4's region bound on one instance, with a built network counted exactly",
        description=DESCRIPTION,
    )
    p.add_argument("--m", type=int, required=True, metavar="M", help="the symbol m (>= 1)")
    p.add_argument(
        "--T",
        type=int,
        required=True,
        metavar="T",
        help="tokens T = rank of the Maxout layers (>= 2)",
    )
    p.add_argument("--q", type=int, required=True, metavar="Q", help="input dimension q (>= 1)")
    p.add_argument(
        "--D",
        type=int,
        required=True,
        metavar="D",
        help="depth in sub-layers (floor(D/3) Maxout layers)",
    )
    p.add_argument("--no-count", action="store_true", help="evaluate the bounds only")
    p.add_argument(
        "--no-transformer",
        action="store_true",
        help="count the Maxout network only (skip its compiled Transformer)",
    )
    p.add_argument(
        "--max-regions",
        type=int,
        default=5000,
        metavar="N",
        help="do not count networks designed for more than N regions (default 5000)",
    )
    p.add_argument("--write", metavar="NET.json", help="write the built (best) Maxout network here")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def run(args) -> int:
    for name, v, lo in (
        ("--m", args.m, 1),
        ("--T", args.T, 2),
        ("--q", args.q, 1),
        ("--D", args.D, 0),
        ("--max-regions", args.max_regions, 1),
    ):
        if v < lo:
            raise UsageError(f"{name}: expected an integer >= {lo}, got {v}")
    if args.m * args.T > 64 or args.q > 8 or args.D > 60:
        raise UsageError(
            f"--m {args.m} --T {args.T} --q {args.q} --D {args.D}: beyond the "
            "sizes exactmax evaluates (mT <= 64, q <= 8, D <= 60)"
        )
    from ..progress import shown

    opts = Theorem44Options(
        count=not args.no_count,
        transformer=not args.no_transformer,
        max_regions=args.max_regions,
        say=(lambda m: print(f"theorem44: {m}", file=sys.stderr, flush=True))
        if shown(args)
        else None,
    )
    rep = evaluate_theorem44(args.m, args.T, args.q, args.D, opts)
    if args.write:
        from ..io import model_to_json, write_json_atomic

        n, L = args.m * args.T, args.D // 3
        if args.D < 3:
            raise UsageError("--write: D < 3, no network is built")
        if (args.q, n, args.T, L) == (1, 3, 3, 2):
            f = build_zigzag_43()
        else:
            try:
                f = build_fold_network(args.q, n, args.T, L)
            except ValueError as e:
                raise UsageError(f"--write: no network built: {e}") from None
        write_json_atomic(args.write, model_to_json(f.net))
        rep["written"] = args.write
    code = 0 if rep["reached"] else 3
    if args.json:
        verdict = "reached" if rep["reached"] else "not-reached"
        print(jsonout.dumps({"verdict": verdict, "reason": rep.get("why"), **rep}))
        return code
    r = rep["reading"]
    print(
        f"reading: q = {args.q} is the input dimension, T = {args.T} tokens = the rank, "
        f"mT = {r['width']} the width of each Maxout layer, floor(D/3) = "
        f"{r['maxout_layers']} Maxout layers (3 sub-layers each, {r['sublayers_used']} of "
        f"D = {args.D} used)"
    )
    bp = rep["bound_parts"]
    print(
        f"B = [(mT/q)(T-1)+1]^(q(floor(D/3)-1)) * sum_j C(mT,j)(T-1)^j = "
        f"({bp['base']})^{bp['exponent']} * {bp['S']} = {rep['bound']}"
    )
    if rep["corrected_bound"] is not None:
        split = f", best split {rep['split']}" if rep["split"] else ""
        state = {True: "reached", False: "NOT reached", None: "not counted"}[
            rep["corrected_reached"]
        ]
        print(f"corrected bound (docs/notes/regions.md{split}): {rep['corrected_bound']} ({state})")
    for net in rep["networks"]:
        line = (
            f"built: {net['construction']}, widths {net['widths']}, ranks {net['ranks']}, "
            f"designed for {net['designed_count']} regions"
        )
        print(line)
        for kind in ("maxout", "transformer"):
            c = net[kind]
            if c:
                extra = (
                    f", {c['tokens']} tokens, {c['sublayers']} sub-layers"
                    if kind == "transformer"
                    else ""
                )
                print(
                    f"  {kind}{extra}: {c['linear_regions']} linear regions, "
                    f"{c['activation_regions']} activation regions on {net['domain']} "
                    f"(kernel-checked, {c['time_s']:.2f} s)"
                )
        e = net.get("maxout_enlarged")
        if e:
            same = net["maxout"] and e["linear_regions"] == net["maxout"]["linear_regions"]
            print(
                f"  maxout on {e['domain']}: {e['linear_regions']} linear regions "
                f"({'the same: evidence' if same else 'DIFFERENT: evidence against'} that "
                f"the unit box holds every region; {e['time_s']:.2f} s)"
            )
        if net.get("skipped"):
            print(f"  not counted: {net['skipped']}")
    verdict = {
        "reached": f"REACHED: count {rep['count']} >= B = {rep['bound']}",
        "not reached": f"NOT REACHED: count {rep['count']} < B = {rep['bound']}",
        "formula unreachable": f"NOT REACHED: best count {rep['count']} < B = "
        f"{rep['bound']}; the formula cannot be reached here",
        "outside hypotheses": "OUTSIDE THE HYPOTHESES"
        + (f": count {rep['count']} < B = {rep['bound']}" if rep["count"] is not None else ""),
        "not counted": "NOT COUNTED: no count to compare with B",
    }[rep["status"]]
    print(verdict)
    if rep["why"]:
        print(f"  why: {rep['why']}")
    return code
