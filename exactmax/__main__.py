"""``python -m exactmax`` and the ``exactmax`` command.

A signal that arrives while the command's modules are still loading (before ``cli.main``
installs the handlers of ``interruption.py``) ends the process at once with the same status
and message, 130 / 143 and "exactmax: interrupted": nothing has been written by then.  After an
interruption the command's status ends the process at once too.
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

    code = main()
    from . import interruption

    if interruption.received is not None:
        # interrupted: the command has ended its workers and removed its files; the threads
        # of a process pool it used must not hold the exit (they may wait for workers that
        # were ended before they ever answered)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    raise SystemExit(run())
