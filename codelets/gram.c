/* The gram codelet: G = ThetaᵀTheta over the blocks of a dense matrix (implicit ALS's YᵀY). */
#include "codelets/codelet.h"
#include "cpu/gram.h"
#include "storage/systems.h"
#ifdef STARFA_USE_CUDA
#include <cublas_v2.h>
#include <starpu_cublas_v2.h>
#include <starpu_cuda.h>
#endif

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
				 (float *)STARPU_MATRIX_GET_PTR(buffers[1]), 1);
	if (rc != 0)
		starfa_cpu_fail("gram");
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
#endif

/* The real cost: one k x k rank-one update per row. */
static uint64_t gram_cost(const struct starpu_task *task)
{
	const struct gram_args *args = task->cl_arg;
	return (uint64_t)starpu_matrix_get_ny(task->handles[0]) * (uint64_t)(args->k * args->k);
}

static uint32_t gram_variant(const struct starpu_task *task)
{
	return (uint32_t)((const struct gram_args *)task->cl_arg)->accumulate;
}

STARFA_CODELET(gram, gram_cost, gram_variant, gram_cpu, STARFA_CUDA_FUNC(gram_cuda));

int starfa_task_gram(const starfa_dense *theta, int64_t block, int64_t col0, int64_t k, int accumulate,
		     starfa_gram *G, const starfa_task_attr *attr)
{
	const char *what = "starfa_task_gram";
	if (!theta || !G)
		return starfa_set_error(STARFA_EINVAL, "%s: missing operand", what);
	if (k != G->k || col0 < 0 || col0 + k > theta->cols)
		return starfa_set_error(STARFA_EINVAL, "%s: columns %lld..%lld of a %lld-column theta into a %lldx%lld G",
					what, (long long)col0, (long long)(col0 + k - 1), (long long)theta->cols,
					(long long)G->k, (long long)G->k);
	if (block < 0 || block >= theta->nblocks)
		return starfa_index_error(what, "block", block, -1, theta->nblocks, -1);
	struct gram_args args = {col0, k, accumulate != 0};
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_block_where(theta, block));
	double rows = (double)(theta->bounds[block + 1] - theta->bounds[block]);
	return starfa_submit(&gram_cl, &args, sizeof args, rows * (double)k * (double)(k + 1), attr,
			     STARFA_BUFFERS({theta->blocks[block], STARPU_R}, {G->handle, accumulate ? STARPU_RW : STARPU_W}));
}
