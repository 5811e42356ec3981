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


def _ptree(t: _Tables, tree, domain_rows: int, lam0: tuple = (), cuts=frozenset()) -> int:
    """The tree's index in the table of tree nodes (``Property.rd_ptree``): children before
    parents, without deep recursion in Python.  ``lam0``: the integral scales of the split
    rows above the tree (a part's subtree); the nodes whose ids are in ``cuts`` are written
    as ``PCut`` (checked in a part)."""
    w = _TreeWriter(t, domain_rows)
    names: dict[int, int] = {}
    stack = [(tree, lam0, False)]
    while stack:
        node, lam, expanded = stack.pop()
        if id(node) in cuts:
            names[id(node)] = t.add("tree", (4,))
            continue
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


def _net_and_cases(net, prop) -> str:
    """The data every property file states: the network and the property's cases."""
    cases = "".join(
        f"Definition case{i} : pcase :=\n  {_case_term(c)}.\n\n" for i, c in enumerate(prop.cases)
    )
    names = "; ".join(f"case{i}" for i in range(len(prop.cases)))
    return f"""(** The network, as a user wrote it *)

Definition net : maxout :=
{_maxout_term(net)}.

(** The property: its cases, each an input polyhedron and forbidden output conjunctions *)

{cases}Definition cases : list pcase := [{names}]."""


_SHAPES_COMMENT = (
    "(** The network and the property are well-shaped (every length is the one the dimensions\n"
    "    say) *)"
)


def _theorem(d: int, proof: str) -> str:
    """The end of every property file: the shapes, the theorem (proved by ``proof``) and
    its axioms."""
    return f"""{_SHAPES_COMMENT}

Lemma shapes_ok : property_shaped net cases = true.
Proof. vm_compute. reflexivity. Qed.

(** The theorem *)

Theorem net_property : forall c, In c cases ->
  forall x : list R, length x = {d}%nat -> in_poly (pc_A c) (pc_b c) x ->
  forall O, In O (pc_outs c) -> ~ satR O (x ++ maxoutR net x).
Proof.
  exact ({proof}).
Qed.

(** What the theorem rests on: coqc prints the axioms it uses (exactmax export-coq --check
    allows only the two Reals axioms and Coq's primitive integers and arrays) *)

Print Assumptions net_property.
"""


def export_coq_property(net, prop, trees, hashes: dict, module: str = "NetProperty") -> str:
    """The text of a Coq file proving the property's cases for the network from their trees
    (``kernel.property.check_property``'s arguments)."""
    t = _Tables(KINDS)
    roots = [_ptree(t, tree, len(case.inputs.b)) for case, tree in zip(prop.cases, trees)]
    sha = sha256_module(hashes, HASHES)
    proof = "maxout_property_sound net cases certificate shapes_ok certificate_checks"
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

{_net_and_cases(net, prop)}

End Data.

(** The certificate: one split tree per case with its choices and Farkas multipliers, packed
    as machine integers (Property.unpack_ptrees reads it; Checker.v describes the layout) *)

Definition packed : PArray.array Uint63.int :=
  {_pack(t.stream([len(roots), *roots]))}.

Definition certificate : list ptree := unpack_ptrees packed.

Lemma certificate_checks : property_ok net cases certificate = true.
Proof. vm_cast_no_check (eq_refl true). Qed.

{_theorem(net.input_dim, proof)}"""


def _weights(trees) -> dict[int, int]:
    """{id(node): the number of Farkas multipliers below it}: what checking a subtree costs,
    roughly (every node of every tree, children before parents)."""
    w: dict[int, int] = {}
    order, stack = [], list(trees)
    while stack:
        node = stack.pop()
        order.append(node)
        if isinstance(node, Split):
            stack += [node.ge, node.lt]
    for node in reversed(order):
        if isinstance(node, Split):
            w[id(node)] = w[id(node.ge)] + w[id(node.lt)]
        else:
            w[id(node)] = _leaf_weight(node)
    return w


def _leaf_weight(leaf) -> int:
    n, stack = 1, [leaf]
    while stack:
        x = stack.pop()
        if isinstance(x, Empty):
            n += len(x.proof)
        elif isinstance(x, Excluded | Relaxed):
            stack += list(x.proofs)
            ups = [*getattr(x, "uppers", ()), *(u for _, u in getattr(x, "extra", ()))]
            n += sum(len(f) for u in ups if u is not None for f in u.proofs)
        elif isinstance(x, Phase):
            stack += list(x.branches)
        elif isinstance(x, Tighten):
            n += sum(len(f) for u in x.uppers for f in u.proofs)
            stack.append(x.then)
        else:  # a Farkas list
            n += len(x)
    return n


def plan_parts(trees, parts: int):
    """(cuts, groups): the subtrees checked as parts, left to right across the cases (as
    ``Property.all_cuts`` numbers them), each as (case index, node, the integral scales of
    the split rows above it); and ``parts`` or fewer groups (first cut, number of cuts) of
    about equal weight (``_weights``).  Splits heavier than a quarter of a part's share are
    replaced by their two halves, heaviest first; each group ends where its share of the
    total is nearest."""
    w = _weights(trees)
    cuts = [(i, tree, ()) for i, tree in enumerate(trees)]
    total = sum(w[id(n)] for _, n, _ in cuts)
    while True:
        splits = [
            j
            for j, (_, n, _) in enumerate(cuts)
            if isinstance(n, Split) and w[id(n)] * 4 * parts > total
        ]
        if not splits or parts == 1:
            break
        j = max(splits, key=lambda j: w[id(cuts[j][1])])
        i, node, lam = cuts[j]
        k = _integral_scale(node.a, node.c)
        cuts[j : j + 1] = [(i, node.ge, lam + (k,)), (i, node.lt, lam + (k,))]
    bounds, acc = [0], 0
    for j, (_, n, _) in enumerate(cuts):
        before, acc = acc, acc + w[id(n)]
        share = total * len(bounds) / parts  # where group len(bounds) should end
        if len(bounds) < parts and acc >= share:
            nearer = acc - share <= share - before
            end = j + 1 if nearer or j == bounds[-1] else j
            if bounds[-1] < end < len(cuts):
                bounds.append(end)
    bounds.append(len(cuts))
    return cuts, [(a, b - a) for a, b in zip(bounds, bounds[1:]) if b > a]


_HEAD = """From Coq Require Import QArith Reals List.
From Coq Require Uint63 Strings.String.
Import (notations) Uint63.   (* names, as Print Assumptions prints them, stay qualified *)
From ExactMax Require Import Checker Sound Build Maxout Property."""


def export_coq_property_parts(
    net, prop, trees, hashes: dict, module: str, parts: int
) -> list[tuple[str, str]]:
    """[(Coq module name, text)] in the order coqc compiles them: ``{module}_data`` (the
    network, the property, and the top of each tree with ``PCut`` where a part goes),
    ``{module}_part1`` .. (each a group of cut subtrees and the lemma ``group_ok`` that
    checks them in their cells: these compile side by side), and ``{module}``, which proves
    the theorem from them (``Property.maxout_property_parts_sound``)."""
    cuts, groups = plan_parts(trees, parts)
    t = _Tables(KINDS)
    cut_ids = frozenset(id(n) for _, n, _ in cuts)
    roots = [
        _ptree(t, tree, len(case.inputs.b), (), cut_ids) for case, tree in zip(prop.cases, trees)
    ]
    data = f"""(* {module}_data.v -- written by exactmax export-coq from a property certificate, the
   first of the files of {module}.v (which states the theorem): the network, the property,
   and the top of each case's split tree, with PCut where a subtree is checked in a part
   ({module}_part1.v ..). *)

{_HEAD}
Open Scope Q_scope.

Section Data.
Import ListNotations.

{_net_and_cases(net, prop)}

End Data.

(** The top of each case's tree, packed as machine integers (Property.unpack_ptrees) *)

Definition top_packed : PArray.array Uint63.int :=
  {_pack(t.stream([len(roots), *roots]))}.

Definition top : list ptree := unpack_ptrees top_packed.
"""
    files = [(f"{module}_data", data)]
    for g, (k, m) in enumerate(groups, 1):
        tg = _Tables(KINDS)
        rs = [_ptree(tg, n, len(prop.cases[i].inputs.b), lam) for i, n, lam in cuts[k : k + m]]
        files.append(
            (
                f"{module}_part{g}",
                f"""(* {module}_part{g}.v -- written by exactmax export-coq: part {g} of
   {len(groups)} of {module}.v, the subtrees of cut cells {k} to {k + m - 1} (numbered left
   to right across the cases, Property.all_cuts), each checked in its cell. *)

{_HEAD}
Require Import {module}_data.

Definition packed : PArray.array Uint63.int :=
  {_pack(tg.stream([len(rs), *rs]))}.

Definition group : list ptree := unpack_ptrees packed.

Lemma group_checks : group_ok net cases top {k} {m} group = true.
Proof. vm_cast_no_check (eq_refl true). Qed.
""",
            )
        )
    gs = "; ".join(f"({m}%nat, {module}_part{g}.group)" for g, (_, m) in enumerate(groups, 1))
    proofs = "".join(f"(conj {module}_part{g}.group_checks " for g in range(1, len(groups) + 1))
    proofs += "eq_refl" + ")" * len(groups)
    proof = (
        f"maxout_property_parts_sound net cases top {len(cuts)} [{gs}]\n"
        f"           shapes_ok top_checks {proofs}"
    )
    sha = sha256_module(hashes, HASHES)
    main = f"""(* {module}.v -- written by exactmax export-coq from a property certificate, in
   parts.  Compile {module}_data.v, then {module}_part1.v .. {module}_part{len(groups)}.v (side by
   side), then this file, each with
     coqc -Q <exactmax>/proofs ExactMax -no-glob FILE.v
   The theorem at the end says that for every case of the property, no real input x in the
   case's polyhedron (A x <= b) has (x, net x) satisfying every row of one of the case's
   forbidden output conjunctions (a row: a . (x ++ y) + c >= 0, or > 0 when strict): the
   VNN-LIB query is unsat.  net and cases are defined in {module}_data.v; the certificate
   (split trees with their choices and Farkas multipliers) is checked by the library's
   proved checker (proofs/Property.v): the top of each tree here, each part's subtrees in
   its own file.
{_binding_comment(hashes)} *)

{_HEAD}
Require Import {module}_data.
Require {" ".join(f"{module}_part{g}" for g in range(1, len(groups) + 1))}.
{sha}
Open Scope Q_scope.
Import ListNotations.

(** The top of each tree checks, with {len(cuts)} cut cells *)

Lemma top_checks : parts_top_ok net cases top {len(cuts)} = true.
Proof. vm_cast_no_check (eq_refl true). Qed.

{_theorem(net.input_dim, proof)}"""
    files.append((module, main))
    return files


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
    parts = getattr(args, "parts", 1)
    if parts > 1:
        *before, (_, text) = export_coq_property_parts(net, prop, trees, hashes, module, parts)
    else:
        before, text = [], export_coq_property(net, prop, trees, hashes, module)
    about = {
        "kind": "property",
        "cases": len(prop.cases),
        "conjunctions": sum(len(c.outputs) for c in prop.cases),
        "input_dim": net.input_dim,
        "leaves": sum(_leaves(t) for t in trees),
        "parts": max(1, len(before) - 1),
    }
    summary = (
        f"  about: {about['cases']} case(s), {about['conjunctions']} forbidden "
        f"output conjunction(s), {about['leaves']} leaves; model sha256 "
        f"{hashes['model'][:16]}..., property sha256 {hashes['property'][:16]}..."
    )
    sha = {k: hashes[k] for k in ("model", "model_file", "property")}
    claim = "the property's query is unsat"
    return report(args, text, about, sha, "net_property", claim, summary, before)


def _file_beside(args, name: str, text: str, check: bool) -> tuple[str, str]:
    """(path, text as on disk) of the file ``name``.v beside args.output: written atomically,
    or with --existing read as it is."""
    from ..io import InputError
    from ..io.models import write_bytes_atomic

    path = os.path.join(os.path.dirname(args.output), f"{name}.v")
    if not args.existing:
        write_bytes_atomic(path, text.encode())
    try:
        with open(path, encoding="utf-8") as f:
            return path, f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(path, "", f"cannot be read: {e}") from None


def report(
    args,
    text: str,
    about: dict,
    sha: dict,
    theorem: str,
    claim: str,
    summary: str,
    before: list[tuple[str, str]] = (),  # type: ignore[assignment]
):
    """Write ``text`` to args.output (or, with --existing, read what is there), and the files
    ``before`` it imports (an export in parts: [(module, text)], the data first, then the
    parts) beside it; with --check compare each with its export (``coqcheck.check_binding``),
    compile them against the library (the parts side by side) and check the axioms of
    ``theorem``; print the answer (or --json).  Exit 0 when proved (or written), 1 when
    rejected."""
    from .. import jsonout
    from ..exits import EXIT_OK, EXIT_REFUTED
    from ..progress import shown
    from . import coqcheck

    check = args.check or args.existing
    lib, written = coqcheck.library_and_file(args, text, check)
    others = [(*_file_beside(args, name, t, check), t) for name, t in before]
    out = {
        "output": args.output,
        "bytes": len(written) + sum(len(w) for _, w, _ in others),
        "checked": None,
        "sha256": sha,
        "about": about,
    }
    if others:
        out["files"] = [p for p, _, _ in others] + [args.output]
    r = None
    if check:
        try:
            n = sum(coqcheck.check_binding(p, w, t, args.cert) for p, w, t in others)
            n += coqcheck.check_binding(args.output, written, text, args.cert)
        except coqcheck.BindingMismatch as e:
            out.update(checked=False, verdict="rejected", reason=str(e))
            print(jsonout.dumps(out) if args.json else f"rejected: {e}")
            return EXIT_REFUTED
        if shown(args):
            what = args.output + (f" and the {len(others)} files it imports" if others else "")
            print(
                f"exactmax: coqc is checking {what} against {lib.path} ...",
                file=sys.stderr,
                flush=True,
            )
        if others:
            stages = [[others[0][0]], [p for p, _, _ in others[1:]], [args.output]]
            r = coqcheck.run_coqc_stages(stages, lib.path, args.timeout)
        else:
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
            also = f" and {len(others)} files it imports" if others else ""
            print(f"wrote {args.output}{also} ({out['bytes']} bytes)")
        if r is not None and not r.ok:
            print(f"coqc rejected {args.output}: {one_line(r.message)}")
        elif r is not None:
            print(
                f"coqc accepted {args.output} in {r.seconds:.1f} s: theorem {theorem} "
                f"proved in Coq ({claim})"
            )
            print(
                f"  the {'files state' if others else 'file states'} exactly {args.cert} "
                f"({n} sentences compared); "
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
