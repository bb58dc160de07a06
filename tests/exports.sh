#!/bin/sh
# The shared library exports the starfa_ API only: no helper of the readers or the
# internals leaks out of libstarfa.so. Run by `make check` with STARFA_LIBDIR pointing at
# the built library's folder; skips (77) without nm or without a shared library.
set -u
lib=${STARFA_LIBDIR:-.libs}/libstarfa.so
command -v nm >/dev/null 2>&1 || { echo "SKIP: no nm"; exit 77; }
[ -e "$lib" ] || { echo "SKIP: no $lib (static build)"; exit 77; }
syms=$(nm -D --defined-only "$lib") || { echo "FAIL: nm -D $lib"; exit 1; }
if [ -z "$(printf '%s\n' "$syms" | grep ' starfa_')" ]; then
	echo "FAIL: $lib exports no starfa_ symbol"
	exit 1
fi
others=$(printf '%s\n' "$syms" | awk 'NF == 3 && $3 !~ /^starfa_/ && $2 != "A"')
if [ -n "$others" ]; then
	echo "FAIL: $lib exports symbols outside the starfa_ API:"
	printf '%s\n' "$others"
	exit 1
fi
echo "ok: $lib exports $(printf '%s\n' "$syms" | grep -c ' starfa_') starfa_ symbols and nothing else"
