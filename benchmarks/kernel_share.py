"""The kernel's share of ``exactmax check``'s time on hard unsat instances of ACAS Xu and MNIST,
this tree against another commit, side by side in one run (#32: "the kernel's share of a hard
instance's time under 20%").

    python benchmarks/kernel_share.py [--against b51a371] [--only 4-5,6_0.03] [--json out.json]

Ten instances that were among the slowest unsat ones of the runs in docs/benchmarks.md: ACAS Xu
property 1 on networks 3-3, 3-8, 4-1, 4-5 and 4-6, property 5 on 1-1 and property 9 on 3-3
(``acasxu/`` of the benchmark data), MNIST 256x6 properties 0 and 3 at 0.03 and 256x2 property
6 at 0.03 (VNN-COMP 2022's ``mnist_fc``, unzipped: ``$EXACTMAX_BENCH_DATA/mnist_fc`` or
``--mnist``).  Each runs as ``exactmax check NET PROP --json --timeout LIMIT`` (VNN-COMP's limit,
both cores: the default workers) in its own process, the two trees one after the other per
instance (which goes first alternates); reported per tree: the verdict, ``time_s``, the kernel's
check (``stats.kernel_check_s``) and its share.  The other commit's package comes from ``git
archive``.  Not run by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from benchdata import require

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ACAS = [("3-3", 1), ("3-8", 1), ("4-1", 1), ("4-5", 1), ("4-6", 1), ("1-1", 5), ("3-3", 9)]
MNIST = [("256x6", "0_0.03"), ("256x6", "3_0.03"), ("256x2", "6_0.03")]


def instances(acas: str, mnist: str) -> list[tuple[str, str, str, int]]:
    """(name, network, property, limit in s) for the ten instances above."""
    out = []
    for net, prop in ACAS:
        a, b = net.split("-")
        out.append((f"acas {net} prop {prop}", f"{acas}/onnx/ACASXU_run2a_{a}_{b}_batch_2000.onnx",
                    f"{acas}/vnnlib/prop_{prop}.vnnlib", 116 if prop < 5 else 300))
    for net, prop in MNIST:
        out.append((f"mnist {net} {prop}", f"{mnist}/onnx/mnist-net_{net}.onnx",
                    f"{mnist}/vnnlib/prop_{prop}.vnnlib", 120 if net == "256x2" else 300))
    return out


def run(tree: str, net: str, prop: str, limit: int) -> dict:
    """One ``exactmax check`` of ``tree``'s package (run from elsewhere: ``python -m`` puts the
    working directory first on the path)."""
    r = subprocess.run([sys.executable, "-m", "exactmax", "check", os.path.abspath(net),
                        os.path.abspath(prop), "--json", "--timeout", str(limit)],
                       capture_output=True, text=True, cwd=tempfile.gettempdir(),
                       env=dict(os.environ, PYTHONPATH=tree), timeout=limit + 120)
    try:
        out = json.loads(r.stdout)
    except json.JSONDecodeError:
        return {"verdict": f"exit {r.returncode}", "time_s": None, "kernel_s": None}
    return {"verdict": out.get("verdict"), "time_s": out.get("time_s"),
            "kernel_s": (out.get("stats") or {}).get("kernel_check_s")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", default="b51a371", help="the other commit (default b51a371)")
    ap.add_argument("--acasxu", help="the ACAS Xu folder (default: the benchmark data's acasxu)")
    ap.add_argument("--mnist", help="the unzipped mnist_fc folder (default: the data's mnist_fc)")
    ap.add_argument("--only", help="comma-separated parts of instance names to keep")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    acas = args.acasxu or require("acasxu", "instances.csv")
    mnist = args.mnist or require("mnist_fc", "instances.csv")
    todo = instances(acas, mnist)
    if args.only:
        todo = [t for t in todo if any(k in t[0] for k in args.only.split(","))]
    old = tempfile.mkdtemp()
    archive = subprocess.run(["git", "-C", ROOT, "archive", args.against, "exactmax"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", old], input=archive, check=True)
    trees = [(args.against, old), ("this tree", ROOT)]
    rows = []
    print(f"| instance | {args.against}: verdict, time, kernel, share | this tree: verdict, time, "
          "kernel, share |\n|---|---|---|", flush=True)
    for n, (name, net, prop, limit) in enumerate(todo):
        got = {}
        for label, path in trees[:: 1 if n % 2 == 0 else -1]:
            got[label] = run(path, net, prop, limit)
        cells = []
        for label, _ in trees:
            g = got[label]
            ok = g["time_s"] and g["kernel_s"] is not None
            g["share"] = share = g["kernel_s"] / g["time_s"] if ok else None
            cells.append(f"{g['verdict']}, {g['time_s']} s, {g['kernel_s']} s, "
                         + (f"{share:.0%}" if share is not None else "-"))
        rows.append({"instance": name, **{label: got[label] for label, _ in trees}})
        print(f"| {name} | {cells[0]} | {cells[1]} |", flush=True)
    for label, _ in trees:
        done = [r[label] for r in rows if r[label]["time_s"] and r[label]["kernel_s"] is not None]
        t, k = sum(g["time_s"] for g in done), sum(g["kernel_s"] for g in done)
        print(f"{label}: {len(done)} instances with a kernel check, {t:.1f} s in all, the kernel "
              f"{k:.1f} s ({k / t:.0%})" if t else f"{label}: no kernel check")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
