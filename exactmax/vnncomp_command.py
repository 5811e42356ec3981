"""``exactmax vnncomp``: a VNN-COMP benchmark run, in the competition's own formats.

A benchmark is an ``instances.csv`` of lines ``onnx,vnnlib,timeout_seconds`` (paths relative
to the file's folder, as VNN-COMP's benchmark repositories write them).  Each instance is one
``exactmax check`` in a child process of its own (so that no memory or state carries over),
with the instance's limit as its hard ``--timeout`` less a start-up allowance (``--margin``).

What it writes, as VNN-COMP's harness does:

- the results CSV (``--out``): one line ``category,onnx,vnnlib,prepare_time,result,run_time``
  per instance in the order of ``instances.csv``, ``result`` one of sat, unsat, unknown,
  timeout or error (``error_exit_code_N`` when the child exited with an unexpected status);
  the file is rewritten atomically after every instance, so a long run can be followed and
  resumed (``--resume`` keeps the lines already there);
- per instance, a result file (``--result-dir``): its first line the result, then for sat the
  counterexample ``((X_0 v) ... (Y_0 v) ...)`` with exact decimals;
- with ``--cert-dir``, the kernel-checked certificate of every unsat answer.

The answers are exactmax's usual ones: sat is an exact point the kernel evaluated, unsat a
certificate the kernel checked; anything else is unknown (or timeout, when the limit passed).
As in VNN-COMP's scoring, an answer that arrives after the instance's limit (wall time of the
child, start-up included) counts as a timeout.
``--instance ONNX VNNLIB`` runs one instance as VNN-COMP's ``run_instance.sh`` does (the
scripts in ``examples/vnncomp/`` call it): the result file, nothing else.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import random
import resource
import subprocess
import sys
import time
from dataclasses import dataclass

from . import jsonout
from .exits import EXIT_OK, EXIT_UNKNOWN, UsageError
from .io.errors import InputError
from .io.models import write_bytes_atomic

RESULTS = ("sat", "unsat", "unknown", "timeout")
EXIT_RESULT = {0: "unsat", 1: "sat", 3: "unknown"}


@dataclass(frozen=True)
class Instance:
    onnx: str  # as written in instances.csv
    vnnlib: str
    timeout: float
    line: int  # in instances.csv

    def name(self) -> str:
        """A file name for the instance's outputs: the two stems, joined."""
        stem = [os.path.basename(p) for p in (self.onnx, self.vnnlib)]
        for ext in (".gz", ".onnx", ".vnnlib"):
            stem = [s[: -len(ext)] if s.endswith(ext) else s for s in stem]
        return f"{stem[0]}__{stem[1]}"


def read_instances(path: str) -> list[Instance]:
    """The instances of a VNN-COMP ``instances.csv``: every non-blank line
    ``onnx,vnnlib,timeout_seconds`` with both files present beside it and a positive finite
    limit; InputError naming the line otherwise (nothing runs on a file that is half right)."""
    from .io.jsonfile import read_text_file

    text = read_text_file(path, "a VNN-COMP instances.csv")
    folder = os.path.dirname(os.path.abspath(path))
    out = []
    for n, row in enumerate(csv.reader(io.StringIO(text)), 1):
        if not row or all(not c.strip() for c in row):
            continue
        where = f"{path}:{n}"
        if len(row) != 3:
            raise InputError(
                where, "", f"expected onnx,vnnlib,timeout_seconds, got {len(row)} fields"
            )
        onnx, vnnlib, limit = (c.strip() for c in row)
        try:
            seconds = float(limit)
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds > 0):
            raise InputError(where, "", f"the timeout {limit!r} is not a positive number")
        for role, p in (("onnx", onnx), ("vnnlib", vnnlib)):
            if not os.path.isfile(os.path.join(folder, p)):
                raise InputError(
                    where,
                    "",
                    f"the {role} file {p} does not exist (paths are relative to the folder "
                    f"of instances.csv; VNN-COMP's repositories ship some files gzipped: "
                    f"gunzip them first)",
                )
        out.append(Instance(onnx, vnnlib, seconds, n))
    if not out:
        raise InputError(path, "", "no instances (expected lines onnx,vnnlib,timeout_seconds)")
    return out


def _child_result(status: int, stdout: str) -> tuple[str, dict]:
    """The VNN-COMP result of a ``check --json`` child: sat / unsat / unknown / timeout, or
    error_exit_code_N; and its JSON object ({} if it printed none)."""
    doc: dict = {}
    for line in reversed(stdout.splitlines()):
        try:
            doc = json.loads(line)
            break
        except ValueError:
            continue
    if status not in EXIT_RESULT:
        return f"error_exit_code_{status}", doc
    result = EXIT_RESULT[status]
    if result == "unknown" and "timeout" in str(doc.get("reason") or ""):
        result = "timeout"
    if doc.get("verdict") not in (None, EXIT_RESULT[status]):
        return f"error_exit_code_{status}", doc  # the status and the answer disagree
    return result, doc


def run_one(
    onnx: str,
    vnnlib: str,
    timeout: float,
    margin: float,
    result_file: str | None,
    cert: str | None,
    workers: int | None,
) -> dict:
    """Run ``exactmax check`` on one instance in a child process; write the result file
    (first line the result; after sat the counterexample); return what happened."""
    limit = max(timeout - margin, 0.5)
    cex = (result_file or os.devnull) + ".cex"
    argv = [sys.executable, "-m", "exactmax", "check", onnx, vnnlib, "--json"]
    argv += ["--timeout", repr(limit)]
    if result_file:
        argv += ["--counterexample", cex]
    if cert:
        argv += ["--cert", cert]
    if workers is not None:
        argv += ["--workers", str(workers)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    started = time.monotonic()
    try:
        # the child's own limit is hard (exactmax's supervisor); this one is a safety net
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 30)
        status, stdout, stderr = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired:
        status, stdout, stderr = None, "", "the child exceeded the limit by 30 s and was killed"
    wall = time.monotonic() - started
    user = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before
    if status is None:
        result, doc = "timeout", {}
    else:
        result, doc = _child_result(status, stdout)
    reason = doc.get("reason")
    if wall > timeout and result in ("sat", "unsat", "unknown"):
        # VNN-COMP counts an answer given after the instance's limit as a timeout
        result, reason = (
            "timeout",
            (f"timeout: answered {result} after {wall:.2f} s, past the limit of {timeout:g} s"),
        )
    if result == "sat" and not (result_file and os.path.isfile(cex)):
        if result_file:
            result = "error_exit_code_1"  # a sat without its counterexample file
    if result_file:
        text = result + "\n"
        if result == "sat":
            with open(cex, encoding="utf-8") as f:
                body = f.read()
            text = body if body.startswith("sat\n") else "sat\n" + body
        write_bytes_atomic(result_file, text.encode())
        if os.path.exists(cex):
            os.unlink(cex)
    return {
        "result": result,
        "run_time": round(wall, 3),
        "user_s": round(user, 3),
        "reason": reason,
        "stats": {k: doc.get("stats", {}).get(k) for k in ("leaves", "kernel_check_s")},
        "stderr": stderr.strip().splitlines()[-1] if stderr.strip() else "",
        "certificate": cert if result == "unsat" and cert else None,
    }


def _results_csv(rows: list[list]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def _previous(out: str | None) -> dict:
    """(onnx, vnnlib) -> the line of an earlier run's results CSV, for --resume."""
    if not out or not os.path.exists(out):
        return {}
    with open(out, encoding="utf-8") as f:
        return {(r[1], r[2]): r for r in csv.reader(f) if len(r) == 6}


def run_vnncomp(args) -> int:
    """``exactmax vnncomp INSTANCES.csv`` or ``--instance ONNX VNNLIB``."""
    if not args.margin >= 0:
        raise UsageError(f"--margin: expected a number of seconds >= 0, got {args.margin}")
    if args.instance:
        if args.instances or args.timeout is None or not args.result_file:
            raise UsageError(
                "--instance ONNX VNNLIB takes --timeout S and --result-file FILE, and no "
                "INSTANCES.csv"
            )
        if not args.timeout > 0:
            raise UsageError(f"--timeout: expected a positive number, got {args.timeout}")
        onnx, vnnlib = args.instance
        r = run_one(onnx, vnnlib, args.timeout, args.margin, args.result_file, None, args.workers)
        if args.json:
            verdict = r["result"] if r["result"] in ("sat", "unsat") else "unknown"
            print(
                jsonout.dumps(
                    {
                        "verdict": verdict,
                        "trust": "kernel-checked" if verdict == "unsat" else None,
                        "reason": None if verdict != "unknown" else r["reason"] or r["result"],
                        "run": r,
                    }
                )
            )
        else:
            print(f"{r['result']} ({r['run_time']:.1f} s)")
        return EXIT_OK
    if not args.instances:
        raise UsageError("expected INSTANCES.csv, or --instance ONNX VNNLIB")
    instances = read_instances(args.instances)
    if args.sample is not None:
        if not 0 < args.sample:
            raise UsageError(f"--sample: expected a positive count, got {args.sample}")
        picked = sorted(
            random.Random(args.seed).sample(range(len(instances)), min(args.sample, len(instances)))
        )
        instances = [instances[i] for i in picked]
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout: expected a positive number, got {args.timeout}")
    folder = os.path.dirname(os.path.abspath(args.instances))
    category = args.category or os.path.basename(folder)
    for d in (args.result_dir, args.cert_dir):
        if d:
            os.makedirs(d, exist_ok=True)
    done = _previous(args.out) if args.resume else {}
    rows: list[list] = []
    report = []
    counts = dict.fromkeys((*RESULTS, "error"), 0)
    started = time.monotonic()
    for k, inst in enumerate(instances, 1):
        if (inst.onnx, inst.vnnlib) in done:
            row = done[(inst.onnx, inst.vnnlib)]
            rows.append(row)
            counts[row[4] if row[4] in RESULTS else "error"] += 1
            continue
        limit = min(inst.timeout, args.timeout) if args.timeout else inst.timeout
        name = inst.name()
        r = run_one(
            os.path.join(folder, inst.onnx),
            os.path.join(folder, inst.vnnlib),
            limit,
            args.margin,
            os.path.join(args.result_dir, name + ".txt") if args.result_dir else None,
            os.path.join(args.cert_dir, name + ".json.gz") if args.cert_dir else None,
            args.workers,
        )
        counts[r["result"] if r["result"] in RESULTS else "error"] += 1
        rows.append([category, inst.onnx, inst.vnnlib, 0, r["result"], r["run_time"]])
        report.append({"onnx": inst.onnx, "vnnlib": inst.vnnlib, "timeout": limit, **r})
        if args.out:
            write_bytes_atomic(args.out, _results_csv(rows))
        if not args.quiet:
            print(
                f"[{k}/{len(instances)}] {name}: {r['result']} in {r['run_time']:.1f} s "
                f"(limit {limit:g} s)  totals: "
                + ", ".join(f"{v} {c}" for c, v in counts.items() if v)
                + (f"  [{r['stderr']}]" if r["result"].startswith("error") else ""),
                file=sys.stderr,
                flush=True,
            )
    total = round(time.monotonic() - started, 3)
    summary = {
        "verdict": "done",
        "category": category,
        "instances": len(instances),
        "counts": counts,
        "total_run_time_s": round(sum(float(r[5]) for r in rows), 3),
        "results_csv": args.out,
        "runs": report,
    }
    if args.json:
        print(jsonout.dumps(summary))
    else:
        print(
            f"{category}: {len(instances)} instances in {total:.1f} s: "
            + ", ".join(f"{v} {c}" for c, v in counts.items())
            + (f"; results in {args.out}" if args.out else "")
        )
    return EXIT_OK if counts["error"] == 0 else EXIT_UNKNOWN


def add_parser(sub) -> None:
    v = sub.add_parser(
        "vnncomp",
        help="run a VNN-COMP benchmark (instances.csv) and write its results",
        description="Run every instance of a VNN-COMP benchmark (instances.csv: lines "
        "onnx,vnnlib,timeout_seconds, paths relative to its folder), each as 'exactmax "
        "check' in a child process with the instance's limit as a hard timeout, and write "
        "VNN-COMP's results: a CSV line category,onnx,vnnlib,prepare_time,result,run_time "
        "per instance (result: sat, unsat, unknown, timeout, or error_exit_code_N), a result "
        "file per instance (its first line the result, then a sat answer's counterexample), "
        "the certificates of unsat answers. Progress on stderr. Exit 0 when every instance "
        "ran (whatever the answers), 3 when one ended in an error.",
    )
    v.add_argument("instances", metavar="INSTANCES.csv", nargs="?")
    v.add_argument(
        "--out",
        metavar="RESULTS.csv",
        help="the results CSV (rewritten atomically after each instance)",
    )
    v.add_argument(
        "--result-dir", metavar="DIR", help="one result file per instance here (ONNX_VNNLIB.txt)"
    )
    v.add_argument(
        "--cert-dir",
        metavar="DIR",
        help="the certificate of each unsat answer here (ONNX_VNNLIB.json.gz)",
    )
    v.add_argument("--category", help="the category column (default: the folder of INSTANCES.csv)")
    v.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="at most S seconds per instance (default: its own limit)",
    )
    v.add_argument(
        "--margin",
        type=float,
        default=1.5,
        metavar="S",
        help="seconds of each limit left for starting the child process (default 1.5): "
        "check runs with --timeout LIMIT-S",
    )
    v.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="processes per instance (check --workers; default: the cores)",
    )
    v.add_argument(
        "--sample", type=int, metavar="N", help="a seeded sample of N instances, in file order"
    )
    v.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    v.add_argument(
        "--resume", action="store_true", help="keep the instances already in --out; run the others"
    )
    v.add_argument(
        "--instance",
        nargs=2,
        metavar=("ONNX", "VNNLIB"),
        help="run one instance (with --timeout and --result-file), as VNN-COMP's run_instance.sh",
    )
    v.add_argument(
        "--result-file", metavar="FILE", help="with --instance: the result file to write"
    )
    v.add_argument("--quiet", action="store_true", help="no progress lines")
    v.add_argument(
        "--json", action="store_true", help="print one JSON object: the counts and every run"
    )
    v.set_defaults(run=run_vnncomp)
