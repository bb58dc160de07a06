/* SDDMM on one CSR tile, CUDA: one warp per row, lanes split the rank, shuffle reduction.
 * The straightforward kernel every faster variant is checked against. */
#include "gpu/sddmm.h"

namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;

__global__ void sddmm_warp_per_row(int64_t nrows, const uint32_t *__restrict__ rowptr,
				   const uint32_t *__restrict__ colind, const float *__restrict__ sval,
				   const float *__restrict__ A, int64_t lda, const float *__restrict__ B, int64_t ldb,
				   int64_t k, int scaled, float *__restrict__ out)
{
	const int lane = threadIdx.x % kWarp;
	const int64_t warps = (int64_t)gridDim.x * kWarpsPerBlock;
	for (int64_t r = (int64_t)blockIdx.x * kWarpsPerBlock + threadIdx.x / kWarp; r < nrows; r += warps) {
		const float *a = A + r * lda;
		for (uint32_t p = rowptr[r]; p < rowptr[r + 1]; p++) {
			const float *b = B + (int64_t)colind[p] * ldb;
			float acc = 0.0f;
			for (int64_t d = lane; d < k; d += kWarp)
				acc += a[d] * b[d];
			for (int offset = kWarp / 2; offset > 0; offset /= 2)
				acc += __shfl_down_sync(0xffffffffu, acc, offset);
			if (lane == 0)
				out[p] = scaled ? sval[p] * acc : acc;
		}
	}
}

} // namespace

extern "C" cudaError_t starfa_cuda_sddmm(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind,
					 const float *sval, const float *A, int64_t lda, const float *B, int64_t ldb,
					 int64_t k, int scaled, float *out, cudaStream_t stream)
{
	if (nrows <= 0)
		return cudaSuccess;
	int64_t blocks = (nrows + kWarpsPerBlock - 1) / kWarpsPerBlock;
	if (blocks > 65536)
		blocks = 65536; /* grid-stride beyond this */
	sddmm_warp_per_row<<<(unsigned)blocks, kWarp * kWarpsPerBlock, 0, stream>>>(nrows, rowptr, colind, sval, A, lda,
										   B, ldb, k, scaled, out);
	return cudaGetLastError();
}
