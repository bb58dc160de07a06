/* What the bench leaves behind: a table on stdout, every number in a CSV file, and a
 * Markdown section (newest first) with the machine, the measured ceilings and the table. */
#include "bench/bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MD_MARKER "<!-- new runs below this line -->"

/* ------------------------------------------------------------------ looking results up */

static const struct bench_result *find(const char *matrix, int64_t k, const char *measurement)
{
	return bench_result_find(matrix, k, measurement);
}

/* The fastest OK row whose measurement starts with prefix (NULL if none). */
static const struct bench_result *fastest(const char *matrix, int64_t k, const char *prefix)
{
	const struct bench_result *best = NULL;
	for (int i = 0; i < bench_result_count(); i++) {
		const struct bench_result *r = bench_result_at(i);
		if (r->k == k && !strcmp(r->matrix, matrix) && !strncmp(r->measurement, prefix, strlen(prefix)) &&
		    r->status == BENCH_OK && r->repeats > 0 && (!best || r->median_ms < best->median_ms))
			best = r;
	}
	return best;
}

static double gflops(const struct bench_result *r)
{
	return r && r->status == BENCH_OK && r->repeats > 0 ? r->flops / (r->median_ms * 1e-3) * 1e-9 : NAN;
}

/* A time cell: the median, or what happened instead. */
static void time_cell(char *out, size_t len, const struct bench_result *r)
{
	if (!r)
		snprintf(out, len, "-");
	else if (r->status == BENCH_OK && r->repeats > 0)
		snprintf(out, len, r->median_ms < 10 ? "%.3f" : r->median_ms < 1000 ? "%.2f" : "%.0f", r->median_ms);
	else
		snprintf(out, len, "%s", r->status == BENCH_SKIP ? "-" : bench_status_name(r->status));
}

static void number_cell(char *out, size_t len, double v, const char *fmt)
{
	if (isfinite(v))
		snprintf(out, len, fmt, v);
	else
		snprintf(out, len, "-");
}

/* The distinct (matrix, k) pairs in the order they were measured. */
static int is_first_of_pair(int i)
{
	const struct bench_result *r = bench_result_at(i);
	for (int j = 0; j < i; j++) {
		const struct bench_result *q = bench_result_at(j);
		if (q->k == r->k && !strcmp(q->matrix, r->matrix))
			return 0;
	}
	return r->k > 0;
}

/* ------------------------------------------------------------------ one table row */

struct table_row {
	char matrix[64], rows[24], cols[24], nnz[24], k[16];
	char starfa[24], cusparse[24], speedup[24], gflops[24], floor[24], fraction[24];
	char spmm_starfa[24], spmm_cusparse[24], spmm_graph[56], graph[80], cpu[64], cpu_spmm[64];
};

static void make_row(const struct bench_result *first, struct table_row *t)
{
	const char *mx = first->matrix;
	int64_t k = first->k;
	const struct bench_result *ours = find(mx, k, "sddmm.starfa.cuda");
	const struct bench_result *theirs = fastest(mx, k, "sddmm.cusparse.");
	const struct bench_result *spmm = find(mx, k, "spmm.starfa.tuned"); /* the codelet's implementation */
	const struct bench_result *spmm_theirs = fastest(mx, k, "spmm.cusparse.");
	const struct bench_result *graph = find(mx, k, "graph.gpu.auto");
	const struct bench_result *spmm_graph = find(mx, k, "graph_spmm.gpu.auto");
	const struct bench_result *cpu = find(mx, k, "cpu.starfa"), *plain = find(mx, k, "cpu.omp_plain");
	const struct bench_result *cpu_spmm = find(mx, k, "cpu.spmm_starfa"), *plain_spmm = find(mx, k, "cpu.spmm_omp_plain");
	snprintf(t->matrix, sizeof t->matrix, "%s", mx);
	snprintf(t->rows, sizeof t->rows, "%lld", (long long)first->rows);
	snprintf(t->cols, sizeof t->cols, "%lld", (long long)first->cols);
	snprintf(t->nnz, sizeof t->nnz, "%lld", (long long)first->nnz);
	snprintf(t->k, sizeof t->k, "%lld", (long long)k);
	time_cell(t->starfa, sizeof t->starfa, ours);
	if (theirs)
		time_cell(t->cusparse, sizeof t->cusparse, theirs);
	else
		time_cell(t->cusparse, sizeof t->cusparse, find(mx, k, "sddmm.cusparse.Bcol"));
	number_cell(t->speedup, sizeof t->speedup, ours && ours->status == BENCH_OK ? ours->speedup : NAN, "%.2fx");
	number_cell(t->gflops, sizeof t->gflops, gflops(ours), "%.0f");
	number_cell(t->floor, sizeof t->floor, ours ? ours->floor_ms : NAN, "%.3f");
	number_cell(t->fraction, sizeof t->fraction,
		    ours && ours->status == BENCH_OK ? 100.0 * ours->floor_ms / ours->median_ms : NAN, "%.0f%%");
	time_cell(t->spmm_starfa, sizeof t->spmm_starfa, spmm);
	if (spmm_theirs)
		time_cell(t->spmm_cusparse, sizeof t->spmm_cusparse, spmm_theirs);
	else
		time_cell(t->spmm_cusparse, sizeof t->spmm_cusparse, find(mx, k, "spmm.cusparse.default"));
	char g[24], ov[24];
	/* SpMM through the graph (each tile's task runs the implementation it measured fastest), against
	 * cuSPARSE's best. */
	time_cell(g, sizeof g, spmm_graph);
	number_cell(ov, sizeof ov, spmm_graph && spmm_graph->status == BENCH_OK ? spmm_graph->speedup : NAN, "%.2fx");
	snprintf(t->spmm_graph, sizeof t->spmm_graph, strcmp(ov, "-") ? "%s (%s)" : "%s", g, ov);
	time_cell(g, sizeof g, graph);
	number_cell(ov, sizeof ov, graph && graph->status == BENCH_OK ? graph->overhead_pct : NAN, "%+.0f%%");
	const struct bench_result *call = find(mx, k, "sddmm.starfa.cuda.call");
	char oc[24];
	number_cell(oc, sizeof oc,
		    graph && graph->status == BENCH_OK && call && call->status == BENCH_OK && call->repeats > 0
			    ? (graph->median_ms / call->median_ms - 1.0) * 100.0
			    : NAN,
		    "%+.0f%%");
	if (strcmp(oc, "-"))
		snprintf(t->graph, sizeof t->graph, "%s (%s; call %s)", g, ov, oc);
	else
		snprintf(t->graph, sizeof t->graph, strcmp(ov, "-") ? "%s (%s)" : "%s", g, ov);
	char c1[24], c2[24];
	time_cell(c1, sizeof c1, cpu);
	time_cell(c2, sizeof c2, plain);
	snprintf(t->cpu, sizeof t->cpu, "%s / %s", c1, c2);
	time_cell(c1, sizeof c1, cpu_spmm);
	time_cell(c2, sizeof c2, plain_spmm);
	snprintf(t->cpu_spmm, sizeof t->cpu_spmm, "%s / %s", c1, c2);
}

/* clang-format off */
static const char *const headers[] = {
	"matrix", "rows", "cols", "nnz", "K", "starfa ms", "cuSPARSE SDDMM ms", "speedup", "starfa GFLOP/s",
	"floor ms", "of floor", "SpMM starfa ms", "cusparseSpMM ms", "SpMM graph GPU ms (vs cuSPARSE)",
	"graph GPU ms (overhead over the kernel; over its host-timed call)",
	"CPU starfa / plain-OpenMP ms", "CPU SpMM starfa / plain-OpenMP ms",
};
/* clang-format on */
#define NCOLS ((int)(sizeof headers / sizeof headers[0]))

static const char *cell(const struct table_row *t, int c)
{
	const char *cells[NCOLS] = {t->matrix,	    t->rows,	    t->cols,	   t->nnz,	   t->k,
				    t->starfa,	    t->cusparse,    t->speedup,	   t->gflops,	   t->floor,
				    t->fraction,    t->spmm_starfa, t->spmm_cusparse, t->spmm_graph, t->graph,
				    t->cpu,	    t->cpu_spmm};
	return cells[c];
}

/* ------------------------------------------------------------------ summaries */

struct speedup_summary {
	int count;
	double geomean, min;
	char min_at[96];
};

static struct speedup_summary summarize(const char *measurement)
{
	struct speedup_summary s = {0, NAN, NAN, ""};
	double log_sum = 0;
	for (int i = 0; i < bench_result_count(); i++) {
		const struct bench_result *r = bench_result_at(i);
		if (strcmp(r->measurement, measurement) || r->status != BENCH_OK || !(r->speedup > 0))
			continue;
		log_sum += log(r->speedup);
		s.count++;
		if (!(r->speedup >= s.min)) {
			s.min = r->speedup;
			snprintf(s.min_at, sizeof s.min_at, "%s, K=%lld", r->matrix, (long long)r->k);
		}
	}
	if (s.count)
		s.geomean = exp(log_sum / s.count);
	return s;
}

static void print_summary(FILE *out, const char *what, struct speedup_summary s)
{
	if (s.count)
		fprintf(out, "%s: geometric mean %.2fx over %d rows, minimum %.2fx (%s)\n", what, s.geomean, s.count,
			s.min, s.min_at);
	else
		fprintf(out, "%s: no row with both times\n", what);
}

/* ------------------------------------------------------------------ stdout */

void report_print(FILE *out, const struct bench_device *d)
{
	int width[NCOLS];
	for (int c = 0; c < NCOLS; c++)
		width[c] = (int)strlen(headers[c]);
	int n = bench_result_count();
	struct table_row *rows = calloc((size_t)n + 1, sizeof *rows);
	int nrows = 0;
	for (int i = 0; rows && i < n; i++)
		if (is_first_of_pair(i))
			make_row(bench_result_at(i), &rows[nrows++]);
	for (int r = 0; r < nrows; r++)
		for (int c = 0; c < NCOLS; c++)
			width[c] =
				(int)strlen(cell(&rows[r], c)) > width[c] ? (int)strlen(cell(&rows[r], c)) : width[c];
	fprintf(out, "\n");
	for (int c = 0; c < NCOLS; c++)
		fprintf(out, "%s%-*s", c ? "  " : "", width[c], headers[c]);
	fprintf(out, "\n");
	for (int r = 0; r < nrows; r++) {
		for (int c = 0; c < NCOLS; c++)
			fprintf(out, c < 1 ? "%-*s" : "  %*s", width[c], cell(&rows[r], c));
		fprintf(out, "\n");
	}
	free(rows);
	fprintf(out, "\n");
	if (d->gpu)
		fprintf(out, "device: %s; measured %.0f GB/s, %.0f GFLOP/s FP32\n", d->name, d->bandwidth_gbs,
			d->fp32_gflops);
	else
		fprintf(out, "GPU: %s\n", d->gpu_note);
	print_summary(out, "SDDMM speedup over cuSPARSE", summarize("sddmm.starfa.cuda"));
	print_summary(out, "SpMM speedup over cuSPARSE", summarize("spmm.starfa.tuned"));
	print_summary(out, "CPU SDDMM speedup over plain OpenMP", summarize("cpu.starfa"));
	print_summary(out, "CPU SpMM speedup over plain OpenMP", summarize("cpu.spmm_starfa"));
	int failures = bench_failures();
	if (failures)
		fprintf(out, "%d measurement(s) FAILED or hit an ERROR (see above and the CSV notes)\n", failures);
}

/* ------------------------------------------------------------------ files */

/* Opens path's temporary sibling; commit renames it over path (nothing half-written). */
static FILE *open_temporary(const char *path, char *tmp, size_t len)
{
	snprintf(tmp, len, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		fprintf(stderr, "starfa_bench: cannot write %s: %s\n", tmp, strerror(errno));
	return f;
}

static int commit(FILE *f, const char *tmp, const char *path)
{
	int bad = ferror(f);
	if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
		fprintf(stderr, "starfa_bench: cannot write %s: %s\n", path, strerror(errno));
		remove(tmp);
		return -1;
	}
	return 0;
}

static void csv_number(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, ",%.10g", v); /* byte counts up to 1e10 stay exact */
	else
		fputc(',', f);
}

/* A CSV text field: quoted, quotes doubled. */
static void csv_text(FILE *f, const char *s)
{
	fputs(",\"", f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s == '\n' ? ' ' : *s, f);
	}
	fputc('"', f);
}

int report_write_csv(const char *path, const struct bench_device *d)
{
	char tmp[1100];
	FILE *f = open_temporary(path, tmp, sizeof tmp);
	if (!f)
		return -1;
	fprintf(f, "date,device,matrix,rows,cols,nnz,k,measurement,status,median_ms,min_ms,max_ms,repeats,gflops,"
		   "bytes,floor_ms,floor_fraction,baseline,baseline_ms,speedup,overhead_pct,tasks_cpu_per_run,"
		   "tasks_cuda_per_run,tiles,extra_name,extra,note\n");
	for (int i = 0; i < bench_result_count(); i++) {
		const struct bench_result *r = bench_result_at(i);
		fprintf(f, "%s", d->date);
		csv_text(f, d->gpu ? d->name : "none");
		csv_text(f, r->matrix);
		fprintf(f, ",%lld,%lld,%lld,%lld", (long long)r->rows, (long long)r->cols, (long long)r->nnz,
			(long long)r->k);
		csv_text(f, r->measurement);
		fprintf(f, ",%s", bench_status_name(r->status));
		csv_number(f, r->median_ms);
		csv_number(f, r->min_ms);
		csv_number(f, r->max_ms);
		fprintf(f, ",%d", r->repeats);
		csv_number(f, gflops(r));
		csv_number(f, r->bytes);
		csv_number(f, r->floor_ms);
		csv_number(f, r->status == BENCH_OK ? r->floor_ms / r->median_ms : NAN);
		csv_text(f, r->baseline);
		csv_number(f, r->baseline_ms);
		csv_number(f, r->speedup);
		csv_number(f, r->overhead_pct);
		csv_number(f, r->tasks_cpu >= 0 ? (double)r->tasks_cpu : NAN);
		csv_number(f, r->tasks_cuda >= 0 ? (double)r->tasks_cuda : NAN);
		csv_text(f, r->tiles);
		csv_text(f, r->extra_name);
		csv_number(f, r->extra);
		csv_text(f, r->note);
		fputc('\n', f);
	}
	return commit(f, tmp, path);
}

/* ------------------------------------------------------------------ Markdown */

static char *read_whole(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap + 1);
	while (buf) {
		size_t got = fread(buf + len, 1, cap - len, f);
		len += got;
		if (len < cap)
			break;
		char *grown = realloc(buf, 2 * cap + 1);
		if (!grown) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = grown;
		cap *= 2;
	}
	fclose(f);
	if (buf)
		buf[len] = '\0';
	return buf;
}

static void version3(char *out, size_t len, int v, int major_unit, int minor_unit)
{
	snprintf(out, len, "%d.%d.%d", v / major_unit, v % major_unit / minor_unit, v % minor_unit);
}

static void md_machine(FILE *f, const struct bench_device *d, const struct bench_options *o)
{
	fprintf(f, "- command: `%s`\n", o->command);
	if (d->gpu) {
		char sparse[24], blas[24];
		version3(sparse, sizeof sparse, d->cusparse_version, 1000, 100);
		version3(blas, sizeof blas, d->cublas_version, 10000, 100);
		fprintf(f,
			"- device: %s, %d SMs, compute capability %d.%d, %.1f GiB, L2 %.0f MB; "
			"CUDA driver %d.%d, runtime %d.%d, cuSPARSE %s, cuBLAS %s\n",
			d->name, d->sm_count, d->cc_major, d->cc_minor, d->memory_gib, (double)d->l2_bytes / 1e6,
			d->driver_version / 1000, d->driver_version % 1000 / 10, d->runtime_version / 1000,
			d->runtime_version % 1000 / 10, sparse, blas);
		fprintf(f,
			"- measured ceilings: device bandwidth **%.0f GB/s** (cudaMemcpy device to device, "
			"bytes read + written, median of 10); FP32 peak **%.0f GFLOP/s** (cublasSgemm 8192^3, "
			"CUBLAS_DEFAULT_MATH: no TF32, median of 10)\n",
			d->bandwidth_gbs, d->fp32_gflops);
	} else {
		fprintf(f, "- device: none (%s): GPU measurements skipped\n", d->gpu_note);
	}
	fprintf(f, "- host: %s, %d cores, %d OpenMP threads; StarPU %s\n", d->cpu_model, d->cpu_cores, d->omp_threads,
		d->starpu_version);
	fprintf(f,
		"- repeats: GPU kernels median of %d after %d warm-ups, L2 flushed before each timed run; task graph "
		"median of %d after up to %d calibrating warm-ups; CPU median of at least %d runs (and 0.5 s)\n",
		o->repeat, o->warmup, o->repeat, o->graph_warmup, o->cpu_repeat);
}

static void md_table(FILE *f)
{
	for (int c = 0; c < NCOLS; c++)
		fprintf(f, "| %s ", headers[c]);
	fprintf(f, "|\n");
	for (int c = 0; c < NCOLS; c++)
		fprintf(f, "| %s ", c < 1 ? "---" : "---:");
	fprintf(f, "|\n");
	struct table_row t;
	for (int i = 0; i < bench_result_count(); i++) {
		if (!is_first_of_pair(i))
			continue;
		make_row(bench_result_at(i), &t);
		for (int c = 0; c < NCOLS; c++)
			fprintf(f, "| %s ", cell(&t, c));
		fprintf(f, "|\n");
	}
}

static void md_summary(FILE *f, const char *what, struct speedup_summary s)
{
	if (s.count)
		fprintf(f, "- %s: geometric mean **%.2fx** over %d rows; minimum **%.2fx** (%s)\n", what, s.geomean,
			s.count, s.min, s.min_at);
	else
		fprintf(f, "- %s: no row with both times\n", what);
}

static void md_matrices(FILE *f, const struct bench_matrix *ms, int n, const char *skipped)
{
	fprintf(f, "\nMatrices:\n\n");
	for (int i = 0; i < n; i++) {
		const struct bench_matrix *m = &ms[i];
		double rows = (double)m->nrows, cols = (double)m->ncols, nnz = (double)m->nnz;
		fprintf(f,
			"- %s: %s; row nonzeros max %lld (mean %.1f), column nonzeros max %lld (mean %.1f); "
			"fingerprint %016llx\n",
			m->name, m->source, (long long)m->max_row_nnz, rows > 0 ? nnz / rows : 0.0,
			(long long)m->max_col_nnz, cols > 0 ? nnz / cols : 0.0, (unsigned long long)m->fingerprint);
	}
	if (skipped && *skipped)
		fprintf(f, "- skipped: %s\n", skipped);
}

static void md_failures(FILE *f)
{
	int any = 0;
	for (int i = 0; i < bench_result_count(); i++) {
		const struct bench_result *r = bench_result_at(i);
		if (r->status != BENCH_FAIL && r->status != BENCH_ERROR)
			continue;
		if (!any++)
			fprintf(f, "\nFailures (no time is reported for these):\n\n");
		fprintf(f, "- %s, K=%lld, %s: %s: %s\n", r->matrix, (long long)r->k, r->measurement,
			bench_status_name(r->status), r->note);
	}
}

static void md_notes(FILE *f)
{
	static const char *const notes[] = {
		"How to read it: times are medians in ms. speedup = cuSPARSE time / starfa time (above 1: starfa is "
		"faster), against the faster cuSPARSE SDDMM layout (B as K x cols column-major with opB = N, or as "
		"cols x K row-major with opB = T) and the fastest CSR algorithm of cusparseSpMM (row-major dense); "
		"every variant, and each of starfa's SDDMM kernel variants, is in results.csv. \"SpMM starfa\" is the "
		"SpMM codelet's CUDA implementation (spmm.starfa.tuned): the fastest of starfa's own kernel "
		"(spmm.starfa.cuda) and cusparseSpMM ALG2 and ALG3 with their plans kept (spmm.starfa.cusparse, "
		"spmm.starfa.cusparse_alg3), measured on the matrix at its first call.",
		"floor = max(bytes / bandwidth, 2*nnz*K / FP32 peak) with bytes = A rows*K*4 + B cols*K*4 + "
		"CSR nnz*8 + (rows+1)*4 + output nnz*4 (each input read once); \"of floor\" = floor / time.",
		"graph = starfa_insert_sddmm over the automatic tile grid on CUDA workers only, then starfa_wait, "
		"on the host clock; overhead = graph / kernel - 1, the kernel timed on the GPU (CUDA events); \"call\" = "
		"graph / the kernel called from the host and waited for (launch + cudaStreamSynchronize, host clock, "
		"sddmm.starfa.cuda.call), what a program without the task graph pays. CPU = starfa_cpu_sddmm (CPU SpMM: starfa_cpu_spmm, "
		"Y = S B) on every OpenMP thread / a plain `omp parallel for schedule(dynamic,64)` loop over rows.",
		"Every output is checked before it is timed: against starfa_check_sddmm / starfa_check_spmm on "
		"all rows (or a deterministic sample of rows when nnz*K is above the check limit), and starfa's "
		"GPU outputs element by element against cuSPARSE's. A row that fails shows FAIL and no time.",
	};
	fprintf(f, "\n");
	for (size_t i = 0; i < sizeof notes / sizeof notes[0]; i++)
		fprintf(f, "%s\n\n", notes[i]);
}

static void md_section(FILE *f, const struct bench_device *d, const struct bench_options *o,
		       const struct bench_matrix *ms, int n, const char *skipped)
{
	fprintf(f, "## %s — %s\n\n", d->date, d->gpu ? d->name : "no GPU");
	md_machine(f, d, o);
	fprintf(f, "\n");
	md_table(f);
	fprintf(f, "\n");
	md_summary(f, "SDDMM speedup over cuSPARSE", summarize("sddmm.starfa.cuda"));
	md_summary(f, "SpMM speedup over cuSPARSE", summarize("spmm.starfa.tuned"));
	md_summary(f, "CPU SDDMM speedup over plain OpenMP", summarize("cpu.starfa"));
	md_summary(f, "CPU SpMM speedup over plain OpenMP", summarize("cpu.spmm_starfa"));
	md_matrices(f, ms, n, skipped);
	md_failures(f);
	md_notes(f);
	fprintf(f, "\n");
}

int report_write_md(const char *path, const struct bench_device *d, const struct bench_options *o,
		    const struct bench_matrix *matrices, int nmatrices, const char *skipped)
{
	char *old = read_whole(path);
	char tmp[1100];
	FILE *f = open_temporary(path, tmp, sizeof tmp);
	if (!f) {
		free(old);
		return -1;
	}
	/* Keep everything up to the marker (the title), then this run, then the older runs. */
	const char *marker = old ? strstr(old, MD_MARKER) : NULL;
	const char *rest = old;
	if (marker) {
		const char *after = marker + strlen(MD_MARKER);
		after += *after == '\n';
		fwrite(old, 1, (size_t)(after - old), f);
		rest = after;
	} else {
		fprintf(f,
			"# starfa benchmark results\n\n"
			"Written by `bench/run.sh` (the program `bench/starfa_bench`): each run adds its section at "
			"the top, newest first; `bench/results.csv` holds every number of the latest run. Edit above "
			"the marker line only.\n\n" MD_MARKER "\n");
	}
	fprintf(f, "\n");
	md_section(f, d, o, matrices, nmatrices, skipped);
	if (rest && *rest)
		fputs(rest + (*rest == '\n'), f);
	free(old);
	return commit(f, tmp, path);
}
