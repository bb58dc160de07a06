/* The SGD codelet: one pass of matrix-factorization updates over tiles of one row band (one tile, or a
 * span of them), reading and writing the band's user block and the tiles' item blocks (so that StarPU
 * runs the tasks of a stratum, which share no block, at once, and orders the others). */
#include "codelets/codelet.h"
#include "codelets/zero.h"

#include <stdlib.h>
#include "cpu/sgd.h"
#ifdef STARFA_USE_CUDA
#include "gpu/sgd.h"
#include <starpu_cuda.h>
#endif

/* The codelet's arguments: the pass and the keys of the task's tiles (cl_arg of variable size). */
struct sgd_args {
	struct starfa_sgd_pass pass;
	int64_t ntiles;
	uint64_t ids[];
};

/* Buffers: 0 the U block (RW), 1 the slot of the squared errors (W), with AdaGrad 2 the U block's
 * accumulators (RW); then for each tile its CSR (R) and V block (RW), and with AdaGrad the V block's
 * accumulators (RW). */
static int64_t head(const struct starfa_sgd_pass *pass)
{
	return pass->adagrad ? 3 : 2;
}

static int64_t stride(const struct starfa_sgd_pass *pass)
{
	return pass->adagrad ? 3 : 2;
}

/* A factor block's leading dimension in its elements: FP16 rows are packed two to a float. */
static int64_t factor_ld(void *buffers[], const struct starfa_sgd_pass *pass, int64_t b)
{
	return (int64_t)STARPU_MATRIX_GET_LD(buffers[b]) * (pass->half ? 2 : 1);
}

/* Tile m of the task, its V block and accumulators as buffers give them. */
static struct starfa_sgd_tile task_tile(void *buffers[], const struct sgd_args *a, int64_t m)
{
	const struct starfa_sgd_pass *pass = &a->pass;
	const int64_t b = head(pass) + m * stride(pass);
	return (struct starfa_sgd_tile){STARPU_CSR_GET_NROW(buffers[b]),
					STARPU_CSR_GET_NNZ(buffers[b]),
					STARPU_CSR_GET_ROWPTR(buffers[b]),
					STARPU_CSR_GET_COLIND(buffers[b]),
					(const float *)STARPU_CSR_GET_NZVAL(buffers[b]),
					(void *)STARPU_MATRIX_GET_PTR(buffers[b + 1]),
					factor_ld(buffers, pass, b + 1),
					pass->adagrad ? (float *)STARPU_MATRIX_GET_PTR(buffers[b + 2]) : NULL,
					pass->adagrad ? (int64_t)STARPU_MATRIX_GET_LD(buffers[b + 2]) : 0,
					a->ids[m]};
}

static float *user_accumulator(void *buffers[], const struct starfa_sgd_pass *pass, int64_t *ld)
{
	*ld = pass->adagrad ? (int64_t)STARPU_MATRIX_GET_LD(buffers[2]) : 0;
	return pass->adagrad ? (float *)STARPU_MATRIX_GET_PTR(buffers[2]) : NULL;
}

/* The tiles one after the other, each in its own order. */
static void sgd_cpu(void *buffers[], void *cl_arg)
{
	const struct sgd_args *a = cl_arg;
	struct starfa_sgd_pass pass = a->pass;
	int64_t ldgu;
	float *Gu = user_accumulator(buffers, &pass, &ldgu);
	void *U = (void *)STARPU_MATRIX_GET_PTR(buffers[0]);
	const int64_t ldu = factor_ld(buffers, &pass, 0);
	double sse = 0;
	for (int64_t m = 0; m < a->ntiles; m++) {
		const struct starfa_sgd_tile t = task_tile(buffers, a, m);
		pass.tile = t.id;
		sse += starfa_cpu_sgd(t.nrows, t.rowptr, t.colind, t.val, U, ldu, t.V, t.ldv, Gu, ldgu, t.Gv, t.ldgv, &pass);
	}
	*(double *)STARPU_VARIABLE_GET_PTR(buffers[1]) = sse;
}

#ifdef STARFA_USE_CUDA
/* The tiles in one launch, as one wide tile (gpu/sgd.h). */
static void sgd_cuda(void *buffers[], void *cl_arg)
{
	const struct sgd_args *a = cl_arg;
	struct starfa_sgd_tile *tiles = malloc((size_t)a->ntiles * sizeof *tiles);
	if (!tiles)
		starfa_cpu_fail("sgd");
	for (int64_t m = 0; m < a->ntiles; m++)
		tiles[m] = task_tile(buffers, a, m);
	int64_t ldgu;
	float *Gu = user_accumulator(buffers, &a->pass, &ldgu);
	cudaError_t err = starfa_cuda_sgd_span((int)a->ntiles, tiles, (void *)STARPU_MATRIX_GET_PTR(buffers[0]),
					       factor_ld(buffers, &a->pass, 0), Gu, ldgu, &a->pass, 0,
					       (double *)STARPU_VARIABLE_GET_PTR(buffers[1]), starpu_cuda_get_local_stream());
	free(tiles);
	STARFA_CUDA_CHECK("sgd", err);
}
#endif

/* The real cost: two k-long updates per nonzero. */
static uint64_t sgd_cost(const struct starpu_task *task)
{
	const struct sgd_args *a = task->cl_arg;
	return starfa_band_task_nnz(task, (unsigned)head(&a->pass), (unsigned)stride(&a->pass), (int)a->ntiles) *
	       (uint64_t)a->pass.k;
}

/* A span of several tiles is a variant of its own: on a GPU it updates faster than one tile of the same
 * cost (bench/SGD.md), and its samples made the planner predict the GPU-alone tiles 5-12% short
 * (bench/PLACEMENT.md). */
static uint32_t variant_of(int64_t k, int adagrad, int half, int span)
{
	return (uint32_t)(adagrad != 0) | (uint32_t)(half != 0) << 1 | (uint32_t)(span != 0) << 2 | (uint32_t)k << 3;
}

static uint32_t sgd_variant(const struct starpu_task *task)
{
	const struct sgd_args *a = task->cl_arg;
	return variant_of(a->pass.k, a->pass.adagrad, a->pass.half, a->ntiles > 1);
}

uint32_t starfa_sgd_model_variant(const starfa_sgd_step *step)
{
	return variant_of(step->rank, step->adagrad, step->half, 0);
}

uint32_t starfa_sgd_span_model_variant(const starfa_sgd_step *step)
{
	return variant_of(step->rank, step->adagrad, step->half, 1);
}

STARFA_CODELET(sgd, sgd_cost, sgd_variant, sgd_cpu, STARFA_CUDA_FUNC(sgd_cuda));

int starfa_task_sgd_span(const starfa_tiled *S, int64_t i, int64_t j, int64_t ntiles, starfa_dense *U, starfa_dense *V,
			 starfa_dense *Gu, starfa_dense *Gv, const starfa_sgd_step *step, starfa_sums *sse, int64_t slot,
			 const starfa_task_attr *attr)
{
	const char *what = ntiles == 1 ? "starfa_task_sgd" : "starfa_task_sgd_span";
	if (!S || !U || !V || !step)
		return starfa_set_error(STARFA_EINVAL, "%s: missing operand", what);
	int rc = starfa_check_slot(what, sse, slot);
	if (rc)
		return rc;
	if (i < 0 || j < 0 || i >= S->grid.nr || j >= S->grid.nc)
		return starfa_index_error(what, "tile", i, j, S->grid.nr, S->grid.nc);
	if (ntiles < 1 || ntiles > S->grid.nc - j)
		return starfa_set_error(STARFA_EINVAL, "%s: %lld tiles from column band %lld do not fit the grid's %lld",
					what, (long long)ntiles, (long long)j, (long long)S->grid.nc);
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
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_band_where(S, STARFA_ROWS, i));
	int64_t nonempty = 0, nnz = 0;
	for (int64_t t = j; t < j + ntiles; t++) {
		const int64_t tile_nnz = starfa_grid_tile(&S->grid, i, t)->nnz;
		nonempty += tile_nnz > 0;
		nnz += tile_nnz;
	}
	if (nonempty == 0)
		return starfa_submit_zero(sse->handles[slot], STARFA_ZERO_VARIABLE, attr);
	const struct starfa_sgd_pass pass = {step->rank,   step->lr,	 step->lambda,
					     step->lambda_bias, step->mu, step->biases,
					     step->adagrad != 0, step->seed, step->epoch,
					     (uint64_t)(i * S->grid.nc + j), step->half != 0};
	const size_t args_size = sizeof(struct sgd_args) + (size_t)nonempty * sizeof(uint64_t);
	const int64_t nbuffers = head(&pass) + nonempty * stride(&pass);
	struct sgd_args *args = starfa_malloc(1, args_size);
	struct starpu_data_descr *buffers = starfa_malloc((size_t)nbuffers, sizeof *buffers);
	if (!args || !buffers) {
		free(args);
		free(buffers);
		return STARFA_ENOMEM;
	}
	args->pass = pass;
	args->ntiles = nonempty;
	buffers[0] = (struct starpu_data_descr){U->blocks[i], STARPU_RW};
	buffers[1] = (struct starpu_data_descr){sse->handles[slot], STARPU_W};
	if (step->adagrad)
		buffers[2] = (struct starpu_data_descr){Gu->blocks[i], STARPU_RW};
	for (int64_t t = j, m = 0; t < j + ntiles; t++) {
		const struct starfa_tile *tile = starfa_grid_tile(&S->grid, i, t);
		if (tile->nnz == 0)
			continue;
		args->ids[m] = (uint64_t)(i * S->grid.nc + t);
		struct starpu_data_descr *b = buffers + head(&pass) + m++ * stride(&pass);
		b[0] = (struct starpu_data_descr){tile->handle, STARPU_R};
		b[1] = (struct starpu_data_descr){V->blocks[t], STARPU_RW};
		if (step->adagrad)
			b[2] = (struct starpu_data_descr){Gv->blocks[t], STARPU_RW};
	}
	double flops = (step->adagrad ? 12.0 : 8.0) * (double)step->rank * (double)nnz;
	rc = starfa_submit(&sgd_cl, args, args_size, flops, attr, (int)nbuffers, buffers);
	free(args);
	free(buffers);
	return rc;
}

int starfa_task_sgd(const starfa_tiled *S, int64_t i, int64_t j, starfa_dense *U, starfa_dense *V, starfa_dense *Gu,
		    starfa_dense *Gv, const starfa_sgd_step *step, starfa_sums *sse, int64_t slot,
		    const starfa_task_attr *attr)
{
	return starfa_task_sgd_span(S, i, j, 1, U, V, Gu, Gv, step, sse, slot, attr);
}
