/* source: the public face of a source (source.h) -- the kind table, open
 * and free, the accessors, the fingerprint and the read dispatch. What a
 * kind does is in its row (sl_src_kind_t, source_impl.h) and that row's
 * functions live in the kind's own file: source_imagefolder.c,
 * source_tar.c, source_filelist.c, source_wds.c (+ _shards, _read) and
 * source_jsonl.c. The shared machinery: index storage in source_arena.c,
 * confinement under the data root in source_confine.c, sorted listings in
 * source_dirlist.c, byte reads in source_read.c, record text in
 * source_record.c. */
#include "common/data/source.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/data/source_impl.h"

/* ---- the kind table ---------------------------------------------------- */

/* One row per sl_source_type_e; a kind's row and functions are in its file. */
static const sl_src_kind_t *const k_kinds[] = {
    [SL_SRC_IMAGEFOLDER] = &sl_src_kind_imagefolder,
    [SL_SRC_TAR] = &sl_src_kind_tar,
    [SL_SRC_FILELIST] = &sl_src_kind_filelist,
    [SL_SRC_WEBDATASET] = &sl_src_kind_webdataset,
    [SL_SRC_JSONL] = &sl_src_kind_jsonl,
};

/* The row of type, or NULL for a type no row has. */
static const sl_src_kind_t *kind_of(sl_source_type_e type)
{
    if ((unsigned)type >= sizeof(k_kinds) / sizeof(k_kinds[0])) {
        return NULL;
    }
    return k_kinds[type];
}

/* ---- open / free ------------------------------------------------------- */

static uint64_t compute_fingerprint(const sl_source_t *src)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (uint64_t i = 0; i < src->count; i++) {
        const char *name = src->arena + src->name_off[i];
        unsigned char num[12];
        uint64_t size = src->size[i];
        uint32_t label = (uint32_t)src->label[i];
        /* Fixed little-endian encoding: equal on every host. */
        for (int k = 0; k < 8; k++) {
            num[k] = (unsigned char)(size >> (8 * k));
        }
        for (int k = 0; k < 4; k++) {
            num[8 + k] = (unsigned char)(label >> (8 * k));
        }
        h = sl_src_fnv1a(h, name, strlen(name) + 1);
        h = sl_src_fnv1a(h, num, sizeof(num));
    }
    if (sl_source_is_record(src)) {
        unsigned char fp[8];
        for (int k = 0; k < 8; k++) {
            fp[k] = (unsigned char)(src->rec_fp >> (8 * k));
        }
        h = sl_src_fnv1a(h, fp, sizeof(fp));
    }
    if (src->rs->nurls > 0) {
        /* URL sources: every object's validator, so a changed object changes
         * the fingerprint (source_remote.c). */
        unsigned char fp[8];
        for (int k = 0; k < 8; k++) {
            fp[k] = (unsigned char)(src->rs->fp >> (8 * k));
        }
        h = sl_src_fnv1a(h, fp, sizeof(fp));
    }
    return h;
}

void sl_source_free(sl_source_t *src)
{
    if (src == NULL) {
        return;
    }
    for (uint32_t i = 0; i < src->nshards; i++) {
        if (src->shards[i].fd >= 0) {
            close(src->shards[i].fd);
        }
    }
    if (src->root_fd >= 0) {
        close(src->root_fd);
    }
    free(src->shards);
    free(src->root_real);
    free(src->arena);
    free(src->name_off);
    free(src->size);
    free(src->label);
    free(src->data_off);
    free(src->shard);
    free(src->first);
    free(src->members);
    free(src->nimages);
    free(src->class_off);
    sl_src_pins_free(src->rs);
    free(src->rs);
    sl_src_mix_free(src->mix);
    free(src);
}

int sl_source_open(const char *data_root, sl_source_type_e type, const char *path,
                   sl_source_t **ret_src, char *err, size_t errlen)
{
    return sl_source_open_at(data_root, NULL, type, path, ret_src, err, errlen);
}

int sl_source_open_at(const char *data_root, const sl_remote_t *remote, sl_source_type_e type,
                      const char *path, sl_source_t **ret_src, char *err, size_t errlen)
{
    const sl_src_kind_t *kind = kind_of(type);
    if (kind == NULL) {
        return sl_err(err, errlen, -EINVAL, "source: unknown source type %d", (int)type);
    }
    return sl_src_open_kind(data_root, remote, kind, path, ret_src, err, errlen);
}

int sl_src_open_kind(const char *data_root, const sl_remote_t *remote, const sl_src_kind_t *kind,
                     const char *path, sl_source_t **ret_src, char *err, size_t errlen)
{
    if (data_root == NULL || path == NULL || ret_src == NULL) {
        return sl_err(err, errlen, -EINVAL, "source: missing data root or path");
    }
    char norm[SL_SRC_PATH_MAX];
    if (sl_remote_is_url(path)) {
        /* Refused here, before any request, when outside remote_roots. */
        char why[SL_URL_MAX + 512];
        int crc = sl_remote_check(remote, path, norm, sizeof(norm), why, sizeof(why));
        if (crc < 0) {
            return sl_err(err, errlen, crc, "source path: %s", why);
        }
    }
    int rc = sl_src_normalize(path, norm, sizeof(norm));
    if (rc == -EPERM) {
        return sl_err(err, errlen, rc, "source path '%s' escapes the data root", path);
    }
    if (rc < 0) {
        return sl_err(err, errlen, rc, "source path '%.64s...' is too long", path);
    }
    sl_source_t *src = calloc(1, sizeof(*src));
    if (src == NULL) {
        return sl_err(err, errlen, -ENOMEM, "source: out of memory");
    }
    src->kind = kind;
    src->root_fd = -1;
    src->rs = calloc(1, sizeof(*src->rs));
    if (src->rs == NULL || sl_src_pins_new(src->rs) < 0) {
        free(src->rs);
        free(src);
        return sl_err(err, errlen, -ENOMEM, "source: out of memory");
    }
    src->rs->remote = remote;
    src->root_real = realpath(data_root, NULL);
    if (src->root_real == NULL) {
        rc = sl_err(err, errlen, -errno, "data root '%s': %s", data_root, strerror(errno));
        goto fail;
    }
    src->root_len = strlen(src->root_real);
    src->root_fd = open(src->root_real, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (src->root_fd < 0) {
        rc = sl_err(err, errlen, -errno, "data root '%s': %s", data_root, strerror(errno));
        goto fail;
    }
    src->rs->indexing = true;
    rc = kind->index(src, norm, err, errlen);
    src->rs->indexing = false;
    if (rc < 0) {
        goto fail;
    }
    if (!kind->own_classes) {
        int32_t max = -1;
        for (uint64_t i = 0; i < src->count; i++) {
            if (src->label[i] > max) {
                max = src->label[i];
            }
        }
        src->nclasses = (uint32_t)((int64_t)max + 1);
    }
    src->fingerprint = compute_fingerprint(src);
    if (src->warn_dropped > 0) {
        snprintf(src->warnings + src->warn_len, sizeof(src->warnings) - src->warn_len,
                 " (+%" PRIu32 " more)", src->warn_dropped);
    }
    *ret_src = src;
    return 0;
fail:
    sl_source_free(src);
    return rc;
}

/* ---- accessors ------------------------------------------------------- */

uint64_t sl_source_count(const sl_source_t *src) { return src != NULL ? src->count : 0; }

sl_source_type_e sl_source_type(const sl_source_t *src) { return src->kind->type; }

uint32_t sl_source_num_classes(const sl_source_t *src) { return src != NULL ? src->nclasses : 0; }

const char *sl_source_class_name(const sl_source_t *src, uint32_t label)
{
    if (src == NULL || src->class_off == NULL || label >= src->nclasses) {
        return NULL;
    }
    return src->arena + src->class_off[label];
}

int32_t sl_source_label(const sl_source_t *src, uint64_t index)
{
    return src != NULL && index < src->count ? src->label[index] : -1;
}

uint64_t sl_source_size(const sl_source_t *src, uint64_t index)
{
    return src != NULL && index < src->count ? src->size[index] : 0;
}

const char *sl_source_name(const sl_source_t *src, uint64_t index)
{
    if (src == NULL || index >= src->count) {
        return "?";
    }
    return src->arena + src->name_off[index];
}

bool sl_source_is_record(const sl_source_t *src) { return src != NULL && src->kind->record; }

int sl_source_record_features(const sl_source_t *src, uint64_t index, sl_src_features_t *ret)
{
    if (!sl_source_is_record(src) || ret == NULL) {
        return -EINVAL;
    }
    if (index >= src->count) {
        return -ERANGE;
    }
    sl_src_features_t f = {0};
    src->kind->features(src, index, &f);
    *ret = f;
    return 0;
}

uint64_t sl_source_fingerprint(const sl_source_t *src)
{
    return src != NULL ? src->fingerprint : 0;
}

const char *sl_source_open_warnings(const sl_source_t *src)
{
    return src != NULL ? src->warnings : "";
}

/* ---- reads ------------------------------------------------------------- */

static int read_sample(const sl_source_t *src, uint64_t index, uint64_t max, sl_tensor_t *out,
                       sl_url_vers_t *vers, char *err, size_t errlen)
{
    if (src == NULL || out == NULL) {
        return sl_err(err, errlen, -EINVAL, "source read: missing source or tensor");
    }
    if (index >= src->count) {
        return sl_err(err, errlen, -ERANGE, "sample %" PRIu64 " out of range (%" PRIu64 " samples)",
                      index, src->count);
    }
    if (max == 0) {
        return src->kind->read(src, index, out, vers, err, errlen);
    }
    if (src->kind->read_head == NULL) {
        return sl_err(err, errlen, -ENOTSUP,
                      "%s: a %s source reads whole records, not "
                      "heads (use sl_source_record_features)",
                      src->arena + src->name_off[index], sl_source_type_name(src->kind->type));
    }
    return src->kind->read_head(src, index, max, out, err, errlen);
}

int sl_source_read(const sl_source_t *src, uint64_t index, sl_tensor_t *out, char *err,
                   size_t errlen)
{
    return read_sample(src, index, 0, out, NULL, err, errlen);
}

int sl_source_read_v(const sl_source_t *src, uint64_t index, sl_tensor_t *out, sl_url_vers_t *vers,
                     char *err, size_t errlen)
{
    return read_sample(src, index, 0, out, vers, err, errlen);
}

int sl_source_read_head(const sl_source_t *src, uint64_t index, size_t max, sl_tensor_t *out,
                        char *err, size_t errlen)
{
    if (max == 0) {
        return sl_err(err, errlen, -EINVAL, "source read: a head of 0 bytes");
    }
    return read_sample(src, index, max, out, NULL, err, errlen);
}
