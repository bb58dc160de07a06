/* SGD matrix-factorization updates on CSR tiles on CUDA. An update is run by a group of kLanes lanes
 * (8, 16 or 32: as many as the rank needs for one 16-byte load each), so a warp runs 32 / kLanes updates
 * at once. A launch takes up to STARFA_SGD_SPAN_MAX tiles: the groups in flight are dealt to the tiles in
 * proportion to their chunks, each tile's chunks round-robin to its groups, and each group runs its
 * chunk's updates in the chunk's order. Factor rows are FP32 or FP16 (converted to FP32 in registers). */
#include "gpu/sgd.h"

#include "cpu/half.h"

#include <cuda_fp16.h>
#include <stdlib.h>

namespace {

constexpr int kThreads = 256;

/* The tiles of one launch and their updaters: tile m's are [first[m], first[m + 1]), in proportion to its
 * chunks, so that a span's concurrent updaters spread over all its item blocks as over one wide tile's. */
template <int kMax>
struct SpanOf {
	static constexpr int kTiles = kMax;
	int n;
	int64_t first[kMax + 1];
	starfa_sgd_tile t[kMax];
};
/* A span's launch (its arguments: the span, the pass, the sum) within the 4 KB every CUDA device takes. */
using Span = SpanOf<STARFA_SGD_SPAN_MAX>;
static_assert(sizeof(Span) + sizeof(starfa_sgd_pass) + sizeof(double *) <= 4096, "the span's tiles pass 4 KB of kernel arguments");
/* A block's (starfa_cuda_sgd_tiles over more than STARFA_SGD_SPAN_MAX tiles) within the 32,764 bytes
 * that CUDA 12.1 and later take on Volta and later: the C x C tiles of SGD's split fallback (C = 14 on
 * 16 cores: 196) in one launch, as the GPUs alone run that region as one tile, rather than seven
 * launches of 32 whose tails added 8% (bench/PLACEMENT.md). */
using WideSpan = SpanOf<224>;
static_assert(sizeof(WideSpan) + sizeof(starfa_sgd_pass) + sizeof(double *) <= 32764, "a block's tiles pass 32,764 bytes of kernel arguments");

/* A tile's chunks of STARFA_SGD_CHUNK entries, counted in 64 bits: nnz + STARFA_SGD_CHUNK - 1 can pass
 * UINT32_MAX, and the quotient cannot. */
__host__ __device__ __forceinline__ uint32_t chunks_of(uint32_t nnz)
{
	return (uint32_t)(((uint64_t)nnz + STARFA_SGD_CHUNK - 1) / STARFA_SGD_CHUNK);
}

/* A tile that the span leaves out: no rows or no entries. */
inline bool empty(const starfa_sgd_tile &t)
{
	return t.nrows <= 0 || t.nnz == 0;
}

/* The updater's tile in the span (NULL past the last updater) and its place among the tile's updaters:
 * the last m with first[m] <= updater, by bisection (a block's span holds up to 224 tiles). */
template <typename S>
__device__ __forceinline__ const starfa_sgd_tile *tile_of(const S &span, int64_t updater, int64_t *local, int64_t *count)
{
	if (updater >= span.first[span.n])
		return nullptr;
	int lo = 0, hi = span.n - 1;
	while (lo < hi) {
		const int mid = (lo + hi + 1) / 2;
		if (span.first[mid] <= updater)
			lo = mid;
		else
			hi = mid - 1;
	}
	*local = updater - span.first[lo];
	*count = span.first[lo + 1] - span.first[lo];
	return &span.t[lo];
}

/* 16 bytes of a factor row: 4 floats or 8 halves. Raw is the 16 bytes as stored (kept in registers
 * between updates); unpack and pack convert them to and from floats; load and store below do both. */
template <typename T>
struct Pack;

template <>
struct Pack<float> {
	static constexpr int N = 4;
	__device__ static float get(const float *p) { return *p; }
	__device__ static void put(float *p, float x) { *p = x; }
	__device__ static float round(float x) { return x; } /* as stored */
	using Raw = float4;
	__device__ static Raw load_raw(const float *p) { return *reinterpret_cast<const float4 *>(p); }
	__device__ static void store_raw(float *p, Raw r) { *reinterpret_cast<float4 *>(p) = r; }
	__device__ static void unpack(Raw r, float (&x)[N]) { x[0] = r.x, x[1] = r.y, x[2] = r.z, x[3] = r.w; }
	__device__ static Raw pack(const float (&x)[N]) { return make_float4(x[0], x[1], x[2], x[3]); }
};

template <>
struct Pack<uint16_t> {
	static constexpr int N = 8;
	__device__ static float get(const uint16_t *p) { return starfa_half_to_float(*p); }
	__device__ static void put(uint16_t *p, float x) { *p = starfa_float_to_half(x); }
	using Raw = uint4; /* 8 halves in 4 registers */
	__device__ static Raw load_raw(const uint16_t *p) { return *reinterpret_cast<const uint4 *>(p); }
	__device__ static void store_raw(uint16_t *p, Raw r) { *reinterpret_cast<uint4 *>(p) = r; }
	__device__ static void unpack(Raw r, float (&x)[N])
	{
		const unsigned w[4] = {r.x, r.y, r.z, r.w};
		for (int i = 0; i < 4; i++) {
			const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&w[i]));
			x[2 * i] = f.x;
			x[2 * i + 1] = f.y;
		}
	}
	__device__ static Raw pack(const float (&x)[N])
	{
		unsigned w[4];
		for (int i = 0; i < 4; i++) {
			const __half2 h = __floats2half2_rn(x[2 * i], x[2 * i + 1]); /* to nearest even, as the CPU */
			w[i] = *reinterpret_cast<const unsigned *>(&h);
		}
		return make_uint4(w[0], w[1], w[2], w[3]);
	}
	__device__ static float round(float x) { return __half2float(__float2half_rn(x)); } /* as stored */
};

/* 16 bytes of a row as floats, and back. */
template <typename T>
__device__ __forceinline__ void load(const T *p, float (&x)[Pack<T>::N])
{
	Pack<T>::unpack(Pack<T>::load_raw(p), x);
}

template <typename T>
__device__ __forceinline__ void store(T *p, const float (&x)[Pack<T>::N])
{
	Pack<T>::store_raw(p, Pack<T>::pack(x));
}

/* The lanes of the caller's group of kLanes, as a shuffle mask. */
template <int kLanes>
__device__ __forceinline__ unsigned group_mask()
{
	return kLanes == 32 ? 0xffffffffu : ((1u << kLanes) - 1u) << (threadIdx.x % 32 / kLanes * kLanes);
}

/* The rows of a chunk's n entries starting at entry c0, into the group's staging row (one row search per
 * entry, in a pass across the group's lanes), visible to the whole group on return. */
template <int kLanes>
__device__ __forceinline__ void stage_rows(const uint32_t *__restrict__ rowptr, int64_t nrows, uint32_t c0, uint32_t n,
					   int lane, unsigned mask, uint32_t *s_row)
{
	int64_t row = starfa_sgd_row_of(rowptr, nrows, 0, c0);
	for (uint32_t q = lane; q < n; q += kLanes) {
		row = starfa_sgd_row_of(rowptr, nrows, row, c0 + q); /* rows only grow with q */
		s_row[q] = (uint32_t)row;
	}
	__syncwarp(mask);
}

/* The sum over a group's kLanes lanes (mask: the group's lanes). */
template <int kLanes>
__device__ __forceinline__ float group_sum(float v, unsigned mask)
{
	for (int offset = kLanes / 2; offset > 0; offset /= 2)
		v += __shfl_xor_sync(mask, v, offset);
	return v;
}

/* One update by a group: its lanes share the k dimensions (16 bytes at a time when kVec). */
template <typename T, int kLanes, bool kVec>
__device__ __forceinline__ float update(T *u, T *v, float r, const starfa_sgd_pass &s, int lane, unsigned mask, float *gu,
					float *gv)
{
	using P = Pack<T>;
	constexpr int N = P::N;
	const int64_t k = s.k;
	float dot = 0.0f;
	if (kVec) {
		for (int64_t d = lane; d < k / N; d += kLanes) {
			float a[N], b[N];
			load(u + d * N, a);
			load(v + d * N, b);
			for (int i = 0; i < N; i++)
				dot += a[i] * b[i];
		}
	} else {
		for (int64_t d = lane; d < k; d += kLanes)
			dot += P::get(u + d) * P::get(v + d);
	}
	dot = group_sum<kLanes>(dot, mask) + P::get(u + k) + P::get(v + k + 1);
	const float e = r - s.mu - dot, lambda = s.lambda;
	float lr = s.lr, lr_v = s.lr;
	if (gu) { /* AdaGrad: every lane reads the row's accumulator before lane 0 moves it */
		float su = 0.0f, sv = 0.0f;
		for (int64_t d = lane; d < k; d += kLanes) {
			const float pu = P::get(u + d), qv = P::get(v + d);
			const float a = e * qv - lambda * pu, b = e * pu - lambda * qv;
			su += a * a;
			sv += b * b;
		}
		su = group_sum<kLanes>(su, mask);
		sv = group_sum<kLanes>(sv, mask);
		const float g_u = *gu + su / (float)k, g_v = *gv + sv / (float)k;
		lr = s.lr / sqrtf(g_u);
		lr_v = s.lr / sqrtf(g_v);
		__syncwarp(mask);
		if (lane == 0) {
			*gu = g_u;
			*gv = g_v;
		}
	}
	if (kVec) {
		for (int64_t d = lane; d < k / N; d += kLanes) {
			float a[N], b[N], na[N], nb[N];
			load(u + d * N, a);
			load(v + d * N, b);
			for (int i = 0; i < N; i++) {
				na[i] = a[i] + lr * (e * b[i] - lambda * a[i]);
				nb[i] = b[i] + lr_v * (e * a[i] - lambda * b[i]);
			}
			store(u + d * N, na);
			store(v + d * N, nb);
		}
	} else {
		for (int64_t d = lane; d < k; d += kLanes) {
			const float pu = P::get(u + d), qv = P::get(v + d);
			P::put(u + d, pu + lr * (e * qv - lambda * pu));
			P::put(v + d, qv + lr_v * (e * pu - lambda * qv));
		}
	}
	if (lane == 0 && s.biases) {
		const float bu = P::get(u + k), cv = P::get(v + k + 1);
		P::put(u + k, bu + lr * (e - s.lambda_bias * bu));
		P::put(v + k + 1, cv + lr_v * (e - s.lambda_bias * cv));
	}
	return e;
}

/* Each group stages its chunk's rows in shared memory (one row search per entry, in a pass across the
 * group's lanes), then runs its updates in the chunk's order. */
template <typename T, int kLanes, bool kVec, typename S>
__global__ void __launch_bounds__(kThreads)
	sgd_kernel(const __grid_constant__ S span, const starfa_sgd_pass s, double *sse)
{
	constexpr int kGroups = kThreads / kLanes;
	__shared__ uint32_t s_row[kGroups][STARFA_SGD_CHUNK];
	const int lane = threadIdx.x % kLanes, gib = threadIdx.x / kLanes;
	const unsigned mask = group_mask<kLanes>();
	int64_t mine, nupdaters;
	const starfa_sgd_tile *t = tile_of(span, ((int64_t)blockIdx.x * kThreads + threadIdx.x) / kLanes, &mine, &nupdaters);
	if (!t)
		return; /* a whole group */
	const int64_t nrows = t->nrows, ldu = t->ldu, ldv = t->ldv, ldgu = t->ldgu, ldgv = t->ldgv;
	const uint32_t nnz = t->nnz, *__restrict__ rowptr = t->rowptr, *__restrict__ colind = t->colind;
	const float *__restrict__ val = t->val;
	T *U = static_cast<T *>(t->U), *V = static_cast<T *>(t->V);
	float *Gu = s.adagrad ? t->Gu : nullptr, *Gv = s.adagrad ? t->Gv : nullptr;
	double local = 0.0;
	const uint32_t nchunks = chunks_of(nnz);
	for (uint32_t chunk = (uint32_t)mine; chunk < nchunks; chunk += (uint32_t)nupdaters) {
		const uint32_t c0 = chunk * STARFA_SGD_CHUNK;
		const uint32_t n = nnz - c0 < STARFA_SGD_CHUNK ? nnz - c0 : STARFA_SGD_CHUNK;
		const uint32_t key = starfa_sgd_key(s.seed, s.epoch, t->id, chunk);
		stage_rows<kLanes>(rowptr, nrows, c0, n, lane, mask, s_row[gib]);
		for (uint32_t q = 0; q < n; q++) {
			const uint32_t i = starfa_sgd_order(q, n, key);
			const int64_t r = s_row[gib][i], c = __ldg(colind + c0 + i);
			const float e = update<T, kLanes, kVec>(U + r * ldu, V + c * ldv, __ldg(val + c0 + i), s, lane, mask,
								Gu ? Gu + r * ldgu : nullptr, Gv ? Gv + c * ldgv : nullptr);
			if (lane == 0)
				local += (double)e * e;
			__syncwarp(mask); /* the next update may read the row this one wrote */
		}
		__syncwarp(mask); /* the staged rows are read before the next chunk overwrites them */
	}
	if (lane == 0 && sse)
		atomicAdd(sse, local);
}

/* The same updates, software-pipelined, for rows that fit one 16-byte load a lane (k <= kLanes * N) and
 * no AdaGrad: while update q computes, the rows of update q + 1 are in flight and the indices of update
 * q + 2 are read. A row that update q + 1 shares with update q is forwarded from q's registers, so the
 * group's result is that of the sequential order (1 updater equals the CPU kernel to rounding). Lane
 * 0 of the group keeps the biases. */
template <typename T, int kLanes, typename S>
__global__ void __launch_bounds__(kThreads)
	sgd_pipelined_kernel(const __grid_constant__ S span, const starfa_sgd_pass s, double *sse)
{
	using P = Pack<T>;
	constexpr int N = P::N, kGroups = kThreads / kLanes;
	__shared__ uint32_t s_row[kGroups][STARFA_SGD_CHUNK];
	const int lane = threadIdx.x % kLanes, gib = threadIdx.x / kLanes, base = threadIdx.x % 32 / kLanes * kLanes;
	const unsigned mask = group_mask<kLanes>();
	int64_t mine, nupdaters;
	const starfa_sgd_tile *t = tile_of(span, ((int64_t)blockIdx.x * kThreads + threadIdx.x) / kLanes, &mine, &nupdaters);
	if (!t)
		return; /* a whole group */
	const int64_t nrows = t->nrows, ldu = t->ldu, ldv = t->ldv;
	const uint32_t nnz = t->nnz, *__restrict__ rowptr = t->rowptr, *__restrict__ colind = t->colind;
	const float *__restrict__ val = t->val;
	T *U = static_cast<T *>(t->U), *V = static_cast<T *>(t->V);
	const int64_t k = s.k;
	const bool active = lane < k / N; /* the lane's 16 bytes of the factors */
	const float lr = s.lr, lambda = s.lambda, lambda_b = s.lambda_bias;
	double local = 0.0;
	const uint32_t nchunks = chunks_of(nnz);
	for (uint32_t chunk = (uint32_t)mine; chunk < nchunks; chunk += (uint32_t)nupdaters) {
		const uint32_t c0 = chunk * STARFA_SGD_CHUNK;
		const uint32_t n = nnz - c0 < STARFA_SGD_CHUNK ? nnz - c0 : STARFA_SGD_CHUNK;
		const uint32_t key = starfa_sgd_key(s.seed, s.epoch, t->id, chunk);
		stage_rows<kLanes>(rowptr, nrows, c0, n, lane, mask, s_row[gib]);
		/* the indices of an update: its row, column and rating */
		auto entry = [&](uint32_t q, int64_t &r, int64_t &c, float &x) {
			const uint32_t i = starfa_sgd_order(q, n, key);
			r = s_row[gib][i];
			c = __ldg(colind + c0 + i);
			x = __ldg(val + c0 + i);
		};
		using Raw = typename P::Raw;
		/* a lane's 16 bytes of both rows, as stored (zeros past k), and lane 0's biases */
		auto fetch = [&](int64_t r, int64_t c, Raw &a, Raw &b, float &bu, float &cv) {
			if (active) {
				a = P::load_raw(U + r * ldu + lane * N);
				b = P::load_raw(V + c * ldv + lane * N);
			} else {
				a = Raw{};
				b = Raw{};
			}
			bu = lane == 0 ? P::get(U + r * ldu + k) : 0.0f;
			cv = lane == 0 ? P::get(V + c * ldv + k + 1) : 0.0f;
		};
		int64_t r, c, r1 = 0, c1 = 0;
		float x, x1 = 0.0f, bu, cv;
		Raw a, b;
		entry(0, r, c, x);
		fetch(r, c, a, b, bu, cv);
		if (n > 1)
			entry(1, r1, c1, x1);
		for (uint32_t q = 0; q < n; q++) {
			/* in flight while this update computes: the next one's rows, the one after's indices */
			Raw na{}, nb{};
			float nbu = 0.0f, ncv = 0.0f;
			int64_t r2 = 0, c2 = 0;
			float x2 = 0.0f;
			if (q + 1 < n)
				fetch(r1, c1, na, nb, nbu, ncv);
			if (q + 2 < n)
				entry(q + 2, r2, c2, x2);
			float af[N], bf[N];
			P::unpack(a, af);
			P::unpack(b, bf);
			float dot = 0.0f;
			for (int t = 0; t < N; t++)
				dot += af[t] * bf[t];
			dot = group_sum<kLanes>(dot, mask);
			float e = x - s.mu - dot - bu - cv; /* the biases: lane 0's */
			e = __shfl_sync(mask, e, base);
			float uf[N], vf[N];
			for (int t = 0; t < N; t++) {
				uf[t] = af[t] + lr * (e * bf[t] - lambda * af[t]);
				vf[t] = bf[t] + lr * (e * af[t] - lambda * bf[t]);
			}
			const Raw ua = P::pack(uf), vb = P::pack(vf); /* as memory will hold them */
			if (active) {
				P::store_raw(U + r * ldu + lane * N, ua);
				P::store_raw(V + c * ldv + lane * N, vb);
			}
			float nbu_cur = bu, ncv_cur = cv;
			if (lane == 0) {
				if (s.biases) {
					nbu_cur = bu + lr * (e - lambda_b * bu);
					ncv_cur = cv + lr * (e - lambda_b * cv);
					P::put(U + r * ldu + k, nbu_cur);
					P::put(V + c * ldv + k + 1, ncv_cur);
				}
				local += (double)e * e;
			}
			if (q + 1 < n) {
				/* forward what this update wrote to the next one, as stored */
				if (r1 == r) {
					na = ua;
					nbu = P::round(nbu_cur);
				}
				if (c1 == c) {
					nb = vb;
					ncv = P::round(ncv_cur);
				}
				a = na;
				b = nb;
				bu = nbu;
				cv = ncv;
				r = r1, c = c1, x = x1;
				r1 = r2, c1 = c2, x1 = x2;
			}
		}
		__syncwarp(mask); /* the staged rows are read before the next chunk overwrites them */
	}
	if (lane == 0 && sse)
		atomicAdd(sse, local);
}

/* Blocks of a kernel that fit on the device at once (one wave), from its measured occupancy. */
template <typename Kernel>
cudaError_t one_wave(Kernel kernel, int64_t *blocks)
{
	int device = 0, sms = 0, per_sm = 0;
	cudaError_t err = cudaGetDevice(&device);
	if (err == cudaSuccess)
		err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
	if (err == cudaSuccess)
		err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0);
	*blocks = (int64_t)sms * (per_sm > 0 ? per_sm : 1);
	return err;
}

/* One launch over span.n tiles of `chunks` chunks each: updaters 0 is as many groups as one wave of blocks
 * holds (more would wait for a second wave), dealt to the tiles in proportion to their chunks; fewer
 * updaters than tiles run the tiles one launch after the other. */
template <typename T, int kLanes, bool kVec, typename S>
cudaError_t launch(S &span, const uint32_t *chunks, const starfa_sgd_pass &s, int64_t nupdaters, double *sse,
		   cudaStream_t stream)
{
	const bool pipelined = kVec && !s.adagrad && s.k <= (int64_t)kLanes * Pack<T>::N;
	if (nupdaters == 0) {
		int64_t wave = 0;
		cudaError_t err = pipelined ? one_wave(sgd_pipelined_kernel<T, kLanes, S>, &wave)
					    : one_wave(sgd_kernel<T, kLanes, kVec, S>, &wave);
		if (err != cudaSuccess)
			return err;
		nupdaters = wave * (kThreads / kLanes);
	}
	int64_t total = 0;
	for (int m = 0; m < span.n; m++)
		total += chunks[m];
	if (total == 0)
		return cudaSuccess;
	if (nupdaters > total)
		nupdaters = total;
	if (nupdaters < span.n) {
		Span one = {};
		one.n = 1;
		for (int m = 0; m < span.n; m++) {
			one.t[0] = span.t[m];
			cudaError_t err = launch<T, kLanes, kVec, Span>(one, chunks + m, s, nupdaters, sse, stream);
			if (err != cudaSuccess)
				return err;
		}
		return cudaSuccess;
	}
	/* one updater a tile, the rest in proportion to the chunks (floored), so no more than asked */
	span.first[0] = 0;
	for (int m = 0; m < span.n; m++) {
		int64_t share = 1 + (nupdaters - span.n) * (int64_t)chunks[m] / total;
		share = share > (int64_t)chunks[m] ? (int64_t)chunks[m] : share;
		span.first[m + 1] = span.first[m] + share;
	}
	const unsigned blocks = (unsigned)((span.first[span.n] * kLanes + kThreads - 1) / kThreads);
	if (pipelined)
		sgd_pipelined_kernel<T, kLanes, S><<<blocks, kThreads, 0, stream>>>(span, s, sse);
	else
		sgd_kernel<T, kLanes, kVec, S><<<blocks, kThreads, 0, stream>>>(span, s, sse);
	return cudaGetLastError();
}

template <typename T, typename S>
cudaError_t dispatch(int lanes, bool vec, S &span, const uint32_t *chunks, const starfa_sgd_pass &s,
		     int64_t nupdaters, double *sse, cudaStream_t stream)
{
#define STARFA_SGD_LAUNCH(L, VEC) launch<T, L, VEC, S>(span, chunks, s, nupdaters, sse, stream)
	if (vec)
		return lanes == 8 ? STARFA_SGD_LAUNCH(8, true) : lanes == 16 ? STARFA_SGD_LAUNCH(16, true) : STARFA_SGD_LAUNCH(32, true);
	return lanes == 8 ? STARFA_SGD_LAUNCH(8, false) : lanes == 16 ? STARFA_SGD_LAUNCH(16, false) : STARFA_SGD_LAUNCH(32, false);
#undef STARFA_SGD_LAUNCH
}

/* The non-empty tiles, S::kTiles a launch, one launch after the other, through the caller's span and
 * its chunk counts (S::kTiles of them). */
template <typename S>
cudaError_t launch_all(S &span, uint32_t *chunks, int ntiles, const starfa_sgd_tile *tiles, const starfa_sgd_pass &pass,
		       int lanes, bool vec, int updaters, double *sse, cudaStream_t stream)
{
	span.n = 0;
	for (int m = 0; m <= ntiles; m++) {
		if (m < ntiles && empty(tiles[m]))
			continue;
		if (span.n == S::kTiles || (m == ntiles && span.n > 0)) {
			cudaError_t err = pass.half ? dispatch<uint16_t>(lanes, vec, span, chunks, pass, updaters, sse, stream)
						    : dispatch<float>(lanes, vec, span, chunks, pass, updaters, sse, stream);
			if (err != cudaSuccess)
				return err;
			span.n = 0;
		}
		if (m < ntiles) {
			chunks[span.n] = chunks_of(tiles[m].nnz);
			span.t[span.n++] = tiles[m];
		}
	}
	return cudaSuccess;
}

} // namespace

extern "C" int starfa_cuda_sgd_lanes(int64_t k, int half, int vec)
{
	const int64_t per_lane = vec ? (half ? 8 : 4) : 1, need = (k + per_lane - 1) / per_lane;
	return need <= 8 ? 8 : need <= 16 ? 16 : 32;
}

extern "C" cudaError_t starfa_cuda_sgd_tiles(int ntiles, const struct starfa_sgd_tile *tiles,
					     const struct starfa_sgd_pass *pass, int updaters, double *sse, cudaStream_t stream)
{
	if (sse) {
		cudaError_t err = cudaMemsetAsync(sse, 0, sizeof *sse, stream);
		if (err != cudaSuccess)
			return err;
	}
	if (ntiles < 0 || pass->k < 1 || updaters < 0 || (ntiles > 0 && !tiles))
		return cudaErrorInvalidValue;
	/* 16-byte loads when every row allows them */
	const int64_t per16 = pass->half ? 8 : 4;
	bool vec = pass->k % per16 == 0;
	int nonempty = 0;
	for (int m = 0; m < ntiles; m++)
		if (!empty(tiles[m])) {
			nonempty++;
			vec = vec && tiles[m].ldu % per16 == 0 && (uintptr_t)tiles[m].U % 16 == 0 &&
			      tiles[m].ldv % per16 == 0 && (uintptr_t)tiles[m].V % 16 == 0;
		}
	const int lanes = starfa_cuda_sgd_lanes(pass->k, pass->half, vec);
	if (nonempty <= STARFA_SGD_SPAN_MAX) { /* a span's state on the worker's stack (about 4 KB) */
		Span span = {};
		uint32_t chunks[Span::kTiles];
		return launch_all(span, chunks, ntiles, tiles, *pass, lanes, vec, updaters, sse, stream);
	}
	/* a block's wide span, 27 KB: off the worker's stack */
	WideSpan *span = static_cast<WideSpan *>(calloc(1, sizeof(WideSpan)));
	uint32_t *chunks = static_cast<uint32_t *>(malloc(sizeof(uint32_t) * WideSpan::kTiles));
	cudaError_t err = span && chunks ? launch_all(*span, chunks, ntiles, tiles, *pass, lanes, vec, updaters, sse, stream)
					 : cudaErrorMemoryAllocation;
	free(span);
	free(chunks);
	return err;
}

extern "C" cudaError_t starfa_cuda_sgd(int64_t nrows, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind,
				       const float *val, void *U, int64_t ldu, void *V, int64_t ldv, float *Gu,
				       int64_t ldgu, float *Gv, int64_t ldgv, const struct starfa_sgd_pass *pass,
				       int updaters, double *sse, cudaStream_t stream)
{
	if (nnz < 0 || nnz > (int64_t)UINT32_MAX)
		return cudaErrorInvalidValue;
	const starfa_sgd_tile tile = {nrows, (uint32_t)nnz, rowptr, colind, val, V, ldv, Gv, ldgv, pass->tile, U, ldu, Gu, ldgu};
	return starfa_cuda_sgd_tiles(1, &tile, pass, updaters, sse, stream);
}
