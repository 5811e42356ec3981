"""How long Coq takes to check exported certificates, against their number of leaves.

    python benchmarks/coq.py [--json results.json] [--quick]

Random Maxout networks (as in ``benchmarks/eval.py``: rank 3, box [-1, 1]^d) of 10 units in one
layer, and smaller ones, against their compiled hardmax Transformers; each is proved with the
monolithic strategy (one split tree over the whole domain), exported with ``export-coq`` and
compiled with ``coqc -no-glob`` against the library in proofs/ (which must be built:
``make -C proofs``).  Reported: leaves, certificate JSON size, .v size, exactmax's time to
produce the certificate, coqc's wall time and peak memory (maximum resident set size of the
coqc process, from getrusage in a fresh parent process).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from eval import random_network
from exactmax.construct.transformer import compile_transformer
from exactmax.export.coq import export_coq
from exactmax.io.certificates import certificate_to_json
from exactmax.kernel.polyhedron import Box
from exactmax.kernel.rational import Q
from exactmax.prove.verify import VerifyOptions, verify_equal

PROOFS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "proofs")

MEASURE = ("import resource, subprocess, sys, time\n"
           "t = time.perf_counter(); r = subprocess.run(sys.argv[1:], capture_output=True)\n"
           "t = time.perf_counter() - t\n"
           "print(r.returncode, t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")


def coqc(path: str) -> tuple[bool, float, float]:
    """(accepted, seconds, peak MB) of coqc on path."""
    out = subprocess.run([sys.executable, "-c", MEASURE, "coqc", "-Q", PROOFS, "ExactMax",
                          "-no-glob", os.path.basename(path)], cwd=os.path.dirname(path),
                         capture_output=True, text=True, check=True).stdout.split()
    return out[0] == "0", float(out[1]), int(out[2]) / 1024


def run(d: int, N: int, D: int, seed: int, folder: str) -> dict:
    rng = random.Random(seed)
    net = random_network(rng, d, N, 3, D)
    box = Box((Q(-1),) * d, (Q(1),) * d)
    tf = compile_transformer(net, box).transformer
    t0 = time.perf_counter()
    v = verify_equal(net, tf, box, VerifyOptions(timeout_s=600, strategy="monolithic",
                                                 max_leaves=10 ** 6))
    produce = time.perf_counter() - t0
    row = {"d": d, "N": N, "D": D, "verdict": v.verdict, "leaves": v.stats.get("leaves_checked"),
           "produce_s": round(produce, 1)}
    if v.trust != "kernel-checked":
        return row
    cert = json.dumps(certificate_to_json(net, tf, box, v.certificate, {}))
    path = os.path.join(folder, f"Bench_{d}_{N}_{D}.v")
    text = export_coq(net, tf, box, v.certificate, os.path.basename(path)[:-2])
    with open(path, "w") as f:
        f.write(text)
    ok, secs, mb = coqc(path)
    row.update(json_kb=round(len(cert) / 1024), v_kb=round(len(text) / 1024), coq_ok=ok,
               coqc_s=round(secs, 1), coqc_mb=round(mb))
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--quick", action="store_true", help="the two smallest networks only")
    args = ap.parse_args(argv)
    if not os.path.isfile(os.path.join(PROOFS, "Export.vo")):
        sys.exit("build the Coq library first: make -C proofs")
    sizes = [(2, 2, 1), (2, 5, 2), (2, 10, 1), (3, 10, 1), (4, 10, 1)]
    if args.quick:
        sizes = sizes[:2]
    rows = []
    print("| d | units | depth | leaves | certificate JSON | .v file | produce | coqc | coqc peak memory |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for d, N, D in sizes:
            r = run(d, N, D, 7 + N + D, folder)
            rows.append(r)
            if "coqc_s" in r:
                print(f"| {d} | {N} | {D} | {r['leaves']} | {r['json_kb']} KB | {r['v_kb']} KB | "
                      f"{r['produce_s']} s | {r['coqc_s']} s{'' if r['coq_ok'] else ' (REJECTED)'} | "
                      f"{r['coqc_mb']} MB |", flush=True)
            else:
                print(f"| {d} | {N} | {D} | {r['verdict']} | | | {r['produce_s']} s | | |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
