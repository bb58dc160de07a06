/* The fused build-and-solve of a band's rows on CUDA (no StarPU here). The contract is
 * starfa_cpu_rowsolve's, on device pointers, enqueued on a stream. */
#ifndef STARFA_GPU_ROWSOLVE_H
#define STARFA_GPU_ROWSOLVE_H

#include "gpu/als_common.h"

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Rows of a band with more entries than this are cut into segments of this many, each built by its
 * own block; the last block of a row to finish sums the segments in order and solves. */
#define STARFA_CUDA_ROWSOLVE_SEGMENT 8192

/* The fused kernel's work list for one band, built on the host from the tiles' row pointers once per
 * band (it depends on the pattern only) and kept on the device with the tiles: one item per row, or
 * one per segment of a long row, longest rows first so that the last blocks to run are short. */
enum { STARFA_ROWSOLVE_ITEM_WORDS = 6 }; /* row, begin, end, first part, parts, long-row index */

typedef struct starfa_cuda_rowsolve {
	int64_t nrows, k;
	int ntiles;
	starfa_cuda_rowsolve_tile tiles[STARFA_CUDA_ROWSOLVE_MAX_TILES];
	int implicit;
	float alpha, mu;
	const float *lambda;
	int64_t info_ld;
	const float *G;
	int cholesky, cg_steps;
	/* Rows of fewer entries than this (for Cholesky, also than k), and that fit shared memory, are solved
	 * from their gathered theta rows by a kernel of their own (gpu/rowsolve.cu): Cholesky in their n x n
	 * form (explicit feedback without G only), CG matrix-free (with G and weights too). They are found in
	 * the work list through its host copy items_host. 0 or no items_host: none. */
	int short_rows; /* starfa_cuda_rowsolve_short_rows gives the measured choice */
	const uint32_t *items_host;
	float *X;
	int64_t ldx;
	const uint32_t *items; /* nitems x STARFA_ROWSOLVE_ITEM_WORDS */
	int64_t nitems, nparts;
	starfa_cuda_gram_precision precision;
	/* Cholesky: 0 (the default) solves the Gram kernel's systems apart, a warp a system, from a scratch of
	 * up to 512 MB a call; 1 in the Gram kernel's blocks, one block a system (what happens anyway when the
	 * scratch cannot be had). Both give the same bits. */
	int fused_cholesky;
} starfa_cuda_rowsolve;

/* The short_rows setting the codelet uses at rank k: on the Netflix shape at k = 101 (one H100,
 * bench/ALS.md), Cholesky's n x n form paid up to about 0.8 k entries (beyond, forming Y Y^T in FFMA cost
 * more than the Gram kernel's tensor cores save) and CG's matrix-free steps up to 1.5 k. */
int starfa_cuda_rowsolve_short_rows(int64_t k, int cholesky);

/* starfa_cpu_rowsolve. Allocates (stream-ordered) and frees the segments' partial sums. */
cudaError_t starfa_cuda_rowsolve_run(const starfa_cuda_rowsolve *pb, uint32_t *status, cudaStream_t stream);

/* Builds the work list of nrows rows over ntiles tiles (host row pointers) with segments of seg
 * entries (STARFA_CUDA_ROWSOLVE_SEGMENT; smaller in tests): *items is malloc'd, *nitems items of
 * STARFA_ROWSOLVE_ITEM_WORDS words; *nparts segments of long rows. Returns 0, or -1 out of memory (or a
 * list past 2^32 words). Host code (codelets/rowsolve.c). */
int starfa_rowsolve_plan(int64_t nrows, int ntiles, const uint32_t *const *rowptrs, int64_t seg, uint32_t **items,
			 int64_t *nitems, int64_t *nparts);

#ifdef __cplusplus
}
#endif
#endif
