/* The CPU half: starfa's OpenMP SDDMM and SpMM kernels on every core against the loops anyone
 * would write first (rows shared out dynamically, a plain dot product or axpy), same data, same
 * threads. */
#include "bench/bench.h"

#include "cpu/sddmm.h"
#include "cpu/spmm.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* The baseline: parallel over rows, dynamic chunks of 64 rows, a naive inner dot. */
static void plain_openmp_sddmm(const struct bench_matrix *m, const float *A, const float *B, int64_t k, float *out)
{
	const starfa_csr *S = m->csr;
#pragma omp parallel for schedule(dynamic, 64)
	for (int64_t r = 0; r < S->nrows; r++)
		for (int64_t p = S->rowptr[r]; p < S->rowptr[r + 1]; p++) {
			const float *a = A + r * k, *b = B + (int64_t)S->colind[p] * k;
			float acc = 0.0f;
			for (int64_t d = 0; d < k; d++)
				acc += a[d] * b[d];
			out[p] = acc;
		}
}

static void starfa_sddmm(const struct bench_matrix *m, const float *A, const float *B, int64_t k, float *out)
{
	starfa_cpu_sddmm(m->csr->nrows, m->rowptr32, m->colind32, m->csr->val, A, k, B, k, k, 0, 1.0f, 0.0f, out,
			 omp_get_max_threads());
}

/* The SpMM baseline: Y = S B, parallel over rows, dynamic chunks of 64 rows, a naive axpy per nonzero. */
static void plain_openmp_spmm(const struct bench_matrix *m, const float *A, const float *B, int64_t k, float *Y)
{
	(void)A;
	const starfa_csr *S = m->csr;
#pragma omp parallel for schedule(dynamic, 64)
	for (int64_t r = 0; r < S->nrows; r++) {
		float *y = Y + r * k;
		for (int64_t d = 0; d < k; d++)
			y[d] = 0.0f;
		for (int64_t p = S->rowptr[r]; p < S->rowptr[r + 1]; p++) {
			const float *b = B + (int64_t)S->colind[p] * k, v = S->val[p];
			for (int64_t d = 0; d < k; d++)
				y[d] += v * b[d];
		}
	}
}

static void starfa_spmm(const struct bench_matrix *m, const float *A, const float *B, int64_t k, float *Y)
{
	(void)A;
	starfa_cpu_spmm(m->csr->nrows, m->rowptr32, m->colind32, m->csr->val, B, k, k, 0, Y, k, omp_get_max_threads());
}

typedef void (*cpu_kernel)(const struct bench_matrix *, const float *, const float *, int64_t, float *);

static void poison(float *x, int64_t n)
{
	memset(x, 0xff, (size_t)n * sizeof *x); /* NaN: an element left unwritten fails the check */
}

/* One checked run (which also warms the caches and the thread pool), then timed runs; fills r.
 * spmm: the kernel computes Y = S B (rows x k) into out, else SDDMM's nnz values. */
static void run_kernel(const struct bench_options *o, const struct bench_matrix *m, const struct row_sample *s,
		       const float *A, const float *B, int64_t k, float *out, cpu_kernel kernel, int spmm,
		       struct bench_result *r)
{
	char msg[400];
	double err;
	poison(out, spmm ? m->csr->nrows * k : m->csr->nnz);
	kernel(m, A, B, k, out);
	if (spmm ? check_spmm(m, s, B, k, out, &err, msg, sizeof msg)
		 : check_sddmm(m, s, A, B, k, STARFA_SDDMM_PATTERN, out, &err, msg, sizeof msg)) {
		bench_result_fail(r, BENCH_FAIL, "%s", msg);
		return;
	}
	snprintf(r->extra_name, sizeof r->extra_name, "check_max_error");
	r->extra = err;
	/* At least cpu_repeat runs, and more while they add up to less than half a second: a
	 * kernel of a millisecond on a shared machine needs many runs for a steady median. */
	double ms[1000], total = 0;
	int n = 0;
	while (n < 1000 && (n < o->cpu_repeat || total < 500.0)) {
		double t0 = bench_now();
		kernel(m, A, B, k, out);
		ms[n] = (bench_now() - t0) * 1e3;
		total += ms[n++];
	}
	bench_result_set_times(r, ms, n);
	r->flops = bench_flops(m, k);
}

/* starfa's kernel against the plain loop: both results, the speed-up on ours. */
static void compare(const struct bench_options *o, const struct bench_matrix *m, const struct row_sample *s,
		    const float *A, const float *B, int64_t k, float *out, int spmm, struct bench_result *plain,
		    struct bench_result *ours)
{
	run_kernel(o, m, s, A, B, k, out, spmm ? plain_openmp_spmm : plain_openmp_sddmm, spmm, plain);
	run_kernel(o, m, s, A, B, k, out, spmm ? starfa_spmm : starfa_sddmm, spmm, ours);
	snprintf(ours->baseline, sizeof ours->baseline, "%s", plain->measurement);
	ours->baseline_ms = plain->median_ms;
	if (ours->status == BENCH_OK && plain->status == BENCH_OK)
		ours->speedup = plain->median_ms / ours->median_ms;
}

void cpu_bench(const struct bench_device *d, const struct bench_options *o, const struct bench_matrix *m, int64_t k)
{
	(void)d;
	struct bench_result *plain = bench_result_add(m, k, "cpu.omp_plain");
	struct bench_result *ours = bench_result_add(m, k, "cpu.starfa");
	struct bench_result *spmm_plain = bench_result_add(m, k, "cpu.spmm_omp_plain");
	struct bench_result *spmm_ours = bench_result_add(m, k, "cpu.spmm_starfa");
	float *A = NULL, *B = NULL;
	size_t n_out = (size_t)(m->csr->nnz > m->csr->nrows * k ? m->csr->nnz : m->csr->nrows * k);
	float *out = bench_alloc(n_out, sizeof *out, "CPU SDDMM / SpMM output");
	struct row_sample s = {0};
	if (!out || bench_factors(m, k, o->seed, &A, &B) != 0 || row_sample_make(m, k, o, &s) != 0) {
		struct bench_result *all[] = {plain, ours, spmm_plain, spmm_ours};
		for (int i = 0; i < 4; i++)
			bench_result_fail(all[i], BENCH_ERROR, "out of host memory");
		goto out;
	}
	printf("  cpu: %d threads, k=%lld\n", omp_get_max_threads(), (long long)k);
	fflush(stdout);
	compare(o, m, &s, A, B, k, out, 0, plain, ours);
	compare(o, m, &s, A, B, k, out, 1, spmm_plain, spmm_ours);
out:
	row_sample_free(&s);
	free(out);
	free(A);
	free(B);
}
