"""Export a pair certificate (``exactmax equiv A B --epsilon E / --top1 --cert C.json``, two
Maxout networks up to a tolerance on a domain) as a Coq file checked against ``proofs/``.

The file defines both networks readably (as ``export.coq`` writes them), the domain as the
polyhedron A x <= b the kernel reads it as (a box: its rows x_i <= upper_i, then
-x_i <= -lower_i), the tolerance, and the tree over the pair program x -> (A(x), B(x)) (packed
as ``Property.unpack_ptrees`` reads it), and proves, by one reflective call of
``Pair.maxout_pair_ok`` and the library's ``Pair.maxout_eps_sound`` / ``maxout_top1_sound``:

    epsilon: forall x : list R, length x = d -> in_poly A b x ->
               forall o, o < n -> Rabs (nth o (maxoutR net_a x) 0 - nth o (maxoutR net_b x) 0)
                                  <= Q2R epsilon
    top-1:   forall x : list R, length x = d -> in_poly A b x -> forall i, i < n ->
               ((forall j, j < n -> nth j (maxoutR net_a x) 0 <= nth i (maxoutR net_a x) 0) <->
                (forall j, j < n -> nth j (maxoutR net_b x) 0 <= nth i (maxoutR net_b x) 0))

With a hardmax Transformer on either side the models are ``Export.model``s and the theorems
``Pair.model_eps_sound`` / ``model_top1_sound`` (the Transformer's program is the library's
proved translation, ``Transformer.transformer_program``), the statement reading
``transformerR`` for it.  A tree over the free inputs of a box (``"inputs": "free"``: inputs
with equal bounds are fixed, ``kernel.maxout.on_free_inputs``) is checked by
``Pair.free_pair_ok``, which builds the networks of the free inputs in Coq, and proves the
statement over the box (``in_box lower upper x``, ``Pair.free_eps_sound`` /
``free_top1_sound``).
"""

from __future__ import annotations

import os

from ..kernel.maxout import MaxoutNetwork, on_free_inputs
from ..kernel.pair import FreeInputs
from .coq import _model, _pack, _q, _qlist, _Tables
from .coq_property import KINDS, _leaves, _ptree, report, sha256_module

HASHES = ("net_a", "net_b", "domain")


def _statement(
    d: int, n: int, epsilon, sa: str = "maxoutR", sb: str = "maxoutR", dom: str = "in_poly A b"
) -> str:
    """The theorem's statement; sa, sb: the semantics of net_a and net_b (maxoutR or
    transformerR); dom: the domain's predicate."""
    if epsilon is not None:
        return (
            f"forall x : list R, length x = {d}%nat -> {dom} x ->\n"
            f"  forall o, (o < {n})%nat ->\n"
            f"  Rabs (nth o ({sa} net_a x) 0 - nth o ({sb} net_b x) 0) <= Q2R epsilon"
        )
    return (
        f"forall x : list R, length x = {d}%nat -> {dom} x ->\n"
        f"  forall i, (i < {n})%nat ->\n"
        f"  ((forall j, (j < {n})%nat -> nth j ({sa} net_a x) 0 <= nth i ({sa} net_a x) 0) "
        "<->\n"
        f"   (forall j, (j < {n})%nat -> nth j ({sb} net_b x) 0 <= nth i ({sb} net_b x) 0))"
    )


def export_coq_pair(a, b, domain, epsilon, tree, hashes: dict, module: str = "NetPair") -> str:
    """The text of a Coq file proving the pair certificate's claim (``kernel.pair``'s
    ``check_pair_property`` arguments: Maxout networks or hardmax Transformers, a tree over
    all inputs; or two Maxout networks and a tree over the free inputs of a box,
    ``Pair.free_eps_sound`` / ``free_top1_sound``)."""
    free = isinstance(tree, FreeInputs)
    if free:  # the tree's rows: the box of the free inputs, as the kernel writes it
        P, tree = on_free_inputs(a, domain)[1].as_polyhedron(), tree.tree
    else:
        P = domain.as_polyhedron()
    n = a.out_dim
    t = _Tables(KINDS)
    root = _ptree(t, tree, len(P.b))
    d = a.input_dim
    what = "the same arg max sets" if epsilon is None else "at most epsilon apart"
    e = "None" if epsilon is None else "(Some epsilon)"
    (da, ta, tma, ca, sa), (db, tb, tmb, cb, sb) = _model(a, "net_a"), _model(b, "net_b")
    both_maxout = isinstance(a, MaxoutNetwork) and isinstance(b, MaxoutNetwork)
    dom, dom_args = "in_poly A b", "A b"
    if free:
        theorem = "free_top1_sound" if epsilon is None else "free_eps_sound"
        pair_ok, models = "free_pair_ok", "net_a net_b"
        dom, dom_args = "in_box lower upper", "lower upper"
    elif both_maxout:  # (the statements of maxout_eps_sound / maxout_top1_sound, as before)
        theorem = "maxout_top1_sound" if epsilon is None else "maxout_eps_sound"
        pair_ok, models = "maxout_pair_ok", "net_a net_b"
    else:  # Export.model: a Maxout network or a hardmax Transformer
        theorem = "model_top1_sound" if epsilon is None else "model_eps_sound"
        pair_ok, models = "model_pair_ok", f"({ca} net_a) ({cb} net_b)"
    eps = ""
    if epsilon is not None:
        eps = "(** The tolerance, in the sup norm *)\n\n"
        eps += f"Definition epsilon : Q := {_q(epsilon)}.\n\n"
    bound = "".join(f"     {k:<10} {hashes[k]}\n" for k in HASHES)
    if free:
        domain_text = (
            "(** The domain: the box lower <= x <= upper (an input whose bounds are equal is\n"
            "    fixed; the certificate's tree is over the others, Pair.free_pair_ok) *)\n\n"
            f"Definition lower : list Q := {_qlist(domain.lower)}.\n\n"
            f"Definition upper : list Q := {_qlist(domain.upper)}."
        )
    else:
        rows = ";\n   ".join(_qlist(r) for r in P.A)
        domain_text = (
            "(** The domain: the rows of A x <= b *)\n\n"
            f"Definition A : list (list Q) :=\n  [{rows}].\n\n"
            f"Definition b : list Q := {_qlist(P.b)}."
        )
    proof = f"{theorem} {models} {n}%nat {dom_args} {'' if epsilon is None else 'epsilon '}"
    proof += "certificate certificate_checks"
    if free:
        proof += " x Hx"
    sha = sha256_module(hashes, HASHES)
    return f"""(* {module}.v -- written by exactmax export-coq from a pair certificate.
   Check it with
     coqc -Q <exactmax>/proofs ExactMax -no-glob {module}.v
   The theorem at the end says that at every real input x of the polyhedron A x <= b the two
   networks' outputs are {what}.  Nothing else in this file needs to be read: the
   certificate (a split tree over the pair program x -> (net_a x, net_b x), with its choices,
   relaxed leaves and Farkas multipliers) is checked by the library's proved checker
   (proofs/Pair.v, proofs/Property.v, proofs/Relaxed.v), and the programs it speaks about are
   built from the models by the library's proved translations (proofs/Maxout.v,
   proofs/Transformer.v).
   Exported from the pair certificate about (sha256 of the canonical JSON of each network and
   of the domain, as check-cert prints them; also defined below, in Module Sha256):
{bound}   exactmax export-coq CERT.json -o THIS.v --existing confirms that this file
   states exactly that certificate's networks, domain, tolerance and tree. *)

From Coq Require Import QArith Reals List.
From Coq Require Uint63 Strings.String.
Import (notations) Uint63.   (* names, as Print Assumptions prints them, stay qualified *)
From ExactMax Require Import Checker Sound Build Maxout Transformer Export Relaxed Property Pair.
{sha}
Open Scope Q_scope.

Section Data.
Import ListNotations.     (* for the data; the array below is written [| .. |] *)

(** The models, as a user wrote them *)

{da}{chr(10) * 2 if da else ""}Definition net_a : {ta} :=
{tma}.

{db}{chr(10) * 2 if db else ""}Definition net_b : {tb} :=
{tmb}.

{domain_text}

End Data.

{eps}(** The certificate: a split tree over the pair program with its choices, relaxed leaves and
    Farkas multipliers, packed as machine integers (Property.unpack_ptrees reads it) *)

Definition packed : PArray.array Uint63.int :=
  {_pack(t.stream([1, root]))}.

Definition certificate : ptree := hd (PEmpty no_farkas) (unpack_ptrees packed).

Lemma certificate_checks : {pair_ok} {models} {n} {dom_args} {e} certificate = true.
Proof. vm_cast_no_check (eq_refl true). Qed.

(** The theorem *)

Local Open Scope R_scope.

Theorem net_pair :
  {_statement(d, n, epsilon, sa, sb, dom)}.
Proof.
  {"intros x _ Hx. " if free else ""}exact ({proof}).
Qed.

(** What the theorem rests on: coqc prints the axioms it uses (exactmax export-coq --check
    allows only the two Reals axioms and Coq's primitive integers and arrays) *)

Print Assumptions net_pair.
"""


def export_command(args) -> int:
    """``exactmax export-coq C.json -o P.v [--check] [--existing] [--json]`` for a pair
    certificate: read it (hashes recomputed), write the file, and with --check compare it with
    the export of the certificate, compile it against the library and check its axioms.
    Exit 0 when proved (or written), 1 when rejected."""
    from ..io.pair_certificate import load_pair_certificate

    a, b, domain, epsilon, tree, hashes = load_pair_certificate(args.cert)
    names = {"net_a": hashes["a"], "net_b": hashes["b"], "domain": hashes["domain"]}
    module = os.path.splitext(os.path.basename(args.output))[0]
    text = export_coq_pair(a, b, domain, epsilon, tree, names, module)
    about = {
        "kind": "pair",
        "property": "top1" if epsilon is None else "epsilon",
        "input_dim": a.input_dim,
        "leaves": _leaves(tree),
    }
    claim = (
        "the two models have the same arg max sets on the domain"
        if epsilon is None
        else f"|A(x) - B(x)|_inf <= {epsilon} on the domain"
    )
    summary = (
        f"  about: {about['property']}, {about['leaves']} leaves; A sha256 "
        f"{hashes['a'][:16]}..., B sha256 {hashes['b'][:16]}..., domain sha256 "
        f"{hashes['domain'][:16]}..."
    )
    sha = {"a": hashes["a"], "b": hashes["b"], "domain": hashes["domain"]}
    return report(args, text, about, sha, "net_pair", claim, summary)
