/* The sparse-values codelets: values_transpose (a tile's values to the other grid through the map),
 * values_map (element-wise maps) and values_reduce (sums of a function of the values into a slot). */
#include "codelets/codelet.h"
#include "codelets/zero.h"
#include "cpu/elementwise.h"
#include "cpu/values.h"
#ifdef STARFA_USE_CUDA
#include "gpu/values.h"
#include <starpu_cuda.h>
#endif

/* Where an operand x lives: nowhere, in a values vector, or in the CSR tile's own values. */
enum { X_NONE = 0, X_VECTOR = 1, X_CSR = 2 };

static const float *x_pointer(void *buffer, int kind)
{
	if (kind == X_VECTOR)
		return (const float *)STARPU_VECTOR_GET_PTR(buffer);
	if (kind == X_CSR)
		return (const float *)STARPU_CSR_GET_NZVAL(buffer);
	return NULL;
}

/* ------------------------------------------------------------------ values_transpose */

struct transpose_args {
	int to_forward; /* 0: forward tile -> transposed tile; 1: back */
};

/* Buffers: 0 the transposed tile's map, 1 source values, 2 destination values. */
static void values_transpose_cpu(void *buffers[], void *cl_arg)
{
	const struct transpose_args *args = cl_arg;
	starfa_cpu_values_transpose(STARPU_VECTOR_GET_NX(buffers[0]), (const uint32_t *)STARPU_VECTOR_GET_PTR(buffers[0]),
				    (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
				    (float *)STARPU_VECTOR_GET_PTR(buffers[2]), args->to_forward);
}

#ifdef STARFA_USE_CUDA
static void values_transpose_cuda(void *buffers[], void *cl_arg)
{
	const struct transpose_args *args = cl_arg;
	STARFA_CUDA_CHECK("values_transpose",
			  starfa_cuda_values_transpose(STARPU_VECTOR_GET_NX(buffers[0]),
						       (const uint32_t *)STARPU_VECTOR_GET_PTR(buffers[0]),
						       (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
						       (float *)STARPU_VECTOR_GET_PTR(buffers[2]), args->to_forward,
						       starpu_cuda_get_local_stream()));
}
#endif

static uint64_t values_transpose_cost(const struct starpu_task *task)
{
	return starpu_vector_get_nx(task->handles[0]);
}

static uint32_t values_transpose_variant(const struct starpu_task *task)
{
	return (uint32_t)((const struct transpose_args *)task->cl_arg)->to_forward;
}

STARFA_CODELET(values_transpose, values_transpose_cost, values_transpose_variant, values_transpose_cpu,
	       STARFA_CUDA_FUNC(values_transpose_cuda));

int starfa_task_values_transpose(const starfa_sparse_values *src, int64_t i, int64_t j, starfa_sparse_values *dst,
				 const starfa_task_attr *attr)
{
	if (!src || !dst)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_values_transpose: missing operand");
	if (src->pattern != dst->pattern || src->side == dst->side)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_values_transpose: the values must belong to the same "
						       "matrix, on opposite sides");
	if (i < 0 || j < 0 || i >= src->grid->nr || j >= src->grid->nc)
		return starfa_index_error("starfa_task_values_transpose", "tile", i, j, src->grid->nr, src->grid->nc);
	/* The map lives on the transposed grid's tile. */
	const int to_forward = src->side == STARFA_COLS;
	const struct starfa_tile *tt = to_forward ? starfa_grid_tile(src->grid, i, j) : starfa_grid_tile(dst->grid, j, i);
	if (tt->nnz == 0)
		return 0;
	struct transpose_args args = {to_forward};
	/* Where the values are going: the band of the other side's sweep that reads them. */
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_band_where(dst->pattern, dst->side, j));
	return starfa_submit(&values_transpose_cl, &args, sizeof args, 0.0, attr,
			     STARFA_BUFFERS({tt->map_handle, STARPU_R}, {src->handles[i * src->grid->nc + j], STARPU_R},
					    {dst->handles[j * dst->grid->nc + i], STARPU_W}));
}

/* ------------------------------------------------------------------ values_map */

struct map_args {
	int op, xkind;
	float a, b;
};

/* Buffers: 0 Y's tile, 1 x (values vector or CSR tile) when the op reads it. */
static void values_map_cpu(void *buffers[], void *cl_arg)
{
	const struct map_args *args = cl_arg;
	starfa_cpu_values_map(STARPU_VECTOR_GET_NX(buffers[0]), args->op, args->a, args->b,
			      args->xkind ? x_pointer(buffers[1], args->xkind) : NULL,
			      (float *)STARPU_VECTOR_GET_PTR(buffers[0]));
}

#ifdef STARFA_USE_CUDA
static void values_map_cuda(void *buffers[], void *cl_arg)
{
	const struct map_args *args = cl_arg;
	STARFA_CUDA_CHECK("values_map", starfa_cuda_values_map(STARPU_VECTOR_GET_NX(buffers[0]), args->op, args->a, args->b,
							       args->xkind ? x_pointer(buffers[1], args->xkind) : NULL,
							       (float *)STARPU_VECTOR_GET_PTR(buffers[0]),
							       starpu_cuda_get_local_stream()));
}
#endif

static uint64_t values_cost(const struct starpu_task *task)
{
	return starpu_vector_get_nx(task->handles[0]);
}

static uint32_t values_map_variant(const struct starpu_task *task)
{
	return (uint32_t)((const struct map_args *)task->cl_arg)->op;
}

STARFA_CODELET(values_map, values_cost, values_map_variant, values_map_cpu, STARFA_CUDA_FUNC(values_map_cuda));

/* Checks Y's tile and the operand; gives Y's tile and x's handle and kind (or an error). */
static int values_operands(const char *what, const starfa_sparse_values *Y, int64_t i, int64_t j,
			   const starfa_sparse_values *X, int needs_x, const struct starfa_tile **tile,
			   starpu_data_handle_t *x, int *xkind)
{
	if (!Y)
		return starfa_set_error(STARFA_EINVAL, "%s: missing operand", what);
	if (i < 0 || j < 0 || i >= Y->grid->nr || j >= Y->grid->nc)
		return starfa_index_error(what, "tile", i, j, Y->grid->nr, Y->grid->nc);
	if (X && (X->pattern != Y->pattern || X->side != Y->side))
		return starfa_set_error(STARFA_EINVAL, "%s: X and Y must be values of the same matrix on the same side",
					what);
	*tile = starfa_grid_tile(Y->grid, i, j);
	*x = NULL;
	*xkind = X_NONE;
	if (needs_x) {
		*x = X ? X->handles[i * Y->grid->nc + j] : (*tile)->handle;
		*xkind = X ? X_VECTOR : X_CSR;
	}
	return 0;
}

int starfa_task_values_map(starfa_sparse_values *Y, int64_t i, int64_t j, starfa_values_op op, float a, float b,
			   const starfa_sparse_values *X, const starfa_task_attr *attr)
{
	if ((int)op < 0 || op >= STARFA_VALUES_OPS)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_values_map: unknown op %d", (int)op);
	const struct starfa_tile *tile;
	starpu_data_handle_t x;
	int xkind;
	int rc = values_operands("starfa_task_values_map", Y, i, j, X, starfa_values_reads_x(op), &tile, &x, &xkind);
	if (rc || tile->nnz == 0)
		return rc;
	struct map_args args = {(int)op, xkind, a, b};
	starpu_data_handle_t y = Y->handles[i * Y->grid->nc + j];
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_band_where(Y->pattern, Y->side, i));
	enum starpu_data_access_mode ymode = starfa_values_reads_y(op) ? STARPU_RW : STARPU_W;
	if (xkind)
		return starfa_submit(&values_map_cl, &args, sizeof args, (double)tile->nnz, attr,
				     STARFA_BUFFERS({y, ymode}, {x, STARPU_R}));
	return starfa_submit(&values_map_cl, &args, sizeof args, (double)tile->nnz, attr, STARFA_BUFFERS({y, ymode}));
}

/* ------------------------------------------------------------------ values_reduce */

struct reduce_args {
	int op, xkind;
	float a;
};

/* Buffers: 0 the slot (a double), 1 Y's tile, 2 x when the op reads it. */
static void values_reduce_cpu(void *buffers[], void *cl_arg)
{
	const struct reduce_args *args = cl_arg;
	*(double *)STARPU_VARIABLE_GET_PTR(buffers[0]) = starfa_cpu_values_reduce(
		STARPU_VECTOR_GET_NX(buffers[1]), args->op, args->a, args->xkind ? x_pointer(buffers[2], args->xkind) : NULL,
		(const float *)STARPU_VECTOR_GET_PTR(buffers[1]));
}

#ifdef STARFA_USE_CUDA
static void values_reduce_cuda(void *buffers[], void *cl_arg)
{
	const struct reduce_args *args = cl_arg;
	STARFA_CUDA_CHECK("values_reduce",
			  starfa_cuda_values_reduce(STARPU_VECTOR_GET_NX(buffers[1]), args->op, args->a,
						    args->xkind ? x_pointer(buffers[2], args->xkind) : NULL,
						    (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
						    (double *)STARPU_VARIABLE_GET_PTR(buffers[0]),
						    starpu_cuda_get_local_stream()));
}
#endif

static uint64_t values_reduce_cost(const struct starpu_task *task)
{
	return starpu_vector_get_nx(task->handles[1]);
}

static uint32_t values_reduce_variant(const struct starpu_task *task)
{
	return (uint32_t)((const struct reduce_args *)task->cl_arg)->op;
}

STARFA_CODELET(values_reduce, values_reduce_cost, values_reduce_variant, values_reduce_cpu,
	       STARFA_CUDA_FUNC(values_reduce_cuda));

int starfa_task_values_reduce(const starfa_sparse_values *Y, int64_t i, int64_t j, starfa_reduce_op op, float a,
			      const starfa_sparse_values *X, starfa_sums *sums, int64_t slot,
			      const starfa_task_attr *attr)
{
	const char *what = "starfa_task_values_reduce";
	if ((int)op < 0 || op >= STARFA_REDUCE_OPS)
		return starfa_set_error(STARFA_EINVAL, "%s: unknown op %d", what, (int)op);
	int rc = starfa_check_slot(what, sums, slot);
	const struct starfa_tile *tile;
	starpu_data_handle_t x;
	int xkind;
	if (!rc)
		rc = values_operands(what, Y, i, j, X, starfa_reduce_reads_x(op), &tile, &x, &xkind);
	if (rc)
		return rc;
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_band_where(Y->pattern, Y->side, i));
	if (tile->nnz == 0) /* nothing to add: the slot reads as zero */
		return starfa_submit_zero(sums->handles[slot], STARFA_ZERO_VARIABLE, attr);
	struct reduce_args args = {(int)op, xkind, a};
	starpu_data_handle_t y = Y->handles[i * Y->grid->nc + j];
	if (xkind)
		return starfa_submit(&values_reduce_cl, &args, sizeof args, 2.0 * (double)tile->nnz, attr,
				     STARFA_BUFFERS({sums->handles[slot], STARPU_W}, {y, STARPU_R}, {x, STARPU_R}));
	return starfa_submit(&values_reduce_cl, &args, sizeof args, 2.0 * (double)tile->nnz, attr,
			     STARFA_BUFFERS({sums->handles[slot], STARPU_W}, {y, STARPU_R}));
}
