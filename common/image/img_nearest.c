/* img_nearest: resize and random_resized_crop with "interpolation":
 * "nearest", torch's tensor nearest (upsample_nearest2d). Pure; any thread. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/image/imgops.h"

#define NEAREST_MAX_EDGE (1u << 28) /* as img_resize.c's bound */

/* torch's upsample_nearest2d (align_corners=False, no scale factor): output
 * pixel d reads input floor(d * (float)in / out), in float32. */
int sl_img_resize_nearest(const sl_tensor_t *in, double x, double y, double w, double h,
                          uint32_t out_h, uint32_t out_w, sl_tensor_t *out)
{
    if (in == NULL || out == NULL || in == out || in->dtype != SL_DT_U8 ||
        in->layout != SL_LAYOUT_HWC || in->data == NULL || out_h == 0 || out_w == 0 ||
        out_h > NEAREST_MAX_EDGE || out_w > NEAREST_MAX_EDGE ||
        !(x >= 0 && y >= 0 && w >= 1 && h >= 1) || x != floor(x) || y != floor(y) ||
        w != floor(w) || h != floor(h) || x + w > in->w || y + h > in->h) {
        return -EINVAL;
    }
    const uint32_t x0 = (uint32_t)x, y0 = (uint32_t)y, cw = (uint32_t)w, ch = (uint32_t)h;
    const uint32_t c = in->c;
    int rc = sl_tensor_reshape(out, SL_DT_U8, SL_LAYOUT_HWC, out_h, out_w, c);
    if (rc < 0) {
        return rc;
    }
    const float sx = (float)cw / (float)out_w, sy = (float)ch / (float)out_h;
    for (uint32_t oy = 0; oy < out_h; oy++) {
        uint32_t iy = (uint32_t)floorf((float)oy * sy);
        iy = iy < ch ? iy : ch - 1;
        const uint8_t *row = in->data + ((size_t)(y0 + iy) * in->w + x0) * c;
        uint8_t *o = out->data + (size_t)oy * out_w * c;
        for (uint32_t ox = 0; ox < out_w; ox++) {
            uint32_t ix = (uint32_t)floorf((float)ox * sx);
            ix = ix < cw ? ix : cw - 1;
            memcpy(o + (size_t)ox * c, row + (size_t)ix * c, c);
        }
    }
    return 0;
}
