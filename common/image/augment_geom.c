/* augment_geom: the affine warp behind random_rotation, random_affine and
 * the policies' shear/translate/rotate ops, and random_erasing's paint.
 * The warp is torchvision's tensor path: _gen_affine_grid then
 * grid_sample(align_corners=False, zeros padding) in float32, a coverage
 * mask for the fill, torch.round. */
#include "common/image/augment.h"
#include "common/image/augment_impl.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static double radians(double deg) { return deg * (M_PI / 180.0); }

void sl_aug_affine_matrix(uint32_t h, uint32_t w, const double *center, double angle, double tx,
                          double ty, double scale, double shear_x, double shear_y, double ret_m[6])
{
    /* The tensor path measures the centre from the image's middle. */
    double cx = 0, cy = 0;
    if (center != NULL) {
        cx = center[0] - w * 0.5;
        cy = center[1] - h * 0.5;
    }
    const double rot = radians(angle), sx = radians(shear_x), sy = radians(shear_y);
    const double a = cos(rot - sy) / cos(sy);
    const double b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
    const double c = sin(rot - sy) / cos(sy);
    const double d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);
    double m[6] = {d, -b, 0.0, -c, a, 0.0};
    for (int i = 0; i < 6; i++) {
        m[i] /= scale;
    }
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
    memcpy(ret_m, m, sizeof(m));
}

/* One output pixel's source position in input pixel units, as
 * _gen_affine_grid and grid_sample's unnormalize compute it in float32. */
typedef struct {
    float a0, a1, a2, b0, b1, b2; /* theta rows divided by (w/2, h/2) */
    float fw, fh;
} grid_t;

static inline void grid_at(const grid_t *g, float x, float y, float *ret_ix, float *ret_iy)
{
    const float gx = x * g->a0 + y * g->a1 + g->a2;
    const float gy = x * g->b0 + y * g->b1 + g->b2;
    *ret_ix = ((gx + 1.0f) * g->fw - 1.0f) / 2.0f;
    *ret_iy = ((gy + 1.0f) * g->fh - 1.0f) / 2.0f;
}

int sl_aug_warp(sl_tensor_t *io, const double m[6], sl_aug_interp_e interp, const double *fill,
                sl_tensor_t *scratch)
{
    if (sl_aug_check(io) < 0 || scratch == NULL || m == NULL ||
        (interp != SL_AUG_NEAREST && interp != SL_AUG_BILINEAR)) {
        return -EINVAL;
    }
    for (int i = 0; i < 6; i++) {
        if (!isfinite(m[i])) {
            return -EINVAL;
        }
    }
    const uint32_t h = io->h, w = io->w, c = io->c;
    int rc = sl_tensor_reshape(scratch, SL_DT_U8, SL_LAYOUT_HWC, h, w, c);
    if (rc < 0) {
        return rc;
    }
    const float hw = (float)(0.5 * w), hh = (float)(0.5 * h);
    const grid_t g = {.a0 = (float)m[0] / hw,
                      .a1 = (float)m[1] / hw,
                      .a2 = (float)m[2] / hw,
                      .b0 = (float)m[3] / hh,
                      .b1 = (float)m[4] / hh,
                      .b2 = (float)m[5] / hh,
                      .fw = (float)w,
                      .fh = (float)h};
    float fillf[3] = {0, 0, 0};
    for (uint32_t ch = 0; fill != NULL && ch < c; ch++) {
        fillf[ch] = (float)fill[ch];
    }
    const uint8_t *in = io->data;
    uint8_t *out = scratch->data;
    for (uint32_t oy = 0; oy < h; oy++) {
        /* linspace(-h/2 + 0.5, h/2 - 0.5): half-integers, exact in float. */
        const float y = (float)oy - (float)(0.5 * h) + 0.5f;
        for (uint32_t ox = 0; ox < w; ox++) {
            const float x = (float)ox - (float)(0.5 * w) + 0.5f;
            float ix, iy;
            grid_at(&g, x, y, &ix, &iy);
            uint8_t *o = out + ((size_t)oy * w + ox) * c;
            if (interp == SL_AUG_NEAREST) {
                const float nx = nearbyintf(ix), ny = nearbyintf(iy);
                const bool inside = nx >= 0 && nx < (float)w && ny >= 0 && ny < (float)h;
                for (uint32_t ch = 0; ch < c; ch++) {
                    o[ch] = inside         ? in[((size_t)ny * w + (size_t)nx) * c + ch]
                            : fill != NULL ? sl_aug_round_u8(fillf[ch])
                                           : 0;
                }
                continue;
            }
            const float x0 = floorf(ix), y0 = floorf(iy);
            const float wx1 = ix - x0, wx0 = (x0 + 1.0f) - ix;
            const float wy1 = iy - y0, wy0 = (y0 + 1.0f) - iy;
            const float cw[4] = {wx0 * wy0, wx1 * wy0, wx0 * wy1, wx1 * wy1};
            const float cxs[4] = {x0, x0 + 1.0f, x0, x0 + 1.0f};
            const float cys[4] = {y0, y0, y0 + 1.0f, y0 + 1.0f};
            float acc[3] = {0, 0, 0}, mask = 0.0f;
            for (int k = 0; k < 4; k++) {
                if (cxs[k] < 0 || cxs[k] >= (float)w || cys[k] < 0 || cys[k] >= (float)h) {
                    continue; /* zeros padding */
                }
                const uint8_t *p = in + ((size_t)cys[k] * w + (size_t)cxs[k]) * c;
                for (uint32_t ch = 0; ch < c; ch++) {
                    acc[ch] += (float)p[ch] * cw[k];
                }
                mask += cw[k];
            }
            for (uint32_t ch = 0; ch < c; ch++) {
                float v = acc[ch];
                if (fill != NULL) {
                    v = v * mask + (1.0f - mask) * fillf[ch];
                }
                o[ch] = sl_aug_round_u8(v);
            }
        }
    }
    sl_tensor_swap(io, scratch);
    return 0;
}

int sl_aug_erase(sl_tensor_t *io, uint32_t x, uint32_t y, uint32_t w, uint32_t h,
                 const double *value, sl_rng_t *r)
{
    if (sl_aug_check(io) < 0 || (uint64_t)x + w > io->w || (uint64_t)y + h > io->h ||
        (value == NULL && r == NULL)) {
        return -EINVAL;
    }
    const uint32_t c = io->c;
    uint8_t v[3] = {0, 0, 0};
    for (uint32_t ch = 0; value != NULL && ch < c; ch++) {
        if (!(value[ch] >= 0 && value[ch] < 256)) {
            return -EINVAL;
        }
        v[ch] = (uint8_t)value[ch];
    }
    /* Random bytes: eight from each draw, little-endian, in row order, so
     * the stream's use depends on the area only. */
    uint64_t bits = 0;
    unsigned left = 0;
    for (uint32_t row = y; row < y + h; row++) {
        uint8_t *p = io->data + ((size_t)row * io->w + x) * c;
        for (size_t i = 0; i < (size_t)w * c; i++) {
            if (value != NULL) {
                p[i] = v[i % c];
                continue;
            }
            if (left == 0) {
                bits = sl_rng_u64(r);
                left = 8;
            }
            p[i] = (uint8_t)bits;
            bits >>= 8;
            left--;
        }
    }
    return 0;
}

/* Where padded coordinate u (u < 0: before the image) reads from in an
 * axis of n pixels; -1 for the constant fill. */
static int64_t pad_src(int64_t u, int64_t n, sl_aug_pad_e mode)
{
    if (u >= 0 && u < n) {
        return u;
    }
    switch (mode) {
    case SL_AUG_PAD_EDGE:
        return u < 0 ? 0 : n - 1;
    case SL_AUG_PAD_REFLECT: {
        if (n == 1) {
            return 0;
        }
        const int64_t period = 2 * (n - 1);
        int64_t m = (u < 0 ? -u : u) % period;
        return m >= n ? period - m : m;
    }
    case SL_AUG_PAD_SYMMETRIC: {
        int64_t m = u % (2 * n);
        m = m < 0 ? m + 2 * n : m;
        return m >= n ? 2 * n - 1 - m : m;
    }
    default:
        return -1;
    }
}

int sl_aug_pad(sl_tensor_t *io, const uint32_t pad[4], sl_aug_pad_e mode, const double *fill,
               sl_tensor_t *scratch)
{
    if (sl_aug_check(io) < 0 || scratch == NULL || pad == NULL || (unsigned)mode > 3) {
        return -EINVAL;
    }
    for (int i = 0; i < 4; i++) {
        if (pad[i] > SL_AUG_PAD_MAX) {
            return -EINVAL;
        }
    }
    if ((pad[0] | pad[1] | pad[2] | pad[3]) == 0) {
        return 0;
    }
    const uint32_t c = io->c, w = io->w, h = io->h;
    const uint32_t ow = w + pad[0] + pad[2], oh = h + pad[1] + pad[3];
    uint8_t v[3] = {0, 0, 0};
    for (uint32_t ch = 0; fill != NULL && ch < c; ch++) {
        if (!(fill[ch] >= 0 && fill[ch] < 256)) {
            return -EINVAL;
        }
        v[ch] = (uint8_t)fill[ch];
    }
    int rc = sl_tensor_reshape(scratch, SL_DT_U8, SL_LAYOUT_HWC, oh, ow, c);
    if (rc < 0) {
        return rc;
    }
    for (uint32_t oy = 0; oy < oh; oy++) {
        const int64_t sy = pad_src((int64_t)oy - pad[1], h, mode);
        uint8_t *o = scratch->data + (size_t)oy * ow * c;
        for (uint32_t ox = 0; ox < ow; ox++) {
            const int64_t sx = pad_src((int64_t)ox - pad[0], w, mode);
            const uint8_t *p = sx < 0 || sy < 0 ? v : io->data + ((size_t)sy * w + (size_t)sx) * c;
            memcpy(o + (size_t)ox * c, p, c);
        }
    }
    sl_tensor_swap(io, scratch);
    return 0;
}

int sl_aug_pad_for_crop(sl_tensor_t *io, const uint32_t pad[4], bool pad_if_needed, uint32_t th,
                        uint32_t tw, sl_aug_pad_e mode, const double *fill, sl_tensor_t *scratch)
{
    int rc = sl_aug_pad(io, pad, mode, fill, scratch);
    if (rc == 0 && pad_if_needed && io->w < tw) {
        const uint32_t more = tw - io->w;
        rc = sl_aug_pad(io, (const uint32_t[4]){more, 0, more, 0}, mode, fill, scratch);
    }
    if (rc == 0 && pad_if_needed && io->h < th) {
        const uint32_t more = th - io->h;
        rc = sl_aug_pad(io, (const uint32_t[4]){0, more, 0, more}, mode, fill, scratch);
    }
    return rc;
}

/* Two standard normal values from two uniforms (Box-Muller). */
static void normal_pair(sl_rng_t *r, float ret[2])
{
    const double u1 = 1.0 - sl_rng_uniform(r); /* (0, 1]: log is finite */
    const double u2 = sl_rng_uniform(r);
    const double rad = sqrt(-2.0 * log(u1));
    ret[0] = (float)(rad * cos(2.0 * M_PI * u2));
    ret[1] = (float)(rad * sin(2.0 * M_PI * u2));
}

int sl_aug_erase_f32(sl_tensor_t *io, uint32_t x, uint32_t y, uint32_t w, uint32_t h,
                     const double *value, sl_rng_t *r)
{
    if (io == NULL || io->dtype != SL_DT_F32 || io->data == NULL || io->c == 0 || io->c > 3 ||
        (io->layout != SL_LAYOUT_HWC && io->layout != SL_LAYOUT_CHW) ||
        io->nbytes != (size_t)io->h * io->w * io->c * sizeof(float) || (uint64_t)x + w > io->w ||
        (uint64_t)y + h > io->h || (value == NULL && r == NULL)) {
        return -EINVAL;
    }
    const uint32_t c = io->c;
    float *px = (float *)(void *)io->data;
    float spare[2];
    unsigned left = 0;
    /* The region in memory order: per row (HWC) or per plane then row (CHW). */
    const uint32_t planes = io->layout == SL_LAYOUT_CHW ? c : 1;
    const size_t run = io->layout == SL_LAYOUT_CHW ? w : (size_t)w * c;
    for (uint32_t pl = 0; pl < planes; pl++) {
        for (uint32_t row = y; row < y + h; row++) {
            float *p = io->layout == SL_LAYOUT_CHW ? px + ((size_t)pl * io->h + row) * io->w + x
                                                   : px + ((size_t)row * io->w + x) * c;
            for (size_t i = 0; i < run; i++) {
                const uint32_t ch = io->layout == SL_LAYOUT_CHW ? pl : (uint32_t)(i % c);
                if (value != NULL) {
                    p[i] = (float)value[ch];
                    continue;
                }
                if (left == 0) {
                    normal_pair(r, spare);
                    left = 2;
                }
                p[i] = spare[2 - left--];
            }
        }
    }
    return 0;
}
