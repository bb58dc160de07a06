/* The hermitian codelet: per-row Gram matrices A_u = sum w theta theta^T of a band, tile by tile. */
#include "codelets/band.h"
#include "codelets/zero.h"
#include "cpu/hermitian.h"
#ifdef STARFA_USE_CUDA
#include "gpu/hermitian.h"
#include <starpu_cuda.h>
#endif

#include <stdio.h>
#include <string.h>

struct hermitian_args {
	int64_t col0, k;  /* theta's columns in use */
	int accumulate;   /* 0: the band's first tile overwrites A; 1: later tiles add to it */
	int weighted;     /* implicit feedback: w = alpha * r */
	float alpha;
	int fp16;         /* A in FP16, scaled by 1 / s_u (column 1 of the row information) */
};

/* Buffers: 0 S tile (CSR), 1 theta block (the tile's columns), 2 row information (the band's rows:
 * lambda_u, s_u), 3 A slot (the band's systems). */
static void hermitian_cpu(void *buffers[], void *cl_arg)
{
	const struct hermitian_args *args = cl_arg;
	const float *info = (const float *)STARPU_MATRIX_GET_PTR(buffers[2]);
	int rc = starfa_cpu_hermitian(STARPU_CSR_GET_NROW(buffers[0]), STARPU_CSR_GET_ROWPTR(buffers[0]),
				      STARPU_CSR_GET_COLIND(buffers[0]), (const float *)STARPU_CSR_GET_NZVAL(buffers[0]),
				      (const float *)STARPU_MATRIX_GET_PTR(buffers[1]) + args->col0,
				      STARPU_MATRIX_GET_LD(buffers[1]), args->k, args->weighted, args->alpha,
				      args->fp16 ? info + 1 : NULL, STARPU_MATRIX_GET_LD(buffers[2]), args->accumulate,
				      args->fp16, (void *)STARPU_VECTOR_GET_PTR(buffers[3]), 1);
	if (rc != 0) /* a kernel cannot return an error through StarPU: no wrong answer goes on */
		starfa_cpu_fail("hermitian");
}

#ifdef STARFA_USE_CUDA
static void hermitian_cuda(void *buffers[], void *cl_arg)
{
	const struct hermitian_args *args = cl_arg;
	const float *info = (const float *)STARPU_MATRIX_GET_PTR(buffers[2]);
	STARFA_CUDA_CHECK("hermitian",
			  starfa_cuda_hermitian(STARPU_CSR_GET_NROW(buffers[0]), STARPU_CSR_GET_ROWPTR(buffers[0]),
						STARPU_CSR_GET_COLIND(buffers[0]),
						(const float *)STARPU_CSR_GET_NZVAL(buffers[0]),
						(const float *)STARPU_MATRIX_GET_PTR(buffers[1]) + args->col0,
						STARPU_MATRIX_GET_LD(buffers[1]), args->k, args->weighted, args->alpha,
						args->fp16 ? info + 1 : NULL, STARPU_MATRIX_GET_LD(buffers[2]),
						args->accumulate, args->fp16, (void *)STARPU_VECTOR_GET_PTR(buffers[3]),
						starfa_cuda_gram_precision_choose(starfa_gram_precision_setting(), 0),
						starpu_cuda_get_local_stream()));
}

/* The CUDA kernel keeps a row's k x k sum in one block's shared memory. */
static int hermitian_can_execute(unsigned workerid, struct starpu_task *task, unsigned nimpl)
{
	(void)nimpl;
	return starpu_worker_get_type((int)workerid) != STARPU_CUDA_WORKER ||
	       ((const struct hermitian_args *)task->cl_arg)->k <= STARFA_CUDA_ALS_MAX_K;
}
#define HERMITIAN_CUDA STARFA_CUDA_FUNC(hermitian_cuda), .can_execute = hermitian_can_execute
#else
#define HERMITIAN_CUDA STARFA_CUDA_FUNC(NULL)
#endif

/* The real cost: one k x k rank-one update per nonzero. */
static uint64_t hermitian_cost(const struct starpu_task *task)
{
	const struct hermitian_args *args = task->cl_arg;
	return (uint64_t)starpu_csr_get_nnz(task->handles[0]) * (uint64_t)(args->k * args->k);
}

/* The first tile of a band writes its systems without fetching what the slot held (W); the others
 * add to them (RW): one codelet, separate histories. */
static uint32_t hermitian_variant(const struct starpu_task *task)
{
	const struct hermitian_args *args = task->cl_arg;
	return (uint32_t)(args->accumulate | args->weighted << 1 | args->fp16 << 2);
}

STARFA_CODELET(hermitian, hermitian_cost, hermitian_variant, hermitian_cpu, HERMITIAN_CUDA);

int starfa_task_hermitian(const starfa_tiled *S, starfa_side side, int64_t band, int64_t j, const starfa_dense *theta,
			  int64_t col0, starfa_feedback feedback, float alpha, const starfa_dense *info,
			  starfa_systems *sys, int accumulate, const starfa_task_attr *attr)
{
	const char *what = "starfa_task_hermitian";
	const struct starfa_grid *grid = starfa_band_grid(what, S, side, band, theta, col0, sys);
	if (!grid || starfa_systems_storable(sys, what))
		return STARFA_EINVAL;
	int64_t side_rows = side == STARFA_ROWS ? S->nrows : S->ncols;
	if (!info || info->rows != side_rows || info->cols != 2 || info->nblocks != grid->nr)
		return starfa_set_error(STARFA_EINVAL, "%s: the row information must be %lldx2, blocked along the "
						       "side's bands", what, (long long)side_rows);
	if (j < 0 || j >= grid->nc)
		return starfa_index_error(what, "tile", band, j, grid->nr, grid->nc);
	const struct starfa_tile *tile = starfa_grid_tile(grid, band, j);
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_band_where(S, side, band));
	/* An empty tile adds nothing; as the band's first it leaves systems (all zero) for the solve. */
	if (tile->nnz == 0)
		return accumulate ? 0 : starfa_submit_zero(starfa_systems_slot_A(sys, band), STARFA_ZERO_VECTOR, attr);
	struct hermitian_args args = {col0, sys->k, accumulate != 0, feedback == STARFA_IMPLICIT, alpha, sys->fp16};
	double k = (double)sys->k;
	return starfa_submit(&hermitian_cl, &args, sizeof args, k * (k + 1) * (double)tile->nnz, attr,
			     STARFA_BUFFERS({tile->handle, STARPU_R}, {theta->blocks[j], STARPU_R},
					    {info->blocks[band], STARPU_R},
					    {starfa_systems_slot_A(sys, band), accumulate ? STARPU_RW : STARPU_W}));
}
