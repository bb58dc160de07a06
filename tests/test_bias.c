/* bias: per-row right-hand sides, the CPU kernel and the task graph against a sequential double
 * reference on fresh random inputs with NaN-poisoned outputs. */
#include "als_testing.h"

#include "cpu/bias.h"

static const int64_t ranks[] = {1, 3, 8, 16, 17, 33, 64, 129};
#define NRANKS (sizeof ranks / sizeof ranks[0])

/* b_u = sum t theta in double, and each element's float32 bound. */
static void reference(const starfa_csr *S, const float *theta, int64_t ld, int64_t k, const float *offset, float mu,
		      int implicit, float alpha, double *ref, double *bound)
{
	for (int64_t r = 0; r < S->nrows; r++)
		for (int64_t d = 0; d < k; d++) {
			double sum = 0, mag = 0;
			for (int64_t p = S->rowptr[r]; p < S->rowptr[r + 1]; p++) {
				int64_t c = S->colind[p];
				double tv = implicit ? 1.0 + (double)alpha * S->val[p]
						     : (double)S->val[p] - mu - (offset ? offset[c * ld] : 0.0);
				sum += tv * theta[c * ld + d];
				mag += fabs(tv * theta[c * ld + d]) + fabs(theta[c * ld + d]) * (fabs(mu) + 2);
			}
			ref[r * k + d] = sum;
			bound[r * k + d] = (double)(S->rowptr[r + 1] - S->rowptr[r] + 3) * FLT_EPSILON * mag;
		}
}

static int compare(const float *got, const double *ref, const double *bound, const float *prior, int64_t n,
		   const char *what)
{
	for (int64_t i = 0; i < n; i++) {
		double want = ref[i] + (prior ? prior[i] : 0.0);
		double tol = 2 * bound[i] + (prior ? 2 * FLT_EPSILON * (fabs(prior[i]) + fabs(want)) : 0.0);
		CHECK_MSG(fabs(got[i] - want) <= tol, "%s: element %lld is %.9g, reference %.9g", what, (long long)i,
			  got[i], want);
	}
	return 0;
}

/* One random tile of the bias tests with its theta (ld > k: column k serves as the offset column)
 * and host buffers for b, a prior b and the reference. */
struct bias_case {
	struct als_tile t;
	const starfa_csr *S;
	int64_t k, ld, n;
	float *theta, *b, *prior;
	double *ref, *bound;
};

static int bias_case_make(struct bias_case *c, int64_t k, uint64_t *rng)
{
	memset(c, 0, sizeof *c);
	c->k = k;
	c->ld = k + 1 + (int64_t)testing_below(rng, 3);
	if (als_tile_make(&c->t, 80 + (int64_t)testing_below(rng, 50), 200, 2500, 1.5, 1, rng))
		return 1;
	c->S = c->t.csr;
	c->n = c->S->nrows * k;
	c->theta = als_alloc((size_t)(c->S->ncols * c->ld));
	c->b = als_alloc((size_t)c->n);
	c->prior = als_alloc((size_t)c->n);
	c->ref = malloc(sizeof(double) * (size_t)c->n);
	c->bound = malloc(sizeof(double) * (size_t)c->n);
	if (!c->theta || !c->b || !c->prior || !c->ref || !c->bound)
		return 1;
	testing_fill_random(c->theta, (size_t)(c->S->ncols * c->ld), rng);
	return 0;
}

static void bias_case_free(struct bias_case *c)
{
	free(c->theta);
	free(c->b);
	free(c->prior);
	free(c->ref);
	free(c->bound);
	als_tile_free(&c->t);
}

TEST(bias, cpu_kernel_matches_reference)
{
	uint64_t rng = testing_seed() + 20;
	for (size_t ki = 0; ki < NRANKS; ki++) {
		struct bias_case c;
		CHECK(bias_case_make(&c, ranks[ki], &rng) == 0);
		const starfa_csr *S = c.S;
		const int64_t k = c.k, n = c.n;
		for (int mode = 0; mode < 3; mode++) { /* explicit, explicit with an offset column, implicit */
			int implicit = mode == 2;
			const float *offset = mode == 1 ? c.theta + k : NULL;
			reference(S, c.theta, c.ld, k, offset, 3.5f, implicit, 2.0f, c.ref, c.bound);
			for (int threads = 1; threads <= 4; threads *= 2) {
				char what[64];
				snprintf(what, sizeof what, "k=%lld mode=%d threads=%d", (long long)k, mode, threads);
				testing_poison(c.b, (size_t)n);
				starfa_cpu_bias(S->nrows, c.t.rowptr, c.t.colind, S->val, c.theta, c.ld, k, offset, 3.5f, implicit,
						2.0f, 0, c.b, k, threads);
				if (compare(c.b, c.ref, c.bound, NULL, n, what))
					return 1;
				testing_fill_random(c.prior, (size_t)n, &rng);
				memcpy(c.b, c.prior, sizeof(float) * (size_t)n);
				starfa_cpu_bias(S->nrows, c.t.rowptr, c.t.colind, S->val, c.theta, c.ld, k, offset, 3.5f, implicit,
						2.0f, 1, c.b, k, threads);
				if (compare(c.b, c.ref, c.bound, c.prior, n, what))
					return 1;
			}
		}
		bias_case_free(&c);
	}
	return 0;
}

TEST(bias, task_graph_matches_reference)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 21;
	static const int64_t grids[][2] = {{1, 1}, {3, 4}, {4, 1}};
	for (size_t g = 0; g < 3; g++) {
		int64_t k = ranks[testing_below(&rng, NRANKS)], w = k + 2;
		int implicit = (int)testing_below(&rng, 2);
		starfa_csr *S = testing_random_csr(80, 90, 1500, 1.0, &rng), *St = NULL;
		CHECK(S);
		CHECK_OK(starfa_csr_transpose(S, &St));
		float *X = als_alloc((size_t)(S->nrows * w)), *Y = als_alloc((size_t)(S->ncols * w));
		CHECK(X && Y);
		testing_fill_random(X, (size_t)(S->nrows * w), &rng);
		testing_fill_random(Y, (size_t)(S->ncols * w), &rng);
		starfa_tiling_options opts = {grids[g][0], grids[g][1], 1};
		starfa_tiled *t = NULL;
		starfa_dense *dx = NULL, *dy = NULL;
		starfa_systems *su = NULL, *si = NULL;
		CHECK_OK(starfa_tiled_create(S, &opts, &t));
		CHECK_OK(starfa_dense_create(t, STARFA_ROWS, X, w, &dx));
		CHECK_OK(starfa_dense_create(t, STARFA_COLS, Y, w, &dy));
		CHECK_OK(starfa_systems_create(t, STARFA_ROWS, k, 0, 1, &su));
		CHECK_OK(starfa_systems_create(t, STARFA_COLS, k, 1, 0, &si));
		for (int side = 0; side < 2; side++) {
			const starfa_csr *M = side == 0 ? S : St;
			const float *theta = side == 0 ? Y : X;
			starfa_systems *sys = side == 0 ? su : si;
			const int64_t *bounds = side == 0 ? starfa_tiled_row_bounds(t) : starfa_tiled_col_bounds(t);
			/* Columns 1..k, the other side's bias in column 0 (explicit), as the ALS graph has them. */
			int64_t n = M->nrows * k;
			double *ref = malloc(sizeof(double) * (size_t)n), *bound = malloc(sizeof(double) * (size_t)n);
			float *b = als_alloc((size_t)n);
			CHECK(ref && bound && b);
			reference(M, theta + 1, w, k, implicit ? NULL : theta, 0.25f, implicit, 3.0f, ref, bound);
			for (int64_t band = 0; band < starfa_systems_bands(sys); band++) {
				CHECK_OK(starfa_insert_bias(t, side == 0 ? STARFA_ROWS : STARFA_COLS, band, side == 0 ? dy : dx, 1,
							    implicit ? -1 : 0, 0.25f, implicit ? STARFA_IMPLICIT : STARFA_EXPLICIT,
							    3.0f, sys));
				int64_t rows = bounds[band + 1] - bounds[band];
				testing_poison(b + bounds[band] * k, (size_t)(rows * k));
				CHECK_OK(starfa_systems_read(sys, band, NULL, b + bounds[band] * k));
			}
			char what[64];
			snprintf(what, sizeof what, "grid %zu side %d k=%lld implicit=%d", g, side, (long long)k, implicit);
			/* Tiles add in order: one more rounding per tile. */
			for (int64_t i = 0; i < n; i++)
				bound[i] *= 3;
			if (compare(b, ref, bound, NULL, n, what))
				return 1;
			free(ref);
			free(bound);
			free(b);
		}
		CHECK(starfa_insert_bias(t, STARFA_ROWS, 0, dy, 1, w, 0, STARFA_EXPLICIT, 0, su) == STARFA_EINVAL);
		starfa_systems_free(su);
		starfa_systems_free(si);
		starfa_dense_free(dx);
		starfa_dense_free(dy);
		starfa_tiled_free(t);
		starfa_csr_free(S);
		starfa_csr_free(St);
		free(X);
		free(Y);
	}
	return 0;
}

#ifdef STARFA_USE_CUDA
#include "gpu/bias.h"
#include "testing_cuda.h"

/* The CUDA kernel against the same reference: explicit, with an offset column, implicit; overwrite and
 * accumulate; ranks across several 32-lane passes. */
TEST(als_cuda, bias_matches_reference)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	uint64_t rng = testing_seed() + 320;
	for (size_t ki = 0; ki < NRANKS; ki++) {
		struct bias_case c;
		CHECK(bias_case_make(&c, ranks[ki], &rng) == 0);
		const starfa_csr *S = c.S;
		const int64_t k = c.k, n = c.n, ld = c.ld;
		uint32_t *d_rowptr = to_device(c.t.rowptr, sizeof(uint32_t) * (size_t)(S->nrows + 1));
		uint32_t *d_colind = to_device(c.t.colind, sizeof(uint32_t) * (size_t)S->nnz);
		float *d_val = to_device(S->val, sizeof(float) * (size_t)S->nnz);
		float *d_theta = to_device(c.theta, sizeof(float) * (size_t)(S->ncols * ld));
		float *d_b = to_device(NULL, sizeof(float) * (size_t)n);
		CHECK(d_rowptr && d_colind && d_val && d_theta && d_b);
		for (int mode = 0; mode < 3; mode++)
			for (int accumulate = 0; accumulate < 2; accumulate++) {
				int implicit = mode == 2;
				reference(S, c.theta, ld, k, mode == 1 ? c.theta + k : NULL, 3.5f, implicit, 2.0f, c.ref, c.bound);
				char what[64];
				snprintf(what, sizeof what, "cuda k=%lld mode=%d accumulate=%d", (long long)k, mode, accumulate);
				if (accumulate)
					testing_fill_random(c.prior, (size_t)n, &rng);
				else
					testing_poison(c.prior, (size_t)n);
				CUDA_OK(cudaMemcpy(d_b, c.prior, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice));
				CUDA_OK(starfa_cuda_bias(S->nrows, d_rowptr, d_colind, d_val, d_theta, ld, k,
							 mode == 1 ? d_theta + k : NULL, 3.5f, implicit, 2.0f, accumulate, d_b, k, 0));
				CUDA_OK(cudaMemcpy(c.b, d_b, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost));
				if (compare(c.b, c.ref, c.bound, accumulate ? c.prior : NULL, n, what))
					return 1;
			}
		cudaFree(d_rowptr);
		cudaFree(d_colind);
		cudaFree(d_val);
		cudaFree(d_theta);
		cudaFree(d_b);
		bias_case_free(&c);
	}
	return 0;
}
#endif
