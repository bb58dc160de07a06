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
 * Device limits (SM count, threads per SM, L2 size, shared memory) are read from the device.
 */
#include "gpu/sddmm.h"

#include <cstdint>
#include <cstdlib>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

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

/* ------------------------------------------------------------------ virtual warps */

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
 * stride smem_ld. */
template <int V, int J, bool kSmem>
__global__ void __launch_bounds__(kThreads)
	sddmm_vwarp(int64_t nrows, int64_t ncols, uint32_t nnz, int chunk, const uint32_t *__restrict__ rowptr,
		    const uint32_t *__restrict__ colind, const float *__restrict__ sval, const float4 *__restrict__ A,
		    int64_t lda4, const float4 *__restrict__ B, int64_t ldb4, int k4, int smem_ld, Epilogue ep,
		    float *__restrict__ out)
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

	for (int64_t w = ((int64_t)blockIdx.x * kThreads + threadIdx.x) / kWarp; w * span < nnz; w += warps) {
		const int64_t end = min((int64_t)nnz, (w + 1) * span);
		int64_t p = w * span + group_in_warp;
		if (p >= end)
			continue;
		int64_t row = row_of(rowptr, nrows, (uint32_t)p);
		uint32_t row_end = __ldg(rowptr + row + 1);
		float4 a[J];
		load_a_row<V, J, false>(a, A, row, lda4, lane, k4);
		for (; p < end; p += gpw) {
			if (p >= row_end) { /* a later row: reload the A row held in registers */
				row = next_row_of(rowptr, nrows, row, (uint32_t)p);
				row_end = __ldg(rowptr + row + 1);
				load_a_row<V, J, false>(a, A, row, lda4, lane, k4);
			}
			float acc =
				group_dot<V, J, kSmem>(a, b_rows, (int64_t)__ldg(colind + p) * b_ld, lane, k4, lanes);
			if (lane == 0)
				store_result<false>(acc, p, ep, sval, out);
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

template <bool kSmem>
cudaError_t launch_vwarp(Shape s, int64_t nrows, int64_t ncols, uint32_t nnz, const uint32_t *rowptr,
			 const uint32_t *colind, const float *sval, const float *A, int64_t lda, const float *B,
			 int64_t ldb, int64_t k, Epilogue ep, float *out, cudaStream_t stream, unsigned blocks,
			 size_t smem_bytes, int chunk)
{
	const float4 *A4 = reinterpret_cast<const float4 *>(A);
	const float4 *B4 = reinterpret_cast<const float4 *>(B);
	const int k4 = (int)(k / 4), smem_ld = smem_row_stride(k4, s.v);
#define STARFA_SDDMM_CASE(V, J)                                                                          \
	if (s.v == V && s.j == J) {                                                                      \
		if (kSmem) {                                                                             \
			cudaError_t e = cudaFuncSetAttribute(sddmm_vwarp<V, J, kSmem>,                  \
							     cudaFuncAttributeMaxDynamicSharedMemorySize, \
							     (int)smem_bytes);                                     \
			if (e != cudaSuccess)                                                            \
				return e;                                                                \
		}                                                                                        \
		sddmm_vwarp<V, J, kSmem><<<blocks, kThreads, smem_bytes, stream>>>(                     \
			nrows, ncols, nnz, chunk, rowptr, colind, sval, A4, lda / 4, B4, ldb / 4, k4, smem_ld, ep,     \
			out);                                                                            \
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


/* ------------------------------------------------------------------ row panels x column panels (SM-SM) */

constexpr int kTiledThreads = 1024; /* one block a multiprocessor: the rest of its memory is L1 */
constexpr int kTiledWarps = kTiledThreads / kWarp;
constexpr int kPieceMax = 64;       /* nonzeros a piece at most: its length fits 6 bits */
constexpr int kPieceRowBits = 26;   /* a piece's row, beside its length in one word */
constexpr uint32_t kPieceRowMask = (1u << kPieceRowBits) - 1u;
/* Default panel sizes: the A rows of a row panel take this much shared memory, the B rows of a
 * column panel this much of the L1 that is left (the column indices and outputs stream through
 * the rest). */
constexpr int64_t kTiledABytes = 96 * 1024, kTiledBBytes = 64 * 1024;

/* Pieces of the pattern: a piece starts at a row's first nonzero, where the column panel changes
 * and every kPieceMax nonzeros from the row's start, so it never spans two column panels (columns
 * are sorted within rows). A warp a row. Without `cursor` it counts each tile's pieces (tile =
 * row panel x column panel); with it, it writes each piece into its tile's range (in whatever
 * order the atomics give: the pieces of a tile are independent). A piece is (its first nonzero,
 * row | (length - 1) << kPieceRowBits). */
__global__ void tiling_pieces(int64_t nrows, const uint32_t *__restrict__ rowptr, const uint32_t *__restrict__ colind,
			      const uint32_t *__restrict__ order, uint32_t panel_rows, uint32_t panel_cols,
			      uint32_t col_panels, uint32_t *__restrict__ count, uint32_t *__restrict__ tile_nnz,
			      uint32_t *__restrict__ cursor, uint2 *__restrict__ pieces)
{
	const int lane = threadIdx.x % kWarp;
	const int64_t warps = (int64_t)gridDim.x * (blockDim.x / kWarp);
	for (int64_t slot = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / kWarp; slot < nrows; slot += warps) {
		const uint32_t row = __ldg(order + slot);
		const uint32_t rs = __ldg(rowptr + row), re = __ldg(rowptr + row + 1);
		const uint64_t tile0 = (uint64_t)(slot / panel_rows) * col_panels;
		const uint32_t local = (uint32_t)(slot % panel_rows);
		for (uint32_t base = rs; base < re; base += kWarp) {
			const uint32_t p = base + lane;
			if (p >= re)
				break;
			const uint32_t panel = __ldg(colind + p) / panel_cols;
			if ((p - rs) % kPieceMax != 0 && __ldg(colind + p - 1) / panel_cols == panel)
				continue;
			uint32_t q = p + 1;
			while (q < re && (q - rs) % kPieceMax != 0 && __ldg(colind + q) / panel_cols == panel)
				q++;
			if (!cursor) {
				atomicAdd(count + tile0 + panel, 1u);
				atomicAdd(tile_nnz + tile0 + panel, q - p);
				continue;
			}
			const uint32_t at = atomicAdd(cursor + tile0 + panel, 1u);
			pieces[at] = make_uint2(p, local | (q - p - 1) << kPieceRowBits);
		}
	}
}

/* Each row's length and its index, the keys and values of the sort by length. */
__global__ void row_lengths(int64_t nrows, const uint32_t *__restrict__ rowptr, uint32_t *__restrict__ len,
			    uint32_t *__restrict__ index)
{
	for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < nrows; r += (int64_t)gridDim.x * blockDim.x) {
		len[r] = __ldg(rowptr + r + 1) - __ldg(rowptr + r);
		index[r] = (uint32_t)r;
	}
}

/* One block a row panel: its A rows into shared memory, then its pieces, column panel by column
 * panel. A warp takes 32 pieces at a time (one a lane), lays their nonzeros end to end and deals them
 * to its gpw groups in turn (V lanes, J float4 a lane, as VWARP's), so every group has work whatever
 * the pieces' lengths; a group loads a piece's A row from shared memory into registers when it
 * reaches it and reads B rows through L1, where the column panel's rows stay while the block sweeps
 * it. */
template <int V, int J>
__global__ void __launch_bounds__(kTiledThreads, 1)
	sddmm_tiled(int64_t nrows, int panel_rows, uint32_t col_panels, const uint32_t *__restrict__ order,
		    const uint32_t *__restrict__ tile_start,
		    const uint2 *__restrict__ pieces, const uint32_t *__restrict__ colind, const float *__restrict__ sval,
		    const float4 *__restrict__ A, int64_t lda4, const float4 *__restrict__ B, int64_t ldb4, int k4,
		    const uint4 *__restrict__ units, Epilogue ep, float *__restrict__ out)
{
	constexpr int gpw = kWarp / V;
	extern __shared__ float4 a_rows[];
	__shared__ uint32_t piece_first[kTiledWarps][kWarp], piece_row[kTiledWarps][kWarp],
		piece_end[kTiledWarps][kWarp];
	const uint4 unit = __ldg(units + blockIdx.x); /* row panel, its tiles [y, z) */
	const int64_t r0 = (int64_t)unit.x * panel_rows;
	const int rows = (int)min((int64_t)panel_rows, nrows - r0);
	for (int i = threadIdx.x; i < rows * k4; i += kTiledThreads) {
		const int r = i / k4, c = i - r * k4;
		a_rows[i] = __ldcs(A + (int64_t)__ldg(order + r0 + r) * lda4 + c);
	}
	__syncthreads();
	const uint32_t first = __ldg(tile_start + (uint64_t)unit.x * col_panels + unit.y),
		       last = __ldg(tile_start + (uint64_t)unit.x * col_panels + unit.z);
	const int warp = threadIdx.x / kWarp, warp_lane = threadIdx.x % kWarp;
	const int lane = threadIdx.x % V, group = warp_lane / V;
	const unsigned lanes = group_lanes<V>(group);
	uint32_t *const my_first = piece_first[warp], *const my_row = piece_row[warp], *const my_end = piece_end[warp];
	for (uint32_t q0 = first + (uint32_t)warp * kWarp; q0 < last; q0 += kTiledWarps * kWarp) {
		uint32_t len = 0, begin = 0, row = 0;
		if (q0 + warp_lane < last) {
			const uint2 pc = __ldg(pieces + q0 + warp_lane);
			begin = pc.x;
			row = pc.y & kPieceRowMask;
			len = (pc.y >> kPieceRowBits) + 1;
		}
		uint32_t end = len; /* the pieces' nonzeros end to end: inclusive prefix sums */
#pragma unroll
		for (int o = 1; o < kWarp; o *= 2) {
			const uint32_t t = __shfl_up_sync(0xffffffffu, end, o);
			if (warp_lane >= o)
				end += t;
		}
		my_first[warp_lane] = begin;
		my_row[warp_lane] = row;
		my_end[warp_lane] = end;
		const uint32_t total = __shfl_sync(0xffffffffu, end, kWarp - 1);
		__syncwarp();
		int piece = -1, loaded = -1;
		uint32_t piece_start = 0, piece_stop = 0;
		float4 a[J];
		for (uint32_t t = group; t < total; t += gpw) {
			while (t >= piece_stop) {
				piece++;
				piece_start = piece_stop;
				piece_stop = my_end[piece];
			}
			if (piece != loaded) {
				const float4 *arow = a_rows + (int64_t)my_row[piece] * k4;
#pragma unroll
				for (int j = 0; j < J; j++)
					a[j] = lane + j * V < k4 ? arow[lane + j * V] : make_float4(0, 0, 0, 0);
				loaded = piece;
			}
			const uint32_t p = my_first[piece] + (t - piece_start);
			const float acc = group_dot<V, J, false>(a, B, (int64_t)__ldg(colind + p) * ldb4, lane, k4, lanes);
			if (lane == 0)
				store_result<false>(acc, p, ep, sval, out);
		}
		__syncwarp(); /* the lists are read out before the next round overwrites them */
	}
}

cudaError_t launch_tiled(Shape s, int64_t nrows, int panel_rows, uint32_t col_panels, unsigned blocks,
			 const uint32_t *order, const uint32_t *tile_start, const uint4 *units, const uint2 *pieces, const uint32_t *colind, const float *sval,
			 const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k, Epilogue ep, float *out,
			 cudaStream_t stream)
{
	const float4 *A4 = reinterpret_cast<const float4 *>(A);
	const float4 *B4 = reinterpret_cast<const float4 *>(B);
	const int k4 = (int)(k / 4);
	const size_t smem = (size_t)panel_rows * k4 * sizeof(float4);
#define STARFA_SDDMM_CASE(V, J)                                                                              \
	if (s.v == V && s.j == J) {                                                                          \
		cudaError_t e = cudaFuncSetAttribute(sddmm_tiled<V, J>, cudaFuncAttributeMaxDynamicSharedMemorySize, \
						     (int)smem);                                                 \
		if (e != cudaSuccess)                                                                        \
			return e;                                                                            \
		sddmm_tiled<V, J><<<blocks, kTiledThreads, smem, stream>>>(nrows, panel_rows, col_panels, order, tile_start, \
									   pieces, colind, sval, A4, lda / 4, B4,    \
									   ldb / 4, k4, units, ep, out);             \
		return cudaGetLastError();                                                                   \
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

struct starfa_cuda_sddmm_tiling {
	int64_t nrows, ncols, nnz, k_max, panel_rows, panel_cols, row_panels, col_panels, npieces;
	uint32_t *order;      /* nrows: the rows by length, longest first (row panels are cut from this order) */
	uint32_t *tile_start; /* row_panels * col_panels + 1: each tile's first piece */
	uint4 *units;         /* nunits: a block's work, (row panel, first tile, end tile), about equal nonzeros */
	int64_t nunits;
	uint2 *pieces;
};

extern "C" void starfa_cuda_sddmm_tiling_destroy(starfa_cuda_sddmm_tiling *t)
{
	if (!t)
		return;
	cudaFree(t->order);
	cudaFree(t->tile_start);
	cudaFree(t->units);
	cudaFree(t->pieces);
	free(t);
}

extern "C" void starfa_cuda_sddmm_tiling_shape(const starfa_cuda_sddmm_tiling *t, int64_t *panel_rows,
					       int64_t *panel_cols, int64_t *pieces)
{
	*panel_rows = t->panel_rows;
	*panel_cols = t->panel_cols;
	*pieces = t->npieces;
}

extern "C" cudaError_t starfa_cuda_sddmm_tiling_create(int64_t nrows, int64_t ncols, int64_t nnz, const uint32_t *rowptr,
						       const uint32_t *colind, int64_t k_max, int64_t panel_rows,
						       int64_t panel_cols, cudaStream_t stream,
						       starfa_cuda_sddmm_tiling **out)
{
	*out = nullptr;
	if (nrows <= 0 || ncols <= 0 || nnz < 0 || nnz > (int64_t)UINT32_MAX || nrows > (int64_t)kPieceRowMask ||
	    ncols > (int64_t)UINT32_MAX || k_max <= 0 || k_max % 4 != 0 || vwarp_shape(k_max / 4).v == 0 ||
	    panel_rows < 0 || panel_cols < 0)
		return cudaErrorInvalidValue;
	DeviceLimits dev;
	cudaError_t err = device_limits(&dev);
	if (err != cudaSuccess)
		return err;
	const int64_t row_bytes = k_max * (int64_t)sizeof(float);
	if (panel_rows == 0)
		panel_rows = kTiledABytes / row_bytes;
	if (panel_cols == 0)
		panel_cols = kTiledBBytes / row_bytes;
	const size_t smem = (size_t)panel_rows * (size_t)row_bytes + sizeof(uint32_t) * 3 * kTiledThreads;
	if (panel_rows < 1 || panel_cols < 1 || smem > (size_t)dev.smem_per_block_optin)
		return cudaErrorInvalidValue;
	if (panel_cols > ncols)
		panel_cols = ncols;
	starfa_cuda_sddmm_tiling *t = (starfa_cuda_sddmm_tiling *)calloc(1, sizeof *t);
	if (!t)
		return cudaErrorMemoryAllocation;
	t->nrows = nrows;
	t->ncols = ncols;
	t->nnz = nnz;
	t->k_max = k_max;
	t->panel_rows = panel_rows;
	t->panel_cols = panel_cols;
	t->row_panels = (nrows + panel_rows - 1) / panel_rows;
	t->col_panels = (ncols + panel_cols - 1) / panel_cols;
	const int64_t tiles = t->row_panels * t->col_panels;
	uint32_t *count = nullptr, *cursor = nullptr, *tile_nnz = nullptr;
	uint4 *units = nullptr;
	void *scratch = nullptr;
	size_t scratch_bytes = 0;
	uint32_t total = 0;
	const int64_t warps_needed = nrows;
	const unsigned blocks = (unsigned)((warps_needed + 7) / 8 < 65536 ? (warps_needed + 7) / 8 : 65536);
	if (tiles >= (int64_t)INT32_MAX) {
		err = cudaErrorInvalidValue;
		goto fail;
	}
	{ /* the rows by length, longest first (or as they are, STARFA_SDDMM_TILE_SORT=0) */
		uint32_t *len = nullptr, *len_sorted = nullptr, *index = nullptr;
		void *sort_scratch = nullptr;
		size_t sort_bytes = 0;
		const char *env = getenv("STARFA_SDDMM_TILE_SORT");
		const bool sort = !(env && env[0] == '0');
		const unsigned lblocks = (unsigned)((nrows + 255) / 256 < 65536 ? (nrows + 255) / 256 : 65536);
		if ((err = cudaMalloc(&t->order, sizeof(uint32_t) * (size_t)nrows)) == cudaSuccess &&
		    (err = cudaMalloc(&len, sizeof(uint32_t) * (size_t)nrows)) == cudaSuccess &&
		    (err = cudaMalloc(&len_sorted, sizeof(uint32_t) * (size_t)nrows)) == cudaSuccess &&
		    (err = cudaMalloc(&index, sizeof(uint32_t) * (size_t)nrows)) == cudaSuccess) {
			row_lengths<<<lblocks, 256, 0, stream>>>(nrows, rowptr, len, sort ? index : t->order);
			if ((err = cudaGetLastError()) == cudaSuccess && sort &&
			    (err = cub::DeviceRadixSort::SortPairsDescending(nullptr, sort_bytes, len, len_sorted, index,
									     t->order, (int)nrows, 0, 32, stream)) ==
				    cudaSuccess &&
			    (err = cudaMalloc(&sort_scratch, sort_bytes)) == cudaSuccess)
				err = cub::DeviceRadixSort::SortPairsDescending(sort_scratch, sort_bytes, len, len_sorted, index,
										 t->order, (int)nrows, 0, 32, stream);
			if (err == cudaSuccess)
				err = cudaStreamSynchronize(stream);
		}
		cudaFree(len);
		cudaFree(len_sorted);
		cudaFree(index);
		cudaFree(sort_scratch);
		if (err != cudaSuccess)
			goto fail;
	}
	if ((err = cudaMalloc(&count, sizeof(uint32_t) * (size_t)(2 * tiles + 1))) != cudaSuccess ||
	    (err = cudaMalloc(&t->tile_start, sizeof(uint32_t) * (size_t)(tiles + 1))) != cudaSuccess ||
	    (err = cudaMemsetAsync(count, 0, sizeof(uint32_t) * (size_t)(2 * tiles + 1), stream)) != cudaSuccess)
		goto fail;
	tiling_pieces<<<blocks, 256, 0, stream>>>(nrows, rowptr, colind, t->order, (uint32_t)panel_rows, (uint32_t)panel_cols,
						  (uint32_t)t->col_panels, count, count + tiles + 1, nullptr, nullptr);
	/* the blocks' work: each row panel's tiles in runs of about nnz / (8 blocks a multiprocessor) */
	tile_nnz = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)tiles);
	units = (uint4 *)malloc(sizeof(uint4) * (size_t)tiles);
	if (!tile_nnz || !units) {
		err = cudaErrorMemoryAllocation;
		goto fail;
	}
	if ((err = cudaGetLastError()) != cudaSuccess ||
	    (err = cudaMemcpyAsync(tile_nnz, count + tiles + 1, sizeof(uint32_t) * (size_t)tiles, cudaMemcpyDeviceToHost,
				   stream)) != cudaSuccess ||
	    (err = cudaStreamSynchronize(stream)) != cudaSuccess)
		goto fail;
	{
		const char *env = getenv("STARFA_SDDMM_TILE_UNIT");
		int64_t target = env ? atoll(env) : nnz / ((int64_t)dev.sms * 8);
		if (target < 1)
			target = 1;
		int64_t n = 0;
		for (int64_t rp = 0; rp < t->row_panels; rp++) {
			int64_t lo = 0, acc = 0;
			for (int64_t c = 0; c < t->col_panels; c++) {
				acc += tile_nnz[rp * t->col_panels + c];
				if (acc >= target || c == t->col_panels - 1) {
					if (acc > 0)
						units[n++] = make_uint4((uint32_t)rp, (uint32_t)lo, (uint32_t)(c + 1), 0u);
					lo = c + 1;
					acc = 0;
				}
			}
		}
		if (n == 0)
			units[n++] = make_uint4(0u, 0u, 0u, 0u);
		t->nunits = n;
		if ((err = cudaMalloc(&t->units, sizeof(uint4) * (size_t)n)) != cudaSuccess ||
		    (err = cudaMemcpy(t->units, units, sizeof(uint4) * (size_t)n, cudaMemcpyHostToDevice)) != cudaSuccess)
			goto fail;
	}
	if (
	    (err = cub::DeviceScan::ExclusiveSum(nullptr, scratch_bytes, count, t->tile_start, (int)(tiles + 1),
						 stream)) != cudaSuccess ||
	    (err = cudaMalloc(&scratch, scratch_bytes)) != cudaSuccess ||
	    (err = cub::DeviceScan::ExclusiveSum(scratch, scratch_bytes, count, t->tile_start, (int)(tiles + 1),
						 stream)) != cudaSuccess ||
	    (err = cudaMemcpyAsync(&total, t->tile_start + tiles, sizeof total, cudaMemcpyDeviceToHost, stream)) !=
		    cudaSuccess ||
	    (err = cudaStreamSynchronize(stream)) != cudaSuccess)
		goto fail;
	t->npieces = total;
	cursor = count; /* the counts are spent: the cursors start at each tile's first piece */
	if ((err = cudaMemcpyAsync(cursor, t->tile_start, sizeof(uint32_t) * (size_t)(tiles + 1),
				   cudaMemcpyDeviceToDevice, stream)) != cudaSuccess ||
	    (err = cudaMalloc(&t->pieces, sizeof(uint2) * (size_t)(total > 0 ? total : 1))) != cudaSuccess)
		goto fail;
	tiling_pieces<<<blocks, 256, 0, stream>>>(nrows, rowptr, colind, t->order, (uint32_t)panel_rows, (uint32_t)panel_cols,
						  (uint32_t)t->col_panels, nullptr, nullptr, cursor, t->pieces);
	if ((err = cudaGetLastError()) != cudaSuccess || (err = cudaStreamSynchronize(stream)) != cudaSuccess)
		goto fail;
	cudaFree(count);
	cudaFree(scratch);
	free(tile_nnz);
	free(units);
	*out = t;
	return cudaSuccess;
fail:
	cudaFree(count);
	cudaFree(scratch);
	free(tile_nnz);
	free(units);
	starfa_cuda_sddmm_tiling_destroy(t);
	return err;
}

extern "C" cudaError_t starfa_cuda_sddmm_tiled_run(const starfa_cuda_sddmm_tiling *t, const uint32_t *colind,
						   const float *sval, const float *A, int64_t lda, const float *B,
						   int64_t ldb, int64_t k, int scaled, float alpha, float beta, float *out,
						   cudaStream_t stream)
{
	if (!t || k <= 0 || !vectorizable(A, lda, B, ldb, k))
		return cudaErrorInvalidValue;
	if (t->nnz == 0)
		return cudaSuccess;
	const Epilogue ep = {(scaled ? kScale : 0) | (beta != 0.0f ? kAccumulate : 0), alpha, beta};
	/* k-slices of at most k_max columns, as VWARP_SLICED's passes: the first writes (or adds
	 * beta out), the later ones add */
	for (int64_t k0 = 0; k0 < k; k0 += t->k_max) {
		const int64_t ks = k - k0 < t->k_max ? k - k0 : t->k_max;
		const Epilogue slice_ep = {(ep.mode & kScale) | (k0 > 0 || beta != 0.0f ? kAccumulate : 0), alpha,
					   k0 > 0 ? 1.0f : beta};
		cudaError_t err = launch_tiled(vwarp_shape(ks / 4), t->nrows, (int)t->panel_rows,
					       (uint32_t)t->col_panels, (unsigned)t->nunits, t->order, t->tile_start, t->units,
					       t->pieces, colind, sval, A + k0, lda, B + k0, ldb, ks, slice_ep, out,
					       stream);
		if (err != cudaSuccess)
			return err;
	}
	return cudaSuccess;
}
