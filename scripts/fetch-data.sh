#!/usr/bin/env bash
# Fetches real datasets for starfa, all from Debian's archive, into a data folder.
#
#   scripts/fetch-data.sh [DIR] [--only movielens|notredame|enron]...
#
#   DIR          data folder (default: data/ at the repository root)
#   --only NAME  fetch only this dataset (repeatable; default: all three)
#     movielens  movielens-small.csv   MovieLens latest-small ratings (r-cran-dslabs)
#     notredame  NotreDame_www.mtx     web graph of nd.edu (suitesparse source package)
#     enron      email-Enron.mtx       Enron e-mail network (python3-graph-tool)
#
# Files already in place are kept, so a second run does nothing. Missing Debian packages
# are installed with apt-get (needs root only then). DIR/README describes the files.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)

# Pinned Debian bookworm versions: the checks below expect exactly their contents.
dslabs_version=0.7.4-1
suitesparse_version=1:5.12.0+dfsg-2
graph_tool_version=2.45+ds-10

log() { printf 'fetch-data: %s\n' "$*"; }
die() {
	printf 'fetch-data: error: %s\n' "$*" >&2
	exit 1
}
usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }

# ---------------------------------------------------------------- options
data=""
only=()
while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help)
		usage
		exit 0
		;;
	--only | --only=*)
		if [ "$1" = --only ]; then
			[ $# -ge 2 ] || die "--only needs a dataset name (movielens, notredame or enron)"
			name=$2
			shift
		else
			name=${1#--only=}
		fi
		case "$name" in
		movielens | notredame | enron) only+=("$name") ;;
		*) die "unknown dataset '$name' (expected movielens, notredame or enron)" ;;
		esac
		;;
	-*) die "unknown option '$1' (see --help)" ;;
	*)
		[ -z "$data" ] || die "more than one data folder given ('$data', '$1')"
		data=$1
		;;
	esac
	shift
done
[ ${#only[@]} -gt 0 ] || only=(movielens notredame enron)
wanted() { [[ " ${only[*]} " == *" $1 "* ]]; }
data=${data:-$top/data}

for tool in apt-get dpkg-query dpkg-deb tar awk; do
	command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found; this script needs a Debian system"
done
mkdir -p "$data" || die "cannot create data folder $data"
[ -w "$data" ] || die "data folder $data is not writable"

# ---------------------------------------------------------------- temporary files
# Downloads go to a private work folder; outputs are written next to their destination and
# renamed into place only once complete and checked, so an interrupted run leaves nothing half-written.
work=$(mktemp -d "${TMPDIR:-/tmp}/fetch-data.XXXXXX") || die "cannot create a temporary folder"
pending=()
cleanup() {
	rm -rf "$work"
	[ ${#pending[@]} -eq 0 ] || rm -f "${pending[@]}"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# begin_output NAME: sets $tmp to a new temporary file in the data folder.
begin_output() {
	tmp=$(mktemp "$data/.$1.XXXXXX") || die "cannot write in $data"
	pending+=("$tmp")
}
# finish_output NAME: moves $tmp into place (same folder, so the rename is atomic).
finish_output() {
	chmod 0644 "$tmp"
	mv -f "$tmp" "$data/$1" || die "cannot move $tmp to $data/$1"
	log "wrote $data/$1"
}
present() { [ -s "$data/$1" ]; }

# quiet MESSAGE COMMAND...: runs COMMAND with its output kept aside, shown only if it fails.
quiet() {
	local msg=$1
	shift
	if ! "$@" >"$work/cmd.log" 2>&1; then
		tail -n 25 "$work/cmd.log" | sed 's/^/  | /' >&2
		die "$msg"
	fi
}

# ---------------------------------------------------------------- Debian packages
lists_updated=0
update_lists() {
	[ $lists_updated = 1 ] && return 0
	quiet "apt-get update failed" apt-get update -q
	lists_updated=1
}

# need_packages PKG...: installs those not installed yet (root needed only then).
need_packages() {
	local p missing=()
	for p in "$@"; do
		[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] ||
			missing+=("$p")
	done
	[ ${#missing[@]} -gt 0 ] || return 0
	[ "$(id -u)" = 0 ] || die "missing Debian packages: ${missing[*]}; run as root or install them first"
	log "installing ${missing[*]} (apt-get, a few minutes)"
	update_lists
	export DEBIAN_FRONTEND=noninteractive
	quiet "apt-get install ${missing[*]} failed" \
		apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# apt_fetch DIR ARGS...: runs 'apt-get ARGS' (download or source) in DIR. apt checks the
# files against the signed archive indexes; stale indexes are refreshed once (as root).
apt_fetch() {
	local dir=$1
	shift
	if (cd "$dir" && apt-get -q "$@") >"$work/cmd.log" 2>&1; then
		return 0
	fi
	if [ "$(id -u)" = 0 ] && [ $lists_updated = 0 ]; then
		update_lists
		(cd "$dir" && apt-get -q "$@") >"$work/cmd.log" 2>&1 && return 0
	fi
	tail -n 25 "$work/cmd.log" | sed 's/^/  | /' >&2
	die "apt-get $* failed"
}

# ---------------------------------------------------------------- checks
# check_mtx FILE ROWS COLS ENTRIES: the Matrix Market banner, size line and every index must agree
# (and a symmetric file must hold only its lower triangle).
check_mtx() {
	local msg
	msg=$(awk -v R="$2" -v C="$3" -v N="$4" '
		function fail(m) { if (!bad) bad = m }
		NR == 1 {
			if ($1 != "%%MatrixMarket" || $2 != "matrix" || $3 != "coordinate") fail("no coordinate Matrix Market banner")
			sym = ($5 == "symmetric")
			next
		}
		/^%/ { next }
		!sized {
			sized = 1
			if ($1 != R || $2 != C || $3 != N)
				fail(sprintf("size line says %s x %s, %s entries; expected %s x %s, %s", $1, $2, $3, R, C, N))
			next
		}
		{
			n++
			if ($1 !~ /^[0-9]+$/ || $2 !~ /^[0-9]+$/ || $1 < 1 || $1 > R || $2 < 1 || $2 > C)
				fail("bad entry on line " NR ": " $0)
			else if (sym && $1 + 0 < $2 + 0)
				fail("entry above the diagonal on line " NR ": " $0)
		}
		END {
			if (!sized) fail("no size line")
			else if (n != N) fail(sprintf("%d entries found, size line says %s", n, N))
			if (bad) { print bad; exit 1 }
		}' "$1") || die "check of $1 failed: $msg"
}

# mtx_size FILE: prints "ROWS COLS ENTRIES SYMMETRY" from the header.
mtx_size() {
	awk 'NR == 1 { sym = $5; next } /^%/ { next } { print $1, $2, $3, sym; exit }' "$1"
}

# movielens_counts FILE: checks every line and prints "RATINGS USERS MOVIES".
movielens_counts() {
	awk -F, '
		NR == 1 { if ($0 != "userId,movieId,rating,timestamp") { print "unexpected header: " $0; exit 1 } next }
		NF != 4 || $1 !~ /^[0-9]+$/ || $2 !~ /^[0-9]+$/ || $3 !~ /^[0-5]\.[05]$/ || $3 < 0.5 || $3 > 5 || $4 !~ /^[0-9]+$/ {
			print "bad line " NR ": " $0; exit 1
		}
		{ n++; if (!($1 in u)) { u[$1]; nu++ }; if (!($2 in m)) { m[$2]; nm++ } }
		END { if (n) print n, nu, nm; else { print "no ratings"; exit 1 } }' "$1"
}

# unpack_deb DEB DIR PATH...: unpacks only these files of a .deb (paths without the leading /).
unpack_deb() {
	local deb=$1 dir=$2
	shift 2
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dir" "${@/#/./}"
}
# list_mtx TARBALL OUT: the Matrix Market files in TARBALL.
list_mtx() { tar -tf "$1" | grep '\.mtx$' >"$2"; }
# extract_member TARBALL MEMBER OUT
extract_member() { tar -xOf "$1" "$2" >"$3"; }

did_something=0

# ---------------------------------------------------------------- MovieLens (r-cran-dslabs)
# dslabs keeps its data sets in an R lazy-load database; only base R is needed to read it, so the
# package is unpacked rather than installed (installing it would pull in ggplot2 and friends).
fetch_movielens() {
	local out=movielens-small.csv rdata counts ratings users movies
	if present $out; then
		log "movielens: $data/$out already present"
		return 0
	fi
	did_something=1
	need_packages r-base-core
	log "movielens: downloading r-cran-dslabs $dslabs_version"
	mkdir -p "$work/dslabs"
	apt_fetch "$work/dslabs" download "r-cran-dslabs=$dslabs_version"
	rdata=usr/lib/R/site-library/dslabs/data/Rdata
	quiet "movielens: cannot unpack $rdata.{rdb,rdx} from the .deb" \
		unpack_deb "$work"/dslabs/r-cran-dslabs_*.deb "$work/dslabs" "$rdata.rdb" "$rdata.rdx"

	begin_output $out
	# sprintf keeps ids and timestamps integral (no 1e+05) and ratings as MovieLens writes them (4.0, 3.5).
	# The R program goes to a file: Rscript -e mangles multi-line expressions.
	cat >"$work/movielens.R" <<'EOF'
args <- commandArgs(trailingOnly = TRUE)
e <- new.env()
lazyLoad(args[1], envir = e)
m <- e$movielens
if (!is.data.frame(m)) stop("no data frame movielens in ", args[1])
cols <- c("userId", "movieId", "rating", "timestamp")
if (!all(cols %in% names(m)))
	stop("movielens has columns ", paste(names(m), collapse = ", "))
for (col in cols) {
	x <- m[[col]]
	if (!is.numeric(x) || anyNA(x)) stop("column ", col, " is not numeric or has NAs")
}
whole <- function(x) all(x == round(x))
if (!whole(m$userId) || !whole(m$movieId) || !whole(m$timestamp) || !whole(2 * m$rating))
	stop("ids, timestamps or ratings are not what MovieLens uses")
lines <- sprintf("%d,%d,%.1f,%d", as.integer(m$userId), as.integer(m$movieId),
	m$rating, as.integer(m$timestamp))
writeLines(c(paste(cols, collapse = ","), lines), args[2])
EOF
	quiet "movielens: extracting dslabs::movielens with R failed" \
		Rscript --vanilla "$work/movielens.R" "$work/dslabs/$rdata" "$tmp"

	counts=$(movielens_counts "$tmp") || die "movielens: check of the CSV failed: $counts"
	read -r ratings users movies <<<"$counts"
	log "movielens: $ratings ratings, $users users, $movies movies"
	[ "$counts" = "100004 671 9066" ] ||
		die "movielens: expected 100004 ratings, 671 users, 9066 movies"
	finish_output $out
}

# ---------------------------------------------------------------- SuiteSparse source (NotreDame_www)
# The orig tarball of Debian's suitesparse source package ships some matrices of the SuiteSparse
# collection for Mongoose's tests; NotreDame_www is one of them. email-Enron is taken from here too
# if a tarball ever holds it (the list of its .mtx files is kept to know that without downloading).
fetch_suitesparse() {
	local list=suitesparse-matrices.txt tarball member enron_member=""
	local need_nd=0 need_enron=0
	if wanted notredame; then
		if present NotreDame_www.mtx && present $list; then
			log "notredame: $data/NotreDame_www.mtx already present"
		else
			need_nd=1
		fi
	fi
	if wanted enron && ! present email-Enron.mtx &&
		{ ! present $list || grep -qi '/email-Enron\.mtx$' "$data/$list"; }; then
		need_enron=1
	fi
	[ $need_nd = 1 ] || [ $need_enron = 1 ] || return 0
	did_something=1
	need_packages dpkg-dev xz-utils

	log "suitesparse: downloading source package $suitesparse_version (about 40 MB)"
	mkdir -p "$work/suitesparse"
	apt_fetch "$work/suitesparse" source --download-only "suitesparse=$suitesparse_version"
	tarball=$(find "$work/suitesparse" -maxdepth 1 -name 'suitesparse_*.orig.tar.*' -print -quit)
	[ -n "$tarball" ] || die "suitesparse: no orig tarball in the downloaded source package"

	begin_output $list
	quiet "suitesparse: cannot list $(basename "$tarball")" \
		list_mtx "$tarball" "$tmp"
	log "suitesparse: $(wc -l <"$tmp") Matrix Market files in $(basename "$tarball")"
	enron_member=$(grep -i -m 1 '/email-Enron\.mtx$' "$tmp" || true)
	finish_output $list

	if [ $need_nd = 1 ]; then
		# The tarball has a top folder (SuiteSparse-<version>/); take the path from the listing.
		member=$(grep -m 1 '/Mongoose/Matrix/NotreDame_www\.mtx$' "$data/$list" || true)
		[ -n "$member" ] || die "suitesparse: Mongoose/Matrix/NotreDame_www.mtx not in $(basename "$tarball")"
		begin_output NotreDame_www.mtx
		quiet "suitesparse: cannot extract $member" \
			extract_member "$tarball" "$member" "$tmp"
		check_mtx "$tmp" 325729 325729 929849
		log "notredame: 325729 x 325729, 929849 nonzeros"
		finish_output NotreDame_www.mtx
	fi

	if [ $need_enron = 1 ]; then
		if [ -n "$enron_member" ]; then
			begin_output email-Enron.mtx
			quiet "suitesparse: cannot extract $enron_member" \
				extract_member "$tarball" "$enron_member" "$tmp"
			check_mtx "$tmp" 36692 36692 183831
			log "enron: 36692 nodes, 183831 edges (from $enron_member)"
			finish_output email-Enron.mtx
		else
			log "enron: no email-Enron.mtx in the suitesparse tarball; using graph-tool's copy"
		fi
	fi
	rm -rf "$work/suitesparse"
}

# ---------------------------------------------------------------- email-Enron (python3-graph-tool)
# graph-tool ships email-Enron in its own binary format; the file is unpacked from the .deb (the
# package's dependencies are not needed) and converted by a small stdlib-only Python reader.
fetch_enron() {
	local out=email-Enron.mtx gt
	if present $out; then
		log "enron: $data/$out already present"
		return 0
	fi
	did_something=1
	need_packages python3
	log "enron: downloading python3-graph-tool $graph_tool_version (about 45 MB)"
	mkdir -p "$work/graph-tool"
	apt_fetch "$work/graph-tool" download "python3-graph-tool=$graph_tool_version"
	gt=usr/lib/python3/dist-packages/graph_tool/collection/email-Enron.gt.gz
	quiet "enron: cannot unpack $gt from the .deb" \
		unpack_deb "$work"/graph-tool/python3-graph-tool_*.deb "$work/graph-tool" "$gt"

	begin_output $out
	python3 - "$work/graph-tool/$gt" "$tmp" \
		"Debian package python3-graph-tool $graph_tool_version, /$gt" <<'EOF' || die "enron: conversion failed"
# Reads graph-tool's binary format (.gt): magic "\xe2\x9b\xbe gt", version byte, endianness byte
# (0 little, 1 big), uint64 length + comment, directed byte, uint64 N, then for each vertex a
# uint64 count and that many neighbour indices (uint8/16/32/64 depending on N); properties follow.
import gzip
import struct
import sys

src, out, source = sys.argv[1:4]


def fail(msg):
    sys.exit("fetch-data: error: enron: %s: %s" % (src, msg))


with gzip.open(src, "rb") as f:
    buf = f.read()
if buf[:6] != b"\xe2\x9b\xbe gt":
    fail("not a graph-tool binary file (starts with %r)" % buf[:6])
if buf[6] != 1:
    fail("unsupported format version %d" % buf[6])
if buf[7] not in (0, 1):
    fail("bad endianness byte %d" % buf[7])
order = "<" if buf[7] == 0 else ">"
pos = 8


def read(fmt, count=1):
    global pos
    fmt = "%s%d%s" % (order, count, fmt)
    try:
        values = struct.unpack_from(fmt, buf, pos)
    except struct.error:
        fail("truncated at byte %d" % pos)
    pos += struct.calcsize(fmt)
    return values


(length,) = read("Q")
comment = buf[pos : pos + length].decode("utf-8", "replace")
pos += length
directed = buf[pos]
pos += 1
(n,) = read("Q")
width = "B" if n < 1 << 8 else "H" if n < 1 << 16 else "I" if n < 1 << 32 else "Q"

edges = set()
listed = loops = 0
for v in range(n):
    (k,) = read("Q")
    for u in read(width, k):
        if u >= n:
            fail("neighbour index %d out of range at vertex %d" % (u, v))
        listed += 1
        if u == v:
            loops += 1
        else:
            edges.add((max(u, v), min(u, v)))
# Property maps come next; a sane count tells the adjacency lists were read with the right layout.
(nprops,) = read("Q")
if nprops > 1000:
    fail("implausible property count %d after the adjacency lists" % nprops)

print("fetch-data: enron: %s" % comment)
print(
    "fetch-data: enron: %d vertices, %s, %d adjacency entries, %d self loops, %d duplicates, %d edges"
    % (n, "directed" if directed else "undirected", listed, loops, listed - loops - len(edges), len(edges))
)
with open(out, "w") as f:
    f.write("%%MatrixMarket matrix coordinate pattern symmetric\n")
    f.write("% email-Enron: Enron e-mail communication network (SNAP), J. Leskovec, K. Lang,\n")
    f.write("%   A. Dasgupta, M. Mahoney, Internet Mathematics 6(1) 29-123, 2009\n")
    f.write("% source: " + source + "\n")
    f.write("% converted from graph-tool's binary format: lower triangle, 1-based,\n")
    f.write("%   each undirected edge once, self loops dropped, duplicates merged\n")
    f.write("%d %d %d\n" % (n, n, len(edges)))
    for i, j in sorted(edges, key=lambda e: (e[1], e[0])):
        f.write("%d %d\n" % (i + 1, j + 1))
EOF
	check_mtx "$tmp" 36692 36692 183831
	log "enron: 36692 nodes, 183831 edges"
	finish_output $out
}

# ---------------------------------------------------------------- README
# Describes whatever is in the data folder; rewritten only when that changes.
readme() {
	local size from full ratings users movies
	echo "Datasets for starfa, fetched from Debian's archive by scripts/fetch-data.sh"
	echo "(generated by that script; sizes are read from the files)."
	if present movielens-small.csv; then
		read -r ratings users movies < <(movielens_counts "$data/movielens-small.csv")
		cat <<-EOF

			movielens-small.csv
			  MovieLens "latest-small" ratings (GroupLens), as shipped in R's dslabs::movielens.
			  From Debian package r-cran-dslabs $dslabs_version (/usr/lib/R/site-library/dslabs/data/Rdata).
			  CSV, header userId,movieId,rating,timestamp; one rating per line; ratings 0.5..5 in
			  steps of 0.5; timestamps in seconds since 1970. Ids are MovieLens ids (not contiguous).
			  Size: $users users x $movies movies, $ratings ratings.
		EOF
	fi
	if present NotreDame_www.mtx; then
		read -r -a size < <(mtx_size "$data/NotreDame_www.mtx")
		cat <<-EOF

			NotreDame_www.mtx
			  Barabasi/NotreDame_www from the SuiteSparse Matrix Collection: web pages of nd.edu
			  and the links between them (directed graph).
			  From Debian source package suitesparse $suitesparse_version (Mongoose/Matrix/NotreDame_www.mtx).
			  Matrix Market, coordinate pattern ${size[3]}.
			  Size: ${size[0]} x ${size[1]}, ${size[2]} nonzeros.
		EOF
	fi
	if present email-Enron.mtx; then
		read -r -a size < <(mtx_size "$data/email-Enron.mtx")
		full=$((2 * size[2]))
		from="Debian source package suitesparse $suitesparse_version"
		if grep -q '^% source: Debian package python3-graph-tool' "$data/email-Enron.mtx"; then
			from="Debian package python3-graph-tool $graph_tool_version (graph_tool/collection/email-Enron.gt.gz, converted)"
		fi
		cat <<-EOF

			email-Enron.mtx
			  Enron e-mail communication network (SNAP email-Enron): an undirected edge between two
			  addresses that exchanged at least one e-mail.
			  From $from.
			  Matrix Market, coordinate pattern ${size[3]} (lower triangle, each edge once).
			  Size: ${size[0]} x ${size[1]}, ${size[2]} edges ($full nonzeros as a full matrix).
		EOF
	fi
	if present suitesparse-matrices.txt; then
		cat <<-EOF

			suitesparse-matrices.txt
			  The Matrix Market files in the suitesparse $suitesparse_version orig tarball, for reference.
		EOF
	fi
}

# ---------------------------------------------------------------- main
if wanted movielens; then fetch_movielens; fi
if wanted notredame || wanted enron; then fetch_suitesparse; fi
if wanted enron; then fetch_enron; fi

begin_output README
readme >"$tmp"
if [ -f "$data/README" ] && cmp -s "$tmp" "$data/README"; then
	rm -f "$tmp"
else
	finish_output README
fi

if [ $did_something = 0 ]; then
	log "all requested data already in $data; nothing to do"
fi
