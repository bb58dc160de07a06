/* The top k of a block of rows' scores against every column on CUDA: a chunk of rows' scores by cuBLAS
 * SGEMM, their own columns set to NaN, then an exact selection a row by radix, finished in shared memory
 * (select_rows). */
#include "gpu/topk.h"
#include "cpu/topk.h" /* starfa_ranks_above */

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

namespace {

constexpr int kThreads = 256;                  /* a block a row in the selection */
/* The scores of a chunk of rows, at most, and at most a quarter of the device's free memory. Each chunk
 * costs a pass of the SGEMM and the selection's partial last wave: on an H100, 300,000 x 20,000 scores at
 * rank 32 took 98.9 / 70.4 / 59.6 / 52.3 / 45.6 / 41.3 / 39.8 ms in chunks of 16 MB, 32 MB ... 1 GB. (The
 * SGEMM of the next chunk on a second stream, beside the selection of the last, in two halves of 512 MB:
 * 40.0 ms.) */
std::atomic<int64_t> chunk_limit{1ll << 30};
constexpr int kChunkFreeShare = 4;

/* Scores as keys that order like them (higher score, higher key); NaN is 0, below every other key, and -0
 * is +0, as the float comparison of the CPU selection has them equal. */
__device__ inline uint32_t score_key(float s)
{
	if (s != s)
		return 0u;
	uint32_t b = __float_as_uint(s);
	if (b == 0x80000000u)
		b = 0u;
	return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ inline void write_pair(float *row, int64_t i, float score, int32_t item)
{
	row[2 * i] = score;
	row[2 * i + 1] = __int_as_float(item);
}

/* Every row's list empty: (NaN, -1) k times. */
__global__ void empty_lists(int64_t nrows, int k, float *L, int64_t ldl)
{
	const int64_t n = nrows * k;
	for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x)
		write_pair(L + (e / k) * ldl, e % k, __int_as_float(0x7fc00000), -1);
}

/* A block-wide step in which some threads have an item (`on`): this thread's place among them, in thread
 * order after the *base placed in earlier steps; *base then counts this step's too. Every thread of the
 * block calls it, with a shared slot a warp in warp_total. */
__device__ unsigned place_in_block(bool on, unsigned *base, unsigned *warp_total)
{
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const unsigned bits = __ballot_sync(0xffffffffu, on);
	if (lane == 0)
		warp_total[warp] = __popc(bits);
	__syncthreads();
	unsigned at = *base + __popc(bits & ((1u << lane) - 1u));
	for (int w = 0; w < warp; w++)
		at += warp_total[w];
	__syncthreads(); /* every thread has read *base */
	if (threadIdx.x == 0)
		for (int w = 0; w < (int)(blockDim.x >> 5); w++)
			*base += warp_total[w];
	__syncthreads();
	return at;
}

/* The active rows in order (one block): rows[0 .. *count). */
__global__ void active_rows(int64_t nrows, const float *active, int32_t *rows, int *count)
{
	__shared__ unsigned warp_total[32];
	__shared__ unsigned base;
	if (threadIdx.x == 0)
		base = 0;
	__syncthreads();
	for (int64_t r0 = 0; r0 < nrows; r0 += blockDim.x) {
		const int64_t r = r0 + threadIdx.x;
		const bool on = r < nrows && active[r] != 0.0f;
		const unsigned at = place_in_block(on, &base, warp_total);
		if (on)
			rows[at] = (int32_t)r;
	}
	if (threadIdx.x == 0)
		*count = (int)base;
}

/* Ap[r] = A's row rows[r], rank values, r < n. */
__global__ void gather_rows(int n, int rank, const int32_t *rows, const float *A, int64_t lda, float *Ap)
{
	const int64_t total = (int64_t)n * rank;
	for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x)
		Ap[e] = A[(int64_t)rows[e / rank] * lda + e % rank];
}

constexpr int kCandidates = 1024; /* keys a block gathers into shared memory to finish the selection there */
constexpr int kUnroll = 4;        /* keys a thread loads at once in a pass over a row */
constexpr int kMaxBins = 2048;   /* 11-bit digits */

/* Keys key_at(i) of items i = i0 + j * kThreads + this thread, j < kUnroll (0 from n on): loaded before
 * any is used, so that kUnroll loads are in flight. */
template <class KeyAt>
__device__ inline void load_keys(KeyAt key_at, int64_t n, int64_t i0, uint32_t (&key)[kUnroll])
{
#pragma unroll
	for (int j = 0; j < kUnroll; j++) {
		const int64_t i = i0 + j * kThreads + threadIdx.x;
		key[j] = i < n ? key_at(i) : 0u;
	}
}

/* hist[0 .. 2^bits) = how many of keys 0 .. n (key_at(i)) that are valid (not 0) and match prefix on mask
 * have each value of the digit (key >> shift) & (2^bits - 1). A warp's lanes with one digit add once. */
template <class KeyAt>
__device__ void count_digits(KeyAt key_at, int64_t n, uint32_t prefix, uint32_t mask, int shift, int bits, unsigned *hist)
{
	const int lane = threadIdx.x & 31;
	for (int b = threadIdx.x; b < (1 << bits); b += kThreads)
		hist[b] = 0;
	__syncthreads();
	/* kUnroll keys loaded before any is counted (loads in flight); whole warps in every step, as the match
	 * is warp-wide. */
	for (int64_t i0 = 0; i0 < n; i0 += kThreads * kUnroll) {
		uint32_t key[kUnroll];
		load_keys(key_at, n, i0, key);
#pragma unroll
		for (int j = 0; j < kUnroll; j++) {
			const bool in = key[j] != 0u && (key[j] & mask) == prefix;
			const unsigned digit = in ? (key[j] >> shift) & ((1u << bits) - 1u) : ~0u;
			const unsigned peers = __match_any_sync(0xffffffffu, digit);
			if (in && lane == __ffs(peers) - 1)
				atomicAdd(&hist[digit], (unsigned)__popc(peers));
		}
	}
	__syncthreads();
}

struct digit_found {
	unsigned digit, above, at, total; /* the digit; the counts above it and at it; all counted */
};

/* The digit of hist (2^bits bins) where the count from the top reaches want (want <= the total; want 0:
 * the highest digit with any, unused), by warp 0; every thread gets it. */
__device__ digit_found find_digit(const unsigned *hist, int bits, unsigned want, digit_found *shared)
{
	if (threadIdx.x < 32) {
		const int lane = threadIdx.x, per = (1 << bits) / 32 > 0 ? (1 << bits) / 32 : 1;
		const int top = (1 << bits) - 1 - lane * per; /* this lane's bins: top, top - 1, ..., down per of them */
		unsigned sum = 0;
		for (int j = 0; j < per && top - j >= 0; j++)
			sum += hist[top - j];
		unsigned incl = sum;
		for (int o = 1; o < 32; o <<= 1) {
			const unsigned v = __shfl_up_sync(0xffffffffu, incl, o);
			if (lane >= o)
				incl += v;
		}
		const unsigned total = __shfl_sync(0xffffffffu, incl, 31);
		unsigned acc = incl - sum;
		if (lane == 0)
			shared->total = total;
		if (acc < want && want <= incl)
			for (int j = 0; j < per; j++) {
				const unsigned c = hist[top - j];
				if (acc + c >= want) {
					shared->digit = (unsigned)(top - j);
					shared->above = acc;
					shared->at = c;
					break;
				}
				acc += c;
			}
	}
	__syncthreads();
	const digit_found f = *shared;
	__syncthreads(); /* read by all before warp 0 writes it again */
	return f;
}

/* Row r of the chunk: its scores S[r] (its CSR row's columns set to NaN first), its list into L's row
 * rows[r] (or first + r); the k best (k no more than the valid scores) by their order-preserving keys.
 * Most rows: a pass over every sample-th tile of kThreads * kUnroll keys takes each thread's largest key,
 * the k-th largest of those bounds the k best from below, and a second pass gathers the keys at or above
 * it into shared memory. Where that bound does not exist (k above the block's threads, fewer than k
 * threads with a valid score in the sample) or lets through more keys than shared memory holds (ties, or
 * a row whose best scores sit in the tiles the sample skips), radix: 11-bit digits from the top, counted
 * over the row, narrow the k-th key to a range, until the range holds at most kCandidates keys; one more
 * pass keeps the keys above the range and gathers those in it. In shared memory the remaining digits and
 * the ties (lowest index first) are settled. A range still wider after the last digit is the k-th key
 * itself, tied that often: then the row is passed over in index order. Last, the list is sorted by rank. */
__global__ void __launch_bounds__(kThreads) select_rows(int64_t ncols, float *S, const int32_t *rows, int64_t first,
						       const uint32_t *rowptr, const uint32_t *colind, int k, int sample,
						       float *L, int64_t ldl)
{
	__shared__ unsigned hist[kMaxBins];
	__shared__ uint32_t cand_key[kCandidates];
	__shared__ int32_t cand_item[kCandidates];
	__shared__ int32_t kept_item[STARFA_CUDA_TOP_K_MAX];
	__shared__ float kept_score[STARFA_CUDA_TOP_K_MAX];
	__shared__ digit_found found;
	__shared__ unsigned s_kept, s_cand, s_eq_base;
	__shared__ uint32_t s_bound;
	__shared__ unsigned warp_equal[kThreads / 32];
	const int tid = threadIdx.x, lane = tid & 31;
	float *s = S + (int64_t)blockIdx.x * ncols;
	const int64_t row = rows ? (int64_t)rows[blockIdx.x] : first + blockIdx.x;
	float *out = L + row * ldl;
	const auto row_key = [s](int64_t i) { return score_key(s[i]); };
	/* The row's own columns (its seen items) out of the ranking, as NaN scores. */
	if (rowptr) {
		for (uint32_t p = rowptr[row] + tid; p < rowptr[row + 1]; p += kThreads)
			s[colind[p]] = __int_as_float(0x7fc00000);
		__syncthreads();
	}

	/* The k-th key's range: the keys matching prefix on mask, bits low and up fixed. */
	uint32_t prefix = 0, mask = 0;
	unsigned want = 0, K = 0, in_range = 0;
	int low = 32;
	/* The keys in the range are in cand_key / cand_item, and any above it in kept_item (none after the
	 * bound's pass, whose range is every key). */
	bool gathered = false;
	if (tid == 0) {
		s_kept = 0;
		s_cand = 0;
		s_bound = 0;
	}
	/* First a bound from one cheap pass: each thread's largest key over its share of a sample of the row
	 * (every sample-th tile). The k-th largest of those is a key at least k keys reach, so the k best are
	 * among the keys at or above it; where they fit in shared memory (most rows), one more pass gathers
	 * them. */
	if (k <= kThreads) {
		uint32_t best = 0;
		for (int64_t i0 = 0; i0 < ncols; i0 += (int64_t)kThreads * kUnroll * sample) {
			uint32_t key[kUnroll];
			load_keys(row_key, ncols, i0, key);
#pragma unroll
			for (int j = 0; j < kUnroll; j++)
				best = key[j] > best ? key[j] : best;
		}
		cand_key[tid] = best; /* kThreads <= kCandidates */
		__syncthreads();
		unsigned above = 0; /* the maxima ranking above this thread's: higher, or equal and of a lower thread */
		for (int t = 0; t < kThreads; t++)
			above += cand_key[t] > best || (cand_key[t] == best && t < tid);
		if (above == (unsigned)k - 1)
			s_bound = best; /* 0 (NaN) when fewer than k threads saw a valid score: no bound */
		__syncthreads();
		const uint32_t bound = s_bound;
		if (bound != 0u) {
			for (int64_t i0 = 0; i0 < ncols; i0 += kThreads * kUnroll) {
				uint32_t key[kUnroll];
				load_keys(row_key, ncols, i0, key);
#pragma unroll
				for (int j = 0; j < kUnroll; j++) { /* a warp's keys placed by one atomic */
					const bool take = key[j] >= bound;
					const unsigned taken = __ballot_sync(0xffffffffu, take);
					unsigned at = 0;
					if (lane == 0 && taken)
						at = atomicAdd(&s_cand, (unsigned)__popc(taken));
					at = __shfl_sync(0xffffffffu, at, 0) + __popc(taken & ((1u << lane) - 1u));
					if (take && at < kCandidates) {
						cand_key[at] = key[j];
						cand_item[at] = (int32_t)(i0 + j * kThreads + tid);
					}
				}
			}
			__syncthreads();
			if (s_cand <= kCandidates) {
				K = want = (unsigned)k;
				in_range = s_cand;
				gathered = true;
			}
		}
	}
	if (!gathered) {
		/* The row's passes: bits 31..21, 20..10, 9..0. */
		for (int pass = 0; pass < 3; pass++) {
			const int bits = pass < 2 ? 11 : 10, shift = low - bits;
			count_digits(row_key, ncols, prefix, mask, shift, bits, hist);
			if (pass == 0) {
				const digit_found all = find_digit(hist, bits, 0, &found);
				K = all.total < (unsigned)k ? all.total : (unsigned)k;
				want = K;
				if (K == 0)
					break;
			}
			const digit_found f = find_digit(hist, bits, want, &found);
			prefix |= f.digit << shift;
			mask |= ((1u << bits) - 1u) << shift;
			low = shift;
			want -= f.above;
			in_range = f.at;
			if (in_range <= kCandidates)
				break;
		}
		if (tid == 0) {
			s_kept = 0;
			s_cand = 0;
			s_eq_base = 0;
		}
		__syncthreads();
	}
	if (!gathered && K > 0 && in_range <= kCandidates) {
		/* Above the range: kept. In it: gathered. */
		for (int64_t i0 = 0; i0 < ncols; i0 += kThreads * kUnroll) {
			uint32_t key[kUnroll];
			load_keys(row_key, ncols, i0, key);
#pragma unroll
			for (int j = 0; j < kUnroll; j++) {
				const int32_t i = (int32_t)(i0 + j * kThreads + tid);
				if (key[j] == 0u)
					continue;
				if ((key[j] & mask) > prefix) {
					kept_item[atomicAdd(&s_kept, 1u)] = i;
				} else if ((key[j] & mask) == prefix) {
					const unsigned at = atomicAdd(&s_cand, 1u);
					cand_key[at] = key[j];
					cand_item[at] = i;
				}
			}
		}
		__syncthreads();
		gathered = true;
	}
	if (gathered) {
		/* The range narrowed over the gathered keys. */
		const auto cand_at = [](int64_t i) { return cand_key[i]; };
		while (low > 0) {
			const int bits = low < 8 ? low : 8, shift = low - bits;
			count_digits(cand_at, in_range, prefix, mask, shift, bits, hist);
			const digit_found f = find_digit(hist, bits, want, &found);
			prefix |= f.digit << shift;
			mask |= ((1u << bits) - 1u) << shift;
			low = shift;
			want -= f.above;
		}
		/* prefix is the k-th key: the candidates above it, and the `want` equal to it with the lowest
		 * indices. */
		for (unsigned e = tid; e < in_range; e += kThreads) {
			const uint32_t key = cand_key[e];
			bool keep = key > prefix;
			if (key == prefix) {
				unsigned before = 0;
				for (unsigned j = 0; j < in_range; j++)
					before += cand_key[j] == prefix && cand_item[j] < cand_item[e];
				keep = before < want;
			}
			if (keep)
				kept_item[atomicAdd(&s_kept, 1u)] = cand_item[e];
		}
	} else if (K > 0) {
		/* The k-th key tied more often than shared memory holds: above it kept, then the ties in index
		 * order, a block of the row at a time, until `want` of them. */
		for (int64_t i0 = 0; i0 < ncols; i0 += kThreads) {
			const int64_t i = i0 + tid;
			const uint32_t key = i < ncols ? score_key(s[i]) : 0u;
			if (key > prefix)
				kept_item[atomicAdd(&s_kept, 1u)] = (int32_t)i;
			if (s_eq_base >= want) /* the same for every thread: no barrier skipped by some */
				continue;
			const unsigned at = place_in_block(key == prefix, &s_eq_base, warp_equal);
			if (key == prefix && at < want)
				kept_item[K - want + at] = (int32_t)i;
		}
	}
	__syncthreads();
	for (unsigned e = tid; e < K; e += kThreads)
		kept_score[e] = s[kept_item[e]];
	__syncthreads();
	/* Best first: each kept item's place is how many rank above it. */
	for (unsigned e = tid; e < K; e += kThreads) {
		unsigned place = 0;
		for (unsigned j = 0; j < K; j++)
			place += starfa_ranks_above(kept_score[j], kept_item[j], kept_score[e], kept_item[e]);
		write_pair(out, place, kept_score[e], kept_item[e]);
	}
	for (int64_t e = K + tid; e < k; e += kThreads)
		write_pair(out, e, __int_as_float(0x7fc00000), -1);
}

size_t round_up(size_t n)
{
	return (n + 255) & ~(size_t)255;
}

} // namespace

extern "C" starfa_gpu_status starfa_cuda_top_k_rows(cublasHandle_t cublas, int64_t nrows, int64_t ncols, int64_t rank,
						    const float *A, int64_t lda, const float *B, int64_t ldb,
						    const uint32_t *rowptr, const uint32_t *colind, const float *active,
						    int64_t k, float *L, int64_t ldl, cudaStream_t stream)
{
	starfa_gpu_status st = starfa_gpu_ok();
	if (nrows <= 0 || k <= 0)
		return st;
	if (k > STARFA_CUDA_TOP_K_MAX) {
		starfa_gpu_keep_first(st, "starfa_cuda_top_k_rows (k above STARFA_CUDA_TOP_K_MAX)", cudaErrorInvalidValue);
		return st;
	}
	const int blocks = (int)((nrows * k + 255) / 256 < 4096 ? (nrows * k + 255) / 256 : 4096);
	empty_lists<<<blocks, 256, 0, stream>>>(nrows, (int)k, L, ldl);
	starfa_gpu_keep_first(st, "empty_lists (top k)", cudaGetLastError());
	if (ncols <= 0 || st.call)
		return st;

	/* A chunk's rows: as many as the chunk limit's bytes of scores hold (and a quarter of the free memory), in
	 * whole waves of the selection's blocks. */
	size_t free_bytes = 0, total_bytes = 0;
	starfa_gpu_keep_first(st, "cudaMemGetInfo (top k)", cudaMemGetInfo(&free_bytes, &total_bytes));
	const int64_t share = (int64_t)(free_bytes / kChunkFreeShare), limit = chunk_limit.load(std::memory_order_relaxed);
	int64_t chunk = (share < limit ? share : limit) / (ncols * (int64_t)sizeof(float));
	int device = 0, sms = 0, per_sm = 0;
	starfa_gpu_keep_first(st, "cudaGetDevice (top k)", cudaGetDevice(&device));
	starfa_gpu_keep_first(st, "cudaDeviceGetAttribute (top k)",
			      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
	starfa_gpu_keep_first(st, "cudaOccupancyMaxActiveBlocksPerMultiprocessor (top k)",
			      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, select_rows, kThreads, 0));
	const int64_t wave = (int64_t)sms * per_sm;
	if (wave > 0 && chunk >= wave)
		chunk -= chunk % wave;
	chunk = chunk < 1 ? 1 : chunk > nrows ? nrows : chunk;
	if (st.call)
		return st;
	const size_t rows_bytes = round_up((size_t)nrows * sizeof(int32_t)), count_bytes = round_up(sizeof(int)),
		     packed_bytes = round_up((size_t)(chunk * (rank > 0 ? rank : 1)) * sizeof(float)),
		     scores_bytes = (size_t)(chunk * ncols) * sizeof(float);
	char *scratch = nullptr;
	starfa_gpu_keep_first(st, "cudaMallocAsync (top k)",
	     cudaMallocAsync(reinterpret_cast<void **>(&scratch), rows_bytes + count_bytes + packed_bytes + scores_bytes,
			     stream));
	if (st.call)
		return st;
	int32_t *rows = active ? reinterpret_cast<int32_t *>(scratch) : nullptr;
	int *count = reinterpret_cast<int *>(scratch + rows_bytes);
	float *Ap = reinterpret_cast<float *>(scratch + rows_bytes + count_bytes);
	float *S = reinterpret_cast<float *>(scratch + rows_bytes + count_bytes + packed_bytes);

	int64_t listed = nrows;
	if (active) {
		active_rows<<<1, 1024, 0, stream>>>(nrows, active, rows, count);
		starfa_gpu_keep_first(st, "active_rows (top k)", cudaGetLastError());
		int host_count = 0;
		starfa_gpu_keep_first(st, "cudaMemcpyAsync (top k: active rows)",
		     cudaMemcpyAsync(&host_count, count, sizeof host_count, cudaMemcpyDeviceToHost, stream));
		starfa_gpu_keep_first(st, "cudaStreamSynchronize (top k: active rows)", cudaStreamSynchronize(stream));
		listed = host_count;
	}
	/* The bound's sample: every sample-th tile of the row. In a row of random order, about k * sample keys
	 * then pass the bound (under a quarter of kCandidates), each thread sampling 8 keys or more; the
	 * bound's pass then reads a sample-th of the row instead of all of it. */
	int sample = 1;
	while (sample < 16 && 2 * sample * k <= kThreads && ncols / (2 * sample) >= 8 * kThreads)
		sample *= 2;
	starfa_gpu_keep_first(st, "cublasSetStream (top k)", cudaSuccess, cublasSetStream(cublas, stream));
	for (int64_t first = 0; first < listed && !st.call; first += chunk) {
		const int n = (int)(listed - first < chunk ? listed - first : chunk);
		const float *X = A + first * lda;
		int64_t ldx = lda;
		if (rows && rank > 0) {
			const int64_t total = (int64_t)n * rank;
			const int gblocks = (int)((total + 255) / 256 < 4096 ? (total + 255) / 256 : 4096);
			gather_rows<<<gblocks, 256, 0, stream>>>(n, (int)rank, rows + first, A, lda, Ap);
			starfa_gpu_keep_first(st, "gather_rows (top k)", cudaGetLastError());
			X = Ap;
			ldx = rank;
		}
		if (rank > 0) {
			const float one = 1.0f, zero = 0.0f;
			/* Column-major: S (ncols x n, ld ncols) = Bᵀ (ncols x rank) X (rank x n). */
			starfa_gpu_keep_first(st, "cublasSgemm (top k scores)", cudaSuccess,
			     cublasSgemm(cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)ncols, n, (int)rank, &one, B, (int)ldb, X,
					 (int)ldx, &zero, S, (int)ncols));
		} else {
			starfa_gpu_keep_first(st, "cudaMemsetAsync (top k scores)",
			     cudaMemsetAsync(S, 0, (size_t)n * (size_t)ncols * sizeof(float), stream));
		}
		select_rows<<<n, kThreads, 0, stream>>>(ncols, S, rows ? rows + first : nullptr, first, rowptr, colind,
							(int)k, sample, L, ldl);
		starfa_gpu_keep_first(st, "select_rows (top k)", cudaGetLastError());
	}
	starfa_gpu_keep_first(st, "cudaFreeAsync (top k)", cudaFreeAsync(scratch, stream));
	return st;
}

extern "C" size_t starfa_cuda_top_k_chunk_limit(size_t bytes)
{
	return (size_t)chunk_limit.exchange(bytes > (size_t)INT64_MAX ? INT64_MAX : (int64_t)bytes);
}
