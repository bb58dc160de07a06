/* SDDMM on one CSR tile, CUDA (no StarPU here). */
#ifndef STARFA_GPU_SDDMM_H
#define STARFA_GPU_SDDMM_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "gpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The kernel variants; STARFA_CUDA_SDDMM_AUTO picks one per tile from its shape. */
typedef enum starfa_cuda_sddmm_variant {
	STARFA_CUDA_SDDMM_AUTO = 0,
	STARFA_CUDA_SDDMM_WARP_SPANS, /* the plain kernel: a warp per span of 32 nonzeros, lanes across k, scalar loads */
	STARFA_CUDA_SDDMM_VWARP,        /* nnz-balanced virtual warps, 16-byte loads, A row in registers,
					   B through L1/L2 (no shared memory) */
	STARFA_CUDA_SDDMM_SMEM,         /* as VWARP, with the tile's whole B block staged in shared memory */
	STARFA_CUDA_SDDMM_VWARP_SLICED, /* VWARP in passes over k-slices sized so that the slice of B
					   stays in L2, the passes adding up in out */
	STARFA_CUDA_SDDMM_PANEL,        /* VWARP's groups in passes over column panels sized so that the
					   panel's B rows stay in L2 (SM-L2); any column order in a row */
	STARFA_CUDA_SDDMM_VARIANTS
} starfa_cuda_sddmm_variant;

const char *starfa_cuda_sddmm_variant_name(starfa_cuda_sddmm_variant v);

/* The variant AUTO would run on a tile of this shape on the current device. */
starfa_cuda_sddmm_variant starfa_cuda_sddmm_choose(int64_t nrows, int64_t ncols, int64_t nnz, int64_t k,
						   const float *A, int64_t lda, const float *B, int64_t ldb);

/* For every nonzero p of the tile (row r, column c):
 *   out[p] = alpha * (scaled ? sval[p] : 1) * <A[r, 0:k], B[c, 0:k]> + beta * out[p]
 * (out is not read when beta is 0) on device pointers, enqueued on `stream`; B has ncols rows. A and B are row-major with
 * leading dimensions lda, ldb (>= k). Returns the launch's cudaError_t
 * (cudaErrorInvalidValue when the variant cannot run this tile, e.g. SMEM on a B block
 * larger than shared memory). */
cudaError_t starfa_cuda_sddmm_variant_run(starfa_cuda_sddmm_variant variant, int64_t nrows, int64_t ncols,
					  int64_t nnz, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
					  const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k,
					  int scaled, float alpha, float beta, float *out, cudaStream_t stream);

/* The panel variant with panels of panel_cols columns (at most ncols; 0: the width of the L2
 * model, as STARFA_CUDA_SDDMM_PANEL runs it). For the tests, which need several panels on
 * tiles small enough to check, and for experiments with the width. */
cudaError_t starfa_cuda_sddmm_panel_run(int64_t panel_cols, int64_t nrows, int64_t ncols, int64_t nnz,
					const uint32_t *rowptr, const uint32_t *colind, const float *sval, const float *A,
					int64_t lda, const float *B, int64_t ldb, int64_t k, int scaled, float alpha,
					float beta, float *out, cudaStream_t stream);

/* Columns per panel of the L2 model for a tile of ncols columns at rank k on the current
 * device (ncols itself when one panel will do); 0 when the device cannot be queried. */
int64_t starfa_cuda_sddmm_panel_cols(int64_t ncols, int64_t k);

/* The automatic choice (what the codelet runs). nnz must equal rowptr[nrows]: it is
 * passed so that neither the choice nor the launch reads device memory. */
cudaError_t starfa_cuda_sddmm(int64_t nrows, int64_t ncols, int64_t nnz, const uint32_t *rowptr,
			      const uint32_t *colind, const float *sval, const float *A, int64_t lda, const float *B,
			      int64_t ldb, int64_t k, int scaled, float alpha, float beta, float *out,
			      cudaStream_t stream);

/* What the codelet runs: as starfa_cuda_sddmm, with the variant chosen per tile by timing. At the first
 * call on a tile (by `pattern`, its sizes, rank, leading dimensions and scaling) the
 * calling thread times each variant that can run it (the virtual-warp kernel, with B staged in shared
 * memory where it fits, the column panels, the virtual-warp kernel beside a dense product of the
 * tile's dense rows where the model of starfa_cuda_sddmm_dense_rows_run takes some, and A's rows staged
 * by blocks with the nonzeros walked by column, starfa_cuda_sddmm_by_column_run) into out, or a
 * scratch array where beta != 0, and keeps the fastest for the next calls; results differ between
 * variants only by rounding. `cublas` (bound to `stream` by this call; float32 arithmetic unless the
 * handle's math mode says otherwise) runs the dense product. `pattern`: an id of the tile's sparsity
 * pattern that no other pattern has in this process (a tile's serial). With pattern 0, no handle, or
 * operands without 16-byte rows (k, lda, ldb multiples of 4, aligned A and B), this is starfa_cuda_sddmm. */
starfa_gpu_status starfa_cuda_sddmm_tuned(cublasHandle_t cublas, uint64_t pattern, int64_t nrows, int64_t ncols,
					  int64_t nnz, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
					  const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k, int scaled,
					  float alpha, float beta, float *out, cudaStream_t stream);

/* The dense rows' path itself, for tests and experiments: rows of density >= min_density (0: the
 * model's, starfa_cuda_sddmm_dense_rows_density) go dense when there are at least 32 of them, in chunks
 * of chunk_rows rows (0: the L2 model's). pattern 0 makes and frees the row order within the call.
 * *dense_rows (may be NULL) says how many rows went dense. Refused (cudaErrorInvalidValue, with the
 * reason) where the virtual-warp kernel cannot run the tile, and for a min_density that is negative, NaN
 * or below 0.02 (the row order a tile keeps holds no sparser rows). */
starfa_gpu_status starfa_cuda_sddmm_dense_rows_run(cublasHandle_t cublas, uint64_t pattern, double min_density,
						   int64_t chunk_rows, int64_t nrows, int64_t ncols, int64_t nnz,
						   const uint32_t *rowptr, const uint32_t *colind, const float *sval,
						   const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k,
						   int scaled, float alpha, float beta, float *out, cudaStream_t stream,
						   int64_t *dense_rows);

/* The kernel that stages a block of A rows in shared memory and walks the block's nonzeros in column
 * order (a B row in registers for each column run), for tests and experiments: blocks of block_rows rows
 * (0: the model's, about 24 KB of A rows and at least 48 rows, at most half of an SM's shared memory,
 * evened out over the blocks; the rows longest first either way). The order (8 bytes a nonzero, sorted on
 * the device) is kept by `pattern` on the calling thread; pattern 0 makes and frees it within the call.
 * *rows_used (may be NULL) says the block height. Refused (cudaErrorInvalidValue, with the reason) where
 * the virtual-warp kernel cannot run the tile, or the rows do not fit shared memory or the 32-bit word
 * that holds a column and a row within its block. */
starfa_gpu_status starfa_cuda_sddmm_by_column_run(uint64_t pattern, int64_t block_rows, int64_t nrows, int64_t ncols,
						  int64_t nnz, const uint32_t *rowptr, const uint32_t *colind,
						  const float *sval, const float *A, int64_t lda, const float *B,
						  int64_t ldb, int64_t k, int scaled, float alpha, float beta, float *out,
						  cudaStream_t stream, int64_t *rows_used);

/* The density from which a row goes dense at rank k (the cost model of gpu/sddmm.cu, fitted on an H100);
 * above 1 (no row goes dense) for k < 64, where the dense rows did not pay. */
double starfa_cuda_sddmm_dense_rows_density(int64_t k);

/* The variant starfa_cuda_sddmm_tuned keeps for a pattern at rank k on the calling thread ("vwarp",
 * "smem", "panel", "vwarp+dense rows", "by column"), NULL when it keeps none. */
const char *starfa_cuda_sddmm_tuned_kept(uint64_t pattern, int64_t k);

/* Adds to *sum (one double in device memory, not zeroed here) the tile's squared residuals, the sum over
 * its nonzeros p (row r, column c) of (sval[p] - shift - <A[r, 0:k], B[c, 0:k]>)^2: cpu/sddmm.h's
 * starfa_cpu_sqerr on device pointers. Groups of lanes take spans of 64 nonzeros, so a heavy row is
 * shared; 16-byte loads where k, the leading dimensions and the pointers allow. */
cudaError_t starfa_cuda_sqerr(int64_t nrows, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind,
			      const float *sval, const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k,
			      float shift, double *sum, cudaStream_t stream);

/* One tile of starfa_cuda_sqerr_tiles: its CSR on the device and its B rows. */
typedef struct {
	int64_t nrows, nnz;
	const uint32_t *rowptr, *colind;
	const float *sval, *B;
	int64_t ldb;
} starfa_cuda_sqerr_tile;
/* starfa_cuda_sqerr over tiles that share their rows' A (a row band's): the tiles where 16-byte loads
 * apply in one launch (up to 32 tiles a launch), so that a band of many small tiles does not pay a launch
 * and a tail each; the others one launch each. */
cudaError_t starfa_cuda_sqerr_tiles(const starfa_cuda_sqerr_tile *tiles, int ntiles, const float *A, int64_t lda,
				    int64_t k, float shift, double *sum, cudaStream_t stream);

/* Frees (stream-ordered) what the calling thread kept for starfa_cuda_sddmm_tuned. */
starfa_gpu_status starfa_cuda_sddmm_release(void);

#ifdef __cplusplus
}
#endif
#endif
