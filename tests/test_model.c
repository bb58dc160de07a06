/* Models: the file round trip, rejection of truncated and corrupt files, recommendations and metrics. */
#include "als_testing.h"

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

static int same_model(const starfa_model *a, const starfa_model *b)
{
	CHECK(a->algo == b->algo && a->nusers == b->nusers && a->nitems == b->nitems && a->rank == b->rank);
	CHECK(a->global_mean == b->global_mean && a->lambda == b->lambda && a->alpha == b->alpha);
	CHECK(memcmp(a->user_factors, b->user_factors, sizeof(float) * (size_t)(a->nusers * a->rank)) == 0);
	CHECK(memcmp(a->item_factors, b->item_factors, sizeof(float) * (size_t)(a->nitems * a->rank)) == 0);
	CHECK((a->user_bias == NULL) == (b->user_bias == NULL));
	if (a->user_bias) {
		CHECK(memcmp(a->user_bias, b->user_bias, sizeof(float) * (size_t)a->nusers) == 0);
		CHECK(memcmp(a->item_bias, b->item_bias, sizeof(float) * (size_t)a->nitems) == 0);
	}
	for (int64_t u = 0; u < a->nusers; u++)
		CHECK(strcmp(starfa_idmap_name(a->user_ids, u), starfa_idmap_name(b->user_ids, u)) == 0);
	for (int64_t i = 0; i < a->nitems; i++)
		CHECK(strcmp(starfa_idmap_name(a->item_ids, i), starfa_idmap_name(b->item_ids, i)) == 0);
	CHECK(a->seen && b->seen && a->seen->nnz == b->seen->nnz);
	CHECK(memcmp(a->seen->rowptr, b->seen->rowptr, sizeof(int64_t) * (size_t)(a->nusers + 1)) == 0);
	CHECK(memcmp(a->seen->colind, b->seen->colind, sizeof(int32_t) * (size_t)a->seen->nnz) == 0);
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

TEST(model, save_load_round_trip)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 60;
	for (int algo = 0; algo < 2; algo++) {
		starfa_model *m = small_model((starfa_als_algo)algo, &rng), *back = NULL;
		CHECK(m);
		const char *path = testing_write_file("model.bin", "old", 3); /* saved over an existing file */
		CHECK_OK(starfa_model_save(m, path));
		CHECK_OK(starfa_model_load(path, &back));
		if (same_model(m, back))
			return 1;
		CHECK(starfa_model_predict(back, 3, 4) == starfa_model_predict(m, 3, 4));
		starfa_model_free(back);
		/* No temporary file left beside it. */
		char dir[1024];
		snprintf(dir, sizeof dir, "%s", path);
		DIR *d = opendir(dirname(dir));
		CHECK(d);
		struct dirent *e;
		while ((e = readdir(d)))
			CHECK_MSG(strstr(e->d_name, ".tmp.") == NULL, "temporary file %s left behind", e->d_name);
		closedir(d);
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
	for (size_t n = 0; n < size; n += n < 120 ? 1 : 1 + size / 97)
		if (rejects(write_bytes("cut.bin", data, n, 0), n < 8 ? "STARFAMD" : n < 100 ? "header" : "truncated"))
			return 1;
	unsigned char *more = malloc(size + 1);
	CHECK(more);
	memcpy(more, data, size);
	more[size] = 0;
	if (rejects(write_bytes("long.bin", more, size + 1, 0), "trailing"))
		return 1;
	/* Any flipped bit: the checksum (or a header check, such as the version's) catches it. */
	for (int trial = 0; trial < 300; trial++) {
		memcpy(more, data, size);
		more[testing_below(&rng, size)] ^= (unsigned char)(1u << testing_below(&rng, 8));
		if (rejects(write_bytes("flip.bin", more, size, 0), "flip.bin: "))
			return 1;
	}
	/* Files whose checksum is right but whose contents are not. */
	memcpy(more, data, size);
	uint32_t version = 2;
	memcpy(more + 8, &version, 4);
	if (rejects(write_bytes("v2.bin", more, size, 1), "version 2"))
		return 1;
	memcpy(more, data, size);
	int64_t rank = 0;
	memcpy(more + 40, &rank, 8);
	if (rejects(write_bytes("rank.bin", more, size, 1), "out of range"))
		return 1;
	/* The first user id: "user0" -> "user1", a duplicate of another user's. */
	memcpy(more, data, size);
	CHECK(memcmp(more + 96, "user0", 6) == 0);
	more[96 + 4] = '1';
	if (rejects(write_bytes("dup.bin", more, size, 1), "duplicate"))
		return 1;
	/* A NaN in the user factors, right after the ids. */
	memcpy(more, data, size);
	int64_t ub, ib;
	memcpy(&ub, more + 80, 8);
	memcpy(&ib, more + 88, 8);
	float nan = NAN;
	memcpy(more + 96 + ub + ib + 4, &nan, 4);
	if (rejects(write_bytes("nan.bin", more, size, 1), "non-finite"))
		return 1;
	/* A seen item out of range, in the last entry. */
	memcpy(more, data, size);
	int32_t bad_item = (int32_t)m->nitems;
	memcpy(more + size - 8, &bad_item, 4);
	if (rejects(write_bytes("seen.bin", more, size, 1), "seen"))
		return 1;
	if (rejects(testing_write_file("text.bin", "userId,movieId\n1,2\n", 19), "STARFAMD"))
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
	starfa_model m = {.algo = STARFA_ALGO_IALS, .nusers = 1, .nitems = 5, .rank = 1, .user_factors = uf,
			  .item_factors = itf, .seen = &seen};
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
	starfa_model e = {.algo = STARFA_ALGO_ALS, .nusers = 1, .nitems = 5, .rank = 1, .user_factors = uf,
			  .item_factors = itf, .user_bias = ub, .item_bias = ib, .global_mean = 3.0};
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
