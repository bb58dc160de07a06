/* What the ALS kernels on CUDA share (gpu/hermitian.h, gpu/solve.h, gpu/rowsolve.h; the device code
 * itself is in gpu/als_device.cuh): the largest k, the Gram precision, a tile of a band. */
#ifndef STARFA_GPU_ALS_COMMON_H
#define STARFA_GPU_ALS_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The largest k the CUDA ALS kernels take: a k x k system, padded to a multiple of 16, lives in one
 * block's shared memory. */
#define STARFA_CUDA_ALS_MAX_K 192
/* The most tiles of one band the fused kernel takes (their pointers travel as kernel parameters). */
#define STARFA_CUDA_ROWSOLVE_MAX_TILES 64

/* The Gram sums run on the tensor cores: each term theta_c theta_c^T is split into TF32 parts,
 * hi·hi + hi·lo + lo·hi (3xTF32), which keeps float32 accuracy; STARFA_CUDA_GRAM_TF32 drops the lo
 * parts (one third of the work, about 1e-3 relative error in the sums). */
typedef enum starfa_cuda_gram_precision {
	STARFA_CUDA_GRAM_3XTF32 = 0,
	STARFA_CUDA_GRAM_TF32 = 1,
} starfa_cuda_gram_precision;

/* The precision the codelets use: 3xTF32 unless the environment says STARFA_CUDA_GRAM=tf32. */
static inline starfa_cuda_gram_precision starfa_cuda_gram_precision_default(void)
{
	const char *e = getenv("STARFA_CUDA_GRAM");
	return e && strcmp(e, "tf32") == 0 ? STARFA_CUDA_GRAM_TF32 : STARFA_CUDA_GRAM_3XTF32;
}

/* One tile of a band for the fused kernel (see starfa_cpu_rowsolve_tile); the hermitian kernel reads
 * its one tile through the same type. */
typedef struct starfa_cuda_rowsolve_tile {
	const uint32_t *rowptr, *colind;
	const float *val, *theta, *offset;
	int64_t ld;
} starfa_cuda_rowsolve_tile;

#ifdef __cplusplus
}
#endif
#endif
