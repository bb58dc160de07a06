#!/usr/bin/env bash
# On a machine with a GPU, after a build: every test group (the CUDA ones and the task graphs that
# now have CUDA workers to run on), the CUDA groups under compute-sanitizer (memcheck, racecheck,
# initcheck, synccheck), and the CLI check on whatever real data is in data/.
#   scripts/gpu-check.sh [--part tests|sanitize|data|all] [BUILD_DIR]
# --part runs one of the three (default all), so that each fits a time limit of its own.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
part=all
if [ "${1:-}" = --part ]; then
	part=${2:-}
	shift 2 || true
fi
case "$part" in
tests | sanitize | data | all) ;;
*) echo "gpu-check: --part takes tests, sanitize, data or all, not '$part'" >&2; exit 2 ;;
esac
build=${1:-$top/build}
unset XDG_CACHE_HOME # StarPU would take it over STARPU_HOME
export STARPU_SILENT=1 STARPU_HOME=${STARPU_HOME:-$build/tests/starpu-home}
export LD_LIBRARY_PATH="$build/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
test_bin="$build/tests/.libs/starfa_test"
[ -x "$test_bin" ] || test_bin="$build/tests/starfa_test"
starfa="$build/.libs/starfa"
[ -x "$starfa" ] || starfa="$build/starfa"
klnmf="$build/examples/.libs/klnmf"
[ -x "$klnmf" ] || klnmf="$build/examples/klnmf"
status=0
run() {
	echo "+ $*"
	"$@" || { echo "FAILED: $*"; status=1; }
}
want() { [ "$part" = all ] || [ "$part" = "$1" ]; }
run "$starfa" info
if want tests; then
	# Every group: the CUDA ones, and the CPU ones whose task graphs now have CUDA workers to run on.
	run "$test_bin"
	# KL-NMF written with the public API, on every worker (CPU and GPU), against its dense reference.
	run env STARFA_SRCDIR="$top" KLNMF="$klnmf" sh "$top/tests/klnmf.sh"
fi
if want sanitize && command -v compute-sanitizer >/dev/null; then
	# The CUDA groups but the ALS kernels' (below); the SDDMM group's four kernel tests, not its
	# timing-driven tuned-plan sweeps.
	for tool in memcheck racecheck initcheck synccheck; do
		run timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 9 "$test_bin" \
			sddmm_cuda/every_variant_matches_reference_and_cpu sddmm_cuda/edge_shapes \
			sddmm_cuda/dense_rows_match_reference sddmm_cuda/tuned_matches_reference_and_keeps_a_choice \
			als_cuda/rowsolve_status_names_bad_rows als_cuda/solve_status_names_bad_rows values_cuda dense_cuda \
			sgd_cuda spmm_cuda ccd_cuda topk_cuda
	done
	# The topic models' graphs and the placement tests: every kernel they launch, under memcheck.
	run timeout 400 compute-sanitizer --tool memcheck --error-exitcode 9 "$test_bin" lda_cuda gap_cuda sfa_cuda \
		placement_cuda
	# The ALS kernels' full sweeps under memcheck; racecheck and initcheck on the rowsolve test's quick
	# subset (the whole test takes them past 4 minutes).
	run timeout 400 compute-sanitizer --tool memcheck --error-exitcode 9 "$test_bin" als_cuda
	for tool in racecheck initcheck; do
		run env STARFA_TEST_QUICK=1 timeout 400 compute-sanitizer --tool "$tool" --error-exitcode 9 "$test_bin" \
			als_cuda/rowsolve_matches_reference
	done
elif want sanitize; then
	echo "compute-sanitizer not found: skipped"
fi
if want data; then
	for f in "$top"/data/*.mtx "$top"/data/*.csv; do
		[ -f "$f" ] || continue
		run "$starfa" sddmm --input "$f" --rank 64 --repeat 3 --check
	done
fi
exit $status
