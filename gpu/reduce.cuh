/* Block-wide sums in double for the reduction kernels: each block adds its share into one double in
 * device memory (zeroed before the launch). */
#ifndef STARFA_GPU_REDUCE_CUH
#define STARFA_GPU_REDUCE_CUH

namespace starfa_gpu {

constexpr int kReduceThreads = 256;

/* Adds v over the block (kReduceThreads threads) and, from thread 0, into *sum. */
__device__ __forceinline__ void block_add(double v, double *sum)
{
	__shared__ double part[kReduceThreads / 32];
	for (int offset = 16; offset > 0; offset /= 2)
		v += __shfl_down_sync(0xffffffffu, v, offset);
	if (threadIdx.x % 32 == 0)
		part[threadIdx.x / 32] = v;
	__syncthreads();
	if (threadIdx.x < 32) {
		v = threadIdx.x < kReduceThreads / 32 ? part[threadIdx.x] : 0.0;
		for (int offset = 16; offset > 0; offset /= 2)
			v += __shfl_down_sync(0xffffffffu, v, offset);
		if (threadIdx.x == 0)
			atomicAdd(sum, v);
	}
}

/* Enough blocks of kReduceThreads for n items, at most a few waves. */
inline unsigned reduce_blocks(int64_t n)
{
	int64_t b = (n + kReduceThreads - 1) / kReduceThreads;
	return (unsigned)(b < 1 ? 1 : b > 1024 ? 1024 : b);
}

} // namespace starfa_gpu

#endif
