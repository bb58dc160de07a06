/* CUDA helpers shared by the tests of the CUDA kernels (built only with CUDA). */
#ifndef STARFA_TESTING_CUDA_H
#define STARFA_TESTING_CUDA_H

#include "testing.h"

#include <cuda_runtime_api.h>

/* Whether a CUDA device is there to run on (the CUDA groups skip without one). */
static inline int gpu_available(void)
{
	int n = 0;
	return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

/* Every worker of the machine, CPU and CUDA, or the test is skipped. */
#define SKIP_UNLESS_BOTH_KINDS()                                                                                \
	do {                                                                                                    \
		if (!gpu_available())                                                                           \
			SKIP("no CUDA device");                                                                 \
		starfa_options all_;                                                                            \
		starfa_options_default(&all_);                                                                  \
		CHECK_OK(testing_runtime_with(&all_));                                                          \
		if (starfa_worker_count(STARFA_WORKER_CPU) == 0 || starfa_worker_count(STARFA_WORKER_CUDA) == 0) \
			SKIP("needs CPU and CUDA workers");                                                     \
	} while (0)

/* A CUDA call that must succeed, inside a test. */
#define CUDA_OK(call)                                                                            \
	do {                                                                                     \
		cudaError_t e_ = (call);                                                         \
		CHECK_MSG(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));          \
	} while (0)

/* A device copy of `bytes` of host memory (uninitialized when host is NULL); NULL on failure. */
static inline void *to_device(const void *host, size_t bytes)
{
	void *d = NULL;
	if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess)
		return NULL;
	if (host && cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
		cudaFree(d);
		return NULL;
	}
	return d;
}

#endif
