/* GaP and KL-NMF: non-negative factors of a matrix of counts by multiplicative updates, as SDDMM and SpMM
 * task graphs.
 *
 * GaP (J. Canny, "GaP: a factor model for discrete data", SIGIR 2004): documents are the rows of S, words
 * its columns; s_dw ~ Poisson(y_dw), y = X·Λᵀ, with X (documents x K) the documents' topic scores and Λ
 * (words x K) the topics' word weights, and each score x_dk ~ Gamma(a, b) (shape a, scale b, one prior for
 * every topic). The MAP estimate maximizes
 *   log p(S | X, Λ) + log p(X) = Σ_nz s log y - Σ_all y + Σ_dk [(a - 1) log x_dk - x_dk / b] + const,
 * i.e. minimizes the objective
 *   F = D(S ‖ X·Λᵀ) + Σ_dk [x_dk / b - (a - 1) log x_dk],
 *   D(S ‖ Y) = Σ_nz (s log(s / y) - s) + Σ_all y    (the generalized Kullback-Leibler divergence).
 * Canny's updates are minorize-maximize steps. By Jensen's inequality with weights φ_dwk = x_dk λ_wk / y_dw,
 * log y_dw >= Σ_k φ_dwk log(x_dk λ_wk / φ_dwk), so for fixed Λ the bound separates over the scores; each
 * one's maximizer
 *   x_dk ← (x_dk Σ_w (s_dw / y_dw) λ_wk + a - 1) / (Σ_w λ_wk + 1/b)
 *        =  (X ∘ ((S ⊘ Y)·Λ) + (a - 1)) ⊘ (colsum(Λ) + 1/b)
 * never lowers the posterior (for a >= 1, where the bound is concave in x). Λ has no prior (Canny's
 * M-step), and the same argument gives
 *   λ_wk ← λ_wk Σ_d (s_dw / y_dw) x_dk / Σ_d x_dk  =  Λ ∘ ((S ⊘ Y)ᵀ·X) ⊘ colsum(X).
 * With a = 1 and 1/b = 0 these are Lee and Seung's multiplicative updates for KL-NMF ("Algorithms for
 * non-negative matrix factorization", NIPS 2000), scikit-learn's NMF(beta_loss='kullback-leibler',
 * solver='mu'): `--algo klnmf`. One iteration, X then Λ (scikit-learn's order):
 *   X ← (X ∘ (P·Λ) + (a - 1)) ⊘ max(ε, colsum(Λ) + 1/b),  P = S ⊘ max(ε, SDDMM(X, Λ))   row-side tiles
 *   Λ ← Λ ∘ (P'ᵀ·X) ⊘ max(ε, colsum(X)),  P' = S ⊘ max(ε, SDDMM(Λ, X))   transposed tiles, the new X
 * each P·Λ one fused SDDMM + SpMM task a tile (starfa_task_sddmm_spmm: the quotients never go to memory).
 * The objective: one SDDMM and a KL reduction over the nonzeros, Σ_all y = colsum(X)·colsum(Λ) (no pass
 * over the zeros), Σ x from the same column sums and Σ log x by a map and a reduction over X's blocks.
 *
 * The scale b only sets the units of X: (X, Λ, b) and (cX, Λ/c, cb) fit alike. The default makes the
 * prior's mode (a - 1) b the mean count of a topic in a document, tokens / (documents K), so that Λ's
 * columns end near sums of 1 and x_dk near the number of document d's words from topic k (Canny's reading).
 *
 * The model (kind "nonneg"): user_factors = X, item_factors = Λ, alpha = a, lambda = 1/b (klnmf: 1 and 0).
 * As a topic model, β_k = Λ's column k normalized, θ_d ∝ x_dk colsum(Λ)_k (each topic's expected tokens in
 * the document); starfa_topic_infer finds X of new documents by the X update with Λ fixed. */
#include "model/model.h"
#include "train/algorithms.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define GAP_EPS 1e-30f /* the floor of the predictions and the column sums */

struct gap_options {
	int64_t rank, iters, tiles, seed, eval_iters;
	double shape, scale, tol;
	int init; /* 0: NNDSVDa, 1: random */
};

struct gap {
	struct gap_options o;
	int klnmf;
	const starfa_coo *coo;
	starfa_csr *csr;
	starfa_tiled *S;
	starfa_split split[2];
	int64_t D, W, K;
	double tokens, shape, rate; /* a and 1/b */
	float *X, *L, *XQ, *LQ, *tmp, *cx, *cl;
	starfa_dense *dX, *dL, *dXQ, *dLQ, *dtmp;
	starfa_sparse_values *P; /* the objective's SDDMM */
	starfa_vector *vX, *vL;
	double prev, kl;
	starfa_csr *test_obs, *test_eval;
	int64_t test_empty;
};

#define TRY(call)                                                                                          \
	do {                                                                                               \
		int rc_ = (call);                                                                          \
		if (rc_)                                                                                   \
			return rc_;                                                                        \
	} while (0)

/* X ← (X ∘ (P·Λ) + (a - 1)) ⊘ max(ε, colsum(Λ) + rate), P·Λ with P = S ⊘ max(ε, SDDMM(X, Λ)) one fused
 * task a tile (the quotient never goes to memory). XQ is scratch (documents x K), vL gets colsum(Λ). */
static int update_scores(const starfa_tiled *S, starfa_dense *X, const starfa_dense *L, starfa_dense *XQ,
			 starfa_vector *vL, double shape, double rate)
{
	TRY(starfa_insert_sddmm_spmm(S, STARFA_ROWS, X, L, STARFA_FUSED_QUOTIENT, GAP_EPS, XQ));
	TRY(starfa_insert_dense_colsum(L, vL));
	TRY(starfa_insert_dense_map(X, STARFA_DENSE_MUL, 0.0f, 0.0f, XQ, NULL));
	if (shape != 1.0)
		TRY(starfa_insert_dense_map(X, STARFA_DENSE_SCALE, 1.0f, (float)(shape - 1.0), NULL, NULL));
	return starfa_insert_dense_map(X, STARFA_DENSE_DIV, GAP_EPS, (float)rate, NULL, vL);
}

/* Λ ← Λ ∘ (P'ᵀ·X) ⊘ max(ε, colsum(X)), P' = S ⊘ max(ε, SDDMM(Λ, X)) fused on the transposed tiles. */
static int update_words(struct gap *g)
{
	TRY(starfa_insert_sddmm_spmm(g->S, STARFA_COLS, g->dL, g->dX, STARFA_FUSED_QUOTIENT, GAP_EPS, g->dLQ));
	TRY(starfa_insert_dense_colsum(g->dX, g->vX));
	TRY(starfa_insert_dense_map(g->dL, STARFA_DENSE_MUL, 0.0f, 0.0f, g->dLQ, NULL));
	return starfa_insert_dense_map(g->dL, STARFA_DENSE_DIV, GAP_EPS, 0.0f, NULL, g->vX);
}

/* F = D(S ‖ X·Λᵀ) + rate Σx - (a - 1) Σ log x, and D alone; after an iteration (it reads colsum(X) where
 * the Λ update left it). */
static int objective(struct gap *g, double *F, double *kl)
{
	double nz = 0, all = 0, sum_x = 0, sum_log = 0;
	TRY(starfa_insert_sddmm(g->S, g->dX, g->dL, STARFA_SDDMM_PATTERN, g->P));
	/* vX holds colsum(X) from the iteration's Λ update (X has not changed since); Λ has */
	TRY(starfa_insert_dense_colsum(g->dL, g->vL));
	if (g->shape != 1.0) {
		TRY(starfa_insert_dense_map(g->dtmp, STARFA_DENSE_COPY, 0.0f, 0.0f, g->dX, NULL));
		TRY(starfa_insert_dense_map(g->dtmp, STARFA_DENSE_LOG, GAP_EPS, 0.0f, NULL, NULL));
		TRY(starfa_reduce_dense(g->dtmp, STARFA_REDUCE_SUM, &sum_log));
	}
	TRY(starfa_reduce_values(g->P, STARFA_REDUCE_KL, GAP_EPS, NULL, &nz));
	TRY(starfa_vector_read(g->vX, g->cx));
	TRY(starfa_vector_read(g->vL, g->cl));
	for (int64_t k = 0; k < g->K; k++) {
		all += (double)g->cx[k] * g->cl[k];
		sum_x += g->cx[k];
	}
	*kl = nz + all;
	*F = *kl + g->rate * sum_x - (g->shape - 1.0) * sum_log;
	return 0;
}

static void gap_defaults(void *params)
{
	struct gap_options *o = params;
	*o = (struct gap_options){.rank = 20,
				  .iters = 50,
				  .tiles = 0,
				  .seed = 1,
				  .eval_iters = 100,
				  .shape = 1.1,
				  .scale = 0, /* 0: the mean count of a topic in a document over (a - 1) */
				  .tol = 0,
				  .init = 0};
}

static void klnmf_defaults(void *params)
{
	gap_defaults(params);
	((struct gap_options *)params)->shape = 1.0;
}

static int gap_check(const void *params)
{
	const struct gap_options *o = params;
	if (o->rank < 1 || o->rank > 4096)
		return starfa_set_error(STARFA_EINVAL, "rank %lld outside [1, 4096]", (long long)o->rank);
	if (!(o->shape >= 1.0) || !isfinite(o->shape))
		return starfa_set_error(STARFA_EINVAL,
					"shape must be >= 1: below it the scores' prior has no mode and the updates no bound");
	if (!(o->scale >= 0) || !isfinite(o->scale))
		return starfa_set_error(STARFA_EINVAL, "scale must be a number > 0 (0: from the corpus)");
	if (o->shape == 1.0 && o->scale > 0)
		return starfa_set_error(STARFA_EINVAL,
					"with shape 1 a finite scale has no MAP estimate (the scores shrink toward 0 while the "
					"weights grow): give a shape > 1, or no scale");
	if (o->iters < 1 || o->eval_iters < 1)
		return starfa_set_error(STARFA_EINVAL, "iters and eval-iters must be >= 1");
	return 0;
}

static int64_t gap_iterations(const void *params)
{
	return ((const struct gap_options *)params)->iters;
}

static void gap_free(void *state)
{
	struct gap *g = state;
	starfa_dense_free(g->dX);
	starfa_dense_free(g->dL);
	starfa_dense_free(g->dXQ);
	starfa_dense_free(g->dLQ);
	starfa_dense_free(g->dtmp);
	starfa_sparse_values_free(g->P);
	starfa_vector_free(g->vX);
	starfa_vector_free(g->vL);
	starfa_tiled_free(g->S);
	starfa_csr_free(g->csr);
	starfa_csr_free(g->test_obs);
	starfa_csr_free(g->test_eval);
	free(g->X);
	free(g->L);
	free(g->XQ);
	free(g->LQ);
	free(g->tmp);
	free(g->cx);
	free(g->cl);
	free(g);
}

/* NNDSVDa (Boutsidis & Gallopoulos, "SVD based initialization: a head start for nonnegative matrix
 * factorization", Pattern Recognition 2008; scikit-learn's init='nndsvda', its default for these
 * updates): from S's leading k singular triplets (starfa_svds, with scikit-learn's 'auto' power
 * iterations), factor 1 is √σ₁ |u₁|, |v₁|, and factor j the larger of the positive and the negative
 * parts of u_j v_jᵀ, each part's norm split between its two sides; the values under 1e-6 become the
 * mean of S over all its entries. */
static int nndsvda(struct gap *g)
{
	const int64_t D = g->D, W = g->W, K = g->K, small = D < W ? D : W;
	float *U = starfa_malloc((size_t)(D * K), sizeof(float)), *V = starfa_malloc((size_t)(W * K), sizeof(float)),
	      *sv = starfa_malloc((size_t)K, sizeof(float));
	int rc = !U || !V || !sv ? STARFA_ENOMEM : 0;
	if (!rc)
		rc = starfa_svds(g->S, K, (double)K < 0.1 * (double)small ? 7 : 4, (uint64_t)g->o.seed, U, sv, V);
	for (int64_t j = 0; !rc && j < K; j++) {
		double up = 0, un = 0, vp = 0, vn = 0; /* squared norms of the positive and negative parts */
		for (int64_t d = 0; d < D; d++) {
			const double x = U[d * K + j];
			up += x > 0 ? x * x : 0;
			un += x < 0 ? x * x : 0;
		}
		for (int64_t w = 0; w < W; w++) {
			const double y = V[w * K + j];
			vp += y > 0 ? y * y : 0;
			vn += y < 0 ? y * y : 0;
		}
		up = sqrt(up), un = sqrt(un), vp = sqrt(vp), vn = sqrt(vn);
		/* the first factor: both signs of the Perron vector pair, |u| and |v| */
		const int first = j == 0, positive = first || up * vp > un * vn;
		const double nu = first ? 1 : positive ? up : un, nv = first ? 1 : positive ? vp : vn;
		const double lbd = first ? sqrt((double)sv[0]) : sqrt((double)sv[j] * nu * nv);
		for (int64_t d = 0; d < D; d++) {
			const double x = U[d * K + j], part = first ? fabs(x) : positive ? (x > 0 ? x : 0) : (x < 0 ? -x : 0);
			g->X[d * K + j] = nu > 0 ? (float)(lbd * part / nu) : 0.0f;
		}
		for (int64_t w = 0; w < W; w++) {
			const double y = V[w * K + j], part = first ? fabs(y) : positive ? (y > 0 ? y : 0) : (y < 0 ? -y : 0);
			g->L[w * K + j] = nv > 0 ? (float)(lbd * part / nv) : 0.0f;
		}
	}
	if (!rc) {
		const float mean = (float)(g->tokens / ((double)D * (double)W));
		for (int64_t e = 0; e < D * K; e++)
			g->X[e] = g->X[e] < 1e-6f ? mean : g->X[e];
		for (int64_t e = 0; e < W * K; e++)
			g->L[e] = g->L[e] < 1e-6f ? mean : g->L[e];
	}
	free(U);
	free(V);
	free(sv);
	return rc;
}

static int setup(const starfa_coo *train, const starfa_coo *test, const void *params, int klnmf, void **state)
{
	struct gap *g = starfa_calloc(1, sizeof *g);
	if (!g)
		return STARFA_ENOMEM;
	*state = g;
	g->o = *(const struct gap_options *)params;
	g->klnmf = klnmf;
	g->coo = train;
	g->K = g->o.rank;
	g->prev = NAN;
	TRY(starfa_csr_from_coo(train, &g->csr));
	const starfa_csr *c = g->csr;
	g->D = c->nrows;
	g->W = c->ncols;
	const char *name = klnmf ? "KL-NMF" : "GaP";
	for (int64_t e = 0; e < c->nnz; e++) {
		if (!(c->val[e] >= 0) || !isfinite(c->val[e]))
			return starfa_set_error(STARFA_EINVAL, "%s needs counts >= 0; training value %lld is %g", name,
						(long long)e, c->val[e]);
		g->tokens += c->val[e];
	}
	if (!(g->tokens > 0))
		return starfa_set_error(STARFA_EINVAL, "every training value is zero: nothing to factor");
	g->shape = g->o.shape;
	if (g->shape > 1.0) {
		const double scale = g->o.scale > 0 ? g->o.scale : g->tokens / ((double)g->D * (double)g->K) / (g->shape - 1.0);
		g->rate = 1.0 / scale;
	}
	/* Both grids, the bands as the planner says for an SDDMM sweep. */
	TRY(starfa_sweep_tiles(c, g->K, g->o.tiles, 0, g->split, &g->S));
	const size_t nx = (size_t)(g->D * g->K), nl = (size_t)(g->W * g->K);
	g->X = starfa_malloc(nx, sizeof(float));
	g->XQ = starfa_malloc(nx, sizeof(float));
	g->tmp = starfa_malloc(nx, sizeof(float));
	g->L = starfa_malloc(nl, sizeof(float));
	g->LQ = starfa_malloc(nl, sizeof(float));
	g->cx = starfa_malloc((size_t)g->K, sizeof(float));
	g->cl = starfa_malloc((size_t)g->K, sizeof(float));
	if (!g->X || !g->XQ || !g->tmp || !g->L || !g->LQ || !g->cx || !g->cl)
		return STARFA_ENOMEM;
	/* The start: NNDSVDa from the leading singular triplets, or every entry scale (1 + u/2), u uniform in
	 * [-1, 1) from the seed's stream (X, then Λ), scale^2 K the mean of S over all its entries (scikit-learn's
	 * random start has that mean). */
	uint64_t rng = starfa_seed_stream((uint64_t)g->o.seed, 11);
	const float scale = (float)sqrt(g->tokens / ((double)g->D * (double)g->W * (double)g->K));
	const int64_t small = g->D < g->W ? g->D : g->W;
	if (g->o.init == 0 && g->K <= small) {
		TRY(nndsvda(g));
	} else {
		for (size_t e = 0; e < nx; e++)
			g->X[e] = scale * (1.0f + 0.5f * starfa_uniform_pm1(&rng));
		for (size_t e = 0; e < nl; e++)
			g->L[e] = scale * (1.0f + 0.5f * starfa_uniform_pm1(&rng));
	}
	TRY(starfa_dense_create(g->S, STARFA_ROWS, g->X, g->K, &g->dX));
	TRY(starfa_dense_create(g->S, STARFA_ROWS, g->XQ, g->K, &g->dXQ));
	TRY(starfa_dense_create(g->S, STARFA_ROWS, g->tmp, g->K, &g->dtmp));
	TRY(starfa_dense_create(g->S, STARFA_COLS, g->L, g->K, &g->dL));
	TRY(starfa_dense_create(g->S, STARFA_COLS, g->LQ, g->K, &g->dLQ));
	TRY(starfa_sparse_values_create(g->S, STARFA_ROWS, &g->P));
	TRY(starfa_vector_create(g->K, &g->vX));
	TRY(starfa_vector_create(g->K, &g->vL));
	if (test) {
		if (test->ncols > g->W)
			return starfa_set_error(STARFA_EINVAL, "the test documents have %lld words, the corpus %lld",
						(long long)test->ncols, (long long)g->W);
		starfa_csr *t = NULL;
		TRY(starfa_csr_from_coo(test, &t));
		int rc = starfa_documents_split(t, &g->test_obs, &g->test_eval, &g->test_empty);
		starfa_csr_free(t);
		TRY(rc);
	}
	return starfa_wait();
}

static int gap_setup(const starfa_coo *train, const starfa_coo *test, const void *params, void **state)
{
	return setup(train, test, params, 0, state);
}

static int klnmf_setup(const starfa_coo *train, const starfa_coo *test, const void *params, void **state)
{
	return setup(train, test, params, 1, state);
}

static int gap_iterate(void *state, int64_t iteration)
{
	struct gap *g = state;
	(void)iteration;
	TRY(update_scores(g->S, g->dX, g->dL, g->dXQ, g->vL, g->shape, g->rate));
	TRY(update_words(g));
	return starfa_wait();
}

static int gap_evaluate(void *state, starfa_train_progress *p)
{
	struct gap *g = state;
	p->row_tiles = starfa_tiled_row_tiles(g->S);
	p->col_tiles = starfa_tiled_col_tiles(g->S);
	p->split = g->split;
	double F = NAN, kl = NAN;
	TRY(objective(g, &F, &kl));
	if (!isfinite(F))
		return starfa_set_error(STARFA_ERUNTIME, "%s produced a non-finite objective in iteration %lld",
					g->klnmf ? "KL-NMF" : "GaP", (long long)p->iteration);
	p->converged = isfinite(g->prev) && g->o.tol > 0 && fabs(F - g->prev) <= g->o.tol * fabs(F);
	g->prev = F;
	p->train_loss = F / g->tokens;
	double test_perplexity = NAN;
	if (g->test_obs) {
		TRY(starfa_dense_sync(g->dL));
		const struct starfa_topic_source src = {STARFA_MODEL_NONNEG, g->L, g->W, g->K, g->shape, g->rate};
		int64_t its = 0;
		TRY(starfa_documents_perplexity(&src, g->test_obs, g->test_eval, g->o.eval_iters, 1e-3, &test_perplexity,
						&its));
		p->has_test = 1;
		p->test.entries = g->test_eval->nnz;
	}
	starfa_progress_column(p, "kl_per_token", 6, kl / g->tokens);
	if (!g->klnmf)
		starfa_progress_column(p, "objective_per_token", 6, F / g->tokens);
	starfa_progress_column(p, "test_perplexity", 2, test_perplexity);
	return 0;
}

static int gap_model(void *state, starfa_model **out)
{
	struct gap *g = state;
	TRY(starfa_dense_sync(g->dX));
	TRY(starfa_dense_sync(g->dL));
	struct starfa_factors f = {
		.kind = STARFA_MODEL_NONNEG,
		.nusers = g->D,
		.nitems = g->W,
		.rank = g->K,
		.U = g->X,
		.V = g->L,
		.ldu = g->K,
		.ldv = g->K,
	};
	starfa_csr *none = NULL; /* a count model keeps no training entries */
	return starfa_model_from_factors(&f, g->klnmf ? "klnmf" : "gap", g->coo, &none, g->rate, g->shape, out);
}

#define GAP_FIELD(f) offsetof(struct gap_options, f)
#define GAP_COMMON                                                                                          \
	{"rank", STARFA_PARAM_INT64, GAP_FIELD(rank), 1, 4096, NULL, "factors (topics) K"},                 \
	{"iters", STARFA_PARAM_INT64, GAP_FIELD(iters), 1, 1000000, NULL, "iterations (X, then the word weights)"}, \
	{"tol", STARFA_PARAM_DOUBLE, GAP_FIELD(tol), 0, 1, NULL,                                            \
	 "stop when the objective's relative change is under this (0: run every iteration)"},               \
	{"eval-iters", STARFA_PARAM_INT64, GAP_FIELD(eval_iters), 1, 100000, NULL,                         \
	 "most iterations inferring the test documents' scores"},                                          \
	{"tiles", STARFA_PARAM_INT64, GAP_FIELD(tiles), 0, 1 << 16, NULL, "bands a side (0: planned)"},     \
	{"seed", STARFA_PARAM_INT64, GAP_FIELD(seed), 0, 9.2e18, NULL, "seed of the start"},                \
	{"init", STARFA_PARAM_CHOICE, GAP_FIELD(init), 0, 1, "nndsvda|random",                              \
	 "the start: NNDSVDa from the leading singular vectors (scikit-learn's default here; random when the "  \
	 "rank exceeds the smaller dimension) or random"}

static const starfa_param gap_params[] = {
	GAP_COMMON,
	{"shape", STARFA_PARAM_DOUBLE, GAP_FIELD(shape), 1, 1e6, NULL,
	 "shape a >= 1 of the scores' Gamma prior (1: no prior, KL-NMF)"},
	{"scale", STARFA_PARAM_DOUBLE, GAP_FIELD(scale), 0, 1e30, NULL,
	 "scale b of the prior (0: the mean count of a topic in a document over a - 1)"},
	{NULL, 0, 0, 0, 0, NULL, NULL},
};

static const starfa_param klnmf_params[] = {
	GAP_COMMON,
	{NULL, 0, 0, 0, 0, NULL, NULL},
};

const starfa_algorithm starfa_algorithm_gap = {
	.name = "gap",
	.summary = "GaP (gamma-Poisson) factors of counts by Canny's MAP multiplicative updates",
	.kind = STARFA_MODEL_NONNEG,
	.params_size = sizeof(struct gap_options),
	.params = gap_params,
	.defaults = gap_defaults,
	.check = gap_check,
	.iterations = gap_iterations,
	.setup = gap_setup,
	.iterate = gap_iterate,
	.evaluate = gap_evaluate,
	.model = gap_model,
	.free = gap_free,
};

const starfa_algorithm starfa_algorithm_klnmf = {
	.name = "klnmf",
	.summary = "non-negative factors of counts minimizing the KL divergence (Lee & Seung's multiplicative updates)",
	.kind = STARFA_MODEL_NONNEG,
	.params_size = sizeof(struct gap_options),
	.params = klnmf_params,
	.defaults = klnmf_defaults,
	.check = gap_check,
	.iterations = gap_iterations,
	.setup = klnmf_setup,
	.iterate = gap_iterate,
	.evaluate = gap_evaluate,
	.model = gap_model,
	.free = gap_free,
};

/* ------------------------------------------------------------------ scores of new documents */

int starfa_gap_infer(const starfa_tiled *S, const starfa_csr *c, const float *L, int64_t K, double shape, double rate,
		     int64_t max_iters, double tol, float *X, int64_t *iterations)
{
	const int64_t D = starfa_tiled_nrows(S), W = starfa_tiled_ncols(S);
	float *Lc = starfa_malloc((size_t)(W * K), sizeof(float)), *XQ = starfa_malloc((size_t)(D * K), sizeof(float)),
	      *prev = starfa_malloc((size_t)(D * K), sizeof(float)), *cl = starfa_malloc((size_t)K, sizeof(float));
	starfa_dense *dX = NULL, *dL = NULL, *dXQ = NULL, *dprev = NULL;
	starfa_vector *vL = NULL;
	int rc = !Lc || !XQ || !prev || !cl ? STARFA_ENOMEM : 0;
	if (!rc) {
		/* The start: each document's tokens spread evenly, so that its predicted total is its length. */
		double total = 0;
		memcpy(Lc, L, sizeof(float) * (size_t)(W * K));
		for (int64_t k = 0; k < K; k++)
			cl[k] = 0;
		for (int64_t w = 0; w < W; w++)
			for (int64_t k = 0; k < K; k++)
				cl[k] += Lc[w * K + k];
		for (int64_t k = 0; k < K; k++)
			total += cl[k];
		for (int64_t d = 0; d < D; d++) {
			double n = 0;
			for (int64_t e = c->rowptr[d]; e < c->rowptr[d + 1]; e++)
				n += c->val[e];
			const float x = total > 0 ? (float)(n / total) : 0.0f;
			for (int64_t k = 0; k < K; k++)
				X[d * K + k] = x > 0 ? x : 1e-3f; /* an empty document starts off zero all the same */
		}
	}
	if (!rc)
		rc = starfa_dense_create(S, STARFA_ROWS, X, K, &dX);
	if (!rc)
		rc = starfa_dense_create(S, STARFA_ROWS, XQ, K, &dXQ);
	if (!rc)
		rc = starfa_dense_create(S, STARFA_ROWS, prev, K, &dprev);
	if (!rc)
		rc = starfa_dense_create(S, STARFA_COLS, Lc, K, &dL);
	if (!rc)
		rc = starfa_vector_create(K, &vL);
	int64_t it = 0;
	while (!rc && it < max_iters) {
		rc = starfa_insert_dense_map(dprev, STARFA_DENSE_COPY, 0.0f, 0.0f, dX, NULL);
		if (!rc)
			rc = update_scores(S, dX, dL, dXQ, vL, shape, rate);
		it++;
		if (!rc && tol > 0) { /* the mean absolute change of the scores */
			double change = 0;
			rc = starfa_insert_dense_map(dprev, STARFA_DENSE_ADD, -1.0f, 0.0f, dX, NULL);
			if (!rc)
				rc = starfa_reduce_dense(dprev, STARFA_REDUCE_ABS, &change);
			if (!rc && change <= tol * (double)(D * K))
				break;
		}
	}
	if (!rc)
		rc = starfa_dense_sync(dX);
	starfa_dense_free(dX);
	starfa_dense_free(dXQ);
	starfa_dense_free(dprev);
	starfa_dense_free(dL);
	starfa_vector_free(vL);
	free(Lc);
	free(XQ);
	free(prev);
	free(cl);
	int wrc = starfa_wait();
	if (iterations)
		*iterations = it;
	return rc ? rc : wrc;
}
