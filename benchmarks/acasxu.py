"""ACAS Xu properties 1-4 on networks 1-6 and 1-7 (issue #21), with VNN-COMP's limit of 116 s.

    python benchmarks/acasxu.py [--timeout 116] [--route library|cli] [--only 1-6:3 ...]
                                [--json results.json]

The networks are VNN-COMP 2022's test_unsat.onnx (network 1-6) and test_sat.onnx (network 1-7),
from the folder vnncomp2022-test/ of $EXACTMAX_BENCH_DATA (default ../shared/data beside the
checkout; where to get it: docs/benchmarks.md, "Benchmark data", and ``benchdata.py``); the properties benchmarks/acasxu/prop_1..4.vnnlib
(``make_props.py``: the paper's constants, scaled, rounded outward).  Each instance runs in a
fresh child process:

- ``--route library`` (default): ``prove.property.decide_property`` (the counterexample search,
  then per case the relaxed branch and bound of ``engine/relaxation.py``, falling back to
  ``build_case_tree``), then the kernel's ``check_property`` of the certificate; also written to
  a certificate file and read back by ``exactmax check-cert`` when ``--recheck``.
- ``--route cli``: ``exactmax check NET PROP --timeout T --cert C.json`` as a user runs it.

Printed per instance: the answer; the expected answer and its source; wall time and user CPU
time of the child (building, search and the kernel's check, all included); leaves; whether
the kernel checked the certificate (unsat) or evaluated the counterexample (sat).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import benchdata

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = benchdata.folder("vnncomp2022-test")
NETS = {"1-6": "test_unsat.onnx", "1-7": "test_sat.onnx"}

# Expected answers and how we know.  "sat" answers are also confirmed by the kernel's exact
# evaluation of the counterexample, whatever the source says.
EXPECTED = {
    ("1-6", 1): ("unsat", "Katz et al. 2017: property 1 holds on all 45 networks"),
    ("1-7", 1): ("unsat", "Katz et al. 2017: property 1 holds on all 45 networks"),
    ("1-6", 2): ("sat", "not in the paper (property 2 is stated for networks 2-x..5-x); "
                        "exactmax's kernel-evaluated counterexample"),
    ("1-7", 2): ("unsat", "not in the paper (property 2 is stated for networks 2-x..5-x); "
                          "exactmax's kernel-checked certificate (68 relaxed leaves with "
                          "optimised slopes; 1,050 with the fixed ones); in floats, the least "
                          "max_i (Y_i - Y_0) a local search found is +7.3e-4: unsat, barely"),
    ("1-6", 3): ("unsat", "vnncomp2022-test README: network 1-6 is its unsat instance"),
    ("1-7", 3): ("sat", "vnncomp2022-test README: network 1-7 violates property 3"),
    ("1-6", 4): ("unsat", "Katz et al. 2017: property 4 holds on the networks it was run on "
                          "(1-7, 1-8, 1-9 excluded)"),
    ("1-7", 4): ("sat", "not in the paper (1-7 excluded there); exactmax's kernel-evaluated "
                        "counterexample"),
}

CHILD = r"""
import json, sys, time
from exactmax.io.vnnlib2 import read_property
from exactmax.io.models import load_model
from exactmax.kernel.property import check_property
from exactmax.prove.property import decide_property
net, prop = load_model(sys.argv[1]), read_property(sys.argv[2])
t0 = time.monotonic()
a = decide_property(net, prop, float(sys.argv[3]))
out = {"verdict": a.result, "reason": a.reason, "leaves": a.stats.get("leaves"),
       "build_s": round(time.monotonic() - t0 - a.stats.get("kernel_check_s", 0), 3),
       "kernel_check_s": a.stats.get("kernel_check_s"),
       "checked": a.result == "unsat" and a.stats.get("leaves_checked") is not None
                  or a.result == "sat"}
print(json.dumps(out))
"""


def run(net: str, prop: str, timeout: float, route: str) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    if route == "library":
        cmd = [sys.executable, "-c", CHILD, net, prop, str(timeout)]
    else:
        cmd = ["exactmax", "check", net, prop, "--timeout", str(timeout), "--json"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout * 3 + 60)
        text = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "{}"
        out = json.loads(text)
    except subprocess.TimeoutExpired:
        out = {"verdict": "timeout"}
    except json.JSONDecodeError:
        out = {"verdict": "error", "reason": p.stderr.strip()[-300:]}
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out["wall_s"] = round(time.monotonic() - start, 2)
    out["user_s"] = round(after.ru_utime - before.ru_utime, 2)
    if route == "cli":
        st = out.get("stats", {})
        out["leaves"] = st.get("leaves", st.get("leaves_checked"))
        out["checked"] = out.get("verdict") == "sat" or st.get("leaves_checked") is not None
        out["kernel_check_s"] = st.get("kernel_check_s")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=116.0)
    ap.add_argument("--route", choices=("library", "cli"), default="library")
    ap.add_argument("--only", nargs="*", help="instances as NET:PROP, e.g. 1-6:3")
    ap.add_argument("--json")
    args = ap.parse_args()
    benchdata.require("vnncomp2022-test", *NETS.values())
    rows = []
    print(f"{'net':4} {'prop':4} {'answer':8} {'expected':9} {'ok':3} {'wall s':>7} "
          f"{'user s':>7} {'leaves':>7} {'checked':8} {'kernel s':>8}")
    for prop in (1, 2, 3, 4):
        for name, onnx in NETS.items():
            if args.only and f"{name}:{prop}" not in args.only:
                continue
            out = run(os.path.join(DATA, onnx), os.path.join(HERE, "acasxu", f"prop_{prop}.vnnlib"),
                      args.timeout, args.route)
            exp, why = EXPECTED[(name, prop)]
            ok = "?" if exp is None else ("yes" if out.get("verdict") == exp else "NO")
            within = out["wall_s"] <= args.timeout
            print(f"{name:4} {prop:<4} {out.get('verdict', '?'):8} {exp or '-':9} {ok:3} "
                  f"{out['wall_s']:7.1f} {out['user_s']:7.1f} {str(out.get('leaves', '-')):>7} "
                  f"{str(bool(out.get('checked'))):8} {str(out.get('kernel_check_s', '-')):>8}"
                  f"{'' if within else '  (over the limit)'}", flush=True)
            if out.get("verdict") not in ("sat", "unsat"):
                print(f"     reason: {out.get('reason')}")
            rows.append({"net": name, "prop": prop, "expected": exp, "source": why, **out})
    for (name, prop), (exp, why) in EXPECTED.items():
        if not args.only or f"{name}:{prop}" in args.only:
            print(f"expected {name} prop {prop}: {exp or 'unknown'} ({why})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
