/* How much of a sweep the CPU workers get, from the calibrated performance models.
 *
 * A sweep (ALS's solves of one side, an SDDMM over the matrix, an SGD epoch) is cut into bands; each
 * band's tasks run on one kind of worker. The GPUs take bands_per_gpu bands each; the CPU workers take
 * one band each (run as tiling->cpu_band_tasks tasks in turn, each predicted at its own cost), cut to a
 * share s of the sweep's cost, when that shortens the predicted sweep by at least MIN_GAIN and
 * BAND_OVERHEAD_US a core. The prediction reads the operation's history of measured tasks (its perfmodel file,
 * written by `starfa calibrate` and by every run): the time of a task of cost C on one worker of a
 * kind, interpolated between the measured costs (log-log), linear in C beyond the largest and flat
 * below the smallest (per-task overhead); on a GPU, of the caller's variant alone when it names one (an SGD
 * pass's rank: there rank 32 costs twice rank 16 and takes about as long). Before both kinds have samples the GPUs work alone: a core
 * runs these kernels tens of times slower than a GPU (bench/RESULTS.md), and learning that by sending
 * it a band would make that band the sweep's critical path. */
#include "codelets/codelet.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIN_GAIN 0.05 /* the split must shorten the predicted sweep by 5% */
/* and by this much per CPU band: what a band on the cores costs beyond its kernels, its tasks' scheduling
 * among every worker and its factor block's trips to and from the GPU. Measured on a 16-core H100 host:
 * MovieLens ALS split 2 + 15 bands ran 0.02-0.05 s an iteration against 0.002-0.006 s on the GPU alone,
 * where the models predicted sub-millisecond sweeps either way. */
#define BAND_OVERHEAD_US 300.0

/* Measured (cost, microseconds) points of one worker kind, sorted by cost, one per cost (the fastest
 * sample there). Every run adds its tiles' costs to a model, so the points are not counted. */
struct curve {
	int64_t n, cap;
	double (*pt)[2]; /* cost, us */
};

static int by_cost(const void *a, const void *b)
{
	const double *x = a, *y = b;
	return (x[0] > y[0]) - (x[0] < y[0]);
}

/* Which samples a curve takes: every variant (the fastest at each cost), or one. */
struct variant_filter {
	int on;
	uint32_t variant;
};

/* Appends the samples of one worker and implementation; -1 when out of memory. */
static int add_history(struct curve *c, const struct starpu_perfmodel_per_arch *pa, struct variant_filter f)
{
	for (struct starpu_perfmodel_history_list *l = pa ? pa->list : NULL; l; l = l->next) {
		const struct starpu_perfmodel_history_entry *e = l->entry;
		if (!e || e->nsample == 0 || !(e->mean > 0) || e->size == 0)
			continue;
		if (f.on && e->footprint != starfa_cost_footprint((uint64_t)e->size, f.variant))
			continue;
		if (c->n == c->cap) {
			const int64_t cap = c->cap ? 2 * c->cap : 64;
			double(*pt)[2] = realloc(c->pt, (size_t)cap * sizeof *pt);
			if (!pt)
				return -1;
			c->pt = pt;
			c->cap = cap;
		}
		c->pt[c->n][0] = (double)e->size;
		c->pt[c->n++][1] = e->mean;
	}
	return 0;
}

/* Sorts by cost and keeps the fastest sample of each cost (other variants, other GPUs). */
static void sort_curve(struct curve *c)
{
	if (c->n == 0)
		return;
	qsort(c->pt, (size_t)c->n, sizeof c->pt[0], by_cost);
	int64_t kept = 0;
	for (int64_t i = 1; i < c->n; i++) {
		if (c->pt[i][0] == c->pt[kept][0]) {
			if (c->pt[i][1] < c->pt[kept][1])
				c->pt[kept][1] = c->pt[i][1];
		} else {
			c->pt[++kept][0] = c->pt[i][0];
			c->pt[kept][1] = c->pt[i][1];
		}
	}
	c->n = kept + 1;
}

/* Predicted microseconds of one task of cost x on the curve's kind (NAN without points). */
static double predict(const struct curve *c, double x)
{
	if (c->n == 0)
		return NAN;
	const double(*pt)[2] = (const double(*)[2])c->pt;
	if (x <= pt[0][0])
		return pt[0][1];
	if (x >= pt[c->n - 1][0])
		return pt[c->n - 1][1] * x / pt[c->n - 1][0];
	int64_t lo = 0, hi = c->n - 1; /* pt[lo] < x <= pt[hi] */
	while (hi - lo > 1) {
		const int64_t mid = lo + (hi - lo) / 2;
		if (pt[mid][0] < x)
			lo = mid;
		else
			hi = mid;
	}
	double t = (log(x) - log(pt[lo][0])) / (log(pt[hi][0]) - log(pt[lo][0]));
	return exp(log(pt[lo][1]) + t * (log(pt[hi][1]) - log(pt[lo][1])));
}

/* The operation's curves on a CPU core and on a GPU, from its perfmodel file (empty when none), the GPU's
 * of one variant's samples when the filter is on; -1 when out of memory. */
static int load_curves(const char *symbol, struct variant_filter f, struct curve *cpu, struct curve *cuda)
{
	char path[1024];
	starpu_perfmodel_get_model_path(symbol, path, sizeof path);
	if (access(path, R_OK) != 0)
		return 0;
	struct starpu_perfmodel model;
	memset(&model, 0, sizeof model);
	if (starpu_perfmodel_load_symbol(symbol, &model) != 0)
		return 0;
	struct starpu_perfmodel_device dev = {STARPU_CPU_WORKER, 0, 1};
	struct starpu_perfmodel_arch arch = {1, &dev};
	/* a core's time follows the cost: every variant's samples (else a rank never calibrated would have no
	 * CPU curve, and a GPU-alone run records none) */
	const struct variant_filter every = {0, 0};
	int rc = add_history(cpu, starpu_perfmodel_get_model_per_arch(&model, &arch, 0), every);
	for (int g = 0; g < (int)starpu_cuda_worker_get_count() && !rc; g++) {
		dev = (struct starpu_perfmodel_device){STARPU_CUDA_WORKER, g, 1};
		for (unsigned impl = 0; impl < STARPU_MAXIMPLEMENTATIONS && !rc; impl++)
			rc = add_history(cuda, starpu_perfmodel_get_model_per_arch(&model, &arch, impl), f);
	}
	starpu_perfmodel_unload_model(&model);
	sort_curve(cpu);
	sort_curve(cuda);
	return rc;
}

/* The sweep in microseconds with share s on the cores: the GPUs run their bands one after the other,
 * each core its one band as cpu_tasks tasks one after the other. */
static double sweep_us(const struct curve *cpu, const struct curve *cuda, double cost, double s, int ngpu, int ncpu,
		       int64_t per_gpu, int64_t cpu_tasks, double *gpu_us, double *cpu_us)
{
	*gpu_us = s < 1 ? (double)per_gpu * predict(cuda, (1 - s) * cost / (double)(ngpu * per_gpu)) : 0;
	*cpu_us = s > 0 ? (double)cpu_tasks * predict(cpu, s * cost / (double)(ncpu * cpu_tasks)) : 0;
	return fmax(*gpu_us, *cpu_us);
}

/* The split of one sweep: computed under STARFA_PLACE_SPLIT, the GPUs alone otherwise (the prediction is
 * still made). */
static void plan_side(const struct curve *cpu, const struct curve *cuda, double cost, int64_t per_gpu, int64_t cpu_tasks,
		      starfa_placement mode, double forced, starfa_split *out)
{
	int ngpu = starpu_cuda_worker_get_count(), ncpu = starpu_cpu_worker_get_count();
	*out = (starfa_split){.cuda_bands = ngpu * per_gpu, .cuda_ms = NAN, .cpu_ms = NAN, .split_ms = NAN,
			      .best_share = NAN, .best_ms = NAN, .needed_ms = NAN};
	out->calibrated = cpu->n > 0 && cuda->n > 0;
	double g, c;
	if (cuda->n > 0)
		out->cuda_ms = out->split_ms = sweep_us(cpu, cuda, cost, 0, ngpu, ncpu, per_gpu, cpu_tasks, &g, &c) * 1e-3;
	if (cpu->n > 0 && ncpu > 0)
		out->cpu_ms = predict(cpu, cost / ncpu) * 1e-3;
	if (mode == STARFA_PLACE_SPLIT && forced > 0 && ncpu > 0) { /* STARFA_CPU_SHARE: the share given */
		out->cpu_share = forced;
		out->cpu_bands = ncpu;
		out->split_ms = out->calibrated ? sweep_us(cpu, cuda, cost, forced, ngpu, ncpu, per_gpu, cpu_tasks, &g, &c) * 1e-3 : NAN;
		return;
	}
	if (mode != STARFA_PLACE_SPLIT || !out->calibrated || ncpu == 0 || !(cost > 0))
		return;
	/* The cores' time grows with s and the GPUs' shrinks: bisect for where they meet. */
	double lo = 0, hi = 1;
	for (int it = 0; it < 50; it++) {
		double mid = 0.5 * (lo + hi);
		sweep_us(cpu, cuda, cost, mid, ngpu, ncpu, per_gpu, cpu_tasks, &g, &c);
		if (c < g)
			lo = mid;
		else
			hi = mid;
	}
	double best = sweep_us(cpu, cuda, cost, lo, ngpu, ncpu, per_gpu, cpu_tasks, &g, &c) * 1e-3;
	out->best_share = lo;
	out->best_ms = best;
	out->needed_ms = fmax(MIN_GAIN * out->cuda_ms, ncpu * BAND_OVERHEAD_US * 1e-3);
	if (out->cuda_ms - best >= out->needed_ms) {
		out->cpu_share = lo;
		out->cpu_bands = ncpu;
		out->split_ms = best;
	}
}

int starfa_plan_tiling(const char *operation, double row_sweep_cost, double col_sweep_cost, int64_t bands_per_gpu,
		       starfa_tiling_options *tiling, starfa_split split[2])
{
	if (!starfa_runtime_started())
		return starfa_set_error(STARFA_EINVAL, "starfa_plan_tiling: call starfa_init first");
	if (!operation || bands_per_gpu < 1 || !(row_sweep_cost >= 0) || !(col_sweep_cost >= 0))
		return starfa_set_error(STARFA_EINVAL, "starfa_plan_tiling: need an operation, costs >= 0 and at least "
						       "one band per GPU");
	char symbol[96];
	snprintf(symbol, sizeof symbol, "starfa_%s", operation);
	int known = 0;
	for (const char *const *s = starfa_perfmodel_symbols(); *s && !known; s++)
		known = strcmp(*s, symbol) == 0;
	if (!known)
		return starfa_set_error(STARFA_EINVAL, "starfa_plan_tiling: no operation '%s'", operation);
	/* The default is the GPUs alone: the split measured slower than the GPU alone where it was tried on
	 * large inputs (bench/PLACEMENT.md), so it is asked for, not assumed. */
	starfa_placement mode;
	int rc = starfa_placement_mode(&mode);
	if (rc)
		return rc;
	/* STARFA_CPU_SHARE (under split): the cores' share of each sweep by hand, whatever the models say. */
	double forced = 0;
	const char *share = getenv("STARFA_CPU_SHARE");
	if (share && *share) {
		char *end = NULL;
		forced = strtod(share, &end);
		if (*end || !(forced > 0 && forced < 1))
			return starfa_set_error(STARFA_EINVAL, "STARFA_CPU_SHARE must be a share of each sweep in (0, 1), not '%s'",
						share);
	}
	starfa_split local[2];
	if (!split)
		split = local;
	memset(split, 0, 2 * sizeof *split);
	int ngpu = starpu_cuda_worker_get_count();
	if (ngpu == 0 || mode == STARFA_PLACE_ANY) {
		/* No GPU, or StarPU places everything: the caller's own band count. */
		split[0].cuda_ms = split[0].cpu_ms = split[0].split_ms = NAN;
		split[0].best_share = split[0].best_ms = split[0].needed_ms = NAN;
		split[1] = split[0];
		if (tiling)
			tiling->placed = 0;
		return 0;
	}
	struct curve cpu = {0, 0, NULL}, cuda = {0, 0, NULL};
	const struct variant_filter f = {tiling && tiling->by_variant, tiling ? tiling->model_variant : 0};
	if (load_curves(symbol, f, &cpu, &cuda)) {
		free(cpu.pt);
		free(cuda.pt);
		return starfa_set_error(STARFA_ENOMEM, "out of memory reading the model of '%s'", operation);
	}
	const int64_t cpu_tasks = tiling && tiling->cpu_band_tasks > 0 ? tiling->cpu_band_tasks : 1;
	plan_side(&cpu, &cuda, row_sweep_cost, bands_per_gpu, cpu_tasks, mode, forced, &split[0]);
	plan_side(&cpu, &cuda, col_sweep_cost, bands_per_gpu, cpu_tasks, mode, forced, &split[1]);
	free(cpu.pt);
	free(cuda.pt);
	if (tiling) {
		int64_t cpu_bands = split[0].cpu_bands > split[1].cpu_bands ? split[0].cpu_bands : split[1].cpu_bands;
		tiling->placed = 1;
		tiling->cpu_bands = cpu_bands;
		tiling->row_tiles = tiling->col_tiles = ngpu * bands_per_gpu + cpu_bands;
		tiling->row_cpu_share = split[0].cpu_share;
		tiling->col_cpu_share = split[1].cpu_share;
	}
	return 0;
}

void starfa_split_describe(const starfa_split *s, FILE *out)
{
	if (s->cuda_bands == 0 && s->cpu_bands > 0) {
		fprintf(out, "placement: the cores alone, %lld band%s\n", (long long)s->cpu_bands, s->cpu_bands == 1 ? "" : "s");
		return;
	}
	if (s->cuda_bands == 0) {
		fprintf(out, "placement: StarPU places every task\n");
		return;
	}
	if (s->cpu_bands == 0) {
		fprintf(out, "placement: the GPUs alone, %lld band%s (%s", (long long)s->cuda_bands, s->cuda_bands == 1 ? "" : "s",
			s->calibrated ? "calibrated" : "not calibrated on both kinds");
		if (isfinite(s->cuda_ms) && isfinite(s->cpu_ms))
			fprintf(out, "; predicted sweep %.3g ms on the GPUs, %.3g ms on the cores", s->cuda_ms, s->cpu_ms);
		if (isfinite(s->best_ms))
			fprintf(out, "; the best split, %.1f%% on the cores, %.3g ms: a gain under the %.3g ms it must show",
				100 * s->best_share, s->best_ms, s->needed_ms);
		fprintf(out, ")\n");
		return;
	}
	fprintf(out, "placement: %lld GPU bands + %lld CPU bands with %.1f%% of the cost", (long long)s->cuda_bands,
		(long long)s->cpu_bands, 100 * s->cpu_share);
	if (isfinite(s->split_ms) && isfinite(s->cuda_ms))
		fprintf(out, " (predicted sweep %.3g ms, %.3g ms on the GPUs alone)", s->split_ms, s->cuda_ms);
	else
		fprintf(out, " (not calibrated on both kinds: no prediction)");
	fprintf(out, "\n");
}
