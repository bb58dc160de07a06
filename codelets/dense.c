/* The dense-block codelets: dense_map (element-wise maps with an operand per element, per row or per
 * column), dense_colsum, dense_rowsum, dense_convert (FP32 <-> packed FP16) and dense_reduce. */
#include "codelets/codelet.h"
#include "cpu/dense.h"
#include "cpu/elementwise.h"

#include <math.h>
#ifdef STARFA_USE_CUDA
#include "gpu/dense.h"
#include <starpu_cuda.h>
#endif

/* Checks a block index of D. */
static int check_block(const char *what, const starfa_dense *D, int64_t block)
{
	if (!D)
		return starfa_set_error(STARFA_EINVAL, "%s: missing operand", what);
	if (block < 0 || block >= D->nblocks)
		return starfa_index_error(what, "block", block, -1, D->nblocks, -1);
	return 0;
}

/* ------------------------------------------------------------------ dense_map */

struct map_args {
	int op, zkind;
	float a, b;
};

/* Buffers: 0 Y's block, 1 the operand (X's block: a matrix, or v: a vector) when the op reads one. */
static void dense_operand(void *buffers[], const struct map_args *args, const float **Z, int64_t *ldz)
{
	*Z = NULL;
	*ldz = 0;
	if (args->zkind == STARFA_OPERAND_PER_COL) {
		*Z = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	} else if (args->zkind != STARFA_OPERAND_NONE) {
		*Z = (const float *)STARPU_MATRIX_GET_PTR(buffers[1]);
		*ldz = STARPU_MATRIX_GET_LD(buffers[1]);
	}
}

static void dense_map_cpu(void *buffers[], void *cl_arg)
{
	const struct map_args *args = cl_arg;
	const float *Z;
	int64_t ldz;
	dense_operand(buffers, args, &Z, &ldz);
	starfa_cpu_dense_map(STARPU_MATRIX_GET_NY(buffers[0]), STARPU_MATRIX_GET_NX(buffers[0]), args->op, args->a, args->b,
			     Z, ldz, args->zkind, (float *)STARPU_MATRIX_GET_PTR(buffers[0]), STARPU_MATRIX_GET_LD(buffers[0]));
}

#ifdef STARFA_USE_CUDA
static void dense_map_cuda(void *buffers[], void *cl_arg)
{
	const struct map_args *args = cl_arg;
	const float *Z;
	int64_t ldz;
	dense_operand(buffers, args, &Z, &ldz);
	STARFA_CUDA_CHECK("dense_map",
			  starfa_cuda_dense_map(STARPU_MATRIX_GET_NY(buffers[0]), STARPU_MATRIX_GET_NX(buffers[0]), args->op,
						args->a, args->b, Z, ldz, args->zkind,
						(float *)STARPU_MATRIX_GET_PTR(buffers[0]), STARPU_MATRIX_GET_LD(buffers[0]),
						starpu_cuda_get_local_stream()));
}
#endif

static uint64_t block_elements(const struct starpu_task *task)
{
	return (uint64_t)starpu_matrix_get_nx(task->handles[0]) * starpu_matrix_get_ny(task->handles[0]);
}

static uint32_t dense_map_variant(const struct starpu_task *task)
{
	const struct map_args *args = task->cl_arg;
	return (uint32_t)(args->op | args->zkind << 8);
}

STARFA_CODELET(dense_map, block_elements, dense_map_variant, dense_map_cpu, STARFA_CUDA_FUNC(dense_map_cuda));

double starfa_digamma(double x)
{
	return starfa_digamma_d(x);
}

double starfa_lgamma(double x)
{
	return starfa_lgamma_d(x);
}

int starfa_task_dense_map(starfa_dense *Y, int64_t block, starfa_dense_op op, float a, float b, const starfa_dense *X,
			  const starfa_vector *v, const starfa_task_attr *attr)
{
	const char *what = "starfa_task_dense_map";
	int rc = check_block(what, Y, block);
	if (rc)
		return rc;
	if ((int)op < 0 || op >= STARFA_DENSE_OPS)
		return starfa_set_error(STARFA_EINVAL, "%s: unknown op %d", what, (int)op);
	struct map_args args = {(int)op, STARFA_OPERAND_NONE, a, b};
	starpu_data_handle_t z = NULL;
	if (starfa_dense_reads_operand(op)) {
		if ((X != NULL) == (v != NULL))
			return starfa_set_error(STARFA_EINVAL, "%s: this op needs one operand, X or v", what);
		if (X) {
			if (!starfa_dense_blocked_along(X, Y->bounds, Y->nblocks) || (X->cols != Y->cols && X->cols != 1))
				return starfa_set_error(STARFA_EINVAL, "%s: X must be blocked like Y, with Y's %lld columns or "
								       "one", what, (long long)Y->cols);
			if (X == Y)
				return starfa_set_error(STARFA_EINVAL, "%s: X must not be Y", what);
			args.zkind = X->cols == Y->cols ? STARFA_OPERAND_SAME : STARFA_OPERAND_PER_ROW;
			z = X->blocks[block];
		} else {
			if (v->n != Y->cols)
				return starfa_set_error(STARFA_EINVAL, "%s: v has %lld values, Y %lld columns", what,
							(long long)v->n, (long long)Y->cols);
			args.zkind = STARFA_OPERAND_PER_COL;
			z = v->handle;
		}
	}
	enum starpu_data_access_mode ymode = starfa_dense_reads_y(op) ? STARPU_RW : STARPU_W;
	double n = (double)(Y->bounds[block + 1] - Y->bounds[block]) * (double)Y->cols;
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_block_where(Y, block));
	if (z)
		return starfa_submit(&dense_map_cl, &args, sizeof args, n, attr,
				     STARFA_BUFFERS({Y->blocks[block], ymode}, {z, STARPU_R}));
	return starfa_submit(&dense_map_cl, &args, sizeof args, n, attr, STARFA_BUFFERS({Y->blocks[block], ymode}));
}

/* ------------------------------------------------------------------ dense_colsum */

struct colsum_args {
	int accumulate;
};

/* Buffers: 0 X's block, 1 v. */
static void dense_colsum_cpu(void *buffers[], void *cl_arg)
{
	const struct colsum_args *args = cl_arg;
	if (starfa_cpu_dense_colsum(STARPU_MATRIX_GET_NY(buffers[0]), STARPU_MATRIX_GET_NX(buffers[0]),
				    (const float *)STARPU_MATRIX_GET_PTR(buffers[0]), STARPU_MATRIX_GET_LD(buffers[0]),
				    args->accumulate, (float *)STARPU_VECTOR_GET_PTR(buffers[1])) != 0)
		starfa_cpu_fail("dense_colsum");
}

#ifdef STARFA_USE_CUDA
static void dense_colsum_cuda(void *buffers[], void *cl_arg)
{
	const struct colsum_args *args = cl_arg;
	STARFA_CUDA_CHECK("dense_colsum",
			  starfa_cuda_dense_colsum(STARPU_MATRIX_GET_NY(buffers[0]), STARPU_MATRIX_GET_NX(buffers[0]),
						   (const float *)STARPU_MATRIX_GET_PTR(buffers[0]),
						   STARPU_MATRIX_GET_LD(buffers[0]), args->accumulate,
						   (float *)STARPU_VECTOR_GET_PTR(buffers[1]), starpu_cuda_get_local_stream()));
}
#endif

static uint32_t dense_colsum_variant(const struct starpu_task *task)
{
	return (uint32_t)((const struct colsum_args *)task->cl_arg)->accumulate;
}

STARFA_CODELET(dense_colsum, block_elements, dense_colsum_variant, dense_colsum_cpu, STARFA_CUDA_FUNC(dense_colsum_cuda));

int starfa_task_dense_colsum(const starfa_dense *X, int64_t block, int accumulate, starfa_vector *v,
			     const starfa_task_attr *attr)
{
	const char *what = "starfa_task_dense_colsum";
	int rc = check_block(what, X, block);
	if (rc)
		return rc;
	if (!v || v->n != X->cols)
		return starfa_set_error(STARFA_EINVAL, "%s: v must have X's %lld columns", what, (long long)X->cols);
	struct colsum_args args = {accumulate != 0};
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_block_where(X, block));
	double n = (double)(X->bounds[block + 1] - X->bounds[block]) * (double)X->cols;
	return starfa_submit(&dense_colsum_cl, &args, sizeof args, n, attr,
			     STARFA_BUFFERS({X->blocks[block], STARPU_R}, {v->handle, accumulate ? STARPU_RW : STARPU_W}));
}

/* ------------------------------------------------------------------ dense_rowsum */

/* Buffers: 0 X's block, 1 R's block. */
static void dense_rowsum_cpu(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	starfa_cpu_dense_rowsum(STARPU_MATRIX_GET_NY(buffers[0]), STARPU_MATRIX_GET_NX(buffers[0]),
				(const float *)STARPU_MATRIX_GET_PTR(buffers[0]), STARPU_MATRIX_GET_LD(buffers[0]),
				(float *)STARPU_MATRIX_GET_PTR(buffers[1]), STARPU_MATRIX_GET_LD(buffers[1]));
}

#ifdef STARFA_USE_CUDA
static void dense_rowsum_cuda(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	STARFA_CUDA_CHECK("dense_rowsum",
			  starfa_cuda_dense_rowsum(STARPU_MATRIX_GET_NY(buffers[0]), STARPU_MATRIX_GET_NX(buffers[0]),
						   (const float *)STARPU_MATRIX_GET_PTR(buffers[0]),
						   STARPU_MATRIX_GET_LD(buffers[0]), (float *)STARPU_MATRIX_GET_PTR(buffers[1]),
						   STARPU_MATRIX_GET_LD(buffers[1]), starpu_cuda_get_local_stream()));
}
#endif

STARFA_CODELET(dense_rowsum, block_elements, starfa_no_variant, dense_rowsum_cpu, STARFA_CUDA_FUNC(dense_rowsum_cuda));

int starfa_task_dense_rowsum(const starfa_dense *X, int64_t block, starfa_dense *R, const starfa_task_attr *attr)
{
	const char *what = "starfa_task_dense_rowsum";
	int rc = check_block(what, X, block);
	if (rc)
		return rc;
	if (!R || R->cols != 1 || !starfa_dense_blocked_along(R, X->bounds, X->nblocks))
		return starfa_set_error(STARFA_EINVAL, "%s: R must have one column, blocked like X", what);
	double n = (double)(X->bounds[block + 1] - X->bounds[block]) * (double)X->cols;
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_block_where(X, block));
	return starfa_submit(&dense_rowsum_cl, NULL, 0, n, attr,
			     STARFA_BUFFERS({X->blocks[block], STARPU_R}, {R->blocks[block], STARPU_W}));
}

/* ------------------------------------------------------------------ dense_cg */

struct cg_args {
	int start;
};

/* Buffers: 0 X, 1 R, 2 P, 3 Q, 4 rr, 5 lam (the blocks of one row band). */
#define CG_ARGS(buffers)                                                                                      \
	STARPU_MATRIX_GET_NY(buffers[0]), STARPU_MATRIX_GET_NX(buffers[0]), ((const struct cg_args *)cl_arg)->start, \
		(float *)STARPU_MATRIX_GET_PTR(buffers[0]), STARPU_MATRIX_GET_LD(buffers[0]),                        \
		(float *)STARPU_MATRIX_GET_PTR(buffers[1]), STARPU_MATRIX_GET_LD(buffers[1]),                        \
		(float *)STARPU_MATRIX_GET_PTR(buffers[2]), STARPU_MATRIX_GET_LD(buffers[2]),                        \
		(const float *)STARPU_MATRIX_GET_PTR(buffers[3]), STARPU_MATRIX_GET_LD(buffers[3]),                  \
		(float *)STARPU_MATRIX_GET_PTR(buffers[4]), STARPU_MATRIX_GET_LD(buffers[4]),                        \
		(const float *)STARPU_MATRIX_GET_PTR(buffers[5]), STARPU_MATRIX_GET_LD(buffers[5])

static void dense_cg_cpu(void *buffers[], void *cl_arg)
{
	starfa_cpu_dense_cg(CG_ARGS(buffers));
}

#ifdef STARFA_USE_CUDA
static void dense_cg_cuda(void *buffers[], void *cl_arg)
{
	STARFA_CUDA_CHECK("dense_cg", starfa_cuda_dense_cg(CG_ARGS(buffers), starpu_cuda_get_local_stream()));
}
#endif

static uint32_t dense_cg_variant(const struct starpu_task *task)
{
	return (uint32_t)((const struct cg_args *)task->cl_arg)->start;
}

STARFA_CODELET(dense_cg, block_elements, dense_cg_variant, dense_cg_cpu, STARFA_CUDA_FUNC(dense_cg_cuda));

int starfa_task_dense_cg(starfa_dense *X, starfa_dense *R, starfa_dense *P, const starfa_dense *Q, starfa_dense *rr,
			 const starfa_dense *lam, int64_t block, int start, const starfa_task_attr *attr)
{
	const char *what = "starfa_task_dense_cg";
	int rc = check_block(what, X, block);
	if (rc)
		return rc;
	const starfa_dense *same[3] = {R, P, Q}, *one[2] = {rr, lam};
	for (int i = 0; i < 3; i++)
		if (!same[i] || same[i]->cols != X->cols || !starfa_dense_blocked_along(same[i], X->bounds, X->nblocks))
			return starfa_set_error(STARFA_EINVAL, "%s: R, P and Q must be blocked like X, with its %lld columns",
						what, (long long)X->cols);
	for (int i = 0; i < 2; i++)
		if (!one[i] || one[i]->cols != 1 || !starfa_dense_blocked_along(one[i], X->bounds, X->nblocks))
			return starfa_set_error(STARFA_EINVAL, "%s: rr and lam must have one column, blocked like X", what);
	const starfa_dense *all[6] = {X, R, P, Q, rr, lam};
	int distinct = 1;
	for (int a = 0; a < 6; a++)
		for (int b = a + 1; b < 6; b++)
			distinct &= all[a] != all[b];
	if (!distinct)
		return starfa_set_error(STARFA_EINVAL, "%s: X, R, P, Q, rr and lam must be six matrices", what);
	struct cg_args args = {start != 0};
	double n = (double)(X->bounds[block + 1] - X->bounds[block]) * (double)X->cols;
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_block_where(X, block));
	return starfa_submit(&dense_cg_cl, &args, sizeof args, n, attr,
			     STARFA_BUFFERS({X->blocks[block], start ? STARPU_R : STARPU_RW}, {R->blocks[block], start ? STARPU_W : STARPU_RW},
					    {P->blocks[block], start ? STARPU_W : STARPU_RW}, {Q->blocks[block], STARPU_R},
					    {rr->blocks[block], start ? STARPU_W : STARPU_RW}, {lam->blocks[block], STARPU_R}));
}

/* ------------------------------------------------------------------ dense_uniform */

struct uniform_args {
	float lo, hi;
	uint64_t seed;
	int64_t row0, cols;
};

/* Buffers: 0 Y's block (W). */
static void dense_uniform_cpu(void *buffers[], void *cl_arg)
{
	const struct uniform_args *args = cl_arg;
	starfa_cpu_dense_uniform(STARPU_MATRIX_GET_NY(buffers[0]), args->cols, args->row0, args->lo, args->hi, args->seed,
				 (float *)STARPU_MATRIX_GET_PTR(buffers[0]), STARPU_MATRIX_GET_LD(buffers[0]));
}

#ifdef STARFA_USE_CUDA
static void dense_uniform_cuda(void *buffers[], void *cl_arg)
{
	const struct uniform_args *args = cl_arg;
	STARFA_CUDA_CHECK("dense_uniform",
			  starfa_cuda_dense_uniform(STARPU_MATRIX_GET_NY(buffers[0]), args->cols, args->row0, args->lo,
						    args->hi, args->seed, (float *)STARPU_MATRIX_GET_PTR(buffers[0]),
						    STARPU_MATRIX_GET_LD(buffers[0]), starpu_cuda_get_local_stream()));
}
#endif

STARFA_CODELET(dense_uniform, block_elements, starfa_no_variant, dense_uniform_cpu,
	       STARFA_CUDA_FUNC(dense_uniform_cuda));

int starfa_task_dense_uniform(starfa_dense *Y, int64_t block, float lo, float hi, uint64_t seed,
			      const starfa_task_attr *attr)
{
	const char *what = "starfa_task_dense_uniform";
	int rc = check_block(what, Y, block);
	if (rc)
		return rc;
	if (!isfinite(lo) || !isfinite(hi) || !(lo <= hi) || !isfinite(hi - lo))
		return starfa_set_error(STARFA_EINVAL, "%s: lo and hi must be finite with lo <= hi (lo %g, hi %g)", what,
					(double)lo, (double)hi);
	struct uniform_args args = {lo, hi, seed, Y->bounds[block], Y->cols};
	/* a hash of three multiplies and an FMA per value */
	double n = 10.0 * (double)(Y->bounds[block + 1] - Y->bounds[block]) * (double)Y->cols;
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_block_where(Y, block));
	return starfa_submit(&dense_uniform_cl, &args, sizeof args, n, attr,
			     STARFA_BUFFERS({Y->blocks[block], STARPU_W}));
}

/* ------------------------------------------------------------------ dense_dirichlet */

struct dirichlet_args {
	float prior, tol;
	int masked;
};

/* Buffers: 0 gamma, 1 elog, 2 expelog, 3 G (the blocks of one row band), 4 the slot (a double), 5 (masked)
 * the rows' active values. */
#define DIRICHLET_ARGS(buffers, args)                                                                         \
	STARPU_MATRIX_GET_NY(buffers[0]), STARPU_MATRIX_GET_NX(buffers[0]), (args)->prior, (args)->tol,       \
		(const float *)STARPU_MATRIX_GET_PTR(buffers[3]), STARPU_MATRIX_GET_LD(buffers[3]),                  \
		(float *)STARPU_MATRIX_GET_PTR(buffers[0]), STARPU_MATRIX_GET_LD(buffers[0]),                        \
		(float *)STARPU_MATRIX_GET_PTR(buffers[1]), STARPU_MATRIX_GET_LD(buffers[1]),                        \
		(float *)STARPU_MATRIX_GET_PTR(buffers[2]), STARPU_MATRIX_GET_LD(buffers[2]),                        \
		(args)->masked ? (float *)STARPU_MATRIX_GET_PTR(buffers[5]) : NULL,                                  \
		(args)->masked ? STARPU_MATRIX_GET_LD(buffers[5]) : 0

static void dense_dirichlet_cpu(void *buffers[], void *cl_arg)
{
	*(double *)STARPU_VARIABLE_GET_PTR(buffers[4]) =
		starfa_cpu_dense_dirichlet(DIRICHLET_ARGS(buffers, (const struct dirichlet_args *)cl_arg));
}

#ifdef STARFA_USE_CUDA
static void dense_dirichlet_cuda(void *buffers[], void *cl_arg)
{
	STARFA_CUDA_CHECK("dense_dirichlet",
			  starfa_cuda_dense_dirichlet(DIRICHLET_ARGS(buffers, (const struct dirichlet_args *)cl_arg),
						      (double *)STARPU_VARIABLE_GET_PTR(buffers[4]),
						      starpu_cuda_get_local_stream()));
}
#endif

static uint32_t dense_dirichlet_variant(const struct starpu_task *task)
{
	return (uint32_t)((const struct dirichlet_args *)task->cl_arg)->masked;
}

STARFA_CODELET(dense_dirichlet, block_elements, dense_dirichlet_variant, dense_dirichlet_cpu,
	       STARFA_CUDA_FUNC(dense_dirichlet_cuda));

int starfa_task_dense_dirichlet(starfa_dense *gamma, starfa_dense *elog, starfa_dense *expelog, const starfa_dense *G,
				starfa_dense *active, float prior, float tol, starfa_sums *sums, int64_t slot, int64_t block,
				const starfa_task_attr *attr)
{
	const char *what = "starfa_task_dense_dirichlet";
	int rc = check_block(what, gamma, block);
	if (!rc)
		rc = starfa_check_slot(what, sums, slot);
	if (rc)
		return rc;
	const starfa_dense *same[3] = {elog, expelog, G};
	for (int i = 0; i < 3; i++)
		if (!same[i] || same[i]->cols != gamma->cols ||
		    !starfa_dense_blocked_along(same[i], gamma->bounds, gamma->nblocks))
			return starfa_set_error(STARFA_EINVAL, "%s: elog, expelog and G must be blocked like gamma, with its "
							       "%lld columns", what, (long long)gamma->cols);
	if (active && (active->cols != 1 || !starfa_dense_blocked_along(active, gamma->bounds, gamma->nblocks)))
		return starfa_set_error(STARFA_EINVAL, "%s: active must have one column, blocked like gamma", what);
	const starfa_dense *all[5] = {gamma, elog, expelog, G, active};
	for (int a = 0; a < 5; a++)
		for (int b = a + 1; b < 5; b++)
			if (all[a] && all[a] == all[b])
				return starfa_set_error(STARFA_EINVAL, "%s: gamma, elog, expelog, G and active must be "
								       "distinct matrices", what);
	if (!(prior >= 0) || !isfinite(prior) || !(tol >= 0) || !isfinite(tol))
		return starfa_set_error(STARFA_EINVAL, "%s: prior and tol must be finite and >= 0 (prior %g, tol %g)", what,
					(double)prior, (double)tol);
	struct dirichlet_args args = {prior, tol, active != NULL};
	/* a digamma and an exp per value: about 30 flops */
	double n = 30.0 * (double)(gamma->bounds[block + 1] - gamma->bounds[block]) * (double)gamma->cols;
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_block_where(gamma, block));
	if (active)
		return starfa_submit(&dense_dirichlet_cl, &args, sizeof args, n, attr,
				     STARFA_BUFFERS({gamma->blocks[block], STARPU_RW}, {elog->blocks[block], STARPU_RW},
						    {expelog->blocks[block], STARPU_RW}, {G->blocks[block], STARPU_R},
						    {sums->handles[slot], STARPU_W}, {active->blocks[block], STARPU_RW}));
	return starfa_submit(&dense_dirichlet_cl, &args, sizeof args, n, attr,
			     STARFA_BUFFERS({gamma->blocks[block], STARPU_RW}, {elog->blocks[block], STARPU_W},
					    {expelog->blocks[block], STARPU_RW}, {G->blocks[block], STARPU_R},
					    {sums->handles[slot], STARPU_W}));
}

/* ------------------------------------------------------------------ dense_convert */

struct convert_args {
	int dir;
};

/* Buffers: 0 Y's block (W), 1 X's block (R). The values per row: the float side's columns; the half
 * side's leading dimension in halves is twice its leading dimension in floats. */
#define CONVERT_SHAPE(buffers, dir)                                                                           \
	const int64_t rows = STARPU_MATRIX_GET_NY(buffers[0]);                                                \
	const int64_t cols = (dir) == STARFA_TO_HALF ? STARPU_MATRIX_GET_NX(buffers[1]) : STARPU_MATRIX_GET_NX(buffers[0]); \
	const int64_t ldy = STARPU_MATRIX_GET_LD(buffers[0]) * ((dir) == STARFA_TO_HALF ? 2 : 1);            \
	const int64_t ldx = STARPU_MATRIX_GET_LD(buffers[1]) * ((dir) == STARFA_TO_HALF ? 1 : 2)

static void dense_convert_cpu(void *buffers[], void *cl_arg)
{
	const struct convert_args *args = cl_arg;
	CONVERT_SHAPE(buffers, args->dir);
	void *Y = (void *)STARPU_MATRIX_GET_PTR(buffers[0]);
	const void *X = (const void *)STARPU_MATRIX_GET_PTR(buffers[1]);
	if (args->dir == STARFA_TO_HALF)
		starfa_cpu_dense_to_half(rows, cols, X, ldx, Y, ldy);
	else
		starfa_cpu_dense_from_half(rows, cols, X, ldx, Y, ldy);
}

#ifdef STARFA_USE_CUDA
static void dense_convert_cuda(void *buffers[], void *cl_arg)
{
	const struct convert_args *args = cl_arg;
	CONVERT_SHAPE(buffers, args->dir);
	void *Y = (void *)STARPU_MATRIX_GET_PTR(buffers[0]);
	const void *X = (const void *)STARPU_MATRIX_GET_PTR(buffers[1]);
	cudaStream_t stream = starpu_cuda_get_local_stream();
	STARFA_CUDA_CHECK("dense_convert", args->dir == STARFA_TO_HALF
						   ? starfa_cuda_dense_to_half(rows, cols, X, ldx, Y, ldy, stream)
						   : starfa_cuda_dense_from_half(rows, cols, X, ldx, Y, ldy, stream));
}
#endif

static uint32_t dense_convert_variant(const struct starpu_task *task)
{
	return (uint32_t)((const struct convert_args *)task->cl_arg)->dir;
}

STARFA_CODELET(dense_convert, block_elements, dense_convert_variant, dense_convert_cpu,
	       STARFA_CUDA_FUNC(dense_convert_cuda));

int starfa_task_dense_convert(starfa_dense *Y, int64_t block, starfa_convert dir, const starfa_dense *X,
			      const starfa_task_attr *attr)
{
	const char *what = "starfa_task_dense_convert";
	int rc = check_block(what, Y, block);
	if (!rc)
		rc = check_block(what, X, block);
	if (rc)
		return rc;
	if (dir != STARFA_TO_HALF && dir != STARFA_FROM_HALF)
		return starfa_set_error(STARFA_EINVAL, "%s: unknown direction %d", what, (int)dir);
	const int64_t halves = dir == STARFA_TO_HALF ? Y->cols : X->cols, floats = dir == STARFA_TO_HALF ? X->cols : Y->cols;
	if (!starfa_dense_blocked_along(X, Y->bounds, Y->nblocks) || floats != 2 * halves)
		return starfa_set_error(STARFA_EINVAL, "%s: X and Y must be blocked alike, the FP32 side with twice the "
						       "columns of the FP16 side (%lld and %lld given)",
					what, (long long)floats, (long long)halves);
	struct convert_args args = {(int)dir};
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_block_where(Y, block));
	double n = (double)(Y->bounds[block + 1] - Y->bounds[block]) * (double)floats;
	return starfa_submit(&dense_convert_cl, &args, sizeof args, n, attr,
			     STARFA_BUFFERS({Y->blocks[block], STARPU_W}, {X->blocks[block], STARPU_R}));
}

/* ------------------------------------------------------------------ dense_reduce */

struct reduce_args {
	int op;
	int weighted;        /* a third buffer holds the rows' weights, at column wcol */
	int64_t col0, ncols; /* the block's columns [col0, col0 + ncols) */
	int64_t wcol;
};

/* Buffers: 0 the slot (a double), 1 X's block, [2 the weights' block]. */
static void dense_reduce_cpu(void *buffers[], void *cl_arg)
{
	const struct reduce_args *args = cl_arg;
	const float *w = args->weighted ? (const float *)STARPU_MATRIX_GET_PTR(buffers[2]) + args->wcol : NULL;
	*(double *)STARPU_VARIABLE_GET_PTR(buffers[0]) =
		starfa_cpu_dense_reduce(STARPU_MATRIX_GET_NY(buffers[1]), args->ncols,
					(const float *)STARPU_MATRIX_GET_PTR(buffers[1]) + args->col0,
					STARPU_MATRIX_GET_LD(buffers[1]), w,
					args->weighted ? STARPU_MATRIX_GET_LD(buffers[2]) : 0, args->op);
}

#ifdef STARFA_USE_CUDA
static void dense_reduce_cuda(void *buffers[], void *cl_arg)
{
	const struct reduce_args *args = cl_arg;
	const float *w = args->weighted ? (const float *)STARPU_MATRIX_GET_PTR(buffers[2]) + args->wcol : NULL;
	STARFA_CUDA_CHECK("dense_reduce",
			  starfa_cuda_dense_reduce(STARPU_MATRIX_GET_NY(buffers[1]), args->ncols,
						   (const float *)STARPU_MATRIX_GET_PTR(buffers[1]) + args->col0,
						   STARPU_MATRIX_GET_LD(buffers[1]), w,
						   args->weighted ? STARPU_MATRIX_GET_LD(buffers[2]) : 0, args->op,
						   (double *)STARPU_VARIABLE_GET_PTR(buffers[0]), starpu_cuda_get_local_stream()));
}
#endif

static uint64_t dense_reduce_cost(const struct starpu_task *task)
{
	const struct reduce_args *args = task->cl_arg;
	return (uint64_t)args->ncols * starpu_matrix_get_ny(task->handles[1]);
}

static uint32_t dense_reduce_variant(const struct starpu_task *task)
{
	const struct reduce_args *args = task->cl_arg;
	return (uint32_t)args->op + (args->weighted ? (uint32_t)STARFA_REDUCE_OPS : 0);
}

STARFA_CODELET(dense_reduce, dense_reduce_cost, dense_reduce_variant, dense_reduce_cpu,
	       STARFA_CUDA_FUNC(dense_reduce_cuda));

int starfa_task_dense_reduce_cols(const starfa_dense *D, int64_t block, int64_t col0, int64_t ncols,
				  starfa_reduce_op op, const starfa_dense *W, int64_t wcol, starfa_sums *sums,
				  int64_t slot, const starfa_task_attr *attr)
{
	const char *what = "starfa_task_dense_reduce";
	int rc = check_block(what, D, block);
	if (!rc)
		rc = starfa_check_slot(what, sums, slot);
	if (rc)
		return rc;
	if (op != STARFA_REDUCE_SUM && op != STARFA_REDUCE_SQUARES && op != STARFA_REDUCE_ABS)
		return starfa_set_error(STARFA_EINVAL, "%s: dense blocks take SUM, SQUARES or ABS, not op %d", what, (int)op);
	if (col0 < 0 || ncols < 1 || col0 > D->cols - ncols)
		return starfa_set_error(STARFA_EINVAL, "%s: columns [%lld, %lld) are not inside the matrix's %lld", what,
					(long long)col0, (long long)(col0 + ncols), (long long)D->cols);
	if (W && (!starfa_dense_blocked_along(W, D->bounds, D->nblocks) || wcol < 0 || wcol >= W->cols))
		return starfa_set_error(STARFA_EINVAL, "%s: the weights must be blocked like the matrix, their column "
						       "%lld one of their %lld", what, (long long)wcol, (long long)W->cols);
	struct reduce_args args = {(int)op, W != NULL, col0, ncols, W ? wcol : 0};
	double n = (double)(D->bounds[block + 1] - D->bounds[block]) * (double)ncols;
	starfa_task_attr placed;
	attr = starfa_placed(&placed, attr, starfa_block_where(D, block));
	struct starpu_data_descr buffers[3] = {{sums->handles[slot], STARPU_W}, {D->blocks[block], STARPU_R},
					       {W ? W->blocks[block] : NULL, STARPU_R}};
	return starfa_submit(&dense_reduce_cl, &args, sizeof args, 2.0 * n, attr, W ? 3 : 2, buffers);
}

int starfa_task_dense_reduce(const starfa_dense *D, int64_t block, starfa_reduce_op op, starfa_sums *sums,
			     int64_t slot, const starfa_task_attr *attr)
{
	if (!D)
		return check_block("starfa_task_dense_reduce", D, block);
	return starfa_task_dense_reduce_cols(D, block, 0, D->cols, op, NULL, 0, sums, slot, attr);
}

