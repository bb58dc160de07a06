/* Batched small SPD solves on CUDA (no StarPU here). The contract is starfa_cpu_solve's, on device
 * pointers, enqueued on a stream. */
#ifndef STARFA_GPU_SOLVE_H
#define STARFA_GPU_SOLVE_H

#include "gpu/als_common.h"

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* starfa_cpu_solve: for every row u < nrows, M_u x_u = b_u with M_u = s_u A_u + lambda_u I + G, exact
 * (cholesky != 0: a Cholesky factorization M_u = R^T R, no pivoting) or by cg_steps warm-started CG steps; A in
 * float32 or FP16 words. Writes the STARFA_SOLVE_STATUS_WORDS status words (cpu/solve.h). */
cudaError_t starfa_cuda_solve(int64_t nrows, int64_t k, const void *A, int fp16, const float *b, int64_t ldb,
			      const float *lambda, const float *scale, int64_t info_ld, const float *G, int cholesky,
			      int cg_steps, float *X, int64_t ldx, uint32_t *status, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
