/* What the CUDA kernels' per-thread caches (cuSPARSE plans, timed choices, dense-row orders) share:
 * picking the entry to forget. Internal, C++ only. */
#ifndef STARFA_GPU_LRU_H
#define STARFA_GPU_LRU_H

/* The index of the least recently used of n > 0 entries (used(i): the cache's clock at entry i's last use). */
template <typename Used> inline int least_recent(int n, Used used)
{
	int oldest = 0;
	for (int i = 1; i < n; i++)
		if (used(i) < used(oldest))
			oldest = i;
	return oldest;
}

#endif
