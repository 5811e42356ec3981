"""Peak memory and time of reading large input files (issue #23, item 5).

    python benchmarks/memory.py [--sizes 100,400] [--valid-sizes 100] [--dir /tmp/x]

For each size S (MB of JSON text) it writes, streaming:

- ``shape``: a Maxout network file whose top level is wrong (no "layers"; a list of S MB of
  "p/q" strings under "output"), plain and gzip-compressed: exactmax must refuse it from its
  top level, before parsing the list into Python objects;
- ``bomb``: a gzip file of a few MB that decompresses to 2 GiB (beyond the 1 GiB limit);
- ``valid`` (sizes of --valid-sizes): a valid Maxout network of S MB, read in full.

and runs ``exactmax info FILE`` on each in a fresh process, printing a Markdown table of exit
status, wall time and peak resident memory (ru_maxrss of the process), also as a multiple of
the decompressed size (after subtracting the resident memory of a process that only imports
exactmax).  ``--old`` adds, for the shape files, the full parse without the top-level pass
(what exactmax did before), for comparison.
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import resource, sys, time
sys.path.insert(0, {root!r})
t0 = time.monotonic()
mode, path = sys.argv[1], sys.argv[2]
if mode == "import":
    import exactmax.cli
    rc = 0
elif mode == "old":
    from exactmax.io import InputError
    from exactmax.io.jsonfile import Cursor, parse_json_text, read_text_file
    from exactmax.io.models import read_model
    try:
        read_model(Cursor(path, "", parse_json_text(read_text_file(path), path)))
        rc = 0
    except InputError:
        rc = 2
else:
    from exactmax.cli import main
    rc = main(["info", path])
print("RESULT", rc, time.monotonic() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def run(mode: str, path: str) -> tuple[int, float, int]:
    """(exit status, seconds, peak RSS in bytes) of one reading in a fresh process."""
    p = subprocess.run([sys.executable, "-c", CHILD.format(root=ROOT), mode, path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = [l for l in p.stdout.splitlines() if l.startswith("RESULT")]
    if not line:
        raise SystemExit(f"{mode} {path}: no result\n{p.stderr[-2000:]}")
    _, rc, t, rss = line[0].split()
    return int(rc), float(t), int(rss) * 1024


def write_shape(path: str, mb: int) -> int:
    """A model file with no "layers" and an ``mb`` MB list under "output"."""
    row = ",".join(f'"{i % 97 - 48}/{i % 89 + 1}"' for i in range(1000)).encode()
    opener = gzip.open if path.endswith(".gz") else open
    n = 0
    with opener(path, "wb") as f:
        for part in (b'{"format": "exactmax/maxout", "version": 1, "input_dim": 2, '
                     b'"output": {"W": [[',):
            f.write(part)
            n += len(part)
        first = True
        while n < mb * 10 ** 6:
            if not first:
                f.write(b",")
                n += 1
            f.write(row)
            n += len(row)
            first = False
        tail = b']], "b": [0]}}'
        f.write(tail)
        n += len(tail)
    return n


def write_valid(path: str, mb: int) -> int:
    """A valid Maxout network of about ``mb`` MB: input dimension 50, one layer of rank-2
    units with "p/q" weights, and its output map."""
    d = 50
    nums = [f'"{(i * 37) % 199 - 99}/{(i * 53) % 97 + 1}"' for i in range(997)]
    n = 0
    units = 0
    with open(path, "w") as f:
        head = f'{{"format": "exactmax/maxout", "version": 1, "input_dim": {d}, ' \
               '"layers": [{"units": ['
        f.write(head)
        n += len(head)
        while n < mb * 10 ** 6:
            i = units
            w1 = ",".join(nums[(i * 7 + j) % 997] for j in range(d))
            w2 = ",".join(nums[(i * 11 + j) % 997] for j in range(d))
            u = (("," if units else "") + f'{{"pieces": [{{"w": [{w1}], "b": {nums[i % 997]}}}, '
                 f'{{"w": [{w2}], "b": "0"}}]}}')
            f.write(u)
            n += len(u)
            units += 1
        tail = ']}], "output": {"W": [[' + ",".join(["1"] * units) + ']], "b": ["0"]}}'
        f.write(tail)
        n += len(tail)
    return n


def write_bomb(path: str, gib: int = 2) -> int:
    """gzip of ``gib`` GiB of spaces (a few MB on disk)."""
    block = b" " * (1 << 24)
    with gzip.open(path, "wb", compresslevel=9) as f:
        for _ in range(gib << 6):
            f.write(block)
    return gib << 30


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100,400", help="MB of the shape-error files")
    ap.add_argument("--valid-sizes", default="100", help="MB of the valid files ('' none)")
    ap.add_argument("--old", action="store_true",
                    help="also the full parse without the top-level pass (slow, large)")
    ap.add_argument("--dir", default=None, help="where to write the files (default a "
                    "temporary folder, removed afterwards)")
    args = ap.parse_args()
    tmp = args.dir or tempfile.mkdtemp(prefix="exactmax-memory-")
    _, _, base = run("import", "-")
    rows = []

    def measure(what, mode, path, size):
        rc, t, rss = run(mode, path)
        ratio = (rss - base) / size
        rows.append((what, os.path.getsize(path), size, rc, t, rss, ratio))
        print(f"  {what}: exit {rc}, {t:.1f} s, {rss / 2**20:.0f} MiB", file=sys.stderr,
              flush=True)
        return rows[-1]

    for mb in [int(s) for s in args.sizes.split(",") if s]:
        plain = os.path.join(tmp, f"shape{mb}.json")
        size = write_shape(plain, mb)
        measure(f"{mb} MB, no \"layers\"", "new", plain, size)
        if args.old:
            measure(f"{mb} MB, no \"layers\", full parse first (before)", "old", plain, size)
        os.unlink(plain)
        gz = plain + ".gz"
        size = write_shape(gz, mb)
        measure(f"{mb} MB gzip, no \"layers\"", "new", gz, size)
        os.unlink(gz)
    for mb in [int(s) for s in args.valid_sizes.split(",") if s]:
        path = os.path.join(tmp, f"valid{mb}.json")
        size = write_valid(path, mb)
        measure(f"{mb} MB valid network (read in full)", "new", path, size)
        os.unlink(path)
    bomb = os.path.join(tmp, "bomb.json.gz")
    size = write_bomb(bomb)
    measure("gzip bomb (2 GiB of spaces)", "new", bomb, size)
    os.unlink(bomb)
    if not args.dir:
        os.rmdir(tmp)
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores; a process that only "
          f"imports exactmax: {base / 2**20:.0f} MiB resident; "
          f"{time.strftime('%Y-%m-%d')}\n")
    print("| file | on disk | decompressed | exit | time | peak RSS | (RSS - import) / size |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for what, disk, size, rc, t, rss, ratio in rows:
        print(f"| {what} | {disk / 1e6:.1f} MB | {size / 1e6:.0f} MB | {rc} | {t:.1f} s | "
              f"{rss / 2**20:.0f} MiB | {ratio:.2f} |")


if __name__ == "__main__":
    main()
