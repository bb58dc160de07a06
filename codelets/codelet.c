/* Helpers shared by the codelets: the registry, the insert wrapper, errors. */
#include "codelets/codelet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t starfa_cost_footprint(uint64_t cost, uint32_t variant)
{
	return starpu_hash_crc32c_be(variant, starpu_hash_crc32c_be_n(&cost, sizeof cost, 0));
}

/* Filled by constructors before main(), read-only afterwards. */
static struct starfa_codelet_entry *registry;

#define MAX_CODELETS 64

void starfa_codelet_register(struct starfa_codelet_entry *entry)
{
	/* Kept in name order, so that the symbol list does not depend on the link order. */
	struct starfa_codelet_entry **at = &registry;
	while (*at && strcmp((*at)->model->symbol, entry->model->symbol) < 0)
		at = &(*at)->next;
	entry->next = *at;
	*at = entry;
}

const char *const *starfa_perfmodel_symbols(void)
{
	static const char *symbols[MAX_CODELETS + 1];
	int n = 0;
	for (const struct starfa_codelet_entry *e = registry; e && n < MAX_CODELETS; e = e->next)
		symbols[n++] = e->model->symbol;
	symbols[n] = NULL;
	return symbols;
}

int starfa_submit(struct starpu_codelet *cl, const void *args, size_t args_size, double flops,
		  const starfa_task_attr *attr, int nbuffers, const struct starpu_data_descr *buffers)
{
	void *copy = NULL;
	if (args_size > 0) {
		copy = malloc(args_size); /* StarPU frees it (STARPU_CL_ARGS) */
		if (!copy)
			return starfa_set_error(STARFA_ENOMEM, "out of memory inserting a %s task", cl->name);
		memcpy(copy, args, args_size);
	}
	int priority = attr ? attr->priority : 0;
	int ret;
	if (attr && attr->worker > 0) {
		if (attr->worker > (int)starpu_worker_get_count()) {
			free(copy);
			return starfa_set_error(STARFA_EINVAL, "%s: worker %d asked for, but there are %u workers", cl->name,
						attr->worker, starpu_worker_get_count());
		}
		ret = starpu_task_insert(cl, STARPU_DATA_MODE_ARRAY, buffers, nbuffers, STARPU_CL_ARGS, copy, args_size,
					 STARPU_FLOPS, flops, STARPU_PRIORITY, priority, STARPU_EXECUTE_ON_WORKER,
					 attr->worker - 1, STARPU_NAME, cl->name + 7 /* without "starfa_" */, 0);
	} else {
		ret = starpu_task_insert(cl, STARPU_DATA_MODE_ARRAY, buffers, nbuffers, STARPU_CL_ARGS, copy, args_size,
					 STARPU_FLOPS, flops, STARPU_PRIORITY, priority, STARPU_NAME, cl->name + 7, 0);
	}
	if (ret == -ENODEV)
		return starfa_set_error(STARFA_ENODEV, "no worker can run codelet %s", cl->name);
	if (ret != 0)
		return starfa_set_error(STARFA_ERUNTIME, "starpu_task_insert(%s) failed: %s", cl->name, strerror(-ret));
	return 0;
}

#ifdef STARFA_USE_CUDA
void starfa_cuda_fail(const char *codelet, cudaError_t err)
{
	fprintf(stderr, "starfa: CUDA kernel of codelet %s failed on worker %d: %s (%s)\n", codelet,
		starpu_worker_get_id(), cudaGetErrorString(err), cudaGetErrorName(err));
	abort();
}
#endif

void starfa_cpu_fail(const char *codelet)
{
	fprintf(stderr, "starfa: codelet %s: out of memory for scratch on worker %d\n", codelet, starpu_worker_get_id());
	abort();
}

int starfa_index_error(const char *what, const char *kind, int64_t i, int64_t j, int64_t ni, int64_t nj)
{
	if (j < 0 && nj < 0)
		return starfa_set_error(STARFA_EINVAL, "%s: %s %lld outside 0..%lld", what, kind, (long long)i,
					(long long)ni - 1);
	return starfa_set_error(STARFA_EINVAL, "%s: %s (%lld, %lld) outside the %lldx%lld grid", what, kind, (long long)i,
				(long long)j, (long long)ni, (long long)nj);
}

int starfa_check_slot(const char *what, const starfa_sums *sums, int64_t slot)
{
	if (!sums)
		return starfa_set_error(STARFA_EINVAL, "%s: missing sums", what);
	if (slot < 0 || slot >= sums->n)
		return starfa_index_error(what, "slot", slot, -1, sums->n, -1);
	return 0;
}
