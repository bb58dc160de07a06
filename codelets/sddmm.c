/* The SDDMM codelet: P = (A·Bᵀ) ∘ pattern(S) per tile, on CPU or CUDA workers. */
#include "codelets/codelet.h"
#include "cpu/sddmm.h"
#ifdef STARFA_USE_CUDA
#include "gpu/sddmm.h"
#include <starpu_cuda.h>
#endif

#include <limits.h>

struct sddmm_args {
	starfa_sddmm_mode mode;
};

/* Buffers: 0 S tile (CSR), 1 A row block, 2 B row block, 3 P tile values. */
static void sddmm_cpu(void *buffers[], void *cl_arg)
{
	const struct sddmm_args *args = cl_arg;
	starfa_cpu_sddmm(STARPU_CSR_GET_NROW(buffers[0]), STARPU_CSR_GET_ROWPTR(buffers[0]),
			 STARPU_CSR_GET_COLIND(buffers[0]), (const float *)STARPU_CSR_GET_NZVAL(buffers[0]),
			 (const float *)STARPU_MATRIX_GET_PTR(buffers[1]), STARPU_MATRIX_GET_LD(buffers[1]),
			 (const float *)STARPU_MATRIX_GET_PTR(buffers[2]), STARPU_MATRIX_GET_LD(buffers[2]),
			 STARPU_MATRIX_GET_NX(buffers[1]), args->mode == STARFA_SDDMM_SCALED,
			 (float *)STARPU_VECTOR_GET_PTR(buffers[3]), starpu_combined_worker_get_size());
}

#ifdef STARFA_USE_CUDA
static void sddmm_cuda(void *buffers[], void *cl_arg)
{
	const struct sddmm_args *args = cl_arg;
	STARFA_CUDA_CHECK("sddmm",
			  starfa_cuda_sddmm(STARPU_CSR_GET_NROW(buffers[0]), STARPU_MATRIX_GET_NY(buffers[2]),
					    STARPU_CSR_GET_NNZ(buffers[0]), STARPU_CSR_GET_ROWPTR(buffers[0]),
					    STARPU_CSR_GET_COLIND(buffers[0]),
					    (const float *)STARPU_CSR_GET_NZVAL(buffers[0]),
					    (const float *)STARPU_MATRIX_GET_PTR(buffers[1]),
					    STARPU_MATRIX_GET_LD(buffers[1]),
					    (const float *)STARPU_MATRIX_GET_PTR(buffers[2]),
					    STARPU_MATRIX_GET_LD(buffers[2]), STARPU_MATRIX_GET_NX(buffers[1]),
					    args->mode == STARFA_SDDMM_SCALED,
					    (float *)STARPU_VECTOR_GET_PTR(buffers[3]), starpu_cuda_get_local_stream()));
}
#endif

/* The real cost: one K-long dot product per nonzero. */
static size_t sddmm_cost(struct starpu_task *task, unsigned nimpl)
{
	(void)nimpl;
	return (size_t)starpu_csr_get_nnz(task->handles[0]) * starpu_matrix_get_nx(task->handles[1]);
}

static uint32_t sddmm_footprint(struct starpu_task *task)
{
	const struct sddmm_args *args = task->cl_arg;
	return starfa_cost_footprint(sddmm_cost(task, 0), (uint32_t)args->mode);
}

STARFA_PERFMODEL(sddmm, sddmm_cost, sddmm_footprint);

static struct starpu_codelet sddmm_cl = {
	.name = "starfa_sddmm",
	.type = STARPU_FORKJOIN, /* the CPU kernel spreads over a combined worker's cores */
	.max_parallelism = INT_MAX,
	.cpu_funcs = {sddmm_cpu},
	.cpu_funcs_name = {"sddmm_cpu"},
#ifdef STARFA_USE_CUDA
	.cuda_funcs = {sddmm_cuda},
	.cuda_flags = {STARPU_CUDA_ASYNC},
#endif
	.nbuffers = 4,
	.modes = {STARPU_R, STARPU_R, STARPU_R, STARPU_W},
	.model = &sddmm_model,
};

int starfa_insert_sddmm(const starfa_tiled *S, const starfa_dense *A, const starfa_dense *B, starfa_sddmm_mode mode,
			starfa_sparse_values *P)
{
	if (!S || !A || !B || !P)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_sddmm: missing operand");
	if (mode != STARFA_SDDMM_PATTERN && mode != STARFA_SDDMM_SCALED)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_sddmm: unknown mode %d", (int)mode);
	if (A->rows != S->nrows || B->rows != S->ncols || A->cols != B->cols)
		return starfa_set_error(STARFA_EINVAL,
					"starfa_insert_sddmm: S is %lldx%lld but A is %lldx%lld and B %lldx%lld",
					(long long)S->nrows, (long long)S->ncols, (long long)A->rows,
					(long long)A->cols, (long long)B->rows, (long long)B->cols);
	if (A->nblocks != S->grid.nr || B->nblocks != S->grid.nc || P->pattern != S)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_sddmm: A, B and P must be blocked along S's "
						       "row and column tiles (create them from S)");
	double k = (double)A->cols;
	for (int64_t i = 0; i < S->grid.nr; i++)
		for (int64_t j = 0; j < S->grid.nc; j++) {
			const struct starfa_tile *tile = starfa_grid_tile(&S->grid, i, j);
			if (tile->nnz == 0)
				continue;
			struct sddmm_args *args = malloc(sizeof *args); /* StarPU frees it (STARPU_CL_ARGS) */
			if (!args)
				return starfa_set_error(STARFA_ENOMEM, "out of memory inserting sddmm tasks");
			args->mode = mode;
			int ret = starpu_task_insert(&sddmm_cl, STARPU_R, tile->handle, STARPU_R, A->blocks[i],
						     STARPU_R, B->blocks[j], STARPU_W, P->handles[i * S->grid.nc + j],
						     STARPU_CL_ARGS, args, sizeof *args, STARPU_FLOPS,
						     2.0 * k * (double)tile->nnz, STARPU_NAME, "sddmm", 0);
			if (ret != 0)
				return starfa_insert_failed("sddmm", ret);
		}
	return 0;
}
