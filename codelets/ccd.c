/* The CCD++ codelets: ccd_pass (one fused pass over a tile of the residual: the previous feature out,
 * the current one in, the rank-one update's sums per row), ccd_solve (the update of one block),
 * ccd_band (a band's passes and its update in one task) and ccd_feature (a whole feature's passes and
 * updates on a matrix of one band a side, in one task). */
#include "codelets/codelet.h"
#include "codelets/zero.h"
#include "cpu/ccd.h"
#ifdef STARFA_USE_CUDA
#include "gpu/ccd.h"
#include <starpu_cuda.h>
#endif

/* Which optional buffers a pass has, in this order after the tile (0) and its values (1). */
enum { CCD_SUB = 1, CCD_ADD = 2, CCD_Y = 4 };

struct ccd_pass_args {
	int write, accumulate, which;
};

/* The pass's vectors from its buffers (device or host pointers alike), and its accumulator. */
static void pass_buffers(void *buffers[], const struct ccd_pass_args *args, struct starfa_ccd_vecs *v, float **acc,
			 int64_t *ld_acc)
{
	int b = 2;
	*v = (struct starfa_ccd_vecs){0};
	*acc = NULL;
	*ld_acc = 0;
#define NEXT_VEC(p, ld)                                                  \
	do {                                                             \
		p = (const float *)STARPU_MATRIX_GET_PTR(buffers[b]);    \
		ld = (int64_t)STARPU_MATRIX_GET_LD(buffers[b]);          \
		b++;                                                     \
	} while (0)
	if (args->which & CCD_SUB) {
		NEXT_VEC(v->sub_x, v->ld_sub_x);
		NEXT_VEC(v->sub_y, v->ld_sub_y);
	}
	if (args->which & CCD_ADD) {
		NEXT_VEC(v->add_x, v->ld_add_x);
		NEXT_VEC(v->add_y, v->ld_add_y);
	}
	if (args->which & CCD_Y) {
		NEXT_VEC(v->y, v->ld_y);
		*acc = (float *)STARPU_MATRIX_GET_PTR(buffers[b]);
		*ld_acc = (int64_t)STARPU_MATRIX_GET_LD(buffers[b]);
	}
#undef NEXT_VEC
}

/* One pass over a tile (its CSR buffer and residual values) on the CPU, or enqueued on a CUDA worker's
 * stream (`stream` non-NULL): what ccd_pass runs once and ccd_band for each of its tiles. */
static void pass_run(const char *codelet, void *tile, float *R, int write, const struct starfa_ccd_vecs *v, float *acc,
		     int64_t ld_acc, int accumulate, void *stream)
{
#ifdef STARFA_USE_CUDA
	if (stream) {
		STARFA_CUDA_CHECK(codelet, starfa_cuda_ccd_pass(STARPU_CSR_GET_NROW(tile), STARPU_CSR_GET_NNZ(tile),
								STARPU_CSR_GET_ROWPTR(tile), STARPU_CSR_GET_COLIND(tile), R, write,
								v, acc, ld_acc, accumulate, (cudaStream_t)stream));
		return;
	}
#endif
	(void)codelet, (void)stream;
	starfa_cpu_ccd_pass(STARPU_CSR_GET_NROW(tile), STARPU_CSR_GET_ROWPTR(tile), STARPU_CSR_GET_COLIND(tile), R, write, v,
			    acc, ld_acc, accumulate);
}

/* Buffers: 0 the tile (CSR: the pattern), 1 its residual values (R or RW), then sub_x, sub_y (with
 * CCD_SUB), add_x, add_y (CCD_ADD), y and the accumulator (CCD_Y). */
static void ccd_pass_run(void *buffers[], const struct ccd_pass_args *args, void *stream)
{
	struct starfa_ccd_vecs v;
	float *acc;
	int64_t ld_acc;
	pass_buffers(buffers, args, &v, &acc, &ld_acc);
	pass_run("ccd_pass", buffers[0], (float *)STARPU_VECTOR_GET_PTR(buffers[1]), args->write, &v, acc, ld_acc,
		 args->accumulate, stream);
}

static void ccd_pass_cpu(void *buffers[], void *cl_arg)
{
	ccd_pass_run(buffers, cl_arg, NULL);
}

#ifdef STARFA_USE_CUDA
static void ccd_pass_cuda(void *buffers[], void *cl_arg)
{
	ccd_pass_run(buffers, cl_arg, starpu_cuda_get_local_stream());
}
#endif

static uint64_t ccd_pass_cost(const struct starpu_task *task)
{
	return (uint64_t)starpu_csr_get_nnz(task->handles[0]);
}

/* What a pass reads and writes changes its time: separate histories. */
static uint32_t ccd_pass_variant(const struct starpu_task *task)
{
	const struct ccd_pass_args *args = task->cl_arg;
	return (uint32_t)(args->which | args->write << 3 | args->accumulate << 4);
}

STARFA_CODELET(ccd_pass, ccd_pass_cost, ccd_pass_variant, ccd_pass_cpu, STARFA_CUDA_FUNC(ccd_pass_cuda));

/* A one-column dense blocked along `bounds` (nblocks), or NULL. */
static int vector_ok(const starfa_dense *d, const int64_t *bounds, int64_t nblocks, int64_t rows)
{
	return !d || (d->cols == 1 && d->rows == rows && starfa_dense_blocked_along(d, bounds, nblocks));
}

/* The operands a pass over side's grid shares with ccd_band: 0, or STARFA_EINVAL naming `what`. */
static int check_pass(const char *what, const starfa_tiled *S, starfa_side side, const starfa_sparse_values *R,
		      const starfa_ccd_terms *terms, const starfa_dense *acc)
{
	if (!S || !R || !terms)
		return starfa_set_error(STARFA_EINVAL, "%s: missing operand", what);
	if (side != STARFA_ROWS && side != STARFA_COLS)
		return starfa_set_error(STARFA_EINVAL, "%s: unknown side %d", what, (int)side);
	if (R->pattern != S || R->side != side)
		return starfa_set_error(STARFA_EINVAL, "%s: the residual must be S's values on the %s side", what,
					side == STARFA_ROWS ? "row" : "column");
	const struct starfa_grid *grid = starfa_side_grid(S, side);
	const int rows = side == STARFA_ROWS;
	const int64_t *xb = rows ? S->row_bounds : S->col_bounds, *yb = rows ? S->col_bounds : S->row_bounds;
	const int64_t xn = rows ? S->nrows : S->ncols, yn = rows ? S->ncols : S->nrows;
	if ((!terms->sub_x) != (!terms->sub_y) || (!terms->add_x) != (!terms->add_y) || (!terms->y) != (!acc))
		return starfa_set_error(STARFA_EINVAL, "%s: sub_x and sub_y, add_x and add_y, y and acc come in pairs", what);
	if (!vector_ok(terms->sub_x, xb, grid->nr, xn) || !vector_ok(terms->add_x, xb, grid->nr, xn) ||
	    !vector_ok(terms->sub_y, yb, grid->nc, yn) || !vector_ok(terms->add_y, yb, grid->nc, yn) ||
	    !vector_ok(terms->y, yb, grid->nc, yn))
		return starfa_set_error(STARFA_EINVAL, "%s: the vectors must have one column, the x ones blocked along "
						       "the grid's rows and the y ones along its columns", what);
	if (acc && (acc->cols != 2 || acc->rows != xn || !starfa_dense_blocked_along(acc, xb, grid->nr)))
		return starfa_set_error(STARFA_EINVAL, "%s: acc must have two columns, blocked like x", what);
	return 0;
}

int starfa_task_ccd_pass(const starfa_tiled *S, starfa_side side, int64_t i, int64_t j, starfa_sparse_values *R,
			 int write, const starfa_ccd_terms *terms, starfa_dense *acc, int accumulate,
			 const starfa_task_attr *attr)
{
	const char *what = "starfa_task_ccd_pass";
	int rc = check_pass(what, S, side, R, terms, acc);
	if (rc)
		return rc;
	const struct starfa_grid *grid = starfa_side_grid(S, side);
	if (i < 0 || j < 0 || i >= grid->nr || j >= grid->nc)
		return starfa_index_error(what, "tile", i, j, grid->nr, grid->nc);
	const struct starfa_tile *tile = starfa_grid_tile(grid, i, j);
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_band_where(S, R->side, i));
	if (tile->nnz == 0)
		return acc && !accumulate ? starfa_submit_zero(acc->blocks[i], STARFA_ZERO_MATRIX, attr) : 0;
	struct ccd_pass_args args = {write != 0, accumulate != 0,
				     (terms->sub_x ? CCD_SUB : 0) | (terms->add_x ? CCD_ADD : 0) | (terms->y ? CCD_Y : 0)};
	struct starpu_data_descr buffers[9];
	int n = 0;
	buffers[n++] = (struct starpu_data_descr){tile->handle, STARPU_R};
	buffers[n++] = (struct starpu_data_descr){R->handles[i * grid->nc + j], write ? STARPU_RW : STARPU_R};
	if (terms->sub_x) {
		buffers[n++] = (struct starpu_data_descr){terms->sub_x->blocks[i], STARPU_R};
		buffers[n++] = (struct starpu_data_descr){terms->sub_y->blocks[j], STARPU_R};
	}
	if (terms->add_x) {
		buffers[n++] = (struct starpu_data_descr){terms->add_x->blocks[i], STARPU_R};
		buffers[n++] = (struct starpu_data_descr){terms->add_y->blocks[j], STARPU_R};
	}
	if (terms->y) {
		buffers[n++] = (struct starpu_data_descr){terms->y->blocks[j], STARPU_R};
		buffers[n++] = (struct starpu_data_descr){acc->blocks[i], accumulate ? STARPU_RW : STARPU_W};
	}
	double flops = (double)tile->nnz * (2.0 * !!terms->sub_x + 2.0 * !!terms->add_x + 4.0 * !!terms->y);
	return starfa_submit(&ccd_pass_cl, &args, sizeof args, flops, attr, n, buffers);
}

/* ------------------------------------------------------------------ ccd_solve */

struct ccd_solve_args {
	float lambda;
	int nonneg;
};

/* The update of nrows rows of x from their sums and counts, on the CPU or enqueued on a CUDA worker's
 * stream (`stream` non-NULL): ccd_solve's, ccd_band's and ccd_feature's. On a CUDA worker, clear leaves
 * acc's columns at 0 for the next pass to add into (the CPU's passes overwrite them); reg (non-NULL)
 * gets sum counts x^2 of the new x added. */
static void solve_run(const char *codelet, int64_t nrows, float *acc, int64_t ld_acc, const float *counts,
		      int64_t ld_counts, float lambda, int nonneg, float *x, int64_t ld_x, int clear, double *reg,
		      void *stream)
{
#ifdef STARFA_USE_CUDA
	if (stream) {
		STARFA_CUDA_CHECK(codelet, starfa_cuda_ccd_solve(nrows, acc, ld_acc, counts, ld_counts, lambda, nonneg, x, ld_x,
								 clear, reg, (cudaStream_t)stream));
		return;
	}
#endif
	(void)codelet, (void)stream, (void)clear; /* (on a CUDA worker clear writes acc: only where its buffer is writable) */
	starfa_cpu_ccd_solve(nrows, acc, ld_acc, counts, ld_counts, lambda, nonneg, x, ld_x);
	if (reg)
		*reg += starfa_cpu_ccd_regularizer(nrows, x, ld_x, counts, ld_counts);
}

/* Buffers: 0 x's block (W), 1 acc's block (R), 2 the counts' block (R). */
static void ccd_solve_run(void *buffers[], const struct ccd_solve_args *args, void *stream)
{
	solve_run("ccd_solve", STARPU_MATRIX_GET_NY(buffers[0]), (float *)STARPU_MATRIX_GET_PTR(buffers[1]),
		  STARPU_MATRIX_GET_LD(buffers[1]), (const float *)STARPU_MATRIX_GET_PTR(buffers[2]),
		  STARPU_MATRIX_GET_LD(buffers[2]), args->lambda, args->nonneg, (float *)STARPU_MATRIX_GET_PTR(buffers[0]),
		  STARPU_MATRIX_GET_LD(buffers[0]), 0, NULL, stream);
}

static void ccd_solve_cpu(void *buffers[], void *cl_arg)
{
	ccd_solve_run(buffers, cl_arg, NULL);
}

#ifdef STARFA_USE_CUDA
static void ccd_solve_cuda(void *buffers[], void *cl_arg)
{
	ccd_solve_run(buffers, cl_arg, starpu_cuda_get_local_stream());
}
#endif

static uint64_t ccd_solve_cost(const struct starpu_task *task)
{
	return (uint64_t)starpu_matrix_get_ny(task->handles[0]);
}

static uint32_t ccd_solve_variant(const struct starpu_task *task)
{
	return (uint32_t)((const struct ccd_solve_args *)task->cl_arg)->nonneg;
}

STARFA_CODELET(ccd_solve, ccd_solve_cost, ccd_solve_variant, ccd_solve_cpu, STARFA_CUDA_FUNC(ccd_solve_cuda));

int starfa_task_ccd_solve(starfa_dense *x, int64_t block, const starfa_dense *acc, const starfa_dense *counts,
			  float lambda, int nonneg, const starfa_task_attr *attr)
{
	const char *what = "starfa_task_ccd_solve";
	if (!x || !acc || !counts)
		return starfa_set_error(STARFA_EINVAL, "%s: missing operand", what);
	if (block < 0 || block >= x->nblocks)
		return starfa_index_error(what, "block", block, -1, x->nblocks, -1);
	if (x->cols != 1 || counts->cols != 1 || acc->cols != 2 || acc->rows != x->rows || counts->rows != x->rows ||
	    !starfa_dense_blocked_along(acc, x->bounds, x->nblocks) ||
	    !starfa_dense_blocked_along(counts, x->bounds, x->nblocks))
		return starfa_set_error(STARFA_EINVAL, "%s: x and counts need one column, acc two, all blocked alike", what);
	if (!(lambda >= 0))
		return starfa_set_error(STARFA_EINVAL, "%s: lambda must be >= 0", what);
	struct ccd_solve_args args = {lambda, nonneg != 0};
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_block_where(x, block));
	double n = (double)(x->bounds[block + 1] - x->bounds[block]);
	return starfa_submit(&ccd_solve_cl, &args, sizeof args, 3.0 * n, attr,
			     STARFA_BUFFERS({x->blocks[block], STARPU_W}, {acc->blocks[block], STARPU_R},
					    {counts->blocks[block], STARPU_R}));
}

/* ------------------------------------------------------------------ ccd_regularizer */

struct ccd_regularizer_args {
	int add;
};

/* Buffers: 0 x's block (R), 1 the counts' block (R), 2 the slot (W, or RW with add). */
static void ccd_regularizer_cpu(void *buffers[], void *cl_arg)
{
	const struct ccd_regularizer_args *a = cl_arg;
	double *slot = (double *)STARPU_VARIABLE_GET_PTR(buffers[2]);
	const double sum = starfa_cpu_ccd_regularizer(
		(int64_t)STARPU_MATRIX_GET_NY(buffers[0]), (const float *)STARPU_MATRIX_GET_PTR(buffers[0]),
		(int64_t)STARPU_MATRIX_GET_LD(buffers[0]), (const float *)STARPU_MATRIX_GET_PTR(buffers[1]),
		(int64_t)STARPU_MATRIX_GET_LD(buffers[1]));
	*slot = a->add ? *slot + sum : sum;
}

#ifdef STARFA_USE_CUDA
static void ccd_regularizer_cuda(void *buffers[], void *cl_arg)
{
	const struct ccd_regularizer_args *a = cl_arg;
	STARFA_CUDA_CHECK("ccd_regularizer",
			  starfa_cuda_ccd_regularizer((int64_t)STARPU_MATRIX_GET_NY(buffers[0]),
						      (const float *)STARPU_MATRIX_GET_PTR(buffers[0]),
						      (int64_t)STARPU_MATRIX_GET_LD(buffers[0]),
						      (const float *)STARPU_MATRIX_GET_PTR(buffers[1]),
						      (int64_t)STARPU_MATRIX_GET_LD(buffers[1]),
						      (double *)STARPU_VARIABLE_GET_PTR(buffers[2]), a->add,
						      starpu_cuda_get_local_stream()));
}
#endif

static uint64_t ccd_regularizer_cost(const struct starpu_task *task)
{
	return (uint64_t)starpu_matrix_get_ny(task->handles[0]);
}

static uint32_t ccd_regularizer_variant(const struct starpu_task *task)
{
	return (uint32_t)((const struct ccd_regularizer_args *)task->cl_arg)->add;
}

STARFA_CODELET(ccd_regularizer, ccd_regularizer_cost, ccd_regularizer_variant, ccd_regularizer_cpu,
	       STARFA_CUDA_FUNC(ccd_regularizer_cuda));

int starfa_task_ccd_regularizer(const starfa_dense *x, int64_t block, const starfa_dense *counts, starfa_sums *sums,
				int64_t slot, int add, const starfa_task_attr *attr)
{
	const char *what = "starfa_task_ccd_regularizer";
	if (!x || !counts)
		return starfa_set_error(STARFA_EINVAL, "%s: missing operand", what);
	int rc = starfa_check_slot(what, sums, slot);
	if (rc)
		return rc;
	if (block < 0 || block >= x->nblocks)
		return starfa_index_error(what, "block", block, -1, x->nblocks, -1);
	if (x->cols != 1 || counts->cols != 1 || counts->rows != x->rows ||
	    !starfa_dense_blocked_along(counts, x->bounds, x->nblocks))
		return starfa_set_error(STARFA_EINVAL, "%s: x and counts need one column, blocked alike", what);
	struct ccd_regularizer_args args = {add != 0};
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_block_where(x, block));
	double n = (double)(x->bounds[block + 1] - x->bounds[block]);
	return starfa_submit(&ccd_regularizer_cl, &args, sizeof args, 3.0 * n, attr,
			     STARFA_BUFFERS({x->blocks[block], STARPU_R}, {counts->blocks[block], STARPU_R},
					    {sums->handles[slot], add ? STARPU_RW : STARPU_W}));
}

/* ------------------------------------------------------------------ ccd_band */

struct ccd_band_args {
	int write, which, solve, ntiles;
	int x_is_sub, x_is_add; /* x is sub_x (add_x) too: its one buffer (RW) serves both */
	float lambda;
	int nonneg;
};

/* Buffers, the band's first: sub_x (CCD_SUB, unless x is it), add_x (CCD_ADD, unless x is it), acc
 * (CCD_Y), x and the counts (solve); then for each of the band's non-empty tiles in order, the tile, its
 * residual values, sub_y (CCD_SUB), add_y (CCD_ADD) and y (CCD_Y). The passes run as ccd_pass's tasks
 * would, the first overwriting acc and the others adding to it, then the update as ccd_solve's: the
 * same arithmetic in the same order, on the CPU or as kernels in turn on the CUDA worker's stream
 * (`stream` non-NULL). */
static void ccd_band_run(void *buffers[], const struct ccd_band_args *a, void *stream)
{
	int b = 0;
	const float *sub_x = NULL, *add_x = NULL, *counts = NULL;
	float *acc = NULL, *x = NULL;
	int64_t ld_sub_x = 0, ld_add_x = 0, ld_acc = 0, ld_x = 0, ld_counts = 0, nx = 0, nacc = 0;
#define MATRIX(ptr, ld, type)                                           \
	do {                                                            \
		ptr = (type *)STARPU_MATRIX_GET_PTR(buffers[b]);        \
		ld = (int64_t)STARPU_MATRIX_GET_LD(buffers[b]);         \
		b++;                                                    \
	} while (0)
	if ((a->which & CCD_SUB) && !a->x_is_sub)
		MATRIX(sub_x, ld_sub_x, const float);
	if ((a->which & CCD_ADD) && !a->x_is_add)
		MATRIX(add_x, ld_add_x, const float);
	if (a->which & CCD_Y) {
		nacc = (int64_t)STARPU_MATRIX_GET_NY(buffers[b]);
		MATRIX(acc, ld_acc, float);
	}
	if (a->solve) {
		nx = (int64_t)STARPU_MATRIX_GET_NY(buffers[b]);
		MATRIX(x, ld_x, float);
		MATRIX(counts, ld_counts, const float);
		if (a->x_is_sub)
			sub_x = x, ld_sub_x = ld_x;
		if (a->x_is_add)
			add_x = x, ld_add_x = ld_x;
	}
	for (int t = 0; t < a->ntiles; t++) {
		void *tile = buffers[b++];
		float *R = (float *)STARPU_VECTOR_GET_PTR(buffers[b++]);
		struct starfa_ccd_vecs v = {.sub_x = sub_x, .add_x = add_x, .ld_sub_x = ld_sub_x, .ld_add_x = ld_add_x};
		if (a->which & CCD_SUB)
			MATRIX(v.sub_y, v.ld_sub_y, const float);
		if (a->which & CCD_ADD)
			MATRIX(v.add_y, v.ld_add_y, const float);
		if (a->which & CCD_Y)
			MATRIX(v.y, v.ld_y, const float);
		pass_run("ccd_band", tile, R, a->write, &v, acc, ld_acc, t > 0, stream);
	}
#undef MATRIX
	if (acc && a->ntiles == 0 && nacc > 0) { /* as a pass over an empty tile */
#ifdef STARFA_USE_CUDA
		if (stream)
			STARFA_CUDA_CHECK("ccd_band", cudaMemset2DAsync(acc, (size_t)ld_acc * sizeof *acc, 0, 2 * sizeof *acc,
									(size_t)nacc, (cudaStream_t)stream));
		else
#endif
			for (int64_t r = 0; r < nacc; r++)
				acc[r * ld_acc] = acc[r * ld_acc + 1] = 0.0f;
	}
	if (a->solve)
		solve_run("ccd_band", nx, acc, ld_acc, counts, ld_counts, a->lambda, a->nonneg, x, ld_x, 0, NULL, stream);
}

static void ccd_band_cpu(void *buffers[], void *cl_arg)
{
	ccd_band_run(buffers, cl_arg, NULL);
}

#ifdef STARFA_USE_CUDA
static void ccd_band_cuda(void *buffers[], void *cl_arg)
{
	ccd_band_run(buffers, cl_arg, starpu_cuda_get_local_stream());
}
#endif

/* The band's entries and, with the update, its rows: what its time follows. */
static uint64_t ccd_band_cost(const struct starpu_task *task)
{
	const struct ccd_band_args *a = task->cl_arg;
	/* the band's buffers (ccd_band_cpu's layout), then the tiles' */
	const unsigned sub = (a->which & CCD_SUB) != 0, add = (a->which & CCD_ADD) != 0, y = (a->which & CCD_Y) != 0;
	const unsigned xh = (sub && !a->x_is_sub) + (add && !a->x_is_add) + y, first = xh + 2u * (unsigned)a->solve;
	uint64_t cost = starfa_band_task_nnz(task, first, 2 + sub + add + y, a->ntiles);
	if (a->solve)
		cost += starpu_matrix_get_ny(STARPU_TASK_GET_HANDLE(task, xh));
	return cost;
}

static uint32_t ccd_band_variant(const struct starpu_task *task)
{
	const struct ccd_band_args *a = task->cl_arg;
	return (uint32_t)(a->which | a->write << 3 | a->solve << 4 | a->nonneg << 5);
}

STARFA_CODELET(ccd_band, ccd_band_cost, ccd_band_variant, ccd_band_cpu, STARFA_CUDA_FUNC(ccd_band_cuda));

int starfa_task_ccd_band(const starfa_tiled *S, starfa_side side, int64_t band, starfa_sparse_values *R, int write,
			 const starfa_ccd_terms *terms, starfa_dense *acc, starfa_dense *x, const starfa_dense *counts,
			 float lambda, int nonneg, const starfa_task_attr *attr)
{
	const char *what = "starfa_task_ccd_band";
	int rc = check_pass(what, S, side, R, terms, acc);
	if (rc)
		return rc;
	const struct starfa_grid *grid = starfa_side_grid(S, side);
	const int rows = side == STARFA_ROWS;
	const int64_t *xb = rows ? S->row_bounds : S->col_bounds;
	const int64_t xn = rows ? S->nrows : S->ncols;
	if (x && (!acc || !counts || !vector_ok(x, xb, grid->nr, xn) || !vector_ok(counts, xb, grid->nr, xn)))
		return starfa_set_error(STARFA_EINVAL, "%s: the update needs y and acc, and x and counts with one column "
						       "blocked along the grid's rows",
					what);
	if (x && !(lambda >= 0))
		return starfa_set_error(STARFA_EINVAL, "%s: lambda must be >= 0", what);
	if (x && (x == terms->sub_y || x == terms->add_y || x == terms->y))
		return starfa_set_error(STARFA_EINVAL, "%s: x is the side being updated, not the other one", what);
	int64_t ntiles, nnz;
	struct starpu_data_descr *buffers;
	if ((rc = starfa_band_task_begin(what, S, side, band, &ntiles, &nnz, &buffers, 5, 5)))
		return rc;
	if ((!x && !acc && !write) || (ntiles == 0 && !acc)) {
		free(buffers); /* nothing to compute, or a pass that only rewrites the residual over no entry */
		return 0;
	}
	if (ntiles == 0 && !x) /* sums over no entry: zeroes, as a pass over an empty tile writes them */
		return starfa_band_task_zero(S, side, band, attr, acc->blocks[band], STARFA_ZERO_MATRIX, buffers);
	struct ccd_band_args args = {write != 0,
				     (terms->sub_x ? CCD_SUB : 0) | (terms->add_x ? CCD_ADD : 0) | (terms->y ? CCD_Y : 0),
				     x != NULL,
				     0,
				     x && x == terms->sub_x,
				     x && x == terms->add_x,
				     lambda,
				     nonneg != 0};
	int n = 0;
	if (terms->sub_x && !args.x_is_sub)
		buffers[n++] = (struct starpu_data_descr){terms->sub_x->blocks[band], STARPU_R};
	if (terms->add_x && !args.x_is_add)
		buffers[n++] = (struct starpu_data_descr){terms->add_x->blocks[band], STARPU_R};
	if (acc)
		buffers[n++] = (struct starpu_data_descr){acc->blocks[band], STARPU_W};
	if (x) {
		buffers[n++] = (struct starpu_data_descr){x->blocks[band], args.x_is_sub || args.x_is_add ? STARPU_RW : STARPU_W};
		buffers[n++] = (struct starpu_data_descr){counts->blocks[band], STARPU_R};
	}
	for (int64_t j = 0; j < grid->nc; j++) {
		const struct starfa_tile *tile = starfa_grid_tile(grid, band, j);
		if (tile->nnz == 0)
			continue;
		buffers[n++] = (struct starpu_data_descr){tile->handle, STARPU_R};
		buffers[n++] = (struct starpu_data_descr){R->handles[band * grid->nc + j], write ? STARPU_RW : STARPU_R};
		if (terms->sub_y)
			buffers[n++] = (struct starpu_data_descr){terms->sub_y->blocks[j], STARPU_R};
		if (terms->add_y)
			buffers[n++] = (struct starpu_data_descr){terms->add_y->blocks[j], STARPU_R};
		if (terms->y)
			buffers[n++] = (struct starpu_data_descr){terms->y->blocks[j], STARPU_R};
	}
	args.ntiles = (int)ntiles;
	/* per cost unit (an entry, or a row of the update), so that tasks of one footprint have one count */
	const double rows_n = x ? (double)(xb[band + 1] - xb[band]) : 0.0;
	double flops = ((double)nnz + rows_n) * (2.0 * !!terms->sub_x + 2.0 * !!terms->add_x + 4.0 * !!terms->y);
	return starfa_band_task_submit(&ccd_band_cl, &args, sizeof args, flops, S, side, band, attr, n, buffers);
}

/* ------------------------------------------------------------------ ccd_feature */

struct ccd_feature_args {
	int prev, update_w, update_h, nonneg;
	int64_t inner;
	float lambda;
	int reg, reg_add; /* the regularization into a slot (reg), added to it (reg_add) */
};

/* Buffers: the forward tile (CSR) and its residual values (RW), the transposed tile and its values (RW),
 * w and h (RW where updated, else R), then prev_w and prev_h (prev), held, acc_h and count_h (update_h),
 * acc_w and count_w (update_w), the regularization's slot (reg: W, or RW with reg_add). */
enum { FEAT_TILE, FEAT_R, FEAT_TILE_T, FEAT_RT, FEAT_W, FEAT_H, FEAT_FIXED };

struct feat_vec {
	float *p;
	int64_t ld, n;
};

static struct feat_vec feat_vec(void *buffer)
{
	return (struct feat_vec){(float *)STARPU_MATRIX_GET_PTR(buffer), (int64_t)STARPU_MATRIX_GET_LD(buffer),
				 (int64_t)STARPU_MATRIX_GET_NY(buffer)};
}

/* The rounds of updates a feature makes (inner with both sides updated, else one). */
static int64_t feature_rounds(const struct ccd_feature_args *a)
{
	return a->update_w && a->update_h ? a->inner : 1;
}

/* One feature as starfa_insert_ccd_feature's band tasks make it over a grid of one tile a side, in the
 * same order: held = h; the column side's pass over R^T (R^ written) and h's update (or the pass alone);
 * the row side's with the held h and w's update (or the pass alone); inner - 1 more updates of h and w
 * over R^ as it stands; with reg, sum counts x^2 of each updated side's final x into the slot. On the
 * CPU, or as kernels in turn on the CUDA worker's stream (`stream`): there one kernel opens the feature
 * (held, both accumulators zeroed, the slot zeroed unless reg_add), each update leaves its accumulator at zero for the
 * next pass to add into, and the last update of a side adds its regularization: no memsets. */
static void ccd_feature_run(void *buffers[], const struct ccd_feature_args *a, void *stream)
{
	const char *what = "ccd_feature";
	int b = FEAT_FIXED;
	struct feat_vec w = feat_vec(buffers[FEAT_W]), h = feat_vec(buffers[FEAT_H]), pw = {0}, ph = {0}, held = {0},
			acc_h = {0}, count_h = {0}, acc_w = {0}, count_w = {0};
	if (a->prev) {
		pw = feat_vec(buffers[b++]);
		ph = feat_vec(buffers[b++]);
	}
	if (a->update_h) {
		held = feat_vec(buffers[b++]);
		acc_h = feat_vec(buffers[b++]);
		count_h = feat_vec(buffers[b++]);
	}
	if (a->update_w) {
		acc_w = feat_vec(buffers[b++]);
		count_w = feat_vec(buffers[b++]);
	}
	double *reg = a->reg ? (double *)STARPU_VARIABLE_GET_PTR(buffers[b++]) : NULL;
	void *tile = buffers[FEAT_TILE], *tile_t = buffers[FEAT_TILE_T];
	float *R = (float *)STARPU_VECTOR_GET_PTR(buffers[FEAT_R]), *RT = (float *)STARPU_VECTOR_GET_PTR(buffers[FEAT_RT]);
	const int gpu = stream != NULL; /* the accumulators start and stay at zero: the passes add into them */
	const int64_t rounds = feature_rounds(a);
#ifdef STARFA_USE_CUDA
	if (gpu)
		STARFA_CUDA_CHECK(what, starfa_cuda_ccd_open(a->update_h ? h.n : 0, h.p, h.ld, held.p, held.ld, acc_h.p,
							     acc_h.ld, a->update_w ? w.n : 0, acc_w.p, acc_w.ld,
							     a->reg_add ? NULL : reg, (cudaStream_t)stream));
#endif
	if (!gpu) {
		for (int64_t r = 0; a->update_h && r < h.n; r++)
			held.p[r * held.ld] = h.p[r * h.ld];
		if (reg && !a->reg_add)
			*reg = 0.0;
	}
	/* the column side: x = h, y = w */
	const struct starfa_ccd_vecs cols = {ph.p, pw.p, h.p, w.p, a->update_h ? w.p : NULL,
					     ph.ld, pw.ld, h.ld, w.ld, w.ld};
	pass_run(what, tile_t, RT, 1, &cols, acc_h.p, acc_h.ld, gpu, stream);
	if (a->update_h)
		solve_run(what, h.n, acc_h.p, acc_h.ld, count_h.p, count_h.ld, a->lambda, a->nonneg, h.p, h.ld, gpu,
			  rounds == 1 ? reg : NULL, stream);
	/* the row side: x = w, y = h, the feature put back with the h it had before its update */
	const struct feat_vec put = a->update_h ? held : h;
	const struct starfa_ccd_vecs rows = {pw.p, ph.p, w.p, put.p, a->update_w ? h.p : NULL,
					     pw.ld, ph.ld, w.ld, put.ld, h.ld};
	pass_run(what, tile, R, 1, &rows, acc_w.p, acc_w.ld, gpu, stream);
	if (a->update_w)
		solve_run(what, w.n, acc_w.p, acc_w.ld, count_w.p, count_w.ld, a->lambda, a->nonneg, w.p, w.ld, gpu,
			  rounds == 1 ? reg : NULL, stream);
	const struct starfa_ccd_vecs by_w = {.y = w.p, .ld_y = w.ld}, by_h = {.y = h.p, .ld_y = h.ld};
	for (int64_t s = 1; s < rounds; s++) {
		double *last = s == rounds - 1 ? reg : NULL;
		pass_run(what, tile_t, RT, 0, &by_w, acc_h.p, acc_h.ld, gpu, stream);
		solve_run(what, h.n, acc_h.p, acc_h.ld, count_h.p, count_h.ld, a->lambda, a->nonneg, h.p, h.ld, gpu, last,
			  stream);
		pass_run(what, tile, R, 0, &by_h, acc_w.p, acc_w.ld, gpu, stream);
		solve_run(what, w.n, acc_w.p, acc_w.ld, count_w.p, count_w.ld, a->lambda, a->nonneg, w.p, w.ld, gpu, last,
			  stream);
	}
}

static void ccd_feature_cpu(void *buffers[], void *cl_arg)
{
	ccd_feature_run(buffers, cl_arg, NULL);
}

#ifdef STARFA_USE_CUDA
static void ccd_feature_cuda(void *buffers[], void *cl_arg)
{
	ccd_feature_run(buffers, cl_arg, starpu_cuda_get_local_stream());
}
#endif

/* The entries its passes visit and the rows its updates write: what its time follows. */
static uint64_t ccd_feature_cost(const struct starpu_task *task)
{
	const struct ccd_feature_args *a = task->cl_arg;
	const uint64_t nnz = (uint64_t)starpu_csr_get_nnz(STARPU_TASK_GET_HANDLE(task, FEAT_TILE));
	const uint64_t rounds = (uint64_t)feature_rounds(a);
	const uint64_t m = starpu_matrix_get_ny(STARPU_TASK_GET_HANDLE(task, FEAT_W)),
		       n = starpu_matrix_get_ny(STARPU_TASK_GET_HANDLE(task, FEAT_H));
	return 2 * nnz * rounds + (a->update_w ? m * rounds : 0) + (a->update_h ? n * rounds : 0);
}

static uint32_t ccd_feature_variant(const struct starpu_task *task)
{
	const struct ccd_feature_args *a = task->cl_arg;
	/* inner's low 16 bits: its rounds are in the cost too, so inners that share them differ in footprint */
	return (uint32_t)(a->prev | a->update_w << 1 | a->update_h << 2 | a->nonneg << 3 | a->reg << 4) |
	       (uint32_t)(a->inner & 0xffff) << 5;
}

STARFA_CODELET(ccd_feature, ccd_feature_cost, ccd_feature_variant, ccd_feature_cpu,
	       STARFA_CUDA_FUNC(ccd_feature_cuda));

int starfa_task_ccd_feature(const starfa_tiled *S, const starfa_ccd_feature *f, const starfa_task_attr *attr)
{
	const char *what = "starfa_task_ccd_feature";
	if (!S || !f || !f->R || !f->RT || !f->w || !f->h || (f->update_h && (!f->held || !f->acc_h || !f->count_h)) ||
	    (f->update_w && (!f->acc_w || !f->count_w)) || (!f->prev_w) != (!f->prev_h))
		return starfa_set_error(STARFA_EINVAL, "%s: missing operand", what);
	if (f->inner < 1 || (!f->update_w && !f->update_h))
		return starfa_set_error(STARFA_EINVAL, "%s: inner must be >= 1 and a side updated", what);
	if (!starfa_tiled_has_transpose(S) || S->grid.nr != 1 || S->grid.nc != 1 || S->grid.tiles[0].nnz == 0)
		return starfa_set_error(STARFA_EINVAL, "%s: S must be one tile with entries, with its transposed grid "
						       "(starfa_insert_ccd_feature takes any grid)", what);
	const starfa_ccd_terms cols = {f->prev_h, f->prev_w, f->h, f->w, f->update_h ? f->w : NULL},
			       rows = {f->prev_w, f->prev_h, f->w, f->update_h ? f->held : f->h, f->update_w ? f->h : NULL};
	int rc = check_pass(what, S, STARFA_COLS, f->RT, &cols, f->update_h ? f->acc_h : NULL);
	if (!rc)
		rc = check_pass(what, S, STARFA_ROWS, f->R, &rows, f->update_w ? f->acc_w : NULL);
	if (rc)
		return rc;
	if ((f->update_h && !vector_ok(f->count_h, S->col_bounds, 1, S->ncols)) ||
	    (f->update_w && !vector_ok(f->count_w, S->row_bounds, 1, S->nrows)))
		return starfa_set_error(STARFA_EINVAL, "%s: the counts must have one column, blocked like their side", what);
	if (f->update_h && (f->held == f->h || f->held == f->w))
		return starfa_set_error(STARFA_EINVAL, "%s: held must be a vector of its own", what);
	/* an updated side is no vector of the other side's (as the band tasks check it) */
	if (f->w == f->h || (f->update_h && f->h == f->prev_w) || (f->update_w && f->w == f->prev_h))
		return starfa_set_error(STARFA_EINVAL, "%s: w, h and the previous feature's other side must be distinct",
					what);
	if (!(f->lambda >= 0))
		return starfa_set_error(STARFA_EINVAL, "%s: lambda must be >= 0", what);
	if (f->reg && (rc = starfa_check_slot(what, f->reg, f->reg_slot)))
		return rc;
	struct ccd_feature_args args = {f->prev_w != NULL, f->update_w != 0, f->update_h != 0, f->nonneg != 0, f->inner,
					f->lambda, f->reg != NULL, f->reg_add != 0};
	struct starpu_data_descr buffers[FEAT_FIXED + 8];
	int n = 0;
	buffers[n++] = (struct starpu_data_descr){S->grid.tiles[0].handle, STARPU_R};
	buffers[n++] = (struct starpu_data_descr){f->R->handles[0], STARPU_RW};
	buffers[n++] = (struct starpu_data_descr){S->transposed.tiles[0].handle, STARPU_R};
	buffers[n++] = (struct starpu_data_descr){f->RT->handles[0], STARPU_RW};
	buffers[n++] = (struct starpu_data_descr){f->w->blocks[0], f->update_w ? STARPU_RW : STARPU_R};
	buffers[n++] = (struct starpu_data_descr){f->h->blocks[0], f->update_h ? STARPU_RW : STARPU_R};
	if (f->prev_w) {
		buffers[n++] = (struct starpu_data_descr){f->prev_w->blocks[0], STARPU_R};
		buffers[n++] = (struct starpu_data_descr){f->prev_h->blocks[0], STARPU_R};
	}
	if (f->update_h) {
		buffers[n++] = (struct starpu_data_descr){f->held->blocks[0], STARPU_W};
		buffers[n++] = (struct starpu_data_descr){f->acc_h->blocks[0], STARPU_W};
		buffers[n++] = (struct starpu_data_descr){f->count_h->blocks[0], STARPU_R};
	}
	if (f->update_w) {
		buffers[n++] = (struct starpu_data_descr){f->acc_w->blocks[0], STARPU_W};
		buffers[n++] = (struct starpu_data_descr){f->count_w->blocks[0], STARPU_R};
	}
	if (f->reg)
		buffers[n++] = (struct starpu_data_descr){f->reg->handles[f->reg_slot], f->reg_add ? STARPU_RW : STARPU_W};
	/* per entry of a pass: 2 flops a term taken out or put back, 4 for the sums; 3 per row updated */
	const double nnz = (double)S->grid.tiles[0].nnz, rounds = (double)feature_rounds(&args);
	const double open = 2.0 * !!f->prev_w + 2.0, sums = 4.0;
	double flops = nnz * (2 * open + sums * (args.update_h + args.update_w)) + nnz * sums * 2 * (rounds - 1) +
		       3.0 * rounds * ((args.update_w ? (double)S->nrows : 0) + (args.update_h ? (double)S->ncols : 0));
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_band_where(S, STARFA_ROWS, 0));
	return starfa_submit(&ccd_feature_cl, &args, sizeof args, flops, attr, n, buffers);
}
