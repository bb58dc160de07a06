/* The smallest complete starfa program: load a matrix, tile it, run SDDMM on every
 * worker, check the result.   usage: sddmm_tiles FILE [RANK] */
#include <starfa.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE [RANK]\n", argv[0]);
		return 2;
	}
	int64_t k = argc > 2 ? atoll(argv[2]) : 32;
	if (k < 1 || k > 4096) {
		fprintf(stderr, "RANK must be in [1, 4096]\n");
		return 2;
	}

	starfa_coo *coo = NULL;
	starfa_csr *S = NULL;
	if (starfa_read(argv[1], STARFA_FORMAT_AUTO, &coo) || starfa_csr_from_coo(coo, &S)) {
		fprintf(stderr, "%s\n", starfa_last_error());
		return 1;
	}
	starfa_coo_free(coo);

	float *A = malloc(sizeof(float) * (size_t)(S->nrows * k));
	float *B = malloc(sizeof(float) * (size_t)(S->ncols * k));
	float *P = malloc(sizeof(float) * (size_t)S->nnz);
	if (!A || !B || !P)
		return 1;
	for (int64_t i = 0; i < S->nrows * k; i++)
		A[i] = (float)rand() / RAND_MAX - 0.5f;
	for (int64_t i = 0; i < S->ncols * k; i++)
		B[i] = (float)rand() / RAND_MAX - 0.5f;

	/* Tiles and row blocks are StarPU handles: StarPU moves them to whichever worker runs a task. */
	starfa_tiled *tiles = NULL;
	starfa_dense *a = NULL, *b = NULL;
	starfa_sparse_values *p = NULL;
	starfa_check_report report;
	int rc = starfa_init(NULL) || starfa_tiled_create(S, NULL, &tiles) ||
		 starfa_dense_create(tiles, STARFA_ROWS, A, k, &a) || starfa_dense_create(tiles, STARFA_COLS, B, k, &b) ||
		 starfa_sparse_values_create(tiles, STARFA_ROWS, &p) || starfa_insert_sddmm(tiles, a, b, STARFA_SDDMM_PATTERN, p) ||
		 starfa_wait() || starfa_sparse_values_gather(p, P) ||
		 starfa_check_sddmm(S, A, B, k, STARFA_SDDMM_PATTERN, P, &report);
	if (rc)
		fprintf(stderr, "%s\n", starfa_last_error());
	else
		printf("%lld products checked, worst error %.3g of the float32 bound\n", (long long)report.checked,
		       report.max_error);

	starfa_sparse_values_free(p);
	starfa_dense_free(a);
	starfa_dense_free(b);
	starfa_tiled_free(tiles);
	starfa_shutdown();
	starfa_csr_free(S);
	free(A);
	free(B);
	free(P);
	return rc ? 1 : 0;
}
