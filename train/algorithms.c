/* The algorithm table: `starfa train --algo NAME` and starfa_algorithm_find look here. A new
 * algorithm is a file in graphs/ that defines its starfa_algorithm, and one row below. */
#include "runtime/internal.h"
#include "train/algorithms.h"

#include <string.h>

static const starfa_algorithm *const table[] = {
	&starfa_algorithm_als,
	&starfa_algorithm_ials,
	&starfa_algorithm_sgd,
	&starfa_algorithm_ccd,
	&starfa_algorithm_sfa,
	&starfa_algorithm_lda,
	&starfa_algorithm_gap,
	&starfa_algorithm_klnmf,
	NULL,
};

const starfa_algorithm *const *starfa_algorithms(void)
{
	return table;
}

const starfa_algorithm *starfa_algorithm_find(const char *name)
{
	for (int i = 0; name && table[i]; i++)
		if (strcmp(table[i]->name, name) == 0)
			return table[i];
	return NULL;
}
