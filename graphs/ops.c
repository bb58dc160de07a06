/* The whole-matrix operations: short loops over the per-tile tasks, at the default priority. A graph
 * that needs another order, priorities or owners writes its own loop over starfa_task_*. */
#include "runtime/internal.h"

/* Tiles of a side's grid: rows x columns. */
static void side_grid(const starfa_tiled *S, starfa_side side, int64_t *nr, int64_t *nc)
{
	*nr = side == STARFA_ROWS ? starfa_tiled_row_tiles(S) : starfa_tiled_col_tiles(S);
	*nc = side == STARFA_ROWS ? starfa_tiled_col_tiles(S) : starfa_tiled_row_tiles(S);
}

/* Nonzeros of tile (i, j) of a side's grid (tile (j, i) of the forward grid for the transposed one). */
static int64_t side_tile_nnz(const starfa_tiled *S, starfa_side side, int64_t i, int64_t j)
{
	return side == STARFA_ROWS ? starfa_tiled_tile_nnz(S, i, j) : starfa_tiled_tile_nnz(S, j, i);
}

/* Tiles j = 0, 1, ... of band `band` of a side's grid, in order: the first with entries overwrites the
 * band's output (an all-empty band zeroes it through its last tile), the others add to it; sequential
 * consistency on the output's handle keeps that order whatever the workers, so the sums do not depend
 * on the schedule. `call` sees j and accumulate. */
#define FOR_BAND_TILES(S, side, band, call)                                                              \
	do {                                                                                             \
		int64_t nr_, nc_;                                                                        \
		side_grid(S, side, &nr_, &nc_);                                                          \
		int first_ = 1;                                                                          \
		for (int64_t j = 0; j < nc_; j++) {                                                      \
			if (side_tile_nnz(S, side, band, j) == 0 && !(first_ && j == nc_ - 1))           \
				continue;                                                                \
			int accumulate = !first_;                                                        \
			int rc_ = (call);                                                                \
			if (rc_)                                                                         \
				return rc_;                                                              \
			first_ = 0;                                                                      \
		}                                                                                        \
	} while (0)

int starfa_insert_sddmm_ab(const starfa_tiled *S, const starfa_dense *A, const starfa_dense *B, starfa_sddmm_mode mode,
			   float alpha, float beta, starfa_sparse_values *P)
{
	if (!S || !P)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_sddmm: missing operand");
	int64_t nr, nc;
	side_grid(S, starfa_sparse_values_side(P), &nr, &nc);
	for (int64_t i = 0; i < nr; i++)
		for (int64_t j = 0; j < nc; j++) {
			int rc = starfa_task_sddmm(S, i, j, A, B, mode, alpha, beta, P, NULL);
			if (rc)
				return rc;
		}
	return 0;
}

int starfa_insert_sddmm(const starfa_tiled *S, const starfa_dense *A, const starfa_dense *B, starfa_sddmm_mode mode,
			starfa_sparse_values *P)
{
	return starfa_insert_sddmm_ab(S, A, B, mode, 1.0f, 0.0f, P);
}

/* One band task; starfa_task_spmm_band checks the operands and the band. */
int starfa_insert_spmm_band(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_sparse_values *V,
			    const starfa_dense *X, starfa_dense *Y)
{
	return starfa_task_spmm_band(S, side, band, V, X, Y, NULL);
}

int starfa_insert_spmm_values(const starfa_tiled *S, starfa_side side, const starfa_sparse_values *V,
			      const starfa_dense *X, starfa_dense *Y)
{
	if (!S)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_spmm: missing operand");
	int64_t nr, nc;
	side_grid(S, side, &nr, &nc);
	for (int64_t i = 0; i < nr; i++) {
		int rc = starfa_insert_spmm_band(S, side, i, V, X, Y);
		if (rc)
			return rc;
	}
	return 0;
}

int starfa_insert_spmm(const starfa_tiled *S, starfa_side side, const starfa_dense *X, starfa_dense *Y)
{
	return starfa_insert_spmm_values(S, side, NULL, X, Y);
}

/* One band task; starfa_task_sddmm_spmm_band checks the operands and the band. */
int starfa_insert_sddmm_spmm_band(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *A,
				  const starfa_dense *B, starfa_fused_mode mode, float eps, const starfa_dense *active,
				  starfa_dense *Y)
{
	return starfa_task_sddmm_spmm_band(S, side, band, A, B, mode, eps, active, Y, NULL);
}

int starfa_insert_sddmm_spmm(const starfa_tiled *S, starfa_side side, const starfa_dense *A, const starfa_dense *B,
			     starfa_fused_mode mode, float eps, starfa_dense *Y)
{
	if (!S)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_sddmm_spmm: missing operand");
	int64_t nr, nc;
	side_grid(S, side, &nr, &nc);
	for (int64_t i = 0; i < nr; i++) {
		int rc = starfa_insert_sddmm_spmm_band(S, side, i, A, B, mode, eps, NULL, Y);
		if (rc)
			return rc;
	}
	return 0;
}

/* Calls fn on every tile (i, j) of a values set's grid. */
#define FOR_EACH_TILE(S, side, call)                                                                     \
	do {                                                                                             \
		int64_t nr_, nc_;                                                                        \
		side_grid(S, side, &nr_, &nc_);                                                          \
		for (int64_t i = 0; i < nr_; i++)                                                        \
			for (int64_t j = 0; j < nc_; j++) {                                              \
				int rc_ = (call);                                                        \
				if (rc_)                                                                 \
					return rc_;                                                      \
			}                                                                                \
	} while (0)

int starfa_insert_values_transpose(const starfa_sparse_values *src, starfa_sparse_values *dst)
{
	if (!src || !dst)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_values_transpose: missing operand");
	FOR_EACH_TILE(starfa_sparse_values_pattern(src), starfa_sparse_values_side(src),
		      starfa_task_values_transpose(src, i, j, dst, NULL));
	return 0;
}

int starfa_insert_values_map(starfa_sparse_values *Y, starfa_values_op op, float a, float b,
			     const starfa_sparse_values *X)
{
	if (!Y)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_values_map: missing operand");
	FOR_EACH_TILE(starfa_sparse_values_pattern(Y), starfa_sparse_values_side(Y),
		      starfa_task_values_map(Y, i, j, op, a, b, X, NULL));
	return 0;
}

int starfa_insert_dense_map(starfa_dense *Y, starfa_dense_op op, float a, float b, const starfa_dense *X,
			    const starfa_vector *v)
{
	if (!Y)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_dense_map: missing operand");
	for (int64_t b_ = 0; b_ < starfa_dense_blocks(Y); b_++) {
		int rc = starfa_task_dense_map(Y, b_, op, a, b, X, v, NULL);
		if (rc)
			return rc;
	}
	return 0;
}

int starfa_insert_dense_uniform(starfa_dense *Y, float lo, float hi, uint64_t seed)
{
	if (!Y)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_dense_uniform: missing operand");
	for (int64_t b = 0; b < starfa_dense_blocks(Y); b++) {
		int rc = starfa_task_dense_uniform(Y, b, lo, hi, seed, NULL);
		if (rc)
			return rc;
	}
	return 0;
}

int starfa_insert_dense_convert(starfa_dense *Y, starfa_convert dir, const starfa_dense *X)
{
	if (!Y)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_dense_convert: missing operand");
	for (int64_t b = 0; b < starfa_dense_blocks(Y); b++) {
		int rc = starfa_task_dense_convert(Y, b, dir, X, NULL);
		if (rc)
			return rc;
	}
	return 0;
}

int starfa_insert_dense_colsum(const starfa_dense *X, starfa_vector *v)
{
	if (!X)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_dense_colsum: missing operand");
	for (int64_t b = 0; b < starfa_dense_blocks(X); b++) {
		int rc = starfa_task_dense_colsum(X, b, b > 0, v, NULL);
		if (rc)
			return rc;
	}
	return 0;
}

int starfa_insert_dense_rowsum(const starfa_dense *X, starfa_dense *R)
{
	if (!X)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_dense_rowsum: missing operand");
	for (int64_t b = 0; b < starfa_dense_blocks(X); b++) {
		int rc = starfa_task_dense_rowsum(X, b, R, NULL);
		if (rc)
			return rc;
	}
	return 0;
}

int starfa_insert_dense_cg(starfa_dense *X, starfa_dense *R, starfa_dense *P, const starfa_dense *Q, starfa_dense *rr,
			   const starfa_dense *lam, int start)
{
	if (!X)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_dense_cg: missing operand");
	for (int64_t b = 0; b < starfa_dense_blocks(X); b++) {
		int rc = starfa_task_dense_cg(X, R, P, Q, rr, lam, b, start, NULL);
		if (rc)
			return rc;
	}
	return 0;
}

/* The total of a fresh set of sums once `insert` has filled it. */
static int total_of(starfa_sums *sums, int rc, double *total)
{
	if (!rc)
		rc = starfa_sums_total(sums, total);
	else
		starfa_wait(); /* the tasks inserted before the failure still use the sums */
	starfa_sums_free(sums);
	return rc;
}

int starfa_reduce_values(const starfa_sparse_values *Y, starfa_reduce_op op, float a, const starfa_sparse_values *X,
			 double *total)
{
	if (!Y || !total)
		return starfa_set_error(STARFA_EINVAL, "starfa_reduce_values: missing operand");
	const starfa_tiled *S = starfa_sparse_values_pattern(Y);
	int64_t nr, nc;
	side_grid(S, starfa_sparse_values_side(Y), &nr, &nc);
	starfa_sums *sums = NULL;
	int rc = starfa_sums_create(nr * nc, &sums);
	if (rc)
		return rc;
	for (int64_t i = 0; i < nr && !rc; i++)
		for (int64_t j = 0; j < nc && !rc; j++)
			rc = starfa_task_values_reduce(Y, i, j, op, a, X, sums, i * nc + j, NULL);
	return total_of(sums, rc, total);
}

int starfa_reduce_sqerr(const starfa_tiled *S, starfa_side side, const starfa_dense *A, const starfa_dense *B, float shift,
			double *total)
{
	if (!S || !A || !B || !total)
		return starfa_set_error(STARFA_EINVAL, "starfa_reduce_sqerr: missing operand");
	int64_t nr, nc;
	side_grid(S, side, &nr, &nc);
	starfa_sums *sums = NULL;
	int rc = starfa_sums_create(nr, &sums);
	if (rc)
		return rc;
	for (int64_t b = 0; b < nr && !rc; b++)
		rc = starfa_task_sqerr_band(S, side, b, A, B, shift, sums, b, NULL);
	return total_of(sums, rc, total);
}

int starfa_reduce_dense(const starfa_dense *D, starfa_reduce_op op, double *total)
{
	if (!D || !total)
		return starfa_set_error(STARFA_EINVAL, "starfa_reduce_dense: missing operand");
	starfa_sums *sums = NULL;
	int rc = starfa_sums_create(starfa_dense_blocks(D), &sums);
	if (rc)
		return rc;
	for (int64_t b = 0; b < starfa_dense_blocks(D) && !rc; b++)
		rc = starfa_task_dense_reduce(D, b, op, sums, b, NULL);
	return total_of(sums, rc, total);
}

/* ------------------------------------------------------------------ ALS bands */


int starfa_insert_hermitian(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *theta,
			    int64_t col0, starfa_feedback feedback, float alpha, const starfa_dense *info,
			    starfa_systems *sys)
{
	if (!S || (side != STARFA_ROWS && side != STARFA_COLS))
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_hermitian: missing operand or unknown side");
	if (side == STARFA_COLS && !starfa_tiled_has_transpose(S))
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_hermitian: the column side needs S's transposed grid "
						       "(starfa_tiling_options.transposed = 1)");
	FOR_BAND_TILES(S, side, band,
		       starfa_task_hermitian(S, side, band, j, theta, col0, feedback, alpha, info, sys, accumulate, NULL));
	return 0;
}

int starfa_insert_bias(const starfa_tiled *S, starfa_side side, int64_t band, const starfa_dense *theta,
		       int64_t col0, int64_t offset_col, float mu, starfa_feedback feedback, float alpha,
		       starfa_systems *sys)
{
	if (!S || (side != STARFA_ROWS && side != STARFA_COLS))
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_bias: missing operand or unknown side");
	if (side == STARFA_COLS && !starfa_tiled_has_transpose(S))
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_bias: the column side needs S's transposed grid "
						       "(starfa_tiling_options.transposed = 1)");
	FOR_BAND_TILES(S, side, band,
		       starfa_task_bias(S, side, band, j, theta, col0, offset_col, mu, feedback, alpha, sys, accumulate,
					NULL));
	return 0;
}

int starfa_insert_gram(const starfa_dense *theta, int64_t col0, int64_t k, starfa_gram *G)
{
	if (!theta)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_gram: missing operand");
	for (int64_t b = 0; b < starfa_dense_blocks(theta); b++) {
		int rc = starfa_task_gram(theta, b, col0, k, b > 0, G, NULL);
		if (rc)
			return rc;
	}
	return 0;
}

/* ------------------------------------------------------------------ CCD++ */

/* A pass that only rewrites the residual, over every band of a side's grid: a starfa_task_ccd_band task a
 * band (its tiles are independent, but a task a tile costs P² tasks a sweep for P bands' parallelism). */
static int ccd_sweep(const starfa_tiled *S, starfa_side side, starfa_sparse_values *R, const starfa_ccd_terms *terms)
{
	int64_t nr, nc;
	side_grid(S, side, &nr, &nc);
	for (int64_t i = 0; i < nr; i++) {
		int rc = starfa_task_ccd_band(S, side, i, R, 1, terms, NULL, NULL, NULL, 0.0f, 0, NULL);
		if (rc)
			return rc;
	}
	return 0;
}

/* A pass over a side's grid with its sums, then x's update from them: a starfa_task_ccd_band task a band. */
static int ccd_update(const starfa_tiled *S, starfa_side side, starfa_sparse_values *R, int write,
		      const starfa_ccd_terms *terms, starfa_dense *acc, starfa_dense *x, const starfa_dense *counts,
		      float lambda, int nonneg)
{
	int64_t nr, nc;
	side_grid(S, side, &nr, &nc);
	for (int64_t i = 0; i < nr; i++) {
		int rc = starfa_task_ccd_band(S, side, i, R, write, terms, acc, x, counts, lambda, nonneg, NULL);
		if (rc)
			return rc;
	}
	return 0;
}

int starfa_insert_ccd_feature(const starfa_tiled *S, const starfa_ccd_feature *f)
{
	if (!S || !f || !f->R || !f->RT || !f->w || !f->h || (f->update_h && (!f->held || !f->acc_h || !f->count_h)) ||
	    (f->update_w && (!f->acc_w || !f->count_w)) || (!f->prev_w) != (!f->prev_h))
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_ccd_feature: missing operand");
	if (f->inner < 1 || (!f->update_w && !f->update_h))
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_ccd_feature: inner must be >= 1 and a side updated");
	if (f->reg && (f->reg_slot < 0 || f->reg_slot >= starfa_sums_count(f->reg)))
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_ccd_feature: slot %lld of %lld sums", (long long)f->reg_slot,
					(long long)starfa_sums_count(f->reg));
	/* a matrix of one band a side: the whole feature in one task (the same kernels, one task's overhead) */
	int64_t nr, nc;
	side_grid(S, STARFA_ROWS, &nr, &nc);
	if (nr == 1 && nc == 1 && starfa_tiled_nnz(S) > 0)
		return starfa_task_ccd_feature(S, f, NULL);
	int rc = 0;
	/* the column side: x = h, y = w; R^ = R - prev + w h^T written there */
	if (f->update_h)
		rc = starfa_insert_dense_map(f->held, STARFA_DENSE_COPY, 0, 0, f->h, NULL);
	starfa_ccd_terms cols = {f->prev_h, f->prev_w, f->h, f->w, f->update_h ? f->w : NULL};
	if (!rc)
		rc = f->update_h ? ccd_update(S, STARFA_COLS, f->RT, 1, &cols, f->acc_h, f->h, f->count_h, f->lambda, f->nonneg)
				 : ccd_sweep(S, STARFA_COLS, f->RT, &cols);
	/* the row side: x = w, y = h; the feature put back with the h it had before its update */
	starfa_ccd_terms rows = {f->prev_w, f->prev_h, f->w, f->update_h ? f->held : f->h, f->update_w ? f->h : NULL};
	if (!rc)
		rc = f->update_w ? ccd_update(S, STARFA_ROWS, f->R, 1, &rows, f->acc_w, f->w, f->count_w, f->lambda, f->nonneg)
				 : ccd_sweep(S, STARFA_ROWS, f->R, &rows);
	/* the inner iterations over R^ as it stands (a feature with a fixed side is exact after one) */
	for (int64_t s = 1; s < f->inner && f->update_w && f->update_h && !rc; s++) {
		starfa_ccd_terms hc = {NULL, NULL, NULL, NULL, f->w}, wr = {NULL, NULL, NULL, NULL, f->h};
		if (!(rc = ccd_update(S, STARFA_COLS, f->RT, 0, &hc, f->acc_h, f->h, f->count_h, f->lambda, f->nonneg)))
			rc = ccd_update(S, STARFA_ROWS, f->R, 0, &wr, f->acc_w, f->w, f->count_w, f->lambda, f->nonneg);
	}
	/* the regularization, h's blocks then w's, as the one-task feature adds them */
	int added = f->reg_add;
	for (int side = 0; f->reg && side < 2 && !rc; side++) {
		const starfa_dense *x = side ? f->w : f->h, *counts = side ? f->count_w : f->count_h;
		if (!(side ? f->update_w : f->update_h))
			continue;
		for (int64_t b = 0; b < starfa_dense_blocks(x) && !rc; b++, added = 1)
			rc = starfa_task_ccd_regularizer(x, b, counts, f->reg, f->reg_slot, added, NULL);
	}
	return rc;
}

int starfa_insert_ccd_close(const starfa_tiled *S, starfa_sparse_values *R, starfa_sparse_values *RT,
			    const starfa_dense *w, const starfa_dense *h)
{
	if (!S || !R || !RT || !w || !h)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_ccd_close: missing operand");
	starfa_ccd_terms cols = {h, w, NULL, NULL, NULL}, rows = {w, h, NULL, NULL, NULL};
	int rc = ccd_sweep(S, STARFA_COLS, RT, &cols);
	return rc ? rc : ccd_sweep(S, STARFA_ROWS, R, &rows);
}

int starfa_insert_top_k(const starfa_tiled *S, const starfa_dense *A, const starfa_dense *B, int64_t k,
			const starfa_dense *active, starfa_dense *const *L)
{
	if (!S || !L)
		return starfa_set_error(STARFA_EINVAL, "starfa_insert_top_k: missing operand");
	for (int64_t i = 0; i < starfa_tiled_row_tiles(S); i++)
		for (int64_t j = 0; j < starfa_tiled_col_tiles(S); j++) {
			int rc = starfa_task_top_k(S, i, j, A, B, k, active, L[j], NULL);
			if (rc)
				return rc;
		}
	return 0;
}
