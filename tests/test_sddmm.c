/* SDDMM: the CPU kernel, the CUDA kernel and the task graph, each against the
 * sequential reference on fresh random inputs with NaN-poisoned outputs. */
#include "testing.h"

#include "cpu/sddmm.h"
#ifdef STARFA_USE_CUDA
#include "gpu/sddmm.h"
#include "testing_cuda.h"
#endif

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

static int make_tile(struct one_tile *t, int64_t m, int64_t n, int64_t nnz, double skew, uint64_t *rng)
{
	t->csr = testing_random_csr(m, n, nnz, skew, rng);
	if (!t->csr)
		return 1;
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

static void free_tile(struct one_tile *t)
{
	starfa_csr_free(t->csr);
	free(t->rowptr);
	free(t->colind);
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
				starfa_cpu_sddmm(S->nrows, t.rowptr, t.colind, S->val, A, k, B, k, k, mode, P, threads);
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
	starfa_cpu_sddmm(S->nrows, t.rowptr, t.colind, S->val, A, k, B, k, k, 0, P, 1);
	CHECK_OK(starfa_check_sddmm(S, A, B, k, STARFA_SDDMM_PATTERN, P, NULL));
	P[S->nnz / 2] = NAN;
	CHECK(starfa_check_sddmm(S, A, B, k, STARFA_SDDMM_PATTERN, P, NULL) == STARFA_ECHECK);
	starfa_cpu_sddmm(S->nrows, t.rowptr, t.colind, S->val, A, k, B, k, k, 0, P, 1);
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
		starfa_csr *S = testing_random_csr(500, 400, 6000, 1.5, &rng);
		CHECK(S);
		float *A = malloc(sizeof(float) * (size_t)(S->nrows * k)), *B = malloc(sizeof(float) * (size_t)(S->ncols * k));
		float *P = malloc(sizeof(float) * (size_t)S->nnz);
		CHECK(A && B && P);
		testing_fill_random(A, (size_t)(S->nrows * k), &rng);
		testing_fill_random(B, (size_t)(S->ncols * k), &rng);
		starfa_tiling_options opts = {grids[g][0], grids[g][1], 0};
		starfa_tiled *t = NULL;
		starfa_dense *a = NULL, *b = NULL;
		starfa_sparse_values *p = NULL;
		CHECK_OK(starfa_tiled_create(S, &opts, &t));
		CHECK_OK(starfa_dense_create(t, STARFA_ROWS, A, k, &a));
		CHECK_OK(starfa_dense_create(t, STARFA_COLS, B, k, &b));
		CHECK_OK(starfa_sparse_values_create(t, &p));
		for (int mode = 0; mode < 2; mode++) {
			testing_poison(P, (size_t)S->nnz);
			CHECK_OK(starfa_insert_sddmm(t, a, b, (starfa_sddmm_mode)mode, p));
			CHECK_OK(starfa_wait());
			CHECK_OK(starfa_sparse_values_gather(p, P));
			CHECK_MSG(starfa_check_sddmm(S, A, B, k, (starfa_sddmm_mode)mode, P, NULL) == 0,
				  "grid %lldx%lld k=%lld mode=%d: %s", (long long)grids[g][0], (long long)grids[g][1],
				  (long long)k, mode, starfa_last_error());
		}
		starfa_sparse_values_free(p);
		starfa_dense_free(a);
		starfa_dense_free(b);
		starfa_tiled_free(t);
		starfa_csr_free(S);
		free(A);
		free(B);
		free(P);
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
	CHECK_OK(starfa_sparse_values_create(t, &p));
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

/* Runs one variant on a tile already on the device (A and B with leading dimension ld)
 * and checks it against the reference and, elementwise, against the CPU kernel.
 * Returns 0, 1 on failure, or TEST_SKIPPED when the variant cannot run this tile. */
static int check_variant(starfa_cuda_sddmm_variant variant, const struct one_tile *t, struct device_tile *d,
			 const float *A, const float *B, int64_t k, int64_t ld, int mode)
{
	const starfa_csr *S = t->csr;
	size_t nnz = (size_t)S->nnz;
	float *P = malloc(nnz * sizeof(float) + 1), *Pcpu = malloc(nnz * sizeof(float) + 1);
	CHECK(P && Pcpu);
	testing_poison(P, nnz);
	CUDA_OK(cudaMemcpy(d->P, P, nnz * sizeof(float), cudaMemcpyHostToDevice));
	cudaError_t err = starfa_cuda_sddmm_variant_run(variant, S->nrows, S->ncols, S->nnz, d->rowptr, d->colind,
						       d->val, d->A, ld, d->B, ld, k, mode, d->P, 0);
	if (err == cudaErrorInvalidValue && variant != STARFA_CUDA_SDDMM_AUTO &&
	    variant != STARFA_CUDA_SDDMM_WARP_PER_ROW) {
		(void)cudaGetLastError();
		free(P);
		free(Pcpu);
		return TEST_SKIPPED;
	}
	CUDA_OK(err);
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaMemcpy(P, d->P, nnz * sizeof(float), cudaMemcpyDeviceToHost));
	/* The reference takes dense k-wide rows: compact when ld > k. */
	float *Ak = malloc(sizeof(float) * (size_t)(S->nrows * k) + 1), *Bk = malloc(sizeof(float) * (size_t)(S->ncols * k) + 1);
	CHECK(Ak && Bk);
	for (int64_t r = 0; r < S->nrows; r++)
		memcpy(Ak + r * k, A + r * ld, sizeof(float) * (size_t)k);
	for (int64_t r = 0; r < S->ncols; r++)
		memcpy(Bk + r * k, B + r * ld, sizeof(float) * (size_t)k);
	CHECK_MSG(starfa_check_sddmm(S, Ak, Bk, k, (starfa_sddmm_mode)mode, P, NULL) == 0, "%s k=%lld ld=%lld mode=%d: %s",
		  starfa_cuda_sddmm_variant_name(variant), (long long)k, (long long)ld, mode, starfa_last_error());
	starfa_cpu_sddmm(S->nrows, t->rowptr, t->colind, S->val, A, ld, B, ld, k, mode, Pcpu, 2);
	/* Both are within the float32 bound of the reference; they may differ by rounding. */
	for (size_t p = 0; p < nnz; p++)
		CHECK_MSG(fabsf(P[p] - Pcpu[p]) <= 1e-4f * (1.0f + fabsf(Pcpu[p])), "%s k=%lld element %zu: cuda %g cpu %g",
			  starfa_cuda_sddmm_variant_name(variant), (long long)k, p, P[p], Pcpu[p]);
	free(P);
	free(Pcpu);
	free(Ak);
	free(Bk);
	return 0;
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
	d->P = to_device(NULL, sizeof(float) * nnz);
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
	CHECK_OK(starfa_sparse_values_create(t, &p));
	starfa_stats_reset();
	CHECK_OK(starfa_insert_sddmm(t, a, b, STARFA_SDDMM_SCALED, p));
	CHECK_OK(starfa_wait());
	starfa_worker_stats st;
	starfa_stats_get(&st);
	CHECK_MSG(st.tasks[STARFA_WORKER_CUDA] == 30 && st.tasks[STARFA_WORKER_CPU] == 0, "cuda %lld cpu %lld tasks",
		  (long long)st.tasks[STARFA_WORKER_CUDA], (long long)st.tasks[STARFA_WORKER_CPU]);
	CHECK_OK(starfa_sparse_values_gather(p, P));
	CHECK_OK(starfa_check_sddmm(S, A, B, k, STARFA_SDDMM_SCALED, P, NULL));
	starfa_sparse_values_free(p);
	starfa_dense_free(a);
	starfa_dense_free(b);
	starfa_tiled_free(t);
	starfa_csr_free(S);
	free(A);
	free(B);
	free(P);
	return 0;
}

#else

TEST(sddmm_cuda, not_built)
{
	SKIP("starfa was configured without CUDA");
}

#endif
