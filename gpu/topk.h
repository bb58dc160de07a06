/* The top k of a block of rows' scores against every column (A·Bᵀ) on CUDA (no StarPU here): the
 * contract of cpu/topk.h's starfa_cpu_top_k_rows on device pointers, enqueued on a stream. */
#ifndef STARFA_GPU_TOPK_H
#define STARFA_GPU_TOPK_H

#include "gpu/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The largest k the CUDA kernel takes (its lists sit in shared memory): starfa.h's STARFA_TOP_K_CUDA_MAX. */
#define STARFA_CUDA_TOP_K_MAX 1024

/* starfa_cpu_top_k_rows on the device: the scores of a chunk of active rows by cublasSgemm (float32
 * arithmetic, on `cublas`, which must use `stream`), the rows' own columns set to NaN, then an exact radix
 * selection a row. Scratch memory comes from cudaMallocAsync on the stream; it waits for the stream once,
 * to learn how many rows are active. 0 < k <= STARFA_CUDA_TOP_K_MAX. */
starfa_gpu_status starfa_cuda_top_k_rows(cublasHandle_t cublas, int64_t nrows, int64_t ncols, int64_t rank,
					 const float *A, int64_t lda, const float *B, int64_t ldb, const uint32_t *rowptr,
					 const uint32_t *colind, const float *active, int64_t k, float *L, int64_t ldl,
					 cudaStream_t stream);

/* The most bytes of scores a chunk of rows takes (1 GB by default; a quarter of the device's free memory
 * caps it); returns the previous limit. For tests, which make several chunks of a few rows. */
size_t starfa_cuda_top_k_chunk_limit(size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
