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

/* One line after line after line: the reference, the messages of a bad file, and small files. */
static int read_ratings_sequential(const char *name, const char *data, size_t size, starfa_coo **out)
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

/* ------------------------------------------------------------------ in chunks on every core */

/* The lines after the first data line, cut at line ends into chunks that read on their own
 * (starfa_host_parallel), each into its own run of the output's arrays (as long as its lines: a rating
 * takes a line). Each chunk numbers its users and items as they first appear in it; the chunks' ids are
 * then numbered in chunk order, which is the order in which they first appear in the file, each chunk's
 * entries renumbered in place, and the runs moved together, so the entries keep the file's order. A
 * chunk that meets anything wrong gives up, and the whole file is read again line after line, for the
 * message and its line number. */
struct ratings_chunk {
	const char *start, *end;
	struct coo_block view;        /* its run of the output's arrays, with ids of its own */
	int32_t *user_map, *item_map; /* its ids' numbers in the file */
	int failed;
};

struct ratings_chunks {
	const char *name;
	enum separator separator;
	struct ratings_chunk *chunks; /* chunk 0 is the first data line */
};

/* Reads one chunk's lines into its run; on return, failed tells whether it gave up. */
static void read_chunk_lines(const struct ratings_chunks *all, struct ratings_chunk *c, int first)
{
	c->failed = 1;
	struct ratings_reader r = {.separator = all->separator, .coo = &c->view.coo};
	if (!(r.coo->row_ids = idmap_new()) || !(r.coo->col_ids = idmap_new()))
		return;
	cursor_init(&r.cursor, all->name, c->start, (size_t)(c->end - c->start));
	r.cursor.pos = c->start; /* bytes that look like a byte order mark inside the file are data */
	struct text_span line;
	int rc;
	while ((rc = cursor_next_line(&r.cursor, &line)) == 1) {
		if (is_skipped_line(line, '#'))
			continue;
		/* The run holds a rating a line and one more: a full run means a line gave more than one. */
		if (read_rating_line(&r, line, first) != 0 || r.coo->nnz >= c->view.capacity)
			return;
		first = 0;
	}
	c->failed = rc != 0;
}

static void read_chunk(void *ctx, int64_t k, int64_t begin, int64_t end)
{
	(void)begin, (void)end;
	const struct ratings_chunks *all = ctx;
	read_chunk_lines(all, &all->chunks[k + 1], 0);
}

static void renumber_chunk(void *ctx, int64_t k, int64_t begin, int64_t end)
{
	(void)begin, (void)end;
	const struct ratings_chunks *all = ctx;
	struct ratings_chunk *c = &all->chunks[k];
	for (int64_t e = 0; e < c->view.coo.nnz; e++) {
		c->view.coo.row[e] = c->user_map[c->view.coo.row[e]];
		c->view.coo.col[e] = c->item_map[c->view.coo.col[e]];
	}
}

/* Numbers a chunk's ids in the file's map, in the chunk's order; 0, 1 (more ids than fit: the
 * line-by-line reader names the line) or an error. */
static int number_ids(const starfa_idmap *local, starfa_idmap *file, int32_t **map)
{
	*map = starfa_malloc((size_t)(local->count > 0 ? local->count : 1), sizeof **map);
	if (!*map)
		return STARFA_ENOMEM;
	for (int64_t i = 0; i < local->count; i++) {
		int64_t index;
		const char *id = local->chars + local->starts[i];
		int rc = idmap_intern(file, id, (size_t)(local->starts[i + 1] - local->starts[i] - 1), &index);
		if (rc)
			return rc;
		if (index >= INT32_MAX)
			return 1;
		(*map)[i] = (int32_t)index;
	}
	return 0;
}

/* Chunks of at least min_chunk bytes; 1 when the file should be read line after line (too small, a bad
 * line somewhere: the caller reads it again), 0 with *out, or an error. */
static int read_ratings_chunked(const char *name, const char *data, size_t size, size_t min_chunk, starfa_coo **out)
{
	/* The first data line: it sets the separator and may be a header; the chunks start after it. */
	struct text_cursor cursor;
	cursor_init(&cursor, name, data, size);
	struct text_span line;
	int rc;
	while ((rc = cursor_next_line(&cursor, &line)) == 1 && is_skipped_line(line, '#'))
		;
	if (rc != 1)
		return 1;
	const char *body = cursor.pos, *end = data + size;
	int64_t nchunks = (int64_t)((size_t)(end - body) / (min_chunk > 0 ? min_chunk : 1));
	/* At most 64: each chunk's distinct ids are numbered on one thread (on 89M ratings, 7.4-7.6 s for
	 * the whole of starfa stat on 2 cores against 7.9-8.0 s with 256). */
	if (nchunks > 64)
		nchunks = 64;
	if (nchunks < 2)
		return 1;
	struct ratings_chunks all = {name, detect_separator(line), starfa_calloc((size_t)nchunks + 1, sizeof *all.chunks)};
	starfa_coo *coo = NULL;
	if (!all.chunks)
		return STARFA_ENOMEM;
	/* Chunk 0: the first data line, read as the line-by-line reader reads it (a header gives nothing);
	 * chunks 1..nchunks: the rest, cut at even places moved to the next line's start. */
	all.chunks[0].start = line.start;
	all.chunks[0].end = body;
	const char *from = body;
	for (int64_t k = 1; k <= nchunks; k++) {
		const char *to = end;
		if (k < nchunks) {
			to = body + (size_t)(end - body) * (size_t)k / (size_t)nchunks;
			const char *newline = memchr(to - 1, '\n', (size_t)(end - (to - 1)));
			to = newline ? newline + 1 : end;
			to = to > from ? to : from;
		}
		all.chunks[k].start = from;
		all.chunks[k].end = to;
		from = to;
	}
	int64_t room = 0;
	for (int64_t k = 0; k <= nchunks; k++)
		room += capacity_for(all.chunks[k].start, (size_t)(all.chunks[k].end - all.chunks[k].start)) + 1;
	if (!(coo = starfa_coo_new(0, 0, room)) || !(coo->row_ids = idmap_new()) || !(coo->col_ids = idmap_new())) {
		rc = STARFA_ENOMEM;
		goto out;
	}
	room = 0;
	for (int64_t k = 0; k <= nchunks; k++) {
		struct coo_block *v = &all.chunks[k].view;
		v->capacity = capacity_for(all.chunks[k].start, (size_t)(all.chunks[k].end - all.chunks[k].start)) + 1;
		v->coo.row = coo->row + room;
		v->coo.col = coo->col + room;
		v->coo.val = coo->val + room;
		room += v->capacity;
	}
	read_chunk_lines(&all, &all.chunks[0], 1);
	if ((rc = starfa_host_parallel(nchunks, nchunks, read_chunk, &all)) != 0)
		goto out;
	for (int64_t k = 0; k <= nchunks && !rc; k++) {
		if (all.chunks[k].failed) {
			rc = 1;
			break;
		}
		rc = number_ids(all.chunks[k].view.coo.row_ids, coo->row_ids, &all.chunks[k].user_map);
		if (!rc)
			rc = number_ids(all.chunks[k].view.coo.col_ids, coo->col_ids, &all.chunks[k].item_map);
	}
	if (!rc)
		rc = starfa_host_parallel(nchunks + 1, nchunks + 1, renumber_chunk, &all);
	if (rc)
		goto out;
	/* The runs moved together, in order (each moves down, never past the next one's start). */
	for (int64_t k = 0; k <= nchunks; k++) {
		const starfa_coo *v = &all.chunks[k].view.coo;
		memmove(coo->row + coo->nnz, v->row, (size_t)v->nnz * sizeof *coo->row);
		memmove(coo->col + coo->nnz, v->col, (size_t)v->nnz * sizeof *coo->col);
		memmove(coo->val + coo->nnz, v->val, (size_t)v->nnz * sizeof *coo->val);
		coo->nnz += v->nnz;
	}
	if (coo->nnz == 0) {
		rc = 1; /* "no ratings", with the line-by-line reader's message */
		goto out;
	}
	coo->nrows = starfa_idmap_count(coo->row_ids);
	coo->ncols = starfa_idmap_count(coo->col_ids);
	*out = coo;
	coo = NULL;
out:
	starfa_coo_free(coo);
	for (int64_t k = 0; k <= nchunks; k++) {
		idmap_free(all.chunks[k].view.coo.row_ids);
		idmap_free(all.chunks[k].view.coo.col_ids);
		free(all.chunks[k].user_map);
		free(all.chunks[k].item_map);
	}
	free(all.chunks);
	return rc;
}

/* Chunks are at least this large: a file is read in chunks from two of them after its first data line. */
#define CHUNKED_MIN_BYTES (4 << 20)

int starfa_read_ratings_in_chunks(const char *name, const char *data, size_t size, size_t min_chunk, starfa_coo **out)
{
	*out = NULL;
	int rc = read_ratings_chunked(name, data, size, min_chunk, out);
	return rc == 1 ? read_ratings_sequential(name, data, size, out) : rc;
}

int read_ratings(const char *name, const char *data, size_t size, starfa_coo **out)
{
	return starfa_read_ratings_in_chunks(name, data, size, CHUNKED_MIN_BYTES, out);
}
