"""exactmax's own fuzzing campaign (issue #23): mutated files of every format, run through every
command that reads them, and tampered certificates checked against an independent exact check.

Library for ``tests/test_fuzz.py`` (a short run in CI) and ``benchmarks/fuzz.py`` (the long run).
Everything is driven by a ``random.Random``-like ``rng`` (Hypothesis's ``st.randoms()`` in the
tests, so that a failure shrinks; a seeded ``random.Random`` in the long run).

- ``Seeds(tmp)``: valid files of every format (Maxout networks, Transformers, domain boxes and
  polyhedra, equivalence certificates monolithic and layerwise, region certificates, CPWL
  specs of the four kinds, points files), written by exactmax itself where it writes them.
- ``mutate(seed, rng)``: the bytes of a mutated file (truncation, type swaps, huge and
  mega-digit numbers, deep nesting, NaN / Infinity, duplicate keys, unicode, shapes that do
  not match, swapped subtrees, invalid UTF-8, gzip, truncated gzip, gzip bombs), and what was
  done.
- ``COMMANDS``: per format, the command lines that read such a file.
- ``run_case`` runs one in-process (``exactmax.cli.main``) or as a subprocess and ``judge``
  says what is wrong: an exit status outside 0-5, a traceback, more or less than one line on
  stderr for exit 2, an output file left after exit 2 (or a temporary file), too much time
  or memory.
- ``tamper_certificate`` and ``claim_holds``: random edits of real certificates; one that
  check-cert accepts must make a claim that an independent exact check confirms (the
  reference evaluators of ``tests/reference.py`` at many points, then z3 over the rationals:
  an own encoding for Maxout networks, the program encoding for Transformers).
"""

from __future__ import annotations

import contextlib
import copy
import gzip
import io
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from fractions import Fraction

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")
GOOD = os.path.join(ROOT, "tests", "data", "good")

BOX = {"format": "exactmax/domain", "version": 1,
       "box": {"lower": ["-1", "-1/2"], "upper": ["1", "3/4"]}}
POLY = {"format": "exactmax/domain", "version": 1,
        "polyhedron": {"A": [[1, 0], [-1, 0], [0, 1], [0, -1], [1, 1], ["-1/2", 1]],
                       "b": [1, 1, 1, 1, "1/2", "3/4"]}}
POINTS = "# x0, x1\n1/2,1\n0,0\n\n-1,1/3  # a comment\n0.25,-0.75\n"

FORMATS = ("maxout", "transformer", "domain-box", "domain-polyhedron", "certificate",
           "region-certificate", "cpwl", "points")


@dataclass
class Seed:
    """A valid file: its format, name, text (JSON or points) and the files it goes with."""

    format: str
    name: str
    text: str
    json: bool = True


def _quiet_main(argv):
    from exactmax.cli import main
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(argv)


class Seeds:
    """Valid files of every format in the folder ``tmp`` (certificates written by exactmax)."""

    def __init__(self, tmp: str):
        self.tmp = tmp
        self.tent = os.path.join(EX, "tent.json")
        self.triangle = os.path.join(EX, "relu_triangle.json")
        self.tf = os.path.join(tmp, "tent.tf.json")
        assert _quiet_main(["compile", self.tent, "-o", self.tf]) == 0
        self.points = os.path.join(tmp, "points.txt")
        with open(self.points, "w") as f:
            f.write(POINTS)
        self.box = os.path.join(tmp, "box.json")
        with open(self.box, "w") as f:
            json.dump(BOX, f)
        s: list[Seed] = []

        def add(fmt, name, path=None, text=None, js=True):
            if text is None:
                with open(path) as f:
                    text = f.read()
            s.append(Seed(fmt, name, text, js))

        add("maxout", "tent", self.tent)
        add("maxout", "relu_triangle", self.triangle)
        add("maxout", "maxout_numbers", os.path.join(GOOD, "maxout_numbers.json"))
        add("transformer", "tent.tf", self.tf)
        add("transformer", "transformer_hardmax.2d", text=json.dumps(_hardmax_2d()))
        add("domain-box", "box", text=json.dumps(BOX))
        add("domain-polyhedron", "cut", text=json.dumps(POLY))
        self.certs = {}
        for name, argv in (("tent-monolithic", ["verify", self.tent, "--strategy",
                                                "monolithic"]),
                           ("tent-layerwise", ["verify", self.tent]),
                           ("triangle-layerwise", ["verify", self.triangle]),
                           ("tent-correspondence", ["equiv", self.tent,
                                                    os.path.join(EX, "tent_rewritten.json")])):
            path = os.path.join(tmp, f"{name}.cert.json")
            assert _quiet_main(argv + ["--cert", path, "--no-search"]) == 0, name
            add("certificate", name, path)
            with open(path) as f:
                self.certs[name] = json.load(f)
        rc = os.path.join(tmp, "tent.regions.json")
        assert _quiet_main(["regions", self.tent, "--cert", rc]) == 0
        add("region-certificate", "tent-regions", rc)
        for kind in ("relu", "breakpoints", "lattice", "dc"):
            add("cpwl", f"cpwl_{kind}", os.path.join(EX, f"cpwl_{kind}.json"))
        add("points", "points", text=POINTS, js=False)
        self.seeds = s

    def of(self, fmt: str) -> list[Seed]:
        return [x for x in self.seeds if x.format == fmt]


def _hardmax_2d() -> dict:
    """A small hardmax Transformer of input dimension 2 (so that it goes with tent)."""
    return {"format": "exactmax/transformer", "version": 1, "input_dim": 2, "d_model": 3,
            "embedding": [[1, 0], [0, 1], [0, 0]],
            "positions": [[0, 0, 1], [0, 0, -1]],
            "sublayers": [
                {"feedforward": {"W1": [[1, "-1/2", 0]], "b1": ["1/3"],
                                 "W2": [[0], [0], [1]], "b2": [0, 0, 0]}},
                {"attention": {"kind": "hardmax", "heads": [
                    {"query": [[0, 0, 1]], "key": [[1, 0, 0]], "value": [[0, 1, 0]],
                     "out": [[1], [0], [0]], "scale": "1/2"}]}}],
            "readout": {"token": 0, "W": [[1, 0, 0]], "b": ["1/4"]},
            "domain": {"box": {"lower": [-1, -1], "upper": [1, 1]}}}


# ------------------------------------------------------------------------------ mutations

def _nodes(v, path=()):
    """(path, value) of every node of a JSON value, iteratively."""
    out, todo = [], [(path, v)]
    while todo:
        p, x = todo.pop()
        out.append((p, x))
        if isinstance(x, dict):
            todo += [(p + (k,), y) for k, y in x.items()]
        elif isinstance(x, list):
            todo += [(p + (i,), y) for i, y in enumerate(x)]
    return out


def _set(root, path, value):
    if not path:
        return value
    parent = root
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = value
    return root


def _get(root, path):
    for k in path:
        root = root[k]
    return root


def _is_number(x) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, (int, float)):
        return True
    if isinstance(x, str):
        try:
            Fraction(x)
            return True
        except (ValueError, ZeroDivisionError):
            return False
    return False


def huge_number(rng) -> object:
    """A number of many digits or a large exponent, as a JSON integer or a string."""
    k = rng.choice([50, 400, 4301, 5000, 20000, 100000])
    r = rng.random()
    if r < 0.3:
        return int("9" * min(k, 4000))            # a JSON integer literal (Python's limit)
    if r < 0.5:
        return "LONGINT:" + str(k)                 # a JSON integer literal beyond 4300 digits
    if r < 0.8:
        return f"{'-' if rng.random() < 0.5 else ''}{'7' * k}/{'3' * max(1, k // 2)}"
    return rng.choice(["1e1000", "1e-1000", "1e1001", "-2.5E+999", "0." + "0" * k + "1",
                       "1" * 1_000_001])


TYPE_SWAPS = (None, True, False, "abc", "", [], {}, 0, -1, "1/0", "0/0", 1.5, "NaN",
              "Infinity", "-0", "1/3", [[]], {"a": 1}, "1 /2", " 1", "0x10", "1_000", "+1",
              ".5", "5.", "1e", "--1", "1//2")
UNICODE = ("１/２", "½", "٣", "\u200b1", "1\u00a0", "\ud800", "é", "\U0001f600", "\x00", "\\",
           "\u202e1/2", "ℕ", "𝟙")


def mutate_tree(v, rng):
    """One structural edit of a JSON value (in place where possible); (new root, what)."""
    nodes = _nodes(v)
    path, x = rng.choice(nodes)
    kind = rng.choice(["type", "huge", "number", "number", "delete-key", "add-key",
                       "rename-key", "list-grow", "list-shrink", "list-empty", "nest", "unicode",
                       "swap", "copy-subtree", "constant", "negate-int", "dup-key"])
    if kind == "type":
        return _set(v, path, copy.deepcopy(rng.choice(TYPE_SWAPS))), "type swap"
    if kind == "huge":
        nums = [(p, y) for p, y in nodes if _is_number(y)] or [(path, x)]
        p, _ = rng.choice(nums)
        return _set(v, p, huge_number(rng)), "huge number"
    if kind == "number":
        nums = [(p, y) for p, y in nodes if _is_number(y)]
        if not nums:
            return v, "none"
        p, y = rng.choice(nums)
        q = Fraction(str(y)) if not isinstance(y, float) else Fraction(y)
        d = Fraction(rng.randint(-3, 3), rng.choice([1, 2, 3, 7, 1000, 10**9]))
        new = rng.choice([q + d, -q, q * 2, Fraction(0), q / 3 if q else Fraction(1)])
        return _set(v, p, str(new) if rng.random() < 0.7 else int(new)), "number edit"
    if kind == "constant":
        nums = [p for p, y in nodes if _is_number(y)] or [path]
        return _set(v, rng.choice(nums), "CONST:" + rng.choice(["NaN", "Infinity",
                                                                 "-Infinity"])), "NaN/Infinity"
    if kind == "negate-int":
        ints = [(p, y) for p, y in nodes if isinstance(y, int) and not isinstance(y, bool)]
        if not ints:
            return v, "none"
        p, y = rng.choice(ints)
        return _set(v, p, rng.choice([-y, y + 1, y - 1, 2 ** 63, -2 ** 63, 10 ** 30,
                                      1000000])), "integer edit"
    objs = [(p, y) for p, y in nodes if isinstance(y, dict) and y]
    lists = [(p, y) for p, y in nodes if isinstance(y, list) and y]
    if kind in ("delete-key", "add-key", "rename-key", "dup-key") and objs:
        p, o = rng.choice(objs)
        k = rng.choice(list(o))
        if kind == "delete-key":
            del o[k]
        elif kind == "add-key":
            o[rng.choice(["extra", "Format", "layer", "meta", "b ", "\u00e9"])] = 1
        elif kind == "rename-key":
            o[k + rng.choice(["s", "_", "\u200b"])] = o.pop(k)
        else:
            o["\u0000DUP:" + k] = copy.deepcopy(o[k])
        return v, kind
    if kind.startswith("list") and lists:
        p, lst = rng.choice(lists)
        if kind == "list-grow":
            lst.insert(rng.randrange(len(lst) + 1), copy.deepcopy(rng.choice(lst)))
        elif kind == "list-shrink":
            del lst[rng.randrange(len(lst))]
        else:
            lst.clear()
        return v, "shape"
    if kind == "nest":
        depth = rng.choice([2, 50, 900, 5000, 100000])
        return _set(v, path, "NEST:" + str(depth)), "deep nesting"
    if kind == "unicode":
        strs = [(p, y) for p, y in nodes if isinstance(y, str)] or [(path, x)]
        p, y = rng.choice(strs)
        u = rng.choice(UNICODE)
        return _set(v, p, rng.choice([u, str(y) + u, u + str(y)])), "unicode"
    if kind in ("swap", "copy-subtree") and len(nodes) > 2:
        (p1, a), (p2, b) = rng.sample(nodes[1:], 2)
        if p1[:len(p2)] == p2 or p2[:len(p1)] == p1:
            return v, "none"
        if kind == "swap":
            _set(v, p1, copy.deepcopy(b))
            _set(v, p2, copy.deepcopy(a))
        else:
            _set(v, p1, copy.deepcopy(b))
        return v, kind
    return v, "none"


def dumps(v, ascii: bool = True) -> str:
    """JSON text of a mutated value, with the markers (long integers, constants, nesting,
    duplicate keys) written out."""
    import re
    text = json.dumps(v, ensure_ascii=ascii)
    out = []
    pos = 0
    for m in re.finditer(r'"(LONGINT|NEST):(\d+)"|"(CONST):(NaN|-?Infinity)"|'
                         r'"\\u0000DUP:((?:[^"\\]|\\.)*)"', text):
        out.append(text[pos:m.start()])
        if m.group(1) == "LONGINT":
            out.append("8" * int(m.group(2)))
        elif m.group(3) == "CONST":
            out.append(m.group(4))
        elif m.group(1) == "NEST":
            d = int(m.group(2))
            out.append("[" * d + "1" + "]" * d)
        else:
            out.append('"' + m.group(5) + '"')
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def mutate_text(text: str, rng) -> tuple[bytes, str]:
    """A byte-level edit: (data, what)."""
    data = text.encode("utf-8", "surrogatepass")
    kind = rng.choice(["truncate", "delete", "insert", "bytes", "empty", "bom", "duplicate"])
    n = len(data)
    if kind == "truncate":
        return data[:rng.randrange(n)], "truncated"
    if kind == "delete":
        i = rng.randrange(n)
        return data[:i] + data[i + rng.randint(1, 20):], "deleted bytes"
    if kind == "insert":
        i = rng.randrange(n + 1)
        ins = rng.choice([b",", b"]", b"}", b"{", b"[", b'"', b":", b"\\", b"-", b"e", b"0",
                          b"/", b" ", b"\n", b"NaN", b"null", b"1e99999", b"#"])
        return data[:i] + ins + data[i:], "inserted bytes"
    if kind == "bytes":
        i = rng.randrange(n + 1)
        ins = bytes(rng.choice([0, 0xff, 0xc3, 0x80, 0xed, 0xa0, 0xfe]) for _ in range(3))
        return data[:i] + ins + data[i:], "invalid UTF-8"
    if kind == "empty":
        return rng.choice([b"", b" ", b"\n\n", b"null", b"[]", b"{}", b"0", b'"x"']), "empty"
    if kind == "bom":
        return b"\xef\xbb\xbf" + data, "BOM"
    return data + data, "twice"


def mutate(seed: Seed, rng) -> tuple[bytes, str, bool]:
    """(file data, what was done, gzip?) for a mutation of ``seed``."""
    r = rng.random()
    what = []
    if not seed.json:
        if r < 0.5:
            data, w = mutate_text(seed.text, rng)
            what.append(w)
        else:
            lines = seed.text.splitlines()
            i = rng.randrange(len(lines))
            choice = rng.choice(["1/0", "NaN", "1,2,3", "", ",", "1e1001", "9" * 5000 + "/7",
                                 "１,2", "inf,0", "0x1,2", "1,", " , ", "1;2", "\x00"])
            lines[i] = choice
            data, w = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"), "bad line"
            what.append(w)
    elif r < 0.25:
        data, w = mutate_text(seed.text, rng)
        what.append(w)
    else:
        v = json.loads(seed.text)
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            v, w = mutate_tree(v, rng)
            what.append(w)
        data = dumps(v, rng.random() < 0.7).encode("utf-8", "surrogatepass")
        if rng.random() < 0.1:
            data, w = mutate_text(data.decode("utf-8", "surrogatepass"), rng)
            what.append(w)
    zipped = rng.random() < 0.1
    if zipped:
        g = rng.random()
        if g < 0.2:
            data = gzip.compress(data, mtime=0)[:-rng.randint(1, 12)]
            what.append("truncated gzip")
        elif g < 0.3:
            data = b"\x1f\x8b\x08\x00" + bytes(rng.getrandbits(8) for _ in range(30))
            what.append("corrupt gzip")
        else:
            data = gzip.compress(data, mtime=0)
            what.append("gzip")
    return data, "+".join(what), zipped


def gzip_bomb(size: int) -> bytes:
    """gzip data that decompresses to ``size`` bytes of spaces inside a JSON object."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9, mtime=0) as f:
        f.write(b'{"format": "exactmax/maxout", "version": 1, "layers": [')
        block = b" " * (1 << 20)
        for _ in range(size >> 20):
            f.write(block)
        f.write(b"]}")
    return buf.getvalue()


# ------------------------------------------------------------------------------- commands

@dataclass(frozen=True)
class Command:
    """A command line reading a file of ``format``: ``{f}`` is the file, ``{o}`` an output
    path, ``{v}`` an output .v path; ``cost`` 1 for fast commands, more for those that prove.
    ``limit_s``: the time a case may take (``HUGE_FACTOR`` times more with huge numbers)."""

    format: str
    name: str
    argv: tuple[str, ...]
    cost: int = 1
    limit_s: float = 20.0
    timeout_s: float | None = None
    """The command's own --timeout, when it bounds the whole command: then the case must end
    within it plus ``TIMEOUT_MARGIN_S``, whatever the input (huge numbers included)."""


def commands(s: Seeds) -> list[Command]:
    t, tf, tri, pts, box = s.tent, s.tf, s.triangle, s.points, s.box
    X = "1/3,-1/2"
    C = []

    def timed(fmt, name, argv, cost, seconds):
        """A command whose --timeout (``seconds``) bounds all of it: checked as such."""
        return Command(fmt, name, argv + ("--timeout", str(seconds)), cost,
                       timeout_s=seconds)

    for fmt in ("maxout", "transformer"):
        C += [Command(fmt, "info", ("info", "{f}")),
              Command(fmt, "eval", ("eval", "{f}", "--input", X)),
              Command(fmt, "eval --inputs", ("eval", "{f}", "--inputs", pts)),
              timed(fmt, "equiv", ("equiv", "{f}", t, "--max-leaves", "300", "--cert", "{o}"),
                    4, 3),
              timed(fmt, "search", ("search", t, "{f}", "--max-examples", "3"), 3, 5),
              timed(fmt, "regions", ("regions", "{f}", "--domain", box, "--max-cells", "60",
                                     "--cert", "{o}"), 4, 5)]
    # softmax-bound: --timeout bounds the bounds over the domain and the search; the kernel's
    # re-check comes on top (so the general limit)
    C += [timed("maxout", "compile", ("compile", "{f}", "-o", "{o}"), 2, 5),
          timed("maxout", "verify", ("verify", "{f}", "--max-leaves", "300", "--cert", "{o}"),
                4, 3),
          Command("maxout", "softmax-bound", ("softmax-bound", "{f}", "--lambda", "50",
                                              "--max-cells", "40", "--timeout", "1"), 4),
          timed("transformer", "verify", ("verify", t, "--transformer", "{f}",
                                          "--max-leaves", "300"), 4, 3),
          Command("transformer", "softmax-bound", ("softmax-bound", t, "--transformer", "{f}",
                                                   "--lambda", "50", "--max-cells", "40",
                                                   "--timeout", "1"), 4)]
    for fmt in ("domain-box", "domain-polyhedron"):
        C += [timed(fmt, "info", ("info", t, "--domain", "{f}"), 1, 2),
              Command(fmt, "eval", ("eval", t, "--domain", "{f}", "--input", X)),
              timed(fmt, "compile", ("compile", t, "--domain", "{f}", "-o", "{o}"), 2, 5),
              timed(fmt, "verify", ("verify", t, "--domain", "{f}", "--max-leaves", "300",
                                    "--cert", "{o}"), 4, 3),
              timed(fmt, "equiv", ("equiv", t, tf, "--domain", "{f}", "--strategy",
                                   "monolithic", "--max-leaves", "300"), 4, 3),
              timed(fmt, "search", ("search", t, tri, "--domain", "{f}", "--max-examples",
                                    "3"), 3, 5),
              timed(fmt, "regions", ("regions", t, "--domain", "{f}", "--max-cells", "60"),
                    4, 5),
              Command(fmt, "softmax-bound", ("softmax-bound", t, "--domain", "{f}",
                                             "--lambda", "50", "--max-cells", "40",
                                             "--timeout", "1"), 4)]
    C += [Command("certificate", "check-cert", ("check-cert", "{f}"), 2),
          Command("certificate", "check-cert --models", ("check-cert", "{f}", "--models", t,
                                                         tf, "--domain", box), 2),
          Command("certificate", "export-coq", ("export-coq", "{f}", "-o", "{v}"), 2),
          Command("region-certificate", "regions --check-cert", ("regions", "--check-cert",
                                                                 "{f}"), 2),
          Command("region-certificate", "regions --check-cert MODEL",
                  ("regions", t, "--check-cert", "{f}"), 2),
          Command("cpwl", "cpwl", ("cpwl", "{f}", "-o", "{o}", "--reference", "{r}")),
          Command("cpwl", "cpwl --check", ("cpwl", "{f}", "-o", "{o}", "--check", "--timeout",
                                           "3"), 4),
          Command("points", "eval --inputs", ("eval", t, "--inputs", "{f}")),
          Command("points", "eval --inputs TF", ("eval", tf, "--inputs", "{f}", "--json"))]
    return C


def pick_command(rng, cmds: list[Command]) -> Command:
    """A command, the cheap ones more often (weight 1 / cost)."""
    weights = [1 / c.cost for c in cmds]
    r = rng.random() * sum(weights)
    for c, w in zip(cmds, weights):
        r -= w
        if r <= 0:
            return c
    return cmds[-1]


# ---------------------------------------------------------------------------------- runs

HUGE_FACTOR = 6
"""Cases with numbers of thousands of digits get this many times the command's time limit
(commands without a --timeout that bounds them: one exact LP on 10^5-digit numbers takes
seconds), and so do gzip bombs (decompressing 1 GiB on a loaded machine)."""
TIMEOUT_MARGIN_S = 4.0
"""A command given --timeout S (``Command.timeout_s``) must end within S + this, in-process,
whatever its input: the limit holds within about a second even inside one long exact step
(``exactmax.interruption.time_limit``), and the rest is room for a loaded machine."""
SUBPROCESS_START_S = 3.0
"""... and a subprocess gets this much more, to start Python and import exactmax."""


class FuzzTimeout(BaseException):
    """Raised by the alarm of an in-process case that ran too long."""


@dataclass
class Outcome:
    status: int | None
    out: str
    err: str
    seconds: float
    rss_kb: int = 0
    outputs: dict = field(default_factory=dict)   # output path -> exists, parses
    leftovers: list = field(default_factory=list)


def _alarm(signum, frame):
    raise FuzzTimeout()


def run_inprocess(argv: list[str], limit_s: float) -> Outcome:
    """``exactmax.cli.main(argv)`` with captured output, stopped after ``limit_s``."""
    from exactmax.cli import main
    out, err = io.StringIO(), io.StringIO()
    t0 = time.monotonic()
    old = signal.signal(signal.SIGALRM, _alarm) \
        if threading.current_thread() is threading.main_thread() else None
    if old is not None:
        signal.setitimer(signal.ITIMER_REAL, limit_s)
    status = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(argv)
            except SystemExit as e:
                status = e.code if isinstance(e.code, int) else 2
    except FuzzTimeout:
        status = None
    finally:
        if old is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    return Outcome(status, out.getvalue(), err.getvalue(), time.monotonic() - t0)


def run_subprocess(argv: list[str], limit_s: float, memory_bytes: int = 4 << 30) -> Outcome:
    """``python -m exactmax argv`` with its peak resident memory, killed after ``limit_s``
    (and limited to ``memory_bytes`` of address space)."""
    import resource
    import tempfile

    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, "-m", "exactmax", *argv], stdout=fo, stderr=fe,
                             stdin=subprocess.DEVNULL, cwd=ROOT, preexec_fn=limits)
        timer = threading.Timer(limit_s, p.kill)
        timer.start()
        try:
            _, wstatus, ru = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(wstatus)
        seconds = time.monotonic() - t0
        fo.seek(0)
        fe.seek(0)
        status = None if p.returncode == -9 else p.returncode
        return Outcome(status, fo.read(), fe.read(), seconds, ru.ru_maxrss)


def judge(o: Outcome, limit_s: float, memory_kb: int | None = None) -> str | None:
    """What is wrong with an outcome (None: nothing)."""
    if o.status is None:
        return f"no answer within {limit_s:g} s"
    if o.status not in (0, 1, 2, 3, 4, 5):
        return f"exit status {o.status}"
    if "Traceback" in o.err or "Traceback" in o.out:
        return "a traceback"
    if o.status == 2:
        lines = o.err.splitlines()
        if len(lines) != 1 or not lines[0].startswith("exactmax: error: "):
            return f"exit 2 with {len(lines)} lines on stderr"
        if len(lines[0]) > 2000:
            return f"an error line of {len(lines[0])} characters"
        for path, state in o.outputs.items():
            if state is not None:
                return f"exit 2 but {os.path.basename(path)} was written ({state})"
    else:
        for path, state in o.outputs.items():
            if state == "not JSON":
                return f"{os.path.basename(path)} is not valid JSON"
    if o.leftovers:
        return f"temporary files left: {o.leftovers}"
    if o.seconds > limit_s:
        return f"took {o.seconds:.1f} s (limit {limit_s:g} s)"
    if memory_kb is not None and o.rss_kb > memory_kb:
        return f"peak memory {o.rss_kb // 1024} MiB"
    return None


def _output_state(path: str):
    if not os.path.exists(path):
        return None
    if not path.endswith(".json"):
        return "written"
    try:
        with open(path) as f:
            json.load(f)
        return "complete"
    except ValueError:
        return "not JSON"


@dataclass
class Case:
    format: str
    seed: str
    command: str
    mutation: str
    status: int | None
    seconds: float
    failure: str | None
    rss_kb: int = 0
    err: str = ""


def run_case(cmd: Command, seed: Seed, rng, work: str, subprocess_run: bool = False,
             bomb: bool = False, mutation: tuple | None = None) -> Case:
    """Mutate ``seed`` (or take ``mutation``: data, what, gzip?), write it into the folder
    ``work`` and run ``cmd`` on it."""
    for name in os.listdir(work):
        os.unlink(os.path.join(work, name))
    if mutation is not None:
        data, what, zipped = mutation
    elif bomb:
        data, what, zipped = gzip_bomb(bomb if isinstance(bomb, int) and bomb > 1 else 8 << 20), \
            "gzip bomb", True
    else:
        data, what, zipped = mutate(seed, rng)
    ext = (".json" if seed.json else ".txt") + (".gz" if zipped else "")
    f = os.path.join(work, "input" + ext)
    with open(f, "wb") as fh:
        fh.write(data)
    outs = {"o": os.path.join(work, "out.json"), "v": os.path.join(work, "Out.v"),
            "r": os.path.join(work, "ref.json")}
    argv = [a.format(f=f, **outs) for a in cmd.argv]
    # a command with a --timeout that bounds it is held to it, whatever the input; others:
    # exact arithmetic on numbers of up to 10^5 digits is slow by nature (one exact LP takes
    # seconds), and so is decompressing a 1 GiB bomb on a loaded machine: those cases get
    # HUGE_FACTOR x longer
    if cmd.timeout_s is not None and not bomb:
        limit = cmd.timeout_s + TIMEOUT_MARGIN_S + (SUBPROCESS_START_S if subprocess_run
                                                     else 0.0)
    else:
        limit = cmd.limit_s * (HUGE_FACTOR if "huge number" in what or bomb else 1)
    o = (run_subprocess if subprocess_run else run_inprocess)(argv, limit)
    used = {p for k, p in outs.items() if "{" + k + "}" in cmd.argv}
    o.outputs = {p: _output_state(p) for p in used}
    o.leftovers = [n for n in os.listdir(work) if n.startswith(".exactmax-")]
    return Case(cmd.format, seed.name, cmd.name, what, o.status, o.seconds,
                judge(o, limit, (1 << 20) if subprocess_run else None), o.rss_kb,
                o.err[-600:])


# ----------------------------------------------------------------- certificate tampering

def _certificate_numbers(c, where: str):
    """(path, value) of the number strings of a certificate's part ``where``."""
    root = {"tree": c.get("tree"), "layerwise": c.get("layerwise"),
            "correspondence": c.get("correspondence"),
            "models": c["models"], "domain": c["domain"]}[where]
    base = (where,)
    return [(base + p, y) for p, y in _nodes(root)
            if _is_number(y) and p and p[-1] not in ("program", "node", "sha256")]


def tamper_certificate(cert: dict, rng) -> tuple[dict, str]:
    """A copy of ``cert`` with random edits: numbers, choices, subtrees, hashes, embedded
    models and domain (hash recomputed or not), witnesses; (certificate, what)."""
    from exactmax.io.certificates import content_hash
    c = copy.deepcopy(cert)
    what = []
    for _ in range(rng.choice([1, 1, 2])):
        kind = rng.choice(["number", "number", "choice", "subtree", "hash", "model", "model",
                           "domain", "witness", "integer"])
        body = next(k for k in ("tree", "layerwise", "correspondence") if k in c)
        if kind == "number":
            nums = _certificate_numbers(c, body)
            if nums:
                p, y = rng.choice(nums)
                q = Fraction(str(y))
                _set(c, p, str(rng.choice([q + Fraction(1, rng.choice([2, 7, 1000, 10**12])),
                                           q - Fraction(1, 3), -q, Fraction(0), q * 2])))
        elif kind == "integer":
            ints = [(p, y) for p, y in _nodes(c[body]) if isinstance(y, int) and
                    not isinstance(y, bool)]
            if ints:
                p, y = rng.choice(ints)
                _set(c, (body,) + p, rng.choice([y + 1, y - 1, 0, 1, 2, 100]))
        elif kind == "choice":
            chs = [y for _, y in _nodes(c[body]) if isinstance(y, dict) and "k" in y]
            if chs:
                ch = rng.choice(chs)
                n = max(1, len(ch.get("proofs", [])))
                ch["k"] = rng.choice([(ch["k"] + 1) % n, rng.randrange(n), ch["k"]])
                if rng.random() < 0.3 and ch.get("proofs"):
                    rng.shuffle(ch["proofs"])
        elif kind == "subtree":
            trees = [(p, y) for p, y in _nodes(c[body]) if isinstance(y, dict) and
                     ("split" in y or "leaf" in y or "empty" in y)]
            if trees:
                p, t = rng.choice(trees)
                r = rng.random()
                if "split" in t and r < 0.3:
                    t["ge"], t["lt"] = t["lt"], t["ge"]
                elif "split" in t and r < 0.5:
                    _set(c, (body,) + p, copy.deepcopy(rng.choice([t["ge"], t["lt"]])))
                elif "split" in t and r < 0.7:
                    t["split"]["c"] = str(Fraction(str(t["split"]["c"])) +
                                          Fraction(rng.choice([-1, 1]), rng.choice([3, 100])))
                elif len(trees) > 1:
                    _, other = rng.choice(trees)
                    if other is not t:
                        _set(c, (body,) + p, copy.deepcopy(other))
        elif kind == "hash":
            part = rng.choice(["a", "b", "domain"])
            e = c["domain"] if part == "domain" else c["models"][part]
            h = e["sha256"]
            i = rng.randrange(len(h))
            e["sha256"] = h[:i] + ("0" if h[i] != "0" else "1") + h[i + 1:]
        elif kind in ("model", "domain"):
            if kind == "model":
                part = rng.choice(["a", "b"])
                e = c["models"][part]
                inner = e["model"]
            else:
                e = c["domain"]
                inner = e["domain"]
            nums = [(p, y) for p, y in _nodes(inner) if _is_number(y) and
                    p and p[-1] not in ("version", "input_dim", "d_model", "token")]
            if nums:
                p, y = rng.choice(nums)
                q = Fraction(str(y))
                _set(inner, p, str(rng.choice([q + Fraction(1, rng.choice([3, 10**6])), -q,
                                               Fraction(0), q * 2])))
            if rng.random() < 0.85:
                e["sha256"] = content_hash(inner)
        elif kind == "witness":
            w = c["domain"].get("witness")
            if w:
                k = rng.choice(list(w))
                w[k] = [str(Fraction(str(v)) + Fraction(rng.choice([-1, 1]), 5)) for v in w[k]]
        what.append(kind)
    return c, "+".join(what)


def _z3_maxout(net, xs):
    """Output terms of a Maxout network on z3 inputs (an encoding of this file's own)."""
    import z3

    def rv(v):
        f = Fraction(str(v)) if not isinstance(v, Fraction) else v
        return z3.RealVal(f"{f.numerator}/{f.denominator}")

    h = list(xs)
    for layer in net.layers:
        new = []
        for u in layer.units:
            vals = [z3.Sum([rv(w) * hv for w, hv in zip(p.w, h)] + [rv(p.b)])
                    for p in u.pieces]
            m = vals[0]
            for v in vals[1:]:
                m = z3.If(v > m, v, m)
            new.append(m)
        h = new
    if net.output is None:
        return h
    return [z3.Sum([rv(w) * hv for w, hv in zip(row, h)] + [rv(c)])
            for row, c in zip(net.output.W, net.output.b)]


def _reference(model, x):
    from reference import maxout_reference, transformer_reference

    from exactmax.kernel.maxout import MaxoutNetwork
    return maxout_reference(model, x) if isinstance(model, MaxoutNetwork) else \
        transformer_reference(model, x)


def domain_points(dom, rng, n: int = 60) -> list[tuple[Fraction, ...]]:
    """Points of the domain: its bounding box's corners and centre, and random points with
    small denominators (rejection-sampled for a polyhedron)."""
    import itertools

    from exactmax.io.numbers import to_fraction
    from exactmax.kernel.polyhedron import Box
    if isinstance(dom, Box):
        lo, hi = [to_fraction(v) for v in dom.lower], [to_fraction(v) for v in dom.upper]
    else:
        from exactmax.engine.lp import analyze_domain
        r = analyze_domain(dom)
        if r.empty or r.lower is None:
            return []
        lo, hi = [to_fraction(v) for v in r.lower], [to_fraction(v) for v in r.upper]
    cand = [tuple(c) for c in itertools.product(*zip(lo, hi))] if len(lo) <= 6 else []
    cand.append(tuple((a + b) / 2 for a, b in zip(lo, hi)))
    for _ in range(20 * n):
        if len(cand) >= n:
            break
        den = rng.choice([1, 2, 3, 4, 7, 16, 97])
        cand.append(tuple(a + (b - a) * Fraction(rng.randint(0, den), den)
                          for a, b in zip(lo, hi)))
    from exactmax.kernel.rational import Q
    return [x for x in cand if dom.contains(tuple(Q(v.numerator, v.denominator) for v in x))]


def claim_holds(path: str, rng, z3_timeout_s: float = 20.0) -> tuple[bool, str]:
    """Independently of check-cert's kernel: does A(x) = B(x) hold on the whole domain of the
    certificate at ``path``?  (True, how) only when established: the reference evaluators
    agree at many points, and z3 finds no point where they differ (unsat).  (False, why)
    when a point differs or nothing could be established."""
    import z3

    from exactmax.io.certificates import load_certificate
    from exactmax.io.numbers import to_fraction
    from exactmax.kernel.maxout import MaxoutNetwork
    from exactmax.kernel.rational import Q
    a, b, dom, _, _, _ = load_certificate(path)
    for x in domain_points(dom, rng):
        ya, yb = _reference(a, x), _reference(b, x)
        if ya != yb:
            return False, f"A and B differ at x = {tuple(str(v) for v in x)}"
    xs = [z3.Real(f"x{i}") for i in range(dom.dim)]
    P = dom.as_polyhedron()
    s = z3.Solver()
    s.set("timeout", int(z3_timeout_s * 1000))
    s.add([z3.Sum([z3.RealVal(str(to_fraction(v))) * x for v, x in zip(row, xs)] +
                  [z3.RealVal(0)]) <= z3.RealVal(str(to_fraction(c)))
           for row, c in zip(P.A, P.b)])
    if isinstance(a, MaxoutNetwork) and isinstance(b, MaxoutNetwork):
        oa, ob = _z3_maxout(a, xs), _z3_maxout(b, xs)
        if len(oa) != len(ob):
            return False, "output dimensions differ"
        s.add(z3.Or([p != q for p, q in zip(oa, ob)]))
        r = s.check()
        how = "own z3 encoding"
    else:
        from exactmax.kernel.program import program_of_maxout, program_of_transformer
        from exactmax.engine.smt import find_difference
        prog = [program_of_maxout(m) if isinstance(m, MaxoutNetwork) else
                program_of_transformer(m) for m in (a, b)]
        verdict, x = find_difference(prog[0], prog[1], P, z3_timeout_s)
        if verdict == "sat":
            xf = tuple(to_fraction(v) for v in x)
            if _reference(a, xf) != _reference(b, xf):
                return False, f"A and B differ at x = {tuple(str(v) for v in xf)} (z3)"
            return False, "z3 claims a difference the reference evaluators do not confirm"
        r = z3.unsat if verdict == "unsat" else z3.unknown
        how = "z3 on the program encoding"
    if r == z3.unsat:
        return True, how
    if r == z3.sat:
        return False, "z3 finds a point where A and B differ"
    return False, "z3 could not decide the claim"


def domain_empty(path: str) -> tuple[bool, str]:
    """Independently: is the certificate's domain empty?  (for an exit 5, vacuous)."""
    import z3

    from exactmax.io.certificates import load_certificate
    from exactmax.io.numbers import to_fraction
    from exactmax.kernel.polyhedron import Box
    _, _, dom, _, _, _ = load_certificate(path)
    if isinstance(dom, Box):
        return any(lo > hi for lo, hi in zip(dom.lower, dom.upper)), "box bounds"
    P = dom.as_polyhedron()
    xs = [z3.Real(f"x{i}") for i in range(P.dim)]
    s = z3.Solver()
    s.add([z3.Sum([z3.RealVal(str(to_fraction(v))) * x for v, x in zip(row, xs)] +
                  [z3.RealVal(0)]) <= z3.RealVal(str(to_fraction(c)))
           for row, c in zip(P.A, P.b)])
    return s.check() == z3.unsat, "z3"


@dataclass
class TamperCase:
    source: str
    what: str
    status: int | None
    accepted_ok: bool | None
    failure: str | None
    seconds: float


def run_tamper_case(name: str, cert: dict, rng, work: str, limit_s: float = 30.0) -> TamperCase:
    """Tamper ``cert``, run check-cert on it; an acceptance (exit 0) must be confirmed by
    ``claim_holds``, an exit 5 by ``domain_empty``."""
    c, what = tamper_certificate(cert, rng)
    path = os.path.join(work, "tampered.json")
    with open(path, "w") as f:
        json.dump(c, f)
    o = run_inprocess(["check-cert", path], limit_s)
    failure = judge(o, limit_s)
    ok = None
    if failure is None and o.status == 0:
        ok, how = claim_holds(path, rng)
        if not ok:
            failure = f"accepted, but the claim is not established: {how}"
    elif failure is None and o.status == 5:
        ok, how = domain_empty(path)
        if not ok:
            failure = "vacuous, but the domain is not empty"
    elif failure is None and o.status not in (1, 2):
        failure = f"check-cert exit {o.status}"
    return TamperCase(name, what, o.status, ok, failure, o.seconds)
