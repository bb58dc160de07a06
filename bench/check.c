/* Correctness before timing: every output against a sequential double-precision reference
 * (all rows, or a deterministic sample of rows when nnz*K makes the full reference take
 * minutes), and two implementations' full outputs against each other. */
#include "bench/bench.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ row samples */

int row_sample_make(const struct bench_matrix *m, int64_t k, const struct bench_options *o, struct row_sample *s)
{
	const starfa_csr *S = m->csr;
	double cost = (double)S->nnz * (double)k;
	memset(s, 0, sizeof *s);
	s->full = cost <= o->check_limit;
	int64_t stride = s->full ? 1 : (int64_t)ceil(cost / o->sample_budget);
	if (stride > S->nrows)
		stride = S->nrows > 0 ? S->nrows : 1;
	s->rows = bench_alloc((size_t)(S->nrows / stride + 3), sizeof *s->rows, "row sample");
	if (!s->rows)
		return -1;
	/* Every stride-th row (rows are in no particular order of length), then the longest
	 * row (the hardest case for a kernel that splits rows) and the last. */
	int64_t longest = 0;
	for (int64_t r = 0; r < S->nrows; r++)
		if (S->rowptr[r + 1] - S->rowptr[r] > S->rowptr[longest + 1] - S->rowptr[longest])
			longest = r;
	for (int64_t r = 0; r < S->nrows; r += stride)
		s->rows[s->count++] = r;
	if (!s->full) {
		if (longest % stride)
			s->rows[s->count++] = longest;
		if (S->nrows > 0 && (S->nrows - 1) % stride)
			s->rows[s->count++] = S->nrows - 1;
	}
	return 0;
}

void row_sample_free(struct row_sample *s)
{
	free(s->rows);
	memset(s, 0, sizeof *s);
}

static int64_t sample_nnz(const starfa_csr *S, const struct row_sample *s)
{
	int64_t nnz = 0;
	for (int64_t i = 0; i < s->count; i++)
		nnz += S->rowptr[s->rows[i] + 1] - S->rowptr[s->rows[i]];
	return nnz;
}

/* ------------------------------------------------------------------ row subsets */

/* The sampled rows as a CSR of their own, with the rows of a dense matrix (A for SDDMM, Y
 * for SpMM) or the values of a sparse result (P) alongside, so that the library's
 * references (starfa_check_sddmm, starfa_check_spmm) check them unchanged. */
struct row_subset {
	starfa_csr csr;
	float *dense;  /* count x k: the sampled rows of a row-major matrix (NULL if not asked) */
	float *values; /* the sampled rows' entries of a result with S's pattern (NULL if not asked) */
};

static void subset_free(struct row_subset *sub)
{
	free(sub->csr.rowptr);
	free(sub->csr.colind);
	free(sub->csr.val);
	free(sub->dense);
	free(sub->values);
}

static int subset_make(const starfa_csr *S, const struct row_sample *s, const float *dense, int64_t k,
		       const float *values, struct row_subset *sub)
{
	memset(sub, 0, sizeof *sub);
	int64_t nnz = sample_nnz(S, s);
	sub->csr.nrows = s->count;
	sub->csr.ncols = S->ncols;
	sub->csr.nnz = nnz;
	sub->csr.rowptr = bench_alloc((size_t)s->count + 1, sizeof *sub->csr.rowptr, "sampled rows");
	sub->csr.colind = bench_alloc((size_t)nnz, sizeof *sub->csr.colind, "sampled rows");
	sub->csr.val = bench_alloc((size_t)nnz, sizeof *sub->csr.val, "sampled rows");
	if (dense)
		sub->dense = bench_alloc((size_t)(s->count * k), sizeof *sub->dense, "sampled rows");
	if (values)
		sub->values = bench_alloc((size_t)nnz, sizeof *sub->values, "sampled rows");
	if (!sub->csr.rowptr || !sub->csr.colind || !sub->csr.val || (dense && !sub->dense) || (values && !sub->values))
		return -1;
	int64_t q = 0;
	sub->csr.rowptr[0] = 0;
	for (int64_t i = 0; i < s->count; i++) {
		int64_t r = s->rows[i], p0 = S->rowptr[r], len = S->rowptr[r + 1] - p0;
		memcpy(sub->csr.colind + q, S->colind + p0, (size_t)len * sizeof *S->colind);
		memcpy(sub->csr.val + q, S->val + p0, (size_t)len * sizeof *S->val);
		if (values)
			memcpy(sub->values + q, values + p0, (size_t)len * sizeof *values);
		if (dense)
			memcpy(sub->dense + i * k, dense + r * k, (size_t)k * sizeof *dense);
		q += len;
		sub->csr.rowptr[i + 1] = q;
	}
	return 0;
}

/* ------------------------------------------------------------------ SDDMM and SpMM */

/* The library's references are sequential: the sampled rows are cut into pieces, each
 * checked as a CSR of its own on its own thread, and the reports merged. */
struct piece {
	int rc;
	starfa_check_report report;
	int64_t sample_row; /* the worst element's row, as an index into the whole sample */
	char msg[400];
};

struct check_job {
	const struct bench_matrix *m;
	const struct row_sample *s;
	int spmm; /* 0: SDDMM (A, B, mode, P); 1: SpMM (B as X, P as Y) */
	const float *A, *B, *P;
	int64_t k;
	starfa_sddmm_mode mode;
};

/* The row of a CSR holding element p. */
static int64_t row_of(const starfa_csr *S, int64_t p)
{
	int64_t lo = 0, hi = S->nrows; /* last row whose start is <= p */
	while (hi - lo > 1) {
		int64_t mid = lo + (hi - lo) / 2;
		if (S->rowptr[mid] <= p)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static void check_piece(const struct check_job *job, int64_t first, int64_t count, struct piece *out)
{
	struct row_sample part = {count, job->s->rows + first, 0};
	struct row_subset sub;
	memset(out, 0, sizeof *out);
	out->sample_row = -1;
	if (subset_make(job->m->csr, &part, job->spmm ? job->P : job->A, job->k, job->spmm ? NULL : job->P, &sub)) {
		out->rc = -1;
		snprintf(out->msg, sizeof out->msg, "out of memory for the reference check");
		subset_free(&sub);
		return;
	}
	if (job->spmm)
		out->rc = starfa_check_spmm(&sub.csr, job->B, job->k, sub.dense, &out->report);
	else
		out->rc = starfa_check_sddmm(&sub.csr, sub.dense, job->B, job->k, job->mode, sub.values, &out->report);
	if (out->rc) {
		snprintf(out->msg, sizeof out->msg, "%s", starfa_last_error()); /* per thread: copy it here */
		if (out->report.worst_index >= 0)
			out->sample_row = first + (job->spmm ? out->report.worst_index / job->k
							     : row_of(&sub.csr, out->report.worst_index));
	}
	subset_free(&sub);
}

/* A failed piece is worse than a passed one; among equals, the larger error. */
static int piece_worse(const struct piece *a, const struct piece *b)
{
	if ((a->rc != 0) != (b->rc != 0))
		return a->rc != 0;
	return a->report.max_error > b->report.max_error;
}

static int run_check(const struct check_job *job, double *max_error, char *msg, size_t msglen)
{
	const struct row_sample *s = job->s;
	int64_t npieces = (int64_t)omp_get_max_threads() * 4;
	npieces = npieces > s->count ? s->count : npieces < 1 ? 1 : npieces;
	struct piece *pieces = bench_alloc((size_t)npieces, sizeof *pieces, "reference check");
	if (!pieces) {
		snprintf(msg, msglen, "out of memory for the reference check");
		return -1;
	}
#pragma omp parallel for schedule(dynamic, 1)
	for (int64_t i = 0; i < npieces; i++) {
		int64_t first = s->count * i / npieces, last = s->count * (i + 1) / npieces;
		check_piece(job, first, last - first, &pieces[i]);
	}
	int64_t checked = 0, failed = 0, worst = 0;
	for (int64_t i = 0; i < npieces; i++) {
		checked += pieces[i].report.checked;
		failed += pieces[i].report.failed;
		if (piece_worse(&pieces[i], &pieces[worst]))
			worst = i;
	}
	const struct piece *w = &pieces[worst];
	*max_error = w->report.max_error;
	int rc = w->rc ? -1 : 0;
	if (rc && w->sample_row >= 0)
		snprintf(msg, msglen,
			 "reference (%s): %lld of %lld values beyond the float32 bound; worst: %s [its row %lld "
			 "of the matrix]",
			 s->full ? "all rows" : "sampled rows", (long long)failed, (long long)checked, w->msg,
			 (long long)s->rows[w->sample_row]);
	else if (rc)
		snprintf(msg, msglen, "reference (%s): %s", s->full ? "all rows" : "sampled rows", w->msg);
	free(pieces);
	return rc;
}

int check_sddmm(const struct bench_matrix *m, const struct row_sample *s, const float *A, const float *B, int64_t k,
		starfa_sddmm_mode mode, const float *P, double *max_error, char *msg, size_t msglen)
{
	struct check_job job = {m, s, 0, A, B, P, k, mode};
	return run_check(&job, max_error, msg, msglen);
}

int check_spmm(const struct bench_matrix *m, const struct row_sample *s, const float *X, int64_t k, const float *Y,
	       double *max_error, char *msg, size_t msglen)
{
	struct check_job job = {m, s, 1, NULL, X, Y, k, STARFA_SDDMM_PATTERN};
	return run_check(&job, max_error, msg, msglen);
}

/* ------------------------------------------------------------------ two implementations */

int compare_outputs(const float *got, const float *want, const float *mag, const float *scale, int64_t n, int64_t terms,
		    const int64_t *rowptr, int64_t row_len, double *max_error, char *msg, size_t msglen)
{
	double worst = 0.0;
	int64_t worst_i = -1, failed = 0;
#pragma omp parallel
	{
		double my_worst = 0.0;
		int64_t my_i = -1, my_failed = 0;
#pragma omp for schedule(static)
		for (int64_t i = 0; i < n; i++) {
			double s = scale ? (double)scale[i] : 1.0;
			double w = s * (double)want[i];
			int64_t t = rowptr ? rowptr[i / row_len + 1] - rowptr[i / row_len] : terms;
			double bound = 2.0 * (double)(t + 2) * FLT_EPSILON * fabs(s) * (double)mag[i] + 1e-6 * fabs(w);
			double diff = fabs((double)got[i] - w);
			double error = isnan(diff) || isnan(bound) ? INFINITY
				       : diff == 0.0		   ? 0.0
				       : bound > 0.0		   ? diff / bound
								   : INFINITY;
			my_failed += !(error <= 1.0);
			if (error > my_worst || (isinf(error) && my_i < 0)) {
				my_worst = error;
				my_i = i;
			}
		}
#pragma omp critical
		{
			failed += my_failed;
			/* The largest error wins; the lowest index among equals, whatever the threads. */
			if (my_i >= 0 && (worst_i < 0 || my_worst > worst || (my_worst == worst && my_i < worst_i))) {
				worst = my_worst;
				worst_i = my_i;
			}
		}
	}
	*max_error = worst;
	if (!failed)
		return 0;
	double s = scale ? (double)scale[worst_i] : 1.0;
	snprintf(msg, msglen,
		 "%lld of %lld elements differ beyond 2x the float32 bound; worst element %lld: %.9g vs %.9g "
		 "(%.3g x the bound)",
		 (long long)failed, (long long)n, (long long)worst_i, (double)got[worst_i], s * (double)want[worst_i],
		 worst);
	return -1;
}
