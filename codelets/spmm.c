/* The SpMM codelets: Y = S·X (or Sᵀ·X) per output row block, tile by tile, on CPU or CUDA workers. */
#include "codelets/codelet.h"
#include "cpu/spmm.h"
#ifdef STARFA_USE_CUDA
#include "gpu/spmm.h"
#include <starpu_cuda.h>
#include <starpu_cusparse.h>
#endif

#include <limits.h>
#include <string.h>

/* Two CUDA implementations: starfa's own kernel and cusparseSpMM (with the per-worker handles of
 * starpu_cusparse_init, which starfa_init calls when there are CUDA workers). Neither wins
 * everywhere (bench/RESULTS.md: cuSPARSE on tiles of few rows, starfa's kernel on tall ones),
 * so both are implementations of one codelet and StarPU's perfmodel-driven schedulers pick,
 * per tile, the one its calibrated models predict faster. */
struct spmm_args {
	int beta; /* 0: the first tile of its output block overwrites it; 1: later tiles add to it */
};

/* Buffers: 0 S tile (CSR), 1 X row block (the tile's columns), 2 Y row block (its rows). */
static void spmm_cpu(void *buffers[], void *cl_arg)
{
	const struct spmm_args *args = cl_arg;
	starfa_cpu_spmm(STARPU_CSR_GET_NROW(buffers[0]), STARPU_CSR_GET_ROWPTR(buffers[0]),
			STARPU_CSR_GET_COLIND(buffers[0]), (const float *)STARPU_CSR_GET_NZVAL(buffers[0]),
			(const float *)STARPU_MATRIX_GET_PTR(buffers[1]), STARPU_MATRIX_GET_LD(buffers[1]),
			STARPU_MATRIX_GET_NX(buffers[1]), args->beta, (float *)STARPU_MATRIX_GET_PTR(buffers[2]),
			STARPU_MATRIX_GET_LD(buffers[2]), starpu_combined_worker_get_size());
}

#ifdef STARFA_USE_CUDA
static void spmm_cuda_run(void *buffers[], void *cl_arg, starfa_spmm_impl impl)
{
	const struct spmm_args *args = cl_arg;
	/* StarPU's per-worker handle, already bound to the worker's stream. */
	cusparseHandle_t handle = impl == STARFA_SPMM_CUSPARSE ? starpu_cusparse_get_local_handle() : NULL;
	starfa_gpu_status st = starfa_cuda_spmm(
		impl, handle, STARPU_CSR_GET_NROW(buffers[0]), STARPU_MATRIX_GET_NY(buffers[1]),
		STARPU_CSR_GET_NNZ(buffers[0]), STARPU_CSR_GET_ROWPTR(buffers[0]), STARPU_CSR_GET_COLIND(buffers[0]),
		(const float *)STARPU_CSR_GET_NZVAL(buffers[0]), (const float *)STARPU_MATRIX_GET_PTR(buffers[1]),
		STARPU_MATRIX_GET_LD(buffers[1]), STARPU_MATRIX_GET_NX(buffers[1]), args->beta,
		(float *)STARPU_MATRIX_GET_PTR(buffers[2]), STARPU_MATRIX_GET_LD(buffers[2]),
		starpu_cuda_get_local_stream());
	/* Like STARFA_CUDA_CHECK, for a failure that may be cuSPARSE's: no wrong answer goes on. */
	if (st.call) {
		fprintf(stderr, "starfa: codelet spmm failed on worker %d: %s\n", starpu_worker_get_id(),
			starfa_gpu_status_string(st));
		abort();
	}
}

static void spmm_cuda_own(void *buffers[], void *cl_arg)
{
	spmm_cuda_run(buffers, cl_arg, STARFA_SPMM_OWN);
}

static void spmm_cuda_cusparse(void *buffers[], void *cl_arg)
{
	spmm_cuda_run(buffers, cl_arg, STARFA_SPMM_CUSPARSE);
}
#endif

/* The real cost: one K-long row of X scaled and added per nonzero. */
static size_t spmm_cost(struct starpu_task *task, unsigned nimpl)
{
	(void)nimpl;
	return (size_t)starpu_csr_get_nnz(task->handles[0]) * starpu_matrix_get_nx(task->handles[1]);
}

/* Overwriting and accumulating tasks differ in what they read of Y: separate histories. */
static uint32_t spmm_footprint(struct starpu_task *task)
{
	const struct spmm_args *args = task->cl_arg;
	return starfa_cost_footprint(spmm_cost(task, 0), (uint32_t)args->beta);
}

STARFA_PERFMODEL(spmm, spmm_cost, spmm_footprint);

/* Two codelets that differ only in Y's access mode: the first task of an output block writes
 * it without fetching what it held (W), the others add to it (RW). They share one perfmodel. */
static struct starpu_codelet spmm_first_cl = {
	.name = "starfa_spmm",
	.type = STARPU_FORKJOIN, /* the CPU kernel spreads over a combined worker's cores */
	.max_parallelism = INT_MAX,
	.cpu_funcs = {spmm_cpu},
	.cpu_funcs_name = {"spmm_cpu"},
#ifdef STARFA_USE_CUDA
	.cuda_funcs = {spmm_cuda_own, spmm_cuda_cusparse},
	.cuda_flags = {STARPU_CUDA_ASYNC, STARPU_CUDA_ASYNC},
#endif
	.nbuffers = 3,
	.modes = {STARPU_R, STARPU_R, STARPU_W},
	.model = &spmm_model,
};

static struct starpu_codelet spmm_accumulate_cl = {
	.name = "starfa_spmm_accumulate",
	.type = STARPU_FORKJOIN,
	.max_parallelism = INT_MAX,
	.cpu_funcs = {spmm_cpu},
	.cpu_funcs_name = {"spmm_cpu"},
#ifdef STARFA_USE_CUDA
	.cuda_funcs = {spmm_cuda_own, spmm_cuda_cusparse},
	.cuda_flags = {STARPU_CUDA_ASYNC, STARPU_CUDA_ASYNC},
#endif
	.nbuffers = 3,
	.modes = {STARPU_R, STARPU_R, STARPU_RW},
	.model = &spmm_model,
};

/* An output block whose tiles are all empty still has to read as zeros. */
static void spmm_zero_cpu(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	starfa_cpu_spmm_zero(STARPU_MATRIX_GET_NY(buffers[0]), STARPU_MATRIX_GET_NX(buffers[0]),
			     (float *)STARPU_MATRIX_GET_PTR(buffers[0]), STARPU_MATRIX_GET_LD(buffers[0]));
}

#ifdef STARFA_USE_CUDA
static void spmm_zero_cuda(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	STARFA_CUDA_CHECK("spmm_zero",
			  starfa_cuda_spmm_zero(STARPU_MATRIX_GET_NY(buffers[0]), STARPU_MATRIX_GET_NX(buffers[0]),
						(float *)STARPU_MATRIX_GET_PTR(buffers[0]),
						STARPU_MATRIX_GET_LD(buffers[0]), starpu_cuda_get_local_stream()));
}
#endif

static size_t spmm_zero_cost(struct starpu_task *task, unsigned nimpl)
{
	(void)nimpl;
	return (size_t)starpu_matrix_get_nx(task->handles[0]) * starpu_matrix_get_ny(task->handles[0]);
}

static uint32_t spmm_zero_footprint(struct starpu_task *task)
{
	return starfa_cost_footprint(spmm_zero_cost(task, 0), 0);
}

STARFA_PERFMODEL(spmm_zero, spmm_zero_cost, spmm_zero_footprint);

static struct starpu_codelet spmm_zero_cl = {
	.name = "starfa_spmm_zero",
	.cpu_funcs = {spmm_zero_cpu},
	.cpu_funcs_name = {"spmm_zero_cpu"},
#ifdef STARFA_USE_CUDA
	.cuda_funcs = {spmm_zero_cuda},
	.cuda_flags = {STARPU_CUDA_ASYNC},
#endif
	.nbuffers = 1,
	.modes = {STARPU_W},
	.model = &spmm_zero_model,
};

/* Whether a dense matrix is blocked exactly along these boundaries. */
static int blocked_along(const starfa_dense *d, const int64_t *bounds, int64_t nblocks)
{
	return d->nblocks == nblocks && memcmp(d->bounds, bounds, (size_t)(nblocks + 1) * sizeof *bounds) == 0;
}

static int overlap(const starfa_dense *a, const starfa_dense *b)
{
	const float *a_end = a->data + a->rows * a->cols, *b_end = b->data + b->rows * b->cols;
	return a->data < b_end && b->data < a_end;
}

int starfa_insert_spmm(const starfa_tiled *S, starfa_side side, const starfa_dense *X, starfa_dense *Y)
{
	if (!S || !X || !Y)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_spmm: missing operand");
	if (side != STARFA_ROWS && side != STARFA_COLS)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_spmm: unknown side %d", (int)side);
	if (side == STARFA_COLS && !starfa_tiled_has_transpose(S))
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_spmm: Y = S^T*X needs S's transposed grid "
						       "(starfa_tiling_options.transposed = 1)");
	/* Y = S·X sweeps the grid by row bands; Y = Sᵀ·X the transposed grid, whose row bands are
	 * S's column bands. */
	const int rows = side == STARFA_ROWS;
	const struct starfa_grid *grid = rows ? &S->grid : &S->transposed;
	int64_t out_rows = rows ? S->nrows : S->ncols, in_rows = rows ? S->ncols : S->nrows;
	const int64_t *out_bounds = rows ? S->row_bounds : S->col_bounds;
	const int64_t *in_bounds = rows ? S->col_bounds : S->row_bounds;
	const char *what = rows ? "S*X" : "S^T*X";
	if (X->rows != in_rows || Y->rows != out_rows || X->cols != Y->cols)
		return starfa_set_error(STARFA_EINVAL,
					"starfa_insert_spmm: Y = %s with S %lldx%lld needs X %lldxK and Y %lldxK, "
					"but X is %lldx%lld and Y %lldx%lld",
					what, (long long)S->nrows, (long long)S->ncols, (long long)in_rows,
					(long long)out_rows, (long long)X->rows, (long long)X->cols, (long long)Y->rows,
					(long long)Y->cols);
	if (!blocked_along(X, in_bounds, grid->nc) || !blocked_along(Y, out_bounds, grid->nr))
		return starfa_set_error(STARFA_EINVAL,
					"starfa_insert_spmm: for Y = %s, X must be blocked along S's %s tiles and Y "
					"along its %s tiles (create them from S with side %s and %s)",
					what, rows ? "column" : "row", rows ? "row" : "column",
					rows ? "STARFA_COLS" : "STARFA_ROWS", rows ? "STARFA_ROWS" : "STARFA_COLS");
	if (X == Y || overlap(X, Y))
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_spmm: X and Y share memory; Y must be a "
						       "separate matrix");

	double k = (double)X->cols;
	for (int64_t i = 0; i < grid->nr; i++) {
		/* Tiles j = 0, 1, ... of the band in order: the first overwrites Y's block, the others
		 * add to it; sequential consistency on the block's handle keeps that order whatever
		 * the workers, so the sums do not depend on the schedule. */
		int first = 1;
		for (int64_t j = 0; j < grid->nc; j++) {
			const struct starfa_tile *tile = starfa_grid_tile(grid, i, j);
			if (tile->nnz == 0)
				continue;
			struct spmm_args *args = malloc(sizeof *args); /* StarPU frees it (STARPU_CL_ARGS) */
			if (!args)
				return starfa_set_error(STARFA_ENOMEM, "out of memory inserting spmm tasks");
			args->beta = !first;
			int ret = starpu_task_insert(first ? &spmm_first_cl : &spmm_accumulate_cl, STARPU_R,
						     tile->handle, STARPU_R, X->blocks[j], first ? STARPU_W : STARPU_RW,
						     Y->blocks[i], STARPU_CL_ARGS, args, sizeof *args, STARPU_FLOPS,
						     2.0 * k * (double)tile->nnz, STARPU_NAME, "spmm", 0);
			if (ret != 0)
				return starfa_insert_failed("spmm", ret);
			first = 0;
		}
		if (first) {
			int ret = starpu_task_insert(&spmm_zero_cl, STARPU_W, Y->blocks[i], STARPU_NAME, "spmm_zero",
						     0);
			if (ret != 0)
				return starfa_insert_failed("spmm_zero", ret);
		}
	}
	return 0;
}
