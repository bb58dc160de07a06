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
					     "starfa_hermitian", "starfa_hermitian_zero", "starfa_bias",
					     "starfa_bias_zero", "starfa_solve", "starfa_gram", "starfa_rowsolve", NULL};
	return symbols;
}

int starfa_insert_failed(const char *codelet, int ret)
{
	if (ret == -ENODEV)
		return starfa_set_error(STARFA_ENODEV, "no worker can run codelet %s", codelet);
	return starfa_set_error(STARFA_ERUNTIME, "starpu_task_insert(%s) failed: %s", codelet, strerror(-ret));
}
