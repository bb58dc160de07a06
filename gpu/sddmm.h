/* SDDMM on one CSR tile, CUDA (no StarPU here). */
#ifndef STARFA_GPU_SDDMM_H
#define STARFA_GPU_SDDMM_H

#include <cuda_runtime_api.h>
#include <stdint.h>

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

#ifdef __cplusplus
}
#endif
#endif
