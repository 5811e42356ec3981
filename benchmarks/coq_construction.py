"""The construction export (#19) against the layerwise export, on the same networks.

    python benchmarks/coq_construction.py [--json results.json] [--md results.md] [--quick]
                                          [--layerwise-timeout S] [--no-terms] [--no-layerwise]

For random Maxout networks (benchmarks/eval.py's generator: weights p/q with |p| <= 8,
q <= 16, every unit of rank k, box [-1, 1]^d) and their compiled hardmax Transformers:

- construction: ``export_construction`` (the file proves tf = construct net C, shaped and
  zgates_ok by computation and concludes from ConstructionSound.construct_zsound, proved once),
  the models written as terms and, ``packed``, as arrays of machine integers;
- layerwise: ``verify_equal`` with the layerwise strategy, then ``export_coq`` of its
  certificate (split trees per layer, composed by Layerwise.layerwise_sound).

Reported per network: parameters of the network, .v size, the time to produce the file, coqc's
wall and user time and peak memory (getrusage of a fresh child), the packed construction's
coqc user time per 1,000 parameters (constant when the time grows linearly), and the ratios
of the layerwise coqc user and wall times to the packed construction's (user time: the wall
time depends on the machine's load).  The library must be built: make -C proofs.
"""

from __future__ import annotations

from exactmax.construct.size import parameter_count
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
from exactmax.export.coq_construction import export_construction
from exactmax.kernel.polyhedron import Box
from exactmax.kernel.rational import Q
from exactmax.prove.verify import VerifyOptions, verify_equal

PROOFS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "proofs")

MEASURE = ("import resource, subprocess, sys, time\n"
           "t = time.perf_counter(); r = subprocess.run(sys.argv[2:], capture_output=True, "
           "timeout=float(sys.argv[1]))\n"
           "t = time.perf_counter() - t\n"
           "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
           "print(r.returncode, t, u.ru_utime, u.ru_maxrss)\n")


def coqc(path: str, timeout: float = 3600) -> dict:
    """coqc on path: accepted, wall and user seconds, peak MB."""
    try:
        out = subprocess.run([sys.executable, "-c", MEASURE, str(timeout), "coqc", "-Q", PROOFS,
                              "ExactMax", "-no-glob", os.path.basename(path)],
                             cwd=os.path.dirname(path), capture_output=True, text=True,
                             check=True).stdout.split()
    except subprocess.CalledProcessError:
        return {"coq_ok": False, "coqc_s": None}
    return {"coq_ok": out[0] == "0", "coqc_s": round(float(out[1]), 1),
            "coqc_user_s": round(float(out[2]), 1), "coqc_mb": round(int(out[3]) / 1024)}


def construction(net, box, name, folder, packed=False) -> dict:
    t0 = time.perf_counter()
    tf = compile_transformer(net, box).transformer
    text = export_construction(net, tf, box, name, packed=packed)
    row = {"produce_s": round(time.perf_counter() - t0, 2), "v_kb": round(len(text) / 1024)}
    path = os.path.join(folder, f"{name}.v")
    with open(path, "w") as f:
        f.write(text)
    row.update(coqc(path))
    return row


def layerwise(net, box, name, folder, timeout) -> dict:
    tf = compile_transformer(net, box).transformer
    t0 = time.perf_counter()
    v = verify_equal(net, tf, box, VerifyOptions(timeout_s=timeout, strategy="layerwise",
                                                 max_leaves=10 ** 6))
    row = {"verdict": v.verdict, "produce_s": round(time.perf_counter() - t0, 2)}
    if v.trust != "kernel-checked":
        return row
    text = export_coq(net, tf, box, v.certificate, name)
    row["v_kb"] = round(len(text) / 1024)
    path = os.path.join(folder, f"{name}.v")
    with open(path, "w") as f:
        f.write(text)
    row.update(coqc(path, timeout))
    return row


def cells(r: dict) -> str:
    if r.get("verdict") == "not run":
        return "not run | | | "
    if not r.get("coq_ok"):
        return f"{r.get('verdict', 'rejected')} after {r['produce_s']} s | | | "
    return (f"{r['v_kb']} KB | {r['produce_s']} s | {r['coqc_s']} s ({r['coqc_user_s']} s user) | "
            f"{r['coqc_mb']} MB")


HEADER = ("| d | N | D | k | parameters | construction (terms): .v | produce | coqc | peak "
          "| construction (packed): .v | produce | coqc | peak | packed: user s per 1,000 "
          "parameters | layerwise: .v | produce | coqc | peak | layerwise / packed: user "
          "| wall |\n|---:|---:|---:|---:|---:" + "|---:" * 8 + "|---:" + "|---:" * 4
          + "|---:|---:|")


def _ratio(a: dict, b: dict, key: str):
    if a.get("coq_ok") and b.get("coq_ok") and b.get(key):
        return round(a[key] / b[key], 1)
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--md", metavar="FILE", help="also write the table, with the command and "
                    "the machine, as markdown")
    ap.add_argument("--quick", action="store_true", help="the smallest network only")
    ap.add_argument("--layerwise-timeout", type=float, default=1800, metavar="S",
                    help="give the layerwise certificate and its coqc S seconds each")
    ap.add_argument("--no-layerwise", action="store_true")
    ap.add_argument("--no-terms", action="store_true", help="the packed construction only")
    args = ap.parse_args(argv)
    if not os.path.isfile(os.path.join(PROOFS, "ConstructionSound.vo")):
        sys.exit("build the Coq library first: make -C proofs")
    # (d, units per layer, depth, rank): three sizes for the growth, then the goal of #19
    sizes = [(16, 8, 4, 4), (16, 16, 8, 4), (16, 32, 8, 4), (16, 32, 16, 4)]
    if args.quick:
        sizes = sizes[:1]
    rows, lines = [], [HEADER]
    print(HEADER, flush=True)
    with tempfile.TemporaryDirectory() as folder:
        for d, N, D, k in sizes:
            net = random_network(random.Random(1000 * N + D), d, N, k, D)
            box = Box((Q(-1),) * d, (Q(1),) * d)
            c = ({"verdict": "not run", "produce_s": 0} if args.no_terms else
                 construction(net, box, f"Con_{d}_{N}_{D}_{k}", folder))
            p = construction(net, box, f"Pk_{d}_{N}_{D}_{k}", folder, packed=True)
            lw = ({"verdict": "not run", "produce_s": 0} if args.no_layerwise else
                  layerwise(net, box, f"Lw_{d}_{N}_{D}_{k}", folder, args.layerwise_timeout))
            ratio, wall = _ratio(lw, p, "coqc_user_s"), _ratio(lw, p, "coqc_s")
            per = (round(1000 * p["coqc_user_s"] / parameter_count(net), 3)
                   if p.get("coq_ok") else None)
            row = {"d": d, "N": N, "D": D, "k": k, "parameters": parameter_count(net),
                   "construction": c, "packed": p, "layerwise": lw, "ratio": ratio,
                   "ratio_wall": wall, "packed_user_s_per_1000": per}
            rows.append(row)
            line = (f"| {d} | {N} | {D} | {k} | {parameter_count(net)} | {cells(c)} | "
                    f"{cells(p)} | {per if per is not None else '-'} | {cells(lw)} | "
                    f"{ratio if ratio else '-'} | {wall if wall else '-'} |")
            lines.append(line)
            print(line, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.md:
        import platform
        coq = subprocess.run(["coqc", "--print-version"], capture_output=True,
                             text=True).stdout.strip()
        with open(args.md, "w") as f:
            f.write(f"`python benchmarks/coq_construction.py {' '.join(argv or sys.argv[1:])}`"
                    f"  \n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, coqc {coq}, "
                    f"Python {platform.python_version()}, {os.cpu_count()} cores (shared with "
                    f"other work: compare user times)\n\n" + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
