/* ALS rows built and solved in one pass: per row, the entries of every tile are gathered into a
 * zero-padded panel (cpu/panel.h), b_u summed from it, and the system solved at once, from a k x k sum
 * that stays in cache (Cholesky, or CG on it) or matrix-free by CG; exact explicit rows with fewer
 * entries than k in their n x n form (solve_short). Nothing but x_u is written. */
#include "cpu/rowsolve.h"

#include "cpu/cg.h"
#include "cpu/clones.h"
#include "cpu/panel.h"

#include <float.h>
#include <lapacke.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* One thread's scratch: the row's panel P (n x kp) and weighted copy Q, its weights and targets, the
 * kp x kp sums C, and kp-vectors. */
struct work {
	float *P, *Q, *w, *t, *C, *b, *r, *p, *q;
	int64_t n; /* entries gathered */
	int full;  /* C holds every element, not only the upper blocks */
};

static void *alloc64(size_t bytes)
{
	return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

static void work_free(struct work *w)
{
	free(w->P);
	free(w->Q);
	free(w->w);
	free(w->t);
	free(w->C);
}

static int work_alloc(struct work *w, int64_t most, int64_t kp)
{
	if (most < 1)
		most = 1;
	w->P = alloc64((size_t)(most * kp) * sizeof(float));
	w->Q = alloc64((size_t)(most * kp) * sizeof(float));
	w->w = alloc64((size_t)most * sizeof(float));
	w->t = alloc64((size_t)most * sizeof(float));
	w->C = alloc64((size_t)(kp * kp + 4 * kp) * sizeof(float));
	if (!w->P || !w->Q || !w->w || !w->t || !w->C) {
		work_free(w);
		return -1;
	}
	w->b = w->C + kp * kp;
	w->r = w->b + kp;
	w->p = w->r + kp;
	w->q = w->p + kp;
	return 0;
}

/* Gathers row u's entries of every tile into P (and weights into w), and sums b_u. */
STARFA_CPU_CLONES
static void gather(const struct starfa_cpu_rowsolve *pb, int64_t u, int64_t kp, struct work *restrict wk)
{
	const int64_t k = pb->k;
	float *restrict b = wk->b;
	memset(b, 0, (size_t)kp * sizeof(float));
	int64_t n = 0;
	for (int t = 0; t < pb->ntiles; t++) {
		const struct starfa_cpu_rowsolve_tile *tl = &pb->tiles[t];
		for (uint32_t e = tl->rowptr[u]; e < tl->rowptr[u + 1]; e++, n++) {
			const int64_t c = tl->colind[e];
			float *restrict row = wk->P + n * kp;
			starfa_panel_gather(row, tl->theta + c * tl->ld, k, kp);
			float target;
			if (pb->implicit) {
				wk->w[n] = pb->alpha * tl->val[e];
				target = 1.0f + wk->w[n];
			} else {
				wk->w[n] = 1.0f;
				target = tl->val[e] - pb->mu - (tl->offset ? tl->offset[c * tl->ld] : 0.0f);
			}
			wk->t[n] = target;
#pragma omp simd
			for (int64_t d = 0; d < kp; d++)
				b[d] += target * row[d];
		}
	}
	wk->n = n;
}

/* Rows of at most this many entries get the whole of C: cheaper than mirroring (cpu/hermitian.c). */
#define FULL_ROW_NNZ 24

/* C = sum w P P^T (kp x kp; the upper blocks only for long rows, which Cholesky's 'L' column-major
 * read of the row-major upper triangle needs, and CG mirrors). */
STARFA_CPU_CLONES
static void form(const struct starfa_cpu_rowsolve *pb, int64_t kp, struct work *restrict wk)
{
	const int64_t n = wk->n;
	wk->full = n <= FULL_ROW_NNZ;
	if (n == 0) {
		memset(wk->C, 0, (size_t)(kp * kp) * sizeof(float));
		return;
	}
	const float *Q = wk->P;
	if (pb->implicit) {
		for (int64_t i = 0; i < n; i++) {
			const float s = wk->w[i];
#pragma omp simd
			for (int64_t d = 0; d < kp; d++)
				wk->Q[i * kp + d] = s * wk->P[i * kp + d];
		}
		Q = wk->Q;
	}
	for (int64_t start = 0; start < n; start += STARFA_PANEL_CHUNK) {
		int64_t m = n - start < STARFA_PANEL_CHUNK ? n - start : STARFA_PANEL_CHUNK;
		starfa_panel_sum(m, kp, wk->P + start * kp, Q + start * kp, wk->C, start == 0, !wk->full);
	}
}

/* q = M_u p: from C (full, ld kp) plus G and lambda, or matrix-free from the panel. */
STARFA_CPU_CLONES
static void matvec(const struct starfa_cpu_rowsolve *pb, int64_t kp, const struct work *restrict wk, int free_form,
		   float lambda, const float *restrict p, float *restrict q)
{
	const int64_t k = pb->k;
#pragma omp simd
	for (int64_t a = 0; a < kp; a++)
		q[a] = lambda * p[a];
	if (free_form) {
		for (int64_t i = 0; i < wk->n; i++) {
			const float *restrict row = wk->P + i * kp;
			starfa_cpu_axpy(starfa_cpu_dot(row, p, kp) * wk->w[i], row, q, kp);
		}
	} else {
		for (int64_t c = 0; c < k; c++)
			starfa_cpu_axpy(p[c], wk->C + c * kp, q, kp);
	}
	if (pb->G)
		for (int64_t c = 0; c < k; c++)
			starfa_cpu_axpy(p[c], pb->G + c * k, q, k);
}

/* M z = rhs for the n x n SPD M whose row-major upper triangle (leading dimension ld) is LAPACK's
 * column-major lower one: factors M in place, z into out. Returns 0, or 1 not positive definite. */
static int cholesky_solve(int64_t n, float *M, int64_t ld, const float *rhs, float *out)
{
	lapack_int info = LAPACKE_spotrf_work(LAPACK_COL_MAJOR, 'L', (lapack_int)n, M, (lapack_int)ld);
	if (info != 0)
		return 1;
	memcpy(out, rhs, (size_t)n * sizeof(float));
	info = LAPACKE_spotrs_work(LAPACK_COL_MAJOR, 'L', (lapack_int)n, 1, M, (lapack_int)ld, out, (lapack_int)n);
	return info != 0;
}

/* Returns 0 solved, 1 not positive definite (x unchanged). */
static int solve_cholesky(const struct starfa_cpu_rowsolve *pb, int64_t kp, struct work *wk, float lambda, float *x)
{
	const int64_t k = pb->k;
	for (int64_t a = 0; a < k; a++) {
		if (pb->G)
			for (int64_t c = a; c < k; c++)
				wk->C[a * kp + c] += pb->G[a * k + c];
		wk->C[a * kp + a] += lambda;
	}
	if (cholesky_solve(k, wk->C, kp, wk->b, wk->r))
		return 1;
	memcpy(x, wk->r, (size_t)k * sizeof(float));
	return 0;
}

/* Whether row u is solved in its n x n form (solve_short): explicit feedback, Cholesky, no G, fewer
 * entries than k and lambda > 0. */
static int short_form(const struct starfa_cpu_rowsolve *pb, const struct work *wk, float lambda)
{
	return pb->solver == STARFA_CPU_CHOLESKY && !pb->implicit && !pb->G && wk->n < pb->k && lambda > 0.0f &&
	       lambda <= FLT_MAX;
}

/* The exact solve of a short row in its n x n form, as on CUDA (gpu/rowsolve.cu): with P the row's n
 * gathered rows and t its targets, x = P^T z, (P P^T + lambda I) z = t, the solution of (P^T P +
 * lambda I) x = P^T t for lambda > 0, at n^2 k + n^3 / 3 multiply-adds instead of n k^2 + k^3 / 3.
 * K = P P^T + lambda I goes in C (n x n, its row-major upper triangle), z in r. Returns 0 solved, 1 not
 * positive definite (x unchanged). */
STARFA_CPU_CLONES
static int solve_short(const struct starfa_cpu_rowsolve *pb, int64_t kp, struct work *restrict wk, float lambda,
		       float *restrict x)
{
	const int64_t n = wk->n, k = pb->k;
	float *restrict K = wk->C, *restrict z = wk->r;
	for (int64_t i = 0; i < n; i++)
		for (int64_t j = i; j < n; j++)
			K[i * n + j] = starfa_cpu_dot(wk->P + i * kp, wk->P + j * kp, kp) + (i == j ? lambda : 0.0f);
	if (n > 0 && cholesky_solve(n, K, n, wk->t, z))
		return 1;
	memset(x, 0, (size_t)k * sizeof(float));
	for (int64_t i = 0; i < n; i++)
		starfa_cpu_axpy(z[i], wk->P + i * kp, x, k);
	return 0;
}

struct rowsolve_apply {
	const struct starfa_cpu_rowsolve *pb;
	int64_t kp;
	const struct work *wk;
	int free_form;
	float lambda;
};

static void rowsolve_apply(void *ctx, const float *restrict p, float *restrict q)
{
	const struct rowsolve_apply *c = ctx;
	matvec(c->pb, c->kp, c->wk, c->free_form, c->lambda, p, q);
}

/* The CG of cpu/cg.h from x (the warm start). The padding of r, p and q stays zero. */
static int solve_cg(const struct starfa_cpu_rowsolve *pb, int64_t kp, struct work *wk, int free_form, float lambda,
		    float *x)
{
	const int64_t k = pb->k;
	float *r = wk->r, *p = wk->p, *q = wk->q, *b = wk->b;
	if (!free_form && !wk->full) /* mirror the upper blocks */
		for (int64_t a = 1; a < k; a++)
			for (int64_t c = 0; c < a; c++)
				wk->C[a * kp + c] = wk->C[c * kp + a];
	memcpy(p, x, (size_t)k * sizeof(float));
	memset(p + k, 0, (size_t)(kp - k) * sizeof(float));
	matvec(pb, kp, wk, free_form, lambda, p, q);
	struct rowsolve_apply ctx = {pb, kp, wk, free_form, lambda};
	return starfa_cpu_cg_steps(k, kp, b, x, r, p, q, pb->cg_steps, rowsolve_apply, &ctx);
}

/* Counts a failed row under the input that was not finite (the gathered vectors, weights or G: the
 * system; b_u: the right-hand side), else as not positive definite or the solve's own failure. */
static void blame(const struct starfa_cpu_rowsolve *pb, int64_t u, int64_t kp, const struct work *wk, int failed,
		  uint32_t *st)
{
	const int64_t k = pb->k;
	int bad_a = !starfa_cpu_all_finite(wk->P, wk->n * kp) || !starfa_cpu_all_finite(wk->w, wk->n) ||
		    (pb->G && !starfa_cpu_all_finite(pb->G, k * k)) || !isfinite(pb->lambda[u * pb->info_ld]);
	int bad_b = !bad_a && !starfa_cpu_all_finite(wk->b, k);
	st[STARFA_SOLVE_BAD_ROWS]++;
	st[STARFA_SOLVE_NONFINITE_A] += bad_a;
	st[STARFA_SOLVE_NONFINITE_B] += bad_b;
	st[STARFA_SOLVE_NOT_SPD] += failed == 1 && !bad_a && !bad_b;
	if ((uint32_t)u < st[STARFA_SOLVE_FIRST_BAD_ROW])
		st[STARFA_SOLVE_FIRST_BAD_ROW] = (uint32_t)u;
}

static void solve_row(const struct starfa_cpu_rowsolve *pb, int64_t u, int64_t kp, struct work *wk, uint32_t *st)
{
	const float lambda = pb->lambda[u * pb->info_ld];
	float *x = pb->X + u * pb->ldx;
	gather(pb, u, kp, wk);
	int failed;
	if (short_form(pb, wk, lambda)) {
		failed = solve_short(pb, kp, wk, lambda, x);
	} else {
		const int free_form = pb->solver == STARFA_CPU_CG && starfa_cpu_rowsolve_matrix_free(pb->k, pb->cg_steps);
		if (!free_form)
			form(pb, kp, wk);
		failed = pb->solver == STARFA_CPU_CHOLESKY ? solve_cholesky(pb, kp, wk, lambda, x)
							   : solve_cg(pb, kp, wk, free_form, lambda, x);
	}
	if (failed || !starfa_cpu_all_finite(x, pb->k))
		blame(pb, u, kp, wk, failed, st);
}

/* The most entries of a row over the tiles. */
static int64_t most_entries(const struct starfa_cpu_rowsolve *pb)
{
	int64_t most = 0;
	for (int64_t u = 0; u < pb->nrows; u++) {
		int64_t n = 0;
		for (int t = 0; t < pb->ntiles; t++)
			n += pb->tiles[t].rowptr[u + 1] - pb->tiles[t].rowptr[u];
		if (n > most)
			most = n;
	}
	return most;
}

int starfa_cpu_rowsolve(const struct starfa_cpu_rowsolve *pb, uint32_t *status, int nthreads)
{
	const int64_t kp = starfa_panel_width(pb->k), most = most_entries(pb);
	memset(status, 0, STARFA_SOLVE_STATUS_WORDS * sizeof *status);
	status[STARFA_SOLVE_FIRST_BAD_ROW] = UINT32_MAX;
	int failed = 0;
#pragma omp parallel num_threads(nthreads > 1 ? nthreads : 1) reduction(| : failed)
	{
		uint32_t st[STARFA_SOLVE_STATUS_WORDS] = {0};
		st[STARFA_SOLVE_FIRST_BAD_ROW] = UINT32_MAX;
		struct work wk;
		int ok = work_alloc(&wk, most, kp) == 0;
		failed = !ok;
		/* Rows cost from k^2 to thousands of k^2: small dynamic chunks balance them. */
#pragma omp for schedule(dynamic, 16)
		for (int64_t u = 0; u < pb->nrows; u++)
			if (ok)
				solve_row(pb, u, kp, &wk, st);
		if (ok)
			work_free(&wk);
#pragma omp critical(starfa_cpu_rowsolve_status)
		{
			for (int i = 0; i < STARFA_SOLVE_FIRST_BAD_ROW; i++)
				status[i] += st[i];
			if (st[STARFA_SOLVE_FIRST_BAD_ROW] < status[STARFA_SOLVE_FIRST_BAD_ROW])
				status[STARFA_SOLVE_FIRST_BAD_ROW] = st[STARFA_SOLVE_FIRST_BAD_ROW];
		}
	}
	return failed ? -1 : 0;
}
