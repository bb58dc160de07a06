/* SDDMM on one CSR tile, OpenMP on the CPU. */
#include "cpu/sddmm.h"

#include "cpu/partition.h"

static float dot(const float *restrict a, const float *restrict b, int64_t k)
{
	float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
	for (int64_t d = 0; d < k; d++)
		acc += a[d] * b[d];
	return acc;
}

static void sddmm_rows(int64_t r0, int64_t r1, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
		       const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k, int scaled, float *out)
{
	for (int64_t r = r0; r < r1; r++) {
		const float *a = A + r * lda;
		for (uint32_t p = rowptr[r]; p < rowptr[r + 1]; p++) {
			float v = dot(a, B + (int64_t)colind[p] * ldb, k);
			out[p] = scaled ? sval[p] * v : v;
		}
	}
}

void starfa_cpu_sddmm(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
		      const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k, int scaled, float *out,
		      int nthreads)
{
	if (nthreads <= 1) {
		sddmm_rows(0, nrows, rowptr, colind, sval, A, lda, B, ldb, k, scaled, out);
		return;
	}
#pragma omp parallel num_threads(nthreads)
	{
		int64_t r0, r1;
		starfa_cpu_nnz_partition(nrows, rowptr, omp_get_thread_num(), omp_get_num_threads(), &r0, &r1);
		sddmm_rows(r0, r1, rowptr, colind, sval, A, lda, B, ldb, k, scaled, out);
	}
}
