"""A = B on a domain: the kernel's one entry point for an equivalence certificate.

The shapes of both models and of the domain are checked here (``check_shapes``: nothing a
reader did is relied on), then the certificate: a layer-by-layer one (``layerwise.py``) or a
split tree over the programs of A and B (``certificate.py``).
"""

from __future__ import annotations

from .certificate import Tree, check_equal_on_domain
from .layerwise import LayerwiseCertificate, check_layerwise
from .polyhedron import Domain
from .program import check_shapes, program_of


def check_equivalence(a, b, domain: Domain, cert: Tree | LayerwiseCertificate) -> int:
    """Accept iff ``cert`` proves A(x) = B(x) for every x in the domain; returns the number
    of leaves checked.  Raises CheckFailed (or Unsupported, for a model no program
    expresses) otherwise."""
    check_shapes((a, b), domain)
    if isinstance(cert, LayerwiseCertificate):
        return check_layerwise(a, b, domain, cert)
    return check_equal_on_domain(program_of(a), program_of(b), domain.as_polyhedron(), cert)
