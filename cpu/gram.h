/* The Gram matrix of a dense row block, OpenMP on the CPU (no StarPU here). */
#ifndef STARFA_CPU_GRAM_H
#define STARFA_CPU_GRAM_H

#include <stdint.h>

/* G = (accumulate ? G : 0) + sum_{r < nrows} theta_r theta_r^T, theta_r = theta[r * ld + 0 .. k); G is
 * k x k, full symmetric, row-major. Runs on nthreads OpenMP threads over row ranges, each summing its
 * own partial Gram matrix. Returns 0, or -1 when scratch memory cannot be allocated (G unchanged). */
int starfa_cpu_gram(int64_t nrows, const float *theta, int64_t ld, int64_t k, int accumulate, float *G,
		    int nthreads);

#endif
