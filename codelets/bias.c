/* The bias codelet: per-row right-hand sides b_u = sum t theta of a band, tile by tile. */
#include "codelets/band.h"
#include "codelets/zero.h"
#include "cpu/bias.h"
#ifdef STARFA_USE_CUDA
#include "gpu/bias.h"
#include <starpu_cuda.h>
#endif

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
			args->accumulate, (float *)STARPU_VECTOR_GET_PTR(buffers[2]), args->k, 1);
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
static uint64_t bias_cost(const struct starpu_task *task)
{
	const struct bias_args *args = task->cl_arg;
	return (uint64_t)starpu_csr_get_nnz(task->handles[0]) * (uint64_t)args->k;
}

/* Overwriting (the band's first tile) and accumulating tasks: separate histories. */
static uint32_t bias_variant(const struct starpu_task *task)
{
	const struct bias_args *args = task->cl_arg;
	return (uint32_t)(args->accumulate | args->implicit << 1);
}

STARFA_CODELET(bias, bias_cost, bias_variant, bias_cpu, STARFA_CUDA_FUNC(bias_cuda));

int starfa_task_bias(const starfa_tiled *S, starfa_side side, int64_t band, int64_t j, const starfa_dense *theta,
		     int64_t col0, int64_t offset_col, float mu, starfa_feedback feedback, float alpha,
		     starfa_systems *sys, int accumulate, const starfa_task_attr *attr)
{
	const char *what = "starfa_task_bias";
	const struct starfa_grid *grid = starfa_band_grid(what, S, side, band, theta, col0, sys);
	if (!grid || starfa_systems_storable(sys, what))
		return STARFA_EINVAL;
	if (offset_col < -1 || offset_col >= theta->cols)
		return starfa_set_error(STARFA_EINVAL, "%s: offset column %lld outside -1..%lld", what,
					(long long)offset_col, (long long)theta->cols - 1);
	if (j < 0 || j >= grid->nc)
		return starfa_index_error(what, "tile", band, j, grid->nr, grid->nc);
	const struct starfa_tile *tile = starfa_grid_tile(grid, band, j);
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_band_where(S, side, band));
	/* An empty tile adds nothing; as the band's first it leaves right-hand sides (all zero). */
	if (tile->nnz == 0)
		return accumulate ? 0 : starfa_submit_zero(starfa_systems_slot_b(sys, band), STARFA_ZERO_VECTOR, attr);
	struct bias_args args = {col0, sys->k, offset_col, mu, feedback == STARFA_IMPLICIT, alpha, accumulate != 0};
	return starfa_submit(&bias_cl, &args, sizeof args, 2.0 * (double)sys->k * (double)tile->nnz, attr,
			     STARFA_BUFFERS({tile->handle, STARPU_R}, {theta->blocks[j], STARPU_R},
					    {starfa_systems_slot_b(sys, band), accumulate ? STARPU_RW : STARPU_W}));
}
