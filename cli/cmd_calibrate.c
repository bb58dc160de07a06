/* starfa calibrate: run every codelet over a range of tile sizes and ranks on every
 * worker type until StarPU's performance models are calibrated. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 16

struct calibrate_cli {
	int64_t ranks[MAX_RANKS];
	int nranks;
	int64_t min_nnz, max_nnz, rounds;
	uint64_t seed;
	starfa_options runtime;
};

static void usage(FILE *out)
{
	fprintf(out, "usage: starfa calibrate [OPTIONS]\n"
		     "Runs every operation (SDDMM plain and scaled, SpMM both sides) on random tiles of\n"
		     "growing size for each rank, on every worker type, with StarPU's calibration on, so\n"
		     "that later runs schedule from calibrated performance models.\n"
		     "  --ranks LIST     comma-separated ranks (default 32,128,512)\n"
		     "  --min-nnz N      smallest tile (default 64)\n"
		     "  --max-nnz N      largest tile (default 4194304); sizes grow 4x per step: StarPU's\n"
		     "                   regression predicts tiles from 10%% below the smallest to 10%%\n"
		     "                   above the largest, and forces calibration runs outside that\n"
		     "  --rounds N       tasks per size and operation (default: 12 per worker type)\n" CLI_RUNTIME_HELP);
}

static int parse_ranks(const char *text, struct calibrate_cli *c)
{
	char *copy = strdup(text), *save = NULL;
	if (!copy)
		return -1;
	c->nranks = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (c->nranks == MAX_RANKS) {
			cli_error("--ranks takes at most %d ranks", MAX_RANKS);
			free(copy);
			return -1;
		}
		if (cli_parse_int("ranks", tok, 1, 4096, &c->ranks[c->nranks++])) {
			free(copy);
			return -1;
		}
	}
	free(copy);
	if (c->nranks == 0) {
		cli_error("--ranks needs at least one rank");
		return -1;
	}
	return 0;
}

static int parse(int argc, char **argv, struct calibrate_cli *c)
{
	static const struct option longopts[] = {
		CLI_RUNTIME_OPTIONS,
		{"ranks", required_argument, NULL, 'k'},
		{"min-nnz", required_argument, NULL, 'm'},
		{"max-nnz", required_argument, NULL, 'M'},
		{"rounds", required_argument, NULL, 'n'},
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
		case 'k':
			if (parse_ranks(optarg, c))
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
		case 'h':
			usage(stdout);
			return -1;
		default:
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		cli_error("calibrate takes no arguments ('%s')", argv[optind]);
		return EXIT_USAGE;
	}
	if (c->min_nnz > c->max_nnz) {
		cli_error("--min-nnz %lld is above --max-nnz %lld", (long long)c->min_nnz, (long long)c->max_nnz);
		return EXIT_USAGE;
	}
	return 0;
}

/* A square-ish random matrix with about nnz entries, 16 per row on average. */
static starfa_csr *random_matrix(int64_t nnz, uint64_t seed)
{
	int64_t n = nnz / 16 > 64 ? nnz / 16 : 64;
	starfa_coo *coo = starfa_coo_new(n, n, nnz);
	if (!coo)
		return NULL;
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	for (int64_t e = 0; e < nnz; e++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		coo->row[e] = (int32_t)(s % (uint64_t)n);
		coo->col[e] = (int32_t)((s >> 32) % (uint64_t)n);
		coo->val[e] = 1.0f + (float)(s >> 40) / 16777216.0f;
	}
	coo->nnz = nnz;
	starfa_csr *csr = NULL;
	int rc = starfa_csr_from_coo(coo, &csr);
	starfa_coo_free(coo);
	return rc ? NULL : csr;
}

enum { OP_SDDMM, OP_SDDMM_SCALED, OP_SPMM_ROWS, OP_SPMM_COLS, NOPS };
static const char *const op_names[NOPS] = {"sddmm", "sddmm (scaled)", "spmm S*X", "spmm S^T*X"};

/* Calibrates every operation on one matrix at one rank. */
static int calibrate_one(const struct calibrate_cli *c, const starfa_csr *csr, int64_t k)
{
	int rc = 1;
	starfa_tiled *S = NULL;
	starfa_dense *rows = NULL, *cols = NULL, *rows_out = NULL, *cols_out = NULL;
	starfa_sparse_values *P = NULL;
	size_t nr = (size_t)(csr->nrows * k), nc = (size_t)(csr->ncols * k);
	float *a = malloc(nr * sizeof *a), *b = malloc(nc * sizeof *b);
	float *ya = malloc(nr * sizeof *ya), *yb = malloc(nc * sizeof *yb);
	if (!a || !b || !ya || !yb) {
		cli_error("out of memory for rank %lld factors", (long long)k);
		goto out;
	}
	for (size_t i = 0; i < nr; i++)
		a[i] = (float)(i % 7) * 0.25f - 0.75f;
	for (size_t i = 0; i < nc; i++)
		b[i] = (float)(i % 5) * 0.25f - 0.5f;
	starfa_tiling_options one_tile = {1, 1, 1};
	if (starfa_tiled_create(csr, &one_tile, &S) || starfa_dense_create(S, STARFA_ROWS, a, k, &rows) ||
	    starfa_dense_create(S, STARFA_COLS, b, k, &cols) || starfa_dense_create(S, STARFA_ROWS, ya, k, &rows_out) ||
	    starfa_dense_create(S, STARFA_COLS, yb, k, &cols_out) || starfa_sparse_values_create(S, &P)) {
		cli_library_error();
		goto out;
	}
	for (int op = 0; op < NOPS; op++) {
		starfa_stats_reset();
		for (int64_t round = 0; round < c->rounds; round++) {
			int err = 0;
			switch (op) {
			case OP_SDDMM:
				err = starfa_insert_sddmm(S, rows, cols, STARFA_SDDMM_PATTERN, P);
				break;
			case OP_SDDMM_SCALED:
				err = starfa_insert_sddmm(S, rows, cols, STARFA_SDDMM_SCALED, P);
				break;
			case OP_SPMM_ROWS:
				err = starfa_insert_spmm(S, STARFA_ROWS, cols, rows_out);
				break;
			case OP_SPMM_COLS:
				err = starfa_insert_spmm(S, STARFA_COLS, rows, cols_out);
				break;
			}
			/* One task at a time: dmda sends a task to a worker type whose model lacks this
			 * size only while it knows so, and it learns that when the task completes.
			 * Submitted together, every round would go to the first uncalibrated type. */
			if (err || starfa_wait()) {
				cli_library_error();
				goto out;
			}
		}
		starfa_worker_stats st;
		starfa_stats_get(&st);
		printf("  %-15s k=%-4lld nnz=%-9lld tasks: %lld cpu, %lld cuda\n", op_names[op], (long long)k,
		       (long long)csr->nnz, (long long)st.tasks[STARFA_WORKER_CPU], (long long)st.tasks[STARFA_WORKER_CUDA]);
	}
	rc = 0;
out:
	starfa_sparse_values_free(P);
	starfa_dense_free(rows);
	starfa_dense_free(cols);
	starfa_dense_free(rows_out);
	starfa_dense_free(cols_out);
	starfa_tiled_free(S);
	free(a);
	free(b);
	free(ya);
	free(yb);
	return rc;
}

int cmd_calibrate(int argc, char **argv)
{
	struct calibrate_cli c = {.ranks = {32, 128, 512}, .nranks = 3, .min_nnz = 64, .max_nnz = 1 << 22, .seed = 1}; /* the largest automatic tile */
	starfa_options_default(&c.runtime);
	c.runtime.silent = 1;
	c.runtime.calibrate = 1;
	int rc = parse(argc, argv, &c);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (starfa_init(&c.runtime) != 0)
		return cli_library_error();
	int kinds = (starfa_worker_count(STARFA_WORKER_CPU) > 0) + (starfa_worker_count(STARFA_WORKER_CUDA) > 0);
	if (c.rounds == 0)
		c.rounds = 12 * (kinds > 0 ? kinds : 1); /* StarPU trusts a history entry after 10 samples */
	printf("calibrating on %d cpu and %d cuda workers, scheduler %s\n", starfa_worker_count(STARFA_WORKER_CPU),
	       starfa_worker_count(STARFA_WORKER_CUDA), starfa_scheduler_name());
	rc = 0;
	for (int64_t nnz = c.min_nnz; nnz <= c.max_nnz && rc == 0; nnz *= 4) {
		starfa_csr *csr = random_matrix(nnz, c.seed + (uint64_t)nnz);
		if (!csr) {
			rc = cli_library_error();
			break;
		}
		for (int r = 0; r < c.nranks && rc == 0; r++)
			rc = calibrate_one(&c, csr, c.ranks[r]);
		starfa_csr_free(csr);
	}
	starfa_shutdown(); /* StarPU writes the models here */
	if (rc == 0) {
		printf("done. The models are in StarPU's sampling folder (STARPU_HOME, by default ~/.starpu).\n"
		       "Inspect them with StarPU's tools, e.g.\n");
		for (const char *const *s = starfa_perfmodel_symbols(); *s; s++)
			printf("  starpu_perfmodel_display -s %s     starpu_perfmodel_plot -s %s\n", *s, *s);
	}
	return rc;
}
