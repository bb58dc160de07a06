#!/usr/bin/env bash
# On a machine with a GPU, after a build: the GPU test groups, the same under
# compute-sanitizer (memcheck, racecheck, initcheck, synccheck), and the CLI check on
# whatever real data is in data/.
#   scripts/gpu-check.sh [BUILD_DIR]
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
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
run "$starfa" info
# The CUDA groups, then the groups whose task graphs now have CUDA workers to run on.
run "$test_bin" sddmm_cuda spmm_cuda als_cuda values_cuda dense_cuda sgd_cuda
run "$test_bin" sddmm spmm tiling values dense hermitian bias solve gram rowsolve als model sgd
# KL-NMF written with the public API, on every worker (CPU and GPU), against its dense reference.
run env STARFA_SRCDIR="$top" KLNMF="$klnmf" sh "$top/tests/klnmf.sh"
if command -v compute-sanitizer >/dev/null; then
	for tool in memcheck racecheck initcheck synccheck; do
		run timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 9 "$test_bin" \
			sddmm_cuda/every_variant_matches_reference_and_cpu sddmm_cuda/edge_shapes \
			sddmm_cuda/dense_rows_match_reference sddmm_cuda/tuned_matches_reference_and_keeps_a_choice \
			als_cuda/rowsolve_status_names_bad_rows als_cuda/solve_status_names_bad_rows values_cuda dense_cuda sgd_cuda
	done
	# The ALS kernels' full sweeps under memcheck; racecheck and initcheck on the rowsolve test's quick
	# subset (the whole test takes them past 4 minutes).
	run timeout 400 compute-sanitizer --tool memcheck --error-exitcode 9 "$test_bin" als_cuda
	for tool in racecheck initcheck; do
		run env STARFA_TEST_QUICK=1 timeout 400 compute-sanitizer --tool "$tool" --error-exitcode 9 "$test_bin" \
			als_cuda/rowsolve_matches_reference
	done
else
	echo "compute-sanitizer not found: skipped"
fi
for f in "$top"/data/*.mtx "$top"/data/*.csv; do
	[ -f "$f" ] || continue
	run "$starfa" sddmm --input "$f" --rank 64 --repeat 3 --check
done
exit $status
