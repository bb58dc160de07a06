/* starfa train: explicit or implicit ALS on a ratings file, a model file out, progress per iteration. */
#include "cli/cli.h"

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct train_cli {
	const char *input, *test, *out, *log;
	starfa_format format;
	double test_fraction;
	uint64_t seed;
	starfa_als_options als;
	starfa_options runtime;
	/* which options were given, so that the algorithm's defaults fill the others */
	int rank_set, lambda_set, iters_set, solver_set, steps_set, alpha_set, weighted_set;
	int profile;
};

static void usage(FILE *out)
{
	starfa_als_options als, ials;
	starfa_als_options_default(&als, STARFA_ALGO_ALS);
	starfa_als_options_default(&ials, STARFA_ALGO_IALS);
	fprintf(out,
		"usage: starfa train --input FILE --out MODEL [OPTIONS]\n"
		"Trains ALS (ratings) or implicit ALS (interactions) through the task graph on every worker, printing\n"
		"one line per iteration, and saves the model.\n"
		"  --algo als|ials      explicit ratings, or implicit feedback (Hu, Koren & Volinsky) (default als)\n"
		"  --input FILE         training entries (ratings file: user item value [timestamp], or Matrix Market)\n"
		"  --format F           mtx, ratings or docword (default: guessed from the name)\n"
		"  --test FILE          entries to score after every iteration (matched by user and item id)\n"
		"  --test-fraction F    hold out this fraction of the input as the test set instead (e.g. 0.2)\n"
		"  --seed S             seed of the hold-out split and of the initial factors (default 1)\n"
		"  --rank F             latent factors (default %lld for als, %lld for ials)\n"
		"  --lambda L           regularization (default %g for als, %g for ials)\n"
		"  --weighted-lambda 0|1  lambda times the row's entries (ALS-WR) (default %d for als, %d for ials)\n"
		"  --iters N            iterations, each a user sweep and an item sweep (default %lld)\n"
		"  --solver chol|cg     exact Cholesky or conjugate gradient (default chol for als, cg for ials)\n"
		"  --cg-steps S         CG steps per solve (default %d)\n"
		"  --fp16               store the per-row systems in FP16 (implies --stored-systems)\n"
		"  --stored-systems     build every band's systems in memory, then solve them (default: build and\n"
		"                       solve row by row, writing no systems)\n"
		"  --alpha A            implicit confidence 1 + A * value (default %g)\n"
		"  --no-biases          explicit: no user and item biases (the global mean is still modelled)\n"
		"  --k K                ials: the k of precision@k, MAP@k and NDCG@k on the test set (default 10)\n"
		"  --out MODEL          the model file to write\n"
		"  --log FILE.csv       the progress lines as CSV\n"
		"  --profile            after training, per worker its tasks and where its time went (running tasks,\n"
		"                       sleeping with nothing to run, the rest: scheduling and waiting for data),\n"
		"                       and the bytes moved between memory nodes, over the iterations\n"
		"  --row-tiles R, --col-tiles C   tile grid (default: one row and one column band per worker)\n"
		"  --slots N            bands of systems held at once per side (default: two per worker)\n" CLI_RUNTIME_HELP,
		(long long)als.rank, (long long)ials.rank, als.lambda, ials.lambda, als.weighted_lambda,
		ials.weighted_lambda, (long long)als.iters, als.cg_steps, ials.alpha);
}

static int parse(int argc, char **argv, struct train_cli *c)
{
	static const struct option longopts[] = {
		CLI_RUNTIME_OPTIONS,
		{"algo", required_argument, NULL, 'a'},
		{"input", required_argument, NULL, 'i'},
		{"format", required_argument, NULL, 'f'},
		{"test", required_argument, NULL, 't'},
		{"test-fraction", required_argument, NULL, 'F'},
		{"seed", required_argument, NULL, 's'},
		{"rank", required_argument, NULL, 'k'},
		{"lambda", required_argument, NULL, 'l'},
		{"weighted-lambda", required_argument, NULL, 'W'},
		{"iters", required_argument, NULL, 'n'},
		{"solver", required_argument, NULL, 'S'},
		{"cg-steps", required_argument, NULL, 'g'},
		{"fp16", no_argument, NULL, 'H'},
		{"stored-systems", no_argument, NULL, 'Y'},
		{"alpha", required_argument, NULL, 'A'},
		{"no-biases", no_argument, NULL, 'B'},
		{"k", required_argument, NULL, 'K'},
		{"out", required_argument, NULL, 'o'},
		{"log", required_argument, NULL, 'L'},
		{"profile", no_argument, NULL, 'R'},
		{"row-tiles", required_argument, NULL, 'r'},
		{"col-tiles", required_argument, NULL, 'c'},
		{"slots", required_argument, NULL, 'P'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	starfa_als_options *o = &c->als;
	int algo_ials = 0, no_biases = 0, fp16 = 0;
	int64_t v;
	double d;
	int opt;
	/* The algorithm decides the defaults: take it first, then the options over its defaults. */
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--algo=ials") == 0 || (strcmp(argv[i], "--algo") == 0 && i + 1 < argc &&
							    strcmp(argv[i + 1], "ials") == 0))
			algo_ials = 1;
	starfa_als_options_default(o, algo_ials ? STARFA_ALGO_IALS : STARFA_ALGO_ALS);
	while ((opt = getopt_long(argc, argv, "i:o:h", longopts, NULL)) != -1) {
		int handled = cli_runtime_option(opt, optarg, &c->runtime);
		if (handled < 0)
			return EXIT_USAGE;
		if (handled)
			continue;
		switch (opt) {
		case 'a':
			if (strcmp(optarg, "als") != 0 && strcmp(optarg, "ials") != 0) {
				cli_error("--algo must be als or ials, not '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'i':
			c->input = optarg;
			break;
		case 'f':
			if (cli_parse_format(optarg, &c->format))
				return EXIT_USAGE;
			break;
		case 't':
			c->test = optarg;
			break;
		case 'F':
			if (cli_parse_double("test-fraction", optarg, 0.0, 0.99, &c->test_fraction))
				return EXIT_USAGE;
			break;
		case 's':
			if (cli_parse_int("seed", optarg, 0, INT64_MAX, &v))
				return EXIT_USAGE;
			c->seed = (uint64_t)v;
			break;
		case 'k':
			if (cli_parse_int("rank", optarg, 1, 1024, &o->rank))
				return EXIT_USAGE;
			break;
		case 'l':
			if (cli_parse_double("lambda", optarg, 1e-12, 1e12, &o->lambda))
				return EXIT_USAGE;
			break;
		case 'W':
			if (cli_parse_int("weighted-lambda", optarg, 0, 1, &v))
				return EXIT_USAGE;
			o->weighted_lambda = (int)v;
			break;
		case 'n':
			if (cli_parse_int("iters", optarg, 1, 100000, &o->iters))
				return EXIT_USAGE;
			break;
		case 'S':
			if (strcmp(optarg, "chol") == 0 || strcmp(optarg, "cholesky") == 0) {
				o->solver = STARFA_SOLVER_CHOLESKY;
			} else if (strcmp(optarg, "cg") == 0) {
				o->solver = STARFA_SOLVER_CG;
			} else {
				cli_error("--solver must be chol or cg, not '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'g':
			if (cli_parse_int("cg-steps", optarg, 1, 1000, &v))
				return EXIT_USAGE;
			o->cg_steps = (int)v;
			break;
		case 'H':
			fp16 = 1;
			break;
		case 'Y':
			o->stored_systems = 1;
			break;
		case 'A':
			if (cli_parse_double("alpha", optarg, 1e-12, 1e12, &d))
				return EXIT_USAGE;
			o->alpha = d;
			break;
		case 'B':
			no_biases = 1;
			break;
		case 'K':
			if (cli_parse_int("k", optarg, 1, 100000, &o->eval_k))
				return EXIT_USAGE;
			break;
		case 'o':
			c->out = optarg;
			break;
		case 'L':
			c->log = optarg;
			break;
		case 'R':
			c->profile = 1;
			break;
		case 'r':
			if (cli_parse_int("row-tiles", optarg, 1, 1 << 20, &o->tiling.row_tiles))
				return EXIT_USAGE;
			break;
		case 'c':
			if (cli_parse_int("col-tiles", optarg, 1, 1 << 20, &o->tiling.col_tiles))
				return EXIT_USAGE;
			break;
		case 'P':
			if (cli_parse_int("slots", optarg, 1, 1 << 20, &o->slots))
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
	if (!c->input || !c->out) {
		cli_error("train needs --input FILE and --out MODEL");
		return EXIT_USAGE;
	}
	if (c->test && c->test_fraction > 0) {
		cli_error("give --test FILE or --test-fraction F, not both");
		return EXIT_USAGE;
	}
	if (no_biases && algo_ials)
		fprintf(stderr, "starfa: note: --no-biases has no effect on implicit ALS, which has no biases\n");
	o->biases = !no_biases && !algo_ials;
	o->fp16 = fp16;
	o->seed = c->seed;
	return 0;
}

/* Refuses before training when the model (or log) could not be written where asked. */
static int check_writable(const char *path, const char *what)
{
	char *copy = strdup(path);
	if (!copy) {
		cli_error("out of memory");
		return 1;
	}
	const char *dir = dirname(copy);
	int ok = access(dir, W_OK | X_OK) == 0;
	if (!ok)
		cli_error("cannot write the %s %s: folder %s: %s", what, path, dir, strerror(errno));
	free(copy);
	return ok ? 0 : 1;
}

struct run_state {
	FILE *log;
	int implicit;
	int64_t k;
	int failed_log;
	int profile, failed_profile;
	starfa_profile sum; /* --profile: over the iterations */
};

static void print_cell(FILE *f, double v)
{
	if (isnan(v))
		fputs(",", f);
	else
		fprintf(f, ",%.6g", v);
}

static int on_iteration(const starfa_als_progress *p, void *user_data)
{
	struct run_state *st = user_data;
	if (p->iteration == 1)
		printf("tiles=%lldx%lld systems=%.1f MiB\n", (long long)p->row_tiles, (long long)p->col_tiles,
		       p->systems_bytes / (1024.0 * 1024.0));
	printf("iter %3lld  %7.3f s", (long long)p->iteration, p->seconds);
	if (st->implicit)
		printf("  loss %.6f", p->train_loss);
	else
		printf("  train_rmse %.4f  loss %.4f", p->train_rmse, p->train_loss);
	if (p->has_test) {
		if (st->implicit)
			printf("  p@%lld %.4f  map@%lld %.4f  ndcg@%lld %.4f", (long long)st->k, p->test.precision,
			       (long long)st->k, p->test.map, (long long)st->k, p->test.ndcg);
		else
			printf("  test_rmse %.4f", p->test.rmse);
	}
	printf("  tasks");
	for (int k = 0; k < STARFA_WORKER_KINDS; k++)
		if (starfa_worker_count((starfa_worker_kind)k) > 0 || p->stats.tasks[k] > 0)
			printf(" %s %lld", starfa_worker_kind_name((starfa_worker_kind)k), (long long)p->stats.tasks[k]);
	printf("\n");
	fflush(stdout);
	if (st->profile && !st->failed_profile)
		st->failed_profile = starfa_profile_add(&st->sum, p->profile) != 0;
	if (st->log) {
		FILE *f = st->log;
		fprintf(f, "%lld,%.6f", (long long)p->iteration, p->seconds);
		print_cell(f, p->train_loss);
		print_cell(f, p->train_rmse);
		print_cell(f, p->has_test ? p->test.rmse : NAN);
		print_cell(f, p->has_test ? p->test.precision : NAN);
		print_cell(f, p->has_test ? p->test.map : NAN);
		print_cell(f, p->has_test ? p->test.ndcg : NAN);
		fprintf(f, ",%lld,%lld,%.6f,%.6f\n", (long long)p->stats.tasks[STARFA_WORKER_CPU],
			(long long)p->stats.tasks[STARFA_WORKER_CUDA], p->stats.seconds[STARFA_WORKER_CPU],
			p->stats.seconds[STARFA_WORKER_CUDA]);
		if (ferror(f))
			st->failed_log = 1;
	}
	return 0;
}

/* The log goes to a temporary file renamed into place at the end, like the model. */
static FILE *open_log(const char *path, char **tmp_out)
{
	size_t len = strlen(path) + 16;
	char *tmp = malloc(len);
	if (!tmp)
		return NULL;
	snprintf(tmp, len, "%s.tmp.XXXXXX", path);
	int fd = mkstemp(tmp);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		cli_error("cannot create a temporary file beside %s: %s", path, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
		free(tmp);
		return NULL;
	}
	fprintf(f, "iteration,seconds,train_loss,train_rmse,test_rmse,precision_at_k,map_at_k,ndcg_at_k,"
		   "cpu_tasks,cuda_tasks,cpu_task_seconds,cuda_task_seconds\n");
	*tmp_out = tmp;
	return f;
}

static int finish_log(FILE *f, char *tmp, const char *path, int keep)
{
	int rc = 0;
	int failed = ferror(f) || fflush(f) != 0 || fsync(fileno(f)) != 0;
	if (fclose(f) != 0)
		failed = 1;
	if (keep && failed) {
		cli_error("cannot write the log %s", path);
		rc = 1;
	}
	if (keep && !failed) {
		mode_t mask = umask(0);
		umask(mask);
		if (chmod(tmp, 0666 & ~mask) != 0 || rename(tmp, path) != 0) {
			cli_error("cannot write the log %s: %s", path, strerror(errno));
			rc = 1;
		}
	}
	if (!keep || rc)
		unlink(tmp);
	free(tmp);
	return rc;
}

static int run(struct train_cli *c, starfa_coo *train, starfa_coo *test)
{
	struct run_state st = {.implicit = c->als.algo == STARFA_ALGO_IALS, .k = c->als.eval_k, .profile = c->profile};
	char *log_tmp = NULL;
	if (c->log && !(st.log = open_log(c->log, &log_tmp)))
		return 1;
	const starfa_als_options *o = &c->als;
	printf("%s: rank %lld, lambda %g%s, %lld iterations, %s%s%s", o->algo == STARFA_ALGO_IALS ? "implicit ALS" : "ALS",
	       (long long)o->rank, o->lambda, o->weighted_lambda ? " (weighted)" : "", (long long)o->iters,
	       o->solver == STARFA_SOLVER_CG ? "cg" : "cholesky",
	       o->fp16 ? ", fp16 systems" : o->stored_systems ? ", stored systems" : "",
	       o->biases ? ", biases" : "");
	if (o->solver == STARFA_SOLVER_CG)
		printf(", %d CG steps", o->cg_steps);
	if (o->algo == STARFA_ALGO_IALS)
		printf(", alpha %g", o->alpha);
	printf("\nworkers: %d cpu, %d cuda; scheduler %s\n", starfa_worker_count(STARFA_WORKER_CPU),
	       starfa_worker_count(STARFA_WORKER_CUDA), starfa_scheduler_name());
	fflush(stdout);
	starfa_model *model = NULL;
	double t0 = cli_now_seconds();
	int rc = starfa_als_train(train, test, o, on_iteration, &st, &model);
	double total = cli_now_seconds() - t0;
	if (rc == 0 && st.failed_log) {
		cli_error("cannot write the log %s", c->log);
		rc = 1;
	} else if (rc != 0) {
		rc = cli_library_error();
	}
	if (rc == 0 && starfa_model_save(model, c->out) != 0)
		rc = cli_library_error();
	if (st.log && finish_log(st.log, log_tmp, c->log, rc == 0) != 0 && rc == 0) {
		unlink(c->out); /* the run failed: no model without its log either */
		rc = 1;
	}
	if (rc == 0)
		printf("model: %lld users, %lld items, rank %lld, trained in %.2f s, saved to %s\n", (long long)model->nusers,
		       (long long)model->nitems, (long long)model->rank, total, c->out);
	if (rc == 0 && st.profile) {
		if (st.failed_profile) {
			cli_error("--profile: out of memory");
		} else {
			printf("profile over %lld iterations:\n", (long long)o->iters);
			cli_profile_print(stdout, &st.sum);
		}
	}
	starfa_profile_clear(&st.sum);
	starfa_model_free(model);
	return rc;
}

int cmd_train(int argc, char **argv)
{
	struct train_cli c = {.format = STARFA_FORMAT_AUTO, .seed = 1};
	starfa_options_default(&c.runtime);
	c.runtime.silent = 1;
	int rc = parse(argc, argv, &c);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (check_writable(c.out, "model") || (c.log && check_writable(c.log, "log")))
		return 1;

	starfa_coo *all = NULL, *train = NULL, *test = NULL;
	if (starfa_read(c.input, c.format, &all) != 0)
		return cli_library_error();
	/* A rating given twice was given again: the later one stands. (Implicit feedback adds up
	 * instead: two plays are more evidence than one.) */
	int64_t repeated = 0;
	if (c.als.algo == STARFA_ALGO_ALS && starfa_coo_dedupe(all, &repeated) != 0) {
		starfa_coo_free(all);
		return cli_library_error();
	}
	if (repeated)
		printf("note: %lld repeated (user, item) ratings in %s: kept the last of each\n", (long long)repeated,
		       c.input);
	if (c.test_fraction > 0) {
		rc = starfa_coo_split(all, c.test_fraction, c.seed, &train, &test);
		starfa_coo_free(all);
		if (rc)
			return cli_library_error();
	} else {
		train = all;
		if (c.test && starfa_read(c.test, STARFA_FORMAT_AUTO, &test) != 0) {
			starfa_coo_free(train);
			return cli_library_error();
		}
	}
	printf("training: %s users=%lld items=%lld entries=%lld", c.input, (long long)train->nrows,
	       (long long)train->ncols, (long long)train->nnz);
	if (test)
		printf("; test: %s entries=%lld", c.test ? c.test : "held out", (long long)test->nnz);
	printf("\n");
	if (starfa_init(&c.runtime) != 0) {
		rc = cli_library_error();
	} else {
		rc = run(&c, train, test);
		starfa_shutdown();
	}
	starfa_coo_free(train);
	starfa_coo_free(test);
	return rc;
}
