/* The GPU half: starfa's CUDA kernels and cuSPARSE on the same device-resident data,
 * checked first, then timed with CUDA events (median after warm-up, L2 flushed before each
 * timed run so that every run reads its inputs from device memory, as the floor assumes).
 *
 * cuSPARSE SDDMM computes C = alpha * (op(A) op(B)) o spy(C) + beta * C. starfa's B is
 * cols x K row-major, which is the same memory as the K x cols op(B) in column-major order.
 * Both ways of describing it are timed, and the faster is the baseline:
 *   sddmm.cusparse.Bcol    B as K x cols, CUSPARSE_ORDER_COL, opB = NON_TRANSPOSE
 *   sddmm.cusparse.Btrans  B as cols x K, CUSPARSE_ORDER_ROW, opB = TRANSPOSE
 * A is rows x K, CUSPARSE_ORDER_ROW, opA = NON_TRANSPOSE; C is CSR with 32-bit indices
 * (the same arrays starfa's kernel reads); alpha 1, beta 0; cusparseSDDMM_preprocess runs
 * once, outside the timed region. cuSPARSE's SDDMM has no "scaled by S" mode, so starfa's
 * scaled SDDMM is compared with S's values times cuSPARSE's unscaled result.
 * cusparseSpMM: Y = S X with X = B (cols x K) and Y (rows x K) row-major, every CSR algorithm
 * cuSPARSE accepts for that layout; the fastest is the baseline. */
#include "bench/bench.h"

#include "gpu/sddmm.h"
#include "gpu/spmm.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusparse.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ error handling */

static char gpu_error[512]; /* the last failed call and its message */

static void set_gpu_error(const char *call, const char *what)
{
	snprintf(gpu_error, sizeof gpu_error, "%s: %s", call, what);
	fprintf(stderr, "starfa_bench: %s\n", gpu_error);
}

/* Each checks one call, records "call: message" and jumps to the function's `fail:`. */
#define CUDA_TRY(call)                                                                                                 \
	do {                                                                                                           \
		cudaError_t e_ = (call);                                                                               \
		if (e_ != cudaSuccess) {                                                                               \
			set_gpu_error(#call, cudaGetErrorString(e_));                                                  \
			goto fail;                                                                                     \
		}                                                                                                      \
	} while (0)
#define CUSPARSE_TRY(call)                                                                                             \
	do {                                                                                                           \
		cusparseStatus_t s_ = (call);                                                                          \
		if (s_ != CUSPARSE_STATUS_SUCCESS) {                                                                   \
			set_gpu_error(#call, cusparseGetErrorString(s_));                                              \
			goto fail;                                                                                     \
		}                                                                                                      \
	} while (0)
#define CUBLAS_TRY(call)                                                                                               \
	do {                                                                                                           \
		cublasStatus_t s_ = (call);                                                                            \
		if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                     \
			set_gpu_error(#call, cublasGetStatusString(s_));                                               \
			goto fail;                                                                                     \
		}                                                                                                      \
	} while (0)

/* ------------------------------------------------------------------ the device */

static struct {
	int ready;
	cudaStream_t stream;
	cudaEvent_t start, stop;
	cusparseHandle_t sparse;
	cublasHandle_t blas;
	void *flush;
	size_t flush_bytes;
} g;

/* cudaMalloc with the size and the purpose in the message when it fails. */
static int device_alloc(void *p, size_t bytes, const char *what)
{
	cudaError_t e = cudaMalloc((void **)p, bytes ? bytes : 4);
	if (e != cudaSuccess) {
		char call[160];
		snprintf(call, sizeof call, "cudaMalloc(%s, %.3f GB)", what, (double)bytes * 1e-9);
		set_gpu_error(call, cudaGetErrorString(e));
		*(void **)p = NULL;
		return -1;
	}
	return 0;
}

static void device_free(void *p)
{
	if (*(void **)p)
		cudaFree(*(void **)p);
	*(void **)p = NULL;
}

static int upload(void *dst, const void *src, size_t bytes, const char *what)
{
	if (device_alloc(dst, bytes, what) != 0)
		return -1;
	CUDA_TRY(cudaMemcpy(*(void **)dst, src, bytes, cudaMemcpyHostToDevice));
	return 0;
fail:
	return -1;
}

static int download(void *dst, const void *src, size_t bytes)
{
	CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
	return 0;
fail:
	return -1;
}

/* Writes the whole flush buffer: whatever the previous run left in L2 is evicted. */
static int flush_l2(void)
{
	CUDA_TRY(cudaMemsetAsync(g.flush, 0, g.flush_bytes, g.stream));
	return 0;
fail:
	return -1;
}

typedef int (*gpu_step)(void *arg); /* enqueues work on g.stream: 0, or -1 with gpu_error set */

/* warmup untimed runs, then repeat timed ones (ms[repeat]). prep (may be NULL) runs before
 * each, outside the timed region and before the L2 flush, so that what it writes (a peer's output,
 * cleared) is as cold as every other operand: written after the flush, cuSPARSE's output sat in L2
 * while starfa's did not (0.5-1 µs of SpMM on email-Enron). */
static int time_runs(gpu_step prep, gpu_step run, void *arg, int warmup, int repeat, double *ms)
{
	for (int i = 0; i < warmup; i++)
		if ((prep && prep(arg)) || run(arg))
			return -1;
	CUDA_TRY(cudaStreamSynchronize(g.stream));
	for (int i = 0; i < repeat; i++) {
		if ((prep && prep(arg)) || flush_l2())
			return -1;
		CUDA_TRY(cudaEventRecord(g.start, g.stream));
		if (run(arg))
			return -1;
		CUDA_TRY(cudaEventRecord(g.stop, g.stream));
		CUDA_TRY(cudaEventSynchronize(g.stop));
		float t;
		CUDA_TRY(cudaEventElapsedTime(&t, g.start, g.stop));
		ms[i] = t;
	}
	return 0;
fail:
	return -1;
}

/* ------------------------------------------------------------------ probe and peaks */

static void cpu_info(struct bench_device *d)
{
	snprintf(d->cpu_model, sizeof d->cpu_model, "unknown");
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "model name", 10)) {
			char *v = strchr(line, ':');
			if (v) {
				v += 1 + (v[1] == ' ');
				v[strcspn(v, "\n")] = '\0';
				snprintf(d->cpu_model, sizeof d->cpu_model, "%s", v);
			}
			break;
		}
	if (f)
		fclose(f);
}

struct copy_arg {
	void *dst, *src;
	size_t bytes;
};

static int run_copy(void *arg)
{
	struct copy_arg *c = arg;
	CUDA_TRY(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, g.stream));
	return 0;
fail:
	return -1;
}

/* Device bandwidth: a large device-to-device copy, bytes read plus bytes written. */
static void measure_bandwidth(struct bench_device *d, size_t free_bytes)
{
	struct copy_arg c = {NULL, NULL, (size_t)1 << 30};
	while (c.bytes > free_bytes / 4 && c.bytes > ((size_t)64 << 20))
		c.bytes /= 2;
	double ms[10];
	if (device_alloc(&c.src, c.bytes, "bandwidth source") || device_alloc(&c.dst, c.bytes, "bandwidth target"))
		goto fail;
	CUDA_TRY(cudaMemset(c.src, 1, c.bytes));
	if (time_runs(NULL, run_copy, &c, 3, 10, ms) == 0)
		d->bandwidth_gbs = 2.0 * (double)c.bytes / (bench_median(ms, 10) * 1e-3) * 1e-9;
fail:
	device_free(&c.src);
	device_free(&c.dst);
}

struct sgemm_arg {
	int n;
	float *a, *b, *c;
};

static int run_sgemm(void *arg)
{
	struct sgemm_arg *s = arg;
	const float one = 1.0f, zero = 0.0f;
	CUBLAS_TRY(cublasSgemm(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, s->n, s->n, s->n, &one, s->a, s->n, s->b, s->n, &zero,
			       s->c, s->n));
	return 0;
fail:
	return -1;
}

/* FP32 peak: cublasSgemm 8192^3 in CUBLAS_DEFAULT_MATH, which keeps float32 arithmetic
 * (TF32 tensor cores only with CUBLAS_TF32_TENSOR_OP_MATH), on random data. */
static void measure_fp32(struct bench_device *d, size_t free_bytes)
{
	struct sgemm_arg s = {8192, NULL, NULL, NULL};
	while ((size_t)3 * s.n * s.n * sizeof(float) > free_bytes / 2 && s.n > 1024)
		s.n /= 2;
	size_t count = (size_t)s.n * (size_t)s.n;
	float *host = bench_alloc(count, sizeof *host, "sgemm input");
	double ms[10];
	if (!host)
		return;
	bench_fill_uniform(host, count, 12345);
	if (upload(&s.a, host, count * sizeof *host, "sgemm A") ||
	    upload(&s.b, host, count * sizeof *host, "sgemm B") || device_alloc(&s.c, count * sizeof *host, "sgemm C"))
		goto fail;
	CUBLAS_TRY(cublasSetMathMode(g.blas, CUBLAS_DEFAULT_MATH));
	if (time_runs(NULL, run_sgemm, &s, 2, 10, ms) == 0)
		d->fp32_gflops = 2.0 * (double)s.n * s.n * s.n / (bench_median(ms, 10) * 1e-3) * 1e-9;
fail:
	free(host);
	device_free(&s.a);
	device_free(&s.b);
	device_free(&s.c);
}

/* Stream, events, library handles and the L2 flush buffer. Made when needed and given back
 * (gpu_release) before every task-graph phase: StarPU's shutdown resets the device, which
 * leaves such objects dangling. */
static int gpu_ready(const struct bench_device *d)
{
	if (g.ready)
		return 0;
	CUDA_TRY(cudaSetDevice(0));
	CUDA_TRY(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
	CUDA_TRY(cudaEventCreate(&g.start));
	CUDA_TRY(cudaEventCreate(&g.stop));
	CUSPARSE_TRY(cusparseCreate(&g.sparse));
	CUSPARSE_TRY(cusparseSetStream(g.sparse, g.stream));
	CUBLAS_TRY(cublasCreate(&g.blas));
	CUBLAS_TRY(cublasSetStream(g.blas, g.stream));
	/* Twice the L2 (at least 64 MB) written between timed runs evicts their inputs. */
	g.flush_bytes = (size_t)(2 * d->l2_bytes > (64 << 20) ? 2 * d->l2_bytes : (64 << 20));
	if (device_alloc(&g.flush, g.flush_bytes, "L2 flush buffer"))
		goto fail;
	g.ready = 1;
	return 0;
fail:
	return -1;
}

void gpu_probe(struct bench_device *d, const struct bench_options *o)
{
	cpu_info(d);
	if (o->no_gpu) {
		snprintf(d->gpu_note, sizeof d->gpu_note, "GPU measurements turned off (--no-gpu)");
		return;
	}
	int count = 0;
	cudaError_t e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count == 0) {
		snprintf(d->gpu_note, sizeof d->gpu_note, "no CUDA device (cudaGetDeviceCount: %s)",
			 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
		return;
	}
	struct cudaDeviceProp prop;
	size_t free_bytes = 0, total_bytes = 0;
	CUDA_TRY(cudaGetDeviceProperties(&prop, 0));
	d->l2_bytes = prop.l2CacheSize;
	if (gpu_ready(d) != 0)
		goto fail;
	CUDA_TRY(cudaDriverGetVersion(&d->driver_version));
	CUDA_TRY(cudaRuntimeGetVersion(&d->runtime_version));
	CUSPARSE_TRY(cusparseGetVersion(g.sparse, &d->cusparse_version));
	CUBLAS_TRY(cublasGetVersion(g.blas, &d->cublas_version));
	CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
	snprintf(d->name, sizeof d->name, "%s", prop.name);
	d->sm_count = prop.multiProcessorCount;
	d->cc_major = prop.major;
	d->cc_minor = prop.minor;
	d->memory_gib = (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0);
	d->gpu = 1;
	printf("device: %s, %d SMs, %.1f GiB, L2 %.0f MB; measuring bandwidth and FP32 peak...\n", d->name, d->sm_count,
	       d->memory_gib, (double)d->l2_bytes / 1e6);
	fflush(stdout);
	measure_bandwidth(d, free_bytes);
	measure_fp32(d, free_bytes);
	printf("device: %.0f GB/s (device-to-device copy, read + write), %.0f GFLOP/s FP32 (cublasSgemm)\n",
	       d->bandwidth_gbs, d->fp32_gflops);
	return;
fail:
	snprintf(d->gpu_note, sizeof d->gpu_note, "GPU set-up failed: %.200s", gpu_error);
	d->gpu = 0;
	gpu_release();
}

void gpu_release(void)
{
	if (g.stream) /* whatever is still queued finishes before its objects go */
		cudaStreamSynchronize(g.stream);
	device_free(&g.flush);
	if (g.blas)
		cublasDestroy(g.blas);
	if (g.sparse)
		cusparseDestroy(g.sparse);
	if (g.start)
		cudaEventDestroy(g.start);
	if (g.stop)
		cudaEventDestroy(g.stop);
	if (g.stream)
		cudaStreamDestroy(g.stream);
	memset(&g, 0, sizeof g);
}

/* ------------------------------------------------------------------ one matrix at one rank */

/* Everything one (matrix, K) needs, on both sides. Device names have a d_ prefix. */
struct gpu_case {
	const struct bench_matrix *m;
	const struct bench_device *dev;
	const struct bench_options *o;
	int64_t k, nrows, ncols, nnz;
	float *A, *B; /* host factors */
	struct row_sample sample;
	uint32_t *d_rowptr, *d_colind;
	float *d_val, *d_absval;
	float *d_A, *d_B, *d_absA, *d_absB;
	float *d_out, *d_mag;	      /* nnz: SDDMM results and the sums of |products| */
	float *h_out, *h_mag, *h_ref; /* host copies (h_ref: an accepted cuSPARSE result) */
	int have_mag, have_ref;
	uint64_t auto_pattern; /* the pattern id the unscaled AUTO kernel tuned under (0 before it ran) */
};

static int64_t sddmm_bytes(const struct gpu_case *c)
{
	return (c->nrows + c->ncols) * c->k * 4 + c->nnz * 8 + (c->nrows + 1) * 4 + c->nnz * 4;
}

static int64_t spmm_bytes(const struct gpu_case *c)
{
	return (c->ncols + c->nrows) * c->k * 4 + c->nnz * 8 + (c->nrows + 1) * 4;
}

static void record_times(struct bench_result *r, const struct gpu_case *c, double *ms, int n, double bytes)
{
	bench_result_set_times(r, ms, n);
	r->flops = bench_flops(c->m, c->k);
	r->bytes = bytes;
	r->floor_ms = bench_floor_ms(c->dev, r->bytes, r->flops);
}

static float *abs_copy(const float *x, size_t n)
{
	float *y = bench_alloc(n, sizeof *y, "absolute values");
	if (y) {
#pragma omp parallel for schedule(static)
		for (size_t i = 0; i < n; i++)
			y[i] = fabsf(x[i]);
	}
	return y;
}

static int upload_abs(void *dst, const float *x, size_t n, const char *what)
{
	float *a = abs_copy(x, n);
	int rc = a ? upload(dst, a, n * sizeof *a, what) : -1;
	free(a);
	return rc;
}

static int case_upload(struct gpu_case *c)
{
	const starfa_csr *S = c->m->csr;
	size_t nnz = (size_t)c->nnz, na = (size_t)(c->nrows * c->k), nb = (size_t)(c->ncols * c->k);
	if (upload(&c->d_rowptr, c->m->rowptr32, ((size_t)c->nrows + 1) * 4, "row offsets") ||
	    upload(&c->d_colind, c->m->colind32, nnz * 4, "column indices") ||
	    upload(&c->d_val, S->val, nnz * 4, "values") || upload_abs(&c->d_absval, S->val, nnz, "|values|") ||
	    upload(&c->d_A, c->A, na * 4, "A") || upload(&c->d_B, c->B, nb * 4, "B") ||
	    upload_abs(&c->d_absA, c->A, na, "|A|") || upload_abs(&c->d_absB, c->B, nb, "|B|") ||
	    device_alloc(&c->d_out, nnz * 4, "SDDMM output") || device_alloc(&c->d_mag, nnz * 4, "SDDMM magnitudes"))
		return -1;
	c->h_out = bench_alloc(nnz, sizeof *c->h_out, "SDDMM output copy");
	c->h_mag = bench_alloc(nnz, sizeof *c->h_mag, "SDDMM magnitudes copy");
	c->h_ref = bench_alloc(nnz, sizeof *c->h_ref, "cuSPARSE SDDMM output copy");
	return c->h_out && c->h_mag && c->h_ref ? 0 : -1;
}

static void case_free(struct gpu_case *c)
{
	device_free(&c->d_rowptr);
	device_free(&c->d_colind);
	device_free(&c->d_val);
	device_free(&c->d_absval);
	device_free(&c->d_A);
	device_free(&c->d_B);
	device_free(&c->d_absA);
	device_free(&c->d_absB);
	device_free(&c->d_out);
	device_free(&c->d_mag);
	free(c->h_out);
	free(c->h_mag);
	free(c->h_ref);
	c->h_out = c->h_mag = c->h_ref = NULL;
}

/* Fills device floats with NaN (all bits set), so an element a kernel skips fails the check. */
static int poison(float *d, size_t n)
{
	CUDA_TRY(cudaMemsetAsync(d, 0xff, n * sizeof *d, g.stream));
	return 0;
fail:
	return -1;
}

/* ------------------------------------------------------------------ SDDMM: starfa */

struct starfa_sddmm_arg {
	struct gpu_case *c;
	int scaled;
	starfa_cuda_sddmm_variant variant; /* AUTO: starfa_cuda_sddmm_tuned, what the codelet runs */
	uint64_t pattern;                  /* the id the tuned kernel keeps the matrix's dense-row order by */
	double density;                    /* > 0: the dense rows' path at this threshold */
	int by_column;                     /* A's rows staged, the nonzeros by column (its order kept by pattern) */
};

/* The by-column kernel on the case, its order kept by the pattern id; *rows (may be NULL): the block height. */
static starfa_gpu_status run_by_column(const struct starfa_sddmm_arg *s, int64_t *rows)
{
	const struct gpu_case *c = s->c;
	return starfa_cuda_sddmm_by_column_run(s->pattern, 0, c->nrows, c->ncols, c->nnz, c->d_rowptr, c->d_colind, c->d_val,
					       c->d_A, c->k, c->d_B, c->k, c->k, s->scaled, 1.0f, 0.0f, c->d_out, g.stream,
					       rows);
}

static int run_starfa_sddmm(void *arg)
{
	struct starfa_sddmm_arg *s = arg;
	struct gpu_case *c = s->c;
	if (s->by_column) {
		starfa_gpu_status st = run_by_column(s, NULL);
		if (st.call) {
			set_gpu_error("starfa_cuda_sddmm_by_column_run", starfa_gpu_status_string(st));
			goto fail;
		}
	} else if (s->density > 0) {
		starfa_gpu_status st = starfa_cuda_sddmm_dense_rows_run(
			g.blas, s->pattern, s->density, 0, c->nrows, c->ncols, c->nnz, c->d_rowptr, c->d_colind, c->d_val,
			c->d_A, c->k, c->d_B, c->k, c->k, s->scaled, 1.0f, 0.0f, c->d_out, g.stream, NULL);
		if (st.call) {
			set_gpu_error("starfa_cuda_sddmm_dense_rows_run", starfa_gpu_status_string(st));
			goto fail;
		}
	} else if (s->variant == STARFA_CUDA_SDDMM_AUTO) {
		starfa_gpu_status st = starfa_cuda_sddmm_tuned(g.blas, s->pattern, c->nrows, c->ncols, c->nnz, c->d_rowptr,
							       c->d_colind, c->d_val, c->d_A, c->k, c->d_B, c->k, c->k,
							       s->scaled, 1.0f, 0.0f, c->d_out, g.stream);
		if (st.call) {
			set_gpu_error("starfa_cuda_sddmm_tuned", starfa_gpu_status_string(st));
			goto fail;
		}
	} else
		CUDA_TRY(starfa_cuda_sddmm_variant_run(s->variant, c->nrows, c->ncols, c->nnz, c->d_rowptr, c->d_colind,
						       c->d_val, c->d_A, c->k, c->d_B, c->k, c->k, s->scaled, 1.0f, 0.0f, c->d_out,
						       g.stream));
	return 0;
fail:
	return -1;
}

/* One checked run of starfa's kernel into c->h_out. 0 passed; 1 failed its check or cannot
 * run this tile (r marked); -1 error. */
static int starfa_sddmm_checked(struct gpu_case *c, const struct starfa_sddmm_arg *arg, struct bench_result *r)
{
	int scaled = arg->scaled;
	char msg[400];
	double err;
	if (poison(c->d_out, (size_t)c->nnz))
		return -1;
	if (arg->by_column) {
		int64_t rows = 0;
		starfa_gpu_status st = run_by_column(arg, &rows);
		if (st.call && st.cuda == cudaErrorInvalidValue) {
			(void)cudaGetLastError();
			bench_result_fail(r, BENCH_SKIP, "%s", st.call);
			return 1;
		}
		if (st.call) {
			set_gpu_error("starfa_cuda_sddmm_by_column_run", starfa_gpu_status_string(st));
			return -1;
		}
		snprintf(r->note, sizeof r->note, "blocks of %lld rows", (long long)rows);
	} else if (arg->variant != STARFA_CUDA_SDDMM_AUTO && arg->density <= 0) {
		/* A variant that does not fit this tile says so at launch, before running anything. */
		cudaError_t e = starfa_cuda_sddmm_variant_run(arg->variant, c->nrows, c->ncols, c->nnz, c->d_rowptr,
							      c->d_colind, c->d_val, c->d_A, c->k, c->d_B, c->k, c->k,
							      scaled, 1.0f, 0.0f, c->d_out, g.stream);
		if (e == cudaErrorInvalidValue) {
			(void)cudaGetLastError();
			bench_result_fail(r, BENCH_SKIP, "this variant cannot run this matrix at this rank");
			return 1;
		}
		CUDA_TRY(e);
	} else if (run_starfa_sddmm((void *)arg)) {
		return -1;
	}
	CUDA_TRY(cudaStreamSynchronize(g.stream));
	if (download(c->h_out, c->d_out, (size_t)c->nnz * 4))
		return -1;
	starfa_sddmm_mode mode = scaled ? STARFA_SDDMM_SCALED : STARFA_SDDMM_PATTERN;
	if (check_sddmm(c->m, &c->sample, c->A, c->B, c->k, mode, c->h_out, &err, msg, sizeof msg)) {
		bench_result_fail(r, BENCH_FAIL, "%s", msg);
		return 1;
	}
	snprintf(r->extra_name, sizeof r->extra_name, "check_max_error");
	r->extra = err;
	if (c->have_ref && c->have_mag &&
	    compare_outputs(c->h_out, c->h_ref, c->h_mag, scaled ? c->m->csr->val : NULL, c->nnz, c->k, NULL, 1, &err,
			    msg, sizeof msg)) {
		bench_result_fail(r, BENCH_FAIL, "against cuSPARSE%s: %s", scaled ? " (times S)" : "", msg);
		return 1;
	}
	if (!(c->have_ref && c->have_mag))
		snprintf(r->note, sizeof r->note, "not compared with cuSPARSE (no cuSPARSE result)");
	return 0;
fail:
	return -1;
}

/* How many rows the dense rows' path takes on the case at this threshold (0: the model's): one more run,
 * which reports it. Fails r and returns 1 on an error. */
static int dense_row_count(struct gpu_case *c, uint64_t pattern, double density, int scaled, int64_t *dense,
			   struct bench_result *r)
{
	starfa_gpu_status st = starfa_cuda_sddmm_dense_rows_run(g.blas, pattern, density, 0, c->nrows, c->ncols, c->nnz,
								c->d_rowptr, c->d_colind, c->d_val, c->d_A, c->k, c->d_B,
								c->k, c->k, scaled, 1.0f, 0.0f, c->d_out, g.stream, dense);
	if (st.call) {
		bench_result_fail(r, BENCH_ERROR, "%s", starfa_gpu_status_string(st));
		return 1;
	}
	return 0;
}

/* Puts text (printf-formatted) before r's note, "; " between them, the old note cut to 150 characters. */
static void note_before(struct bench_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_before(struct bench_result *r, const char *fmt, ...)
{
	char note[sizeof r->note], text[sizeof r->note - 160]; /* with "; " and 150 of the old note, it fits */
	snprintf(note, sizeof note, "%s", r->note);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	snprintf(r->note, sizeof r->note, "%s%s%.150s", text, note[0] ? "; " : "", note);
}

/* starfa's kernel as the codelet runs it (AUTO), or one variant of it. */
static void bench_starfa_sddmm(struct gpu_case *c, int scaled, starfa_cuda_sddmm_variant variant, double density,
			       int by_column)
{
	char name[64];
	if (by_column)
		snprintf(name, sizeof name, "sddmm.starfa.cuda.by_column");
	else if (density > 0)
		snprintf(name, sizeof name, "sddmm.starfa.cuda.dense_rows@%.2f", density);
	else if (variant == STARFA_CUDA_SDDMM_AUTO)
		snprintf(name, sizeof name, "sddmm.starfa.cuda%s", scaled ? ".scaled" : "");
	else
		snprintf(name, sizeof name, "sddmm.starfa.cuda.%s", starfa_cuda_sddmm_variant_name(variant));
	struct bench_result *r = bench_result_add(c->m, c->k, name);
	static uint64_t patterns; /* one id per matrix and rank: the tuned kernel's kept row order */
	struct starfa_sddmm_arg arg = {c, scaled, variant, ++patterns, density, by_column};
	int rc = starfa_sddmm_checked(c, &arg, r);
	if (rc < 0)
		bench_result_fail(r, BENCH_ERROR, "%s", gpu_error);
	if (rc != 0)
		return;
	if (variant == STARFA_CUDA_SDDMM_AUTO && !scaled && density <= 0 && !by_column)
		c->auto_pattern = arg.pattern; /* checked, so tuned under this id */
	starfa_cuda_sddmm_variant ran = variant;
	if (density > 0) { /* how many rows went dense */
		int64_t dense = 0;
		if (dense_row_count(c, arg.pattern, density, scaled, &dense, r))
			return;
		note_before(r, "%lld dense rows", (long long)dense);
	}
	if (variant == STARFA_CUDA_SDDMM_AUTO && !by_column) { /* which variant the automatic choice ran */
		ran = starfa_cuda_sddmm_choose(c->nrows, c->ncols, c->nnz, c->k, c->d_A, c->k, c->d_B, c->k);
		char note[sizeof r->note];
		snprintf(note, sizeof note, "%s", r->note);
		const char *kept = starfa_cuda_sddmm_tuned_kept(arg.pattern, c->k);
		int64_t dense = 0; /* how many rows the tuned kernel computes as a dense product */
		if (kept && !strcmp(kept, "vwarp+dense rows") && dense_row_count(c, arg.pattern, 0.0, scaled, &dense, r))
			return;
		snprintf(r->note, sizeof r->note, "timed choice %s (fixed rule: %s)%s%.150s", kept ? kept : "none",
			 starfa_cuda_sddmm_variant_name(ran), note[0] ? "; " : "", note);
		if (dense) {
			snprintf(note, sizeof note, "%s", r->note);
			snprintf(r->note, sizeof r->note, "%.200s; %lld dense rows (density >= %.3f)", note, (long long)dense,
				 starfa_cuda_sddmm_dense_rows_density(c->k));
		}
	}
	if (ran == STARFA_CUDA_SDDMM_PANEL) { /* the L2 model's panels, for judging it */
		int64_t cols = starfa_cuda_sddmm_panel_cols(c->ncols, c->k);
		note_before(r, "%lld panels of %lld columns", (long long)(cols > 0 ? (c->ncols + cols - 1) / cols : 0),
			    (long long)cols);
	}
	double *ms = bench_alloc((size_t)c->o->repeat, sizeof *ms, "timings");
	if (!ms || time_runs(NULL, run_starfa_sddmm, &arg, c->o->warmup, c->o->repeat, ms))
		bench_result_fail(r, BENCH_ERROR, "%s", ms ? gpu_error : "out of memory");
	else
		record_times(r, c, ms, c->o->repeat, (double)sddmm_bytes(c));
	free(ms);
}

/* starfa's kernel (AUTO) called as a program without the task graph would call it: launched, then
 * waited for with cudaStreamSynchronize, on the host clock, back to back and without flushing L2 (as the
 * graph's runs go). Beside the event-timed kernel, which counts only the GPU's time, this counts the
 * launch and the wait that any host call pays: the graph's overhead is also reported over it. */
static void bench_starfa_sddmm_call(struct gpu_case *c)
{
	struct bench_result *r = bench_result_add(c->m, c->k, "sddmm.starfa.cuda.call");
	/* the AUTO row's pattern id, so that the call runs the kernel that row tuned and timed (an id of its
	 * own would tune afresh, and could keep another variant) */
	static uint64_t patterns = 1ull << 40; /* ids apart from bench_starfa_sddmm's, where that row failed */
	struct starfa_sddmm_arg arg = {c, 0, STARFA_CUDA_SDDMM_AUTO, c->auto_pattern ? c->auto_pattern : ++patterns, 0, 0};
	int rc = starfa_sddmm_checked(c, &arg, r);
	if (rc < 0)
		bench_result_fail(r, BENCH_ERROR, "%s", gpu_error);
	if (rc != 0)
		return;
	double *ms = bench_alloc((size_t)c->o->repeat, sizeof *ms, "timings");
	if (!ms) {
		bench_result_fail(r, BENCH_ERROR, "out of memory");
		return;
	}
	for (int i = 0; i < c->o->warmup && !rc; i++)
		rc = run_starfa_sddmm(&arg);
	for (int i = 0; i < c->o->repeat && !rc; i++) {
		CUDA_TRY(cudaStreamSynchronize(g.stream));
		double t0 = bench_now();
		if ((rc = run_starfa_sddmm(&arg)) != 0)
			break;
		CUDA_TRY(cudaStreamSynchronize(g.stream));
		ms[i] = (bench_now() - t0) * 1e3;
	}
	if (rc)
		goto fail;
	record_times(r, c, ms, c->o->repeat, (double)sddmm_bytes(c));
	/* before starfa_sddmm_checked's note ("not compared with cuSPARSE ...") */
	note_before(r, "host clock: launch + cudaStreamSynchronize, L2 not flushed");
	free(ms);
	return;
fail:
	bench_result_fail(r, BENCH_ERROR, "%s", gpu_error);
	free(ms);
}

/* ------------------------------------------------------------------ SDDMM: cuSPARSE */

enum { SDDMM_BCOL = 0, SDDMM_BTRANS = 1, SDDMM_VARIANTS };
static const char *const sddmm_variant_name[SDDMM_VARIANTS] = {"sddmm.cusparse.Bcol", "sddmm.cusparse.Btrans"};

struct cusparse_sddmm {
	cusparseDnMatDescr_t A, B;
	cusparseSpMatDescr_t C;
	cusparseOperation_t opB;
	float *values;
	int64_t nnz;
	void *buffer;
	size_t buffer_bytes;
};

static void sddmm_destroy(struct cusparse_sddmm *s)
{
	if (s->A)
		cusparseDestroyDnMat(s->A);
	if (s->B)
		cusparseDestroyDnMat(s->B);
	if (s->C)
		cusparseDestroySpMat(s->C);
	device_free(&s->buffer);
	memset(s, 0, sizeof *s);
}

/* Descriptors, buffer and preprocessing for one layout of B. Returns 0, 1 when cuSPARSE
 * does not support the layout (gpu_error says so), -1 on error. */
static int sddmm_setup(struct gpu_case *c, int variant, float *A, float *B, float *values, struct cusparse_sddmm *s)
{
	const float alpha = 1.0f, beta = 0.0f;
	const cusparseOperation_t opA = CUSPARSE_OPERATION_NON_TRANSPOSE;
	memset(s, 0, sizeof *s);
	s->values = values;
	s->nnz = c->nnz;
	CUSPARSE_TRY(cusparseCreateDnMat(&s->A, c->nrows, c->k, c->k, A, CUDA_R_32F, CUSPARSE_ORDER_ROW));
	if (variant == SDDMM_BCOL) {
		s->opB = CUSPARSE_OPERATION_NON_TRANSPOSE;
		CUSPARSE_TRY(cusparseCreateDnMat(&s->B, c->k, c->ncols, c->k, B, CUDA_R_32F, CUSPARSE_ORDER_COL));
	} else {
		s->opB = CUSPARSE_OPERATION_TRANSPOSE;
		CUSPARSE_TRY(cusparseCreateDnMat(&s->B, c->ncols, c->k, c->k, B, CUDA_R_32F, CUSPARSE_ORDER_ROW));
	}
	CUSPARSE_TRY(cusparseCreateCsr(&s->C, c->nrows, c->ncols, c->nnz, c->d_rowptr, c->d_colind, values,
				       CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
	cusparseStatus_t st = cusparseSDDMM_bufferSize(g.sparse, opA, s->opB, &alpha, s->A, s->B, &beta, s->C,
						       CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT, &s->buffer_bytes);
	if (st == CUSPARSE_STATUS_NOT_SUPPORTED) {
		set_gpu_error("cusparseSDDMM_bufferSize", cusparseGetErrorString(st));
		return 1;
	}
	CUSPARSE_TRY(st);
	if (device_alloc(&s->buffer, s->buffer_bytes, "cusparseSDDMM buffer"))
		return -1;
	st = cusparseSDDMM_preprocess(g.sparse, opA, s->opB, &alpha, s->A, s->B, &beta, s->C, CUDA_R_32F,
				      CUSPARSE_SDDMM_ALG_DEFAULT, s->buffer);
	if (st == CUSPARSE_STATUS_NOT_SUPPORTED) {
		set_gpu_error("cusparseSDDMM_preprocess", cusparseGetErrorString(st));
		return 1;
	}
	CUSPARSE_TRY(st);
	return 0;
fail:
	return -1;
}

/* beta is 0, but C's values are cleared anyway: cuSPARSE does not promise to ignore them. */
static int prep_sddmm(void *arg)
{
	struct cusparse_sddmm *s = arg;
	CUDA_TRY(cudaMemsetAsync(s->values, 0, (size_t)s->nnz * sizeof(float), g.stream));
	return 0;
fail:
	return -1;
}

static int run_cusparse_sddmm(void *arg)
{
	struct cusparse_sddmm *s = arg;
	const float alpha = 1.0f, beta = 0.0f;
	CUSPARSE_TRY(cusparseSDDMM(g.sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, s->opB, &alpha, s->A, s->B, &beta, s->C,
				   CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT, s->buffer));
	return 0;
fail:
	return -1;
}

static int run_once(gpu_step prep, gpu_step run, void *arg)
{
	if ((prep && prep(arg)) || run(arg))
		return -1;
	CUDA_TRY(cudaStreamSynchronize(g.stream));
	return 0;
fail:
	return -1;
}

/* Sums of |products| per nonzero (cuSPARSE on |A| and |B|): the scale of each element's
 * rounding error, for comparing two results element by element. */
static void sddmm_magnitudes(struct gpu_case *c)
{
	for (int v = 0; v < SDDMM_VARIANTS && !c->have_mag; v++) {
		struct cusparse_sddmm s;
		if (sddmm_setup(c, v, c->d_absA, c->d_absB, c->d_mag, &s) == 0 &&
		    run_once(prep_sddmm, run_cusparse_sddmm, &s) == 0 &&
		    download(c->h_mag, c->d_mag, (size_t)c->nnz * 4) == 0)
			c->have_mag = 1;
		sddmm_destroy(&s);
	}
	if (!c->have_mag)
		bench_note("%s k=%lld: no magnitudes from cuSPARSE (%s): starfa is checked against the reference only",
			   c->m->name, (long long)c->k, gpu_error);
}

/* One layout: checked (reference, then kept as the element-by-element reference), timed. */
static void bench_cusparse_sddmm_variant(struct gpu_case *c, int variant)
{
	struct bench_result *r = bench_result_add(c->m, c->k, sddmm_variant_name[variant]);
	struct cusparse_sddmm s;
	char msg[400];
	double err, *ms = NULL;
	int rc = sddmm_setup(c, variant, c->d_A, c->d_B, c->d_out, &s);
	if (rc > 0) {
		bench_result_fail(r, BENCH_SKIP, "not supported by this cuSPARSE (%s)", gpu_error);
		goto out;
	}
	r->extra = (double)s.buffer_bytes;
	snprintf(r->extra_name, sizeof r->extra_name, "buffer_bytes");
	/* Into h_out first (starfa's later runs overwrite it): only an accepted result becomes h_ref.
	 * No NaN poison here: prep_sddmm clears C, which cuSPARSE needs. */
	if (rc < 0 || run_once(prep_sddmm, run_cusparse_sddmm, &s) || download(c->h_out, c->d_out, (size_t)c->nnz * 4))
		goto error;
	if (check_sddmm(c->m, &c->sample, c->A, c->B, c->k, STARFA_SDDMM_PATTERN, c->h_out, &err, msg, sizeof msg)) {
		bench_result_fail(r, BENCH_FAIL, "%s", msg);
		goto out;
	}
	if (!c->have_ref) {
		memcpy(c->h_ref, c->h_out, (size_t)c->nnz * sizeof *c->h_out);
		c->have_ref = 1;
	}
	ms = bench_alloc((size_t)c->o->repeat, sizeof *ms, "timings");
	if (!ms || time_runs(prep_sddmm, run_cusparse_sddmm, &s, c->o->warmup, c->o->repeat, ms))
		goto error;
	record_times(r, c, ms, c->o->repeat, (double)sddmm_bytes(c));
	goto out;
error:
	bench_result_fail(r, BENCH_ERROR, "%s", gpu_error);
out:
	free(ms);
	sddmm_destroy(&s);
}

/* The fastest of cuSPARSE's rows (names) is the baseline of each of ours. */
static void set_baselines(const struct gpu_case *c, const char *const *names, int count, const char **ours, int nours)
{
	struct bench_result *best = NULL;
	for (int v = 0; v < count; v++) {
		struct bench_result *r = bench_result_find(c->m->name, c->k, names[v]);
		if (r && r->status == BENCH_OK && r->repeats > 0 && (!best || r->median_ms < best->median_ms))
			best = r;
	}
	for (int i = 0; i < nours && best; i++) {
		struct bench_result *r = bench_result_find(c->m->name, c->k, ours[i]);
		if (!r)
			continue;
		snprintf(r->baseline, sizeof r->baseline, "%s", best->measurement);
		r->baseline_ms = best->median_ms;
		if (r->status == BENCH_OK && r->repeats > 0)
			r->speedup = best->median_ms / r->median_ms;
	}
}

static void bench_sddmm(struct gpu_case *c)
{
	sddmm_magnitudes(c);
	/* cuSPARSE first: its accepted output is what starfa's is compared with, element by element. */
	for (int v = 0; v < SDDMM_VARIANTS; v++)
		bench_cusparse_sddmm_variant(c, v);
	bench_starfa_sddmm(c, 0, STARFA_CUDA_SDDMM_AUTO, 0, 0);
	bench_starfa_sddmm(c, 1, STARFA_CUDA_SDDMM_AUTO, 0, 0);
	bench_starfa_sddmm_call(c);
	/* Each kernel variant alone, so that the automatic choice can be judged. */
	const char *ours[3 + STARFA_CUDA_SDDMM_VARIANTS + 8];
	char names[STARFA_CUDA_SDDMM_VARIANTS][64];
	int nours = 0;
	ours[nours++] = "sddmm.starfa.cuda";
	ours[nours++] = "sddmm.starfa.cuda.scaled";
	for (int v = STARFA_CUDA_SDDMM_AUTO + 1; v < STARFA_CUDA_SDDMM_VARIANTS; v++) {
		bench_starfa_sddmm(c, 0, (starfa_cuda_sddmm_variant)v, 0, 0);
		snprintf(names[v], sizeof names[v], "sddmm.starfa.cuda.%s",
			 starfa_cuda_sddmm_variant_name((starfa_cuda_sddmm_variant)v));
		ours[nours++] = names[v];
	}
	bench_starfa_sddmm(c, 0, STARFA_CUDA_SDDMM_AUTO, 0, 1);
	ours[nours++] = "sddmm.starfa.cuda.by_column";
	/* The dense rows' path at other thresholds than the model's, where it runs beside the virtual-warp
	 * kernel, so that the model's threshold can be judged. */
	char dense_names[8][64];
	if (starfa_cuda_sddmm_choose(c->nrows, c->ncols, c->nnz, c->k, c->d_A, c->k, c->d_B, c->k) ==
	    STARFA_CUDA_SDDMM_VWARP)
		for (int i = 0; i < c->o->ndense; i++) {
			bench_starfa_sddmm(c, 0, STARFA_CUDA_SDDMM_VWARP, c->o->dense_densities[i], 0);
			snprintf(dense_names[i], sizeof dense_names[i], "sddmm.starfa.cuda.dense_rows@%.2f",
				 c->o->dense_densities[i]);
			ours[nours++] = dense_names[i];
		}
	set_baselines(c, sddmm_variant_name, SDDMM_VARIANTS, ours, nours);
	starfa_gpu_status st = starfa_cuda_sddmm_release(); /* the dense-row orders and scratch kept for c */
	if (st.call)
		fprintf(stderr, "starfa_bench: starfa_cuda_sddmm_release: %s\n", starfa_gpu_status_string(st));
}

/* ------------------------------------------------------------------ SpMM */

static const struct {
	const char *name;
	cusparseSpMMAlg_t alg;
	int preprocess_each; /* ALG3 with its preprocessing step inside every timed run: what a caller pays
				that cannot keep the preprocessed buffer from one call to the next */
} spmm_algs[] = {
	{"spmm.cusparse.default", CUSPARSE_SPMM_ALG_DEFAULT, 0},
	{"spmm.cusparse.csr_alg1", CUSPARSE_SPMM_CSR_ALG1, 0},
	{"spmm.cusparse.csr_alg2", CUSPARSE_SPMM_CSR_ALG2, 0},
	{"spmm.cusparse.csr_alg3", CUSPARSE_SPMM_CSR_ALG3, 0},
	{"spmm.cusparse.csr_alg3_prep", CUSPARSE_SPMM_CSR_ALG3, 1},
};
#define SPMM_ALGS ((int)(sizeof spmm_algs / sizeof spmm_algs[0]))

struct spmm_case {
	struct gpu_case *c;
	float *d_Y, *d_Ymag;
	float *h_Y, *h_Ymag, *h_ref;
	int have_mag, have_ref;
	uint64_t serial; /* the pattern id starfa_cuda_spmm keeps cuSPARSE's state under */
};

struct cusparse_spmm {
	cusparseSpMatDescr_t S;
	cusparseDnMatDescr_t X, Y;
	cusparseSpMMAlg_t alg;
	int preprocess_each; /* ALG3: preprocess again before every run */
	float *y;
	size_t y_count;
	void *buffer;
	size_t buffer_bytes;
};

static void spmm_destroy(struct cusparse_spmm *s)
{
	if (s->S)
		cusparseDestroySpMat(s->S);
	if (s->X)
		cusparseDestroyDnMat(s->X);
	if (s->Y)
		cusparseDestroyDnMat(s->Y);
	device_free(&s->buffer);
	memset(s, 0, sizeof *s);
}

/* 0, 1 when cuSPARSE does not support the algorithm here, -1 on error. */
static int spmm_setup(struct gpu_case *c, cusparseSpMMAlg_t alg, float *val, float *X, float *Y,
		      struct cusparse_spmm *s)
{
	const float alpha = 1.0f, beta = 0.0f;
	const cusparseOperation_t op = CUSPARSE_OPERATION_NON_TRANSPOSE;
	memset(s, 0, sizeof *s);
	s->alg = alg;
	s->y = Y;
	s->y_count = (size_t)(c->nrows * c->k);
	CUSPARSE_TRY(cusparseCreateCsr(&s->S, c->nrows, c->ncols, c->nnz, c->d_rowptr, c->d_colind, val,
				       CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
	CUSPARSE_TRY(cusparseCreateDnMat(&s->X, c->ncols, c->k, c->k, X, CUDA_R_32F, CUSPARSE_ORDER_ROW));
	CUSPARSE_TRY(cusparseCreateDnMat(&s->Y, c->nrows, c->k, c->k, Y, CUDA_R_32F, CUSPARSE_ORDER_ROW));
	cusparseStatus_t st = cusparseSpMM_bufferSize(g.sparse, op, op, &alpha, s->S, s->X, &beta, s->Y, CUDA_R_32F,
						      alg, &s->buffer_bytes);
	if (st == CUSPARSE_STATUS_NOT_SUPPORTED) {
		set_gpu_error("cusparseSpMM_bufferSize", cusparseGetErrorString(st));
		return 1;
	}
	CUSPARSE_TRY(st);
	if (device_alloc(&s->buffer, s->buffer_bytes, "cusparseSpMM buffer"))
		return -1;
	if (alg == CUSPARSE_SPMM_CSR_ALG3) { /* the one algorithm with a preprocessing step */
		st = cusparseSpMM_preprocess(g.sparse, op, op, &alpha, s->S, s->X, &beta, s->Y, CUDA_R_32F, alg,
					     s->buffer);
		if (st == CUSPARSE_STATUS_NOT_SUPPORTED) {
			set_gpu_error("cusparseSpMM_preprocess", cusparseGetErrorString(st));
			return 1;
		}
		CUSPARSE_TRY(st);
	}
	return 0;
fail:
	return -1;
}

static int prep_spmm(void *arg)
{
	struct cusparse_spmm *s = arg;
	CUDA_TRY(cudaMemsetAsync(s->y, 0, s->y_count * sizeof(float), g.stream));
	return 0;
fail:
	return -1;
}

static int run_cusparse_spmm(void *arg)
{
	struct cusparse_spmm *s = arg;
	const float alpha = 1.0f, beta = 0.0f;
	const cusparseOperation_t op = CUSPARSE_OPERATION_NON_TRANSPOSE;
	if (s->preprocess_each)
		CUSPARSE_TRY(cusparseSpMM_preprocess(g.sparse, op, op, &alpha, s->S, s->X, &beta, s->Y, CUDA_R_32F, s->alg,
						     s->buffer));
	CUSPARSE_TRY(cusparseSpMM(g.sparse, op, op, &alpha, s->S, s->X, &beta, s->Y, CUDA_R_32F, s->alg, s->buffer));
	return 0;
fail:
	return -1;
}

static int spmm_case_init(struct spmm_case *sc, struct gpu_case *c)
{
	size_t n = (size_t)(c->nrows * c->k);
	memset(sc, 0, sizeof *sc);
	sc->c = c;
	if (device_alloc(&sc->d_Y, n * 4, "SpMM output") || device_alloc(&sc->d_Ymag, n * 4, "SpMM magnitudes"))
		return -1;
	sc->h_Y = bench_alloc(n, sizeof *sc->h_Y, "SpMM output copy");
	sc->h_Ymag = bench_alloc(n, sizeof *sc->h_Ymag, "SpMM magnitudes copy");
	sc->h_ref = bench_alloc(n, sizeof *sc->h_ref, "cuSPARSE SpMM output copy");
	return sc->h_Y && sc->h_Ymag && sc->h_ref ? 0 : -1;
}

static void spmm_case_free(struct spmm_case *sc)
{
	device_free(&sc->d_Y);
	device_free(&sc->d_Ymag);
	free(sc->h_Y);
	free(sc->h_Ymag);
	free(sc->h_ref);
}

static void spmm_magnitudes(struct spmm_case *sc)
{
	struct gpu_case *c = sc->c;
	struct cusparse_spmm s;
	if (spmm_setup(c, CUSPARSE_SPMM_ALG_DEFAULT, c->d_absval, c->d_absB, sc->d_Ymag, &s) == 0 &&
	    run_once(prep_spmm, run_cusparse_spmm, &s) == 0 &&
	    download(sc->h_Ymag, sc->d_Ymag, (size_t)(c->nrows * c->k) * 4) == 0)
		sc->have_mag = 1;
	else
		bench_note("%s k=%lld: no SpMM magnitudes from cuSPARSE (%s): "
			   "starfa is checked against the reference only",
			   c->m->name, (long long)c->k, gpu_error);
	spmm_destroy(&s);
}

/* An SpMM output in sc->h_Y against the reference, and against cuSPARSE's when asked.
 * 0 passed, 1 failed (r marked). */
static int spmm_check(struct spmm_case *sc, const float *Y, int against_ref, struct bench_result *r)
{
	struct gpu_case *c = sc->c;
	char msg[400];
	double err;
	if (check_spmm(c->m, &c->sample, c->B, c->k, Y, &err, msg, sizeof msg)) {
		bench_result_fail(r, BENCH_FAIL, "%s", msg);
		return 1;
	}
	snprintf(r->extra_name, sizeof r->extra_name, "check_max_error");
	r->extra = err;
	if (against_ref && sc->have_ref && sc->have_mag &&
	    compare_outputs(Y, sc->h_ref, sc->h_Ymag, NULL, (int64_t)(c->nrows * c->k), -1, c->m->csr->rowptr, c->k,
			    &err, msg, sizeof msg)) {
		bench_result_fail(r, BENCH_FAIL, "against cuSPARSE: %s", msg);
		return 1;
	}
	return 0;
}

static void bench_cusparse_spmm_alg(struct spmm_case *sc, int a)
{
	struct gpu_case *c = sc->c;
	struct bench_result *r = bench_result_add(c->m, c->k, spmm_algs[a].name);
	struct cusparse_spmm s;
	double *ms = NULL;
	size_t n = (size_t)(c->nrows * c->k);
	int rc = spmm_setup(c, spmm_algs[a].alg, c->d_val, c->d_B, sc->d_Y, &s);
	s.preprocess_each = spmm_algs[a].preprocess_each;
	if (rc > 0) {
		bench_result_fail(r, BENCH_SKIP, "not supported by this cuSPARSE for this layout (%s)", gpu_error);
		goto out;
	}
	if (rc < 0 || run_once(prep_spmm, run_cusparse_spmm, &s) || download(sc->h_Y, sc->d_Y, n * 4))
		goto error;
	if (spmm_check(sc, sc->h_Y, 0, r))
		goto out;
	snprintf(r->extra_name, sizeof r->extra_name, "buffer_bytes"); /* rather than the check's error */
	r->extra = (double)s.buffer_bytes;
	if (!sc->have_ref) { /* the first accepted cuSPARSE result is the one starfa's is compared with */
		memcpy(sc->h_ref, sc->h_Y, n * sizeof *sc->h_Y);
		sc->have_ref = 1;
	}
	ms = bench_alloc((size_t)c->o->repeat, sizeof *ms, "timings");
	if (!ms || time_runs(prep_spmm, run_cusparse_spmm, &s, c->o->warmup, c->o->repeat, ms))
		goto error;
	record_times(r, c, ms, c->o->repeat, (double)spmm_bytes(c));
	goto out;
error:
	bench_result_fail(r, BENCH_ERROR, "%s", gpu_error);
out:
	free(ms);
	spmm_destroy(&s);
}

struct starfa_spmm_arg {
	struct spmm_case *sc;
	starfa_spmm_impl impl;
};

static int run_starfa_spmm(void *arg)
{
	struct starfa_spmm_arg *s = arg;
	struct gpu_case *c = s->sc->c;
	starfa_gpu_status st = starfa_cuda_spmm(s->impl, g.sparse, s->sc->serial, c->nrows, c->ncols, c->nnz, c->d_rowptr, c->d_colind,
						c->d_val, c->d_B, c->k, c->k, 0, s->sc->d_Y, c->k, g.stream);
	if (st.call) {
		set_gpu_error("starfa_cuda_spmm", starfa_gpu_status_string(st));
		return -1;
	}
	return 0;
}

static void bench_starfa_spmm(struct spmm_case *sc, starfa_spmm_impl impl, const char *name)
{
	struct gpu_case *c = sc->c;
	struct bench_result *r = bench_result_add(c->m, c->k, name);
	struct starfa_spmm_arg arg = {sc, impl};
	size_t n = (size_t)(c->nrows * c->k);
	double *ms = NULL;
	if (poison(sc->d_Y, n) || run_once(NULL, run_starfa_spmm, &arg) || download(sc->h_Y, sc->d_Y, n * 4))
		goto error;
	if (spmm_check(sc, sc->h_Y, 1, r))
		goto out;
	ms = bench_alloc((size_t)c->o->repeat, sizeof *ms, "timings");
	if (!ms || time_runs(NULL, run_starfa_spmm, &arg, c->o->warmup, c->o->repeat, ms))
		goto error;
	record_times(r, c, ms, c->o->repeat, (double)spmm_bytes(c));
	goto out;
error:
	bench_result_fail(r, BENCH_ERROR, "%s", gpu_error);
out:
	free(ms);
}

static void bench_spmm(struct gpu_case *c)
{
	struct spmm_case sc;
	if (spmm_case_init(&sc, c) != 0) {
		struct bench_result *r = bench_result_add(c->m, c->k, "spmm.cusparse.default");
		bench_result_fail(r, BENCH_ERROR, "%s", gpu_error[0] ? gpu_error : "out of host memory");
		spmm_case_free(&sc);
		return;
	}
	spmm_magnitudes(&sc);
	for (int a = 0; a < SPMM_ALGS; a++)
		bench_cusparse_spmm_alg(&sc, a);
	bench_starfa_spmm(&sc, STARFA_SPMM_OWN, "spmm.starfa.cuda");
	/* The codelet's cuSPARSE implementations as its tasks call them: with the tile's serial, so that the
	 * descriptor, the buffer and ALG3's analysis are made at the first call and kept for the next. */
	static uint64_t serial;
	sc.serial = ++serial;
	bench_starfa_spmm(&sc, STARFA_SPMM_CUSPARSE, "spmm.starfa.cusparse");
	bench_starfa_spmm(&sc, STARFA_SPMM_CUSPARSE_ALG3, "spmm.starfa.cusparse_alg3");
	/* and the codelet's implementation: the fastest of the three, measured at its first call */
	sc.serial = ++serial;
	bench_starfa_spmm(&sc, STARFA_SPMM_TUNED, "spmm.starfa.tuned");
	starfa_gpu_status st = starfa_cuda_spmm_release();
	if (st.call)
		fprintf(stderr, "starfa_bench: starfa_cuda_spmm_release: %s\n", starfa_gpu_status_string(st));
	const char *names[SPMM_ALGS];
	for (int a = 0; a < SPMM_ALGS; a++)
		names[a] = spmm_algs[a].name;
	const char *ours[] = {"spmm.starfa.cuda", "spmm.starfa.cusparse", "spmm.starfa.cusparse_alg3",
			      "spmm.starfa.tuned"};
	set_baselines(c, names, SPMM_ALGS, ours, 4);
	spmm_case_free(&sc);
}

/* ------------------------------------------------------------------ entry point */

static void add_skipped(const struct bench_matrix *m, int64_t k, const char *why)
{
	static const char *const names[] = {"sddmm.starfa.cuda", "sddmm.cusparse.Bcol", "spmm.starfa.cuda",
					    "spmm.cusparse.default"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		bench_result_fail(bench_result_add(m, k, names[i]), BENCH_SKIP, "%s", why);
}

void gpu_bench(struct bench_device *d, const struct bench_options *o, const struct bench_matrix *m, int64_t k)
{
	if (!d->gpu) {
		add_skipped(m, k, d->gpu_note);
		return;
	}
	if (m->csr->nnz > INT32_MAX || m->csr->nrows > INT32_MAX || m->csr->ncols > INT32_MAX) {
		add_skipped(m, k, "cuSPARSE's 32-bit indices cannot describe this matrix");
		return;
	}
	struct gpu_case c = {
		.m = m, .dev = d, .o = o, .k = k, .nrows = m->csr->nrows, .ncols = m->csr->ncols, .nnz = m->csr->nnz};
	gpu_error[0] = '\0';
	if (gpu_ready(d) != 0 || bench_factors(m, k, o->seed, &c.A, &c.B) != 0 ||
	    row_sample_make(m, k, o, &c.sample) != 0 || case_upload(&c) != 0) {
		bench_result_fail(bench_result_add(m, k, "sddmm.starfa.cuda"), BENCH_ERROR, "set-up: %s",
				  gpu_error[0] ? gpu_error : "out of host memory");
	} else {
		bench_sddmm(&c);
		bench_spmm(&c);
	}
	case_free(&c);
	row_sample_free(&c.sample);
	free(c.A);
	free(c.B);
	/* A failed call can leave an error behind for the next one: report and clear it here. */
	cudaError_t e = cudaDeviceSynchronize();
	if (e != cudaSuccess)
		fprintf(stderr, "starfa_bench: %s k=%lld: cudaDeviceSynchronize: %s\n", m->name, (long long)k,
			cudaGetErrorString(e));
	(void)cudaGetLastError();
}
