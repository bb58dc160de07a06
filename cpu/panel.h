/* Sums of outer products over a gathered panel: the shared core of the hermitian and gram kernels
 * (no StarPU here). A panel holds n vectors of k floats, padded with zeros to kp, a multiple of the
 * vector width, so the inner loops never need a remainder. */
#ifndef STARFA_CPU_PANEL_H
#define STARFA_CPU_PANEL_H

#include <stdint.h>
#include <string.h>

#define STARFA_PANEL_VEC 16   /* floats per vector: one AVX-512 register, two AVX2 ones */
#define STARFA_PANEL_MR 8     /* rows of C per register block */
#define STARFA_PANEL_CHUNK 256 /* panel rows per pass: P and Q stay in L2 at kp = 128 */

typedef float starfa_vf __attribute__((vector_size(64)));

static inline int64_t starfa_panel_width(int64_t k)
{
	return (k + STARFA_PANEL_VEC - 1) / STARFA_PANEL_VEC * STARFA_PANEL_VEC;
}

/* Unaligned vector loads and stores. Macros, not functions: a function taking or returning these
 * vectors has an ABI that differs between the AVX-512 clone and the baseline one (gcc says so). */
#define STARFA_VF_LOAD(p)                                                                                 \
	({                                                                                                \
		starfa_vf v_;                                                                             \
		memcpy(&v_, (p), sizeof v_);                                                              \
		v_;                                                                                       \
	})
#define STARFA_VF_STORE(p, v) memcpy((p), &(v), sizeof(starfa_vf))

/* One register block: C[a0 + i][c .. c + 16 * NV] = (init ? 0 : C) + sum_v Q[v][a0 + i] * P[v][c ..], for
 * i < 8. Eight rows by two vectors keep 16 accumulators in registers and issue 16 FMAs for 2 loads and
 * 8 broadcasts. */
#define STARFA_PANEL_BLOCK(NV)                                                                            \
	static inline __attribute__((always_inline)) void starfa_panel_block##NV(                         \
		int64_t n, int64_t kp, const float *restrict P, const float *restrict Q, int64_t a0, int64_t c, \
		float *restrict C, int init)                                                              \
	{                                                                                                 \
		starfa_vf acc[STARFA_PANEL_MR][NV];                                                       \
		for (int i = 0; i < STARFA_PANEL_MR; i++)                                                 \
			for (int j = 0; j < NV; j++)                                                      \
				acc[i][j] = init ? (starfa_vf){0}                                         \
						 : STARFA_VF_LOAD(C + (a0 + i) * kp + c + j * STARFA_PANEL_VEC); \
		for (int64_t v = 0; v < n; v++) {                                                         \
			starfa_vf p[NV];                                                                  \
			for (int j = 0; j < NV; j++)                                                      \
				p[j] = STARFA_VF_LOAD(P + v * kp + c + j * STARFA_PANEL_VEC);             \
			const float *q = Q + v * kp + a0;                                                 \
			_Pragma("GCC unroll 8") for (int i = 0; i < STARFA_PANEL_MR; i++)                 \
				for (int j = 0; j < NV; j++)                                              \
					acc[i][j] += q[i] * p[j];                                         \
		}                                                                                         \
		for (int i = 0; i < STARFA_PANEL_MR; i++)                                                 \
			for (int j = 0; j < NV; j++)                                                      \
				STARFA_VF_STORE(C + (a0 + i) * kp + c + j * STARFA_PANEL_VEC, acc[i][j]); \
	}
STARFA_PANEL_BLOCK(1)
STARFA_PANEL_BLOCK(2)

/* C[a][c] = (init ? 0 : C[a][c]) + sum_{v < n} Q[v][a] * P[v][c] for every a and c, or (upper) only
 * for c >= a and the blocks straddling the diagonal: half the work, but C must then be mirrored. P and
 * Q are n x kp with leading dimension kp (Q may be P); C is kp x kp. */
static inline __attribute__((always_inline)) void starfa_panel_sum(int64_t n, int64_t kp, const float *P,
								   const float *Q, float *C, int init, int upper)
{
	for (int64_t a0 = 0; a0 < kp; a0 += STARFA_PANEL_MR) {
		int64_t c = upper ? a0 / STARFA_PANEL_VEC * STARFA_PANEL_VEC : 0;
		for (; c + 2 * STARFA_PANEL_VEC <= kp; c += 2 * STARFA_PANEL_VEC)
			starfa_panel_block2(n, kp, P, Q, a0, c, C, init);
		if (c < kp)
			starfa_panel_block1(n, kp, P, Q, a0, c, C, init);
	}
}

/* Copies k floats and pads with zeros to kp. */
static inline void starfa_panel_gather(float *dst, const float *src, int64_t k, int64_t kp)
{
	memcpy(dst, src, (size_t)k * sizeof *dst);
	for (int64_t d = k; d < kp; d++)
		dst[d] = 0.0f;
}

#endif
