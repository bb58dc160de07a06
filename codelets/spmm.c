/* The SpMM codelets: Y = S·X (or Sᵀ·X) per output row block, tile by tile, on CPU or CUDA workers. */
#include "codelets/codelet.h"
#include "codelets/zero.h"
#include "cpu/spmm.h"
#ifdef STARFA_USE_CUDA
#include "gpu/spmm.h"
#include <starpu_cuda.h>
#include <starpu_cusparse.h>
#endif

#include <stdlib.h>
#include <string.h>

/* One CUDA implementation that picks, per tile, the fastest of starfa's own kernel and cusparseSpMM with
 * CSR_ALG2 and CSR_ALG3 (with the per-worker handles of starpu_cusparse_init, which starfa_init calls when
 * there are CUDA workers): it times each on the tile's first task and keeps the winner, with cuSPARSE's
 * descriptor, buffer and ALG3's analysis, by the tile's serial (gpu/spmm.h, STARFA_SPMM_TUNED). None wins
 * everywhere (bench/RESULTS.md: ALG3 at small ranks, ALG2 at large ones and on tiles of few rows, starfa's
 * kernel on tall ones at mid ranks), and the choice depends on the tile's structure, which StarPU's
 * perfmodels (by cost alone) do not see; they still decide between the CPU and the GPU. */
struct spmm_args {
	int beta;        /* 0: overwrite the output block; 1: add to it */
	int values;      /* 1: the values come from a fourth buffer (sparse values), not S's own */
	uint64_t serial; /* the tile's: cuSPARSE's descriptor, buffer and analysis are kept per tile */
};

static const float *spmm_values(void *buffers[], const struct spmm_args *args)
{
	return args->values ? (const float *)STARPU_VECTOR_GET_PTR(buffers[3])
			    : (const float *)STARPU_CSR_GET_NZVAL(buffers[0]);
}

/* Y (+)= tile · X for one tile (its CSR buffer, values val, X's block buffer x) on the CPU, or on a CUDA
 * worker's stream (`stream` non-NULL) by the tuned choice kept under the tile's serial: what spmm runs once
 * and spmm_band for each of its tiles. */
static void spmm_tile_run(const char *codelet, void *tile, const float *val, void *x, int beta, float *Y, int64_t ldy,
			  uint64_t serial, void *stream)
{
#ifdef STARFA_USE_CUDA
	if (stream) {
		/* StarPU's per-worker handle, already bound to the worker's stream. */
		starfa_gpu_status st = starfa_cuda_spmm(
			STARFA_SPMM_TUNED, starpu_cusparse_get_local_handle(), serial, STARPU_CSR_GET_NROW(tile),
			STARPU_MATRIX_GET_NY(x), STARPU_CSR_GET_NNZ(tile), STARPU_CSR_GET_ROWPTR(tile), STARPU_CSR_GET_COLIND(tile),
			val, (const float *)STARPU_MATRIX_GET_PTR(x), STARPU_MATRIX_GET_LD(x), STARPU_MATRIX_GET_NX(x), beta, Y, ldy,
			(cudaStream_t)stream);
		/* Like STARFA_CUDA_CHECK, for a failure that may be cuSPARSE's: no wrong answer goes on. */
		if (st.call) {
			fprintf(stderr, "starfa: codelet %s failed on worker %d: %s\n", codelet, starpu_worker_get_id(),
				starfa_gpu_status_string(st));
			abort();
		}
		return;
	}
#endif
	(void)codelet, (void)serial, (void)stream;
	starfa_cpu_spmm(STARPU_CSR_GET_NROW(tile), STARPU_CSR_GET_ROWPTR(tile), STARPU_CSR_GET_COLIND(tile), val,
			(const float *)STARPU_MATRIX_GET_PTR(x), STARPU_MATRIX_GET_LD(x), STARPU_MATRIX_GET_NX(x), beta, Y, ldy, 1);
}

/* Buffers: 0 S tile (CSR), 1 X row block (the tile's columns), 2 Y row block (its rows), 3 the tile's
 * values when they are not S's. */
static void spmm_run(void *buffers[], const struct spmm_args *args, void *stream)
{
	spmm_tile_run("spmm", buffers[0], spmm_values(buffers, args), buffers[1], args->beta,
		      (float *)STARPU_MATRIX_GET_PTR(buffers[2]), STARPU_MATRIX_GET_LD(buffers[2]), args->serial, stream);
}

static void spmm_cpu(void *buffers[], void *cl_arg)
{
	spmm_run(buffers, cl_arg, NULL);
}

#ifdef STARFA_USE_CUDA
static void spmm_cuda(void *buffers[], void *cl_arg)
{
	spmm_run(buffers, cl_arg, starpu_cuda_get_local_stream());
}
#endif

/* The real cost: one K-long row of X scaled and added per nonzero. */
static uint64_t spmm_cost(const struct starpu_task *task)
{
	return (uint64_t)starpu_csr_get_nnz(task->handles[0]) * starpu_matrix_get_nx(task->handles[1]);
}

/* Overwriting and accumulating tasks differ in what they read of Y: separate histories. */
static uint32_t spmm_variant(const struct starpu_task *task)
{
	return (uint32_t)((const struct spmm_args *)task->cl_arg)->beta;
}

STARFA_CODELET(spmm, spmm_cost, spmm_variant, spmm_cpu, STARFA_CUDA_FUNC(spmm_cuda));

static int overlap(const starfa_dense *a, const starfa_dense *b)
{
	const float *a_end = a->data + a->rows * a->cols, *b_end = b->data + b->rows * b->cols;
	return a->data < b_end && b->data < a_end;
}

/* The operands an SpMM task shares with the band task: 0, or STARFA_EINVAL naming `what`. */
static int check_spmm(const char *what, const starfa_tiled *S, starfa_side side, const starfa_sparse_values *V,
		      const starfa_dense *X, const starfa_dense *Y)
{
	if (!S || !X || !Y)
		return starfa_set_error(STARFA_EINVAL, "%s: missing operand", what);
	if (side != STARFA_ROWS && side != STARFA_COLS)
		return starfa_set_error(STARFA_EINVAL, "%s: unknown side %d", what, (int)side);
	if (side == STARFA_COLS && !starfa_tiled_has_transpose(S))
		return starfa_set_error(STARFA_EINVAL, "%s: Y = S^T*X needs S's transposed grid "
						       "(starfa_tiling_options.transposed = 1)", what);
	/* Y = S·X sweeps the grid by row bands; Y = Sᵀ·X the transposed grid, whose row bands are
	 * S's column bands. */
	const int rows = side == STARFA_ROWS;
	const struct starfa_grid *grid = starfa_side_grid(S, side);
	int64_t out_rows = rows ? S->nrows : S->ncols, in_rows = rows ? S->ncols : S->nrows;
	const int64_t *out_bounds = rows ? S->row_bounds : S->col_bounds;
	const int64_t *in_bounds = rows ? S->col_bounds : S->row_bounds;
	const char *expr = rows ? "S*X" : "S^T*X";
	if (X->rows != in_rows || Y->rows != out_rows || X->cols != Y->cols)
		return starfa_set_error(STARFA_EINVAL, "%s: Y = %s with S %lldx%lld needs X %lldxK and Y %lldxK, "
					"but X is %lldx%lld and Y %lldx%lld",
					what, expr, (long long)S->nrows, (long long)S->ncols, (long long)in_rows,
					(long long)out_rows, (long long)X->rows, (long long)X->cols, (long long)Y->rows,
					(long long)Y->cols);
	if (!starfa_dense_blocked_along(X, in_bounds, grid->nc) || !starfa_dense_blocked_along(Y, out_bounds, grid->nr))
		return starfa_set_error(STARFA_EINVAL, "%s: for Y = %s, X must be blocked along S's %s tiles and Y "
					"along its %s tiles (create them from S with side %s and %s)",
					what, expr, rows ? "column" : "row", rows ? "row" : "column",
					rows ? "STARFA_COLS" : "STARFA_ROWS", rows ? "STARFA_ROWS" : "STARFA_COLS");
	if (X == Y || overlap(X, Y))
		return starfa_set_error(STARFA_EINVAL, "%s: X and Y share memory; Y must be a "
						       "separate matrix", what);
	if (V && (V->pattern != S || V->side != side))
		return starfa_set_error(STARFA_EINVAL, "%s: the values must be S's, on the %s side", what,
					rows ? "row" : "column");
	return 0;
}

int starfa_task_spmm(const starfa_tiled *S, starfa_side side, int64_t i, int64_t j, const starfa_sparse_values *V,
		     const starfa_dense *X, starfa_dense *Y, int accumulate, const starfa_task_attr *attr)
{
	int rc = check_spmm("starfa_task_spmm", S, side, V, X, Y);
	if (rc)
		return rc;
	const struct starfa_grid *grid = starfa_side_grid(S, side);
	if (i < 0 || j < 0 || i >= grid->nr || j >= grid->nc)
		return starfa_index_error("starfa_task_spmm", "tile", i, j, grid->nr, grid->nc);
	const struct starfa_tile *tile = starfa_grid_tile(grid, i, j);
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_band_where(S, side, i));
	if (tile->nnz == 0)
		return accumulate ? 0 : starfa_submit_zero(Y->blocks[i], STARFA_ZERO_MATRIX, attr);
	struct spmm_args args = {accumulate != 0, V != NULL, tile->serial};
	double flops = 2.0 * (double)X->cols * (double)tile->nnz;
	enum starpu_data_access_mode ymode = accumulate ? STARPU_RW : STARPU_W;
	if (V)
		return starfa_submit(&spmm_cl, &args, sizeof args, flops, attr,
				     STARFA_BUFFERS({tile->handle, STARPU_R}, {X->blocks[j], STARPU_R}, {Y->blocks[i], ymode},
						    {V->handles[i * grid->nc + j], STARPU_R}));
	return starfa_submit(&spmm_cl, &args, sizeof args, flops, attr,
			     STARFA_BUFFERS({tile->handle, STARPU_R}, {X->blocks[j], STARPU_R}, {Y->blocks[i], ymode}));
}

/* ------------------------------------------------------------------ sddmm_spmm (fused) */

struct fused_args {
	int beta, mode, masked;
	float eps;
};

/* Y (+)= f(tile, A·Bᵀ)·B for one tile (its CSR buffer, B's block buffer bb; A's block, k columns) on the
 * CPU, or on a CUDA worker's stream (`stream` non-NULL): what sddmm_spmm runs once and sddmm_spmm_band
 * for each of its tiles. */
static void fused_tile_run(const char *codelet, void *tile, const float *A, int64_t lda, int64_t k, void *bb, int mode,
			   float eps, int beta, float *Y, int64_t ldy, const float *active, int64_t ldact, void *stream)
{
	const float *B = (const float *)STARPU_MATRIX_GET_PTR(bb);
	const int64_t ldb = STARPU_MATRIX_GET_LD(bb);
#ifdef STARFA_USE_CUDA
	if (stream) {
		STARFA_CUDA_CHECK(codelet, starfa_cuda_sddmm_spmm(STARPU_CSR_GET_NROW(tile), STARPU_CSR_GET_NNZ(tile),
								  STARPU_CSR_GET_ROWPTR(tile), STARPU_CSR_GET_COLIND(tile),
								  (const float *)STARPU_CSR_GET_NZVAL(tile), A, lda, B, ldb, k,
								  mode, eps, beta, Y, ldy, active, ldact, (cudaStream_t)stream));
		return;
	}
#endif
	(void)codelet, (void)stream;
	starfa_cpu_sddmm_spmm(STARPU_CSR_GET_NROW(tile), STARPU_CSR_GET_ROWPTR(tile), STARPU_CSR_GET_COLIND(tile),
			      (const float *)STARPU_CSR_GET_NZVAL(tile), A, lda, B, ldb, k, mode, eps, beta, Y, ldy, active,
			      ldact);
}

/* Buffers: 0 S tile (CSR), 1 A row block (the tile's rows), 2 B row block (its columns), 3 Y row block,
 * 4 (masked) the rows' active values. */
static void fused_run(void *buffers[], const struct fused_args *args, void *stream)
{
	fused_tile_run("sddmm_spmm", buffers[0], (const float *)STARPU_MATRIX_GET_PTR(buffers[1]),
		       STARPU_MATRIX_GET_LD(buffers[1]), STARPU_MATRIX_GET_NX(buffers[1]), buffers[2], args->mode, args->eps,
		       args->beta, (float *)STARPU_MATRIX_GET_PTR(buffers[3]), STARPU_MATRIX_GET_LD(buffers[3]),
		       args->masked ? (const float *)STARPU_MATRIX_GET_PTR(buffers[4]) : NULL,
		       args->masked ? STARPU_MATRIX_GET_LD(buffers[4]) : 0, stream);
}

static void fused_cpu(void *buffers[], void *cl_arg)
{
	fused_run(buffers, cl_arg, NULL);
}

#ifdef STARFA_USE_CUDA
static void fused_cuda(void *buffers[], void *cl_arg)
{
	fused_run(buffers, cl_arg, starpu_cuda_get_local_stream());
}
#endif

static uint32_t fused_variant(const struct starpu_task *task)
{
	const struct fused_args *args = task->cl_arg;
	return (uint32_t)(args->beta | args->mode << 1 | args->masked << 3);
}

STARFA_CODELET(sddmm_spmm, spmm_cost, fused_variant, fused_cpu, STARFA_CUDA_FUNC(fused_cuda));

/* The operands a fused task shares with the band task: 0, or STARFA_EINVAL naming `what`. */
static int check_fused(const char *what, const starfa_tiled *S, starfa_side side, const starfa_dense *A,
		       const starfa_dense *B, starfa_fused_mode mode, const starfa_dense *active, const starfa_dense *Y)
{
	if (!S || !A || !B || !Y)
		return starfa_set_error(STARFA_EINVAL, "%s: missing operand", what);
	if (side != STARFA_ROWS && side != STARFA_COLS)
		return starfa_set_error(STARFA_EINVAL, "%s: unknown side %d", what, (int)side);
	if ((int)mode < 0 || mode > STARFA_FUSED_QUOTIENT)
		return starfa_set_error(STARFA_EINVAL, "%s: unknown mode %d", what, (int)mode);
	if (side == STARFA_COLS && !starfa_tiled_has_transpose(S))
		return starfa_set_error(STARFA_EINVAL, "%s: the column side needs S's transposed grid "
						       "(starfa_tiling_options.transposed = 1)", what);
	const int rows = side == STARFA_ROWS;
	const struct starfa_grid *grid = starfa_side_grid(S, side);
	const int64_t out_rows = rows ? S->nrows : S->ncols, in_rows = rows ? S->ncols : S->nrows;
	const int64_t *out_bounds = rows ? S->row_bounds : S->col_bounds;
	const int64_t *in_bounds = rows ? S->col_bounds : S->row_bounds;
	if (A->rows != out_rows || Y->rows != out_rows || B->rows != in_rows || A->cols != B->cols || Y->cols != A->cols)
		return starfa_set_error(STARFA_EINVAL,
					"%s: on the %s side of S %lldx%lld, A and Y need %lld rows and B %lld, all with "
					"the same K; A is %lldx%lld, B %lldx%lld, Y %lldx%lld",
					what, rows ? "row" : "column", (long long)S->nrows, (long long)S->ncols,
					(long long)out_rows, (long long)in_rows, (long long)A->rows, (long long)A->cols,
					(long long)B->rows, (long long)B->cols, (long long)Y->rows, (long long)Y->cols);
	if (!starfa_dense_blocked_along(A, out_bounds, grid->nr) || !starfa_dense_blocked_along(Y, out_bounds, grid->nr) ||
	    !starfa_dense_blocked_along(B, in_bounds, grid->nc))
		return starfa_set_error(STARFA_EINVAL, "%s: A and Y must be blocked along the side's rows, B along its "
						       "columns (create them from S with the side and the other side)", what);
	if (Y == A || Y == B || overlap(Y, A) || overlap(Y, B))
		return starfa_set_error(STARFA_EINVAL, "%s: Y shares memory with A or B; Y must be a separate matrix", what);
	if (active && (active->cols != 1 || !starfa_dense_blocked_along(active, out_bounds, grid->nr)))
		return starfa_set_error(STARFA_EINVAL, "%s: active must have one column, blocked like Y", what);
	if (active && (active == Y || overlap(Y, active)))
		return starfa_set_error(STARFA_EINVAL, "%s: active shares memory with Y", what);
	return 0;
}

int starfa_task_sddmm_spmm(const starfa_tiled *S, starfa_side side, int64_t i, int64_t j, const starfa_dense *A,
			   const starfa_dense *B, starfa_fused_mode mode, float eps, const starfa_dense *active,
			   starfa_dense *Y, int accumulate, const starfa_task_attr *attr)
{
	const char *what = "starfa_task_sddmm_spmm";
	int rc = check_fused(what, S, side, A, B, mode, active, Y);
	if (rc)
		return rc;
	const struct starfa_grid *grid = starfa_side_grid(S, side);
	if (i < 0 || j < 0 || i >= grid->nr || j >= grid->nc)
		return starfa_index_error(what, "tile", i, j, grid->nr, grid->nc);
	const struct starfa_tile *tile = starfa_grid_tile(grid, i, j);
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_band_where(S, side, i));
	if (tile->nnz == 0)
		return accumulate ? 0 : starfa_submit_zero(Y->blocks[i], STARFA_ZERO_MATRIX, attr);
	struct fused_args args = {accumulate != 0, (int)mode, active != NULL, eps};
	double flops = 4.0 * (double)A->cols * (double)tile->nnz;
	if (active) /* Y's skipped rows keep their values: RW even when the active rows are overwritten */
		return starfa_submit(&sddmm_spmm_cl, &args, sizeof args, flops, attr,
				     STARFA_BUFFERS({tile->handle, STARPU_R}, {A->blocks[i], STARPU_R}, {B->blocks[j], STARPU_R},
						    {Y->blocks[i], STARPU_RW}, {active->blocks[i], STARPU_R}));
	return starfa_submit(&sddmm_spmm_cl, &args, sizeof args, flops, attr,
			     STARFA_BUFFERS({tile->handle, STARPU_R}, {A->blocks[i], STARPU_R}, {B->blocks[j], STARPU_R},
					    {Y->blocks[i], accumulate ? STARPU_RW : STARPU_W}));
}

/* ------------------------------------------------------------------ sddmm_spmm_band */

struct fused_band_args {
	int mode, masked, ntiles;
	float eps;
};

/* Buffers: 0 A's row block (the band's rows), 1 Y's, 2 (masked) the rows' active values, then for each of
 * the band's non-empty tiles (at least one: an all-empty band is the zero codelet's) in order the tile
 * (CSR) and B's row block of its columns. The tiles run as sddmm_spmm's tasks would, the first
 * overwriting Y and the others adding to it: the same arithmetic in the same order, on the CPU or as
 * kernels in turn on the CUDA worker's stream (`stream` non-NULL). */
static void fused_band_run(void *buffers[], const struct fused_band_args *a, void *stream)
{
	const float *A = (const float *)STARPU_MATRIX_GET_PTR(buffers[0]);
	const int64_t lda = STARPU_MATRIX_GET_LD(buffers[0]), k = STARPU_MATRIX_GET_NX(buffers[0]);
	float *Y = (float *)STARPU_MATRIX_GET_PTR(buffers[1]);
	const int64_t ldy = STARPU_MATRIX_GET_LD(buffers[1]);
	const float *active = a->masked ? (const float *)STARPU_MATRIX_GET_PTR(buffers[2]) : NULL;
	const int64_t ldact = a->masked ? STARPU_MATRIX_GET_LD(buffers[2]) : 0;
	int b = 2 + !!a->masked;
	for (int t = 0; t < a->ntiles; t++, b += 2)
		fused_tile_run("sddmm_spmm_band", buffers[b], A, lda, k, buffers[b + 1], a->mode, a->eps, t > 0, Y, ldy, active,
			       ldact, stream);
}

static void fused_band_cpu(void *buffers[], void *cl_arg)
{
	fused_band_run(buffers, cl_arg, NULL);
}

#ifdef STARFA_USE_CUDA
static void fused_band_cuda(void *buffers[], void *cl_arg)
{
	fused_band_run(buffers, cl_arg, starpu_cuda_get_local_stream());
}
#endif

/* The band's nonzeros times K. */
static uint64_t fused_band_cost(const struct starpu_task *task)
{
	const struct fused_band_args *a = task->cl_arg;
	return starfa_band_task_nnz(task, 2 + !!a->masked, 2, a->ntiles) * starpu_matrix_get_nx(STARPU_TASK_GET_HANDLE(task, 0));
}

static uint32_t fused_band_variant(const struct starpu_task *task)
{
	const struct fused_band_args *a = task->cl_arg;
	return (uint32_t)(a->mode << 1 | a->masked << 3);
}

STARFA_CODELET(sddmm_spmm_band, fused_band_cost, fused_band_variant, fused_band_cpu, STARFA_CUDA_FUNC(fused_band_cuda));

int starfa_task_sddmm_spmm_band(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *A,
				const starfa_dense *B, starfa_fused_mode mode, float eps, const starfa_dense *active,
				starfa_dense *Y, const starfa_task_attr *attr)
{
	const char *what = "starfa_task_sddmm_spmm_band";
	int rc = check_fused(what, S, side, A, B, mode, active, Y);
	if (rc)
		return rc;
	int64_t ntiles, nnz;
	struct starpu_data_descr *buffers;
	if ((rc = starfa_band_task_begin(what, S, side, band, &ntiles, &nnz, &buffers, 3, 2)))
		return rc;
	if (ntiles == 0)
		return starfa_band_task_zero(S, side, band, attr, Y->blocks[band], STARFA_ZERO_MATRIX, buffers);
	int n = 0;
	buffers[n++] = (struct starpu_data_descr){A->blocks[band], STARPU_R};
	/* Y's skipped rows keep their values: RW where rows are masked */
	buffers[n++] = (struct starpu_data_descr){Y->blocks[band], active ? STARPU_RW : STARPU_W};
	if (active)
		buffers[n++] = (struct starpu_data_descr){active->blocks[band], STARPU_R};
	n = starfa_band_task_tile_pairs(S, side, band, B, buffers, n);
	struct fused_band_args args = {(int)mode, active != NULL, (int)ntiles, eps};
	return starfa_band_task_submit(&sddmm_spmm_band_cl, &args, sizeof args, 4.0 * (double)A->cols * (double)nnz, S,
				       side, band, attr, n, buffers);
}

/* ------------------------------------------------------------------ spmm_band */

struct spmm_band_args {
	int values, ntiles; /* values: each tile's values from a buffer of their own, not S's */
	uint64_t serial[];  /* the tiles' serials (spmm's CUDA choice of kernel is kept per tile) */
};

/* Buffers: 0 Y's row block (the band's rows), then for each of the band's non-empty tiles (at least one:
 * an all-empty band is the zero codelet's) in order the tile (CSR), X's row block of its columns and
 * (values) the tile's values. The tiles run as spmm's tasks would, the first overwriting Y and the others
 * adding to it. */
static void spmm_band_run(void *buffers[], const struct spmm_band_args *a, void *stream)
{
	float *Y = (float *)STARPU_MATRIX_GET_PTR(buffers[0]);
	const int64_t ldy = STARPU_MATRIX_GET_LD(buffers[0]);
	const int per_tile = 2 + !!a->values;
	for (int t = 0, b = 1; t < a->ntiles; t++, b += per_tile)
		spmm_tile_run("spmm_band", buffers[b],
			      a->values ? (const float *)STARPU_VECTOR_GET_PTR(buffers[b + 2])
					: (const float *)STARPU_CSR_GET_NZVAL(buffers[b]),
			      buffers[b + 1], t > 0, Y, ldy, a->serial[t], stream);
}

static void spmm_band_cpu(void *buffers[], void *cl_arg)
{
	spmm_band_run(buffers, cl_arg, NULL);
}

#ifdef STARFA_USE_CUDA
static void spmm_band_cuda(void *buffers[], void *cl_arg)
{
	spmm_band_run(buffers, cl_arg, starpu_cuda_get_local_stream());
}
#endif

/* The band's nonzeros times K. */
static uint64_t spmm_band_cost(const struct starpu_task *task)
{
	const struct spmm_band_args *a = task->cl_arg;
	return starfa_band_task_nnz(task, 1, 2 + !!a->values, a->ntiles) * starpu_matrix_get_nx(STARPU_TASK_GET_HANDLE(task, 0));
}

STARFA_CODELET(spmm_band, spmm_band_cost, starfa_no_variant, spmm_band_cpu, STARFA_CUDA_FUNC(spmm_band_cuda));

int starfa_task_spmm_band(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_sparse_values *V,
			  const starfa_dense *X, starfa_dense *Y, const starfa_task_attr *attr)
{
	const char *what = "starfa_task_spmm_band";
	int rc = check_spmm(what, S, side, V, X, Y);
	if (rc)
		return rc;
	int64_t ntiles, nnz;
	struct starpu_data_descr *buffers;
	if ((rc = starfa_band_task_begin(what, S, side, band, &ntiles, &nnz, &buffers, 1, 3)))
		return rc;
	if (ntiles == 0)
		return starfa_band_task_zero(S, side, band, attr, Y->blocks[band], STARFA_ZERO_MATRIX, buffers);
	const struct starfa_grid *grid = starfa_side_grid(S, side);
	const size_t args_size = sizeof(struct spmm_band_args) + (size_t)ntiles * sizeof(uint64_t);
	struct spmm_band_args *args = malloc(args_size);
	if (!args) {
		free(buffers);
		return starfa_set_error(STARFA_ENOMEM, "%s: out of memory for a band of %lld tiles", what, (long long)ntiles);
	}
	*args = (struct spmm_band_args){V != NULL, (int)ntiles};
	int n = 0, t = 0;
	buffers[n++] = (struct starpu_data_descr){Y->blocks[band], STARPU_W};
	for (int64_t j = 0; j < grid->nc; j++) {
		const struct starfa_tile *tile = starfa_grid_tile(grid, band, j);
		if (tile->nnz == 0)
			continue;
		args->serial[t++] = tile->serial;
		buffers[n++] = (struct starpu_data_descr){tile->handle, STARPU_R};
		buffers[n++] = (struct starpu_data_descr){X->blocks[j], STARPU_R};
		if (V)
			buffers[n++] = (struct starpu_data_descr){V->handles[band * grid->nc + j], STARPU_R};
	}
	rc = starfa_band_task_submit(&spmm_band_cl, args, args_size, 2.0 * (double)X->cols * (double)nnz, S, side, band,
				     attr, n, buffers);
	free(args);
	return rc;
}
