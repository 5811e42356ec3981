"""SIGINT and SIGTERM stop any command within about a second, wherever they land.

z3 runs in C, and Python runs its signal handlers only when a C call returns; z3's own Ctrl-C
handling cancels just the running check, after which the caller would carry on (and could even
read the cancelled check as "no proof here").  So, for the command-line process:

- z3's handling is switched off (``ctrl_c = false``), so the signal reaches Python's handler;
- Python's handlers raise: KeyboardInterrupt for SIGINT, ``Terminated`` for SIGTERM, both
  BaseExceptions that no ``except Exception`` swallows, so atomic writes remove their
  temporary file and ``cli.main`` prints "interrupted" and exits 130 / 143;
- the arrival is remembered (``received``), and loops call ``check()`` at safe points, so an
  exception swallowed where it landed (a __del__, a library) is raised again;
- a watcher thread, woken through ``signal.set_wakeup_fd`` (written by the C-level handler at
  once, even while the main thread is inside z3, which ctypes calls without the GIL),
  interrupts z3's context: the running check returns, and the handler's exception fires
  before any Python code can read its result.
"""

from __future__ import annotations

import os
import signal
import threading


class Terminated(BaseException):
    """SIGTERM arrived."""


_installed = False
received: int | None = None
"""The signal that arrived, if one did: an exception raised after it is the interruption
(ctypes, for one, wraps an exception raised while it converts z3's arguments)."""


def _on_sigint(signum, frame):
    global received
    received = signum
    raise KeyboardInterrupt()


def _on_sigterm(signum, frame):
    global received
    received = signum
    raise Terminated()


def check() -> None:
    """Raise the interruption again if a signal has arrived: for loops to call at safe
    points, in case the handler's exception was swallowed where it landed (a __del__ method,
    a library that catches everything)."""
    if received is not None:
        raise Terminated() if received == signal.SIGTERM else KeyboardInterrupt()


def _unraisable(hook):
    """After a signal, exceptions Python cannot raise (in __del__ methods of z3 objects cut
    short by the interruption) are expected: say nothing of them."""
    def quiet(u):
        if received is None:
            hook(u)
    return quiet


def _watch(fd: int) -> None:
    import z3
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data:
            return
        try:
            z3.main_ctx().interrupt()
        except Exception:   # no context yet, or it is being torn down
            pass


def install() -> None:
    """Set up the handlers above (once; the main thread of the command-line process only)."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    import z3
    z3.set_param("ctrl_c", False)
    r, w = os.pipe()
    os.set_blocking(w, False)
    import sys
    sys.unraisablehook = _unraisable(sys.unraisablehook)
    # the watcher first, the handlers last: a signal that lands while the thread starts is
    # still met by the early handlers of exactmax.__main__ (or the defaults)
    threading.Thread(target=_watch, args=(r,), name="exactmax-interrupt", daemon=True).start()
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    signal.signal(signal.SIGINT, _on_sigint)
    signal.signal(signal.SIGTERM, _on_sigterm)
    _installed = True
