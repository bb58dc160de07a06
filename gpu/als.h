/* The ALS kernels on CUDA (no StarPU here): per-row Gram matrices, right-hand sides, batched small SPD
 * solves, and the fused build-and-solve of a band's rows. Contracts are those of the cpu/ kernels of
 * the same names, on device pointers, enqueued on a stream. */
#ifndef STARFA_GPU_ALS_H
#define STARFA_GPU_ALS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The largest k the CUDA ALS kernels take: a k x k system, padded to a multiple of 16, lives in one
 * block's shared memory. */
#define STARFA_CUDA_ALS_MAX_K 192
/* The most tiles of one band the fused kernel takes (their pointers travel as kernel parameters). */
#define STARFA_CUDA_ROWSOLVE_MAX_TILES 64
/* Rows of a band with more entries than this are cut into segments of this many, each built by its
 * own block; the last block of a row to finish sums the segments in order and solves. */
#define STARFA_CUDA_ROWSOLVE_SEGMENT 8192

/* The Gram sums run on the tensor cores: each term theta_c theta_c^T is split into TF32 parts,
 * hi·hi + hi·lo + lo·hi (3xTF32), which keeps float32 accuracy; STARFA_CUDA_GRAM_TF32 drops the lo
 * parts (one third of the work, about 1e-3 relative error in the sums). */
typedef enum starfa_cuda_gram_precision {
	STARFA_CUDA_GRAM_3XTF32 = 0,
	STARFA_CUDA_GRAM_TF32 = 1,
} starfa_cuda_gram_precision;

/* The precision the codelets use: 3xTF32 unless the environment says STARFA_CUDA_GRAM=tf32. */
starfa_cuda_gram_precision starfa_cuda_gram_precision_default(void);

/* starfa_cpu_hermitian on one CSR tile: for every row u < nrows,
 *   A_u = (accumulate ? A_u : 0) + (1 / s_u) sum w_p theta_c theta_c^T
 * with A full symmetric k x k row-major matrices one after the other (floats, or FP16 words when
 * fp16), w_p = weighted ? alpha * val[p] : 1, s_u = scale[u * scale_ld] or 1 when scale is NULL. */
cudaError_t starfa_cuda_hermitian(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *val,
				  const float *theta, int64_t ld, int64_t k, int weighted, float alpha,
				  const float *scale, int64_t scale_ld, int accumulate, int fp16, void *A,
				  starfa_cuda_gram_precision precision, cudaStream_t stream);

/* starfa_cpu_bias on one CSR tile: b_u = (accumulate ? b_u : 0) + sum t_p theta_c with
 * t_p = val[p] - mu - (offset ? offset[c * ld] : 0), or 1 + alpha * val[p] when confidence. Each row's
 * sum runs in CSR order. */
cudaError_t starfa_cuda_bias(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *val,
			     const float *theta, int64_t ld, int64_t k, const float *offset, float mu, int confidence,
			     float alpha, int accumulate, float *b, int64_t ldb, cudaStream_t stream);

/* starfa_cpu_solve: for every row u < nrows, M_u x_u = b_u with M_u = s_u A_u + lambda_u I + G, exact
 * (cholesky != 0: an LDL^T factorization, no pivoting) or by cg_steps warm-started CG steps; A in
 * float32 or FP16 words. Writes the STARFA_SOLVE_STATUS_WORDS status words (cpu/solve.h). */
cudaError_t starfa_cuda_solve(int64_t nrows, int64_t k, const void *A, int fp16, const float *b, int64_t ldb,
			      const float *lambda, const float *scale, int64_t info_ld, const float *G, int cholesky,
			      int cg_steps, float *X, int64_t ldx, uint32_t *status, cudaStream_t stream);

/* One tile of a band for the fused kernel (see starfa_cpu_rowsolve_tile). */
typedef struct starfa_cuda_rowsolve_tile {
	const uint32_t *rowptr, *colind;
	const float *val, *theta, *offset;
	int64_t ld;
} starfa_cuda_rowsolve_tile;

/* The fused kernel's work list for one band, built on the host from the tiles' row pointers once per
 * band (it depends on the pattern only) and kept on the device with the tiles: one item per row, or
 * one per segment of a long row, longest rows first so that the last blocks to run are short. */
enum { STARFA_ROWSOLVE_ITEM_WORDS = 6 }; /* row, begin, end, first part, parts, long-row index */

typedef struct starfa_cuda_rowsolve {
	int64_t nrows, k;
	int ntiles;
	starfa_cuda_rowsolve_tile tiles[STARFA_CUDA_ROWSOLVE_MAX_TILES];
	int implicit;
	float alpha, mu;
	const float *lambda;
	int64_t info_ld;
	const float *G;
	int cholesky, cg_steps;
	float *X;
	int64_t ldx;
	const uint32_t *items; /* nitems x STARFA_ROWSOLVE_ITEM_WORDS */
	int64_t nitems, nparts;
	starfa_cuda_gram_precision precision;
} starfa_cuda_rowsolve;

/* starfa_cpu_rowsolve. Allocates (stream-ordered) and frees the segments' partial sums. */
cudaError_t starfa_cuda_rowsolve_run(const starfa_cuda_rowsolve *pb, uint32_t *status, cudaStream_t stream);

/* Builds the work list of nrows rows over ntiles tiles (host row pointers) with segments of seg
 * entries (STARFA_CUDA_ROWSOLVE_SEGMENT; smaller in tests): *items is malloc'd, *nitems items of
 * STARFA_ROWSOLVE_ITEM_WORDS words; *nparts segments of long rows. Returns 0, or -1 out of memory (or a
 * list past 2^32 words). Host code (codelets/rowsolve.c). */
int starfa_rowsolve_plan(int64_t nrows, int ntiles, const uint32_t *const *rowptrs, int64_t seg, uint32_t **items,
			 int64_t *nitems, int64_t *nparts);

#ifdef __cplusplus
}
#endif
#endif
