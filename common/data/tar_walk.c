/* tar_walk: the one tar reader the tar-shard sources share (source_tar.c:
 * image-only shards; source_wds.c: webdataset record shards).
 *
 * Format support: POSIX ustar (name + prefix), GNU tar ('L' long names,
 * base-256 sizes) and pax ('x' headers: path and size records; 'g' global
 * headers are skipped). Only regular members ('0', '\0', '7') are reported;
 * links, directories and devices are skipped. Every header checksum is
 * verified (unsigned sum, or the signed sum some old tars wrote); a bad
 * checksum, a malformed size or pax header, or a header cut short stops the
 * walk with a warning and keeps the members already reported. A member whose
 * data runs past the end of the file is reported (its reads give -ENOMSG)
 * and ends the walk. */
#include "common/data/tar_walk.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/base/err.h"

#define TAR_BLOCK 512
#define TAR_PAX_MAX (1u << 20) /* largest pax extended header we parse */

/* Pending extended attributes for the next member header. */
typedef struct pending_s {
    bool has_path;
    bool has_size;
    bool skip; /* its long name was unusable: skip the member it names */
    uint64_t size;
    char path[SL_SRC_PATH_MAX];
} pending_t;

/* pread until n bytes or EOF; returns the count read or -errno. */
ssize_t sl_tar_pread_full(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (k < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        if (k == 0) {
            break;
        }
        got += (size_t)k;
    }
    return (ssize_t)got;
}

ssize_t sl_tar_read_at(int fd, sl_rread_t *rr, void *buf, size_t n, uint64_t off)
{
    if (rr == NULL) {
        return sl_tar_pread_full(fd, buf, n, off);
    }
    size_t got = 0;
    while (got < n) { /* short only at the end of the object */
        ssize_t k = sl_rread_pread(rr, (char *)buf + got, n - got, off + got);
        if (k <= 0) {
            return k < 0 ? k : (ssize_t)got;
        }
        got += (size_t)k;
    }
    return (ssize_t)got;
}

/* A failed read, named: a URL shard's says what the server did. */
static int read_error(const sl_tar_walk_t *sh, int rc, char *err, size_t errlen)
{
    if (sh->rr != NULL) {
        return sl_err(err, errlen, rc, "tar '%s': %s", sh->rel, sl_rread_error(sh->rr));
    }
    return sl_err(err, errlen, rc, "tar '%s': read: %s", sh->rel, strerror(-rc));
}

/* Octal number field: optional leading blanks, digits, then blanks/NULs. */
static bool parse_octal(const unsigned char *f, size_t n, uint64_t *ret)
{
    size_t i = 0;
    uint64_t v = 0;
    while (i < n && (f[i] == ' ' || f[i] == '\0')) {
        i++;
    }
    for (; i < n && f[i] != ' ' && f[i] != '\0'; i++) {
        if (f[i] < '0' || f[i] > '7' || v > (UINT64_MAX >> 3)) {
            return false;
        }
        v = v * 8 + (uint64_t)(f[i] - '0');
    }
    for (; i < n; i++) {
        if (f[i] != ' ' && f[i] != '\0') {
            return false;
        }
    }
    *ret = v;
    return true;
}

/* Size field: octal, or GNU base-256 (first byte 0x80 | high bits). */
static bool parse_size(const unsigned char *f, uint64_t *ret)
{
    if (f[0] & 0x80) {
        if (f[0] & 0x40) { /* negative */
            return false;
        }
        uint64_t v = f[0] & 0x3f;
        for (int i = 1; i < 12; i++) {
            if (v >> 55) {
                return false;
            }
            v = v << 8 | f[i];
        }
        *ret = v;
        return true;
    }
    return parse_octal(f, 12, ret);
}

static bool checksum_ok(const unsigned char *h)
{
    uint64_t want;
    if (!parse_octal(h + 148, 8, &want)) {
        return false;
    }
    uint64_t usum = 0;
    int64_t ssum = 0;
    for (int i = 0; i < TAR_BLOCK; i++) {
        unsigned char c = i >= 148 && i < 156 ? ' ' : h[i];
        usum += c;
        ssum += (signed char)c;
    }
    return want == usum || (int64_t)want == ssum;
}

static bool all_zero(const unsigned char *h)
{
    for (int i = 0; i < TAR_BLOCK; i++) {
        if (h[i] != 0) {
            return false;
        }
    }
    return true;
}

/* name, or prefix/name for POSIX ustar (GNU tar uses the prefix area for
 * other fields, so only the "ustar\0" magic enables it). out >= 257 bytes. */
static void header_name(const unsigned char *h, char *out)
{
    size_t nlen = strnlen((const char *)h, 100);
    size_t plen = memcmp(h + 257, "ustar", 6) == 0 ? strnlen((const char *)h + 345, 155) : 0;
    size_t o = 0;
    if (plen > 0) {
        memcpy(out, h + 345, plen);
        out[plen] = '/';
        o = plen + 1;
    }
    memcpy(out + o, h, nlen);
    out[o + nlen] = '\0';
}

/* Parses pax records "LEN key=value\n". Returns false when malformed. */
static bool parse_pax(const char *buf, size_t n, pending_t *pd)
{
    size_t pos = 0;
    while (pos < n) {
        if (buf[pos] == '\0') { /* NUL padding after the last record */
            break;
        }
        size_t i = pos, len = 0;
        while (i < n && buf[i] >= '0' && buf[i] <= '9') {
            len = len * 10 + (size_t)(buf[i] - '0');
            if (len > n) {
                return false;
            }
            i++;
        }
        if (i == pos || i >= n || buf[i] != ' ' || len < i - pos + 3 || len > n - pos ||
            buf[pos + len - 1] != '\n') {
            return false;
        }
        const char *kv = buf + i + 1;
        size_t kvlen = pos + len - 1 - (i + 1);
        const char *eq = memchr(kv, '=', kvlen);
        if (eq == NULL) {
            return false;
        }
        size_t klen = (size_t)(eq - kv);
        const char *val = eq + 1;
        size_t vlen = kvlen - klen - 1;
        if (klen == 4 && memcmp(kv, "path", 4) == 0) {
            if (vlen >= sizeof(pd->path) || memchr(val, '\0', vlen) != NULL) {
                pd->skip = true;
            } else {
                memcpy(pd->path, val, vlen);
                pd->path[vlen] = '\0';
                pd->has_path = true;
            }
        } else if (klen == 4 && memcmp(kv, "size", 4) == 0) {
            uint64_t v = 0;
            if (vlen == 0) {
                return false;
            }
            for (size_t k = 0; k < vlen; k++) {
                if (val[k] < '0' || val[k] > '9' || v > (UINT64_MAX - 9) / 10) {
                    return false;
                }
                v = v * 10 + (uint64_t)(val[k] - '0');
            }
            pd->size = v;
            pd->has_size = true;
        }
        pos += len;
    }
    return true;
}


/* .cls payload: decimal 0..INT32_MAX with surrounding whitespace. */
bool sl_tar_parse_cls(const char *buf, size_t n, int32_t *ret)
{
    size_t a = 0, b = n;
    while (a < b && (buf[a] == ' ' || (buf[a] >= '\t' && buf[a] <= '\r'))) {
        a++;
    }
    while (b > a && (buf[b - 1] == ' ' || (buf[b - 1] >= '\t' && buf[b - 1] <= '\r'))) {
        b--;
    }
    if (a == b) {
        return false;
    }
    int64_t v = 0;
    for (size_t i = a; i < b; i++) {
        if (buf[i] < '0' || buf[i] > '9') {
            return false;
        }
        v = v * 10 + (buf[i] - '0');
        if (v > INT32_MAX) {
            return false;
        }
    }
    *ret = (int32_t)v;
    return true;
}

/* Reads a metadata member's payload (GNU long name, pax header). */
static int read_meta(const sl_tar_walk_t *sh, uint64_t data, uint64_t size, char **ret)
{
    char *buf = malloc((size_t)size + 1);
    if (buf == NULL) {
        return -ENOMEM;
    }
    ssize_t n = sl_tar_read_at(sh->fd, sh->rr, buf, (size_t)size, data);
    if (n < 0 || (uint64_t)n != size) {
        free(buf);
        return n < 0 ? (int)n : -ENOMSG;
    }
    buf[size] = '\0';
    *ret = buf;
    return 0;
}

/* One header block as read, and where its member lies in the shard. */
typedef struct member_s {
    unsigned char h[TAR_BLOCK];
    char type;      /* typeflag */
    uint64_t off;   /* of the header */
    uint64_t data;  /* of the payload */
    uint64_t size;  /* of the payload (a pending pax size applied) */
    uint64_t next;  /* of the next header */
    bool past_end;  /* the payload runs past the end of the shard */
} member_t;

/* What one step of the walk tells index_shard: go on to m->next, or stop
 * here (the rest of the shard is skipped with a warning); errors are < 0. */
enum { WALK_NEXT = 0, WALK_STOP = 1 };

/* Reads and checks the header at m->off and places its member. */
static int read_header(const sl_tar_walk_t *sh, const pending_t *pd, member_t *m, char *err,
                       size_t errlen)
{
    sl_source_t *src = sh->src;
    uint64_t off = m->off;
    ssize_t n = sl_tar_read_at(sh->fd, sh->rr, m->h, sizeof(m->h), off);
    if (n < 0) {
        return read_error(sh, (int)n, err, errlen);
    }
    if (n < TAR_BLOCK) {
        sl_src_warn(src, "'%s': header cut short at offset %" PRIu64, sh->rel, off);
        return WALK_STOP;
    }
    if (all_zero(m->h)) { /* end-of-archive marker */
        return WALK_STOP;
    }
    if (!checksum_ok(m->h)) {
        sl_src_warn(src, "'%s': bad header checksum at offset %" PRIu64
                    ", rest of shard skipped", sh->rel, off);
        return WALK_STOP;
    }
    uint64_t size;
    if (!parse_size(m->h + 124, &size)) {
        sl_src_warn(src, "'%s': bad size field at offset %" PRIu64
                    ", rest of shard skipped", sh->rel, off);
        return WALK_STOP;
    }
    m->type = (char)m->h[156];
    bool is_meta = m->type == 'L' || m->type == 'x' || m->type == 'g' || m->type == 'K';
    if (!is_meta && pd->has_size) { /* pax size beats the (octal-limited) field */
        size = pd->size;
    }
    m->data = off + TAR_BLOCK;
    if (size > UINT64_MAX - TAR_BLOCK - m->data) {
        sl_src_warn(src, "'%s': member size out of range at offset %" PRIu64, sh->rel, off);
        return WALK_STOP;
    }
    m->size = size;
    m->next = m->data + ((size + TAR_BLOCK - 1) / TAR_BLOCK) * TAR_BLOCK;
    m->past_end = m->data + size > sh->fsize;
    return WALK_NEXT;
}

/* A GNU long name ('L') or pax header ('x'): recorded in pd for the member
 * that follows. */
static int take_meta(const sl_tar_walk_t *sh, pending_t *pd, const member_t *m, char *err,
                     size_t errlen)
{
    sl_source_t *src = sh->src;
    bool too_big = m->type == 'L' ? m->size >= SL_SRC_PATH_MAX : m->size > TAR_PAX_MAX;
    if (too_big) {
        sl_src_warn(src, "'%s': oversized %s header at offset %" PRIu64, sh->rel,
                    m->type == 'L' ? "long-name" : "pax", m->off);
        pd->skip = true;
        return WALK_NEXT;
    }
    char *meta = NULL;
    int rc = read_meta(sh, m->data, m->size, &meta);
    if (rc == -ENOMSG) {
        sl_src_warn(src, "'%s': header data cut short at offset %" PRIu64, sh->rel, m->off);
        return WALK_STOP;
    }
    if (rc < 0) {
        return read_error(sh, rc, err, errlen);
    }
    bool ok = true;
    if (m->type == 'L') {
        /* GNU long name: the payload, up to its first NUL. */
        snprintf(pd->path, sizeof(pd->path), "%s", meta);
        pd->has_path = true;
    } else {
        ok = parse_pax(meta, (size_t)m->size, pd);
    }
    free(meta);
    if (!ok) {
        sl_src_warn(src, "'%s': malformed pax header at offset %" PRIu64
                    ", rest of shard skipped", sh->rel, m->off);
        return WALK_STOP;
    }
    return WALK_NEXT;
}

/* A regular file member under its (long or header) name; name is scratch of
 * SL_SRC_PATH_MAX bytes. */
static int take_regular(const sl_tar_walk_t *sh, const pending_t *pd, const member_t *m, char *name,
                        char *err, size_t errlen)
{
    sl_source_t *src = sh->src;
    if (pd->skip) {
        sl_src_warn(src, "'%s': member at offset %" PRIu64 " skipped (name too long)", sh->rel,
                    m->off);
    } else {
        if (pd->has_path) {
            snprintf(name, SL_SRC_PATH_MAX, "%s", pd->path);
        } else {
            char hn[257];
            header_name(m->h, hn);
            snprintf(name, SL_SRC_PATH_MAX, "%s", hn);
        }
        int rc = sh->on_member(sh->ctx, name, m->data, m->size, err, errlen);
        if (rc < 0) {
            return rc;
        }
    }
    if (m->past_end) {
        sl_src_warn(src, "'%s': member at offset %" PRIu64 " runs past the end of the shard",
                    sh->rel, m->off);
        return WALK_STOP;
    }
    return WALK_NEXT;
}

int sl_tar_walk(const sl_tar_walk_t *sh, char *err, size_t errlen)
{
    char *name = malloc(SL_SRC_PATH_MAX);
    pending_t *pd = calloc(1, sizeof(*pd));
    member_t m;
    int rc = 0;
    if (name == NULL || pd == NULL) {
        rc = sl_err(err, errlen, -ENOMEM, "tar '%s': out of memory", sh->rel);
        goto out;
    }
    if (sh->fsize == 0) {
        sl_src_warn(sh->src, "'%s': empty shard", sh->rel);
        goto out;
    }
    for (m.off = 0; m.off < sh->fsize; m.off = m.next) {
        rc = read_header(sh, pd, &m, err, errlen);
        if (rc != WALK_NEXT) {
            break;
        }
        if (m.type == 'L' || m.type == 'x') {
            rc = take_meta(sh, pd, &m, err, errlen);
        } else if (m.type == 'g' || m.type == 'K') {
            /* Global pax header; GNU long link target: nothing for us, and
             * they must not clear a long name pending for the next member. */
            rc = WALK_NEXT;
        } else {
            bool regular = m.type == '0' || m.type == '\0' || m.type == '7';
            rc = regular ? take_regular(sh, pd, &m, name, err, errlen) : WALK_NEXT;
            memset(pd, 0, sizeof(*pd)); /* extended headers apply to one member */
        }
        if (rc != WALK_NEXT) {
            break;
        }
    }
    if (rc < 0) {
        goto out;
    }
    rc = 0;
out:
    free(name);
    free(pd);
    return rc;
}

uint32_t sl_tar_open_budget(void)
{
    struct rlimit rl;
    uint32_t max = SL_SRC_MAX_OPEN_SHARDS;
    /* Leave three quarters of the descriptors to the rest of the process. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur / 4 < max) {
        max = (uint32_t)(rl.rlim_cur / 4);
    }
    return max;
}

int sl_tar_read_cls(int fd, sl_rread_t *rr, uint64_t fsize, uint64_t data, uint64_t size,
                    int32_t *ret)
{
    char buf[SL_TAR_CLS_MAX];
    *ret = -1;
    if (size > sizeof(buf) || data + size > fsize) {
        return 1;
    }
    ssize_t n = sl_tar_read_at(fd, rr, buf, (size_t)size, data);
    if (n < 0) {
        return (int)n;
    }
    int32_t label;
    if ((uint64_t)n != size || !sl_tar_parse_cls(buf, (size_t)n, &label)) {
        return 1;
    }
    *ret = label;
    return 0;
}
