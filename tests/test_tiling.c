/* Tiling: every nonzero in exactly one tile, nnz-balanced bands, handles registered
 * and released, values gathered back in CSR order. */
#include "testing.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>

/* Rebuilds the global matrix from the tiles (as a dense array) and compares it with
 * the source CSR entry by entry; also counts the tile entries. */
static int check_tiles_cover(const starfa_csr *csr, const starfa_tiled *t)
{
	int64_t rt = starfa_tiled_row_tiles(t), ct = starfa_tiled_col_tiles(t);
	const int64_t *rb = starfa_tiled_row_bounds(t), *cb = starfa_tiled_col_bounds(t);
	CHECK(rb[0] == 0 && rb[rt] == csr->nrows && cb[0] == 0 && cb[ct] == csr->ncols);
	for (int64_t i = 0; i < rt; i++)
		CHECK_MSG(rb[i] < rb[i + 1], "row band %lld is empty", (long long)i);
	for (int64_t j = 0; j < ct; j++)
		CHECK_MSG(cb[j] < cb[j + 1], "column band %lld is empty", (long long)j);

	/* seen[p] counts how many tile entries landed on source nonzero p. */
	int *seen = calloc((size_t)csr->nnz + 1, sizeof *seen);
	CHECK(seen);
	int64_t total = 0;
	for (int64_t i = 0; i < rt; i++)
		for (int64_t j = 0; j < ct; j++) {
			int64_t nr, nc, nnz;
			const uint32_t *rowptr, *colind;
			const float *val;
			starfa_tiled_tile_csr(t, i, j, &nr, &nc, &nnz, &rowptr, &colind, &val);
			CHECK(nr == rb[i + 1] - rb[i] && nc == cb[j + 1] - cb[j]);
			CHECK(nnz == starfa_tiled_tile_nnz(t, i, j));
			CHECK(rowptr[0] == 0 && rowptr[nr] == nnz);
			total += nnz;
			for (int64_t r = 0; r < nr; r++)
				for (uint32_t p = rowptr[r]; p < rowptr[r + 1]; p++) {
					CHECK(colind[p] < nc);
					CHECK(p == rowptr[r] || colind[p] > colind[p - 1]);
					int64_t row = rb[i] + r, col = cb[j] + colind[p];
					/* Find it in the source row. */
					int64_t q = csr->rowptr[row];
					while (q < csr->rowptr[row + 1] && csr->colind[q] != col)
						q++;
					CHECK_MSG(q < csr->rowptr[row + 1], "tile (%lld,%lld) holds (%lld,%lld), not in the matrix",
						  (long long)i, (long long)j, (long long)row, (long long)col);
					CHECK(val[p] == csr->val[q]);
					seen[q]++;
				}
		}
	CHECK(total == csr->nnz);
	for (int64_t p = 0; p < csr->nnz; p++)
		CHECK_MSG(seen[p] == 1, "nonzero %lld is in %d tiles", (long long)p, seen[p]);
	free(seen);
	return 0;
}

/* Tiles large enough to be filled and transposed in chunks: the forward tiles cover every nonzero once,
 * S's values copied on the column side come out in the transposed CSR's order, and so do the row side's
 * moved there through the tiles' maps. */
TEST(tiling, large_tiles_filled_and_transposed_in_chunks)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 9;
	starfa_csr *csr = testing_random_csr(3000, 1500, 400000, 1.2, &rng);
	starfa_csr *tr = NULL;
	CHECK(csr);
	CHECK_OK(starfa_csr_transpose(csr, &tr));
	float *rows = malloc(sizeof *rows * (size_t)csr->nnz), *cols = malloc(sizeof *cols * (size_t)csr->nnz);
	CHECK(rows && cols);
	static const int64_t grids[][2] = {{1, 1}, {2, 3}};
	for (int g = 0; g < 2; g++) {
		starfa_tiling_options opts = {grids[g][0], grids[g][1], 1};
		starfa_tiled *t = NULL;
		starfa_sparse_values *v = NULL, *vt = NULL, *moved = NULL;
		CHECK_OK(starfa_tiled_create(csr, &opts, &t));
		if (check_tiles_cover(csr, t))
			return 1;
		CHECK_OK(starfa_sparse_values_create(t, STARFA_ROWS, &v));
		CHECK_OK(starfa_sparse_values_create(t, STARFA_COLS, &vt));
		CHECK_OK(starfa_sparse_values_create(t, STARFA_COLS, &moved));
		CHECK_OK(starfa_insert_values_map(v, STARFA_VALUES_COPY, 0.0f, 0.0f, NULL));
		CHECK_OK(starfa_insert_values_map(vt, STARFA_VALUES_COPY, 0.0f, 0.0f, NULL));
		CHECK_OK(starfa_insert_values_transpose(v, moved));
		testing_poison(rows, (size_t)csr->nnz);
		testing_poison(cols, (size_t)csr->nnz);
		CHECK_OK(starfa_sparse_values_gather(v, rows));
		CHECK_OK(starfa_sparse_values_gather(vt, cols));
		for (int64_t p = 0; p < csr->nnz; p++)
			CHECK_MSG(rows[p] == csr->val[p] && cols[p] == tr->val[p], "grid %lldx%lld entry %lld: %g, %g",
				  (long long)grids[g][0], (long long)grids[g][1], (long long)p, (double)rows[p], (double)cols[p]);
		testing_poison(cols, (size_t)csr->nnz);
		CHECK_OK(starfa_sparse_values_gather(moved, cols));
		for (int64_t p = 0; p < csr->nnz; p++)
			CHECK_MSG(cols[p] == tr->val[p], "grid %lldx%lld, moved entry %lld: %g against %g",
				  (long long)grids[g][0], (long long)grids[g][1], (long long)p, (double)cols[p],
				  (double)tr->val[p]);
		starfa_sparse_values_free(v);
		starfa_sparse_values_free(vt);
		starfa_sparse_values_free(moved);
		starfa_tiled_free(t);
	}
	free(rows);
	free(cols);
	starfa_csr_free(tr);
	starfa_csr_free(csr);
	return 0;
}

/* The boundaries balance nonzeros: each cut lands within one row of its target, so no
 * band exceeds its share by more than two of the heaviest rows. */
static int check_row_balance(const starfa_csr *csr, const starfa_tiled *t)
{
	int64_t rt = starfa_tiled_row_tiles(t);
	const int64_t *rb = starfa_tiled_row_bounds(t);
	int64_t heaviest = 0;
	for (int64_t r = 0; r < csr->nrows; r++) {
		int64_t d = csr->rowptr[r + 1] - csr->rowptr[r];
		heaviest = d > heaviest ? d : heaviest;
	}
	double share = (double)csr->nnz / rt;
	for (int64_t i = 0; i < rt; i++) {
		int64_t band = csr->rowptr[rb[i + 1]] - csr->rowptr[rb[i]];
		CHECK_MSG(band <= share + 2 * heaviest, "band %lld holds %lld nonzeros, share %.0f, heaviest row %lld",
			  (long long)i, (long long)band, share, (long long)heaviest);
	}
	return 0;
}

TEST(tiling, covers_every_nonzero_once)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed();
	static const int64_t grids[][2] = {{1, 1}, {3, 5}, {7, 2}, {16, 16}, {0, 0}};
	for (size_t g = 0; g < sizeof grids / sizeof grids[0]; g++) {
		starfa_csr *csr = testing_random_csr(200 + (int64_t)testing_below(&rng, 300),
						     100 + (int64_t)testing_below(&rng, 300), 5000, 1.5, &rng);
		CHECK(csr);
		starfa_tiling_options opts = {grids[g][0], grids[g][1], 0};
		starfa_tiled *t = NULL;
		CHECK_OK(starfa_tiled_create(csr, &opts, &t));
		if (grids[g][0]) {
			CHECK(starfa_tiled_row_tiles(t) == grids[g][0]);
			CHECK(starfa_tiled_col_tiles(t) == grids[g][1]);
		}
		CHECK(starfa_tiled_nnz(t) == csr->nnz);
		if (check_tiles_cover(csr, t) || check_row_balance(csr, t))
			return 1;
		starfa_tiled_free(t);
		starfa_csr_free(csr);
	}
	return 0;
}

TEST(tiling, balances_skewed_rows_better_than_even_rows)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 1;
	/* Strong skew: an even split by rows would put most nonzeros in the first band. */
	starfa_csr *csr = testing_random_csr(4000, 3000, 60000, 3.0, &rng);
	CHECK(csr);
	starfa_tiling_options opts = {4, 4, 0};
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(csr, &opts, &t));
	if (check_row_balance(csr, t))
		return 1;
	int64_t first_even_band = csr->rowptr[csr->nrows / 4];
	int64_t first_band = csr->rowptr[starfa_tiled_row_bounds(t)[1]];
	CHECK_MSG(first_even_band > csr->nnz / 2, "the test matrix is not skewed enough (%lld)", (long long)first_even_band);
	CHECK(first_band < first_even_band);
	starfa_tiled_free(t);
	starfa_csr_free(csr);
	return 0;
}

TEST(tiling, clamps_more_tiles_than_rows)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 2;
	starfa_csr *csr = testing_random_csr(5, 3, 10, 0.0, &rng);
	CHECK(csr);
	starfa_tiling_options opts = {64, 64, 1};
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(csr, &opts, &t));
	CHECK(starfa_tiled_row_tiles(t) == 5 && starfa_tiled_col_tiles(t) == 3);
	if (check_tiles_cover(csr, t))
		return 1;
	starfa_tiled_free(t);
	starfa_csr_free(csr);
	return 0;
}

/* row_band: consecutive runs of that many rows whatever their nonzeros (skewed rows), the last band
 * what is left; the tiles still cover every nonzero once; negative is refused. */
TEST(tiling, row_band_cuts_runs_of_rows)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 9;
	const int64_t m = 50 + (int64_t)testing_below(&rng, 300), band = 1 + (int64_t)testing_below(&rng, 70);
	starfa_csr *csr = testing_random_csr(m, 40, 8 * m, 1.5, &rng);
	CHECK(csr);
	starfa_tiling_options opts = {7, 2, 1, 4.0, 0};
	opts.row_band = band;
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(csr, &opts, &t));
	const int64_t bands = (m + band - 1) / band;
	CHECK_MSG(starfa_tiled_row_tiles(t) == bands, "%lld bands of %lld rows: %lld", (long long)m, (long long)band,
		  (long long)starfa_tiled_row_tiles(t));
	const int64_t *bounds = starfa_tiled_row_bounds(t);
	for (int64_t b = 0; b <= bands; b++)
		CHECK(bounds[b] == (b * band < m ? b * band : m));
	if (check_tiles_cover(csr, t))
		return 1;
	starfa_tiled_free(t);
	opts.row_band = -1;
	CHECK(starfa_tiled_create(csr, &opts, &t) == STARFA_EINVAL && t == NULL);
	starfa_csr_free(csr);
	return 0;
}

TEST(tiling, single_nonzero_and_empty_tiles)
{
	CHECK_OK(testing_runtime());
	starfa_coo *coo = starfa_coo_new(50, 40, 1);
	CHECK(coo);
	coo->row[0] = 49;
	coo->col[0] = 0;
	coo->val[0] = 2.5f;
	coo->nnz = 1;
	starfa_csr *csr = NULL;
	CHECK_OK(starfa_csr_from_coo(coo, &csr));
	starfa_coo_free(coo);
	starfa_tiling_options opts = {4, 4, 1};
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(csr, &opts, &t));
	if (check_tiles_cover(csr, t))
		return 1;
	int64_t nonempty = 0;
	for (int64_t i = 0; i < 4; i++)
		for (int64_t j = 0; j < 4; j++)
			nonempty += starfa_tiled_tile_nnz(t, i, j) > 0;
	CHECK(nonempty == 1);
	starfa_tiled_free(t);
	starfa_csr_free(csr);
	return 0;
}

TEST(tiling, rejects_bad_arguments)
{
	CHECK_OK(testing_runtime());
	starfa_csr empty = {0, 10, 0, NULL, NULL, NULL};
	starfa_tiled *t = NULL;
	CHECK(starfa_tiled_create(&empty, NULL, &t) == STARFA_EINVAL && t == NULL);
	CHECK(strstr(starfa_last_error(), "no rows") != NULL);
	uint64_t rng = testing_seed() + 3;
	starfa_csr *csr = testing_random_csr(10, 10, 20, 0.0, &rng);
	starfa_tiling_options negative = {-1, 2, 0};
	CHECK(starfa_tiled_create(csr, &negative, &t) == STARFA_EINVAL);
	const double bad_costs[] = {-1.0, NAN, INFINITY, 1e30};
	for (int i = 0; i < 4; i++) {
		starfa_tiling_options costly = {2, 2, 0, i % 2 ? 0 : bad_costs[i], i % 2 ? bad_costs[i] : 0};
		CHECK_MSG(starfa_tiled_create(csr, &costly, &t) == STARFA_EINVAL && t == NULL, "cost %g", bad_costs[i]);
		CHECK(strstr(starfa_last_error(), "row_cost") != NULL);
	}
	starfa_csr_free(csr);
	return 0;
}

/* With a cost per row, the bands balance nonzeros plus cost x rows: at the extremes equal rows
 * (the cost dwarfs the nonzeros) and equal nonzeros (no cost), in between the weighted sum. */
TEST(tiling, row_cost_balances_nonzeros_plus_rows)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 5;
	starfa_csr *csr = testing_random_csr(3000, 2000, 40000, 3.0, &rng);
	CHECK(csr);
	int64_t *col_n = calloc((size_t)csr->ncols, sizeof *col_n);
	CHECK(col_n);
	for (int64_t p = 0; p < csr->nnz; p++)
		col_n[csr->colind[p]]++;
	int64_t heaviest_row = 0, heaviest_col = 0;
	for (int64_t r = 0; r < csr->nrows; r++)
		if (csr->rowptr[r + 1] - csr->rowptr[r] > heaviest_row)
			heaviest_row = csr->rowptr[r + 1] - csr->rowptr[r];
	for (int64_t c = 0; c < csr->ncols; c++)
		heaviest_col = col_n[c] > heaviest_col ? col_n[c] : heaviest_col;
	const double costs[] = {0.0, 7.5, 1e6};
	for (int i = 0; i < 3; i++) {
		double cost = costs[i];
		starfa_tiling_options opts = {5, 4, 0, cost, cost};
		starfa_tiled *t = NULL;
		CHECK_OK(starfa_tiled_create(csr, &opts, &t));
		for (int side = 0; side < 2; side++) {
			int64_t bands = side ? starfa_tiled_col_tiles(t) : starfa_tiled_row_tiles(t);
			const int64_t *b = side ? starfa_tiled_col_bounds(t) : starfa_tiled_row_bounds(t);
			int64_t n = side ? csr->ncols : csr->nrows;
			double total = (double)csr->nnz + cost * (double)n;
			double heaviest = (double)(side ? heaviest_col : heaviest_row) + cost;
			for (int64_t k = 0; k < bands; k++) {
				int64_t nnz = 0;
				for (int64_t j = b[k]; j < b[k + 1]; j++)
					nnz += side ? col_n[j] : csr->rowptr[j + 1] - csr->rowptr[j];
				double weight = (double)nnz + cost * (double)(b[k + 1] - b[k]);
				CHECK_MSG(fabs(weight - total / (double)bands) <= heaviest + 1,
					  "cost %g, side %d, band %lld: weight %.0f, share %.0f, heaviest item %.0f", cost,
					  side, (long long)k, weight, total / (double)bands, heaviest);
			}
		}
		if (cost == 1e6) /* rows alone: n / bands each, give or take one */
			for (int64_t k = 0; k < starfa_tiled_row_tiles(t); k++)
				CHECK(llabs(starfa_tiled_row_bounds(t)[k + 1] - starfa_tiled_row_bounds(t)[k] - csr->nrows / 5) <= 1);
		starfa_tiled_free(t);
	}
	free(col_n);
	starfa_csr_free(csr);
	return 0;
}

/* Dense row blocks follow the bands; values written through handles come back in CSR
 * order; everything registered is unregistered (ASan/valgrind check the rest). */
TEST(tiling, dense_blocks_and_gather_round_trip)
{
	CHECK_OK(testing_runtime());
	uint64_t rng = testing_seed() + 4;
	starfa_csr *csr = testing_random_csr(300, 200, 4000, 1.0, &rng);
	CHECK(csr);
	starfa_tiling_options opts = {5, 3, 1};
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(csr, &opts, &t));
	CHECK(starfa_tiled_has_transpose(t));

	int64_t k = 4;
	float *rows = malloc(sizeof(float) * (size_t)(csr->nrows * k));
	float *cols = malloc(sizeof(float) * (size_t)(csr->ncols * k));
	CHECK(rows && cols);
	testing_fill_random(rows, (size_t)(csr->nrows * k), &rng);
	testing_fill_random(cols, (size_t)(csr->ncols * k), &rng);
	starfa_dense *A = NULL, *B = NULL;
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, rows, k, &A));
	CHECK_OK(starfa_dense_create(t, STARFA_COLS, cols, k, &B));
	CHECK(starfa_dense_blocks(A) == 5 && starfa_dense_blocks(B) == 3);
	starfa_dense *bad = NULL;
	CHECK(starfa_dense_create(t, STARFA_ROWS, rows, 0, &bad) == STARFA_EINVAL && bad == NULL);

	/* SDDMM in scaled mode with A = B = ones would give back S: use the real operands and
	 * check against the reference, which also proves the gather order. */
	starfa_sparse_values *P = NULL;
	CHECK_OK(starfa_sparse_values_create(t, STARFA_ROWS, &P));
	CHECK_OK(starfa_insert_sddmm(t, A, B, STARFA_SDDMM_SCALED, P));
	CHECK_OK(starfa_wait());
	float *out = malloc(sizeof(float) * (size_t)csr->nnz);
	CHECK(out);
	testing_poison(out, (size_t)csr->nnz);
	CHECK_OK(starfa_sparse_values_gather(P, out));
	CHECK_OK(starfa_check_sddmm(csr, rows, cols, k, STARFA_SDDMM_SCALED, out, NULL));
	CHECK_OK(starfa_dense_sync(A));

	starfa_sparse_values_free(P);
	starfa_dense_free(A);
	starfa_dense_free(B);
	starfa_tiled_free(t);
	starfa_csr_free(csr);
	free(rows);
	free(cols);
	free(out);
	return 0;
}
