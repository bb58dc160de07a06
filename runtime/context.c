/* StarPU start/stop, worker accounting and the `starfa info` report. */
#include "runtime/internal.h"
#include "runtime/sync.h"

#include <dlfcn.h>
#include <errno.h>
#ifdef STARFA_USE_CUDA
#include "gpu/sddmm.h"
#include "gpu/spmm.h"
#include <cuda_runtime_api.h>
#include <starpu_cuda.h>
#endif
#include <omp.h>
#include <pthread.h>
#include <starpu.h>
#include <starpu_heteroprio.h>
#include <starpu_profiling.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef STARPU_USE_FXT
#include <starpu_fxt.h>
#endif

/* The CPU kernels call LAPACK (potrf, potrs) from StarPU's workers, one per core. A threaded BLAS
 * would start its own threads inside every call and fight the workers for the cores: OpenBLAS
 * threads potrf from k = 128, and rank-127 ALS went from 0.11 s to 43 s per iteration on two cores
 * (bench/ALS.md). While the runtime is up, the BLAS found in the process runs on one thread; its
 * setting comes back at the last starfa_shutdown. */
static void (*blas_set_threads)(int); /* set while starfa holds OpenBLAS at one thread */
static int blas_threads_saved;

static void blas_single_thread(void)
{
	int (*get)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
	blas_set_threads = get ? (void (*)(int))dlsym(RTLD_DEFAULT, "openblas_set_num_threads") : NULL;
	if (blas_set_threads) {
		blas_threads_saved = get();
		blas_set_threads(1);
	}
}

static void blas_threads_restore(void)
{
	if (blas_set_threads && blas_threads_saved > 0)
		blas_set_threads(blas_threads_saved);
	blas_set_threads = NULL;
}

static int gpus_present(const struct starpu_conf *conf)
{
#ifdef STARFA_USE_CUDA
	int gpus = 0;
	return conf->ncuda != 0 && cudaGetDeviceCount(&gpus) == cudaSuccess && gpus > 0;
#else
	(void)conf;
	return 0;
#endif
}

static int online_cores(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0)
		return CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

/* The thread that started the runtime, bound to the core StarPU left out for it, and its affinity from
 * before, given back at the last starfa_shutdown. */
static pthread_t submitter;
static cpu_set_t submitter_affinity;
static int submitter_bound;

/* The submitting thread onto the reserved core. Left to the kernel's placement, it shared a core with the
 * CUDA worker's driver thread in some runs, and a wait polling there held that thread off until the
 * polling ended: graph runs of 50 µs took 250-350 µs with every worker (200 µs of polling) and not with
 * the GPU alone; bound, they did not (bench/PLACEMENT.md). */
static void bind_submitter(void)
{
	submitter_bound = 0;
	if (pthread_getaffinity_np(pthread_self(), sizeof submitter_affinity, &submitter_affinity) != 0)
		return;
	starpu_bind_thread_on((int)starpu_get_next_bindid(STARPU_THREAD_ACTIVE, NULL, 0), STARPU_THREAD_ACTIVE,
			      "starfa submitting thread");
	submitter = pthread_self();
	submitter_bound = 1;
}

static void unbind_submitter(void)
{
	if (submitter_bound && pthread_equal(submitter, pthread_self()))
		pthread_setaffinity_np(submitter, sizeof submitter_affinity, &submitter_affinity);
	submitter_bound = 0;
}

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int init_count;

int starfa_blas_hold(void)
{
	pthread_mutex_lock(&init_lock);
	if (init_count > 0) { /* the runtime holds it at one thread already */
		pthread_mutex_unlock(&init_lock);
		return 0;
	}
	blas_single_thread(); /* init_lock stays taken (no starfa_init meanwhile) until starfa_blas_release */
	return 1;
}

void starfa_blas_release(void)
{
	blas_threads_restore();
	pthread_mutex_unlock(&init_lock);
}
/* Idle workers. StarPU built with blocking drivers (scripts/install-deps.sh) lets an idle worker sleep on its
 * condition until a task is pushed to it; built without, every idle worker spins through the scheduler's
 * pop and the memory nodes' request lists, and with fourteen idle cores beside a GPU's worker the jobs
 * whose every task ran on the GPU took 1.1-4.7x the GPU alone's time (bench/PLACEMENT.md). A GPU's worker
 * is kept awake all the same (StarPU asks the progression hooks before it lets a worker sleep): its next
 * task is often pushed microseconds after its last one ended, and a wake-up would come on top of every
 * such round trip. Cores sleep; a core's task pays the wake-up, on work that runs milliseconds. All but
 * one: StarPU never puts to sleep a worker that finds every other worker of its context marked asleep,
 * and a polling GPU worker is marked asleep between its polls, so one CPU worker keeps spinning too
 * (`starfa info --ncpus 2 --ncuda 0 --idle 2`: 1.0 core busy; 2.0 without blocking drivers).
 * (Without blocking drivers nothing sleeps, and the hook's answer goes unused.) */
static int awake_hook = -1;

static unsigned gpu_driver_may_sleep(void *arg)
{
	(void)arg;
	const int id = starpu_worker_get_id();
	return id < 0 || starpu_worker_get_type(id) != STARPU_CUDA_WORKER;
}

/* The cores the started workers leave free (a CUDA worker's driver thread holds one core): the waits
 * poll only where there is one, and the host's OpenMP loops take them (starfa_host_threads). */
static int free_cores;
/* StarPU's per-worker and per-bus counters reset on every read: they are folded into running
 * totals per worker and per bus (sized at the first read after starpu_init); the per-kind
 * statistics are summed from the workers'. */
static starfa_worker_profile *worker_total;
static int64_t (*bus_total)[2]; /* bytes, transfers */
static int nworker_total, nbus_total;

/* ------------------------------------------------------------------ heteroprio's buckets
 *
 * StarPU's heteroprio takes a task's priority as the index of the bucket it waits in; each worker kind
 * scans its own list of buckets in order, and a task must be runnable by every kind that scans its
 * bucket. starfa's tasks have a priority (its sign: lowered, default, raised) and a placement (the GPUs,
 * the cores, or either), so each pair gets a bucket, numbered upward with the priority (StarPU orders
 * tasks by priority elsewhere too: a worker's local queue, data prefetches): GPU-only tasks where only
 * the CUDA workers look, CPU-only where only the cores do, the others where both do. Each kind scans
 * from the raised level down, its own kind's bucket before the shared one; the cores take a shared task
 * only when at least STARFA_HETEROPRIO_SLOW of them (64 unless set) wait per GPU: a core ran an SDDMM
 * tile hundreds of times slower than an H200, and at 4 or 16 the cores took 13-16 of 56 tiles and made
 * the sweep 6-20x slower, at 64 none (bench/PLACEMENT.md). */
enum { kPrioLevels = 3, kPlaceGroups = 3, kGroupCuda = 0, kGroupAny = 1, kGroupCpu = 2 };

static int heteroprio_on; /* the running scheduler is heteroprio, with these buckets */

/* level 0 lowered, 1 default, 2 raised */
static unsigned bucket_of(int level, int group)
{
	return (unsigned)(level * kPlaceGroups + group);
}

#define HETEROPRIO_SLOW_DEFAULT 64.0f
static float heteroprio_slow = HETEROPRIO_SLOW_DEFAULT; /* STARFA_HETEROPRIO_SLOW, read at starfa_init */

/* STARFA_CUDA_GRAM, read once at starfa_init: the precision of the CUDA ALS kernels' Gram sums, as its
 * index in gram_names (the order of gpu/als_common.h's starfa_cuda_gram_precision), -1 when unset; a
 * value that is not one of them is an error (a misspelt one would otherwise leave the default unnoticed). */
static const char *const gram_names[] = {"3xtf32", "tf32", "3xbf16", "3xfp16"};
static int gram_setting = -1;

static int gram_precision_configure(void)
{
	const char *v = getenv("STARFA_CUDA_GRAM");
	gram_setting = -1;
	if (!v)
		return 0;
	for (int i = 0; i < (int)(sizeof gram_names / sizeof gram_names[0]); i++)
		if (strcmp(v, gram_names[i]) == 0) {
			gram_setting = i;
			return 0;
		}
	return starfa_set_error(STARFA_EINVAL, "STARFA_CUDA_GRAM must be 3xtf32, 3xfp16, 3xbf16 or tf32 (the precision of "
					       "the CUDA ALS kernels' Gram sums), not '%s'",
				v);
}

int starfa_gram_precision_setting(void)
{
	return gram_setting;
}

/* Reads STARFA_HETEROPRIO_SLOW: 0, or an error for a value that is not a number in [0, 1e6]. */
static int heteroprio_configure(void)
{
	const char *v = getenv("STARFA_HETEROPRIO_SLOW");
	heteroprio_slow = HETEROPRIO_SLOW_DEFAULT;
	if (!v || !*v)
		return 0;
	char *end = NULL;
	double f = strtod(v, &end);
	if (*end != '\0' || !(f >= 0.0 && f <= 1e6))
		return starfa_set_error(STARFA_EINVAL, "STARFA_HETEROPRIO_SLOW must be a number in [0, 1000000] (how many "
						       "shared tasks must wait per GPU before a core takes one), not '%s'", v);
	heteroprio_slow = (float)f;
	return 0;
}

/* One kind's scan: raised, default, lowered, each its own kind's bucket, then the shared one, then, where
 * given (other >= 0), the other kind's. */
static void heteroprio_scan(unsigned ctx, enum starpu_heteroprio_types arch, int own, int other)
{
	const int per_level = other >= 0 ? 3 : 2;
	starpu_heteroprio_set_nb_prios(ctx, arch, (unsigned)(per_level * kPrioLevels));
	for (int i = 0; i < kPrioLevels; i++) {
		const int level = kPrioLevels - 1 - i;
		starpu_heteroprio_set_mapping(ctx, arch, (unsigned)(per_level * i), bucket_of(level, own));
		starpu_heteroprio_set_mapping(ctx, arch, (unsigned)(per_level * i + 1), bucket_of(level, kGroupAny));
		if (other >= 0)
			starpu_heteroprio_set_mapping(ctx, arch, (unsigned)(per_level * i + 2), bucket_of(level, other));
	}
}

static void heteroprio_buckets(unsigned ctx)
{
	const unsigned ncpu = starpu_cpu_worker_get_count(), ncuda = starpu_cuda_worker_get_count();
	/* Without the other kind, an arch scans its buckets too: a task StarPU submits itself (a values
	 * tile's zeroing before a read-back, starpu_data_acquire) comes at priority 0, which is bucket 0,
	 * the GPUs' group; heteroprio asserts on a bucket no arch scans. */
	if (ncuda > 0)
		heteroprio_scan(ctx, STARPU_CUDA_IDX, kGroupCuda, ncpu > 0 ? -1 : kGroupCpu);
	if (ncpu > 0)
		heteroprio_scan(ctx, STARPU_CPU_IDX, kGroupCpu, ncuda > 0 ? -1 : kGroupCuda);
	if (ncpu > 0 && ncuda > 0)
		for (int level = 0; level < kPrioLevels; level++) {
			starpu_heteroprio_set_faster_arch(ctx, STARPU_CUDA_IDX, bucket_of(level, kGroupAny));
			starpu_heteroprio_set_arch_slow_factor(ctx, STARPU_CPU_IDX, bucket_of(level, kGroupAny),
							       heteroprio_slow);
		}
}

int starfa_sched_buckets(void)
{
	return heteroprio_on;
}

int starfa_sched_priority(int priority, unsigned where)
{
	if (!heteroprio_on)
		return priority;
	const int level = priority > 0 ? 2 : priority == 0 ? 1 : 0;
	const int cpu = (where & STARPU_CPU) != 0, cuda = (where & STARPU_CUDA) != 0;
	return (int)bucket_of(level, cpu && cuda ? kGroupAny : cuda ? kGroupCuda : kGroupCpu);
}

/* The scheduler of the context starpu_init made ("" when it has none). */
static const char *policy_name(void)
{
	struct starpu_sched_policy *policy = starpu_sched_ctx_get_sched_policy(0);
	return policy && policy->policy_name ? policy->policy_name : "";
}

void starfa_options_default(starfa_options *opts)
{
	memset(opts, 0, sizeof *opts);
	opts->ncpus = -1;
	opts->ncuda = -1;
	opts->scheduler = NULL;
	opts->calibrate = -1;
	opts->silent = 0;
}

/* FxT traces: the raw trace of a run goes to DIR/starfa.fxt_0 (StarPU appends its process id, 0). */
#define TRACE_RAW "starfa.fxt"
static int tracing; /* starfa set STARPU_FXT_TRACE=1 for this run */

static int trace_start(const char *dir)
{
#ifdef STARPU_USE_FXT
	if (mkdir(dir, 0777) != 0 && errno != EEXIST)
		return starfa_set_error(STARFA_EIO, "--trace: cannot create folder %s: %s", dir, strerror(errno));
	struct stat st;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return starfa_set_error(STARFA_EIO, "--trace: %s is not a folder", dir);
	char raw[4096];
	snprintf(raw, sizeof raw, "%s/%s_0", dir, TRACE_RAW);
	unlink(raw); /* a stale trace must not pass for this run's */
	setenv("STARPU_FXT_TRACE", "1", 1);
	setenv("STARPU_FXT_PREFIX", dir, 1);
	setenv("STARPU_FXT_SUFFIX", TRACE_RAW, 1);
	tracing = 1;
	return 0;
#else
	(void)dir;
	return starfa_set_error(STARFA_ENODEV, "--trace: this StarPU was built without FxT (scripts/install-deps.sh "
					       "builds it with FxT)");
#endif
}

int starfa_trace_write(const char *dir)
{
#ifdef STARPU_USE_FXT
	if (starfa_runtime_started())
		return starfa_set_error(STARFA_EINVAL, "starfa_trace_write: the trace is written at starfa_shutdown");
	char raw[4096];
	snprintf(raw, sizeof raw, "%s/%s_0", dir, TRACE_RAW);
	if (access(raw, R_OK) != 0)
		return starfa_set_error(STARFA_EIO, "no FxT trace in %s (%s: %s)", dir, raw, strerror(errno));
	struct starpu_fxt_options o;
	memset(&o, 0, sizeof o);
	starpu_fxt_options_init(&o);
	o.ninputfiles = 1;
	o.filenames[0] = raw;
	o.dir = (char *)dir;
	o.file_prefix = "";
	o.file_rank = -1;
	starpu_fxt_options_set_dir(&o);
	starpu_fxt_generate_trace(&o);
	starpu_fxt_options_shutdown(&o);
	char paje[4096];
	snprintf(paje, sizeof paje, "%s/paje.trace", dir);
	if (access(paje, R_OK) != 0)
		return starfa_set_error(STARFA_EIO, "StarPU's converter wrote no %s", paje);
	return 0;
#else
	(void)dir;
	return starfa_set_error(STARFA_ENODEV, "starfa_trace_write: this StarPU was built without FxT");
#endif
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
	starfa_placement placement;
	if (starfa_wait_spin_configure() != 0 || heteroprio_configure() != 0 || gram_precision_configure() != 0 ||
	    starfa_placement_mode(&placement) != 0) {
		pthread_mutex_unlock(&init_lock);
		return STARFA_EINVAL;
	}
	if (opts->silent)
		setenv("STARPU_SILENT", "1", 0); /* a user's explicit STARPU_SILENT=0 still wins */
	if (opts->trace_dir) {
		int rc = trace_start(opts->trace_dir);
		if (rc) {
			pthread_mutex_unlock(&init_lock);
			return rc;
		}
	} else if (tracing) {
		setenv("STARPU_FXT_TRACE", "0", 1); /* the previous run's trace is over */
		tracing = 0;
	} else {
		setenv("STARPU_FXT_TRACE", "0", 0); /* FxT records only when asked (a user's STARPU_FXT_TRACE wins) */
	}

	struct starpu_conf conf;
	starpu_conf_init(&conf); /* reads STARPU_NCPU, STARPU_NCUDA, STARPU_SCHED, ... */
	/* What the options set wins over the environment; the rest keeps the values starpu_conf_init
	 * read from it. (StarPU applies STARPU_SCHED whatever this says: see below.) */
	conf.precedence_over_environment_variables = 1;
	if (opts->ncpus >= 0)
		conf.ncpus = opts->ncpus;
	if (opts->ncuda >= 0)
		conf.ncuda = opts->ncuda;
	/* The default scheduler where there will be GPUs: heteroprio while starfa places every band (the
	 * default placement, the GPUs', and STARFA_PLACEMENT=split, each band on its kind), as nothing but
	 * the worker within a kind is left to choose and its dispatch is the cheapest (1-4% on 0.2-0.7 ms
	 * SDDMM graphs, 5-30% on MovieLens-sized ones against dmda; under a split, ALS iterations 1.1-1.9x
	 * and their loss 3-5x faster, as its idle workers take ready tasks where dmda queues them behind
	 * busy ones: bench/PLACEMENT.md); dmda where StarPU places tasks (STARFA_PLACEMENT=any), as its
	 * calibrated models choose between a core and a GPU (and calibrate themselves where a model lacks
	 * a size). With cores alone
	 * they have nothing to choose between, and dmda's placement at submission, from predictions that
	 * are off for ALS's unequal bands, lost to work stealing: lws was 3-10% faster on SDDMM and 0-15% on
	 * ALS on two cores (bench/ALS.md). */
	const int gpus = gpus_present(&conf), cores = online_cores();
	if (opts->scheduler)
		conf.sched_policy_name = opts->scheduler;
	else if (!getenv("STARPU_SCHED"))
		conf.sched_policy_name = !gpus ? "lws" : placement == STARFA_PLACE_ANY ? "dmda" : "heteroprio";
	/* heteroprio needs its buckets (heteroprio_buckets); the name is what starpu_init will take: the
	 * option, else STARPU_SCHED, else the default above. */
	const char *asked = opts->scheduler ? opts->scheduler : getenv("STARPU_SCHED");
	if (!asked)
		asked = conf.sched_policy_name;
	const int heteroprio = asked && !strcmp(asked, "heteroprio");
	if (heteroprio)
		conf.sched_policy_init = heteroprio_buckets;
	if (opts->calibrate >= 0)
		conf.calibrate = opts->calibrate;
	else if (heteroprio && !getenv("STARPU_CALIBRATE"))
		/* StarPU records a task's time in its model only while calibrating, or once a scheduler has
		 * asked the model for a prediction it lacked; heteroprio asks none. Under heteroprio every
		 * run records its tasks, so that starfa_plan_tiling reads the job's own tiles on its next run:
		 * calibration's tiles put an SGD epoch on the Netflix shape at rank 32 at 33 ms on an H200
		 * where it takes 20.5 (bench/PLACEMENT.md). heteroprio never reads a model, so nothing is sent
		 * to a kind to learn it. */
		conf.calibrate = 1;
	/* With GPUs, one core stays out of the CPU workers for the thread that submits the graph (and
	 * waits for it), unless the CPU worker count was given: with a worker on every core (spinning when
	 * idle, as StarPU's drivers did before they were built blocking, or busy), that thread shared a core
	 * with one and lost scheduler ticks to it (bench/PLACEMENT.md). */
	if (conf.ncpus < 0 && conf.reserve_ncpus <= 0 && cores >= 4 && gpus)
		conf.reserve_ncpus = 1;
	/* StarPU's OpenCL and accelerator drivers are not used by starfa. */
	conf.nopencl = 0;
	conf.nmic = 0;
	conf.nmpi_ms = 0;

	/* starpu_init takes STARPU_SCHED over conf.sched_policy_name: an explicit scheduler goes
	 * through the environment for the call, which is then put back as it was. */
	char *saved_sched = NULL;
	if (opts->scheduler) {
		const char *env_sched = getenv("STARPU_SCHED");
		saved_sched = env_sched ? strdup(env_sched) : NULL;
		setenv("STARPU_SCHED", opts->scheduler, 1);
	}
	starfa_task_count_reset();
	int ret = starpu_init(&conf);
	if (opts->scheduler) {
		if (saved_sched)
			setenv("STARPU_SCHED", saved_sched, 1);
		else
			unsetenv("STARPU_SCHED");
	}
	free(saved_sched);
	if (ret != 0) {
		pthread_mutex_unlock(&init_lock);
		if (ret == -ENODEV)
			return starfa_set_error(STARFA_ENODEV, "StarPU found no worker to run on "
							       "(check --ncpus/--ncuda, STARPU_NCPU, STARPU_NCUDA)");
		return starfa_set_error(STARFA_ERUNTIME, "starpu_init failed: %s", strerror(-ret));
	}
	if (starpu_combined_worker_get_count() > 0) {
		/* pheft, peager and the like run a task on several workers at once. Under them StarPU
		 * 1.3.10 starts starfa's tasks before their buffers are in place (a written block is
		 * still unallocated): measured as crashes in bias, hermitian, solve and rowsolve. */
		char name[64];
		snprintf(name, sizeof name, "%s", policy_name());
		starpu_shutdown();
		pthread_mutex_unlock(&init_lock);
		return starfa_set_error(STARFA_EINVAL,
					"scheduler %s runs tasks on combined workers (parallel tasks), which starfa's "
					"codelets do not support under StarPU %d.%d; use heteroprio or dmda (the defaults "
					"with GPUs), lws (the default without), dmdas, eager or ws",
					name, STARPU_MAJOR_VERSION, STARPU_MINOR_VERSION);
	}
	heteroprio_on = !strcmp(policy_name(), "heteroprio");
	starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
	if (starpu_cuda_worker_get_count() > 0)
		awake_hook = starpu_progression_hook_register(gpu_driver_may_sleep, NULL);
	if (conf.reserve_ncpus > 0)
		bind_submitter();
	free_cores = cores - (int)(starpu_cpu_worker_get_count() + starpu_cuda_worker_get_count());
	/* The waits poll before they sleep only where a core is left to this thread (runtime/sync.h). */
	starfa_wait_spin_enable(free_cores > 0);
	blas_single_thread();
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

#ifdef STARFA_USE_CUDA
/* On each CUDA worker: what it kept per tile (cuSPARSE's SpMM plans, gpu/spmm.h; the SDDMM dense-row orders,
 * gpu/sddmm.h), freed on its stream. */
static void release_kept(void *arg)
{
	(void)arg;
	starfa_gpu_status st = starfa_cuda_spmm_release(), dense = starfa_cuda_sddmm_release();
	if (!st.call)
		st = dense;
	if (!st.call)
		st.cuda = cudaStreamSynchronize(starpu_cuda_get_local_stream());
	if (st.call || st.cuda != cudaSuccess)
		fprintf(stderr, "starfa: freeing the SpMM plans and SDDMM dense-row orders of worker %d: %s\n", starpu_worker_get_id(),
			st.call ? starfa_gpu_status_string(st) : cudaGetErrorString(st.cuda));
}
#endif

void starfa_shutdown(void)
{
	pthread_mutex_lock(&init_lock);
	if (init_count > 0 && --init_count == 0) {
		starpu_task_wait_for_all();
		heteroprio_on = 0;
#ifdef STARFA_USE_CUDA
		if (starpu_cuda_worker_get_count() > 0) {
			starpu_execute_on_each_worker(release_kept, NULL, STARPU_CUDA);
			starpu_cublas_shutdown();
			starpu_cusparse_shutdown();
		}
#endif
		if (awake_hook >= 0) /* hooks outlive starpu_shutdown */
			starpu_progression_hook_deregister(awake_hook);
		awake_hook = -1;
		starpu_shutdown();
		starfa_task_count_reset(); /* every callback has run */
		unbind_submitter();
		blas_threads_restore();
		free(worker_total);
		free(bus_total);
		worker_total = NULL;
		bus_total = NULL;
		nworker_total = nbus_total = 0;
	}
	pthread_mutex_unlock(&init_lock);
}

int starfa_env_choice(const char *name, const char *const *choices, int nchoices, int *index)
{
	const char *v = getenv(name);
	*index = 0;
	if (!v || !*v)
		return 0;
	for (int i = 0; i < nchoices; i++)
		if (strcmp(v, choices[i]) == 0) {
			*index = i;
			return 0;
		}
	char names[256] = "";
	for (int i = 0, used = 0; i < nchoices && used < (int)sizeof names; i++)
		used += snprintf(names + used, sizeof names - (size_t)used, "%s%s", i == 0 ? "" : i == nchoices - 1 ? " or " : ", ",
				 choices[i]);
	return starfa_set_error(STARFA_EINVAL, "%s must be %s, not '%s'", name, names, v);
}

int starfa_placement_mode(starfa_placement *mode)
{
	static const char *const names[] = {"gpu", "split", "any"}; /* in starfa_placement's order */
	int i;
	int rc = starfa_env_choice("STARFA_PLACEMENT", names, 3, &i);
	*mode = (starfa_placement)i;
	return rc;
}

int starfa_placement_given(void)
{
	const char *env = getenv("STARFA_PLACEMENT");
	return env && *env;
}

int starfa_host_threads(void)
{
	if (!starfa_runtime_started())
		return omp_get_max_threads();
	return free_cores > 1 ? free_cores : 1;
}

int starfa_caller_has_core(void)
{
	return starfa_runtime_started() && free_cores > 0;
}

int starfa_runtime_started(void)
{
	return init_count > 0;
}

starfa_worker_kind starfa_worker_kind_of(int worker)
{
	return worker >= 1 && worker <= (int)starpu_worker_get_count() &&
			       starpu_worker_get_type(worker - 1) == STARPU_CUDA_WORKER
		       ? STARFA_WORKER_CUDA
		       : STARFA_WORKER_CPU;
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
	return starfa_runtime_started() ? policy_name() : "";
}

int starfa_worker_count(starfa_worker_kind kind)
{
	if (!starfa_runtime_started())
		return 0;
	return kind == STARFA_WORKER_CUDA ? (int)starpu_cuda_worker_get_count()
					  : (int)starpu_cpu_worker_get_count();
}

int starfa_worker_of(starfa_worker_kind kind, int index)
{
	if (!starfa_runtime_started() || index < 0 || index >= starfa_worker_count(kind))
		return 0;
	int id = starpu_worker_get_by_type(kind == STARFA_WORKER_CUDA ? STARPU_CUDA_WORKER : STARPU_CPU_WORKER, index);
	return id >= 0 ? id + 1 : 0;
}

static double seconds_of(struct timespec t)
{
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void collect_worker_stats(void)
{
	int n = (int)starpu_worker_get_count(), nbus = starpu_bus_get_count();
	if (n != nworker_total) {
		free(worker_total);
		worker_total = calloc((size_t)n, sizeof *worker_total);
		nworker_total = worker_total ? n : 0;
		for (int w = 0; w < nworker_total; w++) {
			starpu_worker_get_name(w, worker_total[w].name, sizeof worker_total[w].name);
			worker_total[w].kind = (starfa_worker_kind)kind_of_worker(w);
		}
	}
	if (nbus != nbus_total) {
		free(bus_total);
		bus_total = calloc((size_t)(nbus > 0 ? nbus : 1), sizeof *bus_total);
		nbus_total = bus_total ? nbus : 0;
	}
	for (int w = 0; w < nworker_total; w++) {
		struct starpu_profiling_worker_info info;
		if (starpu_profiling_worker_get_info(w, &info) != 0)
			continue;
		starfa_worker_profile *p = &worker_total[w];
		p->tasks += info.executed_tasks;
		p->seconds += seconds_of(info.total_time);
		p->executing += seconds_of(info.executing_time);
		p->sleeping += seconds_of(info.sleeping_time);
		p->flops += info.flops;
	}
	for (int b = 0; b < nbus_total; b++) {
		struct starpu_profiling_bus_info info;
		if (starpu_bus_get_profiling_info(b, &info) != 0)
			continue;
		bus_total[b][0] += info.transferred_bytes;
		bus_total[b][1] += info.transfer_count;
	}
}

static double cpu_at_reset; /* the process's CPU seconds at the last starfa_stats_reset */

static double clock_seconds(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double starfa_monotonic_seconds(void)
{
	return clock_seconds(CLOCK_MONOTONIC);
}

double starfa_process_cpu_seconds(void)
{
	return clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
}

void starfa_stats_reset(void)
{
	cpu_at_reset = starfa_process_cpu_seconds();
	if (starfa_runtime_started())
		collect_worker_stats();
	for (int w = 0; w < nworker_total; w++) {
		starfa_worker_profile *p = &worker_total[w];
		p->tasks = 0;
		p->seconds = p->executing = p->sleeping = p->flops = 0;
	}
	if (nbus_total > 0)
		memset(bus_total, 0, (size_t)nbus_total * sizeof *bus_total);
}

void starfa_stats_get(starfa_worker_stats *out)
{
	if (starfa_runtime_started())
		collect_worker_stats();
	memset(out, 0, sizeof *out);
	for (int w = 0; w < nworker_total; w++) {
		const starfa_worker_profile *p = &worker_total[w];
		out->tasks[p->kind] += p->tasks;
		out->seconds[p->kind] += p->executing;
		out->flops[p->kind] += p->flops;
	}
}

int starfa_profile_get(starfa_profile *out)
{
	memset(out, 0, sizeof *out);
	if (!starfa_runtime_started())
		return starfa_set_error(STARFA_EINVAL, "starfa_profile_get: the runtime is not started (starfa_init)");
	collect_worker_stats();
	int nlinks = 0;
	for (int b = 0; b < nbus_total; b++)
		nlinks += bus_total[b][1] > 0;
	out->workers = starfa_malloc((size_t)(nworker_total > 0 ? nworker_total : 1), sizeof *out->workers);
	out->links = starfa_malloc((size_t)(nlinks > 0 ? nlinks : 1), sizeof *out->links);
	if (!out->workers || !out->links) {
		starfa_profile_clear(out);
		return STARFA_ENOMEM;
	}
	out->nworkers = nworker_total;
	out->cpu_seconds = starfa_process_cpu_seconds() - cpu_at_reset;
	if (nworker_total > 0)
		memcpy(out->workers, worker_total, (size_t)nworker_total * sizeof *worker_total);
	for (int b = 0; b < nbus_total; b++) {
		if (bus_total[b][1] == 0)
			continue;
		starfa_link_profile *l = &out->links[out->nlinks++];
		starpu_memory_node_get_name((unsigned)starpu_bus_get_src(b), l->src, sizeof l->src);
		starpu_memory_node_get_name((unsigned)starpu_bus_get_dst(b), l->dst, sizeof l->dst);
		l->bytes = bus_total[b][0];
		l->transfers = bus_total[b][1];
	}
	return 0;
}

int starfa_profile_add(starfa_profile *sum, const starfa_profile *p)
{
	if (!sum || !p)
		return starfa_set_error(STARFA_EINVAL, "starfa_profile_add: NULL profile");
	sum->cpu_seconds += p->cpu_seconds;
	if (sum->nworkers == 0 && p->nworkers > 0) {
		sum->workers = starfa_malloc((size_t)p->nworkers, sizeof *sum->workers);
		if (!sum->workers)
			return STARFA_ENOMEM;
		memcpy(sum->workers, p->workers, (size_t)p->nworkers * sizeof *p->workers);
		sum->nworkers = p->nworkers;
	} else {
		for (int w = 0; w < p->nworkers && w < sum->nworkers; w++) {
			starfa_worker_profile *s = &sum->workers[w];
			const starfa_worker_profile *q = &p->workers[w];
			s->tasks += q->tasks;
			s->seconds += q->seconds;
			s->executing += q->executing;
			s->sleeping += q->sleeping;
			s->flops += q->flops;
		}
	}
	for (int l = 0; l < p->nlinks; l++) {
		const starfa_link_profile *q = &p->links[l];
		int found = -1;
		for (int m = 0; m < sum->nlinks && found < 0; m++)
			if (strcmp(sum->links[m].src, q->src) == 0 && strcmp(sum->links[m].dst, q->dst) == 0)
				found = m;
		if (found < 0) {
			starfa_link_profile *grown = realloc(sum->links, (size_t)(sum->nlinks + 1) * sizeof *grown);
			if (!grown)
				return starfa_set_error(STARFA_ENOMEM, "out of memory for a profile's links");
			sum->links = grown;
			found = sum->nlinks++;
			sum->links[found] = *q;
		} else {
			sum->links[found].bytes += q->bytes;
			sum->links[found].transfers += q->transfers;
		}
	}
	return 0;
}

void starfa_profile_clear(starfa_profile *p)
{
	free(p->workers);
	free(p->links);
	memset(p, 0, sizeof *p);
}

void starfa_print_info(FILE *out)
{
	int major, minor, release;
	starpu_get_version(&major, &minor, &release);
	fprintf(out, "starfa %s\n", STARFA_VERSION_STRING);
	fprintf(out, "StarPU %d.%d.%d\n", major, minor, release);
#ifdef STARPU_NON_BLOCKING_DRIVERS
	fprintf(out, "idle workers: spin (StarPU built without blocking drivers)\n");
#else
	fprintf(out, "idle workers: CPU workers sleep, except one StarPU keeps awake; CUDA workers poll (StarPU "
		     "built with blocking drivers)\n");
#endif
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
