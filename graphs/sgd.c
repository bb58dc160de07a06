/* SGD matrix factorization as a task graph: the ratings in a P x P grid of tiles; an epoch is P strata,
 * stratum s the P tiles (i, (i + shift_s) mod P), which share no row band and no column band. A task on
 * tile (i, j) reads and writes user block i and item block j, so StarPU runs a stratum's tiles at once
 * and the tiles of different strata that share a block in order: no locks. Where the cores have row
 * bands of their own (a split) the grid is nested instead: see sgd_iterate. The strata's order is drawn
 * afresh every epoch from the seed, and so is the order of the entries inside each tile's chunks
 * (partial randomization, cpu/sgd.h).
 *
 * The model is the explicit model ALS fits: r ~ mu + b_u + c_i + p_u·q_i, with L2 regularization on the
 * factors (lambda) and the biases (lambda_bias). Rows are augmented as ALS's: users [p_u, b_u, 1], items
 * [q_i, 1, c_i], so that their dot product is the prediction less mu: the loss is one pass a row band in
 * the graph (starfa_reduce_sqerr), no prediction written out.
 *
 * Learning rates: the bold driver (default) grows the rate 5% after an epoch whose training loss fell,
 * and halves it and redoes the epoch from the factors saved before it when the loss rose or stopped being
 * finite; invtime sets lr_t = lr / (1 + decay t^1.5) (cuMF_SGD's schedule); adagrad gives every row its
 * own rate lr / sqrt(G), G accumulating its gradients' mean squares (LIBMF's). Training stops once the
 * loss's relative change stays under tol.
 *
 * With fp16 the tasks update FP16 copies of the factor rows (half the bytes a GPU moves per update, the
 * arithmetic in FP32); the FP32 factors are converted from them, in the graph, before every evaluation,
 * and the bold driver's saved factors go back through the same conversion. */
#include "cpu/half.h"
#include "model/model.h"
#include "storage/idmap.h"
#include "train/algorithms.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SCHEDULE_BOLDDRIVER = 0, SCHEDULE_INVTIME = 1, SCHEDULE_ADAGRAD = 2 };

/* The parameters (names and ranges in sgd_params below). */
struct sgd_options {
	int64_t rank, iters, strata, seed, eval_k, eval_every;
	double lambda, lambda_bias, lr, decay, tol;
	int schedule, biases, fp16;
};

/* The smallest automatic tile, in entries on average. */
#define MIN_TILE_NNZ 4096
/* The entries one wave of the CUDA kernel's updaters takes at once: 8,192 groups (an H100's or H200's
 * occupancy) of a chunk of 256 entries each (cpu/sgd.h's STARFA_SGD_CHUNK). */
#define GPU_WAVE_ENTRIES (8192 * 256)
/* What a core's band costs a split epoch beyond its tiles' passes (starfa_tiling_options.
 * cpu_band_overhead_us): the item blocks' trips between the GPU and the cores, twice an epoch. Measured
 * on an H200 host with 14 cores, the GPU stood idle 0.5 ms an epoch longer in a 5% split than alone, 36 µs
 * a core (bench/PLACEMENT.md); a split is also taken only where it gains 5% of the epoch. */
#define SPLIT_OVERHEAD_US 50.0

/* The split's guard (split_guard, starfa_split_guard_step): STARFA_SPLIT_GUARD's settings. */
enum { GUARD_ON = 0, GUARD_OFF = 1, GUARD_FORCE = 2 };

/* A bold driver that keeps halving without an epoch that lowers the loss has diverged. */
#define MAX_HALVINGS 30

struct sgd {
	struct sgd_options o;
	const starfa_coo *coo;
	starfa_csr *csr;
	starfa_tiled *S;
	int64_t k, w;             /* rank, row width (k + 2, padded to a multiple of 4) */
	int64_t P, Q;             /* row bands and column bands (Q = P, or (G + 1) C in a split) */
	int64_t G, C;             /* a split (sgd_iterate): the GPUs' row bands and the cores' (0, 0: none) */
	starfa_split split[2];    /* where the strata's tiles run (row bands; the columns follow) */
	float *U, *V, *saved_U, *saved_V, *GU, *GV;
	starfa_dense *dU, *dV, *dsU, *dsV, *dGU, *dGV; /* factors, the bold driver's copies, AdaGrad's accumulators */
	uint16_t *hU, *hV;        /* fp16: the rows the tasks update, as FP16 (w halves a row) */
	starfa_dense *dhU, *dhV;  /* their blocks, w / 2 floats wide */
	starfa_sums *sse;         /* per task, in the slot of its first tile: the squared errors its last pass met */
	double *slots;
	starfa_sums *obj;         /* the objective's parts (objective): nobj slots */
	double *obj_slots;
	int64_t nobj;
	double mu, lr, prev_loss;
	int64_t epoch;            /* epochs accepted so far */
	int halvings;             /* bold driver: halvings since the last accepted epoch */
	int64_t cores_block;      /* split: the column block the cores took last (-1: none) */
	int cores_pinned;         /* split: core c runs band G + c's tiles (else any core takes a ready one) */
	int guard;                /* split: STARFA_SPLIT_GUARD (GUARD_ON, GUARD_OFF, GUARD_FORCE) */
	int ran_blocks;           /* split: the last epoch's GPUs ran the cores' blocks too (guarded.on_gpus as
				   * it began) */
	int cores_gpu;            /* fallen back: the GPU that ran the cores' block last */
	starfa_split_guard guarded; /* split: the epochs' verdicts; on_gpus: the GPUs run the cores' blocks from
				     * the next epoch (split_guard) */
	double gpu_share;         /* split: the GPUs' bands' entries over all */
	double gpu_alone_s;       /* split: the last epoch on the GPUs alone at their measured speed (NAN: unknown) */
	int rejected;             /* the last iteration's epoch was undone */
	struct starfa_matched test;
	struct starfa_test_grid tgrid; /* the test entries on the training grid: the RMSE in the graph */
	int has_test;
};

static void sgd_defaults(void *params)
{
	struct sgd_options *o = params;
	/* MovieLens latest-small, 80/20: test RMSE 0.877 at these (lambda 0.05: 0.898, 0.15: 0.88-0.90). */
	*o = (struct sgd_options){.rank = 32,
				  .iters = 60,
				  .strata = 0,
				  .seed = 1,
				  .eval_k = 10,
				  .eval_every = 1,
				  .lambda = 0.1,
				  .lambda_bias = 0.1,
				  .lr = 0.01,
				  .decay = 0.1,
				  .tol = 1e-4,
				  .schedule = SCHEDULE_BOLDDRIVER,
				  .biases = 1};
}

static int sgd_check(const void *params)
{
	const struct sgd_options *o = params;
	if (o->rank < 1 || o->rank > 1024)
		return starfa_set_error(STARFA_EINVAL, "rank %lld outside [1, 1024]", (long long)o->rank);
	if (!(o->lr > 0) || !isfinite(o->lr))
		return starfa_set_error(STARFA_EINVAL, "the learning rate must be a positive number, not %g", o->lr);
	if (!(o->lambda >= 0) || !(o->lambda_bias >= 0) || !isfinite(o->lambda) || !isfinite(o->lambda_bias))
		return starfa_set_error(STARFA_EINVAL, "the regularizations must be numbers >= 0");
	if (o->iters < 1 || o->eval_every < 1 || o->strata < 0 || !(o->tol >= 0) || !(o->decay >= 0))
		return starfa_set_error(STARFA_EINVAL, "iters and eval_every must be >= 1, strata, tol and decay >= 0");
	if (o->schedule != SCHEDULE_BOLDDRIVER && o->schedule != SCHEDULE_INVTIME && o->schedule != SCHEDULE_ADAGRAD)
		return starfa_set_error(STARFA_EINVAL, "unknown schedule %d", o->schedule);
	return 0;
}

static int64_t sgd_iterations(const void *params)
{
	const struct sgd_options *o = params;
	/* The bold driver may redo epochs: room for them, the stopping rule ends it. */
	return o->schedule == SCHEDULE_BOLDDRIVER ? o->iters + MAX_HALVINGS : o->iters;
}


/* Small random factors, zero biases, the constant columns, zero padding. */
static void init_rows(float *F, int64_t rows, int64_t k, int64_t w, int user_side, uint64_t seed)
{
	uint64_t state = seed * 0x2545f4914f6cdd1dull + (user_side ? 11 : 12);
	const float scale = 0.1f;
	for (int64_t r = 0; r < rows; r++) {
		float *row = F + r * w;
		memset(row, 0, (size_t)w * sizeof *row);
		for (int64_t d = 0; d < k; d++)
			row[d] = scale * starfa_uniform_pm1(&state);
		row[k] = user_side ? 0.0f : 1.0f;
		row[k + 1] = user_side ? 1.0f : 0.0f;
	}
}

static void current_factors(const struct sgd *g, struct starfa_factors *f)
{
	*f = (struct starfa_factors){
		.kind = STARFA_MODEL_EXPLICIT,
		.nusers = g->csr->nrows,
		.nitems = g->csr->ncols,
		.rank = g->k,
		.U = g->U,
		.V = g->V,
		.ub = g->o.biases ? g->U + g->k : NULL,
		.ib = g->o.biases ? g->V + g->k + 1 : NULL,
		.ldu = g->w,
		.ldv = g->w,
		.ub_stride = g->w,
		.ib_stride = g->w,
		.mu = g->mu,
	};
}

static void sgd_free(void *state)
{
	struct sgd *g = state;
	starfa_sums_free(g->sse);
	starfa_sums_free(g->obj);
	free(g->obj_slots);
	starfa_dense_free(g->dU);
	starfa_dense_free(g->dV);
	starfa_dense_free(g->dsU);
	starfa_dense_free(g->dsV);
	starfa_dense_free(g->dGU);
	starfa_dense_free(g->dGV);
	starfa_dense_free(g->dhU);
	starfa_dense_free(g->dhV);
	starfa_tiled_free(g->S);
	starfa_csr_free(g->csr);
	free(g->U);
	free(g->V);
	free(g->saved_U);
	free(g->saved_V);
	free(g->GU);
	free(g->GV);
	free(g->hU);
	free(g->hV);
	free(g->slots);
	starfa_test_grid_free(&g->tgrid);
	starfa_matched_free(&g->test);
	free(g);
}

static int objective(struct sgd *g, double *sse_out, double *loss_out);
static const starfa_task_attr *user_block_attr(const struct sgd *g, int64_t block, starfa_task_attr *buf);

/* STARFA_SPLIT_GUARD: "on" (unset, the default: split_guard may hand the cores' blocks to the GPUs),
 * "off" (the split stays, however slow the cores), "force" (the GPUs take the cores' blocks after the first
 * epoch: how the fallback itself runs). */
static int guard_mode(int *mode)
{
	static const char *const names[] = {"on", "off", "force"}; /* GUARD_ON, GUARD_OFF, GUARD_FORCE */
	return starfa_env_choice("STARFA_SPLIT_GUARD", names, 3, mode);
}

static int sgd_setup(const starfa_coo *train, const starfa_coo *test, const void *params, void **state)
{
	struct sgd *g = starfa_calloc(1, sizeof *g);
	if (!g)
		return STARFA_ENOMEM;
	*state = g;
	g->cores_block = -1;
	g->o = *(const struct sgd_options *)params;
	g->coo = train;
	g->k = g->o.rank;
	/* rows padded with zeros to 16 bytes: the kernels' vector loads */
	g->w = g->o.fp16 ? (g->k + 2 + 7) / 8 * 8 : (g->k + 2 + 3) / 4 * 4;
	g->lr = g->o.lr;
	int rc = guard_mode(&g->guard);
	if (!rc)
		rc = starfa_csr_from_coo(train, &g->csr);
	if (rc)
		return rc;
	const starfa_csr *c = g->csr;
	double sum = 0;
	for (int64_t e = 0; e < c->nnz; e++) {
		if (!isfinite(c->val[e]))
			return starfa_set_error(STARFA_EINVAL, "training value %lld is not finite", (long long)e);
		sum += c->val[e];
	}
	g->mu = sum / (double)c->nnz;
	/* P strata: twice the workers, so that a stratum's P tiles keep every worker busy while their
	 * sizes differ, but no tile under MIN_TILE_NNZ entries on average (a task's own cost, tens of
	 * microseconds, would outweigh its updates); no more than the rows or columns allow. */
	int workers = starfa_worker_count(STARFA_WORKER_CPU) + starfa_worker_count(STARFA_WORKER_CUDA);
	int64_t P = g->o.strata;
	/* With GPUs the measured speeds decide (starfa_plan_tiling): two bands a GPU, and one a core when
	 * the cores' share of an epoch pays; a stratum then holds tiles of both kinds. One band a GPU where
	 * a GPU's tile at one band a GPU (nnz / ngpu^2 entries) could not fill one wave of the kernel's
	 * updaters (GPU_WAVE_ENTRIES): a small tile's time is its updaters' chain of updates whatever its
	 * size, so a second band a GPU only doubles the chains an epoch runs one after the other (measured
	 * on one GPU: bench/SGD.md). */
	starfa_tiling_options tiling = {P, P, 0, 0, 0};
	if (P == 0) {
		double epoch = (double)c->nnz * (double)g->o.rank;
		const int ngpu = starfa_worker_count(STARFA_WORKER_CUDA);
		int64_t per_gpu = ngpu > 0 && c->nnz / ((int64_t)ngpu * ngpu) < GPU_WAVE_ENTRIES ? 1 : 2;
		/* In a split each core runs its band as one tile of each of the (G + 1) C column bands, one
		 * after the other (sgd_iterate), G the GPUs' bands (one a GPU) and C the cores. */
		const int64_t ncpu = starfa_worker_count(STARFA_WORKER_CPU);
		tiling.cpu_band_tasks = ncpu > 0 ? ncpu * (ngpu + 1) : 0;
		/* this rank's samples alone: a GPU's pass takes about as long at rank 32 as at 16, and a core's
		 * rank-16 rows are padded to 20 floats */
		const starfa_sgd_step settings = {.rank = g->k, .adagrad = g->o.schedule == SCHEDULE_ADAGRAD, .half = g->o.fp16};
		tiling.by_variant = 1;
		tiling.model_variant = starfa_sgd_model_variant(&settings);
		/* in a split a GPU's band runs G + 1 span tasks, one a stratum, each over a whole column block: a
		 * span updates faster an entry than a tile (8% at rank 16 on the H200), so its own samples predict
		 * the split's GPU part where the model has them (starfa calibrate and split runs record them) */
		tiling.by_split_variant = 1;
		tiling.split_model_variant = starfa_sgd_span_model_variant(&settings);
		tiling.cuda_split_tasks = ngpu + 1;
		tiling.cpu_band_overhead_us = SPLIT_OVERHEAD_US;
		tiling.split_by_default = 1; /* planned, it ran 1.12-1.20x faster than the GPU alone: bench/PLACEMENT.md */
		if ((rc = starfa_plan_tiling("sgd", epoch, epoch, per_gpu, &tiling, g->split)))
			return rc;
		if (tiling.placed && tiling.cpu_bands > 0 && per_gpu > 1) {
			/* A split (sgd_iterate): one row band a GPU, whose task takes a whole column block; where the
			 * split does not hold there, the GPUs alone at two bands a GPU, as planned first. */
			if ((rc = starfa_plan_tiling("sgd", epoch, epoch, 1, &tiling, g->split)))
				return rc;
			if (!(tiling.placed && tiling.cpu_bands > 0) &&
			    (rc = starfa_plan_tiling("sgd", epoch, epoch, per_gpu, &tiling, g->split)))
				return rc;
		}
		P = tiling.placed ? tiling.row_tiles : 2 * (workers > 0 ? workers : 1);
		while (!tiling.placed && P > 1 && c->nnz / (P * P) < MIN_TILE_NNZ)
			P--;
	}
	if (P > c->nrows || P > c->ncols) {
		if (g->o.strata > 0)
			return starfa_set_error(STARFA_EINVAL, "%lld strata need at least %lld rows and columns; the matrix "
							       "has %lld x %lld", (long long)P, (long long)P,
						(long long)c->nrows, (long long)c->ncols);
		P = c->nrows < c->ncols ? c->nrows : c->ncols;
	}
	if (P > c->nrows || P > c->ncols)
		tiling.placed = 0; /* a tiny matrix: no bands to place */
	g->P = g->Q = tiling.row_tiles = tiling.col_tiles = P;
	const int64_t C = tiling.cpu_bands, G = P - C;
	if (tiling.placed && C > 0 && G > 0 && (G + 1) * C <= c->ncols) {
		/* A split: the cores' share in thin row bands of their own (one a core); the columns cut
		 * evenly into G + 1 blocks of C bands each (sgd_iterate). A GPU's task takes a whole block,
		 * as wide as a tile of the GPUs alone: on tiles as narrow as the cores' the GPU's kernel ran
		 * at half its speed (bench/SGD.md). */
		tiling.cpu_rows_only = 1;
		g->Q = tiling.col_tiles = (G + 1) * C;
		g->G = G;
		g->C = C;
		/* The cores' tiles go to whichever core is free under heteroprio (the default with GPUs), whose
		 * idle cores take a ready task at once. Pinned a band a core, one core shared with another
		 * program held back every epoch: 1.6x slower than the GPU alone, against 1.07x dealt (its busy
		 * core took half the others' tiles); without a busy core the two measured the same, but for one
		 * pinned run 1.7x slower whose cause was not found (bench/PLACEMENT.md). Any other scheduler
		 * keeps each band on its core, its tasks a chain anyway: dmda, before its models know these
		 * tasks, queued ready tiles behind busy cores and left half the cores idle. */
		g->cores_pinned = strcmp(starfa_scheduler_name(), "heteroprio") != 0;
	}
	if ((rc = starfa_tiled_create(c, &tiling, &g->S)))
		return rc;
	if (g->C > 0) {
		int64_t on_gpus = 0;
		for (int64_t i = 0; i < g->G; i++)
			for (int64_t j = 0; j < g->Q; j++)
				on_gpus += starfa_tiled_tile_nnz(g->S, i, j);
		g->gpu_share = (double)on_gpus / (double)c->nnz;
	}
	g->gpu_alone_s = NAN;
	size_t nu = (size_t)(c->nrows * g->w), ni = (size_t)(c->ncols * g->w);
	g->U = starfa_malloc(nu, sizeof *g->U);
	g->V = starfa_malloc(ni, sizeof *g->V);
	g->saved_U = starfa_malloc(nu, sizeof *g->U);
	g->saved_V = starfa_malloc(ni, sizeof *g->V);
	g->slots = starfa_malloc((size_t)(P * g->Q), sizeof *g->slots);
	if (!g->U || !g->V || !g->saved_U || !g->saved_V || !g->slots)
		return STARFA_ENOMEM;
	init_rows(g->U, c->nrows, g->k, g->w, 1, (uint64_t)g->o.seed);
	init_rows(g->V, c->ncols, g->k, g->w, 0, (uint64_t)g->o.seed);
	memcpy(g->saved_U, g->U, nu * sizeof *g->U);
	memcpy(g->saved_V, g->V, ni * sizeof *g->V);
	if (g->o.fp16) {
		g->hU = starfa_malloc(nu, sizeof *g->hU);
		g->hV = starfa_malloc(ni, sizeof *g->hV);
		if (!g->hU || !g->hV)
			return STARFA_ENOMEM;
		starfa_half_store(g->U, g->hU, (int64_t)nu);
		starfa_half_store(g->V, g->hV, (int64_t)ni);
		if ((rc = starfa_dense_create(g->S, STARFA_ROWS, (float *)g->hU, g->w / 2, &g->dhU)) ||
		    (rc = starfa_dense_create(g->S, STARFA_COLS, (float *)g->hV, g->w / 2, &g->dhV)))
			return rc;
	}
	if ((rc = starfa_dense_create(g->S, STARFA_ROWS, g->U, g->w, &g->dU)) ||
	    (rc = starfa_dense_create(g->S, STARFA_COLS, g->V, g->w, &g->dV)) ||
	    (rc = starfa_dense_create(g->S, STARFA_ROWS, g->saved_U, g->w, &g->dsU)) ||
	    (rc = starfa_dense_create(g->S, STARFA_COLS, g->saved_V, g->w, &g->dsV)) ||
	    (rc = starfa_sums_create(P * g->Q, &g->sse)))
		return rc;
	g->nobj = starfa_tiled_row_tiles(g->S) + 2 * (starfa_dense_blocks(g->dU) + starfa_dense_blocks(g->dV));
	if (!(g->obj_slots = starfa_malloc((size_t)g->nobj, sizeof *g->obj_slots)))
		return STARFA_ENOMEM;
	if ((rc = starfa_sums_create(g->nobj, &g->obj)))
		return rc;
	if (g->o.schedule == SCHEDULE_ADAGRAD) {
		g->GU = starfa_malloc((size_t)c->nrows, sizeof *g->GU);
		g->GV = starfa_malloc((size_t)c->ncols, sizeof *g->GV);
		if (!g->GU || !g->GV)
			return STARFA_ENOMEM;
		for (int64_t r = 0; r < c->nrows; r++)
			g->GU[r] = 1.0f;
		for (int64_t r = 0; r < c->ncols; r++)
			g->GV[r] = 1.0f;
		if ((rc = starfa_dense_create(g->S, STARFA_ROWS, g->GU, 1, &g->dGU)) ||
		    (rc = starfa_dense_create(g->S, STARFA_COLS, g->GV, 1, &g->dGV)))
			return rc;
	}
	/* The bold driver compares every epoch with the loss before it: the first with the start's. */
	double sse;
	if ((rc = objective(g, &sse, &g->prev_loss)))
		return rc;
	if (test) {
		rc = starfa_match_entries(test, train->row_ids, train->col_ids, c->nrows, c->ncols, &g->test);
		if (!rc) /* once: the metrics after every iteration reuse it */
			rc = starfa_matched_count_cold(&g->test, g->csr, c->ncols);
		if (!rc)
			rc = starfa_test_grid_create(g->S, &g->test, &g->tgrid);
		g->has_test = rc == 0;
	}
	return rc;
}

/* A random permutation of [0, n) drawn from *state: the order of the strata's shifts. */
static void shuffle(int64_t *perm, int64_t n, uint64_t *state)
{
	for (int64_t i = 0; i < n; i++)
		perm[i] = i;
	for (int64_t i = n - 1; i > 0; i--) {
		int64_t j = (int64_t)((starfa_uniform_pm1(state) + 1.0f) * 0.5f * (float)(i + 1));
		j = j > i ? i : j;
		int64_t t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
}

/* An epoch is P strata. Stratum s holds tiles (i, (i + shift_s) mod P) for every row band i: they share no
 * row and no column band, and over the P strata each row band meets every column band once; the shifts
 * are a random permutation.
 *
 * A split (G GPU row bands, then C thin ones for the cores; the columns in G + 1 blocks of C bands) nests
 * two such schedules. An epoch is G + 1 strata of blocks: in stratum s GPU band i takes block
 * (i + shift_s) mod (G + 1) whole, in one task (starfa_task_sgd_span), and the cores the block left
 * over, (G + shift_s) mod (G + 1), as a C x C grid of their own: C sub-strata of C tiles, the shifts
 * another permutation. So a GPU's tiles are as wide as without the cores (1 / (G + 1) of the columns),
 * while each core meets thin tiles; StarPU starts a block on the GPU once the cores' last sub-stratum on
 * it is done, and the cores' first on a block once the GPU's task is. */
static int sgd_iterate(void *state, int64_t iteration)
{
	struct sgd *g = state;
	const int64_t P = g->P, Q = g->Q, G = g->G, C = g->C, blocks = G + 1;
	if (g->o.schedule == SCHEDULE_INVTIME)
		g->lr = g->o.lr / (1.0 + g->o.decay * pow((double)g->epoch, 1.5));
	int64_t *shifts = starfa_malloc((size_t)(P + C), sizeof *shifts);
	if (!shifts)
		return STARFA_ENOMEM;
	g->ran_blocks = g->guarded.on_gpus;
	/* Every attempt draws its own orders, a redone epoch too. */
	uint64_t rng = starfa_seed_stream((uint64_t)g->o.seed, (uint64_t)iteration << 8 | 3);
	shuffle(shifts, C > 0 ? blocks : P, &rng);
	starfa_sgd_step step = {g->k,
				(float)g->lr,
				(float)g->o.lambda,
				(float)g->o.lambda_bias,
				(float)g->mu,
				g->o.biases,
				g->o.schedule == SCHEDULE_ADAGRAD,
				(uint64_t)g->o.seed,
				(uint64_t)iteration,
				g->o.fp16};
	starfa_dense *U = g->o.fp16 ? g->dhU : g->dU, *V = g->o.fp16 ? g->dhV : g->dV;
	int rc = 0;
	if (C == 0) {
		for (int64_t s = 0; s < P && !rc; s++)
			for (int64_t i = 0; i < P && !rc; i++) {
				int64_t j = (i + shifts[s]) % P;
				rc = starfa_task_sgd(g->S, i, j, U, V, g->dGU, g->dGV, &step, g->sse, i * Q + j, NULL);
			}
	}
	/* In a split a GPU's band keeps to that GPU; the cores' tiles go to any core, or to the band's
	 * (g->cores_pinned, sgd_setup), or once the cores have fallen behind, as a block to a GPU. */
	const int ngpu = starfa_worker_count(STARFA_WORKER_CUDA);
	int64_t *sub = shifts + P;
	for (int64_t s = 0; C > 0 && s < blocks && !rc; s++) {
		for (int64_t i = 0; i < G && !rc; i++) {
			const int64_t j = (i + shifts[s]) % blocks * C;
			const starfa_task_attr on = {0, starfa_worker_of(STARFA_WORKER_CUDA, ngpu > 0 ? (int)(i % ngpu) : 0), 0};
			rc = starfa_task_sgd_span(g->S, i, j, C, U, V, g->dGU, g->dGV, &step, g->sse, i * Q + j, &on);
		}
		const int64_t first = (G + shifts[s]) % blocks * C; /* the cores' block */
		g->cores_block = first / C;
		if (g->ran_blocks) { /* the cores' block in one task on a GPU (split_guard) */
			g->cores_gpu = ngpu > 0 ? (int)(s % ngpu) : 0;
			const starfa_task_attr on = {0, starfa_worker_of(STARFA_WORKER_CUDA, g->cores_gpu), 0};
			rc = starfa_task_sgd_block(g->S, G, first, C, U, V, g->dGU, g->dGV, &step, g->sse, G * Q + first, &on);
			continue;
		}
		shuffle(sub, C, &rng);
		for (int64_t t = 0; t < C && !rc; t++)
			for (int64_t c = 0; c < C && !rc; c++) {
				const int64_t i = G + c, j = first + (c + sub[t]) % C;
				starfa_task_attr on; /* the band's user block's placement: its core, or any core */
				rc = starfa_task_sgd(g->S, i, j, U, V, g->dGU, g->dGV, &step, g->sse, i * Q + j,
						     user_block_attr(g, i, &on));
			}
	}
	free(shifts);
	int wrc = starfa_wait();
	return rc ? rc : wrc;
}

/* The first tile whose pass met a non-finite error, for the message of a diverged epoch. */
static void first_bad_tile(struct sgd *g, int64_t *ti, int64_t *tj, int64_t *rows, int64_t *span)
{
	*ti = *tj = -1;
	*rows = *span = 1;
	if (starfa_sums_read(g->sse, g->slots) != 0)
		return;
	for (int64_t t = 0; t < g->P * g->Q; t++) {
		const int64_t i = t / g->Q, j = t % g->Q;
		/* run as blocks, the cores' blocks' sums are in their first tile's slot (the others' are stale) */
		if (g->ran_blocks && i >= g->G && (i > g->G || j % g->C != 0))
			continue;
		if (!isfinite(g->slots[t])) {
			*ti = i;
			*tj = j;
			*span = g->C > 0 && (i < g->G || g->ran_blocks) ? g->C : 1; /* a span or block: C tiles a slot */
			*rows = g->C > 0 && i >= g->G && g->ran_blocks ? g->C : 1;
			return;
		}
	}
}

/* Copies src's blocks into dst's, by tasks. */
/* Split: where the item bands of dense block `block` were updated last. The cores' block's evaluation
 * tasks (the regularization's sums, the bold driver's copies) run on the cores rather than on the GPU,
 * whose tasks are the evaluation's critical path, a sub-millisecond task each; a GPU's block's run on
 * that GPU's worker itself, so that they come before its next pass there: in StarPU's scheduler queue,
 * one copy waited behind the next epoch's span task (pinned to the worker, so taken first), 8.6 ms,
 * and with it the cores' first tiles on that band (bench/PLACEMENT.md). NULL (the block's own
 * placement) outside a split and before the first epoch. */
static const starfa_task_attr *item_block_attr(const struct sgd *g, int64_t block, starfa_task_attr *buf)
{
	if (g->C == 0 || g->cores_block < 0)
		return NULL;
	const int64_t blocks = g->G + 1;
	/* in the last stratum GPU band i took item block (i + shift) mod blocks, the cores block G's */
	const int64_t band = (block / g->C - g->cores_block + g->G + blocks) % blocks;
	const int ngpu = starfa_worker_count(STARFA_WORKER_CUDA);
	const int gpu = band < g->G ? (ngpu > 0 ? (int)(band % ngpu) : 0) : g->ran_blocks ? g->cores_gpu : -1;
	*buf = gpu < 0 ? (starfa_task_attr){0, 0, STARFA_WHERE_CPU}
		       : (starfa_task_attr){0, starfa_worker_of(STARFA_WORKER_CUDA, gpu), 0};
	return buf;
}

/* Split: the same for user block `block` (a row band's), whose band keeps to one worker every epoch:
 * GPU band i to GPU i mod ngpu, the cores' bands to the cores (band G + c to core c where they are
 * pinned); the cores' tiles take it too (sgd_iterate). With two GPUs or more, a copy placed on the CUDA
 * kind alone could otherwise run on another GPU than the band's, after that GPU's next span. */
static const starfa_task_attr *user_block_attr(const struct sgd *g, int64_t block, starfa_task_attr *buf)
{
	if (g->C == 0 || g->cores_block < 0)
		return NULL;
	const int ngpu = starfa_worker_count(STARFA_WORKER_CUDA), ncpu = starfa_worker_count(STARFA_WORKER_CPU);
	if (block < g->G)
		*buf = (starfa_task_attr){0, starfa_worker_of(STARFA_WORKER_CUDA, ngpu > 0 ? (int)(block % ngpu) : 0), 0};
	else if (g->ran_blocks) /* the GPU that ran the cores' block last */
		*buf = (starfa_task_attr){0, starfa_worker_of(STARFA_WORKER_CUDA, g->cores_gpu), 0};
	else if (g->cores_pinned) /* the band's own core, as its tiles (sgd_iterate) */
		*buf = (starfa_task_attr){0, starfa_worker_of(STARFA_WORKER_CPU, ncpu > 0 ? (int)((block - g->G) % ncpu) : 0), 0};
	else
		*buf = (starfa_task_attr){0, 0, STARFA_WHERE_CPU};
	return buf;
}

static int copy_factors(const struct sgd *g, starfa_dense *dst_u, starfa_dense *dst_v, const starfa_dense *src_u,
			const starfa_dense *src_v)
{
	int rc = 0;
	starfa_task_attr at;
	for (int64_t b = 0; b < starfa_dense_blocks(dst_u) && !rc; b++)
		rc = starfa_task_dense_map(dst_u, b, STARFA_DENSE_COPY, 0, 0, src_u, NULL, user_block_attr(g, b, &at));
	for (int64_t b = 0; b < starfa_dense_blocks(dst_v) && !rc; b++)
		rc = starfa_task_dense_map(dst_v, b, STARFA_DENSE_COPY, 0, 0, src_v, NULL, item_block_attr(g, b, &at));
	return rc;
}


/* The training objective of the current factors, every part in the graph and read back once: the
 * squared error at the training entries (a task a row band, starfa_task_sqerr_band with mu as the shift),
 * then for each side and block the squares of its factors and of its bias column (dense_reduce over those
 * columns), so that the factors stay where the tasks left them. objective_submit inserts the tasks,
 * objective_read waits for them; objective does both. */
static int objective_submit(struct sgd *g)
{
	int rc = 0;
	if (g->o.fp16 && !(rc = starfa_insert_dense_convert(g->dU, STARFA_FROM_HALF, g->dhU)))
		rc = starfa_insert_dense_convert(g->dV, STARFA_FROM_HALF, g->dhV);
	const int64_t bands = starfa_tiled_row_tiles(g->S);
	int64_t slot = 0;
	for (; slot < bands && !rc; slot++)
		rc = starfa_task_sqerr_band(g->S, STARFA_ROWS, slot, g->dU, g->dV, (float)g->mu, g->obj, slot, NULL);
	for (int s = 0; s < 2 && !rc; s++) {
		const starfa_dense *F = s ? g->dV : g->dU;
		const int64_t bias = s ? g->k + 1 : g->k; /* the user's bias column, or the item's */
		for (int64_t b = 0; b < starfa_dense_blocks(F) && !rc; b++) {
			starfa_task_attr buf;
			const starfa_task_attr *at = s ? item_block_attr(g, b, &buf) : user_block_attr(g, b, &buf);
			rc = starfa_task_dense_reduce_cols(F, b, 0, g->k, STARFA_REDUCE_SQUARES, NULL, 0, g->obj, slot++, at);
			if (!rc)
				rc = starfa_task_dense_reduce_cols(F, b, bias, 1, STARFA_REDUCE_SQUARES, NULL, 0, g->obj, slot++, at);
		}
	}
	if (rc)
		starfa_wait(); /* the tasks inserted before the failure still use the slots */
	return rc;
}

static int objective_read(struct sgd *g, double *sse_out, double *loss_out)
{
	const starfa_csr *c = g->csr;
	const int64_t bands = starfa_tiled_row_tiles(g->S);
	int rc = starfa_sums_read(g->obj, g->obj_slots);
	if (rc)
		return rc;
	double sse = 0, factors = 0, biases = 0;
	for (int64_t t = 0; t < bands; t++)
		sse += g->obj_slots[t];
	for (int64_t t = bands; t < g->nobj; t += 2) {
		factors += g->obj_slots[t];
		biases += g->obj_slots[t + 1];
	}
	*sse_out = sse;
	*loss_out = (sse + g->o.lambda * factors + g->o.lambda_bias * biases) / (double)c->nnz;
	return 0;
}

static int objective(struct sgd *g, double *sse_out, double *loss_out)
{
	int rc = objective_submit(g);
	return rc ? rc : objective_read(g, sse_out, loss_out);
}

/* The split's guard, after each epoch: the GPUs alone would have taken their busy time over their
 * share of the entries (at the speed they ran this epoch's spans, which is faster an entry than the
 * tiles they would run alone: this is the GPUs alone at their best, and it only starts a trial). An
 * epoch longer than that may have lost time to the cores: a core busy with another program holds back
 * the tiles of its band and their column blocks (1.07x the GPU alone once, bench/PLACEMENT.md). When
 * starfa_split_guard_step says so (the first epoch and those after an undone one aside: they move the
 * factors too), the GPUs take the cores' blocks from the next epoch on, each in one task
 * (starfa_task_sgd_block), for two epochs on trial; the measured second one decides whether they keep
 * them or the cores get them back. */
static void split_guard(struct sgd *g, const starfa_train_progress *p)
{
	const int ngpu = starfa_worker_count(STARFA_WORKER_CUDA);
	const double busy = p->stats.seconds[STARFA_WORKER_CUDA] / (ngpu > 0 ? ngpu : 1);
	/* fallen back, the GPUs' busy time is the whole epoch's on them */
	const double share = g->ran_blocks ? 1.0 : g->gpu_share;
	g->gpu_alone_s = busy > 0 && share > 0 ? busy / share : NAN;
	if (g->guard == GUARD_OFF)
		return;
	if (g->guard == GUARD_FORCE) { /* given way for good after the first epoch */
		g->guarded.on_gpus = g->guarded.given_way = 1;
		return;
	}
	/* the first epoch, and one after an undone epoch (whose restore brought the factors home), moved
	 * the factors to their workers as well */
	const int moved = g->guarded.sweeps == 0 || g->rejected;
	starfa_split_guard_step(&g->guarded, p->seconds, g->gpu_alone_s, moved); /* its verdict: on_gpus */
}

static int sgd_evaluate(void *state, starfa_train_progress *p)
{
	struct sgd *g = state;
	const starfa_csr *c = g->csr;
	p->row_tiles = g->P;
	p->col_tiles = g->Q;
	p->split = g->split;
	if (g->C > 0)
		split_guard(g, p);
	double sse, loss;
	/* The test entries' tasks go in with the loss's, before its read-back: they run beside it rather than
	 * after the bold driver's copies. An epoch undone discards them. (Under the split, the cores' test
	 * bands on the GPU made the GPU the critical path instead of the cores, for no gain: bench/SGD.md.) */
	int rc = objective_submit(g);
	if (!rc && g->has_test && starfa_test_due(p, g->o.iters, g->o.eval_every))
		rc = starfa_test_grid_submit(&g->tgrid, g->dU, g->dV, g->mu);
	if (!rc)
		rc = objective_read(g, &sse, &loss);
	if (rc)
		return rc;
	const double used_lr = g->lr;
	int finite = isfinite(loss);
	g->rejected = 0;
	/* A rise within float32 rounding of the predictions is no rise: at tiny rates the loss stalls there. */
	if (g->o.schedule == SCHEDULE_BOLDDRIVER && (!finite || loss > g->prev_loss * (1 + 1e-6))) {
		/* Undo the epoch and try it again at half the rate. */
		if (++g->halvings > MAX_HALVINGS)
			return starfa_set_error(STARFA_ERUNTIME, "SGD diverged: %d halvings of the learning rate (now %g) "
								 "did not lower the training loss; try a smaller --lr",
						MAX_HALVINGS, g->lr);
		g->lr *= 0.5;
		g->rejected = 1;
		starfa_test_grid_discard(&g->tgrid);
		if ((rc = copy_factors(g, g->dU, g->dV, g->dsU, g->dsV)) || (rc = starfa_dense_sync(g->dU)) ||
		    (rc = starfa_dense_sync(g->dV)))
			return rc;
		if (g->o.fp16 && ((rc = starfa_insert_dense_convert(g->dhU, STARFA_TO_HALF, g->dU)) ||
				  (rc = starfa_insert_dense_convert(g->dhV, STARFA_TO_HALF, g->dV))))
			return rc;
	} else if (!finite) {
		int64_t ti, tj, rows, span;
		first_bad_tile(g, &ti, &tj, &rows, &span);
		char tiles[96];
		if (rows > 1)
			snprintf(tiles, sizeof tiles, "tiles %lld-%lld, %lld-%lld", (long long)ti, (long long)(ti + rows - 1),
				 (long long)tj, (long long)(tj + span - 1));
		else if (span > 1)
			snprintf(tiles, sizeof tiles, "tiles %lld, %lld-%lld", (long long)ti, (long long)tj, (long long)(tj + span - 1));
		else
			snprintf(tiles, sizeof tiles, "tile %lld, %lld", (long long)ti, (long long)tj);
		return starfa_set_error(STARFA_ERUNTIME, "SGD diverged in epoch %lld: non-finite factors%s (%s; learning "
							 "rate %g); try a smaller --lr", (long long)g->epoch + 1,
					ti >= 0 ? " after its pass" : "", tiles, used_lr);
	} else {
		/* Accepted: the factors to come back to, the bold driver's reward, the stopping rule. */
		double change = fabs(g->prev_loss - loss) / loss;
		if (g->o.schedule == SCHEDULE_BOLDDRIVER)
			g->lr *= 1.05;
		g->halvings = 0;
		g->epoch++;
		g->prev_loss = loss;
		if ((rc = copy_factors(g, g->dsU, g->dsV, g->dU, g->dV)))
			return rc;
		p->converged = (isfinite(change) && change < g->o.tol) || g->epoch >= g->o.iters;
	}
	p->train_rmse = sqrt(sse / (double)c->nnz);
	p->train_loss = loss;
	if (g->has_test && !g->rejected && starfa_test_due(p, g->o.iters, g->o.eval_every)) {
		struct starfa_factors f;
		current_factors(g, &f);
		rc = starfa_test_grid_metrics(&g->tgrid, &g->test, g->dU, g->dV, &f, g->o.eval_k, &p->test);
		p->has_test = rc == 0;
		if (rc)
			return rc;
	}
	starfa_progress_column(p, "epoch", 0, (double)g->epoch);
	starfa_progress_column(p, "lr", 5, used_lr);
	starfa_progress_column(p, "train_rmse", 4, p->train_rmse);
	starfa_progress_column(p, "loss", 4, p->train_loss);
	starfa_progress_column(p, "test_rmse", 4, p->has_test ? p->test.rmse : NAN);
	starfa_progress_column(p, "redone", 0, g->rejected ? 1.0 : 0.0);
	if (g->C > 0) {
		/* the split: whether the cores still take their blocks, and the GPUs alone at their speed */
		starfa_progress_column(p, "cores", 0, g->ran_blocks ? 0.0 : 1.0);
		starfa_progress_column(p, "gpu_alone_s", 4, g->gpu_alone_s);
	}
	return 0;
}

static int sgd_model(void *state, starfa_model **out)
{
	struct sgd *g = state;
	/* An undone last attempt copied the saved factors back and synced them in sgd_evaluate. */
	starfa_dense_free(g->dU);
	starfa_dense_free(g->dV);
	g->dU = g->dV = NULL;
	struct starfa_factors f;
	current_factors(g, &f);
	return starfa_model_from_factors(&f, "sgd", g->coo, &g->csr, g->o.lambda, 0.0, out);
}

#define SGD_FIELD(f) offsetof(struct sgd_options, f)
static const starfa_param sgd_params[] = {
	{"rank", STARFA_PARAM_INT64, SGD_FIELD(rank), 1, 1024, NULL, "latent factors"},
	{"lambda", STARFA_PARAM_DOUBLE, SGD_FIELD(lambda), 0, 1e6, NULL, "L2 regularization of the factors"},
	{"lambda-bias", STARFA_PARAM_DOUBLE, SGD_FIELD(lambda_bias), 0, 1e6, NULL, "L2 regularization of the biases"},
	{"iters", STARFA_PARAM_INT64, SGD_FIELD(iters), 1, 100000, NULL, "epochs (the bold driver's redone ones not counted)"},
	{"lr", STARFA_PARAM_DOUBLE, SGD_FIELD(lr), 1e-12, 1e6, NULL, "the (starting) learning rate"},
	{"schedule", STARFA_PARAM_CHOICE, SGD_FIELD(schedule), 0, 0, "bolddriver|invtime|adagrad",
	 "bold driver (x1.05, or x0.5 and redo), lr / (1 + decay t^1.5), or per-row AdaGrad (LIBMF's)"},
	{"decay", STARFA_PARAM_DOUBLE, SGD_FIELD(decay), 0, 1e6, NULL, "invtime: the decay of the rate"},
	{"strata", STARFA_PARAM_INT64, SGD_FIELD(strata), 0, 1 << 16, NULL,
	 "P: the P x P grid of tiles, P strata per epoch (0: twice the workers, tiles of 4096+ entries)"},
	{"tol", STARFA_PARAM_DOUBLE, SGD_FIELD(tol), 0, 1, NULL, "stop when the loss's relative change is under this"},
	{"eval-every", STARFA_PARAM_INT64, SGD_FIELD(eval_every), 1, 1 << 30, NULL, STARFA_EVAL_EVERY_HELP},
	{"no-biases", STARFA_PARAM_FLAG, SGD_FIELD(biases), 0, 0, NULL, "no user and item biases (the mean stays)"},
	{"fp16", STARFA_PARAM_FLAG, SGD_FIELD(fp16), 0, 1, NULL,
	 "keep the factors the updates read and write in FP16 (half the memory traffic; FP32 arithmetic)"},
	{"seed", STARFA_PARAM_INT64, SGD_FIELD(seed), 0, 9.2e18, NULL, "seed of the initial factors and the orders"},
	{NULL, 0, 0, 0, 0, NULL, NULL},
};

const starfa_algorithm starfa_algorithm_sgd = {
	.name = "sgd",
	.summary = "SGD matrix factorization on explicit ratings: strata of tiles as StarPU dependencies, no locks",
	.kind = STARFA_MODEL_EXPLICIT,
	.params_size = sizeof(struct sgd_options),
	.params = sgd_params,
	.defaults = sgd_defaults,
	.check = sgd_check,
	.iterations = sgd_iterations,
	.setup = sgd_setup,
	.iterate = sgd_iterate,
	.evaluate = sgd_evaluate,
	.model = sgd_model,
	.free = sgd_free,
};
