/* Output files written to a temporary file and renamed into place (io/outfile.h). */
#include "io/outfile.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int outfile_open(struct outfile *o, const char *path)
{
	*o = (struct outfile){.path = path};
	size_t len = strlen(path) + 16;
	o->tmp = starfa_malloc(len, 1);
	if (!o->tmp)
		return STARFA_ENOMEM;
	snprintf(o->tmp, len, "%s.tmp.XXXXXX", path);
	int rc = 0, fd = mkstemp(o->tmp);
	if (fd < 0) {
		rc = starfa_set_error(STARFA_EIO, "cannot create a temporary file beside %s: %s", path, strerror(errno));
		free(o->tmp);
		o->tmp = NULL;
		return rc;
	}
	mode_t mask = umask(0);
	umask(mask);
	if (fchmod(fd, 0666 & ~mask) != 0) /* mkstemp's 0600 would hide the file from others */
		rc = starfa_set_error(STARFA_EIO, "cannot set the permissions of %s: %s", o->tmp, strerror(errno));
	else if (!(o->f = fdopen(fd, "wb")))
		rc = starfa_set_error(STARFA_EIO, "cannot write %s: %s", o->tmp, strerror(errno));
	if (rc) {
		close(fd);
		unlink(o->tmp);
		free(o->tmp);
		o->tmp = NULL;
	}
	return rc;
}

void outfile_write(struct outfile *o, const void *data, size_t n)
{
	if (o->error || n == 0)
		return;
	if (fwrite(data, 1, n, o->f) != n)
		o->error = errno ? errno : EIO;
}

int outfile_close(struct outfile *o, int keep, const char *what)
{
	int rc = 0;
	if (!o->f)
		return 0;
	/* Everything must be on disk before the rename makes it the target: a crash then leaves the old
	 * file or the whole new one. */
	int error = o->error;
	if (!error && (ferror(o->f) || fflush(o->f) != 0 || fsync(fileno(o->f)) != 0))
		error = errno ? errno : EIO;
	if (fclose(o->f) != 0 && !error)
		error = errno ? errno : EIO;
	o->f = NULL;
	if (keep && error) {
		rc = starfa_set_error(STARFA_EIO, "cannot write %s to %s: %s", what, o->path, strerror(error));
	} else if (keep && rename(o->tmp, o->path) != 0) {
		rc = starfa_set_error(STARFA_EIO, "cannot rename %s to %s: %s", o->tmp, o->path, strerror(errno));
	}
	if (!keep || rc)
		unlink(o->tmp);
	free(o->tmp);
	o->tmp = NULL;
	return rc;
}
