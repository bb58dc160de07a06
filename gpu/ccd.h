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
/* With clear, acc's two columns are left at 0 (so that the next pass can add into them: no memset);
 * with reg, sum n[r] x[r]^2 of the new x added into *reg (device memory, one double). */
cudaError_t starfa_cuda_ccd_solve(int64_t nrows, float *acc, int64_t ld_acc, const float *n, int64_t ld_n, float lambda,
				  int nonneg, float *x, int64_t ld_x, int clear, double *reg, cudaStream_t stream);
/* *reg (= or, with add, +=) sum n[r] x[r]^2, in double (starfa_cpu_ccd_regularizer). */
cudaError_t starfa_cuda_ccd_regularizer(int64_t nrows, const float *x, int64_t ld_x, const float *n, int64_t ld_n,
					double *reg, int add, cudaStream_t stream);
/* A feature's opening in one launch: held = h (held non-NULL; nh rows), the nh rows of acc_h and the nw
 * of acc_w zero (each where non-NULL), *reg = 0 (reg non-NULL). */
cudaError_t starfa_cuda_ccd_open(int64_t nh, const float *h, int64_t ld_h, float *held, int64_t ld_held, float *acc_h,
				 int64_t ld_acc_h, int64_t nw, float *acc_w, int64_t ld_acc_w, double *reg,
				 cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
