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
STARFA_HD float starfa_digammaf(float xf)
{
	double x = xf, r = 0.0;
	if (!(x > 0.0))
		return NAN;
	while (x < 6.0) {
		r -= 1.0 / x;
		x += 1.0;
	}
	double f = 1.0 / (x * x);
	double t = f * (-1.0 / 12 + f * (1.0 / 120 + f * (-1.0 / 252 + f * (1.0 / 240 + f * (-1.0 / 132)))));
	return (float)(r + log(x) - 0.5 / x + t);
}

#endif
