/* CCD++ as a task graph (Yu, Hsieh, Si, Dhillon, "Scalable coordinate descent approaches to parallel
 * matrix factorization for recommender systems", ICDM 2012; libpmf's ccdr1; the GPU form of Nisa et
 * al., GPGPU 2017, cuMF's cumf_ccd). The factors are kept by feature: w_t (one value per user) and h_t
 * (per item), and the residual R = A - mu - sum_t w_t h_t^T on A's entries, on the forward and the
 * transposed tiles at once. For each feature t, in order:
 *   - a pass over the transposed tiles takes the previous feature out of R and puts t back in
 *     (R^ = R + w_t h_t^T), and sums for each item j the numerator sum_i R^_ij w_i and the denominator
 *     sum_i w_i^2 of h_j = num / (lambda |Omega_j| + den); then the update, per column band;
 *   - the same over the forward tiles for w_i, with t put back from the h_t held before its update;
 *   - T - 1 more inner iterations of the two updates over R^ as it stands (`inner`, default 5 as libpmf);
 * (starfa_insert_ccd_feature, graphs/ops.c) and after the last feature a pass over both grids takes it
 * out again (starfa_insert_ccd_close): R is A less the whole model. Every pass and update is a task on a
 * band (a band's passes and its update one starfa_task_ccd_band task, on whichever kind runs the band;
 * with one band a side, the whole feature one starfa_task_ccd_feature task): nothing passes through the
 * host per feature. With one band a side the features' tasks also sum the regularization into one slot
 * (starfa_ccd_feature's reg), so that the objective needs no feature brought home; with bands it is
 * summed on the host from the synced features.
 * The global mean and the biases are features with a fixed side: the user bias is a w whose h is all
 * ones, the item bias an h whose w is all ones, so the model is the explicit model ALS fits. With
 * nonneg the factor features (not the biases) stay >= 0 (libpmf's do_nmf). The objective
 * sum R^2 + lambda (sum_i |Omega_i| |w_i|^2 + sum_j |Omega_j| |h_j|^2) never increases: each update is
 * the exact minimizer along its coordinate. */
#include "model/model.h"
#include "storage/idmap.h"
#include "train/algorithms.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct ccd_options {
	int64_t rank, iters, inner, tiles, seed, eval_k, eval_every;
	double lambda, tol;
	int nonneg, biases;
};

/* The smallest automatic band, in entries on average: a band task of 65,536 entries is about 80 us of
 * one core's passes; below that StarPU's per-task cost and each sweep's wait outweigh what more bands
 * win (MovieLens, 100,000 entries: 4 bands on 16 cores took 1.5x one core's time, 2 on 2 cores the same
 * as one; bench/CCD.md). */
#define MIN_BAND_NNZ 65536

struct ccd {
	struct ccd_options o;
	const starfa_coo *coo;
	starfa_csr *csr;
	starfa_tiled *S;
	int64_t k, nf, P; /* rank, features (rank + 2 with biases), bands a side */
	starfa_split split[2];
	float *W, *H;     /* by feature: nf x users, nf x items */
	starfa_dense **w, **h; /* one array of 2 nf: w the first nf, h = w + nf (synced together) */
	float *held, *acc_w, *acc_h, *count_w, *count_h;
	starfa_dense *dheld, *dacc_w, *dacc_h, *dcount_w, *dcount_h;
	starfa_sparse_values *R, *RT; /* the residual on the forward and the transposed tiles */
	starfa_sums *reg; /* with one band a side: the features' regularization, summed where they run */
	float *U, *V;                 /* the model's rows, for metrics and the model */
	double mu, prev_loss; /* prev_loss: NAN before the first evaluation */
	struct starfa_matched test;
	int has_test;
};

static void ccd_defaults(void *params)
{
	struct ccd_options *o = params;
	*o = (struct ccd_options){.rank = 32,
				  .iters = 20,
				  .inner = 5,
				  .tiles = 0,
				  .seed = 1,
				  .eval_k = 10,
				  .eval_every = 1,
				  .lambda = 0.15, /* MovieLens latest-small, 80/20: test RMSE 0.876 (0.1: 0.879, 0.2: 0.883) */
				  .tol = 1e-4,
				  .nonneg = 0,
				  .biases = 1};
}

static int ccd_check(const void *params)
{
	const struct ccd_options *o = params;
	if (o->rank < 1 || o->rank > 4096)
		return starfa_set_error(STARFA_EINVAL, "rank %lld outside [1, 4096]", (long long)o->rank);
	if (!(o->lambda >= 0) || !isfinite(o->lambda))
		return starfa_set_error(STARFA_EINVAL, "lambda must be a number >= 0");
	if (o->iters < 1 || o->inner < 1 || o->eval_every < 1 || o->tiles < 0 || !(o->tol >= 0))
		return starfa_set_error(STARFA_EINVAL, "iters, inner and eval-every must be >= 1, tiles and tol >= 0");
	return 0;
}

static int64_t ccd_iterations(const void *params)
{
	return ((const struct ccd_options *)params)->iters;
}

/* Features 0 and 1 are the biases (when biases): the user bias updates w only (h is ones), the item
 * bias h only (w is ones). The feature whose w (h) is held at ones, or -1. */
static int64_t fixed_w(const struct ccd *g)
{
	return g->o.biases ? 1 : -1;
}

static int64_t fixed_h(const struct ccd *g)
{
	return g->o.biases ? 0 : -1;
}

static int updates_w(const struct ccd *g, int64_t t)
{
	return t != fixed_w(g);
}

static int updates_h(const struct ccd *g, int64_t t)
{
	return t != fixed_h(g);
}

static int is_factor(const struct ccd *g, int64_t t)
{
	return !g->o.biases || t >= 2;
}

static void ccd_free(void *state)
{
	struct ccd *g = state;
	for (int64_t t = 0; g->w && t < 2 * g->nf; t++)
		starfa_dense_free(g->w[t]);
	free(g->w);
	starfa_dense_free(g->dheld);
	starfa_dense_free(g->dacc_w);
	starfa_dense_free(g->dacc_h);
	starfa_dense_free(g->dcount_w);
	starfa_dense_free(g->dcount_h);
	starfa_sparse_values_free(g->R);
	starfa_sparse_values_free(g->RT);
	starfa_sums_free(g->reg);
	starfa_tiled_free(g->S);
	starfa_csr_free(g->csr);
	free(g->W);
	free(g->H);
	free(g->held);
	free(g->acc_w);
	free(g->acc_h);
	free(g->count_w);
	free(g->count_h);
	free(g->U);
	free(g->V);
	starfa_matched_free(&g->test);
	free(g);
}

static int ccd_setup(const starfa_coo *train, const starfa_coo *test, const void *params, void **state)
{
	struct ccd *g = starfa_calloc(1, sizeof *g);
	if (!g)
		return STARFA_ENOMEM;
	*state = g;
	g->o = *(const struct ccd_options *)params;
	g->coo = train;
	g->k = g->o.rank;
	g->nf = g->k + (g->o.biases ? 2 : 0);
	g->prev_loss = NAN;
	int rc = starfa_csr_from_coo(train, &g->csr);
	if (rc)
		return rc;
	const starfa_csr *c = g->csr;
	const int64_t m = c->nrows, n = c->ncols;
	double sum = 0;
	for (int64_t e = 0; e < c->nnz; e++) {
		if (!isfinite(c->val[e]))
			return starfa_set_error(STARFA_EINVAL, "training value %lld is not finite", (long long)e);
		sum += c->val[e];
	}
	g->mu = sum / (double)c->nnz;
	/* P bands a side: one a worker (the bands of a side update at once; a band's tiles add up in turn),
	 * no band under MIN_BAND_NNZ entries on average. */
	int64_t P = g->o.tiles;
	/* With GPUs the measured speeds decide (starfa_plan_tiling): one band a GPU, and one a core when the
	 * cores' share of a feature's passes pays. */
	starfa_tiling_options tiling = {P, P, 1, 0, 0};
	/* the sweeps' costs as ccd_band's: the entries, and the rows updated */
	if (P == 0 && (rc = starfa_plan_tiling("ccd_band", (double)(c->nnz + m), (double)(c->nnz + n), 1, &tiling,
						g->split)))
		return rc;
	if (tiling.placed && (tiling.row_tiles > m || tiling.row_tiles > n))
		tiling.placed = 0; /* a tiny matrix: no bands to place */
	if (tiling.placed)
		P = tiling.row_tiles;
	if (P == 0) {
		int workers = starfa_worker_count(STARFA_WORKER_CPU) + starfa_worker_count(STARFA_WORKER_CUDA);
		P = workers > 0 ? workers : 1;
		while (P > 1 && c->nnz / P < MIN_BAND_NNZ)
			P--;
	}
	if (P > m || P > n)
		return starfa_set_error(STARFA_EINVAL, "%lld tiles a side need at least %lld rows and columns; the "
						       "matrix has %lld x %lld", (long long)P, (long long)P, (long long)m,
					(long long)n);
	g->P = tiling.row_tiles = tiling.col_tiles = P;
	if ((rc = starfa_tiled_create(c, &tiling, &g->S)))
		return rc;
	g->W = starfa_malloc((size_t)(g->nf * m), sizeof *g->W);
	g->H = starfa_malloc((size_t)(g->nf * n), sizeof *g->H);
	g->held = starfa_malloc((size_t)n, sizeof *g->held);
	g->acc_w = starfa_malloc((size_t)(2 * m), sizeof *g->acc_w);
	g->acc_h = starfa_malloc((size_t)(2 * n), sizeof *g->acc_h);
	g->count_w = starfa_malloc((size_t)m, sizeof *g->count_w);
	g->count_h = starfa_calloc((size_t)n, sizeof *g->count_h);
	g->U = starfa_malloc((size_t)(m * (g->k + 2)), sizeof *g->U);
	g->V = starfa_malloc((size_t)(n * (g->k + 2)), sizeof *g->V);
	g->w = starfa_calloc((size_t)(2 * g->nf), sizeof *g->w);
	g->h = g->w ? g->w + g->nf : NULL;
	if (!g->W || !g->H || !g->held || !g->acc_w || !g->acc_h || !g->count_w || !g->count_h || !g->U || !g->V ||
	    !g->w || !g->h)
		return STARFA_ENOMEM;
	for (int64_t r = 0; r < m; r++)
		g->count_w[r] = (float)(c->rowptr[r + 1] - c->rowptr[r]);
	for (int64_t e = 0; e < c->nnz; e++)
		g->count_h[c->colind[e]] += 1.0f;
	/* libpmf's start: small random w, h = 0 (so R = A - mu); zero biases against constant ones. */
	uint64_t state_rng = (uint64_t)g->o.seed * 0x2545f4914f6cdd1dull + 13;
	for (int64_t t = 0; t < g->nf; t++) {
		float *w = g->W + t * m, *h = g->H + t * n;
		for (int64_t r = 0; r < m; r++)
			w[r] = !updates_w(g, t) ? 1.0f
			       : !is_factor(g, t) ? 0.0f
			       : g->o.nonneg ? 0.1f * (starfa_uniform_pm1(&state_rng) + 1.0f)
					     : 0.1f * starfa_uniform_pm1(&state_rng);
		for (int64_t r = 0; r < n; r++)
			h[r] = updates_h(g, t) ? 0.0f : 1.0f;
	}
	for (int64_t t = 0; t < g->nf && !rc; t++)
		if ((rc = starfa_dense_create(g->S, STARFA_ROWS, g->W + t * m, 1, &g->w[t])) == 0)
			rc = starfa_dense_create(g->S, STARFA_COLS, g->H + t * n, 1, &g->h[t]);
	if (rc || (rc = starfa_dense_create(g->S, STARFA_COLS, g->held, 1, &g->dheld)) ||
	    (rc = starfa_dense_create(g->S, STARFA_ROWS, g->acc_w, 2, &g->dacc_w)) ||
	    (rc = starfa_dense_create(g->S, STARFA_COLS, g->acc_h, 2, &g->dacc_h)) ||
	    (rc = starfa_dense_create(g->S, STARFA_ROWS, g->count_w, 1, &g->dcount_w)) ||
	    (rc = starfa_dense_create(g->S, STARFA_COLS, g->count_h, 1, &g->dcount_h)) ||
	    (rc = starfa_sparse_values_create(g->S, STARFA_ROWS, &g->R)) ||
	    (rc = starfa_sparse_values_create(g->S, STARFA_COLS, &g->RT)) ||
	    (P == 1 && (rc = starfa_sums_create(1, &g->reg))))
		return rc;
	/* R = A - mu on both grids (h = 0 and zero biases contribute nothing). */
	for (int s = 0; s < 2 && !rc; s++) {
		starfa_sparse_values *v = s ? g->RT : g->R;
		if (!(rc = starfa_insert_values_map(v, STARFA_VALUES_COPY, 0.0f, 0.0f, NULL)))
			rc = starfa_insert_values_map(v, STARFA_VALUES_SCALE, 1.0f, (float)-g->mu, NULL);
	}
	if (!rc && test) {
		rc = starfa_match_entries(test, train->row_ids, train->col_ids, m, n, &g->test);
		if (!rc) /* once: the metrics after every iteration reuse it */
			rc = starfa_matched_count_cold(&g->test, g->csr, n);
		g->has_test = rc == 0;
	}
	return rc;
}

static int ccd_iterate(void *state, int64_t iteration)
{
	struct ccd *g = state;
	(void)iteration;
	int rc = 0;
	for (int64_t t = 0; t < g->nf && !rc; t++) {
		starfa_ccd_feature f = {g->R,
					g->RT,
					t > 0 ? g->w[t - 1] : NULL,
					t > 0 ? g->h[t - 1] : NULL,
					g->w[t],
					g->h[t],
					g->dheld,
					g->dacc_w,
					g->dacc_h,
					g->dcount_w,
					g->dcount_h,
					(float)g->o.lambda,
					g->o.nonneg && is_factor(g, t),
					updates_w(g, t),
					updates_h(g, t),
					g->o.inner,
					g->reg,
					0,
					t > 0};
		rc = starfa_insert_ccd_feature(g->S, &f);
	}
	/* the last feature out again, on both grids: R = A - mu - W H^T */
	if (!rc)
		rc = starfa_insert_ccd_close(g->S, g->R, g->RT, g->w[g->nf - 1], g->h[g->nf - 1]);
	int wrc = starfa_wait();
	return rc ? rc : wrc;
}

/* Waits for the features and brings them to main memory, w's and h's all at once (on a GPU, 2 nf small
 * transfers that would otherwise go one after another). */
static int sync_features(struct ccd *g)
{
	return starfa_dense_sync_all(g->w, 2 * g->nf);
}

/* The model's rows from the synced features (sync_features): users [w (k), b_u, 1], items [h (k), 1, c_i]. */
static void gather_rows(struct ccd *g, struct starfa_factors *f)
{
	const int64_t m = g->csr->nrows, n = g->csr->ncols, k = g->k, wd = k + 2, off = g->o.biases ? 2 : 0;
	for (int64_t r = 0; r < m; r++) {
		float *row = g->U + r * wd;
		for (int64_t d = 0; d < k; d++)
			row[d] = g->W[(d + off) * m + r];
		row[k] = g->o.biases ? g->W[r] : 0.0f;
		row[k + 1] = 1.0f;
	}
	for (int64_t r = 0; r < n; r++) {
		float *row = g->V + r * wd;
		for (int64_t d = 0; d < k; d++)
			row[d] = g->H[(d + off) * n + r];
		row[k] = 1.0f;
		row[k + 1] = g->o.biases ? g->H[n + r] : 0.0f;
	}
	*f = (struct starfa_factors){
		.kind = STARFA_MODEL_EXPLICIT,
		.nusers = m,
		.nitems = n,
		.rank = k,
		.U = g->U,
		.V = g->V,
		.ub = g->o.biases ? g->U + k : NULL,
		.ib = g->o.biases ? g->V + k + 1 : NULL,
		.ldu = wd,
		.ldv = wd,
		.ub_stride = wd,
		.ib_stride = wd,
		.mu = g->mu,
	};
}

static int ccd_evaluate(void *state, starfa_train_progress *p)
{
	struct ccd *g = state;
	const starfa_csr *c = g->csr;
	const int64_t m = c->nrows, n = c->ncols;
	p->row_tiles = p->col_tiles = g->P;
	p->split = g->split;
	double sse = NAN, reg = 0;
	int rc = starfa_reduce_values(g->R, STARFA_REDUCE_SQUARES, 0.0f, NULL, &sse);
	if (rc)
		return rc;
	if (g->reg) { /* summed by the features' tasks: the features stay where they are */
		if ((rc = starfa_sums_read_slots(g->reg, 0, 1, &reg)))
			return rc;
	} else {
		/* the features each side updates (with biases, w's bias row 1 and h's row 0 are ones) */
		double reg_w = 0, reg_h = 0;
		if ((rc = sync_features(g)) || (rc = starfa_column_norms(g->W, g->nf, m, fixed_w(g), g->count_w, &reg_w)) ||
		    (rc = starfa_column_norms(g->H, g->nf, n, fixed_h(g), g->count_h, &reg_h)))
			return rc;
		reg = reg_w + reg_h;
	}
	const double loss = (sse + g->o.lambda * reg) / (double)c->nnz;
	if (!isfinite(loss))
		return starfa_set_error(STARFA_ERUNTIME, "CCD++ produced a non-finite objective in iteration %lld",
					(long long)p->iteration);
	p->converged = isfinite(g->prev_loss) && fabs(g->prev_loss - loss) <= g->o.tol * loss;
	g->prev_loss = loss;
	p->train_rmse = sqrt(sse / (double)c->nnz);
	p->train_loss = loss;
	if (g->has_test && starfa_test_due(p, g->o.iters, g->o.eval_every)) {
		struct starfa_factors f;
		if (g->reg && (rc = sync_features(g)))
			return rc;
		gather_rows(g, &f); /* the model's rows only when the test metrics need them */
		rc = starfa_factors_metrics(&f, &g->test, g->csr, g->o.eval_k, &p->test);
		p->has_test = rc == 0;
		if (rc)
			return rc;
	}
	starfa_progress_column(p, "train_rmse", 4, p->train_rmse);
	starfa_progress_column(p, "loss", 5, p->train_loss);
	starfa_progress_column(p, "test_rmse", 4, p->has_test ? p->test.rmse : NAN);
	return 0;
}

static int ccd_model(void *state, starfa_model **out)
{
	struct ccd *g = state;
	int rc = sync_features(g);
	if (rc)
		return rc;
	struct starfa_factors f;
	gather_rows(g, &f);
	return starfa_model_from_factors(&f, "ccd", g->coo, &g->csr, g->o.lambda, 0.0, out);
}

#define CCD_FIELD(f) offsetof(struct ccd_options, f)
static const starfa_param ccd_params[] = {
	{"rank", STARFA_PARAM_INT64, CCD_FIELD(rank), 1, 4096, NULL, "latent factors"},
	{"lambda", STARFA_PARAM_DOUBLE, CCD_FIELD(lambda), 0, 1e6, NULL,
	 "L2 regularization, weighted by each row's and column's entries (also on the biases)"},
	{"iters", STARFA_PARAM_INT64, CCD_FIELD(iters), 1, 100000, NULL, "outer iterations (every feature once)"},
	{"inner", STARFA_PARAM_INT64, CCD_FIELD(inner), 1, 1000, NULL, "inner iterations a feature (libpmf's -T)"},
	{"nonneg", STARFA_PARAM_FLAG, CCD_FIELD(nonneg), 0, 1, NULL, "non-negative factors (libpmf's NMF; biases free)"},
	{"tiles", STARFA_PARAM_INT64, CCD_FIELD(tiles), 0, 1 << 16, NULL,
	 "bands a side (0: one a worker, bands of 65536+ entries)"},
	{"tol", STARFA_PARAM_DOUBLE, CCD_FIELD(tol), 0, 1, NULL, "stop when the objective's relative change is under this"},
	{"eval-every", STARFA_PARAM_INT64, CCD_FIELD(eval_every), 1, 1 << 30, NULL, STARFA_EVAL_EVERY_HELP},
	{"no-biases", STARFA_PARAM_FLAG, CCD_FIELD(biases), 0, 0, NULL, "no user and item biases (the mean stays)"},
	{"seed", STARFA_PARAM_INT64, CCD_FIELD(seed), 0, 9.2e18, NULL, "seed of the initial factors"},
	{NULL, 0, 0, 0, 0, NULL, NULL},
};

const starfa_algorithm starfa_algorithm_ccd = {
	.name = "ccd",
	.summary = "CCD++ on explicit ratings: rank-one feature updates over a residual kept on both grids",
	.kind = STARFA_MODEL_EXPLICIT,
	.params_size = sizeof(struct ccd_options),
	.params = ccd_params,
	.defaults = ccd_defaults,
	.check = ccd_check,
	.iterations = ccd_iterations,
	.setup = ccd_setup,
	.iterate = ccd_iterate,
	.evaluate = ccd_evaluate,
	.model = ccd_model,
	.free = ccd_free,
};
