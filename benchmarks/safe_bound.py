"""The safe bound against the support solve, side by side in one run, on the same queries
(issue #21: Farkas proofs made exact from float duals).

    python benchmarks/safe_bound.py [--cap 10] [--acas-timeout 60] [--equiv-only | --acas-only]
                                    [--only-acas 1-6:3 ...] [--json results.json]

Every query runs twice, each time in a fresh child process: "new" (the float dual made exact
by the safe bound, ``floatlp.from_dual``, then the support solve, then z3) and "old"
(``EXACTMAX_SAFE_BOUND=0``: the support solve, then z3), the order alternating from query to
query so that a drift of the machine's load falls on both.  Per run: the answer, the wall time
of building the certificate, how each Farkas question that reached a float LP was answered
(safe bound / support solve / declined to the exact route / no proof by a margin), the z3
calls made inside Farkas questions, the time in each step, the certificate's size (bytes of
its JSON, the multipliers as exact "p/q" text) and the kernel's check time.

Queries:
- issue #21's equivalence suite (``benchmarks/equiv.py``'s generator and seed, its --quick
  configurations, the equal pairs), by two routes: "equivalence" (the split tree of
  ``engine/certify.py``; its Farkas questions go to ``floatlp.farkas``) and "pair" (the
  pair-property route of ``equiv``: ``tolerance`` -> ``casetree.build_case_tree``, whose
  Farkas questions go to the cell LP ``casetree._CellLP.farkas`` first, then to the oracle).
- ACAS Xu 1-6 and 1-7, properties 1-4 (``benchmarks/acasxu.py``'s files), with relaxed leaves
  (the default of ``exactmax check``) and without (``--no-relax``).

The cell LP of ``engine/casetree.py`` reconstructs its row duals by its own support solve.  The
child replaces ``_CellLP.farkas`` by the same code with one step put first, unless
``casetree.py`` already calls the safe bound: ``floatlp.from_dual(rows, e, False, y,
bounds)`` on the float row duals y, the bound rows found once per cell (the change proposed
for ``casetree.py``, which this benchmark measures; with ``EXACTMAX_SAFE_BOUND=0`` the step is
skipped and the code is the original's).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import benchdata

HERE = Path(__file__).resolve().parent
ACAS = Path(benchdata.folder("vnncomp2022-test"))
NETS = {"1-6": "test_unsat.onnx", "1-7": "test_sat.onnx"}


# ----------------------------------------------------------------------- in the child

def _patch_cell_lp(counts):
    """``casetree._CellLP.farkas`` with the safe bound first (unless casetree.py has it),
    counting how each question was answered into ``counts``."""
    import inspect

    import numpy as np

    from exactmax.engine import casetree, floatlp
    from exactmax.kernel.rational import ZERO
    cls = casetree._CellLP
    native = "safe_bound" in inspect.getsource(cls.farkas) or "from_dual" in \
        inspect.getsource(cls.farkas)
    counts["cell_lp_native_safe_bound"] = native

    def farkas(self, e):
        import highspy
        if cls._owner is not self and not self._build():
            counts["cell_lp_declined"] += 1
            return None, False
        h, a, c = self._solver(), e[0], e[1]
        self.calls += 1
        t0 = time.perf_counter()
        h.changeColsCost(self.d, self._cols, np.array([float(v) for v in a]))
        h.run()
        t1 = time.perf_counter()
        counts["cell_lp_lp_s"] += t1 - t0
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            counts["cell_lp_declined"] += 1
            return None, False
        value = h.getInfo().objective_function_value + float(c)
        if value < -1e-7 * (1 + abs(float(c))):
            counts["cell_lp_no_proof"] += 1
            return None, True
        y = h.getSolution().row_dual
        if floatlp.safe_bound_enabled():
            if getattr(self, "_bench_bounds", None) is None:
                self._bench_bounds = floatlp.bound_rows(self.rows, self.d)
            pr = floatlp.from_dual(self.rows, e, False, y, self._bench_bounds)
            t2 = time.perf_counter()
            counts["cell_lp_safe_bound_s"] += t2 - t1
            t1 = t2
            if pr is not None:
                counts["cell_lp_safe_bound"] += 1
                return pr, True
        support = [i for i, v in enumerate(y) if v > 1e-12]
        lam = casetree._support_solve([self.rows[i].a for i in support], a)
        counts["cell_lp_support_solve_s"] += time.perf_counter() - t1
        if lam is None or any(v < 0 for v in lam):
            counts["cell_lp_declined"] += 1
            return None, False
        r = c - sum((v * self.rows[i].c for v, i in zip(lam, support) if v), ZERO)
        if r >= 0:
            counts["cell_lp_support_solve"] += 1
            return tuple((i, v) for v, i in zip(lam, support) if v > 0), True
        counts["cell_lp_declined"] += 1
        return None, False

    if not native:
        cls.farkas = farkas


def _count_oracle(counts):
    """Count the z3 calls made inside the exact oracle's Farkas questions, and its time."""
    from exactmax.engine import certify
    inner = certify._Oracle.farkas

    def farkas(self, rows, e, strict, point=None):
        before, t0 = self.calls, time.perf_counter()
        try:
            return inner(self, rows, e, strict, point)
        finally:
            counts["z3_farkas_calls"] += self.calls - before
            counts["oracle_farkas_s"] += time.perf_counter() - t0
            counts["oracle_farkas"] += 1
    certify._Oracle.farkas = farkas


def _equiv_pair(seed: int, config):
    """The pair (A, B) of benchmarks/equiv.py for ``config`` = (width, depth, rank): the
    same generator, consumed in the same order."""
    sys.path.insert(0, str(HERE))
    import equiv

    from exactmax.kernel.rational import Q
    rng = random.Random(seed)
    for w, dep, k in [(w, dep, k) for dep in (1, 2, 4, 8) for w in (2, 4, 8, 16)
                      for k in (2, 3, 4)]:
        a = equiv.network(rng, w, dep, k)
        b = equiv.twin(rng, a)
        for _ in range(20):
            tuple(Q(rng.randint(-10, 10), 10) for _ in range(equiv.D_IN))
        if (w, dep, k) == tuple(config):
            return a, b
    raise ValueError(f"no configuration {config}")


def _certificate_bytes(tree) -> int:
    from exactmax.io.certificates import tree_to_json
    from exactmax.io.property_certificate import _tree
    try:
        doc = tree_to_json(tree)
    except Exception:  # a property tree (Excluded / Relaxed leaves)
        doc = _tree(tree)
    return len(json.dumps(doc, separators=(",", ":")))


def child(spec: dict) -> dict:
    from collections import Counter

    from exactmax.engine import floatlp
    counts: Counter = Counter()
    _patch_cell_lp(counts)
    _count_oracle(counts)
    out: dict = {}
    t0 = time.monotonic()
    if spec["kind"] == "equiv":
        from exactmax.kernel.polyhedron import Box
        from exactmax.kernel.rational import Q
        from exactmax.prove.verify import VerifyOptions, verify_equal
        a, b = _equiv_pair(spec["seed"], spec["config"])
        kind = {"equivalence": "equivalence", "pair": "pair-property"}[spec["route"]]
        v = verify_equal(a, b, Box((Q(-1),) * 4, (Q(1),) * 4), VerifyOptions(
            timeout_s=spec["cap"], max_leaves=10 ** 6, strategy="monolithic",
            certificate_kind=kind, correspondence=False))
        out["answer"] = v.verdict if v.verdict != "proved" else f"proved ({v.trust})"
        out["reason"] = v.reason
        out["leaves"] = v.stats.get("leaves_checked", v.stats.get("leaves"))
        out["kernel_check_s"] = v.stats.get("kernel_check_s")
        if v.verdict == "proved":
            out["cert_bytes"] = _certificate_bytes(v.certificate)
    else:
        from exactmax.io.models import load_model
        from exactmax.io.property_certificate import _tree
        from exactmax.io.vnnlib2 import read_property
        from exactmax.prove.property import decide_property
        benchdata.require("vnncomp2022-test", NETS[spec["net"]])
        net = load_model(str(ACAS / NETS[spec["net"]]))
        prop = read_property(str(HERE / "acasxu" / f"prop_{spec['prop']}.vnnlib"))
        a = decide_property(net, prop, spec["cap"], relaxed=spec["relaxed"])
        out["answer"] = a.result
        out["reason"] = a.reason
        out["leaves"] = a.stats.get("leaves")
        out["kernel_check_s"] = a.stats.get("kernel_check_s")
        if a.result == "unsat":
            out["cert_bytes"] = len(json.dumps([_tree(t) for t in a.trees],
                                               separators=(",", ":")))
    total = time.monotonic() - t0
    out["total_s"] = round(total, 3)
    out["build_s"] = round(total - (out.get("kernel_check_s") or 0), 3)
    out["floatlp"] = dict(floatlp.ROUTES)
    out["floatlp_s"] = {k: round(v, 3) for k, v in floatlp.SECONDS.items()}
    out["counts"] = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in counts.items()}
    return out


def scaling(dims, per_dim: int, seed: int) -> list[dict]:
    """Random cells in dimension d (the box [-1, 1]^d, then 2 d split rows with coefficients
    p/q, |p| <= 9, q <= 4) and claims e = sum_i w_i row_i + (box terms) + 1/100 with about d
    rows of positive weight: each claim asked of ``floatlp.farkas`` with the safe bound and
    without (in this process, alternating), the same float LP; the exact steps timed, the
    proofs' sizes (characters of their "p/q" multipliers) and the kernel's check timed."""
    from exactmax.kernel.certificate import Row, check_entails, domain_rows
    from exactmax.kernel.polyhedron import Box
    from exactmax.kernel.rational import Q
    from exactmax.engine import floatlp
    from exactmax.engine.certify import _solve
    rng = random.Random(seed)
    out = []
    for d in dims:
        tot = {m: {"answered": 0, "s": 0.0, "chars": 0, "check_s": 0.0, "routes": {}}
               for m in ("new", "old")}
        for n in range(per_dim):
            box = domain_rows(Box((Q(-1),) * d, (Q(1),) * d).as_polyhedron())
            rows = box + [Row(tuple(Q(rng.randint(-9, 9), rng.randint(1, 4)) for _ in range(d)),
                              Q(rng.randint(1, 9), rng.randint(1, 4))) for _ in range(2 * d)]
            w = {i: Q(rng.randint(1, 9), rng.randint(1, 4))
                 for i in rng.sample(range(2 * d, 4 * d), d)}
            a = [sum((v * rows[i].a[t] for i, v in w.items()), Q(0)) for t in range(d)]
            c = sum((v * rows[i].c for i, v in w.items()), Q(0)) + Q(1, 100)
            for t in rng.sample(range(d), d // 2):     # a box term: +-(x_t +- 1) / k
                k = Q(rng.choice([-1, 1]), rng.randint(1, 4))
                a[t] += k
                c += abs(k)
            e = (tuple(a), c)
            for mode in (("new", "old") if n % 2 == 0 else ("old", "new")):
                os.environ["EXACTMAX_SAFE_BOUND"] = "1" if mode == "new" else "0"
                before = dict(floatlp.ROUTES)
                s0 = dict(floatlp.SECONDS)
                proof, _ = floatlp.farkas(rows, e, False, _solve)
                t = tot[mode]
                t["s"] += sum(floatlp.SECONDS[k] - s0.get(k, 0.0)
                              for k in ("safe_bound", "support_solve"))
                for k, v in floatlp.ROUTES.items():
                    if v != before.get(k, 0):
                        t["routes"][k] = t["routes"].get(k, 0) + v - before.get(k, 0)
                if proof is not None:
                    t["answered"] += 1
                    t["chars"] += sum(len(str(v)) for _, v in proof)
                    t0 = time.perf_counter()
                    check_entails(rows, e, False, proof, "scaling")
                    t["check_s"] += time.perf_counter() - t0
        os.environ.pop("EXACTMAX_SAFE_BOUND", None)
        out.append({"d": d, "claims": per_dim, **tot})
    return out


# ----------------------------------------------------------------------- the parent

def run(spec: dict, safe: bool) -> dict:
    env = dict(os.environ, EXACTMAX_SAFE_BOUND="1" if safe else "0")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                           timeout=spec["cap"] * 4 + 120)
        lines = p.stdout.strip().splitlines()
        return json.loads(lines[-1]) if lines else {"answer": "error",
                                                    "reason": p.stderr[-300:]}
    except subprocess.TimeoutExpired:
        return {"answer": "killed"}
    except json.JSONDecodeError:
        return {"answer": "error", "reason": p.stderr[-300:]}


def routes(r: dict) -> str:
    """safe bound / support solve / declined to the exact route / no proof, over both the
    float LP of floatlp.farkas and the cell LP; then z3 calls inside Farkas questions."""
    f, c = r.get("floatlp", {}), r.get("counts", {})
    sb = f.get("safe_bound", 0)   # from_dual counts both floatlp.farkas's and the cell LP's
    ss = f.get("support_solve", 0) + c.get("cell_lp_support_solve", 0)
    dec = f.get("declined", 0) + c.get("cell_lp_declined", 0)
    return f"{sb} / {ss} / {dec} | {c.get('z3_farkas_calls', 0)}"


def step_seconds(r: dict) -> str:
    f, c = r.get("floatlp_s", {}), r.get("counts", {})
    sb = f.get("safe_bound", 0.0)
    ss = f.get("support_solve", 0.0) + c.get("cell_lp_support_solve_s", 0.0)
    return f"{sb:.2f} / {ss:.2f}"


def row(name: str, mode: str, r: dict, load: str) -> str:
    ks = r.get("kernel_check_s")
    return (f"| {name} | {mode} | {r.get('answer')} | {r.get('leaves', '-')} | "
            f"{r.get('build_s', float('nan')):.2f} | {routes(r)} | {step_seconds(r)} | "
            f"{r.get('cert_bytes', '-')} | {'-' if ks is None else f'{ks:.2f}'} | {load} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child")
    ap.add_argument("--cap", type=float, default=10.0, help="seconds per equivalence query")
    ap.add_argument("--acas-timeout", type=float, default=60.0)
    ap.add_argument("--equiv-only", action="store_true")
    ap.add_argument("--acas-only", action="store_true")
    ap.add_argument("--only-acas", nargs="*", help="ACAS Xu instances as NET:PROP[:norelax]")
    ap.add_argument("--routes", nargs="*", default=["equivalence", "pair"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scaling", nargs="*", type=int,
                    help="instead: random cells in these dimensions (e.g. 5 20 50 100)")
    ap.add_argument("--per-dim", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    if args.scaling:
        print(f"load {os.getloadavg()[0]:.2f}; {args.per_dim} claims per dimension\n")
        print("| d | route | proved | exact step s | multiplier chars | kernel check s | "
              "routes |")
        print("|---|---|---|---|---|---|---|")
        res = scaling(args.scaling, args.per_dim, args.seed)
        for r in res:
            for m in ("new", "old"):
                t = r[m]
                print(f"| {r['d']} | {m} | {t['answered']}/{r['claims']} | {t['s']:.3f} | "
                      f"{t['chars']} | {t['check_s']:.3f} | {t['routes']} |", flush=True)
        print(f"load {os.getloadavg()[0]:.2f}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(res, f, indent=1)
        return 0
    specs = []
    if not args.acas_only:
        quick = [(w, dep, 3) for dep in (1, 2, 4, 8) for w in (2, 4, 8, 16) if w * dep <= 16]
        for route in args.routes:
            for cfg in quick:
                specs.append((f"equiv w{cfg[0]} d{cfg[1]} k{cfg[2]} {route}",
                              {"kind": "equiv", "seed": args.seed, "config": cfg,
                               "route": route, "cap": args.cap}))
    if not args.equiv_only:
        for prop in (1, 2, 3, 4):
            for net in NETS:
                for relaxed in (True, False):
                    tag = f"{net}:{prop}" + ("" if relaxed else ":norelax")
                    if args.only_acas and tag not in args.only_acas:
                        continue
                    specs.append((f"ACAS Xu {net} prop {prop}" +
                                  ("" if relaxed else " --no-relax"),
                                  {"kind": "acas", "net": net, "prop": prop,
                                   "relaxed": relaxed, "cap": args.acas_timeout}))
    print("routes: safe bound / support solve / declined to the exact route | z3 calls in "
          "Farkas questions; step s: safe bound / support solve (seconds)\n")
    print("| query | route | answer | leaves | build s | routes | step s | certificate bytes "
          "| kernel s | load |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    results = []
    for n, (name, spec) in enumerate(specs):
        pair = {}
        for safe in ((True, False) if n % 2 == 0 else (False, True)):
            load = os.getloadavg()[0]
            r = run(spec, safe)
            pair["new" if safe else "old"] = r
            r["load"] = round(load, 2)
        for mode in ("new", "old"):
            print(row(name, mode, pair[mode], f"{pair[mode]['load']:.2f}"), flush=True)
        results.append({"query": name, **spec, **pair})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
