/* source_imagefolder_url: an imagefolder at s3://bucket/prefix/, indexed
 * from the bucket's listing exactly as torchvision's ImageFolder indexes
 * the same tree on disk (source_imagefolder.c has the rules): classes are
 * the first key components under the prefix, sorted by strcmp; in each
 * class, keys are ordered by their directory (the whole path, strcmp, as
 * sorted(os.walk()) orders roots) and then by file name; a key whose name
 * ends in one of IMG_EXTENSIONS (any case) is a sample, keys directly under
 * the prefix are not (files beside the classes). Object stores have no
 * empty directories, so there are no empty classes. Samples are named by
 * their URL and fetched through the cache when read; each object's listed
 * ETag and size are in the fingerprint. http(s) has no listing: refused.
 * Runs once, inside sl_source_open. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/data/source_impl.h"

typedef struct obj_s {
    char *url;        /* canonical, malloc'd */
    const char *rel;  /* in url: the key under the prefix */
    size_t class_len; /* rel[0, class_len) is the class */
    size_t dir_len;   /* rel[0, dir_len) is the directory */
    uint64_t size;
    uint64_t tag;
} obj_t;

typedef struct list_s {
    obj_t *v;
    size_t n, cap;
    size_t base_len; /* the canonical directory URL's length */
} list_t;

static int on_object(void *arg, const char *url, uint64_t size, uint64_t tag)
{
    list_t *l = arg;
    const char *rel = url + l->base_len;
    const char *first = strchr(rel, '/');
    const char *last = strrchr(rel, '/');
    if (first == NULL || first == rel || !sl_src_is_image_name(last + 1)) {
        return 0; /* beside the classes, or not an image */
    }
    if (l->n == SL_SOURCE_MAX_SAMPLES) {
        return -E2BIG;
    }
    if (sl_src_reserve((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)) < 0) {
        return -ENOMEM;
    }
    obj_t *o = &l->v[l->n];
    o->url = strdup(url);
    if (o->url == NULL) {
        return -ENOMEM;
    }
    o->rel = o->url + l->base_len;
    o->class_len = (size_t)(first - rel);
    o->dir_len = (size_t)(last - rel);
    o->size = size;
    o->tag = tag;
    l->n++;
    return 0;
}

/* strcmp of a[0, an) and b[0, bn) as NUL-terminated strings. */
static int cmp_n(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c != 0 ? c : (an > bn) - (an < bn);
}

static int cmp_obj(const void *x, const void *y)
{
    const obj_t *a = x, *b = y;
    int c = cmp_n(a->rel, a->class_len, b->rel, b->class_len);
    if (c == 0) {
        c = cmp_n(a->rel, a->dir_len, b->rel, b->dir_len);
    }
    return c != 0 ? c : strcmp(a->rel + a->dir_len + 1, b->rel + b->dir_len + 1);
}

/* Adds the sorted objects as samples, a label per class. */
static int add_all(sl_source_t *src, list_t *l, char *err, size_t errlen)
{
    int32_t label = -1;
    const obj_t *prev = NULL;
    for (size_t i = 0; i < l->n; i++) {
        const obj_t *o = &l->v[i];
        int rc = 0;
        if (prev == NULL || cmp_n(prev->rel, prev->class_len, o->rel, o->class_len) != 0) {
            char name[SL_SRC_PATH_MAX];
            snprintf(name, sizeof(name), "%.*s", (int)o->class_len, o->rel);
            label++;
            rc = sl_src_add_class_name(src, name, (uint32_t)label, err, errlen);
        }
        uint64_t off;
        if (rc == 0) {
            rc = sl_src_arena_add(src, o->url, strlen(o->url), &off);
            rc = rc < 0 ? rc : sl_src_add_sample(src, off, o->size, label);
            if (rc < 0) {
                return sl_err(err, errlen, rc, "imagefolder: %s",
                              rc == -E2BIG ? "too many samples" : "out of memory");
            }
        }
        if (rc < 0) {
            return rc;
        }
        unsigned char tag[8];
        for (int k = 0; k < 8; k++) {
            tag[k] = (unsigned char)(o->tag >> (8 * k));
        }
        uint64_t h = src->rs->fp != 0 ? src->rs->fp : 0xcbf29ce484222325ULL;
        h = sl_src_fnv1a(h, o->url, strlen(o->url) + 1);
        src->rs->fp = sl_src_fnv1a(h, tag, sizeof(tag));
        src->rs->nurls++;
        prev = o;
    }
    src->nclasses = (uint32_t)(label + 1);
    return 0;
}

int sl_src_imagefolder_index_url(sl_source_t *src, const char *url, char *err, size_t errlen)
{
    char dir[SL_URL_MAX + 2], canon[SL_URL_MAX];
    size_t n = strlen(url);
    snprintf(dir, sizeof(dir), "%s%s", url, n > 0 && url[n - 1] == '/' ? "" : "/");
    int rc = sl_remote_check(src->rs->remote, dir, canon, sizeof(canon), err, errlen);
    if (rc < 0) {
        return sl_err_prefix(err, errlen, rc, "imagefolder");
    }
    list_t l = {.base_len = strlen(canon)};
    rc = sl_remote_list(src->rs->remote, dir, on_object, &l, err, errlen);
    if (rc == -E2BIG || rc == -ENOMEM) {
        rc = sl_err(err, errlen, rc, "imagefolder '%s': %s", url,
                    rc == -E2BIG ? "too many samples" : "out of memory");
    } else if (rc < 0) {
        rc = sl_err_prefix(err, errlen, rc, "imagefolder");
    }
    if (rc == 0) {
        qsort(l.v, l.n, sizeof(*l.v), cmp_obj);
        rc = add_all(src, &l, err, errlen);
    }
    for (size_t i = 0; i < l.n; i++) {
        free(l.v[i].url);
    }
    free(l.v);
    return rc;
}
