/* Element-wise maps, column and row sums and reductions of one dense block (row-major, leading
 * dimension ld), on the CPU (no StarPU here). The ops are starfa_dense_op and starfa_reduce_op. */
#ifndef STARFA_CPU_DENSE_H
#define STARFA_CPU_DENSE_H

#include <stdint.h>

/* Where a map's operand z comes from. */
enum starfa_operand_kind {
	STARFA_OPERAND_NONE = 0,
	STARFA_OPERAND_SAME = 1,   /* z = Z[r * ldz + c] */
	STARFA_OPERAND_PER_ROW = 2, /* z = Z[r * ldz] */
	STARFA_OPERAND_PER_COL = 3, /* z = Z[c] */
};

/* y[r, c] = op(a, b, z, y[r, c]) for r < rows, c < cols. */
void starfa_cpu_dense_map(int64_t rows, int64_t cols, int op, float a, float b, const float *Z, int64_t ldz,
			  int zkind, float *Y, int64_t ldy);
/* v[c] = (accumulate ? v[c] : 0) + sum over r of X[r, c] (summed in double). Returns 0, or -1 when
 * scratch memory could not be had. */
int starfa_cpu_dense_colsum(int64_t rows, int64_t cols, const float *X, int64_t ldx, int accumulate, float *v);
/* R[r * ldr] = sum over c of X[r, c]. */
void starfa_cpu_dense_rowsum(int64_t rows, int64_t cols, const float *X, int64_t ldx, float *R, int64_t ldr);
/* One step of conjugate gradients for each row's own system (A_r + lam_r I) x_r = b_r, matrix-free: X, R
 * (the residual), P (the direction) and Q rows x cols, rr and lam one value per row (leading dimensions
 * ldx ... ldl). start: r = Q - lam x (Q = b - A x), p = r, rr = r·r. Otherwise Q = A p and, with
 * q = Q + lam p: alpha = rr / p·q, x += alpha p, r -= alpha q, rr' = r·r, p = r + (rr' / rr) p, rr = rr'
 * (alpha 0 where p·q <= 0, beta 0 where rr <= 0: a converged row stays put). Dot products in double. */
void starfa_cpu_dense_cg(int64_t rows, int64_t cols, int start, float *X, int64_t ldx, float *R, int64_t ldr, float *P,
			 int64_t ldp, const float *Q, int64_t ldq, float *rr, int64_t ldrr, const float *lam, int64_t ldl);
/* Y = uniform draws in [lo, hi): element (r, c) of the block, whose first row is row `row0` of a dense
 * of `cols` columns, gets starfa_uniform_between(lo, hi, seed, (row0 + r) * cols + c). */
void starfa_cpu_dense_uniform(int64_t rows, int64_t cols, int64_t row0, float lo, float hi, uint64_t seed, float *Y,
			      int64_t ldy);

/* One variational step of per-row Dirichlet parameters (starfa_task_dense_dirichlet): for each row r with
 * active[r] != 0 (active NULL: every row), gamma' = prior + expelog ∘ G, change = mean |gamma' - gamma|,
 * gamma = gamma', elog = ψ(gamma) - ψ(Σ gamma), expelog = exp(elog), active[r] = change >= tol.
 * Returns the count of rows left at or above tol, NaN if a change is not finite. */
double starfa_cpu_dense_dirichlet(int64_t rows, int64_t cols, float prior, float tol, const float *G, int64_t ldg,
				  float *gamma, int64_t ldgam, float *elog, int64_t lde, float *expelog, int64_t ldx,
				  float *active, int64_t ldact);
/* FP32 to FP16 (cpu/half.h) and back: rows x cols values, leading dimensions in elements of each. */
void starfa_cpu_dense_to_half(int64_t rows, int64_t cols, const float *X, int64_t ldx, uint16_t *Y, int64_t ldy);
void starfa_cpu_dense_from_half(int64_t rows, int64_t cols, const uint16_t *X, int64_t ldx, float *Y, int64_t ldy);
/* The sum of op's term (SUM, SQUARES or ABS) over the block, in double; with w, each row's terms times
 * its weight w[r * ldw]. */
double starfa_cpu_dense_reduce(int64_t rows, int64_t cols, const float *X, int64_t ldx, const float *w, int64_t ldw,
			       int op);

#endif
