(* ConstructionSound.v -- Theorems 3.1 and 3.2, proved once for every Maxout network: the
   Transformer construct net C of Construction.v computes the network exactly wherever the
   gate constants bound the pre-activations.

     construct_layer  (Theorem 3.1): the three sub-layers of a layer map encode(h) to
                      encode(Phi(h)), for every token;
     construct_correct (Theorem 3.2): shaped net = true -> length x = mo_dim net ->
                      gates_hold (mo_layers net) C x ->
                      transformerR (construct net C) x = maxoutR net x.

   encode(h) is the list of the k tokens (h padded, 0, 0, e_t).  Then the gate condition
   decided by computation gives gates_hold: construct_sound (gates_ok, boxes over Q),
   construct_zsound (zgates_ok, the boxes and the pieces in integers: what exported files
   use), construct_poly_sound and construct_poly_zsound for a polyhedron.  Only the standard
   axioms of Coq's Reals are used. *)

From Coq Require Import QArith Qreals Reals Lra Lia List Bool.
From ExactMax Require Import Checker Sound Build Maxout Transformer Layerwise Construction.
Import ListNotations.

Local Open Scope R_scope.

(* ------------------------------------------------------------------ *)
(** * Lists, sums, dot products *)

Lemma combine_map_same : forall {A B C} (f : A -> B) (g : A -> C) l,
  combine (map f l) (map g l) = map (fun a => (f a, g a)) l.
Proof. intros A B C f g l. induction l as [|a l IH]; cbn; [reflexivity | rewrite IH; reflexivity]. Qed.

Lemma vplus_map : forall {A} (f g : A -> R) l, vplus (map f l) (map g l) = map (fun a => f a + g a) l.
Proof. intros A f g l. unfold vplus. rewrite combine_map_same, map_map. reflexivity. Qed.

Lemma map_nth_seq_Q : forall (l : list Q) d, map (fun r => nth r l d) (seq 0 (length l)) = l.
Proof.
  intros l d. induction l as [|a l IH]; [reflexivity|]. cbn [length seq map nth]. f_equal.
  rewrite <- seq_shift, map_map. exact IH.
Qed.

Lemma map_shift : forall {A} (F : nat -> A) s n, map (fun i => F (s + i)%nat) (seq 0 n) = map F (seq s n).
Proof.
  intros A F s n. revert s. induction n as [|n IH]; intros s; [reflexivity|].
  cbn [seq map]. rewrite Nat.add_0_r. f_equal. rewrite <- seq_shift, map_map.
  rewrite <- (IH (S s)). apply map_ext. intros i. f_equal. lia.
Qed.

Lemma nth_map_seq : forall {A} (f : nat -> A) n r d, (r < n)%nat -> nth r (map f (seq 0 n)) d = f r.
Proof.
  intros A f n r d H. rewrite nth_indep with (d' := f 0%nat) by (rewrite map_length, seq_length; exact H).
  rewrite map_nth, seq_nth by exact H. reflexivity.
Qed.

Lemma repeat_map_seq : forall {A} (a : A) n, repeat a n = map (fun _ => a) (seq 0 n).
Proof.
  intros A a n. induction n as [|n IH]; [reflexivity|]. cbn [repeat seq map]. f_equal.
  rewrite IH, <- seq_shift, map_map. reflexivity.
Qed.

Lemma sumR_app : forall l1 l2, sumR (l1 ++ l2) = sumR l1 + sumR l2.
Proof. induction l1 as [|a l1 IH]; intros l2; cbn [app sumR]; [lra | rewrite IH; lra]. Qed.

Lemma sumR_concat_map : forall {A B} (f : B -> R) (g : A -> list B) l,
  sumR (map f (concat (map g l))) = sumR (map (fun a => sumR (map f (g a))) l).
Proof.
  intros A B f g l. induction l as [|a l IH]; [reflexivity|].
  cbn [map concat sumR]. rewrite map_app, sumR_app, IH. reflexivity.
Qed.

Lemma sumR_zero : forall {A} (l : list A), sumR (map (fun _ => 0) l) = 0.
Proof. intros A l. induction l as [|a l IH]; cbn [map sumR]; lra. Qed.

Lemma sumR_ext : forall {A} (f g : A -> R) l, (forall a, In a l -> f a = g a) ->
  sumR (map f l) = sumR (map g l).
Proof. intros A f g l H. f_equal. apply map_ext_in. exact H. Qed.

Lemma sumR_plus : forall {A} (f g : A -> R) l, sumR (map (fun a => f a + g a) l) = sumR (map f l) + sumR (map g l).
Proof. intros A f g l. induction l as [|a l IH]; cbn [map sumR]; [lra | rewrite IH; lra]. Qed.

(* a sum over s .. s+n-1 of a term that is 0 except at r *)
Lemma sum_at : forall (f : nat -> R) r n s,
  sumR (map (fun i => if Nat.eqb i r then f i else 0) (seq s n)) =
  if (s <=? r)%nat && (r <? s + n)%nat then f r else 0.
Proof.
  intros f r n. induction n as [|n IH]; intros s.
  - cbn [seq map sumR]. destruct (s <=? r)%nat eqn:E1, (r <? s + 0)%nat eqn:E2; cbn [andb]; try lra.
    exfalso. apply Nat.ltb_lt in E2. apply Nat.leb_le in E1. lia.
  - cbn [seq map sumR]. rewrite IH.
    destruct (Nat.eqb s r) eqn:E1.
    + apply Nat.eqb_eq in E1. subst s.
      replace ((S r <=? r)%nat) with false by (symmetry; apply Nat.leb_gt; lia).
      replace ((r <=? r)%nat) with true by (symmetry; apply Nat.leb_le; lia).
      replace ((r <? r + S n)%nat) with true by (symmetry; apply Nat.ltb_lt; lia). cbn. lra.
    + apply Nat.eqb_neq in E1.
      destruct (s <=? r)%nat eqn:E2, (r <? s + S n)%nat eqn:E3, (S s <=? r)%nat eqn:E4,
               (r <? S s + n)%nat eqn:E5; cbn;
        try rewrite Nat.leb_le in *; try rewrite Nat.leb_gt in *;
        try rewrite Nat.ltb_lt in *; try rewrite Nat.ltb_ge in *; try lra; lia.
Qed.

(* the same with an offset: the term i is at coordinate off + i *)
Lemma sum_at_off : forall (f : nat -> R) off r n,
  sumR (map (fun i => if Nat.eqb (off + i) r then f i else 0) (seq 0 n)) =
  if (off <=? r)%nat && (r <? off + n)%nat then f (r - off)%nat else 0.
Proof.
  intros f off r n.
  transitivity (sumR (map (fun j => if Nat.eqb j r then f (j - off)%nat else 0) (seq off n))).
  - rewrite <- (map_shift (fun j => if Nat.eqb j r then f (j - off)%nat else 0) off n). f_equal. apply map_ext. intros i. destruct (Nat.eqb (off + i) r); [|reflexivity].
    f_equal. lia.
  - rewrite sum_at. reflexivity.
Qed.

Lemma dotR_map : forall {A} (f : A -> Q) (g : A -> R) l,
  dotR (map f l) (map g l) = sumR (map (fun a => Q2R (f a) * g a) l).
Proof. intros A f g l. induction l as [|a l IH]; cbn; [reflexivity | rewrite IH; reflexivity]. Qed.

Lemma dotR_app : forall a b u v, length a = length u -> dotR (a ++ b) (u ++ v) = dotR a u + dotR b v.
Proof.
  induction a as [|c a IH]; intros b [|w u] v H; cbn in H; try lia; cbn [app dotR]; [lra|].
  rewrite IH by lia. lra.
Qed.

Lemma dot_split : forall a b (F : nat -> R) s n1 n2, length a = n1 ->
  dotR (a ++ b) (map F (seq s (n1 + n2))) = dotR a (map F (seq s n1)) + dotR b (map F (seq (s + n1) n2)).
Proof.
  intros a b F s n1 n2 H. rewrite seq_app, map_app. apply dotR_app.
  rewrite map_length, seq_length. exact H.
Qed.

Lemma dot_basis_seq : forall n i v (F : nat -> R) s, (i < n)%nat ->
  dotR (basis n i v) (map F (seq s n)) = Q2R v * F (s + i)%nat.
Proof.
  intros n i v F s H. rewrite dotR_basis by exact H. rewrite <- map_shift, nth_map_seq by exact H. reflexivity.
Qed.

Lemma dotR_opp_map : forall a (t : list R), dotR (map Qopp a) t = - dotR a t.
Proof.
  induction a as [|c a IH]; intros [|v t]; cbn [map dotR]; try lra. rewrite IH, Q2R_opp. lra.
Qed.

Lemma length_basis : forall n i v, length (basis n i v) = n.
Proof. induction n as [|n IH]; intros [|i] v; cbn; try rewrite repeat_length; auto. Qed.

Lemma length_pad : forall W w, length (pad W w) = W.
Proof. intros W w. unfold pad. rewrite app_length, firstn_length, repeat_length. lia. Qed.

Lemma nth_basis : forall n i v r, (i < n)%nat -> nth r (basis n i v) 0%Q = if Nat.eqb r i then v else 0%Q.
Proof.
  induction n as [|n IH]; intros i v r H; [lia|].
  destruct i as [|i]; destruct r as [|r]; cbn [basis nth Nat.eqb]; try reflexivity.
  - destruct (nth_in_or_default r (repeat 0%Q n) 0%Q) as [Hi|Hd]; [|exact Hd].
    apply repeat_spec in Hi. exact Hi.
  - apply IH. lia.
Qed.

Lemma Q2R_if : forall (b : bool) (v : Q), Q2R (if b then v else 0%Q) = if b then Q2R v else 0.
Proof. intros [|] v; [reflexivity | apply RMicromega.Q2R_0]. Qed.

(* ------------------------------------------------------------------ *)
(** * Tokens given coordinate by coordinate *)

Definition tokens (k dm : nat) (F : nat -> nat -> R) : list (list R) :=
  map (fun t => map (F t) (seq 0 dm)) (seq 0 k).

Lemma tokens_ext : forall k dm F G, (forall t r, (t < k)%nat -> (r < dm)%nat -> F t r = G t r) ->
  tokens k dm F = tokens k dm G.
Proof.
  intros k dm F G H. unfold tokens. apply map_ext_in. intros t Ht. apply in_seq in Ht.
  apply map_ext_in. intros r Hr. apply in_seq in Hr. apply H; lia.
Qed.

(* the summand of coordinate r of a feed-forward sub-layer built by ff_of, on token tk *)
Definition ff_term (tk : list R) (r : nat) (u : hunit) : R :=
  if Nat.eqb (hu_out u) r then Q2R (hu_sign u) * reluR (dotR (hu_row u) tk + Q2R (hu_bias u)) else 0.

Lemma ff_tokens : forall k dm hs b2 F, length b2 = dm ->
  subR dm (ff_of dm hs b2) (tokens k dm F) =
  tokens k dm (fun t r => F t r + (sumR (map (ff_term (map (F t) (seq 0 dm)) r) hs) + Q2R (nth r b2 0%Q))).
Proof.
  intros k dm hs b2 F Hb. unfold subR, ff_of, tokens. rewrite map_map. apply map_ext. intros t.
  unfold ffR, affR. rewrite combine_map_same, map_map, map_map. cbn [fst snd].
  rewrite <- (map_nth_seq_Q b2 0%Q) at 1. rewrite Hb, combine_map_same, map_map. cbn [fst snd].
  rewrite vplus_map. apply map_ext. intros r. f_equal. f_equal. rewrite dotR_map. apply sumR_ext.
  intros u _. unfold ff_term. destruct (Nat.eqb (hu_out u) r); [reflexivity|].
  rewrite RMicromega.Q2R_0. lra.
Qed.

(* the two units of copy_units add a . tk + c to coordinate o *)
Lemma copy_sum : forall tk r a c o,
  sumR (map (ff_term tk r) (copy_units a c o)) = if Nat.eqb o r then dotR a tk + Q2R c else 0.
Proof.
  intros tk r a c o. unfold copy_units, ff_term. cbn [map sumR hu_out hu_sign hu_row hu_bias].
  destruct (Nat.eqb o r); [|lra]. rewrite dotR_opp_map, Q2R_opp, Q2R_1'.
  rewrite Q2R_m1.
  unfold reluR, Rmax. destruct (Rle_dec _ 0), (Rle_dec _ 0); lra.
Qed.

Lemma map_tokens : forall {A} k dm F (g : list R -> A),
  map g (tokens k dm F) = map (fun t => g (map (F t) (seq 0 dm))) (seq 0 k).
Proof. intros. unfold tokens. rewrite map_map. reflexivity. Qed.

(* the prefix of a short vector, padded with zeros *)
Lemma map_nth_pad : forall (h : list R) W, (length h <= W)%nat ->
  map (fun r => nth r h 0) (seq 0 W) = h ++ repeat 0 (W - length h).
Proof.
  intros h W H. replace W with (length h + (W - length h))%nat at 1 by lia.
  rewrite seq_app, map_app. f_equal.
  - exact (map_nth_seq_from h []).
  - rewrite repeat_map_seq, <- (map_shift _ (0 + length h)). apply map_ext. intros i.
    apply nth_overflow. lia.
Qed.

Lemma pad_short : forall W w, (length w <= W)%nat -> pad W w = w ++ repeat 0%Q (W - length w).
Proof. intros W w H. unfold pad. rewrite firstn_all2 by exact H. reflexivity. Qed.

Lemma dot_pad : forall W w (h : list R), length w = length h -> (length h <= W)%nat ->
  dotR (pad W w) (map (fun r => nth r h 0) (seq 0 W)) = dotR w h.
Proof.
  intros W w h E H. rewrite map_nth_pad, pad_short by lia. rewrite dotR_app by exact E.
  rewrite dotR_repeat0. lra.
Qed.

Lemma Q2R_2 : Q2R 2 = 2.
Proof. unfold Q2R. simpl. lra. Qed.

(* ------------------------------------------------------------------ *)
(** * The encoded state and the gate sub-layer *)

(* encode(h): token t is (h padded, 0, 0, e_t); h has at most W coordinates *)
Definition encF (W : nat) (h : list R) (t r : nat) : R :=
  nth r h 0 + if Nat.eqb r (3 * W + t) then 1 else 0.

(* The gate lemma: for |z| <= C, ReLU(z + 2C[s=t] - C) = [s=t](z + C). *)
Lemma gate_relu : forall z C (b : bool), - C <= z <= C ->
  reluR (z + (if b then 2 * C else 0) - C) = if b then z + C else 0.
Proof.
  intros z C b H. unfold reluR, Rmax. destruct b; destruct (Rle_dec _ 0); lra.
Qed.

Lemma piece_at_in : forall u s, u <> [] -> In (piece_at u s) u.
Proof.
  intros u s H. unfold piece_at. apply nth_In. destruct u; [congruence|]. cbn [length]. lia.
Qed.

Lemma eqb_shift : forall a s t, Nat.eqb (a + s) (a + t) = Nat.eqb s t.
Proof.
  intros a s t. destruct (Nat.eqb_spec s t), (Nat.eqb_spec (a + s) (a + t)); try reflexivity; lia.
Qed.

(* the pre-activation of gate unit (s, i) on token t of encode(h) *)
Lemma gate_pre : forall W k C s i u h t, (length h <= W)%nat ->
  length (pw (piece_at u s)) = length h -> (s < k)%nat ->
  dotR (hu_row (gate_unit W k C s i u)) (map (encF W h t) (seq 0 (3 * W + k))) +
  Q2R (hu_bias (gate_unit W k C s i u)) =
  pieceR (piece_at u s) h + (if Nat.eqb s t then 2 * Q2R C else 0) - Q2R C.
Proof.
  intros W k C s i u h t HW Hp Hs. cbn [gate_unit hu_row hu_bias].
  replace (3 * W + k)%nat with (W + (2 * W + k))%nat by lia.
  rewrite dot_split by apply length_pad. rewrite dot_split by apply repeat_length.
  rewrite dotR_repeat0, dot_basis_seq by exact Hs.
  replace (map (encF W h t) (seq 0 W)) with (map (fun r => nth r h 0) (seq 0 W)).
  2:{ apply map_ext_in. intros r Hr. apply in_seq in Hr. unfold encF.
      replace (Nat.eqb r (3 * W + t)) with false by (symmetry; apply Nat.eqb_neq; lia). lra. }
  rewrite dot_pad by lia. unfold encF. rewrite nth_overflow by lia.
  replace (0 + W + 2 * W + s)%nat with (3 * W + s)%nat by lia. rewrite eqb_shift.
  rewrite !Q2R_red, Q2R_minus, Q2R_mult, Q2R_2. unfold pieceR.
  destruct (Nat.eqb s t); lra.
Qed.

(* after the gate sub-layer: Z_i holds piece t of unit i on token t *)
Definition G1 (W : nat) (L : list (list piece)) (h : list R) (t r : nat) : R :=
  encF W h t r + if (W <=? r)%nat && (r <? W + length L)%nat
                 then pieceR (piece_at (nth (r - W) L []) t) h else 0.

Lemma gate_tokens : forall W k L C h, (length h <= W)%nat ->
  (forall u p, In u L -> In p u -> length (pw p) = length h) -> (forall u, In u L -> u <> []) ->
  (forall u p, In u L -> In p u -> - Q2R C <= pieceR p h <= Q2R C) ->
  subR (3 * W + k) (gate_ff W k L C) (tokens k (3 * W + k) (encF W h)) =
  tokens k (3 * W + k) (G1 W L h).
Proof.
  intros W k L C h HW Hlen Hne Hg. unfold gate_ff.
  rewrite ff_tokens by (rewrite map_length, seq_length; reflexivity).
  apply tokens_ext. intros t r Ht Hr. unfold G1. f_equal.
  rewrite nth_map_seq by exact Hr. rewrite sumR_concat_map.
  set (N := length L).
  assert (Inner : forall s, In s (seq 0 k) ->
            sumR (map (ff_term (map (encF W h t) (seq 0 (3 * W + k))) r)
                      (map (fun i => gate_unit W k C s i (nth i L [])) (seq 0 N))) =
            if (W <=? r)%nat && (r <? W + N)%nat
            then (if Nat.eqb s t then pieceR (piece_at (nth (r - W) L []) s) h + Q2R C else 0) else 0).
  { intros s Hs. apply in_seq in Hs. rewrite map_map.
    rewrite (sumR_ext _ (fun i => if Nat.eqb (W + i) r
                                  then reluR (pieceR (piece_at (nth i L []) s) h +
                                              (if Nat.eqb s t then 2 * Q2R C else 0) - Q2R C) else 0)).
    2:{ intros i Hi. apply in_seq in Hi. unfold ff_term. cbn [gate_unit hu_out hu_sign].
        destruct (Nat.eqb (W + i) r); [|reflexivity].
        assert (Hu : In (nth i L []) L) by (apply nth_In; lia).
        rewrite gate_pre; [rewrite Q2R_1'; lra | exact HW | | lia].
        apply Hlen with (u := nth i L []); [exact Hu | apply piece_at_in, Hne, Hu]. }
    rewrite sum_at_off. destruct ((W <=? r)%nat && (r <? W + N)%nat) eqn:E; [|reflexivity].
    apply andb_true_iff in E as [E1 E2]. apply Nat.leb_le in E1. apply Nat.ltb_lt in E2.
    assert (Hu : In (nth (r - W) L []) L) by (apply nth_In; lia).
    apply gate_relu. apply Hg with (u := nth (r - W) L []); [exact Hu | apply piece_at_in, Hne, Hu]. }
  rewrite (sumR_ext _ _ _ Inner). destruct ((W <=? r)%nat && (r <? W + N)%nat).
  - rewrite (sum_at (fun s => pieceR (piece_at (nth (r - W) L []) s) h + Q2R C) t k 0).
    replace ((0 <=? t)%nat && (t <? 0 + k)%nat) with true
      by (symmetry; apply andb_true_iff; split; [apply Nat.leb_le | apply Nat.ltb_lt]; lia).
    rewrite Q2R_red, Q2R_opp. lra.
  - rewrite sumR_zero, RMicromega.Q2R_0. lra.
Qed.

(* ------------------------------------------------------------------ *)
(** * The attention sub-layer: one head per unit, constant one-hot queries *)

(* Hardmax over scores that equal their values is the max, ties included
   (Sound.hardmaxR_diag); here with scores computed differently but equal. *)
Lemma combine_diag : forall {A} (f g : A -> R) l, (forall a, In a l -> f a = g a) ->
  combine (map f l) (map g l) = map (fun v => (v, v)) (map g l).
Proof.
  intros A f g l H. rewrite combine_map_same, map_map. apply map_ext_in. intros a Ha.
  rewrite (H a Ha). reflexivity.
Qed.

Lemma hardmax_max : forall {A} (f g : A -> R) l, l <> [] -> (forall a, In a l -> f a = g a) ->
  hardmaxR (combine (map f l) (map g l)) = maxlR (map g l).
Proof.
  intros A f g l Hl H. rewrite (combine_diag f g l H). apply hardmaxR_diag.
  destruct l; [congruence | discriminate].
Qed.

Definition onehot (W k : nat) (F : nat -> nat -> R) : Prop :=
  forall t s, (t < k)%nat -> (s < k)%nat -> F t (3 * W + s)%nat = if Nat.eqb s t then 1 else 0.

(* the query of every head: the sum of the P block, 1 on every token *)
Lemma query_one : forall W k F t, onehot W k F -> (t < k)%nat ->
  dotR (repeat 0%Q (3 * W) ++ repeat 1%Q k) (map (F t) (seq 0 (3 * W + k))) = 1.
Proof.
  intros W k F t H Ht. rewrite dot_split by apply repeat_length. rewrite dotR_repeat0.
  rewrite (repeat_map_seq 1%Q k), <- (map_shift (F t) (0 + 3 * W) k), dotR_map.
  rewrite (sumR_ext _ (fun s => if Nat.eqb s t then 1 else 0)).
  - rewrite (sum_at (fun _ => 1) t k 0).
    replace ((0 <=? t)%nat && (t <? 0 + k)%nat) with true
      by (symmetry; apply andb_true_iff; split; [apply Nat.leb_le | apply Nat.ltb_lt]; lia). lra.
  - intros s Hs. apply in_seq in Hs. rewrite Q2R_1'. replace (0 + 3 * W + s)%nat with (3 * W + s)%nat by lia.
    rewrite H by lia. lra.
Qed.

Lemma head_update_max : forall W k F t i acc, (1 <= k)%nat -> (i < W)%nat -> onehot W k F -> (t < k)%nat ->
  head_update (max_head W k i) (tokens k (3 * W + k) F) (map (F t) (seq 0 (3 * W + k))) acc =
  vplus acc (map (fun r => if Nat.eqb r (2 * W + i) then maxlR (map (fun t' => F t' (W + i)%nat) (seq 0 k)) else 0)
                 (seq 0 (3 * W + k))).
Proof.
  intros W k F t i acc Hk Hi H Ht. unfold head_update. cbn [max_head h_value h_out length seq fold_left].
  f_equal. rewrite map_map. apply map_ext. intros r. cbn [nth].
  unfold head_sel. cbn [max_head h_query h_key h_value h_scale mvR map].
  rewrite (query_one W k F t H Ht).
  rewrite Q2R_if, Q2R_1'. destruct (Nat.eqb r (2 * W + i)); [|lra]. rewrite Rmult_1_l.
  unfold tokens. rewrite !map_map.
  rewrite (hardmax_max _ (fun t' => dotR (basis (3 * W + k) (W + i) 1) (map (F t') (seq 0 (3 * W + k))))).
  - f_equal. apply map_ext. intros t'. rewrite dot_place by (rewrite map_length, seq_length; reflexivity).
    apply nth_map_seq. lia.
  - destruct k; [lia | discriminate].
  - intros a _. cbn [dotRR combine map fold_right fst snd]. lra.
Qed.

Lemma fold_heads : forall W k F t (l : list nat) (a : nat -> R),
  (1 <= k)%nat -> (forall i, In i l -> (i < W)%nat) -> onehot W k F -> (t < k)%nat ->
  fold_left (fun acc hd => head_update hd (tokens k (3 * W + k) F) (map (F t) (seq 0 (3 * W + k))) acc)
            (map (max_head W k) l) (map a (seq 0 (3 * W + k))) =
  map (fun r => a r + sumR (map (fun i => if Nat.eqb (2 * W + i) r
                                          then maxlR (map (fun t' => F t' (W + i)%nat) (seq 0 k)) else 0) l))
      (seq 0 (3 * W + k)).
Proof.
  intros W k F t l. induction l as [|i l IH]; intros a Hk Hl H Ht; cbn [map fold_left].
  - apply map_ext. intros r. cbn [sumR]. lra.
  - rewrite head_update_max by (auto; apply Hl; left; reflexivity).
    rewrite vplus_map, IH by (auto; intros j Hj; apply Hl; right; exact Hj).
    apply map_ext. intros r. cbn [sumR]. rewrite Nat.eqb_sym. lra.
Qed.

(* after the attention sub-layer: M_i holds the max over the tokens of Z_i *)
Lemma att_tokens : forall W k N F, (1 <= k)%nat -> (N <= W)%nat -> onehot W k F ->
  subR (3 * W + k) (max_att W k N) (tokens k (3 * W + k) F) =
  tokens k (3 * W + k) (fun t r => F t r + if (2 * W <=? r)%nat && (r <? 2 * W + N)%nat
                                           then maxlR (map (fun t' => F t' (r - W)%nat) (seq 0 k)) else 0).
Proof.
  intros W k N F Hk HN H. unfold subR, max_att, attR. rewrite map_tokens.
  unfold tokens at 2. apply map_ext_in. intros t Ht. apply in_seq in Ht.
  rewrite (repeat_map_seq 0 (3 * W + k)).
  rewrite fold_heads; [| lia | intros i Hi; apply in_seq in Hi; lia | exact H | lia].
  rewrite vplus_map. apply map_ext. intros r. f_equal. rewrite Rplus_0_l.
  rewrite (sum_at_off (fun i => maxlR (map (fun t' => F t' (W + i)%nat) (seq 0 k)))).
  destruct ((2 * W <=? r)%nat && (r <? 2 * W + N)%nat) eqn:E; [|reflexivity].
  apply andb_true_iff in E as [E1 _]. apply Nat.leb_le in E1.
  f_equal. apply map_ext. intros t'. f_equal. lia.
Qed.

(* ------------------------------------------------------------------ *)
(** * The clean-up sub-layer *)

Definition out_ok (W N : nat) (out : option (list (list Q) * list Q)) : Prop :=
  match out with
  | None => True
  | Some (A, b) => length A = length b /\ (length A <= W)%nat /\ Forall (fun r => length r = N) A
  end.

Lemma targets_length : forall W N out (v : list R), length v = N ->
  length (targets W N out) = length (phiR out v).
Proof.
  intros W N [[A b]|] v Hv; cbn [targets phiR]; unfold affineR; rewrite !map_length;
    [reflexivity | rewrite seq_length; congruence].
Qed.

Lemma phiR_length : forall W N out (v : list R), length v = N -> (N <= W)%nat -> out_ok W N out ->
  (length (phiR out v) <= W)%nat.
Proof.
  intros W N [[A b]|] v Hv HN Ho; cbn [phiR out_ok] in *; [|lia].
  unfold affineR. rewrite map_length, combine_length. lia.
Qed.

Lemma target_val : forall W N out (v : list R) j, length v = N -> (N <= W)%nat -> out_ok W N out ->
  dotR (fst (nth j (targets W N out) (repeat 0%Q W, 0%Q))) (v ++ repeat 0 (W - N)) +
  Q2R (snd (nth j (targets W N out) (repeat 0%Q W, 0%Q))) = nth j (phiR out v) 0.
Proof.
  intros W N out v j Hv HN Ho.
  destruct (Nat.lt_ge_cases j (length (targets W N out))) as [Hj|Hj].
  2:{ rewrite nth_overflow by exact Hj. rewrite nth_overflow by (erewrite <- targets_length; eauto).
      cbn [fst snd]. rewrite dotR_repeat0, RMicromega.Q2R_0. lra. }
  destruct out as [[A b]|]; cbn [targets phiR out_ok] in *.
  - destruct Ho as [Hab [HA Hr]]. rewrite map_length, combine_length in Hj.
    rewrite nth_indep with (d' := (fun rc => (pad W (fst rc), snd rc)) ([] : list Q, 0%Q))
      by (rewrite map_length, combine_length; lia).
    rewrite (map_nth (fun rc : list Q * Q => (pad W (fst rc), snd rc)) (combine A b) ([], 0%Q) j).
    rewrite combine_nth by exact Hab. cbn [fst snd].
    unfold affineR. rewrite nth_indep with (d' := (fun r => dotR (fst r) v + Q2R (snd r)) ([] : list Q, 0%Q))
      by (rewrite map_length, combine_length; lia).
    rewrite (map_nth (fun r : list Q * Q => dotR (fst r) v + Q2R (snd r)) (combine A b) ([], 0%Q) j).
    rewrite combine_nth by exact Hab. cbn [fst snd].
    assert (HAj : length (nth j A []) = N).
    { rewrite Forall_forall in Hr. apply Hr, nth_In. lia. }
    rewrite pad_short by lia. rewrite dotR_app by congruence. rewrite dotR_repeat0. lra.
  - rewrite map_length, seq_length in Hj. rewrite nth_map_seq by exact Hj. cbn [fst snd].
    rewrite dot_place by (rewrite app_length, repeat_length; lia).
    rewrite app_nth1 by lia. rewrite RMicromega.Q2R_0. lra.
Qed.

Lemma dot_H_row : forall W k (F : nat -> nat -> R) t j (a : list Q), (j < W)%nat -> length a = W ->
  dotR (basis W j (-1) ++ repeat 0%Q W ++ a ++ repeat 0%Q k) (map (F t) (seq 0 (3 * W + k))) =
  - F t j + dotR a (map (fun i => F t (2 * W + i)%nat) (seq 0 W)).
Proof.
  intros W k F t j a Hj Ha. replace (3 * W + k)%nat with (W + (W + (W + k)))%nat by lia.
  rewrite dot_split by apply length_basis. rewrite dot_split by apply repeat_length.
  rewrite dot_split by exact Ha. rewrite dotR_repeat0, dotR_repeat0, dot_basis_seq by exact Hj.
  rewrite Q2R_m1. rewrite <- (map_shift (F t) (0 + W + W) W).
  replace (map (fun i => F t (0 + W + W + i)%nat) (seq 0 W)) with (map (fun i => F t (2 * W + i)%nat) (seq 0 W))
    by (apply map_ext; intros i; f_equal; lia).
  replace (0 + j)%nat with j by lia. lra.
Qed.

Lemma dot_Z_row : forall W k (F : nat -> nat -> R) t i, (i < W)%nat ->
  dotR (repeat 0%Q W ++ basis W i (-1) ++ repeat 0%Q W ++ repeat 0%Q k) (map (F t) (seq 0 (3 * W + k))) =
  - F t (W + i)%nat.
Proof.
  intros W k F t i Hi. replace (3 * W + k)%nat with (W + (W + (W + k)))%nat by lia.
  rewrite dot_split by apply repeat_length. rewrite dot_split by apply length_basis.
  rewrite dotR_repeat0.
  rewrite dot_basis_seq by exact Hi. rewrite Q2R_m1.
  replace (0 + W + i)%nat with (W + i)%nat by lia.
  replace (repeat 0%Q W ++ repeat 0%Q k) with (repeat 0%Q (W + k)) by (rewrite repeat_app; reflexivity).
  rewrite dotR_repeat0. lra.
Qed.

Lemma dot_M_row : forall W k (F : nat -> nat -> R) t i, (i < W)%nat ->
  dotR (repeat 0%Q (2 * W) ++ basis W i (-1) ++ repeat 0%Q k) (map (F t) (seq 0 (3 * W + k))) =
  - F t (2 * W + i)%nat.
Proof.
  intros W k F t i Hi. replace (3 * W + k)%nat with (2 * W + (W + k))%nat by lia.
  rewrite dot_split by apply repeat_length. rewrite dot_split by apply length_basis.
  rewrite !dotR_repeat0. rewrite dot_basis_seq by exact Hi. rewrite Q2R_m1.
  replace (0 + 2 * W + i)%nat with (2 * W + i)%nat by lia. lra.
Qed.

Lemma ltb_true : forall a b, (a < b)%nat -> (a <? b)%nat = true.
Proof. intros. apply Nat.ltb_lt. lia. Qed.

Lemma cleanup_tokens : forall W k prev N out (F : nat -> nat -> R) (v : list R),
  length v = N -> (N <= W)%nat -> (prev <= W)%nat -> out_ok W N out ->
  (forall t i, (t < k)%nat -> (i < W)%nat -> F t (2 * W + i)%nat = nth i v 0) ->
  (forall t r, (t < k)%nat -> (prev <= r < W)%nat -> F t r = 0) ->
  (forall t i, (t < k)%nat -> (N <= i < W)%nat -> F t (W + i)%nat = 0) ->
  onehot W k F ->
  subR (3 * W + k) (cleanup_ff W k prev N out) (tokens k (3 * W + k) F) =
  tokens k (3 * W + k) (encF W (phiR out v)).
Proof.
  intros W k prev N out F v Hv HN Hp Ho HM HH HZ H1.
  unfold cleanup_ff. rewrite ff_tokens by apply repeat_length.
  apply tokens_ext. intros t r Ht Hr.
  set (tg := targets W N out). set (J := Nat.max prev (length tg)).
  set (y := phiR out v).
  assert (HJ : (J <= W)%nat).
  { unfold J, tg. rewrite (targets_length W N out v Hv). pose proof (phiR_length W N out v Hv HN Ho). lia. }
  assert (Hy : length y = length tg) by (unfold y, tg; symmetry; apply targets_length; exact Hv).
  set (tk := map (F t) (seq 0 (3 * W + k))).
  rewrite nth_repeat, RMicromega.Q2R_0, Rplus_0_r.
  rewrite !concat_app, !map_app, !sumR_app, !sumR_concat_map.
  rewrite (sumR_ext _ (fun j => if Nat.eqb j r then - F t j + nth j y 0 else 0)).
  2:{ intros j Hj. apply in_seq in Hj. rewrite copy_sum. destruct (Nat.eqb j r); [|reflexivity].
      assert (La : length (fst (nth j tg (repeat 0%Q W, 0%Q))) = W).
      { assert (Lq : forall q, In q tg -> length (fst q) = W).
        { intros q Hq. unfold tg in Hq. destruct out as [[A b]|]; cbn [targets] in Hq;
            apply in_map_iff in Hq as [x [<- _]]; [apply length_pad | apply length_basis]. }
        destruct (nth_in_or_default j tg (repeat 0%Q W, 0%Q)) as [Hin|Hd].
        - exact (Lq _ Hin).
        - rewrite Hd. apply repeat_length. }
      unfold tk. rewrite dot_H_row by (exact La || lia).
      replace (map (fun i => F t (2 * W + i)%nat) (seq 0 W)) with (v ++ repeat 0 (W - N)).
      2:{ rewrite <- Hv, <- map_nth_pad by lia. apply map_ext_in. intros i Hi. apply in_seq in Hi.
          symmetry. apply HM; lia. }
      unfold y. rewrite <- (target_val W N out v j Hv HN Ho). fold tg. lra. }
  match goal with |- context [sumR (map ?g (seq 0 N)) + sumR (map ?h (seq 0 N))] =>
    set (gZ := g); set (gM := h) end.
  rewrite (sumR_ext gZ (fun i => if Nat.eqb (W + i) r then - F t (W + i)%nat else 0)).
  2:{ intros i Hi. apply in_seq in Hi. unfold gZ. rewrite copy_sum. destruct (Nat.eqb (W + i) r); [|reflexivity].
      unfold tk. rewrite dot_Z_row by lia. rewrite RMicromega.Q2R_0. lra. }
  rewrite (sumR_ext gM (fun i => if Nat.eqb (2 * W + i) r then - F t (2 * W + i)%nat else 0)).
  2:{ intros i Hi. apply in_seq in Hi. unfold gM. rewrite copy_sum. destruct (Nat.eqb (2 * W + i) r); [|reflexivity].
      unfold tk. rewrite dot_M_row by lia. rewrite RMicromega.Q2R_0. lra. }
  rewrite (sum_at (fun j => - F t j + nth j y 0) r J 0).
  rewrite (sum_at_off (fun i => - F t (W + i)%nat) W r N).
  rewrite (sum_at_off (fun i => - F t (2 * W + i)%nat) (2 * W) r N).
  unfold encF.
  destruct ((0 <=? r)%nat && (r <? 0 + J)%nat) eqn:E1;
  destruct ((W <=? r)%nat && (r <? W + N)%nat) eqn:E2;
  destruct ((2 * W <=? r)%nat && (r <? 2 * W + N)%nat) eqn:E3;
  repeat match goal with
         | E : (_ && _)%bool = true |- _ => apply andb_true_iff in E as [? ?]
         | E : (_ && _)%bool = false |- _ => apply andb_false_iff in E as [?|?]
         end;
  repeat match goal with
         | E : (_ <=? _)%nat = true |- _ => apply Nat.leb_le in E
         | E : (_ <=? _)%nat = false |- _ => apply Nat.leb_gt in E
         | E : (_ <? _)%nat = true |- _ => apply Nat.ltb_lt in E
         | E : (_ <? _)%nat = false |- _ => apply Nat.ltb_ge in E
         end; try lia.
  all: try (replace (W + (r - W))%nat with r by lia).
  all: try (replace (2 * W + (r - 2 * W))%nat with r by lia).
  all: try (replace (Nat.eqb r (3 * W + t)) with false by (symmetry; apply Nat.eqb_neq; lia)).
  all: try (rewrite (nth_overflow y) by lia).
  all: try lra.
  (* what is left: coordinates no sum writes *)
  all: try (exfalso; lia).
  all: destruct (Nat.lt_ge_cases r (3 * W)) as [H3|H3].
  all: try (replace (Nat.eqb r (3 * W + t)) with false by (symmetry; apply Nat.eqb_neq; lia)).
  all: try (assert (Hw : (r < W)%nat) by lia;
            rewrite (HH t r Ht) by lia; try (rewrite (nth_overflow y) by lia); lra).
  all: try (assert (Hw : (W <= r < 2 * W)%nat) by lia;
            replace r with (W + (r - W))%nat by lia; rewrite (HZ t (r - W)%nat Ht) by lia;
            replace (W + (r - W))%nat with r by lia; try (rewrite (nth_overflow y) by lia); lra).
  all: try (assert (Hw : (2 * W <= r < 3 * W)%nat) by lia;
            replace r with (2 * W + (r - 2 * W))%nat by lia; rewrite (HM t (r - 2 * W)%nat Ht) by lia;
            try (rewrite (nth_overflow v) by lia);
            replace (2 * W + (r - 2 * W))%nat with r by lia; try (rewrite (nth_overflow y) by lia); lra).
  all: replace r with (3 * W + (r - 3 * W))%nat by lia; rewrite (H1 t (r - 3 * W)%nat Ht) by lia;
       replace (3 * W + (r - 3 * W))%nat with r by lia; try (rewrite (nth_overflow y) by lia);
       destruct (Nat.eqb_spec (r - 3 * W) t), (Nat.eqb_spec r (3 * W + t)); try lia; lra.
Qed.

(* ------------------------------------------------------------------ *)
(** * One layer: Theorem 3.1 *)

(* padding a unit by repeating its last piece does not change its max *)
Lemma padding_max : forall (f : piece -> R) u k, u <> [] -> (length u <= k)%nat ->
  maxlR (map (fun s => f (piece_at u s)) (seq 0 k)) = maxlR (map f u).
Proof.
  intros f u k Hu Hk. apply maxlR_same; intros w Hw; apply in_map_iff in Hw as [a [<- Ha]].
  - apply in_map. apply piece_at_in. exact Hu.
  - apply In_nth with (d := no_piece) in Ha as [j [Hj <-]].
    apply in_map_iff. exists j. split.
    + unfold piece_at. f_equal. f_equal. lia.
    + apply in_seq. lia.
Qed.

(* decide the comparisons of naturals that lia can decide *)
Ltac decide_nat :=
  repeat match goal with
  | |- context [(?a <=? ?b)%nat] =>
      first [ replace (a <=? b)%nat with true by (symmetry; apply Nat.leb_le; lia)
            | replace (a <=? b)%nat with false by (symmetry; apply Nat.leb_gt; lia) ]
  | |- context [(?a <? ?b)%nat] =>
      first [ replace (a <? b)%nat with true by (symmetry; apply Nat.ltb_lt; lia)
            | replace (a <? b)%nat with false by (symmetry; apply Nat.ltb_ge; lia) ]
  | |- context [Nat.eqb ?a ?b] =>
      first [ replace (Nat.eqb a b) with true by (symmetry; apply Nat.eqb_eq; lia)
            | replace (Nat.eqb a b) with false by (symmetry; apply Nat.eqb_neq; lia) ]
  end; cbn [andb].

Theorem construct_layer : forall W k L C prev out h,
  (1 <= k)%nat -> length h = prev -> (prev <= W)%nat -> (length L <= W)%nat ->
  (forall u, In u L -> u <> [] /\ (length u <= k)%nat) ->
  (forall u p, In u L -> In p u -> length (pw p) = prev) ->
  (forall u p, In u L -> In p u -> - Q2R C <= pieceR p h <= Q2R C) ->
  out_ok W (length L) out ->
  fold_left (fun X s => subR (3 * W + k) s X)
            [gate_ff W k L C; max_att W k (length L); cleanup_ff W k prev (length L) out]
            (tokens k (3 * W + k) (encF W h)) =
  tokens k (3 * W + k) (encF W (phiR out (layerR L h))).
Proof.
  intros W k L C prev out h Hk Hh Hp HN Hu Hw Hg Ho. cbn [fold_left].
  rewrite gate_tokens; [| lia | intros u p Hu' Hp'; rewrite Hh; exact (Hw u p Hu' Hp')
                        | intros u Hu'; apply Hu, Hu' | exact Hg].
  rewrite att_tokens; [| exact Hk | exact HN |].
  2:{ intros t s Ht Hs. unfold G1, encF. decide_nat. rewrite nth_overflow by lia.
      destruct (Nat.eqb_spec s t); decide_nat; lra. }
  set (N := length L).
  apply cleanup_tokens; [unfold layerR; rewrite map_length; reflexivity | exact HN | exact Hp | exact Ho | | | |].
  - intros t i Ht Hi. unfold G1, encF. decide_nat. rewrite nth_overflow by lia.
    destruct (Nat.lt_ge_cases i N) as [HiN|HiN].
    + decide_nat.
      rewrite (map_ext _ (fun t' => pieceR (piece_at (nth i L []) t') h)).
      2:{ intros t'. rewrite nth_overflow by lia. decide_nat. replace (2 * W + i - W - W)%nat with i by lia. lra. }
      assert (HuI : In (nth i L []) L) by (apply nth_In; lia).
      rewrite (padding_max (fun p => pieceR p h)) by (apply Hu; exact HuI).
      unfold layerR. rewrite (nth_map_d (fun u => maxlR (map (fun p => pieceR p h) u)) L i [] 0) by reflexivity.
      lra.
    + decide_nat. unfold layerR. rewrite nth_overflow by (rewrite map_length; lia). lra.
  - intros t r Ht Hr. unfold G1, encF. decide_nat. rewrite nth_overflow by lia. lra.
  - intros t i Ht Hi. unfold G1, encF. decide_nat. rewrite nth_overflow by lia. lra.
  - intros t s Ht Hs. unfold G1, encF. decide_nat. rewrite nth_overflow by lia.
    destruct (Nat.eqb_spec s t); decide_nat; lra.
Qed.

(* ------------------------------------------------------------------ *)
(** * Every layer: Theorem 3.2 *)

(* the gate constants bound every pre-activation, layer by layer, at the point reached *)
Fixpoint gates_hold (Ls : list (list (list piece))) (Cs : list Q) (h : list R) : Prop :=
  match Ls with
  | [] => True
  | L :: Ls' => (forall u p, In u L -> In p u -> - Q2R (hd 0%Q Cs) <= pieceR p h <= Q2R (hd 0%Q Cs)) /\
                gates_hold Ls' (tl Cs) (layerR L h)
  end.

Lemma layers_shaped_cons : forall n L Ls, layers_shaped n (L :: Ls) = true ->
  (forall u, In u L -> u <> []) /\ (forall u p, In u L -> In p u -> length (pw p) = n) /\
  layers_shaped (length L) Ls = true.
Proof.
  intros n L Ls H. cbn [layers_shaped] in H. apply andb_true_iff in H as [H1 H2].
  rewrite forallb_forall in H1. split; [|split; [|exact H2]].
  - intros u Hu. specialize (H1 u Hu). apply andb_true_iff in H1 as [H1 _].
    apply negb_true_iff, Nat.eqb_neq in H1. destruct u; [cbn in H1; lia | discriminate].
  - intros u p Hu Hp. specialize (H1 u Hu). apply andb_true_iff in H1 as [_ H1].
    rewrite forallb_forall in H1. apply Nat.eqb_eq, H1, Hp.
Qed.

Theorem construct_layers : forall W k out Ls Cs prev h,
  (1 <= k)%nat -> length h = prev -> (prev <= W)%nat -> Ls <> [] ->
  layers_shaped prev Ls = true ->
  (forall L, In L Ls -> (length L <= W)%nat /\ forall u, In u L -> (length u <= k)%nat) ->
  out_ok W (length (last Ls [])) out ->
  gates_hold Ls Cs h ->
  fold_left (fun X s => subR (3 * W + k) s X) (layers_subs W k out prev Ls Cs) (tokens k (3 * W + k) (encF W h)) =
  tokens k (3 * W + k) (encF W (phiR out (layersR Ls h))).
Proof.
  intros W k out Ls. induction Ls as [|L Ls IH]; intros Cs prev h Hk Hh Hp Hne Hs HL Ho Hg; [congruence|].
  apply layers_shaped_cons in Hs as [Hu [Hw Hs]]. destruct Hg as [Hg Hgs].
  destruct (HL L (or_introl eq_refl)) as [HLW HLk].
  cbn [layers_subs layersR].
  set (o := match Ls with [] => out | _ => None end).
  change (gate_ff W k L (hd 0%Q Cs) :: max_att W k (length L) :: cleanup_ff W k prev (length L) o ::
          layers_subs W k out (length L) Ls (tl Cs))
    with ([gate_ff W k L (hd 0%Q Cs); max_att W k (length L); cleanup_ff W k prev (length L) o] ++
          layers_subs W k out (length L) Ls (tl Cs)).
  rewrite fold_left_app.
  rewrite construct_layer; [| exact Hk | exact Hh | exact Hp | exact HLW
                           | intros u Hu'; split; [apply Hu, Hu' | apply HLk, Hu'] | exact Hw | exact Hg | ].
  2:{ unfold o. destruct Ls as [|L' Ls']; [exact Ho | exact I]. }
  unfold o. destruct Ls as [|L' Ls'].
  - reflexivity.
  - cbn [phiR]. apply IH; [exact Hk | unfold layerR; rewrite map_length; reflexivity | exact HLW
                           | discriminate | exact Hs | intros L0 H0; apply HL; right; exact H0
                           | exact Ho | exact Hgs].
Qed.

(* ------------------------------------------------------------------ *)
(** * Shapes of a well-shaped network *)

Lemma le_fold_max : forall l n, In n l -> (n <= fold_right Nat.max O l)%nat.
Proof.
  induction l as [|a l IH]; intros n H; [destruct H|]. cbn [fold_right].
  destruct H as [<-|H]; [lia | specialize (IH n H); lia].
Qed.

Lemma width_ge : forall net n, In n (widths net) -> (n <= net_width net)%nat.
Proof. intros net n H. unfold net_width. pose proof (le_fold_max _ _ H). lia. Qed.

Lemma rank_ge : forall net L u, In L (mo_layers net) -> In u L -> (length u <= net_rank net)%nat.
Proof.
  intros net L u HL Hu. unfold net_rank. generalize (mo_layers net) HL. clear HL.
  intros Ls HL. induction Ls as [|L' Ls IH]; [destruct HL|].
  cbn [fold_right]. destruct HL as [E|HL]; [subst L'|specialize (IH HL); lia].
  enough ((length u <= layer_rank L)%nat) by lia. unfold layer_rank.
  clear IH. induction L as [|u' L IHL]; [destruct Hu|]. cbn [fold_right].
  destruct Hu as [E|Hu]; [subst u'; lia | specialize (IHL Hu); lia].
Qed.

Lemma layersR_length : forall Ls h, Ls <> [] -> length (layersR Ls h) = length (last Ls []).
Proof.
  induction Ls as [|L Ls IH]; intros h H; [congruence|]. cbn [layersR].
  destruct Ls as [|L' Ls']; [cbn; unfold layerR; rewrite map_length; reflexivity|].
  rewrite IH by discriminate. reflexivity.
Qed.

Lemma last_map_d : forall {A B} (f : A -> B) l d, last (map f l) (f d) = f (last l d).
Proof. intros A B f l d. induction l as [|a l IH]; [reflexivity|]. destruct l; [reflexivity | exact IH]. Qed.

Lemma last_widths : forall d (Ls : list (list (list piece))), Ls <> [] ->
  last (d :: map (@length _) Ls) O = length (last Ls []).
Proof.
  intros d Ls H. destruct Ls as [|L Ls]; [congruence|].
  change (last (map (@length _) (L :: Ls)) (length ([] : list (list piece))) = length (last (L :: Ls) [])).
  apply last_map_d.
Qed.

Lemma in_last : forall {A} (l : list A) d, l <> [] -> In (last l d) l.
Proof.
  intros A l d. induction l as [|a l IH]; intros H; [congruence|].
  destruct l as [|b l]; [left; reflexivity | right; apply IH; discriminate].
Qed.

(* ------------------------------------------------------------------ *)
(** * The embedding and the read-out *)

Lemma embed_tokens : forall W k d (x : list R), length x = d -> (d <= W)%nat ->
  map (fun p => affR (place d (3 * W + k)) p x) (map (fun t => basis (3 * W + k) (3 * W + t) 1) (seq 0 k)) =
  tokens k (3 * W + k) (encF W x).
Proof.
  intros W k d x Hd HW. rewrite map_map. unfold tokens. apply map_ext_in. intros t Ht. apply in_seq in Ht.
  unfold affR, place. rewrite <- (map_nth_seq_Q (basis (3 * W + k) (3 * W + t) 1) 0%Q) at 1.
  rewrite length_basis, combine_map_same, map_map. apply map_ext_in. intros r Hr. apply in_seq in Hr.
  cbn [fst snd]. rewrite dot_place by exact Hd. rewrite nth_basis by lia. unfold encF.
  rewrite Q2R_if, Q2R_1'. reflexivity.
Qed.

Lemma readout_tokens : forall W k m (y : list R), (1 <= k)%nat -> length y = m -> (m <= W)%nat ->
  affR (map (fun j => basis (3 * W + k) j 1) (seq 0 m)) (repeat 0%Q m)
       (nth 0 (tokens k (3 * W + k) (encF W y)) []) = y.
Proof.
  intros W k m y Hk Hy Hm. unfold tokens. rewrite nth_map_seq by lia.
  unfold affR. rewrite repeat_map_seq, combine_map_same, map_map. cbn [fst snd].
  rewrite <- Hy at 1. rewrite <- (map_nth_seq_from y []) at 2. cbn [app length].
  apply map_ext_in. intros j Hj. apply in_seq in Hj.
  rewrite dot_place by (rewrite map_length, seq_length; reflexivity).
  rewrite nth_map_seq by lia. unfold encF. rewrite RMicromega.Q2R_0. decide_nat. lra.
Qed.

(* ------------------------------------------------------------------ *)
(** * The theorem *)

(** Theorems 3.1 and 3.2 for every network: on a well-shaped network, wherever the gate
    constants bound every pre-activation, the constructed Transformer is the network. *)
Theorem construct_correct : forall net C x,
  shaped net = true -> length x = mo_dim net -> gates_hold (mo_layers net) C x ->
  transformerR (construct net C) x = maxoutR net x.
Proof.
  intros net C x Hs Hd Hg.
  unfold shaped in Hs. apply andb_true_iff in Hs as [Hs Hout].
  apply andb_true_iff in Hs as [Hs Hsh]. apply andb_true_iff in Hs as [HD Hk].
  apply negb_true_iff, Nat.eqb_neq in HD. apply negb_true_iff, Nat.eqb_neq in Hk.
  assert (HLs : mo_layers net <> []) by (destruct (mo_layers net); [cbn in HD; lia | discriminate]).
  set (W := net_width net) in *. set (k := net_rank net) in *.
  assert (HdW : (mo_dim net <= W)%nat) by (apply width_ge; left; reflexivity).
  assert (HmW : (out_dim net <= W)%nat) by (unfold W, net_width; lia).
  assert (HL : forall L, In L (mo_layers net) -> (length L <= W)%nat /\ forall u, In u L -> (length u <= k)%nat).
  { intros L HL. split.
    - apply width_ge. right. apply in_map. exact HL.
    - intros u Hu. exact (rank_ge net L u HL Hu). }
  assert (HN : last (widths net) O = length (last (mo_layers net) [])) by (apply last_widths; exact HLs).
  assert (Ho : out_ok W (length (last (mo_layers net) [])) (mo_out net)).
  { unfold out_dim in HmW. destruct (mo_out net) as [[A b]|]; [|exact I].
    apply andb_true_iff in Hout as [H1 H2]. apply Nat.eqb_eq in H1. rewrite forallb_forall in H2.
    split; [exact H1|]. split; [exact HmW|]. apply Forall_forall. intros r Hr.
    rewrite <- HN. apply Nat.eqb_eq, H2, Hr. }
  unfold transformerR, construct. cbn [tf_emb tf_pos tf_subs tf_dm tf_token tf_rW tf_rb readoutR].
  fold W k. rewrite embed_tokens by (exact Hd || exact HdW).
  rewrite construct_layers; [| lia | exact Hd | exact HdW | exact HLs | exact Hsh | exact HL | exact Ho | exact Hg].
  unfold readoutR. cbn [tf_token tf_rW tf_rb].
  rewrite readout_tokens; [| lia | | exact HmW].
  - unfold maxoutR, phiR. destruct (mo_out net) as [[A b]|]; reflexivity.
  - unfold out_dim. rewrite HN. destruct (mo_out net) as [[A b]|]; cbn [phiR].
    + apply andb_true_iff in Hout as [H1 _]. apply Nat.eqb_eq in H1.
      unfold affineR. rewrite map_length, combine_length. lia.
    + apply layersR_length. exact HLs.
Qed.

(* ------------------------------------------------------------------ *)
(** * The gate condition over a domain *)

Lemma rdot_lo_R : forall w lo hi, Q2R (rdot_lo w lo hi) = Q2R (dot_lo w lo hi).
Proof.
  induction w as [|a w IH]; intros [|l lo] [|u hi]; cbn [rdot_lo dot_lo]; try reflexivity.
  rewrite Q2R_red, !Q2R_plus, IH. reflexivity.
Qed.

Lemma rdot_hi_R : forall w lo hi, Q2R (rdot_hi w lo hi) = Q2R (dot_hi w lo hi).
Proof.
  induction w as [|a w IH]; intros [|l lo] [|u hi]; cbn [rdot_hi dot_hi]; try reflexivity.
  rewrite Q2R_red, !Q2R_plus, IH. reflexivity.
Qed.

Lemma piece_range : forall p lo hi h, in_box lo hi h ->
  Q2R (piece_lo p lo hi) <= pieceR p h <= Q2R (piece_hi p lo hi).
Proof.
  intros p lo hi h Hh. unfold piece_lo, piece_hi, pieceR. rewrite !Q2R_plus, rdot_lo_R, rdot_hi_R.
  pose proof (dot_range (pw p) lo hi h Hh). lra.
Qed.

Lemma layer_gates_sound : forall L C lo hi h, layer_gates_ok L C lo hi = true -> in_box lo hi h ->
  forall u p, In u L -> In p u -> - Q2R C <= pieceR p h <= Q2R C.
Proof.
  intros L C lo hi h H Hh u p Hu Hp. unfold layer_gates_ok in H. rewrite forallb_forall in H.
  specialize (H u Hu). rewrite forallb_forall in H. specialize (H p Hp).
  apply andb_true_iff in H as [H1 H2]. apply Qle_bool_R in H1. apply Qle_bool_R in H2.
  rewrite Q2R_opp in H1. pose proof (piece_range p lo hi h Hh). lra.
Qed.

Lemma units_ok_sound : forall L C lo hi lo' hi' h, units_ok L C lo hi lo' hi' = true -> in_box lo hi h ->
  (forall u p, In u L -> In p u -> - Q2R C <= pieceR p h <= Q2R C) /\ in_box lo' hi' (layerR L h).
Proof.
  induction L as [|u L IH]; intros C lo hi [|l' lo'] [|h' hi'] h H Hh; cbn [units_ok] in H;
    try discriminate; [split; [intros u p [] | exact I]|].
  apply andb_true_iff in H as [H H4]. apply andb_true_iff in H as [H H3]. apply andb_true_iff in H as [H1 H2].
  destruct (IH C lo hi lo' hi' h H4 Hh) as [G B]. rewrite forallb_forall in H1, H3.
  split.
  - intros u' p [<-|Hu] Hp; [|exact (G u' p Hu Hp)].
    specialize (H1 (piece_lo p lo hi, piece_hi p lo hi) (in_map _ _ _ Hp)).
    apply andb_true_iff in H1 as [H1 H1']. cbn [fst snd] in H1, H1'.
    apply Qle_bool_R in H1. apply Qle_bool_R in H1'. rewrite Q2R_opp in H1.
    pose proof (piece_range p lo hi h Hh). lra.
  - cbn [layerR map in_box]. split; [|exact B].
    apply existsb_exists in H2 as [r [Hr Hl]]. apply in_map_iff in Hr as [p [<- Hp]]. cbn [fst] in Hl. split.
    + apply Qle_bool_R in Hl. pose proof (piece_range p lo hi h Hh) as [D1 _].
      eapply Rle_trans; [|apply maxlR_ub; apply in_map_iff; exists p; split; [reflexivity | exact Hp]].
      lra.
    + apply maxlR_lub.
      * destruct u; [destruct Hp | discriminate].
      * intros w Hw. apply in_map_iff in Hw as [q [<- Hq]].
        specialize (H3 (piece_lo q lo hi, piece_hi q lo hi) (in_map _ _ _ Hq)). cbn [snd] in H3.
        apply Qle_bool_R in H3. pose proof (piece_range q lo hi h Hh) as [_ D2]. lra.
Qed.

Lemma gates_boxes_sound : forall Ls Cs lo hi rest h, gates_boxes Ls Cs ((lo, hi) :: rest) = true ->
  in_box lo hi h -> gates_hold Ls Cs h.
Proof.
  induction Ls as [|L Ls IH]; intros Cs lo hi rest h H Hh; [exact I|].
  cbn [gates_boxes] in H. cbn [gates_hold].
  destruct Ls as [|L' Ls'].
  - split; [exact (layer_gates_sound L _ lo hi h H Hh) | exact I].
  - destruct rest as [|[lo' hi'] rest']; [discriminate|].
    apply andb_true_iff in H as [H2 H3].
    destruct (units_ok_sound L _ lo hi lo' hi' h H2 Hh) as [G B].
    split; [exact G|]. exact (IH (tl Cs) lo' hi' rest' (layerR L h) H3 B).
Qed.

Theorem gates_ok_sound : forall net C D boxes proofs x, gates_ok net C D boxes proofs = true ->
  length x = mo_dim net -> in_domain D x -> gates_hold (mo_layers net) C x.
Proof.
  intros net C D boxes proofs x H Hd Hx. unfold gates_ok in H.
  destruct boxes as [|[lo hi] rest]; [discriminate|]. apply andb_true_iff in H as [H1 H2].
  exact (gates_boxes_sound _ _ lo hi rest x H2 (b0_sound D _ lo hi proofs x H1 Hd Hx)).
Qed.

(** The theorem as exported files use it: a well-shaped network, gate constants the boxes
    prove over the domain D, and every real point of D. *)
Theorem construct_sound : forall net C D boxes proofs,
  shaped net = true -> gates_ok net C D boxes proofs = true ->
  forall x, length x = mo_dim net -> in_domain D x -> transformerR (construct net C) x = maxoutR net x.
Proof.
  intros net C D boxes proofs Hs Hg x Hd Hx.
  exact (construct_correct net C x Hs Hd (gates_ok_sound net C D boxes proofs x Hg Hd Hx)).
Qed.

(* for a box domain, the boxes computed in Coq: the exact interval images *)
Theorem construct_box_sound : forall net C lo hi,
  shaped net = true -> gates_ok_box net C lo hi = true ->
  forall x, length x = mo_dim net -> in_box lo hi x -> transformerR (construct net C) x = maxoutR net x.
Proof.
  intros net C lo hi Hs Hg x Hd Hx. exact (construct_sound net C (DBox lo hi) _ [] Hs Hg x Hd Hx).
Qed.

(* ------------------------------------------------------------------ *)
(** * Size *)

Lemma mat_count_const : forall (M : mat) c, (forall r, In r M -> length r = c) -> mat_count M = (c * length M)%nat.
Proof.
  induction M as [|r M IH]; intros c H; cbn [mat_count fold_right length]; [lia|].
  fold (mat_count M). rewrite (H r (or_introl eq_refl)), (IH c (fun r' Hr => H r' (or_intror Hr))). lia.
Qed.

Lemma ff_of_count : forall dm hs b2 c, (forall u, In u hs -> length (hu_row u) = c) ->
  sub_count (ff_of dm hs b2) = (c * length hs + length hs + dm * length hs + length b2)%nat.
Proof.
  intros dm hs b2 c H. cbn [sub_count ff_of]. rewrite map_length.
  rewrite (mat_count_const _ c), map_length.
  2:{ intros r Hr. apply in_map_iff in Hr as [u [<- Hu]]. exact (H u Hu). }
  rewrite (mat_count_const _ (length hs)), map_length, seq_length; [lia|].
  intros r Hr. apply in_map_iff in Hr as [j [<- _]]. apply map_length.
Qed.

Lemma length_concat_const : forall {A B} (f : A -> list B) l c, (forall a, In a l -> length (f a) = c) ->
  length (concat (map f l)) = (c * length l)%nat.
Proof.
  intros A B f l c H. induction l as [|a l IH]; cbn [map concat length]; [lia|].
  rewrite app_length, (H a (or_introl eq_refl)), IH by (intros a' Ha; apply H; right; exact Ha). lia.
Qed.

Lemma gate_count : forall W k L C,
  sub_count (gate_ff W k L C) = (2 * (k * length L) * (3 * W + k) + k * length L + (3 * W + k))%nat.
Proof.
  intros W k L C. unfold gate_ff. rewrite (ff_of_count _ _ _ (3 * W + k)).
  - rewrite (length_concat_const _ _ (length L)) by (intros s _; rewrite map_length, seq_length; reflexivity).
    rewrite map_length, !seq_length. lia.
  - intros u Hu. apply in_concat in Hu as [l [Hl Hu]]. apply in_map_iff in Hl as [s [<- Hs]].
    apply in_map_iff in Hu as [i [<- _]]. cbn [gate_unit hu_row].
    rewrite !app_length, length_pad, repeat_length, length_basis. lia.
Qed.

Lemma att_count : forall W k N, sub_count (max_att W k N) = (N * (4 * (3 * W + k) + 1))%nat.
Proof.
  intros W k N. cbn [max_att sub_count]. rewrite <- (seq_length N 0) at 2. generalize (seq 0 N) as l.
  intros l. induction l as [|i l IH]; cbn [map fold_right length]; [lia|]. rewrite IH.
  unfold head_count. cbn [max_head h_query h_key h_value h_out mat_count fold_right length].
  rewrite !app_length, !repeat_length, !length_basis.
  rewrite (mat_count_const _ 1), map_length, seq_length; [lia|].
  intros r Hr. apply in_map_iff in Hr as [j [<- _]]. reflexivity.
Qed.

Lemma targets_count : forall W N out, length (targets W N out) =
  match out with Some (A, b) => Nat.min (length A) (length b) | None => N end.
Proof.
  intros W N [[A b]|]; cbn [targets]; rewrite map_length; [apply combine_length | apply seq_length].
Qed.

Lemma cleanup_count : forall W k prev N out,
  (forall q, In q (targets W N out) -> length (fst q) = W) ->
  sub_count (cleanup_ff W k prev N out) =
  (let J := Nat.max prev (length (targets W N out)) in
   2 * (2 * (J + 2 * N)) * (3 * W + k) + 2 * (J + 2 * N) + (3 * W + k))%nat.
Proof.
  intros W k prev N out Lq. unfold cleanup_ff. rewrite (ff_of_count _ _ _ (3 * W + k)).
  - rewrite repeat_length, !concat_app, !app_length.
    rewrite !(length_concat_const _ _ 2) by (intros a _; reflexivity).
    rewrite !seq_length. cbv zeta. lia.
  - intros u Hu. rewrite !concat_app in Hu. apply in_app_or in Hu as [Hu|Hu]; [|apply in_app_or in Hu as [Hu|Hu]];
      apply in_concat in Hu as [l [Hl Hu]]; apply in_map_iff in Hl as [j [<- _]];
      cbn [copy_units In] in Hu; destruct Hu as [<-|[<-|[]]]; cbn [hu_row];
      rewrite ?map_length, !app_length, ?repeat_length, ?length_basis; try lia.
    all: set (q := nth j (targets W N out) (repeat 0%Q W, 0%Q));
         assert (Hq : length (fst q) = W) by (unfold q; destruct (nth_in_or_default j (targets W N out) (repeat 0%Q W, 0%Q)) as [Hin|Hd];
                                              [exact (Lq _ Hin) | rewrite Hd; apply repeat_length]);
         lia.
Qed.

Lemma targets_rows : forall W N out q, In q (targets W N out) -> length (fst q) = W.
Proof.
  intros W N [[A b]|] q Hq; cbn [targets] in Hq; apply in_map_iff in Hq as [x [<- _]];
    [apply length_pad | apply length_basis].
Qed.

Lemma layers_count : forall W k out Ls Cs prev,
  match out with Some (A, b) => length A = length b | None => True end ->
  fold_right (fun s a => (sub_count s + a)%nat) O (layers_subs W k out prev Ls Cs) =
  layers_size (3 * W + k) k out prev Ls.
Proof.
  intros W k out Ls. induction Ls as [|L Ls IH]; intros Cs prev Ho; [reflexivity|].
  cbn [layers_subs fold_right layers_size]. rewrite IH by exact Ho.
  rewrite gate_count, att_count, cleanup_count by apply targets_rows. unfold layer_size.
  rewrite targets_count. destruct Ls as [|L' Ls']; [destruct out as [[A b]|]|]; cbv zeta;
    [rewrite Ho, Nat.min_id | |]; lia.
Qed.

(** The size statement: the parameter count of the construction, in closed form. *)
Theorem construct_count : forall net C, shaped net = true -> tf_count (construct net C) = construct_size net.
Proof.
  intros net C Hs. unfold tf_count, construct, construct_size, model_dim.
  cbn [tf_emb tf_pos tf_rW tf_rb tf_subs].
  rewrite layers_count.
  2:{ unfold shaped in Hs. apply andb_true_iff in Hs as [_ Ho].
      destruct (mo_out net) as [[A b]|]; [|exact I]. apply andb_true_iff in Ho as [Ho _].
      apply Nat.eqb_eq, Ho. }
  unfold place. rewrite (mat_count_const _ (mo_dim net)), map_length, seq_length.
  2:{ intros r Hr. apply in_map_iff in Hr as [i [<- _]]. apply length_basis. }
  rewrite (mat_count_const _ (3 * net_width net + net_rank net)), map_length, seq_length.
  2:{ intros r Hr. apply in_map_iff in Hr as [i [<- _]]. apply length_basis. }
  rewrite (mat_count_const _ (3 * net_width net + net_rank net)), map_length, seq_length.
  2:{ intros r Hr. apply in_map_iff in Hr as [i [<- _]]. apply length_basis. }
  rewrite repeat_length. lia.
Qed.

(* ------------------------------------------------------------------ *)
(** * The gate condition over a polyhedron, the first layer by Farkas proofs *)

Lemma pieces_gated_sound : forall P C ps ws x, pieces_gated P C ps ws = true -> satR P x ->
  forall p, In p ps -> - Q2R C <= pieceR p x <= Q2R C.
Proof.
  intros P C ps. induction ps as [|q ps IH]; intros [|[wu wl] ws] x H Hx p Hp; cbn [pieces_gated] in H;
    try discriminate; [destruct Hp|].
  apply andb_true_iff in H as [H H3]. apply andb_true_iff in H as [H1 H2].
  destruct Hp as [<-|Hp]; [|exact (IH ws x H3 Hx p Hp)].
  pose proof (entails_ge _ _ _ x Hx H1) as U. pose proof (entails_ge _ _ _ x Hx H2) as V.
  rewrite evalR_asub in U, V. unfold evalR in U, V. cbn [fst snd dotR] in U, V.
  rewrite Q2R_opp in V. unfold pieceR. lra.
Qed.

Theorem gates_ok_poly_sound : forall net C D gws boxes iws x,
  gates_ok_poly net C D gws boxes iws = true -> in_domain D x -> gates_hold (mo_layers net) C x.
Proof.
  intros net C D gws boxes iws x H Hx. unfold gates_ok_poly in H.
  pose proof (dom_rows_sound D x Hx) as HP.
  destruct (mo_layers net) as [|L Ls]; [exact I|]. apply andb_true_iff in H as [H1 H2].
  cbn [gates_hold]. split.
  - intros u p Hu Hp. apply (pieces_gated_sound _ _ _ gws x H1 HP). apply in_concat. exists u. auto.
  - destruct Ls as [|L' Ls']; [exact I|]. destruct boxes as [|[lo' hi'] rest]; [discriminate|].
    apply andb_true_iff in H2 as [H2 H3].
    exact (gates_boxes_sound _ _ lo' hi' rest _ H3 (image_poly_sound _ L lo' hi' iws x H2 HP)).
Qed.

Theorem construct_poly_sound : forall net C D gws boxes iws,
  shaped net = true -> gates_ok_poly net C D gws boxes iws = true ->
  forall x, length x = mo_dim net -> in_domain D x -> transformerR (construct net C) x = maxoutR net x.
Proof.
  intros net C D gws boxes iws Hs Hg x Hd Hx.
  exact (construct_correct net C x Hs Hd (gates_ok_poly_sound net C D gws boxes iws x Hg Hx)).
Qed.

(* ------------------------------------------------------------------ *)
(** * Maxout.maxout_shaped and shaped *)

Lemma mo_layers_shaped_spec : forall Ls n m, mo_layers_shaped n Ls = Some m ->
  layers_shaped n Ls = true /\ m = last (n :: map (@length _) Ls) O.
Proof.
  induction Ls as [|L Ls IH]; intros n m H; cbn [mo_layers_shaped] in H.
  - inversion H. split; reflexivity.
  - destruct (forallb _ L) eqn:E; [|discriminate].
    destruct (IH _ _ H) as [H1 H2]. cbn [layers_shaped]. rewrite E, H1. split; [reflexivity|].
    rewrite H2. destruct Ls; reflexivity.
Qed.

(** The library's well-shapedness (Maxout.maxout_shaped), with at least one layer and one
    piece, is this file's. *)
Lemma maxout_shaped_shaped : forall net, maxout_shaped net = true -> mo_layers net <> [] ->
  net_rank net <> O -> shaped net = true.
Proof.
  intros net H HL Hk. unfold maxout_shaped in H. unfold shaped.
  destruct (mo_layers_shaped (mo_dim net) (mo_layers net)) as [n|] eqn:E; [|discriminate].
  destruct (mo_layers_shaped_spec _ _ _ E) as [H1 H2].
  rewrite H1. replace (Nat.eqb (length (mo_layers net)) O) with false
    by (symmetry; apply Nat.eqb_neq; destruct (mo_layers net); [congruence | discriminate]).
  replace (Nat.eqb (net_rank net) O) with false by (symmetry; apply Nat.eqb_neq; exact Hk).
  cbn [negb andb]. unfold widths. rewrite <- H2. destruct (mo_out net) as [[A b]|]; [exact H | reflexivity].
Qed.

(* ------------------------------------------------------------------ *)
(** * The gate condition in integers (Construction.zgates_ok) *)

Lemma dms_pos : forall m d s, (m * Zpos d = Zpos s)%Z -> (0 < m)%Z.
Proof. intros m d s H. destruct m; cbn in H; try discriminate. reflexivity. Qed.

Lemma weight_R : forall n d m s, (m * Zpos d = Zpos s)%Z -> Q2R (Qmake n d) * IZR (Zpos s) = IZR n * IZR m.
Proof.
  intros n d m s H. rewrite <- H, mult_IZR. unfold Q2R. cbn [Qnum Qden].
  assert (IZR (Zpos d) <> 0) by (apply not_0_IZR; discriminate). field. assumption.
Qed.

Lemma dms_in : forall s ms d m, dms_ok s ms = true -> In (d, m) ms -> (m * Zpos d = Zpos s)%Z.
Proof.
  intros s ms d m H Hin. unfold dms_ok in H. rewrite forallb_forall in H.
  specialize (H _ Hin). cbn [fst snd] in H. apply Z.eqb_eq. exact H.
Qed.

Lemma zlook_row : forall ms l u d a b, zlook d (zrow ms l u) = Some (a, b) ->
  exists m, In (d, m) ms /\ a = (m * l)%Z /\ b = (m * u)%Z.
Proof.
  induction ms as [|[d' m] ms IH]; intros l u d a b H; cbn in H; [discriminate|].
  destruct (Pos.eqb d d') eqn:E.
  - inversion H; subst. apply Pos.eqb_eq in E; subst. exists m. split; [left; reflexivity | split; reflexivity].
  - destruct (IH l u d a b H) as [m' [H1 H2]]. exists m'. split; [right; exact H1 | exact H2].
Qed.

Lemma grid_lo : forall l G v, Q2R (Qmake l G) <= v -> IZR l <= IZR (Zpos G) * v.
Proof.
  intros l G v H. unfold Q2R in H. cbn [Qnum Qden] in H.
  assert (0 < IZR (Zpos G)) by (apply IZR_lt; reflexivity).
  replace (IZR l) with (IZR (Zpos G) * (IZR l * / IZR (Zpos G))) by (field; lra).
  apply Rmult_le_compat_l; lra.
Qed.

Lemma grid_hi : forall u G v, v <= Q2R (Qmake u G) -> IZR (Zpos G) * v <= IZR u.
Proof.
  intros u G v H. unfold Q2R in H. cbn [Qnum Qden] in H.
  assert (0 < IZR (Zpos G)) by (apply IZR_lt; reflexivity).
  replace (IZR u) with (IZR (Zpos G) * (IZR u * / IZR (Zpos G))) by (field; lra).
  apply Rmult_le_compat_l; lra.
Qed.

Lemma frac_le : forall n s G x, IZR n <= IZR (Zpos s) * IZR (Zpos G) * x -> Q2R (Qmake n (s * G)) <= x.
Proof.
  intros n s G x H. unfold Q2R. cbn [Qnum Qden]. rewrite Pos2Z.inj_mul, mult_IZR.
  assert (0 < IZR (Zpos s)) by (apply IZR_lt; reflexivity).
  assert (0 < IZR (Zpos G)) by (apply IZR_lt; reflexivity).
  assert (0 < IZR (Zpos s) * IZR (Zpos G)) by (apply Rmult_lt_0_compat; assumption).
  replace x with ((IZR (Zpos s) * IZR (Zpos G) * x) * / (IZR (Zpos s) * IZR (Zpos G))) by (field; lra).
  apply Rmult_le_compat_r; [left; apply Rinv_0_lt_compat; assumption | exact H].
Qed.

Lemma frac_ge : forall n s G x, IZR (Zpos s) * IZR (Zpos G) * x <= IZR n -> x <= Q2R (Qmake n (s * G)).
Proof.
  intros n s G x H. unfold Q2R. cbn [Qnum Qden]. rewrite Pos2Z.inj_mul, mult_IZR.
  assert (0 < IZR (Zpos s)) by (apply IZR_lt; reflexivity).
  assert (0 < IZR (Zpos G)) by (apply IZR_lt; reflexivity).
  assert (0 < IZR (Zpos s) * IZR (Zpos G)) by (apply Rmult_lt_0_compat; assumption).
  replace x with ((IZR (Zpos s) * IZR (Zpos G) * x) * / (IZR (Zpos s) * IZR (Zpos G))) by (field; lra).
  apply Rmult_le_compat_r; [left; apply Rinv_0_lt_compat; assumption | exact H].
Qed.

(* s G (w . h) lies between the integer ends over the grid box *)
Lemma zdot_sound : forall w s ms G L U h lo hi, dms_ok s ms = true ->
  zdot w (zrows ms L U) = Some (lo, hi) -> in_box (qgrid G L) (qgrid G U) h ->
  IZR lo <= IZR (Zpos s) * IZR (Zpos G) * dotR w h <= IZR hi.
Proof.
  induction w as [|q w IH]; intros s ms G L U h lo hi Hms H Hh.
  - cbn in H. inversion H; subst. destruct h; cbn [dotR]; lra.
  - destruct L as [|l L]; destruct U as [|u U]; destruct h as [|v h]; cbn [qgrid map in_box] in Hh;
      try contradiction.
    + cbn in H. inversion H; subst. cbn [dotR]. lra.
    + destruct Hh as [[H1 H2] Hh]. cbn [zrows zdot] in H.
      destruct (zlook (Qden q) (zrow ms l u)) as [[a b]|] eqn:E1; [|discriminate].
      destruct (zdot w (zrows ms L U)) as [[lo' hi']|] eqn:E2; [|discriminate].
      specialize (IH s ms G L U h lo' hi' Hms E2 Hh).
      destruct (zlook_row ms l u _ a b E1) as [m [Hin [-> ->]]].
      pose proof (dms_in s ms _ m Hms Hin) as Hm. pose proof (dms_pos _ _ _ Hm) as Hp.
      apply IZR_lt in Hp. destruct q as [n d]. cbn [Qnum Qden] in *.
      pose proof (weight_R n d m s Hm) as E.
      apply grid_lo in H1. apply grid_hi in H2. cbn [dotR].
      replace (IZR (Zpos s) * IZR (Zpos G) * (Q2R (Qmake n d) * v + dotR w h))
        with (Q2R (Qmake n d) * IZR (Zpos s) * (IZR (Zpos G) * v) + IZR (Zpos s) * IZR (Zpos G) * dotR w h)
        by ring.
      rewrite E.
      assert (M1 : IZR m * IZR l <= IZR m * (IZR (Zpos G) * v)) by (apply Rmult_le_compat_l; lra).
      assert (M2 : IZR m * (IZR (Zpos G) * v) <= IZR m * IZR u) by (apply Rmult_le_compat_l; lra).
      destruct (Z.leb 0 n) eqn:En; inversion H; subst; rewrite !plus_IZR, !mult_IZR.
      * apply Z.leb_le in En. apply IZR_le in En.
        assert (IZR n * (IZR m * IZR l) <= IZR n * (IZR m * (IZR (Zpos G) * v))) by (apply Rmult_le_compat_l; lra).
        assert (IZR n * (IZR m * (IZR (Zpos G) * v)) <= IZR n * (IZR m * IZR u)) by (apply Rmult_le_compat_l; lra).
        split; lra.
      * apply Z.leb_gt in En. apply IZR_lt in En.
        assert (IZR n * (IZR m * IZR u) <= IZR n * (IZR m * (IZR (Zpos G) * v))) by (apply Rmult_le_compat_neg_l; lra).
        assert (IZR n * (IZR m * (IZR (Zpos G) * v)) <= IZR n * (IZR m * IZR l)) by (apply Rmult_le_compat_neg_l; lra).
        split; lra.
Qed.

Lemma zrange_sound : forall p s ms G L U h lo hi, dms_ok s ms = true ->
  zrange p s G (zrows ms L U) (zrow ms (Zpos G) (Zpos G)) = Some (lo, hi) ->
  in_box (qgrid G L) (qgrid G U) h -> Q2R lo <= pieceR p h <= Q2R hi.
Proof.
  intros p s ms G L U h lo hi Hms H Hh. unfold zrange in H.
  destruct (zdot (pw p) (zrows ms L U)) as [[lo' hi']|] eqn:E1; [|discriminate].
  destruct (zlook (Qden (pb p)) (zrow ms (Zpos G) (Zpos G))) as [[c c']|] eqn:E2; [|discriminate].
  inversion H; subst lo hi.
  pose proof (zdot_sound (pw p) s ms G L U h lo' hi' Hms E1 Hh) as [D1 D2].
  destruct (zlook_row ms _ _ _ c c' E2) as [m [Hin [-> _]]].
  pose proof (weight_R (Qnum (pb p)) (Qden (pb p)) m s (dms_in s ms _ m Hms Hin)) as E.
  replace (Qmake (Qnum (pb p)) (Qden (pb p))) with (pb p) in E by (destruct (pb p); reflexivity).
  assert (R : IZR (Zpos s) * IZR (Zpos G) * (dotR (pw p) h + Q2R (pb p)) =
              IZR (Zpos s) * IZR (Zpos G) * dotR (pw p) h + Q2R (pb p) * IZR (Zpos s) * IZR (Zpos G))
    by ring.
  unfold pieceR. split; [apply frac_le | apply frac_ge]; rewrite plus_IZR, !mult_IZR, R, E; lra.
Qed.

Lemma zgate_sound : forall p C s ms G L U h, dms_ok s ms = true ->
  zr_gated C (zrange p s G (zrows ms L U) (zrow ms (Zpos G) (Zpos G))) = true ->
  in_box (qgrid G L) (qgrid G U) h -> - Q2R C <= pieceR p h <= Q2R C.
Proof.
  intros p C s ms G L U h Hms H Hh. unfold zr_gated in H.
  destruct (zrange _ _ _ _ _) as [[lo hi]|] eqn:E; [|discriminate].
  apply andb_true_iff in H as [H1 H2].
  apply Qle_bool_R in H1. apply Qle_bool_R in H2. rewrite Q2R_opp in H1.
  pose proof (zrange_sound p s ms G L U h lo hi Hms E Hh). lra.
Qed.

Lemma zlayer_gates_sound : forall Lp C s ms G L U h, dms_ok s ms = true ->
  zlayer_gates_ok Lp C s G (zrows ms L U) (zrow ms (Zpos G) (Zpos G)) = true ->
  in_box (qgrid G L) (qgrid G U) h -> forall u p, In u Lp -> In p u -> - Q2R C <= pieceR p h <= Q2R C.
Proof.
  intros Lp C s ms G L U h Hms H Hh u p Hu Hp. unfold zlayer_gates_ok in H. rewrite forallb_forall in H.
  specialize (H u Hu). rewrite forallb_forall in H. exact (zgate_sound p C s ms G L U h Hms (H p Hp) Hh).
Qed.

Lemma zunits_ok_sound : forall Lp C s ms G L U G' L' U' h, dms_ok s ms = true ->
  zunits_ok Lp C s G (zrows ms L U) (zrow ms (Zpos G) (Zpos G)) G' L' U' = true ->
  in_box (qgrid G L) (qgrid G U) h ->
  (forall u p, In u Lp -> In p u -> - Q2R C <= pieceR p h <= Q2R C) /\
  in_box (qgrid G' L') (qgrid G' U') (layerR Lp h).
Proof.
  induction Lp as [|u Lp IH]; intros C s ms G L U G' [|l' L'] [|h' U'] h Hms H Hh; cbn [zunits_ok] in H;
    try discriminate; [split; [intros u p [] | exact I]|].
  apply andb_true_iff in H as [H H4]. apply andb_true_iff in H as [H H3]. apply andb_true_iff in H as [H1 H2].
  destruct (IH C s ms G L U G' L' U' h Hms H4 Hh) as [Gt B]. rewrite forallb_forall in H1, H3.
  split.
  - intros u' p [<-|Hu] Hp; [|exact (Gt u' p Hu Hp)].
    exact (zgate_sound p C s ms G L U h Hms (H1 _ (in_map _ _ _ Hp)) Hh).
  - cbn [layerR map in_box qgrid]. split; [|exact B].
    apply existsb_exists in H2 as [r [Hr Hl]]. apply in_map_iff in Hr as [p [<- Hp]]. split.
    + unfold zr_lo_ge in Hl.
      destruct (zrange p s G (zrows ms L U) (zrow ms (Zpos G) (Zpos G))) as [[lo hi]|] eqn:E; [|discriminate].
      apply Qle_bool_R in Hl. pose proof (zrange_sound p s ms G L U h lo hi Hms E Hh) as [D1 _].
      eapply Rle_trans; [|apply maxlR_ub; apply in_map_iff; exists p; split; [reflexivity | exact Hp]].
      lra.
    + apply maxlR_lub.
      * destruct u; [destruct Hp | discriminate].
      * intros w Hw. apply in_map_iff in Hw as [q [<- Hq]].
        specialize (H3 _ (in_map _ _ _ Hq)). unfold zr_hi_le in H3.
        destruct (zrange q s G (zrows ms L U) (zrow ms (Zpos G) (Zpos G))) as [[lo hi]|] eqn:E; [|discriminate].
        apply Qle_bool_R in H3. pose proof (zrange_sound q s ms G L U h lo hi Hms E Hh) as [_ D2]. lra.
Qed.

Lemma zgates_boxes_sound : forall Ls Cs Ss G L U rest h, zgates_boxes Ls Cs Ss ((G, L, U) :: rest) = true ->
  in_box (qgrid G L) (qgrid G U) h -> gates_hold Ls Cs h.
Proof.
  induction Ls as [|Lp Ls IH]; intros Cs Ss G L U rest h H Hh; [exact I|].
  cbn [zgates_boxes] in H. cbn [gates_hold]. apply andb_true_iff in H as [Hms H].
  destruct Ls as [|L' Ls'].
  - split; [exact (zlayer_gates_sound Lp _ _ _ G L U h Hms H Hh) | exact I].
  - destruct rest as [|[[G' L2] U2] rest']; [discriminate|].
    apply andb_true_iff in H as [H2 H3].
    destruct (zunits_ok_sound Lp _ _ _ G L U G' L2 U2 h Hms H2 Hh) as [Gt B].
    split; [exact Gt|]. exact (IH (tl Cs) (tl Ss) G' L2 U2 rest' (layerR Lp h) H3 B).
Qed.

Theorem zgates_ok_sound : forall net C D boxes Ss proofs x, zgates_ok net C D boxes Ss proofs = true ->
  length x = mo_dim net -> in_domain D x -> gates_hold (mo_layers net) C x.
Proof.
  intros net C D boxes Ss proofs x H Hd Hx. unfold zgates_ok in H.
  destruct boxes as [|[[G L] U] rest]; [discriminate|]. apply andb_true_iff in H as [H1 H2].
  exact (zgates_boxes_sound _ _ _ G L U rest x H2 (b0_sound D _ _ _ proofs x H1 Hd Hx)).
Qed.

(** The theorem as exported files use it: a well-shaped network, gate constants that integer
    boxes prove over the domain D, and every real point of D. *)
Theorem construct_zsound : forall net C D boxes Ss proofs,
  shaped net = true -> zgates_ok net C D boxes Ss proofs = true ->
  forall x, length x = mo_dim net -> in_domain D x -> transformerR (construct net C) x = maxoutR net x.
Proof.
  intros net C D boxes Ss proofs Hs Hg x Hd Hx.
  exact (construct_correct net C x Hs Hd (zgates_ok_sound net C D boxes Ss proofs x Hg Hd Hx)).
Qed.

Theorem zgates_ok_poly_sound : forall net C D gws boxes Ss iws x,
  zgates_ok_poly net C D gws boxes Ss iws = true -> in_domain D x -> gates_hold (mo_layers net) C x.
Proof.
  intros net C D gws boxes Ss iws x H Hx. unfold zgates_ok_poly in H.
  pose proof (dom_rows_sound D x Hx) as HP.
  destruct (mo_layers net) as [|Lp Ls]; [exact I|]. apply andb_true_iff in H as [H1 H2].
  cbn [gates_hold]. split.
  - intros u p Hu Hp. apply (pieces_gated_sound _ _ _ gws x H1 HP). apply in_concat. exists u. auto.
  - destruct Ls as [|L' Ls']; [exact I|]. destruct boxes as [|[[G L] U] rest]; [discriminate|].
    apply andb_true_iff in H2 as [H2 H3].
    exact (zgates_boxes_sound _ _ _ G L U rest _ H3 (image_poly_sound _ Lp _ _ iws x H2 HP)).
Qed.

Theorem construct_poly_zsound : forall net C D gws boxes Ss iws,
  shaped net = true -> zgates_ok_poly net C D gws boxes Ss iws = true ->
  forall x, length x = mo_dim net -> in_domain D x -> transformerR (construct net C) x = maxoutR net x.
Proof.
  intros net C D gws boxes Ss iws Hs Hg x Hd Hx.
  exact (construct_correct net C x Hs Hd (zgates_ok_poly_sound net C D gws boxes Ss iws x Hg Hx)).
Qed.
