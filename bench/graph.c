/* The whole task graph through StarPU: starfa_insert_sddmm (and starfa_insert_spmm, S·B over
 * the row bands) over every tile, then starfa_wait, timed on the host clock. Two worker sets (CUDA workers only; every worker,
 * under starfa's default scheduler or STARPU_SCHED) and two tilings (starfa's automatic grid; one tile, the coarsest, which is
 * the kernel of the GPU half plus StarPU's overhead). StarPU calibrates its perfmodels
 * during the warm-up runs (calibrate = 1), running each implementation a worker set may use until
 * its model has STARPU_CALIBRATE_MINIMUM (10) samples: the warm-ups cover that many runs of every
 * implementation, then go on until two runs in a row agree within 10%
 * (at most --graph-warmup more), so forced calibration runs stay out of the timed ones. overhead = graph time / kernel time - 1, the kernel being starfa's GPU
 * kernel on the whole matrix (GPU-only), or the faster of the GPU and CPU kernels (all
 * workers). The kernel's time is the GPU's alone (CUDA events); SDDMM is also compared with the GPU
 * kernel called from the host, launch and wait included (sddmm.starfa.cuda.call), in the note. */
#include "bench/bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct worker_set {
	const char *name;
	int gpu_only;
};

static const struct worker_set worker_sets[] = {{"gpu", 1}, {"all", 0}};
static const struct {
	const char *name;
	int64_t row_tiles, col_tiles; /* 0: automatic */
} tilings[] = {{"auto", 0, 0}, {"coarse", 1, 1}};

#define NSETS (sizeof worker_sets / sizeof worker_sets[0])
#define NTILINGS (sizeof tilings / sizeof tilings[0])

/* The operations timed through the graph. The SpMM codelet's CUDA implementation is the fastest on the
 * tile of starfa's kernel and cusparseSpMM: its baseline is cuSPARSE's best. */
enum graph_op { GRAPH_SDDMM, GRAPH_SPMM, GRAPH_OPS };
static const char *const op_prefix[GRAPH_OPS] = {"graph", "graph_spmm"};

static void measurement_name(char *out, size_t len, enum graph_op op, int set, const char *tiling, int cold)
{
	snprintf(out, len, "%s.%s.%s%s", op_prefix[op], worker_sets[set].name, tiling, cold ? ".cold" : "");
}

struct graph_operands {
	const starfa_tiled *S;
	starfa_dense *A, *B;
	starfa_sparse_values *P; /* SDDMM output */
	starfa_dense *Y;         /* SpMM output, Y = S·B */
	/* --graph-cold: the host arrays each run registers (A rows, B rows, the output), and the seconds its
	 * timed runs spent registering, in the graph, bringing the output home and unregistering */
	int cold;
	float *a, *b, *p;
	int64_t k;
	double phase[4];
};

/* Registers the factors and the output over the host arrays (A only for SDDMM). SDDMM's values are
 * registered over the output array where the grid has one column band, else in blocks of their own that
 * a gather copies out. */
static int register_operands(enum graph_op op, struct graph_operands *g)
{
	if (op == GRAPH_SDDMM && (starfa_dense_create(g->S, STARFA_ROWS, g->a, g->k, &g->A) ||
				  starfa_dense_create(g->S, STARFA_COLS, g->b, g->k, &g->B)))
		return -1;
	if (op == GRAPH_SDDMM)
		return starfa_tiled_col_tiles(g->S) == 1 ? starfa_sparse_values_create_over(g->S, STARFA_ROWS, g->p, &g->P)
							 : starfa_sparse_values_create(g->S, STARFA_ROWS, &g->P);
	return starfa_dense_create(g->S, STARFA_COLS, g->b, g->k, &g->B) ||
	       starfa_dense_create(g->S, STARFA_ROWS, g->p, g->k, &g->Y);
}

/* Unregistering brings the blocks home (into a, b and, for SpMM, p). */
static void unregister_operands(struct graph_operands *g)
{
	starfa_sparse_values_free(g->P);
	starfa_dense_free(g->A);
	starfa_dense_free(g->B);
	starfa_dense_free(g->Y);
	g->P = NULL;
	g->A = g->B = g->Y = NULL;
}

/* One insert + wait over every tile; returns seconds, or -1 after a message. A cold run is a one-shot job
 * on host data: it registers the operands, runs, brings the output home (into p) and unregisters them;
 * the tiles of S stay registered between runs. */
static double one_run(enum graph_op op, struct graph_operands *g)
{
	double t[5];
	t[0] = bench_now();
	int rc = g->cold && register_operands(op, g);
	t[1] = bench_now();
	if (!rc)
		rc = op == GRAPH_SDDMM ? starfa_insert_sddmm(g->S, g->A, g->B, STARFA_SDDMM_PATTERN, g->P)
				       : starfa_insert_spmm(g->S, STARFA_ROWS, g->B, g->Y);
	/* A cold run does not wait for the whole graph before it asks for the output: each tile comes home
	 * as soon as its task is done, while other workers' tasks still run. */
	if (!rc && !g->cold)
		rc = starfa_wait();
	t[2] = bench_now();
	if (!rc && g->cold)
		rc = op == GRAPH_SDDMM ? starfa_sparse_values_gather(g->P, g->p) : starfa_dense_sync(g->Y);
	t[3] = bench_now();
	if (g->cold)
		unregister_operands(g);
	t[4] = bench_now();
	if (rc != 0) {
		fprintf(stderr, "starfa_bench: %s\n", starfa_last_error());
		return -1;
	}
	for (int i = 0; i < 4; i++)
		g->phase[i] += t[i + 1] - t[i];
	return t[4] - t[0];
}

/* Implementations StarPU calibrates for an operation's tasks on a worker set: the CUDA one, and the CPU
 * one with every worker. */
static int implementations(int gpu_only, int gpu)
{
	return (gpu ? 1 : 0) + (gpu_only ? 0 : 1);
}

/* Untimed runs until StarPU has calibrated: 10 of every implementation (StarPU's calibration minimum, one
 * task a run on a 1x1 grid), then two runs in a row within 10%. */
static int warm_up(const struct bench_options *o, enum graph_op op, struct graph_operands *g, int calibration,
		   int *runs)
{
	double last = -1;
	for (*runs = 0; *runs < calibration + o->graph_warmup; (*runs)++) {
		double t = one_run(op, g);
		if (t < 0)
			return -1;
		if (*runs >= calibration + 2 && last > 0 && fabs(t - last) <= 0.1 * last) {
			(*runs)++;
			break;
		}
		last = t;
	}
	return 0;
}

/* The kernel time the graph is compared with (NAN when none was measured): starfa's SDDMM kernel
 * (GPU, or the faster of GPU and CPU for all workers); for SpMM the fastest cusparseSpMM algorithm. */
static double kernel_baseline(const struct bench_matrix *m, int64_t k, enum graph_op op, int gpu_only,
			      const char **name)
{
	static const char *const sddmm_names[] = {"sddmm.starfa.cuda", "cpu.starfa"};
	static const char *const spmm_names[] = {"spmm.cusparse.default", "spmm.cusparse.csr_alg1",
						 "spmm.cusparse.csr_alg2", "spmm.cusparse.csr_alg3"};
	const char *const *names = op == GRAPH_SDDMM ? sddmm_names : spmm_names;
	int count = op == GRAPH_SDDMM ? (gpu_only ? 1 : 2) : 4;
	double best = NAN;
	*name = "";
	for (int i = 0; i < count; i++) {
		struct bench_result *r = bench_result_find(m->name, k, names[i]);
		if (r && r->status == BENCH_OK && r->repeats > 0 && !(r->median_ms >= best)) {
			best = r->median_ms;
			*name = names[i];
		}
	}
	return best;
}

static void graph_rank(const struct bench_options *o, const struct bench_matrix *m, const starfa_tiled *S, int64_t k,
		       enum graph_op op, int set, const char *tiling)
{
	char name[48];
	measurement_name(name, sizeof name, op, set, tiling, o->graph_cold);
	struct bench_result *r = bench_result_add(m, k, name);
	snprintf(r->tiles, sizeof r->tiles, "%lldx%lld", (long long)starfa_tiled_row_tiles(S),
		 (long long)starfa_tiled_col_tiles(S));
	float *a = NULL, *b = NULL, *p = NULL;
	double *ms = bench_alloc((size_t)o->repeat, sizeof *ms, "timings");
	struct graph_operands g = {S, NULL, NULL, NULL, NULL, o->graph_cold, NULL, NULL, NULL, k};
	struct row_sample sample = {0};
	char msg[400];
	double err;
	int warmups = 0;
	/* The output on the host: SDDMM's values in CSR order, or SpMM's rows x k block. */
	size_t out_count = op == GRAPH_SDDMM ? (size_t)m->csr->nnz : (size_t)(m->csr->nrows * k);
	if (!ms || bench_factors(m, k, o->seed, &a, &b) || row_sample_make(m, k, o, &sample) ||
	    !(p = bench_alloc(out_count, sizeof *p, "graph output copy"))) {
		bench_result_fail(r, BENCH_ERROR, "out of host memory");
		goto out;
	}
	memset(p, 0xff, out_count * sizeof *p); /* NaN: an unwritten element fails the check */
	g.a = a;
	g.b = b;
	g.p = p;
	if (!g.cold && register_operands(op, &g)) {
		bench_result_fail(r, BENCH_ERROR, "%s", starfa_last_error());
		goto out;
	}
	if (warm_up(o, op, &g, 10 * implementations(worker_sets[set].gpu_only, starfa_worker_count(STARFA_WORKER_CUDA) > 0),
		    &warmups) != 0) {
		bench_result_fail(r, BENCH_ERROR, "%s", starfa_last_error());
		goto out;
	}
	/* Correctness before timing: the last warm-up's output against the reference (home already when cold). */
	if (!g.cold && (op == GRAPH_SDDMM ? starfa_sparse_values_gather(g.P, p) != 0 : starfa_dense_sync(g.Y) != 0)) {
		bench_result_fail(r, BENCH_ERROR, "%s", starfa_last_error());
		goto out;
	}
	if (op == GRAPH_SDDMM ? check_sddmm(m, &sample, a, b, k, STARFA_SDDMM_PATTERN, p, &err, msg, sizeof msg)
			      : check_spmm(m, &sample, b, k, p, &err, msg, sizeof msg)) {
		bench_result_fail(r, BENCH_FAIL, "%s", msg);
		goto out;
	}
	starfa_stats_reset();
	for (int i = 0; i < 4; i++)
		g.phase[i] = 0;
	for (int i = 0; i < o->repeat; i++) {
		double t = one_run(op, &g);
		if (t < 0) {
			bench_result_fail(r, BENCH_ERROR, "%s", starfa_last_error());
			goto out;
		}
		ms[i] = t * 1e3;
	}
	starfa_worker_stats st;
	starfa_stats_get(&st);
	bench_result_set_times(r, ms, o->repeat);
	r->flops = bench_flops(m, k);
	r->tasks_cpu = st.tasks[STARFA_WORKER_CPU] / o->repeat;
	r->tasks_cuda = st.tasks[STARFA_WORKER_CUDA] / o->repeat;
	snprintf(r->extra_name, sizeof r->extra_name, "warmup_runs");
	r->extra = warmups;
	const char *base;
	r->baseline_ms = kernel_baseline(m, k, op, worker_sets[set].gpu_only, &base);
	snprintf(r->baseline, sizeof r->baseline, "%s", base);
	r->speedup = r->baseline_ms / r->median_ms;
	r->overhead_pct = (r->median_ms / r->baseline_ms - 1.0) * 100.0;
	/* SDDMM: also over the GPU kernel called from the host (launch and wait included) */
	const struct bench_result *call = op == GRAPH_SDDMM ? bench_result_find(m->name, k, "sddmm.starfa.cuda.call") : NULL;
	if (call && call->status == BENCH_OK && call->repeats > 0)
		snprintf(r->note, sizeof r->note, "over the host-timed kernel call (sddmm.starfa.cuda.call, %.4f ms): %+.1f%%",
			 call->median_ms, (r->median_ms / call->median_ms - 1.0) * 100.0);
	printf("  %-10s %-6s %-6s%s k=%-4lld tiles %-7s %9.3f ms (%d warm-ups), tasks/run cpu %lld cuda %lld\n",
	       op_prefix[op], worker_sets[set].name, tiling, g.cold ? " cold" : "", (long long)k, r->tiles, r->median_ms,
	       warmups, (long long)r->tasks_cpu, (long long)r->tasks_cuda);
	if (g.cold) /* where a one-shot run's time goes, mean of the timed runs */
		printf("  %-10s %-6s %-6s cold k=%-4lld ms a run: register %.3f, submit %.3f, run and output home %.3f, "
		       "unregister %.3f\n",
		       op_prefix[op], worker_sets[set].name, tiling, (long long)k, g.phase[0] * 1e3 / o->repeat,
		       g.phase[1] * 1e3 / o->repeat, g.phase[2] * 1e3 / o->repeat, g.phase[3] * 1e3 / o->repeat);
	fflush(stdout);
out:
	unregister_operands(&g); /* before a, b and p are freed */
	row_sample_free(&sample);
	free(a);
	free(b);
	free(p);
	free(ms);
}

static void skip_set(const struct bench_options *o, const struct bench_matrix *m, int set, const char *why)
{
	char name[48];
	for (int op = 0; op < GRAPH_OPS; op++)
		for (int t = 0; t < (int)NTILINGS; t++) {
			measurement_name(name, sizeof name, (enum graph_op)op, set, tilings[t].name, o->graph_cold);
			for (int i = 0; i < o->nranks; i++)
				bench_result_fail(bench_result_add(m, o->ranks[i], name), BENCH_SKIP, "%s", why);
		}
}

static void graph_set(const struct bench_device *d, const struct bench_options *o, const struct bench_matrix *m,
		      int set)
{
	if (worker_sets[set].gpu_only && !d->gpu) {
		skip_set(o, m, set, "no GPU for CUDA workers");
		return;
	}
	starfa_options so;
	starfa_options_default(&so);
	so.ncpus = worker_sets[set].gpu_only ? 0 : -1;
	so.ncuda = d->gpu ? -1 : 0;
	so.scheduler = NULL; /* starfa's default, or STARPU_SCHED for comparing schedulers */
	so.calibrate = 1; /* the warm-ups calibrate the perfmodels */
	so.silent = 1;
	if (starfa_init(&so) != 0) {
		char why[300];
		snprintf(why, sizeof why, "starfa_init: %s", starfa_last_error());
		skip_set(o, m, set, why);
		return;
	}
	printf("  graph %s: %d cpu and %d cuda workers, scheduler %s\n", worker_sets[set].name,
	       starfa_worker_count(STARFA_WORKER_CPU), starfa_worker_count(STARFA_WORKER_CUDA),
	       starfa_scheduler_name());
	for (int t = 0; t < (int)NTILINGS; t++) {
		starfa_tiling_options topt = {tilings[t].row_tiles, tilings[t].col_tiles, 0};
		starfa_tiled *S = NULL;
		if (starfa_tiled_create(m->csr, &topt, &S) != 0) {
			fprintf(stderr, "starfa_bench: %s: starfa_tiled_create: %s\n", m->name, starfa_last_error());
			char name[48];
			for (int op = 0; op < GRAPH_OPS; op++) {
				measurement_name(name, sizeof name, (enum graph_op)op, set, tilings[t].name, o->graph_cold);
				for (int i = 0; i < o->nranks; i++)
					bench_result_fail(bench_result_add(m, o->ranks[i], name), BENCH_ERROR,
							  "starfa_tiled_create: %s", starfa_last_error());
			}
			continue;
		}
		for (int op = 0; op < GRAPH_OPS; op++)
			for (int i = 0; i < o->nranks; i++)
				graph_rank(o, m, S, o->ranks[i], (enum graph_op)op, set, tilings[t].name);
		starfa_tiled_free(S);
	}
	/* Split grids (--cpu-shares): a row band a GPU, and a row band a CPU worker, the cores' bands
	 * holding that share of the nonzeros between them, placed (the cores' bands on the cores only), one
	 * column band: each band's values are one run of the output array. SDDMM alone. */
	const int64_t ncpu = starfa_worker_count(STARFA_WORKER_CPU), ncuda = starfa_worker_count(STARFA_WORKER_CUDA);
	for (int i = 0; !worker_sets[set].gpu_only && ncpu > 0 && ncuda > 0 && i < o->nshares; i++) {
		starfa_tiling_options topt = {.row_tiles = ncuda + ncpu, .col_tiles = 1, .placed = 1, .cpu_bands = ncpu,
					      .row_cpu_share = o->cpu_shares[i], .cpu_rows_only = 1};
		char tiling[32];
		snprintf(tiling, sizeof tiling, "split@%g", o->cpu_shares[i]);
		starfa_tiled *S = NULL;
		if (starfa_tiled_create(m->csr, &topt, &S) != 0) {
			char name[48];
			measurement_name(name, sizeof name, GRAPH_SDDMM, set, tiling, o->graph_cold);
			for (int r = 0; r < o->nranks; r++)
				bench_result_fail(bench_result_add(m, o->ranks[r], name), BENCH_ERROR, "starfa_tiled_create: %s",
						  starfa_last_error());
			continue;
		}
		for (int r = 0; r < o->nranks; r++)
			graph_rank(o, m, S, o->ranks[r], GRAPH_SDDMM, set, tiling);
		starfa_tiled_free(S);
	}
	starfa_shutdown();
}

void graph_bench(const struct bench_device *d, const struct bench_options *o, const struct bench_matrix *m)
{
	for (int set = 0; set < (int)NSETS; set++)
		graph_set(d, o, m, set);
}
