/* SDDMM: the CPU kernel, the CUDA kernel and the task graph, each against the
 * sequential reference on fresh random inputs with NaN-poisoned outputs. */
#include "testing.h"

#include "cpu/sddmm.h"
#ifdef STARFA_USE_CUDA
#include "gpu/sddmm.h"
#include "testing_cuda.h"
#include <cublas_v2.h>

#define GPU_STATUS_OK(expr)                                                                      \
	do {                                                                                     \
		starfa_gpu_status s_ = (expr);                                                   \
		CHECK_MSG(s_.call == NULL, "%s", starfa_gpu_status_string(s_));                  \
	} while (0)
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Ranks around the warp width and the vector widths, plus odd ones. */
static const int64_t ranks[] = {1, 3, 4, 7, 8, 16, 31, 32, 33, 64, 100, 128, 257};
#define NRANKS (sizeof ranks / sizeof ranks[0])

/* One matrix as a single tile: 32-bit row offsets as the kernels take them. */
struct one_tile {
	starfa_csr *csr;
	uint32_t *rowptr, *colind;
};

/* Takes over csr (freed with the tile) and makes its 32-bit copies. */
static int tile_of(struct one_tile *t, starfa_csr *csr)
{
	t->csr = csr;
	int64_t m = csr->nrows;
	t->rowptr = malloc(sizeof(uint32_t) * (size_t)(m + 1));
	t->colind = malloc(sizeof(uint32_t) * (size_t)(t->csr->nnz + 1));
	if (!t->rowptr || !t->colind)
		return 1;
	for (int64_t r = 0; r <= m; r++)
		t->rowptr[r] = (uint32_t)t->csr->rowptr[r];
	for (int64_t p = 0; p < t->csr->nnz; p++)
		t->colind[p] = (uint32_t)t->csr->colind[p];
	return 0;
}

static int make_tile(struct one_tile *t, int64_t m, int64_t n, int64_t nnz, double skew, uint64_t *rng)
{
	starfa_csr *csr = testing_random_csr(m, n, nnz, skew, rng);
	if (!csr) {
		t->csr = NULL;
		t->rowptr = t->colind = NULL;
		return 1;
	}
	return tile_of(t, csr);
}

static void free_tile(struct one_tile *t)
{
	starfa_csr_free(t->csr);
	free(t->rowptr);
	free(t->colind);
}

/* A random m x n matrix on a row_tiles x col_tiles grid with random rank-k operands, registered. */
struct graph_case {
	starfa_csr *S;
	int64_t k;
	float *A, *B;
	starfa_tiled *t;
	starfa_dense *a, *b;
	starfa_sparse_values *p;
};

static int graph_case_make(struct graph_case *g, int64_t m, int64_t n, int64_t nnz, double skew, int64_t k,
			   int64_t row_tiles, int64_t col_tiles, uint64_t *rng)
{
	memset(g, 0, sizeof *g);
	g->k = k;
	if (!(g->S = testing_random_csr(m, n, nnz, skew, rng)))
		return 1;
	g->A = malloc(sizeof(float) * (size_t)(m * k));
	g->B = malloc(sizeof(float) * (size_t)(n * k));
	if (!g->A || !g->B)
		return 1;
	testing_fill_random(g->A, (size_t)(m * k), rng);
	testing_fill_random(g->B, (size_t)(n * k), rng);
	starfa_tiling_options opts = {row_tiles, col_tiles, 0};
	return starfa_tiled_create(g->S, &opts, &g->t) || starfa_dense_create(g->t, STARFA_ROWS, g->A, k, &g->a) ||
	       starfa_dense_create(g->t, STARFA_COLS, g->B, k, &g->b) || starfa_sparse_values_create(g->t, STARFA_ROWS, &g->p);
}

static void graph_case_free(struct graph_case *g)
{
	starfa_sparse_values_free(g->p);
	starfa_dense_free(g->a);
	starfa_dense_free(g->b);
	starfa_tiled_free(g->t);
	starfa_csr_free(g->S);
	free(g->A);
	free(g->B);
}

TEST(sddmm, cpu_kernel_matches_reference)
{
	uint64_t rng = testing_seed();
	for (size_t ki = 0; ki < NRANKS; ki++) {
		int64_t k = ranks[ki];
		struct one_tile t;
		/* Skewed: empty rows, heavy rows, and a thread split that is not by rows. */
		CHECK(make_tile(&t, 97 + (int64_t)testing_below(&rng, 200), 50 + (int64_t)testing_below(&rng, 200), 3000,
				1.5, &rng) == 0);
		const starfa_csr *S = t.csr;
		float *A = malloc(sizeof(float) * (size_t)(S->nrows * k));
		float *B = malloc(sizeof(float) * (size_t)(S->ncols * k));
		float *P = malloc(sizeof(float) * (size_t)(S->nnz + 1));
		CHECK(A && B && P);
		testing_fill_random(A, (size_t)(S->nrows * k), &rng);
		testing_fill_random(B, (size_t)(S->ncols * k), &rng);
		for (int mode = 0; mode < 2; mode++)
			for (int threads = 1; threads <= 4; threads *= 2) {
				testing_poison(P, (size_t)S->nnz);
				starfa_cpu_sddmm(S->nrows, t.rowptr, t.colind, S->val, A, k, B, k, k, mode, 1.0f, 0.0f, P, threads);
				starfa_check_report rep;
				int rc = starfa_check_sddmm(S, A, B, k, (starfa_sddmm_mode)mode, P, &rep);
				CHECK_MSG(rc == 0, "k=%lld mode=%d threads=%d: %s", (long long)k, mode, threads,
					  starfa_last_error());
			}
		free(A);
		free(B);
		free(P);
		free_tile(&t);
	}
	return 0;
}

/* The reference must catch what it is there to catch: an unwritten element, a wrong one. */
TEST(sddmm, reference_rejects_wrong_results)
{
	uint64_t rng = testing_seed() + 1;
	struct one_tile t;
	CHECK(make_tile(&t, 40, 30, 300, 0.0, &rng) == 0);
	const starfa_csr *S = t.csr;
	int64_t k = 16;
	float *A = malloc(sizeof(float) * (size_t)(S->nrows * k)), *B = malloc(sizeof(float) * (size_t)(S->ncols * k));
	float *P = malloc(sizeof(float) * (size_t)S->nnz);
	CHECK(A && B && P);
	testing_fill_random(A, (size_t)(S->nrows * k), &rng);
	testing_fill_random(B, (size_t)(S->ncols * k), &rng);
	starfa_cpu_sddmm(S->nrows, t.rowptr, t.colind, S->val, A, k, B, k, k, 0, 1.0f, 0.0f, P, 1);
	CHECK_OK(starfa_check_sddmm(S, A, B, k, STARFA_SDDMM_PATTERN, P, NULL));
	P[S->nnz / 2] = NAN;
	CHECK(starfa_check_sddmm(S, A, B, k, STARFA_SDDMM_PATTERN, P, NULL) == STARFA_ECHECK);
	starfa_cpu_sddmm(S->nrows, t.rowptr, t.colind, S->val, A, k, B, k, k, 0, 1.0f, 0.0f, P, 1);
	P[S->nnz - 1] += 1e-3f * (1.0f + fabsf(P[S->nnz - 1])); /* far beyond k * eps, whatever the sign */
	starfa_check_report rep;
	CHECK(starfa_check_sddmm(S, A, B, k, STARFA_SDDMM_PATTERN, P, &rep) == STARFA_ECHECK);
	CHECK(rep.failed == 1 && rep.worst_index == S->nnz - 1);
	free(A);
	free(B);
	free(P);
	free_tile(&t);
	return 0;
}

/* Through StarPU: every tile's task on whichever worker the scheduler picks. */
TEST(sddmm, task_graph_matches_reference)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 2;
	static const int64_t grids[][2] = {{1, 1}, {4, 3}, {16, 16}};
	for (size_t g = 0; g < 3; g++) {
		int64_t k = ranks[testing_below(&rng, NRANKS)];
		struct graph_case c;
		CHECK_OK(graph_case_make(&c, 500, 400, 6000, 1.5, k, grids[g][0], grids[g][1], &rng));
		float *P = malloc(sizeof(float) * (size_t)c.S->nnz);
		CHECK(P);
		for (int mode = 0; mode < 2; mode++) {
			testing_poison(P, (size_t)c.S->nnz);
			CHECK_OK(starfa_insert_sddmm(c.t, c.a, c.b, (starfa_sddmm_mode)mode, c.p));
			CHECK_OK(starfa_wait());
			CHECK_OK(starfa_sparse_values_gather(c.p, P));
			CHECK_MSG(starfa_check_sddmm(c.S, c.A, c.B, k, (starfa_sddmm_mode)mode, P, NULL) == 0,
				  "grid %lldx%lld k=%lld mode=%d: %s", (long long)grids[g][0], (long long)grids[g][1],
				  (long long)k, mode, starfa_last_error());
		}
		graph_case_free(&c);
		free(P);
	}
	return 0;
}

/* Values of their own have no copy until something writes them, and read as zeros until then: a gather
 * of new values, and an SDDMM that accumulates into new values (beta 1), on a grid of 4 x 3 tiles. */
TEST(sddmm, new_values_read_as_zeros)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 19;
	struct graph_case c;
	CHECK_OK(graph_case_make(&c, 400, 300, 5000, 1.2, 32, 4, 3, &rng));
	float *P = malloc(sizeof(float) * (size_t)c.S->nnz), *Q = malloc(sizeof(float) * (size_t)c.S->nnz);
	CHECK(P && Q);
	testing_poison(P, (size_t)c.S->nnz);
	CHECK_OK(starfa_sparse_values_gather(c.p, P));
	for (int64_t e = 0; e < c.S->nnz; e++)
		CHECK_MSG(P[e] == 0.0f, "entry %lld of new values: %g", (long long)e, (double)P[e]);
	starfa_sparse_values *acc = NULL;
	CHECK_OK(starfa_sparse_values_create(c.t, STARFA_ROWS, &acc));
	CHECK_OK(starfa_insert_sddmm_ab(c.t, c.a, c.b, STARFA_SDDMM_PATTERN, 1.0f, 1.0f, acc));
	CHECK_OK(starfa_insert_sddmm(c.t, c.a, c.b, STARFA_SDDMM_PATTERN, c.p));
	testing_poison(P, (size_t)c.S->nnz);
	testing_poison(Q, (size_t)c.S->nnz);
	CHECK_OK(starfa_sparse_values_gather(acc, P));
	CHECK_OK(starfa_sparse_values_gather(c.p, Q));
	CHECK_OK(starfa_check_sddmm(c.S, c.A, c.B, 32, STARFA_SDDMM_PATTERN, Q, NULL));
	/* The two may run different kernels (CPU or CUDA, another tuned choice): float32 rounding apart. */
	for (int64_t e = 0; e < c.S->nnz; e++)
		CHECK_MSG(fabsf(P[e] - Q[e]) <= 1e-5f * (1.0f + fabsf(Q[e])),
			  "entry %lld: accumulated into new values %g, written %g", (long long)e, (double)P[e], (double)Q[e]);
	starfa_sparse_values_free(acc);
	graph_case_free(&c);
	free(P);
	free(Q);
	return 0;
}

/* Values registered over the caller's array: SDDMM accumulates into the array's own values in place, and
 * they are home in it after starfa_sparse_values_free without a gather; on the column side (the transposed
 * grid) the array holds the values column by column. Grids with several column bands are refused. */
TEST(sddmm, values_over_an_array)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 17;
	int64_t k = ranks[testing_below(&rng, NRANKS)];
	starfa_csr *S = testing_random_csr(500, 400, 6000, 1.5, &rng);
	CHECK(S);
	int64_t nnz = S->nnz;
	float *A = malloc(sizeof(float) * (size_t)(S->nrows * k)), *B = malloc(sizeof(float) * (size_t)(S->ncols * k));
	float *X = malloc(sizeof(float) * (size_t)nnz), *X0 = malloc(sizeof(float) * (size_t)nnz);
	float *T = malloc(sizeof(float) * (size_t)nnz), *T_ref = malloc(sizeof(float) * (size_t)nnz);
	CHECK(A && B && X && X0 && T && T_ref);
	testing_fill_random(A, (size_t)(S->nrows * k), &rng);
	testing_fill_random(B, (size_t)(S->ncols * k), &rng);
	testing_fill_random(X0, (size_t)nnz, &rng);
	memcpy(X, X0, sizeof(float) * (size_t)nnz);
	const float alpha = 2.0f, beta = 0.5f;

	/* 3 row bands, 1 column band, and the transposed grid (3 column bands, 1 row band: refused there). */
	starfa_tiling_options opts = {3, 1, 1};
	starfa_tiled *t = NULL;
	starfa_dense *a = NULL, *b = NULL;
	starfa_sparse_values *p = NULL, *pt = NULL, *pt_ref = NULL;
	CHECK_OK(starfa_tiled_create(S, &opts, &t));
	CHECK(starfa_sparse_values_create_over(t, STARFA_COLS, T, &pt) == STARFA_EINVAL && pt == NULL);
	CHECK_MSG(strstr(starfa_last_error(), "column bands") != NULL, "%s", starfa_last_error());
	CHECK(starfa_sparse_values_create_over(t, STARFA_ROWS, NULL, &p) == STARFA_EINVAL && p == NULL);
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, A, k, &a));
	CHECK_OK(starfa_dense_create(t, STARFA_COLS, B, k, &b));
	CHECK_OK(starfa_sparse_values_create_over(t, STARFA_ROWS, X, &p));
	CHECK_OK(starfa_insert_sddmm_ab(t, a, b, STARFA_SDDMM_PATTERN, alpha, beta, p));
	starfa_sparse_values_free(p); /* waits, and brings the values home into X */
	p = NULL;
	double worst = 0;
	for (int64_t r = 0; r < S->nrows; r++)
		for (int64_t e = S->rowptr[r]; e < S->rowptr[r + 1]; e++) {
			double dot = 0, mag = 0;
			for (int64_t c = 0; c < k; c++) {
				double term = (double)A[r * k + c] * B[S->colind[e] * k + c];
				dot += term;
				mag += fabs(term);
			}
			double want = alpha * dot + beta * (double)X0[e];
			double err = fabs(X[e] - want) / (alpha * mag + fabs(beta * (double)X0[e]) + 1e-30);
			worst = err > worst ? err : worst;
		}
	CHECK_MSG(worst < 1e-5, "k=%lld: worst relative error %.3g", (long long)k, worst);

	/* The column side, over a grid whose transposed grid has one column band: the values moved there from
	 * the row side, against the same values gathered from blocks of their own. */
	starfa_dense_free(a);
	starfa_dense_free(b);
	starfa_tiled_free(t);
	a = b = NULL;
	starfa_tiling_options cols = {1, 4, 1};
	CHECK_OK(starfa_tiled_create(S, &cols, &t));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, A, k, &a));
	CHECK_OK(starfa_dense_create(t, STARFA_COLS, B, k, &b));
	CHECK(starfa_sparse_values_create_over(t, STARFA_ROWS, X, &p) == STARFA_EINVAL && p == NULL);
	CHECK_OK(starfa_sparse_values_create(t, STARFA_ROWS, &p));
	testing_poison(T, (size_t)nnz);
	testing_poison(T_ref, (size_t)nnz);
	CHECK_OK(starfa_sparse_values_create_over(t, STARFA_COLS, T, &pt));
	CHECK_OK(starfa_sparse_values_create(t, STARFA_COLS, &pt_ref));
	CHECK_OK(starfa_insert_sddmm(t, a, b, STARFA_SDDMM_SCALED, p));
	CHECK_OK(starfa_insert_values_transpose(p, pt));
	CHECK_OK(starfa_insert_values_transpose(p, pt_ref));
	CHECK_OK(starfa_sparse_values_gather(pt_ref, T_ref));
	/* A gather from values over an array copies it out (into X here), and one into the array itself is
	 * a wait; the values are then home in T. */
	testing_poison(X, (size_t)nnz);
	CHECK_OK(starfa_sparse_values_gather(pt, X));
	CHECK_OK(starfa_sparse_values_gather(pt, T));
	for (int64_t e = 0; e < nnz; e++) {
		CHECK_MSG(T[e] == T_ref[e] && X[e] == T_ref[e], "entry %lld: %g and %g against %g", (long long)e,
			  (double)T[e], (double)X[e], (double)T_ref[e]);
	}
	starfa_sparse_values_free(pt);
	starfa_sparse_values_free(pt_ref);
	starfa_sparse_values_free(p);
	starfa_dense_free(a);
	starfa_dense_free(b);
	starfa_tiled_free(t);
	starfa_csr_free(S);
	free(A);
	free(B);
	free(X);
	free(X0);
	free(T);
	free(T_ref);
	return 0;
}

/* The per-worker profile accounts for every task the per-kind statistics count, and for no time
 * a worker did not have. */
TEST(sddmm, worker_profile_accounts_for_every_task)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 5;
	struct graph_case c;
	CHECK_OK(graph_case_make(&c, 400, 300, 5000, 1.0, 16, 4, 3, &rng));
	CHECK_OK(starfa_wait());
	starfa_stats_reset();
	for (int round = 0; round < 3; round++)
		CHECK_OK(starfa_insert_sddmm(c.t, c.a, c.b, STARFA_SDDMM_PATTERN, c.p));
	CHECK_OK(starfa_wait());
	starfa_worker_stats st;
	starfa_stats_get(&st);
	starfa_profile prof;
	CHECK_OK(starfa_profile_get(&prof));
	CHECK(prof.nworkers == starfa_worker_count(STARFA_WORKER_CPU) + starfa_worker_count(STARFA_WORKER_CUDA));
	int64_t tasks[STARFA_WORKER_KINDS] = {0};
	double executing[STARFA_WORKER_KINDS] = {0};
	for (int w = 0; w < prof.nworkers; w++) {
		const starfa_worker_profile *q = &prof.workers[w];
		CHECK_MSG(q->name[0] != '\0', "worker %d has no name", w);
		CHECK(q->kind == STARFA_WORKER_CPU || q->kind == STARFA_WORKER_CUDA);
		CHECK_MSG(q->executing >= 0 && q->sleeping >= 0 && q->executing + q->sleeping <= q->seconds * 1.001 + 1e-6,
			  "worker %s: executing %g + sleeping %g s of %g s", q->name, q->executing, q->sleeping, q->seconds);
		tasks[q->kind] += q->tasks;
		executing[q->kind] += q->executing;
	}
	for (int kind = 0; kind < STARFA_WORKER_KINDS; kind++) {
		CHECK_MSG(tasks[kind] == st.tasks[kind], "kind %d: %lld tasks per worker, %lld per kind", kind,
			  (long long)tasks[kind], (long long)st.tasks[kind]);
		CHECK(fabs(executing[kind] - st.seconds[kind]) <= 1e-6 * (1 + st.seconds[kind]));
	}
	CHECK(tasks[STARFA_WORKER_CPU] + tasks[STARFA_WORKER_CUDA] >= 3 * 12);
	/* The process's CPU time since the reset: positive, and within what its threads could use over the
	 * span (the workers, this thread and StarPU's few others). */
	double span = 0;
	for (int w = 0; w < prof.nworkers; w++)
		span = prof.workers[w].seconds > span ? prof.workers[w].seconds : span;
	CHECK_MSG(prof.cpu_seconds > 0 && prof.cpu_seconds <= (prof.nworkers + 4) * (span + 0.05),
		  "%g CPU seconds over a span of %g s with %d workers", prof.cpu_seconds, span, prof.nworkers);
	for (int l = 0; l < prof.nlinks; l++)
		CHECK(prof.links[l].src[0] && prof.links[l].dst[0] && prof.links[l].bytes > 0 && prof.links[l].transfers > 0);
	/* Summed twice over a zeroed profile: every count doubles. */
	starfa_profile sum = {0};
	CHECK_OK(starfa_profile_add(&sum, &prof));
	CHECK_OK(starfa_profile_add(&sum, &prof));
	CHECK(sum.nworkers == prof.nworkers && sum.nlinks == prof.nlinks);
	CHECK(fabs(sum.cpu_seconds - 2 * prof.cpu_seconds) <= 1e-9 * (1 + prof.cpu_seconds));
	for (int w = 0; w < sum.nworkers; w++)
		CHECK(sum.workers[w].tasks == 2 * prof.workers[w].tasks && !strcmp(sum.workers[w].name, prof.workers[w].name));
	for (int l = 0; l < sum.nlinks; l++)
		CHECK(sum.links[l].bytes == 2 * prof.links[l].bytes && sum.links[l].transfers == 2 * prof.links[l].transfers);
	starfa_profile_clear(&sum);
	starfa_profile_clear(&prof);
	CHECK(prof.workers == NULL && prof.nworkers == 0);
	/* A reset starts every worker from zero. */
	starfa_stats_reset();
	CHECK_OK(starfa_profile_get(&prof));
	for (int w = 0; w < prof.nworkers; w++)
		CHECK(prof.workers[w].tasks == 0 && prof.workers[w].executing < 1e-3);
	CHECK(prof.cpu_seconds >= 0 && prof.cpu_seconds < 0.5);
	starfa_profile_clear(&prof);
	graph_case_free(&c);
	return 0;
}

/* The double reference of a model's squared error over rows [r0, r1) of S: sum (S - shift - <A_r, B_c>)^2,
 * A and B with leading dimension ld. */
static double reference_sqerr(const starfa_csr *S, const float *A, const float *B, int64_t k, int64_t ld, float shift,
			      int64_t r0, int64_t r1)
{
	double sum = 0;
	for (int64_t r = r0; r < r1; r++)
		for (int64_t p = S->rowptr[r]; p < S->rowptr[r + 1]; p++) {
			double dot = 0;
			for (int64_t d = 0; d < k; d++)
				dot += (double)A[r * ld + d] * B[(int64_t)S->colind[p] * ld + d];
			const double e = S->val[p] - shift - dot;
			sum += e * e;
		}
	return sum;
}

/* A model's squared error by band tasks (one task a band, no predictions written) against the reference,
 * on both sides' grids, band by band and in all; bad operands refused. */
TEST(sddmm, sqerr_matches_reference)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 41;
	static const int64_t grids[][2] = {{1, 1}, {4, 3}, {16, 16}};
	for (size_t g = 0; g < 3; g++) {
		const int64_t k = ranks[testing_below(&rng, NRANKS)];
		struct graph_case c;
		CHECK_OK(graph_case_make(&c, 500, 400, 6000, 1.5, k, grids[g][0], grids[g][1], &rng));
		const float shift = (float)(2 * testing_uniform(&rng) - 1);
		const double want = reference_sqerr(c.S, c.A, c.B, k, k, shift, 0, c.S->nrows);
		double rows = NAN, cols = NAN;
		CHECK_OK(starfa_reduce_sqerr(c.t, STARFA_ROWS, c.a, c.b, shift, &rows));
		CHECK(starfa_reduce_sqerr(c.t, STARFA_COLS, c.b, c.a, shift, &cols) == STARFA_EINVAL); /* no transposed grid */
		/* the transposed grid's values, on a grid that has one (copies of A and B: memory registered
		 * twice leaves CUDA's last error set on this thread, for a later test's kernel to report) */
		starfa_tiling_options both = {grids[g][0], grids[g][1], 1};
		starfa_tiled *tt = NULL;
		starfa_dense *ta = NULL, *tb = NULL;
		float *A2 = malloc(sizeof(float) * (size_t)(c.S->nrows * k)), *B2 = malloc(sizeof(float) * (size_t)(c.S->ncols * k));
		CHECK(A2 && B2);
		memcpy(A2, c.A, sizeof(float) * (size_t)(c.S->nrows * k));
		memcpy(B2, c.B, sizeof(float) * (size_t)(c.S->ncols * k));
		CHECK_OK(starfa_tiled_create(c.S, &both, &tt));
		CHECK_OK(starfa_dense_create(tt, STARFA_ROWS, A2, k, &ta));
		CHECK_OK(starfa_dense_create(tt, STARFA_COLS, B2, k, &tb));
		CHECK_OK(starfa_reduce_sqerr(tt, STARFA_COLS, tb, ta, shift, &cols));
		double swapped = NAN;
		CHECK(starfa_reduce_sqerr(tt, STARFA_COLS, ta, tb, shift, &swapped) == STARFA_EINVAL && isnan(swapped));
		starfa_dense_free(ta);
		starfa_dense_free(tb);
		starfa_tiled_free(tt);
		free(A2);
		free(B2);
		CHECK_MSG(fabs(rows - want) <= 1e-5 * want && fabs(cols - want) <= 1e-5 * want,
			  "grid %lldx%lld k %lld: rows %.9g cols %.9g, reference %.9g", (long long)grids[g][0],
			  (long long)grids[g][1], (long long)k, rows, cols, want);
		/* band by band, each slot poisoned first */
		const int64_t nb = starfa_tiled_row_tiles(c.t), *rb = starfa_tiled_row_bounds(c.t);
		starfa_sums *sums = NULL;
		CHECK_OK(starfa_sums_create(nb + 1, &sums));
		double *slots = malloc(sizeof(double) * (size_t)(nb + 1));
		CHECK(slots);
		for (int64_t b = 0; b < nb; b++)
			CHECK_OK(starfa_task_sqerr_band(c.t, STARFA_ROWS, b, c.a, c.b, shift, sums, b + 1, NULL));
		CHECK_OK(starfa_sums_read(sums, slots));
		for (int64_t b = 0; b < nb; b++) {
			const double band = reference_sqerr(c.S, c.A, c.B, k, k, shift, rb[b], rb[b + 1]);
			CHECK_MSG(fabs(slots[b + 1] - band) <= 1e-5 * band + 1e-12, "band %lld: %.9g, reference %.9g",
				  (long long)b, slots[b + 1], band);
		}
		CHECK(starfa_task_sqerr_band(c.t, STARFA_ROWS, nb, c.a, c.b, shift, sums, 0, NULL) == STARFA_EINVAL);
		CHECK(starfa_task_sqerr_band(c.t, STARFA_ROWS, 0, c.b, c.a, shift, sums, 0, NULL) == STARFA_EINVAL);
		CHECK(starfa_task_sqerr_band(c.t, STARFA_ROWS, 0, c.a, c.b, shift, sums, nb + 1, NULL) == STARFA_EINVAL);
		starfa_sums_free(sums);
		free(slots);
		graph_case_free(&c);
	}
	return 0;
}

TEST(sddmm, insert_rejects_mismatched_operands)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 3;
	starfa_csr *S = testing_random_csr(30, 20, 100, 0.0, &rng);
	CHECK(S);
	float *A = calloc(30 * 8, sizeof(float)), *B = calloc(20 * 4, sizeof(float));
	starfa_tiled *t = NULL;
	starfa_dense *a = NULL, *b = NULL;
	starfa_sparse_values *p = NULL;
	CHECK_OK(starfa_tiled_create(S, NULL, &t));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, A, 8, &a));
	CHECK_OK(starfa_dense_create(t, STARFA_COLS, B, 4, &b));
	CHECK_OK(starfa_sparse_values_create(t, STARFA_ROWS, &p));
	CHECK(starfa_insert_sddmm(t, a, b, STARFA_SDDMM_PATTERN, p) == STARFA_EINVAL);
	CHECK(strstr(starfa_last_error(), "20x4") != NULL);
	CHECK(starfa_insert_sddmm(t, a, a, STARFA_SDDMM_PATTERN, p) == STARFA_EINVAL);
	starfa_sparse_values_free(p);
	starfa_dense_free(a);
	starfa_dense_free(b);
	starfa_tiled_free(t);
	starfa_csr_free(S);
	free(A);
	free(B);
	return 0;
}

#ifdef STARFA_USE_CUDA

struct device_tile {
	uint32_t *rowptr, *colind;
	float *val, *A, *B, *P;
};

static void free_device_tile(struct device_tile *d)
{
	cudaFree(d->rowptr);
	cudaFree(d->colind);
	cudaFree(d->val);
	cudaFree(d->A);
	cudaFree(d->B);
	cudaFree(d->P);
}

/* Output elements past the tile's nonzeros, poisoned like the outputs: a kernel that
 * writes beyond the last nonzero changes them. */
#define GUARD 64

/* Runs one variant on a tile already on the device (A and B with leading dimension ld) and
 * checks it against the reference and, elementwise, against the CPU kernel; with
 * panel_cols > 0 the panel variant runs with panels that wide instead of `variant`.
 * Returns 0, 1 on failure, or TEST_SKIPPED when the variant cannot run this tile. */
static int check_run(starfa_cuda_sddmm_variant variant, int64_t panel_cols, const struct one_tile *t,
		     struct device_tile *d, const float *A, const float *B, int64_t k, int64_t ld, int mode)
{
	const starfa_csr *S = t->csr;
	size_t nnz = (size_t)S->nnz;
	const char *name = panel_cols > 0 ? "panel (given width)" : starfa_cuda_sddmm_variant_name(variant);
	float *P = malloc((nnz + GUARD) * sizeof(float)), *Pcpu = malloc(nnz * sizeof(float) + 1);
	CHECK(P && Pcpu);
	testing_poison(P, nnz + GUARD);
	CUDA_OK(cudaMemcpy(d->P, P, (nnz + GUARD) * sizeof(float), cudaMemcpyHostToDevice));
	cudaError_t err = panel_cols > 0 ? starfa_cuda_sddmm_panel_run(panel_cols, S->nrows, S->ncols, S->nnz, d->rowptr,
								      d->colind, d->val, d->A, ld, d->B, ld, k, mode,
								      1.0f, 0.0f, d->P, 0)
					 : starfa_cuda_sddmm_variant_run(variant, S->nrows, S->ncols, S->nnz, d->rowptr,
									 d->colind, d->val, d->A, ld, d->B, ld, k, mode,
									 1.0f, 0.0f, d->P, 0);
	if (err == cudaErrorInvalidValue && (panel_cols > 0 || (variant != STARFA_CUDA_SDDMM_AUTO &&
								 variant != STARFA_CUDA_SDDMM_WARP_SPANS))) {
		(void)cudaGetLastError();
		free(P);
		free(Pcpu);
		return TEST_SKIPPED;
	}
	CUDA_OK(err);
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaMemcpy(P, d->P, (nnz + GUARD) * sizeof(float), cudaMemcpyDeviceToHost));
	for (size_t p = nnz; p < nnz + GUARD; p++)
		CHECK_MSG(isnan(P[p]), "%s k=%lld panel_cols=%lld: wrote output element %zu of %zu", name, (long long)k,
			  (long long)panel_cols, p, nnz);
	/* The reference takes dense k-wide rows: compact when ld > k. */
	float *Ak = malloc(sizeof(float) * (size_t)(S->nrows * k) + 1), *Bk = malloc(sizeof(float) * (size_t)(S->ncols * k) + 1);
	CHECK(Ak && Bk);
	for (int64_t r = 0; r < S->nrows; r++)
		memcpy(Ak + r * k, A + r * ld, sizeof(float) * (size_t)k);
	for (int64_t r = 0; r < S->ncols; r++)
		memcpy(Bk + r * k, B + r * ld, sizeof(float) * (size_t)k);
	CHECK_MSG(starfa_check_sddmm(S, Ak, Bk, k, (starfa_sddmm_mode)mode, P, NULL) == 0,
		  "%s k=%lld ld=%lld mode=%d panel_cols=%lld: %s", name, (long long)k, (long long)ld, mode,
		  (long long)panel_cols, starfa_last_error());
	starfa_cpu_sddmm(S->nrows, t->rowptr, t->colind, S->val, A, ld, B, ld, k, mode, 1.0f, 0.0f, Pcpu, 2);
	/* Both are within the float32 bound of the reference; they may differ by rounding, which
	 * grows with the length of the dot products. */
	float tol = 1e-4f * (k > 256 ? (float)k / 256.0f : 1.0f);
	for (size_t p = 0; p < nnz; p++)
		CHECK_MSG(fabsf(P[p] - Pcpu[p]) <= tol * (1.0f + fabsf(Pcpu[p])),
			  "%s k=%lld panel_cols=%lld element %zu: cuda %g cpu %g", name, (long long)k,
			  (long long)panel_cols, p, P[p], Pcpu[p]);
	free(P);
	free(Pcpu);
	free(Ak);
	free(Bk);
	return 0;
}

static int check_variant(starfa_cuda_sddmm_variant variant, const struct one_tile *t, struct device_tile *d,
			 const float *A, const float *B, int64_t k, int64_t ld, int mode)
{
	return check_run(variant, 0, t, d, A, B, k, ld, mode);
}

/* Copies a tile and dense operands (rows x ld floats) to the device. */
static int upload(const struct one_tile *t, const float *A, const float *B, int64_t ld, struct device_tile *d)
{
	const starfa_csr *S = t->csr;
	size_t nnz = (size_t)S->nnz;
	d->rowptr = to_device(t->rowptr, sizeof(uint32_t) * (size_t)(S->nrows + 1));
	d->colind = to_device(t->colind, sizeof(uint32_t) * nnz);
	d->val = to_device(S->val, sizeof(float) * nnz);
	d->A = to_device(A, sizeof(float) * (size_t)(S->nrows * ld));
	d->B = to_device(B, sizeof(float) * (size_t)(S->ncols * ld));
	d->P = to_device(NULL, sizeof(float) * (nnz + GUARD));
	return d->rowptr && d->colind && d->val && d->A && d->B && d->P ? 0 : 1;
}

/* Every variant that can run a tile against the reference and the CPU kernel: every k
 * remainder, padded leading dimensions, skewed rows with empty ones. */
TEST(sddmm_cuda, every_variant_matches_reference_and_cpu)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	uint64_t rng = testing_seed() + 10;
	int ran[STARFA_CUDA_SDDMM_VARIANTS] = {0};
	for (size_t ki = 0; ki < NRANKS; ki++) {
		int64_t k = ranks[ki];
		/* Few columns so that B fits in shared memory for the small ranks. */
		int64_t ncols = k <= 64 ? 150 + (int64_t)testing_below(&rng, 200) : 40 + (int64_t)testing_below(&rng, 60);
		struct one_tile t;
		CHECK(make_tile(&t, 300 + (int64_t)testing_below(&rng, 700), ncols, 20000, 1.5, &rng) == 0);
		const starfa_csr *S = t.csr;
		for (int pad = 0; pad <= 4; pad += 4) {
			int64_t ld = k + pad;
			size_t na = (size_t)(S->nrows * ld), nb = (size_t)(S->ncols * ld);
			float *A = malloc(na * sizeof(float)), *B = malloc(nb * sizeof(float));
			CHECK(A && B);
			testing_fill_random(A, na, &rng);
			testing_fill_random(B, nb, &rng);
			struct device_tile d;
			CHECK(upload(&t, A, B, ld, &d) == 0);
			for (int v = 0; v < STARFA_CUDA_SDDMM_VARIANTS; v++)
				for (int mode = 0; mode < 2; mode++) {
					int rc = check_variant((starfa_cuda_sddmm_variant)v, &t, &d, A, B, k, ld, mode);
					if (rc == 1)
						return 1;
					ran[v] += rc == 0;
				}
			free_device_tile(&d);
			free(A);
			free(B);
		}
		free_tile(&t);
	}
	for (int v = 0; v < STARFA_CUDA_SDDMM_VARIANTS; v++)
		CHECK_MSG(ran[v] > 0, "variant %s never ran", starfa_cuda_sddmm_variant_name((starfa_cuda_sddmm_variant)v));
	return 0;
}

/* Shapes at the edges: a single nonzero, all nonzeros in one row, mostly empty rows
 * (long empty runs inside a chunk), and a B block exactly at the shared-memory limit. */
TEST(sddmm_cuda, edge_shapes)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	uint64_t rng = testing_seed() + 12;
	int smem_limit = 0;
	CUDA_OK(cudaDeviceGetAttribute(&smem_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
	int64_t k = 128; /* 8-lane groups: staged rows are k floats, unpadded */
	int64_t limit_cols = smem_limit / (int64_t)(k * sizeof(float));
	struct {
		int64_t m, n, nnz;
		double skew;
	} shapes[] = {{1, 1, 1, 0.0}, {1, 5000, 3000, 0.0}, {4000, 30, 500, 0.0}, {200000, 64, 50, 0.0},
		      {700, limit_cols, 60000, 0.5},
		      {700, limit_cols + 1, 60000, 0.5}};
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		struct one_tile t;
		CHECK(make_tile(&t, shapes[s].m, shapes[s].n, shapes[s].nnz, shapes[s].skew, &rng) == 0);
		size_t na = (size_t)(t.csr->nrows * k), nb = (size_t)(t.csr->ncols * k);
		float *A = malloc(na * sizeof(float)), *B = malloc(nb * sizeof(float));
		CHECK(A && B);
		testing_fill_random(A, na, &rng);
		testing_fill_random(B, nb, &rng);
		struct device_tile d;
		CHECK(upload(&t, A, B, k, &d) == 0);
		for (int v = 0; v < STARFA_CUDA_SDDMM_VARIANTS; v++) {
			int rc = check_variant((starfa_cuda_sddmm_variant)v, &t, &d, A, B, k, k, 1);
			CHECK(rc != 1);
			/* At the limit the staged variant must run; one column more it must refuse. */
			if (v == STARFA_CUDA_SDDMM_SMEM && shapes[s].n == limit_cols)
				CHECK_MSG(rc == 0, "smem refused a B block of exactly the shared-memory limit");
			if (v == STARFA_CUDA_SDDMM_SMEM && shapes[s].n == limit_cols + 1)
				CHECK(rc == TEST_SKIPPED);
		}
		free_device_tile(&d);
		free(A);
		free(B);
		free_tile(&t);
	}
	return 0;
}

/* ------------------------------------------------------------------ the panel variant */

/* Ranks for the panel tests: every remainder mod 4 (those the panel variant must refuse)
 * and every group shape, up to the widest (k = 1024, 32 lanes of 8 float4). */
static const int64_t panel_ranks[] = {1, 3, 4, 7, 8, 16, 31, 32, 33, 64, 100, 128, 257, 512, 1024};
#define NPANEL_RANKS (sizeof panel_ranks / sizeof panel_ranks[0])

/* The panel variant on a tile with panels of each of these widths (0: the L2 model's, one
 * panel on small tiles), both output modes, A and B unpadded and padded (ld = k + 4). It
 * must run every tile whose k is a multiple of 4 (ld then is too) and refuse the others. */
static int check_panel_widths(const struct one_tile *t, int64_t k, const int64_t *widths, size_t nwidths,
			      uint64_t *rng)
{
	const starfa_csr *S = t->csr;
	for (int pad = 0; pad <= 4; pad += 4) {
		int64_t ld = k + pad;
		size_t na = (size_t)(S->nrows * ld), nb = (size_t)(S->ncols * ld);
		float *A = malloc(na * sizeof(float) + 1), *B = malloc(nb * sizeof(float) + 1);
		CHECK(A && B);
		testing_fill_random(A, na, rng);
		testing_fill_random(B, nb, rng);
		struct device_tile d;
		CHECK(upload(t, A, B, ld, &d) == 0);
		for (size_t w = 0; w < nwidths; w++)
			for (int mode = 0; mode < 2; mode++) {
				int rc = check_run(STARFA_CUDA_SDDMM_PANEL, widths[w], t, &d, A, B, k, ld, mode);
				if (rc == 1)
					return 1;
				CHECK_MSG(rc == (k % 4 == 0 ? 0 : TEST_SKIPPED),
					  "panel k=%lld ld=%lld panel_cols=%lld: %s", (long long)k, (long long)ld,
					  (long long)widths[w],
					  rc == 0 ? "ran without 16-byte loads" : "refused a tile it can run");
			}
		free_device_tile(&d);
		free(A);
		free(B);
	}
	return 0;
}

/* Several panels on small tiles: panels of one column (as many launches as columns), of a
 * few columns, a quarter of the tile, one column short of it, the whole tile, wider than
 * it, and the L2 model's; every k remainder; skewed rows and columns (empty rows, heavy
 * rows spread over several warps, empty columns, nearly empty high panels). */
TEST(sddmm_cuda, panel_widths_match_reference)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	uint64_t rng = testing_seed() + 13;
	for (size_t ki = 0; ki < NPANEL_RANKS; ki++) {
		int64_t k = panel_ranks[ki], n = 150 + (int64_t)testing_below(&rng, 200);
		struct one_tile t;
		CHECK(make_tile(&t, 300 + (int64_t)testing_below(&rng, 700), n, 20000, 1.5, &rng) == 0);
		const int64_t widths[] = {1, 3, 32, n / 4 + 1, n - 1, n, 2 * n, 0};
		if (check_panel_widths(&t, k, widths, sizeof widths / sizeof widths[0], &rng))
			return 1;
		free_tile(&t);
	}
	return 0;
}

/* An m x n tile whose nonzeros (about nnz) lie only in the columns [0, lo) and [n - hi, n),
 * rows sorted: the panels in between have nothing to compute. */
static int make_banded_tile(struct one_tile *t, int64_t m, int64_t n, int64_t lo, int64_t hi, int64_t nnz,
			    uint64_t *rng)
{
	starfa_csr *csr = testing_random_csr(m, lo + hi, nnz, 0.5, rng);
	if (!csr)
		return 1;
	for (int64_t p = 0; p < csr->nnz; p++)
		if (csr->colind[p] >= lo)
			csr->colind[p] += (int32_t)(n - lo - hi);
	csr->ncols = n;
	return tile_of(t, csr);
}

/* Panels without nonzeros among panels with some: a gap in the middle columns, every
 * nonzero in the last column or in the first, a single nonzero in a wide tile (one row,
 * then among empty rows). */
TEST(sddmm_cuda, panel_empty_panels)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	uint64_t rng = testing_seed() + 14;
	struct {
		int64_t m, n, lo, hi, nnz;
	} shapes[] = {{500, 1000, 200, 200, 20000}, {3000, 5000, 0, 1, 2000}, {3000, 5000, 1, 0, 2000},
		      {1, 5000, 5000, 0, 1},         {1000, 5000, 5000, 0, 1}};
	static const int64_t ks[] = {4, 36, 128};
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
		for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
			struct one_tile t;
			CHECK(make_banded_tile(&t, shapes[s].m, shapes[s].n, shapes[s].lo, shapes[s].hi, shapes[s].nnz,
					       &rng) == 0);
			CHECK(t.csr->nnz > 0);
			/* 100: panels 2 to 7 of the gapped tile are empty. */
			const int64_t widths[] = {1, 7, 100, shapes[s].n - 1, 0};
			if (check_panel_widths(&t, ks[ki], widths, sizeof widths / sizeof widths[0], &rng))
				return 1;
			free_tile(&t);
		}
	return 0;
}

/* Shuffles each row's nonzeros, column and value together. */
static void shuffle_rows(struct one_tile *t, uint64_t *rng)
{
	starfa_csr *S = t->csr;
	for (int64_t r = 0; r < S->nrows; r++)
		for (int64_t i = S->rowptr[r + 1] - 1; i > S->rowptr[r]; i--) {
			int64_t j = S->rowptr[r] + (int64_t)testing_below(rng, (uint64_t)(i - S->rowptr[r] + 1));
			int32_t c = S->colind[i];
			float v = S->val[i];
			S->colind[i] = S->colind[j];
			S->val[i] = S->val[j];
			S->colind[j] = c;
			S->val[j] = v;
		}
	for (int64_t p = 0; p < S->nnz; p++)
		t->colind[p] = (uint32_t)S->colind[p];
}

/* Rows whose columns are not in order. The tiles storage/tiled.c cuts keep the order of the
 * matrix's rows, which starfa_csr documents as sorted but nothing enforces; no variant may
 * depend on it (the panel variant filters nonzeros by column instead of searching rows). */
TEST(sddmm_cuda, every_variant_takes_unsorted_rows)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	uint64_t rng = testing_seed() + 15;
	static const int64_t ks[] = {16, 128, 512};
	for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
		int64_t k = ks[ki], n = 150 + (int64_t)testing_below(&rng, 200);
		struct one_tile t;
		CHECK(make_tile(&t, 500, n, 20000, 1.0, &rng) == 0);
		shuffle_rows(&t, &rng);
		int64_t unsorted = 0;
		for (int64_t r = 0; r < t.csr->nrows; r++)
			for (int64_t p = t.csr->rowptr[r] + 1; p < t.csr->rowptr[r + 1]; p++)
				unsorted += t.colind[p] < t.colind[p - 1];
		CHECK_MSG(unsorted > 0, "the shuffle left every row sorted");
		size_t na = (size_t)(t.csr->nrows * k), nb = (size_t)(t.csr->ncols * k);
		float *A = malloc(na * sizeof(float)), *B = malloc(nb * sizeof(float));
		CHECK(A && B);
		testing_fill_random(A, na, &rng);
		testing_fill_random(B, nb, &rng);
		struct device_tile d;
		CHECK(upload(&t, A, B, k, &d) == 0);
		for (int v = 0; v < STARFA_CUDA_SDDMM_VARIANTS; v++)
			for (int mode = 0; mode < 2; mode++)
				CHECK(check_variant((starfa_cuda_sddmm_variant)v, &t, &d, A, B, k, k, mode) != 1);
		free_device_tile(&d);
		free(A);
		free(B);
		const int64_t widths[] = {1, 7, n / 3};
		if (check_panel_widths(&t, k, widths, sizeof widths / sizeof widths[0], &rng))
			return 1;
		free_tile(&t);
	}
	return 0;
}

/* A tile whose B block is three times L2 on this device: the L2 model cuts it into several
 * panels that each fit in L2, and AUTO takes the panel variant, whose results check. */
TEST(sddmm_cuda, panel_l2_model_and_auto_choice)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	int l2 = 0;
	CUDA_OK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
	CHECK(l2 > 0);
	uint64_t rng = testing_seed() + 16;
	int64_t k = 512, row_bytes = k * (int64_t)sizeof(float);
	/* About 2.5 nonzeros per B row, rows of about 12 nonzeros (more than the ~7 panels). */
	int64_t n = 3 * (int64_t)l2 / row_bytes + 1, nnz = n * 5 / 2, m = nnz / 12;
	int64_t cols = starfa_cuda_sddmm_panel_cols(n, k);
	CHECK_MSG(cols > 0 && cols < n, "the L2 model makes panels of %lld of %lld columns", (long long)cols,
		  (long long)n);
	CHECK_MSG(cols * row_bytes <= l2, "a panel's B rows (%lld bytes) overflow L2 (%d bytes)",
		  (long long)(cols * row_bytes), l2);
	int64_t panels = (n + cols - 1) / cols;
	struct one_tile t;
	CHECK(make_tile(&t, m, n, nnz, 0.0, &rng) == 0);
	const starfa_csr *S = t.csr;
	size_t na = (size_t)(S->nrows * k), nb = (size_t)(S->ncols * k);
	float *A = malloc(na * sizeof(float)), *B = malloc(nb * sizeof(float));
	CHECK(A && B);
	testing_fill_random(A, na, &rng);
	testing_fill_random(B, nb, &rng);
	struct device_tile d;
	CHECK(upload(&t, A, B, k, &d) == 0);
	/* These checks follow AUTO's rule for the panel variant (B block over 3/4 of L2, over 1.7
	 * nonzeros per B row, rows at least as long as there are panels). */
	starfa_cuda_sddmm_variant chosen = starfa_cuda_sddmm_choose(S->nrows, S->ncols, S->nnz, k, d.A, k, d.B, k);
	CHECK_MSG(chosen == STARFA_CUDA_SDDMM_PANEL, "AUTO chose %s for B of %lld bytes, L2 %d bytes, %lld panels",
		  starfa_cuda_sddmm_variant_name(chosen), (long long)(n * row_bytes), l2, (long long)panels);
	CHECK(starfa_cuda_sddmm_choose(S->nrows, l2 / 4 / row_bytes, S->nnz, k, d.A, k, d.B, k) !=
	      STARFA_CUDA_SDDMM_PANEL); /* B a quarter of L2 */
	CHECK(starfa_cuda_sddmm_choose(S->nrows, S->ncols, S->ncols, k, d.A, k, d.B, k) !=
	      STARFA_CUDA_SDDMM_PANEL); /* each B row read about once */
	CHECK(starfa_cuda_sddmm_choose(S->nnz, S->ncols, S->nnz, k, d.A, k, d.B, k) !=
	      STARFA_CUDA_SDDMM_PANEL); /* rows of one nonzero */
	for (int mode = 0; mode < 2; mode++) {
		CHECK(check_variant(STARFA_CUDA_SDDMM_AUTO, &t, &d, A, B, k, k, mode) == 0);
		CHECK(check_variant(STARFA_CUDA_SDDMM_PANEL, &t, &d, A, B, k, k, mode) == 0);
		CHECK(check_variant(STARFA_CUDA_SDDMM_VWARP, &t, &d, A, B, k, k, mode) == 0);
	}
	free_device_tile(&d);
	free(A);
	free(B);
	free_tile(&t);
	return 0;
}

/* A tile without nonzeros is no error for any variant or panel width and touches no memory
 * (all pointers NULL); the panel variant refuses what it cannot run before launching. */
TEST(sddmm_cuda, panel_empty_tiles_and_refusals)
{
	for (int v = 0; v < STARFA_CUDA_SDDMM_VARIANTS; v++)
		for (int mode = 0; mode < 2; mode++)
			for (int64_t m = 0; m <= 10; m += 10) {
				starfa_cuda_sddmm_variant variant = (starfa_cuda_sddmm_variant)v;
				CHECK(starfa_cuda_sddmm_variant_run(variant, m, 20, 0, NULL, NULL, NULL, NULL, 16, NULL,
								    16, 16, mode, 1.0f, 0.0f, NULL, 0) == cudaSuccess);
			}
	for (int64_t w = 0; w < 3; w++)
		CHECK(starfa_cuda_sddmm_panel_run(w, 10, 20, 0, NULL, NULL, NULL, NULL, 16, NULL, 16, 16, 1, 1.0f, 0.0f, NULL, 0) ==
		      cudaSuccess);
	CHECK(starfa_cuda_sddmm_panel_run(-1, 10, 20, 5, NULL, NULL, NULL, NULL, 16, NULL, 16, 16, 1, 1.0f, 0.0f, NULL, 0) ==
	      cudaErrorInvalidValue);
	if (!gpu_available())
		SKIP("no CUDA device (the tiles without nonzeros passed)");
	float *A = to_device(NULL, sizeof(float) * 10 * 1040), *B = to_device(NULL, sizeof(float) * 20 * 1040);
	CHECK(A && B);
	/* k not a multiple of 4, A misaligned, lda not a multiple of 4, k beyond 1024. */
	struct {
		const float *A;
		int64_t lda, k;
	} bad[] = {{A, 16, 6}, {A + 1, 16, 16}, {A, 18, 16}, {A, 1040, 1028}};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CHECK(starfa_cuda_sddmm_variant_run(STARFA_CUDA_SDDMM_PANEL, 10, 20, 5, NULL, NULL, NULL, bad[i].A,
						    bad[i].lda, B, 1040, bad[i].k, 0, 1.0f, 0.0f, NULL, 0) == cudaErrorInvalidValue);
		CHECK(starfa_cuda_sddmm_panel_run(7, 10, 20, 5, NULL, NULL, NULL, bad[i].A, bad[i].lda, B, 1040,
						  bad[i].k, 0, 1.0f, 0.0f, NULL, 0) == cudaErrorInvalidValue);
	}
	CHECK(starfa_cuda_sddmm_variant_run(STARFA_CUDA_SDDMM_PANEL, 10, 0, 5, NULL, NULL, NULL, A, 16, B, 16, 16, 0,
					    1.0f, 0.0f, NULL, 0) == cudaErrorInvalidValue); /* no columns */
	CUDA_OK(cudaGetLastError());
	cudaFree(A);
	cudaFree(B);
	return 0;
}

/* A tile with dense rows among light ones: `heavy` rows (at random places) take each column with
 * probability 0.3-0.95, the others 0-11 nonzeros; values random; columns shuffled within rows when
 * `unsorted`. */
static int make_dense_rows_tile(struct one_tile *t, int64_t m, int64_t n, int64_t heavy, int unsorted, uint64_t *rng)
{
	starfa_coo *coo = starfa_coo_new(m, n, m * n);
	if (!coo)
		return 1;
	char *is_heavy = calloc((size_t)m, 1);
	if (!is_heavy)
		return 1;
	for (int64_t h = 0; h < heavy;) {
		int64_t r = (int64_t)testing_below(rng, (uint64_t)m);
		h += !is_heavy[r];
		is_heavy[r] = 1;
	}
	for (int64_t r = 0; r < m; r++) {
		double d = is_heavy[r] ? 0.3 + 0.65 * testing_uniform(rng) : (double)testing_below(rng, 12) / (double)n;
		for (int64_t c = 0; c < n; c++)
			if (testing_uniform(rng) < d) {
				coo->row[coo->nnz] = (int32_t)r;
				coo->col[coo->nnz] = (int32_t)c;
				coo->val[coo->nnz++] = (float)(2.0 * testing_uniform(rng) - 1.0);
			}
	}
	free(is_heavy);
	starfa_csr *csr = NULL;
	int rc = starfa_csr_from_coo(coo, &csr);
	starfa_coo_free(coo);
	if (rc || tile_of(t, csr))
		return 1;
	if (unsorted)
		shuffle_rows(t, rng);
	return 0;
}

/* P (nnz + GUARD values from the device) against a double reference of P = alpha (s) <A_r, B_c> + beta P0,
 * A and B with leading dimension ld; the GUARD elements past the nonzeros must still be NaN. 0 passes;
 * otherwise the first difference is in epilogue_error. */
static char epilogue_error[256];
static int check_epilogue(const starfa_csr *S, const float *A, const float *B, int64_t k, int64_t ld, int scaled,
			  float alpha, float beta, const float *P0, const float *P)
{
	for (int64_t p = S->nnz; p < S->nnz + GUARD; p++)
		if (!isnan(P[p]))
			return snprintf(epilogue_error, sizeof epilogue_error, "wrote output element %lld of %lld",
					(long long)p, (long long)S->nnz) > 0;
	for (int64_t r = 0; r < S->nrows; r++)
		for (int64_t p = S->rowptr[r]; p < S->rowptr[r + 1]; p++) {
			double dot = 0, mag = 0;
			for (int64_t c = 0; c < k; c++) {
				double x = (double)A[r * ld + c] * (double)B[(int64_t)S->colind[p] * ld + c];
				dot += x;
				mag += fabs(x);
			}
			double want = alpha * (scaled ? S->val[p] : 1.0) * dot + (beta != 0.0f ? beta * P0[p] : 0.0);
			double bound = 1e-5 * (double)k * (mag + 1.0) + 1e-6 * fabs(want);
			if (!(fabs((double)P[p] - want) <= bound))
				return snprintf(epilogue_error, sizeof epilogue_error,
						"row %lld (%lld nonzeros) element %lld: got %g, want %g", (long long)r,
						(long long)(S->rowptr[r + 1] - S->rowptr[r]), (long long)p, P[p], want) > 0;
		}
	return 0;
}

/* The output before a run, on the host (P0) and the device (dP): NaN everywhere, then random values on
 * the nonzeros where the run accumulates (beta != 0). */
static int load_p0(float *P0, float *dP, size_t nnz, float beta, uint64_t *rng)
{
	testing_poison(P0, nnz + GUARD);
	if (beta != 0.0f)
		testing_fill_random(P0, nnz, rng);
	return cudaMemcpy(dP, P0, (nnz + GUARD) * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess;
}

/* The dense rows' path (cuBLAS SGEMM on the dense rows, picked; the virtual-warp kernel on the
 * others) against a double reference of out = alpha (s) <A_r, B_c> + beta out, with the output
 * poisoned (NaN) past the nonzeros and, with beta 0, everywhere; with several chunks, with the row
 * order kept by a pattern id (twice, the second on new values of A) and made within the call. */
TEST(sddmm_cuda, dense_rows_match_reference)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	uint64_t rng = testing_seed() + 17;
	cublasHandle_t cublas;
	CHECK(cublasCreate(&cublas) == CUBLAS_STATUS_SUCCESS);
	/* The last: many rows at k = 16 (virtual warps of 4 lanes, 8 rows a warp), so that the rows the dense
	 * product took are skipped inside warps whose other rows run, over many blocks. */
	static const int64_t ks[] = {4, 16, 64, 128, 260, 16};
	const size_t nks = sizeof ks / sizeof ks[0];
	int64_t went_dense = 0;
	for (size_t ki = 0; ki < nks; ki++) {
		int64_t k = ks[ki], m = 300 + (int64_t)testing_below(&rng, 300), n = 100 + (int64_t)testing_below(&rng, 300);
		int64_t heavy = 40 + (int64_t)testing_below(&rng, 40), ld = k + (ki % 2 ? 4 : 0);
		if (ki == nks - 1) {
			m = 20000 + (int64_t)testing_below(&rng, 5000);
			heavy = 300;
		}
		struct one_tile t;
		CHECK(make_dense_rows_tile(&t, m, n, heavy, ki % 2, &rng) == 0);
		const starfa_csr *S = t.csr;
		size_t nnz = (size_t)S->nnz, na = (size_t)(m * ld), nb = (size_t)(n * ld);
		float *A = malloc(na * sizeof(float)), *B = malloc(nb * sizeof(float));
		float *P = malloc((nnz + GUARD) * sizeof(float)), *P0 = malloc((nnz + GUARD) * sizeof(float));
		CHECK(A && B && P && P0);
		testing_fill_random(B, nb, &rng);
		struct device_tile d;
		testing_fill_random(A, na, &rng);
		CHECK(upload(&t, A, B, ld, &d) == 0);
		for (int run = 0; run < 6; run++) {
			/* Runs 0-1: pattern id, model threshold then 0.25 with chunks of 7 rows; 2: the same id on new
			 * values of A; 3-5: no id, scaled and accumulating. */
			uint64_t pattern = run < 3 ? 1000 + ki : 0;
			double min_density = run == 0 ? 0.0 : 0.25;
			int64_t chunk = run == 1 || run == 4 ? 7 : 0;
			int scaled = run >= 3 && run != 4;
			float alpha = run >= 4 ? -0.5f : 1.0f, beta = run == 5 ? 0.75f : 0.0f;
			if (run == 2) {
				testing_fill_random(A, na, &rng);
				CUDA_OK(cudaMemcpy(d.A, A, na * sizeof(float), cudaMemcpyHostToDevice));
			}
			CHECK(load_p0(P0, d.P, nnz, beta, &rng) == 0);
			int64_t dense = -1;
			GPU_STATUS_OK(starfa_cuda_sddmm_dense_rows_run(cublas, pattern, min_density, chunk, m, n, S->nnz, d.rowptr,
								d.colind, d.val, d.A, ld, d.B, ld, k, scaled, alpha, beta,
								d.P, 0, &dense));
			CUDA_OK(cudaDeviceSynchronize());
			CUDA_OK(cudaMemcpy(P, d.P, (nnz + GUARD) * sizeof(float), cudaMemcpyDeviceToHost));
			double least = (min_density > 0 ? min_density : starfa_cuda_sddmm_dense_rows_density(k)) * (double)n;
			int64_t qualify = 0;
			for (int64_t r = 0; r < m; r++)
				qualify += (double)(S->rowptr[r + 1] - S->rowptr[r]) >= least;
			CHECK_MSG(dense == (qualify >= 32 ? qualify : 0), "k=%lld run %d: %lld rows went dense, %lld qualify",
				  (long long)k, run, (long long)dense, (long long)qualify);
			went_dense += dense;
			CHECK_MSG(check_epilogue(S, A, B, k, ld, scaled, alpha, beta, P0, P) == 0, "k=%lld run %d: %s",
				  (long long)k, run, epilogue_error);
		}
		free_device_tile(&d);
		free(A);
		free(B);
		free(P);
		free(P0);
		free_tile(&t);
	}
	CHECK_MSG(went_dense > 0, "no run took the dense rows' path");
	GPU_STATUS_OK(starfa_cuda_sddmm_release());
	/* Refusals: no handle; a rank the virtual-warp kernel cannot take (k = 3). */
	starfa_gpu_status st = starfa_cuda_sddmm_dense_rows_run(NULL, 0, 0.0, 0, 10, 20, 5, NULL, NULL, NULL, NULL, 4, NULL, 4,
								4, 0, 1.0f, 0.0f, NULL, 0, NULL);
	CHECK(st.call && strstr(st.call, "cuBLAS") && st.cuda == cudaErrorInvalidValue);
	float *dA = NULL;
	CUDA_OK(cudaMalloc((void **)&dA, 4096));
	st = starfa_cuda_sddmm_dense_rows_run(cublas, 0, 0.0, 0, 10, 20, 5, NULL, NULL, NULL, dA, 3, dA, 3, 3, 0, 1.0f,
					      0.0f, NULL, 0, NULL);
	CHECK(st.call && strstr(st.call, "16-byte") && st.cuda == cudaErrorInvalidValue);
	/* thresholds the kept row order cannot serve */
	static const double bad_density[] = {0.01, -1.0, NAN};
	for (size_t i = 0; i < sizeof bad_density / sizeof bad_density[0]; i++) {
		st = starfa_cuda_sddmm_dense_rows_run(cublas, 0, bad_density[i], 0, 10, 20, 5, NULL, NULL, NULL, dA, 4, dA,
						      4, 4, 0, 1.0f, 0.0f, NULL, 0, NULL);
		CHECK_MSG(st.call && strstr(st.call, "min_density") && st.cuda == cudaErrorInvalidValue, "density %g",
			  bad_density[i]);
	}
	cudaFree(dA);
	cublasDestroy(cublas);
	return 0;
}

/* The codelet's kernel: the variant timed fastest on each tile at its first call, kept by the pattern id.
 * An accumulating call (beta != 0) must leave out's values alone while it times (they are an input), and
 * the kept choice must give the same results at the next call. Tiles where each candidate can win: dense
 * rows (k = 128), B in shared memory (k = 16, few columns), a skewed random one (k = 64), few rows and
 * many columns (k = 32, A's rows staged). */
TEST(sddmm_cuda, tuned_matches_reference_and_keeps_a_choice)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	uint64_t rng = testing_seed() + 18;
	cublasHandle_t cublas;
	CHECK(cublasCreate(&cublas) == CUBLAS_STATUS_SUCCESS);
	static const int64_t ks[] = {128, 16, 64, 32};
	for (int shape = 0; shape < 4; shape++) {
		int64_t k = ks[shape];
		struct one_tile t;
		if (shape == 0)
			CHECK(make_dense_rows_tile(&t, 600, 250, 60, 1, &rng) == 0);
		else if (shape == 3) /* few rows, wide: A's rows staged, by column */
			CHECK(make_tile(&t, 200, 20000, 150000, 0.0, &rng) == 0);
		else
			CHECK(make_tile(&t, 900, shape == 1 ? 120 : 700, 30000, 1.0, &rng) == 0);
		const starfa_csr *S = t.csr;
		size_t nnz = (size_t)S->nnz, na = (size_t)(S->nrows * k), nb = (size_t)(S->ncols * k);
		float *A = malloc(na * sizeof(float)), *B = malloc(nb * sizeof(float));
		float *P = malloc((nnz + GUARD) * sizeof(float)), *P0 = malloc((nnz + GUARD) * sizeof(float));
		CHECK(A && B && P && P0);
		testing_fill_random(A, na, &rng);
		testing_fill_random(B, nb, &rng);
		struct device_tile d;
		CHECK(upload(&t, A, B, k, &d) == 0);
		uint64_t pattern = 2000 + (uint64_t)shape;
		CHECK(starfa_cuda_sddmm_tuned_kept(pattern, k) == NULL);
		for (int call = 0; call < 3; call++) {
			/* 0: times the candidates, accumulating; 1: the kept choice, accumulating; 2: overwriting. */
			float beta = call < 2 ? 0.5f : 0.0f;
			CHECK(load_p0(P0, d.P, nnz, beta, &rng) == 0);
			GPU_STATUS_OK(starfa_cuda_sddmm_tuned(cublas, pattern, S->nrows, S->ncols, S->nnz, d.rowptr, d.colind,
							      d.val, d.A, k, d.B, k, k, 1, 2.0f, beta, d.P, 0));
			CUDA_OK(cudaDeviceSynchronize());
			CUDA_OK(cudaMemcpy(P, d.P, (nnz + GUARD) * sizeof(float), cudaMemcpyDeviceToHost));
			CHECK_MSG(check_epilogue(S, A, B, k, k, 1, 2.0f, beta, P0, P) == 0, "shape %d k=%lld call %d (%s): %s",
				  shape, (long long)k, call, starfa_cuda_sddmm_tuned_kept(pattern, k), epilogue_error);
		}
		const char *kept = starfa_cuda_sddmm_tuned_kept(pattern, k);
		CHECK(kept != NULL);
		testing_note("shape %d: kept %s", shape, kept);
		free_device_tile(&d);
		free(A);
		free(B);
		free(P);
		free(P0);
		free_tile(&t);
	}
	GPU_STATUS_OK(starfa_cuda_sddmm_release());
	CHECK(starfa_cuda_sddmm_tuned_kept(2000, 128) == NULL);
	cublasDestroy(cublas);
	return 0;
}

/* A's rows staged by blocks, the nonzeros walked by column: the same bits as the virtual-warp kernel (the
 * same lanes, products and shuffles in the same order), and the reference's values, with the output
 * poisoned past the nonzeros. Block heights from one row to the whole tile and the model's; empty rows,
 * rows in any column order, every group shape, padded leading dimensions, scaled and accumulating
 * epilogues; an order kept by a pattern id (used again on new values of A) and one made within the call. */
TEST(sddmm_cuda, by_column_matches_vwarp_and_reference)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	uint64_t rng = testing_seed() + 19;
	static const int64_t ks[] = {4, 8, 16, 32, 64, 128, 200, 260, 1024}; /* every group shape */
	const size_t nks = sizeof ks / sizeof ks[0];
	int64_t several_blocks = 0;
	for (size_t ki = 0; ki < nks; ki++) {
		int64_t k = ks[ki], ld = k + (ki % 2 ? 4 : 0);
		int64_t m = 50 + (int64_t)testing_below(&rng, 1500), n = 20 + (int64_t)testing_below(&rng, 4000);
		struct one_tile t;
		CHECK(make_tile(&t, m, n, k >= 1024 ? 6000 : 20000, 1.5, &rng) == 0);
		if (ki % 3 == 1)
			shuffle_rows(&t, &rng);
		const starfa_csr *S = t.csr;
		size_t nnz = (size_t)S->nnz, na = (size_t)(m * ld), nb = (size_t)(n * ld);
		float *A = malloc(na * sizeof(float)), *B = malloc(nb * sizeof(float));
		float *P = malloc((nnz + GUARD) * sizeof(float)), *P0 = malloc((nnz + GUARD) * sizeof(float));
		float *Pv = malloc((nnz + GUARD) * sizeof(float));
		CHECK(A && B && P && P0 && Pv);
		testing_fill_random(A, na, &rng);
		testing_fill_random(B, nb, &rng);
		struct device_tile d;
		CHECK(upload(&t, A, B, ld, &d) == 0);
		/* Every height asked for fits a block's shared memory (rows of at most k + 4 floats staged). */
		int smem_limit = 0;
		CUDA_OK(cudaDeviceGetAttribute(&smem_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
		const int64_t tallest = smem_limit / ((k + 4) * (int64_t)sizeof(float));
		const int64_t heights[] = {0, 1, 7, 64 < tallest ? 64 : tallest, m < tallest ? m : tallest};
		for (int run = 0; run < 7; run++) {
			/* Runs 0-4: each height, kept by a pattern id; 5: the model's height by run 1's id (kept for
			 * blocks of one row: a plan must not be used at another height) on new values of A; 6: no id,
			 * the model's height. */
			int64_t height = run < 5 ? heights[run] : 0;
			uint64_t pattern = run < 6 ? 3000 + ki * 8 + (uint64_t)(run < 5 ? run : 1) : 0;
			int scaled = run % 2;
			float alpha = run % 3 ? 1.0f : -0.5f, beta = run >= 3 ? 0.75f : 0.0f;
			if (run == 5) {
				testing_fill_random(A, na, &rng);
				CUDA_OK(cudaMemcpy(d.A, A, na * sizeof(float), cudaMemcpyHostToDevice));
			}
			CHECK(load_p0(P0, d.P, nnz, beta, &rng) == 0);
			CUDA_OK(starfa_cuda_sddmm_variant_run(STARFA_CUDA_SDDMM_VWARP, m, n, S->nnz, d.rowptr, d.colind, d.val,
							      d.A, ld, d.B, ld, k, scaled, alpha, beta, d.P, 0));
			CUDA_OK(cudaDeviceSynchronize());
			CUDA_OK(cudaMemcpy(Pv, d.P, (nnz + GUARD) * sizeof(float), cudaMemcpyDeviceToHost));
			CUDA_OK(cudaMemcpy(d.P, P0, (nnz + GUARD) * sizeof(float), cudaMemcpyHostToDevice));
			int64_t rows = -1;
			GPU_STATUS_OK(starfa_cuda_sddmm_by_column_run(pattern, height, m, n, S->nnz, d.rowptr, d.colind, d.val,
								      d.A, ld, d.B, ld, k, scaled, alpha, beta, d.P, 0,
								      &rows));
			CUDA_OK(cudaDeviceSynchronize());
			CUDA_OK(cudaMemcpy(P, d.P, (nnz + GUARD) * sizeof(float), cudaMemcpyDeviceToHost));
			CHECK_MSG(height > 0 ? rows == (height < m ? height : m) : rows >= 1 && rows <= m,
				  "k=%lld run %d: block of %lld rows",
				  (long long)k, run, (long long)rows);
			several_blocks += rows < m;
			CHECK_MSG(check_epilogue(S, A, B, k, ld, scaled, alpha, beta, P0, P) == 0, "k=%lld run %d rows %lld: %s",
				  (long long)k, run, (long long)rows, epilogue_error);
			size_t differ = 0;
			for (size_t p = 0; p < nnz; p++)
				differ += memcmp(&P[p], &Pv[p], sizeof(float)) != 0;
			CHECK_MSG(differ == 0, "k=%lld run %d rows %lld: %zu of %zu outputs differ from the virtual-warp "
				  "kernel's bits", (long long)k, run, (long long)rows, differ, nnz);
		}
		free_device_tile(&d);
		free(A);
		free(B);
		free(P);
		free(P0);
		free(Pv);
		free_tile(&t);
	}
	CHECK(several_blocks > 0);
	GPU_STATUS_OK(starfa_cuda_sddmm_release());
	/* Refusals: a rank without 16-byte rows; a block too tall for shared memory; a negative height. */
	float *dA = NULL;
	CUDA_OK(cudaMalloc((void **)&dA, 1 << 20));
	starfa_gpu_status st = starfa_cuda_sddmm_by_column_run(0, 0, 10, 20, 5, NULL, NULL, NULL, dA, 3, dA, 3, 3, 0,
							       1.0f, 0.0f, NULL, 0, NULL);
	CHECK(st.call && strstr(st.call, "16-byte") && st.cuda == cudaErrorInvalidValue);
	st = starfa_cuda_sddmm_by_column_run(0, 100000, 200000, 20, 5, NULL, NULL, NULL, dA, 1024, dA, 1024, 1024, 0,
					     1.0f, 0.0f, NULL, 0, NULL);
	CHECK_MSG(st.call && strstr(st.call, "shared memory") && st.cuda == cudaErrorInvalidValue, "%s",
		  starfa_gpu_status_string(st));
	st = starfa_cuda_sddmm_by_column_run(0, -1, 10, 20, 5, NULL, NULL, NULL, dA, 4, dA, 4, 4, 0, 1.0f, 0.0f, NULL, 0,
					     NULL);
	CHECK(st.call && st.cuda == cudaErrorInvalidValue);
	cudaFree(dA);
	return 0;
}

/* StarPU reports a CUDA worker and runs every tile on it when CPUs are kept out. */
TEST(sddmm_cuda, task_graph_on_cuda_workers)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	starfa_options opts;
	starfa_options_default(&opts);
	opts.ncpus = 0;
	CHECK_OK(testing_runtime_with(&opts));
	CHECK(starfa_worker_count(STARFA_WORKER_CUDA) > 0);
	uint64_t rng = testing_seed() + 11;
	starfa_csr *S = testing_random_csr(3000, 2000, 100000, 1.0, &rng);
	CHECK(S);
	int64_t k = 64;
	float *A = malloc(sizeof(float) * (size_t)(S->nrows * k)), *B = malloc(sizeof(float) * (size_t)(S->ncols * k));
	float *P = malloc(sizeof(float) * (size_t)S->nnz);
	CHECK(A && B && P);
	testing_fill_random(A, (size_t)(S->nrows * k), &rng);
	testing_fill_random(B, (size_t)(S->ncols * k), &rng);
	testing_poison(P, (size_t)S->nnz);
	starfa_tiling_options tiling = {6, 5, 0};
	starfa_tiled *t = NULL;
	starfa_dense *a = NULL, *b = NULL;
	starfa_sparse_values *p = NULL;
	CHECK_OK(starfa_tiled_create(S, &tiling, &t));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, A, k, &a));
	CHECK_OK(starfa_dense_create(t, STARFA_COLS, B, k, &b));
	CHECK_OK(starfa_sparse_values_create(t, STARFA_ROWS, &p));
	starfa_stats_reset();
	CHECK_OK(starfa_insert_sddmm(t, a, b, STARFA_SDDMM_SCALED, p));
	CHECK_OK(starfa_wait());
	starfa_worker_stats st;
	starfa_stats_get(&st);
	CHECK_MSG(st.tasks[STARFA_WORKER_CUDA] == 30 && st.tasks[STARFA_WORKER_CPU] == 0, "cuda %lld cpu %lld tasks",
		  (long long)st.tasks[STARFA_WORKER_CUDA], (long long)st.tasks[STARFA_WORKER_CPU]);
	CHECK_OK(starfa_sparse_values_gather(p, P));
	CHECK_OK(starfa_check_sddmm(S, A, B, k, STARFA_SDDMM_SCALED, P, NULL));
	/* the squared error by band tasks, one a band on the CUDA workers */
	starfa_stats_reset();
	double sq = NAN, want_sq = reference_sqerr(S, A, B, k, k, -0.5f, 0, S->nrows);
	CHECK_OK(starfa_reduce_sqerr(t, STARFA_ROWS, a, b, -0.5f, &sq));
	starfa_stats_get(&st);
	CHECK_MSG(fabs(sq - want_sq) <= 1e-5 * want_sq && st.tasks[STARFA_WORKER_CUDA] == 6 && st.tasks[STARFA_WORKER_CPU] == 0,
		  "squared error %.9g, reference %.9g; cuda %lld cpu %lld tasks", sq, want_sq,
		  (long long)st.tasks[STARFA_WORKER_CUDA], (long long)st.tasks[STARFA_WORKER_CPU]);
	starfa_sparse_values_free(p);
	starfa_dense_free(a);
	starfa_dense_free(b);
	starfa_tiled_free(t);
	starfa_csr_free(S);
	free(A);
	free(B);
	free(P);
	a = NULL;

	/* Tiles with dense rows (the codelet's dense rows' path, its row order kept by the tile's serial):
	 * twice, the second time on new values of A, each checked from a poisoned output. */
	struct one_tile dt;
	CHECK(make_dense_rows_tile(&dt, 800, 300, 90, 0, &rng) == 0);
	S = dt.csr;
	k = 128;
	A = malloc(sizeof(float) * (size_t)(S->nrows * k));
	B = malloc(sizeof(float) * (size_t)(S->ncols * k));
	P = malloc(sizeof(float) * (size_t)S->nnz);
	CHECK(A && B && P);
	testing_fill_random(B, (size_t)(S->ncols * k), &rng);
	starfa_tiling_options two = {2, 1, 0};
	CHECK_OK(starfa_tiled_create(S, &two, &t));
	CHECK_OK(starfa_dense_create(t, STARFA_COLS, B, k, &b));
	CHECK_OK(starfa_sparse_values_create(t, STARFA_ROWS, &p));
	for (int pass = 0; pass < 2; pass++) {
		/* New values of A: a row the second pass left alone keeps the first pass's result and fails. */
		testing_fill_random(A, (size_t)(S->nrows * k), &rng);
		starfa_dense_free(a);
		a = NULL;
		CHECK_OK(starfa_dense_create(t, STARFA_ROWS, A, k, &a));
		testing_poison(P, (size_t)S->nnz);
		CHECK_OK(starfa_insert_sddmm(t, a, b, STARFA_SDDMM_PATTERN, p));
		CHECK_OK(starfa_wait());
		CHECK_OK(starfa_sparse_values_gather(p, P));
		CHECK_OK(starfa_check_sddmm(S, A, B, k, STARFA_SDDMM_PATTERN, P, NULL));
	}
	starfa_sparse_values_free(p);
	starfa_dense_free(a);
	starfa_dense_free(b);
	starfa_tiled_free(t);
	free_tile(&dt);
	free(A);
	free(B);
	free(P);
	return 0;
}

/* The CUDA squared-error kernel against the CPU kernel and the reference: heavy rows (spans of a row
 * shared by groups), empty rows, ranks across the lane widths, padded and odd leading dimensions, an
 * unaligned A (element loads); it adds to the sum it is given. Two tiles: a small one (one nonzero a
 * group), and a tall narrow one of about 6 nonzeros a row, big enough that groups take several nonzeros
 * each, in runs (few nonzeros a row for the group count) or interleaved (32-lane groups). */
TEST(sddmm_cuda, sqerr_matches_cpu)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	uint64_t rng = testing_seed() + 42;
	static const int64_t shapes[][3] = {{700, 300, 20}, {60000, 64, 300}}; /* rows, columns, heavy rows */
	for (int sh = 0; sh < 2; sh++) {
		struct one_tile t;
		CHECK(make_dense_rows_tile(&t, shapes[sh][0], shapes[sh][1], shapes[sh][2], 0, &rng) == 0);
		const starfa_csr *S = t.csr;
		/* after 257, a k for each virtual-warp shape not met before it (16-byte loads: V x J float4 a row) */
		static const int64_t ks[] = {1, 3, 4, 16, 20, 33, 128, 257, 8, 32, 64, 256, 512, 1024};
		for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++) {
			const int64_t k = ks[q], ld = q % 2 ? (k + 3) / 4 * 4 + 4 : k, off = q == 4; /* k 20 from A + 1 */
			float *A = malloc(sizeof(float) * (size_t)(S->nrows * ld + 1)), *B = malloc(sizeof(float) * (size_t)(S->ncols * ld));
			CHECK(A && B);
			testing_fill_random(A, (size_t)(S->nrows * ld + 1), &rng);
			testing_fill_random(B, (size_t)(S->ncols * ld), &rng);
			const float shift = 0.25f;
			const double cpu = starfa_cpu_sqerr(S->nrows, t.rowptr, t.colind, S->val, A + off, ld, B, ld, k, shift);
			const double want = reference_sqerr(S, A + off, B, k, ld, shift, 0, S->nrows);
			uint32_t *d_rowptr = to_device(t.rowptr, sizeof(uint32_t) * (size_t)(S->nrows + 1));
			uint32_t *d_colind = to_device(t.colind, sizeof(uint32_t) * (size_t)S->nnz);
			float *d_val = to_device(S->val, sizeof(float) * (size_t)S->nnz);
			float *d_A = to_device(A, sizeof(float) * (size_t)(S->nrows * ld + 1));
			float *d_B = to_device(B, sizeof(float) * (size_t)(S->ncols * ld));
			const double start = 2.5;
			double *d_sum = to_device(&start, sizeof start), got = NAN;
			CHECK(d_rowptr && d_colind && d_val && d_A && d_B && d_sum);
			CUDA_OK(starfa_cuda_sqerr(S->nrows, S->nnz, d_rowptr, d_colind, d_val, d_A + off, ld, d_B, ld, k, shift, d_sum, 0));
			CUDA_OK(cudaMemcpy(&got, d_sum, sizeof got, cudaMemcpyDeviceToHost));
			CHECK_MSG(fabs(got - start - want) <= 1e-5 * want && fabs(cpu - want) <= 1e-5 * want,
				  "tile %d k %lld ld %lld: gpu %.9g cpu %.9g reference %.9g", sh, (long long)k, (long long)ld,
				  got - start, cpu, want);
			CUDA_OK(starfa_cuda_sqerr(S->nrows, 0, d_rowptr, d_colind, d_val, d_A, ld, d_B, ld, k, shift, d_sum, 0));
			CHECK(starfa_cuda_sqerr(S->nrows, S->nnz, d_rowptr, d_colind, d_val, d_A, ld, d_B, ld, k, shift, NULL, 0) ==
			      cudaErrorInvalidValue);
			cudaFree(d_rowptr);
			cudaFree(d_colind);
			cudaFree(d_val);
			cudaFree(d_A);
			cudaFree(d_B);
			cudaFree(d_sum);
			free(A);
			free(B);
		}
		free_tile(&t);
	}
	return 0;
}

/* The band form, starfa_cuda_sqerr_tiles, against the CPU kernel over the same tiles: 40 tiles sharing
 * their rows' A (two launches of the batched kernel), of several widths and densities, one empty, one
 * with an odd leading dimension of B (its own launch), at a k of 16-byte loads and at one without. */
TEST(sddmm_cuda, sqerr_tiles_match_cpu)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	enum { NT = 40 };
	const int64_t m = 3000;
	uint64_t rng = testing_seed() + 43;
	struct one_tile t[NT];
	for (int i = 0; i < NT; i++)
		CHECK(make_dense_rows_tile(&t[i], m, i == 7 ? 1 : 20 + 13 * (i % 5), i % 3 ? 0 : 10, 0, &rng) == 0);
	/* the empty tile: its pattern dropped */
	t[7].csr->nnz = 0;
	for (int64_t r = 0; r <= m; r++)
		t[7].rowptr[r] = 0;
	static const int64_t ks[] = {16, 36, 7};
	for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++) {
		const int64_t k = ks[q];
		const float shift = -0.125f;
		float *A = malloc(sizeof(float) * (size_t)(m * k));
		CHECK(A);
		testing_fill_random(A, (size_t)(m * k), &rng);
		float *d_A = to_device(A, sizeof(float) * (size_t)(m * k));
		starfa_cuda_sqerr_tile dt[NT];
		float *Bs[NT];
		double want = 0;
		for (int i = 0; i < NT; i++) {
			const starfa_csr *S = t[i].csr;
			const int64_t ldb = i == 11 ? k + 1 : k;
			Bs[i] = malloc(sizeof(float) * (size_t)(S->ncols * ldb));
			CHECK(Bs[i]);
			testing_fill_random(Bs[i], (size_t)(S->ncols * ldb), &rng);
			want += starfa_cpu_sqerr(S->nrows, t[i].rowptr, t[i].colind, S->val, A, k, Bs[i], ldb, k, shift);
			dt[i] = (starfa_cuda_sqerr_tile){S->nrows,
							 S->nnz,
							 to_device(t[i].rowptr, sizeof(uint32_t) * (size_t)(S->nrows + 1)),
							 S->nnz ? to_device(t[i].colind, sizeof(uint32_t) * (size_t)S->nnz) : NULL,
							 S->nnz ? to_device(S->val, sizeof(float) * (size_t)S->nnz) : NULL,
							 to_device(Bs[i], sizeof(float) * (size_t)(S->ncols * ldb)),
							 ldb};
			CHECK(dt[i].rowptr && dt[i].B && (S->nnz == 0 || (dt[i].colind && dt[i].sval)));
		}
		const double start = -1.5;
		double *d_sum = to_device(&start, sizeof start), got = NAN;
		CHECK(d_A && d_sum);
		CUDA_OK(starfa_cuda_sqerr_tiles(dt, NT, d_A, k, k, shift, d_sum, 0));
		CUDA_OK(cudaMemcpy(&got, d_sum, sizeof got, cudaMemcpyDeviceToHost));
		CHECK_MSG(fabs(got - start - want) <= 1e-5 * want, "k %lld: gpu %.9g cpu %.9g", (long long)k, got - start, want);
		CHECK(starfa_cuda_sqerr_tiles(dt, NT, d_A, k, k, shift, NULL, 0) == cudaErrorInvalidValue);
		CHECK(starfa_cuda_sqerr_tiles(NULL, 2, d_A, k, k, shift, d_sum, 0) == cudaErrorInvalidValue);
		CUDA_OK(starfa_cuda_sqerr_tiles(dt, 0, d_A, k, k, shift, d_sum, 0));
		for (int i = 0; i < NT; i++) {
			cudaFree((void *)dt[i].rowptr);
			cudaFree((void *)dt[i].colind);
			cudaFree((void *)dt[i].sval);
			cudaFree((void *)dt[i].B);
			free(Bs[i]);
		}
		cudaFree(d_A);
		cudaFree(d_sum);
		free(A);
	}
	for (int i = 0; i < NT; i++)
		free_tile(&t[i]);
	return 0;
}

#else

TEST(sddmm_cuda, not_built)
{
	SKIP("starfa was configured without CUDA");
}

#endif
