/* hermitian: per-row Gram matrices, the CPU kernel and the task graph against a sequential double
 * reference on fresh random inputs with NaN-poisoned outputs. */
#include "als_testing.h"

#include "cpu/half.h"
#include "cpu/hermitian.h"

static const int64_t ranks[] = {1, 3, 8, 15, 16, 17, 31, 33, 64, 100, 129};
#define NRANKS (sizeof ranks / sizeof ranks[0])

/* ref_u = (1 / s_u) sum w theta theta^T in double, and the float32 bound of each element: the sum of
 * the magnitudes of its terms times (n + 2) eps. */
static void reference(const starfa_csr *S, const float *theta, int64_t ld, int64_t k, int weighted, float alpha,
		      const float *scale, double *ref, double *bound)
{
	for (int64_t r = 0; r < S->nrows; r++) {
		double inv = scale ? 1.0 / scale[2 * r] : 1.0, n = (double)(S->rowptr[r + 1] - S->rowptr[r]);
		for (int64_t a = 0; a < k; a++)
			for (int64_t c = 0; c < k; c++) {
				double sum = 0, mag = 0;
				for (int64_t p = S->rowptr[r]; p < S->rowptr[r + 1]; p++) {
					double w = weighted ? (double)alpha * S->val[p] : 1.0;
					const float *th = theta + (int64_t)S->colind[p] * ld;
					sum += w * th[a] * th[c];
					mag += fabs(w * th[a] * th[c]);
				}
				ref[(r * k + a) * k + c] = sum * inv;
				bound[(r * k + a) * k + c] = (n + 2) * FLT_EPSILON * mag * inv;
			}
	}
}

/* got (floats, or FP16 words) against ref + prior; FP16 adds half an FP16 ulp per rounding. */
static int compare(const void *got, int fp16, const double *ref, const double *bound, const float *prior, int64_t n,
		   const char *what)
{
	for (int64_t i = 0; i < n; i++) {
		double g = fp16 ? starfa_half_to_float(((const uint16_t *)got)[i]) : ((const float *)got)[i];
		double want = ref[i] + (prior ? prior[i] : 0.0);
		double tol = 2 * bound[i] + (prior ? FLT_EPSILON * fabs(prior[i]) : 0.0);
		if (fp16)
			tol += (prior ? 2 : 1) * (fabs(want) + bound[i]) * 0.00049 + 2 * 6e-8;
		CHECK_MSG(fabs(g - want) <= tol, "%s: element %lld is %.9g, reference %.9g (tolerance %.3g)", what,
			  (long long)i, g, want, tol);
	}
	return 0;
}

/* One random tile of the hermitian tests with its theta, row information (lambda_u = 0.1, s_u = row
 * length + 1) and the host buffers for A, a prior A, its FP16 words and the reference. */
struct herm_case {
	struct als_tile t;
	const starfa_csr *S;
	int64_t k, ld, nrows, n;
	float *theta, *info, *A, *prior;
	uint16_t *A16;
	double *ref, *bound;
};

static int herm_case_make(struct herm_case *c, int64_t k, int64_t rows, int64_t nnz, uint64_t *rng)
{
	memset(c, 0, sizeof *c);
	c->k = k;
	c->ld = k + (int64_t)testing_below(rng, 3);
	/* Skewed: empty rows, one-nonzero rows, and heavy rows past a panel chunk (256). */
	if (als_tile_make(&c->t, rows, 300, nnz, 1.5, 1, rng))
		return 1;
	c->S = c->t.csr;
	c->nrows = c->S->nrows;
	c->n = c->nrows * k * k;
	c->theta = als_alloc((size_t)(c->S->ncols * c->ld));
	c->info = als_alloc((size_t)(2 * c->nrows));
	c->A = als_alloc((size_t)c->n);
	c->prior = als_alloc((size_t)c->n);
	c->A16 = malloc(sizeof(uint16_t) * (size_t)c->n + 2);
	c->ref = malloc(sizeof(double) * (size_t)c->n + 8);
	c->bound = malloc(sizeof(double) * (size_t)c->n + 8);
	if (!c->theta || !c->info || !c->A || !c->prior || !c->A16 || !c->ref || !c->bound)
		return 1;
	testing_fill_random(c->theta, (size_t)(c->S->ncols * c->ld), rng);
	for (int64_t r = 0; r < c->nrows; r++) {
		c->info[2 * r] = 0.1f;
		c->info[2 * r + 1] = 1.0f + (float)(c->S->rowptr[r + 1] - c->S->rowptr[r]);
	}
	return 0;
}

static void herm_case_free(struct herm_case *c)
{
	free(c->theta);
	free(c->info);
	free(c->A);
	free(c->prior);
	free(c->A16);
	free(c->ref);
	free(c->bound);
	als_tile_free(&c->t);
}

/* A random prior for the accumulating call: in A (floats) or A16 (FP16 words, and prior rounded). */
static void herm_case_prior(struct herm_case *c, int fp16, uint64_t *rng)
{
	testing_fill_random(c->prior, (size_t)c->n, rng);
	for (int64_t i = 0; i < c->n; i++) {
		if (fp16)
			c->A16[i] = starfa_float_to_half(c->prior[i]);
		c->prior[i] = fp16 ? starfa_half_to_float(c->A16[i]) : c->prior[i];
		c->A[i] = c->prior[i];
	}
}

TEST(hermitian, cpu_kernel_matches_reference)
{
	uint64_t rng = testing_seed();
	for (size_t ki = 0; ki < NRANKS; ki++) {
		struct herm_case c;
		CHECK(herm_case_make(&c, ranks[ki], 60 + (int64_t)testing_below(&rng, 60), 3000, &rng) == 0);
		const int64_t k = c.k, n = c.n;
		for (int weighted = 0; weighted < 2; weighted++)
			for (int fp16 = 0; fp16 < 2; fp16++) {
				reference(c.S, c.theta, c.ld, k, weighted, 0.7f, fp16 ? c.info + 1 : NULL, c.ref, c.bound);
				for (int threads = 1; threads <= 4; threads *= 2) {
					char what[96];
					snprintf(what, sizeof what, "k=%lld weighted=%d fp16=%d threads=%d", (long long)k,
						 weighted, fp16, threads);
					/* Overwrite: every element must be written, empty rows as zeros. */
					testing_poison(c.A, (size_t)n);
					for (int64_t i = 0; i < n; i++)
						c.A16[i] = 0x7e00; /* FP16 NaN */
					void *out = fp16 ? (void *)c.A16 : (void *)c.A;
					CHECK(starfa_cpu_hermitian(c.nrows, c.t.rowptr, c.t.colind, c.S->val, c.theta, c.ld, k,
								   weighted, 0.7f, fp16 ? c.info + 1 : NULL, 2, 0, fp16, out,
								   threads) == 0);
					if (compare(out, fp16, c.ref, c.bound, NULL, n, what))
						return 1;
					/* Accumulate onto a prior value, as the band's later tiles do. */
					herm_case_prior(&c, fp16, &rng);
					CHECK(starfa_cpu_hermitian(c.nrows, c.t.rowptr, c.t.colind, c.S->val, c.theta, c.ld, k,
								   weighted, 0.7f, fp16 ? c.info + 1 : NULL, 2, 1, fp16, out,
								   threads) == 0);
					strcat(what, " accumulate");
					if (compare(out, fp16, c.ref, c.bound, c.prior, n, what))
						return 1;
				}
			}
		herm_case_free(&c);
	}
	return 0;
}

/* The comparison must catch what it is there to catch: an unwritten element, a wrong one. */
TEST(hermitian, reference_rejects_wrong_results)
{
	uint64_t rng = testing_seed() + 1;
	struct als_tile t;
	CHECK(als_tile_make(&t, 20, 30, 200, 0.0, 0, &rng) == 0);
	int64_t k = 8, n = 20 * k * k;
	float *theta = als_alloc(30 * 8), *A = als_alloc((size_t)n);
	double *ref = malloc(sizeof(double) * (size_t)n), *bound = malloc(sizeof(double) * (size_t)n);
	CHECK(theta && A && ref && bound);
	testing_fill_random(theta, 30 * 8, &rng);
	reference(t.csr, theta, k, k, 0, 1.0f, NULL, ref, bound);
	CHECK(starfa_cpu_hermitian(20, t.rowptr, t.colind, t.csr->val, theta, k, k, 0, 1.0f, NULL, 0, 0, 0, A, 1) == 0);
	CHECK(compare(A, 0, ref, bound, NULL, n, "exact") == 0);
	A[n / 2] = NAN;
	testing_note("a NaN and a wrong element must fail (two failure lines follow)");
	CHECK(compare(A, 0, ref, bound, NULL, n, "nan") != 0);
	CHECK(starfa_cpu_hermitian(20, t.rowptr, t.colind, t.csr->val, theta, k, k, 0, 1.0f, NULL, 0, 0, 0, A, 1) == 0);
	int64_t i = 5 * k * k + 3; /* an off-diagonal element of a row with nonzeros, not just rounding away */
	A[i] += 1e-3f * (1.0f + fabsf(A[i]));
	CHECK(compare(A, 0, ref, bound, NULL, n, "wrong") != 0);
	free(theta);
	free(A);
	free(ref);
	free(bound);
	als_tile_free(&t);
	return 0;
}

/* Through StarPU, both sides of a tiled matrix: every band's systems, summed over its tiles, against the
 * reference on the whole matrix (its transpose for the column side). */
TEST(hermitian, task_graph_matches_reference)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 2;
	static const int64_t grids[][2] = {{1, 1}, {3, 4}, {5, 2}};
	for (size_t g = 0; g < 3; g++) {
		int64_t k = ranks[testing_below(&rng, NRANKS - 2)], w = k + 2, col0 = 1;
		int fp16 = (int)testing_below(&rng, 2), weighted = (int)testing_below(&rng, 2);
		starfa_csr *S = testing_random_csr(90, 70, 1500, 1.2, &rng);
		CHECK(S);
		for (int64_t p = 0; p < S->nnz; p++)
			S->val[p] = fabsf(S->val[p]);
		starfa_csr *St = NULL;
		CHECK_OK(starfa_csr_transpose(S, &St));
		float *X = als_alloc((size_t)(S->nrows * w)), *Y = als_alloc((size_t)(S->ncols * w));
		float *iu = als_alloc((size_t)(2 * S->nrows)), *ii = als_alloc((size_t)(2 * S->ncols));
		CHECK(X && Y && iu && ii);
		testing_fill_random(X, (size_t)(S->nrows * w), &rng);
		testing_fill_random(Y, (size_t)(S->ncols * w), &rng);
		for (int64_t r = 0; r < S->nrows; r++)
			iu[2 * r] = 1, iu[2 * r + 1] = 1.0f + (float)(S->rowptr[r + 1] - S->rowptr[r]);
		for (int64_t r = 0; r < S->ncols; r++)
			ii[2 * r] = 1, ii[2 * r + 1] = 1.0f + (float)(St->rowptr[r + 1] - St->rowptr[r]);
		starfa_tiling_options opts = {grids[g][0], grids[g][1], 1};
		starfa_tiled *t = NULL;
		starfa_dense *dx = NULL, *dy = NULL, *diu = NULL, *dii = NULL;
		starfa_systems *su = NULL, *si = NULL;
		CHECK_OK(starfa_tiled_create(S, &opts, &t));
		CHECK_OK(starfa_dense_create(t, STARFA_ROWS, X, w, &dx));
		CHECK_OK(starfa_dense_create(t, STARFA_COLS, Y, w, &dy));
		CHECK_OK(starfa_dense_create(t, STARFA_ROWS, iu, 2, &diu));
		CHECK_OK(starfa_dense_create(t, STARFA_COLS, ii, 2, &dii));
		/* Fewer slots than bands: bands share slots, as training does. */
		CHECK_OK(starfa_systems_create(t, STARFA_ROWS, k, fp16, 2, &su));
		CHECK_OK(starfa_systems_create(t, STARFA_COLS, k, fp16, 0, &si));
		starfa_feedback fb = weighted ? STARFA_IMPLICIT : STARFA_EXPLICIT;
		for (int side = 0; side < 2; side++) {
			const starfa_csr *M = side == 0 ? S : St;
			starfa_systems *sys = side == 0 ? su : si;
			const float *info = side == 0 ? iu : ii, *theta = side == 0 ? Y : X;
			const int64_t *bounds = side == 0 ? starfa_tiled_row_bounds(t) : starfa_tiled_col_bounds(t);
			int64_t n = M->nrows * k * k;
			double *ref = malloc(sizeof(double) * (size_t)n), *bound = malloc(sizeof(double) * (size_t)n);
			float *A = als_alloc((size_t)n);
			CHECK(ref && bound && A);
			reference(M, theta + col0, w, k, weighted, 0.5f, fp16 ? info + 1 : NULL, ref, bound);
			for (int64_t b = 0; b < starfa_systems_bands(sys); b++) {
				CHECK_OK(starfa_insert_hermitian(t, side == 0 ? STARFA_ROWS : STARFA_COLS, b, side == 0 ? dy : dx,
								 col0, fb, 0.5f, side == 0 ? diu : dii, sys));
				/* Read before the next band, which may reuse the slot. */
				int64_t rows = bounds[b + 1] - bounds[b];
				testing_poison(A + bounds[b] * k * k, (size_t)(rows * k * k));
				CHECK_OK(starfa_systems_read(sys, b, A + bounds[b] * k * k, NULL));
			}
			/* The band's tiles add in tile order: FP16 rounds once per tile, each time relative to a
			 * partial sum, which is at most the sum of the magnitudes (bound / ((n + 2) eps)). */
			const int64_t tiles = side == 0 ? grids[g][1] : grids[g][0];
			for (int64_t i = 0; i < n; i++) {
				int64_t r = i / (k * k);
				double want = ref[i], got = A[i];
				double mag = bound[i] / ((double)(M->rowptr[r + 1] - M->rowptr[r] + 2) * FLT_EPSILON);
				double tol = 4 * bound[i] + (fp16 ? (double)tiles * 0.00049 * (fabs(want) + mag) + 1e-6 : 0.0);
				CHECK_MSG(fabs(got - want) <= tol,
					  "grid %lldx%lld side %d k=%lld fp16=%d weighted=%d element %lld: %.9g, reference "
					  "%.9g",
					  (long long)grids[g][0], (long long)grids[g][1], side, (long long)k, fp16, weighted,
					  (long long)i, got, want);
			}
			free(ref);
			free(bound);
			free(A);
		}
		starfa_systems_free(su);
		starfa_systems_free(si);
		starfa_dense_free(dx);
		starfa_dense_free(dy);
		starfa_dense_free(diu);
		starfa_dense_free(dii);
		starfa_tiled_free(t);
		starfa_csr_free(S);
		starfa_csr_free(St);
		free(X);
		free(Y);
		free(iu);
		free(ii);
	}
	return 0;
}

TEST(hermitian, insert_rejects_mismatched_operands)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 3;
	starfa_csr *S = testing_random_csr(30, 20, 100, 0.0, &rng);
	CHECK(S);
	float *X = calloc(30 * 6, sizeof(float)), *Y = calloc(20 * 6, sizeof(float)), *iu = calloc(60, sizeof(float));
	starfa_tiled *t = NULL, *t_plain = NULL;
	starfa_dense *dx = NULL, *dy = NULL, *diu = NULL;
	starfa_systems *sys = NULL;
	starfa_tiling_options opts = {2, 2, 1};
	CHECK_OK(starfa_tiled_create(S, &opts, &t));
	CHECK_OK(starfa_tiled_create(S, NULL, &t_plain));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, X, 6, &dx));
	CHECK_OK(starfa_dense_create(t, STARFA_COLS, Y, 6, &dy));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, iu, 2, &diu));
	CHECK(starfa_systems_create(t_plain, STARFA_COLS, 4, 0, 0, &sys) == STARFA_EINVAL); /* no transposed grid */
	CHECK(strstr(starfa_last_error(), "transposed") != NULL);
	CHECK_OK(starfa_systems_create(t, STARFA_ROWS, 4, 0, 0, &sys));
	/* theta from the wrong side, columns past its width, a band that does not exist */
	CHECK(starfa_insert_hermitian(t, STARFA_ROWS, 0, dx, 0, STARFA_EXPLICIT, 1, diu, sys) == STARFA_EINVAL);
	CHECK(starfa_insert_hermitian(t, STARFA_ROWS, 0, dy, 3, STARFA_EXPLICIT, 1, diu, sys) == STARFA_EINVAL);
	CHECK(strstr(starfa_last_error(), "columns 3..6") != NULL);
	CHECK(starfa_insert_hermitian(t, STARFA_ROWS, 2, dy, 0, STARFA_EXPLICIT, 1, diu, sys) == STARFA_EINVAL);
	CHECK(starfa_insert_hermitian(t, STARFA_COLS, 0, dx, 0, STARFA_EXPLICIT, 1, diu, sys) == STARFA_EINVAL);
	CHECK_OK(starfa_insert_hermitian(t, STARFA_ROWS, 1, dy, 2, STARFA_EXPLICIT, 1, diu, sys));
	CHECK_OK(starfa_wait());
	starfa_systems_free(sys);
	starfa_dense_free(dx);
	starfa_dense_free(dy);
	starfa_dense_free(diu);
	starfa_tiled_free(t);
	starfa_tiled_free(t_plain);
	starfa_csr_free(S);
	free(X);
	free(Y);
	free(iu);
	return 0;
}

#ifdef STARFA_USE_CUDA
#include "gpu/hermitian.h"
#include "testing_cuda.h"

/* The CUDA kernel against the same reference: ranks to its limit (one and several fragments, every
 * remainder of 16), the four precisions of the Gram sums, FP16 and float32 output, overwrite and
 * accumulate. TF32 alone rounds each factor to 11 bits: its bound is 2^12 times wider; 3xBF16 keeps
 * about 17 bits of each term (3 2^-18 relative): 2^6; 3xFP16 is held to 3xTF32's bound. */
TEST(als_cuda, hermitian_matches_reference)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	static const int64_t cranks[] = {1, 5, 16, 17, 33, 64, 100, 101, 128, 129, STARFA_CUDA_ALS_MAX_K};
	uint64_t rng = testing_seed() + 300;
	for (size_t ki = 0; ki < sizeof cranks / sizeof cranks[0]; ki++) {
		struct herm_case c;
		CHECK(herm_case_make(&c, cranks[ki], 40 + (int64_t)testing_below(&rng, 40), 2000, &rng) == 0);
		const int64_t k = c.k, n = c.n, nrows = c.nrows, ld = c.ld;
		const starfa_csr *S = c.S;
		uint32_t *d_rowptr = to_device(c.t.rowptr, sizeof(uint32_t) * (size_t)(nrows + 1));
		uint32_t *d_colind = to_device(c.t.colind, sizeof(uint32_t) * (size_t)S->nnz);
		float *d_val = to_device(S->val, sizeof(float) * (size_t)S->nnz);
		float *d_theta = to_device(c.theta, sizeof(float) * (size_t)(S->ncols * ld));
		float *d_info = to_device(c.info, sizeof(float) * (size_t)(2 * nrows));
		void *d_A = to_device(NULL, sizeof(float) * (size_t)n);
		CHECK(d_rowptr && d_colind && d_val && d_theta && d_info && d_A);
		for (int weighted = 0; weighted < 2; weighted++)
			for (int fp16 = 0; fp16 < 2; fp16++)
				for (int prec = 0; prec < 4; prec++) {
					reference(S, c.theta, ld, k, weighted, 0.7f, fp16 ? c.info + 1 : NULL, c.ref, c.bound);
					const double wider = prec == STARFA_CUDA_GRAM_TF32 ? 4096.0 : prec == STARFA_CUDA_GRAM_3XBF16 ? 64.0 : 1.0;
					for (int64_t i = 0; i < n; i++)
						c.bound[i] *= wider;
					static const char *const names[] = {"3xtf32", "tf32", "3xbf16", "3xfp16"};
					char what[96];
					snprintf(what, sizeof what, "cuda k=%lld weighted=%d fp16=%d %s", (long long)k, weighted,
						 fp16, names[prec]);
					void *out = fp16 ? (void *)c.A16 : (void *)c.A;
					size_t bytes = (fp16 ? sizeof(uint16_t) : sizeof(float)) * (size_t)n;
					testing_poison(c.A, (size_t)n);
					for (int64_t i = 0; i < n; i++)
						c.A16[i] = 0x7e00;
					for (int accumulate = 0; accumulate < 2; accumulate++) {
						if (accumulate)
							herm_case_prior(&c, fp16, &rng);
						CUDA_OK(cudaMemcpy(d_A, out, bytes, cudaMemcpyHostToDevice));
						CUDA_OK(starfa_cuda_hermitian(nrows, d_rowptr, d_colind, d_val, d_theta, ld, k,
									      weighted, 0.7f, fp16 ? d_info + 1 : NULL, 2,
									      accumulate, fp16, d_A, (starfa_cuda_gram_precision)prec,
									      0));
						CUDA_OK(cudaMemcpy(out, d_A, bytes, cudaMemcpyDeviceToHost));
						if (accumulate)
							strcat(what, " accumulate");
						if (compare(out, fp16, c.ref, c.bound, accumulate ? c.prior : NULL, n, what))
							return 1;
					}
				}
		CHECK(starfa_cuda_hermitian(nrows, d_rowptr, d_colind, d_val, d_theta, ld, STARFA_CUDA_ALS_MAX_K + 1, 0, 0,
					    NULL, 0, 0, 0, d_A, STARFA_CUDA_GRAM_3XTF32, 0) == cudaErrorInvalidValue);
		CHECK(starfa_cuda_hermitian(nrows, d_rowptr, d_colind, d_val, d_theta, ld, k, 0, 0, NULL, 0, 0, 0, d_A,
					    (starfa_cuda_gram_precision)4, 0) == cudaErrorInvalidValue);
		cudaFree(d_rowptr);
		cudaFree(d_colind);
		cudaFree(d_val);
		cudaFree(d_theta);
		cudaFree(d_info);
		cudaFree(d_A);
		herm_case_free(&c);
	}
	return 0;
}
/* A NaN of the device's own pattern (0x7fffffff, what its arithmetic produces) or its negative in a theta
 * row reaches the row's sums at every precision, weighted or not: TF32's rounding add would carry either
 * into the sign bit and sum a zero. A row without it stays finite. */
TEST(als_cuda, hermitian_keeps_device_nans)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	enum { K = 17, NROWS = 3, NCOLS = 3 };
	static const uint32_t rowptr[NROWS + 1] = {0, 2, 3, 4}, colind[4] = {0, 1, 2, 0};
	static const float val[4] = {1.0f, 2.0f, 3.0f, 4.0f};
	static const uint32_t nan_bits[2] = {0x7fffffffu, 0xffffffffu};
	float theta[NCOLS * K];
	uint64_t rng = testing_seed() + 340;
	testing_fill_random(theta, NCOLS * K, &rng);
	memcpy(&theta[1 * K + 5], &nan_bits[0], sizeof(float)); /* item 1, column 5: row 0 */
	memcpy(&theta[2 * K + 9], &nan_bits[1], sizeof(float)); /* item 2, column 9: row 1 */
	uint32_t *d_rowptr = to_device(rowptr, sizeof rowptr), *d_colind = to_device(colind, sizeof colind);
	float *d_val = to_device(val, sizeof val), *d_theta = to_device(theta, sizeof theta);
	float *d_A = to_device(NULL, sizeof(float) * NROWS * K * K);
	float *A = malloc(sizeof(float) * NROWS * K * K);
	CHECK(d_rowptr && d_colind && d_val && d_theta && d_A && A);
	for (int weighted = 0; weighted < 2; weighted++)
		for (int prec = 0; prec < 4; prec++) {
			CUDA_OK(starfa_cuda_hermitian(NROWS, d_rowptr, d_colind, d_val, d_theta, K, K, weighted, 0.7f, NULL, 0,
						      0, 0, d_A, (starfa_cuda_gram_precision)prec, 0));
			CUDA_OK(cudaMemcpy(A, d_A, sizeof(float) * NROWS * K * K, cudaMemcpyDeviceToHost));
			if (!isnan(A[5 * K + 5]) || !isnan(A[K * K + 9 * K + 9])) {
				fprintf(stderr, "  weighted=%d precision %d: sums %g and %g, NaN expected\n", weighted, prec,
					(double)A[5 * K + 5], (double)A[K * K + 9 * K + 9]);
				return 1;
			}
			for (int64_t i = 0; i < K * K; i++)
				CHECK(isfinite(A[2 * K * K + i]));
		}
	cudaFree(d_rowptr);
	cudaFree(d_colind);
	cudaFree(d_val);
	cudaFree(d_theta);
	cudaFree(d_A);
	free(A);
	return 0;
}

/* 3xFP16's scales: theta rows whose magnitudes differ by up to 2^24 from item to item (so that a row's
 * later chunks lower the scales its first ones set, and its sums are rescaled), the whole of theta at
 * 2^-30, 1 and 2^30 (FP16 alone would underflow or overflow), and weights up to 2^20: every element
 * within 3xTF32's bound, as 3xTF32 is. */
TEST(als_cuda, hermitian_fp16_scales_cover_wide_magnitudes)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	static const int64_t cranks[] = {17, 100};
	static const int gexp[] = {-30, 0, 30};
	uint64_t rng = testing_seed() + 350;
	for (size_t ki = 0; ki < sizeof cranks / sizeof cranks[0]; ki++) {
		struct herm_case c;
		CHECK(herm_case_make(&c, cranks[ki], 30, 3000, &rng) == 0);
		const int64_t k = c.k, n = c.n, nrows = c.nrows, ld = c.ld, ncols = c.S->ncols;
		float *theta0 = als_alloc((size_t)(ncols * ld));
		CHECK(theta0);
		memcpy(theta0, c.theta, sizeof(float) * (size_t)(ncols * ld));
		uint32_t *d_rowptr = to_device(c.t.rowptr, sizeof(uint32_t) * (size_t)(nrows + 1));
		uint32_t *d_colind = to_device(c.t.colind, sizeof(uint32_t) * (size_t)c.S->nnz);
		float *d_val = to_device(c.S->val, sizeof(float) * (size_t)c.S->nnz);
		float *d_theta = to_device(NULL, sizeof(float) * (size_t)(ncols * ld));
		float *d_A = to_device(NULL, sizeof(float) * (size_t)n);
		CHECK(d_rowptr && d_colind && d_val && d_theta && d_A);
		for (size_t gi = 0; gi < sizeof gexp / sizeof gexp[0]; gi++) {
			for (int64_t col = 0; col < ncols; col++) {
				const int e = gexp[gi] - 12 + (int)testing_below(&rng, 25);
				for (int64_t d = 0; d < ld; d++)
					c.theta[col * ld + d] = ldexpf(theta0[col * ld + d], e);
			}
			CUDA_OK(cudaMemcpy(d_theta, c.theta, sizeof(float) * (size_t)(ncols * ld), cudaMemcpyHostToDevice));
			for (int weighted = 0; weighted < 2; weighted++) {
				const float alpha = weighted ? ldexpf(0.7f, 20) : 0.7f;
				reference(c.S, c.theta, ld, k, weighted, alpha, NULL, c.ref, c.bound);
				static const starfa_cuda_gram_precision precs[] = {STARFA_CUDA_GRAM_3XTF32, STARFA_CUDA_GRAM_3XFP16};
				for (int pi = 0; pi < 2; pi++) {
					char what[96];
					snprintf(what, sizeof what, "cuda k=%lld theta at 2^%d weighted=%d %s", (long long)k,
						 gexp[gi], weighted, pi ? "3xfp16" : "3xtf32");
					testing_poison(c.A, (size_t)n);
					CUDA_OK(cudaMemcpy(d_A, c.A, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice));
					CUDA_OK(starfa_cuda_hermitian(nrows, d_rowptr, d_colind, d_val, d_theta, ld, k, weighted,
								      alpha, NULL, 0, 0, 0, d_A, precs[pi], 0));
					CUDA_OK(cudaMemcpy(c.A, d_A, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost));
					if (compare(c.A, 0, c.ref, c.bound, NULL, n, what))
						return 1;
				}
			}
		}
		cudaFree(d_rowptr);
		cudaFree(d_colind);
		cudaFree(d_val);
		cudaFree(d_theta);
		cudaFree(d_A);
		free(theta0);
		herm_case_free(&c);
	}
	return 0;
}

/* Under heteroprio with cores and GPUs, a hermitian task at a rank beyond the CUDA kernel's (k > 192) that
 * may run on either kind waits where only the cores look: the cores run it (a CUDA worker that took it
 * from a shared bucket would make StarPU abort), and its systems match the reference. */
TEST(als_cuda, heteroprio_keeps_tasks_the_gpus_cannot_run_on_the_cores)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	starfa_options opts;
	starfa_options_default(&opts);
	opts.scheduler = "heteroprio";
	CHECK_OK(testing_runtime_with(&opts));
	if (starfa_worker_count(STARFA_WORKER_CPU) == 0 || starfa_worker_count(STARFA_WORKER_CUDA) == 0)
		SKIP("needs CPU and CUDA workers");
	uint64_t rng = testing_seed() + 330;
	const int64_t k = STARFA_CUDA_ALS_MAX_K + 8, w = k;
	starfa_csr *S = testing_random_csr(12, 40, 150, 1.0, &rng);
	CHECK(S);
	float *Y = als_alloc((size_t)(S->ncols * w)), *iu = als_alloc((size_t)(2 * S->nrows));
	float *A = als_alloc((size_t)(S->nrows * k * k));
	double *ref = malloc(sizeof(double) * (size_t)(S->nrows * k * k)), *bound = malloc(sizeof(double) * (size_t)(S->nrows * k * k));
	CHECK(Y && iu && A && ref && bound);
	testing_fill_random(Y, (size_t)(S->ncols * w), &rng);
	for (int64_t r = 0; r < 2 * S->nrows; r++)
		iu[r] = 1.0f;
	starfa_tiling_options o = {1, 1, 0};
	starfa_tiled *t = NULL;
	starfa_dense *dy = NULL, *diu = NULL;
	starfa_systems *su = NULL;
	CHECK_OK(starfa_tiled_create(S, &o, &t));
	CHECK_OK(starfa_dense_create(t, STARFA_COLS, Y, w, &dy));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, iu, 2, &diu));
	CHECK_OK(starfa_systems_create(t, STARFA_ROWS, k, 0, 0, &su));
	starfa_task_attr attr = {0, 0, STARFA_WHERE_CPU | STARFA_WHERE_CUDA};
	CHECK_OK(starfa_task_log_begin());
	int rc = starfa_task_hermitian(t, STARFA_ROWS, 0, 0, dy, 0, STARFA_EXPLICIT, 0.0f, diu, su, 0, &attr);
	if (!rc)
		rc = starfa_wait();
	starfa_task_record *log = NULL;
	int64_t n = 0;
	CHECK_OK(starfa_task_log_end(&log, &n));
	CHECK_OK(rc);
	CHECK_MSG(n == 1 && starfa_worker_kind_of(log[0].worker) == STARFA_WORKER_CPU, "%lld tasks, the first on a %s worker",
		  (long long)n, n > 0 && starfa_worker_kind_of(log[0].worker) == STARFA_WORKER_CUDA ? "CUDA" : "CPU");
	free(log);
	testing_poison(A, (size_t)(S->nrows * k * k));
	CHECK_OK(starfa_systems_read(su, 0, A, NULL));
	reference(S, Y, w, k, 0, 0.0f, NULL, ref, bound);
	for (int64_t i = 0; i < S->nrows * k * k; i++)
		CHECK_MSG(fabs((double)A[i] - ref[i]) <= 4 * bound[i] + 1e-6, "element %lld: %.9g, reference %.9g", (long long)i,
			  A[i], ref[i]);
	starfa_systems_free(su);
	starfa_dense_free(dy);
	starfa_dense_free(diu);
	starfa_tiled_free(t);
	starfa_csr_free(S);
	free(Y);
	free(iu);
	free(A);
	free(ref);
	free(bound);
	testing_runtime_stop();
	return 0;
}

#endif
