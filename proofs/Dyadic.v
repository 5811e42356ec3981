(* Dyadic.v -- Farkas entailment in machine words, for the large certificates of float
   networks (relaxed leaves, property and pair certificates):

     entails_w_soundR : satR H x -> entails_w H g strict w = true ->
       0 <= evalR g x /\ (strict = true -> 0 < evalR g x).

   entails_w answers what Checker.entails answers; when every multiplier and every linear
   coefficient involved is dyadic (n / 2^e) it computes in Bignums' BigZ, big integers of
   63-bit machine words, and only falls back to Checker.entails over Q when that test fails.
   Its soundness rests on the standard library's specification of the primitive integers
   (Uint63.*_spec), besides the axioms of the Reals; the theorems that do not use it
   (check_cert_sound, the construction, layerwise certificates) keep the Reals axioms alone. *)

From Coq Require Import QArith Qreals Reals Lra Lia List Bool.
From Bignums Require Import BigZ.
From ExactMax Require Import Checker Sound.
Import ListNotations.

(* ------------------------------------------------------------------ *)
(** * Definitions *)

Open Scope Q_scope.
(* The Farkas test of Checker.entails for dyadic data, computed in machine words.  A dyadic
   rational n / 2^e is held as the pair (n, e), n a big integer of 63-bit machine words
   (Bignums' BigZ); sums shift the numerator of smaller exponent, products multiply numerators
   and add exponents.  The certificates of float networks are dyadic throughout (float
   weights, integer multipliers; the constants of a box's rows are decimal, and are summed
   over Q), and their Farkas multipliers reach 600 bits: in Coq's binary integers a product of
   a 600-bit and a 30-bit number walks 600 constructors, in words it is ten machine
   multiplications. *)
Module Dy.
Import BigZ.

Definition t := (bigZ * Z)%type.
Definition zero : t := (BigZ.zero, 0%Z).

(* q as n / 2^e when its denominator is a power of two (0 for a zero numerator) *)
Definition of_q (q : Q) : option t :=
  if Z.eqb (Qnum q) 0 then Some zero else
  match pow2_exp (Qden q) with Some e => Some (BigZ.of_Z (Qnum q), e) | None => None end.

Definition add (a b : t) : t :=
  let '(n, j) := a in let '(m, k) := b in
  if Z.leb j k then (BigZ.add (BigZ.shiftl n (BigZ.of_Z (k - j))) m, k)
  else (BigZ.add n (BigZ.shiftl m (BigZ.of_Z (j - k))), j).

Definition mul (a b : t) : t := (BigZ.mul (fst a) (fst b), (snd a + snd b)%Z).
Definition sub (a b : t) : t := add a (BigZ.opp (fst b), snd b).
(* a = b when the numerator of a - b is 0 *)
Definition eqb (a b : t) : bool := BigZ.eqb (fst (sub a b)) BigZ.zero.
Definition pos (a : t) : bool := BigZ.ltb BigZ.zero (fst a).

(* acc + y h, coordinate by coordinate (missing coordinates are 0); None when a nonzero
   coefficient of h is not dyadic *)
Fixpoint axpy (y : t) (h : list Q) (acc : list t) : option (list t) :=
  match h with
  | [] => Some acc
  | a :: h' =>
      match axpy y h' (tl acc) with
      | None => None
      | Some rest =>
          if Z.eqb (Qnum a) 0 then Some (hd zero acc :: rest)
          else match of_q a with
               | Some d => Some (add (mul y d) (hd zero acc) :: rest)
               | None => None
               end
      end
  end.

Fixpoint veqb (u v : list t) : bool :=
  match u, v with
  | [], _ => forallb (fun b => eqb b zero) v
  | _, [] => forallb (fun a => eqb a zero) u
  | a :: u', b :: v' => eqb a b && veqb u' v'
  end.

(* sum_i y_i h_i over the rows H as comb computes it: the linear part in words, the constant
   (a box's decimal bounds are not dyadic) over Q *)
Fixpoint comb (H : list con) (w : list (nat * Q)) : option (list t * Q * bool) :=
  match w with
  | [] => Some ([], 0, false)
  | (i, y) :: w' =>
      match nth_error H i, of_q y with
      | Some (h, s), Some yd =>
          if BigZ.leb BigZ.zero (fst yd) then
            match comb H w' with
            | Some (c, c0, st) =>
                match axpy yd (fst h) c with
                | Some c' => Some (c', qadd (qmul y (snd h)) c0, st || (s && pos yd))
                | None => None
                end
            | None => None
            end
          else None
      | _, _ => None
      end
  end.

Definition entails (H : list con) (g : aff) (strict : bool) (f : farkas) : bool :=
  let '(D, w) := f in
  match of_q D with
  | Some Dd =>
      if pos Dd then
        match comb H w, axpy Dd (fst g) [] with
        | Some (c, c0, st), Some Dg =>
            let r0 := qmul D (snd g) in
            if veqb Dg c then
              if strict then (st && qleb c0 r0) || negb (qleb r0 c0) else qleb c0 r0
            else false
        | _, _ => false
        end
      else false
  | None => false
  end.
End Dy.

(* H entails g >= 0 (g > 0 when strict): in machine words when the data are dyadic, else (or
   when that test fails) over Q.  An if, not ||: the VM evaluates both arguments of a
   function, the branches of a match only when taken. *)
Definition entails_w (H : list con) (g : aff) (strict : bool) (f : farkas) : bool :=
  if Dy.entails H g strict f then true else entails H g strict f.

(* ------------------------------------------------------------------ *)
(** * Soundness *)

Local Open Scope R_scope.


(* (n, e) is n * 2^-e *)
Definition dyR (a : Dy.t) : R := IZR [fst a]%bigZ * powerRZ 2 (- snd a).
Fixpoint dotD (u : list Dy.t) (x : list R) : R :=
  match u, x with
  | a :: u', b :: x' => dyR a * b + dotD u' x'
  | _, _ => 0
  end.

Lemma IZR_pow2 : forall e, (0 <= e)%Z -> IZR (2 ^ e) = powerRZ 2 e.
Proof.
  intros [|p|p] He; [reflexivity| |lia]. simpl powerRZ.
  rewrite <- (positive_nat_Z p) at 1. rewrite <- pow_IZR. reflexivity.
Qed.

Lemma pow2_split : forall j k, powerRZ 2 (- j) = powerRZ 2 (k - j) * powerRZ 2 (- k).
Proof.
  intros. rewrite <- powerRZ_add by lra. f_equal. lia.
Qed.

Lemma pow2_pos : forall e, 0 < powerRZ 2 e.
Proof. intros. apply powerRZ_lt. lra. Qed.

Lemma dyR_zero : dyR Dy.zero = 0.
Proof. unfold dyR, Dy.zero; cbn [fst snd]. rewrite BigZ.spec_0. lra. Qed.

Lemma dyR_of_q : forall q d, Dy.of_q q = Some d -> dyR d = Q2R q.
Proof.
  intros [n p] d H. unfold Dy.of_q in H; cbn [Qnum Qden] in H.
  destruct (Z.eqb_spec n 0) as [->|Hn].
  - inversion H; subst. rewrite dyR_zero. unfold Q2R; simpl. lra.
  - destruct (pow2_exp p) as [e|] eqn:E; [|discriminate]. inversion H; subst; clear H.
    destruct (pow2_exp_spec p e E) as [He Hp].
    unfold dyR, Q2R; cbn [fst snd Qnum Qden]. rewrite BigZ.spec_of_Z, Hp, IZR_pow2 by exact He.
    assert (Hq : powerRZ 2 (- e) * powerRZ 2 e = 1).
    { rewrite <- powerRZ_add by lra. replace (- e + e)%Z with 0%Z by lia. reflexivity. }
    pose proof (pow2_pos e).
    replace (powerRZ 2 (- e)) with (/ powerRZ 2 e) by (apply (Rmult_eq_reg_r (powerRZ 2 e));
      [rewrite Hq; field | ]; lra).
    unfold Rdiv. ring.
Qed.

Lemma dyR_add : forall a b, dyR (Dy.add a b) = dyR a + dyR b.
Proof.
  intros [n j] [m k]. unfold Dy.add.
  destruct (Z.leb_spec j k) as [L|L]; unfold dyR; cbn [fst snd];
    rewrite BigZ.spec_add, BigZ.spec_shiftl, BigZ.spec_of_Z, Z.shiftl_mul_pow2 by lia;
    rewrite plus_IZR, mult_IZR, IZR_pow2 by lia.
  - rewrite (pow2_split j k). ring.
  - rewrite (pow2_split k j). ring.
Qed.

Lemma dyR_mul : forall a b, dyR (Dy.mul a b) = dyR a * dyR b.
Proof.
  intros [n j] [m k]. unfold Dy.mul, dyR; cbn [fst snd].
  rewrite BigZ.spec_mul, mult_IZR. replace (- (j + k))%Z with (- j + - k)%Z by lia.
  rewrite powerRZ_add by lra. ring.
Qed.

Lemma dyR_sub : forall a b, dyR (Dy.sub a b) = dyR a - dyR b.
Proof.
  intros a [m k]. unfold Dy.sub. rewrite dyR_add. unfold dyR; cbn [fst snd].
  rewrite BigZ.spec_opp, opp_IZR. ring.
Qed.

Lemma dy_num_sign : forall a, (IZR [fst a]%bigZ <= 0 -> dyR a <= 0) /\
  (IZR [fst a]%bigZ = 0 -> dyR a = 0) /\ (0 < IZR [fst a]%bigZ -> 0 < dyR a).
Proof.
  intros [n e]. unfold dyR; cbn [fst snd]. pose proof (pow2_pos (- e)).
  repeat split; intros.
  - assert (0 <= - IZR [n]%bigZ * powerRZ 2 (- e)) by (apply Rmult_le_pos; lra). lra.
  - rewrite H0. ring.
  - apply Rmult_lt_0_compat; assumption.
Qed.

Lemma dy_eqb_R : forall a b, Dy.eqb a b = true -> dyR a = dyR b.
Proof.
  intros a b H. unfold Dy.eqb in H. rewrite BigZ.spec_eqb, BigZ.spec_0 in H.
  apply Z.eqb_eq, (f_equal IZR) in H.
  destruct (dy_num_sign (Dy.sub a b)) as [_ [E _]]. specialize (E H).
  rewrite dyR_sub in E. lra.
Qed.

Lemma dy_pos_R : forall a, Dy.pos a = true -> 0 < dyR a.
Proof.
  intros a H. unfold Dy.pos in H. rewrite BigZ.spec_ltb, BigZ.spec_0 in H.
  apply Z.ltb_lt, IZR_lt in H. exact (proj2 (proj2 (dy_num_sign a)) H).
Qed.

Lemma some_eq : forall {A} (a b : A), Some a = Some b -> a = b.
Proof. intros A a b H. congruence. Qed.

Lemma dy_axpy_cons : forall y a h acc, Dy.axpy y (a :: h) acc =
  match Dy.axpy y h (tl acc) with
  | None => None
  | Some rest =>
      if Z.eqb (Qnum a) 0 then Some (hd Dy.zero acc :: rest)
      else match Dy.of_q a with
           | Some d => Some (Dy.add (Dy.mul y d) (hd Dy.zero acc) :: rest)
           | None => None
           end
  end.
Proof. reflexivity. Qed.

Lemma dy_axpy_R : forall y h acc r x, Dy.axpy y h acc = Some r ->
  dotD r x = dyR y * dotR h x + dotD acc x.
Proof.
  intros y h. induction h as [|a h IH]; intros acc r x H.
  - inversion H; subst. destruct x; simpl; ring.
  - rewrite dy_axpy_cons in H.
    destruct (Dy.axpy y h (tl acc)) as [rest|] eqn:E; [|discriminate].
    assert (Hd : forall x0 x', dotD acc (x0 :: x') = dyR (hd Dy.zero acc) * x0 + dotD (tl acc) x').
    { intros. destruct acc; simpl; [rewrite dyR_zero; destruct x'; ring | reflexivity]. }
    destruct (Z.eqb_spec (Qnum a) 0) as [Ha|Ha].
    + apply some_eq in H. subst r. destruct x as [|x0 x']; [destruct acc; simpl; ring|].
      rewrite Hd. cbn [dotD dotR]. rewrite (IH _ _ x' E).
      assert (Hq : Q2R a = 0) by (unfold Q2R; rewrite Ha; lra). rewrite Hq. ring.
    + destruct (Dy.of_q a) as [d|] eqn:Ed; [|discriminate].
      apply some_eq in H. subst r.
      destruct x as [|x0 x']; [destruct acc; simpl; ring|].
      rewrite Hd. cbn [dotD dotR]. rewrite (IH _ _ x' E), dyR_add, dyR_mul, (dyR_of_q a d Ed). ring.
Qed.

Lemma dy_zeros_R : forall u x, forallb (fun a => Dy.eqb a Dy.zero) u = true -> dotD u x = 0.
Proof.
  induction u as [|a u IH]; intros [|b x] H; simpl in *; try reflexivity.
  apply andb_true_iff in H as [H1 H2]. rewrite (dy_eqb_R _ _ H1), dyR_zero, (IH x H2). ring.
Qed.

Lemma dy_veqb_R : forall u v x, Dy.veqb u v = true -> dotD u x = dotD v x.
Proof.
  induction u as [|a u IH]; intros [|b v] x H; simpl in H.
  - reflexivity.
  - rewrite (dy_zeros_R (b :: v) x H). destruct x; reflexivity.
  - rewrite (dy_zeros_R (a :: u) x H). destruct x; reflexivity.
  - apply andb_true_iff in H as [H1 H2]. destruct x as [|c x]; [reflexivity|]. simpl.
    rewrite (dy_eqb_R _ _ H1), (IH v x H2). reflexivity.
Qed.

Lemma dy_comb_cons : forall H i y w, Dy.comb H ((i, y) :: w) =
  match nth_error H i, Dy.of_q y with
  | Some (h, s), Some yd =>
      if BigZ.leb BigZ.zero (fst yd) then
        match Dy.comb H w with
        | Some (c, c0, st) =>
            match Dy.axpy yd (fst h) c with
            | Some c' => Some (c', qadd (qmul y (snd h)) c0, st || (s && Dy.pos yd))
            | None => None
            end
        | None => None
        end
      else None
  | _, _ => None
  end.
Proof. reflexivity. Qed.

Lemma dy_comb_R : forall H x, satR H x -> forall w c c0 st, Dy.comb H w = Some (c, c0, st) ->
  0 <= dotD c x + Q2R c0 /\ (st = true -> 0 < dotD c x + Q2R c0).
Proof.
  intros H x HS w. induction w as [|[i y] w IH]; intros c c0 st Hc.
  - simpl in Hc. inversion Hc; subst. rewrite RMicromega.Q2R_0.
    destruct x; simpl; split; try lra; discriminate.
  - rewrite dy_comb_cons in Hc. destruct (nth_error H i) as [[h s]|] eqn:Ei; [|discriminate].
    destruct (Dy.of_q y) as [yd|] eqn:Ey; [|discriminate].
    destruct (BigZ.leb BigZ.zero (fst yd)) eqn:Hy; [|discriminate].
    destruct (Dy.comb H w) as [[[c' c0'] st']|] eqn:Ec; [|discriminate].
    destruct (Dy.axpy yd (fst h) c') as [c''|] eqn:Ea; [|discriminate].
    apply some_eq in Hc.
    assert (Hc1 : c = c'') by congruence.
    assert (Hc2 : c0 = qadd (qmul y (snd h)) c0') by congruence.
    assert (Hc3 : st = st' || (s && Dy.pos yd)) by congruence. subst c c0 st. clear Hc.
    assert (Hy0 : 0 <= dyR yd).
    { rewrite BigZ.spec_leb, BigZ.spec_0 in Hy. apply Z.leb_le, IZR_le in Hy.
      destruct yd as [n e]; unfold dyR; cbn [fst snd] in *.
      apply Rmult_le_pos; [exact Hy | apply Rlt_le, pow2_pos]. }
    pose proof (Forall_nth_error _ _ _ _ HS Ei) as Hh. unfold sat_conR in Hh; simpl in Hh.
    assert (Hh0 : 0 <= evalR h x) by (destruct s; lra).
    destruct (IH _ _ _ eq_refl) as [Hc0 Hcs].
    assert (E : dotD c'' x + Q2R (qadd (qmul y (snd h)) c0') =
                dyR yd * evalR h x + (dotD c' x + Q2R c0')).
    { rewrite (dy_axpy_R _ _ _ _ x Ea), Q2R_qadd, Q2R_qmul, <- (dyR_of_q _ _ Ey).
      unfold evalR. ring. }
    rewrite E.
    assert (Hyh : 0 <= dyR yd * evalR h x) by (apply Rmult_le_pos; assumption).
    split; [lra|].
    intros Hst. apply orb_true_iff in Hst as [Hst|Hst].
    + specialize (Hcs Hst). lra.
    + apply andb_true_iff in Hst as [Hs Hp]. subst s. apply dy_pos_R in Hp.
      assert (0 < dyR yd * evalR h x) by (apply Rmult_lt_0_compat; assumption). lra.
Qed.

Lemma dy_entails_soundR : forall H g strict w x, satR H x -> Dy.entails H g strict w = true ->
  0 <= evalR g x /\ (strict = true -> 0 < evalR g x).
Proof.
  intros H g strict [D w] x HS He. unfold Dy.entails in He.
  destruct (Dy.of_q D) as [Dd|] eqn:ED; [|discriminate].
  destruct (Dy.pos Dd) eqn:HD; [|discriminate]. apply dy_pos_R in HD.
  destruct (Dy.comb H w) as [[[c c0] st]|] eqn:Ec; [|discriminate].
  destruct (Dy.axpy Dd (fst g) []) as [Dg|] eqn:Ea; [|discriminate].
  destruct (dy_comb_R H x HS w c c0 st Ec) as [Hc0 Hcs].
  destruct (Dy.veqb Dg c) eqn:Hz; [|discriminate].
  rewrite (dyR_of_q _ _ ED) in HD.
  (* D g(x) = c(x) + r0 *)
  assert (Er : Q2R D * evalR g x = dotD c x + Q2R (qmul D (snd g))).
  { rewrite <- (dy_veqb_R _ _ x Hz), (dy_axpy_R _ _ _ _ x Ea), Q2R_qmul, (dyR_of_q _ _ ED).
    destruct x; unfold evalR; simpl; ring. }
  destruct (scale_pos_R _ HD) as [Hpos Hspos].
  set (r0 := qmul D (snd g)) in *.
  destruct strict.
  - apply orb_true_iff in He as [Hr|Hr].
    + apply andb_true_iff in Hr as [Hst Hr]. subst st.
      rewrite qleb_Qle_bool in Hr. apply Qle_bool_R in Hr.
      specialize (Hcs eq_refl). split; intros; [apply Hpos | apply Hspos]; lra.
    + apply negb_true_iff in Hr. rewrite qleb_Qle_bool in Hr. apply Qnle_bool_R in Hr.
      split; intros; [apply Hpos | apply Hspos]; lra.
  - rewrite qleb_Qle_bool in He. apply Qle_bool_R in He.
    split; [apply Hpos; lra | discriminate].
Qed.

Lemma entails_w_soundR : forall H g strict w x, satR H x -> entails_w H g strict w = true ->
  0 <= evalR g x /\ (strict = true -> 0 < evalR g x).
Proof.
  intros H g strict w x HS He. unfold entails_w in He.
  destruct (Dy.entails H g strict w) eqn:Hd.
  - exact (dy_entails_soundR H g strict w x HS Hd).
  - exact (entails_soundR H g strict w x HS He).
Qed.

Lemma entails_w_ge : forall H g w x, satR H x -> entails_w H g false w = true -> 0 <= evalR g x.
Proof. intros. apply (entails_w_soundR H g false w x); assumption. Qed.

Lemma entails_w_gt : forall H g w x, satR H x -> entails_w H g true w = true -> 0 < evalR g x.
Proof. intros. apply (entails_w_soundR H g true w x); auto. Qed.
