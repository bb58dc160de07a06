/* Zeroing a handle, for the codelets whose output may have no tile to write it. */
#ifndef STARFA_CODELETS_ZERO_H
#define STARFA_CODELETS_ZERO_H

#include "codelets/codelet.h"

enum { STARFA_ZERO_VECTOR = 0, STARFA_ZERO_MATRIX = 1, STARFA_ZERO_VARIABLE = 2 };

/* Zeroes a vector handle (any element size), a float matrix block or a variable. */
int starfa_submit_zero(starpu_data_handle_t handle, int kind, const starfa_task_attr *attr);

#endif
