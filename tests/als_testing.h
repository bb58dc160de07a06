/* What the ALS tests share: one CSR matrix as a single tile (32-bit offsets, as the kernels take
 * them), and float32 bounds for sums. */
#ifndef STARFA_TESTS_ALS_TESTING_H
#define STARFA_TESTS_ALS_TESTING_H

#include "testing.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

struct als_tile {
	starfa_csr *csr;
	uint32_t *rowptr, *colind;
};

/* A random m x n tile; skew > 0 gives heavy rows (past the kernels' panel chunk) and empty ones.
 * nonnegative: values in [0, 1) (implicit feedback counts) instead of [-1, 1). */
static inline int als_tile_make(struct als_tile *t, int64_t m, int64_t n, int64_t nnz, double skew, int nonnegative,
				uint64_t *rng)
{
	t->csr = testing_random_csr(m, n, nnz, skew, rng);
	if (!t->csr)
		return 1;
	if (nonnegative)
		for (int64_t p = 0; p < t->csr->nnz; p++)
			t->csr->val[p] = fabsf(t->csr->val[p]);
	t->rowptr = malloc(sizeof(uint32_t) * (size_t)(m + 1));
	t->colind = malloc(sizeof(uint32_t) * (size_t)(t->csr->nnz + 1));
	if (!t->rowptr || !t->colind)
		return 1;
	for (int64_t r = 0; r <= m; r++)
		t->rowptr[r] = (uint32_t)t->csr->rowptr[r];
	for (int64_t p = 0; p < t->csr->nnz; p++)
		t->colind[p] = (uint32_t)t->csr->colind[p];
	return 0;
}

static inline void als_tile_free(struct als_tile *t)
{
	starfa_csr_free(t->csr);
	free(t->rowptr);
	free(t->colind);
}

/* The most nonzeros in one row. */
static inline int64_t als_max_row(const starfa_csr *c)
{
	int64_t most = 0;
	for (int64_t r = 0; r < c->nrows; r++)
		if (c->rowptr[r + 1] - c->rowptr[r] > most)
			most = c->rowptr[r + 1] - c->rowptr[r];
	return most;
}

static inline float *als_alloc(size_t n)
{
	return malloc((n ? n : 1) * sizeof(float));
}

#endif
