/* Scoring factors, shared by model/model.c, model/eval.c and graphs/als.c: a view of the factors
 * as they lie (a finished model, or training's augmented blocks), and test entries matched to them. */
#ifndef STARFA_MODEL_MODEL_H
#define STARFA_MODEL_MODEL_H

#include "runtime/internal.h"

/* Factors with strides: user u's vector is U[u * ldu + 0 .. rank), its bias ub[u * ub_stride] (ub NULL:
 * none), likewise for items. The kind decides how they are evaluated (and, for a user they do not know,
 * recommended from); mu and the biases are an explicit model's only. */
struct starfa_factors {
	starfa_model_kind kind;
	int64_t nusers, nitems, rank;
	const float *U, *V, *ub, *ib;
	int64_t ldu, ldv, ub_stride, ib_stride;
	double mu;
};

void starfa_model_factors(const starfa_model *m, struct starfa_factors *f);

/* A model holding copies of the factors (and biases, when f has them) as they lie in f, of f's kind,
 * trained by `algorithm`, with copies of the training matrix's ids; it takes *seen (the training entries,
 * set to NULL). lambda and alpha are recorded. */
int starfa_model_from_factors(const struct starfa_factors *f, const char *algorithm, const starfa_coo *train,
			      starfa_csr **seen, double lambda, double alpha, starfa_model **out);

/* The score of (u, i), u or i -1 when unknown (then the mean and the biases there are). */
static inline float starfa_factors_score(const struct starfa_factors *f, int64_t u, int64_t i)
{
	double s = f->mu;
	if (u >= 0 && f->ub)
		s += f->ub[u * f->ub_stride];
	if (i >= 0 && f->ib)
		s += f->ib[i * f->ib_stride];
	if (u >= 0 && i >= 0) {
		const float *x = f->U + u * f->ldu, *y = f->V + i * f->ldv;
		float dot = 0.0f;
		for (int64_t d = 0; d < f->rank; d++)
			dot += x[d] * y[d];
		s += dot;
	}
	return (float)s;
}

/* Test entries in a model's numbering: user[e] and item[e] are -1 where the id is unknown. */
struct starfa_matched {
	int64_t n;
	int32_t *user, *item;
	const float *val; /* the test matrix's own values */
	/* How many entries are cold against cold_seen's training entries, counted once by
	 * starfa_matched_count_cold (neither changes between a training run's evaluations); cold_seen NULL:
	 * not counted, the metrics count them. */
	const starfa_csr *cold_seen;
	int64_t cold;
	/* The known entries grouped by user, once, by starfa_matched_group_users (the ranking metrics read them
	 * after every iteration): user u's distinct items ascending from by_user[start[u]], then -1 up to
	 * start[u + 1]. The metrics group them anew where start is NULL or grouped_users is not the model's
	 * user count. */
	int64_t grouped_users;
	int64_t *start;
	int32_t *by_user;
};

/* Matches test's entries to users and items by id when test and the maps have ids, else by index
 * (indices beyond nusers or nitems are unknown). */
int starfa_match_entries(const starfa_coo *test, const starfa_idmap *users, const starfa_idmap *items,
			 int64_t nusers, int64_t nitems, struct starfa_matched *out);
void starfa_matched_free(struct starfa_matched *m);
/* Counts m's cold entries against seen (the training entries, nitems columns) for the metrics to reuse
 * while they are given the same seen. 0, or an error from the runtime. */
int starfa_matched_count_cold(struct starfa_matched *m, const starfa_csr *seen, int64_t nitems);
/* Groups m's known entries by user (nusers of them) for the ranking metrics to reuse while the model has
 * that many users. 0, STARFA_ENOMEM, or an error from the runtime. */
int starfa_matched_group_users(struct starfa_matched *m, int64_t nusers);

/* RMSE (explicit and non-negative kinds) or ranking metrics at k (implicit, leaving seen's items out of
 * the rankings; seen may be NULL), as starfa_eval; STARFA_EINVAL for topic models. */
int starfa_factors_metrics(const struct starfa_factors *f, const struct starfa_matched *test, const starfa_csr *seen,
			   int64_t k, starfa_metrics *out);

/* starfa_eval on the host: the test entries matched, then starfa_factors_metrics (implicit models rank
 * every item for every test user on the host's threads or CPU workers, starfa_host_parallel). */
int starfa_eval_host(const starfa_model *m, const starfa_coo *test, int64_t k, starfa_metrics *out);

/* Every user's top k in column bands, as starfa_task_top_k writes them: rows[j] holds users x ld floats,
 * band j's columns counted from col0[j]. */
struct starfa_top_k_lists {
	int64_t n, ld;
	const float *const *rows;
	const int64_t *col0;
};

/* starfa_factors_metrics for an implicit model whose rankings were made elsewhere (f gives the sizes and the
 * kind): each test user's lists merged into its top k. */
int starfa_lists_metrics(const struct starfa_factors *f, const struct starfa_top_k_lists *lists,
			 const struct starfa_matched *test, const starfa_csr *seen, int64_t k, starfa_metrics *out);

#endif
