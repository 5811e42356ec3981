"""A = B on a domain: check-cert's one entry point, after checking every shape itself."""

from .certificate import check_equal_on_domain
from .correspondence import Correspondence, check_correspondence
from .lattice import LatticeForms, check_lattice
from .layerwise import LayerwiseCertificate, check_layerwise
from .polyhedron import Domain
from .program import check_shapes, program_of


def check_equivalence(a, b, domain: Domain, cert) -> int:
    """Accept iff ``cert`` (layerwise, a correspondence, lattice forms, or a split tree over the
    programs of A and B) proves A = B on the domain; returns the leaves (units, atoms) checked."""
    check_shapes((a, b), domain)
    if isinstance(cert, LatticeForms):
        return check_lattice(a, b)
    if isinstance(cert, Correspondence):
        return check_correspondence(a, b, cert)
    if isinstance(cert, LayerwiseCertificate):
        return check_layerwise(a, b, domain, cert)
    return check_equal_on_domain(program_of(a), program_of(b), domain.as_polyhedron(), cert)
