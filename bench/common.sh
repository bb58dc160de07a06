# Sourced by the bench scripts that run the built programs (placement.sh, split_guard.sh). The script
# sets `me` (its name in messages), `top` (the checkout) and `build` (the build folder) first.

# program DIR NAME: the real program libtool keeps in DIR/.libs, else the wrapper; an error naming the
# build to make when neither is there.
program() {
	local p
	for p in "$build/$1/.libs/$2" "$build/$1/$2"; do
		[ -x "$p" ] && { echo "$p"; return 0; }
	done
	echo "$me: no $2 under $build (scripts/build.sh ${build#$top/})" >&2
	return 1
}

# The build's libraries and StarPU's, and StarPU quiet. StarPU takes XDG_CACHE_HOME over STARPU_HOME: the
# scripts' fresh homes would all be that one.
export LD_LIBRARY_PATH="$build/.libs:$top/.prefix/starpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export STARPU_SILENT=1
unset XDG_CACHE_HOME

# cuda_workers STARFA HOME: how many CUDA workers `starfa info` starts (0 when none), in a StarPU home of
# its own ("workers: 17 (16 cpu, 1 cuda)").
cuda_workers() {
	local n
	n=$(STARPU_HOME=$2 "$1" info 2>/dev/null | sed -n 's/^workers: .*, \([0-9]*\) cuda)$/\1/p')
	echo "${n:-0}"
}
