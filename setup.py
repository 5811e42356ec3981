"""The one compiled part of exactmax: fixed-width exact integer matrices for fast single-input
evaluation (exactmax/vectorized/_fixedwidth.c).  It is optional: without a C compiler the
install still succeeds and exactmax uses the kernel's evaluators instead (slower, same results).

And the Coq library: its sources live once, in proofs/ (the repository's view); a build copies
them into the package as exactmax/coq/ (no symlink, no second copy in git), an sdist carries
proofs/, so that an installed exactmax can build the library into a per-user cache
(exactmax/export/coqlib.py).  Everything else is in pyproject.toml."""

import os

from setuptools import Extension, setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

PROOFS = "proofs"


def proof_sources():
    """The library's .v files, Makefile and README (no build products)."""
    if not os.path.isdir(PROOFS):
        return []
    return sorted(os.path.join(PROOFS, n) for n in os.listdir(PROOFS)
                  if n.endswith(".v") or n in ("Makefile", "README.md"))


class BuildPyWithCoq(build_py):
    def run(self):
        super().run()
        sources = proof_sources()
        if not any(s.endswith("Checker.v") for s in sources):
            raise SystemExit("proofs/ (the Coq library's sources) is missing from the source "
                             "tree; exactmax ships it as exactmax/coq")
        target = os.path.join(self.build_lib, "exactmax", "coq")
        self.mkpath(target)
        for src in sources:
            self.copy_file(src, os.path.join(target, os.path.basename(src)))


class SdistWithCoq(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, sorted(set(files) | set(proof_sources())))


setup(cmdclass={"build_py": BuildPyWithCoq, "sdist": SdistWithCoq}, ext_modules=[Extension(
    "exactmax.vectorized._fixedwidth",
    ["exactmax/vectorized/_fixedwidth.c"],
    extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter",
                        "-Wno-missing-field-initializers", "-Wno-cast-function-type"],
    optional=True,
)])
