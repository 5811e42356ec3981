"""Maxout-vs-Maxout equivalence on [-1, 1]^d: exactmax (exact, kernel-checked) vs the Marabou
verifier (floating point), side by side in one run.

    python benchmarks/marabou.py [--cap 60] [--eps 1e-6] [--seed 0] [--json results.json]

What is measured.  For each size (d = 4, rank k = 3, width N in {2, 4, 8}, depth D in
{1, 2, 4}) a random network A is drawn with ``random_network`` of ``benchmarks/eval.py`` (a
fresh generator seeded from ``--seed`` and the size, so every cell is reproducible on its own)
and given the explicit output y = sum of its last-layer units (an ``Affine`` ``output``, the
same linear map on both sides and in both tools).  Two partners:

- ``eq``: A with the pieces of every unit listed in reverse order (equivalent by construction);
- ``ne``: A with the bias of one piece of the first unit of the last layer raised by 1/1000.
  The piece is the one attaining that unit's max at the origin, so B(0) - A(0) = 1/1000
  exactly: the pair is provably not equivalent.

Each pair goes to

1. exactmax: ``verify_equal(A, B, Box([-1, 1]^d), VerifyOptions(timeout_s=cap))``; verdict
   proved / refuted / unknown, time = wall time of the call.
2. Marabou 2.0 (``maraboupy``), one query with both networks over shared inputs
   x in [-1, 1]^d, every weight rounded to the nearest double: per piece a variable z and the
   equation  w . h + b - z = 0,  per unit a variable u and ``addMaxConstraint({z...}, u)``,
   per network y = sum of its last-layer units, then r = y_A - y_B and the property
   |y_A - y_B| >= eps as ONE disjunction constraint
   ``addDisjunctionConstraint([[r >= eps], [-r >= eps]])`` (not two queries).
   unsat = Marabou claims |A - B| < eps on the whole box (in floating point); sat = a
   counterexample, which the exactmax kernel then re-evaluates *exactly* at the returned
   point (the doubles taken as exact rationals, clamped to the box): "real" if A(x) != B(x)
   exactly, "spurious" if A(x) = B(x).  (eps = 1e-6 is at the level of Marabou's own
   floating-point tolerances on these networks; ``--eps`` changes it.)  Two configurations:

   - ``default``: ``Marabou.createOptions(verbosity=0, timeoutInSeconds=cap)``, i.e. Marabou's
     default DeepSoI search;
   - ``prove-unsat``: what Marabou's command line does for ``--prove-unsat``: proof production
     on (``produceProofs=True``) and ``GlobalConfiguration::USE_DEEPSOI_LOCAL_SEARCH = false``
     (the Python options do not expose that switch; it is set through ctypes, exactly as
     ``marabouMain`` sets it), so the Reluplex-style search with UNSAT certificates.

   Marabou runs in a child process (spawned afresh per query, its C++ output sent to
   /dev/null).  Its own timeout is not always honoured (the DeepSoI local search loops
   without checking it), so the child is killed at cap + 10 s: "killed".

"agree" compares the decisions: proved ~ unsat, refuted ~ sat ("NO" when they differ, "-" when
one side gave no answer, "yes (x spurious)" when both say "not equivalent" but Marabou's point
is not a counterexample).  Once a tool misses the cap on a pair type at some depth, deeper
networks of that width are skipped for that tool and pair type ("skip"); the other tools
still run.  Everything runs one query at a time, so the times do not compete for cores.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import multiprocessing as mp
import os
import random
import subprocess
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
GRACE_S = 10.0
CONFIGS = ("default", "prove-unsat")
"""``prove-unsat+relu-violation`` (used by benchmarks/equiv.py, issue #21's "best route"):
prove-unsat with ``splittingStrategy="relu-violation"``, what the command line's
``--prove-unsat --split-strategy relu-violation`` sets (maraboupy 2.0.0's wheel ships no
Marabou executable)."""
DEEPSOI_FLAG = "_ZN19GlobalConfiguration24USE_DEEPSOI_LOCAL_SEARCHE"


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
    that piece's index).  The piece attains the unit's max at the origin, so the unit's
    output, hence the summed output, rises by exactly delta at x = 0."""
    last = net.layers[-1]
    h = (Q(0),) * net.input_dim
    if len(net.layers) > 1:                        # the last layer's input at x = 0, exactly
        h = evaluate_maxout(MaxoutNetwork(net.input_dim, net.layers[:-1]), h)
    z = [sum((w * v for w, v in zip(p.w, h)), Q(0)) + p.b for p in last.units[0].pieces]
    j = z.index(max(z))
    p = last.units[0].pieces[j]
    unit = Unit(last.units[0].pieces[:j] + (Piece(p.w, p.b + delta),)
                + last.units[0].pieces[j + 1:])
    layers = net.layers[:-1] + (Layer((unit,) + last.units[1:]),)
    return dataclasses.replace(net, layers=layers), j


def as_floats(net: MaxoutNetwork) -> dict:
    """What Marabou is given: [layer][unit][piece] = (weights, bias) and the output map
    (W rows, b), every rational rounded to the nearest double (int / int rounds correctly)."""
    f = lambda v: int(v.p) / int(v.q)  # noqa: E731
    return {"layers": [[[([f(w) for w in p.w], f(p.b)) for p in u.pieces] for u in l.units]
                       for l in net.layers],
            "W": [[f(v) for v in row] for row in net.output.W],
            "b": [f(v) for v in net.output.b]}


# --- Marabou ----------------------------------------------------------------------------

def marabou_query(fa: dict, fb: dict, d: int, eps: float):
    """The MarabouCore InputQuery for  exists x in [-1, 1]^d: |A(x) - B(x)| >= eps.

    Returns (query, input variables, (y_A, y_B, r) variables, number of variables)."""
    from maraboupy import MarabouCore as MC

    equations, maxes = [], []          # EQ rows as (addends, scalar); max as (elements, out)
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
                for w, b in unit:                   # w . h + b - z = 0
                    z = new()
                    equations.append(([(c, v) for c, v in zip(w, h) if c != 0.0] + [(-1.0, z)],
                                      -b))
                    zs.append(z)
                if len(zs) == 1:
                    units.append(zs[0])
                else:                               # u = max(zs)
                    u = new()
                    maxes.append((set(zs), u))
                    units.append(u)
            h = units
        (row,), (c,) = fnet["W"], fnet["b"]        # one output: row . h + c - y = 0
        y = new()
        equations.append(([(a, v) for a, v in zip(row, h) if a != 0.0] + [(-1.0, y)], -c))
        return y

    ya, yb = encode(fa), encode(fb)
    r = new()                                       # y_A - y_B - r = 0
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
    disjuncts = []                                  # (r >= eps) OR (-r >= eps)
    for sign in (1.0, -1.0):
        e = MC.Equation(MC.Equation.GE)
        e.addAddend(sign, r)
        e.setScalar(eps)
        disjuncts.append([e])
    MC.addDisjunctionConstraint(ipq, disjuncts)
    return ipq, xs, (ya, yb, r), nvars


def _marabou_child(conn, config, fa, fb, d, eps, cap):
    """Child process: build and solve one query, Marabou's output silenced; send back a dict."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    from maraboupy import Marabou, MarabouCore as MC
    kw = {}
    if config == "prove-unsat":  # as marabouMain does for --prove-unsat
        ctypes.c_bool.in_dll(ctypes.CDLL(MC.__file__), DEEPSOI_FLAG).value = False
        kw["produceProofs"] = True
    if config == "prove-unsat+relu-violation":
        ctypes.c_bool.in_dll(ctypes.CDLL(MC.__file__), DEEPSOI_FLAG).value = False
        kw["produceProofs"] = True
        kw["splittingStrategy"] = "relu-violation"
    t0 = time.perf_counter()
    ipq, xs, (ya, yb, r), nvars = marabou_query(fa, fb, d, eps)
    opts = Marabou.createOptions(verbosity=0, timeoutInSeconds=int(cap), **kw)
    answer, vals, stats = MC.solve(ipq, opts, "")
    out = {"answer": answer, "time_s": time.perf_counter() - t0, "variables": nvars,
           "splits": stats.getUnsignedAttribute(MC.NUM_SPLITS)}
    if answer == "sat":
        out["x"] = [vals[i] for i in xs]
        out["y_A"], out["y_B"], out["r"] = vals[ya], vals[yb], vals[r]
    conn.send(out)
    conn.close()


def run_marabou(config, fa, fb, d, eps, cap):
    """One Marabou query in a fresh child process, killed at cap + GRACE_S."""
    ctx = mp.get_context("spawn")
    conn, child = ctx.Pipe(duplex=False)
    t0 = time.perf_counter()
    proc = ctx.Process(target=_marabou_child, args=(child, config, fa, fb, d, eps, cap))
    proc.start()
    child.close()
    out = None
    if conn.poll(cap + GRACE_S):
        try:
            out = conn.recv()
        except EOFError:                            # the child died without an answer
            pass
    wall = time.perf_counter() - t0
    proc.join(timeout=5)
    if proc.is_alive():                             # our own child, by its handle
        proc.kill()
        proc.join()
        if out is None:
            out = {"answer": "killed", "time_s": wall}
    if out is None:
        out = {"answer": f"crash (exit {proc.exitcode})", "time_s": wall}
    out["config"] = config
    out["wall_s"] = wall
    return out


def check_point(a, b, x_float, eps):
    """Exact re-evaluation of a Marabou counterexample at the doubles it returned (taken
    exactly as rationals, clamped to [-1, 1])."""
    exact = [min(max(Fraction(v), Fraction(-1)), Fraction(1)) for v in x_float]
    x = tuple(Q(c.numerator, c.denominator) for c in exact)
    (ya,), (yb,) = evaluate_maxout(a, x), evaluate_maxout(b, x)
    diff = ya - yb
    return {"clamped": any(abs(v) > 1 for v in x_float), "exact_diff": str(diff),
            "exact_diff_float": int(diff.p) / int(diff.q),
            "real": diff != 0,                     # A(x) != B(x): a genuine counterexample
            "abs_ge_eps": abs(diff) >= Q(Fraction(eps).numerator, Fraction(eps).denominator)}


# --- exactmax ---------------------------------------------------------------------------

def run_exactmax(a, b, box, cap):
    t0 = time.perf_counter()
    v = verify_equal(a, b, box, VerifyOptions(timeout_s=cap))
    out = {"verdict": v.verdict, "trust": v.trust, "time_s": time.perf_counter() - t0,
           "reason": v.reason}
    if v.verdict == "refuted":
        out["x"] = [str(c) for c in v.x]
        out["diff"] = str(v.outputs[0][0] - v.outputs[1][0])
    return out


# --- table ------------------------------------------------------------------------------

def agreement(ex, ma):
    e = {"proved": "eq", "refuted": "ne"}.get(ex["verdict"]) if ex else None
    m = {"unsat": "eq", "sat": "ne"}.get(ma["answer"]) if ma else None
    return None if e is None or m is None else e == m


def ex_cell(ex):
    if ex is None:
        return "skip"
    v = "proved (z3 only)" if ex["trust"] == "solver-only" else ex["verdict"]
    return f"{v}, {ex['time_s']:.2f} s"


def ma_cell(ma):
    if ma is None:
        return "skip"
    if ma["answer"] == "killed":
        return f"killed at {ma['wall_s']:.0f} s"
    s = f"{ma['answer']}, {ma['time_s']:.2f} s"
    if "check" in ma:
        c = ma["check"]
        what = "spurious" if not c["real"] else "real" if c["abs_ge_eps"] else "real, < eps"
        s += f" (r = {ma['r']:.2g}; exact A-B = {c['exact_diff_float']:.3g}: {what})"
    return s


def agree_cell(ok, ma):
    if ok is None:
        return "-"
    if ok and ma.get("check", {}).get("real") is False:
        return "yes (x spurious)"
    return "yes" if ok else "NO"


def provenance():
    """maraboupy's version and the exactmax commit (best effort)."""
    info = {}
    try:
        from importlib.metadata import version
        info["maraboupy"] = version("maraboupy")
    except Exception:  # noqa: BLE001
        pass
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        info["commit"] = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=here,
                                        capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cap", type=float, default=60.0, help="seconds per query (default 60)")
    ap.add_argument("--eps", type=float, default=1e-6,
                    help="Marabou's property |A - B| >= eps (default 1e-6)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args(argv)
    box = Box((Q(-1),) * D_IN, (Q(1),) * D_IN)
    info = provenance()
    results, t_start = [], time.perf_counter()
    print(f"Maxout-vs-Maxout equivalence on [-1, 1]^{D_IN}, rank {RANK}: exactmax vs Marabou "
          f"{info.get('maraboupy', '?')}; cap {args.cap:g} s per query, eps = {args.eps:g}, "
          f"seed {args.seed}, exactmax {info.get('commit', '?')}\n")
    print("| (d, N, k, D) | pair | exactmax | Marabou default | agree | "
          "Marabou prove-unsat | agree |")
    print("|---|---|---|---|---|---|---|")
    for N in WIDTHS:
        dead = set()             # (tool, pair): missed the cap at a smaller depth of width N
        for D in DEPTHS:
            rng = random.Random(f"{args.seed}-{D_IN}-{N}-{RANK}-{D}")
            a = with_sum_output(random_network(rng, D_IN, N, RANK, D))
            b_ne, j = perturbed(a, DELTA)
            for pair, b in (("eq", reversed_pieces(a)), ("ne", b_ne)):
                ex = None if ("exactmax", pair) in dead else run_exactmax(a, b, box, args.cap)
                if ex is not None and ex["verdict"] == "unknown":
                    dead.add(("exactmax", pair))
                fa, fb = as_floats(a), as_floats(b)
                ma = {}
                for config in CONFIGS:
                    if (config, pair) in dead:
                        ma[config] = None
                        continue
                    m = run_marabou(config, fa, fb, D_IN, args.eps, args.cap)
                    if m["answer"] == "sat":
                        m["check"] = check_point(a, b, m["x"], args.eps)
                    elif m["answer"] != "unsat":
                        dead.add((config, pair))
                    ma[config] = m
                ok = {c: agreement(ex, ma[c]) for c in CONFIGS}
                results.append({"size": {"d": D_IN, "N": N, "k": RANK, "D": D}, "pair": pair,
                                "perturbed_piece": j if pair == "ne" else None,
                                "exactmax": ex, "marabou": ma, "agree": ok})
                print(f"| {(D_IN, N, RANK, D)} | {pair} | {ex_cell(ex)} | "
                      + " | ".join(f"{ma_cell(ma[c])} | {agree_cell(ok[c], ma[c])}" for c in CONFIGS)
                      + " |", flush=True)
    total = time.perf_counter() - t_start
    print(f"\ntotal wall time {total:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cap_s": args.cap, "eps": args.eps, "seed": args.seed,
                       "grace_s": GRACE_S, "delta": str(DELTA), **info,
                       "total_wall_s": total, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
