/* Per-row Gram matrices of one CSR tile, OpenMP on the CPU (no StarPU here). */
#ifndef STARFA_CPU_HERMITIAN_H
#define STARFA_CPU_HERMITIAN_H

#include <stdint.h>

/* For every row u of the tile:
 *   A_u = (accumulate ? A_u : 0) + (1 / s_u) * sum_{p in row u} w_p theta_c theta_c^T,  c = colind[p]
 * where theta_c = theta[c * ld + 0 .. k), w_p = 1, or alpha * val[p] when weighted (implicit
 * feedback's confidence minus one), and s_u = scale[u * scale_ld] when scale is not NULL, else 1.
 * A holds nrows full symmetric k x k matrices, row-major, one after the other: floats, or FP16 words
 * (uint16_t) when fp16. Runs on nthreads OpenMP threads over row ranges of about equal nonzeros.
 * Returns 0, or -1 when scratch memory cannot be allocated (the output is then incomplete). */
int starfa_cpu_hermitian(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *val,
			 const float *theta, int64_t ld, int64_t k, int weighted, float alpha, const float *scale,
			 int64_t scale_ld, int accumulate, int fp16, void *A, int nthreads);

#endif
