/* ALS and implicit ALS end to end through the task graph, on synthetic low-rank data whose best
 * achievable error is known: convergence, cold users and items, failure on non-finite factors. */
#include "als_testing.h"

#include <lapacke.h>

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
	double map[MAX_ITERS + 1], ndcg[MAX_ITERS + 1];
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
		h->map[p->iteration] = p->has_test ? p->test.map : NAN;
		h->ndcg[p->iteration] = p->has_test ? p->test.ndcg : NAN;
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

/* The loss an iteration reports (in the graph: the squared error a band, the regularization a factor
 * block) is the ALS objective of the factors it leaves, as written out on the host from the model: with
 * ALS-WR's weights and without, on a grid of several blocks a side. */
TEST(als, loss_is_the_objective_of_its_factors)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 57;
	starfa_coo *all = low_rank_ratings(90, 70, 0.3, 0.1, &rng);
	CHECK(all);
	for (int weighted = 0; weighted < 2; weighted++) {
		starfa_als_options o;
		starfa_als_options_default(&o, STARFA_ALGO_ALS);
		o.rank = 3;
		o.lambda = 0.05;
		o.iters = 3;
		o.weighted_lambda = weighted;
		o.tiling.row_tiles = 3;
		o.tiling.col_tiles = 2;
		o.seed = testing_seed();
		struct history h = {0};
		starfa_model *m = NULL;
		CHECK_OK(starfa_als_train(all, NULL, &o, record, &h, &m));
		CHECK(h.iterations == 3 && m);
		const double ref = testing_explicit_objective(m, all, o.lambda, o.lambda, weighted ? 0 : 1, weighted ? 1 : 0) /
				   (double)all->nnz;
		CHECK_MSG(isfinite(ref) && fabs(h.loss[3] - ref) <= 1e-5 * ref,
			  "weighted lambda %d: the loss reported %.8g, the objective of the factors %.8g", weighted, h.loss[3],
			  ref);
		starfa_model_free(m);
	}
	starfa_coo_free(all);
	return 0;
}

/* The test RMSE an iteration reports (the known entries in the graph, on the training grid; a new user's
 * and a new item's on the host) is the model's own evaluation, with and without the entries nobody knows. */
TEST(als, test_rmse_is_the_models_evaluation)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 58;
	starfa_coo *all = low_rank_ratings(90, 70, 0.3, 0.1, &rng), *train = NULL, *test = NULL;
	CHECK(all);
	CHECK_OK(starfa_coo_split(all, 0.2, testing_seed(), &train, &test));
	starfa_coo *unknown = testing_with_unknown_ids(test);
	CHECK(unknown);
	for (int with_unknown = 0; with_unknown < 2; with_unknown++) {
		const starfa_coo *t = with_unknown ? unknown : test;
		starfa_als_options o;
		starfa_als_options_default(&o, STARFA_ALGO_ALS);
		o.rank = 3;
		o.iters = 3;
		o.tiling.row_tiles = 3;
		o.tiling.col_tiles = 2;
		o.seed = testing_seed();
		struct history h = {0};
		starfa_model *m = NULL;
		CHECK_OK(starfa_als_train(train, t, &o, record, &h, &m));
		starfa_metrics want;
		CHECK_OK(starfa_eval(m, t, 10, &want));
		CHECK_MSG(h.iterations == 3 && fabs(h.test_rmse[3] - want.rmse) <= 1e-5 * want.rmse,
			  "unknown ids %d: the test RMSE reported %.8g, the model's evaluation %.8g", with_unknown,
			  h.test_rmse[3], want.rmse);
		starfa_model_free(m);
	}
	starfa_coo_free(unknown);
	starfa_coo_free(all);
	starfa_coo_free(train);
	starfa_coo_free(test);
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

/* eval_every: the test metrics after the first, every Nth and the last iteration only, the same values
 * there as a run that computes them every time, and the training unchanged (explicit and implicit). */
TEST(als, eval_every_skips_the_test_metrics)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 57;
	starfa_coo *all = low_rank_ratings(150, 120, 0.3, 0.1, &rng), *train = NULL, *test = NULL;
	CHECK(all);
	CHECK_OK(starfa_coo_split(all, 0.2, testing_seed(), &train, &test));
	for (int algo = 0; algo < 2; algo++) {
		if (algo) /* implicit ALS takes values >= 0; the noise can make a rating negative */
			for (int side = 0; side < 2; side++) {
				starfa_coo *c = side ? test : train;
				for (int64_t e = 0; e < c->nnz; e++)
					c->val[e] = c->val[e] > 0 ? c->val[e] : 0.0f;
			}
		starfa_als_options o;
		starfa_als_options_default(&o, algo ? STARFA_ALGO_IALS : STARFA_ALGO_ALS);
		o.rank = 6;
		o.iters = 10;
		o.seed = testing_seed();
		struct history every = {0}, some = {0};
		starfa_model *m1 = NULL, *m2 = NULL;
		CHECK_OK(starfa_als_train(train, test, &o, record, &every, &m1));
		o.eval_every = 4;
		CHECK_OK(starfa_als_train(train, test, &o, record, &some, &m2));
		/* On the cores alone the two trainings are the same bits. With GPUs the scheduler may place a task on
		 * another kind of worker in each, whose sums round differently; one near tie at the 10th place then
		 * moves p@10 by one item over the sum of min(10, test items). */
		const int gpus = starfa_worker_count(STARFA_WORKER_CUDA) > 0;
		const double loss_slack = gpus ? 1e-5 : 0.0, metric_slack = gpus ? (algo ? 5e-3 : 1e-4) : 0.0;
		for (int64_t it = 1; it <= 10; it++) {
			const int due = it == 1 || it % 4 == 0 || it == 10;
			const double a = algo ? every.precision[it] : every.test_rmse[it];
			const double b = algo ? some.precision[it] : some.test_rmse[it];
			CHECK_MSG(fabs(some.loss[it] - every.loss[it]) <= loss_slack * fabs(every.loss[it]) &&
					  (due ? fabs(b - a) <= metric_slack : isnan(b)) && !isnan(a),
				  "%s iteration %lld: loss %.9g against %.9g, test metric %.9g against %.9g", algo ? "ials" : "als",
				  (long long)it, some.loss[it], every.loss[it], b, a);
		}
		starfa_model_free(m1);
		starfa_model_free(m2);
		o.eval_every = 0;
		CHECK(starfa_als_train(train, test, &o, NULL, NULL, &m1) == STARFA_EINVAL && m1 == NULL);
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
		/* With GPUs training ranks in the task graph (top_k tasks on a 2 x 3 grid, cuBLAS scores, the lists
		 * merged) and eval on the host (OpenBLAS scores): a near tie at the 10th place may go either way, and
		 * one item moves p@10 by one over the sum of min(10, test items), a few thousandths here. On the
		 * cores alone both are the host's loop, bit for bit. */
		const double slack = starfa_worker_count(STARFA_WORKER_CUDA) > 0 ? 5e-3 : 1e-9;
		CHECK_MSG(fabs(trained_m.precision - h.precision[10]) < slack && fabs(trained_m.map - h.map[10]) < slack &&
			  fabs(trained_m.ndcg - h.ndcg[10]) < slack,
			  "training's p@10 %.6f map %.6f ndcg %.6f, eval's %.6f %.6f %.6f", h.precision[10], h.map[10],
			  h.ndcg[10], trained_m.precision, trained_m.map, trained_m.ndcg);
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

/* One implicit ALS sweep in double precision, from the definition: row r of `out` (rows x f) solves
 * (OᵀO + sum alpha v o_c o_cᵀ + lambda I) x = sum (1 + alpha v) o_c over the row's entries (v, c), O the
 * other side's factors (nother x f). by_col: the rows are c's columns. */
static int implicit_sweep(const starfa_coo *c, int by_col, const double *O, int64_t nother, int64_t rows, int64_t f,
			  double alpha, double lambda, double *out)
{
	double A[16 * 16], b[16];
	CHECK(f <= 16);
	for (int64_t r = 0; r < rows; r++) {
		for (int64_t i = 0; i < f; i++) {
			b[i] = 0;
			for (int64_t j = 0; j < f; j++) {
				double g = i == j ? lambda : 0;
				for (int64_t o = 0; o < nother; o++)
					g += O[o * f + i] * O[o * f + j];
				A[i * f + j] = g;
			}
		}
		for (int64_t e = 0; e < c->nnz; e++) {
			if ((by_col ? c->col[e] : c->row[e]) != r)
				continue;
			const double *y = O + (int64_t)(by_col ? c->row[e] : c->col[e]) * f, w = alpha * c->val[e];
			for (int64_t i = 0; i < f; i++) {
				b[i] += (1 + w) * y[i];
				for (int64_t j = 0; j < f; j++)
					A[i * f + j] += w * y[i] * y[j];
			}
		}
		CHECK(LAPACKE_dposv(LAPACK_ROW_MAJOR, 'L', (lapack_int)f, 1, A, (lapack_int)f, b, 1) == 0);
		for (int64_t i = 0; i < f; i++)
			out[r * f + i] = b[i];
	}
	return 0;
}

/* Implicit ALS with exact solves against the definition in double precision, from the same starting
 * factors (the model of a run with no iterations), over three iterations on a 2 x 3 tile grid: every
 * user sweep after the first reads the YᵀY that the loss formed after the item sweep before it, so a
 * sum that is stale or missing shows here. */
TEST(als, implicit_matches_the_definition)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 77;
	const int64_t m = 120, n = 90, f = 6, iters = 3;
	starfa_coo *c = starfa_coo_new(m, n, m * n);
	CHECK(c);
	for (int64_t u = 0; u < m; u++)
		for (int64_t i = 0; i < n; i++)
			if (testing_uniform(&rng) < 0.1) {
				c->row[c->nnz] = (int32_t)u;
				c->col[c->nnz] = (int32_t)i;
				c->val[c->nnz] = 1.0f + (float)testing_below(&rng, 4);
				c->nnz++;
			}
	starfa_als_options o;
	starfa_als_options_default(&o, STARFA_ALGO_IALS);
	o.rank = f;
	o.alpha = 5;
	o.lambda = 0.5;
	o.solver = STARFA_SOLVER_CHOLESKY;
	o.tiling.row_tiles = 2;
	o.tiling.col_tiles = 3;
	o.seed = testing_seed();
	o.iters = 0;
	starfa_model *start = NULL, *m3 = NULL;
	CHECK_OK(starfa_als_train(c, NULL, &o, NULL, NULL, &start));
	o.iters = iters;
	CHECK_OK(starfa_als_train(c, NULL, &o, NULL, NULL, &m3));
	CHECK(start->rank == f && m3->rank == f && m3->nusers == m && m3->nitems == n);
	double *X = calloc((size_t)(m * f), sizeof *X), *Y = calloc((size_t)(n * f), sizeof *Y);
	CHECK(X && Y);
	for (int64_t e = 0; e < n * f; e++)
		Y[e] = start->item_factors[e];
	for (int64_t it = 0; it < iters; it++) {
		if (implicit_sweep(c, 0, Y, n, m, f, o.alpha, o.lambda, X) || implicit_sweep(c, 1, X, m, n, f, o.alpha, o.lambda, Y))
			return 1;
	}
	double worst = 0, scale = 0;
	for (int64_t e = 0; e < m * f; e++) {
		worst = fmax(worst, fabs(m3->user_factors[e] - X[e]));
		scale = fmax(scale, fabs(X[e]));
	}
	for (int64_t e = 0; e < n * f; e++) {
		worst = fmax(worst, fabs(m3->item_factors[e] - Y[e]));
		scale = fmax(scale, fabs(Y[e]));
	}
	testing_note("implicit ALS, %lld iterations: largest factor difference %.3g (largest factor %.3g)", (long long)iters,
		     worst, scale);
	CHECK_MSG(scale > 0 && worst <= 1e-4 * scale, "implicit ALS strays from the definition: %.3g of %.3g", worst, scale);
	free(X);
	free(Y);
	starfa_model_free(start);
	starfa_model_free(m3);
	starfa_coo_free(c);
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
