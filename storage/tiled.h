/* The insides of tiled matrices and their companions, shared by storage/ and codelets/. */
#ifndef STARFA_STORAGE_TILED_H
#define STARFA_STORAGE_TILED_H

#include "runtime/internal.h"

#include <starpu.h>

/* One CSR tile with local row and column indices; handle is NULL for an empty tile. */
struct starfa_tile {
	int64_t nrows, ncols, nnz;
	uint32_t *rowptr; /* nrows + 1 */
	uint32_t *colind; /* nnz */
	float *val;       /* nnz */
	starpu_data_handle_t handle;
	uint64_t serial; /* this tile's pattern among all tiles of the process (0: no handle); never reused */
	/* Transposed-grid tiles only: entry q of this tile is entry map[q] of the forward tile holding the
	 * same entries (nnz uint32), as a vector handle for the transpose-values tasks. */
	uint32_t *map;
	starpu_data_handle_t map_handle;
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
	/* Placement (starfa_tiling_options.placed): the STARPU_CPU / STARPU_CUDA mask of each row band
	 * and each column band, and of the tasks that belong to no band (0: any worker). */
	uint32_t *row_where, *col_where;
	uint32_t where;
};

struct starfa_dense {
	float *data;
	int64_t rows, cols;
	int64_t nblocks;
	int64_t *bounds; /* nblocks + 1 row boundaries */
	starpu_data_handle_t *blocks;
	int pinned;
	uint32_t *where; /* per block, the placement of the band it is aligned with; NULL: any worker */
};

struct starfa_sparse_values {
	const struct starfa_tiled *pattern;
	starfa_side side;
	const struct starfa_grid *grid; /* pattern's grid of that side */
	starpu_data_handle_t *handles;  /* per tile of the grid, NULL for empty tiles */
	float *over;                    /* the caller's array the tiles are runs of, or NULL: no home copy */
};

struct starfa_vector {
	int64_t n;
	float *data;
	starpu_data_handle_t handle;
};

struct starfa_sums {
	int64_t n;
	double *slots;
	starpu_data_handle_t *handles; /* one variable (a double) per slot */
};

static inline struct starfa_tile *starfa_grid_tile(const struct starfa_grid *g, int64_t i, int64_t j)
{
	return &g->tiles[i * g->nc + j];
}

/* The grid whose row bands are this side's bands: S's own for rows, the transposed one for columns. */
static inline const struct starfa_grid *starfa_side_grid(const struct starfa_tiled *S, starfa_side side)
{
	return side == STARFA_ROWS ? &S->grid : &S->transposed;
}

/* The worker mask (STARPU_CPU, STARPU_CUDA; 0 any) of band `band` of a side, or of the matrix's tasks
 * outside any band (band < 0). */
static inline uint32_t starfa_band_where(const struct starfa_tiled *S, starfa_side side, int64_t band)
{
	const uint32_t *w = side == STARFA_ROWS ? S->row_where : S->col_where;
	return band >= 0 && w ? w[band] : S->where;
}

/* The boundaries of a side's rows (S's row bounds for STARFA_ROWS, its column bounds for COLS). */
static inline const int64_t *starfa_side_bounds(const struct starfa_tiled *S, starfa_side side)
{
	return side == STARFA_ROWS ? S->row_bounds : S->col_bounds;
}

/* Whether a dense matrix is blocked exactly along these boundaries. */
int starfa_dense_blocked_along(const struct starfa_dense *d, const int64_t *bounds, int64_t nblocks);

/* Starts copying a handle to GPU `gpu` (modulo the GPU count; -1: every GPU) while memory is free
 * there (storage/tiled.c says why). */
void starfa_prefetch_to_gpus(starpu_data_handle_t handle, int64_t gpu);

/* Memory that StarPU can move to GPUs fast (pinned when CUDA workers exist). */
void *starfa_host_alloc(size_t bytes);
void starfa_host_free(void *p, size_t bytes);

#endif
