/* CCD++ passes and updates on the CPU: one worker per tile, SIMD over a row's entries. */
#include "cpu/ccd.h"

#include "cpu/clones.h"

#include <stddef.h>

/* One row's pass with the terms fixed at compile time (inlined into each variant below, so that the
 * loop carries no test of them). */
static inline __attribute__((always_inline)) void ccd_row(uint32_t e0, uint32_t e1, const uint32_t *restrict colind,
							  float *restrict R, int write, int sub, int add, int sums,
							  float sx, float ax, const struct starfa_ccd_vecs *v, float *num_out,
							  float *den_out)
{
	const float *sub_y = v->sub_y, *add_y = v->add_y, *y = v->y;
	const int64_t lsy = v->ld_sub_y, lay = v->ld_add_y, ly = v->ld_y;
	const int same_y = add && sums && y == add_y && ly == lay; /* one gather for both */
	float num = 0.0f, den = 0.0f;
#pragma omp simd reduction(+ : num, den)
	for (uint32_t e = e0; e < e1; e++) {
		const int64_t c = colind[e];
		float x = R[e], ay = 0.0f;
		if (sub)
			x -= sx * sub_y[c * lsy];
		if (add) {
			ay = add_y[c * lay];
			x += ax * ay;
		}
		if (write)
			R[e] = x;
		if (sums) {
			const float yc = same_y ? ay : y[c * ly];
			num += x * yc;
			den += yc * yc;
		}
	}
	*num_out = num;
	*den_out = den;
}

#define CCD_VARIANT(WRITE, SUB, ADD, SUMS)                                                                       \
	for (int64_t r = 0; r < nrows; r++) {                                                                    \
		float num, den;                                                                                  \
		ccd_row(rowptr[r], rowptr[r + 1], colind, R, WRITE, SUB, ADD, SUMS,                             \
			SUB ? v->sub_x[r * v->ld_sub_x] : 0.0f, ADD ? v->add_x[r * v->ld_add_x] : 0.0f, v, &num, &den); \
		if (SUMS) {                                                                                      \
			float *a = acc + r * ld_acc;                                                             \
			a[0] = accumulate ? a[0] + num : num;                                                    \
			a[1] = accumulate ? a[1] + den : den;                                                    \
		}                                                                                                \
	}

STARFA_CPU_CLONES
void starfa_cpu_ccd_pass(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, float *R, int write,
			 const struct starfa_ccd_vecs *v, float *acc, int64_t ld_acc, int accumulate)
{
	const int sub = v->sub_x && v->sub_y, add = v->add_x && v->add_y, sums = v->y && acc;
	/* the passes CCD++ makes: open a feature (write, sub?, add, sums?), an inner iteration (sums), close
	 * (write, sub); any other combination takes the general loop */
	if (write && sub && add && sums)
		CCD_VARIANT(1, 1, 1, 1)
	else if (write && !sub && add && sums)
		CCD_VARIANT(1, 0, 1, 1)
	else if (write && sub && add && !sums)
		CCD_VARIANT(1, 1, 1, 0)
	else if (!write && !sub && !add && sums)
		CCD_VARIANT(0, 0, 0, 1)
	else if (write && sub && !add && !sums)
		CCD_VARIANT(1, 1, 0, 0)
	else
		CCD_VARIANT(write, sub, add, sums)
}

void starfa_cpu_ccd_solve(int64_t nrows, const float *acc, int64_t ld_acc, const float *n, int64_t ld_n, float lambda,
			  int nonneg, float *x, int64_t ld_x)
{
	for (int64_t r = 0; r < nrows; r++) {
		const float den = lambda * n[r * ld_n] + acc[r * ld_acc + 1];
		float v = den > 0.0f ? acc[r * ld_acc] / den : 0.0f;
		x[r * ld_x] = nonneg && !(v > 0.0f) ? 0.0f : v;
	}
}

double starfa_cpu_ccd_regularizer(int64_t nrows, const float *x, int64_t ld_x, const float *n, int64_t ld_n)
{
	double sum = 0.0;
	for (int64_t r = 0; r < nrows; r++) {
		const double v = x[r * ld_x];
		sum += (double)n[r * ld_n] * v * v;
	}
	return sum;
}
