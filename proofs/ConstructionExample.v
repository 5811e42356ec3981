(* ConstructionExample.v -- how a Coq user takes a Maxout network into their own development
   and uses the construction theorem (ConstructionSound.v) on it.

   The network: one layer of one unit max(x, -x) = |x| followed by the output map
   y = 2 h + 1, on the box [-1, 1].  Its Transformer is construct absnet gates, with one gate
   constant per layer; the gate condition over the box and the network's shape are decided by
   computation, and the theorem gives the Transformer's value at every real point of the
   box, here 2 |x| + 1. *)

From Coq Require Import QArith Qreals Reals Lra List.
From ExactMax Require Import Checker Sound Maxout Transformer Layerwise Construction ConstructionSound.
Import ListNotations.

Open Scope Q_scope.

Definition absnet : maxout :=
  {| mo_dim := 1;
     mo_layers := [[ [{| pw := [1]; pb := 0 |}; {| pw := [-1]; pb := 0 |}] ]];
     mo_out := Some ([[2]], [1]) |}.

(* every pre-activation (x or -x) lies in [-1, 1] on the box: C = 1 suffices *)
Definition gates : list Q := [1].

Lemma absnet_shaped : shaped absnet = true.
Proof. vm_compute. reflexivity. Qed.

Lemma absnet_gates : gates_ok_box absnet gates [-1] [1] = true.
Proof. vm_compute. reflexivity. Qed.

(* the Transformer (3 sub-layers, 2 tokens, d_m = 3 W + k = 5) is the network on the box *)
Theorem abs_transformer : forall x : list R, length x = 1%nat -> in_box [-1] [1] x ->
  transformerR (construct absnet gates) x = maxoutR absnet x.
Proof. exact (construct_box_sound absnet gates [-1] [1] absnet_shaped absnet_gates). Qed.

(* and what it computes, as a statement about real numbers *)
Corollary abs_transformer_value : forall r : R, (-1 <= r <= 1)%R ->
  transformerR (construct absnet gates) [r] = [(2 * Rabs r + 1)%R].
Proof.
  intros r Hr. rewrite abs_transformer; [| reflexivity |].
  2:{ cbn [in_box]. rewrite Q2R_m1, Q2R_1'. split; [lra | exact I]. }
  unfold maxoutR, affineR, layersR, layerR, pieceR. cbn.
  rewrite ?Q2R_m1, ?Q2R_1', ?RMicromega.Q2R_0. f_equal.
  replace (Q2R 2) with 2%R by (unfold Q2R; simpl; lra).
  unfold Rmax, Rabs. destruct (Rle_dec _ _), (Rcase_abs r); lra.
Qed.
