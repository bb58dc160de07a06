/* The SDDMM codelet: P = alpha (A·Bᵀ) ∘ pattern(S) + beta P on one tile, on CPU or CUDA workers; and the
 * squared residuals of a band against A·Bᵀ, in one task (sqerr_band). */
#include "codelets/codelet.h"
#include "codelets/zero.h"
#include "cpu/sddmm.h"

#include <stdlib.h>
#ifdef STARFA_USE_CUDA
#include "gpu/sddmm.h"
#include <starpu_cublas_v2.h>
#include <starpu_cuda.h>
#endif

struct sddmm_args {
	starfa_sddmm_mode mode;
	float alpha, beta;
	uint64_t serial; /* the tile's: the CUDA kernel keeps the tile's dense-row order by it */
};

/* Buffers: 0 S tile (CSR), 1 A row block, 2 B row block, 3 P tile values (W, or RW when beta != 0). */
static void sddmm_cpu(void *buffers[], void *cl_arg)
{
	const struct sddmm_args *args = cl_arg;
	starfa_cpu_sddmm(STARPU_CSR_GET_NROW(buffers[0]), STARPU_CSR_GET_ROWPTR(buffers[0]),
			 STARPU_CSR_GET_COLIND(buffers[0]), (const float *)STARPU_CSR_GET_NZVAL(buffers[0]),
			 (const float *)STARPU_MATRIX_GET_PTR(buffers[1]), STARPU_MATRIX_GET_LD(buffers[1]),
			 (const float *)STARPU_MATRIX_GET_PTR(buffers[2]), STARPU_MATRIX_GET_LD(buffers[2]),
			 STARPU_MATRIX_GET_NX(buffers[1]), args->mode == STARFA_SDDMM_SCALED, args->alpha, args->beta,
			 (float *)STARPU_VECTOR_GET_PTR(buffers[3]), 1);
}

#ifdef STARFA_USE_CUDA
static void sddmm_cuda(void *buffers[], void *cl_arg)
{
	const struct sddmm_args *args = cl_arg;
	/* StarPU's per-worker cuBLAS handle, for the dense rows of skewed tiles (gpu/sddmm.h). */
	starfa_gpu_status st = starfa_cuda_sddmm_tuned(
		starpu_cublas_get_local_handle(), args->serial, STARPU_CSR_GET_NROW(buffers[0]),
		STARPU_MATRIX_GET_NY(buffers[2]), STARPU_CSR_GET_NNZ(buffers[0]), STARPU_CSR_GET_ROWPTR(buffers[0]),
		STARPU_CSR_GET_COLIND(buffers[0]), (const float *)STARPU_CSR_GET_NZVAL(buffers[0]),
		(const float *)STARPU_MATRIX_GET_PTR(buffers[1]), STARPU_MATRIX_GET_LD(buffers[1]),
		(const float *)STARPU_MATRIX_GET_PTR(buffers[2]), STARPU_MATRIX_GET_LD(buffers[2]),
		STARPU_MATRIX_GET_NX(buffers[1]), args->mode == STARFA_SDDMM_SCALED, args->alpha, args->beta,
		(float *)STARPU_VECTOR_GET_PTR(buffers[3]), starpu_cuda_get_local_stream());
	/* Like STARFA_CUDA_CHECK, for a failure that may be cuBLAS's: no wrong answer goes on. */
	if (st.call) {
		fprintf(stderr, "starfa: codelet sddmm failed on worker %d: %s\n", starpu_worker_get_id(),
			starfa_gpu_status_string(st));
		abort();
	}
}
#endif

/* The real cost: one K-long dot product per nonzero. */
static uint64_t sddmm_cost(const struct starpu_task *task)
{
	return (uint64_t)starpu_csr_get_nnz(task->handles[0]) * starpu_matrix_get_nx(task->handles[1]);
}

/* Scaling and reading P (beta != 0) change the timing a little: separate histories. */
static uint32_t sddmm_variant(const struct starpu_task *task)
{
	const struct sddmm_args *args = task->cl_arg;
	return (uint32_t)args->mode | (args->beta != 0.0f) << 1;
}

STARFA_CODELET(sddmm, sddmm_cost, sddmm_variant, sddmm_cpu, STARFA_CUDA_FUNC(sddmm_cuda));

int starfa_task_sddmm(const starfa_tiled *S, int64_t i, int64_t j, const starfa_dense *A, const starfa_dense *B,
		      starfa_sddmm_mode mode, float alpha, float beta, starfa_sparse_values *P,
		      const starfa_task_attr *attr)
{
	if (!S || !A || !B || !P)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_sddmm: missing operand");
	if (mode != STARFA_SDDMM_PATTERN && mode != STARFA_SDDMM_SCALED)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_sddmm: unknown mode %d", (int)mode);
	if (P->pattern != S)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_sddmm: P was created for another matrix");
	/* On the transposed grid, rows are S's columns: A goes with them, B with S's rows. */
	const starfa_side side = P->side, other = side == STARFA_ROWS ? STARFA_COLS : STARFA_ROWS;
	const struct starfa_grid *grid = P->grid;
	if (i < 0 || j < 0 || i >= grid->nr || j >= grid->nc)
		return starfa_index_error("starfa_task_sddmm", "tile", i, j, grid->nr, grid->nc);
	int64_t a_rows = side == STARFA_ROWS ? S->nrows : S->ncols, b_rows = side == STARFA_ROWS ? S->ncols : S->nrows;
	if (A->rows != a_rows || B->rows != b_rows || A->cols != B->cols)
		return starfa_set_error(STARFA_EINVAL,
					"starfa_task_sddmm: P's grid is %lldx%lld but A is %lldx%lld and B %lldx%lld",
					(long long)a_rows, (long long)b_rows, (long long)A->rows, (long long)A->cols,
					(long long)B->rows, (long long)B->cols);
	if (!starfa_dense_blocked_along(A, starfa_side_bounds(S, side), grid->nr) ||
	    !starfa_dense_blocked_along(B, starfa_side_bounds(S, other), grid->nc))
		return starfa_set_error(STARFA_EINVAL, "starfa_task_sddmm: A and B must be blocked along the rows and "
						       "columns of P's grid (create them from S with the matching sides)");
	const struct starfa_tile *tile = starfa_grid_tile(grid, i, j);
	if (tile->nnz == 0)
		return 0;
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_band_where(S, side, i));
	struct sddmm_args args = {mode, alpha, beta, tile->serial};
	double flops = 2.0 * (double)A->cols * (double)tile->nnz;
	return starfa_submit(&sddmm_cl, &args, sizeof args, flops, attr,
			     STARFA_BUFFERS({tile->handle, STARPU_R}, {A->blocks[i], STARPU_R}, {B->blocks[j], STARPU_R},
					    {P->handles[i * grid->nc + j], beta != 0.0f ? STARPU_RW : STARPU_W}));
}

/* ------------------------------------------------------------------ sqerr_band */

struct sqerr_args {
	float shift;
	int ntiles;
};

/* Buffers: 0 the sums slot (W), 1 A's block of the band's rows, then for each of the band's non-empty tiles
 * (at least one) its CSR and B's block of its columns. */
static void sqerr_cpu(void *buffers[], void *cl_arg)
{
	const struct sqerr_args *a = cl_arg;
	const float *A = (const float *)STARPU_MATRIX_GET_PTR(buffers[1]);
	const int64_t lda = STARPU_MATRIX_GET_LD(buffers[1]), k = STARPU_MATRIX_GET_NX(buffers[1]);
	double sum = 0.0;
	for (int t = 0; t < a->ntiles; t++) {
		void *tile = buffers[2 + 2 * t], *B = buffers[3 + 2 * t];
		sum += starfa_cpu_sqerr(STARPU_CSR_GET_NROW(tile), STARPU_CSR_GET_ROWPTR(tile), STARPU_CSR_GET_COLIND(tile),
					(const float *)STARPU_CSR_GET_NZVAL(tile), A, lda,
					(const float *)STARPU_MATRIX_GET_PTR(B), STARPU_MATRIX_GET_LD(B), k, a->shift);
	}
	*(double *)STARPU_VARIABLE_GET_PTR(buffers[0]) = sum;
}

#ifdef STARFA_USE_CUDA
static void sqerr_cuda(void *buffers[], void *cl_arg)
{
	const struct sqerr_args *a = cl_arg;
	const float *A = (const float *)STARPU_MATRIX_GET_PTR(buffers[1]);
	const int64_t lda = STARPU_MATRIX_GET_LD(buffers[1]), k = STARPU_MATRIX_GET_NX(buffers[1]);
	double *sum = (double *)STARPU_VARIABLE_GET_PTR(buffers[0]);
	cudaStream_t stream = starpu_cuda_get_local_stream();
	STARFA_CUDA_CHECK("sqerr_band", cudaMemsetAsync(sum, 0, sizeof *sum, stream));
	starfa_cuda_sqerr_tile *tiles = malloc(sizeof *tiles * (size_t)a->ntiles);
	if (!tiles)
		STARFA_CUDA_CHECK("sqerr_band", cudaErrorMemoryAllocation);
	for (int t = 0; t < a->ntiles; t++) {
		void *tile = buffers[2 + 2 * t], *B = buffers[3 + 2 * t];
		tiles[t] = (starfa_cuda_sqerr_tile){STARPU_CSR_GET_NROW(tile), STARPU_CSR_GET_NNZ(tile),
						    STARPU_CSR_GET_ROWPTR(tile), STARPU_CSR_GET_COLIND(tile),
						    (const float *)STARPU_CSR_GET_NZVAL(tile), (const float *)STARPU_MATRIX_GET_PTR(B),
						    STARPU_MATRIX_GET_LD(B)};
	}
	const cudaError_t err = starfa_cuda_sqerr_tiles(tiles, a->ntiles, A, lda, k, a->shift, sum, stream);
	free(tiles);
	STARFA_CUDA_CHECK("sqerr_band", err);
}
#endif

/* The band's nonzeros times K. */
static uint64_t sqerr_cost(const struct starpu_task *task)
{
	const struct sqerr_args *a = task->cl_arg;
	return starfa_band_task_nnz(task, 2, 2, a->ntiles) * starpu_matrix_get_nx(STARPU_TASK_GET_HANDLE(task, 1));
}

STARFA_CODELET(sqerr_band, sqerr_cost, starfa_no_variant, sqerr_cpu, STARFA_CUDA_FUNC(sqerr_cuda));

int starfa_task_sqerr_band(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *A,
			   const starfa_dense *B, float shift, starfa_sums *sums, int64_t slot, const starfa_task_attr *attr)
{
	const char *what = "starfa_task_sqerr_band";
	if (!S || !A || !B)
		return starfa_set_error(STARFA_EINVAL, "%s: missing operand", what);
	if (side != STARFA_ROWS && side != STARFA_COLS)
		return starfa_set_error(STARFA_EINVAL, "%s: unknown side %d", what, (int)side);
	int rc = starfa_check_slot(what, sums, slot);
	if (rc)
		return rc;
	if (side == STARFA_COLS && !starfa_tiled_has_transpose(S))
		return starfa_set_error(STARFA_EINVAL, "%s: S has no transposed grid (starfa_tiling_options.transposed)",
					what);
	const starfa_side other = side == STARFA_ROWS ? STARFA_COLS : STARFA_ROWS;
	const struct starfa_grid *grid = starfa_side_grid(S, side);
	const int64_t a_rows = side == STARFA_ROWS ? S->nrows : S->ncols, b_rows = side == STARFA_ROWS ? S->ncols : S->nrows;
	if (A->rows != a_rows || B->rows != b_rows || A->cols != B->cols ||
	    !starfa_dense_blocked_along(A, starfa_side_bounds(S, side), grid->nr) ||
	    !starfa_dense_blocked_along(B, starfa_side_bounds(S, other), grid->nc))
		return starfa_set_error(STARFA_EINVAL, "%s: A and B must be the side's row and column factors (%lld and %lld "
						       "rows, the same columns), blocked along its grid", what,
					(long long)a_rows, (long long)b_rows);
	int64_t ntiles, nnz;
	struct starpu_data_descr *buffers;
	if ((rc = starfa_band_task_begin(what, S, side, band, &ntiles, &nnz, &buffers, 2, 2)))
		return rc;
	if (ntiles == 0)
		return starfa_band_task_zero(S, side, band, attr, sums->handles[slot], STARFA_ZERO_VARIABLE, buffers);
	int n = 0;
	buffers[n++] = (struct starpu_data_descr){sums->handles[slot], STARPU_W};
	buffers[n++] = (struct starpu_data_descr){A->blocks[band], STARPU_R};
	n = starfa_band_task_tile_pairs(S, side, band, B, buffers, n);
	struct sqerr_args args = {shift, (int)ntiles};
	return starfa_band_task_submit(&sqerr_band_cl, &args, sizeof args, (2.0 * (double)A->cols + 3.0) * (double)nnz, S,
				       side, band, attr, n, buffers);
}
