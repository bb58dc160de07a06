/* The rowsolve codelet: one band's rows built and solved in one task over all the band's tiles (the
 * fused hermitian + bias + solve; no systems in memory). */
#include "codelets/band.h"
#include "cpu/rowsolve.h"

#include <limits.h>
#include <stdio.h>

struct rowsolve_args {
	int64_t col0, k;    /* theta's columns in use */
	int64_t offset_col; /* explicit: theta's column subtracted from each rating; -1 none */
	int64_t x_col0;     /* X's columns solved for */
	float mu, alpha;
	int implicit, solver, cg_steps, gram;
	int ntiles;         /* tiles with entries: buffers 2t (tile) and 2t + 1 (its theta block) */
	uint64_t cost;      /* the perfmodel's size (rowsolve_cost) */
};

/* Buffers: per tile with entries, the S tile (CSR) and the theta block of its columns; then the row
 * information (lambda_u, s_u), the X block (RW: CG's start), the status words, and with gram G. */
static void rowsolve_cpu(void *buffers[], void *cl_arg)
{
	const struct rowsolve_args *args = cl_arg;
	const int nt = args->ntiles;
	struct starfa_cpu_rowsolve_tile tiles[nt > 0 ? nt : 1];
	for (int t = 0; t < nt; t++) {
		const float *theta = (const float *)STARPU_MATRIX_GET_PTR(buffers[2 * t + 1]);
		int64_t ld = STARPU_MATRIX_GET_LD(buffers[2 * t + 1]);
		tiles[t] = (struct starfa_cpu_rowsolve_tile){
			STARPU_CSR_GET_ROWPTR(buffers[2 * t]), STARPU_CSR_GET_COLIND(buffers[2 * t]),
			(const float *)STARPU_CSR_GET_NZVAL(buffers[2 * t]), theta + args->col0, ld,
			args->offset_col >= 0 ? theta + args->offset_col : NULL};
	}
	void *info = buffers[2 * nt], *X = buffers[2 * nt + 1];
	const struct starfa_cpu_rowsolve pb = {
		.nrows = STARPU_MATRIX_GET_NY(X),
		.k = args->k,
		.ntiles = nt,
		.tiles = tiles,
		.implicit = args->implicit,
		.alpha = args->alpha,
		.mu = args->mu,
		.lambda = (const float *)STARPU_MATRIX_GET_PTR(info),
		.info_ld = STARPU_MATRIX_GET_LD(info),
		.G = args->gram ? (const float *)STARPU_MATRIX_GET_PTR(buffers[2 * nt + 3]) : NULL,
		.solver = args->solver == STARFA_SOLVER_CG ? STARFA_CPU_CG : STARFA_CPU_CHOLESKY,
		.cg_steps = args->cg_steps,
		.X = (float *)STARPU_MATRIX_GET_PTR(X) + args->x_col0,
		.ldx = STARPU_MATRIX_GET_LD(X),
	};
	if (starfa_cpu_rowsolve(&pb, (uint32_t *)STARPU_VECTOR_GET_PTR(buffers[2 * nt + 2]),
				starpu_combined_worker_get_size()) != 0) {
		fprintf(stderr, "starfa: codelet rowsolve: out of memory for scratch on worker %d\n",
			starpu_worker_get_id());
		abort();
	}
}

/* The real cost, computed at insertion: per entry k^2 (forming M_u) or 4 k per CG step (matrix-free),
 * per row k^3 / 3 (Cholesky) or k^2 per CG step. */
static uint64_t rowsolve_cost_of(int64_t nnz, int64_t rows, int64_t k, starfa_solver solver, int cg_steps)
{
	uint64_t n = (uint64_t)nnz, r = (uint64_t)rows, kk = (uint64_t)k, s = (uint64_t)cg_steps + 1;
	if (solver == STARFA_SOLVER_CHOLESKY)
		return n * kk * kk + r * kk * kk * kk / 3;
	if (starfa_cpu_rowsolve_matrix_free(k, cg_steps))
		return n * 4 * kk * s + r * kk * kk * s;
	return n * kk * kk + r * kk * kk * s;
}

static size_t rowsolve_cost(struct starpu_task *task, unsigned nimpl)
{
	(void)nimpl;
	return (size_t)((const struct rowsolve_args *)task->cl_arg)->cost;
}

static uint32_t rowsolve_footprint(struct starpu_task *task)
{
	const struct rowsolve_args *args = task->cl_arg;
	return starfa_cost_footprint(args->cost, (uint32_t)(args->solver | args->implicit << 1 | args->gram << 2));
}

STARFA_PERFMODEL(rowsolve, rowsolve_cost, rowsolve_footprint);

static struct starpu_codelet rowsolve_cl = {
	.name = "starfa_rowsolve",
	.type = STARPU_FORKJOIN, /* the CPU kernel spreads over a combined worker's cores */
	.max_parallelism = INT_MAX,
	.cpu_funcs = {rowsolve_cpu},
	.cpu_funcs_name = {"rowsolve_cpu"},
	.nbuffers = STARPU_VARIABLE_NBUFFERS, /* two per tile of the band */
	.model = &rowsolve_model,
};

int starfa_insert_rowsolve(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *theta,
			   int64_t col0, int64_t offset_col, float mu, starfa_feedback feedback, float alpha,
			   const starfa_dense *info, const starfa_gram *G, starfa_solver solver, int cg_steps,
			   starfa_dense *X, int64_t x_col0, starfa_systems *sys)
{
	const struct starfa_grid *grid = starfa_band_grid("starfa_insert_rowsolve", S, side, band, theta, col0, sys);
	if (!grid)
		return STARFA_EINVAL;
	const int64_t k = sys->k, side_rows = side == STARFA_ROWS ? S->nrows : S->ncols;
	if (offset_col < -1 || offset_col >= theta->cols)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_rowsolve: offset column %lld outside -1..%lld",
					(long long)offset_col, (long long)theta->cols - 1);
	if (!info || info->rows != side_rows || info->cols != 2 || info->nblocks != grid->nr)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_rowsolve: the row information must be %lldx2, "
						       "blocked along the side's bands", (long long)side_rows);
	if (solver != STARFA_SOLVER_CHOLESKY && solver != STARFA_SOLVER_CG)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_rowsolve: unknown solver %d", (int)solver);
	if (solver == STARFA_SOLVER_CG && cg_steps < 1)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_rowsolve: CG needs at least one step");
	if (!X || X->rows != side_rows || X->nblocks != grid->nr || x_col0 < 0 || x_col0 + k > X->cols)
		return starfa_set_error(STARFA_EINVAL,
					"starfa_insert_rowsolve: X must have %lld rows blocked along the side's bands "
					"and columns %lld..%lld", (long long)side_rows, (long long)x_col0,
					(long long)(x_col0 + k - 1));
	if (G && G->k != k)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_rowsolve: G is %lldx%lld, the systems %lldx%lld",
					(long long)G->k, (long long)G->k, (long long)k, (long long)k);
	if (sys->fp16)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_rowsolve: FP16 systems are stored systems: use "
						       "hermitian, bias and solve");
	struct starpu_data_descr *descr = malloc(sizeof *descr * (size_t)(2 * grid->nc + 4));
	struct rowsolve_args *args = malloc(sizeof *args); /* StarPU frees it (STARPU_CL_ARGS) */
	if (!descr || !args) {
		free(descr);
		free(args);
		return starfa_set_error(STARFA_ENOMEM, "out of memory inserting rowsolve tasks");
	}
	int nt = 0, n = 0;
	int64_t nnz = 0;
	for (int64_t j = 0; j < grid->nc; j++) {
		const struct starfa_tile *tile = starfa_grid_tile(grid, band, j);
		if (tile->nnz == 0)
			continue;
		descr[n++] = (struct starpu_data_descr){tile->handle, STARPU_R};
		descr[n++] = (struct starpu_data_descr){theta->blocks[j], STARPU_R};
		nnz += tile->nnz;
		nt++;
	}
	descr[n++] = (struct starpu_data_descr){info->blocks[band], STARPU_R};
	descr[n++] = (struct starpu_data_descr){X->blocks[band], STARPU_RW};
	descr[n++] = (struct starpu_data_descr){sys->status[band], STARPU_W};
	if (G)
		descr[n++] = (struct starpu_data_descr){G->handle, STARPU_R};
	int64_t rows = sys->bounds[band + 1] - sys->bounds[band];
	*args = (struct rowsolve_args){col0, k, offset_col, x_col0, mu, alpha, feedback == STARFA_IMPLICIT, (int)solver,
				       cg_steps, G != NULL, nt, rowsolve_cost_of(nnz, rows, k, solver, cg_steps)};
	double kd = (double)k, steps = cg_steps + 1;
	double flops = 2.0 * kd * (double)nnz; /* b_u */
	if (solver == STARFA_SOLVER_CHOLESKY)
		flops += kd * (kd + 1) * (double)nnz + (double)rows * (kd * kd * kd / 3.0 + 2.0 * kd * kd);
	else if (starfa_cpu_rowsolve_matrix_free(k, cg_steps))
		flops += steps * (4.0 * kd * (double)nnz + (double)rows * (2.0 * kd * kd * (G ? 1 : 0) + 10.0 * kd));
	else
		flops += kd * (kd + 1) * (double)nnz + (double)rows * steps * (2.0 * kd * kd * (G ? 2 : 1) + 10.0 * kd);
	int ret = starpu_task_insert(&rowsolve_cl, STARPU_DATA_MODE_ARRAY, descr, n, STARPU_CL_ARGS, args, sizeof *args,
				     STARPU_FLOPS, flops, STARPU_NAME, "rowsolve", 0);
	free(descr);
	return ret != 0 ? starfa_insert_failed("rowsolve", ret) : 0;
}
