"""The guide's "What is trusted" page (docs/trusted.md; the README links to it) states the kernel's
files with their line counts and code-line counts (cloc's count, ``test_kernel_size.code_lines``):
every file of exactmax/kernel is listed, every number is the file's current count, and so are
the totals and the core's.  ``python tests/test_readme_trusted.py --write`` rewrites the numbers
from the files."""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_kernel_size import CORE, code_lines  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = os.path.join(ROOT, "exactmax", "kernel")
PAGE = os.path.join(ROOT, "docs", "trusted.md")
ROW = re.compile(r"^\| `([a-z_]+\.py)`(?:, `__init__\.py`)? \| ([\d,]+) \| ([\d,]+) \|", re.M)
TOTALS = re.compile(r"[\d,]+ lines in all \([\d,]+ code lines\), [\d,]+ of them \([\d,]+ code "
                    r"lines\) the certificate-checking core")


def _counts(name: str) -> tuple[int, int]:
    """(lines, code lines) of a kernel file; errors.py's row includes __init__.py."""
    names = [name] + (["__init__.py"] if name == "errors.py" else [])
    texts = [open(os.path.join(KERNEL, n)).read() for n in names]
    return sum(len(t.splitlines()) for t in texts), sum(code_lines(t) for t in texts)


def _totals() -> str:
    files = [f for f in os.listdir(KERNEL) if f.endswith(".py") and f != "__init__.py"]
    lines, code = (sum(_counts(f)[k] for f in files) for k in (0, 1))
    core = [f"{m}.py" for m in CORE if m != "__init__"]
    core_lines, core_code = (sum(_counts(f)[k] for f in core) for k in (0, 1))
    return (f"{lines:,} lines in all ({code:,} code lines), {core_lines:,} of them "
            f"({core_code:,} code lines) the certificate-checking core")


def _section(text: str) -> str:
    return text[text.index("# What is trusted"):text.index("## What each answer rests on")]


def test_the_trusted_table_lists_every_kernel_file_with_its_counts():
    section = _section(open(PAGE).read())
    rows = {name: (int(a.replace(",", "")), int(b.replace(",", "")))
            for name, a, b in ROW.findall(section)}
    files = sorted(f for f in os.listdir(KERNEL) if f.endswith(".py") and f != "__init__.py")
    assert sorted(rows) == files
    for name, counts in rows.items():
        assert counts == _counts(name), name


def test_the_totals_and_the_core_are_current():
    """The page's totals, and its count of the certificate-checking core (the files of
    ``test_kernel_size.CORE``), counted now."""
    assert _totals() in " ".join(_section(open(PAGE).read()).split())


def test_a_stale_number_is_found():
    """The check can fail: a table whose count is off by one is refused."""
    section = _section(open(PAGE).read())
    name, a, b = ROW.findall(section)[0]
    assert (int(a.replace(",", "")) + 1, int(b.replace(",", ""))) != _counts(name)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    text = open(PAGE).read()

    def row(m):
        lines, code = _counts(m.group(1))
        head = m.group(0)[: m.start(2) - m.start(0)]
        return f"{head}{lines} | {code} |"

    text = ROW.sub(row, text)
    flat = " ".join(_section(text).split())
    old = TOTALS.search(flat)
    if old is None:
        sys.exit("docs/trusted.md: the totals sentence is missing")
    pattern = r"\s+".join(re.escape(w) for w in old.group(0).split())
    text = re.sub(pattern, _totals(), text, count=1)
    open(PAGE, "w").write(text)
    print(_totals())
