import os
import subprocess
import sys

import pytest
from hypothesis import settings

from exactmax.export import coqlib

sys.path.insert(0, os.path.dirname(__file__))

settings.register_profile("ci", max_examples=100, deadline=None)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


PROOFS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "proofs")


def skip_without_coqc() -> None:
    """Skip the calling test module when coqc is not installed (an error with
    EXACTMAX_REQUIRE_COQ, as in CI)."""
    why = coqlib.missing()
    if why is not None:
        if os.environ.get("EXACTMAX_REQUIRE_COQ"):
            raise RuntimeError(f"Coq is required (EXACTMAX_REQUIRE_COQ is set): {why}")
        pytest.skip(why, allow_module_level=True)


@pytest.fixture(scope="module")
def coq_library():
    """proofs/, built (make -C proofs)."""
    r = subprocess.run(["make", "-C", PROOFS], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return PROOFS
