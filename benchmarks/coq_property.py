"""Property certificates in Coq (#20): exactmax check --cert, then export-coq, then coqc.

    python benchmarks/coq_property.py [--json results.json] [--quick] [--cert NAME=C.json ...]
                                      [--skip NAME ...] [--only NAME ...] [--timeout S]
                                      [--parts N]

Instances:
- ``relu-abs``: a 2-input ReLU network (|x0| + |x1|, x0 - x1 + 1/4) and a VNN-LIB property
  with two input boxes and two forbidden conjunctions (the one of tests/test_coq_property.py);
- ``vnncomp-nano``, ``-tiny``, ``-small``: VNN-COMP 2022's ``test`` category's small networks
  with their properties (all three unsat);
- ``acas-1-6-prop3-box1e-4``: the same network and outputs with the input box shrunk to
  10^-4 of property 3's around its centre (one leaf: the cost of one symbolic run of the
  network in Coq), and to 0.1 (8 leaves);
- ``acas-1-6-prop1``: ACAS Xu 1-6, property 1, from acasxu/ of the same data (skipped when
  absent);
- ``acas-1-6-prop3``: VNN-COMP 2022's ``test`` category, ``test_unsat.onnx`` with
  ``test_prop.vnnlib`` (ACAS Xu network 1-6, property 3; 5 inputs, 6 hidden layers of 50
  ReLUs, 5 outputs), from vnncomp2022-test/ of $EXACTMAX_BENCH_DATA, else ../shared/data
  (skipped when absent; where to get it: docs/benchmarks.md, "Benchmark data").

Certificates are ``exactmax check``'s default (relaxed leaves, phase splits), or with
``--no-relax`` every ReLU fixed on each cell.  Reported per instance: the time of
``exactmax check --cert`` (or "given" with ``--cert``), the
certificate's leaves, the time to write the .v file (``export_coq_property``), its size, and
coqc's wall and user time and peak memory (getrusage of a fresh child) against proofs/, with
Print Assumptions checked against the allow-list.  The library must be built: make -C proofs.

With ``--parts N`` the files are written in parts (``export-coq --parts N``): the data file,
then the N parts side by side (one coqc each), then the theorem's file; coqc (wall) is the
whole, coqc (user) the sum over the processes, peak the largest process, and "peak, side by
side" the sum of the peaks of the processes that ran together (a bound on the machine's).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import benchdata
from coq_construction import MEASURE

from exactmax.export.coq_property import _leaves, export_coq_property, export_coq_property_parts
from exactmax.export.coqcheck import AssumptionsRejected, check_assumptions
from exactmax.io.jsonfile import Cursor, read_json_file
from exactmax.io.property_certificate import read_property_certificate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROOFS = os.path.join(ROOT, "proofs")
DATA = benchdata.folder("vnncomp2022-test")

RELU_NET = {"format": "exactmax/maxout", "version": 1, "input_dim": 2, "layers": [{"units": [
    {"pieces": [{"w": w, "b": "0"}, {"w": ["0", "0"], "b": "0"}]}
    for w in (["1", "0"], ["-1", "0"], ["0", "1"], ["0", "-1"])]}],
    "output": {"W": [["1", "1", "1", "1"], ["1", "-1", "-1", "1"]], "b": ["0", "1/4"]}}
RELU_PROP = "".join(f"(declare-const {v} Real)\n" for v in ("X_0", "X_1", "Y_0", "Y_1")) + """
(assert (or (and (>= X_0 -1) (<= X_0 1) (>= X_1 -0.5) (<= X_1 1))
            (and (>= X_0 2) (<= X_0 3) (>= X_1 0) (<= X_1 0.25))))
(assert (or (and (> Y_0 3.25)) (and (< Y_0 -0.1) (>= Y_1 0))))
"""


# property 3's input box (test_prop.vnnlib)
P3_LO = [-0.30353115613746867, -0.009549296585513092, 0.4933803235848431, 0.3, 0.3]
P3_HI = [-0.29855281193475053, 0.009549296585513092, 0.49999999998567607, 0.5, 0.5]


def shrunk_prop3(frac: float) -> str:
    """Property 3 on the box of ``frac`` times its widths around its centre."""
    s = "".join(f"(declare-const {v}_{i} Real)\n" for v in "XY" for i in range(5))
    for i, (lo, hi) in enumerate(zip(P3_LO, P3_HI)):
        m, w = (lo + hi) / 2, (hi - lo) * frac / 2
        s += f"(assert (<= X_{i} {m + w!r}))\n(assert (>= X_{i} {m - w!r}))\n"
    return s + "".join(f"(assert (<= Y_0 Y_{j}))\n" for j in range(1, 5))


def coqc(path: str, timeout: float) -> dict:
    """coqc on path: accepted (and its Print Assumptions allowed), wall and user s, peak MB."""
    measure = MEASURE.replace("print(r.returncode,",
                              "sys.stderr.write(r.stdout.decode()); print(r.returncode,")
    r = subprocess.run([sys.executable, "-c", measure, str(timeout), "coqc", "-Q", PROOFS,
                        "ExactMax", "-no-glob", os.path.basename(path)],
                       cwd=os.path.dirname(path), capture_output=True, text=True)
    if r.returncode != 0:
        return {"coq_ok": False, "coqc_s": None, "why": r.stderr.strip()[-300:]}
    code, wall, user, rss = r.stdout.split()
    try:
        axioms = check_assumptions(r.stderr) if code == "0" else []
    except AssumptionsRejected as e:
        return {"coq_ok": False, "coqc_s": round(float(wall), 1), "why": str(e)}
    return {"coq_ok": code == "0", "coqc_s": round(float(wall), 1),
            "coqc_user_s": round(float(user), 1), "coqc_mb": round(int(rss) / 1024),
            "axioms": len(axioms)}


def coqc_stages(stages: list[list[str]], timeout: float) -> dict:
    """coqc on the stages in turn, the files of a stage side by side, each measured alone."""
    measure = MEASURE.replace("print(r.returncode,",
                              "sys.stderr.write(r.stdout.decode()); print(r.returncode,")
    t0, user, peak, side, err = time.perf_counter(), 0.0, 0, 0, ""
    for stage in stages:
        procs = [subprocess.Popen([sys.executable, "-c", measure, str(timeout), "coqc", "-Q",
                                   PROOFS, "ExactMax", "-no-glob", os.path.basename(p)],
                                  cwd=os.path.dirname(p), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for p in stage]
        rss = []
        for p, proc in zip(stage, procs):
            out, err = proc.communicate()
            if proc.returncode != 0 or out.split()[0] != "0":
                return {"coq_ok": False, "coqc_s": None, "why": f"{p}: {err.strip()[-300:]}"}
            _, _, u, r = out.split()
            user += float(u)
            rss.append(int(r))
        peak, side = max(peak, *rss), max(side, sum(rss))
    try:
        axioms = check_assumptions(err)
    except AssumptionsRejected as e:
        return {"coq_ok": False, "coqc_s": None, "why": str(e)}
    return {"coq_ok": True, "coqc_s": round(time.perf_counter() - t0, 1),
            "coqc_user_s": round(user, 1), "coqc_mb": round(peak / 1024),
            "coqc_side_mb": round(side / 1024), "axioms": len(axioms)}


def instance(name: str, net: str, prop: str, cert: str | None, folder: str,
             timeout: float, no_relax: bool = False, parts: int = 1) -> dict:
    row: dict = {"instance": name}
    if cert is None:
        cert = os.path.join(folder, f"{name}.json")
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "exactmax", "check", net, prop, "--cert", cert,
                            "--timeout", str(timeout), "--json"]
                           + (["--no-relax"] if no_relax else []), capture_output=True,
                           text=True)
        row["check_s"] = round(time.perf_counter() - t0, 1)
        answer = json.loads(r.stdout)["verdict"] if r.stdout.strip() else r.stderr.strip()
        if answer != "unsat":
            row["answer"] = answer
            return row
    else:
        row["check_s"] = "given"
    t0 = time.perf_counter()
    doc = read_json_file(cert)
    n, p, trees, hashes, lifted = read_property_certificate(Cursor(cert, "", doc))
    if lifted is not None:
        row["answer"] = "lifted (no Coq export)"
        return row
    module = "P_" + "".join(ch if ch.isalnum() else "_" for ch in name)
    if parts > 1:
        files = export_coq_property_parts(n, p, trees, hashes, module, parts)
    else:
        files = [(module, export_coq_property(n, p, trees, hashes, module))]
    row.update(answer="unsat", leaves=sum(_leaves(t) for t in trees),
               export_s=round(time.perf_counter() - t0, 2),
               v_kb=round(sum(len(t) for _, t in files) / 1024), parts=len(files) - 2)
    paths = []
    for m, text in files:
        paths.append(os.path.join(folder, m + ".v"))
        with open(paths[-1], "w") as f:
            f.write(text)
    if parts > 1:
        row.update(coqc_stages([paths[:1], paths[1:-1], paths[-1:]], timeout))
    else:
        row.update(coqc(paths[0], timeout))
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--quick", action="store_true", help="the small ReLU network only")
    ap.add_argument("--cert", action="append", default=[], metavar="NAME=C.json",
                    help="use this certificate for the instance NAME instead of running check")
    ap.add_argument("--skip", action="append", default=[], metavar="NAME",
                    help="leave the instance NAME out (e.g. acas-1-6-prop3)")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="run only the instance NAME (repeatable)")
    ap.add_argument("--parts", type=int, default=1, metavar="N",
                    help="write each certificate in N parts (export-coq --parts N)")
    ap.add_argument("--timeout", type=float, default=1800, metavar="S",
                    help="give check and coqc S seconds each")
    ap.add_argument("--no-relax", action="store_true",
                    help="certificates of check --no-relax (every ReLU fixed per cell) instead "
                    "of check's default (relaxed leaves)")
    args = ap.parse_args(argv)
    if not os.path.isfile(os.path.join(PROOFS, "Property.vo")):
        sys.exit("build the Coq library first: make -C proofs")
    given = dict(c.split("=", 1) for c in args.cert)
    rows = []
    print("| instance | check --cert | leaves | export | .v | coqc (wall) | coqc (user) | peak | "
          "peak, side by side | accepted |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as folder:
        net, prop = os.path.join(folder, "relu.json"), os.path.join(folder, "relu.vnnlib")
        with open(net, "w") as f:
            json.dump(RELU_NET, f)
        with open(prop, "w") as f:
            f.write(RELU_PROP)
        todo = [("relu-abs", net, prop)]
        if not args.quick and os.path.isdir(DATA):
            todo += [(f"vnncomp-{n}", os.path.join(DATA, f"test_{n}.onnx"),
                      os.path.join(DATA, f"test_{n}.vnnlib")) for n in ("nano", "tiny", "small")]
            small = os.path.join(folder, "prop3_box1e-4.vnnlib")
            with open(small, "w") as f:
                f.write(shrunk_prop3(1e-4))
            todo.append(("acas-1-6-prop3-box1e-4", os.path.join(DATA, "test_unsat.onnx"), small))
            tenth = os.path.join(folder, "prop3_box0.1.vnnlib")
            with open(tenth, "w") as f:
                f.write(shrunk_prop3(0.1))
            todo.append(("acas-1-6-prop3-box0.1", os.path.join(DATA, "test_unsat.onnx"), tenth))
            todo.append(("acas-1-6-prop3", os.path.join(DATA, "test_unsat.onnx"),
                         os.path.join(DATA, "test_prop.vnnlib")))
            acas = benchdata.folder("acasxu")
            if os.path.isdir(acas):
                todo.append(("acas-1-6-prop1",
                             os.path.join(acas, "onnx", "ACASXU_run2a_1_6_batch_2000.onnx"),
                             os.path.join(acas, "vnnlib", "prop_1.vnnlib")))
        for name, n, p in (t for t in todo if t[0] not in args.skip
                           and (not args.only or t[0] in args.only)):
            r = instance(name, n, p, given.get(name), folder, args.timeout, args.no_relax,
                         args.parts)
            rows.append(r)
            if r.get("answer") != "unsat":
                print(f"| {name} | {r['check_s']} s | {r.get('answer')} | | | | | | | |")
                continue
            ok = "yes" if r.get("coq_ok") else f"no: {r.get('why', '')}"
            print(f"| {name} | {r['check_s']}{' s' if r['check_s'] != 'given' else ''} | "
                  f"{r['leaves']} | {r['export_s']} s | {r['v_kb']} KB | {r['coqc_s']} s | "
                  f"{r.get('coqc_user_s')} s | {r.get('coqc_mb')} MB | "
                  f"{r.get('coqc_side_mb', r.get('coqc_mb'))} MB | {ok} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
