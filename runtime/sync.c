/* Waits that spin briefly before they sleep (runtime/sync.h). */
#include "runtime/sync.h"
#include "runtime/internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

static long spin_ns = STARFA_WAIT_SPIN_DEFAULT_US * 1000L;
static int spin_on;

void starfa_wait_spin_enable(int on)
{
	spin_on = on;
}

int starfa_wait_spin_configure(void)
{
	const char *env = getenv("STARFA_WAIT_SPIN_US");
	spin_ns = STARFA_WAIT_SPIN_DEFAULT_US * 1000L;
	if (!env || !*env)
		return 0;
	char *end = NULL;
	errno = 0;
	long us = strtol(env, &end, 10);
	if (errno || *end || us < 0 || us > 1000000)
		return starfa_set_error(STARFA_EINVAL, "STARFA_WAIT_SPIN_US must be a number of microseconds in [0, 1000000], "
						       "not '%s'",
					env);
	spin_ns = us * 1000L;
	return 0;
}

static long elapsed_ns(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Polls done() until it holds or the spin limit passes. Returns whether it held. A pause costs up to
 * 140 cycles on recent x86 cores: four between polls, and the clock read every 64th, keep the poll's
 * own lag well under a microsecond. */
static int spin(int (*done)(void *), void *arg)
{
	if (!spin_on || spin_ns <= 0)
		return done(arg);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned n = 1;; n++) {
		if (done(arg))
			return 1;
		if (n % 64 == 0 && elapsed_ns(&t0) >= spin_ns)
			return 0;
		for (int i = 0; i < 4; i++)
			relax();
	}
}

/* Tasks starfa_submit inserted whose callback has not run yet. The wait polls this counter, which
 * takes no lock, before StarPU's own count (starpu_task_nsubmitted), which takes the mutex a worker
 * needs to count its finished task down: polled in a loop, that mutex put the finishing worker to sleep
 * on it now and then (futex waits in profiles of a 2-core host). On a 16-core H200 host the two polls
 * measured the same within run-to-run noise (bench/PLACEMENT.md, 2026-12-03). */
static atomic_long in_flight;

void starfa_task_inserted(void)
{
	atomic_fetch_add_explicit(&in_flight, 1, memory_order_relaxed);
}

void starfa_task_finished(void)
{
	atomic_fetch_sub_explicit(&in_flight, 1, memory_order_release);
}

void starfa_task_count_reset(void)
{
	atomic_store_explicit(&in_flight, 0, memory_order_release);
}

/* StarPU counts a task down a little after its callback, and also counts tasks that starfa_submit
 * did not insert: its count is read once starfa's own is zero (or below: a count that went wrong then
 * costs no more than StarPU's own poll). */
static int no_tasks_left(void *arg)
{
	(void)arg;
	return atomic_load_explicit(&in_flight, memory_order_acquire) <= 0 && starpu_task_nsubmitted() == 0;
}

int starfa_wait(void)
{
	spin(no_tasks_left, NULL); /* then StarPU's own wait, at once when nothing is left */
	int ret = starpu_task_wait_for_all();
	if (ret != 0)
		return starfa_set_error(STARFA_ERUNTIME, "starpu_task_wait_for_all failed: %s", strerror(-ret));
	return 0;
}

/* Acquisitions under way: the count of those not yet ours. */
struct acquisitions {
	atomic_long left;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

/* StarPU calls this once a handle is ours (in a worker's thread, or in the caller's at once). */
static void one_acquired(void *arg)
{
	struct acquisitions *a = arg;
	pthread_mutex_lock(&a->lock);
	if (atomic_fetch_sub(&a->left, 1) == 1)
		pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->lock);
}

static int all_acquired(void *arg)
{
	return atomic_load(&((struct acquisitions *)arg)->left) == 0;
}

int starfa_acquire_all(starpu_data_handle_t *handles, int64_t n, enum starpu_data_access_mode mode)
{
	struct acquisitions a;
	atomic_init(&a.left, 0);
	pthread_mutex_init(&a.lock, NULL);
	pthread_cond_init(&a.cond, NULL);
	int ret = 0;
	int64_t issued = 0;
	for (; issued < n && ret == 0; issued++) {
		if (!handles[issued])
			continue;
		atomic_fetch_add(&a.left, 1);
		ret = starpu_data_acquire_cb(handles[issued], mode, one_acquired, &a);
		if (ret != 0)
			atomic_fetch_sub(&a.left, 1);
	}
	if (ret != 0)
		issued--; /* the one refused */
	spin(all_acquired, &a);
	/* Taking the lock also waits for the last one_acquired() to leave it before the mutex goes. */
	pthread_mutex_lock(&a.lock);
	while (atomic_load(&a.left) != 0)
		pthread_cond_wait(&a.cond, &a.lock);
	pthread_mutex_unlock(&a.lock);
	pthread_cond_destroy(&a.cond);
	pthread_mutex_destroy(&a.lock);
	if (ret != 0)
		for (int64_t k = 0; k < issued; k++)
			if (handles[k])
				starpu_data_release(handles[k]);
	return ret;
}

int starfa_acquire(starpu_data_handle_t handle, enum starpu_data_access_mode mode)
{
	return starfa_acquire_all(&handle, 1, mode);
}
