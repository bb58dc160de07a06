/* Per-row right-hand sides b_u = sum t theta of one CSR tile (an SpMM row with the ALS targets as
 * values), OpenMP on the CPU. */
#include "cpu/bias.h"

#include "cpu/clones.h"
#include "cpu/partition.h"

STARFA_CPU_CLONES
static void bias_rows(int64_t r0, int64_t r1, const uint32_t *restrict rowptr, const uint32_t *restrict colind,
		      const float *restrict val, const float *restrict theta, int64_t ld, int64_t k,
		      const float *restrict offset, float mu, int confidence, float alpha, int accumulate,
		      float *restrict b, int64_t ldb)
{
	for (int64_t r = r0; r < r1; r++) {
		float *restrict out = b + r * ldb;
		if (!accumulate)
			for (int64_t d = 0; d < k; d++)
				out[d] = 0.0f;
		for (uint32_t p = rowptr[r]; p < rowptr[r + 1]; p++) {
			int64_t c = colind[p];
			float t = confidence ? 1.0f + alpha * val[p] : val[p] - mu - (offset ? offset[c * ld] : 0.0f);
			const float *restrict th = theta + c * ld;
#pragma omp simd
			for (int64_t d = 0; d < k; d++)
				out[d] += t * th[d];
		}
	}
}

void starfa_cpu_bias(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *val,
		     const float *theta, int64_t ld, int64_t k, const float *offset, float mu, int confidence,
		     float alpha, int accumulate, float *b, int64_t ldb, int nthreads)
{
	if (nthreads <= 1) {
		bias_rows(0, nrows, rowptr, colind, val, theta, ld, k, offset, mu, confidence, alpha, accumulate, b,
			  ldb);
		return;
	}
#pragma omp parallel num_threads(nthreads)
	{
		int64_t r0, r1;
		starfa_cpu_nnz_partition(nrows, rowptr, omp_get_thread_num(), omp_get_num_threads(), &r0, &r1);
		bias_rows(r0, r1, rowptr, colind, val, theta, ld, k, offset, mu, confidence, alpha, accumulate, b,
			  ldb);
	}
}
