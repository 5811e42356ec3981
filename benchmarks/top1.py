"""Top-1 equivalence of an MNIST network and its pruned (or float16) twin on local regions:
``exactmax equiv A B --top1`` on the L-infinity ball of radius r around an image (clipped to
[0, 1]), one process per query, with its time and how it was decided.

    python benchmarks/top1.py [--mirror GITDIR] [--work DIR] [--net mnist-net_256x2]
        [--images 0,1,2,3,4] [--radius 1/100,1/50] [--prune 0.05 | --float16] [--seed 0]
        [--timeout 60] [--workers N] [--out results/top1.jsonl]

The network and the images are VNN-COMP 2022's public ``mnist_fc`` benchmark
(https://github.com/ChristopherBrix/vnncomp2022_benchmarks, commit 324ce34): ``NET.onnx``
(784 inputs, fully connected ReLU layers, 10 classes) and, per image i, the centre of the
input box of ``prop_i_0.03.vnnlib`` (the image itself, before VNN-COMP's own radius).  They are
extracted from a clone of that repository (``--mirror``, bare or not; default
$EXACTMAX_VNNCOMP_GIT) into ``--work`` (default ./top1-work), gunzipped; files already there
are kept.  A is exactmax's import of the network; B is A with a seeded ``--prune`` fraction of
all weights (biases kept) set to zero (``epsilon.pruned``), or with every number rounded to
float16 (``--float16``).  Per image and radius: the verdict (proved: the two classify every
point of the ball alike, ties included; refuted: an exact point where they do not), the wall
time of the process (start-up and the float search included), the cells, the search's time
and the kernel's.  One JSON line per query to ``--out``; a table on standard output.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from epsilon import float16, pruned  # noqa: E402
from onnx_lowering import MIRROR_ENV, Mirror  # noqa: E402

from exactmax.io.models import domain_to_json, model_to_json  # noqa: E402
from exactmax.io.numbers import parse_rational, q_str  # noqa: E402
from exactmax.kernel.polyhedron import Box  # noqa: E402
from exactmax.kernel.rational import ONE, ZERO  # noqa: E402

REV = "324ce34"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirror", default=os.environ.get(MIRROR_ENV))
    ap.add_argument("--work", default="top1-work")
    ap.add_argument("--net", default="mnist-net_256x2")
    ap.add_argument("--images", default="0,1,2,3,4")
    ap.add_argument("--radius", default="1/100,1/50")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--prune", type=float, default=0.05)
    g.add_argument("--float16", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--workers", type=int)
    ap.add_argument("--out")
    args = ap.parse_args()
    from exactmax.io import load_model
    from exactmax.io.vnnlib2 import read_property

    mirror = Mirror(args.mirror, REV)
    base = "benchmarks/mnist_fc"
    onnx = os.path.join(args.work, f"{args.net}.onnx")
    mirror.extract(f"{base}/onnx/{args.net}.onnx.gz", onnx)
    images = [int(i) for i in args.images.split(",")]
    props = {}
    for i in images:
        props[i] = os.path.join(args.work, f"prop_{i}_0.03.vnnlib")
        mirror.extract(f"{base}/vnnlib/prop_{i}_0.03.vnnlib.gz", props[i])
    a = load_model(onnx)
    if args.float16:
        b, k, n = float16(a)
        twin = f"every number rounded to float16 ({k} of {n} changed)"
    else:
        b, k, n = pruned(a, args.prune, args.seed)
        twin = f"{k} of {n} weights set to zero (seed {args.seed})"
    print(f"{args.net}: {a.input_dim} inputs, widths {list(a.widths)}; twin: {twin}", flush=True)
    files = {"a": os.path.join(args.work, "a.json"), "b": os.path.join(args.work, "b.json")}
    for key, net in (("a", a), ("b", b)):
        with open(files[key], "w") as f:
            json.dump(model_to_json(net), f)
    out = open(args.out, "a") if args.out else None
    print("| image | radius | verdict | cells | search s | kernel s | wall s |\n"
          "|---|---|---|---|---|---|---|", flush=True)
    for i in images:
        box = read_property(props[i]).boxes[0]
        centre = [(lo + hi) / 2 for lo, hi in zip(box.lower, box.upper)]
        for r in (parse_rational(v) for v in args.radius.split(",")):
            ball = Box(tuple(max(ZERO, c - r) for c in centre),
                       tuple(min(ONE, c + r) for c in centre))
            dom = os.path.join(args.work, f"ball_{i}.json")
            with open(dom, "w") as f:
                json.dump({"format": "exactmax/domain", "version": 1, **domain_to_json(ball)}, f)
            cmd = [sys.executable, "-m", "exactmax", "equiv", files["a"], files["b"], "--domain",
                   dom, "--top1", "--json", "--timeout", str(args.timeout)]
            if args.workers:
                cmd += ["--workers", str(args.workers)]
            t0 = time.monotonic()
            p = subprocess.run(cmd, capture_output=True, text=True)
            wall = time.monotonic() - t0
            try:
                res = json.loads(p.stdout)
            except json.JSONDecodeError:
                res = {"verdict": "error", "reason": p.stderr[-500:], "stats": {}}
            st = res.get("stats") or {}
            row = {"net": args.net, "twin": twin, "image": i, "radius": q_str(r),
                   "verdict": res["verdict"], "reason": res.get("reason"),
                   "cells": st.get("leaves_checked"),
                   "search_s": (st.get("search") or {}).get("time_s"),
                   "kernel_s": st.get("kernel_check_s"), "wall_s": round(wall, 2)}
            print(f"| {i} | {q_str(r)} | {row['verdict']} | {row['cells'] or ''} | "
                  f"{row['search_s'] or ''} | {row['kernel_s'] or ''} | {wall:.1f} |", flush=True)
            if out:
                out.write(json.dumps(row) + "\n")
                out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
