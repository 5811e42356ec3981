(* Pair.v -- pair certificates (exactmax/kernel/pair.py: ``exactmax equiv A B --epsilon E`` and
   ``--top1``): two models up to a tolerance on a polyhedron, as a property of the pair program
   x -> (A(x), B(x)), checked by Property.v's tree checker (relaxed leaves included), and the
   two statements it proves over R:

     pair_eps_sound : |A(x)_o - B(x)_o| <= E for every output o and every real x of the
       polyhedron;
     pair_top1_sound : an output i is maximal in A(x) iff it is maximal in B(x) (the arg max
       sets are equal, ties included), at every real x of the polyhedron;

   and the same for two Maxout networks (maxout_eps_sound, maxout_top1_sound) and for any two
   models, Maxout networks or hardmax Transformers (model_eps_sound, model_top1_sound).

   The pair program: f's nodes, then g's with every node index moved by |f| (a node reads
   earlier nodes only through indices, so g's values are unchanged: runR_pair); outputs f's,
   then g's moved.  The forbidden output conjunctions, over (x, a, b) in Q^(d + 2n), in the
   kernel's order (rows are numbered, so the order matters):
   - epsilon: per o, a_o - b_o - E > 0, then b_o - a_o - E > 0;
   - top-1: for (u, v) = (a, b), then (b, a), per i, per k <> i: u_i - u_j >= 0 for every
     j <> i, then v_k - v_i > 0. *)

From Coq Require Import QArith Qreals Reals Lra Lia List Bool.
From ExactMax Require Import Checker Sound Build Maxout Transformer Export Relaxed Property.
Import ListNotations.
Open Scope Q_scope.

(* ------------------------------------------------------------------ *)
(** * The pair program *)

Definition shift_node (s : nat) (n : node) : node :=
  match n with
  | NLin xs c ts => NLin xs c (map (fun t => (fst t + s, snd t)%nat) ts)
  | NMax args => NMax (map (fun j => j + s)%nat args)
  | NSel prs => NSel (map (fun p => (fst p + s, snd p + s)%nat) prs)
  end.

Definition pair_prog (f g : prog) : prog :=
  let s := length (p_nodes f) in
  {| p_nodes := p_nodes f ++ map (shift_node s) (p_nodes g);
     p_outs := p_outs f ++ map (fun o => o + s)%nat (p_outs g) |}.

(* ------------------------------------------------------------------ *)
(** * The cases *)

(* the row of Q^m with a at i and b at j *)
Definition coef2 (m i : nat) (a : Q) (j : nat) (b : Q) : vec := vadd (basis m i a) (basis m j b).

Definition eps_outs (d n : nat) (E : Q) : list (list con) :=
  let m := (d + n + n)%nat in
  flat_map (fun o => [[row (coef2 m (d + o) 1 (d + n + o) (-1)) (- E) true];
                      [row (coef2 m (d + o) (-1) (d + n + o) 1) (- E) true]]) (seq 0 n).

Definition others (n i : nat) : list nat := filter (fun j => negb (Nat.eqb j i)) (seq 0 n).

(* i maximal in u but some k <> i above it in v: u_i - u_j >= 0 (j <> i), v_k - v_i > 0 *)
Definition top1_conj (m n u v i k : nat) : list con :=
  map (fun j => row (coef2 m (u + i) 1 (u + j) (-1)) 0 false) (others n i) ++
  [row (coef2 m (v + k) 1 (v + i) (-1)) 0 true].

Definition top1_block (m n u v : nat) : list (list con) :=
  flat_map (fun i => map (top1_conj m n u v i) (others n i)) (seq 0 n).

Definition top1_outs (d n : nat) : list (list con) :=
  flat_map (fun uv => top1_block (d + n + n) n (fst uv) (snd uv)) [(d, d + n); (d + n, d)]%nat.

(* the case of a pair on the polyhedron A x <= b: epsilon E (Some E) or top-1 (None) *)
Definition pair_case (d n : nat) (A : list (list Q)) (b : list Q) (E : option Q) : pcase :=
  {| pc_A := A; pc_b := b;
     pc_outs := match E with Some e => eps_outs d n e | None => top1_outs d n end |}.

(** The check: both programs have n outputs, f's outputs are nodes of f, and the tree proves
    the case for the pair program. *)
Definition pair_ok (f g : prog) (d n : nat) (A : list (list Q)) (b : list Q) (E : option Q)
                   (t : ptree) : bool :=
  Nat.eqb (length (p_outs f)) n && Nat.eqb (length (p_outs g)) n &&
  forallb (fun o => Nat.ltb o (length (p_nodes f))) (p_outs f) &&
  case_ok (pair_prog f g) d (pair_case d n A b E) t.

(* ------------------------------------------------------------------ *)
(** * Soundness *)

Local Open Scope R_scope.

Lemma eval_shift : forall s n x envF envG, length envF = s ->
  eval_nodeR (shift_node s n) x (envF ++ envG) = eval_nodeR n x envG.
Proof.
  intros s n x envF envG Hs.
  assert (Hn : forall j, nth (j + s) (envF ++ envG) 0 = nth j envG 0).
  { intros j. rewrite app_nth2 by lia. f_equal. lia. }
  destruct n as [xs c ts | args | prs]; cbn [shift_node eval_nodeR].
  - f_equal. induction ts as [|[j a] ts IH]; [reflexivity|].
    unfold sumsp in *. cbn [map fold_right fst snd] in *. rewrite Hn, IH. reflexivity.
  - f_equal. rewrite map_map. apply map_ext. intros j. apply Hn.
  - f_equal. rewrite map_map. apply map_ext. intros [i j]. cbn [fst snd]. rewrite !Hn.
    reflexivity.
Qed.

Lemma runR_shift : forall s ns x envF envG, length envF = s ->
  runR (map (shift_node s) ns) x (envF ++ envG) = envF ++ runR ns x envG.
Proof.
  intros s ns. induction ns as [|n ns IH]; intros x envF envG Hs; cbn [map runR]; [reflexivity|].
  rewrite eval_shift by exact Hs. rewrite <- app_assoc. apply IH. exact Hs.
Qed.

Lemma runR_concat : forall l1 l2 x env, runR (l1 ++ l2) x env = runR l2 x (runR l1 x env).
Proof. induction l1 as [|n l1 IH]; intros l2 x env; cbn [app runR]; [reflexivity|]. apply IH. Qed.

Lemma length_runR : forall ns x, length (runR ns x []) = length ns.
Proof.
  intros ns x. destruct (runR_app ns x []) as [rest [E L]]. rewrite E. exact L.
Qed.

Lemma runR_pair : forall f g x,
  runR (p_nodes (pair_prog f g)) x [] = runR (p_nodes f) x [] ++ runR (p_nodes g) x [].
Proof.
  intros f g x. cbn [pair_prog p_nodes]. rewrite runR_concat.
  rewrite <- (app_nil_r (runR (p_nodes f) x [])) at 1.
  apply runR_shift. apply length_runR.
Qed.

Lemma outsR_pair : forall f g x,
  forallb (fun o => Nat.ltb o (length (p_nodes f))) (p_outs f) = true ->
  outsR (pair_prog f g) x = outsR f x ++ outsR g x.
Proof.
  intros f g x Ho. unfold outsR. rewrite runR_pair. cbn [pair_prog p_outs].
  rewrite map_app, map_map. f_equal.
  - apply map_ext_in. intros o Hin. rewrite forallb_forall in Ho.
    apply app_nth1. rewrite length_runR. apply Nat.ltb_lt. exact (Ho o Hin).
  - apply map_ext. intros o. rewrite app_nth2 by (rewrite length_runR; lia).
    rewrite length_runR. f_equal. lia.
Qed.

Lemma length_outsR : forall p x, length (outsR p x) = length (p_outs p).
Proof. intros. unfold outsR. apply map_length. Qed.

(* the value of a coef2 row *)
Lemma eval_coef2 : forall m i a j b c w, (i < m)%nat -> (j < m)%nat ->
  evalR (coef2 m i a j b, c) w = Q2R a * nth i w 0 + Q2R b * nth j w 0 + Q2R c.
Proof.
  intros m i a j b c w Hi Hj. unfold evalR, coef2. cbn [fst snd].
  rewrite dotR_vadd, !dotR_basis by assumption. reflexivity.
Qed.

Lemma Q2R_1 : Q2R 1 = 1.
Proof. unfold Q2R. simpl. field. Qed.

Lemma Q2R_0 : Q2R 0 = 0.
Proof. unfold Q2R. simpl. field. Qed.

(* the point (x, a, b) *)
Lemma nth_xab : forall (x a b : list R) d n o, length x = d -> length a = n -> (o < n)%nat ->
  nth (d + o) (x ++ a ++ b) 0 = nth o a 0 /\ nth (d + n + o) (x ++ a ++ b) 0 = nth o b 0.
Proof.
  intros x a b d n o Hx Ha Ho. split.
  - rewrite app_nth2 by lia. rewrite app_nth1 by lia. f_equal. lia.
  - rewrite app_nth2 by lia. rewrite app_nth2 by lia. f_equal. lia.
Qed.

(* what the tree gives: no forbidden conjunction holds at (x, A(x), B(x)) *)
Lemma pair_excluded : forall f g d n A b E t x, pair_ok f g d n A b E t = true ->
  length x = d -> in_poly A b x ->
  forall O, In O (pc_outs (pair_case d n A b E)) -> ~ satR O (x ++ outsR f x ++ outsR g x).
Proof.
  intros f g d n A b E t x H Hd Hx O HO. unfold pair_ok in H.
  apply andb_true_iff in H as [H Ht]. apply andb_true_iff in H as [H Ho].
  rewrite <- (outsR_pair f g x Ho). unfold case_ok in Ht.
  exact (check_ptree_sound _ _ _ _ t _ [] [] x Ht (poly_rows_sound _ _ x Hx) Hd
           (knownR_nil _ _) O HO).
Qed.

Lemma pair_lengths : forall f g d n A b E t x, pair_ok f g d n A b E t = true ->
  length (outsR f x) = n /\ length (outsR g x) = n.
Proof.
  intros f g d n A b E t x H. unfold pair_ok in H.
  apply andb_true_iff in H as [H _]. apply andb_true_iff in H as [H _].
  apply andb_true_iff in H as [Hf Hg]. apply Nat.eqb_eq in Hf, Hg.
  rewrite !length_outsR. auto.
Qed.

Theorem pair_eps_sound : forall f g d n A b E t, pair_ok f g d n A b (Some E) t = true ->
  forall x, length x = d -> in_poly A b x ->
  forall o, (o < n)%nat -> Rabs (nth o (outsR f x) 0 - nth o (outsR g x) 0) <= Q2R E.
Proof.
  intros f g d n A b E t H x Hd Hx o Ho.
  destruct (pair_lengths f g d n A b (Some E) t x H) as [La Lb].
  destruct (nth_xab x (outsR f x) (outsR g x) d n o Hd La Ho) as [Na Nb].
  pose proof (pair_excluded f g d n A b (Some E) t x H Hd Hx) as Ex.
  set (w := x ++ outsR f x ++ outsR g x) in *.
  assert (Hin : forall s1 s2, In [row (coef2 (d + n + n) (d + o) s1 (d + n + o) s2) (- E) true]
                                   [[row (coef2 (d + n + n) (d + o) 1 (d + n + o) (-1)) (- E) true];
                                    [row (coef2 (d + n + n) (d + o) (-1) (d + n + o) 1) (- E) true]] ->
                In [row (coef2 (d + n + n) (d + o) s1 (d + n + o) s2) (- E) true]
                   (pc_outs (pair_case d n A b (Some E)))).
  { intros s1 s2 Hs. cbn [pair_case pc_outs]. unfold eps_outs. apply in_flat_map.
    exists o. split; [apply in_seq; lia | exact Hs]. }
  assert (Hrow : forall s1 s2,
    In [row (coef2 (d + n + n) (d + o) s1 (d + n + o) s2) (- E) true]
       [[row (coef2 (d + n + n) (d + o) 1 (d + n + o) (-1)) (- E) true];
        [row (coef2 (d + n + n) (d + o) (-1) (d + n + o) 1) (- E) true]] ->
    ~ (0 < Q2R s1 * nth o (outsR f x) 0 + Q2R s2 * nth o (outsR g x) 0 - Q2R E)).
  { intros s1 s2 Hs Hlt. apply (Ex _ (Hin s1 s2 Hs)). constructor; [|constructor].
    unfold sat_conR, row. cbn [fst snd]. rewrite eval_coef2 by lia.
    rewrite Na, Nb, Q2R_opp. lra. }
  pose proof (Hrow 1%Q (-1)%Q (or_introl eq_refl)) as H1.
  pose proof (Hrow (-1)%Q 1%Q (or_intror (or_introl eq_refl))) as H2.
  rewrite Q2R_1, Q2R_m1 in H1. rewrite Q2R_m1, Q2R_1 in H2. unfold Rabs. destruct (Rcase_abs _); lra.
Qed.

Lemma In_others : forall n i j, (j < n)%nat -> j <> i -> In j (others n i).
Proof.
  intros n i j Hj Hji. unfold others. apply filter_In. split; [apply in_seq; lia|].
  apply Bool.negb_true_iff. apply Nat.eqb_neq. exact Hji.
Qed.

Lemma others_spec : forall n i j, In j (others n i) -> (j < n)%nat /\ j <> i.
Proof.
  intros n i j H. unfold others in H. apply filter_In in H as [H1 H2].
  apply in_seq in H1. apply Bool.negb_true_iff, Nat.eqb_neq in H2. split; [lia | exact H2].
Qed.

(* one direction of top-1: i maximal in u and some k above i in v is a forbidden conjunction *)
Lemma top1_dir : forall (w : list R) m n u v (ya yb : list R),
  (forall O, In O (top1_block m n u v) -> ~ satR O w) ->
  (forall j, (j < n)%nat -> nth (u + j) w 0 = nth j ya 0) ->
  (forall j, (j < n)%nat -> nth (v + j) w 0 = nth j yb 0) ->
  (u + n <= m)%nat -> (v + n <= m)%nat ->
  forall i, (i < n)%nat -> (forall j, (j < n)%nat -> nth j ya 0 <= nth i ya 0) ->
  forall j, (j < n)%nat -> nth j yb 0 <= nth i yb 0.
Proof.
  intros w m n u v ya yb Ex Hu Hv Hum Hvm i Hi Ha k Hk.
  destruct (Rle_dec (nth k yb 0) (nth i yb 0)) as [Hle|Hgt]; [exact Hle|exfalso].
  assert (Hki : k <> i) by (intros ->; lra).
  apply (Ex (top1_conj m n u v i k)).
  - unfold top1_block. apply in_flat_map. exists i. split; [apply in_seq; lia|].
    apply in_map. apply In_others; assumption.
  - unfold top1_conj, satR. apply Forall_app. split.
    + apply Forall_map. apply Forall_forall. intros j Hj. destruct (others_spec n i j Hj) as [Hjn _].
      unfold sat_conR, row. cbn [fst snd]. rewrite eval_coef2 by lia.
      rewrite Hu, Hu, Q2R_1, Q2R_m1, Q2R_0 by assumption. specialize (Ha j Hjn). lra.
    + constructor; [|constructor]. unfold sat_conR, row. cbn [fst snd].
      rewrite eval_coef2 by lia. rewrite Hv, Hv, Q2R_1, Q2R_m1, Q2R_0 by assumption.
      lra.
Qed.

Theorem pair_top1_sound : forall f g d n A b t, pair_ok f g d n A b None t = true ->
  forall x, length x = d -> in_poly A b x ->
  forall i, (i < n)%nat ->
  ((forall j, (j < n)%nat -> nth j (outsR f x) 0 <= nth i (outsR f x) 0) <->
   (forall j, (j < n)%nat -> nth j (outsR g x) 0 <= nth i (outsR g x) 0)).
Proof.
  intros f g d n A b t H x Hd Hx i Hi.
  destruct (pair_lengths f g d n A b None t x H) as [La Lb].
  pose proof (pair_excluded f g d n A b None t x H Hd Hx) as Ex.
  cbn [pair_case pc_outs] in Ex. unfold top1_outs in Ex.
  set (w := x ++ outsR f x ++ outsR g x) in *.
  assert (Na : forall j, (j < n)%nat -> nth (d + j) w 0 = nth j (outsR f x) 0)
    by (intros j Hj; exact (proj1 (nth_xab x _ _ d n j Hd La Hj))).
  assert (Nb : forall j, (j < n)%nat -> nth (d + n + j) w 0 = nth j (outsR g x) 0)
    by (intros j Hj; exact (proj2 (nth_xab x _ _ d n j Hd La Hj))).
  split.
  - apply (top1_dir w (d + n + n) n d (d + n) _ _); [| exact Na | exact Nb | lia | lia | exact Hi].
    intros O HO. apply Ex. apply in_flat_map. exists (d, d + n)%nat. split; [left; reflexivity|].
    exact HO.
  - apply (top1_dir w (d + n + n) n (d + n) d _ _); [| exact Nb | exact Na | lia | lia | exact Hi].
    intros O HO. apply Ex. apply in_flat_map. exists (d + n, d)%nat.
    split; [right; left; reflexivity|]. exact HO.
Qed.

(* ------------------------------------------------------------------ *)
(** * Any two models (Export.model: a Maxout network or a hardmax Transformer) *)

Definition model_pair_ok (ma mb : model) (n : nat) (A : list (list Q)) (b : list Q)
                         (E : option Q) (t : ptree) : bool :=
  Nat.eqb (model_dim ma) (model_dim mb) &&
  match model_program ma, model_program mb with
  | Some f, Some g => pair_ok f g (model_dim ma) n A b E t
  | _, _ => false
  end.

(* the programs the check ran, and what they compute *)
Lemma model_pair_programs : forall ma mb n A b E t, model_pair_ok ma mb n A b E t = true ->
  exists f g, pair_ok f g (model_dim ma) n A b E t = true /\
  forall x, length x = model_dim ma -> outsR f x = modelR ma x /\ outsR g x = modelR mb x.
Proof.
  intros ma mb n A b E t H. unfold model_pair_ok in H.
  apply andb_true_iff in H as [Hdim H]. apply Nat.eqb_eq in Hdim.
  destruct (model_program ma) as [f|] eqn:Ef; [|discriminate].
  destruct (model_program mb) as [g|] eqn:Eg; [|discriminate].
  exists f, g. split; [exact H|]. intros x Hd.
  split; [exact (model_program_correct ma f x Ef Hd) | apply (model_program_correct mb g x Eg); lia].
Qed.

Theorem model_eps_sound : forall ma mb n A b E t, model_pair_ok ma mb n A b (Some E) t = true ->
  forall x, length x = model_dim ma -> in_poly A b x ->
  forall o, (o < n)%nat -> Rabs (nth o (modelR ma x) 0 - nth o (modelR mb x) 0) <= Q2R E.
Proof.
  intros ma mb n A b E t H x Hd Hx o Ho.
  destruct (model_pair_programs _ _ _ _ _ _ _ H) as [f [g [P M]]]. destruct (M x Hd) as [<- <-].
  exact (pair_eps_sound _ _ _ _ _ _ _ _ P x Hd Hx o Ho).
Qed.

Theorem model_top1_sound : forall ma mb n A b t, model_pair_ok ma mb n A b None t = true ->
  forall x, length x = model_dim ma -> in_poly A b x ->
  forall i, (i < n)%nat ->
  ((forall j, (j < n)%nat -> nth j (modelR ma x) 0 <= nth i (modelR ma x) 0) <->
   (forall j, (j < n)%nat -> nth j (modelR mb x) 0 <= nth i (modelR mb x) 0)).
Proof.
  intros ma mb n A b t H x Hd Hx i Hi.
  destruct (model_pair_programs _ _ _ _ _ _ _ H) as [f [g [P M]]]. destruct (M x Hd) as [<- <-].
  exact (pair_top1_sound _ _ _ _ _ _ _ P x Hd Hx i Hi).
Qed.

(* ------------------------------------------------------------------ *)
(** * Two Maxout networks: the models MMaxout na, MMaxout nb *)

Definition maxout_pair_ok (na nb : maxout) (n : nat) (A : list (list Q)) (b : list Q)
                          (E : option Q) (t : ptree) : bool :=
  Nat.eqb (mo_dim na) (mo_dim nb) &&
  pair_ok (program_of_maxout na) (program_of_maxout nb) (mo_dim na) n A b E t.

Theorem maxout_eps_sound : forall na nb n A b E t, maxout_pair_ok na nb n A b (Some E) t = true ->
  forall x, length x = mo_dim na -> in_poly A b x ->
  forall o, (o < n)%nat -> Rabs (nth o (maxoutR na x) 0 - nth o (maxoutR nb x) 0) <= Q2R E.
Proof. intros na nb. exact (model_eps_sound (MMaxout na) (MMaxout nb)). Qed.

Theorem maxout_top1_sound : forall na nb n A b t, maxout_pair_ok na nb n A b None t = true ->
  forall x, length x = mo_dim na -> in_poly A b x ->
  forall i, (i < n)%nat ->
  ((forall j, (j < n)%nat -> nth j (maxoutR na x) 0 <= nth i (maxoutR na x) 0) <->
   (forall j, (j < n)%nat -> nth j (maxoutR nb x) 0 <= nth i (maxoutR nb x) 0)).
Proof. intros na nb. exact (model_top1_sound (MMaxout na) (MMaxout nb)). Qed.

(* ------------------------------------------------------------------ *)
(** * A box with fixed inputs (kernel.maxout.on_free_inputs)

   On a box where lo_i = hi_i the input x_i is fixed: the kernel's tree is over the free
   inputs only, for the networks whose first-layer pieces w . x + b read the free
   coordinates, with b + sum_(i fixed) w_i lo_i as constant.  The domain of that tree is the
   box of the free coordinates, as the kernel writes a box's rows: x_i <= hi_i for each i,
   then -x_i <= -lo_i. *)

Local Open Scope Q_scope.

(* (the coefficients of the free coordinates, the fixed ones' contribution sum w_i lo_i) *)
Fixpoint split_w (w lo hi : list Q) : list Q * Q :=
  match w, lo, hi with
  | a :: w', l :: lo', h :: hi' =>
      let '(fw, c) := split_w w' lo' hi' in
      if qeqb l h then (fw, a * l + c) else (a :: fw, c)
  | _, _, _ => ([], 0)
  end.

(* the entries of v at the free coordinates *)
Fixpoint free_of {X} (v : list X) (lo hi : list Q) : list X :=
  match v, lo, hi with
  | a :: v', l :: lo', h :: hi' => if qeqb l h then free_of v' lo' hi' else a :: free_of v' lo' hi'
  | _, _, _ => []
  end.

Definition fix_piece (lo hi : list Q) (p : piece) : piece :=
  let '(fw, c) := split_w (pw p) lo hi in {| pw := fw; pb := pb p + c |}.

Definition free_net (net : maxout) (lo hi : list Q) : maxout :=
  match mo_layers net with
  | [] => net
  | L :: Ls => {| mo_dim := length (free_of lo lo hi);
                  mo_layers := map (map (fix_piece lo hi)) L :: Ls;
                  mo_out := mo_out net |}
  end.

(* the kernel's rows of a box: x_i <= hi_i, then -x_i <= -lo_i *)
Definition box_A (lo : list Q) : list (list Q) :=
  let d := length lo in
  map (fun i => basis d i 1) (seq 0 d) ++ map (fun i => basis d i (-1)) (seq 0 d).

Definition box_b (lo hi : list Q) : list Q := hi ++ map Qopp lo.

Definition free_pair_ok (na nb : maxout) (n : nat) (lo hi : list Q) (E : option Q)
                        (t : ptree) : bool :=
  let flo := free_of lo lo hi in
  let fhi := free_of hi lo hi in
  Nat.eqb (mo_dim na) (mo_dim nb) && Nat.eqb (length lo) (mo_dim na) &&
  Nat.eqb (length hi) (mo_dim na) &&
  negb (Nat.eqb (length (mo_layers na)) 0) && negb (Nat.eqb (length (mo_layers nb)) 0) &&
  maxout_pair_ok (free_net na lo hi) (free_net nb lo hi) n (box_A flo) (box_b flo fhi) E t.

Local Open Scope R_scope.

Lemma split_w_dotR : forall w lo hi x, in_box lo hi x ->
  dotR (fst (split_w w lo hi)) (free_of x lo hi) + Q2R (snd (split_w w lo hi)) = dotR w x.
Proof.
  induction w as [|a w IH]; intros lo hi x H.
  - destruct lo, hi, x; cbn; rewrite ?RMicromega.Q2R_0; lra.
  - destruct lo as [|l lo], hi as [|h hi], x as [|v x]; cbn [in_box] in H; try contradiction;
      cbn [split_w free_of dotR].
    + cbn. rewrite RMicromega.Q2R_0. lra.
    + destruct H as [[Hl Hh] H]. specialize (IH lo hi x H).
      destruct (split_w w lo hi) as [fw c] eqn:E. cbn [fst snd] in *.
      destruct (qeqb l h) eqn:Q.
      * apply qeqb_R in Q. assert (v = Q2R l) by lra. subst v.
        cbn [fst snd]. rewrite Q2R_plus, Q2R_mult. lra.
      * cbn [fst snd dotR]. lra.
Qed.

Lemma free_net_correct : forall net lo hi x, mo_layers net <> [] -> in_box lo hi x ->
  maxoutR (free_net net lo hi) (free_of x lo hi) = maxoutR net x.
Proof.
  intros net lo hi x HL H. unfold free_net.
  destruct (mo_layers net) as [|L Ls] eqn:EL; [contradiction|].
  unfold maxoutR. cbn [mo_layers mo_out layersR]. rewrite EL. cbn [layersR].
  replace (layerR (map (map (fix_piece lo hi)) L) (free_of x lo hi)) with (layerR L x);
    [reflexivity|].
  unfold layerR. rewrite map_map. apply map_ext. intros u. rewrite map_map. f_equal.
  apply map_ext. intros p. unfold fix_piece, pieceR.
  pose proof (split_w_dotR (pw p) lo hi x H) as S.
  destruct (split_w (pw p) lo hi) as [fw c]. cbn [fst snd pw pb] in *.
  rewrite Q2R_plus. lra.
Qed.

Lemma free_in_box : forall lo hi x, in_box lo hi x ->
  in_box (free_of lo lo hi) (free_of hi lo hi) (free_of x lo hi) /\
  length (free_of x lo hi) = length (free_of lo lo hi).
Proof.
  induction lo as [|l lo IH]; intros [|h hi] [|v x] H; cbn [in_box] in H; try contradiction;
    cbn [free_of]; [split; reflexivity|].
  destruct H as [Hv H]. destruct (IH hi x H) as [I L].
  destruct (qeqb l h); [split; assumption|]. cbn [in_box length]. split; [split|]; auto.
Qed.

Lemma in_poly_app : forall A1 b1 A2 b2 x, length A1 = length b1 ->
  in_poly A1 b1 x -> in_poly A2 b2 x -> in_poly (A1 ++ A2) (b1 ++ b2) x.
Proof.
  induction A1 as [|a A1 IH]; intros [|c b1] A2 b2 x L H1 H2; cbn in L; try discriminate;
    [exact H2|]. destruct H1 as [H H1]. split; [exact H | apply IH; auto].
Qed.

Lemma in_poly_rows : forall d (f : nat -> list Q) (g : nat -> Q) x,
  (forall i, (i < d)%nat -> dotR (f i) x <= Q2R (g i)) ->
  forall k m, (k + m <= d)%nat -> in_poly (map f (seq k m)) (map g (seq k m)) x.
Proof.
  intros d f g x H k m. revert k. induction m as [|m IH]; intros k Hk; cbn; [exact I|].
  split; [apply H; lia | apply IH; lia].
Qed.

Lemma box_poly_sound : forall lo hi y, in_box lo hi y -> in_poly (box_A lo) (box_b lo hi) y.
Proof.
  intros lo hi y H. destruct (in_box_nth lo hi y H) as [L Hn].
  assert (Lh : length hi = length lo).
  { clear Hn L. revert hi y H. induction lo as [|l lo IH]; intros [|h hi] [|v y] H;
      cbn [in_box] in H; try contradiction; cbn; [reflexivity|]. f_equal. exact (IH hi y (proj2 H)). }
  unfold box_A, box_b. apply in_poly_app.
  - rewrite map_length, seq_length. lia.
  - replace hi with (map (fun i => nth i hi 0%Q) (seq 0 (length lo))).
    + apply (in_poly_rows (length lo)); [|lia]. intros i Hi. rewrite dotR_basis by lia.
      specialize (Hn i ltac:(lia)). unfold Q2R at 1; simpl. lra.
    + rewrite <- Lh. clear. induction hi as [|h hi IH]; [reflexivity|]. cbn [length seq map nth].
      f_equal. rewrite <- seq_shift, map_map. exact IH.
  - replace (map Qopp lo) with (map (fun i => Qopp (nth i lo 0%Q)) (seq 0 (length lo))).
    + apply (in_poly_rows (length lo)); [|lia]. intros i Hi. rewrite dotR_basis by lia.
      specialize (Hn i ltac:(lia)). rewrite Q2R_opp, Q2R_m1. lra.
    + clear. induction lo as [|l lo IH]; [reflexivity|]. cbn [length seq map nth].
      f_equal. rewrite <- seq_shift, map_map. exact IH.
Qed.

Lemma free_pair_facts : forall na nb n lo hi E t x, free_pair_ok na nb n lo hi E t = true ->
  in_box lo hi x ->
  maxout_pair_ok (free_net na lo hi) (free_net nb lo hi) n
    (box_A (free_of lo lo hi)) (box_b (free_of lo lo hi) (free_of hi lo hi)) E t = true /\
  length (free_of x lo hi) = mo_dim (free_net na lo hi) /\
  in_poly (box_A (free_of lo lo hi)) (box_b (free_of lo lo hi) (free_of hi lo hi))
    (free_of x lo hi) /\
  maxoutR (free_net na lo hi) (free_of x lo hi) = maxoutR na x /\
  maxoutR (free_net nb lo hi) (free_of x lo hi) = maxoutR nb x.
Proof.
  intros na nb n lo hi E t x H Hx. unfold free_pair_ok in H.
  repeat match type of H with (_ && _) = true => apply andb_true_iff in H as [H ?] end.
  rename H into Hd. match goal with Hp : maxout_pair_ok _ _ _ _ _ _ _ = true |- _ => rename Hp into P end.
  assert (La : mo_layers na <> []).
  { intros E0. match goal with Hn : negb (Nat.eqb (length (mo_layers na)) 0) = true |- _ =>
      rewrite E0 in Hn; discriminate Hn end. }
  assert (Lb : mo_layers nb <> []).
  { intros E0. match goal with Hn : negb (Nat.eqb (length (mo_layers nb)) 0) = true |- _ =>
      rewrite E0 in Hn; discriminate Hn end. }
  destruct (free_in_box lo hi x Hx) as [I L].
  split; [exact P|]. split.
  - rewrite L. unfold free_net. destruct (mo_layers na); [contradiction|reflexivity].
  - split; [exact (box_poly_sound _ _ _ I)|].
    split; apply free_net_correct; assumption.
Qed.

Theorem free_eps_sound : forall na nb n lo hi E t, free_pair_ok na nb n lo hi (Some E) t = true ->
  forall x, in_box lo hi x ->
  forall o, (o < n)%nat -> Rabs (nth o (maxoutR na x) 0 - nth o (maxoutR nb x) 0) <= Q2R E.
Proof.
  intros na nb n lo hi E t H x Hx o Ho.
  destruct (free_pair_facts na nb n lo hi (Some E) t x H Hx) as [P [L [I [Ea Eb]]]].
  rewrite <- Ea, <- Eb. exact (maxout_eps_sound _ _ _ _ _ _ _ P _ L I o Ho).
Qed.

Theorem free_top1_sound : forall na nb n lo hi t, free_pair_ok na nb n lo hi None t = true ->
  forall x, in_box lo hi x ->
  forall i, (i < n)%nat ->
  ((forall j, (j < n)%nat -> nth j (maxoutR na x) 0 <= nth i (maxoutR na x) 0) <->
   (forall j, (j < n)%nat -> nth j (maxoutR nb x) 0 <= nth i (maxoutR nb x) 0)).
Proof.
  intros na nb n lo hi t H x Hx i Hi.
  destruct (free_pair_facts na nb n lo hi None t x H Hx) as [P [L [I [Ea Eb]]]].
  rewrite <- Ea, <- Eb. exact (maxout_top1_sound _ _ _ _ _ _ P _ L I i Hi).
Qed.
