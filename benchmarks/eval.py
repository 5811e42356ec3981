"""Exact evaluation throughput of Maxout networks: exactmax vs Fraction vs gmpy2 mpq vs numpy
float64 (the speed-of-light reference), measured side by side in one run.

    python benchmarks/eval.py [--rounds 3] [--json results.json]

Sizes (d, N, k, D) = input dimension, width, rank, depth, as in the foundation issue.  Weights
are random rationals p/q with |p| <= 8, 1 <= q <= 16; inputs are random rationals in [-1, 1]
with denominators up to 100.  Each method is timed in interleaved rounds and the median is kept;
slow methods are timed on a sample of the batch (the naive loops cost the same per input).
Throughput is inputs per second; ratios are taken within one round set, on one machine.

"exactmax" is ``exactmax.vectorized.batch_evaluator``: the fixed-width evaluator (C extension,
integers in 64-bit limbs) for single inputs and small batches, the vectorized radix-2^21
evaluator for large ones; the kernel's FLINT evaluator (the trusted one) is shown too, on
single inputs and on the whole batch.  float64 is timed with BLAS on all cores and on one
core, and the faster of the two is the reference.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from fractions import Fraction

import gmpy2
import numpy as np
from threadpoolctl import threadpool_limits

from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from exactmax.vectorized.scaled import MaxoutEvaluator
from exactmax.kernel.rational import Q
from exactmax.vectorized import batch_evaluator

SIZES = [(4, 8, 3, 3), (16, 32, 4, 4), (64, 64, 4, 6)]
BATCH = 256


def random_network(rng, d, N, k, D) -> MaxoutNetwork:
    """Random weights as above; k is every unit's rank, or a tuple of ranks to draw each
    unit's from."""
    layers, width = [], d
    for _ in range(D):
        layers.append(Layer(tuple(
            Unit(tuple(Piece(tuple(Q(rng.randint(-8, 8), rng.randint(1, 16))
                                   for _ in range(width)),
                             Q(rng.randint(-8, 8), rng.randint(1, 16)))
                       for _ in range(k if isinstance(k, int) else rng.choice(k))))
            for _ in range(N))))
        width = N
    return MaxoutNetwork(d, tuple(layers))


def naive(net, make):
    """A plain loop evaluator over the scalar type ``make`` (Fraction or mpq)."""
    layers = [[[([make(int(w.p), int(w.q)) for w in p.w], make(int(p.b.p), int(p.b.q)))
                for p in u.pieces] for u in l.units] for l in net.layers]

    def run(x):
        h = [make(int(v.p), int(v.q)) for v in x]
        for layer in layers:
            h = [max(sum(w * v for w, v in zip(ws, h)) + b for ws, b in unit) for unit in layer]
        return h
    return run


def float64(net):
    """numpy: one (N*k x N_prev) matmul per layer, then a max over the pieces axis."""
    mats = []
    for l in net.layers:
        k = l.rank
        W = np.array([[float(w.p) / float(w.q) for w in p.w] for u in l.units for p in u.pieces])
        b = np.array([float(p.b.p) / float(p.b.q) for u in l.units for p in u.pieces])
        mats.append((W, b[:, None], len(l.units), k))

    def run(X):  # X: d x B
        H = X
        for W, b, N, k in mats:
            H = (W @ H + b).reshape(N, k, -1).max(axis=1)
        return H
    return run


def timed(fn, *args, min_time=0.2):
    """Seconds per call of fn(*args): repeat until min_time has passed, median of the runs."""
    runs, start = [], time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn(*args)
        runs.append(time.perf_counter() - t0)
        if time.perf_counter() - start > min_time:
            return statistics.median(runs)


def bench(size, rounds, rng):
    d, N, k, D = size
    net = random_network(rng, d, N, k, D)
    xs = [tuple(Q(rng.randint(-100, 100), 100) for _ in range(d)) for _ in range(BATCH)]
    ev, kernel = batch_evaluator(net), MaxoutEvaluator(net)
    frac, mpq = naive(net, Fraction), naive(net, gmpy2.mpq)
    flt = float64(net)
    X = np.array([[float(x[i].p) / float(x[i].q) for x in xs] for i in range(d)])
    sample = xs[: max(2, min(BATCH, 2000 // (N * N * k * D // 64 + 1)))]
    # exactness check of the benchmark itself: all exact methods agree
    ref = [[Fraction(int(v.p), int(v.q)) for v in y] for y in ev.evaluate_batch(sample)]
    assert ref == [list(y) for y in map(frac, sample)]
    assert ev.evaluate_batch(xs) == kernel.evaluate_batch(xs)
    assert ref == [[Fraction(int(v.numerator), int(v.denominator)) for v in y]
                   for y in map(mpq, sample)]
    assert [ev.evaluate(x) for x in xs[:8]] == kernel.evaluate_batch(xs[:8])
    t = {m: [] for m in ("exactmax_single", "kernel_single", "exactmax_batch", "kernel_batch",
                         "fraction", "mpq", "float64_single", "float64_batch")}
    for _ in range(rounds):
        t["exactmax_single"].append(timed(lambda: [ev.evaluate(x) for x in xs[:8]]) / 8)
        t["kernel_single"].append(timed(lambda: [kernel.evaluate(x) for x in xs[:8]]) / 8)
        t["exactmax_batch"].append(timed(ev.evaluate_batch, xs) / BATCH)
        t["kernel_batch"].append(timed(kernel.evaluate_batch, xs) / BATCH)
        t["fraction"].append(timed(lambda: [frac(x) for x in sample]) / len(sample))
        t["mpq"].append(timed(lambda: [mpq(x) for x in sample]) / len(sample))
        single = lambda: [flt(X[:, i:i + 1]) for i in range(8)]  # noqa: E731
        with threadpool_limits(1, "blas"):
            one = timed(single) / 8, timed(flt, X) / BATCH
        t["float64_single"].append(min(one[0], timed(single) / 8))
        t["float64_batch"].append(min(one[1], timed(flt, X) / BATCH))
    per = {m: statistics.median(v) for m, v in t.items()}
    bits = max(max(int(v.p).bit_length(), int(v.q).bit_length())
               for y in ev.evaluate_batch(xs[:4]) for v in y)
    return {"size": {"d": d, "N": N, "k": k, "D": D}, "seconds_per_input": per,
            "output_bits": bits,
            "speedup_vs_fraction_single": per["fraction"] / per["exactmax_single"],
            "speedup_vs_fraction_batch": per["fraction"] / per["exactmax_batch"],
            "kernel_speedup_vs_fraction_single": per["fraction"] / per["kernel_single"],
            "vectorized_vs_kernel_batch": per["kernel_batch"] / per["exactmax_batch"],
            "mpq_speedup_vs_fraction": per["fraction"] / per["mpq"],
            "slowdown_vs_float64_batch": per["exactmax_batch"] / per["float64_batch"],
            "slowdown_vs_float64_single": per["exactmax_single"] / per["float64_single"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    results = []
    print("| (d, N, k, D) | exactmax single input | exactmax batch inputs/s | "
          "kernel batch inputs/s | vs Fraction (single / batch) | kernel vs Fraction (single) | "
          "mpq vs Fraction | exactmax batch / float64 batch | "
          "exactmax single / float64 single | output bits |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in SIZES:
        r = bench(size, args.rounds, rng)
        results.append(r)
        p = r["seconds_per_input"]
        print(f"| {tuple(size)} | {p['exactmax_single'] * 1e6:,.1f} us | "
              f"{1 / p['exactmax_batch']:,.0f} | {1 / p['kernel_batch']:,.0f} | "
              f"{r['speedup_vs_fraction_single']:.0f}x / {r['speedup_vs_fraction_batch']:.0f}x | "
              f"{r['kernel_speedup_vs_fraction_single']:.0f}x | "
              f"{r['mpq_speedup_vs_fraction']:.1f}x | {r['slowdown_vs_float64_batch']:.0f}x | "
              f"{r['slowdown_vs_float64_single']:.0f}x | {r['output_bits']} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
