"""``--coq`` on verify, equiv and check (#35): the certificate the kernel accepted is also
exported (``export-coq``) and proved by coqc before the answer is printed.

The kernel's check stays the one that decides; Coq is a second, independent checker whose
soundness is proved in ``proofs/``.  With ``--coq`` the answer "proved" (or "unsat") is printed
only when both accepted; when coqc rejects the file, or the certificate has no Coq export, the
answer is "unknown" with the reason (the certificate, if asked for, is still written).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import tempfile
from contextlib import redirect_stdout
from dataclasses import dataclass

from ..exits import UsageError
from ..io import InputError

TRUST = "kernel-and-coq-checked"
"""The ``trust`` of an answer both checkers accepted."""


@dataclass(frozen=True, slots=True)
class CoqCheck:
    """coqc's answer on one certificate: ``proved`` iff coqc compiled the exported file, the
    file states exactly the certificate, and Print Assumptions lists only allowed axioms."""

    proved: bool
    seconds: float
    bytes: int
    reason: str | None  # why not proved (coqc's message, or why there is no export)

    def line(self) -> str:
        """The line printed under a proved answer."""
        return (
            f"Coq: the certificate, exported ({self.bytes} bytes of Coq), proved by coqc in "
            f"{self.seconds:.1f} s against the library's soundness theorems"
        )

    def json(self) -> dict:
        return {
            "proved": self.proved,
            "coqc_s": round(self.seconds, 2),
            "bytes": self.bytes,
            "reason": self.reason,
        }


def require_coq(args) -> None:
    """With ``--coq``: coqc and the Coq library are there (the library built into the per-user
    cache on first use), else one line and exit 2, before any work is done."""
    if not getattr(args, "coq", False):
        return
    import sys

    from . import coqlib

    try:
        lib = coqlib.locate(None)
        coqlib.ready(lib, log=lambda m: print(f"exactmax: {m}", file=sys.stderr))
    except coqlib.LibraryError as e:
        raise UsageError(f"--coq: {e}") from None


def coq_check(cert_path: str, timeout_s: float = 600.0, progress: bool = False) -> CoqCheck:
    """Export the certificate at ``cert_path`` to a temporary Coq file and run
    ``export-coq --check`` on it (binding, coqc, axioms); the temporary folder is removed."""
    from ..progress import shown
    from .command import run_export_coq

    if progress and shown():
        import sys

        print("exactmax: exporting the certificate to Coq and running coqc ...", file=sys.stderr)

    folder = tempfile.mkdtemp(prefix="exactmax-coq-")
    args = argparse.Namespace(
        cert=cert_path,
        output=os.path.join(folder, "ExactmaxCertificate.v"),
        construction=None,
        transformer=None,
        domain=None,
        packed=False,
        check=True,
        existing=False,
        coq_lib=None,
        timeout=timeout_s,
        json=True,
        parts=1,
    )
    text = io.StringIO()
    try:
        with redirect_stdout(text):
            run_export_coq(args)
    except (InputError, UsageError) as e:
        return CoqCheck(False, 0.0, 0, f"no Coq export: {e}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    out = json.loads(text.getvalue())
    proved = out.get("verdict") in ("proved", "vacuous") and out.get("checked") is True
    reason = None if proved else (out.get("coqc_message") or out.get("reason") or "rejected")
    return CoqCheck(proved, float(out.get("coqc_s") or 0.0), int(out.get("bytes") or 0), reason)


def coq_answer(args, path: str | None, written: bool) -> tuple[CoqCheck | None, str | None]:
    """With ``--coq``, after the kernel accepted an answer: (coqc's answer on the certificate
    at ``path``, None) when coqc proved it, else (coqc's answer or None when no certificate
    was ``written``, the reason the answer is unknown).  (None, None) without ``--coq``."""
    if not getattr(args, "coq", False):
        return None, None
    if not written:
        return None, "the kernel proved it, but no certificate was written for Coq to check"
    c = coq_check(path or "", args.coq_timeout, progress=not args.json)
    why = f"the kernel proved it; coqc did not prove the certificate: {one_line(c.reason)}"
    return c, None if c.proved else why


def record(args, out: dict, coq: CoqCheck | None, why: str | None) -> None:
    """``--coq``'s part of a command's ``--json`` object: ``coq`` (coqc's answer, or None), the
    trust of both checkers when coqc proved it, else (``why``) the answer unknown."""
    if not getattr(args, "coq", False):
        return
    out["coq"] = None if coq is None else coq.json()
    if coq is not None and coq.proved:
        out["trust"] = TRUST
    if why is not None:
        out.update(verdict="unknown", trust=None, reason=why)


def checked_by(coq: CoqCheck | None) -> str:
    """What a proved answer says it was checked by: "kernel and Coq" or the kernel alone."""
    if coq is not None and coq.proved:
        return "kernel and Coq"
    return "certificate checked by the kernel"


def certificate_path(args) -> tuple[str | None, str | None]:
    """(where the certificate is written, a temporary folder to remove after) for a command
    with ``--cert`` and ``--coq``: --cert's path, or with ``--coq`` alone a temporary file."""
    if args.cert or not getattr(args, "coq", False):
        return args.cert, None
    folder = tempfile.mkdtemp(prefix="exactmax-cert-")
    return os.path.join(folder, "certificate.json"), folder


def one_line(message: str | None) -> str:
    """coqc's message (several lines) as one line."""
    return " ".join((message or "").split())[:400]
