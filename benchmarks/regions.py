"""Region enumeration: time against the number of regions, and a comparison with relucent.

    python benchmarks/regions.py [--quick] [--no-relucent]

Part 1: the sawtooth family (docs/notes/construction.md §5, exactly k^(dD) regions), Maxout networks and
their compiled Transformers: cells, count, time.
Part 2: random ReLU networks [2, w, w, 1] (weights rounded to multiples of 1/1000, the same
numbers given to both tools) on the box [-1, 1]^2: exactmax's exact count (activation and
linear regions, kernel-checked certificate) against PyPI relucent's activation regions
(floating-point LPs; ``Complex.bfs`` with cube_mode="intersect", radius 1), which counts the
cells of R^2 that meet the cube.  Every number is measured in this run.
"""

from __future__ import annotations

import argparse
import sys
import time
from fractions import Fraction

from exactmax.construct.transformer import compile_transformer
from exactmax.kernel.affine import Affine
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from exactmax.kernel.polyhedron import Box
from exactmax.kernel.rational import ONE, Q, ZERO
from exactmax.regions.enumerate import count_regions
from exactmax.regions.sawtooth import sawtooth_network


def sawtooth_table(cases) -> None:
    print("| k | d | D | k^(dD) | Maxout: linear / activation regions | cells | time (s) | "
          "Transformer: linear / activation | time (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k, d, D in cases:
        net = sawtooth_network(k, d, D)
        t0 = time.perf_counter()
        a = count_regions(net, net.domain)
        ta = time.perf_counter() - t0
        tf = compile_transformer(net).transformer
        t0 = time.perf_counter()
        b = count_regions(tf, net.domain)
        tb = time.perf_counter() - t0
        print(f"| {k} | {d} | {D} | {k ** (d * D)} | {a.linear_regions} / "
              f"{a.activation_regions} | {len(a.cells)} | {ta:.2f} | {b.linear_regions} / "
              f"{b.activation_regions} | {tb:.2f} |", flush=True)


def _rounded(M) -> list[list[Fraction]]:
    return [[Fraction(round(float(v) * 1000), 1000) for v in row] for row in M]


def relu_network(widths, seed):
    """(exact MaxoutNetwork, relucent network) with the same rounded weights."""
    import numpy as np
    import relucent
    relucent.set_seeds(seed)
    rnet = relucent.mlp(widths)
    layers, out = [], None
    linear = [layer for name, layer in rnet.layers.items() if name.startswith("fc")]
    for n, lin in enumerate(linear):
        W, b = _rounded(lin.weight), _rounded(lin.bias)[0]
        lin.weight[...] = np.array([[float(v) for v in row] for row in W])
        lin.bias[...] = np.array([[float(v) for v in b]])
        Wq = tuple(tuple(Q(v.numerator, v.denominator) for v in row) for row in W)
        bq = tuple(Q(v.numerator, v.denominator) for v in b)
        if n < len(linear) - 1:
            zero = Piece((ZERO,) * len(Wq[0]), ZERO)
            layers.append(Layer(tuple(Unit((Piece(r, c), zero)) for r, c in zip(Wq, bq))))
        else:
            out = Affine(Wq, bq, len(Wq[0]))
    box = Box((-ONE,) * widths[0], (ONE,) * widths[0])
    return MaxoutNetwork(widths[0], tuple(layers), out, box), rnet


def relucent_table(widths_list, seeds) -> None:
    import numpy as np
    import relucent
    print("| network | seed | exactmax activation / linear | cells | exactmax time (s) | "
          "relucent cells | relucent time (s) | agree |")
    print("|---|---|---|---|---|---|---|---|")
    for widths in widths_list:
        for seed in seeds:
            net, rnet = relu_network(widths, seed)
            t0 = time.perf_counter()
            rc = count_regions(net, net.domain)
            te = time.perf_counter() - t0
            cplx = relucent.Complex(rnet)
            t0 = time.perf_counter()
            try:
                # relucent starts at the origin by default, which lies on a hyperplane
                # when a rounded bias is 0: start at a point off every hyperplane instead
                cplx.bfs(start=np.array([[0.1234567, 0.0765432]]), cube_radius=1.0,
                         cube_mode="intersect", verbose=0)
                n_rel = len(cplx)
            except Exception as e:  # a float LP failure is reported, not hidden
                n_rel = f"error: {type(e).__name__}: {e}"
            tr = time.perf_counter() - t0
            print(f"| {widths} | {seed} | {rc.activation_regions} / {rc.linear_regions} | "
                  f"{len(rc.cells)} | {te:.2f} | {n_rel} | {tr:.2f} | "
                  f"{'yes' if n_rel == rc.activation_regions else 'NO'} |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small cases only")
    ap.add_argument("--no-relucent", action="store_true", help="skip the relucent comparison")
    args = ap.parse_args()
    cases = [(k, d, D) for d in (1, 2) for k in (2, 3, 4) for D in (1, 2, 3)]
    if args.quick:
        cases = [c for c in cases if c[0] ** (c[1] * c[2]) <= 81]
    sawtooth_table(cases)
    if args.no_relucent:
        return 0
    try:
        import relucent  # noqa: F401
    except ImportError:
        print("\nrelucent is not installed (pip install relucent): comparison skipped")
        return 0
    print()
    widths = [[2, 8, 1], [2, 16, 1], [2, 8, 8, 1]] if args.quick else \
        [[2, 8, 1], [2, 16, 1], [2, 32, 1], [2, 8, 8, 1], [2, 16, 16, 1]]
    relucent_table(widths, (0, 1) if args.quick else (0, 1, 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
