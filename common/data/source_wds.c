/* source_wds: webdataset record shards (docs/sources.md, "webdataset").
 *
 * Shards: a .tar, a directory of *.tar (hidden names skipped, strcmp
 * order) or a brace pattern expanded in order (at most SL_SRC_MAX_SHARDS;
 * every shard it names must exist). Members come from tar_walk.c.
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
 * may hold is enough for the read to fail with -ETOOMANYREFS.
 *
 * Reading checks everything the index can tell (sizes, truncation, image
 * count, text present) before allocating, then builds the record in out:
 * the text and each image are pread straight into their field's payload. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/base/utf8.h"
#include "common/data/source_impl.h"
#include "common/data/tar_walk.h"
#include "common/sample/record.h"

#define WDS_EXT_KEEP 24          /* image extension text kept for ordering ties */
#define WDS_MAX_BRACES 32        /* brace groups along one expansion */
#define WDS_MAX_SHARD_BYTES ((uint64_t)UINT32_MAX * 512) /* member block fits 32 bits */
#define WDS_IMG_KEEP (SL_REC_MAX_IMAGES + 1)

/* ---- shard lists and brace patterns ----------------------------------- */

typedef struct strlist_s {
    char *buf;
    size_t len, cap;
    size_t *off;
    size_t n, ncap;
} strlist_t;

static int list_add(strlist_t *l, const char *s, size_t n)
{
    if (l->n >= SL_SRC_MAX_SHARDS) {
        return -E2BIG;
    }
    if (sl_src_reserve((void **)&l->buf, &l->cap, l->len + n + 1, 1) < 0 ||
        sl_src_reserve((void **)&l->off, &l->ncap, l->n + 1, sizeof(*l->off)) < 0) {
        return -ENOMEM;
    }
    memcpy(l->buf + l->len, s, n);
    l->buf[l->len + n] = '\0';
    l->off[l->n++] = l->len;
    l->len += n + 1;
    return 0;
}

static void list_free(strlist_t *l)
{
    free(l->buf);
    free(l->off);
}

static bool all_digits(const char *s, size_t n)
{
    if (n == 0 || n > 18) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
    }
    return true;
}

/* Appends prefix + mid + suffix to scratch and expands the result. */
static int expand(const char *pat, const char *whole, int depth, strlist_t *out, char *err,
                  size_t errlen);

static int expand_with(const char *pre, size_t npre, const char *mid, size_t nmid,
                       const char *suf, const char *whole, int depth, strlist_t *out, char *err,
                       size_t errlen)
{
    size_t nsuf = strlen(suf);
    if (npre + nmid + nsuf >= SL_SRC_PATH_MAX) {
        return sl_err(err, errlen, -ENAMETOOLONG, "webdataset pattern '%s': a path too long",
                      whole);
    }
    char *s = malloc(npre + nmid + nsuf + 1);
    if (s == NULL) {
        return sl_err(err, errlen, -ENOMEM, "webdataset pattern: out of memory");
    }
    memcpy(s, pre, npre);
    memcpy(s + npre, mid, nmid);
    memcpy(s + npre + nmid, suf, nsuf + 1);
    int rc = expand(s, whole, depth + 1, out, err, errlen);
    free(s);
    return rc;
}

/* Depth first over the first brace group, so the output is in the order
 * the pattern reads: "a{1,2}{x,y}" -> a1x a1y a2x a2y. */
static int expand(const char *pat, const char *whole, int depth, strlist_t *out, char *err,
                  size_t errlen)
{
    const char *open = strchr(pat, '{');
    const char *close1 = strchr(pat, '}');
    if (open == NULL) {
        if (close1 != NULL) {
            return sl_err(err, errlen, -EINVAL, "webdataset pattern '%s': '}' without '{'",
                          whole);
        }
        int rc = list_add(out, pat, strlen(pat));
        if (rc == -E2BIG) {
            return sl_err(err, errlen, rc, "webdataset pattern '%s': more than %u shards",
                          whole, SL_SRC_MAX_SHARDS);
        }
        return rc < 0 ? sl_err(err, errlen, rc, "webdataset pattern: out of memory") : 0;
    }
    if (close1 != NULL && close1 < open) {
        return sl_err(err, errlen, -EINVAL, "webdataset pattern '%s': '}' without '{'", whole);
    }
    if (depth >= WDS_MAX_BRACES) {
        return sl_err(err, errlen, -EINVAL, "webdataset pattern '%s': more than %d brace groups",
                      whole, WDS_MAX_BRACES);
    }
    /* The matching '}' and the top-level commas between. */
    const char *p = open + 1, *close = NULL;
    int level = 0;
    size_t ncomma = 0;
    for (; *p != '\0'; p++) {
        if (*p == '{') {
            level++;
        } else if (*p == '}') {
            if (level == 0) {
                close = p;
                break;
            }
            level--;
        } else if (*p == ',' && level == 0) {
            ncomma++;
        }
    }
    if (close == NULL) {
        return sl_err(err, errlen, -EINVAL, "webdataset pattern '%s': unclosed '{'", whole);
    }
    const char *body = open + 1;
    size_t nbody = (size_t)(close - body);
    size_t npre = (size_t)(open - pat);
    if (ncomma > 0) {
        const char *a = body;
        level = 0;
        for (const char *q = body; q <= close; q++) {
            if (q < close && *q == '{') {
                level++;
            } else if (q < close && *q == '}') {
                level--;
            } else if (q == close || (*q == ',' && level == 0)) {
                int rc = expand_with(pat, npre, a, (size_t)(q - a), close + 1, whole, depth, out,
                                     err, errlen);
                if (rc < 0) {
                    return rc;
                }
                a = q + 1;
            }
        }
        return 0;
    }
    const char *dots = nbody >= 4 ? strstr(body, "..") : NULL;
    if (dots == NULL || dots > close || !all_digits(body, (size_t)(dots - body)) ||
        !all_digits(dots + 2, (size_t)(close - dots - 2))) {
        return sl_err(err, errlen, -EINVAL, "webdataset pattern '%s': '{%.*s}' is neither a "
                      "list {a,b} nor a range {N..M}", whole, (int)nbody, body);
    }
    size_t na = (size_t)(dots - body), nb = (size_t)(close - dots - 2);
    uint64_t lo = strtoull(body, NULL, 10), hi = strtoull(dots + 2, NULL, 10);
    if (lo > hi) {
        return sl_err(err, errlen, -EINVAL, "webdataset pattern '%s': reversed range {%.*s}",
                      whole, (int)nbody, body);
    }
    if (hi - lo >= SL_SRC_MAX_SHARDS) {
        return sl_err(err, errlen, -E2BIG, "webdataset pattern '%s': more than %u shards",
                      whole, SL_SRC_MAX_SHARDS);
    }
    /* Zero padding as braceexpand does: to the wider bound when either
     * bound is written with a leading zero. */
    bool padded = (na > 1 && body[0] == '0') || (nb > 1 && dots[2] == '0');
    int width = padded ? (int)(na > nb ? na : nb) : 0;
    for (uint64_t v = lo; v <= hi; v++) {
        char num[32];
        int n = snprintf(num, sizeof(num), "%0*" PRIu64, width, v);
        int rc = expand_with(pat, npre, num, (size_t)n, close + 1, whole, depth, out, err,
                             errlen);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

typedef struct {
    strlist_t *out;
    const char *shown;
} dir_ctx_t;

static int add_dir_entry(void *arg, const char *rel, size_t len, char *err, size_t errlen)
{
    dir_ctx_t *c = arg;
    int rc = list_add(c->out, rel, len);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "webdataset '%s': %s", c->shown,
                      rc == -E2BIG ? "more .tar shards than the limit" : strerror(-rc));
    }
    return 0;
}

/* The shard paths of a directory source, in strcmp order. */
static int list_dir(const char *path, int dfd, strlist_t *out, char *err, size_t errlen)
{
    dir_ctx_t c = {.out = out, .shown = path[0] != '\0' ? path : "."};
    return sl_src_each_tar(dfd, path, "webdataset", add_dir_entry, &c, err, errlen);
}

/* ---- indexing one shard ---------------------------------------------- */

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
    if (strcasecmp(e, "jpg") == 0) {
        *ret_code = SL_SRC_EXT_JPG;
    } else if (strcasecmp(e, "jpeg") == 0) {
        *ret_code = SL_SRC_EXT_JPEG;
    } else if (strcasecmp(e, "png") == 0) {
        *ret_code = SL_SRC_EXT_PNG;
    } else if (strcasecmp(e, "webp") == 0) {
        *ret_code = SL_SRC_EXT_WEBP;
    } else {
        return false;
    }
    *ret_order = order;
    return true;
}

static int read_cls(wds_t *w, const char *name, uint64_t data, uint64_t size, char *err,
                    size_t errlen)
{
    int32_t label;
    int rc = sl_tar_read_cls(w->fd, w->fsize, data, size, &label);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "webdataset '%s': read: %s", w->rel, strerror(-rc));
    }
    if (rc > 0) {
        sl_src_warn(w->src, "'%s:%s': malformed label", w->rel, name);
    }
    w->label = label;
    return 0;
}

static int on_member(void *ctx, char *name, uint64_t data, uint64_t size, char *err,
                     size_t errlen)
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
                         .shard = w->idx, .num = UINT16_MAX};
    uint64_t order;
    uint8_t code;
    if (strcasecmp(ext, "txt") == 0 || strcasecmp(ext, "json") == 0) {
        bool text = strcasecmp(ext, "txt") == 0;
        if (text ? w->has_text : w->has_meta) {
            sl_src_warn(w->src, "'%s:%s.%s': second .%s of the sample ignored", w->rel, name,
                        ext, ext);
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
        m.role = SL_SRC_ROLE_IMAGE;
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

/* Opens, registers (the source owns the fd from then on) and indexes one
 * shard. */
static int index_one(wds_t *w, const char *rel, uint32_t *kept, uint32_t keep_max, char *err,
                     size_t errlen)
{
    sl_source_t *src = w->src;
    int fd = sl_src_open_path(src, "webdataset shard", rel, O_RDONLY, err, errlen);
    if (fd < 0) {
        return fd;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        int rc = sl_err(err, errlen, -EINVAL, "webdataset shard '%s': not a regular file", rel);
        close(fd);
        return rc;
    }
    if ((uint64_t)st.st_size > WDS_MAX_SHARD_BYTES) {
        close(fd);
        return sl_err(err, errlen, -EFBIG, "webdataset shard '%s': over 2 TiB", rel);
    }
    uint64_t path_off;
    uint32_t idx;
    int rc = sl_src_arena_add(src, rel, strlen(rel), &path_off);
    if (rc == 0) {
        rc = sl_src_add_shard(src, path_off, fd, &idx);
    }
    if (rc < 0) {
        close(fd);
        return sl_err(err, errlen, rc, "webdataset shard '%s': %s", rel, strerror(-rc));
    }
    uint64_t before = src->count;
    w->rel = rel; /* the caller's buffer, not the arena (which moves as it grows) */
    w->idx = idx;
    w->fd = fd;
    w->fsize = (uint64_t)st.st_size;
    w->open = false;
    sl_tar_walk_t tw = {.src = src, .rel = rel, .fd = fd, .fsize = w->fsize,
                        .on_member = on_member, .ctx = w};
    rc = sl_tar_walk(&tw, err, errlen);
    if (rc == 0) {
        rc = flush(w, err, errlen);
    }
    w->rel = NULL;
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

int sl_src_index_wds(sl_source_t *src, const char *path, char *err, size_t errlen)
{
    strlist_t shards = {0};
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
    if (strchr(path, '{') != NULL || strchr(path, '}') != NULL) {
        rc = expand(path, path, 0, &shards, err, errlen);
    } else {
        const char *shown = path[0] != '\0' ? path : ".";
        int fd = sl_src_open_path(src, "webdataset", path, O_RDONLY, err, errlen);
        if (fd < 0) {
            rc = fd;
            goto out;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) {
            rc = sl_err(err, errlen, -errno, "webdataset '%s': %s", shown, strerror(errno));
        } else if (S_ISDIR(st.st_mode)) {
            rc = list_dir(path, fd, &shards, err, errlen);
        } else {
            rc = list_add(&shards, path, strlen(path));
            if (rc < 0) {
                rc = sl_err(err, errlen, rc, "webdataset: out of memory");
            }
        }
        close(fd);
    }
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
    list_free(&shards);
    free(key);
    free(w);
    return rc;
}

/* ---- reading ----------------------------------------------------------- */

static const char *const k_img_ext[] = {"jpg", "jpeg", "png", "webp"};

/* "shard.tar:KEY.ext" for messages. */
static void member_name(const char *sample, const sl_src_member_t *m, char *out, size_t len)
{
    switch (m->role) {
    case SL_SRC_ROLE_TEXT:
        snprintf(out, len, "%s.txt", sample);
        return;
    case SL_SRC_ROLE_META:
        snprintf(out, len, "%s.json", sample);
        return;
    default:
        break;
    }
    const char *ext = m->ext < sizeof(k_img_ext) / sizeof(k_img_ext[0]) ? k_img_ext[m->ext] : "?";
    if (m->num != UINT16_MAX) {
        snprintf(out, len, "%s.%u.%s", sample, (unsigned)m->num, ext);
    } else {
        snprintf(out, len, "%s.%s", sample, ext);
    }
}

int sl_src_conversations_text(const json_t *obj, char **ret, size_t *ret_len, const char **why)
{
    const json_t *conv = json_object_get(obj, "conversations");
    if (conv == NULL) {
        *why = "no text and no \"conversations\"";
        return -ENOSTR;
    }
    if (!json_is_array(conv)) {
        *why = "\"conversations\" is not an array";
        return -EPROTO;
    }
    size_t n = json_array_size(conv), len = 0;
    if (n == 0) {
        *why = "\"conversations\" is empty";
        return -ENOSTR;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(json_array_get(conv, i), "value");
        if (!json_is_string(v)) {
            *why = "a turn of \"conversations\" has no string \"value\"";
            return -EPROTO;
        }
        len += json_string_length(v) + (i > 0);
    }
    char *buf = malloc(len + 1);
    if (buf == NULL) {
        return -ENOMEM;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(json_array_get(conv, i), "value");
        if (i > 0) {
            buf[o++] = '\n';
        }
        memcpy(buf + o, json_string_value(v), json_string_length(v));
        o += json_string_length(v);
    }
    buf[o] = '\0';
    *ret = buf;
    *ret_len = o;
    return 0;
}

int sl_src_add_text(sl_tensor_t *out, const char *text, size_t n, const char *name, char *err,
                    size_t errlen)
{
    size_t bad;
    if (sl_utf8_check(text, n, &bad) < 0) {
        return sl_err(err, errlen, -EDOM, "%s: text is not UTF-8 (byte %zu)", name, bad);
    }
    int rc = sl_rec_add_bytes(out, SL_RF_TEXT, text, n);
    return rc < 0 ? sl_err(err, errlen, rc == -EOVERFLOW ? -EFBIG : rc,
                           "%s: record: %s", name, strerror(-rc))
                  : 0;
}

/* Adds a field of n bytes and preads the member into its payload. */
static int add_member_field(sl_tensor_t *out, sl_rf_kind_e kind, int fd,
                            const sl_src_member_t *m, const char *name, char *err,
                            size_t errlen)
{
    sl_rfield_t f = {.kind = kind, .dtype = SL_DT_BYTES, .count = 1, .h = m->size, .w = 1,
                     .c = 1, .nbytes = m->size};
    uint8_t *p;
    int rc = sl_rec_add(out, &f, &p);
    if (rc < 0) {
        return sl_err(err, errlen, rc == -EOVERFLOW ? -EFBIG : rc, "%s: record: %s", name,
                      rc == -EOVERFLOW ? "sample too large" : strerror(-rc));
    }
    return sl_src_pread_exact(fd, (uint64_t)m->block * 512, p, m->size, name, err, errlen);
}

/* A sample's members checked against the limits and sorted by role. */
typedef struct {
    const char *sample; /* "shard.tar:KEY" */
    const sl_src_member_t *ms, *text, *meta;
    uint32_t nm;
} wds_sample_t;

static int check_members(const sl_source_t *src, uint64_t index, wds_sample_t *w, char *err,
                         size_t errlen)
{
    char mname[SL_SRC_PATH_MAX + 32];
    *w = (wds_sample_t){.sample = src->arena + src->name_off[index],
                        .ms = src->members + src->first[index],
                        .nm = src->first[index + 1] - src->first[index]};
    uint32_t nimg = 0;
    for (uint32_t i = 0; i < w->nm; i++) {
        const sl_src_member_t *m = &w->ms[i];
        member_name(w->sample, m, mname, sizeof(mname));
        if (m->size > SL_SOURCE_MAX_FILE_BYTES) {
            return sl_err(err, errlen, -EFBIG, "%s: %" PRIu32 " bytes is over the %" PRIu64
                          " byte limit", mname, m->size, SL_SOURCE_MAX_FILE_BYTES);
        }
        if (m->role == SL_SRC_ROLE_TEXT) {
            w->text = m;
        } else if (m->role == SL_SRC_ROLE_META) {
            w->meta = m;
        } else {
            nimg++;
            if (m->size == 0) {
                return sl_err(err, errlen, -ENODATA, "%s: empty (0 bytes)", mname);
            }
        }
    }
    if (nimg > SL_REC_MAX_IMAGES) {
        return sl_err(err, errlen, -ETOOMANYREFS, "%s: more than %u images", w->sample,
                      SL_REC_MAX_IMAGES);
    }
    if (w->text == NULL && w->meta == NULL) {
        return sl_err(err, errlen, -ENOSTR, "%s: no .txt and no .json", w->sample);
    }
    return 0;
}

/* A member cut off by the end of the shard fails before anything is
 * allocated for it. */
static int check_in_shard(int fd, const wds_sample_t *w, char *err, size_t errlen)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        return sl_err(err, errlen, -e, "%s: stat: %s", w->sample, strerror(e));
    }
    for (uint32_t i = 0; i < w->nm; i++) {
        uint64_t end = (uint64_t)w->ms[i].block * 512 + w->ms[i].size;
        if (end > (uint64_t)st.st_size) {
            char mname[SL_SRC_PATH_MAX + 32];
            member_name(w->sample, &w->ms[i], mname, sizeof(mname));
            return sl_err(err, errlen, -ENOMSG, "%s: truncated: %" PRIu32 " bytes declared, "
                          "the shard ends first", mname, w->ms[i].size);
        }
    }
    return 0;
}

/* The .json member: UTF-8 text holding a JSON object (*ret_buf, *ret_obj
 * the caller's to free, also on failure). */
static int read_meta(int fd, const wds_sample_t *w, char **ret_buf, json_t **ret_obj, char *err,
                     size_t errlen)
{
    char mname[SL_SRC_PATH_MAX + 32];
    const sl_src_member_t *meta = w->meta;
    member_name(w->sample, meta, mname, sizeof(mname));
    *ret_buf = malloc((size_t)meta->size + 1);
    if (*ret_buf == NULL) {
        return sl_err(err, errlen, -ENOMEM, "%s: out of memory", mname);
    }
    int rc = sl_src_pread_exact(fd, (uint64_t)meta->block * 512, *ret_buf, meta->size, mname,
                                err, errlen);
    if (rc < 0) {
        return rc;
    }
    size_t bad;
    if (sl_utf8_check(*ret_buf, meta->size, &bad) < 0) {
        return sl_err(err, errlen, -EDOM, "%s: not UTF-8 (byte %zu)", mname, bad);
    }
    json_error_t je;
    *ret_obj = json_loadb(*ret_buf, meta->size, 0, &je);
    if (*ret_obj == NULL || !json_is_object(*ret_obj)) {
        return sl_err(err, errlen, -EPROTO, "%s: not a JSON object%s%s", mname,
                      *ret_obj == NULL ? ": " : "", *ret_obj == NULL ? je.text : "");
    }
    return 0;
}

/* The text field: the .txt member read in place and checked, or the .json's
 * conversation turns. */
static int add_text(int fd, const wds_sample_t *w, const json_t *obj, sl_tensor_t *out,
                    char *err, size_t errlen)
{
    char mname[SL_SRC_PATH_MAX + 32];
    if (w->text != NULL) {
        member_name(w->sample, w->text, mname, sizeof(mname));
        int rc = add_member_field(out, SL_RF_TEXT, fd, w->text, mname, err, errlen);
        if (rc < 0) {
            return rc;
        }
        /* The payload just read is the last text->size bytes before padding. */
        size_t pad = ((size_t)w->text->size + 7) / 8 * 8 - w->text->size;
        const char *t = (const char *)out->data + out->nbytes - pad - w->text->size;
        size_t bad;
        if (sl_utf8_check(t, w->text->size, &bad) < 0) {
            return sl_err(err, errlen, -EDOM, "%s: text is not UTF-8 (byte %zu)", mname, bad);
        }
        return 0;
    }
    const char *why = "";
    char *conv = NULL;
    size_t n = 0;
    member_name(w->sample, w->meta, mname, sizeof(mname));
    int rc = sl_src_conversations_text(obj, &conv, &n, &why);
    if (rc < 0) {
        rc = sl_err(err, errlen, rc, "%s: %s", mname, rc == -ENOMEM ? "out of memory" : why);
    } else {
        rc = sl_src_add_text(out, conv, n, mname, err, errlen);
    }
    free(conv);
    return rc;
}

/* The record in kind order: key, label, text, meta, images. */
static int build_record(const sl_source_t *src, uint64_t index, int fd, const wds_sample_t *w,
                        const char *metabuf, const json_t *obj, sl_tensor_t *out, char *err,
                        size_t errlen)
{
    const char *key = w->sample + strlen(src->arena + src->shards[w->ms[0].shard].path_off) + 1;
    int rc = sl_rec_begin(out);
    if (rc == 0) {
        rc = sl_rec_add_bytes(out, SL_RF_KEY, key, strlen(key));
    }
    if (rc == 0 && src->label[index] >= 0) {
        rc = sl_rec_add_label(out, src->label[index]);
    }
    if (rc < 0) {
        return sl_err(err, errlen, rc, "%s: record: %s", w->sample, strerror(-rc));
    }
    rc = add_text(fd, w, obj, out, err, errlen);
    if (rc < 0) {
        return rc;
    }
    if (w->meta != NULL) {
        rc = sl_rec_add_bytes(out, SL_RF_META, metabuf, w->meta->size);
        if (rc < 0) {
            return sl_err(err, errlen, rc == -EOVERFLOW ? -EFBIG : rc, "%s: record: %s",
                          w->sample, strerror(-rc));
        }
    }
    for (uint32_t i = 0; i < w->nm; i++) {
        if (w->ms[i].role != SL_SRC_ROLE_IMAGE) {
            continue;
        }
        char mname[SL_SRC_PATH_MAX + 32];
        member_name(w->sample, &w->ms[i], mname, sizeof(mname));
        rc = add_member_field(out, SL_RF_IMAGE_ENC, fd, &w->ms[i], mname, err, errlen);
        if (rc < 0) {
            return rc;
        }
    }
    sl_rec_finish(out);
    return 0;
}

int sl_src_read_wds(const sl_source_t *src, uint64_t index, sl_tensor_t *out, char *err,
                    size_t errlen)
{
    wds_sample_t w;
    int rc = check_members(src, index, &w, err, errlen);
    if (rc < 0) {
        return rc;
    }
    bool close_fd;
    int fd = sl_src_shard_fd(src, w.ms[0].shard, w.sample, &close_fd, err, errlen);
    if (fd < 0) {
        return fd;
    }
    json_t *obj = NULL;
    char *metabuf = NULL;
    rc = check_in_shard(fd, &w, err, errlen);
    if (rc == 0 && w.meta != NULL) {
        rc = read_meta(fd, &w, &metabuf, &obj, err, errlen);
    }
    if (rc == 0) {
        rc = build_record(src, index, fd, &w, metabuf, obj, out, err, errlen);
    }
    json_decref(obj);
    free(metabuf);
    if (close_fd) {
        close(fd);
    }
    return rc;
}

int sl_src_read_wds_heads(const sl_source_t *src, uint64_t index, uint64_t max,
                          sl_tensor_t *out, char *err, size_t errlen)
{
    const char *sample = src->arena + src->name_off[index];
    const sl_src_member_t *ms = src->members + src->first[index];
    uint32_t nm = src->first[index + 1] - src->first[index];
    bool close_fd;
    int fd = sl_src_shard_fd(src, ms[0].shard, sample, &close_fd, err, errlen);
    if (fd < 0) {
        return fd;
    }
    int rc = sl_rec_begin(out);
    uint32_t nimg = 0;
    for (uint32_t i = 0; rc == 0 && i < nm; i++) {
        const sl_src_member_t *m = &ms[i];
        if (m->role != SL_SRC_ROLE_IMAGE || m->size == 0 || ++nimg > SL_REC_MAX_IMAGES) {
            continue;
        }
        sl_src_member_t head = *m;
        head.size = max < m->size ? (uint32_t)max : m->size;
        char mname[SL_SRC_PATH_MAX + 32];
        member_name(sample, m, mname, sizeof(mname));
        rc = add_member_field(out, SL_RF_IMAGE_ENC, fd, &head, mname, err, errlen);
    }
    if (rc == 0) {
        sl_rec_finish(out);
    }
    if (close_fd) {
        close(fd);
    }
    return rc;
}
