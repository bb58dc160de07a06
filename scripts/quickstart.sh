#!/usr/bin/env bash
# Installs what is missing, builds starfa, fetches MovieLens and runs the main job on
# it: load, tile, SDDMM on every worker with a full check, and what ran where.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh" build
"$top/scripts/fetch-data.sh" --only movielens
cd "$top"
build/starfa info
build/starfa stat data/movielens-small.csv
build/starfa sddmm --input data/movielens-small.csv --rank 64 --check
