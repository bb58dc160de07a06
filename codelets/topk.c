/* The top_k codelet: for the active rows of a row band, the k columns of a column band with the highest
 * scores A_r · B_c, leaving out the tile's entries (what each row has seen), on CPU or CUDA workers. */
#include "codelets/codelet.h"
#include "cpu/topk.h"
#ifdef STARFA_USE_CUDA
#include "gpu/topk.h"
#include <starpu_cublas_v2.h>
#include <starpu_cuda.h>
#endif

struct top_k_args {
	int64_t k;
	int has_active, has_tile;
};

/* Buffers: 0 A's row block, 1 B's, 2 the lists (W), then the active flags and the tile (CSR) when given. */
static void top_k_cpu(void *buffers[], void *cl_arg)
{
	const struct top_k_args *args = cl_arg;
	void *tile = args->has_tile ? buffers[3 + args->has_active] : NULL;
	if (starfa_cpu_top_k_rows(STARPU_MATRIX_GET_NY(buffers[0]), STARPU_MATRIX_GET_NY(buffers[1]),
				  STARPU_MATRIX_GET_NX(buffers[0]), (const float *)STARPU_MATRIX_GET_PTR(buffers[0]),
				  STARPU_MATRIX_GET_LD(buffers[0]), (const float *)STARPU_MATRIX_GET_PTR(buffers[1]),
				  STARPU_MATRIX_GET_LD(buffers[1]), tile ? STARPU_CSR_GET_ROWPTR(tile) : NULL,
				  tile ? STARPU_CSR_GET_COLIND(tile) : NULL,
				  args->has_active ? (const float *)STARPU_MATRIX_GET_PTR(buffers[3]) : NULL, args->k,
				  (float *)STARPU_MATRIX_GET_PTR(buffers[2]), STARPU_MATRIX_GET_LD(buffers[2])))
		starfa_cpu_fail("top_k");
}

#ifdef STARFA_USE_CUDA
static void top_k_cuda(void *buffers[], void *cl_arg)
{
	const struct top_k_args *args = cl_arg;
	void *tile = args->has_tile ? buffers[3 + args->has_active] : NULL;
	starfa_gpu_status st = starfa_cuda_top_k_rows(
		starpu_cublas_get_local_handle(), STARPU_MATRIX_GET_NY(buffers[0]), STARPU_MATRIX_GET_NY(buffers[1]),
		STARPU_MATRIX_GET_NX(buffers[0]), (const float *)STARPU_MATRIX_GET_PTR(buffers[0]),
		STARPU_MATRIX_GET_LD(buffers[0]), (const float *)STARPU_MATRIX_GET_PTR(buffers[1]),
		STARPU_MATRIX_GET_LD(buffers[1]), tile ? STARPU_CSR_GET_ROWPTR(tile) : NULL,
		tile ? STARPU_CSR_GET_COLIND(tile) : NULL,
		args->has_active ? (const float *)STARPU_MATRIX_GET_PTR(buffers[3]) : NULL, args->k,
		(float *)STARPU_MATRIX_GET_PTR(buffers[2]), STARPU_MATRIX_GET_LD(buffers[2]), starpu_cuda_get_local_stream());
	if (st.call) {
		fprintf(stderr, "starfa: codelet top_k failed on worker %d: %s\n", starpu_worker_get_id(),
			starfa_gpu_status_string(st));
		abort();
	}
}

/* The CUDA kernel keeps a row's k best in shared memory. */
static int top_k_can_execute(unsigned workerid, struct starpu_task *task, unsigned nimpl)
{
	(void)nimpl;
	return starpu_worker_get_type((int)workerid) != STARPU_CUDA_WORKER ||
	       ((const struct top_k_args *)task->cl_arg)->k <= STARFA_CUDA_TOP_K_MAX;
}
_Static_assert(STARFA_CUDA_TOP_K_MAX == STARFA_TOP_K_CUDA_MAX, "the CUDA kernel's k limit is the API's");
#define TOP_K_CUDA STARFA_CUDA_FUNC(top_k_cuda), .can_execute = top_k_can_execute
#else
#define TOP_K_CUDA STARFA_CUDA_FUNC(NULL)
#endif

/* The real cost: every score, rank multiply-adds each (the selection is proportional to the scores too). */
static uint64_t top_k_cost(const struct starpu_task *task)
{
	return (uint64_t)starpu_matrix_get_ny(task->handles[0]) * starpu_matrix_get_ny(task->handles[1]) *
	       (starpu_matrix_get_nx(task->handles[0]) + 1);
}

STARFA_CODELET(top_k, top_k_cost, starfa_no_variant, top_k_cpu, TOP_K_CUDA);

int starfa_task_top_k(const starfa_tiled *S, int64_t i, int64_t j, const starfa_dense *A, const starfa_dense *B,
		      int64_t k, const starfa_dense *active, starfa_dense *L, const starfa_task_attr *attr)
{
	if (!S || !A || !B || !L)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_top_k: missing operand");
	if (i < 0 || j < 0 || i >= S->grid.nr || j >= S->grid.nc)
		return starfa_index_error("starfa_task_top_k", "tile", i, j, S->grid.nr, S->grid.nc);
	if (k < 1 || L->cols < 2 * k)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_top_k: k is %lld and the lists have %lld columns "
						       "(k >= 1, at least 2k)", (long long)k, (long long)L->cols);
	if (A->rows != S->nrows || B->rows != S->ncols || A->cols != B->cols)
		return starfa_set_error(STARFA_EINVAL,
					"starfa_task_top_k: S is %lldx%lld but A is %lldx%lld and B %lldx%lld",
					(long long)S->nrows, (long long)S->ncols, (long long)A->rows, (long long)A->cols,
					(long long)B->rows, (long long)B->cols);
	if (!starfa_dense_blocked_along(A, S->row_bounds, S->grid.nr) ||
	    !starfa_dense_blocked_along(B, S->col_bounds, S->grid.nc) ||
	    !starfa_dense_blocked_along(L, S->row_bounds, S->grid.nr))
		return starfa_set_error(STARFA_EINVAL, "starfa_task_top_k: A and the lists must be blocked along S's "
						       "rows and B along its columns");
	if (active && (active->cols != 1 || !starfa_dense_blocked_along(active, S->row_bounds, S->grid.nr)))
		return starfa_set_error(STARFA_EINVAL, "starfa_task_top_k: active must have one column, blocked "
						       "along S's rows");
	if (L == A || L == B || L == active)
		return starfa_set_error(STARFA_EINVAL, "starfa_task_top_k: the lists share memory with an input");
	const struct starfa_tile *tile = starfa_grid_tile(&S->grid, i, j);
	starfa_task_attr placed;
	if (k > STARFA_TOP_K_CUDA_MAX && !(attr && attr->worker > 0)) {
		placed = attr ? *attr : (starfa_task_attr){0};
		placed.where = STARFA_WHERE_CPU;
		attr = &placed;
	} else {
		attr = starfa_placed(&placed, attr, starfa_band_where(S, STARFA_ROWS, i));
	}
	struct top_k_args args = {k, active != NULL, tile->nnz > 0};
	const double flops = 2.0 * (double)(A->bounds[i + 1] - A->bounds[i]) * (double)(B->bounds[j + 1] - B->bounds[j]) *
			     (double)A->cols;
	struct starpu_data_descr buffers[5] = {{A->blocks[i], STARPU_R}, {B->blocks[j], STARPU_R}, {L->blocks[i], STARPU_W}};
	int n = 3;
	if (active)
		buffers[n++] = (struct starpu_data_descr){active->blocks[i], STARPU_R};
	if (tile->nnz > 0)
		buffers[n++] = (struct starpu_data_descr){tile->handle, STARPU_R};
	return starfa_submit(&top_k_cl, &args, sizeof args, flops, attr, n, buffers);
}
