/* Sparse values on either grid of a tiled matrix, and partial sums, as StarPU handles. */
#include "storage/tiled.h"
#include "runtime/sync.h"

#include <string.h>
#ifdef STARFA_USE_CUDA
#include <cuda_runtime_api.h>
#include <starpu_cuda.h>
#endif

/* ------------------------------------------------------------------ values nothing wrote yet */

/* Values of their own are registered with no home copy: StarPU allocates a tile where a task first
 * writes it (on the GPU, for the GPUs' bands), and host memory only where a core's task or a read-back
 * needs it. A tile read before anything wrote it reads as zeros: StarPU runs this initialisation
 * method on the memory node of the reader (and as a task before a read-back). */
static void values_zero_cpu(void *buffers[], void *arg)
{
	(void)arg;
	memset((void *)STARPU_VECTOR_GET_PTR(buffers[0]), 0,
	       (size_t)STARPU_VECTOR_GET_NX(buffers[0]) * STARPU_VECTOR_GET_ELEMSIZE(buffers[0]));
}

#ifdef STARFA_USE_CUDA
static void values_zero_cuda(void *buffers[], void *arg)
{
	(void)arg;
	cudaError_t e = cudaMemsetAsync((void *)STARPU_VECTOR_GET_PTR(buffers[0]), 0,
					(size_t)STARPU_VECTOR_GET_NX(buffers[0]) * STARPU_VECTOR_GET_ELEMSIZE(buffers[0]),
					starpu_cuda_get_local_stream());
	if (e != cudaSuccess)
		STARPU_CUDA_REPORT_ERROR(e);
}
#endif

static struct starpu_codelet values_zero_cl = {
	.cpu_funcs = {values_zero_cpu},
#ifdef STARFA_USE_CUDA
	.cuda_funcs = {values_zero_cuda},
	.cuda_flags = {STARPU_CUDA_ASYNC},
#endif
	.nbuffers = 1,
	.modes = {STARPU_W},
	.name = "values_zero",
};

/* ------------------------------------------------------------------ sparse value sets */

/* Values on a side of `pattern`: over the caller's array `over` (runs of it, one a tile: one column band),
 * or in home blocks of their own (over NULL). */
static int values_create(const char *fn, const starfa_tiled *pattern, starfa_side side, float *over,
			 starfa_sparse_values **out)
{
	*out = NULL;
	if (!pattern || (side != STARFA_ROWS && side != STARFA_COLS))
		return starfa_set_error(STARFA_EINVAL, "%s: missing pattern or unknown side", fn);
	if (side == STARFA_COLS && !starfa_tiled_has_transpose(pattern))
		return starfa_set_error(STARFA_EINVAL, "%s: values on the column side need the "
						       "transposed grid (starfa_tiling_options.transposed = 1)", fn);
	const struct starfa_grid *g = starfa_side_grid(pattern, side);
	if (over && g->nc != 1)
		return starfa_set_error(STARFA_EINVAL, "%s: the %s side's grid has %lld column bands: values over one "
						       "array need one (each tile a run of the array)",
					fn, side == STARFA_ROWS ? "row" : "column", (long long)g->nc);
	int64_t ntiles = g->nr * g->nc;
	starfa_sparse_values *v = starfa_calloc(1, sizeof *v);
	if (!v)
		return STARFA_ENOMEM;
	v->pattern = pattern;
	v->side = side;
	v->grid = g;
	v->over = over;
	v->handles = starfa_calloc((size_t)ntiles, sizeof *v->handles);
	if (!v->handles) {
		starfa_sparse_values_free(v);
		return STARFA_ENOMEM;
	}
	int64_t run = 0; /* over an array: where tile k's run starts (tiles in band order, one a band) */
	for (int64_t k = 0; k < ntiles; k++) {
		int64_t nnz = g->tiles[k].nnz;
		if (nnz == 0)
			continue;
		if (over) {
			starpu_vector_data_register(&v->handles[k], STARPU_MAIN_RAM, (uintptr_t)(over + run),
						    (uint32_t)nnz, sizeof(float));
		} else {
			starpu_vector_data_register(&v->handles[k], -1, 0, (uint32_t)nnz, sizeof(float));
			starpu_data_set_reduction_methods(v->handles[k], NULL, &values_zero_cl);
		}
		run += nnz;
	}
	*out = v;
	return 0;
}

int starfa_sparse_values_create(const starfa_tiled *pattern, starfa_side side, starfa_sparse_values **out)
{
	return values_create("starfa_sparse_values_create", pattern, side, NULL, out);
}

int starfa_sparse_values_create_over(const starfa_tiled *pattern, starfa_side side, float *data,
				     starfa_sparse_values **out)
{
	if (!data) {
		*out = NULL;
		return starfa_set_error(STARFA_EINVAL, "starfa_sparse_values_create_over: no array");
	}
	return values_create("starfa_sparse_values_create_over", pattern, side, data, out);
}

void starfa_sparse_values_free(starfa_sparse_values *v)
{
	if (!v)
		return;
	int64_t ntiles = v->grid->nr * v->grid->nc;
	/* Over an array this brings the values home into it; values of their own have no home to go to. */
	for (int64_t k = 0; k < ntiles; k++)
		if (v->handles && v->handles[k])
			starpu_data_unregister(v->handles[k]);
	free(v->handles);
	free(v);
}

starfa_side starfa_sparse_values_side(const starfa_sparse_values *v) { return v->side; }
const starfa_tiled *starfa_sparse_values_pattern(const starfa_sparse_values *v) { return v->pattern; }

int starfa_sparse_values_gather(const starfa_sparse_values *v, float *out)
{
	const struct starfa_grid *g = v->grid;
	const int64_t *bounds = starfa_side_bounds(v->pattern, v->side);
	int64_t ntiles = g->nr * g->nc;
	/* Every tile at once: each comes home as soon as its task is done, while others still run. */
	if (starfa_acquire_all(v->handles, ntiles, STARPU_R) != 0)
		return starfa_set_error(STARFA_ERUNTIME, "starpu_data_acquire failed on the values' tiles");
	/* Over an array the values are home in it already, in this order. Within a row, the nonzeros of
	 * tiles (i, 0), (i, 1), ... follow each other in column order, which is the source CSR's (or its
	 * transpose's) order. */
	int64_t pos = 0;
	if (v->over && out != v->over)
		memmove(out, v->over, (size_t)starfa_tiled_nnz(v->pattern) * sizeof(float));
	for (int64_t i = 0; !v->over && i < g->nr; i++) {
		int64_t nrows = bounds[i + 1] - bounds[i];
		for (int64_t r = 0; r < nrows; r++)
			for (int64_t j = 0; j < g->nc; j++) {
				const struct starfa_tile *t = starfa_grid_tile(g, i, j);
				if (t->nnz == 0)
					continue;
				uint32_t p0 = t->rowptr[r], p1 = t->rowptr[r + 1];
				const float *tile = (const float *)starpu_vector_get_local_ptr(v->handles[i * g->nc + j]);
				memcpy(out + pos, tile + p0, (size_t)(p1 - p0) * sizeof(float));
				pos += p1 - p0;
			}
	}
	for (int64_t k = 0; k < ntiles; k++)
		if (v->handles[k])
			starpu_data_release(v->handles[k]);
	return 0;
}

/* ------------------------------------------------------------------ partial sums */

int starfa_sums_create(int64_t n, starfa_sums **out)
{
	*out = NULL;
	if (!starfa_runtime_started())
		return starfa_set_error(STARFA_EINVAL, "starfa_sums_create: call starfa_init first");
	if (n < 1 || n > (1 << 24))
		return starfa_set_error(STARFA_EINVAL, "starfa_sums_create: %lld slots outside [1, 2^24]", (long long)n);
	starfa_sums *s = starfa_calloc(1, sizeof *s);
	if (!s)
		return STARFA_ENOMEM;
	s->n = n;
	s->slots = starfa_host_alloc((size_t)n * sizeof *s->slots);
	s->handles = starfa_calloc((size_t)n, sizeof *s->handles);
	if (!s->slots || !s->handles) {
		starfa_host_free(s->slots, (size_t)n * sizeof *s->slots);
		free(s->handles);
		free(s);
		return STARFA_ENOMEM;
	}
	for (int64_t k = 0; k < n; k++) {
		s->slots[k] = 0.0;
		starpu_variable_data_register(&s->handles[k], STARPU_MAIN_RAM, (uintptr_t)&s->slots[k], sizeof(double));
	}
	*out = s;
	return 0;
}

void starfa_sums_free(starfa_sums *s)
{
	if (!s)
		return;
	for (int64_t k = 0; k < s->n; k++)
		starpu_data_unregister(s->handles[k]);
	starfa_host_free(s->slots, (size_t)s->n * sizeof *s->slots);
	free(s->handles);
	free(s);
}

int64_t starfa_sums_count(const starfa_sums *s) { return s->n; }

int starfa_sums_read_slots(starfa_sums *s, int64_t first, int64_t count, double *out)
{
	if (!s || !out || first < 0 || count < 0 || first > s->n - count)
		return starfa_set_error(STARFA_EINVAL, "slots [%lld, %lld) of sums with %lld slots",
					(long long)first, (long long)(first + count), s ? (long long)s->n : 0LL);
	for (int64_t k = first; k < first + count; k++) {
		if (starfa_acquire(s->handles[k], STARPU_R) != 0)
			return starfa_set_error(STARFA_ERUNTIME, "starpu_data_acquire failed on sum slot %lld", (long long)k);
		out[k - first] = s->slots[k];
		starpu_data_release(s->handles[k]);
	}
	return 0;
}

int starfa_sums_read(starfa_sums *s, double *out)
{
	return starfa_sums_read_slots(s, 0, s ? s->n : 0, out);
}

int starfa_sums_total(starfa_sums *s, double *total)
{
	double *slots = starfa_malloc((size_t)s->n, sizeof *slots);
	int rc = slots ? starfa_sums_read(s, slots) : STARFA_ENOMEM;
	double sum = 0.0;
	for (int64_t k = 0; !rc && k < s->n; k++)
		sum += slots[k];
	free(slots);
	if (!rc)
		*total = sum;
	return rc;
}
