"""Coverage-guided fuzzing of exactmax's readers with atheris (libFuzzer), optional:
``pip install atheris`` (wheels for CPython 3.11 on x86-64 Linux), then

    python benchmarks/fuzz_atheris.py [libFuzzer options, e.g. -runs=20000 -max_len=4096]

Each input is written as a file of one format (the first byte picks it: Maxout network,
Transformer, domain, certificate, region certificate, CPWL spec, points; the second whether
it is gzip-compressed) and read by the command that reads it, in-process.  The starting
corpus is the valid files of ``tests/fuzz.py``.  An outcome that ``tests/fuzz.judge`` finds
wrong (exit status outside 0-5, a traceback, not exactly one line for exit 2, ...) raises,
which libFuzzer reports as a crash with the input that caused it.
"""

from __future__ import annotations

import gzip
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

import atheris  # noqa: E402

with atheris.instrument_imports():
    import exactmax.io.certificates  # noqa: F401
    import exactmax.io.jsonfile  # noqa: F401
    import exactmax.io.models  # noqa: F401
    import exactmax.io.points  # noqa: F401
    import exactmax.cpwl.spec  # noqa: F401
    import exactmax.regions.certfile  # noqa: F401

import fuzz  # noqa: E402

TMP = tempfile.mkdtemp(prefix="exactmax-atheris-")
SEEDS = fuzz.Seeds(TMP)
# one cheap reading command per format (the readers are what is fuzzed here)
READERS = {"maxout": ("info", "{f}"), "transformer": ("info", "{f}"),
           "domain-box": ("info", SEEDS.tent, "--domain", "{f}"),
           "domain-polyhedron": ("eval", SEEDS.tent, "--domain", "{f}", "--input", "0,0"),
           "certificate": ("check-cert", "{f}"),
           "region-certificate": ("regions", "--check-cert", "{f}"),
           "cpwl": ("cpwl", "{f}", "-o", os.path.join(TMP, "out.json")),
           "points": ("eval", SEEDS.tent, "--inputs", "{f}")}
FORMATS = list(READERS)


def one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    fmt = FORMATS[data[0] % len(FORMATS)]
    zipped = data[1] % 8 == 0
    body = data[2:]
    path = os.path.join(TMP, "input" + (".txt" if fmt == "points" else ".json") +
                        (".gz" if zipped else ""))
    with open(path, "wb") as f:
        f.write(gzip.compress(body, mtime=0) if zipped else body)
    out = os.path.join(TMP, "out.json")
    if os.path.exists(out):
        os.unlink(out)
    o = fuzz.run_inprocess([a.format(f=path) for a in READERS[fmt]], 20)
    o.outputs = {out: fuzz._output_state(out)} if fmt == "cpwl" else {}
    problem = fuzz.judge(o, 20)
    if problem:
        raise AssertionError(f"{fmt}: {problem}: {o.err[-500:]!r}")


def main() -> None:
    corpus = os.path.join(TMP, "corpus")
    os.mkdir(corpus)
    for i, s in enumerate(SEEDS.seeds):
        fmt = s.format if s.format in READERS else None
        if fmt is None:
            continue
        with open(os.path.join(corpus, f"seed{i}"), "wb") as f:
            f.write(bytes([FORMATS.index(fmt), 1]) + s.text.encode())
    atheris.Setup(sys.argv + [corpus], one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
