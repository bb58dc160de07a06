/* top_k: each row's best columns of each column band, on CPU workers alone and on CUDA workers alone,
 * against a full sort of scores that float arithmetic computes exactly in any order. */
#include "testing.h"
#include "cpu/topk.h"
#include "model/model.h"
#ifdef STARFA_USE_CUDA
#include "gpu/topk.h"
#include "testing_cuda.h"
/* The CUDA kernel's chunk of rows: small here, so that the cases take several chunks a task. */
#define CHUNK_LIMIT(bytes) starfa_cuda_top_k_chunk_limit(bytes)
#else
static size_t no_chunk_limit(size_t bytes)
{
	(void)bytes;
	return 0;
}
#define CHUNK_LIMIT(bytes) no_chunk_limit(bytes)
#endif

#include <stdlib.h>
#include <string.h>

/* A multiple of 1/8 in [-levels/8, levels/8]: with rank <= 32 every product and partial sum is exact in
 * float, so SGEMM in any order, the CPU and the GPU give the reference's scores to the bit, ties included. */
static float eighth(uint64_t *rng, int levels)
{
	return (float)((int64_t)testing_below(rng, (uint64_t)(2 * levels + 1)) - levels) / 8.0f;
}

/* The largest |score| * 64: rank 32 times (16/8)^2, times 64. */
#define KEY_MAX (32 * 4 * 64)

struct ranked {
	float score;
	int32_t item;
};

static int by_rank(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return (x->item > y->item) - (x->item < y->item);
}

/* One case: S (m x n, nnz entries) in row_tiles x col_tiles tiles, factors of the given rank, k. Row 0's
 * factors are zeros (every score ties: the lowest columns win), row 1's NaN (no list), column 2's NaN (never
 * ranked); about a fifth of the rows inactive, or with all_active every row (no active block given). */
static int one_case(int64_t m, int64_t n, int64_t nnz, int64_t rank, int64_t k, int64_t row_tiles, int64_t col_tiles,
		    int levels, int all_active, uint64_t *rng)
{
	starfa_csr *S = testing_random_csr(m, n, nnz, 0.5, rng);
	CHECK(S);
	starfa_tiling_options tiling = {row_tiles, col_tiles, 0};
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(S, &tiling, &t));
	const int64_t nb = starfa_tiled_col_tiles(t);
	const int64_t *col0 = starfa_tiled_col_bounds(t);
	float *A = malloc(sizeof(float) * (size_t)(m * rank)), *B = malloc(sizeof(float) * (size_t)(n * rank));
	float *active = malloc(sizeof(float) * (size_t)m);
	float **lists = calloc((size_t)nb, sizeof *lists);
	struct ranked *all = malloc(sizeof *all * (size_t)n);
	uint8_t *seen = calloc((size_t)n, 1);
	int32_t *key = malloc(sizeof *key * (size_t)n);
	int64_t *count = malloc(sizeof *count * (size_t)(2 * KEY_MAX + 1));
	CHECK(A && B && active && lists && all && seen && key && count && rank <= 32);
	for (int64_t e = 0; e < m * rank; e++)
		A[e] = eighth(rng, levels);
	for (int64_t e = 0; e < n * rank; e++)
		B[e] = eighth(rng, levels);
	for (int64_t d = 0; d < rank; d++) {
		A[d] = 0.0f;
		if (m > 1)
			A[rank + d] = NAN;
		if (n > 2)
			B[2 * rank + d] = NAN;
	}
	for (int64_t r = 0; r < m; r++)
		active[r] = all_active || r < 2 || testing_below(rng, 5) != 0 ? 1.0f : 0.0f;
	starfa_dense *dA = NULL, *dB = NULL, *dact = NULL;
	starfa_dense **dL = calloc((size_t)nb, sizeof *dL);
	CHECK(dL);
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, A, rank, &dA));
	CHECK_OK(starfa_dense_create(t, STARFA_COLS, B, rank, &dB));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, active, 1, &dact));
	for (int64_t j = 0; j < nb; j++) {
		lists[j] = malloc(sizeof(float) * (size_t)(m * 2 * k));
		CHECK(lists[j]);
		testing_poison(lists[j], (size_t)(m * 2 * k));
		CHECK_OK(starfa_dense_create(t, STARFA_ROWS, lists[j], 2 * k, &dL[j]));
	}
	CHECK_OK(starfa_insert_top_k(t, dA, dB, k, all_active ? NULL : dact, dL));
	for (int64_t j = 0; j < nb; j++)
		CHECK_OK(starfa_dense_sync(dL[j]));

	for (int64_t r = 0; r < m; r++) {
		for (int64_t p = S->rowptr[r]; p < S->rowptr[r + 1]; p++)
			seen[S->colind[p]] = 1;
		for (int64_t j = 0; j < nb; j++) {
			/* The scores are multiples of 1/64 of at most 4 rank in size: counted by value, the k best
			 * are those above the value where the count from the top reaches k, and the first ones at
			 * it; only they are sorted. */
			memset(count, 0, sizeof(int64_t) * (size_t)(2 * KEY_MAX + 1));
			for (int64_t c = col0[j]; active[r] != 0.0f && c < col0[j + 1]; c++) {
				double dot = 0;
				for (int64_t d = 0; d < rank; d++)
					dot += (double)A[r * rank + d] * B[c * rank + d];
				key[c] = seen[c] || isnan(dot) ? INT32_MIN : (int32_t)(dot * 64);
				if (key[c] != INT32_MIN)
					count[key[c] + KEY_MAX]++;
			}
			int64_t above = 0, thr = -KEY_MAX;
			for (int64_t v = KEY_MAX; v >= -KEY_MAX && above < k; v--) {
				thr = v;
				above += count[v + KEY_MAX];
			}
			int64_t nall = 0, at_thr = 0;
			for (int64_t c = col0[j]; active[r] != 0.0f && c < col0[j + 1]; c++)
				if (key[c] != INT32_MIN && (key[c] > thr || (key[c] == thr && at_thr++ < k)))
					all[nall++] = (struct ranked){(float)key[c] / 64.0f, (int32_t)(c - col0[j])};
			qsort(all, (size_t)nall, sizeof *all, by_rank);
			const float *row = lists[j] + r * 2 * k;
			for (int64_t i = 0; i < k; i++) {
				const int32_t want = i < nall ? all[i].item : -1, got = starfa_top_k_item_at(row, i);
				CHECK_MSG(got == want && (i < nall ? row[2 * i] == all[i].score : isnan(row[2 * i])),
					  "m %lld n %lld rank %lld k %lld tiles %lldx%lld: row %lld band %lld place %lld holds "
					  "(%g, %d), the sort has (%g, %d)",
					  (long long)m, (long long)n, (long long)rank, (long long)k, (long long)row_tiles,
					  (long long)col_tiles, (long long)r, (long long)j, (long long)i, row[2 * i], got,
					  i < nall ? all[i].score : NAN, want);
			}
		}
		for (int64_t p = S->rowptr[r]; p < S->rowptr[r + 1]; p++)
			seen[S->colind[p]] = 0;
	}
	for (int64_t j = 0; j < nb; j++) {
		starfa_dense_free(dL[j]);
		free(lists[j]);
	}
	starfa_dense_free(dA);
	starfa_dense_free(dB);
	starfa_dense_free(dact);
	starfa_tiled_free(t);
	starfa_csr_free(S);
	free(dL);
	free(lists);
	free(A);
	free(B);
	free(active);
	free(all);
	free(seen);
	free(key);
	free(count);
	return 0;
}

static int top_k_lists(starfa_worker_kind kind, uint64_t seed)
{
	CHECK_OK(testing_runtime_only(kind));
	uint64_t rng = seed;
	const int cases = testing_quick() ? 3 : 8;
	const size_t limit = CHUNK_LIMIT(16 << 10); /* CUDA: chunks of 10 to 400 rows */
	for (int c = 0; c < cases; c++) {
		const int64_t m = 20 + (int64_t)testing_below(&rng, 300), n = 10 + (int64_t)testing_below(&rng, 400);
		static const int64_t ks[] = {1, 3, 10, 37, 200, 256}; /* 256: the CUDA kernel's bound by its threads */
		const int64_t k = c == cases - 1 ? n + 5 : ks[testing_below(&rng, 6)];
		const int levels = c % 2 ? 1 + (int)testing_below(&rng, 3) : 16; /* few levels: many ties */
		if (one_case(m, n, m * n / 10, 1 + (int64_t)testing_below(&rng, 32), k, 1 + (int64_t)testing_below(&rng, 3),
			     1 + (int64_t)testing_below(&rng, 4), levels, c % 3 == 2, &rng)) {
			CHUNK_LIMIT(limit);
			return 1;
		}
	}
	/* Rows long enough that the CUDA kernel's bound comes from a sample of them (every 8th tile of 1,024 at
	 * k = 5 here, every 16th at k = 10 below), with few score levels too (ties at the bound: more keys than
	 * shared memory holds pass it, the radix digits then). */
	for (int levels = 16; levels >= 1; levels -= 15)
		if (one_case(30, 20000, 60000, 8, 5, 2, 1, levels, 0, &rng) ||
		    (!testing_quick() && one_case(40, 70000, 100000, 16, 10, 1, 1, levels, 1, &rng))) {
			CHUNK_LIMIT(limit);
			return 1;
		}
	/* Columns enough that the CUDA kernel scores the rows in chunks of 64 (256 MB), and at k = 256 lets more
	 * keys than shared memory holds through its bound (the radix digits then), row 0's ties (every score 0)
	 * past the last digit; every row ranked. */
	CHUNK_LIMIT(256 << 20);
	const int rc = testing_quick() ? 0 : one_case(150, (int64_t)1 << 20, 10000, 4, 256, 1, 1, 16, 1, &rng);
	CHUNK_LIMIT(limit);
	return rc;
}

TEST(topk, lists_match_a_full_sort_cpu)
{
	return top_k_lists(STARFA_WORKER_CPU, testing_seed() + 90);
}

/* starfa_lists_metrics, which merges each user's k best of several column bands (the top_k tasks' lists,
 * made here by the CPU kernel on each band without StarPU), gives the metrics that ranking every item
 * gives, to the bit: exact scores (multiples of 1/8), so that either side's order of summation agrees. */
TEST(topk, merged_lists_give_the_same_metrics)
{
	enum { U = 300, I = 200, R = 8, N = 900, K = 10, BANDS = 3 };
	const int64_t col0[BANDS + 1] = {0, 70, 141, I};
	uint64_t rng = testing_seed() + 92;
	starfa_csr *seen = testing_random_csr(U, I, 3000, 0.5, &rng);
	float *uf = malloc(sizeof(float) * U * R), *itf = malloc(sizeof(float) * I * R);
	float *lists[BANDS];
	uint32_t *rowptr = malloc(sizeof(uint32_t) * (U + 1)), *colind = malloc(sizeof(uint32_t) * 3000);
	CHECK(seen && uf && itf && rowptr && colind && seen->nnz <= 3000);
	for (int64_t e = 0; e < U * R; e++)
		uf[e] = eighth(&rng, 16);
	for (int64_t e = 0; e < I * R; e++)
		itf[e] = eighth(&rng, 16 - 15 * (e / R % 7 == 0)); /* every 7th item's scores few-valued: ties */
	for (int b = 0; b < BANDS; b++) {
		/* the band's columns of the training entries, numbered from its first */
		rowptr[0] = 0;
		for (int64_t u = 0; u < U; u++) {
			rowptr[u + 1] = rowptr[u];
			for (int64_t p = seen->rowptr[u]; p < seen->rowptr[u + 1]; p++)
				if (seen->colind[p] >= col0[b] && seen->colind[p] < col0[b + 1])
					colind[rowptr[u + 1]++] = (uint32_t)(seen->colind[p] - col0[b]);
		}
		lists[b] = malloc(sizeof(float) * U * 2 * K);
		CHECK(lists[b]);
		testing_poison(lists[b], U * 2 * K);
		CHECK(starfa_cpu_top_k_rows(U, col0[b + 1] - col0[b], R, uf, R, itf + col0[b] * R, R, rowptr, colind, NULL, K,
					    lists[b], 2 * K) == 0);
	}
	struct starfa_matched test = {N, malloc(sizeof(int32_t) * N), malloc(sizeof(int32_t) * N), NULL};
	CHECK(test.user && test.item);
	for (int64_t e = 0; e < N; e++) { /* a few unknown users and items: cold */
		test.user[e] = testing_below(&rng, 50) == 0 ? -1 : (int32_t)testing_below(&rng, U);
		test.item[e] = testing_below(&rng, 50) == 0 ? -1 : (int32_t)testing_below(&rng, I);
	}
	/* and one known pair twice at least (random pairs repeat only by chance) */
	test.user[N - 1] = test.user[0] = (int32_t)testing_below(&rng, U);
	test.item[N - 1] = test.item[0] = (int32_t)testing_below(&rng, I);
	const struct starfa_factors f = {.kind = STARFA_MODEL_IMPLICIT, .nusers = U, .nitems = I, .rank = R,
					 .U = uf, .V = itf, .ldu = R, .ldv = R};
	const struct starfa_top_k_lists merged = {BANDS, 2 * K, (const float *const *)lists, col0};
	starfa_metrics want, got;
	CHECK_OK(starfa_factors_metrics(&f, &test, seen, K, &want));
	CHECK_OK(starfa_lists_metrics(&f, &merged, &test, seen, K, &got));
	testing_note("p@%d %.4f map %.4f ndcg %.4f over %lld users, %lld cold", K, want.precision, want.map, want.ndcg,
		     (long long)want.users, (long long)want.cold);
	CHECK_MSG(got.precision == want.precision && got.map == want.map && got.ndcg == want.ndcg &&
			  got.users == want.users && got.cold == want.cold && want.users > 100,
		  "merged: p %.9f map %.9f ndcg %.9f users %lld; scored: %.9f %.9f %.9f %lld", got.precision, got.map,
		  got.ndcg, (long long)got.users, want.precision, want.map, want.ndcg, (long long)want.users);
	/* The cold count made once for a training run's evaluations: the same metrics. */
	CHECK_OK(starfa_matched_count_cold(&test, seen, I));
	CHECK(test.cold_seen == seen && test.cold == want.cold);
	starfa_metrics again;
	CHECK_OK(starfa_lists_metrics(&f, &merged, &test, seen, K, &again));
	CHECK(again.cold == want.cold && again.precision == want.precision && again.ndcg == want.ndcg);
	/* Likewise the test items grouped by user once (duplicate entries among them count once), for both
	 * paths; grouped for another user count, the metrics group them anew. */
	CHECK_OK(starfa_matched_group_users(&test, U));
	int64_t duplicates = 0;
	for (int64_t u = 0; u < U; u++) { /* each user's items: its distinct known items ascending, then -1 */
		int32_t want_items[N];
		int64_t n = 0;
		for (int64_t e = 0; e < N; e++)
			if (test.user[e] == u && test.item[e] >= 0) {
				int64_t at = n++;
				while (at > 0 && want_items[at - 1] > test.item[e]) /* insertion, ascending */
					want_items[at] = want_items[at - 1], at--;
				want_items[at] = test.item[e];
			}
		CHECK(test.start[u + 1] - test.start[u] == n);
		int64_t d = 0;
		for (int64_t i = 0; i < n; i++)
			if (i == 0 || want_items[i] != want_items[i - 1])
				CHECK_MSG(test.by_user[test.start[u] + d++] == want_items[i], "user %lld's item %lld", (long long)u,
					  (long long)i);
		for (int64_t i = d; i < n; i++)
			CHECK(test.by_user[test.start[u] + i] == -1);
		duplicates += n - d;
	}
	CHECK_MSG(duplicates > 0, "no duplicate test entries to leave out");
	for (int64_t users = U; users >= U - 1; users--) {
		CHECK_OK(starfa_matched_group_users(&test, users));
		CHECK(test.grouped_users == users && test.start && test.by_user);
		for (int path = 0; path < 2; path++) {
			CHECK_OK(path ? starfa_factors_metrics(&f, &test, seen, K, &again)
				      : starfa_lists_metrics(&f, &merged, &test, seen, K, &again));
			CHECK_MSG(again.precision == want.precision && again.map == want.map && again.ndcg == want.ndcg &&
					  again.users == want.users && again.cold == want.cold,
				  "grouped for %lld users, %s: p %.9f map %.9f ndcg %.9f users %lld", (long long)users,
				  path ? "scored" : "merged", again.precision, again.map, again.ndcg, (long long)again.users);
		}
	}
	const struct starfa_top_k_lists narrow = {BANDS, K, (const float *const *)lists, col0};
	CHECK(starfa_lists_metrics(&f, &narrow, &test, seen, K, &got) == STARFA_EINVAL); /* 2k columns needed */
	for (int b = 0; b < BANDS; b++)
		free(lists[b]);
	starfa_matched_free(&test);
	free(rowptr);
	free(colind);
	free(uf);
	free(itf);
	starfa_csr_free(seen);
	return 0;
}

/* Wrong operands: clear errors, nothing inserted. */
TEST(topk, bad_operands)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 91;
	starfa_csr *S = testing_random_csr(30, 20, 100, 0.0, &rng);
	CHECK(S);
	starfa_tiling_options tiling = {2, 2, 0};
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(S, &tiling, &t));
	float A[30 * 4] = {0}, B[20 * 4] = {0}, L[30 * 6], W[30 * 4];
	starfa_dense *dA = NULL, *dB = NULL, *dL = NULL, *dW = NULL;
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, A, 4, &dA));
	CHECK_OK(starfa_dense_create(t, STARFA_COLS, B, 4, &dB));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, L, 6, &dL));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, W, 4, &dW));
	CHECK(starfa_task_top_k(t, 0, 0, dA, dB, 4, NULL, dL, NULL) == STARFA_EINVAL); /* 2k > 6 columns */
	CHECK(strstr(starfa_last_error(), "at least 2k"));
	CHECK(starfa_task_top_k(t, 0, 0, dA, dB, 0, NULL, dL, NULL) == STARFA_EINVAL);
	CHECK(starfa_task_top_k(t, 2, 0, dA, dB, 3, NULL, dL, NULL) == STARFA_EINVAL);
	CHECK(starfa_task_top_k(t, 0, 0, dB, dA, 3, NULL, dL, NULL) == STARFA_EINVAL); /* sides swapped */
	CHECK(starfa_task_top_k(t, 0, 0, dA, dB, 3, dW, dL, NULL) == STARFA_EINVAL);   /* active of 4 columns */
	CHECK(starfa_task_top_k(t, 0, 0, dA, dB, 2, NULL, dA, NULL) == STARFA_EINVAL); /* lists over A */
	CHECK_OK(starfa_wait());
	starfa_dense_free(dA);
	starfa_dense_free(dB);
	starfa_dense_free(dL);
	starfa_dense_free(dW);
	starfa_tiled_free(t);
	starfa_csr_free(S);
	return 0;
}

#ifdef STARFA_USE_CUDA
TEST(topk_cuda, lists_match_a_full_sort_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return top_k_lists(STARFA_WORKER_CUDA, testing_seed() + 90);
}

/* starfa_eval of an implicit model with GPUs in the runtime ranks as top_k tasks on them, and gives the
 * host's metrics to the bit (exact scores); a k past the GPU kernel's stays on the host. */
TEST(topk_cuda, eval_on_gpus_matches_the_host)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	enum { U = 700, I = 3000, R = 16, N = 4000 };
	uint64_t rng = testing_seed() + 93;
	starfa_csr *seen = testing_random_csr(U, I, 20000, 0.5, &rng);
	float *uf = malloc(sizeof(float) * U * R), *itf = malloc(sizeof(float) * I * R);
	starfa_coo *test = starfa_coo_new(U, I, N);
	CHECK(seen && uf && itf && test);
	for (int64_t e = 0; e < U * R; e++)
		uf[e] = eighth(&rng, 16);
	for (int64_t e = 0; e < I * R; e++)
		itf[e] = eighth(&rng, 16 - 14 * (e / R % 5 == 0)); /* every 5th item few-valued: ties */
	for (int64_t e = 0; e < N; e++) {
		test->row[e] = (int32_t)testing_below(&rng, U);
		test->col[e] = (int32_t)testing_below(&rng, I);
		test->val[e] = 1.0f;
	}
	test->nnz = N;
	starfa_model m = {.kind = STARFA_MODEL_IMPLICIT, .algorithm = "ials", .nusers = U, .nitems = I, .rank = R,
			  .user_factors = uf, .item_factors = itf, .seen = seen};
	static const int64_t ks[] = {10, 1, 1100};
	for (int c = 0; c < 3; c++) {
		starfa_metrics host, gpus;
		testing_runtime_stop();
		CHECK_OK(starfa_eval(&m, test, ks[c], &host));
		CHECK_OK(testing_runtime_only(STARFA_WORKER_CUDA));
		starfa_stats_reset();
		CHECK_OK(starfa_eval(&m, test, ks[c], &gpus));
		starfa_worker_stats st;
		starfa_stats_get(&st);
		const int on_gpus = ks[c] <= STARFA_TOP_K_CUDA_MAX; /* top_k tasks, a row band a GPU; else none */
		CHECK_MSG((st.tasks[STARFA_WORKER_CUDA] >= starfa_worker_count(STARFA_WORKER_CUDA)) == on_gpus &&
				  (st.tasks[STARFA_WORKER_CUDA] == 0) == !on_gpus,
			  "k %lld: %lld tasks on the GPUs", (long long)ks[c], (long long)st.tasks[STARFA_WORKER_CUDA]);
		CHECK_MSG(gpus.precision == host.precision && gpus.map == host.map && gpus.ndcg == host.ndcg &&
				  gpus.users == host.users && gpus.cold == host.cold && host.users > 500,
			  "k %lld: GPUs p %.9f map %.9f ndcg %.9f users %lld; host %.9f %.9f %.9f %lld", (long long)ks[c],
			  gpus.precision, gpus.map, gpus.ndcg, (long long)gpus.users, host.precision, host.map, host.ndcg,
			  (long long)host.users);
	}
	starfa_coo_free(test);
	starfa_csr_free(seen);
	free(uf);
	free(itf);
	return 0;
}
#else
TEST(topk_cuda, not_built)
{
	SKIP("starfa was configured without CUDA");
}
#endif
