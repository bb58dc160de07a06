/* Tiled sparse matrices as StarPU handles: the forward grid and the transposed one with its map. */
#include "storage/tiled.h"
#include "storage/coo.h"

#include <string.h>

/* Enough tiles to feed every worker that matters a few times over, but none smaller than
 * MIN (StarPU's per-task cost, tens of microseconds, stays small beside the work) and none
 * larger than MAX: `starfa calibrate` covers tiles up to that size by default, and StarPU
 * forces calibration runs, on every worker type, for sizes outside its models' range. */
#define MIN_AUTO_TILE_NNZ (1 << 14)
#define MAX_AUTO_TILE_NNZ (1 << 22)
#define TILES_PER_WORKER 4

/* Tile serials: one per registered tile, never handed out twice in the process. */
static uint64_t last_serial;

static uint64_t next_serial(void)
{
	return __atomic_add_fetch(&last_serial, 1, __ATOMIC_RELAXED);
}

void *starfa_host_alloc(size_t bytes)
{
	void *p = NULL;
	if (bytes == 0)
		return NULL;
	if (starpu_malloc(&p, bytes) != 0 || !p) {
		starfa_set_error(STARFA_ENOMEM, "out of memory allocating %zu bytes", bytes);
		return NULL;
	}
	return p;
}

void starfa_host_free(void *p, size_t bytes)
{
	if (p)
		starpu_free_flags(p, bytes, STARPU_MALLOC_PINNED);
}

/* The tiles' arrays are not pinned: a tile goes to a GPU once and stays there, and pinning costs more
 * than the unpinned copy saves (on the Netflix shape's 1.8 GB of tiles, a training call took 0.7-0.9 s
 * longer with them pinned, its epochs the same: bench/PLACEMENT.md). 64-byte aligned for the kernels. */
static void *tile_alloc(size_t bytes)
{
	void *p = NULL;
	if (bytes == 0)
		return NULL;
	if (posix_memalign(&p, 64, bytes) != 0) {
		starfa_set_error(STARFA_ENOMEM, "out of memory allocating %zu bytes", bytes);
		return NULL;
	}
	return p;
}

/* Starts copying a handle to GPU `gpu` (modulo the GPU count; -1: every GPU) while
 * memory is free there, so that the schedulers' first decisions already find the tiles
 * and factor blocks where the GPUs' share of the work will run: otherwise the transfer
 * cost of the first use tips dmda towards the cores, whose copies then stay the cheapest. */
void starfa_prefetch_to_gpus(starpu_data_handle_t handle, int64_t gpu)
{
	int ids[STARPU_NMAXWORKERS];
	unsigned n = starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, ids, STARPU_NMAXWORKERS);
	if (n == 0 || !handle)
		return;
	for (unsigned g = 0; g < n; g++)
		if (gpu < 0 || (int64_t)g == gpu % (int64_t)n)
			starpu_data_idle_prefetch_on_node(handle, starpu_worker_get_memory_node(ids[g]), 1);
}

/* Each row's weight for the band cut: its nonzeros plus row_cost, in 1/16ths of a nonzero, in place. */
static void add_row_cost(int64_t *counts, int64_t n, double row_cost)
{
	int64_t extra = (int64_t)(row_cost * 16.0 + 0.5);
	for (int64_t i = 0; i < n; i++)
		counts[i] = counts[i] * 16 + extra;
}

/* Cuts [0, n) into `parts` consecutive ranges of about equal total count, each at
 * least one element wide (parts <= n); with `placed` the last cpu_parts ranges share cpu_share of the
 * total and the others the rest. */
static void balanced_bounds(const int64_t *counts, int64_t n, int64_t parts, int64_t cpu_parts, double cpu_share,
			    int64_t *bounds)
{
	int64_t total = 0;
	for (int64_t i = 0; i < n; i++)
		total += counts[i];
	bounds[0] = 0;
	int64_t prefix = 0, pos = 0;
	for (int64_t k = 1; k < parts; k++) {
		/* The k-th cut goes where the running count first reaches k/parts of the total,
		 * leaving at least one element for each remaining part. */
		int64_t target = total > 0 ? (int64_t)((__int128)total * k / parts) : 0;
		if (cpu_parts > 0 && cpu_parts < parts && total > 0) {
			int64_t gpu_parts = parts - cpu_parts;
			double f = k <= gpu_parts ? (1.0 - cpu_share) * (double)k / (double)gpu_parts
						  : 1.0 - cpu_share + cpu_share * (double)(k - gpu_parts) / (double)cpu_parts;
			target = (int64_t)((double)total * f);
		}
		int64_t lowest = bounds[k - 1] + 1, highest = n - (parts - k);
		while (pos < lowest)
			prefix += counts[pos++];
		if (total > 0) {
			while (pos < highest && prefix + counts[pos] <= target)
				prefix += counts[pos++];
			/* Step over the cut when that lands closer to the target. */
			if (pos < highest && target - prefix > prefix + counts[pos] - target)
				prefix += counts[pos++];
		} else {
			while (pos < highest && pos < n * k / parts)
				prefix += counts[pos++];
		}
		bounds[k] = pos;
	}
	bounds[parts] = n;
}

static int64_t clamp_tiles(int64_t want, int64_t n)
{
	if (want < 1)
		want = 1;
	return n > 0 && want > n ? n : want;
}

/* Automatic grid. With GPUs, one tile a GPU, placed there (see starfa_tiled_create): each task then
 * carries as much work as it can, so StarPU's per-task cost (submission, scheduling, a launch and its
 * completion: tens of microseconds) is paid once a GPU per sweep; on the Netflix shape 48 tiles cost
 * +60% over the kernel at K = 32 where one tile costs +4% (bench/RESULTS.md). A core runs these kernels
 * tens of times slower than a GPU, so tiles cut for the cores would only add per-task cost to the
 * GPUs' share. Without GPUs: about TILES_PER_WORKER tiles a core, none under MIN_AUTO_TILE_NNZ and
 * none over MAX_AUTO_TILE_NNZ (the largest size `starfa calibrate` covers: StarPU forces calibration
 * runs for sizes outside a model's range). */
static void auto_grid(const starfa_csr *csr, int on_gpus, int64_t *row_tiles, int64_t *col_tiles)
{
	int64_t cuda = starpu_cuda_worker_get_count(), cpus = starpu_cpu_worker_get_count();
	int64_t want = on_gpus ? cuda : TILES_PER_WORKER * (cpus > 0 ? cpus : 1);
	int64_t by_size = csr->nnz / MIN_AUTO_TILE_NNZ;
	if (want > by_size)
		want = by_size;
	if (!on_gpus) {
		/* Twice the bare minimum: the grid balances its row and column bands, not each tile. */
		int64_t at_least = (2 * csr->nnz + MAX_AUTO_TILE_NNZ - 1) / MAX_AUTO_TILE_NNZ;
		if (want < at_least)
			want = at_least;
	}
	if (want < 1)
		want = 1;
	int64_t r = 1;
	while ((r + 1) * (r + 1) <= want)
		r++;
	*row_tiles = r;
	*col_tiles = (want + r - 1) / r;
}

static void free_grid(struct starfa_grid *g)
{
	if (!g->tiles)
		return;
	for (int64_t k = 0; k < g->nr * g->nc; k++) {
		struct starfa_tile *t = &g->tiles[k];
		if (t->handle)
			starpu_data_unregister(t->handle);
		if (t->map_handle)
			starpu_data_unregister(t->map_handle);
		free(t->map);
		free(t->rowptr);
		free(t->colind);
		free(t->val);
	}
	free(g->tiles);
	g->tiles = NULL;
}

/* One row band's tiles filled in chunks of its rows, each on any thread (starfa_host_parallel): each
 * chunk counts its entries in every column band, the chunks' runs in a tile follow each other in chunk
 * (row) order, and each chunk copies its own rows. */
struct band_fill {
	const starfa_csr *csr;
	struct starfa_grid *g;
	const int32_t *col_band;
	const int64_t *col_bounds;
	int64_t band, r0, nchunks;
	const int64_t *chunk_rows; /* nchunks + 1 row boundaries */
	uint32_t *start;           /* nchunks x nc: a chunk's entries in tile j, then where they start there */
};

static void band_count(void *ctx, int64_t chunk, int64_t begin, int64_t end)
{
	(void)begin, (void)end;
	const struct band_fill *b = ctx;
	uint32_t *count = b->start + chunk * b->g->nc;
	for (int64_t p = b->csr->rowptr[b->chunk_rows[chunk]]; p < b->csr->rowptr[b->chunk_rows[chunk + 1]]; p++)
		count[b->col_band[b->csr->colind[p]]]++;
}

static void band_copy(void *ctx, int64_t chunk, int64_t begin, int64_t end)
{
	(void)begin, (void)end;
	const struct band_fill *b = ctx;
	const starfa_csr *csr = b->csr;
	const int64_t nc = b->g->nc;
	uint32_t *fill = b->start + chunk * nc;
	for (int64_t r = b->chunk_rows[chunk]; r < b->chunk_rows[chunk + 1]; r++) {
		for (int64_t p = csr->rowptr[r]; p < csr->rowptr[r + 1]; p++) {
			int32_t c = csr->colind[p], j = b->col_band[c];
			struct starfa_tile *t = starfa_grid_tile(b->g, b->band, j);
			t->colind[fill[j]] = (uint32_t)(c - b->col_bounds[j]);
			t->val[fill[j]] = csr->val[p];
			fill[j]++;
		}
		for (int64_t j = 0; j < nc; j++)
			starfa_grid_tile(b->g, b->band, j)->rowptr[r - b->r0 + 1] = fill[j];
	}
}

#define FILL_CHUNK_MIN (1 << 16)
#define FILL_CHUNKS_MAX 64

/* Fills the tiles of row band i (their sizes counted, their arrays allocated). */
static int fill_band(const starfa_csr *csr, struct starfa_grid *g, int64_t i, int64_t r0, int64_t r1,
		     const int32_t *col_band, const int64_t *col_bounds)
{
	int64_t nnz = csr->rowptr[r1] - csr->rowptr[r0], nchunks = nnz / FILL_CHUNK_MIN;
	if (nchunks > FILL_CHUNKS_MAX)
		nchunks = FILL_CHUNKS_MAX;
	if (nchunks > r1 - r0)
		nchunks = r1 - r0;
	if (nchunks < 1)
		nchunks = 1;
	int64_t *chunk_rows = starfa_malloc((size_t)nchunks + 1, sizeof *chunk_rows);
	uint32_t *start = starfa_calloc((size_t)(nchunks * g->nc), sizeof *start);
	int rc = chunk_rows && start ? 0 : STARFA_ENOMEM;
	if (!rc) {
		/* Row boundaries at about equal entries (a chunk may be empty). */
		int64_t r = r0;
		for (int64_t c = 0; c <= nchunks; c++) {
			int64_t target = csr->rowptr[r0] + (int64_t)((__int128)nnz * c / nchunks);
			while (r < r1 && csr->rowptr[r] < target)
				r++;
			chunk_rows[c] = c == nchunks ? r1 : r;
		}
		struct band_fill b = {csr, g, col_band, col_bounds, i, r0, nchunks, chunk_rows, start};
		rc = starfa_host_parallel(nchunks, nchunks, band_count, &b);
		for (int64_t j = 0; !rc && j < g->nc; j++) {
			uint32_t at = 0;
			for (int64_t c = 0; c < nchunks; c++) {
				uint32_t count = start[c * g->nc + j];
				start[c * g->nc + j] = at;
				at += count;
			}
		}
		/* A chunk that starts at row r writes rowptr[r - r0 + 1] onwards; rowptr[0] is 0. */
		if (!rc)
			rc = starfa_host_parallel(nchunks, nchunks, band_copy, &b);
	}
	free(chunk_rows);
	free(start);
	return rc;
}

/* Splits csr along row_bounds x col_bounds into g and registers every non-empty tile. */
static int build_grid(const starfa_csr *csr, const int64_t *row_bounds, int64_t nr, const int64_t *col_bounds,
		      int64_t nc, struct starfa_grid *g)
{
	g->nr = nr;
	g->nc = nc;
	g->tiles = starfa_calloc((size_t)(nr * nc), sizeof *g->tiles);
	int32_t *col_band = starfa_malloc((size_t)csr->ncols, sizeof *col_band);
	int rc = 0;
	if (!g->tiles || !col_band) {
		rc = STARFA_ENOMEM;
		goto out;
	}
	for (int64_t j = 0; j < nc; j++)
		for (int64_t c = col_bounds[j]; c < col_bounds[j + 1]; c++)
			col_band[c] = (int32_t)j;

	for (int64_t i = 0; i < nr && rc == 0; i++) {
		int64_t r0 = row_bounds[i], r1 = row_bounds[i + 1];
		for (int64_t j = 0; j < nc; j++) {
			struct starfa_tile *t = starfa_grid_tile(g, i, j);
			t->nrows = r1 - r0;
			t->ncols = col_bounds[j + 1] - col_bounds[j];
		}
		for (int64_t p = csr->rowptr[r0]; p < csr->rowptr[r1]; p++)
			starfa_grid_tile(g, i, col_band[csr->colind[p]])->nnz++;
		for (int64_t j = 0; j < nc && rc == 0; j++) {
			struct starfa_tile *t = starfa_grid_tile(g, i, j);
			if (t->nnz > (int64_t)UINT32_MAX || t->nrows >= (int64_t)UINT32_MAX) {
				rc = starfa_set_error(STARFA_EINVAL,
						      "tile (%lld, %lld) would hold %lld nonzeros in %lld rows, more "
						      "than a tile can (2^32-1): ask for more tiles",
						      (long long)i, (long long)j, (long long)t->nnz,
						      (long long)t->nrows);
				break;
			}
			t->rowptr = tile_alloc((size_t)(t->nrows + 1) * sizeof *t->rowptr);
			if (t->nnz > 0) {
				t->colind = tile_alloc((size_t)t->nnz * sizeof *t->colind);
				t->val = tile_alloc((size_t)t->nnz * sizeof *t->val);
			}
			if (!t->rowptr || (t->nnz > 0 && (!t->colind || !t->val)))
				rc = STARFA_ENOMEM;
			else
				t->rowptr[0] = 0;
		}
		if (rc || (rc = fill_band(csr, g, i, r0, r1, col_band, col_bounds)) != 0)
			break;
		for (int64_t j = 0; j < nc; j++) {
			struct starfa_tile *t = starfa_grid_tile(g, i, j);
			if (t->nnz > 0) {
				starpu_csr_data_register(&t->handle, STARPU_MAIN_RAM, (uint32_t)t->nnz,
							 (uint32_t)t->nrows, (uintptr_t)t->val, t->colind,
							 t->rowptr, 0, sizeof(float));
				t->serial = next_serial();
				starfa_prefetch_to_gpus(t->handle, i * nc + j); /* tiles spread over the GPUs */
			}
		}
	}
out:
	free(col_band);
	if (rc)
		free_grid(g);
	return rc;
}

/* A tile's transpose, a counting sort of its entries by column (counting_sort, storage/coo.h): a column's
 * entries come out in row order. */
struct tile_transpose {
	const struct starfa_tile *f;
	struct starfa_tile *tt;
	int64_t *next; /* counting_sort's table: chunks x columns of f */
};

/* The row of f that holds entry p (rowptr's last entry at or below p whose row is not empty). */
static int64_t row_of_entry(const struct starfa_tile *f, int64_t p)
{
	int64_t lo = 0, hi = f->nrows; /* rowptr[lo] <= p < rowptr[hi] */
	while (hi - lo > 1) {
		int64_t mid = lo + (hi - lo) / 2;
		if (f->rowptr[mid] <= p)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static void transpose_count(void *ctx, int64_t chunk, int64_t begin, int64_t end)
{
	const struct tile_transpose *x = ctx;
	int64_t *next = x->next + chunk * x->f->ncols;
	for (int64_t p = begin; p < end; p++)
		next[x->f->colind[p]]++;
}

static void transpose_scatter(void *ctx, int64_t chunk, int64_t begin, int64_t end)
{
	const struct tile_transpose *x = ctx;
	const struct starfa_tile *f = x->f;
	struct starfa_tile *tt = x->tt;
	int64_t *next = x->next + chunk * f->ncols;
	int64_t r = row_of_entry(f, begin);
	for (int64_t p = begin; p < end; p++) {
		while (f->rowptr[r + 1] <= p)
			r++;
		int64_t q = next[f->colind[p]]++;
		tt->colind[q] = (uint32_t)r;
		tt->val[q] = f->val[p];
		tt->map[q] = (uint32_t)p;
	}
}

static int transpose_tile(const struct starfa_tile *f, struct starfa_tile *tt)
{
	struct tile_transpose x = {f, tt, NULL};
	int64_t *starts = starfa_malloc((size_t)f->ncols + 1, sizeof *starts);
	if (!starts)
		return STARFA_ENOMEM;
	int rc = counting_sort(f->nnz, f->ncols, &x.next, transpose_count, transpose_scatter, &x, starts);
	for (int64_t c = 0; !rc && c <= f->ncols; c++)
		tt->rowptr[c] = (uint32_t)starts[c];
	free(starts);
	return rc;
}

/* The transposed grid, tile by tile from the forward one: tile (j, i) is the transpose of tile (i, j),
 * rows in column order and, within a row, entries in row order (a counting sort, stable), which is the
 * order a transposed CSR would give them; map[q] records where entry q came from. */
static int build_transposed(const struct starfa_grid *g, struct starfa_grid *t)
{
	t->nr = g->nc;
	t->nc = g->nr;
	t->tiles = starfa_calloc((size_t)(t->nr * t->nc), sizeof *t->tiles);
	if (!t->tiles)
		return STARFA_ENOMEM;
	for (int64_t i = 0; i < g->nr; i++)
		for (int64_t j = 0; j < g->nc; j++) {
			const struct starfa_tile *f = starfa_grid_tile(g, i, j);
			struct starfa_tile *tt = starfa_grid_tile(t, j, i);
			tt->nrows = f->ncols;
			tt->ncols = f->nrows;
			tt->nnz = f->nnz;
			tt->rowptr = tile_alloc((size_t)(tt->nrows + 1) * sizeof *tt->rowptr);
			if (tt->nnz > 0) {
				tt->colind = tile_alloc((size_t)tt->nnz * sizeof *tt->colind);
				tt->val = tile_alloc((size_t)tt->nnz * sizeof *tt->val);
				tt->map = tile_alloc((size_t)tt->nnz * sizeof *tt->map);
			}
			if (!tt->rowptr || (tt->nnz > 0 && (!tt->colind || !tt->val || !tt->map))) {
				free_grid(t);
				return STARFA_ENOMEM;
			}
			memset(tt->rowptr, 0, (size_t)(tt->nrows + 1) * sizeof *tt->rowptr);
			if (tt->nnz == 0)
				continue;
			int rc = transpose_tile(f, tt);
			if (rc) {
				free_grid(t);
				return rc;
			}
			starpu_csr_data_register(&tt->handle, STARPU_MAIN_RAM, (uint32_t)tt->nnz, (uint32_t)tt->nrows,
						 (uintptr_t)tt->val, tt->colind, tt->rowptr, 0, sizeof(float));
			tt->serial = next_serial();
			starpu_vector_data_register(&tt->map_handle, STARPU_MAIN_RAM, (uintptr_t)tt->map,
						    (uint32_t)tt->nnz, sizeof(uint32_t));
			starfa_prefetch_to_gpus(tt->handle, j * t->nc + i);
		}
	return 0;
}

static int64_t *nnz_per_row(const starfa_csr *csr)
{
	int64_t *counts = starfa_malloc((size_t)csr->nrows, sizeof *counts);
	if (counts)
		for (int64_t r = 0; r < csr->nrows; r++)
			counts[r] = csr->rowptr[r + 1] - csr->rowptr[r];
	return counts;
}

static int64_t *nnz_per_col(const starfa_csr *csr)
{
	int64_t *counts = starfa_calloc((size_t)csr->ncols, sizeof *counts);
	if (counts)
		for (int64_t p = 0; p < csr->nnz; p++)
			counts[csr->colind[p]]++;
	return counts;
}

static int place_bands(starfa_tiled *t, int64_t row_cpu, int64_t col_cpu);

int starfa_tiled_create(const starfa_csr *csr, const starfa_tiling_options *opts, starfa_tiled **out)
{
	*out = NULL;
	if (!starfa_runtime_started())
		return starfa_set_error(STARFA_EINVAL, "starfa_tiled_create: call starfa_init first");
	if (!csr || csr->nrows <= 0 || csr->ncols <= 0)
		return starfa_set_error(STARFA_EINVAL, "starfa_tiled_create: the matrix has no rows or no columns");
	if (csr->nrows > INT32_MAX || csr->ncols > INT32_MAX)
		return starfa_set_error(STARFA_EINVAL, "starfa_tiled_create: dimensions beyond 2^31-1");

	int64_t row_tiles = opts ? opts->row_tiles : 0, col_tiles = opts ? opts->col_tiles : 0;
	double row_cost = opts ? opts->row_cost : 0, col_cost = opts ? opts->col_cost : 0;
	if (row_tiles < 0 || col_tiles < 0)
		return starfa_set_error(STARFA_EINVAL, "starfa_tiled_create: negative tile count");
	/* Weights are summed in 1/16ths of a nonzero in 64 bits: 2^31 rows of cost 2^24 still fit. */
	if (!(row_cost >= 0 && row_cost <= 0x1p24) || !(col_cost >= 0 && col_cost <= 0x1p24))
		return starfa_set_error(STARFA_EINVAL,
					"starfa_tiled_create: row_cost (%g) and col_cost (%g) must be in [0, 16777216]",
					row_cost, col_cost);
	const int64_t row_band = opts ? opts->row_band : 0;
	if (row_band < 0)
		return starfa_set_error(STARFA_EINVAL, "starfa_tiled_create: negative row_band (%lld)", (long long)row_band);
	if (row_band > 0) {
		row_tiles = (csr->nrows + row_band - 1) / row_band;
		row_cost = 0;
	}
	int placed = opts && opts->placed;
	int64_t cpu_bands = placed ? opts->cpu_bands : 0;
	const int rows_only = placed && opts->cpu_rows_only;
	double row_share = placed ? opts->row_cpu_share : 0, col_share = placed && !rows_only ? opts->col_cpu_share : 0;
	/* On a machine with GPUs a grid nobody placed is the GPUs' alone, as the planner's default
	 * (codelets/plan.c): StarPU then never sends a tile to a core to learn its speed there (a tile of
	 * ten million entries, sent to a core for its first calibration, took 0.25 s against 0.3 ms on an
	 * H100). STARFA_PLACEMENT=any leaves every task to StarPU. */
	int on_gpus = 0;
	if (!placed && starpu_cuda_worker_get_count() > 0) {
		starfa_placement mode;
		int rc = starfa_placement_mode(&mode);
		if (rc)
			return rc;
		on_gpus = mode != STARFA_PLACE_ANY;
	}
	if (on_gpus)
		placed = 1, cpu_bands = 0;
	if (row_tiles == 0 || col_tiles == 0) {
		int64_t r, c;
		auto_grid(csr, on_gpus, &r, &c);
		if (row_tiles == 0)
			row_tiles = r;
		if (col_tiles == 0)
			col_tiles = c;
	}
	row_tiles = clamp_tiles(row_tiles, csr->nrows);
	col_tiles = clamp_tiles(col_tiles, csr->ncols);
	if (placed) {
		if (cpu_bands < 0 || !(row_share >= 0 && row_share <= 1) || !(col_share >= 0 && col_share <= 1))
			return starfa_set_error(STARFA_EINVAL, "starfa_tiled_create: cpu_bands (%lld) must be >= 0 and the "
							       "CPU shares (%g, %g) in [0, 1]",
						(long long)cpu_bands, row_share, col_share);
		if (cpu_bands > 0 && starpu_cpu_worker_get_count() == 0)
			return starfa_set_error(STARFA_EINVAL, "starfa_tiled_create: CPU bands asked for, but there is no "
							       "CPU worker");
		if ((cpu_bands < row_tiles || rows_only || cpu_bands < col_tiles) && starpu_cuda_worker_get_count() == 0)
			return starfa_set_error(STARFA_EINVAL, "starfa_tiled_create: bands placed on CUDA workers, but "
							       "there is none");
		if (cpu_bands > 0 && row_band > 0)
			return starfa_set_error(STARFA_EINVAL, "starfa_tiled_create: row_band with CPU bands");
		if (cpu_bands > row_tiles || (!rows_only && cpu_bands > col_tiles))
			return starfa_set_error(STARFA_EINVAL, "starfa_tiled_create: %lld CPU bands in a %lldx%lld grid",
						(long long)cpu_bands, (long long)row_tiles, (long long)col_tiles);
	}

	starfa_tiled *t = starfa_calloc(1, sizeof *t);
	int64_t *row_counts = nnz_per_row(csr), *col_counts = nnz_per_col(csr);
	int rc = 0;
	if (!t || !row_counts || !col_counts) {
		rc = STARFA_ENOMEM;
		goto fail;
	}
	t->nrows = csr->nrows;
	t->ncols = csr->ncols;
	t->nnz = csr->nnz;
	t->row_bounds = starfa_malloc((size_t)row_tiles + 1, sizeof *t->row_bounds);
	t->col_bounds = starfa_malloc((size_t)col_tiles + 1, sizeof *t->col_bounds);
	if (!t->row_bounds || !t->col_bounds) {
		rc = STARFA_ENOMEM;
		goto fail;
	}
	if (row_cost > 0)
		add_row_cost(row_counts, csr->nrows, row_cost);
	if (col_cost > 0)
		add_row_cost(col_counts, csr->ncols, col_cost);
	if (row_band > 0)
		for (int64_t b = 0; b <= row_tiles; b++)
			t->row_bounds[b] = b * row_band < csr->nrows ? b * row_band : csr->nrows;
	else
		balanced_bounds(row_counts, csr->nrows, row_tiles, placed ? cpu_bands : 0, row_share, t->row_bounds);
	balanced_bounds(col_counts, csr->ncols, col_tiles, placed && !rows_only ? cpu_bands : 0, col_share, t->col_bounds);
	rc = build_grid(csr, t->row_bounds, row_tiles, t->col_bounds, col_tiles, &t->grid);
	if (rc)
		goto fail;
	if (placed && (rc = place_bands(t, cpu_bands, rows_only ? 0 : cpu_bands)) != 0)
		goto fail;
	if (opts && opts->transposed) {
		rc = build_transposed(&t->grid, &t->transposed);
		if (rc)
			goto fail;
	}
	free(row_counts);
	free(col_counts);
	*out = t;
	return 0;
fail:
	free(row_counts);
	free(col_counts);
	starfa_tiled_free(t);
	return rc;
}

int starfa_tiled_create_like(const starfa_tiled *like, const starfa_csr *csr, starfa_tiled **out)
{
	*out = NULL;
	if (!like || !csr)
		return starfa_set_error(STARFA_EINVAL, "starfa_tiled_create_like: missing operand");
	if (csr->nrows != like->nrows || csr->ncols != like->ncols)
		return starfa_set_error(STARFA_EINVAL, "starfa_tiled_create_like: a %lld x %lld matrix cannot take the "
						       "bands of a %lld x %lld one",
					(long long)csr->nrows, (long long)csr->ncols, (long long)like->nrows,
					(long long)like->ncols);
	const int64_t nr = like->grid.nr, nc = like->grid.nc;
	starfa_tiled *t = starfa_calloc(1, sizeof *t);
	int rc = t ? 0 : STARFA_ENOMEM;
	if (!rc) {
		t->nrows = csr->nrows;
		t->ncols = csr->ncols;
		t->nnz = csr->nnz;
		t->where = like->where;
		t->row_bounds = starfa_malloc((size_t)nr + 1, sizeof *t->row_bounds);
		t->col_bounds = starfa_malloc((size_t)nc + 1, sizeof *t->col_bounds);
		if (like->row_where) {
			t->row_where = starfa_malloc((size_t)nr, sizeof *t->row_where);
			t->col_where = starfa_malloc((size_t)nc, sizeof *t->col_where);
		}
		if (!t->row_bounds || !t->col_bounds || (like->row_where && (!t->row_where || !t->col_where)))
			rc = STARFA_ENOMEM;
	}
	if (!rc) {
		memcpy(t->row_bounds, like->row_bounds, ((size_t)nr + 1) * sizeof *t->row_bounds);
		memcpy(t->col_bounds, like->col_bounds, ((size_t)nc + 1) * sizeof *t->col_bounds);
		if (like->row_where) {
			memcpy(t->row_where, like->row_where, (size_t)nr * sizeof *t->row_where);
			memcpy(t->col_where, like->col_where, (size_t)nc * sizeof *t->col_where);
		}
		rc = build_grid(csr, t->row_bounds, nr, t->col_bounds, nc, &t->grid);
	}
	if (rc) {
		starfa_tiled_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

/* The worker masks of the bands: the last row_cpu row bands and col_cpu column bands on the CPU workers,
 * the others on the CUDA workers; tasks outside any band go to the CUDA workers when every band does,
 * anywhere otherwise. */
static int place_bands(starfa_tiled *t, int64_t row_cpu, int64_t col_cpu)
{
	int64_t nr = t->grid.nr, nc = t->grid.nc;
	t->row_where = starfa_malloc((size_t)nr, sizeof *t->row_where);
	t->col_where = starfa_malloc((size_t)nc, sizeof *t->col_where);
	if (!t->row_where || !t->col_where)
		return STARFA_ENOMEM;
	for (int64_t i = 0; i < nr; i++)
		t->row_where[i] = i >= nr - row_cpu ? STARPU_CPU : STARPU_CUDA;
	for (int64_t j = 0; j < nc; j++)
		t->col_where[j] = j >= nc - col_cpu ? STARPU_CPU : STARPU_CUDA;
	t->where = row_cpu == 0 && col_cpu == 0 ? STARPU_CUDA : 0;
	return 0;
}

void starfa_tiled_free(starfa_tiled *t)
{
	if (!t)
		return;
	free(t->row_where);
	free(t->col_where);
	free_grid(&t->grid);
	free_grid(&t->transposed);
	free(t->row_bounds);
	free(t->col_bounds);
	free(t);
}

int64_t starfa_tiled_nrows(const starfa_tiled *t) { return t->nrows; }
int64_t starfa_tiled_ncols(const starfa_tiled *t) { return t->ncols; }
int64_t starfa_tiled_nnz(const starfa_tiled *t) { return t->nnz; }
int64_t starfa_tiled_row_tiles(const starfa_tiled *t) { return t->grid.nr; }
int64_t starfa_tiled_col_tiles(const starfa_tiled *t) { return t->grid.nc; }
const int64_t *starfa_tiled_row_bounds(const starfa_tiled *t) { return t->row_bounds; }
const int64_t *starfa_tiled_col_bounds(const starfa_tiled *t) { return t->col_bounds; }
int starfa_tiled_has_transpose(const starfa_tiled *t) { return t->transposed.tiles != NULL; }

int64_t starfa_tiled_tile_nnz(const starfa_tiled *t, int64_t i, int64_t j)
{
	if (i < 0 || j < 0 || i >= t->grid.nr || j >= t->grid.nc)
		return 0;
	return starfa_grid_tile(&t->grid, i, j)->nnz;
}

void starfa_tiled_tile_csr(const starfa_tiled *t, int64_t i, int64_t j, int64_t *nrows, int64_t *ncols,
			   int64_t *nnz, const uint32_t **rowptr, const uint32_t **colind, const float **val)
{
	const struct starfa_tile *tile = starfa_grid_tile(&t->grid, i, j);
	*nrows = tile->nrows;
	*ncols = tile->ncols;
	*nnz = tile->nnz;
	*rowptr = tile->rowptr;
	*colind = tile->nnz ? tile->colind : NULL;
	*val = tile->nnz ? tile->val : NULL;
}

void starfa_tiled_describe(const starfa_tiled *t, FILE *out)
{
	int64_t ntiles = t->grid.nr * t->grid.nc, empty = 0, min_nnz = INT64_MAX, max_nnz = 0;
	for (int64_t k = 0; k < ntiles; k++) {
		int64_t n = t->grid.tiles[k].nnz;
		empty += n == 0;
		min_nnz = n < min_nnz ? n : min_nnz;
		max_nnz = n > max_nnz ? n : max_nnz;
	}
	/* Row-band balance is what the boundaries optimise: report its spread. */
	int64_t band_min = INT64_MAX, band_max = 0;
	for (int64_t i = 0; i < t->grid.nr; i++) {
		int64_t band = 0;
		for (int64_t j = 0; j < t->grid.nc; j++)
			band += starfa_grid_tile(&t->grid, i, j)->nnz;
		band_min = band < band_min ? band : band_min;
		band_max = band > band_max ? band : band_max;
	}
	fprintf(out,
		"tiles=%lldx%lld nnz_per_tile=min %lld mean %.0f max %lld empty=%lld "
		"row_band_nnz=min %lld max %lld%s",
		(long long)t->grid.nr, (long long)t->grid.nc, (long long)min_nnz, (double)t->nnz / ntiles,
		(long long)max_nnz, (long long)empty, (long long)band_min, (long long)band_max,
		starfa_tiled_has_transpose(t) ? " transposed=yes" : "");
	if (t->row_where) {
		int64_t cpu = 0;
		for (int64_t i = 0; i < t->grid.nr; i++)
			cpu += t->row_where[i] == STARPU_CPU;
		fprintf(out, " placed=%lld cuda + %lld cpu bands", (long long)(t->grid.nr - cpu), (long long)cpu);
	}
	fputc('\n', out);
}
