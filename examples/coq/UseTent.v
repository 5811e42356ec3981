(* UseTent.v: using an exported theorem in one's own development. *)
From Coq Require Import QArith Reals List Lra.
From ExactMax Require Import Sound Maxout Transformer.
Require Import TentEquiv.
Import ListNotations.
Open Scope R_scope.

(* On the square [-1, 1]^2 the compiled Transformer is the tent network, so anything proved
   about the readable network net_a holds for the Transformer. *)
Corollary tent_transformer : forall a b : R, -1 <= a <= 1 -> -1 <= b <= 1 ->
  transformerR net_b [a; b] = maxoutR net_a [a; b].
Proof.
  intros a b Ha Hb. apply net_equiv; [reflexivity|].
  cbn [in_box lower upper]. rewrite Q2R_m1, RMicromega.Q2R_1. tauto.
Qed.
