/* starfa — sparse factor analysis as StarPU task graphs on CPUs and GPUs.
 *
 * The public API. Every function that can fail returns 0 on success and a negative
 * STARFA_E* code on failure; starfa_last_error() then gives a message (per thread)
 * naming what failed and why, ready to print.
 */
#ifndef STARFA_H
#define STARFA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STARFA_VERSION_MAJOR 0
#define STARFA_VERSION_MINOR 1
#define STARFA_VERSION_STRING "0.1.0"

/* ------------------------------------------------------------------ errors */

enum {
	STARFA_OK = 0,
	STARFA_EINVAL = -1,   /* bad argument */
	STARFA_EIO = -2,      /* a file could not be opened, read or written */
	STARFA_EFORMAT = -3,  /* malformed input file */
	STARFA_ENOMEM = -4,   /* out of memory */
	STARFA_ERUNTIME = -5, /* StarPU, CUDA or a library call failed */
	STARFA_ENODEV = -6,   /* no worker can run the requested operation */
	STARFA_ECHECK = -7,   /* a result failed its check against the reference */
};

/* The message of the last failed call in this thread ("" when none). */
const char *starfa_last_error(void);

/* ------------------------------------------------------------------ sparse matrices
 * Row and column indices are 0-based int32 (dimensions up to 2^31-1); counts and
 * offsets are int64 throughout. */

/* Maps contiguous indices back to the identifiers an input file used (rating files
 * with arbitrary user and item ids), and identifiers to indices. */
typedef struct starfa_idmap starfa_idmap;

int64_t starfa_idmap_count(const starfa_idmap *map);
/* The original id of index i (NULL if out of range). */
const char *starfa_idmap_name(const starfa_idmap *map, int64_t i);
/* The index of an original id, or -1 when the id is unknown. */
int64_t starfa_idmap_find(const starfa_idmap *map, const char *name);

/* Coordinate (triplet) form, as read from a file. */
typedef struct starfa_coo {
	int64_t nrows, ncols, nnz;
	int32_t *row, *col; /* nnz entries each */
	float *val;         /* nnz entries (1.0 for pattern files) */
	/* Original ids when the file had arbitrary ids (rating files); NULL when the
	 * file's ids are 1-based indices (Matrix Market, docword). */
	starfa_idmap *row_ids, *col_ids;
} starfa_coo;

/* Compressed sparse rows. */
typedef struct starfa_csr {
	int64_t nrows, ncols, nnz;
	int64_t *rowptr; /* nrows + 1 */
	int32_t *colind; /* nnz, sorted within each row */
	float *val;      /* nnz */
} starfa_csr;

typedef enum starfa_format {
	STARFA_FORMAT_AUTO = 0, /* guessed from the file name, then its first bytes */
	STARFA_FORMAT_MTX,      /* Matrix Market coordinate */
	STARFA_FORMAT_RATINGS,  /* user item rating [timestamp], tab/comma/space separated */
	STARFA_FORMAT_DOCWORD,  /* UCI bag-of-words docword */
} starfa_format;

/* Parses "mtx", "ratings" or "docword" (any case); returns -1 for anything else. */
int starfa_format_parse(const char *name, starfa_format *out);
const char *starfa_format_name(starfa_format format);
/* The format a file of this name most likely has (never STARFA_FORMAT_AUTO). */
starfa_format starfa_format_guess(const char *path);

/* Reads a file into a freshly allocated COO matrix. Every malformed input gives
 * STARFA_EFORMAT with a message naming the file, the line and what is wrong.
 * Matrix Market symmetric (and skew-symmetric) matrices are expanded on load. */
int starfa_read(const char *path, starfa_format format, starfa_coo **out);
/* The same from an in-memory buffer (name is used in messages). */
int starfa_read_buffer(const char *name, const char *data, size_t size, starfa_format format,
		       starfa_coo **out);

/* Names coo's columns from a vocabulary file: one word per line, line k naming column k (UCI's
 * vocab.*.txt beside a docword file), so that models, topics and exports show words. A file with more
 * or fewer words than coo has columns, an empty line or a repeated word gives STARFA_EFORMAT naming
 * the file and the line. Replaces coo->col_ids. */
int starfa_read_vocab(const char *path, starfa_coo *coo);

starfa_coo *starfa_coo_new(int64_t nrows, int64_t ncols, int64_t capacity);
void starfa_coo_free(starfa_coo *coo);

/* Deterministic train/test split: each entry goes to the test set with probability
 * test_fraction, decided by a hash of (row, col, seed), so the split does not depend on
 * the order of the file. Both outputs keep the input's dimensions and share its ids
 * (the id maps are copied). */
int starfa_coo_split(const starfa_coo *in, double test_fraction, uint64_t seed,
		     starfa_coo **train, starfa_coo **test);

/* The same split by whole rows (documents): each row goes to the test set with probability
 * test_fraction, by a hash of (row, seed). Both outputs keep only their rows, renumbered in order, with
 * the input's row ids (or the original 1-based row numbers as ids) and its columns and column ids. */
int starfa_coo_split_rows(const starfa_coo *in, double test_fraction, uint64_t seed, starfa_coo **train,
			  starfa_coo **test);

/* Keeps only the last entry (in file order) of each (row, col) that appears more than
 * once — a rating given again replaces the earlier one — compacting coo in place, the
 * remaining entries in their order. *removed (if not NULL) gets the number dropped. */
int starfa_coo_dedupe(starfa_coo *coo, int64_t *removed);

/* CSR from COO: duplicates are summed, columns sorted within each row. */
int starfa_csr_from_coo(const starfa_coo *coo, starfa_csr **out);
/* The transpose, as CSR (i.e. the CSC form of the input). */
int starfa_csr_transpose(const starfa_csr *in, starfa_csr **out);
void starfa_csr_free(starfa_csr *csr);

/* ------------------------------------------------------------------ runtime */

typedef struct starfa_options {
	int ncpus;                 /* CPU workers; -1: StarPU's default (STARPU_NCPU or all cores) */
	int ncuda;                 /* CUDA workers; -1: StarPU's default (STARPU_NCUDA or all GPUs) */
	const char *scheduler;     /* NULL: STARPU_SCHED, else with GPU workers "heteroprio" (starfa places the
				    * bands, on the GPUs or split), or "dmda" under STARFA_PLACEMENT=any, and
				    * "lws" without GPU workers; e.g. "dmdas" */
	int calibrate;             /* -1: leave to STARPU_CALIBRATE; 0 off; 1 calibrate; 2 reset and calibrate */
	int silent;                /* 1: keep StarPU quiet unless something fails */
	const char *trace_dir;     /* NULL: no trace; else StarPU's FxT trace of the run, written into this folder
				    * (created if missing) at the last starfa_shutdown: see starfa_trace_write */
} starfa_options;

/* Defaults: everything left to StarPU and its environment variables. */
void starfa_options_default(starfa_options *opts);

/* Starts StarPU with these options (NULL: defaults); an option that is set wins over StarPU's
 * environment variable for it (STARPU_NCPU, STARPU_SCHED, ...). Calls may nest: each successful
 * starfa_init needs one starfa_shutdown. While the runtime is up, OpenBLAS runs on one thread (the
 * CPU kernels call LAPACK from StarPU's workers, one per core); the last starfa_shutdown gives its
 * setting back. With GPUs and no CPU worker count given (opts->ncpus < 0, no STARPU_NCPU), one core is
 * left out of the CPU workers and the calling thread is bound to it (it submits the graphs and waits for
 * them) until the last starfa_shutdown, which, called from that thread, gives it its affinity back.
 * Schedulers of parallel tasks (pheft, peager) are refused with STARFA_EINVAL. */
int starfa_init(const starfa_options *opts);
void starfa_shutdown(void);

/* After the starfa_shutdown that ended a run with options.trace_dir: converts the folder's raw FxT trace
 * with StarPU's own converter into paje.trace (ViTE reads it), tasks.rec (one record per task: worker,
 * start, end; scripts/gantt.py draws it), trace.rec (worker states), data.rec, dag.dot and
 * activity.data. STARFA_ENODEV when this StarPU was built without FxT. */
int starfa_trace_write(const char *dir);

typedef enum starfa_worker_kind { STARFA_WORKER_CPU = 0, STARFA_WORKER_CUDA = 1 } starfa_worker_kind;
#define STARFA_WORKER_KINDS 2
const char *starfa_worker_kind_name(starfa_worker_kind kind);

/* The running scheduler's name ("" before starfa_init). */
const char *starfa_scheduler_name(void);

/* The kind of a worker given as StarPU's worker number + 1 (task records, starfa_task_attr.worker). */
starfa_worker_kind starfa_worker_kind_of(int worker);

/* Number of workers of a kind (after starfa_init). */
int starfa_worker_count(starfa_worker_kind kind);

/* The index-th worker of a kind (0-based, below starfa_worker_count) as StarPU's worker number + 1, the
 * numbering of starfa_task_attr.worker: for a graph that keeps each band on one worker; 0 when there is
 * no such worker. */
int starfa_worker_of(starfa_worker_kind kind, int index);

/* Prints the StarPU version, the scheduler and every worker (CPU cores; GPUs with
 * name and memory). */
void starfa_print_info(FILE *out);

/* What the idle workers cost: runs a 2 ms task on every worker, one worker after the other (the state
 * a job's last task leaves behind), then sleeps `seconds` (in (0, 3600]) and gives the process's CPU
 * seconds over that sleep and its wall seconds. Their ratio is the number of cores StarPU's threads kept busy with nothing
 * to run: with blocking drivers one CPU worker stays awake, and every CUDA worker polls. Runs while no
 * other task of the caller's is in flight give a clean figure. */
int starfa_idle_cost(double seconds, double *cpu_seconds, double *wall_seconds);

/* ------------------------------------------------------------------ tiles */

/* A sparse matrix as a 2-D grid of CSR tiles, each registered as a StarPU handle.
 * Tile boundaries balance nonzeros, not rows. */
typedef struct starfa_tiled starfa_tiled;

typedef struct starfa_tiling_options {
	int64_t row_tiles; /* 0: automatic (with GPUs one tile a GPU; else about 4 a core) */
	int64_t col_tiles; /* 0: automatic */
	int transposed;    /* 1: also build the transposed grid (column-side sweeps) */
	/* The bands are cut so that each has about the same cost, counting each nonzero as 1 and each
	 * row (column) as row_cost (col_cost): 0 balances nonzeros alone; per-row work such as ALS's
	 * solves is worth more (starfa_rowsolve_row_cost). */
	double row_cost, col_cost;
	/* Placement of the bands' tasks (starfa_plan_tiling fills it from the measured speeds). 0: on a
	 * machine with GPUs, as placed with cpu_bands 0 (every task on the GPUs) unless STARFA_PLACEMENT=any
	 * (then StarPU places every task, as it does where there is no GPU). Otherwise the last cpu_bands bands of each side are cut to row_cpu_share
	 * (col_cpu_share) of that side's cost and run on the CPU workers only, the other bands on the CUDA
	 * workers only; with cpu_bands 0, every task of the matrix runs on the CUDA workers. */
	int placed;
	int64_t cpu_bands;
	double row_cpu_share, col_cpu_share;
	/* > 0: the row bands are consecutive runs of this many rows, in order, the last one holding what
	 * is left (mini-batches of documents); row_tiles and row_cost are then ignored, and no band may be
	 * placed on the CPU workers (cpu_bands 0). */
	int64_t row_band;
	/* With cpu_bands > 0: 1 places CPU bands on the row side alone (up to row_tiles of them); every
	 * column band stays the GPUs' and col_cpu_share is ignored. For work that sweeps the rows only (an
	 * SDDMM or SpMM over the forward grid), where the cores take whole rows and the column bands need
	 * not be cut for them: with one column band, each row band's values are one run of the CSR order
	 * (starfa_sparse_values_create_over). */
	int cpu_rows_only;
	/* For starfa_plan_tiling: the tasks one CPU band's part of a sweep runs as, one after the other
	 * (0: one). Each is predicted at its own cost, so that the per-task time a model holds for small
	 * tasks counts as often as the band pays it (SGD's cores run their band as a schedule of tiles). */
	int64_t cpu_band_tasks;
	/* For starfa_plan_tiling: with by_variant 1, only the model's samples of tasks of variant
	 * model_variant are read (starfa_sgd_model_variant), so that settings whose times do not follow
	 * the cost (SGD's ranks) are not mixed; a core's curve takes every variant where that one has no
	 * samples on the cores, and every curve does with 0, the fastest at each cost. */
	int by_variant;
	uint32_t model_variant;
	/* For starfa_plan_tiling: what one CPU band costs a sweep beyond its tasks' predicted times, in
	 * microseconds (0 or less: 300, measured on small ALS sweeps, so the smallest that can be asked for is
	 * a fraction of a microsecond); a split is taken only when it gains that much a core, and 5% of the
	 * sweep. */
	double cpu_band_overhead_us;
	/* For starfa_plan_tiling: 1 applies the planned split where STARFA_PLACEMENT is unset, as
	 * STARFA_PLACEMENT=split does (an operation whose planned split measured faster than the GPUs alone:
	 * SGD); 0 keeps the GPUs alone there. */
	int split_by_default;
	/* For starfa_plan_tiling, where a split's GPU bands run other tasks than the GPUs alone do (SGD's
	 * span over a whole column block): with by_split_variant 1, a split's GPU part is predicted from the
	 * samples of variant split_model_variant (starfa_sgd_span_model_variant), those of model_variant where
	 * the model has none, each band as cuda_split_tasks tasks one after the other (0: one). */
	int by_split_variant;
	uint32_t split_model_variant;
	int64_t cuda_split_tasks;
} starfa_tiling_options;

/* How a sweep is shared between the worker kinds, from the calibrated performance models of the
 * operation that dominates it (starfa_plan_tiling). */
typedef struct starfa_split {
	int64_t cuda_bands, cpu_bands; /* bands per side for each kind */
	double cpu_share;              /* of the sweep's cost, on the CPU bands (0: the GPUs alone) */
	int calibrated;                /* both kinds' models had samples of the operation; 0: the prior */
	double cuda_ms, cpu_ms;        /* predicted sweep on the CUDA workers alone, on the CPU workers alone
					* (cpu_ms at each task's mean time: the slowest core's lag counts in split_ms) */
	double split_ms;               /* predicted sweep with the split (cuda_ms when there is none) */
	/* The best split the models predict, taken or not (computed under STARFA_PLACEMENT=split, or unset
	 * with split_by_default, when both kinds are calibrated; else NAN):
	 * the cores' share and the sweep, and the gain a split must show to be taken (5%, and the
	 * operation's overhead a core, cpu_band_overhead_us). */
	double best_share, best_ms, needed_ms;
} starfa_split;

/* Decides the bands of the row-side and column-side sweeps (split[0], split[1]; may be NULL) of
 * `row_sweep_cost` and `col_sweep_cost` (in the operation's perfmodel size: nnz x K for
 * "sddmm", rowsolve's cost model for "rowsolve", ...) over every worker. With no CUDA worker, every
 * band goes to the CPU workers (cuda_bands 0, StarPU places them). With CUDA workers, bands_per_gpu
 * bands for each GPU, every task of the matrix on the GPUs; the split is predicted all the same from
 * the models (cuda_ms, cpu_ms, split_ms). STARFA_PLACEMENT=split in the environment applies it: one band
 * per CPU worker cut to the cores' share (the one whose band, each task at the slowest core's time, is
 * predicted to end by 90% of the GPUs' time), when that shortens the predicted sweep by at least 5% and
 * the operation's overhead a core (tiling->cpu_band_overhead_us, 0.3 ms by default), and the operation
 * has samples on both kinds (before that the GPUs work alone: no
 * critical task goes to a worker kind of unknown speed just to learn it). STARFA_PLACEMENT=any places
 * nothing (StarPU's scheduler decides every task, the caller's band count), =gpu keeps the GPUs alone;
 * unset, the GPUs work alone unless tiling->split_by_default asks for the split as under =split.
 * Fills `tiling` (row and column tiles, placement) when not NULL. */
int starfa_plan_tiling(const char *operation, double row_sweep_cost, double col_sweep_cost, int64_t bands_per_gpu,
		       starfa_tiling_options *tiling, starfa_split split[2]);
/* One line: "placement: GPUs alone (models not calibrated) ..." */
void starfa_split_describe(const starfa_split *s, FILE *out);

/* A split's running check, for a graph that gives the cores a share of each sweep (SGD's split,
 * graphs/sgd.c). After each sweep, starfa_split_guard_step(g, sweep_s, gpus_alone_s, moved) returns g->on_gpus:
 * 1 when the next sweep should give the cores' part to the GPUs, 0 when the cores should run it.
 *  - A split sweep is compared with the GPUs alone: first with the caller's estimate (`gpus_alone_s`,
 *    the GPUs' busy seconds over their share of the work, NAN when unknown), once a trial has run with
 *    the trial's measured sweep. Longer by STARFA_SPLIT_GUARD_MARGIN loses, within it wins; a win takes
 *    a loss back, so lone noise never adds up and scattered slow sweeps do.
 *  - When the losses lead by STARFA_SPLIT_GUARD_LOSSES against the estimate, the GPUs take the cores'
 *    part on trial: its first sweep moves the factors, its second is measured. If the median of the
 *    split's last counted sweeps beats that by the margin, the cores get their part back and the
 *    measured sweep is the reference from then on; else the GPUs keep it for good, as they do when the
 *    losses lead again against the measured sweep. The estimate only starts a trial: it cannot see the
 *    costs of the GPUs' own tiling, and it did give way where the split was 1.14x faster.
 *  - `moved` sweeps (the first, one after the factors came home) count neither way; neither does the
 *    first sweep after the guard changed hands. Start from a zeroed guard. */
#define STARFA_SPLIT_GUARD_MARGIN 1.02
#define STARFA_SPLIT_GUARD_LOSSES 2
#define STARFA_SPLIT_GUARD_HISTORY 5
typedef struct starfa_split_guard {
	int64_t sweeps, losing; /* sweeps seen; losses not taken back */
	int on_gpus;            /* the next sweep gives the cores' part to the GPUs (a trial, or for good) */
	int given_way;          /* for good */
	int changed;            /* the next sweep is the first since the cores' part changed hands */
	double trial_s;         /* the trial's measured sweep (0 before one ran) */
	double split_s[STARFA_SPLIT_GUARD_HISTORY]; /* the split's last counted sweeps, a ring */
	int64_t nsplit;                             /* split sweeps counted */
} starfa_split_guard;
int starfa_split_guard_step(starfa_split_guard *g, double sweep_s, double gpus_alone_s, int moved);

/* Splits and registers (starfa_init first). The CSR is copied into the tiles: the
 * caller keeps ownership of csr. opts may be NULL (automatic, no transpose). */
int starfa_tiled_create(const starfa_csr *csr, const starfa_tiling_options *opts, starfa_tiled **out);
/* csr (of like's shape: a held-out test set of like's ratings, say) split along like's row and column bands
 * and placed as they are, so that dense matrices blocked for like serve both (no transposed grid). */
int starfa_tiled_create_like(const starfa_tiled *like, const starfa_csr *csr, starfa_tiled **out);
/* Unregisters every handle (waiting for pending tasks) and frees everything. */
void starfa_tiled_free(starfa_tiled *t);

int64_t starfa_tiled_nrows(const starfa_tiled *t);
int64_t starfa_tiled_ncols(const starfa_tiled *t);
int64_t starfa_tiled_nnz(const starfa_tiled *t);
int64_t starfa_tiled_row_tiles(const starfa_tiled *t);
int64_t starfa_tiled_col_tiles(const starfa_tiled *t);
/* Row boundaries: row_tiles + 1 entries, first 0, last nrows (likewise columns). */
const int64_t *starfa_tiled_row_bounds(const starfa_tiled *t);
const int64_t *starfa_tiled_col_bounds(const starfa_tiled *t);
/* Nonzeros of tile (i, j). */
int64_t starfa_tiled_tile_nnz(const starfa_tiled *t, int64_t i, int64_t j);
/* The tile's CSR arrays in main memory (local row and column indices; read them only
 * when no task is pending on the tile). Empty tiles give nnz 0 and NULL arrays. */
void starfa_tiled_tile_csr(const starfa_tiled *t, int64_t i, int64_t j, int64_t *nrows, int64_t *ncols,
			   int64_t *nnz, const uint32_t **rowptr, const uint32_t **colind, const float **val);
/* Tile (i, j) of the transposed grid: rows are the columns of the original. */
int starfa_tiled_has_transpose(const starfa_tiled *t);
/* One line describing the grid: "tiles=RxC (row band nnz min/max ...)". */
void starfa_tiled_describe(const starfa_tiled *t, FILE *out);

typedef enum starfa_side { STARFA_ROWS = 0, STARFA_COLS = 1 } starfa_side;

/* Sparse values with the sparsity of a tiled matrix (an SDDMM output, a residual, a quotient), on
 * either grid: side STARFA_ROWS holds one vector handle per non-empty tile of the forward grid, in its
 * CSR order; side STARFA_COLS one per tile of the transposed grid (starfa_tiling_options.transposed),
 * in the transposed CSR order. Tile (i, j) of the forward grid and tile (j, i) of the transposed one
 * hold the same entries; starfa_task_values_transpose moves values from one to the other through the
 * map the tiled matrix keeps between them. */
typedef struct starfa_sparse_values starfa_sparse_values;

int starfa_sparse_values_create(const starfa_tiled *pattern, starfa_side side, starfa_sparse_values **out);
void starfa_sparse_values_free(starfa_sparse_values *v);
starfa_side starfa_sparse_values_side(const starfa_sparse_values *v);
const starfa_tiled *starfa_sparse_values_pattern(const starfa_sparse_values *v);
/* Copies the values back into one array (waits for pending tasks), nnz entries: for side STARFA_ROWS in
 * the order of the CSR the tiled matrix was built from; for STARFA_COLS in the order of its transpose
 * (starfa_csr_transpose), i.e. column by column. */
int starfa_sparse_values_gather(const starfa_sparse_values *v, float *out);
/* Values registered over the caller's array of nnz floats, in the order starfa_sparse_values_gather
 * writes, instead of blocks of their own: tasks on the CPU workers read and write `data` in place, and
 * values computed elsewhere come home into it, with no gather. Possible where that side's grid has one
 * column band (each tile is then one run of the array); STARFA_EINVAL otherwise. `data` holds the
 * initial values (an accumulating SDDMM adds to them) and must stay valid until
 * starfa_sparse_values_free, which brings every value home into it. It is not pinned: a one-shot job
 * moves each value once, and pinning 100 MB costs more than moving it unpinned. */
int starfa_sparse_values_create_over(const starfa_tiled *pattern, starfa_side side, float *data,
				     starfa_sparse_values **out);

/* A dense row-major matrix (rows x cols floats) split into row blocks aligned with
 * a tiled matrix's row bands (or column bands), one handle per block. The caller owns
 * `data`, which must stay valid until starfa_dense_free. */
typedef struct starfa_dense starfa_dense;

int starfa_dense_create(const starfa_tiled *t, starfa_side side, float *data, int64_t cols,
			starfa_dense **out);
/* Unregisters (bringing the data back to main memory) and frees the blocks; not data. */
void starfa_dense_free(starfa_dense *d);
int64_t starfa_dense_blocks(const starfa_dense *d);
int64_t starfa_dense_rows(const starfa_dense *d);
int64_t starfa_dense_cols(const starfa_dense *d);
/* Waits for pending tasks and makes the data in main memory up to date. */
int starfa_dense_sync(starfa_dense *d);
/* starfa_dense_sync on n matrices at once: their blocks' transfers home overlap (one acquisition each,
 * all issued before the first is waited for). */
int starfa_dense_sync_all(starfa_dense *const *list, int64_t n);
/* The identity of block b's data, as the task log records it (NULL when b is out of range). */
const void *starfa_dense_block_id(const starfa_dense *d, int64_t b);

/* A small dense vector of n floats in one handle (column sums, scales per column). */
typedef struct starfa_vector starfa_vector;

int starfa_vector_create(int64_t n, starfa_vector **out); /* zero-filled */
void starfa_vector_free(starfa_vector *v);
int64_t starfa_vector_size(const starfa_vector *v);
/* Copies it to out (n floats), waiting for its tasks. */
int starfa_vector_read(starfa_vector *v, float *out);
/* Sets it from in (n floats), after the tasks that use it. */
int starfa_vector_write(starfa_vector *v, const float *in);

/* Partial sums computed by tasks (losses, objectives): n slots of one double each, one task per slot,
 * so that the tasks of a reduction run concurrently and only n numbers reach the host. */
typedef struct starfa_sums starfa_sums;

int starfa_sums_create(int64_t n, starfa_sums **out); /* zero-filled */
void starfa_sums_free(starfa_sums *s);
int64_t starfa_sums_count(const starfa_sums *s);
/* Waits for the slots' tasks and adds them up in slot order (the same total whatever the schedule). */
int starfa_sums_total(starfa_sums *s, double *total);
/* Waits for the slots' tasks and copies them to out (n doubles). */
int starfa_sums_read(starfa_sums *s, double *out);
/* Waits for the tasks of slots [first, first + count) only (later tasks on other slots may still run)
 * and copies them to out (count doubles). */
int starfa_sums_read_slots(starfa_sums *s, int64_t first, int64_t count, double *out);

/* ------------------------------------------------------------------ per-tile tasks
 * Each inserts one task on one tile (or one band, one block) and returns as soon as it is submitted;
 * StarPU runs it on a CPU core or a GPU once the tasks before it on the same data are done (sequential
 * consistency: a task reading a block waits for the last task writing it). Graphs own the loops over
 * tiles, their order and priorities. starfa_wait() waits for every task. */

/* How a task is scheduled (NULL: the defaults, zeros). */
typedef struct starfa_task_attr {
	int priority; /* higher runs first among ready tasks (StarPU's priority; 0 default); for the tasks of a
		       * critical path under dmdas and the priority-aware schedulers; under heteroprio only
		       * its sign counts (above 0, 0, below 0: three levels) */
	int worker;   /* 0: StarPU picks; w > 0: worker w - 1 must run it (StarPU's worker numbering) */
	unsigned where; /* 0: the placement of the task's band (starfa_tiling_options), or any worker; else a
			 * mask of STARFA_WHERE_CPU and STARFA_WHERE_CUDA. A placement (the band's or this
			 * one) on kinds this runtime has no worker of is STARFA_ENODEV, nothing submitted */
} starfa_task_attr;

#define STARFA_WHERE_CPU 1u
#define STARFA_WHERE_CUDA 2u

typedef enum starfa_sddmm_mode {
	STARFA_SDDMM_PATTERN = 0, /* P_ij = alpha <A_i, B_j> + beta P_ij for (i, j) in pattern(S) */
	STARFA_SDDMM_SCALED = 1,  /* P_ij = alpha S_ij <A_i, B_j> + beta P_ij */
} starfa_sddmm_mode;

/* SDDMM on tile (i, j) of P's grid: P = alpha (A·Bᵀ) ∘ pattern(S) + beta P (or scaled by S's values).
 * On side STARFA_ROWS, A holds S's row factors (blocked along its rows, block i) and B its column
 * factors (block j); on STARFA_COLS, tile (i, j) of the transposed grid, A is blocked along S's columns
 * and B along its rows: the same product for the transposed values. A and B have the same K columns.
 * beta 0 never reads P (NaN there does not matter); beta 1 is the rank-one residual update. */
int starfa_task_sddmm(const starfa_tiled *S, int64_t i, int64_t j, const starfa_dense *A, const starfa_dense *B,
		      starfa_sddmm_mode mode, float alpha, float beta, starfa_sparse_values *P,
		      const starfa_task_attr *attr);

/* A model's squared error over one band of side's grid, in one task that writes no predictions:
 *   slot `slot` of sums = sum over the band's entries (r, c) of (S_rc - shift - <A_r, B_c>)^2   (double)
 * with A blocked along the side's rows (block `band`) and B along the other side's, as SDDMM's. A training
 * loss in one pass over the band instead of an SDDMM, a map and a reduction a tile. */
int starfa_task_sqerr_band(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *A,
			   const starfa_dense *B, float shift, starfa_sums *sums, int64_t slot, const starfa_task_attr *attr);

/* SpMM of one tile into one output block, on the grid of `side`:
 *   STARFA_ROWS: Y_i (+)= S_ij · X_j   (X blocked along S's columns, Y along its rows)
 *   STARFA_COLS: Y_i (+)= (Sᵀ)_ij · X_j (the transposed grid: X along S's rows, Y along its columns)
 * with S's values, or V's (same side) when V is not NULL: Pᵀ·W for a P computed by SDDMM. accumulate 0
 * overwrites Y's block (an empty tile then zeroes it), 1 adds to it. X and Y have the same columns. */
int starfa_task_spmm(const starfa_tiled *S, starfa_side side, int64_t i, int64_t j, const starfa_sparse_values *V,
		     const starfa_dense *X, starfa_dense *Y, int accumulate, const starfa_task_attr *attr);
/* Band `band` of side's grid in one task: starfa_task_spmm on each of the band's tiles in order, the first
 * overwriting Y's block and the others adding to it (an all-empty band zeroes it), with the same kernels
 * in the same order (on a CUDA worker, each tile's tuned choice), for one task's overhead instead of one
 * a tile. It runs where the band's tiles would: the band's placement, or attr's worker or kind. */
int starfa_task_spmm_band(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_sparse_values *V,
			  const starfa_dense *X, starfa_dense *Y, const starfa_task_attr *attr);

/* SDDMM and SpMM fused on one tile (FusedMM): on `side`'s grid, tile (i, j),
 *   Y_i (+)= f(S_ij, A_i·B_jᵀ) · B_j
 * with f applied to each entry's product y and value s, and the products never written to memory.
 * A and Y are blocked along the side's rows (block i: S's rows for STARFA_ROWS, its columns for
 * STARFA_COLS on the transposed grid), B along its columns (block j); all have K columns. accumulate as
 * starfa_task_spmm's. One pass where SDDMM, a values map and SpMM make three: LDA's and KL-NMF's
 * S ⊘ (A·Bᵀ) times B, SFA's product with the normal equations' matrix.
 * active (one column blocked like Y; NULL: every row) skips rows, active-row compaction: a row whose
 * active value is 0 costs nothing and its row of Y is left as it is (LDA's documents whose E-step has
 * converged). A tile with no entries and accumulate 0 zeroes its whole block, as without active. */
typedef enum starfa_fused_mode {
	STARFA_FUSED_PATTERN = 0,  /* f = y */
	STARFA_FUSED_SCALED = 1,   /* f = s·y */
	STARFA_FUSED_QUOTIENT = 2, /* f = s / max(eps, y) */
} starfa_fused_mode;
int starfa_task_sddmm_spmm(const starfa_tiled *S, starfa_side side, int64_t i, int64_t j, const starfa_dense *A,
			   const starfa_dense *B, starfa_fused_mode mode, float eps, const starfa_dense *active,
			   starfa_dense *Y, int accumulate, const starfa_task_attr *attr);
/* Band `band` of side's grid in one task: starfa_task_sddmm_spmm on each of the band's tiles in order, the
 * first overwriting Y's block and the others adding to it (an all-empty band zeroes it): the same kernels
 * in the same order as those tasks (on the CPU their bits; on a CUDA worker the same to rounding), for one
 * task's overhead instead of one a tile. It runs where the band's tiles would: the band's placement, or
 * attr's worker or kind. */
int starfa_task_sddmm_spmm_band(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *A,
				const starfa_dense *B, starfa_fused_mode mode, float eps, const starfa_dense *active,
				starfa_dense *Y, const starfa_task_attr *attr);

/* Copies tile (i, j) of src's grid into tile (j, i) of dst, which is on the other side: the values of a
 * forward tile to the transposed grid or back, entry for entry through the tiled matrix's map. */
int starfa_task_values_transpose(const starfa_sparse_values *src, int64_t i, int64_t j, starfa_sparse_values *dst,
				 const starfa_task_attr *attr);

/* Element-wise maps of sparse values, y an entry of Y, x the same entry of X (or of the tiled matrix's
 * own values, on Y's side, when X is NULL). */
typedef enum starfa_values_op {
	STARFA_VALUES_SET = 0,  /* y = a */
	STARFA_VALUES_COPY,     /* y = x */
	STARFA_VALUES_SCALE,    /* y = a·y + b */
	STARFA_VALUES_AXPBY,    /* y = a·x + b·y */
	STARFA_VALUES_MUL,      /* y = x·y */
	STARFA_VALUES_QUOTIENT, /* y = x / max(a, y)   (S ⊘ max(ε, P): KL-NMF, LDA, GaP) */
	STARFA_VALUES_EXP,      /* y = exp(y) */
	STARFA_VALUES_LOG,      /* y = log(max(a, y)) */
	STARFA_VALUES_OPS
} starfa_values_op;

int starfa_task_values_map(starfa_sparse_values *Y, int64_t i, int64_t j, starfa_values_op op, float a, float b,
			   const starfa_sparse_values *X, const starfa_task_attr *attr);

/* Reductions, in double precision, over the entries of one tile (y of Y, x of X or the matrix's own
 * values when X is NULL), or over the elements y of one dense block. */
typedef enum starfa_reduce_op {
	STARFA_REDUCE_SUM = 0, /* sum y */
	STARFA_REDUCE_SQUARES, /* sum y^2 */
	STARFA_REDUCE_SQDIFF,  /* sum (x - y)^2                   (sparse only: squared error of predictions y) */
	STARFA_REDUCE_KL,      /* sum x log(x / max(a, y)) - x    (sparse only, 0 log 0 = 0: the part over the
				* nonzeros of the generalized KL divergence of x from y) */
	STARFA_REDUCE_XLOGY,   /* sum x log(max(a, y))            (sparse only: Poisson, multinomial likelihoods) */
	STARFA_REDUCE_CONFIDENCE, /* sum (1 + a x)(1 - y)^2 - y^2  (sparse only: the observed entries' share of
				   * implicit ALS's confidence-weighted loss, y the predictions) */
	STARFA_REDUCE_ABS,        /* sum |y| */
	STARFA_REDUCE_OPS
} starfa_reduce_op;

/* Writes the reduction of tile (i, j) of Y's grid into slot `slot` of sums. */
int starfa_task_values_reduce(const starfa_sparse_values *Y, int64_t i, int64_t j, starfa_reduce_op op, float a,
			      const starfa_sparse_values *X, starfa_sums *sums, int64_t slot,
			      const starfa_task_attr *attr);
/* Writes the reduction of block `block` of D (SUM, SQUARES or ABS) into slot `slot` of sums. */
int starfa_task_dense_reduce(const starfa_dense *D, int64_t block, starfa_reduce_op op, starfa_sums *sums,
			     int64_t slot, const starfa_task_attr *attr);
/* The same over the block's columns [col0, col0 + ncols) only (a model's factors without its bias
 * columns, say), and with W (blocked like D; NULL: none) each row's terms times the row's element of W's
 * column wcol (a weighted regularization: sum over rows of w_r |x_r|^2). */
int starfa_task_dense_reduce_cols(const starfa_dense *D, int64_t block, int64_t col0, int64_t ncols,
				  starfa_reduce_op op, const starfa_dense *W, int64_t wcol, starfa_sums *sums,
				  int64_t slot, const starfa_task_attr *attr);

/* Element-wise maps of one dense block, y an element of Y's block and z its operand: the element of X's
 * block at the same place (X blocked like Y, with Y's columns), X's element in the same row (X with one
 * column: a value per row), or v's element of the same column (v of Y's columns: a value per column).
 * At most one of X and v; the ops that take no operand need neither. */
typedef enum starfa_dense_op {
	STARFA_DENSE_SET = 0, /* y = a */
	STARFA_DENSE_COPY,    /* y = z */
	STARFA_DENSE_SCALE,   /* y = a·y + b */
	STARFA_DENSE_ADD,     /* y = y + a·z */
	STARFA_DENSE_MUL,     /* y = y·z */
	STARFA_DENSE_DIV,     /* y = y / max(a, z + b)  (a = 0: y / (z + b)) */
	STARFA_DENSE_EXP,     /* y = exp(y) */
	STARFA_DENSE_LOG,     /* y = log(max(a, y)) */
	STARFA_DENSE_DIGAMMA, /* y = ψ(y), the digamma function (E[log θ] of a Dirichlet) */
	STARFA_DENSE_LGAMMA,  /* y = log Γ(y) (a Dirichlet's normalizer, in an evidence lower bound) */
	STARFA_DENSE_OPS
} starfa_dense_op;

/* The special functions of those maps, in double on the host (the O(K) terms of a graph's objective):
 * ψ(x) and log Γ(x) for x > 0, NaN otherwise. */
double starfa_digamma(double x);
double starfa_lgamma(double x);

int starfa_task_dense_map(starfa_dense *Y, int64_t block, starfa_dense_op op, float a, float b, const starfa_dense *X,
			  const starfa_vector *v, const starfa_task_attr *attr);
/* Column sums of one block: v = (accumulate ? v : 0) + the sum of the block's rows. */
int starfa_task_dense_colsum(const starfa_dense *X, int64_t block, int accumulate, starfa_vector *v,
			     const starfa_task_attr *attr);
/* Row sums of one block into R's block (R: one column, blocked like X). */
int starfa_task_dense_rowsum(const starfa_dense *X, int64_t block, starfa_dense *R, const starfa_task_attr *attr);

/* Top k of tile (i, j) (ranking metrics, recommendations): for each row r of S's row band i whose active
 * value is not 0 (active NULL, or one column blocked along S's rows: every row), the k columns c of column
 * band j with the highest scores A_r · B_c (A blocked along S's rows, B along its columns, the same
 * columns), leaving out the tile's entries (the items each row has seen) and NaN scores. Row r of L's
 * block i (at least 2k columns, blocked along S's rows; one such L per column band; columns past 2k are
 * left undefined) gets pairs (score, column within band j stored as int32 bits: starfa_top_k_item_at),
 * best first (ties: the lower column), then
 * (NaN, -1) past the last; inactive rows get only (NaN, -1). A task with k above STARFA_TOP_K_CUDA_MAX
 * runs on the CPU workers, whatever its band's placement. */
#define STARFA_TOP_K_CUDA_MAX 1024
int starfa_task_top_k(const starfa_tiled *S, int64_t i, int64_t j, const starfa_dense *A, const starfa_dense *B,
		      int64_t k, const starfa_dense *active, starfa_dense *L, const starfa_task_attr *attr);
/* Column `place` of a top-k list row as starfa_task_top_k writes it: the column, -1 past the last. */
static inline int32_t starfa_top_k_item_at(const float *list_row, int64_t place)
{
	union {
		float f;
		int32_t i;
	} u = {list_row[2 * place + 1]};
	return u.i;
}

/* Conjugate gradients for one system per row, (A_r + lam_r I) x_r = b_r, matrix-free: the caller forms
 * the products A p for every row at once (SFA: A p = Mᵀ·SDDMM(p, M) on S's pattern, one SDDMM and one
 * SpMM), and this step does the per-row vector work of one block. X (the unknowns), R (the residual), P
 * (the direction) and Q have X's columns, rr (each row's r·r) and lam (each row's shift) one column, all
 * blocked alike. start: Q = b - A x, and r = Q - lam x, p = r, rr = r·r. Otherwise Q = A p, and with
 * q = Q + lam p: alpha = rr / p·q, x += alpha p, r -= alpha q, rr' = r·r, p = r + (rr' / rr) p, rr = rr'
 * (a row with p·q or rr at 0 stays put). Dot products in double. */
int starfa_task_dense_cg(starfa_dense *X, starfa_dense *R, starfa_dense *P, const starfa_dense *Q, starfa_dense *rr,
			 const starfa_dense *lam, int64_t block, int start, const starfa_task_attr *attr);

/* Fills block `block` of Y with uniform draws in [lo, hi) (finite, lo <= hi): the element in row r of Y
 * (counted from Y's first row, not the block's) and column c gets lo + (hi − lo)·u (in one rounding; the
 * float just below hi where that rounds to hi), u the top 24 bits
 * of SplitMix64 (Steele, Lea & Flood 2014) at counter r·cols + c + 1 from `seed`, over 2^24. The values
 * depend on the seed and the element only: the same on CPU and CUDA workers, with any blocking. */
int starfa_task_dense_uniform(starfa_dense *Y, int64_t block, float lo, float hi, uint64_t seed,
			      const starfa_task_attr *attr);

/* One variational step of per-row Dirichlet parameters (the documents' γ in LDA's E-step, Blei, Ng &
 * Jordan 2003), on block `block`: for every row r whose active value is not 0 (active: one column
 * blocked like gamma; NULL: every row), with G_r the row's product (LDA: P·β̃ from the fused operation)
 *   γ'_r = prior + θ̃_r ∘ G_r,  change_r = mean_k |γ'_rk − γ_rk|,  γ_r = γ'_r,
 *   E[log θ]_r = ψ(γ_r) − ψ(Σ_k γ_rk) into elog,  θ̃_r = exp(E[log θ]_r) into expelog,
 *   active_r = 1 if change_r >= tol, else 0 (the row has converged: scikit-learn's mean_change_tol),
 * and the sums' slot = the number of those rows with change_r >= tol (NaN when a change is not finite).
 * Rows whose active value is 0 keep γ, E[log θ] and θ̃. gamma, elog, expelog and G: the same columns,
 * blocked alike, distinct. One task where the element-wise maps make a dozen. */
int starfa_task_dense_dirichlet(starfa_dense *gamma, starfa_dense *elog, starfa_dense *expelog, const starfa_dense *G,
				starfa_dense *active, float prior, float tol, starfa_sums *sums, int64_t slot, int64_t block,
				const starfa_task_attr *attr);

/* FP32 rows to FP16 rows and back, for factors kept in half precision. A half-precision dense holds its
 * rows' values as IEEE binary16 packed two to a float: c columns of floats store 2c halves, the half of
 * column q in the low 16 bits of float column q/2 when q is even (little-endian memory order, as CUDA's
 * __half arrays). STARFA_TO_HALF: Y (c columns) from X (2c columns of floats), rounded to nearest even,
 * ±inf beyond FP16's range; STARFA_FROM_HALF: Y (2c columns of floats) from X (c columns), exact. X and
 * Y are blocked alike. */
typedef enum starfa_convert { STARFA_TO_HALF = 0, STARFA_FROM_HALF = 1 } starfa_convert;
int starfa_task_dense_convert(starfa_dense *Y, int64_t block, starfa_convert dir, const starfa_dense *X,
			      const starfa_task_attr *attr);

/* SGD matrix factorization: one pass of updates over tile (i, j) of S (its ratings), reading and writing
 * block i of U (S's rows) and block j of V (its columns), so that the tiles of a stratum (no two sharing
 * a row or column band) run at once and the others in order. Rows are augmented: a user row holds
 * [p_u (rank), b_u, 1], an item row [q_i (rank), 1, c_i], then zeros up to the blocks' width (a multiple of 4
 * lets the CUDA kernel load 16 bytes at a time). For each entry r_ui, e = r - mu - p_u·q_i - b_u
 * - c_i, then the biases (when biases) and factors move by lr times the error's gradient less their L2
 * terms (lambda_bias, lambda). Entries are visited in chunks of 256 (CSR order), each chunk in an order
 * drawn from (seed, epoch, tile, chunk); a GPU runs chunks at once (Hogwild within the tile). The sum
 * of the squared errors met is written into slot `slot` of sse. With adagrad, Gu and Gv (one column,
 * blocked like U and V, starting at 1) are each row's AdaGrad accumulators: a row's rate is lr / sqrt(G)
 * once its update has added the mean square of its factor gradient to G (LIBMF's per-row AdaGrad);
 * without, they may be NULL. */
typedef struct starfa_sgd_step {
	int64_t rank;
	float lr, lambda, lambda_bias, mu;
	int biases, adagrad;
	uint64_t seed, epoch;
	int half; /* 1: U and V hold FP16 rows, packed two to a float (starfa_task_dense_convert): rank + 2
		   * halves or more a row, a multiple of 8 for 16-byte loads; the arithmetic stays FP32 */
} starfa_sgd_step;

int starfa_task_sgd(const starfa_tiled *S, int64_t i, int64_t j, starfa_dense *U, starfa_dense *V, starfa_dense *Gu,
		    starfa_dense *Gv, const starfa_sgd_step *step, starfa_sums *sse, int64_t slot,
		    const starfa_task_attr *attr);
/* The variant the "sgd" performance model keeps a one-tile pass of these settings under (for
 * starfa_tiling_options' model_variant): its rank, adagrad and half. A GPU's pass is far from
 * proportional to its cost (entries x rank) across ranks, so each rank has samples of its own; a span
 * of several nonempty tiles (starfa_task_sgd_span) is kept apart as well, as a GPU updates it faster
 * than one tile of the same cost. */
uint32_t starfa_sgd_model_variant(const starfa_sgd_step *step);
/* The variant of a span of several tiles of these settings (starfa_task_sgd_span with ntiles > 1). */
uint32_t starfa_sgd_span_model_variant(const starfa_sgd_step *step);
/* The same pass over the ntiles tiles (i, j) .. (i, j + ntiles - 1) of one row band as one task (tile
 * after tile on a CPU; on a GPU, up to 32 tiles a launch (224 beyond) as one wide tile: its updaters dealt to the
 * tiles in proportion to their chunks of 256 entries, so they spread over every tile's item rows), reading and writing U's
 * block i and V's blocks j .. j + ntiles - 1; each tile keeps its own visiting order, and sse's slot gets
 * the sum over the tiles. A GPU updates a wide tile faster than its parts one at a time: the same
 * updaters on fewer item rows collide more (bench/SGD.md). starfa_task_sgd is the span of one tile. */
int starfa_task_sgd_span(const starfa_tiled *S, int64_t i, int64_t j, int64_t ntiles, starfa_dense *U, starfa_dense *V,
			 starfa_dense *Gu, starfa_dense *Gv, const starfa_sgd_step *step, starfa_sums *sse, int64_t slot,
			 const starfa_task_attr *attr);
/* The same pass over the n x n tiles (i .. i + n - 1, j .. j + n - 1) as one task: n diagonals of n
 * tiles, tile (i + c, j + (c + t) mod n) in diagonal t, one tile after the other on a CPU and on a GPU up
 * to 224 tiles a launch at once (32 where n x n <= 32; as a span's, Hogwild between tiles that share a
 * band, as the GPUs alone run the region as one tile), reading and
 * writing the blocks of U and V of its nonempty tiles' bands (of U's i .. i + n - 1 and V's j .. j + n -
 * 1); sse's slot gets the sum over the tiles (0 when every tile is empty). For a
 * GPU that takes over a block of thin tiles that the cores would otherwise run tile by tile (SGD's split
 * when the cores fall behind: graphs/sgd.c). Its samples are a model variant of their own. */
int starfa_task_sgd_block(const starfa_tiled *S, int64_t i, int64_t j, int64_t n, starfa_dense *U, starfa_dense *V,
			  starfa_dense *Gu, starfa_dense *Gv, const starfa_sgd_step *step, starfa_sums *sse,
			  int64_t slot, const starfa_task_attr *attr);

/* CCD++ (Yu, Hsieh, Si, Dhillon, ICDM 2012) in the fused form of cuMF's cumf_ccd: one pass over tile
 * (i, j) of `side`'s grid of the residual R (S's values on that side), x the side whose rank-one feature
 * is updated (S's rows for STARFA_ROWS, its columns for STARFA_COLS: vectors blocked along the grid's
 * rows, block i) and y the other (blocked along its columns, block j). For each entry (r, c),
 *   v = R_rc - sub_x[r] sub_y[c] + add_x[r] add_y[c]
 * (the previous feature taken out, the current one put back: either pair may be NULL); with write,
 * R_rc = v; with y (then acc, two columns blocked like x), the update's sums per row,
 *   acc[r][0] (+)= sum over the row of v y[c],  acc[r][1] (+)= sum of y[c]^2,
 * accumulate 0 overwriting them (an empty tile then zeroes them). Vectors: one column. */
typedef struct starfa_ccd_terms {
	const starfa_dense *sub_x, *sub_y, *add_x, *add_y, *y;
} starfa_ccd_terms;
int starfa_task_ccd_pass(const starfa_tiled *S, starfa_side side, int64_t i, int64_t j, starfa_sparse_values *R,
			 int write, const starfa_ccd_terms *terms, starfa_dense *acc, int accumulate,
			 const starfa_task_attr *attr);
/* The rank-one update of block `block` of x: x[r] = acc[r][0] / (lambda counts[r] + acc[r][1]) (the
 * weighted-lambda regularization, counts the entries of the row; 0 where that is 0), max(0, .) with
 * nonneg. */
int starfa_task_ccd_solve(starfa_dense *x, int64_t block, const starfa_dense *acc, const starfa_dense *counts,
			  float lambda, int nonneg, const starfa_task_attr *attr);
/* Band `band` of side's grid in one task: the pass of starfa_task_ccd_pass over each of the band's
 * tiles in order (the first overwriting acc, the others adding to it) and, with x (then counts too), the
 * update of starfa_task_ccd_solve on block `band` of x: the same kernels in the same order as those
 * tasks (on the CPU their bits; on a CUDA worker, whose passes add a long row's segments by atomics, the
 * same to rounding), for one task's overhead instead of one a tile plus one. x may be terms' sub_x or add_x (the
 * passes read it before the update writes it). The band task runs where the band's tiles would: the
 * band's placement, or attr's worker or kind. */
int starfa_task_ccd_band(const starfa_tiled *S, starfa_side side, int64_t band, starfa_sparse_values *R, int write,
			 const starfa_ccd_terms *terms, starfa_dense *acc, starfa_dense *x, const starfa_dense *counts,
			 float lambda, int nonneg, const starfa_task_attr *attr);

/* One feature's CCD++ update as a graph (graphs/ccd.c): on both grids R^ = R - prev_w prev_h^T (when
 * prev_w) + w h^T, then `inner` times h's update over the column side and w's over the row side (only
 * the sides asked for: a bias is a feature with a fixed side). w, acc_w, count_w are blocked along S's
 * rows, h, held, acc_h, count_h along its columns (held and the accumulators are scratch; counts: the
 * entries of each row and column; the vectors one column, the accumulators two). S needs its transposed
 * grid. */
typedef struct starfa_ccd_feature {
	starfa_sparse_values *R, *RT; /* the residual on the row side and on the column side */
	const starfa_dense *prev_w, *prev_h;
	starfa_dense *w, *h, *held, *acc_w, *acc_h;
	const starfa_dense *count_w, *count_h;
	float lambda;
	int nonneg, update_w, update_h;
	int64_t inner;
	/* NULL, or where the feature's regularization goes once its updates are done: sum count_w w^2 (when
	 * update_w) + sum count_h h^2 (when update_h) of the new w and h, in double, written into slot
	 * reg_slot of reg (added to it with reg_add), where the feature ran: an objective without bringing
	 * the features home. */
	starfa_sums *reg;
	int64_t reg_slot;
	int reg_add;
} starfa_ccd_feature;
int starfa_insert_ccd_feature(const starfa_tiled *S, const starfa_ccd_feature *f);
/* The whole of starfa_insert_ccd_feature's graph in one task, for a matrix of one band a side (S's grid
 * and its transposed grid one tile each, with entries): the held copy of h, both sides' passes and
 * updates and the inner iterations, the same passes and updates in the same order as that graph's
 * band tasks (on the CPU their bits; on a CUDA worker the same to rounding, with one opening kernel and
 * no memsets), for one task's overhead instead of 3 + 2 (inner - 1) (and, with reg, one a block of each
 * updated side). starfa_insert_ccd_feature makes this task where it applies. It runs where the band
 * runs (its placement, or attr's worker or kind). */
int starfa_task_ccd_feature(const starfa_tiled *S, const starfa_ccd_feature *f, const starfa_task_attr *attr);
/* Writes (add: adds to) slot `slot` of sums sum counts[r] x[r]^2 over block `block` of x (one column,
 * counts blocked alike), in double: a block's share of CCD++'s regularization. */
int starfa_task_ccd_regularizer(const starfa_dense *x, int64_t block, const starfa_dense *counts, starfa_sums *sums,
				int64_t slot, int add, const starfa_task_attr *attr);
/* R = R - w h^T on both grids: the last feature taken out again. */
int starfa_insert_ccd_close(const starfa_tiled *S, starfa_sparse_values *R, starfa_sparse_values *RT,
			    const starfa_dense *w, const starfa_dense *h);

/* ------------------------------------------------------------------ whole-matrix operations
 * Short loops over the per-tile tasks (graphs/ops.c): one task per non-empty tile (or block), at the
 * default priority. */

/* starfa_task_sddmm on every tile of P's grid, alpha 1, beta 0 (starfa_insert_sddmm_ab: any). */
int starfa_insert_sddmm(const starfa_tiled *S, const starfa_dense *A, const starfa_dense *B,
			starfa_sddmm_mode mode, starfa_sparse_values *P);
int starfa_insert_sddmm_ab(const starfa_tiled *S, const starfa_dense *A, const starfa_dense *B, starfa_sddmm_mode mode,
			   float alpha, float beta, starfa_sparse_values *P);

/* Sparse times dense, per row band:
 *   side STARFA_ROWS: Y = S · X    (X blocked along S's columns, Y along S's rows)
 *   side STARFA_COLS: Y = Sᵀ · X   (X blocked along S's rows, Y along S's columns;
 *                                   needs the transposed grid, starfa_tiling_options.transposed)
 * with S's values (starfa_insert_spmm_values: V's, on the side's grid). X and Y have the same number of
 * columns K; Y is overwritten. The tasks of one output block accumulate into it in tile order, so the
 * result does not depend on the schedule. */
int starfa_insert_spmm(const starfa_tiled *S, starfa_side side, const starfa_dense *X, starfa_dense *Y);
int starfa_insert_spmm_values(const starfa_tiled *S, starfa_side side, const starfa_sparse_values *V,
			      const starfa_dense *X, starfa_dense *Y);
/* The same for one output block: the tasks of band `band` of the side's grid (a mini-batch of rows). */
int starfa_insert_spmm_band(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_sparse_values *V,
			    const starfa_dense *X, starfa_dense *Y);
/* starfa_task_sddmm_spmm over every tile (of one band), each output block's tiles in order as SpMM's. */
int starfa_insert_sddmm_spmm(const starfa_tiled *S, starfa_side side, const starfa_dense *A, const starfa_dense *B,
			     starfa_fused_mode mode, float eps, starfa_dense *Y);
int starfa_insert_sddmm_spmm_band(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *A,
				  const starfa_dense *B, starfa_fused_mode mode, float eps, const starfa_dense *active,
				  starfa_dense *Y);
/* Every tile of src into dst (the other side). */
int starfa_insert_values_transpose(const starfa_sparse_values *src, starfa_sparse_values *dst);
/* starfa_task_values_map on every tile. */
int starfa_insert_values_map(starfa_sparse_values *Y, starfa_values_op op, float a, float b,
			     const starfa_sparse_values *X);
/* starfa_task_dense_map on every block. */
int starfa_insert_dense_map(starfa_dense *Y, starfa_dense_op op, float a, float b, const starfa_dense *X,
			    const starfa_vector *v);
/* Column sums of the whole matrix into v (blocks added in order). */
int starfa_insert_dense_colsum(const starfa_dense *X, starfa_vector *v);
int starfa_insert_dense_uniform(starfa_dense *Y, float lo, float hi, uint64_t seed);
int starfa_insert_dense_convert(starfa_dense *Y, starfa_convert dir, const starfa_dense *X);
/* Row sums of every block into R. */
int starfa_insert_dense_rowsum(const starfa_dense *X, starfa_dense *R);
/* starfa_task_top_k on every tile (i, j), into L[j] (one list matrix per column band of S). */
int starfa_insert_top_k(const starfa_tiled *S, const starfa_dense *A, const starfa_dense *B, int64_t k,
			const starfa_dense *active, starfa_dense *const *L);
/* starfa_task_dense_cg on every block. */
int starfa_insert_dense_cg(starfa_dense *X, starfa_dense *R, starfa_dense *P, const starfa_dense *Q, starfa_dense *rr,
			   const starfa_dense *lam, int start);
/* A reduction of every tile (block), one slot each, and its total (this waits for the tasks). */
int starfa_reduce_values(const starfa_sparse_values *Y, starfa_reduce_op op, float a, const starfa_sparse_values *X,
			 double *total);
/* The squared error of the model A·Bᵀ + shift at S's entries, one starfa_task_sqerr_band a band of side's
 * grid, added up in band order (this waits for the tasks). */
int starfa_reduce_sqerr(const starfa_tiled *S, starfa_side side, const starfa_dense *A, const starfa_dense *B, float shift,
			double *total);
int starfa_reduce_dense(const starfa_dense *D, starfa_reduce_op op, double *total);

/* The leading k singular triplets of S, S ≈ U diag(s) Vᵀ, by randomized subspace iteration (Halko,
 * Martinsson & Tropp 2011; scikit-learn's randomized_svd) with k + 10 vectors and power_iters passes of
 * S·Sᵀ (4 to 7 suit most matrices): the products are SpMM task graphs on S's two grids (S needs its
 * transposed grid), the thin QRs and the small SVD run on the host in double. U: rows x k, V: columns x k
 * (row-major), s descending. k at most the smaller dimension; the Gaussian start comes from seed. */
int starfa_svds(const starfa_tiled *S, int64_t k, int64_t power_iters, uint64_t seed, float *U, float *s, float *V);

/* The names of starfa's StarPU performance models (NULL-terminated), for
 * `starpu_perfmodel_display -s NAME` and `starpu_perfmodel_plot -s NAME`. */
const char *const *starfa_perfmodel_symbols(void);

/* The folder the running StarPU reads and writes those models in (under its sampling folder:
 * STARPU_PERF_MODEL_DIR, else .starpu/sampling in XDG_CACHE_HOME, STARPU_HOME or HOME, in that order
 * of precedence), into buf. STARFA_EINVAL before starfa_init or where buf is too small. */
int starfa_perfmodel_dir(char *buf, size_t size);

/* Waits for every submitted task. */
int starfa_wait(void);

/* The task log: while it is on, every task starfa inserts leaves a record of where and when it ran and
 * which data it read and wrote (identities as starfa_dense_block_id gives them), for checking a graph's
 * concurrency or drawing its schedule. starfa_task_log_begin clears and starts it; starfa_task_log_end
 * waits for every task, stops it and hands over the records in order of completion (free them with
 * free()). */
#define STARFA_TASK_LOG_BUFFERS 8
typedef struct starfa_task_record {
	const char *codelet;     /* the codelet's name without "starfa_" (static storage) */
	int worker;              /* StarPU's worker number + 1, as starfa_task_attr.worker */
	double start_us, end_us; /* StarPU's clock, microseconds */
	int nbuffers;            /* the first STARFA_TASK_LOG_BUFFERS are recorded */
	const void *data[STARFA_TASK_LOG_BUFFERS];
	int writes[STARFA_TASK_LOG_BUFFERS]; /* 1 when the task writes data[b] (W, RW or a reduction) */
	int nreads, nwrites;     /* of all nbuffers (a band task's tiles past the recorded ones too) */
	uint64_t cost;           /* the task's cost as its performance model counts it (an SGD pass: entries x
				  * rank; StarPU's "size"), 0 for a codelet without one */
} starfa_task_record;

int starfa_task_log_begin(void);
int starfa_task_log_end(starfa_task_record **records, int64_t *n);
/* Writes records as CSV: a header, then per task its codelet, worker number and StarPU's name for it,
 * start and end in seconds from the first start, how many data it read and wrote, and its cost (the
 * format scripts/gantt.py draws). Returns 0, or STARFA_EIO when f reports a write error. */
int starfa_task_log_write(FILE *f, const starfa_task_record *records, int64_t n);

/* Per-worker-kind accounting of the tasks run since the last reset (needs StarPU's
 * profiling, which starfa_init turns on). */
typedef struct starfa_worker_stats {
	int64_t tasks[STARFA_WORKER_KINDS];
	double seconds[STARFA_WORKER_KINDS]; /* sum of task execution times */
	double flops[STARFA_WORKER_KINDS];
} starfa_worker_stats;

void starfa_stats_reset(void);
void starfa_stats_get(starfa_worker_stats *out);

/* The same accounting per worker, with where each worker's time went, and the data moved over each
 * link between memory nodes, since the last starfa_stats_reset: what tells a scaling run's idle
 * workers and transfers apart. (Reading StarPU's counters resets them, so STARPU_WORKER_STATS and
 * STARPU_BUS_STATS at exit cover only what starfa has not read.) */
typedef struct starfa_worker_profile {
	char name[64]; /* StarPU's worker name, e.g. "CPU 0" or "CUDA 0.0 (NVIDIA H100 80GB HBM3 ...)" */
	starfa_worker_kind kind;
	int64_t tasks;
	double seconds;   /* wall time accounted since the reset */
	double executing; /* of which running tasks */
	double sleeping;  /* of which blocked with nothing to run; the rest went to scheduling and
			   * waiting for data */
	double flops;
} starfa_worker_profile;

typedef struct starfa_link_profile {
	char src[32], dst[32]; /* memory nodes, e.g. "RAM 0" and "CUDA 0" */
	int64_t bytes, transfers;
} starfa_link_profile;

typedef struct starfa_profile {
	int nworkers, nlinks;
	starfa_worker_profile *workers; /* in StarPU's worker order */
	starfa_link_profile *links;     /* the links that carried data */
	/* The process's CPU time over the same span, every thread: beside the workers' tasks it holds the
	 * workers that poll (a GPU's, and a CPU worker StarPU keeps awake), scheduling, and the calling
	 * thread's own work and waits. */
	double cpu_seconds;
} starfa_profile;

/* Fills *out (starfa_profile_clear frees its arrays); STARFA_EINVAL before starfa_init. */
int starfa_profile_get(starfa_profile *out);
/* Adds p into *sum (start from a zeroed one), e.g. over iterations: workers by position, links by
 * their two ends. */
int starfa_profile_add(starfa_profile *sum, const starfa_profile *p);
void starfa_profile_clear(starfa_profile *p);

/* ------------------------------------------------------------------ reference checks */

typedef struct starfa_check_report {
	int64_t checked, failed;
	double max_error;     /* largest |got - ref| / bound over the elements (<= 1 passes) */
	int64_t worst_index;  /* element with that error (-1 when none) */
} starfa_check_report;

/* Compares P (S's nnz values, in S's CSR order) with a plain sequential SDDMM in
 * double precision. A is S->nrows x k, B is S->ncols x k, both row-major. Element p
 * (row r, column c) passes when
 *   |P[p] - ref[p]| <= (k + 2) * FLT_EPSILON * sum_d |s * A[r,d] * B[c,d]|
 * (s = S's value in scaled mode, else 1): the float32 rounding bound of a k-term dot
 * product. NaN never passes. Returns 0, or STARFA_ECHECK naming the worst element. */
int starfa_check_sddmm(const starfa_csr *S, const float *A, const float *B, int64_t k, starfa_sddmm_mode mode,
		       const float *P, starfa_check_report *report);

/* Compares Y (S->nrows x k, row-major) with a plain sequential S·X in double precision; X is
 * S->ncols x k, row-major. Element (r, d) passes when
 *   |Y[r,d] - ref[r,d]| <= (nnz_r + 2) * FLT_EPSILON * sum_p |S[r,c_p] * X[c_p,d]|
 * (nnz_r: the nonzeros of row r): the float32 rounding bound of the row's sum, however it is
 * split among tiles. An empty row must be exactly zero; NaN never passes. For Sᵀ·X, pass the
 * transpose (starfa_csr_transpose). Returns 0, or STARFA_ECHECK naming the worst element. */
int starfa_check_spmm(const starfa_csr *S, const float *X, int64_t k, const float *Y, starfa_check_report *report);

/* ------------------------------------------------------------------ ALS operations
 * The building blocks of ALS and implicit ALS (graphs/als.c), for algorithms of your own. One side of a
 * tiled matrix S is solved at a time: side STARFA_ROWS finds a k-vector per row of S from column
 * factors theta (blocked along S's columns), side STARFA_COLS one per column from row factors (through
 * the transposed grid, starfa_tiling_options.transposed). Band b of a side is S's row band b (rows) or
 * column band b (columns). Each insert function submits the tasks of one band, so that a graph can
 * interleave the bands that share a slot (starfa_systems). The operations use the k columns
 * [col0, col0 + k) of the dense factor blocks, so factors can carry extra columns (biases, constants). */

typedef enum starfa_feedback {
	STARFA_EXPLICIT = 0, /* ratings r: squared error on the observed entries */
	STARFA_IMPLICIT = 1, /* Hu, Koren & Volinsky: preference 1 with confidence 1 + alpha * r where observed,
			      * preference 0 with confidence 1 everywhere else */
} starfa_feedback;

typedef enum starfa_solver {
	STARFA_SOLVER_CHOLESKY = 0, /* exact, LAPACK potrf/potrs per row */
	STARFA_SOLVER_CG = 1,       /* a fixed number of conjugate gradient steps from the current factors */
} starfa_solver;

/* Per-row k x k systems A_u and right-hand sides b_u of one side of S, held per band in `slots` buffers
 * reused by bands b, b + slots, ... (0: one per band), so memory stays at slots bands of
 * rows x k x k values. fp16: A_u stored in FP16 (half the memory and solve bandwidth). Where a band's
 * systems would exceed 2^32 values, the buffers are not made: the functions that store or read systems
 * (hermitian, bias, solve, starfa_systems_read) refuse those bands, and the fused rowsolve, which
 * keeps no systems, runs them. */
typedef struct starfa_systems starfa_systems;

int starfa_systems_create(const starfa_tiled *S, starfa_side side, int64_t k, int fp16, int64_t slots,
			  starfa_systems **out);
/* Unregisters the handles (waiting for pending tasks) and frees everything. */
void starfa_systems_free(starfa_systems *sys);
int64_t starfa_systems_bands(const starfa_systems *sys);
/* Bytes of the slots, wherever StarPU holds them. */
size_t starfa_systems_bytes(const starfa_systems *sys);
/* Copies band's systems (rows x k x k, as floats, as stored: see starfa_insert_hermitian) and
 * right-hand sides (rows x k) to main memory (waits for their tasks); either may be NULL. */
int starfa_systems_read(starfa_systems *sys, int64_t band, float *A, float *b);

/* What the solves of a sweep met: rows whose factors came out non-finite or whose system was not
 * positive definite (their factors were kept), and among them how many had a non-finite system or
 * right-hand side (so the codelet that produced it can be named). */
typedef struct starfa_solve_report {
	int64_t bad_rows, nonfinite_systems, nonfinite_rhs, not_spd;
	int64_t first_bad_row; /* in the side's numbering; -1 when none */
} starfa_solve_report;

/* Waits for the latest solve of every band and sums what they met. */
int starfa_systems_report(starfa_systems *sys, starfa_solve_report *out);

/* A k x k Gram matrix (implicit ALS's YᵀY), one handle. */
typedef struct starfa_gram starfa_gram;

int starfa_gram_create(int64_t k, starfa_gram **out);
void starfa_gram_free(starfa_gram *g);
/* Copies it to out (k x k, row-major), waiting for its tasks. */
int starfa_gram_read(starfa_gram *g, float *out);

/* Row information the hermitian and solve tasks read: a dense matrix of 2 columns aligned with the
 * side (starfa_dense_create(S, side, info, 2, ...)), column 0 lambda_u, added to the diagonal of row u's
 * system when it is solved, column 1 s_u, the scale of its FP16 storage: choose s_u >= the row's sum of
 * weights, so that entries stay within FP16's range. */

/* For every row u of the band, over the band's tiles (the first overwrites, the others add to it):
 *   A_u = (1 / s_u) sum_{v in row u} w_uv theta_v theta_vᵀ
 * with w_uv = 1 (explicit) or alpha * r_uv (implicit: confidence minus one), s_u = 1 unless the
 * systems are FP16. Stored full symmetric, row-major, one k x k matrix per row. */
int starfa_insert_hermitian(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *theta,
			    int64_t col0, starfa_feedback feedback, float alpha, const starfa_dense *info,
			    starfa_systems *sys);
/* The same for tile j of the band alone: accumulate 0 writes the band's systems (an empty tile zeroes
 * them), 1 adds to them. */
int starfa_task_hermitian(const starfa_tiled *S, starfa_side side, int64_t band, int64_t j, const starfa_dense *theta,
			  int64_t col0, starfa_feedback feedback, float alpha, const starfa_dense *info,
			  starfa_systems *sys, int accumulate, const starfa_task_attr *attr);

/* For every row u of the band: b_u = sum_{v in row u} t_uv theta_v, with
 *   t_uv = r_uv - mu - theta_v[offset_col]   explicit (offset_col -1: no such term): what the row's
 *                                            unknowns explain once the mean and the other side's bias
 *                                            are taken out;
 *   t_uv = 1 + alpha * r_uv                   implicit (confidence times preference 1). */
int starfa_insert_bias(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *theta,
		       int64_t col0, int64_t offset_col, float mu, starfa_feedback feedback, float alpha,
		       starfa_systems *sys);
/* The same for tile j of the band alone (accumulate as starfa_task_hermitian). */
int starfa_task_bias(const starfa_tiled *S, starfa_side side, int64_t band, int64_t j, const starfa_dense *theta,
		     int64_t col0, int64_t offset_col, float mu, starfa_feedback feedback, float alpha,
		     starfa_systems *sys, int accumulate, const starfa_task_attr *attr);

/* For every row u of the band: x_u = X[u, col0 .. col0 + k) solves
 *   (s_u A_u + lambda_u I + G) x_u = b_u
 * (G: NULL for none). CHOLESKY solves exactly; CG takes cg_steps steps from x_u's current value. */
int starfa_insert_solve(starfa_systems *sys, int64_t band, const starfa_dense *info, const starfa_gram *G,
			starfa_solver solver, int cg_steps, starfa_dense *X, int64_t col0);
int starfa_task_solve(starfa_systems *sys, int64_t band, const starfa_dense *info, const starfa_gram *G,
		      starfa_solver solver, int cg_steps, starfa_dense *X, int64_t col0, const starfa_task_attr *attr);

/* hermitian, bias and solve fused: for every row u of the band, x_u = X[u, col0 .. col0 + k) solves
 *   (sum_{v in row u} w_uv theta_v theta_vᵀ + lambda_u I + G) x_u = sum_{v in row u} t_uv theta_v
 * (w_uv and t_uv as above) in one task over all the band's tiles, each system built in cache and solved
 * at once (CG matrix-free where that costs less): nothing but the factors is written. sys (FP32) gives
 * the band's status words (starfa_systems_report); its slots are never used, so they take no memory. */
int starfa_insert_rowsolve(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *theta,
			   int64_t col0, int64_t offset_col, float mu, starfa_feedback feedback, float alpha,
			   const starfa_dense *info, const starfa_gram *G, starfa_solver solver, int cg_steps,
			   starfa_dense *X, int64_t x_col0, starfa_systems *sys);
int starfa_task_rowsolve(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *theta,
			 int64_t col0, int64_t offset_col, float mu, starfa_feedback feedback, float alpha,
			 const starfa_dense *info, const starfa_gram *G, starfa_solver solver, int cg_steps,
			 starfa_dense *X, int64_t x_col0, starfa_systems *sys, const starfa_task_attr *attr);

/* The cost of one row's solve in rowsolve's cost model (its perfmodel's size), in units of one entry's
 * share, with or without a G: for starfa_tiling_options.row_cost / col_cost, so that the bands of a side
 * cost alike however their entries are spread over rows (k^3 / 3 against k^2 per entry for Cholesky). */
double starfa_rowsolve_row_cost(int64_t k, starfa_solver solver, int cg_steps, int with_gram);
/* The perfmodel size (cost) of rowsolve over `rows` rows holding nnz entries: what a sweep costs in
 * starfa_plan_tiling's terms. */
double starfa_rowsolve_cost(int64_t nnz, int64_t rows, int64_t k, starfa_solver solver, int cg_steps, int with_gram);
/* The most unknowns a row (k) that the CUDA implementations of rowsolve, hermitian and solve take; 0 in a
 * build without CUDA. Larger systems run on CPU workers only. */
int64_t starfa_als_cuda_max_k(void);

/* G = sum over every row r of theta: theta[r, col0 .. col0 + k) as a column times its transpose. One task
 * per block, adding into G in block order. */
int starfa_insert_gram(const starfa_dense *theta, int64_t col0, int64_t k, starfa_gram *G);
/* One block's share: G = (accumulate ? G : 0) + the block's rows' outer products. */
int starfa_task_gram(const starfa_dense *theta, int64_t block, int64_t col0, int64_t k, int accumulate,
		     starfa_gram *G, const starfa_task_attr *attr);

/* ------------------------------------------------------------------ ALS training and models
 * Explicit ALS models r_uv ~ mu + b_u + c_v + x_u·y_v (global mean, user and item biases, factors);
 * implicit ALS models the preference p_uv ~ x_u·y_v. Users are the rows of the training matrix, items
 * its columns. */

/* What a model's factors mean, whichever algorithm trained them: scoring, recommendations and
 * evaluation follow from the kind. */
typedef enum starfa_model_kind {
	STARFA_MODEL_EXPLICIT = 0, /* ratings: mu + b_u + c_v + x_u·y_v (biases optional) */
	STARFA_MODEL_IMPLICIT = 1, /* implicit feedback: preference x_u·y_v */
	STARFA_MODEL_NONNEG = 2,   /* non-negative factors: S ~ W·Hᵀ (KL-NMF, GaP) */
	STARFA_MODEL_TOPIC = 3,    /* topic model: users are documents (mixtures), items are words; factors are
	                            * per-document topic weights and per-topic word weights (item_factors is
	                            * items x rank: column t is topic t over the words) */
} starfa_model_kind;
#define STARFA_MODEL_KINDS 4
/* "explicit", "implicit", "nonneg", "topic" ("unknown" otherwise). */
const char *starfa_model_kind_name(starfa_model_kind kind);

typedef enum starfa_als_algo { STARFA_ALGO_ALS = 0, STARFA_ALGO_IALS = 1 } starfa_als_algo;

typedef struct starfa_als_options {
	starfa_als_algo algo;
	int64_t rank;          /* latent factors f */
	double lambda;         /* regularization */
	int weighted_lambda;   /* 1: lambda * (ratings of the row) (ALS-WR), 0: lambda */
	int64_t iters;         /* sweeps over users then items */
	starfa_solver solver;
	int cg_steps;          /* CG steps per solve */
	int fp16;              /* systems stored in FP16 */
	double alpha;          /* implicit: confidence 1 + alpha * r */
	int biases;            /* explicit: model user and item biases */
	uint64_t seed;         /* initial factors */
	starfa_tiling_options tiling; /* tile grid (0: one band per worker); the transposed grid is always built;
				       * row_cost and col_cost 0: the solver's (starfa_rowsolve_row_cost) */
	int64_t slots;         /* bands of systems held at once per side (0: two per worker) */
	int64_t eval_k;        /* implicit: the k of precision@k, MAP@k and NDCG@k on the test set */
	int64_t eval_every;    /* the test metrics after every Nth iteration (and the first and the last) */
	int stored_systems;    /* 1: every band's systems built in memory by hermitian and bias tasks, then
				* solved (fp16 implies it); 0: built and solved row by row in one rowsolve task
				* per band, which writes no systems (faster on CPUs: bench/ALS.md) */
} starfa_als_options;

/* Defaults that train a good model of MovieLens-sized ratings (explicit) or interactions (implicit). */
void starfa_als_options_default(starfa_als_options *opts, starfa_als_algo algo);

/* Quality of a model on test entries. */
typedef struct starfa_metrics {
	int64_t entries;  /* test entries scored */
	int64_t cold;     /* of those, with a user or item the model has no training data for */
	double rmse;      /* explicit models (with the mean and biases) and non-negative ones (W·Hᵀ alone);
			   * NAN for implicit ones */
	/* Implicit models: every test user with training data gets the model's top k items (training items
	 * left out), compared with its test items (as PyPI implicit's ranking_metrics_at_k does). NAN for
	 * the other kinds. */
	int64_t k, users;
	double precision, map, ndcg;
} starfa_metrics;

/* What the per-iteration callback of a training run gets (any algorithm). */
#define STARFA_MAX_COLUMNS 8
typedef struct starfa_train_progress {
	int64_t iteration;      /* 1-based */
	double seconds;         /* of this iteration, metrics excluded */
	/* The algorithm's own quantities, as the progress line and the CSV log print them: names such as
	 * "train_rmse", "loss", "test_rmse", "p@10", printed with `digits` decimals; NAN when not known. */
	int ncolumns;
	const char *columns[STARFA_MAX_COLUMNS];
	int digits[STARFA_MAX_COLUMNS];
	double values[STARFA_MAX_COLUMNS];
	/* The same for the ALS family, by name. */
	double train_rmse;      /* explicit: on the training entries; NAN otherwise */
	double train_loss;      /* the objective divided by the training entries (or its terms) */
	int has_test;
	starfa_metrics test;
	int converged;          /* the algorithm's stopping rule is met: training ends after this iteration */
	starfa_worker_stats stats; /* tasks, kernel seconds and flops per worker kind in this iteration */
	const starfa_profile *profile; /* the same per worker, and the transfers, over the iteration's tasks
					* (valid during the callback) */
	int64_t row_tiles, col_tiles;  /* the tile grid training runs on */
	const starfa_split *split;     /* the placement of the row-side and column-side sweeps (two), or NULL */
	int64_t systems_bytes;         /* memory of the ALS systems of both sides (0 for other algorithms) */
	double eval_seconds;           /* of the metrics after this iteration (the objective in the graph, the
					* test metrics), which `seconds` leaves out */
} starfa_train_progress;

typedef starfa_train_progress starfa_als_progress;

/* Returns 0 to go on, anything else to stop after this iteration. */
typedef int (*starfa_train_callback)(const starfa_train_progress *progress, void *user_data);
typedef starfa_train_callback starfa_als_callback;

typedef struct starfa_model {
	starfa_model_kind kind;
	char algorithm[16];                 /* the algorithm that trained it, NUL-terminated, e.g. "als", "ials" */
	int64_t nusers, nitems, rank;
	float *user_factors, *item_factors; /* nusers x rank and nitems x rank, row-major */
	float *user_bias, *item_bias;       /* NULL when the model has no biases (explicit models only) */
	double global_mean;                 /* explicit models; 0 for the other kinds */
	starfa_idmap *user_ids, *item_ids;  /* original ids (indices "1", "2", ... for Matrix Market input) */
	starfa_csr *seen;                   /* the training entries (users x items), or NULL */
	double lambda, alpha;               /* the training settings, for the record */
} starfa_model;

/* Trains on `train` (starfa_init first). `test` (may be NULL) is scored after every iteration: its
 * entries are matched to the training users and items by id when both matrices have ids, else by
 * index; entries of unknown users or items count as cold. A non-finite value in any factor stops
 * training with STARFA_ERUNTIME naming the iteration, the sweep and the codelet that produced it. The
 * model keeps the training entries (seen) for starfa_recommend. */
int starfa_als_train(const starfa_coo *train, const starfa_coo *test, const starfa_als_options *opts,
		     starfa_als_callback callback, void *user_data, starfa_model **out);

void starfa_model_free(starfa_model *m);

/* The model's score of (user, item): mu + b_u + c_v + x_u·y_v for explicit models, x_u·y_v for the other
 * kinds. -1 for a user or item it does not know: an explicit model then predicts the mean plus the
 * biases it has, the others 0; never NaN. */
float starfa_model_predict(const starfa_model *m, int64_t user, int64_t item);

/* The model file (little-endian, described in README.md and model/model.c): magic "STARFAMD", version
 * 2, then tagged sections (the kind, the algorithm, dimensions and settings; the original ids, factors,
 * biases, seen entries) and a CRC-32 of everything before it. Written to a temporary file in the same
 * folder, then renamed over path. */
int starfa_model_save(const starfa_model *m, const char *path);
/* Reads version 2 and version 1 files (which hold ALS and implicit ALS models) and checks every field
 * (sections, sizes, ids, finite factors, seen entries, checksum): a truncated or corrupt file gives
 * STARFA_EFORMAT naming the file and what is wrong, and so does a section this starfa does not know
 * unless its tag begins with a lowercase letter (optional: skipped). */
int starfa_model_load(const char *path, starfa_model **out);

/* What starfa_model_export writes. */
typedef enum starfa_export_what {
	STARFA_EXPORT_USER_FACTORS = 0, /* one row per user: its id, then its rank factors */
	STARFA_EXPORT_ITEM_FACTORS = 1, /* one row per item: its id, then its rank factors */
	STARFA_EXPORT_USER_BIAS = 2,    /* one row per user: its id, then its bias */
	STARFA_EXPORT_ITEM_BIAS = 3,    /* one row per item: its id, then its bias */
	STARFA_EXPORT_TOPIC_WORD = 4,   /* topic and non-negative models: a line per topic, its probability of every
					 * word (starfa_topic_word), no ids */
	STARFA_EXPORT_DOC_TOPIC = 5,    /* topic models: a line per training document, its topic proportions θ_d,
					 * no ids */
} starfa_export_what;

/* Parses "user-factors", "item-factors", "user-bias", "item-bias", "topic-word" or "doc-topic"; returns -1
 * for anything else. */
int starfa_export_parse(const char *name, starfa_export_what *out);
/* The name starfa_export_parse reads ("unknown" for anything else). */
const char *starfa_export_name(starfa_export_what what);

/* Writes one of the model's arrays as tab-separated text: a line per user (or item), its original id
 * (the index from 1 when the model has no ids) and then its values, each as "%.9g" (a float's exact
 * value when read back). Written to a temporary file in the same folder, then renamed over path: a
 * failure leaves no file and whatever was at path. STARFA_EINVAL for biases of a model without them,
 * and for a model with a non-finite value or an id holding a tab or a line break. */
int starfa_model_export(const starfa_model *m, starfa_export_what what, const char *path);

typedef struct starfa_recommendation {
	int64_t item;
	float score;
} starfa_recommendation;

/* The k best items for `user` by starfa_model_predict's score (-1: a user the model does not know,
 * ranked by item bias for explicit models and by popularity in seen for the other kinds), best first,
 * leaving out the items of the user's row of `exclude` (users x items, e.g. m->seen; NULL: none). For
 * user -1, `exclude` may instead have one row (1 x items), whose items are left out; a users x items
 * one leaves out nothing then. *count gets how many were written (fewer than k when fewer items are
 * left). */
int starfa_recommend(const starfa_model *m, int64_t user, int64_t k, const starfa_csr *exclude,
		     starfa_recommendation *out, int64_t *count);

/* Scores the model on test entries, matched as in starfa_als_train: RMSE for explicit and non-negative
 * models, ranking metrics for implicit ones, whose cut-off is k (the training items in m->seen are left
 * out of the rankings). Topic models give STARFA_EINVAL: they are evaluated by perplexity, which this
 * version does not compute yet. */
int starfa_eval(const starfa_model *m, const starfa_coo *test, int64_t k, starfa_metrics *out);

/* ------------------------------------------------------------------ topic models
 * A count model (kind STARFA_MODEL_NONNEG, `starfa train --algo gap` or `klnmf`) keeps the documents'
 * scores X (user_factors) and the topics' word weights Λ (item_factors, words x rank), GaP's prior
 * shape in `alpha` and rate 1/scale in `lambda` (KL-NMF: 1 and 0); the calls below take it too.
 * A topic model (kind STARFA_MODEL_TOPIC, `starfa train --algo lda`) keeps per document d its Dirichlet
 * γ_d (user_factors, documents x rank) and per topic k its Dirichlet λ_k over the words (item_factors,
 * words x rank: column k), with the document-topic prior α in `alpha` and the topic-word prior η in
 * `lambda`. Its proportions are θ_d = γ_d / Σγ_d and β_k = λ_k / Σ_w λ_kw. */

typedef struct starfa_topic_options {
	int64_t max_iters; /* E-step iterations inferring the documents' mixtures (default 100) */
	double tol;        /* they stop once the mean absolute change of their γ is under this (default 1e-3) */
} starfa_topic_options;

void starfa_topic_options_default(starfa_topic_options *o);

/* β: rank x items, row k topic k's probabilities over the words (each row sums to 1). Also for
 * non-negative models (W·Hᵀ, GaP, KL-NMF): H's columns normalized. */
int starfa_topic_word(const starfa_model *m, float *beta);

/* θ of each document of `docs` (documents x words, word ids below the model's items): docs->nrows x rank
 * proportions, each row summing to 1, inferred with the topics fixed, as a task graph (starfa_init
 * first): by LDA's E-step for a topic model; for a count model (kind STARFA_MODEL_NONNEG: gap, klnmf) by
 * GaP's score updates from each document's length spread evenly, θ_dk ∝ x_dk Σ_w λ_wk (the topic's
 * expected share of the document's words). A document with no words gets the prior's mean: 1 / rank
 * each for LDA and KL-NMF, θ_k ∝ c_k / (c_k + rate) for GaP (c_k = Σ_w λ_wk: its scores sit at the
 * prior's mode). *iterations (may be NULL) gets the iterations run. Also for the perplexity below. */
int starfa_topic_infer(const starfa_model *m, const starfa_coo *docs, const starfa_topic_options *o, float *theta,
		       int64_t *iterations);

/* Document completion on held-out documents: each document's entries, sorted by word id, alternate
 * between an observed half (1st, 3rd, ...), from which its mixture θ_d is inferred, and an evaluated
 * half, over whose tokens perplexity = exp(-Σ c log(θ_d·β_w) / Σ c). */
typedef struct starfa_perplexity {
	double perplexity;       /* NaN when no token is evaluated */
	int64_t documents;       /* rows of the test matrix */
	int64_t empty;           /* of which with no words (kept: their mixture is the prior) */
	int64_t observed_tokens, evaluated_tokens;
	int64_t iterations;      /* of the E-step */
} starfa_perplexity;

int starfa_topic_perplexity(const starfa_model *m, const starfa_coo *test, const starfa_topic_options *o,
			    starfa_perplexity *out);

/* ------------------------------------------------------------------ one training driver
 * Every algorithm is a starfa_algorithm: its parameters (a struct of its own, with a table that names
 * them for the command line), defaults and checks, and the steps the driver calls: setup on the
 * training entries, one iteration (a task graph), its objective and metrics, the model out. The
 * driver times the iterations, collects the workers' profile, calls back, and stops early when the
 * algorithm says it has converged. starfa_algorithms() lists them; `starfa train --algo NAME`
 * dispatches through it. */

typedef enum starfa_param_type {
	STARFA_PARAM_INT64 = 0, /* int64_t field, in [min, max] */
	STARFA_PARAM_INT,       /* int field, in [min, max] */
	STARFA_PARAM_DOUBLE,    /* double field, in [min, max] */
	STARFA_PARAM_FLAG,      /* int field set to (int)max when the option is given (no value) */
	STARFA_PARAM_CHOICE,    /* int field: the index of the value among `choices` ("chol|cg") */
} starfa_param_type;

typedef struct starfa_param {
	const char *name;    /* the option without its dashes, e.g. "cg-steps" */
	starfa_param_type type;
	size_t offset;       /* of the field in the algorithm's parameter struct */
	double min, max;
	const char *choices; /* STARFA_PARAM_CHOICE: the values, '|'-separated */
	const char *help;    /* one line */
} starfa_param;

typedef struct starfa_algorithm {
	const char *name;             /* "als", "ials", ... */
	const char *summary;          /* one line for --help */
	starfa_model_kind kind;       /* what its models are */
	size_t params_size;           /* sizeof its parameter struct */
	const starfa_param *params;   /* its options, ended by an entry with a NULL name */
	void (*defaults)(void *params);
	int (*check)(const void *params);
	int64_t (*iterations)(const void *params); /* the most iterations to run */
	/* Reads the training (and test, may be NULL) entries and builds the state: tiles, factors, handles. */
	int (*setup)(const starfa_coo *train, const starfa_coo *test, const void *params, void **state);
	/* Inserts one iteration's task graph and waits for it (or for what it needs to check it). */
	int (*iterate)(void *state, int64_t iteration);
	/* The objective and metrics after an iteration, into the progress (columns, train_loss, test, ...). */
	int (*evaluate)(void *state, starfa_train_progress *progress);
	/* The trained model (the state gives up what the model keeps). */
	int (*model)(void *state, starfa_model **out);
	void (*free)(void *state);
} starfa_algorithm;

/* The algorithms starfa has, NULL-terminated; and one by name (NULL when unknown). */
const starfa_algorithm *const *starfa_algorithms(void);
const starfa_algorithm *starfa_algorithm_find(const char *name);

/* Sets a parameter from its text (as the command line gives it: "3", "cg"; NULL for a flag). Unknown
 * names, bad numbers, values outside [min, max] and unknown choices give STARFA_EINVAL with a message
 * naming the option and what it accepts. */
int starfa_param_set(const starfa_algorithm *algo, void *params, const char *name, const char *value);
/* The parameter of this name (NULL when the algorithm has none). */
const starfa_param *starfa_param_find(const starfa_algorithm *algo, const char *name);
/* Its current value as text ("3", "0.12", "cg", "on"/"off"), for help and logs. */
void starfa_param_format(const starfa_param *param, const void *params, char *buf, size_t size);

/* Trains with `algo` and its parameters (its defaults when params is NULL); starfa_init first. The test
 * entries (may be NULL) are scored after every iteration. */
int starfa_train(const starfa_algorithm *algo, const void *params, const starfa_coo *train, const starfa_coo *test,
		 starfa_train_callback callback, void *user_data, starfa_model **out);

#ifdef __cplusplus
}
#endif
#endif
