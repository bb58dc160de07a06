/* Latent Dirichlet allocation by variational Bayes, as SDDMM and SpMM task graphs (Blei, Ng & Jordan, JMLR
 * 2003; the batch and online updates of Hoffman, Blei & Bach, "Online learning for latent Dirichlet
 * allocation", NIPS 2010, which scikit-learn's LatentDirichletAllocation implements document by document;
 * the SDDMM form of BIDMach's LDA, Canny & Zhao, KDD 2013).
 *
 * Documents are the rows of S (counts), words its columns. Per document d a Dirichlet γ_d over the K
 * topics, per topic k a Dirichlet λ_k over the words; θ̃ = exp(E[log θ]) = exp(ψ(γ) - ψ(Σγ)) per
 * document, β̃ = exp(E[log β]) = exp(ψ(λ) - ψ(Σ_w λ)) per topic (kept words x K, a column per topic).
 * One E-step inner iteration, for every document at once:
 *   P = S ⊘ max(ε, SDDMM(θ̃, β̃))        the tokens over their normalizer Σ_k θ̃_dk β̃_kw
 *   γ = α + θ̃ ∘ (P·β̃)                   SpMM on the row side
 * each document until the mean absolute change of its γ is under inner-tol (or max-inner), as scikit-learn's
 * per-document loop: a converged document drops out of the remaining inner iterations (active-row
 * compaction: its rows cost the fused kernels nothing); then the M-step, from P of the final θ̃:
 *   λ = η + β̃ ∘ (Pᵀ·θ̃)                  SpMM on the transposed grid          (batch)
 *   λ = (1 - ρ) λ + ρ (η + (D / |B|) β̃ ∘ (P_Bᵀ·θ̃_B))  per mini-batch B of documents (online;
 *                                           ρ = (offset + t)^-decay at the t-th mini-batch)
 * Each E-step of training starts every document's γ at new draws near 1, of mean 1 and variance 0.01 as
 * scikit-learn's Gamma(100, 1/100) (uniform here, drawn in the graph: starfa_task_dense_uniform), or at
 * 1 (fresh: Hoffman et al.'s batch algorithm), or where the last pass left it (warm). Warm starts save
 * inner iterations but, with the per-document stopping rule, end the documents' ascent early: on sotu
 * and moby the bound after 15 passes was lower than from fresh starts. Inference starts at 1. Each E-step and M-step is a coordinate ascent step of
 * the evidence lower bound maximized over the per-token φ:
 *   L = Σ_nz s log(θ̃·β̃) + Σ_d [Σ_k (α - γ_dk) E[log θ_dk] + log Γ(γ_dk) - log Γ(α)] - log Γ(Σ_k γ_dk) + log Γ(Kα)]
 *       + Σ_k [Σ_w (η - λ_kw) E[log β_kw] + log Γ(λ_kw) - log Γ(η)] - log Γ(Σ_w λ_kw) + log Γ(Wη)]
 * (scikit-learn's _approx_bound), which never decreases in batch mode. It is computed in the graph:
 * one SDDMM and a reduction over the nonzeros, element-wise maps and sums over the dense blocks; only
 * the K topic totals pass through the host (their ψ and log Γ).
 *
 * The model (kind "topic"): user_factors = γ (documents x K), item_factors = λ (words x K), alpha = α,
 * lambda = η. θ_d = γ_d / Σγ_d and β_k = λ_k / Σ_w λ_kw are its proportions. Inference on new documents
 * (starfa_topic_infer) runs the same E-step with λ fixed; starfa_topic_perplexity the document
 * completion on held-out documents. */
#include "model/model.h"
#include "train/algorithms.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define LDA_EPS 1e-30f /* the floor of the normalizer θ̃·β̃ (float's smallest normal is 1.2e-38) */

struct lda_options {
	int64_t rank, iters, max_inner, tiles, seed, batch, eval_iters;
	double alpha, eta, inner_tol, tol, offset, decay;
	int online, start; /* start: an lda_start */
};

/* Where each E-step starts the documents' γ. */
enum lda_start {
	LDA_START_RANDOM = 0, /* uniform draws of mean 1 and variance 0.01 (scikit-learn's Gamma(100, 1/100)) */
	LDA_START_FRESH = 1,  /* 1 (Hoffman et al.'s batch algorithm) */
	LDA_START_WARM = 2    /* where the last pass left it */
};

/* Inner iterations of the E-step in flight: the host reads how many documents of iteration i go on once
 * iteration i + LDA_ESTEP_LAG - 1 is submitted, so that the workers never wait for its decision (and a
 * band may run ahead of another). The iterations submitted past the one where every document stopped
 * find no active row: they cost a few microseconds a task and change nothing. */
#define LDA_ESTEP_LAG 3

/* The document side: per document γ, E[log θ], θ̃, the SpMM output and scratch (documents x K), one
 * value per document (documents x 1) and whether its E-step goes on (1) or has converged (0); the
 * quotient P on the row grid; per band the count of documents still going. */
struct lda_docs {
	int64_t D, K;
	float *gamma, *elogt, *et, *g, *tmp, *row, *active;
	starfa_dense *dgamma, *delogt, *det, *dg, *dtmp, *drow, *dactive;
	starfa_sparse_values *P;
	starfa_sums *left[LDA_ESTEP_LAG]; /* inner iteration i's counts go to left[i % LDA_ESTEP_LAG] */
	double *slots;
};

/* The word side: λ, E[log β], β̃, the M-step's SpMM output and scratch (words x K), the topic totals. */
struct lda_words {
	int64_t W, K;
	float *lambda, *elogb, *bt, *sst, *tmp, *totals;
	starfa_dense *dlambda, *delogb, *dbt, *dsst, *dtmp;
	starfa_vector *vtotals;
};

/* Step: a call that must succeed. */
#define TRY(call)                                                                                          \
	do {                                                                                               \
		int rc_ = (call);                                                                          \
		if (rc_)                                                                                   \
			return rc_;                                                                        \
	} while (0)

static void docs_free(struct lda_docs *d)
{
	starfa_dense_free(d->dgamma);
	starfa_dense_free(d->delogt);
	starfa_dense_free(d->det);
	starfa_dense_free(d->dg);
	starfa_dense_free(d->dtmp);
	starfa_dense_free(d->drow);
	starfa_dense_free(d->dactive);
	starfa_sparse_values_free(d->P);
	for (int i = 0; i < LDA_ESTEP_LAG; i++)
		starfa_sums_free(d->left[i]);
	free(d->gamma);
	free(d->elogt);
	free(d->et);
	free(d->g);
	free(d->tmp);
	free(d->row);
	free(d->active);
	free(d->slots);
	memset(d, 0, sizeof *d);
}

/* The document side on S's row bands, γ from `gamma0` (documents x K; NULL: every entry `fill`). */
static int docs_create(const starfa_tiled *S, int64_t K, const float *gamma0, float fill, struct lda_docs *d)
{
	const int64_t D = starfa_tiled_nrows(S), n = D * K, bands = starfa_tiled_row_tiles(S);
	memset(d, 0, sizeof *d);
	d->D = D;
	d->K = K;
	d->gamma = starfa_malloc((size_t)n, sizeof(float));
	d->elogt = starfa_malloc((size_t)n, sizeof(float));
	d->et = starfa_malloc((size_t)n, sizeof(float));
	d->g = starfa_malloc((size_t)n, sizeof(float));
	d->tmp = starfa_malloc((size_t)n, sizeof(float));
	d->row = starfa_malloc((size_t)D, sizeof(float));
	d->active = starfa_malloc((size_t)D, sizeof(float));
	d->slots = starfa_malloc((size_t)bands, sizeof(double));
	if (!d->gamma || !d->elogt || !d->et || !d->g || !d->tmp || !d->row || !d->active || !d->slots)
		return STARFA_ENOMEM;
	for (int64_t e = 0; e < n; e++)
		d->gamma[e] = gamma0 ? gamma0[e] : fill;
	TRY(starfa_dense_create(S, STARFA_ROWS, d->gamma, K, &d->dgamma));
	TRY(starfa_dense_create(S, STARFA_ROWS, d->elogt, K, &d->delogt));
	TRY(starfa_dense_create(S, STARFA_ROWS, d->et, K, &d->det));
	TRY(starfa_dense_create(S, STARFA_ROWS, d->g, K, &d->dg));
	TRY(starfa_dense_create(S, STARFA_ROWS, d->tmp, K, &d->dtmp));
	TRY(starfa_dense_create(S, STARFA_ROWS, d->row, 1, &d->drow));
	TRY(starfa_dense_create(S, STARFA_ROWS, d->active, 1, &d->dactive));
	TRY(starfa_sparse_values_create(S, STARFA_ROWS, &d->P));
	for (int i = 0; i < LDA_ESTEP_LAG; i++)
		TRY(starfa_sums_create(bands, &d->left[i]));
	return 0;
}

static void words_free(struct lda_words *w)
{
	starfa_dense_free(w->dlambda);
	starfa_dense_free(w->delogb);
	starfa_dense_free(w->dbt);
	starfa_dense_free(w->dsst);
	starfa_dense_free(w->dtmp);
	starfa_vector_free(w->vtotals);
	free(w->lambda);
	free(w->elogb);
	free(w->bt);
	free(w->sst);
	free(w->tmp);
	free(w->totals);
	memset(w, 0, sizeof *w);
}

/* The word side on S's column bands, λ from lambda0 (words x K). with_mstep: also the M-step's buffers. */
static int words_create(const starfa_tiled *S, int64_t K, const float *lambda0, int with_mstep, struct lda_words *w)
{
	const int64_t W = starfa_tiled_ncols(S), n = W * K;
	memset(w, 0, sizeof *w);
	w->W = W;
	w->K = K;
	w->lambda = starfa_malloc((size_t)n, sizeof(float));
	w->elogb = starfa_malloc((size_t)n, sizeof(float));
	w->bt = starfa_malloc((size_t)n, sizeof(float));
	w->totals = starfa_malloc((size_t)K, sizeof(float));
	if (with_mstep) {
		w->sst = starfa_malloc((size_t)n, sizeof(float));
		w->tmp = starfa_malloc((size_t)n, sizeof(float));
	}
	if (!w->lambda || !w->elogb || !w->bt || !w->totals || (with_mstep && (!w->sst || !w->tmp)))
		return STARFA_ENOMEM;
	memcpy(w->lambda, lambda0, sizeof(float) * (size_t)n);
	TRY(starfa_dense_create(S, STARFA_COLS, w->lambda, K, &w->dlambda));
	TRY(starfa_dense_create(S, STARFA_COLS, w->elogb, K, &w->delogb));
	TRY(starfa_dense_create(S, STARFA_COLS, w->bt, K, &w->dbt));
	if (with_mstep) {
		TRY(starfa_dense_create(S, STARFA_COLS, w->sst, K, &w->dsst));
		TRY(starfa_dense_create(S, STARFA_COLS, w->tmp, K, &w->dtmp));
	}
	return starfa_vector_create(K, &w->vtotals);
}

/* E[log β] and β̃ from λ: the topic totals Σ_w λ_kw come to the host for their ψ (K values). Leaves the
 * totals in w->totals. */
static int words_expectations(struct lda_words *w)
{
	TRY(starfa_insert_dense_colsum(w->dlambda, w->vtotals));
	TRY(starfa_vector_read(w->vtotals, w->totals));
	float *neg = starfa_malloc((size_t)w->K, sizeof(float));
	if (!neg)
		return STARFA_ENOMEM;
	for (int64_t k = 0; k < w->K; k++)
		neg[k] = (float)-starfa_digamma(w->totals[k]);
	int rc = starfa_vector_write(w->vtotals, neg);
	free(neg);
	TRY(rc);
	TRY(starfa_insert_dense_map(w->delogb, STARFA_DENSE_COPY, 0, 0, w->dlambda, NULL));
	TRY(starfa_insert_dense_map(w->delogb, STARFA_DENSE_DIGAMMA, 0, 0, NULL, NULL));
	TRY(starfa_insert_dense_map(w->delogb, STARFA_DENSE_ADD, 1.0f, 0, NULL, w->vtotals));
	TRY(starfa_insert_dense_map(w->dbt, STARFA_DENSE_COPY, 0, 0, w->delogb, NULL));
	return starfa_insert_dense_map(w->dbt, STARFA_DENSE_EXP, 0, 0, NULL, NULL);
}

/* E[log θ] and θ̃ of band b's documents from their γ. */
static int docs_expectations(struct lda_docs *d, int64_t b)
{
	TRY(starfa_task_dense_map(d->delogt, b, STARFA_DENSE_COPY, 0, 0, d->dgamma, NULL, NULL));
	TRY(starfa_task_dense_map(d->delogt, b, STARFA_DENSE_DIGAMMA, 0, 0, NULL, NULL, NULL));
	TRY(starfa_task_dense_rowsum(d->dgamma, b, d->drow, NULL));
	TRY(starfa_task_dense_map(d->drow, b, STARFA_DENSE_DIGAMMA, 0, 0, NULL, NULL, NULL));
	TRY(starfa_task_dense_map(d->delogt, b, STARFA_DENSE_ADD, -1.0f, 0, d->drow, NULL, NULL));
	TRY(starfa_task_dense_map(d->det, b, STARFA_DENSE_COPY, 0, 0, d->delogt, NULL, NULL));
	return starfa_task_dense_map(d->det, b, STARFA_DENSE_EXP, 0, 0, NULL, NULL, NULL);
}

/* P = SDDMM(θ̃, β̃) on band b's tiles (raw: the normalizers). */
static int band_normalizers(const starfa_tiled *S, struct lda_docs *d, const starfa_dense *bt, int64_t b)
{
	for (int64_t j = 0; j < starfa_tiled_col_tiles(S); j++)
		TRY(starfa_task_sddmm(S, b, j, d->det, bt, STARFA_SDDMM_PATTERN, 1.0f, 0.0f, d->P, NULL));
	return 0;
}

/* P = S ⊘ max(ε, P) on band b's tiles. */
static int band_quotient(const starfa_tiled *S, struct lda_docs *d, int64_t b)
{
	for (int64_t j = 0; j < starfa_tiled_col_tiles(S); j++)
		TRY(starfa_task_values_map(d->P, b, j, STARFA_VALUES_QUOTIENT, LDA_EPS, 0.0f, NULL, NULL));
	return 0;
}

/* Whether every document of bands [b0, b1) had stopped after inner iteration `it` (waits for it). */
static int estep_stopped(struct lda_docs *d, int64_t it, int64_t b0, int64_t b1, int *all_stopped)
{
	TRY(starfa_sums_read_slots(d->left[it % LDA_ESTEP_LAG], b0, b1 - b0, d->slots));
	double left = 0;
	for (int64_t b = 0; b < b1 - b0; b++)
		left += d->slots[b];
	if (!isfinite(left))
		return starfa_set_error(STARFA_ERUNTIME, "LDA's E-step produced a non-finite gamma");
	*all_stopped = left == 0;
	return 0;
}

/* The E-step on the documents of bands [b0, b1) with β̃ fixed: inner iterations, each document until the
 * mean absolute change of its γ is under tol (scikit-learn's mean_change_tol; 0: exactly max_inner of
 * them), or until max_inner. An inner iteration is, a band, P·β̃ with P = S ⊘ max(ε, SDDMM(θ̃, β̃)) as one
 * fused task (starfa_task_sddmm_spmm_band: the normalizers never go to memory), then one Dirichlet step
 * (γ, E[log θ], θ̃ and whether the document goes on); both skip the documents that have converged. *ran
 * gets the count of inner iterations. */
static int estep(const starfa_tiled *S, struct lda_docs *d, const starfa_dense *bt, float alpha, int64_t b0,
		 int64_t b1, int64_t max_inner, double tol, int64_t *ran)
{
	for (int64_t b = b0; b < b1; b++)
		TRY(starfa_task_dense_map(d->dactive, b, STARFA_DENSE_SET, 1.0f, 0, NULL, NULL, NULL));
	int64_t it = 0, checked = 0; /* iterations submitted; iterations whose counts were read */
	while (it < max_inner) {
		for (int64_t b = b0; b < b1; b++) {
			TRY(starfa_insert_sddmm_spmm_band(S, STARFA_ROWS, b, d->det, bt, STARFA_FUSED_QUOTIENT, LDA_EPS,
							  d->dactive, d->dg));
			TRY(starfa_task_dense_dirichlet(d->dgamma, d->delogt, d->det, d->dg, d->dactive, alpha, (float)tol,
							d->left[it % LDA_ESTEP_LAG], b, b, NULL));
		}
		it++;
		/* Iteration `checked` is read before iteration checked + LDA_ESTEP_LAG reuses its slots. */
		int all_stopped = 0;
		if (tol > 0 && it - checked == LDA_ESTEP_LAG)
			TRY(estep_stopped(d, checked++, b0, b1, &all_stopped));
		if (all_stopped) {
			*ran = checked;
			return 0;
		}
	}
	for (int all_stopped = 0; tol > 0 && checked < it;) {
		TRY(estep_stopped(d, checked++, b0, b1, &all_stopped));
		if (all_stopped) {
			*ran = checked;
			return 0;
		}
	}
	*ran = it;
	return 0;
}

/* Σ over a dense of (prior - x) E[log x] + log Γ(x), and Σ over its row sums r of log Γ(r) (rows: the
 * documents' γ) or of the given totals' log Γ (the topics' λ, whose totals run along the columns):
 * a Dirichlet side's part of the bound, less its prior's constants. */
static int dirichlet_part(starfa_dense *x, starfa_dense *elog, starfa_dense *scratch, starfa_dense *scratch2,
			  float prior, double *out)
{
	double sum = 0;
	TRY(starfa_insert_dense_map(scratch2, STARFA_DENSE_COPY, 0, 0, x, NULL));
	TRY(starfa_insert_dense_map(scratch2, STARFA_DENSE_LGAMMA, 0, 0, NULL, NULL));
	TRY(starfa_insert_dense_map(scratch, STARFA_DENSE_COPY, 0, 0, x, NULL));
	TRY(starfa_insert_dense_map(scratch, STARFA_DENSE_SCALE, -1.0f, prior, NULL, NULL));
	TRY(starfa_insert_dense_map(scratch, STARFA_DENSE_MUL, 0, 0, elog, NULL));
	TRY(starfa_insert_dense_map(scratch, STARFA_DENSE_ADD, 1.0f, 0, scratch2, NULL));
	TRY(starfa_reduce_dense(scratch, STARFA_REDUCE_SUM, &sum));
	*out = sum;
	return 0;
}

/* The evidence lower bound of documents d and topics w on S. Leaves P = SDDMM(θ̃, β̃). */
static int bound(const starfa_tiled *S, struct lda_docs *d, struct lda_words *w, double alpha, double eta,
		 double *out)
{
	const double K = (double)d->K, D = (double)d->D, W = (double)w->W;
	double words = 0, docs = 0, topics = 0, rowsums = 0;
	TRY(starfa_insert_sddmm(S, d->det, w->dbt, STARFA_SDDMM_PATTERN, d->P));
	TRY(starfa_reduce_values(d->P, STARFA_REDUCE_XLOGY, LDA_EPS, NULL, &words));
	/* documents: Σ (α - γ) E[log θ] + log Γ(γ), less Σ_d log Γ(Σ_k γ_dk) */
	TRY(dirichlet_part(d->dgamma, d->delogt, d->dtmp, d->dg, (float)alpha, &docs));
	TRY(starfa_insert_dense_rowsum(d->dgamma, d->drow));
	TRY(starfa_insert_dense_map(d->drow, STARFA_DENSE_LGAMMA, 0, 0, NULL, NULL));
	TRY(starfa_reduce_dense(d->drow, STARFA_REDUCE_SUM, &rowsums));
	docs += D * (starfa_lgamma(K * alpha) - K * starfa_lgamma(alpha)) - rowsums;
	/* topics: the same over λ, the totals known from words_expectations */
	TRY(dirichlet_part(w->dlambda, w->delogb, w->dtmp, w->dsst, (float)eta, &topics));
	for (int64_t k = 0; k < w->K; k++)
		topics -= starfa_lgamma(w->totals[k]);
	topics += K * (starfa_lgamma(W * eta) - W * starfa_lgamma(eta));
	*out = words + docs + topics;
	return 0;
}

/* ------------------------------------------------------------------ the algorithm */

struct lda {
	struct lda_options o;
	const starfa_coo *coo;
	starfa_csr *csr;
	starfa_tiled *S;
	int64_t D, W, K;
	double alpha, eta, tokens;
	struct lda_docs docs;
	struct lda_words words;
	starfa_sparse_values *PT;
	starfa_split split[2];
	int64_t inner_last; /* inner iterations of the last E-step (online: the most over the mini-batches) */
	int64_t updates;    /* online: mini-batches so far */
	double prev_bound;
	/* held-out documents (document completion), with their observed and evaluated halves */
	starfa_csr *test_obs, *test_eval;
	int64_t test_empty;
};

static void lda_defaults(void *params)
{
	struct lda_options *o = params;
	*o = (struct lda_options){.rank = 20,
				  .iters = 20,
				  .max_inner = 100, /* scikit-learn's max_doc_update_iter */
				  .tiles = 0,
				  .seed = 1,
				  .batch = 128, /* scikit-learn's batch_size */
				  .eval_iters = 100,
				  .alpha = 0, /* 0: 1 / rank, as scikit-learn's None */
				  .eta = 0,
				  .inner_tol = 1e-3, /* scikit-learn's mean_change_tol */
				  .tol = 0,
				  .offset = 10, /* scikit-learn's learning_offset */
				  .decay = 0.7, /* and learning_decay */
				  .online = 0};
}

static int lda_check(const void *params)
{
	const struct lda_options *o = params;
	if (o->rank < 1 || o->rank > 4096)
		return starfa_set_error(STARFA_EINVAL, "rank %lld outside [1, 4096]", (long long)o->rank);
	if (!(o->alpha >= 0) || !(o->eta >= 0) || !isfinite(o->alpha) || !isfinite(o->eta))
		return starfa_set_error(STARFA_EINVAL, "alpha and eta must be numbers > 0 (0: 1 / rank)");
	if (o->iters < 1 || o->max_inner < 1 || o->batch < 1 || o->eval_iters < 1)
		return starfa_set_error(STARFA_EINVAL, "iters, max-inner, batch and eval-iters must be >= 1");
	if (o->online && !(o->decay > 0.5 && o->decay <= 1.0))
		return starfa_set_error(STARFA_EINVAL, "decay must be in (0.5, 1] for the online updates to converge");
	return 0;
}

static int64_t lda_iterations(const void *params)
{
	return ((const struct lda_options *)params)->iters;
}

static void lda_free(void *state)
{
	struct lda *g = state;
	docs_free(&g->docs);
	words_free(&g->words);
	starfa_sparse_values_free(g->PT);
	starfa_tiled_free(g->S);
	starfa_csr_free(g->csr);
	starfa_csr_free(g->test_obs);
	starfa_csr_free(g->test_eval);
	free(g);
}

/* A start near 1 with a spread of about 0.1, as scikit-learn's Gamma(100, 1/100) draws. */
static float near_one(uint64_t *rng)
{
	return 1.0f + 0.17f * starfa_uniform_pm1(rng);
}

static int lda_setup(const starfa_coo *train, const starfa_coo *test, const void *params, void **state)
{
	struct lda *g = starfa_calloc(1, sizeof *g);
	if (!g)
		return STARFA_ENOMEM;
	*state = g;
	g->o = *(const struct lda_options *)params;
	g->coo = train;
	g->K = g->o.rank;
	g->alpha = g->o.alpha > 0 ? g->o.alpha : 1.0 / (double)g->K;
	g->eta = g->o.eta > 0 ? g->o.eta : 1.0 / (double)g->K;
	g->prev_bound = NAN;
	int rc = starfa_csr_from_coo(train, &g->csr);
	if (rc)
		return rc;
	const starfa_csr *c = g->csr;
	g->D = c->nrows;
	g->W = c->ncols;
	for (int64_t e = 0; e < c->nnz; e++) {
		if (!(c->val[e] >= 0) || !isfinite(c->val[e]))
			return starfa_set_error(STARFA_EINVAL, "LDA needs counts >= 0; training value %lld is %g", (long long)e,
						c->val[e]);
		g->tokens += c->val[e];
	}
	if (!(g->tokens > 0))
		return starfa_set_error(STARFA_EINVAL, "the corpus has no tokens");
	/* Bands: in batch mode as the planner says for an SDDMM sweep (the GPUs alone with GPUs, else one a
	 * worker); in online mode one row band a mini-batch: `batch` consecutive documents, the last
	 * mini-batch what is left (scikit-learn's gen_batches). */
	TRY(starfa_sweep_tiles(c, g->K, g->o.tiles, g->o.online ? g->o.batch : 0, g->split, &g->S));
	/* The start: λ and γ near 1 (a deterministic stream of the seed). */
	uint64_t rng = starfa_seed_stream((uint64_t)g->o.seed, 7);
	float *lambda0 = starfa_malloc((size_t)(g->W * g->K), sizeof(float)),
	      *gamma0 = starfa_malloc((size_t)(g->D * g->K), sizeof(float));
	if (!lambda0 || !gamma0) {
		free(lambda0);
		free(gamma0);
		return STARFA_ENOMEM;
	}
	for (int64_t e = 0; e < g->W * g->K; e++)
		lambda0[e] = near_one(&rng);
	for (int64_t e = 0; e < g->D * g->K; e++)
		gamma0[e] = near_one(&rng);
	rc = words_create(g->S, g->K, lambda0, 1, &g->words);
	if (!rc)
		rc = docs_create(g->S, g->K, gamma0, 0, &g->docs);
	free(lambda0);
	free(gamma0);
	TRY(rc);
	if (g->o.online) /* the batch M-step's quotient is fused into its SpMM */
		TRY(starfa_sparse_values_create(g->S, STARFA_COLS, &g->PT));
	TRY(words_expectations(&g->words));
	for (int64_t b = 0; b < starfa_tiled_row_tiles(g->S); b++)
		TRY(docs_expectations(&g->docs, b));
	if (test) {
		if (test->ncols > g->W)
			return starfa_set_error(STARFA_EINVAL, "the test documents have %lld words, the corpus %lld",
						(long long)test->ncols, (long long)g->W);
		starfa_csr *t = NULL;
		TRY(starfa_csr_from_coo(test, &t));
		rc = starfa_documents_split(t, &g->test_obs, &g->test_eval, &g->test_empty);
		starfa_csr_free(t);
		TRY(rc);
	}
	return starfa_wait();
}

/* The batch M-step: λ = η + β̃ ∘ (Pᵀ·θ̃) with P from the final θ̃, then E[log β] and β̃. */
static int mstep_batch(struct lda *g)
{
	struct lda_docs *d = &g->docs;
	struct lda_words *w = &g->words;
	/* Pᵀ·θ̃ on the transposed grid, P = S ⊘ max(ε, θ̃·β̃ᵀ) fused into it */
	TRY(starfa_insert_sddmm_spmm(g->S, STARFA_COLS, w->dbt, d->det, STARFA_FUSED_QUOTIENT, LDA_EPS, w->dsst));
	TRY(starfa_insert_dense_map(w->dlambda, STARFA_DENSE_COPY, 0, 0, w->dsst, NULL));
	TRY(starfa_insert_dense_map(w->dlambda, STARFA_DENSE_MUL, 0, 0, w->dbt, NULL));
	TRY(starfa_insert_dense_map(w->dlambda, STARFA_DENSE_SCALE, 1.0f, (float)g->eta, NULL, NULL));
	return words_expectations(w);
}

/* One online update from mini-batch b (row band b), its E-step done. */
static int mstep_online(struct lda *g, int64_t b)
{
	struct lda_docs *d = &g->docs;
	struct lda_words *w = &g->words;
	const int64_t *bounds = starfa_tiled_row_bounds(g->S);
	const double batch_docs = (double)(bounds[b + 1] - bounds[b]);
	const double rho = pow(g->o.offset + (double)++g->updates, -g->o.decay);
	TRY(band_normalizers(g->S, d, w->dbt, b));
	TRY(band_quotient(g->S, d, b));
	for (int64_t j = 0; j < starfa_tiled_col_tiles(g->S); j++) {
		TRY(starfa_task_values_transpose(d->P, b, j, g->PT, NULL));
		/* sst_j = (Sᵀ)_jb · θ̃_b: one tile, so it overwrites (an empty tile zeroes) */
		TRY(starfa_task_spmm(g->S, STARFA_COLS, j, b, g->PT, d->det, w->dsst, 0, NULL));
		TRY(starfa_task_dense_map(w->dsst, j, STARFA_DENSE_MUL, 0, 0, w->dbt, NULL, NULL));
		TRY(starfa_task_dense_map(w->dlambda, j, STARFA_DENSE_SCALE, (float)(1 - rho), (float)(rho * g->eta), NULL,
					  NULL, NULL));
		TRY(starfa_task_dense_map(w->dlambda, j, STARFA_DENSE_ADD, (float)(rho * (double)g->D / batch_docs), 0,
					  w->dsst, NULL, NULL));
	}
	return words_expectations(w);
}

/* Band b's documents start pass `pass`'s E-step (see enum lda_start): draws in 1 ± sqrt(3)/10 from a
 * stream of the seed and the pass, or 1, or as they are. */
static int estep_start(struct lda *g, int64_t pass, int64_t b)
{
	if (g->o.start == LDA_START_WARM)
		return 0;
	if (g->o.start == LDA_START_RANDOM) {
		const float half = 0.17320508f; /* sqrt(3) / 10: variance 0.01 */
		const uint64_t stream = (uint64_t)g->o.seed * 0x9E3779B97F4A7C15ull ^ (uint64_t)pass * 0xD1B54A32D192ED03ull;
		TRY(starfa_task_dense_uniform(g->docs.dgamma, b, 1.0f - half, 1.0f + half, stream, NULL));
	} else {
		TRY(starfa_task_dense_map(g->docs.dgamma, b, STARFA_DENSE_SET, 1.0f, 0, NULL, NULL, NULL));
	}
	return docs_expectations(&g->docs, b);
}

static int lda_iterate(void *state, int64_t iteration)
{
	struct lda *g = state;
	const int64_t bands = starfa_tiled_row_tiles(g->S);
	int64_t ran = 0;
	if (!g->o.online) {
		for (int64_t b = 0; b < bands; b++)
			TRY(estep_start(g, iteration, b));
		TRY(estep(g->S, &g->docs, g->words.dbt, (float)g->alpha, 0, bands, g->o.max_inner, g->o.inner_tol,
			  &ran));
		g->inner_last = ran;
		TRY(mstep_batch(g));
	} else {
		g->inner_last = 0;
		for (int64_t b = 0; b < bands; b++) {
			TRY(estep_start(g, iteration, b));
			TRY(estep(g->S, &g->docs, g->words.dbt, (float)g->alpha, b, b + 1, g->o.max_inner, g->o.inner_tol,
				  &ran));
			if (ran > g->inner_last)
				g->inner_last = ran;
			TRY(mstep_online(g, b));
		}
	}
	return starfa_wait();
}

static int lda_evaluate(void *state, starfa_train_progress *p)
{
	struct lda *g = state;
	p->row_tiles = starfa_tiled_row_tiles(g->S);
	p->col_tiles = starfa_tiled_col_tiles(g->S);
	p->split = g->split;
	double elbo = NAN;
	TRY(bound(g->S, &g->docs, &g->words, g->alpha, g->eta, &elbo));
	if (!isfinite(elbo))
		return starfa_set_error(STARFA_ERUNTIME, "LDA produced a non-finite bound in iteration %lld",
					(long long)p->iteration);
	p->converged = isfinite(g->prev_bound) && g->o.tol > 0 && fabs(elbo - g->prev_bound) <= g->o.tol * fabs(elbo);
	g->prev_bound = elbo;
	p->train_loss = -elbo / g->tokens;
	double test_perplexity = NAN;
	if (g->test_obs) {
		TRY(starfa_dense_sync(g->words.dlambda));
		const struct starfa_topic_source src = {STARFA_MODEL_TOPIC, g->words.lambda, g->W, g->K, g->alpha, 0};
		int64_t its = 0;
		TRY(starfa_documents_perplexity(&src, g->test_obs, g->test_eval, g->o.eval_iters, g->o.inner_tol,
						&test_perplexity, &its));
		p->has_test = 1;
		p->test.entries = g->test_eval->nnz;
	}
	starfa_progress_column(p, "elbo_per_token", 5, elbo / g->tokens);
	starfa_progress_column(p, "perplexity_bound", 2, exp(-elbo / g->tokens));
	starfa_progress_column(p, "inner", 0, (double)g->inner_last);
	starfa_progress_column(p, "test_perplexity", 2, test_perplexity);
	return 0;
}

static int lda_model(void *state, starfa_model **out)
{
	struct lda *g = state;
	TRY(starfa_dense_sync(g->docs.dgamma));
	TRY(starfa_dense_sync(g->words.dlambda));
	struct starfa_factors f = {
		.kind = STARFA_MODEL_TOPIC,
		.nusers = g->D,
		.nitems = g->W,
		.rank = g->K,
		.U = g->docs.gamma,
		.V = g->words.lambda,
		.ldu = g->K,
		.ldv = g->K,
	};
	starfa_csr *none = NULL; /* a topic model keeps no training entries */
	return starfa_model_from_factors(&f, "lda", g->coo, &none, g->eta, g->alpha, out);
}

#define LDA_FIELD(f) offsetof(struct lda_options, f)
static const starfa_param lda_params[] = {
	{"rank", STARFA_PARAM_INT64, LDA_FIELD(rank), 1, 4096, NULL, "topics K"},
	{"iters", STARFA_PARAM_INT64, LDA_FIELD(iters), 1, 100000, NULL, "passes over the corpus (E-step and M-step)"},
	{"mode", STARFA_PARAM_CHOICE, LDA_FIELD(online), 0, 1, "batch|online",
	 "batch: one M-step a pass; online: one a mini-batch of documents (Hoffman et al.)"},
	{"alpha", STARFA_PARAM_DOUBLE, LDA_FIELD(alpha), 0, 1e6, NULL, "document-topic prior (0: 1 / rank)"},
	{"eta", STARFA_PARAM_DOUBLE, LDA_FIELD(eta), 0, 1e6, NULL, "topic-word prior (0: 1 / rank)"},
	{"estep-start", STARFA_PARAM_CHOICE, LDA_FIELD(start), 0, 2, "random|fresh|warm",
	 "each pass's E-step starts the documents' gamma at new draws near 1 (random, as scikit-learn), at 1 (fresh, "
	 "as Hoffman et al.) or where the last pass left it (warm: fewer inner iterations, a lower bound)"},
	{"max-inner", STARFA_PARAM_INT64, LDA_FIELD(max_inner), 1, 100000, NULL, "most E-step iterations a pass"},
	{"inner-tol", STARFA_PARAM_DOUBLE, LDA_FIELD(inner_tol), 0, 1e6, NULL,
	 "a document's E-step stops when the mean absolute change of its gamma is under this (0: max-inner)"},
	{"batch", STARFA_PARAM_INT64, LDA_FIELD(batch), 1, 1 << 30, NULL, "online: documents a mini-batch"},
	{"offset", STARFA_PARAM_DOUBLE, LDA_FIELD(offset), 0, 1e9, NULL, "online: learning offset tau0"},
	{"decay", STARFA_PARAM_DOUBLE, LDA_FIELD(decay), 0.5, 1, NULL, "online: learning decay kappa, in (0.5, 1]"},
	{"tol", STARFA_PARAM_DOUBLE, LDA_FIELD(tol), 0, 1, NULL,
	 "stop when the bound's relative change is under this (0: run every pass)"},
	{"eval-iters", STARFA_PARAM_INT64, LDA_FIELD(eval_iters), 1, 100000, NULL,
	 "most E-step iterations inferring the test documents' mixtures"},
	{"tiles", STARFA_PARAM_INT64, LDA_FIELD(tiles), 0, 1 << 16, NULL, "bands a side (0: planned)"},
	{"seed", STARFA_PARAM_INT64, LDA_FIELD(seed), 0, 9.2e18, NULL, "seed of the start"},
	{NULL, 0, 0, 0, 0, NULL, NULL},
};

const starfa_algorithm starfa_algorithm_lda = {
	.name = "lda",
	.summary = "latent Dirichlet allocation by variational Bayes (batch or online) on a bag-of-words corpus",
	.kind = STARFA_MODEL_TOPIC,
	.params_size = sizeof(struct lda_options),
	.params = lda_params,
	.defaults = lda_defaults,
	.check = lda_check,
	.iterations = lda_iterations,
	.setup = lda_setup,
	.iterate = lda_iterate,
	.evaluate = lda_evaluate,
	.model = lda_model,
	.free = lda_free,
};

/* ------------------------------------------------------------------ inference with the topics fixed */

/* γ of every document of S (documents x K, starting from 1) by the E-step with λ fixed. */
static int infer_gamma(const starfa_tiled *S, const float *lambda, int64_t K, double alpha, int64_t max_iters,
		       double tol, float *gamma, int64_t *iterations)
{
	struct lda_docs d;
	struct lda_words w;
	int rc = words_create(S, K, lambda, 0, &w);
	if (!rc)
		rc = docs_create(S, K, NULL, 1.0f, &d); /* scikit-learn's transform starts near 1 too */
	else
		memset(&d, 0, sizeof d);
	if (!rc)
		rc = words_expectations(&w);
	for (int64_t b = 0; !rc && b < starfa_tiled_row_tiles(S); b++)
		rc = docs_expectations(&d, b);
	if (!rc)
		rc = estep(S, &d, w.dbt, (float)alpha, 0, starfa_tiled_row_tiles(S), max_iters, tol, iterations);
	if (!rc)
		rc = starfa_dense_sync(d.dgamma);
	if (!rc)
		memcpy(gamma, d.gamma, sizeof(float) * (size_t)(d.D * K));
	docs_free(&d);
	words_free(&w);
	int wrc = starfa_wait();
	return rc ? rc : wrc;
}

/* S as tiles for inference, its columns the model's words. */
static int inference_tiles(const starfa_csr *docs, int64_t W, starfa_tiled **out)
{
	if (docs->ncols > W)
		return starfa_set_error(STARFA_EINVAL, "the documents have %lld words, the model %lld", (long long)docs->ncols,
					(long long)W);
	starfa_csr wide = *docs;
	wide.ncols = W; /* the same arrays, the model's vocabulary */
	int workers = starfa_worker_count(STARFA_WORKER_CPU) + starfa_worker_count(STARFA_WORKER_CUDA);
	int64_t P = workers > 0 ? workers : 1;
	starfa_tiling_options tiling = {P < docs->nrows ? P : (docs->nrows > 0 ? docs->nrows : 1), 1, 0, 0, 0};
	return starfa_tiled_create(&wide, &tiling, out);
}

/* Each document's topic weights w (documents x K, θ_d = w_d / Σ w_d) from S (c's tiles) with the topics
 * fixed: LDA's γ by its E-step, or a count model's scores times the topics' totals (x_dk colsum(Λ)_k). */
static int infer_weights(const struct starfa_topic_source *src, const starfa_tiled *S, const starfa_csr *c,
			 int64_t max_iters, double tol, float *w, int64_t *iterations)
{
	const int64_t K = src->K, D = c->nrows;
	if (src->kind == STARFA_MODEL_TOPIC)
		return infer_gamma(S, src->words, K, src->prior, max_iters, tol, w, iterations);
	TRY(starfa_gap_infer(S, c, src->words, K, src->prior, src->rate, max_iters, tol, w, iterations));
	double *totals = starfa_calloc((size_t)K, sizeof(double));
	if (!totals)
		return STARFA_ENOMEM;
	for (int64_t v = 0; v < src->W; v++)
		for (int64_t k = 0; k < K; k++)
			totals[k] += src->words[v * K + k];
	for (int64_t d = 0; d < D; d++)
		for (int64_t k = 0; k < K; k++)
			w[d * K + k] = (float)(w[d * K + k] * totals[k]);
	free(totals);
	return 0;
}

/* Weights to proportions, row by row; a row of zeros (a count model's empty document) gets 1 / K each. */
static void normalize_rows(float *w, int64_t D, int64_t K)
{
	for (int64_t d = 0; d < D; d++) {
		double total = 0;
		for (int64_t k = 0; k < K; k++)
			total += w[d * K + k];
		for (int64_t k = 0; k < K; k++)
			w[d * K + k] = total > 0 ? (float)(w[d * K + k] / total) : (float)(1.0 / (double)K);
	}
}

int starfa_documents_perplexity(const struct starfa_topic_source *src, const starfa_csr *observed,
				const starfa_csr *evaluated, int64_t max_iters, double tol, double *perplexity,
				int64_t *iterations)
{
	const int64_t D = observed->nrows, K = src->K, W = src->W;
	float *theta = starfa_malloc((size_t)(D * K), sizeof(float)), *beta = starfa_malloc((size_t)(W * K), sizeof(float));
	starfa_tiled *S = NULL, *E = NULL;
	int rc = !theta || !beta ? STARFA_ENOMEM : 0;
	if (!rc)
		rc = inference_tiles(observed, W, &S);
	if (!rc)
		rc = infer_weights(src, S, observed, max_iters, tol, theta, iterations);
	starfa_tiled_free(S);
	if (!rc)
		normalize_rows(theta, D, K);
	double tokens = 0, loglik = 0;
	for (int64_t e = 0; e < evaluated->nnz; e++)
		tokens += evaluated->val[e];
	/* log(θ_d·β_w) summed over the evaluated tokens, in the graph: β = λ / Σ_w λ */
	starfa_dense *dtheta = NULL, *dbeta = NULL;
	starfa_vector *vt = NULL;
	starfa_sparse_values *P = NULL;
	if (!rc && tokens > 0) {
		memcpy(beta, src->words, sizeof(float) * (size_t)(W * K));
		rc = inference_tiles(evaluated, W, &E);
		if (!rc)
			rc = starfa_dense_create(E, STARFA_ROWS, theta, K, &dtheta);
		if (!rc)
			rc = starfa_dense_create(E, STARFA_COLS, beta, K, &dbeta);
		if (!rc)
			rc = starfa_vector_create(K, &vt);
		if (!rc)
			rc = starfa_sparse_values_create(E, STARFA_ROWS, &P);
		if (!rc)
			rc = starfa_insert_dense_colsum(dbeta, vt);
		if (!rc)
			rc = starfa_insert_dense_map(dbeta, STARFA_DENSE_DIV, LDA_EPS, 0, NULL, vt);
		if (!rc)
			rc = starfa_insert_sddmm(E, dtheta, dbeta, STARFA_SDDMM_PATTERN, P);
		if (!rc)
			rc = starfa_reduce_values(P, STARFA_REDUCE_XLOGY, LDA_EPS, NULL, &loglik);
	}
	starfa_sparse_values_free(P);
	starfa_vector_free(vt);
	starfa_dense_free(dtheta);
	starfa_dense_free(dbeta);
	starfa_tiled_free(E);
	free(theta);
	free(beta);
	if (rc)
		return rc;
	*perplexity = tokens > 0 ? exp(-loglik / tokens) : NAN;
	return 0;
}

/* Documents' halves for document completion (train/algorithms.h). */
int starfa_documents_split(const starfa_csr *docs, starfa_csr **observed, starfa_csr **evaluated, int64_t *empty)
{
	int64_t sizes[2] = {0, 0};
	for (int64_t r = 0; r < docs->nrows; r++) {
		const int64_t n = docs->rowptr[r + 1] - docs->rowptr[r];
		sizes[0] += (n + 1) / 2;
		sizes[1] += n / 2;
	}
	starfa_coo *half[2] = {starfa_coo_new(docs->nrows, docs->ncols, sizes[0]),
			       starfa_coo_new(docs->nrows, docs->ncols, sizes[1])};
	int rc = !half[0] || !half[1] ? STARFA_ENOMEM : 0;
	*empty = 0;
	for (int64_t r = 0; !rc && r < docs->nrows; r++) {
		*empty += docs->rowptr[r + 1] == docs->rowptr[r];
		for (int64_t e = docs->rowptr[r]; e < docs->rowptr[r + 1]; e++) { /* columns sorted in a CSR row */
			starfa_coo *h = half[(e - docs->rowptr[r]) & 1];
			h->row[h->nnz] = (int32_t)r;
			h->col[h->nnz] = docs->colind[e];
			h->val[h->nnz++] = docs->val[e];
		}
	}
	*observed = *evaluated = NULL;
	if (!rc)
		rc = starfa_csr_from_coo(half[0], observed);
	if (!rc)
		rc = starfa_csr_from_coo(half[1], evaluated);
	starfa_coo_free(half[0]);
	starfa_coo_free(half[1]);
	if (rc) {
		starfa_csr_free(*observed);
		*observed = NULL;
	}
	return rc;
}

/* ------------------------------------------------------------------ the public topic-model calls */

void starfa_topic_options_default(starfa_topic_options *o)
{
	o->max_iters = 100;
	o->tol = 1e-3;
}

static int check_topic_model(const starfa_model *m, const char *what)
{
	if (!m || !m->item_factors || !m->user_factors || m->rank < 1)
		return starfa_set_error(STARFA_EINVAL, "%s: no model", what);
	if (m->kind != STARFA_MODEL_TOPIC && m->kind != STARFA_MODEL_NONNEG)
		return starfa_set_error(STARFA_EINVAL,
					"%s needs a topic model or a count model (starfa train --algo lda, gap or klnmf); this "
					"one is %s (%s)",
					what, starfa_model_kind_name(m->kind), m->algorithm);
	if (m->kind == STARFA_MODEL_TOPIC && !(m->alpha > 0))
		return starfa_set_error(STARFA_EINVAL, "%s: the model's document-topic prior alpha is %g, not > 0", what,
					m->alpha);
	if (m->kind == STARFA_MODEL_NONNEG && (!(m->alpha >= 1) || !(m->lambda >= 0)))
		return starfa_set_error(STARFA_EINVAL, "%s: the model's prior (shape %g, rate %g) needs shape >= 1, rate >= 0",
					what, m->alpha, m->lambda);
	const int64_t n = m->nitems * m->rank;
	for (int64_t i = 0; i < n; i++)
		if (!(m->item_factors[i] >= 0) || !isfinite(m->item_factors[i]))
			return starfa_set_error(STARFA_EINVAL, "%s: word %lld's weight in topic %lld is %g, not a number >= 0",
						what, (long long)(i / m->rank) + 1, (long long)(i % m->rank) + 1,
						m->item_factors[i]);
	return 0;
}

int starfa_topic_infer(const starfa_model *m, const starfa_coo *docs, const starfa_topic_options *o, float *theta,
		       int64_t *iterations)
{
	TRY(check_topic_model(m, "starfa_topic_infer"));
	if (!docs || !theta)
		return starfa_set_error(STARFA_EINVAL, "starfa_topic_infer: missing documents or output");
	starfa_topic_options defaults;
	starfa_topic_options_default(&defaults);
	if (!o)
		o = &defaults;
	if (o->max_iters < 1 || !(o->tol >= 0))
		return starfa_set_error(STARFA_EINVAL, "starfa_topic_infer: max_iters must be >= 1 and tol >= 0");
	const int64_t K = m->rank, D = docs->nrows;
	int64_t its = 0;
	if (D == 0) {
		if (iterations)
			*iterations = 0;
		return 0;
	}
	starfa_csr *c = NULL;
	starfa_tiled *S = NULL;
	int rc = starfa_csr_from_coo(docs, &c);
	if (!rc)
		rc = inference_tiles(c, m->nitems, &S);
	const struct starfa_topic_source src = {m->kind, m->item_factors, m->nitems, K, m->alpha, m->lambda};
	if (!rc)
		rc = infer_weights(&src, S, c, o->max_iters, o->tol, theta, &its);
	starfa_tiled_free(S);
	starfa_csr_free(c);
	if (rc)
		return rc;
	normalize_rows(theta, D, K);
	if (iterations)
		*iterations = its;
	return 0;
}

int starfa_topic_perplexity(const starfa_model *m, const starfa_coo *test, const starfa_topic_options *o,
			    starfa_perplexity *out)
{
	TRY(check_topic_model(m, "starfa_topic_perplexity"));
	if (!test || !out)
		return starfa_set_error(STARFA_EINVAL, "starfa_topic_perplexity: missing test documents or output");
	starfa_topic_options defaults;
	starfa_topic_options_default(&defaults);
	if (!o)
		o = &defaults;
	memset(out, 0, sizeof *out);
	out->perplexity = NAN;
	out->documents = test->nrows;
	if (test->ncols > m->nitems)
		return starfa_set_error(STARFA_EINVAL, "the test documents have %lld words, the model %lld",
					(long long)test->ncols, (long long)m->nitems);
	starfa_csr *c = NULL, *obs = NULL, *ev = NULL;
	int rc = starfa_csr_from_coo(test, &c);
	if (!rc)
		rc = starfa_documents_split(c, &obs, &ev, &out->empty);
	starfa_csr_free(c);
	if (!rc) {
		for (int64_t e = 0; e < obs->nnz; e++)
			out->observed_tokens += (int64_t)llround(obs->val[e]);
		for (int64_t e = 0; e < ev->nnz; e++)
			out->evaluated_tokens += (int64_t)llround(ev->val[e]);
	}
	const struct starfa_topic_source src = {m->kind, m->item_factors, m->nitems, m->rank, m->alpha, m->lambda};
	if (!rc && test->nrows > 0)
		rc = starfa_documents_perplexity(&src, obs, ev, o->max_iters, o->tol, &out->perplexity, &out->iterations);
	starfa_csr_free(obs);
	starfa_csr_free(ev);
	return rc;
}
