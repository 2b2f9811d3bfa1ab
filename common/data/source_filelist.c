/* source_filelist: a text file of "RELPATH LABEL" lines.
 *  - LABEL is the last whitespace-separated token of the line, a decimal
 *    integer 0..INT32_MAX; RELPATH is everything before it (trimmed), so
 *    paths may contain spaces.
 *  - RELPATH is relative to the data root (not to the list file); absolute
 *    paths and ".." components are -EPERM (the list itself is wrong). A
 *    RELPATH that resolves outside the root through a symlink is a sample
 *    (size 0, a warning) whose reads are refused with -EPERM (skip
 *    outside_root) on every host that reads it.
 *  - Blank lines and lines whose first non-blank character is '#' are
 *    skipped; CRLF line ends are accepted. A line longer than
 *    SL_SRC_LIST_LINE_MAX bytes is an error, so a list without newlines can
 *    never make us buffer it whole.
 *  - Samples keep the order of the list (it is the user's order, and already
 *    the same on every host); every file must exist at open (sizes are
 *    recorded). Errors read "LIST:LINE: ...".
 *  - A spec whose stages decode_video reads the list as records
 *    (sl_src_kind_filelist_clips): KEY (the path), LABEL, and the file as a
 *    clip (VIDEO_ENC) when its extension is one of webdataset's clip
 *    members' (.mp4 .webm .mkv .mov, any case), else as an image
 *    (IMAGE_ENC, which decode_video decodes as decode_image does). */
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
#include "common/sample/record.h"

#define SL_SRC_LIST_LINE_MAX 4096

typedef struct list_reader_s {
    int fd;
    size_t pos, len;
    bool eof;
    char buf[65536];
} list_reader_t;

/* Next line (without its '\n') into line[0..cap-1). Returns 1 with
 * *ret_len, 0 at the end, -E2BIG when the line does not fit, or -errno. */
static int next_line(list_reader_t *r, char *line, size_t cap, size_t *ret_len)
{
    size_t n = 0;
    bool any = false;
    for (;;) {
        if (r->pos == r->len) {
            if (r->eof) {
                *ret_len = n;
                return any ? 1 : 0;
            }
            ssize_t k = read(r->fd, r->buf, sizeof(r->buf));
            if (k < 0) {
                if (errno == EINTR) {
                    continue;
                }
                return -errno;
            }
            r->pos = 0;
            r->len = (size_t)k;
            r->eof = k == 0;
            continue;
        }
        any = true;
        const char *start = r->buf + r->pos;
        const char *nl = memchr(start, '\n', r->len - r->pos);
        size_t span = nl != NULL ? (size_t)(nl - start) : r->len - r->pos;
        if (span > cap - 1 - n) {
            return -E2BIG;
        }
        memcpy(line + n, start, span);
        n += span;
        r->pos += span;
        if (nl != NULL) {
            r->pos++;
            *ret_len = n;
            return 1;
        }
    }
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Decimal 0..INT32_MAX, digits only. */
static bool parse_label(const char *s, int32_t *ret)
{
    int64_t v = 0;
    if (*s == '\0') {
        return false;
    }
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9') {
            return false;
        }
        v = v * 10 + (*s - '0');
        if (v > INT32_MAX) {
            return false;
        }
    }
    *ret = (int32_t)v;
    return true;
}

/* Parses and checks one line; 0 also for a skipped (blank/comment) line. */
static int index_line(sl_source_t *src, const char *list, unsigned long lineno, char *line,
                      size_t len, char *err, size_t errlen)
{
    if (memchr(line, '\0', len) != NULL) {
        return sl_err(err, errlen, -EINVAL, "%s:%lu: line contains a NUL byte", list, lineno);
    }
    line[len] = '\0';
    while (len > 0 && is_blank(line[len - 1])) {
        line[--len] = '\0';
    }
    char *p = line;
    while (is_blank(*p)) {
        p++;
    }
    if (*p == '\0' || *p == '#') {
        return 0;
    }
    char *sp = line + len;
    while (sp > p && !is_blank(sp[-1])) {
        sp--;
    }
    if (sp == p) {
        return sl_err(err, errlen, -EINVAL, "%s:%lu: expected 'RELPATH LABEL', got '%.64s'",
                      list, lineno, p);
    }
    const char *tok = sp;
    int32_t label;
    if (!parse_label(tok, &label)) {
        return sl_err(err, errlen, -EINVAL,
                      "%s:%lu: label '%.32s' is not an integer in 0..2147483647", list, lineno,
                      tok);
    }
    while (sp > p && is_blank(sp[-1])) {
        sp--;
    }
    *sp = '\0';

    char norm[SL_SRC_PATH_MAX];
    int rc = sl_src_normalize(p, norm, sizeof(norm));
    if (rc == -EPERM) {
        return sl_err(err, errlen, rc, "%s:%lu: '%s' escapes the data root", list, lineno, p);
    }
    if (rc < 0) {
        return sl_err(err, errlen, rc, "%s:%lu: path too long", list, lineno);
    }
    struct stat st = {.st_mode = S_IFREG, .st_size = 0};
    int fd;
    if (sl_remote_is_url(norm)) {
        /* A URL entry: fetched into the cache now (its size and validator
         * are indexed); any failure, remote_roots first, fails the open. */
        fd = sl_src_open_url(src, norm, 0, err, errlen);
        if (fd < 0) {
            return sl_err_prefix(err, errlen, fd, "%s:%lu", list, lineno);
        }
    } else {
        fd = sl_src_open_beneath(src, norm, O_PATH, 0);
    }
    if (fd == -EPERM) {
        /* A sample all the same: its reads are refused (skip outside_root). */
        sl_src_warn(src, "%s:%lu: '%s' resolves outside the data root (skipped when read)",
                    list, lineno, p);
    } else if (fd < 0) {
        return sl_err(err, errlen, fd, "%s:%lu: '%s': %s", list, lineno, p, strerror(-fd));
    } else {
        rc = fstat(fd, &st);
        int saved = errno;
        close(fd);
        if (rc < 0) {
            return sl_err(err, errlen, -saved, "%s:%lu: '%s': %s", list, lineno, p,
                          strerror(saved));
        }
    }
    if (!S_ISREG(st.st_mode)) {
        return sl_err(err, errlen, -EINVAL, "%s:%lu: '%s' is not a regular file", list, lineno,
                      p);
    }
    uint64_t off;
    rc = sl_src_arena_add(src, norm, strlen(norm), &off);
    if (rc == 0) {
        rc = sl_src_add_sample(src, off, (uint64_t)st.st_size, label);
    }
    if (rc < 0) {
        return sl_err(err, errlen, rc, "%s:%lu: %s", list, lineno,
                      rc == -E2BIG ? "more samples than the source limit" : strerror(-rc));
    }
    return 0;
}

static int filelist_index(sl_source_t *src, const char *path, char *err, size_t errlen)
{
    const char *shown = path[0] != '\0' ? path : ".";
    int fd = sl_src_open_path(src, "filelist", path, O_RDONLY, err, errlen);
    if (fd < 0) {
        return fd;
    }
    int rc;
    char *line = NULL;
    list_reader_t *r = NULL;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        rc = sl_err(err, errlen, -errno, "filelist '%s': %s", shown, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = sl_err(err, errlen, S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL,
                    "filelist '%s': not a regular file", shown);
        goto out;
    }
    r = malloc(sizeof(*r));
    line = malloc(SL_SRC_LIST_LINE_MAX + 1);
    if (r == NULL || line == NULL) {
        rc = sl_err(err, errlen, -ENOMEM, "filelist '%s': out of memory", shown);
        goto out;
    }
    r->fd = fd;
    r->pos = r->len = 0;
    r->eof = false;
    for (unsigned long lineno = 1;; lineno++) {
        size_t len = 0;
        rc = next_line(r, line, SL_SRC_LIST_LINE_MAX + 1, &len);
        if (rc == 0) {
            break;
        }
        if (rc == -E2BIG) {
            rc = sl_err(err, errlen, -EINVAL, "%s:%lu: line longer than %d bytes", shown, lineno,
                        SL_SRC_LIST_LINE_MAX);
            goto out;
        }
        if (rc < 0) {
            rc = sl_err(err, errlen, rc, "%s:%lu: read: %s", shown, lineno, strerror(-rc));
            goto out;
        }
        rc = index_line(src, shown, lineno, line, len, err, errlen);
        if (rc < 0) {
            goto out;
        }
    }
    rc = 0;
out:
    free(line);
    free(r);
    close(fd);
    return rc;
}

const sl_src_kind_t sl_src_kind_filelist = {
    .type = SL_SRC_FILELIST,
    .index = filelist_index,
    .read = sl_src_read_file,
    .read_head = sl_src_read_file_head,
};

/* ---- a list of clips: records --------------------------------------- */

/* VIDEO_ENC for a clip's extension (as webdataset members; a URL's before
 * its query), else IMAGE_ENC. */
static sl_rf_kind_e visual_kind(const char *name)
{
    size_t len = strlen(name);
    const char *q = sl_remote_is_url(name) ? strchr(name, '?') : NULL;
    if (q != NULL) {
        len = (size_t)(q - name);
    }
    size_t dot = len;
    while (dot > 0 && name[dot - 1] != '.' && name[dot - 1] != '/') {
        dot--;
    }
    if (dot == 0 || name[dot - 1] != '.') {
        return SL_RF_IMAGE_ENC;
    }
    for (int e = SL_SRC_EXT_MP4; e < SL_SRC_EXT__COUNT; e++) {
        const char *ext = sl_src_img_ext[e];
        if (strlen(ext) == len - dot && strncasecmp(name + dot, ext, len - dot) == 0) {
            return SL_RF_VIDEO_ENC;
        }
    }
    return SL_RF_IMAGE_ENC;
}

/* The file as a record's visual field: the first min(size, max) bytes
 * (max 0: all of it), after KEY and LABEL unless head (the cost model's
 * headers: the visual field alone, as webdataset's heads). */
static int rec_read(const sl_source_t *src, uint64_t index, uint64_t max, bool head,
                    sl_tensor_t *out, sl_url_vers_t *vers, char *err, size_t errlen)
{
    const char *name = src->arena + src->name_off[index];
    uint64_t size;
    int fd = sl_src_open_regular(src, name, name, vers, &size, err, errlen);
    if (fd < 0) {
        return fd;
    }
    uint64_t n = max > 0 && max < size ? max : size;
    int rc = sl_rec_begin(out);
    if (rc == 0 && !head) {
        rc = sl_rec_add_bytes(out, SL_RF_KEY, name, strlen(name));
    }
    if (rc == 0 && !head && src->label[index] >= 0) {
        rc = sl_rec_add_label(out, src->label[index]);
    }
    sl_rfield_t f = {.kind = visual_kind(name),
                     .dtype = SL_DT_BYTES,
                     .count = 1,
                     .h = (uint32_t)n,
                     .w = 1,
                     .c = 1,
                     .nbytes = (size_t)n};
    uint8_t *p = NULL;
    if (rc == 0) {
        rc = sl_rec_add(out, &f, &p);
    }
    if (rc < 0) {
        rc = sl_err(err, errlen, rc == -EOVERFLOW ? -EFBIG : rc, "%s: record: %s", name,
                    strerror(-rc));
    } else {
        rc = sl_src_pread_exact(fd, 0, p, (size_t)n, name, err, errlen);
    }
    close(fd);
    if (rc == 0) {
        sl_rec_finish(out);
    }
    return rc;
}

static int rec_read_whole(const sl_source_t *src, uint64_t index, sl_tensor_t *out,
                          sl_url_vers_t *vers, char *err, size_t errlen)
{
    return rec_read(src, index, 0, false, out, vers, err, errlen);
}

static int rec_read_head(const sl_source_t *src, uint64_t index, uint64_t max, sl_tensor_t *out,
                         char *err, size_t errlen)
{
    return rec_read(src, index, max, true, out, NULL, err, errlen);
}

/* One visual input of the size indexed; no text. */
static void rec_features(const sl_source_t *src, uint64_t index, sl_src_features_t *f)
{
    f->nimages = 1;
    f->image_bytes = src->size[index];
    f->image_bytes_known = true;
    f->text_bytes_exact = true;
}

const sl_src_kind_t sl_src_kind_filelist_clips = {
    .type = SL_SRC_FILELIST,
    .record = true,
    .index = filelist_index,
    .read = rec_read_whole,
    .read_head = rec_read_head,
    .features = rec_features,
};
