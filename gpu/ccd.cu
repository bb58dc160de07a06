/* CCD++ passes and updates on CUDA. A pass is balanced by entries, not rows: each warp takes segments
 * of `segment` consecutive entries of the tile (its lanes 32 consecutive entries at a time, coalesced),
 * finds the segment's first row by a 32-way search across the warp and each entry's row by walking the
 * row offsets forward from there, and keeps per-lane partial sums of the
 * row's numerator and denominator, added into the row's accumulator with an atomic when the lane moves
 * to another row. A row of 200,000 entries (a popular item) is then spread over hundreds of warps
 * instead of holding one warp for its whole length. */
#include "gpu/ccd.h"

namespace {

constexpr int kThreads = 256, kWarp = 32, kUnroll = 4;
/* Segments of kMaxSegment entries on a large tile; on a small one shorter segments, down to one round of
 * kUnroll entries a lane, so that about kWarpsWanted warps share the tile: a 100,000-entry pass in
 * 2,048-entry segments kept 49 warps busy for 16 dependent rounds of loads (about 25 us on an H200). */
constexpr int64_t kMaxSegment = 32 * 64, kMinSegment = kUnroll * kWarp, kWarpsWanted = 8192;

int64_t segment_for(int64_t nnz)
{
	int64_t seg = (nnz + kWarpsWanted - 1) / kWarpsWanted;
	seg = (seg + kMinSegment - 1) / kMinSegment * kMinSegment;
	return seg < kMinSegment ? kMinSegment : seg > kMaxSegment ? kMaxSegment : seg;
}

/* The last row r of [0, nrows) with rowptr[r] <= start (the row of entry `start`), by the whole warp: each
 * round the lanes probe 32 evenly spaced rows of the range left and keep the last probe at or before
 * start (the probes that are form a prefix), so a tile of n rows takes log32(n) rounds of loads instead
 * of log2(n) dependent ones. Every lane returns it. */
__device__ int64_t warp_row_of(const uint32_t *__restrict__ rowptr, int64_t nrows, uint32_t start, int lane)
{
	int64_t lo = 0, hi = nrows - 1; /* rowptr[lo] <= start always (rowptr[0] = 0) */
	while (lo < hi) {
		const int64_t step = (hi - lo + kWarp) / kWarp, probe = lo + lane * step;
		const bool at_or_before = probe <= hi && __ldg(rowptr + probe) <= start;
		const unsigned mask = __ballot_sync(0xffffffffu, at_or_before);
		lo += (int64_t)(31 - __clz(mask)) * step;
		hi = min(hi, lo + step - 1);
	}
	return lo;
}

template <bool kWrite, bool kSub, bool kAdd, bool kSums>
__global__ void __launch_bounds__(kThreads)
	ccd_pass_kernel(int64_t nrows, int64_t nnz, const uint32_t *__restrict__ rowptr, const uint32_t *__restrict__ colind,
			float *__restrict__ R, const starfa_ccd_vecs v, float *__restrict__ acc, int64_t ld_acc,
			int64_t segment)
{
	const int lane = threadIdx.x % kWarp;
	const int64_t warps = (int64_t)gridDim.x * (kThreads / kWarp);
	/* the opening pass of a column sweep sums with the vector it puts back: one gather for both */
	const bool same_y = kAdd && kSums && v.y == v.add_y && v.ld_y == v.ld_add_y;
	const int64_t nsegments = (nnz + segment - 1) / segment;
	/* entry indices in 64 bits: a tile of up to UINT32_MAX entries has them near 2^32, where base +=
	 * kUnroll * kWarp would wrap in 32 */
	for (int64_t s = ((int64_t)blockIdx.x * kThreads + threadIdx.x) / kWarp; s < nsegments; s += warps) {
		const int64_t start = s * segment, e0 = start + lane, e1 = min(nnz, (s + 1) * segment);
		/* the row of the segment's first entry; each lane then walks forward to the row of its own
		 * first entry */
		int64_t row = warp_row_of(rowptr, nrows, (uint32_t)start, lane);
		if (e0 >= e1)
			continue;
		int64_t next = __ldg(rowptr + row + 1);
		while (e0 >= next)
			next = __ldg(rowptr + ++row + 1);
		float sx = kSub ? v.sub_x[row * v.ld_sub_x] : 0.0f, ax = kAdd ? v.add_x[row * v.ld_add_x] : 0.0f;
		float num = 0.0f, den = 0.0f;
		/* kUnroll entries a lane at a time: their indices, residuals and gathers are all in flight
		 * before the first is used (the loads do not depend on the row walk) */
		for (int64_t base = e0; base < e1; base += kUnroll * kWarp) {
			int64_t c[kUnroll];
			float r[kUnroll], sy[kUnroll], ay[kUnroll], yy[kUnroll];
#pragma unroll
			for (int u = 0; u < kUnroll; u++) {
				const int64_t e = base + u * kWarp;
				c[u] = e < e1 ? __ldg(colind + e) : 0;
				r[u] = e < e1 ? R[e] : 0.0f;
			}
#pragma unroll
			for (int u = 0; u < kUnroll; u++) {
				sy[u] = kSub ? __ldg(v.sub_y + c[u] * v.ld_sub_y) : 0.0f;
				ay[u] = kAdd ? __ldg(v.add_y + c[u] * v.ld_add_y) : 0.0f;
				yy[u] = kSums && !same_y ? __ldg(v.y + c[u] * v.ld_y) : ay[u];
			}
#pragma unroll
			for (int u = 0; u < kUnroll; u++) {
				const int64_t e = base + u * kWarp;
				if (e >= e1)
					break;
				if (e >= next) { /* a later row: flush this one's sums */
					if (kSums && (num != 0.0f || den != 0.0f)) {
						atomicAdd(acc + row * ld_acc, num);
						atomicAdd(acc + row * ld_acc + 1, den);
					}
					num = den = 0.0f;
					do
						next = __ldg(rowptr + ++row + 1);
					while (e >= next);
					if (kSub)
						sx = v.sub_x[row * v.ld_sub_x];
					if (kAdd)
						ax = v.add_x[row * v.ld_add_x];
				}
				float x = r[u];
				if (kSub)
					x -= sx * sy[u];
				if (kAdd)
					x += ax * ay[u];
				if (kWrite)
					R[e] = x;
				if (kSums) {
					num += x * yy[u];
					den += yy[u] * yy[u];
				}
			}
		}
		if (kSums && (num != 0.0f || den != 0.0f)) {
			atomicAdd(acc + row * ld_acc, num);
			atomicAdd(acc + row * ld_acc + 1, den);
		}
	}
}

/* acc's two columns = 0 where accumulate is 0 (the pass then adds into them). */
__global__ void zero_rows(int64_t nrows, float *acc, int64_t ld_acc)
{
	for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < nrows; r += (int64_t)gridDim.x * blockDim.x) {
		acc[r * ld_acc] = 0.0f;
		acc[r * ld_acc + 1] = 0.0f;
	}
}

/* sum over the block's rows of n[r] x[r]^2 in double, added into *reg by one atomic a block. Every thread
 * of the block calls it. */
__device__ void add_regularizer(double part, double *reg)
{
	__shared__ double warp_sums[kThreads / kWarp];
	for (int off = kWarp / 2; off > 0; off /= 2)
		part += __shfl_down_sync(0xffffffffu, part, off);
	if (threadIdx.x % kWarp == 0)
		warp_sums[threadIdx.x / kWarp] = part;
	__syncthreads();
	if (threadIdx.x < kWarp) {
		part = threadIdx.x < kThreads / kWarp ? warp_sums[threadIdx.x] : 0.0;
		for (int off = kWarp / 2; off > 0; off /= 2)
			part += __shfl_down_sync(0xffffffffu, part, off);
		if (threadIdx.x == 0 && part != 0.0)
			atomicAdd(reg, part);
	}
}

/* x's update; with kClear acc's two columns left at 0 (the next pass adds into them), with kReg
 * sum n x^2 of the new x added into *reg. */
template <bool kClear, bool kReg>
__global__ void __launch_bounds__(kThreads)
	ccd_solve_kernel(int64_t nrows, float *__restrict__ acc, int64_t ld_acc, const float *__restrict__ n, int64_t ld_n,
			 float lambda, int nonneg, float *__restrict__ x, int64_t ld_x, double *__restrict__ reg)
{
	double part = 0.0;
	for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < nrows; r += (int64_t)gridDim.x * blockDim.x) {
		const float den = lambda * n[r * ld_n] + acc[r * ld_acc + 1];
		const float v = den > 0.0f ? acc[r * ld_acc] / den : 0.0f, out = nonneg && !(v > 0.0f) ? 0.0f : v;
		x[r * ld_x] = out;
		if (kClear)
			acc[r * ld_acc] = acc[r * ld_acc + 1] = 0.0f;
		if (kReg)
			part += (double)n[r * ld_n] * out * out;
	}
	if (kReg)
		add_regularizer(part, reg);
}

__global__ void __launch_bounds__(kThreads)
	regularizer_kernel(int64_t nrows, const float *__restrict__ x, int64_t ld_x, const float *__restrict__ n, int64_t ld_n,
			   double *__restrict__ reg)
{
	double part = 0.0;
	for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < nrows; r += (int64_t)gridDim.x * blockDim.x) {
		const float v = x[r * ld_x];
		part += (double)n[r * ld_n] * v * v;
	}
	add_regularizer(part, reg);
}

/* A feature's opening in one launch: held = h (held non-NULL), both accumulators' columns 0, *reg = 0
 * (reg non-NULL). */
__global__ void open_kernel(int64_t nh, const float *__restrict__ h, int64_t ld_h, float *__restrict__ held,
			    int64_t ld_held, float *__restrict__ acc_h, int64_t ld_acc_h, int64_t nw, float *__restrict__ acc_w,
			    int64_t ld_acc_w, double *__restrict__ reg)
{
	const int64_t n = nh > nw ? nh : nw;
	for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < n; r += (int64_t)gridDim.x * blockDim.x) {
		if (r < nh && held)
			held[r * ld_held] = h[r * ld_h];
		if (r < nh && acc_h)
			acc_h[r * ld_acc_h] = acc_h[r * ld_acc_h + 1] = 0.0f;
		if (r < nw && acc_w)
			acc_w[r * ld_acc_w] = acc_w[r * ld_acc_w + 1] = 0.0f;
	}
	if (reg && blockIdx.x == 0 && threadIdx.x == 0)
		*reg = 0.0;
}

unsigned blocks_for(int64_t threads)
{
	int64_t b = (threads + kThreads - 1) / kThreads;
	return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

template <bool kWrite, bool kSub, bool kAdd, bool kSums>
void launch_pass(int64_t nrows, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind, float *R,
		 const starfa_ccd_vecs &v, float *acc, int64_t ld_acc, cudaStream_t stream)
{
	const int64_t segment = segment_for(nnz), segments = (nnz + segment - 1) / segment;
	ccd_pass_kernel<kWrite, kSub, kAdd, kSums><<<blocks_for(segments * kWarp), kThreads, 0, stream>>>(
		nrows, nnz, rowptr, colind, R, v, acc, ld_acc, segment);
}

} // namespace

extern "C" cudaError_t starfa_cuda_ccd_pass(int64_t nrows, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind,
					    float *R, int write, const struct starfa_ccd_vecs *v, float *acc, int64_t ld_acc,
					    int accumulate, cudaStream_t stream)
{
	const bool sub = v->sub_x && v->sub_y, add = v->add_x && v->add_y, sums = v->y && acc;
	if (nrows <= 0)
		return cudaSuccess;
	if (nnz > (int64_t)UINT32_MAX)
		return cudaErrorInvalidValue;
	if (sums && !accumulate) {
		cudaError_t err = ld_acc == 2 ? cudaMemsetAsync(acc, 0, sizeof(float) * 2 * (size_t)nrows, stream)
					      : (zero_rows<<<blocks_for(nrows), kThreads, 0, stream>>>(nrows, acc, ld_acc),
						 cudaGetLastError());
		if (err != cudaSuccess)
			return err;
	}
	if (nnz == 0)
		return cudaSuccess;
	/* each combination of terms compiled without tests in its loop */
#define STARFA_CCD_CASE(W, S, A, M)                                                                      \
	case W << 3 | S << 2 | A << 1 | M:                                                                \
		launch_pass<W, S, A, M>(nrows, nnz, rowptr, colind, R, *v, acc, ld_acc, stream);             \
		break
	switch ((int)write << 3 | (int)sub << 2 | (int)add << 1 | (int)sums) {
		STARFA_CCD_CASE(1, 1, 1, 1);
		STARFA_CCD_CASE(1, 1, 1, 0);
		STARFA_CCD_CASE(1, 1, 0, 1);
		STARFA_CCD_CASE(1, 1, 0, 0);
		STARFA_CCD_CASE(1, 0, 1, 1);
		STARFA_CCD_CASE(1, 0, 1, 0);
		STARFA_CCD_CASE(1, 0, 0, 1);
		STARFA_CCD_CASE(1, 0, 0, 0);
		STARFA_CCD_CASE(0, 1, 1, 1);
		STARFA_CCD_CASE(0, 1, 0, 1);
		STARFA_CCD_CASE(0, 0, 1, 1);
		STARFA_CCD_CASE(0, 0, 0, 1);
	default: return cudaSuccess; /* reading without summing: nothing to do */
	}
#undef STARFA_CCD_CASE
	return cudaGetLastError();
}

extern "C" cudaError_t starfa_cuda_ccd_solve(int64_t nrows, float *acc, int64_t ld_acc, const float *n, int64_t ld_n,
					     float lambda, int nonneg, float *x, int64_t ld_x, int clear, double *reg,
					     cudaStream_t stream)
{
	if (nrows <= 0)
		return cudaSuccess;
	const unsigned blocks = blocks_for(nrows);
	if (clear && reg)
		ccd_solve_kernel<true, true><<<blocks, kThreads, 0, stream>>>(nrows, acc, ld_acc, n, ld_n, lambda, nonneg, x, ld_x, reg);
	else if (clear)
		ccd_solve_kernel<true, false><<<blocks, kThreads, 0, stream>>>(nrows, acc, ld_acc, n, ld_n, lambda, nonneg, x, ld_x, reg);
	else if (reg)
		ccd_solve_kernel<false, true><<<blocks, kThreads, 0, stream>>>(nrows, acc, ld_acc, n, ld_n, lambda, nonneg, x, ld_x, reg);
	else
		ccd_solve_kernel<false, false><<<blocks, kThreads, 0, stream>>>(nrows, acc, ld_acc, n, ld_n, lambda, nonneg, x, ld_x, reg);
	return cudaGetLastError();
}

extern "C" cudaError_t starfa_cuda_ccd_regularizer(int64_t nrows, const float *x, int64_t ld_x, const float *n, int64_t ld_n,
						   double *reg, int add, cudaStream_t stream)
{
	if (!add) {
		cudaError_t err = cudaMemsetAsync(reg, 0, sizeof *reg, stream);
		if (err != cudaSuccess)
			return err;
	}
	if (nrows <= 0)
		return cudaSuccess;
	regularizer_kernel<<<blocks_for(nrows), kThreads, 0, stream>>>(nrows, x, ld_x, n, ld_n, reg);
	return cudaGetLastError();
}

extern "C" cudaError_t starfa_cuda_ccd_open(int64_t nh, const float *h, int64_t ld_h, float *held, int64_t ld_held,
					    float *acc_h, int64_t ld_acc_h, int64_t nw, float *acc_w, int64_t ld_acc_w,
					    double *reg, cudaStream_t stream)
{
	open_kernel<<<blocks_for(nh > nw ? nh : nw), kThreads, 0, stream>>>(nh, h, ld_h, held, ld_held, acc_h, ld_acc_h, nw,
									    acc_w, ld_acc_w, reg);
	return cudaGetLastError();
}
