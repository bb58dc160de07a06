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

/* A stable counting sort of n items by a key in [0, nkeys), in chunks of the items on every core
 * (starfa_host_parallel), so that the result is the one of a single pass in item order:
 * count(ctx, chunk, begin, end) adds its items' keys up in (*next)[chunk * nkeys + key]; each count then
 * becomes that chunk's first slot for the key (a key's slots in chunk order, the keys in order); starts
 * (nkeys + 1, may be NULL) gets each key's first slot and n; scatter(ctx, chunk, begin, end) puts each
 * item at (*next)[chunk * nkeys + key]++. *next (in ctx, for the chunk functions) is allocated and freed
 * here. 0 or an error. Used by the CSR conversion, the duplicates check and the tiles' transposes. */
int counting_sort(int64_t n, int64_t nkeys, int64_t **next, starfa_chunk_fn count, starfa_chunk_fn scatter,
		  void *ctx, int64_t *starts);

/* starfa_csr_from_coo, with merge 0 keeping duplicates as entries of their own (a test set's repeated
 * ratings), each row's columns still in order. */
int csr_from_coo(const starfa_coo *coo, int merge, starfa_csr **out);

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
