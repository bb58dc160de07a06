/* SFA (graphs/sfa.c): the task graph against a dense double-precision reference of the same alternating
 * CG half-steps from the same start, on CPU workers alone and on CUDA workers alone; the loss never
 * increases; with enough CG steps each half-step is ALS's exact solve (Cholesky in the reference). */
#include "testing.h"
#include "train/algorithms.h" /* starfa_uniform_pm1: graphs/sfa.c's start, X = 0, Y = u / sqrt(k) */
#ifdef STARFA_USE_CUDA
#include "testing_cuda.h"
#endif

#include <float.h>
#include <stdlib.h>
#include <string.h>

/* One side's half-step in double: rows of S (CSR, `rows` of them), x (rows x k) against y, targets
 * s - mu, λ_r = lambda * entries; `steps` CG steps from x (steps < 0: Cholesky, the exact solve). */
static void ref_half(const starfa_csr *S, double mu, double lambda, int64_t k, double *x, const double *y, int64_t steps)
{
	double *A = malloc(sizeof(double) * (size_t)(k * k)), *b = malloc(sizeof(double) * (size_t)k),
	       *r = malloc(sizeof(double) * (size_t)k), *p = malloc(sizeof(double) * (size_t)k),
	       *q = malloc(sizeof(double) * (size_t)k);
	for (int64_t u = 0; u < S->nrows; u++) {
		const int64_t entries = S->rowptr[u + 1] - S->rowptr[u];
		const double lam = lambda * (double)(entries > 0 ? entries : 1); /* an empty row counts one */
		double *xu = x + u * k;
		memset(A, 0, sizeof(double) * (size_t)(k * k));
		memset(b, 0, sizeof(double) * (size_t)k);
		for (int64_t e = S->rowptr[u]; e < S->rowptr[u + 1]; e++) {
			const double *yv = y + (int64_t)S->colind[e] * k;
			for (int64_t i = 0; i < k; i++) {
				b[i] += (S->val[e] - mu) * yv[i];
				for (int64_t j = 0; j < k; j++)
					A[i * k + j] += yv[i] * yv[j];
			}
		}
		for (int64_t i = 0; i < k; i++)
			A[i * k + i] += lam;
		if (steps < 0) { /* Cholesky: A = L Lᵀ (L in A's lower triangle) */
			for (int64_t i = 0; i < k; i++)
				for (int64_t j = 0; j <= i; j++) {
					double s = A[i * k + j];
					for (int64_t l = 0; l < j; l++)
						s -= A[i * k + l] * A[j * k + l];
					A[i * k + j] = i == j ? sqrt(s) : s / A[j * k + j];
				}
			for (int64_t i = 0; i < k; i++) {
				double s = b[i];
				for (int64_t l = 0; l < i; l++)
					s -= A[i * k + l] * xu[l];
				xu[i] = s / A[i * k + i];
			}
			for (int64_t i = k - 1; i >= 0; i--) {
				double s = xu[i];
				for (int64_t l = i + 1; l < k; l++)
					s -= A[l * k + i] * xu[l];
				xu[i] = s / A[i * k + i];
			}
			continue;
		}
		double rr = 0;
		for (int64_t i = 0; i < k; i++) {
			double s = b[i];
			for (int64_t j = 0; j < k; j++)
				s -= A[i * k + j] * xu[j];
			r[i] = p[i] = s;
			rr += s * s;
		}
		for (int64_t t = 0; t < steps; t++) {
			double pq = 0, rn = 0;
			for (int64_t i = 0; i < k; i++) {
				q[i] = 0;
				for (int64_t j = 0; j < k; j++)
					q[i] += A[i * k + j] * p[j];
				pq += p[i] * q[i];
			}
			const double alpha = pq > 0 ? rr / pq : 0;
			for (int64_t i = 0; i < k; i++) {
				xu[i] += alpha * p[i];
				r[i] -= alpha * q[i];
				rn += r[i] * r[i];
			}
			const double beta = rr > 0 ? rn / rr : 0;
			for (int64_t i = 0; i < k; i++)
				p[i] = r[i] + beta * p[i];
			rr = rn;
		}
	}
	free(A);
	free(b);
	free(r);
	free(p);
	free(q);
}

struct history {
	int64_t n;
	double loss[16], rmse[16];
};

static int record(const starfa_train_progress *p, void *user_data)
{
	struct history *h = user_data;
	if (h->n < 16) {
		h->loss[h->n] = p->train_loss;
		h->rmse[h->n] = p->train_rmse;
	}
	h->n++;
	return 0;
}

/* Trains 4 iterations of `steps` CG steps (0: enough for the exact solve) and checks them. */
static int sfa_matches_reference(starfa_worker_kind kind, uint64_t seed, int64_t steps)
{
	CHECK_OK(testing_runtime_only(kind));
	uint64_t rng = seed;
	const int64_t m = 50, n = 40, k = 2 + (int64_t)testing_below(&rng, 7), iters = 4;
	starfa_csr *S = testing_random_csr(m, n, 600, 0.5, &rng);
	CHECK(S);
	for (int64_t e = 0; e < S->nnz; e++)
		S->val[e] = (float)(1 + (int)(5 * testing_uniform(&rng)));
	/* item 5 loses its entries (a split can leave items with none): its factors must stay zero */
	int64_t kept = 0;
	for (int64_t u = 0, e = 0; u < m; u++) {
		const int64_t end = S->rowptr[u + 1];
		for (; e < end; e++)
			if (S->colind[e] != 5) {
				S->colind[kept] = S->colind[e];
				S->val[kept++] = S->val[e];
			}
		S->rowptr[u + 1] = kept;
	}
	S->nnz = kept;
	starfa_coo *coo = testing_coo_of(S);
	starfa_csr *T = NULL;
	CHECK(coo);
	CHECK_OK(starfa_csr_transpose(S, &T));
	const starfa_algorithm *algo = starfa_algorithm_find("sfa");
	CHECK(algo && algo->kind == STARFA_MODEL_EXPLICIT);
	void *params = calloc(1, algo->params_size);
	CHECK(params);
	algo->defaults(params);
	char text[32];
	snprintf(text, sizeof text, "%lld", (long long)k);
	CHECK_OK(starfa_param_set(algo, params, "rank", text));
	CHECK_OK(starfa_param_set(algo, params, "iters", "4"));
	snprintf(text, sizeof text, "%lld", (long long)(steps > 0 ? steps : 3 * k));
	CHECK_OK(starfa_param_set(algo, params, "cg-steps", text));
	CHECK_OK(starfa_param_set(algo, params, "tiles", "3"));
	CHECK_OK(starfa_param_set(algo, params, "seed", "9"));
	CHECK_OK(starfa_param_set(algo, params, "product", steps > 0 ? "fused" : "separate")); /* both paths */
	struct history h = {0};
	starfa_model *mdl = NULL;
	CHECK_OK(starfa_train(algo, params, coo, NULL, record, &h, &mdl));
	CHECK(mdl && mdl->kind == STARFA_MODEL_EXPLICIT && strcmp(mdl->algorithm, "sfa") == 0 && mdl->rank == k);
	CHECK(h.n == iters);

	double mu = 0;
	for (int64_t e = 0; e < S->nnz; e++)
		mu += S->val[e];
	mu /= (double)S->nnz;
	double *X = calloc((size_t)(m * k), sizeof(double)), *Y = malloc(sizeof(double) * (size_t)(n * k));
	CHECK(X && Y);
	uint64_t start = starfa_seed_stream(9, 13);
	const float scale = (float)(1.0 / sqrt((double)k));
	for (int64_t v = 0; v < n; v++) /* an item with no entries starts (and stays) at zero */
		for (int64_t d = 0; d < k; d++)
			Y[v * k + d] = T->rowptr[v + 1] > T->rowptr[v] ? scale * starfa_uniform_pm1(&start) : 0.0f;
	for (int64_t it = 0; it < iters; it++) {
		ref_half(S, mu, 0.12, k, X, Y, steps > 0 ? steps : -1);
		ref_half(T, mu, 0.12, k, Y, X, steps > 0 ? steps : -1);
		double sse = 0, reg = 0;
		for (int64_t u = 0; u < m; u++)
			for (int64_t e = S->rowptr[u]; e < S->rowptr[u + 1]; e++) {
				double pred = mu;
				for (int64_t d = 0; d < k; d++)
					pred += X[u * k + d] * Y[(int64_t)S->colind[e] * k + d];
				sse += (S->val[e] - pred) * (S->val[e] - pred);
			}
		for (int s = 0; s < 2; s++) {
			const starfa_csr *M = s ? T : S;
			const double *F = s ? Y : X;
			for (int64_t r = 0; r < M->nrows; r++)
				for (int64_t d = 0; d < k; d++)
					reg += 0.12 * (double)(M->rowptr[r + 1] > M->rowptr[r] ? M->rowptr[r + 1] - M->rowptr[r] : 1) *
					       F[r * k + d] * F[r * k + d];
		}
		const double want = (sse + reg) / (double)S->nnz;
		CHECK_MSG(fabs(h.loss[it] - want) <= 1e-4 * want, "iteration %lld: loss %.8g, reference %.8g", (long long)it + 1,
			  h.loss[it], want);
		CHECK_MSG(fabs(h.rmse[it] - sqrt(sse / (double)S->nnz)) <= 1e-4 * h.rmse[it] + 1e-6,
			  "iteration %lld: train rmse %.8g, reference %.8g", (long long)it + 1, h.rmse[it], sqrt(sse / (double)S->nnz));
		CHECK_MSG(it == 0 || h.loss[it] <= h.loss[it - 1] * (1 + 1e-5), "the loss rose at iteration %lld: %.8g -> %.8g",
			  (long long)it + 1, h.loss[it - 1], h.loss[it]);
	}
	for (int64_t i = 0; i < m * k; i++)
		CHECK_MSG(fabs(mdl->user_factors[i] - X[i]) <= 2e-3 * (1 + fabs(X[i])), "X[%lld] = %.7g, reference %.7g",
			  (long long)i, mdl->user_factors[i], X[i]);
	for (int64_t i = 0; i < n * k; i++)
		CHECK_MSG(fabs(mdl->item_factors[i] - Y[i]) <= 2e-3 * (1 + fabs(Y[i])), "Y[%lld] = %.7g, reference %.7g",
			  (long long)i, mdl->item_factors[i], Y[i]);
	for (int64_t d = 0; d < k; d++)
		CHECK_MSG(mdl->item_factors[5 * k + d] == 0.0f, "the item with no entries has factor %g", mdl->item_factors[5 * k + d]);
	CHECK(fabs(mdl->global_mean - mu) <= 1e-6 * mu);
	/* starfa_eval on the training entries gives the last train RMSE. */
	starfa_metrics met;
	CHECK_OK(starfa_eval(mdl, coo, 10, &met));
	CHECK_MSG(fabs(met.rmse - h.rmse[iters - 1]) <= 1e-4 * met.rmse, "eval rmse %.8g, training %.8g", met.rmse,
		  h.rmse[iters - 1]);
	CHECK(starfa_param_set(algo, params, "cg-steps", "0") == STARFA_EINVAL);
	free(X);
	free(Y);
	free(params);
	starfa_model_free(mdl);
	starfa_coo_free(coo);
	starfa_csr_free(S);
	starfa_csr_free(T);
	return 0;
}

TEST(sfa, cg_steps_match_dense_reference_cpu)
{
	return sfa_matches_reference(STARFA_WORKER_CPU, testing_seed() + 130, 2);
}

TEST(sfa, many_cg_steps_match_exact_als_cpu)
{
	return sfa_matches_reference(STARFA_WORKER_CPU, testing_seed() + 131, 0);
}

#ifdef STARFA_USE_CUDA
TEST(sfa_cuda, cg_steps_match_dense_reference_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return sfa_matches_reference(STARFA_WORKER_CUDA, testing_seed() + 130, 2);
}

TEST(sfa_cuda, many_cg_steps_match_exact_als_cuda)
{
	if (!gpu_available())
		SKIP("no CUDA device");
	return sfa_matches_reference(STARFA_WORKER_CUDA, testing_seed() + 131, 0);
}
#else
TEST(sfa_cuda, not_built)
{
	SKIP("built without CUDA");
}
#endif
