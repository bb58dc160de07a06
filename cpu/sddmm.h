/* SDDMM on one CSR tile, OpenMP on the CPU (no StarPU here). */
#ifndef STARFA_CPU_SDDMM_H
#define STARFA_CPU_SDDMM_H

#include <stdint.h>

/* For every nonzero p of the tile (row r, column c):
 *   out[p] = alpha * (scaled ? sval[p] : 1) * <A[r, 0:k], B[c, 0:k]> + beta * out[p]
 * (out is not read when beta is 0).
 * A and B are row-major with leading dimensions lda, ldb (>= k). Runs on nthreads
 * OpenMP threads, splitting the tile into row ranges of about equal nonzeros. */
void starfa_cpu_sddmm(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
		      const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k, int scaled, float alpha,
		      float beta, float *out, int nthreads);

/* The sum over the tile's nonzeros p (row r, column c) of (sval[p] - shift - <A[r, 0:k], B[c, 0:k]>)^2, in
 * double, on the calling thread: a model's squared error at the entries without writing its predictions
 * out. */
double starfa_cpu_sqerr(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
			const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k, float shift);

#endif
