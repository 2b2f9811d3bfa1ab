/* source_jsonl: multimodal records from a JSON-lines manifest
 * (docs/sources.md, "jsonl").
 *
 * Indexing reads the manifest once, in 1 MiB chunks, and parses every
 * non-blank line (for its "id", "label" and image count); it keeps the
 * line's offset and length, never its text. A line that does not parse, or
 * does not have the documented shape, is still a sample: its read fails
 * with -EPROTO naming manifest:line, so one bad line costs one counted skip
 * instead of the job. Reading preads the line again, parses it, and reads
 * each image file beneath the data root straight into its record field.
 * The manifest fd stays open (shard 0) for those preads. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/base/utf8.h"
#include "common/data/source_impl.h"
#include "common/sample/record.h"

#define JSONL_CHUNK ((size_t)1 << 20)

/* What a line says, after its shape is checked. Pointers into the object. */
typedef struct jline_s {
    const char *id;       /* NULL: no string "id" */
    int32_t label;        /* -1 without "label" */
    const json_t *text;   /* string, or NULL */
    const json_t *images; /* array of strings, or a single string ("image"), or NULL */
    size_t nimages;
    const json_t *videos; /* the same for clips: "videos" or "video" */
    size_t nvideos;
} jline_t;

static const char *path_at(const json_t *paths, size_t i)
{
    return json_is_string(paths) ? json_string_value(paths)
                                 : json_string_value(json_array_get(paths, i));
}

static const char *image_at(const jline_t *l, size_t i) { return path_at(l->images, i); }

/* "videos" (an array of paths) or "video" (one), as images are named. */
static int check_videos(const json_t *obj, jline_t *ret, const char **why)
{
    const json_t *vids = json_object_get(obj, "videos");
    const json_t *vid = json_object_get(obj, "video");
    if (vids != NULL && vid != NULL) {
        *why = "both \"videos\" and \"video\"";
        return -EPROTO;
    }
    if (vid != NULL) {
        if (!json_is_string(vid)) {
            *why = "\"video\" is not a string";
            return -EPROTO;
        }
        ret->videos = vid;
        ret->nvideos = 1;
    } else if (vids != NULL) {
        if (!json_is_array(vids)) {
            *why = "\"videos\" is not an array";
            return -EPROTO;
        }
        for (size_t i = 0; i < json_array_size(vids); i++) {
            if (!json_is_string(json_array_get(vids, i))) {
                *why = "an entry of \"videos\" is not a string";
                return -EPROTO;
            }
        }
        ret->videos = vids;
        ret->nvideos = json_array_size(vids);
    }
    return 0;
}

/* Checks the documented shape. Returns 0 or -EPROTO with *why. */
static int check_line(const json_t *obj, jline_t *ret, const char **why)
{
    memset(ret, 0, sizeof(*ret));
    ret->label = -1;
    if (!json_is_object(obj)) {
        *why = "not a JSON object";
        return -EPROTO;
    }
    const json_t *id = json_object_get(obj, "id");
    ret->id = json_is_string(id) && json_string_length(id) > 0 ? json_string_value(id) : NULL;
    const json_t *text = json_object_get(obj, "text");
    if (text != NULL && !json_is_string(text)) {
        *why = "\"text\" is not a string";
        return -EPROTO;
    }
    ret->text = text;
    const json_t *imgs = json_object_get(obj, "images");
    const json_t *img = json_object_get(obj, "image");
    if (imgs != NULL && img != NULL) {
        *why = "both \"images\" and \"image\"";
        return -EPROTO;
    }
    if (img != NULL) {
        if (!json_is_string(img)) {
            *why = "\"image\" is not a string";
            return -EPROTO;
        }
        ret->images = img;
        ret->nimages = 1;
    } else if (imgs != NULL) {
        if (!json_is_array(imgs)) {
            *why = "\"images\" is not an array";
            return -EPROTO;
        }
        for (size_t i = 0; i < json_array_size(imgs); i++) {
            if (!json_is_string(json_array_get(imgs, i))) {
                *why = "an entry of \"images\" is not a string";
                return -EPROTO;
            }
        }
        ret->images = imgs;
        ret->nimages = json_array_size(imgs);
    }
    if (check_videos(obj, ret, why) < 0) {
        return -EPROTO;
    }
    const json_t *label = json_object_get(obj, "label");
    if (label != NULL) {
        if (!json_is_integer(label) || json_integer_value(label) < 0 ||
            json_integer_value(label) > INT32_MAX) {
            *why = "\"label\" is not an integer 0..2^31-1";
            return -EPROTO;
        }
        ret->label = (int32_t)json_integer_value(label);
    }
    return 0;
}

/* ---- indexing ---------------------------------------------------------- */

typedef struct jidx_s {
    sl_source_t *src;
    const char *rel;
    char *line; /* the current line, up to SL_SOURCE_MAX_LINE_BYTES */
    size_t len, cap;
    uint64_t full_len; /* its real length (may exceed what is kept) */
    uint64_t start;    /* its offset in the manifest */
    uint32_t lineno;
} jidx_t;

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') {
            return false;
        }
    }
    return true;
}

/* One complete line: a sample unless blank. */
static int end_line(jidx_t *j, char *err, size_t errlen)
{
    sl_source_t *src = j->src;
    if (j->full_len == j->len && blank(j->line, j->len)) {
        return 0;
    }
    uint8_t nimg = SL_SRC_LINE_BAD;
    int32_t label = -1;
    char key[32];
    const char *id = NULL;
    json_t *obj = NULL;
    if (j->full_len <= SL_SOURCE_MAX_LINE_BYTES) {
        obj = json_loadb(j->line, j->len, 0, NULL);
        jline_t l;
        const char *why;
        if (obj != NULL && check_line(obj, &l, &why) == 0) {
            /* Clips are fields like images: one limit for both. */
            size_t nf = l.nimages + l.nvideos;
            nimg = (uint8_t)(nf > SL_REC_MAX_IMAGES ? SL_REC_MAX_IMAGES + 1 : nf);
            label = l.label;
            id = l.id;
        }
    }
    if (id == NULL) {
        snprintf(key, sizeof(key), "L%" PRIu32, j->lineno);
        id = key;
    }
    uint64_t off;
    int rc = sl_src_arena_add2(src, j->rel, ':', id, &off);
    json_decref(obj); /* id is copied now */
    if (rc == 0) {
        rc = sl_src_add_sample(src, off, j->full_len, label);
    }
    if (rc < 0) {
        return sl_err(err, errlen, rc, "jsonl '%s:%" PRIu32 "': %s", j->rel, j->lineno,
                      rc == -E2BIG ? "more samples than the source limit" : strerror(-rc));
    }
    src->data_off[src->count - 1] = j->start;
    src->shard[src->count - 1] = j->lineno;
    src->nimages[src->count - 1] = nimg;
    unsigned char n[8];
    for (int k = 0; k < 8; k++) {
        n[k] = (unsigned char)(j->full_len >> (8 * k));
    }
    src->rec_fp = sl_src_fnv1a(src->rec_fp, n, sizeof(n));
    src->rec_fp = sl_src_fnv1a(src->rec_fp, j->line, j->len);
    return 0;
}

static int append(jidx_t *j, const char *p, size_t n)
{
    j->full_len += n;
    if (n == 0) {
        return 0; /* nothing to keep; j->line may still be NULL (no NULL + 0) */
    }
    if (j->len >= SL_SOURCE_MAX_LINE_BYTES) {
        return 0; /* too long: counted, not kept; the sample is a bad line */
    }
    if (n > SL_SOURCE_MAX_LINE_BYTES - j->len) {
        n = (size_t)(SL_SOURCE_MAX_LINE_BYTES - j->len);
    }
    if (sl_src_reserve((void **)&j->line, &j->cap, j->len + n, 1) < 0) {
        return -ENOMEM;
    }
    memcpy(j->line + j->len, p, n);
    j->len += n;
    return 0;
}

static int index_lines(jidx_t *j, int fd, char *err, size_t errlen)
{
    char *buf = malloc(JSONL_CHUNK);
    if (buf == NULL) {
        return sl_err(err, errlen, -ENOMEM, "jsonl: out of memory");
    }
    uint64_t pos = 0;
    int rc = 0;
    j->lineno = 1;
    for (;;) {
        ssize_t n = pread(fd, buf, JSONL_CHUNK, (off_t)pos);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            rc = sl_err(err, errlen, -errno, "jsonl '%s': read: %s", j->rel, strerror(errno));
            goto out;
        }
        if (n == 0) {
            break;
        }
        size_t a = 0;
        for (size_t i = 0; i < (size_t)n; i++) {
            if (buf[i] != '\n') {
                continue;
            }
            rc = append(j, buf + a, i - a);
            if (rc == 0) {
                rc = end_line(j, err, errlen);
            } else {
                rc = sl_err(err, errlen, rc, "jsonl: out of memory");
            }
            if (rc < 0) {
                goto out;
            }
            if (j->lineno == UINT32_MAX) {
                rc = sl_err(err, errlen, -E2BIG, "jsonl '%s': too many lines", j->rel);
                goto out;
            }
            j->lineno++;
            j->start = pos + i + 1;
            j->len = 0;
            j->full_len = 0;
            a = i + 1;
        }
        if (append(j, buf + a, (size_t)n - a) < 0) {
            rc = sl_err(err, errlen, -ENOMEM, "jsonl: out of memory");
            goto out;
        }
        pos += (uint64_t)n;
    }
    if (j->full_len > 0) { /* a last line without '\n' */
        rc = end_line(j, err, errlen);
    }
out:
    free(buf);
    return rc;
}

static int jsonl_index(sl_source_t *src, const char *path, char *err, size_t errlen)
{
    const char *shown = path[0] != '\0' ? path : ".";
    int fd = sl_src_open_path(src, "jsonl manifest", path, O_RDONLY, err, errlen);
    if (fd < 0) {
        return fd;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        int rc = sl_err(err, errlen, -EINVAL, "jsonl manifest '%s': not a regular file", shown);
        close(fd);
        return rc;
    }
    /* Non-blocking only mattered for opening; reads of a regular file block. */
    uint64_t path_off;
    uint32_t idx;
    int rc = sl_src_arena_add(src, path, strlen(path), &path_off);
    if (rc == 0) {
        rc = sl_src_add_shard(src, path_off, fd, &idx);
    }
    if (rc < 0) {
        close(fd);
        return sl_err(err, errlen, rc, "jsonl '%s': %s", shown, strerror(-rc));
    }
    jidx_t j = {.src = src, .rel = path};
    rc = index_lines(&j, fd, err, errlen);
    free(j.line);
    return rc;
}

/* ---- reading ----------------------------------------------------------- */

/* Reads one image (or clip: kind) file beneath the root into a new
 * IMAGE_ENC (VIDEO_ENC) field. where is "manifest:line". */
static int add_image(const sl_source_t *src, sl_tensor_t *out, const char *rel, const char *where,
                     sl_rf_kind_e kind, sl_url_vers_t *vers, char *err, size_t errlen)
{
    const char *what = kind == SL_RF_VIDEO_ENC ? "video" : "image";
    char norm[SL_SRC_PATH_MAX];
    int rc = sl_src_normalize(rel, norm, sizeof(norm));
    if (rc == -EPERM) {
        return sl_err(err, errlen, rc, "%s: %s '%s' escapes the data root", where, what, rel);
    }
    if (rc < 0 || norm[0] == '\0') {
        return sl_err(err, errlen, -EPROTO, "%s: %s path '%.64s' is %s", where, what, rel,
                      rc < 0 ? "too long" : "empty");
    }
    char name[2 * SL_SRC_PATH_MAX + 64];
    snprintf(name, sizeof(name), "%s: %s '%s'", where, what, norm);
    uint64_t size;
    int fd = sl_src_open_regular(src, norm, name, vers, &size, err, errlen);
    if (fd < 0) {
        return fd;
    }
    sl_rfield_t f = {.kind = kind,
                     .dtype = SL_DT_BYTES,
                     .count = 1,
                     .h = (uint32_t)size,
                     .w = 1,
                     .c = 1,
                     .nbytes = (size_t)size};
    uint8_t *p;
    rc = sl_rec_add(out, &f, &p);
    if (rc < 0) {
        rc = sl_err(err, errlen, rc == -EOVERFLOW ? -EFBIG : rc, "%s: record: %s", name,
                    rc == -EOVERFLOW ? "sample too large" : strerror(-rc));
        goto out;
    }
    /* A file that shrank since fstat reads short: -ENOMSG (truncated). */
    rc = sl_src_pread_exact(fd, 0, p, (size_t)size, name, err, errlen);
out:
    close(fd);
    return rc;
}

/* The line's object minus what the record holds elsewhere, canonically
 * serialized; NULL (and *ret_len 0) when nothing is left. */
static int meta_of(const json_t *obj, char **ret, size_t *ret_len)
{
    *ret = NULL;
    *ret_len = 0;
    json_t *m = json_copy((json_t *)obj);
    if (m == NULL) {
        return -ENOMEM;
    }
    json_object_del(m, "text");
    json_object_del(m, "conversations");
    json_object_del(m, "images");
    json_object_del(m, "image");
    json_object_del(m, "videos");
    json_object_del(m, "video");
    int rc = 0;
    if (json_object_size(m) > 0) {
        *ret = json_dumps(m, JSON_SORT_KEYS | JSON_COMPACT);
        if (*ret == NULL) {
            rc = -ENOMEM;
        } else {
            *ret_len = strlen(*ret);
        }
    }
    json_decref(m);
    return rc;
}

/* The record of a parsed manifest line, in kind order: key, label, text,
 * meta, images (read from their files beneath the root). */
static int build_line_record(const sl_source_t *src, uint64_t index, json_t *obj, const char *where,
                             sl_tensor_t *out, sl_url_vers_t *vers, char *err, size_t errlen)
{
    jline_t l;
    const char *why = "";
    char *conv = NULL, *meta = NULL;
    uint32_t *turns = NULL, nturns = 0;
    int rc = check_line(obj, &l, &why);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "%s: %s", where, why);
    }
    if (l.nimages + l.nvideos > SL_REC_MAX_IMAGES) { /* the file changed since indexing */
        return sl_err(err, errlen, -ETOOMANYREFS, "%s: more than %u images", where,
                      SL_REC_MAX_IMAGES);
    }
    const char *text;
    size_t ntext;
    if (l.text != NULL) {
        text = json_string_value(l.text);
        ntext = json_string_length(l.text);
    } else {
        rc = sl_src_conversations_text(obj, &conv, &ntext, &turns, &nturns, &why);
        if (rc < 0) {
            return sl_err(err, errlen, rc, "%s: %s", where, rc == -ENOMEM ? "out of memory" : why);
        }
        text = conv;
    }
    size_t nmeta;
    rc = meta_of(obj, &meta, &nmeta);
    if (rc < 0) {
        free(conv);
        free(turns);
        return sl_err(err, errlen, rc, "%s: out of memory", where);
    }
    const char *key = l.id;
    char lkey[32];
    if (key == NULL) {
        snprintf(lkey, sizeof(lkey), "L%" PRIu32, src->shard[index]);
        key = lkey;
    }
    rc = sl_rec_begin(out);
    if (rc == 0) {
        rc = sl_rec_add_bytes(out, SL_RF_KEY, key, strlen(key));
    }
    if (rc == 0 && l.label >= 0) {
        rc = sl_rec_add_label(out, l.label);
    }
    if (rc < 0) {
        rc = sl_err(err, errlen, rc, "%s: record: %s", where, strerror(-rc));
    } else {
        rc = sl_src_add_text(out, text, ntext, where, err, errlen);
    }
    if (rc == 0 && nmeta > 0) {
        rc = sl_rec_add_bytes(out, SL_RF_META, meta, nmeta);
        if (rc < 0) {
            rc = sl_err(err, errlen, rc == -EOVERFLOW ? -EFBIG : rc, "%s: record: %s", where,
                        strerror(-rc));
        }
    }
    for (size_t i = 0; rc == 0 && i < l.nimages; i++) {
        rc = add_image(src, out, image_at(&l, i), where, SL_RF_IMAGE_ENC, vers, err, errlen);
    }
    for (size_t i = 0; rc == 0 && i < l.nvideos; i++) {
        rc = add_image(src, out, path_at(l.videos, i), where, SL_RF_VIDEO_ENC, vers, err, errlen);
    }
    if (rc == 0) {
        rc = sl_src_add_turns(out, turns, nturns, where, err, errlen);
    }
    if (rc == 0) {
        sl_rec_finish(out);
    }
    free(meta);
    free(conv);
    free(turns);
    return rc;
}

static int jsonl_read(const sl_source_t *src, uint64_t index, sl_tensor_t *out, sl_url_vers_t *vers,
                      char *err, size_t errlen)
{
    const sl_src_shard_t *man = &src->shards[0];
    char where[SL_SRC_PATH_MAX + 16];
    snprintf(where, sizeof(where), "%s:%" PRIu32, src->arena + man->path_off,
             src->shard[index]);
    uint64_t len = src->size[index];
    if (len > SL_SOURCE_MAX_LINE_BYTES) {
        return sl_err(err, errlen, -EPROTO, "%s: line of %" PRIu64 " bytes is over the %" PRIu64
                      " byte limit", where, len, SL_SOURCE_MAX_LINE_BYTES);
    }
    if (src->nimages[index] != SL_SRC_LINE_BAD && src->nimages[index] > SL_REC_MAX_IMAGES) {
        return sl_err(err, errlen, -ETOOMANYREFS, "%s: more than %u images", where,
                      SL_REC_MAX_IMAGES);
    }
    char *line = malloc((size_t)len + 1);
    json_t *obj = NULL;
    int rc;
    if (line == NULL) {
        return sl_err(err, errlen, -ENOMEM, "%s: out of memory", where);
    }
    rc = sl_src_pread_exact(man->fd, src->data_off[index], line, (size_t)len, where, err,
                            errlen);
    if (rc < 0) {
        goto out;
    }
    /* Bytes that are not UTF-8 would fail the JSON parse; they are a text
     * problem (bad_text), not a manifest shape problem. */
    size_t bad;
    if (sl_utf8_check(line, (size_t)len, &bad) < 0) {
        rc = sl_err(err, errlen, -EDOM, "%s: not UTF-8 (byte %zu of the line)", where, bad);
        goto out;
    }
    json_error_t je;
    obj = json_loadb(line, (size_t)len, 0, &je);
    if (obj == NULL) {
        rc = sl_err(err, errlen, -EPROTO, "%s: column %d: %s", where, je.column, je.text);
        goto out;
    }
    rc = build_line_record(src, index, obj, where, out, vers, err, errlen);
out:
    json_decref(obj);
    free(line);
    return rc;
}

/* What the index knows: the images the line names and its length (the
 * text is within it); image sizes are unknown until read. */
static void jsonl_features(const sl_source_t *src, uint64_t index, sl_src_features_t *f)
{
    uint8_t n = src->nimages[index];
    f->nimages = n == SL_SRC_LINE_BAD ? 0 : n;
    f->text_bytes = src->size[index];
    f->text_bytes_exact = false; /* the whole line: an upper bound */
    f->image_bytes_known = false;
}

/* No read_head: sl_source_read_head is -ENOTSUP here, the cost model uses
 * the features instead. */
const sl_src_kind_t sl_src_kind_jsonl = {
    .type = SL_SRC_JSONL,
    .keep = SL_SRC_KEEP_OFFSETS | SL_SRC_KEEP_NIMAGES,
    .record = true,
    .index = jsonl_index,
    .read = jsonl_read,
    .features = jsonl_features,
};
