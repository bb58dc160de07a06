/* Checked allocation: overflow of count * size and failure both become STARFA_ENOMEM. */
#include "runtime/internal.h"

#include <stdlib.h>

static int size_overflows(size_t count, size_t size)
{
	return size != 0 && count > SIZE_MAX / size;
}

void *starfa_malloc(size_t count, size_t size)
{
	if (size_overflows(count, size)) {
		starfa_set_error(STARFA_ENOMEM, "allocation of %zu x %zu bytes overflows", count, size);
		return NULL;
	}
	size_t bytes = count * size;
	void *p = malloc(bytes ? bytes : 1);
	if (!p)
		starfa_set_error(STARFA_ENOMEM, "out of memory allocating %zu bytes", bytes);
	return p;
}

void *starfa_calloc(size_t count, size_t size)
{
	if (size_overflows(count, size)) {
		starfa_set_error(STARFA_ENOMEM, "allocation of %zu x %zu bytes overflows", count, size);
		return NULL;
	}
	void *p = calloc(count ? count : 1, size ? size : 1);
	if (!p)
		starfa_set_error(STARFA_ENOMEM, "out of memory allocating %zu x %zu bytes", count, size);
	return p;
}

void *starfa_realloc_array(void *p, uint64_t count, size_t elem)
{
	if (count > SIZE_MAX / elem) {
		starfa_set_error(STARFA_ENOMEM, "allocation of %llu x %zu bytes overflows",
				 (unsigned long long)count, elem);
		return NULL;
	}
	void *grown = realloc(p, count ? (size_t)count * elem : 1);
	if (!grown)
		starfa_set_error(STARFA_ENOMEM, "out of memory allocating %llu x %zu bytes",
				 (unsigned long long)count, elem);
	return grown;
}
