"""export-onnx measured: the exported graphs' error against the kernel's exact evaluation in
onnxruntime (float64 and float32; a random Maxout network and its compiled Transformer), and the
time to export a large network.

    python benchmarks/export_onnx.py [--points 200] [--width 256] [--seed 7]

Error: max over points and outputs of |y_onnx - y_exact| / max(1, |y_exact|), at dyadic points
(k / 1024 in [-1, 1], exact in both float types)."""

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
from fractions import Fraction

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests"))
from test_export_onnx import maxout  # noqa: E402

from exactmax.io import load_model, model_to_json  # noqa: E402
from exactmax.kernel.maxout import MaxoutNetwork, evaluate_maxout  # noqa: E402
from exactmax.kernel.polyhedron import Box  # noqa: E402
from exactmax.kernel.rational import Q  # noqa: E402


def _exactmax(*args) -> tuple[float, str]:
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "exactmax", *map(str, args)], capture_output=True,
                       text=True, check=True)
    return time.monotonic() - t, r.stdout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=200)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp()
    rng = random.Random(args.seed)
    net = maxout(rng, d=3, widths=(6, 5, 4), ranks=[[3] * 6, [3] * 5, [2] * 4])
    net = MaxoutNetwork(3, net.layers, net.output, Box((Q(-1),) * 3, (Q(1),) * 3))
    m, t = os.path.join(tmp, "m.json"), os.path.join(tmp, "t.json")
    with open(m, "w") as f:
        json.dump(model_to_json(net), f)
    _exactmax("compile", m, "-o", t)
    tf = load_model(t)
    pts = [[Q(rng.randint(-1024, 1024), 1024) for _ in range(3)] for _ in range(args.points)]
    want = np.array([[float(Fraction(int(v.p), int(v.q))) for v in evaluate_maxout(net, p)]
                     for p in pts])
    print(f"Maxout network d=3, widths 6, 5, 4 (ranks 3, 3, 2), rational weights; its compiled "
          f"Transformer: {len(tf.sublayers)} sub-layers, {tf.n_tokens} tokens, d_model "
          f"{tf.d_model}; {args.points} points")
    print(f"{'model':12} {'dtype':8} {'max rel. error':>15} {'weights rounded':>16}")
    for name, src in (("maxout", m), ("transformer", t)):
        for dtype, npt in (("float64", np.float64), ("float32", np.float32)):
            out = os.path.join(tmp, f"{name}.{dtype}.onnx")
            rep = json.loads(_exactmax("export-onnx", src, "-o", out, "--dtype", dtype,
                                       "--json")[1])
            x = np.array([[int(v.p) / int(v.q) for v in p] for p in pts], dtype=npt)
            y = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(
                None, {"x": x})[0]
            err = float(np.max(np.abs(y - want) / np.maximum(1.0, np.abs(want))))
            print(f"{name:12} {dtype:8} {err:15.2e} {rep['weights_rounded']:>7} of "
                  f"{rep['weights']}")
    big = maxout(random.Random(args.seed + 1), d=64, widths=(args.width,) * 4,
                 ranks=[[4] * args.width] * 4)
    b = os.path.join(tmp, "big.json")
    with open(b, "w") as f:
        json.dump(model_to_json(big), f)
    for dtype in ("float64", "float32"):
        out = os.path.join(tmp, f"big.{dtype}.onnx")
        s, _ = _exactmax("export-onnx", b, "-o", out, "--dtype", dtype)
        print(f"export of {parameter_count(big):,} weights (d=64, 4 layers of {args.width} "
              f"rank-4 units) in {dtype}: {s:.1f} s, {os.path.getsize(out) / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
