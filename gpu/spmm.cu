/* SpMM on one CSR tile, CUDA: starfa's kernels (a group of lanes per row, lanes across the rank,
 * 16-byte loads when the rank allows, several nonzeros in flight; a block per row for the few
 * rows far longer than the rest) and cuSPARSE's generic SpMM. */
#include "gpu/spmm.h"

#include "gpu/lru.h"

#include <atomic>
#include <climits>
#include <cstdio>

namespace {

constexpr int kWarp = 32;
constexpr int kThreadsPerBlock = 256;
constexpr int kLoadsInFlight = 4;        /* vector loads of X a lane issues before the first FMA needing one */
constexpr int kLongRowThreads = 512;     /* threads that share one long row */
constexpr int64_t kLongRowBlocks = 1024; /* at most this many long rows at a time */
constexpr int64_t kLongRowMin = 256;     /* a row with fewer nonzeros is never long... */
constexpr int64_t kLongRowOverMean = 8;  /* ...nor one with fewer than 8 times the tile's mean */

template <int VEC> struct vec_of;
template <> struct vec_of<1> {
	using type = float;
	static __device__ float zero() { return 0.0f; }
};
template <> struct vec_of<4> {
	using type = float4;
	static __device__ float4 zero() { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }
};

__device__ inline void fma_into(float &acc, float v, float x) { acc = fmaf(v, x, acc); }
__device__ inline void fma_into(float4 &acc, float v, float4 x)
{
	acc.x = fmaf(v, x.x, acc.x);
	acc.y = fmaf(v, x.y, acc.y);
	acc.z = fmaf(v, x.z, acc.z);
	acc.w = fmaf(v, x.w, acc.w);
}
__device__ inline void add_into(float &acc, float y) { acc += y; }
__device__ inline void add_into(float4 &acc, float4 y)
{
	acc.x += y.x;
	acc.y += y.y;
	acc.z += y.z;
	acc.w += y.w;
}
/* Through the read-only data cache: X is never written by the kernels. */
template <typename V> __device__ inline V load(const float *p) { return __ldg(reinterpret_cast<const V *>(p)); }

/* GROUP lanes (a power of two dividing the warp) work together; only they take part in their
 * shuffles, since the groups of a warp run rows of different lengths. */
template <int GROUP> __device__ inline unsigned group_mask()
{
	const int group_in_warp = (threadIdx.x % kWarp) / GROUP;
	return GROUP == kWarp ? 0xffffffffu : ((1u << GROUP) - 1u) << (group_in_warp * GROUP);
}

/* acc[i] += sval[p] * X[colind[p], slice i] for p in [p0, p1), in that order, for one lane of a
 * group: lane `lane` owns the VEC-wide slices at x_lane + i * GROUP * VEC (those below `left`
 * columns). The group loads GROUP (column, value) pairs at once, coalesced, and hands them round
 * with shuffles; each lane then issues kLoadsInFlight loads of X before the FMAs that use them. */
template <int GROUP, int VEC, int COLS>
__device__ inline void accumulate(typename vec_of<VEC>::type (&acc)[COLS], uint32_t p0, uint32_t p1, int lane,
				  unsigned mask, const uint32_t *__restrict__ colind, const float *__restrict__ sval,
				  const float *__restrict__ x_lane, int64_t ldx, int64_t left)
{
	using vec = typename vec_of<VEC>::type;
	constexpr int kSlice = GROUP * VEC; /* columns between a lane's slices */
	constexpr int kUnroll = COLS >= kLoadsInFlight ? 1 : kLoadsInFlight / COLS; /* nonzeros at a time */
	for (uint32_t base = p0; base < p1; base += GROUP) {
		const int n = p1 - base < (uint32_t)GROUP ? (int)(p1 - base) : GROUP;
		uint32_t my_col = 0;
		float my_val = 0.0f;
		if (lane < n) {
			my_col = colind[base + lane];
			my_val = sval[base + lane];
		}
		int j = 0;
		for (; j + kUnroll <= n; j += kUnroll) {
			const float *x_row[kUnroll];
			float v[kUnroll];
#pragma unroll
			for (int u = 0; u < kUnroll; u++) {
				const uint32_t c = __shfl_sync(mask, my_col, j + u, GROUP);
				x_row[u] = x_lane + (int64_t)c * ldx;
				v[u] = __shfl_sync(mask, my_val, j + u, GROUP);
			}
			vec x[kUnroll][COLS];
#pragma unroll
			for (int u = 0; u < kUnroll; u++)
#pragma unroll
				for (int i = 0; i < COLS; i++)
					if (i * kSlice < left)
						x[u][i] = load<vec>(x_row[u] + i * kSlice);
#pragma unroll
			for (int u = 0; u < kUnroll; u++)
#pragma unroll
				for (int i = 0; i < COLS; i++)
					if (i * kSlice < left)
						fma_into(acc[i], v[u], x[u][i]);
		}
		for (; j < n; j++) {
			const uint32_t c = __shfl_sync(mask, my_col, j, GROUP);
			const float v = __shfl_sync(mask, my_val, j, GROUP);
			const float *x_row = x_lane + (int64_t)c * ldx;
#pragma unroll
			for (int i = 0; i < COLS; i++)
				if (i * kSlice < left)
					fma_into(acc[i], v, load<vec>(x_row + i * kSlice));
		}
	}
}

/* One group of GROUP lanes per row; lane l covers the VEC-wide slices l, l + GROUP, ... (COLS
 * of them) of a pass over the rank, and passes repeat until the rank is covered. A row's
 * nonzeros are added in CSR order onto Y's value (beta 1) or zero (beta 0). With long_count,
 * rows of long_min nonzeros or more are only listed, for spmm_long_rows. */
template <int GROUP, int VEC, int COLS>
__global__ void __launch_bounds__(kThreadsPerBlock)
	spmm_group_per_row(int64_t nrows, const uint32_t *__restrict__ rowptr, const uint32_t *__restrict__ colind,
			   const float *__restrict__ sval, const float *__restrict__ X, int64_t ldx, int64_t k,
			   int beta, float *__restrict__ Y, int64_t ldy, uint32_t long_min, uint32_t *long_rows,
			   uint32_t *long_count)
{
	using vec = typename vec_of<VEC>::type;
	constexpr int kSlice = GROUP * VEC;
	const int lane = threadIdx.x % GROUP;
	const unsigned mask = group_mask<GROUP>();
	const int64_t groups = (int64_t)gridDim.x * (kThreadsPerBlock / GROUP);
	for (int64_t r = ((int64_t)blockIdx.x * kThreadsPerBlock + threadIdx.x) / GROUP; r < nrows; r += groups) {
		const uint32_t start = rowptr[r], end = rowptr[r + 1];
		if (long_count && end - start >= long_min) {
			if (lane == 0)
				long_rows[atomicAdd(long_count, 1u)] = (uint32_t)r;
			continue;
		}
		for (int64_t c0 = 0; c0 < k; c0 += (int64_t)kSlice * COLS) {
			/* With VEC 4 the rank is a multiple of 4: a slice is wholly inside or wholly out. */
			const int64_t d0 = c0 + (int64_t)lane * VEC, left = k - d0;
			float *y_lane = Y + r * ldy + d0;
			/* Accumulating starts from Y's value, so that a band split into tiles adds the same
			 * terms in the same order as one tile; overwriting never reads Y, which may hold
			 * anything (NaN included) before its first tile. */
			vec acc[COLS];
#pragma unroll
			for (int i = 0; i < COLS; i++)
				acc[i] = beta && i * kSlice < left ? *reinterpret_cast<const vec *>(y_lane + i * kSlice)
								   : vec_of<VEC>::zero();
			accumulate<GROUP, VEC, COLS>(acc, start, end, lane, mask, colind, sval, X + d0, ldx, left);
#pragma unroll
			for (int i = 0; i < COLS; i++)
				if (i * kSlice < left)
					*reinterpret_cast<vec *>(y_lane + i * kSlice) = acc[i];
		}
	}
}

/* The long rows spmm_group_per_row listed, each taken by one block: the block's kParts groups take
 * consecutive equal shares of the row's nonzeros, and the first group adds their sums in group
 * order onto Y's value or zero. The list's order varies from run to run, but no row's result
 * depends on it, so the bits do not. */
template <int GROUP, int VEC>
__global__ void __launch_bounds__(kLongRowThreads)
	spmm_long_rows(const uint32_t *__restrict__ rowptr, const uint32_t *__restrict__ colind,
		       const float *__restrict__ sval, const float *__restrict__ X, int64_t ldx, int64_t k, int beta,
		       float *__restrict__ Y, int64_t ldy, const uint32_t *__restrict__ long_rows,
		       const uint32_t *__restrict__ long_count)
{
	using vec = typename vec_of<VEC>::type;
	constexpr int kParts = kLongRowThreads / GROUP;
	__shared__ vec partial[kLongRowThreads];
	const int part = threadIdx.x / GROUP, lane = threadIdx.x % GROUP;
	const unsigned mask = group_mask<GROUP>();
	const uint32_t count = *long_count;
	for (uint32_t idx = blockIdx.x; idx < count; idx += gridDim.x) {
		const int64_t r = long_rows[idx];
		const uint32_t start = rowptr[r], end = rowptr[r + 1];
		const uint64_t share = (end - start + (uint64_t)kParts - 1) / kParts;
		const uint32_t p0 = (uint32_t)min((uint64_t)end, start + part * share);
		const uint32_t p1 = (uint32_t)min((uint64_t)end, p0 + share);
		for (int64_t c0 = 0; c0 < k; c0 += GROUP * VEC) {
			const int64_t d0 = c0 + (int64_t)lane * VEC, left = k - d0;
			vec acc[1] = {vec_of<VEC>::zero()};
			accumulate<GROUP, VEC, 1>(acc, p0, p1, lane, mask, colind, sval, X + d0, ldx, left);
			partial[threadIdx.x] = acc[0];
			__syncthreads();
			if (part == 0 && left > 0) {
				vec *y = reinterpret_cast<vec *>(Y + r * ldy + d0);
				vec sum = beta ? *y : vec_of<VEC>::zero();
				for (int q = 0; q < kParts; q++)
					add_into(sum, partial[q * GROUP + lane]);
				*y = sum;
			}
			__syncthreads(); /* partial is rewritten by the next pass or row */
		}
	}
}

/* Launches the row kernel and, where long rows may be listed, the long-row kernel after it. */
template <int GROUP, int VEC, int COLS>
cudaError_t launch(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *sval, const float *X,
		   int64_t ldx, int64_t k, int beta, float *Y, int64_t ldy, uint32_t long_min, int64_t max_long,
		   uint32_t *long_list, cudaStream_t stream)
{
	constexpr int rows_per_block = kThreadsPerBlock / GROUP;
	int64_t blocks = (nrows + rows_per_block - 1) / rows_per_block;
	if (blocks > 65536)
		blocks = 65536; /* grid-stride beyond this */
	uint32_t *long_count = long_list, *long_rows = long_list ? long_list + 1 : nullptr;
	spmm_group_per_row<GROUP, VEC, COLS><<<(unsigned)blocks, kThreadsPerBlock, 0, stream>>>(
		nrows, rowptr, colind, sval, X, ldx, k, beta, Y, ldy, long_min, long_rows, long_count);
	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess || !long_list)
		return err;
	/* The count is only known on the device: enough blocks to fill a large GPU, no more, since
	 * those past the count have nothing to do. */
	const int64_t long_blocks = max_long < kLongRowBlocks ? max_long : kLongRowBlocks;
	spmm_long_rows<GROUP, VEC><<<(unsigned)long_blocks, kLongRowThreads, 0, stream>>>(
		rowptr, colind, sval, X, ldx, k, beta, Y, ldy, long_rows, long_count);
	return cudaGetLastError();
}

/* The narrowest group that covers the rank in one pass (up to 4 slices a lane), so that
 * small ranks do not leave most of a warp idle. */
template <int VEC>
cudaError_t launch_for_rank(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
			    const float *X, int64_t ldx, int64_t k, int beta, float *Y, int64_t ldy, uint32_t long_min,
			    int64_t max_long, uint32_t *long_list, cudaStream_t stream)
{
	const int64_t slices = (k + VEC - 1) / VEC;
#define LAUNCH(group, cols)                                                                               \
	launch<group, VEC, cols>(nrows, rowptr, colind, sval, X, ldx, k, beta, Y, ldy, long_min, max_long,        \
				 long_list, stream)
	if (slices <= 4)
		return LAUNCH(4, 1);
	if (slices <= 8)
		return LAUNCH(8, 1);
	if (slices <= 16)
		return LAUNCH(16, 1);
	if (slices <= 32)
		return LAUNCH(32, 1);
	if (slices <= 64)
		return LAUNCH(32, 2);
	return LAUNCH(32, 4);
#undef LAUNCH
}


starfa_gpu_status cuda_failed(const char *call, cudaError_t err)
{
	return starfa_gpu_status{call, err, CUSPARSE_STATUS_SUCCESS, CUBLAS_STATUS_SUCCESS};
}

starfa_gpu_status cusparse_failed(const char *call, cusparseStatus_t status)
{
	return starfa_gpu_status{call, cudaSuccess, status, CUBLAS_STATUS_SUCCESS};
}

/* Keeps the first failure: later calls (the clean-up) run on, but do not hide it. */
void keep_first(starfa_gpu_status &st, starfa_gpu_status next)
{
	if (!st.call)
		st = next;
}

#define CUSPARSE_STEP(st, name, call)                                                             \
	do {                                                                                      \
		cusparseStatus_t s_ = (call);                                                     \
		if (s_ != CUSPARSE_STATUS_SUCCESS)                                                \
			keep_first(st, cusparse_failed(name, s_));                                \
	} while (0)

#define CUDA_STEP(st, name, call)                                                                 \
	do {                                                                                      \
		cudaError_t e_ = (call);                                                          \
		if (e_ != cudaSuccess)                                                            \
			keep_first(st, cuda_failed(name, e_));                                    \
	} while (0)

/* cuSPARSE's state for one tile, kept from one call to the next when the caller names the tile's pattern:
 * the CSR descriptor and the work buffer, with CSR_ALG3's analysis that cusparseSpMM_preprocess leaves in
 * them (redone every call, the analysis costs more than the product: 0.15-5 ms on the bench matrices).
 * One list per host thread, since a CUDA worker is one thread driving one device through its stream. A
 * plan is used only where everything cuSPARSE saw when it was made is unchanged: the pattern id (never
 * reused), the device addresses of the row offsets and column indices (StarPU may move a tile and hand
 * its old address to another one), the sizes, rank, leading dimensions, algorithm, beta and device. Only the
 * addresses of the values, X and Y are set anew each call (cusparseSpMatSetValues, cusparseDnMatSetValues:
 * values may change between calls). */
struct kept_plan {
	uint64_t pattern;
	const void *rowptr, *colind;
	int64_t nrows, ncols, nnz, k, ldx, ldy;
	cusparseSpMMAlg_t alg;
	int beta, device;
	cusparseSpMatDescr_t matrix;
	cusparseDnMatDescr_t x, y; /* X's and Y's descriptors, their addresses set anew each call */
	void *buffer;
	size_t bytes;
	cudaStream_t stream; /* the last stream that used the buffer: it is freed there, in its order */
	uint64_t used;       /* the thread's clock at the last use: the least recent goes first */
};

constexpr int kMaxKept = 64;

struct kept_plans {
	kept_plan plan[kMaxKept];
	int count = 0;
	size_t bytes = 0;
	uint64_t clock = 0;
};

thread_local kept_plans kept;
std::atomic<size_t> keep_limit{(size_t)256 << 20};

/* Destroys a plan's descriptor and frees its buffer on the device and stream it was used on. */
void release_plan(kept_plan &p, starfa_gpu_status &st)
{
	int current = -1;
	if (cudaGetDevice(&current) == cudaSuccess && current != p.device)
		CUDA_STEP(st, "cudaSetDevice", cudaSetDevice(p.device));
	if (p.buffer)
		CUDA_STEP(st, "cudaFreeAsync", cudaFreeAsync(p.buffer, p.stream));
	if (p.matrix)
		CUSPARSE_STEP(st, "cusparseDestroySpMat", cusparseDestroySpMat(p.matrix));
	if (p.x)
		CUSPARSE_STEP(st, "cusparseDestroyDnMat", cusparseDestroyDnMat(p.x));
	if (p.y)
		CUSPARSE_STEP(st, "cusparseDestroyDnMat", cusparseDestroyDnMat(p.y));
	if (current >= 0 && current != p.device)
		CUDA_STEP(st, "cudaSetDevice", cudaSetDevice(current));
	p.buffer = nullptr;
	p.matrix = nullptr;
	p.x = p.y = nullptr;
}

void forget_plan(int i, starfa_gpu_status &st)
{
	release_plan(kept.plan[i], st);
	kept.bytes -= kept.plan[i].bytes;
	kept.plan[i] = kept.plan[--kept.count];
}

/* Plans for the same tile, rank and beta on one device, wherever the tile is and whatever the layout. */
bool same_tile(const kept_plan &p, const kept_plan &q)
{
	return p.pattern == q.pattern && p.k == q.k && p.beta == q.beta && p.device == q.device;
}

bool same_plan(const kept_plan &p, const kept_plan &q)
{
	return same_tile(p, q) && p.rowptr == q.rowptr && p.colind == q.colind && p.nrows == q.nrows &&
	       p.ncols == q.ncols && p.nnz == q.nnz && p.ldx == q.ldx && p.ldy == q.ldy && p.alg == q.alg;
}

/* Room for a plan of `bytes` beside the kept ones, the least recently used going first; false when it
 * could never fit. */
bool make_room(size_t bytes, starfa_gpu_status &st)
{
	const size_t limit = keep_limit.load(std::memory_order_relaxed);
	if (bytes > limit)
		return false;
	while (kept.count > 0 && (kept.count == kMaxKept || kept.bytes + bytes > limit))
		forget_plan(least_recent(kept.count, [](int i) { return kept.plan[i].used; }), st);
	return true;
}

starfa_gpu_status spmm_cusparse(cusparseHandle_t handle, cusparseSpMMAlg_t alg, uint64_t pattern, int64_t nrows,
				int64_t ncols, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind,
				const float *sval, const float *X, int64_t ldx, int64_t k, int beta, float *Y, int64_t ldy,
				cudaStream_t stream)
{
	/* The uint32 arrays are read as int32 (CUSPARSE_INDEX_32I), exact below 2^31. */
	if (nnz > INT_MAX || nrows > INT_MAX || ncols > INT_MAX)
		return cusparse_failed("starfa_cuda_spmm (cuSPARSE takes tiles below 2^31 rows, columns and nonzeros)",
				       CUSPARSE_STATUS_NOT_SUPPORTED);
	if (!handle)
		return cusparse_failed("starfa_cuda_spmm (no cuSPARSE handle)", CUSPARSE_STATUS_NOT_INITIALIZED);
	starfa_gpu_status st = starfa_gpu_ok();
	/* An empty tile's whole job is clearing Y (beta 0). Otherwise cuSPARSE takes beta as it is: with beta
	 * 0 it neither reads Y (a block written for the first time may hold NaN) nor leaves the rows without
	 * nonzeros unwritten. Its documentation does not say so; measured with CUDA 13.0 on an H100 (CSR
	 * ALG1-3, 1 to 100,000 rows a third of them empty, K from 1 to 512, Y full of NaN), and the tests
	 * poison Y with NaN before every call. Clearing Y first cost up to two passes over it (50 µs at
	 * K = 512 on email-Enron). */
	if (nnz == 0) {
		if (!beta)
			CUDA_STEP(st, "cudaMemset2DAsync",
				  cudaMemset2DAsync(Y, (size_t)ldy * sizeof(float), 0, (size_t)k * sizeof(float),
						    (size_t)nrows, stream));
		return st;
	}

	CUSPARSE_STEP(st, "cusparseSetStream", cusparseSetStream(handle, stream));
	kept_plan want{pattern, rowptr, colind, nrows, ncols, nnz, k, ldx, ldy, alg, beta, -1, nullptr, nullptr, nullptr,
		       nullptr, 0, stream, 0};
	CUDA_STEP(st, "cudaGetDevice", cudaGetDevice(&want.device));
	int found = -1;
	for (int i = 0; pattern && !st.call && i < kept.count && found < 0; i++)
		if (same_plan(kept.plan[i], want))
			found = i;
		else if (same_tile(kept.plan[i], want) && kept.plan[i].alg == alg)
			forget_plan(i--, st); /* the tile moved, or its operands' layout changed: that plan is stale */

	/* Host scalars (the handle's default pointer mode). CSR_ALG2 is
	 * made for row-major B and C; ALG3 splits the nonzeros evenly after its analysis; neither is bitwise
	 * reproducible from run to run. */
	const float alpha = 1.0f, one = beta ? 1.0f : 0.0f;
	const cusparseOperation_t as_is = CUSPARSE_OPERATION_NON_TRANSPOSE;
	kept_plan p = want;
	if (found >= 0) {
		p = kept.plan[found];
		/* The buffer's last use was on another stream (never so within a CUDA worker): wait for it. */
		if (p.stream != stream)
			CUDA_STEP(st, "cudaStreamSynchronize", cudaStreamSynchronize(p.stream));
		CUSPARSE_STEP(st, "cusparseSpMatSetValues", cusparseSpMatSetValues(p.matrix, const_cast<float *>(sval)));
		if (!st.call)
			CUSPARSE_STEP(st, "cusparseDnMatSetValues", cusparseDnMatSetValues(p.x, const_cast<float *>(X)));
		if (!st.call)
			CUSPARSE_STEP(st, "cusparseDnMatSetValues", cusparseDnMatSetValues(p.y, Y));
	} else {
		/* cuSPARSE reads X in SpMM; its descriptor is not const only so that its address can be set. */
		if (!st.call)
			CUSPARSE_STEP(st, "cusparseCreateDnMat",
				      cusparseCreateDnMat(&p.x, ncols, k, ldx, const_cast<float *>(X), CUDA_R_32F,
							  CUSPARSE_ORDER_ROW));
		if (!st.call)
			CUSPARSE_STEP(st, "cusparseCreateDnMat",
				      cusparseCreateDnMat(&p.y, nrows, k, ldy, Y, CUDA_R_32F, CUSPARSE_ORDER_ROW));
		/* cuSPARSE reads A in SpMM; the descriptor is not const only so that its values can be set. */
		if (!st.call)
			CUSPARSE_STEP(st, "cusparseCreateCsr",
				      cusparseCreateCsr(&p.matrix, nrows, ncols, nnz, const_cast<uint32_t *>(rowptr),
							const_cast<uint32_t *>(colind), const_cast<float *>(sval),
							CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
							CUDA_R_32F));
		if (!st.call)
			CUSPARSE_STEP(st, "cusparseSpMM_bufferSize",
				      cusparseSpMM_bufferSize(handle, as_is, as_is, &alpha, p.matrix, p.x, &one, p.y,
							      CUDA_R_32F, alg, &p.bytes));
		/* Stream-ordered: no device-wide synchronisation, and the pool recycles the memory. */
		if (!st.call && p.bytes > 0)
			CUDA_STEP(st, "cudaMallocAsync", cudaMallocAsync(&p.buffer, p.bytes, stream));
		if (!st.call && alg == CUSPARSE_SPMM_CSR_ALG3)
			CUSPARSE_STEP(st, "cusparseSpMM_preprocess",
				      cusparseSpMM_preprocess(handle, as_is, as_is, &alpha, p.matrix, p.x, &one, p.y,
							      CUDA_R_32F, alg, p.buffer));
	}
	if (!st.call)
		CUSPARSE_STEP(st, "cusparseSpMM",
			      cusparseSpMM(handle, as_is, as_is, &alpha, p.matrix, p.x, &one, p.y, CUDA_R_32F, alg, p.buffer));
	if (found >= 0) {
		if (st.call)
			forget_plan(found, st);
		else {
			kept.plan[found].stream = stream;
			kept.plan[found].used = ++kept.clock;
		}
	} else if (pattern && !st.call && make_room(p.bytes, st)) {
		p.used = ++kept.clock;
		kept.plan[kept.count++] = p;
		kept.bytes += p.bytes;
	} else {
		release_plan(p, st);
	}
	return st;
}

bool aligned16(const void *p)
{
	return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

starfa_gpu_status spmm_own(int64_t nrows, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind,
			   const float *sval, const float *X, int64_t ldx, int64_t k, int beta, float *Y, int64_t ldy,
			   cudaStream_t stream)
{
	/* A row far longer than the tile's mean would keep its group busy long after the others
	 * are done (real matrices have rows of thousands of nonzeros beside a mean of tens): such
	 * rows go to a second kernel that spreads each over a block. The list of them (count first)
	 * needs room for every row that can reach long_min. */
	int64_t mean = (nnz + nrows - 1) / nrows;
	int64_t long_min = mean * kLongRowOverMean > kLongRowMin ? mean * kLongRowOverMean : kLongRowMin;
	if (long_min > UINT32_MAX)
		long_min = UINT32_MAX;
	const int64_t max_long = nrows <= UINT32_MAX ? nnz / long_min : 0;
	starfa_gpu_status st = starfa_gpu_ok();
	uint32_t *long_list = nullptr;
	if (max_long > 0) {
		CUDA_STEP(st, "cudaMallocAsync",
			  cudaMallocAsync((void **)&long_list, (size_t)(max_long + 1) * sizeof(uint32_t), stream));
		if (!st.call)
			CUDA_STEP(st, "cudaMemsetAsync", cudaMemsetAsync(long_list, 0, sizeof(uint32_t), stream));
	}
	if (!st.call) {
		const bool vec4 = k % 4 == 0 && ldx % 4 == 0 && ldy % 4 == 0 && aligned16(X) && aligned16(Y);
		CUDA_STEP(st, "spmm kernel launch",
			  vec4 ? launch_for_rank<4>(nrows, rowptr, colind, sval, X, ldx, k, beta, Y, ldy,
						    (uint32_t)long_min, max_long, long_list, stream)
			       : launch_for_rank<1>(nrows, rowptr, colind, sval, X, ldx, k, beta, Y, ldy,
						    (uint32_t)long_min, max_long, long_list, stream));
	}
	if (long_list)
		CUDA_STEP(st, "cudaFreeAsync", cudaFreeAsync(long_list, stream));
	return st;
}

/* One implementation or the other, by what it is: ALG3 only where the rows start 16-byte aligned, since it
 * takes 16-byte loads of X's and Y's rows from their first address and the rank alone (CUDA 13.0 on an
 * H100: k = 32 with ld = 33 stops the kernel on a misaligned address, and the context with it); ALG2
 * there instead. */
starfa_gpu_status spmm_as(starfa_spmm_impl impl, cusparseHandle_t cusparse, uint64_t pattern, int64_t nrows,
			  int64_t ncols, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
			  const float *X, int64_t ldx, int64_t k, int beta, float *Y, int64_t ldy, cudaStream_t stream)
{
	if (impl == STARFA_SPMM_OWN)
		return spmm_own(nrows, nnz, rowptr, colind, sval, X, ldx, k, beta, Y, ldy, stream);
	const bool alg3 = impl == STARFA_SPMM_CUSPARSE_ALG3 && ldx % 4 == 0 && ldy % 4 == 0 && aligned16(X) &&
			  aligned16(Y);
	return spmm_cusparse(cusparse, alg3 ? CUSPARSE_SPMM_CSR_ALG3 : CUSPARSE_SPMM_CSR_ALG2, pattern, nrows, ncols,
			     nnz, rowptr, colind, sval, X, ldx, k, beta, Y, ldy, stream);
}

/* The implementation STARFA_SPMM_TUNED measured fastest for a tile, kept per host thread like the plans
 * and found by the same key (the algorithm field unused). */
struct tuned_choice {
	kept_plan key;
	starfa_spmm_impl impl;
};

thread_local tuned_choice tuned[kMaxKept];
thread_local int tuned_count = 0;

/* Times the own kernel, ALG2 and ALG3 on this tile, each twice (the first cuSPARSE call of a tile makes
 * its plan), on the call's stream; with beta 1 each run adds to a copy of Y, so that Y is read as given.
 * Keeps the fastest, and drops the plans of the cuSPARSE algorithm that lost. */
starfa_gpu_status tune(cusparseHandle_t cusparse, const kept_plan &key, const uint32_t *rowptr, const uint32_t *colind,
		       const float *sval, const float *X, float *Y, cudaStream_t stream, starfa_spmm_impl *best)
{
	constexpr int kCandidates = 3, kRuns = 2;
	const starfa_spmm_impl candidates[kCandidates] = {STARFA_SPMM_OWN, STARFA_SPMM_CUSPARSE, STARFA_SPMM_CUSPARSE_ALG3};
	starfa_gpu_status st = starfa_gpu_ok();
	cudaEvent_t ev[kCandidates][kRuns][2] = {};
	bool ran[kCandidates] = {};
	float *scratch = nullptr, *out = Y;
	const size_t row_bytes = (size_t)key.k * sizeof(float), pitch = (size_t)key.ldy * sizeof(float);
	if (key.beta) {
		CUDA_STEP(st, "cudaMallocAsync", cudaMallocAsync((void **)&scratch, pitch * (size_t)key.nrows, stream));
		out = scratch;
	}
	for (int c = 0; !st.call && c < kCandidates; c++) {
		ran[c] = true;
		for (int r = 0; !st.call && r < kRuns; r++) {
			for (int e = 0; e < 2 && !st.call; e++)
				CUDA_STEP(st, "cudaEventCreate", cudaEventCreate(&ev[c][r][e]));
			if (key.beta && !st.call)
				CUDA_STEP(st, "cudaMemcpy2DAsync",
					  cudaMemcpy2DAsync(scratch, pitch, Y, pitch, row_bytes, (size_t)key.nrows,
							    cudaMemcpyDeviceToDevice, stream));
			if (!st.call)
				CUDA_STEP(st, "cudaEventRecord", cudaEventRecord(ev[c][r][0], stream));
			if (!st.call) {
				starfa_gpu_status run = spmm_as(candidates[c], cusparse, key.pattern, key.nrows, key.ncols,
								key.nnz, rowptr, colind, sval, X, key.ldx, key.k, key.beta, out,
								key.ldy, stream);
				/* A cuSPARSE algorithm that refuses the tile is no candidate; a CUDA failure ends it all. */
				if (run.call && run.cuda == cudaSuccess && candidates[c] != STARFA_SPMM_OWN)
					ran[c] = false;
				else if (run.call)
					keep_first(st, run);
			}
			if (!st.call)
				CUDA_STEP(st, "cudaEventRecord", cudaEventRecord(ev[c][r][1], stream));
		}
	}
	float best_ms = 0;
	*best = STARFA_SPMM_CUSPARSE;
	if (!st.call)
		CUDA_STEP(st, "cudaEventSynchronize", cudaEventSynchronize(ev[kCandidates - 1][kRuns - 1][1]));
	for (int c = 0; !st.call && c < kCandidates; c++)
		for (int r = 0; ran[c] && !st.call && r < kRuns; r++) {
			float ms = 0;
			CUDA_STEP(st, "cudaEventElapsedTime", cudaEventElapsedTime(&ms, ev[c][r][0], ev[c][r][1]));
			if (!st.call && (best_ms == 0 || ms < best_ms)) {
				best_ms = ms;
				*best = candidates[c];
			}
		}
	for (int c = 0; c < kCandidates; c++)
		for (int r = 0; r < kRuns; r++)
			for (int e = 0; e < 2; e++)
				if (ev[c][r][e])
					CUDA_STEP(st, "cudaEventDestroy", cudaEventDestroy(ev[c][r][e]));
	if (scratch)
		CUDA_STEP(st, "cudaFreeAsync", cudaFreeAsync(scratch, stream));
	/* The losing cuSPARSE plans go (the own kernel keeps none). */
	for (int i = 0; i < kept.count; i++)
		if (same_tile(kept.plan[i], key) &&
		    !(*best == STARFA_SPMM_CUSPARSE && kept.plan[i].alg == CUSPARSE_SPMM_CSR_ALG2) &&
		    !(*best == STARFA_SPMM_CUSPARSE_ALG3 && kept.plan[i].alg == CUSPARSE_SPMM_CSR_ALG3))
			forget_plan(i--, st);
	return st;
}

starfa_gpu_status spmm_tuned(cusparseHandle_t cusparse, uint64_t pattern, int64_t nrows, int64_t ncols, int64_t nnz,
			     const uint32_t *rowptr, const uint32_t *colind, const float *sval, const float *X,
			     int64_t ldx, int64_t k, int beta, float *Y, int64_t ldy, cudaStream_t stream)
{
	if (!pattern || nnz == 0)
		return spmm_as(STARFA_SPMM_CUSPARSE, cusparse, pattern, nrows, ncols, nnz, rowptr, colind, sval, X, ldx, k,
			       beta, Y, ldy, stream);
	starfa_gpu_status st = starfa_gpu_ok();
	kept_plan key{pattern, rowptr, colind, nrows, ncols, nnz, k, ldx, ldy, CUSPARSE_SPMM_ALG_DEFAULT, beta, -1,
		      nullptr, nullptr, nullptr, nullptr, 0, stream, 0};
	CUDA_STEP(st, "cudaGetDevice", cudaGetDevice(&key.device));
	if (st.call)
		return st;
	int found = -1;
	for (int i = 0; i < tuned_count && found < 0; i++)
		if (same_plan(tuned[i].key, key))
			found = i;
	starfa_spmm_impl impl;
	if (found >= 0) {
		impl = tuned[found].impl;
		tuned[found].key.used = ++kept.clock;
	} else {
		st = tune(cusparse, key, rowptr, colind, sval, X, Y, stream, &impl);
		if (st.call)
			return st;
		if (tuned_count == kMaxKept) { /* the least recently used choice goes */
			const int oldest = least_recent(tuned_count, [](int i) { return tuned[i].key.used; });
			tuned[oldest] = tuned[--tuned_count];
		}
		key.used = ++kept.clock;
		tuned[tuned_count++] = tuned_choice{key, impl};
	}
	return spmm_as(impl, cusparse, pattern, nrows, ncols, nnz, rowptr, colind, sval, X, ldx, k, beta, Y, ldy, stream);
}

} // namespace

extern "C" const char *starfa_gpu_status_string(starfa_gpu_status status)
{
	static thread_local char text[512];
	if (!status.call)
		return "";
	const char *why = status.cuda != cudaSuccess	     ? cudaGetErrorString(status.cuda)
			  : status.cublas != CUBLAS_STATUS_SUCCESS ? cublasGetStatusString(status.cublas)
								   : cusparseGetErrorString(status.cusparse);
	snprintf(text, sizeof text, "%s: %s", status.call, why);
	return text;
}

extern "C" starfa_gpu_status starfa_cuda_spmm(starfa_spmm_impl impl, cusparseHandle_t cusparse, uint64_t pattern,
					      int64_t nrows, int64_t ncols, int64_t nnz, const uint32_t *rowptr,
					      const uint32_t *colind, const float *sval, const float *X, int64_t ldx,
					      int64_t k, int beta, float *Y, int64_t ldy, cudaStream_t stream)
{
	if (nrows <= 0 || k <= 0)
		return starfa_gpu_ok();
	switch (impl) {
	case STARFA_SPMM_OWN:
	case STARFA_SPMM_CUSPARSE:
	case STARFA_SPMM_CUSPARSE_ALG3:
		return spmm_as(impl, cusparse, pattern, nrows, ncols, nnz, rowptr, colind, sval, X, ldx, k, beta, Y, ldy,
			       stream);
	case STARFA_SPMM_TUNED:
		return spmm_tuned(cusparse, pattern, nrows, ncols, nnz, rowptr, colind, sval, X, ldx, k, beta, Y, ldy,
				  stream);
	}
	return cuda_failed("starfa_cuda_spmm (unknown implementation)", cudaErrorInvalidValue);
}

extern "C" starfa_gpu_status starfa_cuda_spmm_release(void)
{
	starfa_gpu_status st = starfa_gpu_ok();
	while (kept.count > 0)
		forget_plan(kept.count - 1, st);
	tuned_count = 0;
	return st;
}

extern "C" size_t starfa_cuda_spmm_keep_limit(size_t bytes)
{
	return keep_limit.exchange(bytes);
}

extern "C" size_t starfa_cuda_spmm_kept(int *plans)
{
	if (plans)
		*plans = kept.count;
	return kept.bytes;
}

namespace {

__device__ inline float fused_value(int mode, float s, float y, float eps)
{
	return mode == 0 ? y : mode == 1 ? s * y : s / fmaxf(eps, y);
}

__device__ inline float warp_total(float v)
{
	for (int offset = 16; offset > 0; offset /= 2)
		v += __shfl_xor_sync(0xffffffffu, v, offset);
	return v;
}

/* Adds f(s_p, a·b_p) b_p for p in [p0, p1) onto acc in CSR order, NZ nonzeros a step (NZ rows of B in
 * flight, NZ independent warp reductions to hide the shuffles' latency); lane l holds columns l, l + 32,
 * ... (CH of them) of a and acc. The whole warp calls it. */
template <int CH, int NZ>
__device__ inline void fused_range(const float (&a)[CH], float (&acc)[CH], uint32_t p0, uint32_t p1, int lane,
				   const uint32_t *__restrict__ colind, const float *__restrict__ sval,
				   const float *__restrict__ B, int64_t ldb, int k, int mode, float eps)
{
	uint32_t p = p0;
	for (; (uint64_t)p + NZ <= p1; p += NZ) {
		float x[NZ][CH], d[NZ];
#pragma unroll
		for (int n = 0; n < NZ; n++) {
			const float *b = B + (int64_t)colind[p + n] * ldb;
			d[n] = 0.0f;
#pragma unroll
			for (int t = 0; t < CH; t++) {
				const int c = lane + t * kWarp;
				x[n][t] = c < k ? __ldg(b + c) : 0.0f;
			}
		}
#pragma unroll
		for (int n = 0; n < NZ; n++)
#pragma unroll
			for (int t = 0; t < CH; t++)
				d[n] = fmaf(a[t], x[n][t], d[n]);
#pragma unroll
		for (int offset = 16; offset > 0; offset /= 2)
#pragma unroll
			for (int n = 0; n < NZ; n++)
				d[n] += __shfl_xor_sync(0xffffffffu, d[n], offset);
#pragma unroll
		for (int n = 0; n < NZ; n++) {
			const float f = fused_value(mode, sval[p + n], d[n], eps);
#pragma unroll
			for (int t = 0; t < CH; t++)
				acc[t] = fmaf(f, x[n][t], acc[t]);
		}
	}
	for (; p < p1; p++) {
		const float *b0 = B + (int64_t)colind[p] * ldb;
		float x0[CH], d0 = 0.0f;
#pragma unroll
		for (int t = 0; t < CH; t++) {
			const int c = lane + t * kWarp;
			x0[t] = c < k ? __ldg(b0 + c) : 0.0f;
			d0 = fmaf(a[t], x0[t], d0);
		}
		const float f0 = fused_value(mode, sval[p], warp_total(d0), eps);
#pragma unroll
		for (int t = 0; t < CH; t++)
			acc[t] = fmaf(f0, x0[t], acc[t]);
	}
}

/* Nonzeros in flight: four while the registers allow, two for the widest rows. */
template <int CH> struct fused_depth {
	static constexpr int value = CH <= 4 ? 4 : 2;
};

/* A warp per row, A's and Y's shares of the row in registers. A row of long_min nonzeros or more is
 * listed (long_rows, count first) for fused_long_rows instead, when there is a list. */
template <int CH>
__global__ void fused_kernel(int64_t nrows, const uint32_t *__restrict__ rowptr, const uint32_t *__restrict__ colind,
			     const float *__restrict__ sval, const float *__restrict__ A, int64_t lda,
			     const float *__restrict__ B, int64_t ldb, int k, int mode, float eps, int beta,
			     float *__restrict__ Y, int64_t ldy, const float *__restrict__ active, int64_t ldact,
			     uint32_t long_min, uint32_t *__restrict__ long_rows, uint32_t *__restrict__ long_count)
{
	const int lane = threadIdx.x % kWarp;
	const int64_t warps = (int64_t)gridDim.x * (blockDim.x / kWarp);
	for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / kWarp; r < nrows; r += warps) {
		if (active && active[r * ldact] == 0.0f) /* warp-uniform; an inactive row is never listed as long */
			continue;
		const uint32_t start = rowptr[r], end = rowptr[r + 1];
		if (long_count && end - start >= long_min) { /* warp-uniform */
			if (lane == 0)
				long_rows[atomicAdd(long_count, 1u)] = (uint32_t)r;
			continue;
		}
		float a[CH], acc[CH];
#pragma unroll
		for (int t = 0; t < CH; t++) {
			const int c = lane + t * kWarp;
			a[t] = c < k ? A[r * lda + c] : 0.0f;
			acc[t] = beta && c < k ? Y[r * ldy + c] : 0.0f;
		}
		fused_range<CH, fused_depth<CH>::value>(a, acc, start, end, lane, colind, sval, B, ldb, k, mode, eps);
#pragma unroll
		for (int t = 0; t < CH; t++) {
			const int c = lane + t * kWarp;
			if (c < k)
				Y[r * ldy + c] = acc[t];
		}
	}
}

/* The listed long rows, a block each: its warps take consecutive equal shares of the row's nonzeros, and
 * warp 0 adds their sums in warp order onto Y's value or zero, so the bits do not depend on the list's
 * order or the timing. */
template <int CH>
__global__ void __launch_bounds__(kLongRowThreads)
	fused_long_rows(const uint32_t *__restrict__ rowptr, const uint32_t *__restrict__ colind,
			const float *__restrict__ sval, const float *__restrict__ A, int64_t lda,
			const float *__restrict__ B, int64_t ldb, int k, int mode, float eps, int beta,
			float *__restrict__ Y, int64_t ldy, const uint32_t *__restrict__ long_rows,
			const uint32_t *__restrict__ long_count)
{
	constexpr int kParts = kLongRowThreads / kWarp;
	__shared__ float partial[kParts][CH * kWarp];
	const int part = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
	const uint32_t count = *long_count;
	for (uint32_t idx = blockIdx.x; idx < count; idx += gridDim.x) {
		const int64_t r = long_rows[idx];
		const uint32_t start = rowptr[r], end = rowptr[r + 1];
		const uint64_t share = (end - start + (uint64_t)kParts - 1) / kParts; /* 64-bit: no wrap near 2^32 */
		const uint32_t p0 = (uint32_t)min((uint64_t)end, start + part * share);
		const uint32_t p1 = (uint32_t)min((uint64_t)end, p0 + share);
		float a[CH], acc[CH];
#pragma unroll
		for (int t = 0; t < CH; t++) {
			const int c = lane + t * kWarp;
			a[t] = c < k ? A[r * lda + c] : 0.0f;
			acc[t] = 0.0f;
		}
		fused_range<CH, fused_depth<CH>::value>(a, acc, p0, p1, lane, colind, sval, B, ldb, k, mode, eps);
#pragma unroll
		for (int t = 0; t < CH; t++)
			partial[part][t * kWarp + lane] = acc[t];
		__syncthreads();
		if (part == 0) {
#pragma unroll
			for (int t = 0; t < CH; t++) {
				const int c = lane + t * kWarp;
				if (c < k) {
					float sum = beta ? Y[r * ldy + c] : 0.0f;
					for (int q = 0; q < kParts; q++)
						sum += partial[q][t * kWarp + lane];
					Y[r * ldy + c] = sum;
				}
			}
		}
		__syncthreads(); /* partial is rewritten for the next row */
	}
}

/* Any rank: the dot product over the row's chunks, then Y's row updated in memory (the warp owns it). */
__global__ void fused_kernel_wide(int64_t nrows, const uint32_t *__restrict__ rowptr, const uint32_t *__restrict__ colind,
				  const float *__restrict__ sval, const float *__restrict__ A, int64_t lda,
				  const float *__restrict__ B, int64_t ldb, int64_t k, int mode, float eps, int beta,
				  float *__restrict__ Y, int64_t ldy, const float *__restrict__ active, int64_t ldact)
{
	const int lane = threadIdx.x % kWarp;
	const int64_t warps = (int64_t)gridDim.x * (blockDim.x / kWarp);
	for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / kWarp; r < nrows; r += warps) {
		if (active && active[r * ldact] == 0.0f)
			continue;
		float *y = Y + r * ldy;
		const float *a = A + r * lda;
		if (!beta)
			for (int64_t c = lane; c < k; c += kWarp)
				y[c] = 0.0f;
		for (uint32_t p = rowptr[r]; p < rowptr[r + 1]; p++) {
			const float *b = B + (int64_t)colind[p] * ldb;
			float d = 0.0f;
			for (int64_t c = lane; c < k; c += kWarp)
				d = fmaf(a[c], __ldg(b + c), d);
			const float f = fused_value(mode, sval[p], warp_total(d), eps);
			for (int64_t c = lane; c < k; c += kWarp)
				y[c] = fmaf(f, __ldg(b + c), y[c]);
		}
	}
}

unsigned fused_blocks(int64_t nrows)
{
	int64_t b = (nrows * kWarp + kThreadsPerBlock - 1) / kThreadsPerBlock;
	return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

template <int CH>
cudaError_t fused_launch(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *sval, const float *A,
			 int64_t lda, const float *B, int64_t ldb, int k, int mode, float eps, int beta, float *Y, int64_t ldy,
			 const float *active, int64_t ldact, uint32_t long_min, int64_t max_long, uint32_t *long_list,
			 cudaStream_t stream)
{
	uint32_t *long_count = long_list, *long_rows = long_list ? long_list + 1 : nullptr;
	fused_kernel<CH><<<fused_blocks(nrows), kThreadsPerBlock, 0, stream>>>(nrows, rowptr, colind, sval, A, lda, B, ldb, k,
									      mode, eps, beta, Y, ldy, active, ldact,
									      long_min, long_rows, long_count);
	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess || !long_list)
		return err;
	const int64_t long_blocks = max_long < kLongRowBlocks ? max_long : kLongRowBlocks;
	fused_long_rows<CH><<<(unsigned)long_blocks, kLongRowThreads, 0, stream>>>(rowptr, colind, sval, A, lda, B, ldb, k,
										   mode, eps, beta, Y, ldy, long_rows,
										   long_count);
	return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t starfa_cuda_sddmm_spmm(int64_t nrows, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind,
					      const float *sval, const float *A, int64_t lda, const float *B, int64_t ldb,
					      int64_t k, int mode, float eps, int beta, float *Y, int64_t ldy,
					      const float *active, int64_t ldact, cudaStream_t stream)
{
	if (nrows <= 0 || k <= 0)
		return cudaSuccess;
	if (k > 256) /* the wide kernel: a warp per row, whatever its length */
		fused_kernel_wide<<<fused_blocks(nrows), kThreadsPerBlock, 0, stream>>>(nrows, rowptr, colind, sval, A, lda, B,
											ldb, k, mode, eps, beta, Y, ldy, active,
											ldact);
	if (k > 256)
		return cudaGetLastError();
	/* Rows far longer than the tile's mean (a word in most documents, an item most users rated) would keep
	 * their warp busy long after the rest: a second kernel spreads each over a block, as SpMM's does. */
	const int64_t mean = (nnz + nrows - 1) / nrows;
	int64_t long_min = mean * kLongRowOverMean > kLongRowMin ? mean * kLongRowOverMean : kLongRowMin;
	if (long_min > UINT32_MAX)
		long_min = UINT32_MAX;
	const int64_t max_long = nrows <= UINT32_MAX ? nnz / long_min : 0;
	uint32_t *long_list = nullptr;
	cudaError_t err = cudaSuccess;
	if (max_long > 0) {
		err = cudaMallocAsync((void **)&long_list, (size_t)(max_long + 1) * sizeof(uint32_t), stream);
		if (err != cudaSuccess)
			return err;
		err = cudaMemsetAsync(long_list, 0, sizeof(uint32_t), stream);
		if (err != cudaSuccess) {
			cudaFreeAsync(long_list, stream);
			return err;
		}
	}
	const int kk = (int)k;
#define FUSED(ch)                                                                                                  \
	fused_launch<ch>(nrows, rowptr, colind, sval, A, lda, B, ldb, kk, mode, eps, beta, Y, ldy, active, ldact,        \
			 (uint32_t)long_min, max_long, long_list, stream)
	err = k <= 32 ? FUSED(1) : k <= 64 ? FUSED(2) : k <= 128 ? FUSED(4) : FUSED(8);
#undef FUSED
	if (long_list) {
		cudaError_t ferr = cudaFreeAsync(long_list, stream);
		if (err == cudaSuccess)
			err = ferr;
	}
	return err;
}

extern "C" cudaError_t starfa_cuda_spmm_zero(int64_t nrows, int64_t k, float *Y, int64_t ldy, cudaStream_t stream)
{
	if (nrows <= 0 || k <= 0)
		return cudaSuccess;
	return cudaMemset2DAsync(Y, (size_t)ldy * sizeof(float), 0, (size_t)k * sizeof(float), (size_t)nrows, stream);
}
