"""The guide's "What is trusted" page (docs/trusted.md; the README links to it) states the kernel's
files and their line counts: every file of exactmax/kernel is listed, and every number is the
file's current line count, and so is the total."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = os.path.join(ROOT, "exactmax", "kernel")


def _lines(name: str) -> int:
    with open(os.path.join(KERNEL, name)) as f:
        return sum(1 for _ in f)


def test_the_trusted_table_lists_every_kernel_file_with_its_line_count():
    text = open(os.path.join(ROOT, "docs", "trusted.md")).read()
    section = text[text.index("# What is trusted"):text.index("## What each answer rests on")]
    rows = dict(re.findall(r"^\| `([a-z_]+\.py)`(?:, `__init__\.py`)? \| (\d+) \|", section,
                           re.M))
    files = sorted(f for f in os.listdir(KERNEL) if f.endswith(".py") and f != "__init__.py")
    assert sorted(rows) == files
    for name, n in rows.items():
        want = _lines(name) + (_lines("__init__.py") if name == "errors.py" else 0)
        assert int(n) == want, name
    total = sum(_lines(f) for f in os.listdir(KERNEL) if f.endswith(".py"))
    assert f"{total:,} lines in all" in section


def test_the_core_line_count_is_current():
    """The page's count of the certificate-checking core: the files it names, counted now."""
    text = open(os.path.join(ROOT, "docs", "trusted.md")).read()
    core = ["rational.py", "affine.py", "polyhedron.py", "program.py", "certificate.py",
            "layerwise.py", "equivalence.py"]
    assert "the certificate-checking core (rationals, affine maps,\npolyhedra, programs, " \
           "certificates, layerwise, the entry point)" in text
    assert f"{sum(_lines(f) for f in core):,} of them the certificate-checking core" in text
