(* Transformer.v -- Transformers as a user writes them (docs/notes/construction.md §1), their meaning
   over R with hardmax attention (ties averaged), and the translation into programs
   (exactmax/kernel/program.py, program_of_transformer), proved correct once for all
   Transformers:

     transformer_program_correct : forall tf p x, transformer_program tf = Some p ->
       length x = tf_dim tf -> outsR p x = transformerR tf x.

   The translation fails (None) when a query depends on the input (bilinear scores). *)

From Coq Require Import QArith Qreals Reals Lra Lia List Bool.
From ExactMax Require Import Checker Sound Build Maxout.
From Coq Require Uint63.
Import (notations) Uint63.
Import ListNotations.

(* ------------------------------------------------------------------ *)
(** * Transformers *)

Definition mat := list (list Q).

(* A matrix of [cols] columns written by its nonzero entries, row by row: j ~> v is v in
   column j (the first one given for a column counts), every other entry is 0.  Exported files
   write sparse matrices so (column numbers are machine integers, which Coq reads faster than
   nat literals). *)
Notation "j ~> v" := (@pair Uint63.int Q j%uint63 v%Q) (at level 60, no associativity).

Fixpoint sp_get (r : list (Uint63.int * Q)) (j : Uint63.int) : Q :=
  match r with [] => 0 | (k, v) :: r' => if Uint63.eqb k j then v else sp_get r' j end.

(* the columns 0 .. n - 1, from j on *)
Fixpoint columns (n : nat) (j : Uint63.int) : list Uint63.int :=
  match n with O => [] | S n' => j :: columns n' (Uint63.add j 1%uint63) end.

Definition spmat (cols : nat) (rows : list (list (Uint63.int * Q))) : mat :=
  let js := columns cols 0%uint63 in map (fun r => map (sp_get r) js) rows.

(* W_Q, W_K, W_V (s x d_m), W_O (d_m x s), scale lambda > 0 *)
Record head := { h_query : mat; h_key : mat; h_value : mat; h_out : mat; h_scale : Q }.

Inductive sublayer :=
| FeedForward (W1 : mat) (b1 : list Q) (W2 : mat) (b2 : list Q)   (* x + W2 ReLU(W1 x + b1) + b2 *)
| Attention (heads : list head).                                  (* hardmax, with residual *)

Record transformer := {
  tf_dim : nat;                 (* input dimension *)
  tf_dm : nat;                  (* model width d_m *)
  tf_emb : mat;                 (* E, d_m x tf_dim *)
  tf_pos : list (list Q);       (* p_t, one per token *)
  tf_subs : list sublayer;
  tf_token : option nat;        (* read-out token; None: the mean of the tokens *)
  tf_rW : mat; tf_rb : list Q   (* y = R z + r *)
}.

Local Open Scope R_scope.

Definition dotRR (u v : list R) : R := fold_right Rplus 0 (map (fun p => fst p * snd p) (combine u v)).
Definition mvR (M : mat) (v : list R) : list R := map (fun r => dotR r v) M.
Definition affR (M : mat) (b : list Q) (v : list R) : list R :=
  map (fun p => dotR (fst p) v + Q2R (snd p)) (combine M b).
Definition vplus (u v : list R) : list R := map (fun p => fst p + snd p) (combine u v).
Definition reluR (u : R) : R := Rmax u 0.

Definition ffR (W1 : mat) (b1 : list Q) (W2 : mat) (b2 : list Q) (t : list R) : list R :=
  vplus t (affR W2 b2 (map reluR (affR W1 b1 t))).

(* coordinate r of head hd's output for the query token t: the hardmax over the tokens t' of
   (lambda <W_K t', W_Q t>, (W_V t')_r) *)
Definition head_sel (hd : head) (X : list (list R)) (t : list R) (r : nat) : R :=
  let q := mvR (h_query hd) t in
  hardmaxR (combine (map (fun t' => Q2R (h_scale hd) * dotRR (mvR (h_key hd) t') q) X)
                    (map (fun t' => nth r (mvR (h_value hd) t') 0) X)).

(* acc + W_O (head output): column r of W_O times coordinate r, for r = 0, 1, ... *)
Definition head_update (hd : head) (X : list (list R)) (t : list R) (acc : list R) : list R :=
  fold_left (fun acc r => vplus acc (map (fun row => Q2R (nth r row 0%Q) * head_sel hd X t r) (h_out hd)))
            (seq 0 (length (h_value hd))) acc.

(* every token gets the sum of the heads' updates (all heads read the same tokens) *)
Definition attR (dm : nat) (hs : list head) (X : list (list R)) : list (list R) :=
  map (fun t => vplus t (fold_left (fun acc hd => head_update hd X t acc) hs (repeat 0 dm))) X.

Definition subR (dm : nat) (s : sublayer) (X : list (list R)) : list (list R) :=
  match s with
  | FeedForward W1 b1 W2 b2 => map (ffR W1 b1 W2 b2) X
  | Attention hs => attR dm hs X
  end.

Definition n_inv (n : nat) : Q := (1 # Pos.of_nat n)%Q.

Definition readoutR (tf : transformer) (X : list (list R)) : list R :=
  let z := match tf_token tf with
           | Some k => nth k X []
           | None => map (fun i => dotR (repeat (n_inv (length X)) (length X))
                                        (map (fun t => nth i t 0) X)) (seq 0 (tf_dm tf))
           end in
  affR (tf_rW tf) (tf_rb tf) z.

(** The Transformer's output at x: token t starts as E x + p_t, then the sub-layers. *)
Definition transformerR (tf : transformer) (x : list R) : list R :=
  let X0 := map (fun p => affR (tf_emb tf) p x) (tf_pos tf) in
  readoutR tf (fold_left (fun X s => subR (tf_dm tf) s X) (tf_subs tf) X0).

(** Well-shapedness, a computable check: E is d_m x tf_dim, there is a token and every p_t has
    d_m coordinates, W_Q and W_K have the same rows of d_m entries, W_V has rows of d_m entries
    and W_O one column per row of W_V and d_m rows, W1 (h x d_m), b1 (h), W2 (d_m x h),
    b2 (d_m), the read-out token exists, R reads d_m coordinates with one constant per row.
    On a well-shaped Transformer the truncating list functions above never truncate. *)
Definition mat_shaped (rows cols : nat) (M : mat) : bool :=
  Nat.eqb (length M) rows && forallb (fun r => Nat.eqb (length r) cols) M.

Definition head_shaped (dm : nat) (hd : head) : bool :=
  let s := length (h_query hd) in
  let v := length (h_value hd) in
  mat_shaped s dm (h_query hd) && mat_shaped s dm (h_key hd) &&
  mat_shaped v dm (h_value hd) && mat_shaped dm v (h_out hd).

Definition sublayer_shaped (dm : nat) (s : sublayer) : bool :=
  match s with
  | FeedForward W1 b1 W2 b2 =>
      let h := length W1 in
      mat_shaped h dm W1 && Nat.eqb (length b1) h && mat_shaped dm h W2 && Nat.eqb (length b2) dm
  | Attention hs => forallb (head_shaped dm) hs
  end.

Definition transformer_shaped (tf : transformer) : bool :=
  let dm := tf_dm tf in
  mat_shaped dm (tf_dim tf) (tf_emb tf) && negb (Nat.eqb (length (tf_pos tf)) O) &&
  forallb (fun p => Nat.eqb (length p) dm) (tf_pos tf) &&
  forallb (sublayer_shaped dm) (tf_subs tf) &&
  match tf_token tf with None => true | Some k => Nat.ltb k (length (tf_pos tf)) end &&
  mat_shaped (length (tf_rW tf)) dm (tf_rW tf) && Nat.eqb (length (tf_rb tf)) (length (tf_rW tf)).

(* ------------------------------------------------------------------ *)
(** * A state monad for building programs *)

Local Open Scope Q_scope.

Definition M (A : Type) := list node -> option (list node * A).
Definition ret {A} (a : A) : M A := fun st => Some (st, a).
Definition bind {A B} (c : M A) (k : A -> M B) : M B :=
  fun st => match c st with Some (st', a) => k a st' | None => None end.
Definition lift {A} (f : list node -> list node * A) : M A := fun st => Some (f st).
Definition fail {A} : M A := fun _ => None.

Fixpoint mapM {A B} (f : A -> M B) (l : list A) : M (list B) :=
  match l with
  | [] => ret []
  | a :: l' => bind (f a) (fun b => bind (mapM f l') (fun bs => ret (b :: bs)))
  end.

Fixpoint foldM {A B} (f : B -> A -> M B) (l : list A) (b : B) : M B :=
  match l with
  | [] => ret b
  | a :: l' => bind (f b a) (foldM f l')
  end.

(* ------------------------------------------------------------------ *)
(** * The translation (the kernel's _run_sublayers, step by step) *)

Definition const_of (e : expr) : option Q := match e with ([], c, []) => Some c | _ => None end.
Definition exprs_of (Mx : mat) (xt : list expr) : list expr := map (fun r => combine_e r xt 0) Mx.
Definition add_const (e : expr) (c : Q) : expr := let '(xs, c0, ts) := e in (xs, Qred (c0 + c), ts).

(* ReLU(u): a constant, or Max(u, 0) *)
Definition relu_hidden (u : expr) : M expr :=
  match const_of u with
  | Some c => ret ([], if Qle_bool 0 c then c else 0, [])
  | None => bind (lift (add (NLin [] 0 []))) (fun z =>
            bind (lift (node_of u)) (fun k =>
            bind (lift (add (NMax [k; z]))) (fun m => ret (node_e m))))
  end.

Fixpoint opp_list (u v : list Q) : bool :=
  match u, v with
  | [], [] => true
  | a :: u', b :: v' => Qeq_bool b (- a) && opp_list u' v'
  | _, _ => false
  end.

(* hidden units h and h + 1 are opposite: then W2 ReLU(u) + W2' ReLU(-u) = W2 u *)
Definition opposite (W2 : mat) (h : nat) (a b : list Q * Q) : bool :=
  Qeq_bool (snd b) (- snd a) && opp_list (fst a) (fst b) &&
  forallb (fun row => Qeq_bool (nth (S h) row 0) (- nth h row 0)) W2.

(* the hidden values of one token: (h, expression), partners of pairs left out *)
Fixpoint hidden_of (W2 : mat) (xt : list expr) (h : nat) (us : list (list Q * Q)) : M (list (nat * expr)) :=
  match us with
  | [] => ret []
  | a :: tl =>
      if match tl with b :: _ => opposite W2 h a b | [] => false end
      then match tl with
           | _ :: rest => bind (hidden_of W2 xt (S (S h)) rest) (fun hs =>
                            ret ((h, combine_e (fst a) xt (snd a)) :: hs))
           | [] => ret []
           end
      else bind (relu_hidden (combine_e (fst a) xt (snd a))) (fun e =>
           bind (hidden_of W2 xt (S h) tl) (fun hs => ret ((h, e) :: hs)))
  end.

Definition ff_out (hs : list (nat * expr)) (xe : expr) (row : list Q) (c : Q) : expr :=
  fold_left (fun acc he => axpy (nth (fst he) row 0) (snd he) acc) hs (add_const xe c).

Definition ff_token (W1 : mat) (b1 : list Q) (W2 : mat) (b2 : list Q) (xt : list expr) : M (list expr) :=
  bind (hidden_of W2 xt 0 (combine W1 b1)) (fun hs =>
  ret (map (fun p => ff_out hs (fst p) (fst (snd p)) (snd (snd p))) (combine xt (combine W2 b2)))).

(* one head, for the query token with expressions xt, adding to its updates upd *)
Definition head_token (hd : head) (keys : list (list expr)) (values : list (list nat))
           (xt : list expr) (upd : list expr) : M (list expr) :=
  match all_some (map const_of (exprs_of (h_query hd) xt)) with
  | None => fail
  | Some qc =>
      bind (mapM (fun k => lift (node_of (combine_e (map (fun c => Qred (h_scale hd * c)) qc) k 0))) keys)
        (fun scores =>
      foldM (fun u r =>
               bind (lift (add (NSel (combine scores (map (fun vs => nth r vs O) values))))) (fun m =>
               ret (map (fun p => axpy (nth r (snd p) 0%Q) (node_e m) (fst p)) (combine u (h_out hd)))))
            (seq 0 (length (h_value hd))) upd)
  end.

Definition head_all (X : list (list expr)) (U : list (list expr)) (hd : head) : M (list (list expr)) :=
  let keys := map (exprs_of (h_key hd)) X in
  bind (mapM (fun xt => lift (nodes_of (exprs_of (h_value hd) xt))) X) (fun values =>
  mapM (fun p => head_token hd keys values (fst p) (snd p)) (combine X U)).

Definition zero_e : expr := ([], 0, []).

Definition att_tokens (dm : nat) (hs : list head) (X : list (list expr)) : M (list (list expr)) :=
  bind (foldM (head_all X) hs (map (fun _ => repeat zero_e dm) X)) (fun U =>
  ret (map (fun p => map (fun q => axpy 1 (snd q) (fst q)) (combine (fst p) (snd p))) (combine X U))).

Definition sub_tokens (dm : nat) (s : sublayer) (X : list (list expr)) : M (list (list expr)) :=
  match s with
  | FeedForward W1 b1 W2 b2 => mapM (ff_token W1 b1 W2 b2) X
  | Attention hs => att_tokens dm hs X
  end.

Definition readout_exprs (tf : transformer) (X : list (list expr)) : list expr :=
  let z := match tf_token tf with
           | Some k => nth k X []
           | None => map (fun i => combine_e (repeat (n_inv (length X)) (length X))
                                             (map (fun t => nth i t zero_e) X) 0) (seq 0 (tf_dm tf))
           end in
  map (fun rc => combine_e (fst rc) z (snd rc)) (combine (tf_rW tf) (tf_rb tf)).

Definition embed_exprs (tf : transformer) : list (list expr) :=
  let h := map var_e (seq 0 (tf_dim tf)) in
  map (fun p => map (fun rc => combine_e (fst rc) h (snd rc)) (combine (tf_emb tf) p)) (tf_pos tf).

Definition transformer_program (tf : transformer) : option prog :=
  match bind (foldM (fun X s => sub_tokens (tf_dm tf) s X) (tf_subs tf) (embed_exprs tf)) (fun X =>
        lift (nodes_of (readout_exprs tf X))) [] with
  | Some (st, ks) => Some {| p_nodes := st; p_outs := ks |}
  | None => None
  end.

(* ------------------------------------------------------------------ *)
(** * Correctness *)

Local Open Scope R_scope.

Section Correct.
Variable x : list R.

Definition val (st : list node) (e : expr) : R := evalE e x (runR st x []).
(* expression e over the nodes st has value v *)
Definition ev (st : list node) (e : expr) (v : R) : Prop := ebelow (length st) e /\ val st e = v.
(* node k of st has value v *)
Definition nv (st : list node) (k : nat) (v : R) : Prop := (k < length st)%nat /\ nth k (runR st x []) 0 = v.

Definition stable (F : list node -> Prop) : Prop :=
  forall st st', F st -> wf st' -> extends st st' -> F st'.

Definition spec {A} (Pre : list node -> Prop) (c : M A) (Post : list node -> A -> Prop) : Prop :=
  forall st, wf st -> Pre st ->
  match c st with Some (st', a) => wf st' /\ extends st st' /\ Post st' a | None => True end.

Lemma ev_stable : forall e v, stable (fun st => ev st e v).
Proof.
  intros e v st st' [Hb Hv] _ Hx. split; [exact (ebelow_mono _ _ e (extends_length _ _ Hx) Hb)|].
  unfold val in *. rewrite (evalE_extends st st' e x Hx Hb). exact Hv.
Qed.

Lemma nv_stable : forall k v, stable (fun st => nv st k v).
Proof.
  intros k v st st' [Hk Hv] _ Hx. split; [exact (Nat.lt_le_trans _ _ _ Hk (extends_length _ _ Hx))|].
  rewrite (extends_nth st st' x k Hx Hk). exact Hv.
Qed.

Lemma Forall2_stable : forall {A B} (P : list node -> A -> B -> Prop) l1 l2,
  (forall a b, stable (fun st => P st a b)) -> stable (fun st => Forall2 (P st) l1 l2).
Proof.
  intros A B P l1 l2 HP st st' H Hw Hx. induction H; constructor; [|exact IHForall2].
  exact (HP _ _ st st' H Hw Hx).
Qed.

Lemma Forall_stable : forall {A} (P : list node -> A -> Prop) l,
  (forall a, stable (fun st => P st a)) -> stable (fun st => Forall (P st) l).
Proof.
  intros A P l HP st st' H Hw Hx. induction H; constructor; [exact (HP _ st st' H Hw Hx) | exact IHForall].
Qed.

Lemma and_stable : forall F G, stable F -> stable G -> stable (fun st => F st /\ G st).
Proof. intros F G HF HG st st' [H1 H2] Hw Hx. split; [exact (HF _ _ H1 Hw Hx) | exact (HG _ _ H2 Hw Hx)]. Qed.

Lemma spec_ret : forall {A} (Pre : list node -> Prop) (a : A) (Post : list node -> A -> Prop),
  (forall st, Pre st -> Post st a) -> spec Pre (ret a) Post.
Proof. intros A Pre a Post H st Hw HP. cbn. split; [exact Hw|]. split; [apply extends_refl | exact (H st HP)]. Qed.

Lemma spec_bind : forall {A B} Pre (c : M A) P (k : A -> M B) Q,
  spec Pre c P -> (forall a, spec (fun st => P st a) (k a) Q) -> spec Pre (bind c k) Q.
Proof.
  intros A B Pre c P k Q Hc Hk st Hw HP. unfold bind.
  specialize (Hc st Hw HP). destruct (c st) as [[st1 a]|]; [|exact I].
  destruct Hc as [W1 [X1 P1]]. specialize (Hk a st1 W1 P1). destruct (k a st1) as [[st2 b]|]; [|exact I].
  destruct Hk as [W2 [X2 Q2]]. split; [exact W2|]. split; [exact (extends_trans _ _ _ X1 X2) | exact Q2].
Qed.

Lemma spec_weaken : forall {A} (Pre Pre' : list node -> Prop) (c : M A) (P P' : list node -> A -> Prop),
  spec Pre c P -> (forall st, Pre' st -> Pre st) -> (forall st a, P st a -> P' st a) -> spec Pre' c P'.
Proof.
  intros A Pre Pre' c P P' H H1 H2 st Hw HP. specialize (H st Hw (H1 st HP)).
  destruct (c st) as [[st' a]|]; [|exact I]. destruct H as [W [X' Pa]]. split; [exact W|]. split; [exact X'|].
  exact (H2 _ _ Pa).
Qed.

(* the frame rule: a stable fact survives any computation *)
Lemma spec_frame : forall {A} Pre (c : M A) P F, spec Pre c P -> stable F ->
  spec (fun st => Pre st /\ F st) c (fun st a => P st a /\ F st).
Proof.
  intros A Pre c P F H HF st Hw [HP HFs]. specialize (H st Hw HP).
  destruct (c st) as [[st' a]|]; [|exact I]. destruct H as [W [X' Pa]].
  split; [exact W|]. split; [exact X'|]. split; [exact Pa | exact (HF _ _ HFs W X')].
Qed.

Lemma spec_fail : forall {A} Pre (Post : list node -> A -> Prop), spec Pre fail Post.
Proof. intros A Pre Post st _ _. exact I. Qed.

(* mapM: elementwise specs compose into a list spec *)
Lemma spec_mapM : forall {A B} (f : A -> M B) (Pre : list node -> A -> Prop) (Post : list node -> A -> B -> Prop),
  (forall a, stable (fun st => Pre st a)) -> (forall a b, stable (fun st => Post st a b)) ->
  (forall a, spec (fun st => Pre st a) (f a) (fun st b => Post st a b)) ->
  forall l, spec (fun st => Forall (Pre st) l) (mapM f l) (fun st bs => Forall2 (Post st) l bs).
Proof.
  intros A B f Pre Post SPre SPost Hf l. induction l as [|a l IH]; cbn [mapM].
  - apply spec_ret. intros. constructor.
  - apply (spec_bind _ _ (fun st b => Post st a b /\ Forall (Pre st) l)).
    + eapply spec_weaken; [apply (spec_frame _ _ _ (fun st => Forall (Pre st) l) (Hf a))| |].
      * apply Forall_stable. exact SPre.
      * intros st H. inversion H; subst. split; assumption.
      * intros st b H. exact H.
    + intros b. apply (spec_bind _ _ (fun st bs => Forall2 (Post st) l bs /\ Post st a b)).
      * eapply spec_weaken; [apply (spec_frame _ _ _ (fun st => Post st a b) IH)| |].
        -- apply SPost.
        -- intros st [H1 H2]. split; assumption.
        -- intros st bs H. exact H.
      * intros bs. apply spec_ret. intros st [H1 H2]. constructor; assumption.
Qed.

(* foldM with an invariant *)
Lemma spec_foldM : forall {A B} (f : B -> A -> M B) (I : list node -> list A -> B -> Prop),
  (forall a l b, spec (fun st => I st (a :: l) b) (f b a) (fun st b' => I st l b')) ->
  forall l b, spec (fun st => I st l b) (foldM f l b) (fun st b' => I st [] b').
Proof.
  intros A B f I H l. induction l as [|a l IH]; intros b; cbn [foldM].
  - apply spec_ret. intros st Hi. exact Hi.
  - apply (spec_bind _ _ (fun st b' => I st l b')); [apply H | intros b'; apply IH].
Qed.

(* ---- node creation ---- *)

Lemma spec_node_of : forall e v, spec (fun st => ev st e v) (lift (node_of e)) (fun st k => nv st k v).
Proof.
  intros e v st Hw [Hb Hv]. cbn. pose proof (node_of_sound e st x Hw Hb) as N.
  destruct (node_of e st) as [st' k]. destruct N as [W [X' [K V]]].
  split; [exact W|]. split; [exact X'|]. split; [exact K|]. rewrite V. exact Hv.
Qed.

Lemma spec_add : forall n v,
  spec (fun st => (forall j, In j (reads n) -> (j < length st)%nat) /\ eval_nodeR n x (runR st x []) = v)
       (lift (add n)) (fun st k => nv st k v).
Proof.
  intros n v st Hw [Hr Hv]. cbn. pose proof (add_sound n st x Hw Hr) as A.
  destruct (add n st) as [st' k]. destruct A as [W [X' [K V]]].
  split; [exact W|]. split; [exact X'|]. split; [exact K|]. rewrite V. exact Hv.
Qed.

Lemma nv_list : forall st ks vs, Forall2 (nv st) ks vs ->
  (forall j, In j ks -> (j < length st)%nat) /\ map (fun k => nth k (runR st x []) 0) ks = vs.
Proof.
  intros st ks vs H. induction H as [|k v ks vs [Hk Hv] H IH]; [split; [intros j []|reflexivity]|].
  destruct IH as [I1 I2]. split.
  - intros j [<-|Hj]; [exact Hk | exact (I1 j Hj)].
  - cbn [map]. rewrite Hv, I2. reflexivity.
Qed.

Lemma ev_node_e : forall st k v, nv st k v -> ev st (node_e k) v.
Proof.
  intros st k v [Hk Hv]. split; [cbn; constructor; [exact Hk | constructor]|].
  unfold val. rewrite evalE_node_e. exact Hv.
Qed.

(* ---- expressions ---- *)

Lemma ev_combine : forall st row es vs c, Forall2 (ev st) es vs ->
  ev st (combine_e row es c) (dotR row vs + Q2R c).
Proof.
  intros st row es vs c H. split.
  - apply ebelow_combine. induction H; constructor; [exact (proj1 H) | exact IHForall2].
  - unfold val. rewrite evalE_combine. f_equal. f_equal.
    induction H as [|e v es vs [_ He] H IH]; [reflexivity|]. cbn [map]. rewrite <- He, IH. reflexivity.
Qed.

Lemma ev_axpy : forall st a e acc v w, ev st e v -> ev st acc w -> ev st (axpy a e acc) (w + Q2R a * v).
Proof.
  intros st a e acc v w [Hb Hv] [Hb' Hw]. split; [exact (ebelow_axpy _ a e acc Hb Hb')|].
  unfold val in *. rewrite evalE_axpy, Hv, Hw. reflexivity.
Qed.

Lemma ev_add_const : forall st e c v, ev st e v -> ev st (add_const e c) (v + Q2R c).
Proof.
  intros st [[xs c0] ts] c v [Hb Hv]. split; [exact Hb|]. unfold val, evalE in *. cbn [add_const].
  rewrite Q2R_red, Q2R_plus. lra.
Qed.

Lemma Forall2_ev_below : forall st es vs, Forall2 (ev st) es vs -> Forall (ebelow (length st)) es.
Proof. intros st es vs H. induction H; constructor; [exact (proj1 H) | exact IHForall2]. Qed.

(* ---- feed-forward ---- *)

Lemma Q2R_relu : forall c, Q2R (if Qle_bool 0 c then c else 0) = reluR (Q2R c).
Proof.
  intros c. unfold reluR. destruct (Qle_bool 0 c) eqn:E.
  - apply Qle_bool_R in E. rewrite RMicromega.Q2R_0 in E. rewrite Rmax_left by lra. reflexivity.
  - apply Qnle_bool_R in E. rewrite RMicromega.Q2R_0 in *. rewrite Rmax_right by lra. reflexivity.
Qed.

Lemma spec_relu : forall u v, spec (fun st => ev st u v) (relu_hidden u) (fun st e => ev st e (reluR v)).
Proof.
  intros u v. unfold relu_hidden. destruct (const_of u) as [c|] eqn:Ec.
  - apply spec_ret. intros st [Hb Hv]. destruct u as [[[|? ?] c0] [|? ?]]; cbn in Ec; try discriminate.
    inversion Ec; subst c0. split; [cbn; constructor|]. unfold val, evalE in *. unfold sumsp in *. cbn in *.
    rewrite Q2R_relu, <- Hv. replace (0 + Q2R c + 0) with (Q2R c) by lra. lra.
  - apply (spec_bind _ _ (fun st z => nv st z 0 /\ ev st u v)).
    + eapply spec_weaken; [apply (spec_frame _ _ _ _ (spec_add (NLin [] 0 []) 0) (ev_stable u v))| |].
      * intros st H. split; [|exact H]. split; [intros j []|].
        cbn. unfold sumsp. cbn. rewrite RMicromega.Q2R_0. lra.
      * intros st z H. exact H.
    + intros z. apply (spec_bind _ _ (fun st k => nv st k v /\ nv st z 0)).
      * eapply spec_weaken; [apply (spec_frame _ _ _ _ (spec_node_of u v) (nv_stable z 0))| |].
        -- intros st [H1 H2]. split; assumption.
        -- intros st k H. exact H.
      * intros k. apply (spec_bind _ _ (fun st m => nv st m (reluR v))).
        -- eapply spec_weaken; [apply (spec_add (NMax [k; z]) (reluR v))| |].
           ++ intros st [[Hk Vk] [Hz Vz]]. split.
              ** intros j [<-|[<-|[]]]; assumption.
              ** cbn [eval_nodeR map]. rewrite Vk, Vz. reflexivity.
           ++ intros st m H. exact H.
        -- intros m. apply spec_ret. intros st H. exact (ev_node_e st m _ H).
Qed.

(* the hidden layer's contribution to output coordinate with weights row *)
Definition hsum (st : list node) (hs : list (nat * expr)) (row : list Q) : R :=
  fold_right (fun he acc => Q2R (nth (fst he) row 0%Q) * val st (snd he) + acc) 0 hs.


(* ---- feed-forward ---- *)

Lemma val_stable_list : forall st st' es, extends st st' -> Forall (ebelow (length st)) es ->
  map (val st') es = map (val st) es.
Proof.
  intros st st' es Hx H. induction H as [|e es He H IH]; [reflexivity|]. cbn [map]. rewrite IH.
  unfold val. rewrite (evalE_extends st st' e x Hx He). reflexivity.
Qed.

Lemma Forall2_ev_val : forall st es vs, Forall2 (ev st) es vs -> map (val st) es = vs.
Proof. intros st es vs H. induction H as [|e v es vs [_ He] H IH]; [reflexivity|]. cbn. rewrite He, IH. reflexivity. Qed.

Lemma ev_of_val : forall st es, Forall (ebelow (length st)) es -> Forall2 (ev st) es (map (val st) es).
Proof. intros st es H. induction H; constructor; [split; [assumption | reflexivity] | assumption]. Qed.

Fixpoint hsem (tv : list R) (row : list Q) (h : nat) (us : list (list Q * Q)) : R :=
  match us with
  | [] => 0
  | u :: us' => Q2R (nth h row 0%Q) * reluR (dotR (fst u) tv + Q2R (snd u)) + hsem tv row (S h) us'
  end.

Definition hbelow (st : list node) (hs : list (nat * expr)) : Prop :=
  Forall (fun he => ebelow (length st) (snd he)) hs.

Lemma hsum_stable : forall st st' hs row, extends st st' -> hbelow st hs -> hsum st' hs row = hsum st hs row.
Proof.
  intros st st' hs row Hx H. induction H as [|[h e] hs He H IH]; [reflexivity|].
  cbn [hsum fold_right fst snd] in *. fold (hsum st' hs row). fold (hsum st hs row). rewrite IH.
  unfold val. rewrite (evalE_extends st st' e x Hx He). reflexivity.
Qed.

Lemma hbelow_stable : forall hs, stable (fun st => hbelow st hs).
Proof.
  intros hs st st' H _ Hx. eapply Forall_impl; [|exact H]. intros he He.
  exact (ebelow_mono _ _ _ (extends_length _ _ Hx) He).
Qed.

Lemma dotR_opp : forall u v (tv : list R), opp_list u v = true -> dotR v tv = - dotR u tv.
Proof.
  induction u as [|a u IH]; intros [|b v] tv H; cbn [opp_list] in H; try discriminate.
  - cbn. lra.
  - apply andb_true_iff in H as [H1 H2]. apply Qeq_bool_eq, Qeq_eqR in H1. rewrite Q2R_opp in H1.
    destruct tv as [|t tv]; cbn [dotR]; [lra|]. rewrite H1, (IH v tv H2). lra.
Qed.

Lemma relu_pair : forall u, reluR u - reluR (- u) = u.
Proof. intros u. unfold reluR, Rmax. destruct (Rle_dec u 0); destruct (Rle_dec (- u) 0); lra. Qed.

Definition xt_pre (xt : list expr) (tv : list R) : list node -> Prop := fun st => Forall2 (ev st) xt tv.

Lemma xt_pre_stable : forall xt tv, stable (xt_pre xt tv).
Proof. intros. apply Forall2_stable. intros; apply ev_stable. Qed.

Definition hidden_post (W2 : mat) (tv : list R) (h : nat) (us : list (list Q * Q))
  (st : list node) (hs : list (nat * expr)) : Prop :=
  hbelow st hs /\ forall row, In row W2 -> hsum st hs row = hsem tv row h us.

Lemma spec_hidden_n : forall W2 xt tv n us h, (length us <= n)%nat ->
  spec (xt_pre xt tv) (hidden_of W2 xt h us) (hidden_post W2 tv h us).
Proof.
  intros W2 xt tv n. induction n as [|n IH]; intros us h Hn.
  { destruct us; [|simpl in Hn; lia]. cbn [hidden_of]. apply spec_ret. intros st _.
    split; [constructor | intros; reflexivity]. }
  destruct us as [|a tl]; cbn [hidden_of].
  { apply spec_ret. intros st _. split; [constructor | intros; reflexivity]. }
  destruct (match tl with b :: _ => opposite W2 h a b | [] => false end) eqn:Ep.
  - destruct tl as [|b rest]; [discriminate|].
    apply (spec_bind _ _ (fun st hs => hidden_post W2 tv (S (S h)) rest st hs /\ xt_pre xt tv st)).
    + eapply spec_weaken; [apply (spec_frame _ _ _ (xt_pre xt tv) (IH rest (S (S h)) ltac:(simpl in Hn; lia)))| |].
      * apply xt_pre_stable.
      * intros st H. split; exact H.
      * intros st hs H. exact H.
    + intros hs. apply spec_ret. intros st [[Hb Hs] Hx].
      pose proof (ev_combine st (fst a) xt tv (snd a) Hx) as [Ba Va].
      split; [constructor; [exact Ba | exact Hb]|].
      intros row Hrow. cbn [hsum fold_right fst snd]. fold (hsum st hs row). rewrite Hs by exact Hrow.
      rewrite Va. cbn [hsem].
      unfold opposite in Ep. apply andb_true_iff in Ep as [Ep Hcol]. apply andb_true_iff in Ep as [Hb1 Hw1].
      rewrite forallb_forall in Hcol. specialize (Hcol row Hrow).
      apply Qeq_bool_eq, Qeq_eqR in Hcol. rewrite Q2R_opp in Hcol. rewrite Hcol.
      apply Qeq_bool_eq, Qeq_eqR in Hb1. rewrite Q2R_opp in Hb1. rewrite Hb1, (dotR_opp _ _ tv Hw1).
      replace (- dotR (fst a) tv + - Q2R (snd a)) with (- (dotR (fst a) tv + Q2R (snd a))) by lra.
      pose proof (relu_pair (dotR (fst a) tv + Q2R (snd a))) as P.
      set (u := dotR (fst a) tv + Q2R (snd a)) in *. set (w := Q2R (nth h row 0%Q)).
      replace (w * reluR u + (- w * reluR (- u) + hsem tv row (S (S h)) rest))
        with (w * (reluR u - reluR (- u)) + hsem tv row (S (S h)) rest) by ring.
      rewrite P. ring.
  - set (u := combine_e (fst a) xt (snd a)).
    set (uv := dotR (fst a) tv + Q2R (snd a)).
    apply (spec_bind _ _ (fun st e => ev st e (reluR uv) /\ xt_pre xt tv st)).
    + eapply spec_weaken; [apply (spec_frame _ _ _ (xt_pre xt tv) (spec_relu u uv))| |].
      * apply xt_pre_stable.
      * intros st H. split; [exact (ev_combine st (fst a) xt tv (snd a) H) | exact H].
      * intros st e H. exact H.
    + intros e. apply (spec_bind _ _ (fun st hs => hidden_post W2 tv (S h) tl st hs /\ ev st e (reluR uv))).
      * eapply spec_weaken; [apply (spec_frame _ _ _ (fun st => ev st e (reluR uv)) (IH tl (S h) ltac:(simpl in Hn; lia)))| |].
        -- apply ev_stable.
        -- intros st [H1 H2]. split; assumption.
        -- intros st hs H. exact H.
      * intros hs. apply spec_ret. intros st [[Hb Hs] [Be Ve]].
        split; [constructor; [exact Be | exact Hb]|].
        intros row Hrow. cbn [hsum fold_right fst snd hsem]. fold (hsum st hs row).
        rewrite Hs by exact Hrow. rewrite Ve. reflexivity.
Qed.

Lemma dotR_skipn_cons : forall h row a (l : list R),
  dotR (skipn h row) (a :: l) = Q2R (nth h row 0%Q) * a + dotR (skipn (S h) row) l.
Proof.
  induction h as [|h IH]; intros row a l.
  - destruct row as [|q row]; cbn [skipn nth dotR]; [rewrite RMicromega.Q2R_0; lra | reflexivity].
  - destruct row as [|q row]; cbn [skipn nth]; [cbn [dotR]; rewrite RMicromega.Q2R_0; lra | apply IH].
Qed.

Lemma hsem_dot : forall tv row us h,
  hsem tv row h us = dotR (skipn h row) (map (fun u => reluR (dotR (fst u) tv + Q2R (snd u))) us).
Proof.
  intros tv row us. induction us as [|u us IH]; intros h; cbn [hsem map].
  - destruct (skipn h row); reflexivity.
  - rewrite dotR_skipn_cons, IH. reflexivity.
Qed.

Lemma ff_out_value : forall st hs xe row c v, hbelow st hs -> ev st xe v ->
  ev st (ff_out hs xe row c) (v + Q2R c + hsum st hs row).
Proof.
  intros st hs xe row c v Hh Hx. unfold ff_out.
  assert (G : forall hs acc w, hbelow st hs -> ev st acc w ->
            ev st (fold_left (fun acc he => axpy (nth (fst he) row 0%Q) (snd he) acc) hs acc)
               (w + hsum st hs row)).
  { clear. induction hs as [|[h e] hs IH]; intros acc w Hh Ha; cbn [fold_left].
    - unfold hsum. cbn. replace (w + 0) with w by lra. exact Ha.
    - inversion Hh as [|? ? He Hh']; subst. cbn [snd fst] in He.
      assert (E : w + hsum st ((h, e) :: hs) row = (w + Q2R (nth h row 0%Q) * val st e) + hsum st hs row)
        by (unfold hsum; cbn; lra).
      rewrite E. apply IH; [exact Hh'|]. apply ev_axpy; [split; [exact He | reflexivity] | exact Ha]. }
  apply G; [exact Hh | exact (ev_add_const st xe c v Hx)].
Qed.

Lemma Forall2_ev_combine_map : forall {Y} st (F : expr -> Y -> expr) (G : Y -> R) xt tv (Ys : list Y),
  Forall2 (ev st) xt tv ->
  (forall y e v, In y Ys -> ev st e v -> ev st (F e y) (v + G y)) ->
  Forall2 (ev st) (map (fun p => F (fst p) (snd p)) (combine xt Ys))
                  (map (fun p => fst p + snd p) (combine tv (map G Ys))).
Proof.
  intros Y st F G xt tv Ys H. revert Ys. induction H as [|e v xt tv He H IH]; intros Ys HF; [constructor|].
  destruct Ys as [|y Ys]; cbn [combine map]; [constructor|]. constructor.
  - cbn [fst snd]. apply HF; [left; reflexivity | exact He].
  - apply IH. intros y' e' v' Hy He'. apply HF; [right; exact Hy | exact He'].
Qed.

Lemma spec_ff_token : forall W1 b1 W2 b2 xt tv,
  spec (xt_pre xt tv) (ff_token W1 b1 W2 b2 xt) (fun st out => Forall2 (ev st) out (ffR W1 b1 W2 b2 tv)).
Proof.
  intros W1 b1 W2 b2 xt tv. unfold ff_token.
  apply (spec_bind _ _ (fun st hs => hidden_post W2 tv 0 (combine W1 b1) st hs /\ xt_pre xt tv st)).
  - eapply spec_weaken; [apply (spec_frame _ _ _ (xt_pre xt tv) (spec_hidden_n W2 xt tv _ _ 0 (le_n _)))| |].
    + apply xt_pre_stable.
    + intros st H. split; exact H.
    + intros st hs H. exact H.
  - intros hs. apply spec_ret. intros st [[Hb Hs] Hx]. unfold ffR, vplus, affR.
    set (hv := map reluR (map (fun p => dotR (fst p) tv + Q2R (snd p)) (combine W1 b1))).
    apply (Forall2_ev_combine_map st (fun e y => ff_out hs e (fst y) (snd y))
             (fun y => dotR (fst y) hv + Q2R (snd y)) xt tv (combine W2 b2) Hx).
    intros [row c] e v Hy He. cbn [fst snd].
    pose proof (ff_out_value st hs e row c v Hb He) as [F1 F2]. split; [exact F1|].
    rewrite F2, Hs by exact (in_combine_l _ _ _ _ Hy). rewrite hsem_dot. cbn [skipn].
    unfold hv. rewrite map_map. lra.
Qed.


(* ---- attention ---- *)

Lemma ev_combine0 : forall st row es vs, Forall2 (ev st) es vs -> ev st (combine_e row es 0) (dotR row vs).
Proof.
  intros st row es vs H. destruct (ev_combine st row es vs 0 H) as [H1 H2]. split; [exact H1|].
  rewrite H2, RMicromega.Q2R_0. lra.
Qed.

Lemma ev_exprs_of : forall st Mx xt tv, Forall2 (ev st) xt tv -> Forall2 (ev st) (exprs_of Mx xt) (mvR Mx tv).
Proof.
  intros st Mx xt tv H. unfold exprs_of, mvR. induction Mx as [|r Mx IH]; cbn [map]; constructor;
    [exact (ev_combine0 st r xt tv H) | exact IH].
Qed.


Lemma Forall2_of_map : forall {A B} (P : A -> Prop) (f : A -> B) l vs, Forall P l -> map f l = vs ->
  Forall2 (fun a v => P a /\ f a = v) l vs.
Proof.
  intros A B P f l vs H. revert vs. induction H as [|a l Ha H IH]; intros vs E; cbn in E; subst; constructor.
  - split; [exact Ha | reflexivity].
  - apply IH. reflexivity.
Qed.

Lemma spec_nodes_of : forall es vs,
  spec (fun st => Forall2 (ev st) es vs) (lift (nodes_of es)) (fun st ks => Forall2 (nv st) ks vs).
Proof.
  intros es vs st Hw H. cbn. pose proof (nodes_of_sound es st x Hw (Forall2_ev_below _ _ _ H)) as N.
  destruct (nodes_of es st) as [st' ks]. destruct N as [W [X' [K V]]].
  split; [exact W|]. split; [exact X'|].
  apply (Forall2_of_map (fun k => (k < length st')%nat) (fun k => nth k (runR st' x []) 0)); [exact K|].
  rewrite V. exact (Forall2_ev_val _ _ _ H).
Qed.

Lemma const_values : forall st es qc vs, all_some (map const_of es) = Some qc -> Forall2 (ev st) es vs ->
  map Q2R qc = vs.
Proof.
  intros st es qc vs Hc H. revert qc Hc. induction H as [|e v es vs [_ He] H IH]; intros qc Hc;
    cbn [map all_some] in Hc.
  - inversion Hc. reflexivity.
  - destruct (const_of e) as [c|] eqn:Ec; [|discriminate].
    destruct (all_some (map const_of es)) as [r|] eqn:Er; [|discriminate]. inversion Hc; subst.
    cbn [map]. rewrite (IH r eq_refl). f_equal.
    destruct e as [[[|? ?] c0] [|? ?]]; cbn in Ec; try discriminate. inversion Ec; subst.
    unfold val, evalE, sumsp. cbn. lra.
Qed.

Lemma dotR_scaled : forall s qc kv,
  dotR (map (fun c => Qred (s * c)) qc) kv = Q2R s * dotRR kv (map Q2R qc).
Proof.
  intros s qc. induction qc as [|c qc IH]; intros [|k kv]; cbn [map dotR]; unfold dotRR; cbn [combine map fold_right];
    try lra.
  fold (dotRR kv (map Q2R qc)). rewrite IH, Q2R_red, Q2R_mult. cbn [fst snd]. lra.
Qed.

Lemma map_pair_combine : forall {A B} (f : A -> B) (a b : list A),
  map (fun p => (f (fst p), f (snd p))) (combine a b) = combine (map f a) (map f b).
Proof. intros A B f a. induction a as [|u a IH]; intros [|v b]; cbn; try reflexivity. rewrite IH. reflexivity. Qed.

Lemma nth_nv : forall st vs vv r, Forall2 (nv st) vs vv -> (r < length vs)%nat ->
  nth (nth r vs O) (runR st x []) 0 = nth r vv 0 /\ (nth r vs O < length st)%nat.
Proof.
  intros st vs vv r H. revert r. induction H as [|k v vs vv [Hk Hv] H IH]; intros r Hr; [simpl in Hr; lia|].
  destruct r as [|r]; cbn [nth]; [split; assumption|]. apply IH. simpl in Hr. lia.
Qed.

Lemma Forall2_length' : forall {A B} (P : A -> B -> Prop) l1 l2, Forall2 P l1 l2 -> length l1 = length l2.
Proof. intros. induction H; cbn; congruence. Qed.

Lemma Forall2_ev_vplus : forall st (F : expr -> list Q -> expr) (G : list Q -> R) u av (O : mat),
  Forall2 (ev st) u av -> (forall row e v, In row O -> ev st e v -> ev st (F e row) (v + G row)) ->
  Forall2 (ev st) (map (fun p => F (fst p) (snd p)) (combine u O)) (vplus av (map G O)).
Proof.
  intros. unfold vplus. exact (Forall2_ev_combine_map st F G u av O H H0).
Qed.

Section Head.
Variables (hd : head) (Xv : list (list R)).

Definition semscores (tv : list R) : list R :=
  map (fun t' => Q2R (h_scale hd) * dotRR (mvR (h_key hd) t') (mvR (h_query hd) tv)) Xv.
Definition VV : list (list R) := map (mvR (h_value hd)) Xv.

Definition common (keys : list (list expr)) (values : list (list nat)) (st : list node) : Prop :=
  Forall2 (Forall2 (ev st)) keys (map (mvR (h_key hd)) Xv) /\ Forall2 (Forall2 (nv st)) values VV.

Lemma ev2_stable : forall A B, stable (fun st => Forall2 (Forall2 (ev st)) A B).
Proof. intros. apply Forall2_stable; intros; apply Forall2_stable; intros; apply ev_stable. Qed.

Lemma nv2_stable : forall A B, stable (fun st => Forall2 (Forall2 (nv st)) A B).
Proof. intros. apply Forall2_stable; intros; apply Forall2_stable; intros; apply nv_stable. Qed.

Lemma ev1_stable : forall A B, stable (fun st => Forall2 (ev st) A B).
Proof. intros. apply Forall2_stable; intros; apply ev_stable. Qed.

Lemma nv1_stable : forall A B, stable (fun st => Forall2 (nv st) A B).
Proof. intros. apply Forall2_stable; intros; apply nv_stable. Qed.

Lemma common_stable : forall keys values, stable (common keys values).
Proof. intros. apply and_stable; [apply ev2_stable | apply nv2_stable]. Qed.

Lemma spec_scores : forall keys w,
  spec (fun st => Forall2 (Forall2 (ev st)) keys (map (mvR (h_key hd)) Xv))
       (mapM (fun k => lift (node_of (combine_e w k 0))) keys)
       (fun st ms => Forall2 (nv st) ms (map (fun kv => dotR w kv) (map (mvR (h_key hd)) Xv))).
Proof.
  intros keys w. generalize (map (mvR (h_key hd)) Xv) as KV.
  induction keys as [|k keys IH]; intros KV; cbn [mapM].
  - apply spec_ret. intros st H. inversion H. constructor.
  - intros st Hw H. inversion H as [|? kv ? KV' Hk HK]; subst.
    pose proof (spec_node_of (combine_e w k 0) (dotR w kv) st Hw (ev_combine0 st w k kv Hk)) as N.
    unfold bind. cbn in N |- *. destruct (node_of (combine_e w k 0) st) as [st1 m].
    destruct N as [W1 [X1 N1]].
    specialize (IH KV' st1 W1 (ev2_stable _ _ _ _ HK W1 X1)).
    destruct (mapM _ keys st1) as [[st2 ms]|]; [|exact I]. destruct IH as [W2 [X2 R2]].
    split; [exact W2|]. split; [exact (extends_trans _ _ _ X1 X2)|].
    cbn [map]. constructor; [exact (nv_stable _ _ _ _ N1 W2 X2) | exact R2].
Qed.


Lemma values_at : forall st values r, Forall2 (Forall2 (nv st)) values VV -> (r < length (h_value hd))%nat ->
  map (fun vs => nth (nth r vs O) (runR st x []) 0) values = map (fun vv => nth r vv 0) VV /\
  forall vs, In vs values -> (nth r vs O < length st)%nat.
Proof.
  intros st values r H Hr.
  assert (L : Forall (fun vv => (r < length vv)%nat) VV).
  { unfold VV. apply Forall_map. apply Forall_forall. intros t _. unfold mvR. rewrite map_length. exact Hr. }
  clear Hr. induction H as [|vs vv values VV' Hvs H IH].
  - split; [reflexivity | intros _ []].
  - inversion L as [|? ? Lr L']; subst.
    assert (Lr' : (r < length vs)%nat) by (rewrite (Forall2_length' _ _ _ Hvs); exact Lr).
    destruct (nth_nv st vs _ r Hvs Lr') as [N1 N2]. destruct (IH L') as [I1 I2].
    split; [cbn [map]; rewrite N1, I1; reflexivity|].
    intros vs' [<-|Hin]; [exact N2 | exact (I2 vs' Hin)].
Qed.

Definition upd_step (tv : list R) (acc : list R) (r : nat) : list R :=
  vplus acc (map (fun row => Q2R (nth r row 0%Q) * head_sel hd Xv tv r) (h_out hd)).

Lemma spec_head_token : forall keys values xt tv upd uv,
  spec (fun st => common keys values st /\ xt_pre xt tv st /\ Forall2 (ev st) upd uv)
       (head_token hd keys values xt upd)
       (fun st u => Forall2 (ev st) u (head_update hd Xv tv uv)).
Proof.
  intros keys values xt tv upd uv. unfold head_token.
  destruct (all_some (map const_of (exprs_of (h_query hd) xt))) as [qc|] eqn:Eq; [|apply spec_fail].
  set (w := map (fun c => Qred (h_scale hd * c)) qc).
  apply (spec_bind _ _ (fun st scores => Forall2 (nv st) scores (semscores tv) /\
                                         (common keys values st /\ Forall2 (ev st) upd uv))).
  - intros st Hw [[Hk Hv] [Hx Hu]].
    assert (Hq : map Q2R qc = mvR (h_query hd) tv) by exact (const_values st _ qc _ Eq (ev_exprs_of st _ xt tv Hx)).
    pose proof (spec_scores keys w st Hw Hk) as S.
    destruct (mapM _ keys st) as [[st' ms]|]; [|exact I]. destruct S as [W' [X' R']].
    split; [exact W'|]. split; [exact X'|]. split.
    + unfold semscores. rewrite map_map in R'. rewrite <- Hq.
      replace (map (fun t' => Q2R (h_scale hd) * dotRR (mvR (h_key hd) t') (map Q2R qc)) Xv)
        with (map (fun t' => dotR w (mvR (h_key hd) t')) Xv); [exact R'|].
      apply map_ext. intros t'. unfold w. apply dotR_scaled.
    + split; [split|].
      * exact (ev2_stable _ _ _ _ Hk W' X').
      * exact (nv2_stable _ _ _ _ Hv W' X').
      * exact (ev1_stable _ _ _ _ Hu W' X').
  - intros scores.
    set (n := length (h_value hd)).
    set (I := fun st (l : list nat) (u : list expr) =>
                (Forall2 (nv st) scores (semscores tv) /\ common keys values st) /\
                exists done, done ++ l = seq 0 n /\ Forall2 (ev st) u (fold_left (upd_step tv) done uv)).
    apply (spec_weaken (fun st => I st (seq 0 n) upd) _ _ (fun st u => I st [] u)).
    + apply spec_foldM. intros r l u st Hw [[Hs [Hk Hv]] [done [Hd Hu]]].
      assert (Hr : (r < n)%nat).
      { assert (Hin : In r (seq 0 n)) by (rewrite <- Hd; apply in_or_app; right; left; reflexivity).
        apply in_seq in Hin. lia. }
      set (prs := combine scores (map (fun vs => nth r vs O) values)).
      set (Inv := fun st1 => (Forall2 (nv st1) scores (semscores tv) /\ common keys values st1) /\
                             Forall2 (ev st1) u (fold_left (upd_step tv) done uv)).
      assert (SB : spec Inv (bind (lift (add (NSel prs))) (fun m =>
                       ret (map (fun p => axpy (nth r (snd p) 0%Q) (node_e m) (fst p)) (combine u (h_out hd)))))
                       (fun st1 u' => I st1 l u')).
      { apply (spec_bind _ _ (fun st m => nv st m (head_sel hd Xv tv r) /\ Inv st)).
        - eapply spec_weaken; [apply (spec_frame _ _ _ Inv (spec_add (NSel prs) (head_sel hd Xv tv r)))| |].
          + apply and_stable; [apply and_stable; [apply nv1_stable | apply common_stable] | apply ev1_stable].
          + intros st1 HI. split; [|exact HI]. destruct HI as [[Hs1 Hc1] Hu1].
            destruct (nv_list st1 scores _ Hs1) as [Sa1 Sb1].
            destruct (values_at st1 values r (proj2 Hc1) Hr) as [Va1 Vb1]. split.
            * intros j Hj. cbn [reads] in Hj. unfold prs in Hj. apply in_app_or in Hj as [Hj|Hj].
              -- apply in_map_iff in Hj as [[a b] [<- Hab]]. apply Sa1. exact (in_combine_l _ _ _ _ Hab).
              -- apply in_map_iff in Hj as [[a b] [<- Hab]]. apply in_combine_r in Hab.
                 apply in_map_iff in Hab as [vs [<- Hvs]]. exact (Vb1 vs Hvs).
            * cbn [eval_nodeR]. unfold prs. rewrite (map_pair_combine (fun i => nth i (runR st1 x []) 0)), Sb1.
              rewrite map_map. rewrite Va1. unfold head_sel, semscores, VV. rewrite map_map. reflexivity.
          + intros st1 m H. exact H.
        - intros m. apply spec_ret. intros st1 [Hm [[Hs1 Hc1] Hu1]].
          split; [split; assumption|]. exists (done ++ [r]). split; [rewrite <- app_assoc; exact Hd|].
          rewrite fold_left_app. cbn [fold_left]. unfold upd_step at 1.
          apply (Forall2_ev_vplus st1 (fun e row => axpy (nth r row 0%Q) (node_e m) e)
                   (fun row => Q2R (nth r row 0%Q) * head_sel hd Xv tv r)); [exact Hu1|].
          intros row e v _ He. apply ev_axpy; [exact (ev_node_e _ _ _ Hm) | exact He]. }
      exact (SB st Hw (conj (conj Hs (conj Hk Hv)) Hu)).
    + intros st [Hs [Hc Hu]]. split; [split; assumption|]. exists []. split; [reflexivity|]. exact Hu.
    + intros st u [_ [done [Hd Hu]]]. rewrite app_nil_r in Hd. subst done. exact Hu.
Qed.

Lemma spec_values : forall X Xs,
  spec (fun st => Forall2 (Forall2 (ev st)) X Xs)
       (mapM (fun xt => lift (nodes_of (exprs_of (h_value hd) xt))) X)
       (fun st vals => Forall2 (Forall2 (nv st)) vals (map (mvR (h_value hd)) Xs)).
Proof.
  induction X as [|xt X IH]; intros Xs; cbn [mapM].
  - apply spec_ret. intros st H. inversion H. constructor.
  - intros st Hw H. inversion H as [|? tv ? Xs' Ht HX]; subst.
    pose proof (spec_nodes_of _ _ st Hw (ev_exprs_of st (h_value hd) xt tv Ht)) as N.
    unfold bind. cbn in N |- *. destruct (nodes_of (exprs_of (h_value hd) xt) st) as [st1 ks].
    destruct N as [W1 [X1 N1]].
    specialize (IH Xs' st1 W1 (ev2_stable _ _ _ _ HX W1 X1)).
    destruct (mapM _ X st1) as [[st2 vs]|]; [|exact I]. destruct IH as [W2 [X2 R2]].
    split; [exact W2|]. split; [exact (extends_trans _ _ _ X1 X2)|].
    cbn [map]. constructor; [exact (nv1_stable _ _ _ _ N1 W2 X2) | exact R2].
Qed.

Lemma spec_head_tokens : forall keys values X Xs U Us,
  spec (fun st => common keys values st /\ Forall2 (Forall2 (ev st)) X Xs /\ Forall2 (Forall2 (ev st)) U Us)
       (mapM (fun p => head_token hd keys values (fst p) (snd p)) (combine X U))
       (fun st res => Forall2 (Forall2 (ev st)) res
                        (map (fun p => head_update hd Xv (fst p) (snd p)) (combine Xs Us))).
Proof.
  intros keys values X. induction X as [|xt X IH]; intros Xs U Us; cbn [combine mapM].
  - apply spec_ret. intros st [_ [H _]]. inversion H. constructor.
  - destruct U as [|u U].
    + apply spec_ret. intros st [_ [_ H]]. inversion H. destruct Xs; constructor.
    + intros st Hw [Hc [HX HU]]. inversion HX as [|? tv ? Xs' Ht HX']; subst.
      inversion HU as [|? uv ? Us' Hu HU']; subst.
      pose proof (spec_head_token keys values xt tv u uv st Hw (conj Hc (conj Ht Hu))) as T.
      cbn [mapM]. unfold bind. cbn [fst snd]. destruct (head_token hd keys values xt u st) as [[st1 r]|]; [|exact I].
      destruct T as [W1 [X1 T1]].
      specialize (IH Xs' U Us' st1 W1 (conj (common_stable _ _ _ _ Hc W1 X1)
                    (conj (ev2_stable _ _ _ _ HX' W1 X1) (ev2_stable _ _ _ _ HU' W1 X1)))).
      destruct (mapM _ (combine X U) st1) as [[st2 rs]|]; [|exact I]. destruct IH as [W2 [X2 R2]].
      split; [exact W2|]. split; [exact (extends_trans _ _ _ X1 X2)|].
      cbn [combine map fst snd]. constructor; [exact (ev1_stable _ _ _ _ T1 W2 X2) | exact R2].
Qed.

End Head.

Lemma spec_head_all : forall X Xv U Us hd,
  spec (fun st => Forall2 (Forall2 (ev st)) X Xv /\ Forall2 (Forall2 (ev st)) U Us)
       (head_all X U hd)
       (fun st U' => Forall2 (Forall2 (ev st)) U' (map (fun p => head_update hd Xv (fst p) (snd p)) (combine Xv Us))
                     /\ Forall2 (Forall2 (ev st)) X Xv).
Proof.
  intros X Xv U Us hd. unfold head_all.
  apply (spec_bind _ _ (fun st vals => Forall2 (Forall2 (nv st)) vals (VV hd Xv) /\
                                       (Forall2 (Forall2 (ev st)) X Xv /\ Forall2 (Forall2 (ev st)) U Us))).
  - eapply spec_weaken; [apply (spec_frame _ _ _ (fun st => Forall2 (Forall2 (ev st)) X Xv /\ Forall2 (Forall2 (ev st)) U Us) (spec_values hd X Xv))| |].
    + apply and_stable; apply ev2_stable.
    + intros st [H1 H2]. split; [exact H1 | split; assumption].
    + intros st vals H. exact H.
  - intros values.
    assert (Hk : forall st, Forall2 (Forall2 (ev st)) X Xv ->
                 Forall2 (Forall2 (ev st)) (map (exprs_of (h_key hd)) X) (map (mvR (h_key hd)) Xv)).
    { intros st H. induction H; cbn [map]; constructor; [exact (ev_exprs_of st _ _ _ H) | exact IHForall2]. }
    eapply spec_weaken; [apply (spec_frame _ _ _ (fun st => Forall2 (Forall2 (ev st)) X Xv)
                                (spec_head_tokens hd Xv (map (exprs_of (h_key hd)) X) values X Xv U Us))| |].
    + apply ev2_stable.
    + intros st [Hv [HX HU]]. split; [|exact HX]. split; [split; [exact (Hk st HX) | exact Hv]|].
      split; assumption.
    + intros st U' H. exact H.
Qed.

Lemma ev_zero : forall st, ev st zero_e 0.
Proof. intros. split; [cbn; constructor|]. unfold val, evalE, sumsp. cbn. rewrite RMicromega.Q2R_0. lra. Qed.

Lemma combine_map_r : forall {A B C} (f : A -> B -> C) (l : list A) (g : A -> B),
  map (fun p => f (fst p) (snd p)) (combine l (map g l)) = map (fun a => f a (g a)) l.
Proof. intros A B C f l g. induction l as [|a l IH]; cbn; [reflexivity | rewrite IH; reflexivity]. Qed.

Lemma ev_plus_tokens : forall st xt tv u uv, Forall2 (ev st) xt tv -> Forall2 (ev st) u uv ->
  Forall2 (ev st) (map (fun q => axpy 1 (snd q) (fst q)) (combine xt u)) (vplus tv uv).
Proof.
  intros st xt tv u uv H. revert u uv. unfold vplus.
  induction H as [|e v xt tv He H IH]; intros u uv Hu; [constructor|].
  inversion Hu as [|a w u' uv' Ha Hu']; subst; cbn [combine map fst snd]; constructor; [|exact (IH _ _ Hu')].
  destruct (ev_axpy st 1 a e w v Ha He) as [B V]. split; [exact B|]. rewrite V, RMicromega.Q2R_1. lra.
Qed.

Lemma ev_plus_all : forall st (F : list R -> list R) X Xs U, Forall2 (Forall2 (ev st)) X Xs ->
  Forall2 (Forall2 (ev st)) U (map F Xs) ->
  Forall2 (Forall2 (ev st)) (map (fun p => map (fun q => axpy 1 (snd q) (fst q)) (combine (fst p) (snd p)))
                                 (combine X U)) (map (fun t => vplus t (F t)) Xs).
Proof.
  intros st F X Xs U H. revert U. induction H as [|xt tv X Xs Ht H IH]; intros U HU; [constructor|].
  inversion HU as [|u uv U' UV Hu HU']; subst. cbn [combine map fst snd]. constructor; [|exact (IH U' HU')].
  apply ev_plus_tokens; assumption.
Qed.

Lemma spec_att : forall dm hs X Xv,
  spec (fun st => Forall2 (Forall2 (ev st)) X Xv) (att_tokens dm hs X)
       (fun st X' => Forall2 (Forall2 (ev st)) X' (attR dm hs Xv)).
Proof.
  intros dm hs X Xv. unfold att_tokens.
  set (Inv := fun st (l : list head) (U : list (list expr)) =>
              Forall2 (Forall2 (ev st)) X Xv /\ exists done, done ++ l = hs /\
              Forall2 (Forall2 (ev st)) U (map (fun tv => fold_left (fun acc hd => head_update hd Xv tv acc) done (repeat 0 dm)) Xv)).
  apply (spec_bind _ _ (fun st U => Inv st [] U)).
  - apply (spec_weaken (fun st => Inv st hs (map (fun _ => repeat zero_e dm) X)) _ _ (fun st U => Inv st [] U)).
    + apply spec_foldM. intros hd l U st Hw [HX [done [Hd HU]]].
      pose proof (spec_head_all X Xv U _ hd st Hw (conj HX HU)) as A.
      destruct (head_all X U hd st) as [[st1 U1]|]; [|exact I].
      destruct A as [W1 [X1 [A1 A2]]]. split; [exact W1|]. split; [exact X1|].
      split; [exact A2|]. exists (done ++ [hd]). split; [rewrite <- app_assoc; exact Hd|].
      rewrite combine_map_r in A1. replace (map (fun tv => fold_left (fun acc hd0 => head_update hd0 Xv tv acc) (done ++ [hd]) (repeat 0 dm)) Xv)
        with (map (fun a => head_update hd Xv a (fold_left (fun acc hd0 => head_update hd0 Xv a acc) done (repeat 0 dm))) Xv);
        [exact A1|].
      apply map_ext. intros tv. rewrite fold_left_app. reflexivity.
    + intros st HX. split; [exact HX|]. exists []. split; [reflexivity|]. cbn [fold_left].
      clear Inv. induction HX as [|xt tv X Xv Ht HX IH]; cbn [map]; constructor; [|exact IH].
      clear. induction dm as [|dm IH]; cbn [repeat]; constructor; [exact (ev_zero st) | exact IH].
    + intros st U H. exact H.
  - intros U. apply spec_ret. intros st [HX [done [Hd HU]]]. rewrite app_nil_r in Hd. subst done.
    unfold attR. exact (ev_plus_all st _ X Xv U HX HU).
Qed.

Lemma spec_sub : forall dm s X Xv,
  spec (fun st => Forall2 (Forall2 (ev st)) X Xv) (sub_tokens dm s X)
       (fun st X' => Forall2 (Forall2 (ev st)) X' (subR dm s Xv)).
Proof.
  intros dm [W1 b1 W2 b2 | hs] X Xv; cbn [sub_tokens subR]; [|apply spec_att].
  revert Xv. induction X as [|xt X IH]; intros Xv; cbn [mapM].
  - apply spec_ret. intros st H. inversion H. constructor.
  - intros st Hw H. inversion H as [|? tv ? Xv' Ht HX]; subst.
    pose proof (spec_ff_token W1 b1 W2 b2 xt tv st Hw Ht) as F.
    unfold bind. destruct (ff_token W1 b1 W2 b2 xt st) as [[st1 o]|]; [|exact I].
    destruct F as [W1' [X1 F1]].
    specialize (IH Xv' st1 W1' (ev2_stable _ _ _ _ HX W1' X1)).
    destruct (mapM _ X st1) as [[st2 os]|]; [|exact I]. destruct IH as [W2' [X2 R2]].
    split; [exact W2'|]. split; [exact (extends_trans _ _ _ X1 X2)|].
    cbn [map]. constructor; [exact (ev1_stable _ _ _ _ F1 W2' X2) | exact R2].
Qed.

Lemma spec_subs : forall dm subs X Xv,
  spec (fun st => Forall2 (Forall2 (ev st)) X Xv) (foldM (fun X s => sub_tokens dm s X) subs X)
       (fun st X' => Forall2 (Forall2 (ev st)) X' (fold_left (fun X s => subR dm s X) subs Xv)).
Proof.
  intros dm subs. induction subs as [|s subs IH]; intros X Xv; cbn [foldM fold_left].
  - apply spec_ret. intros st H. exact H.
  - apply (spec_bind _ _ (fun st X' => Forall2 (Forall2 (ev st)) X' (subR dm s Xv))); [apply spec_sub|].
    intros X'. apply IH.
Qed.

(* ---- embedding and read-out ---- *)

Lemma ev_var : forall st i, ev st (var_e i) (nth i x 0).
Proof.
  intros st i. split; [cbn; constructor|]. unfold val, var_e, evalE, sumsp. cbn.
  rewrite RMicromega.Q2R_0, RMicromega.Q2R_1. lra.
Qed.

Lemma ev_inputs : forall st, Forall2 (ev st) (map var_e (seq 0 (length x))) x.
Proof.
  intros st. rewrite <- (map_nth_seq_from x []) at 2. cbn [app length].
  generalize (seq 0 (length x)). intros l. induction l as [|i l IH]; cbn [map]; constructor;
    [exact (ev_var st i) | exact IH].
Qed.

Lemma ev_aff : forall st (W : mat) b es vs, Forall2 (ev st) es vs ->
  Forall2 (ev st) (map (fun rc => combine_e (fst rc) es (snd rc)) (combine W b)) (affR W b vs).
Proof.
  intros st W b es vs H. unfold affR. generalize (combine W b). intros l.
  induction l as [|[r c] l IH]; cbn [map]; constructor; [exact (ev_combine st r es vs c H) | exact IH].
Qed.

Lemma Forall2_nth_default : forall {A B} (P : A -> B -> Prop) l1 l2 k d1 d2, Forall2 P l1 l2 -> P d1 d2 ->
  P (nth k l1 d1) (nth k l2 d2).
Proof.
  intros A B P l1 l2 k d1 d2 H Hd. revert k. induction H as [|a b l1 l2 Hab H IH]; intros [|k]; cbn; auto.
Qed.

Lemma ev_readout : forall tf st X Xv, Forall2 (Forall2 (ev st)) X Xv ->
  Forall2 (ev st) (readout_exprs tf X) (readoutR tf Xv).
Proof.
  intros tf st X Xv H. unfold readout_exprs, readoutR. apply ev_aff.
  destruct (tf_token tf) as [k|].
  - apply (Forall2_nth_default _ _ _ k [] [] H). constructor.
  - rewrite (Forall2_length' _ _ _ H). generalize (seq 0 (tf_dm tf)). intros l.
    induction l as [|i l IH]; cbn [map]; constructor; [|exact IH].
    apply ev_combine0. clear IH. induction H as [|t tv X Xv Ht H IH]; cbn [map]; constructor; [|exact IH].
    exact (Forall2_nth_default _ _ _ i zero_e 0 Ht (ev_zero st)).
Qed.

End Correct.

(** The translation is correct: when it succeeds, the program computes the Transformer at every
    real input of the Transformer's dimension. *)
Theorem transformer_program_correct : forall tf p x, transformer_program tf = Some p ->
  length x = tf_dim tf -> outsR p x = transformerR tf x.
Proof.
  intros tf p x Hp Hd. unfold transformer_program in Hp.
  set (X0v := map (fun p => affR (tf_emb tf) p x) (tf_pos tf)).
  assert (H0 : Forall2 (Forall2 (ev x [])) (embed_exprs tf) X0v).
  { unfold embed_exprs, X0v. rewrite <- Hd.
    induction (tf_pos tf) as [|p0 ps IH]; cbn [map]; constructor; [|exact IH].
    apply ev_aff. apply ev_inputs. }
  assert (S' : forall X, spec (fun st => Forall2 (Forall2 (ev x st)) X (fold_left (fun X s => subR (tf_dm tf) s X) (tf_subs tf) X0v))
                           (lift (nodes_of (readout_exprs tf X))) (fun st ks => Forall2 (nv x st) ks (transformerR tf x))).
  { intros X st Hw H. exact (spec_nodes_of x _ _ st Hw (ev_readout x tf st X _ H)). }
  pose proof (spec_bind _ _ _ (fun X => lift (nodes_of (readout_exprs tf X))) _
                (spec_subs x (tf_dm tf) (tf_subs tf) (embed_exprs tf) X0v) S') as S.
  specialize (S [] (fun k Hk j Hj => ltac:(simpl in Hk; lia)) H0).
  destruct (bind _ _ []) as [[st ks]|]; [|discriminate]. inversion Hp; subst p.
  destruct S as [_ [_ S]]. unfold outsR. cbn [p_nodes p_outs].
  destruct (nv_list x st ks _ S) as [_ E]. exact E.
Qed.
