(* Layerwise.v -- layer-by-layer certificates compose (docs/notes/certificates.md, item 5), as the Python
   kernel's exactmax/kernel/layerwise.py checks them:

     layerwise_sound : layerwise_ok net tf D c = true ->
       forall x, length x = mo_dim net -> in_domain D x -> transformerR tf x = maxoutR net x.

   For a Maxout network with layers Phi_0 .. Phi_{D-1} (the last one followed by the output
   map) and a Transformer with three sub-layers per Maxout layer, write
   encode(h)_t = place(h) + p_t for the tokens that hold h in their first coordinates on top
   of the positional vectors p_t.  The certificate gives boxes B_0 .. B_{D-1} and, per layer,
   claims (groups of outputs with a split tree over the box).  The boolean check (over Q):

   (E) the embedding is place, every position has d_m coordinates;
   (R) the read-out returns the output coordinates of encode(y) (checked symbolically:
       the read-out of the symbolic tokens encode(y) is y_i, expression for expression);
   (B) B_0 contains the domain (box: compare bounds; polyhedron: Farkas proofs of the upper
       and lower bound of every coordinate), and B_{l+1} contains the exact interval image
       of B_l under Phi_l;
   (B') or, with lw_first (first_ok), the first layer's claims are checked over the domain's
       own rows instead of B_0, and B_1 contains h^1 of the domain by Farkas proofs over
       those rows: per unit, one piece is >= the lower bound, every piece <= the upper
       bound (image_poly_ok, image_poly_sound, first_ok_sound);
   (S) per layer l, the program of the three sub-layers fed encode(h) and the program of
       encode(Phi_l(h)) (built node for node as program_of_segment and
       program_of_encoded_layer of exactmax/kernel/program.py) agree on B_l: every output is
       in a claim, and every claim's tree is accepted by check_cert on both programs
       restricted to the claim's outputs.

   The composition: by induction over the layers, for x in the domain the state after
   group l is encode(h^{l+1}(x)) and h^{l+1}(x) lies in B_{l+1}; the read-out then returns
   N(x).  Only the standard axioms of Coq's Reals are used. *)

From Coq Require Import QArith Qreals Reals Lra Lia List Bool.
From ExactMax Require Import Checker Sound Build Maxout Transformer.
Import ListNotations.

(* ------------------------------------------------------------------ *)
(** * The two programs of one layer (exactmax/kernel/program.py) *)

Local Open Scope Q_scope.

(* the d_m x n matrix that writes h in Q^n into coordinates 0 .. n-1 (program.py, place) *)
Definition place (n dm : nat) : mat := map (fun i => basis n i 1) (seq 0 dm).

Definition inputs (n : nat) : list expr := map var_e (seq 0 n).

(* the tokens place(h) + p_t as expressions over h in Q^n (program.py, _embedded) *)
Definition seg_embed (n dm : nat) (pos : list (list Q)) : list (list expr) :=
  map (fun p => map (fun rc => combine_e (fst rc) (inputs n) (snd rc)) (combine (place n dm) p)) pos.

(* program_of_segment: the sub-layers subs applied to place(h) + p_t; every coordinate of
   every token is an output (token t, coordinate i at t d_m + i) *)
Definition seg_program (dm n : nat) (pos : list (list Q)) (subs : list sublayer) : option prog :=
  match bind (foldM (fun X s => sub_tokens dm s X) subs (seg_embed n dm pos))
             (fun X => lift (nodes_of (concat X))) [] with
  | Some (st, ks) => Some {| p_nodes := st; p_outs := ks |}
  | None => None
  end.

Definition out_exprs (out : option (mat * list Q)) (us : list expr) : list expr :=
  match out with
  | None => us
  | Some (W, b) => map (fun r => combine_e (fst r) us (snd r)) (combine W b)
  end.

(* place(u) + p_t, token by token: coordinate i is u_i + p_t,i, or p_t,i beyond u *)
Definition enc_exprs (dm : nat) (pos : list (list Q)) (us : list expr) : list expr :=
  concat (map (fun p => map (fun i => add_const (nth i us zero_e) (nth i p 0)) (seq 0 dm)) pos).

(* program_of_encoded_layer: encode(Phi(h)) for h in Q^n, Phi the Maxout layer L followed by
   the output map out (the last layer) or not *)
Definition enc_layer_program (L : list (list piece)) (out : option (mat * list Q))
           (n dm : nat) (pos : list (list Q)) : prog :=
  let '(st, us) := layer_of L (inputs n) [] in
  let '(st', ks) := nodes_of (enc_exprs dm pos (out_exprs out us)) st in
  {| p_nodes := st'; p_outs := ks |}.

(* ------------------------------------------------------------------ *)
(** * The boolean check *)

(* (R): expression e is exactly the input y_i *)
Definition is_var (e : expr) (i : nat) : bool :=
  match e with
  | ([(j, a)], c, []) => Nat.eqb i j && Qeq_bool a 1 && Qeq_bool c 0
  | _ => false
  end.

Definition readout_ok (tf : transformer) (m : nat) : bool :=
  forall2b is_var (readout_exprs tf (seg_embed m (tf_dm tf) (tf_pos tf))) (seq 0 m).

(* (B), the domain *)
Inductive domain := DBox (lo hi : list Q) | DPoly (A : list (list Q)) (b : list Q).

(* [lo, hi] lies in [lo', hi'] *)
Definition box_in (lo hi lo' hi' : list Q) : bool :=
  forall2b Qle_bool lo' lo && forall2b Qle_bool hi hi'.

(* coordinate i, i+1, ...: P entails x_i <= hi_i and x_i >= lo_i (the rows of rows_of_box) *)
Fixpoint poly_box_ok (P : list con) (d i : nat) (lo hi : list Q) (ws : list (farkas * farkas))
  : bool :=
  match lo, hi, ws with
  | [], [], [] => true
  | l :: lo', u :: hi', (wu, wl) :: ws' =>
      entails P (basis d i (-1), u) false wu && entails P (basis d i 1, - l) false wl &&
      poly_box_ok P d (S i) lo' hi' ws'
  | _, _, _ => false
  end.

Definition b0_ok (D : domain) (d : nat) (lo hi : list Q) (ws : list (farkas * farkas)) : bool :=
  (length lo =? d)%nat && (length hi =? d)%nat &&
  match D with
  | DBox dlo dhi => box_in dlo dhi lo hi
  | DPoly A b => poly_box_ok (rows_of_poly A b) d 0 lo hi ws
  end.

(* (B), the layers: the exact range of w . h over the box, coordinate by coordinate *)
Fixpoint dot_lo (w lo hi : list Q) : Q :=
  match w, lo, hi with
  | a :: w', l :: lo', u :: hi' => (if Qle_bool 0 a then a * l else a * u) + dot_lo w' lo' hi'
  | _, _, _ => 0
  end.

Fixpoint dot_hi (w lo hi : list Q) : Q :=
  match w, lo, hi with
  | a :: w', l :: lo', u :: hi' => (if Qle_bool 0 a then a * u else a * l) + dot_hi w' lo' hi'
  | _, _, _ => 0
  end.

(* [lo', hi'] contains the image of [lo, hi] under the layer: for unit i, some piece's lower
   end is >= lo'_i (the max of the lower ends, as interval_image) and every piece's upper
   end is <= hi'_i *)
Fixpoint image_ok (L : list (list piece)) (lo hi lo' hi' : list Q) : bool :=
  match L, lo', hi' with
  | [], [], [] => true
  | u :: L', l' :: lo'', h' :: hi'' =>
      existsb (fun p => Qle_bool l' (dot_lo (pw p) lo hi + pb p)) u &&
      forallb (fun p => Qle_bool (dot_hi (pw p) lo hi + pb p) h') u &&
      image_ok L' lo hi lo'' hi''
  | _, _, _ => false
  end.

(* (S): a claim is a list of outputs and a split tree proving them *)
Record claim := { cl_outs : list nat; cl_tree : tree }.

Definition restrict (p : prog) (os : list nat) : prog :=
  {| p_nodes := p_nodes p; p_outs := map (fun o => nth o (p_outs p) 0%nat) os |}.

Definition claim_ok (f g : prog) (dom : list con) (c : claim) : bool :=
  forallb (fun o => o <? length (p_outs f))%nat (cl_outs c) &&
  check_cert (restrict f (cl_outs c)) (restrict g (cl_outs c)) dom (cl_tree c).

Definition covered (n : nat) (cs : list claim) : bool :=
  forallb (fun o => existsb (fun c => existsb (Nat.eqb o) (cl_outs c)) cs) (seq 0 n).

Definition layer_ok (f g : prog) (dom : list con) (cs : list claim) : bool :=
  (length (p_outs f) =? length (p_outs g))%nat && forallb (claim_ok f g dom) cs &&
  covered (length (p_outs f)) cs.

Definition out_len_ok (L : list (list piece)) (out : option (mat * list Q)) (m : nat) : bool :=
  match out with
  | None => (length L =? m)%nat
  | Some (W, b) => (length W =? m)%nat && (length b =? m)%nat
  end.

(* layer by layer: the box of the layer's input, the layer's claims, the next box *)
Fixpoint layers_ok (dm : nat) (pos : list (list Q)) (out : option (mat * list Q)) (m : nat)
         (Ls : list (list (list piece))) (subs : list sublayer)
         (boxes : list (list Q * list Q)) (cls : list (list claim)) : bool :=
  match Ls, boxes, cls with
  | L :: Ls', (lo, hi) :: boxes', C :: cls' =>
      match Ls', boxes', cls' with
      | [], [], [] =>
          (length subs =? 3)%nat && out_len_ok L out m &&
          match seg_program dm (length lo) pos subs with
          | Some g => layer_ok (enc_layer_program L out (length lo) dm pos) g (rows_of_box lo hi) C
          | None => false
          end
      | _ :: _, (lo', hi') :: _, _ :: _ =>
          image_ok L lo hi lo' hi' &&
          match seg_program dm (length lo) pos (firstn 3 subs) with
          | Some g => layer_ok (enc_layer_program L None (length lo) dm pos) g (rows_of_box lo hi) C
          | None => false
          end &&
          layers_ok dm pos out m Ls' (skipn 3 subs) boxes' cls'
      | _, _, _ => false
      end
  | _, _, _ => false
  end.

(* (B'), for a Transformer: the first layer's claims over the domain's own rows (as the
   kernel numbers them), and B_1 contains h^1 of every point of the domain because, per unit,
   one piece is >= lo'_i and every piece is <= hi'_i over those rows (Farkas proofs) *)
Definition dom_rows (D : domain) : list con :=
  match D with DBox lo hi => rows_of_box lo hi | DPoly A b => rows_of_poly A b end.

Definition no_piece : piece := {| pw := []; pb := 0 |}.

Fixpoint image_poly_ok (P : list con) (L : list (list piece)) (lo' hi' : list Q)
         (ws : list (nat * farkas * list farkas)) : bool :=
  match L, lo', hi', ws with
  | [], [], [], [] => true
  | u :: L', l' :: lo'', h' :: hi'', (j, wl, wus) :: ws' =>
      let p := nth j u no_piece in
      (j <? length u)%nat &&
      entails P (asub (pw p, pb p) ([], l')) false wl &&
      forall2b (fun q wu => entails P (asub ([], h') (pw q, pb q)) false wu) u wus &&
      (length wus =? length u)%nat &&
      image_poly_ok P L' lo'' hi'' ws'
  | _, _, _, _ => false
  end.

Definition first_ok (dm : nat) (pos : list (list Q)) (out : option (mat * list Q)) (m d : nat)
           (P : list con) (Ls : list (list (list piece))) (subs : list sublayer)
           (boxes : list (list Q * list Q)) (cls : list (list claim))
           (ws : list (nat * farkas * list farkas)) : bool :=
  match Ls, boxes, cls with
  | [L], [_], [C] =>
      (length subs =? 3)%nat && out_len_ok L out m && (length ws =? 0)%nat &&
      match seg_program dm d pos subs with
      | Some g => layer_ok (enc_layer_program L out d dm pos) g P C
      | None => false
      end
  | L :: ((_ :: _) as Ls'), _ :: (((lo', hi') :: _) as boxes'), C :: cls' =>
      image_poly_ok P L lo' hi' ws &&
      match seg_program dm d pos (firstn 3 subs) with
      | Some g => layer_ok (enc_layer_program L None d dm pos) g P C
      | None => false
      end &&
      layers_ok dm pos out m Ls' (skipn 3 subs) boxes' cls'
  | _, _, _ => false
  end.

Record lw_cert := {
  lw_boxes : list (list Q * list Q);          (* B_0 .. B_{D-1} *)
  lw_box_proofs : list (farkas * farkas);     (* (upper, lower) per coordinate of B_0, for a
                                                 polyhedral domain; [] for a box *)
  lw_claims : list (list claim);              (* per layer *)
  lw_first : bool;                            (* (B'): the first layer over the domain *)
  lw_image : list (nat * farkas * list farkas)   (* (B'): per unit of the first layer, the
                                                 lower piece, its proof, the upper proofs *)
}.

(* how exported files write a layerwise certificate: after the tables of Checker.rd_tables,
   the boxes (their number, and each its lower and upper bounds as lists of rationals), the
   Farkas proofs of B_0 (their number, and each its upper and lower proofs' indices), the
   claims (the number of layers, and each layer's claims: outputs, then the tree's index),
   then rule (B'): a flag (1: the first layer over the domain's rows, 0: not) and the image
   proofs (their number, and per unit of the first layer its lower piece, the index of that
   piece's Farkas proof, and the list of the indices of the upper proofs, one per piece; the
   exporter writes 0 0 without (B')).  Farkas proofs over the domain read its rows in the
   kernel's order (dom_rows), unscaled. *)
Definition rd_box : reader (list Q * list Q) :=
  fun l => let '(lo, l1) := rd_list rd_Q l in let '(hi, l2) := rd_list rd_Q l1 in ((lo, hi), l2).

Definition rd_claim (T : PArray.array tree) : reader claim :=
  fun l => let '(os, l1) := rd_list rd_nat l in let '(t, l2) := rd_idx l1 in
           ({| cl_outs := os; cl_tree := PArray.get T t |}, l2).

Definition unpack_lw (a : PArray.array Uint63.int) : lw_cert :=
  let '(tb, l) := rd_tables (unpack a) in
  let F := tb_farkas tb in
  let '(bs, l1) := rd_list rd_box l in
  let '(ps, l2) := rd_list (fun l => let '(u, l1) := rd_idx l in let '(o, l2) := rd_idx l1 in
                                     ((PArray.get F u, PArray.get F o), l2)) l1 in
  let '(cs, l3) := rd_list (rd_list (rd_claim (tb_trees tb))) l2 in
  let '(first, l4) := rd_nat l3 in
  let '(im, _) := rd_list (fun l => let '(j, l1) := rd_nat l in let '(o, l2) := rd_idx l1 in
                                    let '(us, l3) := rd_list rd_idx l2 in
                                    ((j, PArray.get F o, map (PArray.get F) us), l3)) l4 in
  {| lw_boxes := bs; lw_box_proofs := ps; lw_claims := cs; lw_first := Nat.eqb first 1;
     lw_image := im |}.

Definition layerwise_ok (net : maxout) (tf : transformer) (D : domain) (c : lw_cert) : bool :=
  let dm := tf_dm tf in
  let pos := tf_pos tf in
  let d := mo_dim net in
  let m := length (tf_rW tf) in
  (tf_dim tf =? d)%nat && forall2b (forall2b Qeq_bool) (tf_emb tf) (place d dm) &&
  forallb (fun p => length p =? dm)%nat pos && readout_ok tf m &&
  match lw_boxes c with
  | (lo, hi) :: _ =>
      b0_ok D d lo hi (lw_box_proofs c) &&
      if lw_first c
      then first_ok dm pos (mo_out net) m d (dom_rows D) (mo_layers net) (tf_subs tf)
                    (lw_boxes c) (lw_claims c) (lw_image c)
      else layers_ok dm pos (mo_out net) m (mo_layers net) (tf_subs tf) (lw_boxes c)
                     (lw_claims c)
  | [] => false
  end.

(* ------------------------------------------------------------------ *)
(** * Semantics of encoded states *)

Local Open Scope R_scope.

Definition in_domain (D : domain) (x : list R) : Prop :=
  match D with DBox lo hi => in_box lo hi x | DPoly A b => in_poly A b x end.

Definition phiR (out : option (mat * list Q)) (h : list R) : list R :=
  match out with None => h | Some (W, b) => affineR W b h end.

(* encode(h), coordinate by coordinate *)
Definition encR (dm : nat) (pos : list (list Q)) (h : list R) : list (list R) :=
  map (fun p => map (fun i => nth i h 0 + Q2R (nth i p 0%Q)) (seq 0 dm)) pos.

(* encode(h), as the Transformer's embedding computes it *)
Definition embR (dm : nat) (pos : list (list Q)) (h : list R) : list (list R) :=
  map (fun p => affR (place (length h) dm) p h) pos.

(* ------------------------------------------------------------------ *)
(** * Small facts *)

Lemma nth_map_d : forall {A B} (f : A -> B) (l : list A) i d d', f d = d' ->
  nth i (map f l) d' = f (nth i l d).
Proof.
  intros A B f l. induction l as [|a l IH]; intros [|i] d d' H; cbn; auto.
Qed.

Lemma evalE_add_const : forall e c x env, evalE (add_const e c) x env = evalE e x env + Q2R c.
Proof. intros [[xs c0] ts] c x env. unfold add_const, evalE. rewrite Q2R_red, Q2R_plus. lra. Qed.

Lemma evalE_zero : forall x env, evalE zero_e x env = 0.
Proof. intros. unfold zero_e, evalE, sumsp. cbn. rewrite RMicromega.Q2R_0. lra. Qed.

Lemma Q2R_1' : Q2R 1 = 1.
Proof. unfold Q2R. simpl. lra. Qed.

Lemma basis_overflow : forall n i v, (n <= i)%nat -> basis n i v = repeat 0%Q n.
Proof.
  induction n as [|n IH]; intros [|i] v H; cbn; try reflexivity; try lia.
  f_equal. apply IH. lia.
Qed.

Lemma dot_place : forall n i (h : list R), length h = n -> dotR (basis n i 1) h = nth i h 0.
Proof.
  intros n i h Hn. destruct (Nat.lt_ge_cases i n) as [Hi|Hi].
  - rewrite dotR_basis by exact Hi. rewrite Q2R_1'. lra.
  - rewrite basis_overflow by exact Hi. rewrite dotR_repeat0. rewrite nth_overflow by lia. reflexivity.
Qed.

Lemma affR_place_seq : forall (h : list R) p s,
  map (fun rc => dotR (fst rc) h + Q2R (snd rc))
      (combine (map (fun i => basis (length h) i 1) (seq s (length p))) p) =
  map (fun i => nth i h 0 + Q2R (nth (i - s) p 0%Q)) (seq s (length p)).
Proof.
  intros h p. induction p as [|c p IH]; intros s; [reflexivity|].
  cbn [length seq map combine fst snd]. rewrite dot_place by reflexivity. rewrite Nat.sub_diag.
  cbn [nth]. f_equal. rewrite IH. apply map_ext_in. intros i Hi. apply in_seq in Hi.
  replace (i - s)%nat with (S (i - S s)) by lia. reflexivity.
Qed.

Lemma embR_encR : forall dm pos h, Forall (fun p => length p = dm) pos -> embR dm pos h = encR dm pos h.
Proof.
  intros dm pos h H. unfold embR, encR. apply map_ext_in. intros p Hp.
  rewrite Forall_forall in H. specialize (H p Hp). subst dm. unfold affR, place.
  rewrite affR_place_seq. apply map_ext. intros i. rewrite Nat.sub_0_r. reflexivity.
Qed.

Lemma Forall2_concat : forall {A B} (P : A -> B -> Prop) l1 l2, Forall2 (Forall2 P) l1 l2 ->
  Forall2 P (concat l1) (concat l2).
Proof.
  intros A B P l1 l2 H. induction H as [|a b l1 l2 Hab H IH]; cbn; [constructor|].
  apply Forall2_app; assumption.
Qed.

Lemma length_concat_le : forall (A : list (list R)) dm, Forall (fun t => (length t <= dm)%nat) A ->
  (length (concat A) <= length A * dm)%nat.
Proof.
  intros A dm H. induction H as [|a A Ha H IH]; cbn; [lia|]. rewrite app_length. lia.
Qed.

Lemma length_concat_eq : forall (A : list (list R)) dm, Forall (fun t => length t = dm) A ->
  length (concat A) = (length A * dm)%nat.
Proof.
  intros A dm H. induction H as [|a A Ha H IH]; cbn; [lia|]. rewrite app_length. lia.
Qed.

Lemma app_inv_len : forall (a b l l' : list R), length a = length b -> a ++ l = b ++ l' ->
  a = b /\ l = l'.
Proof.
  induction a as [|u a IH]; intros [|v b] l l' Hl H; cbn in *; try discriminate; [auto|].
  inversion H; subst. destruct (IH b l l' ltac:(lia) H2) as [-> ->]. auto.
Qed.

(* tokens of at most d_m coordinates equal, flattened, to tokens of exactly d_m *)
Lemma concat_shape : forall dm (A B : list (list R)), Forall (fun t => (length t <= dm)%nat) A ->
  Forall (fun t => length t = dm) B -> length A = length B -> concat A = concat B -> A = B.
Proof.
  intros dm A. induction A as [|a A IH]; intros [|b B] HA HB HL HC; cbn in *; try discriminate;
    [reflexivity|].
  inversion HA as [|? ? Ha HA']; inversion HB as [|? ? Hb HB']; subst.
  pose proof (length_concat_le A _ HA') as L1. pose proof (length_concat_eq B _ HB') as L2.
  pose proof (f_equal (@length R) HC) as L. rewrite !app_length in L.
  assert (Hab : length a = length b).
  { remember (length A * length b)%nat as k1. remember (length B * length b)%nat as k2.
    assert (k1 = k2) by (subst; f_equal; lia). lia. }
  destruct (app_inv_len a b _ _ Hab HC) as [-> Hr]. f_equal. apply IH; auto.
Qed.

(* every sub-layer maps tokens one by one, and never lengthens a token *)
Lemma vplus_length : forall u v, (length (vplus u v) <= length u)%nat.
Proof. intros. unfold vplus. rewrite map_length, combine_length. lia. Qed.

Lemma subR_shape : forall dm s X, exists F, subR dm s X = map F X /\
  forall t, (length (F t) <= length t)%nat.
Proof.
  intros dm [W1 b1 W2 b2 | hs] X; cbn [subR].
  - exists (ffR W1 b1 W2 b2). split; [reflexivity|]. intros t. apply vplus_length.
  - eexists. split; [unfold attR; reflexivity|]. intros t. apply vplus_length.
Qed.

Lemma subs_shape : forall dm subs X, Forall (fun t => (length t <= dm)%nat) X ->
  Forall (fun t => (length t <= dm)%nat) (fold_left (fun X s => subR dm s X) subs X) /\
  length (fold_left (fun X s => subR dm s X) subs X) = length X.
Proof.
  intros dm subs. induction subs as [|s subs IH]; intros X H; cbn [fold_left]; [auto|].
  destruct (subR_shape dm s X) as [F [E HF]].
  assert (H' : Forall (fun t => (length t <= dm)%nat) (subR dm s X)).
  { rewrite E. apply Forall_map. eapply Forall_impl; [|exact H]. intros t Ht.
    specialize (HF t). cbn beta in *. lia. }
  destruct (IH _ H') as [H1 H2]. split; [exact H1|]. rewrite H2, E, map_length. reflexivity.
Qed.

Lemma embR_shape : forall dm pos h, Forall (fun t => (length t <= dm)%nat) (embR dm pos h).
Proof.
  intros. unfold embR. apply Forall_map. apply Forall_forall. intros p _.
  unfold affR, place. rewrite map_length, combine_length, map_length, seq_length. lia.
Qed.

Lemma encR_shape : forall dm pos h, Forall (fun t => length t = dm) (encR dm pos h).
Proof.
  intros. unfold encR. apply Forall_map. apply Forall_forall. intros p _.
  rewrite map_length, seq_length. reflexivity.
Qed.

(* ------------------------------------------------------------------ *)
(** * The two translations are correct *)

Lemma ev_seg_embed : forall n dm pos h st, length h = n ->
  Forall2 (Forall2 (ev h st)) (seg_embed n dm pos) (embR dm pos h).
Proof.
  intros n dm pos h st Hn. unfold seg_embed, embR, inputs. subst n.
  induction pos as [|p pos IH]; cbn [map]; constructor; [|exact IH].
  apply ev_aff. apply ev_inputs.
Qed.

Theorem seg_program_correct : forall dm n pos subs p h, seg_program dm n pos subs = Some p ->
  length h = n -> outsR p h = concat (fold_left (fun X s => subR dm s X) subs (embR dm pos h)).
Proof.
  intros dm n pos subs p h Hp Hn. unfold seg_program in Hp.
  pose proof (ev_seg_embed n dm pos h [] Hn) as H0.
  set (Y := fold_left (fun X s => subR dm s X) subs (embR dm pos h)).
  assert (S' : forall X, spec (fun st => Forall2 (Forall2 (ev h st)) X Y)
                           (lift (nodes_of (concat X))) (fun st ks => Forall2 (nv h st) ks (concat Y))).
  { intros X st Hw H. exact (spec_nodes_of h _ _ st Hw (Forall2_concat _ _ _ H)). }
  pose proof (spec_bind _ _ _ (fun X => lift (nodes_of (concat X))) _
                (spec_subs h dm subs (seg_embed n dm pos) (embR dm pos h)) S') as S.
  specialize (S [] (fun k Hk j Hj => ltac:(simpl in Hk; lia)) H0).
  destruct (bind _ _ []) as [[st ks]|]; [|discriminate]. inversion Hp; subst p.
  destruct S as [_ [_ S]]. unfold outsR. cbn [p_nodes p_outs].
  destruct (nv_list h st ks _ S) as [_ E]. exact E.
Qed.

Theorem enc_layer_correct : forall L out n dm pos h, length h = n ->
  outsR (enc_layer_program L out n dm pos) h = concat (encR dm pos (phiR out (layerR L h))).
Proof.
  intros L out n dm pos h Hn. unfold enc_layer_program.
  pose proof (layer_of_sound L (inputs n) [] h h (inputs_hold n h Hn)) as M.
  destruct (layer_of L (inputs n) []) as [st us]. destruct M as [_ [Hw [Hb Hv]]].
  assert (Ho : Forall (ebelow (length st)) (out_exprs out us) /\
               map (fun e => evalE e h (runR st h [])) (out_exprs out us) = phiR out (layerR L h)).
  { unfold out_exprs, phiR. destruct out as [[W b]|]; [|split; assumption]. split.
    - apply Forall_map. apply Forall_forall. intros r _. apply ebelow_combine. exact Hb.
    - unfold affineR. rewrite map_map. apply map_ext. intros r. rewrite evalE_combine, Hv. reflexivity. }
  destruct Ho as [Hob Hov]. set (os := out_exprs out us) in *.
  assert (Heb : Forall (ebelow (length st)) (enc_exprs dm pos os)).
  { unfold enc_exprs. apply Forall_forall. intros e He. apply in_concat in He as [l [Hl He]].
    apply in_map_iff in Hl as [p [<- _]]. apply in_map_iff in He as [i [<- _]].
    destruct (Nat.lt_ge_cases i (length os)) as [Hi|Hi].
    - pose proof (proj1 (Forall_forall _ _) Hob (nth i os zero_e) (nth_In _ _ Hi)) as B.
      destruct (nth i os zero_e) as [[xs c] ts]. exact B.
    - rewrite nth_overflow by exact Hi. cbn. constructor. }
  pose proof (nodes_of_sound _ st h Hw Heb) as N. destruct (nodes_of _ st) as [st' ks].
  destruct N as [_ [_ [_ V]]]. unfold outsR. cbn [p_nodes p_outs]. rewrite V.
  unfold enc_exprs, encR. rewrite concat_map, map_map. f_equal. apply map_ext. intros p.
  rewrite map_map. apply map_ext. intros i. rewrite evalE_add_const. f_equal.
  rewrite <- Hov. symmetry.
  apply (nth_map_d (fun e => evalE e h (runR st h [])) os i zero_e 0). apply evalE_zero.
Qed.

(* ------------------------------------------------------------------ *)
(** * The checks are sound *)

Lemma is_var_sound : forall y es vs is, Forall2 (ev y []) es vs -> forall2b is_var es is = true ->
  vs = map (fun i => nth i y 0) is.
Proof.
  intros y es vs is H. revert is. induction H as [|e v es vs [_ He] H IH]; intros [|i is] Hb;
    cbn [forall2b] in Hb; try discriminate; [reflexivity|].
  apply andb_true_iff in Hb as [H1 H2]. cbn [map]. rewrite <- (IH is H2). f_equal.
  rewrite <- He. unfold val. destruct e as [[xs c] ts].
  destruct xs as [|[j a] [|? ?]]; destruct ts; cbn [is_var] in H1; try discriminate.
  apply andb_true_iff in H1 as [H1 Hc]. apply andb_true_iff in H1 as [Hi Ha].
  apply Nat.eqb_eq in Hi. subst j. apply Qeq_bool_eq, Qeq_eqR in Ha, Hc.
  unfold evalE, sumsp. cbn. rewrite Ha, Hc, Q2R_1', RMicromega.Q2R_0. lra.
Qed.

Lemma readout_ok_sound : forall tf m y, readout_ok tf m = true -> length y = m ->
  readoutR tf (embR (tf_dm tf) (tf_pos tf) y) = y.
Proof.
  intros tf m y H Hm. pose proof (ev_readout y tf [] _ _ (ev_seg_embed m (tf_dm tf) (tf_pos tf) y [] Hm)) as R.
  rewrite (is_var_sound y _ _ _ R H). subst m. exact (map_nth_seq_from y []).
Qed.

Lemma dotR_eqb : forall u v (h : list R), forall2b Qeq_bool u v = true -> dotR u h = dotR v h.
Proof.
  induction u as [|a u IH]; intros [|b v] h H; cbn [forall2b] in H; try discriminate; [reflexivity|].
  apply andb_true_iff in H as [H1 H2]. apply Qeq_bool_eq, Qeq_eqR in H1.
  destruct h as [|c h]; cbn [dotR]; [reflexivity|]. rewrite H1, (IH v h H2). reflexivity.
Qed.

Lemma affR_eqb : forall M N p (h : list R), forall2b (forall2b Qeq_bool) M N = true ->
  affR M p h = affR N p h.
Proof.
  induction M as [|r M IH]; intros [|s N] p h H; cbn [forall2b] in H; try discriminate; [reflexivity|].
  apply andb_true_iff in H as [H1 H2]. destruct p as [|c p]; [reflexivity|].
  unfold affR in *. cbn [combine map fst snd]. rewrite (dotR_eqb r s h H1). f_equal. apply IH. exact H2.
Qed.

Lemma box_in_sound : forall lo hi lo' hi' x, box_in lo hi lo' hi' = true -> in_box lo hi x ->
  in_box lo' hi' x.
Proof.
  unfold box_in. induction lo as [|l lo IH]; intros [|u hi] [|l' lo'] [|u' hi'] [|v x] H Hx;
    cbn [in_box forall2b] in *; try discriminate; try contradiction; try tauto;
    repeat match goal with H : (_ && _) = true |- _ => apply andb_true_iff in H as [? ?] end;
    try discriminate.
  match goal with
  | Ha : Qle_bool l' l = true, Hb : Qle_bool u u' = true |- _ =>
      apply Qle_bool_R in Ha; apply Qle_bool_R in Hb
  end.
  destruct Hx as [Hv Hx]. split; [lra|].
  apply (IH hi); [|exact Hx]. apply andb_true_iff. split; assumption.
Qed.

Lemma skipn_nth : forall (x : list R) i, (i < length x)%nat -> skipn i x = nth i x 0 :: skipn (S i) x.
Proof.
  induction x as [|a x IH]; intros [|i] H; cbn in *; try lia; [reflexivity|]. apply IH. lia.
Qed.

Lemma poly_box_sound : forall P d x lo hi ws i, poly_box_ok P d i lo hi ws = true -> satR P x ->
  length x = d -> (i + length lo = d)%nat -> in_box lo hi (skipn i x).
Proof.
  intros P d x lo. induction lo as [|l lo IH]; intros [|u hi] [|[wu wl] ws] i H HP Hd Hi;
    cbn [poly_box_ok] in H; try discriminate.
  - cbn [length] in Hi. rewrite skipn_all2 by lia. exact I.
  - apply andb_true_iff in H as [H H3]. apply andb_true_iff in H as [H1 H2].
    cbn [length] in Hi. rewrite skipn_nth by lia. cbn [in_box]. split; [|apply (IH hi ws (S i)); auto; lia].
    pose proof (entails_ge _ _ _ x HP H1) as U. pose proof (entails_ge _ _ _ x HP H2) as V.
    unfold evalR in U, V. cbn [fst snd] in U, V. rewrite dotR_basis in U, V by lia.
    rewrite Q2R_m1 in U. rewrite Q2R_opp, Q2R_1' in V. lra.
Qed.

Lemma b0_sound : forall D d lo hi ws x, b0_ok D d lo hi ws = true -> length x = d -> in_domain D x ->
  in_box lo hi x.
Proof.
  intros D d lo hi ws x H Hd Hx. unfold b0_ok in H.
  apply andb_true_iff in H as [H H3]. apply andb_true_iff in H as [H1 H2].
  apply Nat.eqb_eq in H1. destruct D as [dlo dhi | A b]; cbn [in_domain] in Hx.
  - exact (box_in_sound _ _ _ _ _ H3 Hx).
  - exact (poly_box_sound _ d x lo hi ws 0 H3 (poly_rows_sound A b x Hx) Hd ltac:(lia)).
Qed.

Lemma dot_range : forall w lo hi h, in_box lo hi h ->
  Q2R (dot_lo w lo hi) <= dotR w h <= Q2R (dot_hi w lo hi).
Proof.
  induction w as [|a w IH]; intros lo hi h H.
  - cbn. destruct h; cbn; rewrite RMicromega.Q2R_0; lra.
  - destruct lo as [|l lo]; destruct hi as [|u hi]; destruct h as [|v h]; cbn [in_box] in H;
      try contradiction.
    + cbn. rewrite RMicromega.Q2R_0. lra.
    + destruct H as [[H1 H2] H]. specialize (IH lo hi h H). cbn [dot_lo dot_hi dotR].
      rewrite !Q2R_plus. destruct (Qle_bool 0 a) eqn:E.
      * apply Qle_bool_R in E. rewrite RMicromega.Q2R_0 in E. rewrite !Q2R_mult.
        assert (Q2R a * Q2R l <= Q2R a * v) by (apply Rmult_le_compat_l; lra).
        assert (Q2R a * v <= Q2R a * Q2R u) by (apply Rmult_le_compat_l; lra). lra.
      * apply Qnle_bool_R in E. rewrite RMicromega.Q2R_0 in E. rewrite !Q2R_mult.
        assert (Q2R a * Q2R u <= Q2R a * v) by (apply Rmult_le_compat_neg_l; lra).
        assert (Q2R a * v <= Q2R a * Q2R l) by (apply Rmult_le_compat_neg_l; lra). lra.
Qed.

Lemma maxlR_ub : forall l w, In w l -> w <= maxlR l.
Proof. intros [|a l] w H; [destruct H|]. exact (maxlR_aux_ub l a w H). Qed.

Lemma maxlR_lub : forall l v, l <> [] -> (forall w, In w l -> w <= v) -> maxlR l <= v.
Proof. intros [|a l] v Hl H; [congruence|]. exact (maxlR_aux_lub l a v H). Qed.

Lemma image_sound : forall L lo hi lo' hi' h, image_ok L lo hi lo' hi' = true -> in_box lo hi h ->
  in_box lo' hi' (layerR L h).
Proof.
  induction L as [|u L IH]; intros lo hi [|l' lo'] [|h' hi'] h H Hh; cbn [image_ok] in H;
    try discriminate; [exact I|].
  apply andb_true_iff in H as [H H3]. apply andb_true_iff in H as [H1 H2].
  cbn [layerR map in_box]. split; [|exact (IH lo hi lo' hi' h H3 Hh)].
  apply existsb_exists in H1 as [p [Hp Hl]]. rewrite forallb_forall in H2. split.
  - apply Qle_bool_R in Hl. rewrite Q2R_plus in Hl.
    pose proof (dot_range (pw p) lo hi h Hh) as [D1 _].
    eapply Rle_trans; [|apply maxlR_ub; apply in_map_iff; exists p; split; [reflexivity | exact Hp]].
    unfold pieceR. lra.
  - apply maxlR_lub.
    + destruct u; [destruct Hp | discriminate].
    + intros w Hw. apply in_map_iff in Hw as [q [<- Hq]]. specialize (H2 q Hq).
      apply Qle_bool_R in H2. rewrite Q2R_plus in H2.
      pose proof (dot_range (pw q) lo hi h Hh) as [_ D2]. unfold pieceR. lra.
Qed.

Lemma outsR_length : forall p x, length (outsR p x) = length (p_outs p).
Proof. intros. unfold outsR. apply map_length. Qed.

Lemma outsR_restrict : forall p os x, (forall o, In o os -> (o < length (p_outs p))%nat) ->
  outsR (restrict p os) x = map (fun o => nth o (outsR p x) 0) os.
Proof.
  intros p os x H. unfold outsR, restrict. cbn [p_nodes p_outs]. rewrite map_map.
  apply map_ext_in. intros o Ho.
  set (F := fun o => nth o (runR (p_nodes p) x []) 0).
  rewrite (nth_indep (map F (p_outs p)) 0 (F 0%nat)) by (rewrite map_length; exact (H o Ho)).
  rewrite map_nth. reflexivity.
Qed.

Lemma map_eq_in : forall {A B} (F G : A -> B) l a, map F l = map G l -> In a l -> F a = G a.
Proof.
  intros A B F G l a. induction l as [|b l IH]; intros H Ha; [destruct Ha|].
  cbn in H. inversion H. destruct Ha as [<-|Ha]; auto.
Qed.

Lemma layer_ok_sound : forall f g dom cs x, layer_ok f g dom cs = true -> satR dom x ->
  outsR f x = outsR g x.
Proof.
  intros f g dom cs x H Hx. unfold layer_ok in H.
  apply andb_true_iff in H as [H H3]. apply andb_true_iff in H as [H1 H2].
  apply Nat.eqb_eq in H1. rewrite forallb_forall in H2.
  apply (nth_ext _ _ 0 0); [rewrite !outsR_length; exact H1|].
  intros o Ho. rewrite outsR_length in Ho.
  unfold covered in H3. rewrite forallb_forall in H3.
  specialize (H3 o (proj2 (in_seq _ _ _) (conj (Nat.le_0_l _) Ho))).
  apply existsb_exists in H3 as [c [Hc Ho']]. apply existsb_exists in Ho' as [o' [Hin E]].
  apply Nat.eqb_eq in E. subst o'.
  specialize (H2 c Hc). unfold claim_ok in H2. apply andb_true_iff in H2 as [Hr Hk].
  rewrite forallb_forall in Hr.
  pose proof (check_cert_sound _ _ _ _ Hk x Hx) as E.
  rewrite !outsR_restrict in E.
  - exact (map_eq_in _ _ _ o E Hin).
  - intros o' Ho'. rewrite <- H1. apply Nat.ltb_lt. exact (Hr o' Ho').
  - intros o' Ho'. apply Nat.ltb_lt. exact (Hr o' Ho').
Qed.

Lemma in_box_length : forall lo hi x, in_box lo hi x -> length x = length lo.
Proof. intros lo hi x H. symmetry. exact (proj1 (in_box_nth lo hi x H)). Qed.

(* one layer: the segment maps encode(h) to encode(Phi(h)) for every h of length n that
   satisfies the rows P (the layer's box, or, under (B'), the domain) *)
Lemma layer_step_rows : forall dm pos L out n P C subs g h,
  seg_program dm n pos subs = Some g ->
  layer_ok (enc_layer_program L out n dm pos) g P C = true ->
  Forall (fun p => length p = dm) pos -> satR P h -> length h = n ->
  fold_left (fun X s => subR dm s X) subs (embR dm pos h) = embR dm pos (phiR out (layerR L h)).
Proof.
  intros dm pos L out n P C subs g h Hg Hl Hp HP Hn.
  pose proof (layer_ok_sound _ _ _ _ h Hl HP) as E.
  rewrite (enc_layer_correct L out _ dm pos h Hn), (seg_program_correct dm _ pos subs g h Hg Hn) in E.
  rewrite (embR_encR dm pos (phiR out (layerR L h)) Hp).
  destruct (subs_shape dm subs _ (embR_shape dm pos h)) as [S1 S2].
  apply (concat_shape dm); [exact S1 | apply encR_shape | | symmetry; exact E].
  rewrite S2. unfold embR, encR. rewrite !map_length. reflexivity.
Qed.

Lemma layer_step : forall dm pos L out lo hi C subs g h,
  seg_program dm (length lo) pos subs = Some g ->
  layer_ok (enc_layer_program L out (length lo) dm pos) g (rows_of_box lo hi) C = true ->
  Forall (fun p => length p = dm) pos -> in_box lo hi h ->
  fold_left (fun X s => subR dm s X) subs (embR dm pos h) = embR dm pos (phiR out (layerR L h)).
Proof.
  intros dm pos L out lo hi C subs g h Hg Hl Hp Hh.
  exact (layer_step_rows dm pos L out _ _ C subs g h Hg Hl Hp (box_rows_sound lo hi h Hh)
           (in_box_length _ _ _ Hh)).
Qed.

Lemma out_len_sound : forall L out m h, out_len_ok L out m = true ->
  length (phiR out (layerR L h)) = m.
Proof.
  intros L [[W b]|] m h H; cbn in *.
  - apply andb_true_iff in H as [H1 H2]. apply Nat.eqb_eq in H1, H2.
    unfold affineR. rewrite map_length, combine_length. lia.
  - apply Nat.eqb_eq in H. unfold layerR. rewrite map_length. exact H.
Qed.

Lemma layers_ok_sound : forall dm pos out m Ls subs boxes cls lo hi h,
  layers_ok dm pos out m Ls subs boxes cls = true -> Forall (fun p => length p = dm) pos ->
  hd_error boxes = Some (lo, hi) -> in_box lo hi h ->
  fold_left (fun X s => subR dm s X) subs (embR dm pos h) = embR dm pos (phiR out (layersR Ls h)) /\
  length (phiR out (layersR Ls h)) = m.
Proof.
  intros dm pos out m Ls. induction Ls as [|L Ls IH]; intros subs boxes cls lo hi h H Hp Hb Hh;
    [discriminate|].
  destruct boxes as [|[lo0 hi0] boxes]; [discriminate|]. cbn in Hb. inversion Hb; subst lo0 hi0.
  destruct cls as [|C cls]; [discriminate|]. cbn [layers_ok] in H.
  destruct Ls as [|L' Ls'].
  - destruct boxes; [|discriminate]. destruct cls; [|discriminate].
    apply andb_true_iff in H as [H H3]. apply andb_true_iff in H as [H1 H2].
    destruct (seg_program dm (length lo) pos subs) as [g|] eqn:Eg; [|discriminate].
    cbn [layersR]. split; [exact (layer_step dm pos L out lo hi C subs g h Eg H3 Hp Hh)|].
    exact (out_len_sound L out m h H2).
  - destruct boxes as [|[lo' hi'] boxes]; [discriminate|]. destruct cls as [|C' cls]; [discriminate|].
    apply andb_true_iff in H as [H H3]. apply andb_true_iff in H as [H1 H2].
    destruct (seg_program dm (length lo) pos (firstn 3 subs)) as [g|] eqn:Eg; [|discriminate].
    pose proof (layer_step dm pos L None lo hi C _ g h Eg H2 Hp Hh) as E. cbn [phiR] in E.
    pose proof (image_sound L lo hi lo' hi' h H1 Hh) as Hh'.
    destruct (IH (skipn 3 subs) _ _ lo' hi' _ H3 Hp eq_refl Hh') as [E1 E2].
    cbn [layersR]. split; [|exact E2].
    rewrite <- (firstn_skipn 3 subs), fold_left_app, E. exact E1.
Qed.

Lemma image_poly_sound : forall P L lo' hi' ws x, image_poly_ok P L lo' hi' ws = true ->
  satR P x -> in_box lo' hi' (layerR L x).
Proof.
  intros P L. induction L as [|u L IH]; intros [|l' lo'] [|h' hi'] [|[[j wl] wus] ws] x H Hx;
    cbn [image_poly_ok] in H; try discriminate; [exact I|].
  apply andb_true_iff in H as [H HI]. apply andb_true_iff in H as [H HL].
  apply andb_true_iff in H as [H HF]. apply andb_true_iff in H as [Hj HE].
  apply Nat.ltb_lt in Hj.
  cbn [layerR map in_box]. split; [|exact (IH lo' hi' ws x HI Hx)]. split.
  - pose proof (entails_ge _ _ _ x Hx HE) as G. rewrite evalR_asub in G.
    unfold evalR in G. cbn [fst snd dotR] in G.
    eapply Rle_trans; [|apply maxlR_ub; apply in_map_iff; exists (nth j u no_piece);
                        split; [reflexivity | apply nth_In; exact Hj]].
    unfold pieceR. lra.
  - apply maxlR_lub.
    + destruct u; [cbn in Hj; lia | discriminate].
    + intros w Hw. apply in_map_iff in Hw as [q [<- Hq]].
      destruct (forall2b_In _ _ _ HF q Hq) as [wu Hwu].
      pose proof (entails_ge _ _ _ x Hx Hwu) as G. rewrite evalR_asub in G.
      unfold evalR in G. cbn [fst snd dotR] in G. unfold pieceR. lra.
Qed.

Lemma dom_rows_sound : forall D x, in_domain D x -> satR (dom_rows D) x.
Proof.
  intros [lo hi | A b] x H; cbn [in_domain dom_rows] in *;
    [exact (box_rows_sound lo hi x H) | exact (poly_rows_sound A b x H)].
Qed.

Lemma first_ok_sound : forall dm pos out m d P Ls subs boxes cls ws h,
  first_ok dm pos out m d P Ls subs boxes cls ws = true -> Forall (fun p => length p = dm) pos ->
  satR P h -> length h = d ->
  fold_left (fun X s => subR dm s X) subs (embR dm pos h) = embR dm pos (phiR out (layersR Ls h)) /\
  length (phiR out (layersR Ls h)) = m.
Proof.
  intros dm pos out m d P Ls subs boxes cls ws h H Hp HP Hn.
  destruct Ls as [|L [|L' Ls']]; [discriminate| |].
  - destruct boxes as [|b0 [|b1 boxes]]; try discriminate.
    destruct cls as [|C [|C' cls]]; try discriminate. cbn [first_ok] in H.
    apply andb_true_iff in H as [H H4]. apply andb_true_iff in H as [H _].
    apply andb_true_iff in H as [_ H2].
    destruct (seg_program dm d pos subs) as [g|] eqn:Eg; [|discriminate].
    cbn [layersR]. split; [exact (layer_step_rows dm pos L out d P C subs g h Eg H4 Hp HP Hn)|].
    exact (out_len_sound L out m h H2).
  - destruct boxes as [|b0 [|[lo' hi'] boxes']]; try discriminate.
    destruct cls as [|C cls']; try discriminate. cbn [first_ok] in H.
    apply andb_true_iff in H as [H H3]. apply andb_true_iff in H as [H1 H2].
    destruct (seg_program dm d pos (firstn 3 subs)) as [g|] eqn:Eg; [|discriminate].
    pose proof (layer_step_rows dm pos L None d P C _ g h Eg H2 Hp HP Hn) as E. cbn [phiR] in E.
    pose proof (image_poly_sound P L lo' hi' ws h H1 HP) as Hh'.
    destruct (layers_ok_sound dm pos out m (L' :: Ls') (skipn 3 subs) _ _ lo' hi' _ H3 Hp
                eq_refl Hh') as [E1 E2].
    cbn [layersR]. split; [|exact E2].
    rewrite <- (firstn_skipn 3 subs), fold_left_app, E. exact E1.
Qed.

(** A layerwise certificate that checks proves that the Transformer equals the Maxout
    network at every real point of the domain. *)
Theorem layerwise_ok_sound : forall net tf D c, layerwise_ok net tf D c = true ->
  forall x : list R, length x = mo_dim net -> in_domain D x -> transformerR tf x = maxoutR net x.
Proof.
  intros net tf D c H x Hd Hx. unfold layerwise_ok in H.
  destruct (lw_boxes c) as [|[lo hi] boxes] eqn:Eb; [rewrite andb_false_r in H; discriminate|].
  apply andb_true_iff in H as [H H5]. apply andb_true_iff in H5 as [H5 H6].
  apply andb_true_iff in H as [H H4]. apply andb_true_iff in H as [H H3].
  apply andb_true_iff in H as [H1 H2].
  assert (Hp : Forall (fun p => length p = tf_dm tf) (tf_pos tf)).
  { apply Forall_forall. intros p Hp. rewrite forallb_forall in H3. apply Nat.eqb_eq. exact (H3 p Hp). }
  pose proof (b0_sound D _ lo hi _ x H5 Hd Hx) as Hin.
  rewrite <- Eb in H6.
  assert (EL : fold_left (fun X s => subR (tf_dm tf) s X) (tf_subs tf) (embR (tf_dm tf) (tf_pos tf) x)
               = embR (tf_dm tf) (tf_pos tf) (phiR (mo_out net) (layersR (mo_layers net) x)) /\
               length (phiR (mo_out net) (layersR (mo_layers net) x)) = length (tf_rW tf)).
  { destruct (lw_first c).
    - exact (first_ok_sound _ _ _ _ _ _ _ _ _ _ _ x H6 Hp (dom_rows_sound D x Hx) Hd).
    - exact (layers_ok_sound _ _ _ _ _ _ _ _ lo hi x H6 Hp ltac:(rewrite Eb; reflexivity) Hin). }
  destruct EL as [E L].
  unfold transformerR.
  replace (map (fun p => affR (tf_emb tf) p x) (tf_pos tf)) with (embR (tf_dm tf) (tf_pos tf) x).
  2: { unfold embR. apply map_ext. intros p. rewrite Hd. symmetry. apply affR_eqb. exact H2. }
  rewrite E. unfold maxoutR. fold (phiR (mo_out net) (layersR (mo_layers net) x)).
  exact (readout_ok_sound tf _ _ H4 L).
Qed.

(* ------------------------------------------------------------------ *)
(** * Two Maxout networks of the same widths, layer by layer *)

(* layer_programs of layerwise.py for two Maxout networks: one token, no positional vector
   (the zero vector of d_m coordinates), so encode(h) is place(h) *)

Local Open Scope Q_scope.

(* the length of Phi(h): the layer's units, or the output map's rows *)
Definition out_len (L : list (list piece)) (out : option (mat * list Q)) : nat :=
  match out with None => length L | Some (W, b) => Nat.min (length W) (length b) end.

Fixpoint mm_layers_ok (dm : nat) (outa outb : option (mat * list Q))
         (La Lb : list (list (list piece))) (boxes : list (list Q * list Q))
         (cls : list (list claim)) : bool :=
  let z := [repeat 0 dm] in
  match La, Lb, boxes, cls with
  | A :: La', B :: Lb', (lo, hi) :: boxes', C :: cls' =>
      match La', Lb', boxes', cls' with
      | [], [], [], [] =>
          (out_len A outa =? out_len B outb)%nat && (out_len A outa <=? dm)%nat &&
          layer_ok (enc_layer_program A outa (length lo) dm z)
                   (enc_layer_program B outb (length lo) dm z) (rows_of_box lo hi) C
      | _ :: _, _ :: _, (lo', hi') :: _, _ :: _ =>
          (length A =? length B)%nat && (length A <=? dm)%nat && image_ok A lo hi lo' hi' &&
          layer_ok (enc_layer_program A None (length lo) dm z)
                   (enc_layer_program B None (length lo) dm z) (rows_of_box lo hi) C &&
          mm_layers_ok dm outa outb La' Lb' boxes' cls'
      | _, _, _, _ => false
      end
  | _, _, _, _ => false
  end.

(* d_m: the token width of the encoded layers (max of the widths and the output dimension) *)
Definition mm_layerwise_ok (a b : maxout) (D : domain) (dm : nat) (c : lw_cert) : bool :=
  negb (lw_first c) && (mo_dim a =? mo_dim b)%nat &&
  match lw_boxes c with
  | (lo, hi) :: _ =>
      b0_ok D (mo_dim a) lo hi (lw_box_proofs c) &&
      mm_layers_ok dm (mo_out a) (mo_out b) (mo_layers a) (mo_layers b) (lw_boxes c) (lw_claims c)
  | [] => false
  end.

Local Open Scope R_scope.

Lemma out_len_length : forall L out h, length (phiR out (layerR L h)) = out_len L out.
Proof.
  intros L [[W b]|] h; cbn.
  - unfold affineR. rewrite map_length, combine_length. reflexivity.
  - unfold layerR. apply map_length.
Qed.

(* place(u) = place(v) with u, v of the same length k <= d_m means u = v *)
Lemma enc_zero_inj : forall dm (u v : list R), length u = length v -> (length u <= dm)%nat ->
  concat (encR dm [repeat 0%Q dm] u) = concat (encR dm [repeat 0%Q dm] v) -> u = v.
Proof.
  intros dm u v Hl Hd H. unfold encR in H. cbn [map concat] in H. rewrite !app_nil_r in H.
  apply (nth_ext _ _ 0 0 Hl). intros i Hi.
  assert (Hin : In i (seq 0 dm)) by (apply in_seq; lia).
  pose proof (map_eq_in _ _ _ i H Hin) as E. cbn beta in E. lra.
Qed.

Lemma mm_step : forall dm A B oa ob lo hi C h,
  layer_ok (enc_layer_program A oa (length lo) dm [repeat 0%Q dm])
           (enc_layer_program B ob (length lo) dm [repeat 0%Q dm]) (rows_of_box lo hi) C = true ->
  in_box lo hi h ->
  concat (encR dm [repeat 0%Q dm] (phiR oa (layerR A h))) =
  concat (encR dm [repeat 0%Q dm] (phiR ob (layerR B h))).
Proof.
  intros dm A B oa ob lo hi C h Hl Hh. pose proof (in_box_length _ _ _ Hh) as Hn.
  pose proof (layer_ok_sound _ _ _ _ h Hl (box_rows_sound lo hi h Hh)) as E.
  rewrite !(enc_layer_correct _ _ _ dm _ h Hn) in E. exact E.
Qed.

Lemma mm_layers_ok_sound : forall dm oa ob La Lb boxes cls lo hi h,
  mm_layers_ok dm oa ob La Lb boxes cls = true -> hd_error boxes = Some (lo, hi) -> in_box lo hi h ->
  phiR ob (layersR Lb h) = phiR oa (layersR La h).
Proof.
  intros dm oa ob La. induction La as [|A La IH]; intros [|B Lb] boxes cls lo hi h H Hb Hh;
    [discriminate | discriminate | discriminate|].
  destruct boxes as [|[lo0 hi0] boxes]; [discriminate|]. cbn in Hb. inversion Hb; subst lo0 hi0.
  destruct cls as [|C cls]; [discriminate|]. cbn [mm_layers_ok] in H.
  destruct La as [|A' La'].
  - destruct Lb; [|discriminate]. destruct boxes; [|discriminate]. destruct cls; [|discriminate].
    apply andb_true_iff in H as [H H3]. apply andb_true_iff in H as [H1 H2].
    apply Nat.eqb_eq in H1. apply Nat.leb_le in H2. cbn [layersR]. symmetry.
    apply (enc_zero_inj dm); [rewrite !out_len_length; exact H1 | rewrite out_len_length; exact H2|].
    exact (mm_step dm A B oa ob lo hi C h H3 Hh).
  - destruct Lb as [|B' Lb']; [discriminate|].
    destruct boxes as [|[lo' hi'] boxes]; [discriminate|]. destruct cls as [|C' cls]; [discriminate|].
    apply andb_true_iff in H as [H H5]. apply andb_true_iff in H as [H H4].
    apply andb_true_iff in H as [H H3]. apply andb_true_iff in H as [H1 H2].
    apply Nat.eqb_eq in H1. apply Nat.leb_le in H2.
    assert (E : layerR A h = layerR B h).
    { pose proof (mm_step dm A B None None lo hi C h H4 Hh) as E. cbn [phiR] in E.
      apply (enc_zero_inj dm) in E; [exact E | unfold layerR; rewrite !map_length; exact H1 |
                                    unfold layerR; rewrite map_length; exact H2]. }
    cbn [layersR]. rewrite <- E.
    exact (IH (B' :: Lb') _ _ lo' hi' _ H5 eq_refl (image_sound A lo hi lo' hi' h H3 Hh)).
Qed.

(** A layerwise certificate between two Maxout networks that checks proves that they agree
    at every real point of the domain. *)
Theorem mm_layerwise_ok_sound : forall a b D dm c, mm_layerwise_ok a b D dm c = true ->
  forall x : list R, length x = mo_dim a -> in_domain D x -> maxoutR b x = maxoutR a x.
Proof.
  intros a b D dm c H x Hd Hx. unfold mm_layerwise_ok in H.
  apply andb_true_iff in H as [_ H].
  destruct (lw_boxes c) as [|[lo hi] boxes] eqn:Eb; [discriminate|].
  apply andb_true_iff in H as [H1 H2].
  pose proof (b0_sound D _ lo hi _ x H1 Hd Hx) as Hin. rewrite <- Eb in H2.
  unfold maxoutR.
  exact (mm_layers_ok_sound dm _ _ _ _ _ _ lo hi x H2 ltac:(rewrite Eb; reflexivity) Hin).
Qed.

(* ------------------------------------------------------------------ *)
(** * (M): a merged Transformer, through its unmerged form

   The merged construction fuses the clean-up of layer l and the gate of layer l + 1 into one
   feed-forward sub-layer.  The certificate gives, for every sub-layer of the merged
   Transformer, nothing (kept) or the two feed-forward sub-layers that replace it; each
   replacement is checked as an identity of the translation on one symbolic token of d_m
   coordinates (the Python kernel's same_feedforward), and every sub-layer keeps tokens of
   d_m coordinates.  The two Transformers then compute the same function, and the layerwise
   certificate is checked for the unmerged one. *)

Local Open Scope Q_scope.

Definition expr_eqb (e f : expr) : bool :=
  let '(xs, c, ts) := e in let '(ys, d, us) := f in
  sparse_eqb xs ys && Qeq_bool c d && sparse_eqb ts us.

Definition is_ff (s : sublayer) : bool :=
  match s with FeedForward _ _ _ _ => true | Attention _ => false end.

(* s(t) = b(a(t)) for every token t of dm coordinates *)
Definition same_ff (dm : nat) (s a b : sublayer) : bool :=
  is_ff s && is_ff a && is_ff b &&
  match bind (sub_tokens dm s [inputs dm]) (fun A =>
        bind (foldM (fun X u => sub_tokens dm u X) [a; b] [inputs dm]) (fun B => ret (A, B))) []
  with
  | Some (_, ([ea], [eb])) => forall2b expr_eqb ea eb
  | _ => false
  end.

(* the sub-layer writes d_m coordinates of every token *)
Definition keeps_dm (dm : nat) (s : sublayer) : bool :=
  match s with
  | FeedForward _ _ W2 b2 => (length W2 =? dm)%nat && (length b2 =? dm)%nat
  | Attention hs => forallb (fun hd => length (h_out hd) =? dm)%nat hs
  end.

Fixpoint unmerge (dm : nat) (subs : list sublayer) (splits : list (option (sublayer * sublayer)))
  : option (list sublayer) :=
  match subs, splits with
  | [], [] => Some []
  | s :: subs', o :: splits' =>
      if keeps_dm dm s then
        match unmerge dm subs' splits', o with
        | Some rest, None => Some (s :: rest)
        | Some rest, Some (a, b) => if same_ff dm s a b then Some (a :: b :: rest) else None
        | None, _ => None
        end
      else None
  | _, _ => None
  end.

Definition with_subs (tf : transformer) (us : list sublayer) : transformer :=
  {| tf_dim := tf_dim tf; tf_dm := tf_dm tf; tf_emb := tf_emb tf; tf_pos := tf_pos tf;
     tf_subs := us; tf_token := tf_token tf; tf_rW := tf_rW tf; tf_rb := tf_rb tf |}.

Definition merged_layerwise_ok (net : maxout) (tf : transformer) (D : domain)
           (splits : list (option (sublayer * sublayer))) (c : lw_cert) : bool :=
  match unmerge (tf_dm tf) (tf_subs tf) splits with
  | Some us => layerwise_ok net (with_subs tf us) D c
  | None => false
  end.

Local Open Scope R_scope.

Lemma expr_eqb_sound : forall e f x env, expr_eqb e f = true -> evalE e x env = evalE f x env.
Proof.
  intros [[xs c] ts] [[ys d] us] x env H. cbn [expr_eqb] in H.
  apply andb_true_iff in H as [H H3]. apply andb_true_iff in H as [H1 H2].
  cbn [evalE]. rewrite (sparse_eqb_sum xs ys x H1), (sparse_eqb_sum ts us env H3).
  apply Qeq_bool_eq, Qeq_eqR in H2. rewrite H2. reflexivity.
Qed.

Lemma exprs_eqb_vals : forall x st ea eb, forall2b expr_eqb ea eb = true ->
  map (val x st) ea = map (val x st) eb.
Proof.
  intros x st ea. induction ea as [|e ea IH]; intros [|f eb] H; cbn [forall2b] in H;
    try discriminate; [reflexivity|].
  apply andb_true_iff in H as [H1 H2]. cbn [map]. unfold val at 1 3.
  rewrite (expr_eqb_sound e f x _ H1), (IH eb H2). reflexivity.
Qed.

Lemma Forall2_one : forall {A B} (P : A -> B -> Prop) a l, Forall2 P [a] l ->
  exists b, l = [b] /\ P a b.
Proof.
  intros A B P a l H. inversion H as [|a' b l1 l2 Hab Hrest]; subst.
  inversion Hrest; subst. exists b. split; [reflexivity | exact Hab].
Qed.

Lemma same_ff_token : forall dm s a b t, same_ff dm s a b = true -> length t = dm ->
  subR dm s [t] = subR dm b (subR dm a [t]).
Proof.
  intros dm s a b t H Ht. unfold same_ff in H.
  apply andb_true_iff in H as [_ H].
  assert (Hin : forall st, Forall2 (Forall2 (ev t st)) [inputs dm] [t]).
  { intros st. constructor; [|constructor]. unfold inputs. rewrite <- Ht. apply ev_inputs. }
  pose proof (spec_sub t dm s [inputs dm] [t] [] (fun k Hk j Hj => ltac:(simpl in Hk; lia))
                (Hin [])) as S1.
  unfold bind in H. destruct (sub_tokens dm s [inputs dm] []) as [[st1 A]|]; [|discriminate].
  destruct S1 as [W1 [X1 E1]].
  pose proof (spec_subs t dm [a; b] [inputs dm] [t] st1 W1 (Hin st1)) as S2.
  destruct (foldM _ [a; b] [inputs dm] st1) as [[st2 B]|]; [|discriminate].
  destruct S2 as [W2 [X2 E2]]. cbn [ret] in H.
  pose proof (ev2_stable t _ _ st1 st2 E1 W2 X2) as E1'.
  destruct A as [|ea [|]]; try discriminate. destruct B as [|eb [|]]; try discriminate.
  destruct (Forall2_one _ _ _ E1') as [va [Ea Ha]].
  destruct (Forall2_one _ _ _ E2) as [vb [Eb Hb]].
  cbn [fold_left] in Eb. rewrite Ea, Eb.
  rewrite <- (Forall2_ev_val t st2 ea va Ha), <- (Forall2_ev_val t st2 eb vb Hb).
  rewrite (exprs_eqb_vals t st2 ea eb H). reflexivity.
Qed.

Lemma vplus_length_eq : forall u v, length (vplus u v) = Nat.min (length u) (length v).
Proof. intros. unfold vplus. rewrite map_length, combine_length. reflexivity. Qed.

Lemma affR_length : forall M b v, length (affR M b v) = Nat.min (length M) (length b).
Proof. intros. unfold affR. rewrite map_length, combine_length. reflexivity. Qed.

Lemma head_update_length : forall hd X t acc dm, length (h_out hd) = dm -> length acc = dm ->
  length (head_update hd X t acc) = dm.
Proof.
  intros hd X t acc dm Ho Ha. unfold head_update.
  generalize (seq 0 (length (h_value hd))). intros rs. revert acc Ha.
  induction rs as [|r rs IH]; intros acc Ha; cbn [fold_left]; [exact Ha|].
  apply IH. rewrite vplus_length_eq, map_length, Ha, Ho. lia.
Qed.

Lemma keeps_dm_sound : forall dm s X, keeps_dm dm s = true ->
  Forall (fun t => length t = dm) X -> Forall (fun t => length t = dm) (subR dm s X).
Proof.
  intros dm [W1 b1 W2 b2 | hs] X H HX; cbn [keeps_dm subR] in *; apply Forall_map;
    eapply Forall_impl; try exact HX; intros t Ht; cbn beta in *.
  - apply andb_true_iff in H as [H1 H2]. apply Nat.eqb_eq in H1, H2.
    unfold ffR. rewrite vplus_length_eq, affR_length, H1, H2, Ht. lia.
  - rewrite vplus_length_eq, Ht.
    assert (L : length (fold_left (fun acc hd => head_update hd X t acc) hs (repeat 0 dm)) = dm).
    { assert (L0 : length (repeat 0 dm) = dm) by apply repeat_length.
      revert L0. generalize (repeat 0 dm). rewrite forallb_forall in H.
      induction hs as [|hd hs IH]; intros acc Ha; cbn [fold_left]; [exact Ha|].
      apply IH; [intros h Hh; apply H; right; exact Hh|].
      apply head_update_length; [apply Nat.eqb_eq, H; left; reflexivity | exact Ha]. }
    rewrite L. lia.
Qed.

Lemma same_ff_map : forall dm s a b X, same_ff dm s a b = true ->
  Forall (fun t => length t = dm) X -> subR dm s X = subR dm b (subR dm a X).
Proof.
  intros dm s a b X H HX.
  assert (Hff : is_ff s && is_ff a && is_ff b = true).
  { unfold same_ff in H. apply andb_true_iff in H as [H _]. exact H. }
  destruct s as [W1 b1 W2 b2 | ]; [|discriminate]. destruct a as [A1 c1 A2 c2 | ]; [|discriminate].
  destruct b as [B1 d1 B2 d2 | ]; [|discriminate].
  cbn [subR]. rewrite map_map. apply map_ext_in. intros t Ht.
  pose proof (same_ff_token dm _ _ _ t H (proj1 (Forall_forall _ _) HX t Ht)) as E.
  cbn [subR map] in E. inversion E. reflexivity.
Qed.

Lemma unmerge_sound : forall dm subs splits us X, unmerge dm subs splits = Some us ->
  Forall (fun t => length t = dm) X ->
  fold_left (fun X s => subR dm s X) subs X = fold_left (fun X s => subR dm s X) us X.
Proof.
  intros dm subs. induction subs as [|s subs IH]; intros [|o splits] us X H HX;
    cbn [unmerge] in H; try discriminate.
  - inversion H; subst. reflexivity.
  - destruct (keeps_dm dm s) eqn:K; [|discriminate].
    destruct (unmerge dm subs splits) as [rest|] eqn:U; [|discriminate].
    pose proof (keeps_dm_sound dm s X K HX) as HX'.
    destruct o as [[a b]|].
    + destruct (same_ff dm s a b) eqn:S; [|discriminate]. inversion H; subst.
      cbn [fold_left]. rewrite <- (same_ff_map dm s a b X S HX).
      exact (IH splits rest _ U HX').
    + inversion H; subst. cbn [fold_left]. exact (IH splits rest _ U HX').
Qed.

Lemma forall2b_length : forall {A B} (f : A -> B -> bool) l1 l2, forall2b f l1 l2 = true ->
  length l1 = length l2.
Proof.
  intros A B f l1. induction l1 as [|a l1 IH]; intros [|b l2] H; cbn [forall2b] in H;
    try discriminate; [reflexivity|].
  apply andb_true_iff in H as [_ H]. cbn. f_equal. exact (IH l2 H).
Qed.

(** A merged Transformer equals the Maxout network on the domain when its unmerged form does,
    by a layerwise certificate. *)
Theorem merged_layerwise_ok_sound : forall net tf D splits c,
  merged_layerwise_ok net tf D splits c = true ->
  forall x : list R, length x = mo_dim net -> in_domain D x -> transformerR tf x = maxoutR net x.
Proof.
  intros net tf D splits c H x Hd Hx. unfold merged_layerwise_ok in H.
  destruct (unmerge (tf_dm tf) (tf_subs tf) splits) as [us|] eqn:U; [|discriminate].
  rewrite <- (layerwise_ok_sound net (with_subs tf us) D c H x Hd Hx).
  unfold layerwise_ok in H. cbn [with_subs tf_emb tf_pos tf_dm tf_dim] in H.
  apply andb_true_iff in H as [H _]. apply andb_true_iff in H as [H _].
  apply andb_true_iff in H as [H H3]. apply andb_true_iff in H as [_ H2].
  assert (LE : length (tf_emb tf) = tf_dm tf).
  { rewrite (forall2b_length _ _ _ H2). unfold place. rewrite map_length, seq_length.
    reflexivity. }
  assert (R : forall X, readoutR (with_subs tf us) X = readoutR tf X)
    by (intros; unfold readoutR; reflexivity).
  unfold transformerR. rewrite R. cbn [with_subs tf_emb tf_pos tf_dm tf_subs]. f_equal.
  apply (unmerge_sound _ _ splits us _ U).
  apply Forall_map. apply Forall_forall. intros p Hp. rewrite forallb_forall in H3.
  rewrite affR_length, LE. rewrite (proj1 (Nat.eqb_eq _ _) (H3 p Hp)). lia.
Qed.

(* ------------------------------------------------------------------ *)
(** * The theorems exported files apply: the above, for well-shaped models and domains *)

(* the domain has d coordinates and, for A x <= b, one constant per row (Sound.box_shaped,
   Sound.poly_shaped) *)
Definition domain_shaped (d : nat) (D : domain) : bool :=
  match D with DBox lo hi => box_shaped d lo hi | DPoly A b => poly_shaped d A b end.

(* the Transformer and the Maxout network well-shaped (Transformer.transformer_shaped,
   Maxout.maxout_shaped), of one input dimension, and the domain of that dimension: a
   computable check, proved by computation in exported files *)
Definition lw_shaped (net : maxout) (tf : transformer) (D : domain) : bool :=
  Nat.eqb (tf_dim tf) (mo_dim net) && maxout_shaped net && transformer_shaped tf &&
  domain_shaped (mo_dim net) D.

Definition mm_shaped (a b : maxout) (D : domain) : bool :=
  Nat.eqb (mo_dim b) (mo_dim a) && maxout_shaped a && maxout_shaped b &&
  domain_shaped (mo_dim a) D.

Theorem layerwise_sound : forall net tf D c, lw_shaped net tf D = true ->
  layerwise_ok net tf D c = true ->
  forall x : list R, length x = mo_dim net -> in_domain D x -> transformerR tf x = maxoutR net x.
Proof. intros net tf D c _ H. exact (layerwise_ok_sound net tf D c H). Qed.

Theorem mm_layerwise_sound : forall a b D dm c, mm_shaped a b D = true ->
  mm_layerwise_ok a b D dm c = true ->
  forall x : list R, length x = mo_dim a -> in_domain D x -> maxoutR b x = maxoutR a x.
Proof. intros a b D dm c _ H. exact (mm_layerwise_ok_sound a b D dm c H). Qed.

Theorem merged_layerwise_sound : forall net tf D splits c, lw_shaped net tf D = true ->
  merged_layerwise_ok net tf D splits c = true ->
  forall x : list R, length x = mo_dim net -> in_domain D x -> transformerR tf x = maxoutR net x.
Proof. intros net tf D splits c _ H. exact (merged_layerwise_ok_sound net tf D splits c H). Qed.
