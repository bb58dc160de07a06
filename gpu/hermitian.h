/* The per-row Gram matrices of one CSR tile on CUDA (no StarPU here). The contract is
 * starfa_cpu_hermitian's, on device pointers, enqueued on a stream. */
#ifndef STARFA_GPU_HERMITIAN_H
#define STARFA_GPU_HERMITIAN_H

#include "gpu/als_common.h"

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* starfa_cpu_hermitian on one CSR tile: for every row u < nrows,
 *   A_u = (accumulate ? A_u : 0) + (1 / s_u) sum w_p theta_c theta_c^T
 * with A full symmetric k x k row-major matrices one after the other (floats, or FP16 words when
 * fp16), w_p = weighted ? alpha * val[p] : 1, s_u = scale[u * scale_ld] or 1 when scale is NULL. */
cudaError_t starfa_cuda_hermitian(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *val,
				  const float *theta, int64_t ld, int64_t k, int weighted, float alpha,
				  const float *scale, int64_t scale_ld, int accumulate, int fp16, void *A,
				  starfa_cuda_gram_precision precision, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
