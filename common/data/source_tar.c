/* source_tar: WebDataset-style tar shards.
 *
 * Reading the tar itself (formats, checksums, damage) is tar_walk.c's job;
 * damage stops indexing that shard with a warning and keeps the members
 * already seen; a member whose data runs past the end of the file is indexed
 * (its reads give -ENOMSG).
 *
 * Grouping: key = member path up to the first '.' of its basename, extension
 * = the rest ("d/n0144_1.jpg" -> key "d/n0144_1", ext "jpg"). Members with
 * ext jpg/jpeg (any case) are samples, in shard order, named "SHARD:KEY".
 * KEY.cls (before or after the image, same shard) holds the label as decimal
 * text; whitespace is trimmed; absent -> -1; malformed -> -1 and a warning;
 * if a key has several .cls members the last wins.
 *
 * A directory source holds its shards as *.tar files (hidden ones skipped),
 * indexed in strcmp order. Shard fds stay open for pread (thread-safe) up to
 * SL_SRC_MAX_OPEN_SHARDS or a quarter of RLIMIT_NOFILE; later shards are
 * opened, re-verified beneath the root, per read. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/data/source_impl.h"
#include "common/data/tar_walk.h"

typedef struct cls_ent_s {
    size_t key_off; /* in shard_t.keys */
    uint64_t seq;   /* order in the shard: the last .cls for a key wins */
    int32_t label;
} cls_ent_t;

/* Indexing state of one shard. */
typedef struct shard_s {
    sl_source_t *src;
    const char *rel; /* shard path relative to the root, for names/messages */
    size_t rel_len;
    int fd;
    sl_rread_t *rr; /* a URL shard: read by ranges (fd -1) */
    uint32_t idx;
    uint64_t fsize;
    uint64_t first_sample;
    char *keys; /* .cls keys, NUL-terminated, back to back */
    size_t keys_len, keys_cap;
    cls_ent_t *cls;
    size_t ncls, cls_cap;
} shard_t;

static int add_cls(shard_t *sh, const char *key, int32_t label)
{
    size_t len = strlen(key) + 1;
    if (sh->keys_len + len > sh->keys_cap) {
        size_t cap = sh->keys_cap ? sh->keys_cap * 2 : 4096;
        while (cap < sh->keys_len + len) {
            cap *= 2;
        }
        char *p = realloc(sh->keys, cap);
        if (p == NULL) {
            return -ENOMEM;
        }
        sh->keys = p;
        sh->keys_cap = cap;
    }
    if (sh->ncls == sh->cls_cap) {
        if (sh->ncls >= SL_SOURCE_MAX_SAMPLES) {
            return -E2BIG;
        }
        size_t cap = sh->cls_cap ? sh->cls_cap * 2 : 256;
        cls_ent_t *p = realloc(sh->cls, cap * sizeof(*p));
        if (p == NULL) {
            return -ENOMEM;
        }
        sh->cls = p;
        sh->cls_cap = cap;
    }
    memcpy(sh->keys + sh->keys_len, key, len);
    sh->cls[sh->ncls].key_off = sh->keys_len;
    sh->cls[sh->ncls].seq = sh->ncls;
    sh->cls[sh->ncls].label = label;
    sh->ncls++;
    sh->keys_len += len;
    return 0;
}

static int cls_cmp(const void *a, const void *b, void *ctx)
{
    const char *keys = ctx;
    const cls_ent_t *x = a, *y = b;
    int c = strcmp(keys + x->key_off, keys + y->key_off);
    if (c != 0) {
        return c;
    }
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Gives this shard's samples their labels from the .cls members. */
static void assign_labels(shard_t *sh)
{
    sl_source_t *src = sh->src;
    if (sh->ncls == 0) {
        return;
    }
    qsort_r(sh->cls, sh->ncls, sizeof(*sh->cls), cls_cmp, sh->keys);
    for (uint64_t i = sh->first_sample; i < src->count; i++) {
        const char *key = src->arena + src->name_off[i] + sh->rel_len + 1;
        /* Upper bound: the first entry whose key is greater; the one before
         * it, if equal, is the last .cls of this key. */
        size_t lo = 0, hi = sh->ncls;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (strcmp(sh->keys + sh->cls[mid].key_off, key) <= 0) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if (lo > 0 && strcmp(sh->keys + sh->cls[lo - 1].key_off, key) == 0) {
            src->label[i] = sh->cls[lo - 1].label;
        }
    }
}

/* One regular member: a sample, a label, or neither. */
static int add_member(void *ctx, char *name, uint64_t data, uint64_t size, char *err,
                      size_t errlen)
{
    shard_t *sh = ctx;
    sl_source_t *src = sh->src;
    while (name[0] == '.' && name[1] == '/') {
        name += 2;
    }
    const char *slash = strrchr(name, '/');
    const char *base = slash != NULL ? slash + 1 : name;
    char *dot = strchr(base, '.');
    if (dot == NULL || dot == base) { /* no extension, or a hidden "._x.jpg" */
        return 0;
    }
    const char *ext = dot + 1;
    bool jpeg = strcasecmp(ext, "jpg") == 0 || strcasecmp(ext, "jpeg") == 0;
    bool cls = strcasecmp(ext, "cls") == 0;
    if (!jpeg && !cls) {
        return 0;
    }
    *dot = '\0'; /* name is now the key */
    int rc;
    if (jpeg) {
        uint64_t off;
        rc = sl_src_arena_add2(src, sh->rel, ':', name, &off);
        if (rc == 0) {
            rc = sl_src_add_sample(src, off, size, -1);
        }
        if (rc < 0) {
            return sl_err(err, errlen, rc, "tar '%s': '%s': %s", sh->rel, name,
                          rc == -E2BIG ? "more samples than the source limit"
                                       : strerror(-rc));
        }
        src->data_off[src->count - 1] = data;
        src->shard[src->count - 1] = sh->idx;
        return 0;
    }
    int32_t label;
    rc = sl_tar_read_cls(sh->fd, sh->rr, sh->fsize, data, size, &label);
    if (rc < 0) {
        return sh->rr != NULL
                   ? sl_err(err, errlen, rc, "tar '%s': %s", sh->rel, sl_rread_error(sh->rr))
                   : sl_err(err, errlen, rc, "tar '%s': read: %s", sh->rel, strerror(-rc));
    }
    if (rc > 0) {
        sl_src_warn(src, "'%s:%s.cls': malformed label", sh->rel, name);
    }
    rc = add_cls(sh, name, label);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "tar '%s': %s", sh->rel, strerror(-rc));
    }
    return 0;
}

/* Registers the shard (the source owns fd from here on) and indexes it;
 * a URL shard (rr not NULL, fd -1, fsize its size) is read by ranges and
 * keeps no fd (its reads open it from the cache). */
static int add_shard(sl_source_t *src, const char *rel, int fd, sl_rread_t *rr, uint64_t fsize,
                     uint32_t *kept, uint32_t keep_max, char *err, size_t errlen)
{
    struct stat st;
    if (rr == NULL && fstat(fd, &st) < 0) {
        int rc = sl_err(err, errlen, -errno, "tar '%s': %s", rel, strerror(errno));
        close(fd);
        return rc;
    }
    uint64_t path_off;
    uint32_t idx;
    int rc = sl_src_arena_add(src, rel, strlen(rel), &path_off);
    if (rc == 0) {
        rc = sl_src_add_shard(src, path_off, fd, &idx);
    }
    if (rc < 0) {
        if (fd >= 0) {
            close(fd);
        }
        return sl_err(err, errlen, rc, "tar '%s': %s", rel, strerror(-rc));
    }
    shard_t sh;
    memset(&sh, 0, sizeof(sh));
    sh.src = src;
    sh.rel = rel;
    sh.rel_len = strlen(rel);
    sh.fd = fd;
    sh.rr = rr;
    sh.idx = idx;
    sh.fsize = rr != NULL ? fsize : (uint64_t)st.st_size;
    sh.first_sample = src->count;
    sl_tar_walk_t w = {.src = src,
                       .rel = rel,
                       .fd = fd,
                       .rr = rr,
                       .fsize = sh.fsize,
                       .on_member = add_member,
                       .ctx = &sh};
    rc = sl_tar_walk(&w, err, errlen);
    if (rc == 0) {
        assign_labels(&sh);
    }
    free(sh.keys);
    free(sh.cls);
    if (rc < 0) {
        return rc;
    }
    if (rr != NULL) {
        sl_rread_finish(rr); /* the index cached: a failure only costs a re-read */
        return 0;
    }
    /* Keep the fd for pread while within budget and the shard has samples. */
    if (src->count == sh.first_sample || *kept >= keep_max) {
        close(fd);
        src->shards[idx].fd = -1;
    } else {
        (*kept)++;
    }
    return 0;
}

/* A tar source at a URL: its headers read by ranges (source_remote.c). */
static int add_url_shard(sl_source_t *src, const char *url, char *err, size_t errlen)
{
    sl_rread_t *rr = NULL;
    uint64_t size = 0;
    int rc = sl_src_open_url_ranged(src, url, &rr, &size, err, errlen);
    if (rc < 0) {
        return sl_err_prefix(err, errlen, rc, "tar");
    }
    uint32_t kept = 0;
    rc = add_shard(src, url, -1, rr, size, &kept, 0, err, errlen);
    sl_rread_close(rr);
    return rc;
}

typedef struct {
    sl_source_t *src;
    uint32_t kept, keep_max;
} dir_ctx_t;

/* One *.tar of a directory source: indexed unless it is a dangling symlink
 * or not a regular file (a directory named "x.tar"). */
static int index_dir_entry(void *arg, const char *rel, size_t len, char *err, size_t errlen)
{
    dir_ctx_t *c = arg;
    (void)len;
    int fd = sl_src_open_beneath(c->src, rel, O_RDONLY, 0);
    if (fd == -ENOENT || fd == -ELOOP) {
        sl_src_warn(c->src, "'%s': dangling symlink skipped", rel);
        return 0;
    }
    if (fd == -EPERM) {
        return sl_err(err, errlen, fd, "tar '%s' resolves outside the data root", rel);
    }
    if (fd < 0) {
        return sl_err(err, errlen, fd, "tar '%s': %s", rel, strerror(-fd));
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return 0;
    }
    return add_shard(c->src, rel, fd, NULL, 0, &c->kept, c->keep_max, err, errlen);
}

static int index_shard_dir(sl_source_t *src, const char *path, int dfd, char *err,
                           size_t errlen)
{
    dir_ctx_t c = {.src = src, .keep_max = sl_tar_open_budget()};
    return sl_src_each_tar(dfd, path, "tar", index_dir_entry, &c, err, errlen);
}

static int tar_index(sl_source_t *src, const char *path, char *err, size_t errlen)
{
    const char *shown = path[0] != '\0' ? path : ".";
    size_t plen = strlen(path);
    if (sl_remote_is_url(path) && plen > 0 && path[plen - 1] != '/') {
        return add_url_shard(src, path, err, errlen);
    }
    int fd = sl_src_open_path(src, "tar", path, O_RDONLY, err, errlen);
    if (fd < 0) {
        return fd;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int rc = sl_err(err, errlen, -errno, "tar '%s': %s", shown, strerror(errno));
        close(fd);
        return rc;
    }
    if (S_ISREG(st.st_mode)) {
        uint32_t kept = 0;
        return add_shard(src, path, fd, NULL, 0, &kept, sl_tar_open_budget(), err, errlen);
    }
    int rc;
    if (S_ISDIR(st.st_mode)) {
        rc = index_shard_dir(src, path, fd, err, errlen);
    } else {
        rc = sl_err(err, errlen, -EINVAL, "tar '%s': not a file or directory", shown);
    }
    close(fd);
    return rc;
}

/* ---- reading ---------------------------------------------------------- */

/* Reads the first min(size, max) bytes of a member (max 0: all of it). */
static int read_tar_member(const sl_source_t *src, uint64_t index, uint64_t max,
                           sl_tensor_t *out, const char *name, char *err, size_t errlen)
{
    uint64_t size = src->size[index];
    int rc = sl_src_check_size(size, name, err, errlen);
    if (rc < 0) {
        return rc;
    }
    uint64_t want = max > 0 && max < size ? max : size;
    bool close_fd;
    sl_src_span_t sp = {.off = src->data_off[index], .len = size}; /* a URL shard's range */
    int fd = sl_src_shard_fd_spans(src, src->shard[index], &sp, 1, name, &close_fd, err, errlen);
    if (fd < 0) {
        return fd;
    }
    /* A member that runs past the end of the shard fails here, before the
     * buffer is sized: a 1 KiB shard must not make us reserve 256 MiB. */
    struct stat st;
    if (fstat(fd, &st) == 0 && (uint64_t)st.st_size < src->data_off[index] + size) {
        rc = sl_err(err, errlen, -ENOMSG,
                    "%s: truncated: %" PRIu64 " bytes declared, %" PRIu64 " in the shard", name,
                    size,
                    (uint64_t)st.st_size > src->data_off[index]
                        ? (uint64_t)st.st_size - src->data_off[index]
                        : 0);
    } else {
        rc = sl_src_read_exact(fd, src->data_off[index], want, out, name, err, errlen);
    }
    if (close_fd) {
        close(fd);
    }
    return rc;
}

static int tar_read(const sl_source_t *src, uint64_t index, sl_tensor_t *out, sl_url_vers_t *vers,
                    char *err, size_t errlen)
{
    (void)vers; /* shards are indexed: their validators are in the fingerprint */
    return read_tar_member(src, index, 0, out, src->arena + src->name_off[index], err, errlen);
}

static int tar_read_head(const sl_source_t *src, uint64_t index, uint64_t max, sl_tensor_t *out,
                         char *err, size_t errlen)
{
    return read_tar_member(src, index, max, out, src->arena + src->name_off[index], err, errlen);
}

const sl_src_kind_t sl_src_kind_tar = {
    .type = SL_SRC_TAR,
    .keep = SL_SRC_KEEP_OFFSETS,
    .index = tar_index,
    .read = tar_read,
    .read_head = tar_read_head,
};
