"""The kernel's check of finished certificates, this tree against another commit's kernel, side
by side in one run: the time of ``exactmax check-cert`` (reading, hashing and the kernel's
check), best of several runs, per certificate and the ratio.

    python benchmarks/kernel_check.py [--against 3fb6e84] [--repeat 3] [--json out.json]

The certificates are written once, by this tree's producers, on the shapes users bring: random
Maxout networks with units of mixed ranks (1-4) against their compiled Transformers (a box
domain, a polyhedral domain, the merged construction), a monolithic split tree, a VNN-LIB
property, and an epsilon pair-property certificate of a network against a perturbed twin.  The
other commit's package comes from ``git archive``; each tree runs in its own process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

from eval import random_network

from exactmax.io.models import model_to_json, write_json_atomic
from exactmax.kernel.rational import Q

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")

TIMER = """
import contextlib, io, json, sys, time
from exactmax.cli import main
out = {}
for name, path, argv in json.loads(sys.argv[1]):
    best = None
    for _ in range(int(sys.argv[2])):
        sink = io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            code = main(argv)
        t = time.perf_counter() - t0
        best = t if best is None else min(best, t)
    out[name] = {"exit": code, "seconds": round(best, 4)}
print(json.dumps(out))
"""


def exactmax(*argv: str) -> None:
    subprocess.run([sys.executable, "-m", "exactmax", *argv], check=True,
                   stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=ROOT))


def certificates(tmp: str) -> list[tuple[str, str, list[str]]]:
    """(name, certificate path, check command) for every shape above, written by this tree."""
    rng = random.Random(18)
    net = random_network(rng, 4, 16, (1, 2, 3, 4), 4)
    doc = model_to_json(net) | {"domain": {"box": {"lower": ["-1"] * 4, "upper": ["1"] * 4}}}
    write_json_atomic(p := os.path.join(tmp, "net.json"), doc)
    poly = {"format": "exactmax/domain", "version": 1, "polyhedron": {
        "A": [["1", "1", "0", "0"], ["-1", "0", "0", "0"], ["0", "-1", "0", "0"],
              ["0", "0", "1", "0"], ["0", "0", "-1", "0"], ["0", "0", "0", "1"],
              ["0", "0", "0", "-1"]],
        "b": ["1", "1", "1", "1", "1", "1", "1"]}}
    write_json_atomic(dom := os.path.join(tmp, "poly.json"), poly)
    out = []
    for name, extra, domain in (("mixed ranks, box, layerwise", [], None),
                                ("mixed ranks, polyhedron, layerwise", [], dom),
                                ("mixed ranks, box, merged", ["--merged"], None)):
        tf, cert = os.path.join(tmp, f"{len(out)}.tf.json"), os.path.join(tmp, f"{len(out)}.json")
        d = ["--domain", domain] if domain else []
        exactmax("compile", p, "-o", tf, *extra, *d)
        exactmax("verify", p, "--transformer", tf, "--no-search", "--cert", cert, *d)
        out.append((name, cert, ["check-cert", cert]))
    small = random_network(rng, 2, 4, (1, 2, 3), 2)
    doc = model_to_json(small) | {"domain": {"box": {"lower": ["-1"] * 2, "upper": ["1"] * 2}}}
    write_json_atomic(s := os.path.join(tmp, "small.json"), doc)
    exactmax("compile", s, "-o", (stf := os.path.join(tmp, "small.tf.json")))
    exactmax("verify", s, "--transformer", stf, "--no-search", "--strategy", "monolithic",
             "--cert", (c := os.path.join(tmp, "mono.json")))
    out.append(("split tree, monolithic", c, ["check-cert", c]))
    exactmax("check", os.path.join(EX, "small_relu.onnx"), os.path.join(EX,
             "small_relu_unsat.vnnlib"), "--workers", "1", "--cert", (c := os.path.join(tmp,
                                                                                    "prop.json")))
    out.append(("VNN-LIB property", c, ["check-cert", c]))
    twin = json.load(open(os.path.join(EX, "maxout_d3_w4_r3.json")))
    piece = twin["layers"][0]["units"][0]["pieces"][0]
    piece["b"] = str(Q(piece["b"]) + Q(1, 1000))
    write_json_atomic(t := os.path.join(tmp, "twin.json"), twin)
    exactmax("equiv", os.path.join(EX, "maxout_d3_w4_r3.json"), t, "--epsilon", "1/10",
             "--workers", "1", "--cert", (c := os.path.join(tmp, "pair.json")))
    out.append(("pair property, epsilon", c, ["check-cert", c]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", default="3fb6e84", help="the other commit (default 3fb6e84)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp()
    old = os.path.join(tmp, "old")
    os.makedirs(old)
    archive = subprocess.run(["git", "-C", ROOT, "archive", args.against, "exactmax"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", old], input=archive, check=True)
    certs = certificates(tmp)
    times = {}
    for tree, path in ((args.against, old), ("this tree", ROOT)):
        r = subprocess.run([sys.executable, "-c", TIMER, json.dumps(certs), str(args.repeat)],
                           check=True, capture_output=True, text=True, cwd=tmp,
                           env=dict(os.environ, PYTHONPATH=path))
        times[tree] = json.loads(r.stdout)
    print(f"load {os.getloadavg()[0]:.2f}; best of {args.repeat}; check-cert, in-process")
    print(f"| certificate | {args.against} | this tree | ratio | exit (both) |")
    print("|---|---:|---:|---:|---|")
    rows = []
    for name, _, _ in certs:
        a, b = times[args.against][name], times["this tree"][name]
        rows.append({"certificate": name, "before_s": a["seconds"], "after_s": b["seconds"],
                     "exit": [a["exit"], b["exit"]]})
        print(f"| {name} | {a['seconds']:.3f} s | {b['seconds']:.3f} s | "
              f"{b['seconds'] / a['seconds']:.2f} | {a['exit']}, {b['exit']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["exit"] == [0, 0] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
