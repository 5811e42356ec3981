From ExactMax Require Import Checker Sound Build Maxout Transformer Export Layerwise Relaxed Property Pair
  Correspondence.
Print Assumptions check_cert_sound.
Print Assumptions maxout_program_correct.
Print Assumptions transformer_program_correct.
Print Assumptions equiv_sound.
Print Assumptions equiv_box_sound.
Print Assumptions equiv_poly_sound.
Print Assumptions layerwise_sound.
Print Assumptions mm_layerwise_sound.
Print Assumptions merged_layerwise_sound.
Print Assumptions relax_sound.
Print Assumptions property_sound.
Print Assumptions maxout_property_sound.
Print Assumptions maxout_property_parts_sound.
Print Assumptions maxout_eps_sound.
Print Assumptions maxout_top1_sound.
Print Assumptions model_eps_sound.
Print Assumptions model_top1_sound.
Print Assumptions free_eps_sound.
Print Assumptions free_top1_sound.
Print Assumptions corr_sound.
