/* SGD matrix-factorization updates on one CSR tile (no StarPU here), shared by the CPU kernel and, for
 * its visiting order, the CUDA kernel.
 *
 * Factor rows are augmented as ALS's: a user row holds [p_u (k), b_u, 1], an item row [q_i (k), 1, c_i],
 * so their dot product is the prediction less the global mean. For entry (u, i, r), with
 * e = r - mu - (p_u·q_i + b_u + c_i):
 *   b_u += lr (e - lambda_b b_u)     c_i += lr (e - lambda_b c_i)          (when biases)
 *   p_u += lr (e q_i - lambda p_u)   q_i += lr (e p_u - lambda q_i)        (both from the old values)
 * With AdaGrad (Duchi et al.; per row, as LIBMF: Chin et al., PAKDD 2015) each row has an accumulator G
 * (starting at 1) to which the update adds the mean square of its factor gradient, and its rate is
 * lr / sqrt(G) after that.
 * Entries are visited in chunks of STARFA_SGD_CHUNK consecutive entries (CSR order), the chunks in order
 * and the entries of each chunk in the order of starfa_sgd_order: partial randomization that keeps a
 * chunk's rows in cache. */
#ifndef STARFA_CPU_SGD_H
#define STARFA_CPU_SGD_H

#include "cpu/special.h" /* STARFA_HD */

#include <stdint.h>

#define STARFA_SGD_CHUNK 256
#define STARFA_SGD_MAX_RANK 1024

/* The q-th entry visited within a chunk of n <= STARFA_SGD_CHUNK entries: a bijection of [0, n) drawn
 * from `key` (an odd multiplier and an offset modulo the next power of two, skipping values past n). */
STARFA_HD uint32_t starfa_sgd_order(uint32_t q, uint32_t n, uint32_t key)
{
	uint32_t m = 1;
	while (m < n)
		m <<= 1;
	uint32_t a = (key | 1u) & (m - 1u), b = (key >> 16) & (m - 1u);
	if (a == 0)
		a = 1;
	/* walk the cycle of x -> a x + b mod m from q's position until it lands inside [0, n) */
	uint32_t x = (a * q + b) & (m - 1u);
	while (x >= n)
		x = (a * x + b) & (m - 1u);
	return x;
}

/* The key of a tile's chunk in an epoch: a hash of (seed, epoch, tile, chunk). */
STARFA_HD uint32_t starfa_sgd_key(uint64_t seed, uint64_t epoch, uint64_t tile, uint64_t chunk)
{
	uint64_t z = seed * 0x9e3779b97f4a7c15ull ^ (epoch + 1) * 0xbf58476d1ce4e5b9ull ^ (tile + 1) * 0x94d049bb133111ebull ^
		     (chunk + 1) * 0x2545f4914f6cdd1dull;
	z ^= z >> 31;
	z *= 0xbf58476d1ce4e5b9ull;
	z ^= z >> 29;
	return (uint32_t)(z >> 32);
}

/* The row holding entry p of a CSR tile: the last row r >= from with rowptr[r] <= p (from: the row of an
 * earlier entry, or 0). */
STARFA_HD int64_t starfa_sgd_row_of(const uint32_t *rowptr, int64_t nrows, int64_t from, uint32_t p)
{
	int64_t lo = from, hi = nrows - 1;
	while (lo < hi) {
		int64_t mid = (lo + hi + 1) / 2;
#ifdef __CUDA_ARCH__
		const uint32_t start = __ldg(rowptr + mid); /* through the read-only cache on a GPU */
#else
		const uint32_t start = rowptr[mid];
#endif
		if (start <= p)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/* The parameters of one tile's pass. */
struct starfa_sgd_pass {
	int64_t k;             /* latent factors (the rows are k + 2 wide, leading dimensions ldu, ldv) */
	float lr, lambda, lambda_bias, mu;
	int biases;            /* 0: b_u and c_i stay as they are (zero) */
	int adagrad;           /* per-row rates from the accumulators Gu, Gv */
	uint64_t seed, epoch, tile;
	int half;              /* the factor rows are FP16 (cpu/half.h), read into FP32 for each update */
};

/* One tile of a pass: its entries (CSR, rows local to the tile's row band, columns local to its column
 * band), its item rows V (and AdaGrad accumulators Gv, leading dimension ldgv; else NULL), its key in the
 * visiting order (id: pass->tile for a tile alone) and its user rows U and their accumulators Gu (leading
 * dimensions ldu, ldgu). */
struct starfa_sgd_tile {
	int64_t nrows;
	uint32_t nnz;
	const uint32_t *rowptr, *colind;
	const float *val;
	void *V;
	int64_t ldv;
	float *Gv;
	int64_t ldgv;
	uint64_t id;
	void *U;
	int64_t ldu;
	float *Gu;
	int64_t ldgu;
};

/* The most tiles one CUDA launch of a span takes (its arguments hold their descriptions, in the 4 KB
 * every device takes). A task of more tiles (a block, starfa_task_sgd_block) runs them 224 a launch in
 * CUDA's larger arguments (gpu/sgd.cu); more run in launches one after the other. */
#define STARFA_SGD_SPAN_MAX 32

/* One pass over the tile's entries. U: the tile's user rows (nrows), V: its item rows, floats or, with
 * pass->half, FP16 words (leading dimensions in elements); with adagrad, Gu and Gv their accumulators
 * (one float per row, leading dimensions ldgu, ldgv; else NULL). Returns the sum of squared errors met
 * before each update (a running estimate of the training loss). */
double starfa_cpu_sgd(int64_t nrows, const uint32_t *rowptr, const uint32_t *colind, const float *val, void *U,
		      int64_t ldu, void *V, int64_t ldv, float *Gu, int64_t ldgu, float *Gv, int64_t ldgv,
		      const struct starfa_sgd_pass *pass);

#endif
