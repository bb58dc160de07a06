/* What every codelet file shares: cost-keyed perfmodels and error reporting. */
#ifndef STARFA_CODELETS_CODELET_H
#define STARFA_CODELETS_CODELET_H

#include "runtime/tiled.h"

#include <starpu.h>
#ifdef STARFA_USE_CUDA
#include <cuda_runtime_api.h>
#endif

/* Footprint of a task whose cost is `cost` (e.g. nnz x K) in variant `variant`: tasks
 * of equal cost share a history entry, whatever their shapes. */
uint32_t starfa_cost_footprint(uint64_t cost, uint32_t variant);

/* Declares the perfmodel `name##_model`, symbol "starfa_" #name: a non-linear
 * regression (a * cost^b + c) fitted on the cost that cost_fn returns, with the
 * per-cost history as fallback, so tiles of unseen sizes are predicted too. */
#define STARFA_PERFMODEL(name, cost_fn, footprint_fn)                                            \
	static struct starpu_perfmodel name##_model = {                                         \
		.type = STARPU_NL_REGRESSION_BASED,                                             \
		.symbol = "starfa_" #name,                                                      \
		.size_base = cost_fn,                                                           \
		.footprint = footprint_fn,                                                      \
	}

#ifdef STARFA_USE_CUDA
/* A CUDA kernel cannot return an error through StarPU: report it and abort. */
void starfa_cuda_fail(const char *codelet, cudaError_t err) __attribute__((noreturn));
#define STARFA_CUDA_CHECK(codelet, call)                                                          \
	do {                                                                                    \
		cudaError_t err_ = (call);                                                      \
		if (err_ != cudaSuccess)                                                        \
			starfa_cuda_fail(codelet, err_);                                        \
	} while (0)
#endif

/* Inserts a task that zeroes a vector handle (any element size): the output of an
 * accumulation whose tiles are all empty. `what` names the task and the error. */
int starfa_insert_vector_zero(starpu_data_handle_t handle, const char *what);

/* starpu_task_insert's return code as a starfa error. */
int starfa_insert_failed(const char *codelet, int ret);

#endif
