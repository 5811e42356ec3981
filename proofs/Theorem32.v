(* Theorem32.v -- Theorem 3.2 of Gu, Yang, Zhou (arXiv 2603.03084) as the paper states it: for
   every well-shaped Maxout network and every box, gate constants exist that make the
   constructed Transformer equal to the network on the box.  Here they are computed by a Gallina
   function (gates_box: per layer, the largest absolute value of a pre-activation over the exact
   interval image of the box), and the gate condition is proved for them once, for every
   network and box, so that

     theorem_3_2 : shaped net = true -> length lo = mo_dim net -> length hi = mo_dim net ->
       forall x, length x = mo_dim net -> in_box lo hi x ->
       transformerR (construct net (gates_box net lo hi)) x = maxoutR net x

   needs no per-instance check (ConstructionSound.construct_box_sound checks given constants by
   computation).  A bounded polyhedron given with a box that contains it: theorem_3_2_poly. *)

From Coq Require Import QArith Qabs Qreals Reals Lra Lia List Bool.
From ExactMax Require Import Checker Sound Build Maxout Transformer Layerwise Construction
  ConstructionSound.
Import ListNotations.
Open Scope Q_scope.

(* ------------------------------------------------------------------ *)
(** * The gate constants *)

(* the largest |pre-activation| of the layer over the box [lo, hi] *)
Definition layer_gate (L : list (list piece)) (lo hi : list Q) : Q :=
  qmaxl (map (fun p => qmax (Qabs (piece_lo p lo hi)) (Qabs (piece_hi p lo hi))) (concat L)).

(* the constants along the interval images B_0 = [lo, hi], B_{l+1} = image of B_l *)
Fixpoint gates_of (Ls : list (list (list piece))) (lo hi : list Q) : list Q :=
  match Ls with
  | [] => []
  | L :: Ls' => layer_gate L lo hi :: let '(lo', hi') := image_box L lo hi in gates_of Ls' lo' hi'
  end.

Definition gates_box (net : maxout) (lo hi : list Q) : list Q := gates_of (mo_layers net) lo hi.

(* ------------------------------------------------------------------ *)
(** * Maxima in Q *)

Lemma qmax_ge_l : forall a b, a <= qmax a b.
Proof.
  intros a b. unfold qmax. destruct (Qle_bool a b) eqn:E; [apply Qle_bool_iff; exact E|].
  apply Qle_refl.
Qed.

Lemma qmax_ge_r : forall a b, b <= qmax a b.
Proof.
  intros a b. unfold qmax. destruct (Qle_bool a b) eqn:E; [apply Qle_refl|].
  apply Qlt_le_weak. apply Qnot_le_lt. intros H. apply Qle_bool_iff in H. congruence.
Qed.

Lemma qmax_in : forall a b, qmax a b = a \/ qmax a b = b.
Proof. intros a b. unfold qmax. destruct (Qle_bool a b); auto. Qed.

Lemma fold_qmax_ge_init : forall l x, x <= fold_left qmax l x.
Proof.
  induction l as [|a l IH]; intros x; cbn [fold_left]; [apply Qle_refl|].
  eapply Qle_trans; [apply qmax_ge_l | apply IH].
Qed.

Lemma fold_qmax_ge : forall l x a, In a l -> a <= fold_left qmax l x.
Proof.
  induction l as [|b l IH]; intros x a H; [destruct H|]. cbn [fold_left].
  destruct H as [<-|H]; [|exact (IH _ a H)].
  eapply Qle_trans; [apply qmax_ge_r | apply fold_qmax_ge_init].
Qed.

Lemma qmaxl_ge : forall l a, In a l -> a <= qmaxl l.
Proof.
  intros [|b l] a H; [destruct H|]. cbn [qmaxl].
  destruct H as [<-|H]; [apply fold_qmax_ge_init | exact (fold_qmax_ge l b a H)].
Qed.

Lemma fold_qmax_in : forall l x, In (fold_left qmax l x) (x :: l).
Proof.
  induction l as [|a l IH]; intros x; cbn [fold_left]; [left; reflexivity|].
  destruct (IH (qmax x a)) as [E|E]; [|right; right; exact E].
  rewrite <- E. destruct (qmax_in x a) as [->| ->]; [left | right; left]; reflexivity.
Qed.

Lemma qmaxl_in : forall l, l <> [] -> In (qmaxl l) l.
Proof. intros [|b l] H; [congruence|]. apply fold_qmax_in. Qed.

Lemma Qle_bool_red_l : forall a b, a <= b -> Qle_bool (Qred a) b = true.
Proof. intros a b H. apply Qle_bool_iff. rewrite Qred_correct. exact H. Qed.

Lemma Qle_bool_red_r : forall a b, a <= b -> Qle_bool a (Qred b) = true.
Proof. intros a b H. apply Qle_bool_iff. rewrite Qred_correct. exact H. Qed.

(* ------------------------------------------------------------------ *)
(** * The gate condition holds for these constants *)

Lemma gate_bounds : forall L lo hi u p, In u L -> In p u ->
  - layer_gate L lo hi <= piece_lo p lo hi /\ piece_hi p lo hi <= layer_gate L lo hi.
Proof.
  intros L lo hi u p Hu Hp.
  assert (Hc : qmax (Qabs (piece_lo p lo hi)) (Qabs (piece_hi p lo hi)) <= layer_gate L lo hi).
  { apply qmaxl_ge.
    apply (in_map (fun p => qmax (Qabs (piece_lo p lo hi)) (Qabs (piece_hi p lo hi)))).
    apply in_concat. exists u. split; assumption. }
  pose proof (qmax_ge_l (Qabs (piece_lo p lo hi)) (Qabs (piece_hi p lo hi))) as H1.
  pose proof (qmax_ge_r (Qabs (piece_lo p lo hi)) (Qabs (piece_hi p lo hi))) as H2.
  pose proof (Qle_Qabs (piece_hi p lo hi)) as H3.
  pose proof (Qle_Qabs (- piece_lo p lo hi)) as H4. rewrite Qabs_opp in H4.
  split.
  - apply Qopp_le_compat in H4. rewrite Qopp_involutive in H4.
    apply (Qle_trans _ (- Qabs (piece_lo p lo hi))); [|exact H4].
    apply Qopp_le_compat. eapply Qle_trans; [exact H1 | exact Hc].
  - eapply Qle_trans; [exact H3|]. eapply Qle_trans; [exact H2 | exact Hc].
Qed.

Lemma layer_gates_ok_gate : forall L lo hi, layer_gates_ok L (layer_gate L lo hi) lo hi = true.
Proof.
  intros L lo hi. unfold layer_gates_ok. apply forallb_forall. intros u Hu.
  apply forallb_forall. intros p Hp. destruct (gate_bounds L lo hi u p Hu Hp) as [H1 H2].
  apply andb_true_iff. split; apply Qle_bool_iff; assumption.
Qed.

(* units_ok holds for the image box, every unit having a piece *)
Lemma units_ok_image : forall L0 L lo hi, (forall u, In u L -> u <> []) -> incl L L0 ->
  units_ok L (layer_gate L0 lo hi) lo hi
    (map (fun u => Qred (qmaxl (map (fun p => piece_lo p lo hi) u))) L)
    (map (fun u => Qred (qmaxl (map (fun p => piece_hi p lo hi) u))) L) = true.
Proof.
  intros L0 L lo hi. induction L as [|u L IH]; intros Hne Hincl; [reflexivity|].
  cbn [units_ok map]. rewrite IH.
  2: { intros u' Hu'. apply Hne. right. exact Hu'. }
  2: { intros u' Hu'. apply Hincl. right. exact Hu'. }
  rewrite andb_true_r. assert (Hu : In u L0) by (apply Hincl; left; reflexivity).

  apply andb_true_iff. split; [apply andb_true_iff; split|].
  - apply forallb_forall. intros r Hr. apply in_map_iff in Hr as [p [<- Hp]]. cbn [fst snd].
    destruct (gate_bounds L0 lo hi u p Hu Hp) as [H1 H2].
    apply andb_true_iff. split; apply Qle_bool_iff; assumption.
  - apply existsb_exists.
    assert (Hin : In (qmaxl (map (fun p => piece_lo p lo hi) u)) (map (fun p => piece_lo p lo hi) u)).
    { apply qmaxl_in. intros E. apply (Hne u (or_introl eq_refl)). destruct u; [reflexivity|discriminate]. }
    apply in_map_iff in Hin as [p [Ep Hp]].
    exists (piece_lo p lo hi, piece_hi p lo hi).
    split; [apply (in_map (fun p => (piece_lo p lo hi, piece_hi p lo hi))); exact Hp|]. cbn [fst].
    apply Qle_bool_red_l. rewrite Ep. apply Qle_refl.
  - apply forallb_forall. intros r Hr. apply in_map_iff in Hr as [p [<- Hp]]. cbn [snd].
    apply Qle_bool_red_r. apply qmaxl_ge. apply (in_map (fun p => piece_hi p lo hi)). exact Hp.
Qed.

Lemma gates_boxes_of : forall Ls lo hi, (forall L u, In L Ls -> In u L -> u <> []) ->
  gates_boxes Ls (gates_of Ls lo hi) (interval_boxes Ls lo hi) = true.
Proof.
  induction Ls as [|L Ls IH]; intros lo hi Hne; [reflexivity|].
  cbn [gates_of interval_boxes]. unfold image_box.
  destruct Ls as [|L' Ls'].
  - cbn [gates_boxes hd]. apply layer_gates_ok_gate.
  - cbn [interval_boxes gates_boxes hd tl]. apply andb_true_iff. split.
    + apply units_ok_image; [|intros u Hu; exact Hu]. intros u Hu. exact (Hne L u (or_introl eq_refl) Hu).
    + apply IH. intros L0 u HL Hu. exact (Hne L0 u (or_intror HL) Hu).
Qed.

Lemma forall2b_refl : forall l, forall2b Qle_bool l l = true.
Proof.
  induction l as [|a l IH]; [reflexivity|]. cbn [forall2b]. rewrite IH, andb_true_r.
  apply Qle_bool_iff. apply Qle_refl.
Qed.

Lemma layers_shaped_units : forall n Ls, layers_shaped n Ls = true ->
  forall L u, In L Ls -> In u L -> u <> [].
Proof.
  intros n Ls. revert n. induction Ls as [|L Ls IH]; intros n H L0 u HL Hu; [destruct HL|].
  cbn [layers_shaped] in H. apply andb_true_iff in H as [H1 H2].
  destruct HL as [<-|HL]; [|exact (IH _ H2 L0 u HL Hu)].
  rewrite forallb_forall in H1. specialize (H1 u Hu). apply andb_true_iff in H1 as [H1 _].
  intros ->. discriminate.
Qed.

(** The gate condition, for every well-shaped network and every box of its input dimension. *)
Theorem gates_box_ok : forall net lo hi, shaped net = true ->
  length lo = mo_dim net -> length hi = mo_dim net ->
  gates_ok_box net (gates_box net lo hi) lo hi = true.
Proof.
  intros net lo hi Hs Hlo Hhi. unfold gates_ok_box, gates_ok, gates_box.
  assert (Hne : forall L u, In L (mo_layers net) -> In u L -> u <> []).
  { unfold shaped in Hs. apply andb_true_iff in Hs as [Hs _]. apply andb_true_iff in Hs as [_ Hs].
    exact (layers_shaped_units _ _ Hs). }
  destruct (mo_layers net) as [|L Ls] eqn:EL.
  - unfold shaped in Hs. rewrite EL in Hs. discriminate.
  - cbn [interval_boxes]. apply andb_true_iff. split.
    + unfold b0_ok. rewrite Hlo, Hhi, !Nat.eqb_refl. cbn [andb]. unfold box_in.
      rewrite !forall2b_refl. reflexivity.
    + apply (gates_boxes_of (L :: Ls) lo hi). exact Hne.
Qed.

(* ------------------------------------------------------------------ *)
(** * Theorem 3.2 *)

Local Open Scope R_scope.

(** Theorem 3.2: for every well-shaped Maxout network and every box [lo, hi] of its input
    dimension, the Transformer constructed with the gate constants gates_box net lo hi computes
    the network at every real point of the box. *)
Theorem theorem_3_2 : forall net lo hi, shaped net = true ->
  length lo = mo_dim net -> length hi = mo_dim net ->
  forall x, length x = mo_dim net -> in_box lo hi x ->
  transformerR (construct net (gates_box net lo hi)) x = maxoutR net x.
Proof.
  intros net lo hi Hs Hlo Hhi x Hd Hx.
  exact (construct_box_sound net _ lo hi Hs (gates_box_ok net lo hi Hs Hlo Hhi) x Hd Hx).
Qed.

(** A bounded polyhedron, given with a box that contains it: the same constants. *)
Theorem theorem_3_2_poly : forall net (A : list (list Q)) (b lo hi : list Q), shaped net = true ->
  length lo = mo_dim net -> length hi = mo_dim net ->
  (forall x, length x = mo_dim net -> in_poly A b x -> in_box lo hi x) ->
  forall x, length x = mo_dim net -> in_poly A b x ->
  transformerR (construct net (gates_box net lo hi)) x = maxoutR net x.
Proof.
  intros net A b lo hi Hs Hlo Hhi Hin x Hd Hx.
  exact (theorem_3_2 net lo hi Hs Hlo Hhi x Hd (Hin x Hd Hx)).
Qed.
