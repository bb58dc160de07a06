/* Output files written whole or not at all, shared by the model file and the exports: the bytes go to
 * a temporary file beside the target, renamed over it once complete, so that a reader never sees half a
 * file and a failure leaves whatever was there before. */
#ifndef STARFA_IO_OUTFILE_H
#define STARFA_IO_OUTFILE_H

#include "runtime/internal.h"

#include <stddef.h>
#include <stdio.h>

struct outfile {
	FILE *f;          /* the temporary file: write with outfile_write or stdio */
	const char *path; /* the target */
	char *tmp;        /* the temporary file's name */
	int error;        /* errno of the first failed outfile_write, 0 while none */
};

/* Creates the temporary file beside path (with the permissions a new file gets under the umask, not
 * mkstemp's 0600). 0, or STARFA_EIO / STARFA_ENOMEM with the message set. */
int outfile_open(struct outfile *o, const char *path);

/* Writes n bytes; after a failed write nothing more is written and outfile_close reports it. */
void outfile_write(struct outfile *o, const void *data, size_t n);

/* keep 1: flushes, syncs and renames the temporary file over the target; `what` names the contents in
 * the message of a failure ("the model"). keep 0, or any failure: removes the temporary file. Returns
 * 0, or STARFA_EIO with the message set (keep 1 only). */
int outfile_close(struct outfile *o, int keep, const char *what);

#endif
