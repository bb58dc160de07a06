/* Plain sequential references that every kernel is checked against. */
#include "runtime/internal.h"

#include <float.h>
#include <math.h>

int starfa_check_sddmm(const starfa_csr *S, const float *A, const float *B, int64_t k, starfa_sddmm_mode mode,
		       const float *P, starfa_check_report *report)
{
	starfa_check_report r = {0, 0, 0.0, -1};
	int64_t worst_row = -1, worst_col = -1;
	double worst_ref = 0.0;
	for (int64_t row = 0; row < S->nrows; row++)
		for (int64_t p = S->rowptr[row]; p < S->rowptr[row + 1]; p++) {
			int64_t col = S->colind[p];
			double s = mode == STARFA_SDDMM_SCALED ? S->val[p] : 1.0;
			double ref = 0.0, magnitude = 0.0;
			for (int64_t d = 0; d < k; d++) {
				double term = (double)A[row * k + d] * (double)B[col * k + d];
				ref += term;
				magnitude += fabs(term);
			}
			ref *= s;
			double bound = (double)(k + 2) * FLT_EPSILON * fabs(s) * magnitude;
			double diff = fabs((double)P[p] - ref);
			/* A zero bound (zero operands) demands an exact zero. */
			double error = isnan(diff) ? INFINITY : diff == 0.0 ? 0.0 : bound > 0.0 ? diff / bound : INFINITY;
			r.checked++;
			if (!(error <= 1.0))
				r.failed++;
			if (error > r.max_error || (isinf(error) && r.worst_index < 0)) {
				r.max_error = error;
				r.worst_index = p;
				worst_row = row;
				worst_col = col;
				worst_ref = ref;
			}
		}
	if (report)
		*report = r;
	if (r.failed)
		return starfa_set_error(STARFA_ECHECK,
					"sddmm check: %lld of %lld values beyond the float32 bound; worst at "
					"(%lld, %lld): got %.9g, expected %.9g (%.3g x the bound)",
					(long long)r.failed, (long long)r.checked, (long long)worst_row,
					(long long)worst_col, (double)P[r.worst_index], worst_ref, r.max_error);
	return 0;
}

int starfa_check_spmm(const starfa_csr *S, const float *X, int64_t k, const float *Y, starfa_check_report *report)
{
	starfa_check_report r = {0, 0, 0.0, -1};
	double worst_ref = 0.0;
	double *ref = starfa_malloc((size_t)k, sizeof *ref), *magnitude = starfa_malloc((size_t)k, sizeof *magnitude);
	if (!ref || !magnitude) {
		free(ref);
		free(magnitude);
		return STARFA_ENOMEM;
	}
	for (int64_t row = 0; row < S->nrows; row++) {
		for (int64_t d = 0; d < k; d++)
			ref[d] = magnitude[d] = 0.0;
		for (int64_t p = S->rowptr[row]; p < S->rowptr[row + 1]; p++) {
			const float *x = X + S->colind[p] * k;
			for (int64_t d = 0; d < k; d++) {
				double term = (double)S->val[p] * (double)x[d];
				ref[d] += term;
				magnitude[d] += fabs(term);
			}
		}
		/* A row-long float32 sum of products, plus the partial sums of the tiles added together. */
		double scale = (double)(S->rowptr[row + 1] - S->rowptr[row] + 2) * FLT_EPSILON;
		for (int64_t d = 0; d < k; d++) {
			double bound = scale * magnitude[d];
			double diff = fabs((double)Y[row * k + d] - ref[d]);
			/* A zero bound (an empty row, zero operands) demands an exact zero. */
			double error = isnan(diff) ? INFINITY : diff == 0.0 ? 0.0 : bound > 0.0 ? diff / bound : INFINITY;
			r.checked++;
			if (!(error <= 1.0))
				r.failed++;
			if (error > r.max_error || (isinf(error) && r.worst_index < 0)) {
				r.max_error = error;
				r.worst_index = row * k + d;
				worst_ref = ref[d];
			}
		}
	}
	free(ref);
	free(magnitude);
	if (report)
		*report = r;
	if (r.failed)
		return starfa_set_error(STARFA_ECHECK,
					"spmm check: %lld of %lld values beyond the float32 bound; worst at "
					"(%lld, %lld): got %.9g, expected %.9g (%.3g x the bound)",
					(long long)r.failed, (long long)r.checked, (long long)(r.worst_index / k),
					(long long)(r.worst_index % k), (double)Y[r.worst_index], worst_ref, r.max_error);
	return 0;
}
