/* Splitting a CSR tile among threads by nonzeros rather than rows. */
#ifndef STARFA_CPU_PARTITION_H
#define STARFA_CPU_PARTITION_H

#include <omp.h>
#include <stdint.h>

/* Rows [*r0, *r1) for part `part` of `parts`: the part's share of the nonzeros begins
 * at the first row whose start offset reaches part/parts of them. */
static inline int64_t starfa_cpu_row_at_share(int64_t nrows, const uint32_t *rowptr, int64_t part, int64_t parts)
{
	if (part <= 0)
		return 0;
	if (part >= parts)
		return nrows;
	uint64_t target = (uint64_t)rowptr[nrows] * (uint64_t)part / (uint64_t)parts;
	int64_t lo = 0, hi = nrows; /* first row r with rowptr[r] >= target */
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		if (rowptr[mid] < target)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static inline void starfa_cpu_nnz_partition(int64_t nrows, const uint32_t *rowptr, int part, int parts,
					    int64_t *r0, int64_t *r1)
{
	*r0 = starfa_cpu_row_at_share(nrows, rowptr, part, parts);
	*r1 = starfa_cpu_row_at_share(nrows, rowptr, part + 1, parts);
}

#endif
