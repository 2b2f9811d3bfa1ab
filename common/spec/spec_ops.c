/* spec_ops: the index of the op table (one row per sl_op_e, each row
 * defined beside its functions; spec_impl.h) and the questions asked of it
 * by name or flags. Any thread: the table is constant. */
#include <string.h>

#include "common/spec/spec_impl.h"

static const sl_op_def_t *const op_defs[SL_OP__COUNT] = {
    [SL_OP_DECODE_JPEG] = &sl_op_def_decode_jpeg,
    [SL_OP_RANDOM_RESIZED_CROP] = &sl_op_def_random_resized_crop,
    [SL_OP_RESIZE] = &sl_op_def_resize,
    [SL_OP_CENTER_CROP] = &sl_op_def_center_crop,
    [SL_OP_FLIP] = &sl_op_def_flip,
    [SL_OP_NORMALIZE] = &sl_op_def_normalize,
    [SL_OP_TO_CHW] = &sl_op_def_to_chw,
    [SL_OP_DECODE_IMAGE] = &sl_op_def_decode_image,
    [SL_OP_IMAGE_TILES] = &sl_op_def_image_tiles,
    [SL_OP_TOKENIZE] = &sl_op_def_tokenize,
    [SL_OP_TEMPLATE] = &sl_op_def_template,
    [SL_OP_PLUGIN] = &sl_op_def_plugin,
    [SL_OP_COLOR_JITTER] = &sl_op_def_color_jitter,
    [SL_OP_RANDOM_GRAYSCALE] = &sl_op_def_random_grayscale,
    [SL_OP_GAUSSIAN_BLUR] = &sl_op_def_gaussian_blur,
    [SL_OP_RANDOM_ERASING] = &sl_op_def_random_erasing,
    [SL_OP_RANDOM_ROTATION] = &sl_op_def_random_rotation,
    [SL_OP_RANDOM_AFFINE] = &sl_op_def_random_affine,
    [SL_OP_SOLARIZE] = &sl_op_def_solarize,
    [SL_OP_POSTERIZE] = &sl_op_def_posterize,
    [SL_OP_AUTO_CONTRAST] = &sl_op_def_auto_contrast,
    [SL_OP_EQUALIZE] = &sl_op_def_equalize,
    [SL_OP_TRIVIAL_AUGMENT_WIDE] = &sl_op_def_trivial_augment_wide,
    [SL_OP_RAND_AUGMENT] = &sl_op_def_rand_augment,
    [SL_OP_VERTICAL_FLIP] = &sl_op_def_vertical_flip,
    [SL_OP_RANDOM_CROP] = &sl_op_def_random_crop,
    [SL_OP_RANDOM_APPLY] = &sl_op_def_random_apply,
    [SL_OP_RANDOM_CHOICE] = &sl_op_def_random_choice,
    [SL_OP_DECODE_VIDEO] = &sl_op_def_decode_video,
};

const sl_op_def_t *sl_spec_op_def(sl_op_e op)
{
    return (int)op >= 0 && op < SL_OP__COUNT ? op_defs[op] : NULL;
}

int sl_spec_op_find(const char *name, size_t len)
{
    for (int k = 0; k < SL_OP__COUNT; k++) {
        if (strlen(op_defs[k]->name) == len && memcmp(op_defs[k]->name, name, len) == 0) {
            return k;
        }
    }
    return -1;
}

const char *sl_op_name(sl_op_e op)
{
    const sl_op_def_t *d = sl_spec_op_def(op);
    return d != NULL ? d->name : "unknown";
}

unsigned sl_op_flags(sl_op_e op)
{
    const sl_op_def_t *d = sl_spec_op_def(op);
    return d != NULL ? d->flags : 0;
}

bool sl_op_is_augment(sl_op_e op) { return (sl_op_flags(op) & SL_OPF_AUGMENT) != 0; }

int sl_spec_has_plugins(const sl_spec_t *spec)
{
    for (uint32_t i = 0; i < spec->nstages; i++) {
        if (spec->stages[i].op == SL_OP_PLUGIN) {
            return 1;
        }
    }
    return 0;
}

bool sl_op_draws_random(sl_op_e op) { return (sl_op_flags(op) & SL_OPF_RANDOM) != 0; }
