"""``exactmax check`` and ``exactmax replay``: a VNN-LIB property of a Maxout network decided
(sat with an exact counterexample, unsat with a certificate the kernel checks, or unknown),
another tool's counterexample checked exactly, and a property certificate re-checked."""

from __future__ import annotations

import time

from .. import jsonout
from ..exits import EXIT_OK, EXIT_REFUTED, UsageError


def check_property_cert(args, root) -> int:
    """``check-cert`` of a property certificate: the kernel's check that the property's
    query is unsat, cell by cell (``check_property``)."""
    from ..io.property_certificate import read_property_certificate
    from ..kernel.errors import CheckFailed
    from ..kernel.property import check_property
    if args.models or args.domain:
        raise UsageError("--models and --domain are for equivalence certificates; a property "
                         "certificate embeds its network and property (their sha256 are "
                         "printed)")
    net, prop, trees, hashes = read_property_certificate(root)
    t0 = time.monotonic()
    try:
        leaves = check_property(net, prop.cases, trees)
    except CheckFailed as e:
        print(jsonout.dumps({"valid": False, "reason": str(e)}) if args.json else
              f"rejected: {e}")
        return EXIT_REFUTED
    if args.json:
        print(jsonout.dumps({"valid": True, "leaves": leaves, "sha256": hashes,
                          "time_s": round(time.monotonic() - t0, 3)}))
    else:
        print(f"valid: the kernel checked {leaves} cells; the property's query is unsat")
        print(f"  about: model sha256 {hashes['model'][:16]}... (file "
              f"{hashes['model_file'][:16]}...), property sha256 {hashes['property'][:16]}...")
    return EXIT_OK
