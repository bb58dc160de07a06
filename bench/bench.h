/* starfa_bench: SDDMM and SpMM side by side with cuSPARSE (and a plain OpenMP loop on the
 * CPU), in one process on the same data. Declarations shared by the bench's files. */
#ifndef STARFA_BENCH_H
#define STARFA_BENCH_H

#include <config.h>

#include "starfa.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BENCH_MAX_RANKS 16
#define BENCH_MAX_DIRS 8

/* ------------------------------------------------------------------ options */

struct bench_options {
	const char *matrices[64]; /* names or file paths, in order */
	int nmatrices;
	int64_t ranks[BENCH_MAX_RANKS];
	int nranks;
	int repeat;	      /* timed GPU kernel and graph runs (median) */
	int warmup;	      /* untimed GPU kernel runs before them */
	int cpu_repeat;	      /* timed CPU runs (median) */
	int graph_warmup;     /* most untimed graph runs: they calibrate StarPU's perfmodels */
	double check_limit;   /* nnz*K above which the reference checks a sample of rows */
	double sample_budget; /* nnz*K of that sample, about */
	int quick, no_gpu, no_graph, no_cpu;
	const char *data_dirs[BENCH_MAX_DIRS];
	int ndata_dirs;
	const char *csv_path, *md_path;
	const char *command; /* the command line to record (BENCH_COMMAND or argv) */
	uint64_t seed;
	double dense_densities[8]; /* thresholds at which the SDDMM dense rows' path is also timed */
	int ndense;
	double cpu_shares[8]; /* with every worker, the SDDMM graph on split grids: the cores' share of nonzeros */
	int nshares;
	int graph_cold; /* each graph run registers its dense operands and output and brings the output home */
};

/* ------------------------------------------------------------------ matrices */

struct bench_matrix {
	char name[64];
	char source[320];	   /* file name or generator description */
	starfa_csr *csr;	   /* rows sorted, columns sorted and unique within rows */
	uint32_t *rowptr32;	   /* the kernels' 32-bit row offsets (nnz < 2^32) */
	const uint32_t *colind32;  /* csr->colind read as uint32 (same bits, all >= 0) */
	int64_t nrows, ncols, nnz; /* kept after the arrays are freed, for the report */
	int64_t max_row_nnz, max_col_nnz;
	uint64_t fingerprint; /* of the entries, whatever the order of summation: same matrix, same number */
	double load_seconds;
	int synthetic;
};

/* Loads a named matrix (a data file found in the data folders, or a generator) or a
 * file path. Returns 0, 1 when a data file is missing (note printed), -1 on error. */
int bench_matrix_load(const char *name, const struct bench_options *o, struct bench_matrix *m);
void bench_matrix_free(struct bench_matrix *m);
/* The names --matrices knows, for the usage text. */
const char *bench_matrix_names(void);

/* ------------------------------------------------------------------ results */

enum bench_status { BENCH_OK = 0, BENCH_FAIL, BENCH_ERROR, BENCH_SKIP };
const char *bench_status_name(enum bench_status s);

/* One measurement of one matrix at one rank: a row of results.csv. */
struct bench_result {
	char matrix[64];
	int64_t rows, cols, nnz, k;
	char measurement[48];
	enum bench_status status;
	double median_ms, min_ms, max_ms; /* NAN when not timed */
	int repeats;
	double flops, bytes;	       /* of one run, for GFLOP/s and the floor */
	double floor_ms;	       /* NAN when not computed */
	char baseline[48];	       /* the measurement this one is compared with ("" if none) */
	double baseline_ms, speedup;   /* speedup = baseline_ms / median_ms */
	double overhead_pct;	       /* graph time over the kernel's, minus one (graphs only) */
	int64_t tasks_cpu, tasks_cuda; /* per run (graphs only; -1 otherwise) */
	char tiles[24];
	double extra; /* measurement-specific: cuSPARSE buffer bytes, check error, ... */
	char extra_name[32];
	char note[480];
};

/* A new row for (matrix, k, measurement), every number NAN/-1, status OK. */
struct bench_result *bench_result_add(const struct bench_matrix *m, int64_t k, const char *measurement);
struct bench_result *bench_result_find(const char *matrix, int64_t k, const char *measurement);
int bench_result_count(void);
struct bench_result *bench_result_at(int i);
void bench_results_free(void);
/* Timing fields from sorted-or-not samples (ms): median, min, max. */
void bench_result_set_times(struct bench_result *r, double *ms, int n);
void bench_result_fail(struct bench_result *r, enum bench_status s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* How many FAIL or ERROR rows there are (the exit status). */
int bench_failures(void);

/* ------------------------------------------------------------------ the machine */

struct bench_device {
	int gpu;	    /* 1: a CUDA device is usable */
	char gpu_note[256]; /* why not, when gpu is 0 */
	char name[256];
	int sm_count, cc_major, cc_minor;
	double memory_gib;
	int64_t l2_bytes;
	int driver_version, runtime_version, cusparse_version, cublas_version;
	double bandwidth_gbs; /* measured: device-to-device copy, bytes read + written */
	double fp32_gflops;   /* measured: cublasSgemm, CUBLAS_DEFAULT_MATH (no TF32) */
	char cpu_model[160];
	int cpu_cores, omp_threads;
	char starpu_version[32];
	char date[40];
};

/* Each floor: max(bytes / bandwidth, flops / peak), in ms (NAN without measurements). */
double bench_floor_ms(const struct bench_device *d, double bytes, double flops);

/* ------------------------------------------------------------------ the parts */

/* GPU: probe (fills the device fields, measures bandwidth and FP32 peak), one matrix at
 * one rank (checks then timings of SDDMM and SpMM), and release of the stream, handles and
 * buffers, which must happen before StarPU starts: its shutdown resets the device. */
void gpu_probe(struct bench_device *d, const struct bench_options *o);
void gpu_bench(struct bench_device *d, const struct bench_options *o, const struct bench_matrix *m, int64_t k);
void gpu_release(void);

/* The task graph through StarPU: every rank, both worker sets, both tilings. */
void graph_bench(const struct bench_device *d, const struct bench_options *o, const struct bench_matrix *m);

/* starfa's CPU kernel against a plain OpenMP loop. */
void cpu_bench(const struct bench_device *d, const struct bench_options *o, const struct bench_matrix *m, int64_t k);

/* Table on stdout, CSV and Markdown files. */
void report_print(FILE *out, const struct bench_device *d);
int report_write_csv(const char *path, const struct bench_device *d);
int report_write_md(const char *path, const struct bench_device *d, const struct bench_options *o,
		    const struct bench_matrix *matrices, int nmatrices, const char *skipped);

/* ------------------------------------------------------------------ checks */

/* Rows a reference check visits: all of them when nnz*k is at most o->check_limit, else a
 * deterministic sample (every stride-th row, plus the longest and the last row). */
struct row_sample {
	int64_t count;
	int64_t *rows;
	int full;
};
int row_sample_make(const struct bench_matrix *m, int64_t k, const struct bench_options *o, struct row_sample *s);
void row_sample_free(struct row_sample *s);

/* SDDMM output P (nnz values) against starfa_check_sddmm on the sampled rows. 0 passes;
 * otherwise a message in msg. */
int check_sddmm(const struct bench_matrix *m, const struct row_sample *s, const float *A, const float *B, int64_t k,
		starfa_sddmm_mode mode, const float *P, double *max_error, char *msg, size_t msglen);
/* SpMM output Y = S X (m->csr->nrows x k) against starfa_check_spmm on the sampled rows. */
int check_spmm(const struct bench_matrix *m, const struct row_sample *s, const float *X, int64_t k, const float *Y,
	       double *max_error, char *msg, size_t msglen);
/* Two float32 results of the same operation, element by element. Each is within its
 * rounding bound of the exact value, so they may differ by twice that:
 *   |got - want| <= 2 * (terms + 2) * FLT_EPSILON * mag[i] + 1e-6 * |want|
 * where mag[i] is the element's sum of |products|. terms is the same for every element
 * (SDDMM: k) unless rowptr is given: then element i lies in row i / row_len and has that
 * row's nonzeros as terms (SpMM). scale (may be NULL) multiplies want and mag (scaled SDDMM
 * against an unscaled result). NaN never passes. 0 passes; otherwise a message in msg. */
int compare_outputs(const float *got, const float *want, const float *mag, const float *scale, int64_t n, int64_t terms,
		    const int64_t *rowptr, int64_t row_len, double *max_error, char *msg, size_t msglen);

/* ------------------------------------------------------------------ helpers */

double bench_now(void);
double bench_median(double *v, int n); /* sorts v */
/* Uniform in [-1, 1): a counter-based stream, the same for a seed whatever the thread count. */
void bench_fill_uniform(float *x, size_t n, uint64_t seed);
uint64_t bench_mix64(uint64_t z);
/* malloc that prints what it was for when it fails. */
void *bench_alloc(size_t count, size_t size, const char *what);
/* Host A (rows x k) and B (cols x k) of rank k for a matrix: fresh per rank, the same in
 * every part of the bench. */
int bench_factors(const struct bench_matrix *m, int64_t k, uint64_t seed, float **A, float **B);
/* 2*nnz*k: one multiply and one add per nonzero and rank. */
double bench_flops(const struct bench_matrix *m, int64_t k);
void bench_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
