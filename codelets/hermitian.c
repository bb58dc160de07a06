/* The hermitian codelet: per-row Gram matrices A_u = sum w theta theta^T of a band, tile by tile. */
#include "codelets/codelet.h"
#include "cpu/hermitian.h"
#include "codelets/band.h"
#ifdef STARFA_USE_CUDA
#include "gpu/hermitian.h"
#include <starpu_cuda.h>
#endif

#include <limits.h>
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
				      args->fp16, (void *)STARPU_VECTOR_GET_PTR(buffers[3]),
				      starpu_combined_worker_get_size());
	if (rc != 0) { /* a kernel cannot return an error through StarPU: no wrong answer goes on */
		fprintf(stderr, "starfa: codelet hermitian: out of memory for scratch on worker %d\n",
			starpu_worker_get_id());
		abort();
	}
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
						starfa_cuda_gram_precision_default(), starpu_cuda_get_local_stream()));
}

/* The CUDA kernel keeps a row's k x k sum in one block's shared memory. */
static int hermitian_can_execute(unsigned workerid, struct starpu_task *task, unsigned nimpl)
{
	(void)nimpl;
	return starpu_worker_get_type((int)workerid) != STARPU_CUDA_WORKER ||
	       ((const struct hermitian_args *)task->cl_arg)->k <= STARFA_CUDA_ALS_MAX_K;
}
#define HERMITIAN_CUDA .cuda_funcs = {hermitian_cuda}, .cuda_flags = {STARPU_CUDA_ASYNC}, \
		       .can_execute = hermitian_can_execute,
#else
#define HERMITIAN_CUDA
#endif

/* The real cost: one k x k rank-one update per nonzero. */
static size_t hermitian_cost(struct starpu_task *task, unsigned nimpl)
{
	(void)nimpl;
	const struct hermitian_args *args = task->cl_arg;
	return (size_t)starpu_csr_get_nnz(task->handles[0]) * (size_t)(args->k * args->k);
}

static uint32_t hermitian_footprint(struct starpu_task *task)
{
	const struct hermitian_args *args = task->cl_arg;
	return starfa_cost_footprint(hermitian_cost(task, 0),
				     (uint32_t)(args->accumulate | args->weighted << 1 | args->fp16 << 2));
}

STARFA_PERFMODEL(hermitian, hermitian_cost, hermitian_footprint);

/* The first tile of a band writes its systems without fetching what the slot held (W); the others
 * add to them (RW). Sequential consistency on the slot orders them. */
static struct starpu_codelet hermitian_first_cl = {
	.name = "starfa_hermitian",
	.type = STARPU_FORKJOIN, /* the CPU kernel spreads over a combined worker's cores */
	.max_parallelism = INT_MAX,
	.cpu_funcs = {hermitian_cpu},
	.cpu_funcs_name = {"hermitian_cpu"},
	HERMITIAN_CUDA
	.nbuffers = 4,
	.modes = {STARPU_R, STARPU_R, STARPU_R, STARPU_W},
	.model = &hermitian_model,
};

static struct starpu_codelet hermitian_accumulate_cl = {
	.name = "starfa_hermitian_accumulate",
	.type = STARPU_FORKJOIN,
	.max_parallelism = INT_MAX,
	.cpu_funcs = {hermitian_cpu},
	.cpu_funcs_name = {"hermitian_cpu"},
	HERMITIAN_CUDA
	.nbuffers = 4,
	.modes = {STARPU_R, STARPU_R, STARPU_R, STARPU_RW},
	.model = &hermitian_model,
};

int starfa_insert_hermitian(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *theta,
			    int64_t col0, starfa_feedback feedback, float alpha, const starfa_dense *info,
			    starfa_systems *sys)
{
	const struct starfa_grid *grid = starfa_band_grid("starfa_insert_hermitian", S, side, band, theta, col0, sys);
	if (!grid)
		return STARFA_EINVAL;
	int64_t side_rows = side == STARFA_ROWS ? S->nrows : S->ncols;
	if (!info || info->rows != side_rows || info->cols != 2 || info->nblocks != grid->nr)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_hermitian: the row information must be %lldx2, "
						       "blocked along the side's bands", (long long)side_rows);
	double k = (double)sys->k;
	int first = 1;
	for (int64_t j = 0; j < grid->nc; j++) {
		const struct starfa_tile *tile = starfa_grid_tile(grid, band, j);
		if (tile->nnz == 0)
			continue;
		struct hermitian_args *args = malloc(sizeof *args); /* StarPU frees it (STARPU_CL_ARGS) */
		if (!args)
			return starfa_set_error(STARFA_ENOMEM, "out of memory inserting hermitian tasks");
		*args = (struct hermitian_args){col0, sys->k, !first, feedback == STARFA_IMPLICIT, alpha, sys->fp16};
		int ret = starpu_task_insert(first ? &hermitian_first_cl : &hermitian_accumulate_cl, STARPU_R,
					     tile->handle, STARPU_R, theta->blocks[j], STARPU_R, info->blocks[band],
					     first ? STARPU_W : STARPU_RW, starfa_systems_slot_A(sys, band), STARPU_CL_ARGS,
					     args, sizeof *args, STARPU_FLOPS, k * (k + 1) * (double)tile->nnz,
					     STARPU_NAME, "hermitian", 0);
		if (ret != 0)
			return starfa_insert_failed("hermitian", ret);
		first = 0;
	}
	/* A band without nonzeros still needs its systems (all zero) before its solve. */
	if (first)
		return starfa_insert_vector_zero(starfa_systems_slot_A(sys, band), "hermitian_zero");
	return 0;
}
