/* SDDMM: the CPU kernel, the CUDA kernel and the task graph, each against the
 * sequential reference on fresh random inputs with NaN-poisoned outputs. */
#include "testing.h"

#include "cpu/sddmm.h"
#ifdef STARFA_USE_CUDA
#include "gpu/sddmm.h"
#include <cuda_runtime_api.h>
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
	P[S->nnz - 1] *= 1.001f;
	P[S->nnz - 1] += 1e-3f;
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

static int gpu_available(void)
{
	int n = 0;
	return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define CUDA_OK(call)                                                                            \
	do {                                                                                     \
		cudaError_t e_ = (call);                                                         \
		CHECK_MSG(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));          \
	} while (0)

static void *to_device(const void *host, size_t bytes)
{
	void *d = NULL;
	if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess)
		return NULL;
	if (host && cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
		cudaFree(d);
		return NULL;
	}
	return d;
}

/* The CUDA kernel against the reference and against the CPU kernel, element by element. */
TEST(sddmm_cuda, cuda_kernel_matches_reference_and_cpu)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	uint64_t rng = testing_seed() + 10;
	for (size_t ki = 0; ki < NRANKS; ki++) {
		int64_t k = ranks[ki];
		struct one_tile t;
		CHECK(make_tile(&t, 300 + (int64_t)testing_below(&rng, 700), 200 + (int64_t)testing_below(&rng, 500),
				20000, 1.5, &rng) == 0);
		const starfa_csr *S = t.csr;
		size_t na = (size_t)(S->nrows * k), nb = (size_t)(S->ncols * k), nnz = (size_t)S->nnz;
		float *A = malloc(na * sizeof(float)), *B = malloc(nb * sizeof(float));
		float *P = malloc(nnz * sizeof(float)), *Pcpu = malloc(nnz * sizeof(float));
		CHECK(A && B && P && Pcpu);
		testing_fill_random(A, na, &rng);
		testing_fill_random(B, nb, &rng);
		uint32_t *d_rowptr = to_device(t.rowptr, sizeof(uint32_t) * (size_t)(S->nrows + 1));
		uint32_t *d_colind = to_device(t.colind, sizeof(uint32_t) * nnz);
		float *d_val = to_device(S->val, sizeof(float) * nnz);
		float *d_A = to_device(A, sizeof(float) * na), *d_B = to_device(B, sizeof(float) * nb);
		float *d_P = to_device(NULL, sizeof(float) * nnz);
		CHECK(d_rowptr && d_colind && d_val && d_A && d_B && d_P);
		for (int mode = 0; mode < 2; mode++) {
			testing_poison(P, nnz);
			CUDA_OK(cudaMemcpy(d_P, P, nnz * sizeof(float), cudaMemcpyHostToDevice));
			CUDA_OK(starfa_cuda_sddmm(S->nrows, d_rowptr, d_colind, d_val, d_A, k, d_B, k, k, mode, d_P, 0));
			CUDA_OK(cudaDeviceSynchronize());
			CUDA_OK(cudaMemcpy(P, d_P, nnz * sizeof(float), cudaMemcpyDeviceToHost));
			CHECK_MSG(starfa_check_sddmm(S, A, B, k, (starfa_sddmm_mode)mode, P, NULL) == 0,
				  "k=%lld mode=%d: %s", (long long)k, mode, starfa_last_error());
			starfa_cpu_sddmm(S->nrows, t.rowptr, t.colind, S->val, A, k, B, k, k, mode, Pcpu, 2);
			/* Both are within the float32 bound of the reference; they may differ by rounding. */
			for (size_t p = 0; p < nnz; p++)
				CHECK_MSG(fabsf(P[p] - Pcpu[p]) <= 1e-4f * (1.0f + fabsf(Pcpu[p])),
					  "k=%lld element %zu: cuda %g cpu %g", (long long)k, p, P[p], Pcpu[p]);
		}
		cudaFree(d_rowptr);
		cudaFree(d_colind);
		cudaFree(d_val);
		cudaFree(d_A);
		cudaFree(d_B);
		cudaFree(d_P);
		free(A);
		free(B);
		free(P);
		free(Pcpu);
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
