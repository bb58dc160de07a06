/* SpMM on one CSR tile, OpenMP on the CPU. */
#include "cpu/spmm.h"

#include "cpu/cg.h"
#include "cpu/clones.h"
#include "cpu/partition.h"

#include <string.h>

/* The AVX-512 register kernels of the fused product: GCC or clang on x86-64. */
#if defined(__x86_64__) && defined(__GNUC__)
#define STARFA_CPU_FUSED_AVX512 1
#else
#define STARFA_CPU_FUSED_AVX512 0
#endif

static void spmm_rows(int64_t r0, int64_t r1, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
		      const float *X, int64_t ldx, int64_t k, int beta, float *Y, int64_t ldy)
{
	for (int64_t r = r0; r < r1; r++) {
		float *y = Y + r * ldy;
		/* Overwrite, not 0 * y: the block may hold anything (NaN included) before its first tile. */
		if (!beta)
			memset(y, 0, (size_t)k * sizeof *y);
		for (uint32_t p = rowptr[r]; p < rowptr[r + 1]; p++)
			starfa_cpu_axpy(sval[p], X + (int64_t)colind[p] * ldx, y, k);
	}
}

void starfa_cpu_spmm(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
		     const float *X, int64_t ldx, int64_t k, int beta, float *Y, int64_t ldy, int nthreads)
{
	if (nthreads <= 1) {
		spmm_rows(0, nrows, rowptr, colind, sval, X, ldx, k, beta, Y, ldy);
		return;
	}
#pragma omp parallel num_threads(nthreads)
	{
		int64_t r0, r1;
		starfa_cpu_nnz_partition(nrows, rowptr, omp_get_thread_num(), omp_get_num_threads(), &r0, &r1);
		spmm_rows(r0, r1, rowptr, colind, sval, X, ldx, k, beta, Y, ldy);
	}
}

/* f of the fused product, as starfa_fused_mode numbers them. */
static inline float fused_value(int mode, float s, float y, float eps)
{
	return mode == 0 ? y : mode == 1 ? s * y : s / (y > eps ? y : eps);
}

/* How far ahead (in nonzeros) the kernels prefetch B's rows: the rows of a tile's columns are read in
 * the order of its nonzeros, at random, and a B of a few MB lives in L2/L3, whose latency one row's work
 * does not hide. */
#define FUSED_PREFETCH 16

/* Four nonzeros a step: their B rows stream at once for the dot products while A's row stays in L1, then
 * the four scaled rows go onto Y's in CSR order (still in L1). Any rank, any x86-64 or other CPU. */
STARFA_CPU_CLONES
static void fused_portable(int64_t nrows, const uint32_t *restrict rowptr, const uint32_t *restrict colind,
			   const float *restrict sval, const float *restrict A, int64_t lda, const float *restrict B,
			   int64_t ldb, int64_t k, int mode, float eps, int beta, float *restrict Y, int64_t ldy,
			   const float *restrict active, int64_t ldact)
{
	const uint32_t nnz = rowptr[nrows];
	for (int64_t r = 0; r < nrows; r++) {
		if (active && active[r * ldact] == 0.0f)
			continue;
		float *restrict y = Y + r * ldy;
		const float *restrict a = A + r * lda;
		if (!beta)
			memset(y, 0, (size_t)k * sizeof *y);
		uint32_t p = rowptr[r];
		const uint32_t end = rowptr[r + 1];
		for (; (uint64_t)p + 4 <= end; p += 4) {
			if ((uint64_t)p + FUSED_PREFETCH + 4 <= nnz)
				for (int q = 0; q < 4; q++) {
					const char *ahead = (const char *)(B + (int64_t)colind[p + FUSED_PREFETCH + q] * ldb);
					for (int64_t line = 0; line * 64 < k * (int64_t)sizeof(float) + 64; line++)
						__builtin_prefetch(ahead + line * 64);
				}
			const float *restrict b0 = B + (int64_t)colind[p] * ldb;
			const float *restrict b1 = B + (int64_t)colind[p + 1] * ldb;
			const float *restrict b2 = B + (int64_t)colind[p + 2] * ldb;
			const float *restrict b3 = B + (int64_t)colind[p + 3] * ldb;
			float s[4];
			starfa_dot4(a, b0, b1, b2, b3, k, s);
			const float f0 = fused_value(mode, sval[p], s[0], eps), f1 = fused_value(mode, sval[p + 1], s[1], eps);
			const float f2 = fused_value(mode, sval[p + 2], s[2], eps), f3 = fused_value(mode, sval[p + 3], s[3], eps);
#pragma omp simd
			for (int64_t c = 0; c < k; c++)
				y[c] = (((y[c] + f0 * b0[c]) + f1 * b1[c]) + f2 * b2[c]) + f3 * b3[c];
		}
		for (; p < end; p++) {
			const float *restrict b = B + (int64_t)colind[p] * ldb;
			starfa_cpu_axpy(fused_value(mode, sval[p], starfa_dot(a, b, k), eps), b, y, k);
		}
	}
}

#if STARFA_CPU_FUSED_AVX512
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512dq")))
/* The loops over the NC registers and the four nonzeros unroll fully, so their arrays stay in registers. */
#define UNROLL _Pragma("GCC unroll 16")

/* f of four products at once (the lanes of s), as fused_value. max_ps returns its second operand when
 * the first is NaN, so a NaN product meets eps there too. */
AVX512 static inline __m128 fused_value4(int mode, const float *sval, __m128 s, __m128 eps)
{
	if (mode == 0)
		return s;
	const __m128 v = _mm_loadu_ps(sval);
	return mode == 1 ? _mm_mul_ps(v, s) : _mm_div_ps(v, _mm_max_ps(s, eps));
}

/* The sums of the lanes of four vectors, in the four lanes of the result. */
AVX512 static inline __m128 hsum4(__m512 d0, __m512 d1, __m512 d2, __m512 d3)
{
	const __m256 e0 = _mm256_add_ps(_mm512_castps512_ps256(d0), _mm512_extractf32x8_ps(d0, 1));
	const __m256 e1 = _mm256_add_ps(_mm512_castps512_ps256(d1), _mm512_extractf32x8_ps(d1, 1));
	const __m256 e2 = _mm256_add_ps(_mm512_castps512_ps256(d2), _mm512_extractf32x8_ps(d2, 1));
	const __m256 e3 = _mm256_add_ps(_mm512_castps512_ps256(d3), _mm512_extractf32x8_ps(d3, 1));
	const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(e0, e1), _mm256_hadd_ps(e2, e3));
	return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* Ranks up to 16·NC: A's row and Y's accumulators live in NC registers each for the whole row, B's
 * rows come in with masked loads (nothing read past a row's k floats), four nonzeros a step with their
 * four dot products summed across lanes together, B's rows prefetched FUSED_PREFETCH nonzeros ahead. */
#define FUSED_REGISTERS(NC)                                                                                         \
	AVX512 static void fused_avx512_##NC(int64_t nrows, const uint32_t *restrict rowptr,                        \
					     const uint32_t *restrict colind, const float *restrict sval,          \
					     const float *restrict A, int64_t lda, const float *restrict B,        \
					     int64_t ldb, int64_t k, int mode, float eps, int beta,                \
					     float *restrict Y, int64_t ldy, const float *restrict active,         \
					     int64_t ldact)                                                        \
	{                                                                                                           \
		__mmask16 mask[NC];                                                                                 \
		UNROLL for (int c = 0; c < NC; c++) {                                                                      \
			const int64_t lanes = k - 16 * c;                                                           \
			mask[c] = lanes >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << lanes) - 1);                 \
		}                                                                                                   \
		const __m128 veps = _mm_set1_ps(eps);                                                               \
		const uint32_t nnz = rowptr[nrows];                                                                 \
		const int lines = (int)((k * (int64_t)sizeof(float) + 63) / 64) + 1;                               \
		for (int64_t r = 0; r < nrows; r++) {                                                               \
			if (active && active[r * ldact] == 0.0f)                                                    \
				continue;                                                                           \
			__m512 a[NC], y[NC];                                                                        \
			float *restrict yr = Y + r * ldy;                                                           \
			UNROLL for (int c = 0; c < NC; c++) {                                                              \
				a[c] = _mm512_maskz_loadu_ps(mask[c], A + r * lda + 16 * c);                        \
				y[c] = beta ? _mm512_maskz_loadu_ps(mask[c], yr + 16 * c) : _mm512_setzero_ps();     \
			}                                                                                           \
			uint32_t p = rowptr[r];                                                                     \
			const uint32_t end = rowptr[r + 1];                                                         \
			for (; (uint64_t)p + 4 <= end; p += 4) {                                                    \
				if ((uint64_t)p + FUSED_PREFETCH + 4 <= nnz)                                        \
					UNROLL for (int q = 0; q < 4; q++) {                                               \
						const char *ahead =                                                 \
							(const char *)(B + (int64_t)colind[p + FUSED_PREFETCH + q] * ldb); \
						for (int line = 0; line < lines; line++)                            \
							_mm_prefetch(ahead + 64 * line, _MM_HINT_T0);               \
					}                                                                           \
				const float *b[4];                                                                  \
				UNROLL for (int q = 0; q < 4; q++)                                                         \
					b[q] = B + (int64_t)colind[p + q] * ldb;                                    \
				__m512 bv[4][NC], d[4];                                                             \
				UNROLL for (int q = 0; q < 4; q++) {                                                       \
					d[q] = _mm512_setzero_ps();                                                 \
					UNROLL for (int c = 0; c < NC; c++) {                                              \
						bv[q][c] = _mm512_maskz_loadu_ps(mask[c], b[q] + 16 * c);           \
						d[q] = _mm512_fmadd_ps(a[c], bv[q][c], d[q]);                       \
					}                                                                           \
				}                                                                                   \
				const __m512 f = _mm512_castps128_ps512(                                            \
					fused_value4(mode, sval + p, hsum4(d[0], d[1], d[2], d[3]), veps));         \
				UNROLL for (int q = 0; q < 4; q++) {                                                       \
					const __m512 fq = _mm512_permutexvar_ps(_mm512_set1_epi32(q), f);           \
					UNROLL for (int c = 0; c < NC; c++)                                                \
						y[c] = _mm512_fmadd_ps(fq, bv[q][c], y[c]);                         \
				}                                                                                   \
			}                                                                                           \
			for (; p < end; p++) {                                                                      \
				const float *b = B + (int64_t)colind[p] * ldb;                                      \
				__m512 bv[NC], d = _mm512_setzero_ps();                                             \
				UNROLL for (int c = 0; c < NC; c++) {                                                      \
					bv[c] = _mm512_maskz_loadu_ps(mask[c], b + 16 * c);                         \
					d = _mm512_fmadd_ps(a[c], bv[c], d);                                        \
				}                                                                                   \
				const __m512 fv = _mm512_set1_ps(fused_value(mode, sval[p], _mm512_reduce_add_ps(d), eps)); \
				UNROLL for (int c = 0; c < NC; c++)                                                        \
					y[c] = _mm512_fmadd_ps(fv, bv[c], y[c]);                                    \
			}                                                                                           \
			UNROLL for (int c = 0; c < NC; c++)                                                                \
				_mm512_mask_storeu_ps(yr + 16 * c, mask[c], y[c]);                                  \
		}                                                                                                   \
	}

FUSED_REGISTERS(1)
FUSED_REGISTERS(2)
FUSED_REGISTERS(3)
FUSED_REGISTERS(4)
#undef FUSED_REGISTERS
#undef UNROLL
#endif

int starfa_cpu_sddmm_spmm_registers(int64_t k)
{
#if STARFA_CPU_FUSED_AVX512
	static int avx512 = -1;
	if (avx512 < 0) {
		__builtin_cpu_init();
		avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
	}
	return avx512 && k >= 1 && k <= 64;
#else
	(void)k;
	return 0;
#endif
}

void starfa_cpu_sddmm_spmm(int64_t nrows, const uint32_t *restrict rowptr, const uint32_t *restrict colind,
			   const float *restrict sval, const float *restrict A, int64_t lda, const float *restrict B,
			   int64_t ldb, int64_t k, int mode, float eps, int beta, float *restrict Y, int64_t ldy,
			   const float *restrict active, int64_t ldact)
{
#if STARFA_CPU_FUSED_AVX512
	if (starfa_cpu_sddmm_spmm_registers(k)) {
		void (*const kernel[4])(int64_t, const uint32_t *, const uint32_t *, const float *, const float *, int64_t,
					const float *, int64_t, int64_t, int, float, int, float *, int64_t, const float *,
					int64_t) = {
			fused_avx512_1, fused_avx512_2, fused_avx512_3, fused_avx512_4};
		kernel[(k - 1) / 16](nrows, rowptr, colind, sval, A, lda, B, ldb, k, mode, eps, beta, Y, ldy, active, ldact);
		return;
	}
#endif
	fused_portable(nrows, rowptr, colind, sval, A, lda, B, ldb, k, mode, eps, beta, Y, ldy, active, ldact);
}

/* Not a clone set itself: the library exports no function that has clones. */
void starfa_cpu_sddmm_spmm_portable(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *sval,
				    const float *A, int64_t lda, const float *B, int64_t ldb, int64_t k, int mode, float eps,
				    int beta, float *Y, int64_t ldy, const float *active, int64_t ldact)
{
	fused_portable(nrows, rowptr, colind, sval, A, lda, B, ldb, k, mode, eps, beta, Y, ldy, active, ldact);
}

void starfa_cpu_spmm_zero(int64_t nrows, int64_t k, float *Y, int64_t ldy)
{
	for (int64_t r = 0; r < nrows; r++)
		memset(Y + r * ldy, 0, (size_t)k * sizeof *Y);
}
