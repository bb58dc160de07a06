/* What idle workers cost: the cores they keep busy with nothing to run (starfa_idle_cost, `starfa info
 * --idle`). StarPU built with blocking drivers puts idle CPU workers to sleep, all but one: a worker that
 * finds every other worker of its context marked asleep keeps polling. A worker that polls is marked
 * asleep itself, so two that looked at the same moment both stayed awake until a task ran (two CPU
 * workers whose tasks ended together: 17 times in 120 runs); scripts/starpu-1.3.10-one-awake.patch leaves
 * one (none in 120). The probe first runs a short task on every worker, one worker after the other, so
 * that it measures what a job's last task leaves, not the state after start-up. */
#include "runtime/internal.h"

#include <errno.h>
#include <starpu.h>
#include <time.h>

/* Two milliseconds of work: long enough that the worker still polling from the task before sees this one
 * awake and goes to sleep. */
static void probe(void *buffers[], void *cl_arg)
{
	(void)buffers;
	(void)cl_arg;
	const double end = starfa_monotonic_seconds() + 2e-3;
	while (starfa_monotonic_seconds() < end)
		;
}

static struct starpu_codelet probe_cl = {
	.cpu_funcs = {probe},
#ifdef STARPU_USE_CUDA
	.cuda_funcs = {probe}, /* a host function the CUDA worker calls: no kernel */
#endif
	.nbuffers = 0,
	.name = "starfa_idle_probe",
};

static void sleep_seconds(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int starfa_idle_cost(double seconds, double *cpu_seconds, double *wall_seconds)
{
	if (!starfa_runtime_started())
		return starfa_set_error(STARFA_EINVAL, "starfa_idle_cost: call starfa_init first");
	if (!(seconds > 0 && seconds <= 3600) || !cpu_seconds || !wall_seconds)
		return starfa_set_error(STARFA_EINVAL, "starfa_idle_cost: seconds must be in (0, 3600] (%g) and the "
						       "outputs given",
					seconds);
	/* One worker at a time: each wakes for its task while the one before still polls, which then sees it
	 * awake and sleeps. Tasks that end together can leave two workers polling (the top of this file). */
	const unsigned n = starpu_worker_get_count();
	for (unsigned w = 0; w < n; w++) {
		struct starpu_task *task = starpu_task_create();
		if (!task)
			return starfa_set_error(STARFA_ENOMEM, "out of memory creating an idle probe task");
		task->cl = &probe_cl;
		task->execute_on_a_specific_worker = 1;
		task->workerid = w;
		task->synchronous = 1;
		int ret = starpu_task_submit(task);
		if (ret != 0)
			return starfa_set_error(STARFA_ERUNTIME, "running an idle probe task on worker %u failed (%d)", w,
						ret);
	}
	sleep_seconds(0.05); /* the workers go back to sleep */
	const double c0 = starfa_process_cpu_seconds(), t0 = starfa_monotonic_seconds();
	sleep_seconds(seconds);
	*cpu_seconds = starfa_process_cpu_seconds() - c0;
	*wall_seconds = starfa_monotonic_seconds() - t0;
	return 0;
}
