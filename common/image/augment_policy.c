/* augment_policy: TrivialAugmentWide and RandAugment as torchvision 0.14's
 * autoaugment.py has them: the same 14 ops in the same order, the same
 * magnitude tables (float32, as torch.linspace makes them) and _apply_op's
 * mapping from a magnitude to each op's parameter. */
#include "common/image/augment.h"
#include "common/image/augment_impl.h"

#include <errno.h>
#include <math.h>

/* torch.linspace(start, end, steps)[i] in float32: the step in float32,
 * the first half counted from start, the second from end. */
static float linspace_at(float start, float end, uint32_t steps, uint32_t i)
{
    if (steps == 1) {
        return start;
    }
    const float step = (end - start) / (float)(steps - 1);
    return i < steps / 2 ? start + step * (float)i : end - step * (float)(steps - i - 1);
}

double sl_aug_magnitude(sl_aug_policy_e policy, sl_aug_op_e op, uint32_t bin, uint32_t bins,
                        uint32_t img_h, uint32_t img_w, bool *ret_signed)
{
    const bool wide = policy == SL_AUG_TRIVIAL_WIDE;
    *ret_signed = op >= SL_AUG_OP_SHEAR_X && op <= SL_AUG_OP_SHARPNESS;
    if (bins < 2 || bin >= bins) {
        return 0.0;
    }
    switch (op) {
    case SL_AUG_OP_SHEAR_X:
    case SL_AUG_OP_SHEAR_Y:
        return linspace_at(0.0f, wide ? 0.99f : 0.3f, bins, bin);
    case SL_AUG_OP_TRANSLATE_X:
        return linspace_at(0.0f, wide ? 32.0f : (float)(150.0 / 331.0 * img_w), bins, bin);
    case SL_AUG_OP_TRANSLATE_Y:
        return linspace_at(0.0f, wide ? 32.0f : (float)(150.0 / 331.0 * img_h), bins, bin);
    case SL_AUG_OP_ROTATE:
        return linspace_at(0.0f, wide ? 135.0f : 30.0f, bins, bin);
    case SL_AUG_OP_BRIGHTNESS:
    case SL_AUG_OP_COLOR:
    case SL_AUG_OP_CONTRAST:
    case SL_AUG_OP_SHARPNESS:
        return linspace_at(0.0f, wide ? 0.99f : 0.9f, bins, bin);
    case SL_AUG_OP_POSTERIZE: {
        /* 8 - (arange(bins) / ((bins - 1) / D)).round().int() */
        const float d = (float)((bins - 1) / (wide ? 6.0 : 4.0));
        return 8.0 - (double)rintf((float)bin / d);
    }
    case SL_AUG_OP_SOLARIZE:
        return linspace_at(255.0f, 0.0f, bins, bin);
    default: /* identity, auto_contrast, equalize: no magnitude */
        return 0.0;
    }
}

static double degrees_of_atan(double m) { return atan(m) * (180.0 / M_PI); }

int sl_aug_apply_op(sl_tensor_t *io, sl_aug_op_e op, double magnitude, sl_aug_interp_e interp,
                    const double *fill, sl_tensor_t *scratch)
{
    if (io == NULL) {
        return -EINVAL;
    }
    const double origin[2] = {0.0, 0.0}; /* the shears turn about the top-left corner */
    double m[6];
    switch (op) {
    case SL_AUG_OP_IDENTITY:
        return 0;
    case SL_AUG_OP_SHEAR_X:
        sl_aug_affine_matrix(io->h, io->w, origin, 0, 0, 0, 1, degrees_of_atan(magnitude), 0, m);
        return sl_aug_warp(io, m, interp, fill, scratch);
    case SL_AUG_OP_SHEAR_Y:
        sl_aug_affine_matrix(io->h, io->w, origin, 0, 0, 0, 1, 0, degrees_of_atan(magnitude), m);
        return sl_aug_warp(io, m, interp, fill, scratch);
    case SL_AUG_OP_TRANSLATE_X:
        sl_aug_affine_matrix(io->h, io->w, NULL, 0, trunc(magnitude), 0, 1, 0, 0, m);
        return sl_aug_warp(io, m, interp, fill, scratch);
    case SL_AUG_OP_TRANSLATE_Y:
        sl_aug_affine_matrix(io->h, io->w, NULL, 0, 0, trunc(magnitude), 1, 0, 0, m);
        return sl_aug_warp(io, m, interp, fill, scratch);
    case SL_AUG_OP_ROTATE:
        /* F.rotate turns the other way from F.affine: -angle. */
        sl_aug_affine_matrix(io->h, io->w, NULL, -magnitude, 0, 0, 1, 0, 0, m);
        return sl_aug_warp(io, m, interp, fill, scratch);
    case SL_AUG_OP_BRIGHTNESS:
        return sl_aug_brightness(io, 1.0 + magnitude);
    case SL_AUG_OP_COLOR:
        return sl_aug_saturation(io, 1.0 + magnitude);
    case SL_AUG_OP_CONTRAST:
        return sl_aug_contrast(io, 1.0 + magnitude);
    case SL_AUG_OP_SHARPNESS:
        return sl_aug_sharpness(io, 1.0 + magnitude, scratch);
    case SL_AUG_OP_POSTERIZE:
        return magnitude >= 0 && magnitude <= 8 ? sl_aug_posterize(io, (uint32_t)magnitude)
                                                : -EINVAL;
    case SL_AUG_OP_SOLARIZE:
        return sl_aug_solarize(io, magnitude);
    case SL_AUG_OP_AUTO_CONTRAST:
        return sl_aug_autocontrast(io);
    case SL_AUG_OP_EQUALIZE:
        return sl_aug_equalize(io);
    default:
        return -EINVAL;
    }
}

/* Draws per op: its index, its bin (TrivialAugmentWide only), its sign;
 * always all of them, so the stream's use does not depend on the op. */
int sl_aug_policy(sl_tensor_t *io, sl_aug_policy_e policy, uint32_t num_ops, uint32_t magnitude,
                  uint32_t bins, sl_aug_interp_e interp, const double *fill, sl_rng_t *r,
                  sl_tensor_t *scratch)
{
    if (io == NULL || r == NULL || bins < 2 || magnitude >= bins ||
        (policy != SL_AUG_TRIVIAL_WIDE && policy != SL_AUG_RAND_AUGMENT)) {
        return -EINVAL;
    }
    const uint32_t n = policy == SL_AUG_TRIVIAL_WIDE ? 1 : num_ops;
    for (uint32_t i = 0; i < n; i++) {
        const sl_aug_op_e op = (sl_aug_op_e)sl_rng_below(r, SL_AUG_OP__COUNT);
        uint32_t bin = (uint32_t)sl_rng_below(r, bins);
        const bool negate = sl_rng_below(r, 2) != 0;
        if (policy == SL_AUG_RAND_AUGMENT) {
            bin = magnitude;
        }
        bool is_signed;
        double mag = sl_aug_magnitude(policy, op, bin, bins, io->h, io->w, &is_signed);
        if (is_signed && negate) {
            mag = -mag;
        }
        int rc = sl_aug_apply_op(io, op, mag, interp, fill, scratch);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}
