/* Declarations shared inside the library (not installed). */
#ifndef STARFA_RUNTIME_INTERNAL_H
#define STARFA_RUNTIME_INTERNAL_H

#include <config.h>

#include "starfa.h"

#include <stdint.h>
#include <stdlib.h>

#if defined(__GNUC__)
#define STARFA_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define STARFA_PRINTF(a, b)
#endif

/* Records a message for starfa_last_error() and returns code, so that
 * `return starfa_set_error(STARFA_EINVAL, "...", ...);` reads as one step. */
int starfa_set_error(int code, const char *fmt, ...) STARFA_PRINTF(2, 3);
void starfa_clear_error(void);

/* Allocation that records STARFA_ENOMEM with the size on failure (NULL then).
 * Counts of zero give a valid, freeable pointer. */
void *starfa_malloc(size_t count, size_t size);
void *starfa_calloc(size_t count, size_t size);
/* realloc to count elements of elem bytes, with the overflow check and the error recorded (NULL then;
 * p stays valid). */
void *starfa_realloc_array(void *p, uint64_t count, size_t elem);

/* An environment setting of a few named values: *index the value's among choices, 0 (the first, the
 * default) when name is unset or empty; an error naming them all for any other value. */
int starfa_env_choice(const char *name, const char *const *choices, int nchoices, int *index);

/* Where the automatic placement puts a sweep's bands (STARFA_PLACEMENT): on the GPUs alone (gpu; also
 * what an unset variable reads as, though an operation with split_by_default then splits, see
 * starfa_placement_given), split between the GPUs and the cores as the calibrated models predict
 * (split), or anywhere StarPU likes (any). An error for another value. */
typedef enum { STARFA_PLACE_GPU, STARFA_PLACE_SPLIT, STARFA_PLACE_ANY } starfa_placement;
int starfa_placement_mode(starfa_placement *mode);
/* 1 when STARFA_PLACEMENT names a placement, 0 when it is unset (the default). */
int starfa_placement_given(void);

/* Threads for the host's own parallel loops (OpenMP in the calling thread): while StarPU runs, the
 * cores its workers leave free (at least 1), as an idle worker spins on its core and a loop thread
 * that shares one runs at half speed and waits scheduler ticks at its barriers; otherwise OpenMP's
 * default. */
int starfa_host_threads(void);
/* Whether the runtime is up and leaves a core to the thread that submits (next to a GPU's worker). */
int starfa_caller_has_core(void);

/* fn(ctx, c, begin, end) for each chunk c of nchunks (at most n) consecutive, about equal ranges of [0, n),
 * in parallel, then returns: on the CPU workers as StarPU tasks where there are any and the caller is
 * not one (between iterations they are idle), with the caller where a core is left to it, else on the
 * host's OpenMP threads (runtime/parallel.c).
 * fn runs on any thread; c is the caller's slot for partial results. 0, or an error from StarPU. */
typedef void (*starfa_chunk_fn)(void *ctx, int64_t chunk, int64_t begin, int64_t end);
int starfa_host_parallel(int64_t n, int64_t nchunks, starfa_chunk_fn fn, void *ctx);
/* starfa_host_parallel's chunks: how many for n items (nchunks clamped to [1, n]), and where chunk c
 * begins (chunk c ends where c + 1 begins). Inline, so that a build without the runtime (the readers'
 * fuzz target) cuts the same chunks. */
static inline int64_t starfa_chunk_count(int64_t n, int64_t nchunks)
{
	return nchunks > n ? n : nchunks < 1 ? 1 : nchunks;
}
static inline int64_t starfa_chunk_begin(int64_t n, int64_t nchunks, int64_t c)
{
	return (int64_t)((__int128)n * c / nchunks);
}

/* Around a host loop whose threads each call BLAS: while the runtime is not up, starfa_blas_hold sets
 * OpenBLAS to one thread and returns 1, and starfa_blas_release gives the setting back (starfa_init and
 * other holds wait in between); while it is up (starfa_init holds it at one thread), it returns 0 and
 * there is nothing to release. */
int starfa_blas_hold(void);
void starfa_blas_release(void);

/* STARFA_CUDA_GRAM as starfa_init read it: the index of 3xtf32, tf32, 3xbf16 or 3xfp16 (gpu/als_common.h's
 * starfa_cuda_gram_precision), or -1 when unset. */
int starfa_gram_precision_setting(void);

/* The priority to give StarPU for a task of starfa priority `priority` that may run on the worker kinds
 * `where` (STARPU_CPU / STARPU_CUDA bits): the priority itself, except under heteroprio, where it is the
 * index of the bucket for the priority's sign and that placement (runtime/context.c). */
int starfa_sched_priority(int priority, unsigned where);
/* Whether starfa_sched_priority maps tasks to heteroprio's buckets (heteroprio runs). */
int starfa_sched_buckets(void);

/* Whether starfa_init has started StarPU (and starfa_shutdown not yet stopped it). */
int starfa_runtime_started(void);
/* Clock readings in seconds (runtime/context.c): the monotonic clock, for spans, and the process's CPU
 * time, every thread (the profile's cpu_seconds, the idle probe). */
double starfa_monotonic_seconds(void);
double starfa_process_cpu_seconds(void);

#endif
