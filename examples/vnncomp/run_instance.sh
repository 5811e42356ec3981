#!/bin/bash
# VNN-COMP: run one instance; the results file gets sat / unsat / unknown / timeout on its
# first line (sat: then the counterexample ((X_0 v) ... (Y_0 v) ...), exact decimals).
# Every unsat rests on a certificate exactmax's kernel checked, every sat on an exact point
# it evaluated.
# Usage: run_instance.sh v1 CATEGORY ONNX VNNLIB RESULTS_FILE TIMEOUT
if [ "$1" != "v1" ]; then echo "expected the version string v1, got '$1'" >&2; exit 1; fi
exec python3 -m exactmax vnncomp --instance "$3" "$4" --result-file "$5" --timeout "$6"
