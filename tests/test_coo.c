/* COO matrices, id maps, the train/test split and CSR conversion, against simple references. */
#include "testing.h"
#include "io/reader.h"

#include <stdlib.h>
#include <string.h>

/* A random COO of nnz entries in nrows x ncols (repeated positions likely when small). */
static starfa_coo *random_coo(int64_t nrows, int64_t ncols, int64_t nnz, uint64_t *state)
{
	starfa_coo *coo = starfa_coo_new(nrows, ncols, nnz);
	if (!coo)
		return NULL;
	for (int64_t k = 0; k < nnz; k++) {
		coo->row[k] = (int32_t)testing_below(state, (uint64_t)nrows);
		coo->col[k] = (int32_t)testing_below(state, (uint64_t)ncols);
		coo->val[k] = (float)(2 * testing_uniform(state) - 1);
	}
	coo->nnz = nnz;
	return coo;
}

/* Reads ratings from text (NULL when that fails, with the message reported). */
static starfa_coo *ratings(const char *text)
{
	starfa_coo *coo = NULL;
	if (starfa_read_buffer("ratings.csv", text, strlen(text), STARFA_FORMAT_RATINGS, &coo))
		testing_fail(__FILE__, __LINE__, "%s", starfa_last_error());
	return coo;
}

/* ------------------------------------------------------------------ COO and id maps */

TEST(coo, new_and_free)
{
	starfa_coo *coo = starfa_coo_new(3, 5, 10);
	CHECK(coo);
	CHECK(coo->nrows == 3 && coo->ncols == 5 && coo->nnz == 0);
	CHECK(coo->row && coo->col && coo->val);
	CHECK(coo->row_ids == NULL && coo->col_ids == NULL);
	for (int k = 0; k < 10; k++) {
		coo->row[k] = k % 3;
		coo->col[k] = k % 5;
		coo->val[k] = (float)k;
	}
	coo->nnz = 10;
	starfa_coo_free(coo);

	coo = starfa_coo_new(0, 0, 0);
	CHECK(coo && coo->nnz == 0);
	starfa_coo_free(coo);
	starfa_coo_free(NULL);

	CHECK(starfa_coo_new(-1, 2, 0) == NULL);
	CHECK(strstr(starfa_last_error(), "dimensions"));
	CHECK(starfa_coo_new(2, (int64_t)INT32_MAX + 1, 0) == NULL);
	CHECK(starfa_coo_new(2, 2, -1) == NULL);
	return 0;
}

TEST(coo, idmap_null_and_bounds)
{
	CHECK(starfa_idmap_count(NULL) == 0);
	CHECK(starfa_idmap_name(NULL, 0) == NULL);
	CHECK(starfa_idmap_find(NULL, "x") == -1);
	starfa_coo *coo = ratings("x,y,1\n");
	CHECK(coo);
	int ok = starfa_idmap_count(coo->row_ids) == 1 && starfa_idmap_find(coo->row_ids, NULL) == -1 &&
		 starfa_idmap_find(coo->row_ids, "") == -1 && starfa_idmap_name(coo->col_ids, 1) == NULL &&
		 strcmp(starfa_idmap_name(coo->col_ids, 0), "y") == 0;
	starfa_coo_free(coo);
	CHECK(ok);
	return 0;
}

/* Enough distinct ids to grow the hash table many times, each found at its index. */
TEST(coo, idmap_many_ids)
{
	enum { N = 100000 };
	char *text = malloc((size_t)N * 40);
	CHECK(text);
	size_t len = 0;
	for (int k = 0; k < N; k++)
		len += (size_t)sprintf(text + len, "user-%d\titem %d\t1\n", (k * 7919) % N, k % 1000);
	starfa_coo *coo = NULL;
	int rc = starfa_read_buffer("many.tsv", text, len, STARFA_FORMAT_RATINGS, &coo);
	free(text);
	CHECK_MSG(rc == 0, "%s", starfa_last_error());
	int bad = -1;
	for (int k = 0; k < N && bad < 0; k++) {
		char name[32];
		sprintf(name, "user-%d", (k * 7919) % N);
		if (coo->row[k] != k || starfa_idmap_find(coo->row_ids, name) != k ||
		    strcmp(starfa_idmap_name(coo->row_ids, k), name) != 0 || coo->col[k] != k % 1000)
			bad = k;
	}
	int64_t nrows = coo->nrows, ncols = coo->ncols;
	starfa_coo_free(coo);
	CHECK_MSG(bad < 0, "id %d", bad);
	CHECK(nrows == N && ncols == 1000);
	return 0;
}

/* ------------------------------------------------------------------ split */

static int compare_entries(const void *a, const void *b)
{
	const int64_t *x = a, *y = b;
	return (x[0] > y[0]) - (x[0] < y[0]);
}

/* The entries as sortable keys (row, col and the value's bits packed together). */
static int64_t *entry_keys(const starfa_coo *coo)
{
	int64_t *keys = malloc((size_t)(coo->nnz ? coo->nnz : 1) * sizeof *keys);
	for (int64_t k = 0; keys && k < coo->nnz; k++) {
		uint32_t bits;
		memcpy(&bits, &coo->val[k], sizeof bits);
		keys[k] = (int64_t)((uint64_t)(uint32_t)coo->row[k] << 44 ^
				    (uint64_t)(uint32_t)coo->col[k] << 24 ^ bits);
	}
	if (keys)
		qsort(keys, (size_t)coo->nnz, sizeof *keys, compare_entries);
	return keys;
}

/* Whether two matrices hold the same entries in any order. */
static int same_entries(const starfa_coo *a, const starfa_coo *b)
{
	if (a->nnz != b->nnz || a->nrows != b->nrows || a->ncols != b->ncols)
		return 0;
	int64_t *ka = entry_keys(a), *kb = entry_keys(b);
	int same = ka && kb && memcmp(ka, kb, (size_t)a->nnz * sizeof *ka) == 0;
	free(ka);
	free(kb);
	return same;
}

/* The union of both sides as one matrix. */
static starfa_coo *concat(const starfa_coo *a, const starfa_coo *b)
{
	starfa_coo *both = starfa_coo_new(a->nrows, a->ncols, a->nnz + b->nnz);
	if (!both)
		return NULL;
	for (int64_t k = 0; k < a->nnz + b->nnz; k++) {
		const starfa_coo *side = k < a->nnz ? a : b;
		int64_t i = k < a->nnz ? k : k - a->nnz;
		both->row[k] = side->row[i];
		both->col[k] = side->col[i];
		both->val[k] = side->val[i];
	}
	both->nnz = a->nnz + b->nnz;
	return both;
}

TEST(coo, split_partitions_entries)
{
	uint64_t state = testing_seed();
	enum { N = 100000 };
	starfa_coo *in = random_coo(2000, 3000, N, &state);
	CHECK(in);
	starfa_coo *train = NULL, *test = NULL;
	CHECK_OK(starfa_coo_split(in, 0.2, 42, &train, &test));
	starfa_coo *both = concat(train, test);
	CHECK(both);
	int partition = same_entries(both, in);
	double fraction = (double)test->nnz / N;
	int shapes =
		train->nrows == 2000 && train->ncols == 3000 && test->nrows == 2000 && test->ncols == 3000;
	starfa_coo_free(both);
	starfa_coo_free(train);
	starfa_coo_free(test);
	starfa_coo_free(in);
	CHECK_MSG(partition, "train and test together differ from the input");
	CHECK(shapes);
	/* The standard deviation of the fraction is about 0.0013: allow 7 of them. */
	CHECK_MSG(fabs(fraction - 0.2) < 0.01, "test fraction %.4f, expected 0.2", fraction);
	return 0;
}

/* Swaps entries at random (Fisher-Yates), keeping them together. */
static void shuffle(starfa_coo *coo, uint64_t *state)
{
	for (int64_t k = coo->nnz - 1; k > 0; k--) {
		int64_t j = (int64_t)testing_below(state, (uint64_t)k + 1);
		int32_t row = coo->row[k], col = coo->col[k];
		float val = coo->val[k];
		coo->row[k] = coo->row[j];
		coo->col[k] = coo->col[j];
		coo->val[k] = coo->val[j];
		coo->row[j] = row;
		coo->col[j] = col;
		coo->val[j] = val;
	}
}

TEST(coo, split_is_deterministic)
{
	uint64_t state = testing_seed();
	starfa_coo *in = random_coo(500, 500, 20000, &state);
	starfa_coo *empty = starfa_coo_new(500, 500, 0);
	CHECK(in && empty);
	starfa_coo *shuffled = concat(in, empty);
	CHECK(shuffled);
	shuffle(shuffled, &state);
	starfa_coo *train[4], *test[4];
	CHECK_OK(starfa_coo_split(in, 0.3, 7, &train[0], &test[0]));
	CHECK_OK(starfa_coo_split(in, 0.3, 7, &train[1], &test[1]));
	CHECK_OK(starfa_coo_split(shuffled, 0.3, 7, &train[2], &test[2]));
	CHECK_OK(starfa_coo_split(in, 0.3, 8, &train[3], &test[3]));
	/* Same input, same seed: the very same arrays. */
	int repeat = test[0]->nnz == test[1]->nnz &&
		     memcmp(test[0]->row, test[1]->row, (size_t)test[0]->nnz * sizeof(int32_t)) == 0 &&
		     memcmp(test[0]->col, test[1]->col, (size_t)test[0]->nnz * sizeof(int32_t)) == 0 &&
		     memcmp(test[0]->val, test[1]->val, (size_t)test[0]->nnz * sizeof(float)) == 0 &&
		     same_entries(train[0], train[1]);
	int order_free = same_entries(train[0], train[2]) && same_entries(test[0], test[2]);
	int seed_matters = !same_entries(test[0], test[3]);
	for (int i = 0; i < 4; i++) {
		starfa_coo_free(train[i]);
		starfa_coo_free(test[i]);
	}
	starfa_coo_free(shuffled);
	starfa_coo_free(empty);
	starfa_coo_free(in);
	CHECK(repeat);
	CHECK(order_free);
	CHECK(seed_matters);
	return 0;
}

/* Repeated (row, col) pairs share a side, so no rating leaks across the split. */
TEST(coo, split_keeps_duplicates_together)
{
	uint64_t state = testing_seed();
	starfa_coo *in = random_coo(20, 20, 5000, &state);
	CHECK(in);
	starfa_coo *train, *test;
	CHECK_OK(starfa_coo_split(in, 0.5, testing_seed(), &train, &test));
	static char side[20][20];
	memset(side, 0, sizeof side);
	for (int64_t k = 0; k < train->nnz; k++)
		side[train->row[k]][train->col[k]] |= 1;
	for (int64_t k = 0; k < test->nnz; k++)
		side[test->row[k]][test->col[k]] |= 2;
	int mixed = 0;
	for (int i = 0; i < 20; i++)
		for (int j = 0; j < 20; j++)
			mixed += side[i][j] == 3;
	starfa_coo_free(train);
	starfa_coo_free(test);
	starfa_coo_free(in);
	CHECK_MSG(mixed == 0, "%d positions on both sides", mixed);
	return 0;
}

TEST(coo, split_fraction_bounds)
{
	uint64_t state = testing_seed();
	starfa_coo *in = random_coo(100, 100, 1000, &state);
	CHECK(in);
	starfa_coo *train = NULL, *test = NULL;
	CHECK_OK(starfa_coo_split(in, 0, 1, &train, &test));
	int none = train->nnz == 1000 && test->nnz == 0 && same_entries(train, in);
	starfa_coo_free(train);
	starfa_coo_free(test);
	CHECK_OK(starfa_coo_split(in, 1, 1, &train, &test));
	int all = train->nnz == 0 && test->nnz == 1000 && same_entries(test, in);
	starfa_coo_free(train);
	starfa_coo_free(test);
	static const double bad[] = {-0.01, 1.01, NAN, INFINITY, -INFINITY};
	int rejected = 1;
	for (int i = 0; i < 5; i++) {
		train = test = in;
		rejected &=
			starfa_coo_split(in, bad[i], 1, &train, &test) == STARFA_EINVAL && !train && !test;
	}
	rejected &= starfa_coo_split(NULL, 0.5, 1, &train, &test) == STARFA_EINVAL;
	in->row[3] = 100;
	rejected &= starfa_coo_split(in, 0.5, 1, &train, &test) == STARFA_EINVAL;
	starfa_coo_free(in);
	CHECK(none);
	CHECK(all);
	CHECK(rejected);
	return 0;
}

TEST(coo, split_copies_ids)
{
	starfa_coo *in = ratings("ann,x,1\nbob,y,2\nann,y,3\ncid,z,4\nbob,x,5\n");
	CHECK(in);
	starfa_coo *train, *test;
	CHECK_OK(starfa_coo_split(in, 0.5, 3, &train, &test));
	starfa_coo_free(in);
	int ok = 1;
	for (int s = 0; s < 2; s++) {
		const starfa_coo *side = s ? test : train;
		ok &= side->nrows == 3 && side->ncols == 3 && side->row_ids && side->col_ids;
		ok &= starfa_idmap_count(side->row_ids) == 3 && starfa_idmap_count(side->col_ids) == 3;
		ok &= strcmp(starfa_idmap_name(side->row_ids, 2), "cid") == 0;
		ok &= starfa_idmap_find(side->col_ids, "y") == 1 &&
		      starfa_idmap_find(side->row_ids, "x") == -1;
	}
	ok &= train->row_ids != test->row_ids;
	starfa_coo_free(train);
	starfa_coo_free(test);
	CHECK(ok);
	return 0;
}

/* ------------------------------------------------------------------ CSR */

/* Checks csr (rows sorted, no repeated column) against a dense nrows x ncols reference
 * whose entries present[] marks. */
static int check_csr(const starfa_csr *csr, int64_t nrows, int64_t ncols, const double *dense,
		     const char *present)
{
	CHECK(csr->nrows == nrows && csr->ncols == ncols);
	CHECK(csr->rowptr[0] == 0 && csr->rowptr[nrows] == csr->nnz);
	int64_t distinct = 0;
	for (int64_t i = 0; i < nrows * ncols; i++)
		distinct += present[i];
	CHECK_MSG(csr->nnz == distinct, "%lld nonzeros, expected %lld", (long long)csr->nnz,
		  (long long)distinct);
	for (int64_t i = 0; i < nrows; i++)
		for (int64_t k = csr->rowptr[i]; k < csr->rowptr[i + 1]; k++) {
			int32_t j = csr->colind[k];
			CHECK_MSG(j >= 0 && j < ncols && present[i * ncols + j], "row %lld: column %d",
				  (long long)i, j);
			CHECK_MSG(k == csr->rowptr[i] || csr->colind[k - 1] < j, "row %lld not sorted",
				  (long long)i);
			double want = dense[i * ncols + j];
			CHECK_MSG(fabs(csr->val[k] - want) <= 1e-5 * (1 + fabs(want)),
				  "(%lld, %d) = %g, expected %g", (long long)i, j, csr->val[k], want);
		}
	return 0;
}

/* CSR and its transpose for one random COO with many duplicates. */
static int check_conversion(int64_t nrows, int64_t ncols, int64_t nnz, uint64_t *state)
{
	starfa_coo *coo = random_coo(nrows, ncols, nnz, state);
	size_t cells = (size_t)(nrows * ncols) + 1;
	double *dense = calloc(cells, sizeof *dense), *dense_t = calloc(cells, sizeof *dense_t);
	char *present = calloc(cells, 1), *present_t = calloc(cells, 1);
	CHECK(coo && dense && dense_t && present && present_t);
	for (int64_t k = 0; k < nnz; k++) {
		dense[coo->row[k] * ncols + coo->col[k]] += coo->val[k];
		dense_t[coo->col[k] * nrows + coo->row[k]] += coo->val[k];
		present[coo->row[k] * ncols + coo->col[k]] = 1;
		present_t[coo->col[k] * nrows + coo->row[k]] = 1;
	}
	starfa_csr *csr = NULL, *t = NULL, *tt = NULL;
	CHECK_OK(starfa_csr_from_coo(coo, &csr));
	CHECK_OK(starfa_csr_transpose(csr, &t));
	CHECK_OK(starfa_csr_transpose(t, &tt));
	int rc = check_csr(csr, nrows, ncols, dense, present) ||
		 check_csr(t, ncols, nrows, dense_t, present_t);
	/* Transposing twice gives back exactly the same arrays. */
	int same = tt->nnz == csr->nnz && tt->nrows == nrows &&
		   memcmp(tt->rowptr, csr->rowptr, (size_t)(nrows + 1) * sizeof *tt->rowptr) == 0 &&
		   memcmp(tt->colind, csr->colind, (size_t)csr->nnz * sizeof *tt->colind) == 0 &&
		   memcmp(tt->val, csr->val, (size_t)csr->nnz * sizeof *tt->val) == 0;
	starfa_csr_free(tt);
	starfa_csr_free(t);
	starfa_csr_free(csr);
	starfa_coo_free(coo);
	free(dense);
	free(dense_t);
	free(present);
	free(present_t);
	CHECK_MSG(rc == 0, "%lld x %lld with %lld entries", (long long)nrows, (long long)ncols,
		  (long long)nnz);
	CHECK(same);
	return 0;
}

TEST(coo, csr_random_against_dense)
{
	uint64_t state = testing_seed();
	for (int trial = 0; trial < 200; trial++) {
		int64_t nrows = 1 + (int64_t)testing_below(&state, 40);
		int64_t ncols = 1 + (int64_t)testing_below(&state, 40);
		int64_t nnz = (int64_t)testing_below(&state, (uint64_t)(3 * nrows * ncols));
		CHECK_OK(check_conversion(nrows, ncols, nnz, &state));
	}
	CHECK_OK(check_conversion(300, 700, 100000, &state));
	return 0;
}

/* Entries in CSR order already (rows, then columns, duplicates in file order) take the conversion's
 * direct path, and entries in row order with each row's columns in file order (ids numbered as they
 * first appear) the sorts; both give the same arrays, bit for bit, as the same entries in random order,
 * at a size that the sorts cut into chunks (rows of about 250 entries, duplicates apart within them). */
static const starfa_coo *order_coo;
static int by_row_col(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	const starfa_coo *c = order_coo;
	if (c->row[x] != c->row[y])
		return c->row[x] < c->row[y] ? -1 : 1;
	if (c->col[x] != c->col[y])
		return c->col[x] < c->col[y] ? -1 : 1;
	return x < y ? -1 : x > y; /* stable: duplicates in file order */
}

static int by_row(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	const starfa_coo *c = order_coo;
	if (c->row[x] != c->row[y])
		return c->row[x] < c->row[y] ? -1 : 1;
	return x < y ? -1 : x > y; /* within a row, file order */
}

/* coo's entries in the order qsort with cmp gives their positions. */
static starfa_coo *reordered(const starfa_coo *coo, int (*cmp)(const void *, const void *))
{
	starfa_coo *out = starfa_coo_new(coo->nrows, coo->ncols, coo->nnz);
	int64_t *order = malloc(sizeof *order * (size_t)(coo->nnz + 1));
	if (out && order) {
		for (int64_t k = 0; k < coo->nnz; k++)
			order[k] = k;
		order_coo = coo;
		qsort(order, (size_t)coo->nnz, sizeof *order, cmp);
		for (int64_t k = 0; k < coo->nnz; k++) {
			out->row[k] = coo->row[order[k]];
			out->col[k] = coo->col[order[k]];
			out->val[k] = coo->val[order[k]];
		}
		out->nnz = coo->nnz;
	}
	free(order);
	return out;
}

TEST(coo, csr_from_sorted_entries_matches_unsorted)
{
	uint64_t state = testing_seed() + 3;
	CHECK_OK(check_conversion(1500, 1000, 600000, &state));
	const int64_t nrows = 2000, ncols = 900, nnz = 500000;
	/* Rows in order, each row's entries in file order: columns unsorted, duplicates apart. */
	starfa_coo *coo = random_coo(nrows, ncols, nnz, &state), *sorted = NULL, *rows_only = NULL;
	CHECK(coo && (sorted = reordered(coo, by_row_col)) && (rows_only = reordered(coo, by_row)));
	starfa_csr *a = NULL, *b = NULL, *c = NULL;
	CHECK_OK(starfa_csr_from_coo(coo, &a));
	CHECK_OK(starfa_csr_from_coo(sorted, &b));
	CHECK_OK(starfa_csr_from_coo(rows_only, &c));
	CHECK(a->nnz == b->nnz && a->nnz == c->nnz && a->nnz < nnz); /* duplicates were merged */
	CHECK(memcmp(a->rowptr, b->rowptr, sizeof *a->rowptr * (size_t)(nrows + 1)) == 0);
	CHECK(memcmp(a->colind, b->colind, sizeof *a->colind * (size_t)a->nnz) == 0);
	CHECK(memcmp(a->val, b->val, sizeof *a->val * (size_t)a->nnz) == 0);
	CHECK(memcmp(a->rowptr, c->rowptr, sizeof *a->rowptr * (size_t)(nrows + 1)) == 0);
	CHECK(memcmp(a->colind, c->colind, sizeof *a->colind * (size_t)a->nnz) == 0);
	CHECK(memcmp(a->val, c->val, sizeof *a->val * (size_t)a->nnz) == 0);
	starfa_csr_free(c);
	starfa_coo_free(rows_only);
	/* In order without duplicates, rows shifted by one: an empty first row and three empty last ones. */
	starfa_coo *unique = starfa_coo_new(nrows + 4, ncols, a->nnz);
	starfa_csr *u = NULL;
	CHECK(unique);
	for (int64_t r = 0; r < nrows; r++)
		for (int64_t e = a->rowptr[r]; e < a->rowptr[r + 1]; e++) {
			unique->row[e] = (int32_t)(r + 1);
			unique->col[e] = a->colind[e];
			unique->val[e] = a->val[e];
		}
	unique->nnz = a->nnz;
	CHECK_OK(starfa_csr_from_coo(unique, &u));
	CHECK(u->nnz == a->nnz && u->rowptr[0] == 0 && u->rowptr[1] == 0);
	for (int64_t r = 0; r <= nrows; r++)
		CHECK(u->rowptr[r + 1] == a->rowptr[r]);
	for (int64_t r = nrows + 1; r <= nrows + 4; r++)
		CHECK(u->rowptr[r] == a->nnz);
	CHECK(memcmp(a->colind, u->colind, sizeof *a->colind * (size_t)a->nnz) == 0);
	CHECK(memcmp(a->val, u->val, sizeof *a->val * (size_t)a->nnz) == 0);
	starfa_csr_free(u);
	starfa_coo_free(unique);
	starfa_csr_free(a);
	starfa_csr_free(b);
	starfa_coo_free(coo);
	starfa_coo_free(sorted);
	return 0;
}

TEST(coo, csr_empty_shapes)
{
	uint64_t state = testing_seed();
	CHECK_OK(check_conversion(0, 0, 0, &state));
	CHECK_OK(check_conversion(5, 0, 0, &state));
	CHECK_OK(check_conversion(0, 7, 0, &state));
	CHECK_OK(check_conversion(6, 9, 0, &state));
	CHECK_OK(check_conversion(1000, 1, 3, &state));
	return 0;
}

/* Duplicates are summed in file order: the sum is exactly what sequential adds give. */
TEST(coo, csr_sums_duplicates_in_order)
{
	starfa_coo *coo = starfa_coo_new(2, 3, 5);
	CHECK(coo);
	const int32_t rows[] = {1, 0, 1, 1, 0}, cols[] = {2, 1, 0, 2, 1};
	const float vals[] = {1e8f, 1, 2, -1e8f, 0.5f};
	memcpy(coo->row, rows, sizeof rows);
	memcpy(coo->col, cols, sizeof cols);
	memcpy(coo->val, vals, sizeof vals);
	coo->nnz = 5;
	starfa_csr *csr;
	CHECK_OK(starfa_csr_from_coo(coo, &csr));
	starfa_coo_free(coo);
	const int64_t want_rowptr[] = {0, 1, 3};
	const int32_t want_col[] = {1, 0, 2};
	const float want_val[] = {1.5f, 2, 0};
	int ok = csr->nnz == 3 && memcmp(csr->rowptr, want_rowptr, sizeof want_rowptr) == 0 &&
		 memcmp(csr->colind, want_col, sizeof want_col) == 0 &&
		 memcmp(csr->val, want_val, sizeof want_val) == 0;
	starfa_csr_free(csr);
	CHECK(ok);
	return 0;
}

TEST(coo, csr_rejects_invalid)
{
	starfa_coo *coo = starfa_coo_new(2, 2, 1);
	CHECK(coo);
	coo->row[0] = 0;
	coo->col[0] = 2;
	coo->val[0] = 1;
	coo->nnz = 1;
	starfa_csr *csr = (starfa_csr *)&csr;
	int rc = starfa_csr_from_coo(coo, &csr);
	coo->col[0] = -1;
	int rc_negative = starfa_csr_from_coo(coo, &csr);
	coo->col[0] = 1;
	coo->nnz = -1;
	int rc_count = starfa_csr_from_coo(coo, &csr);
	starfa_coo_free(coo);
	CHECK(rc == STARFA_EINVAL && rc_negative == STARFA_EINVAL && rc_count == STARFA_EINVAL &&
	      csr == NULL);
	CHECK(starfa_csr_from_coo(NULL, &csr) == STARFA_EINVAL);
	CHECK(starfa_csr_transpose(NULL, &csr) == STARFA_EINVAL);

	int64_t rowptr[] = {0, 2, 1};
	int32_t colind[] = {0, 1};
	float val[] = {1, 2};
	starfa_csr bad = {2, 2, 1, rowptr, colind, val};
	CHECK(starfa_csr_transpose(&bad, &csr) == STARFA_EINVAL);
	bad.nnz = 2;
	CHECK(starfa_csr_transpose(&bad, &csr) == STARFA_EINVAL);
	rowptr[1] = 1;
	rowptr[2] = 2;
	colind[1] = 5;
	CHECK(starfa_csr_transpose(&bad, &csr) == STARFA_EINVAL);
	starfa_csr_free(NULL);
	return 0;
}

/* A rating given again replaces the earlier one: the last of each (row, col) stays, in order. */
TEST(coo, dedupe_keeps_the_last_of_each_pair)
{
	uint64_t rng = testing_seed() + 77;
	int64_t m = 7, n = 5, nnz = 2000;
	starfa_coo *coo = starfa_coo_new(m, n, nnz);
	CHECK(coo);
	for (int64_t e = 0; e < nnz; e++) {
		coo->row[e] = (int32_t)testing_below(&rng, (uint64_t)m);
		coo->col[e] = (int32_t)testing_below(&rng, (uint64_t)n);
		coo->val[e] = (float)e; /* the value records the position */
	}
	coo->nnz = nnz;
	/* The reference: the last position of each pair. */
	float last[7][5];
	int seen[7][5] = {{0}};
	for (int64_t e = 0; e < nnz; e++) {
		last[coo->row[e]][coo->col[e]] = coo->val[e];
		seen[coo->row[e]][coo->col[e]] = 1;
	}
	int64_t pairs = 0;
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++)
			pairs += seen[i][j];
	int64_t removed = -1;
	CHECK_OK(starfa_coo_dedupe(coo, &removed));
	CHECK(coo->nnz == pairs && removed == nnz - pairs);
	for (int64_t e = 0; e < coo->nnz; e++) {
		CHECK(coo->val[e] == last[coo->row[e]][coo->col[e]]);
		CHECK(e == 0 || coo->val[e] > coo->val[e - 1]); /* file order kept */
	}
	CHECK_OK(starfa_coo_dedupe(coo, &removed));
	CHECK(removed == 0);
	starfa_coo_free(coo);
	return 0;
}

/* ------------------------------------------------------------------ ratings read in chunks */

/* A ratings text: a header or not, a separator, comments and blank lines, CRLF or LF line ends, users
 * mostly in runs and items scattered, duplicates; with `bad` one line somewhere is wrong. */
static char *ratings_text(uint64_t *state, int64_t lines, int bad, size_t *size)
{
	static const char *const seps[] = {",", "\t", "::", " "};
	const char *sep = seps[testing_below(state, 4)];
	const char *eol = testing_below(state, 2) ? "\r\n" : "\n";
	size_t cap = (size_t)lines * 64 + 256, len = 0;
	char *text = malloc(cap);
	if (!text)
		return NULL;
	if (testing_below(state, 2))
		len += (size_t)snprintf(text + len, cap - len, "# ratings%s", eol);
	if (testing_below(state, 2))
		len += (size_t)snprintf(text + len, cap - len, "userId%smovieId%srating%s", sep, sep, eol);
	/* Not the first line: a first line whose rating is no number is a header. */
	int64_t user = 0, bad_line = bad ? 1 + (int64_t)testing_below(state, (uint64_t)(lines - 1)) : -1;
	for (int64_t l = 0; l < lines; l++) {
		if (testing_below(state, 50) == 0)
			len += (size_t)snprintf(text + len, cap - len, "%s%s", testing_below(state, 2) ? "" : "# note", eol);
		if (testing_below(state, 20) == 0)
			user = (int64_t)testing_below(state, 3000);
		int64_t item = (int64_t)testing_below(state, 700);
		if (l == bad_line)
			len += (size_t)snprintf(text + len, cap - len, "u%lld%si%lld%sfive%s", (long long)user, sep,
						(long long)item, sep, eol);
		else
			len += (size_t)snprintf(text + len, cap - len, "u%lld%si%lld%s%.3f%s", (long long)user, sep,
						(long long)item, sep, 5.0 * testing_uniform(state), eol);
	}
	*size = len;
	return text;
}

static int same_ids(const starfa_idmap *a, const starfa_idmap *b)
{
	CHECK(starfa_idmap_count(a) == starfa_idmap_count(b));
	for (int64_t i = 0; i < starfa_idmap_count(a); i++)
		CHECK_MSG(strcmp(starfa_idmap_name(a, i), starfa_idmap_name(b, i)) == 0, "id %lld: %s against %s",
			  (long long)i, starfa_idmap_name(a, i), starfa_idmap_name(b, i));
	return 0;
}

/* Read in chunks of a few hundred bytes and line after line, the same entries in the same order, the
 * same ids numbered the same way; a bad line gives the same message with its line number. */
TEST(coo, ratings_in_chunks_match_line_by_line)
{
	uint64_t state = testing_seed() + 29;
	for (int trial = 0; trial < 40; trial++) {
		int bad = trial % 4 == 3;
		size_t size = 0;
		char *text = ratings_text(&state, 200 + (int64_t)testing_below(&state, 3000), bad, &size);
		CHECK(text);
		starfa_coo *chunked = NULL, *lines = NULL;
		size_t chunk = 64 + testing_below(&state, 2000);
		int rc_chunked = starfa_read_ratings_in_chunks("r.csv", text, size, chunk, &chunked);
		char message[1024];
		snprintf(message, sizeof message, "%s", starfa_last_error());
		int rc_lines = starfa_read_ratings_in_chunks("r.csv", text, size, SIZE_MAX, &lines);
		CHECK_MSG(rc_chunked == rc_lines, "trial %d: %d in chunks, %d line by line (%s)", trial, rc_chunked,
			  rc_lines, starfa_last_error());
		if (bad) {
			CHECK(rc_lines == STARFA_EFORMAT && chunked == NULL);
			CHECK_MSG(strcmp(message, starfa_last_error()) == 0, "'%s' against '%s'", message, starfa_last_error());
		} else {
			CHECK_OK(rc_lines);
			CHECK(chunked->nnz == lines->nnz && chunked->nrows == lines->nrows && chunked->ncols == lines->ncols);
			CHECK(memcmp(chunked->row, lines->row, sizeof *lines->row * (size_t)lines->nnz) == 0);
			CHECK(memcmp(chunked->col, lines->col, sizeof *lines->col * (size_t)lines->nnz) == 0);
			CHECK(memcmp(chunked->val, lines->val, sizeof *lines->val * (size_t)lines->nnz) == 0);
			if (same_ids(chunked->row_ids, lines->row_ids) || same_ids(chunked->col_ids, lines->col_ids))
				return 1;
		}
		starfa_coo_free(chunked);
		starfa_coo_free(lines);
		free(text);
	}
	return 0;
}
