/* Sparse matrices in memory: growable COO, the train/test split and CSR. */
#include "storage/coo.h"
#include "storage/idmap.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ COO */

static int check_dimensions(int64_t nrows, int64_t ncols)
{
	if (nrows < 0 || ncols < 0 || nrows > INT32_MAX || ncols > INT32_MAX)
		return starfa_set_error(STARFA_EINVAL, "matrix dimensions %lld x %lld outside 0..%d",
					(long long)nrows, (long long)ncols, INT32_MAX);
	return 0;
}

/* Makes room for at least `capacity` entries (0 or STARFA_ENOMEM). Only for matrices
 * from starfa_coo_new. */
static int coo_reserve(starfa_coo *coo, int64_t capacity)
{
	struct coo_block *block = (struct coo_block *)coo;
	if (coo->row && capacity <= block->capacity)
		return 0;
	/* Each array that did grow is kept: all three stay valid and freeable. */
	int32_t *row = starfa_realloc_array(coo->row, (uint64_t)capacity, sizeof *row);
	if (row)
		coo->row = row;
	int32_t *col = row ? starfa_realloc_array(coo->col, (uint64_t)capacity, sizeof *col) : NULL;
	if (col)
		coo->col = col;
	float *val = col ? starfa_realloc_array(coo->val, (uint64_t)capacity, sizeof *val) : NULL;
	if (!val)
		return STARFA_ENOMEM;
	coo->val = val;
	block->capacity = capacity;
	return 0;
}

starfa_coo *starfa_coo_new(int64_t nrows, int64_t ncols, int64_t capacity)
{
	if (check_dimensions(nrows, ncols))
		return NULL;
	if (capacity < 0) {
		starfa_set_error(STARFA_EINVAL, "negative COO capacity %lld", (long long)capacity);
		return NULL;
	}
	struct coo_block *block = starfa_calloc(1, sizeof *block);
	if (!block)
		return NULL;
	block->coo.nrows = nrows;
	block->coo.ncols = ncols;
	if (coo_reserve(&block->coo, capacity)) {
		starfa_coo_free(&block->coo);
		return NULL;
	}
	return &block->coo;
}

void starfa_coo_free(starfa_coo *coo)
{
	if (!coo)
		return;
	free(coo->row);
	free(coo->col);
	free(coo->val);
	idmap_free(coo->row_ids);
	idmap_free(coo->col_ids);
	free(coo);
}

static int check_coo(const starfa_coo *coo)
{
	if (!coo || coo->nnz < 0 || (coo->nnz > 0 && (!coo->row || !coo->col || !coo->val)))
		return starfa_set_error(STARFA_EINVAL, "invalid COO matrix");
	int rc = check_dimensions(coo->nrows, coo->ncols);
	for (int64_t k = 0; k < coo->nnz && !rc; k++)
		if (coo->row[k] < 0 || coo->row[k] >= coo->nrows || coo->col[k] < 0 ||
		    coo->col[k] >= coo->ncols)
			rc = starfa_set_error(STARFA_EINVAL, "COO entry %lld at (%d, %d) outside %lld x %lld",
					      (long long)k, coo->row[k], coo->col[k], (long long)coo->nrows,
					      (long long)coo->ncols);
	return rc;
}

int coo_grow(starfa_coo *coo)
{
	int64_t capacity = ((struct coo_block *)coo)->capacity;
	return coo_reserve(coo, capacity < 16 ? 16 : capacity + capacity / 2);
}

/* ------------------------------------------------------------------ split */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static int goes_to_test(int32_t row, int32_t col, uint64_t seed, double fraction)
{
	uint64_t key = (uint64_t)(uint32_t)row << 32 | (uint32_t)col;
	uint64_t h = mix64(mix64(key + 0x9e3779b97f4a7c15ull) ^ seed);
	return (double)(h >> 11) * 0x1.0p-53 < fraction;
}

static starfa_coo *empty_like(const starfa_coo *in, int64_t capacity)
{
	starfa_coo *out = starfa_coo_new(in->nrows, in->ncols, capacity);
	if (out && (idmap_copy(in->row_ids, &out->row_ids) || idmap_copy(in->col_ids, &out->col_ids))) {
		starfa_coo_free(out);
		return NULL;
	}
	return out;
}

int starfa_coo_split(const starfa_coo *in, double test_fraction, uint64_t seed, starfa_coo **train,
		     starfa_coo **test)
{
	if (!train || !test)
		return starfa_set_error(STARFA_EINVAL, "starfa_coo_split: NULL output");
	*train = *test = NULL;
	int rc = check_coo(in);
	if (rc)
		return rc;
	if (!(test_fraction >= 0 && test_fraction <= 1))
		return starfa_set_error(STARFA_EINVAL, "test fraction %g outside [0, 1]", test_fraction);
	int64_t ntest = 0;
	for (int64_t k = 0; k < in->nnz; k++)
		ntest += goes_to_test(in->row[k], in->col[k], seed, test_fraction);
	starfa_coo *a = empty_like(in, in->nnz - ntest);
	starfa_coo *b = a ? empty_like(in, ntest) : NULL;
	if (!b) {
		starfa_coo_free(a);
		return STARFA_ENOMEM;
	}
	for (int64_t k = 0; k < in->nnz; k++) {
		starfa_coo *side = goes_to_test(in->row[k], in->col[k], seed, test_fraction) ? b : a;
		coo_push(side, in->row[k], in->col[k], in->val[k]); /* cannot fail: reserved above */
	}
	*train = a;
	*test = b;
	return 0;
}

int starfa_coo_split_rows(const starfa_coo *in, double test_fraction, uint64_t seed, starfa_coo **train,
			  starfa_coo **test)
{
	if (!train || !test)
		return starfa_set_error(STARFA_EINVAL, "starfa_coo_split_rows: NULL output");
	*train = *test = NULL;
	int rc = check_coo(in);
	if (rc)
		return rc;
	if (!(test_fraction >= 0 && test_fraction <= 1))
		return starfa_set_error(STARFA_EINVAL, "test fraction %g outside [0, 1]", test_fraction);
	/* Each row's new index on its side, and its name there (the input's id, else its 1-based index). */
	const size_t rows = (size_t)(in->nrows > 0 ? in->nrows : 1);
	int64_t *index = starfa_malloc(rows, sizeof *index), counts[2] = {0, 0}, entries[2] = {0, 0};
	unsigned char *side = starfa_malloc(rows, 1); /* 1: the row goes to the test set */
	if (!index || !side) {
		free(index);
		free(side);
		return STARFA_ENOMEM;
	}
	for (int64_t r = 0; r < in->nrows; r++) {
		side[r] = (unsigned char)goes_to_test((int32_t)r, -1, seed, test_fraction);
		index[r] = counts[side[r]]++;
	}
	for (int64_t k = 0; k < in->nnz; k++)
		entries[side[in->row[k]]]++;
	starfa_coo *out[2] = {starfa_coo_new(counts[0], in->ncols, entries[0]),
			      starfa_coo_new(counts[1], in->ncols, entries[1])};
	rc = !out[0] || !out[1] ? STARFA_ENOMEM : 0;
	for (int s = 0; s < 2 && !rc; s++) {
		rc = idmap_copy(in->col_ids, &out[s]->col_ids);
		if (!rc && !(out[s]->row_ids = idmap_new()))
			rc = STARFA_ENOMEM;
	}
	for (int64_t r = 0; r < in->nrows && !rc; r++) {
		char buf[24];
		const char *name = in->row_ids ? starfa_idmap_name(in->row_ids, r) : buf;
		if (!in->row_ids)
			snprintf(buf, sizeof buf, "%lld", (long long)r + 1);
		int64_t got;
		rc = idmap_intern(out[side[r]]->row_ids, name, strlen(name), &got);
	}
	for (int64_t k = 0; k < in->nnz && !rc; k++) {
		starfa_coo *o = out[side[in->row[k]]];
		coo_push(o, (int32_t)index[in->row[k]], in->col[k], in->val[k]); /* cannot fail: reserved above */
	}
	free(index);
	free(side);
	if (rc) {
		starfa_coo_free(out[0]);
		starfa_coo_free(out[1]);
		return rc;
	}
	*train = out[0];
	*test = out[1];
	return 0;
}

/* ------------------------------------------------------------------ CSR */

static starfa_csr *csr_new(int64_t nrows, int64_t ncols, int64_t nnz)
{
	starfa_csr *csr = starfa_calloc(1, sizeof *csr);
	if (!csr)
		return NULL;
	csr->nrows = nrows;
	csr->ncols = ncols;
	csr->nnz = nnz;
	csr->rowptr = starfa_calloc((size_t)nrows + 1, sizeof *csr->rowptr);
	csr->colind = starfa_malloc((size_t)nnz, sizeof *csr->colind);
	csr->val = starfa_malloc((size_t)nnz, sizeof *csr->val);
	if (!csr->rowptr || !csr->colind || !csr->val) {
		starfa_csr_free(csr);
		return NULL;
	}
	return csr;
}

void starfa_csr_free(starfa_csr *csr)
{
	if (!csr)
		return;
	free(csr->rowptr);
	free(csr->colind);
	free(csr->val);
	free(csr);
}

/* Turns counts at ptr[1..n] into offsets: ptr[i] is where bucket i starts. */
static void prefix_sum(int64_t *ptr, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		ptr[i + 1] += ptr[i];
}

/* At most this much of the chunks' counts (bytes), and at least this many items a chunk. */
#define SORT_COUNTS_BYTES (64 << 20)
#define SORT_CHUNK_MIN (1 << 16)
#define SORT_CHUNKS_MAX 64

int counting_sort(int64_t n, int64_t nkeys, int64_t **next, starfa_chunk_fn count, starfa_chunk_fn scatter,
		  void *ctx, int64_t *starts)
{
	int64_t nchunks = n / SORT_CHUNK_MIN;
	if (nchunks > SORT_CHUNKS_MAX)
		nchunks = SORT_CHUNKS_MAX;
	if (nchunks > SORT_COUNTS_BYTES / (8 * (nkeys > 0 ? nkeys : 1)))
		nchunks = SORT_COUNTS_BYTES / (8 * (nkeys > 0 ? nkeys : 1));
	if (nchunks < 1)
		nchunks = 1;
	if (!(*next = starfa_calloc((size_t)(nchunks * (nkeys > 0 ? nkeys : 1)), sizeof **next)))
		return STARFA_ENOMEM;
	int rc = starfa_host_parallel(n, nchunks, count, ctx);
	if (!rc) {
		int64_t slot = 0;
		for (int64_t key = 0; key < nkeys; key++) {
			if (starts)
				starts[key] = slot;
			for (int64_t c = 0; c < nchunks; c++) {
				int64_t items = (*next)[c * nkeys + key];
				(*next)[c * nkeys + key] = slot;
				slot += items;
			}
		}
		if (starts)
			starts[nkeys] = slot;
		rc = starfa_host_parallel(n, nchunks, scatter, ctx);
	}
	free(*next);
	*next = NULL;
	return rc;
}

/* Entries (key[k], other[k], val[k]) sorted by key. */
struct bucket_sort {
	int64_t nkeys;
	const int32_t *key, *other;
	const float *val;
	int64_t *next; /* counting_sort's table */
	int32_t *key_out, *other_out;
	float *val_out;
};

static void count_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end)
{
	const struct bucket_sort *b = ctx;
	int64_t *next = b->next + chunk * b->nkeys;
	for (int64_t k = begin; k < end; k++)
		next[b->key[k]]++;
}

static void scatter_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end)
{
	const struct bucket_sort *b = ctx;
	int64_t *next = b->next + chunk * b->nkeys;
	for (int64_t k = begin; k < end; k++) {
		int64_t dst = next[b->key[k]]++;
		if (b->key_out)
			b->key_out[dst] = b->key[k];
		b->other_out[dst] = b->other[k];
		b->val_out[dst] = b->val[k];
	}
}

/* Stable counting sort of the entries (key[k], other[k], val[k]) by key into (other_out, val_out), with
 * each key's first entry in ptr (nkeys + 1, may be NULL); key_out, when not NULL, receives the sorted keys. */
static int bucket_sort(int64_t nnz, const int32_t *key, const int32_t *other, const float *val,
		       int64_t nkeys, int64_t *ptr, int32_t *key_out, int32_t *other_out, float *val_out)
{
	struct bucket_sort b = {nkeys, key, other, val, NULL, key_out, other_out, val_out};
	return counting_sort(nnz, nkeys, &b.next, count_chunk, scatter_chunk, &b, ptr);
}

static void merge_duplicates(starfa_csr *csr);

/* Entries in CSR order already (a file written row by row, a split of one), checked and copied in
 * chunks on every core. */
struct in_order {
	const starfa_coo *coo;
	starfa_csr *csr;
	unsigned char *unordered, *repeated; /* a chunk's flags: an entry before its predecessor, or equal */
};

#define ORDER_CHUNKS 64

static void order_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end)
{
	const struct in_order *o = ctx;
	const int32_t *row = o->coo->row, *col = o->coo->col;
	unsigned char unordered = 0, repeated = 0;
	for (int64_t k = begin > 0 ? begin : 1; k < end; k++) {
		unordered |= row[k] < row[k - 1] || (row[k] == row[k - 1] && col[k] < col[k - 1]);
		repeated |= row[k] == row[k - 1] && col[k] == col[k - 1];
	}
	o->unordered[chunk] = unordered;
	o->repeated[chunk] = repeated;
}

/* rowptr[r] is the first entry of a row at or after r: each chunk sets it for the rows that start in it
 * (those between its first entry's predecessor's row and its last entry's). */
static void copy_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end)
{
	(void)chunk;
	const struct in_order *o = ctx;
	const int32_t *row = o->coo->row;
	int64_t *rowptr = o->csr->rowptr;
	for (int64_t k = begin; k < end; k++)
		for (int64_t r = k > 0 ? (int64_t)row[k - 1] + 1 : 0; r <= row[k]; r++)
			rowptr[r] = k;
	if (end == o->coo->nnz)
		for (int64_t r = o->coo->nnz > 0 ? (int64_t)row[end - 1] + 1 : 0; r <= o->csr->nrows; r++)
			rowptr[r] = end;
	memcpy(o->csr->colind + begin, o->coo->col + begin, (size_t)(end - begin) * sizeof *o->csr->colind);
	memcpy(o->csr->val + begin, o->coo->val + begin, (size_t)(end - begin) * sizeof *o->csr->val);
}

/* 1 where the entries were in CSR order and are now in csr (duplicates merged when merge is set), 0
 * where they were not, or an error. */
static int csr_copy_in_order(const starfa_coo *coo, starfa_csr *csr, int merge)
{
	unsigned char flags[2 * ORDER_CHUNKS] = {0};
	struct in_order o = {coo, csr, flags, flags + ORDER_CHUNKS};
	int64_t nchunks = coo->nnz < ORDER_CHUNKS ? (coo->nnz > 0 ? coo->nnz : 1) : ORDER_CHUNKS;
	int rc = starfa_host_parallel(coo->nnz, nchunks, order_chunk, &o);
	if (rc)
		return rc;
	int repeated = 0;
	for (int64_t c = 0; c < nchunks; c++) {
		if (o.unordered[c])
			return 0;
		repeated |= o.repeated[c];
	}
	if (coo->nnz == 0) {
		memset(csr->rowptr, 0, ((size_t)csr->nrows + 1) * sizeof *csr->rowptr);
		return 1;
	}
	if ((rc = starfa_host_parallel(coo->nnz, nchunks, copy_chunk, &o)) != 0)
		return rc;
	if (repeated && merge)
		merge_duplicates(csr);
	return 1;
}

/* Sums runs of equal columns within each row, compacting in place. */
static void merge_duplicates(starfa_csr *csr)
{
	int64_t out = 0, start = 0;
	for (int64_t i = 0; i < csr->nrows; i++) {
		int64_t end = csr->rowptr[i + 1];
		for (int64_t k = start; k < end; k++) {
			if (out > csr->rowptr[i] && csr->colind[out - 1] == csr->colind[k]) {
				csr->val[out - 1] += csr->val[k];
				continue;
			}
			csr->colind[out] = csr->colind[k];
			csr->val[out++] = csr->val[k];
		}
		start = end;
		csr->rowptr[i + 1] = out;
	}
	csr->nnz = out;
}

/* Stable counting sort of the positions order[0..n) by key[order[.]] into sorted. */
struct position_sort {
	int64_t nkeys;
	const int64_t *order;
	const int32_t *key;
	int64_t *next; /* counting_sort's table */
	int64_t *sorted;
};

static void count_positions(void *ctx, int64_t chunk, int64_t begin, int64_t end)
{
	const struct position_sort *p = ctx;
	int64_t *next = p->next + chunk * p->nkeys;
	for (int64_t k = begin; k < end; k++)
		next[p->key[p->order[k]]]++;
}

static void scatter_positions(void *ctx, int64_t chunk, int64_t begin, int64_t end)
{
	const struct position_sort *p = ctx;
	int64_t *next = p->next + chunk * p->nkeys;
	for (int64_t k = begin; k < end; k++)
		p->sorted[next[p->key[p->order[k]]]++] = p->order[k];
}

static int sort_positions(int64_t n, const int64_t *order, const int32_t *key, int64_t nkeys, int64_t *sorted)
{
	struct position_sort p = {nkeys, order, key, NULL, sorted};
	return counting_sort(n, nkeys, &p.next, count_positions, scatter_positions, &p, NULL);
}

int starfa_coo_dedupe(starfa_coo *coo, int64_t *removed)
{
	if (removed)
		*removed = 0;
	int rc = check_coo(coo);
	if (rc)
		return rc;
	int64_t nnz = coo->nnz;
	int64_t *by_col = starfa_malloc((size_t)nnz, sizeof *by_col);
	int64_t *by_row = starfa_malloc((size_t)nnz, sizeof *by_row);
	unsigned char *drop = starfa_calloc((size_t)nnz, 1);
	if (!by_col || !by_row || !drop) {
		rc = STARFA_ENOMEM;
		goto out;
	}
	for (int64_t k = 0; k < nnz; k++)
		by_row[k] = k;
	/* Stable sorts by column, then by row: equal (row, col) entries end up together, in
	 * file order, so each run's last element is the one to keep. */
	if ((rc = sort_positions(nnz, by_row, coo->col, coo->ncols, by_col)) != 0 ||
	    (rc = sort_positions(nnz, by_col, coo->row, coo->nrows, by_row)) != 0)
		goto out;
	for (int64_t k = 0; k + 1 < nnz; k++) {
		int64_t a = by_row[k], b = by_row[k + 1];
		if (coo->row[a] == coo->row[b] && coo->col[a] == coo->col[b])
			drop[a] = 1;
	}
	int64_t kept = 0;
	for (int64_t k = 0; k < nnz; k++) {
		if (drop[k])
			continue;
		coo->row[kept] = coo->row[k];
		coo->col[kept] = coo->col[k];
		coo->val[kept++] = coo->val[k];
	}
	if (removed)
		*removed = nnz - kept;
	coo->nnz = kept;
out:
	free(by_col);
	free(by_row);
	free(drop);
	return rc;
}

int starfa_csr_from_coo(const starfa_coo *coo, starfa_csr **out)
{
	return csr_from_coo(coo, 1, out);
}

int csr_from_coo(const starfa_coo *coo, int merge, starfa_csr **out)
{
	if (!out)
		return starfa_set_error(STARFA_EINVAL, "starfa_csr_from_coo: NULL output");
	*out = NULL;
	int rc = check_coo(coo);
	if (rc)
		return rc;
	int64_t nnz = coo->nnz;
	starfa_csr *csr = csr_new(coo->nrows, coo->ncols, nnz);
	if (!csr)
		return STARFA_ENOMEM;
	if ((rc = csr_copy_in_order(coo, csr, merge)) != 0) {
		if (rc == 1) {
			*out = csr;
			return 0;
		}
		starfa_csr_free(csr);
		return rc;
	}
	int32_t *rows = starfa_malloc((size_t)nnz, sizeof *rows);
	int32_t *cols = starfa_malloc((size_t)nnz, sizeof *cols);
	float *vals = starfa_malloc((size_t)nnz, sizeof *vals);
	if (rows && cols && vals) {
		/* Sorting by column, then stably by row, leaves columns sorted within each row. */
		rc = bucket_sort(nnz, coo->col, coo->row, coo->val, coo->ncols, NULL, cols, rows, vals);
		if (!rc)
			rc = bucket_sort(nnz, rows, cols, vals, coo->nrows, csr->rowptr, NULL, csr->colind, csr->val);
	} else {
		rc = STARFA_ENOMEM;
	}
	if (!rc) {
		if (merge)
			merge_duplicates(csr);
		*out = csr;
	} else {
		starfa_csr_free(csr);
	}
	free(rows);
	free(cols);
	free(vals);
	return rc;
}

static int check_csr(const starfa_csr *csr)
{
	if (!csr || !csr->rowptr || csr->nnz < 0 || (csr->nnz > 0 && (!csr->colind || !csr->val)))
		return starfa_set_error(STARFA_EINVAL, "invalid CSR matrix");
	int rc = check_dimensions(csr->nrows, csr->ncols);
	if (!rc && (csr->rowptr[0] != 0 || csr->rowptr[csr->nrows] != csr->nnz))
		rc = starfa_set_error(STARFA_EINVAL, "CSR row pointers do not span the %lld nonzeros",
				      (long long)csr->nnz);
	for (int64_t i = 0; i < csr->nrows && !rc; i++)
		if (csr->rowptr[i] > csr->rowptr[i + 1])
			rc = starfa_set_error(STARFA_EINVAL, "CSR row pointers decrease at row %lld",
					      (long long)i);
	for (int64_t k = 0; k < csr->nnz && !rc; k++)
		if (csr->colind[k] < 0 || csr->colind[k] >= csr->ncols)
			rc = starfa_set_error(STARFA_EINVAL, "CSR column index %d outside 0..%lld",
					      csr->colind[k], (long long)csr->ncols - 1);
	return rc;
}

int starfa_csr_transpose(const starfa_csr *in, starfa_csr **out)
{
	if (!out)
		return starfa_set_error(STARFA_EINVAL, "starfa_csr_transpose: NULL output");
	*out = NULL;
	int rc = check_csr(in);
	if (rc)
		return rc;
	starfa_csr *t = csr_new(in->ncols, in->nrows, in->nnz);
	if (!t)
		return STARFA_ENOMEM;
	/* A counting sort by column visiting rows in order keeps each new row sorted. */
	for (int64_t k = 0; k < in->nnz; k++)
		t->rowptr[in->colind[k] + 1]++;
	prefix_sum(t->rowptr, t->nrows);
	for (int64_t i = 0; i < in->nrows; i++)
		for (int64_t k = in->rowptr[i]; k < in->rowptr[i + 1]; k++) {
			int64_t dst = t->rowptr[in->colind[k]]++;
			t->colind[dst] = (int32_t)i;
			t->val[dst] = in->val[k];
		}
	memmove(t->rowptr + 1, t->rowptr, (size_t)t->nrows * sizeof *t->rowptr);
	t->rowptr[0] = 0;
	*out = t;
	return 0;
}
