(* Export.v -- the statements that exported certificates instantiate.

   An exported file defines two networks and a tree, proves by computation that the tree
   checks, and applies one of the theorems below; each is proved once, here, for all networks. *)

From Coq Require Import QArith Reals List Bool Lia.
From ExactMax Require Import Checker Sound Build Maxout.
Import ListNotations.

(** Two Maxout networks of the same input dimension, and a certificate for their programs. *)
Definition maxout_certificate_ok (a b : maxout) (dom : list con) (t : tree) : bool :=
  Nat.eqb (mo_dim a) (mo_dim b) && check_cert (program_of_maxout a) (program_of_maxout b) dom t.

Theorem maxout_equiv : forall a b dom t, maxout_certificate_ok a b dom t = true ->
  forall x : list R, length x = mo_dim a -> satR dom x -> maxoutR b x = maxoutR a x.
Proof.
  intros a b dom t H x Hd Hx. unfold maxout_certificate_ok in H.
  apply andb_true_iff in H as [Hdim H]. apply Nat.eqb_eq in Hdim.
  rewrite <- (maxout_program_correct a x Hd), <- (maxout_program_correct b x ltac:(lia)).
  symmetry. exact (check_cert_sound _ _ dom t H x Hx).
Qed.
