/* FP16 storage (the per-row systems, half-precision factors): conversions on raw uint16 words, round
 * to nearest even (no StarPU here). The two scalar conversions are host and device inline: on a GPU they
 * are the hardware's (__float2half_rn), which rounds the same way, so CPU and CUDA kernels store the
 * same halves. */
#ifndef STARFA_CPU_HALF_H
#define STARFA_CPU_HALF_H

#include "cpu/special.h" /* STARFA_HD */

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif

/* gcc 12 and clang 15 have _Float16 on x86-64 (F16C turns the conversions into one instruction);
 * elsewhere the conversions are done by hand, with the same rounding (to nearest even). */
#if defined(__x86_64__) && defined(__FLT16_MAX__) && !defined(__CUDACC__)
#define STARFA_HAVE_FLOAT16 1
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#define STARFA_HAVE_F16C_PATH 1
#include <immintrin.h>
#endif

STARFA_HD float starfa_half_to_float(uint16_t h)
{
#ifdef __CUDA_ARCH__
	return __half2float(__ushort_as_half(h));
#elif defined(STARFA_HAVE_FLOAT16)
	_Float16 f;
	memcpy(&f, &h, sizeof f);
	return (float)f;
#else
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (man << 13); /* Inf, NaN */
	} else if (exp == 0) {
		if (man == 0) {
			bits = sign;
		} else { /* subnormal: normalise */
			int shift = 0;
			while (!(man & 0x400)) {
				man <<= 1;
				shift++;
			}
			bits = sign | ((uint32_t)(113 - shift) << 23) | ((man & 0x3ff) << 13);
		}
	} else {
		bits = sign | ((exp + 112) << 23) | (man << 13);
	}
	float f;
	memcpy(&f, &bits, sizeof f);
	return f;
#endif
}

STARFA_HD uint16_t starfa_float_to_half(float x)
{
#ifdef __CUDA_ARCH__
	return __half_as_ushort(__float2half_rn(x));
#elif defined(STARFA_HAVE_FLOAT16)
	_Float16 f = (_Float16)x;
	uint16_t h;
	memcpy(&h, &f, sizeof h);
	return h;
#else
	uint32_t bits;
	memcpy(&bits, &x, sizeof bits);
	uint32_t sign = (bits >> 16) & 0x8000, exp = (bits >> 23) & 0xff, man = bits & 0x7fffff;
	if (exp == 0xff)
		return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
	int e = (int)exp - 112; /* the half exponent */
	if (e >= 0x1f)
		return (uint16_t)(sign | 0x7c00);
	if (e <= 0) { /* subnormal or zero in half */
		if (e < -10)
			return (uint16_t)sign;
		man |= 0x800000;
		uint32_t shift = (uint32_t)(14 - e), half = man >> shift, rest = man & ((1u << shift) - 1),
			 mid = 1u << (shift - 1);
		if (rest > mid || (rest == mid && (half & 1)))
			half++;
		return (uint16_t)(sign | half);
	}
	uint32_t half = ((uint32_t)e << 10) | (man >> 13), rest = man & 0x1fff;
	if (rest > 0x1000 || (rest == 0x1000 && (half & 1)))
		half++; /* may carry into the exponent, up to Inf: as it should */
	return (uint16_t)(sign | half);
#endif
}

/* Rows of FP16 words to floats and back. gcc 12 does not vectorise _Float16 conversions, so where the
 * CPU has F16C (every x86-64 since 2013) eight are converted per instruction. */
#ifdef STARFA_HAVE_F16C_PATH
__attribute__((target("avx,f16c"))) static inline void starfa_half_load_f16c(const uint16_t *h, float *out, int64_t n)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
	for (; i < n; i++)
		out[i] = starfa_half_to_float(h[i]);
}

__attribute__((target("avx,f16c"))) static inline void starfa_half_store_f16c(const float *x, uint16_t *h, int64_t n)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
	for (; i < n; i++)
		h[i] = starfa_float_to_half(x[i]);
}

__attribute__((target("avx,f16c,fma"))) static inline float starfa_half_dot_f16c(const uint16_t *h, const float *x,
										  int64_t n)
{
	__m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) {
		s0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))), _mm256_loadu_ps(x + i), s0);
		s1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i + 8))),
				     _mm256_loadu_ps(x + i + 8), s1);
	}
	s0 = _mm256_add_ps(s0, s1);
	__m128 q = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
	q = _mm_add_ps(q, _mm_movehl_ps(q, q));
	q = _mm_add_ss(q, _mm_movehdup_ps(q));
	float sum = _mm_cvtss_f32(q);
	for (; i < n; i++)
		sum += starfa_half_to_float(h[i]) * x[i];
	return sum;
}

static inline int starfa_have_f16c(void)
{
	static int have = -1;
	if (have < 0)
		have = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx") && __builtin_cpu_supports("fma");
	return have;
}
#endif

static inline void starfa_half_load(const uint16_t *h, float *out, int64_t n)
{
#ifdef STARFA_HAVE_F16C_PATH
	if (starfa_have_f16c()) {
		starfa_half_load_f16c(h, out, n);
		return;
	}
#endif
	for (int64_t i = 0; i < n; i++)
		out[i] = starfa_half_to_float(h[i]);
}

static inline void starfa_half_store(const float *x, uint16_t *h, int64_t n)
{
#ifdef STARFA_HAVE_F16C_PATH
	if (starfa_have_f16c()) {
		starfa_half_store_f16c(x, h, n);
		return;
	}
#endif
	for (int64_t i = 0; i < n; i++)
		h[i] = starfa_float_to_half(x[i]);
}

/* sum_i h[i] * x[i], h in FP16. */
static inline float starfa_half_dot(const uint16_t *h, const float *x, int64_t n)
{
#ifdef STARFA_HAVE_F16C_PATH
	if (starfa_have_f16c())
		return starfa_half_dot_f16c(h, x, n);
#endif
	float sum = 0.0f;
	for (int64_t i = 0; i < n; i++)
		sum += starfa_half_to_float(h[i]) * x[i];
	return sum;
}

#endif
