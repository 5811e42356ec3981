From ExactMax Require Import Checker Sound Build Maxout Export.
Print Assumptions check_cert_sound.
Print Assumptions maxout_program_correct.
Print Assumptions maxout_equiv.
