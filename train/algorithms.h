/* The algorithms of graphs/, for the table in train/algorithms.c. */
#ifndef STARFA_TRAIN_ALGORITHMS_H
#define STARFA_TRAIN_ALGORITHMS_H

#include "starfa.h"

extern const starfa_algorithm starfa_algorithm_als;  /* graphs/als.c: explicit ALS */
extern const starfa_algorithm starfa_algorithm_ials; /* graphs/als.c: implicit ALS */
extern const starfa_algorithm starfa_algorithm_sgd;  /* graphs/sgd.c: SGD matrix factorization */
extern const starfa_algorithm starfa_algorithm_ccd;  /* graphs/ccd.c: CCD++ */
extern const starfa_algorithm starfa_algorithm_lda;  /* graphs/lda.c: LDA by variational Bayes */
extern const starfa_algorithm starfa_algorithm_gap;  /* graphs/gap.c: GaP by MAP multiplicative updates */
extern const starfa_algorithm starfa_algorithm_klnmf; /* graphs/gap.c: KL-NMF (GaP without the prior) */
extern const starfa_algorithm starfa_algorithm_sfa;  /* graphs/sfa.c: SFA, ALS's equations by CG on SDDMM + SpMM */

/* Helpers the algorithms share. */

/* S's tiles on both grids for sweeps of SDDMM and SpMM at rank k (train/algorithms.c): `tiles` bands a
 * side, or with 0 as the planner says for an SDDMM sweep (split gets its choice), one band a worker where
 * it places nothing. row_band > 0 makes the row bands consecutive runs of that many rows (a band a
 * mini-batch of documents), keeping a placement only when it is the GPUs alone. The bands are clamped
 * to the matrix's rows and columns, and a placement with no more bands than CPU bands (a tiny matrix)
 * is dropped. */
int starfa_sweep_tiles(const starfa_csr *c, int64_t k, int64_t tiles, int64_t row_band, starfa_split split[2],
		       starfa_tiled **out);

/* Σ_r scale w_r Σ_{d<k} F[r ld + col0 + d]^2 over `rows` rows (w_r = weight[r weight_stride], or 1 without
 * weight): the regularisation of a side's factors, summed in chunks on the CPU workers (or the host's
 * threads: starfa_host_parallel), the same bits either way. 0, or an error from the runtime. */
int starfa_row_norms(const float *F, int64_t rows, int64_t ld, int64_t col0, int64_t k, const float *weight,
		     int64_t weight_stride, double scale, double *out);

/* Σ_{t < nrows, t != skip} Σ_{r < len} w_r F[t len + r]^2, w_r = weight[r] (skip -1: every row): the
 * regularisation of a side's factors stored feature-major (CCD++'s, weighted by each row's entries),
 * summed in chunks of columns on the CPU workers (or the host's threads: starfa_host_parallel), the
 * same bits either way. 0, or an error from the runtime. */
int starfa_column_norms(const float *F, int64_t nrows, int64_t len, int64_t skip, const float *weight, double *out);

/* Ranking metrics at k of factors X (users, blocked along S's rows) and Y (items, along its columns) in the
 * task graph: every test user's top k of each column band by starfa_insert_top_k (on whichever workers the
 * bands are placed), the lists brought to main memory and merged (starfa_lists_metrics). f: the factors'
 * view (sizes, kind: implicit), test: the test entries matched to S's rows and columns, seen: S's entries.
 * *ranker keeps the active users and the lists from one call to the next, for the same S and test (NULL at
 * first; free it with starfa_ranker_free). */
struct starfa_factors;
struct starfa_matched;
struct starfa_ranker;
/* Whether iteration p->iteration of at most iters computes the test metrics, with them every `every`
 * iterations: the first, every every-th, the last and a converged one (p->converged set) do. */
int starfa_test_due(const starfa_train_progress *p, int64_t iters, int64_t every);
/* The help of the algorithms' eval-every parameter, which starfa_test_due reads. */
#define STARFA_EVAL_EVERY_HELP                                                                           \
	"test metrics after every Nth iteration only (and the first, the last, and a converged one)"
/* An explicit model's test RMSE with the entries in the graph: those whose user and item are both
 * known (matched), tiled like the training grid S (starfa_tiled_create_like), their squared errors
 * against the augmented blocks' product plus the mean by starfa_reduce_sqerr (a task a row band); the others
 * (an unknown user or item) scored on the host, the factors synced for them. */
struct starfa_test_grid {
	starfa_tiled *T;
	int64_t *unknown, nunknown; /* the matched entries scored on the host */
	starfa_sums *bands;         /* a slot a row band of T, written by its sqerr_band task */
	double *slots;
	int pending; /* the bands' tasks are submitted and not yet read */
};
/* From the test entries matched to S's rows and columns (their cold count taken, starfa_matched_count_cold). */
int starfa_test_grid_create(const starfa_tiled *S, const struct starfa_matched *test, struct starfa_test_grid *g);
void starfa_test_grid_free(struct starfa_test_grid *g);
/* Submits the bands' tasks of the model A·Bᵀ + mu without waiting for them, so that they run beside the
 * caller's other tasks (e.g. the training loss, before its read-back); starfa_test_grid_metrics reads
 * them. A caller whose factors change before that (an epoch undone) submits again or discards. */
int starfa_test_grid_submit(struct starfa_test_grid *g, const starfa_dense *A, const starfa_dense *B, double mu);
static inline void starfa_test_grid_discard(struct starfa_test_grid *g)
{
	g->pending = 0; /* the next submit overwrites the slots; the read waits for every task writing them */
}
/* The metrics starfa_factors_metrics gives an explicit model (its RMSE, the entries and the cold count),
 * A and B the augmented factor blocks (A·Bᵀ + mu the predictions) and f their view in main memory: from
 * the tasks submitted by starfa_test_grid_submit, or submitted now. */
int starfa_test_grid_metrics(struct starfa_test_grid *g, const struct starfa_matched *test, starfa_dense *A,
			     starfa_dense *B, const struct starfa_factors *f, int64_t k, starfa_metrics *out);
int starfa_rank_test(const starfa_tiled *S, const starfa_dense *X, const starfa_dense *Y, const struct starfa_factors *f,
		     const struct starfa_matched *test, const starfa_csr *seen, int64_t k, struct starfa_ranker **ranker,
		     starfa_metrics *out);
void starfa_ranker_free(struct starfa_ranker *r);

/* Topics over the words, as a topic model (kind STARFA_MODEL_TOPIC: LDA's λ, Dirichlet prior `prior` on
 * the mixtures) or a count model (STARFA_MODEL_NONNEG: GaP's or KL-NMF's Λ, Gamma(prior, 1/rate) on the
 * scores): words x k, column t topic t. */
struct starfa_topic_source {
	starfa_model_kind kind;
	const float *words;
	int64_t W, K;
	double prior, rate;
};

/* Each document's entries, sorted by word id: the 1st, 3rd, ... into observed, the 2nd, 4th, ... into
 * evaluated (both with docs' dimensions); *empty gets the documents with no entries (graphs/lda.c). */
int starfa_documents_split(const starfa_csr *docs, starfa_csr **observed, starfa_csr **evaluated, int64_t *empty);
/* The document-completion perplexity: each document's mixture inferred from observed, then
 * exp(-Σ c log(θ_d·β_w) / Σ c) over evaluated's tokens (NaN when it has none). */
int starfa_documents_perplexity(const struct starfa_topic_source *src, const starfa_csr *observed,
				const starfa_csr *evaluated, int64_t max_iters, double tol, double *perplexity,
				int64_t *iterations);
/* GaP's score update with the word weights L (words x K) fixed, from each document's length spread evenly,
 * until the mean absolute change of the scores is under tol (0: max_iters) (graphs/gap.c). S: c's tiles;
 * X: c's documents x K. */
int starfa_gap_infer(const starfa_tiled *S, const starfa_csr *c, const float *L, int64_t K, double shape, double rate,
		     int64_t max_iters, double tol, float *X, int64_t *iterations);

/* Adds a column to an iteration's progress line and CSV log (ignored past STARFA_MAX_COLUMNS). */
static inline void starfa_progress_column(starfa_train_progress *p, const char *name, int digits, double value)
{
	if (p->ncolumns == STARFA_MAX_COLUMNS)
		return;
	p->columns[p->ncolumns] = name;
	p->digits[p->ncolumns] = digits;
	p->values[p->ncolumns++] = value;
}

/* The first state of the splitmix64 stream of (seed, salt), for starfa_uniform_pm1. The seed and the salt
 * go through splitmix64's mixing: a state of seed * 0x9e3779b97f4a7c15 + salt (the stream's own
 * increment) would make seed s + 1's stream seed s's shifted by one draw, so that runs over seeds
 * 1, 2, 3, ... would all start from nearly the same draws. */
static inline uint64_t starfa_seed_stream(uint64_t seed, uint64_t salt)
{
	uint64_t z = seed * 0xd1b54a32d192ed03ull + salt * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [-1, 1) from a splitmix64 stream: the same initial factors for a seed on any machine. */
static inline float starfa_uniform_pm1(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (float)((z >> 40) * (2.0 / 16777216.0) - 1.0);
}

#endif
