"""How long Coq takes to check exported certificates, against their number of leaves.

    python benchmarks/coq.py [--json results.json] [--quick]

Three tables, each certificate exported with ``export-coq`` and compiled with
``coqc -no-glob`` against the library in proofs/ (which must be built: ``make -C proofs``):

1. the examples, layerwise (verify's default) and monolithic certificates;
2. monolithic certificates (one split tree over the whole domain) of random Maxout networks
   (as in ``benchmarks/eval.py``: rank 3, box [-1, 1]^d) of 10 units in one layer, and smaller
   ones, against their compiled hardmax Transformers: the curve against the number of leaves;
3. layerwise certificates of random networks of input dimension 4 and growing width and depth
   (the generator of ``benchmarks/verify.py``);
4. ``equiv``'s default certificates (#35): the layer correspondence of a random 6 x 50 Maxout
   network of rank 2 (4 inputs; ``benchmarks/equiv.py``'s generator) against its rescaled,
   permuted twin with a unit split, and ``--epsilon`` pair certificates (``--quick``: a 3 x 10
   network): a 2 x 8 network against itself with one weight moved by 1/100, on [-1, 1]^4, E
   = 1/2 (the gap bound is proved cell by cell), and examples/tent.json against
   examples/relu_triangle.json, E = 4 (its VNN-COMP-free smallest case).  Each through the
   command line: ``exactmax equiv --cert``, ``exactmax export-coq``, then coqc.

Reported: leaves, certificate JSON size, .v size, exactmax's time to produce the certificate,
coqc's wall time and peak memory (maximum resident set size of the coqc process, from
getrusage in a fresh parent process).
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
from exactmax.io import load_model
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


EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def measure(net, domain, strategy: str, name: str, folder: str) -> dict:
    tf = compile_transformer(net, domain).transformer
    t0 = time.perf_counter()
    v = verify_equal(net, tf, domain, VerifyOptions(timeout_s=600, strategy=strategy,
                                                    max_leaves=10 ** 6))
    row = {"verdict": v.verdict, "leaves": v.stats.get("leaves_checked"),
           "produce_s": round(time.perf_counter() - t0, 2)}
    if v.trust != "kernel-checked":
        return row
    cert = json.dumps(certificate_to_json(net, tf, domain, v.certificate, {}))
    path = os.path.join(folder, f"{name}.v")
    text = export_coq(net, tf, domain, v.certificate, name)
    with open(path, "w") as f:
        f.write(text)
    ok, secs, mb = coqc(path)
    row.update(json_kb=round(len(cert) / 1024), v_kb=round(len(text) / 1024), coq_ok=ok,
               coqc_s=round(secs, 1), coqc_mb=round(mb))
    return row


def run(d: int, N: int, D: int, seed: int, folder: str, strategy: str = "monolithic") -> dict:
    rng = random.Random(seed)
    net = random_network(rng, d, N, 3, D)
    box = Box((Q(-1),) * d, (Q(1),) * d)
    row = {"d": d, "N": N, "D": D, "strategy": strategy}
    row.update(measure(net, box, strategy, f"Bench_{strategy}_{d}_{N}_{D}", folder))
    return row


def cells(r: dict) -> str:
    if "coqc_s" not in r:
        return f"{r['verdict']} | | | {r['produce_s']} s | | "
    return (f"{r['leaves']} | {r['json_kb']} KB | {r['v_kb']} KB | {r['produce_s']} s | "
            f"{r['coqc_s']} s{'' if r['coq_ok'] else ' (REJECTED)'} | {r['coqc_mb']} MB")


def equiv_row(name: str, a_path: str, b_path: str, extra: list, folder: str) -> dict:
    """``exactmax equiv A B [extra] --cert`` (timed), ``export-coq`` of its certificate, coqc."""
    cert, vfile = os.path.join(folder, f"{name}.json"), os.path.join(folder, f"{name}.v")
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "exactmax", "equiv", a_path, b_path, *extra,
                        "--cert", cert, "--json", "--timeout", "600"],
                       capture_output=True, text=True)
    produce = time.perf_counter() - t0
    out = json.loads(r.stdout)
    row = {"name": name, "verdict": out["verdict"], "kind": out.get("certificate_kind"),
           "leaves": out["stats"].get("leaves_checked", out["stats"].get("units", "-")),
           "produce_s": round(produce, 2)}
    if out["verdict"] != "proved":
        return row
    subprocess.run([sys.executable, "-m", "exactmax", "export-coq", cert, "-o", vfile],
                   capture_output=True, check=True)
    ok, secs, mb = coqc(vfile)
    row.update(json_kb=round(os.path.getsize(cert) / 1024),
               v_kb=round(os.path.getsize(vfile) / 1024), coq_ok=ok, coqc_s=round(secs, 1),
               coqc_mb=round(mb))
    return row


def equiv_rows(quick: bool, folder: str) -> list[dict]:
    from equiv import network, twin

    from exactmax.io.models import model_to_json

    def save(net, name: str) -> str:
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            json.dump(model_to_json(net), f)
        return path

    rng = random.Random(35)
    width, depth = (10, 3) if quick else (50, 6)
    net = network(rng, width, depth, 2)
    a, b = save(net, "corr_a.json"), save(twin(rng, net), "corr_b.json")
    box = ["--box", "-1,1"]
    rows = [equiv_row(f"correspondence_{depth}x{width}", a, b, box, folder)]
    small = network(random.Random(8), 8, 2, 2)
    moved = model_to_json(small)
    w = moved["layers"][0]["units"][0]["pieces"][0]["w"]
    w[0] = str(Q(w[0]) + Q(1, 100))
    moved_path = os.path.join(folder, "moved.json")
    with open(moved_path, "w") as f:
        json.dump(moved, f)
    rows.append(equiv_row("epsilon_2x8", save(small, "small.json"), moved_path,
                          ["--epsilon", "1/2", *box], folder))
    rows.append(equiv_row("epsilon_tent", os.path.join(EXAMPLES, "tent.json"),
                          os.path.join(EXAMPLES, "relu_triangle.json"), ["--epsilon", "4"],
                          folder))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--quick", action="store_true", help="the two smallest networks only")
    args = ap.parse_args(argv)
    if not os.path.isfile(os.path.join(PROOFS, "Export.vo")):
        sys.exit("build the Coq library first: make -C proofs")
    sizes = [(2, 2, 1), (2, 5, 2), (2, 10, 1), (3, 10, 1), (4, 10, 1)]
    layerwise = [(4, 2), (8, 4), (16, 4), (16, 8), (32, 4)]
    examples = ["tent.json", "relu_triangle.json", "maxout_d3_w4_r3.json"]
    if args.quick:
        sizes, layerwise, examples = sizes[:2], layerwise[:2], examples[:1]
    rows = []
    head = "| leaves | certificate JSON | .v file | produce | coqc | coqc peak memory |"
    rule = "|---:|---:|---:|---:|---:|---:|"
    with tempfile.TemporaryDirectory() as folder:
        print("| example | certificate " + head + "\n|---|---" + rule)
        for name in examples:
            net = load_model(os.path.join(EXAMPLES, name))
            for strategy in ("layerwise", "monolithic"):
                r = {"example": name, "strategy": strategy}
                r.update(measure(net, net.domain, strategy,
                                 f"Ex_{strategy}_{name.split('.')[0]}", folder))
                rows.append(r)
                print(f"| {name} | {strategy} | {cells(r)} |", flush=True)
        print("\nmonolithic, random networks\n\n| d | units | depth " + head
              + "\n|---:|---:|---:" + rule)
        for d, N, D in sizes:
            r = run(d, N, D, 7 + N + D, folder)
            rows.append(r)
            print(f"| {d} | {N} | {D} | {cells(r)} |", flush=True)
        print("\nlayerwise, random networks (d = 4)\n\n| width N | depth D " + head
              + "\n|---:|---:" + rule)
        for N, D in layerwise:
            r = run(4, N, D, 1000 * N + D, folder, "layerwise")
            rows.append(r)
            print(f"| {N} | {D} | {cells(r)} |", flush=True)
        print("\nequiv's default certificates\n\n| query | certificate | leaves or units | "
              "certificate JSON | .v file | produce | coqc | coqc peak memory |\n"
              "|---|---|---:|---:|---:|---:|---:|---:|")
        for r in equiv_rows(args.quick, folder):
            rows.append(r)
            print(f"| {r['name']} | {r['kind']} | {r['leaves']} | {r.get('json_kb', '-')} KB | "
                  f"{r.get('v_kb', '-')} KB | {r['produce_s']} s | {r.get('coqc_s', '-')} s "
                  f"({'accepted' if r.get('coq_ok') else 'REJECTED'}) | {r.get('coqc_mb', '-')} "
                  f"MB |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
