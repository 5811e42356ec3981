"""The one JSON object a command prints with ``--json``: its keys, then ``exactmax_version``,
so a result can always be traced to the release that produced it."""

from __future__ import annotations

import json

from . import __version__


def dumps(obj: dict) -> str:
    """``obj`` as one line of JSON, with ``"exactmax_version"`` added."""
    return json.dumps({**obj, "exactmax_version": __version__})
