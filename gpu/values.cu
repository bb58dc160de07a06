/* Element-wise maps, reductions and transposition of sparse values on CUDA: one thread per value,
 * grid-strided; reductions in double, one atomic add per block. */
#include "gpu/values.h"

#include "gpu/reduce.cuh"
#include "cpu/elementwise.h"

namespace {

using starfa_gpu::kReduceThreads;

unsigned blocks_for(int64_t n)
{
	int64_t b = (n + 255) / 256;
	return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

__global__ void transpose_kernel(int64_t nnz, const uint32_t *__restrict__ map, const float *__restrict__ src,
				 float *__restrict__ dst, int to_forward)
{
	for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < nnz; q += (int64_t)gridDim.x * blockDim.x) {
		if (to_forward)
			dst[map[q]] = src[q];
		else
			dst[q] = src[map[q]];
	}
}

/* The ops that do not read y must not: y may hold NaN (a fresh output). */
__global__ void map_kernel(int64_t n, int op, float a, float b, const float *__restrict__ x, float *__restrict__ y)
{
	const bool reads_y = starfa_values_reads_y(op), reads_x = starfa_values_reads_x(op);
	for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < n; p += (int64_t)gridDim.x * blockDim.x)
		y[p] = starfa_values_apply(op, a, b, reads_x ? x[p] : 0.0f, reads_y ? y[p] : 0.0f);
}

__global__ void __launch_bounds__(kReduceThreads)
	reduce_kernel(int64_t n, int op, float a, const float *__restrict__ x, const float *__restrict__ y, double *sum)
{
	const bool reads_x = starfa_reduce_reads_x(op);
	double v = 0.0;
	for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < n; p += (int64_t)gridDim.x * blockDim.x)
		v += starfa_reduce_term(op, a, reads_x ? x[p] : 0.0f, y[p]);
	starfa_gpu::block_add(v, sum);
}

} // namespace

extern "C" cudaError_t starfa_cuda_values_transpose(int64_t nnz, const uint32_t *map, const float *src, float *dst,
						    int to_forward, cudaStream_t stream)
{
	if (nnz <= 0)
		return cudaSuccess;
	transpose_kernel<<<blocks_for(nnz), 256, 0, stream>>>(nnz, map, src, dst, to_forward);
	return cudaGetLastError();
}

extern "C" cudaError_t starfa_cuda_values_map(int64_t n, int op, float a, float b, const float *x, float *y,
					      cudaStream_t stream)
{
	if (n <= 0)
		return cudaSuccess;
	map_kernel<<<blocks_for(n), 256, 0, stream>>>(n, op, a, b, x, y);
	return cudaGetLastError();
}

extern "C" cudaError_t starfa_cuda_values_reduce(int64_t n, int op, float a, const float *x, const float *y, double *sum,
						 cudaStream_t stream)
{
	cudaError_t err = cudaMemsetAsync(sum, 0, sizeof *sum, stream);
	if (err != cudaSuccess || n <= 0)
		return err;
	reduce_kernel<<<starfa_gpu::reduce_blocks(n), kReduceThreads, 0, stream>>>(n, op, a, x, y, sum);
	return cudaGetLastError();
}
