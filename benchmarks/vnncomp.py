"""exactmax on a VNN-COMP category, and Marabou 2.0 and NeuralSAT side by side in the same run.

    python benchmarks/vnncomp.py [INSTANCES.csv | DIR] [--peers marabou,neuralsat]
        [--peers-venv VENV] [--sample N] [--seed S] [--cores N] [--timeout S]
        [--cert-dir DIR] [--no-recheck] [--log RUNS.jsonl] [--resume]

INSTANCES.csv (or DIR/instances.csv; default the ``vnncomp2022-test`` folder of
$EXACTMAX_BENCH_DATA, else ../shared/data beside this checkout: docs/benchmarks.md, "Benchmark
data") has lines onnx,vnnlib,timeout relative to its folder.  ``--sample N --seed S`` takes the
same seeded sample, in file order, as ``exactmax vnncomp --sample N --seed S``.

Per instance, one tool after the other, each as its own process pinned to the same ``--cores``
CPUs (the last ones of the machine: with ``--cores 1`` on two cores, other work can use the
first) with the instance's limit (or ``--timeout``):

- exactmax: ``exactmax check NET PROP --timeout LIMIT --workers N --json --cert C
  --counterexample X``; an unsat's certificate is re-read by ``exactmax check-cert`` in a
  second process (not with ``--no-recheck``; the kernel has checked it in memory before the
  answer either way) and a sat's counterexample replayed by ``exactmax replay``.  The row
  also carries the kernel's share of the time (``stats.kernel_check_s / time_s``).
- Marabou 2.0 (``--peers marabou``): its command line ``Marabou NET PROP --timeout LIMIT
  --num-workers N --summary-file F``; the answer is the summary's first word.
- NeuralSAT (``--peers neuralsat``): its ``main.py --net NET --spec PROP --timeout LIMIT
  --device cpu --result_file F --export_cex`` with ``OMP_NUM_THREADS=N``; a sat's
  counterexample (VNN-COMP's format) is replayed exactly by ``exactmax replay``: a peer's
  float counterexample that is not one exactly is shown as "spurious".

The peers live in their own virtual environment (NeuralSAT installs a top-level package named
``src`` and several GB of torch), named by ``--peers-venv`` or $EXACTMAX_PEERS_VENV:

    python -m venv peers && peers/bin/pip install maraboupy==2.0.0 neuralsat==0.2.17 \\
        numpy onnx onnxruntime

A process that outlives its limit by 60 s is killed (timeout).  Wall times are measured here,
start-up included, for every tool alike.  Every run is appended to ``--log`` (JSON lines) as it
ends; ``--resume`` skips the (tool, instance) pairs already there, so a long run can go on
after an interruption.  At the end: a table per instance, then per tool the counts, the total
time on the instances every tool ran, and any disagreement (a sat against an unsat: an exact
replay shows who is right).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import benchdata

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = benchdata.folder("vnncomp2022-test")
GRACE_S = 60.0
DECIDED = ("sat", "unsat")
# Known answers of the test category (its README and the networks' ranges: docs/benchmarks.md);
# an EXPECTED fourth column in instances.csv overrides them.
KNOWN = {("test_nano.onnx", "test_nano.vnnlib"): "unsat",
         ("test_tiny.onnx", "test_tiny.vnnlib"): "unsat",
         ("test_small.onnx", "test_small.vnnlib"): "unsat",
         ("test_sat.onnx", "test_prop.vnnlib"): "sat",
         ("test_unsat.onnx", "test_prop.vnnlib"): "unsat"}


def fail(message: str) -> SystemExit:
    """Print ``vnncomp.py: error: MESSAGE`` (one line) and return the exit of status 2 to raise."""
    print(f"vnncomp.py: error: {message}", file=sys.stderr)
    return SystemExit(2)


def read_instances(path: str) -> list[tuple[str, str, float, str]]:
    """The lines (onnx, vnnlib, limit, expected) of an instances.csv, paths as written."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(csv.reader(f), 1):
            if not line or line[0].lstrip().startswith("#"):
                continue
            cells = [c.strip() for c in line]
            try:
                limit = float(cells[2])
            except (IndexError, ValueError):
                raise fail(f"{path}:{n}: expected onnx,vnnlib,timeout, "
                                 f"got {','.join(cells)!r}") from None
            known = KNOWN.get((os.path.basename(cells[0]), os.path.basename(cells[1])), "?")
            rows.append((cells[0], cells[1], limit, cells[3] if len(cells) > 3 else known))
    return rows


def sample(rows: list, n: int | None, seed: int) -> list:
    """``exactmax vnncomp``'s seeded sample: n line numbers drawn by random.Random(seed), kept in
    file order."""
    if n is None:
        return rows
    keep = set(random.Random(seed).sample(range(len(rows)), min(n, len(rows))))
    return [r for i, r in enumerate(rows) if i in keep]


class Runner:
    """Runs one tool's process pinned to ``cpus``, killed GRACE_S after its limit."""

    def __init__(self, cpus: set[int]):
        self.cpus = cpus

    def run(self, cmd: list[str], limit: float, env: dict | None = None, cwd: str | None = None):
        """(exit status or None when killed, stdout, stderr, wall seconds)."""
        t0 = time.monotonic()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit + GRACE_S,
                               env=env, cwd=cwd,
                               preexec_fn=lambda: os.sched_setaffinity(0, self.cpus))
            return r.returncode, r.stdout, r.stderr, time.monotonic() - t0
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            return None, out, "", time.monotonic() - t0


def exactmax_cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "exactmax", *args]


def run_exactmax(runner: Runner, net: str, prop: str, limit: float, cores: int, work: str,
                 recheck: bool) -> dict:
    cert, cex = os.path.join(work, "cert.json.gz"), os.path.join(work, "cex.txt")
    for f in (cert, cex):
        if os.path.exists(f):
            os.remove(f)
    code, out, err, wall = runner.run(exactmax_cli(
        "check", net, prop, "--timeout", f"{limit:g}", "--workers", str(cores), "--json",
        "--cert", cert, "--counterexample", cex), limit)
    rec: dict = {"wall": wall}
    if code is None:
        rec["result"] = "timeout"
        return rec
    try:
        res = json.loads(out)
        rec["result"] = res["verdict"]
    except (ValueError, KeyError):
        rec["result"] = f"error {code}"
        rec["note"] = (err.strip().splitlines() or [""])[-1][:100]
        return rec
    stats = res.get("stats") or {}
    if stats.get("kernel_check_s") is not None and res.get("time_s"):
        rec["kernel_s"] = stats["kernel_check_s"]
        rec["time_s"] = res["time_s"]
    if rec["result"] == "unknown":
        rec["note"] = (res.get("reason") or "")[:80]
    elif rec["result"] == "sat":
        c, _, _, _ = runner.run(exactmax_cli("replay", net, prop, cex, "--json"), 600)
        rec["note"] = "counterexample replayed exactly" if c == 0 else \
            "counterexample REJECTED on replay"
        rec["backed"] = c == 0
    elif recheck:
        c, o, _, _ = runner.run(exactmax_cli("check-cert", cert, "--json"), 3600)
        rec["note"] = "certificate re-checked by check-cert" if c == 0 else \
            "certificate REJECTED on re-check"
        rec["backed"] = c == 0
    else:
        rec["note"] = "certificate checked by the kernel"
        rec["backed"] = True
    if wall > limit and rec["result"] in DECIDED:
        rec["note"] += f"; over the limit ({wall:.0f} s)"
    return rec


def run_marabou(runner: Runner, venv: str, net: str, prop: str, limit: float, cores: int,
                work: str) -> dict:
    summary = os.path.join(work, "marabou.summary")
    if os.path.exists(summary):
        os.remove(summary)
    code, out, err, wall = runner.run(
        [os.path.join(venv, "bin", "Marabou"), net, prop, "--timeout", str(int(limit)),
         "--num-workers", str(cores), "--verbosity", "0", "--summary-file", summary], limit,
        cwd=work)
    if code is None:
        return {"result": "timeout", "wall": wall}
    try:
        with open(summary, encoding="utf-8") as f:
            word = f.read().split()[0].lower()
    except (OSError, IndexError):
        return {"result": f"error {code}", "wall": wall,
                "note": ((err or out).strip().splitlines() or [""])[-1][:100]}
    return {"result": word if word in DECIDED + ("timeout",) else "unknown", "wall": wall,
            "note": "" if word in DECIDED + ("timeout",) else word}


def neuralsat_main(venv: str) -> str:
    """The path of NeuralSAT's main.py inside ``venv`` (its package is named ``src``)."""
    out = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                          "import importlib.util as u; print(u.find_spec('src').origin)"],
                         capture_output=True, text=True)
    path = os.path.join(os.path.dirname(out.stdout.strip()), "main.py")
    if out.returncode or not os.path.isfile(path):
        raise fail(f"NeuralSAT not found in {venv} (its package 'src' "
                         "with main.py); install it: VENV/bin/pip install neuralsat==0.2.17")
    return path


def run_neuralsat(runner: Runner, venv: str, main: str, net: str, prop: str, limit: float,
                  cores: int, work: str) -> dict:
    result = os.path.join(work, "neuralsat.txt")
    if os.path.exists(result):
        os.remove(result)
    env = dict(os.environ, OMP_NUM_THREADS=str(cores), MKL_NUM_THREADS=str(cores))
    code, out, err, wall = runner.run(
        [os.path.join(venv, "bin", "python"), main, "--net", net, "--spec", prop,
         "--timeout", f"{limit:g}", "--device", "cpu", "--verbosity", "0",
         "--result_file", result, "--export_cex"], limit, env=env, cwd=os.path.dirname(main))
    if code is None:
        return {"result": "timeout", "wall": wall}
    try:
        with open(result, encoding="utf-8") as f:
            word = f.readline().strip().split(",")[0].lower()
    except OSError:
        return {"result": f"error {code}", "wall": wall,
                "note": ((err or out).strip().splitlines() or [""])[-1][:100]}
    rec = {"result": word if word in DECIDED + ("timeout",) else "unknown", "wall": wall}
    if word == "sat":
        c, _, _, _ = runner.run(exactmax_cli("replay", net, prop, result, "--json"), 600)
        rec["note"] = "counterexample exact" if c == 0 else "counterexample SPURIOUS (exact replay)"
        rec["backed"] = c == 0
    return rec


def summarise(rows: list, tools: list[str], runs: dict) -> str:
    """The per-tool summary (Markdown)."""
    key = lambda r: (r[0], r[1])  # noqa: E731
    common = [r for r in rows if all((t, *key(r)) in runs for t in tools)]
    out = ["| tool | instances | sat | unsat | undecided | wrong | total time (s) | "
           "median, decided (s) |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    truth = {}
    for r in common:
        answers = {runs[(t, *key(r))]["result"] for t in tools
                   if runs[(t, *key(r))].get("backed")
                   and runs[(t, *key(r))]["result"] in DECIDED}
        known = r[3] if r[3] in DECIDED else None
        truth[key(r)] = known or (answers.pop() if len(answers) == 1 else None)
    for t in tools:
        recs = [(r, runs[(t, *key(r))]) for r in common]
        res = [x["result"] for _, x in recs]
        decided = [x["wall"] for _, x in recs if x["result"] in DECIDED]
        wrong = sum(1 for r, x in recs if x["result"] in DECIDED and truth[key(r)] is not None
                    and x["result"] != truth[key(r)])
        total = sum(x["wall"] for _, x in recs)
        out.append(f"| {t} | {len(recs)} | {res.count('sat')} | {res.count('unsat')} | "
                   f"{len(recs) - len(decided)} | {wrong} | {total:.1f} | "
                   f"{statistics.median(decided) if decided else 0:.1f} |")
    both = [r for r in common if all(runs[(t, *key(r))]["result"] in DECIDED for t in tools)]
    if len(tools) > 1 and both:
        out.append("")
        out.append(f"On the {len(both)} instances every tool decided: " + ", ".join(
            f"{t} {sum(runs[(t, *key(r))]['wall'] for r in both):.1f} s" for t in tools) + ".")
    clash = [r for r in common if len({runs[(t, *key(r))]['result'] for t in tools}
                                      & set(DECIDED)) > 1]
    out.append("")
    out.append("Disagreements (sat against unsat): " + ("none" if not clash else "; ".join(
        f"{r[0]} {r[1]}: " + ", ".join(f"{t} {runs[(t, *key(r))]['result']}" for t in tools)
        + f" (exact: {truth[key(r)] or '?'})" for r in clash)))
    shares = sorted(((runs[("exactmax", *key(r))]["wall"], r, runs[("exactmax", *key(r))])
                     for r in common if runs[("exactmax", *key(r))]["result"] == "unsat"
                     and "kernel_s" in runs[("exactmax", *key(r))]), key=lambda s: -s[0])[:10]
    if "exactmax" in tools and shares:
        ker = sum(x["kernel_s"] for _, _, x in shares)
        tot = sum(x["time_s"] for _, _, x in shares)
        out.append("")
        out.append(f"exactmax, the {len(shares)} slowest unsat instances: the kernel's check "
                   f"{ker:.1f} s of {tot:.1f} s ({100 * ker / tot:.0f}%).")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("instances", nargs="?", default=DEFAULT_DIR,
                    help="instances.csv, or the folder holding it")
    ap.add_argument("--peers", default="", metavar="TOOLS",
                    help="comma-separated: marabou, neuralsat")
    ap.add_argument("--peers-venv", default=os.environ.get("EXACTMAX_PEERS_VENV"), metavar="VENV",
                    help="the virtual environment holding the peers ($EXACTMAX_PEERS_VENV)")
    ap.add_argument("--sample", type=int, metavar="N",
                    help="a seeded sample of N instances, in file order")
    ap.add_argument("--seed", type=int, default=0, metavar="S",
                    help="the sample's seed (default 0)")
    ap.add_argument("--cores", type=int, default=1, metavar="N", help="CPUs per tool (default 1)")
    ap.add_argument("--timeout", type=float, metavar="S",
                    help="override every instance's time limit")
    ap.add_argument("--cert-dir", metavar="DIR",
                    help="keep exactmax's certificates and counterexamples here")
    ap.add_argument("--no-recheck", action="store_true",
                    help="skip check-cert on exactmax's unsat certificates")
    ap.add_argument("--log", metavar="RUNS.jsonl", help="append every run here (JSON lines)")
    ap.add_argument("--resume", action="store_true", help="skip the runs already in --log")
    args = ap.parse_args()
    path = args.instances
    if os.path.isdir(path):
        path = os.path.join(path, "instances.csv")
    if args.instances == DEFAULT_DIR:
        benchdata.require("vnncomp2022-test", "instances.csv")
    if not os.path.isfile(path):
        raise fail(f"{path}: no such file (expected an instances.csv)")
    base = os.path.dirname(os.path.abspath(path))
    peers = [p for p in args.peers.split(",") if p]
    for p in peers:
        if p not in ("marabou", "neuralsat"):
            raise fail(f"--peers: unknown tool {p!r} "
                             "(expected marabou, neuralsat)")
    if peers and not (args.peers_venv and os.path.isdir(args.peers_venv)):
        raise fail("--peers needs --peers-venv VENV (or "
                         "$EXACTMAX_PEERS_VENV): a virtual environment with maraboupy==2.0.0 and "
                         "neuralsat==0.2.17 (see this script's docstring)")
    marabou = os.path.join(args.peers_venv or "", "bin", "Marabou")
    if "marabou" in peers and not os.path.isfile(marabou):
        raise fail(f"{marabou}: no Marabou here; install it: "
                         "VENV/bin/pip install maraboupy==2.0.0")
    ncpu = os.cpu_count() or 1
    if not 0 < args.cores <= ncpu:
        raise fail(f"--cores: expected 1..{ncpu}, got {args.cores}")
    cpus = set(range(ncpu - args.cores, ncpu))
    main_py = neuralsat_main(args.peers_venv) if "neuralsat" in peers else ""
    tools = ["exactmax", *peers]
    rows = sample(read_instances(path), args.sample, args.seed)
    runs: dict = {}
    if args.resume and args.log and os.path.exists(args.log):
        with open(args.log, encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                runs[(r["tool"], r["onnx"], r["vnnlib"])] = r
    work = os.path.abspath(args.cert_dir or tempfile.mkdtemp(prefix="exactmax-vnncomp-"))
    os.makedirs(work, exist_ok=True)
    runner = Runner(cpus)
    print(f"{len(rows)} instances, tools {', '.join(tools)}, {args.cores} CPU(s) each "
          f"({sorted(cpus)}); load average at the start {os.getloadavg()[0]:.1f}\n",
          flush=True)
    print("| instance | limit (s) | " + " | ".join(f"{t} | s" for t in tools) + " | notes |")
    print("|---|---:|" + "---|---:|" * len(tools) + "---|", flush=True)
    for n, (net, prop, limit, expected) in enumerate(rows):
        limit = args.timeout or limit
        netp, propp = os.path.join(base, net), os.path.join(base, prop)
        for t in tools:
            if (t, net, prop) in runs:
                continue
            inst = os.path.join(work, f"{n}-{t}")
            os.makedirs(inst, exist_ok=True)
            if t == "exactmax":
                rec = run_exactmax(runner, netp, propp, limit, args.cores, inst,
                                   not args.no_recheck)
            elif t == "marabou":
                rec = run_marabou(runner, args.peers_venv, netp, propp, limit, args.cores, inst)
            else:
                rec = run_neuralsat(runner, args.peers_venv, main_py, netp, propp, limit,
                                    args.cores, inst)
            rec.update(tool=t, onnx=net, vnnlib=prop, limit=limit)
            runs[(t, net, prop)] = rec
            if args.log:
                with open(args.log, "a", encoding="utf-8") as f:
                    f.write(json.dumps(rec) + "\n")
        cells = " | ".join(f"{runs[(t, net, prop)]['result']} | {runs[(t, net, prop)]['wall']:.1f}"
                           for t in tools)
        notes = "; ".join(f"{t}: {runs[(t, net, prop)]['note']}" for t in tools
                          if runs[(t, net, prop)].get("note"))
        if expected != "?":
            notes = f"expected {expected}; " + notes
        print(f"| {os.path.basename(net)} {os.path.basename(prop)} | {limit:g} | {cells} | "
              f"{notes} |", flush=True)
    print()
    print(summarise(rows, tools, runs))
    print(f"\n(certificates and counterexamples in {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
