/* The solve codelet: one band's batch of small SPD systems, exact or by warm-started CG. */
#include "codelets/codelet.h"
#include "cpu/solve.h"
#include "storage/systems.h"
#ifdef STARFA_USE_CUDA
#include "gpu/solve.h"
#include <starpu_cuda.h>
#endif

#include <stdio.h>

struct solve_args {
	int64_t col0, k;  /* X's columns solved for */
	int solver;       /* starfa_solver */
	int cg_steps;
	int fp16;         /* A in FP16, scaled by 1 / s_u */
	int gram;         /* a G buffer follows: added to every system */
};

/* Buffers: 0 A slot (the band's systems), 1 b slot (right-hand sides), 2 row information (lambda_u,
 * s_u), 3 X block (the band's factors, read as CG's start), 4 status (STARFA_SOLVE_STATUS_WORDS words),
 * and with gram 5 G (k x k). */
static void solve_cpu(void *buffers[], void *cl_arg)
{
	const struct solve_args *args = cl_arg;
	const float *info = (const float *)STARPU_MATRIX_GET_PTR(buffers[2]);
	int rc = starfa_cpu_solve(STARPU_MATRIX_GET_NY(buffers[3]), args->k, (const void *)STARPU_VECTOR_GET_PTR(buffers[0]),
				  args->fp16, (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), args->k, info,
				  args->fp16 ? info + 1 : NULL, STARPU_MATRIX_GET_LD(buffers[2]),
				  args->gram ? (const float *)STARPU_MATRIX_GET_PTR(buffers[5]) : NULL,
				  args->solver == STARFA_SOLVER_CG ? STARFA_CPU_CG : STARFA_CPU_CHOLESKY, args->cg_steps,
				  (float *)STARPU_MATRIX_GET_PTR(buffers[3]) + args->col0, STARPU_MATRIX_GET_LD(buffers[3]),
				  (uint32_t *)STARPU_VECTOR_GET_PTR(buffers[4]), 1);
	if (rc != 0)
		starfa_cpu_fail("solve");
}

#ifdef STARFA_USE_CUDA
static void solve_cuda(void *buffers[], void *cl_arg)
{
	const struct solve_args *args = cl_arg;
	const float *info = (const float *)STARPU_MATRIX_GET_PTR(buffers[2]);
	STARFA_CUDA_CHECK("solve",
			  starfa_cuda_solve(STARPU_MATRIX_GET_NY(buffers[3]), args->k,
					    (const void *)STARPU_VECTOR_GET_PTR(buffers[0]), args->fp16,
					    (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), args->k, info,
					    args->fp16 ? info + 1 : NULL, STARPU_MATRIX_GET_LD(buffers[2]),
					    args->gram ? (const float *)STARPU_MATRIX_GET_PTR(buffers[5]) : NULL,
					    args->solver == STARFA_SOLVER_CHOLESKY, args->cg_steps,
					    (float *)STARPU_MATRIX_GET_PTR(buffers[3]) + args->col0,
					    STARPU_MATRIX_GET_LD(buffers[3]), (uint32_t *)STARPU_VECTOR_GET_PTR(buffers[4]),
					    starpu_cuda_get_local_stream()));
}

/* The CUDA kernel solves a system in one block's shared memory. */
static int solve_can_execute(unsigned workerid, struct starpu_task *task, unsigned nimpl)
{
	(void)nimpl;
	return starpu_worker_get_type((int)workerid) != STARPU_CUDA_WORKER ||
	       ((const struct solve_args *)task->cl_arg)->k <= STARFA_CUDA_ALS_MAX_K;
}
#define SOLVE_CUDA STARFA_CUDA_FUNC(solve_cuda), .can_execute = solve_can_execute
#else
#define SOLVE_CUDA STARFA_CUDA_FUNC(NULL)
#endif

/* The real cost: rows x k^3 for Cholesky, rows x (steps + 1) x k^2 for CG. */
static uint64_t solve_cost(const struct starpu_task *task)
{
	const struct solve_args *args = task->cl_arg;
	uint64_t rows = starpu_matrix_get_ny(task->handles[3]), k = (uint64_t)args->k;
	return args->solver == STARFA_SOLVER_CG ? rows * (uint64_t)(args->cg_steps + 1) * k * k : rows * k * k * k;
}

static uint32_t solve_variant(const struct starpu_task *task)
{
	const struct solve_args *args = task->cl_arg;
	return (uint32_t)(args->solver | args->fp16 << 1 | args->gram << 2);
}

STARFA_CODELET(solve, solve_cost, solve_variant, solve_cpu, SOLVE_CUDA);

int starfa_task_solve(starfa_systems *sys, int64_t band, const starfa_dense *info, const starfa_gram *G,
		      starfa_solver solver, int cg_steps, starfa_dense *X, int64_t col0, const starfa_task_attr *attr)
{
	if (!sys || !info || !X)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_solve: missing operand");
	if (band < 0 || band >= sys->nbands)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_solve: band %lld outside 0..%lld", (long long)band,
					(long long)sys->nbands - 1);
	if (solver != STARFA_SOLVER_CHOLESKY && solver != STARFA_SOLVER_CG)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_solve: unknown solver %d", (int)solver);
	if (starfa_systems_storable(sys, "starfa_task_solve"))
		return STARFA_EINVAL;
	if (solver == STARFA_SOLVER_CG && cg_steps < 1)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_solve: CG needs at least one step");
	int64_t side_rows = sys->side == STARFA_ROWS ? sys->S->nrows : sys->S->ncols;
	if (X->rows != side_rows || X->nblocks != sys->nbands || col0 < 0 || col0 + sys->k > X->cols)
		return starfa_set_error(STARFA_EINVAL,
					"starfa_task_solve: X must have %lld rows blocked along the side's bands and "
					"columns %lld..%lld, but it is %lldx%lld in %lld blocks",
					(long long)side_rows, (long long)col0, (long long)(col0 + sys->k - 1),
					(long long)X->rows, (long long)X->cols, (long long)X->nblocks);
	if (info->rows != side_rows || info->cols != 2 || info->nblocks != sys->nbands)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_solve: the row information must be %lldx2, "
						       "blocked along the side's bands", (long long)side_rows);
	if (G && G->k != sys->k)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_solve: G is %lldx%lld, the systems %lldx%lld",
					(long long)G->k, (long long)G->k, (long long)sys->k, (long long)sys->k);
	struct solve_args args = {col0, sys->k, (int)solver, cg_steps, sys->fp16, G != NULL};
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_band_where(sys->S, sys->side, band));
	double rows = (double)(sys->bounds[band + 1] - sys->bounds[band]), k = (double)sys->k;
	double flops = solver == STARFA_SOLVER_CG ? rows * (cg_steps + 1) * (2.0 * k * k * (G ? 2 : 1) + 10.0 * k)
						  : rows * (k * k * k / 3.0 + 2.0 * k * k);
	if (G)
		return starfa_submit(&solve_cl, &args, sizeof args, flops, attr,
				     STARFA_BUFFERS({starfa_systems_slot_A(sys, band), STARPU_R},
						    {starfa_systems_slot_b(sys, band), STARPU_R}, {info->blocks[band], STARPU_R},
						    {X->blocks[band], STARPU_RW}, {sys->status[band], STARPU_W},
						    {G->handle, STARPU_R}));
	return starfa_submit(&solve_cl, &args, sizeof args, flops, attr,
			     STARFA_BUFFERS({starfa_systems_slot_A(sys, band), STARPU_R},
					    {starfa_systems_slot_b(sys, band), STARPU_R}, {info->blocks[band], STARPU_R},
					    {X->blocks[band], STARPU_RW}, {sys->status[band], STARPU_W}));
}

int starfa_insert_solve(starfa_systems *sys, int64_t band, const starfa_dense *info, const starfa_gram *G,
			starfa_solver solver, int cg_steps, starfa_dense *X, int64_t col0)
{
	return starfa_task_solve(sys, band, info, G, solver, cg_steps, X, col0, NULL);
}
