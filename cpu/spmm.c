/* SpMM on one CSR tile, OpenMP on the CPU. */
#include "cpu/spmm.h"

#include "cpu/clones.h"
#include "cpu/partition.h"

#include <string.h>

/* y += v * x over k floats: the loop the compiler vectorizes across the rank. */
static void axpy(float v, const float *restrict x, float *restrict y, int64_t k)
{
#pragma omp simd
	for (int64_t d = 0; d < k; d++)
		y[d] += v * x[d];
}

static void spmm_rows(int64_t r0, int64_t r1, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
		      const float *X, int64_t ldx, int64_t k, int beta, float *Y, int64_t ldy)
{
	for (int64_t r = r0; r < r1; r++) {
		float *y = Y + r * ldy;
		/* Overwrite, not 0 * y: the block may hold anything (NaN included) before its first tile. */
		if (!beta)
			memset(y, 0, (size_t)k * sizeof *y);
		for (uint32_t p = rowptr[r]; p < rowptr[r + 1]; p++)
			axpy(sval[p], X + (int64_t)colind[p] * ldx, y, k);
	}
}

void starfa_cpu_spmm(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
		     const float *X, int64_t ldx, int64_t k, int beta, float *Y, int64_t ldy, int nthreads)
{
	if (nthreads <= 1) {
		spmm_rows(0, nrows, rowptr, colind, sval, X, ldx, k, beta, Y, ldy);
		return;
	}
#pragma omp parallel num_threads(nthreads)
	{
		int64_t r0, r1;
		starfa_cpu_nnz_partition(nrows, rowptr, omp_get_thread_num(), omp_get_num_threads(), &r0, &r1);
		spmm_rows(r0, r1, rowptr, colind, sval, X, ldx, k, beta, Y, ldy);
	}
}

/* f of the fused product, as starfa_fused_mode numbers them. */
static inline float fused_value(int mode, float s, float y, float eps)
{
	return mode == 0 ? y : mode == 1 ? s * y : s / (y > eps ? y : eps);
}

/* Four nonzeros a step: their B rows stream at once for the dot products while A's row stays in L1, then
 * the four scaled rows go onto Y's in CSR order (still in L1). */
STARFA_CPU_CLONES
void starfa_cpu_sddmm_spmm(int64_t nrows, const uint32_t *restrict rowptr, const uint32_t *restrict colind,
			   const float *restrict sval, const float *restrict A, int64_t lda, const float *restrict B,
			   int64_t ldb, int64_t k, int mode, float eps, int beta, float *restrict Y, int64_t ldy)
{
	for (int64_t r = 0; r < nrows; r++) {
		float *restrict y = Y + r * ldy;
		const float *restrict a = A + r * lda;
		if (!beta)
			memset(y, 0, (size_t)k * sizeof *y);
		uint32_t p = rowptr[r];
		const uint32_t end = rowptr[r + 1];
		for (; (uint64_t)p + 4 <= end; p += 4) {
			const float *restrict b0 = B + (int64_t)colind[p] * ldb;
			const float *restrict b1 = B + (int64_t)colind[p + 1] * ldb;
			const float *restrict b2 = B + (int64_t)colind[p + 2] * ldb;
			const float *restrict b3 = B + (int64_t)colind[p + 3] * ldb;
			float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
			for (int64_t c = 0; c < k; c++) {
				s0 += a[c] * b0[c];
				s1 += a[c] * b1[c];
				s2 += a[c] * b2[c];
				s3 += a[c] * b3[c];
			}
			const float f0 = fused_value(mode, sval[p], s0, eps), f1 = fused_value(mode, sval[p + 1], s1, eps);
			const float f2 = fused_value(mode, sval[p + 2], s2, eps), f3 = fused_value(mode, sval[p + 3], s3, eps);
#pragma omp simd
			for (int64_t c = 0; c < k; c++)
				y[c] = (((y[c] + f0 * b0[c]) + f1 * b1[c]) + f2 * b2[c]) + f3 * b3[c];
		}
		for (; p < end; p++) {
			const float *restrict b = B + (int64_t)colind[p] * ldb;
			float d = 0.0f;
#pragma omp simd reduction(+ : d)
			for (int64_t c = 0; c < k; c++)
				d += a[c] * b[c];
			axpy(fused_value(mode, sval[p], d, eps), b, y, k);
		}
	}
}

void starfa_cpu_spmm_zero(int64_t nrows, int64_t k, float *Y, int64_t ldy)
{
	for (int64_t r = 0; r < nrows; r++)
		memset(Y + r * ldy, 0, (size_t)k * sizeof *Y);
}
