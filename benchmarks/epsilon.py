"""Epsilon-equivalence of a network and its pruned twin (#21): the smallest epsilon that
``exactmax equiv A B --epsilon E`` proves, found by bisection, with the time of every step.

    python benchmarks/epsilon.py [--acas | --random D DEPTH WIDTH [--radius R]] [--prune 0.05]
                                 [--seed 0] [--timeout S] [--max-leaves N] [--rel-tol 1e-3]
                                 [--steps 12] [--no-aim] [--float16]
                                 [--out results/epsilon.json]

Networks: ``--acas`` (default) is ACAS Xu 1-6 (5 inputs, 6 x 50 ReLU, 5 outputs; read by
exactmax's ONNX reader from ../shared/data/vnncomp2022-test/test_unsat.onnx) on the input box
of property 3 (the category's README); ``--random D DEPTH WIDTH`` a seeded ReLU network
(He-scaled weights rounded to multiples of 1/256, 5 outputs) on [-R, R]^D (``--radius R``,
default 1).  The twin has a
seeded ``--prune`` fraction of all weights (every layer's and the output map's, biases kept)
set to zero.

Procedure.  A lower bound first: the float-guided search of ``prove/tolerance.py`` and its
polish (``tolerance.ascend``: an evolution strategy on the float gap from 4 starts, then local
exact searches), the exact gap max_o |A_o(x) - B_o(x)| at the point found, evaluated by the
kernel's evaluator: every E below it is false.  Then each step runs ``exactmax equiv
--epsilon E --json`` in its own process: E = lo (1 + 0.9 ``--rel-tol``) first, the bracket
asked for at once (a refutation raises lo to the exact gap it reports and aims again;
``--no-aim``: E = lo first, as a plain bisection would); if that is not proved (or is
unknown), an upper bound is looked for at lo times ``--up`` (default 2), and bisection runs
until (hi - lo) / hi < ``--rel-tol``.  ``--float16``: the twin is the network rounded to
float16 instead of pruned.  The time of the lower bound counts in the total; the steps run
with ``--no-search`` (the lower bound was that search; a proof's own cell checks still
refute where E is below a gap).
Any other ``unknown`` stops the run and is reported as such.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
import benchdata  # noqa: E402
sys.path.insert(0, os.path.dirname(HERE))
DATA = benchdata.folder("vnncomp2022-test")

from exactmax.io.models import domain_to_json, model_to_json  # noqa: E402
from exactmax.io.numbers import (
    parse_rational,  # noqa: E402
    q_str,  # noqa: E402
)
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit  # noqa: E402
from exactmax.kernel.rational import ZERO, Q  # noqa: E402


def acas():
    from exactmax.io import load_model
    from exactmax.io.vnnlib2 import read_property
    benchdata.require("vnncomp2022-test", "test_unsat.onnx", "test_prop.vnnlib")
    net = load_model(os.path.join(DATA, "test_unsat.onnx"))
    return net, read_property(os.path.join(DATA, "test_prop.vnnlib")).boxes[0], \
        "ACAS Xu 1-6 on property 3's input box"


def random_relu(d: int, depth: int, width: int, seed: int, radius: Q, outs: int = 5):
    import numpy as np

    from exactmax.kernel.affine import Affine
    from exactmax.kernel.polyhedron import Box
    rng = np.random.default_rng(seed)
    q = lambda v: Q(round(float(v) * 256), 256)   # noqa: E731
    layers, prev = [], d
    for _ in range(depth):
        W = rng.normal(size=(width, prev)) * (2 / prev) ** 0.5
        b = rng.normal(size=width) * 0.1
        layers.append(Layer(tuple(Unit((Piece(tuple(q(v) for v in W[h]), q(b[h])),
                                        Piece((ZERO,) * prev, ZERO))) for h in range(width))))
        prev = width
    Wo = rng.normal(size=(outs, prev)) * (1 / prev) ** 0.5
    out = Affine(tuple(tuple(q(v) for v in r) for r in Wo), (ZERO,) * outs, prev)
    box = Box((-radius,) * d, (radius,) * d)
    return MaxoutNetwork(d, tuple(layers), out), box, \
        f"random ReLU d = {d}, {depth} x {width}, seed {seed}, on [-{radius}, {radius}]^{d}"


def pruned(net: MaxoutNetwork, fraction: float, seed: int):
    """(the twin with a seeded ``fraction`` of all weights set to zero, how many, of how many).
    Each unit's first piece holds its weights (ReLU: the second is the zero piece)."""
    slots = [(l, u, j) for l, layer in enumerate(net.layers) for u, unit in enumerate(layer.units)
             for j in range(len(unit.pieces[0].w))]
    slots += [("out", i, j) for i, r in enumerate(net.output.W) for j in range(len(r))]
    zero = set(random.Random(seed).sample(slots, round(fraction * len(slots))))
    layers = tuple(Layer(tuple(
        Unit((Piece(tuple(ZERO if (l, u, j) in zero else v for j, v in enumerate(un.pieces[0].w)),
                    un.pieces[0].b),) + un.pieces[1:])
        for u, un in enumerate(layer.units))) for l, layer in enumerate(net.layers))
    W = tuple(tuple(ZERO if ("out", i, j) in zero else v for j, v in enumerate(r))
              for i, r in enumerate(net.output.W))
    return (dataclasses.replace(net, layers=layers, output=dataclasses.replace(net.output, W=W)),
            len(zero), len(slots))


def float16(net: MaxoutNetwork):
    """(the twin with every weight and bias rounded to the nearest float16, how many numbers
    changed, of how many)."""
    import numpy as np
    from fractions import Fraction
    changed = [0, 0]

    def r(v: Q) -> Q:
        f = Fraction(float(np.float16(float(v))))
        out = Q(f.numerator, f.denominator)
        changed[0] += out != v
        changed[1] += 1
        return out
    layers = tuple(Layer(tuple(Unit(tuple(Piece(tuple(r(w) for w in p.w), r(p.b))
                                          for p in u.pieces)) for u in layer.units))
                   for layer in net.layers)
    W = tuple(tuple(r(v) for v in row) for row in net.output.W)
    out = dataclasses.replace(net.output, W=W, b=tuple(r(v) for v in net.output.b))
    return dataclasses.replace(net, layers=layers, output=out), changed[0], changed[1]


def lower_bound(a, b, box, seconds: float):
    """(exact gap at the best point found, the point, time): every smaller E is false.  The
    search refutes a tiny epsilon at once; its polish climbs to the largest gap it finds."""
    from exactmax.engine.pair import programs
    from exactmax.kernel.pair import pair_case
    from exactmax.prove.tolerance import FloatProgram, polish, search
    t0 = time.monotonic()
    _, q = programs(a, b)
    fp, P, tiny = FloatProgram(q), box.as_polyhedron(), Q(1, 10 ** 30)
    found, _, _ = search(a, b, fp, pair_case(P, a.out_dim, tiny), box, tiny, t0 + seconds)
    if found is None:
        return ZERO, None, time.monotonic() - t0
    found = polish(a, b, fp, P, a.out_dim, box, found, t0 + seconds)
    return found.gap, found.x, time.monotonic() - t0


def attempt(files, E: Q, args) -> dict:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "exactmax", "equiv", files["a"], files["b"],
                        "--domain", files["domain"], "--epsilon", q_str(E), "--json",
                        "--timeout", str(args.timeout), "--max-leaves", str(args.max_leaves),
                        "--no-search"],
                       capture_output=True, text=True)
    wall = time.monotonic() - t0
    try:
        out = json.loads(r.stdout)
    except json.JSONDecodeError:
        return {"verdict": "error", "exit": r.returncode, "stderr": r.stderr[-2000:],
                "wall_s": wall}
    out["exit"], out["wall_s"] = r.returncode, round(wall, 2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--acas", action="store_true", help="ACAS Xu 1-6, property 3's box (default)")
    g.add_argument("--random", nargs=3, type=int, metavar=("D", "DEPTH", "WIDTH"))
    ap.add_argument("--radius", default="1", help="--random's box: [-R, R]^D (default 1)")
    ap.add_argument("--prune", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600.0, help="per step (default 600 s)")
    ap.add_argument("--max-leaves", type=int, default=200000)
    ap.add_argument("--rel-tol", type=float, default=1e-3)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--up", default="2",
                    help="no epsilon proved yet: try lo times this (default 2, exact)")
    ap.add_argument("--no-aim", dest="aim", action="store_false",
                    help="do not try lo (1 + 0.9 rel-tol) first: E = lo, then bisection")
    ap.add_argument("--float16", action="store_true",
                    help="the twin is the network with every weight and bias rounded to float16 "
                         "(instead of pruned)")
    ap.add_argument("--out", help="write every step as JSON here")
    args = ap.parse_args()
    a, box, what = random_relu(*args.random, args.seed, parse_rational(args.radius)) \
        if args.random else acas()
    if args.float16:
        b, k, n = float16(a)
        print(f"{what}; twin: every number rounded to float16 ({k} of {n} changed)", flush=True)
    else:
        b, k, n = pruned(a, args.prune, args.seed)
        print(f"{what}; twin: {k} of {n} weights set to zero (seed {args.seed})", flush=True)
    tmp = tempfile.mkdtemp(prefix="exactmax-epsilon-")
    files = {"a": os.path.join(tmp, "a.json"), "b": os.path.join(tmp, "b.json"),
             "domain": os.path.join(tmp, "domain.json")}
    for key, obj in (("a", model_to_json(a)), ("b", model_to_json(b)),
                     ("domain", {"format": "exactmax/domain", "version": 1,
                                 **domain_to_json(box)})):
        with open(files[key], "w") as f:
            json.dump(obj, f)
    lo, x, t = lower_bound(a, b, box, 30.0)
    print(f"lower bound: exact gap {q_str(lo)} (about {float(lo):.6g}) at the search's best "
          f"point, {t:.1f} s", flush=True)
    print("| step | epsilon | about | verdict | cells | time (s) |\n|---|---|---|---|---|---|",
          flush=True)
    up = parse_rational(args.up)
    aim = lambda lo: lo * (1 + Q(round(args.rel_tol * 0.9 * 2 ** 40), 2 ** 40))  # noqa: E731
    steps, hi = [], None
    E = aim(lo) if args.aim else lo
    for step in range(1, args.steps + 1):
        r = attempt(files, E, args)
        cells = r.get("stats", {}).get("leaves_checked", "")
        print(f"| {step} | {q_str(E) if E.q < 10 ** 12 else f'{float(E):.12g}'} | "
              f"{float(E):.6g} | {r['verdict']} | {cells} | {r['wall_s']:.1f} |", flush=True)
        steps.append({"epsilon": q_str(E), "verdict": r["verdict"], "cells": cells,
                      "wall_s": r["wall_s"], "reason": r.get("reason"),
                      "gap": (r.get("counterexample") or {}).get("gap")})
        if r["verdict"] == "proved":
            hi = E
        elif r["verdict"] == "refuted":
            lo = max(lo, parse_rational(r["counterexample"]["gap"]))
        record(args, what, k, n, lo, hi, steps, t)
        if hi is not None and (hi == lo or (hi - lo) <= Q(round(args.rel_tol * 2 ** 40), 2 ** 40) * hi):
            break
        if r["verdict"] not in ("proved", "refuted") and (hi is not None or E >= lo * up):
            print(f"stopped: {r['verdict']} ({r.get('reason') or r.get('stderr')})")
            break
        if hi is None:  # refuted: aim above the new gap; unknown: look higher
            E = aim(lo) if r["verdict"] == "refuted" and args.aim else lo * up
        else:
            E = (lo + hi) / 2
    total = t + sum(s["wall_s"] for s in steps)
    print(f"smallest epsilon proved: {q_str(hi) if hi is not None else 'none'}"
          + (f" (about {float(hi):.6g})" if hi is not None else "")
          + f"; largest gap at a point: {q_str(lo)} (about {float(lo):.6g}); "
          f"{len(steps)} steps, {total:.1f} s in all (the lower bound's {t:.1f} s included)",
          flush=True)
    record(args, what, k, n, lo, hi, steps, t)
    return 0


def record(args, what, k, n, lo, hi, steps, lower_s: float = 0.0) -> None:
    """The run so far, as JSON in --out (rewritten after every step)."""
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"what": what, "pruned": [k, n], "lower_bound": q_str(lo),
                       "smallest_proved": None if hi is None else q_str(hi), "steps": steps,
                       "lower_bound_s": round(lower_s, 1),
                       "total_s": round(lower_s + sum(s["wall_s"] for s in steps), 1)}, f,
                      indent=1)


if __name__ == "__main__":
    sys.exit(main())
