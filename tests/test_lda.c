/* LDA by variational Bayes (graphs/lda.c): the task graph against a dense double-precision reference of
 * the same updates from the same start, on CPU workers alone and on CUDA workers alone; the bound never
 * decreases in batch mode; the online mode trains; θ and β rows sum to 1; inference and the
 * document-completion perplexity against the reference's. */
#include "testing.h"
#include "train/algorithms.h" /* starfa_uniform_pm1: graphs/lda.c's start, 1 + 0.17 u, λ then γ */
#ifdef STARFA_USE_CUDA
#include "testing_cuda.h"
#endif

#include <float.h>
#include <stdlib.h>
#include <string.h>

struct ref {
	int64_t D, W, K;
	double alpha, eta;
	const starfa_csr *S;
	double *gamma, *lambda, *et, *bt, *elogt, *elogb, *norm;
};

static void ref_topics(struct ref *r)
{
	for (int64_t k = 0; k < r->K; k++) {
		double total = 0;
		for (int64_t w = 0; w < r->W; w++)
			total += r->lambda[w * r->K + k];
		for (int64_t w = 0; w < r->W; w++) {
			r->elogb[w * r->K + k] = testing_digamma(r->lambda[w * r->K + k]) - testing_digamma(total);
			r->bt[w * r->K + k] = exp(r->elogb[w * r->K + k]);
		}
	}
}

static void ref_docs(struct ref *r)
{
	for (int64_t d = 0; d < r->D; d++) {
		double total = 0;
		for (int64_t k = 0; k < r->K; k++)
			total += r->gamma[d * r->K + k];
		for (int64_t k = 0; k < r->K; k++) {
			r->elogt[d * r->K + k] = testing_digamma(r->gamma[d * r->K + k]) - testing_digamma(total);
			r->et[d * r->K + k] = exp(r->elogt[d * r->K + k]);
		}
	}
}

/* norm[e] = θ̃_d·β̃_w for every entry. */
static void ref_norm(struct ref *r)
{
	for (int64_t d = 0; d < r->D; d++)
		for (int64_t e = r->S->rowptr[d]; e < r->S->rowptr[d + 1]; e++) {
			double s = 0;
			for (int64_t k = 0; k < r->K; k++)
				s += r->et[d * r->K + k] * r->bt[r->S->colind[e] * r->K + k];
			r->norm[e] = s;
		}
}

/* `inner` E-step iterations, γ = α + θ̃ ∘ (Σ_w s / norm β̃_w). */
static void ref_estep(struct ref *r, int64_t inner)
{
	double *g = calloc((size_t)r->K, sizeof *g);
	for (int64_t it = 0; it < inner; it++) {
		ref_norm(r);
		for (int64_t d = 0; d < r->D; d++) {
			memset(g, 0, sizeof(double) * (size_t)r->K);
			for (int64_t e = r->S->rowptr[d]; e < r->S->rowptr[d + 1]; e++)
				for (int64_t k = 0; k < r->K; k++)
					g[k] += r->S->val[e] / r->norm[e] * r->bt[r->S->colind[e] * r->K + k];
			for (int64_t k = 0; k < r->K; k++)
				r->gamma[d * r->K + k] = r->alpha + r->et[d * r->K + k] * g[k];
		}
		ref_docs(r);
	}
	free(g);
}

/* The E-step document by document, as scikit-learn's: each document's γ until the mean absolute change of
 * an iteration is under tol, or max_inner iterations. Returns the most iterations a document ran. */
static int64_t ref_estep_each(struct ref *r, int64_t max_inner, double tol)
{
	double *g = calloc((size_t)r->K, sizeof *g);
	int64_t most = 0;
	for (int64_t d = 0; d < r->D; d++) {
		int64_t it = 0;
		while (it < max_inner) {
			double change = 0, total = 0;
			memset(g, 0, sizeof(double) * (size_t)r->K);
			for (int64_t e = r->S->rowptr[d]; e < r->S->rowptr[d + 1]; e++) {
				double norm = 0;
				for (int64_t k = 0; k < r->K; k++)
					norm += r->et[d * r->K + k] * r->bt[r->S->colind[e] * r->K + k];
				for (int64_t k = 0; k < r->K; k++)
					g[k] += r->S->val[e] / norm * r->bt[r->S->colind[e] * r->K + k];
			}
			for (int64_t k = 0; k < r->K; k++) {
				const double v = r->alpha + r->et[d * r->K + k] * g[k];
				change += fabs(v - r->gamma[d * r->K + k]);
				r->gamma[d * r->K + k] = v;
				total += v;
			}
			for (int64_t k = 0; k < r->K; k++) {
				r->elogt[d * r->K + k] = testing_digamma(r->gamma[d * r->K + k]) - testing_digamma(total);
				r->et[d * r->K + k] = exp(r->elogt[d * r->K + k]);
			}
			it++;
			if (change / (double)r->K < tol)
				break;
		}
		if (it > most)
			most = it;
	}
	free(g);
	return most;
}

/* λ = η + β̃ ∘ Σ_d (s / norm) θ̃_d. */
static void ref_mstep(struct ref *r)
{
	ref_norm(r);
	double *sst = calloc((size_t)(r->W * r->K), sizeof *sst);
	for (int64_t d = 0; d < r->D; d++)
		for (int64_t e = r->S->rowptr[d]; e < r->S->rowptr[d + 1]; e++)
			for (int64_t k = 0; k < r->K; k++)
				sst[r->S->colind[e] * r->K + k] += r->S->val[e] / r->norm[e] * r->et[d * r->K + k];
	for (int64_t i = 0; i < r->W * r->K; i++)
		r->lambda[i] = r->eta + r->bt[i] * sst[i];
	free(sst);
	ref_topics(r);
}

static double ref_bound(struct ref *r)
{
	ref_norm(r);
	double L = 0;
	for (int64_t e = 0; e < r->S->nnz; e++)
		L += r->S->val[e] * log(r->norm[e]);
	for (int64_t d = 0; d < r->D; d++) {
		double total = 0;
		for (int64_t k = 0; k < r->K; k++) {
			double g = r->gamma[d * r->K + k];
			L += (r->alpha - g) * r->elogt[d * r->K + k] + lgamma(g) - lgamma(r->alpha);
			total += g;
		}
		L += lgamma(r->K * r->alpha) - lgamma(total);
	}
	for (int64_t k = 0; k < r->K; k++) {
		double total = 0;
		for (int64_t w = 0; w < r->W; w++) {
			double l = r->lambda[w * r->K + k];
			L += (r->eta - l) * r->elogb[w * r->K + k] + lgamma(l) - lgamma(r->eta);
			total += l;
		}
		L += lgamma(r->W * r->eta) - lgamma(total);
	}
	return L;
}

/* graphs/lda.c's start for seed `seed`: λ then γ, 1 + 0.17 u each. */
static void ref_start(struct ref *r, uint64_t seed)
{
	uint64_t start = starfa_seed_stream(seed, 7);
	for (int64_t i = 0; i < r->W * r->K; i++)
		r->lambda[i] = 1.0f + 0.17f * starfa_uniform_pm1(&start);
	for (int64_t i = 0; i < r->D * r->K; i++)
		r->gamma[i] = 1.0f + 0.17f * starfa_uniform_pm1(&start);
	ref_topics(r);
	ref_docs(r);
}

/* graphs/lda.c's random start of pass `pass` (from 1) for element i of γ (documents x K, row-major):
 * 1 ± sqrt(3)/10 by a uniform draw, SplitMix64 (Steele, Lea & Flood 2014) at counter i + 1 of the
 * stream seed·0x9E3779B97F4A7C15 xor pass·0xD1B54A32D192ED03, its top 24 bits over 2^24. */
static double ref_random_start(uint64_t seed, int64_t pass, int64_t i)
{
	const uint64_t z = testing_splitmix64(seed * 0x9E3779B97F4A7C15ull ^ (uint64_t)pass * 0xD1B54A32D192ED03ull,
					      (uint64_t)i);
	const float half = 0.17320508f;
	return fmaf(2 * half, (float)(z >> 40) * 0x1p-24f, 1.0f - half);
}

struct history {
	int64_t n, ni;
	double bound[16], inner[16];
};

static int record(const starfa_train_progress *p, void *user_data)
{
	struct history *h = user_data;
	for (int c = 0; c < p->ncolumns; c++) {
		if (strcmp(p->columns[c], "elbo_per_token") == 0 && h->n < 16)
			h->bound[h->n++] = p->values[c];
		if (strcmp(p->columns[c], "inner") == 0 && h->ni < 16)
			h->inner[h->ni++] = p->values[c];
	}
	return 0;
}

static int lda_matches_reference(starfa_worker_kind kind, uint64_t seed)
{
	CHECK_OK(testing_runtime_only(kind));
	uint64_t rng = seed;
	const int64_t D = 40, W = 60, K = 2 + (int64_t)testing_below(&rng, 6), iters = 4, inner = 3;
	starfa_csr *S = NULL;
	starfa_coo *coo = testing_corpus(D, W, 700, &rng, &S);
	CHECK(coo);
	const starfa_algorithm *lda = starfa_algorithm_find("lda");
	CHECK(lda && lda->kind == STARFA_MODEL_TOPIC);
	void *params = calloc(1, lda->params_size);
	CHECK(params);
	lda->defaults(params);
	char text[32];
	snprintf(text, sizeof text, "%lld", (long long)K);
	CHECK_OK(starfa_param_set(lda, params, "rank", text));
	CHECK_OK(starfa_param_set(lda, params, "iters", "4"));
	CHECK_OK(starfa_param_set(lda, params, "max-inner", "3"));
	CHECK_OK(starfa_param_set(lda, params, "inner-tol", "0"));
	CHECK_OK(starfa_param_set(lda, params, "estep-start", "warm"));
	CHECK_OK(starfa_param_set(lda, params, "tiles", "3"));
	CHECK_OK(starfa_param_set(lda, params, "seed", "5"));
	struct history h = {0};
	starfa_model *m = NULL;
	CHECK_OK(starfa_train(lda, params, coo, NULL, record, &h, &m));
	CHECK(m && m->kind == STARFA_MODEL_TOPIC && strcmp(m->algorithm, "lda") == 0 && m->rank == K);
	CHECK(h.n == iters);

	struct ref r = {D, W, K, 1.0 / (double)K, 1.0 / (double)K, S};
	r.gamma = malloc(sizeof(double) * (size_t)(D * K));
	r.lambda = malloc(sizeof(double) * (size_t)(W * K));
	r.et = malloc(sizeof(double) * (size_t)(D * K));
	r.elogt = malloc(sizeof(double) * (size_t)(D * K));
	r.bt = malloc(sizeof(double) * (size_t)(W * K));
	r.elogb = malloc(sizeof(double) * (size_t)(W * K));
	r.norm = malloc(sizeof(double) * (size_t)(S->nnz + 1));
	CHECK(r.gamma && r.lambda && r.et && r.elogt && r.bt && r.elogb && r.norm);
	ref_start(&r, 5);
	double tokens = 0;
	for (int64_t e = 0; e < S->nnz; e++)
		tokens += S->val[e];
	for (int64_t it = 0; it < iters; it++) {
		ref_estep(&r, inner);
		ref_mstep(&r);
		double want = ref_bound(&r) / tokens;
		CHECK_MSG(fabs(h.bound[it] - want) <= 2e-4 * (1 + fabs(want)), "iteration %lld: bound per token %.7g, reference %.7g",
			  (long long)it + 1, h.bound[it], want);
		CHECK_MSG(it == 0 || h.bound[it] >= h.bound[it - 1] - 1e-5 * fabs(h.bound[it]),
			  "the bound decreased at iteration %lld: %.7g -> %.7g", (long long)it + 1, h.bound[it - 1], h.bound[it]);
	}
	for (int64_t i = 0; i < D * K; i++)
		CHECK_MSG(fabs(m->user_factors[i] - r.gamma[i]) <= 2e-3 * (1 + fabs(r.gamma[i])),
			  "gamma[%lld] = %.7g, reference %.7g", (long long)i, m->user_factors[i], r.gamma[i]);
	for (int64_t i = 0; i < W * K; i++)
		CHECK_MSG(fabs(m->item_factors[i] - r.lambda[i]) <= 2e-3 * (1 + fabs(r.lambda[i])),
			  "lambda[%lld] = %.7g, reference %.7g", (long long)i, m->item_factors[i], r.lambda[i]);
	/* The empty document's mixture is the prior. */
	for (int64_t k = 0; k < K; k++)
		CHECK(fabs(m->user_factors[2 * K + k] - r.alpha) <= 1e-6);
	/* β rows sum to 1. */
	float *beta = malloc(sizeof(float) * (size_t)(K * W)), *theta = malloc(sizeof(float) * (size_t)(D * K));
	CHECK(beta && theta);
	CHECK_OK(starfa_topic_word(m, beta));
	for (int64_t k = 0; k < K; k++) {
		double s = 0;
		for (int64_t w = 0; w < W; w++)
			s += beta[k * W + w];
		CHECK_MSG(fabs(s - 1) <= 1e-5, "topic %lld sums to %.9g", (long long)k, s);
	}
	/* Inference on the corpus itself with λ fixed: rows of θ sum to 1, and match the reference's E-step
	 * from γ = 1 (the same number of iterations: tol 0). */
	starfa_topic_options to = {5, 0};
	int64_t its = 0;
	testing_poison(theta, (size_t)(D * K));
	CHECK_OK(starfa_topic_infer(m, coo, &to, theta, &its));
	CHECK(its == 5);
	for (int64_t i = 0; i < W * K; i++)
		r.lambda[i] = m->item_factors[i];
	for (int64_t i = 0; i < D * K; i++)
		r.gamma[i] = 1.0;
	ref_topics(&r);
	ref_docs(&r);
	ref_estep(&r, 5);
	for (int64_t d = 0; d < D; d++) {
		double s = 0, total = 0;
		for (int64_t k = 0; k < K; k++) {
			s += theta[d * K + k];
			total += r.gamma[d * K + k];
		}
		CHECK_MSG(fabs(s - 1) <= 1e-5, "theta row %lld sums to %.9g", (long long)d, s);
		for (int64_t k = 0; k < K; k++)
			CHECK_MSG(fabs(theta[d * K + k] - r.gamma[d * K + k] / total) <= 1e-4,
				  "theta[%lld][%lld] = %.7g, reference %.7g", (long long)d, (long long)k, theta[d * K + k],
				  r.gamma[d * K + k] / total);
	}
	/* Document completion: the evaluated half's perplexity from the observed half's mixtures. */
	starfa_perplexity p;
	CHECK_OK(starfa_topic_perplexity(m, coo, &to, &p));
	CHECK(p.documents == D && p.empty == 1 && p.iterations == 5);
	starfa_coo *obs = NULL, *ev = NULL;
	CHECK(testing_halves(S, &obs, &ev) == 0);
	starfa_csr *O = NULL;
	CHECK_OK(starfa_csr_from_coo(obs, &O));
	struct ref q = r;
	q.S = O;
	for (int64_t i = 0; i < D * K; i++)
		q.gamma[i] = 1.0;
	ref_docs(&q);
	ref_estep(&q, 5);
	double ll = 0, etok = 0;
	for (int64_t e = 0; e < ev->nnz; e++) {
		const int64_t d = ev->row[e], w = ev->col[e];
		double gt = 0, ltot, pw = 0;
		for (int64_t k = 0; k < K; k++)
			gt += q.gamma[d * K + k];
		for (int64_t k = 0; k < K; k++) {
			ltot = 0;
			for (int64_t v = 0; v < W; v++)
				ltot += m->item_factors[v * K + k];
			pw += q.gamma[d * K + k] / gt * m->item_factors[w * K + k] / ltot;
		}
		ll += ev->val[e] * log(pw);
		etok += ev->val[e];
	}
	CHECK(p.evaluated_tokens == (int64_t)etok);
	CHECK_MSG(fabs(p.perplexity - exp(-ll / etok)) <= 1e-4 * exp(-ll / etok), "perplexity %.7g, reference %.7g",
		  p.perplexity, exp(-ll / etok));
	starfa_csr_free(O);
	starfa_coo_free(obs);
	starfa_coo_free(ev);
	/* Each document's E-step from new draws near 1 every pass (the default, as scikit-learn) or from
	 * γ = 1 (fresh), stopping on its own (the default inner-tol, as scikit-learn's): the documents
	 * converge at different inner iterations, the converged ones drop out, and the graph still follows
	 * the reference; the bound still never decreases. Float against double moves a document's stop by an
	 * iteration at times (up to 1.7e-3 of γ over 50 seeds), so the tolerance here is loose; the dense
	 * group checks the Dirichlet step's stopping exactly. */
	CHECK_OK(starfa_param_set(lda, params, "max-inner", "40"));
	CHECK_OK(starfa_param_set(lda, params, "inner-tol", "0.001"));
	for (int random = 0; random < 2; random++) {
		CHECK_OK(starfa_param_set(lda, params, "estep-start", random ? "random" : "fresh"));
		starfa_model *me = NULL;
		h.n = h.ni = 0;
		CHECK_OK(starfa_train(lda, params, coo, NULL, record, &h, &me));
		CHECK(h.n == iters && h.ni == iters);
		ref_start(&r, 5);
		int64_t partial = 0; /* passes where some documents stopped before others */
		for (int64_t it = 0; it < iters; it++) {
			for (int64_t i = 0; i < D * K; i++) /* a new start every pass */
				r.gamma[i] = random ? ref_random_start(5, it + 1, i) : 1.0;
			ref_docs(&r);
			const int64_t most = ref_estep_each(&r, 40, 1e-3);
			partial += most > 1;
			ref_mstep(&r);
			double want = ref_bound(&r) / tokens;
			CHECK_MSG(fabs(h.bound[it] - want) <= 5e-4 * (1 + fabs(want)),
				  "per-document E-step (%s start), iteration %lld: bound per token %.7g, reference %.7g",
				  random ? "random" : "fresh", (long long)it + 1, h.bound[it], want);
			CHECK_MSG(fabs(h.inner[it] - (double)most) <= 1 + 0.1 * (double)most,
				  "per-document E-step, iteration %lld: %g inner iterations, reference %lld", (long long)it + 1,
				  h.inner[it], (long long)most);
			CHECK_MSG(it == 0 || h.bound[it] >= h.bound[it - 1] - 1e-5 * fabs(h.bound[it]),
				  "per-document E-step: the bound decreased at iteration %lld: %.7g -> %.7g",
				  (long long)it + 1, h.bound[it - 1], h.bound[it]);
		}
		CHECK(partial > 0);
		for (int64_t i = 0; i < D * K; i++)
			CHECK_MSG(fabs(me->user_factors[i] - r.gamma[i]) <= 1e-2 * (1 + fabs(r.gamma[i])),
				  "per-document E-step (%s start): gamma[%lld] = %.7g, reference %.7g",
				  random ? "random" : "fresh", (long long)i, me->user_factors[i], r.gamma[i]);
		for (int64_t i = 0; i < W * K; i++)
			CHECK_MSG(fabs(me->item_factors[i] - r.lambda[i]) <= 5e-3 * (1 + fabs(r.lambda[i])),
				  "per-document E-step (%s start): lambda[%lld] = %.7g, reference %.7g",
				  random ? "random" : "fresh", (long long)i, me->item_factors[i], r.lambda[i]);
		starfa_model_free(me);
	}
	CHECK_OK(starfa_param_set(lda, params, "max-inner", "3"));
	/* Online mode: trains, θ and β stay proportions. */
	CHECK_OK(starfa_param_set(lda, params, "mode", "online"));
	CHECK_OK(starfa_param_set(lda, params, "batch", "16"));
	CHECK_OK(starfa_param_set(lda, params, "inner-tol", "0.001"));
	starfa_model *mo = NULL;
	h.n = 0;
	CHECK_OK(starfa_train(lda, params, coo, NULL, record, &h, &mo));
	CHECK(h.n == iters && isfinite(h.bound[iters - 1]));
	CHECK_OK(starfa_topic_word(mo, beta));
	for (int64_t i = 0; i < K * W; i++)
		CHECK(isfinite(beta[i]) && beta[i] > 0);
	starfa_model_free(mo);
	/* Bad parameters and inputs. */
	CHECK(starfa_param_set(lda, params, "decay", "0.3") == STARFA_EINVAL);
	CHECK(starfa_topic_infer(NULL, coo, NULL, theta, NULL) == STARFA_EINVAL);
	free(beta);
	free(theta);
	free(r.gamma);
	free(r.lambda);
	free(r.et);
	free(r.elogt);
	free(r.bt);
	free(r.elogb);
	free(r.norm);
	free(params);
	starfa_model_free(m);
	starfa_coo_free(coo);
	starfa_csr_free(S);
	return 0;
}

TEST(lda, graph_matches_dense_reference_cpu)
{
	return lda_matches_reference(STARFA_WORKER_CPU, testing_seed() + 90);
}

#ifdef STARFA_USE_CUDA
TEST(lda_cuda, graph_matches_dense_reference_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return lda_matches_reference(STARFA_WORKER_CUDA, testing_seed() + 90);
}
#else
TEST(lda_cuda, not_built)
{
	SKIP("built without CUDA");
}
#endif
