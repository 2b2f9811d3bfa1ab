#include "client/lib/rx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/sample/codec.h"
#include "common/sample/tensor.h"

/* The segments of one sample's data (a reader over the message's slices)
 * as iovecs for the decompressor; n <= the message's segment count. */
static size_t data_iov(const sl_pbw_reader_t *r, struct iovec *iov)
{
    size_t n = 0, left = r->left, off = r->off;
    for (size_t i = r->seg; i < r->nsegs && left > 0; i++, off = 0) {
        size_t k = r->segs[i].n - off < left ? r->segs[i].n - off : left;
        if (k > 0) {
            iov[n++] = (struct iovec){(void *)(r->segs[i].p + off), k};
            left -= k;
        }
    }
    return n;
}

/* Decompresses sample i into a buffer of its own and points its data
 * reader there, so the consumer copies it into its place like any other.
 * The size is judged before the allocation. */
static int inflate_one(cl_rx_t *rx, sl_codec_t *codec, size_t i, struct iovec *iov, char *err,
                       size_t errlen)
{
    sl_wire_sample_t *s = &rx->wb.samples[i];
    const char *why = NULL;
    if (s->dtype == SL_DT_BYTES || s->raw_size == 0 || s->raw_size != sl_wire_shape_bytes(s)) {
        why = "which disagrees with its dtype and shape";
    } else if (rx->raw_total + s->raw_size > CL_RX_MAX_RAW_BYTES) {
        why = "past the limit of decompressed bytes per message";
    }
    if (why != NULL) {
        snprintf(err, errlen, "malformed Batch message: compressed sample %llu declares %llu "
                 "raw bytes, %s", (unsigned long long)s->index,
                 (unsigned long long)s->raw_size, why);
        return -EBADMSG;
    }
    uint8_t *buf = malloc(s->raw_size);
    if (buf == NULL) {
        snprintf(err, errlen, "out of memory decompressing a sample");
        return -ENOMEM;
    }
    rx->bufs[i] = buf;
    rx->raw_total += s->raw_size;
    uint32_t row, step;
    sl_codec_delta_geometry(s->layout == SL_LAYOUT_CHW, s->w, s->c, &row, &step);
    size_t niov = data_iov(&s->data, iov);
    int rc = sl_codec_decompress(codec, (sl_codec_e)s->codec, iov, niov, buf,
                                 s->raw_size, row, step, err, errlen);
    if (rc < 0) {
        return rc;
    }
    rx->dsegs[i] = (sl_pbw_seg_t){buf, s->raw_size};
    sl_pbw_init(&s->data, &rx->dsegs[i], 1);
    return 0;
}

/* Every compressed, non-skipped sample of the message, decompressed now:
 * on the receiving thread (one per stream, so streams decompress in
 * parallel), and before the consumer delivers any sample of it, so a corrupt
 * payload breaks the stream (the split is retried elsewhere) instead of
 * putting other bytes in a batch. */
static int inflate_all(cl_rx_t *rx, sl_codec_t **codec, size_t nsegs, char *err,
                       size_t errlen)
{
    size_t nz = 0;
    for (size_t i = 0; i < rx->wb.n_samples; i++) {
        const sl_wire_sample_t *s = &rx->wb.samples[i];
        nz += s->codec != SL_CODEC_NONE && sl_pbw_left(&s->skip_reason) == 0;
    }
    if (nz == 0) {
        return 0;
    }
    struct iovec *iov = malloc((nsegs ? nsegs : 1) * sizeof(*iov));
    rx->bufs = calloc(rx->wb.n_samples, sizeof(*rx->bufs));
    rx->dsegs = calloc(rx->wb.n_samples, sizeof(*rx->dsegs));
    sl_codec_t *own = NULL;
    if (codec == NULL) {
        codec = &own;
    }
    if (*codec == NULL) {
        *codec = sl_codec_new();
    }
    int rc = 0;
    if (iov == NULL || rx->bufs == NULL || rx->dsegs == NULL || *codec == NULL) {
        snprintf(err, errlen, "out of memory decompressing a message");
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < rx->wb.n_samples && rc == 0; i++) {
        const sl_wire_sample_t *s = &rx->wb.samples[i];
        if (s->codec != SL_CODEC_NONE && sl_pbw_left(&s->skip_reason) == 0) {
            rc = inflate_one(rx, *codec, i, iov, err, errlen);
        }
    }
out:
    free(iov);
    sl_codec_free(own);
    return rc;
}

static int index_segs(cl_rx_t *rx, sl_codec_t **codec, const sl_pbw_seg_t *segs, size_t n,
                      cl_rx_t **ret, char *err, size_t errlen)
{
    int rc = sl_wire_batch_parse(segs, n, SL_WIRE_MAX_SAMPLES, &rx->wb, err, errlen);
    if (rc == 0) {
        rc = inflate_all(rx, codec, n, err, errlen);
    }
    if (rc < 0) {
        cl_rx_free(rx);
        return rc;
    }
    *ret = rx;
    return 0;
}

int cl_rx_from_raw(sl_rpc_raw_t *raw, sl_codec_t **codec, cl_rx_t **ret, char *err,
                   size_t errlen)
{
    *ret = NULL;
    cl_rx_t *rx = calloc(1, sizeof(*rx));
    if (rx == NULL) {
        sl_rpc_raw_free(raw);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    rx->raw = raw;
    size_t n;
    const sl_pbw_seg_t *segs = sl_rpc_raw_segs(raw, &n);
    return index_segs(rx, codec, segs, n, ret, err, errlen);
}

int cl_rx_from_batch(const Sluice__Batch *b, sl_codec_t **codec, cl_rx_t **ret, char *err,
                     size_t errlen)
{
    *ret = NULL;
    cl_rx_t *rx = calloc(1, sizeof(*rx));
    size_t n = sluice__batch__get_packed_size(b);
    if (rx != NULL) {
        rx->flat = malloc(n ? n : 1);
    }
    if (rx == NULL || rx->flat == NULL) {
        cl_rx_free(rx);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    rx->seg = (sl_pbw_seg_t){rx->flat, sluice__batch__pack(b, rx->flat)};
    return index_segs(rx, codec, &rx->seg, 1, ret, err, errlen);
}

void cl_rx_free(cl_rx_t *rx)
{
    if (rx == NULL) {
        return;
    }
    for (size_t i = 0; rx->bufs != NULL && i < rx->wb.n_samples; i++) {
        free(rx->bufs[i]);
    }
    free(rx->bufs);
    free(rx->dsegs);
    sl_wire_batch_free(&rx->wb);
    sl_rpc_raw_free(rx->raw);
    free(rx->flat);
    free(rx);
}
