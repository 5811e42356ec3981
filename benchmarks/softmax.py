"""Certified softmax error of the bundled examples (docs/notes/construction.md §3, issue #6).

For each example and lambda = 10, 100, 1000: the closed-form bound of §3, the certified bound U
(ball search, then the kernel's exact re-check of the cell tree), the observed worst error W (a
lower bound: exact N(x) against T_lambda(x) in balls at searched points), U / W and the time.
Then, for one epsilon per example, the smallest certified lambda against the closed-form one.
Prints a markdown table; all numbers are measured in this run.

    python benchmarks/softmax.py [--max-cells N] [--timeout S] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from exactmax.io import load_model
from exactmax.kernel.rational import Q
from exactmax.softmax.bound import (_arb_q, certify, closed_form, dec_round, dec_str,
                                    kernel_check, observed_error, setting_of, smallest_lambda)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = [("tent.json", Q(1, 100)), ("relu_triangle.json", Q(1, 100)),
            ("maxout_d3_w4_r3.json", Q(1, 10))]


def fmt(q: Q, up: bool) -> str:
    return dec_str(dec_round(q, up=up, digits=4))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-cells", type=int, default=4000)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--eps-cells", type=int, default=1000,
                    help="cell budget of each probe of the lambda search")
    ap.add_argument("--quick", action="store_true", help="lambda = 100 only, small budgets")
    a = ap.parse_args()
    lams = [Q(100)] if a.quick else [Q(10), Q(100), Q(1000)]
    if a.quick:
        a.max_cells, a.timeout, a.eps_cells = 300, 5.0, 150
    print("| example | lambda | closed form | certified U | observed W | U / W | closed / U "
          "| cells | search s | kernel check s | W search s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for name, _ in EXAMPLES:
        net = load_model(os.path.join(ROOT, "examples", name))
        s = setting_of(net, net.domain)
        for lam in lams:
            c = certify(s, lam, a.max_cells, a.timeout)
            cf = _arb_q(closed_form(net, s.n, lam).upper())
            if c.verdict != "certified":
                print(f"| {name} | {lam} | {fmt(cf, True)} | {c.verdict}: {c.reason} | | | | "
                      f"{c.search.leaves} | {c.search.time_s:.1f} | | |")
                continue
            t = time.monotonic()
            o = observed_error(s, lam, c.search.worst)
            tw = time.monotonic() - t
            W = _arb_q(o.error.lower())
            ratios.append((name, lam, c.bound / W))
            print(f"| {name} | {lam} | {fmt(cf, True)} | {fmt(c.bound, True)} | "
                  f"{fmt(W, False)} | {fmt(c.bound / W, True)} | {fmt(cf / c.bound, False)} | "
                  f"{c.search.leaves} ({c.search.stop}) | {c.search.time_s:.1f} | "
                  f"{c.check_time_s:.1f} | {tw:.1f} |", flush=True)
    print()
    print("| example | epsilon | certified lambda | certified U there | lambda failing (balls) "
          "| closed-form lambda | closed / certified | probes | time s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, eps in EXAMPLES:
        net = load_model(os.path.join(ROOT, "examples", name))
        s = setting_of(net, net.domain)
        t = time.monotonic()
        lam_cf = _arb_q(closed_form(net, s.n, 1).upper()) / eps
        hi, r, lo, probes = smallest_lambda(s, eps, Q(1, 20), a.eps_cells, a.timeout)
        if hi is None:
            print(f"| {name} | {eps} | not found | | | {fmt(lam_cf, True)} | | {len(probes)} | "
                  f"{time.monotonic() - t:.0f} |")
            continue
        claim = kernel_check(s, hi, r.search.tree)
        ok = "" if claim.bound <= eps else " (exact bound above epsilon!)"
        print(f"| {name} | {dec_str(eps)} | {dec_str(hi)} | {fmt(claim.bound, True)}{ok} | "
              f"{'-' if lo is None else dec_str(lo)} | {fmt(lam_cf, True)} | "
              f"{fmt(lam_cf / hi, False)} | {len(probes)} | {time.monotonic() - t:.0f} |",
              flush=True)
    worst = max(ratios, key=lambda r: r[2]) if ratios else None
    if worst:
        print(f"\nlargest U / W: {fmt(worst[2], True)} ({worst[0]}, lambda = {worst[1]}); "
              f"goal <= 2: {'met' if worst[2] <= 2 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
