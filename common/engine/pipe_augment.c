/* pipe_augment: the augmentation stages as pipeline units. Each maps its
 * stage's parameters (common/spec/spec_aug.h) onto common/image/augment.h
 * and draws from the unit's stream only, so a sample's bytes depend on
 * (seed, epoch, index, stage) and never on where the unit runs. Draws, in
 * order: color_jitter a permutation then four factors; random_grayscale,
 * solarize, posterize, auto_contrast, equalize one uniform against p;
 * gaussian_blur the sigma; random_erasing one uniform against p, then
 * RandomErasing.get_params' draws, then the bytes of a "random" value;
 * random_rotation the angle; random_affine angle, translation, scale,
 * shears; the policies per op an index, a bin and a sign; random_crop the
 * row then the column (none when the padded image is the crop's size). */
#include "common/engine/pipeline_impl.h"

#include <errno.h>

#include "common/base/err.h"
#include "common/image/augment.h"
#include "common/image/imgops.h"

static int aug_needs_pixels(const sl_tensor_t *t, const char *what, char *err, size_t errlen)
{
    if (t->dtype != SL_DT_U8 || t->layout != SL_LAYOUT_HWC || t->h == 0 || t->w == 0 ||
        (t->c != 1 && t->c != 3)) {
        return sl_err(err, errlen, -EINVAL,
                      "%s needs a uint8 HWC image of 1 or 3 channels, got "
                      "%s %ux%ux%u",
                      what, sl_dtype_name(t->dtype), t->h, t->w, t->c);
    }
    return 0;
}

static sl_aug_interp_e interp_of(const sl_aug_spec_t *a)
{
    return a->interpolation == SL_INTERP_BILINEAR ? SL_AUG_BILINEAR : SL_AUG_NEAREST;
}

/* One function per augmentation op, indexed by op below; each applies
 * its op to io in place (scratch: room for the warps and the blur). */
typedef int (*aug_run_fn)(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io,
                          sl_tensor_t *scratch);

static int run_jitter(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io,
                      sl_tensor_t *scratch)
{
    const sl_aug_spec_t *a = &st->aug;
    const double ranges[4][2] = {{a->brightness[0], a->brightness[1]},
                                 {a->contrast[0], a->contrast[1]},
                                 {a->saturation[0], a->saturation[1]},
                                 {a->hue[0], a->hue[1]}};
    sl_aug_jitter_t j;
    sl_aug_jitter_draw(ranges, rng, &j);
    return sl_aug_jitter_apply(io, ranges, &j);
}

static int run_grayscale(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io,
                         sl_tensor_t *scratch)
{
    return sl_rng_uniform(rng) < st->aug.p ? sl_aug_grayscale(io) : 0;
}

static int run_solarize(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io,
                        sl_tensor_t *scratch)
{
    return sl_rng_uniform(rng) < st->aug.p ? sl_aug_solarize(io, st->aug.threshold) : 0;
}

static int run_posterize(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io,
                         sl_tensor_t *scratch)
{
    return sl_rng_uniform(rng) < st->aug.p ? sl_aug_posterize(io, st->aug.bits) : 0;
}

static int run_autocontrast(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io,
                            sl_tensor_t *scratch)
{
    return sl_rng_uniform(rng) < st->aug.p ? sl_aug_autocontrast(io) : 0;
}

static int run_equalize(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io,
                        sl_tensor_t *scratch)
{
    return sl_rng_uniform(rng) < st->aug.p ? sl_aug_equalize(io) : 0;
}

static int run_blur(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io, sl_tensor_t *scratch)
{
    const sl_aug_spec_t *a = &st->aug;
    const double sigma = sl_rng_uniform(rng) * (a->sigma[1] - a->sigma[0]) + a->sigma[0];
    return sl_aug_gaussian_blur(io, a->kernel_size[0], a->kernel_size[1], sigma, sigma, scratch);
}

/* random_erasing's draws, wherever it erases: one uniform against p, then
 * the box. */
static bool erasing_draw(const sl_aug_spec_t *a, sl_rng_t *rng, uint32_t img_h, uint32_t img_w,
                         uint32_t *x, uint32_t *y, uint32_t *w, uint32_t *h)
{
    if (!(sl_rng_uniform(rng) < a->p)) {
        return false;
    }
    bool ok;
    sl_aug_erasing_draw(img_h, img_w, a->scale, a->ratio, rng, &ok, x, y, w, h);
    return ok;
}

bool sl_pipe_erase_box(const sl_spec_t *spec, uint32_t stage, uint64_t epoch, uint64_t index,
                       uint32_t img_h, uint32_t img_w, sl_erase_box_t *ret)
{
    if (stage >= spec->nstages || spec->stages[stage].op != SL_OP_RANDOM_ERASING) {
        return false;
    }
    sl_rng_t rng;
    sl_rng_init(&rng, spec->seed, epoch, index, stage);
    if (!erasing_draw(&spec->stages[stage].aug, &rng, img_h, img_w, &ret->x, &ret->y, &ret->w,
                      &ret->h)) {
        return false;
    }
    ret->noise_seed = sl_rng_u64(&rng);
    return true;
}

static int run_erasing(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io,
                       sl_tensor_t *scratch)
{
    const sl_aug_spec_t *a = &st->aug;
    uint32_t x, y, w, h;
    if (!erasing_draw(a, rng, io->h, io->w, &x, &y, &w, &h)) {
        return 0;
    }
    /* After normalize (float32, HWC or CHW): the value in tensor units. */
    const double *v = a->value_random ? NULL : a->value;
    return io->dtype == SL_DT_F32 ? sl_aug_erase_f32(io, x, y, w, h, v, rng)
                                  : sl_aug_erase(io, x, y, w, h, v, rng);
}

static int run_rotation(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io,
                        sl_tensor_t *scratch)
{
    const sl_aug_spec_t *a = &st->aug;
    double m[6];
    const double angle = sl_rng_uniform(rng) * (a->degrees[1] - a->degrees[0]) + a->degrees[0];
    /* F.rotate turns the other way from F.affine: -angle. */
    sl_aug_affine_matrix(io->h, io->w, a->has_center ? a->center : NULL, -angle, 0, 0, 1, 0, 0, m);
    return sl_aug_warp(io, m, interp_of(a), a->fill, scratch);
}

static int run_affine(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io,
                      sl_tensor_t *scratch)
{
    const sl_aug_spec_t *a = &st->aug;
    sl_aug_affine_t d;
    double m[6];
    sl_aug_affine_draw(io->h, io->w, a->degrees, a->translate, a->affine_scale, a->shear, rng, &d);
    sl_aug_affine_matrix(io->h, io->w, a->has_center ? a->center : NULL, d.angle, d.tx, d.ty,
                         d.scale, d.shear_x, d.shear_y, m);
    return sl_aug_warp(io, m, interp_of(a), a->fill, scratch);
}

static int run_policy(const sl_stage_spec_t *st, sl_aug_policy_e policy, sl_rng_t *rng,
                      sl_tensor_t *io, sl_tensor_t *scratch)
{
    const sl_aug_spec_t *a = &st->aug;
    return sl_aug_policy(io, policy, a->num_ops, a->magnitude, a->num_magnitude_bins, interp_of(a),
                         a->has_fill ? a->fill : NULL, rng, scratch);
}

static int run_trivial(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io,
                       sl_tensor_t *scratch)
{
    return run_policy(st, SL_AUG_TRIVIAL_WIDE, rng, io, scratch);
}

static int run_rand_augment(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io,
                            sl_tensor_t *scratch)
{
    return run_policy(st, SL_AUG_RAND_AUGMENT, rng, io, scratch);
}

/* Pad (as configured, then as needed), draw the window, crop it. The
 * spec's sl_pad_mode_e and sl_aug_pad_e list the modes in one order. */
static int run_random_crop(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io,
                           sl_tensor_t *scratch)
{
    const sl_aug_spec_t *a = &st->aug;
    int rc = sl_aug_pad_for_crop(io, a->padding, a->pad_if_needed, a->crop_h, a->crop_w,
                                 (sl_aug_pad_e)a->padding_mode, a->pad_fill, scratch);
    uint32_t x, y;
    if (rc == 0) {
        rc = sl_aug_crop_draw(io->h, io->w, a->crop_h, a->crop_w, rng, &x, &y);
    }
    if (rc == 0) {
        rc = sl_img_crop(io, x, y, a->crop_w, a->crop_h, scratch);
    }
    if (rc == 0) {
        sl_tensor_swap(io, scratch);
    }
    return rc;
}

static int run_op(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io, sl_tensor_t *scratch);

/* RandomApply: one uniform against p, then every op in order. */
static int run_random_apply(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io,
                            sl_tensor_t *scratch)
{
    const sl_aug_spec_t *a = &st->aug;
    if (!(sl_rng_uniform(rng) < a->p)) {
        return 0;
    }
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < a->nops; i++) {
        rc = run_op(&a->ops[i], rng, io, scratch);
    }
    return rc;
}

/* RandomChoice: one uniform over the weights' total (or one of nops
 * equally), then that op. */
static int run_random_choice(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io,
                             sl_tensor_t *scratch)
{
    const sl_aug_spec_t *a = &st->aug;
    if (a->nops == 0 || a->ops == NULL) {
        return -EINVAL;
    }
    uint32_t k = 0;
    if (a->weights == NULL) {
        k = (uint32_t)sl_rng_below(rng, a->nops);
    } else {
        double total = 0;
        for (uint32_t i = 0; i < a->nops; i++) {
            total += a->weights[i];
        }
        double u = sl_rng_uniform(rng) * total, acc = 0;
        /* The last op with a weight takes what rounding leaves over. */
        for (k = 0; k + 1 < a->nops; k++) {
            acc += a->weights[k];
            if (u < acc) {
                break;
            }
        }
        while (a->weights[k] == 0 && k > 0) {
            k--;
        }
    }
    return run_op(&a->ops[k], rng, io, scratch);
}

/* NULL: not an augmentation. */
static const aug_run_fn aug_runs[SL_OP__COUNT] = {
    [SL_OP_COLOR_JITTER] = run_jitter,
    [SL_OP_RANDOM_GRAYSCALE] = run_grayscale,
    [SL_OP_GAUSSIAN_BLUR] = run_blur,
    [SL_OP_RANDOM_ERASING] = run_erasing,
    [SL_OP_RANDOM_ROTATION] = run_rotation,
    [SL_OP_RANDOM_AFFINE] = run_affine,
    [SL_OP_SOLARIZE] = run_solarize,
    [SL_OP_POSTERIZE] = run_posterize,
    [SL_OP_AUTO_CONTRAST] = run_autocontrast,
    [SL_OP_EQUALIZE] = run_equalize,
    [SL_OP_TRIVIAL_AUGMENT_WIDE] = run_trivial,
    [SL_OP_RAND_AUGMENT] = run_rand_augment,
    [SL_OP_RANDOM_CROP] = run_random_crop,
    [SL_OP_RANDOM_APPLY] = run_random_apply,
    [SL_OP_RANDOM_CHOICE] = run_random_choice,
};

static int run_op(const sl_stage_spec_t *st, sl_rng_t *rng, sl_tensor_t *io, sl_tensor_t *scratch)
{
    aug_run_fn run = (size_t)st->op < SL_OP__COUNT ? aug_runs[st->op] : NULL;
    return run != NULL ? run(st, rng, io, scratch) : -EINVAL;
}

int sl_pipe_augment(const unit_t *u, sl_rng_t *rng, sl_tensor_t *io, sl_pipe_scratch_t *sc,
                    char *err, size_t errlen)
{
    /* random_erasing also runs after normalize, on float32 HWC or CHW. */
    const bool floats_ok = u->st->op == SL_OP_RANDOM_ERASING && io->dtype == SL_DT_F32 &&
                           (io->layout == SL_LAYOUT_HWC || io->layout == SL_LAYOUT_CHW) &&
                           io->h > 0 && io->w > 0 && io->c >= 1 && io->c <= 3;
    int rc = floats_ok ? 0 : aug_needs_pixels(io, u->name, err, errlen);
    if (rc < 0) {
        return rc;
    }
    rc = run_op(u->st, rng, io, &sc->a);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "%s failed on a %ux%ux%u image", u->name, io->h, io->w,
                      io->c);
    }
    return 0;
}
