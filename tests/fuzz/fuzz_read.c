/* libFuzzer target for the readers: any input must either be rejected with a located
 * message or give a valid matrix, which then goes through the split and CSR conversion.
 * The first byte picks the format (its value modulo 4: '0' auto, '1' mtx, '2' ratings,
 * '3' docword); the rest is the file. Every input is also read as ratings in chunks of a few bytes
 * (the first byte sets their size) and compared with the line-by-line reader. */
#include "starfa.h"
#include "io/reader.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(cond)                                                                                        \
	do {                                                                                                 \
		if (!(cond)) {                                                                               \
			fprintf(stderr, "invariant failed: %s (%s)\n", #cond, starfa_last_error());          \
			abort();                                                                             \
		}                                                                                            \
	} while (0)

/* CSR conversion allocates per row and column: keep it to shapes a test can afford. */
#define MAX_CONVERTED_DIMENSION (1 << 20)

static void check_ids(const starfa_idmap *ids, int64_t n)
{
	if (!ids)
		return;
	REQUIRE(starfa_idmap_count(ids) == n);
	for (int64_t i = 0; i < n; i++) {
		const char *name = starfa_idmap_name(ids, i);
		REQUIRE(name && name[0] && starfa_idmap_find(ids, name) == i);
	}
}

static void check_coo(const starfa_coo *coo)
{
	REQUIRE(coo->nrows >= 0 && coo->nrows <= INT32_MAX && coo->ncols >= 0 && coo->ncols <= INT32_MAX);
	REQUIRE(coo->nnz >= 0 && (coo->nnz == 0 || (coo->row && coo->col && coo->val)));
	for (int64_t k = 0; k < coo->nnz; k++) {
		REQUIRE(coo->row[k] >= 0 && coo->row[k] < coo->nrows);
		REQUIRE(coo->col[k] >= 0 && coo->col[k] < coo->ncols);
		REQUIRE(isfinite(coo->val[k]));
	}
	REQUIRE((coo->row_ids == NULL) == (coo->col_ids == NULL));
	check_ids(coo->row_ids, coo->nrows);
	check_ids(coo->col_ids, coo->ncols);
}

static void check_csr(const starfa_csr *csr, int64_t nrows, int64_t ncols, int64_t max_nnz)
{
	REQUIRE(csr->nrows == nrows && csr->ncols == ncols && csr->nnz <= max_nnz);
	REQUIRE(csr->rowptr[0] == 0 && csr->rowptr[nrows] == csr->nnz);
	for (int64_t i = 0; i < nrows; i++)
		for (int64_t k = csr->rowptr[i]; k < csr->rowptr[i + 1]; k++) {
			REQUIRE(csr->colind[k] >= 0 && csr->colind[k] < ncols);
			REQUIRE(k == csr->rowptr[i] || csr->colind[k - 1] < csr->colind[k]);
		}
}

static void check_split(const starfa_coo *coo, uint64_t seed)
{
	starfa_coo *train, *test;
	REQUIRE(starfa_coo_split(coo, 0.25, seed, &train, &test) == 0);
	REQUIRE(train->nnz + test->nnz == coo->nnz);
	REQUIRE(starfa_idmap_count(train->row_ids) == starfa_idmap_count(coo->row_ids));
	starfa_coo_free(train);
	starfa_coo_free(test);
}

static void check_conversion(const starfa_coo *coo)
{
	if (coo->nrows > MAX_CONVERTED_DIMENSION || coo->ncols > MAX_CONVERTED_DIMENSION)
		return;
	starfa_csr *csr, *t;
	REQUIRE(starfa_csr_from_coo(coo, &csr) == 0);
	check_csr(csr, coo->nrows, coo->ncols, coo->nnz);
	REQUIRE(starfa_csr_transpose(csr, &t) == 0);
	check_csr(t, coo->ncols, coo->nrows, csr->nnz);
	starfa_csr_free(t);
	starfa_csr_free(csr);
}

/* The ratings reader in chunks of a few bytes against line after line: the same result, entries, ids
 * and message. */
static void check_chunks(const char *text, size_t size, size_t min_chunk)
{
	starfa_coo *chunked = NULL, *lines = NULL;
	int rc = starfa_read_ratings_in_chunks("fuzz", text, size, min_chunk, &chunked);
	char message[1024];
	snprintf(message, sizeof message, "%s", starfa_last_error());
	REQUIRE(starfa_read_ratings_in_chunks("fuzz", text, size, SIZE_MAX, &lines) == rc);
	if (rc != 0) {
		REQUIRE(chunked == NULL && lines == NULL && strcmp(message, starfa_last_error()) == 0);
		return;
	}
	REQUIRE(chunked->nnz == lines->nnz && chunked->nrows == lines->nrows && chunked->ncols == lines->ncols);
	for (int64_t e = 0; e < lines->nnz; e++)
		REQUIRE(chunked->row[e] == lines->row[e] && chunked->col[e] == lines->col[e] &&
			memcmp(&chunked->val[e], &lines->val[e], sizeof(float)) == 0);
	for (int64_t i = 0; i < lines->nrows; i++)
		REQUIRE(strcmp(starfa_idmap_name(chunked->row_ids, i), starfa_idmap_name(lines->row_ids, i)) == 0);
	for (int64_t i = 0; i < lines->ncols; i++)
		REQUIRE(strcmp(starfa_idmap_name(chunked->col_ids, i), starfa_idmap_name(lines->col_ids, i)) == 0);
	starfa_coo_free(chunked);
	starfa_coo_free(lines);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	check_chunks((const char *)data + 1, size - 1, 1 + data[0] / 4 % 32);
	starfa_format format = (starfa_format)(data[0] % 4);
	starfa_coo *coo = NULL;
	int rc = starfa_read_buffer("fuzz", (const char *)data + 1, size - 1, format, &coo);
	if (rc != 0) {
		long long line;
		char colon;
		REQUIRE(rc == STARFA_EFORMAT && coo == NULL);
		REQUIRE(sscanf(starfa_last_error(), "fuzz:%lld%c", &line, &colon) == 2 && colon == ':' &&
			line >= 1);
		return 0;
	}
	check_coo(coo);
	check_split(coo, size);
	check_conversion(coo);
	starfa_coo_free(coo);
	return 0;
}
