/* What the ALS kernels on CUDA share (gpu/hermitian.h, gpu/solve.h, gpu/rowsolve.h; the device code
 * itself is in gpu/als_device.cuh): the largest k, the Gram precision, a tile of a band. */
#ifndef STARFA_GPU_ALS_COMMON_H
#define STARFA_GPU_ALS_COMMON_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The largest k the CUDA ALS kernels take: a k x k system, padded to a multiple of 16, lives in one
 * block's shared memory. */
#define STARFA_CUDA_ALS_MAX_K 192
/* The most tiles of one band the fused kernel takes (their pointers travel as kernel parameters). */
#define STARFA_CUDA_ROWSOLVE_MAX_TILES 64

/* The Gram sums run on the tensor cores, each term theta_c theta_c^T split into high and low parts:
 *   3XTF32  TF32 parts, hi·hi + hi·lo + lo·hi, m16n8k8: float32 accuracy (about 2^-22 a term);
 *   TF32    the high parts alone: one third of the work, about 1e-3 relative error in the sums;
 *   3XBF16  BF16 parts, hi·hi + hi·lo + lo·hi, m16n8k16: twice the entries per instruction and per
 *           byte of shared memory as 3xTF32, about 3·2^-18 (1e-5) relative error a term;
 *   3XFP16  FP16 parts, hi·hi + hi·lo + lo·hi, m16n8k16: nearly 3xBF16's speed with 3xTF32's 22 bits
 *           (FP16 keeps 11 bits where BF16 keeps 8). FP16's narrow range is made up by power-of-two scales
 *           per row, one for each operand and one for the targets' column, from the largest magnitude
 *           gathered so far (the sums are rescaled when a later chunk holds a larger one), so that the
 *           largest element sits in [2^14, 2^15): elements down to 2^-17 of it keep all 22 bits,
 *           smaller ones an absolute error of about 2^-39 of it. So a feature column far smaller than a
 *           row's largest elements (by 2^17 and more) is summed less precisely than under 3xTF32; the
 *           sums as a whole are as precise (norm-wise). */
typedef enum starfa_cuda_gram_precision {
	STARFA_CUDA_GRAM_3XTF32 = 0,
	STARFA_CUDA_GRAM_TF32 = 1,
	STARFA_CUDA_GRAM_3XBF16 = 2,
	STARFA_CUDA_GRAM_3XFP16 = 3,
} starfa_cuda_gram_precision;

/* The precision the codelets use: `setting` when it is one (STARFA_CUDA_GRAM, read by starfa_init:
 * 3xtf32, tf32, 3xbf16, 3xfp16 in this enum's order; -1 unset); else 3xBF16 where the system is solved by CG of
 * fewer steps than unknowns (approximate: its own error is orders of magnitude above the sums'), 3xFP16
 * where it is solved exactly (Cholesky, or CG of k steps or more): 22 bits a term, as 3xTF32, and faster
 * (bench/ALS.md). */
static inline starfa_cuda_gram_precision starfa_cuda_gram_precision_choose(int setting, int approximate)
{
	if (setting >= STARFA_CUDA_GRAM_3XTF32 && setting <= STARFA_CUDA_GRAM_3XFP16)
		return (starfa_cuda_gram_precision)setting;
	return approximate ? STARFA_CUDA_GRAM_3XBF16 : STARFA_CUDA_GRAM_3XFP16;
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
