/* The rowsolve codelet: one band's rows built and solved in one task over all the band's tiles (the
 * fused hermitian + bias + solve; no systems in memory). */
#include "codelets/band.h"
#include "cpu/rowsolve.h"
#ifdef STARFA_USE_CUDA
#include "gpu/rowsolve.h"
#include <starpu_cuda.h>
#endif

#include <stdio.h>
#include <string.h>

struct rowsolve_args {
	int64_t col0, k;    /* theta's columns in use */
	int64_t offset_col; /* explicit: theta's column subtracted from each rating; -1 none */
	int64_t x_col0;     /* X's columns solved for */
	float mu, alpha;
	int implicit, solver, cg_steps, gram;
	int ntiles;         /* tiles with entries: buffers 2t (tile) and 2t + 1 (its theta block) */
	uint64_t cost;      /* the perfmodel's size (rowsolve_cost) */
	int plan;           /* the band's CUDA work list is the last buffer: the task may run on a GPU */
	int64_t plan_nitems, plan_nparts;
	const uint32_t *plan_host; /* its host copy (sys->plan_items, read-only while sys lives) */
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
	if (starfa_cpu_rowsolve(&pb, (uint32_t *)STARPU_VECTOR_GET_PTR(buffers[2 * nt + 2]), 1) != 0) {
		fprintf(stderr, "starfa: codelet rowsolve: out of memory for scratch on worker %d\n",
			starpu_worker_get_id());
		abort();
	}
}

#ifdef STARFA_USE_CUDA
/* Buffers as rowsolve_cpu's, then the band's work list (gpu/rowsolve.h). */
static void rowsolve_cuda(void *buffers[], void *cl_arg)
{
	const struct rowsolve_args *args = cl_arg;
	const int nt = args->ntiles;
	starfa_cuda_rowsolve *pb = calloc(1, sizeof *pb);
	if (!pb) {
		fprintf(stderr, "starfa: codelet rowsolve: out of memory on worker %d\n", starpu_worker_get_id());
		abort();
	}
	pb->ntiles = nt;
	for (int t = 0; t < nt; t++) {
		const float *theta = (const float *)STARPU_MATRIX_GET_PTR(buffers[2 * t + 1]);
		pb->tiles[t] = (starfa_cuda_rowsolve_tile){
			STARPU_CSR_GET_ROWPTR(buffers[2 * t]), STARPU_CSR_GET_COLIND(buffers[2 * t]),
			(const float *)STARPU_CSR_GET_NZVAL(buffers[2 * t]), theta + args->col0,
			args->offset_col >= 0 ? theta + args->offset_col : NULL, (int64_t)STARPU_MATRIX_GET_LD(buffers[2 * t + 1])};
	}
	void *info = buffers[2 * nt], *X = buffers[2 * nt + 1];
	pb->nrows = STARPU_MATRIX_GET_NY(X);
	pb->k = args->k;
	pb->implicit = args->implicit;
	pb->alpha = args->alpha;
	pb->mu = args->mu;
	pb->lambda = (const float *)STARPU_MATRIX_GET_PTR(info);
	pb->info_ld = STARPU_MATRIX_GET_LD(info);
	pb->G = args->gram ? (const float *)STARPU_MATRIX_GET_PTR(buffers[2 * nt + 3]) : NULL;
	pb->cholesky = args->solver == STARFA_SOLVER_CHOLESKY;
	pb->short_rows = starfa_cuda_rowsolve_short_rows(args->k, args->solver == STARFA_SOLVER_CHOLESKY);
	pb->items_host = args->plan_host;
	pb->cg_steps = args->cg_steps;
	pb->X = (float *)STARPU_MATRIX_GET_PTR(X) + args->x_col0;
	pb->ldx = STARPU_MATRIX_GET_LD(X);
	pb->items = (const uint32_t *)STARPU_VECTOR_GET_PTR(buffers[2 * nt + 3 + args->gram]);
	pb->nitems = args->plan_nitems;
	pb->nparts = args->plan_nparts;
	/* CG of fewer steps than unknowns is approximate; as many as k is an exact solve (in exact arithmetic) */
	pb->precision = starfa_cuda_gram_precision_choose(starfa_gram_precision_setting(),
							   !pb->cholesky && pb->cg_steps < pb->k);
	cudaError_t err = starfa_cuda_rowsolve_run(pb, (uint32_t *)STARPU_VECTOR_GET_PTR(buffers[2 * nt + 2]),
						   starpu_cuda_get_local_stream());
	free(pb);
	STARFA_CUDA_CHECK("rowsolve", err);
}

/* GPUs take the tasks whose band has a work list (k and the tile count within the kernel's limits). */
static int rowsolve_can_execute(unsigned workerid, struct starpu_task *task, unsigned nimpl)
{
	(void)nimpl;
	return starpu_worker_get_type((int)workerid) != STARPU_CUDA_WORKER ||
	       ((const struct rowsolve_args *)task->cl_arg)->plan;
}

static int by_count_desc(const void *a, const void *b)
{
	const int64_t *x = a, *y = b; /* (count, row) pairs */
	if (x[0] != y[0])
		return x[0] > y[0] ? -1 : 1;
	return (x[1] > y[1]) - (x[1] < y[1]);
}

int starfa_rowsolve_plan(int64_t nrows, int ntiles, const uint32_t *const *rowptrs, int64_t seg, uint32_t **items_out,
			 int64_t *nitems_out, int64_t *nparts_out)
{
	*items_out = NULL;
	int64_t *order = malloc(sizeof *order * (size_t)(2 * (nrows > 0 ? nrows : 1)));
	if (!order || seg < 1)
		return free(order), -1;
	int64_t nitems = 0, nparts = 0;
	for (int64_t u = 0; u < nrows; u++) {
		int64_t n = 0;
		for (int t = 0; t < ntiles; t++)
			n += rowptrs[t][u + 1] - rowptrs[t][u];
		order[2 * u] = n;
		order[2 * u + 1] = u;
		int64_t m = n > seg ? (n + seg - 1) / seg : 1;
		nitems += m;
		nparts += m > 1 ? m : 0;
	}
	/* Longest rows first: the blocks that run last are the short ones. */
	qsort(order, (size_t)nrows, 2 * sizeof *order, by_count_desc);
	uint32_t *items = NULL;
	if ((uint64_t)nitems * STARFA_ROWSOLVE_ITEM_WORDS <= UINT32_MAX)
		items = malloc(sizeof *items * (size_t)(STARFA_ROWSOLVE_ITEM_WORDS * (nitems > 0 ? nitems : 1)));
	if (!items)
		return free(order), -1;
	uint32_t *it = items;
	int64_t part = 0;
	for (int64_t i = 0; i < nrows; i++) {
		const int64_t n = order[2 * i], u = order[2 * i + 1], m = n > seg ? (n + seg - 1) / seg : 1;
		for (int64_t q = 0; q < m; q++, it += STARFA_ROWSOLVE_ITEM_WORDS) {
			it[0] = (uint32_t)u;
			it[1] = (uint32_t)(m > 1 ? q * seg : 0);
			it[2] = (uint32_t)(m > 1 && q + 1 < m ? (q + 1) * seg : n);
			it[3] = (uint32_t)(m > 1 ? part + q : 0);
			it[4] = (uint32_t)(m > 1 ? part : 0);
			it[5] = (uint32_t)m;
		}
		if (m > 1)
			part += m;
	}
	free(order);
	*items_out = items;
	*nitems_out = nitems;
	*nparts_out = nparts;
	return 0;
}

/* The band's work list, registered once and kept (it depends on the pattern only). */
static int build_plan(starfa_systems *sys, int64_t band, const struct starfa_grid *grid)
{
	const int64_t nrows = sys->bounds[band + 1] - sys->bounds[band];
	const uint32_t *rowptrs[STARFA_CUDA_ROWSOLVE_MAX_TILES];
	int nt = 0;
	for (int64_t j = 0; j < grid->nc; j++) {
		const struct starfa_tile *tile = starfa_grid_tile(grid, band, j);
		if (tile->nnz > 0)
			rowptrs[nt++] = tile->rowptr;
	}
	if (starfa_rowsolve_plan(nrows, nt, rowptrs, STARFA_CUDA_ROWSOLVE_SEGMENT, &sys->plan_items[band],
				 &sys->plan_nitems[band], &sys->plan_nparts[band]) != 0)
		return starfa_set_error(STARFA_ENOMEM, "out of memory building the rowsolve work list");
	starpu_vector_data_register(&sys->plan[band], STARPU_MAIN_RAM, (uintptr_t)sys->plan_items[band],
				    (uint32_t)(sys->plan_nitems[band] * STARFA_ROWSOLVE_ITEM_WORDS), sizeof(uint32_t));
	return 0;
}
#endif

/* The real cost, computed at insertion: per entry k^2 (forming M_u) or 4 k per CG step (matrix-free),
 * per row k^3 / 3 (Cholesky) or per CG step k^2 (a formed M_u, or G's product) or 4 k (matrix-free
 * without G: vector updates only). */
static uint64_t rowsolve_cost_of(int64_t nnz, int64_t rows, int64_t k, starfa_solver solver, int cg_steps, int gram)
{
	uint64_t n = (uint64_t)nnz, r = (uint64_t)rows, kk = (uint64_t)k, s = (uint64_t)cg_steps + 1;
	if (solver == STARFA_SOLVER_CHOLESKY)
		return n * kk * kk + r * kk * kk * kk / 3;
	if (starfa_cpu_rowsolve_matrix_free(k, cg_steps))
		return n * 4 * kk * s + r * (gram ? kk * kk : 4 * kk) * s;
	return n * kk * kk + r * kk * kk * s;
}

double starfa_rowsolve_row_cost(int64_t k, starfa_solver solver, int cg_steps, int with_gram)
{
	if (k < 1 || cg_steps < 0)
		return 0;
	return (double)rowsolve_cost_of(0, 1, k, solver, cg_steps, with_gram) /
	       (double)rowsolve_cost_of(1, 0, k, solver, cg_steps, with_gram);
}

double starfa_rowsolve_cost(int64_t nnz, int64_t rows, int64_t k, starfa_solver solver, int cg_steps, int with_gram)
{
	if (k < 1 || cg_steps < 0 || nnz < 0 || rows < 0)
		return 0;
	return (double)rowsolve_cost_of(nnz, rows, k, solver, cg_steps, with_gram);
}

int64_t starfa_als_cuda_max_k(void)
{
#ifdef STARFA_USE_CUDA
	return STARFA_CUDA_ALS_MAX_K;
#else
	return 0;
#endif
}

static uint64_t rowsolve_cost(const struct starpu_task *task)
{
	return ((const struct rowsolve_args *)task->cl_arg)->cost;
}

static uint32_t rowsolve_variant(const struct starpu_task *task)
{
	const struct rowsolve_args *args = task->cl_arg;
	return (uint32_t)(args->solver | args->implicit << 1 | args->gram << 2);
}

#ifdef STARFA_USE_CUDA
#define ROWSOLVE_CUDA STARFA_CUDA_FUNC(rowsolve_cuda), .can_execute = rowsolve_can_execute
#else
#define ROWSOLVE_CUDA STARFA_CUDA_FUNC(NULL)
#endif

/* Buffers: two per tile of the band with entries, then the band's own. */
STARFA_CODELET(rowsolve, rowsolve_cost, rowsolve_variant, rowsolve_cpu, ROWSOLVE_CUDA);

int starfa_task_rowsolve(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *theta,
			 int64_t col0, int64_t offset_col, float mu, starfa_feedback feedback, float alpha,
			 const starfa_dense *info, const starfa_gram *G, starfa_solver solver, int cg_steps,
			 starfa_dense *X, int64_t x_col0, starfa_systems *sys, const starfa_task_attr *attr)
{
	const struct starfa_grid *grid = starfa_band_grid("starfa_task_rowsolve", S, side, band, theta, col0, sys);
	if (!grid)
		return STARFA_EINVAL;
	const int64_t k = sys->k, side_rows = side == STARFA_ROWS ? S->nrows : S->ncols;
	if (offset_col < -1 || offset_col >= theta->cols)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_rowsolve: offset column %lld outside -1..%lld",
					(long long)offset_col, (long long)theta->cols - 1);
	if (!info || info->rows != side_rows || info->cols != 2 || info->nblocks != grid->nr)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_rowsolve: the row information must be %lldx2, "
						       "blocked along the side's bands", (long long)side_rows);
	if (solver != STARFA_SOLVER_CHOLESKY && solver != STARFA_SOLVER_CG)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_rowsolve: unknown solver %d", (int)solver);
	if (solver == STARFA_SOLVER_CG && cg_steps < 1)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_rowsolve: CG needs at least one step");
	if (!X || X->rows != side_rows || X->nblocks != grid->nr || x_col0 < 0 || x_col0 + k > X->cols)
		return starfa_set_error(STARFA_EINVAL,
					"starfa_task_rowsolve: X must have %lld rows blocked along the side's bands "
					"and columns %lld..%lld", (long long)side_rows, (long long)x_col0,
					(long long)(x_col0 + k - 1));
	if (G && G->k != k)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_rowsolve: G is %lldx%lld, the systems %lldx%lld",
					(long long)G->k, (long long)G->k, (long long)k, (long long)k);
	if (sys->fp16)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_rowsolve: FP16 systems are stored systems: use "
						       "hermitian, bias and solve");
	int64_t ntiles, nnz;
	struct starpu_data_descr *descr;
	int brc = starfa_band_task_begin("starfa_task_rowsolve", S, side, band, &ntiles, &nnz, &descr, 6, 2);
	if (brc)
		return brc == STARFA_ENOMEM ? starfa_set_error(STARFA_ENOMEM, "out of memory inserting rowsolve tasks") : brc;
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_band_where(S, side, band));
	struct rowsolve_args argv, *args = &argv;
	const int nt = (int)ntiles;
	int n = starfa_band_task_tile_pairs(S, side, band, theta, descr, 0);
	descr[n++] = (struct starpu_data_descr){info->blocks[band], STARPU_R};
	descr[n++] = (struct starpu_data_descr){X->blocks[band], STARPU_RW};
	descr[n++] = (struct starpu_data_descr){sys->status[band], STARPU_W};
	if (G)
		descr[n++] = (struct starpu_data_descr){G->handle, STARPU_R};
	int64_t rows = sys->bounds[band + 1] - sys->bounds[band];
	*args = (struct rowsolve_args){col0, k, offset_col, x_col0, mu, alpha, feedback == STARFA_IMPLICIT, (int)solver,
				       cg_steps, G != NULL, nt, rowsolve_cost_of(nnz, rows, k, solver, cg_steps, G != NULL), 0, 0, 0,
				       NULL};
#ifdef STARFA_USE_CUDA
	if (starpu_cuda_worker_get_count() > 0 && k <= STARFA_CUDA_ALS_MAX_K && nt <= STARFA_CUDA_ROWSOLVE_MAX_TILES) {
		int rc = sys->plan[band] ? 0 : build_plan(sys, band, grid);
		if (rc != 0) {
			free(descr);
			return rc;
		}
		descr[n++] = (struct starpu_data_descr){sys->plan[band], STARPU_R};
		args->plan = 1;
		args->plan_nitems = sys->plan_nitems[band];
		args->plan_nparts = sys->plan_nparts[band];
		args->plan_host = sys->plan_items[band];
	}
#endif
	double kd = (double)k, steps = cg_steps + 1;
	double flops = 2.0 * kd * (double)nnz; /* b_u */
	if (solver == STARFA_SOLVER_CHOLESKY)
		flops += kd * (kd + 1) * (double)nnz + (double)rows * (kd * kd * kd / 3.0 + 2.0 * kd * kd);
	else if (starfa_cpu_rowsolve_matrix_free(k, cg_steps))
		flops += steps * (4.0 * kd * (double)nnz + (double)rows * (2.0 * kd * kd * (G ? 1 : 0) + 10.0 * kd));
	else
		flops += kd * (kd + 1) * (double)nnz + (double)rows * steps * (2.0 * kd * kd * (G ? 2 : 1) + 10.0 * kd);
	int rc = starfa_submit(&rowsolve_cl, args, sizeof *args, flops, attr, n, descr);
	free(descr);
	return rc;
}

int starfa_insert_rowsolve(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *theta,
			   int64_t col0, int64_t offset_col, float mu, starfa_feedback feedback, float alpha,
			   const starfa_dense *info, const starfa_gram *G, starfa_solver solver, int cg_steps,
			   starfa_dense *X, int64_t x_col0, starfa_systems *sys)
{
	return starfa_task_rowsolve(S, side, band, theta, col0, offset_col, mu, feedback, alpha, info, G, solver,
				    cg_steps, X, x_col0, sys, NULL);
}
