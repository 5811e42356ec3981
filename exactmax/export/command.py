"""``exactmax export-coq`` and ``exactmax coq-lib``: a certificate (or the construction
theorem of a network) written as a Coq proof and checked by coqc against the library in
proofs/, and where that library is and whether it is current."""

from __future__ import annotations

import sys

from .. import jsonout
from ..exits import EXIT_INPUT, EXIT_OK, EXIT_REFUTED, EXIT_VACUOUS, UsageError
from ..io import InputError
from ..prove.about import about_json, about_line, claim_about


def _export_construction(args) -> int:
    """export-coq --construction: the library located and checked current as for a
    certificate, then ``export.coq_construction`` writes and (with --check) compiles."""
    from ..io.models import check_outputs
    from . import coqlib
    from .coq_construction import main as construction_main

    if not args.existing:  # --existing: the file at -o is read and checked, not written
        check_outputs(
            [("-o", args.output)],
            [
                ("NET.json", args.construction),
                ("--transformer", args.transformer),
                ("--domain", args.domain),
            ],
        )
    argv = [args.construction, "-o", args.output, "--timeout", str(args.timeout)]
    for flag, value in (("--transformer", args.transformer), ("--domain", args.domain)):
        if value:
            argv += [flag, value]
    argv += [
        f
        for f, on in (
            ("--check", args.check),
            ("--existing", args.existing),
            ("--json", args.json),
            ("--packed", args.packed),
        )
        if on
    ]
    if args.check or args.existing:
        try:
            lib = coqlib.locate(args.coq_lib)
            coqlib.ready(lib, log=lambda m: print(f"exactmax: {m}", file=sys.stderr))
        except coqlib.LibraryError as e:
            raise UsageError(f"--check: {e}") from None
        argv += ["--coq-lib", lib.path]
    return construction_main(argv)


def run_export_coq(args) -> int:
    """``export-coq CERT -o NetEquiv.v``: write the certificate as a Coq file (or, with
    --existing, take the file already there) and, with --check: confirm that the
    file states exactly the certificate's models, domain
    and tree (coqcheck.check_binding), that the library is current (built on first use when
    it is the per-user cache), that coqc accepts the file, and that Print Assumptions of
    net_equiv lists only allowed axioms.  An empty domain (decided by the kernel) is the
    vacuous answer, exit 5, whatever Coq says."""
    import os
    import re

    from ..io.certificates import load_certificate
    from ..kernel.errors import CheckFailed
    from . import coqcheck
    from .coq import ExportUnsupported, export_coq

    module = os.path.splitext(os.path.basename(args.output))[0]
    if not args.output.endswith(".v") or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", module):
        raise UsageError(
            f"-o: expected a Coq file name such as NetEquiv.v (a letter, then "
            f"letters, digits or _, then .v), got {args.output!r}"
        )
    if (args.cert is None) == (args.construction is None):
        raise UsageError("give CERT.json, or --construction NET.json (one of them)")
    if args.construction is None and (args.transformer or args.domain or args.packed):
        raise UsageError("--transformer, --domain and --packed go with --construction")
    if args.parts < 1:
        raise UsageError(f"--parts: expected a whole number >= 1, got {args.parts}")
    if args.construction is not None and args.parts > 1:
        raise UsageError("--parts goes with a property certificate, not --construction")
    if args.construction is not None:
        return _export_construction(args)
    check = args.check or args.existing
    from ..io.models import check_outputs

    if args.existing:
        if not os.path.isfile(args.output):
            raise InputError(
                args.output, "", "does not exist; --existing checks a file export-coq wrote earlier"
            )
    else:
        check_outputs([("-o", args.output)], [("CERT.json", args.cert)])
    from ..io.property_certificate import peek_property_certificate

    if peek_property_certificate(args.cert):  # (#20) export.coq_property
        from .coq_property import export_command

        return export_command(args)
    if args.parts > 1:
        raise UsageError(
            f"--parts goes with a property certificate (exactmax check --cert); {args.cert} is "
            "another kind"
        )
    from ..io.pair_certificate import PAIR_CERTIFICATE, certificate_format

    if certificate_format(args.cert) == PAIR_CERTIFICATE:  # (#35) export.coq_pair
        from .coq_pair import export_command as export_pair

        return export_pair(args)
    a, b, dom, tree, hashes, witness = load_certificate(args.cert)
    from ..kernel.correspondence import Correspondence
    from ..kernel.lattice import LatticeForms

    if isinstance(tree, LatticeForms):
        raise InputError(
            args.cert,
            "lattice",
            "lattice normal forms (what lift and equiv write for networks that compute one "
            "max/min expression) have no Coq export yet; for A = B on a bounded domain, write an "
            "equivalence certificate with equiv --certificate-kind equivalence --cert",
        )
    if isinstance(tree, Correspondence):  # (#35) export.coq_correspondence
        from .coq_correspondence import export_command as export_correspondence

        return export_correspondence(args, a, b, tree, hashes)
    try:
        text = export_coq(a, b, dom, tree, module)
    except ExportUnsupported as e:
        raise UsageError(f"{args.cert}: cannot export: {e}") from None
    try:
        about, facts = claim_about(a, b, dom, witness)
    except CheckFailed:
        about, facts = claim_about(a, b, dom)
    lib, written = coqcheck.library_and_file(args, text, check)
    out = {
        "output": args.output,
        "bytes": len(written),
        "checked": None,
        "sha256": {k: hashes[k] for k in ("a", "b", "domain")},
        "about": about_json(about)["about"],
    }
    r = None
    if check:
        try:
            n = coqcheck.check_binding(args.output, written, text, args.cert)
        except coqcheck.BindingMismatch as e:
            out.update(checked=False, verdict="rejected", reason=str(e))
            print(jsonout.dumps(out) if args.json else f"rejected: {e}")
            return EXIT_REFUTED
        from ..progress import shown

        if shown(args):
            print(
                f"exactmax: coqc is checking {args.output} against {lib.path} ...",
                file=sys.stderr,
                flush=True,
            )
        r = coqcheck.run_coqc(args.output, lib.path, args.timeout)
        out.update(
            checked=r.ok,
            sentences_compared=n,
            library=lib.path,
            coqc_s=round(r.seconds, 2),
            coqc_message=r.message,
            axioms=list(r.axioms),
        )
    verdict = (
        "rejected"
        if r is not None and not r.ok
        else "vacuous"
        if facts.empty
        else "proved"
        if r is not None
        else "written"
    )
    out["verdict"] = verdict
    out["trust"] = (
        "coq-checked"
        if r is not None and r.ok
        else "kernel-checked"
        if verdict == "vacuous"
        else None
    )
    if args.json:
        print(jsonout.dumps(out))
    else:
        if not args.existing:
            print(f"wrote {args.output} ({len(written)} bytes)")
        if r is not None and not r.ok:
            print(f"coqc rejected {args.output}:\n{r.message}")
        elif r is not None:
            what = (
                "vacuous: the domain is empty (checked by the kernel), so theorem "
                "net_equiv holds and says nothing"
                if facts.empty
                else "theorem net_equiv proved in Coq"
            )
            print(f"coqc accepted {args.output} in {r.seconds:.1f} s: {what}")
            print(
                f"  the file states exactly {args.cert} ({n} sentences compared); "
                f"Print Assumptions: {len(r.axioms)} axioms, all allowed (the Reals "
                "axioms and Coq's primitive integers and arrays)"
            )
        elif facts.empty:
            print(
                "vacuous: the domain is empty (checked by the kernel); the file's theorem "
                "says nothing"
            )
        if r is None or r.ok:
            print("  " + about_line(about))
    if r is not None and not r.ok:
        return EXIT_REFUTED
    return EXIT_VACUOUS if facts.empty else EXIT_OK


def run_coq_lib(args) -> int:
    """``coq-lib``: where the Coq library export-coq --check uses is, whether it is current; --build
    builds it (the per-user cache from the installed sources, or a library folder in place)."""
    from . import coqlib

    try:
        lib = coqlib.locate(args.coq_lib)
        built, seconds = coqlib.build(lib) if args.build else (False, 0.0)
    except coqlib.LibraryError as e:
        raise UsageError(str(e)) from None
    try:
        coqlib.check_current(lib)
        current, reason = True, None
    except coqlib.LibraryError as e:
        current, reason = False, str(e)
    out = {
        "verdict": "current" if current else "not-current",
        "path": lib.path,
        "from": lib.how,
        "sources": lib.sources,
        "current": current,
        "built_now": built,
        "build_s": round(seconds, 1),
    }
    if reason:
        out["reason"] = reason
    if args.json:
        print(jsonout.dumps(out))
    elif args.path:
        print(lib.path)
    elif current:
        print(
            f"{lib.path} ({lib.how}): {f'built now in {seconds:.1f} s, ' if built else ''}current"
        )
    else:
        raise UsageError(reason)
    return EXIT_OK if current or (args.path and not args.build) else EXIT_INPUT
