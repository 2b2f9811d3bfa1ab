/* source_imagefolder: PATH/CLASS/FILE.jpg trees (the torchvision ImageFolder
 * layout). Classes are the sub-directories of PATH sorted by strcmp, hidden
 * (dot) ones skipped; an empty class directory still takes a label, so labels
 * do not depend on which classes happen to hold images. Inside a class, files
 * ending in .jpg/.jpeg (any case), not hidden (skips macOS "._x.jpg"
 * litter), sorted by strcmp; the search is not recursive. Symlinks (classes
 * or files) are followed when they stay beneath the data root and refuse the
 * whole open with -EPERM when they lead out; dangling ones are skipped with
 * a warning. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/data/source_impl.h"

static bool is_jpeg_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot != NULL && (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0);
}

/* buf = a/b (just b when a is the root, ""). */
static int join(char *buf, size_t len, const char *a, const char *b)
{
    int n = snprintf(buf, len, "%s%s%s", a, a[0] != '\0' ? "/" : "", b);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Size of a symlinked entry, resolved beneath the root. Returns 1 with
 * *ret_size for a regular file, 0 to skip it, or a negative error. */
static int stat_symlink(sl_source_t *src, const char *rel, uint64_t *ret_size, char *err,
                        size_t errlen)
{
    int fd = sl_src_open_beneath(src, rel, O_PATH, 0);
    if (fd == -EPERM) {
        return sl_err(err, errlen, fd, "imagefolder: '%s' resolves outside the data root", rel);
    }
    if (fd == -ENOENT || fd == -ELOOP) {
        sl_src_warn(src, "'%s': dangling symlink skipped", rel);
        return 0;
    }
    if (fd < 0) {
        return sl_err(err, errlen, fd, "imagefolder: '%s': %s", rel, strerror(-fd));
    }
    struct stat st;
    int rc = fstat(fd, &st);
    int saved = errno;
    close(fd);
    if (rc < 0) {
        return sl_err(err, errlen, -saved, "imagefolder: '%s': %s", rel, strerror(saved));
    }
    if (!S_ISREG(st.st_mode)) {
        return 0;
    }
    *ret_size = (uint64_t)st.st_size;
    return 1;
}

static int index_class(sl_source_t *src, int cfd, const char *crel, int32_t label, char *err,
                       size_t errlen)
{
    sl_src_dirlist_t list;
    char rel[SL_SRC_PATH_MAX];
    int rc = sl_src_dirlist_read(cfd, &list);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "imagefolder: '%s': %s", crel, strerror(-rc));
    }
    uint64_t before = src->count;
    for (size_t i = 0; i < list.n; i++) {
        const char *name = list.buf + list.ents[i].off;
        unsigned char type = list.ents[i].type;
        if (!is_jpeg_name(name) ||
            (type != DT_REG && type != DT_LNK && type != DT_UNKNOWN)) {
            continue;
        }
        rc = join(rel, sizeof(rel), crel, name);
        if (rc < 0) {
            rc = sl_err(err, errlen, rc, "imagefolder: '%s/%s': path too long", crel, name);
            goto out;
        }
        /* Entries of a directory we opened beneath the root are beneath it
         * unless they are symlinks: lstat is enough for those. */
        struct stat st;
        if (fstatat(cfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT) { /* removed while we list: not a sample */
                continue;
            }
            rc = sl_err(err, errlen, -errno, "imagefolder: '%s': %s", rel, strerror(errno));
            goto out;
        }
        uint64_t size = 0;
        if (S_ISREG(st.st_mode)) {
            size = (uint64_t)st.st_size;
        } else if (S_ISLNK(st.st_mode)) {
            rc = stat_symlink(src, rel, &size, err, errlen);
            if (rc < 0) {
                goto out;
            }
            if (rc == 0) {
                continue;
            }
        } else {
            continue;
        }
        uint64_t off;
        rc = sl_src_arena_add(src, rel, strlen(rel), &off);
        if (rc == 0) {
            rc = sl_src_add_sample(src, off, size, label);
        }
        if (rc < 0) {
            rc = sl_err(err, errlen, rc, "imagefolder: '%s': %s", rel,
                        rc == -E2BIG ? "more samples than the source limit" : strerror(-rc));
            goto out;
        }
    }
    if (src->count == before) {
        sl_src_warn(src, "class '%s' has no images", crel);
    }
    rc = 0;
out:
    sl_src_dirlist_free(&list);
    return rc;
}

int sl_src_index_imagefolder(sl_source_t *src, const char *path, char *err, size_t errlen)
{
    const char *shown = path[0] != '\0' ? path : ".";
    int dfd = sl_src_open_path(src, "imagefolder", path, O_RDONLY | O_DIRECTORY, err, errlen);
    if (dfd < 0) {
        return dfd;
    }
    sl_src_dirlist_t list;
    char rel[SL_SRC_PATH_MAX];
    int rc = sl_src_dirlist_read(dfd, &list);
    close(dfd);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "imagefolder '%s': %s", shown, strerror(-rc));
    }
    int32_t label = 0;
    for (size_t i = 0; i < list.n; i++) {
        const char *name = list.buf + list.ents[i].off;
        unsigned char type = list.ents[i].type;
        if (type != DT_DIR && type != DT_LNK && type != DT_UNKNOWN) {
            continue;
        }
        rc = join(rel, sizeof(rel), path, name);
        if (rc < 0) {
            rc = sl_err(err, errlen, rc, "imagefolder: '%s/%s': path too long", shown, name);
            goto out;
        }
        /* Opened beneath the root again (not openat on dfd) so that a class
         * that is a symlink is followed only when it stays inside. */
        int cfd = sl_src_open_beneath(src, rel, O_RDONLY | O_DIRECTORY, 0);
        if (cfd == -ENOTDIR) {
            continue;
        }
        if (cfd == -ENOENT || cfd == -ELOOP) {
            sl_src_warn(src, "'%s': dangling symlink skipped", rel);
            continue;
        }
        if (cfd == -EPERM) {
            rc = sl_err(err, errlen, cfd, "imagefolder: '%s' resolves outside the data root",
                        rel);
            goto out;
        }
        if (cfd < 0) {
            rc = sl_err(err, errlen, cfd, "imagefolder: '%s': %s", rel, strerror(-cfd));
            goto out;
        }
        rc = index_class(src, cfd, rel, label, err, errlen);
        close(cfd);
        if (rc < 0) {
            goto out;
        }
        label++;
    }
    src->nclasses = (uint32_t)label;
    rc = 0;
out:
    sl_src_dirlist_free(&list);
    return rc;
}
