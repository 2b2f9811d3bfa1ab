/* augment_draw: the random parameters of torchvision's ColorJitter,
 * RandomErasing and RandomAffine (their get_params), drawn from one
 * sl_rng_t stream in a fixed order, and ColorJitter's application. torch's
 * uniform_(a, b) is u * (b - a) + a, which is what these draw. */
#include "common/image/augment.h"
#include "common/image/augment_impl.h"

#include <errno.h>
#include <math.h>

static double uniform(sl_rng_t *r, double a, double b) { return sl_rng_uniform(r) * (b - a) + a; }

void sl_aug_jitter_draw(const double ranges[4][2], sl_rng_t *r, sl_aug_jitter_t *ret)
{
    /* randperm(4): Fisher-Yates. */
    for (int i = 0; i < 4; i++) {
        ret->order[i] = i;
    }
    for (int i = 3; i > 0; i--) {
        int j = (int)sl_rng_below(r, (uint64_t)i + 1);
        int t = ret->order[i];
        ret->order[i] = ret->order[j];
        ret->order[j] = t;
    }
    for (int k = 0; k < 4; k++) {
        ret->factor[k] = uniform(r, ranges[k][0], ranges[k][1]);
    }
}

int sl_aug_jitter_apply(sl_tensor_t *io, const double ranges[4][2], const sl_aug_jitter_t *j)
{
    for (int i = 0; i < 4; i++) {
        const int k = j->order[i];
        const double identity = k == 3 ? 0.0 : 1.0;
        if (k < 0 || k > 3) {
            return -EINVAL;
        }
        if (ranges[k][0] == identity && ranges[k][1] == identity) {
            continue; /* torchvision's None: not even a pass */
        }
        int rc;
        switch (k) {
        case 0:
            rc = sl_aug_brightness(io, j->factor[k]);
            break;
        case 1:
            rc = sl_aug_contrast(io, j->factor[k]);
            break;
        case 2:
            rc = sl_aug_saturation(io, j->factor[k]);
            break;
        default:
            rc = sl_aug_hue(io, j->factor[k]);
            break;
        }
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

void sl_aug_erasing_draw(uint32_t img_h, uint32_t img_w, const double scale[2],
                         const double ratio[2], sl_rng_t *r, bool *ret_ok, uint32_t *ret_x,
                         uint32_t *ret_y, uint32_t *ret_w, uint32_t *ret_h)
{
    const double area = (double)img_h * img_w;
    const double lr0 = log(ratio[0]), lr1 = log(ratio[1]);
    *ret_ok = false;
    for (int attempt = 0; attempt < 10; attempt++) {
        const double erase_area = area * uniform(r, scale[0], scale[1]);
        const double aspect = exp(uniform(r, lr0, lr1));
        /* Python's int(round(...)): half to even. Compared as doubles so
         * NaN and huge values are refused before any conversion. */
        const double h = rint(sqrt(erase_area * aspect));
        const double w = rint(sqrt(erase_area / aspect));
        if (!(h >= 0 && w >= 0 && h < img_h && w < img_w)) {
            continue;
        }
        *ret_h = (uint32_t)h;
        *ret_w = (uint32_t)w;
        *ret_y = (uint32_t)sl_rng_below(r, (uint64_t)img_h - *ret_h + 1);
        *ret_x = (uint32_t)sl_rng_below(r, (uint64_t)img_w - *ret_w + 1);
        *ret_ok = true;
        return;
    }
    *ret_x = *ret_y = *ret_w = *ret_h = 0;
}

int sl_aug_crop_draw(uint32_t img_h, uint32_t img_w, uint32_t th, uint32_t tw, sl_rng_t *r,
                     uint32_t *ret_x, uint32_t *ret_y)
{
    if (img_h < th || img_w < tw) {
        return -EINVAL;
    }
    uint32_t x = 0, y = 0;
    if (img_h != th || img_w != tw) {
        y = (uint32_t)sl_rng_below(r, (uint64_t)img_h - th + 1);
        x = (uint32_t)sl_rng_below(r, (uint64_t)img_w - tw + 1);
    }
    *ret_x = x;
    *ret_y = y;
    return 0;
}

void sl_aug_affine_draw(uint32_t img_h, uint32_t img_w, const double degrees[2],
                        const double translate[2], const double scale[2], const double shear[4],
                        sl_rng_t *r, sl_aug_affine_t *ret)
{
    ret->angle = uniform(r, degrees[0], degrees[1]);
    ret->tx = ret->ty = 0;
    if (translate != NULL) {
        const double max_dx = translate[0] * img_w, max_dy = translate[1] * img_h;
        ret->tx = rint(uniform(r, -max_dx, max_dx));
        ret->ty = rint(uniform(r, -max_dy, max_dy));
    }
    ret->scale = scale != NULL ? uniform(r, scale[0], scale[1]) : 1.0;
    ret->shear_x = ret->shear_y = 0;
    if (shear != NULL) {
        ret->shear_x = uniform(r, shear[0], shear[1]);
        ret->shear_y = uniform(r, shear[2], shear[3]);
    }
}
