/* ALS workspaces as StarPU handles: per-band pools of systems and right-hand sides, solve status
 * words, and small Gram matrices. */
#include "storage/systems.h"
#include "runtime/sync.h"

#include "cpu/half.h"
#include "cpu/solve.h"

#include <string.h>

int starfa_systems_create(const starfa_tiled *S, starfa_side side, int64_t k, int fp16, int64_t slots,
			  starfa_systems **out)
{
	*out = NULL;
	if (!S || (side != STARFA_ROWS && side != STARFA_COLS) || k <= 0 || slots < 0)
		return starfa_set_error(STARFA_EINVAL, "starfa_systems_create: need a tiled matrix, a side, k > 0 "
						       "and slots >= 0");
	if (side == STARFA_COLS && !starfa_tiled_has_transpose(S))
		return starfa_set_error(STARFA_EINVAL, "starfa_systems_create: the column side needs S's transposed "
						       "grid (starfa_tiling_options.transposed = 1)");
	starfa_systems *sys = starfa_calloc(1, sizeof *sys);
	if (!sys)
		return STARFA_ENOMEM;
	sys->S = S;
	sys->side = side;
	sys->k = k;
	sys->fp16 = fp16 != 0;
	sys->nbands = starfa_side_grid(S, side)->nr;
	sys->bounds = side == STARFA_ROWS ? S->row_bounds : S->col_bounds;
	sys->slots = slots == 0 || slots > sys->nbands ? sys->nbands : slots;
	for (int64_t i = 0; i < sys->nbands; i++)
		if (sys->bounds[i + 1] - sys->bounds[i] > sys->slot_rows)
			sys->slot_rows = sys->bounds[i + 1] - sys->bounds[i];
	const int storable = (uint64_t)sys->slot_rows * (uint64_t)(k * k) <= UINT32_MAX;
	if (storable) {
		sys->A = starfa_calloc((size_t)sys->slots, sizeof *sys->A);
		sys->b = starfa_calloc((size_t)sys->slots, sizeof *sys->b);
	}
	sys->status = starfa_calloc((size_t)sys->nbands, sizeof *sys->status);
	sys->status_data = starfa_calloc((size_t)sys->nbands * STARFA_SOLVE_STATUS_WORDS, sizeof *sys->status_data);
	sys->plan = starfa_calloc((size_t)sys->nbands, sizeof *sys->plan);
	sys->plan_items = starfa_calloc((size_t)sys->nbands, sizeof *sys->plan_items);
	sys->plan_nitems = starfa_calloc((size_t)sys->nbands, sizeof *sys->plan_nitems);
	sys->plan_nparts = starfa_calloc((size_t)sys->nbands, sizeof *sys->plan_nparts);
	if ((storable && (!sys->A || !sys->b)) || !sys->status || !sys->status_data || !sys->plan || !sys->plan_items ||
	    !sys->plan_nitems || !sys->plan_nparts) {
		starfa_systems_free(sys);
		return STARFA_ENOMEM;
	}
	/* No home node: StarPU allocates a slot on the memory node of the worker that first writes it, so
	 * systems built and solved on a GPU never exist in main memory. */
	for (int64_t s = 0; storable && s < sys->slots; s++) {
		starpu_vector_data_register(&sys->A[s], -1, 0, (uint32_t)(sys->slot_rows * k * k),
					    fp16 ? sizeof(uint16_t) : sizeof(float));
		starpu_vector_data_register(&sys->b[s], -1, 0, (uint32_t)(sys->slot_rows * k), sizeof(float));
	}
	for (int64_t i = 0; i < sys->nbands; i++)
		starpu_vector_data_register(&sys->status[i], STARPU_MAIN_RAM,
					    (uintptr_t)(sys->status_data + i * STARFA_SOLVE_STATUS_WORDS),
					    STARFA_SOLVE_STATUS_WORDS, sizeof(uint32_t));
	*out = sys;
	return 0;
}

int starfa_systems_storable(const struct starfa_systems *sys, const char *what)
{
	if (sys->A)
		return 0;
	return starfa_set_error(STARFA_EINVAL,
				"%s: a band of %lld rows holds more than 2^32 entries of %lldx%lld systems: ask for more "
				"tiles", what, (long long)sys->slot_rows, (long long)sys->k, (long long)sys->k);
}

void starfa_systems_free(starfa_systems *sys)
{
	if (!sys)
		return;
	for (int64_t s = 0; s < sys->slots; s++) {
		if (sys->A && sys->A[s])
			starpu_data_unregister_no_coherency(sys->A[s]);
		if (sys->b && sys->b[s])
			starpu_data_unregister_no_coherency(sys->b[s]);
	}
	for (int64_t i = 0; i < sys->nbands; i++) {
		if (sys->status && sys->status[i])
			starpu_data_unregister(sys->status[i]);
		if (sys->plan && sys->plan[i])
			starpu_data_unregister(sys->plan[i]);
		if (sys->plan_items)
			free(sys->plan_items[i]);
	}
	free(sys->plan);
	free(sys->plan_items);
	free(sys->plan_nitems);
	free(sys->plan_nparts);
	free(sys->A);
	free(sys->b);
	free(sys->status);
	free(sys->status_data);
	free(sys);
}

int64_t starfa_systems_bands(const starfa_systems *sys)
{
	return sys->nbands;
}

size_t starfa_systems_bytes(const starfa_systems *sys)
{
	size_t elem = sys->fp16 ? sizeof(uint16_t) : sizeof(float);
	return (size_t)sys->slots * (size_t)sys->slot_rows * ((size_t)(sys->k * sys->k) * elem + (size_t)sys->k * sizeof(float));
}

int starfa_systems_report(starfa_systems *sys, starfa_solve_report *out)
{
	memset(out, 0, sizeof *out);
	out->first_bad_row = -1;
	for (int64_t i = 0; i < sys->nbands; i++) {
		if (starfa_acquire(sys->status[i], STARPU_R) != 0)
			return starfa_set_error(STARFA_ERUNTIME, "starpu_data_acquire failed on the status of band %lld",
						(long long)i);
		const uint32_t *st = sys->status_data + i * STARFA_SOLVE_STATUS_WORDS;
		out->bad_rows += st[STARFA_SOLVE_BAD_ROWS];
		out->nonfinite_systems += st[STARFA_SOLVE_NONFINITE_A];
		out->nonfinite_rhs += st[STARFA_SOLVE_NONFINITE_B];
		out->not_spd += st[STARFA_SOLVE_NOT_SPD];
		if (out->first_bad_row < 0 && st[STARFA_SOLVE_BAD_ROWS] > 0)
			out->first_bad_row = sys->bounds[i] + st[STARFA_SOLVE_FIRST_BAD_ROW];
		starpu_data_release(sys->status[i]);
	}
	return 0;
}

int starfa_systems_read(starfa_systems *sys, int64_t band, float *A, float *b)
{
	if (band < 0 || band >= sys->nbands)
		return starfa_set_error(STARFA_EINVAL, "starfa_systems_read: no band %lld", (long long)band);
	if ((A || b) && starfa_systems_storable(sys, "starfa_systems_read"))
		return STARFA_EINVAL;
	int64_t rows = sys->bounds[band + 1] - sys->bounds[band], k = sys->k;
	/* Only what is asked for: a slot no task has written yet has nothing to read. */
	starpu_data_handle_t ha = starfa_systems_slot_A(sys, band), hb = starfa_systems_slot_b(sys, band);
	if (A) {
		if (starfa_acquire(ha, STARPU_R) != 0)
			return starfa_set_error(STARFA_ERUNTIME, "starpu_data_acquire failed on the systems of band %lld",
						(long long)band);
		const void *pa = (const void *)starpu_vector_get_local_ptr(ha);
		if (sys->fp16)
			starfa_half_load(pa, A, rows * k * k);
		else
			memcpy(A, pa, (size_t)(rows * k * k) * sizeof(float));
		starpu_data_release(ha);
	}
	if (b) {
		if (starfa_acquire(hb, STARPU_R) != 0)
			return starfa_set_error(STARFA_ERUNTIME, "starpu_data_acquire failed on the right-hand sides of "
								 "band %lld", (long long)band);
		memcpy(b, (const float *)starpu_vector_get_local_ptr(hb), (size_t)(rows * k) * sizeof(float));
		starpu_data_release(hb);
	}
	return 0;
}

/* ------------------------------------------------------------------ Gram matrices */

int starfa_gram_create(int64_t k, starfa_gram **out)
{
	*out = NULL;
	if (k <= 0 || k > 65535)
		return starfa_set_error(STARFA_EINVAL, "starfa_gram_create: k = %lld outside [1, 65535]", (long long)k);
	starfa_gram *g = starfa_calloc(1, sizeof *g);
	if (!g)
		return STARFA_ENOMEM;
	g->k = k;
	g->data = starfa_host_alloc((size_t)(k * k) * sizeof(float));
	if (!g->data) {
		free(g);
		return STARFA_ENOMEM;
	}
	memset(g->data, 0, (size_t)(k * k) * sizeof(float));
	starpu_matrix_data_register(&g->handle, STARPU_MAIN_RAM, (uintptr_t)g->data, (uint32_t)k, (uint32_t)k,
				    (uint32_t)k, sizeof(float));
	*out = g;
	return 0;
}

void starfa_gram_free(starfa_gram *g)
{
	if (!g)
		return;
	starpu_data_unregister(g->handle);
	starfa_host_free(g->data, (size_t)(g->k * g->k) * sizeof(float));
	free(g);
}

int starfa_gram_read(starfa_gram *g, float *out)
{
	if (starfa_acquire(g->handle, STARPU_R) != 0)
		return starfa_set_error(STARFA_ERUNTIME, "starpu_data_acquire failed on a Gram matrix");
	memcpy(out, g->data, (size_t)(g->k * g->k) * sizeof(float));
	starpu_data_release(g->handle);
	return 0;
}
