/* The per-thread last-error message behind starfa_last_error(). */
#include "runtime/internal.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[1024];

const char *starfa_last_error(void)
{
	return last_error;
}

int starfa_set_error(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof last_error, fmt, ap);
	va_end(ap);
	return code;
}

void starfa_clear_error(void)
{
	last_error[0] = '\0';
}
