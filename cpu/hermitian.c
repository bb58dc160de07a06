/* Per-row Gram matrices A_u = sum w theta theta^T of one CSR tile, OpenMP on the CPU.
 * Each row's theta_v are gathered into a zero-padded panel and summed by a register-blocked kernel
 * (cpu/panel.h) into the upper triangle, then mirrored. That beat gathering plus cblas_ssyrk per row
 * on this kernel's typical rows (tens of vectors of rank 10 to 128): see bench/ALS.md. */
#include "cpu/hermitian.h"

#include "cpu/clones.h"
#include "cpu/half.h"
#include "cpu/panel.h"
#include "cpu/partition.h"

#include <stdlib.h>

/* Scratch of one thread: a panel (and its weighted copy) and the kp x kp sums. */
struct scratch {
	float *P, *Q, *C;
};

static void *alloc64(size_t bytes)
{
	return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

static int scratch_alloc(struct scratch *s, int64_t panel_rows, int64_t kp, int weighted)
{
	s->P = alloc64((size_t)(panel_rows * kp) * sizeof(float));
	s->Q = weighted ? alloc64((size_t)(panel_rows * kp) * sizeof(float)) : s->P;
	s->C = alloc64((size_t)(kp * kp) * sizeof(float));
	return s->P && s->Q && s->C ? 0 : -1;
}

static void scratch_free(struct scratch *s, int weighted)
{
	free(s->P);
	if (weighted)
		free(s->Q);
	free(s->C);
}

/* Rows of at most this many nonzeros get the whole of C computed: computing it costs less than
 * mirroring the upper triangle, whose strided reads dominate short rows. */
#define FULL_ROW_NNZ 24

/* Writes row u's sums (C, kp x kp, full or upper) into its k x k output, scaled and maybe accumulated. */
static inline __attribute__((always_inline)) void write_row(const float *restrict C, int64_t k, int64_t kp,
							    int full, float inv, int accumulate, int fp16, void *out)
{
	if (fp16) {
		uint16_t *o = out;
		float row[k];
		for (int64_t a = 0; a < k; a++) {
			if (accumulate)
				starfa_half_load(o + a * k, row, k);
			for (int64_t c = 0; c < k; c++)
				row[c] = (accumulate ? row[c] : 0.0f) +
					 (full || c >= a ? C[a * kp + c] : C[c * kp + a]) * inv;
			starfa_half_store(row, o + a * k, k);
		}
		return;
	}
	float *restrict o = out;
	for (int64_t a = 0; a < k; a++) {
		int64_t c = 0;
		if (!full) /* the lower part of row a is column a of the upper triangle */
			for (; c < a; c++)
				o[a * k + c] = (accumulate ? o[a * k + c] : 0.0f) + C[c * kp + a] * inv;
		if (accumulate)
			for (; c < k; c++)
				o[a * k + c] += C[a * kp + c] * inv;
		else
			for (; c < k; c++)
				o[a * k + c] = C[a * kp + c] * inv;
	}
}

STARFA_CPU_CLONES
static void hermitian_rows(int64_t r0, int64_t r1, const uint32_t *restrict rowptr, const uint32_t *restrict colind,
			   const float *restrict val, const float *restrict theta, int64_t ld, int64_t k, int weighted,
			   float alpha, const float *scale, int64_t scale_ld, int accumulate, int fp16, void *A,
			   struct scratch *s)
{
	const int64_t kp = starfa_panel_width(k);
	for (int64_t r = r0; r < r1; r++) {
		uint32_t p0 = rowptr[r], p1 = rowptr[r + 1];
		if (p0 == p1 && accumulate)
			continue;
		const int full = p1 - p0 <= FULL_ROW_NNZ;
		if (p0 == p1)
			memset(s->C, 0, (size_t)(kp * kp) * sizeof(float));
		for (uint32_t start = p0; start < p1; start += STARFA_PANEL_CHUNK) {
			int64_t m = p1 - start < STARFA_PANEL_CHUNK ? p1 - start : STARFA_PANEL_CHUNK;
			for (int64_t i = 0; i < m; i++) {
				float *row = s->P + i * kp;
				starfa_panel_gather(row, theta + (int64_t)colind[start + i] * ld, k, kp);
				if (weighted) {
					float w = alpha * val[start + i];
					for (int64_t d = 0; d < kp; d++)
						s->Q[i * kp + d] = w * row[d];
				}
			}
			starfa_panel_sum(m, kp, s->P, s->Q, s->C, start == p0, !full);
		}
		const float inv = scale ? 1.0f / scale[r * scale_ld] : 1.0f;
		void *out = fp16 ? (void *)((uint16_t *)A + r * k * k) : (void *)((float *)A + r * k * k);
		if (inv == 1.0f && !accumulate && !fp16 && full)
			for (int64_t a = 0; a < k; a++)
				memcpy((float *)out + a * k, s->C + a * kp, (size_t)k * sizeof(float));
		else
			write_row(s->C, k, kp, full, inv, accumulate, fp16, out);
	}
}

/* The most nonzeros of a row in [r0, r1), capped at one panel chunk. */
static int64_t panel_rows(const uint32_t *rowptr, int64_t r0, int64_t r1)
{
	int64_t most = 1;
	for (int64_t r = r0; r < r1; r++)
		if ((int64_t)(rowptr[r + 1] - rowptr[r]) > most)
			most = rowptr[r + 1] - rowptr[r];
	return most < STARFA_PANEL_CHUNK ? most : STARFA_PANEL_CHUNK;
}

int starfa_cpu_hermitian(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *val,
			 const float *theta, int64_t ld, int64_t k, int weighted, float alpha, const float *scale,
			 int64_t scale_ld, int accumulate, int fp16, void *A, int nthreads)
{
	const int64_t kp = starfa_panel_width(k);
	int failed = 0;
	if (nthreads <= 1) {
		struct scratch s;
		if (scratch_alloc(&s, panel_rows(rowptr, 0, nrows), kp, weighted) == 0)
			hermitian_rows(0, nrows, rowptr, colind, val, theta, ld, k, weighted, alpha, scale, scale_ld,
				       accumulate, fp16, A, &s);
		else
			failed = 1;
		scratch_free(&s, weighted);
		return failed ? -1 : 0;
	}
#pragma omp parallel num_threads(nthreads) reduction(| : failed)
	{
		int64_t r0, r1;
		starfa_cpu_nnz_partition(nrows, rowptr, omp_get_thread_num(), omp_get_num_threads(), &r0, &r1);
		struct scratch s;
		if (scratch_alloc(&s, panel_rows(rowptr, r0, r1), kp, weighted) == 0)
			hermitian_rows(r0, r1, rowptr, colind, val, theta, ld, k, weighted, alpha, scale, scale_ld,
				       accumulate, fp16, A, &s);
		else
			failed = 1;
		scratch_free(&s, weighted);
	}
	return failed ? -1 : 0;
}
