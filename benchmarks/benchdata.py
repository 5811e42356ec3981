"""Where the benchmarks find VNN-COMP's public data, which a clone of exactmax does not hold.

The folder is ``$EXACTMAX_BENCH_DATA`` if set, else ``../shared/data`` beside the checkout. It
holds, as VNN-COMP 2022 publishes them (https://github.com/ChristopherBrix/vnncomp2022_benchmarks,
commit 324ce34; docs/benchmarks.md, "Benchmark data", says how to fetch them):

- ``vnncomp2022-test/``: the ``benchmarks/test`` folder as it is (test_nano, test_tiny,
  test_small, test_sat = ACAS Xu 1-7, test_unsat = ACAS Xu 1-6, test_prop.vnnlib,
  instances.csv);
- ``acasxu/``: ``benchmarks/acasxu`` with its ``onnx/*.onnx.gz`` and ``vnnlib/*.vnnlib.gz``
  unzipped (45 networks, 10 properties, instances.csv);
- ``mnist_fc/`` (only for the benchmarks that say so): ``benchmarks/mnist_fc``, unzipped likewise
  (3 networks, 30 properties, instances.csv).

A script that needs a folder that is not there stops with one line saying where to get it.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = "EXACTMAX_BENCH_DATA"
REPO = "https://github.com/ChristopherBrix/vnncomp2022_benchmarks"
SOURCES = {
    "vnncomp2022-test": f"{REPO} (folder benchmarks/test)",
    "acasxu": f"{REPO} (folder benchmarks/acasxu, gunzip its onnx/ and vnnlib/ files)",
    "mnist_fc": f"{REPO} (folder benchmarks/mnist_fc, gunzip its onnx/ and vnnlib/ files)",
}


def root() -> str:
    """The data folder: $EXACTMAX_BENCH_DATA, else ../shared/data beside the checkout."""
    return os.environ.get(ENV) or os.path.normpath(os.path.join(HERE, "..", "..", "shared", "data"))


def folder(name: str) -> str:
    """The path of data set ``name`` (a key of SOURCES), whether it exists or not."""
    return os.path.join(root(), name)


def missing(name: str, *files: str) -> str | None:
    """None if data set ``name`` (and each of ``files`` inside it) is there, else the message."""
    path = folder(name)
    absent = [f for f in files if not os.path.isfile(os.path.join(path, f))]
    if os.path.isdir(path) and not absent:
        return None
    what = path if not os.path.isdir(path) else os.path.join(path, absent[0])
    return (
        f"benchmark data not found: {what} (a clone does not hold it); get it from "
        f"{SOURCES[name]} into {path}, or set {ENV} to the folder that holds {name}/ "
        "(docs/benchmarks.md, 'Benchmark data')"
    )


def require(name: str, *files: str) -> str:
    """The path of data set ``name``; exits with one line (status 2) if it or a file is missing."""
    message = missing(name, *files)
    if message is not None:
        print(f"{os.path.basename(sys.argv[0]) or 'benchmark'}: error: {message}", file=sys.stderr)
        raise SystemExit(2)
    return folder(name)
