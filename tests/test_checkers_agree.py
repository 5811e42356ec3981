"""The kernel's check-cert and the Coq checker accept exactly the same certificates: a
sample of the shared corpus (``certificate_corpus.py``: certificates exactmax writes for the
examples and for mixed ranks, polyhedra and the merged construction, and tamperings of each)
runs through both.  ``benchmarks/checkers.py`` runs a larger corpus."""

import os
import shutil

import pytest

import certificate_corpus as corpus

if shutil.which("coqc") is None:
    if os.environ.get("EXACTMAX_REQUIRE_COQ"):
        raise RuntimeError("coqc is required (EXACTMAX_REQUIRE_COQ is set) but not installed")
    pytest.skip("coqc is not installed (Debian: apt-get install coq)", allow_module_level=True)

PROOFS = os.path.join(corpus.ROOT, "proofs")


def test_both_checkers_accept_exactly_the_same_certificates(tmp_path):
    import subprocess
    r = subprocess.run(["make", "-C", PROOFS], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    sources = corpus.sources(str(tmp_path))
    seen, disagreements, rejected = 0, [], 0
    for name, cert in corpus.corpus(sources, per_source=3, seed=1):
        kernel, coq = corpus.verdicts(str(tmp_path), name, cert, PROOFS)
        seen += 1
        rejected += not kernel
        if kernel != coq:
            disagreements.append((name, kernel, coq))
    print(f"{seen} certificates through both checkers, {rejected} rejected, "
          f"{len(disagreements)} disagreements")
    assert not disagreements
    assert seen >= 28 and rejected >= 5     # the corpus has both kinds
    for name in sources:                     # and every source is valid
        assert corpus.verdicts(str(tmp_path), name, sources[name], PROOFS) == (True, True)
