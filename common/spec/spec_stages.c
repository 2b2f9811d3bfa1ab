/* spec_stages: the "stages" array of a spec: each stage through its op's
 * row (spec_impl.h), the image ops' rows (decode, geometry, flip,
 * normalize, to_chw) and the order rules the rows declare (decode_jpeg
 * first, geometry before normalize and to_chw). Called on the parsing
 * thread only (sl_spec_device_norm: any thread). */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/spec/spec_impl.h"

#define SPEC_SIZE_MAX 16384

static const double default_scale[2] = {0.08, 1.0};
static const double default_ratio[2] = {3.0 / 4.0, 4.0 / 3.0};
static const float default_mean[3] = {0.485f, 0.456f, 0.406f};
static const float default_std[3] = {0.229f, 0.224f, 0.225f};
/* normalize "on": where the normalization runs, indexed by on_device. */
static const char *const norm_on_names[2] = {"cpu", "device"};

/* "interpolation", indexed by sl_resize_interp_e. */
static const char *const resize_interp_names[3] = {[SL_RESIZE_INTERP_BILINEAR] = "bilinear",
                                                   [SL_RESIZE_INTERP_BICUBIC] = "bicubic",
                                                   [SL_RESIZE_INTERP_NEAREST] = "nearest"};

static int get_resize_interp(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    int v = SL_RESIZE_INTERP_BILINEAR;
    int rc = sl_spec_get_enum(c, st, "interpolation", false, resize_interp_names, 3, &v);
    out->resize_interp = (uint32_t)v;
    return rc;
}

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
    return get_resize_interp(c, st, out);
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

static int parse_resize(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    int rc = get_size(c, st, out, &out->resize_shorter);
    return rc < 0 ? rc : get_resize_interp(c, st, out);
}

/* "interpolation" only when not bilinear: existing specs keep their
 * canonical form (and hash). */
static const char *interp_json(const sl_stage_spec_t *st)
{
    return st->resize_interp != SL_RESIZE_INTERP_BILINEAR && st->resize_interp < 3
               ? resize_interp_names[st->resize_interp]
               : NULL;
}

static int parse_center_crop(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    bool scalar;
    return get_size(c, st, out, &scalar);
}

static json_t *rrc_json(const sl_stage_spec_t *st)
{
    return json_pack("{s:s, s:[I,I], s:[f,f], s:[f,f], s:s*}", "op", "random_resized_crop", "size",
                     (json_int_t)st->size_h, (json_int_t)st->size_w, "scale", st->scale[0],
                     st->scale[1], "ratio", st->ratio[0], st->ratio[1], "interpolation",
                     interp_json(st));
}

static json_t *resize_json(const sl_stage_spec_t *st)
{
    if (st->resize_shorter) {
        return json_pack("{s:s, s:I, s:s*}", "op", "resize", "size", (json_int_t)st->size_h,
                         "interpolation", interp_json(st));
    }
    return json_pack("{s:s, s:[I,I], s:s*}", "op", "resize", "size", (json_int_t)st->size_h,
                     (json_int_t)st->size_w, "interpolation", interp_json(st));
}

static json_t *center_crop_json(const sl_stage_spec_t *st)
{
    return json_pack("{s:s, s:[I,I]}", "op", "center_crop", "size", (json_int_t)st->size_h,
                     (json_int_t)st->size_w);
}

static json_t *flip_json(const sl_stage_spec_t *st)
{
    return json_pack("{s:s, s:f}", "op", sl_op_name(st->op), "p", st->p);
}

/* "on" only when "device": a CPU normalize keeps its canonical form (and
 * every existing spec its hash). */
static json_t *normalize_json(const sl_stage_spec_t *st)
{
    return json_pack("{s:s, s:[f,f,f], s:[f,f,f], s:s*}", "op", "normalize", "mean",
                     (double)st->mean[0], (double)st->mean[1], (double)st->mean[2], "std",
                     (double)st->std[0], (double)st->std[1], (double)st->std[2], "on",
                     st->on_device ? "device" : NULL);
}

/* Geometry and the augmentations work on whole uint8 HWC images: before
 * normalize (floats), to_chw and image_tiles (tiles are final). */
#define BEFORE_WHOLE                                                                               \
    (SL_ORD_BIT(SL_ORD_NORMALIZE) | SL_ORD_BIT(SL_ORD_TO_CHW) | SL_ORD_BIT(SL_ORD_TILES))
#define GEOMETRY_FLAGS (SL_OPF_GEOMETRY | SL_OPF_ON_PIXELS | SL_OPF_WHOLE)

static const char *const no_keys[] = {"op", NULL};
static const char *const size_keys[] = {"op", "size", NULL};

const sl_op_def_t sl_op_def_decode_jpeg = {.name = "decode_jpeg",
                                           .keys = no_keys,
                                           .flags = SL_OPF_DECODE,
                                           .slot = SL_ORD_DECODE};
const sl_op_def_t sl_op_def_decode_image = {.name = "decode_image",
                                            .keys = no_keys,
                                            .flags = SL_OPF_DECODE,
                                            .slot = SL_ORD_DECODE};
const sl_op_def_t sl_op_def_random_resized_crop =
    {.name = "random_resized_crop",
     .keys = (const char *const[]){"op", "size", "scale", "ratio", "interpolation", NULL},
     .parse = parse_rrc,
     .to_json = rrc_json,
     .flags = GEOMETRY_FLAGS | SL_OPF_RANDOM | SL_OPF_FUSES_DECODE,
     .before = BEFORE_WHOLE};
const sl_op_def_t sl_op_def_resize = {.name = "resize",
                                      .keys = (const char *const[]){"op", "size", "interpolation",
                                                                    NULL},
                                      .parse = parse_resize,
                                      .to_json = resize_json,
                                      .flags = GEOMETRY_FLAGS,
                                      .before = BEFORE_WHOLE};
const sl_op_def_t sl_op_def_center_crop = {.name = "center_crop",
                                           .keys = size_keys,
                                           .parse = parse_center_crop,
                                           .to_json = center_crop_json,
                                           .flags = GEOMETRY_FLAGS | SL_OPF_FUSES_DECODE,
                                           .before = BEFORE_WHOLE};
/* flip and vertical_flip work on tiles' source images, not on tiles. */
const sl_op_def_t sl_op_def_flip = {.name = "flip",
                                    .keys = (const char *const[]){"op", "p", NULL},
                                    .parse = parse_flip,
                                    .to_json = flip_json,
                                    .flags = SL_OPF_ON_PIXELS | SL_OPF_RANDOM,
                                    .before = SL_ORD_BIT(SL_ORD_TILES)};
/* RandomVerticalFlip: flip's twin, rows instead of columns. */
const sl_op_def_t sl_op_def_vertical_flip = {.name = "vertical_flip",
                                             .keys = (const char *const[]){"op", "p", NULL},
                                             .parse = parse_flip,
                                             .to_json = flip_json,
                                             .flags = SL_OPF_ON_PIXELS | SL_OPF_RANDOM,
                                             .before = SL_ORD_BIT(SL_ORD_TILES)};
/* "on": "device": the consumer's to apply, so no unit and nothing to
 * split at. */
static bool normalize_on_device(const sl_stage_spec_t *st) { return st->on_device; }

const sl_op_def_t sl_op_def_normalize = {.name = "normalize",
                                         .keys = (const char *const[]){"op", "mean", "std", "on",
                                                                       NULL},
                                         .parse = parse_normalize,
                                         .to_json = normalize_json,
                                         .flags = SL_OPF_ON_PIXELS,
                                         .slot = SL_ORD_NORMALIZE,
                                         .no_unit = normalize_on_device};
const sl_op_def_t sl_op_def_to_chw = {.name = "to_chw",
                                      .keys = no_keys,
                                      .flags = SL_OPF_ON_PIXELS,
                                      .slot = SL_ORD_TO_CHW};

/* Where the order-sensitive ops were seen so far; -1 if not yet. */
typedef struct {
    bool record; /* the source yields records (webdataset, jsonl) */
    long at[SL_ORD__COUNT];
    bool after_error; /* a stage failed: later ones are checked alone, their
                       * order against it would only echo its error */
} order_t;

static const char *const slot_names[SL_ORD__COUNT] = {
    [SL_ORD_DECODE] = "decode_image", [SL_ORD_NORMALIZE] = "normalize",
    [SL_ORD_TO_CHW] = "to_chw",       [SL_ORD_TILES] = "image_tiles",
    [SL_ORD_TOKENIZE] = "tokenize",   [SL_ORD_TEMPLATE] = "template",
};

/* Image sources: a decode first and once. Records: the text ops and the
 * image ops are independent chains, each in order (decode before anything
 * on pixels; tokenize before template). Everywhere: what each op's row
 * says must come before or after it, and the slotted ops once each. */
static int check_order(sl_spec_pctx_t *c, size_t i, sl_op_e op, order_t *ord)
{
    const sl_op_def_t *d = sl_spec_op_def(op);
    bool decode = (d->flags & SL_OPF_DECODE) != 0;
    sl_spec_push(c, "op");
    if (!ord->record) {
        if (d->flags & SL_OPF_RECORD) {
            /* decode_video also reads a filelist's clips (not a mix's). */
            return sl_spec_perr(c, "%s needs a multimodal source (webdataset or jsonl)%s", d->name,
                                op == SL_OP_DECODE_VIDEO ? " or a filelist outside a mix" : "");
        }
        if (decode && i != 0) {
            return sl_spec_perr(c, "%s must be the first stage, and appear only once", d->name);
        }
        if (!decode && i == 0) {
            return sl_spec_perr(c, "the first stage must be decode_jpeg or decode_image, got %s",
                                d->name);
        }
    }
    if ((d->flags & SL_OPF_ON_PIXELS) && ord->at[SL_ORD_DECODE] < 0 && !decode) {
        return sl_spec_perr(c, "%s needs decoded images: put decode_image before it", d->name);
    }
    for (int k = 0; k < SL_ORD__COUNT; k++) {
        if ((d->before & SL_ORD_BIT(k)) && ord->at[k] >= 0) {
            if (d->before_msg != NULL) {
                return sl_spec_perr(c, "%s", d->before_msg);
            }
            return sl_spec_perr(c,
                                "%s must come before %s (stages[%ld]): it works on whole "
                                "uint8 HWC images",
                                d->name, slot_names[k], ord->at[k]);
        }
    }
    if (d->needs != SL_ORD_NONE && ord->at[d->needs] < 0) {
        return sl_spec_perr(c, "%s", d->needs_msg);
    }
    if (d->slot != SL_ORD_NONE) {
        if (ord->at[d->slot] >= 0) {
            return sl_spec_perr(c, "%s appears twice (also stages[%ld])", d->name,
                                ord->at[d->slot]);
        }
        ord->at[d->slot] = (long)i;
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
    const char *names[SL_OP__COUNT];
    for (int k = 0; k < SL_OP__COUNT; k++) {
        names[k] = sl_op_name((sl_op_e)k);
    }
    sl_spec_join(names, SL_OP__COUNT, list, sizeof(list));
    json_t *opv = json_object_get(st, "op");
    if (opv == NULL) {
        return sl_spec_ferr(c, "op", "missing (required): one of %s", list);
    }
    int op = json_is_string(opv) ? sl_spec_op_find(json_string_value(opv), json_string_length(opv))
                                 : -1;
    if (op < 0) {
        return sl_spec_ferr(c, "op", "unknown op %s (valid: %s)",
                            sl_spec_describe(opv, got, sizeof(got)), list);
    }
    const sl_op_def_t *d = sl_spec_op_def((sl_op_e)op);
    int rc = sl_spec_check_keys(c, st, d->keys, d->name);
    if (rc < 0) {
        return rc;
    }
    memset(out, 0, sizeof(*out));
    out->op = (sl_op_e)op;
    rc = d->parse != NULL ? d->parse(c, st, out) : 0;
    if (rc == 0 && out->op == SL_OP_RANDOM_ERASING) {
        rc = sl_spec_check_erasing(c, &out->aug, ord->at[SL_ORD_NORMALIZE] >= 0);
    }
    if (rc < 0) {
        return rc;
    }
    rc = ord->after_error ? 0 : check_order(c, i, out->op, ord);
    if (rc < 0) {
        return rc;
    }
    sl_spec_pop(c);
    return 0;
}

/* Stage i after a normalize with "on": "device" (at norm): the pixels stay
 * uint8 until the consumer normalizes, so a random_erasing there is the
 * consumer's too (marked; its box is drawn from the stage's own stream,
 * so the client computes it from the sample's index alone), and after such
 * an erase only to_chw (layout, not where pixels are) may run here. */
static int device_tail(sl_spec_pctx_t *c, sl_spec_t *spec, size_t i, long norm, long *erase)
{
    sl_stage_spec_t *st = &spec->stages[i];
    const char *why = NULL;
    if (st->op == SL_OP_RANDOM_ERASING && sl_spec_is_record(spec)) {
        why = "in a multimodal spec";
    } else if (st->op == SL_OP_RANDOM_ERASING) {
        st->aug.erase_on_device = true;
        *erase = *erase >= 0 ? *erase : (long)i;
        return 0;
    } else if (*erase < 0 || st->op == SL_OP_TO_CHW) {
        return 0;
    }
    sl_spec_push_index(c, i);
    sl_spec_push(c, "op");
    if (why != NULL) {
        return sl_spec_perr(c,
                            "random_erasing after a normalize with \"on\": \"device\" "
                            "(stages[%ld].on) is not supported %s: put it before normalize, "
                            "or normalize with \"on\": \"cpu\"",
                            norm, why);
    }
    return sl_spec_perr(c,
                        "%s after a random_erasing the device applies (stages[%ld]) is not "
                        "supported: the consumer erases after everything Sluice does; put %s "
                        "before it",
                        sl_op_name(st->op), *erase, sl_op_name(st->op));
}

/* A filelist (not in a mix) whose stages name decode_video: its samples
 * are records (a clip or an image each, common/data/source_filelist.c). */
static bool filelist_of_clips(const sl_spec_t *spec, json_t *stages)
{
    if (spec->source_type != SL_SRC_FILELIST || spec->mix != NULL) {
        return false;
    }
    for (size_t i = 0; i < json_array_size(stages); i++) {
        const char *op = json_string_value(json_object_get(json_array_get(stages, i), "op"));
        if (op != NULL && strcmp(op, "decode_video") == 0) {
            return true;
        }
    }
    return false;
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
    order_t ord = {.record = sl_spec_is_record(spec) || filelist_of_clips(spec, v)};
    for (int k = 0; k < SL_ORD__COUNT; k++) {
        ord.at[k] = -1;
    }
    int first = 0;
    size_t depth = c->depth;
    long device_norm = -1;  /* a normalize "on": "device" seen: its index */
    long device_erase = -1; /* the first random_erasing the consumer applies */
    for (size_t i = 0; i < n; i++) {
        /* Counted before it is parsed: a failed parse's sl_spec_clear then
         * frees what the stages parsed so far own. */
        spec->nstages = (uint32_t)i + 1;
        int rc = parse_stage(c, json_array_get(v, i), i, &spec->stages[i], &ord);
        ord.after_error = ord.after_error || rc < 0;
        if (!sl_spec_resume_at(c, depth, rc, &first)) {
            return rc; /* not a spec error: stop */
        }
        const sl_stage_spec_t *st = &spec->stages[i];
        if (rc >= 0 && st->op == SL_OP_NORMALIZE && st->on_device) {
            device_norm = (long)i;
        }
        if (rc >= 0 && device_norm >= 0) {
            rc = device_tail(c, spec, i, device_norm, &device_erase);
            if (!sl_spec_resume_at(c, depth, rc, &first)) {
                return rc;
            }
        }
    }
    spec->nstages = (uint32_t)n;
    sl_spec_pop(c);
    return first;
}

bool sl_spec_is_record(const sl_spec_t *spec)
{
    if (spec->source_type == SL_SRC_FILELIST && spec->mix == NULL) {
        for (uint32_t i = 0; i < spec->nstages && i < SL_SPEC_MAX_STAGES; i++) {
            if (spec->stages[i].op == SL_OP_DECODE_VIDEO) {
                return true;
            }
        }
        return false;
    }
    return spec->source_type == SL_SRC_WEBDATASET || spec->source_type == SL_SRC_JSONL;
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
