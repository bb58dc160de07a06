/* The test driver's API: each test registers itself with TEST(group, name) and returns
 * 0 (pass), 77 (skipped: nothing here can run it) or anything else (fail).
 * Automake runs one driver process per group (tests/<group>.t). */
#ifndef STARFA_TESTING_H
#define STARFA_TESTING_H

#include <config.h>

#include "starfa.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#define TEST_SKIPPED 77

void testing_register(const char *group, const char *name, int (*fn)(void));
void testing_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void testing_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define TEST(group, name)                                                                      \
	static int test_##group##_##name(void);                                                \
	__attribute__((constructor)) static void register_##group##_##name(void)               \
	{                                                                                      \
		testing_register(#group, #name, test_##group##_##name);                        \
	}                                                                                      \
	static int test_##group##_##name(void)

#define CHECK(cond)                                                                            \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			testing_fail(__FILE__, __LINE__, "check failed: %s", #cond);           \
			return 1;                                                              \
		}                                                                              \
	} while (0)

#define CHECK_MSG(cond, ...)                                                                   \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			testing_fail(__FILE__, __LINE__, __VA_ARGS__);                         \
			return 1;                                                              \
		}                                                                              \
	} while (0)

/* A starfa call that must succeed. */
#define CHECK_OK(call)                                                                         \
	do {                                                                                   \
		int check_rc_ = (call);                                                        \
		if (check_rc_ != 0) {                                                          \
			testing_fail(__FILE__, __LINE__, "%s returned %d: %s", #call, check_rc_, \
				     starfa_last_error());                                     \
			return 1;                                                              \
		}                                                                              \
	} while (0)

#define SKIP(...)                                                                              \
	do {                                                                                   \
		testing_note(__VA_ARGS__);                                                     \
		return TEST_SKIPPED;                                                           \
	} while (0)

/* The seed of this run (STARFA_TEST_SEED, else drawn from the clock and printed), so
 * every run draws fresh inputs and a failure can be replayed. */
uint64_t testing_seed(void);
/* STARFA_TEST_QUICK set (and not "0"): tests that honour it run a smaller subset of their cases, for the
 * runs under compute-sanitizer's racecheck and initcheck, which are 100-1000x slower. */
int testing_quick(void);
/* SplitMix64 (Steele, Lea & Flood 2014) at counter index + 1 from seed, as its paper states it: the
 * reference of starfa_task_dense_uniform's draws. */
uint64_t testing_splitmix64(uint64_t seed, uint64_t index);
/* xorshift64*: uniform in [0, 1) and in [0, n). */
double testing_uniform(uint64_t *state);
uint64_t testing_below(uint64_t *state, uint64_t n);
/* Fills with uniform values in [-1, 1). */
void testing_fill_random(float *x, size_t n, uint64_t *state);
/* Fills with NaN, so an element a kernel forgot to write fails the comparison. */
void testing_poison(float *x, size_t n);

/* A random m x n matrix with about nnz distinct entries (values in [-1, 1)). With
 * skew > 0, row and column degrees follow a power law (exponent skew), as real ratings
 * and graphs do; a fraction of rows and columns stay empty. */
starfa_csr *testing_random_csr(int64_t m, int64_t n, int64_t nnz, double skew, uint64_t *state);
/* An m x n matrix of about nnz entries (values in [0.5, 1.5)) for the band tasks' tests: most in the
 * first half of the rows and columns, the rest in rows [m/2, 0.6 m) and the second half of the columns.
 * With bands cut by rows and columns (row_cost and col_cost 1e6), two bands a side give a band whose
 * first tile is empty and three give an empty band. NULL when out of memory. */
starfa_csr *testing_band_csr(int64_t m, int64_t n, int64_t nnz, uint64_t *state);
/* The tiles j of band `band` of t's grid on `side` that the per-tile loops of graphs/ops.c
 * (FOR_BAND_TILES) submit, in order, into js (room for the grid's columns): the non-empty ones, or with
 * zero_empty the last tile when every one is empty (its task zeroes the band's output). The first
 * overwrites the output, the others add to it. Returns how many. */
int64_t testing_band_order(const starfa_tiled *t, starfa_side side, int64_t band, int zero_empty, int64_t *js);
/* Whether a and b, n floats, are the same bits (exact), or within 1e-4 relative (1e-4 absolute near 0)
 * with NaN in neither: a band task against the per-tile tasks on one kind of worker, the same kernels,
 * on a CUDA worker in a summation order of their own (atomics, SpMM's kernel chosen by timing). */
int testing_band_same(const float *a, const float *b, int64_t n, int exact);
/* A's P x P grid (with the transposed one) for the band-task tests, or NULL (the reason printed): on
 * testing_band_csr's matrix, 2 bands a side must give a band whose first tile is empty but not all its
 * tiles, and 3 a band with no entries, the shapes the band tasks must handle. */
starfa_tiled *testing_band_grid(const starfa_csr *A, int64_t P);
/* The same entries as a coordinate list (row by row), for starfa_train; NULL when out of memory. */
starfa_coo *testing_coo_of(const starfa_csr *S);
/* An explicit model's regularized squared error on `train`, in double, written out here apart from the
 * library's: sum over the entries of (r - mu - b_u - c_i - x_u·y_i)^2, plus for each user u
 * w_u (lambda |x_u|^2 + lambda_bias b_u^2) and each item the same with its weight, where w_u is
 * count_weight times u's entries (1 for a row without any) plus flat. ALS-WR: flat 0, count_weight 1,
 * lambda = lambda_bias = the regularization; SGD: flat 1, count_weight 0, its two lambdas. NAN when
 * out of memory or when the model does not match train's shape. */
double testing_explicit_objective(const starfa_model *m, const starfa_coo *train, double lambda, double lambda_bias,
				  double flat, double count_weight);
/* test's entries, in reverse order, in a matrix one row and one column larger, plus an entry of that new user (on item 0) and
 * one of that new item (by user 0): two entries no training run on test's shape knows. NULL when out of
 * memory. */
starfa_coo *testing_with_unknown_ids(const starfa_coo *test);
/* A bag-of-words corpus: testing_random_csr's pattern, counts 1..4, and document 2 with no words (real
 * corpora have them); *csr gets the matrix, the result its entries. */
starfa_coo *testing_corpus(int64_t D, int64_t W, int64_t nnz, uint64_t *rng, starfa_csr **csr);
/* Document completion's halves of S, written out here apart from the library's: each row's entries in
 * CSR order (sorted by column), the 1st, 3rd, ... into *observed, the 2nd, 4th, ... into *evaluated.
 * Returns 0, or -1 out of memory. */
int testing_halves(const starfa_csr *S, starfa_coo **observed, starfa_coo **evaluated);

/* ψ(x) in double by the recurrence up to 20 and the asymptotic series: a reference independent of
 * starfa's own. */
double testing_digamma(double x);

/* Starts StarPU once for this process (all workers, quiet); shut down at exit.
 * Returns 0, or a starfa error code. */
int testing_runtime(void);
/* The same with these workers and scheduler; restarts StarPU when the running one was
 * started with other options, so a test's worker set never depends on the tests before it. */
int testing_runtime_with(const starfa_options *opts);

/* The same with one kind of worker alone (CPU cores or GPUs), so that a test body checks that kind's
 * kernels through the task graph. */
int testing_runtime_only(starfa_worker_kind kind);
/* Stops the runtime a testing_runtime* call started (the next one starts it afresh, reading the
 * environment again). */
void testing_runtime_stop(void);
/* CPU workers alone, ncpus of them (more than the cores are fine: they then share them). */
int testing_runtime_cpus(int ncpus);

/* Writes text to a fresh file in the test scratch folder and returns its path
 * (valid until the next call). */
const char *testing_write_file(const char *name, const char *text, size_t size);
/* Puts environment variable `name` back as it was (saved: its old value, or NULL where it was unset)
 * and frees saved. */
void testing_env_restore(const char *name, char *saved);
/* Stops the runtime and points StarPU's models at a folder of their own in the scratch folder
 * (STARPU_HOME `name`, STARPU_PERF_MODEL_DIR unset), so that the models a test writes and reads start
 * empty; testing_home_restore stops the runtime and puts both variables back. */
void testing_home_private(const char *name);
/* S tiled by o, with U (S's rows) and V (its columns) registered over it, w floats a row, and a sums
 * object of one slot: what an SGD pass takes. Returns the first failing call's code; what was made is
 * left in the outputs (NULL where not made) for the caller to free. */
int testing_sgd_operands(const starfa_csr *S, const starfa_tiling_options *o, float *U, float *V, int64_t w,
			 starfa_tiled **t, starfa_dense **dU, starfa_dense **dV, starfa_sums **sse);
/* Frees what testing_sgd_operands made (NULL ones skipped). */
void testing_sgd_operands_free(starfa_tiled *t, starfa_dense *dU, starfa_dense *dV, starfa_sums *sse);
void testing_home_restore(void);

#endif
