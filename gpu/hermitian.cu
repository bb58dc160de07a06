/* The per-row Gram matrices of one CSR tile on CUDA, stored (the Gram accumulation: gpu/als_device.cuh). */
#include "gpu/hermitian.h"

#include "gpu/als_device.cuh"

#include <cuda_fp16.h>

#include <climits>

namespace {

struct HermitianArgs {
	starfa_cuda_rowsolve_tile tile;
	int64_t k;
	int weighted, accumulate, fp16;
	float alpha;
	const float *scale;
	int64_t scale_ld;
	void *A;
};

template <int FPW, int LANES, int PREC>
__global__ void __launch_bounds__(kThreads, FPW >= 7 ? 1 : 2) hermitian_kernel(const __grid_constant__ HermitianArgs a)
{
	extern __shared__ __align__(16) unsigned char smem[];
	const int kp = (int)padded(a.k), k = (int)a.k, tid = threadIdx.x;
	const Shared s = carve(smem, kp);
	const int64_t u = blockIdx.x;
	const RowSource src = {1, &a.tile};
	row_sources(s, src, u);
	const Weights wt = {a.weighted ? 2 : 3, a.alpha, 0.0f};
	Acc<FPW> acc;
	gram_rows<FPW, LANES, PREC>(s, src, a.k, wt, 0, s.pre[1], acc);
	store_blocks<FPW>(acc, kp / 16, s.U, s.lda, true);
	__syncthreads();
	const float inv = a.scale ? 1.0f / __ldg(a.scale + u * a.scale_ld) : 1.0f;
	const size_t base = (size_t)u * k * k;
	const int lane = tid & 31, warp = tid >> 5;
	for (int r = warp; r < k; r += kWarps) /* a warp a row: coalesced stores, no division */
		for (int c = lane; c < k; c += 32) {
			const size_t idx = (size_t)r * k + c;
			float v = s.U[r * s.lda + c] * inv;
			if (a.fp16) {
				__half *A = (__half *)a.A + base + idx;
				if (a.accumulate)
					v += __half2float(*A);
				*A = __float2half_rn(v);
			} else {
				float *A = (float *)a.A + base + idx;
				*A = a.accumulate ? *A + v : v;
			}
		}
}

template <int FPW, int LANES, int PREC>
cudaError_t launch_hermitian(const HermitianArgs &a, int64_t nrows, size_t bytes, cudaStream_t stream)
{
	cudaError_t err = prepare(hermitian_kernel<FPW, LANES, PREC>, bytes);
	if (err != cudaSuccess)
		return err;
	hermitian_kernel<FPW, LANES, PREC><<<(unsigned)nrows, kThreads, bytes, stream>>>(a);
	return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t starfa_cuda_hermitian(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind,
					     const float *val, const float *theta, int64_t ld, int64_t k, int weighted,
					     float alpha, const float *scale, int64_t scale_ld, int accumulate, int fp16,
					     void *A, starfa_cuda_gram_precision precision, cudaStream_t stream)
{
	if (k < 1 || k > STARFA_CUDA_ALS_MAX_K || nrows < 0 || nrows > INT_MAX || !starfa_gram_precision_valid(precision))
		return cudaErrorInvalidValue;
	if (nrows == 0)
		return cudaSuccess;
	HermitianArgs a = {{rowptr, colind, val, theta, nullptr, ld}, k, weighted, accumulate, fp16, alpha, scale,
			   scale_ld, A};
	const int kp = (int)padded(k);
	const size_t bytes = layout(kp).bytes;
#define LAUNCH(F, L) STARFA_PREC_DISPATCH(precision, launch_hermitian, F, L, a, nrows, bytes, stream)
	return STARFA_FPW_DISPATCH(kp, LAUNCH);
#undef LAUNCH
}
