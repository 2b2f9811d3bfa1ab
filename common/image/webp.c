/* webp: WebP probe and decode through libwebp's advanced API, decoding
 * straight into the caller's tensor (no library-owned copy). */
#include "common/image/webp.h"

#include <errno.h>
#include <string.h>
#include <webp/decode.h>

#include "common/base/err.h"

bool sl_webp_sniff(const uint8_t *buf, size_t len)
{
    if (buf == NULL || len == 0) {
        return false;
    }
    /* "RIFF" ???? "WEBP": bytes 4..7 are the size, anything. */
    static const char riff[4] = {'R', 'I', 'F', 'F'}, webp[4] = {'W', 'E', 'B', 'P'};
    size_t n = len < 4 ? len : 4;
    if (memcmp(buf, riff, n) != 0) {
        return false;
    }
    if (len <= 8) {
        return true;
    }
    n = len < SL_WEBP_MAGIC_BYTES ? len - 8 : 4;
    return memcmp(buf + 8, webp, n) == 0;
}

/* libwebp's status as one of jpeg.h's codes. */
static int status_err(VP8StatusCode st, char *err, size_t errlen)
{
    switch (st) {
    case VP8_STATUS_NOT_ENOUGH_DATA:
        return sl_err(err, errlen, -ENOMSG, "truncated WebP data");
    case VP8_STATUS_OUT_OF_MEMORY:
        return sl_err(err, errlen, -ENOMEM, "out of memory decoding WebP");
    case VP8_STATUS_UNSUPPORTED_FEATURE:
        return sl_err(err, errlen, -EBADMSG, "unsupported WebP feature");
    default:
        return sl_err(err, errlen, -EBADMSG, "corrupt WebP data (libwebp status %d)", (int)st);
    }
}

static int features(const uint8_t *buf, size_t len, WebPBitstreamFeatures *f, char *err,
                    size_t errlen)
{
    if (len == 0) {
        return sl_err(err, errlen, -ENODATA, "empty input");
    }
    if (!sl_webp_sniff(buf, len)) {
        return sl_err(err, errlen, -EILSEQ, "not a WebP (no RIFF/WEBP header)");
    }
    if (len < SL_WEBP_MAGIC_BYTES) {
        return sl_err(err, errlen, -ENOMSG, "truncated WebP header");
    }
    VP8StatusCode st = WebPGetFeatures(buf, len, f);
    if (st != VP8_STATUS_OK) {
        return status_err(st, err, errlen);
    }
    if (f->width <= 0 || f->height <= 0) {
        return sl_err(err, errlen, -EBADMSG, "WebP header with a %dx%d image", f->width, f->height);
    }
    return 0;
}

int sl_webp_probe(const uint8_t *buf, size_t len, uint32_t *ret_w, uint32_t *ret_h, char *err,
                  size_t errlen)
{
    WebPBitstreamFeatures f;
    int rc = features(buf, len, &f, err, errlen);
    if (rc < 0) {
        return rc;
    }
    *ret_w = (uint32_t)f.width;
    *ret_h = (uint32_t)f.height;
    return 0;
}

int sl_webp_decode(const uint8_t *buf, size_t len, uint64_t max_pixels, sl_tensor_t *out, char *err,
                   size_t errlen)
{
    WebPBitstreamFeatures f;
    int rc = features(buf, len, &f, err, errlen);
    if (rc < 0) {
        return rc;
    }
    if (f.has_animation) {
        return sl_err(err, errlen, -EBADMSG, "animated WebP (not supported)");
    }
    const uint64_t px = (uint64_t)f.width * (uint64_t)f.height;
    if (px > max_pixels || px * 3 > SL_TENSOR_MAX_BYTES) {
        return sl_err(err, errlen, -EFBIG, "%dx%d pixels exceed max_pixels %llu", f.width, f.height,
                      (unsigned long long)max_pixels);
    }
    rc = sl_tensor_reshape(out, SL_DT_U8, SL_LAYOUT_HWC, (uint32_t)f.height, (uint32_t)f.width, 3);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "cannot hold a %dx%d image", f.width, f.height);
    }
    WebPDecoderConfig cfg;
    if (!WebPInitDecoderConfig(&cfg)) {
        return sl_err(err, errlen, -EBADMSG, "libwebp version mismatch");
    }
    cfg.output.colorspace = MODE_RGB;
    cfg.output.is_external_memory = 1;
    cfg.output.u.RGBA.rgba = out->data;
    cfg.output.u.RGBA.stride = f.width * 3;
    cfg.output.u.RGBA.size = out->nbytes;
    VP8StatusCode st = WebPDecode(buf, len, &cfg);
    WebPFreeDecBuffer(&cfg.output); /* external memory: frees nothing of ours */
    if (st != VP8_STATUS_OK) {
        return status_err(st, err, errlen);
    }
    return 0;
}
