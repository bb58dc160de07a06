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

/* Whether starfa_init has started StarPU (and starfa_shutdown not yet stopped it). */
int starfa_runtime_started(void);

#endif
