/* The zero codelet: fills a vector or matrix handle with zero bytes (an output whose tiles are all
 * empty still has to read as zeros). */
#include "codelets/codelet.h"
#include "codelets/zero.h"
#ifdef STARFA_USE_CUDA
#include <starpu_cuda.h>
#endif

#include <string.h>

struct zero_args {
	int kind; /* STARFA_ZERO_VECTOR, _MATRIX or _VARIABLE */
};

static void zero_cpu(void *buffers[], void *cl_arg)
{
	const struct zero_args *args = cl_arg;
	if (args->kind == STARFA_ZERO_VARIABLE) {
		memset((void *)STARPU_VARIABLE_GET_PTR(buffers[0]), 0, STARPU_VARIABLE_GET_ELEMSIZE(buffers[0]));
		return;
	}
	if (args->kind == STARFA_ZERO_VECTOR) {
		memset((void *)STARPU_VECTOR_GET_PTR(buffers[0]), 0,
		       (size_t)STARPU_VECTOR_GET_NX(buffers[0]) * STARPU_VECTOR_GET_ELEMSIZE(buffers[0]));
		return;
	}
	float *y = (float *)STARPU_MATRIX_GET_PTR(buffers[0]);
	size_t nx = STARPU_MATRIX_GET_NX(buffers[0]), ld = STARPU_MATRIX_GET_LD(buffers[0]);
	for (size_t r = 0; r < STARPU_MATRIX_GET_NY(buffers[0]); r++)
		memset(y + r * ld, 0, nx * sizeof *y);
}

#ifdef STARFA_USE_CUDA
static void zero_cuda(void *buffers[], void *cl_arg)
{
	const struct zero_args *args = cl_arg;
	if (args->kind == STARFA_ZERO_VARIABLE) {
		STARFA_CUDA_CHECK("zero", cudaMemsetAsync((void *)STARPU_VARIABLE_GET_PTR(buffers[0]), 0,
							  STARPU_VARIABLE_GET_ELEMSIZE(buffers[0]),
							  starpu_cuda_get_local_stream()));
		return;
	}
	if (args->kind == STARFA_ZERO_VECTOR) {
		STARFA_CUDA_CHECK("zero", cudaMemsetAsync((void *)STARPU_VECTOR_GET_PTR(buffers[0]), 0,
							  (size_t)STARPU_VECTOR_GET_NX(buffers[0]) *
								  STARPU_VECTOR_GET_ELEMSIZE(buffers[0]),
							  starpu_cuda_get_local_stream()));
		return;
	}
	STARFA_CUDA_CHECK("zero", cudaMemset2DAsync((void *)STARPU_MATRIX_GET_PTR(buffers[0]),
						    STARPU_MATRIX_GET_LD(buffers[0]) * sizeof(float), 0,
						    STARPU_MATRIX_GET_NX(buffers[0]) * sizeof(float),
						    STARPU_MATRIX_GET_NY(buffers[0]), starpu_cuda_get_local_stream()));
}
#endif

/* The real cost: the bytes written. */
static uint64_t zero_cost(const struct starpu_task *task)
{
	const struct zero_args *args = task->cl_arg;
	starpu_data_handle_t h = task->handles[0];
	if (args->kind == STARFA_ZERO_VARIABLE)
		return starpu_variable_get_elemsize(h);
	return args->kind == STARFA_ZERO_MATRIX ? (uint64_t)starpu_matrix_get_nx(h) * starpu_matrix_get_ny(h) * sizeof(float)
						 : (uint64_t)starpu_vector_get_nx(h) * starpu_vector_get_elemsize(h);
}

STARFA_CODELET(zero, zero_cost, starfa_no_variant, zero_cpu, STARFA_CUDA_FUNC(zero_cuda));

int starfa_submit_zero(starpu_data_handle_t handle, int kind, const starfa_task_attr *attr)
{
	struct zero_args args = {kind};
	return starfa_submit(&zero_cl, &args, sizeof args, 0.0, attr, STARFA_BUFFERS({handle, STARPU_W}));
}
