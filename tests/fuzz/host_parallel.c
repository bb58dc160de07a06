/* The readers' fuzz target links the readers and the COO/CSR conversion without StarPU. Their chunked
 * host loops (starfa_host_parallel, runtime/parallel.c) run here on the calling thread, chunk after chunk
 * with the same bounds (runtime/internal.h's): one of the orders the runtime may run them in, and each
 * chunk's work is its own. */
#include "runtime/internal.h"

int starfa_host_parallel(int64_t n, int64_t nchunks, starfa_chunk_fn fn, void *ctx)
{
	if (n <= 0)
		return 0;
	nchunks = starfa_chunk_count(n, nchunks);
	for (int64_t c = 0; c < nchunks; c++)
		fn(ctx, c, starfa_chunk_begin(n, nchunks, c), starfa_chunk_begin(n, nchunks, c + 1));
	return 0;
}
