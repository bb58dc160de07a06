/* SFA: sparse factor analysis with the L2 loss (BIDMach's SFA; the SDDMM form of ALS in "Sampled Dense
 * Matrix Multiplication for High-Performance Machine Learning", Nisa et al., HiPC 2018, Eq. 2), as SDDMM
 * and SpMM task graphs with no per-row Gram matrices.
 *
 * Explicit ratings r_uv ~ mu + x_u·y_v (mu: the training mean) minimize
 *   Σ_(u,v) (r_uv - mu - x_u·y_v)² + Σ_u λ_u |x_u|² + Σ_v λ_v |y_v|²
 * with λ_u = lambda (times the row's entries with weighted-lambda, ALS-WR's choice). Alternating as ALS
 * does, each side's normal equations (Y_uᵀY_u + λ_u I) x_u = Y_uᵀ(r_u - mu) are solved for every row at
 * once by conjugate gradients warm-started at the current factors, whose matrix-vector product is
 *   A p = λ p + Y·SDDMM(p, Y, S)ᵀ      one SDDMM and one SpMM on the side's grid,
 * the per-row vector work one dense_cg task a band. One half-step, X's (Y's is the same on the
 * transposed tiles):
 *   E = (S - mu) - SDDMM(X, Y)            the residual on S's pattern
 *   Q = E·Y                               b - A'x (A' = A without λ); dense_cg start: r = Q - λ x, p = r
 *   cg-steps times:  E = SDDMM(P, Y), Q = E·Y (or one fused SDDMM + SpMM task a tile: --product fused),
 *                    dense_cg step
 * Memory: O(nnz + (m + n) k) at any rank; the work of a CG step is 4 nnz k flops plus O((m + n) k). The
 * separate SDDMM and SpMM kernels beat the fused one here (SDDMM's tiled kernel reuses B's rows from
 * shared memory; the fused kernel re-reads them a nonzero at a time): 0.108 against 0.157 s an iteration
 * at f = 100 on the Netflix shape on an H100 (bench/SFA.md).
 * With enough CG steps a half-step is ALS's exact solve; warm starts make a few steps enough.
 *
 * The model is explicit (mu + x_u·y_v, no biases): eval and recommend treat it as they treat ALS's. */
#include "model/model.h"
#include "train/algorithms.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct sfa_options {
	int64_t rank, iters, cg_steps, tiles, seed, eval_k, eval_every;
	double lambda, tol;
	int weighted_lambda;
	int separate; /* 1: the product as an SDDMM into values, then an SpMM (0: one fused task a tile) */
};

/* One side's unknowns and CG state: x, the residual, the direction and the product (rows x k), r·r
 * and λ (one column), the side's values E and S - mu on its grid. */
struct side {
	starfa_side side;
	int64_t rows;
	float *x, *r, *p, *q, *rr, *lam;
	starfa_dense *dx, *dr, *dp, *dq, *drr, *dlam;
	starfa_sparse_values *E, *centered;
};

struct sfa {
	struct sfa_options o;
	const starfa_coo *coo;
	starfa_csr *csr;
	starfa_tiled *S;
	starfa_split split[2];
	int64_t k;
	double mu, prev;
	struct side users, items;
	int has_test;
	struct starfa_matched test;
};

#define TRY(call)                                                                                          \
	do {                                                                                               \
		int rc_ = (call);                                                                          \
		if (rc_)                                                                                   \
			return rc_;                                                                        \
	} while (0)

static void side_free(struct side *s)
{
	starfa_dense_free(s->dx);
	starfa_dense_free(s->dr);
	starfa_dense_free(s->dp);
	starfa_dense_free(s->dq);
	starfa_dense_free(s->drr);
	starfa_dense_free(s->dlam);
	starfa_sparse_values_free(s->E);
	starfa_sparse_values_free(s->centered);
	free(s->x);
	free(s->r);
	free(s->p);
	free(s->q);
	free(s->rr);
	free(s->lam);
}

/* A side of `rows` rows with counts[r] entries each; x from the seed's stream (scale / sqrt(k) u) or 0. */
static int side_create(struct sfa *g, struct side *s, starfa_side side, int64_t rows, const int64_t *counts,
		       uint64_t *rng, float scale)
{
	const size_t n = (size_t)(rows * g->k);
	s->side = side;
	s->rows = rows;
	s->x = starfa_malloc(n, sizeof(float));
	s->r = starfa_malloc(n, sizeof(float));
	s->p = starfa_malloc(n, sizeof(float));
	s->q = starfa_malloc(n, sizeof(float));
	s->rr = starfa_malloc((size_t)rows, sizeof(float));
	s->lam = starfa_malloc((size_t)rows, sizeof(float));
	if (!s->x || !s->r || !s->p || !s->q || !s->rr || !s->lam)
		return STARFA_ENOMEM;
	/* A row with no entries keeps zero factors (its system is λ x = 0), as ALS's do; its λ counts one
	 * entry so that CG's step stays defined. */
	for (int64_t r = 0; r < rows; r++) {
		for (int64_t c = 0; c < g->k; c++)
			s->x[r * g->k + c] = rng && counts[r] > 0 ? scale * starfa_uniform_pm1(rng) : 0.0f;
		const double n_r = counts[r] > 0 ? (double)counts[r] : 1.0;
		s->lam[r] = (float)(g->o.lambda * (g->o.weighted_lambda ? n_r : 1.0));
	}
	TRY(starfa_dense_create(g->S, side, s->x, g->k, &s->dx));
	TRY(starfa_dense_create(g->S, side, s->r, g->k, &s->dr));
	TRY(starfa_dense_create(g->S, side, s->p, g->k, &s->dp));
	TRY(starfa_dense_create(g->S, side, s->q, g->k, &s->dq));
	TRY(starfa_dense_create(g->S, side, s->rr, 1, &s->drr));
	TRY(starfa_dense_create(g->S, side, s->lam, 1, &s->dlam));
	TRY(starfa_sparse_values_create(g->S, side, &s->E));
	TRY(starfa_sparse_values_create(g->S, side, &s->centered));
	/* S - mu on this side's grid (X NULL: the matrix's own values). */
	TRY(starfa_insert_values_map(s->centered, STARFA_VALUES_COPY, 0.0f, 0.0f, NULL));
	return starfa_insert_values_map(s->centered, STARFA_VALUES_SCALE, 1.0f, (float)-g->mu, NULL);
}

/* One half-step: s's rows solved by cg-steps CG steps against the other side's factors `fixed`. */
static int half_step(struct sfa *g, struct side *s, const starfa_dense *fixed)
{
	TRY(starfa_insert_sddmm(g->S, s->dx, fixed, STARFA_SDDMM_PATTERN, s->E));
	TRY(starfa_insert_values_map(s->E, STARFA_VALUES_AXPBY, 1.0f, -1.0f, s->centered));
	TRY(starfa_insert_spmm_values(g->S, s->side, s->E, fixed, s->dq));
	TRY(starfa_insert_dense_cg(s->dx, s->dr, s->dp, s->dq, s->drr, s->dlam, 1));
	for (int64_t t = 0; t < g->o.cg_steps; t++) {
		if (g->o.separate) {
			TRY(starfa_insert_sddmm(g->S, s->dp, fixed, STARFA_SDDMM_PATTERN, s->E));
			TRY(starfa_insert_spmm_values(g->S, s->side, s->E, fixed, s->dq));
		} else {
			TRY(starfa_insert_sddmm_spmm(g->S, s->side, s->dp, fixed, STARFA_FUSED_PATTERN, 0.0f, s->dq));
		}
		TRY(starfa_insert_dense_cg(s->dx, s->dr, s->dp, s->dq, s->drr, s->dlam, 0));
	}
	return 0;
}

static void sfa_defaults(void *params)
{
	struct sfa_options *o = params;
	*o = (struct sfa_options){.rank = 32,
				  .iters = 10,
				  .cg_steps = 3,
				  .tiles = 0,
				  .seed = 1,
				  .eval_k = 10,
				  .eval_every = 1,
				  .lambda = 0.12, /* ALS's explicit defaults */
				  .tol = 0,
				  .weighted_lambda = 1,
				  .separate = 1}; /* faster on an H100 at f = 32 and 100 (bench/SFA.md) */
}

static int sfa_check(const void *params)
{
	const struct sfa_options *o = params;
	if (o->rank < 1 || o->rank > 4096)
		return starfa_set_error(STARFA_EINVAL, "rank %lld outside [1, 4096]", (long long)o->rank);
	if (!(o->lambda > 0) || !isfinite(o->lambda))
		return starfa_set_error(STARFA_EINVAL, "lambda must be a positive number, not %g", o->lambda);
	if (o->iters < 1 || o->cg_steps < 1 || o->eval_every < 1)
		return starfa_set_error(STARFA_EINVAL, "iters, cg-steps and eval-every must be >= 1");
	return 0;
}

static int64_t sfa_iterations(const void *params)
{
	return ((const struct sfa_options *)params)->iters;
}

static void sfa_free(void *state)
{
	struct sfa *g = state;
	side_free(&g->users);
	side_free(&g->items);
	starfa_tiled_free(g->S);
	starfa_csr_free(g->csr);
	starfa_matched_free(&g->test);
	free(g);
}

static int sfa_setup(const starfa_coo *train, const starfa_coo *test, const void *params, void **state)
{
	struct sfa *g = starfa_calloc(1, sizeof *g);
	if (!g)
		return STARFA_ENOMEM;
	*state = g;
	g->o = *(const struct sfa_options *)params;
	g->k = g->o.rank;
	g->prev = NAN;
	TRY(starfa_csr_from_coo(train, &g->csr));
	g->coo = train;
	const starfa_csr *c = g->csr;
	if (c->nnz == 0)
		return starfa_set_error(STARFA_EINVAL, "no training entries");
	double sum = 0;
	for (int64_t e = 0; e < c->nnz; e++) {
		if (!isfinite(c->val[e]))
			return starfa_set_error(STARFA_EINVAL, "training value %lld is %g", (long long)e, c->val[e]);
		sum += c->val[e];
	}
	g->mu = sum / (double)c->nnz;
	/* Both grids, the bands as the planner says for an SDDMM sweep (a CG step is one SDDMM and one SpMM). */
	TRY(starfa_sweep_tiles(c, g->k, g->o.tiles, 0, g->split, &g->S));
	int64_t *row_n = starfa_calloc((size_t)c->nrows + 1, sizeof(int64_t)),
		*col_n = starfa_calloc((size_t)c->ncols + 1, sizeof(int64_t));
	if (!row_n || !col_n) {
		free(row_n);
		free(col_n);
		return STARFA_ENOMEM;
	}
	for (int64_t r = 0; r < c->nrows; r++) {
		row_n[r] = c->rowptr[r + 1] - c->rowptr[r];
		for (int64_t e = c->rowptr[r]; e < c->rowptr[r + 1]; e++)
			col_n[c->colind[e]]++;
	}
	/* The start: X = 0, Y uniform in ±1/sqrt(k) (the first half-step solves X from it). */
	uint64_t rng = starfa_seed_stream((uint64_t)g->o.seed, 13);
	int rc = side_create(g, &g->users, STARFA_ROWS, c->nrows, row_n, NULL, 0.0f);
	if (!rc)
		rc = side_create(g, &g->items, STARFA_COLS, c->ncols, col_n, &rng, (float)(1.0 / sqrt((double)g->k)));
	free(row_n);
	free(col_n);
	TRY(rc);
	if (test) {
		TRY(starfa_match_entries(test, train->row_ids, train->col_ids, c->nrows, c->ncols, &g->test));
		TRY(starfa_matched_count_cold(&g->test, g->csr, c->ncols)); /* once: every evaluation reuses it */
		g->has_test = 1;
	}
	return starfa_wait();
}

static int sfa_iterate(void *state, int64_t iteration)
{
	struct sfa *g = state;
	(void)iteration;
	TRY(half_step(g, &g->users, g->items.dx));
	TRY(half_step(g, &g->items, g->users.dx));
	return starfa_wait();
}

static void current_factors(const struct sfa *g, struct starfa_factors *f)
{
	*f = (struct starfa_factors){
		.kind = STARFA_MODEL_EXPLICIT,
		.nusers = g->csr->nrows,
		.nitems = g->csr->ncols,
		.rank = g->k,
		.U = g->users.x,
		.V = g->items.x,
		.ldu = g->k,
		.ldv = g->k,
		.mu = g->mu,
	};
}

static int sfa_evaluate(void *state, starfa_train_progress *p)
{
	struct sfa *g = state;
	p->row_tiles = starfa_tiled_row_tiles(g->S);
	p->col_tiles = starfa_tiled_col_tiles(g->S);
	p->split = g->split;
	/* The squared error in the graph: predictions mu + x_u·y_v on the row grid against S's values. */
	double sse = 0, reg = 0;
	TRY(starfa_insert_sddmm(g->S, g->users.dx, g->items.dx, STARFA_SDDMM_PATTERN, g->users.E));
	TRY(starfa_insert_values_map(g->users.E, STARFA_VALUES_SCALE, 1.0f, (float)g->mu, NULL));
	TRY(starfa_reduce_values(g->users.E, STARFA_REDUCE_SQDIFF, 0.0f, NULL, &sse));
	TRY(starfa_dense_sync(g->users.dx));
	TRY(starfa_dense_sync(g->items.dx));
	const struct side *sides[2] = {&g->users, &g->items};
	for (int s = 0; s < 2; s++) {
		double side_reg = 0;
		TRY(starfa_row_norms(sides[s]->x, sides[s]->rows, g->k, 0, g->k, sides[s]->lam, 1, 1.0, &side_reg));
		reg += side_reg;
	}
	const double entries = (double)g->csr->nnz, loss = (sse + reg) / entries;
	if (!isfinite(loss))
		return starfa_set_error(STARFA_ERUNTIME, "SFA produced a non-finite loss in iteration %lld (a larger lambda?)",
					(long long)p->iteration);
	p->train_rmse = sqrt(sse / entries);
	p->train_loss = loss;
	p->converged = isfinite(g->prev) && g->o.tol > 0 && fabs(loss - g->prev) <= g->o.tol * fabs(loss);
	g->prev = loss;
	if (g->has_test && starfa_test_due(p, g->o.iters, g->o.eval_every)) {
		struct starfa_factors f;
		current_factors(g, &f);
		TRY(starfa_factors_metrics(&f, &g->test, g->csr, g->o.eval_k, &p->test));
		p->has_test = 1;
	}
	starfa_progress_column(p, "train_rmse", 4, p->train_rmse);
	starfa_progress_column(p, "loss", 4, p->train_loss);
	if (g->has_test) /* NaN (left out) where not computed this iteration */
		starfa_progress_column(p, "test_rmse", 4, p->has_test ? p->test.rmse : NAN);
	return 0;
}

static int sfa_model(void *state, starfa_model **out)
{
	struct sfa *g = state;
	TRY(starfa_dense_sync(g->users.dx));
	TRY(starfa_dense_sync(g->items.dx));
	struct starfa_factors f;
	current_factors(g, &f);
	return starfa_model_from_factors(&f, "sfa", g->coo, &g->csr, g->o.lambda, 0.0, out);
}

#define SFA_FIELD(f) offsetof(struct sfa_options, f)
static const starfa_param sfa_params[] = {
	{"rank", STARFA_PARAM_INT64, SFA_FIELD(rank), 1, 4096, NULL, "latent factors f"},
	{"iters", STARFA_PARAM_INT64, SFA_FIELD(iters), 1, 100000, NULL, "iterations (both sides)"},
	{"cg-steps", STARFA_PARAM_INT64, SFA_FIELD(cg_steps), 1, 4096, NULL,
	 "conjugate-gradient steps a half-step, each one SDDMM and one SpMM"},
	{"lambda", STARFA_PARAM_DOUBLE, SFA_FIELD(lambda), 1e-12, 1e12, NULL, "regularization"},
	{"weighted-lambda", STARFA_PARAM_INT, SFA_FIELD(weighted_lambda), 0, 1, NULL,
	 "1: lambda times the row's entries (ALS-WR)"},
	{"tol", STARFA_PARAM_DOUBLE, SFA_FIELD(tol), 0, 1, NULL,
	 "stop when the loss's relative change is under this (0: run every iteration)"},
	{"product", STARFA_PARAM_CHOICE, SFA_FIELD(separate), 0, 1, "fused|separate",
	 "the CG product: one fused SDDMM + SpMM task a tile, or an SDDMM into values then an SpMM"},
	{"eval-k", STARFA_PARAM_INT64, SFA_FIELD(eval_k), 1, 100000, NULL, "cut-off of ranking metrics"},
	{"eval-every", STARFA_PARAM_INT64, SFA_FIELD(eval_every), 1, 1 << 30, NULL, STARFA_EVAL_EVERY_HELP},
	{"tiles", STARFA_PARAM_INT64, SFA_FIELD(tiles), 0, 1 << 16, NULL, "bands a side (0: planned)"},
	{"seed", STARFA_PARAM_INT64, SFA_FIELD(seed), 0, 9.2e18, NULL, "seed of the start"},
	{NULL, 0, 0, 0, 0, NULL, NULL},
};

const starfa_algorithm starfa_algorithm_sfa = {
	.name = "sfa",
	.summary = "sparse factor analysis (L2): ALS's normal equations by CG on SDDMM + SpMM, no Gram matrices",
	.kind = STARFA_MODEL_EXPLICIT,
	.params_size = sizeof(struct sfa_options),
	.params = sfa_params,
	.defaults = sfa_defaults,
	.check = sfa_check,
	.iterations = sfa_iterations,
	.setup = sfa_setup,
	.iterate = sfa_iterate,
	.evaluate = sfa_evaluate,
	.model = sfa_model,
	.free = sfa_free,
};
