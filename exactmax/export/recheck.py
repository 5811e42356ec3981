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

PARTS_FROM_BYTES = 4_000_000
"""A property certificate at least this large (its file) goes to coqc in parts, one per core
(``export-coq --parts``, at most 8): ACAS Xu 1-6 property 1's (29 MB) takes 6 minutes on 2
cores that way, 12 as one file; a small one is faster as one file (one coqc, not N + 2)."""


def parts_for(cert_path: str) -> int:
    """How many parts ``--coq`` exports the certificate at ``cert_path`` in."""
    from ..io.property_certificate import peek_property_certificate

    try:
        big = os.path.getsize(cert_path) >= PARTS_FROM_BYTES
    except OSError:
        return 1
    if big and peek_property_certificate(cert_path):
        return max(1, min(8, os.cpu_count() or 1))
    return 1


@dataclass(frozen=True, slots=True)
class CoqCheck:
    """coqc's answer on one certificate: ``proved`` iff coqc compiled the exported file, the
    file states exactly the certificate, and Print Assumptions lists only allowed axioms."""

    proved: bool
    seconds: float
    bytes: int
    reason: str | None  # why not proved (coqc's message, or why there is no export)
    parts: int = 1  # the files compiled side by side (export-coq --parts)

    def line(self) -> str:
        """The line printed under a proved answer."""
        side = f" in {self.parts} parts side by side" if self.parts > 1 else ""
        return (
            f"Coq: the certificate, exported ({self.bytes} bytes of Coq{side}), proved by coqc "
            f"in {self.seconds:.1f} s against the library's soundness theorems"
        )

    def json(self) -> dict:
        return {
            "proved": self.proved,
            "coqc_s": round(self.seconds, 2),
            "bytes": self.bytes,
            "reason": self.reason,
            "parts": self.parts,
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
        parts=parts_for(cert_path),
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
    return CoqCheck(
        proved,
        float(out.get("coqc_s") or 0.0),
        int(out.get("bytes") or 0),
        reason,
        max(1, int((out.get("about") or {}).get("parts") or 1)),
    )


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
