/* The readers' fuzz target links the readers and the COO/CSR conversion without StarPU. Their chunked
 * host loops (starfa_host_parallel, runtime/parallel.c) run here on the calling thread, chunk after chunk
 * with the same bounds: one of the orders the runtime may run them in, and each chunk's work is its own. */
#include "runtime/internal.h"

int starfa_host_parallel(int64_t n, int64_t nchunks, starfa_chunk_fn fn, void *ctx)
{
	if (n <= 0)
		return 0;
	if (nchunks > n)
		nchunks = n;
	if (nchunks < 1)
		nchunks = 1;
	for (int64_t c = 0; c < nchunks; c++)
		fn(ctx, c, (int64_t)((__int128)n * c / nchunks), (int64_t)((__int128)n * (c + 1) / nchunks));
	return 0;
}
