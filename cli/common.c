/* Helpers shared by the starfa commands. */
#include "cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void cli_error(const char *fmt, ...)
{
	va_list ap;
	fputs("starfa: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_library_error(void)
{
	cli_error("%s", starfa_last_error());
	return 1;
}

int cli_parse_int(const char *option, const char *text, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(text, &end, 10);
	if (errno || end == text || *end != '\0' || v < min || v > max) {
		cli_error("--%s expects an integer in [%lld, %lld], not '%s'", option, (long long)min, (long long)max,
			  text);
		return -1;
	}
	*out = v;
	return 0;
}

int cli_parse_double(const char *option, const char *text, double min, double max, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(text, &end);
	if (errno || end == text || *end != '\0' || !isfinite(v) || v < min || v > max) {
		cli_error("--%s expects a number in [%g, %g], not '%s'", option, min, max, text);
		return -1;
	}
	*out = v;
	return 0;
}

int cli_runtime_option(int opt, const char *arg, starfa_options *opts)
{
	int64_t v;
	switch (opt) {
	case 1001:
		if (cli_parse_int("ncpus", arg, 0, 4096, &v))
			return -1;
		opts->ncpus = (int)v;
		return 1;
	case 1002:
		if (cli_parse_int("ncuda", arg, 0, 64, &v))
			return -1;
		opts->ncuda = (int)v;
		return 1;
	case 1003:
		opts->scheduler = arg;
		return 1;
	case 1004:
		if (cli_parse_int("calibrate", arg, 0, 2, &v))
			return -1;
		opts->calibrate = (int)v;
		return 1;
	case 1005:
		if (!*arg) {
			cli_error("--trace needs a folder");
			return -1;
		}
		opts->trace_dir = arg;
		return 1;
	}
	return 0;
}

int cli_topic_option(int opt, const char *arg, starfa_topic_options *to)
{
	switch (opt) {
	case 1101:
		return cli_parse_int("iters", arg, 1, 1000000, &to->max_iters) ? -1 : 1;
	case 1102:
		return cli_parse_double("tol", arg, 0, 1e6, &to->tol) ? -1 : 1;
	}
	return 0;
}

int cli_check_vocabulary(const char *path, const starfa_coo *docs, const starfa_model *m)
{
	if (docs->ncols <= m->nitems)
		return 0;
	cli_error("%s:2: %lld words declared, but the model knows %lld: word ids must be those of its training corpus",
		  path, (long long)docs->ncols, (long long)m->nitems);
	return 1;
}

int cli_shutdown(const starfa_options *opts, int rc)
{
	starfa_shutdown();
	if (!opts->trace_dir)
		return rc;
	if (starfa_trace_write(opts->trace_dir) != 0) {
		cli_library_error();
		return rc ? rc : 1;
	}
	printf("trace: %s/paje.trace (ViTE), %s/tasks.rec (scripts/gantt.py %s/tasks.rec OUT.svg)\n", opts->trace_dir,
	       opts->trace_dir, opts->trace_dir);
	return rc;
}

int cli_parse_format(const char *text, starfa_format *out)
{
	if (starfa_format_parse(text, out) == 0)
		return 0;
	cli_error("--format must be mtx, ratings or docword, not '%s'", text);
	return -1;
}

int cli_no_operands(int argc, char **argv)
{
	if (optind >= argc)
		return 0;
	cli_error("unexpected argument '%s'", argv[optind]);
	return -1;
}

int cli_load_csr(const char *path, starfa_format format, starfa_csr **out, starfa_coo **coo_out)
{
	starfa_coo *coo = NULL;
	if (starfa_read(path, format, &coo) != 0)
		return cli_library_error();
	int rc = starfa_csr_from_coo(coo, out);
	if (coo_out)
		*coo_out = coo;
	else
		starfa_coo_free(coo);
	return rc ? cli_library_error() : 0;
}

double cli_now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double percent(double part, double whole)
{
	return whole > 0 ? 100.0 * part / whole : 0.0;
}

void cli_profile_print(FILE *out, const starfa_profile *p)
{
	fprintf(out, "  %-44s %8s %10s %7s %9s %7s\n", "worker", "tasks", "busy s", "busy", "sleeping", "other");
	for (int w = 0; w < p->nworkers; w++) {
		const starfa_worker_profile *q = &p->workers[w];
		double other = q->seconds - q->executing - q->sleeping;
		fprintf(out, "  %-44.44s %8lld %10.3f %6.1f%% %8.1f%% %6.1f%%\n", q->name, (long long)q->tasks, q->executing,
			percent(q->executing, q->seconds), percent(q->sleeping, q->seconds),
			percent(other > 0 ? other : 0, q->seconds));
	}
	/* The process's CPU time against the span: cores busy, of which the CPU workers' tasks; the rest is
	 * polling (a GPU's worker, one CPU worker StarPU keeps awake), scheduling and this thread. */
	double wall = 0, cpu_tasks = 0;
	for (int w = 0; w < p->nworkers; w++) {
		if (p->workers[w].seconds > wall)
			wall = p->workers[w].seconds;
		if (p->workers[w].kind == STARFA_WORKER_CPU)
			cpu_tasks += p->workers[w].executing;
	}
	if (wall > 0)
		fprintf(out, "  process CPU time %.3f s over %.3f s: %.2f cores busy, the CPU workers' tasks %.2f of them\n",
			p->cpu_seconds, wall, p->cpu_seconds / wall, cpu_tasks / wall);
	if (p->nlinks == 0)
		fprintf(out, "  no data moved between memory nodes\n");
	for (int l = 0; l < p->nlinks; l++) {
		const starfa_link_profile *q = &p->links[l];
		fprintf(out, "  %-10s -> %-10s %12.3f MB in %lld transfers\n", q->src, q->dst, (double)q->bytes * 1e-6,
			(long long)q->transfers);
	}
}

void cli_model_print(FILE *out, const starfa_model *m)
{
	fprintf(out, "model: %s (%s), %lld users, %lld items, rank %lld%s\n", starfa_model_kind_name(m->kind), m->algorithm,
		(long long)m->nusers, (long long)m->nitems, (long long)m->rank, m->user_bias ? ", biases" : "");
}

FILE *cli_open_output(const char *path, char **tmp_out)
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
	*tmp_out = tmp;
	return f;
}

int cli_close_output(FILE *f, char *tmp, const char *path, int keep)
{
	int rc = 0;
	int failed = ferror(f) || fflush(f) != 0 || fsync(fileno(f)) != 0;
	if (fclose(f) != 0)
		failed = 1;
	if (keep && failed) {
		cli_error("cannot write %s", path);
		rc = 1;
	}
	if (keep && !failed) {
		mode_t mask = umask(0);
		umask(mask);
		if (chmod(tmp, 0666 & ~mask) != 0 || rename(tmp, path) != 0) {
			cli_error("cannot write %s: %s", path, strerror(errno));
			rc = 1;
		}
	}
	if (!keep || rc)
		unlink(tmp);
	free(tmp);
	return rc;
}

