(* Relaxed.v -- relaxed leaves of property certificates (exactmax/kernel/property.py's
   ``Relaxed``, ``Upper``, ``Phase`` and ``Tighten``) over Q, and their soundness over R.

   On a cell C (rows over the input x, of dimension d) a relaxed leaf keeps the Max nodes the
   choices do not fix as variables: in node order, each such node i either
   - equals one of its arguments (an upper function u = A_k, proved >= every A_j: a choice), or
   - becomes the next variable v of z = (x, v_0, v_1, ...), with the rows v - A_j >= 0 (every
     argument j) and, when an upper function u is given, u - v >= 0, u = sum_j lam_j A_j +
     beta + sum_k c_k M_k (M_k the maps of earlier nodes) proved >= every A_j on the rows so
     far.
   Then ``extra`` rows u - v_i >= 0 for Max nodes i (``tighten``), and per forbidden
   conjunction a refutation (``refute``): a Farkas proof of 0 > 0, a split on the argument k
   attaining a Max node (``RPhase``: rows A_k - A_j >= 0, j <> k, and A_k - v_i >= 0, one
   branch per argument), or more tightened rows (``RTighten``).

   Sound because at every real x of the cell the point z = (x, the true values of the
   variable nodes) meets every row: each map evaluates at z to its node's true value, v_i =
   max_j A_j >= A_j, and u >= every A_j gives u >= v_i; one argument always attains the max,
   so some branch of a phase split holds.  ``relax_sound`` is the statement Property.v uses. *)

From Coq Require Import QArith Qreals Reals Lra Lia List Bool.
From ExactMax Require Import Checker Sound Dyadic.
Import ListNotations.
Open Scope Q_scope.

(* ------------------------------------------------------------------ *)
(** * Definitions *)

(* sum_o w_o y_o for affine maps y_o *)
Fixpoint lincomb_aff (ws : list Q) (ys : list aff) : aff :=
  match ws, ys with
  | w :: ws', y :: ys' => aadd (ascale w y) (lincomb_aff ws' ys')
  | _, _ => azero
  end.

(* the row a . (x ++ y) + c (>= 0 or > 0) with y_o = ys_o(x), as a row over x alone, for x
   of dimension d *)
Definition compose (d : nat) (ys : list aff) (r : con) : con :=
  (aadd (firstn d (fst (fst r)), snd (fst r)) (lincomb_aff (skipn d (fst (fst r))) ys), snd r).

(* an upper function: u = sum_j lam_j A_j + beta + sum_k c_k M_k, with a proof of u - A_j >= 0
   per argument j *)
Record upper := { up_lam : list Q; up_beta : Q; up_proofs : list cursor;
                  up_terms : list (nat * Q) }.
(* up_proofs: where the Farkas lists lie in the packed certificate (Checker.farkas_at reads
   one when it is checked: upper functions are many and their multipliers long) *)

Fixpoint nz_idx (l : list Q) (i : nat) : list nat :=
  match l with
  | [] => []
  | q :: l' => if qeqb q 0 then nz_idx l' (S i) else i :: nz_idx l' (S i)
  end.

(* k when u is A_k itself (lam = e_k, beta = 0, no terms): then the node equals A_k *)
Definition arg_of (u : upper) : option nat :=
  match up_terms u, nz_idx (up_lam u) 0 with
  | [], [k] => if qeqb (up_beta u) 0 && qeqb (nth k (up_lam u) 0) 1 then Some k else None
  | _, _ => None
  end.

(* u as a map over z, after checking u - A_j >= 0 on the rows C, one proof per argument *)
Definition upper_ok (C : list con) (senv : list (option aff)) (u : upper) (A : list aff)
  : option aff :=
  if Nat.eqb (length (up_lam u)) (length A) then
    match match arg_of u with
          | Some k => nth_error A k
          | None =>
              match lincomb_sym senv (up_terms u) with
              | Some t => Some (aadd (lincomb_aff (up_lam u) A) (aadd t ([], up_beta u)))
              | None => None
              end
          end with
    | Some uf =>
        if forall2b (fun a w => entails_w C (asub uf a) false (farkas_at w)) A (up_proofs u)
        then Some uf else None
    | None => None
    end
  else None.

(* variable k of z = (x, v_0, ...): coordinate d + k *)
Definition var_map (d k : nat) : aff := (repeat 0 (d + k) ++ [1], 0).

(* the maps of the walk over x that have at most d coefficients (all of them, for programs
   whose inputs are read at indices below d): they mean the same over z *)
Definition short (d : nat) (a : aff) : bool := (length (fst a) <=? d)%nat.

Definition trim (d : nat) (v : list (option aff)) : list (option aff) :=
  map (fun o => match o with Some a => if short d a then Some a else None | None => None end) v.

(* The relaxed run, node by node (senv: the maps so far, C: the rows so far, vars: the node of
   each variable so far); w: what the walk knows; ups: one optional upper function per Max
   node the walk left unknown, in node order.  Returns the maps, the rows and the variables. *)
Fixpoint relax_run (d : nat) (ns : list node) (need : list bool) (w : list (option aff))
    (ups : list (option upper)) (senv : list (option aff)) (C : list con) (vars : list nat)
    : option (list (option aff) * list con * list nat) :=
  match ns with
  | [] => match ups with [] => Some (senv, C, vars) | _ => None end
  | n :: ns' =>
      match need, w with
      | false :: _, _ => relax_run d ns' (tl need) (tl w) ups (senv ++ [None]) C vars
      | _, Some a :: _ => relax_run d ns' (tl need) (tl w) ups (senv ++ [Some a]) C vars
      | _, _ =>
          match n with
          | NLin xs c ts =>
              relax_run d ns' (tl need) (tl w) ups
                (senv ++ [if forallb (fun t => (fst t <? d)%nat) xs then
                            match lincomb_sym senv ts with
                            | Some r => Some (aadd (sparse_aff xs c) r)
                            | None => None
                            end
                          else None]) C vars
          | NMax [] => None
          | NMax args =>
              match ups, all_some (map (get senv) args) with
              | Some u :: ups', Some A =>
                  match arg_of u, upper_ok C senv u A with
                  | Some _, Some uf =>
                      relax_run d ns' (tl need) (tl w) ups' (senv ++ [Some uf]) C vars
                  | None, Some uf =>
                      let e := var_map d (length vars) in
                      relax_run d ns' (tl need) (tl w) ups' (senv ++ [Some e])
                        (C ++ map (fun a => (asub e a, false)) A ++ [(asub uf e, false)])
                        (vars ++ [length senv])
                  | _, None => None
                  end
              | None :: ups', Some A =>
                  let e := var_map d (length vars) in
                  relax_run d ns' (tl need) (tl w) ups' (senv ++ [Some e])
                    (C ++ map (fun a => (asub e a, false)) A) (vars ++ [length senv])
              | _, _ => None
              end
          | NSel _ => relax_run d ns' (tl need) (tl w) ups (senv ++ [None]) C vars
          end
      end
  end.

(* the argument maps and the map of Max node i (needed, reading earlier nodes only) *)
Definition max_maps (p : prog) (need : list bool) (senv : list (option aff)) (i : nat)
  : option (list aff * aff) :=
  match node_at p i with
  | NMax [] | NLin _ _ _ | NSel _ => None
  | NMax args =>
      if (i <? length (p_nodes p))%nat && nth i need true && forallb (fun a => (a <? i)%nat) args
      then match all_some (map (get senv) args), get senv i with
           | Some A, Some v => Some (A, v)
           | _, _ => None
           end
      else None
  end.

(* the rows plus, for Max nodes i in turn, u - v_i >= 0 (u proved >= every argument so far) *)
Fixpoint tighten (p : prog) (need : list bool) (senv : list (option aff)) (C : list con)
                 (ts : list (nat * upper)) : option (list con) :=
  match ts with
  | [] => Some C
  | (i, u) :: ts' =>
      match max_maps p need senv i with
      | Some (A, v) =>
          match upper_ok C senv u A with
          | Some uf => tighten p need senv (C ++ [(asub uf v, false)]) ts'
          | None => None
          end
      | None => None
      end
  end.

Fixpoint drop_nth {X} (k : nat) (l : list X) : list X :=
  match k, l with
  | _, [] => []
  | O, _ :: l' => l'
  | S k', a :: l' => a :: drop_nth k' l'
  end.

(* branch k of a phase split: A_k - A_j >= 0 (j <> k, in order), then A_k - v >= 0 *)
Definition phase_rows (A : list aff) (v : aff) (k : nat) : list con :=
  let ak := nth k A azero in
  map (fun a => (asub ak a, false)) (drop_nth k A) ++ [(asub ak v, false)].

Inductive rproof :=
| RFarkas (w : farkas)                                  (* 0 > 0 on the rows *)
| RPhase (i : nat) (bs : rproofs)                       (* one branch per argument of node i *)
| RTighten (ns : list nat) (us : list upper) (th : rproof)
    (* for the nodes ns in turn, rows u - v_i >= 0 added (us: one upper function each), then th *)
with rproofs :=
| RNil
| RCons (b : rproof) (bs : rproofs).

Fixpoint refute (p : prog) (need : list bool) (senv : list (option aff)) (C : list con)
                (r : rproof) : bool :=
  match r with
  | RFarkas w => entails_w C azero true w
  | RPhase i bs =>
      match max_maps p need senv i with
      | Some (A, v) => refute_branches p need senv C A v 0 bs
      | None => false
      end
  | RTighten ns us th =>
      if Nat.eqb (length ns) (length us) then
        match tighten p need senv C (combine ns us) with
        | Some C' => refute p need senv C' th
        | None => false
        end
      else false
  end
with refute_branches (p : prog) (need : list bool) (senv : list (option aff)) (C : list con)
                     (A : list aff) (v : aff) (k : nat) (bs : rproofs) : bool :=
  match bs with
  | RNil => Nat.eqb k (length A)
  | RCons b bs' =>
      refute p need senv (C ++ phase_rows A v k) b &&
      refute_branches p need senv C A v (S k) bs'
  end.

(* ------------------------------------------------------------------ *)
(** * Soundness *)

Local Open Scope R_scope.

Lemma lincomb_aff_evalR : forall ws ys x,
  evalR (lincomb_aff ws ys) x = dotR ws (map (fun a => evalR a x) ys).
Proof.
  induction ws as [|w ws IH]; intros [|y ys] x; cbn [lincomb_aff map dotR];
    try apply evalR_azero.
  rewrite evalR_aadd, evalR_ascale, IH. reflexivity.
Qed.

Lemma dotR_app_short : forall u x w, (length u <= length x)%nat -> dotR u (x ++ w) = dotR u x.
Proof.
  induction u as [|a u IH]; intros [|b x] w H; cbn [length app dotR] in *; try lia; try lra.
  rewrite IH by lia. reflexivity.
Qed.

Lemma evalR_app_short : forall a x w, (length (fst a) <= length x)%nat ->
  evalR a (x ++ w) = evalR a x.
Proof. intros a x w H. unfold evalR. rewrite dotR_app_short by exact H. reflexivity. Qed.

Lemma dotR_var : forall m z, dotR (repeat 0%Q m ++ [1%Q]) z = nth m z 0.
Proof.
  induction m as [|m IH]; intros [|b z]; cbn [repeat app dotR nth]; try reflexivity.
  - replace (Q2R 1) with 1 by (unfold Q2R; simpl; field). lra.
  - rewrite IH. replace (Q2R 0) with 0 by (unfold Q2R; simpl; field). lra.
Qed.

Lemma evalR_var_map : forall d k z, evalR (var_map d k) z = nth (d + k) z 0.
Proof.
  intros d k z. unfold var_map, evalR. cbn [fst snd]. rewrite dotR_var.
  replace (Q2R 0) with 0 by (unfold Q2R; simpl; field). lra.
Qed.

Lemma sumsp_app_short : forall xs x w, forallb (fun t => (fst t <? length x)%nat) xs = true ->
  sumsp xs (x ++ w) = sumsp xs x.
Proof.
  induction xs as [|[i c] xs IH]; intros x w H; [reflexivity|].
  cbn [forallb fst] in H. apply andb_true_iff in H as [Hi H].
  change (Q2R c * nth i (x ++ w) 0 + sumsp xs (x ++ w) = Q2R c * nth i x 0 + sumsp xs x).
  rewrite IH by exact H. rewrite app_nth1 by (apply Nat.ltb_lt; exact Hi). reflexivity.
Qed.

Lemma maxlR_ub : forall l w, In w l -> w <= maxlR l.
Proof. intros [|a l] w H; [destruct H|]. apply maxlR_aux_ub. exact H. Qed.

Lemma maxlR_lub : forall l v, l <> [] -> (forall w, In w l -> w <= v) -> maxlR l <= v.
Proof. intros [|a l] v Hn H; [congruence|]. apply maxlR_aux_lub. exact H. Qed.

Lemma maxlR_in : forall l, l <> [] -> In (maxlR l) l.
Proof. intros [|a l] Hn; [congruence|]. apply maxlR_aux_in. Qed.

(* an upper function that checks is >= every argument where the rows hold; when it is an
   argument itself, it is one of them *)
Lemma upper_ok_sound : forall C senv u A uf z, upper_ok C senv u A = Some uf -> satR C z ->
  (forall a, In a A -> evalR a z <= evalR uf z) /\
  (forall k, arg_of u = Some k -> In uf A).
Proof.
  intros C senv u A uf z H HC. unfold upper_ok in H.
  destruct (Nat.eqb (length (up_lam u)) (length A)); [|discriminate].
  destruct (match arg_of u with Some k => nth_error A k | None => _ end) as [uf'|] eqn:E;
    [|discriminate].
  destruct (forall2b _ A (up_proofs u)) eqn:Hall; [|discriminate].
  inversion H; subst uf'. split.
  - intros a Ha. destruct (forall2b_In _ _ _ Hall a Ha) as [w Hw].
    pose proof (entails_w_ge _ _ _ z HC Hw) as G. rewrite evalR_asub in G. lra.
  - intros k Hk. rewrite Hk in E. exact (nth_error_In _ _ E).
Qed.

Lemma all_some_length : forall {X} (l : list (option X)) r, all_some l = Some r ->
  length r = length l.
Proof.
  induction l as [|[a|] l IH]; intros r H; cbn [all_some] in H; try discriminate.
  - inversion H. reflexivity.
  - destruct (all_some l) as [r'|] eqn:E; [|discriminate]. inversion H; subst.
    cbn [length]. rewrite (IH r' eq_refl). reflexivity.
Qed.

Lemma skipn_S_tl : forall {X} m (l : list X), skipn (S m) l = tl (skipn m l).
Proof.
  induction m as [|m IH]; intros [|a l]; try reflexivity.
  change (skipn (S m) l = tl (skipn m l)). apply IH.
Qed.

Lemma knownR_tl : forall z L wk, knownR z L wk -> knownR z (tl L) (tl wk).
Proof.
  intros z L wk H i a Hi. destruct wk as [|o wk]; [destruct i; discriminate|].
  specialize (H (S i) a Hi). destruct L as [|b L]; cbn [tl nth] in *; [destruct i|]; exact H.
Qed.

Lemma nth0_skipn : forall m (L : list R), nth 0 (skipn m L) 0 = nth m L 0.
Proof. induction m as [|m IH]; intros [|a L]; cbn [skipn nth]; auto. Qed.

Lemma value_here : forall n ns x env,
  nth (length env) (runR (n :: ns) x env) 0 = eval_nodeR n x env.
Proof. intros. cbn [runR]. apply nth_runR_here. Qed.

Lemma relax_run_vars : forall d ns need wk ups senv C vars s R vs,
  relax_run d ns need wk ups senv C vars = Some (s, R, vs) -> exists more, vs = vars ++ more.
Proof.
  intros d ns. induction ns as [|n ns IH]; intros need wk ups senv C vars s R vs H;
    cbn [relax_run] in H.
  - destruct ups; [|discriminate]. inversion H; subst. exists []. rewrite app_nil_r. reflexivity.
  - assert (Hv : forall need' wk' ups' v C' vars',
              relax_run d ns need' wk' ups' (senv ++ [v]) C' vars' = Some (s, R, vs) ->
              (vars' = vars \/ exists i, vars' = vars ++ [i]) -> exists more, vs = vars ++ more).
    { intros need' wk' ups' v C' vars' Hr [->|[i ->]]; destruct (IH _ _ _ _ _ _ _ _ _ Hr) as [m E].
      - exists m. exact E.
      - exists (i :: m). rewrite E, <- app_assoc. reflexivity. }
    destruct need as [|[|] need']; destruct wk as [|[a|] wk'];
      try (eapply Hv; [exact H | left; reflexivity]);
      (destruct n as [xs c ts | [|a0 args] | prs];
       [eapply Hv; [exact H | left; reflexivity] | discriminate | | eapply Hv; [exact H | left; reflexivity]]);
      (destruct ups as [|[u|] ups']; [discriminate| |];
       destruct (all_some _) as [A|]; try discriminate;
       [destruct (arg_of u); destruct (upper_ok C senv u A); try discriminate|]);
      (eapply Hv; [exact H|]); eauto.
Qed.

(* the relaxed run is sound: at z = (x, the variables' true values), every map it returns
   evaluates to its node's true value and every row it returns holds *)
Lemma relax_run_sound : forall d x z, length x = d -> (exists w, z = x ++ w) ->
  forall ns need wk ups senv C vars env s Rw vs,
  relax_run d ns need wk ups senv C vars = Some (s, Rw, vs) ->
  agreeR z env senv -> length env = length senv ->
  knownR z (skipn (length env) (runR ns x env)) wk ->
  satR C z ->
  (forall k i, nth_error vs k = Some i -> nth (d + k) z 0 = nth i (runR ns x env) 0) ->
  agreeR z (runR ns x env) s /\ satR Rw z.
Proof.
  intros d x z Hd [wz Hz] ns. induction ns as [|n ns IH];
    intros need wk ups senv C vars env s Rw vs H Hag Hlen Hk HC Hvars; cbn [relax_run] in H.
  - destruct ups; [|discriminate]. inversion H; subst. cbn [runR]. split; assumption.
  - set (val := eval_nodeR n x env).
    assert (Hnext : forall v C' vars' ups',
      relax_run d ns (tl need) (tl wk) ups' (senv ++ [v]) C' vars' = Some (s, Rw, vs) ->
      match v with Some a => val = evalR a z | None => True end ->
      satR C' z -> agreeR z (runR (n :: ns) x env) s /\ satR Rw z).
    { intros v C' vars' ups' Hr Hv HC'. cbn [runR].
      apply (IH (tl need) (tl wk) ups' (senv ++ [v]) C' vars' (env ++ [val]) s Rw vs Hr).
      - unfold agreeR. apply Forall2_app; [exact Hag|]. constructor; [|constructor].
        destruct v; exact Hv.
      - rewrite !app_length, Hlen. reflexivity.
      - rewrite app_length. cbn [length]. rewrite Nat.add_1_r, skipn_S_tl.
        apply knownR_tl. exact Hk.
      - exact HC'.
      - exact Hvars. }
    assert (Hval : forall a, wk = Some a :: tl wk -> val = evalR a z).
    { intros a Ew. rewrite Ew in Hk. specialize (Hk 0%nat a eq_refl).
      rewrite nth0_skipn, value_here in Hk. exact Hk. }
    (* variable number length vars is node length senv *)
    assert (Hvar : forall C' ups',
      relax_run d ns (tl need) (tl wk) ups' (senv ++ [Some (var_map d (length vars))]) C'
                (vars ++ [length senv]) = Some (s, Rw, vs) ->
      evalR (var_map d (length vars)) z = val).
    { intros C' ups' Hr. destruct (relax_run_vars _ _ _ _ _ _ _ _ _ _ _ Hr) as [more E].
      rewrite evalR_var_map. rewrite (Hvars (length vars) (length senv)).
      - rewrite <- Hlen. apply value_here.
      - rewrite E, <- app_assoc, nth_error_app2 by lia. rewrite Nat.sub_diag. reflexivity. }
    (* the value of a Max node from its argument maps *)
    assert (Hmax : forall args A, n = NMax args -> all_some (map (get senv) args) = Some A ->
      val = maxlR (map (fun a => evalR a z) A)).
    { intros args A -> HA. unfold val. cbn [eval_nodeR].
      rewrite (values_of_args z env senv args A Hag HA). reflexivity. }
    assert (Hne : forall a0 args A, all_some (map (get senv) (a0 :: args)) = Some A ->
      map (fun a => evalR a z) A <> []).
    { intros a0 args A HA E. apply (f_equal (@length R)) in E. rewrite map_length in E.
      rewrite (all_some_length _ _ HA) in E. discriminate. }
    assert (Hrows : forall a0 args A, n = NMax (a0 :: args) ->
      all_some (map (get senv) (a0 :: args)) = Some A ->
      forall C' ups', relax_run d ns (tl need) (tl wk) ups' (senv ++ [Some (var_map d (length vars))])
                C' (vars ++ [length senv]) = Some (s, Rw, vs) ->
      satR (map (fun a => (asub (var_map d (length vars)) a, false)) A) z).
    { intros a0 args A En HA C' ups' Hr. unfold satR. apply Forall_map. apply Forall_forall.
      intros a Ha. unfold sat_conR. cbn [fst snd]. rewrite evalR_asub, (Hvar C' ups' Hr).
      rewrite (Hmax _ A En HA). pose proof (maxlR_ub (map (fun a => evalR a z) A) (evalR a z)
        (in_map _ _ _ Ha)). lra. }
    destruct need as [|[|] need']; destruct wk as [|[a|] wk'];
      try (apply (Hnext None C vars ups H I HC));
      try (apply (Hnext (Some a) C vars ups H (Hval a eq_refl) HC)).
    all: destruct n as [xs c ts | [|a0 args] | prs]; try discriminate;
      try (apply (Hnext None C vars ups H I HC)).
    all: try (
      destruct (forallb (fun t => (fst t <? d)%nat) xs) eqn:Ex;
      [destruct (lincomb_sym senv ts) as [r|] eqn:Er|];
      [apply (Hnext _ C vars ups H); [|exact HC] | apply (Hnext None C vars ups H I HC)
      | apply (Hnext None C vars ups H I HC)];
      unfold val; cbn [eval_nodeR];
      rewrite evalR_aadd, evalR_sparse_aff, (lincomb_sym_sound z env senv ts r Hag Er), Hz;
      rewrite sumsp_app_short by (rewrite Hd; exact Ex); reflexivity).
    all: destruct ups as [|[u|] ups']; try discriminate;
      destruct (all_some (map (get senv) (a0 :: args))) as [A|] eqn:HA; try discriminate.
    all: try (destruct (arg_of u) as [k|] eqn:Ek; destruct (upper_ok C senv u A) as [uf|] eqn:Eu;
      try discriminate).
    all: match goal with
    | Ek : arg_of ?u = Some ?k, Eu : upper_ok _ _ ?u _ = Some ?uf |- _ =>
      (* u is argument k *)
      apply (Hnext (Some uf) C vars _ H); [|exact HC];
      destruct (upper_ok_sound _ _ _ _ _ z Eu HC) as [Hub Hin];
      rewrite (Hmax _ A eq_refl HA); apply maxlR_spec;
      [ apply (in_map (fun a => evalR a z)); exact (Hin _ Ek)
      | intros w Hw; apply in_map_iff in Hw as [a [<- Ha]]; exact (Hub a Ha) ]
    | Ek : arg_of ?u = None, Eu : upper_ok _ _ ?u _ = Some ?uf |- _ =>
      (* a variable under u *)
      destruct (upper_ok_sound _ _ _ _ _ z Eu HC) as [Hub _];
      assert (HR : satR (map (fun a => (asub (var_map d (length vars)) a, false)) A) z)
        by exact (Hrows a0 args A eq_refl HA _ _ H);
      apply (Hnext _ _ _ _ H); [exact (eq_sym (Hvar _ _ H))|];
      apply satR_app; [exact HC|]; apply satR_app; [exact HR|];
      constructor; [|constructor]; unfold sat_conR; cbn [fst snd];
      rewrite evalR_asub, (Hvar _ _ H), (Hmax _ A eq_refl HA);
      assert (maxlR (map (fun a => evalR a z) A) <= evalR uf z); [|lra];
      apply maxlR_lub; [exact (Hne a0 args A HA)|];
      intros w Hw; apply in_map_iff in Hw as [a [<- Ha]]; exact (Hub a Ha)
    | _ =>
      (* a variable without an upper function *)
      apply (Hnext _ _ _ _ H); [exact (eq_sym (Hvar _ _ H))|];
      apply satR_app; [exact HC|]; exact (Hrows a0 args A eq_refl HA _ _ H)
    end.
Qed.

Lemma max_maps_sound : forall p need senv i A v x z,
  max_maps p need senv i = Some (A, v) -> agreeR z (runR (p_nodes p) x []) senv ->
  A <> [] /\ evalR v z = maxlR (map (fun a => evalR a z) A).
Proof.
  intros p need senv i A v x z H Hag. unfold max_maps in H.
  destruct (node_at p i) as [xs c ts | [|a0 args] | prs] eqn:En; try discriminate.
  destruct ((i <? length (p_nodes p))%nat && nth i need true &&
            forallb (fun a => (a <? i)%nat) (a0 :: args)) eqn:Hc; [|discriminate].
  apply andb_true_iff in Hc as [Hc Hr]. apply andb_true_iff in Hc as [Hi _].
  destruct (all_some (map (get senv) (a0 :: args))) as [A'|] eqn:HA; [|discriminate].
  destruct (get senv i) as [v'|] eqn:Hv; [|discriminate]. inversion H; subst A' v'. split.
  - intros E. apply (f_equal (@length aff)) in E. rewrite (all_some_length _ _ HA) in E.
    discriminate.
  - rewrite <- (get_sound z _ senv i v Hag Hv).
    unfold node_at in En. rewrite value_of_node.
    + rewrite En. cbn [eval_nodeR]. rewrite (values_of_args z _ senv _ A Hag HA). reflexivity.
    + apply Nat.ltb_lt. exact Hi.
    + rewrite En. cbn [reads]. intros j Hj. rewrite forallb_forall in Hr.
      apply Nat.ltb_lt. exact (Hr j Hj).
Qed.

Lemma tighten_sound : forall p need senv x z ts C C',
  tighten p need senv C ts = Some C' -> satR C z -> agreeR z (runR (p_nodes p) x []) senv ->
  satR C' z.
Proof.
  intros p need senv x z ts. induction ts as [|[i u] ts IH]; intros C C' H HC Hag;
    cbn [tighten] in H.
  - inversion H; subst. exact HC.
  - destruct (max_maps p need senv i) as [[A v]|] eqn:Em; [|discriminate].
    destruct (upper_ok C senv u A) as [uf|] eqn:Eu; [|discriminate].
    apply (IH _ _ H); [|exact Hag]. apply satR_app; [exact HC|]. constructor; [|constructor].
    unfold sat_conR. cbn [fst snd]. rewrite evalR_asub.
    destruct (max_maps_sound _ _ _ _ _ _ x z Em Hag) as [Hne Hv].
    destruct (upper_ok_sound _ _ _ _ _ z Eu HC) as [Hub _].
    rewrite Hv. assert (maxlR (map (fun a => evalR a z) A) <= evalR uf z); [|lra].
    apply maxlR_lub.
    + intros E. apply Hne. destruct A; [reflexivity|discriminate].
    + intros w Hw. apply in_map_iff in Hw as [a [<- Ha]]. exact (Hub a Ha).
Qed.

Lemma drop_nth_In : forall {X} k (l : list X) a, In a (drop_nth k l) -> In a l.
Proof.
  induction k as [|k IH]; intros [|b l] a H; cbn [drop_nth In] in *; auto.
  destruct H as [H|H]; [left; exact H | right; exact (IH l a H)].
Qed.

Scheme rproof_mut := Induction for rproof Sort Prop
  with rproofs_mut := Induction for rproofs Sort Prop.

Fixpoint rlen (bs : rproofs) : nat := match bs with RNil => 0 | RCons _ bs' => S (rlen bs') end.

(* no z meets rows that a refutation refutes *)
Lemma refute_sound : forall p need senv x z,
  agreeR z (runR (p_nodes p) x []) senv ->
  forall r C, satR C z -> refute p need senv C r = true -> False.
Proof.
  intros p need senv x z Hag r.
  induction r using rproof_mut with
    (P0 := fun bs => forall C A v k, satR C z ->
             refute_branches p need senv C A v k bs = true ->
             forall kk, (k <= kk < length A)%nat -> satR (phase_rows A v kk) z -> False);
    cbn [refute refute_branches].
  - intros C HC H. pose proof (entails_w_gt _ _ _ z HC H) as G. rewrite evalR_azero in G. lra.
  - intros C HC H. destruct (max_maps p need senv i) as [[A v]|] eqn:Em; [|discriminate].
    destruct (max_maps_sound _ _ _ _ _ _ x z Em Hag) as [Hne Hv].
    assert (Hm : In (maxlR (map (fun a => evalR a z) A)) (map (fun a => evalR a z) A)).
    { apply maxlR_in. intros E. apply Hne. destruct A; [reflexivity|discriminate]. }
    apply in_map_iff in Hm as [a [Ea Ha]].
    destruct (In_nth _ _ azero Ha) as [kk [Hkk Ek]].
    apply (IHr C A v 0%nat HC H kk); [lia|].
    unfold phase_rows. rewrite Ek. apply satR_app.
    + unfold satR. apply Forall_map. apply Forall_forall. intros b Hb. unfold sat_conR.
      cbn [fst snd]. rewrite evalR_asub, Ea.
      pose proof (maxlR_ub _ _ (in_map (fun a => evalR a z) _ _ (drop_nth_In _ _ _ Hb))). lra.
    + constructor; [|constructor]. unfold sat_conR. cbn [fst snd].
      rewrite evalR_asub, Ea, Hv. lra.
  - intros C HC H. destruct (Nat.eqb (length ns) (length us)); [|discriminate].
    destruct (tighten p need senv C (combine ns us)) as [C'|] eqn:Et; [|discriminate].
    exact (IHr C' (tighten_sound _ _ _ x z _ _ _ Et HC Hag) H).
  - intros C A v k HC H kk Hk. apply Nat.eqb_eq in H. lia.
  - intros C A v k HC H kk Hk Hrows. apply andb_true_iff in H as [Hb Hbs].
    destruct (Nat.eq_dec kk k) as [->|Hne].
    + exact (IHr (C ++ phase_rows A v k) (satR_app _ _ _ HC Hrows) Hb).
    + exact (IHr0 C A v (S k) HC Hbs kk ltac:(lia) Hrows).
Qed.

Lemma dotR_app : forall (a : list Q) (x y : list R),
  dotR a (x ++ y) = dotR (firstn (length x) a) x + dotR (skipn (length x) a) y.
Proof.
  intros a x. revert a. induction x as [|v x IH]; intros [|q a] y; cbn [app length firstn skipn dotR].
  - lra.
  - lra.
  - lra.
  - rewrite IH. lra.
Qed.

Lemma compose_evalR : forall d ys r x, length x = d ->
  evalR (fst (compose d ys r)) x = evalR (fst r) (x ++ map (fun a => evalR a x) ys).
Proof.
  intros d ys [[a c] s] x Hd. unfold compose. cbn [fst snd].
  rewrite evalR_aadd, lincomb_aff_evalR. unfold evalR at 1 3. cbn [fst snd].
  rewrite dotR_app, Hd. lra.
Qed.

Lemma compose_satR : forall d ys O x, length x = d ->
  satR O (x ++ map (fun a => evalR a x) ys) -> satR (map (compose d ys) O) x.
Proof.
  intros d ys O x Hd H. unfold satR in *. apply Forall_map.
  eapply Forall_impl; [|exact H]. intros r Hr. unfold sat_conR in *.
  rewrite compose_evalR by exact Hd. destruct r as [h s]. exact Hr.
Qed.

(* the same over z = x ++ w, the outputs' maps being over z *)
Lemma compose_satR_ext : forall d ys O x w, length x = d ->
  satR O (x ++ map (fun a => evalR a (x ++ w)) ys) -> satR (map (compose d ys) O) (x ++ w).
Proof.
  intros d ys O x w Hd H. unfold satR in *. apply Forall_map.
  eapply Forall_impl; [|exact H]. intros [[a c] s] Hr. unfold sat_conR in *.
  cbn [fst snd] in *. unfold compose. cbn [fst snd].
  rewrite evalR_aadd, lincomb_aff_evalR.
  assert (Hf : evalR (firstn d a, c) (x ++ w) = evalR (firstn d a, c) x).
  { apply evalR_app_short. cbn [fst]. rewrite firstn_length. lia. }
  rewrite Hf. unfold evalR in Hr |- *. cbn [fst snd] in *. rewrite dotR_app, Hd in Hr.
  destruct s; lra.
Qed.

(* ------------------------------------------------------------------ *)
(** * The leaf *)

Local Open Scope Q_scope.

(* A relaxed leaf on the cell C (rows over x in Q^d, each with at most d coefficients): the
   choices cs fix what they can (Checker.srun over x), the relaxed run does the rest, the
   ``extra`` rows are added, and each forbidden conjunction O_j, its rows composed with the
   outputs' maps over z, is refuted by prs_j. *)
Definition check_relaxed (p : prog) (d : nat) (need : list bool) (outs : list (list con))
    (C : list con) (cs : choices) (prev : list (option aff)) (ups : list (option upper))
    (extra : list (nat * upper)) (prs : list rproof) : bool :=
  if forallb (fun r => (length (fst (fst r)) <=? d)%nat) C then
    match srun C 0 cs (p_nodes p) need prev [] with
    | Some v =>
        match relax_run d (p_nodes p) need (trim d v) ups [] C [] with
        | Some (vals, R, _) =>
            match tighten p need vals R extra, all_some (map (get vals) (p_outs p)) with
            | Some R', Some ys =>
                forall2b (fun O r => refute p need vals (R' ++ map (compose d ys) O) r) outs prs
            | _, _ => false
            end
        | None => false
        end
    | None => false
    end
  else false.

Local Open Scope R_scope.

Lemma nth_map_error : forall (f : nat -> R) l k i, nth_error l k = Some i ->
  nth k (map f l) 0 = f i.
Proof.
  intros f l. induction l as [|a l IH]; intros [|k] i H; cbn [nth_error] in H; try discriminate.
  - inversion H. reflexivity.
  - cbn [map nth]. exact (IH k i H).
Qed.

Lemma trim_nth : forall d v i a, nth_error (trim d v) i = Some (Some a) ->
  nth_error v i = Some (Some a) /\ (length (fst a) <= d)%nat.
Proof.
  intros d v. induction v as [|o v IH]; intros [|i] a H; cbn [trim map nth_error] in *;
    try discriminate.
  - destruct o as [b|]; [|discriminate].
    destruct (short d b) eqn:Hb; [|discriminate]. inversion H; subst.
    split; [reflexivity|]. apply Nat.leb_le. exact Hb.
  - exact (IH i a H).
Qed.

(* a relaxed leaf that checks: no real x of the cell has (x, p x) meeting a conjunction *)
Lemma relax_sound : forall p d need outs C cs prev ups extra prs x,
  check_relaxed p d need outs C cs prev ups extra prs = true ->
  satR C x -> length x = d -> knownR x (runR (p_nodes p) x []) prev ->
  forall O, In O outs -> ~ satR O (x ++ outsR p x).
Proof.
  intros p d need outs C cs prev ups extra prs x H HC Hd K O HO HS. unfold check_relaxed in H.
  destruct (forallb (fun r => (length (fst (fst r)) <=? d)%nat) C) eqn:Hshort; [|discriminate].
  destruct (srun C 0 cs (p_nodes p) need prev []) as [v|] eqn:Es; [|discriminate].
  destruct (relax_run d (p_nodes p) need (trim d v) ups [] C []) as [[[vals Rw] vars]|] eqn:Er;
    [|discriminate].
  destruct (tighten p need vals Rw extra) as [R'|] eqn:Et; [|discriminate].
  destruct (all_some (map (get vals) (p_outs p))) as [ys|] eqn:Ey; [|discriminate].
  set (E := runR (p_nodes p) x []).
  pose proof (srun_sound C x 0 cs HC (p_nodes p) need [] [] prev v (Forall2_nil _) eq_refl K Es)
    as Ag.
  set (z := x ++ map (fun i => nth i E 0) vars).
  assert (HCz : satR C z).
  { unfold satR in *. rewrite forallb_forall in Hshort. apply Forall_forall. intros r Hr.
    rewrite Forall_forall in HC. specialize (HC r Hr). unfold sat_conR in *.
    unfold z. rewrite evalR_app_short; [exact HC|]. rewrite Hd. apply Nat.leb_le.
    exact (Hshort r Hr). }
  assert (Kz : knownR z (skipn (length (@nil R)) (runR (p_nodes p) x [])) (trim d v)).
  { intros i a Hi. cbn [length skipn]. destruct (trim_nth d v i a Hi) as [Ev Hb].
    rewrite (agreeR_knownR _ _ _ Ag i a Ev). unfold z. rewrite evalR_app_short; [reflexivity|].
    rewrite Hd. exact Hb. }
  destruct (relax_run_sound d x z Hd (ex_intro _ _ eq_refl) (p_nodes p) need (trim d v) ups [] C []
              [] vals Rw vars Er (Forall2_nil _) eq_refl Kz HCz) as [Agz HRz].
  { intros k i Hk. unfold z. rewrite app_nth2 by lia. rewrite Hd, Nat.add_comm, Nat.add_sub.
    exact (nth_map_error (fun i => nth i E 0) vars k i Hk). }
  pose proof (tighten_sound _ _ _ x z _ _ _ Et HRz Agz) as HR'.
  destruct (forall2b_In _ _ _ H O HO) as [r Hr].
  apply (refute_sound p need vals x z Agz r (R' ++ map (compose d ys) O)); [|exact Hr].
  apply satR_app; [exact HR'|].
  apply compose_satR_ext; [exact Hd|].
  unfold outsR in HS. fold E in HS.
  rewrite (values_of_args z E vals (p_outs p) ys Agz Ey) in HS. exact HS.
Qed.
