"""The long run of exactmax's fuzzing campaign (issue #23): the harness of ``tests/fuzz.py``
(the short run is ``tests/test_fuzz.py``) on many more cases.

    python benchmarks/fuzz.py [--cases 100000] [--tamper 3000] [--subprocess 1000]
                              [--bombs 4] [--io N] [--workers 2] [--seed 0] [--minutes M]
                              [--log OUT.jsonl] [--json OUT.json]
    python benchmarks/fuzz.py --report OUT.jsonl     (the table of a log, finished or not)
    python benchmarks/fuzz.py --replay OUT.jsonl [--into DIR]   (its failures, again)

- ``--cases`` mutated files of every format, each run in-process through a command that
  reads it (``exactmax.cli.main``), commands that prove picked less often (weight 1 / cost);
- ``--subprocess`` more cases as ``python -m exactmax``, with each one's peak memory
  (address space limited to 4 GiB);
- ``--bombs`` gzip files decompressing to 1 GiB + 16 MiB, as subprocesses (the real limit);
- ``--tamper`` tampered certificates through check-cert; an acceptance must be confirmed
  by the independent exact check (reference evaluators at many points, then z3);
- ``--io`` mutated ONNX networks, VNN-LIB 1.0 / 2.0 properties and counterexample files
  (``tests/fuzz_io.py``, issue #36), in-process, every answer on a still valid input
  confirmed independently; their table has its own columns (answers confirmed, imports of
  graphs onnx.checker refuses).

The chunks of cases run in a shuffled order; with ``--minutes`` no chunk starts after that
many minutes, and the table counts the cases that ran.  ``--log`` appends every case as it
finishes (a run that is stopped keeps what it did).  Prints a Markdown table: cases per format and command, exit statuses, failures, worst time,
worst memory (peak RSS of the subprocess cases; of the worker processes for in-process
ones), then the tampering table and every failure.  Exit status 1 when anything failed.

Every record of the log names its chunk's seed and its index in the chunk; ``--replay``
regenerates each failing case from them (the same random choices: command, seed file,
mutation), writes its input into ``--into`` (default: a new temporary folder), prints the
command line and runs it again, in-process, with its time limit.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import resource
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

_STATE = {}


def _one_parser() -> None:
    """In a worker: ``exactmax.cli.main`` parses every case's command line with one parser
    built once (building it takes 20 ms, most of a fast case; argparse parsers can be
    reused, each parse makes a new namespace).  What is fuzzed is unchanged."""
    import exactmax.cli as cli
    if not getattr(cli.build_parser, "built_once", False):
        parser = cli.build_parser()

        def build_parser():
            return parser
        build_parser.built_once = True
        cli.build_parser = build_parser


def _seeds():
    import fuzz
    _one_parser()
    if "seeds" not in _STATE:
        tmp = tempfile.mkdtemp(prefix="exactmax-fuzz-")
        _STATE["seeds"] = fuzz.Seeds(tmp)
        _STATE["work"] = os.path.join(tmp, "work")
        os.mkdir(_STATE["work"])
        _STATE["commands"] = fuzz.commands(_STATE["seeds"])
    return _STATE["seeds"], _STATE["work"], _STATE["commands"]


def _io_seeds():
    """The ONNX / VNN-LIB seeds, work folder and commands of ``tests/fuzz_io.py``."""
    import fuzz_io
    _one_parser()
    if "io_seeds" not in _STATE:
        tmp = tempfile.mkdtemp(prefix="exactmax-fuzz-io-")
        _STATE["io_seeds"] = fuzz_io.IOSeeds(tmp)
        _STATE["io_work"] = os.path.join(tmp, "work")
        os.mkdir(_STATE["io_work"])
        _STATE["io_commands"] = fuzz_io.io_commands()
    return _STATE["io_seeds"], _STATE["io_work"], _STATE["io_commands"]


def io_job(seed, count):
    """A chunk of ONNX / VNN-LIB cases (``tests/fuzz_io.py``), in-process."""
    import fuzz_io
    s, work, cmds = _io_seeds()
    rng = random.Random(seed)
    out = []
    for index in range(count):
        cmd = fuzz_io.pick(rng, cmds)
        seed_file = rng.choice(s.of(cmd.format, cmd.name))
        c = fuzz_io.run_io_case(cmd, seed_file, rng, work, s)
        out.append({"kind": "io", "format": cmd.format, "command": cmd.name,
                    "status": c.status, "seconds": c.seconds, "failure": c.failure,
                    "what": c.mutation, "seed": seed_file.name, "err": c.err[-300:],
                    "confirmed": c.confirmed, "rss_kb": 0, "chunk": seed, "index": index})
    return out


def job(task):
    """Run a chunk of cases: task = (kind, seed, count); a list of records."""
    import fuzz
    (kind, seed, count), deadline = task
    if deadline is not None and time.monotonic() > deadline:
        return []
    if kind == "io":
        out = io_job(seed, count)
        worker_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for r in out:
            r["worker_rss_kb"] = worker_rss
        return out
    s, work, cmds = _seeds()
    rng = random.Random(seed)
    out = []
    for index in range(count):
        if kind == "tamper":
            name = rng.choice(sorted(s.certs))
            c = fuzz.run_tamper_case(name, s.certs[name], rng, work)
            out.append({"kind": kind, "format": "certificate (tampered)", "command": c.source,
                        "status": c.status, "seconds": c.seconds, "failure": c.failure,
                        "what": c.what, "confirmed": c.accepted_ok, "rss_kb": 0,
                        "chunk": seed, "index": index})
            continue
        cmd = fuzz.pick_command(rng, cmds)
        seed_file = rng.choice(s.of(cmd.format))
        bomb = (1 << 30) + (16 << 20) if kind == "bomb" else False
        c = fuzz.run_case(cmd, seed_file, rng, work, subprocess_run=kind != "inprocess",
                          bomb=bomb)
        out.append({"kind": kind, "format": cmd.format, "command": cmd.name,
                    "status": c.status, "seconds": c.seconds, "failure": c.failure,
                    "what": c.mutation, "seed": seed_file.name, "err": c.err[-300:],
                    "rss_kb": c.rss_kb, "chunk": seed, "index": index})
    worker_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for r in out:
        r["kind"] = kind
    for r in out:
        r["worker_rss_kb"] = worker_rss
    return out


def replay(record: dict, into: str) -> int:
    """Regenerate the case of a log ``record`` (its chunk's seed and index: the random
    choices before it are made again, without running anything but tampered certificates,
    whose independent check also draws from the generator), write its input into ``into``,
    print the command line and run it again; the case's exit status and failure, if any."""
    import fuzz
    kind = record["kind"]
    if kind == "io":
        return replay_io(record, into)
    s, work, cmds = _seeds()
    rng = random.Random(record["chunk"])
    for i in range(record["index"] + 1):
        if kind == "tamper":
            name = rng.choice(sorted(s.certs))
            c = fuzz.run_tamper_case(name, s.certs[name], rng, work)
            if i == record["index"]:
                path = os.path.join(into, f"tampered-{record['chunk']}-{i}.json")
                os.replace(os.path.join(work, "tampered.json"), path)
                print(f"exactmax check-cert {path}\n  exit {c.status}: "
                      f"{c.failure or 'no failure'}")
                return 1 if c.failure else 0
            continue
        cmd = fuzz.pick_command(rng, cmds)
        seed_file = rng.choice(s.of(cmd.format))
        if kind == "bomb":     # a chunk of one case, which mutates nothing
            data, what, zipped = fuzz.gzip_bomb((1 << 30) + (16 << 20)), "gzip bomb", True
        else:
            data, what, zipped = fuzz.mutate(seed_file, rng)
        if i < record["index"]:
            continue
        assert (cmd.format, cmd.name) == (record["format"], record["command"]), \
            "the log was written by another version of the harness"
        ext = (".json" if seed_file.json else ".txt") + (".gz" if zipped else "")
        f = os.path.join(into, f"case-{record['chunk']}-{i}{ext}")
        with open(f, "wb") as fh:
            fh.write(data)
        outs = {"o": os.path.join(into, "out.json"), "v": os.path.join(into, "Out.v"),
                "r": os.path.join(into, "ref.json")}
        argv = [a.format(f=f, **outs) for a in cmd.argv]
        print("exactmax " + " ".join(argv) + f"\n  ({cmd.format} / {cmd.name}, {what})")
        c = fuzz.run_case(cmd, seed_file, rng, work, subprocess_run=kind == "subprocess",
                          bomb=(1 << 30) + (16 << 20) if kind == "bomb" else False,
                          mutation=(data, what, zipped))
        print(f"  exit {c.status} in {c.seconds:.1f} s: {c.failure or 'no failure'}"
              + (f"; stderr {c.err[-300:]!r}" if c.err else ""))
        return 1 if c.failure else 0
    return 0


def replay_io(record: dict, into: str) -> int:
    """``replay`` of an ONNX / VNN-LIB case: its mutated file regenerated into ``into``."""
    import fuzz_io
    s, work, cmds = _io_seeds()
    rng = random.Random(record["chunk"])
    for i in range(record["index"] + 1):
        cmd = fuzz_io.pick(rng, cmds)
        seed_file = rng.choice(s.of(cmd.format, cmd.name))
        if seed_file.format == "onnx":
            data, what = fuzz_io.mutate_onnx(seed_file.data, rng)
        else:
            data, what = fuzz_io.mutate_text(seed_file.data.decode("utf-8", "surrogatepass"),
                                             rng)
        if i < record["index"]:
            continue
        assert (cmd.format, cmd.name) == (record["format"], record["command"]), \
            "the log was written by another version of the harness"
        path = os.path.join(into, f"case-{record['chunk']}-{i}.{cmd.format}")
        with open(path, "wb") as fh:
            fh.write(data)
        print(f"{path}: {cmd.format} / {cmd.name} on {seed_file.name} ({what}); argv "
              + " ".join(cmd.argv))
        c = fuzz_io.run_io_case(cmd, seed_file, rng, work, s, mutation=(data, what))
        print(f"  exit {c.status} in {c.seconds:.1f} s: {c.failure or 'no failure'}"
              + (f"; stderr {c.err[-300:]!r}" if c.err else ""))
        return 1 if c.failure else 0
    return 0


def io_table(records) -> str:
    """The table of the ONNX / VNN-LIB cases: exit statuses, what the independent check
    confirmed, failures."""
    rows = collections.defaultdict(lambda: {"cases": 0, "status": collections.Counter(),
                                            "conf": collections.Counter(), "fail": 0,
                                            "time": 0.0})
    for r in records:
        row = rows[(r["format"], r["command"])]
        row["cases"] += 1
        row["status"][r["status"]] += 1
        row["fail"] += bool(r["failure"])
        row["time"] = max(row["time"], r["seconds"])
        c = r.get("confirmed") or ""
        key = ("sat" if c.startswith("sat") else "unsat" if c.startswith("unsat") else
               "invalid" if c.startswith("accepted") else "other" if c and c != "unknown"
               else "")
        if key:
            row["conf"][key] += 1
    lines = ["| format | command | cases | exit 0 | 1 | 2 | 3 | other | sat confirmed | "
             "unsat confirmed | other answers confirmed | accepted, invalid ONNX | failures | "
             "worst time |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
             "---:|"]
    total = collections.Counter()
    for (fmt, cmd), row in sorted(rows.items()):
        st, cf = row["status"], row["conf"]
        other = sum(v for k, v in st.items() if k not in (0, 1, 2, 3))
        vals = [row["cases"], st.get(0, 0), st.get(1, 0), st.get(2, 0), st.get(3, 0), other,
                cf["sat"], cf["unsat"], cf["other"], cf["invalid"], row["fail"]]
        total.update(dict(enumerate(vals)))
        lines.append(f"| {fmt} | {cmd} | " + " | ".join(map(str, vals))
                     + f" | {row['time']:.1f} s |")
    lines.append("| all | | " + " | ".join(str(total[k]) for k in range(11)) + " | "
                 f"{max((r['seconds'] for r in records), default=0):.1f} s |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=100000)
    ap.add_argument("--subprocess", type=int, default=1000)
    ap.add_argument("--bombs", type=int, default=4)
    ap.add_argument("--tamper", type=int, default=3000)
    ap.add_argument("--io", type=int, default=0, metavar="N",
                    help="N more cases of ONNX networks, VNN-LIB 1.0 / 2.0 properties and "
                    "counterexample files (tests/fuzz_io.py), in-process")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunk", type=int, default=200)
    ap.add_argument("--json", metavar="OUT.json", help="also write every failure and the "
                    "counts as JSON")
    ap.add_argument("--minutes", type=float, default=None,
                    help="start no chunk of cases after this many minutes")
    ap.add_argument("--log", metavar="OUT.jsonl", help="append every case as it finishes")
    ap.add_argument("--report", metavar="LOG.jsonl", help="only print the table of a log")
    ap.add_argument("--replay", metavar="LOG.jsonl", help="run the failures of a log again")
    ap.add_argument("--into", metavar="DIR", help="with --replay: where to write the inputs")
    args = ap.parse_args()
    if args.replay:
        with open(args.replay) as f:
            fails = [r for r in map(json.loads, filter(str.strip, f))
                     if r.get("failure") and "chunk" in r]
        into = args.into or tempfile.mkdtemp(prefix="exactmax-replay-")
        os.makedirs(into, exist_ok=True)
        print(f"{len(fails)} failures to replay; inputs in {into}")
        return 1 if sum(replay(r, into) for r in fails) else 0
    if args.report:
        with open(args.report) as f:
            lines = [json.loads(l) for l in f if l.strip()]
        head = lines[0]
        args.workers, args.seed = head["workers"], head["seed"]
        records = [r for r in lines[1:] if "kind" in r]
        print(table(records, lines[-1].get("elapsed_s", 0.0), args))
        return 1 if any(r["failure"] for r in records) else 0
    tasks = []
    n = 0
    for kind, total, chunk in (("tamper", args.tamper, 25), ("bomb", args.bombs, 1),
                               ("subprocess", args.subprocess, 50),
                               ("inprocess", args.cases, args.chunk),
                               ("io", args.io, args.chunk)):
        for start in range(0, total, chunk):
            tasks.append((kind, args.seed * 10 ** 7 + n, min(chunk, total - start)))
            n += 1
    random.Random(args.seed).shuffle(tasks)
    t0 = time.monotonic()
    records = []
    log = open(args.log, "a") if args.log else None
    if log:
        log.write(json.dumps({"workers": args.workers, "seed": args.seed,
                              "args": vars(args)}) + "\n")
    deadline = None if args.minutes is None else t0 + 60 * args.minutes
    tasks = [(t, deadline) for t in tasks]
    import multiprocessing
    with multiprocessing.get_context("fork").Pool(args.workers, maxtasksperchild=20) as pool:
        done = 0
        for chunk in pool.imap_unordered(job, tasks):
            records += chunk
            done += 1
            for r in chunk:
                if log:
                    log.write(json.dumps(r) + "\n")
                if r["failure"]:
                    print(f"  FAILURE {r['format']} / {r['command']} ({r.get('seed', '')}, "
                          f"{r['what']}): {r['failure']}; {r.get('err', '')!r}",
                          file=sys.stderr, flush=True)
            if log:
                log.write(json.dumps({"elapsed_s": time.monotonic() - t0}) + "\n")
                log.flush()
            if done % 25 == 0 or done == len(tasks):
                fails = sum(1 for r in records if r["failure"])
                print(f"  {done}/{len(tasks)} chunks, {len(records)} cases, {fails} failures, "
                      f"{time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    elapsed = time.monotonic() - t0
    print(table(records, elapsed, args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "elapsed_s": elapsed,
                       "failures": [r for r in records if r["failure"]],
                       "cases": len(records)}, f, indent=1)
    return 1 if any(r["failure"] for r in records) else 0


def table(records, elapsed, args) -> str:
    io = [r for r in records if r["kind"] == "io"]
    json_records = [r for r in records if r["kind"] != "io"]
    if not io:
        return json_table(json_records, elapsed, args)
    head = (f"{len(records)} cases run in {elapsed / 60:.1f} min on {args.workers} workers "
            f"(seed {args.seed}): {sum(1 for r in records if r['failure'])} failures")
    parts = [head, "", "ONNX and VNN-LIB cases:", "", io_table(io)]
    if json_records:
        parts += ["", json_table(json_records, elapsed, args)]
    fails = [r for r in io if r["failure"]]
    if fails:
        parts += ["", "Failures:"] + [
            f"- {r['format']} / {r['command']} ({r.get('seed', '')}, {r['what']}): "
            f"{r['failure']}; {r.get('err', '')!r}" for r in fails[:40]]
    return "\n".join(parts)


def json_table(records, elapsed, args) -> str:
    rows = collections.defaultdict(lambda: {"cases": 0, "status": collections.Counter(),
                                            "fail": 0, "time": 0.0, "rss": 0, "wrss": 0,
                                            "sub": 0})
    for r in records:
        if r["kind"] == "tamper":
            continue
        row = rows[(r["format"], r["command"])]
        row["cases"] += 1
        row["status"][r["status"]] += 1
        row["fail"] += bool(r["failure"])
        row["time"] = max(row["time"], r["seconds"])
        if r["kind"] != "inprocess":
            row["sub"] += 1
            row["rss"] = max(row["rss"], r["rss_kb"])
        row["wrss"] = max(row["wrss"], r["worker_rss_kb"])
    lines = [f"{len(records)} cases run in {elapsed / 60:.1f} min on {args.workers} workers "
             f"(seed {args.seed}): {sum(1 for r in records if r['failure'])} failures", "",
             "| format | command | cases (subprocess) | exit 0 | 1 | 2 | 3 | 4 | 5 | failures | "
             "worst time | worst RSS (subprocess / worker) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (fmt, cmd), row in sorted(rows.items()):
        st = row["status"]
        sub_rss = f"{row['rss'] // 1024} MiB" if row["sub"] else "-"
        lines.append(f"| {fmt} | {cmd} | {row['cases']} ({row['sub']}) | "
                     + " | ".join(str(st.get(k, 0)) for k in range(6))
                     + f" | {row['fail']} | {row['time']:.1f} s | {sub_rss} / "
                     f"{row['wrss'] // 1024} MiB |")
    tot = collections.Counter(r["status"] for r in records if r["kind"] != "tamper")
    lines.append(f"| all | | {sum(tot.values())} | " + " | ".join(str(tot.get(k, 0))
                                                                  for k in range(6))
                 + f" | {sum(1 for r in records if r['failure'] and r['kind'] != 'tamper')}"
                 f" | {max((r['seconds'] for r in records), default=0):.1f} s | "
                 f"{max((r['rss_kb'] for r in records), default=0) // 1024} MiB / "
                 f"{max((r['worker_rss_kb'] for r in records), default=0) // 1024} MiB |")
    tam = [r for r in records if r["kind"] == "tamper"]
    if tam:
        lines += ["", "| tampered certificate | cases | rejected (1) | unreadable (2) | "
                  "accepted, claim confirmed | vacuous, confirmed | failures |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        by = collections.defaultdict(list)
        for r in tam:
            by[r["command"]].append(r)
        for name, rs in sorted(by.items()):
            lines.append(f"| {name} | {len(rs)} | {sum(r['status'] == 1 for r in rs)} | "
                         f"{sum(r['status'] == 2 for r in rs)} | "
                         f"{sum(r['status'] == 0 and bool(r['confirmed']) for r in rs)} | "
                         f"{sum(r['status'] == 5 and bool(r['confirmed']) for r in rs)} | "
                         f"{sum(bool(r['failure']) for r in rs)} |")
    fails = [r for r in records if r["failure"]]
    if fails:
        lines += ["", "Failures:"]
        for r in fails[:40]:
            lines.append(f"- {r['format']} / {r['command']} ({r.get('seed', '')}, "
                         f"{r['what']}): {r['failure']}; {r.get('err', '')!r}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
