/* ALS and implicit ALS end to end through the task graph, on synthetic low-rank data whose best
 * achievable error is known: convergence, cold users and items, failure on non-finite factors. */
#include "als_testing.h"

/* Ratings mu + b_u + c_v + x_u·y_v + noise with rank-3 factors, on about `density` of the pairs; the
 * last user and item get no entries (cold). */
static starfa_coo *low_rank_ratings(int64_t m, int64_t n, double density, double noise, uint64_t *rng)
{
	const int64_t f = 3;
	float *x = als_alloc((size_t)(m * f)), *y = als_alloc((size_t)(n * f)), *bu = als_alloc((size_t)m), *bi = als_alloc((size_t)n);
	starfa_coo *coo = starfa_coo_new(m, n, (int64_t)(density * (double)(m * n)) + 16);
	if (!x || !y || !bu || !bi || !coo)
		return NULL;
	testing_fill_random(x, (size_t)(m * f), rng);
	testing_fill_random(y, (size_t)(n * f), rng);
	testing_fill_random(bu, (size_t)m, rng);
	testing_fill_random(bi, (size_t)n, rng);
	int64_t e = 0;
	for (int64_t u = 0; u + 1 < m; u++)
		for (int64_t i = 0; i + 1 < n; i++) {
			if (testing_uniform(rng) >= density || e >= (int64_t)(density * (double)(m * n)) + 16)
				continue;
			double r = 3.0 + 0.5 * bu[u] + 0.5 * bi[i] + noise * (2 * testing_uniform(rng) - 1);
			for (int64_t d = 0; d < f; d++)
				r += x[u * f + d] * y[i * f + d];
			coo->row[e] = (int32_t)u;
			coo->col[e] = (int32_t)i;
			coo->val[e] = (float)r;
			e++;
		}
	coo->nnz = e;
	free(x);
	free(y);
	free(bu);
	free(bi);
	return coo;
}

#define MAX_ITERS 64

struct history {
	int64_t iterations;
	double train_rmse[MAX_ITERS + 1], loss[MAX_ITERS + 1], test_rmse[MAX_ITERS + 1], precision[MAX_ITERS + 1];
	int64_t stop_at;
};

static int record(const starfa_als_progress *p, void *user_data)
{
	struct history *h = user_data;
	if (p->iteration <= MAX_ITERS) {
		h->train_rmse[p->iteration] = p->train_rmse;
		h->loss[p->iteration] = p->train_loss;
		h->test_rmse[p->iteration] = p->has_test ? p->test.rmse : NAN;
		h->precision[p->iteration] = p->has_test ? p->test.precision : NAN;
	}
	h->iterations = p->iteration;
	return h->stop_at > 0 && p->iteration >= h->stop_at;
}

/* Each iteration's loss at most a hair above the one before (ALS decreases the objective exactly; the
 * float32 sums and approximate solves may add noise). */
static int check_descent(const double *loss, int64_t iters, double slack, const char *what)
{
	for (int64_t i = 2; i <= iters; i++)
		CHECK_MSG(loss[i] <= loss[i - 1] * (1 + slack) + 1e-7, "%s: loss rose from %.6g to %.6g at iteration %lld",
			  what, loss[i - 1], loss[i], (long long)i);
	return 0;
}

TEST(als, explicit_reaches_the_noise_floor)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 50;
	starfa_coo *all = low_rank_ratings(160, 120, 0.3, 0.1, &rng), *train = NULL, *test = NULL;
	CHECK(all);
	CHECK_OK(starfa_coo_split(all, 0.2, testing_seed(), &train, &test));
	static const struct {
		starfa_solver solver;
		int fp16;
		int64_t row_tiles, col_tiles;
		double want_test;
	} variants[] = {
		{STARFA_SOLVER_CHOLESKY, 0, 1, 1, 0.12},
		{STARFA_SOLVER_CHOLESKY, 0, 3, 2, 0.12},
		{STARFA_SOLVER_CG, 0, 2, 3, 0.15},
		{STARFA_SOLVER_CG, 1, 4, 4, 0.15},
	};
	for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
		starfa_als_options o;
		starfa_als_options_default(&o, STARFA_ALGO_ALS);
		o.rank = 3;
		o.lambda = 0.02;
		o.iters = 15;
		o.solver = variants[v].solver;
		o.fp16 = variants[v].fp16;
		o.tiling.row_tiles = variants[v].row_tiles;
		o.tiling.col_tiles = variants[v].col_tiles;
		o.slots = 1 + (int64_t)v % 2;
		o.stored_systems = v == 1; /* FP32 systems in memory; the others fused (rowsolve) or FP16 */
		o.seed = testing_seed();
		struct history h = {0};
		starfa_model *m = NULL;
		CHECK_OK(starfa_als_train(train, test, &o, record, &h, &m));
		char what[64];
		snprintf(what, sizeof what, "variant %zu", v);
		CHECK(h.iterations == 15);
		if (check_descent(h.loss, h.iterations, v < 2 ? 1e-4 : 2e-2, what))
			return 1;
		testing_note("%s: train rmse %.4f -> %.4f, test rmse %.4f", what, h.train_rmse[1], h.train_rmse[15],
			     h.test_rmse[15]);
		/* noise uniform in [-0.1, 0.1): standard deviation 0.058 */
		CHECK_MSG(h.train_rmse[15] < 0.1 && h.test_rmse[15] < variants[v].want_test, "%s: train %.4f test %.4f",
			  what, h.train_rmse[15], h.test_rmse[15]);
		/* The cold user and item: finite, the mean plus the bias there is. */
		CHECK(m->user_bias && m->item_bias);
		int64_t cu = m->nusers - 1, ci = m->nitems - 1;
		CHECK(m->user_bias[cu] == 0.0f && m->item_bias[ci] == 0.0f);
		for (int64_t d = 0; d < m->rank; d++)
			CHECK(m->user_factors[cu * m->rank + d] == 0.0f && m->item_factors[ci * m->rank + d] == 0.0f);
		CHECK(fabsf(starfa_model_predict(m, cu, 5) - (float)(m->global_mean + m->item_bias[5])) < 1e-5f);
		CHECK(fabsf(starfa_model_predict(m, -1, -1) - (float)m->global_mean) < 1e-6f);
		CHECK(isfinite(starfa_model_predict(m, cu, ci)));
		starfa_metrics r;
		CHECK_OK(starfa_eval(m, test, 10, &r));
		CHECK(fabs(r.rmse - h.test_rmse[15]) < 1e-4 && r.entries == test->nnz && isnan(r.precision));
		starfa_model_free(m);
	}
	starfa_coo_free(all);
	starfa_coo_free(train);
	starfa_coo_free(test);
	return 0;
}

TEST(als, implicit_learns_the_ranking)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 51;
	/* Interactions where the low-rank score is high: a structure the factors can find. */
	starfa_coo *scores = low_rank_ratings(200, 150, 1.0, 0.0, &rng), *all = starfa_coo_new(200, 150, 200 * 150);
	CHECK(scores && all);
	for (int64_t e = 0; e < scores->nnz; e++)
		if (scores->val[e] > 3.9f) {
			all->row[all->nnz] = scores->row[e];
			all->col[all->nnz] = scores->col[e];
			all->val[all->nnz] = 1.0f + (float)testing_below(&rng, 3);
			all->nnz++;
		}
	starfa_coo *train = NULL, *test = NULL;
	CHECK_OK(starfa_coo_split(all, 0.2, testing_seed(), &train, &test));
	starfa_als_options o;
	starfa_als_options_default(&o, STARFA_ALGO_IALS);
	o.rank = 8;
	o.iters = 10;
	o.alpha = 10;
	o.lambda = 0.1;
	o.eval_k = 10;
	o.tiling.row_tiles = 2;
	o.tiling.col_tiles = 3;
	o.seed = testing_seed();
	for (int fp16 = 0; fp16 < 2; fp16++) {
		o.fp16 = fp16;
		struct history h = {0};
		starfa_model *m = NULL, *untrained = NULL;
		CHECK_OK(starfa_als_train(train, test, &o, record, &h, &m));
		CHECK(h.iterations == 10 && m->user_bias == NULL && m->global_mean == 0.0);
		if (check_descent(h.loss, h.iterations, 2e-2, fp16 ? "implicit fp16" : "implicit"))
			return 1;
		/* Against the random starting factors (no iteration) on the same test set. */
		starfa_als_options none = o;
		none.iters = 0;
		CHECK_OK(starfa_als_train(train, NULL, &none, NULL, NULL, &untrained));
		starfa_metrics trained_m, random_m;
		CHECK_OK(starfa_eval(m, test, 10, &trained_m));
		CHECK_OK(starfa_eval(untrained, test, 10, &random_m));
		testing_note("implicit fp16=%d: loss %.5f -> %.5f, p@10 %.3f (random factors %.3f), map %.3f ndcg %.3f", fp16,
			     h.loss[1], h.loss[10], trained_m.precision, random_m.precision, trained_m.map, trained_m.ndcg);
		CHECK(fabs(trained_m.precision - h.precision[10]) < 1e-9);
		CHECK(trained_m.precision > 2 * random_m.precision && trained_m.precision > 0.3);
		CHECK(trained_m.ndcg > 0 && trained_m.ndcg <= 1 && trained_m.map > 0 && trained_m.map <= 1);
		starfa_model_free(m);
		starfa_model_free(untrained);
	}
	starfa_coo_free(scores);
	starfa_coo_free(all);
	starfa_coo_free(train);
	starfa_coo_free(test);
	return 0;
}

/* Ratings so large that the factors overflow: training stops with an error that names the iteration,
 * the sweep and the codelet, and no model. */
TEST(als, non_finite_factors_stop_training)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 52;
	starfa_coo *train = low_rank_ratings(40, 30, 0.5, 0.1, &rng);
	CHECK(train);
	for (int64_t e = 0; e < train->nnz; e += 3)
		train->val[e] = 3e38f;
	starfa_als_options o;
	starfa_als_options_default(&o, STARFA_ALGO_ALS);
	/* Rank 4: every row has more entries than k, so Cholesky solves the k x k form, whose b_u overflows.
	 * (At the default rank these rows are shorter than k; their n x n form x = P^T (P P^T + lambda I)^-1 t
	 * never sums b_u and can keep finite factors from these ratings.) */
	o.rank = 4;
	for (int solver = 0; solver < 2; solver++) {
		o.solver = solver ? STARFA_SOLVER_CG : STARFA_SOLVER_CHOLESKY;
		starfa_model *m = NULL;
		int rc = starfa_als_train(train, NULL, &o, NULL, NULL, &m);
		testing_note("%s", starfa_last_error());
		CHECK(rc == STARFA_ERUNTIME && m == NULL);
		CHECK(strstr(starfa_last_error(), "iteration ") && strstr(starfa_last_error(), " sweep: codelet "));
	}
	/* NaN in the input is refused before any task runs. */
	train->val[1] = NAN;
	starfa_model *m = NULL;
	CHECK(starfa_als_train(train, NULL, &o, NULL, NULL, &m) == STARFA_EINVAL && m == NULL);
	CHECK(strstr(starfa_last_error(), "not finite") != NULL);
	starfa_coo_free(train);
	return 0;
}

TEST(als, options_and_early_stop)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 53;
	starfa_coo *train = low_rank_ratings(30, 20, 0.5, 0.1, &rng);
	CHECK(train);
	starfa_als_options o;
	starfa_als_options_default(&o, STARFA_ALGO_ALS);
	starfa_model *m = NULL;
	struct history h = {.stop_at = 2};
	CHECK_OK(starfa_als_train(train, NULL, &o, record, &h, &m));
	CHECK(h.iterations == 2 && m != NULL);
	starfa_model_free(m);
	m = NULL;
	starfa_als_options bad = o;
	bad.rank = 0;
	CHECK(starfa_als_train(train, NULL, &bad, NULL, NULL, &m) == STARFA_EINVAL && m == NULL);
	bad = o;
	bad.lambda = 0;
	CHECK(starfa_als_train(train, NULL, &bad, NULL, NULL, &m) == STARFA_EINVAL);
	bad = o;
	bad.solver = STARFA_SOLVER_CG;
	bad.cg_steps = 0;
	CHECK(starfa_als_train(train, NULL, &bad, NULL, NULL, &m) == STARFA_EINVAL);
	starfa_als_options_default(&bad, STARFA_ALGO_IALS);
	train->val[0] = -1;
	CHECK(starfa_als_train(train, NULL, &bad, NULL, NULL, &m) == STARFA_EINVAL);
	CHECK(strstr(starfa_last_error(), "negative") != NULL);
	starfa_coo_free(train);
	return 0;
}
