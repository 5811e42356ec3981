"""Table-driven test of the command line on good and bad input files.

``tests/data/bad/*.json`` (and ``*.json.gz``): each file is a small variation of a valid model
that must be refused.  ``tests/data/bad/expected.json`` gives, for each file, the one line
``exactmax eval FILE --input X`` must print on stderr when run inside that folder (so the file
name in the message is the bare name).  Entry keys:

- ``stderr``: the expected line;
- ``input`` (default ``"0,0"``): the ``--input`` value;
- ``model``: when given, FILE is a domain file and the command is
  ``exactmax eval MODEL --domain FILE --input X``;
- ``xfail``: the current message is unclear or wrong; ``stderr`` is the message exactmax should
  print and ``current`` the one it prints today (only the exact-message test is xfail);
- ``xfail_all``: exactmax does not even fail cleanly (traceback, wrong exit status).

``tests/data/good/*.json``: valid files; ``tests/data/good/expected.json`` gives for each a list
of cases ``{"input", "output", "why"}`` where ``output`` was computed by hand (the arithmetic
is in ``why``) and must equal ``exactmax eval FILE --input X --json``.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
BAD = DATA / "bad"
GOOD = DATA / "good"
EXIT_INPUT = 2
TIMEOUT = 60


def _load(path: Path) -> dict:
    with open(path, encoding="utf-8") as f:
        table = json.load(f)
    table.pop("_comment", None)
    return table


BAD_TABLE = _load(BAD / "expected.json")
GOOD_TABLE = _load(GOOD / "expected.json")


def _data_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()
                  if p.name != "expected.json" and p.name.endswith((".json", ".json.gz")))


@functools.cache
def run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """Run ``python -m exactmax ARGS`` in ``cwd`` (memoized: each command runs once)."""
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, "-m", "exactmax", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, encoding="utf-8",
                          errors="backslashreplace", timeout=TIMEOUT)


def run_bad(name: str) -> subprocess.CompletedProcess:
    entry = BAD_TABLE[name]
    x = entry.get("input", "0,0")
    if "model" in entry:
        return run(BAD, "eval", entry["model"], "--domain", name, f"--input={x}")
    return run(BAD, "eval", name, f"--input={x}")


def assert_one_error_line(r: subprocess.CompletedProcess, prefix: str) -> str:
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == EXIT_INPUT, (r.returncode, r.stderr)
    assert r.stdout == ""
    assert r.stderr.endswith("\n") and r.stderr.count("\n") == 1, repr(r.stderr)
    line = r.stderr[:-1]
    assert line.startswith(prefix), line
    return line


# ------------------------------------------------------------------------------ the tables

def test_bad_table_matches_the_files():
    assert set(_data_files(BAD)) == set(BAD_TABLE)
    for name, entry in BAD_TABLE.items():
        assert set(entry) <= {"stderr", "input", "model", "xfail", "current", "xfail_all"}, name
        assert entry["stderr"].startswith(f"exactmax: error: {name}: "), name
        assert "\n" not in entry["stderr"], name
        if "xfail" in entry:
            assert "current" in entry, f"{name}: an xfail entry records the current message"


def test_good_table_matches_the_files():
    assert set(_data_files(GOOD)) == set(GOOD_TABLE)
    for name, cases in GOOD_TABLE.items():
        assert cases, name
        for case in cases:
            assert set(case) == {"input", "output", "why"}, name


def _bad_params(message_test: bool):
    params = []
    for name in sorted(BAD_TABLE):
        entry = BAD_TABLE[name]
        marks = []
        if "xfail_all" in entry:
            marks.append(pytest.mark.xfail(reason=entry["xfail_all"], strict=True))
        elif message_test and "xfail" in entry:
            marks.append(pytest.mark.xfail(reason=entry["xfail"], strict=True))
        params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.mark.parametrize("name", _bad_params(message_test=False))
def test_bad_file_fails_with_one_line(name):
    """Exit status 2, nothing on stdout, one line on stderr naming the file, no traceback."""
    assert_one_error_line(run_bad(name), f"exactmax: error: {name}: ")


@pytest.mark.parametrize("name", _bad_params(message_test=True))
def test_bad_file_message(name):
    r = run_bad(name)
    assert r.stderr == BAD_TABLE[name]["stderr"] + "\n"


def test_xfail_entries_record_the_current_message():
    """The ``current`` message of each xfail entry is what exactmax prints today (so the table
    notices when the message changes, for better or worse)."""
    for name, entry in BAD_TABLE.items():
        if "current" in entry and "xfail_all" not in entry:
            assert run_bad(name).stderr == entry["current"] + "\n", name


# ------------------------------------------------------------------------------ good files

_GOOD_CASES = [pytest.param(name, case["input"], case["output"], id=f"{name}[{case['input']}]")
               for name in sorted(GOOD_TABLE) for case in GOOD_TABLE[name]]


@pytest.mark.parametrize("name,x,expected", _GOOD_CASES)
def test_good_file_output(name, x, expected):
    r = run(GOOD, "eval", name, f"--input={x}", "--json")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""  # every case input lies in the file's domain: no note either
    out = json.loads(r.stdout)
    assert out.pop("exactmax_version") and out["output"] == expected


# ---------------------------------------------------------------------------- --input errors

_INPUT_ERRORS = [
    ("1,2,3", 'exactmax: error: --input: expected 2 comma-separated numbers (the model\'s '
              'input dimension), got 3 in "1,2,3"'),
    ("1", 'exactmax: error: --input: expected 2 comma-separated numbers (the model\'s '
          'input dimension), got 1 in "1"'),
    ("abc", 'exactmax: error: --input: item 0: expected an integer, a decimal or "p/q", '
            'got "abc"'),
    ("1/0", 'exactmax: error: --input: item 0: zero denominator in "1/0"'),
    ("0,1/0", 'exactmax: error: --input: item 1: zero denominator in "1/0"'),
    ("nan,0", 'exactmax: error: --input: item 0: expected an integer, a decimal or "p/q", '
              'got "nan"'),
    ("1e1001,0", 'exactmax: error: --input: item 0: exponent 1001 in "1e1001" is beyond '
                 '+-1000; write the number as "p/q"'),
    ("", 'exactmax: error: --input: item 0: expected an integer, a decimal or "p/q", got ""'),
]


@pytest.mark.parametrize("x,expected", _INPUT_ERRORS, ids=[x or "empty" for x, _ in _INPUT_ERRORS])
def test_input_option_errors(x, expected):
    r = run(GOOD, "eval", "maxout_numbers.json", f"--input={x}")
    assert_one_error_line(r, "exactmax: error: --input: ")
    assert r.stderr == expected + "\n"
