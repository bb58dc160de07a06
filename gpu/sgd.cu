/* SGD matrix-factorization updates on one CSR tile on CUDA: a warp per update (its lanes share the k
 * dimensions), the tile's chunks of entries dealt round-robin to the warps in flight. */
#include "gpu/sgd.h"

namespace {

constexpr int kThreads = 256, kWarp = 32;

__device__ __forceinline__ float warp_sum(float v)
{
	for (int offset = kWarp / 2; offset > 0; offset /= 2)
		v += __shfl_xor_sync(0xffffffffu, v, offset);
	return v;
}

/* One update: the warp's lanes share the k dimensions (float4 at a time when kVec). */
template <bool kVec>
__device__ __forceinline__ float update(float *u, float *v, float r, const starfa_sgd_pass &s, int lane, float *gu,
					float *gv)
{
	const int64_t k = s.k;
	float dot = 0.0f;
	if (kVec) {
		float4 *u4 = reinterpret_cast<float4 *>(u), *v4 = reinterpret_cast<float4 *>(v);
		for (int64_t d = lane; d < k / 4; d += kWarp) {
			const float4 a = u4[d], b = v4[d];
			dot += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
		}
	} else {
		for (int64_t d = lane; d < k; d += kWarp)
			dot += u[d] * v[d];
	}
	dot = warp_sum(dot) + u[k] + v[k + 1];
	const float e = r - s.mu - dot, lambda = s.lambda;
	float lr = s.lr, lr_v = s.lr;
	if (gu) { /* AdaGrad: every lane reads the row's accumulator before lane 0 moves it */
		float su = 0.0f, sv = 0.0f;
		for (int64_t d = lane; d < k; d += kWarp) {
			const float a = e * v[d] - lambda * u[d], b = e * u[d] - lambda * v[d];
			su += a * a;
			sv += b * b;
		}
		su = warp_sum(su);
		sv = warp_sum(sv);
		const float g_u = *gu + su / (float)k, g_v = *gv + sv / (float)k;
		lr = s.lr / sqrtf(g_u);
		lr_v = s.lr / sqrtf(g_v);
		__syncwarp();
		if (lane == 0) {
			*gu = g_u;
			*gv = g_v;
		}
	}
	if (kVec) {
		float4 *u4 = reinterpret_cast<float4 *>(u), *v4 = reinterpret_cast<float4 *>(v);
		for (int64_t d = lane; d < k / 4; d += kWarp) {
			const float4 a = u4[d], b = v4[d];
			u4[d] = make_float4(a.x + lr * (e * b.x - lambda * a.x), a.y + lr * (e * b.y - lambda * a.y),
					    a.z + lr * (e * b.z - lambda * a.z), a.w + lr * (e * b.w - lambda * a.w));
			v4[d] = make_float4(b.x + lr_v * (e * a.x - lambda * b.x), b.y + lr_v * (e * a.y - lambda * b.y),
					    b.z + lr_v * (e * a.z - lambda * b.z), b.w + lr_v * (e * a.w - lambda * b.w));
		}
	} else {
		for (int64_t d = lane; d < k; d += kWarp) {
			const float pu = u[d], qv = v[d];
			u[d] = pu + lr * (e * qv - lambda * pu);
			v[d] = qv + lr_v * (e * pu - lambda * qv);
		}
	}
	if (lane == 0 && s.biases) {
		u[k] += lr * (e - s.lambda_bias * u[k]);
		v[k + 1] += lr_v * (e - s.lambda_bias * v[k + 1]);
	}
	return e;
}

/* Each warp stages a chunk's rows, columns and values in shared memory (coalesced reads, one row search
 * per lane and step), then runs its updates in the chunk's order. */
template <bool kVec>
__global__ void __launch_bounds__(kThreads) sgd_kernel(int64_t nrows, uint32_t nnz, const uint32_t *__restrict__ rowptr,
							  const uint32_t *__restrict__ colind, const float *__restrict__ val,
							  float *U, int64_t ldu, float *V, int64_t ldv, float *Gu,
							  int64_t ldgu, float *Gv, int64_t ldgv, const starfa_sgd_pass s,
							  int64_t nwarps, double *sse)
{
	constexpr int kWarps = kThreads / kWarp;
	__shared__ uint32_t s_row[kWarps][STARFA_SGD_CHUNK], s_col[kWarps][STARFA_SGD_CHUNK];
	__shared__ float s_val[kWarps][STARFA_SGD_CHUNK];
	const int lane = threadIdx.x % kWarp, wib = threadIdx.x / kWarp;
	const int64_t warp = ((int64_t)blockIdx.x * kThreads + threadIdx.x) / kWarp;
	if (warp >= nwarps)
		return;
	double local = 0.0;
	const uint32_t nchunks = (nnz + STARFA_SGD_CHUNK - 1) / STARFA_SGD_CHUNK;
	for (uint32_t chunk = (uint32_t)warp; chunk < nchunks; chunk += (uint32_t)nwarps) {
		const uint32_t c0 = chunk * STARFA_SGD_CHUNK;
		const uint32_t n = nnz - c0 < STARFA_SGD_CHUNK ? nnz - c0 : STARFA_SGD_CHUNK;
		const uint32_t key = starfa_sgd_key(s.seed, s.epoch, s.tile, chunk);
		int64_t row = starfa_sgd_row_of(rowptr, nrows, 0, c0);
		for (uint32_t q = lane; q < n; q += kWarp) {
			row = starfa_sgd_row_of(rowptr, nrows, row, c0 + q); /* rows only grow with q */
			s_row[wib][q] = (uint32_t)row;
			s_col[wib][q] = __ldg(colind + c0 + q);
			s_val[wib][q] = __ldg(val + c0 + q);
		}
		__syncwarp();
		for (uint32_t q = 0; q < n; q++) {
			const uint32_t i = starfa_sgd_order(q, n, key);
			const int64_t r = s_row[wib][i], c = s_col[wib][i];
			const float e = update<kVec>(U + r * ldu, V + c * ldv, s_val[wib][i], s, lane, Gu ? Gu + r * ldgu : nullptr,
						     Gv ? Gv + c * ldgv : nullptr);
			if (lane == 0)
				local += (double)e * e;
			__syncwarp(); /* the next update may read the row this one wrote */
		}
	}
	if (lane == 0 && sse)
		atomicAdd(sse, local);
}

} // namespace

extern "C" cudaError_t starfa_cuda_sgd(int64_t nrows, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind,
				       const float *val, float *U, int64_t ldu, float *V, int64_t ldv, float *Gu,
				       int64_t ldgu, float *Gv, int64_t ldgv, const struct starfa_sgd_pass *pass, int warps,
				       double *sse, cudaStream_t stream)
{
	if (!pass->adagrad)
		Gu = Gv = nullptr;
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
		nwarps = (int64_t)sms * 32; /* about what the SMs hold resident (registers, 24 KB of staging a block) */
	}
	if (nwarps > nchunks)
		nwarps = nchunks;
	unsigned blocks = (unsigned)((nwarps * kWarp + kThreads - 1) / kThreads);
	/* 16-byte loads when the rows allow them */
	const bool vec = pass->k % 4 == 0 && ldu % 4 == 0 && ldv % 4 == 0 && ((uintptr_t)U | (uintptr_t)V) % 16 == 0;
	if (vec)
		sgd_kernel<true><<<blocks, kThreads, 0, stream>>>(nrows, (uint32_t)nnz, rowptr, colind, val, U, ldu, V, ldv,
								  Gu, ldgu, Gv, ldgv, *pass, nwarps, sse);
	else
		sgd_kernel<false><<<blocks, kThreads, 0, stream>>>(nrows, (uint32_t)nnz, rowptr, colind, val, U, ldu, V,
								   ldv, Gu, ldgu, Gv, ldgv, *pass, nwarps, sse);
	return cudaGetLastError();
}
