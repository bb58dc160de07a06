/* Element-wise maps, reductions and transposition of sparse values on the CPU. */
#include "cpu/values.h"

#include "cpu/clones.h"
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

/* One loop per op, with the op a constant in it: the op's switch folds away and the loop vectorizes
 * (the exp and log of cpu/special.h are branch-free for this). */
#define VALUES_MAP_LOOP(OP)                                                                                            \
	case OP:                                                                                                       \
		_Pragma("omp simd") for (int64_t p = 0; p < n; p++) y[p] =                                          \
		    starfa_values_apply(OP, a, b, starfa_values_reads_x(OP) ? x[p] : 0.0f,                             \
					starfa_values_reads_y(OP) ? y[p] : 0.0f);                                      \
		break;

STARFA_CPU_CLONES void starfa_cpu_values_map(int64_t n, int op, float a, float b, const float *restrict x,
					     float *restrict y)
{
	switch (op) {
		VALUES_MAP_LOOP(STARFA_VALUES_SET)
		VALUES_MAP_LOOP(STARFA_VALUES_COPY)
		VALUES_MAP_LOOP(STARFA_VALUES_SCALE)
		VALUES_MAP_LOOP(STARFA_VALUES_AXPBY)
		VALUES_MAP_LOOP(STARFA_VALUES_MUL)
		VALUES_MAP_LOOP(STARFA_VALUES_QUOTIENT)
		VALUES_MAP_LOOP(STARFA_VALUES_EXP)
		VALUES_MAP_LOOP(STARFA_VALUES_LOG)
	default: break; /* an unknown op leaves y as it is, as starfa_values_apply does */
	}
}

double starfa_cpu_values_reduce(int64_t n, int op, float a, const float *restrict x, const float *restrict y)
{
	double sum = 0.0;
	const int reads_x = starfa_reduce_reads_x(op);
	for (int64_t p = 0; p < n; p++)
		sum += starfa_reduce_term(op, a, reads_x ? x[p] : 0.0f, y[p]);
	return sum;
}
