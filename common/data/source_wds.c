/* source_wds: webdataset record shards (docs/sources.md, "webdataset"):
 * indexing -- members grouped into samples -- and the kind's row. Which
 * shards a source names is source_wds_shards.c's; members come from
 * tar_walk.c; reading a record is source_wds_read.c's.
 *
 * Grouping (WebDataset's convention): key = member path up to the first '.'
 * of its basename; consecutive members with one key are one sample. Roles by
 * extension (any case): txt text, json metadata, cls label (read here, kept
 * as the label), jpg/jpeg/png/webp and N.jpg/N.jpeg/N.png/N.webp images
 * (sorted by N, unnumbered first, then by extension text). Other extensions are ignored
 * and counted; a member without an extension is a warning. A group with
 * none of the roles is not a sample. A second txt or json for one key is
 * ignored with a warning; of several cls the last wins. At most
 * SL_REC_MAX_IMAGES + 1 images of a sample are kept: one more than a record
 * may hold is enough for the read to fail with -ETOOMANYREFS. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/data/source_impl.h"
#include "common/data/tar_walk.h"
#include "common/sample/record.h"

#define WDS_EXT_KEEP 24 /* image extension text kept for ordering ties */
#define WDS_MAX_SHARD_BYTES ((uint64_t)UINT32_MAX * 512) /* member block fits 32 bits */
#define WDS_IMG_KEEP (SL_REC_MAX_IMAGES + 1)

/* ---- indexing one shard ---------------------------------------------- */

const char *const sl_src_img_ext[SL_SRC_EXT__COUNT] = {
    [SL_SRC_EXT_JPG] = "jpg",   [SL_SRC_EXT_JPEG] = "jpeg", [SL_SRC_EXT_PNG] = "png",
    [SL_SRC_EXT_WEBP] = "webp", [SL_SRC_EXT_MP4] = "mp4",   [SL_SRC_EXT_WEBM] = "webm",
    [SL_SRC_EXT_MKV] = "mkv",   [SL_SRC_EXT_MOV] = "mov",
};

typedef struct pimg_s {
    uint64_t order; /* 0: unnumbered, else N + 1 */
    sl_src_member_t m;
    char ext[WDS_EXT_KEEP];
} pimg_t;

/* Indexing state: the shard being walked and the sample being grouped. */
typedef struct wds_s {
    sl_source_t *src;
    const char *rel;
    uint32_t idx;
    int fd;
    sl_rread_t *rr; /* a URL shard: read by ranges (fd -1) */
    uint64_t fsize;
    /* the pending group */
    bool open;
    bool has_text, has_meta, has_any;
    char *key; /* SL_SRC_PATH_MAX */
    sl_src_member_t text, meta;
    int32_t label;
    pimg_t img[WDS_IMG_KEEP];
    uint32_t nimg;
    /* source-wide counts for the warning summary */
    uint64_t ignored;
} wds_t;

static int img_cmp(const void *a, const void *b)
{
    const pimg_t *x = a, *y = b;
    if (x->order != y->order) {
        return x->order < y->order ? -1 : 1;
    }
    return strcmp(x->ext, y->ext);
}

static int push_member(sl_source_t *src, const sl_src_member_t *m)
{
    if (src->nmembers >= UINT32_MAX - 1) {
        return -E2BIG;
    }
    int rc = sl_src_reserve((void **)&src->members, &src->members_cap, src->nmembers + 1,
                            sizeof(*src->members));
    if (rc < 0) {
        return rc;
    }
    src->members[src->nmembers++] = *m;
    return 0;
}

/* Ends the pending group: a sample if it has a role. */
static int flush(wds_t *w, char *err, size_t errlen)
{
    sl_source_t *src = w->src;
    if (!w->open || !w->has_any) {
        w->open = false;
        return 0;
    }
    w->open = false;
    if (w->nimg > 1) {
        qsort(w->img, w->nimg, sizeof(*w->img), img_cmp);
    }
    uint64_t total = 0, off;
    uint32_t start = (uint32_t)src->nmembers;
    int rc = sl_src_arena_add2(src, w->rel, ':', w->key, &off);
    if (rc == 0 && w->has_text) {
        total += w->text.size;
        rc = push_member(src, &w->text);
    }
    if (rc == 0 && w->has_meta) {
        total += w->meta.size;
        rc = push_member(src, &w->meta);
    }
    for (uint32_t i = 0; rc == 0 && i < w->nimg; i++) {
        total += w->img[i].m.size;
        rc = push_member(src, &w->img[i].m);
    }
    if (rc == 0) {
        rc = sl_src_add_sample(src, off, total, w->label);
    }
    if (rc < 0) {
        return sl_err(err, errlen, rc, "webdataset '%s': '%s': %s", w->rel, w->key,
                      rc == -E2BIG ? "more samples or members than the source limit"
                                   : strerror(-rc));
    }
    src->first[src->count - 1] = start;
    src->first[src->count] = (uint32_t)src->nmembers;
    return 0;
}

/* "N.jpg" -> N + 1 and the image extension; "jpg" -> 0. */
static bool image_ext(const char *ext, uint64_t *ret_order, uint8_t *ret_code)
{
    const char *e = ext;
    uint64_t order = 0;
    if (*e >= '0' && *e <= '9') {
        uint64_t n = 0;
        for (; *e >= '0' && *e <= '9'; e++) {
            if (n > (UINT64_MAX - 10) / 10) {
                return false;
            }
            n = n * 10 + (uint64_t)(*e - '0');
        }
        if (*e != '.') {
            return false;
        }
        e++;
        order = n + 1;
    }
    for (unsigned c = 0; c < SL_SRC_EXT__COUNT; c++) {
        if (strcasecmp(e, sl_src_img_ext[c]) == 0) {
            *ret_code = (uint8_t)c;
            *ret_order = order;
            return true;
        }
    }
    return false;
}

static int read_cls(wds_t *w, const char *name, uint64_t data, uint64_t size, char *err,
                    size_t errlen)
{
    int32_t label;
    int rc = sl_tar_read_cls(w->fd, w->rr, w->fsize, data, size, &label);
    if (rc < 0) {
        return w->rr != NULL
                   ? sl_err(err, errlen, rc, "webdataset '%s': %s", w->rel, sl_rread_error(w->rr))
                   : sl_err(err, errlen, rc, "webdataset '%s': read: %s", w->rel, strerror(-rc));
    }
    if (rc > 0) {
        sl_src_warn(w->src, "'%s:%s': malformed label", w->rel, name);
    }
    w->label = label;
    return 0;
}

static int on_member(void *ctx, char *name, uint64_t data, uint64_t size, char *err, size_t errlen)
{
    wds_t *w = ctx;
    while (name[0] == '.' && name[1] == '/') {
        name += 2;
    }
    const char *slash = strrchr(name, '/');
    const char *base = slash != NULL ? slash + 1 : name;
    char *dot = strchr(base, '.');
    if (dot == NULL) {
        sl_src_warn(w->src, "'%s:%s': member without an extension skipped", w->rel, name);
        return 0;
    }
    if (dot == base) { /* hidden ("._x.jpg" from macOS tar): no key */
        w->ignored++;
        return 0;
    }
    *dot = '\0';
    const char *ext = dot + 1;
    if (!w->open || strcmp(name, w->key) != 0) {
        int rc = flush(w, err, errlen);
        if (rc < 0) {
            return rc;
        }
        snprintf(w->key, SL_SRC_PATH_MAX, "%s", name);
        w->open = true;
        w->has_text = w->has_meta = w->has_any = false;
        w->label = -1;
        w->nimg = 0;
    }
    sl_src_member_t m = {.block = (uint32_t)(data / 512),
                         .size = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size,
                         .shard = w->idx,
                         .num = UINT16_MAX};
    uint64_t order;
    uint8_t code;
    if (strcasecmp(ext, "txt") == 0 || strcasecmp(ext, "json") == 0) {
        bool text = strcasecmp(ext, "txt") == 0;
        if (text ? w->has_text : w->has_meta) {
            sl_src_warn(w->src, "'%s:%s.%s': second .%s of the sample ignored", w->rel, name, ext,
                        ext);
            return 0;
        }
        m.role = text ? SL_SRC_ROLE_TEXT : SL_SRC_ROLE_META;
        *(text ? &w->text : &w->meta) = m;
        *(text ? &w->has_text : &w->has_meta) = true;
    } else if (strcasecmp(ext, "cls") == 0) {
        int rc = read_cls(w, name, data, size, err, errlen);
        if (rc < 0) {
            return rc;
        }
    } else if (image_ext(ext, &order, &code)) {
        m.role = code >= SL_SRC_EXT_MP4 ? SL_SRC_ROLE_VIDEO : SL_SRC_ROLE_IMAGE;
        m.ext = code;
        m.num = order == 0 || order - 1 >= UINT16_MAX ? UINT16_MAX : (uint16_t)(order - 1);
        if (w->nimg < WDS_IMG_KEEP) {
            pimg_t *pi = &w->img[w->nimg++];
            pi->order = order;
            pi->m = m;
            snprintf(pi->ext, sizeof(pi->ext), "%s", ext);
        }
    } else {
        w->ignored++;
        return 0;
    }
    w->has_any = true;
    /* The fingerprint sees every member that shapes a sample. */
    unsigned char sz[8];
    for (int k = 0; k < 8; k++) {
        sz[k] = (unsigned char)(size >> (8 * k));
    }
    *dot = '.';
    w->src->rec_fp = sl_src_fnv1a(w->src->rec_fp, name, strlen(name) + 1);
    w->src->rec_fp = sl_src_fnv1a(w->src->rec_fp, sz, sizeof(sz));
    *dot = '\0';
    return 0;
}

/* Opens one shard: a file (*ret_fd, its size), or a URL read by ranges
 * (*ret_rr, *ret_fd -1: its headers only, source_remote.c). */
static int open_shard(sl_source_t *src, const char *rel, int *ret_fd, sl_rread_t **ret_rr,
                      uint64_t *ret_size, char *err, size_t errlen)
{
    size_t n = strlen(rel);
    *ret_fd = -1;
    *ret_rr = NULL;
    if (sl_remote_is_url(rel) && n > 0 && rel[n - 1] != '/') {
        int rc = sl_src_open_url_ranged(src, rel, ret_rr, ret_size, err, errlen);
        if (rc < 0) {
            return sl_err_prefix(err, errlen, rc, "webdataset shard");
        }
    } else {
        int fd = sl_src_open_path(src, "webdataset shard", rel, O_RDONLY, err, errlen);
        if (fd < 0) {
            return fd;
        }
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
            close(fd);
            return sl_err(err, errlen, -EINVAL, "webdataset shard '%s': not a regular file", rel);
        }
        *ret_fd = fd;
        *ret_size = (uint64_t)st.st_size;
    }
    if (*ret_size > WDS_MAX_SHARD_BYTES) {
        if (*ret_fd >= 0) {
            close(*ret_fd);
        }
        sl_rread_close(*ret_rr);
        return sl_err(err, errlen, -EFBIG, "webdataset shard '%s': over 2 TiB", rel);
    }
    return 0;
}

/* Opens, registers (the source owns the fd from then on) and indexes one
 * shard. */
static int index_one(wds_t *w, const char *rel, uint32_t *kept, uint32_t keep_max, char *err,
                     size_t errlen)
{
    sl_source_t *src = w->src;
    int fd;
    sl_rread_t *rr;
    uint64_t fsize;
    int rc = open_shard(src, rel, &fd, &rr, &fsize, err, errlen);
    if (rc < 0) {
        return rc;
    }
    uint64_t path_off;
    uint32_t idx;
    rc = sl_src_arena_add(src, rel, strlen(rel), &path_off);
    if (rc == 0) {
        rc = sl_src_add_shard(src, path_off, fd, &idx);
    }
    if (rc < 0) {
        if (fd >= 0) {
            close(fd);
        }
        sl_rread_close(rr);
        return sl_err(err, errlen, rc, "webdataset shard '%s': %s", rel, strerror(-rc));
    }
    uint64_t before = src->count;
    w->rel = rel; /* the caller's buffer, not the arena (which moves as it grows) */
    w->idx = idx;
    w->fd = fd;
    w->rr = rr;
    w->fsize = fsize;
    w->open = false;
    sl_tar_walk_t tw = {.src = src,
                        .rel = rel,
                        .fd = fd,
                        .rr = rr,
                        .fsize = w->fsize,
                        .on_member = on_member,
                        .ctx = w};
    rc = sl_tar_walk(&tw, err, errlen);
    if (rc == 0) {
        rc = flush(w, err, errlen);
    }
    w->rel = NULL;
    w->rr = NULL;
    if (rr != NULL) {
        if (rc == 0) {
            sl_rread_finish(rr); /* the index cached: a failure only costs a re-read */
        }
        sl_rread_close(rr);
        return rc; /* no fd kept: reads open it from the cache */
    }
    if (rc < 0) {
        return rc;
    }
    if (src->count == before || *kept >= keep_max) {
        close(fd);
        src->shards[idx].fd = -1;
    } else {
        (*kept)++;
    }
    return 0;
}

static int wds_index(sl_source_t *src, const char *path, char *err, size_t errlen)
{
    sl_src_pathlist_t shards = {0};
    wds_t *w = calloc(1, sizeof(*w));
    char *key = malloc(SL_SRC_PATH_MAX);
    char norm[SL_SRC_PATH_MAX];
    int rc;
    if (w == NULL || key == NULL) {
        rc = sl_err(err, errlen, -ENOMEM, "webdataset: out of memory");
        goto out;
    }
    w->src = src;
    w->key = key;
    rc = sl_src_wds_shards(src, path, &shards, err, errlen);
    if (rc < 0) {
        goto out;
    }
    uint32_t kept = 0, keep_max = sl_tar_open_budget();
    for (size_t i = 0; i < shards.n; i++) {
        const char *rel = shards.buf + shards.off[i];
        rc = sl_src_normalize(rel, norm, sizeof(norm));
        if (rc < 0) {
            rc = sl_err(err, errlen, rc, "webdataset shard '%s' %s", rel,
                        rc == -EPERM ? "escapes the data root" : "is too long");
            goto out;
        }
        rc = index_one(w, norm, &kept, keep_max, err, errlen);
        if (rc < 0) {
            goto out;
        }
    }
    if (w->ignored > 0) {
        sl_src_warn(src, "%" PRIu64 " member(s) with other extensions ignored", w->ignored);
    }
    if (src->first == NULL) { /* no sample: still a valid sentinel for count 0 */
        src->first = calloc(1, sizeof(*src->first));
        if (src->first == NULL) {
            rc = sl_err(err, errlen, -ENOMEM, "webdataset: out of memory");
            goto out;
        }
    }
    rc = 0;
out:
    sl_src_pathlist_free(&shards);
    free(key);
    free(w);
    return rc;
}

const sl_src_kind_t sl_src_kind_webdataset = {
    .type = SL_SRC_WEBDATASET,
    .keep = SL_SRC_KEEP_FIRST,
    .record = true,
    .index = wds_index,
    .read = sl_src_wds_read,
    .read_head = sl_src_wds_read_heads,
    .features = sl_src_wds_features,
};
