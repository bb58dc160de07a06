#!/bin/sh
# The starfa command end to end: outputs on small files, exit codes and messages on
# bad input. Run by `make check` with STARFA pointing at the built tool.
set -u
. "$(dirname "$0")/cli_lib.sh"

cat >"$tmp/small.mtx" <<'MTX'
%%MatrixMarket matrix coordinate real general
% a comment
3 4 5
1 1 1.5
1 4 -2
2 2 3
3 1 4
3 3 0.5
MTX
printf 'userId,movieId,rating,timestamp\nu1,m1,4.5,100\nu2,m1,3,101\nu1,m2,5,102\n' >"$tmp/ratings.csv"
printf '%%%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n4 1 2\n' >"$tmp/bad_index.mtx"
printf '%%%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n' >"$tmp/complex.mtx"

# A larger random matrix for SDDMM through several tiles.
awk 'BEGIN { srand(7); n = 300; print "%%MatrixMarket matrix coordinate real general"; print n, n, 3000;
	for (e = 0; e < 3000; e++) printf "%d %d %.3f\n", int(rand() * n) + 1, int(rand() * n) + 1, rand() }' \
	>"$tmp/random.mtx"

expect 0 '^starfa [0-9]' -- --version
expect 0 'StarPU 1\.[34]' -- info
expect 0 'worker 0: cpu' -- info --ncpus 1
expect 0 '^rows=3 cols=4 nnz=5$' -- stat "$tmp/small.mtx"
expect 0 'tiles=1x1' -- stat --row-tiles 1 --col-tiles 1 "$tmp/small.mtx"
expect 0 '^rows=2 cols=2 nnz=3$' -- stat "$tmp/ratings.csv"
expect 0 'check: passed' -- sddmm --input "$tmp/random.mtx" --rank 33 --repeat 2 --check --row-tiles 3 --col-tiles 2
expect 0 'check: passed' -- sddmm --input "$tmp/random.mtx" --rank 8 --scaled --repeat 1 --check
expect 0 'cpu : 1 workers' -- sddmm --input "$tmp/random.mtx" --rank 8 --repeat 1 --ncpus 1 --ncuda 0
expect 0 '^  CPU 0 +[1-9][0-9]* ' -- sddmm --input "$tmp/random.mtx" --rank 8 --repeat 2 --ncpus 1 --ncuda 0 --profile

# calibrate writes a model for every operation, into STARPU_HOME: every codelet the library registers
# (the list it prints comes from the registry, not from a list kept by hand).
STARPU_HOME="$tmp/home" "$starfa" calibrate --ranks 4,8 --als-ranks 3,8 --min-nnz 256 --max-nnz 1024 \
	--rounds 2 >"$tmp/calibrate.out" 2>&1 || fail "calibrate failed: $(cat "$tmp/calibrate.out")"
syms=$(sed -n 's/^  starpu_perfmodel_display -s \([a-z_]*\) .*/\1/p' "$tmp/calibrate.out")
[ "$(echo "$syms" | wc -w)" -ge 15 ] || fail "calibrate listed too few models: $syms"
for sym in $syms; do
	ls "$tmp"/home/.starpu/sampling/codelets/*/$sym.* >/dev/null 2>&1 ||
		fail "calibrate wrote no model for $sym"
done
# it says where the models went: STARPU_HOME's sampling folder, or XDG_CACHE_HOME's, which StarPU
# 1.3 takes over STARPU_HOME
dir=$(sed -n 's/^done\. The models are in //p' "$tmp/calibrate.out")
case "$dir" in "$tmp"/home/.starpu/sampling/codelets/[0-9]*) ;; *) fail "calibrate named the folder '$dir'" ;; esac
[ -n "$(ls "$dir")" ] || fail "calibrate's folder $dir is empty"
mkdir -p "$tmp/xdg"
XDG_CACHE_HOME="$tmp/xdg" STARPU_HOME="$tmp/home-xdg" expect 0 "models are in $tmp/xdg/\.starpu/sampling/codelets/" -- \
	calibrate --ops sddmm --ranks 4 --min-nnz 256 --max-nnz 256 --rounds 1
[ -d "$tmp/home-xdg" ] && fail "calibrate under XDG_CACHE_HOME wrote into STARPU_HOME"
STARPU_HOME="$tmp/home-als" expect 0 'rowsolve cg \(implicit\) +k=5 ' -- \
	calibrate --ops als --als-ranks 5 --min-nnz 300 --max-nnz 300 --rounds 1
ls "$tmp"/home-als/.starpu/sampling/codelets/*/starfa_sddmm.* >/dev/null 2>&1 &&
	fail "calibrate --ops als calibrated sddmm too"
expect 2 '--ranks expects an integer' -- calibrate --ranks 4,x
expect 2 '--als-ranks expects an integer' -- calibrate --als-ranks 0
expect 2 "unknown group 'lda'" -- calibrate --ops sddmm,lda
expect 2 "unexpected argument 'extra'" -- calibrate extra

# Bad input: one clear message naming the file (and line), non-zero exit, no crash.
expect 1 "bad_index\.mtx:4" -- stat "$tmp/bad_index.mtx"
expect 1 'complex' -- stat "$tmp/complex.mtx"
expect 1 'missing\.mtx' -- stat "$tmp/missing.mtx"
expect 1 "bad_index\.mtx:4" -- sddmm --input "$tmp/bad_index.mtx" --check

# Usage errors exit 2.
expect 2 'unknown command' -- frobnicate
expect 2 'needs --input' -- sddmm --rank 4
expect 2 '--rank expects an integer' -- sddmm --input "$tmp/small.mtx" --rank 0
expect 2 '--rank expects an integer' -- sddmm --input "$tmp/small.mtx" --rank 12abc
expect 2 'mtx, ratings or docword' -- stat --format xml "$tmp/small.mtx"
expect 2 'exactly one FILE' -- stat
expect 2 '--ncpus expects' -- info --ncpus -3
expect 2 '--idle expects a number' -- info --idle 0
expect 2 '--idle expects a number' -- info --idle 1s
# Idle workers sleep with blocking drivers, all but the one StarPU keeps awake: two idle CPU workers keep
# at most one core and a half busy (process CPU time, so a loaded machine only lowers it; spinning
# workers read 2.0).
out=$("$starfa" info --ncpus 2 --ncuda 0 --sched lws --idle 0.5 2>&1) || fail "starfa info --idle failed: $out"
busy=$(printf '%s\n' "$out" | sed -n 's/^idle for [0-9.]* s after a task on every worker: [0-9.]* CPU seconds, \([0-9.]*\) cores busy.*/\1/p')
if [ -z "$busy" ]; then
	fail "starfa info --idle printed no idle line: $out"
elif printf '%s\n' "$out" | grep -q 'built with blocking drivers'; then
	awk -v b="$busy" 'BEGIN { exit !(b <= 1.5) }' || fail "two idle CPU workers kept $busy cores busy: $out"
	echo "ok: starfa info --idle: $busy cores busy"
fi
# Options win over StarPU's environment variables, which count where no option is given.
STARPU_NCPU=2 expect 0 'workers: 1 \(1 cpu' -- info --ncpus 1 --ncuda 0
STARPU_SCHED=eager expect 0 'scheduler: lws ' -- info --sched lws
STARPU_SCHED=eager expect 0 'scheduler: eager ' -- info
# Without GPU workers the default is lws (heteroprio with them; dmda under STARFA_PLACEMENT=any).
[ -n "${STARPU_SCHED+set}" ] || expect 0 'scheduler: lws ' -- info --ncuda 0
# Schedulers of parallel tasks are refused before any task runs (they crashed StarPU 1.3's drivers).
expect 1 'scheduler pheft runs tasks on combined workers' -- info --sched pheft
expect 1 'scheduler peager runs tasks on combined workers' -- train --input "$tmp/small.mtx" --out "$tmp/p.model" --sched peager
[ -e "$tmp/p.model" ] && fail "a refused scheduler left a model"
# heteroprio trains (starfa sets up its buckets); a bad slow factor is refused before any output.
expect 0 'scheduler: heteroprio ' -- info --sched heteroprio --ncuda 0
expect 0 '' -- train --input "$tmp/small.mtx" --out "$tmp/h.model" --sched heteroprio --ncuda 0 --iters 3
[ -s "$tmp/h.model" ] || fail "heteroprio left no model"
STARFA_HETEROPRIO_SLOW=x expect 1 'STARFA_HETEROPRIO_SLOW' -- train --input "$tmp/small.mtx" --out "$tmp/h2.model" --sched heteroprio
[ -e "$tmp/h2.model" ] && fail "a refused slow factor left a model"

finish
