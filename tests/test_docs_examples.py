"""Every shell example of README.md and of the guide in docs/ runs, and prints what the page says.

An example is a fenced block of language ``console``: lines ``$ COMMAND`` (a trailing ``\\``
continues the command on the next line; a here-document ``<<'EOF'`` takes the lines up to
``EOF``), each followed by the output it must print (standard
output and standard error together, in order). The commands of one page run one after the
other, through ``bash``, in a fresh temporary folder that holds a copy of ``examples/`` (and of
``../shared/data/vnncomp2022-test/`` for the ONNX and VNN-LIB page), so a file one example
writes is there for the next; ``cd DIR`` changes the folder for the rest of the page.

The expected text is compared line by line, with three allowances for what varies from run to
run, and nothing else:

- ``...`` inside a line matches any text on that line (hashes, long numbers, paths);
- a line that is only ``...`` matches any number of lines, none included;
- a duration, a decimal number followed by `` s`` (``0.04 s``, ``2.2 s``), and a JSON value of
  a key ending in ``_s`` (``"time_s": 6.147``) match any number in their place.

Python examples (docs/python-api.md) are fenced blocks of language ``pycon``: lines
``>>> STATEMENT`` (lines ``... `` after it continue it), each followed by what it prints (the
value of an expression as the interpreter echoes it; an exception as
``Traceback (most recent call last):`` and its last line, so an expected traceback is written
with a ``...`` line between the two), compared with the same allowances.  They run in order, in
one Python process per page (started in the page's folder at its first example, so one
example's names and files are there for the next), between the page's console commands.

An exit status outside 0-5 (70 is a bug) fails the example, and so does an output line
``exactmax: error: ...`` with any status but 2. Commands that are shown but not run (long
benchmarks, installs) are written in ``sh`` blocks without a ``$`` prompt; a ``$`` prompt
anywhere else than in a ``console`` block fails :func:`test_every_prompt_is_in_a_console_block`,
and a ``>>>`` prompt anywhere else than in a ``pycon`` block fails
:func:`test_every_python_prompt_is_in_a_pycon_block`, so an example cannot escape the run by its
fence.

``python tests/test_docs_examples.py --count`` prints how many examples CI runs (commands and
Python examples);
``python tests/test_docs_examples.py --show docs/PAGE.md`` runs a page and prints what each
command printed (to write a new example).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
VNNCOMP = os.path.join(  # docs/benchmarks.md, "Benchmark data": where to get it
    os.environ.get("EXACTMAX_BENCH_DATA") or os.path.join(os.path.dirname(ROOT), "shared", "data"),
    "vnncomp2022-test",
)
TIMEOUT_S = 120


def doc_files() -> list[str]:
    """README.md and every page of the guide, as paths relative to the repository."""
    pages = sorted(os.path.join("docs", f) for f in os.listdir(DOCS) if f.endswith(".md"))
    return ["README.md"] + pages


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """One ``$ command`` of a console block and the output the page shows for it."""

    file: str
    line: int
    command: str
    expected: str
    python: bool = False    # a ``>>>`` example of a pycon block (its source in ``command``)


@dataclasses.dataclass(frozen=True, slots=True)
class Fence:
    file: str
    line: int          # of the opening fence, 1-based
    lang: str
    lines: tuple[str, ...]


def fences(text: str, file: str = "<text>") -> list[Fence]:
    """The fenced code blocks of a markdown text (``` fences, any indentation)."""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
        if m:
            indent, lang = len(m.group(1)), m.group(2)
            j = i + 1
            while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
                j += 1
            if j == len(lines):
                raise ValueError(f"{file}:{i + 1}: a code fence is never closed")
            body = tuple(l[indent:] if l[:indent].strip() == "" else l for l in lines[i + 1:j])
            out.append(Fence(file, i + 1, lang, body))
            i = j + 1
        else:
            i += 1
    return out


def steps(text: str, file: str = "<text>") -> list[Step]:
    """The commands of every ``console`` block of a page, in order, with their outputs."""
    out = []
    for f in fences(text, file):
        if f.lang != "console":
            continue
        i = 0
        if f.lines and not f.lines[0].startswith("$ "):
            raise ValueError(f"{file}:{f.line + 1}: a console block must start with '$ COMMAND'")
        while i < len(f.lines):
            start = i
            command = f.lines[i][2:]
            while command.endswith("\\") and i + 1 < len(f.lines):
                i += 1
                command = command[:-1] + "\n" + f.lines[i]
            here = re.search(r"<<-?\s*(['\"]?)(\w+)\1", command)
            if here:                    # a here-document: its lines, up to the word, are input
                while i + 1 < len(f.lines):
                    i += 1
                    command += "\n" + f.lines[i]
                    if f.lines[i] == here.group(2):
                        break
                else:
                    raise ValueError(f"{file}:{f.line + 1 + start}: the here-document is never "
                                     f"closed by {here.group(2)}")
            i += 1
            expected = []
            while i < len(f.lines) and not f.lines[i].startswith("$ "):
                expected.append(f.lines[i])
                i += 1
            out.append(Step(file, f.line + 1 + start, command, "\n".join(expected)))
    return out


def python_steps(text: str, file: str = "<text>") -> list[Step]:
    """The examples of every ``pycon`` block of a page, in order, with their outputs: a
    ``>>> `` line and the ``... `` lines after it are the source, the lines up to the next
    ``>>> `` what it prints (a line ``...`` alone is the wildcard, not a continuation)."""
    out = []
    for f in fences(text, file):
        if f.lang != "pycon":
            continue
        if f.lines and not f.lines[0].startswith(">>> "):
            raise ValueError(f"{file}:{f.line + 1}: a pycon block must start with '>>> '")
        i = 0
        while i < len(f.lines):
            start = i
            source = [f.lines[i][4:]]
            i += 1
            while i < len(f.lines) and f.lines[i].startswith("... "):
                source.append(f.lines[i][4:])
                i += 1
            expected = []
            while i < len(f.lines) and not f.lines[i].startswith(">>> "):
                expected.append(f.lines[i])
                i += 1
            out.append(Step(file, f.line + 1 + start, "\n".join(source), "\n".join(expected),
                            python=True))
    return out


def page_steps_of(text: str, file: str = "<text>") -> list[Step]:
    """The console commands and the Python examples of a page, in the page's order."""
    return sorted(steps(text, file) + python_steps(text, file), key=lambda s: s.line)


PYTHON_DRIVER = r"""
import contextlib, io, json, sys, traceback
namespace = {"__name__": "__main__"}
for line in sys.stdin:
    source = json.loads(line)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            exec(compile(source + "\n", "<pycon>", "single"), namespace)
        except Exception as e:
            out.write("Traceback (most recent call last):\n")
            out.write("".join(traceback.format_exception_only(type(e), e)))
    sys.__stdout__.write(json.dumps(out.getvalue()) + "\n")
    sys.__stdout__.flush()
"""
"""Runs a page's Python examples one by one, as the interactive interpreter would (``single``
mode: an expression's value is echoed), in one namespace; each example's source comes in as one
JSON line on stdin, what it printed goes out as one JSON line."""


class PythonSession:
    """The Python process of a page's examples (``PYTHON_DRIVER``), started in ``folder``."""

    def __init__(self, folder: str):
        self.process = subprocess.Popen([sys.executable, "-c", PYTHON_DRIVER], cwd=folder,
                                        env=_env(), stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)

    def run(self, s: Step) -> str:
        import select

        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(s.command) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], TIMEOUT_S)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.close()
            raise AssertionError(f"{s.file}:{s.line}: >>> {s.command}\nno answer within "
                                 f"{TIMEOUT_S} s, or the Python process ended")
        return json.loads(line)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


_TIME = re.compile(r"\d+(?:\.\d+)? s\b")
_JSON_TIME = re.compile(r'("\w*_s": )-?\d+(?:\.\d+)?')


def _line_pattern(line: str) -> str:
    """The regular expression of one expected line: ``...`` is any text, a duration any number."""
    out = []
    for i, part in enumerate(line.split("...")):
        if i:
            out.append(".*?")
        pos = 0
        marks = sorted([(m.start(), m.end(), "time") for m in _TIME.finditer(part)]
                       + [(m.start(1), m.end(), "json") for m in _JSON_TIME.finditer(part)])
        for a, b, kind in marks:
            if a < pos:
                continue
            out.append(re.escape(part[pos:a]))
            if kind == "time":
                out.append(r"\d+(?:\.\d+)? s\b")
            else:
                out.append(re.escape(part[a:b].split(":")[0]) + r": -?\d+(?:\.\d+)?(?:e-?\d+)?")
            pos = b
        out.append(re.escape(part[pos:]))
    return "".join(out)


def matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` is an output the page's ``expected`` text describes (module docstring)."""
    def lines(s):
        ls = [l.rstrip() for l in s.rstrip("\n").split("\n")]
        return [] if ls == [""] else ls
    pattern = ""
    for line in lines(expected):
        if line.strip() == "...":
            pattern += r"(?:[^\n]*\n)*?"
        else:
            pattern += _line_pattern(line) + r"\n"
    actual_text = "".join(l + "\n" for l in lines(actual))
    return re.fullmatch(pattern, actual_text, re.S) is not None


def workspace() -> str:
    """A fresh folder with a copy of examples/ (and of the VNN-COMP test files when present)."""
    tmp = tempfile.mkdtemp(prefix="exactmax-docs-")
    shutil.copytree(os.path.join(ROOT, "examples"), os.path.join(tmp, "examples"))
    if os.path.isdir(VNNCOMP):
        dst = os.path.join(tmp, "vnncomp2022-test")
        shutil.copytree(VNNCOMP, dst)
        for dirpath, _, names in os.walk(dst):      # shared/ is read-only; copies need not be
            os.chmod(dirpath, 0o755)
            for n in names:
                os.chmod(os.path.join(dirpath, n), 0o644)
    return tmp


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["COLUMNS"] = "100"
    env.pop("EXACTMAX_COQ_LIB", None)
    return env


def run_steps(page_steps: list[Step], folder: str) -> list[tuple[Step, int, str]]:
    """Run the steps in order in ``folder``; ``cd DIR`` moves there for the following commands.
    Python examples run in one ``PythonSession`` of the page, in ``folder`` (status 0)."""
    cwd = folder
    results = []
    env = _env()
    python = None
    try:
        for s in page_steps:
            if s.python:
                python = python or PythonSession(folder)
                results.append((s, 0, python.run(s)))
                continue
            bare = s.command.split("#")[0].strip()
            m = re.fullmatch(r"cd (\S+)", bare)
            if m:
                cwd = os.path.normpath(os.path.join(cwd, m.group(1)))
                if not cwd.startswith(folder) or not os.path.isdir(cwd):
                    raise AssertionError(f"{s.file}:{s.line}: cd {m.group(1)}: no such folder")
                results.append((s, 0, ""))
                continue
            p = subprocess.run(["bash", "-c", s.command], cwd=cwd, env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_S)
            results.append((s, p.returncode, p.stdout))
    finally:
        if python is not None:
            python.close()
    return results


def check_step(s: Step, status: int, output: str) -> None:
    """Raise AssertionError unless the step printed what the page says, with a sound status."""
    where = f"{s.file}:{s.line}: {'>>>' if s.python else '$'} {s.command}"
    if not matches(s.expected, output):
        raise AssertionError(f"{where}\n--- the page says:\n{s.expected}\n--- it printed "
                             f"(exit {status}):\n{output}")
    if status == 70 or status > 5 and status not in (127,):
        raise AssertionError(f"{where}: exit {status}\n{output}")
    if status == 127:
        raise AssertionError(f"{where}: command not found\n{output}")
    if any(l.startswith("exactmax: error:") for l in output.splitlines()) and status != 2:
        raise AssertionError(f"{where}: an error line with exit {status}, not 2")


def run_page(text: str, file: str) -> int:
    """Run every console and Python example of a page; the number of examples run."""
    page_steps = page_steps_of(text, file)
    if not page_steps:
        return 0
    folder = workspace()
    try:
        for s, status, output in run_steps(page_steps, folder):
            check_step(s, status, output)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return len(page_steps)


def _read(rel: str) -> str:
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


@pytest.mark.parametrize("rel", doc_files())
def test_every_example_of_the_page_runs_and_prints_what_it_shows(rel):
    text = _read(rel)
    page_steps = steps(text, rel)
    if any("vnncomp2022-test" in s.command for s in page_steps):
        assert os.path.isdir(VNNCOMP), (
            f"{rel} needs {VNNCOMP} (VNN-COMP's test category; where to get it: docs/benchmarks.md, "
            "'Benchmark data')"
        )
    if any(re.search(r"\bcoqc\b|export-coq .*--check", s.command) for s in page_steps) \
            and shutil.which("coqc") is None:
        if os.environ.get("EXACTMAX_REQUIRE_COQ"):
            raise RuntimeError("coqc is required (EXACTMAX_REQUIRE_COQ is set) but not installed")
        pytest.skip(f"{rel} runs Coq, and coqc is not installed (CI installs it)")
    run_page(text, rel)


@pytest.mark.parametrize("rel", doc_files())
def test_every_prompt_is_in_a_console_block(rel):
    """A ``$ `` prompt outside a console block would be an example that CI never runs."""
    text = _read(rel)
    for f in fences(text, rel):
        if f.lang != "console":
            bad = [l for l in f.lines if l.startswith("$ ")]
            kind = f.lang or "plain"
            assert not bad, f"{rel}:{f.line}: a '$ ' prompt in a {kind} block: {bad[0]}"
    in_fence = False
    for n, line in enumerate(text.split("\n"), 1):
        if re.match(r"^\s*```", line):
            in_fence = not in_fence
        elif not in_fence:
            assert not re.match(r"^ {4,}\$ ", line), f"{rel}:{n}: an indented '$ ' example"


@pytest.mark.parametrize("rel", doc_files())
def test_every_python_prompt_is_in_a_pycon_block(rel):
    """A ``>>> `` prompt outside a pycon block would be a Python example that CI never runs."""
    text = _read(rel)
    for f in fences(text, rel):
        if f.lang != "pycon":
            bad = [l for l in f.lines if l.startswith(">>> ")]
            kind = f.lang or "plain"
            assert not bad, f"{rel}:{f.line}: a '>>> ' prompt in a {kind} block: {bad[0]}"
    in_fence = False
    for n, line in enumerate(text.split("\n"), 1):
        if re.match(r"^\s*```", line):
            in_fence = not in_fence
        elif not in_fence:
            assert not re.match(r"^\s*>>> ", line), f"{rel}:{n}: a '>>> ' example outside a fence"


@pytest.mark.parametrize("rel", doc_files())
def test_no_fence_is_indented(rel):
    """MkDocs' fenced_code does not render a fence inside a list item (it becomes inline code):
    every fence starts in column 0."""
    for n, line in enumerate(_read(rel).split("\n"), 1):
        assert not re.match(r"^\s+```", line), f"{rel}:{n}: an indented code fence"


def test_the_guide_has_examples():
    """The harness finds the examples: most pages have some (a parse that found none would
    make every example test pass)."""
    counts = {rel: len(steps(_read(rel), rel)) for rel in doc_files()}
    assert counts["README.md"] >= 8
    assert sum(counts.values()) >= 60
    assert sum(1 for n in counts.values() if n) >= 10


def test_the_schemas_page_shows_every_schema():
    """docs/schemas.md prints every schema of ``exactmax schema --list`` (each block is re-run by
    the test above)."""
    listing = subprocess.run([sys.executable, "-m", "exactmax", "schema", "--list"],
                             capture_output=True, text=True, check=True).stdout
    names = [l.split()[0] for l in listing.splitlines() if l and not l[0].isspace()]
    assert len(names) >= 9
    shown = {s.command.strip() for s in steps(_read("docs/schemas.md"), "docs/schemas.md")}
    for name in names:
        assert f"exactmax schema {name}" in shown, name


def test_every_command_has_its_page():
    """Every command of ``exactmax --help`` is in the guide's table of commands (docs/index.md),
    which names the page that describes it, and that page mentions it."""
    text = subprocess.run([sys.executable, "-m", "exactmax", "--help"], capture_output=True,
                          text=True, check=True).stdout
    block = text.split("COMMAND\n", 1)[1].split("\noptions", 1)[0]
    commands = [l.split()[0] for l in block.splitlines() if re.match(r"^ {4}[a-z]", l)]
    assert len(commands) >= 18
    rows = [l for l in _read("docs/index.md").splitlines() if l.startswith("| `exactmax ")]
    for c in commands:
        row = [r for r in rows if f"`exactmax {c}`" in r]
        assert row, f"exactmax {c} is not in the table of docs/index.md"
        page = re.search(r"\]\(([\w-]+\.md)[)#]", row[0]).group(1)
        assert f"exactmax {c}" in _read(os.path.join("docs", page)), (c, page)


def test_the_property_test_example_is_the_one_the_tests_run():
    """docs/search.md's Python example (a user property-tests their own construction) is, line
    for line, code of tests/test_strategies.py, where it runs (``import`` lines: the names it
    imports are imported there too)."""
    blocks = [f for f in fences(_read("docs/search.md")) if f.lang == "python"]
    assert len(blocks) == 1
    src = _read(os.path.join("tests", "test_strategies.py"))
    lines = {l.rstrip() for l in src.split("\n")}
    for line in blocks[0].lines:
        m = re.match(r"from (\S+) import (.+)", line)
        if m:
            for name in (n.strip() for n in m.group(2).split(",")):
                assert re.search(rf"^from {re.escape(m.group(1))} import .*\b"
                                 rf"{re.escape(name)}\b", src, re.M), line
        elif line.strip():
            assert line.rstrip() in lines, line
    assert "def test_my_construction_is_exact(case):" in lines


def _readme_command(first_words: str) -> str:
    """The README's one-line command (an ``sh`` block) that starts with ``first_words``."""
    for f in fences(_read("README.md"), "README.md"):
        if f.lang == "sh" and f.lines and f.lines[0].startswith(first_words):
            return f.lines[0]
    raise AssertionError(f"README.md: no sh block starting with {first_words!r}")


def test_the_readme_two_commands():
    """The README's second command is what .ci/run runs, verbatim; the first one's exactmax part
    (after the install, which the test environment has done) runs and proves, exit 0."""
    install = "python3 -m venv .venv && . .venv/bin/activate && python -m pip install . && "
    first = _readme_command(install)
    second = _readme_command("python3 -m venv .venv && . .venv/bin/activate && python -m pip "
                             "install -q -e '.[test]'")
    assert second == ("python3 -m venv .venv && . .venv/bin/activate && python -m pip install -q "
                      "-e '.[test]' && python -m pytest -q -n auto")
    ci = open(os.path.join(ROOT, ".ci", "run")).read().splitlines()
    assert second in ci, ".ci/run must run the README's second command verbatim"
    assert _readme_command(install) in _read("docs/index.md")
    assert second in _read("docs/index.md")
    folder = workspace()
    try:
        p = subprocess.run(["bash", "-c", first[len(install):]], cwd=folder, env=_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=TIMEOUT_S)
        assert p.returncode == 0, p.stdout
        assert p.stdout.startswith("proved (certificate checked by the kernel)"), p.stdout
        assert "\nvalid: the kernel checked" in p.stdout, p.stdout
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --- the checker's own tests: inputs it must reject ---------------------------------------

PAGE = """
Some text.

```console
$ exactmax eval examples/tent.json --input "1/2,-1/3"
{out}
```
"""


def test_the_harness_accepts_the_right_output():
    assert run_page(PAGE.format(out="y = (1/6)"), "<page>") == 1


@pytest.mark.parametrize("out", ["y = (1/7)", "y = (1/6)\nmore", "", "y = (1/6", "y =(1/6)"])
def test_the_harness_rejects_a_wrong_output(out):
    with pytest.raises(AssertionError, match="the page says"):
        run_page(PAGE.format(out=out), "<page>")


def test_the_harness_rejects_an_error_line_with_the_wrong_status():
    page = "```console\n$ echo 'exactmax: error: x'\nexactmax: error: x\n```\n"
    with pytest.raises(AssertionError, match="not 2"):
        run_page(page, "<page>")
    with pytest.raises(AssertionError, match="exit 70"):
        run_page("```console\n$ exit 70\n```\n", "<page>")
    with pytest.raises(AssertionError, match="not found"):
        run_page("```console\n$ no-such-command-xyz\n...\n```\n", "<page>")


def test_the_patterns_allow_only_what_varies():
    assert matches("proved; 8 cells, 0.01 s", "proved; 8 cells, 12.5 s")
    assert not matches("proved; 8 cells, 0.01 s", "proved; 9 cells, 0.01 s")
    assert matches('{"time_s": 6.147, "cells": 197}', '{"time_s": 0.5, "cells": 197}')
    assert not matches('{"time_s": 6.147, "cells": 197}', '{"time_s": 0.5, "cells": 196}')
    assert matches("sha256 ...", "sha256 a5983861c5b8a81d...")
    assert matches("a\n...\nz", "a\nz")
    assert matches("a\n...\nz", "a\nb\nc\nz")
    assert not matches("a\n...\nz", "a\nb\nc")
    assert not matches("a ... z", "a b\nz")          # inline ... stays on its line
    assert not matches("12 cells", "12 s")


def test_a_here_document_is_input_not_output():
    page = "```console\n$ cat > a.txt <<'EOF'\nhello\nEOF\n$ cat a.txt\nhello\n```\n"
    s = steps(page)
    assert [x.expected for x in s] == ["", "hello"] and s[0].command.endswith("hello\nEOF")
    assert run_page(page, "<page>") == 2
    with pytest.raises(AssertionError, match="the page says"):
        run_page(page.replace("$ cat a.txt\nhello", "$ cat a.txt\nhullo"), "<page>")
    with pytest.raises(ValueError, match="never closed"):
        steps("```console\n$ cat > a.txt <<'EOF'\nhello\n```\n")


def test_a_prompt_outside_a_console_block_is_found():
    text = "```sh\n$ exactmax verify x.json\n```\n"
    f = fences(text)
    assert f[0].lang == "sh" and f[0].lines[0].startswith("$ ")
    with pytest.raises(ValueError, match="never closed"):
        fences("```console\n$ ls\n")


PYCON_PAGE = """
```pycon
>>> import exactmax as xm
>>> net = xm.load("examples/tent.json")
>>> net.input_dim, net.out_dim
{out}
>>> for d in (1, 2):
...     print(d * net.input_dim)
2
4
```

```console
$ ls examples/tent.json
examples/tent.json
```

```pycon
>>> xm.load("examples/none.json")
Traceback (most recent call last):
...
exactmax.io.errors.InputError: examples/none.json: no such file
```
"""


def test_the_harness_runs_python_examples():
    assert run_page(PYCON_PAGE.format(out="(2, 1)"), "<page>") == 6
    s = python_steps(PYCON_PAGE)
    assert [x.command for x in s][3] == "for d in (1, 2):\n    print(d * net.input_dim)"
    assert s[3].expected == "2\n4" and s[4].expected.startswith("Traceback")
    assert [x.python for x in page_steps_of(PYCON_PAGE)] == [True] * 4 + [False, True]


@pytest.mark.parametrize("out", ["(2, 2)", "", "(2, 1)\nmore"])
def test_the_harness_rejects_a_wrong_python_output(out):
    with pytest.raises(AssertionError, match="the page says"):
        run_page(PYCON_PAGE.format(out=out), "<page>")


def test_the_harness_rejects_an_unexpected_exception():
    page = "```pycon\n>>> 1 / 0\n1\n```\n"
    with pytest.raises(AssertionError, match="ZeroDivisionError: division by zero"):
        run_page(page, "<page>")
    with pytest.raises(ValueError, match="must start with '>>> '"):
        python_steps("```pycon\n1 + 1\n```\n")


def _main(argv: list[str]) -> int:
    if argv[:1] == ["--count"]:
        total = total_python = 0
        for rel in doc_files():
            n = sum(1 for s in steps(_read(rel), rel)
                    if not re.fullmatch(r"cd \S+", s.command.split("#")[0].strip()))
            m = len(python_steps(_read(rel), rel))
            total, total_python = total + n, total_python + m
            print(f"  {rel}: {n}" + (f" (and {m} Python examples)" if m else ""))
        print(f"documentation examples executed by CI: {total} commands (cd not counted) and "
              f"{total_python} Python examples in {len(doc_files())} pages "
              "(tests/test_docs_examples.py)")
        return 0
    if argv[:1] == ["--show"]:
        for rel in argv[1:]:
            page_steps = page_steps_of(_read(rel), rel)
            folder = workspace()
            for s, status, output in run_steps(page_steps, folder):
                ok = matches(s.expected, output)
                prompt = (">>> " + s.command.replace("\n", "\n... ") if s.python
                          else "$ " + s.command)
                print(f"{'   ' if ok else 'XXX'} {rel}:{s.line} (exit {status})\n{prompt}\n"
                      f"{output}", end="" if output.endswith("\n") or not output else "\n")
            shutil.rmtree(folder, ignore_errors=True)
        return 0
    if argv[:1] == ["--write-schemas"]:
        with open(os.path.join(DOCS, "schemas.md"), "w", encoding="utf-8") as f:
            f.write(schemas_page())
        return 0
    print(__doc__)
    return 2


def schemas_page() -> str:
    """docs/schemas.md: ``exactmax schema --list``, then every schema as the command prints it
    (``--write-schemas`` writes it; the tests above re-run every block and check the list)."""
    def run(*args):
        return subprocess.run([sys.executable, "-m", "exactmax", "schema", *args],
                              capture_output=True, text=True, check=True).stdout.rstrip()
    listing = run("--list")
    names = [l.split()[0] for l in listing.splitlines() if l and not l[0].isspace()]
    out = ["""# JSON Schemas

Every file format of exactmax has a JSON Schema (draft 2020-12), shipped in the package
(`exactmax/schemas/`) and printed by `exactmax schema NAME` (`-o FILE` writes it). They are
reproduced here in full; each block is the output of the command above it, re-run by the tests,
so this page is always the schemas exactmax ships. What a schema checks and what only the readers
can check is on the [Formats](formats.md#json-schemas) page. One schema is not a file format:
`output` is the one JSON object every command prints with `--json` (`command`, `verdict`,
`trust`, `reason`, `time_s`, `sha256`, then the command's own keys; the vocabulary is on the
[Verify and equiv](verify.md#json-one-vocabulary-for-every-command) page). (This page is written
by `python tests/test_docs_examples.py --write-schemas`.)

```console
$ exactmax schema --list
""" + listing + "\n```\n"]
    for name in names:
        text = run(name)
        title = json.loads(text).get("title", name)
        out.append(f"## `{name}`: {title}\n\n```console\n$ exactmax schema {name}\n{text}\n```\n")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
