/* SGD matrix-factorization updates on one CSR tile on CUDA: a warp per update (its lanes share the k
 * dimensions), the tile's chunks of entries dealt round-robin to the warps in flight. */
#include "gpu/sgd.h"

namespace {

constexpr int kThreads = 256, kWarp = 32;

__device__ __forceinline__ int64_t row_of(const uint32_t *__restrict__ rowptr, int64_t nrows, int64_t from, uint32_t p)
{
	int64_t lo = from, hi = nrows - 1;
	while (lo < hi) {
		int64_t mid = (lo + hi + 1) / 2;
		if (__ldg(rowptr + mid) <= p)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

__device__ __forceinline__ float warp_sum(float v)
{
	for (int offset = kWarp / 2; offset > 0; offset /= 2)
		v += __shfl_xor_sync(0xffffffffu, v, offset);
	return v;
}

__global__ void __launch_bounds__(kThreads) sgd_kernel(int64_t nrows, uint32_t nnz, const uint32_t *__restrict__ rowptr,
							  const uint32_t *__restrict__ colind, const float *__restrict__ val,
							  float *U, int64_t ldu, float *V, int64_t ldv,
							  const starfa_sgd_pass s, int64_t nwarps, double *sse)
{
	const int lane = threadIdx.x % kWarp;
	const int64_t warp = ((int64_t)blockIdx.x * kThreads + threadIdx.x) / kWarp;
	if (warp >= nwarps)
		return;
	const int64_t k = s.k;
	double local = 0.0;
	const uint32_t nchunks = (nnz + STARFA_SGD_CHUNK - 1) / STARFA_SGD_CHUNK;
	for (uint32_t chunk = (uint32_t)warp; chunk < nchunks; chunk += (uint32_t)nwarps) {
		const uint32_t c0 = chunk * STARFA_SGD_CHUNK;
		const uint32_t n = nnz - c0 < STARFA_SGD_CHUNK ? nnz - c0 : STARFA_SGD_CHUNK;
		const uint32_t key = starfa_sgd_key(s.seed, s.epoch, s.tile, chunk);
		const int64_t first_row = row_of(rowptr, nrows, 0, c0);
		for (uint32_t q = 0; q < n; q++) {
			const uint32_t p = c0 + starfa_sgd_order(q, n, key);
			float *u = U + row_of(rowptr, nrows, first_row, p) * ldu;
			float *v = V + (int64_t)__ldg(colind + p) * ldv;
			float dot = 0.0f;
			for (int64_t d = lane; d < k; d += kWarp)
				dot += u[d] * v[d];
			dot = warp_sum(dot) + u[k] + v[k + 1];
			const float e = __ldg(val + p) - s.mu - dot, lr = s.lr;
			for (int64_t d = lane; d < k; d += kWarp) {
				const float pu = u[d], qv = v[d];
				u[d] = pu + lr * (e * qv - s.lambda * pu);
				v[d] = qv + lr * (e * pu - s.lambda * qv);
			}
			if (lane == 0) {
				if (s.biases) {
					u[k] += lr * (e - s.lambda_bias * u[k]);
					v[k + 1] += lr * (e - s.lambda_bias * v[k + 1]);
				}
				local += (double)e * e;
			}
			__syncwarp(); /* the next update may read the row this one wrote */
		}
	}
	if (lane == 0 && sse)
		atomicAdd(sse, local);
}

} // namespace

extern "C" cudaError_t starfa_cuda_sgd(int64_t nrows, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind,
				       const float *val, float *U, int64_t ldu, float *V, int64_t ldv,
				       const struct starfa_sgd_pass *pass, int warps, double *sse, cudaStream_t stream)
{
	if (sse) {
		cudaError_t err = cudaMemsetAsync(sse, 0, sizeof *sse, stream);
		if (err != cudaSuccess)
			return err;
	}
	if (nrows <= 0 || nnz <= 0)
		return cudaSuccess;
	if (nnz > (int64_t)UINT32_MAX || pass->k < 1 || warps < 0)
		return cudaErrorInvalidValue;
	int64_t nchunks = (nnz + STARFA_SGD_CHUNK - 1) / STARFA_SGD_CHUNK, nwarps = warps;
	if (nwarps == 0) {
		int device = 0, sms = 0;
		cudaError_t err = cudaGetDevice(&device);
		if (err == cudaSuccess)
			err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
		if (err != cudaSuccess)
			return err;
		nwarps = (int64_t)sms * 64; /* as many as the SMs hold resident */
	}
	if (nwarps > nchunks)
		nwarps = nchunks;
	unsigned blocks = (unsigned)((nwarps * kWarp + kThreads - 1) / kThreads);
	sgd_kernel<<<blocks, kThreads, 0, stream>>>(nrows, (uint32_t)nnz, rowptr, colind, val, U, ldu, V, ldv, *pass,
						       nwarps, sse);
	return cudaGetLastError();
}
