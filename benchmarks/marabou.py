"""Maxout-vs-Maxout equivalence on [-1, 1]^d: exactmax (exact, certificate-checked) vs the
Marabou verifier (floating point), side by side in one run.

    python benchmarks/marabou.py [--cap 60] [--eps 1e-6] [--seed 0] [--json results.json]

What is measured.  For each size (d = 4, rank k = 3, width N in {2, 4, 8}, depth D in
{1, 2, 4}) a random network A is drawn as in ``benchmarks/eval.py`` (a fresh generator seeded
from ``--seed`` and the size, so every cell is reproducible on its own), its output is made
the sum of its last-layer units (an explicit ``output`` Affine), and two partners are built:

- ``eq``: A with the pieces of every unit listed in reverse order (equivalent by construction);
- ``ne``: A with the bias of one piece of the first unit of the last layer raised by 1/1000.
  The piece chosen is the one attaining that unit's max at the origin, so B(0) - A(0) = 1/1000
  exactly and the pair is provably not equivalent.

Each pair is given to

1. exactmax: ``verify_equal(A, B, Box([-1, 1]^d), VerifyOptions(timeout_s=cap))``; the verdict
   is proved / refuted / unknown, and the time is the wall time of that call;
2. Marabou 2.0 (``maraboupy``), one query encoding both networks over shared inputs
   x in [-1, 1]^d (weights rounded to the nearest double): per piece a variable z with the
   equation  w . h + b - z = 0,  per unit a variable u with ``addMaxConstraint({z...}, u)``,
   per network y = sum of the last-layer units, then r = y_A - y_B and the property
   |y_A - y_B| >= eps as ONE query with a disjunction constraint
   ``addDisjunctionConstraint([[r >= eps], [-r >= eps]])``.  unsat = Marabou claims
   |A - B| < eps on the whole box (in floating point); sat = a counterexample, which is
   then re-evaluated *exactly* by the exactmax kernel at the returned point (the double
   values, taken exactly as rationals and clamped to the box).  Marabou runs in a child
   process (its C++ output silenced, a wall-clock guard of cap + 30 s on top of its own
   ``timeoutInSeconds = cap``).

"agree" compares the two decisions: proved ~ unsat, refuted ~ sat; "-" when one of them gave
no answer in time.  Once a tool misses the cap on a pair type at some depth, deeper networks
of that width are not run for that tool and pair type (marked "skip"); the other tool still
runs.  By default exactmax and Marabou run concurrently (one core each) to halve the wall
time; ``--sequential`` runs them one after the other.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import os
import random
import sys
import time
from fractions import Fraction

from eval import random_network
from exactmax.kernel.affine import Affine
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit, evaluate_maxout
from exactmax.kernel.polyhedron import Box
from exactmax.kernel.rational import Q
from exactmax.prove.verify import VerifyOptions, verify_equal

WIDTHS = (2, 4, 8)
DEPTHS = (1, 2, 4)
D_IN, RANK = 4, 3
DELTA = Q(1, 1000)
GRACE_S = 30.0


# --- the pairs --------------------------------------------------------------------------

def with_sum_output(net: MaxoutNetwork) -> MaxoutNetwork:
    """The same network with the explicit output y = sum of the last layer's units."""
    n = net.layers[-1].width
    return dataclasses.replace(net, output=Affine(((Q(1),) * n,), (Q(0),), n))


def reversed_pieces(net: MaxoutNetwork) -> MaxoutNetwork:
    """Every unit's pieces in reverse order: the same function."""
    layers = tuple(Layer(tuple(Unit(u.pieces[::-1]) for u in l.units)) for l in net.layers)
    return dataclasses.replace(net, layers=layers)


def perturbed(net: MaxoutNetwork, delta: Q) -> tuple[MaxoutNetwork, int]:
    """(net with the bias of one piece of the first unit of the last layer raised by delta,
    that piece's index).  The piece is one attaining the unit's max at the origin, so the
    unit's output, hence the summed output, rises by exactly delta at x = 0."""
    last = net.layers[-1]
    h = (Q(0),) * net.input_dim
    if len(net.layers) > 1:  # the last layer's input at x = 0, exactly
        h = evaluate_maxout(MaxoutNetwork(net.input_dim, net.layers[:-1]), h)
    z = [sum((w * v for w, v in zip(p.w, h)), Q(0)) + p.b for p in last.units[0].pieces]
    j = z.index(max(z))
    u0 = last.units[0]
    p = u0.pieces[j]
    pieces = u0.pieces[:j] + (Piece(p.w, p.b + delta),) + u0.pieces[j + 1:]
    layers = net.layers[:-1] + (Layer((Unit(pieces),) + last.units[1:]),)
    return dataclasses.replace(net, layers=layers), j


def as_floats(net: MaxoutNetwork):
    """[layer][unit][piece] = (weights, bias) as nearest doubles, and the output map
    (W rows, b) as doubles: what Marabou is given."""
    f = lambda v: int(v.p) / int(v.q)  # noqa: E731  (int / int is correctly rounded)
    layers = [[[([f(w) for w in p.w], f(p.b)) for p in u.pieces] for u in l.units]
              for l in net.layers]
    out = net.output
    return {"layers": layers, "W": [[f(v) for v in row] for row in out.W],
            "b": [f(v) for v in out.b]}


# --- Marabou ----------------------------------------------------------------------------

def marabou_query(fa, fb, d, eps, side=0):
    """The MarabouCore InputQuery for |A(x) - B(x)| >= eps, x in [-1, 1]^d (side = 0, a
    disjunction), or for A(x) - B(x) >= eps (side = 1) or B(x) - A(x) >= eps (side = -1)
    (a bound on r = y_A - y_B, no disjunction).

    Returns (query, x variables, (y_A, y_B) variables, number of variables)."""
    from maraboupy import MarabouCore as MC

    equations, maxes = [], []          # (addends, scalar) for EQ rows; (elements, out)
    nvars = d
    xs = list(range(d))

    def new():
        nonlocal nvars
        nvars += 1
        return nvars - 1

    def encode(fnet):
        h = xs
        for layer in fnet["layers"]:
            units = []
            for unit in layer:
                zs = []
                for w, b in unit:
                    z = new()                       # z = w . h + b
                    equations.append(([(c, v) for c, v in zip(w, h) if c != 0.0] + [(-1.0, z)],
                                      -b))
                    zs.append(z)
                if len(zs) == 1:
                    units.append(zs[0])
                else:
                    u = new()                       # u = max(zs)
                    maxes.append((set(zs), u))
                    units.append(u)
            h = units
        (row,), (c,) = fnet["W"], fnet["b"]        # one output: y = row . h + c
        y = new()
        equations.append(([(a, v) for a, v in zip(row, h) if a != 0.0] + [(-1.0, y)], -c))
        return y

    ya, yb = encode(fa), encode(fb)
    r = new()                                       # r = y_A - y_B
    equations.append(([(1.0, ya), (-1.0, yb), (-1.0, r)], 0.0))

    ipq = MC.InputQuery()
    ipq.setNumberOfVariables(nvars)
    for i in xs:
        ipq.markInputVariable(i, i)
        ipq.setLowerBound(i, -1.0)
        ipq.setUpperBound(i, 1.0)
    ipq.markOutputVariable(r, 0)
    for addends, scalar in equations:
        eq = MC.Equation(MC.Equation.EQ)
        for c, v in addends:
            eq.addAddend(c, v)
        eq.setScalar(scalar)
        ipq.addEquation(eq)
    for elements, u in maxes:
        MC.addMaxConstraint(ipq, elements, u)
    if side > 0:
        ipq.setLowerBound(r, eps)
        return ipq, xs, (ya, yb), nvars
    if side < 0:
        ipq.setUpperBound(r, -eps)
        return ipq, xs, (ya, yb), nvars
    # (r >= eps) OR (-r >= eps); one-variable disjuncts become bound tightenings in Marabou.
    ge = MC.Equation(MC.Equation.GE)
    ge.addAddend(1.0, r)
    ge.setScalar(eps)
    le = MC.Equation(MC.Equation.GE)
    le.addAddend(-1.0, r)
    le.setScalar(eps)
    MC.addDisjunctionConstraint(ipq, [[ge], [le]])
    return ipq, xs, (ya, yb), nvars


def _marabou_child(conn, fa, fb, d, eps, cap):
    """Child process: build and solve the query with Marabou's output silenced; send back
    (answer, seconds, x, (y_A, y_B), stats)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    from maraboupy import Marabou, MarabouCore as MC
    t0 = time.perf_counter()
    ipq, xs, (ya, yb), nvars = marabou_query(fa, fb, d, eps)
    opts = Marabou.createOptions(verbosity=0, timeoutInSeconds=int(cap), numWorkers=1,
                                 numBlasThreads=1)
    answer, vals, stats = MC.solve(ipq, opts, "")
    t = time.perf_counter() - t0
    out = {"answer": answer.lower(), "time_s": t, "variables": nvars,
           "splits": stats.getUnsignedAttribute(MC.NUM_SPLITS),
           "timed_out": stats.hasTimedOut()}
    if answer == "sat":
        out["x"] = [vals[i] for i in xs]
        out["y"] = [vals[ya], vals[yb]]
    conn.send(out)
    conn.close()


class MarabouRun:
    """One Marabou query in a child process (started at once, collected by ``result``)."""

    def __init__(self, fa, fb, d, eps, cap):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe(duplex=False)
        self.cap = cap
        self.t0 = time.perf_counter()
        self.proc = ctx.Process(target=_marabou_child, args=(child, fa, fb, d, eps, cap),
                                daemon=True)
        self.proc.start()
        child.close()

    def result(self):
        left = self.cap + GRACE_S - (time.perf_counter() - self.t0)
        if self.conn.poll(max(left, 0.0)):
            try:
                out = self.conn.recv()
            except EOFError:
                out = None
        else:
            out = None
        wall = time.perf_counter() - self.t0
        self.proc.join(timeout=5)
        if self.proc.is_alive():                     # our own child only, by its handle
            self.proc.kill()
            self.proc.join()
            out = out or {"answer": "killed", "time_s": wall}
        if out is None:
            out = {"answer": f"crash (exit {self.proc.exitcode})", "time_s": wall}
        out["wall_s"] = wall
        return out


def check_point(a, b, x_float, eps):
    """Exact re-evaluation of a Marabou counterexample: the doubles taken exactly as
    rationals, clamped to [-1, 1]."""
    exact = [min(max(Fraction(v), Fraction(-1)), Fraction(1)) for v in x_float]
    x = tuple(Q(c.numerator, c.denominator) for c in exact)
    (ya,), (yb,) = evaluate_maxout(a, x), evaluate_maxout(b, x)
    diff = ya - yb
    return {"clamped": any(abs(v) > 1 for v in x_float), "exact_diff": str(diff),
            "exact_diff_float": int(diff.p) / int(diff.q),
            "confirmed": diff != 0,                      # A(x) != B(x): a real counterexample
            "ge_eps": abs(int(diff.p) / int(diff.q)) >= eps}


# --- one pair ---------------------------------------------------------------------------

def run_exactmax(a, b, box, cap):
    t0 = time.perf_counter()
    v = verify_equal(a, b, box, VerifyOptions(timeout_s=cap))
    t = time.perf_counter() - t0
    out = {"verdict": v.verdict, "trust": v.trust, "time_s": t, "reason": v.reason}
    if v.verdict == "refuted":
        out["x"] = [str(c) for c in v.x]
        out["diff"] = str(v.outputs[0][0] - v.outputs[1][0])
    return out


def agreement(ex, ma):
    e = {"proved": "eq", "refuted": "ne"}.get(ex["verdict"]) if ex else None
    m = {"unsat": "eq", "sat": "ne"}.get(ma["answer"]) if ma else None
    if e is None or m is None:
        return None
    return e == m


def run_pair(a, b, box, args, do_ex, do_ma):
    fa, fb = as_floats(a), as_floats(b)
    mr = MarabouRun(fa, fb, box.dim, args.eps, args.cap) if do_ma else None
    if mr is not None and args.sequential:
        ma = mr.result()
        mr = None
    ex = run_exactmax(a, b, box, args.cap) if do_ex else None
    if mr is not None:
        ma = mr.result()
    elif not do_ma:
        ma = None
    if ma is not None and ma["answer"] == "sat":
        ma["check"] = check_point(a, b, ma["x"], args.eps)
    return ex, ma


# --- table ------------------------------------------------------------------------------

def ex_cell(ex):
    if ex is None:
        return "skip"
    v = ex["verdict"] + (" (z3 only)" if ex["trust"] == "solver-only" else "")
    return f"{v}, {ex['time_s']:.2f} s"


def ma_cell(ma):
    if ma is None:
        return "skip"
    s = f"{ma['answer']}, {ma['time_s']:.2f} s"
    if "check" in ma:
        c = ma["check"]
        s += (f" (exact A-B = {c['exact_diff_float']:.3g}: "
              f"{'confirmed' if c['confirmed'] else 'NOT a counterexample'})")
    return s


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cap", type=float, default=60.0, help="seconds per query (default 60)")
    ap.add_argument("--eps", type=float, default=1e-6, help="Marabou's |A - B| >= eps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sequential", action="store_true",
                    help="run Marabou and exactmax one after the other, not concurrently")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args(argv)
    box = Box((Q(-1),) * D_IN, (Q(1),) * D_IN)
    results, t_start = [], time.perf_counter()
    print(f"Marabou vs exactmax, Maxout-vs-Maxout equivalence on [-1, 1]^{D_IN}, rank {RANK}, "
          f"cap {args.cap:g} s per query, eps = {args.eps:g}, seed {args.seed}\n")
    print("| (d, N, k, D) | pair | exactmax | Marabou | agree? |")
    print("|---|---|---|---|---|")
    for N in WIDTHS:
        dead = {}                    # (tool, pair) -> True once it missed the cap at width N
        for D in DEPTHS:
            rng = random.Random(f"{args.seed}-{D_IN}-{N}-{RANK}-{D}")
            a = with_sum_output(random_network(rng, D_IN, N, RANK, D))
            b_ne, j = perturbed(a, DELTA)
            for pair, b in (("eq", reversed_pieces(a)), ("ne", b_ne)):
                ex, ma = run_pair(a, b, box, args, not dead.get(("ex", pair)),
                                  not dead.get(("ma", pair)))
                if ex is not None and ex["verdict"] == "unknown":
                    dead[("ex", pair)] = True
                if ma is not None and ma["answer"] not in ("sat", "unsat"):
                    dead[("ma", pair)] = True
                ok = agreement(ex, ma)
                results.append({"size": {"d": D_IN, "N": N, "k": RANK, "D": D}, "pair": pair,
                                "perturbed_piece": j if pair == "ne" else None,
                                "eps": args.eps, "cap_s": args.cap, "exactmax": ex,
                                "marabou": ma, "agree": ok})
                print(f"| {(D_IN, N, RANK, D)} | {pair} | {ex_cell(ex)} | {ma_cell(ma)} | "
                      f"{'-' if ok is None else 'yes' if ok else 'NO'} |", flush=True)
    total = time.perf_counter() - t_start
    print(f"\ntotal wall time {total:.0f} s "
          f"({'sequential' if args.sequential else 'exactmax and Marabou concurrently'})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cap_s": args.cap, "eps": args.eps, "seed": args.seed,
                       "sequential": args.sequential, "total_wall_s": total,
                       "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
