"""Both checkers on one corpus: the kernel's check-cert and Coq (export-coq --check) on the
certificates exactmax writes for the examples, mixed ranks, polyhedra and the merged
construction, and on tamperings of each (one edit at a time: a choice, the proof at the
chosen index or another, a choice's program, a multiplier, a dropped choice, a box bound, a
first-layer image proof, a weight).  Prints, per kind of edit, how many certificates both
accept, both reject, and on how many they disagree (the goal: none).

    python benchmarks/checkers.py [--per-source 40] [--seed 0]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests"))
import certificate_corpus as corpus  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-source", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    library = os.path.join(corpus.ROOT, "proofs")
    tmp = tempfile.mkdtemp()
    t0 = time.monotonic()
    rows = collections.defaultdict(lambda: [0, 0, 0])   # kind -> both accept, reject, differ
    bad = []
    for name, cert in corpus.corpus(corpus.sources(tmp), args.per_source, args.seed):
        kind = name.split("/")[1].split("#")[0] if "/" in name else "valid (source)"
        kernel, coq = corpus.verdicts(tmp, name, cert, library)
        rows[kind][0 if kernel and coq else 1 if not (kernel or coq) else 2] += 1
        if kernel != coq:
            bad.append(f"{name}: kernel {'accepts' if kernel else 'rejects'}, Coq "
                       f"{'accepts' if coq else 'rejects'}")
    print("| edit | both accept | both reject | disagree |")
    print("|---|---:|---:|---:|")
    for kind in sorted(rows):
        print(f"| {kind} | " + " | ".join(str(n) for n in rows[kind]) + " |")
    total = [sum(r[i] for r in rows.values()) for i in range(3)]
    print(f"| all ({sum(total)}) | " + " | ".join(str(n) for n in total) + " |")
    print(f"\n{time.monotonic() - t0:.0f} s")
    for line in bad:
        print("disagreement:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
