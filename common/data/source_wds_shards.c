/* source_wds_shards: which shards a webdataset source names
 * (docs/sources.md, "webdataset"): a .tar, a directory of *.tar (hidden
 * names skipped, strcmp order) or a brace pattern expanded in the order it
 * reads ("s/shard-{000000..000099}.tar", "{a,b}", nested), at most
 * SL_SRC_MAX_SHARDS and WDS_MAX_BRACES groups. Only paths come out of here:
 * whether each shard exists (and stays under the root) is checked when
 * source_wds.c opens it. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/data/source_impl.h"

#define WDS_MAX_BRACES 32 /* brace groups along one expansion */

static int list_add(sl_src_pathlist_t *l, const char *s, size_t n)
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

void sl_src_pathlist_free(sl_src_pathlist_t *l)
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
static int expand(const char *pat, const char *whole, int depth, sl_src_pathlist_t *out, char *err,
                  size_t errlen);

static int expand_with(const char *pre, size_t npre, const char *mid, size_t nmid, const char *suf,
                       const char *whole, int depth, sl_src_pathlist_t *out, char *err,
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
static int expand(const char *pat, const char *whole, int depth, sl_src_pathlist_t *out, char *err,
                  size_t errlen)
{
    const char *open = strchr(pat, '{');
    const char *close1 = strchr(pat, '}');
    if (open == NULL) {
        if (close1 != NULL) {
            return sl_err(err, errlen, -EINVAL, "webdataset pattern '%s': '}' without '{'", whole);
        }
        int rc = list_add(out, pat, strlen(pat));
        if (rc == -E2BIG) {
            return sl_err(err, errlen, rc, "webdataset pattern '%s': more than %u shards", whole,
                          SL_SRC_MAX_SHARDS);
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
        return sl_err(err, errlen, -EINVAL,
                      "webdataset pattern '%s': '{%.*s}' is neither a "
                      "list {a,b} nor a range {N..M}",
                      whole, (int)nbody, body);
    }
    size_t na = (size_t)(dots - body), nb = (size_t)(close - dots - 2);
    uint64_t lo = strtoull(body, NULL, 10), hi = strtoull(dots + 2, NULL, 10);
    if (lo > hi) {
        return sl_err(err, errlen, -EINVAL, "webdataset pattern '%s': reversed range {%.*s}", whole,
                      (int)nbody, body);
    }
    if (hi - lo >= SL_SRC_MAX_SHARDS) {
        return sl_err(err, errlen, -E2BIG, "webdataset pattern '%s': more than %u shards", whole,
                      SL_SRC_MAX_SHARDS);
    }
    /* Zero padding as braceexpand does: to the wider bound when either
     * bound is written with a leading zero. */
    bool padded = (na > 1 && body[0] == '0') || (nb > 1 && dots[2] == '0');
    int width = padded ? (int)(na > nb ? na : nb) : 0;
    for (uint64_t v = lo; v <= hi; v++) {
        char num[32];
        int n = snprintf(num, sizeof(num), "%0*" PRIu64, width, v);
        int rc = expand_with(pat, npre, num, (size_t)n, close + 1, whole, depth, out, err, errlen);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

typedef struct {
    sl_src_pathlist_t *out;
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
static int list_dir(const char *path, int dfd, sl_src_pathlist_t *out, char *err, size_t errlen)
{
    dir_ctx_t c = {.out = out, .shown = path[0] != '\0' ? path : "."};
    return sl_src_each_tar(dfd, path, "webdataset", add_dir_entry, &c, err, errlen);
}

int sl_src_wds_shards(sl_source_t *src, const char *path, sl_src_pathlist_t *out, char *err,
                      size_t errlen)
{
    if (strchr(path, '{') != NULL || strchr(path, '}') != NULL) {
        return expand(path, path, 0, out, err, errlen);
    }
    size_t plen = strlen(path);
    if (sl_remote_is_url(path) && plen > 0 && path[plen - 1] != '/') {
        /* A URL names one shard (no listing): opened when it is indexed,
         * by range reads, not downloaded here. */
        int rc = list_add(out, path, plen);
        return rc < 0 ? sl_err(err, errlen, rc, "webdataset: out of memory") : 0;
    }
    const char *shown = path[0] != '\0' ? path : ".";
    int fd = sl_src_open_path(src, "webdataset", path, O_RDONLY, err, errlen);
    if (fd < 0) {
        return fd;
    }
    int rc;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        rc = sl_err(err, errlen, -errno, "webdataset '%s': %s", shown, strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        rc = list_dir(path, fd, out, err, errlen);
    } else {
        rc = list_add(out, path, strlen(path));
        if (rc < 0) {
            rc = sl_err(err, errlen, rc, "webdataset: out of memory");
        }
    }
    close(fd);
    return rc;
}
