/* The right-hand sides of one CSR tile on CUDA: a warp per row. */
#include "gpu/bias.h"

namespace {

/* Warp per row, lanes across k: b_u = sum t_p theta_c in CSR order. */
__global__ void bias_kernel(int64_t nrows, const uint32_t *__restrict__ rowptr, const uint32_t *__restrict__ colind,
			    const float *__restrict__ val, const float *__restrict__ theta, int64_t ld, int64_t k,
			    const float *__restrict__ offset, float mu, int confidence, float alpha, int accumulate,
			    float *__restrict__ b, int64_t ldb)
{
	const int lane = threadIdx.x & 31;
	const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
	for (int64_t u = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; u < nrows; u += warps) {
		const uint32_t p0 = __ldg(rowptr + u), p1 = __ldg(rowptr + u + 1);
		for (int64_t d0 = 0; d0 < k; d0 += 32) {
			const int64_t d = d0 + lane;
			float sum = 0.0f;
			for (uint32_t p = p0; p < p1; p++) {
				const uint32_t c = __ldg(colind + p);
				const float v = __ldg(val + p);
				const float t = confidence ? 1.0f + alpha * v
							   : v - mu - (offset ? __ldg(offset + (int64_t)c * ld) : 0.0f);
				if (d < k)
					sum += t * __ldg(theta + (int64_t)c * ld + d);
			}
			if (d < k)
				b[u * ldb + d] = accumulate ? b[u * ldb + d] + sum : sum;
		}
	}
}

} // namespace

extern "C" cudaError_t starfa_cuda_bias(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind,
					const float *val, const float *theta, int64_t ld, int64_t k, const float *offset,
					float mu, int confidence, float alpha, int accumulate, float *b, int64_t ldb,
					cudaStream_t stream)
{
	if (k < 1 || nrows < 0)
		return cudaErrorInvalidValue;
	if (nrows == 0)
		return cudaSuccess;
	const int threads = 256;
	int64_t blocks = (nrows * 32 + threads - 1) / threads;
	if (blocks > 65535 * 16)
		blocks = 65535 * 16;
	bias_kernel<<<(unsigned)blocks, threads, 0, stream>>>(nrows, rowptr, colind, val, theta, ld, k, offset, mu,
							      confidence, alpha, accumulate, b, ldb);
	return cudaGetLastError();
}
