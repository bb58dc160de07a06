#!/usr/bin/env bash
# Runs the benchmark from a build folder: SDDMM and SpMM of starfa against cuSPARSE (and a
# plain OpenMP loop on the CPU), checked then timed, on data/ and generated matrices.
#   bench/run.sh [--build DIR] [starfa_bench OPTIONS...]
# Writes bench/results.csv (this run's numbers) and adds this run's section at the top of
# bench/RESULTS.md, unless --csv / --md say otherwise. `--quick` runs a small subset;
# `--help` lists every option. Needs no network: only the build folder, the StarPU prefix
# (.prefix/starpu) and data/. Exit status: the program's (1 when a check failed).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build="$top/build"
args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--build)
		[ $# -ge 2 ] || { echo "run.sh: --build needs a folder" >&2; exit 2; }
		build=$2
		shift
		;;
	--build=*) build=${1#--build=} ;;
	*) args+=("$1") ;;
	esac
	shift
done
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac

# libtool keeps the real program in .libs; running it directly (with the libraries on the
# path) works wherever the repository was copied, unlike libtool's wrapper script.
bin="$build/bench/.libs/starfa_bench"
[ -x "$bin" ] || bin="$build/bench/starfa_bench"
if [ ! -x "$bin" ]; then
	echo "run.sh: $build/bench/starfa_bench is not built: it needs a CUDA build (scripts/build.sh on a" >&2
	echo "run.sh: machine with nvcc and StarPU built with CUDA), then make in $build" >&2
	exit 1
fi
export LD_LIBRARY_PATH="$build/.libs:$top/.prefix/starpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# StarPU keeps its perfmodels (calibrated by the warm-ups) with the build.
unset XDG_CACHE_HOME # StarPU would take it over STARPU_HOME
export STARPU_HOME=${STARPU_HOME:-$build/bench/starpu-home}
export STARPU_SILENT=${STARPU_SILENT:-1}
export BENCH_COMMAND="bench/run.sh${args[*]:+ ${args[*]}}"
mkdir -p "$STARPU_HOME"

# Defaults for what the arguments leave out; the sotu corpus may sit beside the repository.
given=" ${args[*]:-} "
defaults=()
case "$given" in *" --data-dir"*) ;; *) defaults+=(--data-dir "$top/data" --data-dir "$top/../shared/data") ;; esac
case "$given" in *" --csv"*) ;; *) defaults+=(--csv "$top/bench/results.csv") ;; esac
case "$given" in *" --md"*) ;; *) defaults+=(--md "$top/bench/RESULTS.md") ;; esac
cd "$top"
exec "$bin" ${defaults[@]+"${defaults[@]}"} ${args[@]+"${args[@]}"}
