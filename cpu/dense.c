/* Element-wise maps, sums and reductions of dense blocks on the CPU. */
#include "cpu/dense.h"

#include "cpu/clones.h"
#include "cpu/elementwise.h"
#include "cpu/half.h"

#include <math.h>
#include <stdlib.h>

/* One loop per op and operand kind, with the op a constant in it: the op's switch folds away and the
 * loop vectorizes (the exp, log and digamma of cpu/special.h are branch-free for this). z is the
 * operand's row (a full row, or the per-column vector), or NULL for the scalar zs (per-row operand or
 * none). */
#define DENSE_MAP_LOOP(OP)                                                                                             \
	case OP:                                                                                                       \
		if (z) {                                                                                               \
			_Pragma("omp simd") for (int64_t c = 0; c < n; c++) y[c] = starfa_dense_apply(OP, a, b, z[c], y[c]); \
		} else {                                                                                               \
			_Pragma("omp simd") for (int64_t c = 0; c < n; c++) y[c] = starfa_dense_apply(OP, a, b, zs, y[c]);   \
		}                                                                                                      \
		break;

STARFA_CPU_CLONES static void dense_map_row(int op, float a, float b, const float *z, float zs, float *y, int64_t n)
{
	switch (op) {
		DENSE_MAP_LOOP(STARFA_DENSE_SET)
		DENSE_MAP_LOOP(STARFA_DENSE_COPY)
		DENSE_MAP_LOOP(STARFA_DENSE_SCALE)
		DENSE_MAP_LOOP(STARFA_DENSE_ADD)
		DENSE_MAP_LOOP(STARFA_DENSE_MUL)
		DENSE_MAP_LOOP(STARFA_DENSE_DIV)
		DENSE_MAP_LOOP(STARFA_DENSE_EXP)
		DENSE_MAP_LOOP(STARFA_DENSE_LOG)
		DENSE_MAP_LOOP(STARFA_DENSE_DIGAMMA)
		DENSE_MAP_LOOP(STARFA_DENSE_LGAMMA)
	default: break; /* an unknown op leaves y as it is, as starfa_dense_apply does */
	}
}

void starfa_cpu_dense_map(int64_t rows, int64_t cols, int op, float a, float b, const float *Z, int64_t ldz,
			  int zkind, float *Y, int64_t ldy)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *z = zkind == STARFA_OPERAND_SAME ? Z + r * ldz : zkind == STARFA_OPERAND_PER_COL ? Z : NULL;
		const float zs = zkind == STARFA_OPERAND_PER_ROW ? Z[r * ldz] : 0.0f;
		dense_map_row(op, a, b, z, zs, Y + r * ldy, cols);
	}
}

int starfa_cpu_dense_colsum(int64_t rows, int64_t cols, const float *X, int64_t ldx, int accumulate, float *v)
{
	double *acc = calloc((size_t)cols, sizeof *acc);
	if (!acc)
		return -1;
	for (int64_t r = 0; r < rows; r++)
		for (int64_t c = 0; c < cols; c++)
			acc[c] += X[r * ldx + c];
	for (int64_t c = 0; c < cols; c++)
		v[c] = (float)((accumulate ? (double)v[c] : 0.0) + acc[c]);
	free(acc);
	return 0;
}

void starfa_cpu_dense_rowsum(int64_t rows, int64_t cols, const float *X, int64_t ldx, float *R, int64_t ldr)
{
	for (int64_t r = 0; r < rows; r++) {
		double s = 0.0;
		for (int64_t c = 0; c < cols; c++)
			s += X[r * ldx + c];
		R[r * ldr] = (float)s;
	}
}

void starfa_cpu_dense_uniform(int64_t rows, int64_t cols, int64_t row0, float lo, float hi, uint64_t seed, float *Y,
			      int64_t ldy)
{
	for (int64_t r = 0; r < rows; r++)
		for (int64_t c = 0; c < cols; c++)
			Y[r * ldy + c] = starfa_uniform_between(lo, hi, seed, (uint64_t)((row0 + r) * cols + c));
}

/* E[log θ] = ψ(γ) - ψ(Σγ) and θ~ = exp(E[log θ]) of one row (vectorized, see dense_map_row). */
STARFA_CPU_CLONES static void dirichlet_expectations(const float *gam, float *el, float *ex, float psi_total,
						     int64_t n)
{
	_Pragma("omp simd") for (int64_t c = 0; c < n; c++)
	{
		el[c] = starfa_digammaf(gam[c]) - psi_total;
		ex[c] = starfa_expf(el[c]);
	}
}

double starfa_cpu_dense_dirichlet(int64_t rows, int64_t cols, float prior, float tol, const float *G, int64_t ldg,
				  float *gamma, int64_t ldgam, float *elog, int64_t lde, float *expelog, int64_t ldx,
				  float *active, int64_t ldact)
{
	double left = 0.0;
	for (int64_t r = 0; r < rows; r++) {
		if (active && active[r * ldact] == 0.0f)
			continue;
		const float *g = G + r * ldg;
		float *gam = gamma + r * ldgam, *el = elog + r * lde, *ex = expelog + r * ldx;
		double change = 0.0, total = 0.0;
		for (int64_t c = 0; c < cols; c++) {
			const float v = prior + ex[c] * g[c];
			change += fabs((double)v - gam[c]);
			total += v;
			gam[c] = v;
		}
		const float psi_total = starfa_digammaf((float)total);
		dirichlet_expectations(gam, el, ex, psi_total, cols);
		change /= (double)cols;
		const int stays = change >= (double)tol;
		if (active)
			active[r * ldact] = stays ? 1.0f : 0.0f;
		left += isfinite(change) ? (double)stays : NAN;
	}
	return left;
}

void starfa_cpu_dense_cg(int64_t rows, int64_t cols, int start, float *X, int64_t ldx, float *R, int64_t ldr, float *P,
			 int64_t ldp, const float *Q, int64_t ldq, float *rr, int64_t ldrr, const float *lam, int64_t ldl)
{
	for (int64_t r = 0; r < rows; r++) {
		float *x = X + r * ldx, *res = R + r * ldr, *p = P + r * ldp;
		const float *q = Q + r * ldq, l = lam[r * ldl];
		double rr_new = 0.0;
		if (start) {
			for (int64_t c = 0; c < cols; c++) {
				res[c] = q[c] - l * x[c];
				p[c] = res[c];
				rr_new += (double)res[c] * res[c];
			}
			rr[r * ldrr] = (float)rr_new;
			continue;
		}
		double pq = 0.0;
		for (int64_t c = 0; c < cols; c++)
			pq += (double)p[c] * (q[c] + l * p[c]);
		const double rr_old = rr[r * ldrr];
		const float alpha = pq > 0.0 ? (float)(rr_old / pq) : 0.0f;
		for (int64_t c = 0; c < cols; c++) {
			x[c] += alpha * p[c];
			res[c] -= alpha * (q[c] + l * p[c]);
			rr_new += (double)res[c] * res[c];
		}
		const float beta = rr_old > 0.0 ? (float)(rr_new / rr_old) : 0.0f;
		for (int64_t c = 0; c < cols; c++)
			p[c] = res[c] + beta * p[c];
		rr[r * ldrr] = (float)rr_new;
	}
}

double starfa_cpu_dense_reduce(int64_t rows, int64_t cols, const float *X, int64_t ldx, const float *w, int64_t ldw,
			       int op)
{
	double s = 0.0;
	for (int64_t r = 0; r < rows; r++) {
		double row = 0.0;
		for (int64_t c = 0; c < cols; c++) {
			double y = X[r * ldx + c];
			row += op == STARFA_REDUCE_SQUARES ? y * y : op == STARFA_REDUCE_ABS ? fabs(y) : y;
		}
		s += w ? (double)w[r * ldw] * row : row;
	}
	return s;
}

void starfa_cpu_dense_to_half(int64_t rows, int64_t cols, const float *X, int64_t ldx, uint16_t *Y, int64_t ldy)
{
	for (int64_t r = 0; r < rows; r++)
		starfa_half_store(X + r * ldx, Y + r * ldy, cols);
}

void starfa_cpu_dense_from_half(int64_t rows, int64_t cols, const uint16_t *X, int64_t ldx, float *Y, int64_t ldy)
{
	for (int64_t r = 0; r < rows; r++)
		starfa_half_load(X + r * ldx, Y + r * ldy, cols);
}
