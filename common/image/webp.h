/* webp: WebP header probing and decoding (libwebp), the WebP twin of png.h.
 * Output is always 8-bit RGB, HWC (SL_DT_U8, c = 3): lossy and lossless
 * files alike; alpha is DROPPED, not composited (what PIL's
 * Image.convert("RGB") does: training pipelines built on it see the colour
 * under transparent pixels). Lossy files decode with libwebp's defaults
 * (fancy upsampling), as PIL does, so pixels equal PIL's with the same
 * libwebp. Animated files are refused (-EBADMSG): PIL would give the first
 * frame, a training set of animations is a mistake worth a skip reason.
 * Thread-safe: no shared state. Nothing is printed.
 *
 * Errors (negative errno, err filled): the codes and meanings of jpeg.h, so
 * common/data/skip.h maps every format to the same skip reasons:
 *   -ENODATA  zero bytes
 *   -EILSEQ   not a WebP (no RIFF....WEBP header)
 *   -EFBIG    width x height > max_pixels, or an RGB output above
 *             SL_TENSOR_MAX_BYTES: from the header, before any image-sized
 *             allocation
 *   -ENOMSG   truncated: the bytes end before the image data does
 *   -EBADMSG  corrupt or unsupported (animation)
 *   -ENOMEM   allocation failed */
#ifndef SL_WEBP_H
#define SL_WEBP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/sample/tensor.h"

/* Bytes the magic check needs: "RIFF", the size, "WEBP". */
#define SL_WEBP_MAGIC_BYTES 12

/* Does buf start like a WebP file (a shorter prefix of the magic counts)? */
bool sl_webp_sniff(const uint8_t *buf, size_t len);

/* Width and height from the header, without decoding; outputs untouched on
 * failure. */
int sl_webp_probe(const uint8_t *buf, size_t len, uint32_t *ret_w, uint32_t *ret_h, char *err,
                  size_t errlen);

/* Full decode to RGB u8 HWC in out (reshaped; its buffer reused when big
 * enough). On failure out's shape and contents are unspecified. */
int sl_webp_decode(const uint8_t *buf, size_t len, uint64_t max_pixels, sl_tensor_t *out, char *err,
                   size_t errlen);

#endif
