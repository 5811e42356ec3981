"""Work units on 1 and 2 processes and on a Dask LocalCluster of 2 workers (#21), side by side,
on hard queries whose time is dominated by many cells:

- ``epsilon``: the epsilon-equivalence of a random ReLU network (d = 5, 1 x 10, seed 0, on
  [-1, 1]^5) and its twin with 5% of its weights set to zero, at the smallest epsilon proved in
  benchmarks/results/epsilon_random_5_1x10.json (about 0.987; 2321 cells of the Max-choice
  builder): ``exactmax equiv A B --epsilon E``;
- ``acas``: ACAS Xu network 1-7, property 2 (../shared/data/vnncomp2022-test/test_sat.onnx,
  benchmarks/acasxu/prop_2.vnnlib; 68 relaxed leaves): ``exactmax check NET PROP``.

Each configuration runs the command with ``--no-search --json --cert C`` in its own process:
one unit (a budget above the cells needed: the uninterrupted walk, as before units could hand
back cells), then the default budgets on 1 worker (this process), 2 workers (a process pool)
and a Dask LocalCluster of 2 workers (one thread each, started before the runs).  The
certificates must be byte-identical.

    python benchmarks/parallel.py [--queries epsilon acas] [--timeout 600]
                                  [--repeat 1] [--out results/parallel.json]

Columns: wall time of the command; when it had its answer (its own time_s: the kernel's
check included, the certificate file not yet written); the units' span (from the first unit
to the last answer, in the coordinating process: the part of the run that workers can
share); CPU of the coordinating process (getrusage of the child; pool workers run under a
forkserver and a Dask cluster's workers are not its children, so their CPU is not in it);
the CPU the units report (time.process_time() inside the worker, summed); the CPU every
process of the machine used during the run (/proc/stat), and what is left of it after the
command's own (coordinator and units): other jobs' CPU, an estimate that says how disturbed
the run was (a pool's start-up and Dask's own work count as other jobs); units, units that
handed back open cells, cells; the kernel's check of the assembled tree (in the
coordinating process); the 1-minute load average before the run.  With ``--repeat R`` the
configurations run R rounds, interleaved, and a second table gives each one's fastest round
(the least disturbed by other jobs on a shared machine).
First, the machine's throughput with two CPU-bound processes: a pure-Python loop run alone
and as two processes at once (2.0x: two full cores; 1.0x: the two CPUs share one core's
throughput).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import benchdata  # noqa: E402
from epsilon import pruned, random_relu  # noqa: E402

from exactmax.io.models import domain_to_json, model_to_json  # noqa: E402
from exactmax.kernel.rational import Q  # noqa: E402

E = "291238153786664250939/295147905179352825856"
HERE = os.path.dirname(os.path.abspath(__file__))
ACAS = os.path.join(benchdata.folder("vnncomp2022-test"), "test_sat.onnx")
PROP2 = os.path.join(HERE, "acasxu", "prop_2.vnnlib")


def _busy() -> int:
    """Busy jiffies of all CPUs (user, nice, system, irq, softirq, steal)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7]


def _spin(_=None) -> float:
    t0 = time.monotonic()
    x = 0
    for i in range(15_000_000):
        x += i
    return time.monotonic() - t0


def throughput() -> dict:
    """Wall time of a CPU-bound loop alone and as two processes at once."""
    alone = _spin()
    with mp.get_context("fork").Pool(2) as pool:
        two = pool.map(_spin, [0, 1])
    return {"alone_s": round(alone, 2), "two_at_once_s": [round(t, 2) for t in two],
            "throughput_x": round(2 * alone / max(two), 2)}


def timed(argv: list[str]) -> dict:
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy0, t0 = _busy(), time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True)
    wall = time.monotonic() - t0
    busy = (_busy() - busy0) / os.sysconf("SC_CLK_TCK")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        out = json.loads(r.stdout)
    except json.JSONDecodeError:
        out = {"result": "error", "reason": r.stderr.strip().splitlines()[-1:]}
    s = out.get("stats", {})
    here = "--workers" in argv and argv[argv.index("--workers") + 1] == "1"
    own = cpu + (0.0 if here else s.get("units_cpu_s") or 0.0)   # units here: in cpu
    return {"answer": out.get("verdict"), "reason": out.get("reason"),
            "others_cpu_s": round(max(busy - own, 0.0), 1), "answer_s": out.get("time_s"),
            "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "machine_cpu_s": round(busy, 2),
            "units_cpu_s": s.get("units_cpu_s"), "units_span_s": s.get("units_span_s"),
            "units": s.get("units"),
            "units_handed_back": s.get("units_handed_back"), "cells": s.get("leaves"),
            "kernel_check_s": s.get("kernel_check_s"), "load": round(load, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", nargs="*", default=["epsilon", "acas"],
                    choices=["epsilon", "acas"])
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--repeat", type=int, default=1, help="rounds of all configurations")
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
    queries = {
        "epsilon": (f"{what} vs its twin ({k} of {n} weights zero), |A - B|_inf <= "
                    f"{float(Q(E)):.6f}",
                    ["equiv", files["a"], files["b"], "--domain", files["domain"],
                     "--epsilon", E]),
        "acas": ("ACAS Xu 1-7, property 2", ["check", ACAS, PROP2])}
    from dask.distributed import LocalCluster
    rows: list = [{"machine": throughput()}]
    print(json.dumps(rows[0]), flush=True)
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    try:
        for key in args.queries:
            title, argv = queries[key]
            runs = [("one unit (no budget), 1 worker", ["--workers", "1", "--unit-cells",
                                                        "1000000000"]),
                    ("units, 1 worker (this process)", ["--workers", "1"]),
                    ("units, 2 workers (process pool)", ["--workers", "2"]),
                    ("units, Dask LocalCluster of 2", ["--scheduler",
                                                       cluster.scheduler_address])]
            certs: set = set()
            for rnd in range(args.repeat):
                for label, flags in runs:
                    cert = os.path.join(tmp, f"{key}-{len(rows)}.json")
                    row = timed([sys.executable, "-m", "exactmax", *argv, "--no-search",
                                 "--json", "--timeout", str(args.timeout), "--cert", cert,
                                 *flags])
                    row.update(query=title, run=label, round=rnd)
                    if os.path.exists(cert):
                        with open(cert, "rb") as f:
                            certs.add(f.read())
                        os.remove(cert)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            rows.append({"query": title, "certificates_identical": len(certs) == 1})
            print(f"{title}: certificates identical: {len(certs) == 1}", flush=True)
    finally:
        cluster.close()
    m = rows[0]["machine"]
    print()
    print(f"os.cpu_count() = {os.cpu_count()}; two CPU-bound processes at once: "
          f"{m['throughput_x']}x the throughput of one; load average at the end "
          f"{os.getloadavg()}")
    print("| query | run | answer | wall s | answered at s | units span s | CPU s (coordinator) "
          "| units CPU s "
          "| machine CPU s | other jobs' CPU s | units | handed back | cells | kernel s | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "run" in r:
            print(f"| {r['query']} | {r['run']} | {r['answer']} | {r['wall_s']} | "
                  f"{r['answer_s']} | {r['units_span_s']} | "
                  f"{r['cpu_s']} | {r['units_cpu_s']} | {r['machine_cpu_s']} | "
                  f"{r['others_cpu_s']} | {r['units']} | "
                  f"{r['units_handed_back']} | {r['cells']} | {r['kernel_check_s']} | "
                  f"{r['load']} |")
    print()
    print("Per configuration, the fastest of the rounds (the least disturbed by other jobs), "
          "and its speed-up over one unit:")
    print("| query | run | best wall s | speed-up | units span s | speed-up | other jobs' CPU s "
          "| load |")
    print("|---|---|---|---|---|---|---|---|")
    best: dict = {}
    for r in rows:
        if "run" in r and r["answer"] in ("proved", "unsat"):
            k = (r["query"], r["run"])
            if k not in best or r["wall_s"] < best[k]["wall_s"]:
                best[k] = r
    for (q, run), r in best.items():
        one = best.get((q, "one unit (no budget), 1 worker"))
        ratio = f"{one['wall_s'] / r['wall_s']:.2f}x" if one else "-"
        span = f"{one['units_span_s'] / r['units_span_s']:.2f}x" if one else "-"
        print(f"| {q} | {run} | {r['wall_s']} | {ratio} | {r['units_span_s']} | {span} | "
              f"{r['others_cpu_s']} | {r['load']} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
