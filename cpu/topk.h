/* Top-k selection, and the top k of a block of rows' scores against every column (A·Bᵀ), on the CPU (no
 * StarPU here). */
#ifndef STARFA_CPU_TOPK_H
#define STARFA_CPU_TOPK_H

#include "cpu/special.h" /* STARFA_HD */
#include <stdint.h>

/* The selection's order, in the CPU and the CUDA kernels alike (host and device code): score sa of item ia
 * ranks above score sb of item ib when higher, or equal and of the lower item, so that ties do not depend
 * on the order of work. */
STARFA_HD int starfa_ranks_above(float sa, int32_t ia, float sb, int32_t ib)
{
	return sa > sb || (sa == sb && ia < ib);
}

/* An item and its score, as top-k selection keeps them. */
struct scored {
	float score;
	int32_t item;
};

/* qsort's comparison for the selection's order: a higher score first, ties the lower item first. */
int starfa_cpu_scored_order(const void *a, const void *b);

/* The k best of scores[0 .. n) (items 0 .. n), leaving out excluded[0 .. nex) (sorted ascending; NULL when
 * nex is 0) and NaN scores, best first (a higher score; ties: the lower index) into heap (k entries);
 * returns how many (fewer than k when fewer remain). */
int64_t starfa_cpu_top_k(const float *scores, int64_t n, int64_t k, const int32_t *excluded, int64_t nex,
			 struct scored *heap);

/* Rows scored at once by starfa_cpu_score_rows: at most this many, and at most 2^20 scores (4 MB). */
#define STARFA_CPU_SCORE_ROWS 64
/* How many rows of ncols scores a block holds (1 to STARFA_CPU_SCORE_ROWS). */
int64_t starfa_cpu_score_block(int64_t ncols);

/* S (nb x ncols, row-major) = the rows rows[0 .. nb) of A (rank values each, stride lda), packed into X (nb x
 * rank), times every row of B (rank values, stride ldb): one SGEMM (OpenBLAS), zeros when rank or ncols is 0. */
void starfa_cpu_score_rows(const int64_t *rows, int64_t nb, const float *A, int64_t lda, int64_t rank,
			   const float *B, int64_t ldb, int64_t ncols, float *X, float *S);

/* For each row r < nrows with active[r] != 0 (active NULL: every row), the top k of its scores against the
 * ncols columns, score(r, c) = A_r · B_c over rank values (A_r = A[r * lda ..], B_c = B[c * ldb ..]), leaving
 * out the columns of its CSR row (rowptr NULL: none) and NaN scores, written to row r of L (ldl >= 2k
 * floats): pairs (score, column as int32 bits), best first, and (NaN, -1) past the last; rows not active
 * are all (NaN, -1). Scores are computed by SGEMM a block of rows at a time (one thread). Returns 0, or -1
 * when scratch memory cannot be allocated (L then unspecified). */
int starfa_cpu_top_k_rows(int64_t nrows, int64_t ncols, int64_t rank, const float *A, int64_t lda, const float *B,
			  int64_t ldb, const uint32_t *rowptr, const uint32_t *colind, const float *active, int64_t k,
			  float *L, int64_t ldl);

#endif
