"""Work units on 1 and 2 processes and on a Dask LocalCluster of 2 workers (#21), side by side,
on one hard query: the epsilon-equivalence of a random ReLU network (d = 5, 1 x 10, seed 0, on
[-1, 1]^5) and its twin with 5% of its weights set to zero, at the smallest epsilon proved in
benchmarks/results/epsilon_random_5_1x10.json (about 0.987; 2321 cells in one tree).  Each
configuration runs ``exactmax equiv A B --epsilon E --no-search --json --cert C`` in its own
process; the certificates must be byte-identical.

    python benchmarks/parallel.py [--depths 1 2] [--unit-cells N] [--timeout 600]
                                  [--out results/parallel.json]
                                  [--check]   # also ACAS Xu 1-6 property 3 (exactmax check)

Columns: wall time of the command; CPU of the command's process tree as reaped by this one
(the coordinator and its pool; a Dask cluster's workers are not its children); the CPU the
solved units report (time.process_time() inside the worker; units split further are not
counted); units solved and split, cells.  The machine has 2 cores shared with other jobs:
read the load average printed with the table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from epsilon import pruned, random_relu  # noqa: E402

from exactmax.io.models import domain_to_json, model_to_json  # noqa: E402
from exactmax.kernel.rational import Q  # noqa: E402

E = "291238153786664250939/295147905179352825856"
ACAS = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data",
                    "vnncomp2022-test", "test_unsat.onnx")
PROP3 = os.path.join(os.path.dirname(__file__), "acasxu", "prop_3.vnnlib")


def timed(argv: list[str]) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        out = json.loads(r.stdout)
    except json.JSONDecodeError:
        out = {"result": "error", "reason": r.stderr.strip().splitlines()[-1:]}
    s = out.get("stats", {})
    return {"answer": out.get("verdict") or out.get("result"), "reason": out.get("reason"),
            "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "units_cpu_s": s.get("units_cpu_s"), "units": s.get("units"),
            "units_split": s.get("units_over_budget", 0), "cells": s.get("leaves"),
            "kernel_check_s": s.get("kernel_check_s")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--unit-cells", type=int, help="as exactmax's (default: never)")
    ap.add_argument("--depths", type=int, nargs="*", default=[1, 2],
                    help="--split-depth values to run on 1, 2 workers and Dask (default 1 2)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--check", action="store_true", help="also ACAS Xu 1-6 property 3")
    ap.add_argument("--out", help="write the rows as JSON here")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="exactmax-parallel-")
    net, box, what = random_relu(5, 1, 10, 0, Q(1))
    twin, k, n = pruned(net, 0.05, 0)
    files = {name: os.path.join(tmp, f"{name}.json") for name in ("a", "b", "domain")}
    for name, obj in (("a", model_to_json(net)), ("b", model_to_json(twin)),
                      ("domain", {"format": "exactmax/domain", "version": 1,
                                  **domain_to_json(box)})):
        with open(files[name], "w") as f:
            json.dump(obj, f)
    queries = {"epsilon": (f"{what} vs its twin ({k} of {n} weights zero), |A - B|_inf <= "
                           f"{float(Q(E)):.6f}",
                           ["equiv", files["a"], files["b"], "--domain", files["domain"],
                            "--epsilon", E])}
    if args.check:
        queries["acas3"] = ("ACAS Xu 1-6, property 3", ["check", ACAS, PROP3])
    from dask.distributed import LocalCluster
    rows = []
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    try:
        for key, (title, argv) in queries.items():
            runs = [("depth 0 (one unit: as before work units)", ["--split-depth", "0",
                                                                  "--workers", "1"])]
            for k in args.depths:
                runs += [(f"depth {k}, 1 worker (this process)", ["--split-depth", str(k),
                                                                  "--workers", "1"]),
                         (f"depth {k}, 2 workers (process pool)", ["--split-depth", str(k),
                                                                   "--workers", "2"]),
                         (f"depth {k}, Dask LocalCluster of 2", ["--split-depth", str(k),
                                                                 "--scheduler",
                                                                 cluster.scheduler_address])]
            certs: dict = {}
            for label, flags in runs:
                cert = os.path.join(tmp, f"{key}-{len(rows)}.json")
                extra = ["--unit-cells", str(args.unit_cells)] if args.unit_cells else []
                row = timed([sys.executable, "-m", "exactmax", *argv, "--no-search", "--json",
                             "--timeout", str(args.timeout), "--cert", cert, *extra, *flags])
                row.update(query=title, run=label, load=round(os.getloadavg()[0], 1))
                if os.path.exists(cert):
                    with open(cert, "rb") as f:
                        certs.setdefault(label.split(",")[0], set()).add(f.read())
                rows.append(row)
                print(json.dumps(row), flush=True)
            for depth, texts in certs.items():
                rows.append({"query": title, "split": depth,
                             "certificates_identical": len(texts) == 1})
                print(f"{title}, {depth}: certificates identical: {len(texts) == 1}",
                      flush=True)
    finally:
        cluster.close()
    print()
    print(f"2 cores (os.cpu_count() = {os.cpu_count()}), shared with other jobs; load "
          f"average at the end {os.getloadavg()}")
    print("| query | run | answer | wall s | CPU s (tree) | units CPU s | units | cells | "
          "kernel s | load |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "run" in r:
            print(f"| {r['query']} | {r['run']} | {r['answer']} | {r['wall_s']} | "
                  f"{r['cpu_s']} | {r['units_cpu_s']} | {r['units']} | {r['cells']} | "
                  f"{r['kernel_check_s']} | {r['load']} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
