"""Export a layer correspondence (what ``exactmax equiv A B --cert C.json`` writes by default for
two Maxout networks related layer by layer, ``kernel.correspondence``) as a Coq file checked
against ``proofs/``.

The file defines both networks readably (as ``export.coq`` writes them) and the maps
(M_l, m_l), l = 1..D, from B's layer-l values to A's (``Correspondence.amap``: M_l by its rows,
m_l), and proves, by one reflective call of ``Correspondence.corr_ok`` and the library's
``Correspondence.corr_sound``:

    forall x : list R, length x = d -> maxoutR net_a x = maxoutR net_b x

at every real input, whatever the certificate's domain (a correspondence proves A = B on all
of Q^d, and Coq's theorem on all of R^d).  The exporter writes what it is given; rejecting a
bad certificate is Coq's job.
"""

from __future__ import annotations

import os

from ..kernel.correspondence import Correspondence
from ..kernel.maxout import MaxoutNetwork
from .coq import _maxout_term, _qlist
from .coq_property import report, sha256_module

HASHES = ("net_a", "net_b")


def _maps_term(cert: Correspondence) -> str:
    """The maps as a ``list amap``: per layer, (M_l's rows, m_l)."""
    maps = []
    for l, R in enumerate(cert.maps):
        rows = ";\n    ".join(_qlist(r) for r in R.W)
        maps.append(f"(* layer {l + 1} *)\n  ([{rows}],\n   {_qlist(R.b)})")
    return "[\n  " + ";\n  ".join(maps) + "]"


def export_coq_correspondence(
    a: MaxoutNetwork, b: MaxoutNetwork, cert: Correspondence, hashes: dict, module="NetCorr"
) -> str:
    """The text of a Coq file proving A = B at every real input from the correspondence
    ``cert`` (``kernel.correspondence.check_correspondence``'s arguments)."""
    d = a.input_dim
    bound = "".join(f"     {k:<7} {hashes[k]}\n" for k in HASHES)
    sha = sha256_module(hashes, HASHES)
    return f"""(* {module}.v -- written by exactmax export-coq from a layer correspondence.
   Check it with
     coqc -Q <exactmax>/proofs ExactMax -no-glob {module}.v
   The theorem at the end says that the two networks are equal at every real input x.
   Nothing else in this file needs to be read: the certificate (affine maps from B's layer
   values to A's, one per layer) is checked by the library's proved checker
   (proofs/Correspondence.v), whose soundness is stated over the networks' meaning over R
   (proofs/Maxout.v).
   Exported from the correspondence about (sha256 of the canonical JSON of each network, as
   check-cert prints them; also defined below, in Module Sha256; the certificate's domain is
   not needed: the theorem holds everywhere):
{bound}   exactmax export-coq CERT.json -o THIS.v --existing confirms that this file
   states exactly that certificate's networks and maps. *)

From Coq Require Import QArith Reals List.
From Coq Require Strings.String.
From ExactMax Require Import Checker Sound Build Maxout Correspondence.
{sha}
Open Scope Q_scope.

Section Data.
Import ListNotations.

(** The networks, as a user wrote them *)

Definition net_a : maxout :=
{_maxout_term(a)}.

Definition net_b : maxout :=
{_maxout_term(b)}.

(** The certificate: per layer l, the map (M_l, m_l) with h^A_l = M_l h^B_l + m_l *)

Definition maps : list amap :=
  {_maps_term(cert)}.

End Data.

Lemma certificate_checks : corr_ok net_a net_b maps = true.
Proof. vm_cast_no_check (eq_refl true). Qed.

(** The theorem *)

Local Open Scope R_scope.

Theorem net_corr :
  forall x : list R, length x = {d}%nat -> maxoutR net_a x = maxoutR net_b x.
Proof.
  exact (corr_sound net_a net_b maps certificate_checks).
Qed.

(** What the theorem rests on: coqc prints the axioms it uses (exactmax export-coq --check
    allows only the two Reals axioms and Coq's primitive integers and arrays) *)

Print Assumptions net_corr.
"""


def export_command(args, a, b, cert: Correspondence, hashes: dict) -> int:
    """``exactmax export-coq C.json -o P.v [--check] [--existing] [--json]`` for a layer
    correspondence (read by ``io.certificates.load_certificate``, hashes recomputed): write
    the file, and with --check compare it with the export of the certificate, compile it
    against the library and check its axioms.  Exit 0 when proved (or written), 1 when
    rejected."""
    from ..io import InputError

    if not (isinstance(a, MaxoutNetwork) and isinstance(b, MaxoutNetwork)):
        raise InputError(args.cert, "models", "a layer correspondence needs two Maxout networks")
    module = os.path.splitext(os.path.basename(args.output))[0]
    names = {"net_a": hashes["a"], "net_b": hashes["b"]}
    text = export_coq_correspondence(a, b, cert, names, module)
    about = {
        "kind": "correspondence",
        "input_dim": a.input_dim,
        "depth": len(a.layers),
        "units": sum(layer.width for layer in a.layers),
    }
    summary = (
        f"  about: {about['depth']} layer(s), {about['units']} units of A; A sha256 "
        f"{hashes['a'][:16]}..., B sha256 {hashes['b'][:16]}..."
    )
    sha = {"a": hashes["a"], "b": hashes["b"], "domain": hashes["domain"]}
    claim = "A(x) = B(x) at every real x"
    return report(args, text, about, sha, "net_corr", claim, summary)
