(* Checker.v -- the certificate checker of exactmax, as a boolean function over Q.

   It mirrors exactmax/kernel/certificate.py rule for rule:
   - programs of Lin / Max / Hardmax nodes (Program.v of the Python kernel);
   - constraints a . x + c >= 0 (or > 0), numbered absolutely: the domain's rows first, then
     one row per split on the way down (appended), so a choice stated at a split holds in
     every leaf below it and is inherited; a split's choices are checked on its own cell,
     and the affine maps known there are passed down instead of being checked again in
     every leaf (the Python kernel checks each leaf afresh; on trees that state each node's
     choice once on every path, as export-coq writes them, both accept the same trees);
   - Farkas entailment with strictness;
   - leaves that fix the argument of Max and Hardmax nodes (Hardmax ties through tie proofs),
     the same-max rule (a node that is not max-like is the max of itself) and the composite
     rule for the outputs.

   Symbolic evaluation is partial: a node whose choice is missing or fails to check gets no
   affine map (None), and so does everything computed from it; only the outputs must come out
   right.  That is how per-output cones work: nodes an output does not need need no choice.
   Soundness (over R) is proved in Sound.v. *)

From Coq Require Import QArith List Bool.
From Coq Require Uint63 PArray.
Export (notations) Uint63.   (* importers read machine-integer literals too (qi, qn, packed arrays) *)
Import ListNotations.
Open Scope Q_scope.

(* p / q and -p / q written with machine-integer literals (q > 0), as exported files write
   the weights of networks: coqc reads these literals directly, while Q's numerals are
   converted by evaluating Gallina (ten times slower; 10 s for an ACAS Xu network's 13,000
   weights) *)
Definition qi (p q : Uint63.int) : Q := Qmake (Uint63.to_Z p) (Z.to_pos (Uint63.to_Z q)).
Definition qn (p q : Uint63.int) : Q := Qmake (- Uint63.to_Z p) (Z.to_pos (Uint63.to_Z q)).
Arguments qi p%uint63_scope q%uint63_scope.
Arguments qn p%uint63_scope q%uint63_scope.

(* ------------------------------------------------------------------ *)
(** * Dense vectors and affine maps *)

Definition vec := list Q.

(* comparisons and raw operations that skip the denominators when they are 1 (as they are in
   most Farkas combinations): the same values as Qeq_bool, Qle_bool, Qplus and Qmult (sums
   with other denominators are reduced, lest they grow along a combination) *)
Definition qeqb (a b : Q) : bool :=
  match Qden a, Qden b with xH, xH => Z.eqb (Qnum a) (Qnum b) | _, _ => Qeq_bool a b end.
Definition qleb (a b : Q) : bool :=
  match Qden a, Qden b with xH, xH => Z.leb (Qnum a) (Qnum b) | _, _ => Qle_bool a b end.
(* e with p = 2^e, when p is a power of two *)
Fixpoint pow2_exp (p : positive) : option Z :=
  match p with
  | xH => Some 0%Z
  | xO p' => match pow2_exp p' with Some e => Some (Z.succ e) | None => None end
  | xI _ => None
  end.

(* a + b for dyadic a, b (denominators 2^j, 2^k, j <= k): the numerator of a shifted by k - j
   plus b's, over 2^k, unreduced (no gcd: sums of float weights have 200-bit dyadic
   coefficients, where Qred's gcd was 30x the cost of the sum); other sums reduced *)
Definition qadd_dyadic (a b : Q) : Q :=
  match pow2_exp (Qden a), pow2_exp (Qden b) with
  | Some j, Some k =>
      if Z.leb j k then Qmake (Z.shiftl (Qnum a) (k - j) + Qnum b) (Qden b)
      else Qmake (Qnum a + Z.shiftl (Qnum b) (j - k)) (Qden a)
  | _, _ => Qred (a + b)
  end.

Definition qadd_nz (a b : Q) : Q :=
  match Qden a, Qden b with xH, xH => Qmake (Qnum a + Qnum b) 1 | _, _ => qadd_dyadic a b end.

(* a + b, a zero term skipped (maps over z = (x, v_0, ...) are dense and mostly zero) *)
Definition qadd (a b : Q) : Q :=
  if Z.eqb (Qnum a) 0 then b else if Z.eqb (Qnum b) 0 then a else qadd_nz a b.
(* c * a with the recursion of Pos.mul on a's numerator and c's denominator: a row's small
   coefficients, a multiplier's denominator 1 *)
Definition qmul (c a : Q) : Q := Qmake (Qnum a * Qnum c) (Qden c * Qden a).

Fixpoint vadd (u v : vec) : vec :=
  match u, v with
  | [], _ => v
  | _, [] => u
  | a :: u', b :: v' => qadd a b :: vadd u' v'
  end.

(* c * a: unreduced for dyadic c, a (the product of denominators 2^j 2^k is 2^(j + k): no
   gcd), reduced otherwise *)
Definition qscale (c a : Q) : Q :=
  if Z.eqb (Qnum a) 0 then 0 else
  match pow2_exp (Qden c), pow2_exp (Qden a) with
  | Some _, Some _ => qmul c a
  | _, _ => Qred (c * a)
  end.

Definition vscale (c : Q) (u : vec) : vec := map (qscale c) u.

Definition vzero (u : vec) : bool := forallb (fun a => qeqb a 0) u.

(* u = v, coordinate by coordinate (missing coordinates are 0) *)
Fixpoint veqb (u v : vec) : bool :=
  match u, v with
  | [], _ => vzero v
  | _, [] => vzero u
  | a :: u', b :: v' => if qeqb a b then veqb u' v' else false
  end.

(* an affine map x |-> lin . x + cst *)
Definition aff := (vec * Q)%type.
Definition azero : aff := ([], 0).
Definition aadd (a b : aff) : aff := (vadd (fst a) (fst b), qadd (snd a) (snd b)).
Definition ascale (c : Q) (a : aff) : aff := (vscale c (fst a), qscale c (snd a)).
Definition aneg (a : aff) : aff := (map Qopp (fst a), Qopp (snd a)).
Definition asub (a b : aff) : aff := aadd a (aneg b).
Definition aeqb (a b : aff) : bool := if qeqb (snd a) (snd b) then veqb (fst a) (fst b) else false.

(* the same operations without reducing fractions: cheaper where a result is only tested
   (Farkas combinations), never kept *)
Fixpoint vadd_raw (u v : vec) : vec :=
  match u, v with
  | [], _ => v
  | _, [] => u
  | a :: u', b :: v' => qadd a b :: vadd_raw u' v'
  end.

Definition vscale_raw (c : Q) (u : vec) : vec := map (qmul c) u.
Definition aadd_raw (a b : aff) : aff := (vadd_raw (fst a) (fst b), qadd (snd a) (snd b)).
Definition ascale_raw (c : Q) (a : aff) : aff := (vscale_raw c (fst a), qmul c (snd a)).

(* y h + acc, skipping the zero coordinates of h (rows of a box have one nonzero) *)
Fixpoint vaxpy_raw (y : Q) (h acc : vec) : vec :=
  match h, acc with
  | [], _ => acc
  | a :: h', [] => qmul y a :: vaxpy_raw y h' []
  | a :: h', b :: acc' =>
      match Qnum a with Z0 => b | _ => qadd (qmul y a) b end :: vaxpy_raw y h' acc'
  end.
Definition aaxpy_raw (y : Q) (h acc : aff) : aff :=
  (vaxpy_raw y (fst h) (fst acc), qadd (qmul y (snd h)) (snd acc)).

(* u with v added at coordinate i (a zero coordinate just takes v) *)
Fixpoint add_at (i : nat) (v : Q) (u : vec) : vec :=
  match i, u with
  | O, [] => [v]
  | O, a :: u' => match Qnum a with Z0 => v | _ => qadd a v end :: u'
  | S i', [] => 0 :: add_at i' v []
  | S i', a :: u' => a :: add_at i' v u'
  end.

(* the dense vector of a sparse one: (i, v) puts v at coordinate i *)
Definition sparse_aff (xs : list (nat * Q)) (c : Q) : aff :=
  (fold_right (fun t acc => add_at (fst t) (snd t) acc) [] xs, c).

(* ------------------------------------------------------------------ *)
(** * Constraints and Farkas entailment *)

(* (h, strict): h(x) >= 0, or h(x) > 0 when strict *)
Definition con := (aff * bool)%type.

(* a scale D > 0 and sparse multipliers (absolute row index, y): D g = sum y_i h_i + r *)
Definition farkas := (Q * list (nat * Q))%type.

Fixpoint comb (H : list con) (w : list (nat * Q)) : option (aff * bool) :=
  match w with
  | [] => Some (azero, false)
  | (i, y) :: w' =>
      match nth_error H i, comb H w' with
      | Some (h, s), Some (c, st) =>
          if qleb 0 y
          then Some (aaxpy_raw y h c, st || (s && negb (Qle_bool y 0)))
          else None
      | _, _ => None
      end
  end.

(* H entails g >= 0 (g > 0 when strict): D g - sum y_i h_i is a constant r >= 0 (D > 0), with
   r > 0 or a strict row of positive weight when strictness is asked for.  The scale D lets
   the multipliers be integers (with integral rows, the sums stay integral and small).  With
   c = sum y_i h_i: the linear parts of D g and c are equal, and r = D g_0 - c_0. *)
Definition entails (H : list con) (g : aff) (strict : bool) (f : farkas) : bool :=
  let '(D, w) := f in
  if qleb D 0 then false else
  match comb H w with
  | None => false
  | Some (c, st) =>
      let Dg := ascale_raw D g in
      if veqb (fst Dg) (fst c) then
        if strict
        then (if st then qleb (snd c) (snd Dg) else false) || negb (qleb (snd Dg) (snd c))
        else qleb (snd c) (snd Dg)
      else false
  end.

(* ------------------------------------------------------------------ *)
(** * Programs *)

(* Node i reads nodes by absolute index; out-of-range reads are 0 in the semantics and
   unknown to the checker. *)
Inductive node :=
| NLin (xs : list (nat * Q)) (c : Q) (terms : list (nat * Q))
    (* sum_i a_i x_i + c + sum_j c_j v_j *)
| NMax (args : list nat)
| NSel (pairs : list (nat * nat)).
    (* hardmax: the mean of v_value over the pairs whose v_score is maximal *)

Record prog := { p_nodes : list node; p_outs : list nat }.

(* ------------------------------------------------------------------ *)
(** * Leaf certificates *)

Inductive proof :=
| PNone                                (* no proof: only for arguments equal to the chosen *)
| PFar (w : farkas)                    (* Max: a_k - a_j >= 0;  Hardmax: s_k - s_j > 0 *)
| PTie (dom up lo : farkas).           (* Hardmax: s_k - s_j >= 0, and on the tie set
                                          s_j - s_k >= 0 (an extra last row): v_j = v_k *)

Record choice := { ch_k : nat; ch_proofs : list proof }.

(* (program 0 or 1, node index, choice) *)
Definition choices := list (nat * nat * choice).

Fixpoint find_choice (side i : nat) (cs : choices) : option choice :=
  match cs with
  | [] => None
  | (s, j, c) :: cs' => if Nat.eqb s side && Nat.eqb j i then Some c else find_choice side i cs'
  end.

Fixpoint forall2b {A B} (f : A -> B -> bool) (l1 : list A) (l2 : list B) : bool :=
  match l1, l2 with
  | [], [] => true
  | a :: l1', b :: l2' => f a b && forall2b f l1' l2'
  | _, _ => false
  end.

Fixpoint all_some {A} (l : list (option A)) : option (list A) :=
  match l with
  | [] => Some []
  | None :: _ => None
  | Some a :: l' => match all_some l' with Some r => Some (a :: r) | None => None end
  end.

Definition get (senv : list (option aff)) (i : nat) : option aff := nth i senv None.

Fixpoint lincomb_sym (senv : list (option aff)) (ts : list (nat * Q)) : option aff :=
  match ts with
  | [] => Some azero
  | (j, c) :: ts' =>
      match get senv j, lincomb_sym senv ts' with
      | Some a, Some r => Some (aadd (ascale c a) r)
      | _, _ => None
      end
  end.

Definition max_ok (C : list con) (ak : aff) (aj : aff) (p : proof) : bool :=
  match p with
  | PNone => aeqb ak aj
  | PFar w => entails C (asub ak aj) false w
  | PTie _ _ _ => false
  end.

Definition sel_ok (C : list con) (sk vk : aff) (sv : aff * aff) (p : proof) : bool :=
  let '(sj, vj) := sv in
  match p with
  | PNone => aeqb sk sj && aeqb vk vj
  | PFar w => entails C (asub sk sj) true w
  | PTie d u l =>
      let T := C ++ [(asub sj sk, false)] in
      entails C (asub sk sj) false d && entails T (asub vj vk) false u &&
      entails T (asub vk vj) false l
  end.

(* The affine map of node n on the cell: Some (Some a); unknown: Some None (a Max or Hardmax
   node without a choice, or a node reading an unknown one); None when a choice is given, can
   be checked, and is wrong: then the whole leaf is rejected, as the Python kernel does. *)
Definition snode (C : list con) (n : node) (oc : option choice) (senv : list (option aff))
  : option (option aff) :=
  match n with
  | NLin xs c ts =>
      Some (match lincomb_sym senv ts with
            | Some r => Some (aadd (sparse_aff xs c) r)
            | None => None
            end)
  | NMax args =>
      match oc with
      | None => Some None
      | Some ch =>
          match all_some (map (get senv) args) with
          | None => Some None
          | Some A =>
              match nth_error A (ch_k ch) with
              | Some ak => if forall2b (max_ok C ak) A (ch_proofs ch) then Some (Some ak) else None
              | None => None
              end
          end
      end
  | NSel prs =>
      match oc with
      | None => Some None
      | Some ch =>
          match all_some (map (fun p => get senv (fst p)) prs),
                all_some (map (fun p => get senv (snd p)) prs) with
          | Some Sc, Some Vc =>
              match nth_error Sc (ch_k ch), nth_error Vc (ch_k ch) with
              | Some sk, Some vk =>
                  if forall2b (sel_ok C sk vk) (combine Sc Vc) (ch_proofs ch)
                  then Some (Some vk) else None
              | _, _ => None
              end
          | _, _ => Some None
          end
      end
  end.

(* the nodes a node reads *)
Definition reads (n : node) : list nat :=
  match n with
  | NLin _ _ ts => map fst ts
  | NMax args => args
  | NSel prs => map fst prs ++ map snd prs
  end.

(* The nodes the outputs depend on, as a mask: node i is needed when it is an output or a
   needed node after it reads it.  Runs compute only the needed nodes (the others stay
   unknown, None, which is always sound): a claim about a few outputs of a layer (Layerwise.v)
   evaluates only their cone. *)
Fixpoint mark (i : nat) (l : list bool) : list bool :=
  match i, l with
  | O, _ :: l' => true :: l'
  | S i', b :: l' => b :: mark i' l'
  | _, [] => []
  end.

(* from the last node back: [rneed] says which of the nodes from the current one back are
   needed (so a read of node j by node i is at i - 1 - j in the rest), the mask is built in
   [acc] *)
Fixpoint need_back (rn : list (nat * node)) (rneed acc : list bool) : list bool :=
  match rn, rneed with
  | (i, n) :: rn', b :: rneed' =>
      need_back rn' (if b then fold_right (fun j l => mark (i - S j) l) rneed' (reads n) else rneed')
                (b :: acc)
  | _, _ => acc
  end.

Definition needed (p : prog) : list bool :=
  let k := length (p_nodes p) in
  need_back (rev_append (combine (seq 0 k) (p_nodes p)) [])
            (rev_append (fold_right mark (repeat false k) (p_outs p)) []) [].

(* symbolic run: node i gets its affine map on the cell, or None; the run fails on a wrong
   choice.  [need] masks the nodes to compute (see [needed]; a missing entry counts as
   needed).  [prev] holds what the cell above already knows (node by node, from the same
   program): a node known there keeps its map, unchecked again, since the cell lies inside
   the cell above. *)
Fixpoint srun (C : list con) (side : nat) (cs : choices) (ns : list node) (need : list bool)
              (prev : list (option aff)) (senv : list (option aff)) : option (list (option aff)) :=
  match ns with
  | [] => Some senv
  | n :: ns' =>
      match need with
      | false :: need' => srun C side cs ns' need' (tl prev) (senv ++ [None])
      | _ =>
          match prev with
          | Some a :: prev' => srun C side cs ns' (tl need) prev' (senv ++ [Some a])
          | _ =>
              match snode C n (find_choice side (length senv) cs) senv with
              | Some v => srun C side cs ns' (tl need) (tl prev) (senv ++ [v])
              | None => None
              end
          end
      end
  end.

(* ------------------------------------------------------------------ *)
(** * Output agreement: equal affine maps, the same-max rule, the composite rule *)

(* the nodes a max-like node is the max of: a Max node's arguments, or the values of a
   hardmax head whose every score is its own value *)
Definition max_args (n : node) : option (list nat) :=
  match n with
  | NMax args => Some args
  | NSel prs =>
      match prs with
      | [] => None
      | _ => if forallb (fun p => Nat.eqb (fst p) (snd p)) prs then Some (map snd prs) else None
      end
  | NLin _ _ _ => None
  end.

Definition node_at (p : prog) (i : nat) : node := nth i (p_nodes p) (NMax []).

(* (the VM evaluates both arguments of || and &&: the tests that can stop early are written
   with if) *)
Fixpoint memb (a : aff) (l : list aff) : bool :=
  match l with [] => false | b :: l' => if aeqb a b then true else memb a l' end.

Definition same_set (A B : list aff) : bool :=
  forallb (fun a => memb a B) A && forallb (fun b => memb b A) B.

(* the affine maps whose max node i of p is on the cell: its arguments' for a max-like node
   (a program's node reading only nodes before it), its own (max {a} = a) for any other *)
Definition mvals (p : prog) (v : list (option aff)) (i : nat) : option (list aff) :=
  match max_args (node_at p i) with
  | Some ai =>
      if (i <? length (p_nodes p)) && forallb (fun a => a <? i) ai
      then all_some (map (get v) ai) else None
  | None => match get v i with Some a => Some [a] | None => None end
  end.

(* node i of f and node j of g have the same value on the cell: equal maps, or (the same-max
   rule) both the max of the same set of maps, a node that is not max-like counting as the
   max of itself (units of lower rank and rank 1) *)
Definition agree1 (f g : prog) (vf vg : list (option aff)) (i j : nat) : bool :=
  if match get vf i, get vg j with
     | Some a, Some b => aeqb a b
     | _, _ => false
     end
  then true else
  match mvals f vf i, mvals g vg j with
  | Some A, Some B => same_set A B
  | _, _ => false
  end.

Fixpoint remove_match (ok : nat * Q -> bool) (l : list (nat * Q)) : option (list (nat * Q)) :=
  match l with
  | [] => None
  | t :: l' => if ok t then Some l' else
                 match remove_match ok l' with Some r => Some (t :: r) | None => None end
  end.

Fixpoint match_terms (ok : nat -> nat -> bool) (tf tg : list (nat * Q)) : bool :=
  match tf with
  | [] => match tg with [] => true | _ => false end
  | (a, w) :: tf' =>
      match remove_match (fun t => Qeq_bool w (snd t) && ok a (fst t)) tg with
      | Some tg' => match_terms ok tf' tg'
      | None => false
      end
  end.

Fixpoint sparse_eqb (u v : list (nat * Q)) : bool :=
  match u, v with
  | [], [] => true
  | (i, a) :: u', (j, b) :: v' => Nat.eqb i j && Qeq_bool a b && sparse_eqb u' v'
  | _, _ => false
  end.

Definition agree_out (f g : prog) (vf vg : list (option aff)) (i j : nat) : bool :=
  if agree1 f g vf vg i j then true else
  match node_at f i, node_at g j with
  | NLin xf cf tf, NLin xg cg tg =>
      (i <? length (p_nodes f)) && (j <? length (p_nodes g)) &&
      forallb (fun t => fst t <? i) tf && forallb (fun t => fst t <? j) tg &&
      sparse_eqb xf xg && Qeq_bool cf cg && match_terms (agree1 f g vf vg) tf tg
  | _, _ => false
  end.

(* ------------------------------------------------------------------ *)
(** * The split tree *)

Inductive tree :=
| Leaf (cs : choices)
| Empty (w : farkas)                         (* the cell is empty: it entails 0 > 0 *)
| Split (h : aff) (cs : choices) (ge lt : tree).
    (* ge: h >= 0 appended; lt: -h > 0 appended *)

Definition check_leaf (f g : prog) (nf ng : list bool) (C : list con) (cs : choices)
                      (pf pg : list (option aff)) : bool :=
  match srun C 0 cs (p_nodes f) nf pf [], srun C 1 cs (p_nodes g) ng pg [] with
  | Some vf, Some vg => forall2b (agree_out f g vf vg) (p_outs f) (p_outs g)
  | _, _ => false
  end.

(* the choices still to be used below: those of nodes not known yet *)
Definition unresolved (vf vg : list (option aff)) (cs : choices) : choices :=
  filter (fun e => let '(s, j, _) := e in
                   match get (if Nat.eqb s 0 then vf else vg) j with
                   | Some _ => false
                   | None => true
                   end) cs.

(* A split's choices are checked on the split's own cell, once: its symbolic run is passed
   down, and both halves start from what it knows.  Choices are inherited too, for nodes whose
   arguments become known only further down. *)
Fixpoint check_tree (f g : prog) (nf ng : list bool) (C : list con) (inh : choices)
                    (pf pg : list (option aff)) (t : tree) : bool :=
  match t with
  | Empty w => entails C azero true w
  | Leaf cs => check_leaf f g nf ng C (cs ++ inh) pf pg
  | Split h [] l r =>
      (* no new choice: the run would find what the cell above knows *)
      check_tree f g nf ng (C ++ [(h, false)]) inh pf pg l &&
      check_tree f g nf ng (C ++ [(ascale (-1) h, true)]) inh pf pg r
  | Split h cs l r =>
      match srun C 0 (cs ++ inh) (p_nodes f) nf pf [], srun C 1 (cs ++ inh) (p_nodes g) ng pg [] with
      | Some vf, Some vg =>
          let inh' := unresolved vf vg (cs ++ inh) in
          check_tree f g nf ng (C ++ [(h, false)]) inh' vf vg l &&
          check_tree f g nf ng (C ++ [(ascale (-1) h, true)]) inh' vf vg r
      | _, _ => false
      end
  end.

(* ------------------------------------------------------------------ *)
(** * Domains *)

(* A x <= b as rows b_i - A_i x >= 0 *)
Definition rows_of_poly (A : list vec) (b : list Q) : list con :=
  map (fun r => ((vscale (-1) (fst r), snd r), false)) (combine A b).

Fixpoint basis (d i : nat) (v : Q) : vec :=
  match d, i with
  | O, _ => []
  | S d', O => v :: repeat 0 d'
  | S d', S i' => 0 :: basis d' i' v
  end.

(* the rows of a box, in the order of Box.as_polyhedron: x_i <= u_i, then -x_i <= -l_i *)
Definition rows_of_box (lo hi : vec) : list con :=
  let d := length lo in
  map (fun p => ((basis d (fst p) (-1), snd p), false)) (combine (seq 0 d) hi) ++
  map (fun p => ((basis d (fst p) 1, - snd p), false)) (combine (seq 0 d) lo).

Definition check_cert (f g : prog) (dom : list con) (t : tree) : bool :=
  (length (p_outs f) =? length (p_outs g))%nat &&
  check_tree f g (needed f) (needed g) dom [] [] [] t.

(* ------------------------------------------------------------------ *)
(** * Packed certificates *)

(* Exported files write the split tree as one array of machine integers, which Coq reads many
   times faster than the same tree written as terms.  This is only a way of writing: the
   checker sees the tree [unpack_tree] builds, and check_cert is sound for every tree, so
   nothing here needs a proof (a malformed array unpacks to some tree, which is checked like
   any other).

   The array holds bytes, 7 per word (least significant first); the bytes hold a stream of
   numbers n >= 0, each as groups of 7 bits, least significant first, all but a number's last
   byte with the high bit set.  Signed numbers are zigzagged (2 n, or -2 n - 1 when n < 0).
   The stream holds five tables, each its length then its items, the later ones referring to
   the earlier ones by index (0-based):
   - Farkas lists: D (signed), the number of pairs, and each pair's row and multiplier (signed);
   - affine maps: the number of coefficients, the coefficients, the constant, each a rational
     as its numerator (signed) and denominator;
   - choice entries: program, node, k, the number of proofs, and each proof: 0 (PNone),
     1 f (PFar), 2 f f f (PTie), f a Farkas list's index;
   - choice lists: their length and their entries' indices;
   - tree nodes, children before parents: 0 c (Leaf), 1 f (Empty), 2 a c ge lt (Split). *)

(* The stream of numbers is read from the array where it lies, number by number, through a
   cursor (word i, byte j of it): nothing is unpacked ahead of the readers, so a large
   certificate is held once, as its array and as what has been read of it. *)
Record cursor := mkcur { cur_a : PArray.array Uint63.int; cur_i : Uint63.int; cur_j : Uint63.int }.
Definition stream := cursor.

(* a small machine integer (< 2^n) as Z *)
Fixpoint small_Z (n : nat) (i : Uint63.int) : Z :=
  match n with
  | O => 0%Z
  | S n' =>
      if Uint63.eqb i 0%uint63 then 0%Z else
      let r := small_Z n' (Uint63.lsr i 1%uint63) in
      if Uint63.eqb (Uint63.land i 1%uint63) 0%uint63 then Z.double r else Z.succ_double r
  end.

(* word i is stored xor'ed with i * K (mod 2^63): Coq hash-conses machine integers by their
   low bits, and a stream's words often share them (multipliers with one denominator), which
   made reading the literal quadratic (100,000 words with equal low 40 bits: 196 s; mixed: 4 s) *)
Definition scramble (i : Uint63.int) : Uint63.int := Uint63.mul i 2177342782468422677%uint63.

(* byte j of word i (bytes 7 to a word, least significant first); 0 past the array's end *)
Definition cur_byte (c : cursor) : Uint63.int :=
  let w := Uint63.lxor (PArray.get (cur_a c) (cur_i c)) (scramble (cur_i c)) in
  if Uint63.ltb (cur_i c) (PArray.length (cur_a c))
  then Uint63.land (Uint63.lsr w (Uint63.mul 8%uint63 (cur_j c))) 255%uint63 else 0%uint63.

Definition cur_next (c : cursor) : cursor :=
  if Uint63.eqb (cur_j c) 6%uint63 then mkcur (cur_a c) (Uint63.add (cur_i c) 1%uint63) 0%uint63
  else mkcur (cur_a c) (cur_i c) (Uint63.add (cur_j c) 1%uint63).

(* a number is groups of 7 bits, least significant first, the high bit set on all but the
   last byte: its groups, the last first, read in chunks of at most fuel groups (true: the last
   group was read) *)
Fixpoint rd_chunk (fuel : nat) (c : cursor) (gs : list Uint63.int)
  : bool * list Uint63.int * cursor :=
  match fuel with
  | O => (false, gs, c)
  | S f =>
      let b := cur_byte c in
      if Uint63.ltb b 128%uint63 then (true, b :: gs, cur_next c)
      else rd_chunk f (cur_next c) (Uint63.sub b 128%uint63 :: gs)
  end.

Fixpoint rd_groups (k : nat) (c : cursor) (gs : list Uint63.int) : list Uint63.int * cursor :=
  match k with
  | O => (gs, c)
  | S k' => let '(last, gs', c') := rd_chunk 128 c gs in if last then (gs', c') else rd_groups k' c' gs'
  end.

(* the array's stream, from its start *)
Definition unpack (a : PArray.array Uint63.int) : stream := mkcur a 0%uint63 0%uint63.

Definition reader (A : Type) := stream -> A * stream.

(* numbers of up to 7 * 128 * 512 bits *)
Definition rd : reader Z := fun c =>
  let '(gs, c') := rd_groups 512 c [] in
  (fold_left (fun acc g => Z.shiftl acc 7 + small_Z 7 g)%Z gs 0%Z, c').
Definition rd_nat : reader nat := fun l => let '(z, l') := rd l in (Z.to_nat z, l').
Definition rd_idx : reader Uint63.int := fun l => let '(z, l') := rd l in (Uint63.of_Z z, l').
Definition unzig (z : Z) : Z := if Z.even z then Z.div2 z else (- Z.div2 (z + 1))%Z.
Definition rd_sZ : reader Z := fun l => let '(z, l') := rd l in (unzig z, l').
Definition rd_Q : reader Q :=
  fun l => let '(n, l1) := rd_sZ l in let '(d, l2) := rd l1 in (Qmake n (Z.to_pos d), l2).

Fixpoint rd_rep {A} (n : nat) (r : reader A) : reader (list A) :=
  fun l => match n with
           | O => ([], l)
           | S n' => let '(x, l1) := r l in let '(xs, l2) := rd_rep n' r l1 in (x :: xs, l2)
           end.

Definition rd_list {A} (r : reader A) : reader (list A) :=
  fun l => let '(n, l1) := rd_nat l in rd_rep n r l1.

(* a table: its items, each read knowing the items before it *)
Fixpoint fill {A} (n : nat) (i : Uint63.int) (r : PArray.array A -> reader A)
              (t : PArray.array A) (l : stream) : PArray.array A * stream :=
  match n with
  | O => (t, l)
  | S n' => let '(x, l1) := r t l in fill n' (Uint63.add i 1%uint63) r (PArray.set t i x) l1
  end.

Definition rd_table {A} (default : A) (r : PArray.array A -> reader A) : reader (PArray.array A) :=
  fun l => let '(n, l1) := rd_nat l in
           fill n 0%uint63 r (PArray.make (Uint63.of_Z (Z.of_nat n)) default) l1.

Definition no_farkas : farkas := (0, []).

Definition rd_farkas : reader farkas :=
  fun l => let '(D, l1) := rd_sZ l in
           let '(w, l2) := rd_list (fun l => let '(i, l1) := rd_nat l in
                                             let '(y, l2) := rd_sZ l1 in ((i, inject_Z y), l2)) l1 in
           ((inject_Z D, w), l2).

(* A Farkas list left where it lies: the cursor at its start, read when it is checked
   (farkas_at).  A relaxed leaf of a float network has hundreds of upper functions, each
   proved by Farkas lists of 600-bit multipliers: read ahead, as Coq's binary integers, those
   of ACAS Xu property 1's certificate took 5 GB; read when checked, one at a time. *)
Definition farkas_at (c : cursor) : farkas := fst (rd_farkas c).

(* past one number: bytes up to the first below 128 (in chunks, as rd_groups reads) *)
Fixpoint skip_chunk (fuel : nat) (c : cursor) : bool * cursor :=
  match fuel with
  | O => (false, c)
  | S f => if Uint63.ltb (cur_byte c) 128%uint63 then (true, cur_next c) else skip_chunk f (cur_next c)
  end.
Fixpoint skip_num_k (k : nat) (c : cursor) : cursor :=
  match k with
  | O => c
  | S k' => let '(last, c') := skip_chunk 128 c in if last then c' else skip_num_k k' c'
  end.
Definition skip_num (c : cursor) : cursor := skip_num_k 512 c.
Fixpoint skip_nums (n : nat) (c : cursor) : cursor :=
  match n with O => c | S n' => skip_nums n' (skip_num c) end.

(* past one Farkas list: D, then n pairs (row index, multiplier) *)
Definition skip_farkas (c : cursor) : cursor :=
  let '(n, c1) := rd_nat (skip_num c) in skip_nums (2 * n) c1.

Definition rd_aff : reader aff :=
  fun l => let '(a, l1) := rd_list rd_Q l in let '(c, l2) := rd_Q l1 in ((a, c), l2).

(* F i: the Farkas list of index i (Checker's tables hold them read, Property's where they
   lie in the stream) *)
Definition rd_proof (F : Uint63.int -> farkas) : reader proof :=
  fun l => let '(k, l1) := rd l in
           match k with
           | 1%Z => let '(f, l2) := rd_idx l1 in (PFar (F f), l2)
           | 2%Z => let '(d, l2) := rd_idx l1 in let '(u, l3) := rd_idx l2 in
                    let '(o, l4) := rd_idx l3 in
                    (PTie (F d) (F u) (F o), l4)
           | _ => (PNone, l1)
           end.

Definition rd_entry (F : Uint63.int -> farkas) : reader (nat * nat * choice) :=
  fun l => let '(s, l1) := rd_nat l in let '(j, l2) := rd_nat l1 in let '(k, l3) := rd_nat l2 in
           let '(ps, l4) := rd_list (rd_proof F) l3 in
           ((s, j, {| ch_k := k; ch_proofs := ps |}), l4).

Definition rd_choices (E : PArray.array (nat * nat * choice)) : reader choices :=
  rd_list (fun l => let '(i, l1) := rd_idx l in (PArray.get E i, l1)).

Definition no_tree : tree := Empty no_farkas.

Definition rd_tree (F : PArray.array farkas) (A : PArray.array aff)
                   (C : PArray.array choices) (T : PArray.array tree) : reader tree :=
  fun l => let '(k, l1) := rd l in
           match k with
           | 0%Z => let '(c, l2) := rd_idx l1 in (Leaf (PArray.get C c), l2)
           | 1%Z => let '(f, l2) := rd_idx l1 in (Empty (PArray.get F f), l2)
           | 2%Z => let '(a, l2) := rd_idx l1 in let '(c, l3) := rd_idx l2 in
                    let '(g, l4) := rd_idx l3 in let '(t, l5) := rd_idx l4 in
                    (Split (PArray.get A a) (PArray.get C c) (PArray.get T g) (PArray.get T t), l5)
           | _ => (no_tree, l1)
           end.

Record tables := {
  tb_farkas : PArray.array farkas;
  tb_trees : PArray.array tree
}.

Definition rd_tables : reader tables :=
  fun l => let '(F, l1) := rd_table no_farkas (fun _ => rd_farkas) l in
           let '(A, l2) := rd_table azero (fun _ => rd_aff) l1 in
           let '(E, l3) := rd_table (0%nat, 0%nat, {| ch_k := 0; ch_proofs := [] |})
                                    (fun _ => rd_entry (PArray.get F)) l2 in
           let '(C, l4) := rd_table [] (fun _ => rd_choices E) l3 in
           let '(T, l5) := rd_table no_tree (rd_tree F A C) l4 in
           ({| tb_farkas := F; tb_trees := T |}, l5).

(* a monolithic certificate: the tables, then the root's index *)
Definition unpack_tree (a : PArray.array Uint63.int) : tree :=
  let '(tb, l) := rd_tables (unpack a) in
  let '(r, _) := rd_idx l in PArray.get (tb_trees tb) r.
