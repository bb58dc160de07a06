/* Dense matrices in row blocks aligned with a side's bands, and small vectors, as StarPU handles. */
#include "storage/tiled.h"
#include "runtime/sync.h"

#include <string.h>
#ifdef STARFA_USE_CUDA
#include <cuda_runtime_api.h>
#endif

/* ------------------------------------------------------------------ dense row blocks */

int starfa_dense_create(const starfa_tiled *t, starfa_side side, float *data, int64_t cols, starfa_dense **out)
{
	*out = NULL;
	if (!data || cols <= 0 || cols > UINT32_MAX)
		return starfa_set_error(STARFA_EINVAL, "starfa_dense_create: need data and 0 < cols < 2^32");
	const int64_t *bounds = side == STARFA_ROWS ? t->row_bounds : t->col_bounds;
	int64_t nblocks = side == STARFA_ROWS ? t->grid.nr : t->grid.nc;
	starfa_dense *d = starfa_calloc(1, sizeof *d);
	if (!d)
		return STARFA_ENOMEM;
	d->data = data;
	d->rows = side == STARFA_ROWS ? t->nrows : t->ncols;
	d->cols = cols;
	d->nblocks = nblocks;
	d->bounds = starfa_malloc((size_t)nblocks + 1, sizeof *d->bounds);
	d->blocks = starfa_calloc((size_t)nblocks, sizeof *d->blocks);
	if (!d->bounds || !d->blocks) {
		starfa_dense_free(d);
		return STARFA_ENOMEM;
	}
	memcpy(d->bounds, bounds, ((size_t)nblocks + 1) * sizeof *d->bounds);
	const uint32_t *where = side == STARFA_ROWS ? t->row_where : t->col_where;
	if (where) {
		if (!(d->where = starfa_malloc((size_t)nblocks, sizeof *d->where))) {
			starfa_dense_free(d);
			return STARFA_ENOMEM;
		}
		memcpy(d->where, where, (size_t)nblocks * sizeof *d->where);
	}
	/* Pinned host memory lets StarPU copy blocks to and from GPUs asynchronously. A pin can fail (the
	 * range, or part of it, pinned already) and the blocks then work unpinned, but CUDA keeps the
	 * failure as this thread's last error, which the next kernel launch from this thread would
	 * report as its own: cleared here. */
	if (starpu_cuda_worker_get_count() > 0) {
		if (starpu_memory_pin(data, (size_t)(d->rows * cols) * sizeof(float)) == 0)
			d->pinned = 1;
#ifdef STARFA_USE_CUDA
		else
			(void)cudaGetLastError();
#endif
	}
	for (int64_t b = 0; b < nblocks; b++) {
		int64_t r0 = d->bounds[b], r1 = d->bounds[b + 1];
		if ((r1 - r0) * cols > UINT32_MAX) {
			starfa_dense_free(d);
			return starfa_set_error(STARFA_EINVAL, "row block %lld holds more than 2^32 elements: "
							      "ask for more tiles", (long long)b);
		}
		starpu_matrix_data_register(&d->blocks[b], STARPU_MAIN_RAM, (uintptr_t)(data + r0 * cols),
					    (uint32_t)cols, (uint32_t)cols, (uint32_t)(r1 - r0), sizeof(float));
		starfa_prefetch_to_gpus(d->blocks[b], -1); /* read by tasks on every GPU */
	}
	*out = d;
	return 0;
}

void starfa_dense_free(starfa_dense *d)
{
	if (!d)
		return;
	if (d->blocks)
		for (int64_t b = 0; b < d->nblocks; b++)
			if (d->blocks[b])
				starpu_data_unregister(d->blocks[b]);
	if (d->pinned)
		starpu_memory_unpin(d->data, (size_t)(d->rows * d->cols) * sizeof(float));
	free(d->blocks);
	free(d->bounds);
	free(d->where);
	free(d);
}

int64_t starfa_dense_blocks(const starfa_dense *d) { return d->nblocks; }
int64_t starfa_dense_rows(const starfa_dense *d) { return d->rows; }
int64_t starfa_dense_cols(const starfa_dense *d) { return d->cols; }

const void *starfa_dense_block_id(const starfa_dense *d, int64_t b)
{
	return d && b >= 0 && b < d->nblocks ? (const void *)d->blocks[b] : NULL;
}

int starfa_dense_blocked_along(const starfa_dense *d, const int64_t *bounds, int64_t nblocks)
{
	return d->nblocks == nblocks && memcmp(d->bounds, bounds, (size_t)(nblocks + 1) * sizeof *bounds) == 0;
}

int starfa_dense_sync(starfa_dense *d)
{
	return starfa_dense_sync_all(&d, 1);
}

int starfa_dense_sync_all(starfa_dense *const *list, int64_t n)
{
	if (n < 0 || (n > 0 && !list))
		return starfa_set_error(STARFA_EINVAL, "starfa_dense_sync_all: no list of %lld matrices", (long long)n);
	int64_t nh = 0;
	for (int64_t i = 0; i < n; i++) {
		if (!list[i])
			return starfa_set_error(STARFA_EINVAL, "starfa_dense_sync_all: matrix %lld is NULL", (long long)i);
		nh += list[i]->nblocks;
	}
	/* one matrix: its own block handles; several: theirs in one list */
	starpu_data_handle_t *handles =
		n == 1 ? list[0]->blocks : starfa_malloc((size_t)(nh > 0 ? nh : 1), sizeof *handles);
	if (!handles && n != 1)
		return STARFA_ENOMEM;
	for (int64_t i = 0, k = 0; n > 1 && i < n; i++)
		for (int64_t b = 0; b < list[i]->nblocks; b++)
			handles[k++] = list[i]->blocks[b];
	/* Every block of every matrix at once: each comes home as soon as its task is done, its transfer
	 * beside the others' instead of one after another. */
	int rc = 0;
	if (starfa_acquire_all(handles, nh, STARPU_R) != 0)
		rc = starfa_set_error(STARFA_ERUNTIME, "starpu_data_acquire failed on the dense blocks");
	else
		for (int64_t h = 0; h < nh; h++)
			starpu_data_release(handles[h]);
	if (n != 1)
		free(handles);
	return rc;
}

/* ------------------------------------------------------------------ small vectors */

int starfa_vector_create(int64_t n, starfa_vector **out)
{
	*out = NULL;
	if (!starfa_runtime_started())
		return starfa_set_error(STARFA_EINVAL, "starfa_vector_create: call starfa_init first");
	if (n < 1 || n > (int64_t)UINT32_MAX)
		return starfa_set_error(STARFA_EINVAL, "starfa_vector_create: size %lld outside [1, 2^32)", (long long)n);
	starfa_vector *v = starfa_calloc(1, sizeof *v);
	if (!v)
		return STARFA_ENOMEM;
	v->n = n;
	v->data = starfa_host_alloc((size_t)n * sizeof *v->data);
	if (!v->data) {
		free(v);
		return STARFA_ENOMEM;
	}
	memset(v->data, 0, (size_t)n * sizeof *v->data);
	starpu_vector_data_register(&v->handle, STARPU_MAIN_RAM, (uintptr_t)v->data, (uint32_t)n, sizeof(float));
	*out = v;
	return 0;
}

void starfa_vector_free(starfa_vector *v)
{
	if (!v)
		return;
	starpu_data_unregister(v->handle);
	starfa_host_free(v->data, (size_t)v->n * sizeof *v->data);
	free(v);
}

int64_t starfa_vector_size(const starfa_vector *v) { return v->n; }

static int vector_access(starfa_vector *v, float *buf, int write)
{
	int ret = starfa_acquire(v->handle, write ? STARPU_W : STARPU_R);
	if (ret != 0)
		return starfa_set_error(STARFA_ERUNTIME, "starpu_data_acquire failed on a vector");
	if (write)
		memcpy(v->data, buf, (size_t)v->n * sizeof *buf);
	else
		memcpy(buf, v->data, (size_t)v->n * sizeof *buf);
	starpu_data_release(v->handle);
	return 0;
}

int starfa_vector_read(starfa_vector *v, float *out) { return vector_access(v, out, 0); }
int starfa_vector_write(starfa_vector *v, const float *in) { return vector_access(v, (float *)in, 1); }
