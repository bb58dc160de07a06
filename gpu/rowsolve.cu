/* The fused build-and-solve of a band's rows on CUDA (the Gram accumulation and the solves: gpu/als_device.cuh).
 *
 * The fused kernel sums each row's Gram matrix and, in the same product, b_u (column k of the B
 * operand holds each entry's target), then writes the fragments, mirrored, with lambda and G added, as
 * a full kp x kp system into shared memory (store_system), where the block solves it at once. Nothing
 * but x_u is written. Rows longer than STARFA_CUDA_ROWSOLVE_SEGMENT are cut into segments built by
 * separate blocks that write their partial sums; the last of them (a counter per row) adds the parts
 * in order and solves, so the result does not depend on which block ran first. */
#include "gpu/rowsolve.h"

#include "gpu/als_device.cuh"

#include <climits>

namespace {

struct Partials {
	float *A;          /* nparts x kp x kp (the upper fragments only are written and read) */
	unsigned *counter; /* per long row, indexed by its first part */
};

/* The fused kernel's padded width: one column more than k, for b_u (gram_rows). */
__host__ __device__ inline int rowsolve_kp(int64_t k)
{
	return (int)padded(k + 1);
}

template <int FPW, int LANES, bool PRECISE>
__global__ void __launch_bounds__(kThreads, FPW >= 7 ? 1 : 2) rowsolve_kernel(const __grid_constant__ starfa_cuda_rowsolve pb,
							   Partials parts, uint32_t *status)
{
	extern __shared__ __align__(16) unsigned char smem[];
	const int kp = rowsolve_kp(pb.k), k = (int)pb.k, tid = threadIdx.x;
	const Shared s = carve(smem, kp);
	const uint32_t *item = pb.items + (int64_t)blockIdx.x * STARFA_ROWSOLVE_ITEM_WORDS;
	const uint32_t u = item[0], begin = item[1], end = item[2], part = item[3], first = item[4], nparts = item[5];
	const RowSource src = {pb.ntiles, pb.tiles};
	row_sources(s, src, u);
	const Weights wt = {pb.implicit ? 1 : 0, pb.alpha, pb.mu};
	Acc<FPW> acc;
	gram_rows<FPW, LANES, PRECISE>(s, src, pb.k, wt, begin, end, acc);
	const float lambda = __ldg(pb.lambda + (int64_t)u * pb.info_ld);
	bool finite_a;
	if (nparts > 1) {
		/* A segment: write the partial sums; the row's last segment to finish goes on. */
		store_blocks<FPW>(acc, kp / 16, parts.A + (size_t)part * kp * kp, kp, false);
		__threadfence();
		__syncthreads();
		if (tid == 0)
			s.red[kFlagLast] = atomicAdd(parts.counter + first, 1u) == nparts - 1 ? 1.0f : 0.0f;
		__syncthreads();
		if (s.red[kFlagLast] == 0.0f)
			return;
		__threadfence();
		block_elements(kp, kp, [&](int r, int c) {
			if (r / 16 > c / 16)
				return; /* a lower fragment: not written */
			float sum = 0.0f;
			for (uint32_t q = 0; q < nparts; q++)
				sum += __ldcg(parts.A + (size_t)(first + q) * kp * kp + r * kp + c);
			s.U[r * s.lda + c] = sum;
			if (r / 16 < c / 16)
				s.U[c * s.lda + r] = sum;
		});
		__syncthreads();
		for (int d = tid; d < kp; d += kThreads) /* b_u: column k of the sum */
			s.b[d] = d < k ? s.U[d * s.lda + k] : 0.0f;
		__syncthreads();
		finite_a = finish_system(s, k, lambda, pb.G);
	} else {
		finite_a = block_sum<0>(s, store_system<FPW>(acc, s, k, lambda, pb.G) ? 0.0f : 1.0f) == 0.0f;
	}
	solve_and_store<LANES, true>(s, k, finite_a, u, pb.cholesky != 0, pb.cg_steps, pb.X + (int64_t)u * pb.ldx, status);
}

template <int FPW, int LANES, bool PRECISE>
cudaError_t launch_rowsolve(const starfa_cuda_rowsolve *pb, Partials parts, uint32_t *status, size_t bytes,
			    cudaStream_t stream)
{
	cudaError_t err = prepare(rowsolve_kernel<FPW, LANES, PRECISE>, bytes);
	if (err != cudaSuccess)
		return err;
	rowsolve_kernel<FPW, LANES, PRECISE><<<(unsigned)pb->nitems, kThreads, bytes, stream>>>(*pb, parts, status);
	return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t starfa_cuda_rowsolve_run(const starfa_cuda_rowsolve *pb, uint32_t *status, cudaStream_t stream)
{
	if (pb->k < 1 || pb->k > STARFA_CUDA_ALS_MAX_K || pb->ntiles < 0 || pb->ntiles > STARFA_CUDA_ROWSOLVE_MAX_TILES ||
	    pb->nitems < 0 || pb->nitems > INT_MAX || (pb->nparts > 0 && !pb->items))
		return cudaErrorInvalidValue;
	cudaError_t err = status_init(status, stream);
	if (err != cudaSuccess || pb->nitems == 0)
		return err;
	const int kp = rowsolve_kp(pb->k);
	const size_t bytes = layout(kp).bytes;
	Partials parts = {nullptr, nullptr};
	void *scratch = nullptr;
	if (pb->nparts > 0) {
		size_t a = (size_t)pb->nparts * kp * kp * sizeof(float);
		err = cudaMallocAsync(&scratch, a + (size_t)pb->nparts * sizeof(unsigned), stream);
		if (err != cudaSuccess)
			return err;
		parts.A = (float *)scratch;
		parts.counter = (unsigned *)((char *)scratch + a);
		err = cudaMemsetAsync(parts.counter, 0, (size_t)pb->nparts * sizeof(unsigned), stream);
	}
	if (err == cudaSuccess) {
#define LAUNCH(F, L) (pb->precision == STARFA_CUDA_GRAM_3XTF32 ? launch_rowsolve<F, L, true>(pb, parts, status, bytes, stream) \
							    : launch_rowsolve<F, L, false>(pb, parts, status, bytes, stream))
		err = STARFA_FPW_DISPATCH(kp, LAUNCH);
#undef LAUNCH
	}
	if (scratch) {
		cudaError_t e = cudaFreeAsync(scratch, stream);
		if (err == cudaSuccess)
			err = e;
	}
	return err;
}
