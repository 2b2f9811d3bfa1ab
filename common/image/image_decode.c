#include "common/image/image_decode.h"

#include <errno.h>
#include <string.h>

#include "common/base/err.h"
#include "common/image/jpeg.h"
#include "common/image/png.h"
#include "common/image/webp.h"

static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

sl_image_format_e sl_image_sniff(const uint8_t *buf, size_t len)
{
    if (len >= 2 && buf[0] == 0xFF && buf[1] == 0xD8) {
        return SL_IMAGE_JPEG; /* the test jpeg.c makes: SOI */
    }
    size_t n = len < sizeof(png_magic) ? len : sizeof(png_magic);
    if (n > 0 && memcmp(buf, png_magic, n) == 0) {
        return SL_IMAGE_PNG;
    }
    if (len >= 4 && sl_webp_sniff(buf, len)) {
        return SL_IMAGE_WEBP; /* "RIFF" at least: shorter is not worth a guess */
    }
    return SL_IMAGE_UNKNOWN;
}

const char *sl_image_format_name(sl_image_format_e fmt)
{
    switch (fmt) {
    case SL_IMAGE_JPEG:
        return "jpeg";
    case SL_IMAGE_PNG:
        return "png";
    case SL_IMAGE_WEBP:
        return "webp";
    case SL_IMAGE_UNKNOWN:
        break;
    }
    return "unknown";
}

static int not_an_image(size_t len, char *err, size_t errlen)
{
    if (len == 0) {
        return sl_err(err, errlen, -ENODATA, "empty input");
    }
    return sl_err(err, errlen, -EILSEQ, "not an image (no JPEG, PNG or WebP magic bytes)");
}

int sl_image_probe(const uint8_t *buf, size_t len, uint32_t *ret_w, uint32_t *ret_h,
                   sl_image_format_e *ret_fmt, char *err, size_t errlen)
{
    sl_image_format_e fmt = sl_image_sniff(buf, len);
    uint32_t w, h;
    int rc;
    if (fmt == SL_IMAGE_JPEG) {
        sl_jpeg_info_t ji;
        if ((rc = sl_jpeg_probe(buf, len, &ji, err, errlen)) < 0) {
            return rc;
        }
        w = ji.width;
        h = ji.height;
    } else if (fmt == SL_IMAGE_PNG) {
        sl_png_info_t pi;
        if ((rc = sl_png_probe(buf, len, &pi, err, errlen)) < 0) {
            return rc;
        }
        w = pi.width;
        h = pi.height;
    } else if (fmt == SL_IMAGE_WEBP) {
        if ((rc = sl_webp_probe(buf, len, &w, &h, err, errlen)) < 0) {
            return rc;
        }
    } else {
        return not_an_image(len, err, errlen);
    }
    *ret_w = w;
    *ret_h = h;
    if (ret_fmt != NULL) {
        *ret_fmt = fmt;
    }
    return 0;
}

int sl_image_decode(const uint8_t *buf, size_t len, uint64_t max_pixels, sl_tensor_t *out,
                    sl_image_format_e *ret_fmt, char *err, size_t errlen)
{
    sl_image_format_e fmt = sl_image_sniff(buf, len);
    if (ret_fmt != NULL) {
        *ret_fmt = fmt;
    }
    switch (fmt) {
    case SL_IMAGE_JPEG:
        return sl_jpeg_decode(buf, len, max_pixels, out, err, errlen);
    case SL_IMAGE_PNG:
        return sl_png_decode(buf, len, max_pixels, out, err, errlen);
    case SL_IMAGE_WEBP:
        return sl_webp_decode(buf, len, max_pixels, out, err, errlen);
    case SL_IMAGE_UNKNOWN:
        break;
    }
    return not_an_image(len, err, errlen);
}
