"""What is known about a domain, with witnesses the kernel checks: empty (Farkas multipliers),
or non-empty and full-dimensional (an interior point), or non-empty and lower-dimensional (a
member point, and multipliers showing some constraints are equalities on it).  A box needs no
witness; a polyhedron asks z3 (``engine/lp.py``) for them, or takes them from a certificate,
where ``exactmax verify --cert`` stores them so that ``check-cert`` needs no solver.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..kernel.errors import CheckFailed
from ..kernel.polyhedron import Box, Domain, check_empty, check_flat, check_interior, check_member


@dataclass(frozen=True, slots=True)
class DomainFacts:
    empty: bool
    full_dimensional: bool
    witness: dict | None = None  # {"interior": x} | {"member": x, "flat": y} | {"empty": y}


def domain_facts(dom: Domain, witness: dict | None = None) -> DomainFacts:
    """Empty or not, full-dimensional or not, from ``witness`` if given (checked by the
    kernel: CheckFailed if it does not show what it says), else found by z3 and checked."""
    if isinstance(dom, Box):
        if dom.is_empty():
            return DomainFacts(True, False)
        return DomainFacts(False, all(lo < hi for lo, hi in zip(dom.lower, dom.upper)))
    P = dom.as_polyhedron()
    if witness is None:
        from ..engine.lp import find_emptiness, find_point, flat_multipliers, interior_point

        x = interior_point(P)
        if x is not None:
            witness = {"interior": x}
        else:
            x = find_point(P)
            witness = (
                {"member": x, "flat": flat_multipliers(P)}
                if x is not None
                else {"empty": find_emptiness(P)}
            )
            if None in witness.values():  # pragma: no cover - would contradict Motzkin's
                raise RuntimeError("z3 found no witness for the domain")  # theorem
    keys = set(witness)
    if keys == {"interior"}:
        check_interior(P, witness["interior"])
        return DomainFacts(False, True, witness)
    if keys == {"member", "flat"}:
        check_member(P, witness["member"])
        check_flat(P, witness["flat"])
        return DomainFacts(False, False, witness)
    if keys == {"empty"}:
        check_empty(P, witness["empty"])
        return DomainFacts(True, False, witness)
    raise CheckFailed(
        "domain witness: expected an interior point, a member point with flat "
        "multipliers, or emptiness multipliers"
    )
