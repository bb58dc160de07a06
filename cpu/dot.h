/* Dot products of short float rows for the CPU kernels, inlined into their clones (cpu/clones.h).
 *
 * Eight partial sums and a tree: a reduction clause's epilogue adds a whole vector's lanes one after the
 * other, which at k = 16-64 is the longest chain of a kernel's step (about a third of the CPU SGD
 * kernel's samples and of the SDDMM kernel's: bench/SGD.md). GCC turns the eight sums into one vector and
 * the tree into three adds. */
#ifndef STARFA_CPU_DOT_H
#define STARFA_CPU_DOT_H

#include <stdint.h>

#define STARFA_DOT_INLINE static inline __attribute__((always_inline))

STARFA_DOT_INLINE float starfa_tree8(const float s[8])
{
	return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* sum over d < k of a[d] b[d] */
STARFA_DOT_INLINE float starfa_dot(const float *restrict a, const float *restrict b, int64_t k)
{
	float s[8] = {0};
	int64_t d = 0;
	for (; d + 8 <= k; d += 8)
		for (int j = 0; j < 8; j++)
			s[j] += a[d + j] * b[d + j];
	for (int j = 0; d + j < k; j++)
		s[j] += a[d + j] * b[d + j];
	return starfa_tree8(s);
}

/* Four dot products of one row a with rows b0..b3, which stream together while a stays in L1. */
STARFA_DOT_INLINE void starfa_dot4(const float *restrict a, const float *restrict b0, const float *restrict b1,
				   const float *restrict b2, const float *restrict b3, int64_t k, float out[4])
{
	float s0[8] = {0}, s1[8] = {0}, s2[8] = {0}, s3[8] = {0};
	int64_t d = 0;
	for (; d + 8 <= k; d += 8)
		for (int j = 0; j < 8; j++) {
			const float x = a[d + j];
			s0[j] += x * b0[d + j];
			s1[j] += x * b1[d + j];
			s2[j] += x * b2[d + j];
			s3[j] += x * b3[d + j];
		}
	for (int j = 0; d + j < k; j++) {
		const float x = a[d + j];
		s0[j] += x * b0[d + j];
		s1[j] += x * b1[d + j];
		s2[j] += x * b2[d + j];
		s3[j] += x * b3[d + j];
	}
	out[0] = starfa_tree8(s0);
	out[1] = starfa_tree8(s1);
	out[2] = starfa_tree8(s2);
	out[3] = starfa_tree8(s3);
}

#endif
