/* Batched small SPD solves of stored systems on CUDA (the solves: gpu/als_device.cuh): Cholesky of float32
 * systems a warp a system, CG and FP16 systems a block a system. */
#include "gpu/solve.h"

#include "gpu/als_device.cuh"

#include <cuda_fp16.h>

#include <climits>

namespace {

struct SolveArgs {
	int64_t k;
	const void *A;
	int fp16;
	const float *b;
	int64_t ldb;
	const float *lambda, *scale;
	int64_t info_ld;
	const float *G;
	int cholesky, cg_steps;
	float *X;
	int64_t ldx;
	uint32_t *status;
};

/* Four blocks a multiprocessor: what a k = 100 system's shared memory allows, and 64 registers a thread. */
template <int LANES> __global__ void __launch_bounds__(kThreads, 4) solve_kernel(const __grid_constant__ SolveArgs a)
{
	extern __shared__ __align__(16) unsigned char smem[];
	const int kp = (int)padded(a.k), k = (int)a.k, tid = threadIdx.x;
	const Shared s = carve(smem, kp, false); /* no chunks to gather */
	const int64_t u = blockIdx.x;
	const float sc = a.scale ? __ldg(a.scale + u * a.info_ld) : 1.0f;
	const size_t base = (size_t)u * k * k;
	block_elements(k, k, [&](int r, int c) {
		const size_t idx = base + (size_t)r * k + c;
		const float v = a.fp16 ? __half2float(((const __half *)a.A)[idx]) : __ldg((const float *)a.A + idx);
		s.U[r * s.lda + c] = sc * v;
	});
	for (int d = tid; d < kp; d += kThreads)
		s.b[d] = d < k ? __ldg(a.b + u * a.ldb + d) : 0.0f;
	__syncthreads();
	const bool finite_a = finish_system(s, k, __ldg(a.lambda + u * a.info_ld), a.G);
	solve_and_store<LANES, false>(s, k, finite_a, u, a.cholesky != 0, a.cg_steps, a.X + u * a.ldx, a.status);
}

/* Element (r, c) of a stored system, finished: s_u v + G + lambda_u I, in finish_system's order. */
__device__ inline float finished(const SolveArgs &a, float sc, float lambda, float v, int r, int c)
{
	return __fadd_rn(__fmul_rn(sc, v), a.G ? __ldg(a.G + r * a.k + c) : 0.0f) + (r == c ? lambda : 0.0f);
}

/* Cholesky of float32 systems, a warp a system (warp_cholesky): the upper triangle copied in by cp.async
 * (by groups of four rows, PackedRows), finished in shared memory as finish_system does, b in column k.
 * As many warps a multiprocessor as their systems' shared memory allows (nine at k = 100). A row that
 * fails has its whole stored system read again for the blame, which the block form counted over every
 * element, the lower triangle too. */
__global__ void __launch_bounds__(32) cholesky_warp_kernel(const __grid_constant__ SolveArgs a)
{
	extern __shared__ __align__(16) float wsm[];
	const int k = (int)a.k, lane = threadIdx.x, L = packed_width(k);
	const PackedRows m = {wsm, L};
	float *const inv = wsm + packed_floats(k) + 4, *const xs = inv + ((k + 3) & ~3);
	const int64_t u = blockIdx.x;
	const float *const A = (const float *)a.A + (size_t)u * k * k;
	const bool vec = ((uintptr_t)A & 15) == 0 && k % 4 == 0;
	for (int r = 0; r < k; r++) { /* row r from column 4 floor(r / 4) on, lanes along it */
		float *const dst = m.row(r);
		const float *const src = A + r * k;
		if (vec)
			for (int q = (r >> 2) + lane; q < k / 4; q += 32)
				cp_async16(dst + 4 * q, src + 4 * q);
		else
			for (int c = (r & ~3) + lane; c < k; c += 32)
				cp_async4(dst + c, src + c);
	}
	cp_async_wait_all();
	__syncwarp();
	const float sc = a.scale ? __ldg(a.scale + u * a.info_ld) : 1.0f, lambda = __ldg(a.lambda + u * a.info_ld);
	for (int r = 0; r < k; r++) {
		float *const row = m.row(r);
		for (int c = r + lane; c < k; c += 32)
			row[c] = finished(a, sc, lambda, row[c], r, c);
	}
	for (int d = lane; d < k; d += 32)
		m.row(d)[k] = __ldg(a.b + u * a.ldb + d);
	__syncwarp();
	warp_solve_and_store(
		m, k, inv, xs,
		[&] {
			bool finite = true;
			spread_elements<32>(lane, k, k, [&](int r, int c) { finite = finite && isfinite(finished(a, sc, lambda, __ldg(A + r * k + c), r, c)); });
			return __all_sync(0xffffffffu, finite);
		},
		u, a.X + u * a.ldx, a.status);
}

template <int LANES> cudaError_t launch_solve(const SolveArgs &a, int64_t nrows, size_t bytes, cudaStream_t stream)
{
	cudaError_t err = prepare(solve_kernel<LANES>, bytes);
	if (err != cudaSuccess)
		return err;
	solve_kernel<LANES><<<(unsigned)nrows, kThreads, bytes, stream>>>(a);
	return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t starfa_cuda_solve(int64_t nrows, int64_t k, const void *A, int fp16, const float *b,
					 int64_t ldb, const float *lambda, const float *scale, int64_t info_ld,
					 const float *G, int cholesky, int cg_steps, float *X, int64_t ldx, uint32_t *status,
					 cudaStream_t stream)
{
	if (k < 1 || k > STARFA_CUDA_ALS_MAX_K || nrows < 0 || nrows > INT_MAX)
		return cudaErrorInvalidValue;
	cudaError_t err = status_init(status, stream);
	if (err != cudaSuccess || nrows == 0)
		return err;
	SolveArgs a = {k, A, fp16, b, ldb, lambda, scale, info_ld, G, cholesky, cg_steps, X, ldx, status};
	if (cholesky && !fp16) {
		const size_t wbytes = warp_system_floats(k) * sizeof(float);
		if ((err = prepare(cholesky_warp_kernel, wbytes)) != cudaSuccess)
			return err;
		cholesky_warp_kernel<<<(unsigned)nrows, 32, wbytes, stream>>>(a);
		return cudaGetLastError();
	}
	const int kp = (int)padded(k);
	const size_t bytes = layout(kp, false).bytes;
#define LAUNCH(L) launch_solve<L>(a, nrows, bytes, stream)
	return kp <= 32 ? LAUNCH(1) : kp <= 64 ? LAUNCH(2) : kp <= 96 ? LAUNCH(3) : kp <= 128 ? LAUNCH(4)
	       : kp <= 160 ? LAUNCH(5) : LAUNCH(6);
#undef LAUNCH
}
