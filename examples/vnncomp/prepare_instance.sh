#!/bin/bash
# VNN-COMP: prepare one instance. exactmax needs no preparation: it checks that both files
# are there and that exactmax reads them (a refusal is reported here, before the clock runs).
# Usage: prepare_instance.sh v1 CATEGORY ONNX VNNLIB
if [ "$1" != "v1" ]; then echo "expected the version string v1, got '$1'" >&2; exit 1; fi
for f in "$3" "$4"; do
    if [ ! -f "$f" ]; then echo "no such file: $f" >&2; exit 1; fi
done
python3 -m exactmax info "$3" > /dev/null || exit 1
