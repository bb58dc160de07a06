/* SGD matrix-factorization updates on one CSR tile on CUDA (no StarPU here): the updates and visiting
 * order of cpu/sgd.h, on device pointers, enqueued on a stream. */
#ifndef STARFA_GPU_SGD_H
#define STARFA_GPU_SGD_H

#include "cpu/sgd.h"

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One pass over the tile's entries: a group of lanes per update (starfa_cuda_sgd_lanes: 8, 16 or 32),
 * the tile's chunks dealt to `updaters` groups that run at once (0: enough to fill the device; 1: the
 * chunks one after the other, in the CPU kernel's order), so that concurrent groups update rows of
 * different chunks without locks (Hogwild within the tile, as cuMF_SGD). U and V: floats, or FP16 words
 * with pass->half (leading dimensions in elements); 16-byte loads when the rows are 16-byte aligned and
 * the rank and leading dimensions multiples of 4 floats or 8 halves. Gu and Gv: the AdaGrad accumulators
 * (used when pass->adagrad). *sse (one double in device memory, zeroed here) gets the sum of squared
 * errors met before each update. */
cudaError_t starfa_cuda_sgd(int64_t nrows, int64_t nnz, const uint32_t *rowptr, const uint32_t *colind,
			    const float *val, void *U, int64_t ldu, void *V, int64_t ldv, float *Gu, int64_t ldgu,
			    float *Gv, int64_t ldgv, const struct starfa_sgd_pass *pass, int updaters, double *sse,
			    cudaStream_t stream);
/* One pass over tiles of any row and column bands, each with its own user rows and accumulators (tile.U,
 * tile.Gu), as one wide tile: the updaters are dealt to the tiles in proportion to their chunks and run at
 * once (updaters as above, over the tiles' chunks together; fewer updaters than non-empty tiles run the
 * tiles one after the other, in order), so that concurrent updates spread over every tile's item rows and
 * tiles sharing a band update its rows without locks (Hogwild). Each tile's chunks are visited in the order
 * its id keys. Up to STARFA_SGD_SPAN_MAX tiles a launch (up to 224 where there are more, in CUDA 12.1's
 * larger kernel arguments), the launches one after the other. *sse: the sum over every tile. */
cudaError_t starfa_cuda_sgd_tiles(int ntiles, const struct starfa_sgd_tile *tiles, const struct starfa_sgd_pass *pass,
				  int updaters, double *sse, cudaStream_t stream);
/* The lanes an update takes: one 16-byte load each (vec) or one element each, rounded up to 8, 16, 32. */
int starfa_cuda_sgd_lanes(int64_t k, int half, int vec);

#ifdef __cplusplus
}
#endif
#endif
