/* What the ALS band codelets (hermitian, bias) share: checking a band's operands. */
#ifndef STARFA_CODELETS_BAND_H
#define STARFA_CODELETS_BAND_H

#include "codelets/codelet.h"
#include "storage/systems.h"

/* Checks the operands an ALS band operation shares and returns the side's grid, or NULL (error set). */
static inline const struct starfa_grid *starfa_band_grid(const char *what, const starfa_tiled *S, starfa_side side,
							 int64_t band, const starfa_dense *theta, int64_t col0,
							 const starfa_systems *sys)
{
	if (!S || !theta || !sys || (side != STARFA_ROWS && side != STARFA_COLS)) {
		starfa_set_error(STARFA_EINVAL, "%s: missing operand or unknown side", what);
		return NULL;
	}
	if (side == STARFA_COLS && !starfa_tiled_has_transpose(S)) {
		starfa_set_error(STARFA_EINVAL, "%s: the column side needs S's transposed grid "
						"(starfa_tiling_options.transposed = 1)", what);
		return NULL;
	}
	const struct starfa_grid *grid = starfa_side_grid(S, side);
	int64_t theta_rows = side == STARFA_ROWS ? S->ncols : S->nrows;
	if (sys->S != S || sys->side != side) {
		starfa_set_error(STARFA_EINVAL, "%s: the systems were created for another matrix or side", what);
		return NULL;
	}
	if (band < 0 || band >= grid->nr) {
		starfa_set_error(STARFA_EINVAL, "%s: band %lld outside 0..%lld", what, (long long)band,
				 (long long)grid->nr - 1);
		return NULL;
	}
	if (theta->rows != theta_rows || theta->nblocks != grid->nc || col0 < 0 || col0 + sys->k > theta->cols) {
		starfa_set_error(STARFA_EINVAL,
				 "%s: theta must be the %s factors (%lld rows, blocked along S's %s tiles) with "
				 "columns %lld..%lld, but it is %lldx%lld in %lld blocks",
				 what, side == STARFA_ROWS ? "column" : "row", (long long)theta_rows,
				 side == STARFA_ROWS ? "column" : "row", (long long)col0, (long long)(col0 + sys->k - 1),
				 (long long)theta->rows, (long long)theta->cols, (long long)theta->nblocks);
		return NULL;
	}
	return grid;
}

#endif
