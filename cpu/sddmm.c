/* SDDMM on one CSR tile, OpenMP on the CPU.
 * Threads take row ranges of equal nonzeros (cpu/partition.h); inside a row, four
 * nonzeros are computed together so that four B rows stream at once while the A row
 * stays in L1; the loops are compiled for AVX-512, AVX2 and baseline x86-64, picked at
 * run time. */
#include "cpu/sddmm.h"

#include "cpu/clones.h"
#include "cpu/dot.h"
#include "cpu/partition.h"

/* alpha * (scaled ? s : 1) * dot + beta * out, out not read when beta is 0. */
static inline float epilogue(float dot, uint32_t p, int scaled, const float *restrict sval, float alpha, float beta,
			     const float *restrict out)
{
	float v = alpha * (scaled ? sval[p] * dot : dot);
	return beta != 0.0f ? v + beta * out[p] : v;
}

STARFA_CPU_CLONES
static void sddmm_rows(int64_t r0, int64_t r1, const uint32_t *restrict rowptr, const uint32_t *restrict colind,
		       const float *restrict sval, const float *restrict A, int64_t lda, const float *restrict B,
		       int64_t ldb, int64_t k, int scaled, float alpha, float beta, float *restrict out)
{
	for (int64_t r = r0; r < r1; r++) {
		const float *restrict a = A + r * lda;
		uint32_t p = rowptr[r];
		const uint32_t end = rowptr[r + 1];
		for (; p + 4 <= end; p += 4) {
			const float *restrict b0 = B + (int64_t)colind[p] * ldb;
			const float *restrict b1 = B + (int64_t)colind[p + 1] * ldb;
			const float *restrict b2 = B + (int64_t)colind[p + 2] * ldb;
			const float *restrict b3 = B + (int64_t)colind[p + 3] * ldb;
			float s[4];
			starfa_dot4(a, b0, b1, b2, b3, k, s);
			out[p] = epilogue(s[0], p, scaled, sval, alpha, beta, out);
			out[p + 1] = epilogue(s[1], p + 1, scaled, sval, alpha, beta, out);
			out[p + 2] = epilogue(s[2], p + 2, scaled, sval, alpha, beta, out);
			out[p + 3] = epilogue(s[3], p + 3, scaled, sval, alpha, beta, out);
		}
		for (; p < end; p++) {
			const float *restrict b = B + (int64_t)colind[p] * ldb;
			out[p] = epilogue(starfa_dot(a, b, k), p, scaled, sval, alpha, beta, out);
		}
	}
}

void starfa_cpu_sddmm(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
		      const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k, int scaled, float alpha,
		      float beta, float *out, int nthreads)
{
	if (nthreads <= 1) {
		sddmm_rows(0, nrows, rowptr, colind, sval, A, lda, B, ldb, k, scaled, alpha, beta, out);
		return;
	}
#pragma omp parallel num_threads(nthreads)
	{
		int64_t r0, r1;
		starfa_cpu_nnz_partition(nrows, rowptr, omp_get_thread_num(), omp_get_num_threads(), &r0, &r1);
		sddmm_rows(r0, r1, rowptr, colind, sval, A, lda, B, ldb, k, scaled, alpha, beta, out);
	}
}

STARFA_CPU_CLONES
static double sqerr_rows(int64_t nrows, const uint32_t *restrict rowptr, const uint32_t *restrict colind,
			 const float *restrict sval, const float *restrict A, int64_t lda, const float *restrict B,
			 int64_t ldb, int64_t k, float shift)
{
	/* Four sums, one a lane of the dot4 steps (the row tails' go to the first): one chain of double adds
	 * was the loop's longest, an add's latency an entry. */
	double sum[4] = {0.0, 0.0, 0.0, 0.0};
	for (int64_t r = 0; r < nrows; r++) {
		const float *restrict a = A + r * lda;
		uint32_t p = rowptr[r];
		const uint32_t end = rowptr[r + 1];
		for (; p + 4 <= end; p += 4) {
			float s[4];
			starfa_dot4(a, B + (int64_t)colind[p] * ldb, B + (int64_t)colind[p + 1] * ldb,
				    B + (int64_t)colind[p + 2] * ldb, B + (int64_t)colind[p + 3] * ldb, k, s);
			for (int q = 0; q < 4; q++) {
				const float e = sval[p + q] - shift - s[q];
				sum[q] += (double)e * e;
			}
		}
		for (; p < end; p++) {
			const float e = sval[p] - shift - starfa_dot(a, B + (int64_t)colind[p] * ldb, k);
			sum[0] += (double)e * e;
		}
	}
	return (sum[0] + sum[1]) + (sum[2] + sum[3]);
}

double starfa_cpu_sqerr(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
			const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k, float shift)
{
	return sqerr_rows(nrows, rowptr, colind, sval, A, lda, B, ldb, k, shift);
}
