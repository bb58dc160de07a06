/* starfa sddmm: P = (A·Bᵀ) ∘ pattern(S) over the tiles of a real matrix, on every worker. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>

struct sddmm_cli {
	const char *input;
	starfa_format format;
	int64_t rank, repeat;
	int check, scaled, profile;
	uint64_t seed;
	starfa_tiling_options tiling;
	starfa_options runtime;
};

static void usage(FILE *out)
{
	fprintf(out, "usage: starfa sddmm --input FILE --rank K [OPTIONS]\n"
		     "Runs SDDMM (P = (A*B^T) .* pattern(S)) on random A, B through the task graph, on every\n"
		     "worker, and prints the time and GFLOP/s per worker type.\n"
		     "  --input FILE     matrix file (Matrix Market, ratings or docword)\n"
		     "  --format F       mtx, ratings or docword (default: guessed from the name)\n"
		     "  --rank K         rank of A and B (default 64)\n"
		     "  --scaled         scale each product by S's value\n"
		     "  --repeat N       timed runs after one warm-up (default 5)\n"
		     "  --check          compare every output element with a sequential reference\n"
		     "  --seed S         seed of A and B (default 1)\n"
		     "  --profile        per worker, its tasks and where its time went over the timed runs, and\n"
		     "                   the bytes moved between memory nodes\n"
		     "  --row-tiles R, --col-tiles C   tile grid (default: automatic)\n" CLI_RUNTIME_HELP);
}

static int parse(int argc, char **argv, struct sddmm_cli *c)
{
	static const struct option longopts[] = {
		CLI_RUNTIME_OPTIONS,
		{"input", required_argument, NULL, 'i'},
		{"format", required_argument, NULL, 'f'},
		{"rank", required_argument, NULL, 'k'},
		{"repeat", required_argument, NULL, 'n'},
		{"seed", required_argument, NULL, 's'},
		{"row-tiles", required_argument, NULL, 'r'},
		{"col-tiles", required_argument, NULL, 'c'},
		{"check", no_argument, NULL, 'C'},
		{"scaled", no_argument, NULL, 'S'},
		{"profile", no_argument, NULL, 'P'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	int opt;
	int64_t v;
	while ((opt = getopt_long(argc, argv, "i:f:k:n:h", longopts, NULL)) != -1) {
		int handled = cli_runtime_option(opt, optarg, &c->runtime);
		if (handled < 0)
			return EXIT_USAGE;
		if (handled)
			continue;
		switch (opt) {
		case 'i':
			c->input = optarg;
			break;
		case 'f':
			if (cli_parse_format(optarg, &c->format))
				return EXIT_USAGE;
			break;
		case 'k':
			if (cli_parse_int("rank", optarg, 1, 4096, &c->rank))
				return EXIT_USAGE;
			break;
		case 'n':
			if (cli_parse_int("repeat", optarg, 1, 100000, &c->repeat))
				return EXIT_USAGE;
			break;
		case 's':
			if (cli_parse_int("seed", optarg, 0, INT64_MAX, &v))
				return EXIT_USAGE;
			c->seed = (uint64_t)v;
			break;
		case 'r':
			if (cli_parse_int("row-tiles", optarg, 1, 1 << 20, &c->tiling.row_tiles))
				return EXIT_USAGE;
			break;
		case 'c':
			if (cli_parse_int("col-tiles", optarg, 1, 1 << 20, &c->tiling.col_tiles))
				return EXIT_USAGE;
			break;
		case 'C':
			c->check = 1;
			break;
		case 'S':
			c->scaled = 1;
			break;
		case 'P':
			c->profile = 1;
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
	if (!c->input) {
		cli_error("sddmm needs --input FILE");
		return EXIT_USAGE;
	}
	return 0;
}

/* Uniform in [-1, 1): a splitmix64 stream, so A and B are the same for a seed anywhere. */
static void fill_uniform(float *x, size_t n, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	for (size_t i = 0; i < n; i++) {
		uint64_t z = (s += 0x9e3779b97f4a7c15ull);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		x[i] = (float)((z >> 40) * (2.0 / 16777216.0) - 1.0);
	}
}

static void print_worker_stats(const starfa_worker_stats *st, int64_t runs)
{
	for (int k = 0; k < STARFA_WORKER_KINDS; k++) {
		int workers = starfa_worker_count((starfa_worker_kind)k);
		if (workers == 0 && st->tasks[k] == 0)
			continue;
		printf("  %-4s: %d workers, %lld tasks per run, %.4f s in kernels per run", starfa_worker_kind_name(k),
		       workers, (long long)(st->tasks[k] / runs), st->seconds[k] / runs);
		if (st->seconds[k] > 0)
			printf(", %.2f GFLOP/s per worker busy", st->flops[k] / st->seconds[k] * 1e-9);
		printf("\n");
	}
}

static int run(struct sddmm_cli *c, starfa_csr *csr)
{
	int rc = 1;
	starfa_tiled *S = NULL;
	starfa_dense *A = NULL, *B = NULL;
	starfa_sparse_values *P = NULL;
	float *a = malloc((size_t)(csr->nrows * c->rank) * sizeof *a);
	float *b = malloc((size_t)(csr->ncols * c->rank) * sizeof *b);
	float *p = NULL;
	if (!a || !b) {
		cli_error("out of memory for the %lld-rank factors", (long long)c->rank);
		goto out;
	}
	fill_uniform(a, (size_t)(csr->nrows * c->rank), c->seed);
	fill_uniform(b, (size_t)(csr->ncols * c->rank), c->seed + 1);

	if (starfa_tiled_create(csr, &c->tiling, &S) || starfa_dense_create(S, STARFA_ROWS, a, c->rank, &A) ||
	    starfa_dense_create(S, STARFA_COLS, b, c->rank, &B) || starfa_sparse_values_create(S, STARFA_ROWS, &P)) {
		cli_library_error();
		goto out;
	}
	starfa_tiled_describe(S, stdout);
	printf("workers: %d cpu, %d cuda; scheduler %s\n", starfa_worker_count(STARFA_WORKER_CPU),
	       starfa_worker_count(STARFA_WORKER_CUDA), starfa_scheduler_name());

	starfa_sddmm_mode mode = c->scaled ? STARFA_SDDMM_SCALED : STARFA_SDDMM_PATTERN;
	double flops = 2.0 * (double)c->rank * (double)csr->nnz;
	double best = 1e30, total = 0;
	starfa_worker_stats st;
	for (int64_t run = 0; run <= c->repeat; run++) {
		if (run == 1) /* the first run warms up: transfers, CUDA context, calibration */
			starfa_stats_reset();
		double t0 = cli_now_seconds();
		if (starfa_insert_sddmm(S, A, B, mode, P) || starfa_wait()) {
			cli_library_error();
			goto out;
		}
		double dt = cli_now_seconds() - t0;
		if (run > 0) {
			best = dt < best ? dt : best;
			total += dt;
		}
	}
	starfa_stats_get(&st);
	printf("sddmm rank %lld%s: %lld runs, best %.4f s, mean %.4f s, %.2f GFLOP/s (best run, whole graph)\n",
	       (long long)c->rank, c->scaled ? " scaled" : "", (long long)c->repeat, best, total / c->repeat,
	       flops / best * 1e-9);
	print_worker_stats(&st, c->repeat);
	if (c->profile) {
		starfa_profile prof;
		if (starfa_profile_get(&prof) != 0) {
			cli_library_error();
			goto out;
		}
		printf("profile over the %lld timed runs:\n", (long long)c->repeat);
		cli_profile_print(stdout, &prof);
		starfa_profile_clear(&prof);
	}

	if (c->check) {
		p = malloc((size_t)csr->nnz * sizeof *p);
		if (!p) {
			cli_error("out of memory for the check");
			goto out;
		}
		starfa_check_report report;
		if (starfa_sparse_values_gather(P, p) != 0) {
			cli_library_error();
			goto out;
		}
		if (starfa_check_sddmm(csr, a, b, c->rank, mode, p, &report) != 0) {
			cli_library_error();
			rc = EXIT_CHECK;
			goto out;
		}
		printf("check: passed, %lld values against the sequential reference, worst error %.3g of the "
		       "float32 bound\n",
		       (long long)report.checked, report.max_error);
	}
	rc = 0;
out:
	starfa_sparse_values_free(P);
	starfa_dense_free(A);
	starfa_dense_free(B);
	starfa_tiled_free(S);
	free(a);
	free(b);
	free(p);
	return rc;
}

int cmd_sddmm(int argc, char **argv)
{
	struct sddmm_cli c = {.format = STARFA_FORMAT_AUTO, .rank = 64, .repeat = 5, .seed = 1};
	starfa_options_default(&c.runtime);
	c.runtime.silent = 1;
	int rc = parse(argc, argv, &c);
	if (rc)
		return rc < 0 ? 0 : rc;

	starfa_csr *csr = NULL;
	double t0 = cli_now_seconds();
	if (cli_load_csr(c.input, c.format, &csr, NULL))
		return 1;
	printf("matrix: %s rows=%lld cols=%lld nnz=%lld (loaded in %.2f s)\n", c.input, (long long)csr->nrows,
	       (long long)csr->ncols, (long long)csr->nnz, cli_now_seconds() - t0);
	if (starfa_init(&c.runtime) != 0) {
		starfa_csr_free(csr);
		return cli_library_error();
	}
	rc = run(&c, csr);
	rc = cli_shutdown(&c.runtime, rc);
	starfa_csr_free(csr);
	return rc;
}
