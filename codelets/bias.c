/* The bias codelet: per-row right-hand sides b_u = sum t theta of a band, tile by tile. */
#include "codelets/band.h"
#include "cpu/bias.h"
#ifdef STARFA_USE_CUDA
#include "gpu/bias.h"
#include <starpu_cuda.h>
#define BIAS_CUDA .cuda_funcs = {bias_cuda}, .cuda_flags = {STARPU_CUDA_ASYNC},
#else
#define BIAS_CUDA
#endif

#include <limits.h>
#include <string.h>

struct bias_args {
	int64_t col0, k;    /* theta's columns in use */
	int64_t offset_col; /* explicit: theta's column subtracted from each rating (the other side's bias); -1 none */
	float mu;           /* explicit: subtracted from each rating */
	int implicit;       /* t = 1 + alpha * r instead */
	float alpha;
	int accumulate;     /* 0: the band's first tile overwrites b; 1: later tiles add to it */
};

/* Buffers: 0 S tile (CSR), 1 theta block (the tile's columns), 2 b slot (the band's right-hand sides). */
static void bias_cpu(void *buffers[], void *cl_arg)
{
	const struct bias_args *args = cl_arg;
	const float *theta = (const float *)STARPU_MATRIX_GET_PTR(buffers[1]);
	starfa_cpu_bias(STARPU_CSR_GET_NROW(buffers[0]), STARPU_CSR_GET_ROWPTR(buffers[0]),
			STARPU_CSR_GET_COLIND(buffers[0]), (const float *)STARPU_CSR_GET_NZVAL(buffers[0]),
			theta + args->col0, STARPU_MATRIX_GET_LD(buffers[1]), args->k,
			args->offset_col >= 0 ? theta + args->offset_col : NULL, args->mu, args->implicit, args->alpha,
			args->accumulate, (float *)STARPU_VECTOR_GET_PTR(buffers[2]), args->k,
			starpu_combined_worker_get_size());
}

#ifdef STARFA_USE_CUDA
static void bias_cuda(void *buffers[], void *cl_arg)
{
	const struct bias_args *args = cl_arg;
	const float *theta = (const float *)STARPU_MATRIX_GET_PTR(buffers[1]);
	STARFA_CUDA_CHECK("bias", starfa_cuda_bias(STARPU_CSR_GET_NROW(buffers[0]), STARPU_CSR_GET_ROWPTR(buffers[0]),
						   STARPU_CSR_GET_COLIND(buffers[0]),
						   (const float *)STARPU_CSR_GET_NZVAL(buffers[0]), theta + args->col0,
						   STARPU_MATRIX_GET_LD(buffers[1]), args->k,
						   args->offset_col >= 0 ? theta + args->offset_col : NULL, args->mu,
						   args->implicit, args->alpha, args->accumulate,
						   (float *)STARPU_VECTOR_GET_PTR(buffers[2]), args->k,
						   starpu_cuda_get_local_stream()));
}
#endif

/* The real cost: one k-long scaled add per nonzero. */
static size_t bias_cost(struct starpu_task *task, unsigned nimpl)
{
	(void)nimpl;
	const struct bias_args *args = task->cl_arg;
	return (size_t)starpu_csr_get_nnz(task->handles[0]) * (size_t)args->k;
}

static uint32_t bias_footprint(struct starpu_task *task)
{
	const struct bias_args *args = task->cl_arg;
	return starfa_cost_footprint(bias_cost(task, 0), (uint32_t)(args->accumulate | args->implicit << 1));
}

STARFA_PERFMODEL(bias, bias_cost, bias_footprint);

static struct starpu_codelet bias_first_cl = {
	.name = "starfa_bias",
	.type = STARPU_FORKJOIN, /* the CPU kernel spreads over a combined worker's cores */
	.max_parallelism = INT_MAX,
	.cpu_funcs = {bias_cpu},
	.cpu_funcs_name = {"bias_cpu"},
	BIAS_CUDA
	.nbuffers = 3,
	.modes = {STARPU_R, STARPU_R, STARPU_W},
	.model = &bias_model,
};

static struct starpu_codelet bias_accumulate_cl = {
	.name = "starfa_bias_accumulate",
	.type = STARPU_FORKJOIN,
	.max_parallelism = INT_MAX,
	.cpu_funcs = {bias_cpu},
	.cpu_funcs_name = {"bias_cpu"},
	BIAS_CUDA
	.nbuffers = 3,
	.modes = {STARPU_R, STARPU_R, STARPU_RW},
	.model = &bias_model,
};

int starfa_insert_bias(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *theta,
		       int64_t col0, int64_t offset_col, float mu, starfa_feedback feedback, float alpha,
		       starfa_systems *sys)
{
	const struct starfa_grid *grid = starfa_band_grid("starfa_insert_bias", S, side, band, theta, col0, sys);
	if (!grid)
		return STARFA_EINVAL;
	if (offset_col < -1 || offset_col >= theta->cols)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_bias: offset column %lld outside -1..%lld",
					(long long)offset_col, (long long)theta->cols - 1);
	double k = (double)sys->k;
	int first = 1;
	for (int64_t j = 0; j < grid->nc; j++) {
		const struct starfa_tile *tile = starfa_grid_tile(grid, band, j);
		if (tile->nnz == 0)
			continue;
		struct bias_args *args = malloc(sizeof *args); /* StarPU frees it (STARPU_CL_ARGS) */
		if (!args)
			return starfa_set_error(STARFA_ENOMEM, "out of memory inserting bias tasks");
		*args = (struct bias_args){col0, sys->k, offset_col, mu, feedback == STARFA_IMPLICIT, alpha, !first};
		int ret = starpu_task_insert(first ? &bias_first_cl : &bias_accumulate_cl, STARPU_R, tile->handle,
					     STARPU_R, theta->blocks[j], first ? STARPU_W : STARPU_RW,
					     starfa_systems_slot_b(sys, band), STARPU_CL_ARGS, args, sizeof *args, STARPU_FLOPS,
					     2.0 * k * (double)tile->nnz, STARPU_NAME, "bias", 0);
		if (ret != 0)
			return starfa_insert_failed("bias", ret);
		first = 0;
	}
	/* A band without nonzeros still needs its right-hand sides (all zero) before its solve. */
	if (first)
		return starfa_insert_vector_zero(starfa_systems_slot_b(sys, band), "bias_zero");
	return 0;
}
