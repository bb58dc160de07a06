#!/usr/bin/env bash
# starfa's GPU ALS beside PyPI implicit's GPU ALS in one command, on the same matrix and values: the
# benchmark's matrix is dumped once (`starfa_als_bench --dump`), then starfa's training iterations and
# implicit's (bench/compare/implicit_gpu.py) run in turn, N times each.
#   bench/compare/als_gpu.sh [--python PY] [--runs N] [--matrix NAME] [--rank F] [--bench BIN]
# PY needs numpy, scipy and implicit's CUDA build (implicit_gpu.py's docstring says which wheels; their
# librmm/lib64 and rapids_logger/lib64 on LD_LIBRARY_PATH). Prints starfa's rows (ALS exact and by CG,
# implicit ALS by CG) and implicit's row for each run; compare "implicit ALS, CG 3 steps" with implicit's.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
python=python3 runs=2 matrix=netflix rank=100 bench=
while [ $# -gt 0 ]; do
	case "$1" in
	--python | --runs | --matrix | --rank | --bench)
		[ $# -ge 2 ] || { echo "als_gpu: $1 needs a value" >&2; exit 2; }
		case "$1" in
		--python) python=$2 ;;
		--runs) runs=$2 ;;
		--matrix) matrix=$2 ;;
		--rank) rank=$2 ;;
		--bench) bench=$2 ;;
		esac
		shift
		;;
	-h | --help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "als_gpu: unknown option '$1'" >&2; exit 2 ;;
	esac
	shift
done
case "$runs" in '' | *[!0-9]*) echo "als_gpu: --runs takes a positive count, not '$runs'" >&2; exit 2 ;; esac
[ "$runs" -ge 1 ] || { echo "als_gpu: --runs takes a positive count" >&2; exit 2; }
if [ -n "$bench" ]; then # the one asked for, or nothing
	[ -x "$bench" ] || { echo "als_gpu: $bench is not an executable file" >&2; exit 1; }
else # libtool keeps the real program in .libs
	for bench in "$top/build/bench/.libs/starfa_als_bench" "$top/build/bench/starfa_als_bench" ""; do
		[ -x "$bench" ] && break
	done
	[ -n "$bench" ] || { echo "als_gpu: no starfa_als_bench under $top/build (a CUDA build: scripts/build.sh build)" >&2; exit 1; }
fi
"$python" -c 'import numpy, scipy, implicit; from implicit.gpu import HAS_CUDA; assert HAS_CUDA' 2>/dev/null ||
	{ echo "als_gpu: $python lacks numpy, scipy or implicit's CUDA build (see implicit_gpu.py)" >&2; exit 1; }
export LD_LIBRARY_PATH="$top/build/.libs:$top/.prefix/starpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
work=$(mktemp -d "${TMPDIR:-/tmp}/starfa-als-gpu-XXXXXX")
trap 'rm -rf "$work"' EXIT
export STARPU_HOME=${STARPU_HOME:-$work/starpu} STARPU_SILENT=1
"$bench" --matrix "$matrix" --dump "$work/matrix.csr" >/dev/null
for run in $(seq 1 "$runs"); do
	echo "run $run: starfa_als_bench --matrix $matrix --rank $rank --no-kernels --iters 4 --gpus 1"
	"$bench" --matrix "$matrix" --rank "$rank" --no-kernels --iters 4 --gpus 1 >"$work/starfa.md"
	grep -E '^\| (algorithm|ALS|implicit ALS) ' "$work/starfa.md" || { echo "als_gpu: no training rows from starfa_als_bench" >&2; exit 1; }
	if grep -E '^\| (ALS|implicit ALS) .*failed' "$work/starfa.md" >/dev/null; then
		echo "als_gpu: a starfa training run failed (its row above)" >&2
		exit 1
	fi
	echo "run $run: implicit_gpu.py --factors $rank --iters 6"
	"$python" "$here/implicit_gpu.py" "$work/matrix.csr" --factors "$rank" --iters 6 >"$work/implicit.md"
	grep -E '^\| (peer|implicit)' "$work/implicit.md" || { echo "als_gpu: no result row from implicit_gpu.py" >&2; exit 1; }
done
