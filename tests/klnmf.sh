#!/bin/sh
# examples/klnmf, the KL-NMF written with the public API alone: its divergence per token never
# increases, and follows a dense double-precision reference of the same updates from the same start.
. "${STARFA_SRCDIR:-.}/tests/cli_lib.sh"
klnmf=${KLNMF:-./examples/klnmf}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 is needed for the reference"; exit 77; }

# A small matrix of counts: 40 x 30, about a third of the entries, counts 1..6 from a fixed
# pseudo-random stream (a 31-bit linear congruential generator, the same in every awk).
awk 'function next_u() { x = (x * 1103515245 + 12345) % 2147483648; return x / 2147483648 }
BEGIN {
	n = 0; x = 20261124
	for (i = 1; i <= 40; i++) for (j = 1; j <= 30; j++) if (next_u() < 0.35) { r[n] = i; c[n] = j; v[n] = 1 + int(6 * next_u()); n++ }
	print "%%MatrixMarket matrix coordinate integer general"
	print 40, 30, n
	for (e = 0; e < n; e++) print r[e], c[e], v[e]
}' >"$tmp/counts.mtx"

"$klnmf" "$tmp/counts.mtx" 3 12 >"$tmp/out" 2>"$tmp/err" || fail "klnmf failed: $(cat "$tmp/err")"
python3 "$STARFA_SRCDIR/tests/klnmf_ref.py" "$tmp/counts.mtx" 3 12 >"$tmp/ref" || fail "the reference failed"
sed -n 's/^iter *\([0-9]*\) .*kl_per_token=\(.*\)$/\1 \2/p' "$tmp/out" >"$tmp/got"
sed -n 's/^iter \([0-9]*\) kl_per_token=\(.*\)$/\1 \2/p' "$tmp/ref" >"$tmp/want"
[ "$(wc -l <"$tmp/got")" -eq 13 ] || fail "expected 13 kl_per_token lines, got: $(cat "$tmp/out")"
# Never increasing (float32 rounding allowed: predictions and column sums in float32 leave a few 1e-7 of
# the tokens' mass in the divergence per token), decreasing overall, and within 1e-4 of the reference at
# every iteration.
awk 'NR > 1 && $2 > prev + 2e-6 { print "increased at iteration " $1 ": " prev " -> " $2; bad = 1 }
	{ prev = $2 } NR == 1 { first = $2 }
	END { if (!(prev < 0.9 * first)) { print "no progress: " first " -> " prev; bad = 1 } exit bad }' "$tmp/got" ||
	fail "kl_per_token: $(cat "$tmp/got")"
paste "$tmp/got" "$tmp/want" | awk '{ d = $2 - $4; if (d < 0) d = -d; if (d > 1e-4 * $4) { print "iteration " $1 ": " $2 " against the reference " $4; bad = 1 } } END { exit bad }' ||
	fail "klnmf departs from the dense reference"

# Bad input: usage, a negative value, a missing file.
"$klnmf" "$tmp/counts.mtx" 0 3 >/dev/null 2>&1; [ $? -eq 2 ] || fail "K 0 is a usage error"
printf '%%%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 -1\n' >"$tmp/neg.mtx"
"$klnmf" "$tmp/neg.mtx" 2 3 >/dev/null 2>"$tmp/err"; [ $? -eq 1 ] && grep -q 'not a count' "$tmp/err" || fail "negative values: $(cat "$tmp/err")"
"$klnmf" "$tmp/missing.mtx" 2 3 >/dev/null 2>"$tmp/err"; [ $? -eq 1 ] || fail "a missing file exits 1"
finish
