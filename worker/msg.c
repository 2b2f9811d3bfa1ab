#include "worker/msg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/skip.h"
#include "common/data/source.h"

wk_msg_t *wk_msg_new(uint64_t job_id, uint64_t split_id, uint32_t cap)
{
    if (cap == 0) {
        cap = 1;
    }
    wk_msg_t *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return NULL;
    }
    m->samples = calloc(cap, sizeof(*m->samples));
    m->ptrs = calloc(cap, sizeof(*m->ptrs));
    if (m->samples == NULL || m->ptrs == NULL) {
        free(m->samples);
        free(m->ptrs);
        free(m);
        return NULL;
    }
    sluice__batch__init(&m->batch);
    m->batch.job_id = job_id;
    m->batch.split_id = split_id;
    m->batch.samples = m->ptrs;
    m->batch.n_samples = 0;
    m->cap = cap;
    m->bytes = WK_MSG_OVERHEAD;
    return m;
}

void wk_msg_free(wk_msg_t *m)
{
    if (m == NULL) {
        return;
    }
    for (size_t i = 0; i < m->batch.n_samples; i++) {
        Sluice__Sample *s = &m->samples[i];
        free(s->data.data);
        /* skip_reason points at sl_skip_name's static strings; the detail is ours. */
        if (s->skip_detail != NULL && s->skip_detail != protobuf_c_empty_string) {
            free(s->skip_detail);
        }
        free(s->url_versions);
    }
    free(m->samples);
    free(m->ptrs);
    free(m);
}

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Fills a Sample's scalar fields (not its data pointer) from s. */
static void sample_fill(Sluice__Sample *ps, const sl_sample_t *s, const wk_coding_t *cd)
{
    sluice__sample__init(ps);
    ps->epoch = s->epoch;
    ps->index = s->index;
    ps->position = s->position;
    ps->label = s->label;
    if (s->skip < 0) {
        ps->dtype = (uint32_t)s->t.dtype;
        ps->layout = (uint32_t)s->t.layout;
        ps->h = s->t.h;
        ps->w = s->t.w;
        ps->c = s->t.c;
        ps->data.len = s->t.nbytes;
        if (cd != NULL && cd->codec != SL_CODEC_NONE) {
            ps->codec = cd->codec;
            ps->raw_size = cd->raw_size;
        }
    }
}

/* A delivered sample's URL versions, flattened into a copy the message
 * owns (wk_msg_free frees it). 0 or -ENOMEM. */
static int own_versions(Sluice__Sample *ps, const sl_sample_t *s)
{
    if (s->skip >= 0 || s->vers.n == 0) {
        return 0;
    }
    uint64_t *v = malloc(2 * (size_t)s->vers.n * sizeof(*v));
    if (v == NULL) {
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < s->vers.n; i++) {
        v[2 * i] = s->vers.v[i].url;
        v[2 * i + 1] = s->vers.v[i].tag;
    }
    ps->url_versions = v;
    ps->n_url_versions = 2 * (size_t)s->vers.n;
    return 0;
}

int wk_sample_compress(sl_codec_t *z, int corrupt, sl_sample_t *s, wk_coding_t *ret)
{
    *ret = (wk_coding_t){SL_CODEC_NONE, 0};
    if (s->skip >= 0 || s->t.nbytes == 0 || s->t.dtype == SL_DT_BYTES) {
        return 0; /* nothing to send, or JPEG bytes: they do not shrink */
    }
    uint32_t row, step;
    sl_codec_e codec = sl_codec_for_tensor(&s->t, &row, &step); /* what the profile measured */
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = sl_codec_compress(z, codec, s->t.data, s->t.nbytes, row, step, &buf, &len);
    if (rc == -ENOSPC) {
        return 0; /* would not shrink: raw */
    }
    if (rc < 0) {
        return rc;
    }
    if (corrupt) {
        buf[len / 2] ^= 0x5a; /* past the frame header: only decoding can tell */
    }
    *ret = (wk_coding_t){codec, s->t.nbytes};
    free(s->t.data);
    s->t.data = buf;
    s->t.nbytes = len;
    s->t.cap = len;
    return 0;
}

size_t wk_sample_wire_bytes(const sl_sample_t *s, const char *detail, const wk_coding_t *cd)
{
    Sluice__Sample ps;
    sample_fill(&ps, s, cd);
    if (s->skip >= 0) {
        ps.skip_reason = (char *)sl_skip_name((sl_skip_e)s->skip);
        ps.skip_detail = (char *)(detail != NULL ? detail : "");
    }
    /* get_packed_size only reads data.len for a bytes field, and a packed
     * fixed64 field's count. */
    uint64_t vers[2 * SL_URL_VERS_MAX];
    if (s->skip < 0 && s->vers.n > 0) {
        ps.url_versions = vers;
        ps.n_url_versions = 2 * (size_t)s->vers.n;
    }
    size_t n = sluice__sample__get_packed_size(&ps);
    return 1 + varint_len(n) + n;
}

void wk_msglist_init(wk_msglist_t *l) { memset(l, 0, sizeof(*l)); }

void wk_msglist_push(wk_msglist_t *l, wk_msg_t *m)
{
    m->next = NULL;
    if (l->tail != NULL) {
        l->tail->next = m;
    } else {
        l->head = m;
    }
    l->tail = m;
    l->count++;
    l->bytes += m->bytes;
}

wk_msg_t *wk_msglist_pop(wk_msglist_t *l)
{
    wk_msg_t *m = l->head;
    if (m == NULL) {
        return NULL;
    }
    l->head = m->next;
    if (l->head == NULL) {
        l->tail = NULL;
    }
    m->next = NULL;
    l->count--;
    l->bytes -= m->bytes;
    return m;
}

void wk_msglist_clear(wk_msglist_t *l)
{
    wk_msg_t *m;
    while ((m = wk_msglist_pop(l)) != NULL) {
        wk_msg_free(m);
    }
}

void wk_packer_init(wk_packer_t *pk, uint64_t job_id, uint64_t split_id, uint32_t stage_to,
                    uint32_t batch_size, size_t max_bytes)
{
    memset(pk, 0, sizeof(*pk));
    pk->job_id = job_id;
    pk->split_id = split_id;
    pk->stage_to = stage_to;
    pk->batch_size = batch_size > 0 ? batch_size : 1;
    pk->max_bytes = max_bytes;
}

void wk_packer_reset(wk_packer_t *pk)
{
    wk_msg_free(pk->cur);
    pk->cur = NULL;
}

size_t wk_packer_bytes(const wk_packer_t *pk) { return pk->cur != NULL ? pk->cur->bytes : 0; }

/* Turns s into a too_large skip: its output cannot travel in one message. */
static void make_too_large(wk_packer_t *pk, sl_sample_t *s, size_t wire, char *detail,
                           size_t detail_len)
{
    snprintf(detail, detail_len,
             "sample %llu: output of %zu bytes does not fit a message (max_message_bytes %zu)",
             (unsigned long long)s->index, wire, pk->max_bytes);
    sl_tensor_free(&s->t);
    sl_tensor_init(&s->t);
    s->skip = SL_SKIP_TOO_LARGE;
    pk->skipped_too_large++;
}

/* A processed sample too big for a message goes out as its source bytes in a
 * message of its own with stage_to 0: the client runs every unit on it
 * and gets the same bytes (docs/protocol.md "Samples too big to send"). 1
 * when it went so, 0 when the source bytes do not fit either. */
static int send_raw(wk_packer_t *pk, sl_sample_t *s, wk_msglist_t *out)
{
    sl_tensor_t raw;
    sl_tensor_init(&raw);
    char err[256];
    sl_sample_t r = *s;
    r.vers.n = 0; /* the versions of the bytes sent: this read's */
    if (pk->src == NULL ||
        sl_source_read_v(pk->src, s->index, &raw, &r.vers, err, sizeof(err)) < 0) {
        sl_tensor_free(&raw);
        return 0;
    }
    r.t = raw;
    if (WK_MSG_OVERHEAD + wk_sample_wire_bytes(&r, NULL, NULL) > pk->max_bytes) {
        sl_tensor_free(&raw);
        return 0;
    }
    wk_msg_t *m = wk_msg_new(pk->job_id, pk->split_id, 1);
    if (m == NULL) {
        sl_tensor_free(&raw);
        return 0;
    }
    if (pk->cur != NULL) { /* keeps the samples' order within the split */
        wk_msglist_push(out, pk->cur);
        pk->cur = NULL;
    }
    m->batch.stage_to = 0;
    m->assignment = pk->assignment;
    Sluice__Sample *ps = &m->samples[0];
    sample_fill(ps, &r, NULL);
    if (own_versions(ps, &r) < 0) {
        wk_msg_free(m);
        sl_tensor_free(&raw);
        return 0;
    }
    ps->data.data = raw.data;
    ps->data.len = raw.nbytes;
    m->ptrs[0] = ps;
    m->batch.n_samples = 1;
    m->bytes += wk_sample_wire_bytes(&r, NULL, NULL);
    wk_msglist_push(out, m);
    sl_tensor_free(&s->t);
    pk->sent_raw++;
    return 1;
}

int wk_packer_add(wk_packer_t *pk, sl_sample_t *s, const char *detail, const wk_coding_t *cd,
                  wk_msglist_t *out)
{
    char big[200];
    size_t wire = wk_sample_wire_bytes(s, detail, cd);
    if (s->skip < 0 && WK_MSG_OVERHEAD + wire > pk->max_bytes) {
        if (pk->stage_to > 0 && send_raw(pk, s, out)) {
            return 0;
        }
        make_too_large(pk, s, wire, big, sizeof(big));
        detail = big;
        cd = NULL;
        wire = wk_sample_wire_bytes(s, detail, NULL);
    }
    if (pk->cur != NULL &&
        (pk->cur->batch.n_samples >= pk->batch_size || pk->cur->bytes + wire > pk->max_bytes)) {
        wk_msglist_push(out, pk->cur);
        pk->cur = NULL;
    }
    if (pk->cur == NULL) {
        pk->cur = wk_msg_new(pk->job_id, pk->split_id, pk->batch_size);
        if (pk->cur == NULL) {
            return -ENOMEM;
        }
        pk->cur->batch.stage_to = pk->stage_to;
        pk->cur->assignment = pk->assignment;
    }
    wk_msg_t *m = pk->cur;
    Sluice__Sample *ps = &m->samples[m->batch.n_samples];
    sample_fill(ps, s, s->skip < 0 ? cd : NULL);
    if (s->skip >= 0) {
        ps->skip_reason = (char *)sl_skip_name((sl_skip_e)s->skip);
        if (detail != NULL && detail[0] != '\0') {
            ps->skip_detail = strdup(detail);
            if (ps->skip_detail == NULL) {
                return -ENOMEM;
            }
        }
        sl_tensor_free(&s->t);
    } else {
        if (own_versions(ps, s) < 0) {
            return -ENOMEM;
        }
        /* Moves the tensor's buffer into the message; nbytes may be 0 (empty tensor). */
        ps->data.data = s->t.data;
        ps->data.len = s->t.nbytes;
        sl_tensor_init(&s->t);
    }
    m->ptrs[m->batch.n_samples] = ps;
    m->batch.n_samples++;
    m->bytes += wire;
    return 0;
}

int wk_packer_finish(wk_packer_t *pk, wk_msglist_t *out)
{
    if (pk->cur == NULL) {
        pk->cur = wk_msg_new(pk->job_id, pk->split_id, 1);
        if (pk->cur == NULL) {
            return -ENOMEM;
        }
        pk->cur->batch.stage_to = pk->stage_to;
        pk->cur->assignment = pk->assignment;
    }
    pk->cur->batch.split_done = 1;
    wk_msglist_push(out, pk->cur);
    pk->cur = NULL;
    return 0;
}
