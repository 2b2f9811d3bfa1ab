/* augment: torchvision 0.14's augmentations on uint8 HWC images, with the
 * semantics of torchvision.transforms.functional on uint8 *tensors* (the
 * float32 arithmetic, truncations and roundings of functional_tensor.py),
 * so a pixel differs from torchvision's only where float32 sums are
 * associated differently (docs/design.md "Pipeline spec" has the measured
 * differences, tests/integration/test_augment_torchvision.sh measures them).
 *
 * Two layers: the functional ops take explicit parameters (a brightness
 * factor, an angle) and are what the comparison against torchvision calls;
 * the *_draw functions make the random draws of torchvision's transforms
 * from one sl_rng_t stream, so a stage's output depends on (seed, epoch,
 * index, stage) only. Every op takes io (uint8 HWC, 1 or 3 channels, the
 * result replaces it) and, where it needs one, a scratch tensor whose
 * contents and shape it clobbers. Pure functions over caller-owned tensors:
 * any thread, one scratch per thread. Returns 0 or -EINVAL (a tensor that
 * is not uint8 HWC with 1 or 3 channels, a bad parameter), -ENOMEM. */
#ifndef SL_AUGMENT_H
#define SL_AUGMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/base/rng.h"
#include "common/sample/tensor.h"

typedef enum {
    SL_AUG_NEAREST = 0,
    SL_AUG_BILINEAR,
} sl_aug_interp_e;

/* ---- augment_color.c: per-pixel and histogram ops */

/* adjust_brightness / _contrast / _saturation: a blend with black, with the
 * mean of the grayscale image, with the grayscale image; factor >= 0. */
int sl_aug_brightness(sl_tensor_t *io, double factor);
int sl_aug_contrast(sl_tensor_t *io, double factor);
int sl_aug_saturation(sl_tensor_t *io, double factor);
/* adjust_hue: a shift of the HSV hue by factor in [-0.5, 0.5] (turns). */
int sl_aug_hue(sl_tensor_t *io, double factor);
/* rgb_to_grayscale with 3 output channels: the ITU-R 601-2 luma
 * 0.2989 R + 0.587 G + 0.114 B in float32, truncated. */
int sl_aug_grayscale(sl_tensor_t *io);
/* Pixels >= threshold become 255 - pixel. */
int sl_aug_solarize(sl_tensor_t *io, double threshold);
/* Keeps the top bits (0..8) of every value. */
int sl_aug_posterize(sl_tensor_t *io, uint32_t bits);
/* Per channel, stretches [min, max] to [0, 255]. */
int sl_aug_autocontrast(sl_tensor_t *io);
/* Per channel histogram equalization (torchvision's _scale_channel). */
int sl_aug_equalize(sl_tensor_t *io);

/* ---- augment_blur.c: convolutions */

/* A blend with the image smoothed by [[1,1,1],[1,5,1],[1,1,1]] / 13 (the
 * border rows and columns kept); images of 2 or fewer rows or columns are
 * left as they are. */
int sl_aug_sharpness(sl_tensor_t *io, double factor, sl_tensor_t *scratch);
/* A kx x ky Gaussian (odd sizes) with standard deviations sx, sy > 0,
 * reflect padding (mirrored again where the image is narrower than the
 * kernel: torchvision refuses such images). */
int sl_aug_gaussian_blur(sl_tensor_t *io, uint32_t kx, uint32_t ky, double sx, double sy,
                         sl_tensor_t *scratch);

/* ---- augment_geom.c: warps and erasing */

/* torchvision's _get_inverse_affine_matrix for the tensor path: the matrix
 * mapping output to input coordinates relative to the image centre. center
 * (pixels) NULL for the image centre; angle and shears in degrees. */
void sl_aug_affine_matrix(uint32_t h, uint32_t w, const double *center, double angle, double tx,
                          double ty, double scale, double shear_x, double shear_y, double ret_m[6]);
/* Resamples io through m (grid_sample, align_corners=False). fill (one
 * value per channel) paints what comes from outside the image, blended by
 * the interpolated coverage as torchvision does; NULL: zeros, no mask
 * (torchvision's fill=None). */
int sl_aug_warp(sl_tensor_t *io, const double m[6], sl_aug_interp_e interp, const double *fill,
                sl_tensor_t *scratch);
/* Paints rows [y, y+h) x columns [x, x+w) (inside the image) with value[c]
 * (truncated to integers), or with uniform random bytes from r when value
 * is NULL. */
int sl_aug_erase(sl_tensor_t *io, uint32_t x, uint32_t y, uint32_t w, uint32_t h,
                 const double *value, sl_rng_t *r);

/* F.pad's padding modes (torchvision's names; edge is torch's replicate). */
typedef enum {
    SL_AUG_PAD_CONSTANT = 0,
    SL_AUG_PAD_EDGE,
    SL_AUG_PAD_REFLECT,   /* mirrored without repeating the edge: 2 1 | 0 1 2 */
    SL_AUG_PAD_SYMMETRIC, /* mirrored repeating the edge: 1 0 | 0 1 2 */
} sl_aug_pad_e;
/* F.pad on a uint8 tensor: pad[0..3] = left, top, right, bottom pixels
 * added (each <= SL_AUG_PAD_MAX); constant paints fill[c] (truncated to an
 * integer, as torch casts the value to uint8). Where a reflection is wider
 * than the image, torch refuses; here the mirror repeats. */
#define SL_AUG_PAD_MAX 16384u
int sl_aug_pad(sl_tensor_t *io, const uint32_t pad[4], sl_aug_pad_e mode, const double *fill,
               sl_tensor_t *scratch);
/* RandomCrop.forward after its draws: pad by pad[] (all zeros: none),
 * then with pad_if_needed each axis narrower than the crop padded on both
 * sides by the shortfall (F.pad(img, [tw - w, 0]) and [0, th - h]), then
 * the th x tw window at row y, column x (drawn by sl_aug_crop_draw). */
int sl_aug_pad_for_crop(sl_tensor_t *io, const uint32_t pad[4], bool pad_if_needed, uint32_t th,
                        uint32_t tw, sl_aug_pad_e mode, const double *fill, sl_tensor_t *scratch);

/* sl_aug_erase on a float32 tensor (after normalize: HWC, or CHW after
 * to_chw; any channel count): value[c] as a float (0 = the normalized
 * zero, torchvision's value=0), or, with value NULL, standard normal
 * values (torchvision's value="random" on floats) from r, Box-Muller on
 * two uniforms per pair, in memory order of the region. */
int sl_aug_erase_f32(sl_tensor_t *io, uint32_t x, uint32_t y, uint32_t w, uint32_t h,
                     const double *value, sl_rng_t *r);

/* ---- augment_draw.c: torchvision's get_params, from one stream */

/* ColorJitter: a random order of the four adjustments (0 brightness,
 * 1 contrast, 2 saturation, 3 hue) and a factor uniform in each range;
 * always the same draws, used or not. */
typedef struct sl_aug_jitter_s {
    int order[4];
    double factor[4];
} sl_aug_jitter_t;
void sl_aug_jitter_draw(const double ranges[4][2], sl_rng_t *r, sl_aug_jitter_t *ret);
/* Applies the drawn jitter; an adjustment whose range is the identity
 * point is skipped (torchvision's None). */
int sl_aug_jitter_apply(sl_tensor_t *io, const double ranges[4][2], const sl_aug_jitter_t *j);
/* RandomErasing.get_params: up to 10 tries, then no erasing (*ret_ok false). */
void sl_aug_erasing_draw(uint32_t img_h, uint32_t img_w, const double scale[2],
                         const double ratio[2], sl_rng_t *r, bool *ret_ok, uint32_t *ret_x,
                         uint32_t *ret_y, uint32_t *ret_w, uint32_t *ret_h);
/* RandomCrop.get_params: the row, then the column, of a th x tw window
 * (no draw when the image is exactly that size); -EINVAL when the image is
 * smaller than the window (torchvision's ValueError). */
int sl_aug_crop_draw(uint32_t img_h, uint32_t img_w, uint32_t th, uint32_t tw, sl_rng_t *r,
                     uint32_t *ret_x, uint32_t *ret_y);
/* RandomAffine.get_params: angle, translation in pixels (rounded), scale,
 * shears. translate NULL or {0, 0}: none. */
typedef struct sl_aug_affine_s {
    double angle, tx, ty, scale, shear_x, shear_y;
} sl_aug_affine_t;
void sl_aug_affine_draw(uint32_t img_h, uint32_t img_w, const double degrees[2],
                        const double translate[2], const double scale[2], const double shear[4],
                        sl_rng_t *r, sl_aug_affine_t *ret);

/* ---- augment_policy.c: TrivialAugmentWide and RandAugment */

/* The 14 ops of both policies, in torchvision's order (op indices). */
typedef enum {
    SL_AUG_OP_IDENTITY = 0,
    SL_AUG_OP_SHEAR_X,
    SL_AUG_OP_SHEAR_Y,
    SL_AUG_OP_TRANSLATE_X,
    SL_AUG_OP_TRANSLATE_Y,
    SL_AUG_OP_ROTATE,
    SL_AUG_OP_BRIGHTNESS,
    SL_AUG_OP_COLOR,
    SL_AUG_OP_CONTRAST,
    SL_AUG_OP_SHARPNESS,
    SL_AUG_OP_POSTERIZE,
    SL_AUG_OP_SOLARIZE,
    SL_AUG_OP_AUTO_CONTRAST,
    SL_AUG_OP_EQUALIZE,
    SL_AUG_OP__COUNT
} sl_aug_op_e;

typedef enum {
    SL_AUG_TRIVIAL_WIDE = 0,
    SL_AUG_RAND_AUGMENT,
} sl_aug_policy_e;

/* autoaugment.py's _apply_op: one op at a signed magnitude. */
int sl_aug_apply_op(sl_tensor_t *io, sl_aug_op_e op, double magnitude, sl_aug_interp_e interp,
                    const double *fill, sl_tensor_t *scratch);
/* The magnitude of bin `bin` of op in the policy's table (float32 values,
 * as torch.linspace makes them), unsigned; whether the op is signed. */
double sl_aug_magnitude(sl_aug_policy_e policy, sl_aug_op_e op, uint32_t bin, uint32_t bins,
                        uint32_t img_h, uint32_t img_w, bool *ret_signed);
/* The whole policy: TrivialAugmentWide draws one op, a bin and a sign;
 * RandAugment num_ops times an op and a sign at bin `magnitude`. */
int sl_aug_policy(sl_tensor_t *io, sl_aug_policy_e policy, uint32_t num_ops, uint32_t magnitude,
                  uint32_t bins, sl_aug_interp_e interp, const double *fill, sl_rng_t *r,
                  sl_tensor_t *scratch);

#endif
