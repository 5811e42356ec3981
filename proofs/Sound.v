(* Sound.v -- the semantics of programs over the REAL numbers, and the soundness of the
   checker of Checker.v (which computes over Q):

     check_cert_sound : check_cert f g dom t = true ->
       forall x : list R, satR dom x -> outsR f x = outsR g x.

   Semantics: Max is the maximum (0 for no arguments), Hardmax the mean of the values whose
   score is maximal (ties averaged, decided by real equality), reads of missing nodes are 0.
   Only the standard axioms of Coq's Reals are used. *)

From Coq Require Import QArith Qreals Reals Lra Lia List Bool.
From ExactMax Require Import Checker.
Import ListNotations.
Local Open Scope R_scope.

(* ------------------------------------------------------------------ *)
(** * Affine maps over R *)

Fixpoint dotR (u : list Q) (x : list R) : R :=
  match u, x with
  | a :: u', b :: x' => Q2R a * b + dotR u' x'
  | _, _ => 0
  end.

Definition evalR (a : aff) (x : list R) : R := dotR (fst a) x + Q2R (snd a).

(* a sparse combination sum_t c_t * v_(i_t); used for inputs and for earlier nodes *)
Definition sumsp (ts : list (nat * Q)) (v : list R) : R :=
  fold_right (fun t acc => Q2R (snd t) * nth (fst t) v 0 + acc) 0 ts.

Lemma Q2R_red : forall q, Q2R (Qred q) = Q2R q.
Proof. intros. apply Qeq_eqR. apply Qred_correct. Qed.

Lemma Q2R_m1 : Q2R (-1) = -1.
Proof. unfold Q2R; simpl; lra. Qed.

Lemma qeqb_Qeq_bool : forall a b, qeqb a b = Qeq_bool a b.
Proof.
  intros [m [p|p|]] [n [q|q|]]; unfold qeqb; cbn [Qnum Qden]; try reflexivity.
  unfold Qeq_bool, Zeq_bool; cbn [Qnum Qden]. rewrite !Z.mul_1_r, Z.eqb_compare. reflexivity.
Qed.

Lemma qleb_Qle_bool : forall a b, qleb a b = Qle_bool a b.
Proof.
  intros [m [p|p|]] [n [q|q|]]; unfold qleb; cbn [Qnum Qden]; try reflexivity.
  unfold Qle_bool; cbn [Qnum Qden]. rewrite !Z.mul_1_r. reflexivity.
Qed.

Lemma qeqb_R : forall a b, qeqb a b = true -> Q2R a = Q2R b.
Proof. intros a b H. rewrite qeqb_Qeq_bool in H. apply Qeq_eqR, Qeq_bool_eq, H. Qed.

Lemma pow2_exp_spec : forall p e, pow2_exp p = Some e -> (0 <= e)%Z /\ Zpos p = (2 ^ e)%Z.
Proof.
  induction p as [p IH|p IH|]; intros e H; cbn [pow2_exp] in H.
  - discriminate.
  - destruct (pow2_exp p) as [e'|] eqn:E; [|discriminate]. inversion H; subst.
    destruct (IH e' eq_refl) as [H1 H2]. split; [lia|].
    rewrite Pos2Z.inj_xO, H2, Z.pow_succ_r by lia. ring.
  - inversion H. split; [lia|reflexivity].
Qed.

Lemma qadd_dyadic_ok : forall a b, (qadd_dyadic a b == a + b)%Q.
Proof.
  intros [m p] [n q]. unfold qadd_dyadic; cbn [Qnum Qden].
  destruct (pow2_exp p) as [j|] eqn:Hp; [|apply Qred_correct].
  destruct (pow2_exp q) as [k|] eqn:Hq; [|apply Qred_correct].
  apply pow2_exp_spec in Hp as [Hj Hp]. apply pow2_exp_spec in Hq as [Hk Hq].
  unfold Qeq, Qplus; cbn [Qnum Qden]. rewrite !Pos2Z.inj_mul, Hp, Hq.
  destruct (Z.leb_spec j k) as [H|H]; cbn [Qnum Qden]; rewrite ?Hp, ?Hq.
  - rewrite Z.shiftl_mul_pow2 by lia.
    replace (2 ^ k)%Z with (2 ^ (k - j) * 2 ^ j)%Z
      by (rewrite <- Z.pow_add_r by lia; f_equal; lia).
    ring.
  - rewrite Z.shiftl_mul_pow2 by lia.
    replace (2 ^ j)%Z with (2 ^ (j - k) * 2 ^ k)%Z
      by (rewrite <- Z.pow_add_r by lia; f_equal; lia).
    ring.
Qed.

Lemma Q2R_qadd_nz : forall a b, Q2R (qadd_nz a b) = Q2R a + Q2R b.
Proof.
  intros a b. rewrite <- Q2R_plus. apply Qeq_eqR.
  destruct a as [m [p|p|]], b as [n [q|q|]]; unfold qadd_nz; cbn [Qnum Qden];
    try apply qadd_dyadic_ok.
  unfold Qeq, Qplus; cbn [Qnum Qden]. cbn. lia.
Qed.

Lemma Q2R_num0 : forall a, Qnum a = 0%Z -> Q2R a = 0.
Proof. intros [m p] H. cbn in H. subst m. unfold Q2R. cbn [Qnum Qden]. rewrite Rmult_0_l. reflexivity. Qed.

Lemma Q2R_qadd : forall a b, Q2R (qadd a b) = Q2R a + Q2R b.
Proof.
  intros a b. unfold qadd.
  destruct (Z.eqb_spec (Qnum a) 0) as [Ha|Ha]; [rewrite (Q2R_num0 a Ha); lra|].
  destruct (Z.eqb_spec (Qnum b) 0) as [Hb|Hb]; [rewrite (Q2R_num0 b Hb); lra|].
  apply Q2R_qadd_nz.
Qed.

Lemma Q2R_qmul : forall c a, Q2R (qmul c a) = Q2R c * Q2R a.
Proof.
  intros c a. rewrite <- Q2R_mult. apply Qeq_eqR.
  unfold qmul, Qeq, Qmult; cbn [Qnum Qden]. rewrite (Z.mul_comm (Qnum a)). reflexivity.
Qed.

Lemma dotR_vadd : forall u v x, dotR (vadd u v) x = dotR u x + dotR v x.
Proof.
  induction u as [|a u IH]; intros v x.
  - cbn [vadd dotR]. lra.
  - destruct v as [|b v].
    + cbn [vadd dotR]. destruct x; cbn [dotR]; lra.
    + destruct x as [|c x]; cbn [vadd dotR]; [lra|].
      rewrite Q2R_qadd, IH. lra.
Qed.

Lemma Q2R_qscale : forall c a, Q2R (qscale c a) = Q2R c * Q2R a.
Proof.
  intros c a. unfold qscale.
  destruct (Z.eqb_spec (Qnum a) 0) as [Ha|Ha].
  { rewrite (Q2R_num0 a Ha), RMicromega.Q2R_0. lra. }
  destruct (pow2_exp (Qden c)), (pow2_exp (Qden a));
    rewrite ?Q2R_qmul, ?Q2R_red, ?Q2R_mult; reflexivity.
Qed.

Lemma dotR_vscale : forall c u x, dotR (vscale c u) x = Q2R c * dotR u x.
Proof.
  unfold vscale. induction u as [|a u IH]; intros x; cbn [map dotR].
  - lra.
  - destruct x as [|b x]; cbn [dotR]; [lra|].
    rewrite Q2R_qscale, IH. lra.
Qed.

Lemma dotR_vadd_raw : forall u v x, dotR (vadd_raw u v) x = dotR u x + dotR v x.
Proof.
  induction u as [|a u IH]; intros v x.
  - cbn [vadd_raw dotR]. lra.
  - destruct v as [|b v].
    + cbn [vadd_raw dotR]. destruct x; cbn [dotR]; lra.
    + destruct x as [|c x]; cbn [vadd_raw dotR]; [lra|].
      rewrite Q2R_qadd, IH. lra.
Qed.

Lemma dotR_vscale_raw : forall c u x, dotR (vscale_raw c u) x = Q2R c * dotR u x.
Proof.
  unfold vscale_raw. induction u as [|a u IH]; intros x; cbn [map dotR].
  - lra.
  - destruct x as [|b x]; cbn [dotR]; [lra|].
    rewrite Q2R_qmul, IH. lra.
Qed.

Lemma dotR_vaxpy_raw : forall y h acc x,
  dotR (vaxpy_raw y h acc) x = Q2R y * dotR h x + dotR acc x.
Proof.
  induction h as [|a h IH]; intros acc x; cbn [vaxpy_raw dotR].
  - lra.
  - destruct acc as [|b acc]; destruct x as [|c x]; cbn [dotR]; try lra.
    + rewrite Q2R_qmul, IH. cbn [dotR]. lra.
    + rewrite IH. destruct a as [[|n|n] d]; cbn [Qnum];
        rewrite ?Q2R_qadd, ?Q2R_qmul; try lra.
      replace (Q2R (0 # d)) with 0 by (unfold Q2R; cbn [Qnum]; lra). lra.
Qed.

Lemma vzero_dotR : forall u x, vzero u = true -> dotR u x = 0.
Proof.
  unfold vzero. induction u as [|a u IH]; intros x H; cbn [dotR].
  - reflexivity.
  - destruct x as [|b x]; [reflexivity|].
    cbn [forallb] in H. apply andb_true_iff in H as [H1 H2].
    apply qeqb_R in H1. rewrite H1, RMicromega.Q2R_0, IH by exact H2. lra.
Qed.

Lemma veqb_dotR : forall u v x, veqb u v = true -> dotR u x = dotR v x.
Proof.
  induction u as [|a u IH]; intros v x H.
  - cbn [veqb] in H. rewrite (vzero_dotR v x H). reflexivity.
  - destruct v as [|b v].
    + cbn [veqb] in H. rewrite (vzero_dotR (a :: u) x H). destruct x; reflexivity.
    + cbn [veqb] in H. destruct (qeqb a b) eqn:E; [|discriminate].
      destruct x as [|c x]; [reflexivity|]. cbn [dotR].
      rewrite (qeqb_R a b E), (IH v x H). reflexivity.
Qed.

Lemma evalR_aadd : forall a b x, evalR (aadd a b) x = evalR a x + evalR b x.
Proof. intros [u c] [v d] x. unfold evalR, aadd; cbn [fst snd]. rewrite dotR_vadd, Q2R_qadd. lra. Qed.

Lemma evalR_ascale : forall k a x, evalR (ascale k a) x = Q2R k * evalR a x.
Proof. intros k [u c] x. unfold evalR, ascale; cbn [fst snd]. rewrite dotR_vscale, Q2R_qscale. lra. Qed.

Lemma evalR_aadd_raw : forall a b x, evalR (aadd_raw a b) x = evalR a x + evalR b x.
Proof. intros [u c] [v d] x. unfold evalR, aadd_raw; cbn [fst snd]. rewrite dotR_vadd_raw, Q2R_qadd. lra. Qed.

Lemma evalR_ascale_raw : forall k a x, evalR (ascale_raw k a) x = Q2R k * evalR a x.
Proof. intros k [u c] x. unfold evalR, ascale_raw; cbn [fst snd]. rewrite dotR_vscale_raw, Q2R_qmul. lra. Qed.

Lemma evalR_aneg : forall a x, evalR (aneg a) x = - evalR a x.
Proof.
  intros [u c] x. unfold evalR, aneg; cbn [fst snd]. rewrite Q2R_opp.
  enough (E : dotR (map Qopp u) x = - dotR u x) by lra.
  revert x. induction u as [|a u IH]; intros [|b x]; cbn [map dotR]; try lra.
  rewrite Q2R_opp, IH. lra.
Qed.

Lemma evalR_aaxpy_raw : forall y h acc x,
  evalR (aaxpy_raw y h acc) x = Q2R y * evalR h x + evalR acc x.
Proof.
  intros y [u c] [v d] x. unfold evalR, aaxpy_raw; cbn [fst snd].
  rewrite dotR_vaxpy_raw, Q2R_qadd, Q2R_qmul. lra.
Qed.

Lemma evalR_asub : forall a b x, evalR (asub a b) x = evalR a x - evalR b x.
Proof. intros. unfold asub. rewrite evalR_aadd, evalR_aneg. lra. Qed.

Lemma evalR_azero : forall x, evalR azero x = 0.
Proof. intros. unfold evalR, azero. cbn [fst snd dotR]. rewrite RMicromega.Q2R_0. lra. Qed.

Lemma evalR_const : forall a x, vzero (fst a) = true -> evalR a x = Q2R (snd a).
Proof. intros [u c] x H. unfold evalR; cbn [fst snd] in *. rewrite vzero_dotR by exact H. lra. Qed.

Lemma aeqb_soundR : forall a b x, aeqb a b = true -> evalR a x = evalR b x.
Proof.
  intros [u c] [v d] x H. unfold aeqb in H; cbn [fst snd] in H.
  destruct (qeqb c d) eqn:E; [|discriminate].
  unfold evalR; cbn [fst snd]. rewrite (veqb_dotR u v x H), (qeqb_R c d E). reflexivity.
Qed.

Lemma dotR_add_at : forall i v u x, dotR (add_at i v u) x = dotR u x + Q2R v * nth i x 0.
Proof.
  induction i as [|i IH]; intros v [|a u] [|b x]; cbn [add_at dotR nth]; try lra.
  - destruct a as [[|n|n] d]; cbn [Qnum]; cbn [dotR].
    + unfold Q2R at 2. cbn [Qnum]. rewrite Rmult_0_l, Rmult_0_l. lra.
    + rewrite Q2R_qadd. lra.
    + rewrite Q2R_qadd. lra.
  - rewrite IH. cbn [dotR]. rewrite RMicromega.Q2R_0. destruct x; cbn [dotR nth]; lra.
  - rewrite IH. lra.
Qed.

Lemma evalR_sparse_aff : forall xs c x, evalR (sparse_aff xs c) x = sumsp xs x + Q2R c.
Proof.
  intros xs c x. unfold evalR, sparse_aff; cbn [fst snd]. f_equal.
  induction xs as [|[i v] xs IH]; cbn [fold_right sumsp dotR fst snd]; [reflexivity|].
  rewrite dotR_add_at, IH. fold (sumsp xs x). lra.
Qed.

(* ------------------------------------------------------------------ *)
(** * Constraints *)

Definition sat_conR (c : con) (x : list R) : Prop :=
  if snd c then 0 < evalR (fst c) x else 0 <= evalR (fst c) x.

Definition satR (H : list con) (x : list R) : Prop := Forall (fun c => sat_conR c x) H.

Lemma Forall_nth_error : forall {A} (P : A -> Prop) l i a,
  Forall P l -> nth_error l i = Some a -> P a.
Proof.
  intros A P l i a HF. revert i. induction HF as [|b l Hb HF IH]; intros i Hi.
  - destruct i; discriminate.
  - destruct i; simpl in Hi; [inversion Hi; subst; exact Hb | exact (IH _ Hi)].
Qed.

Lemma Qle_bool_R : forall a b, Qle_bool a b = true -> Q2R a <= Q2R b.
Proof. intros. apply Qle_Rle, Qle_bool_imp_le. assumption. Qed.

Lemma Qnle_bool_R : forall a b, Qle_bool a b = false -> Q2R b < Q2R a.
Proof.
  intros a b H. apply Qlt_Rlt. destruct (Qlt_le_dec b a) as [Hl|Hl]; [exact Hl|].
  apply Qle_bool_iff in Hl. congruence.
Qed.

Lemma comb_soundR : forall H x, satR H x -> forall w c st, comb H w = Some (c, st) ->
  0 <= evalR c x /\ (st = true -> 0 < evalR c x).
Proof.
  intros H x HS w. induction w as [|[i y] w IH]; intros c st Hc; simpl in Hc.
  - inversion Hc; subst. rewrite evalR_azero. split; [lra | discriminate].
  - destruct (nth_error H i) as [[h s]|] eqn:Ei; [|discriminate].
    destruct (comb H w) as [[c' st']|] eqn:Ec; [|discriminate].
    destruct (qleb 0 y) eqn:Ey; [|discriminate].
    inversion Hc; subst; clear Hc.
    rewrite qleb_Qle_bool in Ey. apply Qle_bool_R in Ey. rewrite RMicromega.Q2R_0 in Ey.
    pose proof (Forall_nth_error _ _ _ _ HS Ei) as Hh. unfold sat_conR in Hh; simpl in Hh.
    assert (Hh0 : 0 <= evalR h x) by (destruct s; lra).
    destruct (IH _ _ eq_refl) as [Hc0 Hcs].
    rewrite evalR_aaxpy_raw.
    assert (Hyh : 0 <= Q2R y * evalR h x) by (apply Rmult_le_pos; assumption).
    split; [lra|].
    intros Hst. apply orb_true_iff in Hst as [Hst|Hst].
    + specialize (Hcs Hst). lra.
    + apply andb_true_iff in Hst as [Hs Hy]. subst s.
      apply negb_true_iff, Qnle_bool_R in Hy. rewrite RMicromega.Q2R_0 in Hy.
      assert (0 < Q2R y * evalR h x) by (apply Rmult_lt_0_compat; assumption). lra.
Qed.

(* Dividing by a positive scale keeps the sign: the step from D g(x) >= c(x) to g(x) >= 0 shared
   by the Farkas tests over Q (entails) and in words (Dyadic.v). *)
Lemma scale_pos_R : forall d, 0 < d ->
  (forall v, 0 <= d * v -> 0 <= v) /\ (forall v, 0 < d * v -> 0 < v).
Proof.
  intros d Hd. split; intros v Hv.
  - destruct (Rle_or_lt 0 v) as [Hl|Hl]; [exact Hl|].
    pose proof (Rmult_lt_compat_l d v 0 Hd Hl). lra.
  - destruct (Rlt_or_le 0 v) as [Hl|Hl]; [exact Hl|].
    pose proof (Rmult_le_compat_l d v 0 (Rlt_le _ _ Hd) Hl). lra.
Qed.

Lemma entails_soundR : forall H g strict w x, satR H x -> entails H g strict w = true ->
  0 <= evalR g x /\ (strict = true -> 0 < evalR g x).
Proof.
  intros H g strict [D w] x HS He. unfold entails in He.
  destruct (qleb D 0) eqn:HD; [discriminate|].
  rewrite qleb_Qle_bool in HD. apply Qnle_bool_R in HD. rewrite RMicromega.Q2R_0 in HD.
  destruct (comb H w) as [[c st]|] eqn:Ec; [|discriminate].
  destruct (comb_soundR H x HS w c st Ec) as [Hc0 Hcs].
  destruct (veqb (fst (ascale_raw D g)) (fst c)) eqn:Hz; [|discriminate].
  (* D g(x) - c(x) = D g_0 - c_0 *)
  assert (Er : Q2R D * evalR g x - evalR c x = Q2R (snd (ascale_raw D g)) - Q2R (snd c)).
  { rewrite <- evalR_ascale_raw. destruct (ascale_raw D g) as [u a], c as [v b].
    unfold evalR; cbn [fst snd] in *. rewrite (veqb_dotR u v x Hz). lra. }
  destruct (scale_pos_R _ HD) as [Hpos Hspos].
  set (r0 := snd (ascale_raw D g)) in *. set (c0 := snd c) in *.
  destruct strict.
  - apply orb_true_iff in He as [Hr|Hr].
    + destruct st; [|discriminate]. rewrite qleb_Qle_bool in Hr. apply Qle_bool_R in Hr.
      specialize (Hcs eq_refl). split; intros; [apply Hpos | apply Hspos]; lra.
    + apply negb_true_iff in Hr. rewrite qleb_Qle_bool in Hr. apply Qnle_bool_R in Hr.
      split; intros; [apply Hpos | apply Hspos]; lra.
  - rewrite qleb_Qle_bool in He. apply Qle_bool_R in He.
    split; [apply Hpos; lra | discriminate].
Qed.

Lemma entails_ge : forall H g w x, satR H x -> entails H g false w = true -> 0 <= evalR g x.
Proof. intros. apply (entails_soundR H g false w x); assumption. Qed.

Lemma entails_gt : forall H g w x, satR H x -> entails H g true w = true -> 0 < evalR g x.
Proof. intros. apply (entails_soundR H g true w x); auto. Qed.

(* ------------------------------------------------------------------ *)
(** * Programs over R *)

Fixpoint maxlR_aux (a : R) (l : list R) : R :=
  match l with [] => a | b :: l' => Rmax a (maxlR_aux b l') end.
Definition maxlR (l : list R) : R := match l with [] => 0 | a :: l' => maxlR_aux a l' end.
Fixpoint sumR (l : list R) : R := match l with [] => 0 | a :: l' => a + sumR l' end.

Definition hardmaxR (ps : list (R * R)) : R :=
  let m := maxlR (map fst ps) in
  let T := filter (fun p => if Req_EM_T (fst p) m then true else false) ps in
  sumR (map snd T) / INR (length T).

Definition eval_nodeR (n : node) (x : list R) (env : list R) : R :=
  match n with
  | NLin xs c ts => sumsp xs x + Q2R c + sumsp ts env
  | NMax args => maxlR (map (fun i => nth i env 0) args)
  | NSel prs => hardmaxR (map (fun p => (nth (fst p) env 0, nth (snd p) env 0)) prs)
  end.

Fixpoint runR (ns : list node) (x : list R) (env : list R) : list R :=
  match ns with [] => env | n :: ns' => runR ns' x (env ++ [eval_nodeR n x env]) end.

(* the outputs of a program at x *)
Definition outsR (p : prog) (x : list R) : list R :=
  map (fun o => nth o (runR (p_nodes p) x []) 0) (p_outs p).

Lemma maxlR_aux_ub : forall l a w, In w (a :: l) -> w <= maxlR_aux a l.
Proof.
  induction l as [|b l IH]; intros a w Hw; simpl in *.
  - destruct Hw as [<-|[]]. lra.
  - destruct Hw as [<-|Hw]; [apply Rmax_l|].
    eapply Rle_trans; [apply (IH b w Hw) | apply Rmax_r].
Qed.

Lemma maxlR_aux_lub : forall l a v, (forall w, In w (a :: l) -> w <= v) -> maxlR_aux a l <= v.
Proof.
  induction l as [|b l IH]; intros a v Hv; simpl in *.
  - apply Hv; auto.
  - apply Rmax_lub; [apply Hv; auto|]. apply IH. intros w Hw. apply Hv. right. exact Hw.
Qed.

Lemma maxlR_aux_in : forall l a, In (maxlR_aux a l) (a :: l).
Proof.
  induction l as [|b l IH]; intros a; simpl; [auto|].
  unfold Rmax. destruct (Rle_dec a (maxlR_aux b l)); [|auto].
  specialize (IH b). destruct IH as [E|E]; [rewrite <- E|]; auto.
Qed.

Lemma maxlR_spec : forall l v, In v l -> (forall w, In w l -> w <= v) -> maxlR l = v.
Proof.
  intros [|a l] v Hin Hub; [destruct Hin|]. simpl.
  apply Rle_antisym; [apply maxlR_aux_lub; exact Hub | apply maxlR_aux_ub; exact Hin].
Qed.

(* the max of two lists with the same elements is the same *)
Lemma maxlR_same : forall l1 l2, (forall w, In w l1 -> In w l2) -> (forall w, In w l2 -> In w l1) ->
  maxlR l1 = maxlR l2.
Proof.
  intros [|a l1] [|b l2] H12 H21; try reflexivity.
  - exfalso. apply (H21 b). left. reflexivity.
  - exfalso. apply (H12 a). left. reflexivity.
  - simpl. apply Rle_antisym.
    + apply maxlR_aux_lub. intros w Hw. apply maxlR_aux_ub. apply H12. exact Hw.
    + apply maxlR_aux_lub. intros w Hw. apply maxlR_aux_ub. apply H21. exact Hw.
Qed.

Lemma sumR_const : forall l v, (forall w, In w l -> w = v) -> sumR l = INR (length l) * v.
Proof.
  induction l as [|a l IH]; intros v Hv; cbn [sumR length].
  - simpl. lra.
  - rewrite (Hv a (or_introl eq_refl)), (IH v (fun w Hw => Hv w (or_intror Hw))), S_INR. lra.
Qed.

Lemma hardmaxR_spec : forall ps sk vk, In (sk, vk) ps ->
  (forall p, In p ps -> fst p <= sk) ->
  (forall p, In p ps -> fst p = sk -> snd p = vk) ->
  hardmaxR ps = vk.
Proof.
  intros ps sk vk Hin Hub Htie. unfold hardmaxR.
  assert (Hm : maxlR (map fst ps) = sk).
  { apply maxlR_spec.
    - change sk with (fst (sk, vk)). apply in_map. exact Hin.
    - intros w Hw. apply in_map_iff in Hw as [p [<- Hp]]. apply Hub. exact Hp. }
  rewrite Hm.
  remember (filter (fun p => if Req_EM_T (fst p) sk then true else false) ps) as T eqn:HTd.
  assert (HT : forall w, In w (map snd T) -> w = vk).
  { intros w Hw. apply in_map_iff in Hw as [p [<- Hp]]. rewrite HTd in Hp.
    apply filter_In in Hp as [Hp Heq]. destruct (Req_EM_T (fst p) sk) as [E|E]; [|discriminate].
    apply Htie; assumption. }
  rewrite (sumR_const _ vk HT), map_length.
  assert (Hpos : (0 < length T)%nat).
  { destruct T as [|p T'] eqn:ET; [|simpl; lia].
    exfalso. assert (Hk : In (sk, vk) (filter (fun p => if Req_EM_T (fst p) sk then true else false) ps)).
    { apply filter_In. split; [exact Hin|]. simpl. destruct (Req_EM_T sk sk); [reflexivity|congruence]. }
    rewrite <- HTd in Hk. destruct Hk. }
  assert (Hn : INR (length T) <> 0) by (apply not_0_INR; lia).
  field. exact Hn.
Qed.

(* a hardmax head whose scores are its values is the max of the values *)
Lemma hardmaxR_diag : forall l, l <> [] -> hardmaxR (map (fun v => (v, v)) l) = maxlR l.
Proof.
  intros l Hl. destruct l as [|a l']; [congruence|].
  apply hardmaxR_spec with (sk := maxlR (a :: l')).
  - apply in_map_iff. exists (maxlR (a :: l')). split; [reflexivity|]. apply maxlR_aux_in.
  - intros p Hp. apply in_map_iff in Hp as [v [<- Hv]]. apply maxlR_aux_ub. exact Hv.
  - intros p Hp E. apply in_map_iff in Hp as [v [<- Hv]]. exact E.
Qed.

(* ------------------------------------------------------------------ *)
(** * The run: prefixes and well-founded reads *)

Lemma runR_app : forall ns x env, exists rest, runR ns x env = env ++ rest /\ length rest = length ns.
Proof.
  induction ns as [|n ns IH]; intros x env; cbn [runR].
  - exists []. rewrite app_nil_r. auto.
  - destruct (IH x (env ++ [eval_nodeR n x env])) as [rest [E L]]. rewrite E.
    exists (eval_nodeR n x env :: rest). rewrite <- app_assoc. split; [reflexivity|]. simpl. lia.
Qed.

Lemma nth_app_l : forall (l r : list R) i, (i < length l)%nat -> nth i (l ++ r) 0 = nth i l 0.
Proof. intros. apply app_nth1. exact H. Qed.

Lemma nth_firstn_lt : forall (l : list R) k i, (i < k)%nat -> nth i (firstn k l) 0 = nth i l 0.
Proof.
  induction l as [|a l IH]; intros [|k] [|i] H; cbn [firstn nth]; try lia; try reflexivity.
  apply IH. lia.
Qed.

(* value of node i = the node evaluated on the values before it *)
Lemma runR_nth : forall ns x env i, (i < length ns)%nat ->
  nth (length env + i) (runR ns x env) 0 =
  eval_nodeR (nth i ns (NMax [])) x (firstn (length env + i) (runR ns x env)).
Proof.
  induction ns as [|n ns IH]; intros x env i Hi; [simpl in Hi; lia|].
  cbn [runR]. destruct i as [|i].
  - destruct (runR_app ns x (env ++ [eval_nodeR n x env])) as [rest [E _]]. rewrite E.
    rewrite Nat.add_0_r, <- app_assoc. cbn [nth app].
    rewrite app_nth2 by lia. rewrite Nat.sub_diag. cbn [nth app].
    rewrite firstn_app, firstn_all, Nat.sub_diag. cbn [firstn]. rewrite app_nil_r. reflexivity.
  - specialize (IH x (env ++ [eval_nodeR n x env]) i ltac:(simpl in Hi; lia)).
    rewrite app_length in IH. cbn [length] in IH.
    replace (length env + S i)%nat with (length env + 1 + i)%nat by lia. exact IH.
Qed.

Lemma sumsp_ext : forall ts (v w : list R), (forall i, In i (map fst ts) -> nth i v 0 = nth i w 0) ->
  sumsp ts v = sumsp ts w.
Proof.
  induction ts as [|[i c] ts IH]; intros v w H; cbn [sumsp fold_right]; [reflexivity|].
  fold (sumsp ts v). fold (sumsp ts w). cbn [fst snd].
  rewrite (H i (or_introl eq_refl)), (IH v w (fun j Hj => H j (or_intror Hj))). reflexivity.
Qed.

Lemma eval_nodeR_ext : forall n x v w, (forall i, In i (reads n) -> nth i v 0 = nth i w 0) ->
  eval_nodeR n x v = eval_nodeR n x w.
Proof.
  intros [xs c ts | args | prs] x v w H; cbn [eval_nodeR reads] in *.
  - rewrite (sumsp_ext ts v w H). reflexivity.
  - f_equal. apply map_ext_in. intros i Hi. apply H. exact Hi.
  - f_equal. apply map_ext_in. intros [i j] Hij. cbn [fst snd]. f_equal; apply H; apply in_or_app.
    + left. apply (in_map fst _ _ Hij).
    + right. apply (in_map snd _ _ Hij).
Qed.

(* the value of node i of a program, when it reads only nodes before it *)
Lemma value_of_node : forall ns x i, (i < length ns)%nat ->
  (forall j, In j (reads (nth i ns (NMax []))) -> (j < i)%nat) ->
  nth i (runR ns x []) 0 = eval_nodeR (nth i ns (NMax [])) x (runR ns x []).
Proof.
  intros ns x i Hi Hr. pose proof (runR_nth ns x [] i Hi) as E. cbn [length Nat.add] in E.
  rewrite E. apply eval_nodeR_ext. intros j Hj. apply nth_firstn_lt. apply Hr. exact Hj.
Qed.

(* ------------------------------------------------------------------ *)
(** * Symbolic evaluation is sound *)

Definition agreeR (x : list R) (env : list R) (senv : list (option aff)) : Prop :=
  Forall2 (fun v oa => match oa with Some a => v = evalR a x | None => True end) env senv.

Lemma get_sound : forall x env senv i a, agreeR x env senv -> get senv i = Some a ->
  nth i env 0 = evalR a x.
Proof.
  intros x env senv i a H. unfold get. revert i. induction H as [|v oa env senv Hva H IH]; intros i Hg.
  - destruct i; discriminate.
  - destruct i; cbn [nth] in *; [subst oa; exact Hva | exact (IH i Hg)].
Qed.

Lemma lincomb_sym_sound : forall x env senv ts r, agreeR x env senv ->
  lincomb_sym senv ts = Some r -> sumsp ts env = evalR r x.
Proof.
  intros x env senv ts. induction ts as [|[j c] ts IH]; intros r H Hl; cbn [lincomb_sym] in Hl.
  - inversion Hl; subst. rewrite evalR_azero. reflexivity.
  - destruct (get senv j) as [a|] eqn:Ga; [|discriminate].
    destruct (lincomb_sym senv ts) as [r'|] eqn:Gr; [|discriminate].
    inversion Hl; subst. cbn [sumsp fold_right fst snd]. fold (sumsp ts env).
    rewrite evalR_aadd, evalR_ascale, <- (IH r' H eq_refl), (get_sound x env senv j a H Ga). reflexivity.
Qed.

Lemma all_some_map : forall {A} (g : A -> option aff) l B, all_some (map g l) = Some B ->
  Forall2 (fun i a => g i = Some a) l B.
Proof.
  intros A g l. induction l as [|i l IH]; intros B H; cbn [map all_some] in H.
  - inversion H; subst. constructor.
  - destruct (g i) as [a|] eqn:Gi; [|discriminate].
    destruct (all_some (map g l)) as [r|] eqn:Gr; [|discriminate].
    inversion H; subst. constructor; [exact Gi | exact (IH r eq_refl)].
Qed.

Lemma values_of_args : forall x env senv args A, agreeR x env senv ->
  all_some (map (get senv) args) = Some A ->
  map (fun i => nth i env 0) args = map (fun a => evalR a x) A.
Proof.
  intros x env senv args A H HA. apply all_some_map in HA.
  induction HA as [|i a args A Hia HA IH]; [reflexivity|].
  cbn [map]. rewrite (get_sound x env senv i a H Hia), IH. reflexivity.
Qed.

Lemma forall2b_In : forall {A B} (f : A -> B -> bool) l1 l2, forall2b f l1 l2 = true ->
  forall a, In a l1 -> exists b, f a b = true.
Proof.
  intros A B f l1. induction l1 as [|a l1 IH]; intros [|b l2] H a' Ha'; try discriminate.
  - destruct Ha'.
  - cbn [forall2b] in H. apply andb_true_iff in H as [H1 H2].
    destruct Ha' as [<-|Ha']; [exists b; exact H1 | exact (IH l2 H2 a' Ha')].
Qed.

Lemma pairs_values : forall x env senv prs Sc Vc, agreeR x env senv ->
  all_some (map (fun p => get senv (fst p)) prs) = Some Sc ->
  all_some (map (fun p => get senv (snd p)) prs) = Some Vc ->
  map (fun p => (nth (fst p) env 0, nth (snd p) env 0)) prs =
  map (fun sv => (evalR (fst sv) x, evalR (snd sv) x)) (combine Sc Vc).
Proof.
  intros x env senv prs. induction prs as [|[i j] prs IH]; intros Sc Vc H HS HV;
    cbn [map all_some fst snd] in *.
  - inversion HS; inversion HV; reflexivity.
  - destruct (get senv i) as [s|] eqn:Gi; [|discriminate].
    destruct (all_some (map (fun p => get senv (fst p)) prs)) as [S'|] eqn:GS; [|discriminate].
    destruct (get senv j) as [v|] eqn:Gj; [|discriminate].
    destruct (all_some (map (fun p => get senv (snd p)) prs)) as [V'|] eqn:GV; [|discriminate].
    inversion HS; inversion HV; subst. cbn [combine map fst snd].
    rewrite (get_sound x env senv i s H Gi), (get_sound x env senv j v H Gj), (IH S' V' H eq_refl eq_refl).
    reflexivity.
Qed.

Lemma nth_error_combine_In : forall {A B} (l1 : list A) (l2 : list B) k a b,
  nth_error l1 k = Some a -> nth_error l2 k = Some b -> In (a, b) (combine l1 l2).
Proof.
  intros A B l1. induction l1 as [|a1 l1 IH]; intros [|b1 l2] k a b H1 H2;
    try (destruct k; discriminate).
  destruct k as [|k]; cbn in *.
  - inversion H1; inversion H2; subst. left. reflexivity.
  - right. exact (IH l2 k a b H1 H2).
Qed.

Lemma satR_app : forall C D x, satR C x -> satR D x -> satR (C ++ D) x.
Proof. intros. apply Forall_app. split; assumption. Qed.

Lemma snode_sound : forall C x n oc env senv a,
  satR C x -> agreeR x env senv -> snode C n oc senv = Some (Some a) ->
  eval_nodeR n x env = evalR a x.
Proof.
  intros C x n oc env senv a HC Hag Hs.
  destruct n as [xs c ts | args | prs]; cbn [snode eval_nodeR] in *.
  - destruct (lincomb_sym senv ts) as [r|] eqn:Er; [|discriminate].
    inversion Hs; subst. rewrite evalR_aadd, evalR_sparse_aff, (lincomb_sym_sound x env senv ts r Hag Er).
    reflexivity.
  - destruct oc as [ch|]; [|discriminate].
    destruct (all_some (map (get senv) args)) as [A|] eqn:EA; [|discriminate].
    destruct (nth_error A (ch_k ch)) as [ak|] eqn:Ek; [|discriminate].
    destruct (forall2b (max_ok C ak) A (ch_proofs ch)) eqn:Hall; [|discriminate].
    inversion Hs; subst a; clear Hs.
    rewrite (values_of_args x env senv args A Hag EA).
    apply maxlR_spec.
    + apply (in_map (fun a => evalR a x)). exact (nth_error_In _ _ Ek).
    + intros w Hw. apply in_map_iff in Hw as [aj [<- Hj]].
      destruct (forall2b_In _ _ _ Hall _ Hj) as [p Hp].
      destruct p as [|w|d u l]; cbn [max_ok] in Hp; try discriminate.
      * rewrite (aeqb_soundR _ _ x Hp). lra.
      * pose proof (entails_ge _ _ _ x HC Hp) as G. rewrite evalR_asub in G. lra.
  - destruct oc as [ch|]; [|discriminate].
    destruct (all_some (map (fun p => get senv (fst p)) prs)) as [Sc|] eqn:ES; [|discriminate].
    destruct (all_some (map (fun p => get senv (snd p)) prs)) as [Vc|] eqn:EV; [|discriminate].
    destruct (nth_error Sc (ch_k ch)) as [sk|] eqn:Esk; [|discriminate].
    destruct (nth_error Vc (ch_k ch)) as [vk|] eqn:Evk; [|discriminate].
    destruct (forall2b (sel_ok C sk vk) (combine Sc Vc) (ch_proofs ch)) eqn:Hall; [|discriminate].
    inversion Hs; subst a; clear Hs.
    rewrite (pairs_values x env senv prs Sc Vc Hag ES EV).
    apply hardmaxR_spec with (sk := evalR sk x).
    + apply in_map_iff. exists (sk, vk). split; [reflexivity|].
      exact (nth_error_combine_In _ _ _ _ _ Esk Evk).
    + intros p Hp. apply in_map_iff in Hp as [[sj vj] [<- Hj]]. cbn [fst snd].
      destruct (forall2b_In _ _ _ Hall _ Hj) as [pr Hp].
      destruct pr as [|w|d u l]; cbn [sel_ok] in Hp.
      * apply andb_true_iff in Hp as [H1 _]. rewrite (aeqb_soundR _ _ x H1). lra.
      * pose proof (entails_gt _ _ _ x HC Hp) as G. rewrite evalR_asub in G. lra.
      * apply andb_true_iff in Hp as [Hp _]. apply andb_true_iff in Hp as [Hd _].
        pose proof (entails_ge _ _ _ x HC Hd) as G. rewrite evalR_asub in G. lra.
    + intros p Hp Htie. apply in_map_iff in Hp as [[sj vj] [<- Hj]]. cbn [fst snd] in *.
      destruct (forall2b_In _ _ _ Hall _ Hj) as [pr Hp].
      destruct pr as [|w|d u l]; cbn [sel_ok] in Hp.
      * apply andb_true_iff in Hp as [_ H2]. rewrite (aeqb_soundR _ _ x H2). reflexivity.
      * pose proof (entails_gt _ _ _ x HC Hp) as G. rewrite evalR_asub in G. lra.
      * apply andb_true_iff in Hp as [Hp Hl]. apply andb_true_iff in Hp as [_ Hu].
        assert (HT : satR (C ++ [(asub sj sk, false)]) x).
        { apply satR_app; [exact HC|]. constructor; [|constructor].
          unfold sat_conR. cbn [fst snd]. rewrite evalR_asub. lra. }
        pose proof (entails_ge _ _ _ x HT Hu) as G1. pose proof (entails_ge _ _ _ x HT Hl) as G2.
        rewrite evalR_asub in G1, G2. lra.
Qed.

(* what the cell above knows about the nodes still to run, as a list of optional maps *)
Definition knownR (x : list R) (rest : list R) (prev : list (option aff)) : Prop :=
  forall i a, nth_error prev i = Some (Some a) -> nth i rest 0 = evalR a x.

Lemma knownR_nil : forall x rest, knownR x rest [].
Proof. intros x rest i a H. destruct i; discriminate. Qed.

Lemma agreeR_knownR : forall x env senv, agreeR x env senv -> knownR x env senv.
Proof.
  intros x env senv H. induction H as [|v oa env senv Hv H IH]; intros i a Hi.
  - destruct i; discriminate.
  - destruct i; cbn [nth_error nth] in *; [inversion Hi; subst; exact Hv | exact (IH i a Hi)].
Qed.

Lemma nth_runR_here : forall ns x env v, nth (length env) (runR ns x (env ++ [v])) 0 = v.
Proof.
  intros ns x env v. destruct (runR_app ns x (env ++ [v])) as [rest [E _]]. rewrite E.
  rewrite <- app_assoc, app_nth2 by lia. rewrite Nat.sub_diag. reflexivity.
Qed.

Lemma srun_sound : forall C x side cs, satR C x -> forall ns need env senv prev vs,
  agreeR x env senv -> length env = length senv ->
  knownR x (skipn (length env) (runR ns x env)) prev ->
  srun C side cs ns need prev senv = Some vs -> agreeR x (runR ns x env) vs.
Proof.
  intros C x side cs HC ns. induction ns as [|n ns IH]; intros need env senv prev vs Hag Hlen Hk Hs;
    cbn [runR srun] in *.
  - inversion Hs; subst. exact Hag.
  - assert (Hnext : forall v o prev' nd, prev = o :: prev' \/ (prev = [] /\ prev' = []) ->
              agreeR x (env ++ [eval_nodeR n x env]) (senv ++ [v]) ->
              srun C side cs ns nd prev' (senv ++ [v]) = Some vs ->
              agreeR x (runR ns x (env ++ [eval_nodeR n x env])) vs).
    { intros v o prev' nd Hp Hag' Hs'. apply (IH nd _ (senv ++ [v]) prev'); [exact Hag'| |  |exact Hs'].
      - rewrite !app_length, Hlen. reflexivity.
      - intros i a Hi. destruct Hp as [Hp|[_ Hp]]; [|subst prev'; destruct i; discriminate].
        subst prev. specialize (Hk (S i) a Hi).
        destruct (runR_app ns x (env ++ [eval_nodeR n x env])) as [rest [E _]].
        rewrite E in Hk |- *. rewrite <- app_assoc in Hk.
        rewrite skipn_app, skipn_all, Nat.sub_diag in Hk. rewrite skipn_app, skipn_all.
        rewrite app_length, Nat.sub_diag in *. cbn [app length skipn nth] in *.
        replace (length env + 1 - length env)%nat with 1%nat in * by lia.
        cbn [skipn] in *. exact Hk. }
    assert (Hold : forall nd,
      match prev with
      | Some a :: prev' => srun C side cs ns nd prev' (senv ++ [Some a])
      | _ =>
          match snode C n (find_choice side (length senv) cs) senv with
          | Some v => srun C side cs ns nd (tl prev) (senv ++ [v])
          | None => None
          end
      end = Some vs -> agreeR x (runR ns x (env ++ [eval_nodeR n x env])) vs).
    { intros nd Hs'. clear Hs. rename Hs' into Hs.
    destruct prev as [|o prev'].
    + destruct (snode C n _ senv) as [v|] eqn:En; [|discriminate].
      apply (Hnext v None [] nd); [right; auto| |exact Hs].
      unfold agreeR. apply Forall2_app; [exact Hag|]. constructor; [|constructor].
      destruct v as [a|]; [|exact I]. exact (snode_sound C x n _ env senv a HC Hag En).
    + destruct o as [a|].
      * apply (Hnext (Some a) (Some a) prev' nd); [left; reflexivity| |exact Hs].
        unfold agreeR. apply Forall2_app; [exact Hag|]. constructor; [|constructor].
        specialize (Hk 0%nat a eq_refl). rewrite <- (nth_runR_here ns x env (eval_nodeR n x env)).
        rewrite <- Hk. destruct (runR_app ns x (env ++ [eval_nodeR n x env])) as [rest [E _]].
        rewrite E. rewrite <- app_assoc, skipn_app, skipn_all, Nat.sub_diag, app_nth2 by lia.
        rewrite Nat.sub_diag. reflexivity.
      * destruct (snode C n _ senv) as [v|] eqn:En; [|discriminate].
        apply (Hnext v None prev' nd); [left; reflexivity| |exact Hs].
        unfold agreeR. apply Forall2_app; [exact Hag|]. constructor; [|constructor].
        destruct v as [b|]; [|exact I]. exact (snode_sound C x n _ env senv b HC Hag En). }
    destruct need as [|[|] need']; [exact (Hold [] Hs) | exact (Hold need' Hs) |].
    (* a node outside the mask: unknown *)
    assert (HN : agreeR x (env ++ [eval_nodeR n x env]) (senv ++ [None])).
    { unfold agreeR. apply Forall2_app; [exact Hag|]. constructor; [exact I | constructor]. }
    destruct prev as [|o prev'].
    + exact (Hnext None None [] need' (or_intror (conj eq_refl eq_refl)) HN Hs).
    + exact (Hnext None o prev' need' (or_introl eq_refl) HN Hs).
Qed.

(* ------------------------------------------------------------------ *)
(** * Output agreement is sound *)

Lemma max_args_value : forall (p : prog) x e i ai, e = runR (p_nodes p) x [] ->
  (i < length (p_nodes p))%nat -> forallb (fun a => Nat.ltb a i) ai = true ->
  max_args (node_at p i) = Some ai ->
  nth i e 0 = maxlR (map (fun a => nth a e 0) ai).
Proof.
  intros p x e i ai -> Hi Hlt Hm.
  assert (Hr : forall j, In j ai -> (j < i)%nat).
  { intros j Hj. rewrite forallb_forall in Hlt. apply Nat.ltb_lt. apply Hlt. exact Hj. }
  unfold node_at in Hm. destruct (nth i (p_nodes p) (NMax [])) as [xs c ts | args | prs] eqn:Ni;
    cbn [max_args] in Hm; try discriminate.
  - inversion Hm; subst ai.
    rewrite value_of_node by (try exact Hi; rewrite Ni; exact Hr). rewrite Ni. reflexivity.
  - destruct prs as [|p0 prs']; [discriminate|].
    destruct (forallb (fun p => Nat.eqb (fst p) (snd p)) (p0 :: prs')) eqn:Hd; [|discriminate].
    inversion Hm; subst ai. rewrite forallb_forall in Hd.
    rewrite value_of_node.
    2: exact Hi.
    2: { rewrite Ni. intros j Hj. cbn [reads] in Hj. apply in_app_or in Hj as [Hj|Hj].
         - apply in_map_iff in Hj as [q [<- Hq]]. rewrite (proj1 (Nat.eqb_eq _ _) (Hd q Hq)).
           apply Hr. change (In (snd q) (map snd (p0 :: prs'))). apply in_map. exact Hq.
         - apply Hr. exact Hj. }
    rewrite Ni. cbn [eval_nodeR].
    set (e := runR (p_nodes p) x []).
    replace (map (fun q => (nth (fst q) e 0, nth (snd q) e 0)) (p0 :: prs'))
      with (map (fun v => (v, v)) (map (fun a => nth a e 0) (map snd (p0 :: prs')))).
    + apply hardmaxR_diag. discriminate.
    + rewrite !map_map. apply map_ext_in. intros q Hq.
      rewrite (proj1 (Nat.eqb_eq _ _) (Hd q Hq)). reflexivity.
Qed.

Lemma memb_In : forall a l, memb a l = true -> exists b, In b l /\ aeqb a b = true.
Proof.
  intros a l. induction l as [|b l IH]; intros H; cbn [memb] in H; [discriminate|].
  destruct (aeqb a b) eqn:E.
  - exists b. split; [left; reflexivity | exact E].
  - destruct (IH H) as [c [Hc Ec]]. exists c. split; [right; exact Hc | exact Ec].
Qed.

Lemma mvals_value : forall (p : prog) x v i A,
  agreeR x (runR (p_nodes p) x []) v -> mvals p v i = Some A ->
  nth i (runR (p_nodes p) x []) 0 = maxlR (map (fun a => evalR a x) A).
Proof.
  intros p x v i A Hv H. unfold mvals in H.
  destruct (max_args (node_at p i)) as [ai|] eqn:Mi.
  - destruct ((i <? length (p_nodes p)) && forallb (fun a => a <? i) ai) eqn:G;
      [|discriminate].
    apply andb_true_iff in G as [Ni Li]. apply Nat.ltb_lt in Ni.
    rewrite (max_args_value p x _ i ai eq_refl Ni Li Mi).
    rewrite (values_of_args _ _ _ _ _ Hv H). reflexivity.
  - destruct (get v i) as [a|] eqn:Ga; [|discriminate].
    inversion H; subst A. cbn [map maxlR maxlR_aux]. exact (get_sound _ _ _ _ _ Hv Ga).
Qed.

Lemma agree1_sound : forall f g x vf vg i j,
  agreeR x (runR (p_nodes f) x []) vf -> agreeR x (runR (p_nodes g) x []) vg ->
  agree1 f g vf vg i j = true ->
  nth i (runR (p_nodes f) x []) 0 = nth j (runR (p_nodes g) x []) 0.
Proof.
  intros f g x vf vg i j Hf Hg H. unfold agree1 in H. apply orb_true_iff in H as [H|H].
  - destruct (get vf i) as [a|] eqn:Ga; [|discriminate].
    destruct (get vg j) as [b|] eqn:Gb; [|discriminate].
    rewrite (get_sound _ _ _ _ _ Hf Ga), (get_sound _ _ _ _ _ Hg Gb). apply aeqb_soundR. exact H.
  - destruct (mvals f vf i) as [A|] eqn:EA; [|discriminate].
    destruct (mvals g vg j) as [B|] eqn:EB; [|discriminate].
    rewrite (mvals_value f x vf i A Hf EA), (mvals_value g x vg j B Hg EB).
    unfold same_set in H. apply andb_true_iff in H as [HAB HBA].
    rewrite forallb_forall in HAB, HBA.
    apply maxlR_same; intros w Hw; apply in_map_iff in Hw as [a [<- Ha]].
    + specialize (HAB a Ha). apply memb_In in HAB as [b [Hb E]].
      rewrite (aeqb_soundR _ _ x E). apply (in_map (fun a => evalR a x)). exact Hb.
    + specialize (HBA a Ha). apply memb_In in HBA as [b [Hb E]].
      rewrite (aeqb_soundR _ _ x E). apply (in_map (fun a => evalR a x)). exact Hb.
Qed.

Lemma remove_match_sum : forall ok l l' (e : list R), remove_match ok l = Some l' ->
  exists t, ok t = true /\ sumsp l e = Q2R (snd t) * nth (fst t) e 0 + sumsp l' e.
Proof.
  intros ok l. induction l as [|t l IH]; intros l' e H; cbn [remove_match] in H; [discriminate|].
  destruct (ok t) eqn:Ot.
  - inversion H; subst. exists t. split; [exact Ot|]. reflexivity.
  - destruct (remove_match ok l) as [r|] eqn:Er; [|discriminate]. inversion H; subst.
    destruct (IH r e eq_refl) as [u [Ou E]]. exists u. split; [exact Ou|].
    cbn [sumsp fold_right]. fold (sumsp l e). fold (sumsp r e). rewrite E. lra.
Qed.

Lemma match_terms_sum : forall ok (ef eg : list R),
  (forall a b, ok a b = true -> nth a ef 0 = nth b eg 0) ->
  forall tf tg, match_terms ok tf tg = true -> sumsp tf ef = sumsp tg eg.
Proof.
  intros ok ef eg Hok tf. induction tf as [|[a w] tf IH]; intros tg H; cbn [match_terms] in H.
  - destruct tg; [reflexivity | discriminate].
  - destruct (remove_match _ tg) as [tg'|] eqn:Er; [|discriminate].
    destruct (remove_match_sum _ _ _ eg Er) as [[b w2] [Ob E]]. cbn [fst snd] in *.
    apply andb_true_iff in Ob as [Hw Hab].
    rewrite E. cbn [sumsp fold_right fst snd]. fold (sumsp tf ef).
    rewrite (IH tg' H), (Hok a b Hab). apply Qeq_bool_eq, Qeq_eqR in Hw. rewrite Hw. reflexivity.
Qed.

Lemma sparse_eqb_sum : forall u v (x : list R), sparse_eqb u v = true -> sumsp u x = sumsp v x.
Proof.
  induction u as [|[i a] u IH]; intros [|[j b] v] x H; cbn [sparse_eqb] in H; try discriminate.
  - reflexivity.
  - apply andb_true_iff in H as [H H3]. apply andb_true_iff in H as [H1 H2].
    apply Nat.eqb_eq in H1. subst j. apply Qeq_bool_eq, Qeq_eqR in H2.
    cbn [sumsp fold_right fst snd]. fold (sumsp u x). fold (sumsp v x).
    rewrite H2, (IH v x H3). reflexivity.
Qed.

Lemma lin_value : forall p x i xs c ts, (i < length (p_nodes p))%nat ->
  node_at p i = NLin xs c ts -> forallb (fun t => fst t <? i) ts = true ->
  nth i (runR (p_nodes p) x []) 0 = sumsp xs x + Q2R c + sumsp ts (runR (p_nodes p) x []).
Proof.
  intros p x i xs c ts Hi Ni Hl. unfold node_at in Ni.
  rewrite value_of_node; [rewrite Ni; reflexivity | exact Hi |].
  rewrite Ni. intros j Hj. cbn [reads] in Hj. apply in_map_iff in Hj as [t [<- Ht]].
  rewrite forallb_forall in Hl. apply Nat.ltb_lt. apply Hl. exact Ht.
Qed.

Lemma agree_out_sound : forall f g x vf vg i j,
  agreeR x (runR (p_nodes f) x []) vf -> agreeR x (runR (p_nodes g) x []) vg ->
  agree_out f g vf vg i j = true ->
  nth i (runR (p_nodes f) x []) 0 = nth j (runR (p_nodes g) x []) 0.
Proof.
  intros f g x vf vg i j Hf Hg H. unfold agree_out in H. apply orb_true_iff in H as [H|H].
  - exact (agree1_sound f g x vf vg i j Hf Hg H).
  - destruct (node_at f i) as [xf cf tf| |] eqn:Ni; try discriminate.
    destruct (node_at g j) as [xg cg tg| |] eqn:Nj; try discriminate.
    repeat match goal with
           | H : (_ && _) = true |- _ => apply andb_true_iff in H as [? ?]
           end.
    match goal with
    | H1 : (i <? _) = true, H2 : (j <? _) = true |- _ =>
        apply Nat.ltb_lt in H1; apply Nat.ltb_lt in H2
    end.
    rewrite (lin_value f x i xf cf tf) by assumption.
    rewrite (lin_value g x j xg cg tg) by assumption.
    match goal with H : sparse_eqb xf xg = true |- _ => rewrite (sparse_eqb_sum xf xg x H) end.
    match goal with H : Qeq_bool cf cg = true |- _ => apply Qeq_bool_eq, Qeq_eqR in H; rewrite H end.
    match goal with H : match_terms _ tf tg = true |- _ =>
      rewrite (match_terms_sum _ _ _ (fun a b Hab => agree1_sound f g x vf vg a b Hf Hg Hab) tf tg H) end.
    reflexivity.
Qed.

Lemma forall2b_map : forall {A B C} (P : A -> B -> bool) (F : A -> C) (G : B -> C) l1 l2,
  (forall a b, P a b = true -> F a = G b) -> forall2b P l1 l2 = true -> map F l1 = map G l2.
Proof.
  intros A B C P F G l1. induction l1 as [|a l1 IH]; intros [|b l2] HP H; cbn [forall2b] in H;
    try discriminate; [reflexivity|].
  apply andb_true_iff in H as [H1 H2]. cbn [map]. rewrite (HP a b H1), (IH l2 HP H2). reflexivity.
Qed.

(* ------------------------------------------------------------------ *)
(** * The tree, and the main theorem *)

Lemma check_tree_sound : forall f g nf ng t C inh pf pg x,
  check_tree f g nf ng C inh pf pg t = true -> satR C x ->
  knownR x (runR (p_nodes f) x []) pf -> knownR x (runR (p_nodes g) x []) pg ->
  outsR f x = outsR g x.
Proof.
  intros f g nf ng t. induction t as [cs | w | h cs l IHl r IHr]; intros C inh pf pg x Ht HC Kf Kg;
    cbn [check_tree] in Ht.
  - unfold check_leaf in Ht. unfold outsR.
    destruct (srun C 0 (cs ++ inh) (p_nodes f) nf pf []) as [vf|] eqn:Ef; [|discriminate].
    destruct (srun C 1 (cs ++ inh) (p_nodes g) ng pg []) as [vg|] eqn:Eg; [|discriminate].
    apply (forall2b_map _ _ _ _ _ (fun i j => agree_out_sound f g x _ _ i j
             (srun_sound C x 0 (cs ++ inh) HC (p_nodes f) nf [] [] pf vf (Forall2_nil _) eq_refl Kf Ef)
             (srun_sound C x 1 (cs ++ inh) HC (p_nodes g) ng [] [] pg vg (Forall2_nil _) eq_refl Kg Eg))).
    exact Ht.
  - exfalso. pose proof (entails_gt _ _ _ x HC Ht) as G. rewrite evalR_azero in G. lra.
  - assert (Hgo : forall inh' pf' pg', knownR x (runR (p_nodes f) x []) pf' ->
              knownR x (runR (p_nodes g) x []) pg' ->
              check_tree f g nf ng (C ++ [(h, false)]) inh' pf' pg' l &&
              check_tree f g nf ng (C ++ [(ascale (-1) h, true)]) inh' pf' pg' r = true ->
              outsR f x = outsR g x).
    { intros inh' pf' pg' Kf' Kg' H. apply andb_true_iff in H as [Hl Hr].
      destruct (Rlt_le_dec (evalR h x) 0) as [Hneg|Hpos].
      + apply (IHr _ _ _ _ x Hr); [|exact Kf'|exact Kg']. apply satR_app; [exact HC|].
        constructor; [|constructor].
        unfold sat_conR. cbn [fst snd]. rewrite evalR_ascale, Q2R_m1. lra.
      + apply (IHl _ _ _ _ x Hl); [|exact Kf'|exact Kg']. apply satR_app; [exact HC|].
        constructor; [|constructor].
        unfold sat_conR. cbn [fst snd]. exact Hpos. }
    destruct cs as [|e cs]; [exact (Hgo inh pf pg Kf Kg Ht)|].
    destruct (srun C 0 ((e :: cs) ++ inh) (p_nodes f) nf pf []) as [vf|] eqn:Ef; [|discriminate].
    destruct (srun C 1 ((e :: cs) ++ inh) (p_nodes g) ng pg []) as [vg|] eqn:Eg; [|discriminate].
    apply (Hgo (unresolved vf vg ((e :: cs) ++ inh)) vf vg); [| |exact Ht].
    + exact (agreeR_knownR _ _ _ (srun_sound C x 0 ((e :: cs) ++ inh) HC (p_nodes f) nf [] [] pf vf
               (Forall2_nil _) eq_refl Kf Ef)).
    + exact (agreeR_knownR _ _ _ (srun_sound C x 1 ((e :: cs) ++ inh) HC (p_nodes g) ng [] [] pg vg
               (Forall2_nil _) eq_refl Kg Eg)).
Qed.

(** A certificate that checks proves f = g, output by output, at every real point of the
    domain. *)
Theorem check_cert_sound : forall f g dom t, check_cert f g dom t = true ->
  forall x : list R, satR dom x -> outsR f x = outsR g x.
Proof.
  intros f g dom t H x Hx. unfold check_cert in H. apply andb_true_iff in H as [_ H].
  exact (check_tree_sound f g _ _ t dom [] [] [] x H Hx (knownR_nil _ _) (knownR_nil _ _)).
Qed.

(* ------------------------------------------------------------------ *)
(** * Domains, stated readably *)

(* lo_i <= x_i <= hi_i for every coordinate, and x has the box's dimension *)
Fixpoint in_box (lo hi : list Q) (x : list R) : Prop :=
  match lo, hi, x with
  | [], [], [] => True
  | l :: lo', u :: hi', v :: x' => Q2R l <= v <= Q2R u /\ in_box lo' hi' x'
  | _, _, _ => False
  end.

(* the shapes the statements read: a box of d bounds on each side; one constant per row of A
   and d entries per row (in_poly and dotR would otherwise truncate) *)
Definition box_shaped (d : nat) (lo hi : list Q) : bool :=
  Nat.eqb (length lo) d && Nat.eqb (length hi) d.

Definition poly_shaped (d : nat) (A : list (list Q)) (b : list Q) : bool :=
  Nat.eqb (length A) (length b) && forallb (fun a => Nat.eqb (length a) d) A.

(* A x <= b, row by row *)
Fixpoint in_poly (A : list (list Q)) (b : list Q) (x : list R) : Prop :=
  match A, b with
  | a :: A', c :: b' => dotR a x <= Q2R c /\ in_poly A' b' x
  | _, _ => True
  end.

Lemma dotR_repeat0 : forall n x, dotR (repeat 0%Q n) x = 0.
Proof.
  induction n as [|n IH]; intros [|b x]; cbn [repeat dotR]; try lra.
  rewrite IH, RMicromega.Q2R_0. lra.
Qed.

Lemma dotR_basis : forall d i v x, (i < d)%nat -> dotR (basis d i v) x = Q2R v * nth i x 0.
Proof.
  induction d as [|d IH]; intros i v x Hi; [lia|].
  destruct i as [|i]; destruct x as [|b x]; cbn [basis dotR nth]; try lra.
  - rewrite dotR_repeat0. lra.
  - rewrite IH by lia. rewrite RMicromega.Q2R_0. lra.
Qed.

Lemma in_combine_seq : forall (l : list Q) s n i u, In (i, u) (combine (seq s n) l) ->
  (s <= i < s + n)%nat /\ nth (i - s) l 0%Q = u.
Proof.
  induction l as [|a l IH]; intros s n i u H; destruct n as [|n]; cbn [seq combine] in H;
    try destruct H.
  - inversion H; subst. rewrite Nat.sub_diag. split; [lia | reflexivity].
  - destruct (IH (S s) n i u H) as [H1 H2]. split; [lia|].
    replace (i - s)%nat with (S (i - S s)) by lia. exact H2.
Qed.

Lemma in_box_nth : forall lo hi x, in_box lo hi x ->
  length lo = length x /\ forall i, (i < length x)%nat ->
  Q2R (nth i lo 0%Q) <= nth i x 0 <= Q2R (nth i hi 0%Q).
Proof.
  induction lo as [|l lo IH]; intros [|u hi] [|v x] H; cbn [in_box] in H; try destruct H.
  - split; [reflexivity|]. intros i Hi. simpl in Hi. lia.
  - destruct (IH hi x H0) as [L Hn]. split; [simpl; lia|].
    intros [|i] Hi; [exact H | apply Hn; simpl in Hi; lia].
Qed.

Lemma box_rows_sound : forall lo hi x, in_box lo hi x -> satR (rows_of_box lo hi) x.
Proof.
  intros lo hi x H. destruct (in_box_nth lo hi x H) as [L Hn]. unfold rows_of_box, satR.
  apply Forall_app. split; apply Forall_forall; intros c Hc; apply in_map_iff in Hc as [[i u] [<- Hiu]];
    apply in_combine_seq in Hiu as [Hi E]; rewrite Nat.sub_0_r in E; subst u;
    unfold sat_conR, evalR; cbn [fst snd]; rewrite dotR_basis by lia.
  - rewrite Q2R_m1. specialize (Hn i ltac:(lia)). lra.
  - rewrite Q2R_opp. specialize (Hn i ltac:(lia)). rewrite RMicromega.Q2R_1 || idtac.
    replace (Q2R 1) with 1 by (unfold Q2R; simpl; lra). lra.
Qed.

Lemma poly_rows_sound : forall A b x, in_poly A b x -> satR (rows_of_poly A b) x.
Proof.
  induction A as [|a A IH]; intros [|c b] x H; cbn [rows_of_poly combine map]; try constructor.
  - destruct H as [H1 H2]. unfold sat_conR, evalR. cbn [fst snd]. rewrite dotR_vscale, Q2R_m1. lra.
  - destruct H as [_ H2]. exact (IH b x H2).
Qed.
