/* SGD matrix-factorization updates on one CSR tile, on the CPU: one worker per tile, entries in the
 * chunk-shuffled order of cpu/sgd.h, SIMD over k. */
#include "cpu/sgd.h"

#include "cpu/clones.h"
#include "cpu/half.h"

#include <stddef.h>

/* One update; gu and gv: the rows' AdaGrad accumulators (NULL without). */
STARFA_CPU_CLONES
static float update(float *restrict u, float *restrict v, int64_t k, float r, const struct starfa_sgd_pass *s,
		    float *gu, float *gv)
{
	float dot = u[k] + v[k + 1];
#pragma omp simd reduction(+ : dot)
	for (int64_t d = 0; d < k; d++)
		dot += u[d] * v[d];
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

double starfa_cpu_sgd(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *val, void *U,
		      int64_t ldu, void *V, int64_t ldv, float *Gu, int64_t ldgu, float *Gv, int64_t ldgv,
		      const struct starfa_sgd_pass *s)
{
	float u[STARFA_SGD_MAX_RANK + 2], v[STARFA_SGD_MAX_RANK + 2]; /* FP16 rows, widened */
	const int64_t w = s->k + 2;
	const int ada = s->adagrad && Gu && Gv;
	const uint32_t nnz = rowptr[nrows];
	double sse = 0.0;
	int64_t row = 0;
	for (uint32_t c0 = 0, chunk = 0; c0 < nnz; c0 += STARFA_SGD_CHUNK, chunk++) {
		const uint32_t n = nnz - c0 < STARFA_SGD_CHUNK ? nnz - c0 : STARFA_SGD_CHUNK;
		const uint32_t key = starfa_sgd_key(s->seed, s->epoch, s->tile, chunk);
		row = starfa_sgd_row_of(rowptr, nrows, row, c0);
		for (uint32_t q = 0; q < n; q++) {
			const uint32_t p = c0 + starfa_sgd_order(q, n, key);
			const int64_t r = starfa_sgd_row_of(rowptr, nrows, row, p);
			const int64_t c = colind[p];
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
