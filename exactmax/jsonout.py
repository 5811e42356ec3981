"""The one JSON object a command prints with ``--json``, in one vocabulary for every command
(schema ``output``, ``exactmax/schemas/output.schema.json``; docs/schemas.md describes it).

Every object starts with the same keys, which ``dumps`` fills in where the command has nothing
of its own to say:

- ``command``: the command that printed it ("verify", "check-cert", ...);
- ``verdict``: what it concluded, the word its text answer starts with ("proved", "refuted",
  "sat", "valid", ...; "done" for a command that states no claim, such as compile);
- ``trust``: what the verdict rests on: "kernel-checked" (a certificate the kernel checked, or
  an exact point it evaluated), "solver-only" (z3 alone), "coq-checked" (coqc accepted), or
  null (nothing established: unknown, or no claim);
- ``reason``: why, for unknown, rejected and the like, else null;
- ``time_s``: seconds since the command started (wall clock);
- ``sha256``: the SHA-256 of what the answer is about, by role ("a", "b", "domain" of a pair
  of models; "model", "model_file", "property" of a VNN-LIB property; ...), {} for none;

then the command's own keys, then ``exactmax_version``, so a result can always be traced to the
release that produced it."""

from __future__ import annotations

import json
import time

from . import __version__

COMMAND: str | None = None
"""The running command's name (set by ``start``; cli.main does)."""
STARTED = time.monotonic()


def start(command: str) -> None:
    """A command starts: its name, and the instant ``time_s`` counts from."""
    global COMMAND, STARTED
    COMMAND, STARTED = command, time.monotonic()


def elapsed() -> float:
    """Seconds since the command started, rounded to milliseconds."""
    return round(time.monotonic() - STARTED, 3)


def dumps(obj: dict) -> str:
    """``obj`` as one line of JSON, after the keys every command prints (those ``obj`` does
    not give take their defaults) and with ``"exactmax_version"`` added."""
    envelope: dict[str, object] = {
        "command": COMMAND,
        "verdict": "done",
        "trust": None,
        "reason": None,
        "time_s": elapsed(),
        "sha256": {},
    }
    return json.dumps({**envelope, **obj, "exactmax_version": __version__})
