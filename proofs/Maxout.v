(* Maxout.v -- Maxout networks as a user writes them, their meaning over R, and the
   translation into programs (exactmax/kernel/program.py, program_of_maxout), proved correct
   once for all networks:

     maxout_program_correct : forall net x, length x = mo_dim net ->
       outsR (program_of_maxout net) x = maxoutR net x.                                   *)

From Coq Require Import QArith Qreals Reals Lra Lia List Bool.
From ExactMax Require Import Checker Sound Build.
Import ListNotations.

(* ------------------------------------------------------------------ *)
(** * Networks *)

(* an affine piece w . h + b *)
Record piece := { pw : list Q; pb : Q }.

(* a unit is the max of its pieces; a layer is a list of units *)
Record maxout := {
  mo_dim : nat;                                    (* input dimension *)
  mo_layers : list (list (list piece));
  mo_out : option (list (list Q) * list Q)         (* y = W h + b; identity when None *)
}.

Local Open Scope R_scope.

Definition pieceR (p : piece) (h : list R) : R := dotR (pw p) h + Q2R (pb p).

Definition layerR (L : list (list piece)) (h : list R) : list R :=
  map (fun u => maxlR (map (fun p => pieceR p h) u)) L.

Fixpoint layersR (Ls : list (list (list piece))) (h : list R) : list R :=
  match Ls with [] => h | L :: Ls' => layersR Ls' (layerR L h) end.

Definition affineR (W : list (list Q)) (b : list Q) (h : list R) : list R :=
  map (fun r => dotR (fst r) h + Q2R (snd r)) (combine W b).

(** The network's output at x. *)
Definition maxoutR (net : maxout) (x : list R) : list R :=
  let h := layersR (mo_layers net) x in
  match mo_out net with
  | None => h
  | Some (W, b) => affineR W b h
  end.

(** Well-shapedness, a computable check: every unit has a piece, every piece of a layer reads
    as many coordinates as the layer below has (mo_dim for the first), and the output map reads
    N_D coordinates with one constant per row.  The list functions above (combine, dotR)
    truncate mismatched lengths; on a well-shaped network they never have to, so maxoutR is
    the network's formula.  Exported files prove it by computation. *)
Fixpoint mo_layers_shaped (n : nat) (Ls : list (list (list piece))) : option nat :=
  match Ls with
  | [] => Some n
  | L :: Ls' =>
      if forallb (fun u => negb (Nat.eqb (length u) O) &&
                           forallb (fun p => Nat.eqb (length (pw p)) n) u) L
      then mo_layers_shaped (length L) Ls' else None
  end.

Definition maxout_shaped (net : maxout) : bool :=
  match mo_layers_shaped (mo_dim net) (mo_layers net), mo_out net with
  | None, _ => false
  | Some _, None => true
  | Some n, Some (W, b) => Nat.eqb (length W) (length b) &&
                           forallb (fun r => Nat.eqb (length r) n) W
  end.

(* ------------------------------------------------------------------ *)
(** * The translation *)

Local Open Scope Q_scope.

Definition var_e (i : nat) : expr := ([(i, 1)], 0, []).
Definition node_e (k : nat) : expr := ([], 0, [(k, 1)]).

Fixpoint nodes_of (es : list expr) (st : list node) : list node * list nat :=
  match es with
  | [] => (st, [])
  | e :: es' =>
      let '(st1, k) := node_of e st in
      let '(st2, ks) := nodes_of es' st1 in (st2, k :: ks)
  end.

Definition unit_of (u : list piece) (h : list expr) (st : list node) : list node * expr :=
  let '(st1, args) := nodes_of (map (fun p => combine_e (pw p) h (pb p)) u) st in
  match args with
  | [k] => (st1, node_e k)
  | _ => let '(st2, m) := add (NMax args) st1 in (st2, node_e m)
  end.

Fixpoint layer_of (L : list (list piece)) (h : list expr) (st : list node) : list node * list expr :=
  match L with
  | [] => (st, [])
  | u :: L' =>
      let '(st1, e) := unit_of u h st in
      let '(st2, es) := layer_of L' h st1 in (st2, e :: es)
  end.

Fixpoint layers_of (Ls : list (list (list piece))) (h : list expr) (st : list node)
  : list node * list expr :=
  match Ls with
  | [] => (st, h)
  | L :: Ls' => let '(st1, h1) := layer_of L h st in layers_of Ls' h1 st1
  end.

Definition program_of_maxout (net : maxout) : prog :=
  let '(st, h) := layers_of (mo_layers net) (map var_e (seq 0 (mo_dim net))) [] in
  let outs := match mo_out net with
              | None => h
              | Some (W, b) => map (fun r => combine_e (fst r) h (snd r)) (combine W b)
              end in
  let '(st', ks) := nodes_of outs st in
  {| p_nodes := st'; p_outs := ks |}.

(* ------------------------------------------------------------------ *)
(** * Correctness *)

Local Open Scope R_scope.

(* expressions es over the nodes st hold the values hv *)
Definition holds (st : list node) (es : list expr) (x hv : list R) : Prop :=
  wf st /\ Forall (ebelow (length st)) es /\ map (fun e => evalE e x (runR st x [])) es = hv.

Lemma holds_extends : forall st st' es x hv, holds st es x hv -> wf st' -> extends st st' ->
  holds st' es x hv.
Proof.
  intros st st' es x hv [Hw [Hb Hv]] Hw' Hx. split; [exact Hw'|]. split.
  - eapply Forall_impl; [|exact Hb]. intros e He. exact (ebelow_mono _ _ e (extends_length _ _ Hx) He).
  - rewrite <- Hv. apply map_ext_in. intros e He. apply evalE_extends; [exact Hx|].
    exact (proj1 (Forall_forall _ _) Hb e He).
Qed.

Lemma nodes_of_sound : forall es st x, wf st -> Forall (ebelow (length st)) es ->
  let '(st', ks) := nodes_of es st in
  wf st' /\ extends st st' /\ Forall (fun k => (k < length st')%nat) ks /\
  map (fun k => nth k (runR st' x []) 0) ks = map (fun e => evalE e x (runR st x [])) es.
Proof.
  induction es as [|e es IH]; intros st x Hw Hb; cbn [nodes_of].
  - split; [exact Hw|]. split; [apply extends_refl|]. split; constructor.
  - inversion Hb as [|? ? He Hes]; subst.
    pose proof (node_of_sound e st x Hw He) as N. destruct (node_of e st) as [st1 k].
    destruct N as [W1 [X1 [K1 V1]]].
    assert (Hes1 : Forall (ebelow (length st1)) es).
    { eapply Forall_impl; [|exact Hes]. intros e' He'. exact (ebelow_mono _ _ e' (extends_length _ _ X1) He'). }
    pose proof (IH st1 x W1 Hes1) as M. destruct (nodes_of es st1) as [st2 ks].
    destruct M as [W2 [X2 [K2 V2]]].
    split; [exact W2|]. split; [exact (extends_trans _ _ _ X1 X2)|]. split.
    + constructor; [exact (Nat.lt_le_trans _ _ _ K1 (extends_length _ _ X2)) | exact K2].
    + cbn [map]. rewrite (extends_nth st1 st2 x k X2 K1), V1, V2. f_equal.
      apply map_ext_in. intros e' He'. apply evalE_extends; [exact X1|].
      exact (proj1 (Forall_forall _ _) Hes e' He').
Qed.

Lemma evalE_node_e : forall k x env, evalE (node_e k) x env = nth k env 0.
Proof. intros. unfold node_e, evalE, sumsp. cbn. rewrite RMicromega.Q2R_0, RMicromega.Q2R_1. lra. Qed.

Lemma unit_of_sound : forall u h st x hv, holds st h x hv ->
  let '(st', e) := unit_of u h st in
  wf st' /\ extends st st' /\ ebelow (length st') e /\
  evalE e x (runR st' x []) = maxlR (map (fun p => pieceR p hv) u).
Proof.
  intros u h st x hv [Hw [Hb Hv]]. unfold unit_of.
  assert (Hp : Forall (ebelow (length st)) (map (fun p => combine_e (pw p) h (pb p)) u)).
  { apply Forall_map. apply Forall_forall. intros p _. apply ebelow_combine. exact Hb. }
  pose proof (nodes_of_sound _ st x Hw Hp) as N.
  destruct (nodes_of (map (fun p => combine_e (pw p) h (pb p)) u) st) as [st1 args].
  destruct N as [W1 [X1 [K1 V1]]].
  assert (Vals : map (fun k => nth k (runR st1 x []) 0) args = map (fun p => pieceR p hv) u).
  { rewrite V1, map_map. apply map_ext. intros p. rewrite evalE_combine, Hv. reflexivity. }
  assert (Gen : let '(st2, m) := add (NMax args) st1 in
                wf st2 /\ extends st st2 /\ ebelow (length st2) (node_e m) /\
                evalE (node_e m) x (runR st2 x []) = maxlR (map (fun p => pieceR p hv) u)).
  { pose proof (add_sound (NMax args) st1 x W1) as A. destruct (add (NMax args) st1) as [st2 m].
    destruct A as [W2 [X2 [K2 V2]]].
    - intros j Hj. cbn [reads] in Hj. exact (proj1 (Forall_forall _ _) K1 j Hj).
    - split; [exact W2|]. split; [exact (extends_trans _ _ _ X1 X2)|]. split.
      + cbn. constructor; [exact K2 | constructor].
      + rewrite evalE_node_e, V2. cbn [eval_nodeR]. rewrite Vals. reflexivity. }
  destruct args as [|k [|k' args']];
    [destruct (add _ st1) as [st2 m]; exact Gen | | destruct (add _ st1) as [st2 m]; exact Gen].
  split; [exact W1|]. split; [exact X1|]. split.
  - cbn. inversion K1; subst. constructor; [assumption | constructor].
  - rewrite evalE_node_e. cbn [map] in Vals. destruct u as [|p [|p' u']]; cbn [map] in Vals;
      try discriminate.
    inversion Vals as [E]. cbn [map maxlR]. rewrite <- E. reflexivity.
Qed.

Lemma layer_of_sound : forall L h st x hv, holds st h x hv ->
  let '(st', es) := layer_of L h st in
  extends st st' /\ holds st' es x (layerR L hv).
Proof.
  induction L as [|u L IH]; intros h st x hv Hh; cbn [layer_of].
  - split; [apply extends_refl|]. destruct Hh as [Hw _]. split; [exact Hw|]. split; constructor.
  - pose proof (unit_of_sound u h st x hv Hh) as U. destruct (unit_of u h st) as [st1 e].
    destruct U as [W1 [X1 [B1 V1]]].
    pose proof (IH h st1 x hv (holds_extends _ _ _ _ _ Hh W1 X1)) as M.
    destruct (layer_of L h st1) as [st2 es]. destruct M as [X2 [W2 [B2 V2]]].
    split; [exact (extends_trans _ _ _ X1 X2)|]. split; [exact W2|]. split.
    + constructor; [exact (ebelow_mono _ _ e (extends_length _ _ X2) B1) | exact B2].
    + cbn [map layerR]. rewrite (evalE_extends st1 st2 e x X2 B1), V1. f_equal. exact V2.
Qed.

Lemma layers_of_sound : forall Ls h st x hv, holds st h x hv ->
  let '(st', es) := layers_of Ls h st in holds st' es x (layersR Ls hv).
Proof.
  induction Ls as [|L Ls IH]; intros h st x hv Hh; cbn [layers_of layersR]; [exact Hh|].
  pose proof (layer_of_sound L h st x hv Hh) as M. destruct (layer_of L h st) as [st1 h1].
  destruct M as [_ H1]. exact (IH h1 st1 x _ H1).
Qed.

Lemma map_nth_seq_from : forall (x pre : list R),
  map (fun i => nth i (pre ++ x) 0) (seq (length pre) (length x)) = x.
Proof.
  induction x as [|a x IH]; intros pre; [reflexivity|].
  cbn [length seq map]. rewrite app_nth2 by lia. rewrite Nat.sub_diag. cbn [nth]. f_equal.
  replace (pre ++ a :: x) with ((pre ++ [a]) ++ x) by (rewrite <- app_assoc; reflexivity).
  replace (S (length pre)) with (length (pre ++ [a])) by (rewrite app_length; simpl; lia).
  apply IH.
Qed.

Lemma inputs_hold : forall d x, length x = d -> holds [] (map var_e (seq 0 d)) x x.
Proof.
  intros d x Hd. split; [intros k Hk; simpl in Hk; lia|]. split.
  - apply Forall_map. apply Forall_forall. intros i _. cbn. constructor.
  - rewrite map_map. subst d.
    transitivity (map (fun i => nth i x 0) (seq 0 (length x))).
    + apply map_ext. intros i. unfold var_e, evalE, sumsp. cbn.
      rewrite RMicromega.Q2R_0, RMicromega.Q2R_1. lra.
    + exact (map_nth_seq_from x []).
Qed.

(** The translation is correct: the program computes the network, at every real input of
    the network's dimension. *)
Theorem maxout_program_correct : forall net x, length x = mo_dim net ->
  outsR (program_of_maxout net) x = maxoutR net x.
Proof.
  intros net x Hd. unfold program_of_maxout, maxoutR.
  pose proof (layers_of_sound (mo_layers net) _ [] x x (inputs_hold _ x Hd)) as M.
  destruct (layers_of (mo_layers net) (map var_e (seq 0 (mo_dim net))) []) as [st h].
  destruct M as [Hw [Hb Hv]].
  set (outs := match mo_out net with
               | None => h
               | Some (W, b) => map (fun r => combine_e (fst r) h (snd r)) (combine W b)
               end).
  assert (Ho : Forall (ebelow (length st)) outs).
  { unfold outs. destruct (mo_out net) as [[W b]|]; [|exact Hb].
    apply Forall_map. apply Forall_forall. intros r _. apply ebelow_combine. exact Hb. }
  pose proof (nodes_of_sound outs st x Hw Ho) as N. destruct (nodes_of outs st) as [st' ks].
  destruct N as [_ [_ [_ V]]]. unfold outsR. cbn [p_nodes p_outs]. rewrite V.
  unfold outs. destruct (mo_out net) as [[W b]|].
  - unfold affineR. rewrite map_map. apply map_ext. intros r. rewrite evalE_combine, Hv. reflexivity.
  - exact Hv.
Qed.
