"""Quality of the counterexample search, next to verify's time to refute, in one run.

    python benchmarks/search.py [--runs 5] [--cap 60] [--json results.json]

Pairs: the planted differences of tests/quality/planted.py (a thin slab, a slab around a
layer-2 tie, a slab at a facet, one box vertex, one polyhedron vertex, a tie set only) and the
mutation catalogue of tests/mutants.py applied to the compiled Transformers of
examples/tent.json and examples/maxout_d3_w4_r3.json.  For each pair:

- search: ``find_counterexample`` with the CLI's defaults (``--max-examples 1000``), seeds
  0..runs-1: how many runs found a point (each confirmed by the kernel), the median time and
  the median number of points tried before the first difference (the explicit phase is
  deterministic: seeds change only the random phase);
- random only: the same budget with ``targeted=False`` (no vertices, no tie points, no
  snapping or targets), the ablation that shows what the targeted phases buy;
- verify: ``verify_equal`` (certificate search, then z3; no search), the median of ``runs``
  runs of its time to "refuted", or its verdict;
- z3 alone: ``find_difference`` on the two programs (the query verify ends with), median time
  to a model the kernel confirms, or z3's answer.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "quality")]

from exactmax.construct.transformer import compile_transformer   # noqa: E402
from exactmax.io import load_model                                # noqa: E402
from exactmax.kernel.program import Unsupported                   # noqa: E402
from exactmax.engine.smt import find_difference                    # noqa: E402
from exactmax.prove.verify import VerifyOptions, program_of, refute, verify_equal  # noqa: E402
from exactmax.search import SearchOptions, find_counterexample    # noqa: E402
from mutants import BROKEN                                        # noqa: E402
from planted import PLANTED                                       # noqa: E402


def pairs():
    for name, make in PLANTED.items():
        yield name, make
    for example in ("tent.json", "maxout_d3_w4_r3.json"):
        net = load_model(os.path.join(ROOT, "examples", example))
        c = compile_transformer(net)
        for m in BROKEN:
            yield f"{example}: {m.__name__}", (lambda net=net, c=c, m=m: (net, m(net, c),
                                                                         net.domain))


def search_runs(a, b, dom, runs, targeted):
    found, times, tried = 0, [], []
    for seed in range(runs):
        t0 = time.perf_counter()
        r = find_counterexample(a, b, dom, SearchOptions(seed=seed, targeted=targeted))
        times.append(time.perf_counter() - t0)
        if r.found:
            assert r.outputs[0] != r.outputs[1] and dom.contains(r.x)
            found += 1
            tried.append(r.tried)
    return {"found": found, "runs": runs, "median_s": statistics.median(times),
            "median_tried": statistics.median(tried) if tried else None}


def verify_runs(a, b, dom, runs, cap):
    times, verdict = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        v = verify_equal(a, b, dom, VerifyOptions(timeout_s=cap))
        times.append(time.perf_counter() - t0)
        verdict = {"proved": "proved equal", "refuted": "refuted"}.get(v.verdict) or \
            ("unknown (bilinear scores)" if "bilinear" in (v.reason or "") else
             f"unknown ({(v.reason or '')[:40]})")
        if v.verdict != "refuted":
            break
    return {"verdict": verdict, "median_s": statistics.median(times)}


def z3_runs(a, b, dom, runs, cap):
    try:
        pa, pb = program_of(a), program_of(b)
    except Unsupported:
        return {"verdict": "cannot encode (bilinear scores)", "median_s": 0.0}
    P = dom.as_polyhedron()
    times, verdict = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        status, x = find_difference(pa, pb, P, cap)
        confirmed = status == "sat" and refute(a, b, dom, x) is not None
        times.append(time.perf_counter() - t0)
        verdict = "refuted" if confirmed else {"unsat": "unsat (equal)", "sat": "sat, not "
                                               "confirmed"}.get(status, f"unknown ({x})")
        if not confirmed:
            break
    return {"verdict": verdict, "median_s": statistics.median(times)}


def timed(v):
    return f"{v['median_s']:.2f} s" if v["verdict"] == "refuted" else \
        f"{v['verdict']}, {v['median_s']:.2f} s"


def cell(s):
    t = f"{s['found']}/{s['runs']}, {s['median_s']:.2f} s"
    return t + (f", {s['median_tried']:g} tried" if s["median_tried"] is not None else "")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cap", type=float, default=60.0)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    rows = []
    print("| pair | search: found, median time, median tried | random points only | verify "
          "without search (certificates, then z3) | z3 alone |")
    print("|---|---|---|---|---|")
    for name, make in pairs():
        a, b, dom = make()
        s = search_runs(a, b, dom, args.runs, True)
        r = search_runs(a, b, dom, args.runs, False)
        v = verify_runs(a, b, dom, min(args.runs, 3), args.cap)
        z = z3_runs(a, b, dom, min(args.runs, 3), args.cap)
        print(f"| {name} | {cell(s)} | {cell(r)} | {timed(v)} | {timed(z)} |", flush=True)
        rows.append({"pair": name, "search": s, "random_only": r, "verify": v, "z3": z})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
