#!/usr/bin/env bash
# Installs what starfa needs on a Debian bookworm machine and builds StarPU into a
# relocatable, self-contained prefix inside the repository (.prefix/starpu).
#
#   scripts/install-deps.sh [--without-cuda] [--force]
#
# System packages come from Debian (apt-get, needs root when something is missing).
# StarPU 1.3.10 is built from Debian's own source package, with CUDA when nvcc is
# found, with StarPU-MPI (OpenMPI) and with FxT traces (off unless asked for: starfa's --trace),
# and with blocking drivers: an idle CPU worker sleeps instead of spinning (starfa keeps the CUDA
# workers polling, and scripts/starpu-1.3.10-blocking.patch keeps their pipeline), all but one
# (scripts/starpu-1.3.10-one-awake.patch: never two).
# A second run with the same options does nothing.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
prefix="$top/.prefix/starpu"
starpu_version=1.3.10+dfsg-2
with_cuda=auto
force=0
for arg in "$@"; do
	case "$arg" in
	--without-cuda) with_cuda=no ;;
	--force) force=1 ;;
	-h | --help)
		sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "install-deps: unknown option '$arg'" >&2
		exit 2
		;;
	esac
done

log() { printf 'install-deps: %s\n' "$*"; }
die() {
	printf 'install-deps: error: %s\n' "$*" >&2
	exit 1
}

# ---------------------------------------------------------------- system packages
packages=(build-essential autoconf automake libtool pkg-config libltdl-dev
	libhwloc-dev libopenblas-dev liblapacke-dev libopenmpi-dev openmpi-bin
	dpkg-dev patchelf clang libclang-rt-14-dev valgrind python3 libfxt-dev)
missing=()
for p in "${packages[@]}"; do
	case "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" in
	*'install ok installed'*) ;;
	*) missing+=("$p") ;;
	esac
done
if [ ${#missing[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || die "missing packages (${missing[*]}); run this script as root"
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---------------------------------------------------------------- CUDA detection
cuda_dir=""
if [ "$with_cuda" != no ]; then
	if command -v nvcc >/dev/null 2>&1; then
		cuda_dir=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
	elif [ -x /usr/local/cuda/bin/nvcc ]; then
		cuda_dir=/usr/local/cuda
	fi
fi

starpu_options=(--disable-static --disable-build-doc --disable-build-examples
	--disable-build-tests --disable-opencl --disable-fortran --disable-socl
	--disable-starpufft --disable-starpurm --enable-mpi --enable-maxcpus=256
	--enable-maxcudadev=8 --enable-maxnodes=16 --disable-mlr --with-fxt
	--enable-blocking-drivers)
if [ -n "$cuda_dir" ]; then
	starpu_options+=(--enable-cuda "--with-cuda-dir=$cuda_dir")
else
	starpu_options+=(--disable-cuda)
fi
patches=("$top/scripts/starpu-1.3.10-cuda13.patch" "$top/scripts/starpu-1.3.10-blocking.patch"
	"$top/scripts/starpu-1.3.10-one-awake.patch")
stamp="starpu $starpu_version ${starpu_options[*]} patch:$(cat "${patches[@]}" | sha1sum | cut -c1-12) bundle:3"

if [ $force = 0 ] && [ -f "$prefix/.stamp" ] && [ "$(cat "$prefix/.stamp")" = "$stamp" ]; then
	log "StarPU already built in .prefix/starpu (${cuda_dir:+CUDA }$starpu_version)"
	exit 0
fi

# ---------------------------------------------------------------- StarPU source
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
	[ "$(id -u)" = 0 ] || die "no deb-src entry in apt's sources; run this script as root"
	log "adding a deb-src entry for bookworm"
	cat >/etc/apt/sources.list.d/starfa-src.sources <<-'EOF'
		Types: deb-src
		URIs: http://deb.debian.org/debian
		Suites: bookworm
		Components: main
		Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
	EOF
	apt-get update -qq
fi

work="$top/.prefix/build"
rm -rf "$work" "$prefix"
mkdir -p "$work"
cd "$work"
log "fetching Debian's source package starpu=$starpu_version"
apt-get source -qq "starpu=$starpu_version" >source.log 2>&1 || {
	cat source.log >&2
	die "apt-get source starpu=$starpu_version failed"
}
src=$(find . -maxdepth 1 -type d -name 'starpu-*' -print -quit)
[ -n "$src" ] || die "the source package did not unpack"
cd "$src"
for p in "${patches[@]}"; do
	patch -p1 -s <"$p" || die "$(basename "$p") did not apply"
done

log "configuring StarPU (${starpu_options[*]})"
jobs=$(nproc)
# CUDA 13 dropped every architecture below sm_75: StarPU's own .cu files follow ours.
./configure --prefix="$prefix" "${starpu_options[@]}" \
	NVCCFLAGS="-gencode=arch=compute_75,code=sm_75 -gencode=arch=compute_90,code=sm_90" \
	>"$work/configure.log" 2>&1 || {
	tail -n 40 "$work/configure.log" >&2
	die "StarPU's configure failed (full log: .prefix/build/configure.log)"
}
log "building StarPU on $jobs cores"
make -j"$jobs" >"$work/make.log" 2>&1 || {
	grep -n -B2 -A8 'error' "$work/make.log" | head -n 60 >&2 || true
	die "StarPU's build failed (full log: .prefix/build/make.log)"
}
make install >"$work/install.log" 2>&1 || die "StarPU's install failed (.prefix/build/install.log)"

# ---------------------------------------------------------------- make the prefix relocatable
# Bundle every shared library StarPU or starfa links beyond glibc and CUDA's driver and
# toolkit (hwloc, OpenBLAS, LAPACKE, gfortran, OpenMP runtime, ...), and point every
# ELF file at its neighbours through $ORIGIN, so the prefix can be carried to another machine.
log "bundling shared libraries and making the prefix relocatable"
cd "$prefix"
rm -f lib/*.la
is_elf() { # the file (or what a link points at) starts with ELF's magic number
	[ "$(od -An -tx1 -N4 "$1" 2>/dev/null | tr -d ' \n')" = 7f454c46 ]
}
is_system_lib() {
	case "$(basename "$1")" in
	libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux* | linux-vdso* | libresolv.so*) return 0 ;;
	libcuda.so* | libcudart.so* | libcublas*.so* | libcusparse.so* | libcusolver.so* | libnvidia-ml.so* | libnvJitLink.so*) return 0 ;;
	esac
	return 1
}
bundle_from() {
	ldd "$1" 2>/dev/null | awk '/=> \//{print $3}' | while read -r dep; do
		is_system_lib "$dep" && continue
		name=$(basename "$dep")
		[ -e "lib/$name" ] || cp -L "$dep" "lib/$name"
	done
}
# starfa itself links these; bundle them (and their own needs) too.
extra=()
for l in libopenblas.so.0 liblapacke.so.3 libgomp.so.1 libhwloc.so.15; do
	# awk reads all of ldconfig's output: stopping early would kill ldconfig with SIGPIPE,
	# which pipefail turns into a failure of this script.
	p=$(ldconfig -p | awk -v n="$l" '$1==n && /x86-64/ && p=="" {p=$NF} END {print p}')
	[ -n "$p" ] && extra+=("$p")
done
for f in lib/*.so* bin/* "${extra[@]}"; do
	is_elf "$f" || continue
	bundle_from "$f"
	case "$f" in /*) name=$(basename "$f"); [ -e "lib/$name" ] || cp -L "$f" "lib/$name" ;; esac
done
# Bundled libraries may need further ones.
for f in lib/*.so*; do bundle_from "$f"; done
for f in lib/*.so*; do
	[ -L "$f" ] && continue
	is_elf "$f" || continue
	strip --strip-debug "$f" # the prefix travels: StarPU's -g3 alone triples its size
	patchelf --set-rpath '$ORIGIN' "$f"
done
for f in bin/*; do
	[ -L "$f" ] && continue
	is_elf "$f" || continue
	patchelf --set-rpath '$ORIGIN/../lib' "$f"
done
for pc in lib/pkgconfig/*.pc; do
	sed -i -e 's|^prefix=.*|prefix=${pcfiledir}/../..|' \
		-e "s|$prefix|\${prefix}|g" "$pc"
done
# Tools like starpu_perfmodel_display are scripts in places; fix any hard-coded prefix.
grep -rlI "$prefix" bin 2>/dev/null | while read -r f; do
	sed -i "s|$prefix|\$(cd \"\$(dirname \"\$0\")/..\" \&\& pwd)|g" "$f"
done
printf '%s\n' "$stamp" >"$prefix/.stamp"
rm -rf "$work"
log "StarPU ${cuda_dir:+with CUDA ($cuda_dir) }installed in .prefix/starpu"
