#!/usr/bin/env bash
# Configures (once) and builds starfa out of tree.
#   scripts/build.sh [--sanitizers] [BUILD_DIR] [-- CONFIGURE_ARGS...]
# Default BUILD_DIR: build (or build-asan with --sanitizers, which builds the CPU
# kernels only, with AddressSanitizer and UndefinedBehaviorSanitizer).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
sanitizers=0
dir=""
configure_args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--sanitizers) sanitizers=1 ;;
	--) shift; configure_args+=("$@"); break ;;
	-h | --help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) dir=$1 ;;
	esac
	shift
done
if [ $sanitizers = 1 ]; then
	dir=${dir:-build-asan}
	configure_args+=(--enable-sanitizers --without-cuda)
else
	dir=${dir:-build}
fi
case "$dir" in /*) ;; *) dir="$top/$dir" ;; esac

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
	echo "build: autoreconf"
	mkdir -p m4 # libtool's macros land here; the folder is not tracked
	autoreconf -fi >/dev/null
fi
mkdir -p "$dir"
cd "$dir"
# Reconfigure only when the arguments change.
wanted="${configure_args[*]:-}"
if [ ! -f config.status ] || [ "$(cat .configure-args 2>/dev/null)" != "$wanted" ]; then
	echo "build: configure ${wanted}"
	"$top/configure" -q "${configure_args[@]}"
	printf '%s' "$wanted" >.configure-args
fi
make -j"$(nproc)" >/dev/null
echo "build: built in ${dir#$top/}"
