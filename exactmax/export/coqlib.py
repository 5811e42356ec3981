"""The Coq library that exported files are checked against: where it is, whether its compiled
``.vo`` files are current with their ``.v`` sources, and how it is built.

Sources.  In a checkout they are ``proofs/`` (the repository's one copy); an installed wheel
carries the same files in ``exactmax/coq/`` (setup.py copies ``proofs/`` there when it builds).

Which library ``export-coq --check`` uses, first found: ``--coq-lib DIR``, ``$EXACTMAX_COQ_LIB``,
the checkout's ``proofs/`` (built with ``make -C proofs``), else the per-user cache
``$XDG_CACHE_HOME/exactmax/coq/<version>-<sources' sha256>-coq<coqc version>/`` (default
``~/.cache``), which is built from the shipped sources on first use with the installed coqc
(``exactmax coq-lib --build`` does it ahead of time).

Freshness.  A build writes ``exactmax-build.sha256`` beside the ``.vo`` files: the coqc
version, then the sha256 of every ``.v`` file compiled (``make -C proofs`` writes the same
file).  A library is current when that manifest exists, names the running coqc's version,
lists every module exported files need with the sha256 its ``.v`` file has now, and every such
module has its ``.vo`` file.  A ``.v`` file edited after the build is reported, with the command
that rebuilds.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass

from .. import __version__

MANIFEST = "exactmax-build.sha256"
EXPORT_ROOTS = (
    "Export",
    "Layerwise",
    "ConstructionSound",
    "Theorem32",
    "Property",
    "Pair",
    "Correspondence",
)
"""What exported files import (with Checker Sound Build Maxout Transformer, their
dependencies)."""

_REQUIRE = re.compile(r"From\s+ExactMax\s+Require\s+(?:Import\s+|Export\s+)?([^.]*)\.")


class LibraryError(Exception):
    """The library is missing, unbuilt or stale; the message says how to fix it."""


INSTALL = "Debian: apt-get install coq libcoq-bignums"


def missing() -> str | None:
    """Why the library cannot be built here (coqc, or Coq's Bignums library, which Dyadic.v
    computes with, is not installed), or None."""
    coqc = shutil.which("coqc")
    if coqc is None:
        return f"coqc is not installed ({INSTALL})"
    r = subprocess.run([coqc, "-where"], capture_output=True, text=True)
    if not os.path.isdir(os.path.join(r.stdout.strip(), "user-contrib", "Bignums")):
        return f"Coq's Bignums library is not installed ({INSTALL})"
    return None


def _coqc() -> str:
    why = missing()
    if why is not None:
        raise LibraryError(why)
    return shutil.which("coqc") or "coqc"


def coqc_version() -> str:
    """``coqc --print-version`` (Coq's and OCaml's versions), e.g. "8.16.1 4.13.1"."""
    r = subprocess.run([_coqc(), "--print-version"], capture_output=True, text=True)
    return r.stdout.strip()


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


_AXIOM = re.compile(r"\b(Axiom|Axioms|Parameter|Parameters|Conjecture|Admitted|admit)\b")


def _code(path: str) -> str:
    """A .v file's text without its comments (not nested in the library's files)."""
    with open(path, encoding="utf-8") as f:
        return re.sub(r"\(\*.*?\*\)", " ", f.read(), flags=re.S)


def _requires(path: str) -> list[str]:
    """The ExactMax modules a .v file requires."""
    return [m for group in _REQUIRE.findall(_code(path)) for m in group.split()]


def build_order(folder: str, roots=EXPORT_ROOTS) -> list[str]:
    """The modules ``roots`` need, dependencies first (read from their ``From ExactMax
    Require`` lines)."""
    order, state = [], {}

    def visit(m, chain):
        if state.get(m) == "done":
            return
        if state.get(m) == "open":
            raise LibraryError(
                f"{folder}: the library's modules require each other in a "
                "cycle: " + " -> ".join(chain + [m])
            )
        path = os.path.join(folder, m + ".v")
        if not os.path.isfile(path):
            raise LibraryError(
                f"{folder}: {m}.v is missing (required by "
                f"{chain[-1] if chain else 'exported files'})"
            )
        state[m] = "open"
        for dep in _requires(path):
            visit(dep, chain + [m])
        state[m] = "done"
        order.append(m)

    for r in roots:
        visit(r, [])
    return order


def checkout_sources() -> str | None:
    """``proofs/`` of the checkout this package runs from, if it does."""
    here = os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "proofs"
    )
    return here if os.path.isfile(os.path.join(here, "Checker.v")) else None


def shipped_sources() -> str | None:
    """The library's sources as installed with the package (``exactmax/coq``), else the
    checkout's ``proofs/``."""
    pkg = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "coq")
    if os.path.isfile(os.path.join(pkg, "Checker.v")):
        return pkg
    return checkout_sources()


def cache_folder(sources: str) -> str:
    """Where the shipped sources are built: one folder per exactmax version, sources and
    coqc version, so an upgrade of either builds afresh."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    h = hashlib.sha256()
    for m in build_order(sources):
        h.update(m.encode() + b"\0" + _sha256(os.path.join(sources, m + ".v")).encode())
    coq = coqc_version().split()[0] if shutil.which("coqc") else "none"
    return os.path.join(base, "exactmax", "coq", f"{__version__}-{h.hexdigest()[:16]}-coq{coq}")


@dataclass(frozen=True, slots=True)
class Located:
    path: str
    how: str  # "--coq-lib", "EXACTMAX_COQ_LIB", "checkout" or "cache"
    sources: str  # the .v files a build compiles (the cache's come from here)


def locate(option: str | None = None) -> Located:
    """The library ``export-coq --check`` uses (see the module's docstring)."""
    if option:
        return Located(os.path.abspath(option), "--coq-lib", os.path.abspath(option))
    env = os.environ.get("EXACTMAX_COQ_LIB")
    if env:
        return Located(os.path.abspath(env), "EXACTMAX_COQ_LIB", os.path.abspath(env))
    checkout = checkout_sources()
    if checkout:
        return Located(checkout, "checkout", checkout)
    sources = shipped_sources()
    if sources is None:
        raise LibraryError(
            "the Coq library's sources are not installed with exactmax; give "
            "--coq-lib DIR or set EXACTMAX_COQ_LIB"
        )
    return Located(cache_folder(sources), "cache", sources)


def rebuild_hint(lib: Located) -> str:
    if lib.how == "checkout":
        return f"make -C {lib.path} (or exactmax coq-lib --build)"
    if lib.how == "cache":
        return "exactmax coq-lib --build"
    return f"make -C {lib.path} (or exactmax coq-lib --build --coq-lib {lib.path})"


def read_manifest(folder: str) -> tuple[str | None, dict[str, str]]:
    """(the coqc version line, {file.v: sha256}) of a built library's manifest."""
    coq, files = None, {}
    with open(os.path.join(folder, MANIFEST), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("# coqc "):
                coq = line[len("# coqc ") :]
            elif line and not line.startswith("#"):
                digest, _, name = line.partition(" ")
                files[os.path.basename(name.strip().lstrip("*"))] = digest
    return coq, files


def check_current(lib: Located) -> list[str]:
    """The modules exported files need, after checking that the library is built from its
    sources as they are now; a LibraryError names what is stale and how to rebuild."""
    folder, fix = lib.path, rebuild_hint(lib)
    if not os.path.isdir(folder):
        raise LibraryError(f"the Coq library {folder} does not exist; build it with {fix}")
    modules = build_order(folder)
    if not os.path.isfile(os.path.join(folder, MANIFEST)):
        raise LibraryError(
            f"the Coq library in {folder} is not built (no {MANIFEST}); build it with {fix}"
        )
    coq, files = read_manifest(folder)
    running = coqc_version()
    if coq != running:
        raise LibraryError(
            f"the Coq library in {folder} was built by coqc {coq}, not by the "
            f"installed {running}; rebuild it with {fix}"
        )
    for m in modules:
        v = m + ".v"
        if v not in files:
            raise LibraryError(
                f"the Coq library in {folder} was built without {v}; rebuild it with {fix}"
            )
        if _sha256(os.path.join(folder, v)) != files[v]:
            raise LibraryError(
                f"the Coq library in {folder} is stale: {v} changed after it "
                f"was built; rebuild it with {fix}"
            )
        if _AXIOM.search(_code(os.path.join(folder, v))):
            raise LibraryError(
                f"the Coq library in {folder} is not the exactmax library: {v} "
                "declares an axiom or leaves a proof unfinished (Axiom, "
                "Parameter, Admitted, ...)"
            )
        if not os.path.isfile(os.path.join(folder, m + ".vo")):
            raise LibraryError(f"the Coq library in {folder} has no {m}.vo; rebuild it with {fix}")
    return modules


def build_in_place(folder: str, timeout_s: float = 600.0) -> list[str]:
    """Compile the modules exported files need in ``folder`` (coqc -Q . ExactMax -no-glob,
    dependencies first), then write the manifest."""
    coqc, modules = _coqc(), build_order(folder)
    digests = {}
    for m in modules:
        digests[m] = _sha256(os.path.join(folder, m + ".v"))  # as compiled, not as later
        r = subprocess.run(
            [coqc, "-Q", ".", "ExactMax", "-no-glob", m + ".v"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if r.returncode != 0:
            msg = " ".join((r.stdout + r.stderr).split())
            raise LibraryError(f"coqc rejected {os.path.join(folder, m + '.v')}: {msg}")
    text = f"# coqc {coqc_version()}\n" + "".join(f"{digests[m]}  {m}.v\n" for m in modules)
    tmp = os.path.join(folder, MANIFEST + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, os.path.join(folder, MANIFEST))
    return modules


def build(lib: Located) -> tuple[bool, float]:
    """(whether anything was built, seconds): a library that is current is left alone; the
    cache is built in a fresh folder beside it and renamed into place, so a half-finished or
    concurrent build never leaves a half-built library."""
    try:
        check_current(lib)
        return False, 0.0
    except LibraryError:
        pass
    t0 = time.monotonic()
    if lib.how != "cache":
        build_in_place(lib.path)
        return True, time.monotonic() - t0
    parent = os.path.dirname(lib.path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".build-", dir=parent)
    try:
        for name in os.listdir(lib.sources):
            if name.endswith(".v") or name in ("Makefile", "README.md"):
                shutil.copyfile(os.path.join(lib.sources, name), os.path.join(tmp, name))
        build_in_place(tmp)
        if os.path.isdir(lib.path):  # a stale or half-removed earlier build
            shutil.rmtree(lib.path)
        try:
            os.rename(tmp, lib.path)
        except OSError:  # another process finished first
            if not os.path.isfile(os.path.join(lib.path, MANIFEST)):
                raise
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    return True, time.monotonic() - t0


def ready(lib: Located, log=None) -> list[str]:
    """The library, checked current; the cache is built on first use (``log`` is told)."""
    if lib.how == "cache" and not os.path.isfile(os.path.join(lib.path, MANIFEST)):
        if log:
            log(f"building the Coq library into {lib.path} (first use; about 20 s)")
        build(lib)
    return check_current(lib)
