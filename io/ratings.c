/* The ratings reader: "user item rating [timestamp]" lines with arbitrary user and item ids. */
#include "storage/idmap.h"
#include "io/reader.h"

#include <string.h>

#define USAGE "expected 'user item rating [timestamp]'"

/* Fields are split by the separator the first data line uses. */
enum separator { SEPARATOR_TAB, SEPARATOR_COLONS, SEPARATOR_COMMA, SEPARATOR_BLANKS };

/* The id of the previous line, as sorted files repeat a user over many lines. */
struct last_id {
	struct text_span name;
	int32_t index;
};

struct ratings_reader {
	struct text_cursor cursor;
	enum separator separator;
	starfa_coo *coo;
	struct last_id last_user, last_item;
};

static enum separator detect_separator(struct text_span line)
{
	size_t len = (size_t)(line.end - line.start);
	if (memchr(line.start, '\t', len))
		return SEPARATOR_TAB;
	for (const char *p = line.start; p + 1 < line.end; p++)
		if (p[0] == ':' && p[1] == ':')
			return SEPARATOR_COLONS;
	return memchr(line.start, ',', len) ? SEPARATOR_COMMA : SEPARATOR_BLANKS;
}

static struct text_span trim(struct text_span s)
{
	while (s.start < s.end && (*s.start == ' ' || *s.start == '\t'))
		s.start++;
	while (s.end > s.start && (s.end[-1] == ' ' || s.end[-1] == '\t'))
		s.end--;
	return s;
}

/* Where the next separator starts (line->end when none) and how long it is. */
static const char *find_separator(enum separator separator, struct text_span line, size_t *len)
{
	char ch = separator == SEPARATOR_TAB ? '\t' : separator == SEPARATOR_COMMA ? ',' : ':';
	*len = separator == SEPARATOR_COLONS ? 2 : 1;
	for (const char *p = line.start; p < line.end; p++)
		if (*p == ch && (*len == 1 || (p + 1 < line.end && p[1] == ':')))
			return p;
	return line.end;
}

/* Splits up to max fields (one more than a valid line has, to notice extra ones). */
static int split_fields(enum separator separator, struct text_span line, struct text_span *fields, int max)
{
	int n = 0;
	if (separator == SEPARATOR_BLANKS) {
		while (n < max && next_token(&line, &fields[n]))
			n++;
		return n;
	}
	for (; n < max; n++) {
		size_t len;
		const char *stop = find_separator(separator, line, &len);
		fields[n] = trim((struct text_span){line.start, stop});
		if (stop == line.end)
			return n + 1;
		line.start = stop + len;
	}
	return n;
}

static int intern_id(struct ratings_reader *r, starfa_idmap *map, struct last_id *last, struct text_span id,
		     const char *what, int32_t *out)
{
	size_t len = (size_t)(id.end - id.start);
	if (len == 0)
		return format_error(&r->cursor, "empty %s id", what);
	if (last->name.start && len == (size_t)(last->name.end - last->name.start) &&
	    memcmp(id.start, last->name.start, len) == 0) {
		*out = last->index;
		return 0;
	}
	int64_t index;
	int rc = idmap_intern(map, id.start, len, &index);
	if (rc)
		return rc;
	if (index >= INT32_MAX)
		return format_error(&r->cursor, "more than %d distinct %s ids", INT32_MAX - 1, what);
	*last = (struct last_id){id, (int32_t)index};
	*out = last->index;
	return 0;
}

/* One data line; the first may be a header, recognised by a rating that is no number. */
static int read_rating_line(struct ratings_reader *r, struct text_span line, int first)
{
	struct text_span fields[5];
	int n = split_fields(r->separator, line, fields, 5);
	if (n < 3)
		return format_error(&r->cursor, USAGE ", found %d field%s", n, n == 1 ? "" : "s");
	if (n > 4)
		return format_error(&r->cursor, USAGE ", found more than 4 fields");
	float rating;
	if (first && parse_float(fields[2], &rating) == NUMBER_SYNTAX)
		return 0;
	int32_t user, item;
	int rc = read_real(&r->cursor, fields[2], "rating", &rating);
	if (!rc)
		rc = intern_id(r, r->coo->row_ids, &r->last_user, fields[0], "user", &user);
	if (!rc)
		rc = intern_id(r, r->coo->col_ids, &r->last_item, fields[1], "item", &item);
	return rc ? rc : coo_push(r->coo, user, item, rating);
}

static int read_lines(struct ratings_reader *r)
{
	struct text_span line;
	int rc, first = 1;
	while ((rc = cursor_next_line(&r->cursor, &line)) == 1) {
		if (is_skipped_line(line, '#'))
			continue;
		if (first)
			r->separator = detect_separator(line);
		if ((rc = read_rating_line(r, line, first)))
			return rc;
		first = 0;
	}
	if (rc < 0)
		return rc;
	if (r->coo->nnz == 0)
		return format_error(&r->cursor, "no ratings");
	return 0;
}

/* At most one rating per line, and a rating line takes at least 6 bytes ("a b 1\n"). */
static int64_t capacity_for(const char *data, size_t size)
{
	int64_t lines = 1;
	for (const char *p = data, *end = data + size; (p = memchr(p, '\n', (size_t)(end - p))); p++)
		lines++;
	int64_t most = (int64_t)(size / 6) + 1;
	return lines < most ? lines : most;
}

int read_ratings(const char *name, const char *data, size_t size, starfa_coo **out)
{
	starfa_coo *coo = starfa_coo_new(0, 0, capacity_for(data, size));
	if (!coo)
		return STARFA_ENOMEM;
	struct ratings_reader r = {.coo = coo};
	cursor_init(&r.cursor, name, data, size);
	coo->row_ids = idmap_new();
	coo->col_ids = idmap_new();
	int rc = coo->row_ids && coo->col_ids ? read_lines(&r) : STARFA_ENOMEM;
	if (rc) {
		starfa_coo_free(coo);
		return rc;
	}
	coo->nrows = starfa_idmap_count(coo->row_ids);
	coo->ncols = starfa_idmap_count(coo->col_ids);
	*out = coo;
	return 0;
}
