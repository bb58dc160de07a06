#!/usr/bin/env bash
# Every algorithm on the GPUs alone and on every worker (the cores too), side by side in one run, before
# and after calibration: the seconds an iteration and the whole training call, each pair alternated, with
# the ratio every worker / GPUs alone (bench/PLACEMENT.md). Needs a CUDA build on a machine with a GPU.
#   bench/placement.sh [--build DIR] [--matrix NAME] [--rank K] [--iters N] [--runs R]
#                      [--algos als,ials,sgd,ccd,sfa] [--topics lda,gap,klnmf] [--docs D]
#                      [--calibrate-args "ARGS"] [--no-calibrate] [--md FILE]
# Ratings algorithms train on starfa_sgd_bench's planted ratings over NAME's pattern (default netflix);
# topic models on a starfa_corpus corpus of D documents (default 100000). The models start empty (a
# fresh StarPU home per run); then `starfa calibrate ARGS` runs once (its seconds are printed) and every
# pair runs again on the calibrated models. Exit status 1 when a run fails (its output is shown).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=$top/build matrix=netflix rank=32 iters=6 runs=2 algos=als,ials,sgd,ccd,sfa topics=lda,gap,klnmf
docs=100000 calibrate=1 calibrate_args= md=
while [ $# -gt 0 ]; do
	case "$1" in
	--no-calibrate) calibrate=0; shift; continue ;;
	-h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--build | --matrix | --rank | --iters | --runs | --algos | --topics | --docs | --calibrate-args | --md)
		[ $# -ge 2 ] || { echo "placement: $1 needs a value" >&2; exit 2; } ;;
	*) echo "placement: unknown option '$1'" >&2; exit 2 ;;
	esac
	case "$1" in
	--build) build=$2 ;;
	--matrix) matrix=$2 ;;
	--rank) rank=$2 ;;
	--iters) iters=$2 ;;
	--runs) runs=$2 ;;
	--algos) algos=$2 ;;
	--topics) topics=$2 ;;
	--docs) docs=$2 ;;
	--calibrate-args) calibrate_args=$2 ;;
	--md) md=$2 ;;
	esac
	shift 2
done
for v in "rank=$rank" "iters=$iters" "runs=$runs" "docs=$docs"; do
	case "${v#*=}" in '' | *[!0-9]*) echo "placement: --${v%%=*} takes a positive integer, not '${v#*=}'" >&2; exit 2 ;; esac
	[ "${v#*=}" -ge 1 ] || { echo "placement: --${v%%=*} takes a positive integer" >&2; exit 2; }
done
[ "$iters" -ge 2 ] || { echo "placement: --iters must be at least 2 (the first iteration is left out)" >&2; exit 2; }
me=placement
. "$here/common.sh"
sgd_bench=$(program bench starfa_sgd_bench)
corpus=$(program bench starfa_corpus)
starfa=$(program . starfa)
# "workers: 17 (16 cpu, 1 cuda)": with no CUDA worker there is no GPU-alone run to compare with
work=$(mktemp -d "${TMPDIR:-/tmp}/starfa-placement-XXXXXX")
trap 'rm -rf "$work"' EXIT
cuda=$(cuda_workers "$starfa" "$work/info")
[ "${cuda:-0}" -ge 1 ] || { echo "placement: no CUDA worker here (starfa info); this benchmark compares every worker with the GPUs alone" >&2; exit 1; }
[ -n "$md" ] && : >>"$md"
out() { echo "$*"; [ -z "$md" ] || echo "$*" >>"$md"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

# run ALGO WORKERS HOME: one training; prints "SECONDS_AN_ITERATION WHOLE_SECONDS CPU_TASKS CUDA_TASKS".
# WORKERS is "gpu" (--ncpus 0) or "all" (StarPU's default worker count).
run() {
	local algo=$1 workers=$2 home=$3 log=$work/run.log ncpus=()
	[ "$workers" = gpu ] && ncpus=(--ncpus 0)
	local t0 t1
	t0=$(date +%s.%N)
	case ",$topics," in
	*,"$algo",*)
		if ! STARPU_HOME=$home "$starfa" train --algo "$algo" --input "$work/corpus.docword.txt" --rank "$rank" \
			--iters "$iters" --out "$work/model" "${ncpus[@]}" >"$log" 2>&1; then
			echo "placement: starfa train --algo $algo ($workers) failed:" >&2
			cat "$log" >&2
			return 1
		fi
		t1=$(date +%s.%N)
		# "iter N  S s (+M s metrics) ... tasks cpu C cuda G"
		awk -v whole="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" '
			$1 == "iter" { n++; if ($2 > 1) s[++m] = $3
				for (i = 1; i < NF; i++) { if ($i == "cpu") c += $(i + 1); if ($i == "cuda") g += $(i + 1) } }
			END { if (!m) exit 1
				for (i = 2; i <= m; i++) for (j = i; j > 1 && s[j - 1] > s[j]; j--) { t = s[j]; s[j] = s[j - 1]; s[j - 1] = t }
				med = m % 2 ? s[(m + 1) / 2] : (s[m / 2] + s[m / 2 + 1]) / 2
				printf "%.4g %.2f %d %d\n", med, whole, c / n, g / n }' "$log"
		;;
	*)
		if ! STARPU_HOME=$home "$sgd_bench" --algo "$algo" --matrix "$matrix" --ranks "$rank" --epochs "$iters" \
			"${ncpus[@]}" >"$log" 2>&1; then
			echo "placement: starfa_sgd_bench --algo $algo ($workers) failed:" >&2
			cat "$log" >&2
			return 1
		fi
		# "| rank | epochs | s/epoch (median) | ..." and "rank K: starfa_train took W s in all"
		awk -v rank="$rank" '
			$1 == "|" && $2 == rank { sec = $6 }
			/starfa_train took/ { for (i = 1; i < NF; i++) if ($i == "took") whole = $(i + 1) }
			END { if (sec == "" || whole == "") exit 1; printf "%.4g %.2f - -\n", sec, whole }' "$log"
		;;
	esac
}

# pairs MODELS_HOME LABEL: every algorithm, GPUs alone and every worker alternated, RUNS times each.
pairs() {
	local models=$1 label=$2 algo w r
	for algo in ${algos//,/ } ${topics//,/ }; do
		: >"$work/gpu" && : >"$work/all"
		for r in $(seq 1 "$runs"); do
			for w in gpu all; do
				rm -rf "$work/home" && mkdir -p "$work/home"
				[ -z "$models" ] || cp -r "$models/." "$work/home/"
				run "$algo" "$w" "$work/home" >>"$work/$w"
			done
		done
		local g a gw aw tasks
		g=$(cut -d' ' -f1 "$work/gpu" | median) a=$(cut -d' ' -f1 "$work/all" | median)
		gw=$(cut -d' ' -f2 "$work/gpu" | median) aw=$(cut -d' ' -f2 "$work/all" | median)
		tasks=$(tail -n 1 "$work/all" | awk '{ print ($3 == "-" ? "" : $3 " / " $4) }')
		out "| $algo | $label | $g | $a | $(ratio "$a" "$g") | $gw | $aw | $(ratio "$aw" "$gw") | $tasks |"
	done
}

if [ -n "$topics" ]; then
	"$corpus" --out "$work/corpus" --docs "$docs" >/dev/null
fi
out ""
out "## Every worker against the GPUs alone ($(date -u '+%Y-%m-%d %H:%M UTC'))"
out ""
out "\`bench/placement.sh --matrix $matrix --rank $rank --iters $iters --runs $runs\`: ratings algorithms on"
out "planted ratings over $matrix's pattern (\`starfa_sgd_bench --algo A\`), topic models on a $docs-document"
out "\`starfa_corpus\` corpus (\`starfa train --algo A\`); \"GPU\" is \`--ncpus 0\`, \"all\" StarPU's default"
out "workers; $(nproc) cores on the host; $( (nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo "no GPU") | sort | uniq -c | sed 's/^ *//' | paste -sd, - | sed 's/,/, /g')."
out "Seconds an iteration: the median of the run's iterations (starfa_sgd_bench's s/epoch; iterations 2-$iters of"
out "\`starfa train\`), then of the $runs runs; whole: the training call (set-up, iterations, metrics, model)."
out ""
out "| algorithm | models | s/iteration, GPU | all | all / GPU | whole s, GPU | all | all / GPU | tasks an iteration on all, cpu / cuda |"
out "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
pairs "" "not calibrated"
if [ "$calibrate" = 1 ]; then
	mkdir -p "$work/calibrated"
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086 # the arguments are the user's, split as given
	STARPU_HOME=$work/calibrated "$starfa" calibrate $calibrate_args >"$work/calibrate.log" 2>&1 ||
		{ echo "placement: starfa calibrate failed:" >&2; cat "$work/calibrate.log" >&2; exit 1; }
	t1=$(date +%s.%N)
	pairs "$work/calibrated" "calibrated"
	out ""
	out "\`starfa calibrate${calibrate_args:+ $calibrate_args}\` took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s."
fi
