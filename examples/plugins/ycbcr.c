/* ycbcr: RGB to Y'CbCr (ITU-R BT.601, full range, as JPEG/JFIF and PIL's
 * Image.convert("YCbCr")), as a Sluice stage plugin
 * (common/plugin/sluice_plugin.h). No parameters, no randomness:
 *     {"op": "plugin", "name": "rgb_to_ycbcr", "sha256": "..."}
 * Takes 3-channel images (1-channel ones: Y = the gray, Cb = Cr = 128). */
#include <errno.h>
#include <stdio.h>

#include <sluice_plugin.h>

static int out_shape(const void *state, uint32_t h, uint32_t w, uint32_t c, uint32_t *rh,
                     uint32_t *rw, uint32_t *rc, char *err, size_t errlen)
{
    (void)state;
    if (c != 3 && c != 1) {
        snprintf(err, errlen, "rgb_to_ycbcr: takes 1 or 3 channels, got %u", c);
        return -EINVAL;
    }
    *rh = h;
    *rw = w;
    *rc = 3;
    return 0;
}

static uint8_t clamp(double v)
{
    return v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)(v + 0.5);
}

static int process(const void *state, const sluice_plugin_image_t *in,
                   sluice_plugin_image_t *out, sluice_plugin_rng_t *rng, char *err,
                   size_t errlen)
{
    (void)state;
    (void)rng;
    (void)err;
    (void)errlen;
    size_t n = (size_t)in->h * in->w;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = in->data + i * in->c;
        double r = p[0], g = in->c == 3 ? p[1] : p[0], b = in->c == 3 ? p[2] : p[0];
        uint8_t *o = out->data + i * 3;
        o[0] = clamp(0.299 * r + 0.587 * g + 0.114 * b);
        o[1] = clamp(128 - 0.168736 * r - 0.331264 * g + 0.5 * b);
        o[2] = clamp(128 + 0.5 * r - 0.418688 * g - 0.081312 * b);
    }
    return 0;
}

static const sluice_plugin_stage_t YCBCR = {
    .abi = SLUICE_PLUGIN_ABI,
    .name = "rgb_to_ycbcr",
    .version = "1.0",
    .reads = "image",
    .writes = "image",
    .cost_hint = 0.002,
    .out_shape = out_shape,
    .process = process,
};

const sluice_plugin_stage_t *const *sluice_plugin_stages(uint32_t *ret_n)
{
    static const sluice_plugin_stage_t *const stages[] = {&YCBCR};
    *ret_n = 1;
    return stages;
}
