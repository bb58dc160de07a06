/* Special functions shared by the CPU and CUDA kernels (host and device inline). */
#ifndef STARFA_CPU_SPECIAL_H
#define STARFA_CPU_SPECIAL_H

#ifdef __CUDACC__
#define STARFA_HD __host__ __device__ __forceinline__
#else
#define STARFA_HD static inline
#endif

#include <math.h>

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

STARFA_HD float starfa_digammaf(float x)
{
	return (float)starfa_digamma_d(x);
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
