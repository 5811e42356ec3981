"""Equivalence of two Maxout networks that are equal but not layer-aligned (issue #21's suite):
the float LP (HiGHS) guiding the exact Farkas search against z3 alone, side by side in one run.

    python benchmarks/equiv.py [--cap 60] [--quick] [--json results.json]

A is a random Maxout network (d = 4, box [-1, 1]^4, ranks 2..k, a one-output map); B = A with
every unit rescaled by a positive rational (the next layer divides it back), units and pieces
permuted, and the first unit of layer 1 split as max(a, b, ...) = a + max(0, b - a, ...) into
two units (so B is one unit wider there and the layerwise strategy does not apply).  Each pair
is checked equal at random points first; then ``verify_equal`` runs with the float LP on and
off (``floatlp.available`` patched), each with the time cap, and every "proved" is
kernel-checked.  The "moved" column runs the same with one bias of B moved by 1/1000 (a
refutation, confirmed by the kernel's evaluation).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

from exactmax.kernel.affine import Affine
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit, evaluate_maxout
from exactmax.kernel.polyhedron import Box
from exactmax.kernel.rational import Q
from exactmax.prove import floatlp
from exactmax.prove.verify import VerifyOptions, verify_equal

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


def run(a, b, cap: float, float_lp: bool) -> dict:
    saved = floatlp.available
    floatlp.available = (lambda: True) if float_lp else (lambda: False)
    try:
        t0 = time.perf_counter()
        v = verify_equal(a, b, Box((Q(-1),) * D_IN, (Q(1),) * D_IN),
                         VerifyOptions(timeout_s=cap, strategy="monolithic",
                                       max_leaves=10 ** 6))
        t = time.perf_counter() - t0
    finally:
        floatlp.available = saved
    return {"verdict": v.verdict, "trust": v.trust, "time_s": round(t, 2),
            "leaves": v.stats.get("leaves_checked"),
            "float_lp_calls": v.stats.get("float_lp_calls"), "lp_calls": v.stats.get("lp_calls")}


def cell(r, want: str) -> str:
    if r["verdict"] != want:
        return f"{r['verdict']}" + (" (cap)" if r["verdict"] == "unknown" else " WRONG")
    return f"{r['time_s']:.2f} s" + (f" ({r['leaves']} cells)" if r["leaves"] else "")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cap", type=float, default=60.0)
    ap.add_argument("--quick", action="store_true", help="the smallest configurations only")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    configs = [(w, dep, k) for dep in (1, 2, 4, 8) for w in (2, 4, 8, 16) for k in (2, 3, 4)]
    if args.quick:
        configs = [(w, dep, k) for (w, dep, k) in configs if w * dep <= 16 and k == 3]
    rng = random.Random(args.seed)
    rows = []
    print(f"{'width':>5} {'depth':>5} {'rank':>4} | {'equal: float LP + exact':>26} "
          f"{'equal: z3 only':>26} | {'moved: float LP':>16} {'moved: z3 only':>16}")
    for w, dep, k in configs:
        a = network(rng, w, dep, k)
        b = twin(rng, a)
        for _ in range(20):
            x = tuple(Q(rng.randint(-10, 10), 10) for _ in range(D_IN))
            assert evaluate_maxout(a, x) == evaluate_maxout(b, x), "the twin is not equal"
        r = {"width": w, "depth": dep, "rank": k,
             "equal_float": run(a, b, args.cap, True), "equal_z3": run(a, b, args.cap, False),
             "moved_float": run(a, moved(b), args.cap, True),
             "moved_z3": run(a, moved(b), args.cap, False)}
        rows.append(r)
        print(f"{w:>5} {dep:>5} {k:>4} | {cell(r['equal_float'], 'proved'):>26} "
              f"{cell(r['equal_z3'], 'proved'):>26} | {cell(r['moved_float'], 'refuted'):>16} "
              f"{cell(r['moved_z3'], 'refuted'):>16}", flush=True)
    both = [r for r in rows if r["equal_float"]["verdict"] == r["equal_z3"]["verdict"] == "proved"]
    if both:
        tf = sum(r["equal_float"]["time_s"] for r in both)
        tz = sum(r["equal_z3"]["time_s"] for r in both)
        print(f"\nequal pairs proved by both: {len(both)}; total {tf:.1f} s with the float LP, "
              f"{tz:.1f} s with z3 alone ({tz / max(tf, 1e-9):.1f}x)")
    for key in ("equal_float", "equal_z3"):
        n = sum(r[key]["verdict"] == "proved" for r in rows)
        print(f"{key}: {n} of {len(rows)} proved within {args.cap:.0f} s")
    wrong = [r for r in rows for key, want in (("equal_float", "proved"), ("equal_z3", "proved"),
                                                ("moved_float", "refuted"), ("moved_z3", "refuted"))
             if r[key]["verdict"] not in (want, "unknown")]
    print(f"wrong answers: {len(wrong)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
