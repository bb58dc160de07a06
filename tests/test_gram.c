/* gram: the Gram matrix of dense blocks, the CPU kernel and the task graph against a sequential double
 * reference on fresh random inputs with NaN-poisoned outputs. */
#include "als_testing.h"

#include "cpu/gram.h"

static int check_gram(const float *theta, int64_t rows, int64_t ld, int64_t k, const float *G, const float *prior,
		      const char *what)
{
	for (int64_t a = 0; a < k; a++)
		for (int64_t c = 0; c < k; c++) {
			double sum = prior ? prior[a * k + c] : 0.0, mag = prior ? fabs(prior[a * k + c]) : 0.0;
			for (int64_t r = 0; r < rows; r++) {
				sum += (double)theta[r * ld + a] * theta[r * ld + c];
				mag += fabs((double)theta[r * ld + a] * theta[r * ld + c]);
			}
			double tol = 2 * (double)(rows + 4) * FLT_EPSILON * mag;
			CHECK_MSG(fabs(G[a * k + c] - sum) <= tol, "%s: G[%lld][%lld] = %.9g, reference %.9g", what, (long long)a,
				  (long long)c, G[a * k + c], sum);
		}
	return 0;
}

TEST(gram, cpu_kernel_matches_reference)
{
	uint64_t rng = testing_seed() + 40;
	static const int64_t ranks[] = {1, 7, 16, 17, 64, 100};
	for (size_t ki = 0; ki < sizeof ranks / sizeof ranks[0]; ki++) {
		int64_t k = ranks[ki], ld = k + 3, rows = 1 + (int64_t)testing_below(&rng, 700);
		float *theta = als_alloc((size_t)(rows * ld)), *G = als_alloc((size_t)(k * k)), *prior = als_alloc((size_t)(k * k));
		CHECK(theta && G && prior);
		testing_fill_random(theta, (size_t)(rows * ld), &rng);
		for (int threads = 1; threads <= 4; threads++) {
			char what[64];
			snprintf(what, sizeof what, "k=%lld rows=%lld threads=%d", (long long)k, (long long)rows, threads);
			testing_poison(G, (size_t)(k * k));
			CHECK(starfa_cpu_gram(rows, theta + 1, ld, k, 0, G, threads) == 0);
			if (check_gram(theta + 1, rows, ld, k, G, NULL, what))
				return 1;
			/* accumulate onto a symmetric prior */
			for (int64_t a = 0; a < k; a++)
				for (int64_t c = 0; c <= a; c++)
					prior[a * k + c] = prior[c * k + a] = (float)testing_uniform(&rng);
			memcpy(G, prior, sizeof(float) * (size_t)(k * k));
			CHECK(starfa_cpu_gram(rows, theta + 1, ld, k, 1, G, threads) == 0);
			if (check_gram(theta + 1, rows, ld, k, G, prior, what))
				return 1;
		}
		/* no rows: zero (overwrite) */
		testing_poison(G, (size_t)(k * k));
		CHECK(starfa_cpu_gram(0, theta, ld, k, 0, G, 2) == 0);
		for (int64_t i = 0; i < k * k; i++)
			CHECK(G[i] == 0.0f);
		free(theta);
		free(G);
		free(prior);
	}
	return 0;
}

TEST(gram, task_graph_matches_reference)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 41;
	starfa_csr *S = testing_random_csr(300, 200, 3000, 0.5, &rng);
	CHECK(S);
	int64_t k = 13, w = 16;
	float *Y = als_alloc((size_t)(S->ncols * w)), *G = als_alloc((size_t)(k * k));
	CHECK(Y && G);
	testing_fill_random(Y, (size_t)(S->ncols * w), &rng);
	starfa_tiling_options opts = {2, 5, 0};
	starfa_tiled *t = NULL;
	starfa_dense *dy = NULL;
	starfa_gram *g = NULL;
	CHECK_OK(starfa_tiled_create(S, &opts, &t));
	CHECK_OK(starfa_dense_create(t, STARFA_COLS, Y, w, &dy));
	CHECK_OK(starfa_gram_create(k, &g));
	CHECK_OK(starfa_insert_gram(dy, 2, k, g));
	testing_poison(G, (size_t)(k * k));
	CHECK_OK(starfa_gram_read(g, G));
	if (check_gram(Y + 2, S->ncols, w, k, G, NULL, "task graph"))
		return 1;
	CHECK(starfa_insert_gram(dy, 4, k, g) == STARFA_EINVAL);
	starfa_gram_free(g);
	starfa_dense_free(dy);
	starfa_tiled_free(t);
	starfa_csr_free(S);
	free(Y);
	free(G);
	return 0;
}
