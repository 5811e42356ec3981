(* Export.v -- the statements that exported certificates instantiate.

   An exported file defines two models readably and a split tree, proves by computation that
   the tree checks against the programs the library's translations build from the models, and
   applies the theorem below, proved once here for all models. *)

From Coq Require Import QArith Reals List Bool Lia.
From ExactMax Require Import Checker Sound Build Maxout Transformer.
Import ListNotations.

Inductive model := MMaxout (n : maxout) | MTransformer (t : transformer).

Definition model_dim (m : model) : nat :=
  match m with MMaxout n => mo_dim n | MTransformer t => tf_dim t end.

Definition model_program (m : model) : option prog :=
  match m with MMaxout n => Some (program_of_maxout n) | MTransformer t => transformer_program t end.

(** What a model computes at x. *)
Definition modelR (m : model) (x : list R) : list R :=
  match m with MMaxout n => maxoutR n x | MTransformer t => transformerR t x end.

Definition certificate_ok (a b : model) (dom : list con) (t : tree) : bool :=
  Nat.eqb (model_dim a) (model_dim b) &&
  match model_program a, model_program b with
  | Some f, Some g => check_cert f g dom t
  | _, _ => false
  end.

Lemma model_program_correct : forall m p x, model_program m = Some p -> length x = model_dim m ->
  outsR p x = modelR m x.
Proof.
  intros [n|t] p x Hp Hd; cbn in *.
  - inversion Hp; subst. exact (maxout_program_correct n x Hd).
  - exact (transformer_program_correct t p x Hp Hd).
Qed.

(** Both models well-shaped (Maxout.maxout_shaped, Transformer.transformer_shaped) and of the
    same input dimension: a computable check that exported files prove by computation, so the
    truncating list functions of the semantics never truncate. *)
Definition model_shaped (m : model) : bool :=
  match m with MMaxout n => maxout_shaped n | MTransformer t => transformer_shaped t end.

Definition well_shaped (a b : model) : bool :=
  Nat.eqb (model_dim a) (model_dim b) && model_shaped a && model_shaped b.

(** A certificate that checks proves that the two (well-shaped) models agree at every real
    point of the domain (of their common input dimension). *)
Theorem equiv_sound : forall a b dom t, well_shaped a b = true -> certificate_ok a b dom t = true ->
  forall x : list R, length x = model_dim a -> satR dom x -> modelR b x = modelR a x.
Proof.
  intros a b dom t _ H x Hd Hx. unfold certificate_ok in H.
  apply andb_true_iff in H as [Hdim H]. apply Nat.eqb_eq in Hdim.
  destruct (model_program a) as [f|] eqn:Ef; [|discriminate].
  destruct (model_program b) as [g|] eqn:Eg; [|discriminate].
  rewrite <- (model_program_correct a f x Ef Hd), <- (model_program_correct b g x Eg ltac:(lia)).
  symmetry. exact (check_cert_sound f g dom t H x Hx).
Qed.

(** What exported files apply: the domain stated readably, a box (lower <= x <= upper) or a
    polyhedron (A x <= b), well-shaped with the models. *)
Theorem equiv_box_sound : forall a b lo hi t,
  well_shaped a b && box_shaped (model_dim a) lo hi = true ->
  certificate_ok a b (rows_of_box lo hi) t = true ->
  forall x : list R, length x = model_dim a -> in_box lo hi x -> modelR b x = modelR a x.
Proof.
  intros a b lo hi t S H x Hd Hx. apply andb_true_iff in S as [S _].
  exact (equiv_sound a b _ t S H x Hd (box_rows_sound lo hi x Hx)).
Qed.

Theorem equiv_poly_sound : forall a b A c t,
  well_shaped a b && poly_shaped (model_dim a) A c = true ->
  certificate_ok a b (rows_of_poly A c) t = true ->
  forall x : list R, length x = model_dim a -> in_poly A c x -> modelR b x = modelR a x.
Proof.
  intros a b A c t S H x Hd Hx. apply andb_true_iff in S as [S _].
  exact (equiv_sound a b _ t S H x Hd (poly_rows_sound A c x Hx)).
Qed.
