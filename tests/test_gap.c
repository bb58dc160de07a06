/* GaP and KL-NMF (graphs/gap.c): the task graph against a dense double-precision reference of the same
 * multiplicative updates from the same start, on CPU workers alone and on CUDA workers alone; the MAP
 * objective (GaP) and the KL divergence (KL-NMF) never increase; θ and β rows sum to 1; inference and the
 * document-completion perplexity against the reference's. */
#include "testing.h"
#include "train/algorithms.h" /* starfa_uniform_pm1: graphs/gap.c's start, scale (1 + u/2), X then Λ */
#ifdef STARFA_USE_CUDA
#include "testing_cuda.h"
#endif

#include <float.h>
#include <lapacke.h>
#include <stdlib.h>
#include <string.h>

#define EPS 1e-30

struct ref {
	int64_t D, W, K;
	double shape, rate;
	const starfa_csr *S;
	double *X, *L, *q;
};

/* q[e] = s / max(ε, x_d·λ_w) for every entry. */
static void ref_quotient(struct ref *r)
{
	for (int64_t d = 0; d < r->D; d++)
		for (int64_t e = r->S->rowptr[d]; e < r->S->rowptr[d + 1]; e++) {
			double y = 0;
			for (int64_t k = 0; k < r->K; k++)
				y += r->X[d * r->K + k] * r->L[r->S->colind[e] * r->K + k];
			r->q[e] = r->S->val[e] / fmax(EPS, y);
		}
}

/* X ← (X ∘ (Q·Λ) + a - 1) ⊘ (colsum(Λ) + rate) */
static void ref_scores(struct ref *r)
{
	const int64_t K = r->K;
	ref_quotient(r);
	double *cl = calloc((size_t)K, sizeof(double)), *xq = calloc((size_t)K, sizeof(double));
	for (int64_t w = 0; w < r->W; w++)
		for (int64_t k = 0; k < K; k++)
			cl[k] += r->L[w * K + k];
	for (int64_t d = 0; d < r->D; d++) {
		memset(xq, 0, sizeof(double) * (size_t)K);
		for (int64_t e = r->S->rowptr[d]; e < r->S->rowptr[d + 1]; e++)
			for (int64_t k = 0; k < K; k++)
				xq[k] += r->q[e] * r->L[r->S->colind[e] * K + k];
		for (int64_t k = 0; k < K; k++)
			r->X[d * K + k] = (r->X[d * K + k] * xq[k] + r->shape - 1) / fmax(EPS, cl[k] + r->rate);
	}
	free(cl);
	free(xq);
}

/* Λ ← Λ ∘ (Qᵀ·X) ⊘ colsum(X), Q from the current X. */
static void ref_words(struct ref *r)
{
	const int64_t K = r->K;
	ref_quotient(r);
	double *cx = calloc((size_t)K, sizeof(double)), *lq = calloc((size_t)(r->W * K), sizeof(double));
	for (int64_t d = 0; d < r->D; d++)
		for (int64_t k = 0; k < K; k++)
			cx[k] += r->X[d * K + k];
	for (int64_t d = 0; d < r->D; d++)
		for (int64_t e = r->S->rowptr[d]; e < r->S->rowptr[d + 1]; e++)
			for (int64_t k = 0; k < K; k++)
				lq[r->S->colind[e] * K + k] += r->q[e] * r->X[d * K + k];
	for (int64_t i = 0; i < r->W * K; i++)
		r->L[i] = r->L[i] * lq[i] / fmax(EPS, cx[i % K]);
	free(cx);
	free(lq);
}

/* D(S ‖ X·Λᵀ) into *kl, and the objective D + rate Σx - (a - 1) Σ log x. */
static double ref_objective(struct ref *r, double *kl)
{
	const int64_t K = r->K;
	double d_kl = 0, sum_x = 0, sum_log = 0;
	for (int64_t d = 0; d < r->D; d++) {
		for (int64_t e = r->S->rowptr[d]; e < r->S->rowptr[d + 1]; e++) {
			double y = 0, s = r->S->val[e];
			for (int64_t k = 0; k < K; k++)
				y += r->X[d * K + k] * r->L[r->S->colind[e] * K + k];
			d_kl += (s > 0 ? s * log(s / fmax(EPS, y)) : 0) - s;
		}
		for (int64_t k = 0; k < K; k++) {
			sum_x += r->X[d * K + k];
			sum_log += log(fmax(EPS, r->X[d * K + k]));
		}
	}
	for (int64_t k = 0; k < K; k++) {
		double cx = 0, cl = 0;
		for (int64_t d = 0; d < r->D; d++)
			cx += r->X[d * K + k];
		for (int64_t w = 0; w < r->W; w++)
			cl += r->L[w * K + k];
		d_kl += cx * cl;
	}
	*kl = d_kl;
	return d_kl + r->rate * sum_x - (r->shape - 1) * sum_log;
}

struct history {
	int64_t n;
	double kl[16], objective[16];
};

static int record(const starfa_train_progress *p, void *user_data)
{
	struct history *h = user_data;
	for (int c = 0; c < p->ncolumns && h->n < 16; c++) {
		if (strcmp(p->columns[c], "kl_per_token") == 0)
			h->kl[h->n] = p->values[c];
		if (strcmp(p->columns[c], "objective_per_token") == 0)
			h->objective[h->n] = p->values[c];
	}
	h->n++;
	return 0;
}

/* Trains `name` (gap with shape 1.5, or klnmf) for 6 iterations and checks it against the reference. */
static int gap_matches_reference(starfa_worker_kind kind, uint64_t seed, const char *name)
{
	CHECK_OK(testing_runtime_only(kind));
	uint64_t rng = seed;
	const int klnmf = strcmp(name, "klnmf") == 0;
	const int64_t D = 40, W = 60, K = 2 + (int64_t)testing_below(&rng, 6), iters = 6;
	starfa_csr *S = NULL;
	starfa_coo *coo = testing_corpus(D, W, 700, &rng, &S);
	CHECK(coo);
	const starfa_algorithm *algo = starfa_algorithm_find(name);
	CHECK(algo && algo->kind == STARFA_MODEL_NONNEG);
	void *params = calloc(1, algo->params_size);
	CHECK(params);
	algo->defaults(params);
	char text[32];
	snprintf(text, sizeof text, "%lld", (long long)K);
	CHECK_OK(starfa_param_set(algo, params, "rank", text));
	CHECK_OK(starfa_param_set(algo, params, "iters", "6"));
	CHECK_OK(starfa_param_set(algo, params, "tiles", "3"));
	CHECK_OK(starfa_param_set(algo, params, "seed", "7"));
	CHECK_OK(starfa_param_set(algo, params, "init", "random"));
	if (!klnmf)
		CHECK_OK(starfa_param_set(algo, params, "shape", "1.5"));
	struct history h = {0};
	starfa_model *m = NULL;
	CHECK_OK(starfa_train(algo, params, coo, NULL, record, &h, &m));
	CHECK(m && m->kind == STARFA_MODEL_NONNEG && strcmp(m->algorithm, name) == 0 && m->rank == K);
	CHECK(h.n == iters);

	double tokens = 0;
	for (int64_t e = 0; e < S->nnz; e++)
		tokens += S->val[e];
	struct ref r = {D, W, K, klnmf ? 1.0 : 1.5, 0, S};
	if (!klnmf)
		r.rate = 1.0 / (tokens / ((double)D * (double)K) / 0.5);
	CHECK(fabs(m->alpha - r.shape) <= 1e-12 && fabs(m->lambda - r.rate) <= 1e-9 * (1 + r.rate));
	r.X = malloc(sizeof(double) * (size_t)(D * K));
	r.L = malloc(sizeof(double) * (size_t)(W * K));
	r.q = malloc(sizeof(double) * (size_t)(S->nnz + 1));
	CHECK(r.X && r.L && r.q);
	uint64_t start = starfa_seed_stream(7, 11);
	const float scale = (float)sqrt(tokens / ((double)D * (double)W * (double)K));
	for (int64_t i = 0; i < D * K; i++)
		r.X[i] = scale * (1.0f + 0.5f * starfa_uniform_pm1(&start));
	for (int64_t i = 0; i < W * K; i++)
		r.L[i] = scale * (1.0f + 0.5f * starfa_uniform_pm1(&start));
	double kl = 0, before = ref_objective(&r, &kl);
	for (int64_t it = 0; it < iters; it++) {
		ref_scores(&r);
		double kl_mid = 0, mid = ref_objective(&r, &kl_mid);
		ref_words(&r);
		double obj = ref_objective(&r, &kl);
		/* each half-step is a minorize-maximize step: the reference never goes up */
		CHECK_MSG(mid <= before * (1 + 1e-12) && obj <= mid * (1 + 1e-12),
			  "reference objective rose at iteration %lld: %.12g -> %.12g -> %.12g", (long long)it + 1, before, mid,
			  obj);
		before = obj;
		CHECK_MSG(fabs(h.kl[it] - kl / tokens) <= 2e-4 * (1 + kl / tokens),
			  "iteration %lld: kl per token %.7g, reference %.7g", (long long)it + 1, h.kl[it], kl / tokens);
		if (!klnmf)
			CHECK_MSG(fabs(h.objective[it] - obj / tokens) <= 2e-4 * (1 + fabs(obj / tokens)),
				  "iteration %lld: objective per token %.7g, reference %.7g", (long long)it + 1, h.objective[it],
				  obj / tokens);
		const double *series = klnmf ? h.kl : h.objective;
		CHECK_MSG(it == 0 || series[it] <= series[it - 1] + 1e-5 * fabs(series[it - 1]),
			  "the objective rose at iteration %lld: %.7g -> %.7g", (long long)it + 1, series[it - 1], series[it]);
	}
	for (int64_t i = 0; i < D * K; i++)
		CHECK_MSG(fabs(m->user_factors[i] - r.X[i]) <= 2e-3 * (fabs(r.X[i]) + 1e-3 * scale),
			  "X[%lld] = %.7g, reference %.7g", (long long)i, m->user_factors[i], r.X[i]);
	for (int64_t i = 0; i < W * K; i++)
		CHECK_MSG(fabs(m->item_factors[i] - r.L[i]) <= 2e-3 * (fabs(r.L[i]) + 1e-3 * scale),
			  "L[%lld] = %.7g, reference %.7g", (long long)i, m->item_factors[i], r.L[i]);
	/* The empty document: x = (a - 1) / (colsum(Λ) + rate), 0 for KL-NMF. */
	for (int64_t k = 0; k < K; k++)
		CHECK_MSG(klnmf ? m->user_factors[2 * K + k] == 0 : m->user_factors[2 * K + k] > 0,
			  "the empty document's score %lld is %g", (long long)k, m->user_factors[2 * K + k]);

	/* β rows sum to 1; doc-topic export and inference give rows summing to 1. */
	float *beta = malloc(sizeof(float) * (size_t)(K * W)), *theta = malloc(sizeof(float) * (size_t)(D * K));
	double *cl = calloc((size_t)K, sizeof(double));
	CHECK(beta && theta && cl);
	CHECK_OK(starfa_topic_word(m, beta));
	for (int64_t k = 0; k < K; k++) {
		double s = 0;
		for (int64_t w = 0; w < W; w++)
			s += beta[k * W + w];
		CHECK_MSG(fabs(s - 1) <= 1e-5, "topic %lld sums to %.9g", (long long)k, s);
	}
	/* Inference with Λ fixed, 5 updates (tol 0) from each document's length spread evenly. */
	starfa_topic_options to = {5, 0};
	int64_t its = 0;
	testing_poison(theta, (size_t)(D * K));
	CHECK_OK(starfa_topic_infer(m, coo, &to, theta, &its));
	CHECK(its == 5);
	for (int64_t i = 0; i < W * K; i++) {
		r.L[i] = m->item_factors[i];
		cl[i % K] += m->item_factors[i];
	}
	double cl_total = 0;
	for (int64_t k = 0; k < K; k++)
		cl_total += (float)cl[k];
	for (int64_t d = 0; d < D; d++) {
		double n = 0;
		for (int64_t e = S->rowptr[d]; e < S->rowptr[d + 1]; e++)
			n += S->val[e];
		for (int64_t k = 0; k < K; k++)
			r.X[d * K + k] = n > 0 ? (float)(n / cl_total) : 1e-3f;
	}
	for (int i = 0; i < 5; i++)
		ref_scores(&r);
	for (int64_t d = 0; d < D; d++) {
		double s = 0, total = 0;
		for (int64_t k = 0; k < K; k++) {
			s += theta[d * K + k];
			total += r.X[d * K + k] * cl[k];
		}
		CHECK_MSG(fabs(s - 1) <= 1e-5, "theta row %lld sums to %.9g", (long long)d, s);
		for (int64_t k = 0; k < K; k++) {
			const double want = total > 0 ? r.X[d * K + k] * cl[k] / total : 1.0 / (double)K;
			CHECK_MSG(fabs(theta[d * K + k] - want) <= 1e-4, "theta[%lld][%lld] = %.7g, reference %.7g",
				  (long long)d, (long long)k, theta[d * K + k], want);
		}
	}
	/* Document completion: mixtures from the observed half, perplexity over the evaluated half. */
	starfa_perplexity p;
	CHECK_OK(starfa_topic_perplexity(m, coo, &to, &p));
	CHECK(p.documents == D && p.empty == 1 && p.iterations == 5);
	starfa_coo *obs = NULL, *ev = NULL;
	CHECK(testing_halves(S, &obs, &ev) == 0);
	starfa_csr *O = NULL;
	CHECK_OK(starfa_csr_from_coo(obs, &O));
	struct ref q = r;
	q.S = O;
	for (int64_t d = 0; d < D; d++) {
		double n = 0;
		for (int64_t e = O->rowptr[d]; e < O->rowptr[d + 1]; e++)
			n += O->val[e];
		for (int64_t k = 0; k < K; k++)
			q.X[d * K + k] = n > 0 ? (float)(n / cl_total) : 1e-3f;
	}
	for (int i = 0; i < 5; i++)
		ref_scores(&q);
	double ll = 0, etok = 0;
	for (int64_t e = 0; e < ev->nnz; e++) {
		const int64_t d = ev->row[e], w = ev->col[e];
		double total = 0, pw = 0;
		for (int64_t k = 0; k < K; k++)
			total += q.X[d * K + k] * cl[k];
		for (int64_t k = 0; k < K; k++)
			pw += q.X[d * K + k] * cl[k] / total * m->item_factors[w * K + k] / cl[k];
		ll += ev->val[e] * log(pw);
		etok += ev->val[e];
	}
	CHECK(p.evaluated_tokens == (int64_t)etok);
	CHECK_MSG(fabs(p.perplexity - exp(-ll / etok)) <= 1e-4 * exp(-ll / etok), "perplexity %.7g, reference %.7g",
		  p.perplexity, exp(-ll / etok));
	starfa_csr_free(O);
	starfa_coo_free(obs);
	starfa_coo_free(ev);
	/* Bad parameters. */
	if (!klnmf) {
		CHECK(starfa_param_set(algo, params, "shape", "0.5") == STARFA_EINVAL);
		CHECK_OK(starfa_param_set(algo, params, "shape", "1"));
		CHECK_OK(starfa_param_set(algo, params, "scale", "2"));
		CHECK(algo->check(params) == STARFA_EINVAL);
	} else {
		CHECK(starfa_param_set(algo, params, "shape", "2") == STARFA_EINVAL); /* klnmf has no prior */
	}
	free(beta);
	free(theta);
	free(cl);
	free(r.X);
	free(r.L);
	free(r.q);
	free(params);
	starfa_model_free(m);
	starfa_coo_free(coo);
	starfa_csr_free(S);
	return 0;
}

/* starfa_svds against LAPACK's SVD of the dense matrix: the singular values, orthonormal U and V, and
 * S v_j = s_j u_j; then KL-NMF from its NNDSVDa start: the divergence never rises, the factors stay
 * non-negative. (On these structureless random counts NNDSVDa need not beat the random start.) A wide
 * matrix (fewer rows than columns) takes starfa_svds' other orientation, on Sᵀ. */
static int svds_and_nndsvda(starfa_worker_kind kind, uint64_t seed, int wide)
{
	CHECK_OK(testing_runtime_only(kind));
	uint64_t rng = seed;
	const int64_t m = wide ? 45 : 60, n = wide ? 60 : 45, k = 1 + (int64_t)testing_below(&rng, 8);
	starfa_csr *S = NULL;
	starfa_coo *coo = testing_corpus(m, n, 900, &rng, &S);
	CHECK(coo);
	starfa_tiling_options tiling = {3, 2, 1, 0, 0};
	starfa_tiled *t = NULL;
	CHECK_OK(starfa_tiled_create(S, &tiling, &t));
	float *U = malloc(sizeof(float) * (size_t)(m * k)), *V = malloc(sizeof(float) * (size_t)(n * k)),
	      *sv = malloc(sizeof(float) * (size_t)k);
	double *A = calloc((size_t)(m * n), sizeof(double)), *ref = malloc(sizeof(double) * (size_t)n),
	       *superb = malloc(sizeof(double) * (size_t)n);
	CHECK(U && V && sv && A && ref && superb);
	testing_poison(U, (size_t)(m * k));
	testing_poison(V, (size_t)(n * k));
	CHECK_OK(starfa_svds(t, k, 7, 3, U, sv, V));
	for (int64_t r = 0; r < m; r++)
		for (int64_t e = S->rowptr[r]; e < S->rowptr[r + 1]; e++)
			A[r * n + S->colind[e]] = S->val[e];
	double *Acopy = malloc(sizeof(double) * (size_t)(m * n));
	CHECK(Acopy);
	memcpy(Acopy, A, sizeof(double) * (size_t)(m * n));
	CHECK(LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'N', 'N', (lapack_int)m, (lapack_int)n, Acopy, (lapack_int)n, ref, NULL, 1,
			     NULL, 1, superb) == 0);
	for (int64_t j = 0; j < k; j++) {
		CHECK_MSG(fabs(sv[j] - ref[j]) <= 1e-3 * ref[0], "singular value %lld: %.7g, LAPACK %.7g", (long long)j, sv[j],
			  ref[j]);
		for (int64_t i = 0; i <= j; i++) {
			double uu = 0, vv = 0;
			for (int64_t r = 0; r < m; r++)
				uu += (double)U[r * k + i] * U[r * k + j];
			for (int64_t c = 0; c < n; c++)
				vv += (double)V[c * k + i] * V[c * k + j];
			CHECK_MSG(fabs(uu - (i == j)) <= 1e-4 && fabs(vv - (i == j)) <= 1e-4, "U or V not orthonormal at (%lld, %lld)",
				  (long long)i, (long long)j);
		}
		/* S v_j = s_j u_j, to the accuracy of the subspace (a gap to the next value keeps it sharp) */
		if (ref[j] - ref[j + 1] > 0.05 * ref[0] && (j == 0 || ref[j - 1] - ref[j] > 0.05 * ref[0]))
			for (int64_t r = 0; r < m; r++) {
				double sv_r = 0;
				for (int64_t c = 0; c < n; c++)
					sv_r += A[r * n + c] * V[c * k + j];
				CHECK_MSG(fabs(sv_r - sv[j] * U[r * k + j]) <= 2e-3 * ref[0], "S v_%lld differs from s u at row %lld",
					  (long long)j, (long long)r);
			}
	}
	CHECK(starfa_svds(t, m + 1, 4, 3, U, sv, V) == STARFA_EINVAL);
	/* KL-NMF from NNDSVDa and from the random start. */
	const starfa_algorithm *algo = starfa_algorithm_find("klnmf");
	void *params = calloc(1, algo->params_size);
	CHECK(params);
	algo->defaults(params);
	char text[32];
	snprintf(text, sizeof text, "%lld", (long long)k);
	CHECK_OK(starfa_param_set(algo, params, "rank", text));
	CHECK_OK(starfa_param_set(algo, params, "iters", "8"));
	struct history h = {0}, hr = {0};
	starfa_model *mn = NULL, *mr = NULL;
	CHECK_OK(starfa_train(algo, params, coo, NULL, record, &h, &mn));
	CHECK_OK(starfa_param_set(algo, params, "init", "random"));
	CHECK_OK(starfa_train(algo, params, coo, NULL, record, &hr, &mr));
	CHECK(h.n == 8 && hr.n == 8);
	for (int64_t i = 1; i < 8; i++)
		CHECK_MSG(h.kl[i] <= h.kl[i - 1] * (1 + 1e-5), "KL rose at iteration %lld: %.7g -> %.7g", (long long)i + 1,
			  h.kl[i - 1], h.kl[i]);
	CHECK(isfinite(h.kl[7]) && isfinite(hr.kl[7]));
	for (int64_t i = 0; i < n * k; i++)
		CHECK(mn->item_factors[i] >= 0 && isfinite(mn->item_factors[i]));
	starfa_model_free(mn);
	starfa_model_free(mr);
	free(params);
	free(U);
	free(V);
	free(sv);
	free(A);
	free(Acopy);
	free(ref);
	free(superb);
	starfa_tiled_free(t);
	starfa_coo_free(coo);
	starfa_csr_free(S);
	return 0;
}

TEST(gap, svds_matches_lapack_and_nndsvda_starts_klnmf_cpu)
{
	CHECK_OK(svds_and_nndsvda(STARFA_WORKER_CPU, testing_seed() + 140, 0));
	return svds_and_nndsvda(STARFA_WORKER_CPU, testing_seed() + 141, 1);
}

TEST(gap, graph_matches_dense_reference_cpu)
{
	return gap_matches_reference(STARFA_WORKER_CPU, testing_seed() + 110, "gap");
}

TEST(gap, klnmf_matches_dense_reference_cpu)
{
	return gap_matches_reference(STARFA_WORKER_CPU, testing_seed() + 120, "klnmf");
}

/* The random starts of consecutive seeds share no draws: with a stream state of seed times the stream's
 * increment, seed s + 1's stream was seed s's shifted by one draw (the 20 seeds of a comparison were
 * nearly one start). Each pair of seeds' first 256 draws, for the salts the algorithms use. */
TEST(gap, consecutive_seeds_start_unrelated_streams)
{
	enum { SEEDS = 9, DRAWS = 256 };
	static const uint64_t salts[] = {7, 11, 13, 17};
	static float draws[SEEDS][DRAWS];
	for (size_t si = 0; si < sizeof salts / sizeof salts[0]; si++) {
		const uint64_t base = testing_seed() % 1000;
		for (uint64_t s = 0; s < SEEDS; s++) {
			uint64_t state = starfa_seed_stream(base + s, salts[si]);
			for (int i = 0; i < DRAWS; i++)
				draws[s][i] = starfa_uniform_pm1(&state);
		}
		/* 24-bit draws: two unrelated streams of 256 share a value about once in 250 pairs; a shifted
		 * copy shares 255. */
		for (int a = 0; a < SEEDS; a++)
			for (int b = a + 1; b < SEEDS; b++) {
				int shared = 0;
				for (int i = 0; i < DRAWS; i++)
					for (int j = 0; j < DRAWS; j++)
						shared += draws[a][i] == draws[b][j];
				CHECK_MSG(shared <= 3, "seeds %llu and %llu (salt %llu) share %d of their first %d draws",
					  (unsigned long long)(base + (uint64_t)a), (unsigned long long)(base + (uint64_t)b),
					  (unsigned long long)salts[si], shared, DRAWS);
			}
	}
	return 0;
}

#ifdef STARFA_USE_CUDA
TEST(gap_cuda, graph_matches_dense_reference_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return gap_matches_reference(STARFA_WORKER_CUDA, testing_seed() + 110, "gap");
}

TEST(gap_cuda, klnmf_matches_dense_reference_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return gap_matches_reference(STARFA_WORKER_CUDA, testing_seed() + 120, "klnmf");
}
TEST(gap_cuda, svds_matches_lapack_and_nndsvda_starts_klnmf_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	CHECK_OK(svds_and_nndsvda(STARFA_WORKER_CUDA, testing_seed() + 140, 0));
	return svds_and_nndsvda(STARFA_WORKER_CUDA, testing_seed() + 141, 1);
}
#else
TEST(gap_cuda, not_built)
{
	SKIP("built without CUDA");
}
#endif
