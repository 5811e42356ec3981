"""``python -m exactmax`` and the ``exactmax`` command.

A signal that arrives while the command's modules are still loading (before ``cli.main``
installs the handlers of ``interruption.py``) ends the process at once with the same status
and message, 130 / 143 and "exactmax: interrupted": nothing has been written by then.
"""

import os
import signal
import sys


def _early(signum, frame):
    sys.stderr.write("exactmax: interrupted\n")
    sys.stderr.flush()
    os._exit(143 if signum == signal.SIGTERM else 130)


def run() -> int:
    """The command line: early signal handlers, then the commands."""
    signal.signal(signal.SIGINT, _early)
    signal.signal(signal.SIGTERM, _early)
    from .cli import main
    return main()


if __name__ == "__main__":
    raise SystemExit(run())
