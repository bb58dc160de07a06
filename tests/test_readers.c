/* The file readers: every format's accepted inputs, entry by entry, and every rejected one. */
#include "testing.h"

#include <errno.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>

struct triplet {
	int32_t row, col;
	float val;
};

/* A compound-literal array of triplets and its length, for check_entries. */
#define ENTRIES(...)                                                                                         \
	(const struct triplet[]){__VA_ARGS__},                                                               \
		(int64_t)(sizeof((const struct triplet[]){__VA_ARGS__}) / sizeof(struct triplet))

/* Checks the shape and every entry, in order. */
static int check_entries(const starfa_coo *coo, int64_t nrows, int64_t ncols, const struct triplet *want,
			 int64_t n)
{
	CHECK_MSG(coo->nrows == nrows && coo->ncols == ncols, "shape %lld x %lld, expected %lld x %lld",
		  (long long)coo->nrows, (long long)coo->ncols, (long long)nrows, (long long)ncols);
	CHECK_MSG(coo->nnz == n, "%lld entries, expected %lld", (long long)coo->nnz, (long long)n);
	for (int64_t k = 0; k < n; k++)
		CHECK_MSG(coo->row[k] == want[k].row && coo->col[k] == want[k].col &&
				  coo->val[k] == want[k].val,
			  "entry %lld is (%d, %d, %g), expected (%d, %d, %g)", (long long)k, coo->row[k],
			  coo->col[k], coo->val[k], want[k].row, want[k].col, want[k].val);
	return 0;
}

/* Writes text to a scratch file and reads it; NULL (reported) when the read fails. */
static starfa_coo *read_text(const char *name, const char *text, starfa_format format)
{
	starfa_coo *coo = NULL;
	const char *path = testing_write_file(name, text, strlen(text));
	int rc = starfa_read(path, format, &coo);
	if (rc)
		testing_fail(__FILE__, __LINE__, "reading %s returned %d: %s", name, rc, starfa_last_error());
	return coo;
}

/* Reads text and checks the entries; 0 when both went right. */
static int read_and_check(const char *name, const char *text, starfa_format format, int64_t nrows,
			  int64_t ncols, const struct triplet *want, int64_t n)
{
	starfa_coo *coo = read_text(name, text, format);
	CHECK(coo);
	int rc = check_entries(coo, nrows, ncols, want, n);
	starfa_coo_free(coo);
	CHECK_MSG(rc == 0, "in %s", name);
	return 0;
}

struct bad_input {
	const char *text;
	size_t size;      /* 0: strlen(text) */
	int64_t line;     /* the line the message must name */
	const char *what; /* a part of the message */
};

/* Each input must fail with STARFA_EFORMAT and a message "PATH:LINE: ...what...". */
static int check_rejected(const char *name, starfa_format format, const struct bad_input *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct bad_input *bad = &cases[i];
		size_t size = bad->size ? bad->size : strlen(bad->text);
		const char *path = testing_write_file(name, bad->text, size);
		starfa_coo *coo = NULL;
		int rc = starfa_read(path, format, &coo);
		const char *msg = starfa_last_error();
		starfa_coo_free(coo);
		char prefix[1200];
		snprintf(prefix, sizeof prefix, "%s:%lld: ", path, (long long)bad->line);
		CHECK_MSG(rc == STARFA_EFORMAT && coo == NULL, "%s case %zu ('%s'): returned %d (%s)", name,
			  i, bad->what, rc, msg);
		const char *rest = strncmp(msg, prefix, strlen(prefix)) == 0 ? msg + strlen(prefix) : NULL;
		int located = rest && strstr(rest, bad->what);
		CHECK_MSG(located, "%s case %zu: message '%s', expected '%s...%s...'", name, i, msg, prefix,
			  bad->what);
	}
	return 0;
}

#define NCASES(a) (sizeof(a) / sizeof *(a))
/* A literal with NUL bytes in it, and its size. */
#define BINARY(text) text, sizeof(text) - 1

/* ------------------------------------------------------------------ formats */

TEST(readers, format_names)
{
	static const char *const names[] = {"mtx", "ratings", "docword"};
	for (int f = STARFA_FORMAT_MTX; f <= STARFA_FORMAT_DOCWORD; f++) {
		starfa_format parsed = STARFA_FORMAT_AUTO;
		CHECK(strcmp(starfa_format_name((starfa_format)f), names[f - 1]) == 0);
		CHECK_OK(starfa_format_parse(names[f - 1], &parsed));
		CHECK(parsed == (starfa_format)f);
	}
	starfa_format parsed = STARFA_FORMAT_AUTO;
	CHECK_OK(starfa_format_parse("MtX", &parsed));
	CHECK(parsed == STARFA_FORMAT_MTX);
	CHECK_OK(starfa_format_parse("RATINGS", &parsed));
	CHECK(parsed == STARFA_FORMAT_RATINGS);
	CHECK(starfa_format_parse("csv", &parsed) == -1);
	CHECK(starfa_format_parse("", &parsed) == -1);
	CHECK(starfa_format_parse("mtxx", &parsed) == -1);
	CHECK(starfa_format_parse(NULL, &parsed) == -1);
	CHECK(parsed == STARFA_FORMAT_RATINGS);
	CHECK(strcmp(starfa_format_name(STARFA_FORMAT_AUTO), "auto") == 0);
	return 0;
}

TEST(readers, format_guess_from_name)
{
	CHECK(starfa_format_guess("no/such/dir/a.mtx") == STARFA_FORMAT_MTX);
	CHECK(starfa_format_guess("no/such/dir/A.MTX") == STARFA_FORMAT_MTX);
	CHECK(starfa_format_guess("docword.kos.txt") == STARFA_FORMAT_DOCWORD);
	CHECK(starfa_format_guess("no/such/DocWord.nips.txt") == STARFA_FORMAT_DOCWORD);
	CHECK(starfa_format_guess("no/such/ratings.csv") == STARFA_FORMAT_RATINGS);
	CHECK(starfa_format_guess("no/such/u.data") == STARFA_FORMAT_RATINGS);
	CHECK(starfa_format_guess("no/such/x.tsv") == STARFA_FORMAT_RATINGS);
	CHECK(starfa_format_guess("no/such/ratings.dat") == STARFA_FORMAT_RATINGS);
	CHECK(starfa_format_guess("no/such/docword/ratings.csv") == STARFA_FORMAT_RATINGS);
	CHECK(starfa_format_guess("no/such/matrix.mtx.csv") == STARFA_FORMAT_RATINGS);
	CHECK(starfa_format_guess("") == STARFA_FORMAT_RATINGS);
	return 0;
}

TEST(readers, format_guess_from_content)
{
	const char *mtx = "%%matrixmarket matrix coordinate real general\n1 1 1\n1 1 2\n";
	CHECK(starfa_format_guess(testing_write_file("data.csv", mtx, strlen(mtx))) == STARFA_FORMAT_MTX);
	const char *csv = "1,2,3\n";
	CHECK(starfa_format_guess(testing_write_file("data.txt", csv, strlen(csv))) == STARFA_FORMAT_RATINGS);
	CHECK(starfa_format_guess(testing_write_file("other.mtx", csv, strlen(csv))) == STARFA_FORMAT_MTX);
	const char *docword = "2\n3\n1\n1 1 1\n";
	CHECK(starfa_format_guess(testing_write_file("bag.txt", docword, strlen(docword))) ==
	      STARFA_FORMAT_DOCWORD);
	return 0;
}

TEST(readers, auto_format)
{
	CHECK_OK(read_and_check("matrix.txt",
				"%%MatrixMarket matrix coordinate pattern general\n2 2 1\n2 1\n",
				STARFA_FORMAT_AUTO, 2, 2, ENTRIES({1, 0, 1})));
	CHECK_OK(read_and_check("docword.small.txt", "2\n3\n1\n2 3 4\n", STARFA_FORMAT_AUTO, 2, 3,
				ENTRIES({1, 2, 4})));
	CHECK_OK(read_and_check("ratings.csv", "a,b,1\n", STARFA_FORMAT_AUTO, 1, 1, ENTRIES({0, 0, 1})));

	starfa_coo *coo = NULL;
	const char *docword = "2\n3\n1\n2 3 4\n";
	CHECK_OK(starfa_read_buffer("bag", docword, strlen(docword), STARFA_FORMAT_AUTO, &coo));
	int rc = check_entries(coo, 2, 3, ENTRIES({1, 2, 4}));
	starfa_coo_free(coo);
	CHECK(rc == 0);
	return 0;
}

TEST(readers, missing_file)
{
	starfa_coo *coo = (starfa_coo *)&coo;
	CHECK(starfa_read("/nonexistent/ratings.csv", STARFA_FORMAT_AUTO, &coo) == STARFA_EIO);
	CHECK(coo == NULL);
	CHECK(strstr(starfa_last_error(), "/nonexistent/ratings.csv"));
	CHECK(strstr(starfa_last_error(), strerror(ENOENT)));
	CHECK(starfa_read("/", STARFA_FORMAT_MTX, &coo) == STARFA_EIO);
	CHECK(strstr(starfa_last_error(), strerror(EISDIR)));
	return 0;
}

TEST(readers, bad_arguments)
{
	starfa_coo *coo = NULL;
	CHECK(starfa_read(NULL, STARFA_FORMAT_MTX, &coo) == STARFA_EINVAL);
	CHECK(starfa_read_buffer("x", NULL, 3, STARFA_FORMAT_MTX, &coo) == STARFA_EINVAL);
	CHECK(starfa_read_buffer("x", "1 1 1", 5, (starfa_format)42, &coo) == STARFA_EINVAL);
	CHECK(coo == NULL);
	/* An empty buffer may be NULL: it is simply a file without ratings. */
	CHECK(starfa_read_buffer("x", NULL, 0, STARFA_FORMAT_RATINGS, &coo) == STARFA_EFORMAT);
	CHECK(strcmp(starfa_last_error(), "x:1: no ratings") == 0);
	return 0;
}

/* The buffer is not NUL-terminated: a parser reading one byte too far trips the
 * address sanitizer or valgrind. */
TEST(readers, buffer_without_terminator)
{
	static const char *const texts[] = {
		"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 2.5",
		"%%MatrixMarket matrix coordinate integer symmetric\n2 2 1\n2 1 -25",
		"u1\ti1\t3.5",
		"u1 i1 3e1",
		"2\n2\n1\n1 2 12",
	};
	static const starfa_format formats[] = {STARFA_FORMAT_MTX, STARFA_FORMAT_MTX, STARFA_FORMAT_RATINGS,
						STARFA_FORMAT_RATINGS, STARFA_FORMAT_DOCWORD};
	static const float values[] = {2.5f, -25, 3.5f, 30, 12};
	for (size_t i = 0; i < NCASES(texts); i++) {
		size_t size = strlen(texts[i]);
		char *exact = malloc(size);
		CHECK(exact);
		memcpy(exact, texts[i], size);
		starfa_coo *coo = NULL;
		int rc = starfa_read_buffer("exact", exact, size, formats[i], &coo);
		free(exact);
		CHECK_MSG(rc == 0, "text %zu: %s", i, starfa_last_error());
		int ok = coo->nnz >= 1 && coo->val[0] == values[i];
		starfa_coo_free(coo);
		CHECK_MSG(ok, "text %zu: wrong value", i);
	}
	return 0;
}

/* ------------------------------------------------------------------ Matrix Market */

TEST(readers, mtx_real_general)
{
	return read_and_check("general.mtx",
			      "%%MatrixMarket matrix coordinate real general\n"
			      "% a comment\n"
			      "3 4 5\n"
			      "1 1 1.5\n"
			      "3 4 -2e3\n"
			      "2 2 .25\n"
			      "1 1 7\n"
			      "3 1 +1E-1\n",
			      STARFA_FORMAT_MTX, 3, 4,
			      ENTRIES({0, 0, 1.5f}, {2, 3, -2000}, {1, 1, 0.25f}, {0, 0, 7}, {2, 0, 0.1f}));
}

/* Every valid field x symmetry combination, checked against the expansion done here. */
TEST(readers, mtx_fields_and_symmetries)
{
	static const char *const fields[] = {"real", "integer", "pattern"};
	static const char *const symmetries[] = {"general", "symmetric", "skew-symmetric"};
	/* Lower-triangle entries; the diagonal one is left out of skew-symmetric files. */
	static const struct triplet file_entries[] = {{2, 1, 3}, {1, 1, 5}, {3, 1, -4}, {3, 2, 7}};
	for (int f = 0; f < 3; f++)
		for (int s = 0; s < 3; s++) {
			if (f == 2 && s == 2)
				continue;
			char text[512], name[64];
			struct triplet want[8];
			int64_t n = 0, entries = 0;
			char body[256] = "";
			for (int k = 0; k < 4; k++) {
				struct triplet e = file_entries[k];
				if (s == 2 && e.row == e.col)
					continue;
				char line[64];
				if (f == 2)
					snprintf(line, sizeof line, "%d %d\n", e.row, e.col);
				else
					snprintf(line, sizeof line, "%d %d %g\n", e.row, e.col, e.val);
				strcat(body, line);
				entries++;
				float v = f == 2 ? 1 : e.val;
				want[n++] = (struct triplet){e.row - 1, e.col - 1, v};
				if (s != 0 && e.row != e.col)
					want[n++] = (struct triplet){e.col - 1, e.row - 1, s == 2 ? -v : v};
			}
			snprintf(text, sizeof text, "%%%%MatrixMarket matrix coordinate %s %s\n3 3 %lld\n%s",
				 fields[f], symmetries[s], (long long)entries, body);
			snprintf(name, sizeof name, "%s-%s.mtx", fields[f], symmetries[s]);
			CHECK_OK(read_and_check(name, text, STARFA_FORMAT_MTX, 3, 3, want, n));
		}
	return 0;
}

TEST(readers, mtx_layout_tolerance)
{
	/* CRLF, comments before and among entries, blank lines, blanks around tokens, an
	 * any-case banner and no final line ending. */
	return read_and_check("layout.mtx",
			      "%%matrixmarket MATRIX Coordinate REAL General\r\n"
			      "%\r\n"
			      "\r\n"
			      "% sizes next\r\n"
			      "  2\t3  2  \r\n"
			      "%% between entries\r\n"
			      "\r\n"
			      "   \t \r\n"
			      "\t1 3 0.5\t\r\n"
			      "  % indented comment\r\n"
			      "2 1 -1",
			      STARFA_FORMAT_MTX, 2, 3, ENTRIES({0, 2, 0.5f}, {1, 0, -1}));
}

TEST(readers, mtx_byte_order_mark_and_double)
{
	return read_and_check("bom.mtx",
			      "\xef\xbb\xbf%%MatrixMarket matrix coordinate double general\n1 1 1\n1 1 3\n",
			      STARFA_FORMAT_MTX, 1, 1, ENTRIES({0, 0, 3}));
}

TEST(readers, mtx_empty_matrices)
{
	CHECK_OK(read_and_check("empty.mtx", "%%MatrixMarket matrix coordinate real general\n0 0 0\n",
				STARFA_FORMAT_MTX, 0, 0, NULL, 0));
	CHECK_OK(read_and_check("no-entries.mtx",
				"%%MatrixMarket matrix coordinate pattern symmetric\n5 5 0\n",
				STARFA_FORMAT_MTX, 5, 5, NULL, 0));
	return 0;
}

/* Written with 8 digits, FLT_MAX reads back as FLT_MAX although the decimal exceeds it. */
TEST(readers, mtx_float_extremes)
{
	return read_and_check(
		"extremes.mtx",
		"%%MatrixMarket matrix coordinate real general\n1 5 5\n"
		"1 1 3.4028235e38\n1 2 -3.40282356e+38\n1 3 1e-50\n1 4 -0\n"
		"1 5 0.000000000000000000000000000000000000000000001401298464324817\n",
		STARFA_FORMAT_MTX, 1, 5,
		ENTRIES({0, 0, FLT_MAX}, {0, 1, -FLT_MAX}, {0, 2, 0}, {0, 3, 0}, {0, 4, 0x1p-149f}));
}

TEST(readers, mtx_large_indices_and_integers)
{
	return read_and_check(
		"large.mtx",
		"%%MatrixMarket matrix coordinate integer general\n"
		"2147483647 2147483647 2\n"
		"2147483647 1 -9223372036854775808\n"
		"1 2147483647 16777216\n",
		STARFA_FORMAT_MTX, INT32_MAX, INT32_MAX,
		ENTRIES({INT32_MAX - 1, 0, -9223372036854775808.0f}, {0, INT32_MAX - 1, 16777216}));
}

/* Values written in many ways must read as the nearest float (strtod is the reference). */
TEST(readers, mtx_values_match_strtod)
{
	uint64_t state = testing_seed();
	enum { N = 2000 };
	size_t cap = N * 64 + 128;
	char *text = malloc(cap);
	char(*tokens)[48] = malloc(N * sizeof *tokens);
	CHECK(text && tokens);
	size_t len = (size_t)snprintf(text, cap, "%%%%MatrixMarket matrix coordinate real general\n%d 1 %d\n",
				      N, N);
	for (int k = 0; k < N; k++) {
		double magnitude = pow(10, (double)testing_below(&state, 76) - 38);
		double x = (testing_uniform(&state) - 0.5) * magnitude;
		int digits = (int)testing_below(&state, 25);
		switch (testing_below(&state, 4)) {
		case 0:
			snprintf(tokens[k], sizeof tokens[k], "%.*e", digits, x);
			break;
		case 1:
			snprintf(tokens[k], sizeof tokens[k], "%.*f", digits, fmod(x, 1e6));
			break;
		case 2:
			snprintf(tokens[k], sizeof tokens[k], "%.*g", digits + 1, x);
			break;
		default:
			snprintf(tokens[k], sizeof tokens[k], "%lld", (long long)fmod(x, 1e18));
		}
		len += (size_t)snprintf(text + len, cap - len, "%d 1 %s\n", k + 1, tokens[k]);
	}
	starfa_coo *coo = NULL;
	int rc = starfa_read_buffer("values.mtx", text, len, STARFA_FORMAT_MTX, &coo);
	free(text);
	CHECK_MSG(rc == 0, "%s", starfa_last_error());
	int bad = -1;
	for (int k = 0; k < N && bad < 0; k++) {
		float want = (float)strtod(tokens[k], NULL);
		/* The slow path may land one float ulp off when a double rounding is a tie. */
		if (coo->val[k] != want && coo->val[k] != nextafterf(want, INFINITY) &&
		    coo->val[k] != nextafterf(want, -INFINITY))
			bad = k;
	}
	char token[48] = "";
	float got = bad >= 0 ? coo->val[bad] : 0;
	if (bad >= 0)
		strcpy(token, tokens[bad]);
	starfa_coo_free(coo);
	free(tokens);
	CHECK_MSG(bad < 0, "'%s' read as %.9g, strtod gives %.9g", token, got, (float)strtod(token, NULL));
	return 0;
}

TEST(readers, mtx_rejects_bad_banners)
{
	static const struct bad_input cases[] = {
		{"", 0, 1, "missing '%%MatrixMarket' banner"},
		{"3 3 1\n1 1 1\n", 0, 1, "missing '%%MatrixMarket' banner"},
		{"%%MatrixMarketmatrix coordinate real general\n1 1 0\n", 0, 1, "missing"},
		{"\n%%MatrixMarket matrix coordinate real general\n1 1 0\n", 0, 1, "missing"},
		{"%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", 0, 1,
		 "'array' is unsupported"},
		{"%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n", 0, 1,
		 "'complex' is unsupported"},
		{"%%MatrixMarket matrix coordinate real hermitian\n1 1 0\n", 0, 1,
		 "'hermitian' is unsupported"},
		{"%%MatrixMarket vector coordinate real general\n", 0, 1, "'vector' is unsupported"},
		{"%%MatrixMarket matrix coordinate float general\n1 1 0\n", 0, 1, "unknown field 'float'"},
		{"%%MatrixMarket matrix coordinate real weird\n1 1 0\n", 0, 1, "unknown symmetry 'weird'"},
		{"%%MatrixMarket matrix coordinate real\n1 1 0\n", 0, 1, "incomplete banner"},
		{"%%MatrixMarket\n", 0, 1, "incomplete banner"},
		{"%%MatrixMarket matrix coordinate real general x\n1 1 0\n", 0, 1, "unexpected 'x'"},
		{"%%MatrixMarket matrix coordinate pattern skew-symmetric\n1 1 0\n", 0, 1, "skew-symmetric"},
	};
	return check_rejected("banner.mtx", STARFA_FORMAT_MTX, cases, NCASES(cases));
}

#define BANNER "%%MatrixMarket matrix coordinate real general\n"
#define SYMMETRIC "%%MatrixMarket matrix coordinate real symmetric\n"

TEST(readers, mtx_rejects_bad_sizes)
{
	static const struct bad_input cases[] = {
		{BANNER, 0, 1, "missing the size line"},
		{BANNER "% only comments\n\n", 0, 3, "missing the size line"},
		{BANNER "3 3\n", 0, 2, "incomplete size line"},
		{BANNER "3 3 1 4\n1 1 1\n", 0, 2, "unexpected '4'"},
		{BANNER "-1 3 1\n1 1 1\n", 0, 2, "row count '-1' is negative"},
		{BANNER "3 -3 1\n1 1 1\n", 0, 2, "column count '-3' is negative"},
		{BANNER "3 3 -1\n", 0, 2, "entry count '-1' is negative"},
		{BANNER "3 x 1\n1 1 1\n", 0, 2, "column count 'x' is not an integer"},
		{BANNER "3.0 3 1\n1 1 1\n", 0, 2, "row count '3.0' is not an integer"},
		{BANNER "0 3 1\n1 1 1\n", 0, 2, "more than a 0 x 3 matrix holds"},
		{BANNER "3 0 2\n1 1 1\n1 1 1\n", 0, 2, "more than a 3 x 0 matrix holds"},
		{BANNER "2147483648 1 0\n", 0, 2, "row count '2147483648' is too large"},
		{BANNER "1 99999999999 0\n", 0, 2, "column count '99999999999' is too large"},
		{BANNER "1 1 99999999999999999999\n", 0, 2,
		 "entry count '99999999999999999999' is too large"},
		{BANNER "2 2 5\n1 1 1\n1 2 1\n2 1 1\n2 2 1\n1 1 1\n", 0, 2,
		 "5 entries declared, more than a 2 x 2"},
		{SYMMETRIC "3 3 7\n", 0, 2, "more than the lower triangle of a 3 x 3 matrix"},
		{SYMMETRIC "3 4 1\n1 1 1\n", 0, 2, "must be square"},
		{"%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 2\n2 1 1\n2 1 1\n", 0, 2,
		 "strict lower triangle"},
		{BANNER "100000 100000 1000000\n1 1 1\n", 0, 2,
		 "1000000 entries declared, but only 6 bytes follow"},
		{BANNER "2147483647 2147483647 4611686014132420609\n1 1 1\n", 0, 2, "bytes follow"},
	};
	return check_rejected("sizes.mtx", STARFA_FORMAT_MTX, cases, NCASES(cases));
}

TEST(readers, mtx_rejects_bad_entries)
{
	static const struct bad_input cases[] = {
		{BANNER "3 3 1\n0 1 1\n", 0, 3, "row index '0' out of range 1..3"},
		{BANNER "3 3 1\n4 1 1\n", 0, 3, "row index '4' out of range"},
		{BANNER "3 3 1\n1 4 1\n", 0, 3, "column index '4' out of range 1..3"},
		{BANNER "3 3 1\n1 -1 1\n", 0, 3, "column index '-1' out of range"},
		{BANNER "3 3 1\n1 99999999999999999999999 1\n", 0, 3, "out of range"},
		{BANNER "3 3 1\n1.5 1 1\n", 0, 3, "row index '1.5' is not an integer"},
		{BANNER "3 3 1\n1\n% padding\n", 0, 3, "missing the column index"},
		{BANNER "3 3 1\n1 1\n% padding\n", 0, 3, "missing the value"},
		{BANNER "3 3 1\n1 1 1 1\n", 0, 3, "unexpected '1'"},
		{BANNER "3 3 1\n1 1 abc\n", 0, 3, "value 'abc' is not a number"},
		{BANNER "3 3 1\n1 1 1.5x\n", 0, 3, "value '1.5x' is not a number"},
		{BANNER "3 3 1\n1 1 1e\n", 0, 3, "value '1e' is not a number"},
		{BANNER "3 3 1\n1 1 .\n", 0, 3, "value '.' is not a number"},
		{BANNER "3 3 1\n1 1 0x10\n", 0, 3, "not a number"},
		{BANNER "3 3 1\n1 1 nan\n", 0, 3, "value 'nan' is not finite"},
		{BANNER "3 3 1\n1 1 -Infinity\n", 0, 3, "value '-Infinity' is not finite"},
		{BANNER "3 3 1\n1 1 inf\n", 0, 3, "is not finite"},
		{BANNER "3 3 1\n1 1 1e39\n", 0, 3, "value '1e39' is out of range for a float"},
		{BANNER "3 3 1\n1 1 -3.4028236e38\n", 0, 3, "value '-3.4028236e38' is out of range"},
		{BANNER "3 3 1\n1 1 -1e99999999999\n", 0, 3, "out of range"},
		{"%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 1 2.5\n", 0, 3,
		 "value '2.5' is not an integer"},
		{"%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 1 9223372036854775808\n", 0, 3,
		 "value '9223372036854775808' is out of range"},
		{"%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 1 1\n", 0, 3, "unexpected '1'"},
		{"%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 1\n2 2 1\n", 0, 3,
		 "diagonal entry (2, 2)"},
		{BANNER "3 3 2\n1 1 1.000000\n", 0, 3, "the file ends after 1 of the 2 declared entries"},
		{BANNER "3 3 2\n1 1 1\n% trailing comment\n\n", 0, 5, "ends after 1 of the 2"},
		{BANNER "3 3 1\n1 1 1\n2 2 2\n", 0, 4, "more entries than the 1 declared"},
		{BANNER "3 3 0\n1 1 1\n", 0, 3, "more entries than the 0 declared"},
		{BINARY(BANNER "3 3 2\n1 1 1\n2 2 \0\n"), 4, "unexpected byte 0x00 at column 5"},
		{BANNER "3 3 2\n1 1 1\r2 2 2\n", 0, 3, "unexpected byte 0x0d"},
		{BINARY("\x7f\x45LF\x02\x01\x01\0\0"), 1, "unexpected byte 0x7f"},
		{"%%MatrixMarket matrix coordinate real general\n1 1 1\n\x01\x02\x03\x04\x05\x06\n", 0, 3,
		 "byte 0x01"},
		{BANNER "3 3 1\n1 1 1 % comment\n", 0, 3, "unexpected '%'"},
	};
	return check_rejected("entries.mtx", STARFA_FORMAT_MTX, cases, NCASES(cases));
}

/* ------------------------------------------------------------------ ratings */

TEST(readers, ratings_csv_with_header)
{
	starfa_coo *coo = read_text("ratings.csv",
				    "userId,movieId,rating,timestamp\n"
				    "1,31,2.5,1260759144\n"
				    "1,1029,3.0,1260759179\n"
				    "7,31,4,1260759185\n"
				    "3,1029,0.5,1260759205\n",
				    STARFA_FORMAT_RATINGS);
	CHECK(coo);
	int rc = check_entries(coo, 3, 2, ENTRIES({0, 0, 2.5f}, {0, 1, 3}, {1, 0, 4}, {2, 1, 0.5f}));
	int ids_ok =
		starfa_idmap_count(coo->row_ids) == 3 && starfa_idmap_count(coo->col_ids) == 2 &&
		strcmp(starfa_idmap_name(coo->row_ids, 0), "1") == 0 &&
		strcmp(starfa_idmap_name(coo->row_ids, 1), "7") == 0 &&
		strcmp(starfa_idmap_name(coo->row_ids, 2), "3") == 0 &&
		strcmp(starfa_idmap_name(coo->col_ids, 0), "31") == 0 &&
		strcmp(starfa_idmap_name(coo->col_ids, 1), "1029") == 0 &&
		starfa_idmap_find(coo->row_ids, "7") == 1 && starfa_idmap_find(coo->col_ids, "1029") == 1 &&
		starfa_idmap_find(coo->row_ids, "31") == -1 && starfa_idmap_name(coo->row_ids, 3) == NULL &&
		starfa_idmap_name(coo->row_ids, -1) == NULL;
	starfa_coo_free(coo);
	CHECK(rc == 0);
	CHECK(ids_ok);
	return 0;
}

/* The same ratings with each separator, and with string ids. */
TEST(readers, ratings_separators)
{
	static const char *const texts[] = {
		"196\t242\t3\t881250949\n186\t302\t3\t891717742\n196\t302\t1\t878887116\n",
		"196::242::3::881250949\n186::302::3::891717742\n196::302::1::878887116\n",
		"196,242,3\n186,302,3\n196,302,1\n",
		"196, 242 ,3\n186 ,302, 3\n196,302,1 \n",
		"196 242 3 881250949\n  186   302\t3\n196 302 1\n",
		"196\t242\t3\n186\t302\t3\n196\t302\t 1\n",
	};
	for (size_t i = 0; i < NCASES(texts); i++) {
		starfa_coo *coo = read_text("ratings.data", texts[i], STARFA_FORMAT_RATINGS);
		CHECK(coo);
		int rc = check_entries(coo, 2, 2, ENTRIES({0, 0, 3}, {1, 1, 3}, {0, 1, 1}));
		int ids_ok = strcmp(starfa_idmap_name(coo->row_ids, 1), "186") == 0 &&
			     strcmp(starfa_idmap_name(coo->col_ids, 1), "302") == 0;
		starfa_coo_free(coo);
		CHECK_MSG(rc == 0 && ids_ok, "text %zu", i);
	}
	return 0;
}

TEST(readers, ratings_string_ids_comments_crlf)
{
	starfa_coo *coo = read_text("reviews.tsv",
				    "# exported reviews\r\n"
				    "\r\n"
				    "user\titem\tstars\r\n"
				    "alice\tThe Matrix\t5\r\n"
				    "  # a comment among ratings\r\n"
				    "bob\tAlien\t-1.5\r\n"
				    "\t\r\n"
				    "alice\tAlien\t4e0\r\n"
				    "carol\tThe Matrix\t2",
				    STARFA_FORMAT_RATINGS);
	CHECK(coo);
	int rc = check_entries(coo, 3, 2, ENTRIES({0, 0, 5}, {1, 1, -1.5f}, {0, 1, 4}, {2, 0, 2}));
	int ids_ok = strcmp(starfa_idmap_name(coo->col_ids, 0), "The Matrix") == 0 &&
		     strcmp(starfa_idmap_name(coo->row_ids, 2), "carol") == 0 &&
		     starfa_idmap_find(coo->col_ids, "Alien") == 1 &&
		     starfa_idmap_find(coo->row_ids, "dave") == -1 &&
		     starfa_idmap_find(coo->row_ids, "alic") == -1;
	starfa_coo_free(coo);
	CHECK(rc == 0);
	CHECK(ids_ok);
	return 0;
}

TEST(readers, ratings_rejects_malformed)
{
	static const struct bad_input cases[] = {
		{"", 0, 1, "no ratings"},
		{"\n\n# nothing\n", 0, 3, "no ratings"},
		{"userId,movieId,rating,timestamp\n", 0, 1, "no ratings"},
		{"1,2\n", 0, 1, "found 2 fields"},
		{"1,2,3\n4,5\n", 0, 2, "found 2 fields"},
		{"1\n", 0, 1, "found 1 field"},
		{"1,2,3,4,5\n", 0, 1, "found more than 4 fields"},
		{"1,2,3\n1,2,3,4,5,6\n", 0, 2, "more than 4 fields"},
		{"1,2,3\n1,2,abc\n", 0, 2, "rating 'abc' is not a number"},
		{"1,2,nan\n", 0, 1, "rating 'nan' is not finite"},
		{"1,2,3\n1,2,-inf\n", 0, 2, "rating '-inf' is not finite"},
		{"1,2,3\n1,2,1e40\n", 0, 2, "rating '1e40' is out of range"},
		{"user,item,rating\nuser,item,rating\n", 0, 2, "rating 'rating' is not a number"},
		{"1,2,3\n,2,3\n", 0, 2, "empty user id"},
		{"1,2,3\n  ,2,3\n", 0, 2, "empty user id"},
		{"1,2,3\n1,,3\n", 0, 2, "empty item id"},
		{"a\t\t3\n", 0, 1, "empty item id"},
		{"1,2,3\n1 2 3\n", 0, 2, "found 1 field"},
		{"1\t2\t3\n1,2,3\n", 0, 2, "found 1 field"},
		{BINARY("1,2,3\n1,\0,3\n"), 2, "unexpected byte 0x00 at column 3"},
		{"1,2,3\n1,2,3\x1b[0m\n", 0, 2, "unexpected byte 0x1b"},
		{BINARY("\x1f\x8b\x08\0\0\0\0\0"), 1, "unexpected byte 0x1f"},
	};
	return check_rejected("ratings.csv", STARFA_FORMAT_RATINGS, cases, NCASES(cases));
}

/* ------------------------------------------------------------------ docword */

TEST(readers, docword)
{
	CHECK_OK(read_and_check("docword.test.txt", "3\n5\n4\n1 2 1\n1 5 3\n3 1 2\n2 2 1\n",
				STARFA_FORMAT_DOCWORD, 3, 5,
				ENTRIES({0, 1, 1}, {0, 4, 3}, {2, 0, 2}, {1, 1, 1})));
	CHECK_OK(read_and_check("docword.crlf.txt", "2\r\n2\r\n\r\n2\r\n1\t1 0.5\r\n\r\n2 2  7 ",
				STARFA_FORMAT_DOCWORD, 2, 2, ENTRIES({0, 0, 0.5f}, {1, 1, 7})));
	CHECK_OK(read_and_check("docword.empty.txt", "0\n0\n0\n", STARFA_FORMAT_DOCWORD, 0, 0, NULL, 0));
	return 0;
}

TEST(readers, docword_rejects_malformed)
{
	static const struct bad_input cases[] = {
		{"", 0, 1, "missing the number of documents"},
		{"3\n", 0, 1, "missing the number of words"},
		{"3\n4\n\n", 0, 3, "missing the number of entries"},
		{"3 4\n4\n1\n1 1 1\n", 0, 1, "unexpected '4' after the number of documents"},
		{"x\n4\n1\n1 1 1\n", 0, 1, "number of documents 'x' is not an integer"},
		{"3\n-4\n1\n1 1 1\n", 0, 2, "number of words '-4' is negative"},
		{"3\n4294967296\n0\n", 0, 2, "number of words '4294967296' is too large"},
		{"3\n4\n13\n", 0, 3, "13 entries declared, more than 3 documents x 4 words hold"},
		{"0\n4\n1\n1 1 1\n", 0, 3, "more than 0 documents"},
		{"30\n40\n1000\n1 1 1\n", 0, 3, "1000 entries declared, but only 6 bytes follow"},
		{"3\n4\n1\n0 1 1\n", 0, 4, "document '0' out of range 1..3"},
		{"3\n4\n1\n4 1 1\n", 0, 4, "document '4' out of range"},
		{"3\n4\n1\n1 5 1\n", 0, 4, "word '5' out of range 1..4"},
		{"3\n4\n1\n1 x 1\n", 0, 4, "word 'x' is not an integer"},
		{"3\n4\n1\n1 1 0\n", 0, 4, "count '0' is not positive"},
		{"3\n4\n1\n1 1 -2\n", 0, 4, "count '-2' is not positive"},
		{"3\n4\n1\n1 1 nan\n", 0, 4, "count 'nan' is not finite"},
		{"3\n4\n1\n1 1 lots\n", 0, 4, "count 'lots' is not a number"},
		{"3\n4\n1\n1 1\n\n\n", 0, 4, "incomplete entry"},
		{"3\n4\n1\n1 1 1 1\n", 0, 4, "unexpected '1' at the end of the entry"},
		{"3\n4\n2\n1 1 1.000000\n", 0, 4, "the file ends after 1 of the 2 declared entries"},
		{"3\n4\n1\n1 1 1\n2 2 2\n", 0, 5, "more entries than the 1 declared"},
		{BINARY("3\n4\n1\n1 1 1\0\n"), 4, "unexpected byte 0x00"},
	};
	return check_rejected("docword.bad.txt", STARFA_FORMAT_DOCWORD, cases, NCASES(cases));
}
