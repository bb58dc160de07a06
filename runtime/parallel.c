/* The host's own parallel loops (evaluation metrics, top-k), cut into chunks.
 *
 * Between iterations the CPU workers are idle and the host keeps only the cores they leave free
 * (starfa_host_threads: one, next to a GPU's worker), so a loop on the host's OpenMP threads ran on one
 * core while fourteen waited: implicit ALS's ranking metrics took 39-58 s an iteration with 14 CPU workers
 * and a GPU, 3.0-3.4 s with the GPU alone (bench/PLACEMENT.md). With CPU workers the chunks run on them,
 * as StarPU tasks of a codelet of their own; without, on the host's threads. A chunk's index is its
 * caller's slot for partial results, which the caller adds up in chunk order: the result does not
 * depend on which threads ran what. */
#include "runtime/internal.h"

#include <omp.h>
#include <starpu.h>

struct chunk_args {
	starfa_chunk_fn fn;
	void *ctx;
	int64_t chunk, begin, end;
};

static void chunk_cpu(void *buffers[], void *cl_arg)
{
	(void)buffers;
	const struct chunk_args *a = cl_arg;
	a->fn(a->ctx, a->chunk, a->begin, a->end);
}

static struct starpu_codelet chunk_cl = {
	.cpu_funcs = {chunk_cpu},
	.nbuffers = 0,
	.name = "starfa_host_chunk",
};

static int64_t chunk_begin(int64_t n, int64_t nchunks, int64_t c)
{
	return (int64_t)((__int128)n * c / nchunks);
}

int starfa_host_parallel(int64_t n, int64_t nchunks, starfa_chunk_fn fn, void *ctx)
{
	if (n <= 0)
		return 0;
	if (nchunks > n)
		nchunks = n;
	if (nchunks < 1)
		nchunks = 1;
	const int on_workers = starfa_runtime_started() && starpu_cpu_worker_get_count() > 0 && starpu_worker_get_id() < 0;
	if (!on_workers) {
		const int held = starfa_blas_hold(); /* a chunk may call BLAS: one thread each */
#pragma omp parallel for schedule(dynamic, 1) num_threads(starfa_host_threads())
		for (int64_t c = 0; c < nchunks; c++)
			fn(ctx, c, chunk_begin(n, nchunks, c), chunk_begin(n, nchunks, c + 1));
		if (held)
			starfa_blas_release();
		return 0;
	}
	struct chunk_args *args = starfa_malloc((size_t)nchunks, sizeof *args);
	struct starpu_task **tasks = starfa_calloc((size_t)nchunks, sizeof *tasks);
	if (!args || !tasks) {
		free(args);
		free(tasks);
		return STARFA_ENOMEM;
	}
	const int priority = starfa_sched_priority(0, STARPU_CPU);
	int64_t submitted = 0;
	int rc = 0;
	for (int64_t c = 0; c < nchunks; c++) {
		args[c] = (struct chunk_args){fn, ctx, c, chunk_begin(n, nchunks, c), chunk_begin(n, nchunks, c + 1)};
		struct starpu_task *t = starpu_task_create();
		if (!t) {
			rc = starfa_set_error(STARFA_ENOMEM, "out of memory creating a host chunk task");
			break;
		}
		t->cl = &chunk_cl;
		t->cl_arg = &args[c];
		t->cl_arg_size = sizeof args[c];
		t->priority = priority;
		t->detach = 0;
		t->destroy = 0;
		int ret = starpu_task_submit(t);
		if (ret != 0) {
			starpu_task_destroy(t);
			rc = starfa_set_error(STARFA_ERUNTIME, "submitting a host chunk task failed (%d)", ret);
			break;
		}
		tasks[submitted++] = t;
	}
	for (int64_t c = 0; c < submitted; c++) {
		int ret = starpu_task_wait(tasks[c]);
		if (ret != 0 && !rc)
			rc = starfa_set_error(STARFA_ERUNTIME, "waiting for a host chunk task failed (%d)", ret);
		starpu_task_destroy(tasks[c]);
	}
	free(args);
	free(tasks);
	return rc;
}
