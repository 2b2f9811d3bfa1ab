/* image_decode: one front door for encoded images. Sniffs the magic bytes and
 * hands the buffer to jpeg.h (full decode), png.h or webp.h; all return 8-bit RGB
 * HWC and share one set of error codes (see jpeg.h), so a caller maps every
 * failure to a skip reason the same way whatever the format. Thread-safe, no
 * state, never logs.
 *
 *   -ENODATA  zero bytes
 *   -EILSEQ   none of JPEG (FF D8), PNG (its 8-byte signature), WebP (RIFF....WEBP):
 *             "not an image"
 *   -EFBIG, -ENOMSG, -EBADMSG, -ENOMEM  as the format's decoder says */
#ifndef SL_IMAGE_DECODE_H
#define SL_IMAGE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "common/sample/tensor.h"

typedef enum {
    SL_IMAGE_UNKNOWN = 0,
    SL_IMAGE_JPEG,
    SL_IMAGE_PNG,
    SL_IMAGE_WEBP,
} sl_image_format_e;

/* The format the first bytes announce. A prefix of the PNG signature shorter
 * than 8 bytes counts as PNG (its decoder then says "truncated"). */
sl_image_format_e sl_image_sniff(const uint8_t *buf, size_t len);

/* "jpeg", "png", "webp" or "unknown". */
const char *sl_image_format_name(sl_image_format_e fmt);

/* Width and height from the header, without decoding. ret_fmt may be NULL;
 * outputs untouched on failure. */
int sl_image_probe(const uint8_t *buf, size_t len, uint32_t *ret_w, uint32_t *ret_h,
                   sl_image_format_e *ret_fmt, char *err, size_t errlen);

/* Full decode to RGB u8 HWC in out, refusing width x height > max_pixels
 * before any image-sized allocation. ret_fmt may be NULL; it is set (to the
 * sniffed format) on failure too, when the format was recognised. */
int sl_image_decode(const uint8_t *buf, size_t len, uint64_t max_pixels, sl_tensor_t *out,
                    sl_image_format_e *ret_fmt, char *err, size_t errlen);

#endif
