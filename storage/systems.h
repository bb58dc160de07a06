/* The insides of the ALS systems and Gram matrices, shared by storage/ and codelets/. */
#ifndef STARFA_STORAGE_SYSTEMS_H
#define STARFA_STORAGE_SYSTEMS_H

#include "storage/tiled.h"

/* Per-row k x k systems and right-hand sides of one side of a tiled matrix. Band b uses slot
 * b % slots: the band after it in the same slot waits (sequential consistency) until b's solve has
 * read it, so memory stays at slots bands whatever the number of bands. */
struct starfa_systems {
	const struct starfa_tiled *S;
	starfa_side side;
	int64_t k;
	int fp16;
	int64_t nbands;
	const int64_t *bounds; /* the side's band boundaries (S's) */
	int64_t slots, slot_rows;
	/* per slot; StarPU allocates them where they are first used. NULL where a slot would hold more than
	 * 2^32 values (a StarPU vector's count): then only the fused rowsolve, which stores no systems, can
	 * use these bands (starfa_systems_storable) */
	starpu_data_handle_t *A, *b;
	starpu_data_handle_t *status;  /* per band: STARFA_SOLVE_STATUS_WORDS uint32 written by its solve */
	uint32_t *status_data;
	/* Per band, built the first time a fused rowsolve task may run on a GPU: the CUDA kernel's work
	 * list (gpu/rowsolve.h) as a read-only handle that stays on the GPUs, its items and segments. */
	starpu_data_handle_t *plan;
	uint32_t **plan_items;
	int64_t *plan_nitems, *plan_nparts;
};

struct starfa_gram {
	int64_t k;
	float *data;
	starpu_data_handle_t handle;
};

/* 0, or STARFA_EINVAL and a message naming what (the caller) where the bands are too large to store their
 * systems. */
int starfa_systems_storable(const struct starfa_systems *sys, const char *what);

static inline starpu_data_handle_t starfa_systems_slot_A(const struct starfa_systems *sys, int64_t band)
{
	return sys->A[band % sys->slots];
}

static inline starpu_data_handle_t starfa_systems_slot_b(const struct starfa_systems *sys, int64_t band)
{
	return sys->b[band % sys->slots];
}

#endif
