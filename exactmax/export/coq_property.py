"""Export a property certificate (``exactmax check NET PROP.vnnlib --cert C.json``, VNN-LIB's
"unsat") as a Coq file checked against the library in ``proofs/``.

The file defines the Maxout network readably (as ``export.coq`` writes it), the property as
its cases (each an input polyhedron A x <= b, ``Property.pcase``, and the forbidden output
conjunctions O_1 .. O_m, each a list of rows a . (x ++ y) + c >= 0, or > 0 when strict, the
rows of ``kernel.property.Case`` in the reader's order), and the split trees (one per case,
packed as machine integers, ``Property.unpack_ptrees``), and proves

    forall c, In c cases -> forall x : list R, length x = d -> in_poly (pc_A c) (pc_b c) x ->
      forall O, In O (pc_outs c) -> ~ satR O (x ++ maxoutR net x)

by one reflective call (``vm_compute``) of the library's checker ``Property.property_ok``,
whose soundness over R (``Property.maxout_property_sound``) is proved once.  The exporter
writes what it is given; rejecting a bad certificate is Coq's job.

Trees are written as they are: each split's and leaf's own choices where the certificate
states them (the Coq checker checks a split's choices on the split's cell and passes the maps
down, as the producer builds them), Farkas multipliers of split rows divided by the split's
integral scale (``coq._TreeWriter.farkas``: split rows are written with integer
coefficients), those of the domain's rows and of the forbidden rows as they are.  Relaxed
leaves (``PRelaxed``, ``proofs/Relaxed.v``) are written with their upper functions and
refutations (Farkas, phase splits, tightened rows) in two more tables; an ``Excluded`` leaf
whose proofs split on phases is written as a relaxed leaf without upper functions (the same
rows, the same check).
"""

from __future__ import annotations

import os
import sys

from ..kernel.certificate import Empty, Split
from ..kernel.property import Excluded, Phase, Relaxed, Tighten
from .coq import _integral_scale, _maxout_term, _pack, _q, _qlist, _qnums, _Tables, _TreeWriter

KINDS = ("farkas", "aff", "entry", "choices", "upper", "rproof", "tree")  # Property.unpack_ptrees


def _ptree(t: _Tables, tree, domain_rows: int) -> int:
    """The tree's index in the table of tree nodes (``Property.rd_ptree``): children before
    parents, without deep recursion in Python."""
    w = _TreeWriter(t, domain_rows)
    names: dict[int, int] = {}
    stack = [(tree, (), False)]
    while stack:
        node, lam, expanded = stack.pop()
        if isinstance(node, Split) and not expanded:
            stack.append((node, lam, True))
            k = _integral_scale(node.a, node.c)
            stack.append((node.lt, lam + (k,), False))
            stack.append((node.ge, lam + (k,), False))
            continue
        if isinstance(node, Empty):
            nums: tuple = (1, w.farkas(node.proof, lam))
        elif isinstance(node, Excluded) and not any(
            isinstance(p, Phase | Tighten) for p in node.proofs
        ):
            nums = (
                0,
                w.choices(w.own(node.choices, lam)),
                len(node.proofs),
                *(w.farkas(p, lam) for p in node.proofs),
            )
        elif isinstance(node, Excluded | Relaxed):  # an Excluded leaf: no upper, no extra row
            uppers = node.uppers if isinstance(node, Relaxed) else ()
            extra = node.extra if isinstance(node, Relaxed) else ()
            nums = (
                3,
                w.choices(w.own(node.choices, lam)),
                len(uppers),
                *(0 if u is None else 1 + _upper(w, u, lam) for u in uppers),
                len(extra),
                *(n for i, u in extra for n in (i, _upper(w, u, lam))),
                len(node.proofs),
                *(_rproof(w, p, lam) for p in node.proofs),
            )
        elif isinstance(node, Split):
            k = _integral_scale(node.a, node.c)
            nums = (
                2,
                w.aff([k * v for v in node.a], k * node.c),
                w.choices(w.own(node.choices, lam)),
                names[id(node.ge)],
                names[id(node.lt)],
            )
        else:
            raise TypeError(f"not a node of a property certificate's tree: {node!r}")
        names[id(node)] = t.add("tree", nums)
    return names[id(tree)]


def _upper(w: _TreeWriter, u, lam) -> int:
    """An upper function's index in its table (``Property.rd_upper``)."""
    nums = (
        len(u.lam),
        *(n for v in u.lam for n in _qnums(v)),
        *_qnums(u.beta),
        len(u.proofs),
        *(w.farkas(p, lam) for p in u.proofs),
        len(u.terms),
        *(n for k, c in u.terms for n in (k, *_qnums(c))),
    )
    return w.t.add("upper", nums)


def _rproof(w: _TreeWriter, proof, lam) -> int:
    """A refutation's index in its table (``Property.rd_rproof``), children first: a Farkas
    proof, a ``Phase`` (RPhase) or a ``Tighten`` (RTighten)."""
    if isinstance(proof, Phase):
        bs = [_rproof(w, b, lam) for b in proof.branches]
        return w.t.add("rproof", (1, proof.node, len(bs), *bs))
    if isinstance(proof, Tighten):
        us = [_upper(w, u, lam) for u in proof.uppers]
        th = _rproof(w, proof.then, lam)
        return w.t.add("rproof", (2, len(proof.nodes), *proof.nodes, len(us), *us, th))
    return w.t.add("rproof", (0, w.farkas(proof, lam)))


def _row(r) -> str:
    c = _q(r.c)
    c = f"({c})" if c.startswith("-") else c  # an argument: -2 would be a subtraction
    return f"row {_qlist(r.a)} {c} {'true' if r.strict else 'false'}"


def _case_term(case) -> str:
    P = case.inputs
    outs = ";\n      ".join(
        "[" + ";\n       ".join(_row(r) for r in conj) + "]" for conj in case.outputs
    )
    return (
        "{| pc_A := [" + ";\n            ".join(_qlist(a) for a in P.A) + "];\n"
        f"     pc_b := {_qlist(P.b)};\n"
        f"     pc_outs := [\n      {outs}] |}}"
    )


HASHES = ("model", "model_file", "property")


def _binding_comment(hashes: dict) -> str:
    return (
        "   Exported from the property certificate about (sha256 of the model's canonical\n"
        "   JSON, of the file it was read from, and of the VNN-LIB text, as check-cert\n"
        "   prints them; also defined below, in Module Sha256):\n"
        + "".join(f"     {k:<10} {hashes[k]}\n" for k in HASHES)
        + "   exactmax export-coq CERT.json -o THIS.v --existing confirms that this file\n"
        "   states exactly that certificate's network, property and trees."
    )


def sha256_module(hashes: dict, keys) -> str:
    """The file's ``Module Sha256``: one string definition per key, the hashes it is bound to."""
    return (
        "Module Sha256.\nImport Strings.String.\nLocal Open Scope string_scope.\n"
        + "".join(f'Definition {k} : string := "{hashes[k]}".\n' for k in keys)
        + "End Sha256.\n"
    )


def export_coq_property(net, prop, trees, hashes: dict, module: str = "NetProperty") -> str:
    """The text of a Coq file proving the property's cases for the network from their trees
    (``kernel.property.check_property``'s arguments)."""
    t = _Tables(KINDS)
    roots = [_ptree(t, tree, len(case.inputs.b)) for case, tree in zip(prop.cases, trees)]
    d = net.input_dim
    cases = "".join(
        f"Definition case{i} : pcase :=\n  {_case_term(c)}.\n\n" for i, c in enumerate(prop.cases)
    )
    names = "; ".join(f"case{i}" for i in range(len(prop.cases)))
    sha = sha256_module(hashes, HASHES)
    return f"""(* {module}.v -- written by exactmax export-coq from a property certificate.
   Check it with
     coqc -Q <exactmax>/proofs ExactMax -no-glob {module}.v
   The theorem at the end says that for every case of the property, no real input x in the
   case's polyhedron (A x <= b) has (x, net x) satisfying every row of one of the case's
   forbidden output conjunctions (a row: a . (x ++ y) + c >= 0, or > 0 when strict): the
   VNN-LIB query is unsat.  Nothing else in this file needs to be read: the certificate (split
   trees with their choices and Farkas multipliers) is checked by the library's proved checker
   (proofs/Property.v), and the program it speaks about is built from the network by the
   library's proved translation (proofs/Maxout.v).
{_binding_comment(hashes)} *)

From Coq Require Import QArith Reals List.
From Coq Require Uint63 Strings.String.
Import (notations) Uint63.   (* names, as Print Assumptions prints them, stay qualified *)
From ExactMax Require Import Checker Sound Build Maxout Property.
{sha}
Open Scope Q_scope.

Section Data.
Import ListNotations.     (* for the data; the array below is written [| .. |] *)

(** The network, as a user wrote it *)

Definition net : maxout :=
{_maxout_term(net)}.

(** The property: its cases, each an input polyhedron and forbidden output conjunctions *)

{cases}Definition cases : list pcase := [{names}].

End Data.

(** The certificate: one split tree per case with its choices and Farkas multipliers, packed
    as machine integers (Property.unpack_ptrees reads it; Checker.v describes the layout) *)

Definition packed : PArray.array Uint63.int :=
  {_pack(t.stream([len(roots), *roots]))}.

Definition certificate : list ptree := unpack_ptrees packed.

Lemma certificate_checks : property_ok net cases certificate = true.
Proof. vm_cast_no_check (eq_refl true). Qed.

(** The network and the property are well-shaped (every length is the one the dimensions
    say) *)

Lemma shapes_ok : property_shaped net cases = true.
Proof. vm_compute. reflexivity. Qed.

(** The theorem *)

Theorem net_property : forall c, In c cases ->
  forall x : list R, length x = {d}%nat -> in_poly (pc_A c) (pc_b c) x ->
  forall O, In O (pc_outs c) -> ~ satR O (x ++ maxoutR net x).
Proof.
  exact (maxout_property_sound net cases certificate shapes_ok certificate_checks).
Qed.

(** What the theorem rests on: coqc prints the axioms it uses (exactmax export-coq --check
    allows only the two Reals axioms and Coq's primitive integers and arrays) *)

Print Assumptions net_property.
"""


def export_command(args) -> int:
    """``exactmax export-coq C.json -o P.v [--check] [--existing] [--json]`` for a property
    certificate: read it (the embedded hashes recomputed), write the file, and with --check
    compare the file read back with the export of the certificate (``coqcheck.check_binding``),
    compile it against the current library and check ``Print Assumptions net_property``
    against the allow-list.  Exit 0 when proved (or written), 1 when rejected."""
    from ..io import InputError
    from ..io.jsonfile import Cursor, read_json_file
    from ..io.property_certificate import read_property_certificate

    module = os.path.splitext(os.path.basename(args.output))[0]
    net, prop, trees, hashes, lifted = read_property_certificate(
        Cursor(args.cert, "", read_json_file(args.cert))
    )
    if lifted is not None:
        raise InputError(
            args.cert,
            "lifted",
            "a certificate about the lifted form of the network (lattice normal forms have no "
            "Coq export yet): make one without lifting with exactmax check --no-lift --no-relax",
        )
    text = export_coq_property(net, prop, trees, hashes, module)
    about = {
        "kind": "property",
        "cases": len(prop.cases),
        "conjunctions": sum(len(c.outputs) for c in prop.cases),
        "input_dim": net.input_dim,
        "leaves": sum(_leaves(t) for t in trees),
    }
    summary = (
        f"  about: {about['cases']} case(s), {about['conjunctions']} forbidden "
        f"output conjunction(s), {about['leaves']} leaves; model sha256 "
        f"{hashes['model'][:16]}..., property sha256 {hashes['property'][:16]}..."
    )
    sha = {k: hashes[k] for k in ("model", "model_file", "property")}
    claim = "the property's query is unsat"
    return report(args, text, about, sha, "net_property", claim, summary)


def report(args, text: str, about: dict, sha: dict, theorem: str, claim: str, summary: str):
    """Write ``text`` to args.output (or, with --existing, read what is there); with --check
    compare it with ``text`` (``coqcheck.check_binding``), compile it against the library and
    check the axioms of ``theorem``; print the answer (or --json).  Exit 0 when proved (or
    written), 1 when rejected."""
    from .. import jsonout
    from ..exits import EXIT_OK, EXIT_REFUTED
    from ..progress import shown
    from . import coqcheck

    check = args.check or args.existing
    lib, written = coqcheck.library_and_file(args, text, check)
    out = {
        "output": args.output,
        "bytes": len(written),
        "checked": None,
        "sha256": sha,
        "about": about,
    }
    r = None
    if check:
        try:
            n = coqcheck.check_binding(args.output, written, text, args.cert)
        except coqcheck.BindingMismatch as e:
            out.update(checked=False, verdict="rejected", reason=str(e))
            print(jsonout.dumps(out) if args.json else f"rejected: {e}")
            return EXIT_REFUTED
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
    out["verdict"] = (
        "rejected" if r is not None and not r.ok else "proved" if r is not None else "written"
    )
    out["trust"] = "coq-checked" if out["verdict"] == "proved" else None
    if args.json:
        print(jsonout.dumps(out))
    else:
        if not args.existing:
            print(f"wrote {args.output} ({len(written)} bytes)")
        if r is not None and not r.ok:
            print(f"coqc rejected {args.output}: {one_line(r.message)}")
        elif r is not None:
            print(
                f"coqc accepted {args.output} in {r.seconds:.1f} s: theorem {theorem} "
                f"proved in Coq ({claim})"
            )
            print(
                f"  the file states exactly {args.cert} ({n} sentences compared); "
                f"Print Assumptions: {len(r.axioms)} axioms, all allowed (the Reals "
                "axioms and Coq's primitive integers and arrays)"
            )
        if r is None or r.ok:
            print(summary)
    return EXIT_REFUTED if r is not None and not r.ok else EXIT_OK


def one_line(message: str, limit: int = 400) -> str:
    """coqc's message on one line (its whitespace collapsed), at most ``limit`` characters."""
    text = " ".join(message.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _leaves(tree) -> int:
    n, stack = 0, [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Split):
            stack += [node.ge, node.lt]
        else:
            n += 1
    return n
