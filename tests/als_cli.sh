#!/bin/sh
# starfa train, eval, recommend and export end to end on a small generated ratings file: outputs, the
# model, log and exported files, exit codes and messages on bad input, and nothing half-written after a
# failure.
set -u
. "$(dirname "$0")/cli_lib.sh"

# Ratings of 80 users on 50 items from a rank-2 model plus noise, half of the pairs, ids as strings.
awk 'BEGIN { srand(11); print "userId,movieId,rating,timestamp";
	for (u = 0; u < 80; u++) { a[u] = rand() - 0.5; b[u] = rand() - 0.5 }
	for (i = 0; i < 50; i++) { c[i] = 2 * rand() - 1; d[i] = 2 * rand() - 1 }
	for (u = 0; u < 80; u++) for (i = 0; i < 50; i++) if (rand() < 0.5) {
		r = 3 + 2 * (a[u] * c[i] + b[u] * d[i]) + 0.3 * (rand() - 0.5);
		r = r < 0.5 ? 0.5 : r > 5 ? 5 : r;
		printf "u%d,m%d,%.1f,%d\n", u, i, r, 1000 + u * 50 + i } }' >"$tmp/ratings.csv"
# A separate test file: some of the same pairs' neighbours, and a user and an item training never saw.
awk -F, 'NR > 1 && NR % 5 == 0 { print $1 "," $2 "," $3 } END { print "newcomer,m1,4"; print "u1,m999,3" }' \
	"$tmp/ratings.csv" >"$tmp/test.csv"
printf 'userId,movieId,rating\nu1,m0,3\nu1,m1,3\nu1,m2,3\n' >"$tmp/exclude.csv"

expect 0 'iter +6 .*train_rmse .*test_rmse 0\.[0-9]+' -- train --input "$tmp/ratings.csv" --test-fraction 0.2 \
	--seed 3 --rank 4 --iters 6 --out "$tmp/als.model" --log "$tmp/als.csv" --ncpus 2
[ -s "$tmp/als.model" ] || fail "train wrote no model"
head -n 1 "$tmp/als.csv" | grep -q '^iteration,seconds,train_rmse,loss,test_rmse,cpu_tasks,' || fail "log header: $(head -n 1 "$tmp/als.csv")"
[ "$(wc -l <"$tmp/als.csv")" -eq 7 ] || fail "log has $(wc -l <"$tmp/als.csv") lines, expected 7"
awk -F, 'NR > 1 && !($3 > 0 && $3 < 1 && $5 > 0 && $5 < 1.5) { exit 1 }' "$tmp/als.csv" || fail "log values: $(cat "$tmp/als.csv")"
expect 0 'test_rmse' -- train --input "$tmp/ratings.csv" --test "$tmp/test.csv" --rank 3 --iters 3 --solver cg \
	--cg-steps 4 --fp16 --out "$tmp/als-cg.model"
expect 0 '^profile over 3 iterations:$' -- train --input "$tmp/ratings.csv" --rank 3 --iters 3 --profile \
	--out "$tmp/profile.model" --ncpus 2
expect 0 '^  CPU 1 +[1-9][0-9]* +[0-9.]+ +[0-9.]+% +[0-9.]+% +[0-9.]+%$' -- train --input "$tmp/ratings.csv" --rank 3 \
	--iters 3 --profile --out "$tmp/profile.model" --ncpus 2
expect 0 'iter +4 .*p@10 0\.[0-9]+ +map@10 .*ndcg@10' -- train --algo ials --input "$tmp/ratings.csv" \
	--test-fraction 0.2 --rank 6 --iters 4 --alpha 5 --out "$tmp/ials.model" --row-tiles 2 --col-tiles 3

expect 0 'rmse=0\.[0-9]+' -- eval --model "$tmp/als.model" --test "$tmp/test.csv"
expect 0 '^model: explicit \(als\), 80 users, 50 items, rank 4, biases$' -- eval --model "$tmp/als.model" \
	--test "$tmp/test.csv"
expect 0 '^model: implicit \(ials\), 80 users, 50 items, rank 6$' -- eval --model "$tmp/ials.model" --test "$tmp/test.csv"
expect 0 'cold=2' -- eval --model "$tmp/als.model" --test "$tmp/test.csv"
expect 0 'precision@5=0\.[0-9]+ map@5=.* ndcg@5=' -- eval --model "$tmp/ials.model" --test "$tmp/test.csv" --k 5

expect 0 '^3	m[0-9]+	[0-9.-]+$' -- recommend --model "$tmp/als.model" --user u1 --k 3
# The model's line goes to standard error: standard output is the table alone.
expect 0 '^model: explicit \(als\), 80 users' -- recommend --model "$tmp/als.model" --user u1 --k 3
first=$("$starfa" recommend --model "$tmp/als.model" --user u1 --k 3 2>/dev/null | head -n 1)
[ "$first" = "$(printf 'rank\titem\tscore')" ] || fail "recommend's standard output begins with '$first'"
# Nothing the user rated in training comes back (the model keeps the training entries): als-cg.model
# was trained on the whole of ratings.csv.
"$starfa" recommend --model "$tmp/als-cg.model" --user u7 --k 50 | awk 'NR > 1 { print $2 }' >"$tmp/recs"
awk -F, '$1 == "u7" { print $2 }' "$tmp/ratings.csv" >"$tmp/rated"
[ "$(wc -l <"$tmp/recs")" -eq $((50 - $(wc -l <"$tmp/rated"))) ] || fail "u7: $(wc -l <"$tmp/recs") recommendations"
grep -qxFf "$tmp/rated" "$tmp/recs" && fail "recommend returned items u7 rated in training"
# --exclude leaves out more.
"$starfa" recommend --model "$tmp/als.model" --user u1 --k 50 --exclude "$tmp/exclude.csv" | awk 'NR > 1 { print $2 }' >"$tmp/recs-ex"
grep -Eqx 'm[012]' "$tmp/recs-ex" && fail "--exclude did not leave out m0, m1, m2"
expect 0 'not in the model' -- recommend --model "$tmp/ials.model" --user nobody --k 2
# Every item has far fewer than 1000 training entries: none is left to recommend.
out=$("$starfa" recommend --model "$tmp/als.model" --user u1 --k 3 --min-ratings 1000)
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "--min-ratings 1000 left items: $out"
# ... and for a user the model does not know.
out=$("$starfa" recommend --model "$tmp/als.model" --user nobody --k 3 --min-ratings 1000 2>/dev/null)
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "--min-ratings 1000 left items for an unknown user: $out"
expect 2 '--min-ratings expects an integer' -- recommend --model "$tmp/als.model" --user u1 --min-ratings 0

# Bad input: a clear message, a non-zero exit, and no model or log left behind.
expect 2 'needs --input FILE and --out MODEL' -- train --input "$tmp/ratings.csv"
expect 2 '--rank expects an integer' -- train --input "$tmp/ratings.csv" --out "$tmp/x.model" --rank 0
expect 2 '--solver must be one of chol\|cg' -- train --input "$tmp/ratings.csv" --out "$tmp/x.model" --solver lu
expect 2 '--algo must be als, ials, sgd, ccd, sfa, lda, gap or klnmf' -- train --input "$tmp/ratings.csv" --out "$tmp/x.model" --algo svd
expect 2 'not both' -- train --input "$tmp/ratings.csv" --out "$tmp/x.model" --test "$tmp/test.csv" --test-fraction 0.2
expect 1 'missing\.csv' -- train --input "$tmp/missing.csv" --out "$tmp/x.model" --log "$tmp/x.csv"
expect 1 'cannot write the model' -- train --input "$tmp/ratings.csv" --out "$tmp/no/such/folder/x.model"
printf 'userId,movieId,rating\nu1,m1,4\nu2,m1,-3\n' >"$tmp/negative.csv"
expect 1 'negative' -- train --algo ials --input "$tmp/negative.csv" --out "$tmp/x.model" --log "$tmp/x.csv"
[ -e "$tmp/x.model" ] && fail "a failed training left a model"
[ -e "$tmp/x.csv" ] && fail "a failed training left a log"
ls "$tmp" | grep -q '\.tmp\.' && fail "temporary files left: $(ls "$tmp")"

# export: a model's arrays as tab-separated text, a line per user or item, its id first.
expect 0 'user-factors: 80 lines of 4 values written' -- export --model "$tmp/als.model" --what user-factors \
	--out "$tmp/uf.tsv"
awk -F'\t' 'NF != 5 || $1 !~ /^u[0-9]+$/ || seen[$1]++ { exit 1 } END { exit NR != 80 }' "$tmp/uf.tsv" ||
	fail "user factors: $(head -n 3 "$tmp/uf.tsv")"
expect 0 'item-bias: 50 lines of 1 value written' -- export --model "$tmp/als.model" --what item-bias --out "$tmp/ib.tsv"
awk -F'\t' 'NF != 2 || $1 !~ /^m[0-9]+$/ || $2 !~ /^-?[0-9.e+-]+$/ { exit 1 } END { exit NR != 50 }' "$tmp/ib.tsv" ||
	fail "item biases: $(head -n 3 "$tmp/ib.tsv")"
expect 0 'item-factors: 50 lines of 6 values' -- export --model "$tmp/ials.model" --what item-factors \
	--out "$tmp/if.tsv"
expect 0 'user-bias or item-bias' -- export --help
expect 0 'export +write a model' -- --help
# ... and on errors a message, a non-zero exit and no file.
expect 1 'no user biases' -- export --model "$tmp/ials.model" --what user-bias --out "$tmp/none.tsv"
expect 2 '--what must be user-factors, item-factors, user-bias, item-bias, topic-word or doc-topic' -- export --model "$tmp/als.model" \
	--what factors --out "$tmp/none.tsv"
expect 2 'needs --model MODEL, --what WHAT and --out FILE.tsv' -- export --model "$tmp/als.model" --what user-bias
expect 2 'unexpected argument' -- export --model "$tmp/als.model" --what user-bias --out "$tmp/none.tsv" extra
expect 1 'missing\.model' -- export --model "$tmp/missing.model" --what user-bias --out "$tmp/none.tsv"
expect 1 'cannot create a temporary file beside' -- export --model "$tmp/als.model" --what user-bias \
	--out "$tmp/no/such/folder/none.tsv"
[ -e "$tmp/none.tsv" ] && fail "a failed export left a file"
ls "$tmp" | grep -q '\.tmp\.' && fail "temporary files left: $(ls "$tmp")"

head -c 200 "$tmp/als.model" >"$tmp/cut.model"
expect 1 'cut\.model: not a valid starfa model: truncated' -- eval --model "$tmp/cut.model" --test "$tmp/test.csv"
cp "$tmp/als.model" "$tmp/flip.model"
printf 'X' | dd of="$tmp/flip.model" bs=1 seek=300 conv=notrunc 2>/dev/null
expect 1 'checksum' -- recommend --model "$tmp/flip.model" --user u1
expect 1 'STARFAMD' -- recommend --model "$tmp/ratings.csv" --user u1
expect 1 'missing\.model' -- eval --model "$tmp/missing.model" --test "$tmp/test.csv"
expect 1 'missing\.csv' -- eval --model "$tmp/als.model" --test "$tmp/missing.csv"
expect 2 'needs --model MODEL and --user ID' -- recommend --model "$tmp/als.model"
expect 2 '--k expects an integer' -- recommend --model "$tmp/als.model" --user u1 --k 0
expect 2 'needs --model MODEL and --test FILE' -- eval --test "$tmp/test.csv"

# A rating given again replaces the earlier one (explicit ALS): 5 then 1 trains as 1.
printf 'u,i,r\na,x,5\na,y,2\nb,x,4\nb,y,3\na,x,1\n' >"$tmp/again.csv"
expect 0 'note: 1 repeated \(user, item\) ratings' -- train --input "$tmp/again.csv" --rank 1 --iters 2 \
	--out "$tmp/again.model"

# SGD through the same driver: progress columns, the explicit model, eval; bad rates are usage errors.
expect 0 'iter +[0-9]+ .*epoch [0-9]+ +lr 0\.[0-9]+ +train_rmse .*test_rmse 0\.[0-9]+' -- train --algo sgd \
	--input "$tmp/ratings.csv" --test-fraction 0.2 --rank 4 --iters 5 --out "$tmp/sgd.model" --strata 2
expect 0 'model: explicit \(sgd\)' -- eval --model "$tmp/sgd.model" --test "$tmp/test.csv"
expect 2 '--lr expects a number' -- train --algo sgd --input "$tmp/ratings.csv" --out "$tmp/x.model" --lr 0
expect 2 '--schedule must be one of bolddriver\|invtime' -- train --algo sgd --input "$tmp/ratings.csv" \
	--out "$tmp/x.model" --schedule adam
expect 1 '1000 strata need' -- train --algo sgd --input "$tmp/ratings.csv" --out "$tmp/x.model" --strata 1000
[ -e "$tmp/x.model" ] && fail "a failed sgd run left a model"
expect 0 'iter +[0-9]+ .*train_rmse 0\.[0-9]+ .*test_rmse 0\.[0-9]+' -- train --algo sgd --fp16 \
	--input "$tmp/ratings.csv" --test-fraction 0.2 --rank 4 --iters 5 --out "$tmp/sgd16.model" --strata 2

# SFA: ALS's equations by CG on SDDMM + SpMM; an explicit model that eval and recommend take as ALS's.
expect 0 'iter +[0-9]+ .*train_rmse 0\.[0-9]+ +loss 0\.[0-9]+ +test_rmse 0\.[0-9]+' -- train --algo sfa \
	--input "$tmp/ratings.csv" --test-fraction 0.2 --rank 4 --iters 5 --cg-steps 2 --out "$tmp/sfa.model"
expect 0 'rmse=[0-9]+\.[0-9]+' -- eval --model "$tmp/sfa.model" --test "$tmp/test.csv"
expect 0 'model: explicit \(sfa\)' -- recommend --model "$tmp/sfa.model" --user 1 --k 3
expect 2 '--cg-steps expects' -- train --algo sfa --input "$tmp/ratings.csv" --out "$tmp/x.model" --cg-steps 0

# CCD++ likewise; --nonneg keeps the factors non-negative.
expect 0 'iter +[0-9]+ .*train_rmse 0\.[0-9]+ +loss 0\.[0-9]+ +test_rmse 0\.[0-9]+' -- train --algo ccd \
	--input "$tmp/ratings.csv" --test-fraction 0.2 --rank 4 --iters 5 --inner 2 --out "$tmp/ccd.model"
expect 0 'model: explicit \(ccd\)' -- eval --model "$tmp/ccd.model" --test "$tmp/test.csv"
expect 0 'model: 80 users, 50 items, rank 3' -- train --algo ccd --nonneg --input "$tmp/ratings.csv" --rank 3 --iters 3 \
	--out "$tmp/ccdnn.model"
expect 0 '' -- export --model "$tmp/ccdnn.model" --what user-factors --out "$tmp/ccdnn.tsv"
awk -F'\t' '{ for (i = 2; i <= NF; i++) if ($i + 0 < 0) bad = 1 } END { exit bad }' "$tmp/ccdnn.tsv" ||
	fail "ccd --nonneg exported a negative factor"
expect 2 '--inner expects an integer' -- train --algo ccd --input "$tmp/ratings.csv" --out "$tmp/x.model" --inner 0
expect 1 '1000 tiles a side need' -- train --algo ccd --input "$tmp/ratings.csv" --out "$tmp/x.model" --tiles 1000
[ -e "$tmp/x.model" ] && fail "a failed ccd run left a model"

# The task log: every task with its worker and times, drawn per worker by scripts/gantt.py.
expect 0 'model: ' -- train --algo sgd --input "$tmp/ratings.csv" --rank 4 --iters 3 --strata 2 \
	--out "$tmp/tl.model" --task-log "$tmp/tasks.csv"
head -1 "$tmp/tasks.csv" | grep -q '^codelet,worker,worker_name,start_s,end_s,reads,writes,cost$' ||
	fail "the task log has no header"
[ "$(grep -c '^sgd,' "$tmp/tasks.csv")" -ge 12 ] || fail "the task log lacks the 3 x 4 sgd tasks"
awk -F, 'NR > 1 && ($5 < $4 || $4 < 0) { bad = 1 } END { exit bad }' "$tmp/tasks.csv" ||
	fail "a task in the log ends before it starts"
awk -F, '$1 == "sgd" && !($NF > 0) { bad = 1 } END { exit bad }' "$tmp/tasks.csv" ||
	fail "an sgd task in the log has no cost"
if command -v python3 >/dev/null; then
	gantt="$(dirname "$0")/../scripts/gantt.py"
	[ -f "$gantt" ] || gantt="${STARFA_SRCDIR:-.}/scripts/gantt.py"
	python3 "$gantt" "$tmp/tasks.csv" "$tmp/tasks.svg" >"$tmp/gantt.txt" || fail "gantt.py failed"
	grep -q 'busy' "$tmp/gantt.txt" || fail "gantt.py printed no busy times"
	grep -q '<svg' "$tmp/tasks.svg" || fail "gantt.py wrote no SVG"
	python3 "$gantt" "$tmp/missing.csv" "$tmp/x.svg" 2>/dev/null && fail "gantt.py read a missing log"
	[ -e "$tmp/x.svg" ] && fail "gantt.py wrote an SVG from nothing"
fi
expect 1 'cannot write the task log' -- train --input "$tmp/ratings.csv" --rank 2 --iters 1 --out "$tmp/y.model" \
	--task-log "$tmp/no/such/dir/tasks.csv"
[ -e "$tmp/y.model" ] && fail "a run whose task log cannot be written left a model"

# --eval-every: the test metrics after iterations 1, 2, 4 and 5 (every 2nd, the first and the last), an
# empty cell in the log after 3; the training loss after every one.
expect 0 'iter +5 .*test_rmse' -- train --input "$tmp/ratings.csv" --test-fraction 0.2 --seed 3 --rank 4 --iters 5 \
	--eval-every 2 --out "$tmp/ee.model" --log "$tmp/ee.csv" --ncpus 2
awk -F, 'NR > 1 { if (($5 == "") != ($1 == 3) || $4 == "") exit 1 }' "$tmp/ee.csv" || fail "eval-every log: $(cat "$tmp/ee.csv")"
expect 2 '--eval-every expects an integer' -- train --input "$tmp/ratings.csv" --eval-every 0 --out "$tmp/x.model"

# eval of an implicit model of users x items x rank >= 2^35 starts the runtime (its trace is written;
# the GPUs rank where there are any): 200,000 users, about 5,900 items, rank 32.
awk 'BEGIN { srand(5); print "userId,movieId,rating";
	for (u = 0; u < 200000; u++) for (j = 0; j < 2; j++) printf "u%d,m%d,1\n", u, int(rand() * rand() * 6000) }' \
	>"$tmp/wide.csv"
awk 'BEGIN { srand(6); for (e = 0; e < 3000; e++) printf "u%d,m%d,1\n", int(rand() * 200000), int(rand() * rand() * 6000) }' \
	>"$tmp/wide-test.csv"
expect 0 'model: 200000 users' -- train --algo ials --input "$tmp/wide.csv" --rank 32 --iters 1 --out "$tmp/wide.model" \
	--ncpus 2
expect 0 'precision@10=0\.[0-9]+ map@10=.*users=[1-9]' -- eval --model "$tmp/wide.model" --test "$tmp/wide-test.csv" \
	--ncpus 2 --trace "$tmp/wide-trace"
[ -s "$tmp/wide-trace/paje.trace" ] || fail "eval of a wide implicit model started no runtime (no trace)"
expect 0 'trace: ' -- eval --model "$tmp/als.model" --test "$tmp/test.csv" --ncpus 2 --trace "$tmp/small-trace"
[ -s "$tmp/small-trace/paje.trace" ] || fail "eval --trace of a small model wrote no trace"
finish
