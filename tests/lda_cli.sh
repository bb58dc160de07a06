#!/bin/sh
# The topic-model commands on a small planted-LDA corpus: train --algo lda with a vocabulary and held-out
# documents, topics, transform, export topic-word and doc-topic, eval's document-completion perplexity,
# and the errors a topic-modelling user meets (a vocabulary of the wrong length, word ids beyond the
# model's, a model of another kind), each leaving no file behind.
set -u
. "$(dirname "$0")/cli_lib.sh"
corpus=${STARFA_CORPUS:-./bench/starfa_corpus}
[ -x "$corpus" ] || { echo "no $corpus: skipped"; exit 77; }
"$corpus" --out "$tmp/c" --docs 240 --vocab 150 --topics 4 --mean-length 60 >/dev/null || fail "starfa_corpus failed"
# an empty document among them (real corpora have them): document 241 of a corpus that says so
awk 'NR == 1 { print $1 + 1; next } { print }' "$tmp/c.docword.txt" >"$tmp/e.docword.txt"

expect 0 "note: .* documents have no words|test_perplexity" -- train --algo lda --input "$tmp/e.docword.txt" \
	--vocab "$tmp/c.vocab.txt" --rank 4 --iters 6 --test-fraction 0.2 --out "$tmp/lda.model" --log "$tmp/lda.csv"
# the bound never decreases (batch mode), perplexities are numbers
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
	{ b = $col["elbo_per_token"]; if (NR > 2 && b < prev - 1e-5 * (prev < 0 ? -prev : prev)) { print "bound decreased: " prev " -> " b; bad = 1 }
	  prev = b; if (!($col["test_perplexity"] > 1)) { print "test perplexity " $col["test_perplexity"]; bad = 1 } }
	END { exit bad }' "$tmp/lda.csv" || fail "the training log: $(cat "$tmp/lda.csv")"
expect 0 "topic 4: w[0-9]+ w[0-9]+ w[0-9]+" -- topics --model "$tmp/lda.model" --top 3
expect 0 "topic 1: w[0-9]+ \(0\.[0-9]+\)" -- topics --model "$tmp/lda.model" --top 2 --weights

expect 0 "theta: 241 lines of 4 proportions" -- transform --model "$tmp/lda.model" --input "$tmp/e.docword.txt" \
	--out "$tmp/theta.tsv"
awk -F'\t' 'NF != 4 { bad = 1 } { s = 0; for (i = 1; i <= NF; i++) { if ($i < 0) bad = 1; s += $i } if (s < 0.9999 || s > 1.0001) bad = 1 }
	END { exit bad || NR != 241 }' "$tmp/theta.tsv" || fail "theta rows are not 4 proportions summing to 1"
# the empty document's mixture is the prior's mean
[ "$(sed -n 241p "$tmp/theta.tsv")" = "$(printf '0.25\t0.25\t0.25\t0.25')" ] || fail "empty document: $(sed -n 241p "$tmp/theta.tsv")"
expect 0 "topic-word: 4 lines of 150 values" -- export --model "$tmp/lda.model" --what topic-word --out "$tmp/beta.tsv"
awk -F'\t' 'NF != 150 { bad = 1 } { s = 0; for (i = 1; i <= NF; i++) s += $i; if (s < 0.9999 || s > 1.0001) bad = 1 }
	END { exit bad || NR != 4 }' "$tmp/beta.tsv" || fail "beta rows are not 150 probabilities summing to 1"
expect 0 "doc-topic: [0-9]+ lines of 4 values" -- export --model "$tmp/lda.model" --what doc-topic --out "$tmp/dt.tsv"
expect 0 "perplexity=[0-9]+\.[0-9]+" -- eval --model "$tmp/lda.model" --test "$tmp/c.docword.txt"
expect 0 "note: 1 documents have no words" -- eval --model "$tmp/lda.model" --test "$tmp/e.docword.txt"

# count models: GaP and KL-NMF, their objectives never rising, and the same topic commands
expect 0 "objective_per_token" -- train --algo gap --input "$tmp/e.docword.txt" --vocab "$tmp/c.vocab.txt" --rank 4 \
	--iters 8 --test-fraction 0.2 --out "$tmp/gap.model" --log "$tmp/gap.csv"
expect 0 "kl_per_token" -- train --algo klnmf --input "$tmp/e.docword.txt" --rank 4 --iters 8 --out "$tmp/kl.model" \
	--log "$tmp/kl.csv"
for f in gap:objective_per_token kl:kl_per_token; do
	awk -F, -v c="${f#*:}" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
		{ v = $col[c]; if (NR > 2 && v > prev + 1e-5 * prev) { print c " rose: " prev " -> " v; bad = 1 } prev = v }
		END { exit bad || NR != 9 }' "$tmp/${f%%:*}.csv" || fail "the ${f%%:*} log: $(cat "$tmp/${f%%:*}.csv")"
done
expect 0 "topic 4: w[0-9]+ w[0-9]+ w[0-9]+" -- topics --model "$tmp/gap.model" --top 3
expect 0 "theta: 241 lines of 4 proportions" -- transform --model "$tmp/kl.model" --input "$tmp/e.docword.txt" \
	--out "$tmp/theta.tsv"
awk -F'\t' 'NF != 4 { bad = 1 } { s = 0; for (i = 1; i <= NF; i++) { if ($i < 0) bad = 1; s += $i } if (s < 0.9999 || s > 1.0001) bad = 1 }
	END { exit bad || NR != 241 }' "$tmp/theta.tsv" || fail "KL-NMF theta rows are not 4 proportions summing to 1"
expect 0 "doc-topic: [0-9]+ lines of 4 values" -- export --model "$tmp/gap.model" --what doc-topic --out "$tmp/dt.tsv"
awk -F'\t' '{ s = 0; for (i = 1; i <= NF; i++) s += $i; if (s < 0.9999 || s > 1.0001) bad = 1 } END { exit bad }' \
	"$tmp/dt.tsv" || fail "GaP doc-topic rows do not sum to 1"
expect 0 "perplexity=[0-9]+\.[0-9]+" -- eval --model "$tmp/gap.model" --test "$tmp/c.docword.txt"
expect 2 "--shape expects a number in \\[1, " -- train --algo gap --input "$tmp/c.docword.txt" --shape 0.5 --out "$tmp/x.model"
expect 2 "unrecognized option .--shape." -- train --algo klnmf --input "$tmp/c.docword.txt" --shape 2 --out "$tmp/x.model"

# errors
head -n 149 "$tmp/c.vocab.txt" >"$tmp/short.txt"
expect 1 "short.txt:150: the vocabulary ends after 149 words, but the matrix has 150 columns" -- train --algo lda \
	--input "$tmp/c.docword.txt" --vocab "$tmp/short.txt" --out "$tmp/x.model"
{ cat "$tmp/c.vocab.txt"; echo extra; } >"$tmp/long.txt"
expect 1 "long.txt:151: word 'extra' is one more than the 150 columns" -- train --algo lda \
	--input "$tmp/c.docword.txt" --vocab "$tmp/long.txt" --out "$tmp/x.model"
awk 'NR == 2 { print 151; next } NR == 3 { print $1 + 1; next } { print } END { print "1 151 2" }' "$tmp/c.docword.txt" >"$tmp/wide.docword.txt"
expect 1 "wide.docword.txt:2: 151 words declared, but the model knows 150" -- transform --model "$tmp/lda.model" \
	--input "$tmp/wide.docword.txt" --out "$tmp/x.tsv"
expect 1 "wide.docword.txt:2: 151 words declared" -- eval --model "$tmp/lda.model" --test "$tmp/wide.docword.txt"
expect 0 "model:" -- train --input "$tmp/c.docword.txt" --rank 2 --iters 1 --out "$tmp/als.model"
expect 1 "transform needs a topic or count model" -- transform --model "$tmp/als.model" --input "$tmp/c.docword.txt" --out "$tmp/x.tsv"
expect 1 "topic-word probabilities need a topic model or a non-negative one" -- topics --model "$tmp/als.model"
[ -e "$tmp/x.model" ] || [ -e "$tmp/x.tsv" ] && fail "a failed command left a file"
ls "$tmp" | grep -q '\.tmp\.' && fail "a temporary file was left behind"
finish
