/* Element-wise maps, sums and reductions of dense blocks on CUDA (no StarPU here): the contracts of
 * cpu/dense.h on device pointers, enqueued on a stream. */
#ifndef STARFA_GPU_DENSE_H
#define STARFA_GPU_DENSE_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t starfa_cuda_dense_map(int64_t rows, int64_t cols, int op, float a, float b, const float *Z, int64_t ldz,
				  int zkind, float *Y, int64_t ldy, cudaStream_t stream);
cudaError_t starfa_cuda_dense_colsum(int64_t rows, int64_t cols, const float *X, int64_t ldx, int accumulate, float *v,
				     cudaStream_t stream);
cudaError_t starfa_cuda_dense_rowsum(int64_t rows, int64_t cols, const float *X, int64_t ldx, float *R, int64_t ldr,
				     cudaStream_t stream);
/* starfa_cpu_dense_cg's step on device pointers: one warp per row. */
cudaError_t starfa_cuda_dense_cg(int64_t rows, int64_t cols, int start, float *X, int64_t ldx, float *R, int64_t ldr,
				 float *P, int64_t ldp, const float *Q, int64_t ldq, float *rr, int64_t ldrr, const float *lam,
				 int64_t ldl, cudaStream_t stream);
/* starfa_cpu_dense_uniform on device pointers, a thread per value (the same bits). */
cudaError_t starfa_cuda_dense_uniform(int64_t rows, int64_t cols, int64_t row0, float lo, float hi, uint64_t seed,
				      float *Y, int64_t ldy, cudaStream_t stream);
/* starfa_cpu_dense_dirichlet on device pointers, a warp per row; *left (one double in device memory)
 * = its count (overwritten). */
cudaError_t starfa_cuda_dense_dirichlet(int64_t rows, int64_t cols, float prior, float tol, const float *G, int64_t ldg,
					float *gamma, int64_t ldgam, float *elog, int64_t lde, float *expelog, int64_t ldx,
					float *active, int64_t ldact, double *left, cudaStream_t stream);
/* FP32 to FP16 and back (cpu/half.h): leading dimensions in elements of each side. */
cudaError_t starfa_cuda_dense_to_half(int64_t rows, int64_t cols, const float *X, int64_t ldx, uint16_t *Y, int64_t ldy,
				      cudaStream_t stream);
cudaError_t starfa_cuda_dense_from_half(int64_t rows, int64_t cols, const uint16_t *X, int64_t ldx, float *Y,
					int64_t ldy, cudaStream_t stream);
/* *sum (one double in device memory) = the reduction (overwritten); with w, each row's terms times its
 * weight w[r * ldw] (cpu/dense.h). */
cudaError_t starfa_cuda_dense_reduce(int64_t rows, int64_t cols, const float *X, int64_t ldx, const float *w,
				     int64_t ldw, int op, double *sum, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
