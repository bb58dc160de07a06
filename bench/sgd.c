/* starfa_sgd_bench: SGD matrix factorization on ratings with something to learn. The pattern is one of
 * the benchmark's matrices (the Netflix-shaped generator by default, same shape and skew as `netflix`);
 * the values come from a planted model, r = clip(3.6 + b_u + c_i + a_u·w_i + noise, 1, 5) with Gaussian
 * noise of standard deviation sigma, so the test RMSE of a good fit approaches sigma (a little less: the
 * clipping trims the noise at the ends). It holds out a test fraction, trains `starfa train --algo sgd`
 * through the library at each rank asked for, and prints per rank the seconds per epoch, the updates per
 * second, the test RMSE reached and the time to reach 1.02 sigma, as Markdown.
 *
 *   starfa_sgd_bench [--matrix NAME] [--ranks 32,64,128] [--planted-rank R] [--sigma S] [--epochs N]
 *                    [--lr R] [--lambda L] [--strata P] [--test-fraction F] [--ncpus N] [--ncuda N]
 *                    [--seed S] [--fp16] [--md FILE] [--write PREFIX] [--no-train]
 *                    [--algo sgd|ccd|als] [--param NAME=VALUE]... [--curve CSV]
 * --algo trains another algorithm of the table the same way (default sgd); --param sets one of its
 * options; --curve appends algo,matrix,rank,epoch,training seconds,wall seconds,test RMSE per epoch;
 * --task-log writes the last rank's run's tasks (starfa_task_log_write's CSV, for scripts/gantt.py).
 * --write PREFIX also writes the split as PREFIX.train.csv and PREFIX.test.csv (user,item,rating), for the
 * libraries run beside starfa on the same ratings. Exit status: 0, 1 on an error, 2 on a usage error. */
#include "bench.h"
#include "random.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RANKS 8
#define MAX_EPOCHS 1000

static double seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Ratings on m's pattern from the planted model (see the top of this file). */
static starfa_coo *planted(const starfa_csr *pattern, int64_t r, double sigma, uint64_t seed)
{
	const int64_t m = pattern->nrows, n = pattern->ncols;
	float *A = malloc(sizeof(float) * (size_t)(m * r)), *W = malloc(sizeof(float) * (size_t)(n * r));
	float *bu = malloc(sizeof(float) * (size_t)m), *bi = malloc(sizeof(float) * (size_t)n);
	starfa_coo *coo = starfa_coo_new(m, n, pattern->nnz);
	if (!A || !W || !bu || !bi || !coo) {
		free(A);
		free(W);
		free(bu);
		free(bi);
		starfa_coo_free(coo);
		return NULL;
	}
	uint64_t s = seed * 0x2545f4914f6cdd1dull + 17;
	/* a·w has variance r * (0.8 / sqrt(r))^4 ... scaled so that it is about 0.8: the signal's spread
	 * beside the biases' 0.3 and 0.4, as ratings data show. */
	const double scale = sqrt(0.8 / sqrt((double)r));
	for (int64_t i = 0; i < m * r; i++)
		A[i] = (float)(scale * bench_gaussian(&s));
	for (int64_t i = 0; i < n * r; i++)
		W[i] = (float)(scale * bench_gaussian(&s));
	for (int64_t u = 0; u < m; u++)
		bu[u] = (float)(0.3 * bench_gaussian(&s));
	for (int64_t i = 0; i < n; i++)
		bi[i] = (float)(0.4 * bench_gaussian(&s));
	for (int64_t u = 0; u < m; u++)
		for (int64_t e = pattern->rowptr[u]; e < pattern->rowptr[u + 1]; e++) {
			int64_t i = pattern->colind[e];
			double v = 3.6 + bu[u] + bi[i];
			for (int64_t d = 0; d < r; d++)
				v += (double)A[u * r + d] * W[i * r + d];
			v += sigma * bench_gaussian(&s);
			v = v < 1 ? 1 : v > 5 ? 5 : v;
			coo->row[coo->nnz] = (int32_t)u;
			coo->col[coo->nnz] = (int32_t)i;
			coo->val[coo->nnz++] = (float)v;
		}
	free(A);
	free(W);
	free(bu);
	free(bi);
	return coo;
}

struct run_log {
	double epoch_seconds[MAX_EPOCHS];
	double test_rmse[MAX_EPOCHS], elapsed[MAX_EPOCHS], trained[MAX_EPOCHS];
	int n;
	double start, target, reached_at;
	double train_total, trained_at; /* the epochs' own seconds (redone ones included, metrics not) */
	double whole;                   /* starfa_train from call to return */
	double eval_total;              /* the evaluations after the epochs (loss, bold driver, metrics) */
	int evals;
};

static int log_epoch(const starfa_train_progress *p, void *user_data)
{
	struct run_log *l = user_data;
	int redone = 0;
	for (int c = 0; c < p->ncolumns; c++)
		if (strcmp(p->columns[c], "redone") == 0)
			redone = p->values[c] > 0;
	l->train_total += p->seconds;
	l->eval_total += p->eval_seconds;
	l->evals++;
	if (p->iteration == 1 && p->split)
		for (int s = 0; s < 2; s++) {
			printf("%s ", s == 0 ? "rows" : "cols");
			starfa_split_describe(&p->split[s], stdout);
		}
	if (redone || l->n == MAX_EPOCHS)
		return 0;
	l->epoch_seconds[l->n] = p->seconds;
	l->test_rmse[l->n] = p->has_test ? p->test.rmse : NAN;
	l->elapsed[l->n] = seconds() - l->start;
	l->trained[l->n] = l->train_total;
	if (l->reached_at < 0 && p->has_test && p->test.rmse <= l->target) {
		l->reached_at = l->elapsed[l->n];
		l->trained_at = l->train_total;
	}
	l->n++;
	return 0;
}

static int compare_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: starfa_sgd_bench [--matrix NAME] [--ranks 32,64,128] [--planted-rank R] [--sigma S]\n"
		   "                        [--epochs N] [--lr R] [--lambda L] [--strata P] [--test-fraction F]\n"
		   "                        [--ncpus N] [--ncuda N] [--seed S] [--fp16] [--md FILE] [--write PREFIX]\n"
		   "                        [--no-train] [--algo sgd|ccd|als] [--param NAME=VALUE]... [--curve CSV]\n"
		   "                        [--task-log CSV]\n"
		   "  NAME: %s\n",
		bench_matrix_names());
}

/* Ends the task log and writes it to path after a successful run; returns rc, or nonzero (with a
 * message) when the log could not be had or written. */
static int finish_task_log(const char *path, int rc)
{
	starfa_task_record *records = NULL;
	int64_t n = 0;
	int lrc = starfa_task_log_end(&records, &n);
	if (!rc && !lrc) {
		FILE *f = fopen(path, "w");
		lrc = !f || starfa_task_log_write(f, records, n) != 0;
		if ((f && fclose(f) != 0) || lrc) {
			fprintf(stderr, "starfa_sgd_bench: cannot write the task log %s\n", path);
			lrc = 1;
		}
	}
	free(records);
	return rc ? rc : lrc;
}

static int parse_number(const char *opt, const char *text, double lo, double hi, double *out)
{
	return bench_parse_number("starfa_sgd_bench", opt, text, lo, hi, out);
}

int main(int argc, char **argv)
{
	const char *matrix = "netflix", *md_path = NULL, *lr = NULL, *lambda = NULL, *strata = NULL, *write = NULL;
	const char *algo_name = "sgd", *curve_path = NULL, *extra[16], *task_log_path = NULL;
	int nextra = 0;
	int no_train = 0, fp16 = 0;
	int64_t ranks[MAX_RANKS] = {32, 64, 128};
	int nranks = 3;
	double planted_rank = 10, sigma = 0.8, epochs = 20, fraction = 0.1, ncpus = -1, ncuda = -1, seed = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(a, "--no-train") == 0) {
			no_train = 1;
			continue;
		}
		if (strcmp(a, "--fp16") == 0) {
			fp16 = 1;
			continue;
		}
		if (!v) {
			fprintf(stderr, "starfa_sgd_bench: %s needs a value\n", a);
			return 2;
		}
		i++;
		if (strcmp(a, "--matrix") == 0)
			matrix = v;
		else if (strcmp(a, "--md") == 0)
			md_path = v;
		else if (strcmp(a, "--algo") == 0)
			algo_name = v;
		else if (strcmp(a, "--curve") == 0)
			curve_path = v;
		else if (strcmp(a, "--task-log") == 0)
			task_log_path = v;
		else if (strcmp(a, "--param") == 0) {
			bad = nextra == 16 || !strchr(v, '=');
			if (bad)
				fprintf(stderr, "starfa_sgd_bench: --param takes NAME=VALUE (16 at most), not '%s'\n", v);
			else
				extra[nextra++] = v;
		}
		else if (strcmp(a, "--write") == 0)
			write = v;
		else if (strcmp(a, "--lr") == 0)
			lr = v;
		else if (strcmp(a, "--lambda") == 0)
			lambda = v;
		else if (strcmp(a, "--strata") == 0)
			strata = v;
		else if (strcmp(a, "--ranks") == 0) {
			char *copy = strdup(v), *save = NULL;
			nranks = 0;
			for (char *t = strtok_r(copy, ",", &save); t && !bad; t = strtok_r(NULL, ",", &save)) {
				double k;
				bad = nranks == MAX_RANKS || parse_number("--ranks", t, 1, 1024, &k);
				if (!bad)
					ranks[nranks++] = (int64_t)k;
			}
			free(copy);
			bad = bad || nranks == 0;
		} else if (strcmp(a, "--planted-rank") == 0)
			bad = parse_number(a, v, 1, 1024, &planted_rank);
		else if (strcmp(a, "--sigma") == 0)
			bad = parse_number(a, v, 0, 10, &sigma);
		else if (strcmp(a, "--epochs") == 0)
			bad = parse_number(a, v, 1, MAX_EPOCHS, &epochs);
		else if (strcmp(a, "--test-fraction") == 0)
			bad = parse_number(a, v, 0.001, 0.5, &fraction);
		else if (strcmp(a, "--ncpus") == 0)
			bad = parse_number(a, v, 0, 4096, &ncpus);
		else if (strcmp(a, "--ncuda") == 0)
			bad = parse_number(a, v, 0, 64, &ncuda);
		else if (strcmp(a, "--seed") == 0)
			bad = parse_number(a, v, 0, 1e15, &seed);
		else {
			fprintf(stderr, "starfa_sgd_bench: unknown option %s\n", a);
			usage(stderr);
			return 2;
		}
		if (bad)
			return 2;
	}
	const starfa_algorithm *algo = starfa_algorithm_find(algo_name);
	if (!algo) {
		fprintf(stderr, "starfa_sgd_bench: no algorithm '%s'\n", algo_name);
		return 2;
	}
	FILE *md = md_path ? fopen(md_path, "a") : NULL;
	if (md_path && !md) {
		fprintf(stderr, "starfa_sgd_bench: cannot open %s: %s\n", md_path, strerror(errno));
		return 1;
	}

	struct bench_options o;
	memset(&o, 0, sizeof o);
	o.seed = (uint64_t)seed;
	o.data_dirs[o.ndata_dirs++] = "data";
	o.data_dirs[o.ndata_dirs++] = "../shared/data";
	struct bench_matrix m;
	if (bench_matrix_load(matrix, &o, &m) != 0)
		return 1;
	double t0 = seconds();
	starfa_coo *all = planted(m.csr, (int64_t)planted_rank, sigma, (uint64_t)seed);
	starfa_coo *train = NULL, *test = NULL;
	if (!all || starfa_coo_split(all, fraction, (uint64_t)seed, &train, &test) != 0) {
		fprintf(stderr, "starfa_sgd_bench: %s\n", all ? starfa_last_error() : "out of memory");
		return 1;
	}
	starfa_coo_free(all);
	double gen_seconds = seconds() - t0;
	for (int part = 0; write && part < 2; part++) {
		char path[1024];
		snprintf(path, sizeof path, "%s.%s.csv", write, part ? "test" : "train");
		const starfa_coo *c = part ? test : train;
		FILE *f = fopen(path, "w");
		int bad = !f;
		if (f) {
			fprintf(f, "user,item,rating\n");
			for (int64_t e = 0; e < c->nnz; e++)
				fprintf(f, "%d,%d,%.4f\n", c->row[e] + 1, c->col[e] + 1, c->val[e]);
			bad = ferror(f) | (fclose(f) != 0);
		}
		if (bad) {
			fprintf(stderr, "starfa_sgd_bench: cannot write %s\n", path);
			return 1;
		}
		printf("wrote %s (%lld ratings)\n", path, (long long)c->nnz);
	}
	if (no_train)
		return 0;
	starfa_options opts;
	starfa_options_default(&opts);
	opts.ncpus = (int)ncpus;
	opts.ncuda = (int)ncuda;
	opts.silent = 1;
	if (starfa_init(&opts) != 0) {
		fprintf(stderr, "starfa_sgd_bench: %s\n", starfa_last_error());
		return 1;
	}
	char text[4096];
	snprintf(text, sizeof text,
			   "\n## %s: %s with planted ratings (%s)\n\n"
			   "Ratings: %s's pattern, %lld x %lld, %lld entries (%lld to train, %lld to test; generated in %.1f s), "
			   "values clip(3.6 + b_u + c_i + a_u·w_i + N(0, %.2f²), 1, 5) with a rank-%lld planted model: the "
			   "test RMSE's floor is about sigma = %.2f. Workers: %d cpu, %d cuda (scheduler %s). Factors: %s.\n\n"
			   "| rank | epochs | s/epoch (median) | M updates/s | test RMSE | of sigma | training s to 1.02 sigma "
			   "| wall s to 1.02 sigma |\n"
			   "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
			   algo->name, m.name, m.source, m.name, (long long)m.nrows, (long long)m.ncols, (long long)m.nnz,
			   (long long)train->nnz, (long long)test->nnz, gen_seconds, sigma, (long long)planted_rank, sigma,
			   starfa_worker_count(STARFA_WORKER_CPU), starfa_worker_count(STARFA_WORKER_CUDA),
			   starfa_scheduler_name(), fp16 ? "FP16" : "FP32");
	fputs(text, stdout);
	if (md)
		fputs(text, md);
	bench_matrix_free(&m);
	const starfa_algorithm *sgd = algo;
	FILE *curve = curve_path ? fopen(curve_path, "a") : NULL;
	if (curve_path && !curve) {
		fprintf(stderr, "starfa_sgd_bench: cannot open %s: %s\n", curve_path, strerror(errno));
		return 1;
	}
	int rc = 0;
	for (int r = 0; r < nranks && rc == 0; r++) {
		void *params = calloc(1, sgd->params_size);
		char value[32];
		rc = !params;
		if (!rc) {
			sgd->defaults(params);
			snprintf(value, sizeof value, "%lld", (long long)ranks[r]);
			rc = starfa_param_set(sgd, params, "rank", value);
			snprintf(value, sizeof value, "%.0f", epochs);
			rc = rc || starfa_param_set(sgd, params, "iters", value);
			rc = rc || (starfa_param_find(sgd, "tol") && starfa_param_set(sgd, params, "tol", "0"));
			rc = rc || (lr && starfa_param_set(sgd, params, "lr", lr));
			rc = rc || (lambda && starfa_param_set(sgd, params, "lambda", lambda));
			rc = rc || (lambda && starfa_param_find(sgd, "lambda-bias") &&
				    starfa_param_set(sgd, params, "lambda-bias", lambda));
			rc = rc || (strata && starfa_param_set(sgd, params, "strata", strata));
			rc = rc || (fp16 && starfa_param_set(sgd, params, "fp16", NULL));
			for (int x = 0; x < nextra && !rc; x++) {
				char name[64];
				const char *eq = strchr(extra[x], '=');
				snprintf(name, sizeof name, "%.*s", (int)(eq - extra[x]), extra[x]);
				rc = starfa_param_set(sgd, params, name, eq + 1);
			}
		}
		struct run_log *l = calloc(1, sizeof *l);
		starfa_model *model = NULL;
		if (!rc && l) {
			l->target = 1.02 * sigma;
			l->reached_at = -1;
			l->start = seconds();
			rc = task_log_path ? starfa_task_log_begin() : 0;
			if (!rc)
				rc = starfa_train(sgd, params, train, test, log_epoch, l, &model);
			l->whole = seconds() - l->start;
			if (task_log_path) /* the last rank's run: the file is rewritten for each */
				rc = finish_task_log(task_log_path, rc);
		}
		if (rc || !l) {
			fprintf(stderr, "starfa_sgd_bench: rank %lld: %s\n", (long long)ranks[r], starfa_last_error());
			rc = 1;
		} else {
			double sorted[MAX_EPOCHS];
			memcpy(sorted, l->epoch_seconds, sizeof(double) * (size_t)l->n);
			qsort(sorted, (size_t)l->n, sizeof(double), compare_double);
			double med = l->n ? sorted[l->n / 2] : NAN, rmse = l->n ? l->test_rmse[l->n - 1] : NAN;
			char reached[64];
			if (l->reached_at >= 0)
				snprintf(reached, sizeof reached, "%.3f | %.2f", l->trained_at, l->reached_at);
			else
				snprintf(reached, sizeof reached, "not reached | not reached");
			/* s/epoch to 4 significant digits: sub-millisecond epochs too, so that ratios of 2% show */
			snprintf(text, sizeof text, "| %lld | %d | %.4g | %.0f | %.4f | %.3f | %s |\n", (long long)ranks[r], l->n,
				 med, (double)train->nnz / med / 1e6, rmse, rmse / sigma, reached);
			fputs(text, stdout);
			if (md)
				fputs(text, md);
			/* The whole call: setting up (tiles, factors, values), every epoch and its metrics, the model out. */
			printf("rank %lld: starfa_train took %.3f s in all, %.3f s to the end of epoch 1 (of it %.3f s training); "
			       "%.4f s an evaluation (loss, learning rate, test metrics; mean of %d)\n",
			       (long long)ranks[r], l->whole, l->n ? l->elapsed[0] : NAN, l->n ? l->trained[0] : NAN,
			       l->evals ? l->eval_total / l->evals : NAN, l->evals);
			fflush(stdout);
			for (int e = 0; curve && e < l->n; e++)
				fprintf(curve, "%s,%s,%lld,%d,%.4f,%.3f,%.5f\n", algo->name, matrix, (long long)ranks[r], e + 1,
					l->trained[e], l->elapsed[e], l->test_rmse[e]);
		}
		starfa_model_free(model);
		free(l);
		free(params);
	}
	snprintf(text, sizeof text,
		 "\nEpochs: the accepted ones (the bold driver's redone epochs are not counted); s/epoch excludes the "
		 "loss and test RMSE computed after each. To 1.02 sigma: the epochs' own seconds (redone ones "
		 "included), then the wall time with the loss and the test RMSE after every epoch.\n");
	fputs(text, stdout);
	if (md) {
		fputs(text, md);
		fclose(md);
	}
	if (curve)
		fclose(curve);
	starfa_shutdown();
	starfa_coo_free(train);
	starfa_coo_free(test);
	return rc;
}
