/* Top-k selection on the CPU: a min-heap of the k best, and blocks of scores that cannot enter passed over
 * without a branch a score. */
#include "cpu/topk.h"

#include <cblas.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

static inline int ranks_above(struct scored a, struct scored b)
{
	return starfa_ranks_above(a.score, a.item, b.score, b.item);
}

int starfa_cpu_scored_order(const void *a, const void *b)
{
	const struct scored *x = a, *y = b;
	return ranks_above(*x, *y) ? -1 : ranks_above(*y, *x) ? 1 : 0;
}

/* Min-heap on rank: heap[0] is the worst of the k kept. */
static void sift_down(struct scored *heap, int64_t n, int64_t i)
{
	for (;;) {
		int64_t worst = i, l = 2 * i + 1, r = l + 1;
		if (l < n && ranks_above(heap[worst], heap[l]))
			worst = l;
		if (r < n && ranks_above(heap[worst], heap[r]))
			worst = r;
		if (worst == i)
			return;
		struct scored t = heap[i];
		heap[i] = heap[worst];
		heap[worst] = t;
		i = worst;
	}
}

/* Items tested at once against the worst score kept. */
#define TOP_K_BLOCK 32

/* Whether any of the block's n scores is above thr: no branch a score (a NaN is above nothing). The full
 * blocks' loop has its own copy with a constant trip count, which the compiler vectorizes at -O2: one loop
 * over n made the ranking metrics about 40% slower (bench/PLACEMENT.md). */
static inline int block_reaches(const float *s, int64_t n, float thr)
{
	int hit = 0;
	if (n == TOP_K_BLOCK) {
		for (int j = 0; j < TOP_K_BLOCK; j++)
			hit |= s[j] > thr;
	} else {
		for (int64_t j = 0; j < n; j++)
			hit |= s[j] > thr;
	}
	return hit;
}

/* c into the min-heap of the n best (at most k): sifted up while it is not full, else in place of the
 * worst when it ranks above it. */
static inline void keep_if_better(struct scored *heap, int64_t *n, int64_t k, struct scored c)
{
	if (*n < k) {
		int64_t j = (*n)++;
		heap[j] = c;
		while (j > 0 && ranks_above(heap[(j - 1) / 2], heap[j])) {
			struct scored t = heap[j];
			heap[j] = heap[(j - 1) / 2];
			heap[(j - 1) / 2] = t;
			j = (j - 1) / 2;
		}
	} else if (ranks_above(c, heap[0])) {
		heap[0] = c;
		sift_down(heap, *n, 0);
	}
}

int64_t starfa_cpu_top_k(const float *scores, int64_t nitems, int64_t k, const int32_t *excluded, int64_t nex,
			 struct scored *heap)
{
	int64_t n = 0, e = 0;
	if (k < 1)
		return 0;
	for (int64_t i0 = 0; i0 < nitems; i0 += TOP_K_BLOCK) {
		const int64_t i1 = i0 + TOP_K_BLOCK < nitems ? i0 + TOP_K_BLOCK : nitems;
		/* Once k are kept, an item enters only by ranking above the worst of them, which takes a higher
		 * score: an equal one loses the tie, as the items come in index order. Most blocks of a long
		 * list have none and are passed over whole (the exclusions' cursor catches up at the next item
		 * looked at). */
		if (n == k && !block_reaches(scores + i0, i1 - i0, heap[0].score))
			continue;
		for (int64_t i = i0; i < i1; i++) {
			while (e < nex && excluded[e] < i)
				e++;
			if (e < nex && excluded[e] == i)
				continue;
			if (!isnan(scores[i]))
				keep_if_better(heap, &n, k, (struct scored){scores[i], (int32_t)i});
		}
	}
	/* Pop the worst to the back: best first. */
	for (int64_t m = n; m > 1; m--) {
		struct scored t = heap[0];
		heap[0] = heap[m - 1];
		heap[m - 1] = t;
		sift_down(heap, m - 1, 0);
	}
	return n;
}

int64_t starfa_cpu_score_block(int64_t ncols)
{
	const int64_t block = ((int64_t)1 << 20) / (ncols > 0 ? ncols : 1);
	return block < 1 ? 1 : block > STARFA_CPU_SCORE_ROWS ? STARFA_CPU_SCORE_ROWS : block;
}

void starfa_cpu_score_rows(const int64_t *rows, int64_t nb, const float *A, int64_t lda, int64_t rank,
			   const float *B, int64_t ldb, int64_t ncols, float *X, float *S)
{
	if (rank > 0 && ncols > 0) {
		for (int64_t b = 0; b < nb; b++)
			memcpy(X + b * rank, A + rows[b] * lda, (size_t)rank * sizeof *X);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nb, (int)ncols, (int)rank, 1.0f, X, (int)rank, B,
			    (int)ldb, 0.0f, S, (int)ncols);
	} else {
		memset(S, 0, (size_t)(nb * ncols) * sizeof *S);
	}
}

static void write_list(float *row, const struct scored *heap, int64_t got, int64_t k)
{
	for (int64_t i = 0; i < k; i++) {
		union {
			int32_t i;
			float f;
		} item = {i < got ? heap[i].item : -1};
		row[2 * i] = i < got ? heap[i].score : NAN;
		row[2 * i + 1] = item.f;
	}
}

int starfa_cpu_top_k_rows(int64_t nrows, int64_t ncols, int64_t rank, const float *A, int64_t lda, const float *B,
			  int64_t ldb, const uint32_t *rowptr, const uint32_t *colind, const float *active, int64_t k,
			  float *L, int64_t ldl)
{
	const int64_t block = starfa_cpu_score_block(ncols);
	struct scored *heap = malloc((size_t)(k > 0 ? k : 1) * sizeof *heap);
	float *S = malloc((size_t)(block * (ncols > 0 ? ncols : 1)) * sizeof *S);
	float *X = malloc((size_t)(block * (rank > 0 ? rank : 1)) * sizeof *X);
	int64_t rows[STARFA_CPU_SCORE_ROWS];
	if (!heap || !S || !X) {
		free(heap);
		free(S);
		free(X);
		return -1;
	}
	for (int64_t r0 = 0; r0 < nrows;) {
		int64_t nb = 0;
		for (; r0 < nrows && nb < block; r0++) {
			if (active && active[r0] == 0.0f) {
				write_list(L + r0 * ldl, NULL, 0, k);
				continue;
			}
			rows[nb++] = r0;
		}
		if (nb == 0)
			break;
		starfa_cpu_score_rows(rows, nb, A, lda, rank, B, ldb, ncols, X, S);
		for (int64_t b = 0; b < nb; b++) {
			const int64_t r = rows[b];
			float *s = S + b * ncols;
			/* The row's own columns (seen items) leave the ranking as NaN scores: no order needed. */
			if (rowptr)
				for (uint32_t p = rowptr[r]; p < rowptr[r + 1]; p++)
					s[colind[p]] = NAN;
			write_list(L + r * ldl, heap, starfa_cpu_top_k(s, ncols, k, NULL, 0, heap), k);
		}
	}
	free(heap);
	free(S);
	free(X);
	return 0;
}
