#!/bin/bash
# VNN-COMP: install exactmax (run once, from this folder of a clone of exactmax).
# Usage: install_tool.sh v1
set -e
if [ "$1" != "v1" ]; then echo "expected the version string v1, got '$1'" >&2; exit 1; fi
ROOT=$(cd "$(dirname "$(realpath "$0")")/../.." && pwd)
python3 -m pip install "$ROOT"
python3 -m exactmax --version
