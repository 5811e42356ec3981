"""The README's "What is trusted" table states the kernel's files and their line counts: every
file of exactmax/kernel is listed, and every number is the file's current line count."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = os.path.join(ROOT, "exactmax", "kernel")


def _lines(name: str) -> int:
    with open(os.path.join(KERNEL, name)) as f:
        return sum(1 for _ in f)


def test_the_trusted_table_lists_every_kernel_file_with_its_line_count():
    text = open(os.path.join(ROOT, "README.md")).read()
    section = text[text.index("## What is trusted"):text.index("## How it is built")]
    rows = dict(re.findall(r"^\| `([a-z_]+\.py)`(?:, `__init__\.py`)? \| (\d+) \|", section,
                           re.M))
    files = sorted(f for f in os.listdir(KERNEL) if f.endswith(".py") and f != "__init__.py")
    assert sorted(rows) == files
    for name, n in rows.items():
        want = _lines(name) + (_lines("__init__.py") if name == "errors.py" else 0)
        assert int(n) == want, name
    total = sum(_lines(f) for f in os.listdir(KERNEL) if f.endswith(".py"))
    assert f"{total:,} lines in all" in section
