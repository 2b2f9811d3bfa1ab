/* augment_blur: gaussian_blur and the sharpness op's smoothing. torchvision
 * convolves in float32 with a 2-D kernel and rounds half to even; here the
 * Gaussian runs as two float32 1-D passes (the kernel is separable: the
 * same sums associated differently, a pixel off by one where a sum lands
 * within float rounding of .5). */
#include "common/image/augment.h"
#include "common/image/augment_impl.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#define KERNEL_MAX 255

/* _get_gaussian_kernel1d in float32: linspace(-half, half, k), the pdf,
 * divided by its sum. */
static void gauss_kernel(uint32_t k, double sigma, float *out)
{
    const float half = (float)((k - 1) * 0.5);
    const float s = (float)sigma;
    float sum = 0.0f;
    for (uint32_t i = 0; i < k; i++) {
        float x = k == 1 ? -half : -half + (float)i; /* linspace's step is exactly 1 */
        float t = x / s;
        out[i] = expf(-0.5f * (t * t));
        sum += out[i];
    }
    for (uint32_t i = 0; i < k; i++) {
        out[i] /= sum;
    }
}

/* torch's "reflect" padding index (the edge not repeated), folded again
 * while it is outside: images narrower than the kernel still work. */
static inline uint32_t reflect(int64_t i, uint32_t n)
{
    if (n == 1) {
        return 0;
    }
    const int64_t period = 2 * ((int64_t)n - 1);
    i %= period;
    if (i < 0) {
        i += period;
    }
    return (uint32_t)(i >= n ? period - i : i);
}

int sl_aug_gaussian_blur(sl_tensor_t *io, uint32_t kx, uint32_t ky, double sx, double sy,
                         sl_tensor_t *scratch)
{
    if (sl_aug_check(io) < 0 || scratch == NULL || kx == 0 || ky == 0 || kx % 2 == 0 ||
        ky % 2 == 0 || kx > KERNEL_MAX || ky > KERNEL_MAX || !(sx > 0) || !(sy > 0)) {
        return -EINVAL;
    }
    float kxw[KERNEL_MAX], kyw[KERNEL_MAX];
    gauss_kernel(kx, sx, kxw);
    gauss_kernel(ky, sy, kyw);
    const uint32_t h = io->h, w = io->w, c = io->c;
    const size_t rx = kx / 2, ry = ky / 2;
    const size_t stride = (size_t)w * c;
    /* scratch holds, in float32: the horizontal pass's image, one padded
     * input row and one output row of accumulators. The vertical pass
     * writes the rounded result back over io, whose bytes are no longer
     * needed by then. Loops run over a whole row per kernel tap so they
     * vectorise; each sum still adds its taps in kernel order. */
    int rc = sl_tensor_reshape(scratch, SL_DT_F32, SL_LAYOUT_HWC, h, w, c);
    if (rc < 0) {
        return rc;
    }
    const size_t padded = ((size_t)w + 2 * rx) * c;
    rc = sl_tensor_reserve(scratch, scratch->nbytes + (padded + stride) * sizeof(float));
    if (rc < 0) {
        return rc;
    }
    float *restrict tmp = (float *)(void *)scratch->data;
    float *restrict pad = tmp + (size_t)h * stride;
    float *restrict acc = pad + padded;
    for (uint32_t y = 0; y < h; y++) {
        const uint8_t *row = io->data + (size_t)y * stride;
        for (size_t j = 0; j < (size_t)w + 2 * rx; j++) {
            const uint8_t *src = row + (size_t)reflect((int64_t)j - (int64_t)rx, w) * c;
            for (uint32_t ch = 0; ch < c; ch++) {
                pad[j * c + ch] = (float)src[ch];
            }
        }
        float *trow = tmp + (size_t)y * stride;
        memset(trow, 0, stride * sizeof(float));
        for (size_t k = 0; k < kx; k++) {
            const float kw = kxw[k];
            const float *p = pad + k * c;
            for (size_t i = 0; i < stride; i++) {
                trow[i] += kw * p[i];
            }
        }
    }
    for (uint32_t y = 0; y < h; y++) {
        memset(acc, 0, stride * sizeof(float));
        for (size_t k = 0; k < ky; k++) {
            const float kw = kyw[k];
            const uint32_t src = reflect((int64_t)y + (int64_t)k - (int64_t)ry, h);
            const float *p = tmp + (size_t)src * stride;
            for (size_t i = 0; i < stride; i++) {
                acc[i] += kw * p[i];
            }
        }
        uint8_t *orow = io->data + (size_t)y * stride;
        for (size_t i = 0; i < stride; i++) {
            orow[i] = sl_aug_round_u8(acc[i]);
        }
    }
    return 0;
}

int sl_aug_sharpness(sl_tensor_t *io, double factor, sl_tensor_t *scratch)
{
    if (sl_aug_check(io) < 0 || scratch == NULL || !(factor >= 0)) {
        return -EINVAL;
    }
    const uint32_t h = io->h, w = io->w, c = io->c;
    if (h <= 2 || w <= 2) {
        return 0;
    }
    int rc = sl_tensor_reshape(scratch, SL_DT_U8, SL_LAYOUT_HWC, h, w, c);
    if (rc < 0) {
        return rc;
    }
    /* _blurred_degenerate_image: kernel /= kernel.sum() in float32. */
    const float k1 = 1.0f / 13.0f, k5 = 5.0f / 13.0f;
    const float r = (float)factor, rest = (float)(1.0 - factor);
    const size_t stride = (size_t)w * c;
    const uint8_t *in = io->data;
    uint8_t *out = scratch->data;
    memcpy(out, in, io->nbytes);
    const ptrdiff_t up = -(ptrdiff_t)stride, dn = (ptrdiff_t)stride, l = -(ptrdiff_t)c,
                    r1 = (ptrdiff_t)c;
    for (uint32_t y = 1; y + 1 < h; y++) {
        for (size_t i = c; i < stride - c; i++) {
            const uint8_t *p = in + (size_t)y * stride + i;
            float acc = k1 * (float)p[up + l] + k1 * (float)p[up] + k1 * (float)p[up + r1] +
                        k1 * (float)p[l] + k5 * (float)p[0] + k1 * (float)p[r1] +
                        k1 * (float)p[dn + l] + k1 * (float)p[dn] + k1 * (float)p[dn + r1];
            out[(size_t)y * stride + i] = sl_aug_round_u8(acc);
        }
    }
    /* _blend(img, blurred, factor); the border blends with itself. */
    for (size_t i = 0; i < io->nbytes; i++) {
        float v = r * (float)in[i] + rest * (float)out[i];
        v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
        out[i] = (uint8_t)v;
    }
    sl_tensor_swap(io, scratch);
    return 0;
}
