/* CCD++ passes and updates on CUDA: a group of kLanes lanes per row (the tile's mean row length picks
 * 4 to 32), the row's entries strided across the group, the numerator and denominator summed by
 * shuffles. */
#include "gpu/ccd.h"

namespace {

constexpr int kThreads = 256;

template <int kLanes>
__global__ void __launch_bounds__(kThreads)
	ccd_pass_kernel(int64_t nrows, const uint32_t *__restrict__ rowptr, const uint32_t *__restrict__ colind,
			float *__restrict__ R, int write, const starfa_ccd_vecs v, float *__restrict__ acc, int64_t ld_acc,
			int accumulate)
{
	const int lane = threadIdx.x % kLanes;
	const unsigned mask =
		kLanes == 32 ? 0xffffffffu : ((1u << kLanes) - 1u) << (threadIdx.x % 32 / kLanes * kLanes);
	const int64_t groups = (int64_t)gridDim.x * (kThreads / kLanes);
	const bool sub = v.sub_x && v.sub_y, add = v.add_x && v.add_y, sums = v.y && acc;
	/* a row a group; the shuffles take the group's lanes only */
	const int64_t first = ((int64_t)blockIdx.x * kThreads + threadIdx.x) / kLanes;
	for (int64_t r = first; r < nrows; r += groups) {
		const float sx = sub ? v.sub_x[r * v.ld_sub_x] : 0.0f, ax = add ? v.add_x[r * v.ld_add_x] : 0.0f;
		float num = 0.0f, den = 0.0f;
		const uint32_t e1 = rowptr[r + 1];
		for (uint32_t e = rowptr[r] + lane; e < e1; e += kLanes) {
			const int64_t c = __ldg(colind + e);
			float x = R[e];
			if (sub)
				x -= sx * __ldg(v.sub_y + c * v.ld_sub_y);
			if (add)
				x += ax * __ldg(v.add_y + c * v.ld_add_y);
			if (write)
				R[e] = x;
			if (sums) {
				const float yc = __ldg(v.y + c * v.ld_y);
				num += x * yc;
				den += yc * yc;
			}
		}
		if (sums) {
			for (int offset = kLanes / 2; offset > 0; offset /= 2) {
				num += __shfl_xor_sync(mask, num, offset);
				den += __shfl_xor_sync(mask, den, offset);
			}
			if (lane == 0) {
				float *a = acc + r * ld_acc;
				a[0] = accumulate ? a[0] + num : num;
				a[1] = accumulate ? a[1] + den : den;
			}
		}
	}
}

__global__ void ccd_solve_kernel(int64_t nrows, const float *__restrict__ acc, int64_t ld_acc, const float *__restrict__ n,
				 int64_t ld_n, float lambda, int nonneg, float *__restrict__ x, int64_t ld_x)
{
	for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < nrows; r += (int64_t)gridDim.x * blockDim.x) {
		const float den = lambda * n[r * ld_n] + acc[r * ld_acc + 1];
		const float v = den > 0.0f ? acc[r * ld_acc] / den : 0.0f;
		x[r * ld_x] = nonneg && !(v > 0.0f) ? 0.0f : v;
	}
}

template <int kLanes>
void launch_pass(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, float *R, int write,
		 const starfa_ccd_vecs &v, float *acc, int64_t ld_acc, int accumulate, cudaStream_t stream)
{
	int64_t blocks = (nrows * kLanes + kThreads - 1) / kThreads;
	blocks = blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks;
	ccd_pass_kernel<kLanes><<<(unsigned)blocks, kThreads, 0, stream>>>(nrows, rowptr, colind, R, write, v, acc, ld_acc,
									   accumulate);
}

} // namespace

extern "C" cudaError_t starfa_cuda_ccd_pass(int64_t nrows, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind,
					    float *R, int write, const struct starfa_ccd_vecs *v, float *acc, int64_t ld_acc,
					    int accumulate, cudaStream_t stream)
{
	if (nrows <= 0)
		return cudaSuccess;
	const int64_t mean = nnz / nrows;
	if (mean <= 4)
		launch_pass<4>(nrows, rowptr, colind, R, write, *v, acc, ld_acc, accumulate, stream);
	else if (mean <= 8)
		launch_pass<8>(nrows, rowptr, colind, R, write, *v, acc, ld_acc, accumulate, stream);
	else if (mean <= 16)
		launch_pass<16>(nrows, rowptr, colind, R, write, *v, acc, ld_acc, accumulate, stream);
	else
		launch_pass<32>(nrows, rowptr, colind, R, write, *v, acc, ld_acc, accumulate, stream);
	return cudaGetLastError();
}

extern "C" cudaError_t starfa_cuda_ccd_solve(int64_t nrows, const float *acc, int64_t ld_acc, const float *n,
					     int64_t ld_n, float lambda, int nonneg, float *x, int64_t ld_x,
					     cudaStream_t stream)
{
	if (nrows <= 0)
		return cudaSuccess;
	int64_t blocks = (nrows + 255) / 256;
	blocks = blocks > 65535 ? 65535 : blocks;
	ccd_solve_kernel<<<(unsigned)blocks, 256, 0, stream>>>(nrows, acc, ld_acc, n, ld_n, lambda, nonneg, x, ld_x);
	return cudaGetLastError();
}
