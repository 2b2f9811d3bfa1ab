/* source_dirlist: sorted directory listings for the indexers (imagefolder's
 * classes and files, the *.tar shards of a tar or webdataset directory), so
 * every host indexes a directory in the same (strcmp) order. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/data/source_impl.h"

static int dirent_cmp(const void *a, const void *b, void *ctx)
{
    const char *buf = ctx;
    const sl_src_dirent_t *x = a, *y = b;
    return strcmp(buf + x->off, buf + y->off);
}

int sl_src_dirlist_read(int dirfd, unsigned flags, sl_src_dirlist_t *ret_list)
{
    sl_src_dirlist_t l;
    memset(&l, 0, sizeof(l));
    /* fdopendir takes the fd; give it a duplicate so the caller keeps dirfd. */
    int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    rewinddir(d); /* a dup shares the offset with dirfd */
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (de == NULL) {
            rc = errno != 0 ? -errno : 0;
            break;
        }
        const char *nm = de->d_name;
        bool dots = nm[0] == '.' && (nm[1] == '\0' || (nm[1] == '.' && nm[2] == '\0'));
        if (dots || (nm[0] == '.' && !(flags & SL_SRC_DIRLIST_HIDDEN))) {
            continue;
        }
        if (l.n >= SL_SOURCE_MAX_SAMPLES) {
            rc = -E2BIG;
            break;
        }
        size_t len = strlen(de->d_name) + 1;
        rc = sl_src_reserve((void **)&l.buf, &l.cap, l.len + len, 1);
        if (rc == 0) {
            rc = sl_src_reserve((void **)&l.ents, &l.ncap, l.n + 1, sizeof(*l.ents));
        }
        if (rc < 0) {
            break;
        }
        memcpy(l.buf + l.len, de->d_name, len);
        l.ents[l.n].off = l.len;
        l.ents[l.n].type = de->d_type;
        l.n++;
        l.len += len;
    }
    closedir(d);
    if (rc < 0) {
        sl_src_dirlist_free(&l);
        return rc;
    }
    if (l.n > 1) {
        qsort_r(l.ents, l.n, sizeof(*l.ents), dirent_cmp, l.buf);
    }
    *ret_list = l;
    return 0;
}

void sl_src_dirlist_free(sl_src_dirlist_t *list)
{
    if (list == NULL) {
        return;
    }
    free(list->buf);
    free(list->ents);
    memset(list, 0, sizeof(*list));
}

int sl_src_each_tar(int dfd, const char *path, const char *kind, sl_src_tar_fn fn, void *ctx,
                    char *err, size_t errlen)
{
    const char *shown = path[0] != '\0' ? path : ".";
    sl_src_dirlist_t list;
    char rel[SL_SRC_PATH_MAX];
    int rc = sl_src_dirlist_read(dfd, 0, &list);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "%s '%s': %s", kind, shown, strerror(-rc));
    }
    for (size_t i = 0; rc == 0 && i < list.n; i++) {
        const char *name = list.buf + list.ents[i].off;
        size_t len = strlen(name);
        if (len <= 4 || strcmp(name + len - 4, ".tar") != 0) {
            continue;
        }
        int n = snprintf(rel, sizeof(rel), "%s%s%s", path, path[0] != '\0' ? "/" : "", name);
        if (n < 0 || (size_t)n >= sizeof(rel)) {
            rc = sl_err(err, errlen, -ENAMETOOLONG, "%s '%s/%s': path too long", kind, shown, name);
        } else {
            rc = fn(ctx, rel, (size_t)n, err, errlen);
        }
    }
    sl_src_dirlist_free(&list);
    return rc;
}
