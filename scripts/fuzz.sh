#!/usr/bin/env bash
# Fuzzes the file readers: builds tests/fuzz/fuzz_read.c with clang's libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer, and runs it for SECONDS (default 60)
# on tests/fuzz/corpus. Exits non-zero when the fuzzer finds a crash, a hang or a leak.
#
#   scripts/fuzz.sh [SECONDS]
#
# Everything it writes goes to fuzz-build/: the target, the inputs it discovers
# (fuzz-build/corpus, reused by the next run) and reproducers of what it finds
# (fuzz-build/crash-*, replayed with: fuzz-build/fuzz_read FILE).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
case "$seconds" in
'' | *[!0-9]*)
	echo "fuzz: SECONDS must be a whole number, not '$seconds'" >&2
	exit 2
	;;
esac
build="$top/fuzz-build"
cc=${CC:-clang}
command -v "$cc" >/dev/null || {
	echo "fuzz: $cc not found (Debian: apt-get install clang libclang-rt-14-dev)" >&2
	exit 1
}

mkdir -p "$build/corpus"
# The sources include the configure-generated config.h, which the readers need nothing from.
printf '/* empty: the readers need no configuration */\n' >"$build/config.h"
"$cc" -std=c11 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-Wall -Wextra -I "$build" -I "$top/include" -I "$top" \
	"$top/runtime/error.c" "$top/runtime/alloc.c" "$top/storage/coo.c" "$top/storage/idmap.c" "$top"/io/reader.c \
	"$top/io/mtx.c" "$top/io/ratings.c" "$top/io/docword.c" \
	"$top/tests/fuzz/fuzz_read.c" "$top/tests/fuzz/host_parallel.c" -lm -o "$build/fuzz_read"

# A hang is an input taking over 10 s; any single allocation over the 2 GiB memory limit
# counts as a crash, so absurd declared sizes cannot slip through.
exec "$build/fuzz_read" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	-dict="$top/tests/fuzz/read.dict" -artifact_prefix="$build/" "$build/corpus" "$top/tests/fuzz/corpus"
