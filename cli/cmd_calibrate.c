/* starfa calibrate: run every codelet over a range of tile sizes and ranks on each worker kind in
 * turn (its tasks placed there), until StarPU's performance models hold both kinds' timings.
 *
 * The kinds are calibrated one after the other, each task pinned to the kind (starfa_tiling_options'
 * placement), so no round waits for the scheduler to learn which kind lacks a sample. An operation
 * whose task took longer than --budget on a kind stops growing there: the larger sizes follow from
 * the measured ones (starfa_plan_tiling scales the largest linearly), and a core no longer spends
 * seconds per task on the biggest tiles (the calibration that took 311 s on a 16-core host). */
#include "cli/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 16

/* Stored ALS systems (rows x k x k) larger than this are not built: their operations are
 * calibrated on the sizes below it, rowsolve (which stores none) on every size. */
#define MAX_SYSTEMS_BYTES ((size_t)1 << 30)

enum { GROUP_SDDMM = 1, GROUP_SPMM = 2, GROUP_ALS = 4, GROUP_ELEMENTWISE = 8, GROUP_SGD = 16, GROUP_CCD = 32, GROUP_ALL = 63 };

struct rank_list {
	int64_t rank[MAX_RANKS];
	int n;
};

struct calibrate_cli {
	struct rank_list ranks, als_ranks;
	int groups;
	int64_t min_nnz, max_nnz, rounds;
	double budget_ms; /* a task slower than this stops its operation's growth on that kind */
	uint64_t seed;
	starfa_options runtime;
};

static void usage(FILE *out)
{
	fprintf(out, "usage: starfa calibrate [OPTIONS]\n"
		     "Runs every operation on random tiles of growing size for each rank, on every worker\n"
		     "type, with StarPU's calibration on, so that later runs schedule from calibrated\n"
		     "performance models.\n"
		     "  --ops LIST       comma-separated groups (default sddmm,spmm,als,elementwise,sgd,ccd):\n"
		     "                     sddmm  SDDMM plain and scaled, the squared error of a band\n"
		     "                     spmm   SpMM S*X and S^T*X, SDDMM+SpMM fused; a tile a task, and\n"
		     "                            a band a task\n"
		     "                     als    gram, hermitian and bias (explicit and implicit), solve\n"
		     "                            (Cholesky, CG, CG on FP16 systems), rowsolve (Cholesky,\n"
		     "                            CG, implicit CG) and top k (the ranking metrics, k = 10)\n"
		     "                     elementwise  SDDMM with beta, values transposed, mapped and reduced,\n"
		     "                            dense maps, column and row sums and reductions, FP16\n"
		     "                            conversions (even ranks), on a grid with empty tiles\n"
		     "                            (the zero codelet)\n"
		     "                     sgd    SGD passes over tiles, FP32 and FP16 rows, at the ALS ranks\n"
		     "                            (on the cores one pass a core at once, as a split runs),\n"
		     "                            on a ratings-like matrix (rows and columns of power-law\n"
		     "                            degrees, as the bench's Netflix shape)\n"
		     "                     ccd    CCD++ passes (open, inner, close), updates, band tasks\n"
		     "                            (passes and update in one task) and one-task features\n"
		     "  --ranks LIST     comma-separated ranks of sddmm and spmm (default 32,128,512)\n"
		     "  --als-ranks LIST ranks of the ALS operations (default 16,64,128)\n"
		     "  --min-nnz N      smallest tile (default 64)\n"
		     "  --max-nnz N      largest tile (default 4194304); sizes grow 4x per step: StarPU's\n"
		     "                   regression predicts tiles from 10%% below the smallest to 10%%\n"
		     "                   above the largest, and forces calibration runs outside that.\n"
		     "                   On the GPUs the SGD passes go on to 4 N while their updates a\n"
		     "                   second still rise by 20%% a size (the rate a sweep is predicted at).\n"
		     "                   ALS systems over 1 GiB are not built: hermitian, bias and solve\n"
		     "                   stop at the size below\n"
		     "  --rounds N       tasks per size, operation and worker kind (default 3)\n"
		     "  --budget MS      a kind whose task took longer than MS milliseconds stops growing that\n"
		     "                   operation's sizes (default 50; 0: every size)\n" CLI_RUNTIME_HELP);
}

/* Calls item(option, value, ctx) on each comma-separated value of text, stopping at the first
 * that fails; a list of none is an error naming what it needs. */
static int parse_list(const char *option, const char *text, const char *needs,
		      int (*item)(const char *option, const char *value, void *ctx), void *ctx)
{
	char *copy = strdup(text), *save = NULL;
	if (!copy) {
		cli_error("out of memory");
		return -1;
	}
	int n = 0, rc = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok && rc == 0; tok = strtok_r(NULL, ",", &save), n++)
		rc = item(option, tok, ctx);
	free(copy);
	if (rc == 0 && n == 0) {
		cli_error("--%s needs at least one %s", option, needs);
		rc = -1;
	}
	return rc;
}

static int add_rank(const char *option, const char *value, void *ctx)
{
	struct rank_list *list = ctx;
	if (list->n == MAX_RANKS) {
		cli_error("--%s takes at most %d ranks", option, MAX_RANKS);
		return -1;
	}
	return cli_parse_int(option, value, 1, 4096, &list->rank[list->n++]);
}

static int add_group(const char *option, const char *value, void *ctx)
{
	static const char *const names[] = {"sddmm", "spmm", "als", "elementwise", "sgd", "ccd"};
	static const int bits[] = {GROUP_SDDMM, GROUP_SPMM, GROUP_ALS, GROUP_ELEMENTWISE, GROUP_SGD, GROUP_CCD};
	for (int i = 0; i < 6; i++)
		if (strcmp(value, names[i]) == 0) {
			*(int *)ctx |= bits[i];
			return 0;
		}
	cli_error("--%s: unknown group '%s' (sddmm, spmm, als, elementwise, sgd or ccd)", option, value);
	return -1;
}

static int parse_ranks(const char *option, const char *text, struct rank_list *list)
{
	list->n = 0;
	return parse_list(option, text, "rank", add_rank, list);
}

static int parse_ops(const char *text, int *groups)
{
	*groups = 0;
	return parse_list("ops", text, "group (sddmm, spmm, als, elementwise, sgd or ccd)", add_group, groups);
}

static int parse(int argc, char **argv, struct calibrate_cli *c)
{
	static const struct option longopts[] = {
		CLI_RUNTIME_OPTIONS,
		{"ops", required_argument, NULL, 'o'},
		{"ranks", required_argument, NULL, 'k'},
		{"als-ranks", required_argument, NULL, 'a'},
		{"min-nnz", required_argument, NULL, 'm'},
		{"max-nnz", required_argument, NULL, 'M'},
		{"rounds", required_argument, NULL, 'n'},
		{"budget", required_argument, NULL, 'b'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	int opt;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		int handled = cli_runtime_option(opt, optarg, &c->runtime);
		if (handled < 0)
			return EXIT_USAGE;
		if (handled)
			continue;
		switch (opt) {
		case 'o':
			if (parse_ops(optarg, &c->groups))
				return EXIT_USAGE;
			break;
		case 'k':
			if (parse_ranks("ranks", optarg, &c->ranks))
				return EXIT_USAGE;
			break;
		case 'a':
			if (parse_ranks("als-ranks", optarg, &c->als_ranks))
				return EXIT_USAGE;
			break;
		case 'm':
			if (cli_parse_int("min-nnz", optarg, 1, INT32_MAX, &c->min_nnz))
				return EXIT_USAGE;
			break;
		case 'M':
			if (cli_parse_int("max-nnz", optarg, 1, INT32_MAX, &c->max_nnz))
				return EXIT_USAGE;
			break;
		case 'n':
			if (cli_parse_int("rounds", optarg, 1, 100000, &c->rounds))
				return EXIT_USAGE;
			break;
		case 'b':
			if (cli_parse_double("budget", optarg, 0, 1e9, &c->budget_ms))
				return EXIT_USAGE;
			break;
		case 'h':
			usage(stdout);
			return -1;
		default:
			return EXIT_USAGE;
		}
	}
	if (cli_no_operands(argc, argv))
		return EXIT_USAGE;
	if (c->min_nnz > c->max_nnz) {
		cli_error("--min-nnz %lld is above --max-nnz %lld", (long long)c->min_nnz, (long long)c->max_nnz);
		return EXIT_USAGE;
	}
	return 0;
}

/* The generators' random stream (xorshift64). */
static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A random nrows x ncols matrix with about nnz entries of values in [1, 2). */
/* Entries in the first used_rows of nrows rows (all of them when used_rows is nrows). */
static starfa_csr *random_matrix(int64_t nrows, int64_t used_rows, int64_t ncols, int64_t nnz, uint64_t seed)
{
	starfa_coo *coo = starfa_coo_new(nrows, ncols, nnz);
	if (!coo)
		return NULL;
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	for (int64_t e = 0; e < nnz; e++) {
		xorshift(&s);
		coo->row[e] = (int32_t)(s % (uint64_t)used_rows);
		coo->col[e] = (int32_t)((s >> 32) % (uint64_t)ncols);
		coo->val[e] = 1.0f + (float)(s >> 40) / 16777216.0f;
	}
	coo->nnz = nnz;
	starfa_csr *csr = NULL;
	int rc = starfa_csr_from_coo(coo, &csr);
	starfa_coo_free(coo);
	return rc ? NULL : csr;
}

/* A random permutation of [0, n) into p. */
static void random_order(int64_t *p, int64_t n, uint64_t *s)
{
	for (int64_t i = 0; i < n; i++)
		p[i] = i;
	for (int64_t i = n - 1; i > 0; i--) {
		int64_t j = (int64_t)(xorshift(s) % (uint64_t)(i + 1)), t = p[i];
		p[i] = p[j];
		p[j] = t;
	}
}

/* A ratings-like random matrix: row lengths by Zipf's law (the row of rank i, the ranks in a random order,
 * has about C / (i + nrows / 480) draws, at most ncols), columns drawn with weight rank^-1/2 over a random
 * order of the columns (the shape of the bench's Netflix matrix, bench/matrices.c). The draws are nnz in
 * all; a row's repeated draws count once, so it holds fewer entries: 60-70% of nnz from 16K entries to
 * 1M, 72% at 4M, 88% at 16M (the row caps and the repeats of the popular columns). The sizes calibrated
 * are what it holds (csr->nnz); from them the planner predicted the Netflix shape's GPU-alone epochs
 * within 1% (bench/PLACEMENT.md). Prints its error and returns NULL on failure. */
static starfa_csr *ratings_matrix(int64_t nrows, int64_t ncols, int64_t nnz, uint64_t seed)
{
	int64_t *perm_r = malloc((size_t)nrows * sizeof *perm_r), *perm_c = malloc((size_t)ncols * sizeof *perm_c);
	starfa_coo *coo = perm_r && perm_c ? starfa_coo_new(nrows, ncols, nnz) : NULL;
	if (!coo) {
		free(perm_r);
		free(perm_c);
		cli_error("out of memory for a %lld x %lld calibration matrix of %lld entries", (long long)nrows,
			  (long long)ncols, (long long)nnz);
		return NULL;
	}
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 3;
	random_order(perm_r, nrows, &s);
	random_order(perm_c, ncols, &s);
	const double off = nrows / 480.0 > 1 ? nrows / 480.0 : 1;
	double h = 0;
	for (int64_t i = 0; i < nrows; i++)
		h += 1.0 / ((double)i + off);
	const double sq = sqrt((double)ncols + 1.0);
	int64_t e = 0;
	for (int64_t i = 0; i < nrows && e < nnz; i++) {
		int64_t d = (int64_t)llround((double)nnz / h / ((double)i + off));
		d = d < 1 ? 1 : d > ncols ? ncols : d;
		for (int64_t q = 0; q < d && e < nnz; q++, e++) {
			const double u = (double)(xorshift(&s) >> 11) / 9007199254740992.0;
			int64_t r = (int64_t)((1.0 + u * (sq - 1.0)) * (1.0 + u * (sq - 1.0))) - 1; /* weight (r + 1)^-1/2 */
			r = r < 0 ? 0 : r >= ncols ? ncols - 1 : r;
			coo->row[e] = (int32_t)perm_r[i];
			coo->col[e] = (int32_t)perm_c[r];
			coo->val[e] = 1.0f + (float)(xorshift(&s) >> 40) / 16777216.0f;
		}
	}
	coo->nnz = e;
	free(perm_r);
	free(perm_c);
	starfa_csr *csr = NULL;
	int rc = starfa_coo_dedupe(coo, NULL);
	if (!rc)
		rc = starfa_csr_from_coo(coo, &csr);
	starfa_coo_free(coo);
	if (rc)
		cli_library_error();
	return rc ? NULL : csr;
}

/* Values in [-0.5, 0.5) without a short period, so that Gram matrices have full rank. */
static void fill(float *x, size_t n, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 7;
	for (size_t i = 0; i < n; i++) {
		xorshift(&s);
		x[i] = (float)(s >> 40) / 16777216.0f - 0.5f;
	}
}

/* The worker kind being calibrated: every tiled matrix is placed there, so every task is too. */
static starfa_worker_kind calibrating;

static starfa_tiling_options placed(starfa_tiling_options o)
{
	o.placed = 1;
	o.cpu_bands = calibrating == STARFA_WORKER_CPU ? (o.row_tiles > o.col_tiles ? o.row_tiles : o.col_tiles) : 0;
	o.row_cpu_share = o.col_cpu_share = calibrating == STARFA_WORKER_CPU ? 1.0 : 0.0;
	return o;
}

/* Groups and ranks whose task went over the budget on the kind being calibrated, and at which size:
 * the group's larger sizes are skipped at that rank (all of its operations, since later ones read what
 * earlier ones wrote), and a size no rank of a group needs is not even generated. */
struct calibrate_cli;
typedef int (*group_fn)(const struct calibrate_cli *, const starfa_csr *, int64_t);
#define MAX_SLOW 256
static struct {
	group_fn group;
	int64_t k, nnz;
} slow[MAX_SLOW];
static int nslow;
static group_fn current_group; /* the group calibrate_group is running */

static int is_slow(group_fn group, int64_t k, int64_t nnz)
{
	for (int i = 0; i < nslow; i++)
		if (slow[i].group == group && slow[i].k == k && slow[i].nnz < nnz)
			return 1;
	return 0;
}

/* The group stops growing at rank k past nnz (on the kind being calibrated). */
static void stop_growing(group_fn group, int64_t k, int64_t nnz)
{
	if (nslow < MAX_SLOW && !is_slow(group, k, nnz + 1)) {
		slow[nslow].group = group;
		slow[nslow].k = k;
		slow[nslow++].nnz = nnz;
	}
}

static double last_fastest_ms; /* the fastest round of the last run_rounds */

/* One operation's rounds: each inserts its tasks through insert(ctx, op) and waits. */
typedef int (*insert_fn)(void *ctx, int op);

static int run_rounds(const struct calibrate_cli *c, const char *name, int64_t k, int64_t nnz, insert_fn insert,
		      void *ctx, int op)
{
	last_fastest_ms = NAN;
	if (is_slow(current_group, k, nnz))
		return 0;
	starfa_stats_reset();
	double slowest = 0, fastest = INFINITY;
	for (int64_t round = 0; round < c->rounds; round++) {
		/* One round at a time: each round's tasks write the same outputs anyway. */
		double t0 = cli_now_seconds();
		if (insert(ctx, op) || starfa_wait())
			return cli_library_error();
		double ms = (cli_now_seconds() - t0) * 1e3;
		slowest = ms > slowest ? ms : slowest;
		fastest = ms < fastest ? ms : fastest;
	}
	last_fastest_ms = fastest;
	starfa_worker_stats st;
	starfa_stats_get(&st);
	printf("  %-22s k=%-4lld nnz=%-9lld tasks: %lld cpu, %lld cuda, slowest round %.1f ms\n", name, (long long)k,
	       (long long)nnz, (long long)st.tasks[STARFA_WORKER_CPU], (long long)st.tasks[STARFA_WORKER_CUDA], slowest);
	if (c->budget_ms > 0 && slowest > c->budget_ms)
		stop_growing(current_group, k, nnz);
	return 0;
}

/* ---------------------------------------------------------------- SDDMM and SpMM */

enum {
	OP_SDDMM,
	OP_SDDMM_SCALED,
	OP_SQERR_BAND,
	OP_SPMM_ROWS,
	OP_SPMM_COLS,
	OP_FUSED_ROWS,
	OP_FUSED_COLS,
	OP_FUSED_BAND,
	OP_SPMM_BAND,
	NOPS,
};
static const char *const op_names[NOPS] = {"sddmm", "sddmm (scaled)", "squared error band", "spmm S*X", "spmm S^T*X",
					   "sddmm+spmm fused (quotient)", "sddmm+spmm fused S^T (pattern)",
					   "sddmm+spmm band (quotient)", "spmm band S*X"};

struct tiles_ctx {
	starfa_tiled *S;
	starfa_dense *rows, *cols, *rows_out, *cols_out;
	starfa_sparse_values *P;
	starfa_sums *sums;
};

static int insert_tiles_op(void *ctx, int op)
{
	struct tiles_ctx *t = ctx;
	switch (op) {
	case OP_SDDMM: return starfa_insert_sddmm(t->S, t->rows, t->cols, STARFA_SDDMM_PATTERN, t->P);
	case OP_SDDMM_SCALED: return starfa_insert_sddmm(t->S, t->rows, t->cols, STARFA_SDDMM_SCALED, t->P);
	case OP_SQERR_BAND: return starfa_task_sqerr_band(t->S, STARFA_ROWS, 0, t->rows, t->cols, 0.5f, t->sums, 0, NULL);
	/* the one tile's tasks by the per-tile functions: the whole-matrix helpers run a band a task (the
	 * band ops below) */
	case OP_SPMM_ROWS: return starfa_task_spmm(t->S, STARFA_ROWS, 0, 0, NULL, t->cols, t->rows_out, 0, NULL);
	case OP_FUSED_ROWS:
		return starfa_task_sddmm_spmm(t->S, STARFA_ROWS, 0, 0, t->rows, t->cols, STARFA_FUSED_QUOTIENT, 1e-12f, NULL,
					      t->rows_out, 0, NULL);
	case OP_FUSED_COLS:
		return starfa_task_sddmm_spmm(t->S, STARFA_COLS, 0, 0, t->cols, t->rows, STARFA_FUSED_PATTERN, 0.0f, NULL,
					      t->cols_out, 0, NULL);
	case OP_FUSED_BAND:
		return starfa_task_sddmm_spmm_band(t->S, STARFA_ROWS, 0, t->rows, t->cols, STARFA_FUSED_QUOTIENT, 1e-12f, NULL,
						   t->rows_out, NULL);
	case OP_SPMM_BAND: return starfa_task_spmm_band(t->S, STARFA_ROWS, 0, NULL, t->cols, t->rows_out, NULL);
	default: return starfa_task_spmm(t->S, STARFA_COLS, 0, 0, NULL, t->rows, t->cols_out, 0, NULL);
	}
}

/* Calibrates the SDDMM and SpMM operations asked for on one matrix at one rank. */
static int calibrate_tiles(const struct calibrate_cli *c, const starfa_csr *csr, int64_t k)
{
	int rc = 1;
	struct tiles_ctx t = {0};
	size_t nr = (size_t)(csr->nrows * k), nc = (size_t)(csr->ncols * k);
	float *a = malloc(nr * sizeof *a), *b = malloc(nc * sizeof *b);
	float *ya = malloc(nr * sizeof *ya), *yb = malloc(nc * sizeof *yb);
	if (!a || !b || !ya || !yb) {
		cli_error("out of memory for rank %lld factors", (long long)k);
		goto out;
	}
	fill(a, nr, 1);
	fill(b, nc, 2);
	starfa_tiling_options one_tile = placed((starfa_tiling_options){1, 1, 1});
	if (starfa_tiled_create(csr, &one_tile, &t.S) || starfa_dense_create(t.S, STARFA_ROWS, a, k, &t.rows) ||
	    starfa_dense_create(t.S, STARFA_COLS, b, k, &t.cols) ||
	    starfa_dense_create(t.S, STARFA_ROWS, ya, k, &t.rows_out) ||
	    starfa_dense_create(t.S, STARFA_COLS, yb, k, &t.cols_out) || starfa_sparse_values_create(t.S, STARFA_ROWS, &t.P) ||
	    starfa_sums_create(1, &t.sums)) {
		cli_library_error();
		goto out;
	}
	rc = 0;
	for (int op = 0; op < NOPS && rc == 0; op++) {
		int group = op <= OP_SQERR_BAND ? GROUP_SDDMM : GROUP_SPMM;
		if (c->groups & group)
			rc = run_rounds(c, op_names[op], k, csr->nnz, insert_tiles_op, &t, op);
	}
out:
	starfa_sums_free(t.sums);
	starfa_sparse_values_free(t.P);
	starfa_dense_free(t.rows);
	starfa_dense_free(t.cols);
	starfa_dense_free(t.rows_out);
	starfa_dense_free(t.cols_out);
	starfa_tiled_free(t.S);
	free(a);
	free(b);
	free(ya);
	free(yb);
	return rc;
}

/* ---------------------------------------------------------------- ALS */

/* In this order: the stored-system operations run after the ones that give them valid systems. */
enum {
	ALS_GRAM,
	ALS_ROWSOLVE_CHOL,
	ALS_ROWSOLVE_CG,
	ALS_ROWSOLVE_IMPLICIT,
	ALS_TOP_K,
	ALS_HERMITIAN,
	ALS_BIAS,
	ALS_SOLVE_CHOL,
	ALS_SOLVE_CG,
	ALS_HERMITIAN_IMPLICIT,
	ALS_BIAS_IMPLICIT,
	ALS_SOLVE_IMPLICIT,
	ALS_HERMITIAN_FP16,
	ALS_SOLVE_FP16,
	ALS_NOPS,
	ALS_FIRST_STORED = ALS_HERMITIAN,
};
static const char *const als_names[ALS_NOPS] = {
	"gram",		  "rowsolve chol",	"rowsolve cg",		"rowsolve cg (implicit)", "top k (10)", "hermitian",
	"bias",		  "solve chol",		"solve cg",		"hermitian (implicit)",   "bias (implicit)",
	"solve cg (implicit)", "hermitian+bias (fp16)", "solve cg (fp16)",
};

#define ALS_ALPHA 4.0f
#define ALS_CG_STEPS 3
#define ALS_RANKED 10 /* the ranking metrics' default k */

struct als_ctx {
	starfa_tiled *S;
	int64_t k;
	starfa_dense *theta, *info, *x, *lists; /* lists: top_k's, ALS_RANKED a row */
	starfa_systems *sys, *sys16, *status; /* status: rowsolve's status words */
	starfa_gram *G;
};

static int insert_als_op(void *ctx, int op)
{
	struct als_ctx *a = ctx;
	const starfa_feedback ex = STARFA_EXPLICIT, im = STARFA_IMPLICIT;
	switch (op) {
	case ALS_GRAM: return starfa_insert_gram(a->theta, 0, a->k, a->G);
	case ALS_ROWSOLVE_CHOL:
		return starfa_insert_rowsolve(a->S, STARFA_ROWS, 0, a->theta, 0, -1, 3.5f, ex, 0, a->info, NULL,
					      STARFA_SOLVER_CHOLESKY, 0, a->x, 0, a->status);
	case ALS_ROWSOLVE_CG:
		return starfa_insert_rowsolve(a->S, STARFA_ROWS, 0, a->theta, 0, -1, 3.5f, ex, 0, a->info, NULL,
					      STARFA_SOLVER_CG, ALS_CG_STEPS, a->x, 0, a->status);
	case ALS_ROWSOLVE_IMPLICIT:
		return starfa_insert_rowsolve(a->S, STARFA_ROWS, 0, a->theta, 0, -1, 0, im, ALS_ALPHA, a->info, a->G,
					      STARFA_SOLVER_CG, ALS_CG_STEPS, a->x, 0, a->status);
	case ALS_TOP_K: return starfa_insert_top_k(a->S, a->x, a->theta, ALS_RANKED, NULL, &a->lists);
	case ALS_HERMITIAN: return starfa_insert_hermitian(a->S, STARFA_ROWS, 0, a->theta, 0, ex, 0, a->info, a->sys);
	case ALS_BIAS: return starfa_insert_bias(a->S, STARFA_ROWS, 0, a->theta, 0, -1, 3.5f, ex, 0, a->sys);
	case ALS_SOLVE_CHOL:
		return starfa_insert_solve(a->sys, 0, a->info, NULL, STARFA_SOLVER_CHOLESKY, 0, a->x, 0);
	case ALS_SOLVE_CG: return starfa_insert_solve(a->sys, 0, a->info, NULL, STARFA_SOLVER_CG, ALS_CG_STEPS, a->x, 0);
	case ALS_HERMITIAN_IMPLICIT:
		return starfa_insert_hermitian(a->S, STARFA_ROWS, 0, a->theta, 0, im, ALS_ALPHA, a->info, a->sys);
	case ALS_BIAS_IMPLICIT: return starfa_insert_bias(a->S, STARFA_ROWS, 0, a->theta, 0, -1, 0, im, ALS_ALPHA, a->sys);
	case ALS_SOLVE_IMPLICIT:
		return starfa_insert_solve(a->sys, 0, a->info, a->G, STARFA_SOLVER_CG, ALS_CG_STEPS, a->x, 0);
	case ALS_HERMITIAN_FP16: {
		/* and the right-hand sides, which the FP16 solves need too */
		int rc = starfa_insert_hermitian(a->S, STARFA_ROWS, 0, a->theta, 0, ex, 0, a->info, a->sys16);
		return rc ? rc : starfa_insert_bias(a->S, STARFA_ROWS, 0, a->theta, 0, -1, 3.5f, ex, 0, a->sys16);
	}
	default: return starfa_insert_solve(a->sys16, 0, a->info, NULL, STARFA_SOLVER_CG, ALS_CG_STEPS, a->x, 0);
	}
}

/* Calibrates the ALS operations on one matrix at one rank, solving its rows against factors of its
 * columns: one band of one tile, as a graph's tasks see them. */
static int calibrate_als(const struct calibrate_cli *c, const starfa_csr *csr, int64_t k)
{
	int rc = 1;
	struct als_ctx a = {.k = k};
	size_t nt = (size_t)(csr->ncols * k), nx = (size_t)(csr->nrows * k);
	float *theta = malloc(nt * sizeof *theta), *x = calloc(nx, sizeof *x);
	float *info = malloc((size_t)csr->nrows * 2 * sizeof *info);
	float *lists = malloc((size_t)csr->nrows * 2 * ALS_RANKED * sizeof *lists);
	if (!theta || !x || !info || !lists) {
		cli_error("out of memory for rank %lld factors", (long long)k);
		goto out;
	}
	fill(theta, nt, 3);
	for (int64_t r = 0; r < csr->nrows; r++) {
		int64_t n = csr->rowptr[r + 1] - csr->rowptr[r];
		info[2 * r] = 0.1f * (float)(n > 0 ? n : 1);   /* ALS-WR's lambda * n_u */
		info[2 * r + 1] = (float)(n > 0 ? 2 * n : 1); /* >= the sum of weights (values < 2) */
	}
	int stored = (size_t)csr->nrows * (size_t)(k * k) * sizeof(float) <= MAX_SYSTEMS_BYTES;
	starfa_tiling_options one_tile = placed((starfa_tiling_options){1, 1, 0});
	if (starfa_tiled_create(csr, &one_tile, &a.S) || starfa_dense_create(a.S, STARFA_COLS, theta, k, &a.theta) ||
	    starfa_dense_create(a.S, STARFA_ROWS, x, k, &a.x) || starfa_dense_create(a.S, STARFA_ROWS, info, 2, &a.info) ||
	    starfa_dense_create(a.S, STARFA_ROWS, lists, 2 * ALS_RANKED, &a.lists) ||
	    starfa_gram_create(k, &a.G) || starfa_systems_create(a.S, STARFA_ROWS, k, 0, 1, &a.status) ||
	    (stored && (starfa_systems_create(a.S, STARFA_ROWS, k, 0, 1, &a.sys) ||
			starfa_systems_create(a.S, STARFA_ROWS, k, 1, 1, &a.sys16)))) {
		cli_library_error();
		goto out;
	}
	rc = 0;
	for (int op = 0; op < ALS_NOPS && rc == 0; op++)
		if (stored || op < ALS_FIRST_STORED)
			rc = run_rounds(c, als_names[op], k, csr->nnz, insert_als_op, &a, op);
	if (rc == 0 && !stored)
		printf("  (hermitian, bias and solve skipped at k=%lld nnz=%lld: the systems would exceed %zu MiB)\n",
		       (long long)k, (long long)csr->nnz, MAX_SYSTEMS_BYTES >> 20);
out:
	/* The systems first: freeing them waits for their tasks, which read the other handles. */
	starfa_systems_free(a.sys16);
	starfa_systems_free(a.sys);
	starfa_systems_free(a.status);
	starfa_gram_free(a.G);
	starfa_dense_free(a.info);
	starfa_dense_free(a.lists);
	starfa_dense_free(a.x);
	starfa_dense_free(a.theta);
	starfa_tiled_free(a.S);
	free(theta);
	free(x);
	free(info);
	free(lists);
	return rc;
}

/* ---------------------------------------------------------------- element-wise operations */

enum {
	EW_SDDMM_BETA,
	EW_TRANSPOSE,
	EW_QUOTIENT,
	EW_REDUCE,
	EW_DENSE_MAP,
	EW_COLSUM,
	EW_ROWSUM,
	EW_DENSE_REDUCE,
	EW_TO_HALF,
	EW_FROM_HALF,
	EW_CG,
	EW_DIRICHLET,
	EW_UNIFORM,
	EW_NOPS
};
static const char *const ew_names[EW_NOPS] = {"sddmm (beta 1)", "values transpose", "values quotient",
					       "values reduce (KL)", "dense map (mul)", "dense colsum",
					       "dense rowsum", "dense reduce", "dense to FP16", "dense from FP16",
					       "dense CG (start and step)", "dense Dirichlet step (all rows, masked)",
					       "dense uniform draws"};

struct ew_ctx {
	starfa_tiled *S;
	starfa_dense *rows, *cols, *rows_out, *sums_out, *halves; /* halves: rows in FP16, even ranks */
	starfa_dense *cg_r, *cg_p, *cg_lam;                        /* dense_cg's residual, direction, shifts */
	starfa_dense *dir_gamma, *dir_elog, *dir_exp, *dir_g, *dir_active; /* dense_dirichlet's operands */
	starfa_sums *dir_left;
	starfa_sparse_values *P, *PT;
	starfa_vector *v;
};

static int insert_ew_op(void *ctx, int op)
{
	struct ew_ctx *e = ctx;
	double total;
	switch (op) {
	case EW_SDDMM_BETA: return starfa_insert_sddmm_ab(e->S, e->rows, e->cols, STARFA_SDDMM_PATTERN, -1.0f, 1.0f, e->P);
	case EW_TRANSPOSE: return starfa_insert_values_transpose(e->P, e->PT);
	case EW_QUOTIENT: return starfa_insert_values_map(e->P, STARFA_VALUES_QUOTIENT, 1e-12f, 0.0f, NULL);
	case EW_REDUCE: return starfa_reduce_values(e->P, STARFA_REDUCE_KL, 1e-12f, NULL, &total);
	case EW_DENSE_MAP: return starfa_insert_dense_map(e->rows_out, STARFA_DENSE_MUL, 0, 0, e->rows, NULL);
	case EW_COLSUM: return starfa_insert_dense_colsum(e->rows, e->v);
	case EW_ROWSUM: return starfa_insert_dense_rowsum(e->rows, e->sums_out);
	case EW_TO_HALF: return starfa_insert_dense_convert(e->halves, STARFA_TO_HALF, e->rows);
	case EW_FROM_HALF: return starfa_insert_dense_convert(e->rows_out, STARFA_FROM_HALF, e->halves);
	case EW_CG: { /* both variants; the start resets the state the step would otherwise run away with */
		int rc = starfa_insert_dense_cg(e->rows_out, e->cg_r, e->cg_p, e->rows, e->sums_out, e->cg_lam, 1);
		return rc ? rc : starfa_insert_dense_cg(e->rows_out, e->cg_r, e->cg_p, e->rows, e->sums_out, e->cg_lam, 0);
	}
	case EW_DIRICHLET: /* both variants; tol 0 keeps every row active */
		for (int64_t b = 0; b < starfa_tiled_row_tiles(e->S); b++) {
			int rc = starfa_task_dense_dirichlet(e->dir_gamma, e->dir_elog, e->dir_exp, e->dir_g, NULL, 0.05f, 0.0f,
							     e->dir_left, b, b, NULL);
			if (!rc)
				rc = starfa_task_dense_dirichlet(e->dir_gamma, e->dir_elog, e->dir_exp, e->dir_g, e->dir_active,
								 0.05f, 0.0f, e->dir_left, b, b, NULL);
			if (rc)
				return rc;
		}
		return 0;
	case EW_UNIFORM: return starfa_insert_dense_uniform(e->rows_out, 0.5f, 1.5f, 42);
	default: return starfa_reduce_dense(e->rows, STARFA_REDUCE_SQUARES, &total);
	}
}

/* Positive values in [lo, lo + 1): Dirichlet parameters and their expectations. */
static void fill_positive(float *x, size_t n, uint64_t seed, float lo)
{
	fill(x, n, seed);
	for (size_t i = 0; i < n; i++)
		x[i] += lo + 0.5f;
}

/* Calibrates the element-wise operations at one rank, on a 2 x 2 grid whose second row band has no
 * entries (bands cut by rows): its tiles' reductions are the zero codelet's tasks. */
static int calibrate_elementwise(const struct calibrate_cli *c, const starfa_csr *csr, int64_t k)
{
	int rc = 1;
	struct ew_ctx e = {0};
	size_t nr = (size_t)(csr->nrows * k), nc = (size_t)(csr->ncols * k);
	float *a = malloc(nr * sizeof *a), *b = malloc(nc * sizeof *b), *ya = malloc(nr * sizeof *ya);
	float *sums = malloc((size_t)csr->nrows * sizeof *sums), *halves = malloc((nr / 2 + 1) * sizeof *halves);
	float *cg_r = malloc(nr * sizeof *cg_r), *cg_p = malloc(nr * sizeof *cg_p),
	      *cg_lam = malloc((size_t)csr->nrows * sizeof *cg_lam);
	float *dir_gamma = malloc(nr * sizeof *dir_gamma), *dir_elog = malloc(nr * sizeof *dir_elog),
	      *dir_exp = malloc(nr * sizeof *dir_exp), *dir_g = malloc(nr * sizeof *dir_g),
	      *dir_active = malloc((size_t)csr->nrows * sizeof *dir_active);
	if (!a || !b || !ya || !sums || !halves || !cg_r || !cg_p || !cg_lam || !dir_gamma || !dir_elog || !dir_exp ||
	    !dir_g || !dir_active) {
		cli_error("out of memory for rank %lld factors", (long long)k);
		goto out;
	}
	fill(a, nr, 5);
	fill(b, nc, 6);
	fill(ya, nr, 7);
	fill(cg_lam, (size_t)csr->nrows, 8);
	fill_positive(dir_gamma, nr, 9, 0.5f);
	fill_positive(dir_exp, nr, 10, 0.1f);
	fill_positive(dir_g, nr, 11, 0.5f);
	for (int64_t r = 0; r < csr->nrows; r++)
		dir_active[r] = 1.0f;
	starfa_tiling_options by_rows = placed((starfa_tiling_options){2, 2, 1, 1e6, 0});
	if (starfa_tiled_create(csr, &by_rows, &e.S) || starfa_dense_create(e.S, STARFA_ROWS, a, k, &e.rows) ||
	    starfa_dense_create(e.S, STARFA_COLS, b, k, &e.cols) || starfa_dense_create(e.S, STARFA_ROWS, ya, k, &e.rows_out) ||
	    starfa_dense_create(e.S, STARFA_ROWS, sums, 1, &e.sums_out) ||
	    starfa_dense_create(e.S, STARFA_ROWS, cg_r, k, &e.cg_r) || starfa_dense_create(e.S, STARFA_ROWS, cg_p, k, &e.cg_p) ||
	    starfa_dense_create(e.S, STARFA_ROWS, cg_lam, 1, &e.cg_lam) ||
	    starfa_dense_create(e.S, STARFA_ROWS, dir_gamma, k, &e.dir_gamma) ||
	    starfa_dense_create(e.S, STARFA_ROWS, dir_elog, k, &e.dir_elog) ||
	    starfa_dense_create(e.S, STARFA_ROWS, dir_exp, k, &e.dir_exp) ||
	    starfa_dense_create(e.S, STARFA_ROWS, dir_g, k, &e.dir_g) ||
	    starfa_dense_create(e.S, STARFA_ROWS, dir_active, 1, &e.dir_active) ||
	    starfa_sums_create(starfa_tiled_row_tiles(e.S), &e.dir_left) ||
	    (k % 2 == 0 && starfa_dense_create(e.S, STARFA_ROWS, halves, k / 2, &e.halves)) ||
	    starfa_sparse_values_create(e.S, STARFA_ROWS, &e.P) || starfa_sparse_values_create(e.S, STARFA_COLS, &e.PT) ||
	    starfa_vector_create(k, &e.v) || starfa_insert_values_map(e.P, STARFA_VALUES_COPY, 0, 0, NULL)) {
		cli_library_error();
		goto out;
	}
	rc = 0;
	for (int op = 0; op < EW_NOPS && rc == 0; op++)
		if (e.halves || (op != EW_TO_HALF && op != EW_FROM_HALF))
			rc = run_rounds(c, ew_names[op], k, csr->nnz, insert_ew_op, &e, op);
out:
	starfa_dense_free(e.halves);
	starfa_sparse_values_free(e.P);
	starfa_sparse_values_free(e.PT);
	starfa_vector_free(e.v);
	starfa_dense_free(e.rows);
	starfa_dense_free(e.cols);
	starfa_dense_free(e.rows_out);
	starfa_dense_free(e.sums_out);
	starfa_dense_free(e.cg_r);
	starfa_dense_free(e.cg_p);
	starfa_dense_free(e.cg_lam);
	starfa_dense_free(e.dir_gamma);
	starfa_dense_free(e.dir_elog);
	starfa_dense_free(e.dir_exp);
	starfa_dense_free(e.dir_g);
	starfa_dense_free(e.dir_active);
	starfa_sums_free(e.dir_left);
	starfa_tiled_free(e.S);
	free(cg_r);
	free(cg_p);
	free(cg_lam);
	free(dir_gamma);
	free(dir_elog);
	free(dir_exp);
	free(dir_g);
	free(dir_active);
	free(a);
	free(b);
	free(ya);
	free(sums);
	free(halves);
	return rc;
}

/* ---------------------------------------------------------------- SGD */

/* At most this many passes a round run at once on the cores (one a core). */
#define MAX_SGD_COPIES 256

struct sgd_ctx {
	starfa_tiled *S;
	int64_t span; /* tiles a task (one row band cut into that many column tiles) */
	int copies;   /* passes a round, each on factors of its own over the shared tile */
	starfa_dense *U[MAX_SGD_COPIES], *V[MAX_SGD_COPIES], *HU[MAX_SGD_COPIES], *HV[MAX_SGD_COPIES];
	starfa_sums *sse; /* a slot a copy */
	starfa_sgd_step step;
};

static int insert_sgd_op(void *ctx, int half)
{
	struct sgd_ctx *g = ctx;
	g->step.epoch++;
	g->step.half = half;
	for (int c = 0; c < g->copies; c++) {
		int rc = starfa_task_sgd_span(g->S, 0, 0, g->span, half ? g->HU[c] : g->U[c], half ? g->HV[c] : g->V[c], NULL,
					      NULL, &g->step, g->sse, c, NULL);
		if (rc)
			return rc;
	}
	return 0;
}

/* A GPU's SGD pass is its updaters' chains of updates until a tile fills their waves: its rate grows
 * past --max-nnz (on the H200, rank 16, 4M entries ran at about half the rate of 16M), and the planner
 * scales the largest sample linearly. So on the GPUs it goes on growing, up to 4x --max-nnz, while its
 * rate at a rank still rises by 20% from one size to the next. */
#define SGD_GPU_GROWTH 4
static int64_t size_nnz; /* the size calibrate_sizes is at */
static void sgd_gpu_growth(const struct calibrate_cli *c, int64_t k, int64_t nnz, double rate)
{
	static struct {
		int64_t k;
		double rate;
	} last[MAX_RANKS];
	static int n;
	int i = 0;
	while (i < n && last[i].k != k)
		i++;
	const int rising = i == n || !(last[i].rate > 0) || rate > 1.2 * last[i].rate;
	if (i == n && n < MAX_RANKS)
		last[n++].k = k;
	if (i < MAX_RANKS)
		last[i].rate = rate;
	if (4 * size_nnz > c->max_nnz && !rising)
		stop_growing(current_group, k, nnz);
}

/* Calibrates the SGD pass at one rank, FP32 and FP16 rows, on one tile, or with span > 1 as one task over
 * the matrix cut into span column tiles: ratings-like values, a small rate. On the cores a round runs one
 * pass a core at once, each on factors of its own: the planner's split runs every core at once, where a
 * pass measured alone had the memory system to itself (69M updates/s a core on a 16-core H200 host,
 * against 28-30M in the split, bench/PLACEMENT.md). */
static int sgd_rounds(const struct calibrate_cli *c, const starfa_csr *csr, int64_t k, int64_t span)
{
	int rc = 1;
	struct sgd_ctx g = {.step = {k, 0.001f, 0.05f, 0.05f, 1.5f, 1, 0, 1, 0, 0}, .span = span > 1 ? span : 1};
	g.copies = calibrating == STARFA_WORKER_CPU && span <= 1 ? starfa_worker_count(STARFA_WORKER_CPU) : 1;
	if (g.copies > MAX_SGD_COPIES)
		g.copies = MAX_SGD_COPIES;
	if (g.copies < 1)
		g.copies = 1;
	/* rows of a multiple of 8 floats, as the training pads them (graphs/sgd.c), so that the CUDA kernel
	 * takes its 16-byte loads in FP32 and in FP16 (two halves to a float) alike: narrower rows ran its
	 * scalar form, which no training runs */
	const int64_t w = (k + 2 + 7) / 8 * 8;
	size_t nu = (size_t)(csr->nrows * w), nv = (size_t)(csr->ncols * w);
	/* the copies one after the other in each buffer, all starting from the same factors */
	float *U = malloc((size_t)g.copies * nu * sizeof *U), *V = malloc((size_t)g.copies * nv * sizeof *V);
	float *HU = malloc((size_t)g.copies * nu / 2 * sizeof *HU), *HV = malloc((size_t)g.copies * nv / 2 * sizeof *HV);
	if (!U || !V || !HU || !HV) {
		cli_error("out of memory for %d copies of the rank %lld factors", g.copies, (long long)k);
		goto out;
	}
	fill(U, nu, 8);
	fill(V, nv, 9);
	for (int i = 1; i < g.copies; i++) {
		memcpy(U + (size_t)i * nu, U, nu * sizeof *U);
		memcpy(V + (size_t)i * nv, V, nv * sizeof *V);
	}
	starfa_tiling_options one_tile = placed((starfa_tiling_options){1, g.span, 0, 0, 0});
	if (starfa_tiled_create(csr, &one_tile, &g.S) || starfa_sums_create(g.copies, &g.sse)) {
		cli_library_error();
		goto out;
	}
	for (int i = 0; i < g.copies; i++) {
		if (starfa_dense_create(g.S, STARFA_ROWS, U + (size_t)i * nu, w, &g.U[i]) ||
		    starfa_dense_create(g.S, STARFA_COLS, V + (size_t)i * nv, w, &g.V[i]) ||
		    starfa_dense_create(g.S, STARFA_ROWS, HU + (size_t)i * nu / 2, w / 2, &g.HU[i]) ||
		    starfa_dense_create(g.S, STARFA_COLS, HV + (size_t)i * nv / 2, w / 2, &g.HV[i]) ||
		    starfa_insert_dense_convert(g.HU[i], STARFA_TO_HALF, g.U[i]) ||
		    starfa_insert_dense_convert(g.HV[i], STARFA_TO_HALF, g.V[i])) {
			cli_library_error();
			goto out;
		}
	}
	rc = run_rounds(c, g.span > 1 ? "sgd span" : "sgd", k, csr->nnz, insert_sgd_op, &g, 0);
	if (rc == 0 && g.span == 1 && calibrating == STARFA_WORKER_CUDA && last_fastest_ms > 0)
		sgd_gpu_growth(c, k, csr->nnz, (double)csr->nnz / last_fastest_ms);
	if (rc == 0)
		rc = run_rounds(c, g.span > 1 ? "sgd span (FP16 rows)" : "sgd (FP16 rows)", k, csr->nnz, insert_sgd_op, &g, 1);
out:
	starfa_sums_free(g.sse);
	for (int i = 0; i < g.copies; i++) {
		starfa_dense_free(g.U[i]);
		starfa_dense_free(g.V[i]);
		starfa_dense_free(g.HU[i]);
		starfa_dense_free(g.HV[i]);
	}
	starfa_tiled_free(g.S);
	free(U);
	free(V);
	free(HU);
	free(HV);
	return rc;
}

/* The one-tile passes; on the GPUs also the span a GPU runs in an SGD split (graphs/sgd.c: one task over
 * a column block of as many tiles as there are cores), a variant of its own in the model, from which the
 * planner predicts a split's GPU part. */
static int calibrate_sgd(const struct calibrate_cli *c, const starfa_csr *csr, int64_t k)
{
	int rc = sgd_rounds(c, csr, k, 1);
	const int64_t ncpu = starfa_worker_count(STARFA_WORKER_CPU);
	if (rc == 0 && calibrating == STARFA_WORKER_CUDA && ncpu > 1 && ncpu <= csr->ncols)
		rc = sgd_rounds(c, csr, k, ncpu);
	return rc;
}

/* ---------------------------------------------------------------- CCD++ */

enum {
	CCD_OPEN_ROWS,
	CCD_OPEN_COLS,
	CCD_INNER,
	CCD_CLOSE,
	CCD_SOLVE,
	CCD_BAND_OPEN,
	CCD_BAND_INNER,
	CCD_BAND_CLOSE,
	CCD_FEATURE,
	CCD_REGULARIZER,
	CCD_NOPS
};
static const char *const ccd_names[CCD_NOPS] = {"ccd pass (open, rows)", "ccd pass (open, cols)", "ccd pass (inner)",
						"ccd pass (close)", "ccd solve", "ccd band (open)", "ccd band (inner)",
						"ccd band (close)", "ccd feature", "ccd regularizer"};

struct ccd_ctx {
	starfa_tiled *S;
	starfa_sparse_values *R, *RT;
	starfa_dense *w, *h, *acc_w, *acc_h, *count_w, *count_h, *prev_w, *prev_h, *held;
	starfa_sums *reg;
};

static int insert_ccd_op(void *ctx, int op)
{
	struct ccd_ctx *g = ctx;
	starfa_ccd_terms rows = {g->w, g->h, g->w, g->h, g->h}, cols = {g->h, g->w, g->h, g->w, g->w};
	starfa_ccd_terms inner = {NULL, NULL, NULL, NULL, g->h}, close = {g->w, g->h, NULL, NULL, NULL};
	switch (op) {
	case CCD_OPEN_ROWS: return starfa_task_ccd_pass(g->S, STARFA_ROWS, 0, 0, g->R, 1, &rows, g->acc_w, 0, NULL);
	case CCD_OPEN_COLS: return starfa_task_ccd_pass(g->S, STARFA_COLS, 0, 0, g->RT, 1, &cols, g->acc_h, 0, NULL);
	case CCD_INNER: return starfa_task_ccd_pass(g->S, STARFA_ROWS, 0, 0, g->R, 0, &inner, g->acc_w, 0, NULL);
	case CCD_CLOSE: return starfa_task_ccd_pass(g->S, STARFA_ROWS, 0, 0, g->R, 1, &close, NULL, 0, NULL);
	case CCD_BAND_OPEN:
		return starfa_task_ccd_band(g->S, STARFA_ROWS, 0, g->R, 1, &rows, g->acc_w, g->w, g->count_w, 0.05f, 0, NULL);
	case CCD_BAND_INNER:
		return starfa_task_ccd_band(g->S, STARFA_ROWS, 0, g->R, 0, &inner, g->acc_w, g->w, g->count_w, 0.05f, 0, NULL);
	case CCD_BAND_CLOSE: /* the graphs' residual-only sweeps (a fixed side, the close) */
		return starfa_task_ccd_band(g->S, STARFA_ROWS, 0, g->R, 1, &close, NULL, NULL, NULL, 0.0f, 0, NULL);
	case CCD_FEATURE: { /* a factor's whole update on a matrix of one band a side, libpmf's 5 inner rounds,
			     * adding its regularization to a slot as CCD++'s training does */
		starfa_ccd_feature f = {g->R,	    g->RT,	  g->prev_w, g->prev_h, g->w, g->h, g->held, g->acc_w,
					g->acc_h, g->count_w, g->count_h, 0.05f,     0,		1,    1,    5,
					g->reg,   0,	      1};
		return starfa_task_ccd_feature(g->S, &f, NULL);
	}
	case CCD_REGULARIZER: return starfa_task_ccd_regularizer(g->w, 0, g->count_w, g->reg, 0, 0, NULL);
	default: return starfa_task_ccd_solve(g->w, 0, g->acc_w, g->count_w, 0.05f, 0, NULL);
	}
}

/* Calibrates CCD++'s passes (the four kinds a feature makes), its update, its band tasks, the
 * one-task feature and a block's regularization on one tile; their cost
 * does not depend on the rank, so the first rank asked for only. */
static int calibrate_ccd(const struct calibrate_cli *c, const starfa_csr *csr, int64_t k)
{
	if (k != c->als_ranks.rank[0])
		return 0;
	int rc = 1;
	struct ccd_ctx g = {0};
	size_t m = (size_t)csr->nrows, n = (size_t)csr->ncols;
	float *w = malloc(m * sizeof *w), *h = malloc(n * sizeof *h), *acc_w = malloc(2 * m * sizeof *acc_w),
	      *acc_h = malloc(2 * n * sizeof *acc_h), *count_w = malloc(m * sizeof *count_w),
	      *count_h = calloc(n, sizeof *count_h), *prev_w = malloc(m * sizeof *prev_w),
	      *prev_h = malloc(n * sizeof *prev_h), *held = malloc(n * sizeof *held);
	if (!w || !h || !acc_w || !acc_h || !count_w || !count_h || !prev_w || !prev_h || !held) {
		cli_error("out of memory for the CCD++ vectors");
		goto out;
	}
	fill(w, m, 10);
	fill(h, n, 11);
	fill(prev_w, m, 12);
	fill(prev_h, n, 13);
	for (size_t r = 0; r < m; r++)
		count_w[r] = (float)(csr->rowptr[r + 1] - csr->rowptr[r]);
	for (int64_t e = 0; e < csr->nnz; e++)
		count_h[csr->colind[e]] += 1.0f;
	starfa_tiling_options one_tile = placed((starfa_tiling_options){1, 1, 1, 0, 0});
	if (starfa_tiled_create(csr, &one_tile, &g.S) || starfa_dense_create(g.S, STARFA_ROWS, w, 1, &g.w) ||
	    starfa_dense_create(g.S, STARFA_COLS, h, 1, &g.h) || starfa_dense_create(g.S, STARFA_ROWS, acc_w, 2, &g.acc_w) ||
	    starfa_dense_create(g.S, STARFA_COLS, acc_h, 2, &g.acc_h) ||
	    starfa_dense_create(g.S, STARFA_ROWS, count_w, 1, &g.count_w) ||
	    starfa_dense_create(g.S, STARFA_COLS, count_h, 1, &g.count_h) ||
	    starfa_dense_create(g.S, STARFA_ROWS, prev_w, 1, &g.prev_w) ||
	    starfa_dense_create(g.S, STARFA_COLS, prev_h, 1, &g.prev_h) ||
	    starfa_dense_create(g.S, STARFA_COLS, held, 1, &g.held) ||
	    starfa_sparse_values_create(g.S, STARFA_ROWS, &g.R) || starfa_sparse_values_create(g.S, STARFA_COLS, &g.RT) ||
	    starfa_sums_create(1, &g.reg) || starfa_insert_values_map(g.R, STARFA_VALUES_COPY, 0, 0, NULL) ||
	    starfa_insert_values_map(g.RT, STARFA_VALUES_COPY, 0, 0, NULL)) {
		cli_library_error();
		goto out;
	}
	rc = 0;
	for (int op = 0; op < CCD_NOPS && rc == 0; op++)
		rc = run_rounds(c, ccd_names[op], 1, csr->nnz, insert_ccd_op, &g, op);
out:
	starfa_sparse_values_free(g.R);
	starfa_sparse_values_free(g.RT);
	starfa_sums_free(g.reg);
	starfa_dense_free(g.w);
	starfa_dense_free(g.h);
	starfa_dense_free(g.acc_w);
	starfa_dense_free(g.acc_h);
	starfa_dense_free(g.count_w);
	starfa_dense_free(g.count_h);
	starfa_dense_free(g.prev_w);
	starfa_dense_free(g.prev_h);
	starfa_dense_free(g.held);
	starfa_tiled_free(g.S);
	free(w);
	free(h);
	free(acc_w);
	free(acc_h);
	free(count_w);
	free(count_h);
	free(prev_w);
	free(prev_h);
	free(held);
	return rc;
}

/* One group at one size: a random matrix of its shape, then its calibration at each of its ranks. */
static int calibrate_group(const struct calibrate_cli *c, int64_t nrows, int64_t used_rows, int64_t ncols, int64_t nnz,
			   uint64_t seed, const struct rank_list *ranks,
			   int (*calibrate)(const struct calibrate_cli *, const starfa_csr *, int64_t))
{
	int needed = 0;
	for (int r = 0; r < ranks->n; r++)
		needed += !is_slow(calibrate, ranks->rank[r], nnz / 2); /* nnz: the target; the matrix holds 0.6-1x it */
	if (!needed)
		return 0;
	/* SGD's on a ratings-like matrix: on uniform rows and columns the GPU's passes ran 17-19% faster than on
	 * the Netflix shape, and the planner then predicted a split no faster than the GPU alone, which the
	 * job ran 1.12x faster (bench/PLACEMENT.md) */
	starfa_csr *csr = NULL;
	if (calibrate == calibrate_sgd) {
		if (!(csr = ratings_matrix(nrows, ncols, nnz, seed)))
			return 1; /* its error printed */
	} else if (!(csr = random_matrix(nrows, used_rows, ncols, nnz, seed))) {
		return cli_library_error();
	}
	int rc = 0;
	current_group = calibrate;
	for (int r = 0; r < ranks->n && rc == 0; r++)
		if (!is_slow(calibrate, ranks->rank[r], csr->nnz))
			rc = calibrate(c, csr, ranks->rank[r]);
	starfa_csr_free(csr);
	return rc;
}

/* Every group at every size on the kind being calibrated. */
static int calibrate_sizes(const struct calibrate_cli *c)
{
	int rc = 0;
	const int sgd_grows = calibrating == STARFA_WORKER_CUDA && (c->groups & GROUP_SGD);
	const int64_t largest = sgd_grows ? SGD_GPU_GROWTH * c->max_nnz : c->max_nnz;
	for (int64_t nnz = c->min_nnz; nnz <= largest && rc == 0; nnz *= 4) {
		size_nnz = nnz;
		const int usual = nnz <= c->max_nnz; /* past it, SGD's GPU passes alone (sgd_gpu_growth) */
		/* square, 16 entries per row on average */
		int64_t n = nnz / 16 > 64 ? nnz / 16 : 64;
		/* ratings-like: 128 entries per row, 16 per column */
		int64_t rows = nnz / 128 > 64 ? nnz / 128 : 64, cols = nnz / 16 > 64 ? nnz / 16 : 64;
		if (usual && (c->groups & (GROUP_SDDMM | GROUP_SPMM)))
			rc = calibrate_group(c, n, n, n, nnz, c->seed + (uint64_t)nnz, &c->ranks, calibrate_tiles);
		/* entries in the first half of the rows only (see calibrate_elementwise) */
		if (rc == 0 && usual && (c->groups & GROUP_ELEMENTWISE))
			rc = calibrate_group(c, n, n / 2, n, nnz, c->seed + 5 * (uint64_t)nnz, &c->ranks, calibrate_elementwise);
		/* SGD's: ratings with few items, 2,048 ratings an item from 2M entries on (the Netflix prize's
		 * 17,770 items hold 5,600 each), nearer what it trains on than 16 an item, whose 1M items in a
		 * 16M-entry tile cannot stay in a GPU's L2 */
		int64_t items = nnz / 2048 > 64 ? nnz / 2048 : 64;
		if (items < 8 * nnz / rows) /* small tiles: no denser than 1/8, or duplicates would merge away */
			items = 8 * nnz / rows;
		if (rc == 0 && (c->groups & GROUP_SGD))
			rc = calibrate_group(c, rows, rows, items, nnz, c->seed + 7 * (uint64_t)nnz, &c->als_ranks, calibrate_sgd);
		if (rc == 0 && usual && (c->groups & GROUP_CCD))
			rc = calibrate_group(c, rows, rows, cols, nnz, c->seed + 9 * (uint64_t)nnz, &c->als_ranks, calibrate_ccd);
		if (rc == 0 && usual && (c->groups & GROUP_ALS))
			rc = calibrate_group(c, rows, rows, cols, nnz, c->seed + 3 * (uint64_t)nnz, &c->als_ranks, calibrate_als);
	}
	return rc;
}

int cmd_calibrate(int argc, char **argv)
{
	struct calibrate_cli c = {.ranks = {{32, 128, 512}, 3},
				  .als_ranks = {{16, 64, 128}, 3},
				  .groups = GROUP_ALL,
				  .min_nnz = 64,
				  .max_nnz = 1 << 22, /* the largest automatic tile */
				  .rounds = 3,
				  .budget_ms = 50,
				  .seed = 1};
	starfa_options_default(&c.runtime);
	c.runtime.silent = 1;
	c.runtime.calibrate = 1;
	int rc = parse(argc, argv, &c);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (starfa_init(&c.runtime) != 0)
		return cli_library_error();
	printf("calibrating on %d cpu and %d cuda workers, scheduler %s\n", starfa_worker_count(STARFA_WORKER_CPU),
	       starfa_worker_count(STARFA_WORKER_CUDA), starfa_scheduler_name());
	rc = 0;
	const starfa_worker_kind kinds[] = {STARFA_WORKER_CUDA, STARFA_WORKER_CPU};
	for (int i = 0; i < 2 && rc == 0; i++) {
		if (starfa_worker_count(kinds[i]) == 0)
			continue;
		calibrating = kinds[i];
		nslow = 0;
		double t0 = cli_now_seconds();
		printf("%s workers:\n", starfa_worker_kind_name(kinds[i]));
		rc = calibrate_sizes(&c);
		printf("%s workers calibrated in %.1f s\n", starfa_worker_kind_name(kinds[i]), cli_now_seconds() - t0);
	}
	char dir[4096];
	if (rc == 0 && starfa_perfmodel_dir(dir, sizeof dir) != 0)
		rc = cli_library_error();
	rc = cli_shutdown(&c.runtime, rc); /* StarPU writes the models here */
	if (rc == 0) {
		printf("done. The models are in %s\n"
		       "Inspect them with StarPU's tools, e.g.\n",
		       dir);
		for (const char *const *s = starfa_perfmodel_symbols(); *s; s++)
			printf("  starpu_perfmodel_display -s %s     starpu_perfmodel_plot -s %s\n", *s, *s);
	}
	return rc;
}
