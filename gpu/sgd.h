/* SGD matrix-factorization updates on one CSR tile on CUDA (no StarPU here): the updates and visiting
 * order of cpu/sgd.h, on device pointers, enqueued on a stream. */
#ifndef STARFA_GPU_SGD_H
#define STARFA_GPU_SGD_H

#include "cpu/sgd.h"

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One pass over the tile's entries: a warp per update, the tile's chunks dealt to `warps` warps that run
 * at once (0: enough to fill the device; 1: the chunks one after the other, in the CPU kernel's order),
 * so that concurrent warps update rows of different chunks without locks (Hogwild within the tile, as
 * cuMF_SGD). Gu and Gv: the AdaGrad accumulators (used when pass->adagrad). The factor rows are 16-byte aligned when ldu and ldv are multiples of 4. *sse (one double
 * in device memory, zeroed here) gets the sum of squared errors met before each update. */
cudaError_t starfa_cuda_sgd(int64_t nrows, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind,
			    const float *val, float *U, int64_t ldu, float *V, int64_t ldv, float *Gu, int64_t ldgu,
			    float *Gv, int64_t ldgv, const struct starfa_sgd_pass *pass, int warps, double *sse,
			    cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
