/* file: the one bounded read-whole-file. Journals, PEM files, tokens and
 * specs are read through it, so every reader refuses a file that is larger
 * than its caller allows (a peer or an operator can point us at /dev/zero or
 * a multi-GB log) and retries short reads and EINTR the same way. */
#ifndef SL_FILE_H
#define SL_FILE_H

#include <stddef.h>

/* Reads all of path (at most max bytes) into a malloc'd buffer that is
 * NUL-terminated one byte past *ret_len, so text callers can use it as a
 * string. Returns 0, -E2BIG when the file is larger than
 * max, or another negative errno; *ret and *ret_len are left untouched on
 * failure. The error names the path. Pipes and other streams are read to
 * EOF (a spec may come from /dev/stdin); directories are refused. */
int sl_file_read(const char *path, size_t max, char **ret, size_t *ret_len, char *err,
                 size_t errlen);

/* The same from an fd the caller opened (and still owns; it is read from
 * its current offset); name stands for the file in errors. */
int sl_file_read_fd(int fd, const char *name, size_t max, char **ret, size_t *ret_len,
                    char *err, size_t errlen);

#endif
