/* source_confine: every path a source opens stays under the data root.
 * Lexical checks first (sl_src_normalize: no absolute path, no ".."), then
 * the open itself beneath the root's directory fd: openat2(RESOLVE_BENEATH)
 * where the kernel has it, else an O_PATH open whose real location is
 * checked through /proc before that very inode is re-opened (the method is
 * described at the top of source_impl.h). Also the public
 * sl_source_open_file for the other files a job reads from the root
 * (tokenize's ranks file), confined exactly like the samples. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/data/source_impl.h"

int sl_src_normalize(const char *rel, char *out, size_t outlen)
{
    if (outlen == 0) {
        return -ENAMETOOLONG;
    }
    if (sl_remote_is_url(rel)) {
        /* A URL is checked (remote_roots, its canonical form) where it is
         * opened, by the remote layer: kept as written here. */
        size_t n = strlen(rel);
        if (n >= outlen) {
            return -ENAMETOOLONG;
        }
        memcpy(out, rel, n + 1);
        return 0;
    }
    if (rel[0] == '/') {
        return -EPERM;
    }
    size_t o = 0;
    const char *p = rel;
    while (*p != '\0') {
        const char *end = strchr(p, '/');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        bool dot = n == 1 && p[0] == '.';
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            return -EPERM;
        }
        if (n > 0 && !dot) {
            /* component, a '/' before it unless first, and the final NUL */
            size_t need = n + (o > 0 ? 1 : 0) + 1;
            if (need > outlen - o) {
                return -ENAMETOOLONG;
            }
            if (o > 0) {
                out[o++] = '/';
            }
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
        if (*p == '/') {
            p++;
        }
    }
    out[o] = '\0';
    return 0;
}

static bool under_root(const sl_source_t *src, const char *p)
{
    if (src->root_len == 1) { /* the root is "/" itself */
        return p[0] == '/';
    }
    return strncmp(p, src->root_real, src->root_len) == 0 &&
           (p[src->root_len] == '\0' || p[src->root_len] == '/');
}

/* Fast path: the kernel refuses any resolution that leaves root_fd. */
static int beneath_openat2(int root_fd, const char *rel, int flags)
{
#ifdef SYS_openat2
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = (uint64_t)(unsigned int)flags;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    long fd;
    do {
        fd = syscall(SYS_openat2, root_fd, rel, &how, sizeof(how));
    } while (fd < 0 && errno == EINTR);
    return fd < 0 ? -errno : (int)fd;
#else
    (void)root_fd;
    (void)rel;
    (void)flags;
    return -ENOSYS;
#endif
}

/* Fallback: resolve without side effects (O_PATH), check where the opened
 * inode really is, then re-open that same inode. The check is on the object
 * we hold, not on a path, so a concurrent symlink swap cannot slip past. */
static int beneath_proc(const sl_source_t *src, const char *rel, int flags)
{
    int pfd = openat(src->root_fd, rel, O_PATH | O_CLOEXEC | (flags & O_DIRECTORY));
    if (pfd < 0) {
        return -errno;
    }
    char link[64];
    char real[PATH_MAX + 1];
    int rc;
    snprintf(link, sizeof(link), "/proc/self/fd/%d", pfd);
    ssize_t n = readlink(link, real, sizeof(real));
    if (n < 0) {
        /* Without /proc the location cannot be verified: refuse. */
        rc = -EPERM;
        goto out;
    }
    if ((size_t)n >= sizeof(real)) {
        rc = -ENAMETOOLONG;
        goto out;
    }
    real[n] = '\0';
    if (!under_root(src, real)) {
        rc = -EPERM;
        goto out;
    }
    if (flags & O_PATH) {
        return pfd;
    }
    rc = open(link, flags);
    if (rc < 0) {
        rc = -errno;
    }
out:
    close(pfd);
    return rc;
}

int sl_src_open_beneath(const sl_source_t *src, const char *rel, int flags, unsigned how)
{
    if (sl_remote_is_url(rel)) {
        return (flags & O_DIRECTORY) ? -ENOTDIR : sl_src_open_url(src, rel, 0, NULL, 0);
    }
    const char *p = rel[0] != '\0' ? rel : ".";
    flags |= O_CLOEXEC;
    if (!(flags & O_PATH)) {
        /* Never become a controlling tty, never block opening a FIFO. */
        flags |= O_NOCTTY | O_NONBLOCK;
    }
    if (!(how & SL_SRC_BENEATH_NO_OPENAT2)) {
        int fd = beneath_openat2(src->root_fd, p, flags);
        if (fd >= 0) {
            return fd;
        }
        /* EXDEV is also what an absolute symlink that points back inside the
         * root gets, so let the fallback decide; ENOSYS/EPERM: no openat2
         * (old kernel, seccomp); EAGAIN: a rename race was detected. */
        if (fd != -ENOSYS && fd != -EPERM && fd != -EXDEV && fd != -EAGAIN && fd != -E2BIG) {
            return fd;
        }
    }
    return beneath_proc(src, p, flags);
}

int sl_src_open_path(const sl_source_t *src, const char *kind, const char *path, int flags,
                     char *err, size_t errlen)
{
    const char *shown = path[0] != '\0' ? path : ".";
    if (sl_remote_is_url(path)) {
        if (flags & O_DIRECTORY) {
            return sl_err(err, errlen, -ENOTDIR, "%s '%s': a URL has no directory listing", kind,
                          path);
        }
        int ufd = sl_src_open_url(src, path, 0, err, errlen);
        return ufd < 0 ? sl_err_prefix(err, errlen, ufd, "%s", kind) : ufd;
    }
    int fd = sl_src_open_beneath(src, path, flags, 0);
    if (fd == -EPERM) {
        return sl_err(err, errlen, fd, "%s '%s' resolves outside the data root", kind, shown);
    }
    if (fd == -ENOENT) {
        /* Name where it looked: a relative source path is easy to resolve
         * against the wrong directory (the data root, not the spec's). */
        const char *sep = src->root_len == 1 || path[0] == '\0' ? "" : "/";
        return sl_err(err, errlen, fd, "%s '%s': %s (looked for '%s%s%s' under the data root '%s')",
                      kind, shown, strerror(-fd), src->root_real, sep, path, src->root_real);
    }
    if (fd < 0) {
        return sl_err(err, errlen, fd, "%s '%s': %s", kind, shown, strerror(-fd));
    }
    return fd;
}

int sl_source_open_file(const sl_source_t *src, const char *rel, char *err, size_t errlen)
{
    char norm[SL_SRC_PATH_MAX];
    int rc = sl_src_normalize(rel, norm, sizeof(norm));
    if (rc == -EPERM) {
        return sl_err(err, errlen, rc, "'%s' escapes the data root", rel);
    }
    if (rc < 0) {
        return sl_err(err, errlen, rc, "'%.64s...' is too long", rel);
    }
    int fd = sl_src_open_beneath(src, norm, O_RDONLY, 0);
    if (fd == -EPERM) {
        return sl_err(err, errlen, fd, "'%s' resolves outside the data root", rel);
    }
    if (fd < 0) {
        return sl_err(err, errlen, fd, "'%s' under the data root: %s", rel, strerror(-fd));
    }
    return fd;
}
