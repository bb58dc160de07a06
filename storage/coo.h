/* The growable COO behind every starfa_coo the library allocates (the readers fill them). */
#ifndef STARFA_STORAGE_COO_H
#define STARFA_STORAGE_COO_H

#include "runtime/internal.h"

/* A starfa_coo with the capacity of its arrays; every COO the library allocates is one. */
struct coo_block {
	starfa_coo coo;
	int64_t capacity;
};

/* Grows the arrays geometrically to hold one more entry. */
int coo_grow(starfa_coo *coo);

static inline int coo_push(starfa_coo *coo, int32_t row, int32_t col, float val)
{
	if (coo->nnz == ((struct coo_block *)coo)->capacity) {
		int rc = coo_grow(coo);
		if (rc)
			return rc;
	}
	coo->row[coo->nnz] = row;
	coo->col[coo->nnz] = col;
	coo->val[coo->nnz] = val;
	coo->nnz++;
	return 0;
}

#endif
