/* starfa_bench: options, then for each matrix and rank the GPU half (starfa's kernels and
 * cuSPARSE), the CPU half (starfa's kernel and a plain OpenMP loop) and the task graph
 * through StarPU; then the table, results.csv and RESULTS.md. Exit 0 when every check
 * passed, 1 when any failed (or a measurement hit an error), 2 on a usage error. */
#include "bench/bench.h"

#include <getopt.h>
#include <limits.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const default_matrices = "email-Enron,NotreDame_www,movielens-small,sotu,uniform,netflix";
static const char *const quick_matrices = "email-Enron,movielens-small,uniform-small,netflix-small";

static void usage(FILE *out)
{
	fprintf(out,
		"usage: starfa_bench [OPTIONS]\n"
		"SDDMM and SpMM of starfa side by side with cuSPARSE (and a plain OpenMP loop on the CPU), checked\n"
		"against a reference, then timed; prints a table and writes CSV and Markdown.\n"
		"  --matrices LIST     comma-separated (default %s)\n"
		"                      known: %s\n"
		"  --ranks LIST        comma-separated K (default 32,128,512)\n"
		"  --repeat N          timed GPU kernel and graph runs, median (default 20)\n"
		"  --warmup N          untimed GPU kernel runs first (default 3)\n"
		"  --cpu-repeat N      timed CPU runs at least, median (default 5; more until 0.5 s)\n"
		"  --graph-warmup N    most untimed graph runs after 10 of each implementation StarPU calibrates (default 10)\n"
		"  --check-limit X     nnz*K above which references check a sample of rows (default 2e9)\n"
		"  --quick             a small subset (%s; K 32,128; 3 repeats)\n"
		"  --csv FILE          write every number there\n"
		"  --md FILE           add this run's section at the top of that Markdown file\n"
		"  --no-gpu, --no-graph, --no-cpu   leave a part out\n"
		"  --data-dir DIR      where data files are looked for (repeatable; default data, ../shared/data)\n"
		"  --seed S            seed of the generated matrices and the factors (default 1)\n"
		"  --dense-densities LIST  densities at which the SDDMM dense rows' path is also timed, where the\n"
		"                      virtual-warp kernel runs (default 0.1,0.2,0.4; 0: none)\n"
		"  --cpu-shares LIST   with every worker, the SDDMM graph also on a split grid: a row band a GPU and\n"
		"                      a row band a CPU worker, the cores' bands holding this share of the nonzeros\n"
		"                      (e.g. 0.02,0.05; none by default); rows graph.all.split@SHARE\n"
		"  --graph-cold        each graph run is a one-shot job on host data: it registers the factors and\n"
		"                      the output, runs, and brings the output home (rows graph.*.cold)\n",
		default_matrices, bench_matrix_names(), quick_matrices);
}

static int parse_count(const char *opt, const char *text, long min, long max, int *out)
{
	char *end;
	long v = strtol(text, &end, 10);
	if (end == text || *end || v < min || v > max) {
		fprintf(stderr, "starfa_bench: %s expects an integer in [%ld, %ld], not '%s'\n", opt, min, max, text);
		return -1;
	}
	*out = (int)v;
	return 0;
}

/* Splits a comma-separated list in place (the string is kept for the options' lifetime). */
static int split_list(char *text, const char **items, int max, const char *opt)
{
	int n = 0;
	for (char *tok = strtok(text, ","); tok; tok = strtok(NULL, ",")) {
		if (n == max) {
			fprintf(stderr, "starfa_bench: %s takes at most %d items\n", opt, max);
			return -1;
		}
		items[n++] = tok;
	}
	if (n == 0) {
		fprintf(stderr, "starfa_bench: %s needs at least one item\n", opt);
		return -1;
	}
	return n;
}

static int set_ranks(char *text, struct bench_options *o)
{
	const char *items[BENCH_MAX_RANKS];
	int n = split_list(text, items, BENCH_MAX_RANKS, "--ranks");
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		int k;
		if (parse_count("--ranks", items[i], 1, 4096, &k))
			return -1;
		o->ranks[i] = k;
	}
	o->nranks = n;
	return 0;
}

static void set_defaults(struct bench_options *o, int quick)
{
	static char matrices[256], ranks[64];
	snprintf(matrices, sizeof matrices, "%s", quick ? quick_matrices : default_matrices);
	snprintf(ranks, sizeof ranks, "%s", quick ? "32,128" : "32,128,512");
	o->nmatrices = split_list(matrices, o->matrices, 64, "--matrices");
	set_ranks(ranks, o);
	o->quick = quick;
	o->repeat = quick ? 3 : 20;
	o->warmup = quick ? 1 : 3;
	o->cpu_repeat = quick ? 2 : 5;
	o->graph_warmup = quick ? 4 : 10;
	o->check_limit = 2e9;
	o->sample_budget = 2e8;
	o->seed = 1;
	static const double densities[] = {0.1, 0.2, 0.4};
	o->ndense = 3;
	memcpy(o->dense_densities, densities, sizeof densities);
}

/* A list of fractions in [0, 1] for option `name`; the positive ones go to out (at most 8). */
static int set_fractions(char *text, const char *name, double *out, int *count)
{
	const char *items[8];
	int n = split_list(text, items, 8, name);
	if (n < 0)
		return -1;
	*count = 0;
	for (int i = 0; i < n; i++) {
		char *end;
		double d = strtod(items[i], &end);
		if (end == items[i] || *end || !(d >= 0 && d <= 1)) {
			fprintf(stderr, "starfa_bench: %s expects numbers in [0, 1], not '%s'\n", name, items[i]);
			return -1;
		}
		if (d > 0)
			out[(*count)++] = d;
	}
	return 0;
}

enum {
	OPT_CSV = 1000,
	OPT_MD,
	OPT_NO_GPU,
	OPT_NO_GRAPH,
	OPT_NO_CPU,
	OPT_DATA,
	OPT_CPU_REPEAT,
	OPT_GRAPH_WARMUP,
	OPT_CHECK_LIMIT,
	OPT_SEED,
	OPT_WARMUP,
	OPT_QUICK,
	OPT_DENSE,
	OPT_CPU_SHARES,
	OPT_GRAPH_COLD
};

static int parse(int argc, char **argv, struct bench_options *o)
{
	static const struct option longopts[] = {
		{"matrices", required_argument, NULL, 'm'},
		{"ranks", required_argument, NULL, 'k'},
		{"repeat", required_argument, NULL, 'n'},
		{"warmup", required_argument, NULL, OPT_WARMUP},
		{"cpu-repeat", required_argument, NULL, OPT_CPU_REPEAT},
		{"graph-warmup", required_argument, NULL, OPT_GRAPH_WARMUP},
		{"check-limit", required_argument, NULL, OPT_CHECK_LIMIT},
		{"quick", no_argument, NULL, OPT_QUICK},
		{"csv", required_argument, NULL, OPT_CSV},
		{"md", required_argument, NULL, OPT_MD},
		{"no-gpu", no_argument, NULL, OPT_NO_GPU},
		{"no-graph", no_argument, NULL, OPT_NO_GRAPH},
		{"no-cpu", no_argument, NULL, OPT_NO_CPU},
		{"data-dir", required_argument, NULL, OPT_DATA},
		{"seed", required_argument, NULL, OPT_SEED},
		{"dense-densities", required_argument, NULL, OPT_DENSE},
		{"cpu-shares", required_argument, NULL, OPT_CPU_SHARES},
		{"graph-cold", no_argument, NULL, OPT_GRAPH_COLD},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	/* --quick changes the defaults; every other option given still wins, wherever it is. */
	int quick = 0;
	for (int i = 1; i < argc; i++)
		quick |= !strcmp(argv[i], "--quick");
	set_defaults(o, quick);
	int opt, v;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			if ((o->nmatrices = split_list(optarg, o->matrices, 64, "--matrices")) < 0)
				return 2;
			break;
		case 'k':
			if (set_ranks(optarg, o))
				return 2;
			break;
		case 'n':
			if (parse_count("--repeat", optarg, 1, 1000, &o->repeat))
				return 2;
			break;
		case OPT_WARMUP:
			if (parse_count("--warmup", optarg, 0, 1000, &o->warmup))
				return 2;
			break;
		case OPT_CPU_REPEAT:
			if (parse_count("--cpu-repeat", optarg, 1, 1000, &o->cpu_repeat))
				return 2;
			break;
		case OPT_GRAPH_WARMUP:
			if (parse_count("--graph-warmup", optarg, 1, 1000, &o->graph_warmup))
				return 2;
			break;
		case OPT_CHECK_LIMIT: {
			char *end;
			o->check_limit = strtod(optarg, &end);
			if (end == optarg || *end || !(o->check_limit > 0)) {
				fprintf(stderr, "starfa_bench: --check-limit expects a positive number, not '%s'\n",
					optarg);
				return 2;
			}
			if (o->sample_budget > o->check_limit)
				o->sample_budget = o->check_limit;
			break;
		}
		case OPT_SEED:
			if (parse_count("--seed", optarg, 0, INT_MAX, &v))
				return 2;
			o->seed = (uint64_t)v;
			break;
		case OPT_QUICK:
			break;
		case OPT_CPU_SHARES:
			if (set_fractions(optarg, "--cpu-shares", o->cpu_shares, &o->nshares))
				return 2;
			break;
		case OPT_DENSE:
			if (set_fractions(optarg, "--dense-densities", o->dense_densities, &o->ndense))
				return 2;
			break;
		case OPT_CSV:
			o->csv_path = optarg;
			break;
		case OPT_MD:
			o->md_path = optarg;
			break;
		case OPT_NO_GPU:
			o->no_gpu = 1;
			break;
		case OPT_NO_GRAPH:
			o->no_graph = 1;
			break;
		case OPT_GRAPH_COLD:
			o->graph_cold = 1;
			break;
		case OPT_NO_CPU:
			o->no_cpu = 1;
			break;
		case OPT_DATA:
			if (o->ndata_dirs == BENCH_MAX_DIRS) {
				fprintf(stderr, "starfa_bench: at most %d --data-dir\n", BENCH_MAX_DIRS);
				return 2;
			}
			o->data_dirs[o->ndata_dirs++] = optarg;
			break;
		case 'h':
			usage(stdout);
			return -1;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "starfa_bench: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (o->ndata_dirs == 0) {
		o->data_dirs[o->ndata_dirs++] = "data";
		o->data_dirs[o->ndata_dirs++] = "../shared/data";
	}
	return 0;
}

/* The command to record: what bench/run.sh was given, or this program's own arguments. */
static const char *command_line(int argc, char **argv)
{
	const char *from_wrapper = getenv("BENCH_COMMAND");
	if (from_wrapper && *from_wrapper)
		return from_wrapper;
	static char line[2048];
	size_t used = (size_t)snprintf(line, sizeof line, "starfa_bench"); /* not argv[0]: no local paths */
	for (int i = 1; i < argc && used < sizeof line; i++)
		used += (size_t)snprintf(line + used, sizeof line - used, " %s", argv[i]);
	return line;
}

static void host_info(struct bench_device *d)
{
	time_t now = time(NULL);
	struct tm utc;
	gmtime_r(&now, &utc);
	strftime(d->date, sizeof d->date, "%Y-%m-%d %H:%M UTC", &utc);
	d->cpu_cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
	d->omp_threads = omp_get_max_threads();
	/* starfa_print_info's "StarPU x.y.z" line works before starfa_init. */
	snprintf(d->starpu_version, sizeof d->starpu_version, "?");
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (f) {
		starfa_print_info(f);
		fclose(f);
		const char *line = text ? strstr(text, "\nStarPU ") : NULL;
		if (line)
			sscanf(line + 8, "%31s", d->starpu_version);
		free(text);
	}
}

static void print_matrix(const struct bench_matrix *m)
{
	printf("\n== %s: %lld x %lld, %lld nonzeros (%s; %.1f s to %s)\n", m->name, (long long)m->nrows,
	       (long long)m->ncols, (long long)m->nnz, m->source, m->load_seconds, m->synthetic ? "generate" : "load");
	printf("   row nonzeros max %lld mean %.1f; column nonzeros max %lld mean %.1f; fingerprint %016llx\n",
	       (long long)m->max_row_nnz, m->nrows ? (double)m->nnz / (double)m->nrows : 0.0, (long long)m->max_col_nnz,
	       m->ncols ? (double)m->nnz / (double)m->ncols : 0.0, (unsigned long long)m->fingerprint);
	fflush(stdout);
}

static void bench_one(struct bench_device *d, const struct bench_options *o, struct bench_matrix *m)
{
	print_matrix(m);
	for (int i = 0; i < o->nranks; i++) {
		printf("  k=%lld: GPU kernels%s\n", (long long)o->ranks[i], d->gpu ? "" : " skipped (no GPU)");
		fflush(stdout);
		gpu_bench(d, o, m, o->ranks[i]);
		if (!o->no_cpu)
			cpu_bench(d, o, m, o->ranks[i]);
	}
	if (!o->no_graph) {
		gpu_release(); /* StarPU's shutdown resets the device: the GPU half makes its objects again */
		graph_bench(d, o, m);
	}
}

int main(int argc, char **argv)
{
	struct bench_options o = {0};
	/* before parse: its list options (--matrices, --ranks) are cut at their commas in place */
	const char *command = command_line(argc, argv);
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? 0 : rc;
	o.command = command;

	struct bench_device d = {0};
	host_info(&d);
	gpu_probe(&d, &o);
	if (!d.gpu)
		printf("note: %s: the GPU half and the CUDA-only task graph are skipped\n", d.gpu_note);

	struct bench_matrix *done = calloc((size_t)o.nmatrices, sizeof *done);
	char skipped[1024] = "";
	int ndone = 0, load_errors = 0;
	for (int i = 0; done && i < o.nmatrices; i++) {
		struct bench_matrix m;
		int lrc = bench_matrix_load(o.matrices[i], &o, &m);
		if (lrc != 0) {
			size_t used = strlen(skipped);
			snprintf(skipped + used, sizeof skipped - used, "%s%s (%s)", used ? ", " : "", o.matrices[i],
				 lrc > 0 ? "file not found" : "could not be loaded");
			load_errors += lrc < 0;
			continue;
		}
		bench_one(&d, &o, &m);
		/* Only the description stays for the report: the arrays go before the next matrix. */
		bench_matrix_free(&m);
		done[ndone++] = m;
	}

	report_print(stdout, &d);
	if (o.csv_path && report_write_csv(o.csv_path, &d) == 0)
		printf("wrote %s\n", o.csv_path);
	if (o.md_path && report_write_md(o.md_path, &d, &o, done, ndone, skipped) == 0)
		printf("wrote %s\n", o.md_path);
	gpu_release();
	int failures = bench_failures() + load_errors;
	bench_results_free();
	free(done);
	return failures ? 1 : 0;
}
