/* KL-NMF: non-negative factors W (rows x K) and H (columns x K) of a matrix of counts S, fitted by
 * Lee and Seung's multiplicative updates for the generalized Kullback-Leibler divergence ("Algorithms
 * for non-negative matrix factorization", NIPS 2000), the core of GaP. Written with starfa's public
 * API alone, as a new algorithm would be: every step is a task on a tile or a block, run by StarPU on
 * whichever CPU core or GPU it picks.
 *
 * One iteration:
 *   P = S ⊘ max(ε, SDDMM(W, H))                     on the row-side tiles
 *   W ← W ∘ (P·H) ⊘ colsum(H)
 *   P = S ⊘ max(ε, SDDMM(H, W))                     the same quotient on the transposed tiles
 *   H ← H ∘ (Pᵀ·W) ⊘ colsum(W)
 * and the divergence D(S ‖ W·Hᵀ) = Σ_nz (s log(s / y) − s) + Σ_all y, y = (W·Hᵀ)_ij, whose second sum is
 * colsum(W)·colsum(H): no pass over the zeros. Each update never increases D.
 *
 *   usage: klnmf FILE K ITERS      (any format starfa reads; values must be counts >= 0)
 * prints one line per iteration ending in kl_per_token=D / Σ s. */
#include <starfa.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EPS 1e-12f /* the floor of the denominators: a zero prediction or column sum divides nothing */

/* Uniform in [0, 1) from a splitmix64 stream: the same start on every machine. */
static double uniform(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

static double seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct klnmf {
	starfa_tiled *S;
	int64_t k;
	starfa_dense *W, *H, *WH, *HW; /* factors; P·H (rows x K) and Pᵀ·W (columns x K) */
	starfa_sparse_values *P, *PT;  /* the quotient on both grids */
	starfa_vector *cW, *cH;        /* column sums */
	float *sums_W, *sums_H;
};

/* Step: a call that must succeed (its error is printed by the caller). */
#define TRY(call)                                                                                  \
	do {                                                                                       \
		if ((call) != 0)                                                                   \
			return -1;                                                                 \
	} while (0)

/* D(S ‖ W·Hᵀ): the nonzeros' terms reduced by tasks, plus colsum(W)·colsum(H). */
static int divergence(struct klnmf *n, double *out)
{
	double nz = 0, all = 0;
	TRY(starfa_insert_sddmm(n->S, n->W, n->H, STARFA_SDDMM_PATTERN, n->P));
	TRY(starfa_reduce_values(n->P, STARFA_REDUCE_KL, EPS, NULL, &nz));
	TRY(starfa_insert_dense_colsum(n->W, n->cW));
	TRY(starfa_insert_dense_colsum(n->H, n->cH));
	TRY(starfa_vector_read(n->cW, n->sums_W));
	TRY(starfa_vector_read(n->cH, n->sums_H));
	for (int64_t d = 0; d < n->k; d++)
		all += (double)n->sums_W[d] * n->sums_H[d];
	*out = nz + all;
	return 0;
}

/* One iteration of the multiplicative updates, as task graphs; waits for it. */
static int iterate(struct klnmf *n)
{
	/* W ← W ∘ (P·H) ⊘ colsum(H), P = S ⊘ max(ε, W·Hᵀ) on the row side (S's own values: X NULL). */
	TRY(starfa_insert_sddmm(n->S, n->W, n->H, STARFA_SDDMM_PATTERN, n->P));
	TRY(starfa_insert_values_map(n->P, STARFA_VALUES_QUOTIENT, EPS, 0.0f, NULL));
	TRY(starfa_insert_spmm_values(n->S, STARFA_ROWS, n->P, n->H, n->WH));
	TRY(starfa_insert_dense_colsum(n->H, n->cH));
	TRY(starfa_insert_dense_map(n->W, STARFA_DENSE_MUL, 0.0f, 0.0f, n->WH, NULL));
	TRY(starfa_insert_dense_map(n->W, STARFA_DENSE_DIV, EPS, 0.0f, NULL, n->cH));
	/* H ← H ∘ (Pᵀ·W) ⊘ colsum(W), with P recomputed from the new W on the transposed tiles. */
	TRY(starfa_insert_sddmm(n->S, n->H, n->W, STARFA_SDDMM_PATTERN, n->PT));
	TRY(starfa_insert_values_map(n->PT, STARFA_VALUES_QUOTIENT, EPS, 0.0f, NULL));
	TRY(starfa_insert_spmm_values(n->S, STARFA_COLS, n->PT, n->W, n->HW));
	TRY(starfa_insert_dense_colsum(n->W, n->cW));
	TRY(starfa_insert_dense_map(n->H, STARFA_DENSE_MUL, 0.0f, 0.0f, n->HW, NULL));
	TRY(starfa_insert_dense_map(n->H, STARFA_DENSE_DIV, EPS, 0.0f, NULL, n->cW));
	return starfa_wait();
}

static int run(const starfa_csr *csr, int64_t k, int64_t iters)
{
	double total = 0;
	for (int64_t e = 0; e < csr->nnz; e++) {
		if (!(csr->val[e] >= 0) || !isfinite(csr->val[e])) {
			fprintf(stderr, "klnmf: value %g is not a count (KL-NMF needs values >= 0)\n", csr->val[e]);
			return 1;
		}
		total += csr->val[e];
	}
	if (!(total > 0)) {
		fprintf(stderr, "klnmf: every value is zero: nothing to factor\n");
		return 1;
	}
	const int64_t m = csr->nrows, cols = csr->ncols;
	float *W = malloc(sizeof(float) * (size_t)(m * k)), *H = malloc(sizeof(float) * (size_t)(cols * k));
	float *WH = malloc(sizeof(float) * (size_t)(m * k)), *HW = malloc(sizeof(float) * (size_t)(cols * k));
	struct klnmf n = {.k = k};
	n.sums_W = malloc(sizeof(float) * (size_t)k);
	n.sums_H = malloc(sizeof(float) * (size_t)k);
	if (!W || !H || !WH || !HW || !n.sums_W || !n.sums_H) {
		fprintf(stderr, "klnmf: out of memory\n");
		return 1;
	}
	/* Start where W·Hᵀ has the data's mean: entries (0.5 + u) * scale, K * scale^2 = mean. */
	uint64_t state = 1;
	double scale = sqrt(total / ((double)m * (double)cols * (double)k));
	for (int64_t i = 0; i < m * k; i++)
		W[i] = (float)((0.5 + uniform(&state)) * scale);
	for (int64_t i = 0; i < cols * k; i++)
		H[i] = (float)((0.5 + uniform(&state)) * scale);

	/* Both grids: the H update reads the quotient on the transposed tiles. */
	starfa_tiling_options tiling = {0, 0, 1, 0, 0};
	int rc = starfa_tiled_create(csr, &tiling, &n.S);
	if (!rc)
		rc = starfa_dense_create(n.S, STARFA_ROWS, W, k, &n.W) || starfa_dense_create(n.S, STARFA_COLS, H, k, &n.H) ||
		     starfa_dense_create(n.S, STARFA_ROWS, WH, k, &n.WH) ||
		     starfa_dense_create(n.S, STARFA_COLS, HW, k, &n.HW) ||
		     starfa_sparse_values_create(n.S, STARFA_ROWS, &n.P) ||
		     starfa_sparse_values_create(n.S, STARFA_COLS, &n.PT) || starfa_vector_create(k, &n.cW) ||
		     starfa_vector_create(k, &n.cH);
	if (!rc) {
		printf("klnmf: %" PRId64 " x %" PRId64 ", %" PRId64 " nonzeros, %.0f tokens, rank %" PRId64
		       ", tiles %" PRId64 "x%" PRId64 ", workers: %d cpu, %d cuda\n",
		       m, cols, csr->nnz, total, k, starfa_tiled_row_tiles(n.S), starfa_tiled_col_tiles(n.S),
		       starfa_worker_count(STARFA_WORKER_CPU), starfa_worker_count(STARFA_WORKER_CUDA));
		double d = 0;
		rc = divergence(&n, &d);
		if (!rc)
			printf("iter   0  kl_per_token=%.9g\n", d / total);
	}
	for (int64_t it = 1; !rc && it <= iters; it++) {
		double t0 = seconds(), d = 0;
		rc = iterate(&n);
		double t = seconds() - t0;
		if (!rc)
			rc = divergence(&n, &d);
		if (!rc)
			printf("iter %3" PRId64 "  %8.4f s  kl_per_token=%.9g\n", it, t, d / total);
		fflush(stdout);
	}
	if (rc)
		fprintf(stderr, "klnmf: %s\n", starfa_last_error());
	starfa_wait();
	starfa_vector_free(n.cW);
	starfa_vector_free(n.cH);
	starfa_sparse_values_free(n.P);
	starfa_sparse_values_free(n.PT);
	starfa_dense_free(n.W);
	starfa_dense_free(n.H);
	starfa_dense_free(n.WH);
	starfa_dense_free(n.HW);
	starfa_tiled_free(n.S);
	free(W);
	free(H);
	free(WH);
	free(HW);
	free(n.sums_W);
	free(n.sums_H);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s FILE K ITERS\n", argv[0]);
		return 2;
	}
	char *end1, *end2;
	long long k = strtoll(argv[2], &end1, 10), iters = strtoll(argv[3], &end2, 10);
	if (*end1 || *end2 || k < 1 || k > 4096 || iters < 0 || iters > 1000000) {
		fprintf(stderr, "klnmf: K must be in [1, 4096] and ITERS in [0, 1000000]\n");
		return 2;
	}
	starfa_coo *coo = NULL;
	starfa_csr *S = NULL;
	if (starfa_read(argv[1], STARFA_FORMAT_AUTO, &coo) || starfa_csr_from_coo(coo, &S)) {
		fprintf(stderr, "klnmf: %s\n", starfa_last_error());
		starfa_coo_free(coo);
		return 1;
	}
	starfa_coo_free(coo);
	starfa_options opts;
	starfa_options_default(&opts); /* every CPU core and GPU */
	opts.silent = 1;
	int rc = 1;
	if (starfa_init(&opts) != 0) {
		fprintf(stderr, "klnmf: %s\n", starfa_last_error());
	} else {
		rc = run(S, k, iters);
		starfa_shutdown();
	}
	starfa_csr_free(S);
	return rc;
}
