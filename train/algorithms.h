/* The algorithms of graphs/, for the table in train/algorithms.c. */
#ifndef STARFA_TRAIN_ALGORITHMS_H
#define STARFA_TRAIN_ALGORITHMS_H

#include "starfa.h"

extern const starfa_algorithm starfa_algorithm_als;  /* graphs/als.c: explicit ALS */
extern const starfa_algorithm starfa_algorithm_ials; /* graphs/als.c: implicit ALS */
extern const starfa_algorithm starfa_algorithm_sgd;  /* graphs/sgd.c: SGD matrix factorization */

#endif
