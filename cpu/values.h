/* Element-wise maps, reductions and transposition of sparse values (one tile's values as a plain
 * array), OpenMP on the CPU (no StarPU here). The ops are starfa_values_op and starfa_reduce_op. */
#ifndef STARFA_CPU_VALUES_H
#define STARFA_CPU_VALUES_H

#include <stdint.h>

/* Forward to transposed (to_forward 0): dst[q] = src[map[q]]; back (1): dst[map[q]] = src[q]. */
void starfa_cpu_values_transpose(int64_t nnz, const uint32_t *map, const float *src, float *dst, int to_forward);

/* y[p] = op(a, b, x[p], y[p]) for p < n; x may be NULL for the ops that do not read it. */
void starfa_cpu_values_map(int64_t n, int op, float a, float b, const float *x, float *y);

/* The sum over p < n of op's term of (x[p], y[p]), in double. */
double starfa_cpu_values_reduce(int64_t n, int op, float a, const float *x, const float *y);

#endif
