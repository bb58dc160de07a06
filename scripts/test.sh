#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: the normal build
# (CUDA tests run where a GPU is present and skip elsewhere), the sanitizer build
# (ASan + UBSan), and a short fuzzing pass over the input readers.
#   scripts/test.sh [--no-sanitizers] [--fuzz-seconds N]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
sanitizers=1
fuzz_seconds=30
while [ $# -gt 0 ]; do
	case "$1" in
	--no-sanitizers) sanitizers=0 ;;
	--fuzz-seconds) fuzz_seconds=$2; shift ;;
	-h | --help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "test: unknown option '$1'" >&2; exit 2 ;;
	esac
	shift
done

"$top/scripts/install-deps.sh"

check() { # check BUILD_DIR: make check, showing the logs of what failed
	local dir=$1
	echo "test: make check in ${dir#$top/}"
	if ! make -C "$dir" -j"$(nproc)" check >"$dir/check.log" 2>&1; then
		grep -E '^(PASS|FAIL|SKIP|ERROR|XFAIL|XPASS|# )' "$dir/check.log" || true
		for log in "$dir"/tests/*.log; do
			grep -q '^:test-result: \(FAIL\|ERROR\)' "${log%.log}.trs" 2>/dev/null && {
				echo "--- $log"
				grep -E '^(seed |FAIL |  .*:[0-9]+: )' "$log" | head -n 20 # the replay seed and the failed checks
				tail -n 40 "$log"
			}
		done
		echo "test: FAILED in ${dir#$top/}" >&2
		return 1
	fi
	grep -E '^(PASS|FAIL|SKIP|ERROR|# )' "$dir/check.log"
}

"$top/scripts/build.sh" build
check "$top/build"
if [ $sanitizers = 1 ]; then
	"$top/scripts/build.sh" --sanitizers build-asan
	check "$top/build-asan"
fi
if [ "$fuzz_seconds" -gt 0 ]; then
	"$top/scripts/fuzz.sh" "$fuzz_seconds"
fi
echo "test: all passed"
