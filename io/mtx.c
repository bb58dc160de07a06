/* The Matrix Market coordinate reader (real, integer, pattern; general, symmetric, skew-symmetric). */
#include "io/reader.h"

enum mtx_field { FIELD_REAL, FIELD_INTEGER, FIELD_PATTERN };
enum mtx_symmetry { SYMMETRY_GENERAL, SYMMETRY_SYMMETRIC, SYMMETRY_SKEW };

struct mtx_header {
	enum mtx_field field;
	enum mtx_symmetry symmetry;
	int64_t nrows, ncols, nnz;
};

struct mtx_reader {
	const struct mtx_header *header;
	starfa_coo *coo;
};

/* The index of token among words (any case), or -1. */
static int lookup(struct text_span token, const char *const *words, int nwords)
{
	for (int i = 0; i < nwords; i++)
		if (span_equals_nocase(token, words[i]))
			return i;
	return -1;
}

static int read_banner_word(const struct text_cursor *c, struct text_span *line, const char *what,
			    const char *const *words, int nwords, const char *unsupported, int *out)
{
	char q[QUOTE_SIZE];
	struct text_span token;
	if (!next_token(line, &token))
		return format_error(c, "incomplete banner: expected '%%%%MatrixMarket matrix coordinate "
				       "real|integer|pattern general|symmetric|skew-symmetric'");
	*out = lookup(token, words, nwords);
	if (*out >= 0)
		return 0;
	if (span_equals_nocase(token, unsupported))
		return format_error(c, "%s %s is unsupported", what, quote(token, q));
	return format_error(c, "unknown %s %s in the banner", what, quote(token, q));
}

static int read_banner(struct text_cursor *c, struct mtx_header *h)
{
	static const char *const objects[] = {"matrix"};
	static const char *const formats[] = {"coordinate"};
	static const char *const fields[] = {"real", "integer", "pattern", "double"};
	static const char *const symmetries[] = {"general", "symmetric", "skew-symmetric"};
	char q[QUOTE_SIZE];
	struct text_span line, token;
	int rc = cursor_next_line(c, &line), object, format, field, symmetry;
	if (rc < 0)
		return rc;
	if (rc == 0 || !next_token(&line, &token) || !span_equals_nocase(token, "%%MatrixMarket"))
		return format_error(c, "missing '%%%%MatrixMarket' banner");
	if ((rc = read_banner_word(c, &line, "object", objects, 1, "vector", &object)) ||
	    (rc = read_banner_word(c, &line, "format", formats, 1, "array", &format)) ||
	    (rc = read_banner_word(c, &line, "field", fields, 4, "complex", &field)) ||
	    (rc = read_banner_word(c, &line, "symmetry", symmetries, 3, "hermitian", &symmetry)))
		return rc;
	if (next_token(&line, &token))
		return format_error(c, "unexpected %s at the end of the banner", quote(token, q));
	h->field = field == 3 ? FIELD_REAL : (enum mtx_field)field;
	h->symmetry = (enum mtx_symmetry)symmetry;
	if (h->field == FIELD_PATTERN && h->symmetry == SYMMETRY_SKEW)
		return format_error(c, "a pattern matrix cannot be skew-symmetric");
	return 0;
}

/* The most entries the declared shape can hold (stored triangle only when symmetric). */
static int64_t max_entries(const struct mtx_header *h)
{
	switch (h->symmetry) {
	case SYMMETRY_SYMMETRIC:
		return h->nrows * (h->nrows + 1) / 2;
	case SYMMETRY_SKEW:
		return h->nrows * (h->nrows - 1) / 2;
	default:
		return h->nrows * h->ncols;
	}
}

static int check_sizes(const struct text_cursor *c, const struct mtx_header *h)
{
	if (h->symmetry != SYMMETRY_GENERAL && h->nrows != h->ncols)
		return format_error(c, "a %s matrix must be square, not %lld x %lld",
				    h->symmetry == SYMMETRY_SKEW ? "skew-symmetric" : "symmetric",
				    (long long)h->nrows, (long long)h->ncols);
	static const char *const stored[] = {"", "the lower triangle of ", "the strict lower triangle of "};
	if (h->nnz > max_entries(h))
		return format_error(c, "%lld entries declared, more than %sa %lld x %lld matrix holds",
				    (long long)h->nnz, stored[h->symmetry], (long long)h->nrows,
				    (long long)h->ncols);
	return check_room(c, h->nnz, h->field == FIELD_PATTERN ? 2 : 3);
}

static int read_size_line(struct text_cursor *c, struct mtx_header *h)
{
	char q[QUOTE_SIZE];
	struct text_span line, token[3], extra;
	int rc;
	while ((rc = cursor_next_line(c, &line)) == 1 && is_skipped_line(line, '%'))
		continue;
	if (rc < 0)
		return rc;
	if (rc == 0)
		return format_error(c, "missing the size line 'rows columns entries'");
	for (int i = 0; i < 3; i++)
		if (!next_token(&line, &token[i]))
			return format_error(c, "incomplete size line: expected 'rows columns entries'");
	if (next_token(&line, &extra))
		return format_error(c, "unexpected %s at the end of the size line", quote(extra, q));
	if ((rc = read_count(c, token[0], INT32_MAX, "row count", &h->nrows)) ||
	    (rc = read_count(c, token[1], INT32_MAX, "column count", &h->ncols)) ||
	    (rc = read_count(c, token[2], INT64_MAX, "entry count", &h->nnz)))
		return rc;
	return check_sizes(c, h);
}

static int read_value(const struct text_cursor *c, enum mtx_field field, struct text_span token, float *out)
{
	char q[QUOTE_SIZE];
	int64_t value;
	if (field == FIELD_REAL)
		return read_real(c, token, "value", out);
	switch (parse_int64(token, &value)) {
	case NUMBER_OK:
		*out = (float)value;
		return 0;
	case NUMBER_RANGE:
		return format_error(c, "value %s is out of range", quote(token, q));
	default:
		return format_error(c, "value %s is not an integer", quote(token, q));
	}
}

static int read_mtx_entry(const struct text_cursor *c, struct text_span line, void *ctx)
{
	const struct mtx_reader *r = ctx;
	const struct mtx_header *h = r->header;
	char q[QUOTE_SIZE];
	struct text_span row_token, col_token, value_token, extra;
	int32_t row, col;
	float value = 1;
	int rc;
	next_token(&line, &row_token);
	if (!next_token(&line, &col_token))
		return format_error(c, "missing the column index");
	if ((rc = read_index(c, row_token, h->nrows, "row index", &row)) ||
	    (rc = read_index(c, col_token, h->ncols, "column index", &col)))
		return rc;
	if (h->field != FIELD_PATTERN) {
		if (!next_token(&line, &value_token))
			return format_error(c, "missing the value");
		if ((rc = read_value(c, h->field, value_token, &value)))
			return rc;
	}
	if (next_token(&line, &extra))
		return format_error(c, "unexpected %s at the end of the entry", quote(extra, q));
	if (h->symmetry == SYMMETRY_SKEW && row == col)
		return format_error(c, "diagonal entry (%d, %d) in a skew-symmetric matrix", row + 1,
				    col + 1);
	if ((rc = coo_push(r->coo, row, col, value)))
		return rc;
	/* Symmetric files store one triangle: the mirror entry is implied. */
	if (h->symmetry != SYMMETRY_GENERAL && row != col)
		rc = coo_push(r->coo, col, row, h->symmetry == SYMMETRY_SKEW ? -value : value);
	return rc;
}

int read_mtx(const char *name, const char *data, size_t size, starfa_coo **out)
{
	struct text_cursor c;
	struct mtx_header h;
	cursor_init(&c, name, data, size);
	int rc = read_banner(&c, &h);
	if (!rc)
		rc = read_size_line(&c, &h);
	if (rc)
		return rc;
	int64_t capacity = h.symmetry == SYMMETRY_GENERAL ? h.nnz : 2 * h.nnz;
	starfa_coo *coo = starfa_coo_new(h.nrows, h.ncols, capacity);
	if (!coo)
		return STARFA_ENOMEM;
	struct mtx_reader reader = {&h, coo};
	rc = read_entries(&c, h.nnz, '%', read_mtx_entry, &reader);
	if (rc) {
		starfa_coo_free(coo);
		return rc;
	}
	*out = coo;
	return 0;
}
