/* solve: batched SPD systems, exact and by CG, FP32 and FP16 storage, the CPU kernel and the task graph
 * against a sequential double reference on fresh random inputs. */
#include "als_testing.h"

#include "cpu/half.h"
#include "cpu/solve.h"

static const int64_t ranks[] = {1, 2, 5, 8, 16, 17, 32, 65};
#define NRANKS (sizeof ranks / sizeof ranks[0])

/* Random batch: A_u = sum of n_u outer products (n_u may be 0: an empty row), lambda_u, the FP16 scale. */
struct batch {
	int64_t rows, k;
	float *A, *b, *info, *G, *X;
	uint16_t *A16;
};

static int batch_make(struct batch *bt, int64_t rows, int64_t k, uint64_t *rng)
{
	bt->rows = rows;
	bt->k = k;
	bt->A = als_alloc((size_t)(rows * k * k));
	bt->A16 = malloc(sizeof(uint16_t) * (size_t)(rows * k * k));
	bt->b = als_alloc((size_t)(rows * k));
	bt->X = als_alloc((size_t)(rows * k));
	bt->info = als_alloc((size_t)(2 * rows));
	bt->G = als_alloc((size_t)(k * k));
	float *v = als_alloc((size_t)k);
	if (!bt->A || !bt->A16 || !bt->b || !bt->X || !bt->info || !bt->G || !v)
		return 1;
	memset(bt->G, 0, sizeof(float) * (size_t)(k * k));
	for (int i = 0; i < 3; i++) {
		testing_fill_random(v, (size_t)k, rng);
		for (int64_t a = 0; a < k; a++)
			for (int64_t c = 0; c < k; c++)
				bt->G[a * k + c] += v[a] * v[c];
	}
	for (int64_t u = 0; u < rows; u++) {
		int64_t n = u % 7 == 0 ? 0 : (int64_t)testing_below(rng, (uint64_t)(2 * k + 2));
		float *A = bt->A + u * k * k;
		memset(A, 0, sizeof(float) * (size_t)(k * k));
		for (int64_t i = 0; i < n; i++) {
			testing_fill_random(v, (size_t)k, rng);
			for (int64_t a = 0; a < k; a++)
				for (int64_t c = 0; c < k; c++)
					A[a * k + c] += v[a] * v[c];
		}
		bt->info[2 * u] = (float)(0.05 + testing_uniform(rng));
		bt->info[2 * u + 1] = (float)(n + 1);
		for (int64_t i = 0; i < k * k; i++) /* stored scaled by 1 / s_u, as hermitian writes FP16 systems */
			bt->A16[u * k * k + i] = starfa_float_to_half(A[i] / bt->info[2 * u + 1]);
	}
	testing_fill_random(bt->b, (size_t)(rows * k), rng);
	free(v);
	return 0;
}

static void batch_free(struct batch *bt)
{
	free(bt->A);
	free(bt->A16);
	free(bt->b);
	free(bt->X);
	free(bt->info);
	free(bt->G);
}

/* M_u as the kernel sees it (from the stored values), in double. */
static void system_of(const struct batch *bt, int64_t u, int fp16, int gram, double *M)
{
	int64_t k = bt->k;
	for (int64_t i = 0; i < k * k; i++)
		M[i] = fp16 ? (double)bt->info[2 * u + 1] * starfa_half_to_float(bt->A16[u * k * k + i])
			    : (double)bt->A[u * k * k + i];
	for (int64_t i = 0; gram && i < k * k; i++)
		M[i] += bt->G[i];
	for (int64_t a = 0; a < k; a++)
		M[a * k + a] += bt->info[2 * u];
}

/* Backward error |M x - b|_inf / (|M|_inf max(|x|_inf, start) + |b|_inf), in double: CG's updates round
 * relative to where it started (start: the largest element of its warm start; 0 for Cholesky). */
static double backward_error(const double *M, const float *x, const float *b, int64_t k, double start)
{
	double res = 0, mnorm = 0, xnorm = 0, bnorm = 0;
	for (int64_t a = 0; a < k; a++)
		if (!isfinite(x[a]))
			return INFINITY; /* unwritten (NaN-poisoned) or overflowed: fmax below would skip it */
	for (int64_t a = 0; a < k; a++) {
		double s = 0, row = 0;
		for (int64_t c = 0; c < k; c++) {
			s += M[a * k + c] * x[c];
			row += fabs(M[a * k + c]);
		}
		res = fmax(res, fabs(s - b[a]));
		mnorm = fmax(mnorm, row);
		xnorm = fmax(xnorm, fabs(x[a]));
		bnorm = fmax(bnorm, fabs(b[a]));
	}
	if (res == 0)
		return 0; /* exact, also when x and b are both zero */
	return res / (mnorm * fmax(xnorm, start) + bnorm);
}

/* 1/2 x^T M x - b^T x: what CG decreases at every step. */
static double energy(const double *M, const float *x, const float *b, int64_t k)
{
	double e = 0;
	for (int64_t a = 0; a < k; a++) {
		double s = 0;
		for (int64_t c = 0; c < k; c++)
			s += M[a * k + c] * x[c];
		e += 0.5 * x[a] * s - (double)b[a] * x[a];
	}
	return e;
}

TEST(solve, cpu_kernel_matches_reference)
{
	uint64_t rng = testing_seed() + 30;
	for (size_t ki = 0; ki < NRANKS; ki++) {
		int64_t k = ranks[ki], rows = 40;
		struct batch bt;
		CHECK(batch_make(&bt, rows, k, &rng) == 0);
		double *M = malloc(sizeof(double) * (size_t)(k * k));
		float *x0 = als_alloc((size_t)(rows * k));
		CHECK(M && x0);
		testing_fill_random(x0, (size_t)(rows * k), &rng);
		for (int solver = 0; solver < 2; solver++)
			for (int fp16 = 0; fp16 < 2; fp16++)
				for (int gram = 0; gram < 2; gram++)
					for (int threads = 1; threads <= 3; threads += 2) {
						/* CG with 3k steps converges; Cholesky is exact up to rounding. */
						int steps = solver ? (int)(3 * k + 4) : 0;
						uint32_t st[STARFA_SOLVE_STATUS_WORDS];
						if (solver)
							memcpy(bt.X, x0, sizeof(float) * (size_t)(rows * k));
						else
							testing_poison(bt.X, (size_t)(rows * k));
						CHECK(starfa_cpu_solve(rows, k, fp16 ? (void *)bt.A16 : (void *)bt.A, fp16, bt.b, k,
								       bt.info, fp16 ? bt.info + 1 : NULL, 2, gram ? bt.G : NULL,
								       solver ? STARFA_CPU_CG : STARFA_CPU_CHOLESKY, steps, bt.X, k, st,
								       threads) == 0);
						CHECK_MSG(st[STARFA_SOLVE_BAD_ROWS] == 0 && st[STARFA_SOLVE_FIRST_BAD_ROW] == UINT32_MAX,
							  "%u bad rows", st[STARFA_SOLVE_BAD_ROWS]);
						for (int64_t u = 0; u < rows; u++) {
							system_of(&bt, u, fp16, gram, M);
							double err = backward_error(M, bt.X + u * k, bt.b + u * k, k,
										    solver ? 1.0 : 0.0);
							double tol = solver ? 2e-5 * sqrt((double)k) : 8.0 * (double)k * FLT_EPSILON;
							CHECK_MSG(err <= tol,
								  "k=%lld %s fp16=%d gram=%d threads=%d row %lld: backward error %.3g > %.3g",
								  (long long)k, solver ? "cg" : "cholesky", fp16, gram, threads,
								  (long long)u, err, tol);
						}
					}
		free(M);
		free(x0);
		batch_free(&bt);
	}
	return 0;
}

/* A few warm-started CG steps never raise the energy, and a row with neither system nor right-hand side
 * stays exactly at zero. */
TEST(solve, cg_steps_descend_from_warm_start)
{
	uint64_t rng = testing_seed() + 31;
	int64_t k = 24, rows = 30;
	struct batch bt;
	CHECK(batch_make(&bt, rows, k, &rng) == 0);
	float *x0 = als_alloc((size_t)(rows * k));
	double *M = malloc(sizeof(double) * (size_t)(k * k));
	CHECK(x0 && M);
	testing_fill_random(x0, (size_t)(rows * k), &rng);
	for (int64_t d = 0; d < k; d++) { /* row 0: no system, no right-hand side, starting at zero */
		x0[d] = 0;
		bt.b[d] = 0;
	}
	for (int steps = 1; steps <= 3; steps++) {
		memcpy(bt.X, x0, sizeof(float) * (size_t)(rows * k));
		uint32_t st[STARFA_SOLVE_STATUS_WORDS];
		CHECK(starfa_cpu_solve(rows, k, bt.A, 0, bt.b, k, bt.info, NULL, 2, NULL, STARFA_CPU_CG, steps, bt.X, k, st, 2) == 0);
		CHECK(st[STARFA_SOLVE_BAD_ROWS] == 0);
		for (int64_t u = 0; u < rows; u++) {
			system_of(&bt, u, 0, 0, M);
			double before = energy(M, x0 + u * k, bt.b + u * k, k), after = energy(M, bt.X + u * k, bt.b + u * k, k);
			CHECK_MSG(after <= before + 1e-5 * fabs(before), "steps=%d row %lld: energy %.9g -> %.9g", steps,
				  (long long)u, before, after);
		}
		for (int64_t d = 0; d < k; d++)
			CHECK(bt.X[d] == 0.0f);
	}
	free(x0);
	free(M);
	batch_free(&bt);
	return 0;
}

/* What a batch reports: a system that is not positive definite keeps its row, non-finite systems and
 * right-hand sides are told apart, and the first bad row is named. */
TEST(solve, status_names_bad_rows)
{
	uint64_t rng = testing_seed() + 32;
	int64_t k = 6, rows = 12;
	struct batch bt;
	CHECK(batch_make(&bt, rows, k, &rng) == 0);
	bt.info[2 * 3] = -1e6f;            /* row 3: lambda makes it negative definite */
	bt.A[5 * k * k + 7] = NAN;         /* row 5: a NaN in the system */
	bt.b[9 * k + 2] = INFINITY;        /* row 9: an infinite right-hand side */
	for (int solver = 0; solver < 2; solver++) {
		testing_fill_random(bt.X, (size_t)(rows * k), &rng);
		float keep[6];
		memcpy(keep, bt.X + 3 * k, sizeof keep);
		uint32_t st[STARFA_SOLVE_STATUS_WORDS];
		CHECK(starfa_cpu_solve(rows, k, bt.A, 0, bt.b, k, bt.info, NULL, 2, NULL,
				       solver ? STARFA_CPU_CG : STARFA_CPU_CHOLESKY, 5, bt.X, k, st, 2) == 0);
		CHECK_MSG(st[STARFA_SOLVE_BAD_ROWS] == 3 && st[STARFA_SOLVE_NOT_SPD] == 1 && st[STARFA_SOLVE_NONFINITE_A] == 1 &&
				  st[STARFA_SOLVE_NONFINITE_B] == 1 && st[STARFA_SOLVE_FIRST_BAD_ROW] == 3,
			  "solver %d: bad %u not_spd %u nonfinite A %u b %u first %u", solver, st[0], st[STARFA_SOLVE_NOT_SPD],
			  st[STARFA_SOLVE_NONFINITE_A], st[STARFA_SOLVE_NONFINITE_B], st[STARFA_SOLVE_FIRST_BAD_ROW]);
		if (solver == 0)
			CHECK(memcmp(keep, bt.X + 3 * k, sizeof keep) == 0);
	}
	batch_free(&bt);
	return 0;
}

/* Through StarPU: systems built by hermitian and bias tasks over a tiled matrix, solved per band (with
 * a Gram matrix from gram tasks, as implicit ALS does), against the systems read back. */
TEST(solve, task_graph_matches_reference)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 33;
	static const int64_t grids[][2] = {{1, 1}, {3, 2}, {4, 4}};
	for (size_t g = 0; g < 3; g++) {
		int64_t k = ranks[1 + testing_below(&rng, NRANKS - 1)];
		int solver = (int)testing_below(&rng, 2), fp16 = (int)testing_below(&rng, 2), gram = g == 1;
		starfa_csr *S = testing_random_csr(70, 60, 1200, 1.0, &rng);
		CHECK(S);
		float *X = als_alloc((size_t)(S->nrows * k)), *Y = als_alloc((size_t)(S->ncols * k));
		float *info = als_alloc((size_t)(2 * S->nrows)), *Gh = als_alloc((size_t)(k * k));
		CHECK(X && Y && info && Gh);
		testing_fill_random(X, (size_t)(S->nrows * k), &rng);
		testing_fill_random(Y, (size_t)(S->ncols * k), &rng);
		for (int64_t r = 0; r < S->nrows; r++) {
			info[2 * r] = 0.5f;
			info[2 * r + 1] = 1.0f + (float)(S->rowptr[r + 1] - S->rowptr[r]);
		}
		starfa_tiling_options opts = {grids[g][0], grids[g][1], 1};
		starfa_tiled *t = NULL;
		starfa_dense *dx = NULL, *dy = NULL, *di = NULL;
		starfa_systems *sys = NULL;
		starfa_gram *G = NULL;
		CHECK_OK(starfa_tiled_create(S, &opts, &t));
		CHECK_OK(starfa_dense_create(t, STARFA_ROWS, X, k, &dx));
		CHECK_OK(starfa_dense_create(t, STARFA_COLS, Y, k, &dy));
		CHECK_OK(starfa_dense_create(t, STARFA_ROWS, info, 2, &di));
		CHECK_OK(starfa_systems_create(t, STARFA_ROWS, k, fp16, 0, &sys));
		CHECK_OK(starfa_gram_create(k, &G));
		if (gram)
			CHECK_OK(starfa_insert_gram(dy, 0, k, G));
		int64_t nb = starfa_systems_bands(sys);
		for (int64_t b = 0; b < nb; b++) {
			CHECK_OK(starfa_insert_hermitian(t, STARFA_ROWS, b, dy, 0, STARFA_EXPLICIT, 0, di, sys));
			CHECK_OK(starfa_insert_bias(t, STARFA_ROWS, b, dy, 0, -1, 0.1f, STARFA_EXPLICIT, 0, sys));
			CHECK_OK(starfa_insert_solve(sys, b, di, gram ? G : NULL, solver ? STARFA_SOLVER_CG : STARFA_SOLVER_CHOLESKY,
						     (int)(3 * k + 4), dx, 0));
		}
		starfa_solve_report rep;
		CHECK_OK(starfa_systems_report(sys, &rep));
		CHECK_MSG(rep.bad_rows == 0 && rep.first_bad_row == -1, "%lld bad rows", (long long)rep.bad_rows);
		CHECK_OK(starfa_dense_sync(dx));
		CHECK_OK(starfa_gram_read(G, Gh));
		const int64_t *bounds = starfa_tiled_row_bounds(t);
		double *M = malloc(sizeof(double) * (size_t)(k * k));
		float *A = als_alloc((size_t)(S->nrows * k * k)), *b = als_alloc((size_t)(S->nrows * k));
		CHECK(M && A && b);
		for (int64_t band = 0; band < nb; band++)
			CHECK_OK(starfa_systems_read(sys, band, A + bounds[band] * k * k, b + bounds[band] * k));
		for (int64_t u = 0; u < S->nrows; u++) {
			double s = fp16 ? info[2 * u + 1] : 1.0;
			for (int64_t i = 0; i < k * k; i++)
				M[i] = s * A[u * k * k + i] + (gram ? Gh[i] : 0.0);
			for (int64_t a = 0; a < k; a++)
				M[a * k + a] += info[2 * u];
			double err = backward_error(M, X + u * k, b + u * k, k, solver ? 1.0 : 0.0);
			double tol = solver ? 2e-5 * sqrt((double)k) : 8.0 * (double)k * FLT_EPSILON;
			CHECK_MSG(err <= tol, "grid %zu k=%lld solver %d fp16 %d gram %d row %lld: backward error %.3g", g,
				  (long long)k, solver, fp16, gram, (long long)u, err);
		}
		free(M);
		free(A);
		free(b);
		CHECK(starfa_insert_solve(sys, 0, di, NULL, STARFA_SOLVER_CG, 0, dx, 0) == STARFA_EINVAL);
		CHECK(starfa_insert_solve(sys, nb, di, NULL, STARFA_SOLVER_CHOLESKY, 0, dx, 0) == STARFA_EINVAL);
		CHECK(starfa_insert_solve(sys, 0, di, NULL, STARFA_SOLVER_CHOLESKY, 0, dy, 0) == STARFA_EINVAL);
		starfa_gram_free(G);
		starfa_systems_free(sys);
		starfa_dense_free(dx);
		starfa_dense_free(dy);
		starfa_dense_free(di);
		starfa_tiled_free(t);
		starfa_csr_free(S);
		free(X);
		free(Y);
		free(info);
		free(Gh);
	}
	return 0;
}

#ifdef STARFA_USE_CUDA
#include "gpu/solve.h"
#include "testing_cuda.h"

/* Device copies of a batch. */
struct device_batch {
	float *A, *b, *info, *G, *X;
	uint16_t *A16;
	uint32_t *status;
};

static int device_batch_make(struct device_batch *d, const struct batch *bt)
{
	int64_t rows = bt->rows, k = bt->k;
	d->A = to_device(bt->A, sizeof(float) * (size_t)(rows * k * k));
	d->A16 = to_device(bt->A16, sizeof(uint16_t) * (size_t)(rows * k * k));
	d->b = to_device(bt->b, sizeof(float) * (size_t)(rows * k));
	d->info = to_device(bt->info, sizeof(float) * (size_t)(2 * rows));
	d->G = to_device(bt->G, sizeof(float) * (size_t)(k * k));
	d->X = to_device(NULL, sizeof(float) * (size_t)(rows * k));
	d->status = to_device(NULL, sizeof(uint32_t) * STARFA_SOLVE_STATUS_WORDS);
	return d->A && d->A16 && d->b && d->info && d->G && d->X && d->status ? 0 : 1;
}

static void device_batch_free(struct device_batch *d)
{
	cudaFree(d->A);
	cudaFree(d->A16);
	cudaFree(d->b);
	cudaFree(d->info);
	cudaFree(d->G);
	cudaFree(d->X);
	cudaFree(d->status);
}

/* Runs the CUDA solve on the batch (X from and back to bt->X) and reads the status words. */
static int cuda_solve(const struct batch *bt, const struct device_batch *d, int fp16, int gram, int cholesky, int steps,
		      uint32_t *st)
{
	int64_t rows = bt->rows, k = bt->k;
	CUDA_OK(cudaMemcpy(d->X, bt->X, sizeof(float) * (size_t)(rows * k), cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemset(d->status, 0x5a, sizeof(uint32_t) * STARFA_SOLVE_STATUS_WORDS)); /* must be overwritten */
	CUDA_OK(starfa_cuda_solve(rows, k, fp16 ? (const void *)d->A16 : (const void *)d->A, fp16, d->b, k, d->info,
				  fp16 ? d->info + 1 : NULL, 2, gram ? d->G : NULL, cholesky, steps, d->X, k, d->status, 0));
	CUDA_OK(cudaMemcpy(bt->X, d->X, sizeof(float) * (size_t)(rows * k), cudaMemcpyDeviceToHost));
	CUDA_OK(cudaMemcpy(st, d->status, sizeof(uint32_t) * STARFA_SOLVE_STATUS_WORDS, cudaMemcpyDeviceToHost));
	return 0;
}

/* The CUDA batch solve against the same reference, both solvers, FP16 and float32 systems, with and
 * without G, at ranks up to the kernel's limit. */
TEST(als_cuda, solve_matches_reference)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	static const int64_t cranks[] = {1, 2, 5, 16, 17, 33, 65, 100, 128, STARFA_CUDA_ALS_MAX_K};
	uint64_t rng = testing_seed() + 330;
	for (size_t ki = 0; ki < sizeof cranks / sizeof cranks[0]; ki++) {
		int64_t k = cranks[ki], rows = 24;
		struct batch bt;
		struct device_batch d;
		CHECK(batch_make(&bt, rows, k, &rng) == 0);
		CHECK(device_batch_make(&d, &bt) == 0);
		double *M = malloc(sizeof(double) * (size_t)(k * k));
		float *x0 = als_alloc((size_t)(rows * k));
		CHECK(M && x0);
		testing_fill_random(x0, (size_t)(rows * k), &rng);
		for (int solver = 0; solver < 2; solver++)
			for (int fp16 = 0; fp16 < 2; fp16++)
				for (int gram = 0; gram < 2; gram++) {
					int steps = solver ? (int)(3 * k + 4) : 0;
					uint32_t st[STARFA_SOLVE_STATUS_WORDS];
					if (solver)
						memcpy(bt.X, x0, sizeof(float) * (size_t)(rows * k));
					else
						testing_poison(bt.X, (size_t)(rows * k));
					if (cuda_solve(&bt, &d, fp16, gram, !solver, steps, st))
						return 1;
					CHECK_MSG(st[STARFA_SOLVE_BAD_ROWS] == 0 && st[STARFA_SOLVE_NOT_SPD] == 0 &&
							  st[STARFA_SOLVE_FIRST_BAD_ROW] == UINT32_MAX,
						  "k=%lld solver %d: %u bad rows", (long long)k, solver, st[STARFA_SOLVE_BAD_ROWS]);
					for (int64_t u = 0; u < rows; u++) {
						system_of(&bt, u, fp16, gram, M);
						double err = backward_error(M, bt.X + u * k, bt.b + u * k, k, solver ? 1.0 : 0.0);
						double tol = solver ? 2e-5 * sqrt((double)k) : 8.0 * (double)k * FLT_EPSILON;
						CHECK_MSG(err <= tol, "cuda k=%lld %s fp16=%d gram=%d row %lld: backward error %.3g > %.3g",
							  (long long)k, solver ? "cg" : "cholesky", fp16, gram, (long long)u, err, tol);
					}
				}
		free(M);
		free(x0);
		device_batch_free(&d);
		batch_free(&bt);
	}
	return 0;
}

/* Float32 Cholesky runs a warp a system, FP16 systems a block a system (warp_cholesky and solve_cholesky,
 * gpu/als_device.cuh): on systems whose float32 values are the FP16 ones times their scale, the two give
 * the same bits, with and without G, at ranks from one panel of 16 to the kernels' limit. */
TEST(als_cuda, solve_warp_cholesky_matches_block_form)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	static const int64_t cranks[] = {1, 5, 16, 17, 33, 100, 101, STARFA_CUDA_ALS_MAX_K};
	uint64_t rng = testing_seed() + 334;
	for (size_t ki = 0; ki < sizeof cranks / sizeof cranks[0]; ki++) {
		const int64_t k = cranks[ki], rows = 40;
		struct batch bt;
		CHECK(batch_make(&bt, rows, k, &rng) == 0);
		for (int64_t u = 0; u < rows; u++)
			for (int64_t i = 0; i < k * k; i++)
				bt.A[u * k * k + i] = bt.info[2 * u + 1] * starfa_half_to_float(bt.A16[u * k * k + i]);
		struct device_batch d;
		CHECK(device_batch_make(&d, &bt) == 0);
		float *xb = als_alloc((size_t)(rows * k));
		CHECK(xb);
		for (int gram = 0; gram < 2; gram++) {
			uint32_t st[STARFA_SOLVE_STATUS_WORDS];
			testing_poison(bt.X, (size_t)(rows * k));
			if (cuda_solve(&bt, &d, 1, gram, 1, 0, st))
				return 1;
			CHECK(st[STARFA_SOLVE_BAD_ROWS] == 0);
			memcpy(xb, bt.X, sizeof(float) * (size_t)(rows * k));
			testing_poison(bt.X, (size_t)(rows * k));
			if (cuda_solve(&bt, &d, 0, gram, 1, 0, st))
				return 1;
			CHECK(st[STARFA_SOLVE_BAD_ROWS] == 0);
			for (int64_t i = 0; i < rows * k; i++)
				CHECK_MSG(memcmp(xb + i, bt.X + i, sizeof(float)) == 0,
					  "k=%lld gram=%d row %lld element %lld: warp %.9g block %.9g", (long long)k, gram,
					  (long long)(i / k), (long long)(i % k), bt.X[i], xb[i]);
		}
		free(xb);
		device_batch_free(&d);
		batch_free(&bt);
	}
	return 0;
}

/* The CUDA solve reports bad rows as the CPU one does. */
TEST(als_cuda, solve_status_names_bad_rows)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	uint64_t rng = testing_seed() + 332;
	int64_t k = 6, rows = 12;
	struct batch bt;
	CHECK(batch_make(&bt, rows, k, &rng) == 0);
	bt.info[2 * 3] = -1e6f;
	bt.A[5 * k * k + 7] = NAN;
	bt.b[9 * k + 2] = INFINITY;
	struct device_batch d;
	CHECK(device_batch_make(&d, &bt) == 0);
	for (int solver = 0; solver < 2; solver++) {
		testing_fill_random(bt.X, (size_t)(rows * k), &rng);
		float keep[6];
		memcpy(keep, bt.X + 3 * k, sizeof keep);
		uint32_t st[STARFA_SOLVE_STATUS_WORDS];
		if (cuda_solve(&bt, &d, 0, 0, !solver, 5, st))
			return 1;
		CHECK_MSG(st[STARFA_SOLVE_BAD_ROWS] == 3 && st[STARFA_SOLVE_NOT_SPD] == 1 && st[STARFA_SOLVE_NONFINITE_A] == 1 &&
				  st[STARFA_SOLVE_NONFINITE_B] == 1 && st[STARFA_SOLVE_FIRST_BAD_ROW] == 3,
			  "cuda solver %d: bad %u not_spd %u nonfinite A %u b %u first %u", solver, st[0],
			  st[STARFA_SOLVE_NOT_SPD], st[STARFA_SOLVE_NONFINITE_A], st[STARFA_SOLVE_NONFINITE_B],
			  st[STARFA_SOLVE_FIRST_BAD_ROW]);
		if (solver == 0)
			CHECK(memcmp(keep, bt.X + 3 * k, sizeof keep) == 0);
	}
	device_batch_free(&d);
	batch_free(&bt);
	return 0;
}

/* The blocked Cholesky (panels of 16) stops at a bad pivot in a later panel too, and says which row. */
TEST(als_cuda, solve_finds_bad_pivots_in_later_panels)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	uint64_t rng = testing_seed() + 333;
	static const int64_t ks[] = {20, 40, 101};
	for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
		const int64_t k = ks[ki], rows = 9, late = k - 3;
		struct batch bt;
		CHECK(batch_make(&bt, rows, k, &rng) == 0);
		bt.A[4 * k * k + late * k + late] = -1e6f;  /* not positive definite, seen at pivot k - 3 */
		bt.A[7 * k * k + (k - 2) * k + k - 1] = NAN; /* not finite, late in the upper triangle */
		struct device_batch d;
		CHECK(device_batch_make(&d, &bt) == 0);
		testing_fill_random(bt.X, (size_t)(rows * k), &rng);
		float *keep = als_alloc((size_t)k);
		CHECK(keep);
		memcpy(keep, bt.X + 4 * k, sizeof(float) * (size_t)k);
		uint32_t st[STARFA_SOLVE_STATUS_WORDS];
		if (cuda_solve(&bt, &d, 0, 0, 1, 0, st))
			return 1;
		CHECK_MSG(st[STARFA_SOLVE_BAD_ROWS] == 2 && st[STARFA_SOLVE_NOT_SPD] == 1 && st[STARFA_SOLVE_NONFINITE_A] == 1 &&
				  st[STARFA_SOLVE_FIRST_BAD_ROW] == 4,
			  "k=%lld: bad %u not_spd %u nonfinite A %u first %u", (long long)k, st[0], st[STARFA_SOLVE_NOT_SPD],
			  st[STARFA_SOLVE_NONFINITE_A], st[STARFA_SOLVE_FIRST_BAD_ROW]);
		CHECK_MSG(memcmp(keep, bt.X + 4 * k, sizeof(float) * (size_t)k) == 0, "k=%lld: the failed row was written",
			  (long long)k);
		for (int64_t u = 0; u < rows; u++)
			for (int64_t c = 0; u != 4 && u != 7 && c < k; c++)
				CHECK_MSG(isfinite(bt.X[u * k + c]), "k=%lld: row %lld not finite", (long long)k, (long long)u);
		free(keep);
		device_batch_free(&d);
		batch_free(&bt);
	}
	return 0;
}
#endif
