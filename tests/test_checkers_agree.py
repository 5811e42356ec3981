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
