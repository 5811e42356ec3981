"""What an answer about two models on a domain is about, and the answers every pair command
prints alike: the models' and the domain's sha256 with the kernel-checked domain facts
(``claim_about``), their ``--json`` keys and their line, the vacuous answer (the domain empty),
check-cert's rejection, and a verdict whose certificate could not be written.  Used by
verify and equiv (``command``), their epsilon and top-1 forms (``tolerance_command``), check
(``property_command``), check-cert, export-coq and search."""

from __future__ import annotations

import sys

from .. import jsonout
from ..exits import EXIT_INPUT, EXIT_REFUTED, EXIT_VACUOUS
from ..kernel.polyhedron import Box


def claim_about(a, b, dom, witness=None):
    """(what a verdict is about: both models' and the domain's sha256, the domain's kind,
    dimension and whether it is full-dimensional; the kernel-checked domain facts, from
    ``witness`` when given)."""
    from ..io.certificates import content_hash
    from ..io.models import domain_to_json, model_to_json
    from .domain import domain_facts

    facts = domain_facts(dom, witness)
    about = {
        "a_sha256": content_hash(model_to_json(a)),
        "b_sha256": content_hash(model_to_json(b)),
        "domain": {
            "kind": "box" if isinstance(dom, Box) else "polyhedron",
            "dimension": dom.dim,
            "sha256": content_hash(domain_to_json(dom)),
            "empty": facts.empty,
            "full_dimensional": facts.full_dimensional,
        },
    }
    return about, facts


def pair_hashes(a, b, dom) -> dict:
    """The ``sha256`` of an answer about two models on a domain: of their canonical JSON."""
    from ..io.certificates import content_hash
    from ..io.models import domain_to_json, model_to_json

    return {
        "a": content_hash(model_to_json(a)),
        "b": content_hash(model_to_json(b)),
        "domain": content_hash(domain_to_json(dom)),
    }


def about_json(about) -> dict:
    """The ``--json`` keys of what an answer is about: ``sha256`` (of "a", "b" and the
    "domain") and ``about`` (the domain's kind, dimension, emptiness, full dimension)."""
    return {
        "sha256": {
            "a": about["a_sha256"],
            "b": about["b_sha256"],
            "domain": about["domain"]["sha256"],
        },
        "about": {"domain": {k: v for k, v in about["domain"].items() if k != "sha256"}},
    }


def about_line(about) -> str:
    d = about["domain"]
    shape = (
        "empty"
        if d["empty"]
        else "full-dimensional"
        if d["full_dimensional"]
        else "lower-dimensional: no interior point, the claim holds on a thin set only"
    )
    return (
        f"about: A sha256 {about['a_sha256'][:16]}..., B sha256 "
        f"{about['b_sha256'][:16]}..., domain {d['kind']} in dimension {d['dimension']} "
        f"({shape}), sha256 {d['sha256'][:16]}..."
    )


def certificate_not_written(error: str) -> int:
    """The verdict stands (printed above); then the error, on stderr: exit 2."""
    sys.stdout.flush()
    print(f"exactmax: error: {error} (the certificate was not written)", file=sys.stderr)
    return EXIT_INPUT


def answer_vacuous(args, about, binding=None, options: str = "") -> int:
    """The domain is empty (kernel-checked Farkas multipliers): a claim about it says
    nothing, so it is its own answer, never "proved" or "valid".  ``binding``: check-cert's
    comparison with the user's files."""
    if args.json:
        print(
            jsonout.dumps(
                {
                    "verdict": "vacuous",
                    "trust": "kernel-checked",
                    "reason": "the domain is empty",
                    **about_json(about),
                }
                | ({"files": binding.as_json()} if binding is not None else {})
            )
        )
    else:
        print(
            "vacuous: the domain is empty (Farkas multipliers checked by the kernel); "
            "every claim about it holds and says nothing"
        )
        print("  " + about_line(about))
        if binding is not None:
            print("  " + binding.line(options))
    return EXIT_VACUOUS


def cert_rejected(args, reason: str, sha: dict, binding) -> int:
    """check-cert: the kernel rejected the certificate (exit 1), with its reason."""
    if args.json:
        print(
            jsonout.dumps(
                {
                    "verdict": "rejected",
                    "trust": None,
                    "reason": reason,
                    "sha256": sha,
                    "files": binding.as_json(),
                }
            )
        )
    else:
        print(f"rejected: {reason}")
    return EXIT_REFUTED
