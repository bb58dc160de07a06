/* Special functions shared by the CPU and CUDA kernels (host and device inline). */
#ifndef STARFA_CPU_SPECIAL_H
#define STARFA_CPU_SPECIAL_H

#ifdef __CUDACC__
#define STARFA_HD __host__ __device__ __forceinline__
#else
#define STARFA_HD static inline
#endif

#include <math.h>
#include <stdint.h>

/* The digamma function ψ(x) = d/dx log Γ(x) for x > 0: the recurrence ψ(x) = ψ(x + 1) - 1/x up to
 * x >= 6, then the asymptotic series (error below 1e-7 relative there). x <= 0: NaN (Dirichlet
 * parameters are positive; a non-positive one is a bug upstream, which NaN makes visible). */
STARFA_HD double starfa_digamma_d(double x)
{
	double r = 0.0;
	if (!(x > 0.0))
		return NAN;
	while (x < 6.0) {
		r -= 1.0 / x;
		x += 1.0;
	}
	double f = 1.0 / (x * x);
	double t = f * (-1.0 / 12 + f * (1.0 / 120 + f * (-1.0 / 252 + f * (1.0 / 240 + f * (-1.0 / 132)))));
	return r + log(x) - 0.5 / x + t;
}

/* max(a, y) for a number a, as fmaxf(a, y): y where y > a, else a (a also where y is NaN). A select,
 * which vectorizes; fmaxf is a library call on x86. */
STARFA_HD float starfa_maxf(float a, float y)
{
	return y > a ? y : a;
}

/* exp and log in float without branches or table look-ups, so that GCC vectorizes the loops that call
 * them (glibc's expf and logf are calls it cannot vectorize without -ffast-math). The device has its
 * own. Both are within 2 ulp of the exact result (tests/test_dense.c checks them over their range).
 *
 * exp(x) = 2^n · e^r with n = round(x / log 2) and r = x - n·log 2 (log 2 in two parts, so that r is
 * exact), |r| <= log(2)/2, e^r by its Taylor series to r^7 (the next term is below 5e-9 relative),
 * and 2^n applied in two halves (2^128 is not a float). Below log(FLT_MIN) the result would be
 * subnormal: 0; above log(FLT_MAX) it is +inf; NaN stays NaN. */
STARFA_HD float starfa_expf(float x)
{
#ifdef __CUDA_ARCH__
	return expf(x);
#else
	const float lo = -87.3365448f, hi = 88.7228394f; /* log(FLT_MIN), log(FLT_MAX) */
	const float shifter = 12582912.0f;             /* 1.5 · 2^23: adding it rounds to an integer */
	const float xc = x > hi ? hi : x >= lo ? x : lo; /* NaN: lo, so that n below is a number */
	const float n = (xc * 1.44269504f + shifter) - shifter;
	const float r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;
	float p = 1.0f / 5040;
	p = p * r + 1.0f / 720;
	p = p * r + 1.0f / 120;
	p = p * r + 1.0f / 24;
	p = p * r + 1.0f / 6;
	p = p * r + 0.5f;
	p = p * r + 1.0f;
	p = p * r + 1.0f;
	const int ni = (int)n, n1 = ni / 2; /* n in [-126, 128]: both biased exponents in [64, 191] */
	union {
		float f;
		uint32_t i;
	} s1 = {.i = (uint32_t)(n1 + 127) << 23}, s2 = {.i = (uint32_t)(ni - n1 + 127) << 23};
	const float v = p * s1.f * s2.f;
	return x != x ? x : x > hi ? INFINITY : x < lo ? 0.0f : v;
#endif
}

/* log(x) = e·log 2 + log m with x = m · 2^e, m in [sqrt(1/2), sqrt(2)), and log m = 2 atanh(t),
 * t = (m - 1)/(m + 1), |t| <= 0.172, by its series to t^9 (the next term is below 3e-9 relative).
 * x = 0: -inf; x < 0 or NaN: NaN; +inf: +inf; subnormal x: scaled by 2^23 first. */
STARFA_HD float starfa_logf(float x)
{
#ifdef __CUDA_ARCH__
	return logf(x);
#else
	/* Every value is computed on every path and the branches are selects, so that the compiler's
	 * if-conversion never has to move a floating-point operation out of a branch. */
	const float scaled = x * 8388608.0f;
	const int sub = x < 1.17549435e-38f;
	union {
		float f;
		uint32_t i;
	} u = {.f = sub ? scaled : x};
	int e = (int)((u.i >> 23) & 0xff) - 127;
	u.i = (u.i & 0x007fffffu) | 0x3f800000u; /* m in [1, 2) */
	const float half = u.f * 0.5f;
	const int high = u.f > 1.41421356f;
	const float m = high ? half : u.f;
	e += high - (sub ? 23 : 0);
	const float t = (m - 1.0f) / (m + 1.0f), t2 = t * t;
	float p = 1.0f / 9;
	p = p * t2 + 1.0f / 7;
	p = p * t2 + 1.0f / 5;
	p = p * t2 + 1.0f / 3;
	p = p * t2 + 1.0f;
	const float fe = (float)e;
	const float v = fe * 0.693359375f + (2.0f * t * p - fe * 2.12194440e-4f);
	const float w = x == INFINITY ? x : x == 0.0f ? -INFINITY : v;
	return x >= 0.0f ? w : NAN;
#endif
}

/* ψ(x) in float, branch-free for the same reason: the recurrence ψ(x) = ψ(x + 1) - 1/x applied six
 * times while x < 6 (as selects), then the asymptotic series at x >= 6 (the first omitted term is
 * below 1e-9 there). x <= 0 or NaN: NaN; +inf: +inf. */
STARFA_HD float starfa_digammaf(float x)
{
	float y = x, s = 0.0f;
#ifdef __CUDACC__
#pragma unroll
#else
#pragma GCC unroll 6
#endif
	for (int i = 0; i < 6; i++) {
		const int below = y < 6.0f;
		s += below ? 1.0f / y : 0.0f;
		y += below ? 1.0f : 0.0f;
	}
	const float iy = 1.0f / y, f = iy * iy;
	const float t = f * (-1.0f / 12 + f * (1.0f / 120 + f * (-1.0f / 252 + f * (1.0f / 240))));
	const float v = starfa_logf(y) - 0.5f * iy + t - s;
	const float w = x == INFINITY ? x : v;
	return x > 0.0f ? w : NAN;
}

/* log Γ(x) for x > 0: the recurrence log Γ(x) = log Γ(x + 1) - log x up to x >= 7, then Stirling's series
 * (error below 1e-7 absolute there). Its own code rather than lgammaf, which is not thread-safe on the
 * host (it writes signgam) and must match on the device. x <= 0: NaN. */
STARFA_HD double starfa_lgamma_d(double x)
{
	double r = 0.0;
	if (!(x > 0.0))
		return NAN;
	if (x < 7.0) {
		double p = 1.0; /* x (x + 1) ... below 7: one log for the recurrence's terms */
		while (x < 7.0) {
			p *= x;
			x += 1.0;
		}
		r = -log(p);
	}
	double f = 1.0 / (x * x);
	double t = (1.0 / 12 + f * (-1.0 / 360 + f * (1.0 / 1260 + f * (-1.0 / 1680)))) / x;
	return r + (x - 0.5) * log(x) - x + 0.91893853320467274178 + t;
}

STARFA_HD float starfa_lgammaf(float x)
{
	return (float)starfa_lgamma_d(x);
}

#endif
