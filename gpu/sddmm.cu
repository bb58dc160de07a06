/* SDDMM on one CSR tile, CUDA.
 *
 * Four kernels (after Nisa et al., HiPC 2018, and the ETH follow-up "Fast SDDMM on GPUs"):
 *  - warp per row: the plain kernel, any k and alignment; the reference the others are
 *    checked against and the fallback.
 *  - vwarp: the nonzeros are cut into equal spans (so a heavy row is shared among many
 *    virtual warps and empty rows cost nothing); a virtual warp of V lanes sized to k reads
 *    B rows with 16-byte loads, keeps the current A row in registers across the row's
 *    nonzeros and reduces with shuffles. B comes through L1/L2.
 *  - smem: vwarp with the tile's whole B block staged in shared memory first, for tiles
 *    whose B block fits and whose nonzeros reuse it enough to pay for the staging.
 *  - vwarp_sliced: vwarp in passes over slices of k, each slice of B sized to stay in L2.
 *    Measured on an H200 (bench/RESULTS.md, 2026-11-22 00:55) it beat vwarp only on the
 *    uniform matrix at K=128 (by 5%) and lost up to 1.9x elsewhere, so the automatic choice
 *    never takes it; it stays for experiments on other devices.
 *  - panel: the column panels of the SM-L2 scheme (without its shared-memory staging, which
 *    pays only where a block's nonzeros share B rows, as smem does). The tile's columns are
 *    cut into panels whose B rows fill part of L2, and one launch per panel sweeps all rows
 *    of A over it, so that a B row read by many nonzeros comes from device memory once
 *    instead of once per nonzero, at the price of reading each A row and the column indices
 *    once per panel (vwarp_sliced applies the same L2 model along k, at the price of reading
 *    and rewriting out once per slice). The automatic choice takes it where the benchmark
 *    showed it faster (kPanelMinL2Ratio).
 *  - by column: the SM-SM scheme with A staged: a block copies a block of A rows (rows of about the
 *    same length) into shared memory and walks their nonzeros in column order, a B row in registers
 *    for each column's run; the order is sorted once a tile and kept. Beside these, the dense rows of
 *    Zipf-skewed tiles go through cuBLAS, and the codelet's kernel is the fastest of the candidates
 *    timed on each tile (starfa_cuda_sddmm_tuned).
 * Device limits (SM count, threads per SM, L2 size, shared memory) are read from the device.
 */
#include "gpu/sddmm.h"

#include "gpu/lru.h"
#include "gpu/reduce.cuh"

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace {

constexpr int kWarp = 32;
constexpr int kThreads = 256;
constexpr int kChunk = 32; /* most nonzeros per virtual warp and warp span */
constexpr int kMaxDevices = 64;
/* Output modes of the virtual-warp kernel: scale by S's value; add to what out holds
 * (the k-slices after the first). */
constexpr int kScale = 1, kAccumulate = 2;
/* What a kernel does with a nonzero's dot product d: out = alpha * (kScale ? s : 1) * d, plus
 * beta * out with kAccumulate (the k-slices after the first add with beta 1). */
struct Epilogue {
	int mode;
	float alpha, beta;
};
/* Stage B only when each staged row serves this many nonzeros per block on average:
 * below it, the staging traffic is larger than the L1/L2 reads it saves. */
constexpr double kSmemMinReuse = 8.0;
/* The panel variant: its B rows may take this fraction of L2; the rest holds the A rows,
 * column indices and outputs streaming through. */
constexpr double kPanelL2Fraction = 0.5;
/* No narrower panels: every panel's launch reads all of colind and has a fixed cost. With
 * k <= 1024 (the widest the kernels take) a panel is this narrow only on an L2 under 1 MB,
 * so panels are never combined with k-slices. */
constexpr int64_t kPanelMinCols = 128;
/* Resident-warp waves a panel's launch is sized for (balance between warps), and the most
 * 32-nonzero batches one warp scans per panel before the grid strides. */
constexpr int64_t kPanelWaves = 4, kPanelMaxBatches = 64;
/* AUTO's rule for the panel variant: B block more than this many times L2, and more than this many
 * nonzeros per B row. Measured on an H200 (bench/RESULTS.md, 60 MB L2): panel beat vwarp on the
 * uniform matrix with B at 0.85 and 3.4 times L2 (K = 128, 512: 1.19x, 1.39x) and lost on the
 * Netflix-shaped one with B at 0.6 times L2 (K = 512: 0.87x). */
constexpr double kPanelMinL2Ratio = 0.75, kPanelMinReuse = 1.7;

struct DeviceLimits {
	int sms;
	int smem_per_block_optin;
	int smem_per_sm;
	int threads_per_sm;
	int l2_bytes;
};

cudaError_t device_limits(DeviceLimits *out)
{
	static DeviceLimits cache[kMaxDevices];
	static bool ready[kMaxDevices];
	int dev;
	cudaError_t err = cudaGetDevice(&dev);
	if (err != cudaSuccess)
		return err;
	if (dev < kMaxDevices && ready[dev]) {
		*out = cache[dev];
		return cudaSuccess;
	}
	DeviceLimits d;
	if ((err = cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
	    (err = cudaDeviceGetAttribute(&d.smem_per_block_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) !=
		    cudaSuccess ||
	    (err = cudaDeviceGetAttribute(&d.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev)) !=
		    cudaSuccess ||
	    (err = cudaDeviceGetAttribute(&d.threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, dev)) !=
		    cudaSuccess ||
	    (err = cudaDeviceGetAttribute(&d.l2_bytes, cudaDevAttrL2CacheSize, dev)) != cudaSuccess)
		return err;
	if (dev < kMaxDevices) {
		cache[dev] = d;
		ready[dev] = true; /* racing writers store the same values */
	}
	*out = d;
	return cudaSuccess;
}

/* Lets Kernel take dynamic shared memory up to the device's opt-in limit, once a device. One value for
 * every launch, not a launch's own size: two host threads launching it on one device cannot lower the
 * limit under each other, and the driver call is made once a device, not before every launch. */
template <auto Kernel>
cudaError_t allow_optin_smem()
{
	static std::atomic<uint64_t> done{0}; /* one bit a device */
	static_assert(kMaxDevices <= 64, "one bit a device");
	DeviceLimits d;
	int dev;
	cudaError_t err = cudaGetDevice(&dev);
	if (err != cudaSuccess)
		return err;
	const uint64_t bit = dev < kMaxDevices ? uint64_t{1} << dev : 0;
	if (bit && (done.load(std::memory_order_acquire) & bit))
		return cudaSuccess;
	if ((err = device_limits(&d)) != cudaSuccess ||
	    (err = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, d.smem_per_block_optin)) !=
		    cudaSuccess)
		return err;
	done.fetch_or(bit, std::memory_order_release); /* racing setters store the same value */
	return cudaSuccess;
}

/* ------------------------------------------------------------------ virtual warps */

/* The rows a kernel leaves to the dense rows' product: those whose rank among the tile's dense-row
 * candidates (longest first; -1 for the others) is below `rows`. */
struct RowSkip {
	const int32_t *rank;
	int32_t rows;
	__device__ __forceinline__ bool skipped(int64_t row) const
	{
		return (uint32_t)__ldg(rank + row) < (uint32_t)rows;
	}
};

/* The row holding nonzero p: the last r with rowptr[r] <= p. */
__device__ __forceinline__ int64_t row_of(const uint32_t *__restrict__ rowptr, int64_t nrows, uint32_t p)
{
	int64_t lo = 0, hi = nrows - 1;
	while (lo < hi) {
		int64_t mid = (lo + hi + 1) / 2;
		if (__ldg(rowptr + mid) <= p)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/* ------------------------------------------------------------------ warp spans (any k) */

/* For ranks and layouts without 16-byte loads: a warp takes a span of kChunk consecutive nonzeros (found
 * in its rows by a search of rowptr), and each nonzero's dot product has the lanes across k, added up by
 * shuffles. A warp a row before, it left the longest row's nonzeros in one warp's sequence: at k = 34
 * (ALS's factors with their two bias columns) the training loss's SDDMM took 0.87 ms on MovieLens (671
 * rows, the longest of 2,391 nonzeros) against 0.01 ms at k = 32. Each nonzero's sum is formed as before,
 * so the output bits are the same. (The variant was "warp_per_row" in earlier benchmark results.) */
__global__ void sddmm_warp_spans(int64_t nrows, const uint32_t *__restrict__ rowptr,
				   const uint32_t *__restrict__ colind, const float *__restrict__ sval,
				   const float *__restrict__ A, int64_t lda, const float *__restrict__ B, int64_t ldb,
				   int64_t k, Epilogue ep, float *__restrict__ out)
{
	constexpr int warps_per_block = kThreads / kWarp;
	const int lane = threadIdx.x % kWarp;
	const int64_t warps = (int64_t)gridDim.x * warps_per_block;
	const uint32_t nnz = __ldg(rowptr + nrows);
	for (int64_t span = (int64_t)blockIdx.x * warps_per_block + threadIdx.x / kWarp; span * kChunk < nnz;
	     span += warps) {
		const uint32_t first = (uint32_t)(span * kChunk);
		const uint32_t last = first + kChunk < nnz ? first + kChunk : nnz;
		int64_t r = row_of(rowptr, nrows, first);
		uint32_t row_end = __ldg(rowptr + r + 1);
		for (uint32_t p = first; p < last; p++) {
			while (p >= row_end) /* rows without nonzeros are passed over */
				row_end = __ldg(rowptr + ++r + 1);
			const float *a = A + r * lda, *b = B + (int64_t)__ldg(colind + p) * ldb;
			float acc = 0.0f;
			for (int64_t d = lane; d < k; d += kWarp)
				acc += a[d] * b[d];
			for (int offset = kWarp / 2; offset > 0; offset /= 2)
				acc += __shfl_down_sync(0xffffffffu, acc, offset);
			if (lane == 0) {
				float v = ep.alpha * (ep.mode & kScale ? sval[p] * acc : acc);
				out[p] = ep.mode & kAccumulate ? v + ep.beta * out[p] : v;
			}
		}
	}
}

__device__ __forceinline__ float dot4(float4 a, float4 b)
{
	return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}

/* The row holding nonzero p, searching forward from row `from` (which holds an earlier
 * nonzero): a few steps of linear probing cover short gaps, a binary search the rest. */
__device__ __forceinline__ int64_t next_row_of(const uint32_t *__restrict__ rowptr, int64_t nrows, int64_t from,
					       uint32_t p)
{
#pragma unroll
	for (int step = 1; step <= 4; step++)
		if (from + step < nrows && p < __ldg(rowptr + from + step + 1))
			return from + step;
	return row_of(rowptr, nrows, p);
}

/* The lanes of group `group` (V lanes) within its warp, for shuffles that leave the other
 * groups alone. */
template <int V>
__device__ __forceinline__ unsigned group_lanes(int group)
{
	return V == kWarp ? 0xffffffffu : ((1u << V) - 1u) << (group * V);
}

/* This lane's share of A row `row` (k4 float4), held in registers by a V-lane group: float4
 * lane, lane + V, ... (zeros past k4, so that they add nothing to the dot products). With
 * kStream the row is read evict-first, so that it does not push out data that L2 is to keep.
 * (A, row and lda4 come separately, and group_dot's B row as base and offset: so inlined,
 * the VWARP kernels compile to the same code as before these helpers existed.) */
template <int V, int J, bool kStream>
__device__ __forceinline__ void load_a_row(float4 (&a)[J], const float4 *__restrict__ A, int64_t row, int64_t lda4,
					   int lane, int k4)
{
#pragma unroll
	for (int j = 0; j < J; j++)
		a[j] = lane + j * V < k4 ? (kStream ? __ldcs(A + row * lda4 + lane + j * V)
						    : __ldg(A + row * lda4 + lane + j * V))
					 : make_float4(0, 0, 0, 0);
}

/* <A row, B row> by a V-lane group holding the A row (load_a_row), the B row at
 * b_rows + b_offset: each lane's float4 products, summed over the group with shuffles; every
 * lane of the group gets the sum. B is in shared memory with kSmem, else read through the
 * read-only cache. */
template <int V, int J, bool kSmem>
__device__ __forceinline__ float group_dot(const float4 (&a)[J], const float4 *b_rows, int64_t b_offset, int lane,
					   int k4, unsigned lanes)
{
	const float4 *b = b_rows + b_offset;
	float acc = 0.0f;
#pragma unroll
	for (int j = 0; j < J; j++)
		if (lane + j * V < k4)
			acc += dot4(a[j], kSmem ? b[lane + j * V] : __ldg(b + lane + j * V));
#pragma unroll
	for (int offset = V / 2; offset > 0; offset /= 2)
		acc += __shfl_xor_sync(lanes, acc, offset, V);
	return acc;
}

/* Stores nonzero p's dot product in output mode `mode` (one lane per group); with kStream,
 * S's value and the output go through L2 evict-first (as load_a_row). */
template <bool kStream>
__device__ __forceinline__ void store_result(float acc, int64_t p, const Epilogue &ep, const float *__restrict__ sval,
					     float *__restrict__ out)
{
	if (ep.mode & kScale)
		acc *= kStream ? __ldcs(sval + p) : __ldg(sval + p);
	acc *= ep.alpha;
	if (ep.mode & kAccumulate)
		acc += ep.beta * out[p];
	if (kStream)
		__stcs(out + p, acc);
	else
		out[p] = acc;
}

/* V lanes per virtual warp, J float4 per lane: V * J * 4 >= k. A warp owns a contiguous
 * range of gpw * chunk nonzeros (gpw = 32 / V groups per warp); group g takes nonzeros
 * g, g + gpw, g + 2 gpw, ... of it, so that at each step the warp's column-index loads and
 * output stores are consecutive (coalesced) while neighbouring groups mostly share the A
 * row. With kSmem, B (ncols rows of k4 float4) is first copied to shared memory with row
 * stride smem_ld. With kSkip, the rows `skip` names are left alone (the dense rows' product writes
 * them): a warp whose span lies inside one of them goes to its next span at once, and a step where
 * every group is on such a row computes nothing. */
template <int V, int J, bool kSmem, bool kSkip>
__global__ void __launch_bounds__(kThreads)
	sddmm_vwarp(int64_t nrows, int64_t ncols, uint32_t nnz, int chunk, const uint32_t *__restrict__ rowptr,
		    const uint32_t *__restrict__ colind, const float *__restrict__ sval, const float4 *__restrict__ A,
		    int64_t lda4, const float4 *__restrict__ B, int64_t ldb4, int k4, int smem_ld, Epilogue ep,
		    RowSkip skip, float *__restrict__ out)
{
	constexpr int gpw = kWarp / V;
	extern __shared__ float4 staged_b[];
	const float4 *b_rows = B;
	int64_t b_ld = ldb4;
	if (kSmem) {
		for (int64_t i = threadIdx.x; i < ncols * k4; i += kThreads) {
			int64_t r = i / k4, c = i - r * k4;
			staged_b[r * smem_ld + c] = B[r * ldb4 + c];
		}
		__syncthreads();
		b_rows = staged_b;
		b_ld = smem_ld;
	}
	const int lane = threadIdx.x % V;
	const int group_in_warp = threadIdx.x % kWarp / V;
	const unsigned lanes = group_lanes<V>(group_in_warp);
	const int64_t span = (int64_t)gpw * chunk; /* nonzeros per warp */
	const int64_t warps = (int64_t)gridDim.x * (kThreads / kWarp);

	(void)lanes;
	for (int64_t w = ((int64_t)blockIdx.x * kThreads + threadIdx.x) / kWarp; w * span < nnz; w += warps) {
		/* 32-bit positions (nnz <= UINT32_MAX). Every group of the warp makes the same number of
		 * steps, those past the span on a copy of its last nonzero that they do not store, so the
		 * shuffles are whole-warp ones and the store a predicated instruction: with a group's own
		 * mask and a branch around the store, the per-nonzero divergence handling (mask matching,
		 * branch and reconvergence instructions) was what bounded the kernel at small k (Nsight
		 * Compute: the ADU pipe at 86% on the Netflix shape at k = 32, bench/RESULTS.md). */
		const uint32_t begin = (uint32_t)(w * span), end = (uint32_t)min((int64_t)nnz, (w + 1) * span);
		const uint32_t last = end - 1;
		uint32_t q = min(begin + (uint32_t)group_in_warp, last);
		int64_t row = row_of(rowptr, nrows, q);
		uint32_t row_end = __ldg(rowptr + row + 1);
		bool skipped = kSkip && skip.skipped(row);
		/* The whole span inside one skipped row (group 0's, which holds the span's first nonzero): the
		 * same answer in every lane. */
		if (kSkip && __shfl_sync(0xffffffffu, skipped && row_end >= end, 0))
			continue;
		float4 a[J];
		load_a_row<V, J, false>(a, A, row, lda4, lane, k4);
		for (uint32_t base = begin; base < end; base += gpw) {
			const uint32_t p = base + (uint32_t)group_in_warp;
			q = min(p, last);
			if (q >= row_end) { /* a later row: reload the A row held in registers */
				row = next_row_of(rowptr, nrows, row, q);
				row_end = __ldg(rowptr + row + 1);
				skipped = kSkip && skip.skipped(row);
				load_a_row<V, J, false>(a, A, row, lda4, lane, k4);
			}
			if (kSkip && __all_sync(0xffffffffu, skipped))
				continue;
			float acc = group_dot<V, J, kSmem>(a, b_rows, (int64_t)__ldg(colind + q) * b_ld, lane, k4,
							   0xffffffffu);
			if (ep.mode & kScale)
				acc *= __ldg(sval + q);
			acc *= ep.alpha;
			if (ep.mode & kAccumulate)
				acc += ep.beta * out[q];
			if (lane == 0 && p < end && !skipped)
				out[q] = acc;
		}
	}
}

/* ------------------------------------------------------------------ column panels (SM-L2) */

/* One launch per column panel [c0, c0 + width): all rows of A sweep over the panel's B rows,
 * which stay in L2 between the nonzeros that read them. Warp w owns the nonzeros
 * [w * span, (w + 1) * span) (span a multiple of 32) and reads their column indices 32 at a
 * time, one per lane; those in the panel are compacted, in order, into the warp's list in
 * shared memory and dealt round-robin to its gpw groups, which compute as VWARP's do (V lanes,
 * the A row in registers, loaded when the group first meets the row in this launch).
 * Filtering by column, rather than searching each row for the panel's sub-range, keeps
 * VWARP's split into equal nonzero spans (heavy rows shared, empty rows free), reads colind
 * in full coalesced lines (4 bytes per nonzero and panel, against the k * 4 bytes of a B
 * row) and needs no column order within a row. Every nonzero with a column in the panel is
 * written once, by this launch; the others are left alone. What streams through (A rows,
 * column indices, S's values, outputs: each read or written once per launch) goes
 * evict-first, so that it pushes the panel's B rows (read with the default policy) out of L2
 * as little as it can. */
template <int V, int J>
__global__ void __launch_bounds__(kThreads)
	sddmm_panel(int64_t nrows, uint32_t nnz, int64_t span, uint32_t c0, uint32_t width,
		    const uint32_t *__restrict__ rowptr, const uint32_t *__restrict__ colind,
		    const float *__restrict__ sval, const float4 *__restrict__ A, int64_t lda4,
		    const float4 *__restrict__ B, int64_t ldb4, int k4, Epilogue ep, float *__restrict__ out)
{
	constexpr int gpw = kWarp / V;
	constexpr int warps_per_block = kThreads / kWarp;
	/* Per warp: the positions and columns of this batch's nonzeros in the panel. */
	__shared__ uint32_t picked_p[warps_per_block][kWarp], picked_c[warps_per_block][kWarp];
	const int warp_lane = threadIdx.x % kWarp;
	const int lane = threadIdx.x % V;
	const int group_in_warp = warp_lane / V;
	const unsigned lanes = group_lanes<V>(group_in_warp);
	const unsigned lanes_below = (1u << warp_lane) - 1u;
	uint32_t *my_p = picked_p[threadIdx.x / kWarp], *my_c = picked_c[threadIdx.x / kWarp];
	const int64_t warps = (int64_t)gridDim.x * warps_per_block;

	for (int64_t w = (int64_t)blockIdx.x * warps_per_block + threadIdx.x / kWarp; w * span < nnz; w += warps) {
		/* 32-bit positions: begin + len <= nnz <= UINT32_MAX, and len <= span is small. */
		const uint32_t begin = (uint32_t)(w * span), len = (uint32_t)min((int64_t)nnz - w * span, span);
		/* Every group walks forward from the row of the span's first nonzero. */
		int64_t row = row_of(rowptr, nrows, begin);
		uint32_t row_end = __ldg(rowptr + row + 1);
		bool have_row = false; /* whether a holds the A row of `row` */
		float4 a[J];
		for (uint32_t batch = 0; batch < len; batch += kWarp) {
			const bool mine = batch + warp_lane < len;
			const uint32_t p = begin + batch + warp_lane;
			const uint32_t c = mine ? __ldcs(colind + p) : 0u;
			const bool in = mine && c - c0 < width; /* unsigned: c < c0 wraps to beyond width */
			const unsigned found = __ballot_sync(0xffffffffu, in);
			if (in) {
				const int slot = __popc(found & lanes_below);
				my_p[slot] = p;
				my_c[slot] = c;
			}
			__syncwarp();
			const int count = __popc(found);
			for (int q = group_in_warp; q < count; q += gpw) {
				const uint32_t pq = my_p[q];
				if (pq >= row_end) { /* positions only grow: search forward */
					row = next_row_of(rowptr, nrows, row, pq);
					row_end = __ldg(rowptr + row + 1);
					have_row = false;
				}
				if (!have_row) {
					load_a_row<V, J, true>(a, A, row, lda4, lane, k4);
					have_row = true;
				}
				float acc = group_dot<V, J, false>(a, B, (int64_t)my_c[q] * ldb4, lane, k4, lanes);
				if (lane == 0)
					store_result<true>(acc, pq, ep, sval, out);
			}
			__syncwarp(); /* the list is read out before the next batch overwrites it */
		}
	}
}

struct Shape {
	int v, j;
};

/* Virtual-warp shape for k4 = k/4 float4 per row: up to 4 float4 per lane in flight, then
 * widen the group; 0 when k is beyond what the templates cover. */
Shape vwarp_shape(int64_t k4)
{
	if (k4 <= 1) return {1, 1};
	if (k4 <= 2) return {2, 1};
	if (k4 <= 4) return {4, 1};
	if (k4 <= 8) return {4, 2};
	if (k4 <= 16) return {4, 4};
	if (k4 <= 32) return {8, 4};
	if (k4 <= 64) return {16, 4};
	if (k4 <= 128) return {32, 4};
	if (k4 <= 256) return {32, 8};
	return {0, 0};
}

/* Row stride of staged B: a quarter warp (8 lanes, one 128-byte shared-memory phase)
 * spans several rows when V < 8; pad so their segments land on different banks. */
int smem_row_stride(int64_t k4, int v)
{
	return (int)(v < 8 ? k4 + 1 : k4);
}

bool vectorizable(const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k)
{
	return k % 4 == 0 && lda % 4 == 0 && ldb % 4 == 0 && ((uintptr_t)A | (uintptr_t)B) % 16 == 0;
}

/* The (V, J) instances the launchers dispatch to: every shape vwarp_shape gives. */
#define STARFA_SDDMM_SHAPES(X) X(1, 1) X(2, 1) X(4, 1) X(4, 2) X(4, 4) X(8, 4) X(16, 4) X(32, 4) X(32, 8)

/* kSkip only without kSmem: the dense rows' product runs beside the plain virtual-warp kernel. A
 * skip with no rows (skip.rows == 0) launches the instance without skipping. */
template <bool kSmem>
cudaError_t launch_vwarp(Shape s, int64_t nrows, int64_t ncols, uint32_t nnz, const uint32_t *rowptr,
			 const uint32_t *colind, const float *sval, const float *A, int64_t lda, const float *B,
			 int64_t ldb, int64_t k, Epilogue ep, float *out, cudaStream_t stream, unsigned blocks,
			 size_t smem_bytes, int chunk, RowSkip skip = RowSkip{nullptr, 0})
{
	const float4 *A4 = reinterpret_cast<const float4 *>(A);
	const float4 *B4 = reinterpret_cast<const float4 *>(B);
	const int k4 = (int)(k / 4), smem_ld = smem_row_stride(k4, s.v);
	const bool skipping = !kSmem && skip.rows > 0;
#define STARFA_SDDMM_CASE(V, J)                                                                          \
	if (s.v == V && s.j == J) {                                                                      \
		if (kSmem) {                                                                             \
			cudaError_t e = allow_optin_smem<sddmm_vwarp<V, J, kSmem, false>>();             \
			if (e != cudaSuccess)                                                            \
				return e;                                                                \
		}                                                                                        \
		if (skipping)                                                                            \
			sddmm_vwarp<V, J, false, true><<<blocks, kThreads, 0, stream>>>(                 \
				nrows, ncols, nnz, chunk, rowptr, colind, sval, A4, lda / 4, B4, ldb / 4, k4, smem_ld, \
				ep, skip, out);                                                          \
		else                                                                                     \
			sddmm_vwarp<V, J, kSmem, false><<<blocks, kThreads, smem_bytes, stream>>>(       \
				nrows, ncols, nnz, chunk, rowptr, colind, sval, A4, lda / 4, B4, ldb / 4, k4, smem_ld, \
				ep, skip, out);                                                          \
		return cudaGetLastError();                                                               \
	}
	STARFA_SDDMM_SHAPES(STARFA_SDDMM_CASE)
#undef STARFA_SDDMM_CASE
	return cudaErrorInvalidValue;
}

/* One panel's launch: the nonzeros with a column in [c0, c0 + width). */
cudaError_t launch_panel(Shape s, int64_t nrows, uint32_t nnz, int64_t span, uint32_t c0, uint32_t width,
			 const uint32_t *rowptr, const uint32_t *colind, const float *sval, const float *A, int64_t lda,
			 const float *B, int64_t ldb, int64_t k, Epilogue ep, float *out, cudaStream_t stream,
			 unsigned blocks)
{
	const float4 *A4 = reinterpret_cast<const float4 *>(A);
	const float4 *B4 = reinterpret_cast<const float4 *>(B);
	const int k4 = (int)(k / 4);
#define STARFA_SDDMM_CASE(V, J)                                                                          \
	if (s.v == V && s.j == J) {                                                                      \
		sddmm_panel<V, J><<<blocks, kThreads, 0, stream>>>(nrows, nnz, span, c0, width, rowptr, colind, \
								   sval, A4, lda / 4, B4, ldb / 4, k4, ep, out);   \
		return cudaGetLastError();                                                               \
	}
	STARFA_SDDMM_SHAPES(STARFA_SDDMM_CASE)
#undef STARFA_SDDMM_CASE
	return cudaErrorInvalidValue;
}

struct Plan {
	starfa_cuda_sddmm_variant variant;
	Shape shape;
	unsigned blocks;
	size_t smem_bytes;
	int chunk;          /* nonzeros per virtual warp */
	int64_t slice;      /* k-slice width of VWARP_SLICED */
	int64_t panel_cols; /* columns per panel of PANEL */
	int64_t span;       /* nonzeros per warp of PANEL, a multiple of 32 */
};

/* The k-slice whose B columns (ncols x slice floats) fill about half of L2, in multiples of
 * 32 (at least 32): each pass over the nonzeros then finds its B rows in L2 instead of
 * re-reading them from device memory (the SM-L2 scheme's L2 model, applied along k). */
int64_t l2_slice(const DeviceLimits &dev, int64_t ncols)
{
	int64_t slice = (int64_t)dev.l2_bytes / 2 / (ncols * (int64_t)sizeof(float));
	slice = slice / 32 * 32;
	return slice < 32 ? 32 : slice;
}

/* Columns per panel: as many B rows (k floats, counted in whole 32-byte sectors) as fill
 * kPanelL2Fraction of L2, and at least kPanelMinCols; the columns are then cut into panels of
 * about equal width, so that the last one is not a sliver. ncols itself when one panel will do. */
int64_t panel_cols(const DeviceLimits &dev, int64_t ncols, int64_t k)
{
	int64_t row_bytes = (k * (int64_t)sizeof(float) + 31) / 32 * 32;
	int64_t cols = (int64_t)(kPanelL2Fraction * (double)dev.l2_bytes) / row_bytes;
	if (cols < kPanelMinCols)
		cols = kPanelMinCols;
	if (cols >= ncols)
		return ncols;
	int64_t panels = (ncols + cols - 1) / cols;
	return (ncols + panels - 1) / panels;
}

/* AUTO's rule for PANEL (kPanelMinL2Ratio says where it was measured). PANEL pays where VWARP's
 * B-row reads miss L2 and would hit it in panels: the B block (ncols * k * 4 bytes) is about L2's
 * size or more, each B row serves enough nonzeros (nnz / ncols) to be worth keeping,
 * and the rows are at least as long on average as there are panels: a shorter row rereads its
 * A row (as many bytes as a B row) for about every nonzero, which saves nothing. */
bool panel_pays(const DeviceLimits &dev, int64_t nrows, int64_t ncols, int64_t nnz, int64_t k)
{
	double b_bytes = (double)ncols * (double)k * sizeof(float);
	if (!(b_bytes > kPanelMinL2Ratio * (double)dev.l2_bytes) || !((double)nnz > kPanelMinReuse * (double)ncols))
		return false;
	int64_t cols = panel_cols(dev, ncols, k);
	int64_t panels = (ncols + cols - 1) / cols;
	return (double)nnz >= (double)panels * (double)nrows;
}

/* Sizes the launch of `variant` on this tile; variant AUTO is resolved. Returns
 * cudaErrorInvalidValue when the variant cannot run the tile. */
cudaError_t plan(starfa_cuda_sddmm_variant variant, int64_t nrows, int64_t ncols, int64_t nnz, int64_t k,
		 const float *A, int64_t lda, const float *B, int64_t ldb, Plan *out)
{
	if (ncols <= 0) /* nonzeros without columns; the L2 models divide by ncols */
		return cudaErrorInvalidValue;
	DeviceLimits dev;
	cudaError_t err = device_limits(&dev);
	if (err != cudaSuccess)
		return err;
	Shape shape = vwarp_shape(k / 4);
	bool vec = vectorizable(A, lda, B, ldb, k) && shape.v > 0;
	size_t smem_bytes = vec ? (size_t)ncols * smem_row_stride(k / 4, shape.v) * sizeof(float4) : 0;
	bool smem_fits = vec && smem_bytes <= (size_t)dev.smem_per_block_optin;
	int smem_blocks_per_sm = smem_fits ? (int)(dev.smem_per_sm / (smem_bytes + 1024)) : 0; /* 1 KB reserved */
	if (smem_blocks_per_sm > 2048 / kThreads)
		smem_blocks_per_sm = 2048 / kThreads;
	if (smem_fits && smem_blocks_per_sm < 1)
		smem_fits = false;

	int64_t slice = l2_slice(dev, ncols);
	/* Panel bounds are 32-bit, as the column indices are. */
	bool panelable = vec && ncols <= (int64_t)UINT32_MAX;
	if (variant == STARFA_CUDA_SDDMM_AUTO) {
		int64_t staging_blocks = (int64_t)dev.sms * smem_blocks_per_sm;
		if (!vec)
			variant = STARFA_CUDA_SDDMM_WARP_SPANS;
		else if (smem_fits && (double)nnz >= kSmemMinReuse * (double)staging_blocks * (double)ncols)
			variant = STARFA_CUDA_SDDMM_SMEM;
		else if (panelable && panel_pays(dev, nrows, ncols, nnz, k))
			variant = STARFA_CUDA_SDDMM_PANEL;
		else
			variant = STARFA_CUDA_SDDMM_VWARP;
	} else if (variant == STARFA_CUDA_SDDMM_VWARP_SLICED) {
		/* Asked for explicitly: slice even where one pass would do (at least two slices). */
		int64_t half = k / 2 / 4 * 4;
		if (slice > half)
			slice = half;
	}
	bool sliceable = vec && k >= 8;
	if ((variant == STARFA_CUDA_SDDMM_VWARP && !vec) || (variant == STARFA_CUDA_SDDMM_SMEM && !smem_fits) ||
	    (variant == STARFA_CUDA_SDDMM_VWARP_SLICED && !sliceable) ||
	    (variant == STARFA_CUDA_SDDMM_PANEL && !panelable) || variant <= STARFA_CUDA_SDDMM_AUTO ||
	    variant >= STARFA_CUDA_SDDMM_VARIANTS)
		return cudaErrorInvalidValue;

	Plan p = {variant, shape, 0, 0, kChunk, slice, 0, 0};
	int64_t blocks;
	if (variant == STARFA_CUDA_SDDMM_WARP_SPANS) {
		blocks = ((nnz + kChunk - 1) / kChunk + kThreads / kWarp - 1) / (kThreads / kWarp);
		if (blocks < 1)
			blocks = 1;
		if (blocks > 65536)
			blocks = 65536; /* grid-stride beyond this */
	} else if (variant == STARFA_CUDA_SDDMM_PANEL) {
		/* Each panel's launch scans every nonzero but computes only those in the panel (about
		 * 1/panels of each span on uniform columns): spans long enough that warps have work,
		 * short enough for kPanelWaves waves of resident warps, which evens out the spans. */
		p.panel_cols = panel_cols(dev, ncols, k);
		int64_t slots = (int64_t)dev.sms * (dev.threads_per_sm / kWarp) * kPanelWaves * kWarp;
		int64_t batches = (nnz + slots - 1) / slots;
		batches = batches < 1 ? 1 : batches > kPanelMaxBatches ? kPanelMaxBatches : batches;
		p.span = batches * kWarp;
		int64_t warps = (nnz + p.span - 1) / p.span;
		blocks = (warps + kThreads / kWarp - 1) / (kThreads / kWarp);
		int64_t resident = (int64_t)dev.sms * (dev.threads_per_sm / kThreads);
		if (blocks > 64 * resident)
			blocks = 64 * resident; /* grid-stride beyond this */
	} else {
		/* Shorter chunks on small tiles, so that every SM gets a full complement of
		 * virtual warps; long chunks amortize the row search on large ones. */
		int64_t groups_to_fill = (int64_t)dev.sms * (2048 / shape.v);
		int64_t chunk = (nnz + groups_to_fill - 1) / groups_to_fill;
		p.chunk = (int)(chunk < 1 ? 1 : chunk > kChunk ? kChunk : chunk);
		int64_t span = (int64_t)(kWarp / shape.v) * p.chunk;
		int64_t warps = (nnz + span - 1) / span;
		blocks = (warps + kThreads / kWarp - 1) / (kThreads / kWarp);
		/* Enough resident blocks to fill the device; grid-stride beyond. With staging, every
		 * block copies B once: no more blocks than can be resident at the same time. */
		int64_t resident = (int64_t)dev.sms * (variant == STARFA_CUDA_SDDMM_SMEM ? smem_blocks_per_sm : 8);
		if (variant == STARFA_CUDA_SDDMM_SMEM) {
			p.smem_bytes = smem_bytes;
			if (blocks > resident)
				blocks = resident;
		} else if (blocks > 64 * resident) {
			blocks = 64 * resident;
		}
	}
	p.blocks = (unsigned)(blocks > 0 ? blocks : 1);
	*out = p;
	return cudaSuccess;
}

/* The panels of a planned PANEL launch, one after the other in stream order. */
cudaError_t run_panels(const Plan &p, int64_t nrows, int64_t ncols, int64_t nnz, const uint32_t *rowptr,
		       const uint32_t *colind, const float *sval, const float *A, int64_t lda, const float *B,
		       int64_t ldb, int64_t k, Epilogue ep, float *out, cudaStream_t stream)
{
	for (int64_t c0 = 0; c0 < ncols; c0 += p.panel_cols) {
		int64_t width = ncols - c0 < p.panel_cols ? ncols - c0 : p.panel_cols;
		cudaError_t err = launch_panel(p.shape, nrows, (uint32_t)nnz, p.span, (uint32_t)c0, (uint32_t)width,
					       rowptr, colind, sval, A, lda, B, ldb, k, ep, out, stream, p.blocks);
		if (err != cudaSuccess)
			return err;
	}
	return cudaSuccess;
}


/* ------------------------------------------------------------------ dense rows (Zipf-skewed tiles) */

/* On a skewed tile a few rows hold a large share of the nonzeros and cover much of the columns (the
 * Netflix shape: the longest rows fill 90% of theirs). There the virtual-warp kernel gathers a k-long B
 * row from L2 for every nonzero (about 8 TB/s on an H100, bench/RESULTS.md), while a dense product of
 * those rows with all of B (cuBLAS SGEMM, float32 arithmetic) costs 2k flops and 8 bytes (written, read
 * back) per element, nonzero or not, and a pass that picks the sampled elements. A row goes dense where
 * its density (nonzeros / columns) passes
 *   kDenseBase + kDensePerK / k, for k >= kDenseMinK,
 * fitted to thresholds swept on the Netflix shape on an H100 (bench/RESULTS.md, 2026-11-27): the best
 * were about 0.2 at k = 128 and 0.1-0.15 at k = 512, flat within 2% around them. At k = 32 the dense
 * rows lost at every threshold (the virtual-warp kernel is near its floor there and the skipping costs
 * it a vote a step), hence kDenseMinK. Fewer than kDenseMinRows such rows are not worth the launches. */
constexpr double kDenseBase = 0.093, kDensePerK = 13.7;
constexpr int64_t kDenseMinK = 64;
constexpr int64_t kDenseMinRows = 32;
/* Rows kept as candidates when a tile's plan is made: any later threshold (any k) is above this. */
constexpr double kDenseCandidateDensity = 0.02;
/* The dense product runs in chunks of rows whose output fits in this share of L2, so that the picking
 * pass reads it from L2; no chunk under kDenseMinChunk rows (cuBLAS's efficiency). */
constexpr double kDenseChunkL2Fraction = 0.5;
constexpr int64_t kDenseMinChunk = 64;
/* The most bytes a chunk's product may take (tiles of tens of millions of columns); a tile whose single
 * row's product would pass it keeps its rows on the virtual-warp kernel. */
constexpr int64_t kDenseMaxProductBytes = (int64_t)256 << 20;
/* Tiles whose dense-row order and tuned choice a host thread keeps (a task graph's tiles on one GPU are
 * typically a few dozen); past that the least recently used goes. */
constexpr int kMaxKeptTiles = 64;

/* What names a tile on a device in those caches: its pattern id (never reused, and a pattern never
 * changes), its sizes and the device. Not the tile's device addresses (as the SpMM codelet's cuSPARSE
 * plans must be): nothing kept points into the tile, and StarPU may give a tile a new address on the
 * device between tasks. */
struct tile_key {
	uint64_t pattern;
	int64_t nrows, ncols, nnz;
	int device;
	bool operator==(const tile_key &o) const
	{
		return pattern == o.pattern && nrows == o.nrows && ncols == o.ncols && nnz == o.nnz && device == o.device;
	}
};

/* The model's threshold at rank k; above 1 (no row) below kDenseMinK. */
double dense_rows_min_density(int64_t k)
{
	return k < kDenseMinK ? 2.0 : kDenseBase + kDensePerK / (double)k;
}

/* out[h][0:k] = A[rows[h]][0:k]: the dense rows' A rows, packed for the product. */
__global__ void gather_dense_rows(const int32_t *__restrict__ rows, int64_t n, const float *__restrict__ A,
				  int64_t lda, int64_t k, float *__restrict__ out)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n * k; i += (int64_t)gridDim.x * blockDim.x) {
		const int64_t h = i / k, c = i - h * k;
		out[i] = __ldg(A + (int64_t)__ldg(rows + h) * lda + c);
	}
}

/* A block per dense row h of the chunk: every nonzero p of the row takes its element D[h][colind[p]] of
 * the chunk's dense product (ncols wide), through the epilogue. Any column order in the row. */
__global__ void __launch_bounds__(kThreads)
	pick_dense_rows(const int32_t *__restrict__ rows, const float *__restrict__ D, int64_t ncols,
			const uint32_t *__restrict__ rowptr, const uint32_t *__restrict__ colind,
			const float *__restrict__ sval, Epilogue ep, float *__restrict__ out)
{
	const int64_t h = blockIdx.x;
	const int32_t r = __ldg(rows + h);
	const float *d = D + h * ncols;
	const uint32_t end = __ldg(rowptr + r + 1);
	for (uint32_t p = __ldg(rowptr + r) + threadIdx.x; p < end; p += kThreads)
		store_result<true>(d[__ldcs(colind + p)], p, ep, sval, out);
}

/* The plan in plans[0 .. count) that `matches`, or one made by `make` into a fresh Plan (whose fields it sets
 * but `used`). With keep, a made plan joins the cache, the least recently used one freed by `release` (and
 * dropped) when the cache is full; without, it is the caller's own (*own), which the caller frees after the
 * call. A found plan's stream becomes `stream`, where it will be freed. */
template <typename PlanT, int N, typename Match, typename Make, typename Release>
starfa_gpu_status find_or_make(PlanT (&plans)[N], int &count, uint64_t &clock, bool keep, cudaStream_t stream,
			       Match matches, Make make, Release release, PlanT *own, PlanT **out)
{
	if (keep)
		for (int i = 0; i < count; i++)
			if (matches(plans[i])) {
				plans[i].used = ++clock;
				plans[i].stream = stream;
				*out = &plans[i];
				return starfa_gpu_ok();
			}
	PlanT want;
	starfa_gpu_status st = make(want);
	if (st.call)
		return st;
	if (!keep) {
		*own = std::move(want);
		*out = own;
		return st;
	}
	if (count == N) {
		const int oldest = least_recent(count, [&](int i) { return plans[i].used; });
		release(plans[oldest], st);
		plans[oldest] = std::move(plans[--count]);
	}
	want.used = ++clock;
	plans[count] = std::move(want);
	*out = &plans[count++];
	return st;
}

/* The tile's row offsets read back to the host, where the plans that order rows by length are made; the
 * failing call is named `copy` or `sync`. */
starfa_gpu_status read_row_offsets(const uint32_t *rowptr, int64_t nrows, cudaStream_t stream, const char *copy,
				   const char *sync, std::vector<uint32_t> &out)
{
	starfa_gpu_status st = starfa_gpu_ok();
	out.resize((size_t)nrows + 1);
	starfa_gpu_keep_first(st, copy, cudaMemcpyAsync(out.data(), rowptr, out.size() * sizeof(uint32_t),
							  cudaMemcpyDeviceToHost, stream));
	starfa_gpu_keep_first(st, sync, cudaStreamSynchronize(stream));
	return st;
}

/* Sorts rows longest first by the offsets, rows of one length in their order. */
template <typename Row> void sort_longest_first(std::vector<Row> &rows, const std::vector<uint32_t> &offsets)
{
	std::stable_sort(rows.begin(), rows.end(), [&](Row a, Row b) {
		return offsets[a + 1] - offsets[a] > offsets[b + 1] - offsets[b];
	});
}

/* A tile's dense-row candidates, longest first, kept per host thread by its tile_key; rowptr is where
 * the plan was read from. rank (device, one per row) gives a row's place in that order, -1 for the
 * others, so that a threshold is a prefix and the virtual-warp kernel skips ranks below its length. */
struct dense_plan {
	tile_key tile;
	const void *rowptr;
	int32_t *rows, *rank;          /* device */
	std::vector<uint32_t> lengths; /* host: the candidates' lengths, longest first */
	cudaStream_t stream;           /* the last stream that used the plan: it is freed there */
	uint64_t used;
};

struct dense_plans {
	dense_plan plan[kMaxKeptTiles];
	int count = 0;
	uint64_t clock = 0;
	void *scratch = nullptr; /* the packed A rows and a chunk's product, grown as needed, on scratch_device */
	size_t scratch_bytes = 0;
	cudaStream_t scratch_stream = nullptr;
	int scratch_device = -1;
};

thread_local dense_plans dense_kept;



void free_dense_plan(dense_plan &p, starfa_gpu_status &st)
{
	if (p.rows)
		starfa_gpu_keep_first(st, "cudaFreeAsync (SDDMM dense rows)", cudaFreeAsync(p.rows, p.stream));
	if (p.rank)
		starfa_gpu_keep_first(st, "cudaFreeAsync (SDDMM dense rows)", cudaFreeAsync(p.rank, p.stream));
	p.rows = p.rank = nullptr;
	p.lengths.clear();
}

/* Makes the plan of a tile: its row offsets read back (once per tile), rows of at least
 * kDenseCandidateDensity * ncols nonzeros sorted longest first. */
starfa_gpu_status make_dense_plan(dense_plan &p, cudaStream_t stream)
{
	std::vector<uint32_t> rowptr;
	starfa_gpu_status st = read_row_offsets(static_cast<const uint32_t *>(p.rowptr), p.tile.nrows, stream,
						"cudaMemcpyAsync (SDDMM dense rows: row offsets)",
						"cudaStreamSynchronize (SDDMM dense rows)", rowptr);
	if (st.call)
		return st;
	const double least = std::max(1.0, kDenseCandidateDensity * (double)p.tile.ncols);
	std::vector<int32_t> rows;
	for (int64_t r = 0; r < p.tile.nrows; r++)
		if ((double)(rowptr[r + 1] - rowptr[r]) >= least)
			rows.push_back((int32_t)r);
	sort_longest_first(rows, rowptr);
	std::vector<int32_t> rank((size_t)p.tile.nrows, -1);
	p.lengths.resize(rows.size());
	for (size_t h = 0; h < rows.size(); h++) {
		rank[rows[h]] = (int32_t)h;
		p.lengths[h] = rowptr[rows[h] + 1] - rowptr[rows[h]];
	}
	p.stream = stream;
	starfa_gpu_keep_first(st, "cudaMallocAsync (SDDMM dense rows)",
			   cudaMallocAsync((void **)&p.rows, std::max<size_t>(rows.size(), 1) * sizeof(int32_t), stream));
	starfa_gpu_keep_first(st, "cudaMallocAsync (SDDMM dense rows)",
			   cudaMallocAsync((void **)&p.rank, rank.size() * sizeof(int32_t), stream));
	if (!st.call && !rows.empty())
		starfa_gpu_keep_first(st, "cudaMemcpyAsync (SDDMM dense rows)",
				   cudaMemcpyAsync(p.rows, rows.data(), rows.size() * sizeof(int32_t),
						   cudaMemcpyHostToDevice, stream));
	if (!st.call)
		starfa_gpu_keep_first(st, "cudaMemcpyAsync (SDDMM dense rows)",
				   cudaMemcpyAsync(p.rank, rank.data(), rank.size() * sizeof(int32_t),
						   cudaMemcpyHostToDevice, stream));
	/* The host vectors go out of scope at return: the copies must be done. */
	starfa_gpu_keep_first(st, "cudaStreamSynchronize (SDDMM dense rows)", cudaStreamSynchronize(stream));
	if (st.call) {
		starfa_gpu_status ignored = starfa_gpu_ok();
		free_dense_plan(p, ignored);
	}
	return st;
}

/* The kept plan of this tile, made (and the least recently used one freed) when there is none; with
 * pattern 0, a plan of the caller's own that it frees after the call. */
starfa_gpu_status find_dense_plan(const tile_key &tile, const uint32_t *rowptr, cudaStream_t stream, dense_plan *own,
				  dense_plan **out)
{
	dense_plans &kept = dense_kept;
	return find_or_make(
		kept.plan, kept.count, kept.clock, tile.pattern != 0, stream, [&](const dense_plan &p) { return p.tile == tile; },
		[&](dense_plan &want) {
			want.tile = tile;
			want.rowptr = rowptr;
			want.rows = want.rank = nullptr;
			want.stream = stream;
			want.used = 0;
			return make_dense_plan(want, stream);
		},
		free_dense_plan, own, out);
}

/* Frees the kept plan of a tile, if any. */
void forget_dense_plan(const tile_key &tile, starfa_gpu_status &st)
{
	dense_plans &kept = dense_kept;
	for (int i = 0; i < kept.count; i++) {
		dense_plan &p = kept.plan[i];
		if (p.tile == tile) {
			free_dense_plan(p, st);
			p = std::move(kept.plan[--kept.count]);
			return;
		}
	}
}

/* The thread's scratch of at least `bytes` on `device` (the current one), on `stream`; a scratch on
 * another device (a thread that moved between devices) is freed first. */
starfa_gpu_status dense_scratch(size_t bytes, int device, cudaStream_t stream, void **out)
{
	starfa_gpu_status st = starfa_gpu_ok();
	dense_plans &kept = dense_kept;
	if (kept.scratch_bytes < bytes || kept.scratch_device != device) {
		if (kept.scratch)
			starfa_gpu_keep_first(st, "cudaFreeAsync (SDDMM dense rows)",
					   cudaFreeAsync(kept.scratch, kept.scratch_stream));
		kept.scratch = nullptr;
		kept.scratch_bytes = 0;
		if (!st.call)
			starfa_gpu_keep_first(st, "cudaMallocAsync (SDDMM dense rows)",
					   cudaMallocAsync(&kept.scratch, bytes, stream));
		if (st.call)
			return st;
		kept.scratch_bytes = bytes;
		kept.scratch_device = device;
	}
	kept.scratch_stream = stream;
	*out = kept.scratch;
	return st;
}

/* How many of a plan's rows go dense at this threshold (<= 0: the model's at rank k): 0 below
 * kDenseMinRows. */
int64_t dense_row_count(const dense_plan &plan, double min_density, int64_t k)
{
	if (min_density <= 0)
		min_density = dense_rows_min_density(k);
	const double least = min_density * (double)plan.tile.ncols;
	int64_t h = 0;
	while (h < (int64_t)plan.lengths.size() && (double)plan.lengths[h] >= least)
		h++;
	return h < kDenseMinRows ? 0 : h;
}

/* The dense rows of the tile (min_density and chunk_rows as starfa_cuda_sddmm_dense_rows_run takes them)
 * as chunked SGEMMs and picking passes, then the virtual-warp kernel on the other rows. Runs the plain
 * plan where fewer than kDenseMinRows rows qualify. */
starfa_gpu_status run_dense_rows(cublasHandle_t cublas, const tile_key &tile, double min_density, int64_t chunk_rows,
				 const Plan &vw, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
				 const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k, Epilogue ep,
				 float *out, cudaStream_t stream, int64_t *dense_rows)
{
	const int64_t nrows = tile.nrows, ncols = tile.ncols, nnz = tile.nnz;
	starfa_gpu_status st = starfa_gpu_ok();
	dense_plan own, *plan = nullptr;
	own.rows = own.rank = nullptr;
	st = find_dense_plan(tile, rowptr, stream, &own, &plan);
	if (st.call)
		return st;
	const int64_t h =
		ncols * (int64_t)sizeof(float) <= kDenseMaxProductBytes ? dense_row_count(*plan, min_density, k) : 0;
	if (dense_rows)
		*dense_rows = h;
	if (h > 0) {
		DeviceLimits dev = {};
		starfa_gpu_keep_first(st, "cudaDeviceGetAttribute", device_limits(&dev));
		int64_t chunk = chunk_rows > 0 ? chunk_rows
						: (int64_t)(kDenseChunkL2Fraction * (double)dev.l2_bytes) /
							  (ncols * (int64_t)sizeof(float));
		if (chunk_rows <= 0 && chunk < kDenseMinChunk)
			chunk = kDenseMinChunk;
		chunk = std::min(chunk, kDenseMaxProductBytes / (ncols * (int64_t)sizeof(float)));
		if (chunk > h)
			chunk = h;
		const size_t packed = (size_t)h * (size_t)k, product = (size_t)chunk * (size_t)ncols;
		void *scratch = nullptr;
		if (!st.call)
			st = dense_scratch((packed + product) * sizeof(float), tile.device, stream, &scratch);
		if (!st.call) {
			float *Ag = static_cast<float *>(scratch), *D = Ag + packed;
			const int64_t gather_blocks = std::min<int64_t>((int64_t)(packed + kThreads - 1) / kThreads, 8192);
			gather_dense_rows<<<(unsigned)gather_blocks, kThreads, 0, stream>>>(plan->rows, h, A, lda, k, Ag);
			starfa_gpu_keep_first(st, "gather_dense_rows launch", cudaGetLastError());
			starfa_gpu_keep_first(st, "cublasSetStream", cudaSuccess, cublasSetStream(cublas, stream));
			const float one = 1.0f, zero = 0.0f;
			for (int64_t c0 = 0; c0 < h && !st.call; c0 += chunk) {
				const int64_t m = std::min(chunk, h - c0);
				/* Column-major: D^T (ncols x m) = B (k x ncols, as stored row-major)^T * Ag^T (k x m). */
				starfa_gpu_keep_first(st, "cublasSgemm (SDDMM dense rows)", cudaSuccess,
						   cublasSgemm(cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)ncols, (int)m, (int)k,
							       &one, B, (int)ldb, Ag + c0 * k, (int)k, &zero, D,
							       (int)ncols));
				if (st.call)
					break;
				pick_dense_rows<<<(unsigned)m, kThreads, 0, stream>>>(plan->rows + c0, D, ncols, rowptr,
										  colind, sval, ep, out);
				starfa_gpu_keep_first(st, "pick_dense_rows launch", cudaGetLastError());
			}
		}
	}
	if (!st.call)
		starfa_gpu_keep_first(st, "sddmm_vwarp launch",
				   launch_vwarp<false>(vw.shape, nrows, ncols, (uint32_t)nnz, rowptr, colind, sval, A, lda,
						       B, ldb, k, ep, out, stream, vw.blocks, 0, vw.chunk,
						       RowSkip{plan->rank, (int32_t)h}));
	if (plan == &own)
		free_dense_plan(own, st);
	return st;
}


/* ------------------------------------------------------------------ A rows staged, nonzeros by column (SM-SM) */

/* The virtual-warp kernel holds an A row in registers and gathers a B row from L2 for every nonzero: on a
 * tile with few rows (a corpus of a few hundred documents, MovieLens' 671 users) or rows that share
 * columns, the same B rows are gathered again and again. Here the roles turn (the SM-SM scheme of the
 * SDDMM paper, with A staged): a block copies a block of consecutive A rows into shared memory and walks
 * that row block's nonzeros in column order, so that a virtual warp holds one B row in registers for all
 * the nonzeros of its column in the row block and reads their A rows from shared memory. The L2 gather
 * shrinks by the length of the column runs (sotu: 233 rows, all in one block at k = 32, every B row
 * gathered once instead of 16 times). The blocks take the rows longest first, so that a block's rows
 * are of about the same length, and empty rows cost nothing. The order costs 8 bytes a nonzero and 4 a
 * row, made once a tile on the device (a radix sort by block and column) and kept: the nonzero's position
 * in the tile, and its column and row within the block in one word. Each nonzero's dot product is formed
 * as VWARP forms it (the same lanes, products, order and shuffles), so the outputs are the same bits. */
/* A block's rows: about kByColumnBlockBytes of staged A, at least kByColumnMinRows rows, at most this share
 * of an SM's shared memory. Swept on an H100 (bench/RESULTS.md, 2026-11-27 notes) with 24-811 rows: the
 * Netflix shape was fastest at 48 rows at k = 128 and 512 (4.52 and 15.9 ms; 6.04 and 16.5 at 192 rows),
 * NotreDame at 192 rows at k = 32 (27 KB). Taller blocks share more B rows, yet were slower there: a
 * measured rule, not a model. */
constexpr double kByColumnSmemShare = 0.5;
constexpr int64_t kByColumnBlockBytes = 24 << 10, kByColumnMinRows = 48;
/* Nonzeros a block walks: a row block's nonzeros are cut into items of about equal size, small enough for
 * a few waves of blocks, large enough to pay for staging the block's A rows. */
constexpr int64_t kByColumnMinItem = 4096, kByColumnMaxItem = 65536;
/* Orders a host thread keeps (8 bytes a nonzero and 4 a row each): tiles whose timed choice is this
 * kernel, as many as the timed choices, so that no kept choice rebuilds its order at every call. */
constexpr int kMaxKeptColumnPlans = 64;

/* Bits that hold the values 0 .. n - 1 (at least 1). */
int bits_below(uint64_t n)
{
	int b = 1;
	while (b < 64 && (n - 1) >> b)
		b++;
	return b;
}

/* Threads a block: the staged rows take a large share of the SM's shared memory, so a block holds many
 * warps to keep the SM busy (two or three blocks an SM). */
constexpr int kByColumnThreads = 512;

template <int V, int J>
__global__ void __launch_bounds__(kByColumnThreads, 2)
	sddmm_by_column(const uint4 *__restrict__ items, int64_t nrows, int64_t block_rows, int col_bits,
			const uint32_t *__restrict__ block_order, const uint32_t *__restrict__ order,
			const uint32_t *__restrict__ packed,
			const float *__restrict__ sval, const float4 *__restrict__ A, int64_t lda4,
			const float4 *__restrict__ B, int64_t ldb4, int k4, int smem_ld, Epilogue ep,
			float *__restrict__ out)
{
	constexpr int gpw = kWarp / V;
	constexpr int warps_per_block = kByColumnThreads / kWarp;
	extern __shared__ float4 staged_a[];
	const uint4 item = items[blockIdx.x]; /* row block, first nonzero, end */
	const int64_t r0 = (int64_t)item.x * block_rows;
	const int64_t rows = min(block_rows, nrows - r0);
	for (int64_t i = threadIdx.x; i < rows * k4; i += kByColumnThreads) {
		const int64_t r = i / k4, c = i - r * k4;
		staged_a[r * smem_ld + c] = __ldg(A + (int64_t)__ldg(block_order + r0 + r) * lda4 + c);
	}
	__syncthreads();
	const int lane = threadIdx.x % V;
	const int group_in_warp = threadIdx.x % kWarp / V;
	const uint32_t col_mask = (1u << col_bits) - 1u; /* col_bits < 32: a row bit at least */
	/* Warp w takes a contiguous span of the item, group g its nonzeros g, g + gpw, ...; as in VWARP every
	 * group makes the same number of steps (past the span's end on a copy of its last nonzero, not
	 * stored), so the shuffles are whole-warp ones. No barrier follows: a warp without nonzeros leaves. */
	const uint32_t n = item.z - item.y;
	const uint32_t chunk = (n + warps_per_block * gpw - 1) / (warps_per_block * gpw);
	const uint64_t begin = (uint64_t)item.y + (uint64_t)(threadIdx.x / kWarp) * chunk * gpw;
	if (begin >= item.z)
		return;
	const uint32_t end = (uint32_t)min((uint64_t)item.z, begin + (uint64_t)chunk * gpw), last = end - 1;
	uint32_t col = 0xffffffffu;
	float4 b[J];
	/* The next step's word and position are loaded a step ahead, so that a step waits on its B row (when
	 * the column changes) and S's value, not on its indices. */
	uint32_t q = min((uint32_t)begin + (uint32_t)group_in_warp, last);
	uint32_t word = __ldg(packed + q), at = __ldg(order + q);
	for (uint32_t base = (uint32_t)begin; base < end; base += gpw) {
		const uint32_t p = base + (uint32_t)group_in_warp;
		const uint32_t q_next = min(p + (uint32_t)gpw, last);
		const uint32_t word_next = __ldg(packed + q_next), at_next = __ldg(order + q_next);
		const float s = ep.mode & kScale ? __ldg(sval + at) : 1.0f;
		if ((word & col_mask) != col) { /* a new column: its B row into registers */
			col = word & col_mask;
			load_a_row<V, J, false>(b, B, col, ldb4, lane, k4);
		}
		/* b * a is a * b: the same products, in VWARP's order */
		float acc = group_dot<V, J, true>(b, staged_a, (int64_t)(word >> col_bits) * smem_ld, lane, k4,
						  0xffffffffu);
		if (ep.mode & kScale)
			acc *= s;
		acc *= ep.alpha;
		if (ep.mode & kAccumulate)
			acc += ep.beta * out[at];
		if (lane == 0 && p < end)
			out[at] = acc;
		word = word_next;
		at = at_next;
	}
}

/* The sort's keys and values: nonzero p of row r has key (place[r] / block_rows) * ncols + colind[p], value
 * p (place[r]: where r stands in the blocks' row order). */
__global__ void by_column_keys(int64_t nrows, int64_t nnz, int64_t block_rows, int64_t ncols,
			       const uint32_t *__restrict__ rowptr, const uint32_t *__restrict__ colind,
			       const uint32_t *__restrict__ place, uint64_t *__restrict__ keys, uint32_t *__restrict__ pos)
{
	for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < nnz; p += (int64_t)gridDim.x * blockDim.x) {
		const int64_t r = row_of(rowptr, nrows, (uint32_t)p);
		keys[p] = (uint64_t)(__ldg(place + r) / block_rows) * (uint64_t)ncols + __ldg(colind + p);
		pos[p] = (uint32_t)p;
	}
}

/* packed[e] = column | (row's place within its block) << col_bits, for the e-th nonzero in sorted order. */
__global__ void by_column_pack(int64_t nrows, int64_t nnz, int64_t block_rows, int64_t ncols, int col_bits,
			       const uint32_t *__restrict__ rowptr, const uint32_t *__restrict__ place,
			       const uint64_t *__restrict__ keys, const uint32_t *__restrict__ order,
			       uint32_t *__restrict__ packed)
{
	for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < nnz; e += (int64_t)gridDim.x * blockDim.x) {
		const int64_t r = row_of(rowptr, nrows, __ldg(order + e));
		const uint32_t col = (uint32_t)(keys[e] % (uint64_t)ncols);
		packed[e] = col | (uint32_t)(__ldg(place + r) % block_rows) << col_bits;
	}
}

/* A tile's order for a row-block height, kept per host thread by (tile_key, block_rows). */
struct column_plan {
	tile_key tile = {};
	int64_t block_rows = 0;
	int col_bits = 0;
	uint32_t *rows = nullptr;                     /* device, nrows: the rows in block order (longest first) */
	uint32_t *order = nullptr, *packed = nullptr; /* device, nnz each */
	uint4 *items = nullptr;                       /* device: row block, first nonzero, end, 0 */
	int64_t nitems = 0;
	cudaStream_t stream = nullptr; /* the last stream that used the plan: it is freed there */
	uint64_t used = 0;
};

struct column_plans {
	column_plan plan[kMaxKeptColumnPlans];
	int count = 0;
	uint64_t clock = 0;
};

thread_local column_plans column_kept;

void free_column_plan(column_plan &p, starfa_gpu_status &st)
{
	void *bufs[4] = {p.rows, p.order, p.packed, p.items};
	for (void *b : bufs)
		if (b)
			starfa_gpu_keep_first(st, "cudaFreeAsync (SDDMM by column)", cudaFreeAsync(b, p.stream));
	p.rows = p.order = p.packed = nullptr;
	p.items = nullptr;
}

/* The geometry of the kernel on this tile: rows a block stages, their shared-memory bytes and the bits
 * of the packed word; false where it cannot run (no 16-byte rows, too wide a row for shared memory, or
 * columns and block rows that do not pack into 32 bits). */
struct column_geometry {
	int64_t block_rows;
	size_t smem_bytes;
	int col_bits, blocks_per_sm;
};

bool by_column_geometry(const DeviceLimits &dev, Shape shape, int64_t nrows, int64_t ncols, int64_t k,
			int64_t block_rows, column_geometry *g)
{
	if (shape.v <= 0 || nrows <= 0 || ncols <= 0)
		return false;
	const int64_t row_bytes = (int64_t)smem_row_stride(k / 4, shape.v) * (int64_t)sizeof(float4);
	int64_t budget = (int64_t)(kByColumnSmemShare * (double)dev.smem_per_sm) - 1024;
	budget = std::min<int64_t>(budget, dev.smem_per_block_optin);
	int64_t most = budget / row_bytes;
	if (block_rows <= 0) { /* the model's height, evened out over the blocks */
		if (most < 1)
			return false;
		most = std::min(most, std::max(kByColumnMinRows, kByColumnBlockBytes / row_bytes));
		const int64_t blocks = (nrows + most - 1) / most;
		block_rows = (nrows + blocks - 1) / blocks;
	} else {
		block_rows = std::min(block_rows, nrows);
		if (block_rows * row_bytes > (int64_t)dev.smem_per_block_optin)
			return false;
	}
	g->block_rows = block_rows;
	g->smem_bytes = (size_t)(block_rows * row_bytes);
	g->col_bits = bits_below((uint64_t)ncols);
	if (g->col_bits + bits_below((uint64_t)block_rows) > 32)
		return false;
	g->blocks_per_sm = (int)std::min<int64_t>(dev.threads_per_sm / kByColumnThreads,
						  dev.smem_per_sm / ((int64_t)g->smem_bytes + 1024));
	return g->blocks_per_sm >= 1;
}

/* Makes the plan (its tile, height, column bits and stream already set): the rows' offsets read back (the
 * items are cut on the host), the order sorted on the device. */
starfa_gpu_status make_column_plan(column_plan &p, const column_geometry &g, int sms, const uint32_t *rowptr,
				   const uint32_t *colind, cudaStream_t stream)
{
	const int64_t nrows = p.tile.nrows, ncols = p.tile.ncols, nnz = p.tile.nnz;
	std::vector<uint32_t> offsets;
	starfa_gpu_status st = read_row_offsets(rowptr, nrows, stream, "cudaMemcpyAsync (SDDMM by column: row offsets)",
						"cudaStreamSynchronize (SDDMM by column)", offsets);
	if (st.call)
		return st;
	/* Rows of about the same length share columns more often (the Netflix shape: 60% more nonzeros a B
	 * row in blocks of 128 rows, bench/RESULTS.md 2026-11-25), so the blocks take the rows longest first. */
	std::vector<uint32_t> rows((size_t)nrows), place((size_t)nrows);
	for (int64_t r = 0; r < nrows; r++)
		rows[(size_t)r] = (uint32_t)r;
	sort_longest_first(rows, offsets);
	for (int64_t i = 0; i < nrows; i++)
		place[rows[(size_t)i]] = (uint32_t)i;
	const int64_t blocks = (nrows + g.block_rows - 1) / g.block_rows;
	int64_t item = (nnz + 2 * (int64_t)sms * g.blocks_per_sm - 1) / (2 * (int64_t)sms * g.blocks_per_sm);
	item = std::min(kByColumnMaxItem, std::max(kByColumnMinItem, item));
	std::vector<uint4> items;
	uint32_t end = 0; /* the sorted order holds the blocks one after the other */
	for (int64_t rb = 0; rb < blocks; rb++) {
		const uint32_t first = end;
		for (int64_t i = rb * g.block_rows; i < std::min(nrows, (rb + 1) * g.block_rows); i++)
			end += offsets[rows[(size_t)i] + 1] - offsets[rows[(size_t)i]];
		const int64_t n = (int64_t)end - first, pieces = (n + item - 1) / item;
		for (int64_t i = 0; i < pieces; i++)
			items.push_back(make_uint4((uint32_t)rb, (uint32_t)(first + n * i / pieces),
						   (uint32_t)(first + n * (i + 1) / pieces), 0u));
	}
	p.nitems = (int64_t)items.size();
	uint64_t *keys = nullptr, *keys_sorted = nullptr;
	uint32_t *pos = nullptr, *d_place = nullptr;
	void *temp = nullptr;
	size_t temp_bytes = 0;
	const int end_bit = bits_below((uint64_t)blocks * (uint64_t)ncols);
	starfa_gpu_keep_first(st, "cub::DeviceRadixSort::SortPairs (SDDMM by column: size)",
			   cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, keys_sorted, pos, p.order, nnz, 0,
							   end_bit, stream));
	const char *alloc = "cudaMallocAsync (SDDMM by column)";
	if (!st.call)
		starfa_gpu_keep_first(st, alloc, cudaMallocAsync((void **)&p.rows, (size_t)nrows * 4, stream));
	if (!st.call)
		starfa_gpu_keep_first(st, alloc, cudaMallocAsync((void **)&d_place, (size_t)nrows * 4, stream));
	if (!st.call)
		starfa_gpu_keep_first(st, alloc, cudaMallocAsync((void **)&p.order, (size_t)nnz * 4, stream));
	if (!st.call)
		starfa_gpu_keep_first(st, alloc, cudaMallocAsync((void **)&p.packed, (size_t)nnz * 4, stream));
	if (!st.call)
		starfa_gpu_keep_first(st, alloc, cudaMallocAsync((void **)&p.items, items.size() * sizeof(uint4), stream));
	if (!st.call)
		starfa_gpu_keep_first(st, alloc, cudaMallocAsync((void **)&keys, (size_t)nnz * 8, stream));
	if (!st.call)
		starfa_gpu_keep_first(st, alloc, cudaMallocAsync((void **)&keys_sorted, (size_t)nnz * 8, stream));
	if (!st.call)
		starfa_gpu_keep_first(st, alloc, cudaMallocAsync((void **)&pos, (size_t)nnz * 4, stream));
	if (!st.call)
		starfa_gpu_keep_first(st, alloc, cudaMallocAsync(&temp, std::max<size_t>(temp_bytes, 1), stream));
	if (!st.call)
		starfa_gpu_keep_first(st, "cudaMemcpyAsync (SDDMM by column: rows)",
				   cudaMemcpyAsync(p.rows, rows.data(), (size_t)nrows * 4, cudaMemcpyHostToDevice, stream));
	if (!st.call)
		starfa_gpu_keep_first(st, "cudaMemcpyAsync (SDDMM by column: rows)",
				   cudaMemcpyAsync(d_place, place.data(), (size_t)nrows * 4, cudaMemcpyHostToDevice, stream));
	if (!st.call)
		starfa_gpu_keep_first(st, "cudaMemcpyAsync (SDDMM by column: items)",
				   cudaMemcpyAsync(p.items, items.data(), items.size() * sizeof(uint4), cudaMemcpyHostToDevice,
						   stream));
	const unsigned grid = (unsigned)std::min<int64_t>((nnz + kThreads - 1) / kThreads, 65536);
	if (!st.call) {
		by_column_keys<<<grid, kThreads, 0, stream>>>(nrows, nnz, g.block_rows, ncols, rowptr, colind, d_place, keys,
							      pos);
		starfa_gpu_keep_first(st, "by_column_keys launch", cudaGetLastError());
	}
	if (!st.call)
		starfa_gpu_keep_first(st, "cub::DeviceRadixSort::SortPairs (SDDMM by column)",
				   cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, keys_sorted, pos, p.order, nnz, 0,
								   end_bit, stream));
	if (!st.call) {
		by_column_pack<<<grid, kThreads, 0, stream>>>(nrows, nnz, g.block_rows, ncols, g.col_bits, rowptr, d_place,
							      keys_sorted, p.order, p.packed);
		starfa_gpu_keep_first(st, "by_column_pack launch", cudaGetLastError());
	}
	void *scratch[5] = {keys, keys_sorted, pos, d_place, temp};
	for (void *s : scratch)
		if (s)
			starfa_gpu_keep_first(st, "cudaFreeAsync (SDDMM by column)", cudaFreeAsync(s, stream));
	/* The host items go out of scope at return: the copy must be done. */
	starfa_gpu_keep_first(st, "cudaStreamSynchronize (SDDMM by column)", cudaStreamSynchronize(stream));
	if (st.call) {
		starfa_gpu_status ignored = starfa_gpu_ok();
		free_column_plan(p, ignored);
	}
	return st;
}

/* The kept plan of this tile at this height, made (and the least recently used one freed) when there is
 * none; with pattern 0, a plan of the caller's own that it frees after the call. */
starfa_gpu_status find_column_plan(const tile_key &tile, const column_geometry &g, int sms, const uint32_t *rowptr,
				   const uint32_t *colind, cudaStream_t stream, column_plan *own, column_plan **out)
{
	column_plans &kept = column_kept;
	return find_or_make(
		kept.plan, kept.count, kept.clock, tile.pattern != 0, stream,
		[&](const column_plan &p) { return p.tile == tile && p.block_rows == g.block_rows; },
		[&](column_plan &want) {
			want = {tile, g.block_rows, g.col_bits, nullptr, nullptr, nullptr, nullptr, 0, stream, 0};
			return make_column_plan(want, g, sms, rowptr, colind, stream);
		},
		free_column_plan, own, out);
}

/* Frees every kept plan of a tile. */
void forget_column_plans(const tile_key &tile, starfa_gpu_status &st)
{
	column_plans &kept = column_kept;
	for (int i = 0; i < kept.count;)
		if (kept.plan[i].tile == tile) {
			free_column_plan(kept.plan[i], st);
			kept.plan[i] = kept.plan[--kept.count];
		} else {
			i++;
		}
}

/* One tile's by-column launch (its shared memory allowed up to the opt-in limit: allow_optin_smem). */
cudaError_t launch_by_column(Shape s, const column_plan &cp, size_t smem_bytes, const float *sval,
			     const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k, Epilogue ep, float *out,
			     cudaStream_t stream)
{
	if (cp.nitems == 0)
		return cudaSuccess;
	const float4 *A4 = reinterpret_cast<const float4 *>(A);
	const float4 *B4 = reinterpret_cast<const float4 *>(B);
	const int k4 = (int)(k / 4), smem_ld = smem_row_stride(k4, s.v);
#define STARFA_SDDMM_CASE(V, J)                                                                          \
	if (s.v == V && s.j == J) {                                                                      \
		cudaError_t e = allow_optin_smem<sddmm_by_column<V, J>>();                                  \
		if (e != cudaSuccess)                                                                    \
			return e;                                                                        \
		sddmm_by_column<V, J><<<(unsigned)cp.nitems, kByColumnThreads, smem_bytes, stream>>>(        \
			cp.items, cp.tile.nrows, cp.block_rows, cp.col_bits, cp.rows, cp.order, cp.packed, sval, A4,  \
			lda / 4, B4, ldb / 4, k4, smem_ld, ep, out);                                         \
		return cudaGetLastError();                                                               \
	}
	STARFA_SDDMM_SHAPES(STARFA_SDDMM_CASE)
#undef STARFA_SDDMM_CASE
	return cudaErrorInvalidValue;
}

/* Whether the plan's memory (kept: 8 bytes a nonzero; while it is made: 20 more and the sort's temporary
 * storage, about 12) fits beside the tile's other data: at most a quarter of the device's free memory. */
bool column_plan_affordable(int64_t nnz)
{
	size_t free_bytes = 0, total = 0;
	if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
		(void)cudaGetLastError();
		return false;
	}
	return (double)nnz * 40.0 <= 0.25 * (double)free_bytes;
}

/* The tile by column with the plan kept for it (made when there is none). */
starfa_gpu_status run_by_column(const tile_key &tile, int64_t block_rows, Shape shape, const uint32_t *rowptr,
				const uint32_t *colind, const float *sval, const float *A, int64_t lda, const float *B,
				int64_t ldb, int64_t k, Epilogue ep, float *out, cudaStream_t stream, int64_t *rows_used)
{
	starfa_gpu_status st = starfa_gpu_ok();
	DeviceLimits dev;
	starfa_gpu_keep_first(st, "cudaDeviceGetAttribute", device_limits(&dev));
	column_geometry g;
	if (!st.call && !by_column_geometry(dev, shape, tile.nrows, tile.ncols, k, block_rows, &g))
		return starfa_gpu_status{"SDDMM by column (the tile's rows or columns do not fit its shared memory or "
					 "its 32-bit packing)",
					 cudaErrorInvalidValue, CUSPARSE_STATUS_SUCCESS, CUBLAS_STATUS_SUCCESS};
	if (st.call)
		return st;
	if (rows_used)
		*rows_used = g.block_rows;
	column_plan own, *cp = nullptr;
	st = find_column_plan(tile, g, dev.sms, rowptr, colind, stream, &own, &cp);
	if (st.call)
		return st;
	starfa_gpu_keep_first(st, "sddmm_by_column launch",
			   launch_by_column(shape, *cp, g.smem_bytes, sval, A, lda, B, ldb, k, ep, out,
					    stream));
	if (cp == &own)
		free_column_plan(own, st);
	return st;
}


/* ------------------------------------------------------------------ the tuned choice */

/* What starfa_cuda_sddmm_tuned runs on a tile, chosen by timing: no fixed rule picked the fastest
 * variant everywhere (bench/RESULTS.md, 2026-11-27: the panel kernel's single panel won on some small
 * matrices at k = 128, plain virtual warps where the L2 model chose panels, the dense rows on skewed
 * ones). */
enum TunedKind { kTunedVwarp = 0, kTunedSmem, kTunedPanel, kTunedDense, kTunedByColumn, kTunedKinds };
const char *const kTunedNames[kTunedKinds] = {"vwarp", "smem", "panel", "vwarp+dense rows", "by column"};

/* A tile's choice, kept per host thread by what decides the timing: the tile_key, rank, leading
 * dimensions and scaling. */
struct tuned_choice {
	tile_key tile;
	int64_t k, lda, ldb;
	int scaled, kind;
	uint64_t used;
	bool same_timing(const tuned_choice &o) const
	{
		return tile == o.tile && k == o.k && lda == o.lda && ldb == o.ldb && scaled == o.scaled;
	}
};
/* Timed runs of each candidate after a first one: enough that the fastest candidate's take about
 * kTunedTimedMs (a 10 µs kernel's timing varies by a few µs from run to run), at least kTunedMinRuns and
 * at most kTunedMaxRuns; the fastest run counts. */
constexpr double kTunedTimedMs = 0.3;
constexpr int kTunedMinRuns = 2, kTunedMaxRuns = 16;

struct tuned_choices {
	tuned_choice choice[kMaxKeptTiles];
	int count = 0;
	uint64_t clock = 0;
	cudaEvent_t start = nullptr, stop = nullptr; /* the calling thread's timing events, on event_device */
	int event_device = -1;
};

thread_local tuned_choices tuned_kept;

/* One run of a candidate into out with epilogue ep. */
starfa_gpu_status run_tuned_kind(int kind, const Plan (&plans)[kTunedKinds], cublasHandle_t cublas, const tile_key &tile,
				 const uint32_t *rowptr, const uint32_t *colind, const float *sval, const float *A,
				 int64_t lda, const float *B, int64_t ldb, int64_t k, Epilogue ep, float *out,
				 cudaStream_t stream)
{
	const int64_t nrows = tile.nrows, ncols = tile.ncols, nnz = tile.nnz;
	starfa_gpu_status st = starfa_gpu_ok();
	const Plan &p = plans[kind];
	switch (kind) {
	case kTunedVwarp:
		starfa_gpu_keep_first(st, "sddmm_vwarp launch",
				   launch_vwarp<false>(p.shape, nrows, ncols, (uint32_t)nnz, rowptr, colind, sval, A, lda,
						       B, ldb, k, ep, out, stream, p.blocks, 0, p.chunk));
		return st;
	case kTunedSmem:
		starfa_gpu_keep_first(st, "sddmm_vwarp (shared memory) launch",
				   launch_vwarp<true>(p.shape, nrows, ncols, (uint32_t)nnz, rowptr, colind, sval, A, lda,
						      B, ldb, k, ep, out, stream, p.blocks, p.smem_bytes, p.chunk));
		return st;
	case kTunedPanel:
		starfa_gpu_keep_first(st, "sddmm_panel launch",
				   run_panels(p, nrows, ncols, nnz, rowptr, colind, sval, A, lda, B, ldb, k, ep, out, stream));
		return st;
	case kTunedByColumn:
		return run_by_column(tile, 0, p.shape, rowptr, colind, sval, A, lda, B, ldb, k, ep, out, stream, nullptr);
	default:
		return run_dense_rows(cublas, tile, 0.0, 0, p, rowptr, colind, sval, A, lda, B, ldb, k, ep, out, stream,
				      nullptr);
	}
}

/* Times every candidate that can run the tile (round-robin after a first round that sizes the count,
 * so that none always finds L2 warm from itself) into out, or into a scratch array where beta != 0 (out's
 * values are an input then), and returns the fastest. */
starfa_gpu_status choose_tuned_kind(const bool (&can)[kTunedKinds], const Plan (&plans)[kTunedKinds],
				    cublasHandle_t cublas, const tile_key &tile, const uint32_t *rowptr,
				    const uint32_t *colind, const float *sval, const float *A, int64_t lda, const float *B,
				    int64_t ldb, int64_t k, Epilogue ep, float *out, cudaStream_t stream, int *kind)
{
	starfa_gpu_status st = starfa_gpu_ok();
	tuned_choices &kept = tuned_kept;
	const int device = tile.device;
	if (kept.start && kept.event_device != device) { /* events record on their own device's streams only */
		starfa_gpu_keep_first(st, "cudaEventDestroy", cudaEventDestroy(kept.start));
		starfa_gpu_keep_first(st, "cudaEventDestroy", cudaEventDestroy(kept.stop));
		kept.start = kept.stop = nullptr;
		if (st.call)
			return st;
	}
	if (!kept.start) {
		starfa_gpu_keep_first(st, "cudaEventCreate", cudaEventCreate(&kept.start));
		if (!st.call)
			starfa_gpu_keep_first(st, "cudaEventCreate", cudaEventCreate(&kept.stop));
		if (st.call) {
			if (kept.start)
				cudaEventDestroy(kept.start);
			kept.start = kept.stop = nullptr;
			return st;
		}
		kept.event_device = device;
	}
	float *trial = out;
	Epilogue trial_ep = ep;
	if (ep.mode & kAccumulate) {
		trial_ep.mode &= ~kAccumulate;
		starfa_gpu_keep_first(st, "cudaMallocAsync (SDDMM timing)",
				   cudaMallocAsync((void **)&trial, (size_t)tile.nnz * sizeof(float), stream));
		if (st.call)
			return st;
	}
	float best[kTunedKinds], first[kTunedKinds];
	for (int c = 0; c < kTunedKinds; c++)
		best[c] = first[c] = INFINITY;
	int runs = kTunedMinRuns;
	for (int run = 0; run <= runs && !st.call; run++) {
		if (run == 1) { /* sized by the fastest first run */
			float fastest = INFINITY;
			for (int c = 0; c < kTunedKinds; c++)
				fastest = std::min(fastest, first[c]);
			if (fastest > 0 && fastest < INFINITY)
				runs = (int)std::min<double>(kTunedMaxRuns,
							     std::max<double>(kTunedMinRuns, std::ceil(kTunedTimedMs / fastest)));
		}
		for (int c = 0; c < kTunedKinds && !st.call; c++) {
			if (!can[c])
				continue;
			starfa_gpu_keep_first(st, "cudaEventRecord", cudaEventRecord(kept.start, stream));
			starfa_gpu_status r = run_tuned_kind(c, plans, cublas, tile, rowptr, colind, sval, A, lda, B, ldb, k,
							     trial_ep, trial, stream);
			if (r.call && !st.call)
				st = r;
			starfa_gpu_keep_first(st, "cudaEventRecord", cudaEventRecord(kept.stop, stream));
			starfa_gpu_keep_first(st, "cudaEventSynchronize", cudaEventSynchronize(kept.stop));
			float ms = 0;
			starfa_gpu_keep_first(st, "cudaEventElapsedTime", cudaEventElapsedTime(&ms, kept.start, kept.stop));
			if (run == 0)
				first[c] = ms;
			else if (ms < best[c])
				best[c] = ms;
		}
	}
	if (trial != out)
		starfa_gpu_keep_first(st, "cudaFreeAsync (SDDMM timing)", cudaFreeAsync(trial, stream));
	*kind = kTunedVwarp;
	for (int c = 0; c < kTunedKinds; c++)
		if (can[c] && best[c] < best[*kind])
			*kind = c;
	return st;
}

/* The kept choice for this tile, or nullptr. */
tuned_choice *find_tuned(const tuned_choice &want)
{
	tuned_choices &kept = tuned_kept;
	for (int i = 0; i < kept.count; i++)
		if (kept.choice[i].same_timing(want))
			return &kept.choice[i];
	return nullptr;
}

/* Whether a kept choice of this tile (at another rank, say) runs `kind` (whose kept plan it needs). */
bool kind_in_use(const tile_key &tile, int kind)
{
	const tuned_choices &kept = tuned_kept;
	for (int i = 0; i < kept.count; i++)
		if (kept.choice[i].tile == tile && kept.choice[i].kind == kind)
			return true;
	return false;
}

/* What the entry points of the dense rows and the by-column kernel share after their own checks: the
 * virtual-warp kernel's plan (both need its 16-byte rows; refused with `refused` otherwise), the tile on the
 * current device and the epilogue. */
starfa_gpu_status vwarp_entry(const char *refused, uint64_t pattern, int64_t nrows, int64_t ncols, int64_t nnz,
			      int64_t k, const float *A, int64_t lda, const float *B, int64_t ldb, int scaled, float alpha,
			      float beta, Plan *vw, tile_key *tile, Epilogue *ep)
{
	if (plan(STARFA_CUDA_SDDMM_VWARP, nrows, ncols, nnz, k, A, lda, B, ldb, vw) != cudaSuccess)
		return starfa_gpu_status{refused, cudaErrorInvalidValue, CUSPARSE_STATUS_SUCCESS, CUBLAS_STATUS_SUCCESS};
	*tile = {pattern, nrows, ncols, nnz, 0};
	const cudaError_t e = cudaGetDevice(&tile->device);
	if (e != cudaSuccess)
		return starfa_gpu_status{"cudaGetDevice", e, CUSPARSE_STATUS_SUCCESS, CUBLAS_STATUS_SUCCESS};
	*ep = {(scaled ? kScale : 0) | (beta != 0.0f ? kAccumulate : 0), alpha, beta};
	return starfa_gpu_ok();
}

} // namespace

extern "C" const char *starfa_cuda_sddmm_variant_name(starfa_cuda_sddmm_variant v)
{
	switch (v) {
	case STARFA_CUDA_SDDMM_AUTO: return "auto";
	case STARFA_CUDA_SDDMM_WARP_SPANS: return "warp_spans";
	case STARFA_CUDA_SDDMM_VWARP: return "vwarp";
	case STARFA_CUDA_SDDMM_SMEM: return "smem";
	case STARFA_CUDA_SDDMM_VWARP_SLICED: return "vwarp_sliced";
	case STARFA_CUDA_SDDMM_PANEL: return "panel";
	default: return "unknown";
	}
}

extern "C" starfa_cuda_sddmm_variant starfa_cuda_sddmm_choose(int64_t nrows, int64_t ncols, int64_t nnz, int64_t k,
							      const float *A, int64_t lda, const float *B,
							      int64_t ldb)
{
	Plan p;
	if (plan(STARFA_CUDA_SDDMM_AUTO, nrows, ncols, nnz, k, A, lda, B, ldb, &p) != cudaSuccess)
		return STARFA_CUDA_SDDMM_WARP_SPANS;
	return p.variant;
}

extern "C" cudaError_t starfa_cuda_sddmm_variant_run(starfa_cuda_sddmm_variant variant, int64_t nrows, int64_t ncols,
						     int64_t nnz, const uint32_t *rowptr, const uint32_t *colind,
						     const float *sval, const float *A, int64_t lda, const float *B,
						     int64_t ldb, int64_t k, int scaled, float alpha, float beta,
						     float *out, cudaStream_t stream)
{
	if (nrows <= 0 || nnz <= 0)
		return cudaSuccess;
	if (nnz > (int64_t)UINT32_MAX || k <= 0)
		return cudaErrorInvalidValue;
	Plan p;
	cudaError_t err = plan(variant, nrows, ncols, nnz, k, A, lda, B, ldb, &p);
	if (err != cudaSuccess)
		return err;
	const Epilogue ep = {(scaled ? kScale : 0) | (beta != 0.0f ? kAccumulate : 0), alpha, beta};
	switch (p.variant) {
	case STARFA_CUDA_SDDMM_WARP_SPANS:
		sddmm_warp_spans<<<p.blocks, kThreads, 0, stream>>>(nrows, rowptr, colind, sval, A, lda, B, ldb, k, ep,
									out);
		return cudaGetLastError();
	case STARFA_CUDA_SDDMM_VWARP:
		return launch_vwarp<false>(p.shape, nrows, ncols, (uint32_t)nnz, rowptr, colind, sval, A, lda, B, ldb,
					   k, ep, out, stream, p.blocks, 0, p.chunk);
	case STARFA_CUDA_SDDMM_SMEM:
		return launch_vwarp<true>(p.shape, nrows, ncols, (uint32_t)nnz, rowptr, colind, sval, A, lda, B, ldb, k,
					  ep, out, stream, p.blocks, p.smem_bytes, p.chunk);
	case STARFA_CUDA_SDDMM_VWARP_SLICED:
		/* Passes in stream order, each scaled: the first writes (or adds beta P), the later ones add. */
		for (int64_t k0 = 0; k0 < k; k0 += p.slice) {
			int64_t ks = k - k0 < p.slice ? k - k0 : p.slice;
			Plan slice_plan;
			err = plan(STARFA_CUDA_SDDMM_VWARP, nrows, ncols, nnz, ks, A + k0, lda, B + k0, ldb, &slice_plan);
			if (err != cudaSuccess)
				return err;
			const Epilogue slice_ep = {(ep.mode & kScale) | (k0 > 0 || beta != 0.0f ? kAccumulate : 0), alpha,
						   k0 > 0 ? 1.0f : beta};
			err = launch_vwarp<false>(slice_plan.shape, nrows, ncols, (uint32_t)nnz, rowptr, colind, sval,
						  A + k0, lda, B + k0, ldb, ks, slice_ep, out, stream, slice_plan.blocks,
						  0, slice_plan.chunk);
			if (err != cudaSuccess)
				return err;
		}
		return cudaSuccess;
	case STARFA_CUDA_SDDMM_PANEL:
		return run_panels(p, nrows, ncols, nnz, rowptr, colind, sval, A, lda, B, ldb, k, ep, out, stream);
	default:
		return cudaErrorInvalidValue;
	}
}

extern "C" cudaError_t starfa_cuda_sddmm_panel_run(int64_t panel_cols, int64_t nrows, int64_t ncols, int64_t nnz,
						   const uint32_t *rowptr, const uint32_t *colind, const float *sval,
						   const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k,
						   int scaled, float alpha, float beta, float *out, cudaStream_t stream)
{
	if (panel_cols < 0)
		return cudaErrorInvalidValue;
	if (nrows <= 0 || nnz <= 0)
		return cudaSuccess;
	if (nnz > (int64_t)UINT32_MAX || k <= 0)
		return cudaErrorInvalidValue;
	Plan p;
	cudaError_t err = plan(STARFA_CUDA_SDDMM_PANEL, nrows, ncols, nnz, k, A, lda, B, ldb, &p);
	if (err != cudaSuccess)
		return err;
	if (panel_cols > 0)
		p.panel_cols = panel_cols < ncols ? panel_cols : ncols;
	const Epilogue ep = {(scaled ? kScale : 0) | (beta != 0.0f ? kAccumulate : 0), alpha, beta};
	return run_panels(p, nrows, ncols, nnz, rowptr, colind, sval, A, lda, B, ldb, k, ep, out, stream);
}

extern "C" int64_t starfa_cuda_sddmm_panel_cols(int64_t ncols, int64_t k)
{
	DeviceLimits dev;
	if (ncols <= 0 || k <= 0 || device_limits(&dev) != cudaSuccess)
		return 0;
	return panel_cols(dev, ncols, k);
}

extern "C" cudaError_t starfa_cuda_sddmm(int64_t nrows, int64_t ncols, int64_t nnz, const uint32_t *rowptr,
					 const uint32_t *colind, const float *sval, const float *A, int64_t lda,
					 const float *B, int64_t ldb, int64_t k, int scaled, float alpha, float beta,
					 float *out, cudaStream_t stream)
{
	return starfa_cuda_sddmm_variant_run(STARFA_CUDA_SDDMM_AUTO, nrows, ncols, nnz, rowptr, colind, sval, A, lda, B,
					     ldb, k, scaled, alpha, beta, out, stream);
}

extern "C" double starfa_cuda_sddmm_dense_rows_density(int64_t k)
{
	return k > 0 ? dense_rows_min_density(k) : 0.0;
}

extern "C" starfa_gpu_status starfa_cuda_sddmm_dense_rows_run(cublasHandle_t cublas, uint64_t pattern,
							      double min_density, int64_t chunk_rows, int64_t nrows,
							      int64_t ncols, int64_t nnz, const uint32_t *rowptr,
							      const uint32_t *colind, const float *sval, const float *A,
							      int64_t lda, const float *B, int64_t ldb, int64_t k,
							      int scaled, float alpha, float beta, float *out,
							      cudaStream_t stream, int64_t *dense_rows)
{
	if (dense_rows)
		*dense_rows = 0;
	if (nrows <= 0 || nnz <= 0)
		return starfa_gpu_ok();
	const char *why = nullptr;
	Plan vw;
	if (!cublas)
		why = "starfa_cuda_sddmm_dense_rows_run (no cuBLAS handle)";
	else if (nnz > (int64_t)UINT32_MAX || k <= 0 || ncols > INT32_MAX || nrows > INT32_MAX || ldb > INT32_MAX ||
		 chunk_rows < 0)
		why = "starfa_cuda_sddmm_dense_rows_run (sizes beyond the dense rows' path)";
	else if (min_density < 0 || (min_density > 0 && min_density < kDenseCandidateDensity) || std::isnan(min_density))
		why = "starfa_cuda_sddmm_dense_rows_run (min_density below 0.02: the row order keeps no sparser rows)";
	if (why)
		return starfa_gpu_status{why, cudaErrorInvalidValue, CUSPARSE_STATUS_SUCCESS, CUBLAS_STATUS_SUCCESS};
	tile_key tile;
	Epilogue ep;
	starfa_gpu_status st = vwarp_entry("starfa_cuda_sddmm_dense_rows_run (needs the virtual-warp kernel's 16-byte "
					   "rows: k, lda, ldb multiples of 4, aligned A and B, k <= 1024)",
					   pattern, nrows, ncols, nnz, k, A, lda, B, ldb, scaled, alpha, beta, &vw, &tile, &ep);
	if (st.call)
		return st;
	return run_dense_rows(cublas, tile, min_density, chunk_rows, vw, rowptr, colind, sval, A, lda, B, ldb, k, ep, out,
			      stream, dense_rows);
}

extern "C" starfa_gpu_status starfa_cuda_sddmm_by_column_run(uint64_t pattern, int64_t block_rows, int64_t nrows,
							      int64_t ncols, int64_t nnz, const uint32_t *rowptr,
							      const uint32_t *colind, const float *sval, const float *A,
							      int64_t lda, const float *B, int64_t ldb, int64_t k,
							      int scaled, float alpha, float beta, float *out,
							      cudaStream_t stream, int64_t *rows_used)
{
	if (rows_used)
		*rows_used = 0;
	if (nrows <= 0 || nnz <= 0)
		return starfa_gpu_ok();
	if (nnz > (int64_t)UINT32_MAX || k <= 0 || block_rows < 0 || ncols > INT32_MAX || nrows > INT32_MAX)
		return starfa_gpu_status{"starfa_cuda_sddmm_by_column_run (sizes beyond the kernel's)", cudaErrorInvalidValue,
					 CUSPARSE_STATUS_SUCCESS, CUBLAS_STATUS_SUCCESS};
	Plan vw;
	tile_key tile;
	Epilogue ep;
	starfa_gpu_status st = vwarp_entry("starfa_cuda_sddmm_by_column_run (needs the virtual-warp kernel's 16-byte "
					   "rows: k, lda, ldb multiples of 4, aligned A and B, k <= 1024)",
					   pattern, nrows, ncols, nnz, k, A, lda, B, ldb, scaled, alpha, beta, &vw, &tile, &ep);
	if (st.call)
		return st;
	return run_by_column(tile, block_rows, vw.shape, rowptr, colind, sval, A, lda, B, ldb, k, ep, out, stream,
			     rows_used);
}

extern "C" starfa_gpu_status starfa_cuda_sddmm_tuned(cublasHandle_t cublas, uint64_t pattern, int64_t nrows,
						     int64_t ncols, int64_t nnz, const uint32_t *rowptr,
						     const uint32_t *colind, const float *sval, const float *A, int64_t lda,
						     const float *B, int64_t ldb, int64_t k, int scaled, float alpha,
						     float beta, float *out, cudaStream_t stream)
{
	Plan plans[kTunedKinds];
	const bool tunable = cublas && pattern && nrows > 0 && nnz > 0 && nnz <= (int64_t)UINT32_MAX && k > 0 &&
			     ncols <= INT32_MAX && nrows <= INT32_MAX && ldb <= INT32_MAX &&
			     plan(STARFA_CUDA_SDDMM_VWARP, nrows, ncols, nnz, k, A, lda, B, ldb, &plans[kTunedVwarp]) ==
				     cudaSuccess;
	if (!tunable) { /* the fixed rule: no pattern to keep a choice by, or no 16-byte rows */
		cudaError_t e = starfa_cuda_sddmm(nrows, ncols, nnz, rowptr, colind, sval, A, lda, B, ldb, k, scaled, alpha,
						  beta, out, stream);
		if (e != cudaSuccess)
			return starfa_gpu_status{"starfa_cuda_sddmm", e, CUSPARSE_STATUS_SUCCESS, CUBLAS_STATUS_SUCCESS};
		return starfa_gpu_ok();
	}
	starfa_gpu_status st = starfa_gpu_ok();
	int device;
	starfa_gpu_keep_first(st, "cudaGetDevice", cudaGetDevice(&device));
	if (st.call)
		return st;
	const Epilogue ep = {(scaled ? kScale : 0) | (beta != 0.0f ? kAccumulate : 0), alpha, beta};
	const tile_key tile = {pattern, nrows, ncols, nnz, device};
	tuned_choice want = {tile, k, lda, ldb, scaled != 0, kTunedVwarp, 0};
	tuned_choices &kept = tuned_kept;
	tuned_choice *found = find_tuned(want);
	if (found) { /* only the kept kind's plan (the virtual-warp one is made: the dense rows' path uses it) */
		found->used = ++kept.clock;
		int kind = found->kind;
		if (kind == kTunedSmem || kind == kTunedPanel) {
			const starfa_cuda_sddmm_variant v = kind == kTunedSmem ? STARFA_CUDA_SDDMM_SMEM : STARFA_CUDA_SDDMM_PANEL;
			if (plan(v, nrows, ncols, nnz, k, A, lda, B, ldb, &plans[kind]) != cudaSuccess)
				kind = kTunedVwarp; /* the tile's new addresses lost an alignment the choice needed */
		}
		plans[kTunedDense] = plans[kTunedByColumn] = plans[kTunedVwarp];
		return run_tuned_kind(kind, plans, cublas, tile, rowptr, colind, sval, A, lda, B, ldb, k, ep, out, stream);
	}
	bool can[kTunedKinds] = {true, false, false, false, false};
	can[kTunedSmem] = plan(STARFA_CUDA_SDDMM_SMEM, nrows, ncols, nnz, k, A, lda, B, ldb, &plans[kTunedSmem]) ==
			  cudaSuccess;
	can[kTunedPanel] = plan(STARFA_CUDA_SDDMM_PANEL, nrows, ncols, nnz, k, A, lda, B, ldb, &plans[kTunedPanel]) ==
			   cudaSuccess;
	plans[kTunedDense] = plans[kTunedByColumn] = plans[kTunedVwarp];
	{ /* its order is made before the timing: a failure to make it (memory taken since the check) drops the
	   * candidate instead of failing the call */
		DeviceLimits dev;
		column_geometry g;
		column_plan own, *cp = nullptr;
		can[kTunedByColumn] = device_limits(&dev) == cudaSuccess &&
				      by_column_geometry(dev, plans[kTunedVwarp].shape, nrows, ncols, k, 0, &g) &&
				      column_plan_affordable(nnz) &&
				      !find_column_plan(tile, g, dev.sms, rowptr, colind, stream, &own, &cp).call;
		(void)cudaGetLastError();
	}
	if (k >= kDenseMinK) { /* the dense rows are a candidate where the model takes some */
		dense_plan own, *dp = nullptr;
		own.rows = own.rank = nullptr;
		st = find_dense_plan(tile, rowptr, stream, &own, &dp);
		if (st.call)
			return st;
		can[kTunedDense] = ncols * (int64_t)sizeof(float) <= kDenseMaxProductBytes && dense_row_count(*dp, 0.0, k) > 0;
	}
	st = choose_tuned_kind(can, plans, cublas, tile, rowptr, colind, sval, A, lda, B, ldb, k, ep, out, stream,
			       &want.kind);
	if (st.call)
		return st;
	if (want.kind != kTunedDense && !kind_in_use(tile, kTunedDense)) /* the row order is needed no more */
		forget_dense_plan(tile, st);
	if (want.kind != kTunedByColumn && !kind_in_use(tile, kTunedByColumn)) /* nor the column order */
		forget_column_plans(tile, st);
	if (kept.count == kMaxKeptTiles) {
		const int oldest = least_recent(kept.count, [&](int i) { return kept.choice[i].used; });
		kept.choice[oldest] = kept.choice[--kept.count];
	}
	found = &kept.choice[kept.count++];
	*found = want;
	found->used = ++kept.clock;
	if (st.call)
		return st;
	return run_tuned_kind(found->kind, plans, cublas, tile, rowptr, colind, sval, A, lda, B, ldb, k, ep, out, stream);
}

extern "C" const char *starfa_cuda_sddmm_tuned_kept(uint64_t pattern, int64_t k)
{
	const tuned_choices &kept = tuned_kept;
	for (int i = 0; i < kept.count; i++)
		if (kept.choice[i].tile.pattern == pattern && kept.choice[i].k == k)
			return kTunedNames[kept.choice[i].kind];
	return nullptr;
}

extern "C" starfa_gpu_status starfa_cuda_sddmm_release(void)
{
	starfa_gpu_status st = starfa_gpu_ok();
	dense_plans &kept = dense_kept;
	for (int i = 0; i < kept.count; i++)
		free_dense_plan(kept.plan[i], st);
	kept.count = 0;
	if (kept.scratch)
		starfa_gpu_keep_first(st, "cudaFreeAsync (SDDMM dense rows)", cudaFreeAsync(kept.scratch, kept.scratch_stream));
	kept.scratch = nullptr;
	kept.scratch_bytes = 0;
	kept.scratch_device = -1;
	column_plans &columns = column_kept;
	for (int i = 0; i < columns.count; i++)
		free_column_plan(columns.plan[i], st);
	columns.count = 0;
	tuned_choices &tuned = tuned_kept;
	tuned.count = 0;
	if (tuned.start)
		starfa_gpu_keep_first(st, "cudaEventDestroy", cudaEventDestroy(tuned.start));
	if (tuned.stop)
		starfa_gpu_keep_first(st, "cudaEventDestroy", cudaEventDestroy(tuned.stop));
	tuned.start = tuned.stop = nullptr;
	tuned.event_device = -1;
	return st;
}

/* ------------------------------------------------------------------ squared residuals */

namespace {

constexpr int64_t kSqerrSpan = 64; /* nonzeros a group takes at once */

/* The loss where sqerr_vwarp does not apply (no 16-byte loads, or k past its shapes): groups of kLanes
 * lanes, each over spans of kSqerrSpan nonzeros (the span's first row by a search of
 * rowptr, then a walk), the dot products split across the group's lanes (16 bytes at a time when kVec),
 * the squares summed in double on lane 0 and over the block into *sum. */
template <int kLanes, bool kVec>
__global__ void __launch_bounds__(starfa_gpu::kReduceThreads)
	sqerr_kernel(int64_t nrows, int64_t nnz, const uint32_t *__restrict__ rowptr, const uint32_t *__restrict__ colind,
		     const float *__restrict__ sval, const float *__restrict__ A, int64_t lda, const float *__restrict__ B,
		     int64_t ldb, int64_t k, float shift, double *sum)
{
	const int lane = threadIdx.x % kLanes;
	const unsigned mask = kLanes == 32 ? 0xffffffffu : ((1u << kLanes) - 1u) << (threadIdx.x % 32 / kLanes * kLanes);
	const int64_t groups = (int64_t)gridDim.x * blockDim.x / kLanes;
	const int64_t nspans = (nnz + kSqerrSpan - 1) / kSqerrSpan;
	double local = 0.0;
	for (int64_t g = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / kLanes; g < nspans; g += groups) {
		const int64_t p0 = g * kSqerrSpan, p1 = p0 + kSqerrSpan < nnz ? p0 + kSqerrSpan : nnz;
		int64_t lo = 0, hi = nrows - 1; /* the last row starting at or before p0 */
		while (lo < hi) {
			const int64_t mid = (lo + hi + 1) / 2;
			if ((int64_t)__ldg(rowptr + mid) <= p0)
				lo = mid;
			else
				hi = mid - 1;
		}
		int64_t r = lo;
		for (int64_t p = p0; p < p1; p++) {
			while ((int64_t)__ldg(rowptr + r + 1) <= p)
				r++;
			const float *a = A + r * lda, *b = B + (int64_t)__ldg(colind + p) * ldb;
			float dot = 0.0f;
			if (kVec) {
				for (int64_t d = lane; d < k / 4; d += kLanes) {
					const float4 x = __ldg(reinterpret_cast<const float4 *>(a) + d);
					const float4 y = __ldg(reinterpret_cast<const float4 *>(b) + d);
					dot += x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
				}
			} else {
				for (int64_t d = lane; d < k; d += kLanes)
					dot += __ldg(a + d) * __ldg(b + d);
			}
			for (int offset = kLanes / 2; offset > 0; offset /= 2)
				dot += __shfl_xor_sync(mask, dot, offset);
			if (lane == 0) {
				const float e = __ldg(sval + p) - shift - dot;
				local += (double)e * e;
			}
		}
	}
	starfa_gpu::block_add(local, sum);
}

/* One tile of a sqerr_vwarp launch: its CSR, its B rows, and the first of the launch's warps it takes. */
struct SqerrTile {
	const uint32_t *rowptr, *colind;
	const float *sval;
	const float4 *B;
	int64_t nrows, ldb4, first_warp;
	uint32_t nnz;
};
constexpr int kSqerrTiles = 32; /* tiles a launch (its parameters: 2 KB) */
struct SqerrTiles {
	SqerrTile t[kSqerrTiles];
	int n;
};

/* The loss where 16-byte loads apply, over up to kSqerrTiles tiles of one row band (one A block) in one
 * launch: VWARP's walk (V-lane groups, each holding its A row in registers and reloading it only when it
 * meets a later row), with the squared residual added in double on each group's lane 0 instead of
 * stored. A warp takes a span of gpw * chunk nonzeros of one tile (the tiles' warps one after the other),
 * and its gpw groups share the span in one of two ways. Interleaved (kRuns false, as sddmm_vwarp): group
 * g takes nonzeros g, g + gpw, ..., so that a step's column-index loads are consecutive; on rows of a few
 * nonzeros each group then meets a new row at almost every step and reloads its A row each time. In runs
 * (kRuns true): group g takes the span's g-th run of chunk consecutive nonzeros and reloads its A row once
 * a row, for tiles whose rows hold few nonzeros (a narrow column band's). The steps past a group's
 * nonzeros repeat its last one and add nothing, so the shuffles stay whole-warp ones. */
template <int V, int J, bool kRuns>
__global__ void __launch_bounds__(kThreads)
	sqerr_vwarp(const __grid_constant__ SqerrTiles tiles, int64_t total_warps, int chunk,
		    const float4 *__restrict__ A, int64_t lda4, int k4, float shift, double *sum)
{
	static_assert(kThreads == starfa_gpu::kReduceThreads, "block_add sums over kReduceThreads threads");
	constexpr int gpw = kWarp / V;
	const int lane = threadIdx.x % V;
	const int group_in_warp = threadIdx.x % kWarp / V;
	const int64_t span = (int64_t)gpw * chunk; /* nonzeros per warp */
	const int64_t warps = (int64_t)gridDim.x * (kThreads / kWarp);
	double local = 0.0;
	int t = 0;
	for (int64_t w = ((int64_t)blockIdx.x * kThreads + threadIdx.x) / kWarp; w < total_warps; w += warps) {
		while (t + 1 < tiles.n && w >= tiles.t[t + 1].first_warp)
			t++; /* warps only grow: the tile index only moves on */
		const SqerrTile &tile = tiles.t[t];
		const uint32_t *__restrict__ rowptr = tile.rowptr;
		const int64_t nrows = tile.nrows, lw = w - tile.first_warp;
		const uint32_t begin = (uint32_t)(lw * span), end = (uint32_t)min((int64_t)tile.nnz, (lw + 1) * span);
		/* this group's nonzeros: first, first + stride, ... below stop */
		const uint32_t first = (uint32_t)min((int64_t)begin + (kRuns ? (int64_t)group_in_warp * chunk : group_in_warp),
						     (int64_t)end);
		const uint32_t stop = kRuns ? (uint32_t)min((int64_t)first + chunk, (int64_t)end) : end;
		const uint32_t stride = kRuns ? 1 : gpw;
		const uint32_t last = first < stop ? (kRuns ? stop - 1 : first + (stop - 1 - first) / stride * stride)
						   : end - 1; /* a group past the span repeats its last nonzero */
		uint32_t q = min(first, last);
		int64_t row = row_of(rowptr, nrows, q);
		uint32_t row_end = __ldg(rowptr + row + 1);
		float4 a[J];
		load_a_row<V, J, false>(a, A, row, lda4, lane, k4);
		const int steps = kRuns ? chunk : (int)((end - begin + gpw - 1) / gpw);
		for (int step = 0; step < steps; step++) {
			const uint32_t p = first + (uint32_t)step * stride;
			q = min(p, last);
			if (q >= row_end) {
				row = next_row_of(rowptr, nrows, row, q);
				row_end = __ldg(rowptr + row + 1);
				load_a_row<V, J, false>(a, A, row, lda4, lane, k4);
			}
			const float dot = group_dot<V, J, false>(a, tile.B, (int64_t)__ldg(tile.colind + q) * tile.ldb4, lane,
								 k4, 0xffffffffu);
			const float e = __ldg(tile.sval + q) - shift - dot;
			if (lane == 0 && p < stop)
				local += (double)e * e;
		}
	}
	starfa_gpu::block_add(local, sum);
}

/* sqerr_vwarp over the tiles (non-empty, each below 2^32 nonzeros), kSqerrTiles a launch. Its grid sized
 * as the VWARP variant's: chunks short enough that every SM gets a full complement of groups over the
 * launch's nonzeros, at most kChunk so that the row search is amortized. */
cudaError_t sqerr_vwarp_launch(Shape s, const starfa_cuda_sqerr_tile *tiles, int ntiles, const float *A, int64_t lda,
			       int64_t k, float shift, double *sum, cudaStream_t stream)
{
	DeviceLimits dev;
	cudaError_t err = device_limits(&dev);
	if (err != cudaSuccess)
		return err;
	const int64_t gpw = kWarp / s.v;
	for (int t0 = 0; t0 < ntiles; t0 += kSqerrTiles) {
		SqerrTiles launch;
		launch.n = ntiles - t0 < kSqerrTiles ? ntiles - t0 : kSqerrTiles;
		int64_t nnz = 0, rows = 0;
		for (int t = 0; t < launch.n; t++)
			nnz += tiles[t0 + t].nnz, rows += tiles[t0 + t].nrows;
		const int64_t groups_to_fill = (int64_t)dev.sms * (2048 / s.v);
		int64_t chunk = (nnz + groups_to_fill - 1) / groups_to_fill;
		chunk = chunk < 1 ? 1 : chunk > kChunk ? kChunk : chunk;
		const int64_t span = gpw * chunk;
		int64_t warps = 0;
		for (int t = 0; t < launch.n; t++) {
			const starfa_cuda_sqerr_tile &in = tiles[t0 + t];
			launch.t[t] = SqerrTile{in.rowptr, in.colind, in.sval, reinterpret_cast<const float4 *>(in.B), in.nrows,
						in.ldb / 4, warps, (uint32_t)in.nnz};
			warps += (in.nnz + span - 1) / span;
		}
		int64_t blocks = (warps + kThreads / kWarp - 1) / (kThreads / kWarp);
		if (blocks > 64 * 8 * (int64_t)dev.sms)
			blocks = 64 * 8 * (int64_t)dev.sms; /* grid-stride beyond this */
		const float4 *A4 = reinterpret_cast<const float4 *>(A);
		/* In runs where the rows hold fewer than 4 gpw nonzeros on average: interleaved, a group would meet
		 * a new row (and reload its A row) at most steps. */
		const bool runs = nnz < 4 * gpw * rows;
		bool launched = false;
#define STARFA_SQERR_CASE(V, J)                                                                              \
	if (s.v == V && s.j == J) {                                                                          \
		if (runs)                                                                                    \
			sqerr_vwarp<V, J, true><<<(unsigned)blocks, kThreads, 0, stream>>>(                  \
				launch, warps, (int)chunk, A4, lda / 4, (int)(k / 4), shift, sum);           \
		else                                                                                         \
			sqerr_vwarp<V, J, false><<<(unsigned)blocks, kThreads, 0, stream>>>(                 \
				launch, warps, (int)chunk, A4, lda / 4, (int)(k / 4), shift, sum);           \
		launched = true;                                                                             \
	}
		STARFA_SDDMM_SHAPES(STARFA_SQERR_CASE)
#undef STARFA_SQERR_CASE
		if (!launched)
			return cudaErrorInvalidValue;
		if ((err = cudaGetLastError()) != cudaSuccess)
			return err;
	}
	return cudaSuccess;
}

template <int kLanes, bool kVec>
cudaError_t sqerr_launch(int64_t nrows, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
			 const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k, float shift, double *sum,
			 cudaStream_t stream)
{
	const int64_t nspans = (nnz + kSqerrSpan - 1) / kSqerrSpan;
	const unsigned blocks = starfa_gpu::reduce_blocks(nspans * kLanes);
	sqerr_kernel<kLanes, kVec><<<blocks, starfa_gpu::kReduceThreads, 0, stream>>>(nrows, nnz, rowptr, colind, sval, A,
											lda, B, ldb, k, shift, sum);
	return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t starfa_cuda_sqerr_tiles(const starfa_cuda_sqerr_tile *tiles, int ntiles, const float *A,
					       int64_t lda, int64_t k, float shift, double *sum, cudaStream_t stream)
{
	if (ntiles < 0 || (ntiles > 0 && !tiles) || k < 0 || !sum)
		return cudaErrorInvalidValue;
	/* One launch for up to kSqerrTiles tiles where 16-byte loads apply at a virtual-warp shape; the others
	 * each their own. */
	const Shape shape = k % 4 == 0 ? vwarp_shape(k / 4) : Shape{0, 0};
	starfa_cuda_sqerr_tile batch[kSqerrTiles];
	int nbatch = 0;
	cudaError_t err = cudaSuccess;
	for (int t = 0; t < ntiles && err == cudaSuccess; t++) {
		const starfa_cuda_sqerr_tile *in = &tiles[t];
		if (in->nrows < 0 || in->nnz < 0)
			err = cudaErrorInvalidValue;
		else if (in->nrows == 0 || in->nnz == 0)
			continue;
		else if (shape.v > 0 && in->nnz <= UINT32_MAX && vectorizable(A, lda, in->B, in->ldb, k)) {
			batch[nbatch++] = *in;
			if (nbatch == kSqerrTiles) {
				err = sqerr_vwarp_launch(shape, batch, nbatch, A, lda, k, shift, sum, stream);
				nbatch = 0;
			}
		} else
			err = starfa_cuda_sqerr(in->nrows, in->nnz, in->rowptr, in->colind, in->sval, A, lda, in->B, in->ldb, k,
						shift, sum, stream);
	}
	if (err == cudaSuccess && nbatch > 0)
		err = sqerr_vwarp_launch(shape, batch, nbatch, A, lda, k, shift, sum, stream);
	return err;
}

extern "C" cudaError_t starfa_cuda_sqerr(int64_t nrows, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind,
					 const float *sval, const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k,
					 float shift, double *sum, cudaStream_t stream)
{
	if (nrows < 0 || nnz < 0 || k < 0 || !sum)
		return cudaErrorInvalidValue;
	if (nrows == 0 || nnz == 0)
		return cudaSuccess;
	const bool vec = vectorizable(A, lda, B, ldb, k);
	const Shape shape = vec ? vwarp_shape(k / 4) : Shape{0, 0};
	if (shape.v > 0 && nnz <= UINT32_MAX) {
		const starfa_cuda_sqerr_tile tile = {nrows, nnz, rowptr, colind, sval, B, ldb};
		return sqerr_vwarp_launch(shape, &tile, 1, A, lda, k, shift, sum, stream);
	}
	const int64_t per_lane = vec ? (k + 3) / 4 : k;
	if (vec)
		return per_lane <= 8    ? sqerr_launch<8, true>(nrows, nnz, rowptr, colind, sval, A, lda, B, ldb, k, shift, sum, stream)
		       : per_lane <= 16 ? sqerr_launch<16, true>(nrows, nnz, rowptr, colind, sval, A, lda, B, ldb, k, shift, sum, stream)
				       : sqerr_launch<32, true>(nrows, nnz, rowptr, colind, sval, A, lda, B, ldb, k, shift, sum, stream);
	return per_lane <= 8    ? sqerr_launch<8, false>(nrows, nnz, rowptr, colind, sval, A, lda, B, ldb, k, shift, sum, stream)
	       : per_lane <= 16 ? sqerr_launch<16, false>(nrows, nnz, rowptr, colind, sval, A, lda, B, ldb, k, shift, sum, stream)
			       : sqerr_launch<32, false>(nrows, nnz, rowptr, colind, sval, A, lda, B, ldb, k, shift, sum, stream);
}
