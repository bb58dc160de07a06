/* SpMM on one CSR tile, CUDA (no StarPU here): starfa's own kernel and cuSPARSE's. */
#ifndef STARFA_GPU_SPMM_H
#define STARFA_GPU_SPMM_H

#include <cuda_runtime_api.h>
#include <cusparse.h>
#include "gpu/status.h"
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Implementations of the same contract: none is fastest on every tile (bench/RESULTS.md), so the codelet
 * measures them on each tile and keeps the fastest; a benchmark can run each one. */
typedef enum starfa_spmm_impl {
	STARFA_SPMM_OWN = 0,           /* starfa's kernels: lanes across the rank, a group per row, a block per long row */
	STARFA_SPMM_CUSPARSE = 1,      /* cusparseSpMM: CSR, row-major dense, CUSPARSE_SPMM_CSR_ALG2 */
	STARFA_SPMM_CUSPARSE_ALG3 = 2, /* cusparseSpMM with CUSPARSE_SPMM_CSR_ALG3, after cusparseSpMM_preprocess,
					* where X's and Y's rows start 16-byte aligned (else ALG2) */
	STARFA_SPMM_TUNED = 3,         /* the fastest of those three for the tile (the SpMM codelet's): each timed
					* twice at the first call with a pattern id and the winner kept with the
					* pattern's plans; ALG2 without a pattern id */
} starfa_spmm_impl;



/* Same contract as starfa_cpu_spmm, on device pointers, enqueued on `stream`: ncols is the
 * number of rows of X (the tile's columns) and nnz the tile's nonzeros, both of which
 * cuSPARSE needs on the host. `cusparse` is used by the cuSPARSE implementations only (NULL is fine
 * otherwise); it is bound to `stream` by this call. `pattern`, for cuSPARSE: 0, or an id of the tile's
 * sparsity pattern that no other pattern has in this process (a tile's serial); with an id, the calling
 * thread keeps cuSPARSE's descriptor and buffer (and ALG3's analysis) for the next call on the same tile
 * at the same device addresses, sizes, rank and leading dimensions, instead of making and freeing them
 * within the call. The own kernels are deterministic: a row's
 * nonzeros are added in CSR order onto Y's value (beta 1) or zero (beta 0), except that a row far
 * longer than the tile's mean is cut into a fixed number of consecutive parts whose sums are then
 * added in order; the same call gives the same bits. cuSPARSE's may differ in the last bits from
 * run to run. */
starfa_gpu_status starfa_cuda_spmm(starfa_spmm_impl impl, cusparseHandle_t cusparse, uint64_t pattern, int64_t nrows,
				   int64_t ncols, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind,
				   const float *sval, const float *X, int64_t ldx, int64_t k, int beta, float *Y, int64_t ldy,
				   cudaStream_t stream);

/* Destroys and frees (stream-ordered) everything the calling thread kept for starfa_cuda_spmm. */
starfa_gpu_status starfa_cuda_spmm_release(void);

/* The most bytes of cuSPARSE buffers a thread keeps (default 256 MiB; the least recently used plan goes
 * first, and one larger than this is never kept); returns the previous limit. */
size_t starfa_cuda_spmm_keep_limit(size_t bytes);

/* The bytes of buffers the calling thread keeps, and (plans not NULL) how many plans. */
size_t starfa_cuda_spmm_kept(int *plans);

/* starfa_cpu_sddmm_spmm's contract on device pointers (nnz: the tile's nonzeros): a warp per row, the
 * rank across its lanes (each lane keeps its share of A's row and Y's in registers up to k = 256; beyond,
 * Y's row is updated in memory), a row's nonzeros in CSR order; up to k = 256 a row far longer than the
 * tile's mean is spread over a block whose warps' sums are added in order. Deterministic. Rows whose
 * active value is 0 are skipped (active NULL: none). */
cudaError_t starfa_cuda_sddmm_spmm(int64_t nrows, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
				   const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k, int mode, float eps,
				   int beta, float *Y, int64_t ldy, const float *active, int64_t ldact, cudaStream_t stream);

/* Y[0:nrows, 0:k] = 0 on `stream`: an output block no nonzero contributes to. */
cudaError_t starfa_cuda_spmm_zero(int64_t nrows, int64_t k, float *Y, int64_t ldy, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
