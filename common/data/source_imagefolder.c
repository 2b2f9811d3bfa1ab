/* source_imagefolder: PATH/CLASS/.../FILE trees, indexed the way
 * torchvision.datasets.ImageFolder indexes them, so that sample i has the
 * same file and label in Sluice as in torchvision on the same tree:
 *  - Classes: the entries of PATH that are directories (symlinks followed),
 *    hidden ones included, sorted by strcmp; label = position. A class
 *    without images keeps its label and is named in the open warnings
 *    (torchvision >= 0.17 with allow_empty=True does the same; older ones
 *    refuse such a tree).
 *  - Samples: each class is walked like os.walk(followlinks=True):
 *    directories in strcmp order of their whole path (so "a-b" comes between
 *    "a" and "a/x"), the files of each in strcmp order of their name. A file
 *    is a sample when its name ends, in any case, in one of torchvision's
 *    IMG_EXTENSIONS, hidden names included; whether it decodes is found out
 *    when it is read (a PNG is a counted not_jpeg skip), not here.
 *  - Anything that is not a directory counts as a file, as in os.walk:
 *    dangling symlinks, FIFOs and devices with image names are samples whose
 *    reads fail (skip io), so indices do not depend on them.
 *  - Confinement: a file that resolves outside the data root is a sample
 *    (size 0) whose reads are refused with -EPERM (skip outside_root), on
 *    every host that reads it. A directory that resolves outside the root
 *    cannot be listed, so no index could match torchvision's: the open
 *    fails naming it. Only whether a link leading out is a directory is
 *    looked at; nothing beyond the root is listed or read.
 *  - A symlinked directory that leads back to one of its own ancestors is
 *    not walked again (a warning); torchvision would repeat the loop until
 *    the kernel's ELOOP. Not thread-safe; runs once, inside sl_source_open. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/data/source_impl.h"

/* torchvision.datasets.folder.IMG_EXTENSIONS; torchvision lowercases the
 * name before its endswith, so the comparison ignores case. */
static const char *const IMG_EXTENSIONS[] = {
    ".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp",
};

bool sl_src_is_image_name(const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof(IMG_EXTENSIONS) / sizeof(IMG_EXTENSIONS[0]); i++) {
        size_t k = strlen(IMG_EXTENSIONS[i]);
        if (n >= k && strcasecmp(name + n - k, IMG_EXTENSIONS[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* buf = a/b (just b when a is the root, ""). */
static int join(char *buf, size_t len, const char *a, const char *b)
{
    int n = snprintf(buf, len, "%s%s%s", a, a[0] != '\0' ? "/" : "", b);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ---- one directory entry, as os.walk(followlinks=True) sees it ------- */

typedef enum {
    ENT_GONE = 0, /* removed while we list */
    ENT_DIR,      /* a directory beneath the root (symlinks followed) */
    ENT_FILE,     /* anything else */
} ent_kind_e;

typedef struct ent_s {
    ent_kind_e kind;
    uint64_t size;  /* ENT_FILE: bytes when a regular file beneath the root, else 0 */
    bool outside;   /* ENT_FILE: resolves outside the root */
    bool dangling;  /* ENT_FILE: a symlink to nothing (or a loop) */
} ent_t;

/* A symlink: resolved beneath the root; leading out, only its type is
 * looked at (a directory there cannot be listed: an error). */
static int classify_link(sl_source_t *src, int dfd, const char *name, const char *rel,
                         ent_t *e, char *err, size_t errlen)
{
    struct stat st;
    int fd = sl_src_open_beneath(src, rel, O_PATH, 0);
    if (fd == -ENOENT || fd == -ELOOP || fd == -ENOTDIR) {
        e->kind = ENT_FILE;
        e->dangling = true;
        return 0;
    }
    if (fd == -EPERM) {
        if (fstatat(dfd, name, &st, 0) == 0 && S_ISDIR(st.st_mode)) {
            return sl_err(err, errlen, fd,
                          "imagefolder: directory '%s' resolves outside the data root", rel);
        }
        e->kind = ENT_FILE;
        e->outside = true;
        return 0;
    }
    if (fd < 0) {
        return sl_err(err, errlen, fd, "imagefolder: '%s': %s", rel, strerror(-fd));
    }
    int rc = fstat(fd, &st);
    int saved = errno;
    close(fd);
    if (rc < 0) {
        return sl_err(err, errlen, -saved, "imagefolder: '%s': %s", rel, strerror(saved));
    }
    e->kind = S_ISDIR(st.st_mode) ? ENT_DIR : ENT_FILE;
    e->size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    return 0;
}

/* Fills e for entry name of the directory dfd (rel: its path from the
 * root). Entries of a directory opened beneath the root are beneath it
 * unless they are symlinks, so lstat is enough for everything else. A
 * regular file's size is looked up only when its name is an image's. */
static int classify(sl_source_t *src, int dfd, const char *name, unsigned char type,
                    const char *rel, ent_t *e, char *err, size_t errlen)
{
    memset(e, 0, sizeof(*e));
    if (type == DT_DIR) {
        e->kind = ENT_DIR;
        return 0;
    }
    if (type == DT_LNK) {
        return classify_link(src, dfd, name, rel, e, err, errlen);
    }
    if (type != DT_REG && type != DT_UNKNOWN) {
        e->kind = ENT_FILE; /* FIFO, socket, device: reads refuse it */
        return 0;
    }
    if (type == DT_REG && !sl_src_is_image_name(name)) {
        e->kind = ENT_FILE;
        return 0;
    }
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT) {
            return 0;
        }
        return sl_err(err, errlen, -errno, "imagefolder: '%s': %s", rel, strerror(errno));
    }
    if (S_ISLNK(st.st_mode)) {
        return classify_link(src, dfd, name, rel, e, err, errlen);
    }
    e->kind = S_ISDIR(st.st_mode) ? ENT_DIR : ENT_FILE;
    e->size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    return 0;
}

/* ---- walking one class ----------------------------------------------- */

#define WALK_TOP SIZE_MAX /* parent of the class directory itself */

typedef struct wdir_s {
    size_t path_off;       /* in walk_t.paths */
    size_t parent;         /* index in walk_t.dirs, or WALK_TOP */
    dev_t dev;             /* identity, for loops through symlinks */
    ino_t ino;
    size_t first, nfiles;  /* its samples: walk_t.files[first, first + nfiles) */
} wdir_t;

typedef struct wfile_s {
    uint64_t name_off; /* in the source's arena */
    uint64_t size;
} wfile_t;

/* One class's directories and samples in walk order; the buffers are kept
 * from class to class and freed once. */
typedef struct walk_s {
    sl_source_t *src;
    char *paths;
    size_t paths_len, paths_cap;
    wdir_t *dirs;
    size_t ndirs, dirs_cap;
    wfile_t *files;
    size_t nfiles, files_cap;
    size_t total_dirs; /* over all classes, bounded */
} walk_t;

static void walk_free(walk_t *w)
{
    free(w->paths);
    free(w->dirs);
    free(w->files);
}

static int push_dir(walk_t *w, const char *rel, size_t parent)
{
    size_t len = strlen(rel) + 1;
    if (w->total_dirs >= SL_SOURCE_MAX_SAMPLES) {
        return -E2BIG;
    }
    int rc = sl_src_reserve((void **)&w->paths, &w->paths_cap, w->paths_len + len, 1);
    if (rc == 0) {
        rc = sl_src_reserve((void **)&w->dirs, &w->dirs_cap, w->ndirs + 1, sizeof(*w->dirs));
    }
    if (rc < 0) {
        return rc;
    }
    memcpy(w->paths + w->paths_len, rel, len);
    w->dirs[w->ndirs] = (wdir_t){.path_off = w->paths_len, .parent = parent};
    w->paths_len += len;
    w->ndirs++;
    w->total_dirs++;
    return 0;
}

static int push_file(walk_t *w, const char *rel, uint64_t size)
{
    uint64_t off;
    int rc = sl_src_reserve((void **)&w->files, &w->files_cap, w->nfiles + 1,
                            sizeof(*w->files));
    if (rc == 0) {
        rc = sl_src_arena_add(w->src, rel, strlen(rel), &off);
    }
    if (rc < 0) {
        return rc;
    }
    w->files[w->nfiles++] = (wfile_t){.name_off = off, .size = size};
    return 0;
}

/* 1 when directory i is the same directory as one of its ancestors. */
static int is_loop(const walk_t *w, size_t i, size_t *ret_ancestor)
{
    for (size_t p = w->dirs[i].parent; p != WALK_TOP; p = w->dirs[p].parent) {
        if (w->dirs[p].dev == w->dirs[i].dev && w->dirs[p].ino == w->dirs[i].ino) {
            *ret_ancestor = p;
            return 1;
        }
    }
    return 0;
}

/* Lists directory i (fd open on it), queueing its sub-directories and
 * recording its samples. */
static int walk_list(walk_t *w, size_t i, int fd, const char *dir, char *err, size_t errlen)
{
    sl_src_dirlist_t list;
    char rel[SL_SRC_PATH_MAX];
    int rc = sl_src_dirlist_read(fd, SL_SRC_DIRLIST_HIDDEN, &list);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "imagefolder: '%s': %s", dir, strerror(-rc));
    }
    w->dirs[i].first = w->nfiles;
    for (size_t k = 0; k < list.n; k++) {
        const char *name = list.buf + list.ents[k].off;
        rc = join(rel, sizeof(rel), dir, name);
        if (rc < 0) {
            rc = sl_err(err, errlen, rc, "imagefolder: '%s/%s': path too long", dir, name);
            goto out;
        }
        ent_t e;
        rc = classify(w->src, fd, name, list.ents[k].type, rel, &e, err, errlen);
        if (rc < 0) {
            goto out;
        }
        if (e.kind == ENT_DIR) {
            rc = push_dir(w, rel, i);
        } else if (e.kind == ENT_FILE && sl_src_is_image_name(name)) {
            if (e.outside) {
                sl_src_warn(w->src, "'%s' resolves outside the data root (skipped when read)",
                            rel);
            } else if (e.dangling) {
                sl_src_warn(w->src, "'%s': dangling symlink (skipped when read)", rel);
            }
            rc = push_file(w, rel, e.size);
        }
        if (rc < 0) {
            rc = sl_err(err, errlen, rc, "imagefolder: '%s': %s", rel,
                        rc == -E2BIG ? "more entries than the source limit" : strerror(-rc));
            goto out;
        }
    }
    w->dirs[i].nfiles = w->nfiles - w->dirs[i].first;
    rc = 0;
out:
    sl_src_dirlist_free(&list);
    return rc;
}

/* Walks directory i: cfd for the class itself, else opened beneath the
 * root again so a symlinked directory is followed only when it stays in. */
static int walk_dir(walk_t *w, size_t i, int cfd, char *err, size_t errlen)
{
    char dir[SL_SRC_PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", w->paths + w->dirs[i].path_off);
    int fd = cfd;
    if (fd < 0) {
        fd = sl_src_open_beneath(w->src, dir, O_RDONLY | O_DIRECTORY, 0);
        if (fd == -ENOENT) { /* removed since its parent was listed */
            return 0;
        }
        if (fd < 0) {
            return sl_err(err, errlen, fd, "imagefolder: '%s': %s", dir,
                          fd == -EPERM ? "resolves outside the data root" : strerror(-fd));
        }
    }
    int rc;
    struct stat st;
    size_t anc;
    if (fstat(fd, &st) < 0) {
        rc = sl_err(err, errlen, -errno, "imagefolder: '%s': %s", dir, strerror(errno));
        goto out;
    }
    w->dirs[i].dev = st.st_dev;
    w->dirs[i].ino = st.st_ino;
    if (is_loop(w, i, &anc)) {
        sl_src_warn(w->src, "'%s' leads back to '%s': not walked again", dir,
                    w->paths + w->dirs[anc].path_off);
        rc = 0;
        goto out;
    }
    rc = walk_list(w, i, fd, dir, err, errlen);
out:
    if (fd != cfd) {
        close(fd);
    }
    return rc;
}

static int dir_cmp(const void *a, const void *b, void *ctx)
{
    const walk_t *w = ctx;
    const size_t *x = a, *y = b;
    return strcmp(w->paths + w->dirs[*x].path_off, w->paths + w->dirs[*y].path_off);
}

/* Indexes one class (cfd open on it) as samples with this label. */
static int index_class(walk_t *w, int cfd, const char *crel, int32_t label, char *err,
                       size_t errlen)
{
    w->paths_len = w->ndirs = w->nfiles = 0;
    int rc = push_dir(w, crel, WALK_TOP);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "imagefolder: '%s': %s", crel,
                      rc == -E2BIG ? "more entries than the source limit" : strerror(-rc));
    }
    for (size_t i = 0; i < w->ndirs; i++) { /* ndirs grows as we go */
        rc = walk_dir(w, i, i == 0 ? cfd : -1, err, errlen);
        if (rc < 0) {
            return rc;
        }
    }
    size_t *order = malloc(w->ndirs * sizeof(*order));
    if (order == NULL) {
        return sl_err(err, errlen, -ENOMEM, "imagefolder: '%s': out of memory", crel);
    }
    for (size_t i = 0; i < w->ndirs; i++) {
        order[i] = i;
    }
    qsort_r(order, w->ndirs, sizeof(*order), dir_cmp, w);
    for (size_t k = 0; rc == 0 && k < w->ndirs; k++) {
        const wdir_t *d = &w->dirs[order[k]];
        for (size_t f = d->first; rc == 0 && f < d->first + d->nfiles; f++) {
            rc = sl_src_add_sample(w->src, w->files[f].name_off, w->files[f].size, label);
        }
    }
    free(order);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "imagefolder: '%s': %s", crel,
                      rc == -E2BIG ? "more samples than the source limit" : strerror(-rc));
    }
    if (w->nfiles == 0) {
        sl_src_warn(w->src, "class '%s' has no images", crel);
    }
    return 0;
}

/* ---- the class level ------------------------------------------------- */

/* Class label's name (the directory entry's, as torchvision names it). */
int sl_src_add_class_name(sl_source_t *src, const char *name, uint32_t label, char *err,
                          size_t errlen)
{
    uint64_t off;
    int rc = sl_src_reserve((void **)&src->class_off, &src->class_cap, (size_t)label + 1,
                            sizeof(*src->class_off));
    if (rc == 0) {
        rc = sl_src_arena_add(src, name, strlen(name), &off);
    }
    if (rc < 0) {
        return sl_err(err, errlen, rc, "imagefolder: out of memory naming class '%s'", name);
    }
    src->class_off[label] = off;
    return 0;
}

/* One entry of PATH: a class (label *label, then incremented) when it is
 * a directory, else nothing. */
static int index_entry(walk_t *w, int dfd, const char *path, const char *name,
                       unsigned char type, int32_t *label, char *err, size_t errlen)
{
    char rel[SL_SRC_PATH_MAX];
    const char *shown = path[0] != '\0' ? path : ".";
    int rc = join(rel, sizeof(rel), path, name);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "imagefolder: '%s/%s': path too long", shown, name);
    }
    ent_t e;
    rc = classify(w->src, dfd, name, type, rel, &e, err, errlen);
    if (rc < 0) {
        return rc;
    }
    if (e.kind != ENT_DIR) {
        if (e.dangling) {
            sl_src_warn(w->src, "'%s': dangling symlink skipped", rel);
        }
        return 0;
    }
    int cfd = sl_src_open_beneath(w->src, rel, O_RDONLY | O_DIRECTORY, 0);
    if (cfd == -ENOENT) { /* removed while we list */
        return 0;
    }
    if (cfd < 0) {
        return sl_err(err, errlen, cfd, "imagefolder: '%s': %s", rel,
                      cfd == -EPERM ? "resolves outside the data root" : strerror(-cfd));
    }
    rc = index_class(w, cfd, rel, *label, err, errlen);
    close(cfd);
    if (rc == 0) {
        rc = sl_src_add_class_name(w->src, name, (uint32_t)*label, err, errlen);
    }
    if (rc == 0) {
        (*label)++;
    }
    return rc;
}

static int imagefolder_index(sl_source_t *src, const char *path, char *err, size_t errlen)
{
    if (sl_remote_is_url(path)) {
        return sl_src_imagefolder_index_url(src, path, err, errlen);
    }
    const char *shown = path[0] != '\0' ? path : ".";
    int dfd = sl_src_open_path(src, "imagefolder", path, O_RDONLY | O_DIRECTORY, err, errlen);
    if (dfd < 0) {
        return dfd;
    }
    sl_src_dirlist_t list;
    walk_t w = {.src = src};
    int rc = sl_src_dirlist_read(dfd, SL_SRC_DIRLIST_HIDDEN, &list);
    if (rc < 0) {
        close(dfd);
        return sl_err(err, errlen, rc, "imagefolder '%s': %s", shown, strerror(-rc));
    }
    int32_t label = 0;
    for (size_t i = 0; rc == 0 && i < list.n; i++) {
        rc = index_entry(&w, dfd, path, list.buf + list.ents[i].off, list.ents[i].type, &label,
                         err, errlen);
    }
    if (rc == 0) {
        src->nclasses = (uint32_t)label;
    }
    walk_free(&w);
    sl_src_dirlist_free(&list);
    close(dfd);
    return rc;
}

/* Classes are the directories, so the indexer sets nclasses itself. */
const sl_src_kind_t sl_src_kind_imagefolder = {
    .type = SL_SRC_IMAGEFOLDER,
    .own_classes = true,
    .index = imagefolder_index,
    .read = sl_src_read_file,
    .read_head = sl_src_read_file_head,
};
