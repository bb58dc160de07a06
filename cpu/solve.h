/* Batched small symmetric positive definite solves, OpenMP on the CPU (no StarPU here). */
#ifndef STARFA_CPU_SOLVE_H
#define STARFA_CPU_SOLVE_H

#include <stdint.h>

typedef enum starfa_cpu_solver { STARFA_CPU_CHOLESKY = 0, STARFA_CPU_CG = 1 } starfa_cpu_solver;

/* What a batch reports (one uint32_t per word, the layout of the solve codelet's status buffer, which
 * every implementation of the codelet writes): how many rows came out non-finite or could not be
 * solved, how many of those had a non-finite system (A_u or G) or right-hand side, how many systems
 * were not positive definite (their x_u is left as it was), and the first such row. */
enum {
	STARFA_SOLVE_BAD_ROWS = 0,
	STARFA_SOLVE_NONFINITE_A,
	STARFA_SOLVE_NONFINITE_B,
	STARFA_SOLVE_NOT_SPD,
	STARFA_SOLVE_FIRST_BAD_ROW, /* UINT32_MAX when none */
	STARFA_SOLVE_STATUS_WORDS
};

/* For every row u < nrows, solves M_u x_u = b_u with
 *   M_u = s_u A_u + lambda_u I + G
 * where A_u is the u-th full symmetric k x k matrix of A (row-major floats, or FP16 words when fp16),
 * s_u = scale[u * info_ld] (1 when scale is NULL), lambda_u = lambda[u * info_ld], G a k x k matrix
 * added to every system (NULL: none), b_u = b[u * ldb + 0 .. k) and x_u = X[u * ldx + 0 .. k).
 * CHOLESKY: exact (LAPACKE spotrf and spotrs); CG: cg_steps of conjugate gradient started from x_u's
 * current value (stopping early at a zero residual). Fills status (STARFA_SOLVE_STATUS_WORDS words).
 * Runs on nthreads OpenMP threads over equal row ranges. Returns 0, or -1 when scratch memory cannot be
 * allocated (the output is then incomplete). */
int starfa_cpu_solve(int64_t nrows, int64_t k, const void *A, int fp16, const float *b, int64_t ldb,
		     const float *lambda, const float *scale, int64_t info_ld, const float *G, starfa_cpu_solver solver,
		     int cg_steps, float *X, int64_t ldx, uint32_t *status, int nthreads);

#endif
