"""No bullet or numbered list of README.md and docs/ is glued to the paragraph before it.

Python-Markdown, which MkDocs uses, reads a run of lines without a blank line between them as
one block, and the first line decides what the block is: a block that starts as a paragraph
stays a paragraph, so a list written right under a paragraph line ("How it decides:" then
"- ...") renders as run-on text. ``mkdocs build --strict`` says nothing about it. This test
reads the pages the way the block parser does (fenced code skipped, a heading line ending its
block, a list block keeping its own items and continuation lines) and names every list item
that lands inside a paragraph; the same reading is checked against Python-Markdown itself on
inputs it must flag and inputs it must pass.
"""

from __future__ import annotations

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")

LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+\S")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
OWN_BLOCK = re.compile(r"^\s*(?:#|\||>|<)")  # headings, table rows, quotes, HTML: not paragraphs


def doc_files() -> list[str]:
    pages = sorted(
        os.path.relpath(os.path.join(folder, f), ROOT)
        for folder, _, files in os.walk(DOCS)
        for f in files
        if f.endswith(".md")
    )
    return ["README.md"] + pages


def blocks(text: str) -> list[list[tuple[int, str]]]:
    """The runs of non-blank lines outside fenced code, each line with its 1-based number."""
    out: list[list[tuple[int, str]]] = []
    current: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(text.split("\n"), start=1):
        m = FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
        if m or not line.strip():
            if current:
                out.append(current)
            current = []
            continue
        current.append((number, line))
    if current:
        out.append(current)
    return out


def glued_list_items(text: str) -> list[int]:
    """Line numbers of list items that Python-Markdown would render inside a paragraph."""
    glued = []
    for block in blocks(text):
        in_paragraph = None  # decided by the first line of the block (or after a heading)
        for number, line in block:
            if in_paragraph is None:
                in_paragraph = not (LIST_ITEM.match(line) or OWN_BLOCK.match(line))
            elif in_paragraph and LIST_ITEM.match(line):
                glued.append(number)
            if line.lstrip().startswith("#"):
                in_paragraph = None  # a heading line ends its block
    return glued


def flattened_sublists(text: str) -> list[int]:
    """Line numbers of list items meant as a sublist (indented under an item) by fewer than
    four spaces: Python-Markdown nests a list only four spaces in, and makes these items
    siblings of their parent."""
    flat = []
    for block in blocks(text):
        base = None  # the indentation of the block's first item, if it starts as a list
        for number, line in block:
            if base is None:
                if not LIST_ITEM.match(line):
                    break
                base = len(line) - len(line.lstrip())
                continue
            indent = len(line) - len(line.lstrip())
            if LIST_ITEM.match(line) and base < indent < base + 4:
                flat.append(number)
    return flat


MUST_FLAG = [
    "How it decides:\n- first\n- second\n",
    "Exact throughout:\n1. one\n2. two\n",
    "Some text\nthat goes on\n* a starred item\n",
    "- a list\n\n  a paragraph inside the item\n  - a sublist glued to it\n",
    "Text:\n\n```\ncode\n```\nA paragraph after the fence\n+ a plus item\n",
]
MUST_PASS = [
    "How it decides:\n\n- first\n- second\n",
    "- an item\n  continued on the next line\n- another item\n",
    "- an item\nlazily continued\n- another item\n",
    "## A heading\n- a list right under a heading\n",
    "A paragraph with a fence:\n\n```\nnot a list:\n- inside code\n```\n",
    "1. one\n2. two\n   - nested\n",
    "| a | b |\n|---|---|\n| - | x |\n",
    "A paragraph with -5 and x - y in it\nand a second line\n",
]


@pytest.mark.parametrize("text", MUST_FLAG)
def test_a_list_under_a_paragraph_line_is_flagged(text: str) -> None:
    assert glued_list_items(text), text


@pytest.mark.parametrize("text", MUST_PASS)
def test_a_list_after_a_blank_line_or_in_its_own_block_passes(text: str) -> None:
    assert glued_list_items(text) == [], text


def rendered_as_paragraph_text(text: str) -> bool:
    """Whether Python-Markdown (MkDocs' extensions) leaves a list-item line inside a <p>."""
    markdown = pytest.importorskip("markdown")
    html = markdown.markdown(text, extensions=["tables", "fenced_code"])
    paragraphs = re.findall(r"<p>(.*?)</p>", html, flags=re.S)
    return any(LIST_ITEM.match(line) for p in paragraphs for line in p.split("\n"))


@pytest.mark.parametrize("text", MUST_FLAG + MUST_PASS)
def test_the_reading_agrees_with_python_markdown(text: str) -> None:
    assert bool(glued_list_items(text)) == rendered_as_paragraph_text(text), text


FLAT_MUST_FLAG = [
    "- a parent\n  - a child two spaces in\n- the next\n",
    "1. a numbered parent\n   - a child aligned with the text\n",
]
FLAT_MUST_PASS = [
    "- a parent\n    - a child four spaces in\n- the next\n",
    "- an item\n  continued two spaces in\n- the next\n",
    "A paragraph\n\n  - an indented list of its own\n  - its second item\n",
]


@pytest.mark.parametrize("text", FLAT_MUST_FLAG)
def test_a_sublist_indented_less_than_four_spaces_is_flagged(text: str) -> None:
    assert flattened_sublists(text), text


@pytest.mark.parametrize("text", FLAT_MUST_PASS)
def test_a_sublist_four_spaces_in_passes(text: str) -> None:
    assert flattened_sublists(text) == [], text


@pytest.mark.parametrize("text", FLAT_MUST_FLAG + FLAT_MUST_PASS)
def test_the_sublist_reading_agrees_with_python_markdown(text: str) -> None:
    markdown = pytest.importorskip("markdown")
    html = markdown.markdown(text, extensions=["tables", "fenced_code"])
    meant_nested = text in FLAT_MUST_FLAG or "four spaces in" in text
    nested = re.search(r"<li>[^<]*<(ul|ol)>", html) is not None
    assert bool(flattened_sublists(text)) == (meant_nested and not nested), html


@pytest.mark.parametrize("path", doc_files())
def test_no_sublist_of_the_guide_is_flattened(path: str) -> None:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        flat = flattened_sublists(f.read())
    assert flat == [], f"{path}: a sublist less than four spaces in (rendered flat) at lines {flat}"


@pytest.mark.parametrize("path", doc_files())
def test_no_list_of_the_guide_is_glued_to_a_paragraph(path: str) -> None:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        text = f.read()
    glued = glued_list_items(text)
    assert glued == [], f"{path}: a list item under a paragraph line (no blank line) at lines {glued}"
