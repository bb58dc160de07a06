/* The SGD codelet: one pass of matrix-factorization updates over tiles (one tile, a span of one row
 * band's, or a square block of several bands'), reading and writing the tiles' user and item blocks (so
 * that StarPU runs the tasks of a stratum, which share no block, at once, and orders the others). */
#include "codelets/codelet.h"
#include "codelets/zero.h"

#include <stdlib.h>
#include "cpu/sgd.h"
#ifdef STARFA_USE_CUDA
#include "gpu/sgd.h"
#include <starpu_cuda.h>
#endif

/* The codelet's arguments: the pass, the task's user and item blocks and, for each tile, its key and
 * the blocks it reads (cl_arg of variable size). */
struct sgd_ref {
	uint64_t id;      /* the tile's key in the visiting order */
	int32_t u, v;     /* its user block and item block among the task's */
};

struct sgd_args {
	struct starfa_sgd_pass pass;
	int64_t ntiles, nusers, nitems;
	int block;        /* a block of several row bands (starfa_task_sgd_block): a model variant of its own */
	struct sgd_ref refs[];
};

/* Buffers: 0 the slot of the squared errors (W); then the nusers user blocks, each U (RW) and with
 * AdaGrad its accumulators (RW); then the nitems item blocks, V (RW) and with AdaGrad theirs (RW); then
 * the tiles' CSR (R), in visiting order. */
static int64_t per_block(const struct starfa_sgd_pass *pass)
{
	return pass->adagrad ? 2 : 1;
}

static int64_t user_buffer(const struct sgd_args *a, int64_t u)
{
	return 1 + u * per_block(&a->pass);
}

static int64_t item_buffer(const struct sgd_args *a, int64_t v)
{
	return 1 + (a->nusers + v) * per_block(&a->pass);
}

static int64_t first_tile_buffer(const struct sgd_args *a)
{
	return 1 + (a->nusers + a->nitems) * per_block(&a->pass);
}

/* A factor block's leading dimension in its elements: FP16 rows are packed two to a float. */
static int64_t factor_ld(void *buffers[], const struct starfa_sgd_pass *pass, int64_t b)
{
	return (int64_t)STARPU_MATRIX_GET_LD(buffers[b]) * (pass->half ? 2 : 1);
}

/* Tile m of the task with its user and item rows and accumulators, as buffers give them. */
static struct starfa_sgd_tile task_tile(void *buffers[], const struct sgd_args *a, int64_t m)
{
	const struct starfa_sgd_pass *pass = &a->pass;
	const int64_t b = first_tile_buffer(a) + m, ub = user_buffer(a, a->refs[m].u), vb = item_buffer(a, a->refs[m].v);
	return (struct starfa_sgd_tile){STARPU_CSR_GET_NROW(buffers[b]),
					STARPU_CSR_GET_NNZ(buffers[b]),
					STARPU_CSR_GET_ROWPTR(buffers[b]),
					STARPU_CSR_GET_COLIND(buffers[b]),
					(const float *)STARPU_CSR_GET_NZVAL(buffers[b]),
					(void *)STARPU_MATRIX_GET_PTR(buffers[vb]),
					factor_ld(buffers, pass, vb),
					pass->adagrad ? (float *)STARPU_MATRIX_GET_PTR(buffers[vb + 1]) : NULL,
					pass->adagrad ? (int64_t)STARPU_MATRIX_GET_LD(buffers[vb + 1]) : 0,
					a->refs[m].id,
					(void *)STARPU_MATRIX_GET_PTR(buffers[ub]),
					factor_ld(buffers, pass, ub),
					pass->adagrad ? (float *)STARPU_MATRIX_GET_PTR(buffers[ub + 1]) : NULL,
					pass->adagrad ? (int64_t)STARPU_MATRIX_GET_LD(buffers[ub + 1]) : 0};
}

/* The tiles one after the other, each in its own order. */
static void sgd_cpu(void *buffers[], void *cl_arg)
{
	const struct sgd_args *a = cl_arg;
	struct starfa_sgd_pass pass = a->pass;
	double sse = 0;
	for (int64_t m = 0; m < a->ntiles; m++) {
		const struct starfa_sgd_tile t = task_tile(buffers, a, m);
		pass.tile = t.id;
		sse += starfa_cpu_sgd(t.nrows, t.rowptr, t.colind, t.val, t.U, t.ldu, t.V, t.ldv, t.Gu, t.ldgu, t.Gv, t.ldgv,
				      &pass);
	}
	*(double *)STARPU_VARIABLE_GET_PTR(buffers[0]) = sse;
}

#ifdef STARFA_USE_CUDA
/* The tiles in launches of up to STARFA_SGD_SPAN_MAX (224 for a block of more), each as one wide tile
 * (gpu/sgd.h). */
static void sgd_cuda(void *buffers[], void *cl_arg)
{
	const struct sgd_args *a = cl_arg;
	struct starfa_sgd_tile *tiles = malloc((size_t)a->ntiles * sizeof *tiles);
	if (!tiles)
		starfa_cpu_fail("sgd");
	for (int64_t m = 0; m < a->ntiles; m++)
		tiles[m] = task_tile(buffers, a, m);
	cudaError_t err = starfa_cuda_sgd_tiles((int)a->ntiles, tiles, &a->pass, 0,
						(double *)STARPU_VARIABLE_GET_PTR(buffers[0]), starpu_cuda_get_local_stream());
	free(tiles);
	STARFA_CUDA_CHECK("sgd", err);
}
#endif

/* The real cost: two k-long updates per nonzero. */
static uint64_t sgd_cost(const struct starpu_task *task)
{
	const struct sgd_args *a = task->cl_arg;
	return starfa_band_task_nnz(task, (unsigned)first_tile_buffer(a), 1, (int)a->ntiles) * (uint64_t)a->pass.k;
}

/* A span of several tiles is a variant of its own: on a GPU it updates faster than one tile of the same
 * cost (bench/SGD.md), and its samples made the planner predict the GPU-alone tiles 5-12% short
 * (bench/PLACEMENT.md). A block over several row bands (the split's fallback) is another: its tiles are
 * the cores' thin ones. */
static uint32_t variant_of(int64_t k, int adagrad, int half, int span, int block)
{
	/* the block's bit above the rank's, so that the other variants keep the keys models already hold */
	return (uint32_t)(adagrad != 0) | (uint32_t)(half != 0) << 1 | (uint32_t)(span != 0) << 2 | (uint32_t)k << 3 |
	       (uint32_t)(block != 0) << 31;
}

static uint32_t sgd_variant(const struct starpu_task *task)
{
	const struct sgd_args *a = task->cl_arg;
	return variant_of(a->pass.k, a->pass.adagrad, a->pass.half, a->ntiles > 1, a->block);
}

uint32_t starfa_sgd_model_variant(const starfa_sgd_step *step)
{
	return variant_of(step->rank, step->adagrad, step->half, 0, 0);
}

uint32_t starfa_sgd_span_model_variant(const starfa_sgd_step *step)
{
	return variant_of(step->rank, step->adagrad, step->half, 1, 0);
}

STARFA_CODELET(sgd, sgd_cost, sgd_variant, sgd_cpu, STARFA_CUDA_FUNC(sgd_cuda));

/* What every pass task checks: U and V S's factors, blocked along its bands, the step's numbers. */
static int check_pass(const char *what, const starfa_tiled *S, const starfa_dense *U, const starfa_dense *V,
		      const starfa_dense *Gu, const starfa_dense *Gv, const starfa_sgd_step *step,
		      const starfa_sums *sse, int64_t slot)
{
	if (!S || !U || !V || !step)
		return starfa_set_error(STARFA_EINVAL, "%s: missing operand", what);
	int rc = starfa_check_slot(what, sse, slot);
	if (rc)
		return rc;
	const int64_t width = U->cols * (step->half ? 2 : 1); /* the rows' elements */
	if (step->rank < 1 || step->rank > STARFA_SGD_MAX_RANK || width < step->rank + 2 || V->cols != U->cols ||
	    U->rows != S->nrows || V->rows != S->ncols)
		return starfa_set_error(STARFA_EINVAL, "%s: U and V must be S's row and column factors with rank + 2 "
						       "%s or more ([p, b, 1, 0...] and [q, 1, c, 0...]), rank in 1..%d",
					what, step->half ? "halves" : "columns", STARFA_SGD_MAX_RANK);
	if (!starfa_dense_blocked_along(U, S->row_bounds, S->grid.nr) ||
	    !starfa_dense_blocked_along(V, S->col_bounds, S->grid.nc))
		return starfa_set_error(STARFA_EINVAL, "%s: U and V must be blocked along S's rows and columns", what);
	if (!(step->lr > 0) || !(step->lambda >= 0) || !(step->lambda_bias >= 0))
		return starfa_set_error(STARFA_EINVAL, "%s: the rate must be > 0 and the regularizations >= 0", what);
	if (step->adagrad && (!Gu || !Gv || Gu->cols != 1 || Gv->cols != 1 ||
			      !starfa_dense_blocked_along(Gu, S->row_bounds, S->grid.nr) ||
			      !starfa_dense_blocked_along(Gv, S->col_bounds, S->grid.nc)))
		return starfa_set_error(STARFA_EINVAL, "%s: AdaGrad needs the accumulators Gu and Gv, one column each, "
						       "blocked like U and V", what);
	return 0;
}

/* The tile visited m-th in a pass over the nr x nc bands from tile (i, j) (nr 1: a span; nr == nc: a
 * block): nc diagonals of nr tiles, tile (i + c, j + (c + t) mod nc) in diagonal t, so a span's tiles come
 * in column order. *u and *v: its row and column band among the pass's. */
static void pass_tile(int64_t nr, int64_t nc, int64_t m, int64_t *u, int64_t *v)
{
	const int64_t t = m / nr, c = m % nr;
	*u = c;
	*v = (c + t) % nc;
}

/* The factor blocks of n bands the task uses (num[b] >= 0: its number among them), RW, from buffer `first`
 * on: band b's block of F and, with AdaGrad, of its accumulators G. */
static void factor_buffers(struct starpu_data_descr *buffers, const struct sgd_args *a, int64_t first, const int32_t *num,
			   int64_t n, starpu_data_handle_t *F, starpu_data_handle_t *G)
{
	for (int64_t b = 0; b < n; b++) {
		if (num[b] < 0)
			continue;
		struct starpu_data_descr *d = buffers + first + num[b] * per_block(&a->pass);
		d[0] = (struct starpu_data_descr){F[b], STARPU_RW};
		if (a->pass.adagrad)
			d[1] = (struct starpu_data_descr){G[b], STARPU_RW};
	}
}

/* Submits that pass, reading and writing the bands of its nonempty tiles only; placed by attr, else by
 * tile (i, j)'s row band. */
static int submit_pass(const starfa_tiled *S, int64_t i, int64_t nr, int64_t j, int64_t nc, starfa_dense *U,
		       starfa_dense *V, starfa_dense *Gu, starfa_dense *Gv, const starfa_sgd_step *step, starfa_sums *sse,
		       int64_t slot, const starfa_task_attr *attr)
{
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_band_where(S, STARFA_ROWS, i));
	/* the task's bands: those of its nonempty tiles, numbered in band order */
	int32_t *un = starfa_malloc((size_t)(nr + nc), sizeof *un), *vn = un ? un + nr : NULL;
	if (!un)
		return STARFA_ENOMEM;
	for (int64_t b = 0; b < nr + nc; b++)
		un[b] = -1;
	const int64_t n = nr * nc;
	int64_t nonempty = 0, nnz = 0, tu = 0, tv = 0;
	for (int64_t m = 0, u, v; m < n; m++) {
		pass_tile(nr, nc, m, &u, &v);
		const int64_t tile_nnz = starfa_grid_tile(&S->grid, i + u, j + v)->nnz;
		if (tile_nnz == 0)
			continue;
		nonempty++;
		nnz += tile_nnz;
		un[u] = vn[v] = 1;
	}
	for (int64_t b = 0; b < nr; b++)
		un[b] = un[b] > 0 ? (int32_t)tu++ : -1;
	for (int64_t b = 0; b < nc; b++)
		vn[b] = vn[b] > 0 ? (int32_t)tv++ : -1;
	if (nonempty == 0) {
		free(un);
		return starfa_submit_zero(sse->handles[slot], STARFA_ZERO_VARIABLE, attr);
	}
	const struct starfa_sgd_pass pass = {step->rank,   step->lr,	 step->lambda,
					     step->lambda_bias, step->mu, step->biases,
					     step->adagrad != 0, step->seed, step->epoch,
					     (uint64_t)(i * S->grid.nc + j), step->half != 0};
	const size_t args_size = sizeof(struct sgd_args) + (size_t)nonempty * sizeof(struct sgd_ref);
	struct sgd_args *args = starfa_malloc(1, args_size);
	struct starpu_data_descr *buffers = NULL;
	if (args) {
		*args = (struct sgd_args){pass, nonempty, tu, tv, nr > 1};
		buffers = starfa_malloc((size_t)(first_tile_buffer(args) + nonempty), sizeof *buffers);
	}
	if (!buffers) {
		free(un);
		free(args);
		return STARFA_ENOMEM;
	}
	const int64_t nbuffers = first_tile_buffer(args) + nonempty;
	buffers[0] = (struct starpu_data_descr){sse->handles[slot], STARPU_W};
	factor_buffers(buffers, args, user_buffer(args, 0), un, nr, U->blocks + i, step->adagrad ? Gu->blocks + i : NULL);
	factor_buffers(buffers, args, item_buffer(args, 0), vn, nc, V->blocks + j, step->adagrad ? Gv->blocks + j : NULL);
	for (int64_t m = 0, k = 0, u, v; m < n; m++) {
		pass_tile(nr, nc, m, &u, &v);
		const struct starfa_tile *tile = starfa_grid_tile(&S->grid, i + u, j + v);
		if (tile->nnz == 0)
			continue;
		args->refs[k] = (struct sgd_ref){(uint64_t)((i + u) * S->grid.nc + j + v), un[u], vn[v]};
		buffers[first_tile_buffer(args) + k++] = (struct starpu_data_descr){tile->handle, STARPU_R};
	}
	free(un);
	double flops = (step->adagrad ? 12.0 : 8.0) * (double)step->rank * (double)nnz;
	int rc = starfa_submit(&sgd_cl, args, args_size, flops, attr, (int)nbuffers, buffers);
	free(args);
	free(buffers);
	return rc;
}

int starfa_task_sgd_span(const starfa_tiled *S, int64_t i, int64_t j, int64_t ntiles, starfa_dense *U, starfa_dense *V,
			 starfa_dense *Gu, starfa_dense *Gv, const starfa_sgd_step *step, starfa_sums *sse, int64_t slot,
			 const starfa_task_attr *attr)
{
	const char *what = ntiles == 1 ? "starfa_task_sgd" : "starfa_task_sgd_span";
	int rc = check_pass(what, S, U, V, Gu, Gv, step, sse, slot);
	if (rc)
		return rc;
	if (i < 0 || j < 0 || i >= S->grid.nr || j >= S->grid.nc)
		return starfa_index_error(what, "tile", i, j, S->grid.nr, S->grid.nc);
	if (ntiles < 1 || ntiles > S->grid.nc - j)
		return starfa_set_error(STARFA_EINVAL, "%s: %lld tiles from column band %lld do not fit the grid's %lld",
					what, (long long)ntiles, (long long)j, (long long)S->grid.nc);
	return submit_pass(S, i, 1, j, ntiles, U, V, Gu, Gv, step, sse, slot, attr);
}

int starfa_task_sgd_block(const starfa_tiled *S, int64_t i, int64_t j, int64_t n, starfa_dense *U, starfa_dense *V,
			  starfa_dense *Gu, starfa_dense *Gv, const starfa_sgd_step *step, starfa_sums *sse,
			  int64_t slot, const starfa_task_attr *attr)
{
	const char *what = "starfa_task_sgd_block";
	int rc = check_pass(what, S, U, V, Gu, Gv, step, sse, slot);
	if (rc)
		return rc;
	if (i < 0 || j < 0 || i >= S->grid.nr || j >= S->grid.nc)
		return starfa_index_error(what, "tile", i, j, S->grid.nr, S->grid.nc);
	if (n < 1 || n > S->grid.nr - i || n > S->grid.nc - j)
		return starfa_set_error(STARFA_EINVAL, "%s: a block of %lld x %lld tiles from tile (%lld, %lld) does not "
						       "fit the %lld x %lld grid", what, (long long)n, (long long)n,
					(long long)i, (long long)j, (long long)S->grid.nr, (long long)S->grid.nc);
	if (n > INT32_MAX / n)
		return starfa_set_error(STARFA_EINVAL, "%s: a block of %lld x %lld tiles is too many for one task", what,
					(long long)n, (long long)n);
	return submit_pass(S, i, n, j, n, U, V, Gu, Gv, step, sse, slot, attr);
}

int starfa_task_sgd(const starfa_tiled *S, int64_t i, int64_t j, starfa_dense *U, starfa_dense *V, starfa_dense *Gu,
		    starfa_dense *Gv, const starfa_sgd_step *step, starfa_sums *sse, int64_t slot,
		    const starfa_task_attr *attr)
{
	return starfa_task_sgd_span(S, i, j, 1, U, V, Gu, Gv, step, sse, slot, attr);
}
