/* StarPU start/stop, worker accounting and the `starfa info` report. */
#include "runtime/internal.h"

#include <pthread.h>
#include <starpu.h>
#include <starpu_profiling.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int init_count;
static starfa_worker_stats stats_total;

void starfa_options_default(starfa_options *opts)
{
	memset(opts, 0, sizeof *opts);
	opts->ncpus = -1;
	opts->ncuda = -1;
	opts->scheduler = NULL;
	opts->calibrate = -1;
	opts->silent = 0;
}

int starfa_init(const starfa_options *opts)
{
	starfa_options defaults;
	if (!opts) {
		starfa_options_default(&defaults);
		opts = &defaults;
	}
	pthread_mutex_lock(&init_lock);
	if (init_count > 0) {
		init_count++;
		pthread_mutex_unlock(&init_lock);
		return 0;
	}
	if (opts->silent)
		setenv("STARPU_SILENT", "1", 0); /* a user's explicit STARPU_SILENT=0 still wins */

	struct starpu_conf conf;
	starpu_conf_init(&conf); /* reads STARPU_NCPU, STARPU_NCUDA, STARPU_SCHED, ... */
	if (opts->ncpus >= 0)
		conf.ncpus = opts->ncpus;
	if (opts->ncuda >= 0)
		conf.ncuda = opts->ncuda;
	if (opts->scheduler)
		conf.sched_policy_name = opts->scheduler;
	else if (!getenv("STARPU_SCHED"))
		conf.sched_policy_name = "dmda"; /* every codelet has a perfmodel: let StarPU use it */
	if (opts->calibrate >= 0)
		conf.calibrate = opts->calibrate;
	/* StarPU's OpenCL and accelerator drivers are not used by starfa. */
	conf.nopencl = 0;
	conf.nmic = 0;
	conf.nmpi_ms = 0;

	int ret = starpu_init(&conf);
	if (ret != 0) {
		pthread_mutex_unlock(&init_lock);
		if (ret == -ENODEV)
			return starfa_set_error(STARFA_ENODEV, "StarPU found no worker to run on "
							       "(check --ncpus/--ncuda, STARPU_NCPU, STARPU_NCUDA)");
		return starfa_set_error(STARFA_ERUNTIME, "starpu_init failed: %s", strerror(-ret));
	}
	starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
#ifdef STARFA_USE_CUDA
	/* A cuSPARSE handle per CUDA worker, bound to its stream, for codelets that call cuSPARSE. */
	if (starpu_cuda_worker_get_count() > 0) {
		starpu_cusparse_init();
		starpu_cublas_init(); /* likewise cuBLAS */
	}
#endif
	init_count = 1;
	pthread_mutex_unlock(&init_lock);
	starfa_stats_reset();
	return 0;
}

void starfa_shutdown(void)
{
	pthread_mutex_lock(&init_lock);
	if (init_count > 0 && --init_count == 0) {
		starpu_task_wait_for_all();
#ifdef STARFA_USE_CUDA
		if (starpu_cuda_worker_get_count() > 0) {
			starpu_cublas_shutdown();
			starpu_cusparse_shutdown();
		}
#endif
		starpu_shutdown();
	}
	pthread_mutex_unlock(&init_lock);
}

int starfa_runtime_started(void)
{
	return init_count > 0;
}

const char *starfa_worker_kind_name(starfa_worker_kind kind)
{
	return kind == STARFA_WORKER_CUDA ? "cuda" : "cpu";
}

static int kind_of_worker(int workerid)
{
	return starpu_worker_get_type(workerid) == STARPU_CUDA_WORKER ? STARFA_WORKER_CUDA : STARFA_WORKER_CPU;
}

const char *starfa_scheduler_name(void)
{
	if (!starfa_runtime_started())
		return "";
	struct starpu_sched_policy *policy = starpu_sched_ctx_get_sched_policy(0); /* the context starpu_init made */
	return policy && policy->policy_name ? policy->policy_name : "";
}

int starfa_worker_count(starfa_worker_kind kind)
{
	if (!starfa_runtime_started())
		return 0;
	return kind == STARFA_WORKER_CUDA ? (int)starpu_cuda_worker_get_count()
					  : (int)starpu_cpu_worker_get_count();
}

/* StarPU's per-worker counters reset on every read: fold them into running totals. */
static void collect_worker_stats(void)
{
	unsigned n = starpu_worker_get_count();
	for (unsigned w = 0; w < n; w++) {
		struct starpu_profiling_worker_info info;
		if (starpu_profiling_worker_get_info((int)w, &info) != 0)
			continue;
		int k = kind_of_worker((int)w);
		stats_total.tasks[k] += info.executed_tasks;
		stats_total.seconds[k] += info.executing_time.tv_sec + info.executing_time.tv_nsec * 1e-9;
		stats_total.flops[k] += info.flops;
	}
}

void starfa_stats_reset(void)
{
	if (starfa_runtime_started())
		collect_worker_stats();
	memset(&stats_total, 0, sizeof stats_total);
}

void starfa_stats_get(starfa_worker_stats *out)
{
	if (starfa_runtime_started())
		collect_worker_stats();
	*out = stats_total;
}

int starfa_wait(void)
{
	int ret = starpu_task_wait_for_all();
	if (ret != 0)
		return starfa_set_error(STARFA_ERUNTIME, "starpu_task_wait_for_all failed: %s", strerror(-ret));
	return 0;
}

void starfa_print_info(FILE *out)
{
	int major, minor, release;
	starpu_get_version(&major, &minor, &release);
	fprintf(out, "starfa %s\n", STARFA_VERSION_STRING);
	fprintf(out, "StarPU %d.%d.%d\n", major, minor, release);
#ifdef STARFA_USE_CUDA
	fprintf(out, "CUDA kernels: built\n");
#else
	fprintf(out, "CUDA kernels: not built\n");
#endif
	if (!starfa_runtime_started()) {
		fprintf(out, "runtime: not started\n");
		return;
	}
	struct starpu_sched_policy *policy = starpu_sched_ctx_get_sched_policy(0); /* the context starpu_init made */
	if (policy)
		fprintf(out, "scheduler: %s (%s)\n", policy->policy_name,
			policy->policy_description ? policy->policy_description : "");
	unsigned n = starpu_worker_get_count();
	fprintf(out, "workers: %u (%u cpu, %u cuda)\n", n, starpu_cpu_worker_get_count(),
		starpu_cuda_worker_get_count());
	for (unsigned w = 0; w < n; w++) {
		char name[256];
		starpu_worker_get_name((int)w, name, sizeof name);
		unsigned node = starpu_worker_get_memory_node(w);
		starpu_ssize_t mem = starpu_memory_get_total(node);
		fprintf(out, "  worker %u: %s, %s, memory node %u", w, starfa_worker_kind_name(kind_of_worker((int)w)),
			name, node);
		if (kind_of_worker((int)w) == STARFA_WORKER_CUDA) {
			fprintf(out, ", device %d", starpu_worker_get_devid((int)w));
			if (mem > 0)
				fprintf(out, ", %.1f GiB", mem / (1024.0 * 1024.0 * 1024.0));
		} else {
			fprintf(out, ", core %d", starpu_worker_get_bindid((int)w));
		}
		fputc('\n', out);
	}
}
