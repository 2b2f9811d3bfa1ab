/* source_wds_read: reading a webdataset record (the members source_wds.c
 * grouped at indexing) and what the index alone tells of one.
 *
 * Reading checks everything the index can tell (sizes, truncation, image
 * count, text present) before allocating, then builds the record in out:
 * the text and each image are pread straight into their field's payload.
 * Records hold KEY, LABEL if any, TEXT (the .txt, else the .json's
 * "conversations"), META (the .json) if any, then the images in order. */
#include <errno.h>
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

/* The extension a non-image member is named with, by role. */
static const char *const k_role_ext[] = {
    [SL_SRC_ROLE_TEXT] = "txt",
    [SL_SRC_ROLE_META] = "json",
};

/* "shard.tar:KEY.ext" for messages. */
static void member_name(const char *sample, const sl_src_member_t *m, char *out, size_t len)
{
    if (m->role != SL_SRC_ROLE_IMAGE && m->role < sizeof(k_role_ext) / sizeof(k_role_ext[0]) &&
        k_role_ext[m->role] != NULL) {
        snprintf(out, len, "%s.%s", sample, k_role_ext[m->role]);
        return;
    }
    const char *ext = m->ext < SL_SRC_EXT__COUNT ? sl_src_img_ext[m->ext] : "?";
    if (m->num != UINT16_MAX) {
        snprintf(out, len, "%s.%u.%s", sample, (unsigned)m->num, ext);
    } else {
        snprintf(out, len, "%s.%s", sample, ext);
    }
}

/* Adds a field of n bytes and preads the member into its payload. */
static int add_member_field(sl_tensor_t *out, sl_rf_kind_e kind, int fd, const sl_src_member_t *m,
                            const char *name, char *err, size_t errlen)
{
    sl_rfield_t f = {.kind = kind,
                     .dtype = SL_DT_BYTES,
                     .count = 1,
                     .h = m->size,
                     .w = 1,
                     .c = 1,
                     .nbytes = m->size};
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
            return sl_err(err, errlen, -EFBIG,
                          "%s: %" PRIu32 " bytes is over the %" PRIu64 " byte limit", mname,
                          m->size, SL_SOURCE_MAX_FILE_BYTES);
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
            return sl_err(err, errlen, -ENOMSG,
                          "%s: truncated: %" PRIu32 " bytes declared, "
                          "the shard ends first",
                          mname, w->ms[i].size);
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
    int rc = sl_src_pread_exact(fd, (uint64_t)meta->block * 512, *ret_buf, meta->size, mname, err,
                                errlen);
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
                    uint32_t **ret_turns, uint32_t *ret_nturns, char *err, size_t errlen)
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
    int rc = sl_src_conversations_text(obj, &conv, &n, ret_turns, ret_nturns, &why);
    if (rc < 0) {
        rc = sl_err(err, errlen, rc, "%s: %s", mname, rc == -ENOMEM ? "out of memory" : why);
    } else {
        rc = sl_src_add_text(out, conv, n, mname, err, errlen);
    }
    free(conv);
    return rc;
}

/* The meta (the .json) and the images, after the text. */
static int add_rest(int fd, const wds_sample_t *w, const char *metabuf, sl_tensor_t *out, char *err,
                    size_t errlen)
{
    if (w->meta != NULL) {
        int rc = sl_rec_add_bytes(out, SL_RF_META, metabuf, w->meta->size);
        if (rc < 0) {
            return sl_err(err, errlen, rc == -EOVERFLOW ? -EFBIG : rc, "%s: record: %s", w->sample,
                          strerror(-rc));
        }
    }
    /* Images, then clips (kind order); each in the sample's order. */
    for (uint32_t i = 0; i < 2 * w->nm; i++) {
        const sl_src_member_t *m = &w->ms[i % w->nm];
        if (m->role != (i < w->nm ? SL_SRC_ROLE_IMAGE : SL_SRC_ROLE_VIDEO)) {
            continue;
        }
        char mname[SL_SRC_PATH_MAX + 32];
        member_name(w->sample, m, mname, sizeof(mname));
        int rc = add_member_field(out, i < w->nm ? SL_RF_IMAGE_ENC : SL_RF_VIDEO_ENC, fd, m, mname,
                                  err, errlen);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

/* The record in kind order: key, label, text, meta, images, clips, turns. */
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
    uint32_t *turns = NULL, nturns = 0;
    rc = add_text(fd, w, obj, out, &turns, &nturns, err, errlen);
    if (rc == 0) {
        rc = add_rest(fd, w, metabuf, out, err, errlen);
    }
    if (rc == 0 && nturns > 0) { /* turns come from the .json */
        char mname[SL_SRC_PATH_MAX + 32];
        member_name(w->sample, w->meta, mname, sizeof(mname));
        rc = sl_src_add_turns(out, turns, nturns, mname, err, errlen);
    }
    free(turns);
    if (rc == 0) {
        sl_rec_finish(out);
    }
    return rc;
}

/* The byte ranges of a sample's members in its shard, for a URL shard's
 * range reads (coalesced later); more members than SL_SRC_MAX_SPANS: one
 * span over them, or 0 (read the shard whole) when they are scattered. */
static size_t member_spans(const sl_src_member_t *ms, uint32_t nm, sl_src_span_t *sp)
{
    if (nm <= SL_SRC_MAX_SPANS) {
        for (uint32_t i = 0; i < nm; i++) {
            sp[i] = (sl_src_span_t){.off = (uint64_t)ms[i].block * 512, .len = ms[i].size};
        }
        return nm;
    }
    /* A record of many images: one span over its members when they lie
     * together, as WebDataset writes a sample (headers between them; no
     * span here made every such read fetch the whole shard). Scattered
     * members: 0, the shard whole. */
    uint64_t lo = UINT64_MAX, hi = 0, want = 0;
    for (uint32_t i = 0; i < nm; i++) {
        uint64_t off = (uint64_t)ms[i].block * 512;
        lo = off < lo ? off : lo;
        hi = off + ms[i].size > hi ? off + ms[i].size : hi;
        want += ms[i].size + SL_SRC_SPAN_GAP;
    }
    if (hi - lo > want) {
        return 0;
    }
    sp[0] = (sl_src_span_t){.off = lo, .len = hi - lo};
    return 1;
}

int sl_src_wds_read(const sl_source_t *src, uint64_t index, sl_tensor_t *out, sl_url_vers_t *vers,
                    char *err, size_t errlen)
{
    (void)vers; /* shards are indexed: their validators are in the fingerprint */
    wds_sample_t w;
    int rc = check_members(src, index, &w, err, errlen);
    if (rc < 0) {
        return rc;
    }
    bool close_fd;
    sl_src_span_t sp[SL_SRC_MAX_SPANS];
    size_t nsp = member_spans(w.ms, w.nm, sp);
    int fd = sl_src_shard_fd_spans(src, w.ms[0].shard, sp, nsp, w.sample, &close_fd, err, errlen);
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

int sl_src_wds_read_heads(const sl_source_t *src, uint64_t index, uint64_t max, sl_tensor_t *out,
                          char *err, size_t errlen)
{
    const char *sample = src->arena + src->name_off[index];
    const sl_src_member_t *ms = src->members + src->first[index];
    uint32_t nm = src->first[index + 1] - src->first[index];
    bool close_fd;
    sl_src_span_t sp[SL_SRC_MAX_SPANS];
    size_t nsp = member_spans(ms, nm, sp);
    int fd = sl_src_shard_fd_spans(src, ms[0].shard, sp, nsp, sample, &close_fd, err, errlen);
    if (fd < 0) {
        return fd;
    }
    int rc = sl_rec_begin(out);
    uint32_t nimg = 0;
    /* Images' heads, then clips' (kind order). */
    for (uint32_t i = 0; rc == 0 && i < 2 * nm; i++) {
        const sl_src_member_t *m = &ms[i % nm];
        uint8_t role = i < nm ? SL_SRC_ROLE_IMAGE : SL_SRC_ROLE_VIDEO;
        if (m->role != role || m->size == 0 || ++nimg > SL_REC_MAX_IMAGES) {
            continue;
        }
        sl_src_member_t head = *m;
        head.size = max < m->size ? (uint32_t)max : m->size;
        char mname[SL_SRC_PATH_MAX + 32];
        member_name(sample, m, mname, sizeof(mname));
        rc = add_member_field(out, i < nm ? SL_RF_IMAGE_ENC : SL_RF_VIDEO_ENC, fd, &head, mname,
                              err, errlen);
    }
    if (rc == 0) {
        sl_rec_finish(out);
    }
    if (close_fd) {
        close(fd);
    }
    return rc;
}

void sl_src_wds_features(const sl_source_t *src, uint64_t index, sl_src_features_t *f)
{
    bool has_text = false;
    uint64_t meta = 0;
    for (uint32_t m = src->first[index]; m < src->first[index + 1]; m++) {
        const sl_src_member_t *mb = &src->members[m];
        if (mb->role == SL_SRC_ROLE_IMAGE || mb->role == SL_SRC_ROLE_VIDEO) {
            f->nimages++; /* a clip is one visual input here, its bytes too */
            f->image_bytes += mb->size;
        } else if (mb->role == SL_SRC_ROLE_TEXT) {
            f->text_bytes = mb->size;
            has_text = true;
        } else if (mb->role == SL_SRC_ROLE_META) {
            meta = mb->size;
        }
    }
    /* Without .txt the text comes from the .json's conversations. */
    f->text_bytes_exact = has_text;
    if (!has_text) {
        f->text_bytes = meta;
    }
    f->image_bytes_known = true;
}
