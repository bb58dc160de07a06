/* Helpers shared by the codelets: the registry, the insert wrapper, errors. */
#include "codelets/codelet.h"
#include "codelets/zero.h"
#include "runtime/sync.h"

#include <errno.h>
#include <pthread.h>
#include <starpu_profiling.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t starfa_cost_footprint(uint64_t cost, uint32_t variant)
{
	return starpu_hash_crc32c_be(variant, starpu_hash_crc32c_be_n(&cost, sizeof cost, 0));
}

/* Filled by constructors before main(), read-only afterwards. */
static struct starfa_codelet_entry *registry;

#define MAX_CODELETS 64

void starfa_codelet_register(struct starfa_codelet_entry *entry)
{
	/* Kept in name order, so that the symbol list does not depend on the link order. */
	struct starfa_codelet_entry **at = &registry;
	while (*at && strcmp((*at)->model->symbol, entry->model->symbol) < 0)
		at = &(*at)->next;
	entry->next = *at;
	*at = entry;
}

const char *const *starfa_perfmodel_symbols(void)
{
	static const char *symbols[MAX_CODELETS + 1];
	int n = 0;
	for (const struct starfa_codelet_entry *e = registry; e && n < MAX_CODELETS; e = e->next)
		symbols[n++] = e->model->symbol;
	symbols[n] = NULL;
	return symbols;
}

int starfa_perfmodel_dir(char *buf, size_t size)
{
	if (!buf || size == 0)
		return starfa_set_error(STARFA_EINVAL, "starfa_perfmodel_dir: no buffer");
	if (!starfa_runtime_started())
		return starfa_set_error(STARFA_EINVAL, "starfa_perfmodel_dir: the runtime is not started (starfa_init)");
	/* a model's file is DIR/SYMBOL.HOST; StarPU's DIR may hold "//" where its parts meet, and ends in one */
	char path[4096];
	starpu_perfmodel_get_model_path(registry ? registry->model->symbol : "starfa", path, sizeof path);
	char *end = strrchr(path, '/');
	if (!end)
		return starfa_set_error(STARFA_ERUNTIME, "StarPU gave a model path without a folder: '%s'", path);
	*end = '\0';
	size_t n = 0;
	for (const char *p = path; *p; p++)
		if (!(p[0] == '/' && p[1] == '/')) {
			if (n + 1 >= size)
				return starfa_set_error(STARFA_EINVAL, "starfa_perfmodel_dir: %zu bytes do not hold '%s'", size, path);
			buf[n++] = *p;
		}
	while (n > 1 && buf[n - 1] == '/')
		n--;
	buf[n] = '\0';
	return 0;
}

/* ------------------------------------------------------------------ the task log */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_on;                       /* read without the lock at insert: set between graphs */
static starfa_task_record *log_records;
static int64_t log_n, log_cap, log_lost; /* log_lost: records that found no memory */

/* A task's callback (StarPU's profiling is on, see runtime/context.c): its times and worker. */
static void log_task(void *arg)
{
	starfa_task_record *r = arg;
	struct starpu_task *task = starpu_task_get_current();
	struct starpu_profiling_task_info *info = task ? task->profiling_info : NULL;
	if (info) {
		r->worker = info->workerid + 1;
		r->start_us = starpu_timing_timespec_to_us(&info->start_time);
		r->end_us = starpu_timing_timespec_to_us(&info->end_time);
	}
	pthread_mutex_lock(&log_lock);
	if (log_n == log_cap) {
		int64_t cap = log_cap ? 2 * log_cap : 1024;
		starfa_task_record *grown = realloc(log_records, (size_t)cap * sizeof *grown);
		if (grown) {
			log_records = grown;
			log_cap = cap;
		}
	}
	if (log_n < log_cap)
		log_records[log_n++] = *r;
	else
		log_lost++;
	pthread_mutex_unlock(&log_lock);
	free(r);
}

/* Every task's callback: its record when the log is on, then the count starfa_wait polls. */
static void task_done(void *arg)
{
	if (arg)
		log_task(arg);
	starfa_task_finished();
}

int starfa_task_log_begin(void)
{
	int rc = starfa_wait(); /* the tasks already in flight are not part of it */
	pthread_mutex_lock(&log_lock);
	log_n = log_lost = 0;
	log_on = 1;
	pthread_mutex_unlock(&log_lock);
	return rc;
}

int starfa_task_log_end(starfa_task_record **records, int64_t *n)
{
	*records = NULL;
	*n = 0;
	int rc = starfa_wait();
	pthread_mutex_lock(&log_lock);
	log_on = 0;
	int64_t lost = log_lost;
	if (!rc && !lost && log_n > 0) {
		*records = log_records;
		*n = log_n;
		log_records = NULL;
		log_cap = 0;
	}
	log_n = 0;
	pthread_mutex_unlock(&log_lock);
	if (rc)
		return rc;
	if (lost)
		return starfa_set_error(STARFA_ENOMEM, "the task log ran out of memory (%lld records lost)", (long long)lost);
	return 0;
}

int starfa_task_log_write(FILE *f, const starfa_task_record *r, int64_t n)
{
	starfa_profile names = {0};
	starfa_profile_get(&names); /* the names only; without them a worker is its number */
	double t0 = n > 0 ? r[0].start_us : 0;
	for (int64_t i = 1; i < n; i++)
		t0 = r[i].start_us < t0 ? r[i].start_us : t0;
	fprintf(f, "codelet,worker,worker_name,start_s,end_s,reads,writes,cost\n");
	for (int64_t i = 0; i < n; i++) {
		const int reads = r[i].nreads, writes = r[i].nwrites;
		const int w = r[i].worker - 1;
		fprintf(f, "%s,%d,\"%s\",%.6f,%.6f,%d,%d,%llu\n", r[i].codelet, w,
			w >= 0 && w < names.nworkers ? names.workers[w].name : "?", (r[i].start_us - t0) * 1e-6,
			(r[i].end_us - t0) * 1e-6, reads, writes, (unsigned long long)r[i].cost);
	}
	starfa_profile_clear(&names);
	if (ferror(f))
		return starfa_set_error(STARFA_EIO, "cannot write the task log: %s", strerror(errno));
	return 0;
}

/* A task of cl with these arguments as a codelet's functions see it before submission, for asking them
 * (can_execute, the perfmodel's size); no buffers. */
static void init_probe(struct starpu_task *probe, struct starpu_codelet *cl, void *args, size_t args_size)
{
	starpu_task_init(probe);
	probe->cl = cl;
	probe->cl_arg = args;
	probe->cl_arg_size = args_size;
}

/* The task's cost as its perfmodel counts it (0 without one) in *cost; -1 when out of memory. */
static int task_cost(struct starpu_codelet *cl, void *args, size_t args_size, int nbuffers,
		     const struct starpu_data_descr *buffers, uint64_t *cost)
{
	*cost = 0;
	if (!cl->model || !cl->model->size_base)
		return 0;
	struct starpu_task probe;
	init_probe(&probe, cl, args, args_size);
	probe.nbuffers = nbuffers;
	starpu_data_handle_t *h = probe.handles; /* as StarPU lays them out (STARPU_TASK_GET_HANDLE) */
	if (nbuffers > STARPU_NMAXBUFS && !(h = probe.dyn_handles = malloc((size_t)nbuffers * sizeof *h)))
		return -1;
	for (int b = 0; b < nbuffers; b++)
		h[b] = buffers[b].handle;
	*cost = (uint64_t)cl->model->size_base(&probe, 0);
	free(probe.dyn_handles);
	return 0;
}

/* A record to fill when the task has run, or NULL when the log is off. Its cost is taken here, from a
 * probe of the task (its arguments and handles, which the caller holds): by the time the callback runs,
 * StarPU has released the task's data, which another thread may then unregister. */
static starfa_task_record *log_record(struct starpu_codelet *cl, void *args, size_t args_size, int nbuffers,
				      const struct starpu_data_descr *buffers)
{
	if (!__atomic_load_n(&log_on, __ATOMIC_RELAXED))
		return NULL;
	starfa_task_record *r = calloc(1, sizeof *r);
	if (!r || task_cost(cl, args, args_size, nbuffers, buffers, &r->cost)) {
		free(r);
		return NULL;
	}
	r->codelet = cl->name + 7; /* without "starfa_" */
	r->nbuffers = nbuffers;
	for (int b = 0; b < nbuffers; b++) {
		const int writes = (buffers[b].mode & (STARPU_W | STARPU_REDUX)) != 0;
		writes ? r->nwrites++ : r->nreads++;
		if (b < STARFA_TASK_LOG_BUFFERS) {
			r->data[b] = buffers[b].handle;
			r->writes[b] = writes;
		}
	}
	return r;
}

/* ------------------------------------------------------------------ inserting tasks */

/* Which of the kinds in mask can run a task of cl with these arguments (the codelet's can_execute,
 * asked for one worker of each kind: starfa's read the arguments only); mask itself when neither can,
 * so that the submission fails as it would have. */
static unsigned runnable_kinds(struct starpu_codelet *cl, void *args, size_t args_size, unsigned mask)
{
	struct starpu_task probe;
	init_probe(&probe, cl, args, args_size);
	static const struct {
		unsigned kind;
		enum starpu_worker_archtype type;
	} kinds[] = {{STARPU_CPU, STARPU_CPU_WORKER}, {STARPU_CUDA, STARPU_CUDA_WORKER}};
	unsigned ok = 0;
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
		const int id = starpu_worker_get_by_type(kinds[i].type, 0); /* the kind's first worker, or -1 */
		if ((mask & kinds[i].kind) && id >= 0 && cl->can_execute((unsigned)id, &probe, 0))
			ok |= kinds[i].kind;
	}
	return ok ? ok : mask;
}

int starfa_submit(struct starpu_codelet *cl, const void *args, size_t args_size, double flops,
		  const starfa_task_attr *attr, int nbuffers, const struct starpu_data_descr *buffers)
{
	void *copy = NULL;
	if (args_size > 0) {
		copy = malloc(args_size); /* StarPU frees it (STARPU_CL_ARGS) */
		if (!copy)
			return starfa_set_error(STARFA_ENOMEM, "out of memory inserting a %s task", cl->name);
		memcpy(copy, args, args_size);
	}
	int priority = attr ? attr->priority : 0;
	if (attr && attr->worker > (int)starpu_worker_get_count()) {
		free(copy);
		return starfa_set_error(STARFA_EINVAL, "%s: worker %d asked for, but there are %u workers", cl->name,
					attr->worker, starpu_worker_get_count());
	}
	/* -1: the codelet's own set of worker kinds. A placement only narrows what the codelet can run on:
	 * a kind it has no implementation for is dropped, and an empty result places nothing. */
	long long where = -1;
	const unsigned can = (cl->cpu_funcs[0] ? STARPU_CPU : 0) | (cl->cuda_funcs[0] ? STARPU_CUDA : 0);
	if (attr && attr->where) {
		unsigned want = (attr->where & STARFA_WHERE_CPU ? STARPU_CPU : 0) |
				(attr->where & STARFA_WHERE_CUDA ? STARPU_CUDA : 0);
		if ((want & can) != 0)
			where = want & can;
	}
	/* A placement on kinds this runtime has no worker of is refused here: StarPU does not refuse every
	 * such task at submission (one with CUDA devices present but no CUDA worker waited forever). */
	if (where >= 0 && !(attr && attr->worker > 0) && !((where & STARPU_CPU) && starpu_cpu_worker_get_count() > 0) &&
	    !((where & STARPU_CUDA) && starpu_cuda_worker_get_count() > 0)) {
		free(copy);
		return starfa_set_error(STARFA_ENODEV, "no worker can run codelet %s on the workers it was placed on (%s)",
					cl->name, where & STARPU_CUDA ? (where & STARPU_CPU ? "CPU or CUDA" : "CUDA") : "CPU");
	}
	if (starfa_sched_buckets() && !(attr && attr->worker > 0)) {
		/* heteroprio: the bucket of the priority and of the kinds that can run this very task (a
		 * kind that scans a bucket takes every task in it); a task for one worker skips the buckets */
		unsigned mask = where >= 0 ? (unsigned)where : can;
		if ((mask & STARPU_CPU) && (mask & STARPU_CUDA) && cl->can_execute) {
			mask = runnable_kinds(cl, copy, args_size, mask);
			where = mask;
		}
		priority = starfa_sched_priority(priority, mask);
	}
	starfa_task_record *record = log_record(cl, copy, args_size, nbuffers, buffers);
	starfa_task_inserted();
	int ret;
	if (attr && attr->worker > 0)
		ret = starpu_task_insert(cl, STARPU_DATA_MODE_ARRAY, buffers, nbuffers, STARPU_CL_ARGS, copy, args_size,
					 STARPU_FLOPS, flops, STARPU_PRIORITY, priority, STARPU_EXECUTE_ON_WORKER,
					 attr->worker - 1, STARPU_CALLBACK_WITH_ARG_NFREE, task_done, record, STARPU_NAME,
					 cl->name + 7 /* without "starfa_" */, 0);
	else
		ret = starpu_task_insert(cl, STARPU_DATA_MODE_ARRAY, buffers, nbuffers, STARPU_CL_ARGS, copy, args_size,
					 STARPU_FLOPS, flops, STARPU_PRIORITY, priority, STARPU_EXECUTE_WHERE,
					 (unsigned long long)where, STARPU_CALLBACK_WITH_ARG_NFREE, task_done, record,
					 STARPU_NAME, cl->name + 7, 0);
	if (ret == -ENODEV) { /* StarPU destroyed the task: its callback will not run */
		free(record);
		starfa_task_finished();
		return starfa_set_error(STARFA_ENODEV, "no worker can run codelet %s%s", cl->name,
					where >= 0 ? " on the workers it was placed on" : "");
	}
	/* Any other error may come after the task was queued, so its callback still owns the record. */
	if (ret != 0)
		return starfa_set_error(STARFA_ERUNTIME, "starpu_task_insert(%s) failed: %s", cl->name, strerror(-ret));
	return 0;
}

const starfa_task_attr *starfa_placed(starfa_task_attr *buf, const starfa_task_attr *attr, uint32_t where)
{
	if (where == 0 || (attr && (attr->where != 0 || attr->worker > 0)))
		return attr;
	*buf = attr ? *attr : (starfa_task_attr){0};
	buf->where = (where & STARPU_CPU ? STARFA_WHERE_CPU : 0) | (where & STARPU_CUDA ? STARFA_WHERE_CUDA : 0);
	return buf;
}

int starfa_band_task_begin(const char *what, const starfa_tiled *S, starfa_side side, int64_t band,
			   int64_t *ntiles, int64_t *nnz, struct starpu_data_descr **buffers,
			   size_t band_buffers, size_t tile_buffers)
{
	const struct starfa_grid *grid = starfa_side_grid(S, side);
	if (band < 0 || band >= grid->nr)
		return starfa_index_error(what, "band", band, -1, grid->nr, -1);
	*ntiles = *nnz = 0;
	for (int64_t j = 0; j < grid->nc; j++) {
		const int64_t tile_nnz = starfa_grid_tile(grid, band, j)->nnz;
		*ntiles += tile_nnz > 0;
		*nnz += tile_nnz;
	}
	*buffers = starfa_malloc(band_buffers + (size_t)*ntiles * tile_buffers, sizeof **buffers);
	return *buffers ? 0 : STARFA_ENOMEM;
}

int starfa_band_task_tile_pairs(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *B,
				struct starpu_data_descr *buffers, int n)
{
	const struct starfa_grid *grid = starfa_side_grid(S, side);
	for (int64_t j = 0; j < grid->nc; j++) {
		const struct starfa_tile *tile = starfa_grid_tile(grid, band, j);
		if (tile->nnz == 0)
			continue;
		buffers[n++] = (struct starpu_data_descr){tile->handle, STARPU_R};
		buffers[n++] = (struct starpu_data_descr){B->blocks[j], STARPU_R};
	}
	return n;
}

int starfa_band_task_submit(struct starpu_codelet *cl, const void *args, size_t args_size, double flops,
			    const starfa_tiled *S, starfa_side side, int64_t band, const starfa_task_attr *attr,
			    int nbuffers, struct starpu_data_descr *buffers)
{
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_band_where(S, side, band));
	int rc = starfa_submit(cl, args, args_size, flops, attr, nbuffers, buffers);
	free(buffers);
	return rc;
}

int starfa_band_task_zero(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_task_attr *attr,
			  starpu_data_handle_t block, int kind, struct starpu_data_descr *buffers)
{
	free(buffers);
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_band_where(S, side, band));
	return starfa_submit_zero(block, kind, attr);
}

uint64_t starfa_band_task_nnz(const struct starpu_task *task, unsigned first, unsigned stride, int ntiles)
{
	uint64_t nnz = 0;
	for (int t = 0; t < ntiles; t++)
		nnz += (uint64_t)starpu_csr_get_nnz(STARPU_TASK_GET_HANDLE(task, first + stride * (unsigned)t));
	return nnz;
}

#ifdef STARFA_USE_CUDA
void starfa_cuda_fail(const char *codelet, cudaError_t err)
{
	fprintf(stderr, "starfa: CUDA kernel of codelet %s failed on worker %d: %s (%s)\n", codelet,
		starpu_worker_get_id(), cudaGetErrorString(err), cudaGetErrorName(err));
	abort();
}
#endif

void starfa_cpu_fail(const char *codelet)
{
	fprintf(stderr, "starfa: codelet %s: out of memory for scratch on worker %d\n", codelet, starpu_worker_get_id());
	abort();
}

int starfa_index_error(const char *what, const char *kind, int64_t i, int64_t j, int64_t ni, int64_t nj)
{
	if (j < 0 && nj < 0)
		return starfa_set_error(STARFA_EINVAL, "%s: %s %lld outside 0..%lld", what, kind, (long long)i,
					(long long)ni - 1);
	return starfa_set_error(STARFA_EINVAL, "%s: %s (%lld, %lld) outside the %lldx%lld grid", what, kind, (long long)i,
				(long long)j, (long long)ni, (long long)nj);
}

int starfa_check_slot(const char *what, const starfa_sums *sums, int64_t slot)
{
	if (!sums)
		return starfa_set_error(STARFA_EINVAL, "%s: missing sums", what);
	if (slot < 0 || slot >= sums->n)
		return starfa_index_error(what, "slot", slot, -1, sums->n, -1);
	return 0;
}
