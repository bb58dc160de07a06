/* CCD++ passes and updates on CUDA (no StarPU here): the contracts of cpu/ccd.h on device pointers,
 * enqueued on a stream. */
#ifndef STARFA_GPU_CCD_H
#define STARFA_GPU_CCD_H

#include "cpu/ccd.h"

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* nnz: the tile's entries, dealt to warps in equal segments (long rows spread over many warps). */
cudaError_t starfa_cuda_ccd_pass(int64_t nrows, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind, float *R,
				 int write, const struct starfa_ccd_vecs *v, float *acc, int64_t ld_acc, int accumulate,
				 cudaStream_t stream);
cudaError_t starfa_cuda_ccd_solve(int64_t nrows, const float *acc, int64_t ld_acc, const float *n, int64_t ld_n,
				  float lambda, int nonneg, float *x, int64_t ld_x, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
