/* SpMM on one CSR tile, OpenMP on the CPU (no StarPU here). */
#ifndef STARFA_CPU_SPMM_H
#define STARFA_CPU_SPMM_H

#include <stdint.h>

/* For every row r of the tile:
 *   Y[r, 0:k] = (beta ? Y[r, 0:k] : 0) + sum_p sval[p] * X[colind[p], 0:k]
 * adding the nonzeros in CSR order, so the result does not depend on nthreads. X and Y are
 * row-major with leading dimensions ldx, ldy (>= k); with beta 0, Y is only written (empty
 * rows become zeros). Runs on nthreads OpenMP threads over row ranges of about equal
 * nonzeros. */
void starfa_cpu_spmm(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
		     const float *X, int64_t ldx, int64_t k, int beta, float *Y, int64_t ldy, int nthreads);

/* The fused SDDMM + SpMM of one tile: for every row r,
 *   Y[r, 0:k] = (beta ? Y[r, 0:k] : 0) + sum_p f(sval[p], A[r, 0:k]·B[colind[p], 0:k]) * B[colind[p], 0:k]
 * with f (starfa_fused_mode) y, s·y or s / max(eps, y); the products never go to memory. Nonzeros in CSR
 * order, one thread. active (a column, leading dimension ldact; NULL: every row): rows whose value is 0
 * are skipped, their Y rows neither read nor written. Ranks up to 64 on a CPU with AVX-512 run a kernel that keeps A's row and Y's in
 * registers (starfa_cpu_sddmm_spmm_registers says when); the rest the portable one. */
void starfa_cpu_sddmm_spmm(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
			   const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k, int mode, float eps,
			   int beta, float *Y, int64_t ldy, const float *active, int64_t ldact);

/* The same on every CPU and rank (the register kernels sum in another order). */
void starfa_cpu_sddmm_spmm_portable(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
				    const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k, int mode, float eps,
				    int beta, float *Y, int64_t ldy, const float *active, int64_t ldact);

/* 1 when starfa_cpu_sddmm_spmm runs a register kernel at rank k on this CPU. */
int starfa_cpu_sddmm_spmm_registers(int64_t k);

/* Y[0:nrows, 0:k] = 0: an output block no nonzero contributes to. */
void starfa_cpu_spmm_zero(int64_t nrows, int64_t k, float *Y, int64_t ldy);

#endif
