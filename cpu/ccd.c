/* CCD++ passes and updates on the CPU: one worker per tile, SIMD over a row's entries. */
#include "cpu/ccd.h"

#include "cpu/clones.h"

#include <stddef.h>

STARFA_CPU_CLONES
void starfa_cpu_ccd_pass(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, float *R, int write,
			 const struct starfa_ccd_vecs *v, float *acc, int64_t ld_acc, int accumulate)
{
	const int sub = v->sub_x && v->sub_y, add = v->add_x && v->add_y, sums = v->y && acc;
	for (int64_t r = 0; r < nrows; r++) {
		const float sx = sub ? v->sub_x[r * v->ld_sub_x] : 0.0f, ax = add ? v->add_x[r * v->ld_add_x] : 0.0f;
		float num = 0.0f, den = 0.0f;
		const uint32_t e0 = rowptr[r], e1 = rowptr[r + 1];
#pragma omp simd reduction(+ : num, den)
		for (uint32_t e = e0; e < e1; e++) {
			const int64_t c = colind[e];
			float x = R[e];
			if (sub)
				x -= sx * v->sub_y[c * v->ld_sub_y];
			if (add)
				x += ax * v->add_y[c * v->ld_add_y];
			if (write)
				R[e] = x;
			if (sums) {
				const float yc = v->y[c * v->ld_y];
				num += x * yc;
				den += yc * yc;
			}
		}
		if (sums) {
			float *a = acc + r * ld_acc;
			a[0] = accumulate ? a[0] + num : num;
			a[1] = accumulate ? a[1] + den : den;
		}
	}
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
