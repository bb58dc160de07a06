/* The host's own parallel loops (evaluation metrics, top-k), cut into chunks.
 *
 * Between iterations the CPU workers are idle and the host keeps only the cores they leave free
 * (starfa_host_threads: one, next to a GPU's worker), so a loop on the host's OpenMP threads ran on one
 * core while fourteen waited: implicit ALS's ranking metrics took 39-58 s an iteration with 14 CPU workers
 * and a GPU, 3.0-3.4 s with the GPU alone (bench/PLACEMENT.md). With CPU workers the chunks run on them,
 * as StarPU tasks of a codelet of their own (and on the calling thread where it has a core); without, on
 * the host's threads. A chunk's index is its caller's slot for partial results, which the caller adds up
 * in chunk order: the result does not depend on which threads ran what. */
#include "runtime/internal.h"

#include <omp.h>
#include <starpu.h>

/* The chunks of one call, taken in index order by whoever is free: the tasks on the CPU workers and,
 * where it has a core of its own, the calling thread. */
struct chunk_pool {
	starfa_chunk_fn fn;
	void *ctx;
	int64_t n, nchunks;
	int64_t next; /* the next chunk to take (atomic) */
};

static void drain(struct chunk_pool *p)
{
	for (int64_t c; (c = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED)) < p->nchunks;)
		p->fn(p->ctx, c, starfa_chunk_begin(p->n, p->nchunks, c), starfa_chunk_begin(p->n, p->nchunks, c + 1));
}

static void chunk_cpu(void *buffers[], void *cl_arg)
{
	(void)buffers;
	drain(cl_arg);
}

static struct starpu_codelet chunk_cl = {
	.cpu_funcs = {chunk_cpu},
	.nbuffers = 0,
	.name = "starfa_host_chunk",
};

int starfa_host_parallel(int64_t n, int64_t nchunks, starfa_chunk_fn fn, void *ctx)
{
	if (n <= 0)
		return 0;
	nchunks = starfa_chunk_count(n, nchunks);
	const int on_workers = starfa_runtime_started() && starpu_cpu_worker_get_count() > 0 && starpu_worker_get_id() < 0;
	if (!on_workers) {
		const int held = starfa_blas_hold(); /* a chunk may call BLAS: one thread each */
#pragma omp parallel for schedule(dynamic, 1) num_threads(starfa_host_threads())
		for (int64_t c = 0; c < nchunks; c++)
			fn(ctx, c, starfa_chunk_begin(n, nchunks, c), starfa_chunk_begin(n, nchunks, c + 1));
		if (held)
			starfa_blas_release();
		return 0;
	}
	/* One task a CPU worker (not one a chunk: 14 tasks where there were 256, each a round trip through the
	 * scheduler and a wait), each taking chunks until none is left. The calling thread takes chunks too
	 * where a core is left to it (next to a GPU's worker), so the loop has as many threads as on the host
	 * alone; a task that starts after the last chunk was taken returns at once. */
	struct chunk_pool pool = {fn, ctx, n, nchunks, 0};
	const int caller = starfa_caller_has_core();
	int64_t ntasks = starpu_cpu_worker_get_count();
	if (ntasks > nchunks - caller)
		ntasks = nchunks - caller;
	struct starpu_task **tasks = ntasks > 0 ? starfa_calloc((size_t)ntasks, sizeof *tasks) : NULL;
	if (ntasks > 0 && !tasks)
		return STARFA_ENOMEM;
	const int priority = starfa_sched_priority(0, STARPU_CPU);
	int64_t submitted = 0;
	int rc = 0;
	for (int64_t t = 0; t < ntasks; t++) {
		struct starpu_task *task = starpu_task_create();
		if (!task) {
			rc = starfa_set_error(STARFA_ENOMEM, "out of memory creating a host chunk task");
			break;
		}
		task->cl = &chunk_cl;
		task->cl_arg = &pool;
		task->cl_arg_size = sizeof pool;
		task->priority = priority;
		task->detach = 0;
		task->destroy = 0;
		int ret = starpu_task_submit(task);
		if (ret != 0) {
			starpu_task_destroy(task);
			rc = starfa_set_error(STARFA_ERUNTIME, "submitting a host chunk task failed (%d)", ret);
			break;
		}
		tasks[submitted++] = task;
	}
	/* The caller drains what is left, also when a submission failed (no task might be running). */
	if (caller || submitted == 0)
		drain(&pool);
	for (int64_t t = 0; t < submitted; t++) {
		int ret = starpu_task_wait(tasks[t]);
		if (ret != 0 && !rc)
			rc = starfa_set_error(STARFA_ERUNTIME, "waiting for a host chunk task failed (%d)", ret);
		starpu_task_destroy(tasks[t]);
	}
	free(tasks);
	return rc;
}
