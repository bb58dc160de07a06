/* Batched small SPD solves M_u x_u = b_u, exact (LAPACKE Cholesky) or by a few warm-started conjugate
 * gradient steps, with M_u assembled on the fly from FP32 or FP16 storage; OpenMP on the CPU. */
#include "cpu/solve.h"

#include "cpu/cg.h"
#include "cpu/clones.h"
#include "cpu/half.h"

#include <float.h>
#include <lapacke.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

struct problem {
	int64_t k;
	const void *A;
	int fp16;
	const float *b;
	int64_t ldb;
	const float *lambda, *scale;
	int64_t info_ld;
	const float *G;
	starfa_cpu_solver solver;
	int cg_steps;
	float *X;
	int64_t ldx;
};

/* One thread's scratch: M (k x k) and four k-vectors. */
struct work {
	float *M, *r, *p, *q, *row;
};

/* Row a of M_u into out (k floats). */
static inline void system_row(const struct problem *pb, int64_t u, int64_t a, float s, float lambda, float *out)
{
	const int64_t k = pb->k;
	if (pb->fp16) {
		starfa_half_load((const uint16_t *)pb->A + (u * k + a) * k, out, k);
		for (int64_t c = 0; c < k; c++)
			out[c] *= s;
	} else {
		const float *src = (const float *)pb->A + (u * k + a) * k;
		for (int64_t c = 0; c < k; c++)
			out[c] = s * src[c];
	}
	if (pb->G)
		for (int64_t c = 0; c < k; c++)
			out[c] += pb->G[a * k + c];
	out[a] += lambda;
}

/* q = M_u p, M_u read from its storage (never formed: CG reads each A_u once per step). M_u is symmetric,
 * so q is summed as p[c] times row c: whole-row vector updates, no horizontal sums. row is scratch for
 * one converted FP16 row. */
STARFA_CPU_CLONES
static void matvec(const struct problem *pb, int64_t u, float s, float lambda, const float *restrict p,
		   float *restrict q, float *restrict row)
{
	const int64_t k = pb->k;
	for (int64_t a = 0; a < k; a++)
		q[a] = lambda * p[a];
	for (int64_t c = 0; c < k; c++) {
		const float *restrict src;
		if (pb->fp16) {
			starfa_half_load((const uint16_t *)pb->A + (u * k + c) * k, row, k);
			src = row;
		} else {
			src = (const float *)pb->A + (u * k + c) * k;
		}
		const float sp = s * p[c];
		if (pb->G) {
			const float *restrict g = pb->G + c * k;
			const float gp = p[c];
#pragma omp simd
			for (int64_t a = 0; a < k; a++)
				q[a] += sp * src[a] + gp * g[a];
		} else {
#pragma omp simd
			for (int64_t a = 0; a < k; a++)
				q[a] += sp * src[a];
		}
	}
}

/* Returns 0 solved, 1 not positive definite (x unchanged). */
static int solve_cholesky(const struct problem *pb, int64_t u, float s, float lambda, struct work *w, float *x)
{
	const int64_t k = pb->k;
	for (int64_t a = 0; a < k; a++)
		system_row(pb, u, a, s, lambda, w->M + a * k);
	/* M is symmetric, so its row-major upper triangle is LAPACK's column-major lower one. */
	lapack_int info = LAPACKE_spotrf_work(LAPACK_COL_MAJOR, 'L', (lapack_int)k, w->M, (lapack_int)k);
	if (info != 0)
		return 1;
	memcpy(w->r, pb->b + u * pb->ldb, (size_t)k * sizeof(float));
	info = LAPACKE_spotrs_work(LAPACK_COL_MAJOR, 'L', (lapack_int)k, 1, w->M, (lapack_int)k, w->r, (lapack_int)k);
	if (info != 0)
		return 1;
	memcpy(x, w->r, (size_t)k * sizeof(float));
	return 0;
}

struct solve_apply {
	const struct problem *pb;
	int64_t u;
	float s, lambda;
	float *row;
};

static void solve_apply(void *ctx, const float *restrict p, float *restrict q)
{
	const struct solve_apply *c = ctx;
	matvec(c->pb, c->u, c->s, c->lambda, p, q, c->row);
}

/* The CG of cpu/cg.h from x (the warm start): 0 done, 1 a direction of non-positive curvature (M not
 * positive definite: stopped there), 2 a non-finite residual or curvature. */
static int solve_cg(const struct problem *pb, int64_t u, float s, float lambda, struct work *w, float *x)
{
	const int64_t k = pb->k;
	const float *b = pb->b + u * pb->ldb;
	matvec(pb, u, s, lambda, x, w->q, w->row);
	struct solve_apply ctx = {pb, u, s, lambda, w->row};
	return starfa_cpu_cg_steps(k, k, b, x, w->r, w->p, w->q, pb->cg_steps, solve_apply, &ctx);
}

/* Counts a failed row under the input that was not finite, if any, else as not positive definite
 * (when it was that) or as the solve's own failure. */
static void blame(const struct problem *pb, int64_t u, int not_spd, struct work *w, uint32_t *st)
{
	const int64_t k = pb->k;
	int bad_a = 0, bad_b = !starfa_cpu_all_finite(pb->b + u * pb->ldb, k);
	for (int64_t a = 0; a < k && !bad_a; a++) {
		system_row(pb, u, a, pb->scale ? pb->scale[u * pb->info_ld] : 1.0f, pb->lambda[u * pb->info_ld], w->row);
		bad_a = !starfa_cpu_all_finite(w->row, k);
	}
	st[STARFA_SOLVE_BAD_ROWS]++;
	st[STARFA_SOLVE_NONFINITE_A] += bad_a;
	st[STARFA_SOLVE_NONFINITE_B] += bad_b;
	st[STARFA_SOLVE_NOT_SPD] += not_spd == 1 && !bad_a && !bad_b;
	if ((uint32_t)u < st[STARFA_SOLVE_FIRST_BAD_ROW])
		st[STARFA_SOLVE_FIRST_BAD_ROW] = (uint32_t)u;
}

static void solve_rows(const struct problem *pb, int64_t r0, int64_t r1, struct work *w, uint32_t *st)
{
	for (int64_t u = r0; u < r1; u++) {
		float s = pb->scale ? pb->scale[u * pb->info_ld] : 1.0f, lambda = pb->lambda[u * pb->info_ld];
		float *x = pb->X + u * pb->ldx;
		int failed = pb->solver == STARFA_CPU_CHOLESKY ? solve_cholesky(pb, u, s, lambda, w, x)
							       : solve_cg(pb, u, s, lambda, w, x);
		if (failed || !starfa_cpu_all_finite(x, pb->k))
			blame(pb, u, failed, w, st);
	}
}

static int work_alloc(struct work *w, int64_t k)
{
	w->M = malloc((size_t)(k * k + 4 * k) * sizeof(float));
	if (!w->M)
		return -1;
	w->r = w->M + k * k;
	w->p = w->r + k;
	w->q = w->p + k;
	w->row = w->q + k;
	return 0;
}

int starfa_cpu_solve(int64_t nrows, int64_t k, const void *A, int fp16, const float *b, int64_t ldb,
		     const float *lambda, const float *scale, int64_t info_ld, const float *G, starfa_cpu_solver solver,
		     int cg_steps, float *X, int64_t ldx, uint32_t *status, int nthreads)
{
	const struct problem pb = {k, A, fp16, b, ldb, lambda, scale, info_ld, G, solver, cg_steps, X, ldx};
	memset(status, 0, STARFA_SOLVE_STATUS_WORDS * sizeof *status);
	status[STARFA_SOLVE_FIRST_BAD_ROW] = UINT32_MAX;
	int failed = 0, parts = nthreads > 1 ? nthreads : 1;
#pragma omp parallel num_threads(parts) reduction(| : failed)
	{
		int t = omp_get_thread_num(), n = omp_get_num_threads();
		uint32_t st[STARFA_SOLVE_STATUS_WORDS] = {0};
		st[STARFA_SOLVE_FIRST_BAD_ROW] = UINT32_MAX;
		struct work w;
		if (work_alloc(&w, k) == 0) {
			solve_rows(&pb, nrows * t / n, nrows * (t + 1) / n, &w, st);
			free(w.M);
		} else {
			failed = 1;
		}
#pragma omp critical(starfa_cpu_solve_status)
		{
			for (int i = 0; i < STARFA_SOLVE_FIRST_BAD_ROW; i++)
				status[i] += st[i];
			if (st[STARFA_SOLVE_FIRST_BAD_ROW] < status[STARFA_SOLVE_FIRST_BAD_ROW])
				status[STARFA_SOLVE_FIRST_BAD_ROW] = st[STARFA_SOLVE_FIRST_BAD_ROW];
		}
	}
	return failed ? -1 : 0;
}
