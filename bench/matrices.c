/* The bench's matrices: real data files found in the data folders, and synthetic ones
 * generated here (deterministic, OpenMP-parallel, exactly the same for a seed whatever the
 * thread count: every row draws from its own random stream).
 *
 *   uniform   100,000 x 100,000, each row's length Poisson(100) (0.1% density, ~10M
 *             nonzeros), columns uniform without repetition.
 *   netflix   480,189 x 17,770 (the Netflix prize's shape), 99,000,000 nonzeros.
 *             Row lengths follow Zipf's law: the row of rank i (rows ranked in a random
 *             order) has round(C / (i + 1000)) nonzeros, clamped to [1, cols], with C
 *             chosen so that they add up to the target. Columns are drawn without
 *             repetition from a Zipf distribution of exponent 1/2 (weight rank^-1/2) over
 *             a random permutation of the columns: the most popular column is in about a
 *             third of the rows (the most rated movie of the real data: in about half);
 *             exponent 1 would put it in nearly every row.
 *   uniform-small, netflix-small   the same at 1/10 of the rows and columns (--quick).
 * Values are uniform in (0, 1].
 *
 * Drawing "with repetitions discarded until the row has d distinct columns" is sequential
 * sampling without replacement; a row that needs more than 1/8 of the columns draws the
 * same distribution in one pass instead (Efraimidis-Spirakis: each column gets the key
 * Exp(1) / weight and the d smallest keys win), which does not slow down as the row fills. */
#include "bench/bench.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------ random streams */

struct rng {
	uint64_t state;
};

static struct rng rng_for(uint64_t seed, uint64_t stream)
{
	struct rng r = {bench_mix64(seed * 0x9e3779b97f4a7c15ull ^ bench_mix64(stream + 0x7f4a7c15ull))};
	return r;
}

static uint64_t rng_next(struct rng *r)
{
	return bench_mix64(r->state += 0x9e3779b97f4a7c15ull);
}

/* Uniform in (0, 1]: never 0, so logarithms and "values in (0, 1]" hold. */
static double rng_unit(struct rng *r)
{
	return ((double)(rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

static int64_t rng_below(struct rng *r, int64_t n)
{
	return (int64_t)(((unsigned __int128)rng_next(r) * (uint64_t)n) >> 64);
}

/* Knuth's multiplication method: fine for the means used here (<= a few hundred). */
static int64_t rng_poisson(struct rng *r, double mean)
{
	double limit = exp(-mean), p = 1.0;
	int64_t k = -1;
	do {
		k++;
		p *= rng_unit(r);
	} while (p > limit);
	return k;
}

/* ------------------------------------------------------------------ column distributions */

/* Vose's alias table: one draw is one random number and one comparison. */
struct alias_table {
	int64_t n;
	double *prob;
	int32_t *alias;
	double *weight; /* the weights it was built from (Efraimidis-Spirakis keys need them) */
};

static void alias_free(struct alias_table *t)
{
	free(t->prob);
	free(t->alias);
	free(t->weight);
	memset(t, 0, sizeof *t);
}

/* Takes ownership of weight (n entries, positive). */
static int alias_build(struct alias_table *t, double *weight, int64_t n)
{
	t->n = n;
	t->weight = weight;
	t->prob = bench_alloc((size_t)n, sizeof *t->prob, "alias table");
	t->alias = bench_alloc((size_t)n, sizeof *t->alias, "alias table");
	int32_t *small = bench_alloc((size_t)n, sizeof *small, "alias table"),
		*large = bench_alloc((size_t)n, sizeof *large, "alias table");
	if (!t->prob || !t->alias || !small || !large) {
		free(small);
		free(large);
		alias_free(t);
		return -1;
	}
	double total = 0;
	for (int64_t j = 0; j < n; j++)
		total += weight[j];
	int64_t ns = 0, nl = 0;
	for (int64_t j = 0; j < n; j++) {
		t->prob[j] = weight[j] * (double)n / total;
		t->alias[j] = (int32_t)j;
		if (t->prob[j] < 1.0)
			small[ns++] = (int32_t)j;
		else
			large[nl++] = (int32_t)j;
	}
	while (ns > 0 && nl > 0) {
		int32_t s = small[--ns], l = large[nl - 1];
		t->alias[s] = l;
		t->prob[l] -= 1.0 - t->prob[s];
		if (t->prob[l] < 1.0) {
			nl--;
			small[ns++] = l;
		}
	}
	while (nl > 0)
		t->prob[large[--nl]] = 1.0;
	while (ns > 0) /* rounding leftovers */
		t->prob[small[--ns]] = 1.0;
	free(small);
	free(large);
	return 0;
}

static int32_t alias_draw(const struct alias_table *t, struct rng *r)
{
	int64_t j = rng_below(r, t->n);
	return rng_unit(r) <= t->prob[j] ? (int32_t)j : t->alias[j];
}

/* ------------------------------------------------------------------ one row */

/* Per-thread scratch: a bitmap of the columns taken, and keys for the one-pass method. */
struct row_scratch {
	uint64_t *taken;
	double *keys, *select;
};

static int scratch_init(struct row_scratch *s, int64_t ncols)
{
	size_t words = (size_t)(ncols + 63) / 64;
	s->taken = calloc(words, sizeof *s->taken);
	s->keys = malloc((size_t)ncols * sizeof *s->keys);
	s->select = malloc((size_t)ncols * sizeof *s->select);
	return s->taken && s->keys && s->select ? 0 : -1;
}

static void scratch_free(struct row_scratch *s)
{
	free(s->taken);
	free(s->keys);
	free(s->select);
}

static int compare_int32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

/* The k-th smallest (0-based) of v[0:n] (reorders v): iterative quickselect. */
static double kth_smallest(double *v, int64_t n, int64_t k)
{
	int64_t lo = 0, hi = n - 1;
	while (lo < hi) {
		double pivot = v[lo + (hi - lo) / 2];
		int64_t i = lo, j = hi;
		while (i <= j) {
			while (v[i] < pivot)
				i++;
			while (v[j] > pivot)
				j--;
			if (i <= j) {
				double t = v[i];
				v[i] = v[j];
				v[j] = t;
				i++;
				j--;
			}
		}
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			return v[k];
	}
	return v[k];
}

/* d distinct columns in one pass: the d smallest keys Exp(1) / weight, emitted in column
 * order (so already sorted). weight NULL: uniform. */
static void row_one_pass(int64_t d, int64_t ncols, const double *weight, struct rng *r, struct row_scratch *s,
			 int32_t *cols)
{
	for (int64_t j = 0; j < ncols; j++)
		s->keys[j] = s->select[j] = -log(rng_unit(r)) / (weight ? weight[j] : 1.0);
	double threshold = kth_smallest(s->select, ncols, d - 1);
	int64_t below = 0;
	for (int64_t j = 0; j < ncols; j++)
		below += s->keys[j] < threshold;
	int64_t ties = d - below, n = 0; /* keys equal to the threshold fill what is left */
	for (int64_t j = 0; j < ncols && n < d; j++)
		if (s->keys[j] < threshold || (s->keys[j] == threshold && ties-- > 0))
			cols[n++] = (int32_t)j;
}

static void sort_columns(int32_t *cols, int64_t n)
{
	if (n > 32) {
		qsort(cols, (size_t)n, sizeof *cols, compare_int32);
		return;
	}
	for (int64_t i = 1; i < n; i++) { /* insertion sort: the common short row */
		int32_t c = cols[i];
		int64_t j = i;
		for (; j > 0 && cols[j - 1] > c; j--)
			cols[j] = cols[j - 1];
		cols[j] = c;
	}
}

/* d distinct columns by drawing until d are taken, in increasing order; the bitmap is left
 * clear. Falls back to the one-pass method (same distribution) if the draws stall. */
static void row_draw(int64_t d, int64_t ncols, const struct alias_table *t, struct rng *r, struct row_scratch *s,
		     int32_t *cols)
{
	int64_t n = 0, draws = 0, max_draws = 64 * d + 1024;
	while (n < d && draws < max_draws) {
		int32_t c = t ? alias_draw(t, r) : (int32_t)rng_below(r, ncols);
		draws++;
		uint64_t bit = 1ull << (c % 64);
		if (s->taken[c / 64] & bit)
			continue;
		s->taken[c / 64] |= bit;
		cols[n++] = c;
	}
	int64_t words = (ncols + 63) / 64;
	if (n == d && (double)d * log2((double)d + 1.0) >= (double)words) {
		/* Reading the bitmap in order is cheaper than sorting, and clears it as it goes. */
		n = 0;
		for (int64_t w = 0; w < words; w++) {
			uint64_t bits = s->taken[w];
			s->taken[w] = 0;
			for (; bits; bits &= bits - 1)
				cols[n++] = (int32_t)(w * 64 + __builtin_ctzll(bits));
		}
		return;
	}
	for (int64_t i = 0; i < n; i++)
		s->taken[cols[i] / 64] &= ~(1ull << (cols[i] % 64));
	if (n < d)
		row_one_pass(d, ncols, t ? t->weight : NULL, r, s, cols);
	else
		sort_columns(cols, d);
}

static void row_fill(int64_t d, int64_t ncols, const struct alias_table *t, struct rng *r, struct row_scratch *s,
		     int32_t *cols, float *vals)
{
	if (d * 8 > ncols)
		row_one_pass(d, ncols, t ? t->weight : NULL, r, s, cols);
	else
		row_draw(d, ncols, t, r, s, cols);
	for (int64_t i = 0; i < d; i++)
		vals[i] = (float)rng_unit(r);
}

/* ------------------------------------------------------------------ whole matrices */

static void free_generated(starfa_csr *csr);

/* CSR with the given row lengths, rows filled in parallel. */
static starfa_csr *generate(int64_t nrows, int64_t ncols, const int64_t *degree, const struct alias_table *t,
			    uint64_t seed)
{
	starfa_csr *csr = calloc(1, sizeof *csr);
	if (!csr)
		return NULL;
	csr->nrows = nrows;
	csr->ncols = ncols;
	csr->rowptr = bench_alloc((size_t)nrows + 1, sizeof *csr->rowptr, "generated row offsets");
	if (!csr->rowptr)
		goto fail;
	csr->rowptr[0] = 0;
	for (int64_t i = 0; i < nrows; i++)
		csr->rowptr[i + 1] = csr->rowptr[i] + degree[i];
	csr->nnz = csr->rowptr[nrows];
	csr->colind = bench_alloc((size_t)csr->nnz, sizeof *csr->colind, "generated column indices");
	csr->val = bench_alloc((size_t)csr->nnz, sizeof *csr->val, "generated values");
	if (!csr->colind || !csr->val)
		goto fail;
	int failed = 0;
#pragma omp parallel reduction(| : failed)
	{
		struct row_scratch s;
		if (scratch_init(&s, ncols) != 0)
			failed = 1;
#pragma omp for schedule(dynamic, 256)
		for (int64_t i = 0; i < nrows; i++) {
			if (failed)
				continue;
			struct rng r = rng_for(seed, (uint64_t)i);
			row_fill(degree[i], ncols, t, &r, &s, csr->colind + csr->rowptr[i], csr->val + csr->rowptr[i]);
		}
		scratch_free(&s);
	}
	if (failed) {
		fprintf(stderr, "starfa_bench: out of memory for the generator's scratch space\n");
		goto fail;
	}
	return csr;
fail:
	free_generated(csr);
	return NULL;
}

static starfa_csr *generate_uniform(int64_t n, double density, uint64_t seed)
{
	int64_t *degree = bench_alloc((size_t)n, sizeof *degree, "row lengths");
	if (!degree)
		return NULL;
#pragma omp parallel for schedule(static)
	for (int64_t i = 0; i < n; i++) {
		struct rng r = rng_for(seed ^ 0xd1b54a32d192ed03ull, (uint64_t)i);
		int64_t d = rng_poisson(&r, density * (double)n);
		degree[i] = d > n ? n : d;
	}
	starfa_csr *csr = generate(n, n, degree, NULL, seed);
	free(degree);
	return csr;
}

/* Fisher-Yates with a seeded stream: a random order of 0..n-1. */
static int64_t *random_permutation(int64_t n, uint64_t seed)
{
	int64_t *p = bench_alloc((size_t)n, sizeof *p, "permutation");
	if (!p)
		return NULL;
	for (int64_t i = 0; i < n; i++)
		p[i] = i;
	struct rng r = rng_for(seed, 0x5eed);
	for (int64_t i = n - 1; i > 0; i--) {
		int64_t j = rng_below(&r, i + 1), t = p[i];
		p[i] = p[j];
		p[j] = t;
	}
	return p;
}

static int64_t zipf_degree(double c, int64_t rank, int64_t offset, int64_t ncols)
{
	int64_t d = llround(c / (double)(rank + offset));
	return d < 1 ? 1 : d > ncols ? ncols : d;
}

/* Row lengths round(C / (rank + offset)) clamped to [1, ncols], C found by bisection so that
 * they add up to target (as closely as rounding allows), ranks in a random row order. */
static int64_t *zipf_row_degrees(int64_t nrows, int64_t ncols, int64_t target, int64_t offset, uint64_t seed)
{
	double lo = 0.0, hi = (double)ncols * (double)(nrows + offset);
	for (int iter = 0; iter < 100; iter++) {
		double c = 0.5 * (lo + hi);
		int64_t total = 0;
		for (int64_t i = 0; i < nrows; i++)
			total += zipf_degree(c, i, offset, ncols);
		if (total < target)
			lo = c;
		else
			hi = c;
	}
	int64_t *order = random_permutation(nrows, seed ^ 0x243f6a8885a308d3ull);
	int64_t *degree = bench_alloc((size_t)nrows, sizeof *degree, "row lengths");
	if (order && degree)
		for (int64_t i = 0; i < nrows; i++)
			degree[order[i]] = zipf_degree(hi, i, offset, ncols);
	free(order);
	if (!order) {
		free(degree);
		return NULL;
	}
	return degree;
}

static starfa_csr *generate_netflix(int64_t nrows, int64_t ncols, int64_t target, int64_t offset, uint64_t seed)
{
	int64_t *degree = zipf_row_degrees(nrows, ncols, target, offset, seed);
	int64_t *colrank = random_permutation(ncols, seed ^ 0x13198a2e03707344ull);
	double *weight = bench_alloc((size_t)ncols, sizeof *weight, "column weights");
	starfa_csr *csr = NULL;
	struct alias_table table = {0};
	if (degree && colrank && weight) {
		for (int64_t j = 0; j < ncols; j++) /* column j is the colrank[j]-th most popular */
			weight[j] = 1.0 / sqrt((double)(colrank[j] + 1));
		if (alias_build(&table, weight, ncols) == 0)
			csr = generate(nrows, ncols, degree, &table, seed);
		weight = NULL; /* the table owns it */
	}
	alias_free(&table);
	free(weight);
	free(degree);
	free(colrank);
	return csr;
}

/* ------------------------------------------------------------------ named matrices */

struct named_matrix {
	const char *name;
	const char *file;	/* a data file, or NULL for a generator */
	int64_t rows, cols;	/* generators */
	double density;		/* uniform */
	int64_t target, offset; /* netflix-shaped */
};

static const struct named_matrix named[] = {
	{"email-Enron", "email-Enron.mtx"},
	{"NotreDame_www", "NotreDame_www.mtx"},
	{"movielens-small", "movielens-small.csv"},
	{"sotu", "sotu.docword.txt"},
	{"uniform", NULL, 100000, 100000, 0.001, 0, 0},
	{"netflix", NULL, 480189, 17770, 0, 99000000, 1000},
	{"uniform-small", NULL, 10000, 10000, 0.001, 0, 0},
	{"netflix-small", NULL, 48019, 1777, 0, 990000, 100},
};
#define NNAMED (sizeof named / sizeof named[0])

const char *bench_matrix_names(void)
{
	return "email-Enron, NotreDame_www, movielens-small, sotu (data files); uniform, netflix, uniform-small, "
	       "netflix-small (generated); or a path to any .mtx, ratings or docword file";
}

static int file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int find_data_file(const char *file, const struct bench_options *o, char *path, size_t len)
{
	for (int i = 0; i < o->ndata_dirs; i++) {
		snprintf(path, len, "%s/%s", o->data_dirs[i], file);
		if (file_exists(path))
			return 0;
	}
	return -1;
}

static int load_file(const char *path, struct bench_matrix *m)
{
	starfa_coo *coo = NULL;
	if (starfa_read(path, STARFA_FORMAT_AUTO, &coo) != 0 || starfa_csr_from_coo(coo, &m->csr) != 0) {
		fprintf(stderr, "starfa_bench: %s\n", starfa_last_error());
		starfa_coo_free(coo);
		return -1;
	}
	starfa_coo_free(coo);
	return 0;
}

static int load_named(const struct named_matrix *nm, const struct bench_options *o, struct bench_matrix *m)
{
	if (nm->file) {
		char path[1024];
		if (find_data_file(nm->file, o, path, sizeof path) != 0) {
			bench_note("%s: %s not found in the data folders (scripts/fetch-data.sh fetches the public "
				   "ones): skipped",
				   nm->name, nm->file);
			return 1;
		}
		snprintf(m->source, sizeof m->source, "%s", nm->file);
		return load_file(path, m);
	}
	m->synthetic = 1;
	if (nm->target == 0) {
		m->csr = generate_uniform(nm->rows, nm->density, o->seed);
		snprintf(m->source, sizeof m->source,
			 "generated: %lld x %lld, row lengths Poisson(%g), uniform columns, seed %llu",
			 (long long)nm->rows, (long long)nm->cols, nm->density * (double)nm->cols,
			 (unsigned long long)o->seed);
	} else {
		m->csr = generate_netflix(nm->rows, nm->cols, nm->target, nm->offset, o->seed);
		snprintf(m->source, sizeof m->source,
			 "generated: %lld x %lld, row of rank i has ~C/(i+%lld) nonzeros (Zipf), "
			 "columns Zipf(1/2) over a random permutation, seed %llu",
			 (long long)nm->rows, (long long)nm->cols, (long long)nm->offset, (unsigned long long)o->seed);
	}
	return m->csr ? 0 : -1;
}

/* Sorted unique columns in range: what the kernels and the references assume. */
static int validate(const struct bench_matrix *m)
{
	const starfa_csr *s = m->csr;
	int64_t bad = -1;
#pragma omp parallel for schedule(static) reduction(max : bad)
	for (int64_t r = 0; r < s->nrows; r++)
		for (int64_t p = s->rowptr[r]; p < s->rowptr[r + 1]; p++)
			if (s->colind[p] < 0 || s->colind[p] >= s->ncols ||
			    (p > s->rowptr[r] && s->colind[p] <= s->colind[p - 1]))
				bad = r > bad ? r : bad;
	if (bad >= 0) {
		fprintf(stderr, "starfa_bench: %s: row %lld has unsorted, repeated or out-of-range columns\n", m->name,
			(long long)bad);
		return -1;
	}
	return 0;
}

static int finish(struct bench_matrix *m)
{
	starfa_csr *s = m->csr;
	if (validate(m) != 0)
		return -1;
	if (s->nnz > (int64_t)UINT32_MAX || s->nrows >= (int64_t)UINT32_MAX) {
		fprintf(stderr, "starfa_bench: %s: %lld nonzeros do not fit the kernels' 32-bit offsets\n", m->name,
			(long long)s->nnz);
		return -1;
	}
	m->rowptr32 = bench_alloc((size_t)s->nrows + 1, sizeof *m->rowptr32, "32-bit row offsets");
	int64_t *col_count = calloc((size_t)s->ncols + 1, sizeof *col_count);
	if (!m->rowptr32 || !col_count) {
		free(col_count);
		return -1;
	}
	m->nrows = s->nrows;
	m->ncols = s->ncols;
	m->nnz = s->nnz;
	for (int64_t r = 0; r <= s->nrows; r++)
		m->rowptr32[r] = (uint32_t)s->rowptr[r];
	/* int32 and uint32 may alias; every index is >= 0, so the bits are the same numbers. */
	m->colind32 = (const uint32_t *)s->colind;
	for (int64_t r = 0; r < s->nrows; r++) {
		int64_t len = s->rowptr[r + 1] - s->rowptr[r];
		m->max_row_nnz = len > m->max_row_nnz ? len : m->max_row_nnz;
	}
	uint64_t print = 0;
#pragma omp parallel for schedule(static) reduction(+ : print)
	for (int64_t r = 0; r < s->nrows; r++)
		for (int64_t p = s->rowptr[r]; p < s->rowptr[r + 1]; p++) {
			uint32_t bits;
			memcpy(&bits, &s->val[p], sizeof bits);
			print += bench_mix64(((uint64_t)r << 32 | (uint32_t)s->colind[p]) ^ bench_mix64(bits));
		}
	m->fingerprint = print;
	for (int64_t p = 0; p < s->nnz; p++)
		col_count[s->colind[p]]++;
	for (int64_t c = 0; c < s->ncols; c++)
		m->max_col_nnz = col_count[c] > m->max_col_nnz ? col_count[c] : m->max_col_nnz;
	free(col_count);
	return 0;
}

int bench_matrix_load(const char *name, const struct bench_options *o, struct bench_matrix *m)
{
	memset(m, 0, sizeof *m);
	double t0 = bench_now();
	int rc = -1;
	const struct named_matrix *nm = NULL;
	for (size_t i = 0; i < NNAMED; i++)
		if (!strcmp(named[i].name, name))
			nm = &named[i];
	if (nm) {
		snprintf(m->name, sizeof m->name, "%s", name);
		rc = load_named(nm, o, m);
	} else if (file_exists(name)) {
		const char *base = strrchr(name, '/');
		snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : name);
		snprintf(m->source, sizeof m->source, "%s", m->name);
		rc = load_file(name, m);
	} else {
		fprintf(stderr, "starfa_bench: unknown matrix '%s' (known: %s)\n", name, bench_matrix_names());
		return -1;
	}
	if (rc == 0)
		rc = finish(m);
	if (rc != 0) {
		bench_matrix_free(m);
		return rc;
	}
	m->load_seconds = bench_now() - t0;
	return 0;
}

/* A generated CSR is the bench's own allocation; a loaded one the library's. */
static void free_generated(starfa_csr *csr)
{
	if (!csr)
		return;
	free(csr->rowptr);
	free(csr->colind);
	free(csr->val);
	free(csr);
}

void bench_matrix_free(struct bench_matrix *m)
{
	if (m->synthetic)
		free_generated(m->csr);
	else
		starfa_csr_free(m->csr);
	free(m->rowptr32);
	m->csr = NULL;
	m->rowptr32 = NULL;
	m->colind32 = NULL;
}
