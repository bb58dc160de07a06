/* Sparse values on both grids: SDDMM with alpha and beta on either side, transposition through the
 * map, SpMM with separate values, element-wise maps and reductions. The same bodies run on CPU
 * workers alone and on CUDA workers alone, against plain sequential references in double, on fresh
 * random inputs with outputs poisoned with NaN. */
#include "testing.h"
#ifdef STARFA_USE_CUDA
#include "testing_cuda.h"
#endif

#include <float.h>
#include <stdlib.h>
#include <string.h>

/* A fixture: S with both grids, factors W (rows x k) and H (cols x k) blocked along both sides. */
struct fixture {
	starfa_csr *S, *St;
	starfa_tiled *t;
	int64_t k;
	float *W, *H;
	starfa_dense *dW, *dH;
};

static int fixture_make(struct fixture *f, int64_t m, int64_t n, int64_t nnz, int64_t k, uint64_t *rng)
{
	memset(f, 0, sizeof *f);
	f->S = testing_random_csr(m, n, nnz, 1.0, rng);
	if (!f->S || starfa_csr_transpose(f->S, &f->St))
		return 1;
	starfa_tiling_options tiling = {(int64_t)(1 + testing_below(rng, 5)), (int64_t)(1 + testing_below(rng, 5)), 1};
	f->k = k;
	f->W = malloc(sizeof(float) * (size_t)(m * k));
	f->H = malloc(sizeof(float) * (size_t)(n * k));
	if (!f->W || !f->H || starfa_tiled_create(f->S, &tiling, &f->t))
		return 1;
	testing_fill_random(f->W, (size_t)(m * k), rng);
	testing_fill_random(f->H, (size_t)(n * k), rng);
	return starfa_dense_create(f->t, STARFA_ROWS, f->W, k, &f->dW) || starfa_dense_create(f->t, STARFA_COLS, f->H, k, &f->dH);
}

static void fixture_free(struct fixture *f)
{
	starfa_dense_free(f->dW);
	starfa_dense_free(f->dH);
	starfa_tiled_free(f->t);
	starfa_csr_free(f->S);
	starfa_csr_free(f->St);
	free(f->W);
	free(f->H);
}

/* Poisons a fresh set of values (NaN everywhere), through a task, so unwritten entries fail. */
static int poison_values(starfa_sparse_values *v)
{
	return starfa_insert_values_map(v, STARFA_VALUES_SET, NAN, 0.0f, NULL);
}

static double dot(const float *a, const float *b, int64_t k, double *abs_sum)
{
	double s = 0, as = 0;
	for (int64_t d = 0; d < k; d++) {
		s += (double)a[d] * b[d];
		as += fabs((double)a[d] * b[d]);
	}
	if (abs_sum)
		*abs_sum = as;
	return s;
}

/* got within the float32 bound of a sum of n terms whose magnitudes add to scale. */
static int close_to(double got, double ref, double n, double scale)
{
	return isfinite(got) && fabs(got - ref) <= (n + 4) * FLT_EPSILON * (scale + fabs(ref)) + 1e-30;
}

/* P = S (copied values), then P = alpha W·Hᵀ ∘ pattern + beta P on the forward grid; its transpose to
 * the column side; the column side's own SDDMM; SpMM with the transposed values. */
static int sddmm_both_sides(starfa_worker_kind kind, uint64_t seed)
{
	CHECK_OK(testing_runtime_only(kind));
	uint64_t rng = seed;
	struct fixture f;
	int64_t k = 1 + (int64_t)testing_below(&rng, 40);
	CHECK_OK(fixture_make(&f, 300, 200, 4000, k, &rng));
	const starfa_csr *S = f.S, *St = f.St;
	const float alpha = -0.75f, beta = 1.0f;
	starfa_sparse_values *P = NULL, *PT = NULL, *Q = NULL;
	CHECK_OK(starfa_sparse_values_create(f.t, STARFA_ROWS, &P));
	CHECK_OK(starfa_sparse_values_create(f.t, STARFA_COLS, &PT));
	CHECK_OK(starfa_sparse_values_create(f.t, STARFA_COLS, &Q));
	CHECK_OK(poison_values(P));
	CHECK_OK(poison_values(PT));
	CHECK_OK(poison_values(Q));
	starfa_stats_reset();
	CHECK_OK(starfa_insert_values_map(P, STARFA_VALUES_COPY, 0, 0, NULL)); /* P = S's values */
	CHECK_OK(starfa_insert_sddmm_ab(f.t, f.dW, f.dH, STARFA_SDDMM_PATTERN, alpha, beta, P));
	CHECK_OK(starfa_insert_values_transpose(P, PT));
	/* The column side's own SDDMM: Q = 2 (H·Wᵀ) ∘ pattern(Sᵀ), scaled by Sᵀ's values; beta 0 ignores NaN. */
	CHECK_OK(starfa_insert_sddmm_ab(f.t, f.dH, f.dW, STARFA_SDDMM_SCALED, 2.0f, 0.0f, Q));
	int64_t nnz = S->nnz;
	float *p = malloc(sizeof(float) * (size_t)nnz), *pt = malloc(sizeof(float) * (size_t)nnz),
	      *q = malloc(sizeof(float) * (size_t)nnz);
	CHECK(p && pt && q);
	CHECK_OK(starfa_sparse_values_gather(P, p));
	CHECK_OK(starfa_sparse_values_gather(PT, pt));
	CHECK_OK(starfa_sparse_values_gather(Q, q));
	for (int64_t r = 0; r < S->nrows; r++)
		for (int64_t e = S->rowptr[r]; e < S->rowptr[r + 1]; e++) {
			double as, ref = alpha * dot(f.W + r * k, f.H + (int64_t)S->colind[e] * k, k, &as) + beta * S->val[e];
			CHECK_MSG(close_to(p[e], ref, (double)k, fabs(alpha) * as + fabs(S->val[e])),
				  "P[%lld] = %g, reference %g (k %lld)", (long long)e, p[e], ref, (long long)k);
		}
	/* The transposed values, in the transpose's order, are exactly P's values. */
	for (int64_t c = 0; c < St->nrows; c++)
		for (int64_t e = St->rowptr[c]; e < St->rowptr[c + 1]; e++) {
			int64_t r = St->colind[e], pos = -1;
			for (int64_t g = S->rowptr[r]; g < S->rowptr[r + 1]; g++)
				if (S->colind[g] == c)
					pos = g;
			CHECK(pos >= 0);
			CHECK_MSG(memcmp(&pt[e], &p[pos], sizeof(float)) == 0, "transposed value %lld: %g, forward %g",
				  (long long)e, pt[e], p[pos]);
			double as, ref = 2.0 * St->val[e] * dot(f.H + c * k, f.W + r * k, k, &as);
			CHECK_MSG(close_to(q[e], ref, (double)k, 2.0 * fabs(St->val[e]) * as),
				  "column-side SDDMM [%lld] = %g, reference %g", (long long)e, q[e], ref);
		}
	/* Y = Pᵀ·W through the transposed values; and back: P2 = PT transposed equals P. */
	float *Y = malloc(sizeof(float) * (size_t)(S->ncols * k));
	CHECK(Y);
	testing_poison(Y, (size_t)(S->ncols * k));
	starfa_dense *dY = NULL;
	CHECK_OK(starfa_dense_create(f.t, STARFA_COLS, Y, k, &dY));
	CHECK_OK(starfa_insert_spmm_values(f.t, STARFA_COLS, PT, f.dW, dY));
	starfa_sparse_values *P2 = NULL;
	CHECK_OK(starfa_sparse_values_create(f.t, STARFA_ROWS, &P2));
	CHECK_OK(poison_values(P2));
	CHECK_OK(starfa_insert_values_transpose(PT, P2));
	float *p2 = malloc(sizeof(float) * (size_t)nnz);
	CHECK(p2);
	CHECK_OK(starfa_sparse_values_gather(P2, p2));
	CHECK(memcmp(p2, p, sizeof(float) * (size_t)nnz) == 0);
	CHECK_OK(starfa_dense_sync(dY));
	for (int64_t c = 0; c < St->nrows; c++)
		for (int64_t d = 0; d < k; d++) {
			double ref = 0, scale = 0;
			for (int64_t e = St->rowptr[c]; e < St->rowptr[c + 1]; e++) {
				double term = (double)pt[e] * f.W[(int64_t)St->colind[e] * k + d];
				ref += term;
				scale += fabs(term);
			}
			double n = (double)(St->rowptr[c + 1] - St->rowptr[c]);
			CHECK_MSG(close_to(Y[c * k + d], ref, n, scale), "Y[%lld, %lld] = %g, reference %g", (long long)c,
				  (long long)d, Y[c * k + d], ref);
		}
	starfa_worker_stats st;
	starfa_stats_get(&st);
	int other = kind == STARFA_WORKER_CPU ? STARFA_WORKER_CUDA : STARFA_WORKER_CPU;
	CHECK(st.tasks[kind] > 0 && st.tasks[other] == 0);
	starfa_dense_free(dY);
	starfa_sparse_values_free(P);
	starfa_sparse_values_free(PT);
	starfa_sparse_values_free(P2);
	starfa_sparse_values_free(Q);
	fixture_free(&f);
	free(p);
	free(pt);
	free(p2);
	free(q);
	free(Y);
	return 0;
}

/* The reference of one map op on (x, y). */
static double map_ref(starfa_values_op op, float a, float b, float x, float y)
{
	switch (op) {
	case STARFA_VALUES_SET: return a;
	case STARFA_VALUES_COPY: return x;
	case STARFA_VALUES_SCALE: return (double)a * y + b;
	case STARFA_VALUES_AXPBY: return (double)a * x + (double)b * y;
	case STARFA_VALUES_MUL: return (double)x * y;
	case STARFA_VALUES_QUOTIENT: return x / fmax(a, y);
	case STARFA_VALUES_EXP: return exp(y);
	case STARFA_VALUES_LOG: return log(fmax(a, y));
	default: return NAN;
	}
}

static double reduce_ref(starfa_reduce_op op, float a, float x, float y)
{
	switch (op) {
	case STARFA_REDUCE_SUM: return y;
	case STARFA_REDUCE_SQUARES: return (double)y * y;
	case STARFA_REDUCE_SQDIFF: return ((double)x - y) * ((double)x - y);
	case STARFA_REDUCE_KL: return x != 0 ? x * log(x / fmax(a, y)) - x : 0;
	case STARFA_REDUCE_XLOGY: return x != 0 ? x * log(fmax(a, y)) : 0;
	case STARFA_REDUCE_CONFIDENCE: return (1 + (double)a * x) * (1.0 - y) * (1.0 - y) - (double)y * y;
	case STARFA_REDUCE_ABS: return fabs((double)y);
	default: return NAN;
	}
}

/* Every map and reduction op on both sides, x from another values set or from S's own values. */
static int maps_and_reductions(starfa_worker_kind kind, uint64_t seed)
{
	CHECK_OK(testing_runtime_only(kind));
	uint64_t rng = seed;
	struct fixture f;
	CHECK_OK(fixture_make(&f, 250, 180, 3000, 4, &rng));
	int64_t nnz = f.S->nnz;
	float *x = malloc(sizeof(float) * (size_t)nnz), *y0 = malloc(sizeof(float) * (size_t)nnz),
	      *got = malloc(sizeof(float) * (size_t)nnz), *sval = malloc(sizeof(float) * (size_t)nnz);
	CHECK(x && y0 && got && sval);
	for (int side = 0; side < 2; side++) {
		const starfa_csr *S = side ? f.St : f.S;
		/* Positive x (counts) with a few zeros; y mixed, some under the floor a. */
		starfa_sparse_values *X = NULL, *Y = NULL;
		CHECK_OK(starfa_sparse_values_create(f.t, (starfa_side)side, &X));
		CHECK_OK(starfa_sparse_values_create(f.t, (starfa_side)side, &Y));
		for (int op = 0; op < STARFA_VALUES_OPS + STARFA_REDUCE_OPS; op++) {
			int own = testing_below(&rng, 2); /* x: S's own values, or X's */
			/* X = |S| rounded to counts (some zero); Y = fresh values built by tasks. */
			CHECK_OK(starfa_insert_values_map(X, STARFA_VALUES_COPY, 0, 0, NULL));
			CHECK_OK(starfa_insert_values_map(X, STARFA_VALUES_MUL, 0, 0, NULL)); /* X = S∘S */
			CHECK_OK(starfa_sparse_values_gather(X, x));
			for (int64_t e = 0; e < nnz; e++)
				CHECK(x[e] == (float)((double)S->val[e] * S->val[e]));
			memcpy(sval, S->val, sizeof(float) * (size_t)nnz);
			const float *xs = own ? sval : x;
			float a = 0.05f, b = -0.5f;
			CHECK_OK(starfa_insert_values_map(Y, STARFA_VALUES_COPY, 0, 0, NULL));
			CHECK_OK(starfa_insert_values_map(Y, STARFA_VALUES_SCALE, 1.5f, -0.2f, NULL));
			CHECK_OK(starfa_sparse_values_gather(Y, y0));
			if (op < STARFA_VALUES_OPS) {
				if (op == STARFA_VALUES_SET || op == STARFA_VALUES_COPY)
					CHECK_OK(poison_values(Y)); /* these must not read y */
				CHECK_OK(starfa_insert_values_map(Y, (starfa_values_op)op, a, b, own ? NULL : X));
				CHECK_OK(starfa_sparse_values_gather(Y, got));
				for (int64_t e = 0; e < nnz; e++) {
					double ref = map_ref((starfa_values_op)op, a, b, xs[e], y0[e]);
					CHECK_MSG((isnan(ref) && isnan(got[e])) ||
							  fabs(got[e] - ref) <= 4 * FLT_EPSILON * (fabs(ref) + fabs(a * xs[e]) +
												   fabs(b * y0[e])) + 1e-37,
						  "side %d op %d entry %lld: x %g y %g gave %g, reference %g", side, op,
						  (long long)e, xs[e], y0[e], got[e], ref);
				}
			} else {
				int rop = op - STARFA_VALUES_OPS;
				double total = NAN, ref = 0, scale = 0;
				CHECK_OK(starfa_reduce_values(Y, (starfa_reduce_op)rop, a, own ? NULL : X, &total));
				for (int64_t e = 0; e < nnz; e++) {
					double term = reduce_ref((starfa_reduce_op)rop, a, xs[e], y0[e]);
					if (rop == STARFA_REDUCE_KL && xs[e] < 0) /* log of a negative: not a KL input */
						continue;
					ref += term;
					scale += fabs(term);
				}
				if (rop == STARFA_REDUCE_KL || rop == STARFA_REDUCE_XLOGY) {
					if (own) /* S's values are signed: those ops are for counts; check X's path */
						continue;
				}
				CHECK_MSG(isfinite(total) && fabs(total - ref) <= 1e-9 * scale + 1e-12,
					  "side %d reduce op %d: %.17g, reference %.17g", side, rop, total, ref);
			}
		}
		starfa_sparse_values_free(X);
		starfa_sparse_values_free(Y);
	}
	fixture_free(&f);
	free(x);
	free(y0);
	free(got);
	free(sval);
	return 0;
}

TEST(values, sddmm_alpha_beta_both_sides_transpose_and_spmm_cpu)
{
	return sddmm_both_sides(STARFA_WORKER_CPU, testing_seed() + 1);
}

TEST(values, maps_and_reductions_cpu)
{
	return maps_and_reductions(STARFA_WORKER_CPU, testing_seed() + 2);
}

/* Per-tile tasks check their operands and indices. */
TEST(values, per_tile_tasks_reject_bad_operands)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 3;
	struct fixture f;
	CHECK_OK(fixture_make(&f, 50, 40, 300, 4, &rng));
	starfa_sparse_values *P = NULL, *PT = NULL;
	CHECK_OK(starfa_sparse_values_create(f.t, STARFA_ROWS, &P));
	CHECK_OK(starfa_sparse_values_create(f.t, STARFA_COLS, &PT));
	int64_t nr = starfa_tiled_row_tiles(f.t), nc = starfa_tiled_col_tiles(f.t);
	CHECK(starfa_task_sddmm(f.t, nr, 0, f.dW, f.dH, STARFA_SDDMM_PATTERN, 1, 0, P, NULL) == STARFA_EINVAL);
	CHECK(strstr(starfa_last_error(), "outside") != NULL);
	CHECK(starfa_task_sddmm(f.t, 0, 0, f.dH, f.dW, STARFA_SDDMM_PATTERN, 1, 0, P, NULL) == STARFA_EINVAL);
	CHECK(starfa_task_sddmm(f.t, 0, 0, f.dW, f.dH, STARFA_SDDMM_PATTERN, 1, 0, PT, NULL) == STARFA_EINVAL);
	CHECK(starfa_task_values_transpose(P, 0, 0, P, NULL) == STARFA_EINVAL);
	CHECK(starfa_task_values_transpose(P, 0, nc, PT, NULL) == STARFA_EINVAL);
	CHECK(starfa_task_values_map(P, 0, 0, STARFA_VALUES_OPS, 0, 0, NULL, NULL) == STARFA_EINVAL);
	CHECK(starfa_task_values_map(P, 0, 0, STARFA_VALUES_MUL, 0, 0, PT, NULL) == STARFA_EINVAL);
	starfa_sums *sums = NULL;
	CHECK_OK(starfa_sums_create(2, &sums));
	CHECK(starfa_task_values_reduce(P, 0, 0, STARFA_REDUCE_SUM, 0, NULL, sums, 2, NULL) == STARFA_EINVAL);
	starfa_task_attr bad_worker = {0, 100000};
	CHECK(starfa_task_values_map(P, 0, 0, STARFA_VALUES_SET, 0, 0, NULL, &bad_worker) == STARFA_EINVAL ||
	      starfa_tiled_tile_nnz(f.t, 0, 0) == 0);
	starfa_task_attr prio = {5, 0};
	CHECK_OK(starfa_task_values_map(P, 0, 0, STARFA_VALUES_SET, 1, 0, NULL, &prio));
	CHECK_OK(starfa_wait());
	starfa_sums_free(sums);
	starfa_sparse_values_free(P);
	starfa_sparse_values_free(PT);
	fixture_free(&f);
	(void)nr;
	return 0;
}

/* The models' folder is the running StarPU's: in the test's private home, with no "//" and no trailing
 * slash; refused before the runtime starts and into a buffer too small for it. */
TEST(values, perfmodel_dir_is_the_homes)
{
	testing_home_private("dir-home");
	char dir[4096], tiny[8];
	const int before = starfa_perfmodel_dir(dir, sizeof dir);
	const char *before_msg = before ? strstr(starfa_last_error(), "not started") : NULL;
	int rc = testing_runtime();
	const int got = rc ? rc : starfa_perfmodel_dir(dir, sizeof dir);
	const int small = rc ? rc : starfa_perfmodel_dir(tiny, sizeof tiny);
	const char *home = getenv("STARPU_HOME");
	char want[1300];
	snprintf(want, sizeof want, "%s/.starpu/sampling/codelets/", home ? home : "?");
	for (char *w = want; (w = strstr(w, "//"));) /* a TMPDIR ending in / */
		memmove(w, w + 1, strlen(w));
	testing_home_restore();
	CHECK_OK(rc);
	CHECK(before == STARFA_EINVAL && before_msg);
	CHECK_OK(got);
	CHECK_MSG(strncmp(dir, want, strlen(want)) == 0 && !strstr(dir, "//") && dir[strlen(dir) - 1] != '/',
		  "the models' folder %s, expected under %s", dir, want);
	CHECK(small == STARFA_EINVAL);
	return 0;
}

/* Every codelet is registered once, by its declaration, and listed by name. */
TEST(values, perfmodel_symbols_come_from_the_registry)
{
	const char *const *s = starfa_perfmodel_symbols();
	const char *want[] = {"starfa_sddmm", "starfa_spmm", "starfa_spmm_band", "starfa_values_transpose", "starfa_values_map",
			      "starfa_values_reduce", "starfa_dense_map", "starfa_dense_colsum", "starfa_dense_rowsum",
			      "starfa_dense_reduce", "starfa_hermitian", "starfa_bias", "starfa_solve", "starfa_gram",
			      "starfa_rowsolve", "starfa_zero", "starfa_sgd", "starfa_dense_convert", "starfa_ccd_pass",
			      "starfa_ccd_solve", "starfa_ccd_band", "starfa_ccd_feature", "starfa_ccd_regularizer", "starfa_dense_cg", "starfa_sddmm_spmm", "starfa_sddmm_spmm_band",
			      "starfa_dense_dirichlet", "starfa_dense_uniform", "starfa_top_k", "starfa_sqerr_band"};
	int n = 0;
	while (s[n])
		n++;
	CHECK(n == (int)(sizeof want / sizeof want[0]));
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		int found = 0;
		for (int j = 0; j < n; j++)
			found += strcmp(s[j], want[i]) == 0;
		CHECK_MSG(found == 1, "%s listed %d times", want[i], found);
	}
	for (int j = 1; j < n; j++)
		CHECK(strcmp(s[j - 1], s[j]) < 0);
	return 0;
}

#ifdef STARFA_USE_CUDA

TEST(values_cuda, sddmm_alpha_beta_both_sides_transpose_and_spmm_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return sddmm_both_sides(STARFA_WORKER_CUDA, testing_seed() + 1);
}

TEST(values_cuda, maps_and_reductions_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return maps_and_reductions(STARFA_WORKER_CUDA, testing_seed() + 2);
}

#else

TEST(values_cuda, not_built)
{
	SKIP("starfa was configured without CUDA");
}

#endif
