/* Models: the file round trip (version 2, and version 1 files still loading), rejection of truncated and
 * corrupt files, the kinds, exports, recommendations and metrics. */
#include "als_testing.h"
#include "model/model.h"
#include "cpu/topk.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <unistd.h>

/* A small trained model with string ids (a ratings file). */
static starfa_model *small_model(starfa_als_algo algo, uint64_t *rng)
{
	char *text = malloc(64 * 1024);
	if (!text)
		return NULL;
	size_t len = (size_t)snprintf(text, 64, "user,item,rating\n");
	for (int u = 0; u < 40; u++)
		for (int i = 0; i < 30; i++)
			if (testing_uniform(rng) < 0.3)
				len += (size_t)snprintf(text + len, 64, "user%d,item-%c%d,%d\n", u, 'a' + i % 26, i,
							1 + (int)testing_below(rng, 5));
	starfa_coo *coo = NULL;
	starfa_model *m = NULL;
	starfa_als_options o;
	starfa_als_options_default(&o, algo);
	o.rank = 4;
	o.iters = 3;
	if (starfa_read_buffer("small.csv", text, len, STARFA_FORMAT_RATINGS, &coo) == 0)
		starfa_als_train(coo, NULL, &o, NULL, NULL, &m);
	starfa_coo_free(coo);
	free(text);
	return m;
}

/* The name of index i of a side, as the model file stores it (indices from 1 without ids). */
static const char *side_id(const starfa_idmap *ids, int64_t i, char buf[32])
{
	if (ids)
		return starfa_idmap_name(ids, i);
	snprintf(buf, 32, "%lld", (long long)i + 1);
	return buf;
}

/* Every field of b (loaded) as in a (saved). */
static int same_model(const starfa_model *a, const starfa_model *b)
{
	CHECK(a->kind == b->kind && strcmp(a->algorithm, b->algorithm) == 0);
	CHECK(a->nusers == b->nusers && a->nitems == b->nitems && a->rank == b->rank);
	CHECK(a->global_mean == b->global_mean && a->lambda == b->lambda && a->alpha == b->alpha);
	CHECK(memcmp(a->user_factors, b->user_factors, sizeof(float) * (size_t)(a->nusers * a->rank)) == 0);
	CHECK(memcmp(a->item_factors, b->item_factors, sizeof(float) * (size_t)(a->nitems * a->rank)) == 0);
	CHECK((a->user_bias == NULL) == (b->user_bias == NULL) && (a->item_bias == NULL) == (b->item_bias == NULL));
	if (a->user_bias) {
		CHECK(memcmp(a->user_bias, b->user_bias, sizeof(float) * (size_t)a->nusers) == 0);
		CHECK(memcmp(a->item_bias, b->item_bias, sizeof(float) * (size_t)a->nitems) == 0);
	}
	char x[32], y[32];
	for (int64_t u = 0; u < a->nusers; u++)
		CHECK(strcmp(side_id(a->user_ids, u, x), side_id(b->user_ids, u, y)) == 0);
	for (int64_t i = 0; i < a->nitems; i++)
		CHECK(strcmp(side_id(a->item_ids, i, x), side_id(b->item_ids, i, y)) == 0);
	CHECK((a->seen == NULL) == (b->seen == NULL));
	if (a->seen) {
		CHECK(a->seen->nrows == b->seen->nrows && a->seen->ncols == b->seen->ncols && a->seen->nnz == b->seen->nnz);
		CHECK(memcmp(a->seen->rowptr, b->seen->rowptr, sizeof(int64_t) * (size_t)(a->nusers + 1)) == 0);
		CHECK(memcmp(a->seen->colind, b->seen->colind, sizeof(int32_t) * (size_t)a->seen->nnz) == 0);
	}
	return 0;
}

static unsigned char *read_all(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *data = malloc((size_t)n + 1);
	if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
		free(data);
		data = NULL;
	}
	if (data)
		data[n] = '\0'; /* text files read as strings */
	fclose(f);
	*size = (size_t)n;
	return data;
}

/* CRC-32 as the model file has it, to forge files that pass the checksum but not the other checks. */
static uint32_t crc32(const unsigned char *p, size_t n)
{
	uint32_t crc = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		crc ^= p[i];
		for (int b = 0; b < 8; b++)
			crc = crc & 1 ? 0xedb88320u ^ (crc >> 1) : crc >> 1;
	}
	return ~crc;
}

static const char *write_bytes(const char *name, const unsigned char *data, size_t n, int fix_crc)
{
	unsigned char *copy = malloc(n + 1);
	if (!copy)
		return NULL;
	memcpy(copy, data, n);
	if (fix_crc && n >= 4) {
		uint32_t c = crc32(copy, n - 4);
		memcpy(copy + n - 4, &c, 4);
	}
	const char *path = testing_write_file(name, (const char *)copy, n);
	free(copy);
	return path;
}

/* Loading must fail with STARFA_EFORMAT and a message holding `expect`. */
static int rejects(const char *path, const char *expect)
{
	starfa_model *m = NULL;
	int rc = starfa_model_load(path, &m);
	CHECK_MSG(rc == STARFA_EFORMAT && m == NULL, "loading %s gave %d, not a format error", path, rc);
	CHECK_MSG(strstr(starfa_last_error(), expect) != NULL, "message '%s' lacks '%s'", starfa_last_error(), expect);
	return 0;
}

/* No temporary file left in the folder of path. */
static int no_temporary_files(const char *path)
{
	char dir[1024];
	snprintf(dir, sizeof dir, "%s", path);
	DIR *d = opendir(dirname(dir));
	CHECK(d);
	struct dirent *e;
	while ((e = readdir(d)))
		CHECK_MSG(strstr(e->d_name, ".tmp.") == NULL, "temporary file %s left behind", e->d_name);
	closedir(d);
	return 0;
}

/* ------------------------------------------------------------------ version 2 files, taken apart */

/* The offset of the header of section `tag` in a version-2 file (0 when it has none), its payload's
 * size in *bytes. */
static size_t find_section(const unsigned char *data, size_t size, const char *tag, uint64_t *bytes)
{
	for (size_t pos = 12; pos + 16 <= size - 4;) {
		uint64_t n;
		memcpy(&n, data + pos + 8, 8);
		if (memcmp(data + pos, tag, 4) == 0) {
			*bytes = n;
			return pos;
		}
		pos += 16 + n;
	}
	return 0;
}

/* A copy of data with the cut bytes at `at` replaced by the n bytes of insert (*size updated). */
static unsigned char *splice(const unsigned char *data, size_t *size, size_t at, size_t cut, const void *insert,
			     size_t n)
{
	unsigned char *out = malloc(*size - cut + n + 1);
	if (!out)
		return NULL;
	memcpy(out, data, at);
	if (n) /* insert may be NULL then */
		memcpy(out + at, insert, n);
	memcpy(out + at + n, data + at + cut, *size - at - cut);
	*size = *size - cut + n;
	return out;
}

/* A section of n payload bytes (all `fill`) as the file holds it, into buf (16 + n bytes). */
static size_t make_section(unsigned char *buf, const char *tag, size_t n, unsigned char fill)
{
	memcpy(buf, tag, 4);
	memset(buf + 4, 0, 4);
	uint64_t bytes = n;
	memcpy(buf + 8, &bytes, 8);
	memset(buf + 16, fill, n);
	return 16 + n;
}

/* Writes the spliced file (checksum fixed) and expects the load to fail with `expect`. */
static int rejects_spliced(const unsigned char *data, size_t size, size_t at, size_t cut, const void *insert,
			   size_t n, const char *expect)
{
	unsigned char *f = splice(data, &size, at, cut, insert, n);
	CHECK(f);
	int rc = rejects(write_bytes("spliced.bin", f, size, 1), expect);
	free(f);
	return rc;
}

TEST(model, save_load_round_trip)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 60;
	for (int algo = 0; algo < 2; algo++) {
		starfa_model *m = small_model((starfa_als_algo)algo, &rng), *back = NULL;
		CHECK(m);
		CHECK(m->kind == (algo ? STARFA_MODEL_IMPLICIT : STARFA_MODEL_EXPLICIT));
		CHECK(strcmp(m->algorithm, algo ? "ials" : "als") == 0);
		const char *path = testing_write_file("model.bin", "old", 3); /* saved over an existing file */
		CHECK_OK(starfa_model_save(m, path));
		size_t size = 0;
		unsigned char *data = read_all(path, &size);
		CHECK(data && size > 16 && memcmp(data, "STARFAMD\2\0\0\0HEAD", 16) == 0);
		free(data);
		CHECK_OK(starfa_model_load(path, &back));
		if (same_model(m, back))
			return 1;
		CHECK(starfa_model_predict(back, 3, 4) == starfa_model_predict(m, 3, 4));
		starfa_model_free(back);
		if (no_temporary_files(path))
			return 1;
		starfa_model_free(m);
	}
	return 0;
}

TEST(model, rejects_truncated_and_corrupt_files)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 61;
	starfa_model *m = small_model(STARFA_ALGO_ALS, &rng);
	CHECK(m);
	const char *path = testing_write_file("good.bin", "", 0);
	CHECK_OK(starfa_model_save(m, path));
	size_t size = 0;
	unsigned char *data = read_all(path, &size);
	CHECK(data && size > 200);
	/* Every length short of the whole. */
	for (size_t n = 0; n < size; n += n < 200 ? 1 : 1 + size / 97)
		if (rejects(write_bytes("cut.bin", data, n, 0), n < 8 ? "STARFAMD" : "truncated"))
			return 1;
	unsigned char *more = malloc(size + 64);
	CHECK(more);
	memcpy(more, data, size);
	more[size] = 0;
	if (rejects(write_bytes("long.bin", more, size + 1, 0), "too few for a section"))
		return 1;
	/* Any flipped bit: the checksum (or a check made before it, such as the version's) catches it. */
	for (int trial = 0; trial < 300; trial++) {
		memcpy(more, data, size);
		more[testing_below(&rng, size)] ^= (unsigned char)(1u << testing_below(&rng, 8));
		if (rejects(write_bytes("flip.bin", more, size, 0), "flip.bin: "))
			return 1;
	}

	/* Files whose checksum is right but whose contents are not. */
	uint64_t head_bytes = 0, n = 0;
	size_t head = find_section(data, size, "HEAD", &head_bytes);
	CHECK(head == 12 && head_bytes == 72);
	const size_t kind_at = head + 16, algorithm_at = kind_at + 4, flags_at = algorithm_at + 16;
	const size_t rank_at = flags_at + 4 + 16;
	uint32_t u32 = 3;
	if (rejects_spliced(data, size, 8, 4, &u32, 4, "version 3"))
		return 1;
	int64_t rank = 0;
	if (rejects_spliced(data, size, rank_at, 8, &rank, 8, "out of range"))
		return 1;
	u32 = 7;
	if (rejects_spliced(data, size, kind_at, 4, &u32, 4, "kind 7 is unknown"))
		return 1;
	u32 = STARFA_MODEL_IMPLICIT; /* an implicit model with biases */
	if (rejects_spliced(data, size, kind_at, 4, &u32, 4, "explicit models only"))
		return 1;
	if (rejects_spliced(data, size, algorithm_at, 16, "0123456789abcdef", 16, "algorithm name"))
		return 1;
	if (rejects_spliced(data, size, algorithm_at, 4, "a b", 4, "algorithm name"))
		return 1;
	u32 = 1 | 2 | 4;
	if (rejects_spliced(data, size, flags_at, 4, &u32, 4, "unknown flags 0x7"))
		return 1;
	u32 = 1; /* no seen entries, but a SEEN section */
	if (rejects_spliced(data, size, flags_at, 4, &u32, 4, "SEEN is present"))
		return 1;
	u32 = 1;
	if (rejects_spliced(data, size, head + 4, 4, &u32, 4, "reserved"))
		return 1;
	/* A HEAD 8 bytes longer than a HEAD is. */
	uint64_t longer = head_bytes + 8;
	unsigned char zeros[8] = {0};
	unsigned char *f = splice(data, &(size_t){size}, head + 16 + head_bytes, 0, zeros, 8);
	CHECK(f);
	if (rejects_spliced(f, size + 8, head + 8, 8, &longer, 8, "section HEAD holds 80 bytes"))
		return 1;
	free(f);
	/* The first user id: "user0" -> "user1", a duplicate of another user's. */
	size_t uids = find_section(data, size, "UIDS", &n);
	CHECK(uids && memcmp(data + uids + 16, "user0", 6) == 0);
	if (rejects_spliced(data, size, uids + 16 + 4, 1, "1", 1, "duplicate"))
		return 1;
	/* A NaN in the user factors. */
	size_t ufac = find_section(data, size, "UFAC", &n);
	CHECK(ufac && n == (uint64_t)(m->nusers * m->rank) * 4);
	float nan = NAN;
	if (rejects_spliced(data, size, ufac + 16 + 4, 4, &nan, 4, "non-finite"))
		return 1;
	/* The user factors one float short (and the section's size saying so). */
	uint64_t shorter = n - 4;
	f = splice(data, &(size_t){size}, ufac + 16, 4, NULL, 0);
	CHECK(f);
	if (rejects_spliced(f, size - 4, ufac + 8, 8, &shorter, 8, "section UFAC holds"))
		return 1;
	free(f);
	/* A seen item out of range, in the last entry (SEEN is the last section). */
	int32_t bad_item = (int32_t)m->nitems;
	if (rejects_spliced(data, size, size - 8, 4, &bad_item, 4, "seen"))
		return 1;
	size_t seen = find_section(data, size, "SEEN", &n);
	int64_t count = -1;
	CHECK(seen && seen + 16 + n == size - 4);
	if (rejects_spliced(data, size, seen + 16, 8, &count, 8, "count of entries"))
		return 1;

	/* Sections: an unknown one (a newer starfa's) is refused by name; one whose tag begins with a
	 * lowercase letter is optional, and skipped. */
	unsigned char extra[16 + 12];
	size_t extra_n = make_section(extra, "ZZZZ", 12, 0x5a);
	if (rejects_spliced(data, size, size - 4, 0, extra, extra_n, "unknown section 'ZZZZ'") ||
	    rejects_spliced(data, size, size - 4, 0, extra, extra_n, "newer starfa"))
		return 1;
	extra_n = make_section(extra, "z\x01yz", 12, 0x5a);
	size_t opt_size = size;
	f = splice(data, &opt_size, head + 16 + head_bytes, 0, extra, extra_n); /* between HEAD and UIDS */
	CHECK(f);
	starfa_model *back = NULL;
	CHECK_OK(starfa_model_load(write_bytes("optional.bin", f, opt_size, 1), &back));
	free(f);
	if (same_model(m, back))
		return 1;
	starfa_model_free(back);
	/* A tag that is not text is named with escapes. */
	extra_n = make_section(extra, "\x01XYZ", 0, 0);
	if (rejects_spliced(data, size, size - 4, 0, extra, extra_n, "'\\x01XYZ'"))
		return 1;
	/* HEAD twice. */
	if (rejects_spliced(data, size, size - 4, 0, data + head, 16 + head_bytes, "HEAD appears twice"))
		return 1;
	/* A required section hidden behind a lowercase tag is missing, and so are biases the flags promise. */
	size_t ifac = find_section(data, size, "IFAC", &n);
	CHECK(ifac);
	if (rejects_spliced(data, size, ifac, 4, "ifac", 4, "section IFAC is missing"))
		return 1;
	size_t ibia = find_section(data, size, "IBIA", &n);
	CHECK(ibia);
	if (rejects_spliced(data, size, ibia, 4, "ibia", 4, "IBIA is missing, but the header says the model has biases"))
		return 1;

	if (rejects(testing_write_file("text.bin", "userId,movieId\n1,2\n", 19), "STARFAMD"))
		return 1;
	if (rejects(testing_write_file("short.bin", "STARFAMD\2\0\0", 11), "truncated"))
		return 1;
	starfa_model *none = NULL;
	CHECK(starfa_model_load("/nonexistent/starfa/model.bin", &none) == STARFA_EIO && none == NULL);
	/* Saving where no file can be created fails cleanly. */
	CHECK(starfa_model_save(m, "/nonexistent/starfa/model.bin") == STARFA_EIO);
	CHECK(strstr(starfa_last_error(), "/nonexistent/starfa/model.bin") != NULL);
	free(more);
	free(data);
	starfa_model_free(m);
	return 0;
}

/* ------------------------------------------------------------------ version 1 files */

struct bytes {
	unsigned char *p;
	size_t n;
};

static void add(struct bytes *b, const void *data, size_t n)
{
	memcpy(b->p + b->n, data, n);
	b->n += n;
}

/* A version-1 file of m, as starfa 0.1 wrote them (model/model.c describes the layout), keeping only
 * the parts in `flags` (bit 0 biases, bit 1 seen entries). m is an ALS (algo 0) or implicit ALS model. */
static struct bytes version1_file(const starfa_model *m, uint32_t algo, uint32_t flags)
{
	const int64_t U = m->nusers, I = m->nitems, F = m->rank;
	int64_t user_bytes = 0, item_bytes = 0, seen = (flags & 2) ? m->seen->nnz : 0;
	for (int64_t u = 0; u < U; u++)
		user_bytes += (int64_t)strlen(starfa_idmap_name(m->user_ids, u)) + 1;
	for (int64_t i = 0; i < I; i++)
		item_bytes += (int64_t)strlen(starfa_idmap_name(m->item_ids, i)) + 1;
	struct bytes b = {malloc((size_t)(96 + user_bytes + item_bytes + 4 * (U + I) * (F + 1) + 8 * (U + 1) + 4 * seen +
					  4)),
			  0};
	if (!b.p)
		return b;
	uint32_t version = 1, reserved = 0;
	add(&b, "STARFAMD", 8);
	add(&b, &version, 4);
	add(&b, &algo, 4);
	add(&b, &flags, 4);
	add(&b, &reserved, 4);
	add(&b, &U, 8);
	add(&b, &I, 8);
	add(&b, &F, 8);
	add(&b, &m->global_mean, 8);
	add(&b, &m->lambda, 8);
	add(&b, &m->alpha, 8);
	add(&b, &seen, 8);
	add(&b, &user_bytes, 8);
	add(&b, &item_bytes, 8);
	for (int64_t u = 0; u < U; u++)
		add(&b, starfa_idmap_name(m->user_ids, u), strlen(starfa_idmap_name(m->user_ids, u)) + 1);
	for (int64_t i = 0; i < I; i++)
		add(&b, starfa_idmap_name(m->item_ids, i), strlen(starfa_idmap_name(m->item_ids, i)) + 1);
	add(&b, m->user_factors, sizeof(float) * (size_t)(U * F));
	add(&b, m->item_factors, sizeof(float) * (size_t)(I * F));
	if (flags & 1) {
		add(&b, m->user_bias, sizeof(float) * (size_t)U);
		add(&b, m->item_bias, sizeof(float) * (size_t)I);
	}
	if (flags & 2) {
		add(&b, m->seen->rowptr, sizeof(int64_t) * (size_t)(U + 1));
		add(&b, m->seen->colind, sizeof(int32_t) * (size_t)seen);
	}
	uint32_t c = crc32(b.p, b.n);
	add(&b, &c, 4);
	return b;
}

TEST(model, loads_version_1_files)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 63;
	for (int algo = 0; algo < 2; algo++) {
		starfa_model *m = small_model((starfa_als_algo)algo, &rng), *back = NULL;
		CHECK(m && (m->user_bias != NULL) == (algo == 0) && m->seen);
		/* Every part the model has (implicit ALS: no biases), then neither biases nor seen entries. */
		const uint32_t parts[2] = {m->user_bias ? 3u : 2u, 0u};
		for (int v = 0; v < 2; v++) {
			const uint32_t flags = parts[v];
			struct bytes b = version1_file(m, (uint32_t)algo, flags);
			CHECK(b.p);
			CHECK_OK(starfa_model_load(write_bytes("v1.bin", b.p, b.n, 0), &back));
			/* Version 1's algorithm 0 is an explicit ALS model, 1 an implicit ALS one. */
			CHECK(back->kind == (algo ? STARFA_MODEL_IMPLICIT : STARFA_MODEL_EXPLICIT));
			CHECK(strcmp(back->algorithm, algo ? "ials" : "als") == 0);
			starfa_model expect = *m;
			if (!(flags & 1))
				expect.user_bias = expect.item_bias = NULL;
			if (!(flags & 2))
				expect.seen = NULL;
			if (same_model(&expect, back))
				return 1;
			/* Saved again, it is a version-2 file of the same model. */
			const char *path = testing_write_file("v1-again.bin", "", 0);
			starfa_model *again = NULL;
			CHECK_OK(starfa_model_save(back, path));
			CHECK_OK(starfa_model_load(path, &again));
			if (same_model(back, again))
				return 1;
			starfa_model_free(again);
			starfa_model_free(back);
			back = NULL;
			/* Cut, or with an unknown algorithm, a version-1 file is refused as before. */
			if (rejects(write_bytes("v1-cut.bin", b.p, b.n - 5, 0), "truncated") ||
			    rejects(write_bytes("v1-cut.bin", b.p, 50, 0), "truncated inside the header"))
				return 1;
			uint32_t two = 2;
			memcpy(b.p + 12, &two, 4);
			if (rejects(write_bytes("v1-algo.bin", b.p, b.n, 1), "unknown algorithm 2"))
				return 1;
			memcpy(b.p + 12, &algo, 4);
			b.p[100] ^= 1;
			if (rejects(write_bytes("v1-flip.bin", b.p, b.n, 0), "checksum"))
				return 1;
			free(b.p);
		}
		starfa_model_free(m);
	}
	return 0;
}

/* ------------------------------------------------------------------ kinds */

TEST(model, kinds_decide_scoring_and_evaluation)
{
	CHECK(strcmp(starfa_model_kind_name(STARFA_MODEL_EXPLICIT), "explicit") == 0);
	CHECK(strcmp(starfa_model_kind_name(STARFA_MODEL_IMPLICIT), "implicit") == 0);
	CHECK(strcmp(starfa_model_kind_name(STARFA_MODEL_NONNEG), "nonneg") == 0);
	CHECK(strcmp(starfa_model_kind_name(STARFA_MODEL_TOPIC), "topic") == 0);
	CHECK(strcmp(starfa_model_kind_name((starfa_model_kind)STARFA_MODEL_KINDS), "unknown") == 0);
	/* A non-negative model S ~ W·Hᵀ, 2 users and 3 items of rank 2, without ids. */
	float W[4] = {1, 2, 0.5f, 0}, H[6] = {1, 0, 0, 1, 2, 1};
	starfa_model n = {.kind = STARFA_MODEL_NONNEG, .algorithm = "gap", .nusers = 2, .nitems = 3, .rank = 2,
			  .user_factors = W, .item_factors = H, .global_mean = 3.0};
	/* W·Hᵀ alone: no mean (even one set by mistake), no biases. */
	CHECK(starfa_model_predict(&n, 0, 2) == 4.0f && starfa_model_predict(&n, 1, 0) == 0.5f);
	CHECK(starfa_model_predict(&n, -1, 0) == 0.0f);
	starfa_coo *test = starfa_coo_new(2, 3, 3);
	CHECK(test);
	test->row[0] = 0, test->col[0] = 2, test->val[0] = 5;   /* predicts 4 */
	test->row[1] = 1, test->col[1] = 0, test->val[1] = 0.5f; /* predicts 0.5 */
	test->row[2] = 1, test->col[2] = 1, test->val[2] = 1;   /* predicts 0 */
	test->nnz = 3;
	starfa_metrics r;
	CHECK_OK(starfa_eval(&n, test, 10, &r));
	CHECK(r.entries == 3 && fabs(r.rmse - sqrt(2.0 / 3.0)) < 1e-6 && isnan(r.precision) && isnan(r.ndcg));
	/* Recommended by score: items 2, 1, 0 for user 0 (scores 4, 2, 1). */
	starfa_recommendation recs[3];
	int64_t got = 0;
	CHECK_OK(starfa_recommend(&n, 0, 3, NULL, recs, &got));
	CHECK(got == 3 && recs[0].item == 2 && recs[1].item == 1 && recs[2].item == 0 && recs[0].score == 4.0f);
	/* The model file keeps the kind and the algorithm; a mean or biases are refused outside explicit
	 * models. */
	const char *path = testing_write_file("nonneg.bin", "", 0);
	CHECK(starfa_model_save(&n, path) == STARFA_EINVAL && strstr(starfa_last_error(), "explicit models only"));
	n.global_mean = 0;
	float ub[2] = {0}, ib[3] = {0};
	n.user_bias = ub, n.item_bias = ib;
	CHECK(starfa_model_save(&n, path) == STARFA_EINVAL && strstr(starfa_last_error(), "nonneg model"));
	n.user_bias = n.item_bias = NULL;
	starfa_model *back = NULL;
	CHECK_OK(starfa_model_save(&n, path));
	CHECK_OK(starfa_model_load(path, &back));
	if (same_model(&n, back))
		return 1;
	CHECK(strcmp(starfa_idmap_name(back->user_ids, 1), "2") == 0);
	starfa_model_free(back);
	/* A topic model: recommendations by score, evaluation refused (perplexity comes later). */
	starfa_model t = n;
	t.kind = STARFA_MODEL_TOPIC;
	snprintf(t.algorithm, sizeof t.algorithm, "lda");
	CHECK(starfa_eval(&t, test, 10, &r) == STARFA_EINVAL);
	CHECK_MSG(strstr(starfa_last_error(), "topic models are evaluated by perplexity, which this build does not "
					      "support yet"),
		  "message: %s", starfa_last_error());
	CHECK_OK(starfa_recommend(&t, 0, 1, NULL, recs, &got));
	CHECK(got == 1 && recs[0].item == 2);
	CHECK_OK(starfa_model_save(&t, path));
	CHECK_OK(starfa_model_load(path, &back));
	if (same_model(&t, back))
		return 1;
	starfa_model_free(back);
	/* What no file may hold: an unknown kind, an algorithm name that is empty, not one word or too long. */
	t.kind = (starfa_model_kind)STARFA_MODEL_KINDS;
	CHECK(starfa_model_save(&t, path) == STARFA_EINVAL);
	t.kind = STARFA_MODEL_TOPIC;
	const char *bad_names[] = {"", "two words", "tab\there"};
	for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
		snprintf(t.algorithm, sizeof t.algorithm, "%s", bad_names[i]);
		CHECK(starfa_model_save(&t, path) == STARFA_EINVAL && strstr(starfa_last_error(), "algorithm name"));
	}
	memset(t.algorithm, 'x', sizeof t.algorithm); /* no NUL */
	CHECK(starfa_model_save(&t, path) == STARFA_EINVAL);
	starfa_coo_free(test);
	return 0;
}

/* ------------------------------------------------------------------ export */

/* Reads an export back: each line's id must be the side's id of its index, then `cols` values, parsed
 * into out (rows x cols, poisoned first so that a value missing stays NaN). */
static int parse_export(const char *path, const starfa_idmap *ids, int64_t rows, int64_t cols, float *out)
{
	size_t size = 0;
	char *text = (char *)read_all(path, &size);
	CHECK_MSG(text, "cannot read %s", path);
	testing_poison(out, (size_t)(rows * cols));
	char *p = text, id[32];
	for (int64_t r = 0; r < rows; r++) {
		char *tab = strchr(p, '\t');
		CHECK_MSG(tab, "line %lld of %s has no tab", (long long)r + 1, path);
		*tab = '\0';
		CHECK_MSG(strcmp(p, side_id(ids, r, id)) == 0, "line %lld: id '%s', not '%s'", (long long)r + 1, p, id);
		*tab = '\t';
		p = tab;
		for (int64_t d = 0; d < cols; d++) {
			CHECK_MSG(*p == '\t', "line %lld: value %lld not after a tab", (long long)r + 1, (long long)d + 1);
			char *end;
			out[r * cols + d] = strtof(p + 1, &end);
			CHECK(end > p + 1);
			p = end;
		}
		CHECK_MSG(*p == '\n', "line %lld has more than %lld values", (long long)r + 1, (long long)cols);
		p++;
	}
	CHECK_MSG(*p == '\0' && (size_t)(p - text) == size, "%s has more than %lld lines", path, (long long)rows);
	free(text);
	return 0;
}

TEST(model, export_round_trip)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 64;
	char path[1024];
	snprintf(path, sizeof path, "%s", testing_write_file("export.tsv", "old", 3)); /* replaced */
	for (int algo = 0; algo < 2; algo++) {
		starfa_model *m = small_model((starfa_als_algo)algo, &rng);
		CHECK(m);
		for (int what = 0; what < 4; what++) {
			starfa_export_what w = (starfa_export_what)what, parsed;
			CHECK(starfa_export_parse(starfa_export_name(w), &parsed) == 0 && parsed == w);
			const int users = what == STARFA_EXPORT_USER_FACTORS || what == STARFA_EXPORT_USER_BIAS;
			const int bias = what >= STARFA_EXPORT_USER_BIAS;
			const float *want = bias ? (users ? m->user_bias : m->item_bias)
						 : (users ? m->user_factors : m->item_factors);
			const int64_t rows = users ? m->nusers : m->nitems, cols = bias ? 1 : m->rank;
			if (!want) {
				/* An implicit model has no biases: refused, and nothing written. */
				unlink(path);
				CHECK(starfa_model_export(m, w, path) == STARFA_EINVAL);
				CHECK_MSG(strstr(starfa_last_error(), users ? "no user biases" : "no item biases"), "message: %s",
					  starfa_last_error());
				CHECK(access(path, F_OK) != 0 && errno == ENOENT);
				continue;
			}
			CHECK_OK(starfa_model_export(m, w, path));
			float *got = malloc(sizeof(float) * (size_t)(rows * cols));
			CHECK(got);
			if (parse_export(path, users ? m->user_ids : m->item_ids, rows, cols, got))
				return 1;
			/* %.9g gives each float back exactly; NaN (a value not written) never compares equal. */
			for (int64_t e = 0; e < rows * cols; e++)
				CHECK_MSG(got[e] == want[e], "%s value %lld: %.9g read back, %.9g in the model",
					  starfa_export_name(w), (long long)e, got[e], want[e]);
			free(got);
		}
		/* A model holding a NaN exports nothing, and what was there stays. */
		testing_write_file("export.tsv", "old", 3);
		float keep = m->item_factors[5];
		m->item_factors[5] = NAN;
		CHECK(starfa_model_export(m, STARFA_EXPORT_ITEM_FACTORS, path) == STARFA_EINVAL);
		CHECK_MSG(strstr(starfa_last_error(), "non-finite"), "message: %s", starfa_last_error());
		m->item_factors[5] = keep;
		size_t size = 0;
		unsigned char *old = read_all(path, &size);
		CHECK(old && size == 3 && memcmp(old, "old", 3) == 0);
		free(old);
		/* Nowhere to write: an I/O error naming the path. */
		CHECK(starfa_model_export(m, STARFA_EXPORT_USER_FACTORS, "/nonexistent/starfa/x.tsv") == STARFA_EIO);
		CHECK(strstr(starfa_last_error(), "/nonexistent/starfa/x.tsv"));
		if (no_temporary_files(path))
			return 1;
		starfa_model_free(m);
	}
	/* Without ids the lines begin with the index from 1. */
	float W[4] = {1, 2, 0.5f, 0}, H[6] = {1, 0, 0, 1, 2, 1}, got[6];
	starfa_model n = {.kind = STARFA_MODEL_NONNEG, .algorithm = "gap", .nusers = 2, .nitems = 3, .rank = 2,
			  .user_factors = W, .item_factors = H};
	CHECK_OK(starfa_model_export(&n, STARFA_EXPORT_ITEM_FACTORS, path));
	if (parse_export(path, NULL, 3, 2, got))
		return 1;
	CHECK(memcmp(got, H, sizeof H) == 0);
	starfa_export_what w;
	CHECK(starfa_export_parse("factors", &w) == -1 && starfa_export_parse("User-Factors", &w) == -1);
	CHECK(strcmp(starfa_export_name((starfa_export_what)6), "unknown") == 0);
	CHECK(starfa_model_export(&n, (starfa_export_what)6, path) == STARFA_EINVAL);
	return 0;
}

TEST(model, recommend_leaves_out_seen_items)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 62;
	for (int algo = 0; algo < 2; algo++) {
		starfa_model *m = small_model((starfa_als_algo)algo, &rng);
		CHECK(m);
		starfa_recommendation *recs = malloc(sizeof *recs * (size_t)(m->nitems + 5));
		CHECK(recs);
		for (int64_t u = 0; u < m->nusers; u++) {
			int64_t n = 0, nseen = m->seen->rowptr[u + 1] - m->seen->rowptr[u];
			CHECK_OK(starfa_recommend(m, u, m->nitems + 5, m->seen, recs, &n));
			CHECK(n == m->nitems - nseen);
			for (int64_t i = 0; i < n; i++) {
				for (int64_t p = m->seen->rowptr[u]; p < m->seen->rowptr[u + 1]; p++)
					CHECK(m->seen->colind[p] != recs[i].item);
				CHECK(recs[i].score == starfa_model_predict(m, u, recs[i].item));
				CHECK(i == 0 || recs[i - 1].score >= recs[i].score);
			}
			CHECK_OK(starfa_recommend(m, u, 3, NULL, recs, &n));
			CHECK(n == 3);
		}
		/* A user the model does not know: the best item biases, or the most seen items. */
		int64_t n = 0;
		CHECK_OK(starfa_recommend(m, -1, 5, m->seen, recs, &n));
		CHECK(n == 5);
		for (int64_t i = 1; i < n; i++)
			CHECK(recs[i - 1].score >= recs[i].score);
		if (algo == STARFA_ALGO_ALS)
			CHECK(recs[0].score == starfa_model_predict(m, -1, recs[0].item));
		/* ... leaving out the items of a one-row exclusion: the same scores, less the first two (ties
		 * may come in another order, so scores are compared). */
		int32_t out_items[2] = {(int32_t)(recs[0].item < recs[1].item ? recs[0].item : recs[1].item),
					(int32_t)(recs[0].item < recs[1].item ? recs[1].item : recs[0].item)};
		int64_t out_rowptr[2] = {0, 2};
		float best[3] = {recs[2].score, recs[3].score, recs[4].score};
		starfa_csr one = {1, m->nitems, 2, out_rowptr, out_items, NULL};
		CHECK_OK(starfa_recommend(m, -1, 3, &one, recs, &n));
		CHECK(n == 3);
		for (int64_t i = 0; i < n; i++)
			CHECK(recs[i].score == best[i] && recs[i].item != out_items[0] && recs[i].item != out_items[1]);
		one.ncols = m->nitems + 1;
		CHECK(starfa_recommend(m, -1, 3, &one, recs, &n) == STARFA_EINVAL);
		CHECK(starfa_recommend(m, 0, 3, &one, recs, &n) == STARFA_EINVAL || m->nusers == 1);
		CHECK(starfa_recommend(m, m->nusers, 5, NULL, recs, &n) == STARFA_EINVAL);
		free(recs);
		starfa_model_free(m);
	}
	return 0;
}

/* The ranking metrics on a case worked by hand, as PyPI implicit's ranking_metrics_at_k counts them. */
TEST(model, ranking_metrics_by_hand)
{
	/* One user, five items scored 5, 4, 3, 2, 1 (factor 1 times item factors); item 0 seen in training. */
	float uf[1] = {1}, itf[5] = {5, 4, 3, 2, 1};
	int64_t rowptr[2] = {0, 1};
	int32_t colind[1] = {0};
	float val[1] = {1};
	starfa_csr seen = {1, 5, 1, rowptr, colind, val};
	starfa_model m = {.kind = STARFA_MODEL_IMPLICIT, .algorithm = "ials", .nusers = 1, .nitems = 5, .rank = 1,
			  .user_factors = uf, .item_factors = itf, .seen = &seen};
	/* Test items 2 and 4: the ranking (training item 0 left out) is 1, 2, 3 at k = 3: one hit at rank 2. */
	starfa_coo *test = starfa_coo_new(1, 5, 2);
	CHECK(test);
	test->row[0] = 0, test->col[0] = 2, test->val[0] = 1;
	test->row[1] = 0, test->col[1] = 4, test->val[1] = 1;
	test->nnz = 2;
	starfa_metrics r;
	CHECK_OK(starfa_eval(&m, test, 3, &r));
	CHECK(r.users == 1 && r.entries == 2 && r.cold == 2); /* items 2 and 4 have no training entries */
	CHECK(fabs(r.precision - 1.0 / 2.0) < 1e-12);                                 /* 1 hit / min(3, 2) */
	CHECK(fabs(r.map - (1.0 / 2.0) / 2.0) < 1e-12);                               /* (1/2) / min(3, 2) */
	CHECK(fabs(r.ndcg - (1.0 / log2(3.0)) / (1.0 + 1.0 / log2(3.0))) < 1e-12);
	/* An unknown item in the test set is left out; the explicit RMSE of a hand model. */
	starfa_coo_free(test);
	float ub[1] = {0.5f}, ib[5] = {0, 0.25f, 0, 0, 0};
	starfa_model e = {.kind = STARFA_MODEL_EXPLICIT, .algorithm = "als", .nusers = 1, .nitems = 5, .rank = 1,
			  .user_factors = uf, .item_factors = itf, .user_bias = ub, .item_bias = ib, .global_mean = 3.0};
	test = starfa_coo_new(2, 5, 2);
	CHECK(test);
	test->row[0] = 0, test->col[0] = 1, test->val[0] = 8; /* predicts 3 + 0.5 + 0.25 + 4 = 7.75 */
	test->row[1] = 1, test->col[1] = 3, test->val[1] = 3; /* unknown user: 3 + 0 = 3 */
	test->nnz = 2;
	CHECK_OK(starfa_eval(&e, test, 10, &r));
	CHECK(r.cold == 1 && fabs(r.rmse - sqrt((0.25 * 0.25 + 0.0) / 2.0)) < 1e-6 && isnan(r.precision));
	starfa_coo_free(test);
	return 0;
}

/* Scores best first, ties by the lower item (starfa_cpu_top_k's order). */
static int by_rank(const void *a, const void *b)
{
	const struct scored *x = a, *y = b;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return (x->item > y->item) - (x->item < y->item);
}

/* starfa_cpu_top_k against a full sort of the scores, on lists of every length around the blocks it tests at
 * once (32), with many ties, NaNs and -inf, excluded items, and k from 1 to past the list: the same items
 * in the same order (ties: the lower index first). */
TEST(model, top_k_matches_a_full_sort)
{
	uint64_t rng = testing_seed() + 733;
	enum { MAXN = 200 };
	float scores[MAXN];
	int32_t excluded[MAXN];
	struct scored heap[MAXN + 3], all[MAXN];
	for (int trial = 0; trial < 600; trial++) {
		const int64_t n = 1 + (int64_t)testing_below(&rng, MAXN), k = 1 + (int64_t)testing_below(&rng, (uint64_t)n + 2);
		const int levels = 1 + (int)testing_below(&rng, 4); /* a third of the trials: few levels, ties */
		int64_t nex = 0, nall = 0;
		for (int64_t i = 0; i < n; i++) {
			const uint64_t r = testing_below(&rng, 100);
			scores[i] = r < 3	     ? NAN
				    : r < 5	     ? -INFINITY
				    : trial % 3 == 0 ? (float)testing_below(&rng, (uint64_t)levels) - levels / 2.0f
						     : (float)(10 * testing_uniform(&rng) - 5);
			if (testing_below(&rng, 5) == 0)
				excluded[nex++] = (int32_t)i;
			else if (!isnan(scores[i]))
				all[nall++] = (struct scored){scores[i], (int32_t)i};
		}
		qsort(all, (size_t)nall, sizeof *all, by_rank);
		const int64_t got = starfa_cpu_top_k(scores, n, k, excluded, nex, heap);
		CHECK_MSG(got == (nall < k ? nall : k), "trial %d: %lld kept of %lld, k %lld", trial, (long long)got,
			  (long long)nall, (long long)k);
		for (int64_t i = 0; i < got; i++)
			CHECK_MSG(heap[i].item == all[i].item && heap[i].score == all[i].score,
				  "trial %d (n %lld, k %lld): place %lld holds item %d, the sort has %d", trial, (long long)n,
				  (long long)k, (long long)i, heap[i].item, all[i].item);
	}
	CHECK(starfa_cpu_top_k(scores, 5, 0, NULL, 0, heap) == 0);
	return 0;
}

/* The metrics' loops run in chunks on the CPU workers when StarPU runs, on the host's threads when it does
 * not: the same numbers to the bit (partial sums added in chunk order), over enough users and entries
 * for every chunk to count, and the ranking metrics equal to a plain serial count of the same model. */
TEST(model, metrics_same_on_workers_and_host)
{
	enum { U = 700, I = 300, R = 8, N = 6000 };
	uint64_t rng = testing_seed() + 716;
	float *uf = malloc(sizeof(float) * U * R), *itf = malloc(sizeof(float) * I * R);
	CHECK(uf && itf);
	testing_fill_random(uf, U * R, &rng);
	testing_fill_random(itf, I * R, &rng);
	/* training entries: 0-3 items a user (users without any are cold, as are items nobody has), left out
	 * of the users' rankings */
	int64_t rowptr[U + 1];
	int32_t colind[3 * U];
	float ones[3 * U];
	char item_seen[I] = {0};
	rowptr[0] = 0;
	for (int64_t u = 0; u < U; u++) {
		int64_t n = (int64_t)testing_below(&rng, 4), p = rowptr[u];
		for (int64_t j = 0; j < n; j++) {
			int32_t i = (int32_t)testing_below(&rng, I / 2); /* items I/2.. have no training entries */
			int dup = 0;
			for (int64_t q = rowptr[u]; q < p; q++)
				dup |= colind[q] == i;
			if (!dup)
				colind[p] = i, ones[p] = 1, item_seen[i] = 1, p++;
		}
		for (int64_t q = rowptr[u] + 1; q < p; q++) /* a CSR row's columns are sorted */
			for (int64_t z = q; z > rowptr[u] && colind[z - 1] > colind[z]; z--) {
				int32_t t = colind[z];
				colind[z] = colind[z - 1];
				colind[z - 1] = t;
			}
		rowptr[u + 1] = p;
	}
	starfa_csr seen = {U, I, rowptr[U], rowptr, colind, ones};
	starfa_model m = {.kind = STARFA_MODEL_IMPLICIT, .algorithm = "ials", .nusers = U, .nitems = I, .rank = R,
			  .user_factors = uf, .item_factors = itf, .seen = &seen};
	starfa_coo *test = starfa_coo_new(U, I, N);
	CHECK(test);
	for (int64_t e = 0; e < N; e++) {
		test->row[e] = (int32_t)testing_below(&rng, U);
		test->col[e] = (int32_t)testing_below(&rng, I);
		test->val[e] = (float)(1 + testing_below(&rng, 5));
	}
	test->nnz = N;
	starfa_metrics r[2], x[2];
	for (int run = 0; run < 2; run++) {
		if (run == 0)
			testing_runtime_stop();
		else
			CHECK_OK(testing_runtime_cpus(2));
		starfa_stats_reset();
		m.kind = STARFA_MODEL_IMPLICIT;
		CHECK_OK(starfa_eval(&m, test, 10, &r[run]));
		m.kind = STARFA_MODEL_EXPLICIT;
		CHECK_OK(starfa_eval(&m, test, 10, &x[run]));
		if (run == 1) { /* the chunks ran as tasks on the CPU workers: one a worker or more in each of the
				 * seven loops (each evaluation's two of the cold count, the implicit one's grouping
				 * of the test items by user, each one's metric) */
			starfa_worker_stats st;
			starfa_stats_get(&st);
			CHECK_MSG(st.tasks[STARFA_WORKER_CPU] >= 7, "%lld tasks on the CPU workers",
				  (long long)st.tasks[STARFA_WORKER_CPU]);
		}
	}
	CHECK_MSG(r[0].precision == r[1].precision && r[0].map == r[1].map && r[0].ndcg == r[1].ndcg &&
			  r[0].users == r[1].users && x[0].rmse == x[1].rmse && r[0].cold == r[1].cold &&
			  x[0].cold == r[0].cold,
		  "host p@10 %.17g map %.17g ndcg %.17g rmse %.17g, workers %.17g %.17g %.17g %.17g", r[0].precision,
		  r[0].map, r[0].ndcg, x[0].rmse, r[1].precision, r[1].map, r[1].ndcg, x[1].rmse);
	/* precision by a plain count: per user with test items, hits among its top 10 over min(10, distinct) */
	double hits = 0, div = 0, sq = 0;
	int64_t users = 0;
	for (int64_t u = 0; u < U; u++) {
		char liked[I] = {0};
		int64_t distinct = 0;
		for (int64_t e = 0; e < N; e++)
			if (test->row[e] == u && !liked[test->col[e]])
				liked[test->col[e]] = 1, distinct++;
		if (distinct == 0)
			continue;
		users++;
		double score[I];
		for (int64_t i = 0; i < I; i++) {
			score[i] = 0;
			for (int64_t d = 0; d < R; d++)
				score[i] += (double)uf[u * R + d] * itf[i * R + d];
		}
		for (int64_t q = rowptr[u]; q < rowptr[u + 1]; q++)
			score[colind[q]] = -INFINITY; /* seen in training: not ranked */
		for (int t = 0; t < 10; t++) { /* the t-th best item (ties to the lower index) */
			int64_t best = -1;
			for (int64_t i = 0; i < I; i++)
				if (score[i] > -INFINITY && (best < 0 || score[i] > score[best]))
					best = i;
			hits += liked[best];
			score[best] = -INFINITY;
		}
		div += distinct < 10 ? (double)distinct : 10.0;
	}
	int64_t cold = 0;
	for (int64_t e = 0; e < N; e++) {
		cold += rowptr[test->row[e] + 1] == rowptr[test->row[e]] || !item_seen[test->col[e]];
		double p = 0;
		for (int64_t d = 0; d < R; d++)
			p += (double)uf[test->row[e] * R + d] * itf[test->col[e] * R + d];
		sq += (p - test->val[e]) * (p - test->val[e]);
	}
	/* float scores against double ones: a near tie at the 10th place may swap one item (one hit) */
	CHECK_MSG(r[1].users == users && fabs(r[1].precision - hits / div) <= 1.0 / div + 1e-12,
		  "users %lld / %lld, p@10 %.9g / %.9g", (long long)r[1].users, (long long)users, r[1].precision,
		  hits / div);
	CHECK_MSG(fabs(x[1].rmse - sqrt(sq / N)) < 1e-5 * sqrt(sq / N), "rmse %.9g, plain %.9g", x[1].rmse, sqrt(sq / N));
	CHECK_MSG(r[1].cold == cold && cold > 0 && cold < N, "cold %lld, plain %lld", (long long)r[1].cold, (long long)cold);
	starfa_coo_free(test);
	free(uf);
	free(itf);
	CHECK_OK(testing_runtime());
	return 0;
}
