(* Construction.v -- the construction of docs/notes/construction.md §2 as a Gallina function: a Maxout
   network over Q and one gate constant per layer give a hardmax Transformer, in the
   representation Transformer.v gives semantics to, entry for entry the default (unmerged,
   one-hot) Transformer of exactmax/construct/transformer.py (compile_transformer):

     construct : maxout -> list Q -> transformer

   With W = max(d, N_1 .. N_D, m) and k the largest rank, a token has d_m = 3W + k coordinates
   in four blocks: H (0 .. W-1, the hidden vector), Z (W .. 2W-1, pre-activations),
   M (2W .. 3W-1, the attention output), P (3W .. 3W+k-1, the one-hot position).  Tokens are
   pieces (k of them; a unit of fewer pieces repeats its last one), heads are units.  One
   Maxout layer is three sub-layers: the gate feed-forward (hidden unit (s, i) is
   ReLU(w_{i,s} . H + 2 C P_s + b_{i,s} - C), written to Z_i, and -C on Z_i), attention (head i:
   query the sum of P, key = value = Z_i, output to M_i), and the clean-up feed-forward
   (H <- M, or A M + c after the last layer, Z <- 0, M <- 0, each coordinate u through
   ReLU(u) - ReLU(-u)).  The read-out returns H_0 .. H_{m-1} of token 0.

   Also here: the well-shapedness of a network (shaped), the gate condition over a domain
   (gates_ok, decided by computation: interval images of a bounding box of the domain, the box
   itself or, for a polyhedron, a box proved by Farkas multipliers), and the size of the
   construction (construct_size).  ConstructionSound.v proves
   transformerR (construct net C) x = maxoutR net x.

   Exported files decide the gate condition with zgates_ok: the same boxes, with corners on a
   grid 1/G, checked in integers (a common denominator per layer and a table of products), so
   that no gcd is taken and every large product has a small factor. *)

From Coq Require Import QArith Qreals Reals Lia List Bool.
From Coq Require Uint63.
Import (notations) Uint63.
From ExactMax Require Import Checker Sound Build Maxout Transformer Layerwise.
Import ListNotations.

Local Open Scope Q_scope.

(* ------------------------------------------------------------------ *)
(** * Writing matrices (exported files) *)

(* as Transformer.spmat: a vector of n entries written by its nonzero entries, and a matrix
   of [rows] rows written column by column (a head's W_O has one column) *)
Definition spvec (n : nat) (r : list (Uint63.int * Q)) : list Q := map (sp_get r) (columns n 0%uint63).

Definition spmat_t (rows : nat) (cols : list (list (Uint63.int * Q))) : mat :=
  map (fun i => map (fun c => sp_get c i) cols) (columns rows 0%uint63).

(* Models packed as machine integers (the stream of Checker.unpack, read by Checker's readers),
   for exported files of large networks: Coq reads an array of machine integers many times
   faster than the same numbers written as terms.  A network: d, its layers (units, pieces:
   weights then bias), then 0, or 1 and the output map's rows and constants.  A Transformer:
   d, d_m, E, the positions, the sub-layers (0 and W1 b1 W2 b2, or 1 and the heads: W_Q W_K
   W_V W_O and the scale), the read-out token (0 for the mean, t + 1 for token t), R and r;
   a matrix as its columns and its rows' nonzero entries (spmat), a vector as one such row. *)
Definition rd_pair {A B} (ra : reader A) (rb : reader B) : reader (A * B) :=
  fun l => let '(a, l1) := ra l in let '(b, l2) := rb l1 in ((a, b), l2).

Definition rd_piece : reader piece :=
  fun l => let '(w, l1) := rd_list rd_Q l in let '(b, l2) := rd_Q l1 in ({| pw := w; pb := b |}, l2).

Definition rd_maxout : reader maxout :=
  fun l => let '(d, l1) := rd_nat l in
           let '(Ls, l2) := rd_list (rd_list (rd_list rd_piece)) l1 in
           let '(o, l3) := rd_nat l2 in
           match o with
           | O => ({| mo_dim := d; mo_layers := Ls; mo_out := None |}, l3)
           | _ => let '(A, l4) := rd_list (rd_list rd_Q) l3 in let '(b, l5) := rd_list rd_Q l4 in
                  ({| mo_dim := d; mo_layers := Ls; mo_out := Some (A, b) |}, l5)
           end.

Definition rd_row : reader (list (Uint63.int * Q)) := rd_list (rd_pair rd_idx rd_Q).

Definition rd_spmat : reader mat :=
  fun l => let '(c, l1) := rd_nat l in let '(rows, l2) := rd_list rd_row l1 in (spmat c rows, l2).

Definition rd_spvec : reader (list Q) :=
  fun l => let '(n, l1) := rd_nat l in let '(r, l2) := rd_row l1 in (spvec n r, l2).

Definition rd_head : reader head :=
  fun l => let '(q, l1) := rd_spmat l in let '(k, l2) := rd_spmat l1 in
           let '(v, l3) := rd_spmat l2 in let '(o, l4) := rd_spmat l3 in let '(s, l5) := rd_Q l4 in
           ({| h_query := q; h_key := k; h_value := v; h_out := o; h_scale := s |}, l5).

Definition rd_sublayer : reader sublayer :=
  fun l => let '(t, l1) := rd_nat l in
           match t with
           | O => let '(W1, l2) := rd_spmat l1 in let '(b1, l3) := rd_spvec l2 in
                  let '(W2, l4) := rd_spmat l3 in let '(b2, l5) := rd_spvec l4 in
                  (FeedForward W1 b1 W2 b2, l5)
           | _ => let '(hs, l2) := rd_list rd_head l1 in (Attention hs, l2)
           end.

Definition rd_transformer : reader transformer :=
  fun l => let '(d, l1) := rd_nat l in let '(dm, l2) := rd_nat l1 in
           let '(E, l3) := rd_spmat l2 in let '(P, l4) := rd_spmat l3 in
           let '(Ss, l5) := rd_list rd_sublayer l4 in let '(t, l6) := rd_nat l5 in
           let '(R, l7) := rd_spmat l6 in let '(r, l8) := rd_spvec l7 in
           ({| tf_dim := d; tf_dm := dm; tf_emb := E; tf_pos := P; tf_subs := Ss;
               tf_token := match t with O => None | S k => Some k end; tf_rW := R; tf_rb := r |}, l8).

Definition unpack_models (a : PArray.array Uint63.int) : maxout * transformer :=
  let '(net, l) := rd_maxout (unpack a) in let '(tf, _) := rd_transformer l in (net, tf).

(* ------------------------------------------------------------------ *)
(** * Shapes *)

(* the largest rank of a layer, and of the network *)
Definition layer_rank (L : list (list piece)) : nat := fold_right (fun u a => Nat.max (length u) a) O L.
Definition net_rank (net : maxout) : nat := fold_right (fun L a => Nat.max (layer_rank L) a) O (mo_layers net).

(* d, N_1, .., N_D *)
Definition widths (net : maxout) : list nat := mo_dim net :: map (@length _) (mo_layers net).

(* the output dimension m: the rows of the output map, or N_D *)
Definition out_dim (net : maxout) : nat :=
  match mo_out net with Some (A, _) => length A | None => last (widths net) O end.

(* W = max(d, N_1 .. N_D, m) *)
Definition net_width (net : maxout) : nat := Nat.max (fold_right Nat.max O (widths net)) (out_dim net).

Definition model_dim (net : maxout) : nat := 3 * net_width net + net_rank net.

(* every unit has a piece, every piece of layer l reads N_{l-1} coordinates, the output map
   reads N_D and has as many constants as rows; at least one layer and one piece *)
Fixpoint layers_shaped (n : nat) (Ls : list (list (list piece))) : bool :=
  match Ls with
  | [] => true
  | L :: Ls' => forallb (fun u => negb (Nat.eqb (length u) O) && forallb (fun p => Nat.eqb (length (pw p)) n) u) L &&
                layers_shaped (length L) Ls'
  end.

Definition shaped (net : maxout) : bool :=
  negb (Nat.eqb (length (mo_layers net)) O) && negb (Nat.eqb (net_rank net) O) &&
  layers_shaped (mo_dim net) (mo_layers net) &&
  match mo_out net with
  | None => true
  | Some (A, b) => Nat.eqb (length A) (length b) &&
                   forallb (fun r => Nat.eqb (length r) (last (widths net) O)) A
  end.

(* ------------------------------------------------------------------ *)
(** * The construction *)

(* w written into W coordinates (well-shaped: w has at most W) *)
Definition pad (W : nat) (w : list Q) : list Q := firstn W w ++ repeat 0 (W - length w).

(* piece s of a unit, the last one repeated (transformer.py, _piece) *)
Definition piece_at (u : list piece) (s : nat) : piece := nth (Nat.min s (length u - 1)) u no_piece.

(* a hidden unit of a feed-forward sub-layer: its row of W_1, its bias, and the one
   coordinate it writes (with weight sign) through W_2 *)
Record hunit := { hu_row : list Q; hu_bias : Q; hu_out : nat; hu_sign : Q }.

Definition ff_of (dm : nat) (hs : list hunit) (b2 : list Q) : sublayer :=
  FeedForward (map hu_row hs) (map hu_bias hs)
    (map (fun r => map (fun u => if Nat.eqb (hu_out u) r then hu_sign u else 0) hs) (seq 0 dm)) b2.

Section Layer.
Variables (W k : nat).
Let dm := (3 * W + k)%nat.

(* sub-layer 1: hidden unit (s, i) = ReLU(w_{i,s} . H + 2 C P_s + b_{i,s} - C), into Z_i *)
Definition gate_unit (C : Q) (s i : nat) (u : list piece) : hunit :=
  let p := piece_at u s in
  {| hu_row := pad W (pw p) ++ repeat 0 (2 * W) ++ basis k s (Qred (2 * C));
     hu_bias := Qred (pb p - C); hu_out := (W + i)%nat; hu_sign := 1 |}.

Definition gate_ff (L : list (list piece)) (C : Q) : sublayer :=
  let N := length L in
  ff_of dm (concat (map (fun s => map (fun i => gate_unit C s i (nth i L [])) (seq 0 N)) (seq 0 k)))
        (map (fun r => if (W <=? r)%nat && (r <? W + N)%nat then Qred (- C) else 0) (seq 0 dm)).

(* sub-layer 2: head i, constant query (the sum of P), key = value = Z_i, output to M_i *)
Definition max_head (i : nat) : head :=
  {| h_query := [repeat 0 (3 * W) ++ repeat 1 k];
     h_key := [basis dm (W + i) 1]; h_value := [basis dm (W + i) 1];
     h_out := map (fun r => [if Nat.eqb r (2 * W + i) then 1 else 0]) (seq 0 dm);
     h_scale := 1 |}.

Definition max_att (N : nat) : sublayer := Attention (map max_head (seq 0 N)).

(* sub-layer 3: each coordinate o <- o + u with u = a . token + c, as ReLU(u) - ReLU(-u) *)
Definition copy_units (a : list Q) (c : Q) (o : nat) : list hunit :=
  [{| hu_row := a; hu_bias := c; hu_out := o; hu_sign := 1 |};
   {| hu_row := map Qopp a; hu_bias := Qopp c; hu_out := o; hu_sign := -1 |}].

(* H_j <- target_j (a row over M and a constant); the targets: M_i, or A M + c *)
Definition targets (N : nat) (out : option (list (list Q) * list Q)) : list (list Q * Q) :=
  match out with
  | None => map (fun i => (basis W i 1, 0)) (seq 0 N)
  | Some (A, b) => map (fun rc => (pad W (fst rc), snd rc)) (combine A b)
  end.

Definition cleanup_ff (prev N : nat) (out : option (list (list Q) * list Q)) : sublayer :=
  let tg := targets N out in
  let J := Nat.max prev (length tg) in
  ff_of dm (concat (map (fun j => copy_units (basis W j (-1) ++ repeat 0 W ++ fst (nth j tg (repeat 0 W, 0))
                                              ++ repeat 0 k) (snd (nth j tg (repeat 0 W, 0))) j)
                        (seq 0 J) ++
                    map (fun i => copy_units (repeat 0 W ++ basis W i (-1) ++ repeat 0 W ++ repeat 0 k) 0 (W + i))
                        (seq 0 N) ++
                    map (fun i => copy_units (repeat 0 (2 * W) ++ basis W i (-1) ++ repeat 0 k) 0 (2 * W + i))
                        (seq 0 N)))
        (repeat 0 dm).

(* the three sub-layers of every layer; prev is the width of the layer's input *)
Fixpoint layers_subs (out : option (list (list Q) * list Q)) (prev : nat)
         (Ls : list (list (list piece))) (Cs : list Q) : list sublayer :=
  match Ls with
  | [] => []
  | L :: Ls' =>
      let o := match Ls' with [] => out | _ => None end in
      gate_ff L (hd 0 Cs) :: max_att (length L) :: cleanup_ff prev (length L) o ::
      layers_subs out (length L) Ls' (tl Cs)
  end.

End Layer.

(** The Transformer of the network net with gate constants C (one per layer). *)
Definition construct (net : maxout) (C : list Q) : transformer :=
  let W := net_width net in
  let k := net_rank net in
  let dm := (3 * W + k)%nat in
  let m := out_dim net in
  {| tf_dim := mo_dim net; tf_dm := dm;
     tf_emb := place (mo_dim net) dm;
     tf_pos := map (fun t => basis dm (3 * W + t) 1) (seq 0 k);
     tf_subs := layers_subs W k (mo_out net) (mo_dim net) (mo_layers net) C;
     tf_token := Some O;
     tf_rW := map (fun j => basis dm j 1) (seq 0 m);
     tf_rb := repeat 0 m |}.

(* ------------------------------------------------------------------ *)
(** * The gate condition, decided by computation *)

(* the exact range of w . h over the box [lo, hi], as Layerwise.dot_lo and dot_hi, each sum
   reduced (without, the denominators of a long sum multiply) *)
Fixpoint rdot_lo (w lo hi : list Q) : Q :=
  match w, lo, hi with
  | a :: w', l :: lo', u :: hi' => Qred ((if Qle_bool 0 a then a * l else a * u) + rdot_lo w' lo' hi')
  | _, _, _ => 0
  end.

Fixpoint rdot_hi (w lo hi : list Q) : Q :=
  match w, lo, hi with
  | a :: w', l :: lo', u :: hi' => Qred ((if Qle_bool 0 a then a * u else a * l) + rdot_hi w' lo' hi')
  | _, _, _ => 0
  end.

(* the exact range of a piece over the box [lo, hi] *)
Definition piece_lo (p : piece) (lo hi : list Q) : Q := rdot_lo (pw p) lo hi + pb p.
Definition piece_hi (p : piece) (lo hi : list Q) : Q := rdot_hi (pw p) lo hi + pb p.

(* every piece of the layer lies in [-C, C] over the box *)
Definition layer_gates_ok (L : list (list piece)) (C : Q) (lo hi : list Q) : bool :=
  forallb (forallb (fun p => Qle_bool (- C) (piece_lo p lo hi) && Qle_bool (piece_hi p lo hi) C)) L.

(* the same, and [lo', hi'] contains the image of [lo, hi] under the layer (as
   Layerwise.image_ok: for unit i, some piece's lower end is >= lo'_i, every piece's upper end
   is <= hi'_i), each piece's range computed once *)
Fixpoint units_ok (L : list (list piece)) (C : Q) (lo hi lo' hi' : list Q) : bool :=
  match L, lo', hi' with
  | [], [], [] => true
  | u :: L', l' :: lo'', h' :: hi'' =>
      let rs := map (fun p => (piece_lo p lo hi, piece_hi p lo hi)) u in
      forallb (fun r => Qle_bool (- C) (fst r) && Qle_bool (snd r) C) rs &&
      existsb (fun r => Qle_bool l' (fst r)) rs && forallb (fun r => Qle_bool (snd r) h') rs &&
      units_ok L' C lo hi lo'' hi''
  | _, _, _ => false
  end.

(* boxes B_0 .. B_{D-1} of the layers' inputs: layer l's gates over B_l, and B_{l+1} contains
   the interval image of B_l *)
Fixpoint gates_boxes (Ls : list (list (list piece))) (Cs : list Q) (boxes : list (list Q * list Q)) : bool :=
  match Ls, boxes with
  | [], _ => true
  | L :: Ls', (lo, hi) :: boxes' =>
      match Ls', boxes' with
      | [], _ => layer_gates_ok L (hd 0 Cs) lo hi
      | _ :: _, (lo', hi') :: _ => units_ok L (hd 0 Cs) lo hi lo' hi' && gates_boxes Ls' (tl Cs) boxes'
      | _ :: _, [] => false
      end
  | _ :: _, [] => false
  end.

(** The gate condition over a domain: B_0 contains the domain (a box inside a box, or a
    polyhedron inside a box by Farkas multipliers, Layerwise.b0_ok), and the boxes carry the
    gates through the layers. *)
Definition gates_ok (net : maxout) (C : list Q) (D : domain) (boxes : list (list Q * list Q))
           (proofs : list (farkas * farkas)) : bool :=
  match boxes with
  | (lo, hi) :: _ => b0_ok D (mo_dim net) lo hi proofs && gates_boxes (mo_layers net) C boxes
  | [] => false
  end.

(* the exact interval images: B_0 = [lo, hi], B_{l+1} = the image of B_l under layer l *)
Definition qmax (a b : Q) : Q := if Qle_bool a b then b else a.
Definition qmaxl (l : list Q) : Q := match l with [] => 0 | a :: l' => fold_left qmax l' a end.

Definition image_box (L : list (list piece)) (lo hi : list Q) : list Q * list Q :=
  (map (fun u => Qred (qmaxl (map (fun p => piece_lo p lo hi) u))) L,
   map (fun u => Qred (qmaxl (map (fun p => piece_hi p lo hi) u))) L).

Fixpoint interval_boxes (Ls : list (list (list piece))) (lo hi : list Q) : list (list Q * list Q) :=
  match Ls with
  | [] => []
  | L :: Ls' => (lo, hi) :: let '(lo', hi') := image_box L lo hi in interval_boxes Ls' lo' hi'
  end.

(* for a box domain, with no data: the exact interval images of the box *)
Definition gates_ok_box (net : maxout) (C : list Q) (lo hi : list Q) : bool :=
  gates_ok net C (DBox lo hi) (interval_boxes (mo_layers net) lo hi) [].

(* ------------------------------------------------------------------ *)
(** * Size: the parameter count exactmax reports (construct/size.py, transformer_counts) *)

(* every entry of every matrix and vector counts, a head's scale as one *)
Definition mat_count (M : mat) : nat := fold_right (fun r a => (length r + a)%nat) O M.

Definition head_count (hd : head) : nat :=
  mat_count (h_query hd) + mat_count (h_key hd) + mat_count (h_value hd) + mat_count (h_out hd) + 1.

Definition sub_count (s : sublayer) : nat :=
  match s with
  | FeedForward W1 b1 W2 b2 => mat_count W1 + length b1 + mat_count W2 + length b2
  | Attention hs => fold_right (fun hd a => (head_count hd + a)%nat) O hs
  end.

Definition tf_count (tf : transformer) : nat :=
  mat_count (tf_emb tf) + mat_count (tf_pos tf) + mat_count (tf_rW tf) + length (tf_rb tf) +
  fold_right (fun s a => (sub_count s + a)%nat) O (tf_subs tf).

(* the count of one layer's three sub-layers, N units reading prev coordinates, tg targets
   (N, or the rows of the output map after the last layer): the gate feed-forward has k N
   hidden units, each head 4 d_m + 1 parameters, the clean-up 2 (max(prev, tg) + 2 N) hidden
   units *)
Definition layer_size (dm k prev N tg : nat) : nat :=
  let J := Nat.max prev tg in
  (2 * (k * N) * dm + k * N + dm) + N * (4 * dm + 1) +
  (2 * (2 * (J + 2 * N)) * dm + 2 * (J + 2 * N) + dm).

Fixpoint layers_size (dm k : nat) (out : option (list (list Q) * list Q)) (prev : nat)
         (Ls : list (list (list piece))) : nat :=
  match Ls with
  | [] => O
  | L :: Ls' =>
      let tg := match Ls', out with [], Some (A, _) => length A | _, _ => length L end in
      layer_size dm k prev (length L) tg + layers_size dm k out (length L) Ls'
  end.

(** The size of construct net C, in closed form: d_m d (embedding) + k d_m (positions) +
    m d_m + m (read-out) + the layers' counts.  ConstructionSound.construct_count proves
    tf_count (construct net C) = construct_size net for every well-shaped network. *)
Definition construct_size (net : maxout) : nat :=
  let dm := model_dim net in
  let k := net_rank net in
  let m := out_dim net in
  dm * mo_dim net + k * dm + m * dm + m + layers_size dm k (mo_out net) (mo_dim net) (mo_layers net).

(* the Maxout network's own count: sum_l sum_i k_{l,i} (N_{l-1} + 1) + m (N_D + 1) with the
   output map (MaxoutNetwork.parameter_count) *)
Fixpoint maxout_layers_count (prev : nat) (Ls : list (list (list piece))) : nat :=
  match Ls with
  | [] => O
  | L :: Ls' => fold_right (fun u a => (length u * (prev + 1) + a)%nat) O L + maxout_layers_count (length L) Ls'
  end.

Definition maxout_count (net : maxout) : nat :=
  maxout_layers_count (mo_dim net) (mo_layers net) +
  match mo_out net with Some (A, b) => length b * (last (widths net) O + 1) | None => O end.

(* For a polyhedral domain, as compile_transformer bounds it (bounds "lp"): the first layer's
   pieces are bounded over the domain's own rows (Layerwise.dom_rows) by Farkas proofs, one
   pair (C - z >= 0, z + C >= 0) per piece, units in order; B_1 contains h^1 of the domain by
   Layerwise.image_poly_ok (rule (B')); then the boxes carry the gates as in gates_boxes. *)
Fixpoint pieces_gated (P : list con) (C : Q) (ps : list piece) (ws : list (farkas * farkas)) : bool :=
  match ps, ws with
  | [], [] => true
  | p :: ps', (wu, wl) :: ws' =>
      entails P (asub ([], C) (pw p, pb p)) false wu &&
      entails P (asub (pw p, pb p) ([], - C)) false wl && pieces_gated P C ps' ws'
  | _, _ => false
  end.

Definition gates_ok_poly (net : maxout) (C : list Q) (D : domain) (gws : list (farkas * farkas))
           (boxes : list (list Q * list Q)) (iws : list (nat * farkas * list farkas)) : bool :=
  match mo_layers net with
  | [] => true
  | L :: Ls' =>
      pieces_gated (dom_rows D) (hd 0 C) (concat L) gws &&
      match Ls', boxes with
      | [], _ => true
      | _ :: _, (lo', hi') :: _ => image_poly_ok (dom_rows D) L lo' hi' iws && gates_boxes Ls' (tl C) boxes
      | _ :: _, [] => false
      end
  end.

(* ------------------------------------------------------------------ *)
(** * The gate condition in integers (what exported files check) *)

(* gates_ok in Q reduces every partial sum (Qred, a gcd of numbers that grow through the
   layers); here no gcd is taken and every large product has a small factor.  A box has its
   corners on a grid 1/G (lo_j = L_j / G, hi_j = U_j / G; compile_transformer rounds its
   boxes to G = 2^16).  The pieces of layer l are brought to one denominator s_l: for each
   denominator d of the layer, m_d = s_l / d (data, checked: m_d d = s_l), and a table holds
   m_d L_j and m_d U_j for every coordinate j and every d.  A weight n / d then contributes
   n (m_d L_j) or n (m_d U_j) to the ends of the piece's range over the box, a bias n / d
   n (m_d G); the ends are these sums over s_l G, compared with Qle_bool (products only). *)

Definition zbox : Type := (positive * list Z * list Z)%type.

(* the box's corners as rationals (not reduced) *)
Definition qgrid (G : positive) (L : list Z) : list Q := map (fun z => Qmake z G) L.

(* a layer's denominators d with m_d: m_d d = s *)
Definition dms_ok (s : positive) (ms : list (positive * Z)) : bool :=
  forallb (fun dm => Z.eqb (snd dm * Zpos (fst dm)) (Zpos s)) ms.

(* coordinate j's row of the table: (d, m_d L_j, m_d U_j) *)
Definition zrow (ms : list (positive * Z)) (l u : Z) : list (positive * Z * Z) :=
  map (fun dm => (fst dm, (snd dm * l)%Z, (snd dm * u)%Z)) ms.

Fixpoint zrows (ms : list (positive * Z)) (L U : list Z) : list (list (positive * Z * Z)) :=
  match L, U with
  | l :: L', u :: U' => zrow ms l u :: zrows ms L' U'
  | _, _ => []
  end.

Fixpoint zlook (d : positive) (r : list (positive * Z * Z)) : option (Z * Z) :=
  match r with
  | [] => None
  | (d', a, b) :: r' => if Pos.eqb d d' then Some (a, b) else zlook d r'
  end.

(* s G times the exact range of w . h over the box, from the table T of the box *)
Fixpoint zdot (w : list Q) (T : list (list (positive * Z * Z))) : option (Z * Z) :=
  match w, T with
  | q :: w', r :: T' =>
      match zlook (Qden q) r, zdot w' T' with
      | Some (a, b), Some (lo, hi) =>
          let n := Qnum q in
          Some (if Z.leb 0 n then ((n * a + lo)%Z, (n * b + hi)%Z) else ((n * b + lo)%Z, (n * a + hi)%Z))
      | _, _ => None
      end
  | _, _ => Some (0%Z, 0%Z)
  end.

(* the range of the piece p over the box (grid G, table T, bias table TB = zrow ms G G) *)
Definition zrange (p : piece) (s G : positive) (T : list (list (positive * Z * Z)))
           (TB : list (positive * Z * Z)) : option (Q * Q) :=
  match zdot (pw p) T, zlook (Qden (pb p)) TB with
  | Some (lo, hi), Some (c, _) =>
      let cb := (Qnum (pb p) * c)%Z in Some (Qmake (lo + cb) (s * G), Qmake (hi + cb) (s * G))
  | _, _ => None
  end.

Definition zr_gated (C : Q) (r : option (Q * Q)) : bool :=
  match r with Some (lo, hi) => Qle_bool (- C) lo && Qle_bool hi C | None => false end.
Definition zr_lo_ge (x : Q) (r : option (Q * Q)) : bool :=
  match r with Some (lo, _) => Qle_bool x lo | None => false end.
Definition zr_hi_le (x : Q) (r : option (Q * Q)) : bool :=
  match r with Some (_, hi) => Qle_bool hi x | None => false end.

(* the last layer: every piece in [-C, C] *)
Definition zlayer_gates_ok (Lp : list (list piece)) (C : Q) (s G : positive)
           (T : list (list (positive * Z * Z))) (TB : list (positive * Z * Z)) : bool :=
  forallb (forallb (fun p => zr_gated C (zrange p s G T TB))) Lp.

(* as units_ok: the gates over the box, and (G', L', U') contains the layer's image *)
Fixpoint zunits_ok (Lp : list (list piece)) (C : Q) (s G : positive)
         (T : list (list (positive * Z * Z))) (TB : list (positive * Z * Z))
         (G' : positive) (L' U' : list Z) : bool :=
  match Lp, L', U' with
  | [], [], [] => true
  | u :: Lp', l' :: L'', h' :: U'' =>
      let rs := map (fun p => zrange p s G T TB) u in
      forallb (zr_gated C) rs && existsb (zr_lo_ge (Qmake l' G')) rs &&
      forallb (zr_hi_le (Qmake h' G')) rs && zunits_ok Lp' C s G T TB G' L'' U''
  | _, _, _ => false
  end.

(* layer l over the box B_l with its denominators (s_l, [(d, m_d)]) *)
Definition zscales : Type := (positive * list (positive * Z))%type.

Fixpoint zgates_boxes (Ls : list (list (list piece))) (Cs : list Q) (Ss : list zscales)
         (boxes : list zbox) : bool :=
  match Ls, boxes with
  | [], _ => true
  | Lp :: Ls', (G, L, U) :: boxes' =>
      let s := fst (hd (1%positive, []) Ss) in
      let ms := snd (hd (1%positive, []) Ss) in
      let T := zrows ms L U in
      let TB := zrow ms (Zpos G) (Zpos G) in
      dms_ok s ms &&
      match Ls', boxes' with
      | [], _ => zlayer_gates_ok Lp (hd 0 Cs) s G T TB
      | _ :: _, (G', L', U') :: _ => zunits_ok Lp (hd 0 Cs) s G T TB G' L' U' &&
                                     zgates_boxes Ls' (tl Cs) (tl Ss) boxes'
      | _ :: _, [] => false
      end
  | _ :: _, [] => false
  end.

(** The gate condition over a domain with integer boxes: B_0 contains the domain (as in
    gates_ok), and the boxes carry the gates through the layers. *)
Definition zgates_ok (net : maxout) (C : list Q) (D : domain) (boxes : list zbox)
           (Ss : list zscales) (proofs : list (farkas * farkas)) : bool :=
  match boxes with
  | (G, L, U) :: _ => b0_ok D (mo_dim net) (qgrid G L) (qgrid G U) proofs &&
                      zgates_boxes (mo_layers net) C Ss boxes
  | [] => false
  end.

(* for a polyhedron: the first layer by Farkas proofs as in gates_ok_poly, B_1 by rule (B'),
   then the integer boxes (and the denominators) of layers 2, 3, .. *)
Definition zgates_ok_poly (net : maxout) (C : list Q) (D : domain) (gws : list (farkas * farkas))
           (boxes : list zbox) (Ss : list zscales) (iws : list (nat * farkas * list farkas)) : bool :=
  match mo_layers net with
  | [] => true
  | Lp :: Ls' =>
      pieces_gated (dom_rows D) (hd 0 C) (concat Lp) gws &&
      match Ls', boxes with
      | [], _ => true
      | _ :: _, (G, L', U') :: _ => image_poly_ok (dom_rows D) Lp (qgrid G L') (qgrid G U') iws &&
                                    zgates_boxes Ls' (tl C) Ss boxes
      | _ :: _, [] => false
      end
  end.

(* the integer certificate packed as machine integers: the number of boxes, each as G, |L|,
   L, |U|, U; then the number of layers, each as s_l, the number of its denominators and
   the pairs d, m_d *)
Definition rd_pos : reader positive := fun l => let '(z, l') := rd l in (Z.to_pos z, l').

Definition rd_zbox : reader zbox :=
  fun l => let '(G, l1) := rd_pos l in let '(L, l2) := rd_list rd_sZ l1 in
           let '(U, l3) := rd_list rd_sZ l2 in ((G, L, U), l3).

Definition rd_zscales : reader zscales :=
  rd_pair rd_pos (rd_list (rd_pair rd_pos rd_sZ)).

Definition unpack_zcert (a : PArray.array Uint63.int) : list zbox * list zscales :=
  let '(bs, l) := rd_list rd_zbox (unpack a) in (bs, fst (rd_list rd_zscales l)).

(* the two models packed separately, so that a check about the network reads only its part *)
Definition unpack_maxout (a : PArray.array Uint63.int) : maxout := fst (rd_maxout (unpack a)).
Definition unpack_transformer (a : PArray.array Uint63.int) : transformer := fst (rd_transformer (unpack a)).
