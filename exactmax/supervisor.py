"""A command-line command run in a child process, ended from outside at its deadline or at a
signal, within a second, whatever it is doing.

Python runs signal handlers, and a timer thread can act, only between bytecodes, with the GIL.
Some steps of a command are one long C call that holds the GIL: ``onnx.load`` of a large
file, FLINT's product of two large rational matrices while an ONNX network is imported, numpy's
object loop over millions of exact rationals, z3 reading a numeral of 10^5 digits.  Within one
process nothing can stop such a step before it returns (``interruption.py`` does what can be
done: z3's check interrupted, the exception raised at the next bytecode).  So the command-line
process (the one the caller waits for) forks at the start and only supervises:

- the child runs the command in a process group of its own (its worker processes with it),
  its standard output going to a pipe the supervisor reads; standard error is shared (progress
  shows as it comes);
- the child reports the phase it is in (``interruption.phase``) and every temporary file it
  has open (``interruption.temporary``: an atomic write's file before the rename) on a second
  pipe;
- the child ends: its standard output is written out, its exit status is the command's;
- SIGINT or SIGTERM reaches the supervisor: the child's process group is killed (SIGKILL,
  nothing to wait for), the temporary files removed, "exactmax: interrupted" printed ("...
  (terminated)" for SIGTERM), exit 130 or 143, and nothing of the child's standard output
  is shown (a half-printed answer is none);
- the deadline of ``--timeout`` plus ``GRACE`` passes (the child answers "unknown" by itself
  first when it can, with its statistics): the same, and the answer printed is "unknown",
  exit 3, with the reason "timeout in PHASE" (``--json``: ``reason`` and ``phase``).

A file the child finished writing (renamed into place) before it was stopped stays: it is
complete (a certificate is checked on reading, as always).  ``EXACTMAX_NO_SUPERVISOR=1`` runs
the command in the process itself (for a profiler or a debugger).
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from collections.abc import Callable

from . import interruption, jsonout
from .exits import EXIT_BUG, EXIT_INPUT, EXIT_UNKNOWN

GRACE = 0.8
"""Seconds after the deadline before the child is ended (its own time limit fires at 0.5 s)."""


def available() -> bool:
    """Can a command run supervised here?  (POSIX fork and process groups.)"""
    return (
        hasattr(os, "fork")
        and hasattr(os, "killpg")
        and os.environ.get("EXACTMAX_NO_SUPERVISOR", "") in ("", "0")
    )


def _die_with_parent() -> None:
    """Linux: the child is killed if the supervisor is (SIGKILL leaves it no say)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the supervisor's own kill must do
        pass


def _child(body: Callable[[], int], keep: tuple[int, int], close: list[int]) -> None:
    out_w, rep_w = keep
    code = EXIT_BUG
    try:
        try:
            os.setpgid(0, 0)
        except OSError:
            pass
        signal.set_wakeup_fd(-1)
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(s, signal.SIG_DFL)  # until the command installs its own
        _die_with_parent()
        if os.getppid() == 1:  # the supervisor died before the line above
            os._exit(EXIT_BUG)
        for fd in close:
            os.close(fd)
        sys.stdout.flush()
        os.dup2(out_w, 1)
        os.close(out_w)
        interruption._report_fd = rep_w
        code = body()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else EXIT_BUG
    except BaseException:  # noqa: BLE001 - the child must end here, whatever happened
        import traceback

        traceback.print_exc()
    finally:
        if interruption.received is None:
            # what a normal exit runs (multiprocessing's clean-up of a pool's semaphores,
            # which its resource tracker would otherwise call leaked); after a signal the
            # exit is immediate, as in __main__.run
            try:
                import atexit

                atexit._run_exitfuncs()
            except BaseException:  # noqa: BLE001 - the status is what counts now
                pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001 - a closed reader: the status still counts
                pass
        os._exit(code)


class _Watch:
    """What the supervisor knows of its child: its output so far, its phase, its temporary
    files."""

    def __init__(self):
        self.out = bytearray()
        self.phase = ""
        self.stats: dict = {}
        self.temporary: set[str] = set()
        self._partial = b""

    def report(self, data: bytes) -> None:
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        for raw in lines:
            kind, _, arg = raw.decode("utf-8", "replace").partition(" ")
            if kind == "phase":
                self.phase = arg
            elif kind == "stats":
                try:
                    self.stats = json.loads(arg)
                except ValueError:  # a line cut by the child's end: keep the last whole one
                    pass
            elif kind == "tmp":
                self.temporary.add(arg)
            elif kind == "done":
                self.temporary.discard(arg)

    def remove_temporary(self) -> None:
        for path in self.temporary:
            try:
                os.unlink(path)
            except OSError:  # never created, or renamed into place
                pass


def _kill(pid: int, group_only: bool = False) -> None:
    """SIGKILL to the child's process group (and to the child, not yet reaped, in case it
    had no time to make its group)."""
    for kill in (os.killpg,) if group_only else (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _interrupted(signum: int) -> int:
    """The message and the status of ``cli.main`` for an interruption."""
    if signum == signal.SIGTERM:
        print("exactmax: interrupted (terminated)", file=sys.stderr)
        return 143
    print("exactmax: interrupted", file=sys.stderr)
    return 130


def _exit_status(status: int) -> int:
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else EXIT_BUG


def run(
    body: Callable[[], int],
    deadline: float | None,
    timed_out: Callable[[str, dict], int],
    write_out: Callable[[bytes, int], int],
) -> int:
    """Run ``body`` (the command; it returns the exit status) in a child process and return
    its exit status, after ``write_out(output, status)`` wrote its standard output (and
    returned the status to exit with).  At ``deadline`` (a ``time.monotonic()`` value) plus
    ``GRACE``: ``timed_out(phase, stats so far)``'s status, the child ended.  At SIGINT /
    SIGTERM: 130 / 143, the child ended."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    out_r, out_w = os.pipe()
    rep_r, rep_w = os.pipe()
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w, out_r, rep_r):
        os.set_blocking(fd, False)
    got: list[int] = []

    def note(signum, frame):
        if signum != signal.SIGCHLD:  # SIGCHLD only wakes the loop (through wake_w)
            got.append(signum)

    old = {s: signal.signal(s, note) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)}
    old_wake = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    pid = os.fork()
    if pid == 0:
        _child(body, (out_w, rep_w), [out_r, rep_r, wake_r, wake_w])
    try:
        os.setpgid(pid, pid)
    except OSError:  # the child did it first, or has already ended
        pass
    os.close(out_w)
    os.close(rep_w)
    watch = _Watch()
    hard = None if deadline is None else deadline + GRACE
    status: int | None = None
    open_fds = [out_r, rep_r]
    try:
        while True:
            wait = None if hard is None else max(0.0, hard - time.monotonic())
            if status is not None:
                wait = 0.0  # the child has ended: take what is left in the pipes
            ready, _, _ = select.select([wake_r, *open_fds], [], [], wait)
            for fd in ready:
                if fd == wake_r:
                    while True:
                        try:
                            if not os.read(wake_r, 256):
                                break
                        except BlockingIOError:
                            break
                    continue
                try:
                    data = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                if not data:
                    open_fds.remove(fd)
                elif fd == out_r:
                    watch.out += data
                else:
                    watch.report(data)
            if got:
                _kill(pid)
                os.waitpid(pid, 0)
                watch.remove_temporary()
                return _interrupted(got[0])
            if status is None:
                done, st = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = st
                    continue
            elif not [fd for fd in ready if fd != wake_r] or not open_fds:
                break
            if status is None and hard is not None and time.monotonic() >= hard:
                _kill(pid)
                os.waitpid(pid, 0)
                watch.remove_temporary()
                return timed_out(watch.phase, watch.stats)
        _kill(pid, group_only=True)  # what the child left in its group (a pool's server)
        code = _exit_status(status)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGINT, signal.SIGTERM):
            watch.remove_temporary()  # the child alone was signalled
            return _interrupted(os.WTERMSIG(status))
        return write_out(bytes(watch.out), code)
    finally:
        signal.set_wakeup_fd(old_wake)
        for s, h in old.items():
            signal.signal(s, h)
        for fd in (out_r, rep_r, wake_r, wake_w):
            try:
                os.close(fd)
            except OSError:
                pass


# ------------------------------------------------------------------ for cli.main


def whole_timeout(args) -> float | None:
    """The seconds of a ``--timeout`` that bounds the whole command
    (``set_defaults(whole_timeout=True)``), if it has one (a bad value: None, for the command
    to refuse)."""
    seconds = getattr(args, "timeout", None) if getattr(args, "whole_timeout", False) else None
    if isinstance(seconds, str):  # vnnlib verify takes the text, as the standard does
        try:
            seconds = float(seconds)
        except ValueError:
            return None
    ok = isinstance(seconds, (int, float)) and 0 < seconds < float("inf")
    return seconds if ok else None


def wanted(args) -> bool:
    """Does the command run supervised (``whole_timeout`` or ``supervised`` among its parser's
    defaults), and can it here?"""
    listed = getattr(args, "whole_timeout", False) or getattr(args, "supervised", False)
    return bool(listed) and available()


def time_limit_answer(args, reason: str, started: float, stats: dict | None = None) -> int:
    """The answer of a command stopped by its time limit: unknown (exit 3), with the reason
    and the time since ``started`` (``--json``: ``phase`` too, when it is known, and ``stats``:
    how far the search got, ``interruption.note_stats``); a command with its own words for it
    (``timeout_answer`` among its defaults: vnnlib verify) says it in them."""
    custom = getattr(args, "timeout_answer", None)
    if custom is not None:
        return custom(reason)
    elapsed = round(time.monotonic() - started, 3)
    stats = interruption.current_stats if stats is None else stats
    if getattr(args, "json", False):
        obj: dict[str, object] = {"verdict": "unknown", "reason": reason, "time_s": elapsed}
        if interruption.current_phase:
            obj["phase"] = interruption.current_phase
        if stats:
            obj["stats"] = dict(stats)
        print(jsonout.dumps(obj))
    else:
        print(f"unknown: {reason} ({elapsed:.2f} s)")
        if stats:
            print("  so far: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in stats.items()))
    return EXIT_UNKNOWN


def run_command(args, body: Callable[[], int], started: float, stdout_guard) -> int:
    """``cli.main``'s command (``body``) run by ``run``: ended from outside, within a second,
    at its ``--timeout`` (counted from ``started``) or at SIGINT / SIGTERM, whatever it is
    doing; its standard output written through ``stdout_guard`` (cli's ``_Stdout``: a closed
    reader keeps the status, a full disk is an input/output error)."""
    seconds = whole_timeout(args)

    def timed_out(phase: str, stats: dict) -> int:
        interruption.current_phase = phase or "the command's work"
        reason = (
            f"timeout in {interruption.current_phase}: no answer within the time limit of "
            f"{seconds:g} s (--timeout); the command was stopped there"
        )
        return time_limit_answer(args, reason, started, stats)

    def write_out(data: bytes, code: int) -> int:
        out = stdout_guard(sys.stdout.buffer)
        out.write(data)
        out.flush()
        if out.error is not None:
            print(
                f"exactmax: error: cannot write the output: {out.error.strerror}", file=sys.stderr
            )
            return EXIT_INPUT
        return code

    deadline = None if seconds is None else started + seconds
    return run(body, deadline, timed_out, write_out)
