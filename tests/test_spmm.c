/* SpMM: the CPU kernel, both CUDA implementations and the task graph on both sides, each against
 * the sequential reference on fresh random inputs with NaN-poisoned outputs. */
#include "testing.h"

#include "cpu/spmm.h"
#ifdef STARFA_USE_CUDA
#include "gpu/spmm.h"
#include "testing_cuda.h"
#include <cusparse.h>
#endif

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Ranks around the warp width and the vector widths, plus odd ones. */
static const int64_t ranks[] = {1, 3, 4, 7, 8, 16, 31, 32, 33, 64, 100, 128, 257};
#define NRANKS (sizeof ranks / sizeof ranks[0])

/* What the padding of a strided matrix holds: a kernel that writes past k changes it. */
#define PAD_SENTINEL 12345.0f

/* One matrix as a single tile, with 32-bit offsets as the kernels take them, and the same
 * nonzeros split at a column into two tiles of one band (columns below the cut, the rest),
 * each keeping the matrix's rows and column indices. */
struct one_tile {
	starfa_csr *csr;
	uint32_t *rowptr, *colind;
	uint32_t *part_rowptr[2], *part_colind[2];
	float *part_val[2];
	int64_t part_nnz[2];
};

static int make_tile(struct one_tile *t, int64_t m, int64_t n, int64_t nnz, double skew, uint64_t *rng)
{
	memset(t, 0, sizeof *t);
	t->csr = testing_random_csr(m, n, nnz, skew, rng);
	if (!t->csr)
		return 1;
	const starfa_csr *S = t->csr;
	t->rowptr = malloc(sizeof(uint32_t) * (size_t)(m + 1));
	t->colind = malloc(sizeof(uint32_t) * (size_t)(S->nnz + 1));
	for (int h = 0; h < 2; h++) {
		t->part_rowptr[h] = malloc(sizeof(uint32_t) * (size_t)(m + 1));
		t->part_colind[h] = malloc(sizeof(uint32_t) * (size_t)(S->nnz + 1));
		t->part_val[h] = malloc(sizeof(float) * (size_t)(S->nnz + 1));
		if (!t->part_rowptr[h] || !t->part_colind[h] || !t->part_val[h])
			return 1;
	}
	if (!t->rowptr || !t->colind)
		return 1;
	for (int64_t r = 0; r <= m; r++)
		t->rowptr[r] = (uint32_t)S->rowptr[r];
	for (int64_t p = 0; p < S->nnz; p++)
		t->colind[p] = (uint32_t)S->colind[p];
	int64_t cut = n / 3 + (int64_t)testing_below(rng, (uint64_t)(n / 3 + 1));
	int64_t fill[2] = {0, 0};
	for (int64_t r = 0; r < m; r++) {
		t->part_rowptr[0][r] = (uint32_t)fill[0];
		t->part_rowptr[1][r] = (uint32_t)fill[1];
		for (int64_t p = S->rowptr[r]; p < S->rowptr[r + 1]; p++) {
			int h = S->colind[p] >= cut;
			t->part_colind[h][fill[h]] = (uint32_t)S->colind[p];
			t->part_val[h][fill[h]] = S->val[p];
			fill[h]++;
		}
	}
	t->part_rowptr[0][m] = (uint32_t)fill[0];
	t->part_rowptr[1][m] = (uint32_t)fill[1];
	t->part_nnz[0] = fill[0];
	t->part_nnz[1] = fill[1];
	return 0;
}

static void free_tile(struct one_tile *t)
{
	starfa_csr_free(t->csr);
	free(t->rowptr);
	free(t->colind);
	for (int h = 0; h < 2; h++) {
		free(t->part_rowptr[h]);
		free(t->part_colind[h]);
		free(t->part_val[h]);
	}
}

/* rows x k values stored with leading dimension ld; the padding holds PAD_SENTINEL. */
static float *to_strided(const float *x, int64_t rows, int64_t k, int64_t ld)
{
	float *out = malloc(sizeof(float) * (size_t)(rows * ld + 1));
	if (!out)
		return NULL;
	for (int64_t r = 0; r < rows; r++)
		for (int64_t d = 0; d < ld; d++)
			out[r * ld + d] = d < k ? (x ? x[r * k + d] : NAN) : PAD_SENTINEL;
	return out;
}

/* Copies the rows x k values out of a strided matrix; 0 if the padding is untouched. */
static int from_strided(const float *y, int64_t rows, int64_t k, int64_t ld, float *out)
{
	int padding_intact = 1;
	for (int64_t r = 0; r < rows; r++)
		for (int64_t d = 0; d < ld; d++) {
			if (d < k)
				out[r * k + d] = y[r * ld + d];
			else if (y[r * ld + d] != PAD_SENTINEL)
				padding_intact = 0;
		}
	return padding_intact ? 0 : 1;
}

/* The CPU kernel, overwriting (beta 0) and accumulating a band's second tile onto its first
 * (beta 1), on 1, 2 and 4 threads, with strided X and Y. */
TEST(spmm, cpu_kernel_matches_reference)
{
	uint64_t rng = testing_seed();
	for (size_t ki = 0; ki < NRANKS; ki++) {
		int64_t k = ranks[ki];
		struct one_tile t;
		/* Skewed: empty rows, heavy rows, and a thread split that is not by rows. */
		CHECK(make_tile(&t, 97 + (int64_t)testing_below(&rng, 200), 50 + (int64_t)testing_below(&rng, 200), 3000,
				1.5, &rng) == 0);
		const starfa_csr *S = t.csr;
		int64_t ldx = k + 3, ldy = k + 5;
		float *X = malloc(sizeof(float) * (size_t)(S->ncols * k));
		float *Y = malloc(sizeof(float) * (size_t)(S->nrows * k));
		float *Y_first = malloc(sizeof(float) * (size_t)(S->nrows * k));
		CHECK(X && Y && Y_first);
		testing_fill_random(X, (size_t)(S->ncols * k), &rng);
		float *Xs = to_strided(X, S->ncols, k, ldx);
		CHECK(Xs);
		for (int threads = 1; threads <= 4; threads *= 2)
			for (int split = 0; split < 2; split++) {
				float *Ys = to_strided(NULL, S->nrows, k, ldy); /* NaN-poisoned */
				CHECK(Ys);
				if (!split) {
					starfa_cpu_spmm(S->nrows, t.rowptr, t.colind, S->val, Xs, ldx, k, 0, Ys, ldy,
							threads);
				} else {
					starfa_cpu_spmm(S->nrows, t.part_rowptr[0], t.part_colind[0], t.part_val[0], Xs,
							ldx, k, 0, Ys, ldy, threads);
					starfa_cpu_spmm(S->nrows, t.part_rowptr[1], t.part_colind[1], t.part_val[1], Xs,
							ldx, k, 1, Ys, ldy, threads);
				}
				CHECK_MSG(from_strided(Ys, S->nrows, k, ldy, Y) == 0,
					  "k=%lld threads=%d split=%d: wrote into Y's padding", (long long)k, threads,
					  split);
				free(Ys);
				int rc = starfa_check_spmm(S, X, k, Y, NULL);
				CHECK_MSG(rc == 0, "k=%lld threads=%d split=%d: %s", (long long)k, threads, split,
					  starfa_last_error());
				/* Every row adds its nonzeros in CSR order: the same bits whatever the threads
				 * and however the band is split into tiles. */
				if (threads == 1 && !split)
					memcpy(Y_first, Y, sizeof(float) * (size_t)(S->nrows * k));
				else
					CHECK_MSG(memcmp(Y, Y_first, sizeof(float) * (size_t)(S->nrows * k)) == 0,
						  "k=%lld threads=%d split=%d: not the bits of one thread, one tile",
						  (long long)k, threads, split);
			}
		free(X);
		free(Xs);
		free(Y);
		free(Y_first);
		free_tile(&t);
	}
	return 0;
}

/* A 4 x 3 matrix with an empty row, built by hand. */
static starfa_csr *small_with_empty_row(void)
{
	static const int32_t rows[] = {0, 0, 2, 3, 3, 3};
	static const int32_t cols[] = {0, 2, 1, 0, 1, 2};
	static const float vals[] = {0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.75f};
	starfa_coo *coo = starfa_coo_new(4, 3, 6);
	if (!coo)
		return NULL;
	memcpy(coo->row, rows, sizeof rows);
	memcpy(coo->col, cols, sizeof cols);
	memcpy(coo->val, vals, sizeof vals);
	coo->nnz = 6;
	starfa_csr *csr = NULL;
	int rc = starfa_csr_from_coo(coo, &csr);
	starfa_coo_free(coo);
	return rc ? NULL : csr;
}

/* The reference must catch what it is there to catch: an unwritten element, a wrong one, and
 * anything but zero in an empty row. */
TEST(spmm, reference_rejects_wrong_results)
{
	uint64_t rng = testing_seed() + 1;
	starfa_csr *S = small_with_empty_row();
	CHECK(S);
	int64_t k = 5;
	float X[3 * 5], Y[4 * 5];
	testing_fill_random(X, 15, &rng);
	uint32_t rowptr[5], colind[6];
	for (int r = 0; r <= 4; r++)
		rowptr[r] = (uint32_t)S->rowptr[r];
	for (int p = 0; p < 6; p++)
		colind[p] = (uint32_t)S->colind[p];
	starfa_cpu_spmm(4, rowptr, colind, S->val, X, k, k, 0, Y, k, 1);
	CHECK_OK(starfa_check_spmm(S, X, k, Y, NULL));
	starfa_check_report rep;
	Y[2 * 5 + 3] = NAN;
	CHECK(starfa_check_spmm(S, X, k, Y, &rep) == STARFA_ECHECK);
	CHECK(rep.failed == 1 && rep.worst_index == 2 * 5 + 3);
	starfa_cpu_spmm(4, rowptr, colind, S->val, X, k, k, 0, Y, k, 1);
	Y[3 * 5 + 4] *= 1.001f;
	Y[3 * 5 + 4] += 1e-3f;
	CHECK(starfa_check_spmm(S, X, k, Y, &rep) == STARFA_ECHECK);
	CHECK(rep.failed == 1 && rep.worst_index == 3 * 5 + 4);
	starfa_cpu_spmm(4, rowptr, colind, S->val, X, k, k, 0, Y, k, 1);
	Y[1 * 5 + 0] = 1e-30f; /* row 1 is empty */
	CHECK(starfa_check_spmm(S, X, k, Y, &rep) == STARFA_ECHECK);
	CHECK(rep.failed == 1 && rep.worst_index == 1 * 5 + 0);
	CHECK(strstr(starfa_last_error(), "(1, 0)") != NULL);
	starfa_csr_free(S);
	return 0;
}

/* A matrix whose nonzeros crowd into its first rows and columns, plus one row (past the middle)
 * reaching columns past the middle and one column likewise: a 16 x 16 grid then has row bands
 * and column bands with no nonzero at all, whose output blocks only a zero fill writes. */
static starfa_csr *crowded_csr(int64_t m, int64_t n, uint64_t *rng)
{
	starfa_coo *coo = starfa_coo_new(m, n, 240);
	if (!coo)
		return NULL;
	int64_t e = 0;
	for (; e < 200; e++) {
		coo->row[e] = (int32_t)testing_below(rng, 8);
		coo->col[e] = (int32_t)testing_below(rng, 6);
	}
	for (; e < 220; e++) {
		coo->row[e] = (int32_t)(m / 2 + 1);
		coo->col[e] = (int32_t)(n / 2 + testing_below(rng, (uint64_t)(n - n / 2)));
	}
	for (; e < 240; e++) {
		coo->row[e] = (int32_t)(m / 2 + testing_below(rng, (uint64_t)(m - m / 2)));
		coo->col[e] = (int32_t)(n / 2 + 1);
	}
	for (e = 0; e < 240; e++)
		coo->val[e] = (float)(2.0 * testing_uniform(rng) - 1.0);
	coo->nnz = 240;
	starfa_csr *csr = NULL;
	int rc = starfa_csr_from_coo(coo, &csr);
	starfa_coo_free(coo);
	return rc ? NULL : csr;
}

/* Output blocks of a side that no nonzero reaches. */
static int64_t empty_bands(const starfa_tiled *t, starfa_side side)
{
	int64_t rt = starfa_tiled_row_tiles(t), ct = starfa_tiled_col_tiles(t), empty = 0;
	int64_t bands = side == STARFA_ROWS ? rt : ct, across = side == STARFA_ROWS ? ct : rt;
	for (int64_t b = 0; b < bands; b++) {
		int64_t nnz = 0;
		for (int64_t a = 0; a < across; a++)
			nnz += side == STARFA_ROWS ? starfa_tiled_tile_nnz(t, b, a) : starfa_tiled_tile_nnz(t, a, b);
		empty += nnz == 0;
	}
	return empty;
}

/* Tasks one insert_spmm makes: one a band of the output's side (its band task, or a zero fill where
 * the band has no entries). */
static int64_t expected_tasks(const starfa_tiled *t, starfa_side side)
{
	return side == STARFA_ROWS ? starfa_tiled_row_tiles(t) : starfa_tiled_col_tiles(t);
}

/* Y = S·X or Sᵀ·X through the task graph into NaN-poisoned Y, checked against the reference;
 * then once more into the same Y, which must be overwritten, not added to. With `bitwise`, Y
 * must also have the bits of the CPU kernel on the whole matrix as one tile. */
static int run_graph(const starfa_tiled *t, const starfa_csr *S, const starfa_csr *St, starfa_side side, int64_t k,
		     uint64_t *rng, int bitwise)
{
	const starfa_csr *op = side == STARFA_ROWS ? S : St; /* Y = op · X */
	size_t nx = (size_t)(op->ncols * k), ny = (size_t)(op->nrows * k);
	float *Xd = malloc(sizeof(float) * nx), *Yd = malloc(sizeof(float) * ny);
	CHECK(Xd && Yd);
	testing_fill_random(Xd, nx, rng);
	testing_poison(Yd, ny);
	starfa_dense *x = NULL, *y = NULL;
	CHECK_OK(starfa_dense_create(t, side == STARFA_ROWS ? STARFA_COLS : STARFA_ROWS, Xd, k, &x));
	CHECK_OK(starfa_dense_create(t, side, Yd, k, &y));
	const char *name = side == STARFA_ROWS ? "S*X" : "S^T*X";
	for (int round = 0; round < 2; round++) {
		CHECK_OK(starfa_insert_spmm(t, side, x, y));
		CHECK_OK(starfa_wait());
		CHECK_OK(starfa_dense_sync(y));
		CHECK_MSG(starfa_check_spmm(op, Xd, k, Yd, NULL) == 0, "%s grid %lldx%lld k=%lld round %d: %s", name,
			  (long long)starfa_tiled_row_tiles(t), (long long)starfa_tiled_col_tiles(t), (long long)k,
			  round, starfa_last_error());
	}
	starfa_dense_free(x);
	starfa_dense_free(y);
	if (bitwise) {
		float *Yref = malloc(sizeof(float) * ny);
		uint32_t *rowptr = malloc(sizeof(uint32_t) * (size_t)(op->nrows + 1));
		uint32_t *colind = malloc(sizeof(uint32_t) * (size_t)(op->nnz + 1));
		CHECK(Yref && rowptr && colind);
		for (int64_t r = 0; r <= op->nrows; r++)
			rowptr[r] = (uint32_t)op->rowptr[r];
		for (int64_t p = 0; p < op->nnz; p++)
			colind[p] = (uint32_t)op->colind[p];
		starfa_cpu_spmm(op->nrows, rowptr, colind, op->val, Xd, k, k, 0, Yref, k, 1);
		CHECK_MSG(memcmp(Yd, Yref, sizeof(float) * ny) == 0,
			  "%s grid %lldx%lld k=%lld: tile by tile is not the bits of one tile", name,
			  (long long)starfa_tiled_row_tiles(t), (long long)starfa_tiled_col_tiles(t), (long long)k);
		free(Yref);
		free(rowptr);
		free(colind);
	}
	free(Xd);
	free(Yd);
	return 0;
}

static int graph_matches_reference(int bitwise)
{
	uint64_t rng = testing_seed() + (bitwise ? 5 : 2);
	static const int64_t grids[][2] = {{1, 1}, {4, 3}, {16, 16}};
	for (int crowded = 0; crowded < 2; crowded++)
		for (size_t g = 0; g < 3; g++) {
			int64_t k = ranks[testing_below(&rng, NRANKS)];
			starfa_csr *S = crowded ? crowded_csr(500, 400, &rng)
						: testing_random_csr(500, 400, 6000, 1.5, &rng);
			CHECK(S);
			starfa_csr *St = NULL;
			CHECK_OK(starfa_csr_transpose(S, &St));
			starfa_tiling_options opts = {grids[g][0], grids[g][1], 1};
			starfa_tiled *t = NULL;
			CHECK_OK(starfa_tiled_create(S, &opts, &t));
			if (crowded && grids[g][0] == 16)
				CHECK_MSG(empty_bands(t, STARFA_ROWS) > 0 && empty_bands(t, STARFA_COLS) > 0,
					  "the crowded matrix left no empty band to zero-fill");
			for (int side = 0; side < 2; side++)
				if (run_graph(t, S, St, (starfa_side)side, k, &rng, bitwise))
					return 1;
			starfa_tiled_free(t);
			starfa_csr_free(S);
			starfa_csr_free(St);
		}
	return 0;
}

/* Through StarPU, on every worker: both sides, grids with empty tiles and empty bands. */
TEST(spmm, task_graph_matches_reference)
{
	CHECK_OK(testing_runtime());
	return graph_matches_reference(0);
}

/* The fused SDDMM + SpMM (starfa_task_sddmm_spmm) against a double-precision reference of
 *   Y_r = sum_p f(s_p, a_r·b_c) b_c
 * for every mode, both sides and ranks across the kernels' paths (registers, wide), on one worker kind;
 * a crowded matrix gives empty bands (zero fills). Outputs poisoned with NaN before each run. Half the
 * runs skip a random third of the rows (active values 0): those keep their poison (or the zeros of an
 * empty band's fill). */
static int fused_matches_reference(starfa_worker_kind kind, uint64_t seed)
{
	CHECK_OK(testing_runtime_only(kind));
	uint64_t rng = seed;
	static const int64_t fused_ranks[] = {1, 7, 20, 32, 33, 64, 100, 128, 200, 300};
	for (int crowded = 0; crowded < 3; crowded++) {
		starfa_csr *S = NULL;
		if (crowded == 1) {
			S = crowded_csr(700, 500, &rng);
		} else if (crowded == 0) {
			S = testing_random_csr(700, 500, 12000, 1.0, &rng);
		} else { /* every 50th row (and column) far longer than the rest: the GPU's long-row kernel */
			starfa_coo *coo = starfa_coo_new(700, 1200, 700 * 1200);
			CHECK(coo);
			for (int64_t r = 0; r < 700; r++)
				for (int64_t c = 0; c < 1200; c++)
					if (r % 50 == 0 || c % 50 == 0 || testing_uniform(&rng) < 0.01) {
						coo->row[coo->nnz] = (int32_t)r;
						coo->col[coo->nnz] = (int32_t)c;
						coo->val[coo->nnz++] = (float)(0.5 + testing_uniform(&rng));
					}
			CHECK_OK(starfa_csr_from_coo(coo, &S));
			starfa_coo_free(coo);
		}
		CHECK(S);
		starfa_csr *St = NULL;
		CHECK_OK(starfa_csr_transpose(S, &St));
		/* the long rows' matrix on 2 x 2 tiles: each long row spans both column tiles, so the long-row
		 * kernel also adds onto a block the first tile wrote */
		starfa_tiling_options tiling = {crowded == 1 ? 9 : crowded ? 2 : 3, crowded == 1 ? 7 : crowded ? 2 : 4, 1};
		starfa_tiled *t = NULL;
		CHECK_OK(starfa_tiled_create(S, &tiling, &t));
		for (size_t ri = 0; ri < sizeof fused_ranks / sizeof fused_ranks[0]; ri++) {
			const int64_t k = fused_ranks[ri];
			const int side = (int)testing_below(&rng, 2), mode = (int)testing_below(&rng, 3);
			const int masked = (int)testing_below(&rng, 2);
			const starfa_csr *M = side ? St : S; /* the side's rows */
			const int64_t m = M->nrows, n = M->ncols;
			float *active = malloc(sizeof(float) * (size_t)m);
			CHECK(active);
			for (int64_t r = 0; r < m; r++)
				active[r] = !masked || testing_uniform(&rng) >= 1.0 / 3 ? 1.0f : 0.0f;
			float *A = malloc(sizeof(float) * (size_t)(m * k)), *B = malloc(sizeof(float) * (size_t)(n * k)),
			      *Y = malloc(sizeof(float) * (size_t)(m * k));
			double *ref = calloc((size_t)(m * k), sizeof(double)), *mag = calloc((size_t)(m * k), sizeof(double));
			CHECK(A && B && Y && ref && mag);
			/* quotients need products away from 0: positive factors there */
			for (int64_t e = 0; e < m * k; e++)
				A[e] = (float)(mode == STARFA_FUSED_QUOTIENT ? 0.1 + testing_uniform(&rng) : 2 * testing_uniform(&rng) - 1);
			for (int64_t e = 0; e < n * k; e++)
				B[e] = (float)(mode == STARFA_FUSED_QUOTIENT ? 0.1 + testing_uniform(&rng) : 2 * testing_uniform(&rng) - 1);
			testing_poison(Y, (size_t)(m * k));
			for (int64_t r = 0; r < m; r++)
				for (int64_t p = M->rowptr[r]; p < M->rowptr[r + 1]; p++) {
					const float *b = B + (int64_t)M->colind[p] * k;
					double y = 0, ymag = 0, f, fmag; /* fmag: what f's rounding scales with */
					for (int64_t c = 0; c < k; c++) {
						y += (double)A[r * k + c] * b[c];
						ymag += fabs((double)A[r * k + c] * b[c]);
					}
					f = mode == STARFA_FUSED_PATTERN ? y : mode == STARFA_FUSED_SCALED ? M->val[p] * y
													 : M->val[p] / fmax(1e-20, y);
					fmag = mode == STARFA_FUSED_PATTERN ? ymag
					       : mode == STARFA_FUSED_SCALED ? fabs(M->val[p]) * ymag
									      : fabs(M->val[p]) * ymag / (y * y);
					for (int64_t c = 0; c < k; c++) {
						ref[r * k + c] += f * b[c];
						mag[r * k + c] += (fabs(f) + fmag) * fabs(b[c]);
					}
				}
			starfa_dense *dA = NULL, *dB = NULL, *dY = NULL, *dact = NULL;
			CHECK_OK(starfa_dense_create(t, (starfa_side)side, active, 1, &dact));
			CHECK_OK(starfa_dense_create(t, (starfa_side)side, A, k, &dA));
			CHECK_OK(starfa_dense_create(t, side ? STARFA_ROWS : STARFA_COLS, B, k, &dB));
			CHECK_OK(starfa_dense_create(t, (starfa_side)side, Y, k, &dY));
			CHECK(starfa_insert_sddmm_spmm(t, (starfa_side)side, dA, dB, (starfa_fused_mode)mode, 1e-20f, dA) ==
			      STARFA_EINVAL);
			starfa_stats_reset();
			if (masked) {
				int64_t nr = side ? starfa_tiled_col_tiles(t) : starfa_tiled_row_tiles(t);
				for (int64_t b = 0; b < nr; b++)
					CHECK_OK(starfa_insert_sddmm_spmm_band(t, (starfa_side)side, b, dA, dB, (starfa_fused_mode)mode,
									       1e-20f, dact, dY));
			} else {
				CHECK_OK(starfa_insert_sddmm_spmm(t, (starfa_side)side, dA, dB, (starfa_fused_mode)mode, 1e-20f, dY));
			}
			CHECK_OK(starfa_dense_sync(dY));
			starfa_worker_stats st;
			starfa_stats_get(&st);
			int other = kind == STARFA_WORKER_CPU ? STARFA_WORKER_CUDA : STARFA_WORKER_CPU;
			CHECK(st.tasks[kind] > 0 && st.tasks[other] == 0);
			for (int64_t r = 0; r < m; r++) {
				const int64_t len = M->rowptr[r + 1] - M->rowptr[r];
				if (active[r] == 0.0f) {
					int zeros = 1, poison = 1;
					for (int64_t c = 0; c < k; c++) {
						zeros &= Y[r * k + c] == 0.0f;
						poison &= isnan(Y[r * k + c]);
					}
					CHECK_MSG(poison || (zeros && len == 0), "side %d mode %d k %lld: skipped row %lld written", side,
						  mode, (long long)k, (long long)r);
					continue;
				}
				for (int64_t c = 0; c < k; c++) {
					const double tol = (double)(len + k + 4) * 4 * FLT_EPSILON * (mag[r * k + c] + 1e-30) * 2;
					CHECK_MSG(fabs(Y[r * k + c] - ref[r * k + c]) <= tol,
						  "side %d mode %d k %lld: Y[%lld][%lld] = %.9g, reference %.9g", side, mode, (long long)k,
						  (long long)r, (long long)c, Y[r * k + c], ref[r * k + c]);
				}
			}
			starfa_dense_free(dA);
			starfa_dense_free(dB);
			starfa_dense_free(dY);
			starfa_dense_free(dact);
			free(active);
			free(A);
			free(B);
			free(Y);
			free(ref);
			free(mag);
		}
		starfa_tiled_free(t);
		starfa_csr_free(S);
		starfa_csr_free(St);
	}
	return 0;
}

/* The fused CPU kernels themselves, the register kernels (ranks up to 64 with AVX-512) and the portable
 * one, at every rank 1..70, every mode, overwriting and adding, with leading dimensions above the rank
 * whose padding must stay untouched, against a double reference. Rows of every length mod 4 (the
 * four-nonzero steps and their tails) and empty ones. At every other rank a mask of active rows: the
 * others must keep their bits (NaN poison included). */
TEST(spmm, fused_cpu_kernels_match_reference)
{
	uint64_t rng = testing_seed() + 37;
	const int64_t m = 41, n = 57;
	for (int64_t k = 1; k <= 70; k++) {
		const int mode = (int)(k % 3), beta = (int)((k / 3) % 2);
		const int64_t lda = k + 3, ldb = k + 1, ldy = k + 2;
		const int masked = k % 2 == 0;
		float active[41 * 3];
		for (int64_t r = 0; r < m; r++)
			active[r * 3] = testing_uniform(&rng) < 0.3 ? 0.0f : 1.0f;
		uint32_t rowptr[42], *colind = malloc(sizeof(uint32_t) * (size_t)(m * n));
		float *sval = malloc(sizeof(float) * (size_t)(m * n)), *A = malloc(sizeof(float) * (size_t)(m * lda)),
		      *B = malloc(sizeof(float) * (size_t)(n * ldb)), *Y0 = malloc(sizeof(float) * (size_t)(m * ldy)),
		      *Y[2] = {malloc(sizeof(float) * (size_t)(m * ldy)), malloc(sizeof(float) * (size_t)(m * ldy))};
		CHECK(colind && sval && A && B && Y0 && Y[0] && Y[1]);
		rowptr[0] = 0;
		for (int64_t r = 0; r < m; r++) {
			const int64_t len = r % 7 == 3 ? 0 : (int64_t)testing_below(&rng, r % 5 == 0 ? (uint64_t)n : 12);
			for (int64_t q = 0; q < len; q++) {
				colind[rowptr[r] + q] = (uint32_t)testing_below(&rng, (uint64_t)n);
				sval[rowptr[r] + q] = (float)(0.5 + testing_uniform(&rng));
			}
			rowptr[r + 1] = rowptr[r] + (uint32_t)len;
		}
		for (int64_t e = 0; e < m * lda; e++)
			A[e] = (float)(mode == 2 ? 0.1 + testing_uniform(&rng) : 2 * testing_uniform(&rng) - 1);
		for (int64_t e = 0; e < n * ldb; e++)
			B[e] = (float)(mode == 2 ? 0.1 + testing_uniform(&rng) : 2 * testing_uniform(&rng) - 1);
		for (int64_t e = 0; e < m * ldy; e++)
			Y0[e] = e % ldy < k ? (beta ? (float)(2 * testing_uniform(&rng) - 1) : NAN) : PAD_SENTINEL;
		memcpy(Y[0], Y0, sizeof(float) * (size_t)(m * ldy));
		memcpy(Y[1], Y0, sizeof(float) * (size_t)(m * ldy));
		starfa_cpu_sddmm_spmm(m, rowptr, colind, sval, A, lda, B, ldb, k, mode, 1e-20f, beta, Y[0], ldy,
				      masked ? active : NULL, 3);
		starfa_cpu_sddmm_spmm_portable(m, rowptr, colind, sval, A, lda, B, ldb, k, mode, 1e-20f, beta, Y[1], ldy,
					       masked ? active : NULL, 3);
		for (int64_t r = 0; r < m; r++) {
			if (masked && active[r * 3] == 0.0f) {
				for (int w = 0; w < 2; w++)
					CHECK_MSG(memcmp(Y[w] + r * ldy, Y0 + r * ldy, sizeof(float) * (size_t)ldy) == 0,
						  "%s kernel, k %lld: inactive row %lld written", w ? "portable" : "dispatched",
						  (long long)k, (long long)r);
				continue;
			}
			double ref[70], mag[70];
			for (int64_t c = 0; c < k; c++) {
				ref[c] = beta ? Y0[r * ldy + c] : 0;
				mag[c] = fabs(ref[c]);
			}
			for (uint32_t p = rowptr[r]; p < rowptr[r + 1]; p++) {
				const float *b = B + (int64_t)colind[p] * ldb;
				double y = 0, ymag = 0;
				for (int64_t c = 0; c < k; c++) {
					y += (double)A[r * lda + c] * b[c];
					ymag += fabs((double)A[r * lda + c] * b[c]);
				}
				const double f = mode == 0 ? y : mode == 1 ? sval[p] * y : sval[p] / fmax(1e-20, y);
				const double fmag = mode == 0 ? ymag : mode == 1 ? sval[p] * ymag : sval[p] * ymag / (y * y);
				for (int64_t c = 0; c < k; c++) {
					ref[c] += f * b[c];
					mag[c] += (fabs(f) + fmag) * fabs(b[c]);
				}
			}
			const double len = rowptr[r + 1] - rowptr[r];
			for (int w = 0; w < 2; w++) {
				for (int64_t c = 0; c < k; c++) {
					const double tol = (len + (double)k + 4) * 8 * FLT_EPSILON * (mag[c] + 1e-30);
					CHECK_MSG(fabs(Y[w][r * ldy + c] - ref[c]) <= tol,
						  "%s kernel, k %lld mode %d beta %d: Y[%lld][%lld] = %.9g, reference %.9g",
						  w ? "portable" : "dispatched", (long long)k, mode, beta, (long long)r, (long long)c,
						  Y[w][r * ldy + c], ref[c]);
				}
				for (int64_t c = k; c < ldy; c++)
					CHECK_MSG(Y[w][r * ldy + c] == PAD_SENTINEL, "%s kernel, k %lld: padding of row %lld written",
						  w ? "portable" : "dispatched", (long long)k, (long long)r);
			}
		}
		free(colind);
		free(sval);
		free(A);
		free(B);
		free(Y0);
		free(Y[0]);
		free(Y[1]);
	}
	return 0;
}

TEST(spmm, fused_sddmm_spmm_matches_reference_cpu)
{
	return fused_matches_reference(STARFA_WORKER_CPU, testing_seed() + 31);
}

/* The fused SDDMM + SpMM of a band as one starfa_task_sddmm_spmm_band task against its per-tile tasks
 * (FOR_BAND_TILES's order): the same bits, on both sides, every mode, with and without active rows, on
 * grids with empty tiles and an empty band; SpMM's band task the same way (spmm_band_run). */
static int fused_band_run(const starfa_tiled *t, starfa_side side, int64_t k, int mode, int masked, uint64_t seed,
			  int by_band, float *Y)
{
	const int rows = side == STARFA_ROWS;
	const int64_t m = rows ? starfa_tiled_nrows(t) : starfa_tiled_ncols(t);
	const int64_t n = rows ? starfa_tiled_ncols(t) : starfa_tiled_nrows(t), P = starfa_tiled_row_tiles(t);
	float *A = malloc(sizeof(float) * (size_t)(m * k)), *B = malloc(sizeof(float) * (size_t)(n * k)),
	      *act = malloc(sizeof(float) * (size_t)m);
	CHECK(A && B && act);
	for (int64_t e = 0; e < m * k; e++)
		A[e] = (float)(0.1 + testing_uniform(&seed));
	for (int64_t e = 0; e < n * k; e++)
		B[e] = (float)(0.1 + testing_uniform(&seed));
	for (int64_t e = 0; e < m * k; e++) /* the skipped rows keep these */
		Y[e] = (float)testing_uniform(&seed);
	for (int64_t r = 0; r < m; r++)
		act[r] = testing_uniform(&seed) < 0.7 ? 1.0f : 0.0f;
	starfa_dense *dA, *dB, *dY, *dact;
	const starfa_side other = rows ? STARFA_COLS : STARFA_ROWS;
	CHECK_OK(starfa_dense_create(t, side, A, k, &dA));
	CHECK_OK(starfa_dense_create(t, other, B, k, &dB));
	CHECK_OK(starfa_dense_create(t, side, Y, k, &dY));
	CHECK_OK(starfa_dense_create(t, side, act, 1, &dact));
	const starfa_dense *active = masked ? dact : NULL;
	for (int64_t i = 0; i < P; i++) {
		if (by_band) {
			CHECK_OK(starfa_task_sddmm_spmm_band(t, side, i, dA, dB, (starfa_fused_mode)mode, 1e-3f, active, dY, NULL));
			continue;
		}
		int64_t js[3]; /* the tests' grids have at most 3 bands a side */
		const int64_t nj = testing_band_order(t, side, i, 1, js);
		for (int64_t q = 0; q < nj; q++)
			CHECK_OK(starfa_task_sddmm_spmm(t, side, i, js[q], dA, dB, (starfa_fused_mode)mode, 1e-3f, active, dY,
							q > 0, NULL));
	}
	starfa_dense_free(dY); /* brings Y home */
	starfa_dense_free(dA);
	starfa_dense_free(dB);
	starfa_dense_free(dact);
	free(A);
	free(B);
	free(act);
	return 0;
}

/* SpMM over a band as one starfa_task_spmm_band task against its per-tile tasks, with S's values and with
 * values of their own: the same bits (the fused test's grids). */
static int spmm_band_run(const starfa_tiled *t, starfa_side side, int64_t k, int own_values, uint64_t seed, int by_band,
			 float *Y)
{
	const int rows = side == STARFA_ROWS;
	const int64_t n = rows ? starfa_tiled_ncols(t) : starfa_tiled_nrows(t), P = starfa_tiled_row_tiles(t);
	float *X = malloc(sizeof(float) * (size_t)(n * k));
	CHECK(X);
	for (int64_t e = 0; e < n * k; e++)
		X[e] = (float)(testing_uniform(&seed) - 0.5);
	const float scale = (float)(0.5 + testing_uniform(&seed)), shift = (float)(testing_uniform(&seed) - 0.5);
	testing_poison(Y, (size_t)((rows ? starfa_tiled_nrows(t) : starfa_tiled_ncols(t)) * k));
	starfa_dense *dX, *dY;
	CHECK_OK(starfa_dense_create(t, rows ? STARFA_COLS : STARFA_ROWS, X, k, &dX));
	CHECK_OK(starfa_dense_create(t, side, Y, k, &dY));
	starfa_sparse_values *V = NULL;
	if (own_values) {
		CHECK_OK(starfa_sparse_values_create(t, side, &V));
		CHECK_OK(starfa_insert_values_map(V, STARFA_VALUES_COPY, 0, 0, NULL));
		CHECK_OK(starfa_insert_values_map(V, STARFA_VALUES_SCALE, scale, shift, NULL));
	}
	for (int64_t i = 0; i < P; i++) {
		if (by_band) {
			CHECK_OK(starfa_task_spmm_band(t, side, i, V, dX, dY, NULL));
			continue;
		}
		int64_t js[3]; /* the tests' grids have at most 3 bands a side */
		const int64_t nj = testing_band_order(t, side, i, 1, js);
		for (int64_t q = 0; q < nj; q++)
			CHECK_OK(starfa_task_spmm(t, side, i, js[q], V, dX, dY, q > 0, NULL));
	}
	starfa_dense_free(dY); /* brings Y home */
	starfa_dense_free(dX);
	starfa_sparse_values_free(V);
	free(X);
	return 0;
}

/* The band tasks against the per-tile tasks on one kind of worker: the same bits on the CPU workers, the
 * same to rounding on CUDA workers. */
static int band_tasks(starfa_worker_kind kind)
{
	CHECK_OK(testing_runtime_only(kind));
	const int exact = kind == STARFA_WORKER_CPU;
	uint64_t rng = testing_seed() + 37;
	const int64_t m = 80 + (int64_t)testing_below(&rng, 40), n = 70 + (int64_t)testing_below(&rng, 40), nnz = 1500;
	starfa_csr *S = testing_band_csr(m, n, nnz, &rng);
	CHECK(S);
	const int64_t most = m > n ? m : n, k = 1 + (int64_t)testing_below(&rng, 40);
	float *Y[2] = {malloc(sizeof(float) * (size_t)(most * k)), malloc(sizeof(float) * (size_t)(most * k))};
	CHECK(Y[0] && Y[1]);
	for (int64_t P = 1; P <= 3; P++) {
		starfa_tiled *t = testing_band_grid(S, P);
		CHECK(t);
		for (int side = 0; side < 2; side++)
			for (int mode = 0; mode < 3; mode++)
				for (int masked = 0; masked < 2; masked++) {
					const starfa_side sd = side ? STARFA_COLS : STARFA_ROWS;
					const uint64_t draw = rng++;
					for (int r = 0; r < 2; r++)
						CHECK_OK(fused_band_run(t, sd, k, mode, masked, draw, r, Y[r]));
					CHECK_MSG(testing_band_same(Y[0], Y[1], (side ? n : m) * k, exact),
						  "%lld bands, side %d, mode %d, masked %d, k %lld: Y differs from the per-tile tasks'",
						  (long long)P, side, mode, masked, (long long)k);
				}
		for (int side = 0; side < 2; side++)
			for (int own = 0; own < 2; own++) {
				const starfa_side sd = side ? STARFA_COLS : STARFA_ROWS;
				const uint64_t draw = rng++;
				for (int r = 0; r < 2; r++)
					CHECK_OK(spmm_band_run(t, sd, k, own, draw, r, Y[r]));
				CHECK_MSG(testing_band_same(Y[0], Y[1], (side ? n : m) * k, exact),
					  "%lld bands, side %d, own values %d, k %lld: SpMM's Y differs from the per-tile tasks'",
					  (long long)P, side, own, (long long)k);
			}
		/* a band outside the grid; a kind this runtime has no worker of (nothing submitted) */
		float *X = calloc((size_t)(most * k), sizeof(float)), *Z = calloc((size_t)(most * k), sizeof(float));
		CHECK(X && Z);
		starfa_dense *dX, *dZ;
		CHECK_OK(starfa_dense_create(t, STARFA_COLS, X, k, &dX));
		CHECK_OK(starfa_dense_create(t, STARFA_ROWS, Z, k, &dZ));
		CHECK(starfa_task_spmm_band(t, STARFA_ROWS, P, NULL, dX, dZ, NULL) == STARFA_EINVAL);
		CHECK(starfa_task_sddmm_spmm_band(t, STARFA_ROWS, -1, dZ, dX, STARFA_FUSED_PATTERN, 0, NULL, dZ, NULL) ==
		      STARFA_EINVAL); /* Y is A as well */
#ifdef STARFA_USE_CUDA
		/* asked for the other kind of worker, which this runtime has none of: an error, nothing run */
		starfa_task_attr other = {.where = exact ? STARFA_WHERE_CUDA : STARFA_WHERE_CPU};
		starfa_stats_reset();
		CHECK(starfa_task_spmm_band(t, STARFA_ROWS, 0, NULL, dX, dZ, &other) == STARFA_ENODEV);
		CHECK(strstr(starfa_last_error(), "spmm_band") != NULL);
		CHECK_OK(starfa_wait());
		starfa_worker_stats st;
		starfa_stats_get(&st);
		CHECK(st.tasks[STARFA_WORKER_CPU] == 0 && st.tasks[STARFA_WORKER_CUDA] == 0);
#endif
		starfa_dense_free(dX);
		starfa_dense_free(dZ);
		free(X);
		free(Z);
		starfa_tiled_free(t);
	}
	free(Y[0]);
	free(Y[1]);
	starfa_csr_free(S);
	return 0;
}

TEST(spmm, band_tasks_match_tile_tasks)
{
	return band_tasks(STARFA_WORKER_CPU);
}

/* The task log counts every buffer of a band task, the tiles past the recorded STARFA_TASK_LOG_BUFFERS
 * too: one band of 6 tiles is one spmm_band task reading 2 a tile and writing Y's block. */
TEST(spmm, task_log_counts_every_buffer_of_a_band_task)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 53;
	starfa_csr *S = testing_random_csr(40, 600, 2000, 0.0, &rng);
	CHECK(S);
	starfa_tiling_options tiling = {1, 6, 0};
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(S, &tiling, &t));
	int64_t tiles = 0;
	for (int64_t j = 0; j < starfa_tiled_col_tiles(t); j++)
		tiles += starfa_tiled_tile_nnz(t, 0, j) > 0;
	CHECK(tiles == 6 && 1 + 2 * tiles > STARFA_TASK_LOG_BUFFERS);
	float *X = calloc(600 * 4, sizeof(float)), *Y = calloc(40 * 4, sizeof(float));
	CHECK(X && Y);
	starfa_dense *dX, *dY;
	CHECK_OK(starfa_dense_create(t, STARFA_COLS, X, 4, &dX));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, Y, 4, &dY));
	CHECK_OK(starfa_task_log_begin());
	const int rc = starfa_insert_spmm(t, STARFA_ROWS, dX, dY);
	starfa_task_record *log = NULL;
	int64_t n = 0;
	CHECK_OK(starfa_task_log_end(&log, &n));
	CHECK_OK(rc);
	CHECK_MSG(n == 1 && strcmp(log[0].codelet, "spmm_band") == 0 && log[0].nbuffers == 1 + 2 * tiles &&
			  log[0].nreads == 2 * tiles && log[0].nwrites == 1,
		  "%lld records, the first %s with %d buffers, %d read and %d written", (long long)n,
		  n ? log[0].codelet : "-", n ? log[0].nbuffers : 0, n ? log[0].nreads : 0, n ? log[0].nwrites : 0);
	free(log);
	starfa_dense_free(dX);
	starfa_dense_free(dY);
	free(X);
	free(Y);
	starfa_tiled_free(t);
	starfa_csr_free(S);
	return 0;
}

TEST(spmm, insert_rejects_mismatched_operands)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 3;
	starfa_csr *S = testing_random_csr(30, 20, 100, 0.0, &rng);
	CHECK(S);
	float *X8 = calloc(20 * 8, sizeof(float)), *Y4 = calloc(30 * 4, sizeof(float));
	float *X4 = calloc(20 * 4, sizeof(float)), *Z4 = calloc(30 * 4, sizeof(float));
	CHECK(X8 && Y4 && X4 && Z4);
	starfa_tiling_options two = {2, 2, 0}, three = {3, 3, 0};
	starfa_tiled *t = NULL, *other = NULL;
	starfa_dense *x8 = NULL, *y4 = NULL, *x4 = NULL, *x4_other = NULL;
	CHECK_OK(starfa_tiled_create(S, &two, &t));
	CHECK_OK(starfa_tiled_create(S, &three, &other));
	CHECK_OK(starfa_dense_create(t, STARFA_COLS, X8, 8, &x8));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, Y4, 4, &y4));
	CHECK_OK(starfa_dense_create(t, STARFA_COLS, X4, 4, &x4));
	CHECK_OK(starfa_dense_create(other, STARFA_COLS, Z4, 4, &x4_other));

	CHECK(starfa_insert_spmm(t, STARFA_ROWS, x8, y4) == STARFA_EINVAL); /* ranks differ */
	CHECK(strstr(starfa_last_error(), "20x8") != NULL);
	CHECK(starfa_insert_spmm(t, STARFA_ROWS, y4, x4) == STARFA_EINVAL); /* X and Y swapped */
	CHECK(starfa_insert_spmm(t, STARFA_ROWS, x4_other, y4) == STARFA_EINVAL); /* another grid's blocks */
	CHECK(strstr(starfa_last_error(), "blocked along") != NULL);
	CHECK(starfa_insert_spmm(t, STARFA_COLS, y4, x4) == STARFA_EINVAL); /* no transposed grid */
	CHECK(strstr(starfa_last_error(), "transposed") != NULL);
	CHECK(starfa_insert_spmm(t, (starfa_side)7, x4, y4) == STARFA_EINVAL);
	CHECK(starfa_insert_spmm(NULL, STARFA_ROWS, x4, y4) == STARFA_EINVAL);
	CHECK(starfa_insert_spmm(t, STARFA_ROWS, x4, NULL) == STARFA_EINVAL);
	CHECK_OK(starfa_insert_spmm(t, STARFA_ROWS, x4, y4));
	CHECK_OK(starfa_wait());
	starfa_dense_free(x8);
	starfa_dense_free(y4);
	starfa_dense_free(x4);
	starfa_dense_free(x4_other);
	starfa_tiled_free(t);
	starfa_tiled_free(other);
	starfa_csr_free(S);
	free(X8);
	free(Y4);
	free(X4);
	free(Z4);
	return 0;
}

/* In place is wrong: with a square 1 x 1 grid, X and Y can be one matrix or share memory.
 * CPU workers only: two handles on one array must not both pin it for a GPU. */
TEST(spmm, insert_rejects_in_place)
{
	CHECK_OK(testing_runtime_only(STARFA_WORKER_CPU));
	uint64_t rng = testing_seed() + 4;
	starfa_csr *Q = testing_random_csr(12, 12, 40, 0.0, &rng);
	CHECK(Q);
	starfa_tiling_options one = {1, 1, 0};
	starfa_tiled *q = NULL;
	float *Q4 = calloc(12 * 4, sizeof(float));
	CHECK(Q4);
	starfa_dense *qx = NULL, *qy = NULL;
	CHECK_OK(starfa_tiled_create(Q, &one, &q));
	CHECK_OK(starfa_dense_create(q, STARFA_ROWS, Q4, 4, &qx));
	CHECK_OK(starfa_dense_create(q, STARFA_COLS, Q4, 4, &qy));
	CHECK(starfa_insert_spmm(q, STARFA_ROWS, qx, qx) == STARFA_EINVAL);
	CHECK(starfa_insert_spmm(q, STARFA_ROWS, qx, qy) == STARFA_EINVAL);
	CHECK(strstr(starfa_last_error(), "share memory") != NULL);
	starfa_dense_free(qx);
	starfa_dense_free(qy);
	starfa_tiled_free(q);
	starfa_csr_free(Q);
	free(Q4);
	return 0;
}

/* On CPU workers alone the kernel is the same code whatever the task: tile by tile in band
 * order must give the bits of one tile, on either side, whatever the schedule. */
TEST(spmm, task_graph_is_deterministic)
{
	CHECK_OK(testing_runtime_only(STARFA_WORKER_CPU));
	return graph_matches_reference(1);
}

#ifdef STARFA_USE_CUDA

#define GPU_OK(expr)                                                                             \
	do {                                                                                     \
		starfa_gpu_status s_ = (expr);                                                   \
		CHECK_MSG(s_.call == NULL, "%s", starfa_gpu_status_string(s_));                  \
	} while (0)

static const char *impl_name(starfa_spmm_impl impl)
{
	return impl == STARFA_SPMM_CUSPARSE	 ? "cusparse"
	       : impl == STARFA_SPMM_CUSPARSE_ALG3 ? "cusparse alg3"
	       : impl == STARFA_SPMM_TUNED	 ? "tuned"
						 : "own";
}

/* A tile on the device: whole, and split into a band's two tiles. */
struct device_tile {
	uint32_t *rowptr, *colind, *part_rowptr[2], *part_colind[2];
	float *val, *part_val[2];
};

static int upload_tile(const struct one_tile *t, struct device_tile *d)
{
	const starfa_csr *S = t->csr;
	size_t rows = sizeof(uint32_t) * (size_t)(S->nrows + 1);
	d->rowptr = to_device(t->rowptr, rows);
	d->colind = to_device(t->colind, sizeof(uint32_t) * (size_t)S->nnz);
	d->val = to_device(S->val, sizeof(float) * (size_t)S->nnz);
	int ok = d->rowptr && d->colind && d->val;
	for (int h = 0; h < 2; h++) {
		d->part_rowptr[h] = to_device(t->part_rowptr[h], rows);
		d->part_colind[h] = to_device(t->part_colind[h], sizeof(uint32_t) * (size_t)t->part_nnz[h]);
		d->part_val[h] = to_device(t->part_val[h], sizeof(float) * (size_t)t->part_nnz[h]);
		ok = ok && d->part_rowptr[h] && d->part_colind[h] && d->part_val[h];
	}
	return ok ? 0 : 1;
}

static void free_device_tile(struct device_tile *d)
{
	cudaFree(d->rowptr);
	cudaFree(d->colind);
	cudaFree(d->val);
	for (int h = 0; h < 2; h++) {
		cudaFree(d->part_rowptr[h]);
		cudaFree(d->part_colind[h]);
		cudaFree(d->part_val[h]);
	}
}

/* Y = S·X on the GPU into NaN-poisoned strided Y (d_Y, ld), as one tile or as a band's two
 * tiles (the second accumulating), and back into compact Y; 1 if it wrote into the padding. */
static int gpu_spmm(starfa_spmm_impl impl, cusparseHandle_t handle, const struct one_tile *t,
		    const struct device_tile *dt, int split, const float *d_X, float *d_Y, int64_t ld, int64_t k,
		    float *Ys, float *Y)
{
	const starfa_csr *S = t->csr;
	size_t ys_bytes = sizeof(float) * (size_t)(S->nrows * ld);
	float *poisoned = to_strided(NULL, S->nrows, k, ld);
	CHECK(poisoned);
	CUDA_OK(cudaMemcpy(d_Y, poisoned, ys_bytes, cudaMemcpyHostToDevice));
	free(poisoned);
	/* The tuned implementation tunes at the first call with a pattern id: a new one every call here, so
	 * that every call times the three (the second part of a split tile with beta 1). */
	static uint64_t serial = 1000;
	const uint64_t pattern = impl == STARFA_SPMM_TUNED ? ++serial : 0;
	if (!split)
		GPU_OK(starfa_cuda_spmm(impl, handle, pattern, S->nrows, S->ncols, S->nnz, dt->rowptr, dt->colind, dt->val, d_X,
					ld, k, 0, d_Y, ld, 0));
	else
		for (int h = 0; h < 2; h++)
			GPU_OK(starfa_cuda_spmm(impl, handle, pattern + (uint64_t)h * 500000, S->nrows, S->ncols, t->part_nnz[h], dt->part_rowptr[h],
						dt->part_colind[h], dt->part_val[h], d_X, ld, k, h, d_Y, ld, 0));
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaMemcpy(Ys, d_Y, ys_bytes, cudaMemcpyDeviceToHost));
	CHECK_MSG(from_strided(Ys, S->nrows, k, ld, Y) == 0, "%s k=%lld ld=%lld split=%d: wrote into Y's padding",
		  impl_name(impl), (long long)k, (long long)ld, split);
	return 0;
}

/* Both implementations against the reference and the CPU kernel, element by element:
 * overwriting and accumulating, with leading dimensions that allow 16-byte loads and that
 * do not, on skewed tiles whose longest rows take the own kernels' long-row path; and the own
 * kernels run twice for the same bits. */
TEST(spmm_cuda, cuda_kernels_match_reference_and_cpu)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	cusparseHandle_t handle = NULL;
	CHECK(cusparseCreate(&handle) == CUSPARSE_STATUS_SUCCESS);
	uint64_t rng = testing_seed() + 10;
	for (size_t ki = 0; ki < NRANKS; ki++) {
		int64_t k = ranks[ki];
		struct one_tile t;
		/* Wide enough for rows of hundreds of distinct columns. */
		CHECK(make_tile(&t, 300 + (int64_t)testing_below(&rng, 700), 2000 + (int64_t)testing_below(&rng, 1000),
				20000, 1.5, &rng) == 0);
		const starfa_csr *S = t.csr;
		int64_t longest = 0;
		for (int64_t r = 0; r < S->nrows; r++)
			if (S->rowptr[r + 1] - S->rowptr[r] > longest)
				longest = S->rowptr[r + 1] - S->rowptr[r];
		/* Longer than 256 and 8 times the mean: the own kernels' long-row path runs. */
		CHECK_MSG(longest > 256 && longest > 8 * (S->nnz / S->nrows + 1), "longest row %lld of mean %lld",
			  (long long)longest, (long long)(S->nnz / S->nrows));
		struct device_tile dt;
		CHECK(upload_tile(&t, &dt) == 0);
		size_t nx = (size_t)(S->ncols * k), ny = (size_t)(S->nrows * k);
		float *X = malloc(nx * sizeof(float)), *Y = malloc(ny * sizeof(float));
		float *Ycpu = malloc(ny * sizeof(float)), *Yagain = malloc(ny * sizeof(float));
		CHECK(X && Y && Ycpu && Yagain);
		testing_fill_random(X, nx, &rng);
		starfa_cpu_spmm(S->nrows, t.rowptr, t.colind, S->val, X, k, k, 0, Ycpu, k, 2);
		static const int64_t pads[] = {0, 1, 4}; /* ld = k + pad: 4-aligned when k is, or never */
		for (size_t pi = 0; pi < 3; pi++) {
			int64_t ld = k + pads[pi];
			float *Xs = to_strided(X, S->ncols, k, ld), *Ys = to_strided(NULL, S->nrows, k, ld);
			CHECK(Xs && Ys);
			float *d_X = to_device(Xs, sizeof(float) * (size_t)(S->ncols * ld));
			float *d_Y = to_device(NULL, sizeof(float) * (size_t)(S->nrows * ld));
			CHECK(d_X && d_Y);
			for (int impl = 0; impl < 4; impl++)
				for (int split = 0; split < 2; split++) {
					starfa_spmm_impl im = (starfa_spmm_impl)impl;
					if (gpu_spmm(im, handle, &t, &dt, split, d_X, d_Y, ld, k, Ys, Y))
						return 1;
					CHECK_MSG(starfa_check_spmm(S, X, k, Y, NULL) == 0,
						  "%s k=%lld ld=%lld split=%d: %s", impl_name(im), (long long)k,
						  (long long)ld, split, starfa_last_error());
					/* Both are within the float32 bound of the reference; they may differ by
					 * rounding (FMA on the GPU). */
					for (size_t e = 0; e < ny; e++)
						CHECK_MSG(fabsf(Y[e] - Ycpu[e]) <= 1e-4f * (1.0f + fabsf(Ycpu[e])),
							  "%s k=%lld element %zu: cuda %g cpu %g", impl_name(im),
							  (long long)k, e, Y[e], Ycpu[e]);
					/* The own kernels cut long rows the same way every time: the same bits. */
					if (im != STARFA_SPMM_OWN)
						continue;
					if (gpu_spmm(im, handle, &t, &dt, split, d_X, d_Y, ld, k, Ys, Yagain))
						return 1;
					CHECK_MSG(memcmp(Y, Yagain, ny * sizeof(float)) == 0,
						  "own k=%lld ld=%lld split=%d: other bits on a second run",
						  (long long)k, (long long)ld, split);
				}
			cudaFree(d_X);
			cudaFree(d_Y);
			free(Xs);
			free(Ys);
		}
		free_device_tile(&dt);
		free(X);
		free(Y);
		free(Ycpu);
		free(Yagain);
		free_tile(&t);
	}
	CHECK(cusparseDestroy(handle) == CUSPARSE_STATUS_SUCCESS);
	return 0;
}

/* A tile with no nonzero still overwrites Y with zeros, in every implementation, and the
 * zero fill clears a strided block without touching its padding. */
TEST(spmm_cuda, empty_tile_writes_zeros)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	cusparseHandle_t handle = NULL;
	CHECK(cusparseCreate(&handle) == CUSPARSE_STATUS_SUCCESS);
	int64_t m = 300, n = 20, k = 12, ld = 16;
	uint32_t *rowptr = calloc((size_t)m + 1, sizeof *rowptr);
	float *Ys = to_strided(NULL, m, k, ld), *Y = malloc(sizeof(float) * (size_t)(m * k));
	CHECK(rowptr && Ys && Y);
	size_t ys_bytes = sizeof(float) * (size_t)(m * ld);
	uint32_t *d_rowptr = to_device(rowptr, sizeof(uint32_t) * (size_t)(m + 1));
	float *d_X = to_device(NULL, sizeof(float) * (size_t)(n * ld)), *d_Y = to_device(NULL, ys_bytes);
	CHECK(d_rowptr && d_X && d_Y);
	CUDA_OK(cudaMemset(d_X, 0, sizeof(float) * (size_t)(n * ld)));
	for (int run = 0; run < 5; run++) {
		float *poisoned = to_strided(NULL, m, k, ld);
		CHECK(poisoned);
		CUDA_OK(cudaMemcpy(d_Y, poisoned, ys_bytes, cudaMemcpyHostToDevice));
		free(poisoned);
		if (run < 4)
			GPU_OK(starfa_cuda_spmm((starfa_spmm_impl)run, handle, (uint64_t)run, m, n, 0, d_rowptr, NULL, NULL, d_X, ld,
						k, 0, d_Y, ld, 0));
		else
			CUDA_OK(starfa_cuda_spmm_zero(m, k, d_Y, ld, 0));
		CUDA_OK(cudaDeviceSynchronize());
		CUDA_OK(cudaMemcpy(Ys, d_Y, ys_bytes, cudaMemcpyDeviceToHost));
		CHECK_MSG(from_strided(Ys, m, k, ld, Y) == 0, "run %d wrote into the padding", run);
		for (int64_t e = 0; e < m * k; e++)
			CHECK_MSG(Y[e] == 0.0f, "run %d: element %lld is %g", run, (long long)e, Y[e]);
	}
	cudaFree(d_rowptr);
	cudaFree(d_X);
	cudaFree(d_Y);
	free(rowptr);
	free(Ys);
	free(Y);
	CHECK(cusparseDestroy(handle) == CUSPARSE_STATUS_SUCCESS);
	return 0;
}

/* One call with a kept plan: Y = S·X for S's pattern at (rowptr, colind) with the values at d_val, into a
 * NaN-poisoned Y, against the reference (S's host values). */
static int kept_call(starfa_spmm_impl impl, cusparseHandle_t handle, uint64_t pattern, const starfa_csr *S,
		     const uint32_t *rowptr, const uint32_t *colind, const float *d_val, const float *X, const float *d_X,
		     int64_t ld, int64_t k, float *d_Y, float *Y, const char *what)
{
	float *Ys = to_strided(NULL, S->nrows, k, ld);
	CHECK(Ys);
	size_t ys_bytes = sizeof(float) * (size_t)(S->nrows * ld);
	CUDA_OK(cudaMemcpy(d_Y, Ys, ys_bytes, cudaMemcpyHostToDevice));
	GPU_OK(starfa_cuda_spmm(impl, handle, pattern, S->nrows, S->ncols, S->nnz, rowptr, colind, d_val, d_X, ld, k, 0,
				d_Y, ld, 0));
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaMemcpy(Ys, d_Y, ys_bytes, cudaMemcpyDeviceToHost));
	CHECK_MSG(from_strided(Ys, S->nrows, k, ld, Y) == 0, "%s, %s: wrote into Y's padding", impl_name(impl), what);
	free(Ys);
	CHECK_MSG(starfa_check_spmm(S, X, k, Y, NULL) == 0, "%s, %s: %s", impl_name(impl), what, starfa_last_error());
	return 0;
}

/* The cuSPARSE plans kept per pattern id: reused with new values and new operands, made anew when the
 * tile moves or X's layout changes, never taken for another pattern at the same addresses (a tile that
 * StarPU put where a freed one was), held within the byte limit, freed by the release. */
TEST(spmm_cuda, kept_cusparse_plans_follow_the_tile)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	cusparseHandle_t handle = NULL;
	CHECK(cusparseCreate(&handle) == CUSPARSE_STATUS_SUCCESS);
	GPU_OK(starfa_cuda_spmm_release());
	uint64_t rng = testing_seed() + 12;
	const int64_t m = 700, n = 900, k = 32;
	struct one_tile a;
	CHECK(make_tile(&a, m, n, 20000, 1.5, &rng) == 0);
	starfa_csr *S = a.csr;
	/* b: the same sizes and nonzeros as a, rows in reverse order (another pattern: the skewed rows move) */
	starfa_csr b = {m, n, S->nnz, malloc(sizeof(int64_t) * (size_t)(m + 1)), malloc(sizeof(int32_t) * (size_t)S->nnz),
			malloc(sizeof(float) * (size_t)S->nnz)};
	uint32_t *b_rowptr = malloc(sizeof(uint32_t) * (size_t)(m + 1)), *b_colind = malloc(sizeof(uint32_t) * (size_t)S->nnz);
	float *X = malloc(sizeof(float) * (size_t)(n * (k + 4))), *Y = malloc(sizeof(float) * (size_t)(m * k));
	float *val2 = malloc(sizeof(float) * (size_t)S->nnz);
	CHECK(b.rowptr && b.colind && b.val && b_rowptr && b_colind && X && Y && val2);
	b.rowptr[0] = 0;
	for (int64_t r = 0; r < m; r++) {
		const int64_t from = m - 1 - r, len = S->rowptr[from + 1] - S->rowptr[from];
		for (int64_t q = 0; q < len; q++) {
			b.colind[b.rowptr[r] + q] = S->colind[S->rowptr[from] + q];
			b.val[b.rowptr[r] + q] = S->val[S->rowptr[from] + q];
		}
		b.rowptr[r + 1] = b.rowptr[r] + len;
	}
	for (int64_t r = 0; r <= m; r++)
		b_rowptr[r] = (uint32_t)b.rowptr[r];
	for (int64_t p = 0; p < S->nnz; p++)
		b_colind[p] = (uint32_t)b.colind[p];
	struct device_tile dt;
	CHECK(upload_tile(&a, &dt) == 0);
	float *d_X = to_device(NULL, sizeof(float) * (size_t)(n * (k + 4))), *d_Y = to_device(NULL, sizeof(float) * (size_t)(m * (k + 4)));
	uint32_t *moved_rowptr = to_device(a.rowptr, sizeof(uint32_t) * (size_t)(m + 1));
	uint32_t *moved_colind = to_device(a.colind, sizeof(uint32_t) * (size_t)S->nnz);
	CHECK(d_X && d_Y && moved_rowptr && moved_colind);
	for (int impl = STARFA_SPMM_CUSPARSE; impl <= STARFA_SPMM_CUSPARSE_ALG3; impl++) {
		const starfa_spmm_impl im = (starfa_spmm_impl)impl;
		const uint64_t id = 100 + 10 * (uint64_t)impl;
		int plans = -1;
		for (int call = 0; call < 3; call++) { /* new X each call, and from the second on new values too */
			float *Xs = NULL;
			testing_fill_random(X, (size_t)(n * k), &rng);
			CHECK(Xs = to_strided(X, n, k, k));
			CUDA_OK(cudaMemcpy(d_X, Xs, sizeof(float) * (size_t)(n * k), cudaMemcpyHostToDevice));
			free(Xs);
			const float *d_val = dt.val;
			float *d_val2 = NULL;
			if (call > 0) {
				testing_fill_random(val2, (size_t)S->nnz, &rng);
				CHECK(d_val2 = to_device(val2, sizeof(float) * (size_t)S->nnz));
				memcpy(S->val, val2, sizeof(float) * (size_t)S->nnz);
				d_val = d_val2;
			}
			int rc = kept_call(im, handle, id, S, dt.rowptr, dt.colind, d_val, X, d_X, k, k, d_Y, Y,
					   call ? "kept plan, new values" : "first call");
			cudaFree(d_val2);
			if (rc)
				return 1;
			starfa_cuda_spmm_kept(&plans);
			CHECK_MSG(plans == 1, "%s: %d plans kept after call %d on one tile", impl_name(im), plans, call);
		}
		/* X with another leading dimension, then the tile moved: one plan for the pattern all along */
		CUDA_OK(cudaMemcpy(dt.val, S->val, sizeof(float) * (size_t)S->nnz, cudaMemcpyHostToDevice));
		float *Xs = to_strided(X, n, k, k + 4);
		CHECK(Xs);
		CUDA_OK(cudaMemcpy(d_X, Xs, sizeof(float) * (size_t)(n * (k + 4)), cudaMemcpyHostToDevice));
		free(Xs);
		if (kept_call(im, handle, id, S, dt.rowptr, dt.colind, dt.val, X, d_X, k + 4, k, d_Y, Y, "ld of X and Y k + 4"))
			return 1;
		if (kept_call(im, handle, id, S, moved_rowptr, moved_colind, dt.val, X, d_X, k + 4, k, d_Y, Y, "tile moved"))
			return 1;
		starfa_cuda_spmm_kept(&plans);
		CHECK_MSG(plans == 1, "%s: %d plans kept for one pattern", impl_name(im), plans);
		/* Another pattern written over the moved tile's arrays, under its own id: right, and a second plan */
		CUDA_OK(cudaMemcpy(moved_rowptr, b_rowptr, sizeof(uint32_t) * (size_t)(m + 1), cudaMemcpyHostToDevice));
		CUDA_OK(cudaMemcpy(moved_colind, b_colind, sizeof(uint32_t) * (size_t)S->nnz, cudaMemcpyHostToDevice));
		float *d_bval = to_device(b.val, sizeof(float) * (size_t)S->nnz);
		CHECK(d_bval);
		int rc = kept_call(im, handle, id + 1, &b, moved_rowptr, moved_colind, d_bval, X, d_X, k + 4, k, d_Y, Y,
				   "another pattern at the same addresses");
		if (!rc) {
			starfa_cuda_spmm_kept(&plans);
			CHECK_MSG(plans == 2, "%s: %d plans kept for two patterns", impl_name(im), plans);
			/* a limit of one byte keeps nothing, and the result is right all the same */
			GPU_OK(starfa_cuda_spmm_release());
			size_t before = starfa_cuda_spmm_keep_limit(1);
			rc = kept_call(im, handle, id + 1, &b, moved_rowptr, moved_colind, d_bval, X, d_X, k + 4, k, d_Y, Y,
				       "nothing kept");
			starfa_cuda_spmm_keep_limit(before);
			CHECK(starfa_cuda_spmm_kept(&plans) == 0 && plans == 0);
		}
		cudaFree(d_bval);
		if (rc)
			return 1;
		/* put a's pattern back for the next implementation */
		CUDA_OK(cudaMemcpy(moved_rowptr, a.rowptr, sizeof(uint32_t) * (size_t)(m + 1), cudaMemcpyHostToDevice));
		CUDA_OK(cudaMemcpy(moved_colind, a.colind, sizeof(uint32_t) * (size_t)S->nnz, cudaMemcpyHostToDevice));
	}
	/* The tuned implementation adds S·X to Y exactly once with beta 1, at its first call (which times the
	 * three on a copy of Y) and at the next (the kept choice); it keeps at most the winner's plan. */
	for (int call = 0; call < 2; call++) {
		float *Y0 = malloc(sizeof(float) * (size_t)(m * k)), *Ys = NULL;
		CHECK(Y0);
		testing_fill_random(Y0, (size_t)(m * k), &rng);
		CHECK(Ys = to_strided(Y0, m, k, k));
		CUDA_OK(cudaMemcpy(d_Y, Ys, sizeof(float) * (size_t)(m * k), cudaMemcpyHostToDevice));
		CUDA_OK(cudaMemcpy(d_X, X, sizeof(float) * (size_t)(n * k), cudaMemcpyHostToDevice));
		CUDA_OK(cudaMemcpy(dt.val, S->val, sizeof(float) * (size_t)S->nnz, cudaMemcpyHostToDevice));
		GPU_OK(starfa_cuda_spmm(STARFA_SPMM_TUNED, handle, 900, m, n, S->nnz, dt.rowptr, dt.colind, dt.val, d_X, k,
					k, 1, d_Y, k, 0));
		CUDA_OK(cudaDeviceSynchronize());
		CUDA_OK(cudaMemcpy(Ys, d_Y, sizeof(float) * (size_t)(m * k), cudaMemcpyDeviceToHost));
		CHECK(from_strided(Ys, m, k, k, Y) == 0);
		/* Against Y0 + S·X in double: the bound counts the rounding of the sum with Y0 (eps |Y0|) as
		 * well as that of S·X, which subtracting Y0 and checking S·X alone would leave out. */
		double worst = 0;
		int64_t worst_e = 0;
		for (int64_t r = 0; r < m; r++)
			for (int64_t d = 0; d < k; d++) {
				double sum = 0, mag = 0;
				for (uint32_t q = S->rowptr[r]; q < S->rowptr[r + 1]; q++) {
					double t = (double)S->val[q] * X[(int64_t)S->colind[q] * k + d];
					sum += t;
					mag += fabs(t);
				}
				const int64_t e = r * k + d;
				const double want = Y0[e] + sum, diff = fabs((double)Y[e] - want);
				const double bound = (double)(S->rowptr[r + 1] - S->rowptr[r] + 3) * FLT_EPSILON *
						     (mag + fabs((double)Y0[e]));
				const double ratio = diff == 0 ? 0 : bound > 0 ? diff / bound : INFINITY;
				if (!(ratio <= worst)) {
					worst = ratio;
					worst_e = e;
				}
			}
		free(Y0);
		free(Ys);
		CHECK_MSG(worst <= 1, "tuned, beta 1, call %d: element (%lld, %lld) off by %.2f x the bound", call,
			  (long long)(worst_e / k), (long long)(worst_e % k), worst);
		int kept_plans = -1;
		starfa_cuda_spmm_kept(&kept_plans);
		CHECK_MSG(kept_plans <= 1, "tuned: %d plans kept for one tile", kept_plans);
	}
	GPU_OK(starfa_cuda_spmm_release());
	int plans = -1;
	CHECK(starfa_cuda_spmm_kept(&plans) == 0 && plans == 0);
	cudaFree(d_X);
	cudaFree(d_Y);
	cudaFree(moved_rowptr);
	cudaFree(moved_colind);
	free_device_tile(&dt);
	free(b.rowptr);
	free(b.colind);
	free(b.val);
	free(b_rowptr);
	free(b_colind);
	free(X);
	free(Y);
	free(val2);
	free_tile(&a);
	CHECK(cusparseDestroy(handle) == CUSPARSE_STATUS_SUCCESS);
	return 0;
}

TEST(spmm_cuda, band_tasks_match_tile_tasks_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return band_tasks(STARFA_WORKER_CUDA);
}

TEST(spmm_cuda, fused_sddmm_spmm_matches_reference_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return fused_matches_reference(STARFA_WORKER_CUDA, testing_seed() + 31);
}

/* StarPU runs every task on the GPU when CPUs are kept out: both sides, zero fills included. */
TEST(spmm_cuda, task_graph_on_cuda_workers)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	starfa_options opts;
	starfa_options_default(&opts);
	opts.ncpus = 0;
	CHECK_OK(testing_runtime_with(&opts));
	CHECK(starfa_worker_count(STARFA_WORKER_CUDA) > 0);
	uint64_t rng = testing_seed() + 11;
	for (int crowded = 0; crowded < 2; crowded++) {
		starfa_csr *S = crowded ? crowded_csr(3000, 2000, &rng)
					: testing_random_csr(3000, 2000, 100000, 1.0, &rng);
		CHECK(S);
		starfa_csr *St = NULL;
		CHECK_OK(starfa_csr_transpose(S, &St));
		starfa_tiling_options tiling = {crowded ? 16 : 6, crowded ? 16 : 5, 1};
		starfa_tiled *t = NULL;
		CHECK_OK(starfa_tiled_create(S, &tiling, &t));
		if (crowded)
			CHECK(empty_bands(t, STARFA_ROWS) > 0 && empty_bands(t, STARFA_COLS) > 0);
		for (int side = 0; side < 2; side++) {
			int64_t k = side ? 64 : 30; /* 16-byte loads, and not */
			starfa_stats_reset();
			if (run_graph(t, S, St, (starfa_side)side, k, &rng, 0))
				return 1;
			starfa_worker_stats st;
			starfa_stats_get(&st);
			int64_t want = 2 * expected_tasks(t, (starfa_side)side); /* run_graph inserts twice */
			CHECK_MSG(st.tasks[STARFA_WORKER_CUDA] == want && st.tasks[STARFA_WORKER_CPU] == 0,
				  "side %d: cuda %lld cpu %lld tasks, expected %lld on cuda", side,
				  (long long)st.tasks[STARFA_WORKER_CUDA], (long long)st.tasks[STARFA_WORKER_CPU],
				  (long long)want);
		}
		starfa_tiled_free(t);
		starfa_csr_free(S);
		starfa_csr_free(St);
	}
	return 0;
}

#else

TEST(spmm_cuda, not_built)
{
	SKIP("starfa was configured without CUDA");
}

#endif
