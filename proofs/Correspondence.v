(* Correspondence.v -- layer correspondences (exactmax/kernel/correspondence.py): two Maxout
   networks A, B of one input dimension and one depth D are equal at every real input when a
   checked correspondence relates them layer by layer:

     corr_sound : corr_ok a b maps = true ->
       forall x : list R, length x = mo_dim a -> maxoutR a x = maxoutR b x.

   The certificate gives affine maps (M_l, m_l), l = 1..D, from B's layer-l values to A's;
   the claim (C_l) is h^A_l = M_l h^B_l + m_l ((C_0): A's and B's inputs are the same x).
   Given (C_{l-1}) and h = h^B_{l-1}, unit i of A's layer l is max S_A, S_A the pieces of the
   unit pulled back through (M_{l-1}, m_{l-1}) (pull: h -> w . (M h + m) + b is the map
   (w M, w . m + b) of h), and row i of (C_l) is m_l[i] + sum_u c_u max_k B_{u,k}(h),
   c = M_l[i].  Where c_u >= 0 (or unit u of B has one distinct piece),
   c_u max_k B_{u,k} = max_k c_u B_{u,k}, and a sum of maxima is the max over the choices of
   one piece per unit: the right side is max S_B, S_B = { m_l[i] + sum_{c_u <> 0} c_u
   B_{u,k_u} } (sums).  The check (over Q): S_A and S_B are the same set of affine maps
   (Checker.same_set, coefficients compared by Qeq_bool), which gives (C_l) since the max of
   a list of reals depends only on its set of values (Sound.maxlR_same).  The outputs:
   y_A - y_B, written over h^B_{D-1} as a sum of maxima the same way, is the map 0 (every
   element of its set is 0).

   The sets are lists without repeats (dedup), as the kernel's Python sets, and the kernel's
   bound on their size (COMBINATIONS = 2^14) is checked too, so that both accept the same
   certificates.  Only the standard axioms of Coq's Reals are used. *)

From Coq Require Import QArith Qreals Reals Lra Lia List Bool.
From ExactMax Require Import Checker Sound Build Maxout.
Import ListNotations.

(* ------------------------------------------------------------------ *)
(** * The check, over Q *)

Local Open Scope Q_scope.

(* an affine map (M, m): h -> M h + m, M given by its rows *)
Definition amap := (list (list Q) * list Q)%type.

Definition paff (p : piece) : aff := (pw p, pb p).

(* acc + (h -> w . (M h + m)), as an affine map of h *)
Fixpoint pull (w : list Q) (M : list (list Q)) (m : list Q) (acc : aff) : aff :=
  match w, M, m with
  | a :: w', r :: M', c :: m' =>
      pull w' M' m' (if qeqb a 0 then acc else aadd acc (ascale a (r, c)))
  | _, _, _ => acc
  end.

(* a piece of A pulled back to B's values: through (M, m), or as it is on the inputs *)
Definition pulled (prev : option amap) (p : piece) : aff :=
  match prev with None => paff p | Some (M, m) => pull (pw p) M m ([], pb p) end.

(* the list without repeats (up to Checker.aeqb), as a set *)
Fixpoint dedup_acc (l acc : list aff) : list aff :=
  match l with
  | [] => acc
  | a :: l' => dedup_acc l' (if memb a acc then acc else a :: acc)
  end.

Definition dedup (l : list aff) : list aff := dedup_acc l [].

(* the kernel's bound on the size of a set S_B *)
Definition COMBINATIONS : Z := 16384.

(* the pieces of a unit of B as a set, None when it has none, or several and c < 0 *)
Definition unit_set (c : Q) (u : list piece) : option (list aff) :=
  match dedup (map paff u) with
  | [] => None
  | [p] => Some [p]
  | P => if qleb 0 c then Some P else None
  end.

(* { s + c p : s in S, p in P } *)
Definition step (S : list aff) (c : Q) (P : list aff) : list aff :=
  dedup (flat_map (fun s => map (fun p => aadd s (ascale c p)) P) S).

(* S + sum_u c_u max (unit u), as the set of the sums over the choices of a piece per unit *)
Fixpoint sums (c : list Q) (L : list (list piece)) (S : list aff) : option (list aff) :=
  match c, L with
  | cu :: c', u :: L' =>
      if qeqb cu 0 then sums c' L' S else
      match unit_set cu u with
      | None => None
      | Some P =>
          if Z.ltb COMBINATIONS (Z.of_nat (length S) * Z.of_nat (length P)) then None
          else sums c' L' (step S cu P)
      end
  | _, _ => Some S
  end.

(* unit u of A (row r, constant c of the map): S_A = S_B *)
Definition unit_ok (prev : option amap) (u : list piece) (r : list Q) (c : Q)
                   (LB : list (list piece)) : bool :=
  match sums r LB [([], c)] with
  | Some SB => same_set (map (pulled prev) u) SB
  | None => false
  end.

Fixpoint units_ok (prev : option amap) (LA : list (list piece)) (M : list (list Q))
                  (m : list Q) (LB : list (list piece)) : bool :=
  match LA, M, m with
  | u :: LA', r :: M', c :: m' => if unit_ok prev u r c LB then units_ok prev LA' M' m' LB
                                  else false
  | [], [], [] => true
  | _, _, _ => false
  end.

(* layer l: M_l has a row per unit of A and a column per unit of B *)
Definition layer_ok (prev : option amap) (LA LB : list (list piece)) (Mm : amap) : bool :=
  forallb (fun r => Nat.eqb (length r) (length LB)) (fst Mm) &&
  units_ok prev LA (fst Mm) (snd Mm) LB.

(* the outputs as affine maps of h^B_D: A's pulled back through (M_D, m_D) (its rows M_D's
   when A has no output map), B's (the unit vectors when it has none) *)
Definition rows_a (Mm : amap) (o : option (list (list Q) * list Q)) : list aff :=
  match o with
  | None => combine (fst Mm) (snd Mm)
  | Some (W, b) => map (fun r => pull (fst r) (fst Mm) (snd Mm) ([], snd r)) (combine W b)
  end.

Definition rows_b (k : nat) (o : option (list (list Q) * list Q)) : list aff :=
  match o with
  | None => map (fun i => (basis k i 1, 0)) (seq 0 k)
  | Some (W, b) => combine W b
  end.

Definition zero_aff (a : aff) : bool := vzero (fst a) && qeqb (snd a) 0.

(* y_A - y_B, a sum of maxima of B's last layer LB, is the map 0 *)
Definition diff_zero (LB : list (list piece)) (ra rb : aff) : bool :=
  let d := aadd ra (ascale (-1) rb) in
  match sums (fst d) LB [([], snd d)] with Some Z => forallb zero_aff Z | None => false end.

Definition out_ok (Mm : amap) (LB : list (list piece)) (oa ob : option (list (list Q) * list Q))
  : bool :=
  forall2b (diff_zero LB) (rows_a Mm oa) (rows_b (length LB) ob).

Fixpoint layers_ok (prev : option amap) (LAs LBs : list (list (list piece))) (maps : list amap)
                   (oa ob : option (list (list Q) * list Q)) : bool :=
  match LAs, LBs, maps with
  | LA :: LAs', LB :: LBs', Mm :: maps' =>
      if layer_ok prev LA LB Mm then
        match LAs', LBs', maps' with
        | [], [], [] => out_ok Mm LB oa ob
        | _, _, _ => layers_ok (Some Mm) LAs' LBs' maps' oa ob
        end
      else false
  | _, _, _ => false
  end.

(** The check: both networks well-shaped, of one input dimension, and the maps relate them
    layer by layer and at the outputs. *)
Definition corr_ok (a b : maxout) (maps : list amap) : bool :=
  Nat.eqb (mo_dim a) (mo_dim b) && maxout_shaped a && maxout_shaped b &&
  layers_ok None (mo_layers a) (mo_layers b) maps (mo_out a) (mo_out b).

(* ------------------------------------------------------------------ *)
(** * Lists of reals: their maxima *)

Local Open Scope R_scope.

Definition vals (S : list aff) (h : list R) : list R := map (fun a => evalR a h) S.

Lemma maxlR_upper : forall l w, In w l -> w <= maxlR l.
Proof. intros [|a l] w H; [destruct H|]. exact (maxlR_aux_ub l a w H). Qed.

Lemma maxlR_In : forall l, l <> [] -> In (maxlR l) l.
Proof. intros [|a l] H; [congruence|]. exact (maxlR_aux_in l a). Qed.

(* the max of a list is determined by its set of values: lists of the same values (mutual
   inclusion) have the same max *)
Lemma same_set_max : forall A B h, same_set A B = true -> maxlR (vals A h) = maxlR (vals B h).
Proof.
  intros A B h H. unfold same_set in H. apply andb_true_iff in H as [HAB HBA].
  rewrite forallb_forall in HAB, HBA. unfold vals.
  apply maxlR_same; intros w Hw; apply in_map_iff in Hw as [a [<- Ha]].
  - specialize (HAB a Ha). apply memb_In in HAB as [b [Hb E]].
    rewrite (aeqb_soundR _ _ h E). apply (in_map (fun a => evalR a h)). exact Hb.
  - specialize (HBA a Ha). apply memb_In in HBA as [b [Hb E]].
    rewrite (aeqb_soundR _ _ h E). apply (in_map (fun a => evalR a h)). exact Hb.
Qed.

Lemma dedup_acc_sub : forall l acc b, In b (dedup_acc l acc) -> In b l \/ In b acc.
Proof.
  induction l as [|a l IH]; intros acc b H; cbn [dedup_acc] in H; [right; exact H|].
  destruct (IH _ _ H) as [H1|H1]; [left; right; exact H1|].
  destruct (memb a acc); [right; exact H1|].
  destruct H1 as [<-|H1]; [left; left; reflexivity | right; exact H1].
Qed.

Lemma dedup_acc_keeps : forall l acc b, In b acc -> In b (dedup_acc l acc).
Proof.
  induction l as [|a l IH]; intros acc b H; cbn [dedup_acc]; [exact H|].
  apply IH. destruct (memb a acc); [exact H | right; exact H].
Qed.

Lemma dedup_acc_rep : forall l acc a h, In a l \/ In a acc ->
  exists b, In b (dedup_acc l acc) /\ evalR a h = evalR b h.
Proof.
  induction l as [|c l IH]; intros acc a h H; cbn [dedup_acc].
  - destruct H as [[]|H]. exists a. split; [exact H | reflexivity].
  - destruct H as [[->|H]|H]; [| apply IH; left; exact H | apply IH; right;
      destruct (memb c acc); [exact H | right; exact H]].
    destruct (memb a acc) eqn:E.
    + apply memb_In in E as [b [Hb E]]. exists b.
      split; [apply dedup_acc_keeps; exact Hb | apply aeqb_soundR; exact E].
    + exists a. split; [apply dedup_acc_keeps; left; reflexivity | reflexivity].
Qed.

Lemma dedup_max : forall l h, maxlR (vals (dedup l) h) = maxlR (vals l h).
Proof.
  intros l h. unfold vals, dedup. apply maxlR_same; intros w Hw; apply in_map_iff in Hw as [a [<- Ha]].
  - destruct (dedup_acc_sub l [] a Ha) as [H|[]]. apply (in_map (fun a => evalR a h)). exact H.
  - destruct (dedup_acc_rep l [] a h (or_introl Ha)) as [b [Hb E]]. rewrite E.
    apply (in_map (fun a => evalR a h)). exact Hb.
Qed.

Lemma dedup_nonempty : forall l, l <> [] -> dedup l <> [].
Proof.
  intros [|a l] H; [congruence|]. intros E.
  destruct (dedup_acc_rep (a :: l) [] a (Rmax 0 0 :: []) (or_introl (or_introl eq_refl)))
    as [b [Hb _]].
  unfold dedup in E. rewrite E in Hb. destruct Hb.
Qed.

Lemma evalR_axpy : forall s c p h, evalR (aadd s (ascale c p)) h = evalR s h + Q2R c * evalR p h.
Proof. intros. rewrite evalR_aadd, evalR_ascale. reflexivity. Qed.

(* a sum of two maxima is the max over the pairs: max S + c max P = max {s + c p}, c >= 0 (or
   P of one element) *)
Lemma step_max : forall S c P h, S <> [] -> P <> [] ->
  (0 <= Q2R c \/ exists p, P = [p]) ->
  step S c P <> [] /\ maxlR (vals (step S c P) h) = maxlR (vals S h) + Q2R c * maxlR (vals P h).
Proof.
  intros S c P h HS HP Hc. unfold step.
  set (F := flat_map (fun s => map (fun p => aadd s (ascale c p)) P) S).
  destruct (in_map_iff (fun a => evalR a h) S (maxlR (vals S h))) as [Hs _].
  destruct (Hs (maxlR_In _ (fun E => HS (map_eq_nil _ _ E)))) as [s0 [Es Hs0]].
  destruct (in_map_iff (fun a => evalR a h) P (maxlR (vals P h))) as [Hp _].
  destruct (Hp (maxlR_In _ (fun E => HP (map_eq_nil _ _ E)))) as [p0 [Ep Hp0]].
  assert (In0 : In (aadd s0 (ascale c p0)) F).
  { apply in_flat_map. exists s0. split; [exact Hs0|].
    apply (in_map (fun p => aadd s0 (ascale c p))). exact Hp0. }
  split.
  - apply dedup_nonempty. intros E. fold F in E. rewrite E in In0. destruct In0.
  - rewrite dedup_max. fold F. apply maxlR_spec.
    + apply in_map_iff. exists (aadd s0 (ascale c p0)). split; [|exact In0].
      rewrite evalR_axpy, Es, Ep. reflexivity.
    + intros w Hw. apply in_map_iff in Hw as [a [<- Ha]].
      apply in_flat_map in Ha as [s [Hs1 Ha]]. apply in_map_iff in Ha as [p [<- Hp1]].
      rewrite evalR_axpy.
      assert (Ls : evalR s h <= maxlR (vals S h)) by (apply maxlR_upper; apply (in_map (fun a => evalR a h)); exact Hs1).
      assert (Lp : Q2R c * evalR p h <= Q2R c * maxlR (vals P h)).
      { destruct Hc as [Hc|[q ->]].
        - apply Rmult_le_compat_l; [exact Hc|]. apply maxlR_upper. apply (in_map (fun a => evalR a h)). exact Hp1.
        - destruct Hp1 as [<-|[]]. cbn. lra. }
      lra.
Qed.

(* ------------------------------------------------------------------ *)
(** * The sets S_B: sums of maxima *)

Lemma dotR_nil_r : forall u, dotR u [] = 0.
Proof. intros [|a u]; reflexivity. Qed.

Lemma unit_set_sound : forall c u P h, unit_set c u = Some P ->
  P <> [] /\ (0 <= Q2R c \/ exists p, P = [p]) /\
  maxlR (vals P h) = maxlR (map (fun p => pieceR p h) u).
Proof.
  intros c u P h H. unfold unit_set in H.
  assert (Hm : forall P', dedup (map paff u) = P' ->
                 maxlR (vals P' h) = maxlR (map (fun p => pieceR p h) u)).
  { intros P' <-. rewrite dedup_max. unfold vals. rewrite map_map. reflexivity. }
  destruct (dedup (map paff u)) as [|p [|p' P']] eqn:E; [discriminate| |].
  - inversion H; subst P. split; [congruence|]. split; [right; exists p; reflexivity|].
    apply Hm. reflexivity.
  - destruct (qleb 0 c) eqn:Hc; [|discriminate]. inversion H; subst P.
    split; [congruence|]. split; [|apply Hm; reflexivity]. left.
    rewrite qleb_Qle_bool in Hc. apply Qle_bool_imp_le, Qle_Rle in Hc.
    rewrite RMicromega.Q2R_0 in Hc. exact Hc.
Qed.

Lemma sums_sound : forall c L S S' h, sums c L S = Some S' -> S <> [] ->
  S' <> [] /\ maxlR (vals S' h) = maxlR (vals S h) + dotR c (layerR L h).
Proof.
  induction c as [|cu c IH]; intros L S S' h H HS.
  - cbn in H. inversion H; subst. split; [exact HS|]. cbn. lra.
  - destruct L as [|u L]; cbn [sums] in H.
    + inversion H; subst. split; [exact HS|]. cbn [layerR map]. rewrite dotR_nil_r. lra.
    + cbn [layerR map dotR]. fold (layerR L h).
      destruct (qeqb cu 0) eqn:Z0.
      * apply qeqb_R in Z0. rewrite Z0, RMicromega.Q2R_0.
        destruct (IH L S S' h H HS) as [N E]. split; [exact N|]. rewrite E. lra.
      * destruct (unit_set cu u) as [P|] eqn:U; [|discriminate].
        destruct (Z.ltb _ _); [discriminate|].
        destruct (unit_set_sound cu u P h U) as [HP [Hc Hm]].
        destruct (step_max S cu P h HS HP Hc) as [N1 E1].
        destruct (IH L _ S' h H N1) as [N E]. split; [exact N|].
        rewrite E, E1, Hm. lra.
Qed.

Lemma max_const : forall c h, maxlR (vals [([], c)] h) = Q2R c.
Proof. intros c h. unfold vals, evalR. cbn [map maxlR maxlR_aux fst snd dotR]. lra. Qed.

(* ------------------------------------------------------------------ *)
(** * Pulled-back pieces *)

Definition prevR (prev : option amap) (h : list R) : list R :=
  match prev with None => h | Some (M, m) => affineR M m h end.

Lemma pull_sound : forall w M m acc h,
  evalR (pull w M m acc) h = evalR acc h + dotR w (affineR M m h).
Proof.
  induction w as [|a w IH]; intros M m acc h; [cbn; lra|].
  destruct M as [|r M]; [cbn; lra|]. destruct m as [|c m]; [cbn; lra|].
  cbn [pull]. rewrite IH. unfold affineR. cbn [combine map dotR fst snd]. fold (affineR M m h).
  destruct (qeqb a 0) eqn:Z0.
  - apply qeqb_R in Z0. rewrite Z0, RMicromega.Q2R_0. lra.
  - rewrite evalR_aadd, evalR_ascale. unfold evalR at 2. cbn [fst snd]. lra.
Qed.

(* pulled-back pieces evaluate equally *)
Lemma pulled_sound : forall prev p h, pieceR p (prevR prev h) = evalR (pulled prev p) h.
Proof.
  intros [[M m]|] p h; cbn [prevR pulled]; [|reflexivity].
  rewrite pull_sound. unfold pieceR, evalR. cbn [fst snd dotR]. lra.
Qed.

(* ------------------------------------------------------------------ *)
(** * A layer, the outputs, the network *)

Lemma unit_ok_sound : forall prev u r c LB h, unit_ok prev u r c LB = true ->
  maxlR (map (fun p => pieceR p (prevR prev h)) u) = dotR r (layerR LB h) + Q2R c.
Proof.
  intros prev u r c LB h H. unfold unit_ok in H.
  destruct (sums r LB [([], c)]) as [SB|] eqn:E; [|discriminate].
  destruct (sums_sound r LB _ SB h E ltac:(congruence)) as [_ Es].
  transitivity (maxlR (vals (map (pulled prev) u) h)).
  - unfold vals. rewrite map_map. f_equal. apply map_ext. intros p. apply pulled_sound.
  - rewrite (same_set_max _ _ h H), Es, max_const. lra.
Qed.

Lemma units_ok_sound : forall prev LA M m LB h, units_ok prev LA M m LB = true ->
  layerR LA (prevR prev h) = affineR M m (layerR LB h).
Proof.
  induction LA as [|u LA IH]; intros M m LB h H.
  - destruct M, m; try discriminate. reflexivity.
  - destruct M as [|r M]; [discriminate|]. destruct m as [|c m]; [discriminate|].
    cbn [units_ok] in H. destruct (unit_ok prev u r c LB) eqn:U; [|discriminate].
    unfold layerR, affineR in *. cbn [map combine fst snd]. f_equal.
    + apply unit_ok_sound. exact U.
    + apply IH. exact H.
Qed.

Definition outR (o : option (list (list Q) * list Q)) (h : list R) : list R :=
  match o with None => h | Some (W, b) => affineR W b h end.

Lemma maxoutR_outR : forall net x, maxoutR net x = outR (mo_out net) (layersR (mo_layers net) x).
Proof. intros net x. unfold maxoutR, outR. destruct (mo_out net) as [[W b]|]; reflexivity. Qed.

Lemma rows_a_sound : forall M m o h,
  outR o (affineR M m h) = vals (rows_a (M, m) o) h.
Proof.
  intros M m [[W b]|] h; cbn [outR rows_a fst snd]; unfold vals.
  - unfold affineR at 1. rewrite map_map. apply map_ext. intros [w c].
    rewrite pull_sound. unfold evalR. cbn [fst snd dotR]. lra.
  - reflexivity.
Qed.

Lemma rows_b_sound : forall o h, outR o h = vals (rows_b (length h) o) h.
Proof.
  intros [[W b]|] h; cbn [outR rows_b]; unfold vals; [reflexivity|].
  rewrite map_map. rewrite <- (map_nth_seq_from h []) at 1. cbn [length app].
  apply map_ext_in. intros i Hi. apply in_seq in Hi.
  unfold evalR. cbn [fst snd]. rewrite dotR_basis by lia. rewrite RMicromega.Q2R_0, RMicromega.Q2R_1.
  lra.
Qed.

Lemma diff_zero_sound : forall LB ra rb h, diff_zero LB ra rb = true ->
  evalR ra (layerR LB h) = evalR rb (layerR LB h).
Proof.
  intros LB ra rb h H. unfold diff_zero in H.
  set (d := aadd ra (ascale (-1) rb)) in H.
  destruct (sums (fst d) LB [([], snd d)]) as [S|] eqn:E; [|discriminate].
  destruct (sums_sound _ _ _ S h E ltac:(congruence)) as [N Es].
  assert (Z : maxlR (vals S h) = 0).
  { apply maxlR_spec.
    - destruct S as [|s S]; [congruence|]. cbn [forallb] in H. apply andb_true_iff in H as [H _].
      unfold zero_aff in H. apply andb_true_iff in H as [H1 H2]. left.
      rewrite (evalR_const s h H1), (qeqb_R _ _ H2). apply RMicromega.Q2R_0.
    - intros w Hw. apply in_map_iff in Hw as [s [<- Hs]]. rewrite forallb_forall in H.
      specialize (H s Hs). unfold zero_aff in H. apply andb_true_iff in H as [H1 H2].
      rewrite (evalR_const s h H1), (qeqb_R _ _ H2), RMicromega.Q2R_0. lra. }
  assert (Ed : evalR d (layerR LB h) = 0).
  { rewrite Z, max_const in Es. destruct d as [v e]. unfold evalR. cbn [fst snd] in Es |- *.
    lra. }
  unfold d in Ed. rewrite evalR_axpy, Q2R_m1 in Ed. lra.
Qed.

Lemma forall2b_vals : forall LB RA RB h, forall2b (diff_zero LB) RA RB = true ->
  vals RA (layerR LB h) = vals RB (layerR LB h).
Proof.
  induction RA as [|ra RA IH]; intros [|rb RB] h H; cbn [forall2b] in H; try discriminate;
    [reflexivity|].
  apply andb_true_iff in H as [H1 H2]. unfold vals in *. cbn [map].
  rewrite (diff_zero_sound LB ra rb h H1). f_equal. apply IH. exact H2.
Qed.

Lemma out_ok_sound : forall M m LB oa ob h, out_ok (M, m) LB oa ob = true ->
  outR oa (affineR M m (layerR LB h)) = outR ob (layerR LB h).
Proof.
  intros M m LB oa ob h H. unfold out_ok in H.
  rewrite rows_a_sound, rows_b_sound. unfold layerR at 2. rewrite map_length.
  apply forall2b_vals. exact H.
Qed.

Lemma layers_ok_sound : forall LAs prev LBs maps oa ob h, layers_ok prev LAs LBs maps oa ob = true ->
  outR oa (layersR LAs (prevR prev h)) = outR ob (layersR LBs h).
Proof.
  induction LAs as [|LA LAs IH]; intros prev LBs maps oa ob h H; [discriminate|].
  destruct LBs as [|LB LBs]; [discriminate|]. destruct maps as [|[M m] maps]; [discriminate|].
  cbn [layers_ok] in H. destruct (layer_ok prev LA LB (M, m)) eqn:L; [|discriminate].
  unfold layer_ok in L. apply andb_true_iff in L as [_ L]. cbn [fst snd] in L.
  cbn [layersR]. rewrite (units_ok_sound prev LA M m LB h L).
  change (affineR M m (layerR LB h)) with (prevR (Some (M, m)) (layerR LB h)).
  destruct LAs as [|LA' LAs'], LBs as [|LB' LBs'], maps as [|Mm' maps'];
    try exact (IH _ _ _ _ _ _ H).
  cbn [layersR prevR]. apply out_ok_sound. exact H.
Qed.

(** Two Maxout networks related by a checked correspondence are equal at every real input. *)
Theorem corr_sound : forall a b maps, corr_ok a b maps = true ->
  forall x : list R, length x = mo_dim a -> maxoutR a x = maxoutR b x.
Proof.
  intros a b maps H x _. unfold corr_ok in H. apply andb_true_iff in H as [_ H].
  rewrite !maxoutR_outR. exact (layers_ok_sound _ None _ _ _ _ x H).
Qed.
