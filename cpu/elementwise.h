/* The element-wise ops of sparse values and dense blocks, and the terms of the reductions: one
 * definition, inlined into the CPU kernels and the CUDA kernels alike (host and device code). The ops
 * are starfa_values_op, starfa_dense_op and starfa_reduce_op. */
#ifndef STARFA_CPU_ELEMENTWISE_H
#define STARFA_CPU_ELEMENTWISE_H

#include "cpu/special.h"
#include <stdint.h>
#include "starfa.h"

/* y = op(a, b, x, y) of a values map. */
STARFA_HD float starfa_values_apply(int op, float a, float b, float x, float y)
{
	switch (op) {
	case STARFA_VALUES_SET: return a;
	case STARFA_VALUES_COPY: return x;
	case STARFA_VALUES_SCALE: return a * y + b;
	case STARFA_VALUES_AXPBY: return a * x + b * y;
	case STARFA_VALUES_MUL: return x * y;
	case STARFA_VALUES_QUOTIENT: return x / starfa_maxf(a, y);
	case STARFA_VALUES_EXP: return starfa_expf(y);
	case STARFA_VALUES_LOG: return starfa_logf(starfa_maxf(a, y));
	default: return y;
	}
}

/* Whether a values map reads x, and y (SET and COPY must not: y may hold NaN, a fresh output). */
STARFA_HD int starfa_values_reads_x(int op)
{
	return op == STARFA_VALUES_COPY || op == STARFA_VALUES_AXPBY || op == STARFA_VALUES_MUL ||
	       op == STARFA_VALUES_QUOTIENT;
}

STARFA_HD int starfa_values_reads_y(int op)
{
	return op != STARFA_VALUES_SET && op != STARFA_VALUES_COPY;
}

/* One entry's term of a reduction, in double. */
STARFA_HD double starfa_reduce_term(int op, float a, float x, float y)
{
	switch (op) {
	case STARFA_REDUCE_SUM: return y;
	case STARFA_REDUCE_SQUARES: return (double)y * y;
	case STARFA_REDUCE_SQDIFF: return ((double)x - y) * ((double)x - y);
	case STARFA_REDUCE_KL: return x != 0.0f ? (double)x * log((double)x / fmax((double)a, (double)y)) - x : 0.0;
	case STARFA_REDUCE_XLOGY: return x != 0.0f ? (double)x * log(fmax((double)a, (double)y)) : 0.0;
	case STARFA_REDUCE_CONFIDENCE: return (1.0 + (double)a * x) * (1.0 - y) * (1.0 - y) - (double)y * y;
	case STARFA_REDUCE_ABS: return fabs((double)y);
	default: return 0.0;
	}
}

STARFA_HD int starfa_reduce_reads_x(int op)
{
	return op == STARFA_REDUCE_SQDIFF || op == STARFA_REDUCE_KL || op == STARFA_REDUCE_XLOGY ||
	       op == STARFA_REDUCE_CONFIDENCE;
}

/* A uniform draw in [0, 1) for element `index` of a stream `seed`: the top 24 bits of SplitMix64's
 * output for counter index + 1 (Steele, Lea & Flood 2014), so any element is drawn alone, the same on
 * the host and the device. */
STARFA_HD float starfa_uniform_at(uint64_t seed, uint64_t index)
{
	uint64_t z = seed + (index + 1) * 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	return (float)(z >> 40) * 0x1p-24f;
}

/* lo + (hi - lo) u for that draw, with one rounding (fmaf): the same bits on the host and the device.
 * That rounding can reach hi for u near 1; such a draw is the largest float below hi, so that every
 * draw lies in [lo, hi) when lo < hi. */
STARFA_HD float starfa_uniform_between(float lo, float hi, uint64_t seed, uint64_t index)
{
	const float v = fmaf(hi - lo, starfa_uniform_at(seed, index), lo);
	return v < hi || !(lo < hi) ? v : nextafterf(hi, lo);
}

/* y = op(a, b, z, y) of a dense map. */
STARFA_HD float starfa_dense_apply(int op, float a, float b, float z, float y)
{
	switch (op) {
	case STARFA_DENSE_SET: return a;
	case STARFA_DENSE_COPY: return z;
	case STARFA_DENSE_SCALE: return a * y + b;
	case STARFA_DENSE_ADD: return y + a * z;
	case STARFA_DENSE_MUL: return y * z;
	case STARFA_DENSE_DIV: return y / (a > 0.0f ? starfa_maxf(a, z + b) : z + b);
	case STARFA_DENSE_EXP: return starfa_expf(y);
	case STARFA_DENSE_LOG: return starfa_logf(starfa_maxf(a, y));
	case STARFA_DENSE_DIGAMMA: return starfa_digammaf(y);
	case STARFA_DENSE_LGAMMA: return starfa_lgammaf(y);
	default: return y;
	}
}

STARFA_HD int starfa_dense_reads_operand(int op)
{
	return op == STARFA_DENSE_COPY || op == STARFA_DENSE_ADD || op == STARFA_DENSE_MUL || op == STARFA_DENSE_DIV;
}

STARFA_HD int starfa_dense_reads_y(int op)
{
	return op != STARFA_DENSE_SET && op != STARFA_DENSE_COPY;
}

#endif
