"""Top-1 equivalence of an MNIST network and its pruned (or float16) twin on local regions:
``exactmax equiv A B --top1`` on the L-infinity ball of radius r around an image (clipped to
[0, 1]), one process per query, with its time and how it was decided.

    python benchmarks/top1.py [--mirror GITDIR] [--work DIR] [--net mnist-net_256x2]
        [--images 0,1,2,3,4] [--radius 1/100,1/50 | --local 15] [--prune 0.05 | --float16]
        [--verydiff GITDIR] [--seed 0] [--timeout 60] [--workers N] [--out results/top1.jsonl]

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

``--local K``: instead of balls, VeryDiff's local regions: K pixels of the image free over
[0, 1] (chosen at random, seeded by ``--seed`` and the image), the others fixed at the image's
values.  ``--verydiff GITDIR``: A and B are VeryDiff's own MNIST pair (``mnist_relu_3_100`` and
``mnist_relu_3_100_pruned5``: 784-100-100-10 ReLU, ReLU on the outputs too, and the same with 5
units of each hidden layer removed and the rest retrained or rounded; from a clone of
https://github.com/samysweb/VeryDiff-Release at a68d5bb, test/examples), and its two regions
``mnist_0_local_15`` and ``mnist_7_local_15`` are run first.
"""

from __future__ import annotations

import argparse
import json
import os
import random
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
VERYDIFF_REV = "a68d5bb"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirror", default=os.environ.get(MIRROR_ENV))
    ap.add_argument("--work", default="top1-work")
    ap.add_argument("--net", default="mnist-net_256x2")
    ap.add_argument("--images", default="0,1,2,3,4")
    region = ap.add_mutually_exclusive_group()
    region.add_argument("--radius", default="1/100,1/50")
    region.add_argument("--local", type=int, help="K pixels free over [0, 1], the rest fixed")
    ap.add_argument("--verydiff", help="a clone of VeryDiff-Release: its MNIST pair and regions")
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
    regions = []  # (label, box)
    if args.verydiff:
        vd = Mirror(args.verydiff, VERYDIFF_REV)
        paths = {}
        for key, name in (("a", "mnist_relu_3_100"), ("b", "mnist_relu_3_100_pruned5")):
            paths[key] = os.path.join(args.work, f"{name}.onnx")
            vd.extract(f"test/examples/nets/{name}.onnx", paths[key])
        a, b = load_model(paths["a"]), load_model(paths["b"])
        twin = "VeryDiff's mnist_relu_3_100_pruned5 (5 units per hidden layer removed)"
        for name in ("mnist_0_local_15", "mnist_7_local_15"):
            spec = os.path.join(args.work, f"{name}.vnnlib")
            vd.extract(f"test/examples/specs/{name}.vnnlib", spec)
            with open(spec) as f:  # it declares only X: an output, so the reader takes it
                text = f.read() + "\n(declare-const Y_0 Real)\n(assert (>= Y_0 0))\n"
            with open(spec + ".x.vnnlib", "w") as f:
                f.write(text)
            regions.append((name, read_property(spec + ".x.vnnlib").boxes[0]))
        net_name = "mnist_relu_3_100"
    else:
        a = load_model(onnx)
        if args.float16:
            b, k, n = float16(a)
            twin = f"every number rounded to float16 ({k} of {n} changed)"
        else:
            b, k, n = pruned(a, args.prune, args.seed)
            twin = f"{k} of {n} weights set to zero (seed {args.seed})"
        net_name = args.net
    print(f"{net_name}: {a.input_dim} inputs, widths {list(a.widths)}; twin: {twin}", flush=True)
    files = {"a": os.path.join(args.work, "a.json"), "b": os.path.join(args.work, "b.json")}
    for key, net in (("a", a), ("b", b)):
        with open(files[key], "w") as f:
            json.dump(model_to_json(net), f)
    for i in images:
        box = read_property(props[i]).boxes[0]
        centre = [(lo + hi) / 2 for lo, hi in zip(box.lower, box.upper)]
        if args.local:
            free = set(random.Random(args.seed * 1000 + i).sample(range(len(centre)), args.local))
            regions.append((f"image {i}, {args.local} pixels free", Box(
                tuple(ZERO if t in free else c for t, c in enumerate(centre)),
                tuple(ONE if t in free else c for t, c in enumerate(centre)))))
            continue
        for r in (parse_rational(v) for v in args.radius.split(",")):
            regions.append((f"image {i}, r = {q_str(r)}", Box(
                tuple(max(ZERO, c - r) for c in centre), tuple(min(ONE, c + r) for c in centre))))
    out = open(args.out, "a") if args.out else None
    print("| region | verdict | cells | search s | kernel s | wall s |\n"
          "|---|---|---|---|---|---|", flush=True)
    for n, (label, region) in enumerate(regions):
        dom = os.path.join(args.work, f"region_{n}.json")
        with open(dom, "w") as f:
            json.dump({"format": "exactmax/domain", "version": 1, **domain_to_json(region)}, f)
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
        row = {"net": net_name, "twin": twin, "region": label, "verdict": res["verdict"],
               "reason": res.get("reason"), "cells": st.get("leaves_checked"),
               "free_inputs": st.get("free_inputs"),
               "search_s": (st.get("search") or {}).get("time_s"),
               "kernel_s": st.get("kernel_check_s"), "wall_s": round(wall, 2)}
        print(f"| {label} | {row['verdict']} | {row['cells'] or ''} | {row['search_s'] or ''} | "
              f"{row['kernel_s'] or ''} | {wall:.1f} |", flush=True)
        if out:
            out.write(json.dumps(row) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
