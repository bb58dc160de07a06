/* The UCI bag-of-words reader: D, W and NNZ on three lines, then "docID wordID count" lines. */
#include "io/reader.h"

static int read_header_number(struct text_cursor *c, int64_t max, const char *what, int64_t *out)
{
	char q[QUOTE_SIZE];
	struct text_span line, token, extra;
	int rc;
	while ((rc = cursor_next_line(c, &line)) == 1 && is_skipped_line(line, '\0'))
		continue;
	if (rc < 0)
		return rc;
	if (rc == 0)
		return format_error(c, "missing the %s (the header is D, W and NNZ on three lines)", what);
	next_token(&line, &token);
	if (next_token(&line, &extra))
		return format_error(c, "unexpected %s after the %s", quote(extra, q), what);
	return read_count(c, token, max, what, out);
}

static int read_docword_entry(const struct text_cursor *c, struct text_span line, void *ctx)
{
	starfa_coo *coo = ctx;
	char q[QUOTE_SIZE];
	struct text_span doc_token, word_token, count_token, extra;
	int32_t doc, word;
	float count;
	int rc;
	next_token(&line, &doc_token);
	if (!next_token(&line, &word_token) || !next_token(&line, &count_token))
		return format_error(c, "incomplete entry: expected 'docID wordID count'");
	if (next_token(&line, &extra))
		return format_error(c, "unexpected %s at the end of the entry", quote(extra, q));
	if ((rc = read_index(c, doc_token, coo->nrows, "document", &doc)) ||
	    (rc = read_index(c, word_token, coo->ncols, "word", &word)) ||
	    (rc = read_real(c, count_token, "count", &count)))
		return rc;
	if (!(count > 0))
		return format_error(c, "count %s is not positive", quote(count_token, q));
	return coo_push(coo, doc, word, count);
}

int read_docword(const char *name, const char *data, size_t size, starfa_coo **out)
{
	struct text_cursor c;
	int64_t ndocs, nwords, nnz;
	cursor_init(&c, name, data, size);
	int rc = read_header_number(&c, INT32_MAX, "number of documents", &ndocs);
	if (!rc)
		rc = read_header_number(&c, INT32_MAX, "number of words", &nwords);
	if (!rc)
		rc = read_header_number(&c, INT64_MAX, "number of entries", &nnz);
	if (!rc && nnz > ndocs * nwords)
		rc = format_error(&c, "%lld entries declared, more than %lld documents x %lld words hold",
				  (long long)nnz, (long long)ndocs, (long long)nwords);
	if (!rc)
		rc = check_room(&c, nnz, 3);
	if (rc)
		return rc;
	starfa_coo *coo = starfa_coo_new(ndocs, nwords, nnz);
	if (!coo)
		return STARFA_ENOMEM;
	rc = read_entries(&c, nnz, '\0', read_docword_entry, coo);
	if (rc) {
		starfa_coo_free(coo);
		return rc;
	}
	*out = coo;
	return 0;
}
