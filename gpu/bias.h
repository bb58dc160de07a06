/* The right-hand sides of one CSR tile on CUDA (no StarPU here). The contract is starfa_cpu_bias's, on
 * device pointers, enqueued on a stream. */
#ifndef STARFA_GPU_BIAS_H
#define STARFA_GPU_BIAS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* starfa_cpu_bias on one CSR tile: b_u = (accumulate ? b_u : 0) + sum t_p theta_c with
 * t_p = val[p] - mu - (offset ? offset[c * ld] : 0), or 1 + alpha * val[p] when confidence. Each row's
 * sum runs in CSR order. */
cudaError_t starfa_cuda_bias(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *val,
			     const float *theta, int64_t ld, int64_t k, const float *offset, float mu, int confidence,
			     float alpha, int accumulate, float *b, int64_t ldb, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
