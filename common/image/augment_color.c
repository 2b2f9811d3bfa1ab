/* augment_color: the per-pixel and histogram ops of augment.h. The float
 * expressions are functional_tensor.py's in float32, in its order
 * (never contracted into fused multiply-adds: augment_impl.h), and
 * uint8 results are truncated where torch's .to(uint8) truncates. */
#include "common/image/augment.h"
#include "common/image/augment_impl.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* rgb_to_grayscale's luma: (0.2989 r + 0.587 g) + 0.114 b in float32. */
static inline float luma(const uint8_t *px)
{
    return 0.2989f * (float)px[0] + 0.587f * (float)px[1] + 0.114f * (float)px[2];
}

/* _blend: (ratio * a + (1 - ratio) * b) clamped to [0, 255] and truncated;
 * ratio and 1 - ratio are rounded to float32 first, as torch's scalars. */
static inline uint8_t blend(float ratio, float rest, float a, float b)
{
    float v = ratio * a + rest * b;
    v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
    return (uint8_t)v;
}

int sl_aug_brightness(sl_tensor_t *io, double factor)
{
    if (sl_aug_check(io) < 0 || !(factor >= 0)) {
        return -EINVAL;
    }
    const float r = (float)factor, rest = (float)(1.0 - factor);
    /* 256 inputs: a table. */
    uint8_t lut[256];
    for (int v = 0; v < 256; v++) {
        lut[v] = blend(r, rest, (float)v, 0.0f);
    }
    for (size_t i = 0; i < io->nbytes; i++) {
        io->data[i] = lut[io->data[i]];
    }
    return 0;
}

int sl_aug_contrast(sl_tensor_t *io, double factor)
{
    if (sl_aug_check(io) < 0 || !(factor >= 0)) {
        return -EINVAL;
    }
    const size_t n = (size_t)io->h * io->w;
    /* torch.mean over float32 grays: the exact integer sum, rounded once,
     * is what its cascaded float sum gives up to the last bit. */
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *px = io->data + i * io->c;
        sum += io->c == 3 ? (uint8_t)luma(px) : px[0];
    }
    const float mean = (float)((double)sum / (double)n);
    const float r = (float)factor, rest = (float)(1.0 - factor);
    uint8_t lut[256];
    for (int v = 0; v < 256; v++) {
        lut[v] = blend(r, rest, (float)v, mean);
    }
    for (size_t i = 0; i < io->nbytes; i++) {
        io->data[i] = lut[io->data[i]];
    }
    return 0;
}

int sl_aug_saturation(sl_tensor_t *io, double factor)
{
    if (sl_aug_check(io) < 0 || !(factor >= 0)) {
        return -EINVAL;
    }
    if (io->c == 1) {
        return 0; /* torchvision: "Match PIL behaviour" */
    }
    const float r = (float)factor, rest = (float)(1.0 - factor);
    const size_t n = (size_t)io->h * io->w;
    for (size_t i = 0; i < n; i++) {
        uint8_t *px = io->data + 3 * i;
        const float g = (float)(uint8_t)luma(px);
        for (int ch = 0; ch < 3; ch++) {
            px[ch] = blend(r, rest, (float)px[ch], g);
        }
    }
    return 0;
}

int sl_aug_grayscale(sl_tensor_t *io)
{
    if (sl_aug_check(io) < 0) {
        return -EINVAL;
    }
    if (io->c == 1) {
        return 0;
    }
    const size_t n = (size_t)io->h * io->w;
    for (size_t i = 0; i < n; i++) {
        uint8_t *px = io->data + 3 * i;
        px[0] = px[1] = px[2] = (uint8_t)luma(px);
    }
    return 0;
}

/* torch.remainder for floats: the sign of the divisor. */
static inline float py_mod1(float a)
{
    float m = fmodf(a, 1.0f);
    return m != 0.0f && m < 0.0f ? m + 1.0f : m;
}

/* _rgb2hsv, _hue shift, _hsv2rgb on one pixel of [0, 1] floats. */
static void hue_pixel(uint8_t *px, float shift)
{
    const float r = (float)px[0] / 255.0f, g = (float)px[1] / 255.0f, b = (float)px[2] / 255.0f;
    const float maxc = fmaxf(fmaxf(r, g), b), minc = fminf(fminf(r, g), b);
    const bool eqc = maxc == minc;
    const float cr = maxc - minc;
    const float s = cr / (eqc ? 1.0f : maxc);
    const float div = eqc ? 1.0f : cr;
    const float rc = (maxc - r) / div, gc = (maxc - g) / div, bc = (maxc - b) / div;
    float h;
    if (maxc == r) {
        h = bc - gc;
    } else if (maxc == g) {
        h = 2.0f + rc - bc;
    } else {
        h = 4.0f + gc - rc;
    }
    h = fmodf(h / 6.0f + 1.0f, 1.0f);
    h = py_mod1(h + shift);
    const float v = maxc;
    const float i6 = floorf(h * 6.0f);
    const float f = h * 6.0f - i6;
    int i = (int)i6 % 6;
    const float p = fminf(fmaxf(v * (1.0f - s), 0.0f), 1.0f);
    const float q = fminf(fmaxf(v * (1.0f - s * f), 0.0f), 1.0f);
    const float t = fminf(fmaxf(v * (1.0f - s * (1.0f - f)), 0.0f), 1.0f);
    const float tab[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
    for (int ch = 0; ch < 3; ch++) {
        px[ch] = (uint8_t)(tab[i][ch] * 255.0f);
    }
}

int sl_aug_hue(sl_tensor_t *io, double factor)
{
    if (sl_aug_check(io) < 0 || !(factor >= -0.5 && factor <= 0.5)) {
        return -EINVAL;
    }
    if (io->c == 1) {
        return 0;
    }
    const size_t n = (size_t)io->h * io->w;
    for (size_t i = 0; i < n; i++) {
        hue_pixel(io->data + 3 * i, (float)factor);
    }
    return 0;
}

int sl_aug_solarize(sl_tensor_t *io, double threshold)
{
    if (sl_aug_check(io) < 0 || !(threshold >= 0 && threshold <= 255)) {
        return -EINVAL;
    }
    const float th = (float)threshold; /* torch compares in float32 */
    for (size_t i = 0; i < io->nbytes; i++) {
        uint8_t v = io->data[i];
        io->data[i] = (float)v >= th ? (uint8_t)(255 - v) : v;
    }
    return 0;
}

int sl_aug_posterize(sl_tensor_t *io, uint32_t bits)
{
    if (sl_aug_check(io) < 0 || bits > 8) {
        return -EINVAL;
    }
    const uint8_t mask = (uint8_t)(0xffu << (8 - bits));
    for (size_t i = 0; i < io->nbytes; i++) {
        io->data[i] &= mask;
    }
    return 0;
}

int sl_aug_autocontrast(sl_tensor_t *io)
{
    if (sl_aug_check(io) < 0) {
        return -EINVAL;
    }
    const uint32_t c = io->c;
    const size_t n = (size_t)io->h * io->w;
    for (uint32_t ch = 0; ch < c; ch++) {
        uint8_t lo = 255, hi = 0;
        for (size_t i = 0; i < n; i++) {
            uint8_t v = io->data[i * c + ch];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        /* A flat channel: scale 255/0 is not finite, so torchvision
         * uses minimum 0 and scale 1 (the channel unchanged). Its
         * `255.0 / (maximum - minimum)` is torch's __rtruediv__, that is
         * reciprocal(max - min) * 255 in float32: a quotient rounded
         * twice, which makes 255 of the channel's maximum where one
         * division (254.99998 for max - min = 7) truncates to 254. */
        float mn = lo, scale = 1.0f;
        if (hi != lo) {
            const float inv = 1.0f / ((float)hi - (float)lo);
            scale = inv * 255.0f;
        } else {
            mn = 0.0f;
        }
        uint8_t lut[256];
        for (int v = 0; v < 256; v++) {
            float x = ((float)v - mn) * scale;
            lut[v] = (uint8_t)(x < 0.0f ? 0.0f : x > 255.0f ? 255.0f : x);
        }
        for (size_t i = 0; i < n; i++) {
            io->data[i * c + ch] = lut[io->data[i * c + ch]];
        }
    }
    return 0;
}

int sl_aug_equalize(sl_tensor_t *io)
{
    if (sl_aug_check(io) < 0) {
        return -EINVAL;
    }
    const uint32_t c = io->c;
    const size_t n = (size_t)io->h * io->w;
    for (uint32_t ch = 0; ch < c; ch++) {
        uint64_t hist[256] = {0};
        for (size_t i = 0; i < n; i++) {
            hist[io->data[i * c + ch]]++;
        }
        /* step: the pixels of every non-empty bin but the last one, / 255. */
        int last = 255;
        while (last > 0 && hist[last] == 0) {
            last--;
        }
        uint64_t below = 0;
        for (int v = 0; v < last; v++) {
            below += hist[v];
        }
        const uint64_t step = below / 255;
        if (step == 0) {
            continue;
        }
        /* lut[v] = (cumsum up to v - 1 + step / 2) / step, clamped. */
        uint8_t lut[256];
        uint64_t cum = 0;
        for (int v = 0; v < 256; v++) {
            uint64_t x = (cum + step / 2) / step;
            lut[v] = (uint8_t)(x > 255 ? 255 : x);
            cum += hist[v];
        }
        for (size_t i = 0; i < n; i++) {
            io->data[i * c + ch] = lut[io->data[i * c + ch]];
        }
    }
    return 0;
}
