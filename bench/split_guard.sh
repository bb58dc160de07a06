#!/usr/bin/env bash
# SGD's split and its guard against the GPUs alone, with the cores free and with one of them busy with
# another program, in one run on one set of models (bench/PLACEMENT.md). Needs a CUDA build on a machine
# with a GPU and at least two cores.
#   bench/split_guard.sh [--build DIR] [--matrix NAME] [--rank K] [--epochs N] [--busy-core C] [--md FILE]
# After `starfa calibrate --ops sgd --als-ranks K` in a fresh StarPU home, six runs of
# `starfa_sgd_bench --matrix NAME --ranks K --epochs N` (default netflix, 16, 10) in turn: the default
# placement, the GPUs alone (--ncpus 0), the guard forced (STARFA_SPLIT_GUARD=force: the fallback's own
# speed), then with `taskset -c C` (default: the middle core) busy for the whole run: the default, the
# GPUs alone, the guard off. Prints each run's s/epoch (the bench's median), its ratio to the GPUs alone
# of the same cores' state, every epoch's seconds, and where the sgd tasks ran. Exit status 1 when a run
# fails (its output is shown).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=$top/build matrix=netflix rank=16 epochs=10 busy="" md=""
while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--build | --matrix | --rank | --epochs | --busy-core | --md)
		[ $# -ge 2 ] || { echo "split_guard: $1 needs a value" >&2; exit 2; } ;;
	*) echo "split_guard: unknown option '$1'" >&2; exit 2 ;;
	esac
	case "$1" in
	--build) build=$2 ;;
	--matrix) matrix=$2 ;;
	--rank) rank=$2 ;;
	--epochs) epochs=$2 ;;
	--busy-core) busy=$2 ;;
	--md) md=$2 ;;
	esac
	shift 2
done
for v in "rank=$rank" "epochs=$epochs"; do
	case "${v#*=}" in '' | *[!0-9]*) echo "split_guard: --${v%%=*} takes a positive integer, not '${v#*=}'" >&2; exit 2 ;; esac
done
[ "$epochs" -ge 3 ] || { echo "split_guard: --epochs must be at least 3 (the guard leaves the first out)" >&2; exit 2; }
cores=$(nproc)
[ "$cores" -ge 2 ] || { echo "split_guard: needs two cores or more (one is made busy)" >&2; exit 1; }
busy=${busy:-$((cores / 2))}
case "$busy" in '' | *[!0-9]*) echo "split_guard: --busy-core takes a core number, not '$busy'" >&2; exit 2 ;; esac
[ "$busy" -lt "$cores" ] || { echo "split_guard: --busy-core $busy: this machine has cores 0-$((cores - 1))" >&2; exit 2; }
command -v taskset >/dev/null || { echo "split_guard: needs taskset (util-linux)" >&2; exit 1; }
me=split_guard
. "$here/common.sh"
sgd_bench=$(program bench starfa_sgd_bench)
starfa=$(program . starfa)
work=$(mktemp -d "${TMPDIR:-/tmp}/starfa-guard-XXXXXX")
hog=""
cleanup() {
	[ -z "$hog" ] || kill "$hog" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
cuda=$(cuda_workers "$starfa" "$work/info")
[ "${cuda:-0}" -ge 1 ] || { echo "split_guard: no CUDA worker here (starfa info)" >&2; exit 1; }
[ -n "$md" ] && : >>"$md"
out() { echo "$*"; [ -z "$md" ] || echo "$*" >>"$md"; }
home=$work/home
mkdir -p "$home"
t0=$(date +%s.%N)
STARPU_HOME=$home "$starfa" calibrate --ops sgd --als-ranks "$rank" >"$work/calibrate.log" 2>&1 ||
	{ echo "split_guard: starfa calibrate failed:" >&2; cat "$work/calibrate.log" >&2; exit 1; }
calibrated=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')

# run LABEL BUSY ENV... [-- BENCH_ARGS...]: one bench run; prints "S_EPOCH|EPOCHS|TASKS".
run() {
	local label=$1 on_busy=$2 envs=() args=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	[ $# -gt 0 ] && { shift; args=("$@"); }
	rm -f "$work/curve.csv" "$work/tasks.csv"
	if [ "$on_busy" = 1 ]; then
		taskset -c "$busy" sh -c 'while :; do :; done' &
		hog=$!
	fi
	local rc=0
	env STARPU_HOME="$home" "${envs[@]}" "$sgd_bench" --matrix "$matrix" --ranks "$rank" --epochs "$epochs" \
		--curve "$work/curve.csv" --task-log "$work/tasks.csv" "${args[@]}" >"$work/run.log" 2>&1 || rc=$?
	if [ -n "$hog" ]; then
		kill "$hog" 2>/dev/null || true
		wait "$hog" 2>/dev/null || true
		hog=""
	fi
	if [ $rc -ne 0 ]; then
		echo "split_guard: run '$label' failed:" >&2
		cat "$work/run.log" >&2
		return 1
	fi
	local sec per tasks
	sec=$(awk -v rank="$rank" '$1 == "|" && $2 == rank { print $6 }' "$work/run.log")
	per=$(awk -F, '{ printf "%s%.4g", (NR > 1 ? " " : ""), $5 - p; p = $5 }' "$work/curve.csv")
	tasks=$(awk -F, '$1 == "sgd" { if ($3 ~ /CPU/) { c++; last = $5 } else g++ }
		END { printf "%d on cores (the last ending at %.3f s), %d on GPUs", c, last, g }' "$work/tasks.csv")
	echo "$sec|$per|$tasks"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

out ""
out "## SGD's split guard ($(date -u '+%Y-%m-%d %H:%M UTC'))"
out ""
out "\`bench/split_guard.sh --matrix $matrix --rank $rank --epochs $epochs --busy-core $busy\`: $cores cores,"
out "$( (nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo "no GPU") | sort | uniq -c | sed 's/^ *//' | paste -sd, - | sed 's/,/, /g');"
out "\`starfa calibrate --ops sgd --als-ranks $rank\` took $calibrated s; then the runs in this order, s/epoch the"
out "bench's median, the ratio against the GPUs alone with the cores in the same state."
out ""
out "| run | core $busy | s/epoch | / GPUs alone | every epoch (s) | sgd tasks |"
out "| --- | --- | ---: | ---: | --- | --- |"
res=$(run default 0) || exit 1
IFS='|' read -r d_s d_e d_t <<<"$res"
res=$(run gpus 0 -- --ncpus 0) || exit 1
IFS='|' read -r g_s g_e g_t <<<"$res"
res=$(run force 0 STARFA_SPLIT_GUARD=force) || exit 1
IFS='|' read -r f_s f_e f_t <<<"$res"
out "| default | free | $d_s | $(ratio "$d_s" "$g_s") | $d_e | $d_t |"
out "| GPUs alone | free | $g_s | 1.000 | $g_e | $g_t |"
out "| guard forced | free | $f_s | $(ratio "$f_s" "$g_s") | $f_e | $f_t |"
res=$(run busy-default 1) || exit 1
IFS='|' read -r d_s d_e d_t <<<"$res"
res=$(run busy-gpus 1 -- --ncpus 0) || exit 1
IFS='|' read -r g_s g_e g_t <<<"$res"
res=$(run busy-off 1 STARFA_SPLIT_GUARD=off) || exit 1
IFS='|' read -r o_s o_e o_t <<<"$res"
out "| default | busy | $d_s | $(ratio "$d_s" "$g_s") | $d_e | $d_t |"
out "| GPUs alone | busy | $g_s | 1.000 | $g_e | $g_t |"
out "| guard off | busy | $o_s | $(ratio "$o_s" "$g_s") | $o_e | $o_t |"
