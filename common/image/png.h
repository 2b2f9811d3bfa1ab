/* png: PNG header probing and decoding (libpng 1.6), the PNG twin of jpeg.h.
 * Output is always 8-bit RGB, HWC (SL_DT_U8, c = 3), whatever the file holds:
 *   - palette (1/2/4/8 bit) is looked up; gray (1/2/4/8/16 bit) is replicated
 *     to R = G = B, low bit depths scaled to 0..255 (1 bit: 0/255, 2 bit: x85,
 *     4 bit: x17), as PIL's "1"/"L;2"/"L;4" unpackers do;
 *   - alpha (RGBA, gray+alpha) and tRNS transparency are DROPPED, not
 *     composited over black (or any background): that is what PIL's
 *     Image.convert("RGB") and torchvision's read_image(mode=RGB) do, and
 *     training pipelines built on them see the colour under transparent pixels;
 *   - 16-bit samples keep their high byte (v >> 8, libpng's png_set_strip_16),
 *     as PIL does for 16-bit RGB, RGBA and gray+alpha (raw modes "RGB;16B",
 *     "RGBA;16B", "LA;16B"). PIL opens 16-bit gray as 32-bit mode "I", whose
 *     convert("RGB") clamps at 255 (a 16-bit gray image turns almost white);
 *     we do not copy that quirk: 16-bit gray also keeps its high byte;
 *   - Adam7 interlaced files are deinterlaced; gamma, sBIT, iCCP and the other
 *     colour metadata are ignored (as PIL does), so pixels are the stored ones.
 * Thread-safe: no shared state; each call owns its libpng read struct. Nothing
 * is printed: libpng's warnings go nowhere, its errors into err.
 *
 * Only the image data is read: chunks after the last IDAT (IEND, trailing
 * text) are not, so a file cut after its pixel data decodes, as in PIL.
 * Ancillary chunks with a bad CRC are skipped (libpng's default); a bad CRC in
 * a critical chunk (IHDR, PLTE, IDAT) is corrupt data.
 *
 * Errors (negative errno, err filled): the codes and meanings of jpeg.h, so
 * common/data/skip.h maps both formats to the same skip reasons:
 *   -ENODATA  zero bytes
 *   -EILSEQ   not a PNG (the 8-byte signature does not match)
 *   -EFBIG    width x height > max_pixels, or an RGB output (or two of
 *             libpng's file rows) above SL_TENSOR_MAX_BYTES: from IHDR,
 *             before libpng is even started
 *   -ENOMSG   truncated: the bytes end before the image data does, or the
 *             IDAT chunks end before the last row ("Not enough image data")
 *   -EBADMSG  corrupt: bad IHDR (width 0, bad depth/colour type), a CRC error
 *             in a critical chunk, bad zlib data, a missing PLTE, ...
 *   -ENOMEM   allocation failed */
#ifndef SL_PNG_H
#define SL_PNG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/sample/tensor.h"

/* Bytes sl_png_probe needs: signature (8) + IHDR chunk (4 + 4 + 13 + 4). */
#define SL_PNG_PROBE_BYTES 33

/* PNG colour types, values as in IHDR. */
typedef enum {
    SL_PNG_GRAY = 0,
    SL_PNG_RGB = 2,
    SL_PNG_PALETTE = 3,
    SL_PNG_GRAY_ALPHA = 4,
    SL_PNG_RGBA = 6,
} sl_png_color_e;

/* The IHDR, read without decoding: what the cost model needs. */
typedef struct sl_png_info_s {
    uint32_t width, height;
    uint32_t channels;    /* samples per pixel in the file: 1 gray/palette, 2, 3, 4 */
    uint32_t bit_depth;   /* 1, 2, 4, 8 or 16 */
    sl_png_color_e color;
    bool interlaced;      /* Adam7 */
} sl_png_info_t;

/* Reads IHDR from the first SL_PNG_PROBE_BYTES bytes (a prefix of the file
 * is enough) and checks its CRC and fields. ret_info untouched on failure. */
int sl_png_probe(const uint8_t *buf, size_t len, sl_png_info_t *ret_info, char *err,
                 size_t errlen);

/* Full decode to RGB u8 HWC in out (reshaped; its buffer reused when big
 * enough). On failure out's shape and contents are unspecified. */
int sl_png_decode(const uint8_t *buf, size_t len, uint64_t max_pixels, sl_tensor_t *out,
                  char *err, size_t errlen);

#endif
