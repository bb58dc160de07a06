/* What every codelet file shares: the one-line codelet declaration (perfmodel, codelet and its
 * registration together), the one insert wrapper, and error reporting.
 *
 * A codelet file declares its operation with STARFA_CODELET and inserts its tasks with starfa_submit:
 *
 *   static uint64_t axpy_cost(const struct starpu_task *task) { ... the real cost ... }
 *   static uint32_t axpy_variant(const struct starpu_task *task) { ... what changes the timing ... }
 *   STARFA_CODELET(axpy, axpy_cost, axpy_variant, axpy_cpu, STARFA_CUDA_FUNC(axpy_cuda));
 *   ...
 *   return starfa_submit(&axpy_cl, &args, sizeof args, flops, attr, STARFA_BUFFERS({x, STARPU_R}, {y, STARPU_RW}));
 *
 * Buffers are variable in number and mode, so a task that overwrites its output (W) and one that adds
 * to it (RW) are one codelet; the variant function keeps their timings apart in the perfmodel. */
#ifndef STARFA_CODELETS_CODELET_H
#define STARFA_CODELETS_CODELET_H

#include "storage/tiled.h"

#include <starpu.h>
#ifdef STARFA_USE_CUDA
#include <cuda_runtime_api.h>
#endif

/* Footprint of a task whose cost is `cost` (e.g. nnz x K) in variant `variant`: tasks
 * of equal cost share a history entry, whatever their shapes. */
uint32_t starfa_cost_footprint(uint64_t cost, uint32_t variant);

/* The registry of codelets, filled before main() by the STARFA_CODELET declarations: what
 * starfa_perfmodel_symbols() lists and what calibration checks, with no hand-kept list. */
struct starfa_codelet_entry {
	struct starpu_codelet *codelet;
	struct starpu_perfmodel *model;
	struct starfa_codelet_entry *next;
};
void starfa_codelet_register(struct starfa_codelet_entry *entry);

#ifdef STARFA_USE_CUDA
/* The CUDA implementation of a codelet (asynchronous on StarPU's stream for the worker). */
#define STARFA_CUDA_FUNC(fn) .cuda_funcs = {fn}, .cuda_flags = {STARPU_CUDA_ASYNC}
#else
#define STARFA_CUDA_FUNC(fn) .cuda_funcs = {NULL}
#endif

/* Declares `op##_cl` (codelet "starfa_" #op) with its perfmodel `op##_model` (symbol
 * "starfa_" #op): a non-linear regression (a * cost^b + c) fitted on cost_fn(task), the operation's
 * real cost (nnz x K for SDDMM), with the per-cost history keyed on (cost, variant_fn(task)) as
 * fallback, so tiles of unseen sizes are predicted too. The trailing arguments are further codelet
 * fields, e.g. STARFA_CUDA_FUNC(fn) and .can_execute. */
#define STARFA_CODELET(op, cost_fn, variant_fn, cpu_fn, ...)                                          \
	static size_t op##_size_base(struct starpu_task *task, unsigned nimpl)                        \
	{                                                                                       \
		(void)nimpl;                                                                    \
		return (size_t)cost_fn(task);                                                   \
	}                                                                                       \
	static uint32_t op##_footprint(struct starpu_task *task)                                      \
	{                                                                                       \
		return starfa_cost_footprint(cost_fn(task), variant_fn(task));                  \
	}                                                                                       \
	static struct starpu_perfmodel op##_model = {                                                 \
		.type = STARPU_NL_REGRESSION_BASED,                                             \
		.symbol = "starfa_" #op,                                                      \
		.size_base = op##_size_base,                                                  \
		.footprint = op##_footprint,                                                  \
	};                                                                                      \
	static struct starpu_codelet op##_cl = {                                                      \
		.name = "starfa_" #op,                                                        \
		.cpu_funcs = {cpu_fn},                                                          \
		.nbuffers = STARPU_VARIABLE_NBUFFERS,                                           \
		.model = &op##_model,                                                         \
		__VA_ARGS__};                                                                   \
	__attribute__((constructor)) static void op##_register(void)                                  \
	{                                                                                       \
		static struct starfa_codelet_entry entry = {&op##_cl, &op##_model, NULL};   \
		starfa_codelet_register(&entry);                                                \
	}

/* The variant function of a codelet whose timing depends on nothing but its cost. */
static inline uint32_t starfa_no_variant(const struct starpu_task *task)
{
	(void)task;
	return 0;
}

/* The arguments of starfa_submit: the buffers as {handle, mode} pairs. */
#define STARFA_BUFFERS(...)                                                                              \
	(int)(sizeof((struct starpu_data_descr[]){__VA_ARGS__}) / sizeof(struct starpu_data_descr)),      \
		(struct starpu_data_descr[]){__VA_ARGS__}

/* The one insert wrapper: submits one task of codelet cl on the buffers, with a copy of args (StarPU
 * frees it) as its typed argument struct, flops for StarPU's statistics, and attr's priority and
 * worker (NULL: defaults). Maps StarPU's errors to starfa's. The one place that becomes
 * starpu_mpi_task_insert when tiles get owners on several nodes. */
int starfa_submit(struct starpu_codelet *cl, const void *args, size_t args_size, double flops,
		  const starfa_task_attr *attr, int nbuffers, const struct starpu_data_descr *buffers);

/* attr with a band's placement (a STARPU_CPU / STARPU_CUDA mask, 0 none) filled in: attr itself when it
 * places the task already (a worker, or a where of its own) or where is 0, else a copy of it in *buf. */
const starfa_task_attr *starfa_placed(starfa_task_attr *buf, const starfa_task_attr *attr, uint32_t where);

/* What a band task function does before its buffers: checks band, counts the band's non-empty tiles
 * into *ntiles and their entries into *nnz, and allocates *buffers for band_buffers + ntiles *
 * tile_buffers descriptions (freed by starfa_band_task_submit). 0, or an error. */
int starfa_band_task_begin(const char *what, const starfa_tiled *S, starfa_side side, int64_t band, int64_t *ntiles,
			   int64_t *nnz, struct starpu_data_descr **buffers, size_t band_buffers, size_t tile_buffers);
/* Appends to buffers[n..] each of the band's non-empty tiles (R) followed by B's block of its columns (R),
 * in order; returns the new count. */
int starfa_band_task_tile_pairs(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *B,
				struct starpu_data_descr *buffers, int n);
/* Submits a band task where the band's tiles run (its placement, as for their per-tile tasks; attr's
 * own worker or kind first) and frees the buffers starfa_band_task_begin allocated. */
int starfa_band_task_submit(struct starpu_codelet *cl, const void *args, size_t args_size, double flops,
			    const starfa_tiled *S, starfa_side side, int64_t band, const starfa_task_attr *attr,
			    int nbuffers, struct starpu_data_descr *buffers);
/* For a band with no entries: frees the buffers starfa_band_task_begin allocated and zeroes `block` (a
 * matrix block or a sums slot: kind, codelets/zero.h) as a per-tile pass over an empty tile does, placed
 * as the band. The band codelets never
 * see an empty band, whose cost (0 entries) their regression models could not take, except ccd_band with
 * an update, whose cost counts the band's rows. */
int starfa_band_task_zero(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_task_attr *attr,
			  starpu_data_handle_t block, int kind, struct starpu_data_descr *buffers);
/* The entries of a band task's tiles, ntiles CSR buffers from buffer `first`, `stride` apart. */
uint64_t starfa_band_task_nnz(const struct starpu_task *task, unsigned first, unsigned stride, int ntiles);
/* The placement of block b of a dense matrix (that of the band it is aligned with). */
static inline uint32_t starfa_block_where(const struct starfa_dense *d, int64_t b)
{
	return d->where ? d->where[b] : 0;
}

#ifdef STARFA_USE_CUDA
/* A CUDA kernel cannot return an error through StarPU: report it and abort. */
void starfa_cuda_fail(const char *codelet, cudaError_t err) __attribute__((noreturn));
#define STARFA_CUDA_CHECK(codelet, call)                                                          \
	do {                                                                                    \
		cudaError_t err_ = (call);                                                      \
		if (err_ != cudaSuccess)                                                        \
			starfa_cuda_fail(codelet, err_);                                        \
	} while (0)
#endif

/* A CPU kernel's scratch allocation failed: no wrong answer goes on. */
void starfa_cpu_fail(const char *codelet) __attribute__((noreturn));

/* Error for a tile or block index outside its grid (returns STARFA_EINVAL). */
int starfa_index_error(const char *what, const char *kind, int64_t i, int64_t j, int64_t ni, int64_t nj);

/* Checks that slot is a slot of sums (STARFA_EINVAL naming `what` otherwise). */
int starfa_check_slot(const char *what, const starfa_sums *sums, int64_t slot);

#endif
