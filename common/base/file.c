#include "common/base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/err.h"

/* Reads fd to EOF into *buf (capacity *cap, grown by doubling), holding at
 * most max + 1 bytes so that "over the limit" is seen without reading on. */
static int read_to_eof(int fd, size_t max, char **buf, size_t *cap, size_t *used)
{
    for (;;) {
        if (*used == *cap) {
            if (*cap > max) {
                return -E2BIG;
            }
            size_t ncap = *cap * 2 > max + 1 ? max + 1 : *cap * 2;
            char *nbuf = realloc(*buf, ncap + 1);
            if (nbuf == NULL) {
                return -ENOMEM;
            }
            *buf = nbuf;
            *cap = ncap;
        }
        ssize_t r = read(fd, *buf + *used, *cap - *used);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            return -errno;
        }
        if (r == 0) {
            return 0;
        }
        *used += (size_t)r;
    }
}

int sl_file_read_fd(int fd, const char *name, size_t max, char **ret, size_t *ret_len,
                    char *err, size_t errlen)
{
    int rc = 0;
    char *buf = NULL;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        return sl_err(err, errlen, -e, "%s: cannot stat: %s", name, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        return sl_err(err, errlen, -EISDIR, "%s: cannot read: %s", name, strerror(EISDIR));
    }
    if (S_ISREG(st.st_mode) && (unsigned long long)st.st_size > (unsigned long long)max) {
        return sl_err(err, errlen, -E2BIG, "%s: %lld bytes, the limit is %zu", name,
                      (long long)st.st_size, max);
    }
    /* The size is a hint (pipes have none, files may grow): read to EOF, but
     * never hold more than the limit plus one byte. */
    size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 4096;
    if (cap > max + 1) {
        cap = max + 1;
    }
    size_t used = 0;
    buf = malloc(cap + 1);
    if (buf == NULL) {
        return sl_err(err, errlen, -ENOMEM, "%s: out of memory", name);
    }
    rc = read_to_eof(fd, max, &buf, &cap, &used);
    if (rc == 0 && used > max) {
        rc = -E2BIG;
    }
    if (rc == -E2BIG) {
        rc = sl_err(err, errlen, rc, "%s: over the limit of %zu bytes", name, max);
        goto out;
    }
    if (rc < 0) {
        rc = sl_err(err, errlen, rc, "%s: cannot read: %s", name, strerror(-rc));
        goto out;
    }
    buf[used] = '\0';
    *ret = buf;
    *ret_len = used;
    buf = NULL;
out:
    free(buf);
    return rc;
}

int sl_file_read(const char *path, size_t max, char **ret, size_t *ret_len, char *err,
                 size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return sl_err(err, errlen, -e, "%s: cannot open: %s", path, strerror(e));
    }
    int rc = sl_file_read_fd(fd, path, max, ret, ret_len, err, errlen);
    close(fd);
    return rc;
}
