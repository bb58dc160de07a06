/* Dot products of short float rows for the CPU kernels, inlined into their clones (cpu/clones.h).
 *
 * Eight partial sums and a tree: a reduction clause's epilogue adds a whole vector's lanes one after the
 * other, which at k = 16-64 is the longest chain of a kernel's step (about a third of the CPU SGD
 * kernel's samples and of the SDDMM kernel's: bench/SGD.md). The partial sums are one vector (GCC's
 * vector extensions) and the tree is three adds on its lanes in registers: as a float array, the sums
 * were stored to the stack and the tree read them back one by one (`perf annotate`). The adds and their
 * order are the same either way. */
#ifndef STARFA_CPU_DOT_H
#define STARFA_CPU_DOT_H

#include <stdint.h>

#define STARFA_DOT_INLINE static inline __attribute__((always_inline))

/* Eight floats as one vector, loaded from any 4-byte alignment; four lanes. */
typedef float starfa_v8 __attribute__((vector_size(32), aligned(4), may_alias));
typedef float starfa_v4 __attribute__((vector_size(16)));
/* Four floats from any 4-byte alignment. */
typedef float starfa_v4u __attribute__((vector_size(16), aligned(4), may_alias));

/* *s += p in lanes 0-3 (zeros in lanes 4-7): the same as adding a tail vector of p's products and zeros
 * (s + 0 is s: the sums start at +0 and never become -0). */
STARFA_DOT_INLINE void starfa_add_low4(starfa_v8 *s, starfa_v4 p)
{
	*s += (starfa_v8){p[0], p[1], p[2], p[3], 0, 0, 0, 0};
}

/* ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7)), in registers (GCC and clang alike). */
STARFA_DOT_INLINE float starfa_tree8v(starfa_v8 s)
{
	const starfa_v4 lo = {s[0], s[1], s[2], s[3]}, hi = {s[4], s[5], s[6], s[7]};
	const starfa_v4 t = lo + hi; /* s0+s4, s1+s5, s2+s6, s3+s7 */
	return (t[0] + t[1]) + (t[2] + t[3]);
}

/* sum over d < k of a[d] b[d] */
STARFA_DOT_INLINE float starfa_dot(const float *restrict a, const float *restrict b, int64_t k)
{
	starfa_v8 s = {0};
	int64_t d = 0;
	for (; d + 8 <= k; d += 8)
		s += *(const starfa_v8 *)(a + d) * *(const starfa_v8 *)(b + d);
	/* The tail's 1-7 elements in lanes 0-6, as one vector would put them: four by a 16-byte load (rows
	 * padded to a multiple of 4 have no other tail), the rest one by one. */
	int j = 0;
	if (d + 4 <= k) {
		starfa_add_low4(&s, *(const starfa_v4u *)(a + d) * *(const starfa_v4u *)(b + d));
		j = 4;
	}
	if (d + j < k) {
		starfa_v8 x = {0}, y = {0};
		for (; d + j < k; j++) {
			x[j] = a[d + j];
			y[j] = b[d + j];
		}
		s += x * y;
	}
	return starfa_tree8v(s);
}

/* Four dot products of one row a with rows b0..b3, which stream together while a stays in L1. */
STARFA_DOT_INLINE void starfa_dot4(const float *restrict a, const float *restrict b0, const float *restrict b1,
				   const float *restrict b2, const float *restrict b3, int64_t k, float out[4])
{
	starfa_v8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
	int64_t d = 0;
	for (; d + 8 <= k; d += 8) {
		const starfa_v8 x = *(const starfa_v8 *)(a + d);
		s0 += x * *(const starfa_v8 *)(b0 + d);
		s1 += x * *(const starfa_v8 *)(b1 + d);
		s2 += x * *(const starfa_v8 *)(b2 + d);
		s3 += x * *(const starfa_v8 *)(b3 + d);
	}
	int j = 0;
	if (d + 4 <= k) { /* as in starfa_dot */
		const starfa_v4 x = *(const starfa_v4u *)(a + d);
		starfa_add_low4(&s0, x * *(const starfa_v4u *)(b0 + d));
		starfa_add_low4(&s1, x * *(const starfa_v4u *)(b1 + d));
		starfa_add_low4(&s2, x * *(const starfa_v4u *)(b2 + d));
		starfa_add_low4(&s3, x * *(const starfa_v4u *)(b3 + d));
		j = 4;
	}
	if (d + j < k) {
		starfa_v8 x = {0}, y0 = {0}, y1 = {0}, y2 = {0}, y3 = {0};
		for (; d + j < k; j++) {
			x[j] = a[d + j];
			y0[j] = b0[d + j];
			y1[j] = b1[d + j];
			y2[j] = b2[d + j];
			y3[j] = b3[d + j];
		}
		s0 += x * y0;
		s1 += x * y1;
		s2 += x * y2;
		s3 += x * y3;
	}
	out[0] = starfa_tree8v(s0);
	out[1] = starfa_tree8v(s1);
	out[2] = starfa_tree8v(s2);
	out[3] = starfa_tree8v(s3);
}

#endif
