/* Shared by the file readers: a bounds-checked line cursor, number parsing, error
 * messages and the growable COO the parsers fill. */
#ifndef STARFA_IO_READER_H
#define STARFA_IO_READER_H

#include "storage/coo.h"

#include <stddef.h>
#include <stdint.h>

/* Bytes [start, end) of the input: a line, a field or a token. Never NUL-terminated. */
struct text_span {
	const char *start, *end;
};

struct text_cursor {
	const char *name;      /* the file, for messages */
	const char *pos, *end; /* the bytes not read yet */
	int64_t line;          /* the number of the line last returned (1-based) */
};

/* Starts at the beginning of data, past a UTF-8 byte order mark if any. */
void cursor_init(struct text_cursor *c, const char *name, const char *data, size_t size);
/* The next line without its line ending ("\n" or "\r\n"): 1, 0 at the end of the input,
 * or STARFA_EFORMAT when the line holds a control byte (binary data). */
int cursor_next_line(struct text_cursor *c, struct text_span *line);
/* Records "NAME:LINE: message" (the cursor's current line) and returns STARFA_EFORMAT. */
int format_error(const struct text_cursor *c, const char *fmt, ...) STARFA_PRINTF(2, 3);

/* Splits the next token off a line, tokens being separated by spaces and tabs:
 * 1, or 0 when only blanks are left. */
int next_token(struct text_span *line, struct text_span *token);
/* Whether a line is blank or, when comment is not '\0', starts with it after blanks. */
int is_skipped_line(struct text_span line, char comment);
int span_equals_nocase(struct text_span s, const char *word);
/* The token for a message: at most 40 bytes, in quotes, with "..." when cut. */
#define QUOTE_SIZE 48
const char *quote(struct text_span s, char buf[QUOTE_SIZE]);

enum number_status {
	NUMBER_OK,
	NUMBER_SYNTAX,     /* not a number */
	NUMBER_NOT_FINITE, /* nan, inf */
	NUMBER_RANGE,      /* a number, but too large for the type */
};

/* A decimal integer with an optional sign. */
enum number_status parse_int64(struct text_span s, int64_t *out);
/* A decimal real ([+-]digits[.digits][e[+-]digits]) that fits a float. */
enum number_status parse_float(struct text_span s, float *out);

/* Reads a 1-based index token into a 0-based index below limit; what names it in
 * messages ("row index"). 0, or STARFA_EFORMAT. */
int read_index(const struct text_cursor *c, struct text_span token, int64_t limit, const char *what,
	       int32_t *out);
/* Reads a dimension or a count from a header: a non-negative integer not above max. */
int read_count(const struct text_cursor *c, struct text_span token, int64_t max, const char *what,
	       int64_t *out);
/* Reads a real value that fits a float (0, or STARFA_EFORMAT naming it as `what`). */
int read_real(const struct text_cursor *c, struct text_span token, const char *what, float *out);
/* Rejects a declared entry count that the rest of the input cannot hold, each entry
 * taking `tokens` tokens (at least two bytes each with its separator), so no parser
 * allocates for an absurd count. */
int check_room(const struct text_cursor *c, int64_t nnz, int tokens);

/* Reads one entry from a line that is neither blank nor a comment: 0 or an error code. */
typedef int entry_reader(const struct text_cursor *c, struct text_span line, void *ctx);
/* Feeds the nnz declared entry lines to read_entry, skipping blank and comment lines
 * (see is_skipped_line), and rejects fewer or more entries than declared. */
int read_entries(struct text_cursor *c, int64_t nnz, char comment, entry_reader *read_entry, void *ctx);

int read_mtx(const char *name, const char *data, size_t size, starfa_coo **out);
int read_ratings(const char *name, const char *data, size_t size, starfa_coo **out);
/* read_ratings with the chunks' least size given (read_ratings: 4 MB); a file of fewer than two chunks is
 * read line after line. The same entries, ids and messages either way. */
int starfa_read_ratings_in_chunks(const char *name, const char *data, size_t size, size_t min_chunk, starfa_coo **out);
int read_docword(const char *name, const char *data, size_t size, starfa_coo **out);

#endif
