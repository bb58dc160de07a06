#!/bin/sh
# bench/starfa_corpus: a small planted-LDA corpus is the same for the same seed, its header counts its
# lines, starfa reads it, and bad options or an unwritable place leave nothing behind.
set -u
. "$(dirname "$0")/cli_lib.sh"
corpus=${STARFA_CORPUS:-./bench/starfa_corpus}
[ -x "$corpus" ] || { echo "no $corpus: skipped"; exit 77; }

"$corpus" --out "$tmp/a" --docs 300 --vocab 200 --topics 4 --mean-length 40 --perplexity >"$tmp/a.out" ||
	fail "starfa_corpus failed: $(cat "$tmp/a.out")"
grep -Eq "planted model's perplexity on the corpus: [0-9]+\.[0-9]+" "$tmp/a.out" || fail "no perplexity printed"
"$corpus" --out "$tmp/b" --docs 300 --vocab 200 --topics 4 --mean-length 40 >/dev/null || fail "second run failed"
cmp -s "$tmp/a.docword.txt" "$tmp/b.docword.txt" || fail "the same seed gave another corpus"
"$corpus" --out "$tmp/c" --docs 300 --vocab 200 --topics 4 --mean-length 40 --seed 2 >/dev/null
cmp -s "$tmp/a.docword.txt" "$tmp/c.docword.txt" && fail "another seed gave the same corpus"
[ "$(sed -n 1p "$tmp/a.docword.txt")" = 300 ] && [ "$(sed -n 2p "$tmp/a.docword.txt")" = 200 ] ||
	fail "header: documents and words"
nnz=$(sed -n 3p "$tmp/a.docword.txt" | sed 's/^0*//')
[ "$nnz" -eq "$(($(wc -l <"$tmp/a.docword.txt") - 3))" ] || fail "header NNZ $nnz is not the number of entries"
[ "$(wc -l <"$tmp/a.vocab.txt")" -eq 200 ] || fail "the vocabulary has not 200 lines"
awk 'NR > 3 && ($1 < 1 || $1 > 300 || $2 < 1 || $2 > 200 || $3 < 1) { bad = 1 } END { exit bad }' \
	"$tmp/a.docword.txt" || fail "an entry outside the corpus"
expect 0 "entries=$nnz" -- train --input "$tmp/a.docword.txt" --rank 2 --iters 1 --out "$tmp/a.model"
"$corpus" --out "$tmp/x" --docs 0 >/dev/null 2>&1; [ $? -eq 2 ] || fail "--docs 0 is not a usage error"
"$corpus" --docs 10 >/dev/null 2>&1; [ $? -eq 2 ] || fail "a missing --out is not a usage error"
"$corpus" --out "$tmp/no/such/dir/x" --docs 10 --vocab 20 >/dev/null 2>&1; [ $? -eq 1 ] ||
	fail "an unwritable --out is not an error"
ls "$tmp" | grep -q '\.tmp\.' && fail "a temporary file was left behind"
finish
