/* The top k of a block of rows' scores against every column on CUDA: a chunk of rows' scores by cuBLAS
 * SGEMM, their own columns set to NaN, then an exact selection a row by radix (four passes of 8 bits over
 * the row's scores to find the k-th largest, one pass to gather the k). */
#include "gpu/topk.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kThreads = 256;                  /* a block a row in the selection */
constexpr int64_t kChunkBytes = 128ll << 20;    /* the scores of a chunk of rows */

void note(starfa_gpu_status &st, const char *call, cudaError_t cuda, cublasStatus_t cublas = CUBLAS_STATUS_SUCCESS)
{
	if (!st.call && (cuda != cudaSuccess || cublas != CUBLAS_STATUS_SUCCESS))
		st = starfa_gpu_status{call, cuda, CUSPARSE_STATUS_SUCCESS, cublas};
}

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

__device__ inline bool ranks_above(float sa, int32_t ia, float sb, int32_t ib)
{
	return sa > sb || (sa == sb && ia < ib);
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

/* The active rows in order (one block): rows[0 .. *count). */
__global__ void active_rows(int64_t nrows, const float *active, int32_t *rows, int *count)
{
	__shared__ int warp_total[32];
	__shared__ int base;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
	if (threadIdx.x == 0)
		base = 0;
	__syncthreads();
	for (int64_t r0 = 0; r0 < nrows; r0 += blockDim.x) {
		const int64_t r = r0 + threadIdx.x;
		const bool on = r < nrows && active[r] != 0.0f;
		const unsigned bits = __ballot_sync(0xffffffffu, on);
		if (lane == 0)
			warp_total[warp] = __popc(bits);
		__syncthreads();
		int at = base + __popc(bits & ((1u << lane) - 1u));
		for (int w = 0; w < warp; w++)
			at += warp_total[w];
		if (on)
			rows[at] = (int32_t)r;
		__syncthreads();
		if (threadIdx.x == 0)
			for (int w = 0; w < warps; w++)
				base += warp_total[w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		*count = base;
}

/* Ap[r] = A's row rows[r], rank values, r < n. */
__global__ void gather_rows(int n, int rank, const int32_t *rows, const float *A, int64_t lda, float *Ap)
{
	const int64_t total = (int64_t)n * rank;
	for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x)
		Ap[e] = A[(int64_t)rows[e / rank] * lda + e % rank];
}

/* The chunk's rows' own columns out of the ranking: a warp a row. */
__global__ void exclude_seen(int n, const int32_t *rows, int64_t first, const uint32_t *rowptr, const uint32_t *colind,
			     int64_t ncols, float *S)
{
	const int r = (int)((blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
	if (r >= n)
		return;
	const int64_t row = rows ? rows[r] : first + r;
	float *s = S + (int64_t)r * ncols;
	for (uint32_t p = rowptr[row] + lane; p < rowptr[row + 1]; p += 32)
		s[colind[p]] = __int_as_float(0x7fc00000);
}

/* Row r of the chunk: its scores S[r], its list into L's row rows[r] (or first + r). The k-th largest key
 * (with k no more than the valid scores) by its bytes from the top, counting each byte's values among the
 * keys that match the bytes found so far; then the keys above it, and as many equal to it as the count
 * leaves, lowest index first (in index order only where more are equal than are taken); then the list
 * sorted by rank. */
__global__ void __launch_bounds__(kThreads) select_rows(int64_t ncols, const float *S, const int32_t *rows, int64_t first,
						       int k, float *L, int64_t ldl)
{
	__shared__ unsigned hist[256];
	__shared__ float kept_score[STARFA_CUDA_TOP_K_MAX];
	__shared__ int32_t kept_item[STARFA_CUDA_TOP_K_MAX];
	__shared__ uint32_t s_prefix;
	__shared__ unsigned s_remaining, s_total, s_equal, s_taken_above, s_eq_base;
	__shared__ int warp_equal[kThreads / 32];
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const float *s = S + (int64_t)blockIdx.x * ncols;
	float *out = L + (rows ? (int64_t)rows[blockIdx.x] : first + blockIdx.x) * ldl;

	uint32_t prefix = 0, mask = 0;
	unsigned remaining = 0, total = 0;
	for (int shift = 24; shift >= 0; shift -= 8) {
		hist[tid] = 0;
		__syncthreads();
		for (int64_t i0 = 0; i0 < ncols; i0 += kThreads) {
			const int64_t i = i0 + tid;
			const uint32_t key = i < ncols ? score_key(s[i]) : 0u;
			const bool in = key != 0u && (key & mask) == prefix;
			const unsigned digit = in ? (key >> shift) & 255u : 256u;
			const unsigned peers = __match_any_sync(0xffffffffu, digit);
			if (in && lane == __ffs(peers) - 1)
				atomicAdd(&hist[digit], (unsigned)__popc(peers));
		}
		__syncthreads();
		if (shift == 24) {
			/* How many valid scores: k of them are taken, or all when fewer. */
			if (warp == 0) {
				unsigned sum = 0;
				for (int j = lane; j < 256; j += 32)
					sum += hist[j];
				for (int o = 16; o > 0; o >>= 1)
					sum += __shfl_xor_sync(0xffffffffu, sum, o);
				if (lane == 0) {
					s_total = sum;
					s_remaining = sum < (unsigned)k ? sum : (unsigned)k;
				}
			}
			__syncthreads();
			total = s_total;
			remaining = s_remaining;
			__syncthreads(); /* read before warp 0 writes s_remaining again */
			if (remaining == 0)
				break;
		}
		/* The byte value where the count from the top reaches `remaining`: lane l holds values
		 * 255 - 8l down to 248 - 8l. */
		if (warp == 0) {
			unsigned c[8], sum = 0;
			for (int j = 0; j < 8; j++) {
				c[j] = hist[255 - 8 * lane - j];
				sum += c[j];
			}
			unsigned incl = sum;
			for (int o = 1; o < 32; o <<= 1) {
				const unsigned v = __shfl_up_sync(0xffffffffu, incl, o);
				if (lane >= o)
					incl += v;
			}
			unsigned acc = incl - sum;
			if (acc < remaining && remaining <= incl)
				for (int j = 0; j < 8; j++) {
					if (acc + c[j] >= remaining) {
						s_prefix = prefix | (uint32_t)(255 - 8 * lane - j) << shift;
						s_remaining = remaining - acc;
						s_equal = c[j];
						break;
					}
					acc += c[j];
				}
		}
		__syncthreads();
		prefix = s_prefix;
		remaining = s_remaining;
		mask |= 255u << shift;
	}
	const unsigned K = total < (unsigned)k ? total : (unsigned)k;
	if (K > 0) {
		/* prefix is the k-th largest key; `remaining` of the s_equal keys equal to it are taken. */
		const uint32_t T = prefix;
		const unsigned above = K - remaining;
		const bool ordered = s_equal > remaining; /* ties at T: the lowest indices win */
		if (tid == 0) {
			s_taken_above = 0;
			s_eq_base = 0;
		}
		__syncthreads();
		for (int64_t i0 = 0; i0 < ncols; i0 += kThreads) {
			const int64_t i = i0 + tid;
			const uint32_t key = i < ncols ? score_key(s[i]) : 0u;
			if (!ordered) {
				if (key >= T && key != 0u) {
					const unsigned at = atomicAdd(&s_taken_above, 1u);
					kept_score[at] = s[i];
					kept_item[at] = (int32_t)i;
				}
				continue;
			}
			if (key > T) {
				const unsigned at = atomicAdd(&s_taken_above, 1u);
				kept_score[at] = s[i];
				kept_item[at] = (int32_t)i;
			}
			if (s_eq_base >= remaining) /* the same for every thread: no barrier skipped by some */
				continue;
			const unsigned bits = __ballot_sync(0xffffffffu, key == T);
			if (lane == 0)
				warp_equal[warp] = __popc(bits);
			__syncthreads();
			unsigned at = s_eq_base + __popc(bits & ((1u << lane) - 1u));
			for (int w = 0; w < warp; w++)
				at += warp_equal[w];
			if (key == T && at < remaining) {
				kept_score[above + at] = s[i];
				kept_item[above + at] = (int32_t)i;
			}
			__syncthreads();
			if (tid == 0)
				for (int w = 0; w < kThreads / 32; w++)
					s_eq_base += warp_equal[w];
			__syncthreads();
		}
		__syncthreads();
		/* Best first: each kept entry's place is how many rank above it. */
		for (unsigned e = tid; e < K; e += kThreads) {
			const float se = kept_score[e];
			const int32_t ie = kept_item[e];
			unsigned place = 0;
			for (unsigned j = 0; j < K; j++)
				place += ranks_above(kept_score[j], kept_item[j], se, ie);
			write_pair(out, place, se, ie);
		}
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
	starfa_gpu_status st{nullptr, cudaSuccess, CUSPARSE_STATUS_SUCCESS, CUBLAS_STATUS_SUCCESS};
	if (nrows <= 0 || k <= 0)
		return st;
	if (k > STARFA_CUDA_TOP_K_MAX) {
		note(st, "starfa_cuda_top_k_rows (k above STARFA_CUDA_TOP_K_MAX)", cudaErrorInvalidValue);
		return st;
	}
	const int blocks = (int)((nrows * k + 255) / 256 < 4096 ? (nrows * k + 255) / 256 : 4096);
	empty_lists<<<blocks, 256, 0, stream>>>(nrows, (int)k, L, ldl);
	note(st, "empty_lists (top k)", cudaGetLastError());
	if (ncols <= 0 || st.call)
		return st;

	int64_t chunk = kChunkBytes / (ncols * (int64_t)sizeof(float));
	chunk = chunk < 1 ? 1 : chunk > nrows ? nrows : chunk;
	const size_t rows_bytes = round_up((size_t)nrows * sizeof(int32_t)), count_bytes = round_up(sizeof(int)),
		     packed_bytes = round_up((size_t)(chunk * (rank > 0 ? rank : 1)) * sizeof(float)),
		     scores_bytes = (size_t)(chunk * ncols) * sizeof(float);
	char *scratch = nullptr;
	note(st, "cudaMallocAsync (top k)",
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
		note(st, "active_rows (top k)", cudaGetLastError());
		int host_count = 0;
		note(st, "cudaMemcpyAsync (top k: active rows)",
		     cudaMemcpyAsync(&host_count, count, sizeof host_count, cudaMemcpyDeviceToHost, stream));
		note(st, "cudaStreamSynchronize (top k: active rows)", cudaStreamSynchronize(stream));
		listed = host_count;
	}
	note(st, "cublasSetStream (top k)", cudaSuccess, cublasSetStream(cublas, stream));
	for (int64_t first = 0; first < listed && !st.call; first += chunk) {
		const int n = (int)(listed - first < chunk ? listed - first : chunk);
		const float *X = A + first * lda;
		int64_t ldx = lda;
		if (rows && rank > 0) {
			const int64_t total = (int64_t)n * rank;
			const int gblocks = (int)((total + 255) / 256 < 4096 ? (total + 255) / 256 : 4096);
			gather_rows<<<gblocks, 256, 0, stream>>>(n, (int)rank, rows + first, A, lda, Ap);
			note(st, "gather_rows (top k)", cudaGetLastError());
			X = Ap;
			ldx = rank;
		}
		if (rank > 0) {
			const float one = 1.0f, zero = 0.0f;
			/* Column-major: S (ncols x n, ld ncols) = Bᵀ (ncols x rank) X (rank x n). */
			note(st, "cublasSgemm (top k scores)", cudaSuccess,
			     cublasSgemm(cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)ncols, n, (int)rank, &one, B, (int)ldb, X,
					 (int)ldx, &zero, S, (int)ncols));
		} else {
			note(st, "cudaMemsetAsync (top k scores)",
			     cudaMemsetAsync(S, 0, (size_t)n * (size_t)ncols * sizeof(float), stream));
		}
		if (rowptr) {
			exclude_seen<<<(n + 7) / 8, 256, 0, stream>>>(n, rows ? rows + first : nullptr, first, rowptr, colind,
								     ncols, S);
			note(st, "exclude_seen (top k)", cudaGetLastError());
		}
		select_rows<<<n, kThreads, 0, stream>>>(ncols, S, rows ? rows + first : nullptr, first, (int)k, L, ldl);
		note(st, "select_rows (top k)", cudaGetLastError());
	}
	note(st, "cudaFreeAsync (top k)", cudaFreeAsync(scratch, stream));
	return st;
}
