/* The planner's arithmetic (codelets/plan.c), apart from StarPU's model files so that tests can feed it
 * curves of their own: a worker kind's measured task times by cost, the sweep they predict, and the
 * split of one sweep between the kinds. */
#ifndef STARFA_CODELETS_PLAN_H
#define STARFA_CODELETS_PLAN_H

#include "runtime/internal.h"
#include "starfa.h"

#include <stdint.h>

/* One measured cost: the task's mean time and the deviation of its samples, in microseconds. */
struct starfa_plan_point {
	double cost, us, sd_us;
	double n; /* the samples behind it (1 for a point given by hand) */
};

/* The measured points of one worker kind, sorted by cost, one a cost (starfa_plan_curve_sort). */
struct starfa_plan_curve {
	int64_t n, cap;
	struct starfa_plan_point *pt;
};

/* Appends a point (us > 0: the log-log interpolation takes logarithms); -1 when out of memory. */
int starfa_plan_curve_add(struct starfa_plan_curve *c, double cost, double us, double sd_us);
/* The same for a point of n samples (a perfmodel history entry's), which weigh it in a merge. */
int starfa_plan_curve_add_n(struct starfa_plan_curve *c, double cost, double us, double sd_us, double n);
/* Sorts by cost, keeps the fastest point of each cost (other variants, other GPUs) with its deviation,
 * then makes costs within 10% of each other one point: their mean, with their deviations pooled (the
 * root of the mean variance, each weighted by its samples less one). */
void starfa_plan_curve_sort(struct starfa_plan_curve *c);
void starfa_plan_curve_free(struct starfa_plan_curve *c);
/* Microseconds of one task of cost x (NAN without points), and its deviation in *sd_us when not NULL:
 * log-log between the measured costs, linear in x beyond the largest and flat below the smallest (the
 * per-task overhead). */
double starfa_plan_predict(const struct starfa_plan_curve *c, double x, double *sd_us);
/* The expected largest of n draws of a standard normal (Blom's approximation): how many deviations the
 * slowest of n cores running tasks of one cost side by side lags their mean. 0 for n <= 1. */
double starfa_plan_slowest_of(int n);

/* The workers one sweep is planned for. */
struct starfa_plan_workers {
	int ngpu, ncpu;
	int64_t per_gpu;          /* bands a GPU, run one after the other */
	int64_t cpu_tasks;        /* the tasks a core's band runs as, one after the other */
	double band_overhead_us;  /* what a CPU band costs the sweep beyond its tasks */
	int64_t gpu_split_tasks;  /* the tasks a GPU band runs as in a split, one after the other (0: one) */
};

/* The split of one sweep of `cost`: computed under STARFA_PLACE_SPLIT (forced > 0: that share, whatever
 * the curves say), the GPUs alone otherwise; the prediction is made either way. A split's GPU part reads
 * cuda_split where it has points (the tasks a GPU runs in a split, when they differ), else cuda. */
void starfa_plan_side(const struct starfa_plan_curve *cpu, const struct starfa_plan_curve *cuda,
		      const struct starfa_plan_curve *cuda_split, double cost, const struct starfa_plan_workers *w,
		      starfa_placement mode, double forced, starfa_split *out);

#endif
