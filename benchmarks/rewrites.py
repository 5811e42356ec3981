"""Equal networks of different depths (#34): rewritten pairs proved by ``exactmax equiv``.

    python benchmarks/rewrites.py [--dim 4] [--widths 4,16] [--depths 2,8] [--seeds 3]
                                  [--timeout 60] [--work DIR] [--out results/rewrites.json]

A seeded network A (input dimension ``--dim``, every layer of one width, depth 2 to 8; kinds:
ReLU, Maxout of rank 2, Maxout of rank 4; weights in multiples of 1/4) and B, a rewrite of it,
units and pieces permuted throughout and one rewrite applied (or all of them, "mixed"):

- ``insert``: a layer of pass-through units inserted after a hidden layer (rank-1 units for
  Maxout networks; for ReLU networks the pairs ReLU(h) and ReLU(-h), read as h = ReLU(h) -
  ReLU(-h) by the next layer);
- ``maxtree``: a unit of rank 4, max(p0, p1, p2, p3), computed as max(max(p0, p1), max(p2,
  p3)) through an inserted layer (the other units passed through; Maxout rank 4 only);
- ``duplicate``: a unit duplicated, its outgoing weights split 1/4 and 3/4 between the copies;
- ``scale``: a unit's pieces scaled by 3 (max(3a, 3b) = 3 max(a, b)) and its outgoing weights
  divided by 3;
- ``mixed``: all of them, in turn.

Each pair is run as ``exactmax equiv A B --box ...`` in its own process (wall time, start-up
included), then a moved pair (B with the biases of one unit of its first layer raised by 1/8),
which must not be proved.  Not run by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from exactmax.io.models import json_text, model_to_json  # noqa: E402
from exactmax.kernel.affine import Affine  # noqa: E402
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit  # noqa: E402
from exactmax.kernel.rational import ONE, ZERO, Q  # noqa: E402

# A network here: (d, [layer: [unit: [(w list, b)]]], output rows [(w list, b)])


def random_net(rng: random.Random, d: int, width: int, depth: int, kind: str):
    def q():
        return Q(rng.randint(-8, 8), 4)

    layers, n = [], d
    for _ in range(depth):
        units = []
        for _ in range(width):
            if kind == "relu":
                units.append([([q() for _ in range(n)], q()), ([ZERO] * n, ZERO)])
            else:
                units.append([([q() for _ in range(n)], q()) for _ in range(int(kind[-1]))])
        layers.append(units)
        n = width
    out = [([q() for _ in range(n)], q()) for _ in range(2)]
    return d, layers, out


def _next_rows(net, l):
    """The rows reading layer l: the pieces of layer l + 1, or the output rows."""
    d, layers, out = net
    return [p for u in layers[l + 1] for p in u] if l + 1 < len(layers) else out


def _copy(net):
    d, layers, out = net
    return d, [[[(list(w), b) for w, b in u] for u in layer] for layer in layers], \
        [(list(w), b) for w, b in out]


def permute(net, rng):
    d, layers, out = _copy(net)
    for l in range(len(layers)):
        perm = list(range(len(layers[l])))
        rng.shuffle(perm)
        layers[l] = [layers[l][i] for i in perm]
        for u in layers[l]:
            rng.shuffle(u)
        for w, _ in _next_rows((d, layers, out), l):
            w[:] = [w[i] for i in perm]
    return d, layers, out


def insert(net, rng, kind):
    d, layers, out = _copy(net)
    l = rng.randrange(len(layers))
    n = len(layers[l])
    if kind == "relu":  # ReLU(h), ReLU(-h) per unit; the next rows read h = first - second
        new = []
        for i in range(n):
            e = [ONE if j == i else ZERO for j in range(n)]
            new += [[(e, ZERO), ([ZERO] * n, ZERO)], [([-v for v in e], ZERO), ([ZERO] * n, ZERO)]]
        for w, _ in _next_rows((d, layers, out), l):
            w[:] = [c for v in w for c in (v, -v)]
    else:
        new = [[([ONE if j == i else ZERO for j in range(n)], ZERO)] for i in range(n)]
    layers.insert(l + 1, new)
    return d, layers, out


def maxtree(net, rng):
    d, layers, out = _copy(net)
    l, u = rng.choice([(l, u) for l, layer in enumerate(layers) for u, p in enumerate(layer)
                       if len(p) == 4])
    n = len(layers[l])
    p = layers[l][u]
    layers[l] = layers[l][:u] + [p[:2], p[2:]] + layers[l][u + 1:]  # X at u, Y at u + 1
    new = []
    for i in range(n):
        e = [ZERO] * (n + 1)
        if i == u:
            ex, ey = list(e), list(e)
            ex[u], ey[u + 1] = ONE, ONE
            new.append([(ex, ZERO), (ey, ZERO)])
        else:
            e[i if i < u else i + 1] = ONE
            new.append([(e, ZERO)])
    layers.insert(l + 1, new)
    return d, layers, out


def duplicate(net, rng):
    d, layers, out = _copy(net)
    l = rng.randrange(len(layers))
    u = rng.randrange(len(layers[l]))
    layers[l].append([(list(w), b) for w, b in layers[l][u]])
    for w, _ in _next_rows((d, layers, out), l):
        w.append(w[u] * Q(3, 4))
        w[u] = w[u] * Q(1, 4)
    return d, layers, out


def scale(net, rng):
    d, layers, out = _copy(net)
    l = rng.randrange(len(layers))
    u = rng.randrange(len(layers[l]))
    layers[l][u] = [([3 * v for v in w], 3 * b) for w, b in layers[l][u]]
    for w, _ in _next_rows((d, layers, out), l):
        w[u] = w[u] / 3
    return d, layers, out


def moved(net):
    d, layers, out = _copy(net)
    layers[0][0] = [(w, b + Q(1, 8)) for w, b in layers[0][0]]
    return d, layers, out


def to_model(net) -> MaxoutNetwork:
    d, layers, out = net
    ls, n = [], d
    for layer in layers:
        ls.append(Layer(tuple(Unit(tuple(Piece(tuple(w), b) for w, b in u)) for u in layer)))
        n = len(layer)
    return MaxoutNetwork(d, tuple(ls), Affine(tuple(tuple(w) for w, _ in out),
                                              tuple(b for _, b in out), n))


def _equiv(a, b, box, timeout):
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "exactmax", "equiv", a, b, "--box", box, "--json",
                        "--timeout", str(timeout)], capture_output=True, text=True)
    t = time.monotonic() - t0
    try:
        o = json.loads(r.stdout)
    except json.JSONDecodeError:
        return "error", t, r.stderr.strip()[-200:]
    return o["verdict"], t, o.get("certificate_kind") or o.get("reason")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dim", type=int, default=4)
    ap.add_argument("--widths", default="4,16")
    ap.add_argument("--depths", default="2,8")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--work", default="rewrites_work")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    box = ";".join(["-1,1"] * a.dim)
    rows = []
    print("| kind | width | depth | rewrite | depths A, B | equiv | time | moved pair | time |")
    print("|---|---:|---:|---|---|---|---:|---|---:|")
    for kind in ("relu", "maxout2", "maxout4"):
        for width in map(int, a.widths.split(",")):
            for depth in map(int, a.depths.split(",")):
                for seed in range(a.seeds):
                    rng = random.Random(hash((kind, width, depth, seed)) & 0xFFFF)
                    A = random_net(rng, a.dim, width, depth, kind)
                    rewrites = ["insert", "duplicate", "scale", "mixed"]
                    if kind == "maxout4":
                        rewrites.insert(1, "maxtree")
                    for rw in rewrites:
                        B = permute(A, rng)
                        steps = [rw] if rw != "mixed" else [s for s in rewrites if s != "mixed"]
                        for s in steps:
                            B = {"insert": lambda n: insert(n, rng, kind),
                                 "maxtree": lambda n: maxtree(n, rng),
                                 "duplicate": lambda n: duplicate(n, rng),
                                 "scale": lambda n: scale(n, rng)}[s](B)
                        stem = os.path.join(a.work, f"{kind}_w{width}_d{depth}_s{seed}_{rw}")
                        files = {}
                        for name, net in (("a", A), ("b", B), ("moved", moved(B))):
                            files[name] = f"{stem}_{name}.json"
                            with open(files[name], "w") as f:
                                f.write(json_text(model_to_json(to_model(net))))
                        v, t, how = _equiv(files["a"], files["b"], box, a.timeout)
                        mv, mt, mhow = _equiv(files["a"], files["moved"], box, a.timeout)
                        rows.append(dict(kind=kind, width=width, depth=depth, seed=seed,
                                         rewrite=rw, depths=[len(A[1]), len(B[1])], verdict=v,
                                         time_s=t, how=how, moved=mv, moved_time_s=mt,
                                         moved_how=mhow))
                        print(f"| {kind} | {width} | {depth} | {rw} | {len(A[1])}, {len(B[1])} "
                              f"| {v} ({how}) | {t:.2f} s | {mv} | {mt:.2f} s |", flush=True)
    proved = sum(r["verdict"] == "proved" for r in rows)
    refuted = sum(r["moved"] == "refuted" for r in rows)
    print(f"\n{proved} of {len(rows)} equal pairs proved; {refuted} of {len(rows)} moved pairs "
          f"refuted; slowest proof {max(r['time_s'] for r in rows):.2f} s")
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
