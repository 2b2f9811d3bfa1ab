/* spec_aug: the parameters of the built-in augmentation ops (color_jitter,
 * random_grayscale, gaussian_blur, random_erasing, random_rotation,
 * random_affine, solarize, posterize, auto_contrast, equalize,
 * trivial_augment_wide, rand_augment, random_crop, random_apply,
 * random_choice), one struct inside each stage spec.
 * Names and defaults are torchvision 0.14's (docs/design.md "Pipeline spec"
 * lists them); every field is canonical after a parse, so the canonical JSON
 * carries all of them and parse(to_json(s)) == s. Included by spec.h. */
#ifndef SL_SPEC_AUG_H
#define SL_SPEC_AUG_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    SL_INTERP_NEAREST = 0, /* torchvision's default for rotation, affine, the policies */
    SL_INTERP_BILINEAR,
} sl_interp_e;

struct sl_stage_spec_s;

/* random_apply, random_choice: at most this many nested ops. */
#define SL_AUG_NESTED_MAX 16

/* random_crop "padding_mode", in torchvision's order of mention. */
typedef enum {
    SL_PAD_CONSTANT = 0,
    SL_PAD_EDGE,
    SL_PAD_REFLECT,
    SL_PAD_SYMMETRIC,
} sl_pad_mode_e;

/* p, then a union by op family: an op reads and parse fills only its own
 * family's fields (the members are anonymous, so each reads by its name). */
typedef struct sl_aug_spec_s {
    double p; /* the probability of the random_* / solarize ... ops */
    union {
        /* color_jitter: factor ranges [min, max] (a number x in JSON means
         * [max(0, 1 - x), 1 + x]; for hue [-x, x]). A range of the single
         * identity value (1, or 0 for hue) is off: no pass over the pixels. */
        struct {
            double brightness[2], contrast[2], saturation[2], hue[2];
        };
        /* gaussian_blur: [kx, ky] odd; sigma drawn uniformly from [min, max]. */
        struct {
            uint32_t kernel_size[2];
            double sigma[2];
        };
        /* random_erasing: area fraction and aspect ratio ranges; the fill is
         * value[c] in pixel units (0..255) or, value_random, uniform bytes. */
        struct {
            double scale[2], ratio[2];
            bool value_random;
            double value[3];
            /* Set by the stages' parser, never read from JSON: the stage
             * follows a normalize with "on": "device", so the pixels are
             * still uint8 here and the consumer erases after normalizing
             * (no unit; sl_spec_device_erasings, the batch's erase boxes). */
            bool erase_on_device;
        };
        /* random_rotation, random_affine and the policies. */
        struct {
            /* rotation, affine: angle range in degrees; affine adds
             * translate (fractions of W, H), scale range (affine_scale,
             * [1, 1] = none) and shear ranges [x0, x1, y0, y1] in degrees. */
            double degrees[2];
            double translate[2];
            double affine_scale[2];
            double shear[4];
            sl_interp_e interpolation;
            bool has_center; /* center: pixel coordinates; absent = the image centre */
            double center[2];
            /* Pixels from outside the image: fill[c] (0..255). Policies
             * default to none (has_fill false): torchvision's fill=None (zero
             * padding, interpolated without a mask). */
            bool has_fill;
            double fill[3];
            /* trivial_augment_wide (num_magnitude_bins) and rand_augment. */
            uint32_t num_ops, magnitude, num_magnitude_bins;
        };
        /* random_crop (torchvision's RandomCrop): a crop_h x crop_w window
         * after padding[] = left, top, right, bottom pixels (0: none) in
         * padding_mode (sl_pad_mode_e) with pad_fill[c] (0..255) for
         * "constant"; pad_if_needed pads an axis narrower than the crop. */
        struct {
            uint32_t crop_h, crop_w;
            uint32_t padding[4];
            uint32_t padding_mode;
            bool pad_if_needed;
            double pad_fill[3];
        };
        /* random_apply (all of ops, in order, with probability p) and
         * random_choice (one of ops, by weights; NULL: uniform). ops and
         * weights are heap arrays of nops owned by the spec (sl_spec_clear
         * frees them, sl_spec_copy duplicates them); nested ops are
         * augmentations other than these two, so they own nothing. */
        struct {
            struct sl_stage_spec_s *ops;
            double *weights;
            uint32_t nops;
        };
        struct {
            double threshold; /* solarize: pixels >= threshold are inverted */
            uint32_t bits;    /* posterize: bits kept, 0..8 */
        };
    };
} sl_aug_spec_t;

#endif
