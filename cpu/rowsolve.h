/* ALS rows built and solved in one pass, OpenMP on the CPU (no StarPU here): the fused form of the
 * hermitian, bias and solve kernels, which never writes a system to memory. */
#ifndef STARFA_CPU_ROWSOLVE_H
#define STARFA_CPU_ROWSOLVE_H

#include "cpu/solve.h"

#include <stdint.h>

/* One CSR tile of a band (nrows rows, the band's) and the other side's factors of its columns. */
struct starfa_cpu_rowsolve_tile {
	const uint32_t *rowptr, *colind;
	const float *val;
	const float *theta;  /* theta_c = theta[c * ld + 0 .. k) */
	int64_t ld;
	const float *offset; /* explicit: offset[c * ld] subtracted from the ratings; NULL none */
};

struct starfa_cpu_rowsolve {
	int64_t nrows, k;
	int ntiles;
	const struct starfa_cpu_rowsolve_tile *tiles;
	int implicit;        /* weights alpha * r and targets 1 + alpha * r; else weights 1, targets r - mu - offset */
	float alpha, mu;
	const float *lambda; /* lambda_u = lambda[u * info_ld] */
	int64_t info_ld;
	const float *G;      /* k x k added to every system, or NULL */
	starfa_cpu_solver solver;
	int cg_steps;
	float *X;            /* x_u = X[u * ldx + 0 .. k): CG's start, the solution */
	int64_t ldx;
};

/* For every row u < nrows, over the entries of row u in every tile:
 *   M_u = sum w theta_c theta_c^T + lambda_u I + G,  b_u = sum t theta_c,  M_u x_u = b_u
 * the systems starfa_cpu_hermitian, starfa_cpu_bias and starfa_cpu_solve build and solve, with the
 * same meaning of w, t, CHOLESKY and CG. Each row's M_u lives in a per-thread buffer while it is solved;
 * CG on rows whose products with the vectors are cheaper than forming M_u runs matrix-free
 * (M_u p = sum w (theta_c·p) theta_c + lambda_u p + G p). Fills status as starfa_cpu_solve does (a
 * non-finite system means a non-finite theta_c, weight or G). Runs on nthreads OpenMP threads. Returns
 * 0, or -1 when scratch memory cannot be allocated (the output is then incomplete). */
int starfa_cpu_rowsolve(const struct starfa_cpu_rowsolve *pb, uint32_t *status, int nthreads);

/* 1 when CG at rank k with cg_steps steps runs matrix-free: 2 (steps + 1) passes of 2 k flops per entry
 * against k^2 per entry to form M_u (the formed product runs about twice as fast per flop). */
static inline int starfa_cpu_rowsolve_matrix_free(int64_t k, int cg_steps)
{
	return 8 * ((int64_t)cg_steps + 1) <= k;
}

#endif
