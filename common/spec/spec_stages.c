/* spec_stages: the "stages" array of a spec: each op's keys, sizes and
 * numbers, and the order rules (decode_jpeg first, geometry before normalize
 * and to_chw); the augmentation ops' keys are spec_stages_aug.c's. Called
 * on the parsing thread only (sl_op_name and sl_spec_device_norm: any
 * thread). */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/spec/spec_impl.h"

#define SPEC_SIZE_MAX 16384

const char *const sl_spec_op_names[SL_OP__COUNT] = {
    [SL_OP_DECODE_JPEG] = "decode_jpeg",
    [SL_OP_RANDOM_RESIZED_CROP] = "random_resized_crop",
    [SL_OP_RESIZE] = "resize",
    [SL_OP_CENTER_CROP] = "center_crop",
    [SL_OP_FLIP] = "flip",
    [SL_OP_NORMALIZE] = "normalize",
    [SL_OP_TO_CHW] = "to_chw",
    [SL_OP_DECODE_IMAGE] = "decode_image",
    [SL_OP_IMAGE_TILES] = "image_tiles",
    [SL_OP_TOKENIZE] = "tokenize",
    [SL_OP_TEMPLATE] = "template",
    [SL_OP_PLUGIN] = "plugin",
    [SL_OP_COLOR_JITTER] = "color_jitter",
    [SL_OP_RANDOM_GRAYSCALE] = "random_grayscale",
    [SL_OP_GAUSSIAN_BLUR] = "gaussian_blur",
    [SL_OP_RANDOM_ERASING] = "random_erasing",
    [SL_OP_RANDOM_ROTATION] = "random_rotation",
    [SL_OP_RANDOM_AFFINE] = "random_affine",
    [SL_OP_SOLARIZE] = "solarize",
    [SL_OP_POSTERIZE] = "posterize",
    [SL_OP_AUTO_CONTRAST] = "auto_contrast",
    [SL_OP_EQUALIZE] = "equalize",
    [SL_OP_TRIVIAL_AUGMENT_WIDE] = "trivial_augment_wide",
    [SL_OP_RAND_AUGMENT] = "rand_augment",
};

/* The keys each op accepts; anything else is a typo worth an error. */
static const char *const op_keys[SL_OP__COUNT][6] = {
    [SL_OP_DECODE_JPEG] = {"op", NULL},
    [SL_OP_RANDOM_RESIZED_CROP] = {"op", "size", "scale", "ratio", NULL},
    [SL_OP_RESIZE] = {"op", "size", NULL},
    [SL_OP_CENTER_CROP] = {"op", "size", NULL},
    [SL_OP_FLIP] = {"op", "p", NULL},
    [SL_OP_NORMALIZE] = {"op", "mean", "std", "on", NULL},
    [SL_OP_TO_CHW] = {"op", NULL},
    [SL_OP_DECODE_IMAGE] = {"op", NULL},
    [SL_OP_IMAGE_TILES] = {"op", "tile", "min_tiles", "max_tiles", "thumbnail", NULL},
    [SL_OP_TOKENIZE] = {"op", "vocab", "encoding", "max_tokens", "special", NULL},
    [SL_OP_TEMPLATE] = {"op", "image_token", "tokens_per_tile", "bos", "eos", NULL},
    [SL_OP_PLUGIN] = {"op", "name", "sha256", "params", NULL},
};

static const double default_scale[2] = {0.08, 1.0};
static const double default_ratio[2] = {3.0 / 4.0, 4.0 / 3.0};
static const float default_mean[3] = {0.485f, 0.456f, 0.406f};
static const float default_std[3] = {0.229f, 0.224f, 0.225f};
/* normalize "on": where the normalization runs, indexed by on_device. */
static const char *const norm_on_names[2] = {"cpu", "device"};

/* "size": N or [H, W], each 1..SPEC_SIZE_MAX. */
static int get_size(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out, bool *ret_scalar)
{
    char got[SPEC_SHOWN_MAX + 8];
    json_t *v = json_object_get(st, "size");
    if (v == NULL) {
        return sl_spec_ferr(c, "size", "missing (required): an integer in 1..%d or [H, W]",
                            SPEC_SIZE_MAX);
    }
    sl_spec_push(c, "size");
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 1 || n > SPEC_SIZE_MAX) {
            return sl_spec_perr(c, "must be an integer in 1..%d, got %s", SPEC_SIZE_MAX,
                                sl_spec_describe(v, got, sizeof(got)));
        }
        out->size_h = out->size_w = (uint32_t)n;
        *ret_scalar = true;
        sl_spec_pop(c);
        return 0;
    }
    if (!json_is_array(v) || json_array_size(v) != 2) {
        return sl_spec_perr(c, "must be an integer in 1..%d or [H, W], got %s", SPEC_SIZE_MAX,
                            sl_spec_describe(v, got, sizeof(got)));
    }
    uint32_t hw[2];
    for (size_t i = 0; i < 2; i++) {
        json_t *e = json_array_get(v, i);
        sl_spec_push_index(c, i);
        if (!json_is_integer(e) || json_integer_value(e) < 1 ||
            json_integer_value(e) > SPEC_SIZE_MAX) {
            return sl_spec_perr(c, "must be an integer in 1..%d, got %s", SPEC_SIZE_MAX,
                                sl_spec_describe(e, got, sizeof(got)));
        }
        hw[i] = (uint32_t)json_integer_value(e);
        sl_spec_pop(c);
    }
    out->size_h = hw[0];
    out->size_w = hw[1];
    *ret_scalar = false;
    sl_spec_pop(c);
    return 0;
}

/* An array of exactly n numbers; absent keeps out as it is. */
static int get_numbers(sl_spec_pctx_t *c, json_t *st, const char *key, size_t n, const char *shape,
                       double *out)
{
    char got[SPEC_SHOWN_MAX + 8];
    json_t *v = json_object_get(st, key);
    if (v == NULL) {
        return 0;
    }
    sl_spec_push(c, key);
    if (!json_is_array(v) || json_array_size(v) != n) {
        return sl_spec_perr(c, "must be %s, an array of %zu numbers, got %s", shape, n,
                            sl_spec_describe(v, got, sizeof(got)));
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        if (!sl_spec_as_number(e, &out[i])) {
            sl_spec_push_index(c, i);
            return sl_spec_perr(c, "must be a number, got %s",
                                sl_spec_describe(e, got, sizeof(got)));
        }
    }
    sl_spec_pop(c);
    return 0;
}

static int parse_rrc(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    bool scalar;
    int rc = get_size(c, st, out, &scalar);
    if (rc < 0) {
        return rc;
    }
    memcpy(out->scale, default_scale, sizeof(out->scale));
    memcpy(out->ratio, default_ratio, sizeof(out->ratio));
    rc = get_numbers(c, st, "scale", 2, "[min, max]", out->scale);
    if (rc < 0) {
        return rc;
    }
    if (!(out->scale[0] > 0 && out->scale[0] <= out->scale[1] && out->scale[1] <= 1)) {
        char a[32], b[32];
        sl_spec_fmt_real(out->scale[0], a, sizeof(a));
        sl_spec_fmt_real(out->scale[1], b, sizeof(b));
        return sl_spec_ferr(c, "scale", "must be [min, max] with 0 < min <= max <= 1, got [%s, %s]",
                            a, b);
    }
    rc = get_numbers(c, st, "ratio", 2, "[min, max]", out->ratio);
    if (rc < 0) {
        return rc;
    }
    if (!(out->ratio[0] > 0 && out->ratio[0] <= out->ratio[1])) {
        char a[32], b[32];
        sl_spec_fmt_real(out->ratio[0], a, sizeof(a));
        sl_spec_fmt_real(out->ratio[1], b, sizeof(b));
        return sl_spec_ferr(c, "ratio", "must be [min, max] with 0 < min <= max, got [%s, %s]", a,
                            b);
    }
    return 0;
}

static int parse_flip(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    out->p = 0.5;
    json_t *v = json_object_get(st, "p");
    if (v == NULL) {
        return 0;
    }
    if (!sl_spec_as_number(v, &out->p) || out->p < 0 || out->p > 1) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_ferr(c, "p", "must be a probability in 0..1, got %s",
                            sl_spec_describe(v, got, sizeof(got)));
    }
    return 0;
}

/* mean and std are stored as float: refuse what a float cannot hold, and a
 * std that would round to 0 (a division by zero later). */
static int parse_normalize(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    double mean[3], sd[3];
    for (size_t i = 0; i < 3; i++) {
        mean[i] = default_mean[i];
        sd[i] = default_std[i];
    }
    int rc = get_numbers(c, st, "mean", 3, "[R, G, B]", mean);
    if (rc < 0) {
        return rc;
    }
    rc = get_numbers(c, st, "std", 3, "[R, G, B]", sd);
    if (rc < 0) {
        return rc;
    }
    int on = 0;
    rc = sl_spec_get_enum(c, st, "on", false, norm_on_names, 2, &on);
    if (rc < 0) {
        return rc;
    }
    out->on_device = on == 1;
    for (size_t i = 0; i < 3; i++) {
        char a[32];
        if (fabs(mean[i]) > FLT_MAX) {
            sl_spec_push(c, "mean");
            sl_spec_push_index(c, i);
            sl_spec_fmt_real(mean[i], a, sizeof(a));
            return sl_spec_perr(c, "must fit a float, got %s", a);
        }
        if (!(sd[i] > 0) || sd[i] > FLT_MAX || (float)sd[i] == 0.0f) {
            sl_spec_push(c, "std");
            sl_spec_push_index(c, i);
            sl_spec_fmt_real(sd[i], a, sizeof(a));
            return sl_spec_perr(c, "must be a number > 0 (that fits a float), got %s", a);
        }
        out->mean[i] = (float)mean[i];
        out->std[i] = (float)sd[i];
    }
    return 0;
}

/* Where the order-sensitive ops were seen so far; -1 if not yet. */
typedef struct {
    bool record; /* the source yields records (webdataset, jsonl) */
    long decode_at, normalize_at, to_chw_at, tiles_at, tokenize_at, template_at;
} order_t;

static bool is_decode(sl_op_e op) { return op == SL_OP_DECODE_JPEG || op == SL_OP_DECODE_IMAGE; }

static bool is_geometry(sl_op_e op)
{
    return op == SL_OP_RANDOM_RESIZED_CROP || op == SL_OP_RESIZE || op == SL_OP_CENTER_CROP;
}

static bool on_pixels(sl_op_e op)
{
    return is_geometry(op) || op == SL_OP_FLIP || op == SL_OP_PLUGIN || op == SL_OP_NORMALIZE ||
           op == SL_OP_TO_CHW || op == SL_OP_IMAGE_TILES || sl_op_is_augment(op);
}

/* At most once each; remembers where. */
static int once(sl_spec_pctx_t *c, long *at, size_t i, sl_op_e op)
{
    if (*at >= 0) {
        return sl_spec_perr(c, "%s appears twice (also stages[%ld])", sl_spec_op_names[op], *at);
    }
    *at = (long)i;
    return 0;
}

/* Image sources: a decode first and once. Records: the text ops and the
 * image ops are independent chains, each in order (decode before anything
 * on pixels; tokenize before template). Everywhere: geometry and the
 * augmentations on uint8 HWC, so before normalize (floats), to_chw and
 * image_tiles (tiles are final). */
static int check_order(sl_spec_pctx_t *c, size_t i, sl_op_e op, order_t *ord)
{
    sl_spec_push(c, "op");
    bool text_op = op == SL_OP_IMAGE_TILES || op == SL_OP_TOKENIZE || op == SL_OP_TEMPLATE;
    if (!ord->record) {
        if (text_op) {
            return sl_spec_perr(c, "%s needs a multimodal source (webdataset or jsonl)",
                                sl_spec_op_names[op]);
        }
        if (is_decode(op) && i != 0) {
            return sl_spec_perr(c, "%s must be the first stage, and appear only once",
                                sl_spec_op_names[op]);
        }
        if (!is_decode(op) && i == 0) {
            return sl_spec_perr(c, "the first stage must be decode_jpeg or decode_image, got %s",
                                sl_spec_op_names[op]);
        }
    }
    if (is_decode(op) && once(c, &ord->decode_at, i, op) < 0) {
        return -EINVAL;
    }
    if (on_pixels(op) && ord->decode_at < 0) {
        return sl_spec_perr(c, "%s needs decoded images: put decode_image before it",
                            sl_spec_op_names[op]);
    }
    /* Whole uint8 HWC images: geometry, augmentations, plugins (and flip
     * before tiles). */
    bool whole = is_geometry(op) || sl_op_is_augment(op) || op == SL_OP_PLUGIN;
    if (whole || op == SL_OP_FLIP) {
        const long after[3] = {ord->normalize_at, ord->to_chw_at, ord->tiles_at};
        const char *names[3] = {"normalize", "to_chw", "image_tiles"};
        for (int k = 0; k < 3; k++) {
            if (after[k] >= 0 && (whole || k == 2)) {
                return sl_spec_perr(c,
                                    "%s must come before %s (stages[%ld]): it works on whole "
                                    "uint8 HWC images",
                                    sl_spec_op_names[op], names[k], after[k]);
            }
        }
    }
    int rc = 0;
    switch (op) {
    case SL_OP_NORMALIZE:
        rc = once(c, &ord->normalize_at, i, op);
        break;
    case SL_OP_TO_CHW:
        rc = once(c, &ord->to_chw_at, i, op);
        break;
    case SL_OP_IMAGE_TILES:
        if (ord->normalize_at >= 0 || ord->to_chw_at >= 0) {
            return sl_spec_perr(c, "image_tiles must come before normalize and to_chw");
        }
        rc = once(c, &ord->tiles_at, i, op);
        break;
    case SL_OP_TOKENIZE:
        rc = once(c, &ord->tokenize_at, i, op);
        break;
    case SL_OP_TEMPLATE:
        if (ord->tokenize_at < 0) {
            return sl_spec_perr(c, "template needs the text's token ids: put tokenize before it");
        }
        rc = once(c, &ord->template_at, i, op);
        break;
    default:
        break;
    }
    if (rc < 0) {
        return rc;
    }
    sl_spec_pop(c);
    return 0;
}

/* Fields an op does not use stay zero, so a parsed spec is canonical and
 * parse(to_json(s)) compares equal field by field. */
static int parse_stage(sl_spec_pctx_t *c, json_t *st, size_t i, sl_stage_spec_t *out, order_t *ord)
{
    char got[SPEC_SHOWN_MAX + 8];
    char list[SPEC_MSG_MAX * 3 / 4]; /* every op's name */
    sl_spec_push_index(c, i);
    if (!json_is_object(st)) {
        return sl_spec_perr(c, "must be an object like {\"op\": \"decode_jpeg\"}, got %s",
                            sl_spec_describe(st, got, sizeof(got)));
    }
    sl_spec_join(sl_spec_op_names, SL_OP__COUNT, list, sizeof(list));
    json_t *opv = json_object_get(st, "op");
    if (opv == NULL) {
        return sl_spec_ferr(c, "op", "missing (required): one of %s", list);
    }
    int op = -1;
    if (json_is_string(opv)) {
        for (int k = 0; k < SL_OP__COUNT; k++) {
            if (strlen(sl_spec_op_names[k]) == json_string_length(opv) &&
                strcmp(sl_spec_op_names[k], json_string_value(opv)) == 0) {
                op = k;
                break;
            }
        }
    }
    if (op < 0) {
        return sl_spec_ferr(c, "op", "unknown op %s (valid: %s)",
                            sl_spec_describe(opv, got, sizeof(got)), list);
    }
    const char *const *keys = sl_op_is_augment((sl_op_e)op) ? sl_spec_aug_keys((sl_op_e)op)
                                                            : op_keys[op];
    int rc = sl_spec_check_keys(c, st, keys, sl_spec_op_names[op]);
    if (rc < 0) {
        return rc;
    }
    memset(out, 0, sizeof(*out));
    out->op = (sl_op_e)op;
    switch (out->op) {
    case SL_OP_RANDOM_RESIZED_CROP:
        rc = parse_rrc(c, st, out);
        break;
    case SL_OP_RESIZE:
        rc = get_size(c, st, out, &out->resize_shorter);
        break;
    case SL_OP_CENTER_CROP: {
        bool scalar;
        rc = get_size(c, st, out, &scalar);
        break;
    }
    case SL_OP_FLIP:
        rc = parse_flip(c, st, out);
        break;
    case SL_OP_NORMALIZE:
        rc = parse_normalize(c, st, out);
        break;
    case SL_OP_IMAGE_TILES:
        rc = sl_spec_parse_tiles(c, st, out);
        break;
    case SL_OP_TOKENIZE:
        rc = sl_spec_parse_tokenize(c, st, out);
        break;
    case SL_OP_TEMPLATE:
        rc = sl_spec_parse_template(c, st, out);
        break;
    case SL_OP_PLUGIN:
        rc = sl_spec_parse_plugin(c, st, out);
        break;
    default: /* decode_jpeg, decode_image, to_chw: nothing to set */
        rc = sl_op_is_augment(out->op) ? sl_spec_parse_aug(c, st, out) : 0;
        break;
    }
    if (rc < 0) {
        return rc;
    }
    rc = check_order(c, i, out->op, ord);
    if (rc < 0) {
        return rc;
    }
    sl_spec_pop(c);
    return 0;
}

int sl_spec_parse_stages(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    json_t *v = json_object_get(root, "stages");
    if (v == NULL) {
        return 0; /* no stages: raw bytes are delivered */
    }
    sl_spec_push(c, "stages");
    if (!json_is_array(v)) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_perr(c, "must be an array of stage objects, got %s",
                            sl_spec_describe(v, got, sizeof(got)));
    }
    size_t n = json_array_size(v);
    if (n > SL_SPEC_MAX_STAGES) {
        return sl_spec_perr(c, "has %zu stages, the limit is %d", n, SL_SPEC_MAX_STAGES);
    }
    order_t ord = {.record = sl_spec_is_record(spec),
                   .decode_at = -1,
                   .normalize_at = -1,
                   .to_chw_at = -1,
                   .tiles_at = -1,
                   .tokenize_at = -1,
                   .template_at = -1};
    for (size_t i = 0; i < n; i++) {
        int rc = parse_stage(c, json_array_get(v, i), i, &spec->stages[i], &ord);
        if (rc < 0) {
            return rc;
        }
    }
    spec->nstages = (uint32_t)n;
    sl_spec_pop(c);
    return 0;
}

bool sl_spec_is_record(const sl_spec_t *spec)
{
    return spec->source_type == SL_SRC_WEBDATASET || spec->source_type == SL_SRC_JSONL;
}

const char *sl_op_name(sl_op_e op)
{
    if ((int)op < 0 || op >= SL_OP__COUNT) {
        return "unknown";
    }
    return sl_spec_op_names[op];
}

bool sl_spec_device_norm(const sl_spec_t *spec, float ret_mean[3], float ret_std[3])
{
    for (uint32_t i = 0; i < spec->nstages && i < SL_SPEC_MAX_STAGES; i++) {
        const sl_stage_spec_t *st = &spec->stages[i];
        if (st->op == SL_OP_NORMALIZE && st->on_device) {
            if (ret_mean != NULL) {
                memcpy(ret_mean, st->mean, sizeof(st->mean));
            }
            if (ret_std != NULL) {
                memcpy(ret_std, st->std, sizeof(st->std));
            }
            return true;
        }
    }
    return false;
}
