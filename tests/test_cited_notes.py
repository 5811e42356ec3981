"""Every page exactmax's output cites ships in docs/, with the section it names.

Command output, help texts, the files exactmax writes and the docstrings of its modules cite
the project's design notes ("docs/notes/construction.md §3", "docs/notes/regions.md"). A
citation must name a file of the repository under docs/ (the path a user of a clone or of the
guide can open), and "§N" (or "section N") a numbered heading "N. ..." of that file. Checked on
every string of exactmax/ (the trusted kernel's docstrings excepted: the kernel is not changed
for a docstring, and they name pages of the guide by their file names).
"""

from __future__ import annotations

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "exactmax")
KERNEL = os.path.join(PACKAGE, "kernel")

CITATION = re.compile(r"((?:[\w.-]+/)*[\w-]+\.md)(?:'s)?(?:\s*(?:§|section\s+)(\d+))?")


def numbered_sections(path: str) -> set[str]:
    with open(path, encoding="utf-8") as f:
        return set(re.findall(r"^#+\s+(\d+)\.\s", f.read(), flags=re.M))


def bad_citations(text: str) -> list[str]:
    """The citations of ``text`` that name no file under docs/ or no such section of it."""
    if re.fullmatch(r"[\w.-]+\.md", text):
        return []  # a file name on its own (a file to copy), not a citation
    bad = []
    for m in CITATION.finditer(text):
        path, section = m.group(1), m.group(2)
        full = os.path.join(ROOT, path)
        if not path.startswith("docs/") or not os.path.isfile(full):
            bad.append(f"{m.group(0)!r}: no such file under docs/")
        elif section is not None and section not in numbered_sections(full):
            bad.append(f"{m.group(0)!r}: {path} has no section {section}")
    return bad


def docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def strings_of_the_package() -> list[tuple[str, int, str]]:
    """(file, line, text) of every string constant of exactmax/, f-string parts included."""
    found = []
    for folder, _, files in os.walk(PACKAGE):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            docstrings = docstring_nodes(tree) if folder.startswith(KERNEL) else set()
            for node in ast.walk(tree):
                if isinstance(node, ast.JoinedStr):  # an f-string's text, its fields as {}
                    text = "".join(
                        v.value if isinstance(v, ast.Constant) else "{}" for v in node.values
                    )
                    found.append((os.path.relpath(path, ROOT), node.lineno, text))
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    if id(node) not in docstrings:
                        found.append((os.path.relpath(path, ROOT), node.lineno, node.value))
    return found


@pytest.mark.parametrize(
    "text",
    [
        "the argument of construction.md §3, on paper",  # not a path under docs/
        "corrected bound (regions.md, best split [2])",
        "docs/notes/construction.md §9",  # no section 9
        "docs/notes/missing.md",
        "see docs/notes/construction.md §2 and docs/softmax.md section 3",  # softmax.md: no §3
    ],
)
def test_a_citation_of_a_note_not_shipped_is_flagged(text: str) -> None:
    assert bad_citations(text), text


@pytest.mark.parametrize(
    "text",
    [
        "closed-form bound (docs/notes/construction.md §3)",
        "the recursion of docs/notes/construction.md section 3",
        "by docs/notes/regions.md's argument [0,1]^q holds every region",
        "docs/notes/certificates.md, pitfall 4; the guide: docs/softmax.md",
        "README.md",
        "no citation at all",
    ],
)
def test_a_citation_of_a_shipped_note_passes(text: str) -> None:
    assert bad_citations(text) == [], text


def test_every_citation_in_exactmax_names_a_shipped_page_and_section() -> None:
    strings = strings_of_the_package()
    cited = [s for s in strings if CITATION.search(s[2])]
    assert len(cited) >= 10  # the output's citations were found at all
    bad = [f"{f}:{line}: {b}" for f, line, text in strings for b in bad_citations(text)]
    assert bad == []
