(* Property.v -- the checker of property certificates (exactmax/kernel/property.py) over Q,
   and its soundness over R for Maxout networks:

     maxout_property_sound : property_shaped net cases = true ->
       property_ok net cases ts = true ->
       forall c, In c cases -> forall x : list R, length x = mo_dim net ->
       in_poly (pc_A c) (pc_b c) x ->
       forall O, In O (pc_outs c) -> ~ satR O (x ++ maxoutR net x).

   A property (VNN-LIB's query, read by exactmax/io/vnnlib.py) is a list of cases; a case is
   an input polyhedron P = {x : A x <= b} and forbidden conjunctions O_1 .. O_m, each a list
   of rows a . (x ++ y) + c >= 0 (> 0 when strict) over the input x and the output y.  The
   property holds when no x in P has (x, net x) satisfying every row of some O_j.

   A case's certificate is a split tree over P (rows: P's, then h >= 0 or -h > 0 per split,
   numbered absolutely, as in Checker.v), with choices at splits (checked on the split's cell
   and passed down, as Checker.check_tree does) and leaves
   - PEmpty w: Farkas multipliers for 0 > 0 on the cell;
   - PExcluded cs ws: choices fixing every Max node the outputs read (Checker.srun), so that
     y = M x + e on the cell, and per O_j a Farkas proof of 0 > 0 on the cell's rows followed
     by O_j's rows with y replaced by M x + e ([compose]).
   - PRelaxed cs ups extra prs: the Max nodes the choices leave open as variables under proved
     upper functions, extra rows, and per O_j a refutation (Relaxed.v, relax_sound).
   The leaves cover P (each split's halves cover its cell), so no x of P satisfies an O_j. *)

From Coq Require Import QArith Qreals Reals Lra Lia List Bool.
From Coq Require Uint63 PArray.
Import (notations) Uint63.
From ExactMax Require Import Checker Sound Build Maxout Dyadic Relaxed.
Import ListNotations.
Open Scope Q_scope.

(* ------------------------------------------------------------------ *)
(** * Properties *)

(* the row a . (x ++ y) + c >= 0 (> 0 when strict) *)
Definition row (a : list Q) (c : Q) (strict : bool) : con := ((a, c), strict).

(* a case: the input polyhedron A x <= b and the forbidden output conjunctions *)
Record pcase := { pc_A : list (list Q); pc_b : list Q; pc_outs : list (list con) }.

(* the number of outputs of a network: its output map's rows, else its last layer's units *)
Definition maxout_out_dim (net : maxout) : nat :=
  match mo_out net with
  | Some (W, _) => length W
  | None => fold_left (fun _ L => length L) (mo_layers net) (mo_dim net)
  end.

(** Every length is the one the dimensions say: the network is well-shaped, each case's
    polyhedron has d entries per row and one right-hand side per row, and each output row
    has d + n entries (x, then y).  The statement's list functions would otherwise
    truncate; exported files prove this by computation. *)
Definition pcase_shaped (d n : nat) (c : pcase) : bool :=
  poly_shaped d (pc_A c) (pc_b c) &&
  forallb (forallb (fun r => Nat.eqb (length (fst (fst r))) (d + n))) (pc_outs c).

Definition property_shaped (net : maxout) (cases : list pcase) : bool :=
  maxout_shaped net && forallb (pcase_shaped (mo_dim net) (maxout_out_dim net)) cases.

(* ------------------------------------------------------------------ *)
(** * The checker *)

Inductive ptree :=
| PEmpty (w : farkas)                          (* the cell is empty: it entails 0 > 0 *)
| PExcluded (cs : choices) (ws : list farkas)  (* y = M x + e; no O_j holds on the cell *)
| PSplit (h : aff) (cs : choices) (ge lt : ptree)
    (* ge: h >= 0 appended; lt: -h > 0 appended *)
| PRelaxed (cs : choices) (ups : list (option upper)) (extra : list (nat * upper))
           (prs : list rproof)
    (* Relaxed.v: unfixed Max nodes as variables under upper functions, extra rows, and per
       O_j a refutation (Farkas, phase splits, tightened rows) *)
| PCut.
    (* a subtree checked elsewhere (a part, see property_parts_sound); never a proof here *)

Definition check_excluded (p : prog) (d : nat) (need : list bool) (outs : list (list con))
                          (C : list con) (cs : choices) (prev : list (option aff))
                          (ws : list farkas) : bool :=
  match srun C 0 cs (p_nodes p) need prev [] with
  | Some v =>
      match all_some (map (get v) (p_outs p)) with
      | Some ys => forall2b (fun O w => entails_w (C ++ map (compose d ys) O) azero true w) outs ws
      | None => false
      end
  | None => false
  end.

(* cut: what a PCut answers (false in a whole tree; true in the top of a tree whose cut
   subtrees are checked as parts) *)
Fixpoint check_ptree_with (cut : bool) (p : prog) (d : nat) (need : list bool)
                          (outs : list (list con)) (C : list con) (inh : choices)
                          (prev : list (option aff)) (t : ptree) : bool :=
  match t with
  | PEmpty w => entails_w C azero true w
  | PExcluded cs ws => check_excluded p d need outs C (cs ++ inh) prev ws
  | PRelaxed cs ups ex prs => check_relaxed p d need outs C (cs ++ inh) prev ups ex prs
  | PCut => cut
  | PSplit h [] l r =>
      check_ptree_with cut p d need outs (C ++ [(h, false)]) inh prev l &&
      check_ptree_with cut p d need outs (C ++ [(ascale (-1) h, true)]) inh prev r
  | PSplit h cs l r =>
      match srun C 0 (cs ++ inh) (p_nodes p) need prev [] with
      | Some v =>
          let inh' := unresolved v v (cs ++ inh) in
          check_ptree_with cut p d need outs (C ++ [(h, false)]) inh' v l &&
          check_ptree_with cut p d need outs (C ++ [(ascale (-1) h, true)]) inh' v r
      | None => false
      end
  end.

Notation check_ptree := (check_ptree_with false).

(* The cells of the cuts of t, left to right (ge before lt): the rows, the inherited choices
   and the maps with which check_ptree_with reaches each PCut *)
Fixpoint cut_cells (p : prog) (need : list bool) (C : list con) (inh : choices)
                   (prev : list (option aff)) (t : ptree)
  : list (list con * choices * list (option aff)) :=
  match t with
  | PCut => [(C, inh, prev)]
  | PSplit h [] l r =>
      cut_cells p need (C ++ [(h, false)]) inh prev l ++
      cut_cells p need (C ++ [(ascale (-1) h, true)]) inh prev r
  | PSplit h cs l r =>
      match srun C 0 (cs ++ inh) (p_nodes p) need prev [] with
      | Some v =>
          let inh' := unresolved v v (cs ++ inh) in
          cut_cells p need (C ++ [(h, false)]) inh' v l ++
          cut_cells p need (C ++ [(ascale (-1) h, true)]) inh' v r
      | None => []
      end
  | _ => []
  end.

Definition case_ok (p : prog) (d : nat) (c : pcase) (t : ptree) : bool :=
  check_ptree p d (needed p) (pc_outs c) (rows_of_poly (pc_A c) (pc_b c)) [] [] t.

(** One tree per case, checked against the program the library's translation builds from
    the network. *)
Definition property_ok (net : maxout) (cases : list pcase) (ts : list ptree) : bool :=
  forall2b (case_ok (program_of_maxout net) (mo_dim net)) cases ts.

(** A certificate in parts, each part a lemma of its own (exported files in parts are
    compiled side by side): the top of each case's tree, with PCut where a part goes, is
    checked here; the cut cells, numbered left to right across the cases, each with its
    case's forbidden conjunctions, are [all_cuts]; a group of m parts from cut k on is
    checked by [group_ok]. *)
Definition top_ok (net : maxout) (cases : list pcase) (top : list ptree) : bool :=
  let p := program_of_maxout net in
  forall2b (fun c t => check_ptree_with true p (mo_dim net) (needed p) (pc_outs c)
                         (rows_of_poly (pc_A c) (pc_b c)) [] [] t) cases top.

Definition all_cuts (net : maxout) (cases : list pcase) (top : list ptree)
  : list (list (list con) * (list con * choices * list (option aff))) :=
  let p := program_of_maxout net in
  flat_map (fun ct => map (fun e => (pc_outs (fst ct), e))
                          (cut_cells p (needed p) (rows_of_poly (pc_A (fst ct)) (pc_b (fst ct)))
                                     [] [] (snd ct)))
           (combine cases top).

Fixpoint parts_ok (p : prog) (d : nat) (need : list bool)
                  (cells : list (list (list con) * (list con * choices * list (option aff))))
                  (ts : list ptree) : bool :=
  match ts, cells with
  | [], _ => true
  | t :: ts', (outs, (C, inh, prev)) :: cells' =>
      check_ptree p d need outs C inh prev t && parts_ok p d need cells' ts'
  | _ :: _, [] => false
  end.

Definition group_ok (net : maxout) (cases : list pcase) (top : list ptree) (k m : nat)
                    (ts : list ptree) : bool :=
  let p := program_of_maxout net in
  Nat.eqb (length ts) m &&
  parts_ok p (mo_dim net) (needed p) (skipn k (all_cuts net cases top)) ts.

(* the groups, m_1 parts from cut k, m_2 from k + m_1, ..., cover the cuts k .. n - 1 *)
Fixpoint groups_ok (f : nat -> nat -> list ptree -> bool) (k n : nat)
                   (gs : list (nat * list ptree)) : Prop :=
  match gs with
  | [] => k = n
  | (m, ts) :: gs' => f k m ts = true /\ groups_ok f (k + m) n gs'
  end.

(* ------------------------------------------------------------------ *)
(** * Soundness *)

Local Open Scope R_scope.

Lemma check_excluded_sound : forall p d need outs C cs prev ws x,
  check_excluded p d need outs C cs prev ws = true -> satR C x -> length x = d ->
  knownR x (runR (p_nodes p) x []) prev ->
  forall O, In O outs -> ~ satR O (x ++ outsR p x).
Proof.
  intros p d need outs C cs prev ws x H HC Hd K O HO HS. unfold check_excluded in H.
  destruct (srun C 0 cs (p_nodes p) need prev []) as [v|] eqn:E; [|discriminate].
  destruct (all_some (map (get v) (p_outs p))) as [ys|] eqn:Y; [|discriminate].
  pose proof (srun_sound C x 0 cs HC (p_nodes p) need [] [] prev v (Forall2_nil _) eq_refl K E)
    as Ag.
  pose proof (values_of_args x _ v (p_outs p) ys Ag Y) as V.
  destruct (forall2b_In _ _ _ H O HO) as [w Hw].
  assert (HS' : satR (C ++ map (compose d ys) O) x).
  { apply satR_app; [exact HC|]. apply compose_satR; [exact Hd|].
    unfold outsR in HS. rewrite V in HS. exact HS. }
  pose proof (entails_w_gt _ _ _ x HS' Hw) as G. rewrite evalR_azero in G. lra.
Qed.

(* what a cut cell must satisfy: no x of the cell (with the cell's maps) satisfies an O_j *)
Definition cell_safe (p : prog) (d : nat) (outs : list (list con))
                     (e : list con * choices * list (option aff)) : Prop :=
  forall x, satR (fst (fst e)) x -> length x = d -> knownR x (runR (p_nodes p) x []) (snd e) ->
  forall O, In O outs -> ~ satR O (x ++ outsR p x).

Lemma check_ptree_with_sound : forall cut p d need outs t C inh prev x,
  check_ptree_with cut p d need outs C inh prev t = true ->
  (cut = true -> Forall (cell_safe p d outs) (cut_cells p need C inh prev t)) ->
  satR C x -> length x = d ->
  knownR x (runR (p_nodes p) x []) prev ->
  forall O, In O outs -> ~ satR O (x ++ outsR p x).
Proof.
  intros cut p d need outs t. induction t as [w | cs ws | h cs l IHl r IHr | cs ups ex prs |];
    intros C inh prev x Ht Hcut HC Hd K; cbn [check_ptree_with] in Ht.
  - exfalso. pose proof (entails_w_gt _ _ _ x HC Ht) as G. rewrite evalR_azero in G. lra.
  - exact (check_excluded_sound p d need outs C _ prev ws x Ht HC Hd K).
  - assert (Hgo : forall inh' prev', knownR x (runR (p_nodes p) x []) prev' ->
              check_ptree_with cut p d need outs (C ++ [(h, false)]) inh' prev' l &&
              check_ptree_with cut p d need outs (C ++ [(ascale (-1) h, true)]) inh' prev' r
                = true ->
              (cut = true -> Forall (cell_safe p d outs)
                 (cut_cells p need (C ++ [(h, false)]) inh' prev' l ++
                  cut_cells p need (C ++ [(ascale (-1) h, true)]) inh' prev' r)) ->
              forall O, In O outs -> ~ satR O (x ++ outsR p x)).
    { intros inh' prev' K' H Hc. apply andb_true_iff in H as [Hl Hr].
      destruct (Rlt_le_dec (evalR h x) 0) as [Hneg|Hpos].
      + apply (IHr _ _ _ x Hr); [| |exact Hd|exact K'].
        * intro E. exact (proj2 (proj1 (Forall_app _ _ _) (Hc E))).
        * apply satR_app; [exact HC|]. constructor; [|constructor].
          unfold sat_conR. cbn [fst snd]. rewrite evalR_ascale, Q2R_m1. lra.
      + apply (IHl _ _ _ x Hl); [| |exact Hd|exact K'].
        * intro E. exact (proj1 (proj1 (Forall_app _ _ _) (Hc E))).
        * apply satR_app; [exact HC|]. constructor; [|constructor].
          unfold sat_conR. cbn [fst snd]. exact Hpos. }
    destruct cs as [|e cs]; [exact (Hgo inh prev K Ht Hcut)|].
    cbn [cut_cells] in Hcut.
    destruct (srun C 0 ((e :: cs) ++ inh) (p_nodes p) need prev []) as [v|] eqn:E;
      [|discriminate].
    apply (Hgo (unresolved v v ((e :: cs) ++ inh)) v); [|exact Ht|exact Hcut].
    exact (agreeR_knownR _ _ _ (srun_sound C x 0 ((e :: cs) ++ inh) HC (p_nodes p) need [] []
             prev v (Forall2_nil _) eq_refl K E)).
  - exact (relax_sound p d need outs C _ prev ups ex prs x Ht HC Hd K).
  - subst cut. specialize (Hcut eq_refl). cbn [cut_cells] in Hcut.
    inversion Hcut as [|e es He _]. exact (He x HC Hd K).
Qed.

Lemma check_ptree_sound : forall p d need outs t C inh prev x,
  check_ptree p d need outs C inh prev t = true -> satR C x -> length x = d ->
  knownR x (runR (p_nodes p) x []) prev ->
  forall O, In O outs -> ~ satR O (x ++ outsR p x).
Proof.
  intros p d need outs t C inh prev x Ht.
  exact (check_ptree_with_sound false p d need outs t C inh prev x Ht
           (fun E => ltac:(discriminate E))).
Qed.

(** A certificate that checks proves the property: for every case, no real x of its input
    polyhedron (of the network's input dimension) has (x, net x) satisfying a forbidden
    conjunction. *)
Theorem property_sound : forall net cases ts, property_ok net cases ts = true ->
  forall c, In c cases -> forall x : list R, length x = mo_dim net ->
  in_poly (pc_A c) (pc_b c) x ->
  forall O, In O (pc_outs c) -> ~ satR O (x ++ maxoutR net x).
Proof.
  intros net cases ts H c Hc x Hd Hx O HO.
  destruct (forall2b_In _ _ _ H c Hc) as [t Ht]. unfold case_ok in Ht.
  rewrite <- (maxout_program_correct net x Hd).
  exact (check_ptree_sound _ _ _ _ t _ [] [] x Ht (poly_rows_sound _ _ x Hx) Hd
           (knownR_nil _ _) O HO).
Qed.

(** What exported files apply: the network and the property well-shaped (so the statement's
    list functions truncate nothing), and the certificate checked. *)
Theorem maxout_property_sound : forall net cases ts,
  property_shaped net cases = true -> property_ok net cases ts = true ->
  forall c, In c cases -> forall x : list R, length x = mo_dim net ->
  in_poly (pc_A c) (pc_b c) x ->
  forall O, In O (pc_outs c) -> ~ satR O (x ++ maxoutR net x).
Proof. intros net cases ts _. exact (property_sound net cases ts). Qed.

(** ** Certificates in parts *)

Lemma forall2b_In_combine : forall {A B} (f : A -> B -> bool) l1 l2, forall2b f l1 l2 = true ->
  forall a, In a l1 -> exists b, In (a, b) (combine l1 l2) /\ f a b = true.
Proof.
  intros A B f l1. induction l1 as [|a l1 IH]; intros [|b l2] H a' Ha'; try discriminate.
  - destruct Ha'.
  - cbn [forall2b] in H. apply andb_true_iff in H as [H1 H2].
    destruct Ha' as [<-|Ha'].
    + exists b. split; [left; reflexivity | exact H1].
    + destruct (IH l2 H2 a' Ha') as [b' [Hi Hf]]. exists b'. split; [right; exact Hi | exact Hf].
Qed.

Lemma nth_error_skipn_add : forall {A} k (l : list A) i,
  nth_error (skipn k l) i = nth_error l (k + i).
Proof. intros A k. induction k as [|k IH]; intros [|a l] i; try reflexivity; destruct i; reflexivity || apply IH. Qed.

Lemma parts_ok_safe : forall p d need ts cells i e,
  parts_ok p d need cells ts = true -> (i < length ts)%nat -> nth_error cells i = Some e ->
  cell_safe p d (fst e) (snd e).
Proof.
  intros p d need ts. induction ts as [|t ts IH]; intros cells i e H Hi He;
    cbn [length] in Hi; [lia|].
  destruct cells as [|[outs [[C inh] prev]] cells]; [discriminate|].
  cbn [parts_ok] in H. apply andb_true_iff in H as [Ht H].
  destruct i as [|i].
  - injection He as <-. intros x HC Hd K. exact (check_ptree_sound p d need outs t C inh prev x Ht HC Hd K).
  - exact (IH cells i e H ltac:(lia) He).
Qed.

Lemma groups_ok_safe : forall net cases top gs k n,
  groups_ok (group_ok net cases top) k n gs ->
  forall j e, (k <= j)%nat -> (j < n)%nat -> nth_error (all_cuts net cases top) j = Some e ->
  cell_safe (program_of_maxout net) (mo_dim net) (fst e) (snd e).
Proof.
  intros net cases top gs. induction gs as [|[m ts] gs IH]; intros k n G j e Hk Hn He;
    cbn [groups_ok] in G; [lia|].
  destruct G as [Hg G]. unfold group_ok in Hg. apply andb_true_iff in Hg as [Hm Hg].
  apply Nat.eqb_eq in Hm.
  destruct (Nat.lt_ge_cases j (k + m)) as [Hj|Hj].
  - apply (parts_ok_safe _ _ _ ts (skipn k (all_cuts net cases top)) (j - k) e Hg); [lia|].
    rewrite nth_error_skipn_add. replace (k + (j - k))%nat with j by lia. exact He.
  - exact (IH (k + m)%nat n G j e Hj Hn He).
Qed.

(* what the top file computes: the top checks, with n cut cells *)
Definition parts_top_ok (net : maxout) (cases : list pcase) (top : list ptree) (n : nat) : bool :=
  top_ok net cases top && Nat.eqb (length (all_cuts net cases top)) n.

(** A certificate in parts proves the property: the top trees check with their cuts
    answered, and the groups, checked on their own, cover every cut cell. *)
Theorem property_parts_sound : forall net cases top n gs,
  parts_top_ok net cases top n = true -> groups_ok (group_ok net cases top) 0 n gs ->
  forall c, In c cases -> forall x : list R, length x = mo_dim net ->
  in_poly (pc_A c) (pc_b c) x ->
  forall O, In O (pc_outs c) -> ~ satR O (x ++ maxoutR net x).
Proof.
  intros net cases top n gs Htop G c Hc x Hd Hx O HO.
  unfold parts_top_ok in Htop. apply andb_true_iff in Htop as [Htop Hn].
  apply Nat.eqb_eq in Hn. unfold top_ok in Htop.
  destruct (forall2b_In_combine _ _ _ Htop c Hc) as [t [Hct Ht]].
  rewrite <- (maxout_program_correct net x Hd).
  refine (check_ptree_with_sound true _ _ _ _ t _ [] [] x Ht _ (poly_rows_sound _ _ x Hx) Hd
            (knownR_nil _ _) O HO).
  intros _. apply Forall_forall. intros e He.
  assert (Hin : In (pc_outs c, e) (all_cuts net cases top)).
  { unfold all_cuts. apply in_flat_map. exists (c, t). split; [exact Hct|].
    apply in_map_iff. exists e. split; [reflexivity | exact He]. }
  destruct (In_nth_error _ _ Hin) as [j Hj].
  assert (Hjn : (j < n)%nat) by (rewrite <- Hn; apply nth_error_Some; rewrite Hj; discriminate).
  exact (groups_ok_safe net cases top gs 0 n G j _ ltac:(lia) Hjn Hj).
Qed.

(** What exported files in parts apply (as maxout_property_sound) *)
Theorem maxout_property_parts_sound : forall net cases top n gs,
  property_shaped net cases = true ->
  parts_top_ok net cases top n = true -> groups_ok (group_ok net cases top) 0 n gs ->
  forall c, In c cases -> forall x : list R, length x = mo_dim net ->
  in_poly (pc_A c) (pc_b c) x ->
  forall O, In O (pc_outs c) -> ~ satR O (x ++ maxoutR net x).
Proof. intros net cases top n gs _. exact (property_parts_sound net cases top n gs). Qed.

(* ------------------------------------------------------------------ *)
(** * Packed certificates *)

(* As Checker.unpack_tree, with the trees of property certificates: seven tables (Farkas
   lists, affine maps, choice entries, choice lists, upper functions, refutations, tree
   nodes), an upper function being its lam list (n, then n rationals), beta (a rational), its
   proofs (n Farkas lists' indices) and terms (n, then n pairs node, rational); a refutation
   0 f (RFarkas), 1 i n r_1 .. r_n (RPhase, earlier refutations' indices) or
   2 n i_1 .. i_n m u_1 .. u_m r (RTighten: nodes, upper functions, then a refutation);
   tree nodes 0 c n f_1 .. f_n (PExcluded: a choice list's index and n Farkas lists' indices),
   1 f (PEmpty), 2 a c ge lt (PSplit), 3 c n o_1 .. o_n m (i_1 u_1) .. (i_m u_m) k r_1 .. r_k
   (PRelaxed: o = 0 for no upper function, else 1 + an upper function's index), 4 (PCut); then the
   number of cases and each case's root.  Only a way of writing: property_ok is sound for
   every list of trees. *)

Definition no_ptree : ptree := PEmpty no_farkas.
Definition no_upper : upper := {| up_lam := []; up_beta := 0; up_proofs := []; up_terms := [] |}.
Definition no_rproof : rproof := RFarkas no_farkas.

Definition rd_upper (F : PArray.array cursor) : reader upper :=
  fun l => let '(lam, l1) := rd_list rd_Q l in
           let '(beta, l2) := rd_Q l1 in
           let '(ps, l3) := rd_list (fun l => let '(f, l') := rd_idx l in (PArray.get F f, l')) l2 in
           let '(ts, l4) := rd_list (fun l => let '(k, l1) := rd_nat l in
                                              let '(c, l2) := rd_Q l1 in ((k, c), l2)) l3 in
           ({| up_lam := lam; up_beta := beta; up_proofs := ps; up_terms := ts |}, l4).

Definition rd_pair (U : PArray.array upper) : reader (nat * upper) :=
  fun l => let '(i, l1) := rd_nat l in let '(u, l2) := rd_idx l1 in ((i, PArray.get U u), l2).

Definition rd_rproof (F : Uint63.int -> farkas) (U : PArray.array upper)
                     (P : PArray.array rproof) : reader rproof :=
  fun l => let '(k, l1) := rd l in
           match k with
           | 1%Z => let '(i, l2) := rd_nat l1 in
                    let '(bs, l3) := rd_list rd_idx l2 in
                    (RPhase i (fold_right (fun b acc => RCons (PArray.get P b) acc) RNil bs), l3)
           | 2%Z => let '(ns, l2) := rd_list rd_nat l1 in
                    let '(us, l3) := rd_list (fun l => let '(u, l') := rd_idx l in
                                                       (PArray.get U u, l')) l2 in
                    let '(r, l4) := rd_idx l3 in (RTighten ns us (PArray.get P r), l4)
           | _ => let '(f, l2) := rd_idx l1 in (RFarkas (F f), l2)
           end.

Definition rd_ptree (F : Uint63.int -> farkas) (A : PArray.array aff)
                    (C : PArray.array choices) (U : PArray.array upper)
                    (P : PArray.array rproof) (T : PArray.array ptree) : reader ptree :=
  fun l => let '(k, l1) := rd l in
           match k with
           | 0%Z => let '(c, l2) := rd_idx l1 in
                    let '(ws, l3) := rd_list (fun l => let '(f, l') := rd_idx l in
                                                       (F f, l')) l2 in
                    (PExcluded (PArray.get C c) ws, l3)
           | 1%Z => let '(f, l2) := rd_idx l1 in (PEmpty (F f), l2)
           | 2%Z => let '(a, l2) := rd_idx l1 in let '(c, l3) := rd_idx l2 in
                    let '(g, l4) := rd_idx l3 in let '(t, l5) := rd_idx l4 in
                    (PSplit (PArray.get A a) (PArray.get C c) (PArray.get T g) (PArray.get T t),
                     l5)
           | 3%Z => let '(c, l2) := rd_idx l1 in
                    let '(ups, l3) := rd_list (fun l => let '(o, l') := rd l in
                                        (if Z.eqb o 0 then None
                                         else Some (PArray.get U (Uint63.of_Z (o - 1))), l')) l2 in
                    let '(ex, l4) := rd_list (rd_pair U) l3 in
                    let '(rs, l5) := rd_list (fun l => let '(r, l') := rd_idx l in
                                                       (PArray.get P r, l')) l4 in
                    (PRelaxed (PArray.get C c) ups ex rs, l5)
           | 4%Z => (PCut, l1)
           | _ => (no_ptree, l1)
           end.

Definition unpack_ptrees (a : PArray.array Uint63.int) : list ptree :=
  let l := unpack a in
  (* the Farkas lists' table holds where each lies; they are read where they are used *)
  let '(F, l1) := rd_table l (fun _ l => (l, skip_farkas l)) l in
  let Fr := fun i => farkas_at (PArray.get F i) in
  let '(A, l2) := rd_table azero (fun _ => rd_aff) l1 in
  let '(E, l3) := rd_table (0%nat, 0%nat, {| ch_k := 0; ch_proofs := [] |})
                           (fun _ => rd_entry Fr) l2 in
  let '(C, l4) := rd_table [] (fun _ => rd_choices E) l3 in
  let '(U, l5) := rd_table no_upper (fun _ => rd_upper F) l4 in
  let '(P, l6) := rd_table no_rproof (rd_rproof Fr U) l5 in
  let '(T, l7) := rd_table no_ptree (rd_ptree Fr A C U P) l6 in
  let '(roots, _) := rd_list rd_idx l7 in
  map (PArray.get T) roots.
