/* Trained models: scoring, recommendations, the model file and exports.
 *
 * The model file, version 2, all integers and floats little-endian:
 *   offset  bytes   field
 *   0       8       magic "STARFAMD"
 *   8       4       u32 format version (2)
 *   12      ...     sections, each: char tag[4], u32 reserved 0, u64 payload bytes P, then the P bytes
 *   end-4   4       u32 CRC-32 (IEEE 802.3, as zlib) of every byte before it
 * The sections, each at most once, written in this order and read in any:
 *   HEAD    72 bytes: u32 kind (0 explicit, 1 implicit, 2 nonneg, 3 topic); char[16] the name of the
 *           algorithm that trained it ("als", "ials"), NUL-terminated and zero-padded; u32 flags (bit 0
 *           biases present, bit 1 seen entries present); i64 users U, items I, rank F; f64 global mean,
 *           lambda, alpha
 *   UIDS    the user ids: U NUL-terminated strings, in index order
 *   IIDS    the item ids: I NUL-terminated strings
 *   UFAC    f32 user factors, U x F, row-major
 *   IFAC    f32 item factors, I x F
 *   UBIA    f32 user biases, U (exactly when flags bit 0; explicit models only)
 *   IBIA    f32 item biases, I (likewise)
 *   SEEN    i64 entries N, i64 row offsets (U + 1), i32 item of each entry, sorted per user (exactly when
 *           flags bit 1)
 * A tag whose first letter is lowercase marks an optional section: a reader that does not know it skips
 * it. Any other unknown tag stops the load: a newer starfa wrote something this one would get wrong.
 *
 * Version 1, read and never written: after the version, u32 algorithm (0 ALS: an explicit model, "als";
 * 1 implicit ALS: an implicit one, "ials"), u32 flags as above, u32 reserved 0, i64 U, I, F, f64 global
 * mean, lambda, alpha, i64 seen entries N, i64 bytes of the user ids, bytes of the item ids (96 bytes so
 * far); then the payloads of UIDS, IIDS, UFAC, IFAC, UBIA and IBIA (bit 0), SEEN without its N (bit 1),
 * one after the other; the CRC-32.
 *
 * Load checks every field, the size of every section against HEAD and the checksum, so a truncated or
 * corrupt file never loads. */
#include "storage/idmap.h"
#include "model/model.h"

#include "cpu/topk.h"
#include "io/outfile.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the model file is read and written as little-endian memory images: port starfa_model_save/load first"
#endif

#define MODEL_MAGIC "STARFAMD"
#define MODEL_VERSION 2u
#define V1_HEADER_BYTES 96
#define SECTION_HEADER_BYTES 16
#define HEAD_BYTES 72
#define FLAG_BIASES 1u
#define FLAG_SEEN 2u
#define MAX_RANK 65535

const char *starfa_model_kind_name(starfa_model_kind kind)
{
	static const char *const names[STARFA_MODEL_KINDS] = {"explicit", "implicit", "nonneg", "topic"};
	return (unsigned)kind < STARFA_MODEL_KINDS ? names[kind] : "unknown";
}

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
	/* Only an explicit model adds a mean and biases to the product of the factors. */
	const int explicit_model = m->kind == STARFA_MODEL_EXPLICIT;
	*f = (struct starfa_factors){
		.kind = m->kind,
		.nusers = m->nusers,
		.nitems = m->nitems,
		.rank = m->rank,
		.U = m->user_factors,
		.V = m->item_factors,
		.ub = explicit_model ? m->user_bias : NULL,
		.ib = explicit_model ? m->item_bias : NULL,
		.ldu = m->rank,
		.ldv = m->rank,
		.ub_stride = 1,
		.ib_stride = 1,
		.mu = explicit_model ? m->global_mean : 0.0,
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
	/* Every item's score; for a user the model does not know, without biases a model has nothing but how
	 * often items were seen (an explicit one ranks by item bias, which its scores of user -1 are). */
	float *scores = starfa_calloc(m->nitems > 0 ? (size_t)m->nitems : 1, sizeof *scores);
	if (!scores)
		return STARFA_ENOMEM;
	if (user < 0 && f.kind != STARFA_MODEL_EXPLICIT && m->seen)
		for (int64_t p = 0; p < m->seen->nnz; p++)
			scores[m->seen->colind[p]] += 1.0f;
	else
		for (int64_t i = 0; i < m->nitems; i++)
			scores[i] = starfa_factors_score(&f, user, i);
	int64_t keep = k < m->nitems ? k : m->nitems;
	struct scored *heap = starfa_malloc(keep > 0 ? (size_t)keep : 1, sizeof *heap);
	if (!heap) {
		free(scores);
		return STARFA_ENOMEM;
	}
	const int64_t row = user >= 0 ? user : 0;
	const int use = exclude && (user >= 0 || one_row);
	const int32_t *ex = use ? exclude->colind + exclude->rowptr[row] : NULL;
	int64_t nex = use ? exclude->rowptr[row + 1] - exclude->rowptr[row] : 0;
	int64_t n = starfa_cpu_top_k(scores, m->nitems, keep, ex, nex, heap);
	for (int64_t i = 0; i < n; i++)
		out[i] = (starfa_recommendation){heap[i].item, heap[i].score};
	*count = n;
	free(heap);
	free(scores);
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

/* ------------------------------------------------------------------ checks shared by save, load and export */

/* A non-empty word of printable ASCII, NUL-terminated within the 16 bytes: it is printed as it is. */
static int valid_algorithm(const char name[16])
{
	const char *nul = memchr(name, '\0', 16);
	if (!nul || nul == name)
		return 0;
	for (const char *p = name; p < nul; p++)
		if (*p < '!' || *p > '~')
			return 0;
	return 1;
}

static int check_model(const starfa_model *m)
{
	if (!m || m->nusers < 1 || m->nitems < 1 || m->nusers > INT32_MAX || m->nitems > INT32_MAX || m->rank < 1 ||
	    m->rank > MAX_RANK || !m->user_factors || !m->item_factors || (!m->user_bias) != (!m->item_bias) ||
	    (unsigned)m->kind >= STARFA_MODEL_KINDS)
		return starfa_set_error(STARFA_EINVAL, "not a valid model (dimensions, rank, factors or kind)");
	if (!valid_algorithm(m->algorithm))
		return starfa_set_error(STARFA_EINVAL, "the model's algorithm name is not a word of 1 to 15 printable "
						       "characters");
	/* Scoring ignores them in the other kinds (starfa_model_factors): a file must not suggest otherwise. */
	if (m->kind != STARFA_MODEL_EXPLICIT && (m->user_bias || m->global_mean != 0.0))
		return starfa_set_error(STARFA_EINVAL, "a %s model has no global mean or biases (explicit models only)",
					starfa_model_kind_name(m->kind));
	if ((m->user_ids && starfa_idmap_count(m->user_ids) != m->nusers) ||
	    (m->item_ids && starfa_idmap_count(m->item_ids) != m->nitems))
		return starfa_set_error(STARFA_EINVAL, "the model's id maps do not match its dimensions");
	if (m->seen && (m->seen->nrows != m->nusers || m->seen->ncols != m->nitems || m->seen->nnz < 0 ||
			m->seen->rowptr[0] != 0 || m->seen->rowptr[m->nusers] != m->seen->nnz))
		return starfa_set_error(STARFA_EINVAL, "the model's seen entries do not match its dimensions");
	return 0;
}

/* The name of index i of a side: its original id, or the index from 1 when there are no ids. */
static const char *id_name(const starfa_idmap *map, int64_t i, char buf[32])
{
	if (map)
		return starfa_idmap_name(map, i);
	snprintf(buf, 32, "%lld", (long long)i + 1);
	return buf;
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

static void put_u64(struct writer *w, uint64_t v)
{
	put(w, &v, sizeof v);
}

static void put_f64(struct writer *w, double v)
{
	put(w, &v, sizeof v);
}

/* A section's header; its payload, exactly `bytes` of it, follows. */
static void put_section(struct writer *w, const char tag[4], uint64_t bytes)
{
	put(w, tag, 4);
	put_u32(w, 0);
	put_u64(w, bytes);
}

/* Bytes of the NUL-terminated names of a side. */
static uint64_t ids_bytes(const starfa_idmap *map, int64_t n)
{
	uint64_t bytes = 0;
	char buf[32];
	for (int64_t i = 0; i < n; i++)
		bytes += strlen(id_name(map, i, buf)) + 1;
	return bytes;
}

static void put_ids(struct writer *w, const starfa_idmap *map, int64_t n)
{
	char buf[32];
	for (int64_t i = 0; i < n; i++) {
		const char *name = id_name(map, i, buf);
		put(w, name, strlen(name) + 1);
	}
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
	const uint64_t U = (uint64_t)m->nusers, I = (uint64_t)m->nitems, F = (uint64_t)m->rank;
	put(&w, MODEL_MAGIC, 8);
	put_u32(&w, MODEL_VERSION);

	put_section(&w, "HEAD", HEAD_BYTES);
	put_u32(&w, (uint32_t)m->kind);
	char algorithm[16] = {0}; /* zero-padded: the file does not depend on what follows the NUL in memory */
	memcpy(algorithm, m->algorithm, strlen(m->algorithm));
	put(&w, algorithm, sizeof algorithm);
	put_u32(&w, (m->user_bias ? FLAG_BIASES : 0) | (m->seen ? FLAG_SEEN : 0));
	put_u64(&w, U);
	put_u64(&w, I);
	put_u64(&w, F);
	put_f64(&w, m->global_mean);
	put_f64(&w, m->lambda);
	put_f64(&w, m->alpha);

	put_section(&w, "UIDS", ids_bytes(m->user_ids, m->nusers));
	put_ids(&w, m->user_ids, m->nusers);
	put_section(&w, "IIDS", ids_bytes(m->item_ids, m->nitems));
	put_ids(&w, m->item_ids, m->nitems);
	put_section(&w, "UFAC", U * F * sizeof(float));
	put(&w, m->user_factors, U * F * sizeof(float));
	put_section(&w, "IFAC", I * F * sizeof(float));
	put(&w, m->item_factors, I * F * sizeof(float));
	if (m->user_bias) {
		put_section(&w, "UBIA", U * sizeof(float));
		put(&w, m->user_bias, U * sizeof(float));
		put_section(&w, "IBIA", I * sizeof(float));
		put(&w, m->item_bias, I * sizeof(float));
	}
	if (m->seen) {
		const uint64_t N = (uint64_t)m->seen->nnz;
		put_section(&w, "SEEN", sizeof(int64_t) + (U + 1) * sizeof(int64_t) + N * sizeof(int32_t));
		put_u64(&w, N);
		put(&w, m->seen->rowptr, (U + 1) * sizeof(int64_t));
		put(&w, m->seen->colind, N * sizeof(int32_t));
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

/* The next n bytes; the callers check that they are there. */
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

static int corrupt(const struct reader *r, const char *fmt, ...) STARFA_PRINTF(2, 3);

static int corrupt(const struct reader *r, const char *fmt, ...)
{
	char what[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	return starfa_set_error(STARFA_EFORMAT, "%s: not a valid starfa model: %s", r->path, what);
}

/* a + b * c within [0, SIZE_MAX], or SIZE_MAX. */
static size_t add_mul(size_t a, uint64_t b, uint64_t c)
{
	if (c != 0 && (b > SIZE_MAX / c || b * c > SIZE_MAX - a))
		return SIZE_MAX;
	return a + (size_t)(b * c);
}

/* What the header of either version says. */
struct head {
	uint32_t kind, flags;
	char algorithm[16];
	int64_t users, items, rank;
	double mean, lambda, alpha;
};

static int check_head(const struct reader *r, const struct head *h)
{
	if (h->kind >= STARFA_MODEL_KINDS)
		return corrupt(r, "model kind %u is unknown (a newer starfa wrote this file?)", h->kind);
	if (!valid_algorithm(h->algorithm))
		return corrupt(r, "the algorithm name is not a word of 1 to 15 printable characters");
	if (h->flags & ~(FLAG_BIASES | FLAG_SEEN))
		return corrupt(r, "unknown flags 0x%x in the header", h->flags);
	if (h->users < 1 || h->users > INT32_MAX || h->items < 1 || h->items > INT32_MAX || h->rank < 1 ||
	    h->rank > MAX_RANK)
		return corrupt(r, "dimensions or rank out of range");
	if (!isfinite(h->mean) || !isfinite(h->lambda) || !isfinite(h->alpha))
		return corrupt(r, "non-finite mean, lambda or alpha");
	if (h->kind != STARFA_MODEL_EXPLICIT && ((h->flags & FLAG_BIASES) || h->mean != 0.0))
		return corrupt(r, "a %s model with a global mean or biases (explicit models only)",
			       starfa_model_kind_name((starfa_model_kind)h->kind));
	return 0;
}

/* Where the model's arrays lie in the file. */
struct span {
	const unsigned char *p;
	size_t n;
};

struct pieces {
	struct span user_ids, item_ids, user_factors, item_factors, user_bias, item_bias; /* biases: with the flag */
	struct span seen_offsets, seen_items;                                              /* with the flag */
	int64_t seen;
};

static int read_ids(const struct reader *r, struct span s, int64_t n, const char *side, starfa_idmap **out)
{
	const char *p = (const char *)s.p, *end = p + s.n;
	starfa_idmap *map = idmap_new();
	if (!map)
		return STARFA_ENOMEM;
	for (int64_t i = 0; i < n; i++) {
		const char *nul = p < end ? memchr(p, '\0', (size_t)(end - p)) : NULL;
		if (!nul) {
			idmap_free(map);
			return corrupt(r, "the %s ids end after %lld of %lld names", side, (long long)i, (long long)n);
		}
		int64_t index;
		int rc = idmap_intern(map, p, (size_t)(nul - p), &index);
		if (rc) {
			idmap_free(map);
			return rc;
		}
		if (nul == p || index != i) {
			idmap_free(map);
			return corrupt(r, "%s id %lld is %s", side, (long long)i + 1, nul == p ? "empty" : "a duplicate");
		}
		p = nul + 1;
	}
	if (p != end) {
		idmap_free(map);
		return corrupt(r, "the %s ids hold %lld bytes beyond their %lld names", side, (long long)(end - p),
			       (long long)n);
	}
	*out = map;
	return 0;
}

/* A copy of the floats of s (n of them, which s holds), all finite. */
static int read_floats(const struct reader *r, struct span s, int64_t n, const char *what, float **out)
{
	float *v = starfa_malloc((size_t)n, sizeof *v);
	if (!v)
		return STARFA_ENOMEM;
	memcpy(v, s.p, (size_t)n * sizeof *v);
	*out = v;
	for (int64_t i = 0; i < n; i++)
		if (!isfinite(v[i]))
			return corrupt(r, "%s hold a non-finite value", what);
	return 0;
}

/* The model from a checked header and the spans of its arrays, whose sizes match the header. */
static int build_model(const struct reader *r, const struct head *h, const struct pieces *p, starfa_model **out)
{
	starfa_model *m = starfa_calloc(1, sizeof *m);
	if (!m)
		return STARFA_ENOMEM;
	m->kind = (starfa_model_kind)h->kind;
	memcpy(m->algorithm, h->algorithm, sizeof m->algorithm);
	m->nusers = h->users;
	m->nitems = h->items;
	m->rank = h->rank;
	m->global_mean = h->mean;
	m->lambda = h->lambda;
	m->alpha = h->alpha;
	int rc = read_ids(r, p->user_ids, h->users, "user", &m->user_ids);
	if (!rc)
		rc = read_ids(r, p->item_ids, h->items, "item", &m->item_ids);
	if (!rc)
		rc = read_floats(r, p->user_factors, h->users * h->rank, "the user factors", &m->user_factors);
	if (!rc)
		rc = read_floats(r, p->item_factors, h->items * h->rank, "the item factors", &m->item_factors);
	if (!rc && (h->flags & FLAG_BIASES))
		rc = read_floats(r, p->user_bias, h->users, "the user biases", &m->user_bias);
	if (!rc && (h->flags & FLAG_BIASES))
		rc = read_floats(r, p->item_bias, h->items, "the item biases", &m->item_bias);
	if (!rc && (h->flags & FLAG_SEEN)) {
		const int64_t users = h->users, seen = p->seen;
		starfa_csr *s = m->seen = starfa_calloc(1, sizeof *s);
		if (s) {
			s->nrows = users;
			s->ncols = h->items;
			s->nnz = seen;
			s->rowptr = starfa_malloc((size_t)users + 1, sizeof *s->rowptr);
			s->colind = starfa_malloc((size_t)seen, sizeof *s->colind);
			s->val = starfa_malloc((size_t)seen, sizeof *s->val);
		}
		if (!s || !s->rowptr || !s->colind || !s->val) {
			rc = STARFA_ENOMEM;
		} else {
			memcpy(s->rowptr, p->seen_offsets.p, (size_t)(users + 1) * sizeof *s->rowptr);
			memcpy(s->colind, p->seen_items.p, (size_t)seen * sizeof *s->colind);
			for (int64_t q = 0; q < seen; q++)
				s->val[q] = 1.0f;
			int ok = s->rowptr[0] == 0 && s->rowptr[users] == seen;
			for (int64_t u = 0; u < users && ok; u++) {
				ok = s->rowptr[u] <= s->rowptr[u + 1];
				for (int64_t q = s->rowptr[u]; ok && q < s->rowptr[u + 1]; q++)
					ok = s->colind[q] >= 0 && s->colind[q] < h->items &&
					     (q == s->rowptr[u] || s->colind[q - 1] < s->colind[q]);
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

static int checksum_matches(const struct reader *r)
{
	uint32_t table[256], stored;
	crc32_table(table);
	memcpy(&stored, r->data + r->size - 4, 4);
	return crc32_update(table, 0, r->data, r->size - 4) == stored;
}

/* Version 1: a fixed header, then the arrays one after the other. */
static int parse_v1(struct reader *r, starfa_model **out)
{
	if (r->size < V1_HEADER_BYTES + 4)
		return corrupt(r, "truncated inside the header");
	uint32_t algo = get_u32(r);
	struct head h = {.flags = get_u32(r)};
	uint32_t reserved = get_u32(r);
	h.users = get_i64(r);
	h.items = get_i64(r);
	h.rank = get_i64(r);
	h.mean = get_f64(r);
	h.lambda = get_f64(r);
	h.alpha = get_f64(r);
	int64_t seen = get_i64(r), user_bytes = get_i64(r), item_bytes = get_i64(r);
	if (algo > 1 || reserved != 0)
		return corrupt(r, "unknown algorithm %u or reserved field in the header", algo);
	/* Version 1 knew two algorithms, each its own kind. */
	h.kind = algo == 1 ? STARFA_MODEL_IMPLICIT : STARFA_MODEL_EXPLICIT;
	snprintf(h.algorithm, sizeof h.algorithm, "%s", algo == 1 ? "ials" : "als");
	int rc = check_head(r, &h);
	if (rc)
		return rc;
	if (seen < 0 || (!(h.flags & FLAG_SEEN) && seen != 0) || seen > h.users * h.items || user_bytes < 2 * h.users ||
	    item_bytes < 2 * h.items)
		return corrupt(r, "sizes of the ids or seen entries out of range");
	size_t expect = V1_HEADER_BYTES;
	expect = add_mul(expect, (uint64_t)user_bytes, 1);
	expect = add_mul(expect, (uint64_t)item_bytes, 1);
	expect = add_mul(expect, (uint64_t)(h.users + h.items), (uint64_t)h.rank * sizeof(float));
	if (h.flags & FLAG_BIASES)
		expect = add_mul(expect, (uint64_t)(h.users + h.items), sizeof(float));
	if (h.flags & FLAG_SEEN) {
		expect = add_mul(expect, (uint64_t)h.users + 1, sizeof(int64_t));
		expect = add_mul(expect, (uint64_t)seen, sizeof(int32_t));
	}
	expect = add_mul(expect, 1, 4);
	if (r->size != expect)
		return corrupt(r, "%s: %zu bytes where its header describes %zu",
			       r->size < expect ? "truncated" : "trailing bytes", r->size, expect);
	if (!checksum_matches(r))
		return corrupt(r, "checksum mismatch (the file is corrupt)");
	struct pieces p = {.seen = seen};
	p.user_ids = (struct span){take(r, (size_t)user_bytes), (size_t)user_bytes};
	p.item_ids = (struct span){take(r, (size_t)item_bytes), (size_t)item_bytes};
	size_t n = (size_t)(h.users * h.rank) * sizeof(float);
	p.user_factors = (struct span){take(r, n), n};
	n = (size_t)(h.items * h.rank) * sizeof(float);
	p.item_factors = (struct span){take(r, n), n};
	if (h.flags & FLAG_BIASES) {
		p.user_bias = (struct span){take(r, (size_t)h.users * sizeof(float)), (size_t)h.users * sizeof(float)};
		p.item_bias = (struct span){take(r, (size_t)h.items * sizeof(float)), (size_t)h.items * sizeof(float)};
	}
	if (h.flags & FLAG_SEEN) {
		n = (size_t)(h.users + 1) * sizeof(int64_t);
		p.seen_offsets = (struct span){take(r, n), n};
		p.seen_items = (struct span){take(r, (size_t)seen * sizeof(int32_t)), (size_t)seen * sizeof(int32_t)};
	}
	return build_model(r, &h, &p, out);
}

/* The sections version 2 knows, in the order starfa writes them. */
enum { SEC_HEAD, SEC_UIDS, SEC_IIDS, SEC_UFAC, SEC_IFAC, SEC_UBIA, SEC_IBIA, SEC_SEEN, SECTIONS };
static const char section_tags[SECTIONS][5] = {"HEAD", "UIDS", "IIDS", "UFAC", "IFAC", "UBIA", "IBIA", "SEEN"};

struct section {
	char tag[4];
	uint32_t reserved;
	uint64_t bytes;
	size_t at; /* offset of the section's header */
	struct span payload;
};

/* A tag as text for messages: its printable characters, others as \xNN. */
static const char *tag_text(const char tag[4], char buf[20])
{
	char *o = buf;
	for (int i = 0; i < 4; i++) {
		unsigned char c = (unsigned char)tag[i];
		o += c >= ' ' && c <= '~' && c != '\\' ? sprintf(o, "%c", c) : sprintf(o, "\\x%02x", c);
	}
	return buf;
}

/* The section at r->pos, moving past it; 0 when the end (r->size - 4) is reached, -1 (message set) when
 * the section runs past it, 1 otherwise. */
static int next_section(struct reader *r, struct section *s)
{
	const size_t end = r->size - 4;
	if (r->pos == end)
		return 0;
	char tag[20];
	if (end - r->pos < SECTION_HEADER_BYTES) {
		corrupt(r, "truncated or corrupt: %zu bytes at byte %zu, too few for a section", end - r->pos, r->pos);
		return -1;
	}
	s->at = r->pos;
	memcpy(s->tag, take(r, 4), 4);
	s->reserved = get_u32(r);
	s->bytes = (uint64_t)get_i64(r);
	if (s->bytes > end - r->pos) {
		corrupt(r, "truncated or corrupt: section '%s' at byte %zu has %llu bytes, %zu remain",
			tag_text(s->tag, tag), s->at, (unsigned long long)s->bytes, end - r->pos);
		return -1;
	}
	s->payload = (struct span){take(r, (size_t)s->bytes), (size_t)s->bytes};
	return 1;
}

/* That a present section holds the bytes the header describes. */
static int check_size(const struct reader *r, const struct section *sec, int which, size_t expect)
{
	if (sec[which].payload.n != expect)
		return corrupt(r, "section %s holds %zu bytes where the header describes %zu", section_tags[which],
			       sec[which].payload.n, expect);
	return 0;
}

/* Version 2: tagged sections. */
static int parse_v2(struct reader *r, starfa_model **out)
{
	/* The layout first, so that a cut file says so rather than failing its checksum... */
	const size_t start = r->pos;
	struct section s, sec[SECTIONS] = {0};
	int found[SECTIONS] = {0}, more;
	while ((more = next_section(r, &s)) > 0)
		;
	if (more < 0)
		return STARFA_EFORMAT;
	/* ... then the checksum, so that a corrupt tag or size is not taken for a newer starfa's ... */
	if (!checksum_matches(r))
		return corrupt(r, "checksum mismatch (the file is truncated or corrupt)");
	/* ... then the sections themselves. */
	r->pos = start;
	char tag[20];
	while (next_section(r, &s) > 0) {
		int which = 0;
		while (which < SECTIONS && memcmp(s.tag, section_tags[which], 4) != 0)
			which++;
		if (which == SECTIONS) {
			if (s.tag[0] >= 'a' && s.tag[0] <= 'z')
				continue; /* optional: what it adds, this starfa can do without */
			return corrupt(r, "unknown section '%s' at byte %zu (a newer starfa wrote this file; "
					  "its tag does not mark it optional)", tag_text(s.tag, tag), s.at);
		}
		if (found[which])
			return corrupt(r, "section %s appears twice (at bytes %zu and %zu)", section_tags[which],
				       sec[which].at, s.at);
		if (s.reserved != 0)
			return corrupt(r, "section %s: reserved field is %u, not 0", section_tags[which], s.reserved);
		found[which] = 1;
		sec[which] = s;
	}
	for (int which = SEC_HEAD; which <= SEC_IFAC; which++)
		if (!found[which])
			return corrupt(r, "section %s is missing", section_tags[which]);
	int rc = check_size(r, sec, SEC_HEAD, HEAD_BYTES);
	if (rc)
		return rc;
	struct reader head = {r->path, sec[SEC_HEAD].payload.p, HEAD_BYTES, 0};
	struct head h = {.kind = get_u32(&head)};
	memcpy(h.algorithm, take(&head, sizeof h.algorithm), sizeof h.algorithm);
	h.flags = get_u32(&head);
	h.users = get_i64(&head);
	h.items = get_i64(&head);
	h.rank = get_i64(&head);
	h.mean = get_f64(&head);
	h.lambda = get_f64(&head);
	h.alpha = get_f64(&head);
	if ((rc = check_head(r, &h)) != 0)
		return rc;
	/* The flags say which optional parts the model has; the sections must agree. */
	static const struct {
		int which;
		uint32_t flag;
		const char *what;
	} flagged[] = {
		{SEC_UBIA, FLAG_BIASES, "biases"},
		{SEC_IBIA, FLAG_BIASES, "biases"},
		{SEC_SEEN, FLAG_SEEN, "seen entries"},
	};
	for (size_t i = 0; i < sizeof flagged / sizeof flagged[0]; i++)
		if (found[flagged[i].which] != !!(h.flags & flagged[i].flag))
			return corrupt(r, "section %s is %s, but the header says the model has %s%s",
				       section_tags[flagged[i].which], found[flagged[i].which] ? "present" : "missing",
				       found[flagged[i].which] ? "no " : "", flagged[i].what);
	struct pieces p = {.user_ids = sec[SEC_UIDS].payload, .item_ids = sec[SEC_IIDS].payload};
	if ((rc = check_size(r, sec, SEC_UFAC, add_mul(0, (uint64_t)(h.users * h.rank), sizeof(float)))) ||
	    (rc = check_size(r, sec, SEC_IFAC, add_mul(0, (uint64_t)(h.items * h.rank), sizeof(float)))))
		return rc;
	p.user_factors = sec[SEC_UFAC].payload;
	p.item_factors = sec[SEC_IFAC].payload;
	if (h.flags & FLAG_BIASES) {
		if ((rc = check_size(r, sec, SEC_UBIA, (size_t)h.users * sizeof(float))) ||
		    (rc = check_size(r, sec, SEC_IBIA, (size_t)h.items * sizeof(float))))
			return rc;
		p.user_bias = sec[SEC_UBIA].payload;
		p.item_bias = sec[SEC_IBIA].payload;
	}
	if (h.flags & FLAG_SEEN) {
		struct span all = sec[SEC_SEEN].payload;
		int64_t seen = -1;
		if (all.n >= sizeof seen)
			memcpy(&seen, all.p, sizeof seen);
		if (seen < 0 || seen > h.users * h.items)
			return corrupt(r, "section SEEN: its count of entries is out of range");
		size_t offsets = (size_t)(h.users + 1) * sizeof(int64_t);
		rc = check_size(r, sec, SEC_SEEN, add_mul(sizeof seen + offsets, (uint64_t)seen, sizeof(int32_t)));
		if (rc)
			return rc;
		p.seen = seen;
		p.seen_offsets = (struct span){all.p + sizeof seen, offsets};
		p.seen_items = (struct span){all.p + sizeof seen + offsets, (size_t)seen * sizeof(int32_t)};
	}
	return build_model(r, &h, &p, out);
}

static int parse_model(struct reader *r, starfa_model **out)
{
	if (r->size < 8 || memcmp(r->data, MODEL_MAGIC, 8) != 0)
		return corrupt(r, "the file does not begin with STARFAMD");
	if (r->size < 16) /* the version and a checksum at least */
		return corrupt(r, "truncated inside the header");
	r->pos = 8;
	uint32_t version = get_u32(r);
	if (version == 1)
		return parse_v1(r, out);
	if (version == 2)
		return parse_v2(r, out);
	return starfa_set_error(STARFA_EFORMAT, "%s: model format version %u; this starfa reads versions 1 and %u",
				r->path, version, MODEL_VERSION);
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

/* ------------------------------------------------------------------ export */

static const char *const export_names[] = {"user-factors", "item-factors", "user-bias",
					   "item-bias",    "topic-word",   "doc-topic"};
#define EXPORTS ((int)(sizeof export_names / sizeof export_names[0]))

int starfa_topic_word(const starfa_model *m, float *beta)
{
	if (!m || !beta || m->rank < 1 || (m->kind != STARFA_MODEL_TOPIC && m->kind != STARFA_MODEL_NONNEG))
		return starfa_set_error(STARFA_EINVAL, "topic-word probabilities need a topic model or a non-negative one%s%s",
					m ? ", not " : "", m ? starfa_model_kind_name(m->kind) : "");
	const int64_t K = m->rank, W = m->nitems;
	for (int64_t k = 0; k < K; k++) {
		double total = 0;
		for (int64_t w = 0; w < W; w++) {
			float v = m->item_factors[w * K + k];
			if (!(v >= 0))
				return starfa_set_error(STARFA_EINVAL, "word %lld's weight in topic %lld is %g, not >= 0",
							(long long)w + 1, (long long)k + 1, v);
			total += v;
		}
		for (int64_t w = 0; w < W; w++)
			beta[k * W + w] = total > 0 ? (float)(m->item_factors[w * K + k] / total) : (float)(1.0 / (double)W);
	}
	return 0;
}

/* A topic model's proportions as a tab-separated file: topic-word (K lines of W) or doc-topic (a line per
 * document, K values); no ids. */
static int export_proportions(const starfa_model *m, starfa_export_what what, const char *path)
{
	const int topics = what == STARFA_EXPORT_TOPIC_WORD;
	if (!topics && m->kind != STARFA_MODEL_TOPIC && m->kind != STARFA_MODEL_NONNEG)
		return starfa_set_error(STARFA_EINVAL, "doc-topic needs a topic or count model; this one is %s (%s)",
					starfa_model_kind_name(m->kind), m->algorithm);
	const int64_t K = m->rank, rows = topics ? K : m->nusers, cols = topics ? m->nitems : K;
	float *v = starfa_malloc((size_t)(rows * cols), sizeof(float));
	double *weight = starfa_malloc((size_t)K, sizeof(double));
	if (!v || !weight) {
		free(v);
		free(weight);
		return STARFA_ENOMEM;
	}
	int rc = 0;
	/* θ_d ∝ γ_d (LDA), or ∝ x_dk colsum(H)_k for a count model: each topic's expected share of the words */
	for (int64_t k = 0; k < K; k++)
		weight[k] = m->kind == STARFA_MODEL_TOPIC ? 1.0 : 0.0;
	for (int64_t w = 0; !topics && m->kind == STARFA_MODEL_NONNEG && w < m->nitems; w++)
		for (int64_t k = 0; k < K; k++)
			weight[k] += m->item_factors[w * K + k];
	if (topics) {
		rc = starfa_topic_word(m, v);
	} else {
		for (int64_t d = 0; d < rows && !rc; d++) {
			double total = 0;
			for (int64_t k = 0; k < K; k++)
				total += m->user_factors[d * K + k] * weight[k];
			if (m->kind == STARFA_MODEL_TOPIC && !(total > 0))
				rc = starfa_set_error(STARFA_EINVAL, "document %lld's gamma sums to %g, not > 0", (long long)d + 1,
						      total);
			if (!(total >= 0) || !isfinite(total))
				rc = starfa_set_error(STARFA_EINVAL, "document %lld's scores sum to %g, not a number >= 0",
						      (long long)d + 1, total);
			for (int64_t k = 0; k < K; k++) /* scores all zero (an empty document of KL-NMF): 1 / K each */
				v[d * K + k] = total > 0 ? (float)(m->user_factors[d * K + k] * weight[k] / total)
							 : (float)(1.0 / (double)K);
		}
	}
	free(weight);
	struct outfile o;
	if (!rc)
		rc = outfile_open(&o, path);
	if (rc) {
		free(v);
		return rc;
	}
	for (int64_t r = 0; r < rows && !ferror(o.f); r++) {
		for (int64_t c = 0; c < cols; c++)
			fprintf(o.f, c ? "\t%.9g" : "%.9g", v[r * cols + c]);
		fputc('\n', o.f);
	}
	free(v);
	return outfile_close(&o, 1, topics ? "the topic-word probabilities" : "the document-topic proportions");
}

int starfa_export_parse(const char *name, starfa_export_what *out)
{
	for (int i = 0; name && i < EXPORTS; i++)
		if (strcmp(name, export_names[i]) == 0) {
			*out = (starfa_export_what)i;
			return 0;
		}
	return -1;
}

const char *starfa_export_name(starfa_export_what what)
{
	return (unsigned)what < EXPORTS ? export_names[what] : "unknown";
}

int starfa_model_export(const starfa_model *m, starfa_export_what what, const char *path)
{
	if (!path || (unsigned)what >= EXPORTS)
		return starfa_set_error(STARFA_EINVAL, "starfa_model_export: need a path and one of user-factors, "
						       "item-factors, user-bias, item-bias, topic-word, doc-topic");
	int rc = check_model(m);
	if (rc)
		return rc;
	if (what == STARFA_EXPORT_TOPIC_WORD || what == STARFA_EXPORT_DOC_TOPIC)
		return export_proportions(m, what, path);
	const int users = what == STARFA_EXPORT_USER_FACTORS || what == STARFA_EXPORT_USER_BIAS;
	const int bias = what == STARFA_EXPORT_USER_BIAS || what == STARFA_EXPORT_ITEM_BIAS;
	const char *side = users ? "user" : "item";
	const float *v = bias ? (users ? m->user_bias : m->item_bias) : (users ? m->user_factors : m->item_factors);
	const int64_t rows = users ? m->nusers : m->nitems, cols = bias ? 1 : m->rank;
	const starfa_idmap *ids = users ? m->user_ids : m->item_ids;
	if (!v)
		return starfa_set_error(STARFA_EINVAL, "the model (%s, %s) has no %s biases to export",
					starfa_model_kind_name(m->kind), m->algorithm, side);
	/* Everything that could make a bad file is refused before one is created. */
	char buf[32];
	for (int64_t i = 0; i < rows; i++) {
		const char *name = id_name(ids, i, buf);
		if (strpbrk(name, "\t\r\n"))
			return starfa_set_error(STARFA_EINVAL, "%s id %lld holds a tab or a line break: it cannot be a "
							       "field of a tab-separated file", side, (long long)i + 1);
		for (int64_t d = 0; d < cols; d++)
			if (!isfinite(v[i * cols + d]))
				return starfa_set_error(STARFA_EINVAL, "%s '%s' has a non-finite %s: nothing exported",
							side, name, bias ? "bias" : "factor");
	}
	struct outfile o;
	if ((rc = outfile_open(&o, path)) != 0)
		return rc;
	for (int64_t i = 0; i < rows && !ferror(o.f); i++) {
		fputs(id_name(ids, i, buf), o.f);
		for (int64_t d = 0; d < cols; d++)
			fprintf(o.f, "\t%.9g", v[i * cols + d]); /* 9 significant digits: the float exactly */
		fputc('\n', o.f);
	}
	char what_text[32];
	snprintf(what_text, sizeof what_text, "the %s %s", side, bias ? "biases" : "factors");
	return outfile_close(&o, 1, what_text);
}

int starfa_model_from_factors(const struct starfa_factors *f, const char *algorithm, const starfa_coo *train,
			      starfa_csr **seen, double lambda, double alpha, starfa_model **out)
{
	starfa_model *m = starfa_calloc(1, sizeof *m);
	if (!m)
		return STARFA_ENOMEM;
	m->kind = f->kind;
	snprintf(m->algorithm, sizeof m->algorithm, "%s", algorithm);
	m->nusers = f->nusers;
	m->nitems = f->nitems;
	m->rank = f->rank;
	m->global_mean = f->mu;
	m->lambda = lambda;
	m->alpha = alpha;
	const int64_t k = f->rank;
	m->user_factors = starfa_malloc((size_t)(m->nusers * k), sizeof(float));
	m->item_factors = starfa_malloc((size_t)(m->nitems * k), sizeof(float));
	int rc = !m->user_factors || !m->item_factors ? STARFA_ENOMEM : 0;
	if (!rc && f->ub) {
		m->user_bias = starfa_malloc((size_t)m->nusers, sizeof(float));
		m->item_bias = starfa_malloc((size_t)m->nitems, sizeof(float));
		rc = !m->user_bias || !m->item_bias ? STARFA_ENOMEM : 0;
	}
	if (!rc) {
		for (int64_t u = 0; u < m->nusers; u++) {
			memcpy(m->user_factors + u * k, f->U + u * f->ldu, (size_t)k * sizeof(float));
			if (f->ub)
				m->user_bias[u] = f->ub[u * f->ub_stride];
		}
		for (int64_t i = 0; i < m->nitems; i++) {
			memcpy(m->item_factors + i * k, f->V + i * f->ldv, (size_t)k * sizeof(float));
			if (f->ib)
				m->item_bias[i] = f->ib[i * f->ib_stride];
		}
		/* The model owns copies of the ids (or none: indices) and the training entries. */
		rc = idmap_copy(train->row_ids, &m->user_ids);
		if (!rc)
			rc = idmap_copy(train->col_ids, &m->item_ids);
	}
	if (rc) {
		starfa_model_free(m);
		return rc;
	}
	m->seen = *seen;
	*seen = NULL;
	*out = m;
	return 0;
}
