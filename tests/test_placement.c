/* Placement: bands cut to a CPU share and run on their kind of worker; the planner's choices. */
#include "testing.h"
#include "codelets/plan.h"
#include "runtime/internal.h"
#ifdef STARFA_USE_CUDA
#include "testing_cuda.h"
#endif

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* P = A·Bᵀ at S's pattern, in CSR order, in double. */
static void sddmm_reference(const starfa_csr *S, const float *A, const float *B, int64_t k, double *P)
{
	for (int64_t r = 0; r < S->nrows; r++)
		for (int64_t e = S->rowptr[r]; e < S->rowptr[r + 1]; e++) {
			double s = 0;
			for (int64_t d = 0; d < k; d++)
				s += (double)A[r * k + d] * B[S->colind[e] * k + d];
			P[e] = s;
		}
}

typedef int (*sddmm_inserter)(const starfa_tiled *t, const starfa_dense *A, const starfa_dense *B,
			      starfa_sparse_values *V);

static int insert_whole(const starfa_tiled *t, const starfa_dense *A, const starfa_dense *B, starfa_sparse_values *V)
{
	return starfa_insert_sddmm(t, A, B, STARFA_SDDMM_PATTERN, V);
}

/* Runs an SDDMM over every tile of t (through `insert`) under the task log, checks it against the
 * reference, and counts its tasks per worker kind; wait 0 reads the values back before any starfa_wait. */
static int sddmm_by(sddmm_inserter insert, const starfa_csr *S, const starfa_tiled *t, int64_t k, uint64_t *rng,
		    int64_t tasks[2], int wait)
{
	float *A = malloc(sizeof *A * (size_t)(S->nrows * k)), *B = malloc(sizeof *B * (size_t)(S->ncols * k));
	float *P = malloc(sizeof *P * (size_t)S->nnz);
	double *want = malloc(sizeof *want * (size_t)S->nnz);
	CHECK(A && B && P && want);
	testing_fill_random(A, (size_t)(S->nrows * k), rng);
	testing_fill_random(B, (size_t)(S->ncols * k), rng);
	testing_poison(P, (size_t)S->nnz);
	sddmm_reference(S, A, B, k, want);
	starfa_dense *dA = NULL, *dB = NULL;
	starfa_sparse_values *V = NULL;
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, A, k, &dA));
	CHECK_OK(starfa_dense_create(t, STARFA_COLS, B, k, &dB));
	CHECK_OK(starfa_sparse_values_create(t, STARFA_ROWS, &V));
	CHECK_OK(starfa_task_log_begin());
	int rc = insert(t, dA, dB, V);
	if (!rc && !wait)
		rc = starfa_sparse_values_gather(V, P);
	if (!rc)
		rc = starfa_wait();
	starfa_task_record *log = NULL;
	int64_t n = 0;
	CHECK_OK(starfa_task_log_end(&log, &n));
	CHECK_OK(rc);
	tasks[0] = tasks[1] = 0;
	for (int64_t i = 0; i < n; i++)
		if (strcmp(log[i].codelet, "sddmm") == 0)
			tasks[starfa_worker_kind_of(log[i].worker)]++;
	free(log);
	if (wait)
		CHECK_OK(starfa_sparse_values_gather(V, P));
	/* The gather puts the values in S's CSR order. */
	int64_t bad = 0;
	for (int64_t e = 0; e < S->nnz; e++)
		bad += !(fabs(P[e] - want[e]) <= 1e-5 * (1 + fabs(want[e])));
	CHECK_MSG(bad == 0, "%lld of %lld SDDMM values differ from the reference", (long long)bad, (long long)S->nnz);
	starfa_sparse_values_free(V);
	starfa_dense_free(dA);
	starfa_dense_free(dB);
	free(A);
	free(B);
	free(P);
	free(want);
	return 0;
}

static int sddmm_on(const starfa_csr *S, const starfa_tiled *t, int64_t k, uint64_t *rng, int64_t tasks[2], int wait)
{
	return sddmm_by(insert_whole, S, t, k, rng, tasks, wait);
}

/* Non-empty tiles in the row bands [b0, b1). */
static int64_t tiles_in(const starfa_tiled *t, int64_t b0, int64_t b1)
{
	int64_t n = 0;
	for (int64_t i = b0; i < b1; i++)
		for (int64_t j = 0; j < starfa_tiled_col_tiles(t); j++)
			n += starfa_tiled_tile_nnz(t, i, j) > 0;
	return n;
}

/* starfa_init with environment variable `var` set to `value`: refused, naming the variable (the
 * variable's own value is put back after). */
static int init_refuses(const starfa_options *opts, const char *var, const char *value)
{
	const char *env = getenv(var);
	char *saved = env ? strdup(env) : NULL;
	setenv(var, value, 1);
	int rc = starfa_init(opts);
	if (saved)
		setenv(var, saved, 1);
	else
		unsetenv(var);
	free(saved);
	if (rc == 0)
		starfa_shutdown();
	CHECK_MSG(rc == STARFA_EINVAL && strstr(starfa_last_error(), var), "%s=%s: starfa_init gave %d: %s", var, value, rc,
		  starfa_last_error());
	return 0;
}

/* starfa_host_parallel: every chunk once, with its own range, whether the chunks run on the host's threads
 * (no runtime), on CPU workers, or on CPU workers and the calling thread (a core left to it). */
struct chunk_log {
	int64_t n, nchunks;
	int calls[64];
	int bad;
};

static void log_chunk(void *arg, int64_t chunk, int64_t begin, int64_t end)
{
	struct chunk_log *l = arg;
	if (chunk < 0 || chunk >= l->nchunks || begin != l->n * chunk / l->nchunks ||
	    end != l->n * (chunk + 1) / l->nchunks) {
		__atomic_store_n(&l->bad, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_fetch_add(&l->calls[chunk], 1, __ATOMIC_RELAXED);
}

static int chunks_each_once(void)
{
	static const int64_t cases[][2] = {{1000, 37}, {5, 37}, {64, 64}, {1, 1}, {100000, 3}};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
		for (int rep = 0; rep < 4; rep++) {
			struct chunk_log l = {cases[c][0], cases[c][1] < cases[c][0] ? cases[c][1] : cases[c][0], {0}, 0};
			CHECK_OK(starfa_host_parallel(cases[c][0], cases[c][1], log_chunk, &l));
			CHECK_MSG(!l.bad, "n %lld, %lld chunks: a chunk had a wrong range", (long long)l.n,
				  (long long)l.nchunks);
			for (int64_t i = 0; i < l.nchunks; i++)
				CHECK_MSG(l.calls[i] == 1, "n %lld, %lld chunks: chunk %lld ran %d times", (long long)l.n,
					  (long long)l.nchunks, (long long)i, l.calls[i]);
		}
	CHECK_OK(starfa_host_parallel(0, 8, log_chunk, NULL)); /* nothing to do: fn is not called */
	return 0;
}

TEST(placement, host_chunks_each_once)
{
	CHECK_OK(chunks_each_once());
	/* 1 to 3 workers, and one a core (no core left to the caller, which then only waits) */
	const long cores = sysconf(_SC_NPROCESSORS_ONLN);
	const int counts[] = {1, 2, 3, cores > 3 ? (int)cores : 4};
	for (int i = 0; i < 4; i++) {
		const int ncpus = counts[i];
		CHECK_OK(testing_runtime_cpus(ncpus));
		CHECK_OK(chunks_each_once());
		testing_runtime_stop();
	}
	return 0;
}

/* A curve of points (cost, us) at costs lo, 10 lo, ... up to hi, us = per_cost x cost + base, with a
 * deviation of sd_frac of each mean; -1 when out of memory. */
static int linear_curve(struct starfa_plan_curve *c, double lo, double hi, double per_cost, double base, double sd_frac)
{
	for (double x = lo; x <= hi * 1.0001; x *= 10)
		if (starfa_plan_curve_add(c, x, per_cost * x + base, sd_frac * (per_cost * x + base)))
			return -1;
	starfa_plan_curve_sort(c);
	return 0;
}

/* The planner's arithmetic on curves of known shape: interpolation, the slowest of n cores, the share
 * where the cores end at 90% of the GPUs' time, and the gain a split must show (5%, and an overhead a core). */
TEST(placement, plan_arithmetic)
{
	/* interpolation: log-log between points, flat below, linear beyond, the deviation's share of the
	 * mean linear in log cost; the fastest sample a cost */
	struct starfa_plan_curve c = {0, 0, NULL};
	CHECK(starfa_plan_curve_add(&c, 1e6, 1000, 100) == 0 && starfa_plan_curve_add(&c, 1e3, 20, 2) == 0 && /* 10% */
	      starfa_plan_curve_add(&c, 1e6, 1500, 1) == 0);
	starfa_plan_curve_sort(&c);
	CHECK(c.n == 2 && c.pt[0].cost == 1e3 && c.pt[1].us == 1000 && c.pt[1].sd_us == 100);
	double sd = -1;
	CHECK(fabs(starfa_plan_predict(&c, pow(10, 4.5), &sd) - sqrt(20.0 * 1000)) < 1e-6 && fabs(sd - 0.1 * sqrt(20.0 * 1000)) < 1e-6);
	CHECK(starfa_plan_predict(&c, 10, &sd) == 20 && sd == 2);
	CHECK(fabs(starfa_plan_predict(&c, 4e6, &sd) - 4000) < 1e-6 && fabs(sd - 400) < 1e-6);
	starfa_plan_curve_free(&c);
	CHECK(c.n == 0 && isnan(starfa_plan_predict(&c, 1e6, &sd)) && isnan(sd));
	/* costs within 10% of each other are one point, their mean: runs of one job at costs 2-5% apart, times
	 * alternating by 20%, predict their mean between them and no slope from point to point */
	CHECK(starfa_plan_curve_add(&c, 1e3, 10, 1) == 0 && starfa_plan_curve_add(&c, 1.00e6, 1100, 110) == 0 &&
	      starfa_plan_curve_add(&c, 1.03e6, 900, 90) == 0 && starfa_plan_curve_add(&c, 1.05e6, 1100, 110) == 0 &&
	      starfa_plan_curve_add(&c, 1.08e6, 900, 90) == 0 && starfa_plan_curve_add(&c, 1.2e6, 1200, 120) == 0);
	starfa_plan_curve_sort(&c);
	CHECK_MSG(c.n == 3 && fabs(c.pt[1].cost - 1.04e6) < 1e-3 && fabs(c.pt[1].us - 1000) < 1e-9 &&
		  fabs(c.pt[1].sd_us - sqrt(10100.0)) < 1e-9 && c.pt[2].cost == 1.2e6, /* the rms of 110, 90, 110, 90 */
		  "%lld points, the middle one at %g: %g us", (long long)c.n, c.n > 1 ? c.pt[1].cost : NAN,
		  c.n > 1 ? c.pt[1].us : NAN);
	starfa_plan_curve_free(&c);
	/* history entries pool by their samples: a one-sample entry (deviation 0) weighs nothing, 3 and 5
	 * samples weigh 2 and 4 */
	CHECK(starfa_plan_curve_add_n(&c, 1.00e6, 1000, 100, 5) == 0 && starfa_plan_curve_add_n(&c, 1.02e6, 1100, 0, 1) == 0 &&
	      starfa_plan_curve_add_n(&c, 1.04e6, 900, 40, 3) == 0);
	starfa_plan_curve_sort(&c);
	CHECK_MSG(c.n == 1 && fabs(c.pt[0].sd_us - sqrt((4 * 100.0 * 100 + 2 * 40.0 * 40) / 6)) < 1e-9 && fabs(c.pt[0].us - 1000) < 1e-9 &&
		  c.pt[0].n == 9, "%lld points, sd %g, %g us, %g samples", (long long)c.n, c.n ? c.pt[0].sd_us : NAN,
		  c.n ? c.pt[0].us : NAN, c.n ? c.pt[0].n : NAN);
	starfa_plan_curve_free(&c);

	/* the expected largest of n standard normals: 0, 0.56, 1.70 (exact: 0, 0.564, 1.703) */
	CHECK(starfa_plan_slowest_of(1) == 0 && fabs(starfa_plan_slowest_of(2) - 0.564) < 0.03 &&
	      fabs(starfa_plan_slowest_of(14) - 1.703) < 0.01 && starfa_plan_slowest_of(64) > starfa_plan_slowest_of(14));

	/* A GPU at 1 ns a cost, 14 cores at r ns a cost each; a sweep of 1e9 costs 1,000 ms on the GPU. */
	const double X = 1e9;
	struct starfa_plan_workers w = {1, 14, 1, 1, 50};
	struct starfa_plan_curve gpu = {0, 0, NULL}, cpu = {0, 0, NULL}, none = {0, 0, NULL};
	int rc = linear_curve(&gpu, 1e3, 1e9, 1e-3, 0, 0);
	starfa_split s;
	double share0 = NAN;
	for (int noisy = 0; noisy < 2 && !rc; noisy++) {
		/* r = 14: the cores together as fast as the GPU; the cores end at 90% of the GPU's time at
		 * s / (1 - s) = 0.9 / f, f the slowest core's factor over the mean */
		starfa_plan_curve_free(&cpu);
		rc = linear_curve(&cpu, 1e3, 1e9, 14e-3, 0, noisy ? 0.1 : 0);
		starfa_plan_side(&cpu, &gpu, NULL, X, &w, STARFA_PLACE_SPLIT, 0, &s);
		const double f = 1 + (noisy ? 0.1 * starfa_plan_slowest_of(14) : 0), want = 0.9 / (f + 0.9);
		CHECK_MSG(s.calibrated && s.cpu_bands == 14 && fabs(s.cpu_share - want) < 1e-6 && fabs(s.cuda_ms - 1000) < 1e-6 &&
			  fabs(s.split_ms - 1000 * (1 - want)) < 1e-3 && fabs(s.needed_ms - 50) < 1e-9,
			  "noisy %d: share %g (want %g), sweep %g ms of %g, needed %g", noisy, s.cpu_share, want, s.split_ms,
			  s.cuda_ms, s.needed_ms);
		if (!noisy)
			share0 = s.cpu_share;
		else
			CHECK(s.cpu_share < share0); /* the slowest core's lag takes share from the cores */
	}
	/* cores 10x slower: a share of 8.3% gains 8.3% (taken); 25x slower: 3.5% gains under 5% (not taken,
	 * but reported) */
	starfa_plan_curve_free(&cpu);
	rc = rc ? rc : linear_curve(&cpu, 1e3, 1e9, 10 * 14e-3, 0, 0);
	starfa_plan_side(&cpu, &gpu, NULL, X, &w, STARFA_PLACE_SPLIT, 0, &s);
	CHECK(fabs(s.cpu_share - 0.9 / 10.9) < 1e-6 && s.cpu_bands == 14 && fabs(s.needed_ms - 50) < 1e-9);
	w.band_overhead_us = 6000; /* 84 ms to gain: more than the 82.6 */
	starfa_plan_side(&cpu, &gpu, NULL, X, &w, STARFA_PLACE_SPLIT, 0, &s);
	CHECK(s.cpu_bands == 0 && s.cpu_share == 0 && fabs(s.best_share - 0.9 / 10.9) < 1e-6 && fabs(s.needed_ms - 84) < 1e-9 &&
	      s.split_ms == s.cuda_ms);
	w.band_overhead_us = 0; /* the default, 0.3 ms a core: 4.2 ms, under the 5% */
	starfa_plan_side(&cpu, &gpu, NULL, X, &w, STARFA_PLACE_SPLIT, 0, &s);
	CHECK(s.cpu_bands == 14 && fabs(s.needed_ms - 50) < 1e-9);
	starfa_plan_curve_free(&cpu);
	rc = rc ? rc : linear_curve(&cpu, 1e3, 1e9, 25 * 14e-3, 0, 0);
	starfa_plan_side(&cpu, &gpu, NULL, X, &w, STARFA_PLACE_SPLIT, 0, &s);
	CHECK(s.cpu_bands == 0 && fabs(s.best_share - 0.9 / 25.9) < 1e-6 && s.best_ms > 960);
	/* the same with the split's GPU tasks 8% faster than the GPU's alone (SGD's span): the GPUs' part
	 * 0.92 (1 - s) of 1,000 ms, the cores' end at 90% of it, s = 0.828 / 25.828; taken, as two tasks a
	 * band change nothing on a linear curve; an empty split curve reads the GPU's */
	struct starfa_plan_curve span = {0, 0, NULL};
	rc = rc ? rc : linear_curve(&span, 1e3, 1e9, 0.92e-3, 0, 0);
	w.gpu_split_tasks = 2;
	starfa_plan_side(&cpu, &gpu, &span, X, &w, STARFA_PLACE_SPLIT, 0, &s);
	const double want_span = 0.828 / 25.828;
	CHECK_MSG(s.cpu_bands == 14 && fabs(s.cpu_share - want_span) < 1e-6 && fabs(s.cuda_ms - 1000) < 1e-6 &&
		  fabs(s.split_ms - 920 * (1 - want_span)) < 1e-3,
		  "with the span curve: share %g (want %g), sweep %g ms of %g", s.cpu_share, want_span, s.split_ms, s.cuda_ms);
	starfa_plan_side(&cpu, &gpu, &none, X, &w, STARFA_PLACE_SPLIT, 0, &s);
	CHECK(s.cpu_bands == 0 && fabs(s.best_share - 0.9 / 25.9) < 1e-6);
	w.gpu_split_tasks = 0;
	starfa_plan_curve_free(&span);
	/* a core's band as 28 tasks in turn: each task pays the curve's flat 1 ms, so the share shrinks */
	starfa_plan_curve_free(&cpu);
	rc = rc ? rc : linear_curve(&cpu, 1e3, 1e9, 14e-3, 1000, 0);
	w.cpu_tasks = 28;
	starfa_plan_side(&cpu, &gpu, NULL, X, &w, STARFA_PLACE_SPLIT, 0, &s);
	CHECK(s.cpu_bands == 14 && s.cpu_share < share0 && s.cpu_share > 0.4);
	w.cpu_tasks = 1;
	/* the share given by hand, the GPUs-alone mode, and no samples on the cores */
	starfa_plan_side(&cpu, &gpu, NULL, X, &w, STARFA_PLACE_SPLIT, 0.25, &s);
	CHECK(s.cpu_share == 0.25 && s.cpu_bands == 14 && fabs(s.split_ms - 750) < 1.5);
	starfa_plan_side(&cpu, &gpu, NULL, X, &w, STARFA_PLACE_GPU, 0, &s);
	CHECK(s.cpu_bands == 0 && fabs(s.cuda_ms - 1000) < 1e-6 && isnan(s.best_share));
	starfa_plan_side(&none, &gpu, NULL, X, &w, STARFA_PLACE_SPLIT, 0, &s);
	CHECK(!s.calibrated && s.cpu_bands == 0 && isnan(s.cpu_ms) && fabs(s.cuda_ms - 1000) < 1e-6);
	starfa_plan_curve_free(&cpu);
	starfa_plan_curve_free(&gpu);
	CHECK_OK(rc);
	return 0;
}

/* The split's guard, run on made-up sweeps: which hands ran each (S: the split, G: the GPUs took the
 * cores' part). Within 2% of the estimate, or one slow sweep among fast ones, the split stays. Two net
 * losses start a trial of two sweeps on the GPUs (the first moves the factors); the faster by its
 * measured sweep stays, for good when the GPUs win, or until the split loses twice more against that
 * measured sweep. Moved sweeps and unknown estimates count neither way. */
TEST(placement, split_guard_tries_the_gpus_and_keeps_the_faster)
{
	struct {
		double split[10], gpus[10]; /* a sweep over the GPUs alone's estimate, by the hands that ran it */
		unsigned moved;             /* bit s: sweep s + 1 moved the factors (the caller says so) */
		const char *hands;
		int for_good; /* the GPUs keep the cores' part at the end */
	} cases[] = {
		{{3.0, 0.96, 1.01, 0.98, 1.019, 0.97, 1.0, 0.99, 1.0, 1.0}, {0}, 1, "SSSSSSSSSS", 0}, /* within the margin */
		{{0.96, 1.2, 0.97, 1.3, 0.95, 1.1, 0.98, 1.05, 0.97, 1.1}, {0}, 0, "SSSSSSSSSS", 0}, /* by turns */
		/* two slow in a row: a trial, slower than the split's median but within 2%, gives the cores their part back */
		{{0.96, 0.96, 1.1, 1.1, 0, 0, 1.1, 1.1, 1.0, 1.1}, {0, 0, 0, 0, 1.25, 1.08, 0, 0, 0, 0}, 1, "SSSSGGSSSS", 0},
		/* the split much slower: the GPUs keep the cores' part after their trial */
		{{1.0, 1.3, 1.3, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 1.4, 1.05, 1.05, 1.05, 1.05, 1.05, 1.05}, 1, "SSSGGGGGGG", 1},
		/* back from a trial, the split loses twice against its measured sweep: for good, no new trial */
		{{1.0, 1.1, 1.1, 0, 0, 1.1, 1.3, 1.3, 0, 0}, {0, 0, 0, 1.2, 1.2, 0, 0, 0, 1.2, 1.2}, 1, "SSSGGSSSGG", 1},
		/* three slow against one fast; a moved sweep between two slow ones counts neither way */
		{{1.1, 0.9, 1.1, 1.1, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0}, 0, "SSSSGGGGGG", 1},
		{{1.1, 1.5, 1.1, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0}, 2, "SSSGGGGGGG", 1},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		starfa_split_guard g = {0};
		char hands[11] = {0};
		int on_gpus = 0;
		for (int s = 0; s < 10; s++) {
			const double alone = 0.0189, r = on_gpus ? cases[c].gpus[s] : cases[c].split[s];
			hands[s] = on_gpus ? 'G' : 'S';
			CHECK_MSG(r > 0, "case %zu: sweep %d ran on hands the case did not expect (%s so far)", c, s + 1, hands);
			on_gpus = starfa_split_guard_step(&g, r * alone, alone, (int)(cases[c].moved >> s & 1));
		}
		CHECK_MSG(strcmp(hands, cases[c].hands) == 0, "case %zu: ran %s, not %s", c, hands, cases[c].hands);
		CHECK_MSG(g.given_way == cases[c].for_good, "case %zu: %s for good", c, g.given_way ? "given way" : "not given way");
		CHECK(g.sweeps == 10);
	}
	/* no estimate (no GPU time measured): never */
	starfa_split_guard g = {0};
	for (int s = 0; s < 6; s++)
		CHECK(starfa_split_guard_step(&g, 1.0, NAN, 0) == 0);
	return 0;
}

TEST(placement, rejects_what_cannot_run)
{
	CHECK_OK(testing_runtime_only(STARFA_WORKER_CPU));
	uint64_t rng = testing_seed() + 41;
	starfa_csr *S = testing_random_csr(200, 150, 3000, 0.0, &rng);
	CHECK(S);
	starfa_tiled *t = NULL;
	starfa_tiling_options cuda = {4, 4, 0, 0, 0, 1, 2, 0.3, 0.3};
	CHECK(starfa_tiled_create(S, &cuda, &t) == STARFA_EINVAL && t == NULL);
	CHECK(strstr(starfa_last_error(), "CUDA") != NULL);
	/* Every row band on the cores, but the column bands of a rows-only split stay the GPUs'. */
	starfa_tiling_options rows_only = {.row_tiles = 2, .col_tiles = 1, .placed = 1, .cpu_bands = 2,
					   .row_cpu_share = 1.0, .cpu_rows_only = 1};
	CHECK(starfa_tiled_create(S, &rows_only, &t) == STARFA_EINVAL && t == NULL);
	CHECK(strstr(starfa_last_error(), "CUDA") != NULL);
	starfa_tiling_options too_many = {3, 3, 0, 0, 0, 1, 4, 0.5, 0.5};
	CHECK(starfa_tiled_create(S, &too_many, &t) == STARFA_EINVAL && t == NULL);
	CHECK(strstr(starfa_last_error(), "CPU bands") != NULL);
	starfa_tiling_options bad_share = {3, 3, 0, 0, 0, 1, 3, 1.5, NAN};
	CHECK(starfa_tiled_create(S, &bad_share, &t) == STARFA_EINVAL && t == NULL);
	CHECK(strstr(starfa_last_error(), "shares") != NULL);
	/* The planner: no GPU leaves the bands to the caller, unplaced; unknown operations are refused. */
	starfa_tiling_options plan = {0};
	starfa_split split[2];
	CHECK_OK(starfa_plan_tiling("sddmm", 1e6, 1e6, 2, &plan, split));
	CHECK(plan.placed == 0 && plan.row_tiles == 0 && split[0].cuda_bands == 0 && split[1].cpu_bands == 0);
	CHECK(starfa_plan_tiling("no_such_op", 1e6, 1e6, 2, &plan, split) == STARFA_EINVAL);
	CHECK(strstr(starfa_last_error(), "no_such_op") != NULL);
	CHECK(starfa_plan_tiling("sddmm", 1e6, 1e6, 0, &plan, split) == STARFA_EINVAL);
	/* A share by hand outside (0, 1) is refused; one inside changes nothing without GPUs. */
	static const char *const bad_shares[] = {"1.5", "0", "-0.1", "a", "0.2x"};
	for (int i = 0; i < 5; i++) {
		setenv("STARFA_CPU_SHARE", bad_shares[i], 1);
		CHECK(starfa_plan_tiling("sddmm", 1e6, 1e6, 2, &plan, split) == STARFA_EINVAL);
		CHECK(strstr(starfa_last_error(), "STARFA_CPU_SHARE") != NULL);
	}
	setenv("STARFA_CPU_SHARE", "0.2", 1);
	CHECK_OK(starfa_plan_tiling("sddmm", 1e6, 1e6, 2, &plan, split));
	CHECK(plan.placed == 0 && split[0].cpu_bands == 0);
	unsetenv("STARFA_CPU_SHARE");
	starfa_csr_free(S);
	/* A placement that is not one is refused at start (it also picks the default scheduler). */
	testing_runtime_stop();
	starfa_options opts;
	starfa_options_default(&opts);
	opts.ncuda = 0;
	opts.silent = 1;
	if (init_refuses(&opts, "STARFA_CUDA_GRAM", "fp16"))
		return 1;
	return init_refuses(&opts, "STARFA_PLACEMENT", "everywhere");
}

/* The idle probe: refused before starfa_init and for a bad length; then a figure within what the
 * process's threads can use. */
TEST(placement, idle_cost)
{
	testing_runtime_stop();
	double cpu = -1, wall = -1;
	CHECK(starfa_idle_cost(0.1, &cpu, &wall) == STARFA_EINVAL);
	CHECK(strstr(starfa_last_error(), "starfa_init") != NULL);
	CHECK_OK(testing_runtime_only(STARFA_WORKER_CPU));
	CHECK(starfa_idle_cost(0, &cpu, &wall) == STARFA_EINVAL);
	CHECK(starfa_idle_cost(NAN, &cpu, &wall) == STARFA_EINVAL);
	CHECK(starfa_idle_cost(0.1, NULL, &wall) == STARFA_EINVAL);
	CHECK_OK(starfa_idle_cost(0.2, &cpu, &wall));
	const int workers = starfa_worker_count(STARFA_WORKER_CPU);
	CHECK_MSG(wall >= 0.2 && wall < 5, "wall %g s", wall);
	/* StarPU's threads: a worker each, beside which nothing of starfa's runs while it sleeps. */
	CHECK_MSG(cpu >= 0 && cpu <= (workers + 1) * wall, "%g CPU seconds over %g s with %d workers", cpu, wall,
		  workers);
	return 0;
}

/* Every band on the CPU workers: the tasks go there and the results are the reference's. */
TEST(placement, cpu_bands_run_on_cpu_workers)
{
	CHECK_OK(testing_runtime_only(STARFA_WORKER_CPU));
	uint64_t rng = testing_seed() + 43;
	starfa_csr *S = testing_random_csr(300, 240, 6000, 1.5, &rng);
	CHECK(S);
	starfa_tiling_options o = {3, 3, 0, 0, 0, 1, 3, 1.0, 1.0};
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(S, &o, &t));
	int64_t tasks[2];
	CHECK_OK(sddmm_on(S, t, 12, &rng, tasks, 1));
	CHECK_MSG(tasks[STARFA_WORKER_CPU] == tiles_in(t, 0, 3) && tasks[STARFA_WORKER_CUDA] == 0,
		  "%lld cpu and %lld cuda tasks for %lld tiles", (long long)tasks[0], (long long)tasks[1],
		  (long long)tiles_in(t, 0, 3));
	starfa_tiled_free(t);
	starfa_csr_free(S);
	return 0;
}


/* The waits poll before they sleep where a core is left free (one CPU worker on a machine of two or more
 * cores): the graph's results and the values read back through those waits are the reference's, with
 * the default spin, a long one and none; a spin limit that is not a number is refused at start. */
TEST(placement, waits_with_a_free_core)
{
	uint64_t rng = testing_seed() + 53;
	starfa_csr *S = testing_random_csr(500, 400, 9000, 1.0, &rng);
	CHECK(S);
	const char *limits[] = {NULL, "100000", "0"};
	for (int i = 0; i < 3; i++) {
		if (limits[i])
			setenv("STARFA_WAIT_SPIN_US", limits[i], 1);
		else
			unsetenv("STARFA_WAIT_SPIN_US");
		starfa_options opts;
		starfa_options_default(&opts);
		opts.ncpus = 1;
		opts.ncuda = 0;
		CHECK_OK(testing_runtime_with(&opts));
		starfa_tiled *t = NULL;
		starfa_tiling_options o = {3, 2, 0};
		CHECK_OK(starfa_tiled_create(S, &o, &t));
		int64_t tasks[2];
		for (int rep = 0; rep < 3; rep++)
			CHECK_OK(sddmm_on(S, t, 8, &rng, tasks, 1));
		CHECK(tasks[STARFA_WORKER_CPU] == tiles_in(t, 0, 3));
		/* Read back with no starfa_wait before: the gather's own waits hold the reads back. */
		for (int rep = 0; rep < 3; rep++)
			CHECK_OK(sddmm_on(S, t, 24, &rng, tasks, 0));
		starfa_tiled_free(t);
		testing_runtime_stop();
	}
	unsetenv("STARFA_WAIT_SPIN_US");
	starfa_options opts;
	starfa_options_default(&opts);
	opts.ncuda = 0;
	opts.silent = 1;
	if (init_refuses(&opts, "STARFA_WAIT_SPIN_US", "fast"))
		return 1;
	starfa_csr_free(S);
	return 0;
}

/* Under heteroprio (whose buckets starfa sets up from its priorities and placements): an SDDMM over a
 * grid, then per-tile tasks at raised, default and lowered priorities, placed on the cores or not, all
 * give the reference's values; a slow factor that is not a number is refused at start. */
/* A task a tile, at raised, default and lowered priorities in turn, and in turn with no placement of its
 * own (its band's), on the cores, and on either kind (heteroprio's shared buckets). */
static int insert_by_tile(const starfa_tiled *t, const starfa_dense *A, const starfa_dense *B, starfa_sparse_values *V)
{
	static const int prio[] = {5, 0, -3};
	int n = 0;
	for (int64_t i = 0; i < starfa_tiled_row_tiles(t); i++)
		for (int64_t j = 0; j < starfa_tiled_col_tiles(t); j++, n++) {
			static const unsigned where[] = {0, STARFA_WHERE_CPU, STARFA_WHERE_CPU | STARFA_WHERE_CUDA, STARFA_WHERE_CPU};
			starfa_task_attr attr = {prio[n % 3], 0, where[n % 4]};
			int rc = starfa_task_sddmm(t, i, j, A, B, STARFA_SDDMM_PATTERN, 1.0f, 0.0f, V, &attr);
			if (rc)
				return rc;
		}
	return 0;
}

static int heteroprio_sddmm(const starfa_csr *S, const starfa_tiling_options *o, int64_t k, uint64_t *rng,
			    int64_t tasks[2])
{
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(S, o, &t));
	int64_t by_tile[2];
	CHECK_OK(sddmm_by(insert_by_tile, S, t, k, rng, by_tile, 1));
	CHECK_OK(sddmm_on(S, t, k, rng, tasks, 1));
	starfa_tiled_free(t);
	return 0;
}

TEST(placement, heteroprio_buckets)
{
	uint64_t rng = testing_seed() + 59;
	starfa_csr *S = testing_random_csr(400, 300, 8000, 1.0, &rng);
	CHECK(S);
	starfa_options opts;
	starfa_options_default(&opts);
	opts.ncuda = 0;
	opts.ncpus = 2;
	opts.scheduler = "heteroprio";
	CHECK_OK(testing_runtime_with(&opts));
	CHECK(strcmp(starfa_scheduler_name(), "heteroprio") == 0);
	starfa_tiling_options o = {3, 3, 0};
	int64_t tasks[2];
	CHECK_OK(heteroprio_sddmm(S, &o, 12, &rng, tasks));
	CHECK(tasks[STARFA_WORKER_CPU] > 0 && tasks[STARFA_WORKER_CUDA] == 0);
	/* Values nothing wrote, read back: StarPU submits their zeroing itself, at priority 0, which has to
	 * find a bucket the cores scan. */
	starfa_tiled *t = NULL;
	starfa_sparse_values *v = NULL;
	float *zeros = malloc(sizeof *zeros * (size_t)S->nnz);
	CHECK(zeros);
	CHECK_OK(starfa_tiled_create(S, &o, &t));
	CHECK_OK(starfa_sparse_values_create(t, STARFA_ROWS, &v));
	testing_poison(zeros, (size_t)S->nnz);
	CHECK_OK(starfa_sparse_values_gather(v, zeros));
	for (int64_t e = 0; e < S->nnz; e++)
		CHECK(zeros[e] == 0.0f);
	starfa_sparse_values_free(v);
	starfa_tiled_free(t);
	free(zeros);
	testing_runtime_stop();
	opts.silent = 1;
	if (init_refuses(&opts, "STARFA_HETEROPRIO_SLOW", "fast"))
		return 1;
	starfa_csr_free(S);
	return 0;
}

#ifdef STARFA_USE_CUDA
/* Two GPU bands and two CPU bands holding 30% of the nonzeros: the cut lands there (within the heaviest
 * rows), each band's tasks run on its kind only, and SDDMM matches the reference. With cpu_bands 0 every
 * task, band or not, runs on the GPUs. */
TEST(placement_cuda, bands_run_where_placed)
{
	SKIP_UNLESS_BOTH_KINDS();
	uint64_t rng = testing_seed() + 47;
	starfa_csr *S = testing_random_csr(4000, 3000, 80000, 1.2, &rng);
	CHECK(S);
	starfa_tiling_options o = {4, 4, 0, 0, 0, 1, 2, 0.3, 0.3};
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(S, &o, &t));
	const int64_t *rb = starfa_tiled_row_bounds(t);
	int64_t cpu_nnz = S->rowptr[S->nrows] - S->rowptr[rb[2]], heaviest = 0;
	for (int64_t r = 0; r < S->nrows; r++)
		heaviest = S->rowptr[r + 1] - S->rowptr[r] > heaviest ? S->rowptr[r + 1] - S->rowptr[r] : heaviest;
	CHECK_MSG(fabs((double)cpu_nnz - 0.3 * (double)S->nnz) <= 2.0 * (double)heaviest,
		  "the CPU bands hold %lld of %lld nonzeros", (long long)cpu_nnz, (long long)S->nnz);
	int64_t tasks[2];
	CHECK_OK(sddmm_on(S, t, 16, &rng, tasks, 1));
	CHECK_MSG(tasks[STARFA_WORKER_CPU] == tiles_in(t, 2, 4) && tasks[STARFA_WORKER_CUDA] == tiles_in(t, 0, 2),
		  "%lld cpu and %lld cuda tasks for %lld and %lld tiles", (long long)tasks[0], (long long)tasks[1],
		  (long long)tiles_in(t, 2, 4), (long long)tiles_in(t, 0, 2));
	starfa_tiled_free(t);
	starfa_tiling_options gpus = {3, 3, 0, 0, 0, 1, 0, 0, 0};
	CHECK_OK(starfa_tiled_create(S, &gpus, &t));
	CHECK_OK(sddmm_on(S, t, 16, &rng, tasks, 1));
	CHECK(tasks[STARFA_WORKER_CPU] == 0 && tasks[STARFA_WORKER_CUDA] == tiles_in(t, 0, 3));
	starfa_tiled_free(t);
	/* The planner with GPUs places every band, two a GPU at the least. */
	starfa_tiling_options plan = {0};
	starfa_split split[2];
	CHECK_OK(starfa_plan_tiling("sddmm", (double)S->nnz * 16, (double)S->nnz * 16, 2, &plan, split));
	CHECK(plan.placed == 1 && plan.row_tiles >= 2 * starfa_worker_count(STARFA_WORKER_CUDA));
	CHECK(split[0].cuda_bands == 2 * starfa_worker_count(STARFA_WORKER_CUDA));
	/* Under split, a share by hand: a band a core holding it, whatever the models say. */
	setenv("STARFA_PLACEMENT", "split", 1);
	setenv("STARFA_CPU_SHARE", "0.25", 1);
	const int rc = starfa_plan_tiling("sddmm", (double)S->nnz * 16, (double)S->nnz * 16, 2, &plan, split);
	unsetenv("STARFA_CPU_SHARE");
	unsetenv("STARFA_PLACEMENT");
	CHECK_OK(rc);
	const int64_t ncpu = starfa_worker_count(STARFA_WORKER_CPU), ngpu = starfa_worker_count(STARFA_WORKER_CUDA);
	CHECK(plan.placed == 1 && plan.cpu_bands == ncpu && plan.row_tiles == 2 * ngpu + ncpu &&
	      plan.row_cpu_share == 0.25 && plan.col_cpu_share == 0.25 && split[0].cpu_share == 0.25);
	CHECK_OK(starfa_tiled_create(S, &plan, &t));
	CHECK_OK(sddmm_on(S, t, 16, &rng, tasks, 1));
	CHECK_MSG(tasks[STARFA_WORKER_CPU] == tiles_in(t, 2 * ngpu, 2 * ngpu + ncpu) &&
			  tasks[STARFA_WORKER_CUDA] == tiles_in(t, 0, 2 * ngpu),
		  "split by hand: %lld cpu and %lld cuda tasks", (long long)tasks[0], (long long)tasks[1]);
	starfa_tiled_free(t);
	/* A rows-only split: 3 row bands for the cores (35% of the nonzeros), more than the one column band
	 * (which stays the GPUs'), the values over one array. */
	starfa_tiling_options rows = {.row_tiles = 5, .col_tiles = 1, .placed = 1, .cpu_bands = 3,
				      .row_cpu_share = 0.35, .col_cpu_share = 0.9, .cpu_rows_only = 1};
	CHECK_OK(starfa_tiled_create(S, &rows, &t));
	CHECK(starfa_tiled_col_tiles(t) == 1 && starfa_tiled_row_tiles(t) == 5);
	rb = starfa_tiled_row_bounds(t);
	cpu_nnz = S->rowptr[S->nrows] - S->rowptr[rb[2]];
	CHECK_MSG(fabs((double)cpu_nnz - 0.35 * (double)S->nnz) <= 2.0 * (double)heaviest,
		  "rows only: the CPU bands hold %lld of %lld nonzeros", (long long)cpu_nnz, (long long)S->nnz);
	CHECK_OK(sddmm_on(S, t, 16, &rng, tasks, 1));
	CHECK_MSG(tasks[STARFA_WORKER_CPU] == tiles_in(t, 2, 5) && tasks[STARFA_WORKER_CUDA] == tiles_in(t, 0, 2),
		  "rows only: %lld cpu and %lld cuda tasks", (long long)tasks[0], (long long)tasks[1]);
	float *A = malloc(sizeof(float) * (size_t)(S->nrows * 16)), *B = malloc(sizeof(float) * (size_t)(S->ncols * 16));
	float *P = malloc(sizeof(float) * (size_t)S->nnz);
	CHECK(A && B && P);
	testing_fill_random(A, (size_t)(S->nrows * 16), &rng);
	testing_fill_random(B, (size_t)(S->ncols * 16), &rng);
	testing_poison(P, (size_t)S->nnz);
	starfa_dense *a = NULL, *b = NULL;
	starfa_sparse_values *p = NULL;
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, A, 16, &a));
	CHECK_OK(starfa_dense_create(t, STARFA_COLS, B, 16, &b));
	CHECK_OK(starfa_sparse_values_create_over(t, STARFA_ROWS, P, &p));
	CHECK_OK(starfa_insert_sddmm(t, a, b, STARFA_SDDMM_PATTERN, p));
	starfa_sparse_values_free(p);
	CHECK_OK(starfa_check_sddmm(S, A, B, 16, STARFA_SDDMM_PATTERN, P, NULL));
	starfa_dense_free(a);
	starfa_dense_free(b);
	free(A);
	free(B);
	free(P);
	starfa_tiled_free(t);
	starfa_csr_free(S);
	return 0;
}

/* heteroprio with the cores and the GPUs: bands placed on each kind run there (GPU-only and CPU-only
 * tasks wait in buckets only their kind scans: StarPU 1.3's heteroprio asserts otherwise), the per-tile
 * tasks at every priority and placement run, and the values are the reference's. */
TEST(placement_cuda, heteroprio_runs_placed_bands)
{
	SKIP_UNLESS_BOTH_KINDS();
	uint64_t rng = testing_seed() + 61;
	starfa_csr *S = testing_random_csr(4000, 3000, 80000, 1.2, &rng);
	CHECK(S);
	starfa_options opts;
	starfa_options_default(&opts);
	opts.scheduler = "heteroprio";
	CHECK_OK(testing_runtime_with(&opts));
	CHECK(strcmp(starfa_scheduler_name(), "heteroprio") == 0);
	starfa_tiling_options o = {4, 4, 0, 0, 0, 1, 2, 0.3, 0.3};
	int64_t tasks[2];
	CHECK_OK(heteroprio_sddmm(S, &o, 16, &rng, tasks));
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(S, &o, &t));
	CHECK_MSG(tasks[STARFA_WORKER_CPU] == tiles_in(t, 2, 4) && tasks[STARFA_WORKER_CUDA] == tiles_in(t, 0, 2),
		  "%lld cpu and %lld cuda tasks for %lld and %lld tiles", (long long)tasks[0], (long long)tasks[1],
		  (long long)tiles_in(t, 2, 4), (long long)tiles_in(t, 0, 2));
	starfa_tiled_free(t);
	/* A grid without a placement is the GPUs' (and its per-tile tasks placed on either kind wait in the
	 * shared buckets, which the cores leave to the GPU at the default slow factor). */
	starfa_tiling_options unplaced = {3, 3, 0};
	CHECK_OK(heteroprio_sddmm(S, &unplaced, 16, &rng, tasks));
	CHECK_OK(starfa_tiled_create(S, &unplaced, &t));
	CHECK(tasks[STARFA_WORKER_CPU] == 0 && tasks[STARFA_WORKER_CUDA] == tiles_in(t, 0, 3));
	starfa_tiled_free(t);
	testing_runtime_stop();
	starfa_csr_free(S);
	return 0;
}

/* A grid nobody placed is the GPUs' alone where there are GPUs: the automatic one has a tile a GPU, an
 * explicit one keeps its tiles, and every task runs on a GPU; STARFA_PLACEMENT=any gives the tasks back
 * to StarPU (the results are the reference's either way). */
TEST(placement_cuda, unplaced_grids_run_on_gpus)
{
	SKIP_UNLESS_BOTH_KINDS();
	const int64_t gpus = starfa_worker_count(STARFA_WORKER_CUDA);
	uint64_t rng = testing_seed() + 59;
	starfa_csr *S = testing_random_csr(6000, 5000, 200000, 1.0, &rng);
	CHECK(S);
	starfa_tiled *t = NULL;
	int64_t tasks[2];
	CHECK_OK(starfa_tiled_create(S, NULL, &t));
	const int64_t tiles = starfa_tiled_row_tiles(t) * starfa_tiled_col_tiles(t);
	CHECK_MSG(tiles >= gpus && tiles < 2 * gpus + 2, "%lld tiles for %lld GPUs", (long long)tiles, (long long)gpus);
	CHECK_OK(sddmm_on(S, t, 16, &rng, tasks, 1));
	CHECK(tasks[STARFA_WORKER_CPU] == 0 && tasks[STARFA_WORKER_CUDA] == tiles_in(t, 0, starfa_tiled_row_tiles(t)));
	starfa_tiled_free(t);
	starfa_tiling_options o = {4, 3, 0};
	CHECK_OK(starfa_tiled_create(S, &o, &t));
	CHECK_OK(sddmm_on(S, t, 16, &rng, tasks, 1));
	CHECK(tasks[STARFA_WORKER_CPU] == 0 && tasks[STARFA_WORKER_CUDA] == tiles_in(t, 0, 4));
	starfa_tiled_free(t);
	setenv("STARFA_PLACEMENT", "any", 1);
	int rc = starfa_tiled_create(S, &o, &t);
	unsetenv("STARFA_PLACEMENT");
	CHECK_OK(rc);
	CHECK_OK(sddmm_on(S, t, 16, &rng, tasks, 1));
	CHECK(tasks[STARFA_WORKER_CPU] + tasks[STARFA_WORKER_CUDA] == tiles_in(t, 0, 4));
	starfa_tiled_free(t);
	setenv("STARFA_PLACEMENT", "everywhere", 1);
	rc = starfa_tiled_create(S, &o, &t);
	unsetenv("STARFA_PLACEMENT");
	CHECK(rc == STARFA_EINVAL && t == NULL && strstr(starfa_last_error(), "STARFA_PLACEMENT"));
	starfa_csr_free(S);
	return 0;
}

/* One SGD pass at rank k over S on the kind its grid is placed on, n times. */
static int sgd_passes(const starfa_csr *S, int on_cpu, int64_t k, int n, uint64_t *rng)
{
	const int64_t w = k + 2;
	float *U = malloc(sizeof *U * (size_t)(S->nrows * w)), *V = malloc(sizeof *V * (size_t)(S->ncols * w));
	if (!U || !V) {
		free(U);
		free(V);
		return STARFA_ENOMEM;
	}
	for (int64_t i = 0; i < S->nrows * w; i++)
		U[i] = 0.1f * (float)testing_uniform(rng);
	for (int64_t i = 0; i < S->ncols * w; i++)
		V[i] = 0.1f * (float)testing_uniform(rng);
	starfa_tiling_options o = {1, 1, 0, 0, 0, 1, on_cpu, on_cpu ? 1.0 : 0.0, on_cpu ? 1.0 : 0.0};
	starfa_tiled *t = NULL;
	starfa_dense *dU = NULL, *dV = NULL;
	starfa_sums *sse = NULL;
	int rc = testing_sgd_operands(S, &o, U, V, w, &t, &dU, &dV, &sse);
	starfa_sgd_step step = {k, 0.001f, 0.05f, 0.05f, 0.0f, 0, 0, 1, 0, 0};
	for (int i = 0; i < n && !rc; i++) {
		step.epoch = (uint64_t)i;
		rc = starfa_task_sgd(t, 0, 0, dU, dV, NULL, NULL, &step, sse, 0, NULL);
		if (!rc)
			rc = starfa_wait();
	}
	testing_sgd_operands_free(t, dU, dV, sse);
	free(U);
	free(V);
	return rc;
}

/* The planner reads one variant's GPU samples when asked (an SGD pass's rank): a rank never run has no
 * GPU curve, however many samples the others have (a core's curve takes every variant). The models are written into a StarPU home of the
 * test's own at shutdown and read back by a second start. */
TEST(placement_cuda, plan_reads_one_variant)
{
	SKIP_UNLESS_BOTH_KINDS();
	testing_home_private("plan-home");
	uint64_t rng = testing_seed() + 61;
	starfa_csr *S = testing_random_csr(3000, 2000, 60000, 0.5, &rng);
	int rc = S ? 0 : 1;
	starfa_split none[2], k8[2], k12[2], asked[2], refused[2];
	starfa_tiling_options any = {0}, at8 = {0}, at12 = {0};
	/* the plans below are the defaults': a placement or share exported for the test run would change them */
	const char *was_placement = getenv("STARFA_PLACEMENT"), *was_share = getenv("STARFA_CPU_SHARE");
	char *saved_placement = was_placement ? strdup(was_placement) : NULL;
	char *saved_share = was_share ? strdup(was_share) : NULL;
	unsetenv("STARFA_PLACEMENT");
	unsetenv("STARFA_CPU_SHARE");
	for (int round = 0; round < 2 && !rc; round++) {
		starfa_options all;
		starfa_options_default(&all);
		all.calibrate = round == 0; /* recording asked for, whatever the scheduler (heteroprio's default) */
		rc = testing_runtime_with(&all);
		if (!rc && round == 0) { /* rank 8 on both kinds, enough samples for the history */
			rc = sgd_passes(S, 1, 8, 12, &rng);
			if (!rc)
				rc = sgd_passes(S, 0, 8, 12, &rng);
		}
		if (!rc && round == 1) {
			const starfa_sgd_step s8 = {.rank = 8}, s12 = {.rank = 12};
			at8.by_variant = at12.by_variant = 1;
			at8.model_variant = starfa_sgd_model_variant(&s8);
			at12.model_variant = starfa_sgd_model_variant(&s12);
			rc = starfa_plan_tiling("sgd", 60000 * 8.0, 60000 * 8.0, 1, &any, none);
			if (!rc)
				rc = starfa_plan_tiling("sgd", 60000 * 8.0, 60000 * 8.0, 1, &at8, k8);
			if (!rc)
				rc = starfa_plan_tiling("sgd", 60000 * 12.0, 60000 * 12.0, 1, &at12, k12);
			/* an operation that asks for the split by default gets it planned where STARFA_PLACEMENT
			 * is unset, not where it says gpu */
			starfa_tiling_options by_default = at8;
			by_default.split_by_default = 1;
			if (!rc)
				rc = starfa_plan_tiling("sgd", 60000 * 8.0, 60000 * 8.0, 1, &by_default, asked);
			setenv("STARFA_PLACEMENT", "gpu", 1);
			if (!rc)
				rc = starfa_plan_tiling("sgd", 60000 * 8.0, 60000 * 8.0, 1, &by_default, refused);
			unsetenv("STARFA_PLACEMENT");
		}
		testing_runtime_stop();
	}
	testing_env_restore("STARFA_PLACEMENT", saved_placement);
	testing_env_restore("STARFA_CPU_SHARE", saved_share);
	testing_home_restore();
	starfa_csr_free(S);
	CHECK_OK(rc);
	CHECK_MSG(none[0].calibrated && k8[0].calibrated && !k12[0].calibrated,
		  "calibrated: every variant %d, rank 8 %d, rank 12 %d", none[0].calibrated, k8[0].calibrated,
		  k12[0].calibrated);
	CHECK(isfinite(k8[0].cuda_ms) && k8[0].cuda_ms > 0 && isfinite(k8[0].cpu_ms) && !isfinite(k12[0].cuda_ms));
	CHECK(isfinite(k12[0].cpu_ms)); /* a core's curve takes every variant: its time follows the cost */
	CHECK_MSG(isnan(k8[0].best_share) && isfinite(asked[0].best_share) && isnan(refused[0].best_share),
		  "the split planned: by default %g, asked for %g, STARFA_PLACEMENT=gpu %g", k8[0].best_share,
		  asked[0].best_share, refused[0].best_share);
	CHECK(starfa_sgd_model_variant(&(starfa_sgd_step){.rank = 8}) != starfa_sgd_model_variant(&(starfa_sgd_step){.rank = 8, .half = 1}));
	return 0;
}

/* The default scheduler with GPUs follows the placement: heteroprio while starfa places the bands (on the
 * GPUs, or split between the kinds), dmda where StarPU places them (STARFA_PLACEMENT=any); a bad
 * STARFA_PLACEMENT is refused at start. */
TEST(placement_cuda, default_scheduler_follows_the_placement)
{
	if (getenv("STARPU_SCHED"))
		SKIP("STARPU_SCHED names the scheduler");
	SKIP_UNLESS_BOTH_KINDS();
	starfa_options opts;
	starfa_options_default(&opts);
	opts.silent = 1;
	static const char *const modes[] = {NULL, "gpu", "any", "split"};
	static const char *const want[] = {"heteroprio", "heteroprio", "dmda", "heteroprio"};
	const char *env = getenv("STARFA_PLACEMENT");
	char *saved = env ? strdup(env) : NULL;
	int rc[4];
	char name[4][32];
	testing_runtime_stop();
	for (int i = 0; i < 4; i++) {
		if (modes[i])
			setenv("STARFA_PLACEMENT", modes[i], 1);
		else
			unsetenv("STARFA_PLACEMENT");
		rc[i] = starfa_init(&opts);
		snprintf(name[i], sizeof name[i], "%s", rc[i] == 0 ? starfa_scheduler_name() : "");
		if (rc[i] == 0)
			starfa_shutdown();
	}
	testing_env_restore("STARFA_PLACEMENT", saved);
	for (int i = 0; i < 4; i++)
		CHECK_MSG(rc[i] == 0 && strcmp(name[i], want[i]) == 0, "STARFA_PLACEMENT=%s: %d, scheduler %s",
			  modes[i] ? modes[i] : "(unset)", rc[i], name[i]);
	return init_refuses(&opts, "STARFA_PLACEMENT", "everywhere");
}
/* With GPUs and the default worker count, the thread that starts the runtime is bound to the one core the
 * workers leave out (so that its waits never share a core with the CUDA worker's driver thread), and gets
 * its affinity back at the last shutdown. */
TEST(placement_cuda, submitting_thread_on_the_free_core)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	cpu_set_t before, during, after;
	testing_runtime_stop(); /* a runtime the tests before started may hold this thread on its core */
	CHECK(pthread_getaffinity_np(pthread_self(), sizeof before, &before) == 0);
	if (CPU_COUNT(&before) < 4)
		SKIP("fewer than 4 cores: no core is left out of the workers");
	starfa_options opts;
	starfa_options_default(&opts);
	CHECK_OK(testing_runtime_with(&opts));
	CHECK(pthread_getaffinity_np(pthread_self(), sizeof during, &during) == 0);
	const int64_t workers = starfa_worker_count(STARFA_WORKER_CPU) + starfa_worker_count(STARFA_WORKER_CUDA);
	CHECK_MSG(CPU_COUNT(&during) == 1, "the submitting thread may run on %d cores (%lld workers on %d)",
		  CPU_COUNT(&during), (long long)workers, CPU_COUNT(&before));
	CHECK_MSG(workers + 1 <= CPU_COUNT(&before), "%lld workers and the submitting thread on %d cores",
		  (long long)workers, CPU_COUNT(&before));
	testing_runtime_stop();
	CHECK(pthread_getaffinity_np(pthread_self(), sizeof after, &after) == 0);
	CHECK_MSG(CPU_EQUAL(&before, &after), "the affinity was not given back (%d cores, %d before)", CPU_COUNT(&after),
		  CPU_COUNT(&before));
	return 0;
}
#else
TEST(placement_cuda, not_built)
{
	SKIP("starfa was configured without CUDA");
}
#endif
