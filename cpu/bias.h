/* Per-row right-hand sides of one CSR tile, OpenMP on the CPU (no StarPU here). */
#ifndef STARFA_CPU_BIAS_H
#define STARFA_CPU_BIAS_H

#include <stdint.h>

/* For every row u of the tile:
 *   b_u = (accumulate ? b_u : 0) + sum_{p in row u} t_p theta_c,  c = colind[p]
 * where theta_c = theta[c * ld + 0 .. k) and
 *   t_p = val[p] - mu - (offset ? offset[c * ld] : 0)  explicit ratings: what the row's unknowns must
 *                                                      explain once the mean and the other side's
 *                                                      bias are taken out;
 *   t_p = 1 + alpha * val[p]                           when confidence (implicit feedback: c_uv p_uv,
 *                                                      p_uv = 1).
 * b is nrows x k with leading dimension ldb. Runs on nthreads OpenMP threads over row ranges of about
 * equal nonzeros; each row's sum runs in CSR order whatever the threads. */
void starfa_cpu_bias(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *val,
		     const float *theta, int64_t ld, int64_t k, const float *offset, float mu, int confidence,
		     float alpha, int accumulate, float *b, int64_t ldb, int nthreads);

#endif
