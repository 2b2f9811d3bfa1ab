/* source_read: the byte reads every kind's reader is built from -- exact
 * preads (EOF first is a truncation), the per-sample size limits, a shard's
 * fd (kept open, or re-opened beneath the root), a regular file opened
 * confined and re-checked on every read -- and the read of a sample that is
 * one plain file (imagefolder and filelist rows). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/data/source_impl.h"

int sl_src_pread_exact(int fd, uint64_t off, void *buf, size_t size, const char *name, char *err,
                       size_t errlen)
{
    uint64_t got = 0;
    while (got < size) {
        if (off > (uint64_t)INT64_MAX - got) {
            return sl_err(err, errlen, -EOVERFLOW, "%s: offset out of range", name);
        }
        ssize_t n = pread(fd, (char *)buf + got, (size_t)(size - got), (off_t)(off + got));
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return sl_err(err, errlen, -errno, "%s: read: %s", name, strerror(errno));
        }
        if (n == 0) {
            return sl_err(err, errlen, -ENOMSG, "%s: truncated: got %" PRIu64 " of %zu bytes", name,
                          got, size);
        }
        got += (uint64_t)n;
    }
    return 0;
}

int sl_src_read_exact(int fd, uint64_t off, uint64_t size, sl_tensor_t *out, const char *name,
                      char *err, size_t errlen)
{
    int rc = sl_tensor_reshape(out, SL_DT_BYTES, SL_LAYOUT_HWC, (uint32_t)size, 1, 1);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "%s: cannot hold %" PRIu64 " bytes", name, size);
    }
    return sl_src_pread_exact(fd, off, out->data, (size_t)size, name, err, errlen);
}

int sl_src_check_size(uint64_t size, const char *name, char *err, size_t errlen)
{
    if (size == 0) {
        return sl_err(err, errlen, -ENODATA, "%s: empty (0 bytes)", name);
    }
    if (size > SL_SOURCE_MAX_FILE_BYTES) {
        return sl_err(err, errlen, -EFBIG,
                      "%s: %" PRIu64 " bytes is over the %" PRIu64 " byte limit", name, size,
                      SL_SOURCE_MAX_FILE_BYTES);
    }
    return 0;
}

int sl_src_open_error(int rc, const char *name, char *err, size_t errlen)
{
    if (rc == -EPERM) {
        return sl_err(err, errlen, rc, "%s: resolves outside the data root", name);
    }
    return sl_err(err, errlen, rc, "%s: %s", name, strerror(-rc));
}

int sl_src_shard_fd(const sl_source_t *src, uint32_t shard, const char *name, bool *ret_close,
                    char *err, size_t errlen)
{
    return sl_src_shard_fd_spans(src, shard, NULL, 0, name, ret_close, err, errlen);
}

int sl_src_shard_fd_spans(const sl_source_t *src, uint32_t shard, sl_src_span_t *sp, size_t n,
                          const char *name, bool *ret_close, char *err, size_t errlen)
{
    const sl_src_shard_t *sh = &src->shards[shard];
    *ret_close = false;
    if (sh->fd >= 0) {
        return sh->fd;
    }
    if (sh->remote_tag != 0) {
        /* A URL shard: from the cache or by ranges, and only while the
         * object is the one indexed. */
        int ufd = sl_src_url_shard_fd(src, shard, sp, n, err, errlen);
        if (ufd >= 0) {
            *ret_close = true;
        }
        return ufd < 0 ? sl_src_url_read_error(ufd, err, errlen) : ufd;
    }
    /* Shard beyond the open-fd budget: open (and re-verify) per read. */
    int fd = sl_src_open_beneath(src, src->arena + sh->path_off, O_RDONLY, 0);
    if (fd < 0) {
        return sl_src_open_error(fd, name, err, errlen);
    }
    *ret_close = true;
    return fd;
}

int sl_src_open_regular(const sl_source_t *src, const char *rel, const char *name,
                        sl_url_vers_t *vers, uint64_t *ret_size, char *err, size_t errlen)
{
    /* Re-resolved on every read: a symlink swapped in since indexing is
     * checked again here. */
    int fd;
    if (sl_remote_is_url(rel)) {
        fd = sl_src_open_url_pinned(src, rel, vers, err, errlen);
        if (fd < 0) {
            fd = sl_src_url_read_error(fd, err, errlen);
            return strcmp(rel, name) == 0 ? fd : sl_err_prefix(err, errlen, fd, "%s", name);
        }
    } else {
        fd = sl_src_open_beneath(src, rel, O_RDONLY, 0);
        if (fd < 0) {
            return sl_src_open_error(fd, name, err, errlen);
        }
    }
    struct stat st;
    int rc;
    if (fstat(fd, &st) < 0) {
        rc = sl_err(err, errlen, -errno, "%s: stat: %s", name, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        rc = sl_err(err, errlen, S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL, "%s: not a regular file",
                    name);
    } else {
        /* The size now, not the one indexed: the bytes we return are the file's. */
        rc = sl_src_check_size((uint64_t)st.st_size, name, err, errlen);
    }
    if (rc < 0) {
        close(fd);
        return rc;
    }
    *ret_size = (uint64_t)st.st_size;
    return fd;
}

/* Reads the first min(size, max) bytes of a file (max 0: all of it). */
static int read_file(const sl_source_t *src, uint64_t index, uint64_t max, sl_tensor_t *out,
                     sl_url_vers_t *vers, char *err, size_t errlen)
{
    const char *name = src->arena + src->name_off[index];
    uint64_t size;
    int fd = sl_src_open_regular(src, name, name, vers, &size, err, errlen);
    if (fd < 0) {
        return fd;
    }
    int rc = sl_src_read_exact(fd, 0, max > 0 && max < size ? max : size, out, name, err, errlen);
    close(fd);
    return rc;
}

int sl_src_read_file(const sl_source_t *src, uint64_t index, sl_tensor_t *out, sl_url_vers_t *vers,
                     char *err, size_t errlen)
{
    return read_file(src, index, 0, out, vers, err, errlen);
}

int sl_src_read_file_head(const sl_source_t *src, uint64_t index, uint64_t max, sl_tensor_t *out,
                          char *err, size_t errlen)
{
    return read_file(src, index, max, out, NULL, err, errlen);
}
