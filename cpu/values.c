/* Element-wise maps, reductions and transposition of sparse values on the CPU. */
#include "cpu/values.h"

#include "cpu/elementwise.h"

#include <math.h>

void starfa_cpu_values_transpose(int64_t nnz, const uint32_t *restrict map, const float *restrict src,
				 float *restrict dst, int to_forward)
{
	if (to_forward)
		for (int64_t q = 0; q < nnz; q++)
			dst[map[q]] = src[q];
	else
		for (int64_t q = 0; q < nnz; q++)
			dst[q] = src[map[q]];
}

void starfa_cpu_values_map(int64_t n, int op, float a, float b, const float *restrict x, float *restrict y)
{
	const int reads_x = starfa_values_reads_x(op), reads_y = starfa_values_reads_y(op);
	for (int64_t p = 0; p < n; p++)
		y[p] = starfa_values_apply(op, a, b, reads_x ? x[p] : 0.0f, reads_y ? y[p] : 0.0f);
}

double starfa_cpu_values_reduce(int64_t n, int op, float a, const float *restrict x, const float *restrict y)
{
	double sum = 0.0;
	const int reads_x = starfa_reduce_reads_x(op);
	for (int64_t p = 0; p < n; p++)
		sum += starfa_reduce_term(op, a, reads_x ? x[p] : 0.0f, y[p]);
	return sum;
}
