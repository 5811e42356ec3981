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

The same machinery bounds a command's time (``--timeout S``).  Commands check their deadline
between steps and answer "unknown" by themselves; but one exact step (a z3 LP on numbers of
10^5 digits, an exact Farkas solve, an interval evaluation) can last minutes.  Inside
``time_limit(deadline)``:

- ``check()`` raises ``TimeLimit`` once the deadline has passed;
- at the deadline plus a short grace (for the command's own checks to answer first), a timer
  thread interrupts z3's context (the running check returns) and raises ``TimeLimit`` in the
  thread that entered the block (``PyThreadState_SetAsyncExc``: it fires at the next Python
  instruction, e.g. as soon as z3's C call returns).  ``TimeLimit`` is a BaseException, so
  no ``except Exception`` swallows it, and atomic writes remove their temporary file;
  ``cli.main`` answers "unknown" (exit 3) with the reason.  A cancelled z3 check is never read
  as an answer: the exception fires before the caller's next instruction.

Only a single C call that ignores z3's interruption (a multiplication of two huge integers)
can delay the stop, by its own duration.  On the command line that is not left to chance:
``supervisor.py`` runs the command in a child process and ends it from outside (the deadline,
SIGINT, SIGTERM) within a second whatever it is doing; the child tells it the phase it is in
(``phase``) and the temporary files it has open (``temporary``), so the answer names the phase
and no half-written file is left.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
import time
from typing import Literal


class Terminated(BaseException):
    """SIGTERM arrived."""


_installed = False
received: int | None = None
"""The signal that arrived, if one did: an exception raised after it is the interruption
(ctypes, for one, wraps an exception raised while it converts z3's arguments)."""


current_phase: str | None = None
"""What the command is doing (``phase``): the time limit's answer names it."""
_report_fd: int | None = None
"""The supervisor's pipe (``supervisor.py``), in the child process it runs the command in."""


def _report(line: str) -> None:
    if _report_fd is not None:
        try:
            os.write(_report_fd, (line.replace("\n", " ") + "\n").encode())
        except OSError:  # the supervisor has gone: it ends this process itself
            pass


current_stats: dict = {}
"""How far the command's search got (``note_stats``): an answer "unknown" at the time limit
reports it, so a run stopped at its deadline still says what it did."""


def note_stats(**values) -> None:
    """Record (and tell the supervisor) how far the work has got, e.g. units answered and
    cells certified so far."""
    current_stats.update(values)
    _report("stats " + json.dumps(current_stats, separators=(",", ":")))


class phase:
    """``with phase(name):`` the command is in a phase ("reading the network FILE", "the
    kernel's check of the certificate", ...) during the block: a time limit reached in it is
    answered "timeout in" that phase.  The phase before is restored after the block."""

    def __init__(self, name: str):
        self.name = name
        self.outer: str | None = None

    def __enter__(self):
        global current_phase
        self.outer, current_phase = current_phase, self.name
        _report("phase " + self.name)
        return self

    def __exit__(self, *exc) -> Literal[False]:
        global current_phase
        if exc[0] is None or issubclass(exc[0], Exception):
            current_phase = self.outer  # a time limit or a signal keeps the phase it hit
            _report("phase " + (self.outer or ""))
        return False


class temporary:
    """``with temporary(path):`` a temporary file exists at ``path`` during the block: a
    supervisor that ends this process inside it removes the file."""

    def __init__(self, path: str):
        self.path = path

    def __enter__(self):
        _report("tmp " + os.path.abspath(self.path))
        return self

    def __exit__(self, *exc) -> Literal[False]:
        _report("done " + os.path.abspath(self.path))
        return False


class TimeLimit(BaseException):
    """The command's time limit passed (inside ``time_limit``): the answer is "unknown".
    ``step``: the step that could not finish in time, when it is known."""

    def __init__(
        self, seconds: float | None = None, what: str = "--timeout", step: str | None = None
    ):
        super().__init__(seconds, what, step)
        self.seconds, self.what, self.step = seconds, what, step

    def reason(self) -> str:
        lim = _limit or _last_fired  # raised as a class by the timer: its limit says
        s = lim.seconds if self.seconds is None and lim is not None else self.seconds
        what = lim.what if self.seconds is None and lim is not None else self.what
        limit = "the time limit" + (f" of {s:g} s" if s is not None else "") + f" ({what})"
        where = f"timeout in {current_phase}: " if current_phase else ""
        if self.step is not None:
            return f"{where}{self.step} would end past {limit}; stopped before it"
        return f"{where}no answer within {limit}; it passed inside an exact step, which was stopped"


class _Limit:
    """The state of one ``time_limit`` block."""

    def __init__(self, deadline: float, seconds: float | None, what: str, grace: float):
        self.deadline, self.seconds, self.what, self.grace = deadline, seconds, what, grace
        self.fired = False
        self.active = False
        self.lock = threading.Lock()
        self.thread_id = threading.get_ident()
        self.timer: threading.Timer | None = None


_limit: _Limit | None = None
"""The time limit in force, if any (one at a time: the command's)."""
_stopped_by_limit = False
_last_fired: _Limit | None = None
"""A time limit has stopped a step in this process (z3 objects cut short may then complain)."""


def expired() -> bool:
    """Has the time limit in force passed?"""
    return _limit is not None and (_limit.fired or time.monotonic() > _limit.deadline)


def affordable(seconds: float, step: str) -> None:
    """Before one ``step`` that nothing can interrupt (a single C call, e.g. z3 reading a
    numeral of 10^5 digits, which takes seconds) expected to last about ``seconds``: raise
    ``TimeLimit`` now if it would end past the limit in force (and its grace)."""
    lim = _limit
    if lim is not None and time.monotonic() + seconds > lim.deadline + lim.grace:
        raise TimeLimit(lim.seconds, lim.what, f"{step} (about {seconds:.0f} s)")


def _async_raise(thread_id: int, exc) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None
    )


def _fire(lim: _Limit) -> None:
    global _stopped_by_limit, _last_fired
    with lim.lock:
        if not lim.active:
            return
        lim.fired = _stopped_by_limit = True
        _last_fired = lim
        _async_raise(lim.thread_id, TimeLimit)
    z3 = sys.modules.get("z3")  # never import it here: the main thread may be doing so
    if z3 is not None:
        try:
            z3.main_ctx().interrupt()
        except Exception:  # no context yet, or it is being torn down
            pass


class time_limit:
    """``with time_limit(deadline, seconds, what):`` the block ends with ``TimeLimit`` at the
    latest ``grace`` seconds after ``deadline`` (a ``time.monotonic()`` value; None: no
    limit), wherever it is (see the module's docstring); ``seconds`` and ``what`` (the option)
    go into the reason."""

    def __init__(
        self,
        deadline: float | None,
        seconds: float | None = None,
        what: str = "--timeout",
        grace: float = 0.5,
    ):
        self.lim = None if deadline is None else _Limit(deadline, seconds, what, grace)
        self.outer: _Limit | None = None

    def __enter__(self):
        global _limit
        lim = self.lim
        if lim is None:
            return self
        self.outer, _limit = _limit, lim
        lim.active = True
        lim.timer = threading.Timer(
            max(0.0, lim.deadline + lim.grace - time.monotonic()), _fire, (lim,)
        )
        lim.timer.daemon = True
        lim.timer.start()
        return self

    def __exit__(self, *exc) -> Literal[False]:
        global _limit
        lim = self.lim
        if lim is None:
            return False
        try:
            if lim.timer is not None:
                lim.timer.cancel()
            with lim.lock:
                lim.active = False
                if lim.fired:  # raised, or still pending: never let it out after the block
                    _async_raise(lim.thread_id, None)
        finally:
            _limit = self.outer
        return False


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
    if expired():
        lim = _limit
        assert lim is not None  # expired() only under a limit
        raise TimeLimit(lim.seconds, lim.what)


def _unraisable(hook):
    """After a signal or a time limit, exceptions Python cannot raise (in __del__ methods of
    z3 objects cut short by the interruption) are expected: say nothing of them."""

    def quiet(u):
        if received is None and not _stopped_by_limit:
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
        except Exception:  # no context yet, or it is being torn down
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
