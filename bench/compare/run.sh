#!/usr/bin/env bash
# The ALS comparison of bench/ALS.md in one command: starfa against LIBMF (explicit, test RMSE) and
# PyPI implicit (implicit feedback, ranking metrics and CPU seconds per iteration) on one fixed
# random 80/20 split of MovieLens latest-small, the runs of each library alternating.
#   bench/compare/run.sh [--python PY] [--runs N] [--threads T] [--data FILE] [--starfa BIN]
# PY needs numpy, scipy, threadpoolctl, implicit and libmf (e.g. pip install implicit==0.7.3
# libmf==0.9.2). Prints a Markdown table: medians over the runs, the range in brackets.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
python=python3 runs=3 threads=$(nproc) data=$top/data/movielens-small.csv starfa=$top/build/starfa
while [ $# -gt 0 ]; do
	case "$1" in
	--python) python=$2; shift ;;
	--runs) runs=$2; shift ;;
	--threads) threads=$2; shift ;;
	--data) data=$2; shift ;;
	--starfa) starfa=$2; shift ;;
	-h | --help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "compare: unknown option '$1'" >&2; exit 2 ;;
	esac
	shift
done
[ -x "$starfa" ] || { echo "compare: no starfa at $starfa (scripts/build.sh build)" >&2; exit 1; }
[ -f "$data" ] || { echo "compare: no $data (scripts/fetch-data.sh --only movielens)" >&2; exit 1; }
"$python" -c 'import numpy, scipy, threadpoolctl, implicit, libmf' 2>/dev/null ||
	{ echo "compare: $python lacks numpy, scipy, threadpoolctl, implicit or libmf" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/starfa-compare-XXXXXX")
trap 'rm -rf "$work"' EXIT
export STARPU_HOME=${STARPU_HOME:-$work/starpu} STARPU_SILENT=1
"$python" "$here/split.py" "$data" "$work"

# last_log LOG COLUMNS...: the median of `seconds` over iterations 2.. and the last row's COLUMNS
last_log() {
	"$python" - "$@" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print(f"{statistics.median(float(r['seconds']) for r in rows[1:]):.4f}",
      *(f"{float(rows[-1][c]):.4f}" for c in sys.argv[2:]))
PY
}
ials=(--algo ials --rank 64 --lambda 0.01 --alpha 39 --iters 15 --cg-steps 3 --ncpus "$threads")
for run in $(seq "$runs"); do
	"$starfa" train --input "$work/train.csv" --test "$work/test.csv" --out "$work/m" --log "$work/m.csv" \
		--ncpus "$threads" >/dev/null
	echo "starfa_als $(last_log "$work/m.csv" test_rmse)"
	"$starfa" train --input "$work/train_bin.csv" --test "$work/test_bin.csv" --out "$work/i" \
		--log "$work/i.csv" "${ials[@]}" >/dev/null
	echo "starfa_ials $(last_log "$work/i.csv" p@10 map@10 ndcg@10)"
	(cd "$here" && "$python" implicit_run.py "$work/train_bin.csv" "$work/test_bin.csv" 64 0.01 40 15 \
		"$threads") | awk '{print "implicit", $8, $2, $4, $6}'
	(cd "$here" && "$python" libmf_run.py "$work/train.csv" "$work/test.csv" 32 0.1 100 0.05 "$threads") 2>/dev/null |
		awk '/test_rmse/ {print "libmf", $4, $2}'
done >"$work/results"

"$python" - "$work/results" "$runs" "$threads" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, *vals = line.split()
    rows[name].append([float(v) for v in vals])
def cell(name, i):
    v = sorted(r[i] for r in rows[name])
    return f"{statistics.median(v):.4f} ({v[0]:.4f}–{v[-1]:.4f})" if len(v) > 1 else f"{v[0]:.4f}"
print(f"{sys.argv[2]} runs each, {sys.argv[3]} threads; medians (range)\n")
print("| library | seconds | test RMSE | p@10 | MAP@10 | NDCG@10 |\n| --- | --- | --- | --- | --- | --- |")
print(f"| starfa ALS, defaults (rank 32, Cholesky), s/iteration | {cell('starfa_als', 0)} | {cell('starfa_als', 1)} | | | |")
print(f"| LIBMF, k 32, l2 0.1, 100 iterations, eta 0.05, s/fit | {cell('libmf', 0)} | {cell('libmf', 1)} | | | |")
for name, label in (("starfa_ials", "starfa implicit ALS"), ("implicit", "implicit 0.7.3 CPU ALS")):
    print(f"| {label}, rank 64, CG 3 steps, s/iteration | {cell(name, 0)} | | {cell(name, 1)} | {cell(name, 2)} | {cell(name, 3)} |")
PY
