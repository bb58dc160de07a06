/* SDDMM on one CSR tile, CUDA (no StarPU here). */
#ifndef STARFA_GPU_SDDMM_H
#define STARFA_GPU_SDDMM_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Same contract as starfa_cpu_sddmm, on device pointers, enqueued on `stream`.
 * Returns the launch's cudaError_t. */
cudaError_t starfa_cuda_sddmm(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
			      const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k, int scaled,
			      float *out, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
