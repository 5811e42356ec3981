(* Print Assumptions of the construction's theorems (run by make): only the axioms of Coq's
   standard Reals may appear. *)
From ExactMax Require Import Construction ConstructionSound Theorem32.
Print Assumptions construct_layer.
Print Assumptions construct_correct.
Print Assumptions construct_sound.
Print Assumptions construct_box_sound.
Print Assumptions construct_count.
Print Assumptions construct_poly_sound.
Print Assumptions construct_zsound.
Print Assumptions construct_poly_zsound.
Print Assumptions gates_box_ok.
Print Assumptions theorem_3_2.
Print Assumptions theorem_3_2_poly.
