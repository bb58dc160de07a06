/* The SDDMM codelet: P = alpha (A·Bᵀ) ∘ pattern(S) + beta P on one tile, on CPU or CUDA workers. */
#include "codelets/codelet.h"
#include "cpu/sddmm.h"
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
