/* Reading sparse matrices: formats, whole-file input, and the text scanning the parsers share. */
#define _POSIX_C_SOURCE 200809L

#include "io/reader.h"
#include "storage/idmap.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------ formats */

static const char *const format_names[] = {"auto", "mtx", "ratings", "docword"};
#define NFORMATS (int)(sizeof format_names / sizeof *format_names)

static int lower(int ch)
{
	return ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch;
}

static int equals_nocase(const char *s, size_t len, const char *word)
{
	for (size_t i = 0; i < len; i++)
		if (word[i] == '\0' || lower((unsigned char)s[i]) != lower((unsigned char)word[i]))
			return 0;
	return word[len] == '\0';
}

static int starts_with_nocase(const char *s, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);
	return len >= n && equals_nocase(s, n, prefix);
}

static int contains_nocase(const char *s, const char *word)
{
	for (size_t len = strlen(s), n = strlen(word), i = 0; i + n <= len; i++)
		if (equals_nocase(s + i, n, word))
			return 1;
	return 0;
}

int starfa_format_parse(const char *name, starfa_format *out)
{
	for (int f = STARFA_FORMAT_MTX; name && f < NFORMATS; f++)
		if (equals_nocase(name, strlen(name), format_names[f])) {
			*out = (starfa_format)f;
			return 0;
		}
	return starfa_set_error(STARFA_EINVAL, "unknown format '%s' (expected mtx, ratings or docword)",
				name ? name : "(null)");
}

const char *starfa_format_name(starfa_format format)
{
	return (int)format >= 0 && (int)format < NFORMATS ? format_names[format] : "unknown";
}

static starfa_format guess_from_name(const char *path)
{
	if (!path)
		return STARFA_FORMAT_RATINGS;
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	size_t len = strlen(base);
	if (len >= 4 && equals_nocase(base + len - 4, 4, ".mtx"))
		return STARFA_FORMAT_MTX;
	if (contains_nocase(base, "docword"))
		return STARFA_FORMAT_DOCWORD;
	return STARFA_FORMAT_RATINGS;
}

/* The content overrides the name when it is unmistakable: a Matrix Market banner, or
 * a first line holding a single integer (a docword header; ratings lines have 3 fields). */
static starfa_format guess_from_content(const char *data, size_t size, starfa_format from_name)
{
	struct text_cursor c;
	cursor_init(&c, "", data, size);
	const char *newline = memchr(c.pos, '\n', (size_t)(c.end - c.pos));
	struct text_span line = {c.pos, newline ? newline : c.end}, token;
	if (line.end > line.start && line.end[-1] == '\r')
		line.end--;
	int64_t count;
	if (starts_with_nocase(line.start, (size_t)(line.end - line.start), "%%MatrixMarket"))
		return STARFA_FORMAT_MTX;
	if (from_name == STARFA_FORMAT_RATINGS && next_token(&line, &token) &&
	    parse_int64(token, &count) == NUMBER_OK && !next_token(&line, &token))
		return STARFA_FORMAT_DOCWORD;
	return from_name;
}

starfa_format starfa_format_guess(const char *path)
{
	starfa_format format = guess_from_name(path);
	FILE *f = path ? fopen(path, "rb") : NULL;
	if (f) {
		/* Enough for any first line the content guess recognises. */
		char head[256];
		size_t n = fread(head, 1, sizeof head, f);
		fclose(f);
		format = guess_from_content(head, n, format);
	}
	return format;
}

/* ------------------------------------------------------------------ reading */

/* Reads to the end into a buffer of `capacity` bytes, doubled whenever it fills up. */
static int read_stream(FILE *f, const char *path, size_t capacity, char **data, size_t *size)
{
	char *buf = starfa_malloc(capacity, 1);
	size_t used = 0;
	while (buf && (used += fread(buf + used, 1, capacity - used, f)) == capacity) {
		char *grown = capacity <= SIZE_MAX / 2 ? realloc(buf, capacity * 2) : NULL;
		if (!grown) {
			free(buf);
			return starfa_set_error(STARFA_ENOMEM, "out of memory reading %s", path);
		}
		buf = grown;
		capacity *= 2;
	}
	if (!buf)
		return STARFA_ENOMEM;
	if (ferror(f)) {
		int rc = starfa_set_error(STARFA_EIO, "cannot read %s: %s", path, strerror(errno));
		free(buf);
		return rc;
	}
	*data = buf;
	*size = used;
	return 0;
}

static int read_file(const char *path, char **data, size_t *size)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return starfa_set_error(STARFA_EIO, "cannot open %s: %s", path, strerror(errno));
	if (S_ISDIR(st.st_mode))
		return starfa_set_error(STARFA_EIO, "cannot read %s: %s", path, strerror(EISDIR));
	FILE *f = fopen(path, "rb");
	if (!f)
		return starfa_set_error(STARFA_EIO, "cannot open %s: %s", path, strerror(errno));
	/* One byte more than a regular file's size sees the end without growing; pipes and
	 * devices report no useful size: start small and grow. */
	size_t capacity = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 1 << 16;
	int rc = read_stream(f, path, capacity, data, size);
	fclose(f);
	return rc;
}

int starfa_read(const char *path, starfa_format format, starfa_coo **out)
{
	if (!out || !path)
		return starfa_set_error(STARFA_EINVAL, "starfa_read: NULL %s", out ? "path" : "output");
	*out = NULL;
	char *data = NULL;
	size_t size = 0;
	int rc = read_file(path, &data, &size);
	if (rc)
		return rc;
	rc = starfa_read_buffer(path, data, size, format, out);
	free(data);
	return rc;
}

int starfa_read_buffer(const char *name, const char *data, size_t size, starfa_format format,
		       starfa_coo **out)
{
	if (!out || (!data && size))
		return starfa_set_error(STARFA_EINVAL, "starfa_read_buffer: NULL %s",
					out ? "data" : "output");
	*out = NULL;
	if (!name)
		name = "(buffer)";
	if (!data)
		data = "";
	if (format == STARFA_FORMAT_AUTO)
		format = guess_from_content(data, size, guess_from_name(name));
	switch (format) {
	case STARFA_FORMAT_MTX:
		return read_mtx(name, data, size, out);
	case STARFA_FORMAT_RATINGS:
		return read_ratings(name, data, size, out);
	case STARFA_FORMAT_DOCWORD:
		return read_docword(name, data, size, out);
	default:
		return starfa_set_error(STARFA_EINVAL, "starfa_read_buffer: unknown format %d", (int)format);
	}
}

/* ------------------------------------------------------------------ vocabularies */

int starfa_read_vocab(const char *path, starfa_coo *coo)
{
	if (!path || !coo)
		return starfa_set_error(STARFA_EINVAL, "starfa_read_vocab: NULL %s", coo ? "path" : "matrix");
	char *data = NULL;
	size_t size = 0;
	int rc = read_file(path, &data, &size);
	if (rc)
		return rc;
	starfa_idmap *map = idmap_new();
	struct text_cursor c;
	struct text_span line;
	cursor_init(&c, path, data, size);
	rc = map ? 0 : STARFA_ENOMEM;
	while (!rc && (rc = cursor_next_line(&c, &line)) == 1) {
		rc = 0;
		const char *p = line.start, *e = line.end;
		while (p < e && (*p == ' ' || *p == '\t'))
			p++;
		while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		char q[QUOTE_SIZE];
		struct text_span word = {p, e};
		if (p == e) {
			const char *rest = c.pos;
			while (rest < c.end && (*rest == ' ' || *rest == '\t' || *rest == '\r' || *rest == '\n'))
				rest++;
			if (rest == c.end)
				break; /* blank lines at the end */
			rc = format_error(&c, "an empty line: a vocabulary has one word per line, line k naming column k");
			break;
		}
		if (map->count == coo->ncols) {
			rc = format_error(&c, "word %s is one more than the %lld columns of the matrix: the vocabulary is "
					      "too long for it", quote(word, q), (long long)coo->ncols);
			break;
		}
		int64_t before = map->count, index;
		if ((rc = idmap_intern(map, p, (size_t)(e - p), &index)) != 0)
			break;
		if (map->count == before) {
			rc = format_error(&c, "word %s already named column %lld (line %lld)", quote(word, q),
					  (long long)index + 1, (long long)index + 1);
			break;
		}
	}
	if (!rc && map->count != coo->ncols)
		rc = starfa_set_error(STARFA_EFORMAT, "%s:%lld: the vocabulary ends after %lld words, but the matrix has "
						      "%lld columns", path, (long long)c.line + 1, (long long)map->count,
				      (long long)coo->ncols);
	free(data);
	if (rc) {
		idmap_free(map);
		return rc;
	}
	idmap_free(coo->col_ids);
	coo->col_ids = map;
	return 0;
}

/* ------------------------------------------------------------------ lines */

void cursor_init(struct text_cursor *c, const char *name, const char *data, size_t size)
{
	c->name = name;
	c->pos = data;
	c->end = data + size;
	c->line = 0;
	if (size >= 3 && memcmp(data, "\xef\xbb\xbf", 3) == 0)
		c->pos += 3;
}

int format_error(const struct text_cursor *c, const char *fmt, ...)
{
	char what[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	return starfa_set_error(STARFA_EFORMAT, "%s:%lld: %s", c->name, (long long)(c->line ? c->line : 1),
				what);
}

static int is_control(unsigned char ch)
{
	return (ch < 0x20 && ch != '\t') || ch == 0x7f;
}

/* Text is anything but control bytes (tabs aside): they mean binary data. */
static int check_text(const struct text_cursor *c, struct text_span line)
{
	int control = 0;
	/* Branch-free so the compiler can vectorize the common all-text case. */
	for (const char *p = line.start; p < line.end; p++)
		control |= is_control((unsigned char)*p);
	if (!control)
		return 1;
	const char *p = line.start;
	while (!is_control((unsigned char)*p))
		p++;
	return format_error(c, "unexpected byte 0x%02x at column %lld (binary data?)", (unsigned char)*p,
			    (long long)(p - line.start + 1));
}

int cursor_next_line(struct text_cursor *c, struct text_span *line)
{
	if (c->pos == c->end)
		return 0;
	const char *newline = memchr(c->pos, '\n', (size_t)(c->end - c->pos));
	line->start = c->pos;
	line->end = newline ? newline : c->end;
	c->pos = newline ? newline + 1 : c->end;
	c->line++;
	if (line->end > line->start && line->end[-1] == '\r')
		line->end--;
	return check_text(c, *line);
}

/* ------------------------------------------------------------------ tokens */

static int is_blank(char ch)
{
	return ch == ' ' || ch == '\t';
}

int next_token(struct text_span *line, struct text_span *token)
{
	const char *p = line->start;
	while (p < line->end && is_blank(*p))
		p++;
	token->start = p;
	while (p < line->end && !is_blank(*p))
		p++;
	token->end = p;
	line->start = p;
	return token->end > token->start;
}

int span_equals_nocase(struct text_span s, const char *word)
{
	return equals_nocase(s.start, (size_t)(s.end - s.start), word);
}

const char *quote(struct text_span s, char buf[QUOTE_SIZE])
{
	int len = (int)(s.end - s.start);
	snprintf(buf, QUOTE_SIZE, "'%.*s%s'", len > 40 ? 40 : len, s.start, len > 40 ? "..." : "");
	return buf;
}

/* ------------------------------------------------------------------ numbers */

static int digit_value(char ch)
{
	return ch >= '0' && ch <= '9' ? ch - '0' : -1;
}

static int take_sign(struct text_span *s)
{
	if (s->start < s->end && (*s->start == '+' || *s->start == '-'))
		return *s->start++ == '-';
	return 0;
}

enum number_status parse_int64(struct text_span s, int64_t *out)
{
	int negative = take_sign(&s);
	uint64_t value = 0;
	int overflow = 0;
	if (s.start == s.end)
		return NUMBER_SYNTAX;
	for (const char *p = s.start; p < s.end; p++) {
		int d = digit_value(*p);
		if (d < 0)
			return NUMBER_SYNTAX;
		if (value > (UINT64_MAX - (uint64_t)d) / 10)
			overflow = 1;
		else
			value = value * 10 + (uint64_t)d;
	}
	if (overflow || value > (uint64_t)INT64_MAX + (uint64_t)negative)
		return NUMBER_RANGE;
	*out = negative ? -(int64_t)(value - 1) - 1 : (int64_t)value;
	return NUMBER_OK;
}

/* The first 19 significant digits (they fit 64 bits) and a power of ten. */
struct decimal {
	uint64_t mantissa;
	int significant;
	int64_t exponent;
};

static void add_digit(struct decimal *d, int digit, int in_fraction)
{
	if (d->significant < 19) {
		d->mantissa = d->mantissa * 10 + (uint64_t)digit;
		d->significant += d->mantissa != 0;
		d->exponent -= in_fraction;
	} else {
		d->exponent += !in_fraction;
	}
}

/* Digits of the mantissa from p; returns whether there was any. */
static int scan_digits(const char **p, const char *end, struct decimal *d, int in_fraction)
{
	const char *start = *p;
	for (; *p < end && digit_value(**p) >= 0; (*p)++)
		add_digit(d, digit_value(**p), in_fraction);
	return *p > start;
}

/* [eE][+-]digits, clamped far beyond any float's range. */
static int scan_exponent(const char **p, const char *end, int64_t *exponent)
{
	struct text_span s = {*p + 1, end};
	int negative = take_sign(&s);
	if (s.start == end || digit_value(*s.start) < 0)
		return -1;
	int64_t e = 0;
	for (; s.start < end && digit_value(*s.start) >= 0; s.start++)
		if (e < 100000)
			e = e * 10 + digit_value(*s.start);
	*exponent += negative ? -e : e;
	*p = s.start;
	return 0;
}

static int is_non_finite_word(struct text_span s)
{
	take_sign(&s);
	return span_equals_nocase(s, "nan") || span_equals_nocase(s, "inf") ||
	       span_equals_nocase(s, "infinity");
}

/* Correctly rounded for up to 15 digits times a power of ten up to 22 (both exact in a
 * double), otherwise within a few ulps of a double: far finer than the float it becomes. */
static double decimal_value(const struct decimal *d)
{
	static const double powers[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
					1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
					1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
	double m = (double)d->mantissa;
	if (d->mantissa == 0)
		return 0;
	if (d->exponent >= 0)
		return m * (d->exponent <= 22 ? powers[d->exponent] : pow(10, (double)d->exponent));
	return m / (d->exponent >= -22 ? powers[-d->exponent] : pow(10, (double)-d->exponent));
}

enum number_status parse_float(struct text_span s, float *out)
{
	struct text_span body = s;
	int negative = take_sign(&body);
	struct decimal d = {0, 0, 0};
	const char *p = body.start;
	int digits = scan_digits(&p, body.end, &d, 0);
	if (p < body.end && *p == '.') {
		p++;
		digits |= scan_digits(&p, body.end, &d, 1);
	}
	if (digits == 0)
		return is_non_finite_word(s) ? NUMBER_NOT_FINITE : NUMBER_SYNTAX;
	if (p < body.end && (*p == 'e' || *p == 'E') && scan_exponent(&p, body.end, &d.exponent) != 0)
		return NUMBER_SYNTAX;
	if (p != body.end)
		return NUMBER_SYNTAX;
	double value = decimal_value(&d);
	/* From halfway between FLT_MAX and 2^128 on, the float would round to infinity. */
	if (value >= 0x1.ffffffp+127)
		return NUMBER_RANGE;
	*out = (float)(negative ? -value : value);
	return NUMBER_OK;
}

/* ------------------------------------------------------------------ checked fields */

int read_index(const struct text_cursor *c, struct text_span token, int64_t limit, const char *what,
	       int32_t *out)
{
	char q[QUOTE_SIZE];
	int64_t value;
	enum number_status status = parse_int64(token, &value);
	if (status == NUMBER_SYNTAX)
		return format_error(c, "%s %s is not an integer", what, quote(token, q));
	if (status != NUMBER_OK || value < 1 || value > limit)
		return format_error(c, "%s %s out of range 1..%lld", what, quote(token, q), (long long)limit);
	*out = (int32_t)(value - 1);
	return 0;
}

int read_count(const struct text_cursor *c, struct text_span token, int64_t max, const char *what,
	       int64_t *out)
{
	char q[QUOTE_SIZE];
	enum number_status status = parse_int64(token, out);
	if (status == NUMBER_SYNTAX)
		return format_error(c, "%s %s is not an integer", what, quote(token, q));
	if (status == NUMBER_OK && *out < 0)
		return format_error(c, "%s %s is negative", what, quote(token, q));
	if (status != NUMBER_OK || *out > max)
		return format_error(c, "%s %s is too large (at most %lld)", what, quote(token, q),
				    (long long)max);
	return 0;
}

int read_real(const struct text_cursor *c, struct text_span token, const char *what, float *out)
{
	char q[QUOTE_SIZE];
	switch (parse_float(token, out)) {
	case NUMBER_OK:
		return 0;
	case NUMBER_NOT_FINITE:
		return format_error(c, "%s %s is not finite", what, quote(token, q));
	case NUMBER_RANGE:
		return format_error(c, "%s %s is out of range for a float", what, quote(token, q));
	default:
		return format_error(c, "%s %s is not a number", what, quote(token, q));
	}
}

int check_room(const struct text_cursor *c, int64_t nnz, int tokens)
{
	uint64_t left = (uint64_t)(c->end - c->pos);
	/* "1 1 1\n": one byte and one separator per token, the last line maybe unterminated. */
	if ((uint64_t)nnz > (left + 1) / (2 * (uint64_t)tokens))
		return format_error(c, "%lld entries declared, but only %llu bytes follow", (long long)nnz,
				    (unsigned long long)left);
	return 0;
}

int is_skipped_line(struct text_span line, char comment)
{
	while (line.start < line.end && is_blank(*line.start))
		line.start++;
	return line.start == line.end || (comment && *line.start == comment);
}

int read_entries(struct text_cursor *c, int64_t nnz, char comment, entry_reader *read_entry, void *ctx)
{
	struct text_span line;
	int64_t seen = 0;
	int rc;
	while ((rc = cursor_next_line(c, &line)) == 1) {
		if (is_skipped_line(line, comment))
			continue;
		if (seen == nnz)
			return format_error(c, "more entries than the %lld declared", (long long)nnz);
		rc = read_entry(c, line, ctx);
		if (rc)
			return rc;
		seen++;
	}
	if (rc < 0)
		return rc;
	if (seen < nnz)
		return format_error(c, "the file ends after %lld of the %lld declared entries",
				    (long long)seen, (long long)nnz);
	return 0;
}
