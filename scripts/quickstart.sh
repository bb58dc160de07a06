#!/usr/bin/env bash
# Installs what is missing, builds starfa, fetches MovieLens and runs the main job on it:
# train ALS on 80% of the ratings (every worker the machine has), print the test RMSE on
# the other 20% and a user's recommendations; then SDDMM over the tiles with a full check.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh" build
"$top/scripts/fetch-data.sh" --only movielens
cd "$top"
build/starfa info
build/starfa stat data/movielens-small.csv
build/starfa train --input data/movielens-small.csv --test-fraction 0.2 --seed 1 --out data/movielens.model
build/starfa recommend --model data/movielens.model --user 1 --k 10
build/starfa sddmm --input data/movielens-small.csv --rank 64 --check
