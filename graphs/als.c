/* ALS and implicit ALS as task graphs over the tiles of the training matrix.
 *
 * An iteration is a user sweep then an item sweep. A sweep visits the bands of its side (S's row bands
 * for users, its column bands through the transposed grid for items) and inserts, per band: hermitian
 * tasks over the band's tiles adding A_u into the band's slot (the first tile writes, the others add:
 * sequential consistency on the slot orders them), bias tasks likewise into b_u, and one solve task
 * writing the band's factor block. Bands run concurrently; band b reuses the slot of band b - slots only
 * after that band's solve has read it, so the systems take `slots` bands of memory whatever the grid.
 *
 * Explicit ALS models r_uv ~ mu + b_u + c_v + x_u·y_v with the augmented-factor trick: user rows hold
 * [1, x_u, b_u] and item rows [c_v, y_v, 1], so the product of the two rows is c_v + x_u·y_v + b_u. The
 * user sweep solves for X's columns 1..f+1 ([x_u, b_u]) against Y's columns 1..f+1 ([y_v, 1]) with
 * targets r - mu - c_v (c_v: Y's column 0); the item sweep solves for Y's columns 0..f ([c_v, y_v])
 * against X's columns 0..f ([1, x_u]) with targets r - mu - b_u (X's column f+1). The constant columns
 * are never written, nor are the zero columns that pad a row to a multiple of 4 floats (16-byte loads for
 * the loss's kernel). Factors and biases are fitted jointly, one (f+1)-system per row; a user or item
 * without training entries keeps zero factors and bias, so it predicts mu plus the other side's bias.
 *
 * Implicit ALS (Hu, Koren & Volinsky): A_u = YᵀY + sum (c_uv - 1) y_v y_vᵀ + lambda I and
 * b_u = sum c_uv y_v with c = 1 + alpha r; YᵀY comes from a gram task per block before each sweep and
 * is added by the solve. The loss forms YᵀY after the item sweep (train_metrics), and the next user
 * sweep reads that sum instead of forming its own. */
#include "storage/idmap.h"
#include "model/model.h"
#include "train/algorithms.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* One side's sweep: what is solved, from what. */
struct sweep {
	const char *name; /* "user", "item" */
	starfa_side side;
	starfa_dense *theta;  /* the other side's factors */
	int64_t theta_col0;   /* its columns in use */
	int64_t offset_col;   /* explicit: its column subtracted from the ratings (the other side's bias); -1 */
	starfa_dense *x;      /* this side's factors */
	int64_t x_col0;       /* the columns solved for */
	starfa_dense *info;   /* lambda_u, s_u per row */
	float *info_data;
	starfa_systems *sys;
	const starfa_idmap *ids;
};

struct als {
	starfa_als_options opts;
	const starfa_als_options *o; /* &opts */
	int implicit;
	const starfa_coo *coo;
	starfa_csr *csr;
	starfa_tiled *S;
	starfa_split split[2]; /* how the user and item sweeps are placed */
	int64_t f, w, k; /* rank, row width of the factor blocks, unknowns per row */
	float *X, *Y;
	starfa_dense *dX, *dY;
	struct sweep users, items;
	starfa_gram *G, *G2; /* the gram added by the solves; the other side's, for the implicit loss */
	int g2_current; /* G2 holds YᵀY of the item factors as they are (the loss formed it after the last item
			 * sweep): the next user sweep reads it instead of forming the same sum again */
	starfa_sparse_values *P; /* predictions at the training entries, for the loss */
	double mu;
	double confidence;       /* implicit: the sum of the confidences over every (user, item) */
	char names[3][16];       /* implicit: "p@K", "map@K", "ndcg@K" */
	struct starfa_matched test;
	struct starfa_test_grid tgrid; /* explicit: the test entries on the training grid (the RMSE in the graph) */
	int has_test;
	struct starfa_ranker *ranker; /* implicit: the test users' rankings in the task graph */
};

void starfa_als_options_default(starfa_als_options *o, starfa_als_algo algo)
{
	memset(o, 0, sizeof *o);
	o->algo = algo;
	if (algo == STARFA_ALGO_IALS) {
		/* PyPI implicit's defaults, whose users compare against them. */
		o->rank = 64;
		o->lambda = 0.01;
		o->weighted_lambda = 0;
		o->iters = 15;
		o->solver = STARFA_SOLVER_CG;
		o->cg_steps = 3;
		o->alpha = 40.0;
	} else {
		/* Tuned on MovieLens latest-small (random 80/20 splits): see bench/ALS.md. */
		o->rank = 32;
		o->lambda = 0.12;
		o->weighted_lambda = 1;
		o->iters = 15;
		o->solver = STARFA_SOLVER_CHOLESKY;
		o->cg_steps = 3;
		o->alpha = 1.0;
		o->biases = 1;
	}
	o->seed = 1;
	o->eval_k = 10;
	o->eval_every = 1;
}

static int check_options(const starfa_als_options *o)
{
	if (o->algo != STARFA_ALGO_ALS && o->algo != STARFA_ALGO_IALS)
		return starfa_set_error(STARFA_EINVAL, "unknown ALS algorithm %d", (int)o->algo);
	if (o->rank < 1 || o->rank > 1024)
		return starfa_set_error(STARFA_EINVAL, "rank %lld outside [1, 1024]", (long long)o->rank);
	if (!(o->lambda > 0) || !isfinite(o->lambda))
		return starfa_set_error(STARFA_EINVAL, "lambda must be a positive number, not %g", o->lambda);
	if (o->iters < 0)
		return starfa_set_error(STARFA_EINVAL, "negative number of iterations");
	if (o->solver != STARFA_SOLVER_CHOLESKY && o->solver != STARFA_SOLVER_CG)
		return starfa_set_error(STARFA_EINVAL, "unknown solver %d", (int)o->solver);
	if (o->solver == STARFA_SOLVER_CG && (o->cg_steps < 1 || o->cg_steps > 1000))
		return starfa_set_error(STARFA_EINVAL, "CG steps %d outside [1, 1000]", o->cg_steps);
	if (o->algo == STARFA_ALGO_IALS && (!(o->alpha > 0) || !isfinite(o->alpha)))
		return starfa_set_error(STARFA_EINVAL, "alpha must be a positive number, not %g", o->alpha);
	if (o->slots < 0 || o->eval_k < 1 || o->eval_every < 1)
		return starfa_set_error(STARFA_EINVAL, "slots must be >= 0, eval_k and eval_every >= 1");
	return 0;
}


/* Initial factors: small random values for rows with training entries, zeros (and the constant
 * columns) elsewhere, so that rows never seen stay exactly at zero under CG as under Cholesky. */
static void init_factors(struct als *a, float *F, int64_t rows, const int64_t *count, int user_side, uint64_t seed)
{
	uint64_t state = seed * 0x2545f4914f6cdd1dull + (user_side ? 1 : 2);
	const int64_t f = a->f, w = a->w, first = a->w == a->f ? 0 : 1;
	/* implicit's default starting scale; explicit factors start where the first sweep can grow them */
	const float scale = a->implicit ? 0.01f : 0.1f;
	for (int64_t r = 0; r < rows; r++) {
		float *row = F + r * w;
		memset(row, 0, (size_t)w * sizeof *row);
		for (int64_t d = 0; d < f; d++) {
			float u = starfa_uniform_pm1(&state); /* drawn for every row, so a row's values do not depend on others */
			if (count[r] > 0)
				row[first + d] = scale * (a->implicit ? 0.5f * (u + 1.0f) : u);
		}
		if (w != f) /* users [1, x, b, 0...], items [c, y, 1, 0...] */
			row[user_side ? 0 : f + 1] = 1.0f;
	}
}

/* lambda_u and the FP16 scale s_u (>= the row's sum of hermitian weights) for every row of a side. */
static void init_info(struct als *a, float *info, int64_t rows, const int64_t *count, const double *weight)
{
	for (int64_t r = 0; r < rows; r++) {
		double n = count[r] > 0 ? (double)count[r] : 1.0;
		info[2 * r] = (float)(a->o->lambda * (a->o->weighted_lambda ? n : 1.0));
		info[2 * r + 1] = (float)(weight[r] > 1.0 ? weight[r] : 1.0);
	}
}

static const char *side_id(const starfa_idmap *ids, int64_t i, char *buf, size_t size)
{
	const char *name = ids ? starfa_idmap_name(ids, i) : NULL;
	if (name)
		return name;
	snprintf(buf, size, "%lld", (long long)i + 1);
	return buf;
}

static int gram_finite(starfa_gram *G, int64_t k)
{
	float *g = starfa_malloc((size_t)(k * k), sizeof *g);
	int finite = g && starfa_gram_read(G, g) == 0;
	for (int64_t i = 0; finite && i < k * k; i++)
		finite = isfinite(g[i]);
	free(g);
	return finite;
}

/* Systems in memory (hermitian, bias, solve) or built and solved per row (rowsolve). */
static int stored_systems(const struct als *a)
{
	return a->o->stored_systems || a->o->fp16;
}

/* Inserts one sweep, waits for it and checks what its solves met: per band, with stored systems, the
 * hermitian and bias tasks of its tiles (the first with entries writes the band's slot, the others add to
 * it) then its solve; else one rowsolve. Every task at the default priority: raising the solves' (band
 * b + slots reuses band b's slot once its solve has read it) made iterations 5% slower under dmdas, the
 * priority-aware scheduler, in every one of 6 paired runs (bench/ALS.md). */
static int run_sweep(struct als *a, struct sweep *s, int64_t iteration)
{
	const starfa_als_options *o = a->o;
	starfa_feedback feedback = a->implicit ? STARFA_IMPLICIT : STARFA_EXPLICIT;
	int rc = 0;
	starfa_gram *G = NULL; /* implicit: the other side's ThetaᵀTheta */
	if (a->implicit) {
		G = a->G;
		if (s == &a->users && a->g2_current && s->theta == a->dY && s->theta_col0 == 0)
			G = a->G2;
		else
			rc = starfa_insert_gram(s->theta, s->theta_col0, a->k, a->G);
	}
	if (s == &a->items)
		a->g2_current = 0; /* the item factors change */
	int64_t bands = starfa_systems_bands(s->sys);
	for (int64_t b = 0; b < bands && !rc && !stored_systems(a); b++)
		rc = starfa_insert_rowsolve(a->S, s->side, b, s->theta, s->theta_col0, s->offset_col, (float)a->mu, feedback,
					    (float)o->alpha, s->info, G, o->solver, o->cg_steps, s->x, s->x_col0, s->sys);
	for (int64_t b = 0; b < bands && !rc && stored_systems(a); b++) {
		rc = starfa_insert_hermitian(a->S, s->side, b, s->theta, s->theta_col0, feedback, (float)o->alpha, s->info,
					     s->sys);
		if (!rc)
			rc = starfa_insert_bias(a->S, s->side, b, s->theta, s->theta_col0, s->offset_col, (float)a->mu, feedback,
						(float)o->alpha, s->sys);
		if (!rc)
			rc = starfa_insert_solve(s->sys, b, s->info, G, o->solver, o->cg_steps, s->x, s->x_col0);
	}
	if (rc) {
		starfa_wait();
		return rc;
	}
	starfa_solve_report report;
	rc = starfa_systems_report(s->sys, &report);
	if (rc)
		return rc;
	if (report.bad_rows == 0)
		return 0;
	const char *codelet = "solve", *what = "non-finite factors";
	if (report.nonfinite_systems > 0) {
		codelet = G && !gram_finite(G, a->k) ? "gram" : "hermitian";
		what = "non-finite systems";
	} else if (report.nonfinite_rhs > 0) {
		codelet = "bias";
		what = "non-finite right-hand sides";
	} else if (report.not_spd > 0) {
		what = "systems that are not positive definite";
	}
	char buf[32];
	return starfa_set_error(STARFA_ERUNTIME,
				"iteration %lld, %s sweep: codelet %s produced %s for %lld %ss (first: %s %s); "
				"training stopped (check the input values, a larger lambda, or FP32 systems)",
				(long long)iteration, s->name, codelet, what, (long long)report.bad_rows, s->name, s->name,
				side_id(s->ids, report.first_bad_row, buf, sizeof buf));
}

/* Training loss and RMSE, reduced in the graph and read back once: explicit, the squared error a row
 * band (no predictions written); implicit, from the predictions at the training entries; and the
 * regularization of both sides' unknowns, sum over rows of lambda_r |x_r|^2 (info's column 0), a
 * dense_reduce task a block. The factors stay where the sweeps left them. */
static int train_metrics(struct als *a, starfa_train_progress *p, int with_test)
{
	const starfa_csr *c = a->csr;
	const struct sweep *sides[2] = {&a->users, &a->items};
	const int64_t bands = a->implicit ? 0 : starfa_tiled_row_tiles(a->S);
	const int64_t nslots = bands + starfa_dense_blocks(a->users.x) + starfa_dense_blocks(a->items.x);
	double *slots = starfa_malloc((size_t)nslots, sizeof *slots);
	starfa_sums *parts = NULL;
	int rc = slots ? starfa_sums_create(nslots, &parts) : STARFA_ENOMEM;
	/* The prediction is mu + (c_v + x_u·y_v + b_u), the augmented product plus the mean: its squared
	 * error in one pass a row band. */
	int64_t slot = 0;
	for (; slot < bands && !rc; slot++)
		rc = starfa_task_sqerr_band(a->S, STARFA_ROWS, slot, a->dX, a->dY, (float)a->mu, parts, slot, NULL);
	for (int s = 0; s < 2 && !rc; s++)
		for (int64_t b = 0; b < starfa_dense_blocks(sides[s]->x) && !rc; b++)
			rc = starfa_task_dense_reduce_cols(sides[s]->x, b, sides[s]->x_col0, a->k, STARFA_REDUCE_SQUARES,
							   sides[s]->info, 0, parts, slot++, NULL);
	/* The explicit test RMSE's tasks beside the loss's, before its read-back (starfa_test_grid_metrics
	 * reads them). */
	if (!rc && with_test)
		rc = starfa_test_grid_submit(&a->tgrid, a->dX, a->dY, a->mu);
	double sum = 0;
	if (!rc && a->implicit) {
		rc = starfa_insert_sddmm(a->S, a->dX, a->dY, STARFA_SDDMM_PATTERN, a->P);
		if (!rc)
			rc = starfa_insert_gram(a->dY, 0, a->k, a->G2);
		a->g2_current = rc == 0; /* the same sum the next user sweep would form (run_sweep) */
		if (!rc)
			rc = starfa_reduce_values(a->P, STARFA_REDUCE_CONFIDENCE, (float)a->o->alpha, NULL, &sum);
	}
	if (!rc)
		rc = starfa_sums_read(parts, slots);
	else if (parts)
		starfa_wait(); /* the tasks inserted before the failure still use the slots */
	starfa_sums_free(parts);
	double reg = 0;
	for (int64_t t = 0; t < nslots && !rc; t++)
		*(t < bands ? &sum : &reg) += slots[t];
	free(slots);
	if (rc)
		return rc;
	if (!a->implicit) {
		p->train_rmse = sqrt(sum / (double)c->nnz);
		p->train_loss = (sum + reg) / (double)c->nnz;
		return 0;
	}
	/* sum over every (u, v) of c (p - x·y)^2: the observed entries' terms (sum's (1 + alpha r)(1 - x)^2
	 * - x^2), plus sum over all pairs of (x·y)^2 = trace(XᵀX YᵀY), which counts the observed pairs'
	 * (x·y)^2 with confidence 1. */
	double loss = sum;
	float *gx = starfa_malloc((size_t)(a->k * a->k), sizeof *gx), *gy = starfa_malloc((size_t)(a->k * a->k), sizeof *gy);
	rc = !gx || !gy ? STARFA_ENOMEM : starfa_gram_read(a->G, gx);
	if (!rc)
		rc = starfa_gram_read(a->G2, gy);
	if (rc) {
		free(gx);
		free(gy);
		return rc;
	}
	for (int64_t i = 0; i < a->k * a->k; i++) /* G holds XᵀX: the item sweep's */
		loss += (double)gx[i] * gy[i];
	free(gx);
	free(gy);
	p->train_rmse = NAN;
	p->train_loss = (loss + reg) / a->confidence;
	return 0;
}

/* The view of the factors as they lie in the augmented blocks. */
static void current_factors(const struct als *a, struct starfa_factors *f)
{
	int biased = a->w != a->f;
	*f = (struct starfa_factors){
		.kind = a->implicit ? STARFA_MODEL_IMPLICIT : STARFA_MODEL_EXPLICIT,
		.nusers = a->csr->nrows,
		.nitems = a->csr->ncols,
		.rank = a->f,
		.U = a->X + (biased ? 1 : 0),
		.V = a->Y + (biased ? 1 : 0),
		.ub = biased ? a->X + a->f + 1 : NULL,
		.ib = biased ? a->Y : NULL,
		.ldu = a->w,
		.ldv = a->w,
		.ub_stride = a->w,
		.ib_stride = a->w,
		.mu = a->mu,
	};
}

static int make_model(struct als *a, starfa_model **out)
{
	struct starfa_factors f;
	current_factors(a, &f);
	int rc = starfa_model_from_factors(&f, a->implicit ? "ials" : "als", a->coo, &a->csr, a->o->lambda,
					   a->implicit ? a->o->alpha : 0.0, out);
	return rc;
}

static void free_sweep(struct sweep *s)
{
	starfa_systems_free(s->sys);
	starfa_dense_free(s->info);
	free(s->info_data);
}

static void free_als(struct als *a)
{
	starfa_ranker_free(a->ranker);
	free_sweep(&a->users);
	free_sweep(&a->items);
	starfa_sparse_values_free(a->P);
	starfa_gram_free(a->G);
	starfa_gram_free(a->G2);
	starfa_dense_free(a->dX);
	starfa_dense_free(a->dY);
	starfa_tiled_free(a->S);
	starfa_csr_free(a->csr);
	free(a->X);
	free(a->Y);
	starfa_test_grid_free(&a->tgrid);
	starfa_matched_free(&a->test);
}

/* Counts and hermitian weight sums per row and per column of the training matrix. */
static int row_col_stats(const struct als *a, int64_t **row_n, int64_t **col_n, double **row_w, double **col_w)
{
	const starfa_csr *c = a->csr;
	*row_n = starfa_calloc((size_t)c->nrows, sizeof **row_n);
	*col_n = starfa_calloc((size_t)c->ncols, sizeof **col_n);
	*row_w = starfa_calloc((size_t)c->nrows, sizeof **row_w);
	*col_w = starfa_calloc((size_t)c->ncols, sizeof **col_w);
	if (!*row_n || !*col_n || !*row_w || !*col_w)
		return STARFA_ENOMEM;
	for (int64_t r = 0; r < c->nrows; r++)
		for (int64_t p = c->rowptr[r]; p < c->rowptr[r + 1]; p++) {
			double wgt = a->implicit ? a->o->alpha * c->val[p] : 1.0;
			(*row_n)[r]++;
			(*col_n)[c->colind[p]]++;
			(*row_w)[r] += wgt;
			(*col_w)[c->colind[p]] += wgt;
		}
	return 0;
}

static int setup(struct als *a, const starfa_coo *train, const starfa_coo *test)
{
	const starfa_als_options *o = a->o;
	int rc = starfa_csr_from_coo(train, &a->csr);
	if (rc)
		return rc;
	starfa_csr *c = a->csr;
	double sum = 0;
	for (int64_t r = 0; r < c->nrows; r++)
		for (int64_t e = c->rowptr[r]; e < c->rowptr[r + 1]; e++) {
			if (!isfinite(c->val[e]) || (a->implicit && c->val[e] < 0)) {
				char ub[32], ib[32];
				return starfa_set_error(STARFA_EINVAL, "training value %g of user %s, item %s is %s", c->val[e],
							side_id(train->row_ids, r, ub, sizeof ub),
							side_id(train->col_ids, c->colind[e], ib, sizeof ib),
							a->implicit ? "negative or not finite (implicit ALS takes counts "
								      "or confidences >= 0)"
								    : "not finite");
			}
			sum += c->val[e];
		}
	a->mu = a->implicit ? 0.0 : sum / (double)c->nnz;
	/* The implicit loss's denominator: confidence 1 + alpha r where observed, 1 everywhere else. */
	a->confidence = (double)c->nrows * (double)c->ncols + o->alpha * sum;
	snprintf(a->names[0], sizeof a->names[0], "p@%lld", (long long)o->eval_k);
	snprintf(a->names[1], sizeof a->names[1], "map@%lld", (long long)o->eval_k);
	snprintf(a->names[2], sizeof a->names[2], "ndcg@%lld", (long long)o->eval_k);
	a->f = o->rank;
	/* Explicit rows with biases: [1, x, b] and [c, y, 1], padded with zero columns to a multiple of 4 floats,
	 * so that the rows take 16-byte loads (the loss's kernel and SDDMM's fast ones need them; the zeros add
	 * nothing to the augmented product, and no solve touches them). */
	a->w = !a->implicit && o->biases ? (o->rank + 2 + 3) / 4 * 4 : o->rank;
	a->k = a->w == a->f ? a->f : a->f + 1;
	if (starfa_worker_count(STARFA_WORKER_CPU) == 0 && a->k > starfa_als_cuda_max_k())
		return starfa_set_error(STARFA_EINVAL,
					"ALS at rank %lld solves %lld unknowns a row%s; the CUDA workers take at most %lld and "
					"there are no CPU workers: lower the rank or add CPU workers",
					(long long)a->f, (long long)a->k, a->k > a->f ? " (the bias included)" : "",
					(long long)starfa_als_cuda_max_k());

	/* Stored systems: one row band and one column band per worker, so every worker has a band to
	 * solve in each sweep and each band sums its systems over as few tiles as that allows (the sums
	 * cost a pass over the band's systems per tile: bench/ALS.md). rowsolve: tiles cost nothing
	 * more, so two bands per worker, which balances rows of unequal cost better (bench/ALS.md). */
	starfa_tiling_options tiling = o->tiling;
	tiling.transposed = 1;
	int workers = starfa_worker_count(STARFA_WORKER_CPU) + starfa_worker_count(STARFA_WORKER_CUDA);
	int stored = o->stored_systems || o->fp16;
	int bands = (workers > 1 ? workers : 2) * (stored ? 1 : 2);
	/* With GPUs, the bands and where they run follow the measured speeds of the sweep's operation
	 * (starfa_plan_tiling): one band a GPU, and one a core only when the cores' share pays. A GPU runs a
	 * band's rows in one kernel, so more bands only run one after the other (two a GPU made MovieLens
	 * iterations 4-26% slower: bench/PLACEMENT.md). */
	/* Above the CUDA kernels' rank no GPU can solve a row, and a grid placed on the GPUs (the default
	 * with GPUs) would leave its tasks no worker: every band goes to the cores, the user's band count
	 * kept (the larger of the two sides). STARFA_PLACEMENT=any leaves it to StarPU, which reads the
	 * codelets' can_execute. */
	starfa_placement mode = STARFA_PLACE_GPU;
	if (starfa_worker_count(STARFA_WORKER_CUDA) > 0 && (rc = starfa_placement_mode(&mode)) != 0)
		return rc;
	if (a->k > starfa_als_cuda_max_k() && starfa_worker_count(STARFA_WORKER_CUDA) > 0 && mode != STARFA_PLACE_ANY) {
		int64_t n = tiling.row_tiles > tiling.col_tiles ? tiling.row_tiles : tiling.col_tiles;
		if (n == 0)
			n = (int64_t)starfa_worker_count(STARFA_WORKER_CPU) * (stored ? 1 : 2);
		/* no more bands than rows or columns: every band is a CPU band */
		n = n < c->nrows ? n : c->nrows;
		n = n < c->ncols ? n : c->ncols;
		n = n > 1 ? n : 1;
		tiling.row_tiles = tiling.col_tiles = tiling.cpu_bands = n;
		tiling.row_band = 0;
		tiling.row_cpu_share = tiling.col_cpu_share = 1;
		tiling.placed = 1;
		for (int s = 0; s < 2; s++)
			a->split[s] = (starfa_split){.cpu_bands = n, .cpu_share = 1, .cuda_ms = NAN, .cpu_ms = NAN,
						     .split_ms = NAN, .best_share = NAN, .best_ms = NAN,
						     .needed_ms = NAN};
	}
	if (tiling.row_tiles == 0 && tiling.col_tiles == 0) {
		int gram = a->implicit && !stored;
		double row_sweep = stored ? (double)c->nnz * a->k * a->k
					  : starfa_rowsolve_cost(c->nnz, c->nrows, a->k, o->solver, o->cg_steps, gram);
		double col_sweep = stored ? row_sweep
					  : starfa_rowsolve_cost(c->nnz, c->ncols, a->k, o->solver, o->cg_steps, gram);
		rc = starfa_plan_tiling(stored ? "hermitian" : "rowsolve", row_sweep, col_sweep, 1, &tiling, a->split);
		if (rc)
			return rc;
	}
	if (tiling.row_tiles == 0)
		tiling.row_tiles = bands;
	if (tiling.col_tiles == 0)
		tiling.col_tiles = bands;
	/* Bands of equal cost, not of equal entries: a row's solve is worth k^3 / 3 entries' updates
	 * under Cholesky, which nonzero-balanced bands of a skewed side leave very unequal (bench/ALS.md). */
	double row_cost = o->stored_systems || o->fp16
				  ? (o->solver == STARFA_SOLVER_CHOLESKY ? (double)a->k / 3.0 : (double)o->cg_steps + 1.0)
				  : starfa_rowsolve_row_cost(a->k, o->solver, o->cg_steps, a->implicit);
	if (tiling.row_cost == 0)
		tiling.row_cost = row_cost;
	if (tiling.col_cost == 0)
		tiling.col_cost = row_cost;
	rc = starfa_tiled_create(c, &tiling, &a->S);
	if (rc)
		return rc;
	a->X = starfa_malloc((size_t)(c->nrows * a->w), sizeof *a->X);
	a->Y = starfa_malloc((size_t)(c->ncols * a->w), sizeof *a->Y);
	a->users.info_data = starfa_malloc((size_t)c->nrows * 2, sizeof(float));
	a->items.info_data = starfa_malloc((size_t)c->ncols * 2, sizeof(float));
	if (!a->X || !a->Y || !a->users.info_data || !a->items.info_data)
		return STARFA_ENOMEM;
	int64_t *row_n = NULL, *col_n = NULL;
	double *row_w = NULL, *col_w = NULL;
	rc = row_col_stats(a, &row_n, &col_n, &row_w, &col_w);
	if (!rc) {
		init_factors(a, a->X, c->nrows, row_n, 1, o->seed);
		init_factors(a, a->Y, c->ncols, col_n, 0, o->seed);
		init_info(a, a->users.info_data, c->nrows, row_n, row_w);
		init_info(a, a->items.info_data, c->ncols, col_n, col_w);
	}
	free(row_n);
	free(col_n);
	free(row_w);
	free(col_w);
	if (rc)
		return rc;

	int64_t slots = o->slots;
	if (slots == 0)
		slots = 2 * (workers > 0 ? workers : 1);
	int biased = a->w != a->f;
	a->users = (struct sweep){"user", STARFA_ROWS, NULL, biased ? 1 : 0, biased ? 0 : -1, NULL, biased ? 1 : 0,
				  NULL, a->users.info_data, NULL, train->row_ids};
	a->items = (struct sweep){"item", STARFA_COLS, NULL, 0, biased ? a->f + 1 : -1, NULL, 0,
				  NULL, a->items.info_data, NULL, train->col_ids};
	if ((rc = starfa_dense_create(a->S, STARFA_ROWS, a->X, a->w, &a->dX)) ||
	    (rc = starfa_dense_create(a->S, STARFA_COLS, a->Y, a->w, &a->dY)) ||
	    (rc = starfa_dense_create(a->S, STARFA_ROWS, a->users.info_data, 2, &a->users.info)) ||
	    (rc = starfa_dense_create(a->S, STARFA_COLS, a->items.info_data, 2, &a->items.info)) ||
	    (rc = starfa_systems_create(a->S, STARFA_ROWS, a->k, o->fp16, slots, &a->users.sys)) ||
	    (rc = starfa_systems_create(a->S, STARFA_COLS, a->k, o->fp16, slots, &a->items.sys)) ||
	    (a->implicit && (rc = starfa_sparse_values_create(a->S, STARFA_ROWS, &a->P))))
		return rc;
	if (a->implicit && ((rc = starfa_gram_create(a->k, &a->G)) || (rc = starfa_gram_create(a->k, &a->G2))))
		return rc;
	a->users.theta = a->dY;
	a->users.x = a->dX;
	a->items.theta = a->dX;
	a->items.x = a->dY;
	if (test) {
		rc = starfa_match_entries(test, train->row_ids, train->col_ids, c->nrows, c->ncols, &a->test);
		if (!rc) /* once: the metrics after every iteration reuse it */
			rc = starfa_matched_count_cold(&a->test, a->csr, c->ncols);
		if (!rc && a->implicit) /* likewise the test items grouped by user, for the rankings */
			rc = starfa_matched_group_users(&a->test, c->nrows);
		if (!rc && !a->implicit)
			rc = starfa_test_grid_create(a->S, &a->test, &a->tgrid);
		a->has_test = rc == 0;
	}
	return rc;
}

/* ------------------------------------------------------------------ the algorithm interface */

static int als_setup(const starfa_coo *train, const starfa_coo *test, const void *params, void **state)
{
	struct als *a = starfa_calloc(1, sizeof *a);
	if (!a)
		return STARFA_ENOMEM;
	a->opts = *(const starfa_als_options *)params;
	a->o = &a->opts;
	a->implicit = a->opts.algo == STARFA_ALGO_IALS;
	a->coo = train;
	*state = a;
	return setup(a, train, test);
}

static int als_iterate(void *state, int64_t iteration)
{
	struct als *a = state;
	int rc = run_sweep(a, &a->users, iteration);
	return rc ? rc : run_sweep(a, &a->items, iteration);
}


static int als_evaluate(void *state, starfa_train_progress *p)
{
	struct als *a = state;
	p->row_tiles = starfa_tiled_row_tiles(a->S);
	p->col_tiles = starfa_tiled_col_tiles(a->S);
	p->split = a->split;
	p->systems_bytes = stored_systems(a) ? (int64_t)(starfa_systems_bytes(a->users.sys) + starfa_systems_bytes(a->items.sys))
					     : 0;
	const int test_now = a->has_test && starfa_test_due(p, a->o->iters, a->o->eval_every);
	int rc = train_metrics(a, p, test_now && !a->implicit);
	if (!rc && test_now) {
		struct starfa_factors f;
		current_factors(a, &f);
		/* Explicit: the RMSE in the graph. Implicit models rank every item for every test user. With GPUs
		 * the products and the selection run as top_k tasks where the factors are; on the cores alone the
		 * host's loop in 256 chunks balances better than a task a tile (1.3 against 1.8 s on 2 cores:
		 * bench/PLACEMENT.md), and so does a k past the GPUs' largest, which the CPU workers alone would
		 * run. The host's metrics read the factors there: synced first. */
		if (!a->implicit)
			rc = starfa_test_grid_metrics(&a->tgrid, &a->test, a->dX, a->dY, &f, a->o->eval_k, &p->test);
		else if (a->w == a->f && starfa_worker_count(STARFA_WORKER_CUDA) > 0 && a->o->eval_k <= STARFA_TOP_K_CUDA_MAX)
			rc = starfa_rank_test(a->S, a->dX, a->dY, &f, &a->test, a->csr, a->o->eval_k, &a->ranker, &p->test);
		else if (!(rc = starfa_dense_sync(a->dX)) && !(rc = starfa_dense_sync(a->dY)))
			rc = starfa_factors_metrics(&f, &a->test, a->csr, a->o->eval_k, &p->test);
		p->has_test = rc == 0;
	}
	if (rc)
		return rc;
	if (!a->implicit) {
		starfa_progress_column(p, "train_rmse", 4, p->train_rmse);
		starfa_progress_column(p, "loss", 4, p->train_loss);
		if (a->has_test) /* NaN (left out) where not computed this iteration */
			starfa_progress_column(p, "test_rmse", 4, p->has_test ? p->test.rmse : NAN);
	} else {
		starfa_progress_column(p, "loss", 6, p->train_loss);
		if (a->has_test) {
			starfa_progress_column(p, a->names[0], 4, p->has_test ? p->test.precision : NAN);
			starfa_progress_column(p, a->names[1], 4, p->has_test ? p->test.map : NAN);
			starfa_progress_column(p, a->names[2], 4, p->has_test ? p->test.ndcg : NAN);
		}
	}
	return 0;
}

static int als_model(void *state, starfa_model **out)
{
	struct als *a = state;
	/* The blocks go back to main memory as they are unregistered. */
	starfa_dense_free(a->dX);
	starfa_dense_free(a->dY);
	a->dX = a->dY = NULL;
	return make_model(a, out);
}

static void als_free(void *state)
{
	free_als(state);
	free(state);
}

static int64_t als_iterations(const void *params)
{
	return ((const starfa_als_options *)params)->iters;
}

static int als_check(const void *params)
{
	return check_options(params);
}

static void als_defaults(void *params)
{
	starfa_als_options_default(params, STARFA_ALGO_ALS);
}

static void ials_defaults(void *params)
{
	starfa_als_options_default(params, STARFA_ALGO_IALS);
}

#define ALS_FIELD(f) offsetof(starfa_als_options, f)
#define ALS_COMMON_PARAMS                                                                                          \
	{"rank", STARFA_PARAM_INT64, ALS_FIELD(rank), 1, 1024, NULL, "latent factors f"},                          \
	{"lambda", STARFA_PARAM_DOUBLE, ALS_FIELD(lambda), 1e-12, 1e12, NULL, "regularization"},                    \
	{"weighted-lambda", STARFA_PARAM_INT, ALS_FIELD(weighted_lambda), 0, 1, NULL,                              \
	 "1: lambda times the row's entries (ALS-WR)"},                                                             \
	{"iters", STARFA_PARAM_INT64, ALS_FIELD(iters), 1, 100000, NULL, "iterations, each a user sweep and an item sweep"}, \
	{"solver", STARFA_PARAM_CHOICE, ALS_FIELD(solver), 0, 0, "chol|cg", "exact Cholesky or conjugate gradient"}, \
	{"cg-steps", STARFA_PARAM_INT, ALS_FIELD(cg_steps), 1, 1000, NULL, "CG steps per solve"},                  \
	{"fp16", STARFA_PARAM_FLAG, ALS_FIELD(fp16), 0, 1, NULL, "store the per-row systems in FP16 (implies --stored-systems)"}, \
	{"stored-systems", STARFA_PARAM_FLAG, ALS_FIELD(stored_systems), 0, 1, NULL,                              \
	 "build every band's systems in memory, then solve them (default: row by row, no systems stored)"},        \
	{"row-tiles", STARFA_PARAM_INT64, ALS_FIELD(tiling.row_tiles), 0, 1 << 20, NULL,                            \
	 "row bands of the tile grid (0: one per worker, two without stored systems)"},                             \
	{"col-tiles", STARFA_PARAM_INT64, ALS_FIELD(tiling.col_tiles), 0, 1 << 20, NULL, "column bands (0: as rows)"}, \
	{"slots", STARFA_PARAM_INT64, ALS_FIELD(slots), 0, 1 << 20, NULL,                                         \
	 "bands of systems held at once per side (0: two per worker)"},                                            \
	{"seed", STARFA_PARAM_INT64, ALS_FIELD(seed), 0, 9.2e18, NULL, "seed of the initial factors"},            \
	{"eval-every", STARFA_PARAM_INT64, ALS_FIELD(eval_every), 1, 1 << 30, NULL, STARFA_EVAL_EVERY_HELP}

static const starfa_param als_params[] = {
	ALS_COMMON_PARAMS,
	{"no-biases", STARFA_PARAM_FLAG, ALS_FIELD(biases), 0, 0, NULL,
	 "no user and item biases (the global mean is still modelled)"},
	{NULL, 0, 0, 0, 0, NULL, NULL},
};

static const starfa_param ials_params[] = {
	ALS_COMMON_PARAMS,
	{"alpha", STARFA_PARAM_DOUBLE, ALS_FIELD(alpha), 1e-12, 1e12, NULL, "confidence 1 + alpha * value"},
	{"k", STARFA_PARAM_INT64, ALS_FIELD(eval_k), 1, 100000, NULL, "the k of precision@k, MAP@k and NDCG@k on the test set"},
	{NULL, 0, 0, 0, 0, NULL, NULL},
};

/* ALS and implicit ALS share every step; their defaults, options and model kinds differ. */
#define ALS_ALGORITHM(algo_name, algo_summary, algo_kind, algo_params, algo_defaults)                     \
	{                                                                                                  \
		.name = algo_name, .summary = algo_summary, .kind = algo_kind,                             \
		.params_size = sizeof(starfa_als_options), .params = algo_params, .defaults = algo_defaults, \
		.check = als_check, .iterations = als_iterations, .setup = als_setup, .iterate = als_iterate, \
		.evaluate = als_evaluate, .model = als_model, .free = als_free,                            \
	}

const starfa_algorithm starfa_algorithm_als =
	ALS_ALGORITHM("als", "ALS on explicit ratings: mean, user and item biases, factors (Cholesky or CG per row)",
		      STARFA_MODEL_EXPLICIT, als_params, als_defaults);

const starfa_algorithm starfa_algorithm_ials =
	ALS_ALGORITHM("ials", "implicit-feedback ALS (Hu, Koren & Volinsky): confidence-weighted preferences, CG per row",
		      STARFA_MODEL_IMPLICIT, ials_params, ials_defaults);

int starfa_als_train(const starfa_coo *train, const starfa_coo *test, const starfa_als_options *opts,
		     starfa_als_callback callback, void *user_data, starfa_model **out)
{
	*out = NULL;
	if (!train || !opts)
		return starfa_set_error(STARFA_EINVAL, "starfa_als_train: need training entries and options");
	const starfa_algorithm *algo = opts->algo == STARFA_ALGO_IALS ? &starfa_algorithm_ials : &starfa_algorithm_als;
	return starfa_train(algo, opts, train, test, callback, user_data, out);
}
