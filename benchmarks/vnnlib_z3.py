"""VNN-LIB 1.0 files of the field read by exactmax and by z3's SMT-LIB parser: the same set?

    python benchmarks/vnnlib_z3.py [--max-mb M] [PATH ...]

Every PATH is a .vnnlib file or a folder searched for them (default: the ACAS Xu and VNN-COMP
2022 test folders of $EXACTMAX_BENCH_DATA, else ../shared/data, see docs/benchmarks.md; any VNN-COMP benchmark repository works, e.g.
github.com/ChristopherBrix/vnncomp2022_benchmarks, its benchmarks/*/vnnlib folders, with .gz
files unpacked).  For each file the script prints whether exactmax accepts it and, if so,
whether z3 decides (exact real arithmetic) that exactmax's reading - the cases of input
polyhedra and forbidden output rows - equals the conjunction of the assertions z3 parsed from
the same text (the check of tests/test_vnnlib_z3.py; z3's tokenizer reads no scientific
notation, so a file z3 refuses is given to it again with such numbers written as plain decimals
by Python's Decimal, and counted).  Files over M MB (default 20) are
listed as skipped.  Exit 1 if any accepted file differs.
"""

from __future__ import annotations

import glob
import os
import re
import sys
import time
from decimal import Decimal

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import benchdata  # noqa: E402
DEFAULT = [os.path.join(benchdata.folder("acasxu"), "vnnlib"), benchdata.folder("vnncomp2022-test")]


def files(paths):
    for p in paths:
        if os.path.isdir(p):
            yield from sorted(glob.glob(os.path.join(p, "**", "*.vnnlib"), recursive=True))
        else:
            yield p


_SCIENTIFIC = re.compile(r"(?<![\w.])([+-]?\d+(?:\.\d*)?[eE][+-]?\d+)(?![\w.])")


def plain_decimals(text: str) -> str:
    """The text with numbers in scientific notation written as plain decimals (Python's
    Decimal, not exactmax's reader), which z3's tokenizer reads: 1e-5 -> 0.00001."""
    return _SCIENTIFIC.sub(lambda m: format(Decimal(m.group(1)), "f"), text)


def main(argv):
    import z3
    from test_vnnlib_z3 import same_set

    from exactmax.io import InputError
    from exactmax.io.vnnlib import read_vnnlib

    max_mb = 20.0
    if argv[:1] == ["--max-mb"]:
        max_mb, argv = float(argv[1]), argv[2:]
    if not argv:
        benchdata.require("acasxu")
        benchdata.require("vnncomp2022-test")
    paths = argv or DEFAULT
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        sys.exit(f"vnnlib_z3: no such file or folder: {missing[0]} (see the docstring)")
    n = same = refused = differ = skipped = rewritten = 0
    for path in files(paths):
        if os.path.getsize(path) > max_mb * 2**20:
            skipped += 1
            print(f"skipped  {path} ({os.path.getsize(path) / 2**20:.0f} MB)")
            continue
        text = open(path, encoding="utf-8").read()
        t0 = time.perf_counter()
        n += 1
        try:
            prop = read_vnnlib(path)
        except InputError as e:
            refused += 1
            print(f"refused  {path}: {e}")
            continue
        names = ([f"X_{i}" for i in range(prop.n_x)], [f"Y_{j}" for j in range(prop.n_y)])
        try:
            problem = same_set(path, text, *names)
        except z3.Z3Exception:  # z3 reads no scientific notation: give it plain decimals
            rewritten += 1
            problem = same_set(path, plain_decimals(text), *names)
        dt = time.perf_counter() - t0
        if problem is None:
            same += 1
            print(f"same     {path} ({prop.n_x} inputs, {prop.disjuncts} disjuncts, {dt:.2f} s)")
        else:
            differ += 1
            print(f"DIFFERS  {problem}")
    print(
        f"{n} files: {same} read as z3 reads them, {refused} refused, {differ} differ"
        f" ({skipped} over {max_mb:g} MB skipped; {rewritten} given to z3 with their numbers in"
        " scientific notation written as plain decimals)"
    )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
