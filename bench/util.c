/* The result rows, timers, random factors and small helpers every part of the bench uses. */
#include "bench/bench.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ results */

static struct bench_result *results;
static int nresults, results_capacity;

const char *bench_status_name(enum bench_status s)
{
	switch (s) {
	case BENCH_OK:
		return "ok";
	case BENCH_FAIL:
		return "FAIL";
	case BENCH_ERROR:
		return "ERROR";
	case BENCH_SKIP:
		return "skipped";
	}
	return "?";
}

struct bench_result *bench_result_add(const struct bench_matrix *m, int64_t k, const char *measurement)
{
	if (nresults == results_capacity) {
		int want = results_capacity ? 2 * results_capacity : 256;
		struct bench_result *grown = realloc(results, (size_t)want * sizeof *grown);
		if (!grown) {
			fprintf(stderr, "starfa_bench: out of memory for the result table\n");
			exit(1);
		}
		results = grown;
		results_capacity = want;
	}
	struct bench_result *r = &results[nresults++];
	memset(r, 0, sizeof *r);
	snprintf(r->matrix, sizeof r->matrix, "%s", m ? m->name : "-");
	if (m) {
		r->rows = m->nrows;
		r->cols = m->ncols;
		r->nnz = m->nnz;
	}
	r->k = k;
	snprintf(r->measurement, sizeof r->measurement, "%s", measurement);
	r->status = BENCH_OK;
	r->median_ms = r->min_ms = r->max_ms = NAN;
	r->flops = r->bytes = r->floor_ms = NAN;
	r->baseline_ms = r->speedup = r->overhead_pct = NAN;
	r->tasks_cpu = r->tasks_cuda = -1;
	r->extra = NAN;
	return r;
}

struct bench_result *bench_result_find(const char *matrix, int64_t k, const char *measurement)
{
	for (int i = 0; i < nresults; i++)
		if (results[i].k == k && !strcmp(results[i].matrix, matrix) &&
		    !strcmp(results[i].measurement, measurement))
			return &results[i];
	return NULL;
}

int bench_result_count(void)
{
	return nresults;
}

struct bench_result *bench_result_at(int i)
{
	return &results[i];
}

void bench_results_free(void)
{
	free(results);
	results = NULL;
	nresults = results_capacity = 0;
}

void bench_result_set_times(struct bench_result *r, double *ms, int n)
{
	r->repeats = n;
	if (n <= 0)
		return;
	r->median_ms = bench_median(ms, n); /* sorts ms */
	r->min_ms = ms[0];
	r->max_ms = ms[n - 1];
}

void bench_result_fail(struct bench_result *r, enum bench_status s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->note, sizeof r->note, fmt, ap);
	va_end(ap);
	r->status = s;
	/* A result that failed its check or did not run reports no time. */
	r->median_ms = r->min_ms = r->max_ms = NAN;
	r->repeats = 0;
	if (s == BENCH_FAIL || s == BENCH_ERROR)
		fprintf(stderr, "starfa_bench: %s: %s k=%lld %s: %s\n", bench_status_name(s), r->matrix,
			(long long)r->k, r->measurement, r->note);
}

int bench_failures(void)
{
	int n = 0;
	for (int i = 0; i < nresults; i++)
		n += results[i].status == BENCH_FAIL || results[i].status == BENCH_ERROR;
	return n;
}

/* ------------------------------------------------------------------ numbers */

double bench_floor_ms(const struct bench_device *d, double bytes, double flops)
{
	if (!(d->bandwidth_gbs > 0) || !(d->fp32_gflops > 0))
		return NAN;
	double memory_ms = bytes / (d->bandwidth_gbs * 1e9) * 1e3;
	double compute_ms = flops / (d->fp32_gflops * 1e9) * 1e3;
	return memory_ms > compute_ms ? memory_ms : compute_ms;
}

double bench_flops(const struct bench_matrix *m, int64_t k)
{
	return 2.0 * (double)k * (double)m->csr->nnz;
}

double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int compare_doubles(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
	if (n <= 0)
		return NAN;
	qsort(v, (size_t)n, sizeof *v, compare_doubles);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ------------------------------------------------------------------ random data */

uint64_t bench_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void bench_fill_uniform(float *x, size_t n, uint64_t seed)
{
	uint64_t base = bench_mix64(seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull);
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++) {
		uint64_t z = bench_mix64(base + (uint64_t)i * 0x9e3779b97f4a7c15ull);
		x[i] = (float)((double)(z >> 40) * (2.0 / 16777216.0) - 1.0);
	}
}

void *bench_alloc(size_t count, size_t size, const char *what)
{
	if (size && count > SIZE_MAX / size) {
		fprintf(stderr, "starfa_bench: %s: %zu x %zu bytes overflows\n", what, count, size);
		return NULL;
	}
	size_t bytes = count * size;
	void *p = malloc(bytes ? bytes : 1);
	if (!p)
		fprintf(stderr, "starfa_bench: out of memory: %s (%.2f GB)\n", what,
			(double)count * (double)size * 1e-9);
	return p;
}

int bench_factors(const struct bench_matrix *m, int64_t k, uint64_t seed, float **A, float **B)
{
	size_t na = (size_t)m->csr->nrows * (size_t)k, nb = (size_t)m->csr->ncols * (size_t)k;
	*A = bench_alloc(na, sizeof **A, "factor A (rows x K)");
	*B = bench_alloc(nb, sizeof **B, "factor B (cols x K)");
	if (!*A || !*B) {
		free(*A);
		free(*B);
		*A = *B = NULL;
		return -1;
	}
	/* Seeds depend on the rank: each rank gets fresh inputs. */
	bench_fill_uniform(*A, na, seed * 1000003u + (uint64_t)k * 2);
	bench_fill_uniform(*B, nb, seed * 1000003u + (uint64_t)k * 2 + 1);
	return 0;
}

void bench_note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("  note: ", stdout);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}
