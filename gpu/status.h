/* What a GPU operation that calls CUDA libraries reports (no StarPU here). */
#ifndef STARFA_GPU_STATUS_H
#define STARFA_GPU_STATUS_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusparse.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The first call that failed in a GPU operation, with its CUDA, cuSPARSE or cuBLAS code, so that
 * a message can name the call and say what went wrong in the library's own words. */
typedef struct starfa_gpu_status {
	const char *call;          /* NULL: every call succeeded */
	cudaError_t cuda;          /* cudaSuccess unless a CUDA call failed */
	cusparseStatus_t cusparse; /* CUSPARSE_STATUS_SUCCESS unless a cuSPARSE call failed */
	cublasStatus_t cublas;     /* CUBLAS_STATUS_SUCCESS unless a cuBLAS call failed */
} starfa_gpu_status;

/* "call: message" of a failed status, for error reports ("" when it succeeded). */
const char *starfa_gpu_status_string(starfa_gpu_status status);

#ifdef __cplusplus
}

/* For the CUDA sources: a status where every call succeeded, and the first failure of a sequence of calls
 * kept (later ones are what the first one caused). */
inline starfa_gpu_status starfa_gpu_ok()
{
	return starfa_gpu_status{nullptr, cudaSuccess, CUSPARSE_STATUS_SUCCESS, CUBLAS_STATUS_SUCCESS};
}

inline void starfa_gpu_keep_first(starfa_gpu_status &st, const char *call, cudaError_t cuda,
				  cublasStatus_t cublas = CUBLAS_STATUS_SUCCESS)
{
	if (!st.call && (cuda != cudaSuccess || cublas != CUBLAS_STATUS_SUCCESS))
		st = starfa_gpu_status{call, cuda, CUSPARSE_STATUS_SUCCESS, cublas};
}
#endif
#endif
