"""Run ``exactmax check`` on every instance of a VNN-COMP category and print the answers.

    python benchmarks/vnncomp.py [DIR] [--timeout S] [--cert-dir DIR]

DIR (default vnncomp2022-test/ of $EXACTMAX_BENCH_DATA, else ../shared/data beside this
checkout; where to get it: docs/benchmarks.md, "Benchmark data") holds instances.csv
(onnx,vnnlib,timeout per line) and the files it names.  Each instance runs as its own
``exactmax check --json`` process with the instance's time limit (or --timeout), and the table
shows the answer, the wall time and the process's user CPU time (the load average at the start
is printed: other work on the machine stretches the first, hardly the second), the expected
answer where one is known, and how the answer
is backed: an unsat by a certificate the kernel checked, a sat by an exact counterexample that
``exactmax replay`` re-checks in a second process.  The limit bounds the search and the
construction of a certificate; the kernel's check of a finished certificate (and writing it)
is not interrupted, so an answer may come after the limit: the table says so, as VNN-COMP
would count it a timeout.

Expected answers: VNN-COMP's instances.csv carries none.  For the ``test`` category of 2022
they are known: the two ACAS Xu instances are network 1-6 (unsat) and 1-7 (sat) with property
3 (the category's README); the nano, tiny and small networks' outputs stay on the safe side of
their thresholds (y = relu(x/2) >= 0 > -1; the others' maxima on [-1, 1] are far below 100),
so they are unsat.  An EXPECTED column in instances.csv, if present, overrides this table.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import benchdata

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = benchdata.folder("vnncomp2022-test")
KNOWN = {("test_nano.onnx", "test_nano.vnnlib"): "unsat",
         ("test_tiny.onnx", "test_tiny.vnnlib"): "unsat",
         ("test_small.onnx", "test_small.vnnlib"): "unsat",
         ("test_sat.onnx", "test_prop.vnnlib"): "sat",
         ("test_unsat.onnx", "test_prop.vnnlib"): "unsat"}


def exactmax(*args) -> tuple[int, str, str, float]:
    """Run ``exactmax ARGS`` in a child process: (exit status, stdout, stderr, the child's
    user CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    r = subprocess.run([sys.executable, "-m", "exactmax", *args], capture_output=True,
                       text=True)
    user = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before
    return r.returncode, r.stdout, r.stderr, user


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", default=DEFAULT_DIR)
    ap.add_argument("--timeout", type=float, help="override every instance's time limit")
    ap.add_argument("--cert-dir", help="keep the certificates and counterexamples here")
    args = ap.parse_args()
    if args.dir == DEFAULT_DIR:
        benchdata.require("vnncomp2022-test", "instances.csv")
    rows = []
    with open(os.path.join(args.dir, "instances.csv")) as f:
        for line in csv.reader(f):
            if line and not line[0].startswith("#"):
                rows.append([c.strip() for c in line])
    out_dir = args.cert_dir or tempfile.mkdtemp(prefix="exactmax-vnncomp-")
    print(f"load average at the start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)\n")
    print("| instance | answer | wall (s) | user CPU (s) | limit (s) | expected | agrees | "
          "backed by |")
    print("|---|---|---:|---:|---:|---|---|---|")
    agree = answered = 0
    for n, row in enumerate(rows):
        net, prop, limit = row[0], row[1], float(row[2])
        limit = args.timeout or limit
        expected = row[3] if len(row) > 3 else KNOWN.get((net, prop), "?")
        cert = os.path.join(out_dir, f"{n}-cert.json")
        cex = os.path.join(out_dir, f"{n}-cex.txt")
        t0 = time.monotonic()
        code, stdout, stderr, user = exactmax("check", os.path.join(args.dir, net),
                                        os.path.join(args.dir, prop), "--timeout", str(limit),
                                        "--cert", cert, "--counterexample", cex, "--json")
        wall = time.monotonic() - t0
        try:
            res = json.loads(stdout)
            answer = res["verdict"]
        except (ValueError, KeyError):
            answer, res = f"error (exit {code}): {stderr.strip()[:80]}", {}
        backed = ""
        if answer == "unsat":
            c, o, _, _ = exactmax("check-cert", cert, "--json")
            backed = (f"certificate, {json.loads(o)['leaves']} cells, re-checked"
                      if c == 0 else "certificate REJECTED on re-check")
        elif answer == "sat":
            c, o, _, _ = exactmax("replay", os.path.join(args.dir, net),
                               os.path.join(args.dir, prop), cex, "--json")
            backed = "exact counterexample, replayed" if c == 0 else \
                "counterexample REJECTED on replay"
        elif answer == "unknown":
            backed = (res.get("reason") or "")[:70]
        answered += answer in ("sat", "unsat")
        ok = "yes" if answer == expected else ("-" if answer == "unknown" else "NO")
        if answer in ("sat", "unsat") and wall > limit:
            ok += f" (over the limit: {res.get('stats', {}).get('kernel_check_s', 0):.0f} s " \
                "the kernel's check, the rest search, construction and writing)"
        agree += answer == expected
        print(f"| {net} {prop} | {answer} | {wall:.2f} | {user:.2f} | {limit:g} | {expected} | "
              f"{ok} | "
              f"{backed} |", flush=True)
    print(f"\n{answered} of {len(rows)} answered, {agree} as expected "
          f"(certificates and counterexamples in {out_dir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
