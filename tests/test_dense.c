/* Dense blocks: every element-wise op with each kind of operand, column and row sums, reductions.
 * The same bodies run on CPU workers alone and on CUDA workers alone, against plain references in
 * double, on fresh random inputs with outputs poisoned with NaN. */
#include "testing.h"
#ifdef STARFA_USE_CUDA
#include "testing_cuda.h"
#endif

#include <float.h>
#include <stdlib.h>
#include <string.h>


static double op_ref(starfa_dense_op op, float a, float b, double z, double y)
{
	switch (op) {
	case STARFA_DENSE_SET: return a;
	case STARFA_DENSE_COPY: return z;
	case STARFA_DENSE_SCALE: return a * y + b;
	case STARFA_DENSE_ADD: return y + a * z;
	case STARFA_DENSE_MUL: return y * z;
	case STARFA_DENSE_DIV: return y / (a > 0 ? fmax(a, (double)z + b) : (double)z + b);
	case STARFA_DENSE_EXP: return exp(y);
	case STARFA_DENSE_LOG: return log(fmax(a, y));
	case STARFA_DENSE_DIGAMMA: return testing_digamma(y);
	case STARFA_DENSE_LGAMMA: return lgamma(y);
	default: return NAN;
	}
}

static int dense_ops(starfa_worker_kind kind, uint64_t seed)
{
	CHECK_OK(testing_runtime_only(kind));
	uint64_t rng = seed;
	starfa_csr *S = testing_random_csr(400, 300, 3000, 0.5, &rng);
	CHECK(S);
	starfa_tiling_options tiling = {(int64_t)(1 + testing_below(&rng, 6)), 2, 0};
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(S, &tiling, &t));
	const int64_t m = S->nrows, k = 2 + (int64_t)testing_below(&rng, 32); /* 2+: X then is no valid row-sum output */
	float *Y = malloc(sizeof(float) * (size_t)(m * k)), *Y0 = malloc(sizeof(float) * (size_t)(m * k)),
	      *X = malloc(sizeof(float) * (size_t)(m * k)), *R = malloc(sizeof(float) * (size_t)m),
	      *v = malloc(sizeof(float) * (size_t)k), *got = malloc(sizeof(float) * (size_t)k);
	CHECK(Y && Y0 && X && R && v && got);
	/* Positive values (digamma, log, division) in (0.05, 2.05). */
	for (int64_t e = 0; e < m * k; e++) {
		Y0[e] = (float)(0.05 + 2 * testing_uniform(&rng));
		X[e] = (float)(0.05 + 2 * testing_uniform(&rng));
	}
	for (int64_t r = 0; r < m; r++)
		R[r] = (float)(0.05 + 2 * testing_uniform(&rng));
	for (int64_t c = 0; c < k; c++)
		v[c] = (float)(0.05 + 2 * testing_uniform(&rng));
	starfa_dense *dY = NULL, *dX = NULL, *dR = NULL;
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, Y, k, &dY));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, X, k, &dX));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, R, 1, &dR));
	starfa_vector *dv = NULL;
	CHECK_OK(starfa_vector_create(k, &dv));
	CHECK_OK(starfa_vector_write(dv, v));
	starfa_stats_reset();
	for (int op = 0; op < STARFA_DENSE_OPS; op++)
		for (int operand = 0; operand < 3; operand++) { /* X same shape, R per row, v per column */
			int reads = op == STARFA_DENSE_COPY || op == STARFA_DENSE_ADD || op == STARFA_DENSE_MUL ||
				    op == STARFA_DENSE_DIV;
			if (!reads && operand > 0)
				continue;
			float a = op == STARFA_DENSE_DIV && operand == 1 ? 0.0f : 0.3f, b = op == STARFA_DENSE_DIV ? 0.25f : -0.25f;
			/* Y = Y0 written by the host between graphs (dense_sync brings the blocks home). */
			CHECK_OK(starfa_dense_sync(dY));
			starfa_dense_free(dY);
			if (op == STARFA_DENSE_SET || op == STARFA_DENSE_COPY)
				testing_poison(Y, (size_t)(m * k)); /* these must not read y */
			else
				memcpy(Y, Y0, sizeof(float) * (size_t)(m * k));
			CHECK_OK(starfa_dense_create(t, STARFA_ROWS, Y, k, &dY));
			const starfa_dense *Xop = reads && operand == 0 ? dX : reads && operand == 1 ? dR : NULL;
			const starfa_vector *vop = reads && operand == 2 ? dv : NULL;
			CHECK_OK(starfa_insert_dense_map(dY, (starfa_dense_op)op, a, b, Xop, vop));
			CHECK_OK(starfa_dense_sync(dY));
			for (int64_t r = 0; r < m; r++)
				for (int64_t c = 0; c < k; c++) {
					double z = operand == 0 ? X[r * k + c] : operand == 1 ? R[r] : v[c];
					double ref = op_ref((starfa_dense_op)op, a, b, z, Y0[r * k + c]);
					double got_e = Y[r * k + c];
					double tol = (op == STARFA_DENSE_DIGAMMA ? 3e-6 * (1 + 1 / Y0[r * k + c])
						      : op == STARFA_DENSE_LGAMMA ? 3e-6
										  : 4 * FLT_EPSILON) *
						     (fabs(ref) + fabs(a * z) + fabs(Y0[r * k + c]) + 1);
					CHECK_MSG(isfinite(got_e) && fabs(got_e - ref) <= tol,
						  "op %d operand %d at (%lld, %lld): y %g z %g gave %g, reference %g", op,
						  operand, (long long)r, (long long)c, Y0[r * k + c], z, got_e, ref);
				}
		}
	/* Column sums, row sums and reductions of Y0. */
	CHECK_OK(starfa_dense_sync(dY));
	starfa_dense_free(dY);
	memcpy(Y, Y0, sizeof(float) * (size_t)(m * k));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, Y, k, &dY));
	CHECK_OK(starfa_vector_write(dv, v)); /* any content: the first block overwrites */
	CHECK_OK(starfa_insert_dense_colsum(dY, dv));
	CHECK_OK(starfa_vector_read(dv, got));
	double total_ref = 0, squares_ref = 0;
	for (int64_t c = 0; c < k; c++) {
		double s = 0;
		for (int64_t r = 0; r < m; r++) {
			s += Y0[r * k + c];
			squares_ref += (double)Y0[r * k + c] * Y0[r * k + c];
		}
		total_ref += s;
		CHECK_MSG(fabs(got[c] - s) <= 2 * FLT_EPSILON * s, "colsum %lld: %g, reference %g", (long long)c, got[c], s);
	}
	CHECK_OK(starfa_dense_sync(dR));
	starfa_dense_free(dR);
	testing_poison(R, (size_t)m);
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, R, 1, &dR));
	CHECK_OK(starfa_insert_dense_rowsum(dY, dR));
	CHECK_OK(starfa_dense_sync(dR));
	for (int64_t r = 0; r < m; r++) {
		double s = 0;
		for (int64_t c = 0; c < k; c++)
			s += Y0[r * k + c];
		CHECK_MSG(fabs(R[r] - s) <= 2 * FLT_EPSILON * s, "rowsum %lld: %g, reference %g", (long long)r, R[r], s);
	}
	double total = NAN, squares = NAN, absolute = NAN;
	CHECK_OK(starfa_reduce_dense(dY, STARFA_REDUCE_SUM, &total));
	CHECK_OK(starfa_reduce_dense(dY, STARFA_REDUCE_SQUARES, &squares));
	CHECK(fabs(total - total_ref) <= 1e-12 * total_ref && fabs(squares - squares_ref) <= 1e-12 * squares_ref);
	/* |y| of Y0 - 1 (both signs): the sum of |Y0 - 1| */
	CHECK_OK(starfa_insert_dense_map(dY, STARFA_DENSE_SCALE, 1.0f, -1.0f, NULL, NULL));
	CHECK_OK(starfa_reduce_dense(dY, STARFA_REDUCE_ABS, &absolute));
	double absolute_ref = 0;
	for (int64_t e = 0; e < m * k; e++)
		absolute_ref += fabs((double)(Y0[e] - 1.0f));
	CHECK_MSG(fabs(absolute - absolute_ref) <= 1e-9 * absolute_ref, "sum |y| %.12g, reference %.12g", absolute,
		  absolute_ref);
	CHECK(starfa_reduce_dense(dY, STARFA_REDUCE_KL, &total) == STARFA_EINVAL);
	/* Over a range of columns, block by block: [c0, c0 + n) of Y0 - 1, inside the k columns. */
	{
		const int64_t c0 = (int64_t)testing_below(&rng, (uint64_t)k), n = 1 + (int64_t)testing_below(&rng, (uint64_t)(k - c0));
		const int64_t nb = starfa_dense_blocks(dY);
		starfa_sums *parts = NULL;
		CHECK_OK(starfa_sums_create(3 * nb, &parts));
		for (int64_t b = 0; b < nb; b++) {
			CHECK_OK(starfa_task_dense_reduce_cols(dY, b, c0, n, STARFA_REDUCE_SQUARES, NULL, 0, parts, 3 * b, NULL));
			CHECK_OK(starfa_task_dense_reduce_cols(dY, b, c0, n, STARFA_REDUCE_SUM, NULL, 0, parts, 3 * b + 1, NULL));
			/* weighted by the row sums in dR (R holds them since the row sums' check) */
			CHECK_OK(starfa_task_dense_reduce_cols(dY, b, c0, n, STARFA_REDUCE_SQUARES, dR, 0, parts, 3 * b + 2, NULL));
		}
		double *got_parts = malloc(sizeof(double) * (size_t)(3 * nb));
		CHECK(got_parts);
		for (int64_t e = 0; e < 3 * nb; e++)
			got_parts[e] = NAN;
		CHECK_OK(starfa_sums_read(parts, got_parts));
		double sq = 0, sum = 0, wsq = 0, sq_ref = 0, sum_ref = 0, wsq_ref = 0, mag = 0;
		for (int64_t b = 0; b < nb; b++) {
			sq += got_parts[3 * b];
			sum += got_parts[3 * b + 1];
			wsq += got_parts[3 * b + 2];
		}
		for (int64_t r = 0; r < m; r++)
			for (int64_t c = c0; c < c0 + n; c++) {
				double y = (double)(Y0[r * k + c] - 1.0f);
				sq_ref += y * y;
				wsq_ref += (double)R[r] * y * y;
				sum_ref += y;
				mag += fabs(y);
			}
		CHECK_MSG(fabs(sq - sq_ref) <= 1e-9 * sq_ref && fabs(sum - sum_ref) <= 1e-9 * mag &&
				  fabs(wsq - wsq_ref) <= 1e-9 * wsq_ref,
			  "columns [%lld, %lld): squares %.12g (reference %.12g), sum %.12g (reference %.12g), weighted "
			  "squares %.12g (reference %.12g)", (long long)c0, (long long)(c0 + n), sq, sq_ref, sum, sum_ref, wsq,
			  wsq_ref);
		CHECK(starfa_task_dense_reduce_cols(dY, 0, 0, 1, STARFA_REDUCE_SUM, dR, 1, parts, 0, NULL) == STARFA_EINVAL);
		CHECK(starfa_task_dense_reduce_cols(dY, 0, 0, 1, STARFA_REDUCE_SUM, dR, -1, parts, 0, NULL) == STARFA_EINVAL);
		/* ranges past the matrix, empty ones, and ops a dense block does not take */
		CHECK(starfa_task_dense_reduce_cols(dY, 0, k - n + 1, n, STARFA_REDUCE_SUM, NULL, 0, parts, 0, NULL) == STARFA_EINVAL);
		CHECK(starfa_task_dense_reduce_cols(dY, 0, -1, 1, STARFA_REDUCE_SUM, NULL, 0, parts, 0, NULL) == STARFA_EINVAL);
		CHECK(starfa_task_dense_reduce_cols(dY, 0, 0, 0, STARFA_REDUCE_SUM, NULL, 0, parts, 0, NULL) == STARFA_EINVAL);
		CHECK(starfa_task_dense_reduce_cols(dY, 0, 0, 1, STARFA_REDUCE_KL, NULL, 0, parts, 0, NULL) == STARFA_EINVAL);
		CHECK(starfa_task_dense_reduce_cols(dY, nb, 0, 1, STARFA_REDUCE_SUM, NULL, 0, parts, 0, NULL) == STARFA_EINVAL);
		CHECK(starfa_task_dense_reduce_cols(dY, 0, 0, 1, STARFA_REDUCE_SUM, NULL, 0, parts, 3 * nb, NULL) == STARFA_EINVAL);
		starfa_sums_free(parts);
		free(got_parts);
	}
	starfa_worker_stats st;
	starfa_stats_get(&st);
	int other = kind == STARFA_WORKER_CPU ? STARFA_WORKER_CUDA : STARFA_WORKER_CPU;
	CHECK(st.tasks[kind] > 0 && st.tasks[other] == 0);
	/* Operand checks. */
	CHECK(starfa_task_dense_map(dY, 0, STARFA_DENSE_MUL, 0, 0, NULL, NULL, NULL) == STARFA_EINVAL);
	CHECK(starfa_task_dense_map(dY, 0, STARFA_DENSE_MUL, 0, 0, dX, dv, NULL) == STARFA_EINVAL);
	CHECK(starfa_task_dense_map(dY, starfa_dense_blocks(dY), STARFA_DENSE_SET, 0, 0, NULL, NULL, NULL) ==
	      STARFA_EINVAL);
	CHECK(starfa_task_dense_map(dY, 0, STARFA_DENSE_MUL, 0, 0, dY, NULL, NULL) == STARFA_EINVAL);
	CHECK(starfa_task_dense_rowsum(dY, 0, dX, NULL) == STARFA_EINVAL);
	starfa_vector_free(dv);
	starfa_dense_free(dY);
	starfa_dense_free(dX);
	starfa_dense_free(dR);
	starfa_tiled_free(t);
	starfa_csr_free(S);
	free(Y);
	free(Y0);
	free(X);
	free(R);
	free(v);
	free(got);
	return 0;
}

/* exp, log and digamma maps over their whole range, against double: exp of [-87.3, 88.7] (below, a
 * result under FLT_MIN may be 0), log and digamma of log-uniform values from 1e-30 (log: 1e-44,
 * subnormals) to 1e30, and the special values: NaN stays NaN, log(0) = -inf, log and digamma of a
 * negative are NaN, digamma(0) is NaN, of +inf is +inf, exp(+inf) = +inf, exp(-inf) = 0. The CPU
 * computes them branch-free (cpu/special.h), the device with its own exp and log. */
static int special_functions(starfa_worker_kind kind, uint64_t seed)
{
	CHECK_OK(testing_runtime_only(kind));
	uint64_t rng = seed;
	starfa_csr *S = testing_random_csr(500, 40, 600, 0.0, &rng);
	CHECK(S);
	starfa_tiling_options tiling = {(int64_t)(1 + testing_below(&rng, 4)), 1, 0};
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(S, &tiling, &t));
	const int64_t m = S->nrows, k = 1 + (int64_t)testing_below(&rng, 40), n = m * k;
	float *Y = malloc(sizeof(float) * (size_t)n), *Y0 = malloc(sizeof(float) * (size_t)n);
	CHECK(Y && Y0);
	const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, -1.0f, -1e-30f, 1.0f, 2.0f, 6.0f, 1.4616321f,
				 1e-44f, FLT_MIN, FLT_MAX, -87.4f, 88.8f};
	const int nspecial = (int)(sizeof special / sizeof special[0]);
	for (int op = STARFA_DENSE_EXP; op <= STARFA_DENSE_DIGAMMA; op++) {
		for (int64_t e = 0; e < n; e++) {
			double u = testing_uniform(&rng);
			Y0[e] = op == STARFA_DENSE_EXP ? (float)(-87.3 + 176.0 * u)
				: op == STARFA_DENSE_LOG ? (float)exp(-101.3 + 170.4 * u)
							 : (float)exp(-69.1 + 138.2 * u);
			if (testing_below(&rng, 8) == 0)
				Y0[e] = special[testing_below(&rng, (uint64_t)nspecial)];
		}
		memcpy(Y, Y0, sizeof(float) * (size_t)n);
		starfa_dense *dY = NULL;
		CHECK_OK(starfa_dense_create(t, STARFA_ROWS, Y, k, &dY));
		/* LOG computes log(max(a, y)): a = -inf keeps y as it is, zeros and negatives included. */
		CHECK_OK(starfa_insert_dense_map(dY, (starfa_dense_op)op, op == STARFA_DENSE_LOG ? -INFINITY : 0.0f, 0,
						 NULL, NULL));
		CHECK_OK(starfa_dense_sync(dY));
		starfa_dense_free(dY);
		for (int64_t e = 0; e < n; e++) {
			const float x = Y0[e], got = Y[e];
			const double ref = op == STARFA_DENSE_EXP ? exp(x)
					   : op == STARFA_DENSE_LOG ? (x < 0 ? NAN : log(x))
								    : (x > 0 ? testing_digamma(x) : NAN);
			int ok;
			if (isnan(ref) || isinf(ref) || fabs(ref) > FLT_MAX)
				ok = isnan(ref) ? isnan(got) : got == (ref > 0 ? INFINITY : -INFINITY) ||
								   (op == STARFA_DENSE_DIGAMMA && x < 1e-38f && got < -1e38f);
			else if (op == STARFA_DENSE_EXP)
				ok = ref < FLT_MIN ? got >= 0 && got <= FLT_MIN : fabs(got - ref) <= 3e-7 * ref;
			else if (op == STARFA_DENSE_LOG)
				ok = fabs(got - ref) <= 3e-7 * fabs(ref) + 1e-9;
			else /* the recurrence's terms 1/x and log(x) set the scale of the rounding */
				ok = fabs(got - ref) <= 4e-7 * (fabs(ref) + (x < 6 ? 1 / (double)x : 0) + log((double)x + 7));
			CHECK_MSG(ok, "op %d of %.9g gave %.9g, reference %.9g", op, x, got, ref);
		}
	}
	starfa_tiled_free(t);
	starfa_csr_free(S);
	free(Y);
	free(Y0);
	return 0;
}

/* Uniform draws: every value on a poisoned output is exactly lo + (hi - lo) u (one rounding; the float
 * below hi where that rounds to hi) with u
 * from the element's place in the whole matrix, whatever the blocking; they lie in [lo, hi) with the
 * mean and variance of the uniform; another seed gives other values; bad bounds are refused. */
static int uniform_draws(starfa_worker_kind kind, uint64_t seed)
{
	CHECK_OK(testing_runtime_only(kind));
	uint64_t rng = seed;
	starfa_csr *S = testing_random_csr(700, 30, 900, 0.5, &rng);
	CHECK(S);
	starfa_tiling_options tiling = {(int64_t)(1 + testing_below(&rng, 6)), 1, 0};
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(S, &tiling, &t));
	const int64_t m = S->nrows, k = 1 + (int64_t)testing_below(&rng, 33), n = m * k;
	float *Y = malloc(sizeof(float) * (size_t)n);
	CHECK(Y);
	const float lo = (float)(4 * testing_uniform(&rng) - 2), hi = lo + (float)(3 * testing_uniform(&rng));
	const uint64_t s1 = rng, s2 = rng ^ 1;
	testing_poison(Y, (size_t)n);
	starfa_dense *dY = NULL;
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, Y, k, &dY));
	CHECK_OK(starfa_insert_dense_uniform(dY, lo, hi, s1));
	CHECK_OK(starfa_dense_sync(dY));
	double sum = 0, squares = 0;
	for (int64_t e = 0; e < n; e++) {
		const float u = (float)(testing_splitmix64(s1, (uint64_t)e) >> 40) * 0x1p-24f, v = fmaf(hi - lo, u, lo),
			    want = v < hi || lo == hi ? v : nextafterf(hi, lo); /* a rounding up to hi: just below */
		CHECK_MSG(Y[e] == want, "value %lld: %.9g, want %.9g", (long long)e, Y[e], want);
		CHECK(Y[e] >= lo && (Y[e] < hi || lo == hi));
		sum += u;
		squares += ((double)u - 0.5) * ((double)u - 0.5);
	}
	/* u's mean 1/2 (sd 1/sqrt(12 n)) and variance 1/12 (sd about 0.075 / sqrt(n)), within 6 sd */
	CHECK_MSG(fabs(sum / n - 0.5) < 6 / sqrt(12.0 * n), "mean of u %g over %lld", sum / n, (long long)n);
	CHECK_MSG(fabs(squares / n - 1.0 / 12) < 6 * 0.0745 / sqrt((double)n), "variance of u %g", squares / n);
	/* another seed: other values (equal in about n / 2^24 places) */
	CHECK_OK(starfa_insert_dense_uniform(dY, lo, hi, s2));
	CHECK_OK(starfa_dense_sync(dY));
	int64_t same = 0;
	for (int64_t e = 0; e < n; e++)
		same += Y[e] == fmaf(hi - lo, (float)(testing_splitmix64(s1, (uint64_t)e) >> 40) * 0x1p-24f, lo);
	CHECK_MSG(same <= 2 || lo == hi, "%lld of %lld values the same with another seed", (long long)same, (long long)n);
	CHECK(starfa_insert_dense_uniform(dY, 1.0f, 0.5f, s1) == STARFA_EINVAL);
	CHECK(starfa_insert_dense_uniform(dY, NAN, 1.0f, s1) == STARFA_EINVAL);
	CHECK(starfa_insert_dense_uniform(dY, -FLT_MAX, FLT_MAX, s1) == STARFA_EINVAL);
	CHECK(starfa_task_dense_uniform(dY, starfa_dense_blocks(dY), 0.0f, 1.0f, s1, NULL) == STARFA_EINVAL);
	CHECK(starfa_insert_dense_uniform(NULL, 0.0f, 1.0f, s1) == STARFA_EINVAL);
	starfa_worker_stats st;
	starfa_stats_get(&st);
	int other = kind == STARFA_WORKER_CPU ? STARFA_WORKER_CUDA : STARFA_WORKER_CPU;
	CHECK(st.tasks[kind] > 0 && st.tasks[other] == 0);
	starfa_dense_free(dY);
	starfa_tiled_free(t);
	starfa_csr_free(S);
	free(Y);
	return 0;
}

/* The value of FP16 bits, from the format's definition. */
static double half_value(uint16_t h)
{
	int e = (h >> 10) & 31, m = h & 1023;
	double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
	return h & 0x8000 ? -v : v;
}

/* The FP16 value nearest to f (ties to even), in double: an independent statement of the rounding. */
static double nearest_half(float f)
{
	double a = fabs((double)f);
	if (isnan(f))
		return NAN;
	if (a >= 65520.0)
		return copysign(INFINITY, f);
	int e = a > 0 ? ilogb(a) : -14;
	e = e < -14 ? -14 : e;
	double q = nearbyint(ldexp(a, 10 - e)); /* the default rounding: to nearest, ties to even */
	return copysign(ldexp(q, e - 10), f);
}

/* FP32 -> packed FP16 -> FP32 over values of every magnitude (normal, subnormal, overflowing, inf, NaN,
 * signed zeros), outputs poisoned. */
static int half_conversion(starfa_worker_kind kind, uint64_t seed)
{
	CHECK_OK(testing_runtime_only(kind));
	uint64_t rng = seed;
	starfa_csr *S = testing_random_csr(300, 200, 2000, 0.5, &rng);
	CHECK(S);
	starfa_tiling_options tiling = {(int64_t)(1 + testing_below(&rng, 5)), 2, 0};
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(S, &tiling, &t));
	const int64_t m = S->nrows, c = 1 + (int64_t)testing_below(&rng, 20), w = 2 * c;
	float *X = malloc(sizeof(float) * (size_t)(m * w)), *H = malloc(sizeof(float) * (size_t)(m * c)),
	      *Z = malloc(sizeof(float) * (size_t)(m * w));
	CHECK(X && H && Z);
	for (int64_t e = 0; e < m * w; e++) {
		double u = testing_uniform(&rng);
		X[e] = (float)ldexp(1.0 + testing_uniform(&rng), (int)testing_below(&rng, 50) - 30) * (u < 0.5 ? -1.0f : 1.0f);
		if (e % 97 == 1)
			/* halfway between two halves (12 significant bits, the last one set): ties to even */
			X[e] = (float)ldexp(2049 + 2 * (double)testing_below(&rng, 1000), (int)testing_below(&rng, 20) - 20);
	}
	X[0] = INFINITY;
	X[1] = -0.0f;
	X[2] = NAN;
	X[3] = 65519.0f;
	X[4] = 65520.0f;
	X[5] = 5.96046448e-8f / 2; /* half of the smallest subnormal: a tie, to zero */
	memset(H, 0xff, sizeof(float) * (size_t)(m * c)); /* NaN in both halves */
	testing_poison(Z, (size_t)(m * w));
	starfa_dense *dX = NULL, *dH = NULL, *dZ = NULL;
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, X, w, &dX));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, H, c, &dH));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, Z, w, &dZ));
	CHECK(starfa_insert_dense_convert(dX, STARFA_TO_HALF, dZ) == STARFA_EINVAL); /* 2c floats into 2c */
	CHECK(starfa_insert_dense_convert(dX, STARFA_FROM_HALF, dZ) == STARFA_EINVAL);
	starfa_stats_reset();
	CHECK_OK(starfa_insert_dense_convert(dH, STARFA_TO_HALF, dX));
	CHECK_OK(starfa_insert_dense_convert(dZ, STARFA_FROM_HALF, dH));
	CHECK_OK(starfa_dense_sync(dH));
	CHECK_OK(starfa_dense_sync(dZ));
	starfa_worker_stats st;
	starfa_stats_get(&st);
	CHECK(st.tasks[kind] == 2 * starfa_dense_blocks(dH) && st.tasks[1 - kind] == 0);
	const uint16_t *halves = (const uint16_t *)H;
	for (int64_t e = 0; e < m * w; e++) {
		double want = nearest_half(X[e]), got = half_value(halves[e]);
		CHECK_MSG((isnan(want) && isnan(got)) || (want == got && signbit(want) == signbit(got)),
			  "element %lld: %a to FP16 gave %a, not %a", (long long)e, (double)X[e], got, want);
		CHECK_MSG((isnan(got) && isnan(Z[e])) || (double)Z[e] == got, "element %lld back: %a, not %a", (long long)e,
			  (double)Z[e], got);
	}
	starfa_dense_free(dX);
	starfa_dense_free(dH);
	starfa_dense_free(dZ);
	starfa_tiled_free(t);
	starfa_csr_free(S);
	free(X);
	free(H);
	free(Z);
	return 0;
}

/* starfa_task_dense_cg on a system per row, A_r = B_r B_rᵀ / k + 0.1 I (SPD), shift lam_r in [0, 1): the
 * start against its definition, each step against a double-precision step from the same (float) state,
 * and after k + 2 steps x against the solution of (A_r + lam_r I) x = b_r by Cholesky. The products
 * A p are formed on the host between the steps (the graph's caller's job). */
static void cg_products(int64_t m, int64_t k, const double *A, const float *P, float *Q)
{
	for (int64_t r = 0; r < m; r++)
		for (int64_t i = 0; i < k; i++) {
			double s = 0;
			for (int64_t j = 0; j < k; j++)
				s += A[(r * k + i) * k + j] * P[r * k + j];
			Q[r * k + i] = (float)s;
		}
}

static int row_cg(starfa_worker_kind kind, uint64_t seed)
{
	CHECK_OK(testing_runtime_only(kind));
	uint64_t rng = seed;
	starfa_csr *S = testing_random_csr(37, 20, 200, 0.5, &rng);
	CHECK(S);
	starfa_tiling_options tiling = {(int64_t)(1 + testing_below(&rng, 4)), 1, 0};
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(S, &tiling, &t));
	const int64_t m = S->nrows, k = 1 + (int64_t)testing_below(&rng, 48); /* past one warp's 32 lanes */
	const size_t n = (size_t)(m * k);
	double *A = malloc(sizeof(double) * n * (size_t)k), *B = malloc(sizeof(double) * (size_t)(k * k));
	float *X = malloc(sizeof(float) * n), *R = malloc(sizeof(float) * n), *P = malloc(sizeof(float) * n),
	      *Q = malloc(sizeof(float) * n), *rr = malloc(sizeof(float) * (size_t)m), *lam = malloc(sizeof(float) * (size_t)m),
	      *b = malloc(sizeof(float) * n), *X0 = malloc(sizeof(float) * n);
	CHECK(A && B && X && R && P && Q && rr && lam && b && X0);
	for (int64_t r = 0; r < m; r++) {
		for (int64_t e = 0; e < k * k; e++)
			B[e] = testing_uniform(&rng) * 2 - 1;
		for (int64_t i = 0; i < k; i++)
			for (int64_t j = 0; j < k; j++) {
				double s = i == j ? 0.1 : 0;
				for (int64_t l = 0; l < k; l++)
					s += B[i * k + l] * B[j * k + l] / (double)k;
				A[(r * k + i) * k + j] = s;
			}
		lam[r] = (float)testing_uniform(&rng);
	}
	for (size_t e = 0; e < n; e++) {
		b[e] = (float)(testing_uniform(&rng) * 2 - 1);
		X0[e] = X[e] = (float)(testing_uniform(&rng) * 2 - 1);
	}
	/* Q = b - A x0 */
	cg_products(m, k, A, X, Q);
	for (size_t e = 0; e < n; e++)
		Q[e] = b[e] - Q[e];
	testing_poison(R, n);
	testing_poison(P, n);
	testing_poison(rr, (size_t)m);
	starfa_dense *dX = NULL, *dR = NULL, *dP = NULL, *dQ = NULL, *drr = NULL, *dlam = NULL;
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, X, k, &dX));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, R, k, &dR));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, P, k, &dP));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, Q, k, &dQ));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, rr, 1, &drr));
	CHECK_OK(starfa_dense_create(t, STARFA_ROWS, lam, 1, &dlam));
	CHECK(starfa_insert_dense_cg(dX, dR, dP, dQ, drr, drr, 1) == STARFA_EINVAL); /* rr and lam one matrix */
	starfa_stats_reset();
	CHECK_OK(starfa_insert_dense_cg(dX, dR, dP, dQ, drr, dlam, 1));
	CHECK_OK(starfa_dense_sync(dR));
	CHECK_OK(starfa_dense_sync(dP));
	CHECK_OK(starfa_dense_sync(drr));
	for (int64_t r = 0; r < m; r++) {
		double s = 0;
		for (int64_t c = 0; c < k; c++) {
			const float want = Q[r * k + c] - lam[r] * X[r * k + c];
			/* (a fused multiply-add may round q - lam x once) */
			const float tol = 2 * FLT_EPSILON * (fabsf(Q[r * k + c]) + fabsf(lam[r] * X[r * k + c]));
			CHECK_MSG(fabsf(R[r * k + c] - want) <= tol && P[r * k + c] == R[r * k + c],
				  "start row %lld col %lld: r %.9g p %.9g, want %.9g",
				  (long long)r, (long long)c, R[r * k + c], P[r * k + c], want);
			s += (double)want * want;
		}
		CHECK_MSG(fabs(rr[r] - s) <= 1e-6 * s, "start row %lld: rr %.9g, want %.9g", (long long)r, rr[r], s);
	}
	double *x = malloc(sizeof(double) * n), *res = malloc(sizeof(double) * n), *p = malloc(sizeof(double) * n),
	       *rrd = malloc(sizeof(double) * (size_t)m);
	CHECK(x && res && p && rrd);
	for (int64_t step = 0; step < k + 2; step++) {
		/* the host's products from the graph's direction, then the reference step from the same state */
		CHECK_OK(starfa_dense_sync(dX));
		CHECK_OK(starfa_dense_sync(dR));
		CHECK_OK(starfa_dense_sync(dP));
		CHECK_OK(starfa_dense_sync(drr));
		starfa_dense_free(dQ);
		cg_products(m, k, A, P, Q);
		CHECK_OK(starfa_dense_create(t, STARFA_ROWS, Q, k, &dQ));
		for (int64_t r = 0; r < m; r++) {
			double pq = 0, rn = 0;
			for (int64_t c = 0; c < k; c++)
				pq += (double)P[r * k + c] * ((double)Q[r * k + c] + lam[r] * (double)P[r * k + c]);
			const double alpha = pq > 0 ? rr[r] / pq : 0;
			for (int64_t c = 0; c < k; c++) {
				const double q = (double)Q[r * k + c] + lam[r] * (double)P[r * k + c];
				x[r * k + c] = X[r * k + c] + alpha * P[r * k + c];
				res[r * k + c] = R[r * k + c] - alpha * q;
				rn += res[r * k + c] * res[r * k + c];
			}
			const double beta = rr[r] > 0 ? rn / rr[r] : 0;
			for (int64_t c = 0; c < k; c++)
				p[r * k + c] = res[r * k + c] + beta * P[r * k + c];
			rrd[r] = rn;
		}
		CHECK_OK(starfa_insert_dense_cg(dX, dR, dP, dQ, drr, dlam, 0));
		CHECK_OK(starfa_dense_sync(dX));
		CHECK_OK(starfa_dense_sync(dR));
		CHECK_OK(starfa_dense_sync(dP));
		CHECK_OK(starfa_dense_sync(drr));
		for (int64_t r = 0; r < m; r++) {
			double scale = 1e-30;
			for (int64_t c = 0; c < k; c++)
				scale = fmax(scale, fabs(x[r * k + c]) + fabs(res[r * k + c]) + fabs(p[r * k + c]));
			for (int64_t c = 0; c < k; c++)
				CHECK_MSG(fabs(X[r * k + c] - x[r * k + c]) <= 1e-4 * scale &&
						  fabs(R[r * k + c] - res[r * k + c]) <= 1e-4 * scale &&
						  fabs(P[r * k + c] - p[r * k + c]) <= 1e-4 * scale,
					  "step %lld row %lld col %lld: x %g r %g p %g, reference %g %g %g", (long long)step,
					  (long long)r, (long long)c, X[r * k + c], R[r * k + c], P[r * k + c], x[r * k + c],
					  res[r * k + c], p[r * k + c]);
			/* |r| to the rounding of r's elements (the residual cancels as CG converges) */
			CHECK_MSG(fabs(sqrt(rr[r]) - sqrt(rrd[r])) <= 1e-4 * scale * sqrt((double)k), "step %lld row %lld: rr %g, reference %g",
				  (long long)step, (long long)r, rr[r], rrd[r]);
		}
	}
	starfa_worker_stats st;
	starfa_stats_get(&st);
	CHECK_MSG(st.tasks[kind] >= (k + 3) * starfa_dense_blocks(dX), "%lld tasks ran on the workers asked for",
		  (long long)st.tasks[kind]);
	/* The solution: (A_r + lam_r I) x = b_r by Cholesky in double. */
	for (int64_t r = 0; r < m; r++) {
		double *L = B; /* k x k scratch */
		for (int64_t i = 0; i < k; i++)
			for (int64_t j = 0; j <= i; j++) {
				double s = A[(r * k + i) * k + j] + (i == j ? lam[r] : 0);
				for (int64_t l = 0; l < j; l++)
					s -= L[i * k + l] * L[j * k + l];
				L[i * k + j] = i == j ? sqrt(s) : s / L[j * k + j];
			}
		double *y = x + r * k, norm = 0, err = 0;
		for (int64_t i = 0; i < k; i++) {
			double s = b[r * k + i];
			for (int64_t l = 0; l < i; l++)
				s -= L[i * k + l] * y[l];
			y[i] = s / L[i * k + i];
		}
		for (int64_t i = k - 1; i >= 0; i--) {
			double s = y[i];
			for (int64_t l = i + 1; l < k; l++)
				s -= L[l * k + i] * y[l];
			y[i] = s / L[i * k + i];
		}
		for (int64_t i = 0; i < k; i++) {
			norm = fmax(norm, fabs(y[i]));
			err = fmax(err, fabs(X[r * k + i] - y[i]));
		}
		CHECK_MSG(err <= 2e-3 * (1 + norm), "row %lld (k %lld): CG's x is %g off the solution (max |x| %g)", (long long)r,
			  (long long)k, err, norm);
	}
	starfa_dense_free(dX);
	starfa_dense_free(dR);
	starfa_dense_free(dP);
	starfa_dense_free(dQ);
	starfa_dense_free(drr);
	starfa_dense_free(dlam);
	starfa_tiled_free(t);
	starfa_csr_free(S);
	free(A);
	free(B);
	free(X);
	free(R);
	free(P);
	free(Q);
	free(rr);
	free(lam);
	free(b);
	free(X0);
	free(x);
	free(res);
	free(p);
	free(rrd);
	return 0;
}

static int compare_doubles(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The Dirichlet step (starfa_task_dense_dirichlet) against a double reference, row by row: on the active
 * rows γ, E[log θ], θ̃ and the stopping decision at a tol that splits them; the inactive rows keep their
 * bits; each band's count; without a mask every row; a non-finite row makes its band's count NaN. */
static int dirichlet_step(starfa_worker_kind kind, uint64_t seed)
{
	CHECK_OK(testing_runtime_only(kind));
	uint64_t rng = seed;
	starfa_csr *S = testing_random_csr(61, 20, 200, 0.5, &rng);
	CHECK(S);
	starfa_tiling_options tiling = {(int64_t)(1 + testing_below(&rng, 4)), 1, 0};
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(S, &tiling, &t));
	const int64_t m = S->nrows, k = 1 + (int64_t)testing_below(&rng, 70), bands = starfa_tiled_row_tiles(t);
	const int64_t *bounds = starfa_tiled_row_bounds(t);
	const size_t n = (size_t)(m * k);
	const float prior = 0.05f;
	float *gam = malloc(sizeof(float) * n), *el = malloc(sizeof(float) * n), *ex = malloc(sizeof(float) * n),
	      *G = malloc(sizeof(float) * n), *act = malloc(sizeof(float) * (size_t)m);
	float *gam0 = malloc(sizeof(float) * n), *el0 = malloc(sizeof(float) * n), *ex0 = malloc(sizeof(float) * n),
	      *act0 = malloc(sizeof(float) * (size_t)m);
	double *change = malloc(sizeof(double) * (size_t)m), *sorted = malloc(sizeof(double) * (size_t)m),
	       *slots = malloc(sizeof(double) * (size_t)bands);
	CHECK(gam && el && ex && G && act && gam0 && el0 && ex0 && act0 && change && sorted && slots);
	for (int pass = 0; pass < 3; pass++) { /* 0: masked, 1: no mask, 2: masked with a NaN row */
		for (size_t e = 0; e < n; e++) {
			gam0[e] = (float)(0.1 + 3 * testing_uniform(&rng));
			ex0[e] = (float)(0.05 + testing_uniform(&rng));
			G[e] = (float)(5 * testing_uniform(&rng));
		}
		testing_poison(el0, n);
		for (int64_t r = 0; r < m; r++)
			act0[r] = pass == 1 || testing_uniform(&rng) < 0.7 ? 1.0f : 0.0f;
		const int64_t bad = pass == 2 ? (int64_t)testing_below(&rng, (uint64_t)m) : -1;
		if (bad >= 0) {
			act0[bad] = 1.0f;
			G[bad * k] = NAN;
		}
		/* the reference's changes, and a tol halfway between two of them well apart */
		int64_t nact = 0;
		for (int64_t r = 0; r < m; r++) {
			double c = 0;
			for (int64_t j = 0; j < k; j++)
				c += fabs((double)prior + (double)ex0[r * k + j] * G[r * k + j] - gam0[r * k + j]);
			change[r] = c / (double)k;
			if (act0[r] != 0.0f && r != bad)
				sorted[nact++] = change[r];
		}
		qsort(sorted, (size_t)nact, sizeof *sorted, compare_doubles);
		double tol = 0;
		for (int64_t i = nact / 2; i + 1 < nact && tol == 0; i++)
			if (sorted[i + 1] - sorted[i] > 1e-3 * sorted[i + 1])
				tol = 0.5 * (sorted[i] + sorted[i + 1]);
		memcpy(gam, gam0, sizeof(float) * n);
		memcpy(el, el0, sizeof(float) * n);
		memcpy(ex, ex0, sizeof(float) * n);
		memcpy(act, act0, sizeof(float) * (size_t)m);
		starfa_dense *dgam = NULL, *del = NULL, *dex = NULL, *dG = NULL, *dact = NULL;
		starfa_sums *left = NULL;
		CHECK_OK(starfa_dense_create(t, STARFA_ROWS, gam, k, &dgam));
		CHECK_OK(starfa_dense_create(t, STARFA_ROWS, el, k, &del));
		CHECK_OK(starfa_dense_create(t, STARFA_ROWS, ex, k, &dex));
		CHECK_OK(starfa_dense_create(t, STARFA_ROWS, G, k, &dG));
		CHECK_OK(starfa_dense_create(t, STARFA_ROWS, act, 1, &dact));
		CHECK_OK(starfa_sums_create(bands, &left));
		if (pass == 0) {
			CHECK(starfa_task_dense_dirichlet(dgam, del, dex, dG, dgam, prior, (float)tol, left, 0, 0, NULL) ==
			      STARFA_EINVAL);
			CHECK(starfa_task_dense_dirichlet(dgam, del, del, dG, dact, prior, (float)tol, left, 0, 0, NULL) ==
			      STARFA_EINVAL);
			CHECK(starfa_task_dense_dirichlet(dgam, del, dex, dG, dact, prior, -1.0f, left, 0, 0, NULL) ==
			      STARFA_EINVAL);
			CHECK(starfa_task_dense_dirichlet(dgam, del, dex, dG, dact, prior, (float)tol, left, bands, 0, NULL) ==
			      STARFA_EINVAL);
		}
		starfa_stats_reset();
		for (int64_t b = 0; b < bands; b++)
			CHECK_OK(starfa_task_dense_dirichlet(dgam, del, dex, dG, pass == 1 ? NULL : dact, prior, (float)tol, left,
							     b, b, NULL));
		CHECK_OK(starfa_sums_read(left, slots));
		starfa_worker_stats st;
		starfa_stats_get(&st);
		CHECK(st.tasks[kind] == bands);
		CHECK_OK(starfa_dense_sync(dgam));
		CHECK_OK(starfa_dense_sync(del));
		CHECK_OK(starfa_dense_sync(dex));
		CHECK_OK(starfa_dense_sync(dact));
		for (int64_t b = 0; b < bands; b++) {
			double want = 0;
			int has_bad = 0;
			for (int64_t r = bounds[b]; r < bounds[b + 1]; r++) {
				if (act0[r] == 0.0f) {
					CHECK_MSG(memcmp(gam + r * k, gam0 + r * k, sizeof(float) * (size_t)k) == 0 &&
						  memcmp(el + r * k, el0 + r * k, sizeof(float) * (size_t)k) == 0 &&
						  memcmp(ex + r * k, ex0 + r * k, sizeof(float) * (size_t)k) == 0 && act[r] == 0.0f,
						  "k %lld: inactive row %lld changed", (long long)k, (long long)r);
					continue;
				}
				if (r == bad) {
					has_bad = 1;
					continue;
				}
				double total = 0;
				for (int64_t j = 0; j < k; j++)
					total += (double)prior + (double)ex0[r * k + j] * G[r * k + j];
				for (int64_t j = 0; j < k; j++) {
					const double g = (double)prior + (double)ex0[r * k + j] * G[r * k + j];
					const double e = testing_digamma(g) - testing_digamma(total);
					CHECK_MSG(fabs(gam[r * k + j] - g) <= 4 * FLT_EPSILON * g, "k %lld row %lld: gamma %.9g, want %.9g",
						  (long long)k, (long long)r, gam[r * k + j], g);
					CHECK_MSG(fabs(el[r * k + j] - e) <= 1e-5 * (1 + fabs(e)) && fabs(ex[r * k + j] - exp(e)) <= 1e-5 * exp(e),
						  "k %lld row %lld: E[log] %.9g exp %.9g, want %.9g %.9g", (long long)k, (long long)r,
						  el[r * k + j], ex[r * k + j], e, exp(e));
				}
				const int stays = change[r] >= tol;
				want += stays;
				if (pass != 1)
					CHECK_MSG(act[r] == (stays ? 1.0f : 0.0f), "k %lld row %lld: change %.9g, tol %.9g, active %g",
						  (long long)k, (long long)r, change[r], tol, act[r]);
			}
			if (has_bad)
				CHECK_MSG(isnan(slots[b]), "band %lld: a NaN row, count %g", (long long)b, slots[b]);
			else
				CHECK_MSG(slots[b] == want, "band %lld: %g rows left, want %g", (long long)b, slots[b], want);
		}
		starfa_dense_free(dgam);
		starfa_dense_free(del);
		starfa_dense_free(dex);
		starfa_dense_free(dG);
		starfa_dense_free(dact);
		starfa_sums_free(left);
	}
	free(gam);
	free(el);
	free(ex);
	free(G);
	free(act);
	free(gam0);
	free(el0);
	free(ex0);
	free(act0);
	free(change);
	free(sorted);
	free(slots);
	starfa_tiled_free(t);
	starfa_csr_free(S);
	return 0;
}

/* starfa_dense_sync_all: several matrices written by chains of tasks (on a grid of a few bands) come home
 * at once, each with its own values after its whole chain (on CPU workers too, where the data lives in
 * main memory, so the sync must wait for the chain); a NULL in the list or a negative count is an error,
 * an empty list none. */
static int sync_all(starfa_worker_kind kind, uint64_t seed)
{
	CHECK_OK(testing_runtime_only(kind));
	uint64_t rng = seed;
	starfa_csr *S = testing_random_csr(300, 200, 2000, 0.5, &rng);
	CHECK(S);
	starfa_tiling_options tiling = {(int64_t)(1 + testing_below(&rng, 4)), 2, 0};
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(S, &tiling, &t));
	enum { N = 5 };
	const int64_t m = S->nrows;
	float *Y[N];
	starfa_dense *d[N];
	for (int i = 0; i < N; i++) {
		const int64_t k = 1 + i;
		Y[i] = malloc(sizeof(float) * (size_t)(m * k));
		CHECK(Y[i]);
		testing_poison(Y[i], (size_t)(m * k));
		CHECK_OK(starfa_dense_create(t, STARFA_ROWS, Y[i], k, &d[i]));
		CHECK_OK(starfa_insert_dense_map(d[i], STARFA_DENSE_SET, 0.5f + (float)i, 0.0f, NULL, NULL));
	}
	/* then y += 1 i x STEPS times: the later matrices' chains are longer, so they are still running when
	 * the first ones are done */
	enum { STEPS = 50 };
	for (int i = 0; i < N; i++)
		for (int s = 0; s < i * STEPS; s++)
			CHECK_OK(starfa_insert_dense_map(d[i], STARFA_DENSE_SCALE, 1.0f, 1.0f, NULL, NULL));
	CHECK_OK(starfa_dense_sync_all(d, N));
	for (int i = 0; i < N; i++)
		for (int64_t e = 0; e < m * (1 + i); e++)
			CHECK_MSG(Y[i][e] == 0.5f + (float)(i + i * STEPS), "matrix %d, value %lld: %g", i, (long long)e,
				  Y[i][e]);
	CHECK_OK(starfa_dense_sync_all(d, 0));
	starfa_dense *with_null[2] = {d[0], NULL};
	CHECK(starfa_dense_sync_all(with_null, 2) == STARFA_EINVAL);
	CHECK(starfa_dense_sync_all(d, -1) == STARFA_EINVAL);
	for (int i = 0; i < N; i++) {
		starfa_dense_free(d[i]);
		free(Y[i]);
	}
	starfa_tiled_free(t);
	starfa_csr_free(S);
	return 0;
}

TEST(dense, sync_all_brings_every_matrix_home_cpu)
{
	return sync_all(STARFA_WORKER_CPU, testing_seed() + 27);
}

TEST(dense, dirichlet_step_cpu)
{
	return dirichlet_step(STARFA_WORKER_CPU, testing_seed() + 24);
}

TEST(dense, half_conversion_cpu)
{
	return half_conversion(STARFA_WORKER_CPU, testing_seed() + 22);
}

TEST(dense, maps_sums_and_reductions_cpu)
{
	return dense_ops(STARFA_WORKER_CPU, testing_seed() + 21);
}

TEST(dense, special_functions_cpu)
{
	return special_functions(STARFA_WORKER_CPU, testing_seed() + 25);
}

TEST(dense, uniform_draws_cpu)
{
	return uniform_draws(STARFA_WORKER_CPU, testing_seed() + 26);
}

TEST(dense, row_cg_cpu)
{
	return row_cg(STARFA_WORKER_CPU, testing_seed() + 23);
}

#ifdef STARFA_USE_CUDA

TEST(dense_cuda, sync_all_brings_every_matrix_home_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return sync_all(STARFA_WORKER_CUDA, testing_seed() + 27);
}

TEST(dense_cuda, maps_sums_and_reductions_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return dense_ops(STARFA_WORKER_CUDA, testing_seed() + 21);
}

TEST(dense_cuda, row_cg_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return row_cg(STARFA_WORKER_CUDA, testing_seed() + 23);
}

TEST(dense_cuda, dirichlet_step_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return dirichlet_step(STARFA_WORKER_CUDA, testing_seed() + 24);
}

TEST(dense_cuda, special_functions_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return special_functions(STARFA_WORKER_CUDA, testing_seed() + 25);
}

TEST(dense_cuda, uniform_draws_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return uniform_draws(STARFA_WORKER_CUDA, testing_seed() + 26);
}

TEST(dense_cuda, half_conversion_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return half_conversion(STARFA_WORKER_CUDA, testing_seed() + 22);
}

#else

TEST(dense_cuda, not_built)
{
	SKIP("starfa was configured without CUDA");
}

#endif
