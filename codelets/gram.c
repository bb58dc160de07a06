/* The gram codelet: G = ThetaᵀTheta over the blocks of a dense matrix (implicit ALS's YᵀY). */
#include "codelets/codelet.h"
#include "cpu/gram.h"
#include "runtime/systems.h"
#ifdef STARFA_USE_CUDA
#include <cublas_v2.h>
#include <starpu_cublas_v2.h>
#include <starpu_cuda.h>
#endif

#include <limits.h>
#include <stdio.h>

struct gram_args {
	int64_t col0, k; /* theta's columns in use */
	int accumulate;  /* 0: the first block overwrites G; 1: later blocks add to it */
};

/* Buffers: 0 theta block, 1 G (k x k). */
static void gram_cpu(void *buffers[], void *cl_arg)
{
	const struct gram_args *args = cl_arg;
	int rc = starfa_cpu_gram(STARPU_MATRIX_GET_NY(buffers[0]), (const float *)STARPU_MATRIX_GET_PTR(buffers[0]) + args->col0,
				 STARPU_MATRIX_GET_LD(buffers[0]), args->k, args->accumulate,
				 (float *)STARPU_MATRIX_GET_PTR(buffers[1]), starpu_combined_worker_get_size());
	if (rc != 0) {
		fprintf(stderr, "starfa: codelet gram: out of memory for scratch on worker %d\n", starpu_worker_get_id());
		abort();
	}
}

#ifdef STARFA_USE_CUDA
/* cuBLAS: the row-major block is a column-major k x n matrix T (leading dimension ld), and the
 * row-major G = ThetaᵀTheta is the column-major T Tᵀ (symmetric: the same either way). */
static void gram_cuda(void *buffers[], void *cl_arg)
{
	const struct gram_args *args = cl_arg;
	const int n = (int)STARPU_MATRIX_GET_NY(buffers[0]), k = (int)args->k;
	const float one = 1.0f, beta = args->accumulate ? 1.0f : 0.0f;
	float *G = (float *)STARPU_MATRIX_GET_PTR(buffers[1]);
	cublasStatus_t st;
	if (n == 0) {
		if (!args->accumulate)
			STARFA_CUDA_CHECK("gram", cudaMemsetAsync(G, 0, sizeof(float) * (size_t)k * (size_t)k,
								 starpu_cuda_get_local_stream()));
		return;
	}
	st = cublasSgemm(starpu_cublas_get_local_handle(), CUBLAS_OP_N, CUBLAS_OP_T, k, k, n, &one,
			 (const float *)STARPU_MATRIX_GET_PTR(buffers[0]) + args->col0, (int)STARPU_MATRIX_GET_LD(buffers[0]),
			 (const float *)STARPU_MATRIX_GET_PTR(buffers[0]) + args->col0, (int)STARPU_MATRIX_GET_LD(buffers[0]),
			 &beta, G, k);
	if (st != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "starfa: codelet gram: cublasSgemm failed on worker %d: %s\n", starpu_worker_get_id(),
			cublasGetStatusString(st));
		abort();
	}
}
#define GRAM_CUDA .cuda_funcs = {gram_cuda}, .cuda_flags = {STARPU_CUDA_ASYNC},
#else
#define GRAM_CUDA
#endif

/* The real cost: one k x k rank-one update per row. */
static size_t gram_cost(struct starpu_task *task, unsigned nimpl)
{
	(void)nimpl;
	const struct gram_args *args = task->cl_arg;
	return (size_t)starpu_matrix_get_ny(task->handles[0]) * (size_t)(args->k * args->k);
}

static uint32_t gram_footprint(struct starpu_task *task)
{
	const struct gram_args *args = task->cl_arg;
	return starfa_cost_footprint(gram_cost(task, 0), (uint32_t)args->accumulate);
}

STARFA_PERFMODEL(gram, gram_cost, gram_footprint);

static struct starpu_codelet gram_first_cl = {
	.name = "starfa_gram",
	.type = STARPU_FORKJOIN, /* the CPU kernel spreads over a combined worker's cores */
	.max_parallelism = INT_MAX,
	.cpu_funcs = {gram_cpu},
	.cpu_funcs_name = {"gram_cpu"},
	GRAM_CUDA
	.nbuffers = 2,
	.modes = {STARPU_R, STARPU_W},
	.model = &gram_model,
};

static struct starpu_codelet gram_accumulate_cl = {
	.name = "starfa_gram_accumulate",
	.type = STARPU_FORKJOIN,
	.max_parallelism = INT_MAX,
	.cpu_funcs = {gram_cpu},
	.cpu_funcs_name = {"gram_cpu"},
	GRAM_CUDA
	.nbuffers = 2,
	.modes = {STARPU_R, STARPU_RW},
	.model = &gram_model,
};

int starfa_insert_gram(const starfa_dense *theta, int64_t col0, int64_t k, starfa_gram *G)
{
	if (!theta || !G)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_gram: missing operand");
	if (k != G->k || col0 < 0 || col0 + k > theta->cols)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_gram: columns %lld..%lld of a %lld-column theta "
						       "into a %lldx%lld G", (long long)col0, (long long)(col0 + k - 1),
					(long long)theta->cols, (long long)G->k, (long long)G->k);
	for (int64_t b = 0; b < theta->nblocks; b++) {
		struct gram_args *args = malloc(sizeof *args); /* StarPU frees it (STARPU_CL_ARGS) */
		if (!args)
			return starfa_set_error(STARFA_ENOMEM, "out of memory inserting gram tasks");
		*args = (struct gram_args){col0, k, b > 0};
		double rows = (double)(theta->bounds[b + 1] - theta->bounds[b]);
		int ret = starpu_task_insert(b == 0 ? &gram_first_cl : &gram_accumulate_cl, STARPU_R, theta->blocks[b],
					     b == 0 ? STARPU_W : STARPU_RW, G->handle, STARPU_CL_ARGS, args, sizeof *args,
					     STARPU_FLOPS, rows * (double)k * (double)(k + 1), STARPU_NAME, "gram", 0);
		if (ret != 0)
			return starfa_insert_failed("gram", ret);
	}
	return 0;
}
