/* CCD++: the fused pass and the update on their own, one feature's graph against a sequential reference
 * in double (the residual on both grids, the features), and training (the objective never increases;
 * the residual agrees with the model). The bodies run on CPU workers alone and on CUDA workers alone. */
#include "testing.h"
#ifdef STARFA_USE_CUDA
#include "testing_cuda.h"
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The sequential reference: features by feature-major arrays, the residual by forward entry. */
struct ref {
	const starfa_csr *A;
	int64_t m, n, nf;
	double *W, *H, *R, *Rhat, *cw, *ch;
};

static double ref_dot_w(const struct ref *f, const double *Rv, const double *h, int64_t i, double *den)
{
	double num = 0;
	*den = 0;
	for (int64_t e = f->A->rowptr[i]; e < f->A->rowptr[i + 1]; e++) {
		num += Rv[e] * h[f->A->colind[e]];
		*den += h[f->A->colind[e]] * h[f->A->colind[e]];
	}
	return num;
}

/* One feature as cpu/ccd.h states it: R^ = R - prev + t, then inner times h's and w's updates. */
static void ref_feature(struct ref *f, int64_t prev, int64_t t, int update_w, int update_h, int64_t inner, double lambda,
			int nonneg)
{
	const starfa_csr *A = f->A;
	double *w = f->W + t * f->m, *h = f->H + t * f->n;
	for (int64_t i = 0; i < f->m; i++)
		for (int64_t e = A->rowptr[i]; e < A->rowptr[i + 1]; e++) {
			int64_t j = A->colind[e];
			f->Rhat[e] = f->R[e] + w[i] * h[j] - (prev >= 0 ? f->W[prev * f->m + i] * f->H[prev * f->n + j] : 0.0);
		}
	double *num = calloc((size_t)f->n, sizeof *num), *den = calloc((size_t)f->n, sizeof *den);
	for (int64_t s = 0; s < (update_w && update_h ? inner : 1); s++) {
		if (update_h) {
			memset(num, 0, sizeof *num * (size_t)f->n);
			memset(den, 0, sizeof *den * (size_t)f->n);
			for (int64_t i = 0; i < f->m; i++)
				for (int64_t e = A->rowptr[i]; e < A->rowptr[i + 1]; e++) {
					num[A->colind[e]] += f->Rhat[e] * w[i];
					den[A->colind[e]] += w[i] * w[i];
				}
			for (int64_t j = 0; j < f->n; j++) {
				double d = lambda * f->ch[j] + den[j], x = d > 0 ? num[j] / d : 0;
				h[j] = nonneg && !(x > 0) ? 0 : x;
			}
		}
		if (update_w)
			for (int64_t i = 0; i < f->m; i++) {
				double dn, nm = ref_dot_w(f, f->Rhat, h, i, &dn), d = lambda * f->cw[i] + dn, x = d > 0 ? nm / d : 0;
				w[i] = nonneg && !(x > 0) ? 0 : x;
			}
	}
	free(num);
	free(den);
	memcpy(f->R, f->Rhat, sizeof *f->R * (size_t)A->nnz);
}

/* R -= w_t h_t^T. */
static void ref_close(struct ref *f, int64_t t)
{
	for (int64_t i = 0; i < f->m; i++)
		for (int64_t e = f->A->rowptr[i]; e < f->A->rowptr[i + 1]; e++)
			f->R[e] -= f->W[t * f->m + i] * f->H[t * f->n + f->A->colind[e]];
}

static int close_to(double got, double want, double tol)
{
	return fabs(got - want) <= tol * (1 + fabs(want));
}

/* A few features and their scratch on a grid, as host arrays and dense handles: w and h drawn in
 * [-0.3, 0.7) (feature 0's h and feature 1's w all ones: the biases' fixed sides), the counts of each row
 * and column, the scratch poisoned, and the residual on both grids a copy of A's values. */
#define MAX_FEATURES 5
struct feats {
	int64_t nf, m, n;
	float *W, *H, *held, *acc_w, *acc_h, *cw, *ch; /* features by feature-major arrays */
	starfa_dense *w[MAX_FEATURES], *h[MAX_FEATURES], *dheld, *daw, *dah, *dcw, *dch;
	starfa_sparse_values *R, *RT;
};

static int feats_create(const starfa_csr *A, const starfa_tiled *S, int64_t nf, uint64_t *rng, struct feats *f)
{
	const int64_t m = A->nrows, n = A->ncols;
	*f = (struct feats){nf, m, n};
	CHECK(nf <= MAX_FEATURES);
	f->W = malloc(sizeof(float) * (size_t)(nf * m));
	f->H = malloc(sizeof(float) * (size_t)(nf * n));
	f->held = malloc(sizeof(float) * (size_t)n);
	f->acc_w = malloc(sizeof(float) * (size_t)(2 * m));
	f->acc_h = malloc(sizeof(float) * (size_t)(2 * n));
	f->cw = calloc((size_t)m, sizeof(float));
	f->ch = calloc((size_t)n, sizeof(float));
	CHECK(f->W && f->H && f->held && f->acc_w && f->acc_h && f->cw && f->ch);
	for (int64_t e = 0; e < nf * m; e++)
		f->W[e] = (float)(testing_uniform(rng) - 0.3);
	for (int64_t e = 0; e < nf * n; e++)
		f->H[e] = (float)(testing_uniform(rng) - 0.3);
	for (int64_t j = 0; j < n; j++)
		f->H[j] = 1.0f;
	for (int64_t i = 0; i < m; i++)
		f->W[m + i] = 1.0f;
	for (int64_t i = 0; i < m; i++)
		f->cw[i] = (float)(A->rowptr[i + 1] - A->rowptr[i]);
	for (int64_t e = 0; e < A->nnz; e++)
		f->ch[A->colind[e]] += 1.0f;
	testing_poison(f->held, (size_t)n);
	testing_poison(f->acc_w, (size_t)(2 * m));
	testing_poison(f->acc_h, (size_t)(2 * n));
	for (int64_t t = 0; t < nf; t++) {
		CHECK_OK(starfa_dense_create(S, STARFA_ROWS, f->W + t * m, 1, &f->w[t]));
		CHECK_OK(starfa_dense_create(S, STARFA_COLS, f->H + t * n, 1, &f->h[t]));
	}
	CHECK_OK(starfa_dense_create(S, STARFA_COLS, f->held, 1, &f->dheld));
	CHECK_OK(starfa_dense_create(S, STARFA_ROWS, f->acc_w, 2, &f->daw));
	CHECK_OK(starfa_dense_create(S, STARFA_COLS, f->acc_h, 2, &f->dah));
	CHECK_OK(starfa_dense_create(S, STARFA_ROWS, f->cw, 1, &f->dcw));
	CHECK_OK(starfa_dense_create(S, STARFA_COLS, f->ch, 1, &f->dch));
	CHECK_OK(starfa_sparse_values_create(S, STARFA_ROWS, &f->R));
	CHECK_OK(starfa_sparse_values_create(S, STARFA_COLS, &f->RT));
	for (int s = 0; s < 2; s++)
		CHECK_OK(starfa_insert_values_map(s ? f->RT : f->R, STARFA_VALUES_COPY, 0, 0, NULL));
	return 0;
}

/* Feature t's update, t - 1 the previous one: the biases (0, 1) with their fixed side, the last
 * non-negative. */
static starfa_ccd_feature feats_feature(const struct feats *f, int64_t t, float lambda, int64_t inner)
{
	return (starfa_ccd_feature){f->R,	    f->RT,	   t > 0 ? f->w[t - 1] : NULL, t > 0 ? f->h[t - 1] : NULL,
				    f->w[t],	    f->h[t],	   f->dheld,		       f->daw,
				    f->dah,	    f->dcw,	   f->dch,		       lambda,
				    t == f->nf - 1, t != 1,	   t != 0,		       inner};
}

/* Frees the handles (the features come home into W and H), then with arrays the arrays too. */
static void feats_free(struct feats *f, int arrays)
{
	starfa_sparse_values_free(f->R);
	starfa_sparse_values_free(f->RT);
	for (int64_t t = 0; t < f->nf; t++) {
		starfa_dense_free(f->w[t]);
		starfa_dense_free(f->h[t]);
		f->w[t] = f->h[t] = NULL;
	}
	starfa_dense_free(f->dheld);
	starfa_dense_free(f->daw);
	starfa_dense_free(f->dah);
	starfa_dense_free(f->dcw);
	starfa_dense_free(f->dch);
	f->R = f->RT = NULL;
	f->dheld = f->daw = f->dah = f->dcw = f->dch = NULL;
	if (!arrays)
		return;
	free(f->W);
	free(f->H);
	free(f->held);
	free(f->acc_w);
	free(f->acc_h);
	free(f->cw);
	free(f->ch);
}

/* Four features (a user bias with h all ones, an item bias with w all ones, two factors, the last
 * non-negative) through starfa_insert_ccd_feature and starfa_insert_ccd_close on a grid of P bands a
 * side, against the reference: features, and the residual on both grids. With one band a side, each
 * feature is one task. */
static int feature_graph_on(starfa_worker_kind kind, uint64_t seed, int64_t P)
{
	uint64_t rng = seed;
	starfa_csr *A = testing_random_csr(120, 90, 1500, 0.5, &rng);
	CHECK(A);
	const int64_t m = A->nrows, n = A->ncols, nf = 4, inner = 3;
	const double lambda = 0.1 + testing_uniform(&rng), mu = 0.25;
	starfa_tiling_options tiling = {P, P, 1, 0, 0};
	starfa_tiled *S = NULL;
	CHECK_OK(starfa_tiled_create(A, &tiling, &S));
	struct feats F;
	CHECK_OK(feats_create(A, S, nf, &rng, &F));
	float *got = malloc(sizeof(float) * (size_t)A->nnz);
	struct ref f = {A, m, n, nf, malloc(sizeof(double) * (size_t)(nf * m)), malloc(sizeof(double) * (size_t)(nf * n)),
			malloc(sizeof(double) * (size_t)A->nnz), malloc(sizeof(double) * (size_t)A->nnz),
			malloc(sizeof(double) * (size_t)m), malloc(sizeof(double) * (size_t)n)};
	CHECK(got && f.W && f.H && f.R && f.Rhat && f.cw && f.ch);
	for (int64_t e = 0; e < nf * m; e++)
		f.W[e] = F.W[e];
	for (int64_t e = 0; e < nf * n; e++)
		f.H[e] = F.H[e];
	for (int64_t i = 0; i < m; i++)
		f.cw[i] = F.cw[i];
	for (int64_t j = 0; j < n; j++)
		f.ch[j] = F.ch[j];
	/* R = A - mu - sum_t w_t h_t^T on both grids, by closing passes */
	for (int s = 0; s < 2; s++)
		CHECK_OK(starfa_insert_values_map(s ? F.RT : F.R, STARFA_VALUES_SCALE, 1.0f, (float)-mu, NULL));
	for (int64_t e = 0; e < A->nnz; e++)
		f.R[e] = A->val[e] - mu;
	for (int64_t t = 0; t < nf; t++) {
		CHECK_OK(starfa_insert_ccd_close(S, F.R, F.RT, F.w[t], F.h[t]));
		ref_close(&f, t);
	}
	/* the features' regularization goes to slot 1, which holds a sum already: the first feature must
	 * overwrite it, the others add to it */
	starfa_sums *reg = NULL;
	CHECK_OK(starfa_sums_create(2, &reg));
	CHECK_OK(starfa_task_dense_reduce(F.dcw, 0, STARFA_REDUCE_SUM, reg, 1, NULL));
	CHECK_OK(starfa_wait()); /* the tasks counted below are the features' */
	starfa_stats_reset();
	for (int64_t t = 0; t < nf; t++) {
		starfa_ccd_feature feat = feats_feature(&F, t, (float)lambda, inner);
		feat.reg = reg;
		feat.reg_slot = 1;
		feat.reg_add = t > 0;
		CHECK_OK(starfa_insert_ccd_feature(S, &feat));
		ref_feature(&f, t - 1, t, feat.update_w, feat.update_h, inner, lambda, feat.nonneg);
	}
	CHECK_OK(starfa_insert_ccd_close(S, F.R, F.RT, F.w[nf - 1], F.h[nf - 1]));
	ref_close(&f, nf - 1);
	for (int64_t t = 0; t < nf; t++) {
		CHECK_OK(starfa_dense_sync(F.w[t]));
		CHECK_OK(starfa_dense_sync(F.h[t]));
	}
	CHECK_OK(starfa_wait()); /* the close too */
	starfa_worker_stats st;
	starfa_stats_get(&st);
	CHECK(st.tasks[kind] > 0 && st.tasks[1 - kind] == 0);
	CHECK_MSG(P > 1 || st.tasks[kind] == nf + 2, "one band a side: %lld tasks for %lld features and the close",
		  (long long)st.tasks[kind], (long long)nf);
	const double tol = 2e-4;
	for (int64_t e = 0; e < nf * m; e++)
		CHECK_MSG(close_to(F.W[e], f.W[e], tol), "w[%lld][%lld] = %.7g, reference %.7g", (long long)(e / m),
			  (long long)(e % m), F.W[e], f.W[e]);
	for (int64_t e = 0; e < nf * n; e++)
		CHECK_MSG(close_to(F.H[e], f.H[e], tol), "h[%lld][%lld] = %.7g, reference %.7g", (long long)(e / n),
			  (long long)(e % n), F.H[e], f.H[e]);
	for (int64_t e = 0; e < n; e++)
		CHECK(F.H[3 * n + e] >= 0.0f);
	/* the regularization of each feature's updated sides (feature 0 updates w only, feature 1 h only) */
	double want_reg = 0, got_reg[2] = {NAN, NAN};
	for (int64_t t = 0; t < nf; t++) {
		for (int64_t i = 0; t != 1 && i < m; i++)
			want_reg += f.cw[i] * f.W[t * m + i] * f.W[t * m + i];
		for (int64_t j = 0; t != 0 && j < n; j++)
			want_reg += f.ch[j] * f.H[t * n + j] * f.H[t * n + j];
	}
	CHECK_OK(starfa_sums_read(reg, got_reg));
	CHECK_MSG(close_to(got_reg[1], want_reg, tol), "regularization %.9g, reference %.9g", got_reg[1], want_reg);
	CHECK(got_reg[0] == 0.0);
	/* the residual on the forward grid, and on the transposed one (column by column) */
	CHECK_OK(starfa_sparse_values_gather(F.R, got));
	for (int64_t e = 0; e < A->nnz; e++)
		CHECK_MSG(close_to(got[e], f.R[e], tol), "R[%lld] = %.7g, reference %.7g", (long long)e, got[e], f.R[e]);
	starfa_csr *AT = NULL;
	CHECK_OK(starfa_csr_transpose(A, &AT));
	CHECK_OK(starfa_sparse_values_gather(F.RT, got));
	for (int64_t j = 0; j < n; j++)
		for (int64_t e = AT->rowptr[j]; e < AT->rowptr[j + 1]; e++) {
			int64_t i = AT->colind[e], fe = A->rowptr[i];
			while (fe < A->rowptr[i + 1] && A->colind[fe] != j)
				fe++;
			CHECK(fe < A->rowptr[i + 1]);
			CHECK_MSG(close_to(got[e], f.R[fe], tol), "R^T at (%lld, %lld) = %.7g, reference %.7g", (long long)i,
				  (long long)j, got[e], f.R[fe]);
		}
	/* bad operands */
	starfa_ccd_feature bad = feats_feature(&F, 2, 0.1f, 0);
	bad.prev_w = bad.prev_h = NULL;
	CHECK(starfa_insert_ccd_feature(S, &bad) == STARFA_EINVAL);
	starfa_ccd_terms mismatched = {F.w[0], NULL, NULL, NULL, NULL};
	CHECK(starfa_task_ccd_pass(S, STARFA_ROWS, 0, 0, F.R, 1, &mismatched, NULL, 0, NULL) == STARFA_EINVAL);
	starfa_ccd_terms wrong_side = {NULL, NULL, NULL, NULL, F.w[0]};
	CHECK(starfa_task_ccd_pass(S, STARFA_ROWS, 0, 0, F.R, 0, &wrong_side, F.daw, 0, NULL) == STARFA_EINVAL);
	CHECK(starfa_task_ccd_pass(S, STARFA_COLS, 0, 0, F.R, 0, &wrong_side, F.dah, 0, NULL) == STARFA_EINVAL);
	CHECK(starfa_task_ccd_pass(S, STARFA_ROWS, P, 0, F.R, 0, &wrong_side, F.daw, 0, NULL) == STARFA_EINVAL);
	CHECK(starfa_task_ccd_solve(F.w[2], 0, F.dah, F.dcw, 0.1f, 0, NULL) == STARFA_EINVAL);
	CHECK(starfa_task_ccd_regularizer(F.w[2], 0, F.dch, reg, 0, 0, NULL) == STARFA_EINVAL);
	CHECK(starfa_task_ccd_regularizer(F.w[2], 0, F.dcw, reg, 2, 0, NULL) == STARFA_EINVAL);
	CHECK(starfa_task_ccd_regularizer(F.w[2], P, F.dcw, reg, 0, 0, NULL) == STARFA_EINVAL);
	starfa_ccd_feature bad_slot = feats_feature(&F, 2, 0.1f, 2);
	bad_slot.reg = reg;
	bad_slot.reg_slot = 2;
	CHECK(starfa_insert_ccd_feature(S, &bad_slot) == STARFA_EINVAL);
	if (P == 1)
		CHECK(starfa_task_ccd_feature(S, &bad_slot, NULL) == STARFA_EINVAL);
	/* the one-task feature: only on one tile a side, with a held vector of its own */
	starfa_ccd_feature one = feats_feature(&F, 2, 0.1f, 2);
	if (P > 1)
		CHECK(starfa_task_ccd_feature(S, &one, NULL) == STARFA_EINVAL);
	one.held = F.h[2];
	CHECK(starfa_task_ccd_feature(S, &one, NULL) == STARFA_EINVAL);
	one.held = NULL;
	CHECK(starfa_task_ccd_feature(S, &one, NULL) == STARFA_EINVAL);
	starfa_csr_free(AT);
	starfa_sums_free(reg);
	feats_free(&F, 1);
	starfa_tiled_free(S);
	starfa_csr_free(A);
	free(got);
	free(f.W);
	free(f.H);
	free(f.R);
	free(f.Rhat);
	free(f.cw);
	free(f.ch);
	return 0;
}

static int feature_graph(starfa_worker_kind kind, uint64_t seed)
{
	CHECK_OK(testing_runtime_only(kind));
	uint64_t rng = seed;
	CHECK_OK(feature_graph_on(kind, seed, 1));
	return feature_graph_on(kind, seed + 1, 2 + (int64_t)testing_below(&rng, 2));
}

/* starfa_insert_ccd_feature's band tasks by hand (its graph for more than one band a side) on band 0. */
static int feature_by_band_tasks(const starfa_tiled *S, const starfa_ccd_feature *f)
{
	if (f->update_h)
		CHECK_OK(starfa_insert_dense_map(f->held, STARFA_DENSE_COPY, 0, 0, f->h, NULL));
	starfa_ccd_terms cols = {f->prev_h, f->prev_w, f->h, f->w, f->update_h ? f->w : NULL};
	CHECK_OK(starfa_task_ccd_band(S, STARFA_COLS, 0, f->RT, 1, &cols, f->update_h ? f->acc_h : NULL,
				      f->update_h ? f->h : NULL, f->count_h, f->lambda, f->nonneg, NULL));
	starfa_ccd_terms rows = {f->prev_w, f->prev_h, f->w, f->update_h ? f->held : f->h, f->update_w ? f->h : NULL};
	CHECK_OK(starfa_task_ccd_band(S, STARFA_ROWS, 0, f->R, 1, &rows, f->update_w ? f->acc_w : NULL,
				      f->update_w ? f->w : NULL, f->count_w, f->lambda, f->nonneg, NULL));
	for (int64_t s = 1; s < f->inner && f->update_w && f->update_h; s++) {
		starfa_ccd_terms hc = {NULL, NULL, NULL, NULL, f->w}, wr = {NULL, NULL, NULL, NULL, f->h};
		CHECK_OK(starfa_task_ccd_band(S, STARFA_COLS, 0, f->RT, 0, &hc, f->acc_h, f->h, f->count_h, f->lambda,
					      f->nonneg, NULL));
		CHECK_OK(starfa_task_ccd_band(S, STARFA_ROWS, 0, f->R, 0, &wr, f->acc_w, f->w, f->count_w, f->lambda,
					      f->nonneg, NULL));
	}
	return 0;
}

/* One run of five features (a user bias, an item bias, three factors, the last non-negative) on a grid
 * of one tile a side, by starfa_task_ccd_feature (one_task) or by the band tasks it stands for, from
 * factors drawn from seed; the features and the residual on both grids come back in F (its arrays) and
 * vals, vals_t, and with one_task the features' regularization summed by their tasks in *reg. */
static int feature_run(const starfa_csr *A, const starfa_tiled *S, uint64_t seed, int one_task, struct feats *F,
		       float *vals, float *vals_t, double *reg)
{
	starfa_sums *sums = NULL;
	CHECK_OK(starfa_sums_create(1, &sums));
	const int64_t nf = 5, inner = 4;
	CHECK_OK(feats_create(A, S, nf, &seed, F));
	const float lambda = (float)(0.05 + testing_uniform(&seed));
	CHECK_OK(starfa_wait()); /* the tasks counted below are the features' */
	starfa_stats_reset();
	for (int64_t t = 0; t < nf; t++) {
		starfa_ccd_feature f = feats_feature(F, t, lambda, inner);
		f.reg = sums;
		f.reg_add = t > 0;
		if (one_task)
			CHECK_OK(starfa_task_ccd_feature(S, &f, NULL));
		else
			CHECK_OK(feature_by_band_tasks(S, &f));
	}
	CHECK_OK(starfa_wait());
	starfa_worker_stats st;
	starfa_stats_get(&st);
	CHECK_MSG(!one_task || st.tasks[STARFA_WORKER_CPU] + st.tasks[STARFA_WORKER_CUDA] == nf,
		  "%lld tasks for %lld one-task features", (long long)(st.tasks[0] + st.tasks[1]), (long long)nf);
	CHECK_OK(starfa_sparse_values_gather(F->R, vals));
	CHECK_OK(starfa_sparse_values_gather(F->RT, vals_t));
	if (one_task)
		CHECK_OK(starfa_sums_read(sums, reg));
	starfa_sums_free(sums);
	feats_free(F, 0); /* brings the features home */
	return 0;
}

/* starfa_task_ccd_feature against the band tasks it stands for, on one kind of worker: on the CPU the
 * same bits in the features and the residual on both grids, on CUDA workers the same to rounding; and
 * the regularization its tasks summed against the features' own. */
static int feature_task(starfa_worker_kind kind, uint64_t seed)
{
	CHECK_OK(testing_runtime_only(kind));
	const int exact = kind == STARFA_WORKER_CPU;
	uint64_t rng = seed;
	starfa_csr *A = testing_random_csr(150 + (int64_t)testing_below(&rng, 50), 80 + (int64_t)testing_below(&rng, 50),
					   2500, 0.6, &rng);
	CHECK(A);
	starfa_tiled *S = testing_band_grid(A, 1);
	CHECK(S);
	const int64_t m = A->nrows, n = A->ncols, nf = 5;
	struct feats F[2];
	float *vals[2], *vals_t[2];
	double reg[2] = {NAN, NAN};
	const uint64_t draw = rng++;
	for (int r = 0; r < 2; r++) { /* the band tasks, then the one-task feature */
		vals[r] = malloc(sizeof(float) * (size_t)A->nnz);
		vals_t[r] = malloc(sizeof(float) * (size_t)A->nnz);
		CHECK(vals[r] && vals_t[r]);
		CHECK_OK(feature_run(A, S, draw, r, &F[r], vals[r], vals_t[r], &reg[r]));
	}
	CHECK_MSG(testing_band_same(F[0].W, F[1].W, nf * m, exact), "w differs from the band tasks'");
	CHECK_MSG(testing_band_same(F[0].H, F[1].H, nf * n, exact), "h differs from the band tasks'");
	CHECK_MSG(testing_band_same(vals[0], vals[1], A->nnz, exact), "the residual differs from the band tasks'");
	CHECK_MSG(testing_band_same(vals_t[0], vals_t[1], A->nnz, exact),
		  "the transposed residual differs from the band tasks'");
	/* feature 0 updates w only, feature 1 h only */
	double want = 0;
	for (int64_t t = 0; t < nf; t++) {
		for (int64_t i = 0; t != 1 && i < m; i++)
			want += (double)F[1].cw[i] * F[1].W[t * m + i] * F[1].W[t * m + i];
		for (int64_t j = 0; t != 0 && j < n; j++)
			want += (double)F[1].ch[j] * F[1].H[t * n + j] * F[1].H[t * n + j];
	}
	CHECK_MSG(close_to(reg[1], want, 1e-9), "regularization %.12g, from the features %.12g", reg[1], want);
	for (int r = 0; r < 2; r++) {
		feats_free(&F[r], 1);
		free(vals[r]);
		free(vals_t[r]);
	}
	starfa_tiled_free(S);
	starfa_csr_free(A);
	return 0;
}

/* One band's passes and update as starfa_task_ccd_band against the per-tile tasks (starfa_task_ccd_pass
 * in FOR_BAND_TILES's order, then starfa_task_ccd_solve) on one kind of worker: on the CPU workers the
 * same bits in the residual, the sums and x, on CUDA workers (whose passes add a long row's segments in
 * no fixed order) the same to rounding; on both sides, for the pass kinds CCD++ makes, on grids with
 * empty tiles and an empty band. */
struct band_case {
	int write, sub, add, sums, solve;
	int sub_is_x, nonneg; /* x is sub_x as well as add_x (calibrate's open pass); the update's nonneg */
};

/* The vectors of a band case: 0 sub_x, 1 sub_y, 2 x (also add_x), 3 add_y, 4 y, 5 the counts. */
enum { BV_SUB_X, BV_SUB_Y, BV_X, BV_ADD_Y, BV_Y, BV_COUNTS, BV_N };

/* One run of a case over every band of side's grid, by band tasks or by per-tile tasks, from vectors
 * drawn from seed; the residual, x and the sums come back in vals, x and acc. */
static int band_run(const starfa_tiled *S, starfa_side side, const struct band_case *k, float lambda, uint64_t seed,
		    int by_band, float *vals, float *x, float *acc)
{
	const int rows = side == STARFA_ROWS;
	const int64_t xn = rows ? starfa_tiled_nrows(S) : starfa_tiled_ncols(S);
	const int64_t yn = rows ? starfa_tiled_ncols(S) : starfa_tiled_nrows(S), P = starfa_tiled_row_tiles(S);
	float *vec[BV_N];
	starfa_dense *d[BV_N], *dacc;
	for (int v = 0; v < BV_N; v++) {
		const int on_y = v == BV_SUB_Y || v == BV_ADD_Y || v == BV_Y;
		const int64_t len = on_y ? yn : xn;
		vec[v] = v == BV_X ? x : malloc(sizeof(float) * (size_t)len);
		CHECK(vec[v]);
		for (int64_t e = 0; e < len; e++)
			vec[v][e] = v == BV_COUNTS ? (float)testing_below(&seed, 5) : (float)(testing_uniform(&seed) - 0.4);
		CHECK_OK(starfa_dense_create(S, on_y == rows ? STARFA_COLS : STARFA_ROWS, vec[v], 1, &d[v]));
	}
	testing_poison(acc, (size_t)(2 * xn));
	CHECK_OK(starfa_dense_create(S, side, acc, 2, &dacc));
	starfa_sparse_values *R = NULL;
	CHECK_OK(starfa_sparse_values_create(S, side, &R));
	CHECK_OK(starfa_insert_values_map(R, STARFA_VALUES_COPY, 0, 0, NULL));
	starfa_ccd_terms t = {k->sub ? d[k->sub_is_x ? BV_X : BV_SUB_X] : NULL, k->sub ? d[BV_SUB_Y] : NULL,
			      k->add ? d[BV_X] : NULL,
			      k->add ? d[BV_ADD_Y] : NULL, k->sums ? d[BV_Y] : NULL};
	starfa_dense *a = k->sums ? dacc : NULL, *xd = k->solve ? d[BV_X] : NULL;
	for (int64_t i = 0; i < P; i++) {
		if (by_band) {
			CHECK_OK(starfa_task_ccd_band(S, side, i, R, k->write, &t, a, xd, d[BV_COUNTS], lambda, k->nonneg, NULL));
			continue;
		}
		int64_t js[3]; /* the tests' grids have at most 3 bands a side */
		const int64_t nj = testing_band_order(S, side, i, a != NULL, js);
		for (int64_t q = 0; q < nj; q++)
			CHECK_OK(starfa_task_ccd_pass(S, side, i, js[q], R, k->write, &t, a, q > 0, NULL));
		if (xd)
			CHECK_OK(starfa_task_ccd_solve(xd, i, a, d[BV_COUNTS], lambda, k->nonneg, NULL));
	}
	CHECK_OK(starfa_sparse_values_gather(R, vals));
	starfa_sparse_values_free(R);
	starfa_dense_free(dacc); /* brings acc home */
	for (int v = 0; v < BV_N; v++) {
		starfa_dense_free(d[v]);
		if (v != BV_X)
			free(vec[v]);
	}
	return 0;
}

static int band_task(starfa_worker_kind kind, uint64_t seed)
{
	CHECK_OK(testing_runtime_only(kind));
	const int exact = kind == STARFA_WORKER_CPU;
	uint64_t rng = seed;
	const int64_t m = 90 + (int64_t)testing_below(&rng, 40), n = 60 + (int64_t)testing_below(&rng, 40), nnz = 1200;
	starfa_csr *A = testing_band_csr(m, n, nnz, &rng);
	CHECK(A);
	static const struct band_case cases[] = {
		{1, 1, 1, 1, 1}, /* a feature opened: the previous one out, this one in, its update */
		{1, 0, 1, 1, 1}, /* the first feature opened */
		{0, 0, 0, 1, 1}, /* an inner iteration */
		{1, 1, 1, 0, 0}, /* a pass that only rewrites the residual */
		{1, 1, 0, 1, 0}, /* sums without the update */
		{1, 1, 1, 1, 1, 1, 1}, /* x as sub_x and add_x too, non-negative */
		{0, 0, 0, 1, 1, 0, 1}, /* a non-negative inner iteration */
	};
	const int64_t most = m > n ? m : n;
	float *vals[2], *x[2], *acc[2];
	for (int r = 0; r < 2; r++) {
		vals[r] = malloc(sizeof(float) * (size_t)A->nnz);
		x[r] = malloc(sizeof(float) * (size_t)most);
		acc[r] = malloc(sizeof(float) * (size_t)(2 * most));
		CHECK(vals[r] && x[r] && acc[r]);
	}
	for (int64_t P = 1; P <= 3; P++) {
		starfa_tiled *S = testing_band_grid(A, P);
		CHECK(S);
		for (int side = 0; side < 2; side++) {
			const starfa_side sd = side ? STARFA_COLS : STARFA_ROWS;
			const int64_t xn = side ? n : m;
			for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
				const float lambda = (float)(0.05 + testing_uniform(&rng));
				const uint64_t draw = rng++;
				for (int r = 0; r < 2; r++)
					CHECK_OK(band_run(S, sd, &cases[c], lambda, draw, r, vals[r], x[r], acc[r]));
				CHECK_MSG(testing_band_same(vals[0], vals[1], A->nnz, exact),
					  "%lld bands, side %d, case %zu: the residual differs from the per-tile tasks'", (long long)P,
					  side, c);
				CHECK_MSG(testing_band_same(x[0], x[1], xn, exact),
					  "%lld bands, side %d, case %zu: x differs from the per-tile tasks'", (long long)P, side, c);
				CHECK_MSG(!cases[c].sums || testing_band_same(acc[0], acc[1], 2 * xn, exact),
					  "%lld bands, side %d, case %zu: the sums differ from the per-tile tasks'", (long long)P,
					  side, c);
			}
		}
		/* bad operands: an update without sums, a band outside the grid, x of the other side, a negative
		 * lambda, the residual of the other side; then a kind this runtime has no worker of */
		float *wx = calloc((size_t)m, sizeof(float)), *wy = calloc((size_t)n, sizeof(float)),
		      *wa = calloc((size_t)(2 * m), sizeof(float)), *wc = calloc((size_t)m, sizeof(float));
		CHECK(wx && wy && wa && wc);
		starfa_dense *dx, *dy, *da, *dc;
		starfa_sparse_values *RV;
		CHECK_OK(starfa_dense_create(S, STARFA_ROWS, wx, 1, &dx));
		CHECK_OK(starfa_dense_create(S, STARFA_COLS, wy, 1, &dy));
		CHECK_OK(starfa_dense_create(S, STARFA_ROWS, wa, 2, &da));
		CHECK_OK(starfa_dense_create(S, STARFA_ROWS, wc, 1, &dc));
		CHECK_OK(starfa_sparse_values_create(S, STARFA_ROWS, &RV));
		starfa_ccd_terms none = {0}, sums = {NULL, NULL, NULL, NULL, dy};
		CHECK(starfa_task_ccd_band(S, STARFA_ROWS, 0, RV, 1, &none, NULL, dx, dc, 0.1f, 0, NULL) == STARFA_EINVAL);
		CHECK(starfa_task_ccd_band(S, STARFA_ROWS, P, RV, 0, &sums, da, dx, dc, 0.1f, 0, NULL) == STARFA_EINVAL);
		CHECK(starfa_task_ccd_band(S, STARFA_ROWS, 0, RV, 0, &sums, da, dy, dc, 0.1f, 0, NULL) == STARFA_EINVAL);
		CHECK(starfa_task_ccd_band(S, STARFA_ROWS, 0, RV, 0, &sums, da, dx, dc, -1.0f, 0, NULL) == STARFA_EINVAL);
		CHECK(starfa_task_ccd_band(S, STARFA_COLS, 0, RV, 0, &sums, da, dx, dc, 0.1f, 0, NULL) == STARFA_EINVAL);
#ifdef STARFA_USE_CUDA
		/* asked for the other kind of worker, which this runtime has none of: an error, nothing run */
		starfa_task_attr other = {.where = exact ? STARFA_WHERE_CUDA : STARFA_WHERE_CPU};
		starfa_stats_reset();
		CHECK(starfa_task_ccd_band(S, STARFA_ROWS, 0, RV, 0, &sums, da, dx, dc, 0.1f, 0, &other) == STARFA_ENODEV);
		CHECK(strstr(starfa_last_error(), "ccd_band") != NULL);
		CHECK_OK(starfa_wait());
		starfa_worker_stats st;
		starfa_stats_get(&st);
		CHECK(st.tasks[STARFA_WORKER_CPU] == 0 && st.tasks[STARFA_WORKER_CUDA] == 0);
#endif
		starfa_sparse_values_free(RV);
		starfa_dense_free(dx);
		starfa_dense_free(dy);
		starfa_dense_free(da);
		starfa_dense_free(dc);
		free(wx);
		free(wy);
		free(wa);
		free(wc);
		starfa_tiled_free(S);
	}
	for (int r = 0; r < 2; r++) {
		free(vals[r]);
		free(x[r]);
		free(acc[r]);
	}
	starfa_csr_free(A);
	return 0;
}

struct history {
	int64_t n;
	double loss[64], rmse[64];
};

static int record(const starfa_train_progress *p, void *user_data)
{
	struct history *h = user_data;
	if (h->n < 64) {
		h->loss[h->n] = p->train_loss;
		h->rmse[h->n] = p->train_rmse;
		h->n++;
	}
	return 0;
}

/* Training: the objective never increases, and the residual's RMSE (reduced in the graph) is the
 * model's on the training entries, with and without non-negativity. */
static int training(starfa_worker_kind kind, uint64_t seed)
{
	CHECK_OK(testing_runtime_only(kind));
	uint64_t rng = seed;
	starfa_csr *A = testing_random_csr(300, 200, 6000, 0.5, &rng);
	CHECK(A);
	starfa_coo *coo = testing_coo_of(A);
	CHECK(coo);
	for (int64_t e = 0; e < coo->nnz; e++) /* ratings 1..5 */
		coo->val[e] = 1.0f + (float)(int)(5 * testing_uniform(&rng));
	const starfa_algorithm *ccd = starfa_algorithm_find("ccd");
	CHECK(ccd);
	for (int nonneg = 0; nonneg < 2; nonneg++) {
		void *params = calloc(1, ccd->params_size);
		CHECK(params);
		ccd->defaults(params);
		CHECK_OK(starfa_param_set(ccd, params, "rank", "5"));
		CHECK_OK(starfa_param_set(ccd, params, "iters", "8"));
		CHECK_OK(starfa_param_set(ccd, params, "tol", "0"));
		CHECK_OK(starfa_param_set(ccd, params, "tiles", "2"));
		if (nonneg)
			CHECK_OK(starfa_param_set(ccd, params, "nonneg", NULL));
		struct history hist = {0};
		starfa_model *model = NULL;
		CHECK_OK(starfa_train(ccd, params, coo, NULL, record, &hist, &model));
		CHECK(hist.n == 8);
		for (int64_t i = 1; i < hist.n; i++)
			CHECK_MSG(hist.loss[i] <= hist.loss[i - 1] * (1 + 1e-5), "nonneg %d: objective %.8g after %.8g", nonneg,
				  hist.loss[i], hist.loss[i - 1]);
		CHECK(model && strcmp(model->algorithm, "ccd") == 0 && model->rank == 5 && model->user_bias);
		double sse = 0;
		for (int64_t e = 0; e < coo->nnz; e++) {
			int64_t u = coo->row[e], i = coo->col[e];
			double p = model->global_mean + model->user_bias[u] + model->item_bias[i];
			for (int64_t d = 0; d < model->rank; d++)
				p += (double)model->user_factors[u * model->rank + d] * model->item_factors[i * model->rank + d];
			sse += (coo->val[e] - p) * (coo->val[e] - p);
			if (nonneg)
				for (int64_t d = 0; d < model->rank; d++)
					CHECK(model->user_factors[u * model->rank + d] >= 0 &&
					      model->item_factors[i * model->rank + d] >= 0);
		}
		double rmse = sqrt(sse / (double)coo->nnz);
		CHECK_MSG(close_to(rmse, hist.rmse[hist.n - 1], 1e-4), "the model's training RMSE %.7g, the residual's %.7g",
			  rmse, hist.rmse[hist.n - 1]);
		/* the objective: (sse + lambda sum of each row's and column's entries times its squared factors and
		 * bias) / nnz, from the model */
		double reg = 0;
		for (int side = 0; side < 2; side++) {
			const int64_t rows = side ? A->ncols : A->nrows;
			const float *F = side ? model->item_factors : model->user_factors;
			const float *bias = side ? model->item_bias : model->user_bias;
			for (int64_t r = 0; r < rows; r++) {
				int64_t cnt = 0;
				for (int64_t e = 0; e < coo->nnz; e++)
					cnt += (side ? coo->col[e] : coo->row[e]) == r;
				double sq = (double)bias[r] * bias[r];
				for (int64_t d = 0; d < model->rank; d++)
					sq += (double)F[r * model->rank + d] * F[r * model->rank + d];
				reg += (double)cnt * sq;
			}
		}
		const double loss = (sse + model->lambda * reg) / (double)coo->nnz;
		CHECK_MSG(close_to(loss, hist.loss[hist.n - 1], 1e-4), "the model's objective %.7g, the reported %.7g", loss,
			  hist.loss[hist.n - 1]);
		starfa_model_free(model);
		/* bad parameters */
		CHECK(starfa_param_set(ccd, params, "inner", "0") == STARFA_EINVAL);
		CHECK(starfa_param_set(ccd, params, "lambda", "-1") == STARFA_EINVAL);
		CHECK_OK(starfa_param_set(ccd, params, "tiles", "1000"));
		CHECK(starfa_train(ccd, params, coo, NULL, NULL, NULL, &model) == STARFA_EINVAL && model == NULL);
		free(params);
	}
	starfa_coo_free(coo);
	starfa_csr_free(A);
	return 0;
}

TEST(ccd, feature_graph_matches_sequential_reference_cpu)
{
	return feature_graph(STARFA_WORKER_CPU, testing_seed() + 41);
}

TEST(ccd, feature_task_matches_band_tasks)
{
	return feature_task(STARFA_WORKER_CPU, testing_seed() + 44);
}

TEST(ccd, band_task_matches_tile_tasks)
{
	return band_task(STARFA_WORKER_CPU, testing_seed() + 43);
}

TEST(ccd, training_objective_never_increases_cpu)
{
	return training(STARFA_WORKER_CPU, testing_seed() + 42);
}

#ifdef STARFA_USE_CUDA

TEST(ccd_cuda, feature_graph_matches_sequential_reference_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return feature_graph(STARFA_WORKER_CUDA, testing_seed() + 41);
}

TEST(ccd_cuda, feature_task_matches_band_tasks_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return feature_task(STARFA_WORKER_CUDA, testing_seed() + 44);
}

TEST(ccd_cuda, band_task_matches_tile_tasks_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return band_task(STARFA_WORKER_CUDA, testing_seed() + 43);
}

TEST(ccd_cuda, training_objective_never_increases_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return training(STARFA_WORKER_CUDA, testing_seed() + 42);
}

#else

TEST(ccd_cuda, not_built)
{
	SKIP("starfa was configured without CUDA");
}

#endif
