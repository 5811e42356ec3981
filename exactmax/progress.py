"""Progress lines on standard error, for a person watching a long run.

Shown only when standard error is a terminal and the command was not asked for ``--json``:
in a pipe, a log file or a script, stderr carries errors and nothing else.  Each command
prints its own lines (cells certified, cells open, the time so far); this module decides
whether they are shown.
"""

from __future__ import annotations

import sys
import time


def shown(args=None) -> bool:
    """Are progress lines shown: stderr is a terminal, and no ``--json``?"""
    if args is not None and getattr(args, "json", False):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def cells_certified(args=None):
    """A progress printer for stderr (cells certified so far and the time), for the proofs
    of verify, equiv and check; None when its lines are not shown (``shown``)."""
    if not shown(args):
        return None
    start = time.monotonic()

    def show(leaves):
        print(
            f"exactmax: {leaves} cells certified, {time.monotonic() - start:.0f} s",
            file=sys.stderr,
            flush=True,
        )

    return show
