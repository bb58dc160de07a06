/* The Gram matrix G = ThetaᵀTheta of a dense row block (implicit ALS's YᵀY), OpenMP on the CPU: panels
 * of rows through the same register-blocked kernel as the hermitian codelet (cpu/panel.h). */
#include "cpu/gram.h"

#include "cpu/clones.h"
#include "cpu/panel.h"

#include <omp.h>
#include <stdlib.h>

/* C (kp x kp, upper blocks) = sum over rows [r0, r1) of theta_r theta_r^T, through panels P. */
STARFA_CPU_CLONES
static void gram_rows(int64_t r0, int64_t r1, const float *restrict theta, int64_t ld, int64_t k, float *P, float *C)
{
	const int64_t kp = starfa_panel_width(k);
	if (r0 == r1)
		memset(C, 0, (size_t)(kp * kp) * sizeof(float));
	for (int64_t start = r0; start < r1; start += STARFA_PANEL_CHUNK) {
		int64_t m = r1 - start < STARFA_PANEL_CHUNK ? r1 - start : STARFA_PANEL_CHUNK;
		for (int64_t i = 0; i < m; i++)
			starfa_panel_gather(P + i * kp, theta + (start + i) * ld, k, kp);
		starfa_panel_sum(m, kp, P, P, C, start == r0, 1);
	}
}

int starfa_cpu_gram(int64_t nrows, const float *theta, int64_t ld, int64_t k, int accumulate, float *G,
		    int nthreads)
{
	const int64_t kp = starfa_panel_width(k);
	int parts = nthreads > 1 ? nthreads : 1;
	size_t csize = (size_t)(kp * kp), psize = (size_t)(STARFA_PANEL_CHUNK * kp);
	float *C = aligned_alloc(64, (size_t)parts * csize * sizeof(float));
	float *P = aligned_alloc(64, (size_t)parts * psize * sizeof(float));
	if (!C || !P) {
		free(C);
		free(P);
		return -1;
	}
#pragma omp parallel for num_threads(parts) schedule(static, 1)
	for (int t = 0; t < parts; t++)
		gram_rows(nrows * t / parts, nrows * (t + 1) / parts, theta, ld, k, P + (size_t)t * psize,
			  C + (size_t)t * csize);
	/* The partial sums in thread order, then the upper triangle mirrored: the same G for any schedule. */
	for (int64_t a = 0; a < k; a++)
		for (int64_t c = a; c < k; c++) {
			float v = 0.0f;
			for (int t = 0; t < parts; t++)
				v += C[(size_t)t * csize + (size_t)(a * kp + c)];
			G[a * k + c] = (accumulate ? G[a * k + c] : 0.0f) + v;
			if (c != a)
				G[c * k + a] = G[a * k + c];
		}
	free(C);
	free(P);
	return 0;
}
