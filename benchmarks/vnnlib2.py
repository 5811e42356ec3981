"""The VNN-COMP instances through the VNN-LIB 2.0 interface: each 1.0 property rewritten as a
2.0 query, read back to the same property, and decided by ``exactmax vnnlib verify``.

    python benchmarks/vnnlib2.py [DIR] [--timeout S]

DIR (default vnncomp2022-test/ of $EXACTMAX_BENCH_DATA, else ../shared/data; where to get it:
docs/benchmarks.md, "Benchmark data") holds instances.csv (onnx,vnnlib,timeout) as
for ``benchmarks/vnncomp.py``.  For every instance the 1.0 file is rewritten as 2.0 text
(one network f with X real [n] and Y real [m]; X_i -> X[i], = -> ==, every constant as its
exact decimal with a point, as the 2.0 grammar wants), and the script checks that
``io.vnnlib2`` reads it to exactly the cases the 1.0 reader gives (same input polyhedra, same
rows).  Then ``exactmax vnnlib verify`` runs as its own process; the table shows its first
line, the wall time, the expected answer, and for a sat answer whether the printed
assignment, read back exactly, is a counterexample of the 1.0 property (kernel evaluation).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
import benchdata  # noqa: E402
sys.path.insert(0, os.path.join(HERE, ".."))
DEFAULT_DIR = benchdata.folder("vnncomp2022-test")

from exactmax.engine.casetree import violation  # noqa: E402
from exactmax.io import load_model  # noqa: E402
from exactmax.io.numbers import parse_rational  # noqa: E402
from exactmax.io.property_certificate import decimal_text  # noqa: E402
from exactmax.io.vnnlib import Atom, SList, parse_sexprs, read_vnnlib  # noqa: E402
from exactmax.io.vnnlib2 import read_query  # noqa: E402
from exactmax.kernel.rational import Q  # noqa: E402

from vnncomp import KNOWN  # noqa: E402


def _term(t) -> str:
    if isinstance(t, SList):
        items = [_term(i) for i in t.items]
        if items and items[0] == "=":
            items[0] = "=="
        return "(" + " ".join(items) + ")"
    text = t.text
    if text[:2] in ("X_", "Y_"):
        return f"{text[0]}[{text[2:]}]"
    try:
        v = parse_rational(text)
    except Exception:
        return text
    d = decimal_text(v)
    return d if "." in d else d + ".0"


def to_vnnlib2(text: str, n_x: int, n_y: int) -> str:
    """The 2.0 query of a 1.0 property (assertions kept in order; declarations replaced)."""
    out = [
        "(vnnlib-version <2.0>)",
        f"(declare-network f (declare-input X real [{n_x}]) (declare-output Y real [{n_y}]))",
    ]
    for form in parse_sexprs(text):
        head = form.items[0].text if isinstance(form, SList) and form.items else None
        if head == "assert":
            out.append(_term(form))
        elif head not in ("declare-const", "set-logic", "check-sat", "get-model", "exit"):
            raise ValueError(f"cannot rewrite {head}")
    return "\n".join(out) + "\n"


def _cases(p):
    return sorted(
        ((c.inputs.A, c.inputs.b, tuple(sorted(c.outputs, key=str))) for c in p.cases), key=str
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", default=DEFAULT_DIR)
    ap.add_argument("--timeout", type=float, default=None)
    args = ap.parse_args()
    if args.dir == DEFAULT_DIR:
        benchdata.require("vnncomp2022-test", "instances.csv")
    rows = list(csv.reader(open(os.path.join(args.dir, "instances.csv"))))
    print(f"{'instance':<34} {'same':>5} {'answer':>9} {'time s':>7} {'expected':>9}  check")
    wrong = 0
    with tempfile.TemporaryDirectory() as tmp:
        for onnx_name, prop_name, limit in rows:
            onnx_path = os.path.join(args.dir, onnx_name)
            prop_path = os.path.join(args.dir, prop_name)
            net = load_model(onnx_path)
            p1 = read_vnnlib(prop_path)
            q_path = os.path.join(tmp, onnx_name + "." + prop_name)
            with open(q_path, "w") as f:
                f.write(to_vnnlib2(open(prop_path).read(), net.input_dim, net.out_dim))
            same = _cases(read_query(q_path).property) == _cases(p1)
            timeout = args.timeout or float(limit)
            t0 = time.monotonic()
            r = subprocess.run(
                [sys.executable, "-m", "exactmax", "vnnlib", "verify", q_path,
                 "--network", f"f={onnx_path}", "--timeout", f"{timeout:g}"],
                capture_output=True, text=True,
            )
            wall = time.monotonic() - t0
            lines = r.stdout.splitlines()
            answer = lines[0] if lines else f"exit {r.returncode}"
            note = ""
            if answer == "sat":
                n = net.input_dim
                x = tuple(Q(Fraction(v).numerator, Fraction(v).denominator)
                          for v in lines[2:2 + n])
                note = ("counterexample re-checked" if violation(net, p1.cases, x)[0] is not None
                        else "NOT A COUNTEREXAMPLE")
            elif answer == "unsat":
                note = "certificates checked by the kernel"
            expected = KNOWN.get((onnx_name, prop_name), "?")
            if expected != "?" and answer in ("sat", "unsat") and answer != expected:
                wrong += 1
                note += " WRONG"
            wrong += 0 if same else 1
            print(f"{onnx_name + ' ' + prop_name:<34} {str(same):>5} {answer:>9} {wall:7.2f} "
                  f"{expected:>9}  {note}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
