/* Element-wise maps, sums and reductions of dense blocks on CUDA. */
#include "gpu/dense.h"

#include "cpu/dense.h" /* the operand kinds */
#include "cpu/elementwise.h"
#include "cpu/half.h"
#include "gpu/reduce.cuh"
#include "starfa.h"

namespace {

using starfa_gpu::kReduceThreads;

unsigned blocks_for(int64_t n)
{
	int64_t b = (n + 255) / 256;
	return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

__global__ void map_kernel(int64_t rows, int64_t cols, int op, float a, float b, const float *__restrict__ Z,
			   int64_t ldz, int zkind, float *__restrict__ Y, int64_t ldy)
{
	const bool reads_y = starfa_dense_reads_y(op);
	const int64_t n = rows * cols;
	for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
		const int64_t r = e / cols, c = e - r * cols;
		float z = 0.0f;
		if (zkind == STARFA_OPERAND_SAME)
			z = Z[r * ldz + c];
		else if (zkind == STARFA_OPERAND_PER_ROW)
			z = Z[r * ldz];
		else if (zkind == STARFA_OPERAND_PER_COL)
			z = Z[c];
		float *y = Y + r * ldy + c;
		*y = starfa_dense_apply(op, a, b, z, reads_y ? *y : 0.0f);
	}
}

__global__ void uniform_kernel(int64_t rows, int64_t cols, int64_t row0, float lo, float hi, uint64_t seed,
			       float *__restrict__ Y, int64_t ldy)
{
	const int64_t n = rows * cols;
	for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
		const int64_t r = e / cols, c = e - r * cols;
		Y[r * ldy + c] = starfa_uniform_between(lo, hi, seed, (uint64_t)((row0 + r) * cols + c));
	}
}

/* One thread per value; the same rounding as the CPU's (cpu/half.h). */
template <bool kToHalf>
__global__ void convert_kernel(int64_t rows, int64_t cols, const void *__restrict__ X, int64_t ldx, void *__restrict__ Y,
			       int64_t ldy)
{
	const int64_t n = rows * cols;
	for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
		const int64_t r = e / cols, c = e - r * cols;
		if (kToHalf)
			static_cast<uint16_t *>(Y)[r * ldy + c] = starfa_float_to_half(static_cast<const float *>(X)[r * ldx + c]);
		else
			static_cast<float *>(Y)[r * ldy + c] = starfa_half_to_float(static_cast<const uint16_t *>(X)[r * ldx + c]);
	}
}

constexpr int64_t kColsumChunk = 512; /* rows a thread sums in the first pass */

/* First pass: partial[q][c] = the sum of column c over chunk q of the rows, a thread per (chunk, column):
 * coalesced across a warp's consecutive columns, every chunk at once. */
__global__ void colsum_partial_kernel(int64_t rows, int64_t cols, const float *__restrict__ X, int64_t ldx,
				      double *__restrict__ partial)
{
	const int64_t chunks = (rows + kColsumChunk - 1) / kColsumChunk;
	for (int64_t q = blockIdx.y; q < chunks; q += gridDim.y) {
		const int64_t r0 = q * kColsumChunk, r1 = min(rows, r0 + kColsumChunk);
		for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < cols; c += (int64_t)gridDim.x * blockDim.x) {
			double s = 0.0;
			for (int64_t r = r0; r < r1; r++)
				s += X[r * ldx + c];
			partial[q * cols + c] = s;
		}
	}
}

/* Second pass: v[c] = (accumulate ? v[c] : 0) + the chunks' sums in chunk order (the same bits every run). */
__global__ void colsum_kernel(int64_t chunks, int64_t cols, const double *__restrict__ partial, int accumulate,
			      float *__restrict__ v)
{
	for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < cols; c += (int64_t)gridDim.x * blockDim.x) {
		double s = accumulate ? (double)v[c] : 0.0;
		for (int64_t q = 0; q < chunks; q++)
			s += partial[q * cols + c];
		v[c] = (float)s;
	}
}

__device__ double warp_sum(double s)
{
	for (int offset = 16; offset > 0; offset /= 2)
		s += __shfl_xor_sync(0xffffffffu, s, offset);
	return s;
}

/* One warp per row: the row's dot products reduced across the warp (every lane gets them), then each
 * lane updates its columns. */
__global__ void cg_kernel(int64_t rows, int64_t cols, int start, float *__restrict__ X, int64_t ldx, float *__restrict__ R,
			  int64_t ldr, float *__restrict__ P, int64_t ldp, const float *__restrict__ Q, int64_t ldq,
			  float *__restrict__ rr, int64_t ldrr, const float *__restrict__ lam, int64_t ldl)
{
	const int lane = threadIdx.x % 32;
	const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
	for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
		float *x = X + r * ldx, *res = R + r * ldr, *p = P + r * ldp;
		const float *q = Q + r * ldq, l = lam[r * ldl];
		double rr_new = 0.0;
		if (start) {
			for (int64_t c = lane; c < cols; c += 32) {
				const float v = q[c] - l * x[c];
				res[c] = v;
				p[c] = v;
				rr_new += (double)v * v;
			}
			rr_new = warp_sum(rr_new);
			if (lane == 0)
				rr[r * ldrr] = (float)rr_new;
			continue;
		}
		double pq = 0.0;
		for (int64_t c = lane; c < cols; c += 32)
			pq += (double)p[c] * (q[c] + l * p[c]);
		pq = warp_sum(pq);
		const double rr_old = rr[r * ldrr];
		const float alpha = pq > 0.0 ? (float)(rr_old / pq) : 0.0f;
		for (int64_t c = lane; c < cols; c += 32) {
			x[c] += alpha * p[c];
			const float v = res[c] - alpha * (q[c] + l * p[c]);
			res[c] = v;
			rr_new += (double)v * v;
		}
		rr_new = warp_sum(rr_new);
		const float beta = rr_old > 0.0 ? (float)(rr_new / rr_old) : 0.0f;
		for (int64_t c = lane; c < cols; c += 32)
			p[c] = res[c] + beta * p[c];
		__syncwarp();
		if (lane == 0)
			rr[r * ldrr] = (float)rr_new;
	}
}

/* One warp per row: the new parameters and their change and total across the lanes, then the row's
 * expectations. Each block counts its rows left active in shared memory and adds the count (NaN when a
 * change is not finite) to *left once. */
__global__ void dirichlet_kernel(int64_t rows, int64_t cols, float prior, float tol, const float *__restrict__ G,
				 int64_t ldg, float *__restrict__ gamma, int64_t ldgam, float *__restrict__ elog, int64_t lde,
				 float *__restrict__ expelog, int64_t ldx, float *__restrict__ active, int64_t ldact,
				 double *__restrict__ left)
{
	__shared__ unsigned block_left, block_bad;
	if (threadIdx.x == 0) {
		block_left = 0;
		block_bad = 0;
	}
	__syncthreads();
	const int lane = threadIdx.x % 32;
	const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
	for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
		if (active && active[r * ldact] == 0.0f) /* warp-uniform */
			continue;
		const float *g = G + r * ldg;
		float *gam = gamma + r * ldgam, *el = elog + r * lde, *ex = expelog + r * ldx;
		double change = 0.0, total = 0.0;
		for (int64_t c = lane; c < cols; c += 32) {
			const float v = prior + ex[c] * g[c];
			change += fabs((double)v - gam[c]);
			total += v;
			gam[c] = v;
		}
		change = warp_sum(change) / (double)cols;
		total = warp_sum(total);
		const float psi_total = starfa_digammaf((float)total);
		for (int64_t c = lane; c < cols; c += 32) {
			const float e = starfa_digammaf(gam[c]) - psi_total;
			el[c] = e;
			ex[c] = expf(e);
		}
		const bool stays = change >= (double)tol;
		__syncwarp();
		if (lane == 0) {
			if (active)
				active[r * ldact] = stays ? 1.0f : 0.0f;
			if (!isfinite(change))
				atomicOr(&block_bad, 1u);
			else if (stays)
				atomicAdd(&block_left, 1u);
		}
	}
	__syncthreads();
	if (threadIdx.x == 0 && (block_left || block_bad))
		atomicAdd(left, block_bad ? (double)NAN : (double)block_left);
}

/* One warp per row. */
__global__ void rowsum_kernel(int64_t rows, int64_t cols, const float *__restrict__ X, int64_t ldx, float *__restrict__ R,
			      int64_t ldr)
{
	const int lane = threadIdx.x % 32;
	const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
	for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
		double s = 0.0;
		for (int64_t c = lane; c < cols; c += 32)
			s += X[r * ldx + c];
		for (int offset = 16; offset > 0; offset /= 2)
			s += __shfl_down_sync(0xffffffffu, s, offset);
		if (lane == 0)
			R[r * ldr] = (float)s;
	}
}

__global__ void __launch_bounds__(kReduceThreads)
	reduce_kernel(int64_t rows, int64_t cols, const float *__restrict__ X, int64_t ldx, const float *__restrict__ w,
		      int64_t ldw, int op, double *sum)
{
	const int64_t n = rows * cols;
	double v = 0.0;
	for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
		const int64_t r = e / cols, c = e - r * cols;
		double y = X[r * ldx + c];
		y = op == STARFA_REDUCE_SQUARES ? y * y : op == STARFA_REDUCE_ABS ? fabs(y) : y;
		v += w ? (double)w[r * ldw] * y : y;
	}
	starfa_gpu::block_add(v, sum);
}

template <bool kToHalf>
cudaError_t convert(int64_t rows, int64_t cols, const void *X, int64_t ldx, void *Y, int64_t ldy, cudaStream_t stream)
{
	if (rows <= 0 || cols <= 0)
		return cudaSuccess;
	convert_kernel<kToHalf><<<blocks_for(rows * cols), 256, 0, stream>>>(rows, cols, X, ldx, Y, ldy);
	return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t starfa_cuda_dense_map(int64_t rows, int64_t cols, int op, float a, float b, const float *Z,
					     int64_t ldz, int zkind, float *Y, int64_t ldy, cudaStream_t stream)
{
	if (rows <= 0 || cols <= 0)
		return cudaSuccess;
	map_kernel<<<blocks_for(rows * cols), 256, 0, stream>>>(rows, cols, op, a, b, Z, ldz, zkind, Y, ldy);
	return cudaGetLastError();
}

extern "C" cudaError_t starfa_cuda_dense_uniform(int64_t rows, int64_t cols, int64_t row0, float lo, float hi,
						 uint64_t seed, float *Y, int64_t ldy, cudaStream_t stream)
{
	if (rows <= 0 || cols <= 0)
		return cudaSuccess;
	uniform_kernel<<<blocks_for(rows * cols), 256, 0, stream>>>(rows, cols, row0, lo, hi, seed, Y, ldy);
	return cudaGetLastError();
}

extern "C" cudaError_t starfa_cuda_dense_colsum(int64_t rows, int64_t cols, const float *X, int64_t ldx, int accumulate,
						float *v, cudaStream_t stream)
{
	if (cols <= 0)
		return cudaSuccess;
	const int64_t chunks = rows > 0 ? (rows + kColsumChunk - 1) / kColsumChunk : 0;
	double *partial = nullptr;
	cudaError_t err = cudaSuccess;
	if (chunks > 0) {
		err = cudaMallocAsync((void **)&partial, (size_t)(chunks * cols) * sizeof(double), stream);
		if (err != cudaSuccess)
			return err;
		const unsigned grid_y = (unsigned)(chunks < 65535 ? chunks : 65535); /* chunks beyond: grid-stride */
		colsum_partial_kernel<<<dim3(blocks_for(cols), grid_y), 256, 0, stream>>>(rows, cols, X, ldx, partial);
		err = cudaGetLastError();
	}
	if (err == cudaSuccess) {
		colsum_kernel<<<blocks_for(cols), 256, 0, stream>>>(chunks, cols, partial, accumulate, v);
		err = cudaGetLastError();
	}
	if (partial) {
		cudaError_t ferr = cudaFreeAsync(partial, stream);
		if (err == cudaSuccess)
			err = ferr;
	}
	return err;
}

extern "C" cudaError_t starfa_cuda_dense_rowsum(int64_t rows, int64_t cols, const float *X, int64_t ldx, float *R,
						int64_t ldr, cudaStream_t stream)
{
	if (rows <= 0)
		return cudaSuccess;
	rowsum_kernel<<<blocks_for(rows * 32), 256, 0, stream>>>(rows, cols, X, ldx, R, ldr);
	return cudaGetLastError();
}

extern "C" cudaError_t starfa_cuda_dense_cg(int64_t rows, int64_t cols, int start, float *X, int64_t ldx, float *R,
					    int64_t ldr, float *P, int64_t ldp, const float *Q, int64_t ldq, float *rr,
					    int64_t ldrr, const float *lam, int64_t ldl, cudaStream_t stream)
{
	if (rows <= 0)
		return cudaSuccess;
	cg_kernel<<<blocks_for(rows * 32), 256, 0, stream>>>(rows, cols, start, X, ldx, R, ldr, P, ldp, Q, ldq, rr, ldrr, lam,
							      ldl);
	return cudaGetLastError();
}

extern "C" cudaError_t starfa_cuda_dense_dirichlet(int64_t rows, int64_t cols, float prior, float tol, const float *G,
						   int64_t ldg, float *gamma, int64_t ldgam, float *elog, int64_t lde,
						   float *expelog, int64_t ldx, float *active, int64_t ldact, double *left,
						   cudaStream_t stream)
{
	cudaError_t err = cudaMemsetAsync(left, 0, sizeof *left, stream);
	if (err != cudaSuccess || rows <= 0 || cols <= 0)
		return err;
	dirichlet_kernel<<<blocks_for(rows * 32), 256, 0, stream>>>(rows, cols, prior, tol, G, ldg, gamma, ldgam, elog, lde,
								     expelog, ldx, active, ldact, left);
	return cudaGetLastError();
}

extern "C" cudaError_t starfa_cuda_dense_reduce(int64_t rows, int64_t cols, const float *X, int64_t ldx,
						const float *w, int64_t ldw, int op, double *sum, cudaStream_t stream)
{
	cudaError_t err = cudaMemsetAsync(sum, 0, sizeof *sum, stream);
	if (err != cudaSuccess || rows <= 0 || cols <= 0)
		return err;
	reduce_kernel<<<starfa_gpu::reduce_blocks(rows * cols), kReduceThreads, 0, stream>>>(rows, cols, X, ldx, w, ldw, op,
											      sum);
	return cudaGetLastError();
}

extern "C" cudaError_t starfa_cuda_dense_to_half(int64_t rows, int64_t cols, const float *X, int64_t ldx, uint16_t *Y,
						 int64_t ldy, cudaStream_t stream)
{
	return convert<true>(rows, cols, X, ldx, Y, ldy, stream);
}

extern "C" cudaError_t starfa_cuda_dense_from_half(int64_t rows, int64_t cols, const uint16_t *X, int64_t ldx, float *Y,
						   int64_t ldy, cudaStream_t stream)
{
	return convert<false>(rows, cols, X, ldx, Y, ldy, stream);
}
