#include "common/sample/record.h"

#include <errno.h>
#include <string.h>

#include "common/base/err.h"

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

static int repeats(sl_rf_kind_e k)
{
    return k == SL_RF_IMAGE_ENC || k == SL_RF_IMAGE || k == SL_RF_TILES || k == SL_RF_VIDEO_ENC;
}

const char *sl_rf_kind_name(sl_rf_kind_e kind)
{
    switch (kind) {
    case SL_RF_KEY:
        return "key";
    case SL_RF_LABEL:
        return "label";
    case SL_RF_TEXT:
        return "text";
    case SL_RF_META:
        return "meta";
    case SL_RF_TOKENS:
        return "tokens";
    case SL_RF_INPUT_IDS:
        return "input_ids";
    case SL_RF_IMAGE_ENC:
        return "image (encoded)";
    case SL_RF_IMAGE:
        return "image";
    case SL_RF_TILES:
        return "tiles";
    case SL_RF_TURNS:
        return "turns";
    case SL_RF_LABELS:
        return "labels";
    case SL_RF_VIDEO_ENC:
        return "video (encoded)";
    }
    return "?";
}

size_t sl_rec_shape_bytes(const sl_rfield_t *f)
{
    uint64_t dims[4] = {f->count, f->h, f->w, f->c};
    unsigned __int128 n = sl_dtype_size(f->dtype);
    for (int i = 0; i < 4; i++) {
        n *= dims[i];
        if (n > SL_TENSOR_MAX_BYTES) {
            return SIZE_MAX;
        }
    }
    return (size_t)n;
}

/* What each kind's shape must look like; byte strings have h = nbytes. */
static int field_ok(const sl_rfield_t *f)
{
    switch (f->kind) {
    case SL_RF_KEY:
    case SL_RF_TEXT:
    case SL_RF_META:
    case SL_RF_IMAGE_ENC:
    case SL_RF_VIDEO_ENC:
        return f->dtype == SL_DT_BYTES && f->count == 1 && f->w == 1 && f->c == 1 &&
               f->h == f->nbytes;
    case SL_RF_LABEL:
        return f->dtype == SL_DT_U32 && f->count == 1 && f->h == 1 && f->w == 1 && f->c == 1 &&
               f->nbytes == 4;
    case SL_RF_TURNS:
        return f->dtype == SL_DT_U32 && f->count == 1 && f->w == SL_RF_TURN_WORDS && f->c == 1 &&
               sl_rec_shape_bytes(f) == f->nbytes;
    case SL_RF_TOKENS:
    case SL_RF_INPUT_IDS:
    case SL_RF_LABELS:
        return f->dtype == SL_DT_U32 && f->count == 1 && f->w == 1 && f->c == 1 &&
               sl_rec_shape_bytes(f) == f->nbytes;
    case SL_RF_IMAGE:
    case SL_RF_TILES:
        return (f->dtype == SL_DT_U8 || f->dtype == SL_DT_F32) && f->layout <= SL_LAYOUT_CHW &&
               (f->kind == SL_RF_TILES || f->count == 1) && f->h > 0 && f->w > 0 &&
               f->c > 0 && sl_rec_shape_bytes(f) == f->nbytes;
    }
    return 0;
}

int sl_rec_parse(const uint8_t *buf, size_t len, sl_rec_t *ret, char *err, size_t errlen)
{
    if (len < SL_REC_HEADER || memcmp(buf, SL_REC_MAGIC, 4) != 0) {
        return sl_err(err, errlen, -EBADMSG, "not a record (%zu bytes, no SLR1 header)", len);
    }
    uint32_t n = get32(buf + 4);
    uint64_t total = get64(buf + 8);
    if (total != len || n > SL_REC_MAX_FIELDS) {
        return sl_err(err, errlen, -EBADMSG, "record header says %u fields, %llu bytes; have %zu",
                      n, (unsigned long long)total, len);
    }
    size_t off = SL_REC_HEADER;
    int last = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (len - off < SL_REC_FIELD_HEADER) {
            return sl_err(err, errlen, -EBADMSG, "record field %u: header past the end", i);
        }
        const uint8_t *h = buf + off;
        sl_rfield_t *f = &ret->f[i];
        *f = (sl_rfield_t){.kind = h[0], .dtype = h[1], .layout = h[2], .count = get32(h + 4),
                           .h = get32(h + 8), .w = get32(h + 12), .c = get32(h + 16),
                           .src_h = get32(h + 20), .src_w = get32(h + 24)};
        uint64_t nb = get64(h + 32);
        if (h[3] != 0 || get32(h + 28) != 0 || h[0] < SL_RF_KEY || h[0] > SL_RF__MAX) {
            return sl_err(err, errlen, -EBADMSG, "record field %u: bad kind %u or reserved bytes",
                          i, h[0]);
        }
        if ((int)f->kind < last || ((int)f->kind == last && !repeats(f->kind))) {
            return sl_err(err, errlen, -EBADMSG, "record field %u (%s): out of order", i,
                          sl_rf_kind_name(f->kind));
        }
        last = (int)f->kind;
        off += SL_REC_FIELD_HEADER;
        if (nb > len - off || pad8((size_t)nb) > len - off) {
            return sl_err(err, errlen, -EBADMSG, "record field %u (%s): %llu bytes past the end",
                          i, sl_rf_kind_name(f->kind), (unsigned long long)nb);
        }
        f->nbytes = (size_t)nb;
        f->data = buf + off;
        if (!field_ok(f)) {
            return sl_err(err, errlen, -EBADMSG,
                          "record field %u (%s): shape %ux%ux%ux%u %s does not fit %zu bytes", i,
                          sl_rf_kind_name(f->kind), f->count, f->h, f->w, f->c,
                          sl_dtype_name(f->dtype), f->nbytes);
        }
        for (size_t p = f->nbytes; p < pad8(f->nbytes); p++) {
            if (f->data[p] != 0) {
                return sl_err(err, errlen, -EBADMSG, "record field %u: non-zero padding", i);
            }
        }
        off += pad8(f->nbytes);
    }
    if (off != len) {
        return sl_err(err, errlen, -EBADMSG, "record: %zu bytes after the last field", len - off);
    }
    ret->n = n;
    return 0;
}

const sl_rfield_t *sl_rec_find(const sl_rec_t *r, sl_rf_kind_e kind)
{
    for (uint32_t i = 0; i < r->n; i++) {
        if (r->f[i].kind == kind) {
            return &r->f[i];
        }
    }
    return NULL;
}

uint32_t sl_rec_count(const sl_rec_t *r, sl_rf_kind_e kind)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        n += r->f[i].kind == kind;
    }
    return n;
}

int32_t sl_rec_label(const sl_rec_t *r)
{
    const sl_rfield_t *f = sl_rec_find(r, SL_RF_LABEL);
    return f ? (int32_t)get32(f->data) : -1;
}

uint32_t sl_rec_u32(const sl_rfield_t *f, size_t i) { return get32(f->data + 4 * i); }

static const char *const ROLE_NAMES[SL_ROLE__COUNT] = {"system", "user", "assistant"};

const char *sl_role_name(sl_role_e role)
{
    return (unsigned)role < SL_ROLE__COUNT ? ROLE_NAMES[role] : "?";
}

int sl_role_parse(const char *name)
{
    /* LLaVA / ShareGPT spell the roles of the chat formats differently. */
    static const struct {
        const char *name;
        sl_role_e role;
    } ALIASES[] = {{"human", SL_ROLE_USER}, {"gpt", SL_ROLE_ASSISTANT}};
    for (int r = 0; r < SL_ROLE__COUNT; r++) {
        if (strcmp(name, ROLE_NAMES[r]) == 0) {
            return r;
        }
    }
    for (size_t i = 0; i < sizeof(ALIASES) / sizeof(ALIASES[0]); i++) {
        if (strcmp(name, ALIASES[i].name) == 0) {
            return (int)ALIASES[i].role;
        }
    }
    return -EINVAL;
}

int sl_rec_begin(sl_tensor_t *out)
{
    int rc = sl_tensor_reserve(out, SL_REC_HEADER);
    if (rc < 0) {
        return rc;
    }
    out->dtype = SL_DT_RECORD;
    out->layout = SL_LAYOUT_HWC;
    out->h = SL_REC_HEADER;
    out->w = out->c = 1;
    out->nbytes = SL_REC_HEADER;
    memcpy(out->data, SL_REC_MAGIC, 4);
    put32(out->data + 4, 0);
    put64(out->data + 8, SL_REC_HEADER);
    return 0;
}

int sl_rec_add(sl_tensor_t *out, const sl_rfield_t *f, uint8_t **ret_payload)
{
    uint32_t n = get32(out->data + 4);
    if (out->dtype != SL_DT_RECORD || n >= SL_REC_MAX_FIELDS || !field_ok(f)) {
        return -EINVAL;
    }
    /* The last field's kind: walk is cheap (<= 40 fields) and keeps the
     * tensor the only state. */
    int last = 0;
    size_t off = SL_REC_HEADER;
    for (uint32_t i = 0; i < n; i++) {
        last = out->data[off];
        off += SL_REC_FIELD_HEADER + pad8((size_t)get64(out->data + off + 32));
    }
    if ((int)f->kind < last || ((int)f->kind == last && !repeats(f->kind))) {
        return -EINVAL;
    }
    size_t need = off + SL_REC_FIELD_HEADER + pad8(f->nbytes);
    if (need < off || need > SL_TENSOR_MAX_BYTES) {
        return -EOVERFLOW;
    }
    int rc = sl_tensor_reserve(out, need);
    if (rc < 0) {
        return rc;
    }
    uint8_t *h = out->data + off;
    memset(h, 0, SL_REC_FIELD_HEADER);
    h[0] = (uint8_t)f->kind;
    h[1] = (uint8_t)f->dtype;
    h[2] = (uint8_t)f->layout;
    put32(h + 4, f->count);
    put32(h + 8, f->h);
    put32(h + 12, f->w);
    put32(h + 16, f->c);
    put32(h + 20, f->src_h);
    put32(h + 24, f->src_w);
    put64(h + 32, f->nbytes);
    memset(h + SL_REC_FIELD_HEADER + f->nbytes, 0, pad8(f->nbytes) - f->nbytes);
    put32(out->data + 4, n + 1);
    out->nbytes = need;
    out->h = (uint32_t)need;
    *ret_payload = h + SL_REC_FIELD_HEADER;
    return 0;
}

int sl_rec_add_copy(sl_tensor_t *out, const sl_rfield_t *f)
{
    uint8_t *p;
    int rc = sl_rec_add(out, f, &p);
    if (rc == 0 && f->nbytes > 0) {
        memcpy(p, f->data, f->nbytes);
    }
    return rc;
}

int sl_rec_add_bytes(sl_tensor_t *out, sl_rf_kind_e kind, const void *data, size_t n)
{
    if (n > UINT32_MAX) {
        return -EOVERFLOW;
    }
    sl_rfield_t f = {.kind = kind, .dtype = SL_DT_BYTES, .count = 1, .h = (uint32_t)n, .w = 1,
                     .c = 1, .nbytes = n, .data = data};
    return sl_rec_add_copy(out, &f);
}

int sl_rec_add_label(sl_tensor_t *out, int32_t label)
{
    uint8_t v[4];
    put32(v, (uint32_t)label);
    sl_rfield_t f = {.kind = SL_RF_LABEL, .dtype = SL_DT_U32, .count = 1, .h = 1, .w = 1, .c = 1,
                     .nbytes = 4, .data = v};
    return sl_rec_add_copy(out, &f);
}

void sl_rec_finish(sl_tensor_t *out) { put64(out->data + 8, out->nbytes); }
