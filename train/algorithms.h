/* The algorithms of graphs/, for the table in train/algorithms.c. */
#ifndef STARFA_TRAIN_ALGORITHMS_H
#define STARFA_TRAIN_ALGORITHMS_H

#include "starfa.h"

extern const starfa_algorithm starfa_algorithm_als;  /* graphs/als.c: explicit ALS */
extern const starfa_algorithm starfa_algorithm_ials; /* graphs/als.c: implicit ALS */
extern const starfa_algorithm starfa_algorithm_sgd;  /* graphs/sgd.c: SGD matrix factorization */
extern const starfa_algorithm starfa_algorithm_ccd;  /* graphs/ccd.c: CCD++ */
extern const starfa_algorithm starfa_algorithm_lda;  /* graphs/lda.c: LDA by variational Bayes */

/* Helpers the algorithms share. */

/* Adds a column to an iteration's progress line and CSV log (ignored past STARFA_MAX_COLUMNS). */
static inline void starfa_progress_column(starfa_train_progress *p, const char *name, int digits, double value)
{
	if (p->ncolumns == STARFA_MAX_COLUMNS)
		return;
	p->columns[p->ncolumns] = name;
	p->digits[p->ncolumns] = digits;
	p->values[p->ncolumns++] = value;
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
