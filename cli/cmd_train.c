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
	const char *input, *test, *out, *log, *vocab;
	starfa_format format;
	double test_fraction;
	uint64_t seed;
	const starfa_algorithm *algo;
	void *params; /* the algorithm's parameters: its defaults, then the options given */
	starfa_options runtime;
	int profile;
	const char *task_log; /* --task-log FILE.csv */
};

/* "als, ials or sgd": the algorithms' names, for messages. */
static void algorithm_names(char *buf, size_t size)
{
	const starfa_algorithm *const *all = starfa_algorithms();
	size_t n = 0, len = 0;
	while (all[n])
		n++;
	buf[0] = '\0';
	for (size_t i = 0; i < n && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ", all[i]->name);
}

static void usage(FILE *out, const starfa_algorithm *only)
{
	char names[256];
	algorithm_names(names, sizeof names);
	fprintf(out,
		"usage: starfa train --input FILE --out MODEL [--algo NAME] [OPTIONS]\n"
		"Trains a model through the task graph on every worker, printing one line per iteration, and saves it.\n"
		"  --algo NAME          %s (default als; `starfa train --algo NAME --help` shows its options)\n"
		"  --input FILE         training entries (ratings file: user item value [timestamp], Matrix Market or docword)\n"
		"  --format F           mtx, ratings or docword (default: guessed from the name)\n"
		"  --vocab FILE         the words of the columns, one per line (UCI vocab.*.txt): topics and exports\n"
		"                       show them\n"
		"  --test FILE          entries to score after every iteration (matched by user and item id)\n"
		"  --test-fraction F    hold out this fraction of the input as the test set instead (e.g. 0.2; whole\n"
		"                       documents for topic models, scored by document completion)\n"
		"  --seed S             seed of the hold-out split and of the algorithm's random start (default 1)\n"
		"  --out MODEL          the model file to write\n"
		"  --log FILE.csv       the progress lines as CSV\n"
		"  --task-log FILE.csv  every task of the run: codelet, worker, start and end (seconds from the first\n"
		"                       start), data read and written; scripts/gantt.py draws it per worker\n"
		"  --profile            after training, per worker its tasks and where its time went (running tasks,\n"
		"                       sleeping with nothing to run, the rest: scheduling and waiting for data),\n"
		"                       the bytes moved between memory nodes, and the process's CPU time (cores\n"
		"                       busy, and how many of them the CPU workers' tasks), over the iterations\n" CLI_RUNTIME_HELP,
		names);
	const starfa_algorithm *const *all = starfa_algorithms();
	for (int a = 0; all[a]; a++) {
		if (only && all[a] != only)
			continue;
		void *defaults = calloc(1, all[a]->params_size);
		if (!defaults)
			return;
		all[a]->defaults(defaults);
		fprintf(out, "\n--algo %s: %s\n", all[a]->name, all[a]->summary);
		for (const starfa_param *p = all[a]->params; p->name; p++) {
			char value[64], left[64];
			starfa_param_format(p, defaults, value, sizeof value);
			if (p->type == STARFA_PARAM_FLAG)
				snprintf(left, sizeof left, "--%s", p->name);
			else if (p->type == STARFA_PARAM_CHOICE)
				snprintf(left, sizeof left, "--%s %s", p->name, p->choices);
			else
				snprintf(left, sizeof left, "--%s %s", p->name, p->type == STARFA_PARAM_DOUBLE ? "X" : "N");
			fprintf(out, "  %-22s %s", left, p->help);
			if (p->type != STARFA_PARAM_FLAG)
				fprintf(out, " (default %s)", value);
			fputc('\n', out);
		}
		free(defaults);
	}
}

/* The --algo of the command line (the last one given), before the other options are parsed: the
 * algorithm decides which options exist and their defaults. */
static const char *find_algo(int argc, char **argv)
{
	const char *name = NULL;
	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--algo=", 7) == 0)
			name = argv[i] + 7;
		else if (strcmp(argv[i], "--algo") == 0 && i + 1 < argc)
			name = argv[++i];
	}
	return name;
}

enum { OPT_PARAM = 2000 }; /* getopt values of the algorithm's options: OPT_PARAM + index */

static int parse(int argc, char **argv, struct train_cli *c)
{
	static const struct option generic[] = {
		CLI_RUNTIME_OPTIONS,
		{"algo", required_argument, NULL, 'a'},
		{"input", required_argument, NULL, 'i'},
		{"format", required_argument, NULL, 'f'},
		{"vocab", required_argument, NULL, 'V'},
		{"test", required_argument, NULL, 't'},
		{"test-fraction", required_argument, NULL, 'F'},
		{"seed", required_argument, NULL, 's'},
		{"out", required_argument, NULL, 'o'},
		{"log", required_argument, NULL, 'L'},
		{"profile", no_argument, NULL, 'R'},
		{"task-log", required_argument, NULL, 'T'},
		{"help", no_argument, NULL, 'h'},
	};
	const size_t ngeneric = sizeof generic / sizeof generic[0];
	const char *given = find_algo(argc, argv), *name = given ? given : "als";
	c->algo = starfa_algorithm_find(name);
	if (!c->algo) {
		char names[256];
		algorithm_names(names, sizeof names);
		cli_error("--algo must be %s, not '%s'", names, name);
		return EXIT_USAGE;
	}
	c->params = calloc(1, c->algo->params_size);
	size_t nparams = 0;
	while (c->algo->params[nparams].name)
		nparams++;
	struct option *longopts = calloc(ngeneric + nparams + 1, sizeof *longopts);
	if (!c->params || !longopts) {
		free(longopts);
		cli_error("out of memory");
		return 1;
	}
	c->algo->defaults(c->params);
	memcpy(longopts, generic, sizeof generic);
	for (size_t i = 0; i < nparams; i++) {
		const starfa_param *p = &c->algo->params[i];
		longopts[ngeneric + i] = (struct option){p->name, p->type == STARFA_PARAM_FLAG ? no_argument : required_argument,
							NULL, OPT_PARAM + (int)i};
	}
	int64_t v;
	int opt, rc = 0;
	while (!rc && (opt = getopt_long(argc, argv, "i:o:h", longopts, NULL)) != -1) {
		int handled = cli_runtime_option(opt, optarg, &c->runtime);
		if (handled < 0) {
			rc = EXIT_USAGE;
			break;
		}
		if (handled)
			continue;
		if (opt >= OPT_PARAM && opt < OPT_PARAM + (int)nparams) {
			if (starfa_param_set(c->algo, c->params, c->algo->params[opt - OPT_PARAM].name, optarg) != 0) {
				cli_error("%s", starfa_last_error());
				rc = EXIT_USAGE;
			}
			continue;
		}
		switch (opt) {
		case 'a':
			break; /* taken before the loop */
		case 'i':
			c->input = optarg;
			break;
		case 'f':
			if (cli_parse_format(optarg, &c->format))
				rc = EXIT_USAGE;
			break;
		case 't':
			c->test = optarg;
			break;
		case 'V':
			c->vocab = optarg;
			break;
		case 'F':
			if (cli_parse_double("test-fraction", optarg, 0.0, 0.99, &c->test_fraction))
				rc = EXIT_USAGE;
			break;
		case 's':
			if (cli_parse_int("seed", optarg, 0, INT64_MAX, &v))
				rc = EXIT_USAGE;
			else
				c->seed = (uint64_t)v;
			/* The algorithm's random start follows the same seed. */
			if (!rc && starfa_param_find(c->algo, "seed") && starfa_param_set(c->algo, c->params, "seed", optarg))
				rc = EXIT_USAGE;
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
		case 'T':
			c->task_log = optarg;
			break;
		case 'h':
			usage(stdout, given ? c->algo : NULL); /* every algorithm's options unless one was named */
			rc = -1;
			break;
		default:
			rc = EXIT_USAGE;
		}
	}
	free(longopts);
	if (rc)
		return rc;
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
	int logged_header; /* the CSV header comes from the first iteration's columns */
	int failed_log;
	int profile, failed_profile;
	int64_t iterations;
	starfa_profile sum; /* --profile: over the iterations */
	/* --profile's time line: where `trained in` went. Clock readings from the start of starfa_train to
	 * the first callback and after the last, and the iterations' and metrics' own seconds. */
	double start, first_callback, last_callback, iterating, evaluating;
};

static void print_cell(FILE *f, double v)
{
	if (isnan(v))
		fputs(",", f);
	else
		fprintf(f, ",%.6g", v);
}

static int on_iteration(const starfa_train_progress *p, void *user_data)
{
	struct run_state *st = user_data;
	const double called = cli_now_seconds();
	if (st->iterations == 0)
		st->first_callback = called - p->seconds - p->eval_seconds;
	st->iterating += p->seconds;
	st->evaluating += p->eval_seconds;
	if (p->iteration == 1) {
		printf("tiles=%lldx%lld", (long long)p->row_tiles, (long long)p->col_tiles);
		if (p->systems_bytes > 0)
			printf(" systems=%.1f MiB", p->systems_bytes / (1024.0 * 1024.0));
		printf("\n");
		if (p->split)
			for (int s = 0; s < 2; s++) {
				printf("%s ", s == 0 ? "rows" : "cols");
				starfa_split_describe(&p->split[s], stdout);
			}
	}
	/* 4 significant digits: a GPU iteration on MovieLens takes under a millisecond */
	printf("iter %3lld  %7.4g s (+%.3g s metrics)", (long long)p->iteration, p->seconds, p->eval_seconds);
	for (int c = 0; c < p->ncolumns; c++)
		if (!isnan(p->values[c]))
			printf("  %s %.*f", p->columns[c], p->digits[c], p->values[c]);
	printf("  tasks");
	for (int k = 0; k < STARFA_WORKER_KINDS; k++)
		if (starfa_worker_count((starfa_worker_kind)k) > 0 || p->stats.tasks[k] > 0)
			printf(" %s %lld", starfa_worker_kind_name((starfa_worker_kind)k), (long long)p->stats.tasks[k]);
	printf("\n");
	fflush(stdout);
	st->iterations = p->iteration;
	if (st->profile && !st->failed_profile)
		st->failed_profile = starfa_profile_add(&st->sum, p->profile) != 0;
	if (st->log) {
		FILE *f = st->log;
		if (!st->logged_header) {
			fprintf(f, "iteration,seconds");
			for (int c = 0; c < p->ncolumns; c++)
				fprintf(f, ",%s", p->columns[c]);
			fprintf(f, ",cpu_tasks,cuda_tasks,cpu_task_seconds,cuda_task_seconds,metrics_seconds\n");
			st->logged_header = 1;
		}
		fprintf(f, "%lld,%.6f", (long long)p->iteration, p->seconds);
		for (int c = 0; c < p->ncolumns; c++)
			print_cell(f, p->values[c]);
		fprintf(f, ",%lld,%lld,%.6f,%.6f,%.6f\n", (long long)p->stats.tasks[STARFA_WORKER_CPU],
			(long long)p->stats.tasks[STARFA_WORKER_CUDA], p->stats.seconds[STARFA_WORKER_CPU],
			p->stats.seconds[STARFA_WORKER_CUDA], p->eval_seconds);
		if (ferror(f))
			st->failed_log = 1;
	}
	st->last_callback = cli_now_seconds();
	return 0;
}

static int run(struct train_cli *c, starfa_coo *train, starfa_coo *test)
{
	struct run_state st = {.profile = c->profile};
	char *log_tmp = NULL;
	if (c->log && !(st.log = cli_open_output(c->log, &log_tmp)))
		return 1;
	/* Every setting the run used, from the algorithm's own table. */
	printf("%s:", c->algo->name);
	for (const starfa_param *p = c->algo->params; p->name; p++) {
		char value[64];
		starfa_param_format(p, c->params, value, sizeof value);
		printf(" %s=%s", p->name, value);
	}
	printf("\nworkers: %d cpu, %d cuda; scheduler %s\n", starfa_worker_count(STARFA_WORKER_CPU),
	       starfa_worker_count(STARFA_WORKER_CUDA), starfa_scheduler_name());
	fflush(stdout);
	starfa_model *model = NULL;
	char *task_tmp = NULL;
	FILE *task_log = NULL;
	if (c->task_log && (!(task_log = cli_open_output(c->task_log, &task_tmp)) || starfa_task_log_begin() != 0)) {
		if (task_log)
			cli_close_output(task_log, task_tmp, c->task_log, 0);
		if (st.log)
			cli_close_output(st.log, log_tmp, c->log, 0);
		return task_log ? cli_library_error() : 1;
	}
	double t0 = cli_now_seconds();
	st.start = t0;
	int rc = starfa_train(c->algo, c->params, train, test, on_iteration, &st, &model);
	double total = cli_now_seconds() - t0;
	if (task_log) {
		starfa_task_record *records = NULL;
		int64_t nrecords = 0;
		int lrc = starfa_task_log_end(&records, &nrecords);
		if (rc == 0 && lrc != 0)
			rc = cli_library_error();
		else if (rc == 0 && starfa_task_log_write(task_log, records, nrecords) != 0)
			rc = cli_library_error();
		free(records);
	}
	if (rc == 0 && st.failed_log) {
		cli_error("cannot write the log %s", c->log);
		rc = 1;
	} else if (rc != 0) {
		rc = cli_library_error();
	}
	if (rc == 0 && starfa_model_save(model, c->out) != 0)
		rc = cli_library_error();
	if (st.log && cli_close_output(st.log, log_tmp, c->log, rc == 0) != 0 && rc == 0) {
		unlink(c->out); /* the run failed: no model without its log either */
		rc = 1;
	}
	if (task_log && cli_close_output(task_log, task_tmp, c->task_log, rc == 0) != 0 && rc == 0) {
		unlink(c->out);
		if (c->log)
			unlink(c->log);
		rc = 1;
	}
	if (rc == 0 && (model->kind == STARFA_MODEL_TOPIC || model->kind == STARFA_MODEL_NONNEG))
		printf("model: %lld documents, %lld words, %lld topics, trained in %.2f s, saved to %s\n",
		       (long long)model->nusers, (long long)model->nitems, (long long)model->rank, total, c->out);
	else if (rc == 0)
		printf("model: %lld users, %lld items, rank %lld, trained in %.2f s, saved to %s\n", (long long)model->nusers,
		       (long long)model->nitems, (long long)model->rank, total, c->out);
	if (rc == 0 && st.profile) {
		if (st.failed_profile) {
			cli_error("--profile: out of memory");
		} else {
			printf("profile over %lld iterations:\n", (long long)st.iterations);
			cli_profile_print(stdout, &st.sum);
			/* setup: tiling, registering, first factors and placement, before iteration 1; the rest: the
			 * progress reports between iterations; the end: the last tasks' wait and the model's copy */
			const double setup = st.iterations > 0 ? st.first_callback - st.start : total;
			const double end = st.iterations > 0 ? st.start + total - st.last_callback : 0;
			printf("  trained in %.3g s: setup %.3g s, iterations %.3g s, metrics %.3g s, reports %.3g s, "
			       "model out %.3g s\n",
			       total, setup, st.iterating, st.evaluating,
			       total - setup - st.iterating - st.evaluating - end, end);
		}
	}
	starfa_profile_clear(&st.sum);
	starfa_model_free(model);
	return rc;
}

/* Reads the input, starts the runtime and trains, once the options are parsed. */
static int train_command(struct train_cli *cp)
{
	struct train_cli c = *cp;
	int rc;
	if (check_writable(c.out, "model") || (c.log && check_writable(c.log, "log")) ||
	    (c.task_log && check_writable(c.task_log, "task log")))
		return 1;

	starfa_coo *all = NULL, *train = NULL, *test = NULL;
	if (starfa_read(c.input, c.format, &all) != 0)
		return cli_library_error();
	/* A rating given twice was given again: the later one stands. (Implicit feedback adds up
	 * instead: two plays are more evidence than one.) */
	int64_t repeated = 0;
	if (c.algo->kind == STARFA_MODEL_EXPLICIT && starfa_coo_dedupe(all, &repeated) != 0) {
		starfa_coo_free(all);
		return cli_library_error();
	}
	if (repeated)
		printf("note: %lld repeated (user, item) ratings in %s: kept the last of each\n", (long long)repeated,
		       c.input);
	if (c.vocab && starfa_read_vocab(c.vocab, all) != 0) {
		starfa_coo_free(all);
		return cli_library_error();
	}
	/* Topic and count models (LDA, GaP, KL-NMF): rows are documents, held out whole. */
	const int topics = c.algo->kind == STARFA_MODEL_TOPIC || c.algo->kind == STARFA_MODEL_NONNEG;
	if (c.test_fraction > 0) {
		rc = topics ? starfa_coo_split_rows(all, c.test_fraction, c.seed, &train, &test)
			    : starfa_coo_split(all, c.test_fraction, c.seed, &train, &test);
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
	printf(topics ? "training: %s documents=%lld words=%lld entries=%lld" : "training: %s users=%lld items=%lld entries=%lld",
	       c.input, (long long)train->nrows, (long long)train->ncols, (long long)train->nnz);
	if (test)
		printf("; test: %s entries=%lld", c.test ? c.test : "held out", (long long)test->nnz);
	printf("\n");
	if (topics) { /* real corpora have documents with no words: kept, their mixture the prior */
		int64_t empty = 0;
		char *has = calloc((size_t)train->nrows + 1, 1);
		for (int64_t e = 0; has && e < train->nnz; e++)
			has[train->row[e]] = 1;
		for (int64_t r = 0; has && r < train->nrows; r++)
			empty += !has[r];
		free(has);
		if (empty)
			printf("note: %lld of the %lld training documents have no words (kept: their mixture is the prior)\n",
			       (long long)empty, (long long)train->nrows);
	}
	if (starfa_init(&c.runtime) != 0) {
		rc = cli_library_error();
	} else {
		rc = run(&c, train, test);
		rc = cli_shutdown(&c.runtime, rc);
	}
	starfa_coo_free(train);
	starfa_coo_free(test);
	return rc;
}

int cmd_train(int argc, char **argv)
{
	struct train_cli c = {.format = STARFA_FORMAT_AUTO, .seed = 1};
	starfa_options_default(&c.runtime);
	c.runtime.silent = 1;
	int rc = parse(argc, argv, &c);
	if (rc == 0)
		rc = train_command(&c);
	else if (rc < 0)
		rc = 0; /* --help */
	free(c.params);
	return rc;
}
