/* Trained models: scoring, recommendations, and the model file.
 *
 * The model file, version 1, all integers and floats little-endian:
 *   offset  bytes            field
 *   0       8                magic "STARFAMD"
 *   8       4                u32 format version (1)
 *   12      4                u32 algorithm: 0 ALS (explicit), 1 implicit ALS
 *   16      4                u32 flags: bit 0 biases present, bit 1 seen entries present
 *   20      4                u32 reserved, 0
 *   24      8 x 3            i64 users U, items I, rank F
 *   48      8 x 3            f64 global mean, lambda, alpha
 *   72      8                i64 seen entries N (0 without bit 1)
 *   80      8 x 2            i64 bytes of the user ids, bytes of the item ids
 *   96      ...              user ids then item ids: U (then I) NUL-terminated strings, in index order
 *           4 U F, 4 I F     f32 user factors, item factors, row-major
 *           4 U, 4 I         f32 user biases, item biases (bit 0)
 *           8 (U + 1), 4 N   i64 seen row offsets, i32 item of each seen entry, sorted per user (bit 1)
 *   end-4   4                u32 CRC-32 (IEEE 802.3, as zlib) of every byte before it
 * Load checks every field and the exact size, so a truncated or corrupt file never loads. */
#include "runtime/idmap.h"
#include "runtime/model.h"
#include "runtime/outfile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the model file is read and written as little-endian memory images: port starfa_model_save/load first"
#endif

#define MODEL_MAGIC "STARFAMD"
#define MODEL_VERSION 1u
#define MODEL_HEADER_BYTES 96
#define FLAG_BIASES 1u
#define FLAG_SEEN 2u
#define MAX_RANK 65535

void starfa_model_free(starfa_model *m)
{
	if (!m)
		return;
	free(m->user_factors);
	free(m->item_factors);
	free(m->user_bias);
	free(m->item_bias);
	idmap_free(m->user_ids);
	idmap_free(m->item_ids);
	starfa_csr_free(m->seen);
	free(m);
}

void starfa_model_factors(const starfa_model *m, struct starfa_factors *f)
{
	*f = (struct starfa_factors){
		.implicit = m->algo == STARFA_ALGO_IALS,
		.nusers = m->nusers,
		.nitems = m->nitems,
		.rank = m->rank,
		.U = m->user_factors,
		.V = m->item_factors,
		.ub = m->user_bias,
		.ib = m->item_bias,
		.ldu = m->rank,
		.ldv = m->rank,
		.ub_stride = 1,
		.ib_stride = 1,
		.mu = m->global_mean,
	};
}

float starfa_model_predict(const starfa_model *m, int64_t user, int64_t item)
{
	struct starfa_factors f;
	starfa_model_factors(m, &f);
	return starfa_factors_score(&f, user >= 0 && user < m->nusers ? user : -1,
				    item >= 0 && item < m->nitems ? item : -1);
}

int starfa_recommend(const starfa_model *m, int64_t user, int64_t k, const starfa_csr *exclude,
		     starfa_recommendation *out, int64_t *count)
{
	*count = 0;
	if (!m || !out || k < 1)
		return starfa_set_error(STARFA_EINVAL, "starfa_recommend: need a model, an output and k >= 1");
	if (user < -1 || user >= m->nusers)
		return starfa_set_error(STARFA_EINVAL, "starfa_recommend: user %lld outside -1..%lld", (long long)user,
					(long long)m->nusers - 1);
	/* A known user's row of a users x items matrix; for an unknown user the one row of a 1 x items one. */
	const int one_row = exclude && user < 0 && exclude->nrows == 1;
	if (exclude && ((exclude->nrows != m->nusers && !one_row) || exclude->ncols != m->nitems))
		return starfa_set_error(STARFA_EINVAL, "starfa_recommend: the excluded entries are %lldx%lld, the "
						       "model %lldx%lld%s", (long long)exclude->nrows, (long long)exclude->ncols,
					(long long)m->nusers, (long long)m->nitems, user < 0 ? " (or 1 row for user -1)" : "");
	struct starfa_factors f;
	starfa_model_factors(m, &f);
	float *popularity = NULL;
	/* A user the model does not know: an implicit model has nothing but how often items were seen. */
	if (user < 0 && f.implicit && m->seen) {
		popularity = starfa_calloc((size_t)m->nitems, sizeof *popularity);
		if (!popularity)
			return STARFA_ENOMEM;
		for (int64_t p = 0; p < m->seen->nnz; p++)
			popularity[m->seen->colind[p]] += 1.0f;
	}
	int64_t keep = k < m->nitems ? k : m->nitems;
	struct scored *heap = starfa_malloc((size_t)keep, sizeof *heap);
	if (!heap) {
		free(popularity);
		return STARFA_ENOMEM;
	}
	const int64_t row = user >= 0 ? user : 0;
	const int use = exclude && (user >= 0 || one_row);
	const int32_t *ex = use ? exclude->colind + exclude->rowptr[row] : NULL;
	int64_t nex = use ? exclude->rowptr[row + 1] - exclude->rowptr[row] : 0;
	int64_t n = starfa_top_k(&f, user, popularity, keep, ex, nex, heap);
	for (int64_t i = 0; i < n; i++)
		out[i] = (starfa_recommendation){heap[i].item, heap[i].score};
	*count = n;
	free(heap);
	free(popularity);
	return 0;
}

/* ------------------------------------------------------------------ CRC-32 */

static void crc32_table(uint32_t table[256])
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int b = 0; b < 8; b++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		table[i] = c;
	}
}

static uint32_t crc32_update(const uint32_t table[256], uint32_t crc, const void *data, size_t n)
{
	const unsigned char *p = data;
	crc = ~crc;
	for (size_t i = 0; i < n; i++)
		crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}

/* ------------------------------------------------------------------ save */

struct writer {
	struct outfile out;
	uint32_t table[256], crc;
};

static void put(struct writer *w, const void *data, size_t n)
{
	w->crc = crc32_update(w->table, w->crc, data, n);
	outfile_write(&w->out, data, n);
}

static void put_u32(struct writer *w, uint32_t v)
{
	put(w, &v, sizeof v);
}

static void put_i64(struct writer *w, int64_t v)
{
	put(w, &v, sizeof v);
}

static void put_f64(struct writer *w, double v)
{
	put(w, &v, sizeof v);
}

/* Bytes of the NUL-terminated names of a map (or of the indices "1", "2", ... when map is NULL). */
static int64_t ids_bytes(const starfa_idmap *map, int64_t n)
{
	int64_t bytes = 0;
	for (int64_t i = 0; i < n; i++) {
		if (map) {
			bytes += (int64_t)strlen(starfa_idmap_name(map, i)) + 1;
		} else {
			char buf[32];
			bytes += snprintf(buf, sizeof buf, "%lld", (long long)i + 1) + 1;
		}
	}
	return bytes;
}

static void put_ids(struct writer *w, const starfa_idmap *map, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		if (map) {
			const char *name = starfa_idmap_name(map, i);
			put(w, name, strlen(name) + 1);
		} else {
			char buf[32];
			int len = snprintf(buf, sizeof buf, "%lld", (long long)i + 1);
			put(w, buf, (size_t)len + 1);
		}
	}
}

static int check_model(const starfa_model *m)
{
	if (!m || m->nusers < 1 || m->nitems < 1 || m->nusers > INT32_MAX || m->nitems > INT32_MAX || m->rank < 1 ||
	    m->rank > MAX_RANK || !m->user_factors || !m->item_factors || (!m->user_bias) != (!m->item_bias) ||
	    (m->algo != STARFA_ALGO_ALS && m->algo != STARFA_ALGO_IALS))
		return starfa_set_error(STARFA_EINVAL, "not a valid model (dimensions, rank, factors or algorithm)");
	if ((m->user_ids && starfa_idmap_count(m->user_ids) != m->nusers) ||
	    (m->item_ids && starfa_idmap_count(m->item_ids) != m->nitems))
		return starfa_set_error(STARFA_EINVAL, "the model's id maps do not match its dimensions");
	if (m->seen && (m->seen->nrows != m->nusers || m->seen->ncols != m->nitems))
		return starfa_set_error(STARFA_EINVAL, "the model's seen entries do not match its dimensions");
	return 0;
}

int starfa_model_save(const starfa_model *m, const char *path)
{
	int rc = check_model(m);
	if (rc)
		return rc;
	struct writer w = {0};
	if ((rc = outfile_open(&w.out, path)) != 0)
		return rc;
	crc32_table(w.table);
	uint32_t flags = (m->user_bias ? FLAG_BIASES : 0) | (m->seen ? FLAG_SEEN : 0);
	put(&w, MODEL_MAGIC, 8);
	put_u32(&w, MODEL_VERSION);
	put_u32(&w, (uint32_t)m->algo);
	put_u32(&w, flags);
	put_u32(&w, 0);
	put_i64(&w, m->nusers);
	put_i64(&w, m->nitems);
	put_i64(&w, m->rank);
	put_f64(&w, m->global_mean);
	put_f64(&w, m->lambda);
	put_f64(&w, m->alpha);
	put_i64(&w, m->seen ? m->seen->nnz : 0);
	put_i64(&w, ids_bytes(m->user_ids, m->nusers));
	put_i64(&w, ids_bytes(m->item_ids, m->nitems));
	put_ids(&w, m->user_ids, m->nusers);
	put_ids(&w, m->item_ids, m->nitems);
	put(&w, m->user_factors, (size_t)(m->nusers * m->rank) * sizeof(float));
	put(&w, m->item_factors, (size_t)(m->nitems * m->rank) * sizeof(float));
	if (m->user_bias) {
		put(&w, m->user_bias, (size_t)m->nusers * sizeof(float));
		put(&w, m->item_bias, (size_t)m->nitems * sizeof(float));
	}
	if (m->seen) {
		put(&w, m->seen->rowptr, (size_t)(m->nusers + 1) * sizeof(int64_t));
		put(&w, m->seen->colind, (size_t)m->seen->nnz * sizeof(int32_t));
	}
	uint32_t crc = w.crc;
	put(&w, &crc, sizeof crc);
	return outfile_close(&w.out, 1, "the model");
}

/* ------------------------------------------------------------------ load */

struct reader {
	const char *path;
	const unsigned char *data;
	size_t size, pos;
};

static const void *take(struct reader *r, size_t n)
{
	const void *p = r->data + r->pos;
	r->pos += n;
	return p;
}

static uint32_t get_u32(struct reader *r)
{
	uint32_t v;
	memcpy(&v, take(r, sizeof v), sizeof v);
	return v;
}

static int64_t get_i64(struct reader *r)
{
	int64_t v;
	memcpy(&v, take(r, sizeof v), sizeof v);
	return v;
}

static double get_f64(struct reader *r)
{
	double v;
	memcpy(&v, take(r, sizeof v), sizeof v);
	return v;
}

static int corrupt(const struct reader *r, const char *what)
{
	return starfa_set_error(STARFA_EFORMAT, "%s: not a valid starfa model: %s", r->path, what);
}

/* a + b * c within [0, SIZE_MAX], or SIZE_MAX. */
static size_t add_mul(size_t a, uint64_t b, uint64_t c)
{
	if (c != 0 && b > (SIZE_MAX - a) / c)
		return SIZE_MAX;
	return a + (size_t)(b * c);
}

static int read_ids(struct reader *r, int64_t bytes, int64_t n, const char *side, starfa_idmap **out)
{
	const char *p = take(r, (size_t)bytes), *end = p + bytes;
	starfa_idmap *map = idmap_new();
	if (!map)
		return STARFA_ENOMEM;
	for (int64_t i = 0; i < n; i++) {
		const char *nul = p < end ? memchr(p, '\0', (size_t)(end - p)) : NULL;
		char what[96];
		if (!nul) {
			idmap_free(map);
			snprintf(what, sizeof what, "the %s ids end after %lld of %lld names", side, (long long)i, (long long)n);
			return corrupt(r, what);
		}
		int64_t index;
		int rc = idmap_intern(map, p, (size_t)(nul - p), &index);
		if (rc) {
			idmap_free(map);
			return rc;
		}
		if (nul == p || index != i) {
			idmap_free(map);
			snprintf(what, sizeof what, "%s id %lld is %s", side, (long long)i + 1, nul == p ? "empty" : "a duplicate");
			return corrupt(r, what);
		}
		p = nul + 1;
	}
	if (p != end) {
		idmap_free(map);
		char what[96];
		snprintf(what, sizeof what, "the %s ids hold %lld bytes beyond their %lld names", side, (long long)(end - p),
			 (long long)n);
		return corrupt(r, what);
	}
	*out = map;
	return 0;
}

static float *read_floats(struct reader *r, int64_t n, const char *what, int *bad)
{
	float *v = starfa_malloc((size_t)n, sizeof *v);
	if (!v)
		return NULL;
	memcpy(v, take(r, (size_t)n * sizeof *v), (size_t)n * sizeof *v);
	for (int64_t i = 0; i < n && !*bad; i++)
		if (!isfinite(v[i])) {
			char msg[96];
			snprintf(msg, sizeof msg, "%s hold a non-finite value", what);
			corrupt(r, msg);
			*bad = 1;
		}
	return v;
}

static int parse_model(struct reader *r, starfa_model **out)
{
	if (r->size < MODEL_HEADER_BYTES + 4 || memcmp(r->data, MODEL_MAGIC, 8) != 0)
		return r->size >= 8 && memcmp(r->data, MODEL_MAGIC, 8) == 0
			       ? corrupt(r, "truncated inside the header")
			       : corrupt(r, "the file does not begin with STARFAMD");
	take(r, 8);
	uint32_t version = get_u32(r), algo = get_u32(r), flags = get_u32(r), reserved = get_u32(r);
	if (version != MODEL_VERSION)
		return starfa_set_error(STARFA_EFORMAT, "%s: model format version %u; this starfa reads version %u",
					r->path, version, MODEL_VERSION);
	int64_t users = get_i64(r), items = get_i64(r), rank = get_i64(r);
	double mean = get_f64(r), lambda = get_f64(r), alpha = get_f64(r);
	int64_t seen = get_i64(r), user_bytes = get_i64(r), item_bytes = get_i64(r);
	if (algo > 1 || (flags & ~(FLAG_BIASES | FLAG_SEEN)) || reserved != 0)
		return corrupt(r, "unknown algorithm or flags in the header");
	if (users < 1 || users > INT32_MAX || items < 1 || items > INT32_MAX || rank < 1 || rank > MAX_RANK)
		return corrupt(r, "dimensions or rank out of range");
	if (!isfinite(mean) || !isfinite(lambda) || !isfinite(alpha))
		return corrupt(r, "non-finite mean, lambda or alpha");
	if (seen < 0 || (!(flags & FLAG_SEEN) && seen != 0) || (seen > (int64_t)users * items) || user_bytes < 2 * users ||
	    item_bytes < 2 * items)
		return corrupt(r, "sizes of the ids or seen entries out of range");
	size_t expect = MODEL_HEADER_BYTES;
	expect = add_mul(expect, (uint64_t)user_bytes, 1);
	expect = add_mul(expect, (uint64_t)item_bytes, 1);
	expect = add_mul(expect, (uint64_t)(users + items), (uint64_t)rank * sizeof(float));
	if (flags & FLAG_BIASES)
		expect = add_mul(expect, (uint64_t)(users + items), sizeof(float));
	if (flags & FLAG_SEEN) {
		expect = add_mul(expect, (uint64_t)users + 1, sizeof(int64_t));
		expect = add_mul(expect, (uint64_t)seen, sizeof(int32_t));
	}
	expect = add_mul(expect, 1, 4);
	if (r->size != expect) {
		char what[160];
		snprintf(what, sizeof what, "%s: %zu bytes where its header describes %zu",
			 r->size < expect ? "truncated" : "trailing bytes", r->size, expect);
		return corrupt(r, what);
	}
	uint32_t table[256], stored;
	crc32_table(table);
	memcpy(&stored, r->data + r->size - 4, 4);
	if (crc32_update(table, 0, r->data, r->size - 4) != stored)
		return corrupt(r, "checksum mismatch (the file is corrupt)");

	starfa_model *m = starfa_calloc(1, sizeof *m);
	if (!m)
		return STARFA_ENOMEM;
	m->algo = (starfa_als_algo)algo;
	m->nusers = users;
	m->nitems = items;
	m->rank = rank;
	m->global_mean = mean;
	m->lambda = lambda;
	m->alpha = alpha;
	int rc = read_ids(r, user_bytes, users, "user", &m->user_ids);
	if (!rc)
		rc = read_ids(r, item_bytes, items, "item", &m->item_ids);
	int bad = 0;
	if (!rc) {
		m->user_factors = read_floats(r, users * rank, "the user factors", &bad);
		m->item_factors = m->user_factors && !bad ? read_floats(r, items * rank, "the item factors", &bad) : NULL;
		rc = bad ? STARFA_EFORMAT : (!m->user_factors || !m->item_factors) ? STARFA_ENOMEM : 0;
	}
	if (!rc && (flags & FLAG_BIASES)) {
		m->user_bias = read_floats(r, users, "the user biases", &bad);
		m->item_bias = m->user_bias && !bad ? read_floats(r, items, "the item biases", &bad) : NULL;
		rc = bad ? STARFA_EFORMAT : (!m->user_bias || !m->item_bias) ? STARFA_ENOMEM : 0;
	}
	if (!rc && (flags & FLAG_SEEN)) {
		starfa_csr *s = m->seen = starfa_calloc(1, sizeof *s);
		if (s) {
			s->nrows = users;
			s->ncols = items;
			s->nnz = seen;
			s->rowptr = starfa_malloc((size_t)users + 1, sizeof *s->rowptr);
			s->colind = starfa_malloc((size_t)seen, sizeof *s->colind);
			s->val = starfa_malloc((size_t)seen, sizeof *s->val);
		}
		if (!s || !s->rowptr || !s->colind || !s->val) {
			rc = STARFA_ENOMEM;
		} else {
			memcpy(s->rowptr, take(r, (size_t)(users + 1) * sizeof *s->rowptr), (size_t)(users + 1) * sizeof *s->rowptr);
			memcpy(s->colind, take(r, (size_t)seen * sizeof *s->colind), (size_t)seen * sizeof *s->colind);
			for (int64_t p = 0; p < seen; p++)
				s->val[p] = 1.0f;
			int ok = s->rowptr[0] == 0 && s->rowptr[users] == seen;
			for (int64_t u = 0; u < users && ok; u++) {
				ok = s->rowptr[u] <= s->rowptr[u + 1];
				for (int64_t p = s->rowptr[u]; ok && p < s->rowptr[u + 1]; p++)
					ok = s->colind[p] >= 0 && s->colind[p] < items &&
					     (p == s->rowptr[u] || s->colind[p - 1] < s->colind[p]);
			}
			if (!ok)
				rc = corrupt(r, "the seen entries are not sorted rows of valid items");
		}
	}
	if (rc) {
		starfa_model_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

int starfa_model_load(const char *path, starfa_model **out)
{
	*out = NULL;
	FILE *f = fopen(path, "rb");
	if (!f)
		return starfa_set_error(STARFA_EIO, "cannot open %s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		fclose(f);
		return starfa_set_error(STARFA_EIO, "%s is not a regular file", path);
	}
	size_t size = (size_t)st.st_size;
	unsigned char *data = starfa_malloc(size ? size : 1, 1);
	if (!data) {
		fclose(f);
		return STARFA_ENOMEM;
	}
	size_t got = fread(data, 1, size, f);
	int read_error = ferror(f);
	fclose(f);
	if (read_error || got != size) {
		free(data);
		return starfa_set_error(STARFA_EIO, "cannot read %s: %s", path, read_error ? strerror(errno) : "short read");
	}
	struct reader r = {path, data, size, 0};
	int rc = parse_model(&r, out);
	free(data);
	return rc;
}
