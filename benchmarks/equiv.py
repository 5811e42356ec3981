"""Equivalence of two Maxout networks that are equal but not layer-aligned (issue #21's suite):
exactmax against Marabou 2.0, side by side in one run, 96 queries.

    python benchmarks/equiv.py [--cap 60] [--quick] [--no-skip] [--no-marabou]
                               [--route auto|equivalence|no-correspondence]
                               [--json results.json]

A is a random Maxout network (d = 4, box [-1, 1]^4, ranks 2..k, a one-output map); B = A with
every unit rescaled by a positive rational (the next layer divides it back), units and pieces
permuted, and the first unit of layer 1 split as max(a, b, ...) = a + max(0, b - a, ...) into
two units (so B is one unit wider there and the layerwise strategy does not apply).  Each pair
is checked equal at random points first (the "equal" query); the "moved" query is the same
pair with the bias of B's output map moved by 1/1000 (A - B' = -1/1000 everywhere).  48
configurations: depth 1, 2, 4, 8 x width 2, 4, 8, 16 x rank 2, 3, 4 (one seeded generator).

exactmax: what ``exactmax equiv A B`` does, in this process: with route auto and different
widths or one layer each, a layer correspondence first (``prove/correspondence.py``, checked by the kernel on
all of Q^d), then the short counterexample search (``SHORT_SEARCH``), then ``verify_equal``
with ``--route`` as ``certificate_kind`` ("auto": the layerwise certificate where it applies,
else a layer correspondence, else the pair-property route; "equivalence": the
split tree for A - B = 0 of exactmax/engine/certify.py); "proved" only after the kernel
accepted the certificate (``trust`` kernel-checked), "refuted" only at a point the kernel
evaluated.  Time: wall time of the two steps.

Marabou 2.0 (``maraboupy``, ``benchmarks/marabou.py``'s encoding: one query per pair, shared
inputs in [-1, 1]^4, every weight rounded to a double, |y_A - y_B| >= eps as one disjunction,
eps = 1e-6), its best route: ``--prove-unsat`` (proof production, no DeepSoI local search)
with relu-violation branching, in a fresh child process killed at cap + 10 s.  unsat on an
equal pair is right; a sat point is re-evaluated exactly by the kernel ("real" if A != B
there).  Time: Marabou's own time for building and solving the query.

Unless --no-skip: once a tool misses the cap at some depth, the deeper configurations of the
same width and rank are not run for that tool and query kind ("skip", undecided).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from exactmax.kernel.affine import Affine
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit, evaluate_maxout
from exactmax.kernel.polyhedron import Box
from exactmax.kernel.rational import Q
from exactmax.prove.command import SHORT_SEARCH
from exactmax.prove.verify import (Verdict, VerifyOptions, correspondence_first,
                                   refute_by_search, verify_by_correspondence, verify_equal)
from exactmax.search import SearchOptions

D_IN = 4


def _num(rng):
    return Q(rng.randint(-9, 9), rng.randint(1, 4))


def network(rng, width: int, depth: int, rank: int) -> MaxoutNetwork:
    layers, prev = [], D_IN
    for _ in range(depth):
        layers.append(Layer(tuple(
            Unit(tuple(Piece(tuple(_num(rng) for _ in range(prev)), _num(rng))
                       for _ in range(rng.randint(2, rank))))
            for _ in range(width))))
        prev = width
    return MaxoutNetwork(D_IN, tuple(layers),
                         Affine((tuple(_num(rng) for _ in range(prev)),), (_num(rng),), prev))


def twin(rng, net: MaxoutNetwork) -> MaxoutNetwork:
    """A network equal to ``net`` everywhere, rescaled, permuted and with one unit split."""
    scale = [[Q(rng.randint(1, 3), rng.randint(1, 3)) for _ in l.units] for l in net.layers]
    perm = [rng.sample(range(l.width), l.width) for l in net.layers]
    layers = []
    for l, layer in enumerate(net.layers):
        before = scale[l - 1] if l else [Q(1)] * D_IN
        order = perm[l - 1] if l else list(range(D_IN))
        units = []
        for i in perm[l]:
            c = scale[l][i]
            pieces = [Piece(tuple(p.w[j] / before[j] * c for j in order), p.b * c)
                      for p in layer.units[i].pieces]
            rng.shuffle(pieces)
            units.append(pieces)
        layers.append(units)
    W = (tuple(net.output.W[0][j] / scale[-1][j] for j in perm[-1]),)
    if len(layers) >= 2:   # max(a, b, ...) = a + max(0, b - a, ...): one unit becomes two
        a, rest = layers[0][0][0], layers[0][0][1:]
        zero = Piece((Q(0),) * D_IN, Q(0))
        layers[0] = [[a], [zero] + [Piece(tuple(x - y for x, y in zip(p.w, a.w)), p.b - a.b)
                                    for p in rest]] + layers[0][1:]
        layers[1] = [[Piece((p.w[0],) + p.w, p.b) for p in u] for u in layers[1]]
    width = len(layers[-1])
    return MaxoutNetwork(D_IN, tuple(Layer(tuple(Unit(tuple(u)) for u in l)) for l in layers),
                         Affine(W, net.output.b, width))


def moved(net: MaxoutNetwork) -> MaxoutNetwork:
    """``net`` with the bias of its output map moved by 1/1000: different everywhere."""
    out = net.output
    return MaxoutNetwork(net.input_dim, net.layers,
                         Affine(out.W, (out.b[0] + Q(1, 1000),), out.in_dim))


def run_exactmax(a, b, cap: float, route: str) -> dict:
    """``exactmax equiv A B`` in this process: a layer correspondence first where
    ``correspondence_first`` says so, the short search, then ``verify_equal``."""
    box = Box((Q(-1),) * D_IN, (Q(1),) * D_IN)
    t0 = time.perf_counter()
    v = None
    kind = "auto" if route == "no-correspondence" else route
    if correspondence_first(a, b, route):   # as equiv: before the search
        v = verify_by_correspondence(a, b)
    if v is None:
        v, _ = refute_by_search(a, b, box, SearchOptions(**SHORT_SEARCH))
    if v is not None and v.verdict == "proved":
        pass
    elif v is not None:
        v = Verdict("refuted", x=v.x, outputs=v.outputs, stats={"strategy": "search"})
    else:
        left = max(cap - (time.perf_counter() - t0), 0.1)
        v = verify_equal(a, b, box, VerifyOptions(
            timeout_s=left, max_leaves=10 ** 6, certificate_kind=kind,
            correspondence=route != "no-correspondence"))
    t = time.perf_counter() - t0
    out = {"verdict": v.verdict, "trust": v.trust, "time_s": round(t, 3),
           "strategy": v.stats.get("strategy"), "leaves": v.stats.get("leaves_checked"),
           "certificate_kind": v.stats.get("certificate_kind", "equivalence")
           if v.trust == "kernel-checked" else None, "reason": v.reason}
    if v.verdict == "refuted":   # the kernel's evaluation, once more, here
        (ya,), (yb,) = evaluate_maxout(a, v.x), evaluate_maxout(b, v.x)
        out["exact_diff"] = str(ya - yb)
        out["confirmed"] = ya != yb
    return out


def run_marabou(a, b, cap: float) -> dict:
    import marabou
    m = marabou.run_marabou(MARABOU_CONFIG, marabou.as_floats(a), marabou.as_floats(b), D_IN,
                            EPS, cap)
    if m["answer"] == "sat":
        m["check"] = marabou.check_point(a, b, m["x"], EPS)
    return m


MARABOU_CONFIG = "prove-unsat+relu-violation"
EPS = 1e-6


def ex_status(r, want: str) -> str:
    """right / WRONG / unchecked / undecided, for the table and the totals."""
    if r is None or r["verdict"] == "unknown":
        return "undecided"
    if r["verdict"] != want:
        return "WRONG"
    if want == "proved" and r["trust"] != "kernel-checked":
        return "unchecked"
    if want == "refuted" and not r.get("confirmed"):
        return "unchecked"
    return "right"


def ma_status(m, want: str) -> str:
    if m is None or m["answer"] not in ("sat", "unsat"):
        return "undecided"
    if m["answer"] == "unsat":
        return "right" if want == "proved" else "WRONG"
    real = m["check"]["real"]
    if want == "refuted":
        return "right" if real else "unchecked"   # a sat answer whose point is spurious
    return "WRONG (spurious point: A = B there, exactly)" if not real else "WRONG (A != B?)"


def ex_cell(r, want):
    if r is None:
        return "skip"
    st = ex_status(r, want)
    if st == "undecided":
        return f"unknown ({r['time_s']:.0f} s)"
    what = {"proved": "proved", "refuted": "refuted"}[r["verdict"]]
    extra = f", a correspondence of {r['leaves']} units" \
        if r.get("certificate_kind") == "correspondence" else \
        f", {r['leaves']} cells, {r['certificate_kind']}" if r.get("leaves") else \
        (", by the search" if r.get("strategy") == "search" else "")
    flag = "" if st == "right" else f" **{st}**"
    return f"{what} {r['time_s']:.2f} s{extra}{flag}"


def ma_cell(m, want):
    if m is None:
        return "skip"
    st = ma_status(m, want)
    if m["answer"] == "killed":
        return f"killed at {m['wall_s']:.0f} s"
    if st == "undecided":
        return f"{m['answer']} ({m['time_s']:.0f} s)"
    flag = "" if st == "right" else f" **{st}**"
    return f"{m['answer']} {m['time_s']:.2f} s{flag}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cap", type=float, default=60.0, help="seconds per query (default 60)")
    ap.add_argument("--quick", action="store_true", help="the smallest configurations only")
    ap.add_argument("--no-skip", action="store_true",
                    help="run every configuration, also past a tool's first timeout")
    ap.add_argument("--no-marabou", action="store_true")
    ap.add_argument("--route", choices=("auto", "equivalence", "no-correspondence"),
                    default="auto",
                    help="exactmax's certificate kind (default auto: what equiv does; "
                    "no-correspondence: auto without layer correspondences, the routes "
                    "for pairs that are not related layer by layer)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    configs = [(w, dep, k) for dep in (1, 2, 4, 8) for w in (2, 4, 8, 16) for k in (2, 3, 4)]
    rng = random.Random(args.seed)
    rows, dead = [], {}
    print(f"cap {args.cap:g} s per query; exactmax route {args.route}; Marabou "
          f"{'off' if args.no_marabou else MARABOU_CONFIG + f', eps {EPS:g}'}\n")
    print("| width | depth | rank | query | exactmax | Marabou |")
    print("|---|---|---|---|---|---|")
    for w, dep, k in configs:
        a = network(rng, w, dep, k)
        b = twin(rng, a)
        for _ in range(20):
            x = tuple(Q(rng.randint(-10, 10), 10) for _ in range(D_IN))
            assert evaluate_maxout(a, x) == evaluate_maxout(b, x), "the twin is not equal"
        if args.quick and not (w * dep <= 16 and k == 3):
            continue
        for query, bb, want in (("equal", b, "proved"), ("moved", moved(b), "refuted")):
            ex = ma = None
            if args.no_skip or ("exactmax", query, w, k) not in dead:
                ex = run_exactmax(a, bb, args.cap, args.route)
                if ex["verdict"] == "unknown":
                    dead[("exactmax", query, w, k)] = dep
            if not args.no_marabou and (args.no_skip or ("marabou", query, w, k) not in dead):
                ma = run_marabou(a, bb, args.cap)
                if ma["answer"] not in ("sat", "unsat"):
                    dead[("marabou", query, w, k)] = dep
            rows.append({"width": w, "depth": dep, "rank": k, "query": query, "want": want,
                         "exactmax": ex, "marabou": ma,
                         "exactmax_status": ex_status(ex, want),
                         "marabou_status": None if args.no_marabou else ma_status(ma, want)})
            print(f"| {w} | {dep} | {k} | {query} | {ex_cell(ex, want)} | "
                  f"{'-' if args.no_marabou else ma_cell(ma, want)} |", flush=True)
    n = len(rows)
    count = lambda tool, st: sum(r[f"{tool}_status"] == st for r in rows)  # noqa: E731
    print()
    for tool in ("exactmax",) + (() if args.no_marabou else ("marabou",)):
        print(f"{tool}: {count(tool, 'right')} of {n} decided correctly, "
              f"{sum(r[f'{tool}_status'].startswith('WRONG') for r in rows)} wrong, "
              f"{count(tool, 'unchecked')} unchecked, {count(tool, 'undecided')} undecided")
    eq = [r for r in rows if r["query"] == "equal" and r["exactmax_status"] == "right"]
    print(f"exactmax: {len(eq)} equal pairs proved, every one kernel-checked")
    if not args.no_marabou:
        md = [r for r in rows if r["marabou"] and r["marabou"]["answer"] in ("sat", "unsat")]
        te = sum(r["exactmax"]["time_s"] if r["exactmax"] else args.cap for r in md)
        tm = sum(r["marabou"]["time_s"] for r in md)
        print(f"on the {len(md)} queries Marabou decides: exactmax {te:.1f} s, Marabou "
              f"{tm:.1f} s (exactmax / Marabou = {te / max(tm, 1e-9):.3f}; an exactmax "
              "unknown or skip counts as the cap)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cap_s": args.cap, "route": args.route, "marabou": MARABOU_CONFIG,
                       "eps": EPS, "seed": args.seed, "rows": rows}, f, indent=1)
    wrong = sum(r["exactmax_status"].startswith("WRONG") for r in rows)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
