"""Time to a kernel-checked proof that a Maxout network equals its compiled Transformer:
layerwise vs monolithic strategy, depths 1-16 and widths 2-32, side by side in one run.

    python benchmarks/verify.py [--cap 60] [--json results.json] [--quick | --shapes]

Random networks as in ``benchmarks/eval.py`` (input dimension 4, rank 3, box [-1, 1]^4), then
the issue's target (d = 16, 16 layers of 32 units, rank 4).  Each cell is one run of
``verify_equal`` with the given strategy and a time cap; "kernel-checked" means the kernel
accepted the certificate, and the time includes building and checking it.  Once the
monolithic strategy misses the cap at some depth, deeper networks of that width are skipped
(marked "skip").
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

from eval import random_network
from exactmax.construct.transformer import CompileOptions, compile_transformer
from exactmax.kernel.polyhedron import Box, Polyhedron
from exactmax.kernel.rational import Q
from exactmax.prove.verify import VerifyOptions, verify_equal


def run(net, box, strategy, cap):
    t0 = time.perf_counter()
    tf = compile_transformer(net, box).transformer
    v = verify_equal(net, tf, box, VerifyOptions(timeout_s=cap, strategy=strategy,
                                                 max_leaves=10 ** 6))
    t = time.perf_counter() - t0
    ok = v.verdict == "proved" and v.trust == "kernel-checked"
    return {"strategy": strategy, "verdict": v.verdict, "trust": v.trust,
            "time_s": round(t, 2), "kernel_checked": ok,
            "leaves": v.stats.get("leaves_checked"), "reason": v.reason}


def cell(r):
    if r is None:
        return "skip"
    if r["kernel_checked"]:
        return f"{r['time_s']:.1f} s ({r['leaves']} cells)"
    return f"> cap ({r['verdict']})" if r["verdict"] == "unknown" else r["verdict"]


def cut_box(rng, d, cuts) -> Polyhedron:
    """The box [-1, 1]^d cut by ``cuts`` random half-spaces a . x <= c, c > 0 (so the origin
    stays inside: non-empty and full-dimensional)."""
    A, b = [], []
    for i in range(d):
        A += [tuple(Q(1 if j == i else 0) for j in range(d)),
              tuple(Q(-1 if j == i else 0) for j in range(d))]
        b += [Q(1), Q(1)]
    for _ in range(cuts):
        A.append(tuple(Q(rng.randint(-4, 4), rng.randint(1, 4)) for _ in range(d)))
        b.append(Q(rng.randint(1, 8), 8))
    return Polyhedron(tuple(A), tuple(b), d)


SHAPES = [  # name, ranks, polyhedral domain, merged construction
    ("uniform rank 4, box", (4,), False, False),
    ("ranks 1-4, box", (1, 2, 3, 4), False, False),
    ("uniform rank 4, polyhedron", (4,), True, False),
    ("ranks 1-4, polyhedron", (1, 2, 3, 4), True, False),
    ("uniform rank 4, box, --merged", (4,), False, True),
    ("ranks 1-4, polyhedron, --merged", (1, 2, 3, 4), True, True),
]


def shape_run(name, ranks, poly, merged, d, N, D, cap, seed):
    rng = random.Random(seed)
    net = random_network(rng, d, N, ranks, D)
    dom = cut_box(rng, d, 4) if poly else Box((Q(-1),) * d, (Q(1),) * d)
    t0 = time.perf_counter()
    tf = compile_transformer(net, dom, CompileOptions(merged=merged)).transformer
    v = verify_equal(net, tf, dom, VerifyOptions(timeout_s=cap, max_leaves=10 ** 6))
    t = time.perf_counter() - t0
    ok = v.verdict == "proved" and v.trust == "kernel-checked"
    return {"shape": name, "d": d, "N": N, "D": D, "verdict": v.verdict, "trust": v.trust,
            "strategy": v.stats.get("strategy"), "time_s": round(t, 2), "kernel_checked": ok,
            "leaves": v.stats.get("leaves_checked"), "splits": v.stats.get("splits"),
            "ms_per_unit": round(1000 * t / (N * D), 2), "reason": v.reason}


def shapes(cap, depths=(4, 8, 16), d=16, N=32):
    """Every shape the construction compiles, d = 16 and 32 units per layer: time to a
    kernel-checked proof (compile, build, kernel check), strategy, cells, time per unit, and
    the time each added unit costs (flat means linear; a polyhedron's LPs are paid once, for
    the first layer)."""
    print(f"\nShapes (d = {d}, {N} units per layer; time includes compile and kernel check):\n")
    print("| shape | " + " | ".join(f"D = {D}" for D in depths) + " | per unit (ms), "
          "D = " + "/".join(str(D) for D in depths) + f" | per added unit (ms), D = "
          f"{depths[0]} to {depths[-1]} |")
    print("|---|" + "---:|" * (len(depths) + 2))
    results = []
    for name, ranks, poly, merged in SHAPES:
        row = [shape_run(name, ranks, poly, merged, d, N, D, cap, 1000 + D) for D in depths]
        results += row
        cells = [f"{r['time_s']:.1f} s ({r['leaves']} cells, {r['strategy']})"
                 if r["kernel_checked"] else f"{r['verdict']} ({r['reason']})" for r in row]
        per = "/".join(f"{r['ms_per_unit']:.1f}" for r in row)
        added = 1000 * (row[-1]["time_s"] - row[0]["time_s"]) / (N * (depths[-1] - depths[0]))
        print(f"| {name} | " + " | ".join(cells) + f" | {per} | {added:.1f} |", flush=True)
    return results


def issue_cases(cap):
    """The two networks of the issue that used to fall back to monolithic."""
    print("\nThe issue's cases:\n")
    out = []
    for name, d, N, D, ranks, poly in (("d = 8, 2 x 16, ranks 1-4, box", 8, 16, 2,
                                        (1, 2, 3, 4), False),
                                       ("d = 5, 3 x 10, rank 3, polyhedron", 5, 10, 3, (3,),
                                        True)):
        r = shape_run(name, ranks, poly, False, d, N, D, cap, 17)
        out.append(r)
        print(f"- {name}: {r['verdict']} ({r['strategy']}, {r['leaves']} cells, "
              f"{r['splits']} splits) in {r['time_s']:.2f} s", flush=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cap", type=float, default=60.0, help="seconds per run (default 60)")
    ap.add_argument("--quick", action="store_true", help="widths 2-8 and depths 1-4 only")
    ap.add_argument("--shapes", action="store_true",
                    help="only the shapes table, the issue's cases and the goal")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    if args.shapes:
        results = issue_cases(args.cap) + shapes(args.cap)
        goal(results)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
        return 0
    widths = [2, 4, 8] if args.quick else [2, 4, 8, 16, 32]
    depths = [1, 2, 4] if args.quick else [1, 2, 4, 8, 16]
    results = []
    print("| width N | depth D | layerwise | monolithic |")
    print("|---:|---:|---:|---:|")
    for N in widths:
        mono_dead = False
        for D in depths:
            rng = random.Random(1000 * N + D)
            net = random_network(rng, 4, N, 3, D)
            box = Box((Q(-1),) * 4, (Q(1),) * 4)
            lw = run(net, box, "layerwise", args.cap)
            mono = None if mono_dead else run(net, box, "monolithic", args.cap)
            if mono is not None and not mono["kernel_checked"]:
                mono_dead = True
            results.append({"d": 4, "N": N, "k": 3, "D": D, "layerwise": lw, "monolithic": mono})
            print(f"| {N} | {D} | {cell(lw)} | {cell(mono)} |", flush=True)
    rng = random.Random(16)
    net = random_network(rng, 16, 32, 4, 16)
    box = Box((Q(-1),) * 16, (Q(1),) * 16)
    lw = run(net, box, "layerwise", args.cap)
    results.append({"d": 16, "N": 32, "k": 4, "D": 16, "layerwise": lw, "monolithic": None})
    print(f"\ntarget d = 16, 16 layers x 32 units, rank 4: layerwise {cell(lw)}")
    if not args.quick:
        results += issue_cases(args.cap) + shapes(args.cap)
        goal(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


def goal(results):
    """The issue's goal: ranks 1-4 on a polyhedron at depth 16 under 10 s, and within 2x of
    the uniform-rank box case of the same run."""
    at = {r["shape"]: r for r in results if r.get("shape") and r["D"] == 16}
    a, b = at.get("ranks 1-4, polyhedron"), at.get("uniform rank 4, box")
    if a and b and a["kernel_checked"] and b["kernel_checked"]:
        print(f"\ngoal: d = 16, 16 x 32, ranks 1-4, polyhedron: {a['time_s']:.1f} s "
              f"(under 10 s: {'yes' if a['time_s'] < 10 else 'NO'}); uniform rank 4, box: "
              f"{b['time_s']:.1f} s; ratio {a['time_s'] / b['time_s']:.2f} "
              f"(within 2x: {'yes' if a['time_s'] <= 2 * b['time_s'] else 'NO'})")


if __name__ == "__main__":
    sys.exit(main())
