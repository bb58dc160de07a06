/* The one test driver. Usage:
 *   starfa_test [--list] [GROUP | GROUP.t | GROUP/NAME]...
 * With no selection every test runs. Exit: 0 all passed, 77 all skipped, 1 a failure. */
#include "testing.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_TESTS 512

struct test_case {
	const char *group, *name;
	int (*fn)(void);
};

static struct test_case tests[MAX_TESTS];
static int ntests;
static int runtime_started;
static char scratch_dir[512];

void testing_register(const char *group, const char *name, int (*fn)(void))
{
	if (ntests == MAX_TESTS) {
		fprintf(stderr, "too many tests: raise MAX_TESTS in tests/driver.c\n");
		abort();
	}
	tests[ntests++] = (struct test_case){group, name, fn};
}

void testing_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "  %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void testing_note(const char *fmt, ...)
{
	va_list ap;
	fputs("  note: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
}

static uint64_t seed;

double testing_digamma(double x)
{
	double r = 0;
	while (x < 20) {
		r -= 1 / x;
		x += 1;
	}
	double f = 1 / (x * x);
	return r + log(x) - 0.5 / x - f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f / 240)));
}

uint64_t testing_splitmix64(uint64_t seed, uint64_t index)
{
	uint64_t z = seed + (index + 1) * 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

uint64_t testing_seed(void)
{
	return seed;
}

int testing_quick(void)
{
	const char *v = getenv("STARFA_TEST_QUICK");
	return v && *v && strcmp(v, "0") != 0;
}

static uint64_t next(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

double testing_uniform(uint64_t *state)
{
	return (next(state) >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t testing_below(uint64_t *state, uint64_t n)
{
	return n ? next(state) % n : 0;
}

void testing_fill_random(float *x, size_t n, uint64_t *state)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(2.0 * testing_uniform(state) - 1.0);
}

void testing_poison(float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] = NAN;
}

starfa_csr *testing_random_csr(int64_t m, int64_t n, int64_t nnz, double skew, uint64_t *state)
{
	starfa_coo *coo = starfa_coo_new(m, n, nnz);
	if (!coo)
		return NULL;
	for (int64_t e = 0; e < nnz; e++) {
		double u = testing_uniform(state), v = testing_uniform(state);
		/* u^(1+skew) piles the draws onto low indices: a few heavy rows and columns. */
		coo->row[e] = (int32_t)(pow(u, 1.0 + skew) * m);
		coo->col[e] = (int32_t)(pow(v, 1.0 + skew) * n);
		coo->val[e] = (float)(2.0 * testing_uniform(state) - 1.0);
	}
	coo->nnz = nnz;
	starfa_csr *csr = NULL;
	int rc = starfa_csr_from_coo(coo, &csr);
	starfa_coo_free(coo);
	return rc ? NULL : csr;
}

starfa_csr *testing_band_csr(int64_t m, int64_t n, int64_t nnz, uint64_t *state)
{
	starfa_coo *coo = starfa_coo_new(m, n, nnz);
	if (!coo)
		return NULL;
	const int64_t lower = m / 2, upper = (int64_t)(0.6 * (double)m);
	for (int64_t e = 0; e < nnz; e++) {
		const int second = e % 5 == 4 && upper > lower;
		coo->row[e] = (int32_t)(second ? lower + (int64_t)testing_below(state, (uint64_t)(upper - lower))
					       : (int64_t)testing_below(state, (uint64_t)lower));
		coo->col[e] = (int32_t)(second ? n / 2 + (int64_t)testing_below(state, (uint64_t)(n - n / 2))
					       : (int64_t)testing_below(state, (uint64_t)(n / 2)));
		coo->val[e] = (float)(0.5 + testing_uniform(state));
	}
	coo->nnz = nnz;
	starfa_csr *S = NULL;
	int rc = starfa_csr_from_coo(coo, &S);
	starfa_coo_free(coo);
	return rc ? NULL : S;
}

int testing_band_same(const float *a, const float *b, int64_t n, int exact)
{
	if (exact)
		return memcmp(a, b, sizeof(float) * (size_t)n) == 0;
	for (int64_t e = 0; e < n; e++)
		if (!(fabsf(a[e] - b[e]) <= 1e-4f * (1.0f + fabsf(a[e]))))
			return 0;
	return 1;
}

int64_t testing_band_order(const starfa_tiled *t, starfa_side side, int64_t band, int zero_empty, int64_t *js)
{
	const int rows = side == STARFA_ROWS;
	const int64_t nc = rows ? starfa_tiled_col_tiles(t) : starfa_tiled_row_tiles(t);
	int64_t n = 0;
	for (int64_t j = 0; j < nc; j++)
		if ((rows ? starfa_tiled_tile_nnz(t, band, j) : starfa_tiled_tile_nnz(t, j, band)) > 0)
			js[n++] = j;
	if (n == 0 && zero_empty && nc > 0)
		js[n++] = nc - 1;
	return n;
}

starfa_tiled *testing_band_grid(const starfa_csr *A, int64_t P)
{
	starfa_tiling_options tiling = {P, P, 1, 1e6, 1e6};
	starfa_tiled *t = NULL;
	if (starfa_tiled_create(A, &tiling, &t) != 0) {
		testing_fail(__FILE__, __LINE__, "a %lldx%lld grid: %s", (long long)P, (long long)P, starfa_last_error());
		return NULL;
	}
	int leading_empty = 0, empty_band = 0;
	const int64_t nr = starfa_tiled_row_tiles(t), nc = starfa_tiled_col_tiles(t);
	for (int64_t i = 0; i < nr; i++) {
		int64_t band_nnz = 0;
		for (int64_t j = 0; j < nc; j++)
			band_nnz += starfa_tiled_tile_nnz(t, i, j);
		leading_empty |= band_nnz > 0 && starfa_tiled_tile_nnz(t, i, 0) == 0;
		empty_band |= band_nnz == 0;
	}
	if ((P == 2 && !leading_empty) || (P == 3 && !empty_band)) {
		testing_fail(__FILE__, __LINE__, "the %lldx%lld grid lacks the band shape it is for", (long long)P, (long long)P);
		starfa_tiled_free(t);
		return NULL;
	}
	return t;
}

double testing_explicit_objective(const starfa_model *m, const starfa_coo *train, double lambda, double lambda_bias,
				  double flat, double count_weight)
{
	if (!m || !train || m->nusers != train->nrows || m->nitems != train->ncols)
		return NAN;
	const int64_t r = m->rank;
	int64_t *count_u = calloc((size_t)m->nusers + 1, sizeof *count_u), *count_i = calloc((size_t)m->nitems + 1, sizeof *count_i);
	if (!count_u || !count_i) {
		free(count_u);
		free(count_i);
		return NAN;
	}
	double sse = 0;
	for (int64_t e = 0; e < train->nnz; e++) {
		const int64_t u = train->row[e], i = train->col[e];
		double pred = m->global_mean + (m->user_bias ? m->user_bias[u] : 0) + (m->item_bias ? m->item_bias[i] : 0);
		for (int64_t d = 0; d < r; d++)
			pred += (double)m->user_factors[u * r + d] * m->item_factors[i * r + d];
		sse += (train->val[e] - pred) * (train->val[e] - pred);
		count_u[u]++;
		count_i[i]++;
	}
	double reg = 0;
	for (int s = 0; s < 2; s++) {
		const int64_t rows = s ? m->nitems : m->nusers;
		const int64_t *count = s ? count_i : count_u;
		const float *F = s ? m->item_factors : m->user_factors, *b = s ? m->item_bias : m->user_bias;
		for (int64_t row = 0; row < rows; row++) {
			double x2 = 0;
			for (int64_t d = 0; d < r; d++)
				x2 += (double)F[row * r + d] * F[row * r + d];
			const double w = flat + count_weight * (double)(count[row] > 0 ? count[row] : 1);
			reg += w * (lambda * x2 + (b ? lambda_bias * (double)b[row] * b[row] : 0));
		}
	}
	free(count_u);
	free(count_i);
	return sse + reg;
}

starfa_coo *testing_with_unknown_ids(const starfa_coo *test)
{
	starfa_coo *t = starfa_coo_new(test->nrows + 1, test->ncols + 1, test->nnz + 2);
	if (!t)
		return NULL;
	for (int64_t e = 0; e < test->nnz; e++) { /* in reverse order: rows and their columns out of order */
		t->row[e] = test->row[test->nnz - 1 - e];
		t->col[e] = test->col[test->nnz - 1 - e];
		t->val[e] = test->val[test->nnz - 1 - e];
	}
	t->nnz = test->nnz + 2;
	t->row[test->nnz] = (int32_t)test->nrows;
	t->col[test->nnz] = 0;
	t->val[test->nnz] = 3.0f;
	t->row[test->nnz + 1] = 0;
	t->col[test->nnz + 1] = (int32_t)test->ncols;
	t->val[test->nnz + 1] = 2.5f;
	return t;
}

starfa_coo *testing_coo_of(const starfa_csr *S)
{
	starfa_coo *coo = starfa_coo_new(S->nrows, S->ncols, S->nnz);
	if (!coo)
		return NULL;
	for (int64_t r = 0; r < S->nrows; r++)
		for (int64_t e = S->rowptr[r]; e < S->rowptr[r + 1]; e++) {
			coo->row[coo->nnz] = (int32_t)r;
			coo->col[coo->nnz] = S->colind[e];
			coo->val[coo->nnz++] = S->val[e];
		}
	return coo;
}

starfa_coo *testing_corpus(int64_t D, int64_t W, int64_t nnz, uint64_t *rng, starfa_csr **csr)
{
	starfa_csr *S = testing_random_csr(D, W, nnz, 0.5, rng);
	if (!S)
		return NULL;
	for (int64_t e = 0; e < S->nnz; e++)
		S->val[e] = (float)(1 + (int)(4 * testing_uniform(rng)));
	int64_t gone = S->rowptr[3] - S->rowptr[2];
	memmove(S->colind + S->rowptr[2], S->colind + S->rowptr[3], sizeof(int32_t) * (size_t)(S->nnz - S->rowptr[3]));
	memmove(S->val + S->rowptr[2], S->val + S->rowptr[3], sizeof(float) * (size_t)(S->nnz - S->rowptr[3]));
	for (int64_t r = 3; r <= D; r++)
		S->rowptr[r] -= gone;
	S->nnz -= gone;
	*csr = S;
	return testing_coo_of(S);
}

int testing_halves(const starfa_csr *S, starfa_coo **observed, starfa_coo **evaluated)
{
	starfa_coo *obs = starfa_coo_new(S->nrows, S->ncols, S->nnz), *ev = starfa_coo_new(S->nrows, S->ncols, S->nnz);
	if (!obs || !ev) {
		starfa_coo_free(obs);
		starfa_coo_free(ev);
		return -1;
	}
	for (int64_t d = 0; d < S->nrows; d++)
		for (int64_t e = S->rowptr[d]; e < S->rowptr[d + 1]; e++) {
			starfa_coo *h = (e - S->rowptr[d]) % 2 ? ev : obs;
			h->row[h->nnz] = (int32_t)d;
			h->col[h->nnz] = S->colind[e];
			h->val[h->nnz++] = S->val[e];
		}
	*observed = obs;
	*evaluated = ev;
	return 0;
}

static starfa_options runtime_opts;

static int same_options(const starfa_options *a, const starfa_options *b)
{
	int same_sched = (!a->scheduler && !b->scheduler) ||
			 (a->scheduler && b->scheduler && strcmp(a->scheduler, b->scheduler) == 0);
	return a->ncpus == b->ncpus && a->ncuda == b->ncuda && a->calibrate == b->calibrate && same_sched;
}

int testing_runtime_with(const starfa_options *opts)
{
	if (runtime_started) {
		if (same_options(opts, &runtime_opts))
			return 0;
		starfa_shutdown();
		runtime_started = 0;
	}
	runtime_opts = *opts;
	runtime_opts.silent = 1;
	int rc = starfa_init(&runtime_opts);
	if (rc == 0)
		runtime_started = 1;
	return rc;
}

void testing_runtime_stop(void)
{
	if (runtime_started)
		starfa_shutdown();
	runtime_started = 0;
}

int testing_runtime(void)
{
	starfa_options opts;
	starfa_options_default(&opts);
	return testing_runtime_with(&opts);
}

int testing_runtime_cpus(int ncpus)
{
	starfa_options opts;
	starfa_options_default(&opts);
	opts.ncpus = ncpus;
	opts.ncuda = 0;
	return testing_runtime_with(&opts);
}

int testing_runtime_only(starfa_worker_kind kind)
{
	starfa_options opts;
	starfa_options_default(&opts);
	if (kind == STARFA_WORKER_CPU)
		opts.ncuda = 0;
	else
		opts.ncpus = 0;
	return testing_runtime_with(&opts);
}

const char *testing_write_file(const char *name, const char *text, size_t size)
{
	static char path[1024];
	snprintf(path, sizeof path, "%s/%s", scratch_dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(text, 1, size, f) != size || fclose(f) != 0) {
		fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
		exit(99);
	}
	return path;
}

void testing_env_restore(const char *name, char *saved)
{
	if (saved)
		setenv(name, saved, 1);
	else
		unsetenv(name);
	free(saved);
}

int testing_sgd_operands(const starfa_csr *S, const starfa_tiling_options *o, float *U, float *V, int64_t w,
			 starfa_tiled **t, starfa_dense **dU, starfa_dense **dV, starfa_sums **sse)
{
	*t = NULL;
	*dU = *dV = NULL;
	*sse = NULL;
	int rc = starfa_tiled_create(S, o, t);
	if (!rc)
		rc = starfa_dense_create(*t, STARFA_ROWS, U, w, dU);
	if (!rc)
		rc = starfa_dense_create(*t, STARFA_COLS, V, w, dV);
	if (!rc)
		rc = starfa_sums_create(1, sse);
	return rc;
}

void testing_sgd_operands_free(starfa_tiled *t, starfa_dense *dU, starfa_dense *dV, starfa_sums *sse)
{
	starfa_sums_free(sse);
	starfa_dense_free(dU);
	starfa_dense_free(dV);
	starfa_tiled_free(t);
}

static char *saved_home, *saved_model_dir;

void testing_home_private(const char *name)
{
	char home[1200];
	snprintf(home, sizeof home, "%s.d", testing_write_file(name, "", 0));
	const char *env = getenv("STARPU_HOME"), *dir = getenv("STARPU_PERF_MODEL_DIR");
	saved_home = env ? strdup(env) : NULL;
	saved_model_dir = dir ? strdup(dir) : NULL;
	testing_runtime_stop();
	setenv("STARPU_HOME", home, 1);
	unsetenv("STARPU_PERF_MODEL_DIR");
}

void testing_home_restore(void)
{
	testing_runtime_stop();
	testing_env_restore("STARPU_HOME", saved_home);
	testing_env_restore("STARPU_PERF_MODEL_DIR", saved_model_dir);
	saved_home = saved_model_dir = NULL;
}

static int selected(const struct test_case *t, int argc, char **argv)
{
	if (argc == 0)
		return 1;
	for (int i = 0; i < argc; i++) {
		char want[256];
		const char *base = strrchr(argv[i], '/');
		/* "tests/readers.t" (automake's log driver) selects the group "readers". */
		size_t len = strlen(argv[i]);
		if (len > 2 && strcmp(argv[i] + len - 2, ".t") == 0) {
			const char *b = base ? base + 1 : argv[i];
			snprintf(want, sizeof want, "%.*s", (int)(strlen(b) - 2), b);
			if (strcmp(want, t->group) == 0)
				return 1;
			continue;
		}
		snprintf(want, sizeof want, "%s/%s", t->group, t->name);
		if (strcmp(argv[i], t->group) == 0 || strcmp(argv[i], want) == 0)
			return 1;
	}
	return 0;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	int list = argc > 1 && strcmp(argv[1], "--list") == 0;
	if (list) {
		argc--;
		argv++;
	}
	const char *env_seed = getenv("STARFA_TEST_SEED");
	seed = env_seed ? strtoull(env_seed, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	if (!seed)
		seed = 1;

	/* StarPU 1.3 takes XDG_CACHE_HOME over STARPU_HOME: the tests' homes (the run's and the private
	 * ones) would all be that folder, shared with the user's own models */
	unsetenv("XDG_CACHE_HOME");
	const char *tmp = getenv("TMPDIR");
	snprintf(scratch_dir, sizeof scratch_dir, "%s/starfa-test-XXXXXX", tmp ? tmp : "/tmp");
	if (!list && !mkdtemp(scratch_dir)) {
		fprintf(stderr, "cannot create a scratch folder: %s\n", strerror(errno));
		return 99;
	}

	int run = 0, failed = 0, skipped = 0;
	if (!list)
		printf("seed %llu (replay with STARFA_TEST_SEED=%llu)\n", (unsigned long long)seed,
		       (unsigned long long)seed);
	for (int i = 0; i < ntests; i++) {
		if (!selected(&tests[i], argc - 1, argv + 1))
			continue;
		if (list) {
			printf("%s/%s\n", tests[i].group, tests[i].name);
			continue;
		}
		fflush(stdout);
		double t0 = now_ms();
		int rc = tests[i].fn();
		double ms = now_ms() - t0;
		run++;
		const char *verdict = rc == 0 ? "PASS" : rc == TEST_SKIPPED ? "SKIP" : "FAIL";
		if (rc == TEST_SKIPPED)
			skipped++;
		else if (rc != 0)
			failed++;
		printf("%s %s/%s (%.0f ms)\n", verdict, tests[i].group, tests[i].name, ms);
		fflush(stdout);
	}
	if (runtime_started)
		starfa_shutdown();
	/* STARFA_TEST_KEEP set (and not "0"): the scratch folder (the tests' files, the private StarPU homes
	 * and their models) stays for a look */
	const char *keep = getenv("STARFA_TEST_KEEP");
	if (!list && keep && *keep && strcmp(keep, "0") != 0) {
		printf("scratch folder kept: %s\n", scratch_dir);
	} else if (!list) {
		char cmd[600];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", scratch_dir);
	}
	if (list)
		return 0;
	if (run == 0) {
		fprintf(stderr, "no test matches the selection\n");
		return 1;
	}
	printf("%d run, %d failed, %d skipped\n", run, failed, skipped);
	if (failed)
		return 1;
	return skipped == run ? TEST_SKIPPED : 0;
}
