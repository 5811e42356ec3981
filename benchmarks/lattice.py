"""Lattice networks written in ReLUs (#34): lifted to two Maxout layers, proved equal, decided.

    python benchmarks/lattice.py [--dims 2,3,5] [--pieces 8,16,32,64] [--groups G] [--props 3]
                                 [--encoding 2|4] [--seed 0] [--timeout 60] [--no-lift-too]
                                 [--work DIR] [--out results/lattice.json]

Networks.  For each input dimension d and number n of affine pieces: n affine maps of x with
seeded weights in multiples of 1/8 (exact in float32), G groups (default n/4, at least 2) of
n/2 pieces each drawn at random, and the network y = max over groups of min over the group's
pieces, written as an ONNX ReLU network the way lattice networks are (tllverifybench): a
linear layer computing the n maps, a selection matrix, then trees of min (then of max) where
each level is a MatMul/Add, a Relu and a MatMul/Add: encoding 4 (default, as tllverifybench),
min(a, b) = ((a + b) - |a - b|) / 2 with four ReLUs; encoding 2, min(a, b) = a - ReLU(a - b)
with a carried by ReLU(a) - ReLU(-a).  Properties (VNN-LIB): the box [-2, 2]^d and, in turn, y >= hi + 2%,
y <= lo - 2% (lo, hi: the least and largest y on 400 seeded points of the box, 2% of hi - lo:
mostly unsat, proved near the extremes) and y >= (lo + hi)/2 (sat).

Per network, each command in its own process, wall time: ``exactmax import`` (ONNX -> JSON),
``exactmax lift --cert`` (the kernel's normal forms included), ``exactmax check-cert`` of the
lift certificate; per property ``exactmax check NET.onnx PROP`` (it lifts by default), with
``--no-lift-too`` also ``exactmax check --no-lift`` (the ReLU network as given), each with
``--timeout``.  Every sat answer is replayed (``exactmax replay``), every unsat answer's
certificate re-checked (``exactmax check-cert``).  Not run by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

import numpy as np


def _maps(rng: random.Random, d: int, n: int):
    W = np.array([[rng.randint(-16, 16) / 8 for _ in range(d)] for _ in range(n)])
    b = np.array([rng.randint(-16, 16) / 8 for _ in range(n)])
    return W, b


def _relu_layers(values: int, groups: list[list[int]], op: str, encoding: int):
    """One level of pairwise ``op`` over each group of value indices: (pre-activation matrix
    over the values, output matrix over the ReLU units, the new groups)."""
    pre, post, new_groups, out = [], [], [], 0
    for g in groups:
        ng = []
        for k in range(0, len(g) - 1, 2):
            a, b = g[k], g[k + 1]
            rows = []
            ea, eb = np.eye(values)[a], np.eye(values)[b]
            if encoding == 4:
                rows = [ea + eb, -ea - eb, ea - eb, eb - ea]
                s = -0.5 if op == "min" else 0.5
                coef = [0.5, -0.5, s, s]
            else:
                keep = ea if op == "min" else eb
                rows = [keep, -keep, ea - eb]
                coef = [1.0, -1.0, -1.0 if op == "min" else 1.0]
            base = len(pre)
            pre += rows
            post.append({base + i: c for i, c in enumerate(coef)})
            ng.append(out)
            out += 1
        if len(g) % 2:
            e = np.eye(values)[g[-1]]
            base = len(pre)
            pre += [e, -e]
            post.append({base: 1.0, base + 1: -1.0})
            ng.append(out)
            out += 1
        new_groups.append(ng)
    P = np.array(pre)
    Q = np.zeros((len(pre), out))
    for j, col in enumerate(post):
        for i, c in col.items():
            Q[i, j] = c
    return P, Q, new_groups


def lattice_onnx(path: str, d: int, n: int, n_groups: int, rng: random.Random, encoding: int):
    """Write the network (module docstring) to ``path``; returns (W, b, groups) of its maps."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    W, b = _maps(rng, d, n)
    groups = [sorted(rng.sample(range(n), max(2, n // 2))) for _ in range(n_groups)]
    sel = [i for g in groups for i in g]
    S = np.zeros((n, len(sel)))
    for j, i in enumerate(sel):
        S[i, j] = 1.0
    nodes, inits, k = [], [], [0]

    def const(a):
        name = f"c{k[0]}"
        k[0] += 1
        inits.append(numpy_helper.from_array(np.asarray(a, dtype=np.float32), name))
        return name

    def affine(x, M, c=None):
        y = f"t{k[0]}"
        k[0] += 1
        nodes.append(helper.make_node("MatMul", [x, const(M)], [y + "m"]))
        nodes.append(helper.make_node("Add", [y + "m", const(np.zeros(M.shape[1]) if c is None
                                                            else c)], [y]))
        return y

    x = affine("input", W.T, b)  # the n maps
    x = affine(x, S)  # selected into groups
    values, idx, at = len(sel), [], 0
    for g in groups:
        idx.append(list(range(at, at + len(g))))
        at += len(g)
    for op, gs in (("min", idx), ("max", None)):
        if gs is None:
            gs = [[g[0] for g in idx]]
        while any(len(g) > 1 for g in gs):
            P, Qm, gs = _relu_layers(values, gs, op, encoding)
            h = affine(x, P.T)
            r = h + "r"
            nodes.append(helper.make_node("Relu", [h], [r]))
            x = affine(r, Qm)
            values = Qm.shape[1]
        idx = gs
    graph = helper.make_graph(
        nodes, "lattice",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, d])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 1])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return W, b, groups


def _value(W, b, groups, x):
    v = W @ x + b
    return max(min(v[i] for i in g) for g in groups)


def _vnnlib(path: str, d: int, sign: str, c: float):
    text = "".join(f"(declare-const X_{i} Real)\n" for i in range(d)) + "(declare-const Y_0 Real)\n"
    text += "".join(f"(assert (>= X_{i} -2))\n(assert (<= X_{i} 2))\n" for i in range(d))
    text += f"(assert ({sign} Y_0 {float(c)!r}))\n"
    with open(path, "w") as f:
        f.write(text)


def _exactmax(*args, timeout=None):
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "exactmax", *map(str, args)], capture_output=True,
                       text=True, timeout=None if timeout is None else timeout + 30)
    return r, time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", default="2,3,5")
    ap.add_argument("--pieces", default="8,16,32,64")
    ap.add_argument("--groups", type=int, default=None)
    ap.add_argument("--props", type=int, default=3)
    ap.add_argument("--encoding", type=int, choices=(2, 4), default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--no-lift-too", action="store_true")
    ap.add_argument("--work", default="lattice_work")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    rows = []
    print("| d | pieces | groups | layers (ReLU) | import | lift (kernel) | lifted | check-cert "
          "| property | check (lifted) | check --no-lift |")
    print("|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---:|")
    for d in map(int, a.dims.split(",")):
        for n in map(int, a.pieces.split(",")):
            rng = random.Random(a.seed * 1000 + d * 100 + n)
            G = a.groups or max(2, n // 4)
            stem = os.path.join(a.work, f"lat_d{d}_n{n}_e{a.encoding}")
            W, b, groups = lattice_onnx(stem + ".onnx", d, n, G, rng, a.encoding)
            r, t_imp = _exactmax("import", stem + ".onnx", "-o", stem + ".json", "--json")
            layers = len(json.loads(r.stdout)["layer_widths"]) if r.returncode == 0 and \
                "layer_widths" in r.stdout else None
            r, t_lift = _exactmax("lift", stem + ".json", "-o", stem + ".lifted.json", "--cert",
                                  stem + ".lift.cert.json", "--json")
            lift = json.loads(r.stdout)
            r, t_cc = _exactmax("check-cert", stem + ".lift.cert.json")
            assert r.returncode == 0, r.stdout + r.stderr
            layers = lift["input"]["layers"]
            xs = np.array([[rng.uniform(-2, 2) for _ in range(d)] for _ in range(400)])
            ys = [_value(W, b, groups, x) for x in xs]
            lo, hi = min(ys), max(ys)
            kinds = [(">=", hi + (hi - lo) * 0.02), ("<=", lo - (hi - lo) * 0.02),
                     (">=", (lo + hi) / 2)]
            for p in range(a.props):
                sign, c = kinds[p % len(kinds)]
                c = float(round(c, 6))
                prop = f"{stem}_p{p}.vnnlib"
                _vnnlib(prop, d, sign, c)
                res = {}
                for mode in ("lifted", "no-lift") if a.no_lift_too else ("lifted",):
                    extra = ["--no-lift"] if mode == "no-lift" else []
                    cert = f"{stem}_p{p}_{mode}.cert.json"
                    cex = f"{stem}_p{p}_{mode}.cex"
                    r, t = _exactmax("check", stem + ".onnx", prop, "--json", "--timeout",
                                     a.timeout, "--cert", cert, "--counterexample", cex, *extra,
                                     timeout=a.timeout)
                    v = json.loads(r.stdout)["verdict"] if r.stdout.startswith("{") else "error"
                    if v == "unsat":
                        assert _exactmax("check-cert", cert)[0].returncode == 0
                    if v == "sat":
                        assert _exactmax("replay", stem + ".onnx", prop, cex)[0].returncode == 0
                    res[mode] = (v, t)
                row = dict(d=d, pieces=n, groups=G, relu_layers=layers, import_s=t_imp,
                           lift_s=t_lift, lift_kernel_s=lift["kernel_check_s"],
                           lifted=lift["lifted"], check_cert_s=t_cc, property=f"y {sign} {c}",
                           check=res)
                rows.append(row)
                nl = res.get("no-lift")
                print(f"| {d} | {n} | {G} | {layers} | {t_imp:.1f} s | {t_lift:.1f} s "
                      f"({lift['kernel_check_s']:.1f} s) | {lift['lifted']['layers']} layers, "
                      f"ranks {lift['lifted']['ranks']} | {t_cc:.1f} s | y {sign} {c} | "
                      f"{res['lifted'][0]} {res['lifted'][1]:.1f} s | "
                      + (f"{nl[0]} {nl[1]:.1f} s |" if nl else "- |"), flush=True)
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
