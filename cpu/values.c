/* Element-wise maps, reductions and transposition of sparse values on the CPU. */
#include "cpu/values.h"

#include "starfa.h"

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
	switch (op) {
	case STARFA_VALUES_SET:
		for (int64_t p = 0; p < n; p++)
			y[p] = a;
		break;
	case STARFA_VALUES_COPY:
		for (int64_t p = 0; p < n; p++)
			y[p] = x[p];
		break;
	case STARFA_VALUES_SCALE:
#pragma omp simd
		for (int64_t p = 0; p < n; p++)
			y[p] = a * y[p] + b;
		break;
	case STARFA_VALUES_AXPBY:
#pragma omp simd
		for (int64_t p = 0; p < n; p++)
			y[p] = a * x[p] + b * y[p];
		break;
	case STARFA_VALUES_MUL:
#pragma omp simd
		for (int64_t p = 0; p < n; p++)
			y[p] = x[p] * y[p];
		break;
	case STARFA_VALUES_QUOTIENT:
		for (int64_t p = 0; p < n; p++)
			y[p] = x[p] / fmaxf(a, y[p]);
		break;
	case STARFA_VALUES_EXP:
		for (int64_t p = 0; p < n; p++)
			y[p] = expf(y[p]);
		break;
	case STARFA_VALUES_LOG:
		for (int64_t p = 0; p < n; p++)
			y[p] = logf(fmaxf(a, y[p]));
		break;
	default:
		break;
	}
}

double starfa_cpu_values_reduce(int64_t n, int op, float a, const float *restrict x, const float *restrict y)
{
	double sum = 0.0;
	switch (op) {
	case STARFA_REDUCE_SUM:
		for (int64_t p = 0; p < n; p++)
			sum += y[p];
		break;
	case STARFA_REDUCE_SQUARES:
		for (int64_t p = 0; p < n; p++)
			sum += (double)y[p] * y[p];
		break;
	case STARFA_REDUCE_SQDIFF:
		for (int64_t p = 0; p < n; p++) {
			double d = (double)x[p] - y[p];
			sum += d * d;
		}
		break;
	case STARFA_REDUCE_KL:
		for (int64_t p = 0; p < n; p++) {
			double s = x[p];
			if (s != 0.0)
				sum += s * log(s / fmax(a, y[p])) - s;
		}
		break;
	case STARFA_REDUCE_XLOGY:
		for (int64_t p = 0; p < n; p++)
			if (x[p] != 0.0f)
				sum += (double)x[p] * log(fmax(a, y[p]));
		break;
	case STARFA_REDUCE_CONFIDENCE:
		for (int64_t p = 0; p < n; p++) {
			double e = 1.0 - y[p];
			sum += (1.0 + (double)a * x[p]) * e * e - (double)y[p] * y[p];
		}
		break;
	default:
		break;
	}
	return sum;
}
