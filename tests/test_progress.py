"""Progress lines go to standard error only for a person at a terminal: never in a pipe or a
file, never under --json, and the verdict on standard output is the same either way."""

import json
import sys

import pytest

from exactmax.cli import main
from exactmax.progress import cells_certified, shown


class _Args:
    def __init__(self, json_flag):
        self.json = json_flag


def _terminal(monkeypatch, yes: bool):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: yes, raising=False)


@pytest.mark.parametrize("tty, json_flag, want", [(True, False, True), (True, True, False),
                                                   (False, False, False), (False, True, False)])
def test_progress_is_shown_on_a_terminal_without_json_only(monkeypatch, tty, json_flag, want):
    _terminal(monkeypatch, tty)
    assert shown(_Args(json_flag)) is want
    assert (cells_certified(_Args(json_flag)) is not None) is want


@pytest.mark.parametrize("tty", [True, False])
def test_theorem44_says_what_it_counts_on_a_terminal_and_nothing_in_a_pipe(monkeypatch, capsys,
                                                                          tty):
    _terminal(monkeypatch, tty)
    code = main(["theorem44", "--m", "1", "--T", "2", "--q", "1", "--D", "3"])
    out, err = capsys.readouterr()
    lines = [l for l in err.splitlines() if l.startswith("theorem44: counting")]
    assert bool(lines) is tty
    assert code in (0, 3) and "reading:" in out
    _terminal(monkeypatch, True)      # --json: silent even on a terminal
    main(["theorem44", "--m", "1", "--T", "2", "--q", "1", "--D", "3", "--json"])
    out, err = capsys.readouterr()
    assert err == "" and json.loads(out)
