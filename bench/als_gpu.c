/* starfa_als_bench: ALS on the GPU, codelet by codelet and as whole training iterations, on one matrix
 * (the synthetic Netflix-shaped one by default) at one rank, with cuSOLVER's batched Cholesky timed in
 * the same process on the same systems. Prints a Markdown report (and appends it to --md FILE).
 *
 *   starfa_als_bench [--matrix NAME] [--rank F] [--iters N] [--repeat R] [--solve-rows R] [--no-kernels]
 *                    [--no-train] [--gpus N] [--cpus N] [--bands N] [--only TEXT] [--md FILE]
 *   starfa_als_bench [--matrix NAME] --dump FILE
 *
 * --only TEXT times only the fused kernel's variants whose name holds TEXT, and the stored path only when
 * TEXT is part of "stored systems" (`--only stored`), for a profiler run on one variant.
 *
 * --dump writes the matrix to FILE and stops (no GPU needed), for peers run on the same matrix and
 * values (bench/compare/implicit_gpu.py): the 8 bytes "STARFCSR", then nrows, ncols and nnz as int64,
 * rowptr (nrows + 1 int64), colind (nnz int32) and the values (nnz float32), little-endian. The file
 * appears complete or not at all (written to FILE.partial, then renamed).
 *
 * --cpus N adds N CPU workers to the training runs (default none: GPU workers only; `all`: as many as
 * starfa_init starts by default, every core but one a GPU and the one it leaves to the submitting
 * thread); with --gpus 0 the
 * training runs on CPU workers alone, and runs where there is no GPU (the kernel timings are then left
 * out).
 *
 * Kernel times are CUDA events around one launch, median of R after a warm-up. Floors: the Gram sums
 * count k (k + 1) flops per entry (the symmetric half, what a float32 kernel must do) against
 * cublasSgemm's measured float32 rate; the CG solve counts the bytes of the stored systems it reads
 * against the measured copy bandwidth. */
#include "bench.h"
#include "cpu/solve.h" /* the status words */
#include "gpu/bias.h"
#include "gpu/hermitian.h"
#include "gpu/rowsolve.h"
#include "gpu/solve.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <getopt.h>
#include <stdarg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CUDA_TRY(call)                                                                                         \
	do {                                                                                                   \
		cudaError_t e_ = (call);                                                                       \
		if (e_ != cudaSuccess) {                                                                       \
			fprintf(stderr, "starfa_als_bench: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,      \
				cudaGetErrorString(e_));                                                       \
			exit(1);                                                                       \
		}                                                                                      \
	} while (0)

static void *dev_alloc(size_t bytes)
{
	void *p = NULL;
	CUDA_TRY(cudaMalloc(&p, bytes ? bytes : 1));
	return p;
}

static void *dev_copy(const void *host, size_t bytes)
{
	void *p = dev_alloc(bytes);
	CUDA_TRY(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
	return p;
}

static int repeat = 5;
static FILE *md;
static const char *only; /* --only: the fused variants whose name holds it, and nothing else */

/* Times fn(ctx) with CUDA events: one warm-up, then the median of `repeat` runs, in ms. */
/* The median time of fn(ctx) on stream 0 after a warm-up run; prep(ctx), when given, runs before each
 * run outside the timed interval. */
static double time_ms_from(void (*fn)(void *), void (*prep)(void *), void *ctx)
{
	cudaEvent_t a, b;
	CUDA_TRY(cudaEventCreate(&a));
	CUDA_TRY(cudaEventCreate(&b));
	if (prep)
		prep(ctx);
	fn(ctx);
	CUDA_TRY(cudaDeviceSynchronize());
	double ms[64];
	int n = repeat < 64 ? repeat : 64;
	for (int i = 0; i < n; i++) {
		if (prep)
			prep(ctx);
		CUDA_TRY(cudaEventRecord(a, 0));
		fn(ctx);
		CUDA_TRY(cudaEventRecord(b, 0));
		CUDA_TRY(cudaEventSynchronize(b));
		float t;
		CUDA_TRY(cudaEventElapsedTime(&t, a, b));
		ms[i] = t;
	}
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	return bench_median(ms, n);
}

static double time_ms(void (*fn)(void *), void *ctx)
{
	return time_ms_from(fn, NULL, ctx);
}

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (md) {
		va_start(ap, fmt);
		vfprintf(md, fmt, ap);
		va_end(ap);
	}
	fflush(stdout);
}

/* One side of the matrix on the device: its CSR, the other side's factors, the row information and
 * this side's factors. */
struct side {
	const char *name;
	int64_t rows, others, nnz, k;
	uint32_t *rowptr, *colind, *items, *items_host; /* the work list on the device, and its host copy */
	float *val, *theta, *info, *X, *G;
	/* The training graph's layout (graphs/als.c with biases): k + 1 unknowns a row, factor rows of
	 * graph_width(k) floats; the user side reads theta from column 1 with column 0 (the item biases) offsetting the
	 * ratings, the item side from column 0 with column k + 1. */
	float *theta_g, *X_g;
	/* Where every timed rowsolve starts from (X and X_g are restored from these before each run): CG
	 * starts from the factors it overwrites, and runs started from a previous run's solutions would
	 * stop early on converged rows, which training never sees. */
	float *X0, *X_g0;
	int64_t nitems, nparts;
	uint32_t *status;
};

/* The training graph's row width with biases: k + 2 floats, padded with zeros to a multiple of 4. */
static int64_t graph_width(int64_t k)
{
	return (k + 2 + 3) / 4 * 4;
}

/* A device copy of rows of k floats widened to the training graph's layout: rows of graph_width(k)
 * floats, columns k and k + 1 repeating the first two, zeros after them (struct side's theta_g and X_g). */
static float *dev_copy_widened(const float *src, int64_t rows, int64_t k)
{
	const int64_t w = graph_width(k);
	float *h = malloc(sizeof *h * (size_t)(rows * w));
	if (!h) {
		fprintf(stderr, "starfa_als_bench: out of memory\n");
		exit(1);
	}
	for (int64_t r = 0; r < rows; r++)
		for (int64_t d = 0; d < w; d++)
			h[r * w + d] = d < k + 2 ? src[r * k + (d < k ? d : d - k)] : 0.0f;
	float *dev = dev_copy(h, sizeof *h * (size_t)(rows * w));
	free(h);
	return dev;
}

static void side_make(struct side *s, const char *name, const starfa_csr *c, int64_t k, uint64_t seed)
{
	s->name = name;
	s->rows = c->nrows;
	s->others = c->ncols;
	s->nnz = c->nnz;
	s->k = k;
	uint32_t *rp = malloc(sizeof *rp * (size_t)(c->nrows + 1)), *ci = malloc(sizeof *ci * (size_t)(c->nnz + 1));
	float *theta = malloc(sizeof *theta * (size_t)(c->ncols * k)), *info = malloc(sizeof *info * (size_t)(2 * c->nrows));
	float *x = malloc(sizeof *x * (size_t)(c->nrows * k));
	if (!rp || !ci || !theta || !info || !x) {
		fprintf(stderr, "starfa_als_bench: out of memory\n");
		exit(1);
	}
	for (int64_t r = 0; r <= c->nrows; r++)
		rp[r] = (uint32_t)c->rowptr[r];
	for (int64_t p = 0; p < c->nnz; p++)
		ci[p] = (uint32_t)c->colind[p];
	uint64_t st = seed * 0x9e3779b97f4a7c15ull + 7;
	for (int64_t i = 0; i < c->ncols * k; i++) {
		st = st * 6364136223846793005ull + 1442695040888963407ull;
		theta[i] = (float)((double)(st >> 40) / 16777216.0 - 0.5) * 0.2f;
	}
	for (int64_t r = 0; r < c->nrows; r++) {
		info[2 * r] = 0.05f * (float)(c->rowptr[r + 1] - c->rowptr[r] + 1); /* weighted lambda */
		info[2 * r + 1] = 1.0f + (float)(c->rowptr[r + 1] - c->rowptr[r]);
	}
	for (int64_t i = 0; i < c->nrows * k; i++) { /* as init_factors: small values of both signs */
		st = st * 6364136223846793005ull + 1442695040888963407ull;
		x[i] = (float)((double)(st >> 40) / 16777216.0 - 0.5) * 0.2f;
	}
	const uint32_t *rowptrs[1] = {rp};
	uint32_t *items = NULL;
	if (starfa_rowsolve_plan(c->nrows, 1, rowptrs, STARFA_CUDA_ROWSOLVE_SEGMENT, &items, &s->nitems, &s->nparts)) {
		fprintf(stderr, "starfa_als_bench: out of memory planning\n");
		exit(1);
	}
	s->rowptr = dev_copy(rp, sizeof *rp * (size_t)(c->nrows + 1));
	s->colind = dev_copy(ci, sizeof *ci * (size_t)c->nnz);
	s->val = dev_copy(c->val, sizeof(float) * (size_t)c->nnz);
	s->theta = dev_copy(theta, sizeof *theta * (size_t)(c->ncols * k));
	s->info = dev_copy(info, sizeof *info * (size_t)(2 * c->nrows));
	s->X = dev_copy(x, sizeof *x * (size_t)(c->nrows * k));
	s->X0 = dev_copy(x, sizeof *x * (size_t)(c->nrows * k));
	s->theta_g = dev_copy_widened(theta, c->ncols, k);
	s->X_g = dev_copy_widened(x, c->nrows, k);
	s->X_g0 = dev_copy_widened(x, c->nrows, k);
	s->items = dev_copy(items, sizeof *items * (size_t)(s->nitems * STARFA_ROWSOLVE_ITEM_WORDS));
	s->items_host = items;
	s->status = dev_alloc(sizeof(uint32_t) * STARFA_SOLVE_STATUS_WORDS);
	s->G = dev_alloc(sizeof(float) * (size_t)(k * k));
	/* G = theta^T theta (implicit ALS's YᵀY) through cuBLAS */
	cublasHandle_t h;
	const float one = 1.0f, zero = 0.0f;
	if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS ||
	    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, (int)k, (int)k, (int)c->ncols, &one, s->theta, (int)k, s->theta,
			(int)k, &zero, s->G, (int)k) != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "starfa_als_bench: cuBLAS failed\n");
		exit(1);
	}
	cublasDestroy(h);
	free(rp);
	free(ci);
	free(theta);
	free(info);
	free(x);
}

static void side_free(struct side *s)
{
	cudaFree(s->rowptr);
	cudaFree(s->colind);
	cudaFree(s->val);
	cudaFree(s->theta);
	cudaFree(s->theta_g);
	cudaFree(s->X_g);
	cudaFree(s->X0);
	cudaFree(s->X_g0);
	cudaFree(s->info);
	cudaFree(s->X);
	cudaFree(s->items);
	free(s->items_host);
	cudaFree(s->status);
	cudaFree(s->G);
}

struct rowsolve_run {
	starfa_cuda_rowsolve pb;
	uint32_t *status;
	float *X;        /* the factors written (pb.X less its column offset) */
	const float *X0; /* their starting values */
	size_t bytes;
};

static void restore_factors(void *ctx)
{
	struct rowsolve_run *r = ctx;
	CUDA_TRY(cudaMemcpyAsync(r->X, r->X0, r->bytes, cudaMemcpyDeviceToDevice, 0));
}

static void run_rowsolve(void *ctx)
{
	struct rowsolve_run *r = ctx;
	CUDA_TRY(starfa_cuda_rowsolve_run(&r->pb, r->status, 0));
}

static double rowsolve_ms(const struct side *s, int implicit, int cholesky, int steps, starfa_cuda_gram_precision prec,
			  int short_rows, int graph_layout, int fused_cholesky)
{
	struct rowsolve_run *r = calloc(1, sizeof *r);
	r->pb.nrows = s->rows;
	r->pb.k = s->k;
	r->pb.ntiles = 1;
	r->pb.tiles[0] = (starfa_cuda_rowsolve_tile){s->rowptr, s->colind, s->val, s->theta, NULL, s->k};
	r->pb.implicit = implicit;
	r->pb.alpha = 1.0f;
	r->pb.mu = 3.6f;
	r->pb.lambda = s->info;
	r->pb.info_ld = 2;
	r->pb.G = implicit ? s->G : NULL;
	r->pb.cholesky = cholesky;
	r->pb.fused_cholesky = fused_cholesky;
	r->pb.cg_steps = steps;
	r->pb.short_rows = short_rows < 0 ? starfa_cuda_rowsolve_short_rows(s->k, cholesky) : (int)(short_rows * s->k / 100);
	r->pb.X = s->X;
	r->pb.ldx = s->k;
	r->pb.items = s->items;
	r->pb.items_host = s->items_host;
	r->pb.nitems = s->nitems;
	r->pb.nparts = s->nparts;
	r->pb.precision = prec;
	if (graph_layout) {
		const int64_t w = graph_width(s->k), users = strcmp(s->name, "user") == 0;
		r->pb.k = s->k + 1;
		r->pb.tiles[0] = (starfa_cuda_rowsolve_tile){s->rowptr, s->colind, s->val, s->theta_g + (users ? 1 : 0),
							     s->theta_g + (users ? 0 : s->k + 1), w};
		r->pb.short_rows = short_rows < 0 ? starfa_cuda_rowsolve_short_rows(r->pb.k, cholesky)
						  : (int)(short_rows * r->pb.k / 100);
		r->pb.X = s->X_g + (users ? 1 : 0);
		r->pb.ldx = w;
	}
	r->status = s->status;
	r->X = graph_layout ? s->X_g : s->X;
	r->X0 = graph_layout ? s->X_g0 : s->X0;
	r->bytes = sizeof(float) * (size_t)(s->rows * (graph_layout ? graph_width(s->k) : s->k));
	double ms = time_ms_from(run_rowsolve, restore_factors, r);
	uint32_t st[STARFA_SOLVE_STATUS_WORDS];
	CUDA_TRY(cudaMemcpy(st, s->status, sizeof st, cudaMemcpyDeviceToHost));
	if (st[STARFA_SOLVE_BAD_ROWS])
		out("  (warning: %u rows failed to solve)\n", st[STARFA_SOLVE_BAD_ROWS]);
	free(r);
	return ms;
}

/* The stored path on the first `rows` rows of a side. */
struct stored_run {
	const struct side *s;
	int64_t rows;
	void *A;
	float *b;
	int fp16, cholesky, steps;
	starfa_cuda_gram_precision prec;
};

static void run_hermitian(void *ctx)
{
	struct stored_run *r = ctx;
	CUDA_TRY(starfa_cuda_hermitian(r->rows, r->s->rowptr, r->s->colind, r->s->val, r->s->theta, r->s->k, r->s->k, 0,
				       1.0f, r->fp16 ? r->s->info + 1 : NULL, 2, 0, r->fp16, r->A, r->prec, 0));
}

static void run_bias(void *ctx)
{
	struct stored_run *r = ctx;
	CUDA_TRY(starfa_cuda_bias(r->rows, r->s->rowptr, r->s->colind, r->s->val, r->s->theta, r->s->k, r->s->k, NULL,
				  3.6f, 0, 1.0f, 0, r->b, r->s->k, 0));
}

static void run_solve(void *ctx)
{
	struct stored_run *r = ctx;
	CUDA_TRY(starfa_cuda_solve(r->rows, r->s->k, r->A, r->fp16, r->b, r->s->k, r->s->info,
				   r->fp16 ? r->s->info + 1 : NULL, 2, NULL, r->cholesky, r->steps, r->s->X, r->s->k,
				   r->s->status, 0));
}

/* The stored solve's starting point, as restore_factors. */
static void restore_stored(void *ctx)
{
	struct stored_run *r = ctx;
	CUDA_TRY(cudaMemcpyAsync(r->s->X, r->s->X0, sizeof(float) * (size_t)(r->rows * r->s->k), cudaMemcpyDeviceToDevice,
				 0));
}

/* cuSOLVER's batched Cholesky on copies of the same systems (potrf overwrites them). */
struct cusolver_run {
	cusolverDnHandle_t h;
	int n, batch;
	float **Aptr, **bptr, *A, *b;
	const float *A0, *b0;
	int *info;
};

static void run_cusolver(void *ctx)
{
	struct cusolver_run *r = ctx;
	cusolverStatus_t st = cusolverDnSpotrfBatched(r->h, CUBLAS_FILL_MODE_LOWER, r->n, r->Aptr, r->n, r->info, r->batch);
	if (st == CUSOLVER_STATUS_SUCCESS)
		st = cusolverDnSpotrsBatched(r->h, CUBLAS_FILL_MODE_LOWER, r->n, 1, r->Aptr, r->n, r->bptr, r->n, r->info,
					     r->batch);
	if (st != CUSOLVER_STATUS_SUCCESS) {
		fprintf(stderr, "starfa_als_bench: cuSOLVER failed (%d)\n", (int)st);
		exit(1);
	}
}

static void kernels(const struct bench_device *dev, const struct side *s, int64_t solve_rows)
{
	const double k = (double)s->k, nnz = (double)s->nnz;
	const double gram_flops = nnz * k * (k + 1);
	out("\n### %s side: %lld rows, %lld entries, k = %lld\n\n", s->name, (long long)s->rows, (long long)s->nnz,
	    (long long)s->k);
	out("| codelet (CUDA kernel) | ms | GFLOP/s or GB/s | of the floor |\n|---|---:|---:|---:|\n");
	static const struct {
		const char *name;
		int implicit, cholesky, steps;
		starfa_cuda_gram_precision prec;
		int short_rows; /* rows shorter than this percentage of k by the short rows' kernel; -1: the codelet's */
		int graph_layout; /* the training graph's layout (struct side's theta_g) */
		int fused_cholesky; /* Cholesky in the Gram kernel's blocks instead of a warp a system */
	} fused[] = {
		{"rowsolve, explicit, Cholesky, 3xTF32", 0, 1, 0, STARFA_CUDA_GRAM_3XTF32, -1},
		{"rowsolve, explicit, Cholesky, every row k x k, 3xTF32", 0, 1, 0, STARFA_CUDA_GRAM_3XTF32, 0},
		{"rowsolve, explicit, Cholesky, n x n form below 0.5 k, 3xTF32", 0, 1, 0, STARFA_CUDA_GRAM_3XTF32, 50},
		{"rowsolve, explicit, Cholesky, n x n form below k, 3xTF32", 0, 1, 0, STARFA_CUDA_GRAM_3XTF32, 100},
		{"rowsolve, explicit, Cholesky, TF32", 0, 1, 0, STARFA_CUDA_GRAM_TF32, -1},
		{"rowsolve, explicit, CG 3 steps, 3xTF32", 0, 0, 3, STARFA_CUDA_GRAM_3XTF32, -1},
		{"rowsolve, explicit, CG 3 steps, every row k x k, 3xTF32", 0, 0, 3, STARFA_CUDA_GRAM_3XTF32, 0},
		{"rowsolve, explicit, CG 3 steps, matrix-free below k, 3xTF32", 0, 0, 3, STARFA_CUDA_GRAM_3XTF32, 100},
		{"rowsolve, explicit, CG 3 steps, matrix-free below 2 k, 3xTF32", 0, 0, 3, STARFA_CUDA_GRAM_3XTF32, 200},
		{"rowsolve, implicit, CG 3 steps, 3xTF32", 1, 0, 3, STARFA_CUDA_GRAM_3XTF32, -1},
		{"rowsolve, implicit, CG 3 steps, every row k x k, 3xTF32", 1, 0, 3, STARFA_CUDA_GRAM_3XTF32, 0},
		{"rowsolve, implicit, CG 3 steps, matrix-free below 0.5 k, 3xTF32", 1, 0, 3, STARFA_CUDA_GRAM_3XTF32, 50},
		{"rowsolve, implicit, CG 3 steps, TF32", 1, 0, 3, STARFA_CUDA_GRAM_TF32, -1},
		{"rowsolve, implicit, CG 6 steps, 3xTF32", 1, 0, 6, STARFA_CUDA_GRAM_3XTF32, -1},
		{"rowsolve, explicit, Cholesky, 3xBF16", 0, 1, 0, STARFA_CUDA_GRAM_3XBF16, -1},
		{"rowsolve, explicit, CG 3 steps, 3xBF16", 0, 0, 3, STARFA_CUDA_GRAM_3XBF16, -1},
		{"rowsolve, explicit, CG 3 steps, every row k x k, 3xBF16", 0, 0, 3, STARFA_CUDA_GRAM_3XBF16, 0},
		{"rowsolve, explicit, CG 3 steps, matrix-free below k, 3xBF16", 0, 0, 3, STARFA_CUDA_GRAM_3XBF16, 100},
		{"rowsolve, explicit, CG 3 steps, matrix-free below 2 k, 3xBF16", 0, 0, 3, STARFA_CUDA_GRAM_3XBF16, 200},
		{"rowsolve, implicit, CG 3 steps, 3xBF16", 1, 0, 3, STARFA_CUDA_GRAM_3XBF16, -1},
		{"rowsolve, implicit, CG 3 steps, every row k x k, 3xBF16", 1, 0, 3, STARFA_CUDA_GRAM_3XBF16, 0},
		{"rowsolve, implicit, CG 3 steps, matrix-free below k, 3xBF16", 1, 0, 3, STARFA_CUDA_GRAM_3XBF16, 100},
		{"rowsolve, explicit, Cholesky, 3xFP16", 0, 1, 0, STARFA_CUDA_GRAM_3XFP16, -1},
		{"rowsolve, explicit, Cholesky, 3xFP16, n x n form below 0.4 k", 0, 1, 0, STARFA_CUDA_GRAM_3XFP16, 40},
		{"rowsolve, explicit, Cholesky, 3xFP16, n x n form below 0.5 k", 0, 1, 0, STARFA_CUDA_GRAM_3XFP16, 50},
		{"rowsolve, explicit, Cholesky, 3xFP16, n x n form below 0.65 k", 0, 1, 0, STARFA_CUDA_GRAM_3XFP16, 65},
		{"rowsolve, explicit, Cholesky, 3xFP16, n x n form below 0.9 k", 0, 1, 0, STARFA_CUDA_GRAM_3XFP16, 90},
		{"rowsolve, explicit, Cholesky, 3xFP16, n x n form below k", 0, 1, 0, STARFA_CUDA_GRAM_3XFP16, 100},
		{"rowsolve, explicit, Cholesky, 3xFP16, every row k x k", 0, 1, 0, STARFA_CUDA_GRAM_3XFP16, 0},
		{"rowsolve, explicit, Cholesky, 3xFP16, in the Gram kernel's blocks", 0, 1, 0, STARFA_CUDA_GRAM_3XFP16, -1, 0, 1},
		{"rowsolve, explicit, Cholesky, 3xTF32, in the Gram kernel's blocks", 0, 1, 0, STARFA_CUDA_GRAM_3XTF32, -1, 0, 1},
		{"rowsolve, explicit, CG 3 steps, 3xFP16", 0, 0, 3, STARFA_CUDA_GRAM_3XFP16, -1},
		{"rowsolve, implicit, CG 3 steps, 3xFP16", 1, 0, 3, STARFA_CUDA_GRAM_3XFP16, -1},
		{"rowsolve, explicit, Cholesky, 3xTF32, the training graph's layout (k + 1 unknowns, rows of k + 2 padded to 4)", 0, 1,
		 0, STARFA_CUDA_GRAM_3XTF32, -1, 1},
		{"rowsolve, explicit, CG 3 steps, 3xTF32, the training graph's layout", 0, 0, 3, STARFA_CUDA_GRAM_3XTF32, -1,
		 1},
		{"rowsolve, explicit, CG 3 steps, 3xBF16, the training graph's layout", 0, 0, 3, STARFA_CUDA_GRAM_3XBF16, -1,
		 1},
	};
	for (size_t i = 0; i < sizeof fused / sizeof fused[0]; i++) {
		if (only && !strstr(fused[i].name, only))
			continue;
		double ms = rowsolve_ms(s, fused[i].implicit, fused[i].cholesky, fused[i].steps, fused[i].prec,
					fused[i].short_rows, fused[i].graph_layout, fused[i].fused_cholesky);
		double gf = gram_flops / (ms * 1e-3) * 1e-9;
		out("| %s | %.2f | %.0f GFLOP/s (Gram sums) | %.0f%% of FP32 peak |\n", fused[i].name, ms, gf,
		    100.0 * gf / dev->fp32_gflops);
	}
	if (only && !strstr("stored systems", only))
		return;
	/* The stored path on the first solve_rows rows: hermitian, bias, then the solves on what it wrote. */
	int64_t R = solve_rows < s->rows ? solve_rows : s->rows;
	uint32_t sub_nnz32;
	CUDA_TRY(cudaMemcpy(&sub_nnz32, s->rowptr + R, sizeof sub_nnz32, cudaMemcpyDeviceToHost));
	const double sub_nnz = (double)sub_nnz32;
	struct stored_run r = {s, R, dev_alloc(sizeof(float) * (size_t)(R * s->k * s->k)),
			       dev_alloc(sizeof(float) * (size_t)(R * s->k)), 0, 1, 0, STARFA_CUDA_GRAM_3XTF32};
	void *A16 = dev_alloc(sizeof(uint16_t) * (size_t)(R * s->k * s->k));
	out("| *stored systems, first %lld rows (%.0f entries):* | | | |\n", (long long)R, sub_nnz);
	static const char *const prec_names[] = {"3xTF32", "TF32", "3xBF16", "3xFP16"};
	for (int prec = 0; prec < 4; prec++) {
		r.prec = (starfa_cuda_gram_precision)prec;
		double ms = time_ms(run_hermitian, &r), gf = sub_nnz * k * (k + 1) / (ms * 1e-3) * 1e-9;
		out("| hermitian, float32 out, %s | %.2f | %.0f GFLOP/s | %.0f%% of FP32 peak |\n", prec_names[prec], ms,
		    gf, 100.0 * gf / dev->fp32_gflops);
	}
	r.prec = STARFA_CUDA_GRAM_3XTF32;
	{
		double ms = time_ms(run_bias, &r);
		double bytes = sub_nnz * (8.0 + 4.0 * k) + R * 4.0 * k, gbs = bytes / (ms * 1e-3) * 1e-9;
		out("| bias | %.2f | %.0f GB/s (entries, theta rows, b) | %.0f%% of copy bandwidth |\n", ms, gbs,
		    100.0 * gbs / dev->bandwidth_gbs);
	}
	run_hermitian(&r); /* float32 systems in r.A */
	run_bias(&r);
	CUDA_TRY(cudaDeviceSynchronize());
	for (int v = 0; v < 4; v++) {
		r.cholesky = v == 0;
		r.steps = v == 1 ? 3 : 6;
		r.fp16 = v == 3;
		void *A32 = r.A;
		if (r.fp16) {
			r.A = A16;
			run_hermitian(&r);
			CUDA_TRY(cudaDeviceSynchronize());
		}
		double ms = time_ms_from(run_solve, restore_stored, &r);
		double bytes = (double)R * (k * k * (r.fp16 ? 2.0 : 4.0) + 3.0 * 4.0 * k), gbs = bytes / (ms * 1e-3) * 1e-9;
		if (v == 0) {
			const double gf = R * k * k * k / 3.0 / (ms * 1e-3) * 1e-9;
			out("| solve, Cholesky, float32 systems | %.2f | %.0f GFLOP/s | %.0f%% of FP32 peak |\n", ms, gf,
			    100.0 * gf / dev->fp32_gflops);
		} else {
			out("| solve, CG %d steps, %s systems | %.2f | %.0f GB/s (systems read) | %.0f%% of copy bandwidth |\n",
			    r.steps, r.fp16 ? "FP16" : "float32", ms, gbs, 100.0 * gbs / dev->bandwidth_gbs);
		}
		r.A = A32;
		r.fp16 = 0;
	}
	/* cuSOLVER on the same systems: the hermitian output plus lambda_u I (which starfa's solve adds
	 * itself), restored before each timed potrf + potrs since potrf overwrites them. */
	struct cusolver_run c = {0};
	int64_t B = R < 65536 ? R : 65536;
	c.n = (int)s->k;
	c.batch = (int)B;
	if (cusolverDnCreate(&c.h) != CUSOLVER_STATUS_SUCCESS) {
		fprintf(stderr, "starfa_als_bench: cusolverDnCreate failed\n");
		exit(1);
	}
	size_t nA = (size_t)B * s->k * s->k, nb = (size_t)B * s->k;
	c.A = dev_alloc(sizeof(float) * nA);
	c.b = dev_alloc(sizeof(float) * nb);
	c.info = dev_alloc(sizeof(int) * (size_t)B);
	float **hA = malloc(sizeof *hA * (size_t)B), **hb = malloc(sizeof *hb * (size_t)B);
	for (int64_t u = 0; u < B; u++) {
		hA[u] = c.A + (size_t)u * s->k * s->k;
		hb[u] = c.b + (size_t)u * s->k;
	}
	c.Aptr = dev_copy(hA, sizeof *hA * (size_t)B);
	c.bptr = dev_copy(hb, sizeof *hb * (size_t)B);
	float *A0 = dev_alloc(sizeof(float) * nA);
	{
		float *h = malloc(sizeof(float) * nA);
		uint32_t *rp = malloc(sizeof *rp * (size_t)(B + 1));
		if (!h || !rp) {
			fprintf(stderr, "starfa_als_bench: out of memory\n");
			exit(1);
		}
		CUDA_TRY(cudaMemcpy(h, r.A, sizeof(float) * nA, cudaMemcpyDeviceToHost));
		CUDA_TRY(cudaMemcpy(rp, s->rowptr, sizeof *rp * (size_t)(B + 1), cudaMemcpyDeviceToHost));
		for (int64_t u = 0; u < B; u++)
			for (int64_t d = 0; d < s->k; d++) /* side_make's lambda_u */
				h[(size_t)u * s->k * s->k + (size_t)d * s->k + d] += 0.05f * (float)(rp[u + 1] - rp[u] + 1);
		CUDA_TRY(cudaMemcpy(A0, h, sizeof(float) * nA, cudaMemcpyHostToDevice));
		free(h);
		free(rp);
	}
	/* time potrf + potrs only: the copy that restores the systems is outside the events */
	cudaEvent_t e0, e1;
	CUDA_TRY(cudaEventCreate(&e0));
	CUDA_TRY(cudaEventCreate(&e1));
	double ms[64];
	int n = repeat < 64 ? repeat : 64;
	for (int i = -1; i < n; i++) {
		CUDA_TRY(cudaMemcpy(c.A, A0, sizeof(float) * nA, cudaMemcpyDeviceToDevice));
		CUDA_TRY(cudaMemcpy(c.b, r.b, sizeof(float) * nb, cudaMemcpyDeviceToDevice));
		CUDA_TRY(cudaDeviceSynchronize());
		CUDA_TRY(cudaEventRecord(e0, 0));
		run_cusolver(&c);
		CUDA_TRY(cudaEventRecord(e1, 0));
		CUDA_TRY(cudaEventSynchronize(e1));
		float t;
		CUDA_TRY(cudaEventElapsedTime(&t, e0, e1));
		if (i >= 0)
			ms[i] = t;
	}
	double cus = bench_median(ms, n);
	struct stored_run rb = r;
	rb.rows = B;
	rb.cholesky = 1;
	double mine = time_ms_from(run_solve, restore_stored, &rb);
	out("| *cuSOLVER potrfBatched + potrsBatched, %lld systems* | %.2f | | starfa's Cholesky on the same: %.2f ms (%.2fx) |\n",
	    (long long)B, cus, mine, cus / mine);
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	cusolverDnDestroy(c.h);
	cudaFree(c.A);
	cudaFree(c.b);
	cudaFree(c.info);
	cudaFree(c.Aptr);
	cudaFree(c.bptr);
	cudaFree(A0);
	free(hA);
	free(hb);
	cudaFree(r.A);
	cudaFree(r.b);
	cudaFree(A16);
}

/* ---- whole training iterations through StarPU ---- */

struct iter_log {
	double seconds[64], eval[64]; /* each iteration's, and its evaluation's (the loss, in the graph) */
	int64_t n, cuda_tasks, cpu_tasks;
	double loss;
	starfa_profile prof; /* iterations 2.. */
	int prof_failed;
};

static int log_iteration(const starfa_als_progress *p, void *user_data)
{
	struct iter_log *l = user_data;
	if (l->n < 64) {
		l->eval[l->n] = p->eval_seconds;
		l->seconds[l->n++] = p->seconds;
	}
	l->cuda_tasks += p->stats.tasks[STARFA_WORKER_CUDA];
	l->cpu_tasks += p->stats.tasks[STARFA_WORKER_CPU];
	l->loss = p->train_loss;
	if (p->iteration > 1 && !l->prof_failed)
		l->prof_failed = starfa_profile_add(&l->prof, p->profile) != 0;
	return 0;
}

/* Where each worker's time went and what crossed each link, per iteration: what tells idle GPUs
 * from transfers when more GPUs do not help. */
static void print_profile(const char *run, const struct iter_log *l)
{
	int64_t iters = l->n - 1;
	if (iters < 1 || l->prof_failed)
		return;
	out("\n%s, iterations 2..%lld: per worker, busy (running tasks), sleeping (nothing to run) and the rest "
	    "(scheduling, waiting for data); per link, MB moved per iteration\n\n| worker | tasks/iteration | busy | "
	    "sleeping | rest |\n|---|---:|---:|---:|---:|\n",
	    run, (long long)l->n);
	for (int w = 0; w < l->prof.nworkers; w++) {
		const starfa_worker_profile *q = &l->prof.workers[w];
		double t = q->seconds > 0 ? q->seconds : 1, rest = q->seconds - q->executing - q->sleeping;
		out("| %s | %.1f | %.1f%% | %.1f%% | %.1f%% |\n", q->name, (double)q->tasks / (double)iters,
		    100 * q->executing / t, 100 * q->sleeping / t, 100 * (rest > 0 ? rest : 0) / t);
	}
	out("\n| from | to | MB/iteration | transfers/iteration |\n|---|---|---:|---:|\n");
	for (int k = 0; k < l->prof.nlinks; k++) {
		const starfa_link_profile *q = &l->prof.links[k];
		out("| %s | %s | %.1f | %.1f |\n", q->src, q->dst, (double)q->bytes * 1e-6 / (double)iters,
		    (double)q->transfers / (double)iters);
	}
}

/* The matrix in the --dump format; 0 on success. */
static int dump_matrix(const starfa_csr *c, const char *path)
{
	char partial[4096];
	if (snprintf(partial, sizeof partial, "%s.partial", path) >= (int)sizeof partial) {
		fprintf(stderr, "starfa_als_bench: --dump path too long\n");
		return 1;
	}
	FILE *f = fopen(partial, "wb");
	if (!f) {
		fprintf(stderr, "starfa_als_bench: cannot write %s\n", partial);
		return 1;
	}
	const int64_t head[3] = {c->nrows, c->ncols, c->nnz};
	int ok = fwrite("STARFCSR", 1, 8, f) == 8 && fwrite(head, sizeof head, 1, f) == 1 &&
		 fwrite(c->rowptr, sizeof *c->rowptr, (size_t)c->nrows + 1, f) == (size_t)c->nrows + 1 &&
		 fwrite(c->colind, sizeof *c->colind, (size_t)c->nnz, f) == (size_t)c->nnz &&
		 fwrite(c->val, sizeof *c->val, (size_t)c->nnz, f) == (size_t)c->nnz;
	ok = (fclose(f) == 0) && ok;
	if (!ok || rename(partial, path) != 0) {
		fprintf(stderr, "starfa_als_bench: writing %s failed\n", path);
		remove(partial);
		return 1;
	}
	return 0;
}

/* --bands N: row and column bands of the training grid (0: the planner's, two a GPU). */
static int64_t bands;

static void training(const starfa_coo *coo, int64_t rank, int iters, int ncuda)
{
	char cpus[32] = "no CPU workers";
	const int ncpus = starfa_worker_count(STARFA_WORKER_CPU); /* what starfa_init started */
	if (ncpus > 0)
		snprintf(cpus, sizeof cpus, "%d CPU worker%s", ncpus, ncpus > 1 ? "s" : "");
	out("\n### Training iterations through StarPU (%d GPU%s, %s, scheduler %s)\n\n", ncuda, ncuda == 1 ? "" : "s",
	    cpus, starfa_scheduler_name());
	out("| algorithm | solver | s/iteration (median of iterations 2..%d) | first iteration | the loss after an "
	    "iteration, s (median) | tasks on CUDA / CPU | final loss |\n|---|---|---:|---:|---:|---:|---:|\n",
	    iters);
	struct iter_log logs[3] = {0};
	const char *names[3] = {"ALS, Cholesky", "ALS, CG 3 steps", "implicit ALS, CG 3 steps"};
	for (int run = 0; run < 3; run++) { /* ALS exact, ALS by CG (cuMF's setting), implicit ALS by CG */
		const int algo = run == 2;
		starfa_als_options ao;
		starfa_als_options_default(&ao, algo ? STARFA_ALGO_IALS : STARFA_ALGO_ALS);
		ao.rank = rank;
		ao.iters = iters;
		ao.cg_steps = 3;
		ao.tiling.row_tiles = ao.tiling.col_tiles = bands;
		if (run == 1)
			ao.solver = STARFA_SOLVER_CG;
		struct iter_log *l = &logs[run];
		starfa_model *m = NULL;
		if (starfa_als_train(coo, NULL, &ao, log_iteration, l, &m) != 0) {
			out("| %s | | failed: %s | | | | |\n", algo ? "implicit ALS" : "ALS", starfa_last_error());
			continue;
		}
		starfa_model_free(m);
		double first = l->seconds[0], rest[64], evals[64];
		int nr = 0;
		for (int64_t i = 1; i < l->n; i++) {
			evals[nr] = l->eval[i];
			rest[nr++] = l->seconds[i];
		}
		out("| %s (f = %lld%s) | %s | %.4g | %.4g | %.4g | %lld / %lld | %.5g |\n", algo ? "implicit ALS" : "ALS",
		    (long long)rank, algo ? "" : ", biases", ao.solver == STARFA_SOLVER_CG ? "CG 3 steps" : "Cholesky (exact)",
		    bench_median(rest, nr), first, bench_median(evals, nr), (long long)l->cuda_tasks, (long long)l->cpu_tasks,
		    l->loss);
	}
	for (int run = 0; run < 3; run++) {
		print_profile(names[run], &logs[run]);
		starfa_profile_clear(&logs[run].prof);
	}
}

int main(int argc, char **argv)
{
	const char *matrix = "netflix", *md_path = NULL, *dump_path = NULL;
	int64_t rank = 100, solve_rows = 131072;
	int iters = 6, no_train = 0, no_kernels = 0, gpus[8], ngpus = 0, ncpus = 0;
	static const struct option longopts[] = {{"matrix", required_argument, 0, 'm'},
						  {"rank", required_argument, 0, 'f'},
						  {"iters", required_argument, 0, 'i'},
						  {"repeat", required_argument, 0, 'r'},
						  {"solve-rows", required_argument, 0, 's'},
						  {"md", required_argument, 0, 'o'},
						  {"no-train", no_argument, 0, 'n'},
						  {"no-kernels", no_argument, 0, 'K'},
						  {"gpus", required_argument, 0, 'g'},
						  {"cpus", required_argument, 0, 'c'},
						  {"dump", required_argument, 0, 'd'},
						  {"bands", required_argument, 0, 'b'},
						  {"only", required_argument, 0, 'O'},
						  {"help", no_argument, 0, 'h'},
						  {0, 0, 0, 0}};
	int opt;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm': matrix = optarg; break;
		case 'f': rank = atoll(optarg); break;
		case 'i': iters = atoi(optarg); break;
		case 'r': repeat = atoi(optarg); break;
		case 's': solve_rows = atoll(optarg); break;
		case 'o': md_path = optarg; break;
		case 'n': no_train = 1; break;
		case 'c': /* -1: starfa_init's default count; below that, refused */
			ncpus = strcmp(optarg, "all") == 0 ? -1 : atoi(optarg) >= 0 ? atoi(optarg) : -2;
			break;
		case 'K': no_kernels = 1; break;
		case 'd': dump_path = optarg; break;
		case 'O': only = optarg; break;
		case 'b': bands = atoll(optarg) >= 0 ? atoll(optarg) : 0; break;
		case 'g': /* comma-separated GPU counts to train on. Measured: a second count in the same
			   * process ran at the first one's speed (StarPU re-initialized), so the numbers in
			   * bench/ALS.md come from one count per process. */
			for (char *tok = strtok(optarg, ","); tok && ngpus < 8; tok = strtok(NULL, ","))
				gpus[ngpus++] = atoi(tok);
			break;
		default:
			fprintf(stderr, "usage: starfa_als_bench [--matrix NAME] [--rank F] [--iters N] [--repeat R] "
					"[--solve-rows R] [--no-train] [--no-kernels] [--gpus N,M,...] [--cpus N] [--bands N] [--only TEXT] [--md FILE]\n"
					"       starfa_als_bench [--matrix NAME] --dump FILE\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	int any_gpu = ngpus == 0, bad_count = ncpus < -1; /* the default is one GPU */
	for (int g = 0; g < ngpus; g++) {
		bad_count |= gpus[g] < 0 || (gpus[g] == 0 && ncpus == 0); /* every run needs a worker */
		any_gpu |= gpus[g] > 0;
	}
	if (rank < 1 || rank >= STARFA_CUDA_ALS_MAX_K || iters < 2 || iters > 64 || repeat < 1 || solve_rows < 1 ||
	    bad_count) {
		fprintf(stderr, "starfa_als_bench: rank must be in [1, %d), iters in [2, 64], repeat and solve-rows >= 1, "
				"GPU and CPU counts >= 0, and every training run needs a worker\n",
			STARFA_CUDA_ALS_MAX_K);
		return 2;
	}
	if (md_path && !(md = fopen(md_path, "a"))) {
		fprintf(stderr, "starfa_als_bench: cannot open %s\n", md_path);
		return 1;
	}
	struct bench_options o;
	memset(&o, 0, sizeof o);
	o.seed = 1;
	o.data_dirs[o.ndata_dirs++] = "data";
	o.data_dirs[o.ndata_dirs++] = "../shared/data";
	if (dump_path) {
		struct bench_matrix dm;
		if (bench_matrix_load(matrix, &o, &dm) != 0)
			return 1;
		int rc = dump_matrix(dm.csr, dump_path);
		if (!rc)
			printf("%s: %lld x %lld, %lld nonzeros, written to %s\n", dm.name, (long long)dm.nrows,
			       (long long)dm.ncols, (long long)dm.nnz, dump_path);
		return rc;
	}
	struct bench_device dev;
	memset(&dev, 0, sizeof dev);
	gpu_probe(&dev, &o);
	if (!dev.gpu && (any_gpu || no_train)) {
		fprintf(stderr, "starfa_als_bench: no GPU: %s\n", dev.gpu_note);
		return 77;
	}
	if (!dev.gpu) {
		no_kernels = 1; /* CPU training only */
		snprintf(dev.name, sizeof dev.name, "none (CPU workers only)");
	}
	gpu_release();
	{
		time_t now = time(NULL);
		struct tm utc;
		gmtime_r(&now, &utc);
		strftime(dev.date, sizeof dev.date, "%Y-%m-%d %H:%M UTC", &utc);
	}
	struct bench_matrix m;
	if (bench_matrix_load(matrix, &o, &m) != 0)
		return 1;
	out("\n## ALS on the GPU: %s, rank %lld (%s)\n\n", m.name, (long long)rank, dev.date);
	if (dev.gpu)
		out("Device: %s, %d SMs; measured %.0f GB/s copy bandwidth, %.0f GFLOP/s float32 (cublasSgemm). ", dev.name,
		    dev.sm_count, dev.bandwidth_gbs, dev.fp32_gflops);
	else
		out("Device: %s. ", dev.name);
	char workers[96] = "";
	int len = ncpus > 0   ? snprintf(workers, sizeof workers, " --cpus %d", ncpus)
		  : ncpus < 0 ? snprintf(workers, sizeof workers, " --cpus all")
			      : 0;
	for (int g = 0; g < ngpus && len < (int)sizeof workers; g++)
		len += snprintf(workers + len, sizeof workers - (size_t)len, "%s%d", g ? "," : " --gpus ", gpus[g]);
	char bands_arg[40] = "";
	if (bands > 0)
		snprintf(bands_arg, sizeof bands_arg, " --bands %lld", (long long)bands);
	out("Matrix: %s.\nCommand: `starfa_als_bench --matrix %s --rank %lld --iters %d --repeat %d --solve-rows %lld%s%s%s`.\n",
	    m.source, matrix, (long long)rank, iters, repeat, (long long)solve_rows, no_kernels ? " --no-kernels" : "",
	    workers, bands_arg);
	starfa_csr *t = NULL;
	if (starfa_csr_transpose(m.csr, &t) != 0) {
		fprintf(stderr, "starfa_als_bench: %s\n", starfa_last_error());
		return 1;
	}
	if (!no_kernels) {
		struct side users, items;
		side_make(&users, "user", m.csr, rank, 1);
		kernels(&dev, &users, solve_rows);
		side_free(&users);
		side_make(&items, "item", t, rank, 2);
		kernels(&dev, &items, solve_rows);
		side_free(&items);
	}
	starfa_csr_free(t);
	if (!no_train) {
		starfa_coo *coo = starfa_coo_new(m.csr->nrows, m.csr->ncols, m.csr->nnz);
		if (!coo)
			return 1;
		for (int64_t r = 0; r < m.csr->nrows; r++)
			for (int64_t p = m.csr->rowptr[r]; p < m.csr->rowptr[r + 1]; p++) {
				coo->row[p] = (int32_t)r;
				coo->col[p] = (int32_t)m.csr->colind[p];
				coo->val[p] = 1.0f + fabsf(m.csr->val[p]) * 4.0f; /* ratings-like values in [1, 5) */
			}
		coo->nnz = m.csr->nnz;
		bench_matrix_free(&m);
		if (ngpus == 0)
			gpus[ngpus++] = 1;
		for (int g = 0; g < ngpus; g++) {
			starfa_options so;
			starfa_options_default(&so);
			so.ncpus = ncpus;
			so.ncuda = gpus[g];
			so.silent = 1;
			if (starfa_init(&so) != 0) {
				fprintf(stderr, "starfa_als_bench: %s\n", starfa_last_error());
				return 1;
			}
			training(coo, rank, iters, gpus[g]);
			starfa_shutdown();
		}
		starfa_coo_free(coo);
	} else {
		bench_matrix_free(&m);
	}
	if (md)
		fclose(md);
	return 0;
}
