/* The conjugate-gradient steps on one small SPD system, shared by the solve and rowsolve kernels, and the
 * small-vector operations they and the other kernels use. */
#ifndef STARFA_CPU_CG_H
#define STARFA_CPU_CG_H

#include "cpu/dot.h"

#include <float.h>
#include <math.h>
#include <stdint.h>

static inline float starfa_cpu_dot(const float *restrict x, const float *restrict y, int64_t n)
{
	return starfa_dot(x, y, n);
}

/* y += a x over n floats: the loop the compiler vectorizes across the rank. */
static inline void starfa_cpu_axpy(float a, const float *restrict x, float *restrict y, int64_t n)
{
#pragma omp simd
	for (int64_t d = 0; d < n; d++)
		y[d] += a * x[d];
}

static inline int starfa_cpu_all_finite(const float *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		if (!isfinite(x[i]))
			return 0;
	return 1;
}

/* q <- M·p for the system at hand. */
typedef void (*starfa_cpu_apply_fn)(void *ctx, const float *restrict p, float *restrict q);

/* Up to `steps` CG steps on M x = b of order k from x, given q = M·x on entry. r, p and q are
 * scratch vectors of len >= k entries (the first len of r and p are set, so zero padding past k
 * stays zero when b's and q's padding is). Returns 0 done, 1 a direction of non-positive
 * curvature (M not positive definite: stopped there), 2 a non-finite residual or curvature
 * (x is then left as it was at that step). */
static inline int starfa_cpu_cg_steps(int64_t k, int64_t len, const float *b, float *x, float *r, float *p,
				      float *q, int steps, starfa_cpu_apply_fn apply, void *ctx)
{
	for (int64_t d = 0; d < len; d++) {
		r[d] = b[d] - q[d];
		p[d] = r[d];
	}
	float rs = starfa_cpu_dot(r, r, k);
	if (!isfinite(rs))
		return 2;
	/* Converged to what float32 resolves: past it, rounding makes the curvature look non-positive. */
	const float bb = starfa_cpu_dot(b, b, k), done = 16.0f * FLT_EPSILON * FLT_EPSILON * (rs > bb ? rs : bb);
	for (int step = 0; step < steps && rs > done; step++) {
		apply(ctx, p, q);
		float pq = starfa_cpu_dot(p, q, k);
		if (!isfinite(pq))
			return 2;
		if (pq <= 0.0f)
			return 1;
		float alpha = rs / pq;
		for (int64_t d = 0; d < k; d++) {
			x[d] += alpha * p[d];
			r[d] -= alpha * q[d];
		}
		float rs_next = starfa_cpu_dot(r, r, k);
		float beta = rs_next / rs;
		for (int64_t d = 0; d < k; d++)
			p[d] = r[d] + beta * p[d];
		rs = rs_next;
	}
	return 0;
}

#endif
