/* rowsolve: ALS rows built and solved in one pass over several tiles (explicit and implicit, Cholesky,
 * CG on the formed system and matrix-free CG), the CPU kernel and the task graph, against a double
 * reference of the same systems. */
#include "als_testing.h"

#include "cpu/rowsolve.h"

#include <dlfcn.h>
#include <math.h>

/* A band of `rows` rows over `ntiles` tiles, each with its own theta block (ld = k + 2: column 0 the
 * explicit offset, columns 1..k theta). */
struct band {
	int64_t rows, k, ld;
	int ntiles;
	struct als_tile t[3];
	float *theta[3], *info, *G, *X;
	struct starfa_cpu_rowsolve_tile tiles[3];
};

static int band_make(struct band *bd, int64_t rows, int64_t k, int ntiles, int implicit, uint64_t *rng)
{
	bd->rows = rows;
	bd->k = k;
	bd->ld = k + 2;
	bd->ntiles = ntiles;
	for (int j = 0; j < ntiles; j++) {
		int64_t cols = 20 + (int64_t)testing_below(rng, 300);
		/* skew: heavy rows (past the panel chunk and the full-row threshold) and empty ones */
		if (als_tile_make(&bd->t[j], rows, cols, 15 * rows, j == 0 ? 1.5 : 0.5, implicit, rng))
			return 1;
		bd->theta[j] = als_alloc((size_t)(cols * bd->ld));
		if (!bd->theta[j])
			return 1;
		testing_fill_random(bd->theta[j], (size_t)(cols * bd->ld), rng);
		bd->tiles[j] = (struct starfa_cpu_rowsolve_tile){bd->t[j].rowptr, bd->t[j].colind, bd->t[j].csr->val,
								 bd->theta[j] + 1, bd->ld, implicit ? NULL : bd->theta[j]};
	}
	bd->info = als_alloc((size_t)(2 * rows));
	bd->G = als_alloc((size_t)(k * k));
	bd->X = als_alloc((size_t)(rows * k));
	float *v = als_alloc((size_t)k);
	if (!bd->info || !bd->G || !bd->X || !v)
		return 1;
	memset(bd->G, 0, sizeof(float) * (size_t)(k * k));
	for (int i = 0; i < 3; i++) {
		testing_fill_random(v, (size_t)k, rng);
		for (int64_t a = 0; a < k; a++)
			for (int64_t c = 0; c < k; c++)
				bd->G[a * k + c] += v[a] * v[c];
	}
	free(v);
	return 0;
}

static void band_free(struct band *bd)
{
	for (int j = 0; j < bd->ntiles; j++) {
		als_tile_free(&bd->t[j]);
		free(bd->theta[j]);
	}
	free(bd->info);
	free(bd->G);
	free(bd->X);
}

/* Row u's system and right-hand side in double, and |M|, |b| (the sums of the absolute values that
 * enter them in float32: cancellation in b must not tighten the bound) for the bound. */
static int64_t reference(const struct band *bd, const struct starfa_cpu_rowsolve *pb, int64_t u, double *M,
			 double *Mabs, double *b, double *babs)
{
	const int64_t k = bd->k;
	int64_t n = 0;
	memset(M, 0, sizeof(double) * (size_t)(k * k));
	memset(Mabs, 0, sizeof(double) * (size_t)(k * k));
	memset(b, 0, sizeof(double) * (size_t)k);
	memset(babs, 0, sizeof(double) * (size_t)k);
	for (int j = 0; j < bd->ntiles; j++) {
		const struct starfa_cpu_rowsolve_tile *t = &bd->tiles[j];
		for (uint32_t e = t->rowptr[u]; e < t->rowptr[u + 1]; e++, n++) {
			const float *th = t->theta + (int64_t)t->colind[e] * t->ld;
			double w = pb->implicit ? (double)pb->alpha * t->val[e] : 1.0;
			double tgt = pb->implicit ? 1.0 + w
						  : (double)t->val[e] - pb->mu - t->offset[(int64_t)t->colind[e] * t->ld];
			double tgt_abs = pb->implicit ? 1.0 + fabs(w)
						      : fabs(t->val[e]) + fabs(pb->mu) +
								fabs(t->offset[(int64_t)t->colind[e] * t->ld]);
			for (int64_t a = 0; a < k; a++) {
				b[a] += tgt * th[a];
				babs[a] += tgt_abs * fabs(th[a]);
				for (int64_t c = 0; c < k; c++) {
					M[a * k + c] += w * th[a] * th[c];
					Mabs[a * k + c] += fabs(w * th[a] * th[c]);
				}
			}
		}
	}
	for (int64_t i = 0; pb->G && i < k * k; i++) {
		M[i] += pb->G[i];
		Mabs[i] += fabs(pb->G[i]);
	}
	for (int64_t a = 0; a < k; a++) {
		M[a * k + a] += pb->lambda[u * pb->info_ld];
		Mabs[a * k + a] += fabs(pb->lambda[u * pb->info_ld]);
	}
	return n;
}

/* |M x - b|_inf / (|M|_inf max(|x|_inf, start) + |b|_inf), with |M| and |b| the sums of absolute terms. */
static double backward_error(const double *M, const double *Mabs, const float *x, const double *b,
			     const double *babs, int64_t k, double start)
{
	double res = 0, mnorm = 0, xnorm = 0, bnorm = 0;
	for (int64_t a = 0; a < k; a++)
		if (!isfinite(x[a]))
			return INFINITY; /* unwritten (NaN-poisoned) or overflowed: fmax below would skip it */
	for (int64_t a = 0; a < k; a++) {
		double s = 0, row = 0;
		for (int64_t c = 0; c < k; c++) {
			s += M[a * k + c] * x[c];
			row += Mabs[a * k + c];
		}
		res = fmax(res, fabs(s - b[a]));
		mnorm = fmax(mnorm, row);
		xnorm = fmax(xnorm, fabs(x[a]));
		bnorm = fmax(bnorm, fabs(babs[a]));
	}
	if (res == 0)
		return 0; /* exact, also when x and b are both zero (a row without entries) */
	return res / (mnorm * fmax(xnorm, start) + bnorm);
}

/* Solver variants: Cholesky; CG to convergence (formed systems); 3 CG steps on well-conditioned systems
 * (lambda dominates), matrix-free from rank 32 on. */
enum { CHOL, CG_LONG, CG_SHORT, NVARIANTS };

TEST(rowsolve, cpu_kernel_matches_reference)
{
	static const int64_t ranks[] = {1, 2, 5, 8, 16, 17, 32, 33, 65};
	uint64_t rng = testing_seed() + 70;
	CHECK(starfa_cpu_rowsolve_matrix_free(32, 3) && !starfa_cpu_rowsolve_matrix_free(17, 3));
	for (size_t ki = 0; ki < sizeof ranks / sizeof ranks[0]; ki++)
		for (int implicit = 0; implicit < 2; implicit++) {
			int64_t k = ranks[ki], rows = 37;
			struct band bd;
			CHECK(band_make(&bd, rows, k, 1 + (int)testing_below(&rng, 3), implicit, &rng) == 0);
			double *M = malloc(sizeof(double) * (size_t)(k * k)), *Mabs = malloc(sizeof(double) * (size_t)(k * k));
			double *b = malloc(sizeof(double) * (size_t)k), *babs = malloc(sizeof(double) * (size_t)k);
			float *x0 = als_alloc((size_t)(rows * k));
			CHECK(M && Mabs && b && babs && x0);
			testing_fill_random(x0, (size_t)(rows * k), &rng);
			for (int variant = 0; variant < NVARIANTS; variant++)
				for (int gram = 0; gram < 2; gram++)
					for (int threads = 1; threads <= 3; threads += 2) {
						for (int64_t u = 0; u < rows; u++) {
							int64_t n = 0;
							for (int j = 0; j < bd.ntiles; j++)
								n += bd.t[j].rowptr[u + 1] - bd.t[j].rowptr[u];
							/* well-conditioned for CG_SHORT: lambda >> the sum of the weighted terms */
							bd.info[2 * u] = variant == CG_SHORT ? (float)(60.0 * k * (n + 4))
											     : (float)(0.05 + testing_uniform(&rng));
							bd.info[2 * u + 1] = 1.0f;
						}
						struct starfa_cpu_rowsolve pb = {
							rows, k, bd.ntiles, bd.tiles, implicit, 0.7f, 0.3f, bd.info, 2,
							gram ? bd.G : NULL, variant == CHOL ? STARFA_CPU_CHOLESKY : STARFA_CPU_CG,
							variant == CG_LONG ? (int)(3 * k + 4) : 3, bd.X, k};
						if (variant == CHOL)
							testing_poison(bd.X, (size_t)(rows * k));
						else
							memcpy(bd.X, x0, sizeof(float) * (size_t)(rows * k));
						uint32_t st[STARFA_SOLVE_STATUS_WORDS];
						CHECK(starfa_cpu_rowsolve(&pb, st, threads) == 0);
						CHECK_MSG(st[STARFA_SOLVE_BAD_ROWS] == 0 && st[STARFA_SOLVE_FIRST_BAD_ROW] == UINT32_MAX,
							  "k=%lld implicit=%d variant=%d: %u bad rows", (long long)k, implicit, variant,
							  st[STARFA_SOLVE_BAD_ROWS]);
						for (int64_t u = 0; u < rows; u++) {
							int64_t n = reference(&bd, &pb, u, M, Mabs, b, babs);
							double err = backward_error(M, Mabs, bd.X + u * k, b, babs, k, variant == CHOL ? 0.0 : 1.0);
							double tol = variant == CHOL ? 8.0 * (double)(k + n) * FLT_EPSILON
										     : 2e-5 * sqrt((double)(k + n));
							CHECK_MSG(err <= tol,
								  "k=%lld implicit=%d variant=%d gram=%d threads=%d row %lld (%lld entries): "
								  "backward error %.3g > %.3g",
								  (long long)k, implicit, variant, gram, threads, (long long)u, (long long)n,
								  err, tol);
						}
					}
			free(M);
			free(Mabs);
			free(b);
			free(babs);
			free(x0);
			band_free(&bd);
		}
	return 0;
}

/* What a band reports: a system that is not positive definite keeps its row, non-finite systems and
 * right-hand sides are told apart, and the first bad row is named, on both solvers and both forms. */
/* The per-row cost the ALS graph balances its bands with follows rowsolve's cost model. */
TEST(rowsolve, row_cost_follows_the_cost_model)
{
	CHECK(fabs(starfa_rowsolve_row_cost(30, STARFA_SOLVER_CHOLESKY, 0, 0) - 10.0) < 1e-9); /* k^3/3 : k^2 */
	CHECK(fabs(starfa_rowsolve_row_cost(30, STARFA_SOLVER_CHOLESKY, 0, 1) - 10.0) < 1e-9);
	/* matrix-free CG (k >= 8 (steps + 1)): G's product k^2 against 4 k per entry, or vectors only */
	CHECK(fabs(starfa_rowsolve_row_cost(64, STARFA_SOLVER_CG, 3, 1) - 16.0) < 1e-9);
	CHECK(fabs(starfa_rowsolve_row_cost(64, STARFA_SOLVER_CG, 3, 0) - 1.0) < 1e-9);
	/* CG on a formed system (small k): (steps + 1) products with it against k^2 per entry */
	CHECK(fabs(starfa_rowsolve_row_cost(8, STARFA_SOLVER_CG, 3, 1) - 4.0) < 1e-9);
	CHECK(starfa_rowsolve_row_cost(0, STARFA_SOLVER_CG, 3, 1) == 0);
	return 0;
}

/* The kernels call LAPACK from StarPU's workers: a BLAS that starts threads of its own inside each
 * call fights the workers for the cores (OpenBLAS's potrf from k = 128 made ALS 400x slower). */
TEST(rowsolve, blas_runs_on_one_thread_under_the_runtime)
{
	int (*get)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
	if (!get)
		SKIP("the BLAS in this process is not OpenBLAS");
	CHECK_OK(testing_runtime());
	CHECK_MSG(get() == 1, "OpenBLAS runs %d threads under the runtime", get());
	return 0;
}

TEST(rowsolve, status_names_bad_rows)
{
	uint64_t rng = testing_seed() + 71;
	for (int variant = 0; variant < 4; variant++) {
		/* Cholesky at rank 6; CG on the formed system (rank 6); matrix-free CG (rank 40); Cholesky at
		 * rank 64, where the rows are shorter than k: their n x n form (rows 3..9 hold about 28 entries
		 * of the two tiles' 360, 64 is seven deviations past that) */
		int64_t k = variant == 3 ? 64 : variant == 2 ? 40 : 6, rows = 12;
		const int cholesky = variant == 0 || variant == 3;
		struct band bd;
		CHECK(band_make(&bd, rows, k, 2, 0, &rng) == 0);
		for (int64_t u = 0; u < rows; u++) {
			bd.info[2 * u] = 0.5f;
			bd.info[2 * u + 1] = 1.0f;
		}
		bd.info[2 * 3] = -1e9f; /* row 3: negative definite */
		/* row 5: a NaN in a theta it reads (a column only row 5 uses in tile 1, or its first entry's);
		 * row 9: an infinite rating (its right-hand side only) */
		struct als_tile *t = &bd.t[1];
		CHECK(t->rowptr[6] > t->rowptr[5] && t->rowptr[10] > t->rowptr[9]);
		uint32_t c5 = t->colind[t->rowptr[5]];
		int shared = 0;
		for (int64_t u = 0; u < rows; u++)
			for (uint32_t e = t->rowptr[u]; u != 5 && e < t->rowptr[u + 1]; e++)
				shared |= t->colind[e] == c5;
		if (shared) { /* give row 5's first entry a column of its own */
			c5 = (uint32_t)t->csr->ncols;
			float *grown = realloc(bd.theta[1], sizeof(float) * (size_t)((c5 + 1) * bd.ld));
			CHECK(grown);
			bd.theta[1] = grown;
			testing_fill_random(grown + c5 * bd.ld, (size_t)bd.ld, &rng);
			bd.tiles[1].theta = grown + 1;
			bd.tiles[1].offset = grown;
			t->colind[t->rowptr[5]] = c5;
		}
		bd.theta[1][c5 * bd.ld + 1 + k / 2] = NAN;
		t->csr->val[t->rowptr[9]] = INFINITY;
		testing_fill_random(bd.X, (size_t)(rows * k), &rng);
		float keep[64];
		memcpy(keep, bd.X + 3 * k, sizeof(float) * (size_t)k);
		struct starfa_cpu_rowsolve pb = {rows, k, bd.ntiles, bd.tiles, 0, 0, 0.1f, bd.info, 2, NULL,
						 cholesky ? STARFA_CPU_CHOLESKY : STARFA_CPU_CG, 3, bd.X, k};
		CHECK(starfa_cpu_rowsolve_matrix_free(k, 3) == (k >= 40));
		for (int64_t u = 3; variant == 3 && u <= 9; u += 2) {
			uint32_t n = bd.t[0].rowptr[u + 1] - bd.t[0].rowptr[u] + t->rowptr[u + 1] - t->rowptr[u];
			CHECK_MSG(n < (uint32_t)k, "row %lld has %u entries: not a short row", (long long)u, n);
		}
		uint32_t st[STARFA_SOLVE_STATUS_WORDS];
		CHECK(starfa_cpu_rowsolve(&pb, st, 2) == 0);
		CHECK_MSG(st[STARFA_SOLVE_BAD_ROWS] == 3 && st[STARFA_SOLVE_NOT_SPD] == 1 && st[STARFA_SOLVE_NONFINITE_A] == 1 &&
				  st[STARFA_SOLVE_NONFINITE_B] == 1 && st[STARFA_SOLVE_FIRST_BAD_ROW] == 3,
			  "variant %d: bad %u not_spd %u nonfinite A %u b %u first %u", variant, st[0],
			  st[STARFA_SOLVE_NOT_SPD], st[STARFA_SOLVE_NONFINITE_A], st[STARFA_SOLVE_NONFINITE_B],
			  st[STARFA_SOLVE_FIRST_BAD_ROW]);
		if (cholesky)
			CHECK(memcmp(keep, bd.X + 3 * k, sizeof(float) * (size_t)k) == 0);
		band_free(&bd);
	}
	return 0;
}

/* Through StarPU, both sides of a tiled matrix: each band's rowsolve against the systems that
 * hermitian, bias (and gram, implicit) tasks build for the same band, read back. */
TEST(rowsolve, task_graph_matches_reference)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 72;
	static const int64_t grids[][2] = {{1, 1}, {3, 2}, {4, 4}};
	for (size_t g = 0; g < 3; g++)
		for (int side = 0; side < 2; side++) {
			static const int64_t ks[] = {3, 17, 40};
			int64_t k = ks[testing_below(&rng, 3)], w = k + 2;
			int implicit = (int)((g + side) % 2), solver = (int)testing_below(&rng, 2);
			starfa_csr *S = testing_random_csr(70, 60, 1200, 1.0, &rng);
			CHECK(S);
			for (int64_t p = 0; implicit && p < S->nnz; p++)
				S->val[p] = fabsf(S->val[p]);
			int64_t rows = side ? S->ncols : S->nrows, others = side ? S->nrows : S->ncols;
			float *X = als_alloc((size_t)(rows * w)), *Y = als_alloc((size_t)(others * w));
			float *info = als_alloc((size_t)(2 * rows)), *Gh = als_alloc((size_t)(k * k));
			CHECK(X && Y && info && Gh);
			testing_fill_random(X, (size_t)(rows * w), &rng);
			testing_fill_random(Y, (size_t)(others * w), &rng);
			for (int64_t r = 0; r < rows; r++) {
				info[2 * r] = 0.5f;
				info[2 * r + 1] = 1.0f;
				if (!solver) /* Cholesky must write every unknown */
					testing_poison(X + r * w + 1, (size_t)k);
			}
			float *X0 = als_alloc((size_t)(rows * w));
			CHECK(X0);
			memcpy(X0, X, sizeof(float) * (size_t)(rows * w));
			starfa_side sd = side ? STARFA_COLS : STARFA_ROWS, od = side ? STARFA_ROWS : STARFA_COLS;
			starfa_tiling_options opts = {grids[g][0], grids[g][1], 1};
			starfa_tiled *t = NULL;
			starfa_dense *dx = NULL, *dy = NULL, *di = NULL;
			starfa_systems *sys = NULL, *ref = NULL;
			starfa_gram *G = NULL;
			CHECK_OK(starfa_tiled_create(S, &opts, &t));
			CHECK_OK(starfa_dense_create(t, sd, X, w, &dx));
			CHECK_OK(starfa_dense_create(t, od, Y, w, &dy));
			CHECK_OK(starfa_dense_create(t, sd, info, 2, &di));
			CHECK_OK(starfa_systems_create(t, sd, k, 0, 0, &sys));
			CHECK_OK(starfa_systems_create(t, sd, k, 0, 0, &ref));
			CHECK_OK(starfa_gram_create(k, &G));
			starfa_feedback fb = implicit ? STARFA_IMPLICIT : STARFA_EXPLICIT;
			int64_t offset = implicit ? -1 : 0, steps = solver ? 3 * k + 4 : 0;
			if (implicit)
				CHECK_OK(starfa_insert_gram(dy, 1, k, G));
			int64_t nb = starfa_systems_bands(sys);
			for (int64_t b = 0; b < nb; b++) {
				CHECK_OK(starfa_insert_hermitian(t, sd, b, dy, 1, fb, 0.6f, di, ref));
				CHECK_OK(starfa_insert_bias(t, sd, b, dy, 1, offset, 0.2f, fb, 0.6f, ref));
				CHECK_OK(starfa_insert_rowsolve(t, sd, b, dy, 1, offset, 0.2f, fb, 0.6f, di, implicit ? G : NULL,
								solver ? STARFA_SOLVER_CG : STARFA_SOLVER_CHOLESKY, (int)steps, dx, 1,
								sys));
			}
			starfa_solve_report rep;
			CHECK_OK(starfa_systems_report(sys, &rep));
			CHECK_MSG(rep.bad_rows == 0 && rep.first_bad_row == -1, "%lld bad rows", (long long)rep.bad_rows);
			CHECK_OK(starfa_dense_sync(dx));
			CHECK_OK(starfa_gram_read(G, Gh));
			const int64_t *bounds = side ? starfa_tiled_col_bounds(t) : starfa_tiled_row_bounds(t);
			double *M = malloc(sizeof(double) * (size_t)(k * k)), *Mabs = malloc(sizeof(double) * (size_t)(k * k));
			double *bd = malloc(sizeof(double) * (size_t)k);
			float *A = als_alloc((size_t)(rows * k * k)), *b = als_alloc((size_t)(rows * k));
			CHECK(M && Mabs && bd && A && b);
			for (int64_t band = 0; band < nb; band++)
				CHECK_OK(starfa_systems_read(ref, band, A + bounds[band] * k * k, b + bounds[band] * k));
			for (int64_t u = 0; u < rows; u++) {
				for (int64_t i = 0; i < k * k; i++) {
					M[i] = A[u * k * k + i] + (implicit ? Gh[i] : 0.0);
					Mabs[i] = fabs(M[i]);
				}
				for (int64_t a = 0; a < k; a++) {
					M[a * k + a] += info[2 * u];
					Mabs[a * k + a] += info[2 * u];
					bd[a] = b[u * k + a];
				}
				double err = backward_error(M, Mabs, X + u * w + 1, bd, bd, k, solver ? 1.0 : 0.0); /* the float system itself */
				/* the reference systems are float sums themselves: allow their rounding */
				double tol = solver ? 2e-5 * sqrt((double)k) : 64.0 * (double)k * FLT_EPSILON;
				CHECK_MSG(err <= tol, "grid %zu side %d k=%lld implicit %d solver %d row %lld: backward error %.3g", g,
					  side, (long long)k, implicit, solver, (long long)u, err);
				CHECK(X[u * w] == X0[u * w] && X[u * w + k + 1] == X0[u * w + k + 1]); /* the other columns kept */
			}
			free(M);
			free(Mabs);
			free(bd);
			free(A);
			free(b);
			CHECK(starfa_insert_rowsolve(t, sd, 0, dy, 1, offset, 0, fb, 0.6f, di, NULL, STARFA_SOLVER_CG, 0, dx, 1,
						     sys) == STARFA_EINVAL);
			CHECK(starfa_insert_rowsolve(t, sd, nb, dy, 1, offset, 0, fb, 0.6f, di, NULL, STARFA_SOLVER_CHOLESKY, 0,
						     dx, 1, sys) == STARFA_EINVAL);
			CHECK(starfa_insert_rowsolve(t, sd, 0, dx, 1, offset, 0, fb, 0.6f, di, NULL, STARFA_SOLVER_CHOLESKY, 0,
						     dy, 1, sys) == STARFA_EINVAL);
			starfa_gram_free(G);
			starfa_systems_free(sys);
			starfa_systems_free(ref);
			starfa_dense_free(dx);
			starfa_dense_free(dy);
			starfa_dense_free(di);
			starfa_tiled_free(t);
			starfa_csr_free(S);
			free(X);
			free(X0);
			free(Y);
			free(info);
			free(Gh);
		}
	return 0;
}

#ifdef STARFA_USE_CUDA
#include "gpu/rowsolve.h"
#include "testing_cuda.h"

/* A band's device copies and the fused kernel's problem over them. */
struct device_band {
	uint32_t *rowptr[3], *colind[3], *items, *items_host;
	float *val[3], *theta[3], *info, *G, *X;
	uint32_t *status;
	starfa_cuda_rowsolve *pb;
};

static void device_band_free(struct device_band *d, int ntiles)
{
	for (int j = 0; j < ntiles; j++) {
		cudaFree(d->rowptr[j]);
		cudaFree(d->colind[j]);
		cudaFree(d->val[j]);
		cudaFree(d->theta[j]);
	}
	cudaFree(d->items);
	free(d->items_host);
	cudaFree(d->info);
	cudaFree(d->G);
	cudaFree(d->X);
	cudaFree(d->status);
	free(d->pb);
}

/* Copies the band and plans it with segments of seg entries. */
static int device_band_make(struct device_band *d, const struct band *bd, int64_t seg)
{
	memset(d, 0, sizeof *d);
	d->pb = calloc(1, sizeof *d->pb);
	CHECK(d->pb);
	const uint32_t *rowptrs[3];
	for (int j = 0; j < bd->ntiles; j++) {
		const starfa_csr *c = bd->t[j].csr;
		d->rowptr[j] = to_device(bd->t[j].rowptr, sizeof(uint32_t) * (size_t)(bd->rows + 1));
		d->colind[j] = to_device(bd->t[j].colind, sizeof(uint32_t) * (size_t)c->nnz);
		d->val[j] = to_device(c->val, sizeof(float) * (size_t)c->nnz);
		d->theta[j] = to_device(bd->theta[j], sizeof(float) * (size_t)(c->ncols * bd->ld));
		CHECK(d->rowptr[j] && d->colind[j] && d->val[j] && d->theta[j]);
		rowptrs[j] = bd->t[j].rowptr;
		d->pb->tiles[j] = (starfa_cuda_rowsolve_tile){d->rowptr[j], d->colind[j], d->val[j], d->theta[j] + 1,
							       d->theta[j], bd->ld};
	}
	uint32_t *items = NULL;
	int64_t nitems = 0, nparts = 0;
	CHECK(starfa_rowsolve_plan(bd->rows, bd->ntiles, rowptrs, seg, &items, &nitems, &nparts) == 0);
	d->items = to_device(items, sizeof(uint32_t) * (size_t)(nitems * STARFA_ROWSOLVE_ITEM_WORDS));
	d->items_host = items;
	d->info = to_device(NULL, sizeof(float) * (size_t)(2 * bd->rows));
	d->G = to_device(bd->G, sizeof(float) * (size_t)(bd->k * bd->k));
	d->X = to_device(NULL, sizeof(float) * (size_t)(bd->rows * bd->k));
	d->status = to_device(NULL, sizeof(uint32_t) * STARFA_SOLVE_STATUS_WORDS);
	CHECK(d->items && d->info && d->G && d->X && d->status);
	starfa_cuda_rowsolve *pb = d->pb;
	pb->nrows = bd->rows;
	pb->k = bd->k;
	pb->ntiles = bd->ntiles;
	pb->lambda = d->info;
	pb->info_ld = 2;
	pb->X = d->X;
	pb->ldx = bd->k;
	pb->items = d->items;
	pb->items_host = d->items_host;
	pb->nitems = nitems;
	pb->nparts = nparts;
	return 0;
}

/* Runs the fused kernel from bd->X (and bd->info), back into bd->X; the status words into st. */
static int device_band_run(struct device_band *d, struct band *bd, uint32_t *st)
{
	const size_t xs = sizeof(float) * (size_t)(bd->rows * bd->k);
	CUDA_OK(cudaMemcpy(d->X, bd->X, xs, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(d->info, bd->info, sizeof(float) * (size_t)(2 * bd->rows), cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemset(d->status, 0x5a, sizeof(uint32_t) * STARFA_SOLVE_STATUS_WORDS));
	CUDA_OK(starfa_cuda_rowsolve_run(d->pb, d->status, 0));
	CUDA_OK(cudaMemcpy(bd->X, d->X, xs, cudaMemcpyDeviceToHost));
	CUDA_OK(cudaMemcpy(st, d->status, sizeof(uint32_t) * STARFA_SOLVE_STATUS_WORDS, cudaMemcpyDeviceToHost));
	return 0;
}

/* The fused CUDA kernel against the double reference: ranks to its limit, explicit and implicit, the
 * three solver settings, with and without G, 37 rows (3000 at k = 16), rows whole (segments of 8192) and cut into segments of 5
 * entries (most rows split, the parts summed by the last block); the same bits on a second run; and
 * against the CPU kernel where the systems are well conditioned. */
TEST(als_cuda, rowsolve_matches_reference)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	static const int64_t cranks[] = {1, 5, 16, 17, 33, 64, 101, 128, STARFA_CUDA_ALS_MAX_K};
	static const int64_t quick_ranks[] = {17, 101}; /* STARFA_TEST_QUICK: the short rows' and the Gram kernel's
							 * instances at one small and the benchmark's rank */
	const int64_t *ranks = testing_quick() ? quick_ranks : cranks;
	const size_t nranks = testing_quick() ? sizeof quick_ranks / sizeof quick_ranks[0] : sizeof cranks / sizeof cranks[0];
	uint64_t rng = testing_seed() + 340;
	for (size_t ki = 0; ki < nranks; ki++)
		for (int implicit = 0; implicit < 2; implicit++)
			for (int split = 0; split < 2; split++) {
				/* at k = 16, more short rows than the device holds blocks: blocks of the short rows with G
				 * solve several rows each */
				int64_t k = ranks[ki], rows = k == 16 ? 3000 : 37;
				struct band bd;
				struct device_band d;
				CHECK(band_make(&bd, rows, k, 1 + (int)testing_below(&rng, 3), implicit, &rng) == 0);
				if (device_band_make(&d, &bd, split ? 5 : STARFA_CUDA_ROWSOLVE_SEGMENT))
					return 1;
				CHECK(!split || d.pb->nparts > 0);
				double *M = malloc(sizeof(double) * (size_t)(k * k)), *Mabs = malloc(sizeof(double) * (size_t)(k * k));
				double *b = malloc(sizeof(double) * (size_t)k), *babs = malloc(sizeof(double) * (size_t)k);
				float *x0 = als_alloc((size_t)(rows * k)), *x1 = als_alloc((size_t)(rows * k));
				float *xc = als_alloc((size_t)(rows * k));
				CHECK(M && Mabs && b && babs && x0 && x1 && xc);
				testing_fill_random(x0, (size_t)(rows * k), &rng);
				/* each solver at the precision the codelet gives it (3xFP16 under Cholesky, 3xBF16 under
				 * CG), and at k = 17 and 101 at the other one and at 3xTF32 too */
				const int nprec = k == 17 || k == 101 ? 3 : 1;
				for (int variant = 0; variant < NVARIANTS; variant++)
					for (int gp = 0; gp < 2 * nprec; gp++) {
						const int gram = gp & 1;
						const starfa_cuda_gram_precision prec =
							gp >= 4 ? STARFA_CUDA_GRAM_3XTF32
							: (variant == CHOL) == (gp < 2) ? STARFA_CUDA_GRAM_3XFP16 : STARFA_CUDA_GRAM_3XBF16;
						/* 3xBF16 sums are good to about 3 2^-18 a term, not float32's 2^-24 */
						const double loose = prec == STARFA_CUDA_GRAM_3XBF16 ? (variant == CHOL ? 16.0 : 8.0) : 1.0;
						for (int64_t u = 0; u < rows; u++) {
							int64_t n = 0;
							for (int j = 0; j < bd.ntiles; j++)
								n += bd.t[j].rowptr[u + 1] - bd.t[j].rowptr[u];
							bd.info[2 * u] = variant == CG_SHORT ? (float)(60.0 * k * (n + 4))
											     : (float)(0.05 + testing_uniform(&rng));
							bd.info[2 * u + 1] = 1.0f;
						}
						starfa_cuda_rowsolve *pb = d.pb;
						pb->implicit = implicit;
						pb->alpha = 0.7f;
						pb->mu = 0.3f;
						pb->G = gram ? d.G : NULL;
						pb->cholesky = variant == CHOL;
						/* Cholesky: the codelet's n x n form threshold; CG: matrix-free on rows of up to 3k
						 * entries (the codelet's 1.5 k, and longer), so rows longer than k take it too */
						pb->short_rows = variant == CHOL ? starfa_cuda_rowsolve_short_rows(k, 1) : (int)(3 * k);
						pb->cg_steps = variant == CG_LONG ? (int)(3 * k + 4) : 3;
						pb->precision = prec;
						struct starfa_cpu_rowsolve cpb = {
							rows, k, bd.ntiles, bd.tiles, implicit, 0.7f, 0.3f, bd.info, 2, gram ? bd.G : NULL,
							variant == CHOL ? STARFA_CPU_CHOLESKY : STARFA_CPU_CG, pb->cg_steps, xc, k};
						uint32_t st[STARFA_SOLVE_STATUS_WORDS];
						for (int run = 0; run < 2; run++) {
							if (variant == CHOL)
								testing_poison(bd.X, (size_t)(rows * k));
							else
								memcpy(bd.X, x0, sizeof(float) * (size_t)(rows * k));
							if (device_band_run(&d, &bd, st))
								return 1;
							CHECK_MSG(st[STARFA_SOLVE_BAD_ROWS] == 0 && st[STARFA_SOLVE_NOT_SPD] == 0 &&
									  st[STARFA_SOLVE_FIRST_BAD_ROW] == UINT32_MAX,
								  "cuda k=%lld implicit=%d variant=%d precision=%d: %u bad rows",
								  (long long)k, implicit, variant, (int)prec, st[STARFA_SOLVE_BAD_ROWS]);
							if (run == 0)
								memcpy(x1, bd.X, sizeof(float) * (size_t)(rows * k));
						}
						CHECK_MSG(memcmp(x1, bd.X, sizeof(float) * (size_t)(rows * k)) == 0,
							  "cuda k=%lld split=%d: two runs differ", (long long)k, split);
						if (variant == CHOL) { /* the Cholesky in the Gram kernel's blocks: the same bits */
							pb->fused_cholesky = 1;
							testing_poison(bd.X, (size_t)(rows * k));
							int failed = device_band_run(&d, &bd, st);
							pb->fused_cholesky = 0;
							if (failed)
								return 1;
							CHECK_MSG(memcmp(x1, bd.X, sizeof(float) * (size_t)(rows * k)) == 0,
								  "cuda k=%lld implicit=%d split=%d gram=%d precision=%d: a warp a system "
								  "and the Gram kernel's blocks differ",
								  (long long)k, implicit, split, gram, (int)prec);
						}
						for (int64_t u = 0; u < rows; u++) {
							int64_t n = reference(&bd, &cpb, u, M, Mabs, b, babs);
							double err = backward_error(M, Mabs, bd.X + u * k, b, babs, k,
										    variant == CHOL ? 0.0 : 1.0);
							double tol = loose * (variant == CHOL ? 8.0 * (double)(k + n) * FLT_EPSILON
											      : 2e-5 * sqrt((double)(k + n)));
							CHECK_MSG(err <= tol,
								  "cuda k=%lld implicit=%d split=%d variant=%d gram=%d precision=%d row "
								  "%lld (%lld entries): backward error %.3g > %.3g",
								  (long long)k, implicit, split, variant, gram, (int)prec, (long long)u,
								  (long long)n, err, tol);
						}
						if (variant == CG_SHORT) { /* well conditioned: the two kernels agree */
							memcpy(xc, x0, sizeof(float) * (size_t)(rows * k));
							CHECK(starfa_cpu_rowsolve(&cpb, st, 1) == 0);
							for (int64_t i = 0; i < rows * k; i++)
								CHECK_MSG(fabsf(xc[i] - bd.X[i]) <= 1e-4f * (1.0f + fabsf(xc[i])),
									  "cuda k=%lld element %lld: cuda %g cpu %g", (long long)k,
									  (long long)i, bd.X[i], xc[i]);
						}
					}
				free(M);
				free(Mabs);
				free(b);
				free(babs);
				free(x0);
				free(x1);
				free(xc);
				device_band_free(&d, bd.ntiles);
				band_free(&bd);
			}
	return 0;
}

/* 3xFP16's scales under the fused kernel's Cholesky: theta rows whose magnitudes differ by up to 2^24 from
 * item to item, the whole of theta at 2^-30, 1 and 2^30 (lambda with it), targets or weights at 2^20:
 * 3xFP16 and 3xTF32 within the same backward error (norm-wise), rows whole and cut into segments. */
TEST(als_cuda, rowsolve_fp16_scales_cover_wide_magnitudes)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	static const int64_t cranks[] = {17, 101};
	static const int gexp[] = {-30, 0, 30};
	uint64_t rng = testing_seed() + 345;
	for (size_t ki = 0; ki < sizeof cranks / sizeof cranks[0]; ki++)
		for (int implicit = 0; implicit < 2; implicit++)
			for (size_t gi = 0; gi < sizeof gexp / sizeof gexp[0]; gi++) {
				const int64_t k = cranks[ki], rows = 37;
				struct band bd;
				struct device_band d;
				CHECK(band_make(&bd, rows, k, 1 + (int)testing_below(&rng, 3), implicit, &rng) == 0);
				for (int j = 0; j < bd.ntiles; j++) {
					starfa_csr *c = bd.t[j].csr;
					for (int64_t col = 0; col < c->ncols; col++) {
						const int e = gexp[gi] - 12 + (int)testing_below(&rng, 25);
						for (int64_t dd = 0; dd < bd.ld; dd++)
							bd.theta[j][col * bd.ld + dd] = ldexpf(bd.theta[j][col * bd.ld + dd], e);
					}
					for (int64_t e = 0; e < c->nnz; e++)
						c->val[e] = ldexpf(c->val[e], 20);
				}
				const int split = gi == 1;
				if (device_band_make(&d, &bd, split ? 5 : STARFA_CUDA_ROWSOLVE_SEGMENT))
					return 1;
				double *M = malloc(sizeof(double) * (size_t)(k * k)), *Mabs = malloc(sizeof(double) * (size_t)(k * k));
				double *b = malloc(sizeof(double) * (size_t)k), *babs = malloc(sizeof(double) * (size_t)k);
				CHECK(M && Mabs && b && babs);
				for (int64_t u = 0; u < rows; u++) {
					/* lambda at the largest terms' scale (items', and weights'): at the smallest's, the
					 * rows of fewer entries than k would be singular to float32 */
					bd.info[2 * u] = ldexpf((float)(0.05 + testing_uniform(&rng)), 2 * gexp[gi] + 24 + (implicit ? 20 : 0));
					bd.info[2 * u + 1] = 1.0f;
				}
				starfa_cuda_rowsolve *pb = d.pb;
				pb->implicit = implicit;
				pb->alpha = 0.7f;
				pb->mu = 0.3f;
				pb->G = NULL;
				pb->cholesky = 1;
				pb->short_rows = starfa_cuda_rowsolve_short_rows(k, 1);
				pb->cg_steps = 0;
				struct starfa_cpu_rowsolve cpb = {rows, k, bd.ntiles, bd.tiles, implicit, 0.7f, 0.3f, bd.info, 2, NULL,
								  STARFA_CPU_CHOLESKY, 0, NULL, k};
				static const starfa_cuda_gram_precision precs[] = {STARFA_CUDA_GRAM_3XTF32, STARFA_CUDA_GRAM_3XFP16};
				for (int pi = 0; pi < 2; pi++) {
					pb->precision = precs[pi];
					uint32_t st[STARFA_SOLVE_STATUS_WORDS];
					testing_poison(bd.X, (size_t)(rows * k));
					if (device_band_run(&d, &bd, st))
						return 1;
					CHECK_MSG(st[STARFA_SOLVE_BAD_ROWS] == 0, "cuda k=%lld implicit=%d theta at 2^%d %s: %u bad rows",
						  (long long)k, implicit, gexp[gi], pi ? "3xfp16" : "3xtf32", st[STARFA_SOLVE_BAD_ROWS]);
					for (int64_t u = 0; u < rows; u++) {
						int64_t n = reference(&bd, &cpb, u, M, Mabs, b, babs);
						double err = backward_error(M, Mabs, bd.X + u * k, b, babs, k, 0.0);
						double tol = 8.0 * (double)(k + n) * FLT_EPSILON;
						CHECK_MSG(err <= tol,
							  "cuda k=%lld implicit=%d split=%d theta at 2^%d %s row %lld (%lld entries): "
							  "backward error %.3g > %.3g",
							  (long long)k, implicit, split, gexp[gi], pi ? "3xfp16" : "3xtf32", (long long)u,
							  (long long)n, err, tol);
					}
				}
				free(M);
				free(Mabs);
				free(b);
				free(babs);
				device_band_free(&d, bd.ntiles);
				band_free(&bd);
			}
	return 0;
}

/* The work list: every entry of every row covered once, longest rows first, segments of long rows
 * consecutive and numbered. */
TEST(als_cuda, rowsolve_plan_covers_every_entry)
{
	uint64_t rng = testing_seed() + 341;
	struct band bd;
	CHECK(band_make(&bd, 50, 4, 3, 0, &rng) == 0);
	const uint32_t *rowptrs[3] = {bd.t[0].rowptr, bd.t[1].rowptr, bd.t[2].rowptr};
	for (int64_t seg = 1; seg <= 40; seg += 13) {
		uint32_t *items = NULL;
		int64_t nitems = 0, nparts = 0, covered[50] = {0}, prev = INT64_MAX, parts = 0;
		CHECK(starfa_rowsolve_plan(50, 3, rowptrs, seg, &items, &nitems, &nparts) == 0);
		for (int64_t i = 0; i < nitems; i++) {
			const uint32_t *it = items + i * STARFA_ROWSOLVE_ITEM_WORDS;
			int64_t u = it[0], n = 0;
			for (int j = 0; j < 3; j++)
				n += rowptrs[j][u + 1] - rowptrs[j][u];
			CHECK(u < 50 && it[1] <= it[2] && it[2] <= n && it[2] - it[1] <= seg);
			CHECK_MSG(n <= prev || it[1] > 0, "rows out of order: %lld after %lld entries", (long long)n,
				  (long long)prev);
			if (it[1] == 0)
				prev = n;
			CHECK(it[5] == (n > seg ? (uint32_t)((n + seg - 1) / seg) : 1u));
			if (it[5] > 1) {
				CHECK(it[3] == it[4] + it[1] / seg && it[3] < nparts);
				parts++;
			}
			covered[u] += it[2] - it[1];
		}
		for (int64_t u = 0; u < 50; u++) {
			int64_t n = 0;
			for (int j = 0; j < 3; j++)
				n += rowptrs[j][u + 1] - rowptrs[j][u];
			CHECK(covered[u] == n);
		}
		CHECK(parts == nparts);
		free(items);
	}
	band_free(&bd);
	return 0;
}

/* The fused CUDA kernel reports bad rows as the CPU one does. */
TEST(als_cuda, rowsolve_status_names_bad_rows)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	uint64_t rng = testing_seed() + 342;
	/* k = 6: the rows are longer than k; k = 192: shorter, so the Cholesky variant solves them in their
	 * n x n form, which must fall back on the k x k one for the non-finite inputs */
	for (int variant = 0; variant < 4; variant++) {
		int64_t k = variant < 2 ? 6 : STARFA_CUDA_ALS_MAX_K, rows = 12;
		struct band bd;
		CHECK(band_make(&bd, rows, k, 2, 0, &rng) == 0);
		for (int64_t u = 0; u < rows; u++) {
			bd.info[2 * u] = 0.5f;
			bd.info[2 * u + 1] = 1.0f;
		}
		bd.info[2 * 3] = -1e9f;
		struct als_tile *t = &bd.t[1];
		CHECK(t->rowptr[6] > t->rowptr[5] && t->rowptr[10] > t->rowptr[9]);
		uint32_t c5 = (uint32_t)t->csr->ncols; /* row 5's first entry gets a column of its own */
		float *grown = realloc(bd.theta[1], sizeof(float) * (size_t)((c5 + 1) * bd.ld));
		CHECK(grown);
		bd.theta[1] = grown;
		testing_fill_random(grown + c5 * bd.ld, (size_t)bd.ld, &rng);
		t->colind[t->rowptr[5]] = c5;
		t->csr->ncols++;
		bd.theta[1][c5 * bd.ld + 1 + k / 2] = NAN;
		t->csr->val[t->rowptr[9]] = INFINITY;
		struct device_band d;
		if (device_band_make(&d, &bd, STARFA_CUDA_ROWSOLVE_SEGMENT))
			return 1;
		d.pb->mu = 0.1f;
		d.pb->cholesky = variant % 2 == 0;
		d.pb->short_rows = (int)k;
		d.pb->cg_steps = 3;
		for (int64_t u = 3; k > 6 && u <= 9; u += 2) {
			uint32_t n = bd.t[0].rowptr[u + 1] - bd.t[0].rowptr[u] + t->rowptr[u + 1] - t->rowptr[u];
			CHECK_MSG(n < (uint32_t)k, "row %lld has %u entries: not a short row", (long long)u, n);
		}
		testing_fill_random(bd.X, (size_t)(rows * k), &rng);
		float keep[STARFA_CUDA_ALS_MAX_K];
		memcpy(keep, bd.X + 3 * k, sizeof(float) * (size_t)k);
		uint32_t st[STARFA_SOLVE_STATUS_WORDS];
		if (device_band_run(&d, &bd, st))
			return 1;
		CHECK_MSG(st[STARFA_SOLVE_BAD_ROWS] == 3 && st[STARFA_SOLVE_NOT_SPD] == 1 && st[STARFA_SOLVE_NONFINITE_A] == 1 &&
				  st[STARFA_SOLVE_NONFINITE_B] == 1 && st[STARFA_SOLVE_FIRST_BAD_ROW] == 3,
			  "cuda variant %d: bad %u not_spd %u nonfinite A %u b %u first %u", variant, st[0],
			  st[STARFA_SOLVE_NOT_SPD], st[STARFA_SOLVE_NONFINITE_A], st[STARFA_SOLVE_NONFINITE_B],
			  st[STARFA_SOLVE_FIRST_BAD_ROW]);
		if (variant % 2 == 0)
			CHECK(memcmp(keep, bd.X + 3 * k, sizeof(float) * (size_t)k) == 0);
		device_band_free(&d, bd.ntiles);
		band_free(&bd);
	}
	return 0;
}

/* Ratings 1..5 on about a fraction `density` of a rows x cols grid, at random (NULL when out of memory). */
static starfa_coo *random_ratings(int64_t rows, int64_t cols, double density, uint64_t rng)
{
	starfa_coo *coo = starfa_coo_new(rows, cols, rows * cols);
	if (!coo)
		return NULL;
	int64_t e = 0;
	for (int64_t u = 0; u < rows; u++)
		for (int64_t i = 0; i < cols; i++)
			if (testing_uniform(&rng) < density) {
				coo->row[e] = (int32_t)u;
				coo->col[e] = (int32_t)i;
				coo->val[e] = (float)(1 + testing_below(&rng, 5));
				e++;
			}
	coo->nnz = e;
	return coo;
}

struct rs_history {
	double loss[8];
	int64_t cpu_tasks, cuda_tasks;
};

static int rs_record(const starfa_als_progress *p, void *user_data)
{
	struct rs_history *h = user_data;
	if (p->iteration < 8)
		h->loss[p->iteration] = p->train_loss;
	h->cpu_tasks += p->stats.tasks[STARFA_WORKER_CPU];
	h->cuda_tasks += p->stats.tasks[STARFA_WORKER_CUDA];
	return 0;
}

/* Explicit and implicit ALS with every task on the GPU (no CPU worker) train as on the CPU alone: the
 * same losses, iteration by iteration, up to the rounding of the two kernels. */
TEST(als_cuda, training_on_cuda_workers_matches_cpu)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	starfa_coo *coo = random_ratings(300, 200, 0.1, testing_seed() + 343);
	CHECK(coo);
	for (int algo = 0; algo < 2; algo++) {
		struct rs_history h[2];
		memset(h, 0, sizeof h);
		for (int gpu = 0; gpu < 2; gpu++) {
			CHECK_OK(testing_runtime_only(gpu ? STARFA_WORKER_CUDA : STARFA_WORKER_CPU));
			starfa_als_options ao;
			starfa_als_options_default(&ao, algo ? STARFA_ALGO_IALS : STARFA_ALGO_ALS);
			ao.iters = 5;
			ao.rank = 24;
			starfa_model *m = NULL;
			CHECK_OK(starfa_als_train(coo, NULL, &ao, rs_record, &h[gpu], &m));
			starfa_model_free(m);
		}
		CHECK_MSG(h[1].cpu_tasks == 0 && h[1].cuda_tasks > 0 && h[0].cuda_tasks == 0,
			  "tasks: GPU run %lld cpu %lld cuda, CPU run %lld cuda", (long long)h[1].cpu_tasks,
			  (long long)h[1].cuda_tasks, (long long)h[0].cuda_tasks);
		for (int i = 1; i <= 5; i++)
			CHECK_MSG(fabs(h[1].loss[i] - h[0].loss[i]) <= 1e-3 * fabs(h[0].loss[i]),
				  "algo %d iteration %d: loss %.7g on the GPU, %.7g on the CPU", algo, i, h[1].loss[i],
				  h[0].loss[i]);
	}
	starfa_coo_free(coo);
	CHECK_OK(testing_runtime());
	return 0;
}

/* GPU workers only and a rank beyond the CUDA kernels: a clear error before any task, not a failed
 * submission. */
TEST(als_cuda, rank_beyond_the_cuda_kernels_asks_for_cpu_workers)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	starfa_coo *coo = starfa_coo_new(4, 3, 12);
	CHECK(coo);
	for (int64_t e = 0; e < 12; e++) {
		coo->row[e] = (int32_t)(e / 3);
		coo->col[e] = (int32_t)(e % 3);
		coo->val[e] = (float)(1 + e % 5);
	}
	coo->nnz = 12;
	CHECK_OK(testing_runtime_only(STARFA_WORKER_CUDA));
	starfa_als_options ao;
	starfa_als_options_default(&ao, STARFA_ALGO_ALS);
	ao.iters = 1;
	ao.rank = starfa_als_cuda_max_k(); /* with the bias, one unknown too many */
	starfa_model *m = NULL;
	int rc = starfa_als_train(coo, NULL, &ao, NULL, NULL, &m);
	CHECK_MSG(rc == STARFA_EINVAL && m == NULL && strstr(starfa_last_error(), "at most") &&
			  strstr(starfa_last_error(), "CPU workers"),
		  "rc %d: %s", rc, starfa_last_error());
	ao.rank = starfa_als_cuda_max_k() - 1; /* k = the limit: runs on the GPU */
	CHECK_OK(starfa_als_train(coo, NULL, &ao, NULL, NULL, &m));
	starfa_model_free(m);
	starfa_coo_free(coo);
	CHECK_OK(testing_runtime());
	return 0;
}

/* GPUs and cores, the default placement, and a rank beyond the CUDA kernels: every band goes to the
 * cores (a grid placed on the GPUs would leave its tasks no worker), row by row and with stored systems,
 * and trains as on the cores alone. */
TEST(als_cuda, rank_beyond_the_cuda_kernels_runs_on_the_cores)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	CHECK_OK(testing_runtime());
	if (starfa_worker_count(STARFA_WORKER_CPU) == 0 || starfa_worker_count(STARFA_WORKER_CUDA) == 0)
		SKIP("needs CPU and CUDA workers");
	starfa_coo *coo = random_ratings(60, 40, 0.3, testing_seed() + 757);
	CHECK(coo);
	for (int stored = 0; stored < 2; stored++) {
		struct rs_history h[2];
		memset(h, 0, sizeof h);
		for (int all = 0; all < 2; all++) {
			CHECK_OK(all ? testing_runtime() : testing_runtime_only(STARFA_WORKER_CPU));
			starfa_als_options ao;
			starfa_als_options_default(&ao, STARFA_ALGO_ALS);
			ao.iters = 2;
			ao.rank = starfa_als_cuda_max_k(); /* with the bias, one unknown beyond the GPUs */
			ao.stored_systems = stored;
			starfa_model *m = NULL;
			int rc = starfa_als_train(coo, NULL, &ao, rs_record, &h[all], &m);
			CHECK_MSG(rc == 0, "stored %d, %s workers: %s", stored, all ? "all" : "CPU", starfa_last_error());
			starfa_model_free(m);
		}
		CHECK_MSG(h[1].cuda_tasks == 0 && h[1].cpu_tasks > 0, "stored %d: %lld cpu, %lld cuda tasks", stored,
			  (long long)h[1].cpu_tasks, (long long)h[1].cuda_tasks);
		for (int i = 1; i <= 2; i++)
			CHECK_MSG(fabs(h[1].loss[i] - h[0].loss[i]) <= 1e-3 * fabs(h[0].loss[i]),
				  "stored %d iteration %d: loss %.7g with every worker, %.7g on the cores", stored, i,
				  h[1].loss[i], h[0].loss[i]);
	}
	starfa_coo_free(coo);
	CHECK_OK(testing_runtime());
	return 0;
}

#else

TEST(als_cuda, not_built)
{
	SKIP("starfa was configured without CUDA");
}

#endif
