/* The insides of tiled matrices and their companions, shared by runtime/ and codelets/. */
#ifndef STARFA_RUNTIME_TILED_H
#define STARFA_RUNTIME_TILED_H

#include "runtime/internal.h"

#include <starpu.h>

/* One CSR tile with local row and column indices; handle is NULL for an empty tile. */
struct starfa_tile {
	int64_t nrows, ncols, nnz;
	uint32_t *rowptr; /* nrows + 1 */
	uint32_t *colind; /* nnz */
	float *val;       /* nnz */
	starpu_data_handle_t handle;
};

/* A grid of tiles: nr x nc, row-major. */
struct starfa_grid {
	int64_t nr, nc;
	struct starfa_tile *tiles;
};

struct starfa_tiled {
	int64_t nrows, ncols, nnz;
	int64_t *row_bounds, *col_bounds; /* row_tiles + 1, col_tiles + 1 */
	struct starfa_grid grid;          /* row_tiles x col_tiles */
	struct starfa_grid transposed;    /* col_tiles x row_tiles, or empty */
};

struct starfa_dense {
	float *data;
	int64_t rows, cols;
	int64_t nblocks;
	int64_t *bounds; /* nblocks + 1 row boundaries */
	starpu_data_handle_t *blocks;
	int pinned;
};

struct starfa_sparse_values {
	const struct starfa_tiled *pattern;
	starpu_data_handle_t *handles; /* per tile of pattern's grid, NULL for empty tiles */
	float **values;
};

static inline struct starfa_tile *starfa_grid_tile(const struct starfa_grid *g, int64_t i, int64_t j)
{
	return &g->tiles[i * g->nc + j];
}

/* Memory that StarPU can move to GPUs fast (pinned when CUDA workers exist). */
void *starfa_host_alloc(size_t bytes);
void starfa_host_free(void *p, size_t bytes);

#endif
