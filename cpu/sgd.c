/* SGD matrix-factorization updates on one CSR tile, on the CPU: one worker per tile, entries in the
 * chunk-shuffled order of cpu/sgd.h, SIMD over k. */
#include "cpu/sgd.h"

#include "cpu/clones.h"
#include "cpu/dot.h"
#include "cpu/half.h"

#include <stddef.h>

/* One update; gu and gv: the rows' AdaGrad accumulators (NULL without). Inlined into the kernel's
 * clones, so that each is vectorized for its architecture with no call an update. */
static inline __attribute__((always_inline)) float update(float *restrict u, float *restrict v, int64_t k, float r,
							  const struct starfa_sgd_pass *s, float *gu, float *gv)
{
	const float dot = starfa_dot(u, v, k) + u[k] + v[k + 1];
	const float e = r - s->mu - dot, lambda = s->lambda;
	float lr_u = s->lr, lr_v = s->lr;
	if (gu) {
		float su = 0.0f, sv = 0.0f;
#pragma omp simd reduction(+ : su, sv)
		for (int64_t d = 0; d < k; d++) {
			float a = e * v[d] - lambda * u[d], b = e * u[d] - lambda * v[d];
			su += a * a;
			sv += b * b;
		}
		*gu += su / (float)k;
		*gv += sv / (float)k;
		lr_u = s->lr / sqrtf(*gu);
		lr_v = s->lr / sqrtf(*gv);
	}
	if (s->biases) {
		u[k] += lr_u * (e - s->lambda_bias * u[k]);
		v[k + 1] += lr_v * (e - s->lambda_bias * v[k + 1]);
	}
#pragma omp simd
	for (int64_t d = 0; d < k; d++) {
		float p = u[d], q = v[d];
		u[d] = p + lr_u * (e * q - lambda * p);
		v[d] = q + lr_v * (e * p - lambda * q);
	}
	return e;
}

/* The kernel, built for each architecture (cpu/clones.h) behind the exported entry below. */
STARFA_CPU_CLONES
static double sgd_tile(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *val, void *U,
		      int64_t ldu, void *V, int64_t ldv, float *Gu, int64_t ldgu, float *Gv, int64_t ldgv,
		      const struct starfa_sgd_pass *s)
{
	float u[STARFA_SGD_MAX_RANK + 2], v[STARFA_SGD_MAX_RANK + 2]; /* FP16 rows, widened */
	uint32_t rows[STARFA_SGD_CHUNK], order[STARFA_SGD_CHUNK];   /* a chunk's rows and its visiting order */
	const int64_t w = s->k + 2;
	const int ada = s->adagrad && Gu && Gv;
	const size_t esize = s->half ? sizeof(uint16_t) : sizeof(float);
	const uint32_t nnz = rowptr[nrows];
	double sse = 0.0;
	int64_t row = 0;
	for (uint32_t c0 = 0, chunk = 0; c0 < nnz; c0 += STARFA_SGD_CHUNK, chunk++) {
		const uint32_t n = nnz - c0 < STARFA_SGD_CHUNK ? nnz - c0 : STARFA_SGD_CHUNK;
		const uint32_t key = starfa_sgd_key(s->seed, s->epoch, s->tile, chunk);
		/* The chunk's rows by one walk along rowptr, on from the last chunk's (no search an entry), and
		 * its order. */
		for (uint32_t q = 0; q < n; q++) {
			while (rowptr[row + 1] <= c0 + q)
				row++;
			rows[q] = (uint32_t)row;
			order[q] = starfa_sgd_order(q, n, key);
		}
		for (uint32_t q = 0; q < n; q++) {
			const uint32_t i = order[q], p = c0 + i;
			const int64_t r = rows[i];
			const int64_t c = colind[p];
			if (q + 1 < n) { /* the next update's rows are random reads: start them now */
				const uint32_t i1 = order[q + 1];
				__builtin_prefetch((const char *)U + (size_t)rows[i1] * (size_t)ldu * esize, 1);
				__builtin_prefetch((const char *)V + (size_t)colind[c0 + i1] * (size_t)ldv * esize, 1);
			}
			float *gu = ada ? Gu + r * ldgu : NULL, *gv = ada ? Gv + c * ldgv : NULL;
			float e;
			if (s->half) {
				uint16_t *hu = (uint16_t *)U + r * ldu, *hv = (uint16_t *)V + c * ldv;
				starfa_half_load(hu, u, w);
				starfa_half_load(hv, v, w);
				e = update(u, v, s->k, val[p], s, gu, gv);
				starfa_half_store(u, hu, w);
				starfa_half_store(v, hv, w);
			} else {
				e = update((float *)U + r * ldu, (float *)V + c * ldv, s->k, val[p], s, gu, gv);
			}
			sse += (double)e * e;
		}
	}
	return sse;
}

double starfa_cpu_sgd(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *val, void *U,
		      int64_t ldu, void *V, int64_t ldv, float *Gu, int64_t ldgu, float *Gv, int64_t ldgv,
		      const struct starfa_sgd_pass *s)
{
	return sgd_tile(nrows, rowptr, colind, val, U, ldu, V, ldv, Gu, ldgu, Gv, ldgv, s);
}
