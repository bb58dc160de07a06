/* How much of a sweep the CPU workers get, from the calibrated performance models.
 *
 * A sweep (ALS's solves of one side, an SDDMM over the matrix, an SGD epoch) is cut into bands; each
 * band's tasks run on one kind of worker. The GPUs take bands_per_gpu bands each; the CPU workers take
 * one band each (run as tiling->cpu_band_tasks tasks in turn, each predicted at its own cost), cut to a
 * share s of the sweep's cost, when that shortens the predicted sweep by at least MIN_GAIN and the
 * operation's overhead a core (tiling->cpu_band_overhead_us, BAND_OVERHEAD_US by default). The
 * prediction reads the operation's history of measured tasks (its perfmodel file, written by `starfa
 * calibrate` and by every run): the time of a task of cost C on one worker of a kind, interpolated
 * between the measured costs (log-log), linear in C beyond the largest and flat below the smallest
 * (per-task overhead); of the caller's variant alone when it names one (an SGD pass's rank: on a GPU
 * rank 32 costs twice rank 16 and takes about as long; a core's rank-16 rows are padded to 20 floats),
 * a core's curve falling back on every variant where its own has none; a split's GPU part from the
 * variant of the tasks a GPU runs there when the caller names one (SGD's span over a column block, 8%
 * faster an entry than a tile at rank 16). A core's task is predicted at
 * the slowest of the cores running one side by side (the mean, and the deviation times
 * starfa_plan_slowest_of), since a sweep waits for its last core and SGD's sub-strata for their slowest
 * one each. Before both kinds have samples the GPUs work alone: a core runs these kernels tens of times
 * slower than a GPU (bench/RESULTS.md), and learning that by sending it a band would make that band the
 * sweep's critical path. */
#include "codelets/plan.h"
#include "codelets/codelet.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The split must shorten the predicted sweep by 5%: at SGD's ranks 64 and 128 on the Netflix shape the
 * planner predicted 4.4-4.6% and the split ran 1.00x and 1.02x the GPU alone's epoch (bench/PLACEMENT.md);
 * at ranks 16 and 32 it predicted 5.2-6.9% and ran 1.10-1.20x faster. */
#define MIN_GAIN 0.05
/* and by this much per CPU band (unless the operation names its own): what a band on the cores costs
 * beyond its kernels, its tasks' scheduling among every worker and its factor block's trips to and from
 * the GPU. Measured on a 16-core H100 host: MovieLens ALS split 2 + 15 bands ran 0.02-0.05 s an
 * iteration against 0.002-0.006 s on the GPU alone, where the models predicted sub-millisecond sweeps
 * either way. */
#define BAND_OVERHEAD_US 300.0
/* The cores' share is the one whose band is predicted to end by this fraction of the GPUs' time, not at
 * the same time: past that point a sweep grows at the cores' rate, 7-14x the GPUs' for SGD, so a share
 * too large costs many times what one too small does. */
#define CPU_MARGIN 0.9

int starfa_plan_curve_add(struct starfa_plan_curve *c, double cost, double us, double sd_us)
{
	return starfa_plan_curve_add_n(c, cost, us, sd_us, 1);
}

int starfa_plan_curve_add_n(struct starfa_plan_curve *c, double cost, double us, double sd_us, double n)
{
	if (c->n == c->cap) {
		const int64_t cap = c->cap ? 2 * c->cap : 64;
		struct starfa_plan_point *pt = realloc(c->pt, (size_t)cap * sizeof *pt);
		if (!pt)
			return -1;
		c->pt = pt;
		c->cap = cap;
	}
	c->pt[c->n++] = (struct starfa_plan_point){cost, us, sd_us > 0 ? sd_us : 0, n >= 1 ? n : 1};
	return 0;
}

void starfa_plan_curve_free(struct starfa_plan_curve *c)
{
	free(c->pt);
	*c = (struct starfa_plan_curve){0, 0, NULL};
}

static int by_cost(const void *a, const void *b)
{
	const struct starfa_plan_point *x = a, *y = b;
	return (x->cost > y->cost) - (x->cost < y->cost);
}

/* Costs within this factor of a group's smallest make one point: their mean cost and time, and their
 * deviations pooled.
 * A job's runs leave hundreds of costs a few percent apart (each core's tiles, each run's spans), whose
 * times differ by up to 20% from one run to the next on the same host; interpolated point to point,
 * that noise set the curve's local slope, and in six SGD runs in turn the cores' share crept from 5.5%
 * to 7.8%, past where the split gains (bench/PLACEMENT.md). A mean is exact on a linear curve. */
#define NEAR_COST 1.1

void starfa_plan_curve_sort(struct starfa_plan_curve *c)
{
	if (c->n == 0)
		return;
	qsort(c->pt, (size_t)c->n, sizeof c->pt[0], by_cost);
	int64_t kept = 0;
	for (int64_t i = 1; i < c->n; i++) {
		if (c->pt[i].cost == c->pt[kept].cost) {
			if (c->pt[i].us < c->pt[kept].us)
				c->pt[kept] = c->pt[i];
		} else {
			c->pt[++kept] = c->pt[i];
		}
	}
	c->n = kept + 1;
	int64_t out = 0;
	for (int64_t i = 0; i < c->n;) {
		double n = 0, cost = 0, us = 0, dof = 0, var = 0, plain_var = 0;
		int64_t j = i;
		for (; j < c->n && c->pt[j].cost <= NEAR_COST * c->pt[i].cost; j++) {
			const struct starfa_plan_point *p = &c->pt[j];
			n += p->n;
			cost += p->cost; /* the points alike, their samples apart: a mean exact on a line */
			us += p->us;
			dof += p->n - 1;
			var += (p->n - 1) * p->sd_us * p->sd_us;
			plain_var += p->sd_us * p->sd_us;
		}
		/* the deviation pooled within the points, each variance weighted by its samples less one (a
		 * one-sample point, whose deviation StarPU leaves 0, weighs nothing; points all of one sample,
		 * given by hand, pool as a root mean square); the spread of the points' means is left out: it is
		 * run-to-run drift, which every core of one run shares, not the spread among one step's cores
		 * that the slowest-core factor scales */
		const double sd = dof > 0 ? sqrt(var / dof) : sqrt(plain_var / (double)(j - i));
		const double points = (double)(j - i);
		c->pt[out++] = (struct starfa_plan_point){cost / points, us / points, sd, n};
		i = j;
	}
	c->n = out;
}

double starfa_plan_predict(const struct starfa_plan_curve *c, double x, double *sd_us)
{
	if (sd_us)
		*sd_us = c->n == 0 ? NAN : 0;
	if (c->n == 0)
		return NAN;
	const struct starfa_plan_point *pt = c->pt, *last = &pt[c->n - 1];
	if (x <= pt[0].cost) {
		if (sd_us)
			*sd_us = pt[0].sd_us;
		return pt[0].us;
	}
	if (x >= last->cost) {
		if (sd_us)
			*sd_us = last->sd_us * x / last->cost;
		return last->us * x / last->cost;
	}
	int64_t lo = 0, hi = c->n - 1; /* pt[lo].cost < x <= pt[hi].cost */
	while (hi - lo > 1) {
		const int64_t mid = lo + (hi - lo) / 2;
		if (pt[mid].cost < x)
			lo = mid;
		else
			hi = mid;
	}
	const double t = (log(x) - log(pt[lo].cost)) / (log(pt[hi].cost) - log(pt[lo].cost));
	const double us = exp(log(pt[lo].us) + t * (log(pt[hi].us) - log(pt[lo].us)));
	if (sd_us) /* the deviation as a fraction of the mean, linear in log cost (it may be 0: one sample) */
		*sd_us = us * (pt[lo].sd_us / pt[lo].us + t * (pt[hi].sd_us / pt[hi].us - pt[lo].sd_us / pt[lo].us));
	return us;
}

double starfa_plan_slowest_of(int n)
{
	if (n <= 1)
		return 0;
	/* Phi^-1((n - 0.375) / (n + 0.25)), by bisection on the normal's distribution function */
	const double p = (n - 0.375) / (n + 0.25);
	double lo = 0, hi = 8;
	for (int it = 0; it < 60; it++) {
		const double mid = 0.5 * (lo + hi);
		if (0.5 * erfc(-mid / sqrt(2.0)) < p)
			lo = mid;
		else
			hi = mid;
	}
	return 0.5 * (lo + hi);
}

/* Appends the samples of one worker and implementation (of one variant when only is not NULL); -1 when
 * out of memory. */
static int add_history(struct starfa_plan_curve *c, const struct starpu_perfmodel_per_arch *pa, const uint32_t *only)
{
	for (struct starpu_perfmodel_history_list *l = pa ? pa->list : NULL; l; l = l->next) {
		const struct starpu_perfmodel_history_entry *e = l->entry;
		if (!e || e->nsample == 0 || !(e->mean > 0) || e->size == 0)
			continue;
		if (only && e->footprint != starfa_cost_footprint((uint64_t)e->size, *only))
			continue;
		if (starfa_plan_curve_add_n(c, (double)e->size, e->mean, e->deviation, (double)e->nsample))
			return -1;
	}
	return 0;
}

/* The operation's curves on a CPU core and on a GPU, from its perfmodel file (empty when none), of one
 * variant's samples when only is not NULL (a core's of every variant where that one has none: a
 * rank never run on the cores, or only in GPU-alone runs); -1 when out of memory. */
static int load_curves(const char *symbol, const uint32_t *only, struct starfa_plan_curve *cpu,
		       struct starfa_plan_curve *cuda)
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
	const struct starpu_perfmodel_per_arch *on_cpu = starpu_perfmodel_get_model_per_arch(&model, &arch, 0);
	int rc = add_history(cpu, on_cpu, only);
	if (!rc && only && cpu->n == 0)
		rc = add_history(cpu, on_cpu, NULL);
	for (int g = 0; g < (int)starpu_cuda_worker_get_count() && !rc; g++) {
		dev = (struct starpu_perfmodel_device){STARPU_CUDA_WORKER, g, 1};
		for (unsigned impl = 0; impl < STARPU_MAXIMPLEMENTATIONS && !rc; impl++)
			rc = add_history(cuda, starpu_perfmodel_get_model_per_arch(&model, &arch, impl), only);
	}
	starpu_perfmodel_unload_model(&model);
	starfa_plan_curve_sort(cpu);
	starfa_plan_curve_sort(cuda);
	return rc;
}

/* The curves of one side's plan: a core's, a GPU's alone, and a GPU's in a split. */
struct curves {
	const struct starfa_plan_curve *cpu, *cuda, *cuda_split;
};

/* The sweep in microseconds with share s on the cores: the GPUs run their bands one after the other
 * (in a split, each as gpu_split_tasks tasks of the split's curve), each core its one band as cpu_tasks
 * tasks one after the other, each at the slowest core's time (z, the slowest core's lag in deviations:
 * starfa_plan_slowest_of(ncpu)). */
static double sweep_us(const struct curves *k, double cost, double s, const struct starfa_plan_workers *w, double z,
		       double *gpu_us, double *cpu_us)
{
	const double tasks = (double)w->per_gpu * (s > 0 && w->gpu_split_tasks > 0 ? (double)w->gpu_split_tasks : 1.0);
	const struct starfa_plan_curve *gpu = s > 0 ? k->cuda_split : k->cuda;
	*gpu_us = s < 1 ? tasks * starfa_plan_predict(gpu, (1 - s) * cost / ((double)w->ngpu * tasks), NULL) : 0;
	*cpu_us = 0;
	if (s > 0) {
		double sd;
		const double mean = starfa_plan_predict(k->cpu, s * cost / (double)(w->ncpu * w->cpu_tasks), &sd);
		*cpu_us = (double)w->cpu_tasks * (mean + z * sd);
	}
	return fmax(*gpu_us, *cpu_us);
}

void starfa_plan_side(const struct starfa_plan_curve *cpu, const struct starfa_plan_curve *cuda,
		      const struct starfa_plan_curve *cuda_split, double cost, const struct starfa_plan_workers *w,
		      starfa_placement mode, double forced, starfa_split *out)
{
	const struct curves k = {cpu, cuda, cuda_split && cuda_split->n > 0 ? cuda_split : cuda};
	const int ngpu = w->ngpu, ncpu = w->ncpu;
	*out = (starfa_split){.cuda_bands = ngpu * w->per_gpu, .cuda_ms = NAN, .cpu_ms = NAN, .split_ms = NAN,
			      .best_share = NAN, .best_ms = NAN, .needed_ms = NAN};
	out->calibrated = cpu->n > 0 && cuda->n > 0;
	const double z = starfa_plan_slowest_of(ncpu);
	double g, c;
	if (cuda->n > 0 && ngpu > 0)
		out->cuda_ms = out->split_ms = sweep_us(&k, cost, 0, w, z, &g, &c) * 1e-3;
	if (cpu->n > 0 && ncpu > 0)
		out->cpu_ms = starfa_plan_predict(cpu, cost / ncpu, NULL) * 1e-3;
	if (mode == STARFA_PLACE_SPLIT && forced > 0 && ncpu > 0) { /* STARFA_CPU_SHARE: the share given */
		out->cpu_share = forced;
		out->cpu_bands = ncpu;
		out->split_ms = out->calibrated && ngpu > 0 ? sweep_us(&k, cost, forced, w, z, &g, &c) * 1e-3 : NAN;
		return;
	}
	if (mode != STARFA_PLACE_SPLIT || !out->calibrated || ncpu == 0 || ngpu == 0 || !(cost > 0))
		return;
	/* The cores' time grows with s and the GPUs' shrinks: bisect for where the cores' band ends at
	 * CPU_MARGIN of the GPUs'. */
	double lo = 0, hi = 1;
	for (int it = 0; it < 50; it++) {
		const double mid = 0.5 * (lo + hi);
		sweep_us(&k, cost, mid, w, z, &g, &c);
		if (c < CPU_MARGIN * g)
			lo = mid;
		else
			hi = mid;
	}
	const double best = sweep_us(&k, cost, lo, w, z, &g, &c) * 1e-3;
	out->best_share = lo;
	out->best_ms = best;
	const double overhead_us = w->band_overhead_us > 0 ? w->band_overhead_us : BAND_OVERHEAD_US;
	out->needed_ms = fmax(MIN_GAIN * out->cuda_ms, ncpu * overhead_us * 1e-3);
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
	 * large inputs (bench/PLACEMENT.md), so it is asked for, not assumed; but an operation whose planned
	 * split measured faster (SGD's nested grid) asks for it by default (split_by_default), unless
	 * STARFA_PLACEMENT names a placement. */
	starfa_placement mode;
	int rc = starfa_placement_mode(&mode);
	if (rc)
		return rc;
	if (mode == STARFA_PLACE_GPU && !starfa_placement_given() && tiling && tiling->split_by_default)
		mode = STARFA_PLACE_SPLIT;
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
	struct starfa_plan_curve cpu = {0, 0, NULL}, cuda = {0, 0, NULL};
	const uint32_t variant = tiling ? tiling->model_variant : 0;
	if (load_curves(symbol, tiling && tiling->by_variant ? &variant : NULL, &cpu, &cuda)) {
		starfa_plan_curve_free(&cpu);
		starfa_plan_curve_free(&cuda);
		return starfa_set_error(STARFA_ENOMEM, "out of memory reading the model of '%s'", operation);
	}
	/* a split's GPU tasks, where they are a variant of their own (their CPU samples are not read) */
	struct starfa_plan_curve no_cpu = {0, 0, NULL}, cuda_split = {0, 0, NULL};
	if (tiling && tiling->by_split_variant &&
	    load_curves(symbol, &tiling->split_model_variant, &no_cpu, &cuda_split)) {
		starfa_plan_curve_free(&cpu);
		starfa_plan_curve_free(&cuda);
		starfa_plan_curve_free(&no_cpu);
		starfa_plan_curve_free(&cuda_split);
		return starfa_set_error(STARFA_ENOMEM, "out of memory reading the model of '%s'", operation);
	}
	const struct starfa_plan_workers w = {ngpu,
					      (int)starpu_cpu_worker_get_count(),
					      bands_per_gpu,
					      tiling && tiling->cpu_band_tasks > 0 ? tiling->cpu_band_tasks : 1,
					      tiling ? tiling->cpu_band_overhead_us : 0,
					      tiling && tiling->cuda_split_tasks > 0 ? tiling->cuda_split_tasks : 1};
	starfa_plan_side(&cpu, &cuda, &cuda_split, row_sweep_cost, &w, mode, forced, &split[0]);
	starfa_plan_side(&cpu, &cuda, &cuda_split, col_sweep_cost, &w, mode, forced, &split[1]);
	starfa_plan_curve_free(&cpu);
	starfa_plan_curve_free(&cuda);
	starfa_plan_curve_free(&no_cpu);
	starfa_plan_curve_free(&cuda_split);
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

static double split_median(const starfa_split_guard *g)
{
	const int64_t n = g->nsplit < STARFA_SPLIT_GUARD_HISTORY ? g->nsplit : STARFA_SPLIT_GUARD_HISTORY;
	double v[STARFA_SPLIT_GUARD_HISTORY];
	for (int64_t i = 0; i < n; i++) { /* insertion sort of at most five */
		int64_t k = i;
		for (; k > 0 && v[k - 1] > g->split_s[i]; k--)
			v[k] = v[k - 1];
		v[k] = g->split_s[i];
	}
	return n == 0 ? NAN : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int starfa_split_guard_step(starfa_split_guard *g, double sweep_s, double gpus_alone_s, int moved)
{
	g->sweeps++;
	if (g->given_way)
		return 1;
	moved = moved || g->changed;
	g->changed = 0;
	if (moved || !isfinite(sweep_s))
		return g->on_gpus;
	if (g->on_gpus) { /* the trial's measured sweep: keep the faster */
		g->trial_s = sweep_s;
		g->losing = 0;
		if (!(split_median(g) <= STARFA_SPLIT_GUARD_MARGIN * sweep_s))
			return g->given_way = 1;
		g->on_gpus = 0;
		g->changed = 1;
		return 0;
	}
	g->split_s[g->nsplit++ % STARFA_SPLIT_GUARD_HISTORY] = sweep_s;
	const double alone = g->trial_s > 0 ? g->trial_s : gpus_alone_s;
	if (!isfinite(alone))
		return 0;
	if (sweep_s > STARFA_SPLIT_GUARD_MARGIN * alone) {
		if (++g->losing >= STARFA_SPLIT_GUARD_LOSSES) {
			g->on_gpus = g->changed = 1;
			g->given_way = g->trial_s > 0; /* measured already: no second trial */
			return 1;
		}
	} else if (g->losing > 0) {
		g->losing--;
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
