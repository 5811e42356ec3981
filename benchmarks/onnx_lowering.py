"""Importing VNN-COMP's ONNX networks (convolutional, residual, fully connected) as exact Maxout
networks: what each step costs, and whether the exact network is the function of the file.

    nice -n 19 taskset -c 1 python benchmarks/onnx_lowering.py [NET ...] [--mirror GITDIR]
        [--work DIR] [--points N] [--seed S] [--box LO,HI] [--limit S] [--mem-limit GB]
        [--no-compile] [--check N] [--check-timeout S] [--log RUNS.jsonl]
    python benchmarks/onnx_lowering.py --tables RUNS.jsonl

A NET is an .onnx file, a folder holding one VNN-COMP benchmark (its instances.csv and
onnx/*.onnx, or the .onnx files directly), or a benchmark's name in VNN-COMP 2022's repository
(https://github.com/ChristopherBrix/vnncomp2022_benchmarks, commit 324ce34): ``BENCH`` (every
network of benchmarks/BENCH/onnx) or ``BENCH/NET`` (one of them, without .onnx).  A name is
extracted from a clone of that repository (``--mirror``, bare or not; default
$EXACTMAX_VNNCOMP_GIT) into ``--work`` (default ./onnx-lowering-work): instances.csv, the
networks and the properties used, gunzipped; files already there are kept.  With a mirror,
every bare name is one of its benchmarks (write ./NAME for a folder of that name).  Nothing
is written inside this checkout unless --work says so.  Without NET: mnist_fc (a control that
imports today), rl_benchmarks, reach_prob_density, collins_rul_cnn, oval21,
cifar_biasfield/cifar_base and sri_resnet_a.

Per network, each step a fresh process (``python -m exactmax ...``) with a wall-clock limit
(``--limit``, default 600 s; killed 30 s after it) and an address-space limit (``--mem-limit``
GiB, default 12), timed here, start-up included; its peak resident memory is the ru_maxrss that
wait4 reports for that child:

1. inventory (this process, with onnx): the operators of the graph, the input shape, the number
   of parameters (initializers and Constant tensors);
2. ``exactmax import NET.onnx -o NET.json --json``: the layers (width x rank), the composed
   parameters, or the one-line refusal ("unsupported operator Conv") -- a refusal ends the
   network's row, it is not an error of this script;
3. ``exactmax eval NET.json --inputs POINTS --json`` at ``--points`` float32 points of the
   domain (its centre, then uniform random ones, seeded), against onnxruntime on the file as it
   is (float32) and a float64 evaluation of the same graph (initializers widened exactly;
   onnxruntime, else onnx's reference evaluator).  Reported: the largest normwise relative error
   max ||exact - float32||/||exact|| (infinity norms, over the points) and the same against
   float64.  float32 rounding explains d32 = ||float32 - float64|| (what it does measure) and
   the float64 evaluation's own rounding is about 2^-29 of that; so an exact value farther from
   the float64 one than 2^-20 d32 + 2^-36 max(1, ||float64||) is printed as a FAILURE line: the
   exact network is not the function of the file (a lowering bug, or weights rounded on the
   way).  Without a float64 evaluation the test is ||exact - float32|| > 2^-10 ||exact||.
4. ``exactmax compile NET.json -o TF.json --json --timeout S`` and ``exactmax verify NET.json
   --transformer TF.json --strategy layerwise --json --timeout S`` over the domain: the
   Transformer's size, the verdict, time and memory; a timeout, an "unknown", running out of
   memory and a refusal (too large) are recorded as they are.  When exactmax's reader refuses
   the file compile wrote (beyond its limits), verify runs again without --transformer (it
   compiles in memory), and the row says so; when it refuses the file import wrote, eval,
   compile, verify and check read the .onnx file instead.  ``--no-compile`` skips this step.
5. ``--check N``: ``exactmax check NET.json PROP --timeout T --json --workers 1`` on the first N
   properties of the network in instances.csv (T: the instance's limit, or --check-timeout).

The domain is the input set of the network's first property in instances.csv (``--domain-from
PROP``) when it is one box; a property whose cases have different boxes gives its first case's
box (as a domain file); a network without a property gets ``--box`` (default 0,1 for every
input).  Every step is appended to ``--log`` (JSON lines, default WORK/onnx_lowering.jsonl) as
it ends; at the end: one Markdown table of the networks (inventory) and one of the steps
(``--tables LOG`` prints them again from a log, of a run that is still going too).
Exit status 1 when some evaluation FAILED, else 0.
"""

from __future__ import annotations

import argparse
import collections
import csv
import gzip
import json
import math
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GRACE_S = 30.0
DEFAULT_NETS = (
    "mnist_fc",
    "rl_benchmarks",
    "reach_prob_density",
    "collins_rul_cnn",
    "oval21",
    "cifar_biasfield/cifar_base",
    "sri_resnet_a",
)
MIRROR_ENV = "EXACTMAX_VNNCOMP_GIT"
READER_LIMIT = "entries"  # in exactmax's refusals of a file beyond its reader's limits
REPORT_SKIP = ("command", "verdict", "trust", "reason", "sha256", "output", "exactmax_version")


def fail(message: str) -> SystemExit:
    """Print ``onnx_lowering.py: error: MESSAGE`` and return the exit of status 2 to raise."""
    print(f"onnx_lowering.py: error: {message}", file=sys.stderr)
    return SystemExit(2)


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- networks and their properties ---------------------------------------------------------


class Net:
    """One ONNX network: its name, path and properties [(vnnlib path, limit)]."""

    def __init__(self, name: str, onnx_path: str, props: list[tuple[str, float]]):
        self.name, self.onnx = name, os.path.abspath(onnx_path)
        self.props = [(os.path.abspath(p), limit) for p, limit in props]


def read_instances(folder: str) -> list[tuple[str, str, float]]:
    """The rows (onnx, vnnlib, limit) of folder/instances.csv as written (none if absent)."""
    path = os.path.join(folder, "instances.csv")
    rows = []
    if not os.path.isfile(path):
        return rows
    with open(path, encoding="utf-8") as f:
        for line in csv.reader(f):
            cells = [c.strip() for c in line]
            if len(cells) >= 3 and not cells[0].startswith("#"):
                try:
                    rows.append((cells[0], cells[1], float(cells[2])))
                except ValueError:
                    continue
    return rows


def props_of(folder: str, onnx_path: str) -> list[tuple[str, float]]:
    """The properties of instances.csv in ``folder`` about the network at ``onnx_path``."""
    target = os.path.realpath(onnx_path)
    out = []
    for net, prop, limit in read_instances(folder):
        if os.path.realpath(os.path.join(folder, net)) == target:
            out.append((os.path.join(folder, prop), limit))
    there = [(p, limit) for p, limit in out if os.path.isfile(p)]
    if len(there) < len(out):
        note(
            f"{onnx_path}: {len(out) - len(there)} of its {len(out)} properties in "
            f"{folder}/instances.csv are not there (extract them), left out"
        )
    return there


class Mirror:
    """A clone of VNN-COMP 2022's benchmark repository, read with ``git show``."""

    def __init__(self, path: str | None, rev: str):
        self.path, self.rev = path, rev

    def git(self, *args: str) -> bytes:
        if not self.path:
            raise fail(
                "a benchmark name needs a clone of "
                "https://github.com/ChristopherBrix/vnncomp2022_benchmarks: give --mirror "
                f"GITDIR (or set ${MIRROR_ENV}), or give the extracted folders / .onnx files"
            )
        r = subprocess.run(["git", "-C", self.path, *args], capture_output=True)
        if r.returncode:
            raise fail(f"git {' '.join(args)}: {r.stderr.decode().strip()}")
        return r.stdout

    def files(self, folder: str) -> list[str]:
        out = self.git("ls-tree", "-r", "--name-only", self.rev, folder).decode().split("\n")
        return [f for f in out if f]

    def extract(self, path: str, dest: str) -> None:
        """Write repository file ``path`` (gunzipped when it ends in .gz) at ``dest``."""
        if os.path.exists(dest):
            return
        data = self.git("show", f"{self.rev}:{path}")
        if path.endswith(".gz"):
            data = gzip.decompress(data)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest + ".part", "wb") as f:
            f.write(data)
        os.replace(dest + ".part", dest)


def from_mirror(mirror: Mirror, spec: str, work: str, nprops: int) -> list[Net]:
    """Extract benchmark ``BENCH`` or ``BENCH/NET`` into work/BENCH and return its networks."""
    bench, _, only = spec.partition("/")
    base = f"benchmarks/{bench}"
    folder = os.path.join(work, bench)
    names = mirror.files(base)
    if not names:
        raise fail(f"{spec}: no folder {base} in {mirror.path} at {mirror.rev}")
    if f"{base}/instances.csv" in names:
        mirror.extract(f"{base}/instances.csv", os.path.join(folder, "instances.csv"))
    nets = []
    for f in names:
        rel = f[len(base) + 1 :]
        stem = os.path.basename(rel).removesuffix(".gz")
        if not stem.endswith(".onnx") or (only and stem != only + ".onnx"):
            continue
        dest = os.path.join(folder, rel.removesuffix(".gz"))
        mirror.extract(f, dest)
        rows = [r for r in read_instances(folder) if os.path.basename(r[0]) == stem]
        props = []
        for _, prop, limit in rows[: max(1, nprops)]:
            rel_prop = os.path.normpath(prop)
            gz = f"{base}/{rel_prop}.gz"
            mirror.extract(
                gz if gz in names else f"{base}/{rel_prop}", os.path.join(folder, rel_prop)
            )
            props.append((os.path.join(folder, rel_prop), limit))
        nets.append(Net(f"{bench}/{stem.removesuffix('.onnx')}", dest, props))
    if not nets:
        raise fail(f"{spec}: no network {only or '*'}.onnx(.gz) under {base}")
    return nets


def resolve(specs: list[str], mirror: Mirror, work: str, nprops: int) -> list[Net]:
    """The networks of the NET arguments: with a mirror, a bare name (not ending in .onnx, not
    starting with / or .) is a benchmark of the mirror; anything else is a path."""
    nets = []
    for spec in specs:
        if mirror.path and not spec.endswith(".onnx") and not spec.startswith(("/", ".")):
            nets.extend(from_mirror(mirror, spec, work, nprops))
        elif os.path.isfile(spec):
            folder = os.path.dirname(os.path.abspath(spec))
            if not os.path.isfile(os.path.join(folder, "instances.csv")):
                folder = os.path.dirname(folder)
            nets.append(
                Net(os.path.basename(spec).removesuffix(".onnx"), spec, props_of(folder, spec))
            )
        elif os.path.isdir(spec):
            sub = os.path.join(spec, "onnx")
            where = sub if os.path.isdir(sub) else spec
            found = sorted(f for f in os.listdir(where) if f.endswith(".onnx"))
            if not found:
                raise fail(f"{spec}: no .onnx file in {where}")
            bench = os.path.basename(os.path.normpath(spec))
            for f in found:
                path = os.path.join(where, f)
                nets.append(Net(f"{bench}/{f.removesuffix('.onnx')}", path, props_of(spec, path)))
        elif spec.endswith(".onnx") or spec.startswith(("/", ".")):
            raise fail(f"{spec}: no such file or folder")
        else:
            nets.extend(from_mirror(mirror, spec, work, nprops))  # no mirror: says so
    return nets


# --- the ONNX side ------------------------------------------------------------------------


def inventory(path: str) -> dict:
    """Operators, input shape and parameter count of an ONNX file."""
    import numpy as np
    import onnx

    m = onnx.load(path)
    g = m.graph
    inits = {i.name for i in g.initializer}
    params = sum(math.prod(i.dims) for i in g.initializer)
    for n in g.node:
        if n.op_type == "Constant":
            params += sum(math.prod(a.t.dims) for a in n.attribute if a.type == a.TENSOR)
    inputs = [i for i in g.input if i.name not in inits]
    shape = (
        [
            d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
            for d in inputs[0].type.tensor_type.shape.dim
        ]
        if inputs
        else []
    )
    ops = collections.Counter(n.op_type for n in g.node)
    return {
        "operators": dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))),
        "input_shape": shape,
        "inputs": int(np.prod([d for d in shape if isinstance(d, int)])) if shape else 0,
        "params": int(params),
        "opset": max(
            (o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), default=None
        ),
        "producer": f"{m.producer_name} {m.producer_version}".strip(),
    }


def widened(path: str):
    """The ONNX model at ``path`` with every float32 tensor widened to float64 (exactly) and
    its float inputs, outputs and casts made double: the same real function, rounded less."""
    import numpy as np
    import onnx
    from onnx import TensorProto, numpy_helper

    m = onnx.load(path)
    F, D = TensorProto.FLOAT, TensorProto.DOUBLE

    def widen(t):
        if t.data_type == F:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))

    for t in m.graph.initializer:
        widen(t)
    for n in m.graph.node:
        for a in n.attribute:
            if a.type == a.TENSOR:
                widen(a.t)
            if n.op_type == "Cast" and a.name == "to" and a.i == F:
                a.i = D
    for v in list(m.graph.input) + list(m.graph.output):
        if v.type.tensor_type.elem_type == F:
            v.type.tensor_type.elem_type = D
    del m.graph.value_info[:]
    return m


def float_outputs(path: str, points32) -> tuple:
    """(float32 outputs by onnxruntime, float64 outputs or None, how the float64 ones were
    computed or why not), each an array (points, outputs)."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    m = onnx.load(path)
    inits = {i.name for i in m.graph.initializer}
    inp = [i for i in m.graph.input if i.name not in inits][0]
    dims = [
        d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1
        for d in inp.type.tensor_type.shape.dim
    ]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    opts.log_severity_level = 3  # no warnings (initializers listed as graph inputs, ...)
    out32, out64 = [], []
    s32 = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    for x in points32:
        out32.append(
            np.asarray(s32.run(None, {inp.name: x.reshape(dims)})[0], dtype=np.float64).ravel()
        )
    wide = widened(path)
    how = "onnxruntime float64"
    try:
        s64 = ort.InferenceSession(
            wide.SerializeToString(), opts, providers=["CPUExecutionProvider"]
        )
        run = lambda x: s64.run(None, {inp.name: x})[0]  # noqa: E731
    except Exception as e:  # noqa: BLE001  (no float64 kernel for some operator)
        first = str(e).strip().splitlines()[0][:120] if str(e).strip() else type(e).__name__
        how = f"onnx reference evaluator float64 (onnxruntime: {first})"
        try:
            from onnx.reference import ReferenceEvaluator

            ref = ReferenceEvaluator(wide)
            run = lambda x: ref.run(None, {inp.name: x})[0]  # noqa: E731
        except Exception as e2:  # noqa: BLE001
            return np.array(out32), None, f"no float64 evaluation: {str(e2)[:120]}"
    try:
        for x in points32:
            out64.append(
                np.asarray(run(x.astype(np.float64).reshape(dims)), dtype=np.float64).ravel()
            )
    except Exception as e:  # noqa: BLE001
        return np.array(out32), None, f"no float64 evaluation ({how}): {str(e)[:120]}"
    return np.array(out32), np.array(out64), how


def sample_points(box, n: int, seed: int):
    """n float32 points of the box (lists of exact bounds): its centre, then uniform random
    ones; each coordinate rounded to float32 and moved one float32 step inwards if rounding
    took it out of the box."""
    import numpy as np

    lo, hi = box
    rng = random.Random(seed)
    flo = [float(v) for v in lo]
    fhi = [float(v) for v in hi]
    pts = []
    for k in range(n):
        ts = [0.5] * len(lo) if k == 0 else [rng.random() for _ in lo]
        x = np.array([a + t * (b - a) for a, b, t in zip(flo, fhi, ts)], dtype=np.float32)
        for i, v in enumerate(x):
            if Fraction(float(v)) < lo[i]:
                x[i] = np.nextafter(v, np.float32(np.inf))
            elif Fraction(float(v)) > hi[i]:
                x[i] = np.nextafter(v, np.float32(-np.inf))
        pts.append(x)
    return pts


def frac(v) -> Fraction:
    """An exact rational of exactmax (or an int, a Fraction, a text "p/q") as a Fraction."""
    try:
        return Fraction(v)
    except TypeError:
        return Fraction(str(v))


def exact_text(v) -> str:
    q = Fraction(float(v))
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def compare(exact: list[list[Fraction]], out32, out64) -> dict:
    """The errors of step 3 (docstring): relative errors and the FAILURE test."""
    rec: dict = {"rel_err_f32": 0.0}
    worst = None
    for i, y in enumerate(exact):
        ny = max(abs(v) for v in y) if y else Fraction(0)
        d32 = max(abs(v - Fraction(float(f))) for v, f in zip(y, out32[i]))
        rec["rel_err_f32"] = max(rec["rel_err_f32"], float(d32 / ny) if ny else float(d32))
        if out64 is None:
            if d32 > ny / 1024:
                worst = worst or (i, float(d32), float(ny / 1024))
            continue
        n64 = max(abs(Fraction(float(f))) for f in out64[i])
        d64 = max(abs(v - Fraction(float(f))) for v, f in zip(y, out64[i]))
        r32 = max(abs(Fraction(float(a)) - Fraction(float(b))) for a, b in zip(out32[i], out64[i]))
        tol = r32 / 2**20 + max(Fraction(1), n64) / 2**36
        rec["rel_err_f64"] = max(rec.get("rel_err_f64", 0.0), float(d64 / ny) if ny else float(d64))
        rec["f32_rounding"] = max(rec.get("f32_rounding", 0.0), float(r32 / max(ny, 1)))
        if d64 > tol and (worst is None or d64 > worst[1]):
            worst = (i, float(d64), float(tol))
    if worst is not None:
        rec["failure"] = {"point": worst[0], "difference": worst[1], "tolerance": worst[2]}
    return rec


# --- the processes ------------------------------------------------------------------------


class Runner:
    """Runs one exactmax command per process, with a time and an address-space limit."""

    def __init__(self, mem_limit_gib: float, work: str):
        self.mem = int(mem_limit_gib * 2**30)
        self.work = work
        path = os.environ.get("PYTHONPATH")
        self.env = dict(os.environ, PYTHONPATH=ROOT + (os.pathsep + path if path else ""))

    def _limits(self) -> None:
        if self.mem > 0:
            resource.setrlimit(resource.RLIMIT_AS, (self.mem, self.mem))

    def run(self, args: list[str], limit: float) -> dict:
        """{"code": exit status or None when killed, "out", "err", "wall_s", "rss_mib"}."""
        with (
            tempfile.TemporaryFile(dir=self.work) as fo,
            tempfile.TemporaryFile(dir=self.work) as fe,
        ):
            t0 = time.monotonic()
            p = subprocess.Popen(
                [sys.executable, "-m", "exactmax", *args],
                stdout=fo,
                stderr=fe,
                cwd=self.work,
                env=self.env,
                start_new_session=True,
                preexec_fn=self._limits,
            )
            killed = False
            while True:
                pid, status, usage = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() - t0 > limit + GRACE_S:
                    os.killpg(p.pid, signal.SIGKILL)
                    pid, status, usage = os.wait4(p.pid, 0)
                    killed = True
                    break
                time.sleep(0.05)
            wall = time.monotonic() - t0
            p.returncode = os.waitstatus_to_exitcode(status)
            fo.seek(0)
            fe.seek(0)
            out = fo.read().decode(errors="replace")
            err = fe.read().decode(errors="replace")
        return {
            "code": None if killed else p.returncode,
            "out": out,
            "err": err,
            "wall_s": round(wall, 3),
            "rss_mib": round(usage.ru_maxrss / 1024, 1),
            "near_limit": self.mem > 0 and usage.ru_maxrss * 1024 > 0.9 * self.mem,
        }


def last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def why(r: dict, doc: dict | None) -> str:
    """The reason of an answer's --json object, else the last line of stderr."""
    reason = (doc or {}).get("reason") if isinstance(doc, dict) else None
    return reason[:300] if reason else last_line(r["err"])


def outcome(r: dict) -> tuple[str, dict | None]:
    """(status, the --json object or None) of a finished command: "ok", "timeout", "out of
    memory", "refused" (exactmax's one-line error, exit 2), "error N"."""
    if r["code"] is None:
        return "timeout", None
    try:
        doc = json.loads(r["out"])
    except ValueError:
        doc = None
    if isinstance(doc, dict) and "out of memory" in str(doc.get("reason") or ""):
        return "out of memory", doc  # exactmax's answer unknown for a failed allocation
    if "MemoryError" in r["err"] or r["code"] == -signal.SIGKILL:
        return "out of memory", doc
    if r["code"] == -signal.SIGABRT and r.get("near_limit"):
        return "out of memory (abort)", doc  # a C library's failed allocation
    if doc is not None and r["code"] in (0, 1, 3, 4, 5):
        return "ok", doc
    if r["code"] == 2 and "error:" in r["err"]:
        return "refused", doc
    return f"error {r['code']}", doc


# --- one network --------------------------------------------------------------------------


def domain_of(net: Net, box_text: str, n_inputs: int, work: str) -> tuple[list, tuple, str]:
    """(the domain's command-line arguments, its box (lower, upper) as Fractions, what it is)."""
    sys.path.insert(0, ROOT)
    from exactmax.io.errors import InputError
    from exactmax.io.models import box_of_text, domain_of_property
    from exactmax.io.vnnlib2 import read_property
    from exactmax.kernel.polyhedron import Box

    if net.props:
        prop = net.props[0][0]
        try:
            d = domain_of_property(prop, None)
            if isinstance(d, Box):
                return (
                    ["--domain-from", prop],
                    ([frac(v) for v in d.lower], [frac(v) for v in d.upper]),
                    f"property {os.path.basename(prop)}",
                )
            why = "a polyhedron"
        except InputError as e:
            why = str(e)[-80:]
        p = read_property(prop)
        first = next((b for b in p.boxes if b is not None), None)
        if first is not None:
            path = os.path.join(work, net.name.replace("/", "__") + ".domain.json")
            lo = [frac(v) for v in first.lower]
            hi = [frac(v) for v in first.upper]
            with open(path, "w", encoding="utf-8") as f:
                json.dump(
                    {
                        "format": "exactmax/domain",
                        "version": 1,
                        "box": {"lower": [str(v) for v in lo], "upper": [str(v) for v in hi]},
                    },
                    f,
                )
            return (
                ["--domain", path],
                (lo, hi),
                f"first case's box of {os.path.basename(prop)} ({why})",
            )
        note(f"  {net.name}: {os.path.basename(prop)} has no box ({why}); using --box")
    b = box_of_text(box_text, n_inputs)
    return (
        ["--box", box_text],
        ([frac(v) for v in b.lower], [frac(v) for v in b.upper]),
        f"--box {box_text}",
    )


def run_net(net: Net, args, runner: Runner, log) -> dict:
    """Every step on one network; returns the network's summary (a dict of step records)."""
    stem = net.name.replace("/", "__")
    out_json = os.path.join(args.work, "imported", stem + ".json")
    tf_json = os.path.join(args.work, "imported", stem + ".transformer.json")
    os.makedirs(os.path.dirname(out_json), exist_ok=True)
    summary: dict = {"net": net.name}

    def record(step: str, rec: dict) -> dict:
        rec = {"net": net.name, "onnx": net.onnx, "step": step, **rec}
        log(rec)
        summary[step] = rec
        return rec

    try:
        inv = inventory(net.onnx)
    except Exception as e:  # noqa: BLE001
        inv = {"status": f"unreadable: {str(e)[:200]}"}
    record("inventory", inv)
    note(
        f"{net.name}: {inv.get('input_shape')}, {inv.get('params')} parameters, "
        f"{inv.get('operators')}"
    )

    r = runner.run(["import", net.onnx, "-o", out_json, "--json"], args.limit)
    status, doc = outcome(r)
    rec = {"status": status, "wall_s": r["wall_s"], "rss_mib": r["rss_mib"]}
    if status == "ok" and doc:
        # the report as it is (new fields too), less what names files and versions
        rec.update({k: v for k, v in doc.items() if k not in REPORT_SKIP})
        rec["layers"] = [[lay.get("width"), lay.get("rank")] for lay in doc.get("layers", [])]
        rec["json_mib"] = round(os.path.getsize(out_json) / 2**20, 2)
    else:
        rec["message"] = why(r, doc)
    record("import", rec)
    note(
        f"  import: {status}, {r['wall_s']:.1f} s, {r['rss_mib']:.0f} MiB"
        + (f": {rec['message']}" if rec.get("message") else "")
    )
    if status != "ok":
        return summary

    n_in = rec.get("input_dim") or inv.get("inputs") or 0
    dom_args, box, dom_what = domain_of(net, args.box, n_in, args.work)
    summary["domain"] = dom_what

    # 3. exact values against float32 and float64
    pts = sample_points(box, args.points, args.seed)
    pts_file = os.path.join(args.work, "imported", stem + ".points.txt")
    with open(pts_file, "w", encoding="utf-8") as f:
        for x in pts:
            f.write(",".join(exact_text(v) for v in x) + "\n")
    model = out_json
    r = runner.run(["eval", model, "--inputs", pts_file, "--json"], args.limit)
    status, doc = outcome(r)
    unread = ""
    if status == "refused" and READER_LIMIT in r["err"]:
        # exactmax's reader refuses the file import wrote: every later step reads the .onnx
        # file instead (imported again in memory each time, with no file limits).
        unread = last_line(r["err"])
        model = net.onnx
        r = runner.run(["eval", model, "--inputs", pts_file, "--json"], args.limit)
        status, doc = outcome(r)
    rec = {
        "status": status,
        "wall_s": r["wall_s"],
        "rss_mib": r["rss_mib"],
        "points": len(pts),
        "domain": dom_what,
    }
    if unread:
        rec["model"] = "the .onnx file: the reader refused the imported file: " + unread
    if status == "ok" and doc and "outputs" in doc:
        exact = [[frac(v) for v in y] for y in doc["outputs"]]
        try:
            out32, out64, how = float_outputs(net.onnx, pts)
            rec["float64"] = how
            rec.update(compare(exact, out32, out64))
        except Exception as e:  # noqa: BLE001
            rec["status"] = "no float evaluation"
            rec["message"] = f"onnxruntime: {str(e)[:200]}"
    else:
        if status == "ok":  # an answer without outputs: unknown, and why
            rec["status"] = (doc or {}).get("verdict") or "no outputs"
        rec["message"] = why(r, doc)
    record("eval", rec)
    if "failure" in rec:
        fl = rec["failure"]
        print(
            f"FAILURE: {net.name}: the exact output at point {fl['point']} is "
            f"{fl['difference']:.3g} from the float evaluation, more than float rounding "
            f"explains ({fl['tolerance']:.3g})",
            flush=True,
        )
    note(
        f"  eval: {rec['status']}, {r['wall_s']:.1f} s, {r['rss_mib']:.0f} MiB"
        + (
            f", rel. error f32 {rec['rel_err_f32']:.2g}, f64 {rec.get('rel_err_f64', math.nan):.2g}"
            if "rel_err_f32" in rec
            else f": {rec.get('message', '')}"
        )
    )

    # 4. compile and verify layerwise
    if not args.no_compile:
        r = runner.run(
            [
                "compile",
                model,
                "-o",
                tf_json,
                *dom_args,
                "--json",
                "--timeout",
                f"{args.limit:g}",
            ],
            args.limit,
        )
        status, doc = outcome(r)
        rec = {"status": status, "wall_s": r["wall_s"], "rss_mib": r["rss_mib"]}
        if status == "ok" and doc and doc.get("verdict") == "done":
            rec.update(
                {
                    k: doc.get(k)
                    for k in (
                        "transformer_params",
                        "transformer_nonzero",
                        "sublayers",
                        "tokens",
                        "heads",
                        "d_model",
                        "bounds",
                    )
                }
            )
            rec["json_mib"] = round(os.path.getsize(tf_json) / 2**20, 2)
        elif status == "ok" and doc:
            rec["status"] = doc.get("verdict") or "?"
            rec["message"] = (doc.get("reason") or "")[:300]
        else:
            rec["message"] = why(r, doc)
        record("compile", rec)
        note(
            f"  compile: {rec['status']}, {r['wall_s']:.1f} s, {r['rss_mib']:.0f} MiB"
            + (f": {rec['message']}" if rec.get("message") else "")
        )
        if rec["status"] == "ok":
            rec = verify(runner, model, ["--transformer", tf_json], dom_args, args.limit)
            if rec["status"] == "refused" and "beyond the limit" in rec.get("message", ""):
                # exactmax's reader refuses the file compile wrote (too large to read back):
                # verify then compiles the Transformer in memory, as without --transformer.
                refusal = rec["message"]
                rec = verify(runner, model, [], dom_args, args.limit)
                rec["transformer"] = "compiled in memory: verify refused the file: " + refusal
            record("verify", rec)
            note(
                f"  verify: {rec.get('verdict') or rec['status']}, {rec['wall_s']:.1f} s, "
                f"{rec['rss_mib']:.0f} MiB"
            )

    # 5. properties
    checks = []
    for prop, limit in net.props[: args.check]:
        t = args.check_timeout or limit
        r = runner.run(["check", model, prop, "--timeout", f"{t:g}", "--json", "--workers", "1"], t)
        status, doc = outcome(r)
        rec = {
            "status": status,
            "vnnlib": prop,
            "limit": t,
            "wall_s": r["wall_s"],
            "rss_mib": r["rss_mib"],
        }
        if status == "ok" and doc:
            rec.update(verdict=doc.get("verdict"), time_s=doc.get("time_s"))
            if doc.get("reason"):
                rec["message"] = doc["reason"][:200]
        else:
            rec["message"] = why(r, doc)
        log({"net": net.name, "onnx": net.onnx, "step": "check", **rec})
        checks.append(rec)
        note(
            f"  check {os.path.basename(prop)}: {rec.get('verdict') or status}, {r['wall_s']:.1f} s"
        )
    summary["check"] = checks
    return summary


def verify(runner: Runner, net_json: str, tf_args: list, dom_args: list, limit: float) -> dict:
    """``exactmax verify --strategy layerwise`` of the network and its Transformer."""
    r = runner.run(
        ["verify", net_json, *tf_args, *dom_args, "--strategy", "layerwise", "--json"]
        + ["--timeout", f"{limit:g}"],
        limit,
    )
    status, doc = outcome(r)
    rec = {"status": status, "wall_s": r["wall_s"], "rss_mib": r["rss_mib"]}
    if status == "ok" and doc:
        rec.update(verdict=doc.get("verdict"), trust=doc.get("trust"), time_s=doc.get("time_s"))
        rec["leaves"] = (doc.get("stats") or {}).get("leaves")
        if doc.get("reason"):
            rec["message"] = doc["reason"][:300]
    else:
        rec["message"] = why(r, doc)
    return rec


# --- the tables ---------------------------------------------------------------------------


def inventory_table(rows: list[dict]) -> str:
    out = ["| network | input shape | parameters | opset | operators |", "|---|---|---:|---:|---|"]
    for s in rows:
        inv = s.get("inventory", {})
        ops = ", ".join(f"{k} {v}" for k, v in (inv.get("operators") or {}).items())
        shape = "x".join(str(d) for d in inv.get("input_shape") or [])
        out.append(
            f"| {s['net']} | {shape} | {inv.get('params', '?')} | "
            f"{inv.get('opset', '?')} | {ops or inv.get('status', '')} |"
        )
    return "\n".join(out)


def cell(rec: dict | None, main: str | None = None) -> str:
    """``status, s, MiB`` of a step (blank when it did not run)."""
    if not rec:
        return ""
    word = main if main is not None else rec["status"]
    return f"{word}, {rec['wall_s']:.1f} s, {rec['rss_mib']:.0f} MiB"


def layers_text(layers: list) -> str:
    groups: list = []
    for w, k in layers:
        if groups and groups[-1][0] == (w, k):
            groups[-1][1] += 1
        else:
            groups.append([(w, k), 1])
    return " ".join(f"{w}x{k}" + (f" (x{n})" if n > 1 else "") for (w, k), n in groups)


def short(message: str, limit: int = 160) -> str:
    """exactmax's one-line message without "exactmax: error: " and the file's path."""
    m = message.removeprefix("exactmax: error: ")
    if m.startswith("/") and ": " in m:
        m = m.split(": ", 1)[1]
    return m[:limit]


def steps_table(rows: list[dict]) -> str:
    out = [
        "| network | import | layers (width x rank) | exact vs f32 / f64 | eval | compile | "
        "verify layerwise | check | notes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in rows:
        imp, ev = s.get("import"), s.get("eval")
        comp, ver = s.get("compile"), s.get("verify")
        notes = []
        if imp and imp.get("message"):
            notes.append(short(imp["message"]))
        if imp and imp.get("carried_units"):
            notes.append(f"{imp['carried_units']} pass-through units")
        if imp and imp.get("rounded_square_roots"):
            notes.append(f"{imp['rounded_square_roots']} BatchNormalization scales rounded")
        errs = ""
        if ev:
            if "rel_err_f32" in ev:
                errs = f"{ev['rel_err_f32']:.1e} / " + (
                    f"{ev['rel_err_f64']:.1e}" if "rel_err_f64" in ev else "n/a"
                )
            if ev.get("failure"):
                errs = "**FAILURE** " + errs
            if ev.get("float64", "").startswith("onnx reference"):
                notes.append("float64 by onnx's reference evaluator")
            if ev.get("message"):
                notes.append("eval: " + short(ev["message"]))
            if ev.get("model"):
                notes.append(
                    "eval, compile, verify and check read the .onnx file: the reader refused "
                    "the imported one (" + short(ev["model"].split("imported file: ", 1)[-1]) + ")"
                )
            notes.append(f"domain: {ev.get('domain')}")
        if comp:
            if comp.get("transformer_params") is not None:
                notes.append(
                    f"Transformer {comp['transformer_params']} parameters, "
                    f"{comp['transformer_nonzero']} non-zero"
                )
            if comp.get("message"):
                notes.append("compile: " + short(comp["message"]))
        if ver and ver.get("message"):
            notes.append("verify: " + short(ver["message"]))
        if ver and ver.get("transformer"):
            notes.append(
                "verify compiled the Transformer in memory: the reader refused compile's file ("
                + short(ver["transformer"].split("refused the file: ", 1)[-1], 100)
                + ")"
            )
        checks = s.get("check") or []
        chk = ", ".join(f"{c.get('verdict') or c['status']} {c['wall_s']:.1f} s" for c in checks)
        layers = layers_text(imp.get("layers", [])) if imp else ""
        out.append(
            f"| {s['net']} | {cell(imp)} | {layers} | {errs} | "
            f"{cell(ev, 'done' if ev and ev['status'] == 'ok' else None)} | "
            f"{cell(comp)} | {cell(ver, ver.get('verdict') if ver else None)} | {chk} | "
            f"{'; '.join(notes)} |"
        )
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "nets",
        nargs="*",
        metavar="NET",
        help="an .onnx file, a benchmark folder, or BENCH[/NET] of the mirror "
        f"(default: {' '.join(DEFAULT_NETS)})",
    )
    ap.add_argument(
        "--mirror",
        default=os.environ.get(MIRROR_ENV),
        metavar="GITDIR",
        help=f"a clone of vnncomp2022_benchmarks (default ${MIRROR_ENV})",
    )
    ap.add_argument("--rev", default="HEAD", help="the mirror's commit (default HEAD)")
    ap.add_argument(
        "--work",
        default="onnx-lowering-work",
        metavar="DIR",
        help="extracted benchmarks, imported networks, the log (default ./onnx-lowering-work)",
    )
    ap.add_argument(
        "--points",
        type=int,
        default=5,
        metavar="N",
        help="points of the exact-vs-float comparison (default 5)",
    )
    ap.add_argument("--seed", type=int, default=0, metavar="S", help="their seed (default 0)")
    ap.add_argument(
        "--box",
        default="0,1",
        metavar="LO,HI;...",
        help="the domain of a network without a property (default 0,1)",
    )
    ap.add_argument(
        "--limit",
        type=float,
        default=600,
        metavar="S",
        help="seconds for each of import, eval, compile, verify (default 600)",
    )
    ap.add_argument(
        "--mem-limit",
        type=float,
        default=12,
        metavar="GB",
        help="address-space limit of each process, GiB (default 12; 0: none)",
    )
    ap.add_argument("--no-compile", action="store_true", help="skip compile and verify")
    ap.add_argument(
        "--check",
        type=int,
        default=0,
        metavar="N",
        help="run exactmax check on the first N properties of each network",
    )
    ap.add_argument(
        "--check-timeout",
        type=float,
        metavar="S",
        help="limit of each check (default: the instance's)",
    )
    ap.add_argument(
        "--log",
        metavar="RUNS.jsonl",
        help="append every step here (default WORK/onnx_lowering.jsonl)",
    )
    ap.add_argument(
        "--tables",
        metavar="RUNS.jsonl",
        help="run nothing: print the tables of this log (of an earlier or a running run)",
    )
    args = ap.parse_args()
    if args.tables:
        if not os.path.isfile(args.tables):
            raise fail(f"--tables {args.tables}: no such file")
        return report(rows_of_log(args.tables), os.path.abspath(args.tables))
    if args.points < 1:
        raise fail("--points: expected at least 1")
    args.work = os.path.abspath(args.work)
    os.makedirs(args.work, exist_ok=True)
    log_path = os.path.abspath(args.log or os.path.join(args.work, "onnx_lowering.jsonl"))
    if args.mirror and not os.path.isdir(args.mirror):
        raise fail(f"--mirror {args.mirror}: no such folder")
    nets = resolve(
        args.nets or list(DEFAULT_NETS), Mirror(args.mirror, args.rev), args.work, args.check
    )
    runner = Runner(args.mem_limit, args.work)

    def log(rec: dict) -> None:
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")

    note(
        f"{len(nets)} networks; limit {args.limit:g} s and {args.mem_limit:g} GiB per step; "
        f"CPUs {sorted(os.sched_getaffinity(0))}; load average {os.getloadavg()[0]:.1f}"
    )
    rows = [run_net(net, args, runner, log) for net in nets]
    return report(rows, log_path)


def rows_of_log(path: str) -> list[dict]:
    """The summaries of a log's networks, in order; a network's last run (from its last
    inventory record) wins."""
    rows: dict[str, dict] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            net, step = rec["net"], rec["step"]
            if step == "inventory":
                rows.pop(net, None)
                rows[net] = {"net": net, "check": []}
            s = rows.setdefault(net, {"net": net, "check": []})
            if step == "check":
                s["check"].append(rec)
            else:
                s[step] = rec
    return list(rows.values())


def report(rows: list[dict], log_path: str) -> int:
    """Print the two tables and the summary line; 1 when an evaluation FAILED, else 0."""
    print("\n" + inventory_table(rows) + "\n")
    print(steps_table(rows))
    failed = [s["net"] for s in rows if (s.get("eval") or {}).get("failure")]
    imported = sum(1 for s in rows if (s.get("import") or {}).get("status") == "ok")
    print(
        f"\n{len(rows)} networks, {imported}"
        f" imported; evaluation FAILED on {', '.join(failed) if failed else 'none'}. "
        f"Log: {log_path}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
