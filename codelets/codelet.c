/* Helpers shared by the codelets. */
#include "codelets/codelet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t starfa_cost_footprint(uint64_t cost, uint32_t variant)
{
	return starpu_hash_crc32c_be(variant, starpu_hash_crc32c_be_n(&cost, sizeof cost, 0));
}

#ifdef STARFA_USE_CUDA
void starfa_cuda_fail(const char *codelet, cudaError_t err)
{
	fprintf(stderr, "starfa: CUDA kernel of codelet %s failed on worker %d: %s (%s)\n", codelet,
		starpu_worker_get_id(), cudaGetErrorString(err), cudaGetErrorName(err));
	abort();
}
#endif

const char *const *starfa_perfmodel_symbols(void)
{
	/* One per codelet file: keep in step with the STARFA_PERFMODEL declarations. */
	static const char *const symbols[] = {"starfa_sddmm",     "starfa_spmm", "starfa_spmm_zero",
					     "starfa_hermitian", "starfa_bias", "starfa_vector_zero",
					     "starfa_solve", "starfa_gram", "starfa_rowsolve", NULL};
	return symbols;
}

static void vector_zero_cpu(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	memset((void *)STARPU_VECTOR_GET_PTR(buffers[0]), 0,
	       (size_t)STARPU_VECTOR_GET_NX(buffers[0]) * STARPU_VECTOR_GET_ELEMSIZE(buffers[0]));
}

#ifdef STARFA_USE_CUDA
#include <starpu_cuda.h>
static void vector_zero_cuda(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	STARFA_CUDA_CHECK("vector_zero",
			  cudaMemsetAsync((void *)STARPU_VECTOR_GET_PTR(buffers[0]), 0,
					  (size_t)STARPU_VECTOR_GET_NX(buffers[0]) * STARPU_VECTOR_GET_ELEMSIZE(buffers[0]),
					  starpu_cuda_get_local_stream()));
}
#endif

/* The real cost: the bytes written. */
static size_t vector_zero_cost(struct starpu_task *task, unsigned nimpl)
{
	(void)nimpl;
	return (size_t)starpu_vector_get_nx(task->handles[0]) * starpu_vector_get_elemsize(task->handles[0]);
}

static uint32_t vector_zero_footprint(struct starpu_task *task)
{
	return starfa_cost_footprint(vector_zero_cost(task, 0), 0);
}

STARFA_PERFMODEL(vector_zero, vector_zero_cost, vector_zero_footprint);

static struct starpu_codelet vector_zero_cl = {
	.name = "starfa_vector_zero",
	.cpu_funcs = {vector_zero_cpu},
	.cpu_funcs_name = {"vector_zero_cpu"},
#ifdef STARFA_USE_CUDA
	.cuda_funcs = {vector_zero_cuda},
	.cuda_flags = {STARPU_CUDA_ASYNC},
#endif
	.nbuffers = 1,
	.modes = {STARPU_W},
	.model = &vector_zero_model,
};

int starfa_insert_vector_zero(starpu_data_handle_t handle, const char *what)
{
	int ret = starpu_task_insert(&vector_zero_cl, STARPU_W, handle, STARPU_NAME, what, 0);
	return ret != 0 ? starfa_insert_failed(what, ret) : 0;
}

int starfa_insert_failed(const char *codelet, int ret)
{
	if (ret == -ENODEV)
		return starfa_set_error(STARFA_ENODEV, "no worker can run codelet %s", codelet);
	return starfa_set_error(STARFA_ERUNTIME, "starpu_task_insert(%s) failed: %s", codelet, strerror(-ret));
}
