/* The algorithm table: `starfa train --algo NAME` and starfa_algorithm_find look here. A new
 * algorithm is a file in graphs/ that defines its starfa_algorithm, and one row below. */
#include "runtime/internal.h"
#include "train/algorithms.h"
#include "model/model.h"
#include "storage/coo.h"

#include <math.h>
#include <string.h>

static const starfa_algorithm *const table[] = {
	&starfa_algorithm_als,
	&starfa_algorithm_ials,
	&starfa_algorithm_sgd,
	&starfa_algorithm_ccd,
	&starfa_algorithm_sfa,
	&starfa_algorithm_lda,
	&starfa_algorithm_gap,
	&starfa_algorithm_klnmf,
	NULL,
};

const starfa_algorithm *const *starfa_algorithms(void)
{
	return table;
}

const starfa_algorithm *starfa_algorithm_find(const char *name)
{
	for (int i = 0; name && table[i]; i++)
		if (strcmp(table[i]->name, name) == 0)
			return table[i];
	return NULL;
}

int starfa_sweep_tiles(const starfa_csr *c, int64_t k, int64_t tiles, int64_t row_band, starfa_split split[2],
		       starfa_tiled **out)
{
	starfa_tiling_options tiling = {tiles, tiles, 1, 0, 0};
	if (tiles == 0) {
		const double sweep = (double)c->nnz * (double)k;
		int rc = starfa_plan_tiling("sddmm", sweep, sweep, 2, &tiling, split);
		if (rc)
			return rc;
		if (!tiling.placed) {
			int workers = starfa_worker_count(STARFA_WORKER_CPU) + starfa_worker_count(STARFA_WORKER_CUDA);
			tiling.row_tiles = tiling.col_tiles = workers > 0 ? workers : 1;
		}
	}
	if (row_band > 0) {
		tiling.row_band = row_band;
		tiling.placed = tiling.placed && tiling.cpu_bands == 0; /* the GPUs alone, or StarPU places */
	}
	if (tiling.row_tiles > c->nrows)
		tiling.row_tiles = c->nrows;
	if (tiling.col_tiles > c->ncols)
		tiling.col_tiles = c->ncols;
	if (tiling.row_tiles < 1 || tiling.col_tiles < 1)
		tiling.row_tiles = tiling.col_tiles = 1;
	if (tiling.placed && tiling.cpu_bands > 0 && (tiling.row_tiles <= tiling.cpu_bands || tiling.col_tiles <= tiling.cpu_bands))
		tiling.placed = 0; /* a tiny matrix: no bands to place */
	return starfa_tiled_create(c, &tiling, out);
}

#define NORM_CHUNKS 64

struct norm_ctx {
	const float *F, *weight;
	int64_t ld, col0, k, weight_stride;
	double part[NORM_CHUNKS];
};

static void norm_chunk(void *arg, int64_t chunk, int64_t begin, int64_t end)
{
	struct norm_ctx *c = arg;
	double sum = 0;
	for (int64_t r = begin; r < end; r++) {
		const float *row = c->F + r * c->ld + c->col0;
		double norm = 0;
		for (int64_t d = 0; d < c->k; d++)
			norm += (double)row[d] * row[d];
		sum += (c->weight ? (double)c->weight[r * c->weight_stride] : 1.0) * norm;
	}
	c->part[chunk] = sum;
}

/* fn over n items in NORM_CHUNKS chunks, each writing its part[chunk], then the parts added in chunk
 * order (the same bits on any threads). */
static int chunk_sum(int64_t n, starfa_chunk_fn fn, void *ctx, const double *part, double *out)
{
	*out = 0;
	int rc = starfa_host_parallel(n, NORM_CHUNKS, fn, ctx);
	if (rc)
		return rc;
	double sum = 0;
	for (int i = 0; i < NORM_CHUNKS; i++) /* chunks past n stay 0 */
		sum += part[i];
	*out = sum;
	return 0;
}

int starfa_row_norms(const float *F, int64_t rows, int64_t ld, int64_t col0, int64_t k, const float *weight,
		     int64_t weight_stride, double scale, double *out)
{
	struct norm_ctx c = {F, weight, ld, col0, k, weight_stride, {0}};
	int rc = chunk_sum(rows, norm_chunk, &c, c.part, out);
	*out *= scale;
	return rc;
}

struct colnorm_ctx {
	const float *F, *weight;
	int64_t nrows, len, skip;
	double part[NORM_CHUNKS];
};

static void colnorm_chunk(void *arg, int64_t chunk, int64_t begin, int64_t end)
{
	struct colnorm_ctx *c = arg;
	double sum = 0;
	for (int64_t t = 0; t < c->nrows; t++) {
		if (t == c->skip)
			continue;
		const float *row = c->F + t * c->len;
		for (int64_t r = begin; r < end; r++)
			sum += (double)c->weight[r] * row[r] * row[r];
	}
	c->part[chunk] = sum;
}

int starfa_column_norms(const float *F, int64_t nrows, int64_t len, int64_t skip, const float *weight, double *out)
{
	struct colnorm_ctx c = {F, weight, nrows, len, skip, {0}};
	return chunk_sum(len, colnorm_chunk, &c, c.part, out);
}

struct starfa_ranker {
	int64_t k, nlists;
	float *active_data;  /* 1 for the users with a known test item */
	starfa_dense *active;
	float **data;        /* per column band: users x 2k, the lists */
	starfa_dense **lists;
};

void starfa_ranker_free(struct starfa_ranker *r)
{
	if (!r)
		return;
	starfa_dense_free(r->active);
	for (int64_t j = 0; r->lists && j < r->nlists; j++) {
		starfa_dense_free(r->lists[j]);
		free(r->data[j]);
	}
	free(r->lists);
	free(r->data);
	free(r->active_data);
	free(r);
}

static int ranker_create(const starfa_tiled *S, const struct starfa_matched *test, int64_t k, struct starfa_ranker **out)
{
	struct starfa_ranker *r = starfa_calloc(1, sizeof *r);
	if (!r)
		return STARFA_ENOMEM;
	*out = r;
	r->k = k;
	r->nlists = starfa_tiled_col_tiles(S);
	const int64_t nusers = starfa_tiled_nrows(S);
	r->active_data = starfa_calloc(nusers > 0 ? (size_t)nusers : 1, sizeof *r->active_data);
	r->data = starfa_calloc((size_t)r->nlists, sizeof *r->data);
	r->lists = starfa_calloc((size_t)r->nlists, sizeof *r->lists);
	if (!r->active_data || !r->data || !r->lists)
		return STARFA_ENOMEM;
	for (int64_t e = 0; e < test->n; e++)
		if (test->user[e] >= 0 && test->item[e] >= 0)
			r->active_data[test->user[e]] = 1.0f;
	int rc = starfa_dense_create(S, STARFA_ROWS, r->active_data, 1, &r->active);
	for (int64_t j = 0; !rc && j < r->nlists; j++) {
		r->data[j] = starfa_malloc(nusers > 0 ? (size_t)(nusers * 2 * k) : 1, sizeof(float));
		rc = r->data[j] ? starfa_dense_create(S, STARFA_ROWS, r->data[j], 2 * k, &r->lists[j]) : STARFA_ENOMEM;
	}
	return rc;
}

int starfa_rank_test(const starfa_tiled *S, const starfa_dense *X, const starfa_dense *Y, const struct starfa_factors *f,
		     const struct starfa_matched *test, const starfa_csr *seen, int64_t k, struct starfa_ranker **ranker,
		     starfa_metrics *out)
{
	int rc = 0;
	if (!*ranker || (*ranker)->k != k) {
		starfa_ranker_free(*ranker);
		*ranker = NULL;
		struct starfa_ranker *made = NULL;
		rc = ranker_create(S, test, k, &made);
		if (rc)
			starfa_ranker_free(made); /* none half made is kept for the next call */
		else
			*ranker = made;
	}
	if (!rc)
		rc = starfa_insert_top_k(S, X, Y, k, (*ranker)->active, (*ranker)->lists);
	for (int64_t j = 0; !rc && j < (*ranker)->nlists; j++)
		rc = starfa_dense_sync((*ranker)->lists[j]);
	if (rc)
		return rc;
	const struct starfa_top_k_lists lists = {(*ranker)->nlists, 2 * k, (const float *const *)(*ranker)->data,
						 starfa_tiled_col_bounds(S)};
	return starfa_lists_metrics(f, &lists, test, seen, k, out);
}

int starfa_test_grid_create(const starfa_tiled *S, const struct starfa_matched *test, struct starfa_test_grid *g)
{
	*g = (struct starfa_test_grid){0};
	const int64_t m = starfa_tiled_nrows(S), n = starfa_tiled_ncols(S);
	int64_t known = 0;
	for (int64_t e = 0; e < test->n; e++)
		known += test->user[e] >= 0 && test->item[e] >= 0;
	g->nunknown = test->n - known;
	/* The known entries as CSR, duplicates kept (each is a test rating of its own). */
	starfa_coo *known_entries = starfa_coo_new(m, n, known);
	starfa_csr *c = NULL;
	g->unknown = starfa_malloc((size_t)g->nunknown + 1, sizeof *g->unknown);
	int rc = known_entries && g->unknown ? 0 : STARFA_ENOMEM;
	if (!rc) {
		int64_t u = 0;
		for (int64_t e = 0; e < test->n; e++)
			if (test->user[e] < 0 || test->item[e] < 0)
				g->unknown[u++] = e;
			else if (!rc)
				rc = coo_push(known_entries, test->user[e], test->item[e], test->val[e]);
		if (!rc)
			rc = csr_from_coo(known_entries, 0, &c);
	}
	if (!rc)
		rc = starfa_tiled_create_like(S, c, &g->T);
	if (!rc)
		rc = starfa_sums_create(starfa_tiled_row_tiles(g->T), &g->bands);
	if (!rc && !(g->slots = starfa_malloc((size_t)starfa_tiled_row_tiles(g->T), sizeof *g->slots)))
		rc = STARFA_ENOMEM;
	starfa_coo_free(known_entries);
	starfa_csr_free(c);
	if (rc)
		starfa_test_grid_free(g);
	return rc;
}

void starfa_test_grid_free(struct starfa_test_grid *g)
{
	starfa_sums_free(g->bands); /* waits for the tasks still writing it */
	free(g->slots);
	starfa_tiled_free(g->T);
	free(g->unknown);
	*g = (struct starfa_test_grid){0};
}

int starfa_test_grid_submit(struct starfa_test_grid *g, const starfa_dense *A, const starfa_dense *B, double mu)
{
	int rc = 0;
	for (int64_t b = 0; b < starfa_tiled_row_tiles(g->T) && !rc; b++)
		rc = starfa_task_sqerr_band(g->T, STARFA_ROWS, b, A, B, (float)mu, g->bands, b, NULL);
	g->pending = rc == 0;
	return rc;
}

int starfa_test_grid_metrics(struct starfa_test_grid *g, const struct starfa_matched *test, starfa_dense *A,
			     starfa_dense *B, const struct starfa_factors *f, int64_t k, starfa_metrics *out)
{
	memset(out, 0, sizeof *out);
	out->entries = test->n;
	out->k = k;
	out->cold = test->cold;
	out->rmse = out->precision = out->map = out->ndcg = NAN;
	int rc = g->pending ? 0 : starfa_test_grid_submit(g, A, B, f->mu);
	g->pending = 0;
	if (!rc)
		rc = starfa_sums_read(g->bands, g->slots);
	if (rc)
		return rc;
	double sum = 0;
	for (int64_t b = 0; b < starfa_tiled_row_tiles(g->T); b++)
		sum += g->slots[b];
	if (g->nunknown > 0) { /* the mean and the biases there are, from the factors in main memory */
		if ((rc = starfa_dense_sync(A)) || (rc = starfa_dense_sync(B)))
			return rc;
		for (int64_t q = 0; q < g->nunknown; q++) {
			const int64_t e = g->unknown[q];
			const double d = (double)starfa_factors_score(f, test->user[e], test->item[e]) - test->val[e];
			sum += d * d;
		}
	}
	out->rmse = test->n > 0 ? sqrt(sum / (double)test->n) : NAN;
	return 0;
}

int starfa_test_due(const starfa_train_progress *p, int64_t iters, int64_t every)
{
	return every <= 1 || p->iteration <= 1 || p->iteration % every == 0 || p->iteration >= iters || p->converged;
}

/* starfa_eval for an implicit model where GPUs run: starfa_rank_test over the model's training entries. */
static int eval_on_gpus(const starfa_model *m, const starfa_coo *test, int64_t k, starfa_metrics *out)
{
	struct starfa_matched matched;
	int rc = starfa_match_entries(test, m->user_ids, m->item_ids, m->nusers, m->nitems, &matched);
	if (rc)
		return rc;
	starfa_tiled *S = NULL;
	starfa_dense *X = NULL, *Y = NULL;
	struct starfa_ranker *ranker = NULL;
	/* A row band a GPU, balanced by rows (a row is nitems scores; its seen entries count little), every
	 * task on the GPUs. */
	const starfa_tiling_options tiling = {.row_tiles = starfa_worker_count(STARFA_WORKER_CUDA),
					      .col_tiles = 1,
					      .row_cost = (double)m->nitems,
					      .placed = 1};
	struct starfa_factors f;
	starfa_model_factors(m, &f);
	/* The factors are only read (the top_k tasks' inputs): registering them needs no writable copy. One
	 * evaluation: the metrics count the cold entries and group the test items themselves. */
	if (!(rc = starfa_tiled_create(m->seen, &tiling, &S)) &&
	    !(rc = starfa_dense_create(S, STARFA_ROWS, m->user_factors, m->rank, &X)) &&
	    !(rc = starfa_dense_create(S, STARFA_COLS, m->item_factors, m->rank, &Y)))
		rc = starfa_rank_test(S, X, Y, &f, &matched, m->seen, k, &ranker, out);
	if (!rc)
		rc = starfa_wait();
	starfa_ranker_free(ranker);
	starfa_dense_free(X);
	starfa_dense_free(Y);
	starfa_tiled_free(S);
	starfa_matched_free(&matched);
	return rc;
}

int starfa_eval(const starfa_model *m, const starfa_coo *test, int64_t k, starfa_metrics *out)
{
	if (!m || !test || !out)
		return starfa_set_error(STARFA_EINVAL, "starfa_eval: missing model, test entries or output");
	/* An implicit model ranks every item for every test user: with GPUs in the runtime, as top_k tasks
	 * where the GPUs are (the metrics' bits may differ from the host's in near ties, cuBLAS against
	 * OpenBLAS scores), else on the host. */
	if (m->kind == STARFA_MODEL_IMPLICIT && k >= 1 && k <= STARFA_TOP_K_CUDA_MAX && m->rank >= 1 && m->seen &&
	    m->seen->nrows == m->nusers && m->seen->ncols == m->nitems && m->nusers > 0 && m->nitems > 0 &&
	    starfa_runtime_started() && starfa_worker_count(STARFA_WORKER_CUDA) > 0)
		return eval_on_gpus(m, test, k, out);
	return starfa_eval_host(m, test, k, out);
}
