(* Build.v -- building programs node by node, with hash-consing, as exactmax's kernel does
   (exactmax/kernel/program.py, class _Builder), and the invariant that makes it sound:
   every node reads only nodes before it, and a node is reused only when it is equal to the
   one that would have been added.

   Expressions are sparse linear forms  sum_i a_i x_i + c + sum_j c_j v_j  over the inputs x
   and the nodes v built so far; their coefficient lists are sorted by index without zero
   entries, exactly as the kernel keeps them, so that the programs built here are the kernel's
   programs node for node. *)

From Coq Require Import QArith Qreals Reals Lra Lia List Bool.
From ExactMax Require Import Checker Sound.
Import ListNotations.

(* ------------------------------------------------------------------ *)
(** * Sparse vectors *)

Definition sparse := list (nat * Q).

Fixpoint sp_add (u : sparse) : sparse -> sparse :=
  match u with
  | [] => fun v => v
  | (i, a) :: u' =>
      fix inner (v : sparse) : sparse :=
        match v with
        | [] => u
        | (j, b) :: v' =>
            if (i <? j)%nat then (i, a) :: sp_add u' v
            else if (j <? i)%nat then (j, b) :: inner v'
            else let s := Qred (a + b) in
                 if Qeq_bool s 0 then sp_add u' v' else (i, s) :: sp_add u' v'
        end
  end.

Definition sp_scale (a : Q) (u : sparse) : sparse := map (fun t => (fst t, Qred (a * snd t))) u.

Local Open Scope R_scope.

Lemma sumsp_cons : forall i a u (w : list R), sumsp ((i, a) :: u) w = Q2R a * nth i w 0 + sumsp u w.
Proof. reflexivity. Qed.

Lemma sumsp_add : forall u v w, sumsp (sp_add u v) w = sumsp u w + sumsp v w.
Proof.
  induction u as [|[i a] u IH]; intros v w.
  - cbn [sp_add]. unfold sumsp at 2. cbn [fold_right]. lra.
  - induction v as [|[j b] v IHv].
    + cbn [sp_add]. unfold sumsp at 3. cbn [fold_right]. lra.
    + cbn [sp_add]. destruct (i <? j)%nat eqn:E1.
      * rewrite !sumsp_cons, IH, sumsp_cons. lra.
      * destruct (j <? i)%nat eqn:E2.
        -- rewrite sumsp_cons. cbn [sp_add] in IHv. rewrite IHv, !sumsp_cons. lra.
        -- assert (i = j) by (apply Nat.ltb_ge in E1; apply Nat.ltb_ge in E2; lia). subst j.
           destruct (Qeq_bool (Qred (a + b)) 0) eqn:E3.
           ++ rewrite IH, !sumsp_cons. apply Qeq_bool_eq, Qeq_eqR in E3.
              rewrite Q2R_red, Q2R_plus, RMicromega.Q2R_0 in E3.
              assert (Q2R a * nth i w 0 + Q2R b * nth i w 0 = 0).
              { rewrite <- Rmult_plus_distr_r, E3. lra. }
              lra.
           ++ rewrite sumsp_cons, IH, !sumsp_cons, Q2R_red, Q2R_plus. lra.
Qed.

Lemma sumsp_scale : forall a u w, sumsp (sp_scale a u) w = Q2R a * sumsp u w.
Proof.
  intros a u w. induction u as [|[i b] u IH]; unfold sp_scale in *; cbn [map fst snd].
  - unfold sumsp; cbn. lra.
  - rewrite !sumsp_cons, IH, Q2R_red, Q2R_mult. lra.
Qed.

Definition below (n : nat) (u : sparse) : Prop := Forall (fun t => (fst t < n)%nat) u.

Lemma below_add : forall n u v, below n u -> below n v -> below n (sp_add u v).
Proof.
  intros n u. induction u as [|[i a] u IH]; intros v Hu Hv; [exact Hv|].
  inversion Hu as [|? ? Hi Hu']; subst.
  induction v as [|[j b] v IHv]; cbn [sp_add]; [exact Hu|].
  inversion Hv as [|? ? Hj Hv']; subst.
  destruct (i <? j)%nat; [constructor; [exact Hi | apply IH; assumption]|].
  destruct (j <? i)%nat; [constructor; [exact Hj | apply IHv; exact Hv']|].
  destruct (Qeq_bool _ 0); [apply IH; assumption | constructor; [exact Hi | apply IH; assumption]].
Qed.

Lemma below_scale : forall n a u, below n u -> below n (sp_scale a u).
Proof.
  intros n a u H. unfold below, sp_scale in *. apply Forall_map. eapply Forall_impl; [|exact H].
  intros t Ht. exact Ht.
Qed.

Lemma below_mono : forall n m u, (n <= m)%nat -> below n u -> below m u.
Proof. intros n m u Hnm H. eapply Forall_impl; [|exact H]. intros t Ht. cbn in *. lia. Qed.

(* ------------------------------------------------------------------ *)
(** * Expressions *)

Definition expr := (sparse * Q * sparse)%type.   (* inputs, constant, earlier nodes *)

Definition evalE (e : expr) (x env : list R) : R :=
  let '(xs, c, ts) := e in sumsp xs x + Q2R c + sumsp ts env.

Definition ebelow (n : nat) (e : expr) : Prop := let '(_, _, ts) := e in below n ts.

(* acc + a * e, dropping zero coefficients (the kernel's _axpy) *)
Definition axpy (a : Q) (e acc : expr) : expr :=
  if Qeq_bool a 0 then acc else
  let '(xs, c, ts) := e in
  let '(bx, bc, bt) := acc in
  (sp_add bx (sp_scale a xs), Qred (bc + a * c), sp_add bt (sp_scale a ts)).

(* sum_k row_k e_k + c over the pairs of row and es (the kernel's _combine) *)
Fixpoint lin_comb (row : list Q) (es : list expr) (acc : expr) : expr :=
  match row, es with
  | a :: row', e :: es' => lin_comb row' es' (axpy a e acc)
  | _, _ => acc
  end.

Definition combine_e (row : list Q) (es : list expr) (c : Q) : expr := lin_comb row es ([], c, []).

Lemma evalE_axpy : forall a e acc x env,
  evalE (axpy a e acc) x env = evalE acc x env + Q2R a * evalE e x env.
Proof.
  intros a [[xs c] ts] [[bx bc] bt] x env. unfold axpy.
  destruct (Qeq_bool a 0) eqn:Ea.
  - apply Qeq_bool_eq, Qeq_eqR in Ea. rewrite Ea, RMicromega.Q2R_0. lra.
  - cbn [evalE]. rewrite !sumsp_add, !sumsp_scale, Q2R_red, Q2R_plus, Q2R_mult. lra.
Qed.

Lemma evalE_lin_comb : forall row es acc x env,
  evalE (lin_comb row es acc) x env = evalE acc x env + dotR row (map (fun e => evalE e x env) es).
Proof.
  induction row as [|a row IH]; intros [|e es] acc x env; cbn [lin_comb map dotR]; try lra.
  rewrite IH, evalE_axpy. lra.
Qed.

Lemma evalE_combine : forall row es c x env,
  evalE (combine_e row es c) x env = dotR row (map (fun e => evalE e x env) es) + Q2R c.
Proof.
  intros. unfold combine_e. rewrite evalE_lin_comb. cbn [evalE]. unfold sumsp; cbn. lra.
Qed.

Lemma ebelow_axpy : forall n a e acc, ebelow n e -> ebelow n acc -> ebelow n (axpy a e acc).
Proof.
  intros n a [[xs c] ts] [[bx bc] bt] He Ha. unfold axpy. destruct (Qeq_bool a 0); [exact Ha|].
  cbn in *. apply below_add; [exact Ha | apply below_scale; exact He].
Qed.

Lemma ebelow_lin_comb : forall n row es acc, Forall (ebelow n) es -> ebelow n acc ->
  ebelow n (lin_comb row es acc).
Proof.
  intros n row. induction row as [|a row IH]; intros [|e es] acc Hes Ha; cbn [lin_comb]; try exact Ha.
  inversion Hes; subst. apply IH; [assumption | apply ebelow_axpy; assumption].
Qed.

Lemma ebelow_combine : forall n row es c, Forall (ebelow n) es -> ebelow n (combine_e row es c).
Proof. intros. apply ebelow_lin_comb; [assumption | constructor]. Qed.

Lemma ebelow_mono : forall n m e, (n <= m)%nat -> ebelow n e -> ebelow m e.
Proof. intros n m [[xs c] ts] H1 H2. exact (below_mono n m ts H1 H2). Qed.

(* ------------------------------------------------------------------ *)
(** * The builder *)

(* (written with if, not &&: the VM evaluates both arguments of &&, and most comparisons of
   the lookup below fail at their first entry) *)
Fixpoint sp_eqb (u v : sparse) : bool :=
  match u, v with
  | [], [] => true
  | (i, a) :: u', (j, b) :: v' =>
      if Nat.eqb i j then if qeqb a b then sp_eqb u' v' else false else false
  | _, _ => false
  end.

Fixpoint nat_list_eqb (u v : list nat) : bool :=
  match u, v with
  | [], [] => true
  | i :: u', j :: v' => if Nat.eqb i j then nat_list_eqb u' v' else false
  | _, _ => false
  end.

Definition node_eqb (n m : node) : bool :=
  match n, m with
  | NLin xs c ts, NLin xs' c' ts' =>
      if sp_eqb ts ts' then if qeqb c c' then sp_eqb xs xs' else false else false
  | NMax a, NMax a' => nat_list_eqb a a'
  | NSel p, NSel p' =>
      if nat_list_eqb (map fst p) (map fst p') then nat_list_eqb (map snd p) (map snd p') else false
  | _, _ => false
  end.

Fixpoint find_node (n : node) (st : list node) (k : nat) : option nat :=
  match st with
  | [] => None
  | m :: st' => if node_eqb n m then Some k else find_node n st' (S k)
  end.

(* the index of n: an equal node already built, or n appended *)
Definition add (n : node) (st : list node) : list node * nat :=
  match find_node n st 0 with
  | Some k => (st, k)
  | None => (st ++ [n], length st)
  end.

(* the node holding e: e's only node if e is 1 * v_j, else a new Lin node *)
Definition node_of (e : expr) (st : list node) : list node * nat :=
  match e with
  | ([], c, [(j, a)]) =>
      if Qeq_bool c 0 && Qeq_bool a 1 then (st, j) else add (NLin [] c [(j, a)]) st
  | (xs, c, ts) => add (NLin xs c ts) st
  end.

Definition wf (st : list node) : Prop :=
  forall k, (k < length st)%nat -> forall j, In j (reads (nth k st (NMax []))) -> (j < k)%nat.

Definition extends (st st' : list node) : Prop := exists more, st' = st ++ more.

Lemma runR_nodes_app : forall st more x env, runR (st ++ more) x env = runR more x (runR st x env).
Proof. induction st as [|n st IH]; intros; cbn [app runR]; [reflexivity | apply IH]. Qed.

Lemma runR_length : forall st x env, length (runR st x env) = (length env + length st)%nat.
Proof.
  intros. destruct (runR_app st x env) as [rest [E L]]. rewrite E, app_length, L. reflexivity.
Qed.

(* values of nodes already built do not change as nodes are added *)
Lemma extends_nth : forall st st' x k, extends st st' -> (k < length st)%nat ->
  nth k (runR st' x []) 0 = nth k (runR st x []) 0.
Proof.
  intros st st' x k [more ->] Hk. rewrite runR_nodes_app.
  destruct (runR_app more x (runR st x [])) as [rest [E _]]. rewrite E.
  apply nth_app_l. rewrite runR_length. simpl. lia.
Qed.

Lemma extends_trans : forall a b c, extends a b -> extends b c -> extends a c.
Proof. intros a b c [m1 ->] [m2 ->]. exists (m1 ++ m2). symmetry. apply app_assoc. Qed.

Lemma extends_refl : forall a, extends a a.
Proof. intros. exists []. symmetry. apply app_nil_r. Qed.

Lemma extends_length : forall a b, extends a b -> (length a <= length b)%nat.
Proof. intros a b [m ->]. rewrite app_length. lia. Qed.

Lemma evalE_extends : forall st st' e x, extends st st' -> ebelow (length st) e ->
  evalE e x (runR st' x []) = evalE e x (runR st x []).
Proof.
  intros st st' [[xs c] ts] x Hx He. cbn [evalE ebelow] in *. f_equal.
  apply sumsp_ext. intros i Hi. apply in_map_iff in Hi as [t [<- Ht]].
  apply extends_nth; [exact Hx|]. exact (proj1 (Forall_forall _ _) He t Ht).
Qed.

Lemma sp_eqb_sound : forall u v w, sp_eqb u v = true -> map fst u = map fst v /\ sumsp u w = sumsp v w.
Proof.
  induction u as [|[i a] u IH]; intros [|[j b] v] w H; cbn [sp_eqb] in H; try discriminate.
  - split; reflexivity.
  - destruct (Nat.eqb i j) eqn:H1; [|discriminate].
    destruct (qeqb a b) eqn:H2; [|discriminate]. rename H into H3.
    apply Nat.eqb_eq in H1. subst j. apply qeqb_R in H2.
    destruct (IH v w H3) as [E1 E2]. cbn [map fst]. rewrite E1, !sumsp_cons, E2, H2. split; reflexivity.
Qed.

Lemma nat_list_eqb_eq : forall u v, nat_list_eqb u v = true -> u = v.
Proof.
  induction u as [|i u IH]; intros [|j v] H; cbn in H; try discriminate; [reflexivity|].
  destruct (Nat.eqb i j) eqn:H1; [|discriminate].
  apply Nat.eqb_eq in H1. subst. f_equal. apply IH. exact H.
Qed.

Lemma map_fst_snd_eq : forall (p q : list (nat * nat)), map fst p = map fst q -> map snd p = map snd q -> p = q.
Proof.
  induction p as [|[a b] p IH]; intros [|[c d] q] H1 H2; cbn in *; try discriminate; [reflexivity|].
  inversion H1; inversion H2; subst. f_equal. apply IH; assumption.
Qed.

Lemma node_eqb_sound : forall n m, node_eqb n m = true ->
  reads n = reads m /\ forall x env, eval_nodeR n x env = eval_nodeR m x env.
Proof.
  intros [xs c ts | a | p] [xs' c' ts' | a' | p'] H; cbn [node_eqb] in H; try discriminate.
  - destruct (sp_eqb ts ts') eqn:H3; [|discriminate].
    destruct (qeqb c c') eqn:H2; [|discriminate]. rename H into H1.
    apply qeqb_R in H2. cbn [reads eval_nodeR].
    split; [exact (proj1 (sp_eqb_sound ts ts' [] H3))|].
    intros x env. rewrite (proj2 (sp_eqb_sound xs xs' x H1)), (proj2 (sp_eqb_sound ts ts' env H3)), H2.
    reflexivity.
  - apply nat_list_eqb_eq in H. subst. split; reflexivity.
  - destruct (nat_list_eqb (map fst p) (map fst p')) eqn:H1; [|discriminate]. rename H into H2.
    apply nat_list_eqb_eq in H1. apply nat_list_eqb_eq in H2.
    rewrite (map_fst_snd_eq p p' H1 H2). split; reflexivity.
Qed.

Lemma find_node_spec : forall n st k0 k, find_node n st k0 = Some k ->
  (k0 <= k < k0 + length st)%nat /\ node_eqb n (nth (k - k0) st (NMax [])) = true.
Proof.
  intros n st. induction st as [|m st IH]; intros k0 k H; cbn [find_node] in H; [discriminate|].
  destruct (node_eqb n m) eqn:E.
  - inversion H; subst. rewrite Nat.sub_diag. cbn [length nth]. split; [lia | exact E].
  - destruct (IH (S k0) k H) as [H1 H2]. cbn [length]. split; [lia|].
    replace (k - k0)%nat with (S (k - S k0)) by lia. exact H2.
Qed.

Lemma add_sound : forall n st x, wf st -> (forall j, In j (reads n) -> (j < length st)%nat) ->
  let '(st', k) := add n st in
  wf st' /\ extends st st' /\ (k < length st')%nat /\
  nth k (runR st' x []) 0 = eval_nodeR n x (runR st x []).
Proof.
  intros n st x Hwf Hr. unfold add. destruct (find_node n st 0) as [k|] eqn:F.
  - destruct (find_node_spec n st 0 k F) as [Hk He]. rewrite Nat.sub_0_r in He.
    destruct (node_eqb_sound _ _ He) as [Er Ev].
    split; [exact Hwf|]. split; [apply extends_refl|]. split; [lia|].
    rewrite value_of_node by (try lia; apply Hwf; lia).
    rewrite <- Ev. reflexivity.
  - split.
    + intros k Hk j Hj. rewrite app_length in Hk. cbn [length] in Hk.
      destruct (Nat.lt_ge_cases k (length st)) as [Hlt|Hge].
      * rewrite app_nth1 in Hj by exact Hlt. exact (Hwf k Hlt j Hj).
      * assert (k = length st) by lia. subst k.
        rewrite app_nth2 in Hj by lia. rewrite Nat.sub_diag in Hj. cbn [nth] in Hj. exact (Hr j Hj).
    + split; [exists [n]; reflexivity|]. rewrite app_length. cbn [length]. split; [lia|].
      rewrite runR_nodes_app. cbn [runR]. rewrite app_nth2 by (rewrite runR_length; simpl; lia).
      rewrite runR_length. cbn [length Nat.add]. rewrite Nat.sub_diag. reflexivity.
Qed.

Lemma node_of_sound : forall e st x, wf st -> ebelow (length st) e ->
  let '(st', k) := node_of e st in
  wf st' /\ extends st st' /\ (k < length st')%nat /\
  nth k (runR st' x []) 0 = evalE e x (runR st x []).
Proof.
  intros [[xs c] ts] st x Hwf He.
  assert (Hadd : forall xs' c' ts', ebelow (length st) (xs', c', ts') ->
            evalE (xs', c', ts') x (runR st x []) = evalE (xs, c, ts) x (runR st x []) ->
            let '(st', k) := add (NLin xs' c' ts') st in
            wf st' /\ extends st st' /\ (k < length st')%nat /\
            nth k (runR st' x []) 0 = evalE (xs, c, ts) x (runR st x [])).
  { intros xs' c' ts' Hb Hv. pose proof (add_sound (NLin xs' c' ts') st x Hwf) as A.
    destruct (add (NLin xs' c' ts') st) as [st' k].
    destruct A as [A1 [A2 [A3 A4]]].
    - intros j Hj. cbn [reads] in Hj. apply in_map_iff in Hj as [t [<- Ht]].
      exact (proj1 (Forall_forall _ _) Hb t Ht).
    - repeat split; try assumption. rewrite A4, <- Hv. reflexivity. }
  unfold node_of.
  destruct xs as [|t xs]; [|apply Hadd; [exact He | reflexivity]].
  destruct ts as [|[j a] [|t ts]]; try (apply Hadd; [exact He | reflexivity]).
  destruct (Qeq_bool c 0 && Qeq_bool a 1)%bool eqn:E; [|apply Hadd; [exact He | reflexivity]].
  apply andb_true_iff in E as [E1 E2]. apply Qeq_bool_eq, Qeq_eqR in E1, E2.
  cbn [ebelow] in He. inversion He as [|? ? Hj _]; subst. cbn [fst] in Hj.
  split; [exact Hwf|]. split; [apply extends_refl|]. split; [exact Hj|].
  cbn [evalE]. unfold sumsp; cbn [fold_right fst snd]. rewrite E1, E2, RMicromega.Q2R_0, RMicromega.Q2R_1.
  lra.
Qed.
