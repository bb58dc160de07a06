/* Element-wise maps, reductions and transposition of sparse values on CUDA (no StarPU here): the
 * contracts of cpu/values.h on device pointers, enqueued on a stream. */
#ifndef STARFA_GPU_VALUES_H
#define STARFA_GPU_VALUES_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t starfa_cuda_values_transpose(int64_t nnz, const uint32_t *map, const float *src, float *dst,
					 int to_forward, cudaStream_t stream);
cudaError_t starfa_cuda_values_map(int64_t n, int op, float a, float b, const float *x, float *y, cudaStream_t stream);
/* *sum (one double in device memory) = the reduction (overwritten). */
cudaError_t starfa_cuda_values_reduce(int64_t n, int op, float a, const float *x, const float *y, double *sum,
				      cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
