"""Compile time, and exact evaluation of the compiled Transformer vs the Maxout network
(single inputs and batches of 256), side by side in one run.

    python benchmarks/compile.py [--rounds 3] [--json results.json]

Sizes and random networks as in ``benchmarks/eval.py``; the domain is the box [-1, 1]^d.
Goal of the construction issue: Transformer evaluation within 10x of Maxout evaluation.
Both are evaluated by ``exactmax.vectorized.batch_evaluator`` (fixed-width words for single
inputs and small batches, the vectorized evaluator for large batches).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time

from eval import BATCH, SIZES, random_network, timed
from exactmax.construct.size import size_report
from exactmax.construct.transformer import CompileOptions, compile_transformer
from exactmax.vectorized.scaled import MaxoutEvaluator
from exactmax.kernel.polyhedron import Box
from exactmax.kernel.rational import Q
from exactmax.vectorized import batch_evaluator


def bench(size, rounds, rng, options):
    d, N, k, D = size
    net = random_network(rng, d, N, k, D)
    box = Box((Q(-1),) * d, (Q(1),) * d)
    xs = [tuple(Q(rng.randint(-100, 100), 100) for _ in range(d)) for _ in range(BATCH)]
    t0 = time.perf_counter()
    c = compile_transformer(net, box, options)
    compile_s = time.perf_counter() - t0
    mx, tx = batch_evaluator(net), batch_evaluator(c.transformer)
    # the benchmark checks too: the Transformer equals the network, as the kernel evaluates it
    assert tx.evaluate_batch(xs) == MaxoutEvaluator(net).evaluate_batch(xs)
    assert [tx.evaluate(x) for x in xs[:4]] == mx.evaluate_batch(xs[:4])
    t = {m: [] for m in ("maxout_single", "transformer_single", "maxout_batch",
                         "transformer_batch")}
    for _ in range(rounds):
        t["maxout_single"].append(timed(lambda: [mx.evaluate(x) for x in xs[:4]]) / 4)
        t["transformer_single"].append(timed(lambda: [tx.evaluate(x) for x in xs[:4]]) / 4)
        t["maxout_batch"].append(timed(mx.evaluate_batch, xs) / BATCH)
        t["transformer_batch"].append(timed(tx.evaluate_batch, xs) / BATCH)
    per = {m: statistics.median(v) for m, v in t.items()}
    rep = size_report(net, c.transformer, options.merged)
    return {"size": {"d": d, "N": N, "k": k, "D": D}, "compile_s": compile_s,
            "seconds_per_input": per,
            "ratio_single": per["transformer_single"] / per["maxout_single"],
            "ratio_batch": per["transformer_batch"] / per["maxout_batch"],
            "maxout_params": rep["maxout_params"],
            "transformer_params": rep["transformer_params"],
            "transformer_nonzero": rep["transformer_nonzero"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--merged", action="store_true", help="benchmark the merged-FF variant")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    opts = CompileOptions(merged=args.merged)
    print("| (d, N, k, D) | compile s | Transformer / Maxout time, single | batch of 256 | "
          "Maxout params | Transformer params (non-zero) |")
    print("|---|---:|---:|---:|---:|---:|")
    results = []
    for size in SIZES:
        r = bench(size, args.rounds, rng, opts)
        results.append(r)
        print(f"| {tuple(size)} | {r['compile_s']:.2f} | {r['ratio_single']:.1f}x | "
              f"{r['ratio_batch']:.1f}x | {r['maxout_params']} | {r['transformer_params']} "
              f"({r['transformer_nonzero']}) |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
