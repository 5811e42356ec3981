"""Time to a kernel-checked proof that a Maxout network equals its compiled Transformer:
layerwise vs monolithic strategy, depths 1-16 and widths 2-32, side by side in one run.

    python benchmarks/verify.py [--cap 60] [--json results.json] [--quick]

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
from exactmax.construct.transformer import compile_transformer
from exactmax.kernel.polyhedron import Box
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cap", type=float, default=60.0, help="seconds per run (default 60)")
    ap.add_argument("--quick", action="store_true", help="widths 2-8 and depths 1-4 only")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
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
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
