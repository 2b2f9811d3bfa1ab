#include "client/lib/batch_wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sample/tensor.h"

static uint64_t shape_bytes(const sl_wire_sample_t *s, size_t esz);

static int fail(char *err, size_t errlen, int rc, const char *what)
{
    snprintf(err, errlen, "malformed Batch message: %s", what);
    return rc;
}

/* A varint field, or -EBADMSG for any other wire type. */
static int want_varint(sl_pbw_reader_t *r, uint32_t wt, uint64_t *v)
{
    return wt == SL_PBW_VARINT ? sl_pbw_varint(r, v) : -EBADMSG;
}

static int parse_sample(sl_pbw_reader_t *r, sl_wire_sample_t *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    while (sl_pbw_left(r) > 0) {
        uint32_t f, wt;
        uint64_t v = 0;
        int rc = sl_pbw_tag(r, &f, &wt);
        if (rc < 0) {
            return fail(err, errlen, rc, "bad field key in a sample");
        }
        switch (f) {
        case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 8: case 9: case 13:
        case 14:
            rc = want_varint(r, wt, &v);
            break;
        case 10:
            rc = wt == SL_PBW_LEN ? sl_pbw_sub(r, &s->data) : -EBADMSG;
            break;
        case 11:
            rc = wt == SL_PBW_LEN ? sl_pbw_sub(r, &s->skip_reason) : -EBADMSG;
            break;
        case 12:
            rc = wt == SL_PBW_LEN ? sl_pbw_sub(r, &s->skip_detail) : -EBADMSG;
            break;
        case 50: /* packed, as protobuf-c writes a proto3 repeated fixed64 */
            rc = wt == SL_PBW_LEN ? sl_pbw_sub(r, &s->url_versions) : -EBADMSG;
            break;
        default:
            rc = sl_pbw_skip(r, wt); /* a field from a newer worker */
            break;
        }
        if (rc < 0) {
            char what[96];
            snprintf(what, sizeof(what), "sample field %u (wire type %u) truncated or mistyped",
                     f, wt);
            return fail(err, errlen, rc, what);
        }
        /* Integer widths as protobuf: uint32/int32 keep the low 32 bits. */
        switch (f) {
        case 1: s->epoch = v; break;
        case 2: s->index = v; break;
        case 3: s->position = v; break;
        case 4: s->label = (int32_t)(uint32_t)v; break;
        case 5: s->dtype = (uint32_t)v; break;
        case 6: s->layout = (uint32_t)v; break;
        case 7: s->h = (uint32_t)v; break;
        case 8: s->w = (uint32_t)v; break;
        case 9: s->c = (uint32_t)v; break;
        case 13: s->codec = (uint32_t)v; break;
        case 14: s->raw_size = v; break;
        default: break;
        }
    }
    return 0;
}

int sl_wire_batch_parse(const sl_pbw_seg_t *segs, size_t nsegs, size_t max_samples,
                        sl_wire_batch_t *ret, char *err, size_t errlen)
{
    memset(ret, 0, sizeof(*ret));
    sl_pbw_reader_t r;
    sl_pbw_init(&r, segs, nsegs);
    size_t cap = 0;
    int rc = 0;
    while (sl_pbw_left(&r) > 0) {
        uint32_t f, wt;
        uint64_t v = 0;
        rc = sl_pbw_tag(&r, &f, &wt);
        if (rc < 0) {
            rc = fail(err, errlen, rc, "bad field key");
            break;
        }
        if (f == 3) {
            sl_pbw_reader_t sub;
            rc = wt == SL_PBW_LEN ? sl_pbw_sub(&r, &sub) : -EBADMSG;
            if (rc < 0) {
                rc = fail(err, errlen, rc, "sample length past the end or mistyped");
                break;
            }
            if (ret->n_samples == max_samples) {
                rc = fail(err, errlen, -EBADMSG, "too many samples in one message");
                break;
            }
            if (ret->n_samples == cap) {
                size_t ncap = cap ? cap * 2 : 32;
                ncap = ncap < max_samples ? ncap : max_samples;
                sl_wire_sample_t *p = realloc(ret->samples, ncap * sizeof(*p));
                if (p == NULL) {
                    rc = -ENOMEM;
                    snprintf(err, errlen, "out of memory indexing a Batch message");
                    break;
                }
                ret->samples = p;
                cap = ncap;
            }
            rc = parse_sample(&sub, &ret->samples[ret->n_samples], err, errlen);
            if (rc < 0) {
                break;
            }
            ret->n_samples++;
            continue;
        }
        if (f == 1 || f == 2 || f == 4 || f == 5) {
            rc = want_varint(&r, wt, &v);
        } else {
            rc = sl_pbw_skip(&r, wt);
        }
        if (rc < 0) {
            char what[64];
            snprintf(what, sizeof(what), "field %u (wire type %u) truncated or mistyped", f, wt);
            rc = fail(err, errlen, rc, what);
            break;
        }
        switch (f) {
        case 1: ret->job_id = v; break;
        case 2: ret->split_id = v; break;
        case 4: ret->split_done = v != 0; break;
        case 5: ret->stage_to = (uint32_t)v; break;
        default: break;
        }
    }
    if (rc < 0) {
        sl_wire_batch_free(ret);
    }
    return rc;
}

void sl_wire_batch_free(sl_wire_batch_t *b)
{
    free(b->samples);
    memset(b, 0, sizeof(*b));
}

size_t sl_wire_string(const sl_pbw_reader_t *r, char *buf, size_t len)
{
    size_t full = sl_pbw_left(r);
    size_t n = full < len - 1 ? full : len - 1;
    sl_pbw_reader_t c = *r;
    if (sl_pbw_copy(&c, buf, n) < 0) {
        n = 0; /* cannot happen: n <= left */
    }
    buf[n] = '\0';
    return full;
}

uint64_t sl_wire_shape_bytes(const sl_wire_sample_t *s)
{
    return shape_bytes(s, s->dtype == SL_DT_F32 ? 4 : 1);
}

/* h*w*c*esz without overflow; 0 when beyond SL_TENSOR_MAX_BYTES. */
static uint64_t shape_bytes(const sl_wire_sample_t *s, size_t esz)
{
    uint64_t n = esz;
    const uint32_t d[3] = {s->h, s->w, s->c};
    for (int i = 0; i < 3; i++) {
        if (d[i] != 0 && n > SL_TENSOR_MAX_BYTES / d[i]) {
            return 0;
        }
        n *= d[i];
    }
    return n;
}

int sl_wire_sample_check(const sl_wire_sample_t *s, uint32_t stage_to, uint32_t nunits,
                         char *detail, size_t len)
{
    size_t n = sl_pbw_left(&s->data);
    if (stage_to > nunits) {
        snprintf(detail, len,
                 "sample %llu from a worker: stage_to %u is beyond the pipeline's %u units",
                 (unsigned long long)s->index, stage_to, nunits);
        return -EBADMSG;
    }
    size_t esz = s->dtype == SL_DT_F32 ? 4 : 1;
    /* Encoded bytes only when no unit ran; records at any stage (a record
     * that has not been processed is a record of encoded fields). */
    int bad = s->dtype > SL_DT_RECORD || s->dtype == SL_DT_U32 || s->layout > SL_LAYOUT_CHW ||
              (s->dtype != SL_DT_BYTES && shape_bytes(s, esz) != n) ||
              (s->dtype == SL_DT_BYTES && stage_to != 0) ||
              (s->dtype != SL_DT_BYTES && s->dtype != SL_DT_RECORD && stage_to == 0);
    if (bad) {
        snprintf(detail, len, "sample %llu from a worker has an inconsistent shape",
                 (unsigned long long)s->index);
        return -EBADMSG;
    }
    if (n == 0 || n > SL_TENSOR_MAX_BYTES) {
        snprintf(detail, len, "a worker sent an empty or oversized sample");
        return -EBADMSG;
    }
    return 0;
}

static uint64_t le64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = v << 8 | b[i];
    }
    return v;
}

int sl_wire_url_versions(const sl_wire_sample_t *s, sl_url_vers_t *ret, char *detail, size_t len)
{
    ret->n = 0;
    sl_pbw_reader_t r = s->url_versions;
    size_t n = sl_pbw_left(&r);
    if (n % 16 != 0 || n / 16 > SL_URL_VERS_MAX) {
        snprintf(detail, len, "url_versions: %zu bytes, not whole pairs or more than %u", n,
                 SL_URL_VERS_MAX);
        return -EBADMSG;
    }
    for (size_t i = 0; i < n / 16; i++) {
        uint8_t b[16];
        (void)sl_pbw_copy(&r, b, sizeof(b)); /* cannot fall short: n counted them */
        uint64_t url = le64(b), tag = le64(b + 8);
        for (uint32_t k = 0; k < ret->n && url != 0; k++) {
            url = ret->v[k].url == url && ret->v[k].tag != tag ? 0 : url;
        }
        if (url == 0 || tag == 0) {
            snprintf(detail, len,
                     "url_versions: pair %zu has a zero hash or validator, or "
                     "names a URL twice with two validators",
                     i);
            return -EBADMSG;
        }
        (void)sl_url_vers_add(ret, url, tag); /* room: n / 16 <= SL_URL_VERS_MAX */
    }
    return 0;
}
