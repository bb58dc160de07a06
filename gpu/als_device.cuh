/* The device code that the ALS kernels on CUDA share (gpu/hermitian.cu, gpu/solve.cu, gpu/rowsolve.cu):
 * the Gram accumulation on the tensor cores and the per-row solves. Internal: include from .cu files only
 * (everything here has internal linkage, one copy per kernel file).
 *
 * One thread block per row (or per segment of a long row). The block gathers the row's theta_c in
 * chunks of kChunk entries (the next chunk's loads in flight while the tensor cores work on this one)
 * and sums the Gram matrix sum w theta_c theta_c^T with mma.sync m16n8k8 TF32: the k x k sum, padded
 * to kp = 16·nb, is nb x nb blocks of 16 x 16, of which the nb (nb + 1) / 2 upper ones are computed
 * (the matrix is symmetric), spread over the block's warps and held in registers across the chunks
 * (cuMF's register-resident accumulation, with mma instead of FFMA). Each block is A·B over the
 * chunk: A = the chunk transposed, B = the chunk, weighted for implicit feedback, both stored in
 * shared memory in the order the fragments are read (one vector load per lane). float32 accuracy
 * comes from 3 products: x = hi + lo with hi, lo in TF32 (m16n8k8) or in FP16 on a per-row power-of-two
 * scale (m16n8k16, twice the entries an instruction), and hi·hi + hi·lo + lo·hi. The fused kernel
 * (gpu/rowsolve.cu) puts each entry's target in B's column k, so the same product gives b_u.
 *
 * A system held in shared memory is solved by the whole block at once: a Cholesky factorization (the
 * forward solve carried along as an extra column) and the back substitution, blocked by panels of 16 with
 * a lookahead (solve_cholesky), or warm-started CG with the system resident (each step reads it from
 * shared memory only); or by one warp, its upper triangle packed (warp_cholesky: the same panels and
 * bits, many systems a multiprocessor). */
#ifndef STARFA_GPU_ALS_DEVICE_CUH
#define STARFA_GPU_ALS_DEVICE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/als_common.h"

#include "cpu/solve.h" /* the status words */

#include <cfloat>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 48;        /* entries gathered per pass */
constexpr int kPer = kChunk / kWarps; /* of them per warp */
constexpr int kMaxKp = 208;       /* STARFA_CUDA_ALS_MAX_K + 1 (the fused kernel's b column), rounded up to 16 */
static_assert(kMaxKp >= STARFA_CUDA_ALS_MAX_K + 1 && kMaxKp % 16 == 0, "kMaxKp covers the largest k");
static_assert(kChunk % 8 == 0 && kChunk % kWarps == 0 && kPer <= 32, "chunks are whole mma k-steps and warp rounds");

__host__ __device__ inline int64_t padded(int64_t k)
{
	return (k + 15) / 16 * 16;
}

/* The shared memory of a block, in this order (every part 16-byte aligned):
 *   U   max(kp x lda, 4 x kChunk x kp) floats: the system, or the gathered chunk (the A operand) and
 *       its weighted copy (the B operand), each split into TF32 high and low parts
 *   vec 5 x kp floats: b, x, r, p, q
 *   part kWarps x kp floats, each warp's partial product of a matvec: in U after the system where the
 *       chunks leave room, else after vec; none without chunks (the stored systems' solve keeps its
 *       occupancy and runs the one-thread-a-row product)
 *   red 2 x kWarps floats (block_sum's two buffers), 4 flags (kFlagLast, kFlagBad), with chunks
 *       3 x kWarps words (each warp's largest magnitudes of a chunk under 3xFP16: gram_rows) and 2 x kChunk
 *       words (the next chunk's column indices and values, copied ahead: entry_prefetch), then the
 *       tiles' starts and prefix sums (2 x (MAX_TILES + 1) uint32)  */
struct Layout {
	int kp, lda;
	size_t u, vec, part, red, rs, pre, bytes;
	bool has_part;
};

__host__ __device__ inline Layout layout(int kp, bool chunks_too = true, size_t u_floats = 0)
{
	Layout L;
	L.kp = kp;
	L.lda = kp + 4; /* a multiple of 4 (16-byte rows), and rows 16 bytes off one another's banks */
	/* u_floats > 0 (a multiple of 4): U of that size instead, no chunks (the short rows' kernel) */
	size_t sys = u_floats ? u_floats : (size_t)kp * L.lda, chunks = chunks_too && !u_floats ? 4 * (size_t)kChunk * kp : 0;
	L.u = 0;
	L.vec = L.u + (sys > chunks ? sys : chunks) * sizeof(float);
	L.red = L.vec + 5 * (size_t)kp * sizeof(float);
	const size_t part = (size_t)kWarps * kp;
	L.has_part = chunks_too && !u_floats;
	L.part = L.u + sys * sizeof(float);
	if (chunks_too && chunks < sys + part) {
		L.part = L.red;
		L.red += part * sizeof(float);
	}
	L.rs = L.red + (2 * kWarps + 4 + (L.has_part ? 3 * kWarps + 2 * kChunk : 0)) * sizeof(float);
	L.pre = L.rs + (STARFA_CUDA_ROWSOLVE_MAX_TILES + 1) * sizeof(uint32_t);
	L.bytes = L.pre + (STARFA_CUDA_ROWSOLVE_MAX_TILES + 1) * sizeof(uint32_t);
	return L;
}

struct Shared {
	float *U, *b, *x, *r, *p, *q, *part;
	float *red;
	uint32_t *mx, *ent, *rs, *pre;
	int kp, lda;
};

__device__ inline Shared carve(unsigned char *base, int kp, bool chunks_too = true, size_t u_floats = 0)
{
	Layout L = layout(kp, chunks_too, u_floats);
	Shared s;
	s.kp = kp;
	s.lda = L.lda;
	s.U = (float *)(base + L.u);
	s.b = (float *)(base + L.vec);
	s.x = s.b + kp;
	s.r = s.x + kp;
	s.p = s.r + kp;
	s.q = s.p + kp;
	s.part = L.has_part ? (float *)(base + L.part) : nullptr;
	s.red = (float *)(base + L.red);
	s.mx = L.has_part ? (uint32_t *)(s.red + 2 * kWarps + 4) : nullptr;
	s.ent = L.has_part ? s.mx + 3 * kWarps : nullptr;
	s.rs = (uint32_t *)(base + L.rs);
	s.pre = (uint32_t *)(base + L.pre);
	return s;
}

/* Where a row's entries come from: its stretch of each tile, in tile order. */
struct RowSource {
	int ntiles;
	const starfa_cuda_rowsolve_tile *tiles;
};

/* What a row's entries mean. */
struct Weights {
	int mode; /* 0: explicit (w 1, target r - mu - offset); 1: implicit (w alpha r, target 1 + w);
		     2: hermitian only, w = alpha r; 3: hermitian only, w = 1 */
	float alpha, mu;
};

/* A warp's share of a Gram sum: per 16 x 16 block (bi, bj) it owns, the two m16n8 halves' accumulators
 * in mma.sync's C layout. */
template <int FPW> struct Acc {
	float c[FPW][2][4];
};

/* x rounded to TF32 (nearest, ties away from zero), as bits: the half-ulp add carries into the kept
 * bits, the mask drops the rest. Bit for bit what cvt.rna.tf32.f32 gives for finite x, in two integer
 * instructions (the conversion itself compiles to a longer sequence on sm_90). A NaN whose mantissa's
 * kept bits are all ones (the device's own NaN, 0x7fffffff, among them) carries into the sign and comes
 * out as a zero: tf32_high keeps it. */
__device__ inline uint32_t tf32_bits(float x)
{
	return (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
}

/* tf32_bits for a term's high part, a NaN kept as it is (the tensor cores read its top 19 bits, a NaN):
 * then hi·hi is NaN and the sum with it, whatever the low part became. Two instructions more. */
__device__ inline uint32_t tf32_high(float x)
{
	const uint32_t r = tf32_bits(x);
	return x != x ? __float_as_uint(x) : r;
}

/* The parts a Gram sum's terms are split into (from the starfa_cuda_gram_precision). */
enum PartKind { kPartTF32, kPartBF16, kPartFP16 };

__host__ __device__ constexpr int part_kind(int prec)
{
	return prec == STARFA_CUDA_GRAM_3XBF16 ? kPartBF16 : prec == STARFA_CUDA_GRAM_3XFP16 ? kPartFP16 : kPartTF32;
}

/* x split into TF32 parts: its high part at word `slot` of W and, where PRECISE, its low part lo words on. */
template <bool PRECISE> __device__ inline void store_tf32(uint32_t *W, int slot, int lo, float x)
{
	const uint32_t h = tf32_high(x);
	W[slot] = h;
	if (PRECISE)
		W[slot + lo] = tf32_bits(x - __uint_as_float(h));
}

/* The 32 bits of a pair of 16-bit values. */
template <typename T> __device__ inline uint32_t pair_bits(const T &h)
{
	static_assert(sizeof(T) == 4, "two 16-bit halves");
	uint32_t u;
	memcpy(&u, &h, sizeof u);
	return u;
}

/* Under BF16 or FP16 parts, the words of two entries' x0 and x1 (low and high half), rounded to nearest
 * even by the hardware's paired conversions (which keep a NaN a NaN, where tf32_bits's half-ulp add
 * would carry a full mantissa, such as the device's own 0x7fffffff, into the sign): the high parts at
 * word `slot` of W, the low parts lo words on, as store_tf32 places TF32's. One conversion a part for
 * both entries, and two 32-bit stores for both where each entry's parts took two 16-bit stores, which
 * met two to a bank. FP16 parts are of x times `scale` (a power of two), so that they stay in FP16's
 * range. */
template <int KIND>
__device__ inline void store_pair(uint32_t *W, int slot, int lo, float x0, float x1, float scale)
{
	static_assert(KIND != kPartTF32, "pairs of 16-bit parts");
	if (KIND == kPartBF16) {
		const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
		const float2 hf = __bfloat1622float2(h);
		const __nv_bfloat162 l = __floats2bfloat162_rn(x0 - hf.x, x1 - hf.y);
		W[slot] = pair_bits(h);
		W[slot + lo] = pair_bits(l);
	} else {
		const __half2 h = __floats2half2_rn(x0 * scale, x1 * scale);
		const float2 hf = __half22float2(h);
		const __half2 l = __floats2half2_rn(x0 * scale - hf.x, x1 * scale - hf.y);
		W[slot] = pair_bits(h);
		W[slot + lo] = pair_bits(l);
	}
}

/* d += a b on the tensor cores, float32 accumulation: m16n8k8 on TF32 inputs, or m16n8k16 on BF16 or FP16
 * pairs (the same registers: a.x holds A[g][2t], A[g][2t+1] where TF32's holds A[g][t]). */
template <int KIND> __device__ inline void mma(float (&d)[4], const uint4 &a, const uint2 &b)
{
	if (KIND == kPartBF16)
		asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
			     "{%8,%9}, {%0,%1,%2,%3};\n"
			     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
			     : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y));
	else if (KIND == kPartFP16)
		asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
			     "{%8,%9}, {%0,%1,%2,%3};\n"
			     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
			     : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y));
	else
		asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
			     "{%8,%9}, {%0,%1,%2,%3};\n"
			     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
			     : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y));
}

/* The chunk in shared memory, in the order the mma.sync fragments are read: for each k-step (8 entries)
 * and 16-row block I of the A operand (the chunk transposed), 32 lanes x 4 words of TF32 high parts
 * (a0..a3 of that lane: one 16-byte load), then the same for the low parts; for each k-step and
 * 8-column block J of the B operand (the chunk, weighted), 32 lanes x 2 words of high parts, then of
 * low parts. A fragment's low part is thus a fixed 512 (A) or 256 (B) bytes after its high part: one
 * address for both loads. Lane slots are XOR-swizzled so that the stores of a gathered row (lanes along
 * k) meet at most two to a bank, while each lane's load stays one aligned vector. Element (e, d) of the
 * chunk, high part (word index; the A part first, the B part after it):
 *
 * Under 3xBF16 (and 3xFP16) a k-step is 16 entries and a word holds entries 2i and 2i + 1 (low and high
 * half) where TF32's holds entry i: m16n8k16's fragments are m16n8k8's with each TF32 element replaced by
 * a pair of BF16 ones along k. So the same slots serve, at entry e >> 1, half e & 1. */
constexpr int kLoA = 128, kLoB = 64; /* words from a high part to its low part */

__device__ inline int a_slot(int e, int d, int nb)
{
	const int kk = e & 7, r = d & 15, lane = (r & 7) * 4 + (kk & 3), slot = lane ^ ((lane >> 3) & 3);
	return (((e >> 3) * nb + (d >> 4)) << 8) + (slot << 2) + ((kk >> 2) << 1) + (r >> 3);
}

__device__ inline int b_slot(int e, int d, int nb2)
{
	const int kk = e & 7, J = d >> 3, lane = (d & 7) * 4 + (kk & 3);
	const int slot = lane ^ (((lane >> 4) & 1) << 1) ^ (J & 3);
	return (((e >> 3) * nb2 + J) << 7) + (slot << 1) + (kk >> 2);
}

/* The upper fragments (bi <= bj) in the order rows 0, nb-1, 1, nb-2, ... each left to right, cut into
 * equal consecutive slices, one per warp: a warp's fragments then span one to three block rows, so it
 * loads the chunk's A fragment of a row once per k-step for all of that row's fragments it has, and the
 * slices balance (row pairs have nb + 1 fragments). Returns whether the warp has an i-th fragment. */
__device__ inline bool warp_fragment(int i, int nb, int *bi, int *bj)
{
	const int nfrag = nb * (nb + 1) / 2, per = (nfrag + kWarps - 1) / kWarps;
	int p = (threadIdx.x >> 5) * per + i;
	if (i >= per || p >= nfrag)
		return false;
	for (int t = 0; t < nb; t++) {
		const int r = t % 2 == 0 ? t / 2 : nb - 1 - t / 2, len = nb - r;
		if (p < len) {
			*bi = r;
			*bj = r + p;
			return true;
		}
		p -= len;
	}
	return false;
}

/* Lane j < kPer of each warp describes one entry of a chunk: its theta row (NULL past the row's end),
 * weight and target. Which entry: entry_load. */
struct EntryInfo {
	const float *row;
	float w, t;
};

/* An entry's column index and value as loaded, with its source tile (-1: past the row's end); entry_use
 * makes an EntryInfo of it. Apart, so that the Gram kernel can load a chunk's entries two chunks ahead
 * (entry_prefetch) and use them a chunk later. */
struct EntryLoad {
	uint32_t c;
	float v;
	int tile;
};

/* The source tile of entry g of the row (in the sources' order): the last tile whose prefix is <= g. */
__device__ inline int entry_tile(const Shared &s, const RowSource &src, uint32_t g)
{
	int lo = 0, hi = src.ntiles - 1;
	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;
		if (s.pre[mid] <= g)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/* Entry g of the row: its tile (*lo) and its position in that tile's colind and val. */
__device__ inline uint32_t entry_position(const Shared &s, const RowSource &src, uint32_t g, int *lo)
{
	*lo = entry_tile(s, src, g);
	return s.rs[*lo] + (g - s.pre[*lo]);
}

/* Entry g of the row: its tile, column index and value. */
__device__ inline EntryLoad entry_load(const Shared &s, const RowSource &src, uint32_t g)
{
	int lo;
	const uint32_t p = entry_position(s, src, g, &lo);
	const starfa_cuda_rowsolve_tile &tl = src.tiles[lo];
	return EntryLoad{__ldg(tl.colind + p), __ldg(tl.val + p), lo};
}

/* A loaded entry's theta row, weight and target. */
__device__ inline EntryInfo entry_use(const RowSource &src, const Weights &wt, const EntryLoad &l)
{
	EntryInfo e = {nullptr, 0.0f, 0.0f};
	if (l.tile < 0)
		return e;
	const starfa_cuda_rowsolve_tile &tl = src.tiles[l.tile];
	const uint32_t c = l.c;
	const float v = l.v;
	e.row = tl.theta + (int64_t)c * tl.ld;
	switch (wt.mode) {
	case 0:
		e.w = 1.0f;
		e.t = v - wt.mu - (tl.offset ? __ldg(tl.offset + (int64_t)c * tl.ld) : 0.0f);
		break;
	case 1:
		e.w = wt.alpha * v;
		e.t = 1.0f + e.w;
		break;
	case 2: e.w = wt.alpha * v; break;
	default: e.w = 1.0f; break;
	}
	return e;
}

/* Entry g of the row (in the sources' order): its theta row, weight and target. */
__device__ inline EntryInfo entry_at(const Shared &s, const RowSource &src, const Weights &wt, uint32_t g)
{
	return entry_use(src, wt, entry_load(s, src, g));
}

/* Lane j < kPer's entry of the chunk from g0. With TF32 parts (PAIRS false), entry warp + j kWarps: k-step
 * j (8 entries) at position warp. With 16-bit parts a k-step is 16 entries and a word of the operands holds
 * two, 2i and 2i + 1: warp w takes pair w of each k-step, entries 16 (j >> 1) + 2 w + (j & 1), so that a
 * thread holds both halves of the words it stores. */
template <bool PAIRS> __device__ inline uint32_t chunk_entry(uint32_t g0)
{
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	return g0 + (PAIRS ? 16 * (lane >> 1) + 2 * warp + (lane & 1) : warp + lane * kWarps);
}

/* Copies from global to shared memory that need no registers (cp.async): 4 bytes, or 16 (both addresses
 * 16-byte aligned); cp_async_wait_all waits for the thread's copies. */
__device__ inline void cp_async4(void *dst, const void *src)
{
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src)
		     : "memory");
}

__device__ inline void cp_async16(void *dst, const void *src)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src)
		     : "memory");
}

__device__ inline void cp_async_wait_all()
{
	asm volatile("cp.async.wait_all;\n" ::: "memory");
}

/* Lane `lane`'s two words of s.ent: an entry's column index and value, copied ahead. */
__device__ inline uint32_t *entry_slot(const Shared &s, int lane)
{
	return s.ent + 2 * ((threadIdx.x >> 5) * kPer + lane);
}

template <bool PAIRS>
__device__ inline EntryLoad entry_load_chunk(const Shared &s, const RowSource &src, uint32_t g0, uint32_t end)
{
	const uint32_t g = chunk_entry<PAIRS>(g0);
	if ((threadIdx.x & 31) >= kPer || g >= end)
		return EntryLoad{0u, 0.0f, -1};
	return entry_load(s, src, g);
}

/* entry_load_chunk's column index and value copied into the thread's two words of s.ent by cp.async,
 * without registers: loads into registers two chunks ahead tied registers the sums need, and the
 * compiler then waited for them before the sums (a copy at a branch's join). entry_prefetched reads
 * them back. */
template <bool PAIRS>
__device__ inline void entry_prefetch(const Shared &s, const RowSource &src, uint32_t g0, uint32_t end)
{
	const int lane = threadIdx.x & 31;
	const uint32_t g = chunk_entry<PAIRS>(g0);
	if (lane >= kPer || g >= end)
		return;
	int lo;
	const uint32_t p = entry_position(s, src, g, &lo);
	const starfa_cuda_rowsolve_tile &tl = src.tiles[lo];
	uint32_t *const slot = entry_slot(s, lane);
	cp_async4(slot, tl.colind + p);
	cp_async4(slot + 1, tl.val + p);
}

template <bool PAIRS>
__device__ inline EntryLoad entry_prefetched(const Shared &s, const RowSource &src, uint32_t g0, uint32_t end)
{
	const int lane = threadIdx.x & 31;
	const uint32_t g = chunk_entry<PAIRS>(g0);
	if (lane >= kPer || g >= end)
		return EntryLoad{0u, 0.0f, -1};
	cp_async_wait_all();
	const uint32_t *const slot = entry_slot(s, lane);
	return EntryLoad{slot[0], __uint_as_float(slot[1]), entry_tile(s, src, g)};
}

/* The warp's kPer theta rows of a chunk into registers (lanes across k). */
template <int LANES> __device__ inline void gather(float (&v)[kPer][LANES], const EntryInfo &e, int64_t k)
{
	const int lane = threadIdx.x & 31;
#pragma unroll
	for (int j = 0; j < kPer; j++) {
		const float *row = (const float *)__shfl_sync(0xffffffffu, (unsigned long long)e.row, j);
#pragma unroll
		for (int l = 0; l < LANES; l++) {
			const int d = lane + 32 * l;
			v[j][l] = row && d < k ? __ldg(row + d) : 0.0f;
		}
	}
}

/* The exponent of the power of two that brings magnitude bits m (a non-negative float's) into [2^14, 2^15),
 * within [-63, 63], so that the product of two such powers, or of their inverses, is a normal float (zero,
 * subnormal, infinite and NaN magnitudes get an end of that range). */
constexpr int kMaxScaleExp = 63;
__device__ inline int fp16_exponent(uint32_t m)
{
	const int e = 14 - ((int)(m >> 23) - 127);
	return e < -kMaxScaleExp ? -kMaxScaleExp : e > kMaxScaleExp ? kMaxScaleExp : e;
}

/* 2^e as a float, 0 below 2^-126 (e <= 127). */
__device__ inline float pow2(int e)
{
	return e < -126 ? 0.0f : __uint_as_float((uint32_t)(127 + e) << 23);
}

/* Under 3xFP16, the warp's largest magnitudes in a gathered chunk into s.mx by lane 0, as the bits of
 * non-negative floats, whose order as integers is theirs as floats (a NaN's above infinity's): its A
 * elements' (the theta rows) at [warp], a bound on its B elements' but the targets (the largest weight
 * times that) at [kWarps + warp], its targets' at [2 kWarps + warp]. */
template <int LANES>
__device__ inline void chunk_magnitudes(const Shared &s, const float (&v)[kPer][LANES], const EntryInfo &e, bool weighted)
{
	uint32_t m = 0;
#pragma unroll
	for (int j = 0; j < kPer; j++)
#pragma unroll
		for (int l = 0; l < LANES; l++)
			m = max(m, __float_as_uint(v[j][l]) & 0x7fffffffu);
	m = __reduce_max_sync(0xffffffffu, m);
	uint32_t b = m; /* unweighted: the B operand is the A operand */
	if (weighted) {
		const uint32_t w = __reduce_max_sync(0xffffffffu, __float_as_uint(e.w) & 0x7fffffffu);
		b = __float_as_uint(__uint_as_float(m) * __uint_as_float(w)) & 0x7fffffffu;
	}
	const uint32_t t = __reduce_max_sync(0xffffffffu, __float_as_uint(e.t) & 0x7fffffffu);
	if ((threadIdx.x & 31) == 0) {
		s.mx[threadIdx.x >> 5] = m;
		s.mx[kWarps + (threadIdx.x >> 5)] = b;
		s.mx[2 * kWarps + (threadIdx.x >> 5)] = t;
	}
}

/* The warp's blocks of a Gram sum times f, column target_col's elements times ft instead; frag_b as in
 * gram_rows (fragment i's half h lies in the 8 columns from 8 (frag_b[i][h] >> 7); past the warp's
 * fragments, 0: the accumulators there are zero). */
template <int FPW>
__device__ inline void scale_blocks(Acc<FPW> &acc, const int (&frag_b)[FPW][2], int target_col, float f, float ft)
{
	const int c0 = 2 * (threadIdx.x & 3);
#pragma unroll
	for (int i = 0; i < FPW; i++)
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const int c = 8 * (frag_b[i][h] >> 7) + c0;
#pragma unroll
			for (int q = 0; q < 4; q++)
				acc.c[i][h][q] *= c + (q & 1) == target_col ? ft : f;
		}
}

/* Sums entries [begin, end) of row u (in the sources' order) into the warp's blocks of the Gram sum
 * (acc). With a right-hand side (modes 0 and 1), column k of the B operand holds each entry's target
 * instead of zero padding, so column k of the sum is b_u (kp must exceed k). The sources' starts and
 * prefix sums are in s.rs and s.pre. PREC: a starfa_cuda_gram_precision. Software-pipelined: while the tensor
 * cores work on chunk c from shared memory, the loads of chunk c + 1's theta rows and of chunk c + 2's
 * column indices are in flight. Ends with a __syncthreads(), so s.U is free.
 *
 * Under 3xFP16 the parts are of the elements times powers of two, 2^ea for A, 2^eb for B, 2^et for B's
 * column of targets, which bring the largest magnitudes gathered so far into [2^14, 2^15)
 * (fp16_exponent): the warps leave their chunk's largest in s.mx before the barrier that precedes the
 * chunk's stores (for chunk c + 1, the one that ends chunk c; for the first, one more), and where a chunk
 * lowers a scale the sums so far are multiplied by the change. acc comes out unscaled.
 *
 * The kernel is bound by instruction issue, so everything that does not change from chunk to chunk is
 * computed once: a warp stores entries warp + j kWarps of a chunk, so an entry's position within its
 * k-step (e & 7) is the warp's number, and a lane's slot in the A and B parts is a fixed base plus j
 * and l (its 32-lane pass over the row) times constant strides; each of the warp's fragments reads at a
 * fixed offset plus the k-step's stride. */
template <int FPW, int LANES, int PREC>
__device__ void gram_rows(const Shared &s, const RowSource &src, int64_t k, const Weights &wt, uint32_t begin,
			  uint32_t end, Acc<FPW> &acc)
{
	static_assert(kWarps == 8, "a warp's entries hold one position (pair, with 16-bit parts) of each k-step");
	static_assert(kPer % 2 == 0, "with 16-bit parts a k-step is two of a warp's entries");
	constexpr int KIND = part_kind(PREC);
	/* HALF: 16-bit parts (3xBF16 and 3xFP16), two entries a word */
	constexpr bool PRECISE = PREC != STARFA_CUDA_GRAM_TF32, HALF = KIND != kPartTF32, FP16 = KIND == kPartFP16;
	constexpr int kStep = HALF ? 16 : 8; /* entries a k-step */
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int kp = s.kp, nb = kp / 16, nb2 = kp / 8;
	const bool weighted = wt.mode == 1 || wt.mode == 2;
	const int target_col = wt.mode <= 1 ? (int)k : -1; /* the B column that holds the targets, if any */
	/* Split once into TF32 parts as it is stored: x = hi + lo. The A part, then the B part. */
	uint32_t *const A = (uint32_t *)s.U, *const B = A + 2 * kChunk * kp;
	/* One k-step's A part (nb blocks x 2 x 32 lanes x 4 words) and B part (nb2 x 2 x 32 x 2) are both
	 * nb * 256 words; one 32-lane pass over a theta row moves two A blocks and four B blocks on: 512. */
	const int step_words = nb * 256;
	/* With 16-bit parts, the warp's entries j and j + 1 (j even) are pair `warp` of k-step j >> 1
	 * (entry_load_chunk): one word, whose slot is TF32's for entry `warp`. */
	const int store_a0 = a_slot(warp, lane, nb), store_b0 = b_slot(warp, lane, nb2);
	int nfrag = 0, frag_a[FPW], frag_b[FPW][2];
	unsigned new_row = 0; /* fragments whose A operand differs from the previous fragment's */
	{
		const int sa = lane ^ ((lane >> 3) & 3), sb = lane ^ (((lane >> 4) & 1) << 1);
		int prev = -1;
#pragma unroll
		for (int i = 0; i < FPW; i++) {
			int bi, bj;
			frag_a[i] = frag_b[i][0] = frag_b[i][1] = 0;
			if (!warp_fragment(i, nb, &bi, &bj))
				continue; /* the valid fragments are a prefix */
			nfrag = i + 1;
			frag_a[i] = (bi << 8) + (sa << 2);
			if (bi != prev)
				new_row |= 1u << i;
			prev = bi;
#pragma unroll
			for (int h = 0; h < 2; h++) {
				const int J = 2 * bj + h;
				frag_b[i][h] = (J << 7) + ((sb ^ (J & 3)) << 1);
			}
		}
#pragma unroll
		for (int i = 0; i < FPW; i++)
#pragma unroll
			for (int h = 0; h < 2; h++)
#pragma unroll
				for (int q = 0; q < 4; q++)
					acc.c[i][h][q] = 0.0f;
	}
	float v[kPer][LANES];
	EntryInfo cur = entry_use(src, wt, entry_load_chunk<HALF>(s, src, begin, end));
	gather<LANES>(v, cur, k);
	entry_prefetch<HALF>(s, src, begin + kChunk, end);
	/* 3xFP16: the scales' exponents, unset (above the largest allowed) until the first chunk */
	int ea = kMaxScaleExp + 1, eb = kMaxScaleExp + 1, et = kMaxScaleExp + 1;
	float sa = 1.0f, sb = 1.0f, st = 1.0f; /* 2^ea, 2^eb, 2^et */
	if (FP16) {
		chunk_magnitudes(s, v, cur, weighted);
		__syncthreads();
	}
	for (uint32_t g0 = begin; g0 < end; g0 += kChunk) {
		const uint32_t cnt = end - g0 < (uint32_t)kChunk ? end - g0 : (uint32_t)kChunk;
		if (FP16) { /* the chunk's scales: the same in every thread */
			uint32_t ma = 0, mb = 0, mt = 0;
#pragma unroll
			for (int w = 0; w < kWarps; w++) {
				ma = max(ma, s.mx[w]);
				mb = max(mb, s.mx[kWarps + w]);
				mt = max(mt, s.mx[2 * kWarps + w]);
			}
			const int na = min(ea, fp16_exponent(ma)), nb_ = min(eb, fp16_exponent(mb)), nt = min(et, fp16_exponent(mt));
			if (na != ea || nb_ != eb || nt != et) {
				if (ea <= kMaxScaleExp) /* not the first chunk, whose sums so far are zero */
					scale_blocks(acc, frag_b, target_col, pow2(na - ea + nb_ - eb), pow2(na - ea + nt - et));
				ea = na;
				eb = nb_;
				et = nt;
				sa = pow2(ea);
				sb = pow2(eb);
				st = pow2(et);
			}
		}
		/* Where register pressure is high (the fused kernel), the compiler would rather recompute the
		 * two store bases from the thread index, twenty instructions, at every store than keep them:
		 * an empty asm that "changes" them makes recomputing impossible. */
		int store_a = store_a0, store_b = store_b0;
		asm volatile("" : "+r"(store_a), "+r"(store_b));
		/* chunk c from registers into shared memory (the previous chunk's readers are done); the warp's
		 * entry j lies in k-step j (16-bit parts: j >> 1: chunk_entry), so a short last chunk stores only the
		 * steps it sums */
		const int steps = (int)((cnt + kStep - 1) / kStep);
		if constexpr (HALF) {
#pragma unroll
			for (int j = 0; j < kPer; j += 2) { /* entries j and j + 1: k-step j >> 1 */
				if (j >> 1 >= steps)
					break;
				const float t0 = __shfl_sync(0xffffffffu, cur.t, j), t1 = __shfl_sync(0xffffffffu, cur.t, j + 1);
				const float w0 = weighted ? __shfl_sync(0xffffffffu, cur.w, j) : 1.0f;
				const float w1 = weighted ? __shfl_sync(0xffffffffu, cur.w, j + 1) : 1.0f;
#pragma unroll
				for (int l = 0; l < LANES; l++) {
					const int d = lane + 32 * l;
					if (d < kp) {
						const float x0 = v[j][l], x1 = v[j + 1][l];
						const bool tc = d == target_col;
						const int off = (j >> 1) * step_words + 512 * l;
						store_pair<KIND>(A, store_a + off, kLoA, x0, x1, sa);
						store_pair<KIND>(B, store_b + off, kLoB, tc ? t0 : w0 * x0, tc ? t1 : w1 * x1, tc ? st : sb);
					}
				}
			}
		} else {
#pragma unroll
			for (int j = 0; j < kPer; j++) { /* entry warp + 8 j: k-step j */
				if (j >= steps)
					break;
				const float t = __shfl_sync(0xffffffffu, cur.t, j);
				const float w = weighted ? __shfl_sync(0xffffffffu, cur.w, j) : 1.0f;
#pragma unroll
				for (int l = 0; l < LANES; l++) {
					const int d = lane + 32 * l;
					if (d < kp) {
						const float x = v[j][l], y = d == target_col ? t : w * x;
						store_tf32<PRECISE>(A, store_a + j * step_words + 512 * l, kLoA, x);
						store_tf32<PRECISE>(B, store_b + j * step_words + 512 * l, kLoB, y);
					}
				}
			}
		}
		__syncthreads();
		if (g0 + kChunk < end) { /* the next chunks' loads, in flight during this chunk's sums */
			cur = entry_use(src, wt, entry_prefetched<HALF>(s, src, g0 + kChunk, end));
			gather<LANES>(v, cur, k);
			entry_prefetch<HALF>(s, src, g0 + 2 * kChunk, end);
		}
		const uint32_t *a = A, *b = B;
		for (int st = 0; st < steps; st++, a += step_words, b += step_words) {
			uint4 ah, al;
#pragma unroll
			for (int i = 0; i < FPW; i++) {
				if (i >= nfrag)
					break;
				if (i == 0 || (new_row >> i & 1)) {
					const uint32_t *pa = a + frag_a[i];
					ah = *(const uint4 *)pa;
					if (PRECISE)
						al = *(const uint4 *)(pa + kLoA);
				}
#pragma unroll
				for (int h = 0; h < 2; h++) {
					const uint32_t *pb = b + frag_b[i][h];
					const uint2 bh = *(const uint2 *)pb;
					if (PRECISE) {
						const uint2 bl = *(const uint2 *)(pb + kLoB);
						mma<KIND>(acc.c[i][h], al, bh);
						mma<KIND>(acc.c[i][h], ah, bl);
					}
					mma<KIND>(acc.c[i][h], ah, bh);
				}
			}
		}
		if (FP16 && g0 + kChunk < end) /* the next chunk's, in registers since its loads went out */
			chunk_magnitudes(s, v, cur, weighted);
		__syncthreads();
	}
	if (FP16) /* acc / (2^ea 2^eb), the targets' column / (2^ea 2^et) */
		scale_blocks(acc, frag_b, target_col, pow2(-ea - eb), pow2(-ea - et));
}

/* f(r, c, v, diagonal) for every element (r, c) = v of the warp's blocks (diagonal: of a block on the
 * diagonal, which holds both (r, c) and (c, r)). */
template <int FPW, typename F> __device__ inline void fragment_elements(const Acc<FPW> &acc, int nb, F f)
{
	const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
	for (int i = 0; i < FPW; i++) {
		int bi, bj;
		if (!warp_fragment(i, nb, &bi, &bj))
			continue;
#pragma unroll
		for (int h = 0; h < 2; h++)
#pragma unroll
			for (int q = 0; q < 4; q++)
				f(16 * bi + g + 8 * (q >> 1), 16 * bj + 8 * h + 2 * t + (q & 1), acc.c[i][h][q], bi == bj);
	}
}

/* The warp's blocks into a row-major matrix (leading dimension ld): the upper blocks, and with mirror
 * their transposes (a diagonal block once). */
template <int FPW> __device__ void store_blocks(const Acc<FPW> &acc, int nb, float *M, int ld, bool mirror)
{
	fragment_elements(acc, nb, [&](int r, int c, float v, bool diagonal) {
		M[r * ld + c] = v;
		if (mirror && !diagonal)
			M[c * ld + r] = v;
	});
}

/* The fused kernel's system straight from the warp's blocks, in place of store_blocks, the copy of b_u and
 * finish_system (one pass and two synchronisations fewer): column k of the sum (rows < k) into s.b, the
 * k x k part plus G and lambda on the diagonal into s.U and its mirror, the identity on the padding
 * (also over row and column k). The same values as that sequence. s.b past k is zeroed. Returns whether
 * the elements the thread wrote are finite; the caller sums that over the block, which also orders the
 * writes before the solve's reads. */
template <int FPW> __device__ bool store_system(const Acc<FPW> &acc, const Shared &s, int k, float lambda, const float *G)
{
	bool finite = true;
	for (int d = k + threadIdx.x; d < s.kp; d += kThreads)
		s.b[d] = 0.0f;
	fragment_elements(acc, s.kp / 16, [&](int r, int c, float v, bool diagonal) {
		if (c == k && r < k)
			s.b[r] = v;
		float f = r == c ? 1.0f : 0.0f, m = 0.0f; /* (r, c) and, off the diagonal blocks, (c, r) */
		if (r < k && c < k) {
			f = v + (G ? __ldg(G + r * k + c) : 0.0f) + (r == c ? lambda : 0.0f);
			finite = finite && isfinite(f);
			if (!diagonal) {
				m = v + (G ? __ldg(G + c * k + r) : 0.0f);
				finite = finite && isfinite(m);
			}
		}
		s.U[r * s.lda + c] = f;
		if (!diagonal)
			s.U[c * s.lda + r] = m;
	});
	return finite;
}

/* The row's stretch in each source: s.rs[t] its start, s.pre[t] the entries before it (s.pre[ntiles]:
 * the row's total). */
__device__ void row_sources(const Shared &s, const RowSource &src, int64_t u)
{
	const int tid = threadIdx.x;
	if (tid < src.ntiles) {
		const uint32_t *rp = src.tiles[tid].rowptr;
		uint32_t a = __ldg(rp + u), b = __ldg(rp + u + 1);
		s.rs[tid] = a;
		s.pre[tid + 1] = b - a;
	}
	__syncthreads();
	if (tid == 0) {
		s.pre[0] = 0;
		for (int t = 0; t < src.ntiles; t++)
			s.pre[t + 1] += s.pre[t];
	}
	__syncthreads();
}

__device__ inline float warp_sum(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/* Flags in s.red past block_sum's buffers: the fused kernel's "last segment of the row" and the Cholesky's
 * pivot verdict. */
constexpr int kFlagLast = 2 * kWarps, kFlagBad = 2 * kWarps + 1;

/* The sum over the block, the same value in every thread, with one synchronisation: the warps' sums go
 * to buffer BUF of s.red. Two calls in a row must use different buffers (a call's readers are done once
 * every thread has passed the next call's synchronisation); between calls on the same buffer there
 * must be another __syncthreads(). */
template <int BUF> __device__ inline float block_sum(const Shared &s, float v)
{
	static_assert(BUF == 0 || BUF == 1, "two buffers");
	float *red = s.red + BUF * kWarps;
	v = warp_sum(v);
	if ((threadIdx.x & 31) == 0)
		red[threadIdx.x >> 5] = v;
	__syncthreads();
	float t = 0.0f;
#pragma unroll
	for (int w = 0; w < kWarps; w++)
		t += red[w];
	return t;
}

/* f(r, c) for every element of a rows x cols matrix, row-major, spread over N threads, this one the t-th:
 * each thread steps N elements on by adding a row and column stride (one division per thread, none per
 * element: a division by a run-time width is some twenty instructions). block_elements: over the block. */
template <int N, typename F> __device__ inline void spread_elements(int t, int rows, int cols, F f)
{
	const int dr = N / cols, dc = N % cols;
	int r = t / cols, c = t % cols;
	while (r < rows) {
		f(r, c);
		r += dr;
		c += dc;
		if (c >= cols) {
			c -= cols;
			r++;
		}
	}
}

template <typename F> __device__ inline void block_elements(int rows, int cols, F f)
{
	spread_elements<kThreads>(threadIdx.x, rows, cols, f);
}

/* The system s.U (k x k in a kp x kp frame) gets lambda on its diagonal, G, and an identity on the
 * padding, so the padded unknowns stay zero. Returns whether every element is finite. */
__device__ bool finish_system(const Shared &s, int64_t k, float lambda, const float *G)
{
	bool finite = true;
	block_elements(s.kp, s.kp, [&](int r, int c) {
		float *a = s.U + r * s.lda + c;
		if (r < k && c < k) {
			float v = *a + (G ? __ldg(G + (int64_t)r * k + c) : 0.0f) + (r == c ? lambda : 0.0f);
			*a = v;
			finite = finite && isfinite(v);
		} else {
			*a = r == c ? 1.0f : 0.0f;
		}
	});
	__syncthreads();
	return block_sum<0>(s, finite ? 0.0f : 1.0f) == 0.0f;
}

/* The row and column of the p-th tile of the upper triangle (diagonal included) of a T x T grid of tiles,
 * counted row by row: row tl starts at tl T - tl (tl - 1) / 2. */
__device__ inline void upper_tile(int p, int T, int *tl, int *ti)
{
	const float b = 2.0f * (float)T + 1.0f;
	int r = (int)((b - sqrtf(b * b - 8.0f * (float)p)) * 0.5f);
	r = r < 0 ? 0 : r > T - 1 ? T - 1 : r;
	while (r > 0 && r * T - r * (r - 1) / 2 > p) /* the float estimate, made exact */
		r--;
	while (r + 1 < T && (r + 1) * T - (r + 1) * r / 2 <= p)
		r++;
	*tl = r;
	*ti = r + p - (r * T - r * (r - 1) / 2);
}

/* Rows j0 + q of a panel (j0 a multiple of 4): base + q stride - skip(q), which for q known at compile
 * time (the unrolled loops over a panel's 16 rows) folds to one multiply-add; m.row's arithmetic a row
 * was most of warp_cholesky's instructions. */
template <typename SKIP> struct PanelRows {
	float *base;
	int stride;
	__device__ float *row(int q) const
	{
		return base + q * stride - SKIP::of(q);
	}
};

struct NoSkip {
	__host__ __device__ static constexpr int of(int)
	{
		return 0;
	}
};

/* Where a system's rows lie in shared memory: element (i, c) of the upper triangle (c >= i, with the
 * right-hand side as column k) is row(i)[c]. FullRows: row-major with leading dimension lda. PackedRows:
 * the upper triangle by groups of four rows, rows 4g..4g+3 holding columns 4g..L-1 (L a multiple of 4, at
 * least k + 4), so that row(i) + c is 16-byte aligned for c a multiple of 4 as in the full layout, and a
 * system takes about half the room (warp_cholesky: twice the systems a multiprocessor). */
struct FullRows {
	float *U;
	int lda;
	__device__ float *row(int i) const
	{
		return U + i * lda;
	}
	__device__ PanelRows<NoSkip> panel(int j0) const
	{
		return {row(j0), lda};
	}
};

__host__ __device__ inline int packed_start(int i, int L) /* of row i's column 0 */
{
	const int g = i >> 2;
	return 4 * g * L - 8 * g * (g - 1) + (i - 4 * g) * (L - 4 * g) - 4 * g;
}

/* Between packed rows j0 and j0 + q (j0 a multiple of 4): q (L - j0) less sum_{p<q} (p & ~3), the columns
 * that rows further into the panel leave out, and 4 at each group of four rows passed. */
struct PackedSkip {
	__host__ __device__ static constexpr int of(int q)
	{
		return 4 * (q >> 2) * (2 * (q >> 2) - 1 + (q & 3));
	}
};

struct PackedRows {
	float *U;
	int L;
	__device__ float *row(int i) const
	{
		return U + packed_start(i, L);
	}
	__device__ PanelRows<PackedSkip> panel(int j0) const
	{
		return {row(j0), L - j0};
	}
};

/* A warp factors the w x w diagonal block at (j0, j0) of U in registers, R_11 over M_11 (the previous
 * panels' updates in): lane L holds column c = L & 15 of rows 2t + L / 16 (t < 8); step j's pivot row
 * reaches the other lanes by shuffles (read before the pivot's reciprocal square root, so that they are in
 * flight during it), so the w steps need no memory round trip. 1 / R_jj goes to inv[j0 + j]. Returns 1 in
 * every lane when a pivot is not positive (or not finite), else 0, and lane 0 writes that to *bad (when
 * given). */
template <typename R> __device__ inline float factor_diagonal_block(const R &m, int j0, int w, float *inv, float *bad)
{
	const int lane = threadIdx.x & 31, c = lane & 15, half = lane >> 4;
	const auto P = m.panel(j0);
	float x[8];
#pragma unroll
	for (int t = 0; t < 8; t++) {
		const int r = 2 * t + half;
		x[t] = r < w && c < w && c >= r ? P.row(r)[j0 + c] : 0.0f;
	}
	float verdict = 0.0f;
#pragma unroll
	for (int j = 0; j < 16; j++) {
		if (j >= w)
			break;
		const int owner = (j & 1) * 16; /* + column: the lane that holds (j, column) */
		const float d = __shfl_sync(0xffffffffu, x[j >> 1], owner + j);
		const float mc = __shfl_sync(0xffffffffu, x[j >> 1], owner + c); /* M(j, c), updated */
		float mr[8];
#pragma unroll
		for (int t = 0; t < 8; t++)
			mr[t] = __shfl_sync(0xffffffffu, x[j >> 1], owner + 2 * t + half); /* M(j, r) */
		if (!(d > 0.0f) || !isfinite(d)) {
			verdict = 1.0f; /* every lane has the same d */
			break;
		}
		const float is = rsqrtf(d);
		const float f = mc * is, g = f * is; /* R(j, c), and R(j, c) / R(j, j) */
#pragma unroll
		for (int t = 0; t < 8; t++) {
			const int r = 2 * t + half; /* R(j, r) R(j, c) = M(j, r) g */
			if (r > j && r < w && c >= r && c < w)
				x[t] = fmaf(-mr[t], g, x[t]);
		}
		if (half == (j & 1) && c >= j)
			x[j >> 1] = f;
		if (lane == j)
			inv[j0 + j] = is;
	}
#pragma unroll
	for (int t = 0; t < 8; t++) {
		const int r = 2 * t + half;
		if (r < w && c < w && c >= r)
			P.row(r)[j0 + c] = x[t];
	}
	if (bad && lane == 0)
		*bad = verdict;
	return verdict;
}

/* Columns i, i + 32, ..., i + 32 (C - 1) that are at most last (right of the diagonal block) of panel j0's
 * w rows: R_12's columns, R_11^-T times M_12's, by the 16-row recurrence in registers (row q of the panel
 * is (M_q - sum_{p<q} R_pq R_p) / R_qq); each element of R_11 is read once for the C columns. */
template <int C, typename R>
__device__ inline void panel_columns(const R &m, const float *inv, int j0, int w, int i, int last)
{
	const auto P = m.panel(j0);
	float v[C][16];
#pragma unroll
	for (int cc = 0; cc < C; cc++)
#pragma unroll
		for (int r = 0; r < 16; r++)
			v[cc][r] = r < w && i + 32 * cc <= last ? P.row(r)[i + 32 * cc] : 0.0f;
#pragma unroll
	for (int q = 0; q < 16; q++) {
		if (q >= w)
			break;
		const float *row = P.row(q) + j0;
		const float iq = inv[j0 + q];
#pragma unroll
		for (int cc = 0; cc < C; cc++)
			v[cc][q] *= iq;
#pragma unroll
		for (int r = q + 1; r < 16; r++)
			if (r < w) {
				const float rr = row[r];
#pragma unroll
				for (int cc = 0; cc < C; cc++)
					v[cc][r] -= rr * v[cc][q];
			}
	}
#pragma unroll
	for (int cc = 0; cc < C; cc++)
#pragma unroll
		for (int r = 0; r < 16; r++)
			if (r < w && i + 32 * cc <= last)
				P.row(r)[i + 32 * cc] = v[cc][r];
}

/* R_11 x_1 = y for panel j0's w x w triangle, by a warp: lane i < w brings y_i (the panel's rows of y with
 * the later panels' x already taken off) and gets x_i back; a shuffle a step, lane i keeping the sum of
 * R[i][j] x_j over the panel's solved j > i. */
template <typename R> __device__ inline float panel_back(const R &m, const float *inv, int j0, int w, float y)
{
	const int lane = threadIdx.x & 31;
	const float *const rl = m.row(j0 + lane);
	float own = 0.0f, acc = 0.0f;
#pragma unroll
	for (int j = 15; j >= 0; j--) {
		if (j >= w)
			continue;
		if (lane == j)
			own = (y - acc) * inv[j0 + j];
		const float xj = __shfl_sync(0xffffffffu, own, j);
		if (lane < j)
			acc += rl[j0 + j] * xj;
	}
	return own;
}

/* The trailing update's E x E tile (tl, ti) of the region right of and below panel j0 (w rows, ending at
 * j1): U[l][i] -= sum_q R_ql R_qi for rows j1 + E tl + r < k and columns j1 + E ti + c in [l, k] (column k
 * is the right-hand side). E = 4: the trailing triangle's tiles, 16-byte loads of the panel's rows, 16
 * multiply-adds per 8 loaded values; a tile's columns stay below k + 4 <= lda. E = 2: warp 0's lookahead,
 * the next diagonal block in 36 tiles of 2 x 2 over its 32 lanes (64 multiply-adds each) where ten lanes
 * took a 4 x 4 tile each, 256 in a row, while the other warps waited at the panel's barrier; its columns
 * stay below k + 2. */
template <int E, typename R>
__device__ inline void update_tile(const R &m, int j0, int w, int j1, int k, int tl, int ti)
{
	static_assert(E == 4 || E == 2, "4 x 4 or 2 x 2 tiles");
	const int l0 = j1 + E * tl, i0 = j1 + E * ti;
	if (l0 >= k)
		return;
	if constexpr (E == 2)
		if (i0 > k)
			return;
	const auto P = m.panel(j0);
	float acc[E][E] = {};
#pragma unroll
	for (int q = 0; q < 16; q++) {
		if (q >= w)
			break;
		const float *row = P.row(q);
		float av[E], bv[E];
		if constexpr (E == 4) {
			const float4 a = *(const float4 *)(row + l0), b = *(const float4 *)(row + i0);
			av[0] = a.x, av[1] = a.y, av[2] = a.z, av[3] = a.w;
			bv[0] = b.x, bv[1] = b.y, bv[2] = b.z, bv[3] = b.w;
		} else {
			const float2 a = *(const float2 *)(row + l0), b = *(const float2 *)(row + i0);
			av[0] = a.x, av[1] = a.y;
			bv[0] = b.x, bv[1] = b.y;
		}
#pragma unroll
		for (int r = 0; r < E; r++)
#pragma unroll
			for (int c = 0; c < E; c++)
				acc[r][c] += av[r] * bv[c];
	}
	if constexpr (E == 4 && std::is_same_v<R, PackedRows>)
		if (l0 + 4 <= k) {
			/* the tile's four rows whole: its elements left of the diagonal (diagonal tiles) and right of
			 * column k (the last column of tiles) take their differences too, which nothing reads (the
			 * factorization reads the upper triangle up to column k; a packed row's group of four holds the
			 * diagonal tile's whole width). The warp form only: in the block form's kernels, compiled at 64
			 * registers a thread, the four float4 kept live spilled (short rows: 4 -> 56-92 bytes a thread) */
			const auto T = m.panel(l0); /* l0 is a multiple of 4 */
#pragma unroll
			for (int r = 0; r < 4; r++) {
				float4 *const e = (float4 *)(T.row(r) + i0);
				float4 t = *e;
				t.x -= acc[r][0];
				t.y -= acc[r][1];
				t.z -= acc[r][2];
				t.w -= acc[r][3];
				*e = t;
			}
			return;
		}
#pragma unroll
	for (int r = 0; r < E; r++) {
		float *const rowl = E == 4 ? m.panel(l0).row(r) : m.row(l0 + r); /* (only 4 x 4 tiles start on a multiple of 4) */
#pragma unroll
		for (int c = 0; c < E; c++) {
			const int l = l0 + r, i = i0 + c;
			if (l < k && i <= k && i >= l)
				rowl[i] -= acc[r][c];
		}
	}
}

/* M x = b by Cholesky, M = R^T R, R upper triangular: R overwrites the upper triangle of s.U (row-major),
 * then R^T y = b and R x = y. b rides along as column k of the factorization ([M b], so y = R^-T b comes
 * out in that column with R, and the forward solve costs no chain of its own; lda >= k + 4). 1 / R_jj is
 * kept in s.p, so no step divides. Blocked by panels of 16 rows, two block-wide synchronisations a panel
 * (and one a panel for R x = y):
 *   1. warp 0 factors the panel's 16 x 16 diagonal block in registers (factor_diagonal_block);
 *   2. the panel's rows right of that block, R_12 = R_11^-T M_12 (and y's 16 entries): a thread a column,
 *      the 16-row recurrence in registers;
 *   3. the trailing triangle, M_22 -= R_12^T R_12 (4 x 4 tiles, update_tile). With a lookahead: warp 0
 *      updates the next panel's diagonal block (2 x 2 tiles on its 32 lanes) and goes on to factor it (step 1 of the next
 *      panel, a chain of 16 dependent steps) while the other warps update the rest, so that the chain is
 *      hidden behind the update instead of following it.
 * The same sums as the unblocked form, in another order. Returns 0, or 1 when a pivot is not positive
 * (not positive definite, or not finite): s.x is then not written. */
__device__ int solve_cholesky(const Shared &s, int k)
{
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, lda = s.lda;
	float *U = s.U, *inv = s.p;
	const FullRows sys = {U, lda};
	float *bad = s.red + kFlagBad; /* warp 0's verdict on the panel's pivots */
	for (int d = tid; d < k; d += kThreads)
		U[d * lda + k] = s.b[d]; /* read from the first row panel on, after a synchronisation */
	if (warp == 0)
		factor_diagonal_block(sys, 0, k < 16 ? k : 16, inv, bad);
	__syncthreads();
	for (int j0 = 0; j0 < k; j0 += 16) {
		if (*bad != 0.0f)
			return 1;
		const int j1 = j0 + 16 < k ? j0 + 16 : k, w = j1 - j0;
		/* 2. row q of the panel is (M_q - sum_{p<q} R_pq R_p) / R_qq, over columns j1..k */
		for (int i = j1 + tid; i <= k; i += kThreads)
			panel_columns<1>(sys, inv, j0, w, i, k);
		__syncthreads();
		if (j1 == k)
			break;
		/* 3. the trailing region, rows j1..k - 1 and columns j1..k, in T x T tiles over its upper part */
		const int m = k - j1, T = (m + 4) / 4, ntiles = T * (T + 1) / 2;
		if (warp == 0) {
			/* the next diagonal block's update: the upper triangle of its 2 x 2 tiles, 36 over 32 lanes */
			for (int p = lane; p < 36; p += 32) {
				int tl, ti;
				upper_tile(p, 8, &tl, &ti);
				update_tile<2>(sys, j0, w, j1, k, tl, ti);
			}
			__syncwarp();
			factor_diagonal_block(sys, j1, m < 16 ? m : 16, inv, bad);
		} else {
			for (int t = tid - 32; t < ntiles; t += kThreads - 32) {
				int tl, ti;
				upper_tile(t, T, &tl, &ti);
				if (ti >= 4)
					update_tile<4>(sys, j0, w, j1, k, tl, ti);
			}
		}
		__syncthreads();
	}
	/* R x = y by panels from the last, right-looking with a lookahead: warp 0 takes the panel solved last off
	 * this panel's rows and solves it (the 16 x 16 triangle in registers, a shuffle a step) while the other
	 * warps take the same x off every row above; one synchronisation a panel. y is column k of U. */
	for (int j0 = (k - 1) / 16 * 16; j0 >= 0; j0 -= 16) {
		const int j1 = j0 + 16 < k ? j0 + 16 : k, w = j1 - j0;
		const int n1 = j1 + 16 < k ? j1 + 16 : k; /* the panel solved last: x[j1..n1) */
		if (warp == 0) {
			float y = lane < w ? U[(j0 + lane) * lda + k] : 0.0f;
			if (lane < w)
				for (int c = j1; c < n1; c++)
					y -= U[(j0 + lane) * lda + c] * s.x[c];
			const float own = panel_back(sys, inv, j0, w, y);
			if (lane < w)
				s.x[j0 + lane] = own;
		} else {
			for (int i = tid - 32; i < j0 && j1 < k; i += kThreads - 32) { /* the rows above the panel */
				float y = U[i * lda + k];
				for (int c = j1; c < n1; c++)
					y -= U[i * lda + c] * s.x[c];
				U[i * lda + k] = y;
			}
		}
		__syncthreads();
	}
	return 0;
}

/* One warp's own system for warp_cholesky, in shared memory: its upper triangle with the right-hand side
 * as column k, packed (PackedRows, L = packed_width(k): k + 4 rounded up to a multiple of 4), a flag
 * word (padded to 4 floats), then 1 / R_jj and x, round4(k) floats each. */
__host__ __device__ inline int packed_width(int64_t k)
{
	return (int)((k + 7) / 4 * 4);
}

__host__ __device__ inline size_t packed_floats(int64_t k) /* the k packed rows */
{
	return (size_t)packed_start((int)k, packed_width(k)) + 4 * (size_t)(k >> 2);
}

__host__ __device__ inline size_t warp_system_floats(int64_t k)
{
	return packed_floats(k) + 4 + 2 * (size_t)((k + 3) / 4 * 4);
}

/* The parts of a warp's own system at base (warp_system_floats(k) floats), as laid out above. */
struct WarpSystem {
	PackedRows m;
	float *flag, *inv, *x;
};

__device__ inline WarpSystem warp_system(float *base, int k)
{
	float *const flag = base + packed_floats(k), *const inv = flag + 4;
	return {{base, packed_width(k)}, flag, inv, inv + ((k + 3) & ~3)};
}

/* solve_cholesky's factorization and solve by one warp on its own packed system (column k the right-hand
 * side; inv and x: k floats each): the same panels, tiles and order of sums, so the same bits, with no
 * block-wide synchronisation. The block form keeps one system a block of eight warps, so that at each
 * panel most of them wait for warp 0's chain (the diagonal block) or for the panel's rows; a warp a
 * system keeps as many systems in flight a multiprocessor as shared memory holds, and the chains of one
 * overlap the updates of others. Returns 0, or 1 when a pivot is not positive (x is then not written). */
__device__ int warp_cholesky(const PackedRows &m, int k, float *inv, float *x)
{
	const int lane = threadIdx.x & 31;
	for (int j0 = 0; j0 < k; j0 += 16) {
		const int j1 = j0 + 16 < k ? j0 + 16 : k, w = j1 - j0;
		if (factor_diagonal_block(m, j0, w, inv, nullptr) != 0.0f)
			return 1;
		__syncwarp();
		/* a lane's columns of the panel at once, up to three */
		if (k - j1 >= 64)
			for (int i = j1 + lane; i <= k; i += 96)
				panel_columns<3>(m, inv, j0, w, i, k);
		else if (k - j1 >= 32)
			panel_columns<2>(m, inv, j0, w, j1 + lane, k);
		else
			panel_columns<1>(m, inv, j0, w, j1 + lane, k);
		__syncwarp();
		if (j1 == k)
			break;
		/* the trailing region, the next diagonal block's tiles included */
		const int T = (k - j1 + 4) / 4;
		/* tile lane + 32 j of the upper triangle's row-by-row order: row tl holds ti = tl..T - 1 */
		for (int tl = 0, ti = lane;;) {
			while (tl < T && ti >= T) {
				tl++;
				ti += tl - T;
			}
			if (tl >= T)
				break;
			update_tile<4>(m, j0, w, j1, k, tl, ti);
			ti += 32;
		}
		__syncwarp();
	}
	/* R x = y by panels from the last: the rows above take the panel solved last off y (column k), in
	 * the block form's order, then the panel's triangle */
	for (int j0 = (k - 1) / 16 * 16; j0 >= 0; j0 -= 16) {
		const int j1 = j0 + 16 < k ? j0 + 16 : k, w = j1 - j0;
		const int n1 = j1 + 16 < k ? j1 + 16 : k;
		if (j1 < k) {
			for (int i = lane; i < j1; i += 32) {
				float *const row = m.row(i);
				float y = row[k];
				int c = j1;
				for (; c + 4 <= n1; c += 4) { /* row + c and x + c are 16-byte aligned */
					const float4 a = *(const float4 *)(row + c), b = *(const float4 *)(x + c);
					y -= a.x * b.x;
					y -= a.y * b.y;
					y -= a.z * b.z;
					y -= a.w * b.w;
				}
				for (; c < n1; c++)
					y -= row[c] * x[c];
				row[k] = y;
			}
			__syncwarp();
		}
		const float own = panel_back(m, inv, j0, w, lane < w ? m.row(j0 + lane)[k] : 0.0f);
		if (lane < w)
			x[j0 + lane] = own;
		__syncwarp();
	}
	return 0;
}

/* q = M p with M full symmetric in s.U: warp w sums rows c = w, w + kWarps, ... (row c is column c),
 * lanes along the row (consecutive banks), and the warps' partial sums meet in s.part. Each thread runs
 * k / kWarps multiply-adds a lane pass where a thread a row of the product runs k (the fallback). */
template <int LANES, bool SPLIT> __device__ inline void matvec(const Shared &s, int k, const float *p, float *q)
{
	if (!SPLIT) { /* no room for the partial sums (the stored systems' solve): a thread a row */
		for (int i = threadIdx.x; i < k; i += kThreads) {
			float sum = 0.0f;
			for (int c = 0; c < k; c++)
				sum += s.U[c * s.lda + i] * p[c];
			q[i] = sum;
		}
		__syncthreads();
		return;
	}
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	float acc[LANES];
#pragma unroll
	for (int l = 0; l < LANES; l++)
		acc[l] = 0.0f;
	for (int c = warp; c < k; c += kWarps) {
		const float pc = p[c], *row = s.U + c * s.lda;
#pragma unroll
		for (int l = 0; l < LANES; l++)
			if (lane + 32 * l < k)
				acc[l] += row[lane + 32 * l] * pc;
	}
#pragma unroll
	for (int l = 0; l < LANES; l++)
		if (lane + 32 * l < k)
			s.part[warp * s.kp + lane + 32 * l] = acc[l];
	__syncthreads();
	for (int i = threadIdx.x; i < k; i += kThreads) {
		float sum = 0.0f;
#pragma unroll
		for (int w = 0; w < kWarps; w++)
			sum += s.part[w * s.kp + i];
		q[i] = sum;
	}
	__syncthreads();
}

/* cpu/cg.h's steps, from s.x (loaded by the caller), with mv(p, q) computing q = M p (ending with a
 * __syncthreads()). Same returns. */
template <typename MV> __device__ int solve_cg_with(const Shared &s, int k, int steps, MV mv)
{
	const int tid = threadIdx.x;
	mv(s.x, s.q);
	float rr = 0.0f, bb = 0.0f;
	for (int d = tid; d < k; d += kThreads) {
		float r = s.b[d] - s.q[d];
		s.r[d] = r;
		s.p[d] = r;
		rr += r * r;
		bb += s.b[d] * s.b[d];
	}
	float rs = block_sum<0>(s, rr); /* also orders the writes of r and p before their reads */
	const float bsq = block_sum<1>(s, bb);
	if (!isfinite(rs))
		return 2;
	const float done = 16.0f * FLT_EPSILON * FLT_EPSILON * (rs > bsq ? rs : bsq);
	for (int step = 0; step < steps && rs > done; step++) {
		mv(s.p, s.q);
		float pq = 0.0f;
		for (int d = tid; d < k; d += kThreads)
			pq += s.p[d] * s.q[d];
		pq = block_sum<0>(s, pq);
		if (!isfinite(pq))
			return 2;
		if (pq <= 0.0f)
			return 1;
		const float alpha = rs / pq;
		float rn = 0.0f;
		for (int d = tid; d < k; d += kThreads) {
			s.x[d] += alpha * s.p[d];
			float r = s.r[d] - alpha * s.q[d];
			s.r[d] = r;
			rn += r * r;
		}
		rn = block_sum<1>(s, rn);
		const float beta = rn / rs;
		for (int d = tid; d < k; d += kThreads)
			s.p[d] = s.r[d] + beta * s.p[d];
		__syncthreads();
		rs = rn;
	}
	return 0;
}

/* solve_cg_with on the resident system. */
template <int LANES, bool SPLIT> __device__ int solve_cg(const Shared &s, int k, int steps)
{
	return solve_cg_with(s, k, steps, [&](const float *p, float *q) { matvec<LANES, SPLIT>(s, k, p, q); });
}

/* Counts row u as bad the way cpu/solve.c does: under the input that was not finite, if any, else (failed
 * 1) as not positive definite. One thread calls it. */
__device__ inline void record_bad_row(uint32_t *status, int64_t u, int failed, bool finite_a, bool finite_b)
{
	const bool bad_a = !finite_a, bad_b = finite_a && !finite_b;
	atomicAdd(status + STARFA_SOLVE_BAD_ROWS, 1u);
	if (bad_a)
		atomicAdd(status + STARFA_SOLVE_NONFINITE_A, 1u);
	if (bad_b)
		atomicAdd(status + STARFA_SOLVE_NONFINITE_B, 1u);
	if (failed == 1 && !bad_a && !bad_b)
		atomicAdd(status + STARFA_SOLVE_NOT_SPD, 1u);
	atomicMin(status + STARFA_SOLVE_FIRST_BAD_ROW, (uint32_t)u);
}

/* warp_cholesky on the warp's finished system into x_u (global), recording a failure as solve_and_store
 * does; finite_a() says whether the system's k x k values are finite, asked only of a row that failed. */
template <typename FA>
__device__ void warp_solve_and_store(const PackedRows &m, int k, float *inv, float *xs, FA finite_a, int64_t u,
				     float *x, uint32_t *status)
{
	const int lane = threadIdx.x & 31;
	bool fb = true;
	for (int d = lane; d < k; d += 32)
		fb = fb && isfinite(m.row(d)[k]);
	const bool finite_b = __all_sync(0xffffffffu, fb);
	__syncwarp();
	const int failed = warp_cholesky(m, k, inv, xs);
	bool fx = true;
	if (!failed)
		for (int d = lane; d < k; d += 32) {
			x[d] = xs[d];
			fx = fx && isfinite(xs[d]);
		}
	if (failed || !__all_sync(0xffffffffu, fx)) {
		const bool fa = finite_a();
		if (lane == 0)
			record_bad_row(status, u, failed, fa, finite_b);
	}
}

/* Solves the finished system in s.U with right-hand side s.b into x_u (global, warm start for CG) and
 * records a failure the way cpu/solve.c does. SPLIT: CG's products split the rows over the warps (needs
 * s.part, which blocks with chunks have). */
template <int LANES, bool SPLIT>
__device__ __forceinline__ void solve_and_store(const Shared &s, int k, bool finite_a, int64_t u, bool cholesky, int cg_steps,
				float *x, uint32_t *status)
{
	const int tid = threadIdx.x;
	float nonfinite_b = 0.0f;
	for (int d = tid; d < k; d += kThreads)
		nonfinite_b += isfinite(s.b[d]) ? 0.0f : 1.0f;
	const bool finite_b = block_sum<1>(s, nonfinite_b) == 0.0f;
	int failed;
	if (cholesky) {
		failed = solve_cholesky(s, k);
	} else {
		for (int d = tid; d < k; d += kThreads)
			s.x[d] = x[d];
		__syncthreads();
		failed = solve_cg<LANES, SPLIT>(s, k, cg_steps);
	}
	if (!cholesky || !failed)
		for (int d = tid; d < k; d += kThreads)
			x[d] = s.x[d];
	float nonfinite_x = 0.0f;
	if (!cholesky || !failed)
		for (int d = tid; d < k; d += kThreads)
			nonfinite_x += isfinite(s.x[d]) ? 0.0f : 1.0f;
	const bool bad = failed || block_sum<0>(s, nonfinite_x) != 0.0f;
	if (bad && tid == 0)
		record_bad_row(status, u, failed, finite_a, finite_b);
}

template <typename Kernel> cudaError_t prepare(Kernel kernel, size_t bytes)
{
	return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

/* The instantiations: fragments per warp and 32-lane passes over a theta row, for kp up to 64, 80,
 * 112, 160, 192 and 208 (the fragments of an 8-warp block: 10, 15, 28, 55, 78 and 91; 208: the
 * fused kernel at the largest k, with its column for b). */
#define STARFA_FPW_DISPATCH(kp, LAUNCH)                                                                        \
	((kp) <= 64 ? LAUNCH(2, 2) : (kp) <= 80 ? LAUNCH(2, 3) : (kp) <= 112 ? LAUNCH(4, 4) : (kp) <= 160 ? LAUNCH(7, 5) \
	 : (kp) <= 192 ? LAUNCH(10, 6) : LAUNCH(12, 7))

/* LAUNCH<F, L, PREC>(args...) at the run-time precision. */
#define STARFA_PREC_DISPATCH(prec, LAUNCH, F, L, ...)                                                          \
	((prec) == STARFA_CUDA_GRAM_3XTF32 ? LAUNCH<F, L, STARFA_CUDA_GRAM_3XTF32>(__VA_ARGS__)                       \
	 : (prec) == STARFA_CUDA_GRAM_TF32 ? LAUNCH<F, L, STARFA_CUDA_GRAM_TF32>(__VA_ARGS__)                         \
	 : (prec) == STARFA_CUDA_GRAM_3XBF16 ? LAUNCH<F, L, STARFA_CUDA_GRAM_3XBF16>(__VA_ARGS__)                     \
					     : LAUNCH<F, L, STARFA_CUDA_GRAM_3XFP16>(__VA_ARGS__))

inline bool starfa_gram_precision_valid(starfa_cuda_gram_precision p)
{
	return p == STARFA_CUDA_GRAM_3XTF32 || p == STARFA_CUDA_GRAM_TF32 || p == STARFA_CUDA_GRAM_3XBF16 ||
	       p == STARFA_CUDA_GRAM_3XFP16;
}

cudaError_t status_init(uint32_t *status, cudaStream_t stream)
{
	cudaError_t err = cudaMemsetAsync(status, 0, STARFA_SOLVE_FIRST_BAD_ROW * sizeof(uint32_t), stream);
	if (err == cudaSuccess)
		err = cudaMemsetAsync(status + STARFA_SOLVE_FIRST_BAD_ROW, 0xff, sizeof(uint32_t), stream);
	return err;
}

} // namespace

#endif
