"""The kernel's check-cert and the Coq checker accept exactly the same certificates: a
sample of the shared corpus (``certificate_corpus.py``: certificates exactmax writes for the
examples and for mixed ranks, polyhedra and the merged construction, and tamperings of each)
runs through both.  ``benchmarks/checkers.py`` runs a larger corpus."""

import os

import pytest

import certificate_corpus as corpus
from exactmax.export import coqlib

_why = coqlib.missing()
if _why is not None:
    if os.environ.get("EXACTMAX_REQUIRE_COQ"):
        raise RuntimeError(f"Coq is required (EXACTMAX_REQUIRE_COQ is set): {_why}")
    pytest.skip(_why, allow_module_level=True)

PROOFS = os.path.join(corpus.ROOT, "proofs")


PARTS = 3   # the corpus in three parts, so that the test workers share it


def _corpus(tmp_path):
    sources = corpus.sources(str(tmp_path))
    return sources, list(corpus.corpus(sources, per_source=3, seed=1))


def test_the_corpus_has_certificates_of_both_kinds(tmp_path):
    """The sample is worth running: enough certificates, some of them rejected."""
    from exactmax.cli import main
    import contextlib
    import io
    import json
    sources, items = _corpus(tmp_path)
    rejected = 0
    for name, cert in items:
        path = tmp_path / "c.json"
        path.write_text(json.dumps(cert))
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            rejected += main(["check-cert", str(path)]) != 0
    assert len(items) >= 28 and rejected >= 5 and len(sources) >= 8


@pytest.mark.parametrize("part", range(PARTS))
def test_both_checkers_accept_exactly_the_same_certificates(tmp_path, part):
    import subprocess
    r = subprocess.run(["make", "-C", PROOFS], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    sources, items = _corpus(tmp_path)
    seen, disagreements = 0, []
    for name, cert in items[part::PARTS]:
        kernel, coq = corpus.verdicts(str(tmp_path), name, cert, PROOFS)
        seen += 1
        if kernel != coq:
            disagreements.append((name, kernel, coq))
        if name in sources:          # every source is valid
            assert (kernel, coq) == (True, True), name
    print(f"{seen} certificates through both checkers, {len(disagreements)} disagreements")
    assert not disagreements and seen >= 9



def test_a_tampered_domain_is_judged_alike_by_both_checkers(tmp_path):
    """The domain is part of the claim.  Grown by 100 with its hash recomputed, the claim is
    false there (the gates no longer hold) and both checkers reject it; with the hash left as
    it was, the file no longer matches its own hash and both refuse it; shrunk with its hash
    recomputed, the claim is true of the smaller domain and both accept it.  (On a
    polyhedron a grown row may be redundant, so there only agreement is asserted.)"""
    import copy
    import random
    import subprocess
    from fractions import Fraction
    r = subprocess.run(["make", "-C", PROOFS], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    sources = corpus.sources(str(tmp_path))
    cases = [(Fraction(100), True, False), (Fraction(1, 3), False, False),
             (Fraction(-1, 8), False, False), (Fraction(-1, 8), True, True)]
    for name in ("tent-layerwise", "tent-monolithic", "mixed-poly"):
        for seed in range(2):
            for delta, rehash, accepted in cases:
                c = copy.deepcopy(sources[name])
                corpus.tamper_domain(c, delta, rehash, random.Random(seed))
                kernel, coq = corpus.verdicts(str(tmp_path), "domain", c, PROOFS)
                assert kernel == coq, (name, seed, delta, rehash)
                if name.startswith("tent") or not rehash:
                    assert kernel == accepted, (name, seed, delta, rehash)
