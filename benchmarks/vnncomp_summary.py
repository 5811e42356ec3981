"""Summarise the results CSV of ``exactmax vnncomp`` per property: a Markdown table.

    python benchmarks/vnncomp_summary.py RESULTS.csv [--before OTHER.csv] [--by onnx]

RESULTS.csv: lines ``category,onnx,vnnlib,prepare_time,result,run_time`` (VNN-COMP's
layout, as ``exactmax vnncomp --out`` writes them).  Per VNN-LIB file (per network with
``--by onnx``): instances, sat, unsat,
unknown, timeout, errors, the total and the median run time of the decided ones.  With
``--before``, a second table compares the instances both files hold (decided in each, total
time of each on the instances both decided).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
from collections import defaultdict

DECIDED = ("sat", "unsat")


def _stem(path: str) -> str:
    """The file name without .gz, .onnx or .vnnlib (prop_0_0.03.vnnlib -> prop_0_0.03)."""
    name = os.path.basename(path).removesuffix(".gz")
    return name.removesuffix(".onnx").removesuffix(".vnnlib")


def read(path: str) -> dict[tuple[str, str], tuple[str, float]]:
    with open(path, encoding="utf-8") as f:
        return {(r[1], r[2]): (r[4], float(r[5])) for r in csv.reader(f) if len(r) == 6}


def table(rows: dict, by: str = "vnnlib") -> str:
    groups: dict[str, list] = defaultdict(list)
    for (onnx, vnnlib), v in rows.items():
        groups[_stem(vnnlib if by == "vnnlib" else onnx)].append(v)
    out = [
        f"| {'property' if by == 'vnnlib' else 'network'} | instances | sat | unsat | unknown | timeout | error | decided: total "
        "| median |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def line(name, vals):
        kinds = ("sat", "unsat", "unknown", "timeout")
        count = {k: sum(1 for r, _ in vals if r == k) for k in kinds}
        err = len(vals) - sum(count.values())
        times = [t for r, t in vals if r in DECIDED]
        total = f"{sum(times):.1f} s" if times else "-"
        med = f"{statistics.median(times):.1f} s" if times else "-"
        return (
            f"| {name} | {len(vals)} | {count['sat']} | {count['unsat']} | {count['unknown']} | "
            f"{count['timeout']} | {err} | {total} | {med} |"
        )

    key = lambda n: (len(n), n)  # noqa: E731 - prop_2 before prop_10
    for name in sorted(groups, key=key):
        out.append(line(name, groups[name]))
    out.append(line("**all**", [v for vals in groups.values() for v in vals]))
    out.append(
        f"\nWall time of all instances (undecided ones included): "
        f"{sum(t for _, t in rows.values()):.0f} s."
    )
    return "\n".join(out)


def compare(new: dict, old: dict) -> str:
    both = sorted(set(new) & set(old))
    dn = sum(1 for k in both if new[k][0] in DECIDED)
    do = sum(1 for k in both if old[k][0] in DECIDED)
    common = [k for k in both if new[k][0] in DECIDED and old[k][0] in DECIDED]
    tn, to = sum(new[k][1] for k in common), sum(old[k][1] for k in common)
    gained = [k for k in both if new[k][0] in DECIDED and old[k][0] not in DECIDED]
    lost = [k for k in both if old[k][0] in DECIDED and new[k][0] not in DECIDED]
    disagree = [k for k in common if new[k][0] != old[k][0]]

    def names(ks) -> str:
        return ", ".join(f"{_stem(a)} {_stem(b)}" for a, b in ks) or "none"

    return "\n".join(
        [
            f"Instances in both runs: {len(both)}; decided: {dn} now, {do} before; on the "
            f"{len(common)} decided by both: {tn:.1f} s now, {to:.1f} s before.",
            f"Decided now only: {names(gained)}. Decided before only: {names(lost)}. "
            f"Different answers: {names(disagree)}.",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--before")
    ap.add_argument("--by", choices=("vnnlib", "onnx"), default="vnnlib", help="group by")
    a = ap.parse_args()
    new = read(a.results)
    print(table(new, a.by))
    if a.before:
        print()
        print(compare(new, read(a.before)))


if __name__ == "__main__":
    main()
