/* The SGD codelet: one pass of matrix-factorization updates over one tile, reading and writing the
 * tile's user block and item block (so that StarPU runs the tiles of a stratum, which share no block,
 * at once, and orders the others). */
#include "codelets/codelet.h"
#include "codelets/zero.h"
#include "cpu/sgd.h"
#ifdef STARFA_USE_CUDA
#include "gpu/sgd.h"
#include <starpu_cuda.h>
#endif

/* AdaGrad's accumulators: buffers 4 and 5 (one column, blocked like U and V), else none. */
static float *accumulator(void *buffers[], const struct starfa_sgd_pass *pass, int b, int64_t *ld)
{
	*ld = pass->adagrad ? (int64_t)STARPU_MATRIX_GET_LD(buffers[b]) : 0;
	return pass->adagrad ? (float *)STARPU_MATRIX_GET_PTR(buffers[b]) : NULL;
}

/* A factor block's leading dimension in its elements: FP16 rows are packed two to a float. */
static int64_t factor_ld(void *buffers[], const struct starfa_sgd_pass *pass, int b)
{
	return (int64_t)STARPU_MATRIX_GET_LD(buffers[b]) * (pass->half ? 2 : 1);
}

/* Buffers: 0 S tile (CSR), 1 U block (RW), 2 V block (RW), 3 the slot of the squared errors (W), and with
 * AdaGrad 4 and 5 the blocks' accumulators (RW). */
static void sgd_cpu(void *buffers[], void *cl_arg)
{
	const struct starfa_sgd_pass *pass = cl_arg;
	int64_t ldgu, ldgv;
	float *Gu = accumulator(buffers, pass, 4, &ldgu), *Gv = accumulator(buffers, pass, 5, &ldgv);
	*(double *)STARPU_VARIABLE_GET_PTR(buffers[3]) = starfa_cpu_sgd(
		STARPU_CSR_GET_NROW(buffers[0]), STARPU_CSR_GET_ROWPTR(buffers[0]), STARPU_CSR_GET_COLIND(buffers[0]),
		(const float *)STARPU_CSR_GET_NZVAL(buffers[0]), (void *)STARPU_MATRIX_GET_PTR(buffers[1]),
		factor_ld(buffers, pass, 1), (void *)STARPU_MATRIX_GET_PTR(buffers[2]), factor_ld(buffers, pass, 2), Gu, ldgu,
		Gv, ldgv, pass);
}

#ifdef STARFA_USE_CUDA
static void sgd_cuda(void *buffers[], void *cl_arg)
{
	const struct starfa_sgd_pass *pass = cl_arg;
	int64_t ldgu, ldgv;
	float *Gu = accumulator(buffers, pass, 4, &ldgu), *Gv = accumulator(buffers, pass, 5, &ldgv);
	STARFA_CUDA_CHECK("sgd", starfa_cuda_sgd(STARPU_CSR_GET_NROW(buffers[0]), STARPU_CSR_GET_NNZ(buffers[0]),
						 STARPU_CSR_GET_ROWPTR(buffers[0]), STARPU_CSR_GET_COLIND(buffers[0]),
						 (const float *)STARPU_CSR_GET_NZVAL(buffers[0]),
						 (void *)STARPU_MATRIX_GET_PTR(buffers[1]), factor_ld(buffers, pass, 1),
						 (void *)STARPU_MATRIX_GET_PTR(buffers[2]), factor_ld(buffers, pass, 2),
						 Gu, ldgu, Gv, ldgv, pass, 0, (double *)STARPU_VARIABLE_GET_PTR(buffers[3]),
						 starpu_cuda_get_local_stream()));
}
#endif

/* The real cost: two k-long updates per nonzero. */
static uint64_t sgd_cost(const struct starpu_task *task)
{
	return (uint64_t)starpu_csr_get_nnz(task->handles[0]) * (uint64_t)((const struct starfa_sgd_pass *)task->cl_arg)->k;
}

static uint32_t sgd_variant(const struct starpu_task *task)
{
	const struct starfa_sgd_pass *pass = task->cl_arg;
	return (uint32_t)(pass->adagrad | pass->half << 1);
}

STARFA_CODELET(sgd, sgd_cost, sgd_variant, sgd_cpu, STARFA_CUDA_FUNC(sgd_cuda));

int starfa_task_sgd(const starfa_tiled *S, int64_t i, int64_t j, starfa_dense *U, starfa_dense *V, starfa_dense *Gu,
		    starfa_dense *Gv, const starfa_sgd_step *step, starfa_sums *sse, int64_t slot,
		    const starfa_task_attr *attr)
{
	const char *what = "starfa_task_sgd";
	if (!S || !U || !V || !step)
		return starfa_set_error(STARFA_EINVAL, "%s: missing operand", what);
	int rc = starfa_check_slot(what, sse, slot);
	if (rc)
		return rc;
	if (i < 0 || j < 0 || i >= S->grid.nr || j >= S->grid.nc)
		return starfa_index_error(what, "tile", i, j, S->grid.nr, S->grid.nc);
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
	const struct starfa_tile *tile = starfa_grid_tile(&S->grid, i, j);
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_band_where(S, STARFA_ROWS, i));
	if (tile->nnz == 0)
		return starfa_submit_zero(sse->handles[slot], STARFA_ZERO_VARIABLE, attr);
	struct starfa_sgd_pass pass = {step->rank,   step->lr,	 step->lambda,
				       step->lambda_bias, step->mu, step->biases,
				       step->adagrad != 0, step->seed, step->epoch,
				       (uint64_t)(i * S->grid.nc + j), step->half != 0};
	double flops = (step->adagrad ? 12.0 : 8.0) * (double)step->rank * (double)tile->nnz;
	if (step->adagrad)
		return starfa_submit(&sgd_cl, &pass, sizeof pass, flops, attr,
				     STARFA_BUFFERS({tile->handle, STARPU_R}, {U->blocks[i], STARPU_RW},
						    {V->blocks[j], STARPU_RW}, {sse->handles[slot], STARPU_W},
						    {Gu->blocks[i], STARPU_RW}, {Gv->blocks[j], STARPU_RW}));
	return starfa_submit(&sgd_cl, &pass, sizeof pass, flops, attr,
			     STARFA_BUFFERS({tile->handle, STARPU_R}, {U->blocks[i], STARPU_RW}, {V->blocks[j], STARPU_RW},
					    {sse->handles[slot], STARPU_W}));
}
