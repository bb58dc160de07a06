/* CCD++ rank-one passes over one CSR tile of the residual, and the per-row updates (no StarPU here),
 * for the CPU; the CUDA kernels (gpu/ccd.h) follow the same contracts.
 *
 * A pass walks the tile's entries (r, c) (r a row of the tile's grid: the side being updated, x; c a
 * column: the other side, y) and computes
 *   v = R[e] - sub_x[r] sub_y[c] + add_x[r] add_y[c]      (a NULL pair is no term)
 * the residual with the previous feature taken out and the current one put back (Yu et al., ICDM 2012,
 * the fused form of cuMF's cumf_ccd). With write, R[e] = v. With y, the row's numerator and denominator
 * of the rank-one update,
 *   acc[r][0] (+)= sum over the row of v y[c],   acc[r][1] (+)= sum of y[c]^2
 * (accumulate 0 overwrites them). Vectors are one value per row with a stride (leading dimension). */
#ifndef STARFA_CPU_CCD_H
#define STARFA_CPU_CCD_H

#include <stdint.h>

struct starfa_ccd_vecs {
	const float *sub_x, *sub_y, *add_x, *add_y, *y; /* NULL: absent */
	int64_t ld_sub_x, ld_sub_y, ld_add_x, ld_add_y, ld_y;
};

void starfa_cpu_ccd_pass(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, float *R, int write,
			 const struct starfa_ccd_vecs *v, float *acc, int64_t ld_acc, int accumulate);

/* x[r] = acc[r][0] / (lambda n[r] + acc[r][1]) (0 where that is 0; max(0, .) with nonneg). */
void starfa_cpu_ccd_solve(int64_t nrows, const float *acc, int64_t ld_acc, const float *n, int64_t ld_n, float lambda,
			  int nonneg, float *x, int64_t ld_x);

/* sum over the rows of n[r] x[r]^2, in double: a feature's share of CCD++'s regularization. */
double starfa_cpu_ccd_regularizer(int64_t nrows, const float *x, int64_t ld_x, const float *n, int64_t ld_n);

#endif
