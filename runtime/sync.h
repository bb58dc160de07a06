/* Waiting for the workers from the submitting thread: a short spin before sleeping.
 *
 * StarPU's waits (starpu_task_wait_for_all, starpu_data_acquire) sleep on a condition variable, and
 * the worker that finishes the last task wakes the sleeper. Between machines that wake-up costs from a
 * few to tens of microseconds (an inter-processor interrupt, more on a virtual machine), which a small
 * job pays at every wait: on a GPU, a whole SDDMM of 100,000 entries takes about 10 µs. When the
 * submitting thread has a core of its own (fewer workers than cores: starfa_init leaves one core to it
 * on a machine with GPUs), these waits first poll for up to the spin limit (STARFA_WAIT_SPIN_US,
 * default STARFA_WAIT_SPIN_DEFAULT_US; 0 sleeps at once), then sleep as StarPU's do. Where every core
 * runs a worker they sleep at once: a poller that yields its core to a running StarPU worker gets it
 * back a scheduler tick later (4 ms, measured on a 16-core host with StarPU's workers spinning; built
 * with blocking drivers, idle ones sleep, but a busy one still holds its core). */
#ifndef STARFA_RUNTIME_SYNC_H
#define STARFA_RUNTIME_SYNC_H

#include <starpu.h>

/* 5 ms: measured against 200 µs and 1 ms on an H100 host (bench/PLACEMENT.md, 2026-11-27), the graph's
 * overhead over its kernel fell from 9-13% to 5-6% on 0.76 ms tasks and from 2-4% to 1% on 3.3 ms ones. */
#define STARFA_WAIT_SPIN_DEFAULT_US 5000

/* Reads STARFA_WAIT_SPIN_US (starfa_init calls it): 0, or an error for a value that is not a whole
 * number of microseconds in [0, 1000000]. */
int starfa_wait_spin_configure(void);
/* Whether the waits poll first (starfa_init: when the workers leave a core free). */
void starfa_wait_spin_enable(int on);

/* starfa_submit counts its tasks in and their callbacks count them out, for starfa_wait's lock-free poll. */
void starfa_task_inserted(void);
void starfa_task_finished(void);
/* Sets the count back to zero (starfa_init, before any task; and once shutdown's last wait is over). */
void starfa_task_count_reset(void);

/* starpu_data_acquire(handle, mode) with the spin first; returns StarPU's code. */
int starfa_acquire(starpu_data_handle_t handle, enum starpu_data_access_mode mode);
/* Acquires every non-NULL handle of handles[0..n) at once (each comes as soon as the tasks writing it
 * are done and its copy is there, whatever the others do), then waits for them all; returns StarPU's
 * code. On an error none is held. */
int starfa_acquire_all(starpu_data_handle_t *handles, int64_t n, enum starpu_data_access_mode mode);

#endif
